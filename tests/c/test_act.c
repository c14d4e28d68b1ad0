/* test_act.c - relu, gelu (erf and tanh forms), softmax: derivatives in
 * float64, known values, PyTorch's conventions at the edges (relu'(0) = 0,
 * NaN propagation), thread determinism, bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "check.h"
#include "test.h"

static int derivs_ok(sr_module *m, const sr_tensor *x, int k, const char *what)
{
    check_result r;
    if (sr_module_to_dtype(m, SR_F64) || check_module(m, x, k, 1e-6, 23, &r))
        return sr_fail_context("%s", what);
    if (!(r.primal < 1e-12 && r.jvp_fd < 1e-6 && r.adjoint < 1e-10))
        return sr_fail("%s: primal %g jvp-fd %g adjoint %g", what, r.primal, r.jvp_fd, r.adjoint);
    return 0;
}

TEST(act_derivatives_f64)
{
    struct {
        sr_module *m;
        const char *what;
        int ndim;
        int64_t shape[4];
        int away_from_zero;
    } cases[] = {
        {MAKE(sr_relu_create, "relu", NULL), "relu", 4, {2, 3, 4, 5}, 1},
        {MAKE(sr_gelu_create, "gelu", NULL), "gelu erf", 3, {2, 5, 7}, 0},
        {MAKE(sr_gelu_create, "gelu", "approximate", "tanh"), "gelu tanh", 3, {2, 5, 7}, 0},
        {MAKE(sr_softmax_create, "softmax", NULL), "softmax 3d", 3, {2, 3, 6}, 0},
        {MAKE(sr_softmax_create, "softmax", NULL), "softmax 2d", 2, {3, 9}, 0},
        {MAKE(sr_softmax_create, "softmax", NULL), "softmax L=1", 3, {2, 4, 1}, 0},
        {MAKE(sr_softmax_create, "softmax", "log", "true"), "log_softmax 3d", 3, {2, 3, 6}, 0},
        {MAKE(sr_softmax_create, "softmax", "dim", "1", "log", "true"), "log_softmax strided", 4, {2, 3, 4, 2}, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        CHECK(cases[c].m, "create %s: %s", cases[c].what, sr_errmsg());
        sr_tensor x = SR_TENSOR_INIT;
        CHECK_OK(check_randn(&x, cases[c].ndim, cases[c].shape, 50 + c));
        for (int64_t e = 0; e < sr_numel(&x); e++) {
            double v = 2 * sr_f64(&x)[e];
            /* relu: |x| >= 0.25 so no central difference straddles the kink */
            if (cases[c].away_from_zero)
                v = v >= 0 ? v + 0.25 : v - 0.25;
            sr_f64(&x)[e] = v;
        }
        CHECK_OK(derivs_ok(cases[c].m, &x, 3, cases[c].what));
        sr_tensor_free(&x);
        sr_module_release(cases[c].m);
    }
}

TEST(gelu_known_values)
{
    sr_module *ge = MAKE(sr_gelu_create, "gelu", NULL), *gt = MAKE(sr_gelu_create, "gelu", "approximate", "tanh");
    CHECK(ge && gt, "create");
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&x, SR_F64, 2, (int64_t[]){1, 4}));
    const double xs[] = {1, -0.5, 0, 8};
    /* x·Φ(x) and the tanh form, from Python's math.erf / math.tanh */
    const double we[] = {0.8413447460685429, -0.15426876936299344, 0, 7.999999999999995};
    const double wt[] = {0.8411919906082768, -0.15428599017485606, 0, 8};
    memcpy(sr_f64(&x), xs, sizeof xs);
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(ge, &x, &run));
    for (int i = 0; i < 4; i++)
        CHECK(fabs(sr_f64(&ge->out)[i] - we[i]) < 1e-15, "erf gelu(%g) = %.17g", xs[i], sr_f64(&ge->out)[i]);
    CHECK_OK(sr_module_forward(gt, &x, &run));
    for (int i = 0; i < 4; i++)
        CHECK(fabs(sr_f64(&gt->out)[i] - wt[i]) < 1e-15, "tanh gelu(%g) = %.17g", xs[i], sr_f64(&gt->out)[i]);
    sr_tensor_free(&x);
    sr_module_release(ge);
    sr_module_release(gt);
}

