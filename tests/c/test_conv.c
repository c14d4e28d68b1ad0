/* test_conv.c - conv2d: fast kernels vs the naive reference on awkward
 * configurations (every chunking branch forced through the plan options),
 * derivatives, buffer reuse, bad input. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/conv.h"
#include "nn/layers.h"
#include "check.h"
#include "test.h"

typedef struct {
    const char *name;
    int64_t cin, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int bias;
    int64_t n, h, w;
    int asym;        /* padding after the image is pb, pr (else ph, pw) */
    int64_t pb, pr;
} conv_case;

static int64_t pad_b(const conv_case *c) { return c->asym ? c->pb : c->ph; }
static int64_t pad_r(const conv_case *c) { return c->asym ? c->pr : c->pw; }

static const conv_case cases[] = {
    {"1x1", 4, 6, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 3, 5, 7, 0, 0, 0},
    {"1x1 stride 2", 4, 5, 1, 1, 2, 2, 0, 0, 1, 1, 1, 1, 1, 7, 6, 0, 0, 0},
    {"1x1 pad 1 groups 2", 4, 6, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 3, 4, 5, 0, 0, 0},
    {"3x3 pad 1", 3, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 6, 5, 0, 0, 0},
    {"3x3 stride 2", 3, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 7, 9, 0, 0, 0},
    {"3x3 stride 2 no pad even", 2, 3, 3, 3, 2, 2, 0, 0, 1, 1, 1, 0, 3, 8, 6, 0, 0, 0},
    {"dilation 2", 2, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 3, 8, 7, 0, 0, 0},
    {"groups 2", 4, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1, 3, 5, 5, 0, 0, 0},
    {"depthwise", 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 1, 3, 6, 7, 0, 0, 0},
    {"depthwise x2 stride 2", 3, 6, 3, 3, 2, 2, 1, 1, 1, 1, 3, 1, 1, 7, 8, 0, 0, 0},
    {"depthwise 5x3 dil pad", 2, 2, 5, 3, 1, 2, 2, 1, 1, 2, 2, 0, 3, 6, 9, 0, 0, 0},
    /* stride 1, no dilation: depthwise.c's flat kernel (grids of several
     * register blocks with a partial last one, padding wider than the
     * image, channel multiplier 2, no padding, 1x1) and, with padding >=
     * the kernel, the padded-plane loops */
    {"depthwise 7x7 pad 3", 3, 3, 7, 7, 1, 1, 3, 3, 1, 1, 3, 1, 3, 9, 11, 0, 0, 0},
    {"depthwise 7x7 pad 3 wide", 2, 2, 7, 7, 1, 1, 3, 3, 1, 1, 2, 1, 1, 5, 40, 0, 0, 0},
    {"depthwise 7x7 on 3x2", 2, 2, 7, 7, 1, 1, 3, 3, 1, 1, 2, 1, 2, 3, 2, 0, 0, 0},
    {"depthwise x2 3x5 pad 2x0", 2, 4, 3, 5, 1, 1, 2, 0, 1, 1, 2, 0, 2, 6, 7, 0, 0, 0},
    {"depthwise 1x1", 3, 3, 1, 1, 1, 1, 0, 0, 1, 1, 3, 1, 2, 4, 5, 0, 0, 0},
    {"depthwise 3x3 pad 3", 2, 2, 3, 3, 1, 1, 3, 3, 1, 1, 2, 1, 2, 4, 5, 0, 0, 0},
    {"non-square kernel", 3, 2, 2, 5, 1, 2, 1, 2, 1, 1, 1, 1, 3, 6, 9, 0, 0, 0},
    {"3x1 dilation 1x2", 5, 4, 3, 1, 2, 1, 0, 1, 1, 2, 1, 0, 3, 7, 3, 0, 0, 0},
    {"kernel = padded input", 2, 3, 4, 3, 1, 1, 1, 0, 1, 1, 1, 1, 3, 2, 3, 0, 0, 0},
    {"cin 1", 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 5, 4, 0, 0, 0},
    {"stride 3x2 dilation 2x3", 3, 4, 3, 2, 3, 2, 2, 1, 2, 3, 1, 1, 3, 11, 10, 0, 0, 0},
    {"4x4 stride 2 (merged taps)", 3, 5, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1, 2, 9, 8, 0, 0, 0},
    {"patchify 4x4 stride 4", 3, 6, 4, 4, 4, 4, 0, 0, 1, 1, 1, 1, 2, 8, 12, 0, 0, 0},
    {"5x5 stride 2 pad 3 groups 3", 6, 3, 5, 5, 2, 2, 3, 3, 1, 1, 3, 1, 2, 7, 9, 0, 0, 0},
    /* Winograd tiles: odd and even output sizes, paddings 0..2, a single
     * tile row or column, and 3x3 with stride or padding it cannot take. */
    {"3x3 pad 0 odd output", 5, 3, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1, 3, 9, 8, 0, 0, 0},
    {"3x3 pad 2x0", 3, 4, 3, 3, 1, 1, 2, 0, 1, 1, 1, 0, 2, 5, 7, 0, 0, 0},
    {"3x3 pad 1x2 one tile row", 4, 2, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, 3, 1, 6, 0, 0, 0},
    {"3x3 pad 0 one tile", 2, 3, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1, 2, 3, 4, 0, 0, 0},
    {"3x3 pad 3", 3, 2, 3, 3, 1, 1, 3, 3, 1, 1, 1, 1, 2, 4, 5, 0, 0, 0},
    /* 13 outputs: two full 6-row panels of gemm.c's kernel and a partial one */
    {"3x3 pad 1 13 outputs", 5, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 6, 7, 0, 0, 0},
    /* Asymmetric padding (ONNX pads, TensorFlow "same"): never Winograd nor
     * the depthwise kernels, which pad both sides alike. */
    {"3x3 stride 2 pad 0,0,1,1 (TF same)", 3, 4, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, 2, 8, 8, 1, 1, 1},
    {"3x3 pad 1,0 before 0,2 after", 2, 3, 3, 3, 1, 1, 1, 0, 1, 1, 1, 0, 2, 5, 6, 1, 0, 2},
    {"3x3 stride 1 pad 2,1 before 0,1 after", 16, 16, 3, 3, 1, 1, 2, 1, 1, 1, 1, 1, 2, 9, 9, 1, 0, 1},
    {"depthwise stride 2 pad 0,1 before 1,0 after", 4, 4, 3, 3, 2, 2, 0, 1, 1, 1, 4, 1, 2, 7, 6, 1, 1, 0},
    {"5x3 dilation 2 pad 3,0 before 1,2 after", 2, 4, 5, 3, 1, 2, 3, 0, 2, 1, 2, 1, 2, 8, 7, 1, 1, 2},
};
#define NCASES (int)(sizeof cases / sizeof *cases)

