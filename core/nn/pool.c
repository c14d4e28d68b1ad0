/* pool.c - spatial pooling and shape-only layers:
 *   maxpool2d, avgpool2d, adaptive_avgpool2d   (N,C,H,W) -> (N,C,Ho,Wo)
 *   flatten                                     (N,C,H,W) -> (N,C*H*W), a view
 *   permute                                     any order of dims 1.. (dim 0 stays the batch)
 *
 * Semantics follow PyTorch (dilation 1): max-pool padding acts as -inf,
 * average-pool padding as zeros that count in the divisor unless
 * count_include_pad=false, and padding may be at most half the kernel, so
 * every window holds at least one real pixel.  The output size is floored,
 * or with ceil_mode rounded up, less a last window that would start in the
 * padding after the input.  Padding may differ before and after the input
 * ({top, left, bottom, right}, as ONNX's pads).
 *
 * Average pools and permutes are linear, so their JVP is the same op on the
 * whole stack [x; v].  Max pooling is piecewise linear: the primal rows
 * record their argmax and each tangent row gathers at its primal's argmax,
 * which is exactly torch's forward-mode rule (ties: the first maximum).
 * Under run->directional a window whose maximum ties (kernels/kink.h:
 * within SR_TIED) gives the largest tangent among its tied values. */
#ifdef SR_REAL

/* One output element by the definition: the window in row-major order. */
static inline void SR_FN(maxpool_one)(real *y, int32_t *ix, const real *xp, int64_t W, int64_t h0,
                                      int64_t h1, int64_t w0, int64_t w1)
{
    int32_t bi = (int32_t)(h0 * W + w0);
    real best = -(real)INFINITY;
    for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) {
            real v = xp[h * W + w];
            if (v > best || v != v) {
                best = v;
                bi = (int32_t)(h * W + w);
            }
        }
    *y = best;
    *ix = bi;
}

/* y (planes,Ho,Wo) = window max of x (planes,H,W); idx = h*W+w of each max
 * inside its plane.  `v > best || isnan(v)` is PyTorch's comparison: the
 * first maximum wins ties and a NaN propagates.
 *
 * Columns whose window lies inside the row run vectorised across ow: each
 * kernel tap (h, j) updates all of them with a select, visiting every
 * window in the same row-major order as the scalar loop (so tie-breaking is
 * unchanged).  On real data the comparison is a coin flip, so the branchy
 * per-window loop mispredicts far more than it computes. */
static void SR_FN(maxpool_fwd)(real *y, int32_t *idx, const real *x, int64_t planes,
                               const pool_geom *g)
{
    int64_t H = g->h, W = g->w, Ho = g->oh, Wo = g->ow, sw = g->sw, pw = g->pw, kw = g->kw;
    /* interior columns [lo, hi): ow*sw - pw >= 0 and ow*sw - pw + kw <= W */
    int64_t lo = (pw + sw - 1) / sw, hi = W + pw >= kw ? (W + pw - kw) / sw + 1 : 0;
    if (hi > Wo)
        hi = Wo;
    if (lo > hi)
        lo = hi;
    #pragma omp parallel for if (planes * Ho * Wo * g->kh * g->kw > POOL_OMP_MIN)
    for (int64_t p = 0; p < planes; p++) {
        const real *xp = x + p * H * W;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t h0, h1, hc, w0, w1, wc;
            pool_window(g, 0, oh, &h0, &h1, &hc);
            real *restrict yr = y + (p * Ho + oh) * Wo;
            int32_t *restrict ir = idx + (p * Ho + oh) * Wo;
            for (int64_t ow = 0; ow < Wo; ow++) {
                if (ow == lo)
                    ow = hi;
                if (ow >= Wo)
                    break;
                pool_window(g, 1, ow, &w0, &w1, &wc);
                SR_FN(maxpool_one)(yr + ow, ir + ow, xp, W, h0, h1, w0, w1);
            }
            for (int64_t ow = lo; ow < hi; ow++) {
                yr[ow] = -(real)INFINITY;
                ir[ow] = (int32_t)(h0 * W + ow * sw - pw);
            }
            for (int64_t h = h0; h < h1; h++)
                for (int64_t j = 0; j < kw; j++) {
                    /* offset of column 0's tap; off + ow*sw is inside the
                     * plane for every interior column */
                    int64_t off = h * W - pw + j;
                    #pragma omp simd
                    for (int64_t ow = lo; ow < hi; ow++) {
                        real v = xp[off + ow * sw];
                        int take = (v > yr[ow]) | (v != v);
                        yr[ow] = take ? v : yr[ow];
                        ir[ow] = take ? (int32_t)(off + ow * sw) : ir[ow];
                    }
                }
        }
    }
}

