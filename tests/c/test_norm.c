/* test_norm.c - batchnorm2d, layernorm, normalize, groupnorm: derivatives in float64
 * (train and eval, both layernorm layouts), running-statistic updates by
 * hand, train/eval switching, thread determinism, bad input. */
#include <math.h>
#include <string.h>

#include "nn/layers.h"
#include "check.h"
#include "test.h"

/* Random parameters (not the 1/0 init, so every term is exercised); running
 * variances positive, away from 0. */
static void randomize(sr_module *m, uint64_t seed)
{
    sr_rng r;
    sr_rng_seed(&r, seed);
    for (int i = 0; i < m->nparams; i++) {
        sr_param *p = &m->params[i];
        if (strcmp(p->name, "running_var") == 0)
            sr_tensor_fill_uniform(&p->value, &r, 0.5, 2);
        else if (strcmp(p->name, "num_batches_tracked") != 0)
            sr_tensor_fill_normal(&p->value, &r, 0, 1);
    }
}

static int derivs_ok(sr_module *m, const sr_tensor *x, int k, const char *what)
{
    check_result r;
    if (check_module(m, x, k, 1e-6, 17, &r))
        return sr_fail_context("%s", what);
    if (!(r.primal < 1e-12 && r.jvp_fd < 1e-6 && r.adjoint < 1e-10 && r.param_fd < 1e-6))
        return sr_fail("%s: primal %g jvp-fd %g adjoint %g param-fd %g", what, r.primal, r.jvp_fd,
                       r.adjoint, r.param_fd);
    return 0;
}

TEST(batchnorm_params_are_torchvision_buffers)
{
    sr_module *m = MAKE(sr_batchnorm2d_create, "batchnorm2d", "num_features", "3");
    CHECK(m, "create: %s", sr_errmsg());
    const char *names[] = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
    const int trainable[] = {1, 1, 0, 0, 0};
    const double init[] = {1, 0, 0, 1, 0};
    CHECK(m->nparams == 5, "%d params", m->nparams);
    for (int i = 0; i < 5; i++) {
        sr_param *p = &m->params[i];
        CHECK(strcmp(p->name, names[i]) == 0, "param %d is %s", i, p->name);
        CHECK(p->trainable == trainable[i], "%s trainable %d", p->name, p->trainable);
        CHECK(p->value.ndim == (i < 4 ? 1 : 0), "%s ndim %d", p->name, p->value.ndim);
        CHECK(sr_numel(&p->value) == (i < 4 ? 3 : 1), "%s numel", p->name);
        for (int64_t j = 0; j < sr_numel(&p->value); j++)
            CHECK(sr_get_flat(&p->value, j) == init[i], "%s[%lld] = %g", p->name, (long long)j,
                  sr_get_flat(&p->value, j));
    }
    /* the 0-d count survives dtype conversion */
    CHECK_OK(sr_module_to_dtype(m, SR_F64));
    CHECK(m->params[4].value.ndim == 0 && sr_numel(&m->params[4].value) == 1 &&
              m->params[4].value.dtype == SR_F64, "count after to_dtype: ndim %d", m->params[4].value.ndim);
    sr_module_release(m);
}

TEST(batchnorm_derivatives_f64_eval_and_train)
{
    for (int train = 0; train < 2; train++) {
        sr_module *m = MAKE_F64(sr_batchnorm2d_create, "batchnorm2d", "num_features", "4");
        CHECK(m, "create: %s", sr_errmsg());
        randomize(m, 3);
        sr_module_set_training(m, train);
        int64_t shapes[][4] = {{3, 4, 3, 5}, {1, 4, 2, 3}, {5, 4, 1, 1}};
        for (int s = 0; s < 3; s++) {
            sr_tensor x = SR_TENSOR_INIT;
            CHECK_OK(check_randn(&x, 4, shapes[s], 10 + (uint64_t)s));
            /* shift and scale channels so batch statistics are not ~ (0, 1) */
            for (int64_t e = 0; e < sr_numel(&x); e++)
                sr_f64(&x)[e] = 1.5 * sr_f64(&x)[e] + 0.7;
            CHECK_OK(derivs_ok(m, &x, 3, train ? "train" : "eval"));
            sr_tensor_free(&x);
        }
        sr_module_release(m);
    }
}

/* Train-mode tangents are joint over the batch: perturbing one sample moves
 * every sample's output (through the batch mean and variance). */
