/* fuzz_safetensors.c - libFuzzer target: any byte string given to the
 * safetensors reader must be rejected cleanly or parse into entries whose
 * data all lie inside the buffer (read every tensor to prove it). */
#include <stddef.h>
#include <stdint.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sr_st_file f;
    if (sr_st_open_memory(&f, data, size, "fuzz") != 0)
        return 0;
    for (int i = 0; i < f.n; i++) {
        sr_tensor t = SR_TENSOR_INIT;
        /* Cap the work per input: a valid header may describe big tensors. */
        if (f.entries[i].end - f.entries[i].begin <= (1u << 20))
            sr_st_read(&f, &f.entries[i], &t, i % 2 ? SR_F64 : SR_F32);
        sr_tensor_free(&t);
    }
    sr_st_close(&f);
    return 0;
}