/* The window max of maxpool_fwd without the argmax, for forwards that
 * neither train nor differentiate (the profile engine's batches): the max
 * is separable, so each output row takes the column max of its kh input
 * rows (contiguous, full vectors) and then the max of kw taps along that
 * one row.  The argmax pass reads every tap of every window with a select
 * on the value and the index: ResNet-50's 112x112 stem pool took 2.5% of
 * a forward that way.  `v > m || v != v` keeps PyTorch's NaN propagation;
 * with no indices tie order cannot show.  Rows up to POOL_ROW_MAX wide
 * (padding included); maxpool_values returns 0 if a row is wider. */
#define POOL_ROW_MAX 4096
static int SR_FN(maxpool_values)(real *y, const real *x, int64_t planes, const pool_geom *g)
{
    const int64_t H = g->h, W = g->w, Ho = g->oh, Wo = g->ow, sw = g->sw, pw = g->pw, kw = g->kw;
    /* the last window may reach past the input by more than pw (ceil_mode) */
    const int64_t pr = (Wo - 1) * sw + kw - pw - W > 0 ? (Wo - 1) * sw + kw - pw - W : 0;
    if (W + pw + pr > POOL_ROW_MAX)
        return 0;
    #pragma omp parallel for if (planes * Ho * Wo * g->kh * g->kw > POOL_OMP_MIN)
    for (int64_t p = 0; p < planes; p++) {
        real row[POOL_ROW_MAX]; /* the column max, with -inf padding either side */
        real *col = row + pw;
        const real *xp = x + p * H * W;
        for (int64_t j = 0; j < pw; j++)
            row[j] = -(real)INFINITY;
        for (int64_t j = 0; j < pr; j++)
            col[W + j] = -(real)INFINITY;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t h0, h1, hc;
            pool_window(g, 0, oh, &h0, &h1, &hc);
            memcpy(col, xp + h0 * W, (size_t)W * sizeof *col);
            for (int64_t h = h0 + 1; h < h1; h++) {
                const real *xr = xp + h * W;
                #pragma omp simd
                for (int64_t w = 0; w < W; w++)
                    col[w] = xr[w] > col[w] || xr[w] != xr[w] ? xr[w] : col[w];
            }
            real *restrict yr = y + (p * Ho + oh) * Wo;
            #pragma omp simd
            for (int64_t ow = 0; ow < Wo; ow++)
                yr[ow] = row[ow * sw];
            for (int64_t j = 1; j < kw; j++) {
                #pragma omp simd
                for (int64_t ow = 0; ow < Wo; ow++) {
                    real v = row[ow * sw + j];
                    yr[ow] = v > yr[ow] || v != v ? v : yr[ow];
                }
            }
        }
    }
    return 1;
}

/* Tangent plane q (of tangent row q / C) reads its primal plane's argmax:
 * primal plane = (row / k) * C + channel. */
static void SR_FN(maxpool_gather)(real *y, const real *v, const int32_t *idx, int64_t tplanes,
                                  int64_t C, int64_t k, int64_t HW, int64_t HoWo)
{
    #pragma omp parallel for if (tplanes * HoWo > POOL_OMP_MIN)
    for (int64_t q = 0; q < tplanes; q++) {
        const int32_t *ip = idx + ((q / C) / k * C + q % C) * HoWo;
        const real *vp = v + q * HW;
        real *yp = y + q * HoWo;
        for (int64_t o = 0; o < HoWo; o++)
            yp[o] = vp[ip[o]];
    }
}

/* The directional rule's ties (kernels/kink.h): idx[o] becomes ~idx[o]
 * (negative) where another value of o's window ties with its maximum y[o]
 * (SR_TIED at the plane's largest magnitude, kept in scale[plane]); each plane's tied windows are added to its primal row's
 * counts (C planes a row), exact ones to ties, the others to near too. */
static void SR_FN(maxpool_ties)(int32_t *idx, double *scale, const real *y, const real *x, int64_t planes,
                                int64_t C, const pool_geom *g, sr_kinks *kinks)
{
    int64_t H = g->h, W = g->w, Ho = g->oh, Wo = g->ow;
    #pragma omp parallel for if (planes * Ho * Wo * g->kh * g->kw > POOL_OMP_MIN)
    for (int64_t p = 0; p < planes; p++) {
        const real *xp = x + p * H * W, *yp = y + p * Ho * Wo;
        int32_t *ip = idx + p * Ho * Wo;
        int64_t exact = 0, near = 0;
        real sc = 0;
        for (int64_t e = 0; e < H * W; e++)
            sc = SR_FABS(xp[e]) > sc ? SR_FABS(xp[e]) : sc;
        scale[p] = (double)sc;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t h0, h1, hc, w0, w1, wc;
            pool_window(g, 0, oh, &h0, &h1, &hc);
            for (int64_t ow = 0; ow < Wo; ow++) {
                pool_window(g, 1, ow, &w0, &w1, &wc);
                real mx = yp[oh * Wo + ow];
                int32_t at = ip[oh * Wo + ow];
                int tied = 0, within = 0;
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++) {
                        real v = xp[h * W + w];
                        if (h * W + w != at && SR_TIED(v, mx, sc)) {
                            tied = 1;
                            within |= v != mx;
                        }
                    }
                if (tied) {
                    ip[oh * Wo + ow] = ~at;
                    exact += !within;
                    near += within;
                }
            }
        }
        if (kinks)
            sr_kinks_add(&kinks[p / C], exact + near, near, 0);
    }
}

