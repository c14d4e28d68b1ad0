/* test_gemm.c - gemm.c's packed kernel against the plain triple loop in
 * double, in both dtypes: M, N, K that leave partial panels and strips (and
 * M, N, K = 1), every row of a full panel, packing by disjoint row ranges
 * as the Winograd parts do, and columns of C past N left untouched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "base/threads.h"
#include "kernels/gemm.h"
#include "test.h"

/* Element i of a float or (dbl) double array. */
static void put(void *p, int dbl, int64_t i, double v)
{
    if (dbl)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}
static double get(const void *p, int dbl, int64_t i) { return dbl ? ((const double *)p)[i] : ((const float *)p)[i]; }

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
        put(A, dbl, i, a[i]);
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) {
            int64_t at = j / nr * ss + k * nr + j % nr;
            put(Bs, dbl, at, b[k * N + j]);
        }
    for (int64_t i = 0; i < M * ldc; i++)
        put(C, dbl, i, 7);
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
            double got = get(C, dbl, i * ldc + j);
            double e = fabs(got - s) / (mag > 0 ? mag : 1);
            err = e > err || isnan(e) ? e : err;
        }
        for (int64_t j = N; j < ldc; j++)
            if (get(C, dbl, i * ldc + j) != 7)
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

/* sr_gemm: columns [k0, k0 + K) of A packed with ka = k0 + K + 2 columns;
 * the columns of B and C in runs of `run` (run = N: one matrix, no runs),
 * each run padded (ldb = run + 3, ldc = run + 5) and gapped; C starting at
 * c0 (acc) or NaN.  Compared to the double loop; every element of C's
 * buffer that no column maps to must keep its sentinel. */
static double run_blocked(int dbl, int64_t M, int64_t N, int64_t K, int64_t run, int acc, int *kept)
{
    const size_t es = dbl ? sizeof(double) : sizeof(float);
    const int64_t k0 = 5, ka = k0 + K + 2, ldb = run + 3, ldc = run + 5, nrun = (N + run - 1) / run;
    const int64_t bs = K * ldb + 11, cs = M * ldc + 13, nB = nrun * bs, nC = nrun * cs;
    const sr_gemm_runs runs = {run, bs, cs};
    void *A = malloc((size_t)(M * ka) * es), *Ap = malloc((size_t)sr_gemm_packed_size(M, ka) * es);
    void *B = malloc((size_t)nB * es), *C = malloc((size_t)nC * es), *c0 = malloc((size_t)nC * es);
    void *S = malloc((size_t)sr_gemm_scratch_size() * es);
    sr_rng r;
    sr_rng_seed(&r, (uint64_t)(M * 1000003 + N * 1009 + K + acc));
    for (int64_t i = 0; i < M * ka; i++)
        put(A, dbl, i, sr_rng_normal(&r));
    for (int64_t i = 0; i < nB; i++)
        put(B, dbl, i, sr_rng_normal(&r));
    for (int64_t i = 0; i < nC; i++)
        put(c0, dbl, i, 7);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
            put(c0, dbl, j / run * cs + i * ldc + j % run, acc ? sr_rng_normal(&r) : NAN);
    memcpy(C, c0, (size_t)nC * es);
    const sr_gemm_runs *rp = run == N ? NULL : &runs;
    if (dbl) {
        sr_gemm_pack_a_f64(Ap, A, ka, 0, M, M, ka);
        sr_gemm_f64(M, N, K, (double *)Ap + k0 * GEMM_MR, ka, B, ldb, C, ldc, rp, acc, S);
    } else {
        sr_gemm_pack_a_f32(Ap, A, ka, 0, M, M, ka);
        sr_gemm_f32(M, N, K, (float *)Ap + k0 * GEMM_MR, ka, B, ldb, C, ldc, rp, acc, S);
    }
    double err = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            int64_t at = j / run * cs + i * ldc + j % run;
            double s = acc ? get(c0, dbl, at) : 0, mag = fabs(s);
            for (int64_t k = 0; k < K; k++) {
                double p = get(A, dbl, i * ka + k0 + k) * get(B, dbl, j / run * bs + k * ldb + j % run);
                s += p, mag += fabs(p);
            }
            double e = fabs(get(C, dbl, at) - s) / (mag > 0 ? mag : 1);
            err = e > err || isnan(e) ? e : err;
            put(C, dbl, at, 7); /* checked: leaves the sentinel test below */
        }
    *kept = 1;
    for (int64_t i = 0; i < nC; i++)
        *kept &= get(C, dbl, i) == 7;
    free(A), free(Ap), free(B), free(C), free(c0), free(S);
    return err;
}

