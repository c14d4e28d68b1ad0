/* matmul.c - the product of two inputs, y = a @ b, with numpy's matmul
 * rules inside a sample: a (..., M, K) and b (..., K, N) give (..., M, N),
 * the leading dims broadcast; a 1-D a is a row (1, K), a 1-D b a column
 * (K, 1), and that dim is dropped from y.  (A product with a constant
 * matrix is a linear layer.)
 *
 * Bilinear: the JVP of tangent j of primal i is at @ bp + ap @ bt, and
 * backward ga = gy @ bᵀ, gb = aᵀ @ gy, summed over broadcast dims.  Every
 * product is one GEMM per matrix through cblas (never inside OpenMP). */
#ifdef SR_REAL

/* C (M, N) = A (M, K) · B (K, N) (+ C when acc); ta/tb: A or B transposed
 * in memory ((K, M), (N, K)). */
static void SR_FN(mm)(real *C, const real *A, const real *B, int64_t M, int64_t N, int64_t K, int ta, int tb,
                      int acc)
{
    if (M == 0 || N == 0)
        return;
    if (K == 0) {
        if (!acc)
            memset(C, 0, (size_t)(M * N) * sizeof(real));
        return;
    }
    SR_FN(sr_gemm_blas)(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
            (int)K, 1, A, ta ? (int)M : (int)K, B, tb ? (int)K : (int)N, acc ? 1 : 0, C, (int)N);
}

#else /* generic part */

#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include "kernels/gemm.h"
#include "nn/layers.h"

#define SR_GENERIC_FILE "nn/matmul.c"
#include "base/generic.h"

typedef struct {
    /* the last call's plan */
    int nb;                                 /* broadcast leading dims */
    int64_t bshape[SR_MAXDIM], sa[SR_MAXDIM], sb[SR_MAXDIM]; /* their sizes, a's and b's matrix strides */
    int64_t M, K, N, nmat;                  /* matrices per sample */
    int64_t as, bs;                         /* a's and b's sample sizes */
    int a1, b1;                             /* a or b was 1-D */
    sr_tensor sa_saved, sb_saved;           /* backward */
} mm_impl;

static int mm_plan(sr_module *m, const sr_tensor *a, const sr_tensor *b, int *ynd, int64_t *yshape)
{
    mm_impl *c = m->impl;
    if (a->ndim < 2 || b->ndim < 2 || a->shape[0] != b->shape[0])
        return sr_fail("matmul: inputs %s and %s need a common batch dim and at least one more", SR_SHAPE(a),
                       SR_SHAPE(b));
    int na = a->ndim - 1, nbd = b->ndim - 1;
    c->a1 = na == 1, c->b1 = nbd == 1;
    int64_t M = c->a1 ? 1 : a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
    int64_t Kb = c->b1 ? b->shape[1] : b->shape[b->ndim - 2], N = c->b1 ? 1 : b->shape[b->ndim - 1];
    if (K != Kb)
        return sr_fail("matmul: inputs %s and %s: %lld columns against %lld rows", SR_SHAPE(a), SR_SHAPE(b),
                       (long long)K, (long long)Kb);
    int la = c->a1 ? 0 : na - 2, lb = c->b1 ? 0 : nbd - 2; /* leading dims of each */
    int nb = la > lb ? la : lb;
    int64_t st_a = M * K, st_b = K * N, nmat = 1;
    for (int i = nb - 1; i >= 0; i--) {
        int ia = la - nb + i, ib = lb - nb + i;
        int64_t da = ia >= 0 ? a->shape[1 + ia] : 1, db = ib >= 0 ? b->shape[1 + ib] : 1;
        if (da != db && da != 1 && db != 1)
            return sr_fail("matmul: the leading dims of %s and %s do not broadcast", SR_SHAPE(a), SR_SHAPE(b));
        c->bshape[i] = da == 1 ? db : da;
        c->sa[i] = da == 1 ? 0 : st_a;
        c->sb[i] = db == 1 ? 0 : st_b;
        st_a *= da, st_b *= db;
        nmat *= c->bshape[i];
    }
    c->nb = nb, c->M = M, c->K = K, c->N = N, c->nmat = nmat;
    c->as = sr_rowsize(a), c->bs = sr_rowsize(b);
    *ynd = 0;
    yshape[(*ynd)++] = a->shape[0];
    for (int i = 0; i < nb; i++)
        yshape[(*ynd)++] = c->bshape[i];
    if (!c->a1)
        yshape[(*ynd)++] = M;
    if (!c->b1)
        yshape[(*ynd)++] = N;
    return 0;
}

/* Offsets of matrix t's operands (in elements, within a sample). */
static void mm_offsets(const mm_impl *c, int64_t t, int64_t *oa, int64_t *ob)
{
    *oa = *ob = 0;
    for (int i = c->nb - 1; i >= 0; i--) {
        int64_t q = t % c->bshape[i];
        t /= c->bshape[i];
        *oa += q * c->sa[i];
        *ob += q * c->sb[i];
    }
}

