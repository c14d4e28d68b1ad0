/* test_linear.c - linear layer: naive vs GEMM, derivatives, bad input. */
#include <string.h>

#include "nn/layers.h"
#include "check.h"
#include "test.h"

static sr_module *make_linear(const char *in, const char *out, const char *bias)
{
    return check_reset(MAKE(sr_linear_create, "linear", "in_features", in, "out_features", out, "bias", bias), 7);
}

TEST(linear_derivatives_f64)
{
    const char *bias[] = {"true", "false"};
    for (int b = 0; b < 2; b++) {
        sr_module *m = make_linear("5", "3", bias[b]);
        CHECK(m, "create: %s", sr_errmsg());
        CHECK_OK(sr_module_to_dtype(m, SR_F64));
        sr_tensor x = SR_TENSOR_INIT;
        CHECK_OK(check_randn(&x, 3, (int64_t[]){2, 4, 5}, 1));
        check_result r;
        CHECK_OK(check_module(m, &x, 3, 1e-6, 11, &r));
        CHECK(r.primal < 1e-12, "primal %g", r.primal);
        CHECK(r.jvp_fd < 1e-6, "jvp vs fd %g", r.jvp_fd);
        CHECK(r.adjoint < 1e-10, "adjoint %g", r.adjoint);
        CHECK(r.param_fd < 1e-6, "param fd %g", r.param_fd);
        sr_tensor_free(&x);
        sr_module_release(m);
    }
}

TEST(linear_gemm_matches_naive_odd_shapes)
{
    int64_t shapes[][3] = {{1, 1, 1}, {1, 7, 3}, {13, 5, 1}, {3, 33, 17}};
    for (int s = 0; s < 4; s++) {
        sr_tensor x = SR_TENSOR_INIT, w = SR_TENSOR_INIT, b = SR_TENSOR_INIT, y1 = SR_TENSOR_INIT,
                  y2 = SR_TENSOR_INIT;
        int64_t rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        sr_rng r;
        sr_rng_seed(&r, (uint64_t)s);
        CHECK_OK(sr_tensor_alloc(&x, SR_F32, 2, (int64_t[]){rows, in}));
        CHECK_OK(sr_tensor_alloc(&w, SR_F32, 2, (int64_t[]){out, in}));
        CHECK_OK(sr_tensor_alloc(&b, SR_F32, 1, (int64_t[]){out}));
        sr_tensor_fill_normal(&x, &r, 0, 1);
        sr_tensor_fill_normal(&w, &r, 0, 1);
        sr_tensor_fill_normal(&b, &r, 0, 1);
        CHECK_OK(sr_tensor_alloc(&y1, SR_F32, 2, (int64_t[]){rows, out}));
        CHECK_OK(sr_tensor_alloc(&y2, SR_F32, 2, (int64_t[]){rows, out}));
        sr_linear_apply(&x, &w, &b, &y1, rows, 0);
        sr_linear_apply(&x, &w, &b, &y2, rows, 1);
        double e = check_rel_diff(&y1, &y2);
        CHECK(e < 1e-5, "shape %d: rel %g", s, e);
        /* bias on the first half of the rows only (a stacked jvp's primal
         * block): the rest equal the naive product without bias */
        int64_t half = rows / 2;
        sr_linear_apply(&x, &w, &b, &y1, half, 0);
        for (int64_t i = 0; i < rows * out; i++)
            if (i >= half * out)
                sr_f32(&y2)[i] -= sr_f32(&b)[i % out];
        e = check_rel_diff(&y1, &y2);
        CHECK(e < 1e-5, "shape %d, bias on %lld of %lld rows: rel %g", s, (long long)half, (long long)rows, e);
        sr_tensor *all[] = {&x, &w, &b, &y1, &y2};
        for (int i = 0; i < 5; i++)
            sr_tensor_free(all[i]);
    }
}

TEST(linear_bad_input_is_an_error)
{
    sr_module *m = make_linear("5", "3", "true");
    CHECK(m, "create");
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 2, (int64_t[]){2, 4}));
    sr_run run = SR_RUN_INIT;
    CHECK_ERR(sr_module_forward(m, &x, &run), "linear: input (2,4) must end in in_features=5");
    sr_tensor_free(&x);
    CHECK_OK(sr_tensor_zeros(&x, SR_F64, 2, (int64_t[]){2, 5}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "float64 but the parameters are float32");
    sr_tensor_free(&x);
    sr_module_release(m);
    sr_opts o;
    sr_opts_kv_data d;
    const char *kv[] = {"in_features", "5", NULL};
    sr_opts_kv(&o, &d, "linear", kv);
    CHECK(sr_linear_create(&o) == NULL, "missing out_features accepted");
    CHECK(strstr(sr_errmsg(), "out_features is required"), "msg: %s", sr_errmsg());
}
