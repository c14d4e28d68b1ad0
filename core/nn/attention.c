/* attention.c - multi-head self-attention on token tensors x (N,T,D):
 *
 *   qkv = x W_inᵀ + b_in             (N,T,3D)  columns: q | k | v, head h at h*hd..
 *   P_h = softmax(q_h k_hᵀ / √hd)     (N,H,T,T) one T×T block per (sample, head)
 *   o   = [P_1 v_1 | ... | P_H v_H]   (N,T,D)
 *   y   = o W_outᵀ + b_out            (N,T,D)
 *
 * One function, two PyTorch namings (state_dict keys, so weights load as is):
 *   style "timm":        timm's Attention         qkv.weight (3D,D), qkv.bias (3D),
 *                                                 proj.weight (D,D), proj.bias (D)
 *   style "torchvision": nn.MultiheadAttention(batch_first=True) called as
 *                        mha(x, x, x) (torchvision's ViT)  in_proj_weight, in_proj_bias,
 *                                                 out_proj.weight, out_proj.bias
 * qkv_bias=false follows each library: timm drops qkv.bias only (proj keeps
 * its bias), MultiheadAttention(bias=False) drops both in_proj_bias and
 * out_proj.bias.
 *
 * Stacked JVP.  The projections are linear, so the whole stack [x; v] goes
 * through one qkv GEMM and one output GEMM (bias on the primal rows only).
 * Between them, for tangent (dq, dk, dv) of a primal with probabilities P:
 *   dS = (dq kᵀ + q dkᵀ)/√hd,  dP = P ⊙ (dS − rowsum(P ⊙ dS)),  do = dP v + P dv.
 * P is computed once per primal and shared by its k tangents, whose rows are
 * adjacent in the stack, so per (primal, head) the k tangents' products
 * against the primal's K and V are single tall GEMMs (k·T rows).
 *
 * BLAS is never called inside an OpenMP region: GEMMs run in sequence
 * (OpenBLAS threads each one); the softmax passes over all (sample, head)
 * blocks at once are the only OpenMP loops, one per call. */
#ifdef SR_REAL

/* Row-wise softmax in place over `rows` rows of length T. */
static void SR_FN(softmax_rows)(real *p, int64_t rows, int64_t T)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        real *pr = p + r * T;
        real mx = pr[0];
        for (int64_t b = 1; b < T; b++)
            mx = pr[b] > mx ? pr[b] : mx;
        real s = 0;
        for (int64_t b = 0; b < T; b++) {
            pr[b] = SR_EXP(pr[b] - mx);
            s += pr[b];
        }
        real inv = 1 / s;
        for (int64_t b = 0; b < T; b++)
            pr[b] *= inv;
    }
}

/* Primal core for samples [0, ns): P (ns,H,T,T) and o (ns,T,D) from qkv
 * (ns,T,3D).  Phased (all score GEMMs, one parallel softmax, all value
 * GEMMs) so there is a single OpenMP region between the BLAS calls. */
static void SR_FN(attn_primal)(real *o, real *p, const real *qkv, int64_t ns, int64_t T, int64_t D,
                               int64_t H)
{
    int64_t hd = D / H, D3 = 3 * D, TT = T * T;
    real scale = (real)(1 / sqrt((double)hd));
    for (int64_t i = 0; i < ns; i++)
        for (int64_t h = 0; h < H; h++) {
            const real *q = qkv + i * T * D3 + h * hd, *k = q + D;
            /* S (T,T) = scale · q (T,hd) · kᵀ */
            SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)hd, scale, q, (int)D3, k,
                    (int)D3, 0, p + (i * H + h) * TT, (int)T);
        }
    SR_FN(softmax_rows)(p, ns * H * T, T);
    for (int64_t i = 0; i < ns; i++)
        for (int64_t h = 0; h < H; h++) {
            const real *v = qkv + i * T * D3 + 2 * D + h * hd;
            /* o_h (T,hd) = P (T,T) · v (T,hd), written into its head's columns */
            SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)hd, (int)T, 1,
                    p + (i * H + h) * TT, (int)T, v, (int)D3, 0, o + i * T * D + h * hd, (int)D);
        }
}

