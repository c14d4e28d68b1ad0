/* test_pool.c - max/avg/adaptive pooling, flatten, permute, resize2d: derivatives,
 * independent naive references on awkward shapes, PyTorch's edge rules
 * (ties, padding as -inf, count_include_pad), views, bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "check.h"
#include "test.h"

typedef struct {
    sr_layer_ctor ctor;
    const char *op;
    const char *kv[10];
    int ndim;
    int64_t shape[5];
} pool_case;

static const pool_case deriv_cases[] = {
    {sr_maxpool2d_create, "maxpool2d", {"kernel_size", "3", "stride", "2", "padding", "1"}, 4, {2, 3, 9, 8}},
    {sr_maxpool2d_create, "maxpool2d", {"kernel_size", "2"}, 4, {1, 2, 5, 7}},
    {sr_maxpool2d_create, "maxpool2d", {"kernel_size", "3,2", "stride", "1,2", "padding", "1,0"}, 4, {2, 2, 6, 7}},
    {sr_maxpool2d_create, "maxpool2d", {"kernel_size", "1"}, 4, {3, 1, 1, 1}},
    {sr_avgpool2d_create, "avgpool2d", {"kernel_size", "3", "stride", "2", "padding", "1"}, 4, {2, 3, 9, 8}},
    {sr_avgpool2d_create, "avgpool2d", {"kernel_size", "3", "stride", "2", "padding", "1", "count_include_pad", "false"}, 4, {2, 3, 9, 8}},
    {sr_avgpool2d_create, "avgpool2d", {"kernel_size", "2"}, 4, {1, 2, 5, 5}},
    {sr_avgpool2d_create, "avgpool2d", {"kernel_size", "3,2", "stride", "2,1", "padding", "1,1", "count_include_pad", "false"}, 4, {2, 2, 7, 6}},
    {sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", {"output_size", "1"}, 4, {2, 3, 7, 7}},
    {sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", {"output_size", "3"}, 4, {2, 3, 7, 7}},
    {sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", {"output_size", "2"}, 4, {1, 2, 5, 5}},
    {sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", {"output_size", "3,2"}, 4, {2, 2, 7, 5}},
    {sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", {"output_size", "4"}, 4, {1, 2, 3, 3}},
    {sr_flatten_create, "flatten", {0}, 4, {2, 3, 4, 5}},
    {sr_flatten_create, "flatten", {"start_dim", "2"}, 4, {2, 3, 4, 5}},
    {sr_flatten_create, "flatten", {"start_dim", "1", "end_dim", "2"}, 4, {2, 3, 4, 5}},
    {sr_permute_create, "permute", {0}, 4, {2, 3, 4, 5}},
    {sr_permute_create, "permute", {"dims", "0,3,1,2"}, 4, {2, 3, 4, 5}},
    {sr_permute_create, "permute", {"dims", "0,2,1"}, 3, {3, 4, 5}},
    {sr_permute_create, "permute", {"dims", "0,4,2,1,3"}, 5, {2, 3, 1, 4, 5}},
    {sr_resize2d_create, "resize2d", {"scale", "2", "coordinate", "asymmetric", "nearest", "floor"}, 4, {2, 2, 3, 4}},
    {sr_resize2d_create, "resize2d", {"size", "5,3", "nearest", "round_prefer_ceil"}, 4, {2, 2, 3, 4}},
    {sr_resize2d_create, "resize2d", {"scale", "2,3", "mode", "linear"}, 4, {2, 2, 3, 4}},
    {sr_resize2d_create, "resize2d", {"size", "7,2", "mode", "linear", "coordinate", "align_corners"}, 4, {1, 3, 4, 5}},
    {sr_resize2d_create, "resize2d", {"scale", "0.6", "mode", "linear", "coordinate", "asymmetric"}, 4, {2, 1, 5, 7}},
    {sr_resize2d_create, "resize2d", {"size", "1,4", "mode", "linear", "coordinate", "pytorch_half_pixel"}, 4, {2, 1, 5, 7}},
    {sr_resize2d_create, "resize2d", {"scale", "2", "mode", "cubic"}, 4, {2, 2, 3, 4}},
    {sr_resize2d_create, "resize2d", {"size", "7,2", "mode", "cubic", "coordinate", "align_corners"}, 4, {1, 3, 4, 5}},
    {sr_resize2d_create, "resize2d", {"scale", "0.6,1.5", "mode", "cubic", "cubic_a", "-0.5", "exclude_outside", "true"}, 4, {2, 1, 5, 7}},
    {sr_resize2d_create, "resize2d", {"size", "3,9", "mode", "cubic", "coordinate", "asymmetric", "cubic_a", "-0.5"}, 4, {2, 1, 2, 4}},
};

TEST(pool_derivatives_f64)
{
    for (size_t c = 0; c < sizeof deriv_cases / sizeof *deriv_cases; c++) {
        const pool_case *pc = &deriv_cases[c];
        sr_module *m = check_make_f64(pc->ctor, pc->op, pc->kv);
        CHECK(m, "case %zu create: %s", c, sr_errmsg());
        sr_tensor x = SR_TENSOR_INIT;
        CHECK_OK(check_randn(&x, pc->ndim, pc->shape, 100 + c));
        check_result r;
        CHECK_OK(check_module(m, &x, 3, 1e-6, 7 + c, &r));
        if (getenv("SRGEO_TEST_VERBOSE"))
            printf("  %-20s case %2zu: jvp-fd %.2g adjoint %.2g\n", pc->op, c, r.jvp_fd, r.adjoint);
        /* Inputs are continuous random: no ties, so max pooling is smooth
         * at x and the FD step stays inside one linear piece. */
        CHECK(r.primal == 0, "case %zu (%s): primal %g", c, pc->op, r.primal);
        CHECK(r.jvp_fd < 1e-6, "case %zu (%s): jvp vs fd %g", c, pc->op, r.jvp_fd);
        CHECK(r.adjoint < 1e-10, "case %zu (%s): adjoint %g", c, pc->op, r.adjoint);
        sr_tensor_free(&x);
        sr_module_release(m);
    }
}

