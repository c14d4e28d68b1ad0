/* bench_bf16_gemm.c - what bf16 inputs with float32 accumulation would buy
 * srgeo's products on this CPU: an AVX512-BF16 GEMM (vdpbf16ps, the
 * blocking and the 6 x 2-vector register block of kernels/gemm.c, A packed
 * once as weights are, B converted to bf16 pairs while it is packed, as
 * activations would be per layer) against srgeo's float32 GEMM
 * (sr_gemm_f32) on the im2col shapes of the profile's forwards, one thread,
 * alternating rounds, best of each.  Also a conversion pass on its own (B
 * from float32 to bf16, what a layer pays if its input is not already
 * bf16), as a share of the float32 product.  README, "Precision", has the
 * figures and why srgeo does not ship a bf16 path.  The bf16 kernel lives
 * here, not in core/: it is measured, not used.
 *
 *   build/bench_bf16_gemm [rounds [cpu]]    (cpu: process CPU time, not wall)
 *
 * Without AVX512-BF16 at compile time (-march=native on a CPU without it)
 * the program says so and measures nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threads.h"
#include "header.h"
#include "kernels/bf16.h"
#include "kernels/gemm.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
#include <immintrin.h>

/* M x K weights, K x N activations (N: the rows' pixels). */
typedef struct {
    const char *name;
    int64_t M, K, N;
} shape;

static const shape shapes[] = {
    {"small_resnet 16->16 3x3 @28", 16, 144, 784 * 8},   {"small_resnet 32->32 3x3 @14", 32, 288, 196 * 32},
    {"small_resnet 64->64 3x3 @7", 64, 576, 49 * 128},   {"resnet18_cifar 64 3x3 @32", 64, 576, 1024 * 4},
    {"resnet18_cifar 128 3x3 @16", 128, 1152, 256 * 16}, {"resnet18_cifar 256 3x3 @8", 256, 2304, 64 * 32},
    {"resnet18_cifar 512 3x3 @4", 512, 4608, 16 * 64},   {"resnet50 1x1 1024->256 @14", 256, 1024, 196 * 16},
};
#define NSHAPE (int)(sizeof shapes / sizeof *shapes)

/* bf16 blocking: K in pairs; a strip of KC x NR bf16 is the float32
 * kernel's KC/2 x NR floats, so twice the K per strip fits L1 alike. */
#define BF_MR 6
#define BF_NR 32
#define BF_KC 512
#define BF_MC (16 * BF_MR)
#define BF_NC 2048

static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void)
{
    struct timespec t;
    clock_gettime(clock_id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint32_t bf16_bits(float f)
{
    float r = sr_bf16_round(f);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    return u >> 16;
}

/* A (M x K) in panels of BF_MR rows, pair-major: element (p, i) holds
 * rows i's columns 2p (low half) and 2p + 1 (high half). */
static void pack_a(uint32_t *Ap, const float *A, int64_t M, int64_t K)
{
    int64_t kp = (K + 1) / 2;
    for (int64_t p0 = 0; p0 < M; p0 += BF_MR)
        for (int64_t p = 0; p < kp; p++)
            for (int i = 0; i < BF_MR; i++) {
                int64_t r = p0 + i;
                uint32_t lo = r < M ? bf16_bits(A[r * K + 2 * p]) : 0;
                uint32_t hi = r < M && 2 * p + 1 < K ? bf16_bits(A[r * K + 2 * p + 1]) : 0;
                Ap[p0 * kp + p * BF_MR + i] = lo | hi << 16;
            }
}

/* Rows [0, kc) and columns [0, nc) of B (ldb) as strips of kc/2 pairs x
 * BF_NR, each lane column j's rows 2p and 2p + 1: converted while packed
 * (vcvtne2ps2bf16 and one permute per 16 columns). */
static void pack_b(uint32_t *Bp, const float *B, int64_t ldb, int64_t kc, int64_t nc)
{
    const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                           6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    int64_t kp = (kc + 1) / 2;
    for (int64_t j = 0; j < nc; j += BF_NR) {
        uint32_t *d = Bp + j * kp;
        int64_t w = nc - j < BF_NR ? nc - j : BF_NR;
        for (int64_t p = 0; p < kp; p++) {
            const float *r0 = B + 2 * p * ldb + j, *r1 = 2 * p + 1 < kc ? r0 + ldb : NULL;
            if (w == BF_NR && r1) {
                for (int h = 0; h < 2; h++) {
                    __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(r1 + 16 * h), _mm512_loadu_ps(r0 + 16 * h));
                    _mm512_storeu_si512(d + p * BF_NR + 16 * h, _mm512_permutexvar_epi16(inter, (__m512i)v));
                }
                continue;
            }
            for (int64_t c = 0; c < BF_NR; c++)
                d[p * BF_NR + c] = c < w ? bf16_bits(r0[c]) | (r1 ? bf16_bits(r1[c]) << 16 : 0) : 0;
        }
    }
}

/* The block: rows of C (ldc) at columns [0, BF_NR) from a panel and a
 * strip of kp pairs; 12 accumulators, as gemm.c's. */
static void block(int64_t kp, const uint32_t *restrict ap, const uint32_t *restrict bp, float *restrict C,
                  int64_t ldc, int rows, int acc)
{
    __m512 c[2 * BF_MR];
    for (int i = 0; i < 2 * BF_MR; i++)
        c[i] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kp; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + p * BF_NR), b1 = (__m512bh)_mm512_loadu_si512(bp + p * BF_NR + 16);
        const uint32_t *a = ap + p * BF_MR;
#define BF_ROW(i)                                                                                                    \
    {                                                                                                                \
        __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);                                                        \
        c[2 * (i)] = _mm512_dpbf16_ps(c[2 * (i)], ai, b0), c[2 * (i) + 1] = _mm512_dpbf16_ps(c[2 * (i) + 1], ai, b1); \
    }
        BF_ROW(0) BF_ROW(1) BF_ROW(2) BF_ROW(3) BF_ROW(4) BF_ROW(5)