/* Tangent core: for each primal i < n and head h, its k tangents (samples
 * n+i·k .. n+i·k+k−1 of the stack, adjacent rows) against the primal's
 * q, k, v and P.  wa (k·T, T) and wb (T, k·T) are workspaces, small enough to
 * stay in cache per (primal, head). */
static void SR_FN(attn_tangent)(real *o, const real *p, const real *qkv, real *wa, real *wb,
                                int64_t n, int64_t kt, int64_t T, int64_t D, int64_t H)
{
    int64_t hd = D / H, D3 = 3 * D, TT = T * T, kT = kt * T;
    real scale = (real)(1 / sqrt((double)hd));
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < H; h++) {
            const real *q = qkv + i * T * D3 + h * hd, *k = q + D, *v = q + 2 * D;
            const real *tq = qkv + (n + i * kt) * T * D3 + h * hd, *tk = tq + D, *tv = tq + 2 * D;
            const real *P = p + (i * H + h) * TT;
            real *to = o + (n + i * kt) * T * D + h * hd;
            /* wa (k·T, T) = scale · [dq_1; ...; dq_k] · kᵀ : all tangents in one GEMM */
            SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasTrans, (int)kT, (int)T, (int)hd, scale, tq, (int)D3,
                    k, (int)D3, 0, wa, (int)T);
            /* wb (T, k·T) = scale · q · [dk_1; ...; dk_k]ᵀ : column block j is q dk_jᵀ,
             * so the sum below reads both terms row-contiguously (no transpose). */
            SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)kT, (int)hd, scale, q, (int)D3,
                    tk, (int)D3, 0, wb, (int)kT);
            /* dS -> dP in place, on this thread only: an OpenMP region here,
             * between GEMMs, once per (primal, head), leaves its idle workers
             * spinning while the next GEMMs run, which cost a third of the
             * JVP's time on 2 threads (bench_attention), far more than this
             * O(k·T²) pass gains from a second thread. */
            for (int64_t r = 0; r < kT; r++) {
                int64_t j = r / T, a = r % T;
                const real *pr = P + a * T, *br = wb + a * kT + j * T;
                real *ar = wa + r * T;
                real s = 0;
                for (int64_t b = 0; b < T; b++) {
                    ar[b] += br[b];
                    s += pr[b] * ar[b];
                }
                for (int64_t b = 0; b < T; b++)
                    ar[b] = pr[b] * (ar[b] - s);
            }
            /* [do_1; ...; do_k] (k·T, hd) = [dP_1; ...; dP_k] · v  */
            SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)kT, (int)hd, (int)T, 1, wa, (int)T, v,
                    (int)D3, 0, to, (int)D);
            /* do_j += P · dv_j: the dv_j are row blocks, not one strided matrix,
             * so one GEMM per tangent. */
            for (int64_t j = 0; j < kt; j++)
                SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)hd, (int)T, 1, P, (int)T,
                        tv + j * T * D3, (int)D3, 1, to + j * T * D, (int)D);
        }
}

/* Backward core: gqkv (N,T,3D) from go = dL/do (N,T,D), the saved P and qkv;
 * gp (N,H,T,T) is a workspace.  With S = scale·q kᵀ:
 *   gv = Pᵀ go,  gP = go vᵀ,  gS = P ⊙ (gP − rowsum(P ⊙ gP)),
 *   gq = scale·gS k,  gk = scale·gSᵀ q. */
