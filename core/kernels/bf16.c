/* bf16.c - rounding float32 tensors to bfloat16 (bf16.h). */
#include "kernels/bf16.h"

#include "base/error.h"

void sr_bf16_round_n(float *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = sr_bf16_round(src[i]);
}

int sr_bf16_round_tensor(sr_tensor *out, const sr_tensor *src)
{
    if (src->dtype != SR_F32)
        return sr_fail("bf16: input %s is %s, not float32", SR_SHAPE(src), sr_dtype_name(src->dtype));
    if (sr_tensor_ensure(out, SR_F32, src->ndim, src->shape))
        return -1;
    sr_bf16_round_n(sr_f32(out), sr_f32(src), sr_numel(src));
    return 0;
}
