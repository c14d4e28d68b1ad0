/* test_kink.c - the directional rule at kinks and ties (kernels/kink.h):
 * every layer's one-sided tangent against the one-sided finite difference
 * (f(x + hv) − f(x)) / h in float64, on inputs built with exact ties (zeros
 * into a ReLU, constant max-pool windows, values at clip bounds), along v
 * and −v; PyTorch's subgradient rule, kept as the default, must miss it
 * there (else the input had no tie and the test could not fail); the
 * counts of ties and singular points; the fused conv -> batchnorm -> relu
 * JVP bit-identical to the unfused one under the rule. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/threads.h"
#include "nn/layers.h"
#include "check.h"
#include "test.h"

/* Tangent rows [1, 1 + 2k) of a stacked JVP of m at x (one row) along the
 * rows of V and then −V, under the rule `directional`, into *T. */
static int tangents(sr_module *m, const sr_tensor *x, const sr_tensor *V, int directional, sr_kinks *kinks,
                    int unfused, sr_tensor *T, int *nfused)
{
    int64_t k = V->shape[0], rs = sr_rowsize(V);
    sr_tensor W = SR_TENSOR_INIT, stack = SR_TENSOR_INIT;
    int64_t shape[SR_MAXDIM];
    memcpy(shape, V->shape, sizeof shape);
    shape[0] = 2 * k;
    int rc = sr_tensor_ensure(&W, SR_F64, V->ndim, shape);
    for (int64_t e = 0; rc == 0 && e < k * rs; e++) {
        sr_f64(&W)[e] = sr_f64(V)[e];
        sr_f64(&W)[k * rs + e] = -sr_f64(V)[e];
    }
    sr_run run = SR_RUN_INIT;
    run.n = 1;
    run.k = 2 * k;
    run.directional = directional;
    run.kinks = kinks;
    run.unfused = unfused;
    if (rc == 0)
        rc = sr_tensor_stack_jvp(&stack, x, &W);
    if (rc == 0)
        rc = sr_module_jvp(m, &stack, &run);
    if (rc == 0)
        rc = sr_tensor_copy(T, &m->out);
    if (nfused)
        *nfused = run.nfused;
    sr_tensor_free(&W);
    sr_tensor_free(&stack);
    return rc;
}

/* Worst relative error of tangent rows T[1..] against the one-sided
 * differences (f(x + h·w_j) − f(x)) / h, w_j = ±V rows as in tangents(). */
static int one_sided_error(sr_module *m, const sr_tensor *x, const sr_tensor *V, const sr_tensor *T, double h,
                           double *worst)
{
    int64_t k = V->shape[0], rs = sr_rowsize(V), ny = sr_rowsize(T);
    sr_tensor f0 = SR_TENSOR_INIT, xp = SR_TENSOR_INIT;
    sr_run run = SR_RUN_INIT;
    int rc = sr_module_forward(m, x, &run) || sr_tensor_copy(&f0, &m->out) || sr_tensor_copy(&xp, x);
    *worst = 0;
    for (int64_t j = 0; rc == 0 && j < 2 * k; j++) {
        double sign = j < k ? 1 : -1;
        for (int64_t e = 0; e < rs; e++)
            sr_f64(&xp)[e] = sr_f64(x)[e] + h * sign * sr_f64(V)[(j % k) * rs + e];
        sr_run r2 = SR_RUN_INIT;
        if ((rc = sr_module_forward(m, &xp, &r2)))
            break;
        double num = 0, den = 0;
        for (int64_t e = 0; e < ny; e++) {
            double fd = (sr_f64(&m->out)[e] - sr_f64(&f0)[e]) / h, t = sr_f64(T)[(1 + j) * ny + e];
            num += (t - fd) * (t - fd);
            den += fd * fd;
        }
        double err = sqrt(num) / (sqrt(den) + 1e-12);
        if (err > *worst)
            *worst = err;
    }
    sr_tensor_free(&f0);
    sr_tensor_free(&xp);
    return rc;
}

/* The rule's check for one layer: the directional tangents of x along ±V
 * within tol of the one-sided differences, the subgradient's not (worse
 * than 1e-2), ties counted; *kinks_out (may be NULL) gets the counts. */