/* maxpool_gather under the directional rule: at a window marked tied by
 * maxpool_ties, the largest tangent among the values tied with the
 * maximum. */
static void SR_FN(maxpool_gather_ties)(real *y, const real *v, const int32_t *idx, const double *scale, const real *x,
                                       const real *ymax, int64_t tplanes, int64_t C, int64_t k, const pool_geom *g)
{
    int64_t H = g->h, W = g->w, Ho = g->oh, Wo = g->ow;
    #pragma omp parallel for if (tplanes * Ho * Wo > POOL_OMP_MIN)
    for (int64_t q = 0; q < tplanes; q++) {
        int64_t pp = (q / C) / k * C + q % C; /* the primal plane */
        const int32_t *ip = idx + pp * Ho * Wo;
        const real *vp = v + q * H * W, *xp = x + pp * H * W, *mp = ymax + pp * Ho * Wo;
        real *yp = y + q * Ho * Wo;
        for (int64_t o = 0; o < Ho * Wo; o++) {
            if (ip[o] >= 0) {
                yp[o] = vp[ip[o]];
                continue;
            }
            int64_t h0, h1, hc, w0, w1, wc;
            pool_window(g, 0, o / Wo, &h0, &h1, &hc);
            pool_window(g, 1, o % Wo, &w0, &w1, &wc);
            real best = vp[~ip[o]];
            for (int64_t h = h0; h < h1; h++)
                for (int64_t w = w0; w < w1; w++)
                    if (SR_TIED(xp[h * W + w], mp[o], (real)scale[pp]) && vp[h * W + w] > best)
                        best = vp[h * W + w];
            yp[o] = best;
        }
    }
}

/* gx (planes,H,W) = scatter-add of gy at the argmax (windows may overlap). */
static void SR_FN(maxpool_scatter)(real *gx, const real *gy, const int32_t *idx, int64_t planes,
                                   int64_t HW, int64_t HoWo)
{
    #pragma omp parallel for if (planes * (HW + HoWo) > POOL_OMP_MIN)
    for (int64_t p = 0; p < planes; p++) {
        real *gp = gx + p * HW;
        const real *yp = gy + p * HoWo;
        const int32_t *ip = idx + p * HoWo;
        for (int64_t e = 0; e < HW; e++)
            gp[e] = 0;
        for (int64_t o = 0; o < HoWo; o++)
            gp[ip[o]] += yp[o];
    }
}

/* y = window sum / divisor; the divisor factorises over the two axes for
 * every mode (padded counts, real-pixel counts, adaptive bins). */
static void SR_FN(avgpool_fwd)(real *y, const real *x, int64_t planes, const pool_geom *g)
{
    int64_t H = g->h, W = g->w, Ho = g->oh, Wo = g->ow;
    #pragma omp parallel for if (planes * H * W > POOL_OMP_MIN)
    for (int64_t p = 0; p < planes; p++) {
        const real *xp = x + p * H * W;
        real *yp = y + p * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t h0, h1, hc;
            pool_window(g, 0, oh, &h0, &h1, &hc);
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t w0, w1, wc;
                pool_window(g, 1, ow, &w0, &w1, &wc);
                real s = 0;
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++)
                        s += xp[h * W + w];
                yp[oh * Wo + ow] = s / (real)(hc * wc);
            }
        }
    }
}

/* The adjoint: each output spreads gy/divisor over its window. */
static void SR_FN(avgpool_bwd)(real *gx, const real *gy, int64_t planes, const pool_geom *g)
{
    int64_t H = g->h, W = g->w, Ho = g->oh, Wo = g->ow;
    #pragma omp parallel for if (planes * H * W > POOL_OMP_MIN)
    for (int64_t p = 0; p < planes; p++) {
        real *gp = gx + p * H * W;
        const real *yp = gy + p * Ho * Wo;
        for (int64_t e = 0; e < H * W; e++)
            gp[e] = 0;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t h0, h1, hc;
            pool_window(g, 0, oh, &h0, &h1, &hc);
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t w0, w1, wc;
                pool_window(g, 1, ow, &w0, &w1, &wc);
                real d = yp[oh * Wo + ow] / (real)(hc * wc);
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++)
                        gp[h * W + w] += d;
            }
        }
    }
}