TEST(batchnorm_train_jvp_couples_the_batch)
{
    sr_module *m = MAKE_F64(sr_batchnorm2d_create, "batchnorm2d", "num_features", "2");
    CHECK(m, "create");
    sr_module_set_training(m, 1);
    sr_tensor xv = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&xv, 4, (int64_t[]){4, 2, 2, 2}, 4)); /* n = 2, k = 1 */
    /* tangent of sample 0 is zero; of sample 1 nonzero */
    for (int e = 0; e < 8; e++)
        sr_f64(&xv)[16 + e] = 0;
    sr_run run = SR_RUN_INIT;
    run.n = 2;
    run.k = 1;
    CHECK_OK(sr_module_jvp(m, &xv, &run));
    double s0 = 0;
    for (int e = 0; e < 8; e++)
        s0 += fabs(sr_f64(&m->out)[16 + e]);
    CHECK(s0 > 1e-3, "sample 0's output did not move (%g)", s0);
    /* and a jvp left the running statistics alone */
    CHECK(sr_get_flat(&m->params[2].value, 0) == 0 && sr_get_flat(&m->params[3].value, 0) == 1 &&
              sr_get_flat(&m->params[4].value, 0) == 0, "jvp changed running stats");
    sr_tensor_free(&xv);
    sr_module_release(m);
}

TEST(batchnorm_running_stats_by_hand)
{
    /* x (2,1,1,2) = {1,2,3,4}: mean 2.5, biased var 1.25, unbiased 5/3. */
    sr_module *m = MAKE_F64(sr_batchnorm2d_create, "batchnorm2d", "num_features", "1", "momentum", "0.1");
    CHECK(m, "create");
    sr_module_set_training(m, 1);
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&x, SR_F64, 4, (int64_t[]){2, 1, 1, 2}));
    for (int i = 0; i < 4; i++)
        sr_f64(&x)[i] = i + 1;
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(m, &x, &run));
    double rm = sr_get_flat(&m->params[2].value, 0), rv = sr_get_flat(&m->params[3].value, 0);
    CHECK(fabs(rm - 0.25) < 1e-15, "running_mean %.17g", rm);
    CHECK(fabs(rv - (0.9 + 0.1 * 5.0 / 3.0)) < 1e-15, "running_var %.17g", rv);
    CHECK(sr_get_flat(&m->params[4].value, 0) == 1, "count %g", sr_get_flat(&m->params[4].value, 0));
    for (int i = 0; i < 4; i++) {
        double want = (i + 1 - 2.5) / sqrt(1.25 + 1e-5);
        CHECK(fabs(sr_f64(&m->out)[i] - want) < 1e-14, "y[%d] %.17g want %.17g", i, sr_f64(&m->out)[i], want);
    }
    CHECK_OK(sr_module_forward(m, &x, &run));
    rm = sr_get_flat(&m->params[2].value, 0);
    rv = sr_get_flat(&m->params[3].value, 0);
    CHECK(fabs(rm - (0.9 * 0.25 + 0.25)) < 1e-15, "second running_mean %.17g", rm);
    CHECK(fabs(rv - (0.9 * (0.9 + 0.5 / 3.0) + 0.5 / 3.0)) < 1e-15, "second running_var %.17g", rv);
    CHECK(sr_get_flat(&m->params[4].value, 0) == 2, "count %g", sr_get_flat(&m->params[4].value, 0));
    sr_tensor_free(&x);
    sr_module_release(m);
}

/* Several channels, random running stats and momentum: the update equals
 * naive per-channel loops. */