static int check_rule(sr_module *m, const sr_tensor *x, const sr_tensor *V, double tol, const char *what,
                      sr_kinks *kinks_out)
{
    sr_tensor T = SR_TENSOR_INIT, S = SR_TENSOR_INIT;
    sr_kinks kinks = {0, 0, 0};
    double err = 0, sub = 0;
    int rc = -1;
    if (!m || sr_module_to_dtype(m, SR_F64) || tangents(m, x, V, 1, &kinks, 0, &T, NULL) ||
        tangents(m, x, V, 0, NULL, 0, &S, NULL) || one_sided_error(m, x, V, &T, 1e-7, &err) ||
        one_sided_error(m, x, V, &S, 1e-7, &sub)) {
        sr_fail_context("%s", what);
        goto done;
    }
    if (!(err < tol)) {
        sr_fail("%s: directional tangent vs one-sided difference %g (tol %g)", what, err, tol);
        goto done;
    }
    if (!(sub > 1e-2)) {
        sr_fail("%s: the subgradient agrees too (%g): the input has no tie", what, sub);
        goto done;
    }
    if (kinks.ties < 1) {
        sr_fail("%s: no ties counted", what);
        goto done;
    }
    if (kinks_out)
        *kinks_out = kinks;
    rc = 0;
done:
    sr_tensor_free(&T);
    sr_tensor_free(&S);
    return rc;
}

/* x (1, C, H, W) normal, then every third element set to `at` (the kink);
 * V: k normal directions. */
static int tie_input(sr_tensor *x, sr_tensor *V, int64_t C, int64_t H, int64_t W, int k, const double *at, int nat,
                     uint64_t seed)
{
    if (check_randn(x, 4, (int64_t[]){1, C, H, W}, seed) || check_randn(V, 4, (int64_t[]){k, C, H, W}, seed + 1))
        return -1;
    for (int64_t e = 0; e < sr_numel(x); e++) {
        double v = 2 * sr_f64(x)[e];
        /* away from every kink by >= 0.25, so h = 1e-7 crosses none */
        for (int a = 0; a < nat; a++)
            if (fabs(v - at[a]) < 0.25)
                v = v >= at[a] ? at[a] + 0.25 : at[a] - 0.25;
        sr_f64(x)[e] = e % 3 == 0 ? at[(e / 3) % nat] : v;
    }
    return 0;
}

static sr_module *layer(const char *name, const char *const *kv) { return check_layer(name, kv); }
#define LAYER(name, ...) layer(name, (const char *[]){__VA_ARGS__, NULL})

