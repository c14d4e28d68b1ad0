/* resize.c - resize2d: (N,C,H,W) -> (N,C,Ho,Wo) by nearest or bilinear
 * interpolation, with the coordinate conventions of ONNX's Resize (which
 * name those of PyTorch's F.interpolate, TensorFlow and Paddle):
 *
 *   source coordinate of output index o (s the scale, n the input length,
 *   r = n·s the resized length, unrounded as ONNX has it):
 *     half_pixel            (o + 0.5)/s − 0.5        (torch align_corners=False)
 *     pytorch_half_pixel    the same, 0 when r <= 1
 *     asymmetric            o/s                      (torch mode="nearest")
 *     align_corners         o·(n − 1)/(r − 1), 0 when r = 1
 *     tf_half_pixel_for_nn  (o + 0.5)/s
 *   nearest: that coordinate rounded (round_prefer_floor, round_prefer_ceil,
 *   floor, ceil) and clamped to [0, n − 1]; linear: clamped to [0, n − 1],
 *   then the two neighbours weighted by the distance, as torch's
 *   upsample_bilinear2d does (its formula and order of operations).
 *
 * The scale s is the one given (ONNX's scales, torch's scale_factor), else
 * on/n; the output length is the size given, else floor(n·s).
 *
 * The map is linear and separable: per axis, each output index reads one
 * (nearest) or two (linear) input indices with fixed weights, computed
 * once per input size.  So the JVP is the same map on the whole stack
 * [x; v], and backward scatters the weighted gradient back. */
#ifdef SR_REAL

/* y (planes, Ho, Wo) from x (planes, H, W) through the axis tables. */
static void SR_FN(resize_fwd)(real *y, const real *x, int64_t planes, const resize_tab *t)
{
    int64_t H = t->n[0], W = t->n[1], Ho = t->on[0], Wo = t->on[1];
    #pragma omp parallel for schedule(static) if (planes * Ho * Wo > RESIZE_OMP_MIN)
    for (int64_t p = 0; p < planes; p++) {
        const real *xp = x + p * H * W;
        real *yp = y + p * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; oh++) {
            const real *r0 = xp + t->i0[0][oh] * W, *r1 = xp + t->i1[0][oh] * W;
            real *yr = yp + oh * Wo;
            if (!t->linear) {
                for (int64_t ow = 0; ow < Wo; ow++)
                    yr[ow] = r0[t->i0[1][ow]];
                continue;
            }
            real h0 = (real)t->w0[0][oh], h1 = (real)t->w1[0][oh];
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t a = t->i0[1][ow], b = t->i1[1][ow];
                real w0 = (real)t->w0[1][ow], w1 = (real)t->w1[1][ow];
                yr[ow] = h0 * (w0 * r0[a] + w1 * r0[b]) + h1 * (w0 * r1[a] + w1 * r1[b]);
            }
        }
    }
}

/* gx = the transpose of the map applied to gy (written). */
static void SR_FN(resize_bwd)(real *gx, const real *gy, int64_t planes, const resize_tab *t)
{
    int64_t H = t->n[0], W = t->n[1], Ho = t->on[0], Wo = t->on[1];
    #pragma omp parallel for schedule(static) if (planes * Ho * Wo > RESIZE_OMP_MIN)
    for (int64_t p = 0; p < planes; p++) {
        real *gp = gx + p * H * W;
        const real *yp = gy + p * Ho * Wo;
        memset(gp, 0, (size_t)(H * W) * sizeof *gp);
        for (int64_t oh = 0; oh < Ho; oh++) {
            real *r0 = gp + t->i0[0][oh] * W, *r1 = gp + t->i1[0][oh] * W;
            const real *gr = yp + oh * Wo;
            if (!t->linear) {
                for (int64_t ow = 0; ow < Wo; ow++)
                    r0[t->i0[1][ow]] += gr[ow];
                continue;
            }
            real h0 = (real)t->w0[0][oh], h1 = (real)t->w1[0][oh];
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t a = t->i0[1][ow], b = t->i1[1][ow];
                real w0 = (real)t->w0[1][ow], w1 = (real)t->w1[1][ow], g = gr[ow];
                r0[a] += h0 * w0 * g;
                r0[b] += h0 * w1 * g;
                r1[a] += h1 * w0 * g;
                r1[b] += h1 * w1 * g;
            }
        }
    }
}

#else /* generic part */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"

#define RESIZE_OMP_MIN 32768

enum { COORD_HALF_PIXEL, COORD_PYTORCH_HALF_PIXEL, COORD_ASYMMETRIC, COORD_ALIGN_CORNERS, COORD_TF_HALF_PIXEL_NN };
static const char *const coord_names[] = {"half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners",
                                          "tf_half_pixel_for_nn", NULL};
