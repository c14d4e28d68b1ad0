/* gemm.c - C = A·B on one thread by a 6 x 2-vector register block.
 *
 * Why not OpenBLAS here: a Winograd convolution makes 16 products per
 * chunk of tiles, and for each one OpenBLAS zeroes C in a pass of its own
 * (β = 0) before its kernel accumulates into it, and packs both A (the
 * transformed weights, the same for every chunk) and B.  Here A is packed
 * once per call, the input transform writes B directly in the kernel's
 * strips, and the kernel stores C once.  In a CIFAR ResNet-18 forward those
 * passes were 10% of the time (β 4.4%, packing 5.6%); the kernel itself
 * runs at OpenBLAS's rate on AVX2, about 18 GMAC/s per core on a Zen 1.
 * And the vectors are as wide as the CPU's (-march=native): with AVX-512
 * (a Zen 5 here) a block is 6 x 32 floats, where OpenBLAS 0.3.21, pinned
 * to its Haswell kernels by OPENBLAS_CORETYPE on such machines, runs AVX2:
 * 90-99 GMAC/s per core against its 49-54 on ResNet-50's 1x1 shapes.
 *
 * Layout (BLIS's): A in panels of GEMM_MR rows, k-major (a panel is K x
 * MR, rows past M zero), so the kernel broadcasts its MR values of column k
 * from one cache line; B in strips of NR columns, each K x NR row-major,
 * which stay in L1 while every A panel passes over them.  The block keeps
 * MR x NR sums in 12 vector registers across the whole K loop.  This file
 * is compiled with -ffp-contract=fast (Makefile): a·b + c is one FMA.
 *
 * sr_gemm, the general product the other convolutions' forwards use on one
 * thread, blocks as BLIS does: K in blocks of GEMM_KC (a strip, KC x NR,
 * stays in L1), B's block of KC x GEMM_NC packed once and read by every
 * GEMM_MC rows of A (which stay in L2).  Packing B whole blocks at a time,
 * row segments of NR, is what makes it pay: copying B strip by strip
 * inside an unblocked loop over K up to 2048 was tried first and made a
 * ResNet-50 forward 5% slower on a Zen 1.
 *
 * sr_gemm_own is the BLAS form (transposes, alpha, beta) on the same blocks,
 * cut over srgeo's threads by strips of C's columns or panels of its rows
 * (the longer side), each part packing the blocks of A and B it reads:
 * packing all of A up front into one buffer made ConvNeXt's linear layers
 * (25088 rows of 96) fault in a fresh 10-40 MB buffer per call.  Where the
 * BLAS runs older vectors than the build (a Zen 5 with OPENBLAS_CORETYPE=
 * Haswell) it ran ViT-B/16's and ConvNeXt-T's forwards 1.3-1.4x faster
 * than OpenBLAS; against OpenBLAS's own AVX-512 (SkylakeX) kernels it was
 * within 10% either way (249 vs 232, 327 vs 348, 72 vs 68 GFLOP/s on
 * linear layers), so the BLAS keeps the products there. */
#ifdef SR_REAL

typedef real SR_FN(gemm_vec) __attribute__((vector_size(GEMM_VBYTES)));
#define GEMM_VL ((int64_t)(GEMM_VBYTES / sizeof(real)))