TEST(kink_pointwise_rules_one_sided)
{
    static const double zero[] = {0}, clip6[] = {0, 6}, hsig[] = {-2, 2}, hswish[] = {-3, 3}, half[] = {0.5};
    struct {
        const char *name;
        sr_module *m;
        const double *at;
        int nat;
    } cases[] = {
        {"relu", LAYER("relu", NULL), zero, 1},
        {"clip 0..6 (relu6)", LAYER("clip", "min", "0", "max", "6"), clip6, 2},
        {"hardsigmoid", LAYER("hardsigmoid", "alpha", "0.25", "beta", "0.5"), hsig, 2},
        {"hardswish", LAYER("hardswish", NULL), hswish, 2},
        {"leaky_relu", LAYER("leaky_relu", "negative_slope", "0.1"), zero, 1},
        {"elu", LAYER("elu", "alpha", "0.5"), zero, 1},
        {"abs", LAYER("abs", NULL), zero, 1},
        {"max with a constant", LAYER("max", "value", "0.5"), half, 1},
        {"min with a constant", LAYER("min", "value", "0.5"), half, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        sr_tensor x = SR_TENSOR_INIT, V = SR_TENSOR_INIT;
        CHECK(cases[c].m, "create %s: %s", cases[c].name, sr_errmsg());
        CHECK_OK(tie_input(&x, &V, 2, 3, 4, 3, cases[c].at, cases[c].nat, 70 + c));
        /* hardswish and elu are curved beside the kink: O(h) differences */
        CHECK_OK(check_rule(cases[c].m, &x, &V, 1e-5, cases[c].name, NULL));
        sr_tensor_free(&x);
        sr_tensor_free(&V);
        sr_module_release(cases[c].m);
    }
}

TEST(kink_max_pool_and_reduce_ties_one_sided)
{
    struct {
        const char *name;
        sr_module *m;
    } cases[] = {
        {"maxpool2d k2", LAYER("maxpool2d", "kernel_size", "2")},
        {"maxpool2d k3 s2 p1", LAYER("maxpool2d", "kernel_size", "3", "stride", "2", "padding", "1")},
        {"reduce max", LAYER("reduce", "dims", "2,3", "op", "max")},
        {"reduce min over dim 3", LAYER("reduce", "dims", "3", "op", "min")},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        CHECK(cases[c].m, "create %s: %s", cases[c].name, sr_errmsg());
        sr_tensor x = SR_TENSOR_INIT, V = SR_TENSOR_INIT;
        CHECK_OK(check_randn(&x, 4, (int64_t[]){1, 2, 6, 6}, 90 + c));
        CHECK_OK(check_randn(&V, 4, (int64_t[]){3, 2, 6, 6}, 91 + c));
        /* a flat region (rows 0..2 at 1.5 in plane 0, -1.5 in plane 1) and
         * tied extremes of 2.5 / -2.5 in rows 4..5; the rest random, within ±1 */
        for (int64_t p = 0; p < 2; p++)
            for (int64_t h = 0; h < 6; h++)
                for (int64_t w = 0; w < 6; w++) {
                    double *v = &sr_f64(&x)[(p * 6 + h) * 6 + w];
                    *v = tanh(*v);
                    if (h < 3)
                        *v = p ? -1.5 : 1.5;
                    else if (h >= 4 && w % 2 == 0)
                        *v = (w / 2) % 2 ? -2.5 : 2.5;
                }
        CHECK_OK(check_rule(cases[c].m, &x, &V, 1e-6, cases[c].name, NULL));
        sr_tensor_free(&x);
        sr_tensor_free(&V);
        sr_module_release(cases[c].m);
    }
}

/* Values that tie within rounding, not exactly: the rule treats maxima
 * within SR_TIE_ULPS epsilons of the plane's scale as tied, and counts
 * them as near. */
TEST(kink_near_ties_within_tolerance)
{
    sr_module *m = LAYER("maxpool2d", "kernel_size", "2");
    CHECK(m && sr_module_to_dtype(m, SR_F32) == 0, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, V = SR_TENSOR_INIT, T = SR_TENSOR_INIT, Vd = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){1, 1, 2, 4}));
    CHECK_OK(sr_tensor_zeros(&Vd, SR_F32, 4, (int64_t[]){1, 1, 2, 4}));
    float *xv = sr_data(&x), *vv = sr_data(&Vd);
    /* window 0: 1 and 1 + 2 ulps (tied); window 1: 1 and 1 + 4096 ulps (not) */
    float a = 1.0f, b = nextafterf(nextafterf(1.0f, 2.0f), 2.0f), c = 1.0f + 4096 * 1.1920929e-07f;
    xv[0] = b, xv[1] = a, xv[4] = a, xv[5] = a;
    xv[2] = c, xv[3] = a, xv[6] = a, xv[7] = a;
    for (int e = 0; e < 8; e++)
        vv[e] = e % 4 == 1 ? 1.0f : -1.0f; /* the non-maximum's tangent is the largest */
    sr_kinks kinks = {0, 0, 0};
    sr_run run = SR_RUN_INIT;
    run.n = 1, run.k = 1, run.directional = 1, run.kinks = &kinks;
    CHECK_OK(sr_tensor_stack_jvp(&T, &x, &Vd));
    CHECK_OK(sr_module_jvp(m, &T, &run));
    const float *y = sr_data(&m->out);
    CHECK(y[2] == 1.0f, "near tie: tangent %g, expected the tied value's 1", y[2]);
    CHECK(y[3] == -1.0f, "no tie: tangent %g, expected the maximum's -1", y[3]);
    CHECK(kinks.ties == 1 && kinks.near == 1, "counts: ties %lld near %lld", (long long)kinks.ties,
          (long long)kinks.near);
    sr_tensor_free(&x);
    sr_tensor_free(&V);
    sr_tensor_free(&T);
    sr_tensor_free(&Vd);
    sr_module_release(m);
}

TEST(kink_singular_points_are_counted)
{
    sr_module *m = LAYER("sqrt", NULL);
    CHECK(m && sr_module_to_dtype(m, SR_F64) == 0, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, V = SR_TENSOR_INIT, T = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 2, (int64_t[]){1, 6}, 5));
    CHECK_OK(check_randn(&V, 2, (int64_t[]){2, 6}, 6));
    for (int e = 0; e < 6; e++)
        sr_f64(&x)[e] = e < 2 ? 0 : 1 + fabs(sr_f64(&x)[e]);
    sr_kinks kinks = {0, 0, 0};
    CHECK_OK(tangents(m, &x, &V, 1, &kinks, 0, &T, NULL));
    CHECK(kinks.singular == 2 && kinks.ties == 0, "sqrt at 0: singular %lld ties %lld", (long long)kinks.singular,
          (long long)kinks.ties);
    sr_tensor_free(&x);
    sr_tensor_free(&V);
    sr_tensor_free(&T);
    sr_module_release(m);
}

/* conv -> batchnorm -> relu runs fused (the map's ReLU deferred past the
 * tangents): on zeros from a zero region its tangents are the rule's,
 * against the one-sided difference, and bit for bit the unfused pass's. */
