/* fuzz_npy.c - libFuzzer target: srgeo.npy.load's reader (sr_npy_load, the
 * call the binding makes) rejects any malformed byte string with an error,
 * never crashes, never allocates what the file cannot hold (the size check
 * comes before the allocation; -rss_limit_mb catches a regression), and a
 * file it accepts has exactly the header's values (sum them to touch all). */
#include <stdint.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "io/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("npy", data, size);
    if (!path)
        return 0;
    sr_tensor t = SR_TENSOR_INIT;
    if (sr_npy_load(&t, path) == 0) {
        double s = 0;
        for (int64_t i = 0; i < sr_numel(&t); i++)
            s += sr_get_flat(&t, i);
        (void)s;
    }
    sr_tensor_free(&t);
    unlink(path);
    return 0;
}