/* Plan variants {gemm_cols, max_workspace, algo, split}: default; im2col
 * with one image per GEMM in pixel chunks of 16 columns and K chunks of one
 * channel (max_workspace tiny); two images per GEMM (last chunk single); two
 * images wanted but the buffer too small even for one (pixel chunks);
 * tap-wise GEMMs over phase planes; all images in one GEMM with K chunks of
 * two channels ("2ch": a buffer of two channels' float64 rows); then the
 * batch split into per-thread runs of images (each with its own workspaces
 * and, in backward, its own parameter-gradient sums) under im2col with two
 * images per GEMM, pixel chunks, and taps; the split forbidden; then
 * Winograd wherever it applies (3x3 stride 1): default cut, one tile row per
 * chunk split across threads, one part with threaded GEMMs, and one part in
 * chunks of two float64 tile rows ("2tr"; four in float32), so chunks end
 * inside an image after tile rows that carried patch rows to the next. */
static const char *const plans[][4] = {{NULL, NULL, NULL, NULL},
                                       {"1", "1", "im2col", NULL},
                                       {"2", NULL, "im2col", NULL},
                                       {"2", "1", "im2col", NULL},
                                       {NULL, NULL, "taps", NULL},
                                       {NULL, "2ch", "im2col", NULL},
                                       {"2", NULL, "im2col", "images"},
                                       {"1", "1", "im2col", "images"},
                                       {NULL, NULL, "taps", "images"},
                                       {NULL, NULL, NULL, "gemm"},
                                       {NULL, NULL, "winograd", NULL},
                                       {NULL, "1", "winograd", "images"},
                                       {NULL, NULL, "winograd", "gemm"},
                                       {NULL, "2tr", "winograd", "gemm"}};