/* At exactly 0 the ReLU derivative is 0 (PyTorch), in jvp and backward; a
 * NaN input stays NaN so check_finite can catch it. */
TEST(relu_kink_and_nan_conventions)
{
    sr_module *m = MAKE(sr_relu_create, "relu", NULL);
    CHECK(m, "create");
    sr_tensor xv = SR_TENSOR_INIT, gy = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&xv, SR_F32, 2, (int64_t[]){3, 4})); /* n = 1, k = 2 */
    const float x[] = {0, -1, 2, NAN}, v[] = {1, 1, 1, 1, 3, 3, 3, 3};
    memcpy(sr_f32(&xv), x, sizeof x);
    memcpy(sr_f32(&xv) + 4, v, sizeof v);
    sr_run run = SR_RUN_INIT;
    run.n = 1;
    run.k = 2;
    CHECK_OK(sr_module_jvp(m, &xv, &run));
    const float *y = sr_f32(&m->out);
    CHECK(y[0] == 0 && y[1] == 0 && y[2] == 2 && isnan(y[3]), "primal %g %g %g %g", y[0], y[1], y[2], y[3]);
    CHECK(y[4] == 0 && y[5] == 0 && y[6] == 1 && y[8] == 0 && y[10] == 3, "tangents %g %g %g / %g %g",
          y[4], y[5], y[6], y[8], y[10]);
    sr_tensor in = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_narrow(&in, &xv, 0, 1));
    run = (sr_run)SR_RUN_INIT;
    run.save = 1;
    CHECK_OK(sr_module_forward(m, &in, &run));
    CHECK_OK(sr_tensor_alloc(&gy, SR_F32, 2, (int64_t[]){1, 4}));
    sr_tensor_fill(&gy, 5);
    CHECK_OK(sr_module_backward(m, &gy, &run));
    const float *g = sr_f32(&m->gin);
    CHECK(g[0] == 0 && g[1] == 0 && g[2] == 5, "grads %g %g %g", g[0], g[1], g[2]);
    CHECK_ERR(sr_module_backward(m, &gy, &run), "relu backward: forward was not run with save");
    /* run.record_relu: the (stacked) input stays in m->saved for metrics.c */
    run = (sr_run)SR_RUN_INIT;
    run.n = 1;
    run.k = 2;
    run.record_relu = 1;
    CHECK_OK(sr_module_jvp(m, &xv, &run));
    CHECK(m->saved.storage == xv.storage && m->saved.shape[0] == 3, "jvp did not record its input");
    sr_tensor_free(&m->saved);
    sr_tensor_free(&in);
    sr_tensor_free(&xv);
    sr_tensor_free(&gy);
    sr_module_release(m);
}

/* Rows sum to one, large logits do not overflow (max subtracted), and many
 * tangents of one primal each get s ⊙ (v − ⟨s, v⟩). */
TEST(softmax_rows_and_tangents)
{
    sr_module *m = MAKE(sr_softmax_create, "softmax", NULL);
    CHECK(m, "create");
    const int64_t n = 1, k = 5, T = 3, L = 7;
    sr_tensor xv = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&xv, 3, (int64_t[]){n * (1 + k), T, L}, 8));
    for (int64_t e = 0; e < T * L; e++)
        sr_f64(&xv)[e] = 1000 + 3 * sr_f64(&xv)[e];
    sr_run run = SR_RUN_INIT;
    run.n = n;
    run.k = k;
    CHECK_OK(sr_module_jvp(m, &xv, &run));
    const double *y = sr_f64(&m->out);
    for (int64_t t = 0; t < T; t++) {
        double s = 0;
        for (int64_t l = 0; l < L; l++) {
            CHECK(isfinite(y[t * L + l]) && y[t * L + l] >= 0, "row %lld not finite", (long long)t);
            s += y[t * L + l];
        }
        CHECK(fabs(s - 1) < 1e-14, "row %lld sums to %.17g", (long long)t, s);
        for (int64_t j = 0; j < k; j++) {
            const double *v = sr_f64(&xv) + ((n + j) * T + t) * L, *jv = y + ((n + j) * T + t) * L;
            double dot = 0;
            for (int64_t l = 0; l < L; l++)
                dot += y[t * L + l] * v[l];
            for (int64_t l = 0; l < L; l++)
                CHECK(fabs(jv[l] - y[t * L + l] * (v[l] - dot)) < 1e-15, "tangent %lld row %lld", (long long)j,
                      (long long)t);
        }
    }
    sr_tensor_free(&xv);
    sr_module_release(m);
}

