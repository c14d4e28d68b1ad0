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
 * ResNet-50 forward 5% slower on a Zen 1. */
#ifdef SR_REAL

typedef real SR_FN(gemm_vec) __attribute__((vector_size(GEMM_VBYTES)));
#define GEMM_VL ((int64_t)(GEMM_VBYTES / sizeof(real)))

static inline SR_FN(gemm_vec) SR_FN(gemm_load)(const real *p)
{
    SR_FN(gemm_vec) v;
    memcpy(&v, p, sizeof v);
    return v;
}

void SR_FN(sr_gemm_pack_a)(real *Ap, const real *A, int64_t lda, int64_t r0, int64_t r1, int64_t M, int64_t K)
{
    for (int64_t p = r0 / GEMM_MR; p * GEMM_MR < r1; p++) {
        real *d = Ap + p * K * GEMM_MR;
        for (int i = 0; i < GEMM_MR; i++) {
            int64_t r = p * GEMM_MR + i;
            if (r < M) {
                const real *a = A + r * lda;
                for (int64_t k = 0; k < K; k++)
                    d[k * GEMM_MR + i] = a[k];
            } else {
                for (int64_t k = 0; k < K; k++)
                    d[k * GEMM_MR + i] = 0;
            }
        }
    }
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

/* Rows [0, kc) and columns [j0, j0 + nc) of B (ldb, in runs) into strips
 * of kc x NR at Bp + j·kc, the last one's columns past nc zeroed.  Strip
 * by strip: each reads NR contiguous values of kc rows (per run), a stride
 * the prefetcher follows. */
static void SR_FN(gemm_pack_b)(real *restrict Bp, const real *restrict B, int64_t ldb, const sr_gemm_runs *r,
                               int64_t j0, int64_t kc, int64_t nc)
{
    const int64_t nr = 2 * GEMM_VL;
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

void SR_FN(sr_gemm)(int64_t M, int64_t N, int64_t K, const real *Ap, int64_t ka, const real *B, int64_t ldb,
                    real *C, int64_t ldc, const sr_gemm_runs *runs, int acc, real *scratch)
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
            SR_FN(gemm_pack_b)(Bp, B + k0 * ldb, ldb, r, j0, kc, nc);
            for (int64_t i0 = 0; i0 < M; i0 += GEMM_MC) {
                int64_t mc = M - i0 < GEMM_MC ? M - i0 : GEMM_MC;
                SR_FN(gemm_strips)(mc, nc, kc, Ap + i0 * ka + k0 * GEMM_MR, ka * GEMM_MR, Bp, kc * nr,
                                   C + i0 * ldc, ldc, r, j0, acc || k0 > 0);
            }
        }
    }
}

#else

#include "kernels/gemm.h"

#include <string.h>

#define SR_GENERIC_FILE "kernels/gemm.c"
#include "base/generic.h"

#endif