TEST(batchnorm_running_stats_match_naive)
{
    const int64_t N = 3, C = 5, H = 4, W = 3;
    sr_module *m = MAKE_F64(sr_batchnorm2d_create, "batchnorm2d", "num_features", "5", "momentum", "0.3");
    CHECK(m, "create");
    randomize(m, 8);
    double rm0[5], rv0[5];
    for (int c = 0; c < C; c++) {
        rm0[c] = sr_get_flat(&m->params[2].value, c);
        rv0[c] = sr_get_flat(&m->params[3].value, c);
    }
    sr_module_set_training(m, 1);
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){N, C, H, W}, 9));
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(m, &x, &run));
    for (int c = 0; c < C; c++) {
        double s = 0, q = 0, M = (double)(N * H * W);
        for (int64_t i = 0; i < N; i++)
            for (int64_t p = 0; p < H * W; p++)
                s += sr_f64(&x)[(i * C + c) * H * W + p];
        double mu = s / M;
        for (int64_t i = 0; i < N; i++)
            for (int64_t p = 0; p < H * W; p++) {
                double d = sr_f64(&x)[(i * C + c) * H * W + p] - mu;
                q += d * d;
            }
        double want_m = 0.7 * rm0[c] + 0.3 * mu, want_v = 0.7 * rv0[c] + 0.3 * q / (M - 1);
        CHECK(fabs(sr_get_flat(&m->params[2].value, c) - want_m) < 1e-14, "mean[%d]", c);
        CHECK(fabs(sr_get_flat(&m->params[3].value, c) - want_v) < 1e-14, "var[%d]", c);
        /* outputs: batch-normalised with the biased variance */
        double w = sr_get_flat(&m->params[0].value, c), b = sr_get_flat(&m->params[1].value, c);
        for (int64_t i = 0; i < N; i++)
            for (int64_t p = 0; p < H * W; p++) {
                int64_t e = (i * C + c) * H * W + p;
                double want = (sr_f64(&x)[e] - mu) / sqrt(q / M + 1e-5) * w + b;
                CHECK(fabs(sr_f64(&m->out)[e] - want) < 1e-13, "y[%lld]", (long long)e);
            }
    }
    sr_tensor_free(&x);
    sr_module_release(m);
}

/* Train-mode statistics take one sweep (sums of x − k and (x − k)², k a
 * value of the channel): on values 10⁶ ± 10⁻² the plain one-sweep
 * E[x²] − E[x]² in double would lose every digit of the variance (the
 * mean itself is good to 10⁻¹⁰ either way, hence 10⁻⁶ in y). */
TEST(batchnorm_train_statistics_of_offset_values)
{
    sr_module *m = MAKE_F64(sr_batchnorm2d_create, "batchnorm2d", "num_features", "2");
    CHECK(m, "create");
    randomize(m, 5);
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){3, 2, 4, 5}, 6));
    double *xd = sr_f64(&x);
    for (int64_t e = 0; e < 120; e++)
        xd[e] = 1e6 + 1e-2 * xd[e];
    sr_run run = SR_RUN_INIT;
    sr_module_set_training(m, 1);
    CHECK_OK(sr_module_forward(m, &x, &run));
    for (int c = 0; c < 2; c++) {
        double mu = 0, var = 0, w = sr_get_flat(&m->params[0].value, c), b = sr_get_flat(&m->params[1].value, c);
        for (int64_t i = 0; i < 3; i++)
            for (int64_t p = 0; p < 20; p++)
                mu += xd[(i * 2 + c) * 20 + p] / 60;
        for (int64_t i = 0; i < 3; i++)
            for (int64_t p = 0; p < 20; p++)
                var += (xd[(i * 2 + c) * 20 + p] - mu) * (xd[(i * 2 + c) * 20 + p] - mu) / 60;
        for (int64_t i = 0; i < 3; i++)
            for (int64_t p = 0; p < 20; p++) {
                int64_t e = (i * 2 + c) * 20 + p;
                double want = (xd[e] - mu) / sqrt(var + 1e-5) * w + b;
                CHECK(fabs(sr_f64(&m->out)[e] - want) < 1e-6, "y[%lld] %.17g, two sweeps %.17g",
                      (long long)e, sr_f64(&m->out)[e], want);
            }
    }
    sr_tensor_free(&x);
    sr_module_release(m);
}