static inline SR_FN(gemm_vec) SR_FN(gemm_load)(const real *p)
{
    SR_FN(gemm_vec) v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Panels of rows [r0, r1) of alpha·op(A), op(A) M x K: A (row stride lda)
 * or, with ta, the transpose of a K x M matrix A.  alpha costs nothing here
 * (the BLAS form's scale, the attention scores' 1/sqrt(d)).  Column by
 * column, so the panel is written in order: row by row it was written at
 * a stride of MR, a fifth of a ConvNeXt forward's time on the own GEMM. */
static void SR_FN(gemm_pack_a_op)(real *Ap, const real *A, int64_t lda, int ta, real alpha, int64_t r0, int64_t r1,
                                  int64_t M, int64_t K)
{
    for (int64_t p = r0 / GEMM_MR; p * GEMM_MR < r1; p++) {
        real *restrict d = Ap + p * K * GEMM_MR;
        int64_t base = p * GEMM_MR, rows = M - base < GEMM_MR ? M - base : GEMM_MR;
        if (ta) {
            for (int64_t k = 0; k < K; k++) {
                const real *s = A + k * lda + base;
                for (int i = 0; i < GEMM_MR; i++)
                    d[k * GEMM_MR + i] = i < rows ? alpha * s[i] : 0;
            }
        } else if (rows == GEMM_MR) {
            const real *a0 = A + base * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda, *a4 = a3 + lda,
                       *a5 = a4 + lda;
            for (int64_t k = 0; k < K; k++) {
                real *dk = d + k * GEMM_MR;
                dk[0] = alpha * a0[k], dk[1] = alpha * a1[k], dk[2] = alpha * a2[k];
                dk[3] = alpha * a3[k], dk[4] = alpha * a4[k], dk[5] = alpha * a5[k];
            }
        } else {
            for (int64_t k = 0; k < K; k++)
                for (int i = 0; i < GEMM_MR; i++)
                    d[k * GEMM_MR + i] = i < rows ? alpha * A[(base + i) * lda + k] : 0;
        }
    }
}

void SR_FN(sr_gemm_pack_a)(real *Ap, const real *A, int64_t lda, int64_t r0, int64_t r1, int64_t M, int64_t K)
{
    SR_FN(gemm_pack_a_op)(Ap, A, lda, 0, 1, r0, r1, M, K);
}

/* The block: rows = min(MR, rows left) of C (ldc) at columns [0, NR),
 * from panel ap and strip bp. */
static void SR_FN(gemm_block)(int64_t K, const real *restrict ap, const real *restrict bp, real *restrict C,
                              int64_t ldc, int rows, int acc)
{
    typedef SR_FN(gemm_vec) vec;
    vec c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
    vec c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
    for (int64_t k = 0; k < K; k++) {
        vec b0 = SR_FN(gemm_load)(bp + k * 2 * GEMM_VL), b1 = SR_FN(gemm_load)(bp + k * 2 * GEMM_VL + GEMM_VL);
        const real *a = ap + k * GEMM_MR;
        c00 += a[0] * b0, c01 += a[0] * b1;
        c10 += a[1] * b0, c11 += a[1] * b1;
        c20 += a[2] * b0, c21 += a[2] * b1;
        c30 += a[3] * b0, c31 += a[3] * b1;
        c40 += a[4] * b0, c41 += a[4] * b1;
        c50 += a[5] * b0, c51 += a[5] * b1;
    }
    if (rows == GEMM_MR && !acc) {
        /* Stored straight from the registers: through the array below,
         * indexed at run time, the sums went to the stack and back first,
         * 5% of a block at K = 64 (a Winograd product of 64 channels). */
#define GEMM_PUT(i, lo, hi)                                                     \
    memcpy(C + (i) * ldc, &(lo), sizeof(vec)), memcpy(C + (i) * ldc + GEMM_VL, &(hi), sizeof(vec))
        GEMM_PUT(0, c00, c01), GEMM_PUT(1, c10, c11), GEMM_PUT(2, c20, c21);
        GEMM_PUT(3, c30, c31), GEMM_PUT(4, c40, c41), GEMM_PUT(5, c50, c51);
#undef GEMM_PUT
        return;
    }
    vec r[2 * GEMM_MR] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    for (int i = 0; acc && i < rows; i++) {
        r[2 * i] += SR_FN(gemm_load)(C + i * ldc);
        r[2 * i + 1] += SR_FN(gemm_load)(C + i * ldc + GEMM_VL);
    }
    for (int i = 0; i < rows; i++) {
        memcpy(C + i * ldc, &r[2 * i], sizeof r[0]);
        memcpy(C + i * ldc + GEMM_VL, &r[2 * i + 1], sizeof r[0]);
    }
}

/* Column j of B and C in runs (see gemm.h): its offset in B or C. */
static inline int64_t SR_FN(gemm_col)(const sr_gemm_runs *r, int64_t j, int64_t stride)
{
    return j / r->run * stride + j % r->run;
}

/* Columns from j on that lie in j's run, at most left. */
static inline int64_t SR_FN(gemm_seg)(const sr_gemm_runs *r, int64_t j, int64_t left)
{
    int64_t n = r->run - j % r->run;
    return n < left ? n : left;
}

/* Columns [j, j + w) of C (+)= the first w columns of the MR x nr block
 * at edge, run by run. */
static void SR_FN(gemm_put)(real *C, int64_t ldc, const sr_gemm_runs *r, int64_t j, int64_t w, const real *edge,
                            int64_t nr, int rows, int acc)
{
    for (int64_t c = 0, len; c < w; c += len) {
        len = SR_FN(gemm_seg)(r, j + c, w - c);
        real *d = C + SR_FN(gemm_col)(r, j + c, r->cs);
        for (int i = 0; i < rows; i++) {
            real *restrict di = d + i * ldc;
            const real *restrict ei = edge + i * nr + c;
            if (acc)
                for (int64_t t = 0; t < len; t++)
                    di[t] += ei[t];
            else
                memcpy(di, ei, (size_t)len * sizeof(real));
        }
    }
}

/* Columns [j0, j0 + N) of C (+)= Ap · strips (acc: add to C), A's panels
 * ps apart. */
static void SR_FN(gemm_strips)(int64_t M, int64_t N, int64_t K, const real *Ap, int64_t ps, const real *Bs,
                               int64_t ss, real *C, int64_t ldc, const sr_gemm_runs *r, int64_t j0, int acc)
{
    const int64_t nr = 2 * GEMM_VL, np = (M + GEMM_MR - 1) / GEMM_MR;
    real edge[GEMM_MR * 2 * GEMM_VL]; /* MR x nr */
    for (int64_t j = 0; j < N; j += nr) {
        int64_t w = N - j < nr ? N - j : nr;
        /* a whole strip within one run goes straight to C */
        int whole = w == nr && SR_FN(gemm_seg)(r, j0 + j, nr) == nr;
        const real *bp = Bs + j / nr * ss;
        for (int64_t p = 0; p < np; p++) {
            int rows = M - p * GEMM_MR < GEMM_MR ? (int)(M - p * GEMM_MR) : GEMM_MR;
            real *Cp = C + p * GEMM_MR * ldc;
            if (whole) {
                SR_FN(gemm_block)(K, Ap + p * ps, bp, Cp + SR_FN(gemm_col)(r, j0 + j, r->cs), ldc, rows, acc);
                continue;
            }
            SR_FN(gemm_block)(K, Ap + p * ps, bp, edge, nr, rows, 0);
            SR_FN(gemm_put)(Cp, ldc, r, j0 + j, w, edge, nr, rows, acc);
        }
    }
}

void SR_FN(sr_gemm_strips)(int64_t M, int64_t N, int64_t K, const real *Ap, const real *Bs, int64_t ss, real *C,
                           int64_t ldc)
{
    const sr_gemm_runs one = {N > 0 ? N : 1, 0, 0};
    SR_FN(gemm_strips)(M, N, K, Ap, K * GEMM_MR, Bs, ss, C, ldc, &one, 0, 0);
}

/* Rows [0, kc) and columns [j0, j0 + nc) of B (ldb, in runs; r NULL: B
 * transposed, stored N x K) into strips of kc x NR at Bp + j·kc, the last
 * one's columns past nc zeroed.  Strip
 * by strip: each reads NR contiguous values of kc rows (per run), a stride
 * the prefetcher follows. */
static void SR_FN(gemm_pack_b)(real *restrict Bp, const real *restrict B, int64_t ldb, const sr_gemm_runs *r,
                               int64_t j0, int64_t kc, int64_t nc)
{
    const int64_t nr = 2 * GEMM_VL;
    if (!r) { /* B transposed: column j of B is row j of the stored N x K matrix */
        for (int64_t j = 0; j < nc; j += nr) {
            real *d = Bp + j * kc;
            int64_t w = nc - j < nr ? nc - j : nr;
            for (int64_t c = 0; c < w; c++) {
                const real *s = B + (j0 + j + c) * ldb;
                for (int64_t k = 0; k < kc; k++)
                    d[k * nr + c] = s[k];
            }
            for (int64_t k = 0; w < nr && k < kc; k++)
                memset(d + k * nr + w, 0, (size_t)(nr - w) * sizeof(real));
        }
        return;
    }
    for (int64_t j = 0; j < nc; j += nr) {
        real *d = Bp + j * kc;
        int64_t w = nc - j < nr ? nc - j : nr;
        if (w == nr && SR_FN(gemm_seg)(r, j0 + j, nr) == nr) {
            const real *s = B + SR_FN(gemm_col)(r, j0 + j, r->bs);
            for (int64_t k = 0; k < kc; k++)
                memcpy(d + k * nr, s + k * ldb, (size_t)nr * sizeof(real));
            continue;
        }
        for (int64_t c = 0, len; c < w; c += len) {
            len = SR_FN(gemm_seg)(r, j0 + j + c, w - c);
            const real *s = B + SR_FN(gemm_col)(r, j0 + j + c, r->bs);
            for (int64_t k = 0; k < kc; k++)
                memcpy(d + k * nr + c, s + k * ldb, (size_t)len * sizeof(real));
        }
        for (int64_t k = 0; w < nr && k < kc; k++)
            memset(d + k * nr + w, 0, (size_t)(nr - w) * sizeof(real));
    }
}

/* n split into equal blocks of at most most, each a multiple of q. */
static int64_t SR_FN(gemm_even)(int64_t n, int64_t most, int64_t q)
{
    int64_t blocks = (n + most - 1) / most, b = (n + blocks - 1) / blocks;
    return (b + q - 1) / q * q;
}

/* Where a product's A comes from: packed panels (Ap, ka columns each), or
 * op(A) itself (A non-NULL: lda, ta, alpha), packed block by block into buf
 * (GEMM_MC x GEMM_KC) as BLIS does, so no copy of a large A is made. */
typedef struct {
    const real *Ap;
    int64_t ka;
    const real *A;
    int64_t lda;
    int ta;
    real alpha;
    real *buf;
} SR_FN(gemm_a);

/* sr_gemm's body; with tb (runs NULL), B is stored transposed (N x K,
 * row stride ldb). */
static void SR_FN(gemm_run)(int64_t M, int64_t N, int64_t K, const SR_FN(gemm_a) *a, const real *B, int64_t ldb,
                            int tb, real *C, int64_t ldc, const sr_gemm_runs *runs, int acc, real *scratch)
{
    const int64_t nr = 2 * GEMM_VL;
    const sr_gemm_runs one = {N > 0 ? N : 1, 0, 0}, *r = runs ? runs : &one;
    if (K == 0) {
        for (int64_t i = 0; !acc && i < M; i++)
            for (int64_t j = 0, len; j < N; j += len) {
                len = SR_FN(gemm_seg)(r, j, N - j);
                memset(C + i * ldc + SR_FN(gemm_col)(r, j, r->cs), 0, (size_t)len * sizeof(real));
            }
        return;
    }
    real *Bp = scratch;
    const int64_t kb = SR_FN(gemm_even)(K, GEMM_KC, 1), nb = SR_FN(gemm_even)(N, GEMM_NC, nr);
    for (int64_t j0 = 0; j0 < N; j0 += nb) {
        int64_t nc = N - j0 < nb ? N - j0 : nb;
        for (int64_t k0 = 0; k0 < K; k0 += kb) {
            int64_t kc = K - k0 < kb ? K - k0 : kb;
            SR_FN(gemm_pack_b)(Bp, tb ? B + k0 : B + k0 * ldb, ldb, tb ? NULL : r, j0, kc, nc);
            for (int64_t i0 = 0; i0 < M; i0 += GEMM_MC) {
                int64_t mc = M - i0 < GEMM_MC ? M - i0 : GEMM_MC;
                const real *ap = a->Ap + i0 * a->ka + k0 * GEMM_MR;
                int64_t ps = a->ka * GEMM_MR;
                if (a->A) {
                    const real *src = a->ta ? a->A + k0 * a->lda + i0 : a->A + i0 * a->lda + k0;
                    SR_FN(gemm_pack_a_op)(a->buf, src, a->lda, a->ta, a->alpha, 0, mc, mc, kc);
                    ap = a->buf, ps = kc * GEMM_MR;
                }
                SR_FN(gemm_strips)(mc, nc, kc, ap, ps, Bp, kc * nr, C + i0 * ldc, ldc, r, j0, acc || k0 > 0);
            }
        }
    }
}

void SR_FN(sr_gemm)(int64_t M, int64_t N, int64_t K, const real *Ap, int64_t ka, const real *B, int64_t ldb,
                    real *C, int64_t ldc, const sr_gemm_runs *runs, int acc, real *scratch)
{
    const SR_FN(gemm_a) a = {.Ap = Ap, .ka = ka};
    SR_FN(gemm_run)(M, N, K, &a, B, ldb, 0, C, ldc, runs, acc, scratch);
}

/* The BLAS form on this file's kernel: one product cut into parts, each a
 * block of C of whole strips of columns or of whole panels of rows, each
 * packing the blocks of A and B it reads into its own scratch. */
typedef struct {
    int64_t M, N, K, lda, ldb, ldc;
    const real *A, *B;
    real *C, *scratch;
    int64_t per; /* scratch elements per part: B's block, then A's */
    real alpha;
    int ta, tb, acc, nparts, by_cols;
} SR_FN(gemm_job);

static int SR_FN(gemm_job_run)(void *ctx, int t)
{
    const SR_FN(gemm_job) *j = ctx;
    const int64_t nr = 2 * GEMM_VL;
    int64_t r0 = 0, r1 = j->M, c0 = 0, c1 = j->N;
    if (j->by_cols) {
        int64_t ns = (j->N + nr - 1) / nr;
        c0 = ns * t / j->nparts * nr;
        c1 = ns * (t + 1) / j->nparts * nr;
        c1 = c1 < j->N ? c1 : j->N;
    } else {
        sr_gemm_panel_share(j->M, t, j->nparts, &r0, &r1);
    }
    if (r0 >= r1 || c0 >= c1)
        return 0;
    real *sc = j->scratch + t * j->per;
    const SR_FN(gemm_a) a = {.A = j->ta ? j->A + r0 : j->A + r0 * j->lda, .lda = j->lda, .ta = j->ta,
                             .alpha = j->alpha, .buf = sc + j->per - GEMM_MC * GEMM_KC};
    const real *B = j->tb ? j->B + c0 * j->ldb : j->B + c0;
    SR_FN(gemm_run)(r1 - r0, c1 - c0, j->K, &a, B, j->ldb, j->tb, j->C + r0 * j->ldc + c0, j->ldc, NULL, j->acc, sc);
    return 0;
}

int SR_FN(sr_gemm_own)(int ta, int tb, int64_t M, int64_t N, int64_t K, real alpha, const real *A, int64_t lda,
                       const real *B, int64_t ldb, real beta, real *C, int64_t ldc)
{
    const int64_t nr = 2 * GEMM_VL;
    if (M <= 0 || N <= 0)
        return 0;
    SR_FN(gemm_job) j = {.M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc, .A = A, .B = B, .C = C,
                         .alpha = alpha, .ta = ta, .tb = tb, .acc = beta != 0};
    /* One thread inside a parallel region (a part's own products) or for a
     * small product, where waking the other thread costs more than it
     * saves.  Else cut the longer side of C: each part then packs all of
     * the other operand's blocks, the smaller share of the copying. */
    int T = omp_in_parallel() || (double)M * (double)N * (double)K < GEMM_PAR_MACS ? 1 : sr_threads_get();
    int64_t strips = (N + nr - 1) / nr, panels = (M + GEMM_MR - 1) / GEMM_MR;
    j.by_cols = N > M ? strips >= T : panels < T;
    int64_t units = j.by_cols ? strips : panels;
    if (T > units)
        T = (int)units;
    j.nparts = T < 1 ? 1 : T;
    int64_t cols = j.by_cols ? (strips + j.nparts - 1) / j.nparts * nr : strips * nr;
    if (cols > GEMM_NC)
        cols = GEMM_NC;
    j.per = (K < GEMM_KC ? K : GEMM_KC) * cols + GEMM_MC * GEMM_KC;
    real *buf = aligned_alloc(64, ((size_t)(j.nparts * j.per) * sizeof(real) + 63) / 64 * 64);
    if (!buf)
        return -1;
    j.scratch = buf;
    if (beta != 0 && beta != 1)
        for (int64_t i = 0; i < M; i++)
            for (int64_t c = 0; c < N; c++)
                C[i * ldc + c] *= beta;
    int rc = sr_threads_parts(j.nparts, SR_FN(gemm_job_run), &j);
    free(buf);
    return rc;
}

#else

#include "kernels/gemm.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/blas.h"
#include "base/threads.h"

/* Products below this many multiply-adds stay on the calling thread. */
#define GEMM_PAR_MACS (1 << 21)

#define SR_GENERIC_FILE "kernels/gemm.c"
#include "base/generic.h"

void sr_gemm_blas_f32(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                      float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    /* Narrow products (a row or a few) stay with the BLAS: packing all of
     * B for them costs more than the product. */
    if (o == CblasRowMajor && M >= GEMM_MR && N >= GEMM_MR && sr_blas_get()->own_gemm &&
        !sr_gemm_own_f32(ta != CblasNoTrans, tb != CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    cblas_sgemm(o, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sr_gemm_blas_f64(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                      double alpha, const double *A, int lda, const double *B, int ldb, double beta, double *C,
                      int ldc)
{
    cblas_dgemm(o, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#endif
