/* depthwise.c - depthwise convolution (conv2d with groups == C): output
 * channel o reads input channel o / mult through its own kh x kw filter.
 * K = kh·kw and one output channel per GEMM row, a few FLOPs per byte: a
 * direct kernel per (image, channel) plane under OpenMP.
 *
 * Every plane is first copied into a zero-padded buffer, so no loop checks
 * bounds.  Stride 1 without dilation (ConvNeXt's 7x7, MobileNet's 3x3) then
 * takes the flat kernel: with Wp the padded width, output (oh, ow) sits at
 * q = oh·Wp + ow of an output grid Wp wide, and tap (i, j) reads the padded
 * plane at q + i·Wp + j; one plane is a single 1-D correlation with kh·kw
 * shifts, computed in register blocks of four vectors (junk columns
 * ow >= Wo included, then cropped) that stay in registers across all taps.
 * Against axpy per tap over each output row, which loads and stores the row
 * once per tap, this measured 2.4-3.4 -> 14 GFLOP/s (ConvNeXt-T's 8x96x56x56
 * layer, 2 threads).  The cost is Wp − Wo junk columns per row (6 of 13 on
 * a 7x7 plane with a 7x7 kernel).  Other strides and dilations use the
 * same padded planes with per-row loops.
 *
 * Backward, stride 1: gx is the correlation of gy, padded by kh−1−ph and
 * kw−1−pw, with the flipped filter (the flat kernel again); gw(i, j) is the
 * dot product of gy, laid out on the Wp-wide grid with zero junk columns,
 * with the padded input shifted by i·Wp + j.
 *
 * The blocks use GCC vector extensions (32-byte vectors: 8 floats or 4
 * doubles); this file is compiled with -ffp-contract=fast (Makefile), so
 * a·b + c becomes one FMA.  Scratch (padded planes, output grid) is one
 * block per thread, allocated per call. */
#ifdef SR_REAL

typedef real SR_FN(dw_vec) __attribute__((vector_size(DW_VBYTES)));

/* Elements per register block of the flat kernel: four vectors. */
#define DW_BLOCK ((int64_t)(4 * DW_VBYTES / sizeof(real)))

static inline SR_FN(dw_vec) SR_FN(dw_load)(const real *p)
{
    SR_FN(dw_vec) v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline SR_FN(dw_vec) SR_FN(dw_splat)(real s)
{
    SR_FN(dw_vec) v = {0};
    return v + s;
}

/* dst[0, len) = the plane src (h, w) framed by ph zero rows and pw zero
 * columns on each side, then zeros. */
static void SR_FN(dw_pad)(real *dst, const real *src, int64_t h, int64_t w, int64_t ph, int64_t pw, int64_t len)
{
    int64_t wp = w + 2 * pw;
    memset(dst, 0, (size_t)len * sizeof(real));
    for (int64_t r = 0; r < h; r++)
        memcpy(dst + (r + ph) * wp + pw, src + r * w, (size_t)w * sizeof(real));
}

/* grid[q] = bias + Σ_{i,j} f[i·kw + j]·src[q + i·wp + j] for q in [0, nq),
 * nq a multiple of DW_BLOCK; src holds nq + (kh−1)·wp + kw − 1 elements.
 * The four accumulators are named so that they stay in registers. */
static void SR_FN(dw_flat)(real *grid, const real *src, const real *f, real bias, int64_t kh, int64_t kw,
                           int64_t wp, int64_t nq)
{
    typedef SR_FN(dw_vec) vec;
    const int64_t L = sizeof(vec) / sizeof(real);
    for (int64_t q = 0; q < nq; q += DW_BLOCK) {
        vec a0 = SR_FN(dw_splat)(bias), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t i = 0; i < kh; i++) {
            const real *s = src + q + i * wp, *fr = f + i * kw;
            for (int64_t j = 0; j < kw; j++) {
                vec fv = SR_FN(dw_splat)(fr[j]);
                a0 += fv * SR_FN(dw_load)(s + j);
                a1 += fv * SR_FN(dw_load)(s + j + L);
                a2 += fv * SR_FN(dw_load)(s + j + 2 * L);
                a3 += fv * SR_FN(dw_load)(s + j + 3 * L);
            }
        }
        memcpy(grid + q, &a0, sizeof a0);
        memcpy(grid + q + L, &a1, sizeof a1);
        memcpy(grid + q + 2 * L, &a2, sizeof a2);
        memcpy(grid + q + 3 * L, &a3, sizeof a3);
    }
}