static void SR_FN(attn_backward)(real *gqkv, real *gp, const real *go, const real *p,
                                 const real *qkv, int64_t N, int64_t T, int64_t D, int64_t H)
{
    int64_t hd = D / H, D3 = 3 * D, TT = T * T;
    real scale = (real)(1 / sqrt((double)hd));
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < H; h++) {
            const real *v = qkv + i * T * D3 + 2 * D + h * hd, *g = go + i * T * D + h * hd;
            const real *P = p + (i * H + h) * TT;
            /* gP (T,T) = go_h (T,hd) · vᵀ */
            SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)hd, 1, g, (int)D, v,
                    (int)D3, 0, gp + (i * H + h) * TT, (int)T);
            /* gv (T,hd) = Pᵀ · go_h */
            SR_FN(sr_gemm_blas)(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)hd, (int)T, 1, P, (int)T, g,
                    (int)D, 0, gqkv + i * T * D3 + 2 * D + h * hd, (int)D3);
        }
    int64_t rows = N * H * T;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const real *pr = p + r * T;
        real *gr = gp + r * T;
        real s = 0;
        for (int64_t b = 0; b < T; b++)
            s += pr[b] * gr[b];
        for (int64_t b = 0; b < T; b++)
            gr[b] = scale * pr[b] * (gr[b] - s);
    }
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < H; h++) {
            const real *q = qkv + i * T * D3 + h * hd, *k = q + D;
            const real *gs = gp + (i * H + h) * TT;
            real *gq = gqkv + i * T * D3 + h * hd;
            /* gq (T,hd) = gS · k ;  gk (T,hd) = gSᵀ · q  (scale already in gS) */
            SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)hd, (int)T, 1, gs, (int)T, k,
                    (int)D3, 0, gq, (int)D3);
            SR_FN(sr_gemm_blas)(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)hd, (int)T, 1, gs, (int)T, q,
                    (int)D3, 0, gq + D, (int)D3);
        }
}

/* Naive reference for tests: loops in double, straight from the formulas in
 * the header (forward for the n primal samples; with kt > 0 also the JVP of
 * the kt tangents per primal that follow them).  Returns 0 or -1 (no memory). */
static int SR_FN(attn_naive)(real *y, const real *x, const real *wi, const real *bi,
                             const real *wo, const real *bo, int64_t n, int64_t kt, int64_t T,
                             int64_t D, int64_t H)
{
    int64_t hd = D / H, D3 = 3 * D, S = n * (1 + kt);
    double scale = 1 / sqrt((double)hd);
    double *qkv = malloc((size_t)(S * T * D3) * sizeof *qkv);
    double *p = malloc((size_t)(n * H * T * T) * sizeof *p);
    double *o = malloc((size_t)(T * D) * sizeof *o);
    double *ds = malloc((size_t)T * sizeof *ds);
    if (!qkv || !p || !o || !ds) {
        free(qkv), free(p), free(o), free(ds);
        return -1;
    }
    for (int64_t s = 0; s < S; s++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < D3; c++) {
                double a = s < n && bi ? bi[c] : 0;
                for (int64_t e = 0; e < D; e++)
                    a += (double)x[(s * T + t) * D + e] * wi[c * D + e];
                qkv[(s * T + t) * D3 + c] = a;
            }
#define Q(s, t, h, c) qkv[((s) * T + (t)) * D3 + (h) * hd + (c)]
#define K(s, t, h, c) qkv[((s) * T + (t)) * D3 + D + (h) * hd + (c)]
#define V(s, t, h, c) qkv[((s) * T + (t)) * D3 + 2 * D + (h) * hd + (c)]
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t a = 0; a < T; a++) {
                double *pr = p + ((i * H + h) * T + a) * T, mx = -INFINITY, sum = 0;
                for (int64_t b = 0; b < T; b++) {
                    double sc = 0;
                    for (int64_t c = 0; c < hd; c++)
                        sc += Q(i, a, h, c) * K(i, b, h, c);
                    pr[b] = sc * scale;
                    mx = pr[b] > mx ? pr[b] : mx;
                }
                for (int64_t b = 0; b < T; b++)
                    sum += pr[b] = exp(pr[b] - mx);
                for (int64_t b = 0; b < T; b++)
                    pr[b] /= sum;
            }
    for (int64_t s = 0; s < S; s++) {
        int64_t i = s < n ? s : (s - n) / kt;
        for (int64_t h = 0; h < H; h++)
            for (int64_t a = 0; a < T; a++) {
                const double *pr = p + ((i * H + h) * T + a) * T;
                for (int64_t c = 0; c < hd; c++)
                    o[a * D + h * hd + c] = 0;
                if (s < n) {
                    for (int64_t b = 0; b < T; b++)
                        for (int64_t c = 0; c < hd; c++)
                            o[a * D + h * hd + c] += pr[b] * V(i, b, h, c);
                    continue;
                }
                double rs = 0;
                for (int64_t b = 0; b < T; b++) {
                    double d = 0;
                    for (int64_t c = 0; c < hd; c++)
                        d += Q(s, a, h, c) * K(i, b, h, c) + Q(i, a, h, c) * K(s, b, h, c);
                    ds[b] = d * scale;
                    rs += pr[b] * ds[b];
                }
                for (int64_t b = 0; b < T; b++) {
                    double dp = pr[b] * (ds[b] - rs);
                    for (int64_t c = 0; c < hd; c++)
                        o[a * D + h * hd + c] += dp * V(i, b, h, c) + pr[b] * V(s, b, h, c);
                }
            }
        for (int64_t a = 0; a < T; a++)
            for (int64_t d = 0; d < D; d++) {
                double acc = s < n && bo ? bo[d] : 0;
                for (int64_t e = 0; e < D; e++)
                    acc += o[a * D + e] * wo[d * D + e];
                y[(s * T + a) * D + d] = (real)acc;
            }
    }
