/* bench_wino.c - the 3x3 stride-1 convolutions of the training benchmarks'
 * small-channel models at batch 128 (small_resnet at 28x28, resnet18_cifar
 * at 32x32), forward and backward (input and weight gradients), with each
 * algorithm conv2d can take (winograd, im2col, taps), at 1 and 2 threads:
 * best of N alternating runs, and which one algo = "auto" picks.  The
 * figures behind conv.c's per-direction choice.
 *
 *   build/bench_wino [runs [threads [cpu]]]     (threads: 1 or 2, 0 both: the default)
 *
 * With cpu, times are the process's CPU time instead of the wall clock: on
 * a machine others share (load above the cores), wall times of one thread
 * jump by whole scheduler slices, CPU times stay within a few percent. */
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
    int64_t c, hw, batch;
} shape;

static const shape shapes[] = {
    {"small_resnet 16 @28", 16, 28, 128}, {"small_resnet 32 @14", 32, 14, 128}, {"small_resnet 64 @7", 64, 7, 128},
    {"resnet18_cifar 64 @32", 64, 32, 128}, {"resnet18_cifar 128 @16", 128, 16, 128},
};
#define NSHAPE (int)(sizeof shapes / sizeof *shapes)
static const char *const algos[] = {"auto", "winograd", "im2col", "taps"};
#define NALGO 4

static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void)
{
    struct timespec t;
    clock_gettime(clock_id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static sr_module *make(const shape *s, const char *algo)
{
    return bench_conv3x3(s->c, s->c, 1, (const char *[]){"algo", algo, NULL});
}

static void die(const char *what)
{
    fprintf(stderr, "bench_wino: %s: %s\n", what, sr_errmsg());
    exit(1);
}

/* Forward (with save) and backward with weight gradients: their times. */
static void step(sr_module *m, const sr_tensor *x, const sr_tensor *gy, double *tf, double *tb)
{
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    double t0 = now();
    if (sr_module_forward(m, x, &run))
        die("forward");
    double t1 = now();
    if (sr_module_backward(m, gy, &run))
        die("backward");
    *tf = t1 - t0;
    *tb = now() - t1;
    sr_module_zero_grad(m);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    if (runs < 1)
        runs = 7;
    int only = argc > 2 ? atoi(argv[2]) : 0;
    if (argc > 3 && strcmp(argv[3], "cpu") == 0)
        clock_id = CLOCK_PROCESS_CPUTIME_ID;
    bench_header();
    printf("3x3 stride-1 convolutions at batch 128: forward and backward (input + weight gradients), ms (%s), best "
           "of %d alternating runs\n", clock_id == CLOCK_MONOTONIC ? "wall" : "process CPU time", runs);
    for (int th = 1; th <= 2; th++) {
        if (only && th != only)
            continue;
        sr_threads_set(th);
        printf("\nthreads %d\n%-24s", th, "");
        for (int a = 0; a < NALGO; a++)
            printf(" %8s fwd %8s bwd", algos[a], algos[a]);
        printf("\n");
        for (int i = 0; i < NSHAPE; i++) {
            const shape *s = &shapes[i];
            sr_tensor x = SR_TENSOR_INIT, gy = SR_TENSOR_INIT;
            sr_rng r;
            sr_rng_seed(&r, 2);
            if (sr_tensor_alloc(&x, SR_F32, 4, (int64_t[]){s->batch, s->c, s->hw, s->hw}) ||
                sr_tensor_alloc(&gy, SR_F32, 4, (int64_t[]){s->batch, s->c, s->hw, s->hw}))
                die("alloc");
            sr_tensor_fill_normal(&x, &r, 0, 1);
            sr_tensor_fill_normal(&gy, &r, 0, 1);
            sr_module *m[NALGO];
            double bf[NALGO], bb[NALGO];
            for (int a = 0; a < NALGO; a++) {
                if (!(m[a] = make(s, algos[a])))
                    die("conv2d");
                double f, b;
                step(m[a], &x, &gy, &f, &b); /* warm up: workspaces allocated and touched */
                bf[a] = bb[a] = INFINITY;
            }
            for (int k = 0; k < runs; k++)
                for (int a = 0; a < NALGO; a++) {
                    double f, b;
                    step(m[a], &x, &gy, &f, &b);
                    bf[a] = fmin(bf[a], f);
                    bb[a] = fmin(bb[a], b);
                }
            printf("%-24s", s->name);
            for (int a = 0; a < NALGO; a++)
                printf(" %12.2f %12.2f", 1e3 * bf[a], 1e3 * bb[a]);
            printf("\n");
            for (int a = 0; a < NALGO; a++)
                sr_module_release(m[a]);
            sr_tensor_free(&x);
            sr_tensor_free(&gy);
        }
    }
    return 0;
}
