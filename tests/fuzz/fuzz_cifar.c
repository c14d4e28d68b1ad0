/* fuzz_cifar.c - libFuzzer target: the CIFAR-10 batch reader rejects any
 * malformed file (wrong size, bad labels) cleanly. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "io/cifar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("cifar", data, size);
    if (!path)
        return 0;
    const char *paths[1] = {path};
    sr_u8images im = SR_U8IMAGES_INIT;
    int64_t *labels = NULL, n = 0;
    if (sr_cifar_load(paths, 1, &im, &labels, &n) == 0 && n > 0) {
        sr_tensor t = SR_TENSOR_INIT;
        int64_t idx[1] = {n - 1};
        sr_u8images_gather(&t, &im, idx, 1, SR_F64);
        sr_tensor_free(&t);
    }
    sr_u8images_free(&im);
    free(labels);
    unlink(path);
    return 0;
}