TEST(act_bad_input_is_an_error)
{
    CHECK(MAKE(sr_gelu_create, "gelu", "approximate", "exact") == NULL, "approximate=exact accepted");
    CHECK(strstr(sr_errmsg(), "gelu: option approximate must be \"none\" or \"tanh\" (got \"exact\")"), "msg %s",
          sr_errmsg());
    sr_module *m = MAKE(sr_softmax_create, "softmax", NULL), *g = MAKE(sr_gelu_create, "gelu", NULL);
    CHECK(m && g, "create");
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 1, (int64_t[]){5}));
    sr_run run = SR_RUN_INIT;
    CHECK_ERR(sr_module_forward(m, &x, &run), "softmax: input (5) needs a batch dimension");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 2, (int64_t[]){2, 5}));
    CHECK_OK(sr_module_forward(g, &x, &run));
    CHECK_ERR(sr_module_backward(g, &g->out, &run), "gelu backward: forward was not run with save");
    run.n = 2;
    run.k = 2;
    CHECK_ERR(sr_module_jvp(g, &x, &run), "does not hold 2 primal rows plus 2 tangents");
    sr_tensor_free(&x);
    sr_module_release(m);
    sr_module_release(g);
}

/* Above the OpenMP thresholds 1 and 2 threads agree bit for bit, including
 * the chunked tangent loops with one primal and many tangents. */
TEST(act_threads_agree_bitwise)
{
    sr_module *mods[] = {MAKE(sr_relu_create, "relu", NULL), MAKE(sr_gelu_create, "gelu", NULL),
                         MAKE(sr_gelu_create, "gelu", "approximate", "tanh"),
                         MAKE(sr_softmax_create, "softmax", NULL)};
    for (int c = 0; c < 4; c++) {
        sr_module *m = mods[c];
        CHECK(m, "create %d", c);
        sr_tensor x = SR_TENSOR_INIT, xv = SR_TENSOR_INIT;
        sr_rng r;
        sr_rng_seed(&r, 9);
        CHECK_OK(sr_tensor_alloc(&x, SR_F32, 3, (int64_t[]){3, 197, 201}));
        sr_tensor_fill_normal(&x, &r, 0, 2);
        CHECK_OK(sr_tensor_alloc(&xv, SR_F32, 3, (int64_t[]){1 + 6, 197, 201}));
        sr_tensor_fill_normal(&xv, &r, 0, 2);
        CHECK(check_threads_agree(m, &x, NULL, &xv, 1, 6) == 0, "module %d: %s", c, sr_errmsg());
        sr_tensor_free(&x);
        sr_tensor_free(&xv);
        sr_module_release(m);
    }
}

/* Float32 GELU and softmax use inline exp / erfc approximations (act.c);
 * on a dense grid they agree with the float64 (libm) path to a few float32
 * ulps.  The bound is relative to each value times (1 + x²): in the lower
 * tail Φ(x) has relative condition number ~x², so the float32 rounding of
 * x/√2 alone costs that much in any float32 implementation; the derivative
 * Φ + xφ crosses zero, so its error is taken relative to Φ + |x|φ.  Worst
 * normalised errors are printed with SRGEO_TEST_VERBOSE. */