#undef Q
#undef K
#undef V
    free(qkv), free(p), free(o), free(ds);
    return 0;
}

#else /* generic part */

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "nn/layers.h"
#include "tensor/tensor_ops.h"

#define SR_GENERIC_FILE "nn/attention.c"
#include "base/generic.h"

enum { STYLE_TIMM, STYLE_TORCHVISION };

typedef struct {
    int64_t dim, heads;
    int qkv_bias, style;
    int wi, bi, wo, bo; /* parameter indices; -1 when absent */
    /* Activations kept across calls (sr_tensor_ensure reuses them).  After a
     * forward with save they are what backward needs; m->saved (the input)
     * marks them valid, and any later forward/jvp drops it. */
    sr_tensor qkv;    /* (S,T,3D) projections of the whole stack */
    sr_tensor att;    /* (n,H,T,T) softmax probabilities of the primals */
    sr_tensor o;      /* (S,T,D) concatenated head outputs */
    sr_tensor go;     /* backward: (N,T,D) dL/do */
    sr_tensor gqkv;   /* backward: (N,T,3D) dL/dqkv */
    sr_tensor wa, wb; /* jvp workspaces (k·T,T), (T,k·T); backward: wa is gP (N,H,T,T) */
} attn_cfg;

static const sr_tensor *param_or_null(const sr_module *m, int i)
{
    return i < 0 ? NULL : &m->params[i].value;
}

/* Validate x (S,T,D) and return S and T. */
static int attn_shapes(const sr_module *m, const sr_tensor *x, int64_t *S, int64_t *T)
{
    const attn_cfg *c = m->impl;
    if (x->ndim != 3)
        return sr_fail("attention: input %s must be 3D (N,T,D)", SR_SHAPE(x));
    if (x->shape[2] != c->dim)
        return sr_fail("attention: input %s must end in dim=%lld", SR_SHAPE(x), (long long)c->dim);
    if (x->shape[1] < 1)
        return sr_fail("attention: input %s has no tokens", SR_SHAPE(x));
    if ((double)x->shape[0] * (double)x->shape[1] * 3 * (double)c->dim > 2147483647.0 ||
        (double)x->shape[1] * (double)x->shape[1] > 2147483647.0)
        return sr_fail("attention: input %s is too large for 32-bit BLAS indices", SR_SHAPE(x));
    *S = x->shape[0];
    *T = x->shape[1];
    return 0;
}

