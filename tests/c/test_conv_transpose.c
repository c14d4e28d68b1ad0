/* test_conv_transpose.c - conv_transpose2d: float64 derivatives (central
 * differences, the adjoint identity, parameter gradients) on strided,
 * padded, output-padded, grouped and dilated geometries, and PyTorch's
 * F.conv_transpose2d (tests/fixtures/gen_conv_transpose.py): f32 <= 1e-5,
 * f64 <= 1e-10. */
#include <string.h>

#include "nn/layers.h"
#include "check.h"
#include "test.h"

static const torch_files files = {"tests/fixtures/conv_transpose/", 0, "jv", "p_", "g_"};

/* Mirrors CASES in gen_conv_transpose.py. */
static const torch_case cases[] = {
    {"k3s2p1op1", sr_conv_transpose2d_create, "conv_transpose2d",
     .kv = {"in_channels", "4", "out_channels", "3", "kernel_size", "3", "stride", "2", "padding", "1",
            "output_padding", "1"},
     .params = {"weight", "bias"}},
    {"k2s2", sr_conv_transpose2d_create, "conv_transpose2d",
     .kv = {"in_channels", "3", "out_channels", "5", "kernel_size", "2", "stride", "2"}, .params = {"weight", "bias"}},
    {"k4s2p1_groups", sr_conv_transpose2d_create, "conv_transpose2d",
     .kv = {"in_channels", "4", "out_channels", "6", "kernel_size", "4", "stride", "2", "padding", "1", "groups", "2",
            "bias", "false"},
     .params = {"weight"}},
    {"k3d2", sr_conv_transpose2d_create, "conv_transpose2d",
     .kv = {"in_channels", "2", "out_channels", "3", "kernel_size", "3", "dilation", "2", "padding", "1,2"},
     .params = {"weight", "bias"}},
};

#define N (sizeof cases / sizeof *cases)

TEST(conv_transpose_torch_f32) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F32, 1e-5)); }
TEST(conv_transpose_torch_f64) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F64, 1e-10)); }

TEST(conv_transpose_derivatives_f64)
{
    for (size_t i = 0; i < N; i++) {
        sr_module *m = check_make_f64(cases[i].create, cases[i].op, cases[i].kv);
        CHECK(m, "create %s: %s", cases[i].name, sr_errmsg());
        check_fill_params(m, 5 + i, 0.5);
        int64_t cin = m->params[0].value.shape[0];
        sr_tensor x = SR_TENSOR_INIT;
        CHECK_OK(check_randn(&x, 4, (int64_t[]){2, cin, 3, 4}, 11 + i));
        check_result r;
        CHECK_OK(check_module(m, &x, 3, 1e-6, 7 + i, &r));
        CHECK(r.primal == 0 && r.jvp_fd < 1e-6 && r.adjoint < 1e-10 && r.param_fd < 1e-6,
              "%s: primal %g jvp-fd %g adjoint %g param-fd %g", cases[i].name, r.primal, r.jvp_fd, r.adjoint, r.param_fd);
        sr_tensor_free(&x);
        sr_module_release(m);
    }
}

TEST(conv_transpose_bad_input_is_an_error)
{
    CHECK(!MAKE(sr_conv_transpose2d_create, "conv_transpose2d", "in_channels", "2", "out_channels", "2", "kernel_size",
                "3", "stride", "2", "output_padding", "2"),
          "output_padding 2 with stride 2");
    CHECK(strstr(sr_errmsg(), "output_padding below the stride or the dilation"), "%s", sr_errmsg());
    sr_module *m = MAKE(sr_conv_transpose2d_create, "conv_transpose2d", "in_channels", "2", "out_channels", "3",
                        "kernel_size", "3");
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){1, 3, 4, 4}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "conv_transpose2d: input (1,3,4,4) must be (N,2,H,W)");
    sr_tensor_free(&x);
    sr_module_release(m);
}
