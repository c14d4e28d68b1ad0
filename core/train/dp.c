/* dp.c - the sums of a data-parallel step: gradients in buckets, started
 * while backward still runs, and the buffers' mean (train.h).
 *
 * One plan serves both ways of summing, so they give the same bits: the
 * trainable gradients in reverse parameter order (as backward finishes
 * them), cut into buckets, the buckets summed in that order by the same
 * hook calls.  Overlapped, a bucket starts as soon as backward has reported
 * every gradient in it final (sr_run.grads_final) and every earlier bucket
 * has started; otherwise all start after backward. */
#include "train/train.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    sr_tensor *t;
    const sr_module *owner;
    int bucket;
    int final;
} grad_entry;

typedef struct {
    int first, last; /* entries [first, last) */
    int64_t n;       /* values */
    int packed;      /* copied into buf (a run of small gradients); else summed in place */
    int pending;     /* entries not yet final */
    sr_tensor buf;
} grad_bucket;

struct sr_grad_sync {
    const sr_sum_hook *h;
    sr_pool *pool;
    double seconds; /* spent in the sums' calls (packing, starting, progress, waiting, unpacking) */
    int n, cap, nb, started;
    grad_entry *e;
    grad_bucket *b;
};

typedef struct {
    int trainable; /* which tensors: gradients of trainable parameters, or the buffers */
    sr_grad_sync *s;
    int missing;   /* trainable parameters without a gradient */
} list_state;

static int list_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path;
    list_state *l = ud;
    sr_tensor *t = l->trainable ? (p->trainable && p->grad.storage ? &p->grad : NULL)
                                : (!p->trainable && p->value.storage ? &p->value : NULL);
    if (l->trainable && p->trainable && !p->grad.storage)
        l->missing++;
    if (!t)
        return 0;
    sr_grad_sync *s = l->s;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        grad_entry *e = realloc(s->e, sizeof *e * (size_t)cap);
        if (!e)
            return sr_fail("train: out of memory listing %d tensors", cap);
        s->e = e;
        s->cap = cap;
    }
    s->e[s->n++] = (grad_entry){t, owner, -1, 0};
    return 0;
}

/* The tensors of m (trainable: the gradients, else the buffers) in
 * parameter order into s->e; *missing: trainable parameters without a
 * gradient. */
static int list_tensors(sr_grad_sync *s, sr_module *m, int trainable, int *missing)
{
    list_state l = {trainable, s, 0};
    if (sr_module_walk_params(m, list_cb, &l))
        return -1;
    if (missing)
        *missing = l.missing;
    return 0;
}

static void sync_free(sr_grad_sync *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nb; i++)
        sr_pool_put(s->pool, &s->b[i].buf);
    free(s->e);
    free(s->b);
    free(s);
}

/* Reverse the list and cut it: runs of one dtype packed into buckets of at
 * most `bucket` values; a gradient of `bucket` values or more alone, in
 * place. */