/* y[r, j1..] = x[r, j_perm...]: walk y in order, reading x through the
 * permuted strides sp (sp[d] = x stride of the input dim that lands at d). */
static void SR_FN(permute_copy)(real *y, const real *x, int nd, const int64_t *oshape,
                                const int64_t *sp, int64_t rows, int64_t rowsize)
{
    int64_t inner = oshape[nd - 1], istep = sp[nd - 1];
    #pragma omp parallel for if (rows * rowsize > POOL_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const real *xr = x + r * rowsize;
        real *yr = y + r * rowsize;
        int64_t j[SR_MAXDIM] = {0}, off = 0;
        for (int64_t e = 0; e < rowsize; e += inner) {
            for (int64_t i = 0; i < inner; i++)
                yr[e + i] = xr[off + i * istep];
            /* Odometer over the outer output dims 1 .. nd-2. */
            for (int d = nd - 2; d >= 1; d--) {
                off += sp[d];
                if (++j[d] < oshape[d])
                    break;
                off -= sp[d] * oshape[d];
                j[d] = 0;
            }
        }
    }
}

#else /* generic part */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "nn/layers.h"

/* Below this many inner-loop steps a parallel region costs more than it saves. */
#define POOL_OMP_MIN 32768

enum { POOL_MAX, POOL_AVG, POOL_ADAPTIVE };

/* Resolved geometry of one call. */
typedef struct {
    int kind, include_pad;
    int64_t h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
    int64_t pb, pr; /* padding after the input (ph, pw: before) */
} pool_geom;

/* Window of output o along axis 0 (rows) or 1 (cols): input range [lo, hi)
 * and the divisor's factor for this axis.  Fixed windows: PyTorch's padded
 * count is end - start before clipping to the input, with the end clipped
 * to size + padding; adaptive bins: start = floor(o*n/on),
 * end = ceil((o+1)*n/on). */
static inline void pool_window(const pool_geom *g, int axis, int64_t o, int64_t *lo, int64_t *hi,
                               int64_t *cnt)
{
    int64_t n = axis ? g->w : g->h;
    if (g->kind == POOL_ADAPTIVE) {
        int64_t on = axis ? g->ow : g->oh;
        *lo = o * n / on;
        *hi = ((o + 1) * n + on - 1) / on;
        *cnt = *hi - *lo;
        return;
    }
    int64_t k = axis ? g->kw : g->kh, s = axis ? g->sw : g->sh, p = axis ? g->pw : g->ph;
    int64_t pe = axis ? g->pr : g->pb;
    int64_t a = o * s - p, b = a + k;
    *cnt = (b < n + pe ? b : n + pe) - a;
    *lo = a > 0 ? a : 0;
    *hi = b < n ? b : n;
    if (!g->include_pad)
        *cnt = *hi - *lo;
}

#define SR_GENERIC_FILE "nn/pool.c"
#include "base/generic.h"

/* --- pooling layers ------------------------------------------------------ */
typedef struct {
    int kind, include_pad, ceil_mode;
    int64_t k[2], s[2], p[4]; /* adaptive: k is the output size; p: top, left, bottom, right */
    int64_t in_shape[4];      /* last input, for backward */
    /* maxpool: argmax of the last primal rows (reused across calls), and
     * whether they belong to a forward run with save. */
    int32_t *idx;
    size_t idx_cap;
    int saved;
    double *scale;   /* directional jvp: each primal plane's largest magnitude (maxpool_ties) */
    size_t scale_cap;
} pool_impl;

static const char *pool_name(int kind)
{
    return kind == POOL_MAX ? "maxpool2d" : kind == POOL_AVG ? "avgpool2d" : "adaptive_avgpool2d";
}