/* --- naive references: pad explicitly, then plain windows --------------- */
static double at(const sr_tensor *t, int64_t n, int64_t c, int64_t h, int64_t w)
{
    return sr_get_flat(t, ((n * t->shape[1] + c) * t->shape[2] + h) * t->shape[3] + w);
}

/* Max or average pool by materialising the padded plane (pad value -inf
 * for max, 0 for average) and a mask of real pixels. */
static void naive_pool(const sr_tensor *x, sr_tensor *y, int max, int include_pad, int64_t kh,
                       int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw)
{
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t Hp = H + 2 * ph, Wp = W + 2 * pw;
    int64_t Ho = (Hp - kh) / sh + 1, Wo = (Wp - kw) / sw + 1;
    sr_tensor_alloc(y, SR_F64, 4, (int64_t[]){N, C, Ho, Wo});
    double *pad = malloc((size_t)(Hp * Wp) * sizeof *pad);
    int *real_px = malloc((size_t)(Hp * Wp) * sizeof *real_px);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            for (int64_t i = 0; i < Hp; i++)
                for (int64_t j = 0; j < Wp; j++) {
                    int in = i >= ph && i < ph + H && j >= pw && j < pw + W;
                    real_px[i * Wp + j] = in;
                    pad[i * Wp + j] = in ? at(x, n, c, i - ph, j - pw) : max ? -INFINITY : 0;
                }
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double best = -INFINITY, sum = 0;
                    int count = 0;
                    for (int64_t i = 0; i < kh; i++)
                        for (int64_t j = 0; j < kw; j++) {
                            int64_t e = (oh * sh + i) * Wp + ow * sw + j;
                            best = pad[e] > best ? pad[e] : best;
                            sum += pad[e];
                            count += include_pad || real_px[e];
                        }
                    sr_set_flat(y, ((n * C + c) * Ho + oh) * Wo + ow, max ? best : sum / count);
                }
        }
    free(pad);
    free(real_px);
}

/* Adaptive bins from the real-valued formula, independently of pool.c's
 * integer arithmetic. */