/* Σ_q a[q]·b[q] over q in [0, nq), nq a multiple of DW_BLOCK. */
static real SR_FN(dw_dot)(const real *a, const real *b, int64_t nq)
{
    typedef SR_FN(dw_vec) vec;
    const int64_t L = sizeof(vec) / sizeof(real);
    vec s0 = SR_FN(dw_splat)(0), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t q = 0; q < nq; q += DW_BLOCK) {
        s0 += SR_FN(dw_load)(a + q) * SR_FN(dw_load)(b + q);
        s1 += SR_FN(dw_load)(a + q + L) * SR_FN(dw_load)(b + q + L);
        s2 += SR_FN(dw_load)(a + q + 2 * L) * SR_FN(dw_load)(b + q + 2 * L);
        s3 += SR_FN(dw_load)(a + q + 3 * L) * SR_FN(dw_load)(b + q + 3 * L);
    }
    s0 += s1 + s2 + s3;
    real t = 0;
    for (int64_t l = 0; l < L; l++)
        t += s0[l];
    return t;
}

/* dst (rows, cols) = or += the first cols of each wp-wide row of grid. */
static void SR_FN(dw_crop)(real *dst, const real *grid, int64_t rows, int64_t cols, int64_t wp, int add)
{
    for (int64_t r = 0; r < rows; r++) {
        real *restrict d = dst + r * cols;
        const real *restrict s = grid + r * wp;
        if (add) {
            DW_SIMD
            for (int64_t c = 0; c < cols; c++)
                d[c] += s[c];
        } else {
            memcpy(d, s, (size_t)cols * sizeof(real));
        }
    }
}

/* Scratch elements per thread. */
static int64_t SR_FN(dw_scratch)(const dw_plan *p)
{
    return p->flat ? p->pad_len + p->nq + p->nqx + p->gpad_len + p->kk : p->hp * p->wp + p->kk;
}

static int SR_FN(dw_fwd)(real *y, const real *x, const real *w, const real *b, const sr_dw_geom *g,
                         int64_t bias_rows)
{
    dw_plan p;
    dw_plan_make(g, DW_BLOCK, &p);
    const int64_t mult = g->o / g->c, HW = g->h * g->w, P = g->ho * g->wo, S = SR_FN(dw_scratch)(&p);
    const int T = dw_threads(g->n * g->o * P * p.kk);
    real *scratch = dw_scratch_alloc(T * S, sizeof(real));
    if (!scratch)
        return -1;
#pragma omp parallel for collapse(2) schedule(static) num_threads(T)
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t o = 0; o < g->o; o++) {
            real *xpad = scratch + omp_get_thread_num() * S;
            const real *xp = x + (n * g->c + o / mult) * HW, *wp = w + o * p.kk;
            real *yp = y + (n * g->o + o) * P;
            real bv = b && n < bias_rows ? b[o] : 0;
            SR_FN(dw_pad)(xpad, xp, g->h, g->w, g->ph, g->pw, p.flat ? p.pad_len : p.hp * p.wp);
            if (p.flat) {
                real *grid = xpad + p.pad_len;
                SR_FN(dw_flat)(grid, xpad, wp, bv, g->kh, g->kw, p.wp, p.nq);
                SR_FN(dw_crop)(yp, grid, g->ho, g->wo, p.wp, 0);
                continue;
            }
            for (int64_t oh = 0; oh < g->ho; oh++) {
                real *restrict yr = yp + oh * g->wo;
                DW_SIMD
                for (int64_t ow = 0; ow < g->wo; ow++)
                    yr[ow] = bv;
                for (int64_t i = 0; i < g->kh; i++)
                    for (int64_t j = 0; j < g->kw; j++) {
                        const real *restrict s = xpad + (oh * g->sh + i * g->dh) * p.wp + j * g->dw;
                        real wv = wp[i * g->kw + j];
                        DW_SIMD
                        for (int64_t ow = 0; ow < g->wo; ow++)
                            yr[ow] += wv * s[ow * g->sw];
                    }
            }
        }
    free(scratch);
    return 0;
}

/* Backward: gx per input plane (each task owns one, summing its mult
 * output channels), then gw and gb per output channel. */