static int pool_geometry(const pool_impl *c, const sr_tensor *x, pool_geom *g)
{
    const char *op = pool_name(c->kind);
    if (x->ndim != 4)
        return sr_fail("%s: input %s must be 4D (N,C,H,W)", op, SR_SHAPE(x));
    *g = (pool_geom){c->kind, c->include_pad, x->shape[2], x->shape[3], 0, 0,
                     c->k[0], c->k[1], c->s[0], c->s[1], c->p[0], c->p[1], c->p[2], c->p[3]};
    if (g->h < 1 || g->w < 1)
        return sr_fail("%s: input %s has an empty plane", op, SR_SHAPE(x));
    if (c->kind == POOL_ADAPTIVE) {
        g->oh = c->k[0];
        g->ow = c->k[1];
        /* bin edges are o·n / on: keep o·n in range for any output size */
        int64_t eh, ew;
        if (SR_COUNT(&eh, "adaptive_avgpool2d: output x input height", g->oh, g->h) ||
            SR_COUNT(&ew, "adaptive_avgpool2d: output x input width", g->ow, g->w))
            return -1;
    } else {
        int64_t eh = g->h + g->ph + g->pb - g->kh, ew = g->w + g->pw + g->pr - g->kw;
        if (eh < 0 || ew < 0)
            return sr_fail("%s: input %s is smaller than the %lldx%lld kernel (padding %lld,%lld)", op,
                           SR_SHAPE(x), (long long)g->kh, (long long)g->kw, (long long)g->ph,
                           (long long)g->pw);
        g->oh = (c->ceil_mode ? eh + g->sh - 1 : eh) / g->sh + 1;
        g->ow = (c->ceil_mode ? ew + g->sw - 1 : ew) / g->sw + 1;
        /* as torch: no window starting in the padding after the input */
        if (c->ceil_mode && (g->oh - 1) * g->sh >= g->h + g->ph)
            g->oh--;
        if (c->ceil_mode && (g->ow - 1) * g->sw >= g->w + g->pw)
            g->ow--;
    }
    if (c->kind == POOL_MAX && g->h * g->w > INT32_MAX)
        return sr_fail("%s: input plane %s is too large", op, SR_SHAPE(x));
    return 0;
}

static int pool_out(sr_module *m, const sr_tensor *x, pool_geom *g, sr_run *run)
{
    pool_impl *c = m->impl;
    if (pool_geometry(c, x, g))
        return -1;
    memcpy(c->in_shape, x->shape, sizeof c->in_shape);
    int64_t ys[4] = {x->shape[0], x->shape[1], g->oh, g->ow};
    return sr_module_output(m, run, x->dtype, 4, ys);
}

static int idx_reserve(pool_impl *c, int64_t n)
{
    if ((size_t)n <= c->idx_cap)
        return 0;
    int32_t *p = realloc(c->idx, (size_t)n * sizeof *p);
    if (!p)
        return sr_fail("maxpool2d: out of memory for %lld argmax indices", (long long)n);
    c->idx = p;
    c->idx_cap = (size_t)n;
    return 0;
}

/* Max pool over the first `rows` rows of x into m->out, the argmax
 * recorded when backward or a tangent will read it (want_idx). */
static int maxpool_primal(sr_module *m, const sr_tensor *x, int64_t rows, const pool_geom *g, int want_idx)
{
    pool_impl *c = m->impl;
    int64_t planes = rows * x->shape[1];
    if (!want_idx && SR_DISPATCH_RET(x->dtype, maxpool_values, sr_data(&m->out), sr_data(x), planes, g))
        return 0;
    if (idx_reserve(c, planes * g->oh * g->ow))
        return -1;
    SR_DISPATCH(x->dtype, maxpool_fwd, sr_data(&m->out), c->idx, sr_data(x), planes, g);
    return 0;
}

static int pool_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    pool_impl *c = m->impl;
    pool_geom g;
    c->saved = 0;
    if (pool_out(m, x, &g, run))
        return -1;
    if (c->kind == POOL_MAX) {
        if (maxpool_primal(m, x, x->shape[0], &g, run->save))
            return -1;
        c->saved = run->save;
        return 0;
    }
    SR_DISPATCH(x->dtype, avgpool_fwd, sr_data(&m->out), sr_data(x), x->shape[0] * x->shape[1], &g);
    return 0;
}

static int pool_jvp(sr_module *m, const sr_tensor *xv, sr_run *run)
{
    pool_impl *c = m->impl;
    pool_geom g;
    c->saved = 0; /* the argmax now covers the primal rows only */
    if (pool_out(m, xv, &g, run))
        return -1;
    if (c->kind != POOL_MAX) {
        SR_DISPATCH(xv->dtype, avgpool_fwd, sr_data(&m->out), sr_data(xv),
                    xv->shape[0] * xv->shape[1], &g);
        return 0;
    }
    if (maxpool_primal(m, xv, run->n, &g, 1))
        return -1;
    int64_t C = xv->shape[1], HW = g.h * g.w, HoWo = g.oh * g.ow;
    size_t es = sr_dtype_size(xv->dtype);
    void *yt = (char *)sr_data(&m->out) + (size_t)(run->n * C * HoWo) * es;
    const void *vt = (const char *)sr_data(xv) + (size_t)(run->n * C * HW) * es;
    if (run->directional) {
        if ((size_t)(run->n * C) > c->scale_cap) {
            double *p = realloc(c->scale, (size_t)(run->n * C) * sizeof *p);
            if (!p)
                return sr_fail("maxpool2d: out of memory");
            c->scale = p, c->scale_cap = (size_t)(run->n * C);
        }
        SR_DISPATCH(xv->dtype, maxpool_ties, c->idx, c->scale, sr_data(&m->out), sr_data(xv), run->n * C, C, &g,
                    run->kinks);
        SR_DISPATCH(xv->dtype, maxpool_gather_ties, yt, vt, c->idx, c->scale, sr_data(xv), sr_data(&m->out),
                    run->n * run->k * C, C, run->k, &g);
    } else {
        SR_DISPATCH(xv->dtype, maxpool_gather, yt, vt, c->idx, run->n * run->k * C, C, run->k, HW, HoWo);
    }
    return 0;
}

