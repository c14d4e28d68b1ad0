/* resize.c - resize2d: (N,C,H,W) -> (N,C,Ho,Wo) by nearest, bilinear or
 * bicubic interpolation, with the coordinate conventions of ONNX's Resize
 * (which name those of PyTorch's F.interpolate, TensorFlow and Paddle):
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
 *   upsample_bilinear2d does (its formula and order of operations); cubic:
 *   not clamped, the four neighbours floor(x) − 1 .. floor(x) + 2 (clamped
 *   to the edge) weighted by Keys' cubic convolution with coefficient a
 *   (−0.75: torch's bicubic and ONNX's default; −0.5: TensorFlow's) at
 *   t = x − floor(x), torch's upsample_bicubic2d and ONNX's formula; with
 *   exclude_outside (TensorFlow's) the neighbours outside the image weigh 0
 *   and the others are scaled to sum to 1.
 *
 * The scale s is the one given (ONNX's scales, torch's scale_factor), else
 * on/n; the output length is the size given, else floor(n·s).
 *
 * The map is linear and separable: per axis, each output index reads one
 * (nearest), two (linear) or four (cubic) input indices with fixed
 * weights, computed once per input size; an output pixel is the row taps'
 * weighted sum of the column taps' weighted sums (for linear exactly
 * torch's h0·(w0·a + w1·b) + h1·(w0·c + w1·d)).  So the JVP is the same map on the whole stack
 * [x; v], and backward scatters the weighted gradient back. */
#ifdef SR_REAL

/* y (planes, Ho, Wo) from x (planes, H, W) through the axis tables. */
static void SR_FN(resize_fwd)(real *y, const real *x, int64_t planes, const resize_tab *t)
{
    int64_t H = t->n[0], W = t->n[1], Ho = t->on[0], Wo = t->on[1];
    int T = t->taps;
    #pragma omp parallel for schedule(static) if (planes * Ho * Wo > RESIZE_OMP_MIN)
    for (int64_t p = 0; p < planes; p++) {
        const real *xp = x + p * H * W;
        real *yp = y + p * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; oh++) {
            real *yr = yp + oh * Wo;
            if (T == 1) {
                const real *r0 = xp + t->idx[0][oh] * W;
                for (int64_t ow = 0; ow < Wo; ow++)
                    yr[ow] = r0[t->idx[1][ow]];
                continue;
            }
            const int64_t *ih = t->idx[0] + oh * T;
            const double *wh = t->w[0] + oh * T;
            for (int64_t ow = 0; ow < Wo; ow++) {
                const int64_t *iw = t->idx[1] + ow * T;
                const double *ww = t->w[1] + ow * T;
                real v = 0;
                for (int i = 0; i < T; i++) {
                    const real *r = xp + ih[i] * W;
                    real s = 0;
                    for (int j = 0; j < T; j++)
                        s += (real)ww[j] * r[iw[j]];
                    v += (real)wh[i] * s;
                }
                yr[ow] = v;
            }
        }
    }
}