static void naive_adaptive(const sr_tensor *x, sr_tensor *y, int64_t Ho, int64_t Wo)
{
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    sr_tensor_alloc(y, SR_F64, 4, (int64_t[]){N, C, Ho, Wo});
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    int64_t h0 = (int64_t)floor((double)oh * H / Ho), h1 = (int64_t)ceil((double)(oh + 1) * H / Ho);
                    int64_t w0 = (int64_t)floor((double)ow * W / Wo), w1 = (int64_t)ceil((double)(ow + 1) * W / Wo);
                    double s = 0;
                    for (int64_t i = h0; i < h1; i++)
                        for (int64_t j = w0; j < w1; j++)
                            s += at(x, n, c, i, j);
                    sr_set_flat(y, ((n * C + c) * Ho + oh) * Wo + ow, s / (double)((h1 - h0) * (w1 - w0)));
                }
}

static int run_forward(sr_module *m, const sr_tensor *x)
{
    sr_run run = SR_RUN_INIT;
    return sr_module_forward(m, x, &run);
}

TEST(pool_matches_naive_awkward_shapes)
{
    /* H, W, kh, kw, sh, sw, ph, pw */
    static const int64_t geo[][8] = {
        {1, 1, 1, 1, 1, 1, 0, 0}, {5, 7, 2, 2, 2, 2, 0, 0}, {9, 8, 3, 3, 2, 2, 1, 1},
        {7, 6, 3, 2, 2, 1, 1, 1}, {11, 5, 5, 3, 3, 2, 2, 0}, {4, 13, 4, 1, 1, 3, 2, 0},
        {6, 6, 3, 3, 1, 1, 1, 1}, {3, 10, 3, 3, 5, 4, 0, 1},
        {2, 4100, 2, 3, 1, 2, 0, 1}, /* rows wider than maxpool's separable pass takes */
    };
    char buf[8][16];
    for (size_t g = 0; g < sizeof geo / sizeof *geo; g++) {
        const int64_t *q = geo[g];
        snprintf(buf[0], 16, "%lld,%lld", (long long)q[2], (long long)q[3]);
        snprintf(buf[1], 16, "%lld,%lld", (long long)q[4], (long long)q[5]);
        snprintf(buf[2], 16, "%lld,%lld", (long long)q[6], (long long)q[7]);
        sr_tensor x = SR_TENSOR_INIT, x32 = SR_TENSOR_INIT, want = SR_TENSOR_INIT;
        CHECK_OK(check_randn(&x, 4, (int64_t[]){2, 3, q[0], q[1]}, 40 + g));
        CHECK_OK(sr_tensor_convert(&x32, &x, SR_F32));
        for (int kind = 0; kind < 3; kind++) { /* max, avg incl. pad, avg excl. pad */
            const char *incl = kind == 2 ? "false" : "true";
            sr_module *m = kind == 0 ? MAKE(sr_maxpool2d_create, "maxpool2d", "kernel_size", buf[0],
                                            "stride", buf[1], "padding", buf[2])
                                     : MAKE(sr_avgpool2d_create, "avgpool2d", "kernel_size", buf[0],
                                            "stride", buf[1], "padding", buf[2], "count_include_pad", incl);
            CHECK(m, "create %zu: %s", g, sr_errmsg());
            naive_pool(&x, &want, kind == 0, kind != 2, q[2], q[3], q[4], q[5], q[6], q[7]);
            CHECK_OK(run_forward(m, &x32)); /* float32 module, float32 input */
            double e32 = check_rel_diff(&m->out, &want);
            CHECK_OK(sr_module_to_dtype(m, SR_F64));
            CHECK_OK(run_forward(m, &x));
            double e64 = check_rel_diff(&m->out, &want);
            CHECK(sr_same_shape(&m->out, &want), "geo %zu kind %d: shape %s vs %s", g, kind,
                  SR_SHAPE(&m->out), SR_SHAPE(&want));
            /* Max is exact (a selection); averages differ by rounding only. */
            CHECK(kind ? e32 < 1e-6 && e64 < 1e-14 : e32 < 1e-7 && e64 == 0,
                  "geo %zu kind %d: rel f32 %g f64 %g", g, kind, e32, e64);
            if (kind == 0) { /* with save, the argmax pass: the same values */
                sr_run run = SR_RUN_INIT;
                run.save = 1;
                CHECK_OK(sr_module_forward(m, &x, &run));
                CHECK(check_rel_diff(&m->out, &want) == 0, "geo %zu: max pool with save differs", g);
            }
            sr_module_release(m);
        }
        sr_tensor *all[] = {&x, &x32, &want};
        for (int i = 0; i < 3; i++)
            sr_tensor_free(all[i]);
    }
}