static int pool_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    pool_impl *c = m->impl;
    if (c->kind == POOL_MAX && !c->saved)
        return sr_fail("maxpool2d backward: forward was not run with save");
    sr_tensor x = {gy->dtype, 4, {0}, 0, NULL};
    memcpy(x.shape, c->in_shape, sizeof c->in_shape);
    pool_geom g;
    if (pool_geometry(c, &x, &g) || sr_module_grad_input(m, run, gy->dtype, 4, c->in_shape))
        return -1;
    int64_t planes = c->in_shape[0] * c->in_shape[1];
    if (c->kind == POOL_MAX) {
        SR_DISPATCH(gy->dtype, maxpool_scatter, sr_data(&m->gin), sr_data(gy), c->idx, planes,
                    g.h * g.w, g.oh * g.ow);
        c->saved = 0;
    } else {
        SR_DISPATCH(gy->dtype, avgpool_bwd, sr_data(&m->gin), sr_data(gy), planes, &g);
    }
    return 0;
}

static void pool_free(sr_module *m)
{
    pool_impl *c = m->impl;
    free(c->idx);
    free(c->scale);
    c->idx = NULL;
    c->scale = NULL;
    c->idx_cap = c->scale_cap = 0;
}

static void pool_describe(const sr_module *m, char *buf, size_t n)
{
    const pool_impl *c = m->impl;
    if (c->kind == POOL_ADAPTIVE) {
        snprintf(buf, n, "-> %lldx%lld", (long long)c->k[0], (long long)c->k[1]);
        return;
    }
    int len = snprintf(buf, n, "k%lldx%lld s%lld,%lld p%lld,%lld", (long long)c->k[0],
                       (long long)c->k[1], (long long)c->s[0], (long long)c->s[1], (long long)c->p[0],
                       (long long)c->p[1]);
    if ((c->p[2] != c->p[0] || c->p[3] != c->p[1]) && len > 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, " after %lld,%lld", (long long)c->p[2], (long long)c->p[3]);
    if (c->ceil_mode && len > 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, ", ceil");
    if (c->kind == POOL_AVG && !c->include_pad && len > 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, ", exclude pad");
}

static const sr_module_ops maxpool_ops = {
    .kind = "maxpool2d", .forward = pool_forward, .jvp = pool_jvp, .backward = pool_backward,
    .free_impl = pool_free, .describe = pool_describe
};
static const sr_module_ops avgpool_ops = {
    .kind = "avgpool2d", .forward = pool_forward, .jvp = pool_jvp, .backward = pool_backward,
    .free_impl = pool_free, .describe = pool_describe, .is_affine = sr_module_affine_always
};
static const sr_module_ops adaptive_ops = {
    .kind = "adaptive_avgpool2d", .forward = pool_forward, .jvp = pool_jvp, .backward = pool_backward,
    .free_impl = pool_free, .describe = pool_describe, .is_affine = sr_module_affine_always
};

/* Absent-option sentinel: no user value can be this (opts rejects |v| > 9e15). */
#define POOL_UNSET INT64_MIN