enum { NEAREST_ROUND_PREFER_FLOOR, NEAREST_ROUND_PREFER_CEIL, NEAREST_FLOOR, NEAREST_CEIL };
static const char *const nearest_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
static const char *const mode_names[] = {"nearest", "linear", NULL};

/* Per axis (0: height, 1: width): each output index's input indices and
 * weights (linear: i0·w0 + i1·w1; nearest: i0), for input lengths n. */
typedef struct {
    int linear;
    int64_t n[2], on[2];
    int64_t *i0[2], *i1[2];
    double *w0[2], *w1[2];
} resize_tab;

#define SR_GENERIC_FILE "nn/resize.c"
#include "base/generic.h"

typedef struct {
    int mode, coord, nearest;
    int64_t size[2];   /* output size, or 0: floor(n·scale) */
    double scale[2];   /* 0: on/n */
    resize_tab tab;    /* for the last input size */
    int64_t in_shape[4];
} resize_impl;

static double source_coord(const resize_impl *c, int64_t o, int64_t n, double s)
{
    double r = (double)n * s;
    switch (c->coord) {
    case COORD_PYTORCH_HALF_PIXEL:
        return r > 1 ? (o + 0.5) / s - 0.5 : 0;
    case COORD_ASYMMETRIC:
        return o / s;
    case COORD_ALIGN_CORNERS:
        return r != 1 ? (double)o * (double)(n - 1) / (r - 1) : 0;
    case COORD_TF_HALF_PIXEL_NN:
        return (o + 0.5) / s;
    default:
        return (o + 0.5) / s - 0.5;
    }
}

static int64_t round_nearest(int mode, double x)
{
    double f = floor(x);
    switch (mode) {
    case NEAREST_FLOOR:
        return (int64_t)f;
    case NEAREST_CEIL:
        return (int64_t)ceil(x);
    case NEAREST_ROUND_PREFER_CEIL:
        return (int64_t)(x - f >= 0.5 ? f + 1 : f);
    default:
        return (int64_t)(x - f > 0.5 ? f + 1 : f);
    }
}

static void tab_free(resize_tab *t)
{
    for (int a = 0; a < 2; a++) {
        free(t->i0[a]);
        t->i0[a] = t->i1[a] = NULL;
        t->w0[a] = t->w1[a] = NULL;
    }
    t->n[0] = t->n[1] = 0;
}

/* The tables for input planes H x W (kept while the size does not change). */
static int resize_plan(resize_impl *c, int64_t H, int64_t W)
{
    resize_tab *t = &c->tab;
    if (t->i0[0] && t->n[0] == H && t->n[1] == W)
        return 0;
    tab_free(t);
    int64_t n[2] = {H, W};
    for (int a = 0; a < 2; a++) {
        double s = c->scale[a];
        int64_t on = c->size[a] ? c->size[a] : (int64_t)floor((double)n[a] * s);
        if (on < 1 || on > ((int64_t)1 << 30))
            return sr_fail("resize2d: input %lldx%lld gives output length %lld on axis %d", (long long)H,
                           (long long)W, (long long)on, a + 2);
        if (!(s > 0))
            s = (double)on / (double)n[a];
        /* one block: i0, i1 (int64) and w0, w1 (double) of on entries each */
        char *blk = malloc((size_t)on * 2 * (sizeof(int64_t) + sizeof(double)));
        if (!blk) {
            tab_free(t);
            return sr_fail("resize2d: out of memory");
        }
        t->i0[a] = (int64_t *)blk;
        t->i1[a] = t->i0[a] + on;
        t->w0[a] = (double *)(t->i1[a] + on);
        t->w1[a] = t->w0[a] + on;
        t->on[a] = on;
        t->n[a] = n[a];
        for (int64_t o = 0; o < on; o++) {
            double x = source_coord(c, o, n[a], s);
            x = x < -1 ? -1 : x > (double)n[a] ? (double)n[a] : x; /* any scale: the casts stay in range */
            if (!t->linear) {
                int64_t i = round_nearest(c->nearest, x);
                i = i < 0 ? 0 : i > n[a] - 1 ? n[a] - 1 : i;
                t->i0[a][o] = t->i1[a][o] = i;
                t->w0[a][o] = 1, t->w1[a][o] = 0;
                continue;
            }
            x = x < 0 ? 0 : x > (double)(n[a] - 1) ? (double)(n[a] - 1) : x;
            int64_t i = (int64_t)x;
            t->i0[a][o] = i;
            t->i1[a][o] = i + (i < n[a] - 1);
            t->w1[a][o] = x - (double)i;
            t->w0[a][o] = 1 - t->w1[a][o];
        }
    }
    return 0;
}