TEST(act_float32_transcendentals_match_float64)
{
    const int64_t n = 112001; /* x in [-14, 14] step 2.5e-4: past GELU_XMAX = 12.9, where Φ leaves float */
    sr_tensor x32 = SR_TENSOR_INIT, x64 = SR_TENSOR_INIT, y32 = SR_TENSOR_INIT, g32 = SR_TENSOR_INIT,
              one32 = SR_TENSOR_INIT, one64 = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&x64, SR_F64, 2, (int64_t[]){1, n}));
    for (int64_t i = 0; i < n; i++)
        sr_f64(&x64)[i] = -14 + 28.0 * (double)i / (double)(n - 1);
    CHECK_OK(sr_tensor_convert(&x32, &x64, SR_F32));
    CHECK_OK(sr_tensor_convert(&x64, &x32, SR_F64)); /* same inputs exactly */
    CHECK_OK(sr_tensor_alloc(&one32, SR_F32, 2, (int64_t[]){1, n}));
    CHECK_OK(sr_tensor_alloc(&one64, SR_F64, 2, (int64_t[]){1, n}));
    sr_tensor_fill(&one32, 1);
    sr_tensor_fill(&one64, 1);
    const char *forms[] = {"none", "tanh"};
    int verbose = getenv("SRGEO_TEST_VERBOSE") != NULL;
    for (int f = 0; f < 2; f++) {
        sr_module *m = MAKE(sr_gelu_create, "gelu", "approximate", forms[f]);
        CHECK(m, "create");
        sr_run run = SR_RUN_INIT;
        run.save = 1;
        CHECK_OK(sr_module_forward(m, &x32, &run));
        CHECK_OK(sr_tensor_copy(&y32, &m->out));
        CHECK_OK(sr_module_backward(m, &one32, &run));
        CHECK_OK(sr_tensor_copy(&g32, &m->gin));
        CHECK_OK(sr_module_forward(m, &x64, &run));
        CHECK_OK(sr_module_backward(m, &one64, &run));
        double worst_y = 0, worst_d = 0;
        for (int64_t i = 0; i < n; i++) {
            double x = sr_f64(&x64)[i], y = sr_f64(&m->out)[i], d = sr_f64(&m->gin)[i];
            /* Φ and φ-like scale of the derivative: |d| plus twice the
             * magnitude of its x·φ part, recovered as |y/x − d| */
            double dscale = fabs(d) + (x != 0 ? 2 * fabs(y / x - d) : 0);
            double ey = fabs(sr_f32(&y32)[i] - y) / (fabs(y) * (1 + x * x));
            double ed = fabs(sr_f32(&g32)[i] - d) / (dscale * (1 + x * x));
            /* below ~1e-30 float32 has no precision left to compare */
            if (fabs(y) > 1e-30 && ey > worst_y)
                worst_y = ey;
            if (dscale > 1e-30 && ed > worst_d)
                worst_d = ed;
        }
        if (verbose)
            printf("  gelu %s float32 vs float64: value %.3g, derivative %.3g (rel / (1 + x^2))\n", forms[f],
                   worst_y, worst_d);
        CHECK(worst_y < 5e-7 && worst_d < 5e-7, "gelu %s: value %g, derivative %g", forms[f], worst_y, worst_d);
        sr_module_release(m);
    }
    /* softmax of one row spanning 88 units: exp over [-88, 0] */
    sr_module *sm = MAKE(sr_softmax_create, "softmax", NULL);
    CHECK(sm, "create");
    for (int64_t i = 0; i < n; i++)
        sr_f32(&x32)[i] = (float)(-88 + 88.0 * (double)i / (double)(n - 1));
    CHECK_OK(sr_tensor_convert(&x64, &x32, SR_F64));
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(sm, &x32, &run));
    CHECK_OK(sr_tensor_copy(&y32, &sm->out));
    CHECK_OK(sr_module_forward(sm, &x64, &run));
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double y = sr_f64(&sm->out)[i];
        if (y > 1e-30) {
            double e = fabs(sr_f32(&y32)[i] - y) / y;
            worst = e > worst ? e : worst;
        }
    }
    if (verbose)
        printf("  softmax float32 vs float64: rel %.3g\n", worst);
    CHECK(worst < 3e-6, "softmax rel %g", worst);
    sr_module_release(sm);
    sr_tensor *all[] = {&x32, &x64, &y32, &g32, &one32, &one64};
    for (int i = 0; i < 6; i++)
        sr_tensor_free(all[i]);
}

/* ±0 keep their sign (x·Φ(x), Φ(0) = 1/2 exactly, derivative 1/2), and the
 * erf form follows torch's 0.5·x·(1 + erf(x/√2)) at the infinities: +inf
 * -> +inf, -inf -> NaN (−inf·0), derivative NaN at both (inf·φ = inf·0). */