/* qkv and o for the stack of S samples, the first n of them primal. */
static int attn_project_in(sr_module *m, const sr_tensor *x, int64_t S, int64_t T, int64_t n, sr_run *run)
{
    attn_cfg *c = m->impl;
    if (sr_pool_ensure(run->pool, &c->qkv, x->dtype, 3, (int64_t[]){S, T, 3 * c->dim}) ||
        sr_pool_ensure(run->pool, &c->att, x->dtype, 4, (int64_t[]){n, c->heads, T, T}) ||
        sr_pool_ensure(run->pool, &c->o, x->dtype, 3, (int64_t[]){S, T, c->dim}) ||
        sr_module_output_like(m, run, x))
        return -1;
    return sr_linear_apply(x, param_or_null(m, c->wi), param_or_null(m, c->bi), &c->qkv, n * T, 0);
}

static int attn_project_out(sr_module *m, int64_t n, int64_t T)
{
    attn_cfg *c = m->impl;
    return sr_linear_apply(&c->o, param_or_null(m, c->wo), param_or_null(m, c->bo), &m->out, n * T, 0);
}

/* A pass that keeps nothing for backward, and backward once done, give
 * the scratch back to the pool, so twelve blocks of ViT-B do not each keep
 * their own. */
static void attn_scratch_done(attn_cfg *c, sr_run *run)
{
    sr_tensor *scratch[] = {&c->qkv, &c->att, &c->o, &c->wa, &c->wb, &c->go, &c->gqkv};
    for (size_t i = 0; i < sizeof scratch / sizeof *scratch; i++)
        sr_pool_put(run->pool, scratch[i]);
}

static int attn_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    attn_cfg *c = m->impl;
    int64_t N, T;
    if (attn_shapes(m, x, &N, &T))
        return -1;
    sr_tensor_free(&m->saved); /* the buffers are about to change */
    if (attn_project_in(m, x, N, T, N, run))
        return -1;
    if (N > 0)
        SR_DISPATCH(x->dtype, attn_primal, sr_data(&c->o), sr_data(&c->att), sr_data(&c->qkv), N, T,
                    c->dim, c->heads);
    if (attn_project_out(m, N, T))
        return -1;
    if (run->save)
        sr_tensor_share(&m->saved, x);
    else
        attn_scratch_done(c, run);
    return 0;
}

static int attn_jvp(sr_module *m, const sr_tensor *xv, sr_run *run)
{
    attn_cfg *c = m->impl;
    int64_t S, T, n = run->n, k = run->k;
    if (attn_shapes(m, xv, &S, &T))
        return -1;
    sr_tensor_free(&m->saved);
    if (sr_pool_ensure(run->pool, &c->wa, xv->dtype, 2, (int64_t[]){k * T, T}) ||
        sr_pool_ensure(run->pool, &c->wb, xv->dtype, 2, (int64_t[]){T, k * T}) ||
        attn_project_in(m, xv, S, T, n, run))
        return -1;
    if (n > 0) {
        SR_DISPATCH(xv->dtype, attn_primal, sr_data(&c->o), sr_data(&c->att), sr_data(&c->qkv), n, T,
                    c->dim, c->heads);
        SR_DISPATCH(xv->dtype, attn_tangent, sr_data(&c->o), sr_data(&c->att), sr_data(&c->qkv),
                    sr_data(&c->wa), sr_data(&c->wb), n, k, T, c->dim, c->heads);
    }
    if (attn_project_out(m, n, T))
        return -1;
    attn_scratch_done(c, run);
    return 0;
}

/* Parameter i's gradient buffer (i < 0: no such parameter, NULL). */
static void *grad_of(sr_module *m, int i, int *err)
{
    void *g = i < 0 ? NULL : sr_param_grad(m, &m->params[i]);
    *err |= i >= 0 && !g;
    return g;
}