static sr_module *pool_create(const sr_opts *o, int kind)
{
    pool_impl cfg = {0};
    cfg.kind = kind;
    cfg.include_pad = 1;
    const char *op = pool_name(kind);
    if (kind == POOL_ADAPTIVE) {
        if (sr_opt_pair(o, "output_size", 1, cfg.k))
            return NULL;
        if (cfg.k[0] < 1 || cfg.k[1] < 1) {
            sr_fail("%s: output_size must be >= 1 (got %lld,%lld)", op, (long long)cfg.k[0],
                    (long long)cfg.k[1]);
            return NULL;
        }
        cfg.s[0] = cfg.s[1] = 1;
    } else {
        double pv[4];
        int np = 0, rp = o->get_nums(o, "padding", pv, 4, &np);
        if (rp < 0 || sr_opt_pair(o, "kernel_size", POOL_UNSET, cfg.k) ||
            sr_opt_pair(o, "stride", POOL_UNSET, cfg.s) || sr_opt_bool(o, "ceil_mode", 0, &cfg.ceil_mode) ||
            (kind == POOL_AVG && sr_opt_bool(o, "count_include_pad", 1, &cfg.include_pad)))
            return NULL;
        if (rp == 0)
            np = 1, pv[0] = 0;
        if (np != 1 && np != 2 && np != 4) {
            sr_fail("%s: option padding takes 1, 2 ({h, w}) or 4 ({top, left, bottom, right}) values, got %d", op,
                    np);
            return NULL;
        }
        for (int i = 0; i < 4; i++) {
            double v = pv[np == 1 ? 0 : np == 2 ? i % 2 : i];
            if (v != floor(v) || fabs(v) > 1e9) {
                sr_fail("%s: padding entries must be integers (got %g)", op, v);
                return NULL;
            }
            cfg.p[i] = (int64_t)v;
        }
        if (cfg.k[0] == POOL_UNSET) {
            sr_fail("%s: option kernel_size is required", op);
            return NULL;
        }
        if (cfg.s[0] == POOL_UNSET) /* PyTorch: stride defaults to the kernel */
            memcpy(cfg.s, cfg.k, sizeof cfg.s);
        for (int a = 0; a < 2; a++) {
            int64_t pmin = cfg.p[a] < cfg.p[a + 2] ? cfg.p[a] : cfg.p[a + 2];
            int64_t pmax = cfg.p[a] > cfg.p[a + 2] ? cfg.p[a] : cfg.p[a + 2];
            if (cfg.k[a] < 1 || cfg.s[a] < 1 || pmin < 0) {
                sr_fail("%s: kernel_size and stride must be >= 1 and padding >= 0 (got k%lld s%lld p%lld)",
                        op, (long long)cfg.k[a], (long long)cfg.s[a], (long long)pmin);
                return NULL;
            }
            /* As torch: a wider pad would allow windows of padding only. */
            if (pmax > cfg.k[a] / 2) {
                sr_fail("%s: padding %lld must be at most half of kernel_size %lld", op,
                        (long long)pmax, (long long)cfg.k[a]);
                return NULL;
            }
        }
    }
    const sr_module_ops *ops = kind == POOL_MAX ? &maxpool_ops : kind == POOL_AVG ? &avgpool_ops : &adaptive_ops;
    sr_module *m = sr_module_new(ops, sizeof cfg);
    if (m)
        *(pool_impl *)m->impl = cfg;
    return m;
}

sr_module *sr_maxpool2d_create(const sr_opts *o) { return pool_create(o, POOL_MAX); }
sr_module *sr_avgpool2d_create(const sr_opts *o) { return pool_create(o, POOL_AVG); }
sr_module *sr_adaptive_avgpool2d_create(const sr_opts *o) { return pool_create(o, POOL_ADAPTIVE); }

/* --- flatten --------------------------------------------------------------
 * A view: m->out shares x's storage, m->gin shares gy's. */
typedef struct {
    int64_t start, end;          /* as given; negative counts from the end */
    int in_ndim;
    int64_t in_shape[SR_MAXDIM]; /* last input, for backward */
} flatten_impl;

static int flatten_run(sr_module *m, const sr_tensor *x, sr_run *run)
{
    (void)run;
    flatten_impl *c = m->impl;
    int nd = x->ndim;
    int64_t s = c->start < 0 ? c->start + nd : c->start, e = c->end < 0 ? c->end + nd : c->end;
    if (nd < 2 || s < 1 || e >= nd || s > e)
        return sr_fail("flatten: dims %lld..%lld do not fit input %s (dim 0 is the batch and stays)",
                       (long long)c->start, (long long)c->end, SR_SHAPE(x));
    int64_t shape[SR_MAXDIM];
    int k = 0;
    for (int i = 0; i < s; i++)
        shape[k++] = x->shape[i];
    shape[k] = 1;
    for (int64_t i = s; i <= e; i++)
        shape[k] *= x->shape[i];
    k++;
    for (int64_t i = e + 1; i < nd; i++)
        shape[k++] = x->shape[i];
    c->in_ndim = nd;
    memcpy(c->in_shape, x->shape, sizeof c->in_shape);
    return sr_tensor_reshape(&m->out, x, k, shape);
}

static int flatten_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    (void)run;
    flatten_impl *c = m->impl;
    return sr_tensor_reshape(&m->gin, gy, c->in_ndim, c->in_shape);
}