TEST(adaptive_avgpool_matches_naive_bins)
{
    /* H, W, Ho, Wo: non-divisible (7->3, 5->2), identity, upsampling, 1x1 */
    static const int64_t geo[][4] = {{7, 7, 3, 3}, {5, 5, 2, 2}, {7, 5, 3, 2}, {6, 9, 6, 9},
                                     {3, 3, 4, 5}, {13, 11, 1, 1}, {1, 4, 3, 3}, {14, 14, 7, 7}};
    for (size_t g = 0; g < sizeof geo / sizeof *geo; g++) {
        char os[32];
        snprintf(os, sizeof os, "%lld,%lld", (long long)geo[g][2], (long long)geo[g][3]);
        sr_module *m = MAKE_F64(sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", "output_size", os);
        CHECK(m, "create: %s", sr_errmsg());
        sr_tensor x = SR_TENSOR_INIT, want = SR_TENSOR_INIT;
        CHECK_OK(check_randn(&x, 4, (int64_t[]){2, 3, geo[g][0], geo[g][1]}, 70 + g));
        naive_adaptive(&x, &want, geo[g][2], geo[g][3]);
        CHECK_OK(run_forward(m, &x));
        CHECK(sr_same_shape(&m->out, &want), "geo %zu: %s vs %s", g, SR_SHAPE(&m->out), SR_SHAPE(&want));
        double e = check_rel_diff(&m->out, &want);
        CHECK(e < 1e-14, "geo %zu: rel %g", g, e);
        sr_tensor_free(&x);
        sr_tensor_free(&want);
        sr_module_release(m);
    }
}

/* JVP tangent rows gather at *their own primal's* argmax: with k=2 and two
 * primals whose maxima sit at different places, row i*k+j must read v at
 * primal i's argmax. */
TEST(maxpool_jvp_uses_each_primals_argmax)
{
    sr_module *m = MAKE_F64(sr_maxpool2d_create, "maxpool2d", "kernel_size", "2");
    CHECK(m, "create: %s", sr_errmsg());
    /* (2 primals + 2*2 tangents, 1, 2, 2): primal 0 max at 0, primal 1 at 3 */
    sr_tensor xv = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&xv, SR_F64, 4, (int64_t[]){6, 1, 2, 2}));
    double vals[24] = {9, 1, 2, 3, 0, 1, 2, 8, 10, 11, 12, 13, 20, 21, 22, 23,
                       30, 31, 32, 33, 40, 41, 42, 43};
    memcpy(sr_f64(&xv), vals, sizeof vals);
    sr_run run = SR_RUN_INIT;
    run.n = 2;
    run.k = 2;
    CHECK_OK(sr_module_jvp(m, &xv, &run));
    double want[6] = {9, 8, 10, 20, 33, 43};
    for (int i = 0; i < 6; i++)
        CHECK(sr_f64(&m->out)[i] == want[i], "row %d: %g, want %g", i, sr_f64(&m->out)[i], want[i]);
    sr_tensor_free(&xv);
    sr_module_release(m);
}

/* Ties: PyTorch keeps the first maximum (row-major in the window), also
 * with overlapping windows, and padding (-inf) never wins even when every
 * real value is negative. */