#define NPLANS (int)(sizeof plans / sizeof *plans)

static sr_module *make_conv(const conv_case *c, sr_dtype dt, int plan, uint64_t seed)
{
    char b[16][24];
    const char *kv[40];
    int n = 0;
#define KV(key, fmt, ...)                                                         \
    do {                                                                          \
        snprintf(b[n / 2], sizeof b[0], fmt, __VA_ARGS__);                        \
        kv[n++] = key;                                                            \
        kv[n] = b[n / 2];                                                         \
        n++;                                                                      \
    } while (0)
    KV("in_channels", "%lld", (long long)c->cin);
    KV("out_channels", "%lld", (long long)c->cout);
    KV("kernel_size", "%lld,%lld", (long long)c->kh, (long long)c->kw);
    KV("stride", "%lld,%lld", (long long)c->sh, (long long)c->sw);
    if (c->asym)
        KV("padding", "%lld,%lld,%lld,%lld", (long long)c->ph, (long long)c->pw, (long long)c->pb, (long long)c->pr);
    else
        KV("padding", "%lld,%lld", (long long)c->ph, (long long)c->pw);
    KV("dilation", "%lld,%lld", (long long)c->dh, (long long)c->dw);
    KV("groups", "%lld", (long long)c->groups);
    KV("bias", "%s", c->bias ? "true" : "false");
    if (plans[plan][0]) {
        /* gemm_cols relative to the image: "2" means two images' worth. */
        int64_t ho = (c->h + c->ph + pad_b(c) - c->dh * (c->kh - 1) - 1) / c->sh + 1;
        int64_t wo = (c->w + c->pw + pad_r(c) - c->dw * (c->kw - 1) - 1) / c->sw + 1;
        KV("gemm_cols", "%lld", (long long)(plans[plan][0][0] == '2' ? 2 * ho * wo : 1));
    }
    if (plans[plan][1] && strcmp(plans[plan][1], "2ch") == 0) {
        int64_t ho = (c->h + c->ph + pad_b(c) - c->dh * (c->kh - 1) - 1) / c->sh + 1;
        int64_t wo = (c->w + c->pw + pad_r(c) - c->dw * (c->kw - 1) - 1) / c->sw + 1;
        KV("max_workspace", "%lld", (long long)(2 * c->kh * c->kw * c->n * ho * wo * 8));
    } else if (plans[plan][1] && strcmp(plans[plan][1], "2tr") == 0) {
        int64_t wo = c->w + c->pw + pad_r(c) - 2; /* a Winograd tile row: 16 (C + O) floats per tile */
        KV("max_workspace", "%lld", (long long)(2 * 16 * (c->cin + c->cout) * ((wo + 1) / 2) * 8));
    } else if (plans[plan][1]) {
        KV("max_workspace", "%s", plans[plan][1]);
    }
    if (plans[plan][2])
        KV("algo", "%s", plans[plan][2]);
    if (plans[plan][3])
        KV("split", "%s", plans[plan][3]);
#undef KV
    kv[n] = NULL;
    sr_module *m = check_reset(check_make(sr_conv2d_create, "conv2d", kv), seed);
    if (!m)
        return NULL;
    if (sr_module_to_dtype(m, dt)) {
        sr_module_release(m);
        return NULL;
    }
    return m;
}

