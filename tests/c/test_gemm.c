/* test_gemm.c - gemm.c's packed kernel against the plain triple loop in
 * double, in both dtypes: M, N, K that leave partial panels and strips (and
 * M, N, K = 1), every row of a full panel, packing by disjoint row ranges
 * as the Winograd parts do, and columns of C past N left untouched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/gemm.h"
#include "../../core/rng.h"
#include "test.h"

/* A (M x K, row stride lda = K + 3), B in strips, C with ldc = N + 5:
 * pack A in nparts row ranges of whole panels, multiply, compare to the
 * double loop; the padding columns of C must keep their sentinel. */
static double run_case(int dbl, int64_t M, int64_t N, int64_t K, int nparts, int *kept)
{
    const size_t es = dbl ? sizeof(double) : sizeof(float);
    const int64_t nr = sr_gemm_nr(es), lda = K + 3, ldc = N + 5, ns = (N + nr - 1) / nr;
    const int64_t ss = K * nr + nr; /* a strip stride with a gap, as the Winograd buffers have */
    double *a = malloc((size_t)(M * lda) * sizeof *a), *b = malloc((size_t)(K * N) * sizeof *b);
    void *A = malloc((size_t)(M * lda) * es), *Ap = malloc((size_t)sr_gemm_packed_size(M, K) * es);
    void *Bs = calloc((size_t)(ns * ss), es), *C = malloc((size_t)(M * ldc) * es);
    sr_rng r;
    sr_rng_seed(&r, (uint64_t)(M * 1000003 + N * 1009 + K));
    for (int64_t i = 0; i < M * lda; i++)
        a[i] = sr_rng_normal(&r);
    for (int64_t i = 0; i < K * N; i++)
        b[i] = sr_rng_normal(&r);
    for (int64_t i = 0; i < M * lda; i++)
        dbl ? (void)(((double *)A)[i] = a[i]) : (void)(((float *)A)[i] = (float)a[i]);
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) {
            int64_t at = j / nr * ss + k * nr + j % nr;
            dbl ? (void)(((double *)Bs)[at] = b[k * N + j]) : (void)(((float *)Bs)[at] = (float)b[k * N + j]);
        }
    for (int64_t i = 0; i < M * ldc; i++)
        dbl ? (void)(((double *)C)[i] = 7) : (void)(((float *)C)[i] = 7);
    int64_t np = (M + GEMM_MR - 1) / GEMM_MR;
    for (int t = 0; t < nparts; t++) {
        int64_t r0 = np * t / nparts * GEMM_MR, r1 = t + 1 == nparts ? M : np * (t + 1) / nparts * GEMM_MR;
        if (dbl)
            sr_gemm_pack_a_f64(Ap, A, lda, r0, r1, M, K);
        else
            sr_gemm_pack_a_f32(Ap, A, lda, r0, r1, M, K);
    }
    if (dbl)
        sr_gemm_strips_f64(M, N, K, Ap, Bs, ss, C, ldc);
    else
        sr_gemm_strips_f32(M, N, K, Ap, Bs, ss, C, ldc);
    double err = 0;
    *kept = 1;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double s = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                double x = dbl ? a[i * lda + k] : (float)a[i * lda + k];
                double y = dbl ? b[k * N + j] : (float)b[k * N + j];
                s += x * y, mag += fabs(x * y);
            }
            double got = dbl ? ((double *)C)[i * ldc + j] : ((float *)C)[i * ldc + j];
            double e = fabs(got - s) / (mag > 0 ? mag : 1);
            err = e > err || isnan(e) ? e : err;
        }
        for (int64_t j = N; j < ldc; j++)
            if ((dbl ? ((double *)C)[i * ldc + j] : ((float *)C)[i * ldc + j]) != 7)
                *kept = 0;
    }
    free(a), free(b), free(A), free(Ap), free(Bs), free(C);
    return err;
}

TEST(gemm_packed_matches_loop)
{
    static const int64_t shapes[][3] = {{1, 1, 1},   {6, 16, 1},  {13, 37, 9},  {7, 5, 64},
                                        {12, 48, 3}, {64, 33, 64}, {5, 17, 130}, {19, 8, 2}};
    for (int dbl = 0; dbl < 2; dbl++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int parts = 1; parts <= 3; parts++) {
                int kept;
                double e = run_case(dbl, shapes[s][0], shapes[s][1], shapes[s][2], parts, &kept);
                /* a sum of K products: a few roundings of the magnitude */
                double tol = dbl ? 1e-14 : 1e-6;
                CHECK(e < tol, "%s M=%lld N=%lld K=%lld parts %d: rel err %g", dbl ? "f64" : "f32",
                      (long long)shapes[s][0], (long long)shapes[s][1], (long long)shapes[s][2], parts, e);
                CHECK(kept, "%s M=%lld N=%lld K=%lld: wrote C past column N", dbl ? "f64" : "f32",
                      (long long)shapes[s][0], (long long)shapes[s][1], (long long)shapes[s][2]);
            }
}