TEST(maxpool_ties_and_padding_follow_pytorch)
{
    sr_module *m = MAKE(sr_maxpool2d_create, "maxpool2d", "kernel_size", "3", "stride", "1");
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, gy = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&x, SR_F32, 4, (int64_t[]){1, 1, 3, 4}));
    sr_tensor_fill(&x, 2.5);
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK(m->out.shape[2] == 1 && m->out.shape[3] == 2, "shape %s", SR_SHAPE(&m->out));
    CHECK_OK(sr_tensor_alloc(&gy, SR_F32, 4, (int64_t[]){1, 1, 1, 2}));
    sr_f32(&gy)[0] = 1;
    sr_f32(&gy)[1] = 10;
    CHECK_OK(sr_module_backward(m, &gy, &run));
    /* windows start at columns 0 and 1: their first elements (0,0), (0,1) */
    for (int i = 0; i < 12; i++) {
        float want = i == 0 ? 1 : i == 1 ? 10 : 0;
        CHECK(sr_f32(&m->gin)[i] == want, "gin[%d] = %g, want %g", i, sr_f32(&m->gin)[i], want);
    }
    sr_module_release(m);

    m = MAKE(sr_maxpool2d_create, "maxpool2d", "kernel_size", "3", "stride", "2", "padding", "1");
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor_fill(&x, -5);
    run.save = 0;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK(m->out.shape[2] == 2 && m->out.shape[3] == 2, "shape %s", SR_SHAPE(&m->out));
    for (int i = 0; i < 4; i++)
        CHECK(sr_f32(&m->out)[i] == -5, "out[%d] = %g (padding leaked in)", i, sr_f32(&m->out)[i]);
    /* A NaN wins its windows (torch: `val > max || isnan(val)`), in the
     * border columns and in the vectorised interior alike. */
    sr_tensor_fill(&x, 0);
    sr_f32(&x)[0] = NAN;  /* (0,0): only in window (0,0) */
    sr_f32(&x)[11] = 7;   /* (2,3): only in window (1,1) */
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK(isnan(sr_f32(&m->out)[0]) && sr_f32(&m->out)[1] == 0 && sr_f32(&m->out)[2] == 0 &&
              sr_f32(&m->out)[3] == 7, "NaN: %g %g %g %g", sr_f32(&m->out)[0], sr_f32(&m->out)[1],
          sr_f32(&m->out)[2], sr_f32(&m->out)[3]);
    sr_module_release(m);
    m = MAKE(sr_maxpool2d_create, "maxpool2d", "kernel_size", "2", "stride", "1");
    sr_f32(&x)[0] = 0;
    sr_f32(&x)[6] = NAN; /* (1,2): in windows (0,1) (0,2) (1,1) (1,2) */
    CHECK_OK(sr_module_forward(m, &x, &run));
    for (int i = 0; i < 6; i++) {
        int has_nan = i % 3 != 0;
        CHECK(has_nan ? isnan(sr_f32(&m->out)[i]) : sr_f32(&m->out)[i] == 0, "k2 out[%d] = %g", i,
              sr_f32(&m->out)[i]);
    }
    sr_tensor_free(&x);
    sr_tensor_free(&gy);
    sr_module_release(m);
}

TEST(avgpool_count_include_pad)
{
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&x, SR_F64, 4, (int64_t[]){1, 1, 4, 4}));
    sr_tensor_fill(&x, 1);
    for (int incl = 0; incl < 2; incl++) {
        sr_module *m = MAKE(sr_avgpool2d_create, "avgpool2d", "kernel_size", "3", "stride", "2",
                            "padding", "1", "count_include_pad", incl ? "true" : "false");
        CHECK(m, "create: %s", sr_errmsg());
        CHECK_OK(sr_module_to_dtype(m, SR_F64));
        CHECK_OK(run_forward(m, &x));
        /* 2x2 output; the top-left window holds 4 real pixels out of 9, the
         * bottom-right (rows/cols 1..3) 9 of 9. */
        double *y = sr_f64(&m->out);
        CHECK(fabs(y[0] - (incl ? 4.0 / 9 : 1)) < 1e-15, "incl %d: corner %g", incl, y[0]);
        CHECK(fabs(y[1] - (incl ? 6.0 / 9 : 1)) < 1e-15, "incl %d: edge %g", incl, y[1]);
        CHECK(fabs(y[3] - 1) < 1e-15, "incl %d: interior %g", incl, y[3]);
        sr_module_release(m);
    }
    sr_tensor_free(&x);
}