TEST(kink_fused_conv_bn_relu_directional)
{
    sr_module *parts[] = {LAYER("conv2d", "in_channels", "2", "out_channels", "3", "kernel_size", "3", "padding", "1",
                                "bias", "false"),
                          LAYER("batchnorm2d", "num_features", "3"), LAYER("relu", NULL)};
    sr_module *m = check_sequential(parts, 3, 11, SR_F64);
    CHECK(m, "build: %s", sr_errmsg());
    sr_module_set_training(m, 0);
    /* batchnorm at init: mean 0, shift 0, so a zero region stays exactly 0 */
    sr_tensor x = SR_TENSOR_INIT, V = SR_TENSOR_INIT, T = SR_TENSOR_INIT, U = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){1, 2, 8, 8}, 12));
    CHECK_OK(check_randn(&V, 4, (int64_t[]){3, 2, 8, 8}, 13));
    for (int64_t e = 0; e < sr_numel(&x); e++)
        if ((e % 8) < 5)
            sr_f64(&x)[e] = 0;
    sr_kinks kinks = {0, 0, 0};
    CHECK_OK(check_rule(m, &x, &V, 1e-6, "conv-bn-relu fused", &kinks));
    CHECK(kinks.ties >= 3 * 8 * 3, "ties %lld", (long long)kinks.ties);
    int fused = 0, unfused = 0;
    CHECK_OK(tangents(m, &x, &V, 1, NULL, 0, &T, &fused));
    CHECK_OK(tangents(m, &x, &V, 1, NULL, 1, &U, &unfused));
    CHECK(fused == 1 && unfused == 0, "fused groups: %d and %d", fused, unfused);
    CHECK(memcmp(sr_data(&T), sr_data(&U), (size_t)sr_numel(&T) * sizeof(double)) == 0,
          "fused and unfused directional JVPs differ");
    sr_tensor_free(&x);
    sr_tensor_free(&V);
    sr_tensor_free(&T);
    sr_tensor_free(&U);
    sr_module_release(m);
}

/* The rule's counts and tangents do not depend on the thread count: its
 * layers, on a batch big enough to split, on an image with flat regions.
 * (No convolution: its thread split may round differently.) */
TEST(kink_directional_threads_agree)
{
    sr_module *parts[] = {LAYER("relu", NULL), LAYER("maxpool2d", "kernel_size", "3", "stride", "2", "padding", "1"),
                          LAYER("clip", "min", "0", "max", "0.5"), LAYER("reduce", "dims", "3", "op", "max")};
    sr_module *m = check_sequential(parts, 4, 21, SR_F32);
    CHECK(m, "build: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, V = SR_TENSOR_INIT, T[2] = {SR_TENSOR_INIT, SR_TENSOR_INIT}, S = SR_TENSOR_INIT;
    CHECK_OK(check_randu_dt(&x, SR_F32, 4, (int64_t[]){1, 3, 64, 64}, -1, 1, 22));
    CHECK_OK(check_randn_dt(&V, SR_F32, 4, (int64_t[]){8, 3, 64, 64}, 23));
    float *xv = sr_data(&x);
    for (int64_t e = 0; e < sr_numel(&x); e++)
        if ((e % 64) < 40)
            xv[e] = (e / 4096) % 2 ? 0.5f : 0.0f; /* flat: zeros (kinks) and a constant (ties, clip bound) */
    sr_kinks kinks[2] = {{0, 0, 0}, {0, 0, 0}};
    int before = sr_threads_get();
    for (int t = 0; t < 2; t++) {
        sr_threads_set(t + 1);
        sr_run run = SR_RUN_INIT;
        run.n = 1, run.k = 8, run.directional = 1, run.kinks = &kinks[t];
        CHECK_OK(sr_tensor_stack_jvp(&S, &x, &V));
        CHECK_OK(sr_module_jvp(m, &S, &run));
        CHECK_OK(sr_tensor_copy(&T[t], &m->out));
    }
    sr_threads_set(before);
    CHECK(kinks[0].ties > 0 && kinks[0].ties == kinks[1].ties && kinks[0].near == kinks[1].near,
          "ties %lld / %lld, near %lld / %lld", (long long)kinks[0].ties, (long long)kinks[1].ties,
          (long long)kinks[0].near, (long long)kinks[1].near);
    CHECK(memcmp(sr_data(&T[0]), sr_data(&T[1]), (size_t)sr_numel(&T[0]) * sizeof(float)) == 0,
          "the directional JVP differs between 1 and 2 threads");
    sr_tensor_free(&x);
    sr_tensor_free(&V);
    sr_tensor_free(&S);
    sr_tensor_free(&T[0]);
    sr_tensor_free(&T[1]);
    sr_module_release(m);
}