static int attn_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    attn_cfg *c = m->impl;
    const sr_tensor *x = &m->saved;
    if (!x->storage)
        return sr_fail("attention backward: forward was not run with save");
    int64_t N = x->shape[0], T = x->shape[1], D = c->dim;
    if (sr_module_grad_input_like(m, run, x) ||
        sr_pool_ensure(run->pool, &c->go, x->dtype, 3, (int64_t[]){N, T, D}) ||
        sr_pool_ensure(run->pool, &c->gqkv, x->dtype, 3, (int64_t[]){N, T, 3 * D}) ||
        sr_pool_ensure(run->pool, &c->wa, x->dtype, 4, (int64_t[]){N, c->heads, T, T}))
        return -1;
    void *gwi = NULL, *gbi = NULL, *gwo = NULL, *gbo = NULL;
    if (run->param_grads) {
        int err = 0;
        gwi = grad_of(m, c->wi, &err);
        gbi = grad_of(m, c->bi, &err);
        gwo = grad_of(m, c->wo, &err);
        gbo = grad_of(m, c->bo, &err);
        if (err)
            return -1;
    }
    if (N > 0) {
        sr_linear_backward(x->dtype, sr_data(&c->go), gwo, gbo, sr_data(gy), sr_data(&c->o),
                           sr_data(&m->params[c->wo].value), N * T, D, D);
        SR_DISPATCH(x->dtype, attn_backward, sr_data(&c->gqkv), sr_data(&c->wa), sr_data(&c->go),
                    sr_data(&c->att), sr_data(&c->qkv), N, T, D, c->heads);
        sr_linear_backward(x->dtype, sr_data(&m->gin), gwi, gbi, sr_data(&c->gqkv), sr_data(x),
                           sr_data(&m->params[c->wi].value), N * T, D, 3 * D);
    }
    attn_scratch_done(c, run);
    return 0;
}

int sr_attention_naive(const sr_module *m, const sr_tensor *xv, int64_t n, int64_t k, sr_tensor *y)
{
    if (!m || m->ops->forward != attn_forward)
        return sr_fail("attention naive: not an attention module");
    const attn_cfg *c = m->impl;
    int64_t S, T;
    if (sr_module_check_dtype(m, xv) || attn_shapes(m, xv, &S, &T))
        return -1;
    if (k < 0 || S != n * (1 + k))
        return sr_fail("attention naive: input %s does not hold %lld primal rows plus %lld tangents each",
                       SR_SHAPE(xv), (long long)n, (long long)k);
    if (sr_tensor_alloc(y, xv->dtype, 3, xv->shape))
        return -1;
    const sr_tensor *bi = param_or_null(m, c->bi), *bo = param_or_null(m, c->bo);
    int rc = SR_DISPATCH_RET(xv->dtype, attn_naive, sr_data(y), sr_data(xv),
                             sr_data(&m->params[c->wi].value), bi ? sr_data(bi) : NULL,
                             sr_data(&m->params[c->wo].value), bo ? sr_data(bo) : NULL, n, k, T,
                             c->dim, c->heads);
    return rc ? sr_fail("attention naive: out of memory") : 0;
}

static void attn_reset(sr_module *m, sr_rng *rng)
{
    attn_cfg *c = m->impl;
    double lin = 1.0 / sqrt((double)c->dim); /* nn.Linear default: U(±1/√fan_in) */
    if (c->style == STYLE_TIMM) {
        /* timm's Attention is two nn.Linear layers with PyTorch's defaults
         * (the ViT model's own trunc_normal init is the model's business). */
        sr_tensor_fill_uniform(&m->params[c->wi].value, rng, -lin, lin);
        if (c->bi >= 0)
            sr_tensor_fill_uniform(&m->params[c->bi].value, rng, -lin, lin);
        sr_tensor_fill_uniform(&m->params[c->wo].value, rng, -lin, lin);
        if (c->bo >= 0)
            sr_tensor_fill_uniform(&m->params[c->bo].value, rng, -lin, lin);
    } else {
        /* MultiheadAttention._reset_parameters: xavier_uniform on the (3D,D)
         * in_proj_weight (fan_in D, fan_out 3D), zero biases; out_proj keeps
         * nn.Linear's default weight init. */
        double xb = sqrt(6.0 / (4.0 * (double)c->dim));
        sr_tensor_fill_uniform(&m->params[c->wi].value, rng, -xb, xb);
        if (c->bi >= 0)
            sr_tensor_fill(&m->params[c->bi].value, 0);
        sr_tensor_fill_uniform(&m->params[c->wo].value, rng, -lin, lin);
        if (c->bo >= 0)
            sr_tensor_fill(&m->params[c->bo].value, 0);
    }
}