TEST(batchnorm_train_eval_switch)
{
    sr_module *m = MAKE_F64(sr_batchnorm2d_create, "batchnorm2d", "num_features", "2");
    CHECK(m, "create");
    randomize(m, 12);
    sr_tensor x = SR_TENSOR_INIT, ytrain = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){2, 2, 3, 3}, 13));
    sr_run run = SR_RUN_INIT;
    sr_module_set_training(m, 1);
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(sr_tensor_copy(&ytrain, &m->out));
    /* eval: the running statistics (just updated) define an affine map, and
     * evaluating does not change them */
    sr_module_set_training(m, 0);
    double rm[2], rv[2], w[2], b[2];
    for (int c = 0; c < 2; c++) {
        rm[c] = sr_get_flat(&m->params[2].value, c);
        rv[c] = sr_get_flat(&m->params[3].value, c);
        w[c] = sr_get_flat(&m->params[0].value, c);
        b[c] = sr_get_flat(&m->params[1].value, c);
    }
    CHECK_OK(sr_module_forward(m, &x, &run));
    double diff = 0;
    for (int64_t e = 0; e < 36; e++) {
        int c = (int)((e / 9) % 2);
        double want = (sr_f64(&x)[e] - rm[c]) / sqrt(rv[c] + 1e-5) * w[c] + b[c];
        CHECK(fabs(sr_f64(&m->out)[e] - want) < 1e-13, "eval y[%lld]", (long long)e);
        diff += fabs(sr_f64(&m->out)[e] - sr_f64(&ytrain)[e]);
    }
    CHECK(diff > 1e-3, "eval output equals train output");
    CHECK(sr_get_flat(&m->params[2].value, 0) == rm[0] && sr_get_flat(&m->params[4].value, 0) == 1,
          "eval forward changed running stats");
    /* back to train: batch statistics again, same output as before */
    sr_module_set_training(m, 1);
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK(check_rel_diff(&m->out, &ytrain) < 1e-15, "train output changed");
    sr_tensor_free(&x);
    sr_tensor_free(&ytrain);
    sr_module_release(m);
}

/* Backward uses the mode of the forward it follows, even if the mode was
 * switched in between. */
TEST(batchnorm_backward_follows_the_saved_mode)
{
    sr_module *m = MAKE_F64(sr_batchnorm2d_create, "batchnorm2d", "num_features", "3");
    CHECK(m, "create");
    randomize(m, 21);
    sr_tensor x = SR_TENSOR_INIT, gy = SR_TENSOR_INIT, g1 = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){2, 3, 2, 2}, 22));
    CHECK_OK(check_randn(&gy, 4, (int64_t[]){2, 3, 2, 2}, 23));
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    sr_module_set_training(m, 1);
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(sr_module_backward(m, &gy, &run));
    CHECK_OK(sr_tensor_copy(&g1, &m->gin));
    CHECK_OK(sr_module_forward(m, &x, &run));
    sr_module_set_training(m, 0);
    CHECK_OK(sr_module_backward(m, &gy, &run));
    CHECK(check_rel_diff(&m->gin, &g1) < 1e-14, "backward switched statistics");
    /* the train-mode input gradient sums to zero per channel (mean removed) */
    for (int c = 0; c < 3; c++) {
        double s = 0;
        for (int i = 0; i < 2; i++)
            for (int p = 0; p < 4; p++)
                s += sr_f64(&g1)[(i * 3 + c) * 4 + p];
        CHECK(fabs(s) < 1e-12, "channel %d gradient sum %g", c, s);
    }
    sr_tensor_free(&x);
    sr_tensor_free(&gy);
    sr_tensor_free(&g1);
    sr_module_release(m);
}

TEST(batchnorm_bad_input_is_an_error)
{
    sr_module *m = MAKE(sr_batchnorm2d_create, "batchnorm2d", "num_features", "4");
    CHECK(m, "create");
    sr_tensor x = SR_TENSOR_INIT;
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){2, 4, 32}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "batchnorm2d: input (2,4,32) must be 4D (N,C,H,W)");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){2, 3, 4, 4}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "batchnorm2d: input (2,3,4,4) has 3 channels but num_features=4");
    CHECK_OK(sr_tensor_zeros(&x, SR_F64, 4, (int64_t[]){2, 4, 4, 4}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "float64 but the parameters are float32");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){1, 4, 1, 1}));
    sr_module_set_training(m, 1);
    CHECK_ERR(sr_module_forward(m, &x, &run), "more than one value per channel");
    sr_module_set_training(m, 0);
    CHECK_OK(sr_module_forward(m, &x, &run)); /* eval is fine with one value */
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){1, 4, 1, 1}));
    CHECK_ERR(sr_module_backward(m, &m->out, &run), "forward was not run with save");
    sr_tensor_free(&x);
    sr_module_release(m);
    CHECK(MAKE(sr_batchnorm2d_create, "batchnorm2d", "eps", "1e-3") == NULL, "no num_features accepted");
    CHECK(strstr(sr_errmsg(), "num_features is required"), "msg %s", sr_errmsg());
    CHECK(MAKE(sr_batchnorm2d_create, "batchnorm2d", "num_features", "0") == NULL, "0 features");
    CHECK(MAKE(sr_batchnorm2d_create, "batchnorm2d", "num_features", "2", "momentum", "2") == NULL,
          "momentum 2 accepted");
    CHECK(strstr(sr_errmsg(), "momentum must be in [0, 1]"), "msg %s", sr_errmsg());
}