static int resize_out(sr_module *m, const sr_tensor *x, sr_run *run)
{
    resize_impl *c = m->impl;
    if (x->ndim != 4)
        return sr_fail("resize2d: input %s must be 4D (N,C,H,W)", SR_SHAPE(x));
    if (x->shape[2] < 1 || x->shape[3] < 1)
        return sr_fail("resize2d: input %s has an empty plane", SR_SHAPE(x));
    if (resize_plan(c, x->shape[2], x->shape[3]))
        return -1;
    memcpy(c->in_shape, x->shape, sizeof c->in_shape);
    int64_t ys[4] = {x->shape[0], x->shape[1], c->tab.on[0], c->tab.on[1]};
    return sr_module_output(m, run, x->dtype, 4, ys);
}

static int resize_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    resize_impl *c = m->impl;
    if (resize_out(m, x, run))
        return -1;
    SR_DISPATCH(x->dtype, resize_fwd, sr_data(&m->out), sr_data(x), x->shape[0] * x->shape[1], &c->tab);
    return 0;
}

/* linear: the JVP is the map on every row */
static int resize_jvp(sr_module *m, const sr_tensor *xv, sr_run *run) { return resize_forward(m, xv, run); }

static int resize_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    resize_impl *c = m->impl;
    if (!c->tab.i0[0])
        return sr_fail("resize2d backward: no forward ran");
    if (gy->ndim != 4 || gy->shape[2] != c->tab.on[0] || gy->shape[3] != c->tab.on[1])
        return sr_fail("resize2d backward: gradient %s does not match the output", SR_SHAPE(gy));
    int64_t shape[4] = {gy->shape[0], gy->shape[1], c->tab.n[0], c->tab.n[1]};
    if (sr_module_grad_input(m, run, gy->dtype, 4, shape))
        return -1;
    SR_DISPATCH(gy->dtype, resize_bwd, sr_data(&m->gin), sr_data(gy), gy->shape[0] * gy->shape[1], &c->tab);
    return 0;
}

static void resize_free(sr_module *m) { tab_free(&((resize_impl *)m->impl)->tab); }

static void resize_describe(const sr_module *m, char *buf, size_t n)
{
    const resize_impl *c = m->impl;
    int len = c->size[0] ? snprintf(buf, n, "-> %lldx%lld", (long long)c->size[0], (long long)c->size[1])
                         : snprintf(buf, n, "x%g,%g", c->scale[0], c->scale[1]);
    if (len > 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, " %s, %s", mode_names[c->mode], coord_names[c->coord]);
    if (!c->mode && len > 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, ", %s", nearest_names[c->nearest]);
}

static const sr_module_ops resize_ops = {
    .kind = "resize2d", .forward = resize_forward, .jvp = resize_jvp, .backward = resize_backward,
    .free_impl = resize_free, .describe = resize_describe, .is_affine = sr_module_affine_always
};

sr_module *sr_resize2d_create(const sr_opts *o)
{
    resize_impl cfg = {0};
    double v[2];
    int ns = 0, nf = 0;
    int rs = o->get_nums(o, "size", v, 2, &ns);
    if (rs < 0)
        return NULL;
    for (int i = 0; rs && i < 2; i++) {
        double d = v[ns == 1 ? 0 : i];
        if (d != floor(d) || d < 1 || d > (double)((int64_t)1 << 30)) {
            sr_fail("resize2d: size entries must be integers from 1 to 2^30 (got %g)", d);
            return NULL;
        }
        cfg.size[i] = (int64_t)d;
    }
    int rf = o->get_nums(o, "scale", v, 2, &nf);
    if (rf < 0)
        return NULL;
    for (int i = 0; rf && i < 2; i++) {
        double d = v[nf == 1 ? 0 : i];
        if (!(d > 0) || d > 1e6) {
            sr_fail("resize2d: scale entries must be in (0, 1e6] (got %g)", d);
            return NULL;
        }
        cfg.scale[i] = d;
    }
    if (!rs && !rf) {
        sr_fail("resize2d: give size={h,w} or scale={sh,sw}");
        return NULL;
    }
    if (sr_opt_choice(o, "mode", mode_names, &cfg.mode) || sr_opt_choice(o, "coordinate", coord_names, &cfg.coord) ||
        sr_opt_choice(o, "nearest", nearest_names, &cfg.nearest))
        return NULL;
    cfg.tab.linear = cfg.mode == 1;
    sr_module *m = sr_module_new(&resize_ops, sizeof cfg);
    if (m)
        *(resize_impl *)m->impl = cfg;
    return m;
}

#endif
