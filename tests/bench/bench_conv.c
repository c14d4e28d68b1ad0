/* bench_conv.c - conv2d forward on the distinct 3x3 convolutions of
 * ResNet-18 at 224x224, batch 8, against cblas_sgemm on a square GEMM of the
 * same FLOP count measured in the same run (alternating, median of several
 * runs after a warm-up), for 1 and 2 threads; then the stacked JVP with k=8
 * tangents: time per tangent / forward time.
 *
 *   make BUILD=build/conv build/conv/bench_conv && ./build/conv/bench_conv [runs]
 *
 * Targets (issue 2): conv/sgemm >= 0.75 per thread count; JVP per tangent
 * <= 1.2 forwards. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threads.h"
#include "conv3x3.h"
#include "header.h"
#include "nn/layers.h"
#include "tensor/tensor_ops.h"

typedef struct {
    const char *name;
    int64_t cin, cout, hw, stride;
} rconv;

static const rconv convs[] = {
    {"64->64 @56", 64, 64, 56, 1},     {"64->128 s2 @56", 64, 128, 56, 2},
    {"128->128 @28", 128, 128, 28, 1}, {"128->256 s2 @28", 128, 256, 28, 2},
    {"256->256 @14", 256, 256, 14, 1}, {"256->512 s2 @14", 256, 512, 14, 2},
    {"512->512 @7", 512, 512, 7, 1},
};
#define NCONV (int)(sizeof convs / sizeof *convs)
#define BATCH 8
#define KTAN 8
#define MAXRUNS 64

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Optional plan overrides (for tuning sweeps): argv[2], argv[3]. */
static const char *opt_cols, *opt_ws, *opt_algo;

static sr_module *make(const rconv *c)
{
    const char *extra[8] = {NULL};
    int n = 0;
    if (opt_cols)
        extra[n++] = "gemm_cols", extra[n++] = opt_cols;
    if (opt_ws)
        extra[n++] = "max_workspace", extra[n++] = opt_ws;
    if (opt_algo)
        extra[n++] = "algo", extra[n++] = opt_algo;
    return bench_conv3x3(c->cin, c->cout, c->stride, extra);
}

static int randn(sr_tensor *t, int64_t n, const rconv *c, uint64_t seed)
{
    sr_rng r;
    sr_rng_seed(&r, seed);
    if (sr_tensor_alloc(t, SR_F32, 4, (int64_t[]){n, c->cin, c->hw, c->hw}))
        return -1;
    sr_tensor_fill_normal(t, &r, 0, 1);
    return 0;
}

typedef struct {
    float *a, *b, *c;
    int n;
} sq_gemm;

static int sq_init(sq_gemm *g, double flops)
{
    g->n = (int)lround(cbrt(flops / 2));
    size_t nn = (size_t)g->n * (size_t)g->n;
    g->a = malloc(nn * sizeof(float));
    g->b = malloc(nn * sizeof(float));
    g->c = malloc(nn * sizeof(float));
    if (!g->a || !g->b || !g->c)
        return -1;
    for (size_t i = 0; i < nn; i++) {
        g->a[i] = (float)((i % 7) * 0.01);
        g->b[i] = (float)((i % 5) * 0.01);
        g->c[i] = 0;
    }
    return 0;
}

static double sq_run(sq_gemm *g)
{
    double t = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1, g->a, g->n, g->b, g->n, 0,
                g->c, g->n);
    return now() - t;
}

static void sq_free(sq_gemm *g)
{
    free(g->a);
    free(g->b);
    free(g->c);
}

static double time_fwd(sr_module *m, const sr_tensor *x)
{
    sr_run run = SR_RUN_INIT;
    double t = now();
    if (sr_module_forward(m, x, &run)) {
        fprintf(stderr, "forward: %s\n", sr_errmsg());
        exit(1);
    }
    return now() - t;
}

/* Forward with save + backward with parameter grads; returns the backward time. */
static double time_bwd(sr_module *m, const sr_tensor *x, const sr_tensor *gy)
{
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    if (sr_module_forward(m, x, &run)) {
        fprintf(stderr, "forward: %s\n", sr_errmsg());
        exit(1);
    }
    double t = now();
    if (sr_module_backward(m, gy, &run)) {
        fprintf(stderr, "backward: %s\n", sr_errmsg());
        exit(1);
    }
    return now() - t;
}