TEST(layernorm_derivatives_f64_both_layouts)
{
    struct {
        const char *kv[8];
        int ndim;
        int64_t shape[4];
    } cases[] = {
        {{"normalized_shape", "5"}, 3, {2, 3, 5}},
        {{"normalized_shape", "6", "eps", "1e-6"}, 2, {3, 6}},
        {{"normalized_shape", "4", "dim", "channels"}, 4, {2, 4, 3, 3}},
        {{"normalized_shape", "3", "dim", "channels"}, 4, {1, 3, 1, 5}},
        {{"normalized_shape", "5", "affine", "false"}, 3, {2, 3, 5}},
        {{"normalized_shape", "4", "dim", "channels", "affine", "false"}, 4, {2, 4, 2, 3}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        sr_module *m = check_make_f64(sr_layernorm_create, "layernorm", cases[c].kv);
        CHECK(m, "create %zu: %s", c, sr_errmsg());
        randomize(m, 30 + c);
        sr_tensor x = SR_TENSOR_INIT;
        CHECK_OK(check_randn(&x, cases[c].ndim, cases[c].shape, 40 + c));
        for (int64_t e = 0; e < sr_numel(&x); e++)
            sr_f64(&x)[e] = 2 * sr_f64(&x)[e] - 0.5;
        char what[32];
        snprintf(what, sizeof what, "case %zu", c);
        CHECK_OK(derivs_ok(m, &x, 3, what));
        sr_tensor_free(&x);
        sr_module_release(m);
    }
}

/* dim="channels" equals permute(0,2,3,1) -> layernorm(last) -> permute back,
 * the way torchvision writes LayerNorm2d; also hand-checked per pixel. */
TEST(layernorm_channels_equals_permuted_last_dim)
{
    const int64_t N = 2, C = 6, H = 3, W = 5;
    sr_module *lc = MAKE(sr_layernorm_create, "layernorm", "normalized_shape", "6", "dim", "channels");
    sr_module *ll = MAKE(sr_layernorm_create, "layernorm", "normalized_shape", "6");
    CHECK(lc && ll, "create");
    CHECK_OK(sr_module_to_dtype(lc, SR_F64));
    CHECK_OK(sr_module_to_dtype(ll, SR_F64));
    randomize(lc, 2);
    randomize(ll, 2);
    sr_tensor x = SR_TENSOR_INIT, xp = SR_TENSOR_INIT, back = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){N, C, H, W}, 3));
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(lc, &x, &run));
    CHECK_OK(sr_permute_apply(&xp, &x, 4, (int[]){0, 2, 3, 1}));
    CHECK_OK(sr_module_forward(ll, &xp, &run));
    CHECK_OK(sr_permute_apply(&back, &ll->out, 4, (int[]){0, 3, 1, 2}));
    CHECK(check_rel_diff(&lc->out, &back) < 1e-14, "channels vs permuted: %g", check_rel_diff(&lc->out, &back));
    /* pixel (1, :, 2, 4) by hand */
    double mu = 0, q = 0;
    for (int c = 0; c < C; c++)
        mu += sr_f64(&x)[((1 * C + c) * H + 2) * W + 4] / C;
    for (int c = 0; c < C; c++) {
        double d = sr_f64(&x)[((1 * C + c) * H + 2) * W + 4] - mu;
        q += d * d / C;
    }
    for (int c = 0; c < C; c++) {
        int64_t e = ((1 * C + c) * H + 2) * W + 4;
        double want = (sr_f64(&x)[e] - mu) / sqrt(q + 1e-5) * sr_get_flat(&lc->params[0].value, c) +
                      sr_get_flat(&lc->params[1].value, c);
        CHECK(fabs(sr_f64(&lc->out)[e] - want) < 1e-13, "pixel value c=%d", c);
    }
    sr_tensor_free(&x);
    sr_tensor_free(&xp);
    sr_tensor_free(&back);
    sr_module_release(lc);
    sr_module_release(ll);
}