static void flatten_describe(const sr_module *m, char *buf, size_t n)
{
    const flatten_impl *c = m->impl;
    snprintf(buf, n, "dims %lld..%lld", (long long)c->start, (long long)c->end);
}

static const sr_module_ops flatten_ops = {
    .kind = "flatten", .forward = flatten_run, .jvp = flatten_run, .backward = flatten_backward,
    .describe = flatten_describe, .is_affine = sr_module_affine_always
};

sr_module *sr_flatten_create(const sr_opts *o)
{
    flatten_impl cfg = {0};
    if (sr_opt_int(o, "start_dim", 1, &cfg.start) || sr_opt_int(o, "end_dim", -1, &cfg.end))
        return NULL;
    if (cfg.start == 0) {
        sr_fail("flatten: start_dim 0 would merge the batch dimension (use start_dim >= 1)");
        return NULL;
    }
    sr_module *m = sr_module_new(&flatten_ops, sizeof cfg);
    if (m)
        *(flatten_impl *)m->impl = cfg;
    return m;
}

/* --- permute ------------------------------------------------------------- */
int sr_permute_apply(sr_tensor *y, const sr_tensor *x, int nd, const int *perm)
{
    if (x->ndim != nd)
        return sr_fail("permute: input %s has %d dims, the permutation %d", SR_SHAPE(x), x->ndim, nd);
    int64_t ys[SR_MAXDIM], xstride[SR_MAXDIM], sp[SR_MAXDIM];
    xstride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--)
        xstride[d] = xstride[d + 1] * x->shape[d + 1];
    for (int d = 0; d < nd; d++) {
        ys[d] = x->shape[perm[d]];
        sp[d] = xstride[perm[d]];
    }
    if (sr_tensor_ensure(y, x->dtype, nd, ys))
        return -1;
    if (sr_numel(x) == 0)
        return 0;
    if (nd == 1) { /* just the batch: a copy */
        memcpy(sr_data(y), sr_data(x), (size_t)sr_numel(x) * sr_dtype_size(x->dtype));
        return 0;
    }
    SR_DISPATCH(x->dtype, permute_copy, sr_data(y), sr_data(x), nd, ys, sp, x->shape[0], sr_rowsize(x));
    return 0;
}

typedef struct {
    int nd;
    int perm[SR_MAXDIM], inv[SR_MAXDIM];
} permute_impl;

static int permute_run(sr_module *m, const sr_tensor *x, sr_run *run)
{
    permute_impl *c = m->impl;
    /* Same bytes as x: a pooled buffer the permute then shapes. */
    if (sr_module_output_like(m, run, x))
        return -1;
    return sr_permute_apply(&m->out, x, c->nd, c->perm);
}

static int permute_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    permute_impl *c = m->impl;
    if (sr_module_grad_input_like(m, run, gy))
        return -1;
    return sr_permute_apply(&m->gin, gy, c->nd, c->inv);
}

static void permute_describe(const sr_module *m, char *buf, size_t n)
{
    const permute_impl *c = m->impl;
    size_t k = 0;
    for (int d = 0; d < c->nd && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d ? ",%d" : "(%d", c->perm[d]);
    if (k < n)
        snprintf(buf + k, n - k, ")");
}

static const sr_module_ops permute_ops = {
    .kind = "permute", .forward = permute_run, .jvp = permute_run, .backward = permute_backward,
    .describe = permute_describe, .is_affine = sr_module_affine_always
};

sr_module *sr_permute_create(const sr_opts *o)
{
    double v[SR_MAXDIM] = {0, 2, 3, 1};
    int nd = 4;
    permute_impl cfg = {0};
    if (o->get_nums(o, "dims", v, SR_MAXDIM, &nd) < 0)
        return NULL;
    if (nd < 1) {
        sr_fail("permute: dims must list at least one dimension");
        return NULL;
    }
    int seen[SR_MAXDIM] = {0};
    for (int d = 0; d < nd; d++) {
        double p = v[d] < 0 ? v[d] + nd : v[d];
        if (p != floor(p) || p < 0 || p >= nd || seen[(int)p]++) {
            sr_fail("permute: dims must be a permutation of 0..%d (entry %d is %g)", nd - 1, d + 1, v[d]);
            return NULL;
        }
        cfg.perm[d] = (int)p;
        cfg.inv[(int)p] = d;
    }
    if (cfg.perm[0] != 0) {
        sr_fail("permute: dims must start with 0 (the batch dimension stays first), not %d", cfg.perm[0]);
        return NULL;
    }
    cfg.nd = nd;
    sr_module *m = sr_module_new(&permute_ops, sizeof cfg);
    if (m)
        *(permute_impl *)m->impl = cfg;
    return m;
}

#endif