static sr_conv2d_params params_of(const conv_case *c)
{
    return (sr_conv2d_params){{c->sh, c->sw}, {c->ph, c->pw}, {c->dh, c->dw}, c->groups, {pad_b(c), pad_r(c)}};
}

TEST(conv_derivatives_f64)
{
    for (int i = 0; i < NCASES; i++)
        for (int p = 0; p < NPLANS; p++) {
            const conv_case *c = &cases[i];
            sr_module *m = make_conv(c, SR_F64, p, 7 + (uint64_t)i);
            CHECK(m, "%s: create: %s", c->name, sr_errmsg());
            sr_tensor x = SR_TENSOR_INIT;
            CHECK_OK(check_randn(&x, 4, (int64_t[]){c->n, c->cin, c->h, c->w}, 1 + (uint64_t)i));
            check_result r;
            CHECK_OK(check_module(m, &x, 3, 1e-6, 11, &r));
            CHECK(r.primal < 1e-12, "%s plan %d: primal %g", c->name, p, r.primal);
            CHECK(r.jvp_fd < 1e-6, "%s plan %d: jvp vs fd %g", c->name, p, r.jvp_fd);
            CHECK(r.adjoint < 1e-10, "%s plan %d: adjoint %g", c->name, p, r.adjoint);
            CHECK(r.param_fd < 1e-6, "%s plan %d: param fd %g", c->name, p, r.param_fd);
            sr_tensor_free(&x);
            sr_module_release(m);
        }
}

/* Forward, stacked JVP and backward (twice, so accumulation is checked) of
 * the module against the reference, for one case, dtype and plan. */
