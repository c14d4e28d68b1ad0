/* gemm.h - srgeo's own GEMM (gemm.c says why it exists beside OpenBLAS):
 * C = A·B on one thread, A packed once into panels and B written by its
 * producer in strips, for the Winograd convolution, whose input transform
 * writes B and whose transformed weights A serve every chunk of tiles; the
 * same product with B as it is (sr_gemm), for the convolutions that split
 * a batch across threads; and the BLAS form, threaded (sr_gemm_own), which
 * sr_gemm_blas runs every layer's float32 products on when the BLAS's
 * kernels are older than this build's vectors. */
#ifndef SR_GEMM_H
#define SR_GEMM_H

#include <cblas.h>
#include <stddef.h>
#include <stdint.h>

/* Rows per packed panel of A; a strip of B is two vectors of GEMM_VBYTES
 * (AVX2: 16 floats or 8 doubles; AVX-512: 32 or 16). */
#define GEMM_MR 6
#if defined(__AVX512F__)
#define GEMM_VBYTES 64
#else
#define GEMM_VBYTES 32
#endif
static inline int64_t sr_gemm_nr(size_t es) { return (int64_t)(2 * GEMM_VBYTES / es); }

/* Elements of packed A for M rows and K columns. */
static inline int64_t sr_gemm_packed_size(int64_t M, int64_t K) { return (M + GEMM_MR - 1) / GEMM_MR * GEMM_MR * K; }
/* Rows [*r0, *r1) of an M-row matrix whose panels part t of nparts packs:
 * whole panels, shares as even as panels allow (possibly empty). */
static inline void sr_gemm_panel_share(int64_t M, int t, int nparts, int64_t *r0, int64_t *r1)
{
    int64_t np = (M + GEMM_MR - 1) / GEMM_MR, end = np * (t + 1) / nparts * GEMM_MR;
    *r0 = np * t / nparts * GEMM_MR;
    *r1 = end < M ? end : M;
}

/* Pack the panels of rows [r0, r1) of A (M x K, row stride lda) into Ap
 * (M's full packed size); r0, and r1 unless it is M, are multiples of
 * GEMM_MR, so parts may pack disjoint ranges.  Rows past M are zeroed. */
void sr_gemm_pack_a_f32(float *Ap, const float *A, int64_t lda, int64_t r0, int64_t r1, int64_t M, int64_t K);
void sr_gemm_pack_a_f64(double *Ap, const double *A, int64_t lda, int64_t r0, int64_t r1, int64_t M, int64_t K);

/* C (M x N, row stride ldc) = Ap · B, with B (K x N) in strips: columns
 * [j, j + NR) of B are the K x NR block at Bs + (j / NR)·ss, row-major, NR =
 * sr_gemm_nr(element size).  The last strip's columns past N only reach
 * columns of C that are not written, but should be zero: garbage may hold
 * denormals, which are slow. */
void sr_gemm_strips_f32(int64_t M, int64_t N, int64_t K, const float *Ap, const float *Bs, int64_t ss, float *C,
                        int64_t ldc);
void sr_gemm_strips_f64(int64_t M, int64_t N, int64_t K, const double *Ap, const double *Bs, int64_t ss,
                        double *C, int64_t ldc);

/* Whether a call cut into `parts` runs every part's products on one thread
 * (several parts, or one thread in all), so on gemm.c; one part with
 * several threads leaves them to sr_gemm_blas, threaded, instead.  The one rule
 * for the convolution and Winograd forwards. */
static inline int sr_gemm_serial(int parts, int threads) { return parts > 1 || threads == 1; }

/* The general product on one thread: C (M x N, ldc) = A · B, or C += A · B
 * with acc.  A (M x K) is packed: its panels (sr_gemm_pack_a) have ka >= K
 * columns, and Ap points at column k0 of the first, so a product may use
 * columns [k0, k0 + K) of a wider packed matrix.  B (K x N, ldb) is
 * row-major as it is; gemm.c packs it block by block into scratch of
 * sr_gemm_scratch_size elements.  runs (NULL: none) lays the columns of B
 * and C out in runs of `run` columns, run i at B + i·bs and C + i·cs: the
 * images of a batch, each a matrix of its own. */
typedef struct {
    int64_t run, bs, cs;
} sr_gemm_runs;
#define GEMM_KC 256
#define GEMM_MC (16 * GEMM_MR)
#define GEMM_NC 2048
static inline int64_t sr_gemm_scratch_size(void) { return GEMM_KC * GEMM_NC; }
void sr_gemm_f32(int64_t M, int64_t N, int64_t K, const float *Ap, int64_t ka, const float *B, int64_t ldb, float *C,
                 int64_t ldc, const sr_gemm_runs *runs, int acc, float *scratch);
void sr_gemm_f64(int64_t M, int64_t N, int64_t K, const double *Ap, int64_t ka, const double *B, int64_t ldb,
                 double *C, int64_t ldc, const sr_gemm_runs *runs, int acc, double *scratch);


/* The BLAS form, C = alpha·op(A)·op(B) + beta·C (op: the transpose when
 * ta/tb), on this file's kernel, threaded over srgeo's threads (one thread
 * inside a parallel region).  -1 when its buffers cannot be allocated (C
 * untouched then). */
int sr_gemm_own_f32(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
int sr_gemm_own_f64(int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t lda,
                    const double *B, int64_t ldb, double beta, double *C, int64_t ldc);
/* cblas_?gemm's signature, the one entry for the products of layers and
 * kernels: float32 runs on sr_gemm_own when the BLAS's kernels are older
 * than this build's vectors (base/blas.h: own_gemm; OpenBLAS pinned to
 * Haswell on a Zen 5: 49-54 GMAC/s per core against 90-99), else, and for
 * float64 (the checks' precision), on the BLAS. */
void sr_gemm_blas_f32(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                      float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
void sr_gemm_blas_f64(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                      double alpha, const double *A, int lda, const double *B, int ldb, double beta, double *C,
                      int ldc);

#endif