static int plan(sr_grad_sync *s, int64_t bucket)
{
    for (int i = 0, j = s->n - 1; i < j; i++, j--) {
        grad_entry t = s->e[i];
        s->e[i] = s->e[j];
        s->e[j] = t;
    }
    s->b = calloc((size_t)s->n + 1, sizeof *s->b);
    if (!s->b)
        return sr_fail("train: out of memory planning %d gradient sums", s->n);
    for (int i = 0; i < s->n;) {
        grad_bucket *b = &s->b[s->nb];
        int64_t len = sr_numel(s->e[i].t);
        int j = i + 1;
        if (len < bucket) {
            for (; j < s->n && s->e[j].t->dtype == s->e[i].t->dtype && len + sr_numel(s->e[j].t) <= bucket; j++)
                len += sr_numel(s->e[j].t);
            b->packed = 1;
        }
        b->first = i;
        b->last = j;
        b->n = len;
        b->pending = j - i;
        b->buf = (sr_tensor)SR_TENSOR_INIT;
        for (int k = i; k < j; k++)
            s->e[k].bucket = s->nb;
        s->nb++;
        i = j;
    }
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int sr_grad_sync_new(sr_grad_sync **out, sr_module *m, const sr_sum_hook *h, int64_t bucket, sr_run *run)
{
    *out = NULL;
    sr_grad_sync *s = calloc(1, sizeof *s);
    if (!s)
        return sr_fail("train: out of memory");
    s->h = h;
    s->pool = &m->pool;
    int missing = 0;
    if (list_tensors(s, m, 1, &missing) || plan(s, bucket > 0 ? bucket : SR_GRAD_BUCKET)) {
        sync_free(s);
        return -1;
    }
    /* Overlap only with a plan that backward cannot change: every trainable
     * parameter has its gradient already (from the first step on), so the
     * buckets are those a plan made after backward would have. */
    if (run && !(h->start && !missing)) {
        sync_free(s);
        return 0;
    }
    if (run) {
        run->grads_final = sr_grad_sync_final;
        run->grads_ctx = s;
    }
    *out = s;
    return 0;
}

static int start_bucket(sr_grad_sync *s, grad_bucket *b)
{
    const grad_entry *e = s->e;
    sr_dtype dt = e[b->first].t->dtype;
    void *p;
    if (b->packed) {
        if (sr_pool_ensure(s->pool, &b->buf, dt, 1, &b->n))
            return -1;
        char *q = p = sr_data(&b->buf);
        for (int k = b->first; k < b->last; k++) {
            size_t bytes = (size_t)sr_numel(e[k].t) * sr_dtype_size(dt);
            memcpy(q, sr_data(e[k].t), bytes);
            q += bytes;
        }
    } else {
        p = sr_data(e[b->first].t);
    }
    return s->h->start ? s->h->start(p, b->n, dt, s->h->ctx) : s->h->sum(p, b->n, dt, s->h->ctx);
}

/* Start the buckets, in order, up to the first with gradients pending. */
static int start_ready(sr_grad_sync *s)
{
    while (s->started < s->nb && s->b[s->started].pending == 0)
        if (start_bucket(s, &s->b[s->started++]))
            return -1;
    return 0;
}

int sr_grad_sync_final(const sr_module *m, void *ctx)
{
    sr_grad_sync *s = ctx;
    double t0 = now();
    int any = 0;
    for (int i = 0; i < s->n; i++)
        if (s->e[i].owner == m && !s->e[i].final) {
            s->e[i].final = 1;
            s->b[s->e[i].bucket].pending--;
            any = 1;
        }
    int rc = (any && start_ready(s)) || (s->started && s->h->progress && s->h->progress(s->h->ctx));
    s->seconds += now() - t0;
    return rc ? sr_fail_context("train: summing gradients over the processes during backward") : 0;
}

int sr_grad_sync_finish(sr_grad_sync *s, double *seconds)
{
    double t0 = now();
    for (int i = 0; i < s->nb; i++)
        s->b[i].pending = 0;
    int rc = start_ready(s) || (s->h->start && s->h->wait(s->h->ctx));
    for (int i = 0; !rc && i < s->nb; i++) {
        const grad_bucket *b = &s->b[i];
        const char *q = b->packed ? sr_data(&b->buf) : NULL;
        for (int k = b->first; q && k < b->last; k++) {
            size_t bytes = (size_t)sr_numel(s->e[k].t) * sr_dtype_size(s->e[k].t->dtype);
            memcpy(sr_data(s->e[k].t), q, bytes);
            q += bytes;
        }
    }
    if (seconds)
        *seconds = s->seconds + (now() - t0);
    sync_free(s);
    return rc ? sr_fail_context("train: summing gradients over the processes") : 0;
}

void sr_grad_sync_abandon(sr_grad_sync *s)
{
    if (s && s->started && s->h->start) {
        /* Sums are in flight into the buffers, and MPI cannot cancel a
         * collective: leave them to it (the job is failing, as the other
         * ranks wait for this one's part). */
        free(s->e);
        free(s->b);
        free(s);
        return;
    }
    sync_free(s);
}

int sr_grads_sum(sr_module *m, const sr_sum_hook *h, int64_t bucket)
{
    sr_grad_sync *s;
    return sr_grad_sync_new(&s, m, h, bucket, NULL) ? -1 : sr_grad_sync_finish(s, NULL);
}

int sr_buffers_mean(sr_module *m, const sr_sum_hook *h, int nproc)
{
    sr_grad_sync l = {0};
    if (list_tensors(&l, m, 0, NULL)) {
        free(l.e);
        return -1;
    }
    int64_t n = 0;
    for (int i = 0; i < l.n; i++)
        n += sr_numel(l.e[i].t);
    double *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
    int rc = v ? 0 : sr_fail("train: out of memory for %lld buffer values", (long long)n);
    for (int i = 0, at = 0; !rc && i < l.n; i++)
        for (int64_t e = 0; e < sr_numel(l.e[i].t); e++)
            v[at++] = sr_get_flat(l.e[i].t, e);
    if (!rc && n > 0 && (rc = h->sum(v, n, SR_F64, h->ctx)) != 0)
        sr_fail_context("train: averaging the buffers over the processes");
    for (int i = 0, at = 0; !rc && i < l.n; i++)
        for (int64_t e = 0; e < sr_numel(l.e[i].t); e++)
            sr_set_flat(l.e[i].t, e, v[at++] / nproc);
    free(v);
    free(l.e);
    return rc;
}