static void fast_vs_ref(const conv_case *c, sr_dtype dt, int plan, double tol)
{
    sr_module *m = make_conv(c, dt, plan, 3);
    CHECK(m, "%s: create: %s", c->name, sr_errmsg());
    const sr_tensor *w = &m->params[0].value, *b = c->bias ? &m->params[1].value : NULL;
    sr_conv2d_params cp = params_of(c);
    sr_tensor x = SR_TENSOR_INIT, y = SR_TENSOR_INIT, xv = SR_TENSOR_INIT, yv = SR_TENSOR_INIT,
              gy = SR_TENSOR_INIT, gx = SR_TENSOR_INIT, gw = SR_TENSOR_INIT, gb = SR_TENSOR_INIT,
              two = SR_TENSOR_INIT, row = SR_TENSOR_INIT, got = SR_TENSOR_INIT;
    int64_t xs[4] = {c->n, c->cin, c->h, c->w};
    CHECK_OK(check_randn_dt(&x, dt, 4, xs, 5));
    CHECK_OK(sr_conv2d_ref(&x, w, b, &cp, &y));
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    CHECK_OK(sr_module_forward(m, &x, &run));
    double e = check_rel_diff(&m->out, &y);
    CHECK(e < tol, "%s %s plan %d: forward rel %g", c->name, sr_dtype_name(dt), plan, e);

    /* Backward twice: gx is written, parameter grads accumulate (2×). */
    CHECK_OK(check_randn_dt(&gy, dt, 4, y.shape, 6));
    CHECK_OK(sr_conv2d_ref_backward(&x, w, &gy, &cp, &gx, &gw, &gb));
    CHECK_OK(sr_module_backward(m, &gy, &run));
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(sr_module_backward(m, &gy, &run));
    e = check_rel_diff(&m->gin, &gx);
    CHECK(e < tol, "%s %s plan %d: grad x rel %g", c->name, sr_dtype_name(dt), plan, e);
    CHECK_OK(sr_tensor_copy(&two, &gw));
    for (int64_t i = 0; i < sr_numel(&two); i++)
        sr_set_flat(&two, i, 2 * sr_get_flat(&gw, i));
    e = check_rel_diff(&m->params[0].grad, &two);
    CHECK(e < tol, "%s %s plan %d: grad weight rel %g", c->name, sr_dtype_name(dt), plan, e);
    if (b) {
        CHECK_OK(sr_tensor_copy(&two, &gb));
        for (int64_t i = 0; i < sr_numel(&two); i++)
            sr_set_flat(&two, i, 2 * sr_get_flat(&gb, i));
        e = check_rel_diff(&m->params[1].grad, &two);
        CHECK(e < tol, "%s %s plan %d: grad bias rel %g", c->name, sr_dtype_name(dt), plan, e);
    }

    /* Stacked JVP, k = 2: primal rows are y, tangent rows W ⋆ v (no bias). */
    int64_t k = 2, xvs[4] = {c->n * (1 + k), c->cin, c->h, c->w};
    CHECK_OK(check_randn_dt(&xv, dt, 4, xvs, 8));
    memcpy(sr_data(&xv), sr_data(&x), (size_t)sr_numel(&x) * sr_dtype_size(dt));
    sr_run jr = SR_RUN_INIT;
    jr.n = c->n;
    jr.k = k;
    CHECK_OK(sr_module_jvp(m, &xv, &jr));
    CHECK_OK(sr_conv2d_ref(&xv, w, NULL, &cp, &yv));
    CHECK_OK(sr_tensor_narrow(&row, &m->out, 0, c->n));
    e = check_rel_diff(&row, &y);
    CHECK(e < tol, "%s %s plan %d: jvp primal rel %g", c->name, sr_dtype_name(dt), plan, e);
    CHECK_OK(sr_tensor_narrow(&row, &m->out, c->n, c->n * k));
    CHECK_OK(sr_tensor_narrow(&got, &yv, c->n, c->n * k));
    e = check_rel_diff(&row, &got);
    CHECK(e < tol, "%s %s plan %d: jvp tangent rel %g", c->name, sr_dtype_name(dt), plan, e);

    sr_tensor *all[] = {&x, &y, &xv, &yv, &gy, &gx, &gw, &gb, &two, &row, &got};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sr_tensor_free(all[i]);
    sr_module_release(m);
}

TEST(conv_fast_matches_ref_f32)
{
    for (int i = 0; i < NCASES; i++)
        for (int p = 0; p < NPLANS; p++) {
            fast_vs_ref(&cases[i], SR_F32, p, 1e-5);
            if (test_failed())
                return;
        }
}

TEST(conv_fast_matches_ref_f64)
{
    for (int i = 0; i < NCASES; i++)
        for (int p = 0; p < NPLANS; p++) {
            fast_vs_ref(&cases[i], SR_F64, p, 1e-12);
            if (test_failed())
                return;
        }
}

/* The reference itself against a hand-computed case, so the comparisons
 * above cannot pass with a reference that shares the fast path's bug. */