static void attn_free(sr_module *m)
{
    attn_cfg *c = m->impl;
    sr_tensor *all[] = {&c->qkv, &c->att, &c->o, &c->go, &c->gqkv, &c->wa, &c->wb};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sr_tensor_free(all[i]);
}

static void attn_describe(const sr_module *m, char *buf, size_t n)
{
    const attn_cfg *c = m->impl;
    snprintf(buf, n, "dim %lld, %lld heads of %lld, %s%s", (long long)c->dim, (long long)c->heads,
             (long long)(c->dim / c->heads), c->style == STYLE_TIMM ? "timm" : "torchvision",
             c->qkv_bias ? "" : c->style == STYLE_TIMM ? ", no qkv bias" : ", no biases");
}

static const sr_module_ops attn_ops = {
    .kind = "attention", .forward = attn_forward, .jvp = attn_jvp, .backward = attn_backward,
    .reset = attn_reset, .free_impl = attn_free, .describe = attn_describe, .flags = SR_MOD_PRODUCTS,
};

sr_module *sr_attention_create(const sr_opts *o)
{
    attn_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    const char *style;
    if (sr_opt_req_int(o, "dim", 1, &cfg.dim) || sr_opt_req_int(o, "num_heads", 1, &cfg.heads) ||
        sr_opt_bool(o, "qkv_bias", 1, &cfg.qkv_bias) || sr_opt_str(o, "style", "timm", &style))
        return NULL;
    if (strcmp(style, "timm") == 0)
        cfg.style = STYLE_TIMM;
    else if (strcmp(style, "torchvision") == 0)
        cfg.style = STYLE_TORCHVISION;
    else {
        sr_fail("attention: style must be \"timm\" or \"torchvision\" (got \"%s\")", style);
        return NULL;
    }
    if (cfg.dim % cfg.heads) {
        sr_fail("attention: dim=%lld is not divisible by num_heads=%lld", (long long)cfg.dim,
                (long long)cfg.heads);
        return NULL;
    }
    int tv = cfg.style == STYLE_TORCHVISION;
    int proj_bias = tv ? cfg.qkv_bias : 1;
    const char *wi = tv ? "in_proj_weight" : "qkv.weight", *bi = tv ? "in_proj_bias" : "qkv.bias";
    const char *wo = tv ? "out_proj.weight" : "proj.weight", *bo = tv ? "out_proj.bias" : "proj.bias";
    sr_module *m = sr_module_new(&attn_ops, sizeof cfg);
    if (!m)
        return NULL;
    int64_t D = cfg.dim, wis[2] = {3 * D, D}, bis = 3 * D, wos[2] = {D, D};
    int np = 0;
    cfg.wi = np++;
    cfg.bi = cfg.qkv_bias ? np++ : -1;
    cfg.wo = np++;
    cfg.bo = proj_bias ? np++ : -1;
    *(attn_cfg *)m->impl = cfg;
    if (!sr_module_add_param(m, wi, 2, wis, 1) ||
        (cfg.qkv_bias && !sr_module_add_param(m, bi, 1, &bis, 1)) ||
        !sr_module_add_param(m, wo, 2, wos, 1) ||
        (proj_bias && !sr_module_add_param(m, bo, 1, &D, 1))) {
        sr_module_release(m);
        return NULL;
    }
    return m;
}

#endif