#undef BF_ROW
    }
    for (int i = 0; i < rows; i++) {
        __m512 lo = c[2 * i], hi = c[2 * i + 1];
        if (acc)
            lo = _mm512_add_ps(lo, _mm512_loadu_ps(C + i * ldc)), hi = _mm512_add_ps(hi, _mm512_loadu_ps(C + i * ldc + 16));
        _mm512_storeu_ps(C + i * ldc, lo);
        _mm512_storeu_ps(C + i * ldc + 16, hi);
    }
}

/* C (M x N, ldc; N a multiple of BF_NR) = A · B, A packed by pack_a. */
static void gemm_bf16(int64_t M, int64_t N, int64_t K, const uint32_t *Ap, const float *B, float *C, uint32_t *Bp)
{
    int64_t kpa = (K + 1) / 2;
    for (int64_t j0 = 0; j0 < N; j0 += BF_NC) {
        int64_t nc = N - j0 < BF_NC ? N - j0 : BF_NC;
        for (int64_t k0 = 0; k0 < K; k0 += BF_KC) {
            int64_t kc = K - k0 < BF_KC ? K - k0 : BF_KC, kp = (kc + 1) / 2;
            pack_b(Bp, B + k0 * N + j0, N, kc, nc);
            for (int64_t i0 = 0; i0 < M; i0 += BF_MR) {
                int rows = M - i0 < BF_MR ? (int)(M - i0) : BF_MR;
                for (int64_t j = 0; j < nc; j += BF_NR)
                    block(kp, Ap + i0 * kpa + k0 / 2 * BF_MR, Bp + j * kp, C + i0 * N + j0 + j, N, rows, k0 > 0);
            }
        }
    }
}

/* B (K x N) to bf16 in a pass of its own (16 values a step). */
static void convert(uint16_t *dst, const float *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
    for (; i < n; i++)
        dst[i] = (uint16_t)bf16_bits(src[i]);
}

