/* gemm.c - C = A·B on one thread by a 6 x 2-vector register block.
 *
 * Why not OpenBLAS here: a Winograd convolution makes 16 products per
 * chunk of tiles, and for each one OpenBLAS zeroes C in a pass of its own
 * (β = 0) before its kernel accumulates into it, and packs both A (the
 * transformed weights, the same for every chunk) and B.  Here A is packed
 * once per call, the input transform writes B directly in the kernel's
 * strips, and the kernel stores C once.  In a CIFAR ResNet-18 forward those
 * passes were 10% of the time (β 4.4%, packing 5.6%); the kernel itself
 * runs at OpenBLAS's rate, about 18 GMAC/s per core here, near the FMA
 * peak.
 *
 * Layout (BLIS's): A in panels of GEMM_MR rows, k-major (a panel is K x
 * MR, rows past M zero), so the kernel broadcasts its MR values of column k
 * from one cache line; B in strips of NR columns, each K x NR row-major,
 * which stay in L1 while every A panel passes over them.  The block keeps
 * MR x NR sums in 12 of the 16 vector registers across the whole K loop.
 * This file is compiled with -ffp-contract=fast (Makefile): a·b + c is one
 * FMA.  No K blocking: the widest use (512 channels) has 32 KB strips, and
 * ran at the same rate.
 *
 * Not for the other convolutions: there B is im2col's or the input's rows,
 * which would have to be copied into strips from rows up to 12 KB apart,
 * and K reaches 2048, where A would stream from L3 for every strip without
 * blocking.  Tried as is, a ResNet-50 forward got 5% slower (the copy alone
 * 5% of it, against OpenBLAS's packing 2%). */
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
                              int64_t ldc, int rows)
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
    vec r[2 * GEMM_MR] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    for (int i = 0; i < rows; i++) {
        memcpy(C + i * ldc, &r[2 * i], sizeof r[0]);
        memcpy(C + i * ldc + GEMM_VL, &r[2 * i + 1], sizeof r[0]);
    }
}

void SR_FN(sr_gemm_strips)(int64_t M, int64_t N, int64_t K, const real *Ap, const real *Bs, int64_t ss, real *C,
                           int64_t ldc)
{
    const int64_t nr = 2 * GEMM_VL, np = (M + GEMM_MR - 1) / GEMM_MR;
    real edge[GEMM_MR * 2 * GEMM_VL]; /* MR x nr */
    for (int64_t j = 0; j < N; j += nr) {
        int64_t w = N - j < nr ? N - j : nr;
        const real *bp = Bs + j / nr * ss;
        for (int64_t p = 0; p < np; p++) {
            int rows = M - p * GEMM_MR < GEMM_MR ? (int)(M - p * GEMM_MR) : GEMM_MR;
            real *Cp = C + p * GEMM_MR * ldc + j;
            if (w == nr) {
                SR_FN(gemm_block)(K, Ap + p * K * GEMM_MR, bp, Cp, ldc, rows);
                continue;
            }
            /* A partial strip: its block goes through a full-width copy. */
            SR_FN(gemm_block)(K, Ap + p * K * GEMM_MR, bp, edge, nr, rows);
            for (int i = 0; i < rows; i++)
                memcpy(Cp + i * ldc, edge + i * nr, (size_t)w * sizeof(real));
        }
    }
}

#else

#include "gemm.h"

#include <string.h>

#define SR_GENERIC_FILE "gemm.c"
#include "generic.h"

#endif