TEST(permute_matches_index_formula)
{
    /* 5D with odd sizes: y[n, i1, i2, i3, i4] = x[n, at perm] */
    sr_module *m = MAKE(sr_permute_create, "permute", "dims", "0,3,1,4,2");
    CHECK(m, "create: %s", sr_errmsg());
    int64_t xs[5] = {2, 3, 5, 1, 7};
    int perm[5] = {0, 3, 1, 4, 2};
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&x, SR_F32, 5, xs));
    for (int64_t i = 0; i < sr_numel(&x); i++)
        sr_set_flat(&x, i, (double)i);
    CHECK_OK(run_forward(m, &x));
    CHECK(m->out.ndim == 5, "ndim %d", m->out.ndim);
    for (int d = 0; d < 5; d++)
        CHECK(m->out.shape[d] == xs[perm[d]], "dim %d: %lld", d, (long long)m->out.shape[d]);
    int64_t j[5];
    for (j[0] = 0; j[0] < 2; j[0]++)
        for (j[1] = 0; j[1] < xs[perm[1]]; j[1]++)
            for (j[2] = 0; j[2] < xs[perm[2]]; j[2]++)
                for (j[3] = 0; j[3] < xs[perm[3]]; j[3]++)
                    for (j[4] = 0; j[4] < xs[perm[4]]; j[4]++) {
                        int64_t xi[5], yo = 0, xo = 0;
                        for (int d = 0; d < 5; d++)
                            xi[perm[d]] = j[d];
                        for (int d = 0; d < 5; d++) {
                            yo = yo * m->out.shape[d] + j[d];
                            xo = xo * xs[d] + xi[d];
                        }
                        CHECK(sr_get_flat(&m->out, yo) == (double)xo, "y[%lld] = %g, want %lld",
                              (long long)yo, sr_get_flat(&m->out, yo), (long long)xo);
                    }
    /* backward is the inverse permutation: it must reproduce x from y */
    sr_tensor y = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_copy(&y, &m->out));
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(sr_module_backward(m, &y, &run));
    CHECK(sr_same_shape(&m->gin, &x) && check_rel_diff(&m->gin, &x) == 0, "inverse permutation");
    sr_tensor_free(&x);
    sr_tensor_free(&y);
    sr_module_release(m);
}

TEST(flatten_is_a_view)
{
    sr_module *m = MAKE(sr_flatten_create, "flatten", "start_dim", "1");
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, gy = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){2, 3, 4, 5}));
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK(m->out.ndim == 2 && m->out.shape[0] == 2 && m->out.shape[1] == 60, "shape %s", SR_SHAPE(&m->out));
    CHECK(m->out.storage == x.storage, "flatten copied its input");
    CHECK_OK(sr_tensor_zeros(&gy, SR_F32, 2, (int64_t[]){2, 60}));
    CHECK_OK(sr_module_backward(m, &gy, &run));
    CHECK(sr_same_shape(&m->gin, &x) && m->gin.storage == gy.storage, "gin %s not a view", SR_SHAPE(&m->gin));
    /* (N,D) input: start_dim=1 flattens nothing */
    sr_tensor_free(&x);
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 2, (int64_t[]){3, 7}));
    CHECK_OK(run_forward(m, &x));
    CHECK(m->out.ndim == 2 && m->out.shape[1] == 7, "2D: %s", SR_SHAPE(&m->out));
    sr_tensor_free(&x);
    sr_tensor_free(&gy);
    sr_module_release(m);
}

/* The argmax buffer and outputs are reused across calls of one size. */
TEST(maxpool_reuses_buffers)
{
    sr_module *m = MAKE(sr_maxpool2d_create, "maxpool2d", "kernel_size", "2");
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){2, 3, 8, 8}));
    CHECK_OK(run_forward(m, &x));
    void *out = m->out.storage->data;
    CHECK_OK(run_forward(m, &x));
    CHECK(m->out.storage->data == out, "output buffer was reallocated");
    sr_tensor_free(&x);
    sr_module_release(m);
}