static void fill(float *v, int64_t n, unsigned seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (argc > 2 && !strcmp(argv[2], "cpu"))
        clock_id = CLOCK_PROCESS_CPUTIME_ID;
    if (rounds < 1)
        rounds = 1;
    sr_threads_set(1);
    bench_header();
    printf("bf16 GEMM (AVX512-BF16 vdpbf16ps, 6x32 block, B converted while packed) vs srgeo's float32 GEMM "
           "(sr_gemm_f32, %d-byte vectors); 1 thread, best of %d alternating rounds, %s time\n",
           GEMM_VBYTES, rounds, clock_id == CLOCK_MONOTONIC ? "wall" : "CPU");
    printf("%-30s %6s %6s %6s %9s %9s %6s %9s %9s\n", "shape", "M", "K", "N", "f32 GF/s", "bf16 GF/s", "ratio",
           "convert", "max err");
    double geo = 1;
    for (int s = 0; s < NSHAPE; s++) {
        const shape *sh = &shapes[s];
        int64_t M = sh->M, K = sh->K, N = sh->N;
        float *A = malloc((size_t)(M * K) * sizeof *A), *B = malloc((size_t)(K * N) * sizeof *B);
        float *C = malloc((size_t)(M * N) * sizeof *C), *Cb = malloc((size_t)(M * N) * sizeof *Cb);
        float *Ar = malloc((size_t)(M * K) * sizeof *Ar), *Br = malloc((size_t)(K * N) * sizeof *Br);
        float *Ap = malloc((size_t)sr_gemm_packed_size(M, K) * sizeof *Ap);
        float *scratch = malloc((size_t)sr_gemm_scratch_size() * sizeof *scratch);
        uint32_t *Abp = calloc((size_t)((M + BF_MR - 1) / BF_MR * BF_MR * ((K + 1) / 2)), sizeof *Abp);
        uint32_t *Bp = malloc((size_t)(BF_NC * ((BF_KC + 1) / 2)) * sizeof *Bp);
        uint16_t *Bh = malloc((size_t)(K * N) * sizeof *Bh);
        if (!A || !B || !C || !Cb || !Ar || !Br || !Ap || !scratch || !Abp || !Bp || !Bh) {
            fprintf(stderr, "bench_bf16_gemm: out of memory\n");
            return 1;
        }
        fill(A, M * K, 1 + (unsigned)s);
        fill(B, K * N, 101 + (unsigned)s);
        /* correctness: against the float32 product of the rounded inputs */
        sr_bf16_round_n(Ar, A, M * K);
        sr_bf16_round_n(Br, B, K * N);
        sr_gemm_pack_a_f32(Ap, Ar, K, 0, M, M, K);
        sr_gemm_f32(M, N, K, Ap, K, Br, N, C, N, NULL, 0, scratch);
        pack_a(Abp, A, M, K);
        gemm_bf16(M, N, K, Abp, B, Cb, Bp);
        double err = 0, big = 0;
        for (int64_t i = 0; i < M * N; i++) {
            double e = Cb[i] - C[i];
            err = e < 0 ? (-e > err ? -e : err) : (e > err ? e : err);
            big = C[i] < 0 ? (-C[i] > big ? -C[i] : big) : (C[i] > big ? C[i] : big);
        }
        sr_gemm_pack_a_f32(Ap, A, K, 0, M, M, K);
        double tf = 1e30, tb = 1e30, tc = 1e30;
        for (int r = 0; r < rounds + 1; r++) { /* round 0 warms up */
            double t0 = now();
            sr_gemm_f32(M, N, K, Ap, K, B, N, C, N, NULL, 0, scratch);
            double t1 = now();
            gemm_bf16(M, N, K, Abp, B, Cb, Bp);
            double t2 = now();
            convert(Bh, B, K * N);
            double t3 = now();
            if (r > 0) {
                tf = t1 - t0 < tf ? t1 - t0 : tf;
                tb = t2 - t1 < tb ? t2 - t1 : tb;
                tc = t3 - t2 < tc ? t3 - t2 : tc;
            }
        }
        double fl = 2.0 * (double)M * (double)N * (double)K * 1e-9;
        geo *= tf / tb;
        printf("%-30s %6lld %6lld %6lld %9.1f %9.1f %6.2f %8.1f%% %9.1e\n", sh->name, (long long)M, (long long)K,
               (long long)N, fl / tf, fl / tb, tf / tb, 100 * tc / tf, big > 0 ? err / big : err);
        free(A), free(B), free(C), free(Cb), free(Ar), free(Br), free(Ap), free(scratch), free(Abp), free(Bp),
            free(Bh);
    }
    printf("geometric mean bf16/f32 speed ratio: %.2f  (convert: a float32 -> bf16 pass over B alone, %% of the "
           "f32 product; max err: |bf16 - f32 on rounded inputs| / max |C|)\n",
           pow(geo, 1.0 / NSHAPE));
    return 0;
}

#else

int main(void)
{
    bench_header();
    printf("bench_bf16_gemm: built without AVX512-BF16 (-march=native on a CPU without it): nothing to measure\n");
    return 0;
}

#endif