#define MM_AT(p, i) ((void *)((char *)(p) + (size_t)(i) * es))

static int mm_run(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run, int jvp)
{
    mm_impl *c = m->impl;
    (void)nin;
    const sr_tensor *a = x[0], *b = x[1];
    int ynd = 0;
    int64_t ys[SR_MAXDIM + 2];
    if (mm_plan(m, a, b, &ynd, ys))
        return -1;
    if (ynd > SR_MAXDIM)
        return sr_fail("matmul: the output of %s @ %s has too many dims", SR_SHAPE(a), SR_SHAPE(b));
    if (sr_module_output(m, run, a->dtype, ynd, ys))
        return -1;
    int64_t S = a->shape[0], np = jvp ? run->n : S, ysz = c->M * c->N, yrs = c->nmat * ysz;
    size_t es = sr_dtype_size(a->dtype);
    void *pa = sr_data(a), *pb = sr_data(b), *py = sr_data(&m->out);
    for (int64_t s = 0; s < S; s++) {
        int64_t p = s < np ? s : (s - np) / run->k; /* the primal of a tangent row */
        for (int64_t t = 0; t < c->nmat; t++) {
            int64_t oa, ob;
            mm_offsets(c, t, &oa, &ob);
            void *y = MM_AT(py, s * yrs + t * ysz);
            if (s < np) {
                SR_DISPATCH(a->dtype, mm, y, MM_AT(pa, s * c->as + oa), MM_AT(pb, s * c->bs + ob), c->M, c->N, c->K,
                            0, 0, 0);
            } else {
                SR_DISPATCH(a->dtype, mm, y, MM_AT(pa, s * c->as + oa), MM_AT(pb, p * c->bs + ob), c->M, c->N, c->K,
                            0, 0, 0);
                SR_DISPATCH(a->dtype, mm, y, MM_AT(pa, p * c->as + oa), MM_AT(pb, s * c->bs + ob), c->M, c->N, c->K,
                            0, 0, 1);
            }
        }
    }
    if (run->save && !jvp) {
        sr_tensor_share(&c->sa_saved, a);
        sr_tensor_share(&c->sb_saved, b);
    }
    return 0;
}

static int mm_forward_n(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run)
{
    return mm_run(m, nin, x, run, 0);
}
static int mm_jvp_n(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run)
{
    return mm_run(m, nin, x, run, 1);
}

static int mm_backward_n(sr_module *m, const sr_tensor *gy, int nin, sr_tensor *gin, sr_run *run)
{
    mm_impl *c = m->impl;
    (void)nin;
    const sr_tensor *a = &c->sa_saved, *b = &c->sb_saved;
    if (!a->storage)
        return sr_fail("matmul backward: forward was not run with save");
    if (sr_pool_ensure_like(run->pool, &gin[0], a) || sr_pool_ensure_like(run->pool, &gin[1], b))
        return -1;
    size_t es = sr_dtype_size(gy->dtype);
    memset(sr_data(&gin[0]), 0, (size_t)sr_numel(a) * es);
    memset(sr_data(&gin[1]), 0, (size_t)sr_numel(b) * es);
    int64_t S = gy->shape[0], ysz = c->M * c->N, yrs = c->nmat * ysz;
    for (int64_t s = 0; s < S; s++)
        for (int64_t t = 0; t < c->nmat; t++) {
            int64_t oa, ob;
            mm_offsets(c, t, &oa, &ob);
            const void *g = MM_AT(sr_data(gy), s * yrs + t * ysz);
            /* ga (M, K) += gy (M, N) · bᵀ;  gb (K, N) += aᵀ · gy */
            SR_DISPATCH(gy->dtype, mm, MM_AT(sr_data(&gin[0]), s * c->as + oa), g, MM_AT(sr_data(b), s * c->bs + ob),
                        c->M, c->K, c->N, 0, 1, 1);
            SR_DISPATCH(gy->dtype, mm, MM_AT(sr_data(&gin[1]), s * c->bs + ob), MM_AT(sr_data(a), s * c->as + oa), g,
                        c->K, c->N, c->M, 1, 0, 1);
        }
    sr_pool_put(run->pool, &c->sa_saved);
    sr_pool_put(run->pool, &c->sb_saved);
    return 0;
}

static int mm_arity(const sr_module *m)
{
    (void)m;
    return 2;
}

static void mm_free(sr_module *m)
{
    mm_impl *c = m->impl;
    sr_tensor_free(&c->sa_saved);
    sr_tensor_free(&c->sb_saved);
}

static const sr_module_ops mm_ops = {
    .kind = "matmul", .free_impl = mm_free, .arity = mm_arity, .forward_n = mm_forward_n, .jvp_n = mm_jvp_n,
    .backward_n = mm_backward_n, .flags = SR_MOD_PRODUCTS,
};

sr_module *sr_matmul_create(const sr_opts *o)
{
    (void)o;
    return sr_module_new(&mm_ops, sizeof(mm_impl));
}

#endif