/* gx = the transpose of the map applied to gy (written). */
static void SR_FN(resize_bwd)(real *gx, const real *gy, int64_t planes, const resize_tab *t)
{
    int64_t H = t->n[0], W = t->n[1], Ho = t->on[0], Wo = t->on[1];
    int T = t->taps;
    #pragma omp parallel for schedule(static) if (planes * Ho * Wo > RESIZE_OMP_MIN)
    for (int64_t p = 0; p < planes; p++) {
        real *gp = gx + p * H * W;
        const real *yp = gy + p * Ho * Wo;
        memset(gp, 0, (size_t)(H * W) * sizeof *gp);
        for (int64_t oh = 0; oh < Ho; oh++) {
            const real *gr = yp + oh * Wo;
            if (T == 1) {
                real *r0 = gp + t->idx[0][oh] * W;
                for (int64_t ow = 0; ow < Wo; ow++)
                    r0[t->idx[1][ow]] += gr[ow];
                continue;
            }
            const int64_t *ih = t->idx[0] + oh * T;
            const double *wh = t->w[0] + oh * T;
            for (int64_t ow = 0; ow < Wo; ow++) {
                const int64_t *iw = t->idx[1] + ow * T;
                const double *ww = t->w[1] + ow * T;
                real g = gr[ow];
                for (int i = 0; i < T; i++) {
                    real *r = gp + ih[i] * W, h = (real)wh[i];
                    for (int j = 0; j < T; j++)
                        r[iw[j]] += h * (real)ww[j] * g;
                }
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
enum { MODE_NEAREST, MODE_LINEAR, MODE_CUBIC };
static const char *const mode_names[] = {"nearest", "linear", "cubic", NULL};

/* Per axis (0: height, 1: width): each output index's `taps` input indices
 * and weights (idx[a][o·taps + i], w[a][...]), for input lengths n. */
typedef struct {
    int taps;
    int64_t n[2], on[2];
    int64_t *idx[2];
    double *w[2];
} resize_tab;

#define SR_GENERIC_FILE "nn/resize.c"
#include "base/generic.h"

typedef struct {
    int mode, coord, nearest, exclude_outside;
    double cubic_a;    /* Keys' coefficient */
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
        free(t->idx[a]);
        t->idx[a] = NULL;
        t->w[a] = NULL;
    }
    t->n[0] = t->n[1] = 0;
}

/* Keys' cubic convolution weights of the neighbours −1, 0, 1, 2 at t in
 * [0, 1), as torch's get_cubic_upsample_coefficients writes them. */
static void cubic_weights(double A, double t, double *w)
{
    double x1 = t, x2 = 1 - t;
    w[0] = ((A * (x1 + 1) - 5 * A) * (x1 + 1) + 8 * A) * (x1 + 1) - 4 * A;
    w[1] = ((A + 2) * x1 - (A + 3)) * x1 * x1 + 1;
    w[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    w[3] = ((A * (x2 + 1) - 5 * A) * (x2 + 1) + 8 * A) * (x2 + 1) - 4 * A;
}

/* The tables for input planes H x W (kept while the size does not change). */
static int resize_plan(resize_impl *c, int64_t H, int64_t W)
{
    resize_tab *t = &c->tab;
    if (t->idx[0] && t->n[0] == H && t->n[1] == W)
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
        /* one block: the indices (int64) and weights (double), taps per entry */
        int T = t->taps;
        char *blk = malloc((size_t)on * (size_t)T * (sizeof(int64_t) + sizeof(double)));
        if (!blk) {
            tab_free(t);
            return sr_fail("resize2d: out of memory");
        }
        t->idx[a] = (int64_t *)blk;
        t->w[a] = (double *)(t->idx[a] + on * T);
        t->on[a] = on;
        t->n[a] = n[a];
        for (int64_t o = 0; o < on; o++) {
            int64_t *ix = t->idx[a] + o * T;
            double *wx = t->w[a] + o * T;
            double x = source_coord(c, o, n[a], s);
            x = x < -1 ? -1 : x > (double)n[a] ? (double)n[a] : x; /* any scale: the casts stay in range */
            if (c->mode == MODE_NEAREST) {
                int64_t i = round_nearest(c->nearest, x);
                ix[0] = i < 0 ? 0 : i > n[a] - 1 ? n[a] - 1 : i;
                wx[0] = 1;
                continue;
            }
            if (c->mode == MODE_CUBIC) {
                double f = floor(x), sum = 0;
                cubic_weights(c->cubic_a, x - f, wx);
                for (int i = 0; i < 4; i++) {
                    int64_t j = (int64_t)f - 1 + i;
                    if (c->exclude_outside && (j < 0 || j > n[a] - 1))
                        wx[i] = 0;
                    sum += wx[i];
                    ix[i] = j < 0 ? 0 : j > n[a] - 1 ? n[a] - 1 : j;
                }
                for (int i = 0; c->exclude_outside && sum != 0 && i < 4; i++)
                    wx[i] /= sum;
                continue;
            }
            x = x < 0 ? 0 : x > (double)(n[a] - 1) ? (double)(n[a] - 1) : x;
            int64_t i = (int64_t)x;
            ix[0] = i;
            ix[1] = i + (i < n[a] - 1);
            wx[1] = x - (double)i;
            wx[0] = 1 - wx[1];
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
    if (!c->tab.idx[0])
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
    if (c->mode == MODE_NEAREST && len > 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, ", %s", nearest_names[c->nearest]);
    if (c->mode == MODE_CUBIC && len > 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, ", a %g%s", c->cubic_a, c->exclude_outside ? ", exclude outside" : "");
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
        sr_opt_choice(o, "nearest", nearest_names, &cfg.nearest) ||
        sr_opt_num(o, "cubic_a", -0.75, &cfg.cubic_a) || sr_opt_bool(o, "exclude_outside", 0, &cfg.exclude_outside))
        return NULL;
    if (!isfinite(cfg.cubic_a)) {
        sr_fail("resize2d: cubic_a must be finite (got %g)", cfg.cubic_a);
        return NULL;
    }
    cfg.tab.taps = cfg.mode == MODE_CUBIC ? 4 : cfg.mode == MODE_LINEAR ? 2 : 1;
    sr_module *m = sr_module_new(&resize_ops, sizeof cfg);
    if (m)
        *(resize_impl *)m->impl = cfg;
    return m;
}

#endif