TEST(pool_bad_input_is_an_error)
{
    sr_tensor x = SR_TENSOR_INIT;
    sr_run run = SR_RUN_INIT;
    sr_module *m = MAKE(sr_maxpool2d_create, "maxpool2d", "kernel_size", "3");
    CHECK(m, "create: %s", sr_errmsg());
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){2, 3, 8}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "maxpool2d: input (2,3,8) must be 4D (N,C,H,W)");
    sr_tensor_free(&x);
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){1, 3, 2, 5}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "maxpool2d: input (1,3,2,5) is smaller than the 3x3 kernel");
    sr_tensor_free(&x);
    /* backward needs a forward with save; a jvp does not count */
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){2, 1, 3, 3}));
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_ERR(sr_module_backward(m, &m->out, &run), "maxpool2d backward: forward was not run with save");
    run.n = 1;
    run.k = 1;
    CHECK_OK(sr_module_jvp(m, &x, &run));
    CHECK_ERR(sr_module_backward(m, &m->out, &run), "maxpool2d backward: forward was not run with save");
    sr_tensor_free(&x);
    sr_module_release(m);
    run = (sr_run)SR_RUN_INIT;

    m = MAKE(sr_avgpool2d_create, "avgpool2d", "kernel_size", "2");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 2, (int64_t[]){4, 4}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "avgpool2d: input (4,4) must be 4D (N,C,H,W)");
    sr_tensor_free(&x);
    sr_module_release(m);
    m = MAKE(sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", "output_size", "2");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){1, 2, 0, 3}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "adaptive_avgpool2d: input (1,2,0,3) has an empty plane");
    sr_tensor_free(&x);
    sr_module_release(m);

    /* construction */
    CHECK(!MAKE(sr_maxpool2d_create, "maxpool2d", "stride", "2"), "no kernel accepted");
    CHECK(strstr(sr_errmsg(), "maxpool2d: option kernel_size is required"), "msg: %s", sr_errmsg());
    CHECK(!MAKE(sr_maxpool2d_create, "maxpool2d", "kernel_size", "3", "padding", "2"), "wide pad accepted");
    CHECK(strstr(sr_errmsg(), "maxpool2d: padding 2 must be at most half of kernel_size 3"), "msg: %s", sr_errmsg());
    CHECK(!MAKE(sr_avgpool2d_create, "avgpool2d", "kernel_size", "2,4", "padding", "0,3"), "wide pad accepted");
    CHECK(strstr(sr_errmsg(), "avgpool2d: padding 3 must be at most half of kernel_size 4"), "msg: %s", sr_errmsg());
    CHECK(!MAKE(sr_avgpool2d_create, "avgpool2d", "kernel_size", "2", "stride", "0"), "stride 0 accepted");
    CHECK(strstr(sr_errmsg(), "avgpool2d: kernel_size and stride must be >= 1"), "msg: %s", sr_errmsg());
    CHECK(!MAKE(sr_avgpool2d_create, "avgpool2d", "kernel_size", "2,2,2"), "3 values accepted");
    CHECK(strstr(sr_errmsg(), "kernel_size has more than 2 values"), "msg: %s", sr_errmsg());
    CHECK(!MAKE(sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", "output_size", "0"), "output 0 accepted");
    CHECK(strstr(sr_errmsg(), "adaptive_avgpool2d: output_size must be >= 1"), "msg: %s", sr_errmsg());
}

TEST(flatten_permute_bad_input_is_an_error)
{
    sr_tensor x = SR_TENSOR_INIT;
    sr_run run = SR_RUN_INIT;
    sr_module *m = MAKE(sr_flatten_create, "flatten", "start_dim", "1");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 1, (int64_t[]){5}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "flatten: dims 1..-1 do not fit input (5)");
    sr_tensor_free(&x);
    sr_module_release(m);
    m = MAKE(sr_flatten_create, "flatten", "start_dim", "3", "end_dim", "2");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){1, 2, 3, 4}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "flatten: dims 3..2 do not fit input (1,2,3,4)");
    sr_module_release(m);
    CHECK(!MAKE(sr_flatten_create, "flatten", "start_dim", "0"), "start_dim 0 accepted");
    CHECK(strstr(sr_errmsg(), "flatten: start_dim 0 would merge the batch dimension"), "msg: %s", sr_errmsg());

    m = MAKE(sr_permute_create, "permute", "dims", "0,2,3,1");
    sr_tensor_free(&x);
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){2, 3, 4}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "permute: input (2,3,4) has 3 dims, the permutation 4");
    sr_tensor_free(&x);
    sr_module_release(m);
    CHECK(!MAKE(sr_permute_create, "permute", "dims", "0,1,1,2"), "repeated dim accepted");
    CHECK(strstr(sr_errmsg(), "permute: dims must be a permutation of 0..3 (entry 3 is 1)"), "msg: %s", sr_errmsg());
    CHECK(!MAKE(sr_permute_create, "permute", "dims", "0,1,4,2"), "out of range dim accepted");
    CHECK(strstr(sr_errmsg(), "permute: dims must be a permutation of 0..3"), "msg: %s", sr_errmsg());
    CHECK(!MAKE(sr_permute_create, "permute", "dims", "1,0,2,3"), "moving the batch accepted");
    CHECK(strstr(sr_errmsg(), "permute: dims must start with 0 (the batch dimension stays first), not 1"),
          "msg: %s", sr_errmsg());
    /* negative dims count from the end, as in torch */
    m = MAKE(sr_permute_create, "permute", "dims", "0,-1,1,2");
    CHECK(m, "negative dims: %s", sr_errmsg());
    sr_module_release(m);
}