static int SR_FN(dw_bwd)(real *gx, real *gw, real *gb, const real *gy, const real *x, const real *w,
                         const sr_dw_geom *g)
{
    dw_plan p;
    dw_plan_make(g, DW_BLOCK, &p);
    const int64_t mult = g->o / g->c, HW = g->h * g->w, P = g->ho * g->wo, kk = p.kk;
    const int64_t S = SR_FN(dw_scratch)(&p);
    const int T = dw_threads(g->n * g->o * P * kk);
    real *scratch = dw_scratch_alloc(T * S, sizeof(real));
    if (!scratch)
        return -1;
#pragma omp parallel for collapse(2) schedule(static) num_threads(T)
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t c = 0; c < g->c; c++) {
            real *ws = scratch + omp_get_thread_num() * S, *gp = gx + (n * g->c + c) * HW;
            if (p.flat) {
                /* flipped filter, then gy padded by (kh−1−ph, kw−1−pw) */
                real *gpad = ws + p.pad_len + p.nq + p.nqx, *flip = gpad + p.gpad_len, *grid = ws + p.pad_len + p.nq;
                for (int64_t o = c * mult; o < (c + 1) * mult; o++) {
                    for (int64_t t = 0; t < kk; t++)
                        flip[t] = w[o * kk + kk - 1 - t];
                    SR_FN(dw_pad)(gpad, gy + (n * g->o + o) * P, g->ho, g->wo, g->kh - 1 - g->ph,
                                  g->kw - 1 - g->pw, p.gpad_len);
                    SR_FN(dw_flat)(grid, gpad, flip, 0, g->kh, g->kw, p.wg, p.nqx);
                    SR_FN(dw_crop)(gp, grid, g->h, g->w, p.wg, o > c * mult);
                }
                continue;
            }
            real *gpad = ws; /* gx padded like x, cropped at the end */
            memset(gpad, 0, (size_t)(p.hp * p.wp) * sizeof(real));
            for (int64_t o = c * mult; o < (c + 1) * mult; o++) {
                const real *gyp = gy + (n * g->o + o) * P, *wp = w + o * kk;
                for (int64_t oh = 0; oh < g->ho; oh++)
                    for (int64_t i = 0; i < g->kh; i++)
                        for (int64_t j = 0; j < g->kw; j++) {
                            real *restrict d = gpad + (oh * g->sh + i * g->dh) * p.wp + j * g->dw;
                            const real *restrict s = gyp + oh * g->wo;
                            real wv = wp[i * g->kw + j];
                            DW_SIMD
                            for (int64_t ow = 0; ow < g->wo; ow++)
                                d[ow * g->sw] += wv * s[ow];
                        }
            }
            SR_FN(dw_crop)(gp, gpad + g->ph * p.wp + g->pw, g->h, g->w, p.wp, 0);
        }
    if (gw || gb) {
#pragma omp parallel for schedule(static) num_threads(T)
        for (int64_t o = 0; o < g->o; o++) {
            real *ws = scratch + omp_get_thread_num() * S, *xpad = ws, *acc = ws + S - kk;
            if (gb) {
                real s = 0;
                for (int64_t n = 0; n < g->n; n++) {
                    const real *r = gy + (n * g->o + o) * P;
                    _Pragma("omp simd reduction(+ : s)")
                    for (int64_t q = 0; q < P; q++)
                        s += r[q];
                }
                gb[o] += s;
            }
            if (!gw)
                continue;
            for (int64_t t = 0; t < kk; t++)
                acc[t] = 0;
            for (int64_t n = 0; n < g->n; n++) {
                const real *xp = x + (n * g->c + o / mult) * HW, *gyp = gy + (n * g->o + o) * P;
                SR_FN(dw_pad)(xpad, xp, g->h, g->w, g->ph, g->pw, p.flat ? p.pad_len : p.hp * p.wp);
                if (p.flat) {
                    /* gy on the wp-wide grid, junk columns zero */
                    real *gyg = ws + p.pad_len;
                    memset(gyg, 0, (size_t)p.nq * sizeof(real));
                    for (int64_t oh = 0; oh < g->ho; oh++)
                        memcpy(gyg + oh * p.wp, gyp + oh * g->wo, (size_t)g->wo * sizeof(real));
                    for (int64_t i = 0; i < g->kh; i++)
                        for (int64_t j = 0; j < g->kw; j++)
                            acc[i * g->kw + j] += SR_FN(dw_dot)(gyg, xpad + i * p.wp + j, p.nq);
                    continue;
                }
                for (int64_t i = 0; i < g->kh; i++)
                    for (int64_t j = 0; j < g->kw; j++) {
                        real s = 0;
                        for (int64_t oh = 0; oh < g->ho; oh++) {
                            const real *xr = xpad + (oh * g->sh + i * g->dh) * p.wp + j * g->dw;
                            const real *gr = gyp + oh * g->wo;
                            _Pragma("omp simd reduction(+ : s)")
                            for (int64_t ow = 0; ow < g->wo; ow++)
                                s += gr[ow] * xr[ow * g->sw];
                        }
                        acc[i * g->kw + j] += s;
                    }
            }
            for (int64_t t = 0; t < kk; t++)
                gw[o * kk + t] += acc[t];
        }
    }
    free(scratch);
    return 0;
}

