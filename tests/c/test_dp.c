/* test_dp.c - data-parallel training without MPI: two "processes" are two
 * threads, each with its own copy of a model and its shard of a batch, and
 * the sum hook adds their buffers across a barrier.  Synchronised
 * BatchNorm and sr_train_step must then give what one process gives on the
 * whole batch (whose derivatives test_norm.c checks against finite
 * differences and the adjoint identity), to float64 rounding. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "base/threads.h"
#include "nn/layers.h"
#include "train/train.h"
#include "check.h"
#include "test.h"

/* Two parties' sum, taking turns: only the party holding the baton runs
 * (OpenBLAS and OpenMP are never entered by both threads at once, which
 * the pthreads build of OpenBLAS does not promise to survive).  The first
 * to reach a sum leaves its buffer and hands the baton over; the second
 * adds both, writes the sum into both and runs on. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void *buf[2];
    int deposited, turn;
    long done, calls;
} pair;

#define PAIR_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {NULL, NULL}, 0, 0, 0, 0}

typedef struct {
    pair *p;
    int me;
    long gen;
} party;

static void take_turn(party *q)
{
    pthread_mutex_lock(&q->p->mu);
    while (q->p->turn != q->me)
        pthread_cond_wait(&q->p->cv, &q->p->mu);
    pthread_mutex_unlock(&q->p->mu);
}

static void end_turn(party *q)
{
    pthread_mutex_lock(&q->p->mu);
    q->p->turn = 1 - q->me;
    pthread_cond_broadcast(&q->p->cv);
    pthread_mutex_unlock(&q->p->mu);
}

static int pair_sum(void *buf, int64_t n, sr_dtype dt, void *ctx)
{
    party *q = ctx;
    pair *p = q->p;
    pthread_mutex_lock(&p->mu);
    q->gen++;
    p->buf[q->me] = buf;
    if (++p->deposited == 2) {
        for (int64_t e = 0; e < n; e++) {
            if (dt == SR_F64) {
                double s = ((double *)p->buf[0])[e] + ((double *)p->buf[1])[e];
                ((double *)p->buf[0])[e] = ((double *)p->buf[1])[e] = s;
            } else {
                float s = ((float *)p->buf[0])[e] + ((float *)p->buf[1])[e];
                ((float *)p->buf[0])[e] = ((float *)p->buf[1])[e] = s;
            }
        }
        p->deposited = 0;
        p->done = q->gen;
        p->calls++;
        pthread_mutex_unlock(&p->mu);
        return 0;
    }
    p->turn = 1 - q->me;
    pthread_cond_broadcast(&p->cv);
    while (!(p->done >= q->gen && p->turn == q->me))
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

/* rows [lo, lo + n) of x into out (a copy). */
static int rows_of(sr_tensor *out, const sr_tensor *x, int64_t lo, int64_t n)
{
    sr_tensor v = SR_TENSOR_INIT;
    int rc = sr_tensor_narrow(&v, x, lo, n) || sr_tensor_copy(out, &v);
    sr_tensor_free(&v);
    return rc;
}

/* make_net's flags */
enum { NET_BN = 1, NET_SHARED = 2 };

/* conv(1 -> 3) [-> batchnorm] -> relu -> avgpool(2) -> flatten -> linear(12 -> 4)
 * [-> relu -> l -> relu -> l, one linear(4 -> 4) used twice], float64. */
static sr_module *make_net(int flags, uint64_t seed)
{
    sr_module *parts[10];
    int n = 0;
    parts[n++] = check_layer("conv2d", (const char *[]){"in_channels", "1", "out_channels", "3", "kernel_size", "3",
                                                        "padding", "1", NULL});
    if (flags & NET_BN)
        parts[n++] = check_layer("batchnorm2d", (const char *[]){"num_features", "3", NULL});
    parts[n++] = check_layer("relu", (const char *[]){NULL});
    parts[n++] = check_layer("adaptive_avgpool2d", (const char *[]){"output_size", "2", NULL});
    parts[n++] = check_layer("flatten", (const char *[]){NULL});
    parts[n++] = check_layer("linear", (const char *[]){"in_features", "12", "out_features", "4", NULL});
    if (flags & NET_SHARED) {
        sr_module *l = check_layer("linear", (const char *[]){"in_features", "4", "out_features", "4", NULL});
        parts[n++] = check_layer("relu", (const char *[]){NULL});
        parts[n++] = l;
        parts[n++] = check_layer("relu", (const char *[]){NULL});
        if (l)
            sr_module_retain(l);
        parts[n++] = l;
    }
    sr_module *seq = check_sequential(parts, n, seed, SR_F64);
    if (seq)
        sr_module_set_training(seq, 1);
    return seq;
}