/* Big enough for the OpenMP branches: every output is computed by one
 * thread in a fixed order, so 1 and 2 threads agree bit for bit. */
TEST(pool_threads_agree_bitwise)
{
    sr_module *mods[] = {
        MAKE(sr_maxpool2d_create, "maxpool2d", "kernel_size", "3", "stride", "2", "padding", "1"),
        MAKE(sr_avgpool2d_create, "avgpool2d", "kernel_size", "3", "stride", "1", "padding", "1"),
        MAKE(sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", "output_size", "7"),
        MAKE(sr_permute_create, "permute", "dims", "0,2,3,1"),
    };
    int64_t n = 2, k = 2;
    sr_tensor x = SR_TENSOR_INIT, stack = SR_TENSOR_INIT;
    sr_rng r;
    sr_rng_seed(&r, 3);
    CHECK_OK(sr_tensor_alloc(&x, SR_F32, 4, (int64_t[]){n, 16, 41, 39}));
    CHECK_OK(sr_tensor_alloc(&stack, SR_F32, 4, (int64_t[]){n * (1 + k), 16, 41, 39}));
    sr_tensor_fill_normal(&stack, &r, 0, 1);
    memcpy(sr_data(&x), sr_data(&stack), (size_t)sr_numel(&x) * sizeof(float));
    for (size_t i = 0; i < sizeof mods / sizeof *mods; i++) {
        CHECK(mods[i], "create %zu: %s", i, sr_errmsg());
        CHECK(check_threads_agree(mods[i], &x, NULL, &stack, n, k) == 0, "module %zu: %s", i, sr_errmsg());
        sr_module_release(mods[i]);
    }
    sr_tensor_free(&x);
    sr_tensor_free(&stack);
}

/* Adaptive bins have edges o·n / on: an output size times input size past
 * the element bound is refused before any edge is computed (both tensors
 * here are small enough to allocate, so nothing else would stop it). */
TEST(pool_adaptive_huge_output_fails_cleanly)
{
    sr_module *m = MAKE(sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", "output_size", "2097152,1");
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){1, 1, 1048576, 1}));
    sr_run run = SR_RUN_INIT;
    CHECK_ERR(sr_module_forward(m, &x, &run), "adaptive_avgpool2d: output x input height");
    sr_tensor_free(&x);
    sr_module_release(m);
}

TEST(resize_bad_input_is_an_error)
{
    CHECK(!MAKE(sr_resize2d_create, "resize2d", "mode", "linear"), "neither size nor scale");
    CHECK(strstr(sr_errmsg(), "resize2d: give size={h,w} or scale={sh,sw}"), "%s", sr_errmsg());
    CHECK(!MAKE(sr_resize2d_create, "resize2d", "size", "2", "mode", "area"), "area");
    CHECK(!MAKE(sr_resize2d_create, "resize2d", "scale", "0"), "scale 0");
    sr_module *m = MAKE(sr_resize2d_create, "resize2d", "scale", "0.1");
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){1, 2, 4, 30}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "resize2d: input 4x30 gives output length 0 on axis 2");
    sr_tensor_free(&x);
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){1, 2, 4}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "resize2d: input (1,2,4) must be 4D (N,C,H,W)");
    sr_tensor_free(&x);
    sr_module_release(m);
}