#else /* generic part */

#include <stdlib.h>
#include <string.h>

#include "kernels/depthwise.h"

#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_thread_num(void) { return 0; }
static int omp_get_max_threads(void) { return 1; }
#endif

#define DW_SIMD _Pragma("omp simd")
/* Vector size of the flat kernel's register blocks (four vectors each). */
#define DW_VBYTES 32
/* Below this many multiply-adds a call stays on one thread. */
#define DW_OMP_MIN 32768

/* Buffer sizes of one call (elements), for a block of `block` elements. */
typedef struct {
    int flat;           /* stride 1, no dilation: the flat kernel */
    int64_t kk, hp, wp; /* taps; padded input plane */
    int64_t nq;         /* forward output grid: ho·wp rounded up to a block */
    int64_t pad_len;    /* padded input plane with the flat kernel's overrun */
    int64_t wg, nqx;    /* backward: padded gy width, gx grid (h·wg rounded up) */
    int64_t gpad_len;   /* padded gy plane with overrun */
} dw_plan;

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

static void dw_plan_make(const sr_dw_geom *g, int64_t block, dw_plan *p)
{
    p->kk = g->kh * g->kw;
    p->hp = g->h + 2 * g->ph;
    p->wp = g->w + 2 * g->pw;
    /* gy's padding kh−1−ph must not be negative for the flat gx */
    p->flat = g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->ph < g->kh && g->pw < g->kw;
    p->nq = p->pad_len = p->wg = p->nqx = p->gpad_len = 0;
    if (!p->flat)
        return;
    p->nq = round_up(g->ho * p->wp, block);
    p->pad_len = p->nq + (g->kh - 1) * p->wp + g->kw;
    if (p->pad_len < p->hp * p->wp)
        p->pad_len = p->hp * p->wp;
    p->wg = g->wo + 2 * (g->kw - 1 - g->pw);
    p->nqx = round_up(g->h * p->wg, block);
    p->gpad_len = p->nqx + (g->kh - 1) * p->wg + g->kw;
    if (p->gpad_len < (g->ho + 2 * (g->kh - 1 - g->ph)) * p->wg)
        p->gpad_len = (g->ho + 2 * (g->kh - 1 - g->ph)) * p->wg;
}

static int dw_threads(int64_t work) { return work > DW_OMP_MIN ? omp_get_max_threads() : 1; }

/* T threads' scratch of S elements each (n = T·S); NULL after sr_fail. */
static void *dw_scratch_alloc(int64_t n, size_t es)
{
    void *p = malloc((size_t)n * es);
    if (!p)
        sr_fail("conv2d: depthwise scratch of %lld bytes: out of memory", (long long)(n * (int64_t)es));
    return p;
}

#define SR_GENERIC_FILE "kernels/depthwise.c"
#include "base/generic.h"

int sr_dw_forward(sr_dtype dt, void *y, const void *x, const void *w, const void *b, const sr_dw_geom *g,
                  int64_t bias_rows)
{
    return SR_DISPATCH_RET(dt, dw_fwd, y, x, w, b, g, bias_rows);
}

int sr_dw_backward(sr_dtype dt, void *gx, void *gw, void *gb, const void *gy, const void *x, const void *w,
                   const sr_dw_geom *g)
{
    return SR_DISPATCH_RET(dt, dw_bwd, gx, gw, gb, gy, x, w, g);
}

#endif