TEST(conv_ref_hand_computed)
{
    sr_tensor x = SR_TENSOR_INIT, w = SR_TENSOR_INIT, b = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&x, SR_F64, 4, (int64_t[]){1, 1, 3, 3}));
    CHECK_OK(sr_tensor_alloc(&w, SR_F64, 4, (int64_t[]){1, 1, 2, 2}));
    CHECK_OK(sr_tensor_alloc(&b, SR_F64, 1, (int64_t[]){1}));
    for (int i = 0; i < 9; i++)
        sr_f64(&x)[i] = i + 1; /* 1 2 3 / 4 5 6 / 7 8 9 */
    double wv[4] = {1, 10, 100, 1000};
    memcpy(sr_f64(&w), wv, sizeof wv);
    sr_f64(&b)[0] = 0.5;
    /* stride 2, padding 1: windows at (-1,-1), (-1,1), (1,-1), (1,1). */
    sr_conv2d_params p = {{2, 2}, {1, 1}, {1, 1}, 1, {1, 1}};
    CHECK_OK(sr_conv2d_ref(&x, &w, &b, &p, &y));
    CHECK(y.shape[2] == 2 && y.shape[3] == 2, "shape %s", SR_SHAPE(&y));
    double want[4] = {1000 * 1 + 0.5, 100 * 2 + 1000 * 3 + 0.5, 10 * 4 + 1000 * 7 + 0.5,
                      1 * 5 + 10 * 6 + 100 * 8 + 1000 * 9 + 0.5};
    for (int i = 0; i < 4; i++)
        CHECK(sr_f64(&y)[i] == want[i], "y[%d] = %g, want %g", i, sr_f64(&y)[i], want[i]);
    sr_tensor *all[] = {&x, &w, &b, &y};
    for (int i = 0; i < 4; i++)
        sr_tensor_free(all[i]);
}

/* Workspaces and outputs are reused across calls: batch sizes going down
 * then up (past the buffer size) must still give the reference answer, and
 * an output someone kept a reference to must not be overwritten. */
TEST(conv_buffer_reuse_across_batch_sizes)
{
    for (int dw = 0; dw < 2; dw++) {
        conv_case c = {"reuse", 4, 6, 3, 3, 1, 1, 1, 1, 1, 1, dw ? 2 : 1, 1, 0, 9, 11, 0, 0, 0};
        if (dw)
            c.cout = 4, c.groups = 4;
        sr_module *m = make_conv(&c, SR_F32, 0, 9);
        CHECK(m, "create: %s", sr_errmsg());
        sr_conv2d_params cp = params_of(&c);
        sr_tensor kept = SR_TENSOR_INIT, kept_ref = SR_TENSOR_INIT;
        int64_t ns[] = {3, 1, 7, 2};
        for (int t = 0; t < 4; t++) {
            sr_tensor x = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
            CHECK_OK(check_randn_dt(&x, SR_F32, 4, (int64_t[]){ns[t], 4, 9, 11}, 20 + (uint64_t)t));
            CHECK_OK(sr_conv2d_ref(&x, &m->params[0].value, &m->params[1].value, &cp, &y));
            sr_run run = SR_RUN_INIT;
            CHECK_OK(sr_module_forward(m, &x, &run));
            CHECK(m->out.shape[0] == ns[t], "batch %lld: out %s", (long long)ns[t], SR_SHAPE(&m->out));
            double e = check_rel_diff(&m->out, &y);
            CHECK(e < 1e-5, "groups %lld batch %lld: rel %g", (long long)c.groups, (long long)ns[t], e);
            if (t == 0) {
                sr_tensor_share(&kept, &m->out);
                CHECK_OK(sr_tensor_copy(&kept_ref, &y));
            }
            sr_tensor_free(&x);
            sr_tensor_free(&y);
        }
        double e = check_rel_diff(&kept, &kept_ref);
        CHECK(e < 1e-5, "kept output was overwritten: rel %g", e);
        sr_tensor_free(&kept);
        sr_tensor_free(&kept_ref);
        sr_module_release(m);
    }
}

#define MAKE_CONV(...) MAKE(sr_conv2d_create, "conv2d", __VA_ARGS__)

