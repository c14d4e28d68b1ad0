/* bf16.h - float32 rounded to bfloat16 (its top 16 bits: 8 significant
 * bits, float32's exponent range), to nearest, ties to even.
 *
 * What a bf16 GEMM (AVX512-BF16 vdpbf16ps, AMX tiles, oneDNN under
 * PyTorch's autocast) does to its inputs; the product of two bf16 values
 * is exact in float32, so rounding the inputs and running the float32
 * product emulates bf16 inputs with float32 accumulation.  The profile
 * engine's emulate_bf16 (stats/profile.h) measures with it what bf16 would
 * cost r_η in accuracy (README, "Precision"). */
#ifndef SR_BF16_H
#define SR_BF16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tensor/tensor.h"

static inline float sr_bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (isnan(f))
        return f;
    /* a carry out of the mantissa steps the exponent: the next binade, or
     * Inf past the largest finite bf16, as a conversion does */
    u = (u + 0x7fffu + (u >> 16 & 1)) & 0xffff0000u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* dst = src rounded element by element (dst may be src). */
void sr_bf16_round_n(float *dst, const float *src, int64_t n);
/* out (ensured to src's shape, float32) = src rounded; src must be float32. */
int sr_bf16_round_tensor(sr_tensor *out, const sr_tensor *src);

#endif
