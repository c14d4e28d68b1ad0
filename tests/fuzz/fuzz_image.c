/* fuzz_image.c - libFuzzer target: srgeo.image.load's loader (sr_image_load,
 * the call the binding makes, libvips underneath) rejects any malformed
 * byte string with an error and never crashes or decodes a bomb (the
 * header's pixel bound comes first; -rss_limit_mb and -timeout catch a
 * regression).  The first byte picks the options a user might give:
 * torchvision's resize + crop, native size, grey, an odd crop and resize,
 * a small max_pixels; the rest is the file. */
#include <stdint.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "io/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const sr_image_opts choices[] = {
        SR_IMAGE_OPTS_INIT, {0, 0, 0, 0, 0}, {28, 28, 0, 1, 0}, {7, 300, 33, 3, 0}, {0, 0, 64, 0, 4096},
    };
    const sr_image_opts *o = &choices[data[0] % (sizeof choices / sizeof choices[0])];
    const char *path = fuzz_file("image", data + 1, size - 1);
    if (!path)
        return 0;
    sr_tensor t = SR_TENSOR_INIT;
    if (sr_image_load(&t, path, o) == 0) {
        double s = 0;
        for (int64_t i = 0; i < sr_numel(&t); i++)
            s += sr_get_flat(&t, i);
        (void)s;
    }
    sr_tensor_free(&t);
    sr_image_info info;
    sr_image_info_read(path, &info);
    unlink(path);
    return 0;
}