TEST(conv_params_init_and_describe)
{
    sr_module *m = MAKE_CONV("in_channels", "6", "out_channels", "4", "kernel_size", "3,5", "stride", "2", "padding",
                             "1,2", "groups", "2");
    CHECK(m, "create: %s", sr_errmsg());
    sr_param *w = sr_module_local_param(m, "weight"), *b = sr_module_local_param(m, "bias");
    CHECK(w && b, "weight/bias params missing");
    CHECK(w->value.ndim == 4 && w->value.shape[0] == 4 && w->value.shape[1] == 3 && w->value.shape[2] == 3 &&
              w->value.shape[3] == 5,
          "weight shape %s", SR_SHAPE(&w->value));
    CHECK(b->value.ndim == 1 && b->value.shape[0] == 4, "bias shape %s", SR_SHAPE(&b->value));
    sr_rng r;
    sr_rng_seed(&r, 1);
    sr_module_reset(m, &r);
    double bound = 1 / sqrt(3.0 * 3 * 5), mx = 0;
    for (int64_t i = 0; i < sr_numel(&w->value); i++)
        mx = fmax(mx, fabs(sr_get_flat(&w->value, i)));
    CHECK(mx <= bound && mx > 0.8 * bound, "weight max %g, bound %g", mx, bound);
    for (int64_t i = 0; i < 4; i++)
        CHECK(fabs(sr_get_flat(&b->value, i)) <= bound, "bias %g", sr_get_flat(&b->value, i));
    char buf[128];
    m->ops->describe(m, buf, sizeof buf);
    CHECK(strcmp(buf, "6 -> 4, k3x5 s2 p1x2 groups 2") == 0, "describe '%s'", buf);
    sr_module_release(m);
    m = MAKE_CONV("in_channels", "3", "out_channels", "2", "kernel_size", "1", "bias", "false");
    CHECK(m && m->nparams == 1, "bias=false still has %d params", m ? m->nparams : -1);
    sr_module_release(m);
}

TEST(conv_bad_input_is_an_error)
{
    sr_module *m = MAKE_CONV("in_channels", "3", "out_channels", "4", "kernel_size", "5");
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){2, 3, 32}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "conv2d: input (2,3,32) must be 4D (N,C,H,W)");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){2, 4, 8, 8}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "conv2d: input (2,4,8,8) has 4 channels, expected in_channels=3");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){2, 3, 4, 8}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "larger than the padded input 4x8 of (2,3,4,8)");
    CHECK_OK(sr_tensor_zeros(&x, SR_F64, 4, (int64_t[]){2, 3, 8, 8}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "conv2d: input is float64 but the parameters are float32");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){2, 3, 8, 8}));
    CHECK_OK(sr_module_forward(m, &x, &run)); /* without save */
    sr_tensor gy = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&gy, SR_F32, 4, (int64_t[]){2, 4, 4, 4}));
    CHECK_ERR(sr_module_backward(m, &gy, &run), "conv2d backward: forward was not run with save");
    sr_tensor_free(&gy);
    sr_tensor_free(&x);
    sr_module_release(m);

    CHECK(!MAKE_CONV("in_channels", "6", "out_channels", "4", "kernel_size", "3", "groups", "4"),
          "groups=4 with 6 channels accepted");
    CHECK(strstr(sr_errmsg(), "conv2d: groups=4 must divide in_channels=6 and out_channels=4"), "msg: %s",
          sr_errmsg());
    CHECK(!MAKE_CONV("in_channels", "3", "out_channels", "4"), "no kernel_size accepted");
    CHECK(strstr(sr_errmsg(), "kernel_size is required"), "msg: %s", sr_errmsg());
    CHECK(!MAKE_CONV("in_channels", "3", "out_channels", "4", "kernel_size", "3", "stride", "1,0"),
          "stride 0 accepted");
    CHECK(strstr(sr_errmsg(), "conv2d: option stride must be >= 1 (got 1x0)"), "msg: %s", sr_errmsg());
    CHECK(!MAKE_CONV("in_channels", "3", "out_channels", "4", "kernel_size", "3,3,3"),
          "3 kernel sizes accepted");
    CHECK(strstr(sr_errmsg(), "kernel_size"), "msg: %s", sr_errmsg());
    CHECK(!MAKE_CONV("in_channels", "3", "out_channels", "4", "kernel_size", "3", "padding", "-1"),
          "negative padding accepted");
    CHECK(strstr(sr_errmsg(), "padding must be >= 0"), "msg: %s", sr_errmsg());
    CHECK(!MAKE_CONV("in_channels", "3", "out_channels", "4", "kernel_size", "3", "split", "rows"),
          "split=rows accepted");
    CHECK(strstr(sr_errmsg(), "conv2d: option split must be \"auto\", \"images\" or \"gemm\" (got \"rows\")"),
          "msg: %s", sr_errmsg());
    CHECK(!MAKE_CONV("in_channels", "3", "out_channels", "4", "kernel_size", "3", "algo", "fft"),
          "algo=fft accepted");
    CHECK(strstr(sr_errmsg(), "conv2d: option algo must be \"auto\", \"im2col\", \"taps\" or \"winograd\" (got \"fft\")"),
          "msg: %s", sr_errmsg());
}