static double time_jvp(sr_module *m, const sr_tensor *xv)
{
    sr_run run = SR_RUN_INIT;
    run.n = BATCH;
    run.k = KTAN;
    double t = now();
    if (sr_module_jvp(m, xv, &run)) {
        fprintf(stderr, "jvp: %s\n", sr_errmsg());
        exit(1);
    }
    return now() - t;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 9;
    if (runs < 1 || runs > MAXRUNS)
        runs = 9;
    opt_cols = argc > 2 && strcmp(argv[2], "-") ? argv[2] : NULL;
    opt_ws = argc > 3 && strcmp(argv[3], "-") ? argv[3] : NULL;
    opt_algo = argc > 6 ? argv[6] : NULL;
    int th_lo = argc > 4 ? atoi(argv[4]) : 1, th_hi = argc > 5 ? atoi(argv[5]) : 2;
    if (th_lo < 1 || th_lo > 2)
        th_lo = 1;
    if (th_hi < th_lo || th_hi > 2)
        th_hi = 2;
    sr_module *mods[NCONV];
    sr_tensor xs[NCONV], xvs[NCONV];
    double flops[NCONV];
    for (int i = 0; i < NCONV; i++) {
        const rconv *c = &convs[i];
        int64_t ho = (c->hw + 2 - 3) / c->stride + 1;
        flops[i] = 2.0 * BATCH * (double)c->cout * (double)(ho * ho) * (double)c->cin * 9;
        xs[i] = (sr_tensor)SR_TENSOR_INIT;
        xvs[i] = (sr_tensor)SR_TENSOR_INIT;
        mods[i] = make(c);
        if (!mods[i] || randn(&xs[i], BATCH, c, 2 + (uint64_t)i) ||
            randn(&xvs[i], BATCH * (1 + KTAN), c, 3 + (uint64_t)i)) {
            fprintf(stderr, "setup: %s\n", sr_errmsg());
            return 1;
        }
    }
    bench_header();
    printf("conv2d forward, ResNet-18 3x3 convolutions, 224x224, batch %d, float32\n", BATCH);
    printf("median of %d runs; sgemm: square n^3 GEMM with the conv's FLOP count, same run\n", runs);
    double jvp_ratio[2][NCONV] = {{0}}, bwd_ratio[2][NCONV] = {{0}};
    for (int th = th_lo; th <= th_hi; th++) {
        sr_threads_set(th);
        printf("\nthreads %d\n%-18s %8s %9s %9s %6s %9s %7s\n", th, "conv", "GFLOP", "ms", "GFLOP/s", "n", "sgemm", "ratio");
        double tc_sum = 0, tg_sum = 0;
        for (int i = 0; i < NCONV; i++) {
            sq_gemm g;
            if (sq_init(&g, flops[i])) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
            double tc[MAXRUNS], tg[MAXRUNS];
            for (int w = 0; w < 3; w++) {
                time_fwd(mods[i], &xs[i]);
                sq_run(&g);
            }
            for (int r = 0; r < runs; r++) {
                tc[r] = time_fwd(mods[i], &xs[i]);
                tg[r] = sq_run(&g);
            }
            double mc = median(tc, runs), mg = median(tg, runs);
            double gflop_g = 2.0 * g.n * (double)g.n * g.n * 1e-9;
            /* Compare at equal work: scale the GEMM time to the conv's FLOPs. */
            double mg_eq = mg * flops[i] * 1e-9 / gflop_g;
            tc_sum += mc;
            tg_sum += mg_eq;
            printf("%-18s %8.3f %9.2f %9.1f %6d %9.1f %7.2f\n", convs[i].name, flops[i] * 1e-9, mc * 1e3,
                   flops[i] * 1e-9 / mc, g.n, gflop_g / mg, mg_eq / mc);
            sq_free(&g);

            /* JVP: BATCH primals with KTAN tangents each in one stacked pass. */
            double tj[MAXRUNS], tf[MAXRUNS];
            time_jvp(mods[i], &xvs[i]);
            for (int r = 0; r < runs; r++) {
                tj[r] = time_jvp(mods[i], &xvs[i]);
                tf[r] = time_fwd(mods[i], &xs[i]);
            }
            jvp_ratio[th - 1][i] = median(tj, runs) / KTAN / median(tf, runs);

            /* Backward (input and parameter gradients) relative to forward. */
            sr_tensor gy = SR_TENSOR_INIT;
            if (sr_tensor_copy(&gy, &mods[i]->out)) {
                fprintf(stderr, "setup: %s\n", sr_errmsg());
                return 1;
            }
            time_bwd(mods[i], &xs[i], &gy);
            for (int r = 0; r < runs; r++) {
                tj[r] = time_bwd(mods[i], &xs[i], &gy);
                tf[r] = time_fwd(mods[i], &xs[i]);
            }
            bwd_ratio[th - 1][i] = median(tj, runs) / median(tf, runs);
            sr_tensor_free(&gy);
        }
        printf("%-18s %8s %9.2f %9s %6s %9s %7.2f  (FLOP-weighted: sum sgemm time / sum conv time)\n",
               "overall", "", tc_sum * 1e3, "", "", "", tg_sum / tc_sum);
    }
    printf("\nJVP, k=%d tangents stacked with the primal: time per tangent / forward time\n%-18s %9s %9s\n", KTAN,
           "conv", "1 thread", "2 threads");
    for (int i = 0; i < NCONV; i++)
        printf("%-18s %9.3f %9.3f\n", convs[i].name, jvp_ratio[0][i], jvp_ratio[1][i]);
    printf("\nbackward (input + parameter gradients) time / forward time (no target; 2 is the FLOP ratio)\n"
           "%-18s %9s %9s\n", "conv", "1 thread", "2 threads");
    for (int i = 0; i < NCONV; i++)
        printf("%-18s %9.3f %9.3f\n", convs[i].name, bwd_ratio[0][i], bwd_ratio[1][i]);
    for (int i = 0; i < NCONV; i++) {
        sr_module_release(mods[i]);
        sr_tensor_free(&xs[i]);
        sr_tensor_free(&xvs[i]);
    }
    return 0;
}
