/* fuzz_idx.c - libFuzzer target: the IDX image and label readers (plain
 * and gzip) must reject any malformed byte string with an error, never
 * crash or read past the data.  The readers take paths, so each input goes
 * through a file in /dev/shm (tmpfs: no disk traffic). */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "io/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("idx", data, size);
    if (!path)
        return 0;
    sr_u8images im = SR_U8IMAGES_INIT;
    if (sr_idx_load_images(path, &im) == 0 && im.n > 0) {
        sr_tensor t = SR_TENSOR_INIT;
        int64_t idx[2] = {0, im.n - 1};
        sr_u8images_gather(&t, &im, idx, 2, SR_F32);
        sr_tensor_free(&t);
    }
    sr_u8images_free(&im);
    int64_t *labels = NULL, n = 0;
    if (sr_idx_load_labels(path, &labels, &n) == 0 && n > 0)
        (void)labels[n - 1];
    free(labels);
    unlink(path);
    return 0;
}
