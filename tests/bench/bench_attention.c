/* bench_attention.c - multi-head self-attention at ViT-S/16 size
 * (N=8, T=197, D=384, 6 heads), float32, for 1 and 2 threads:
 *   forward ms and GFLOP/s, against cblas_sgemm on a square GEMM of the same
 *   FLOP count measured in the same run;
 *   stacked JVP with k=8 tangents: time per tangent / forward time
 *   (target <= 1.2; the FLOP ratio alone is ~1.33, see below);
 *   forward+backward ms.
 *
 *   make BUILD=build/attn build/attn/bench_attention && ./build/attn/bench_attention
 *
 * FLOPs per sample: projections 8·T·D², scores + values 4·T²·D.  Each tangent
 * repeats the projections and doubles the attention products (dq kᵀ, q dkᵀ,
 * dP v, P dv), so per tangent ≈ (8TD² + 8T²D) / (8TD² + 4T²D) ≈ 1.20 forwards,
 * plus 1/k of a forward for the primal. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threads.h"
#include "header.h"
#include "nn/layers.h"
#include "tensor/tensor_ops.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

#define REPS 7

/* Best wall time over REPS calls of each function, the calls interleaved
 * (f, g, f, g, ...) after one warm-up each, so that load from other tenants
 * of these shared VMs drifts into both alike and their ratio stays fair. */
typedef int (*bench_fn)(void *ud);
static int best_times(int nf, const bench_fn *fns, void *ud, double *best)
{
    for (int i = 0; i < nf; i++) {
        best[i] = INFINITY;
        if (fns[i](ud))
            return -1;
    }
    for (int r = 0; r < REPS; r++)
        for (int i = 0; i < nf; i++) {
            double t0 = now();
            if (fns[i](ud))
                return -1;
            double t = now() - t0;
            best[i] = t < best[i] ? t : best[i];
        }
    return 0;
}

typedef struct {
    sr_module *m;
    sr_tensor x, stack, gy;
    int64_t n, k;
    float *a, *b, *c;
    int gn;
} bench_state;

static int run_forward(void *ud)
{
    bench_state *s = ud;
    sr_run run = SR_RUN_INIT;
    return sr_module_forward(s->m, &s->x, &run);
}

static int run_jvp(void *ud)
{
    bench_state *s = ud;
    sr_run run = SR_RUN_INIT;
    run.n = s->n;
    run.k = s->k;
    return sr_module_jvp(s->m, &s->stack, &run);
}

static int run_fwd_bwd(void *ud)
{
    bench_state *s = ud;
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    return sr_module_forward(s->m, &s->x, &run) || sr_module_backward(s->m, &s->gy, &run);
}

static int run_sgemm(void *ud)
{
    bench_state *s = ud;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->gn, s->gn, s->gn, 1, s->a, s->gn, s->b,
                s->gn, 0, s->c, s->gn);
    return 0;
}

int main(void)
{
    const int64_t N = 8, T = 197, D = 384, H = 6, K = 8;
    const char *kv[] = {"dim", "384", "num_heads", "6", "style", "timm", NULL};
    sr_opts o;
    sr_opts_kv_data d;
    sr_opts_kv(&o, &d, "attention", kv);
    bench_state s;
    memset(&s, 0, sizeof s);
    s.m = sr_attention_create(&o);
    if (!s.m) {
        fprintf(stderr, "bench_attention: %s\n", sr_errmsg());
        return 1;
    }
    sr_rng rng;
    sr_rng_seed(&rng, 1);
    sr_module_reset(s.m, &rng);
    s.n = N;
    s.k = K;
    if (sr_tensor_alloc(&s.x, SR_F32, 3, (int64_t[]){N, T, D}) ||
        sr_tensor_alloc(&s.gy, SR_F32, 3, (int64_t[]){N, T, D}) ||
        sr_tensor_alloc(&s.stack, SR_F32, 3, (int64_t[]){N * (1 + K), T, D})) {
        fprintf(stderr, "bench_attention: %s\n", sr_errmsg());
        return 1;
    }
    sr_tensor_fill_normal(&s.x, &rng, 0, 1);
    sr_tensor_fill_normal(&s.gy, &rng, 0, 1);
    sr_tensor_fill_normal(&s.stack, &rng, 0, 1);
    memcpy(sr_data(&s.stack), sr_data(&s.x), (size_t)sr_numel(&s.x) * sizeof(float));

    double flops = (double)N * (8.0 * T * D * D + 4.0 * T * T * D);
    s.gn = (int)lround(cbrt(flops / 2));
    size_t gsz = (size_t)s.gn * (size_t)s.gn;
    s.a = malloc(gsz * sizeof(float));
    s.b = malloc(gsz * sizeof(float));
    s.c = malloc(gsz * sizeof(float));
    if (!s.a || !s.b || !s.c)
        return 1;
    for (size_t i = 0; i < gsz; i++)
        s.a[i] = (float)sr_rng_normal(&rng), s.b[i] = (float)sr_rng_normal(&rng), s.c[i] = 0;

    bench_header();
    printf("attention N=%lld T=%lld D=%lld heads=%lld float32\n", (long long)N, (long long)T, (long long)D,
           (long long)H);
    printf("forward %.3f GFLOP; reference sgemm %dx%dx%d (same FLOPs)\n", flops * 1e-9, s.gn, s.gn, s.gn);
    int rc = 0;
    for (int threads = 1; threads <= 2; threads++) {
        sr_threads_set(threads);
        const bench_fn fns[] = {run_sgemm, run_forward, run_jvp, run_fwd_bwd};
        double t[4];
        if (best_times(4, fns, &s, t)) {
            fprintf(stderr, "bench_attention: %s\n", sr_errmsg());
            rc = 1;
            break;
        }
        double tg = t[0], tf = t[1], tj = t[2], tb = t[3];
        double ratio = tj / (double)K / tf;
        printf("threads %d: sgemm %.1f GFLOP/s | forward %.2f ms, %.1f GFLOP/s (%.0f%% of sgemm)\n",
               threads, flops / tg * 1e-9, tf * 1e3, flops / tf * 1e-9, 100 * tg / tf);
        printf("threads %d: jvp k=%lld %.2f ms, per tangent / forward = %.2f (target <= 1.2) %s\n",
               threads, (long long)K, tj * 1e3, ratio, ratio <= 1.2 ? "ok" : "MISSED");
        printf("threads %d: forward+backward %.2f ms (%.2f forwards)\n", threads, tb * 1e3, tb / tf);
    }
    free(s.a), free(s.b), free(s.c);
    sr_tensor_free(&s.x);
    sr_tensor_free(&s.gy);
    sr_tensor_free(&s.stack);
    sr_module_release(s.m);
    return rc;
}