TEST(gelu_zeros_and_infinities)
{
    const double xs[] = {0.0, -0.0, INFINITY, -INFINITY};
    for (int dt = 0; dt < 2; dt++)
        for (int f = 0; f < 2; f++) {
            sr_dtype dtype = dt ? SR_F64 : SR_F32;
            sr_module *m = MAKE(sr_gelu_create, "gelu", "approximate", f ? "tanh" : "none");
            CHECK(m, "create");
            sr_tensor x = SR_TENSOR_INIT, g = SR_TENSOR_INIT;
            CHECK_OK(sr_tensor_alloc(&x, dtype, 2, (int64_t[]){1, 4}));
            CHECK_OK(sr_tensor_alloc(&g, dtype, 2, (int64_t[]){1, 4}));
            for (int i = 0; i < 4; i++)
                sr_set_flat(&x, i, xs[i]);
            sr_tensor_fill(&g, 1);
            sr_run run = SR_RUN_INIT;
            run.save = 1;
            CHECK_OK(sr_module_forward(m, &x, &run));
            CHECK_OK(sr_module_backward(m, &g, &run));
            const sr_tensor *y = &m->out, *d = &m->gin;
            for (int i = 0; i < 2; i++)
                CHECK(sr_get_flat(y, i) == 0 && !signbit(sr_get_flat(y, i)) == !signbit(xs[i]) &&
                          sr_get_flat(d, i) == 0.5,
                      "gelu %d %s: x %g -> y %g, d %g", f, sr_dtype_name(dtype), xs[i], sr_get_flat(y, i),
                      sr_get_flat(d, i));
            if (!f)
                CHECK(sr_get_flat(y, 2) == INFINITY && isnan(sr_get_flat(y, 3)) && isnan(sr_get_flat(d, 2)) &&
                          isnan(sr_get_flat(d, 3)),
                      "gelu %s at +-inf: y %g %g, d %g %g", sr_dtype_name(dtype), sr_get_flat(y, 2),
                      sr_get_flat(y, 3), sr_get_flat(d, 2), sr_get_flat(d, 3));
            sr_tensor_free(&x);
            sr_tensor_free(&g);
            sr_module_release(m);
        }
}

/* Far out (finite), GELU is the identity (derivative 1) or ~0 (derivative
 * ~0) in both dtypes and forms, with no inf·0 NaN and no tail term growing
 * like x³ (torch's tanh form returns NaN gradients from 1e20 on); NaN
 * propagates.  At ±inf the derivative is NaN (inf·0), as in torch. */
TEST(gelu_extreme_inputs)
{
    const double xs[] = {30, 1e3, 1e5, 1e20, 1e38, -30, -1e3, -1e5, -1e20, -1e38};
    const int nx = 10;
    const char *forms[] = {"none", "tanh"};
    for (int f = 0; f < 2; f++)
        for (int dt = 0; dt < 2; dt++) {
            sr_dtype dtype = dt ? SR_F64 : SR_F32;
            sr_module *m = MAKE(sr_gelu_create, "gelu", "approximate", forms[f]);
            CHECK(m, "create");
            sr_tensor x = SR_TENSOR_INIT, g = SR_TENSOR_INIT;
            CHECK_OK(sr_tensor_alloc(&x, dtype, 2, (int64_t[]){1, nx + 1}));
            CHECK_OK(sr_tensor_alloc(&g, dtype, 2, (int64_t[]){1, nx + 1}));
            for (int i = 0; i < nx; i++)
                sr_set_flat(&x, i, xs[i]);
            sr_set_flat(&x, nx, NAN);
            sr_tensor_fill(&g, 1);
            sr_run run = SR_RUN_INIT;
            run.save = 1;
            CHECK_OK(sr_module_forward(m, &x, &run));
            CHECK_OK(sr_module_backward(m, &g, &run));
            for (int i = 0; i < nx; i++) {
                double y = sr_get_flat(&m->out, i), d = sr_get_flat(&m->gin, i);
                double xi = sr_get_flat(&x, i); /* xs[i] rounded to the dtype */
                /* x = -30 leaves 1e-196 in float64, an exact value */
                int ok = xi > 0 ? y == xi && d == 1 : fabs(y) < 1e-150 && fabs(d) < 1e-150;
                CHECK(ok, "gelu %s %s: x %g -> y %g, d %g", forms[f],
                      sr_dtype_name(dtype), xs[i], y, d);
            }
            CHECK(isnan(sr_get_flat(&m->out, nx)) && isnan(sr_get_flat(&m->gin, nx)), "NaN lost");
            sr_tensor_free(&x);
            sr_tensor_free(&g);
            sr_module_release(m);
        }
}