TEST(conv_empty_batch)
{
    for (int dw = 0; dw < 2; dw++) {
        sr_module *m = MAKE_CONV("in_channels", "4", "out_channels", "4", "kernel_size", "3", "padding", "1", "groups",
                                 dw ? "4" : "1");
        CHECK(m, "create: %s", sr_errmsg());
        sr_tensor x = SR_TENSOR_INIT, gy = SR_TENSOR_INIT;
        CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){0, 4, 5, 6}));
        sr_run run = SR_RUN_INIT;
        run.save = 1;
        run.param_grads = 1;
        CHECK_OK(sr_module_forward(m, &x, &run));
        CHECK(m->out.ndim == 4 && m->out.shape[0] == 0 && m->out.shape[1] == 4 && m->out.shape[2] == 5 &&
                  m->out.shape[3] == 6,
              "out %s", SR_SHAPE(&m->out));
        CHECK_OK(sr_tensor_zeros(&gy, SR_F32, 4, (int64_t[]){0, 4, 5, 6}));
        CHECK_OK(sr_module_backward(m, &gy, &run));
        CHECK(sr_same_shape(&m->gin, &x), "gin %s", SR_SHAPE(&m->gin));
        sr_tensor_free(&x);
        sr_tensor_free(&gy);
        sr_module_release(m);
    }
}

/* Geometry options reach the kernels unbounded (any integer an option
 * holds): paddings, kernels and strides whose extents overflow are errors
 * naming the layer, checked before any product is formed. */
TEST(conv_hostile_geometry_fails_cleanly)
{
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 4, (int64_t[]){1, 1, 4, 4}));
    static const char *const cases[][3] = {
        {"padding", "4000000000000000", "conv2d: padding"},
        {"dilation", "4000000000000000", "conv2d: kernel span"},
        {"padding", "3000000000", "conv2d: padded input plane: 6000000004 x 6000000004 is too large"},
    };
    for (int i = 0; i < 3; i++) {
        sr_module *m = MAKE_CONV("in_channels", "1", "out_channels", "1", "kernel_size", "3", cases[i][0],
                                 cases[i][1]);
        if (!m) { /* refused when built (a dilated span no input can fit) */
            CHECK(strstr(sr_errmsg(), cases[i][2]), "%s=%s: '%s'", cases[i][0], cases[i][1], sr_errmsg());
            continue;
        }
        sr_run run = SR_RUN_INIT;
        int rc = sr_module_forward(m, &x, &run);
        CHECK(rc != 0 && strstr(sr_errmsg(), cases[i][2]), "%s=%s: rc %d, '%s'", cases[i][0], cases[i][1], rc,
              sr_errmsg());
        sr_module_release(m);
    }
    /* a kernel far larger than any weight the machine holds */
    sr_module *m = MAKE_CONV("in_channels", "1", "out_channels", "1", "kernel_size", "4000000000000");
    CHECK(!m && strstr(sr_errmsg(), "too large"), "kernel 4e12: '%s'", sr_errmsg());
    sr_tensor_free(&x);
}