/* --- synchronised batchnorm ------------------------------------------------ */

typedef struct {
    party q;
    sr_module *m;
    const sr_tensor *x, *gy;
    int rc;
} bn_job;

static void *bn_shard(void *arg)
{
    bn_job *j = arg;
    sr_sum_hook h = {pair_sum, &j->q, NULL, NULL, NULL};
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    run.sync = &h;
    take_turn(&j->q);
    j->rc = sr_module_forward(j->m, j->x, &run) || sr_module_backward(j->m, j->gy, &run);
    end_turn(&j->q);
    return NULL;
}

TEST(batchnorm_synchronised_over_shards_equals_the_whole_batch)
{
    int threads = sr_threads_get();
    sr_threads_set(1);
    sr_module *whole = MAKE_F64(sr_batchnorm2d_create, "batchnorm2d", "num_features", "3");
    sr_module *sh[2] = {MAKE_F64(sr_batchnorm2d_create, "batchnorm2d", "num_features", "3"),
                        MAKE_F64(sr_batchnorm2d_create, "batchnorm2d", "num_features", "3")};
    CHECK(whole && sh[0] && sh[1], "create: %s", sr_errmsg());
    check_fill_params(whole, 4, 1);
    check_fill_params(sh[0], 4, 1);
    check_fill_params(sh[1], 4, 1);
    sr_tensor x = SR_TENSOR_INIT, gy = SR_TENSOR_INIT, xs[2] = {SR_TENSOR_INIT, SR_TENSOR_INIT},
              gs[2] = {SR_TENSOR_INIT, SR_TENSOR_INIT};
    int64_t shape[4] = {6, 3, 2, 3};
    CHECK_OK(check_randn(&x, 4, shape, 1));
    CHECK_OK(check_randn(&gy, 4, shape, 2));
    for (int64_t e = 0; e < sr_numel(&x); e++)
        sr_f64(&x)[e] = 1.5 * sr_f64(&x)[e] + 0.7; /* statistics away from (0, 1) */
    sr_module_set_training(whole, 1);
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    CHECK_OK(sr_module_forward(whole, &x, &run));
    CHECK_OK(sr_module_backward(whole, &gy, &run));
    /* uneven shards: 2 and 4 rows */
    int64_t lo[2] = {0, 2}, n[2] = {2, 4};
    pair p = PAIR_INIT;
    bn_job jobs[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        CHECK_OK(rows_of(&xs[i], &x, lo[i], n[i]));
        CHECK_OK(rows_of(&gs[i], &gy, lo[i], n[i]));
        sr_module_set_training(sh[i], 1);
        jobs[i] = (bn_job){{&p, i, 0}, sh[i], &xs[i], &gs[i], 0};
        pthread_create(&t[i], NULL, bn_shard, &jobs[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(!jobs[0].rc && !jobs[1].rc, "shards failed: %s", sr_errmsg());
    CHECK(p.calls == 3, "%ld sums (forward: sums and squares; backward: one)", p.calls);
    double worst = 0;
    for (int i = 0; i < 2; i++) {
        sr_tensor y = SR_TENSOR_INIT, g = SR_TENSOR_INIT;
        CHECK_OK(rows_of(&y, &whole->out, lo[i], n[i]));
        CHECK_OK(rows_of(&g, &whole->gin, lo[i], n[i]));
        worst = fmax(worst, check_rel_diff(&sh[i]->out, &y));
        worst = fmax(worst, check_rel_diff(&sh[i]->gin, &g));
        /* running statistics: the whole batch's on both */
        for (int k = 2; k < 5; k++)
            worst = fmax(worst, check_rel_diff(&sh[i]->params[k].value, &whole->params[k].value));
        sr_tensor_free(&y);
        sr_tensor_free(&g);
    }
    /* each shard keeps its share of the parameter gradients: they add up */
    for (int k = 0; k < 2; k++) {
        sr_tensor s = SR_TENSOR_INIT;
        CHECK_OK(sr_tensor_copy(&s, &sh[0]->params[k].grad));
        for (int64_t e = 0; e < sr_numel(&s); e++)
            sr_f64(&s)[e] += sr_f64(&sh[1]->params[k].grad)[e];
        worst = fmax(worst, check_rel_diff(&s, &whole->params[k].grad));
        sr_tensor_free(&s);
    }
    CHECK(worst < 1e-13, "synchronised shards vs the whole batch: %g", worst);
    for (int i = 0; i < 2; i++) {
        sr_tensor_free(&xs[i]);
        sr_tensor_free(&gs[i]);
        sr_module_release(sh[i]);
    }
    sr_tensor_free(&x);
    sr_tensor_free(&gy);
    sr_module_release(whole);
    sr_threads_set(threads);
}

/* --- sr_train_step ----------------------------------------------------------- */

typedef struct {
    party q;
    sr_module *m;
    sr_optim o;
    const sr_tensor *x;
    const int64_t *lab;
    int64_t rows;
    int sync_bn, steps, rc;
    int overlap; /* the nonblocking hooks below, and sums started during backward */
    struct {
        void *buf;
        int64_t n;
        sr_dtype dt;
    } pend[64];
    int npend;
    long progress; /* progress calls: a sum was started while backward had more to do */
} step_job;

/* Nonblocking sums as MPI does them: start queues, wait sums in start order. */
static int nb_start(void *buf, int64_t n, sr_dtype dt, void *ctx)
{
    step_job *j = ctx;
    if (j->npend == 64)
        return sr_fail("test: more than 64 sums started");
    j->pend[j->npend].buf = buf;
    j->pend[j->npend].n = n;
    j->pend[j->npend++].dt = dt;
    return 0;
}

static int nb_progress(void *ctx)
{
    ((step_job *)ctx)->progress++;
    return 0;
}

static int nb_wait(void *ctx)
{
    step_job *j = ctx;
    for (int i = 0; i < j->npend; i++)
        if (pair_sum(j->pend[i].buf, j->pend[i].n, j->pend[i].dt, &j->q))
            return -1;
    j->npend = 0;
    return 0;
}

static int nb_sum(void *buf, int64_t n, sr_dtype dt, void *ctx)
{
    return pair_sum(buf, n, dt, &((step_job *)ctx)->q);
}

static void *step_shard(void *arg)
{
    step_job *j = arg;
    sr_sum_hook h = {pair_sum, &j->q, NULL, NULL, NULL};
    if (j->overlap >= 0)
        h = (sr_sum_hook){nb_sum, j, nb_start, nb_progress, nb_wait};
    /* bucket of 7 values: packed runs and in-place sums */
    sr_data_parallel dp = {&h, j->rows, 2, j->sync_bn, 7, j->overlap > 0, NULL};
    take_turn(&j->q);
    for (int s = 0; s < j->steps && !j->rc; s++) {
        double loss;
        int64_t correct;
        j->rc = sr_train_step(j->m, &j->o, j->x, j->lab, &dp, &loss, &correct);
    }
    end_turn(&j->q);
    return NULL;
}

/* max relative difference between two models' parameters and buffers. */
typedef struct {
    sr_module *other;
    double worst;
} cmp_state;

static int cmp_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)owner;
    cmp_state *c = ud;
    sr_param *q = sr_module_find_param(c->other, path);
    if (!q)
        return sr_fail("no %s", path);
    c->worst = fmax(c->worst, check_rel_diff(&p->value, &q->value));
    return 0;
}

static double model_diff(sr_module *a, sr_module *b)
{
    cmp_state c = {b, 0};
    if (sr_module_walk_params(a, cmp_cb, &c))
        return INFINITY;
    return c.worst;
}

/* 3 SGD steps (momentum, weight decay) on 8 rows in one process, and on
 * shards of 5 and 3 rows in two, with the sums blocking (overlap -1) or
 * started, after backward (0) or during it (1); net: make_net's flags.  *progress: the first
 * replica's progress calls; keep: its model. */
static double dp_vs_one(int net, int sync_bn, int overlap, double *replicas, long *progress, sr_module **keep)
{
    int64_t lab[8] = {0, 3, 1, 2, 2, 0, 3, 1}, lo[2] = {0, 5}, n[2] = {5, 3};
    sr_tensor x = SR_TENSOR_INIT, xs[2] = {SR_TENSOR_INIT, SR_TENSOR_INIT};
    double diff = INFINITY;
    sr_module *one = make_net(net, 9), *m[2] = {make_net(net, 9), make_net(net, 9)};
    sr_optim o1;
    if (!one || !m[0] || !m[1] || check_randn(&x, 4, (int64_t[]){8, 1, 5, 5}, 3))
        goto done;
    sr_optim_init(&o1, SR_OPT_SGD);
    for (int s = 0; s < 3; s++) {
        double loss;
        int64_t correct;
        if (sr_train_step(one, &o1, &x, lab, NULL, &loss, &correct))
            goto done;
    }
    pair p = PAIR_INIT;
    step_job jobs[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        if (rows_of(&xs[i], &x, lo[i], n[i]))
            goto done;
        jobs[i] = (step_job){{&p, i, 0}, m[i], {0}, &xs[i], lab + lo[i], 8, sync_bn, 3, 0, overlap, {{0}}, 0, 0};
        sr_optim_init(&jobs[i].o, SR_OPT_SGD);
        pthread_create(&t[i], NULL, step_shard, &jobs[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    if (!jobs[0].rc && !jobs[1].rc) {
        diff = model_diff(m[0], one);
        *replicas = model_diff(m[0], m[1]);
        if (progress)
            *progress = jobs[0].progress;
        if (keep)
            sr_module_retain(*keep = m[0]);
    }
    for (int i = 0; i < 2; i++)
        sr_optim_free(&jobs[i].o);
    sr_optim_free(&o1);
done:
    for (int i = 0; i < 2; i++) {
        sr_tensor_free(&xs[i]);
        sr_module_release(m[i]);
    }
    sr_tensor_free(&x);
    sr_module_release(one);
    return diff;
}

TEST(train_step_data_parallel_equals_one_process)
{
    int threads = sr_threads_get();
    sr_threads_set(1);
    double rep = -1;
    double d = dp_vs_one(0, 0, -1, &rep, NULL, NULL);
    CHECK(d < 1e-13 && rep == 0, "no batchnorm: vs one process %g, between replicas %g", d, rep);
    d = dp_vs_one(1, 1, -1, &rep, NULL, NULL);
    CHECK(d < 1e-13 && rep == 0, "synchronised batchnorm: vs one process %g, between replicas %g", d, rep);
    /* per-shard statistics: another trajectory, but the replicas stay one
     * model (the running statistics are averaged) */
    d = dp_vs_one(1, 0, -1, &rep, NULL, NULL);
    CHECK(d > 1e-6 && rep == 0, "per-shard batchnorm: vs one process %g, between replicas %g", d, rep);
    sr_threads_set(threads);
}

/* Sums started while backward goes on (sr_grad_sync) give the bits of sums
 * started after it: the same buckets, the same sums in the same order. */
TEST(train_step_overlapped_sums_equal_sums_after_backward)
{
    int threads = sr_threads_get();
    sr_threads_set(1);
    for (int bn = 0; bn < 2; bn++) {
        sr_module *on = NULL, *off = NULL;
        double rep = -1, rep2 = -1;
        long progress_on = -1, progress_off = -1;
        double d = dp_vs_one(bn, bn, 1, &rep, &progress_on, &on);
        double d2 = dp_vs_one(bn, bn, 0, &rep2, &progress_off, &off);
        CHECK(d < 1e-13 && rep == 0 && d2 < 1e-13 && rep2 == 0,
              "bn %d: vs one process %g / %g, between replicas %g / %g", bn, d, d2, rep, rep2);
        /* steps 2 and 3 overlap (the first makes the gradients) */
        CHECK(progress_on > 0 && progress_off == 0, "bn %d: progress called %ld times overlapped, %ld not", bn,
              progress_on, progress_off);
        CHECK(on && off && model_diff(on, off) == 0, "bn %d: overlapped vs not: %g", bn,
              on && off ? model_diff(on, off) : -1.0);
        sr_module_release(on);
        sr_module_release(off);
    }
    sr_threads_set(threads);
}

/* A module used twice (make_net's NET_SHARED: sequential{..., l, relu,
 * l}): its gradients are listed once, so the summed gradient is the sum
 * over the replicas, whether summed in place (the weight, 16 values, with
 * buckets of 1 and 8) or packed (the bias; everything with 64); and the
 * sums are never planned to start during backward, where l's backward for
 * one use returns before the other use has added its part.  The gradients
 * are set by hand (backward through a module used twice is refused:
 * test_train.c). */
typedef struct {
    party q;
    sr_module *m;
    int64_t bucket;
    int rc;
} sum_job;

static void *sum_shard(void *arg)
{
    sum_job *j = arg;
    sr_sum_hook h = {pair_sum, &j->q, NULL, NULL, NULL};
    take_turn(&j->q);
    j->rc = sr_grads_sum(j->m, &h, j->bucket);
    end_turn(&j->q);
    return NULL;
}

static int fill_grad(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path;
    sr_rng *r = ud;
    if (!p->trainable || !sr_param_grad(owner, p))
        return p->trainable ? -1 : 0;
    for (int64_t e = 0; e < sr_numel(&p->grad); e++)
        sr_set_flat(&p->grad, e, sr_rng_normal(r));
    return 0;
}

TEST(grads_sum_shared_parameter_once)
{
    int threads = sr_threads_get();
    sr_threads_set(1);
    const char *names[2] = {"6.weight", "6.bias"};
    for (int64_t bucket = 1; bucket <= 64; bucket *= 8) {
        sr_module *m[2] = {make_net(NET_SHARED, 9), make_net(NET_SHARED, 9)};
        CHECK(m[0] && m[1], "net: %s", sr_errmsg());
        sr_tensor want[2] = {SR_TENSOR_INIT, SR_TENSOR_INIT};
        for (int i = 0; i < 2; i++) {
            sr_rng r;
            sr_rng_seed(&r, 20 + (uint64_t)i);
            CHECK_OK(sr_module_walk_params(m[i], fill_grad, &r));
        }
        for (int c = 0; c < 2; c++) {
            sr_param *p0 = sr_module_find_param(m[0], names[c]), *p1 = sr_module_find_param(m[1], names[c]);
            CHECK(p0 && p0 == sr_module_find_param(m[0], c ? "8.bias" : "8.weight"), "%s: one shared parameter",
                  names[c]);
            CHECK_OK(sr_tensor_copy(&want[c], &p0->grad));
            for (int64_t e = 0; e < sr_numel(&want[c]); e++)
                sr_f64(&want[c])[e] += sr_f64(&p1->grad)[e];
        }
        /* every gradient there, nonblocking sums: only the sharing stops an overlapped plan */
        step_job nb = {{NULL, 0, 0}, NULL, {0}, NULL, NULL, 0, 0, 0, 0, 1, {{0}}, 0, 0};
        sr_sum_hook h = {nb_sum, &nb, nb_start, nb_progress, nb_wait};
        sr_run run = SR_RUN_INIT;
        sr_grad_sync *gs = NULL;
        CHECK_OK(sr_grad_sync_new(&gs, m[0], &h, bucket, &run));
        CHECK(!gs && !run.grads_final, "bucket %lld: sums planned to start during backward", (long long)bucket);
        pair p = PAIR_INIT;
        sum_job jobs[2];
        pthread_t t[2];
        for (int i = 0; i < 2; i++) {
            jobs[i] = (sum_job){{&p, i, 0}, m[i], bucket, 0};
            pthread_create(&t[i], NULL, sum_shard, &jobs[i]);
        }
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        CHECK(!jobs[0].rc && !jobs[1].rc, "sums failed: %s", sr_errmsg());
        for (int c = 0; c < 2; c++)
            for (int i = 0; i < 2; i++) {
                double d = check_rel_diff(&sr_module_find_param(m[i], names[c])->grad, &want[c]);
                CHECK(d < 1e-15, "bucket %lld, replica %d, %s: summed vs sum over replicas %g", (long long)bucket, i,
                      names[c], d);
            }
        for (int i = 0; i < 2; i++) {
            sr_tensor_free(&want[i]);
            sr_module_release(m[i]);
        }
    }
    sr_threads_set(threads);
}

/* Gradient sums in buckets: with a hook that doubles (two identical
 * replicas) every gradient doubles exactly, however the buckets cut. */
static int double_sum(void *buf, int64_t n, sr_dtype dt, void *ctx)
{
    int64_t *calls = ctx;
    ++*calls;
    for (int64_t e = 0; e < n; e++) {
        if (dt == SR_F64)
            ((double *)buf)[e] *= 2;
        else
            ((float *)buf)[e] *= 2;
    }
    return 0;
}

static int fail_sum(void *buf, int64_t n, sr_dtype dt, void *ctx)
{
    (void)buf, (void)n, (void)dt, (void)ctx;
    return sr_fail("mpi: MPI_Allreduce failed on rank 1 of 2: test");
}

TEST(grads_sum_buckets_and_errors)
{
    sr_module *m = make_net(1, 2);
    CHECK(m, "net: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){4, 1, 5, 5}, 1));
    int64_t lab[4] = {0, 1, 2, 3};
    double loss;
    CHECK_OK(sr_ce_pass(m, &x, lab, NULL, 1, &loss, NULL, NULL));
    /* trainable gradients: conv 27 + 3, bn 3 + 3, linear 48 + 4 values */
    sr_tensor before[6];
    int np = 0;
    for (int c = 0; c < 6; c++)
        before[c] = (sr_tensor)SR_TENSOR_INIT;
    const char *names[6] = {"0.weight", "0.bias", "1.weight", "1.bias", "5.weight", "5.bias"};
    for (int c = 0; c < 6; c++) {
        sr_param *p = sr_module_find_param(m, names[c]);
        CHECK(p && p->grad.storage, "no gradient for %s", names[c]);
        CHECK_OK(sr_tensor_copy(&before[np++], &p->grad));
    }
    for (int64_t bucket = 1; bucket <= 64; bucket *= 4) {
        int64_t calls = 0;
        sr_sum_hook h = {double_sum, &calls, NULL, NULL, NULL};
        CHECK_OK(sr_grads_sum(m, &h, bucket));
        for (int c = 0; c < 6; c++) {
            sr_param *p = sr_module_find_param(m, names[c]);
            for (int64_t e = 0; e < sr_numel(&p->grad); e++) {
                CHECK(sr_f64(&p->grad)[e] == 2 * sr_f64(&before[c])[e], "bucket %lld: %s[%lld]", (long long)bucket,
                      names[c], (long long)e);
                sr_f64(&p->grad)[e] = sr_f64(&before[c])[e];
            }
        }
        /* in reverse order 4, 48, 3, 3, 3, 27; 1 and 4: every gradient alone (4, 48, 27 in
         * place); 16: 4 | 48 | 3+3+3 | 27; 64: 4+48+3+3+3 | 27 */
        int64_t want = bucket <= 4 ? 6 : bucket == 16 ? 4 : 2;
        CHECK(calls == want, "bucket %lld: %lld sums, want %lld", (long long)bucket, (long long)calls, (long long)want);
    }
    sr_sum_hook bad = {fail_sum, NULL, NULL, NULL, NULL};
    CHECK(sr_grads_sum(m, &bad, 0) != 0, "a failing sum passed");
    CHECK(strstr(sr_errmsg(), "summing gradients over the processes") && strstr(sr_errmsg(), "MPI_Allreduce failed"),
          "message: %s", sr_errmsg());
    sr_optim o;
    sr_optim_init(&o, SR_OPT_SGD);
    sr_data_parallel dp = {NULL, 3, 1, 0, 0, 0, NULL};
    CHECK(sr_train_step(m, &o, &x, lab, &dp, &loss, NULL) != 0 && strstr(sr_errmsg(), "a shard of 4 rows of a batch of 3"),
          "shard larger than the batch: %s", sr_errmsg());
    sr_optim_free(&o);
    for (int c = 0; c < 6; c++)
        sr_tensor_free(&before[c]);
    sr_tensor_free(&x);
    sr_module_release(m);
}
