/* test_bf16.c - rounding to bfloat16 (kernels/bf16.h) and the layers'
 * emulation of bf16 inputs with float32 accumulation (sr_run.bf16). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/bf16.h"
#include "nn/layers.h"
#include "check.h"
#include "test.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

TEST(bf16_rounds_to_nearest_even)
{
    /* bf16 keeps 8 significant bits: at 1 the spacing is 2^-7 */
    const float h = ldexpf(1, -8);
    CHECK(sr_bf16_round(1.0f) == 1.0f, "1");
    CHECK(sr_bf16_round(1 + h) == 1.0f, "1 + half a spacing ties to the even 1: %a", sr_bf16_round(1 + h));
    CHECK(sr_bf16_round(1 + 3 * h) == 1 + 4 * h, "1 + 1.5 spacings ties to the even 1 + 2^-6: %a",
          sr_bf16_round(1 + 3 * h));
    CHECK(sr_bf16_round(1 + h + ldexpf(1, -20)) == 1 + 2 * h, "above the tie rounds up");
    CHECK(sr_bf16_round(-(1 + 3 * h)) == -(1 + 4 * h), "sign kept");
    CHECK(sr_bf16_round(0.1f) == 0.10009765625f, "0.1 -> %.12g", sr_bf16_round(0.1f));
    CHECK(isinf(sr_bf16_round(FLT_MAX)), "FLT_MAX rounds past bf16's largest to Inf");
    CHECK(isnan(sr_bf16_round(NAN)), "NaN stays NaN");
    CHECK(bits(sr_bf16_round(-0.0f)) == 0x80000000u, "-0 kept");
    float v = 3.14159265f, r = sr_bf16_round(v);
    CHECK((bits(r) & 0xffffu) == 0 && fabsf(r - v) <= ldexpf(1, -7), "pi -> %a", r);
}

/* A layer's forward under run.bf16 equals its plain forward on rounded
 * input and weights, bit for bit; without the flag it differs. */
static void rounded_like(sr_module *m, const sr_tensor *x, const char *what)
{
    sr_tensor xr = SR_TENSOR_INIT, w = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
    sr_run run = SR_RUN_INIT;
    run.bf16 = 1;
    CHECK_OK(sr_module_forward(m, x, &run));
    CHECK_OK(sr_tensor_convert(&y, &m->out, SR_F32));
    sr_tensor *wp = &m->params[0].value;
    CHECK_OK(sr_tensor_convert(&w, wp, SR_F32));
    sr_bf16_round_n(sr_f32(wp), sr_f32(wp), sr_numel(wp));
    CHECK_OK(sr_bf16_round_tensor(&xr, x));
    sr_run plain = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(m, &xr, &plain));
    CHECK(memcmp(sr_f32(&y), sr_f32(&m->out), (size_t)sr_numel(&y) * sizeof(float)) == 0,
          "%s: emulated forward is not the forward of the rounded factors", what);
    memcpy(sr_f32(wp), sr_f32(&w), (size_t)sr_numel(wp) * sizeof(float));
    CHECK_OK(sr_module_forward(m, x, &plain));
    double diff = 0;
    for (int64_t i = 0; i < sr_numel(&y); i++)
        diff = fmax(diff, fabs((double)sr_f32(&y)[i] - sr_f32(&m->out)[i]));
    CHECK(diff > 1e-4, "%s: rounding changed nothing (%g)", what, diff);
    sr_tensor_free(&xr);
    sr_tensor_free(&w);
    sr_tensor_free(&y);
}

TEST(bf16_emulation_in_conv2d_and_linear)
{
    sr_module *conv = check_reset(MAKE(sr_conv2d_create, "conv2d", "in_channels", "3", "out_channels", "5",
                                       "kernel_size", "3", "padding", "1"), 4);
    sr_module *lin = check_reset(MAKE(sr_linear_create, "linear", "in_features", "20", "out_features", "6"), 5);
    CHECK(conv && lin, "modules");
    sr_tensor x = SR_TENSOR_INIT, v = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&x, SR_F32, 4, (int64_t[]){2, 3, 6, 6}, 1));
    CHECK_OK(check_randn_dt(&v, SR_F32, 2, (int64_t[]){3, 20}, 2));
    rounded_like(conv, &x, "conv2d");
    rounded_like(lin, &v, "linear");
    sr_tensor_free(&x);
    sr_tensor_free(&v);
    sr_module_release(conv);
    sr_module_release(lin);
}