TEST(layernorm_bad_input_is_an_error)
{
    sr_module *m = MAKE(sr_layernorm_create, "layernorm", "normalized_shape", "6");
    sr_module *mc = MAKE(sr_layernorm_create, "layernorm", "normalized_shape", "6", "dim", "channels");
    CHECK(m && mc, "create");
    sr_tensor x = SR_TENSOR_INIT;
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){2, 4, 5}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "layernorm: input (2,4,5) must end in normalized_shape=6");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 1, (int64_t[]){6}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "layernorm: input (6) needs a batch dimension");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){2, 5, 3, 6}));
    CHECK_ERR(sr_module_forward(mc, &x, &run), "layernorm: input (2,5,3,6) must be (N,C,...) with C=normalized_shape=6");
    CHECK_ERR(sr_module_backward(mc, &x, &run), "no forward pass recorded");
    sr_tensor_free(&x);
    sr_module_release(m);
    sr_module_release(mc);
    CHECK(MAKE(sr_layernorm_create, "layernorm", "normalized_shape", "6", "dim", "rows") == NULL, "dim=rows");
    CHECK(strstr(sr_errmsg(), "dim must be \"last\" or \"channels\""), "msg %s", sr_errmsg());
    CHECK(MAKE(sr_layernorm_create, "layernorm", "eps", "1") == NULL, "no normalized_shape");
    CHECK(strstr(sr_errmsg(), "normalized_shape is required"), "msg %s", sr_errmsg());
}

TEST(normalize_values_derivatives_and_errors)
{
    sr_module *m = MAKE(sr_normalize_create, "normalize", "mean", "0.485,0.456,0.406", "std", "0.229,0.224,0.225");
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){2, 3, 2, 3}, 5));
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(m, &x, &run));
    const double mean[] = {0.485, 0.456, 0.406}, std[] = {0.229, 0.224, 0.225};
    for (int64_t e = 0; e < 36; e++) {
        int c = (int)((e / 6) % 3);
        double want = (sr_f64(&x)[e] - mean[c]) / std[c];
        CHECK(fabs(sr_f64(&m->out)[e] - want) < 1e-14 * fabs(want) + 1e-15, "y[%lld]", (long long)e);
    }
    CHECK_OK(sr_module_to_dtype(m, SR_F64)); /* no parameters: sets the dtype check_module asks for */
    CHECK_OK(derivs_ok(m, &x, 2, "normalize"));
    sr_tensor_free(&x);
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){2, 1, 4, 4}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "normalize: input (2,1,4,4) has 1 channels but mean/std have 3");
    sr_tensor_free(&x);
    sr_module_release(m);
    CHECK(MAKE(sr_normalize_create, "normalize", "mean", "0.5,0.5", "std", "0.5") == NULL, "2 vs 1");
    CHECK(strstr(sr_errmsg(), "mean has 2 values but std has 1"), "msg %s", sr_errmsg());
    CHECK(MAKE(sr_normalize_create, "normalize", "mean", "0.5", "std", "0") == NULL, "std 0");
    CHECK(strstr(sr_errmsg(), "std[1] must be positive"), "msg %s", sr_errmsg());
    CHECK(MAKE(sr_normalize_create, "normalize", "mean", "0.5") == NULL, "no std");
    CHECK(strstr(sr_errmsg(), "mean and std are required"), "msg %s", sr_errmsg());
    CHECK(MAKE(sr_normalize_create, "normalize", "mean", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17",
               "std", "1") == NULL, "17 channels");
    CHECK(strstr(sr_errmsg(), "more than 16 values"), "msg %s", sr_errmsg());
}

/* Above the OpenMP thresholds 1 and 2 threads agree bit for bit: forward,
 * stacked jvp (one primal, many tangents), input and parameter grads. */