TEST(gemm_blocked_matches_loop)
{
    /* {M, N, K, run}: across GEMM_KC (K blocks), GEMM_MC (row blocks) and
     * GEMM_NC (column blocks), with partial panels and strips; K = 0 stores
     * zeros; runs shorter and longer than a strip, strips straddling runs */
    static const int64_t shapes[][4] = {{1, 1, 1, 1},         {13, 37, 300, 37},   {2 * GEMM_MC + 5, 70, 40, 70},
                                        {7, GEMM_NC + 100, 2 * GEMM_KC + 1, GEMM_NC + 100}, {4, 9, 0, 9},
                                        {4, 9, 0, 4},         {13, 49 * 5, 70, 49}, {7, 196 * 3, 33, 196},
                                        {9, 3 * GEMM_NC / 2, 20, GEMM_NC / 2 + 3}};
    for (int dbl = 0; dbl < 2; dbl++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int acc = 0; acc < 2; acc++) {
                int kept;
                const int64_t *c = shapes[s];
                double e = run_blocked(dbl, c[0], c[1], c[2], c[3], acc, &kept);
                CHECK(e < (dbl ? 1e-14 : 1e-6), "%s M=%lld N=%lld K=%lld run %lld acc %d: rel err %g",
                      dbl ? "f64" : "f32", (long long)c[0], (long long)c[1], (long long)c[2], (long long)c[3], acc, e);
                CHECK(kept, "%s M=%lld N=%lld K=%lld run %lld: wrote C outside the product", dbl ? "f64" : "f32",
                      (long long)c[0], (long long)c[1], (long long)c[2], (long long)c[3]);
            }
}

/* sr_gemm_own, the BLAS form: every transpose pair, alpha and beta (0, 1,
 * another), leading dimensions wider than the matrices, on 1 and 2 threads
 * (cut by columns and, for a narrow C, by rows), against the double loop;
 * C's padding columns keep their sentinel.  With beta = 0 C starts as NaN,
 * which must not be read. */
static double run_blas_form(int dbl, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, double beta,
                            int *kept)
{
    const size_t es = dbl ? sizeof(double) : sizeof(float);
    const int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    const int64_t lda = ac + 3, ldb = bc + 2, ldc = N + 5;
    void *A = malloc((size_t)(ar * lda) * es), *B = malloc((size_t)(br * ldb) * es);
    void *C = malloc((size_t)(M * ldc) * es), *c0 = malloc((size_t)(M * ldc) * es);
    sr_rng r;
    sr_rng_seed(&r, (uint64_t)(M * 7919 + N * 104729 + K * 31 + ta * 2 + tb));
    for (int64_t i = 0; i < ar * lda; i++)
        put(A, dbl, i, sr_rng_normal(&r));
    for (int64_t i = 0; i < br * ldb; i++)
        put(B, dbl, i, sr_rng_normal(&r));
    for (int64_t i = 0; i < M * ldc; i++)
        put(c0, dbl, i, i % ldc >= N ? 7 : beta == 0 ? NAN : sr_rng_normal(&r));
    memcpy(C, c0, (size_t)(M * ldc) * es);
    int rc = dbl ? sr_gemm_own_f64(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
                 : sr_gemm_own_f32(ta, tb, M, N, K, (float)alpha, A, lda, B, ldb, (float)beta, C, ldc);
    double err = rc ? INFINITY : 0;
    *kept = 1;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double s = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = get(A, dbl, ta ? k * lda + i : i * lda + k) * get(B, dbl, tb ? j * ldb + k : k * ldb + j);
                s += p, mag += fabs(p);
            }
            s *= alpha, mag *= fabs(alpha);
            if (beta != 0) {
                double c = beta * get(c0, dbl, i * ldc + j);
                s += c, mag += fabs(c);
            }
            double e = fabs(get(C, dbl, i * ldc + j) - s) / (mag > 0 ? mag : 1);
            err = e > err || isnan(e) ? e : err;
        }
        for (int64_t j = N; j < ldc; j++)
            *kept &= get(C, dbl, i * ldc + j) == 7;
    }
    free(A), free(B), free(C), free(c0);
    return err;
}

TEST(gemm_blas_form_matches_loop)
{
    /* {M, N, K}: threaded by columns (wide C), by rows (N of one strip),
     * below the threading size, across GEMM_KC and GEMM_NC, K = 0 */
    static const int64_t shapes[][3] = {{197, 197, 64},       {300, 24, 200}, {13, 37, 9},          {64, 70, 600},
                                        {40, GEMM_NC + 90, 300}, {6, 6, 1},   {33, 50, 0},          {260, 33, 520}};
    static const double ab[][2] = {{1, 0}, {1, 1}, {0.125, 0}, {-2, 0.5}};
    int saved = sr_threads_get();
    for (int threads = 1; threads <= 2; threads++) {
        sr_threads_set(threads);
        for (int dbl = 0; dbl < 2; dbl++)
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
                for (int t = 0; t < 4; t++)
                    for (size_t q = 0; q < sizeof ab / sizeof *ab; q++) {
                        int kept;
                        const int64_t *c = shapes[s];
                        double e = run_blas_form(dbl, t & 1, t >> 1, c[0], c[1], c[2], ab[q][0], ab[q][1], &kept);
                        CHECK(e < (dbl ? 1e-14 : 1e-6) && kept,
                              "%s %d threads ta %d tb %d M=%lld N=%lld K=%lld alpha %g beta %g: rel err %g%s",
                              dbl ? "f64" : "f32", threads, t & 1, t >> 1, (long long)c[0], (long long)c[1],
                              (long long)c[2], ab[q][0], ab[q][1], e, kept ? "" : ", wrote C past column N");
                    }
    }
    sr_threads_set(saved);
}