TEST(norm_threads_agree_bitwise)
{
    sr_module *bn_t = MAKE(sr_batchnorm2d_create, "batchnorm2d", "num_features", "16");
    sr_module *mods[] = {
        MAKE(sr_batchnorm2d_create, "batchnorm2d", "num_features", "16"), bn_t,
        MAKE(sr_layernorm_create, "layernorm", "normalized_shape", "96"),
        MAKE(sr_layernorm_create, "layernorm", "normalized_shape", "16", "dim", "channels"),
        MAKE(sr_normalize_create, "normalize", "mean", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", "std",
             "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"),
    };
    int64_t shapes[][4] = {{3, 16, 29, 31}, {3, 16, 29, 31}, {3, 197, 96, 0}, {3, 16, 29, 31}, {3, 16, 29, 31}};
    int nd[] = {4, 4, 3, 4, 4};
    for (int c = 0; c < 5; c++) {
        sr_module *m = mods[c];
        CHECK(m, "create %d: %s", c, sr_errmsg());
        randomize(m, 5);
        if (m == bn_t)
            sr_module_set_training(m, 1);
        sr_tensor x = SR_TENSOR_INIT, xv = SR_TENSOR_INIT;
        sr_rng r;
        sr_rng_seed(&r, 6);
        CHECK_OK(sr_tensor_alloc(&x, SR_F32, nd[c], shapes[c]));
        sr_tensor_fill_normal(&x, &r, 0, 1);
        int64_t vs[4];
        memcpy(vs, shapes[c], sizeof vs);
        vs[0] = 1 + 4; /* one primal, four tangents */
        CHECK_OK(sr_tensor_alloc(&xv, SR_F32, nd[c], vs));
        sr_tensor_fill_normal(&xv, &r, 0, 1);
        CHECK(check_threads_agree(m, &x, NULL, &xv, 1, 4) == 0, "module %d: %s", c, sr_errmsg());
        sr_tensor_free(&x);
        sr_tensor_free(&xv);
        sr_module_release(m);
    }
}

/* groupnorm: groups of several channels, one channel (instance norm), one
 * group (layernorm over C·S), a 3-D input; with and without affine. */
TEST(groupnorm_derivatives_f64)
{
    const struct {
        const char *g, *c, *affine;
        int nd;
        int64_t shape[4];
    } cases[] = {
        {"2", "6", "true", 4, {2, 6, 3, 4}}, {"4", "4", "true", 4, {2, 4, 3, 5}}, {"1", "3", "true", 4, {2, 3, 2, 3}},
        {"2", "4", "true", 3, {3, 4, 5}},     {"3", "6", "false", 4, {2, 6, 2, 2}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sr_module *m = MAKE_F64(sr_groupnorm_create, "groupnorm", "num_groups", cases[i].g, "num_channels", cases[i].c,
                                "affine", cases[i].affine);
        CHECK(m, "create: %s", sr_errmsg());
        randomize(m, 3 + i);
        sr_tensor x = SR_TENSOR_INIT;
        CHECK_OK(check_randn(&x, cases[i].nd, cases[i].shape, 9 + i));
        CHECK_OK(derivs_ok(m, &x, 3, "groupnorm"));
        sr_tensor_free(&x);
        sr_module_release(m);
    }
}

TEST(groupnorm_threads_agree_bitwise)
{
    sr_module *m = MAKE(sr_groupnorm_create, "groupnorm", "num_groups", "4", "num_channels", "16");
    CHECK(m, "create: %s", sr_errmsg());
    randomize(m, 5);
    sr_tensor x = SR_TENSOR_INIT, xv = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&x, SR_F32, 4, (int64_t[]){3, 16, 29, 31}, 6));
    CHECK_OK(check_randn_dt(&xv, SR_F32, 4, (int64_t[]){5, 16, 29, 31}, 7));
    CHECK(check_threads_agree(m, &x, NULL, &xv, 1, 4) == 0, "%s", sr_errmsg());
    sr_tensor_free(&x);
    sr_tensor_free(&xv);
    sr_module_release(m);
}

TEST(groupnorm_bad_input_is_an_error)
{
    CHECK(!MAKE(sr_groupnorm_create, "groupnorm", "num_groups", "4", "num_channels", "6"), "6 channels in 4 groups");
    CHECK(strstr(sr_errmsg(), "num_channels 6 is not a multiple of num_groups 4"), "%s", sr_errmsg());
    sr_module *m = MAKE(sr_groupnorm_create, "groupnorm", "num_groups", "2", "num_channels", "6");
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&x, SR_F32, 4, (int64_t[]){2, 4, 3, 3}, 1));
    sr_run run = SR_RUN_INIT;
    CHECK(sr_module_forward(m, &x, &run) < 0, "4 channels for num_channels 6");
    CHECK(strstr(sr_errmsg(), "groupnorm: input (2,4,3,3) must be (N,C,...) with C=num_channels=6"), "%s",
          sr_errmsg());
    sr_tensor_free(&x);
    sr_module_release(m);
}
