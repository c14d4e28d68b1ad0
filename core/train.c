/* train.c - softmax cross-entropy and the SGD / AdamW updates, matching
 * torch.nn.functional.cross_entropy and torch.optim.{SGD, AdamW}. */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sr_cross_entropy(const sr_tensor *logits, const int64_t *labels, double *loss, int64_t *correct,
                     sr_tensor *grad)
{
    if (logits->ndim != 2)
        return sr_fail("cross_entropy: logits %s must be (N, classes)", SR_SHAPE(logits));
    int64_t n = logits->shape[0], k = logits->shape[1];
    if (n < 1 || k < 1)
        return sr_fail("cross_entropy: empty logits %s", SR_SHAPE(logits));
    for (int64_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= k)
            return sr_fail("cross_entropy: label %lld of row %lld is outside [0, %lld)", (long long)labels[i],
                           (long long)i + 1, (long long)k);
    if (grad && sr_tensor_ensure_like(grad, logits))
        return -1;
    double total = 0;
    int64_t good = 0;
    for (int64_t i = 0; i < n; i++) {
        double mx = -INFINITY;
        int64_t arg = 0;
        for (int64_t j = 0; j < k; j++) {
            double v = sr_get_flat(logits, i * k + j);
            if (v > mx) {
                mx = v;
                arg = j;
            }
        }
        if (!isfinite(mx))
            return sr_fail("cross_entropy: row %lld of the logits is not finite", (long long)i + 1);
        double z = 0;
        for (int64_t j = 0; j < k; j++)
            z += exp(sr_get_flat(logits, i * k + j) - mx);
        double lse = mx + log(z);
        total += lse - sr_get_flat(logits, i * k + labels[i]);
        good += arg == labels[i];
        if (grad)
            for (int64_t j = 0; j < k; j++) {
                double p = exp(sr_get_flat(logits, i * k + j) - lse);
                sr_set_flat(grad, i * k + j, (p - (j == labels[i])) / (double)n);
            }
    }
    *loss = total / (double)n;
    if (correct)
        *correct = good;
    return 0;
}

int sr_argmax_rows(const sr_tensor *logits, int64_t *pred)
{
    if (logits->ndim != 2)
        return sr_fail("argmax: logits %s must be (N, classes)", SR_SHAPE(logits));
    int64_t n = logits->shape[0], k = logits->shape[1];
    for (int64_t i = 0; i < n; i++) {
        int64_t arg = 0;
        for (int64_t j = 1; j < k; j++)
            if (sr_get_flat(logits, i * k + j) > sr_get_flat(logits, i * k + arg))
                arg = j;
        pred[i] = arg;
    }
    return 0;
}

int sr_optim_init(sr_optim *o, sr_opt_kind kind)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = kind == SR_OPT_SGD ? 0.1 : 1e-3;
    o->momentum = 0.9;
    o->weight_decay = kind == SR_OPT_SGD ? 5e-4 : 0.05;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    return 0;
}

void sr_optim_free(sr_optim *o)
{
    for (int i = 0; i < o->nstate; i++) {
        sr_tensor_free(&o->state1[i]);
        sr_tensor_free(&o->state2[i]);
    }
    free(o->state1);
    free(o->state2);
    o->state1 = o->state2 = NULL;
    o->nstate = 0;
}

typedef struct {
    sr_optim *o;
    int i;
    int rc;
    sr_state_visitor fn;
    void *ud;
} step_state;

static int count_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path;
    (void)owner;
    if (p->trainable)
        (*(int *)ud)++;
    return 0;
}

/* State slots follow the order of trainable parameters in the tree walk,
 * which is fixed for a given architecture. */
static int ensure_slots(sr_optim *o, sr_module *m)
{
    int n = 0;
    sr_module_walk_params(m, count_cb, &n);
    if (o->nstate == n)
        return 0;
    if (o->nstate)
        return sr_fail("optimizer: model has %d trainable parameters, optimizer state has %d", n, o->nstate);
    o->state1 = calloc((size_t)n + 1, sizeof *o->state1);
    o->state2 = calloc((size_t)n + 1, sizeof *o->state2);
    if (!o->state1 || !o->state2)
        return sr_fail("optimizer: out of memory");
    o->nstate = n;
    return 0;
}

static int update_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)owner;
    step_state *s = ud;
    if (!p->trainable)
        return 0;
    sr_optim *o = s->o;
    int i = s->i++;
    if (!p->grad.storage)
        return 0;
    int64_t n = sr_numel(&p->value);
    sr_tensor *m1 = &o->state1[i], *m2 = &o->state2[i];
    if (!m1->storage && sr_tensor_zeros(m1, p->value.dtype, p->value.ndim, p->value.shape))
        return s->rc = -1;
    if (o->kind == SR_OPT_ADAMW && !m2->storage &&
        sr_tensor_zeros(m2, p->value.dtype, p->value.ndim, p->value.shape))
        return s->rc = -1;
    if (sr_numel(m1) != n) {
        sr_fail("optimizer: state for %s has %lld values, parameter %lld", path, (long long)sr_numel(m1),
                (long long)n);
        return s->rc = -1;
    }
    if (o->kind == SR_OPT_SGD) {
        /* torch.optim.SGD: g += wd·w; buf = μ·buf + g (first step: buf = g);
         * nesterov: g += μ·buf, else g = buf; w -= lr·g. */
        for (int64_t e = 0; e < n; e++) {
            double w = sr_get_flat(&p->value, e), g = sr_get_flat(&p->grad, e) + o->weight_decay * w;
            if (o->momentum != 0) {
                double b = o->step == 0 ? g : o->momentum * sr_get_flat(m1, e) + g;
                sr_set_flat(m1, e, b);
                g = o->nesterov ? g + o->momentum * b : b;
            }
            sr_set_flat(&p->value, e, w - o->lr * g);
        }
    } else {
        /* torch.optim.AdamW: w -= lr·wd·w; m, v moments; bias-corrected step. */
        double t = (double)(o->step + 1);
        double c1 = 1 - pow(o->beta1, t), c2 = 1 - pow(o->beta2, t);
        for (int64_t e = 0; e < n; e++) {
            double w = sr_get_flat(&p->value, e) * (1 - o->lr * o->weight_decay);
            double g = sr_get_flat(&p->grad, e);
            double a = o->beta1 * sr_get_flat(m1, e) + (1 - o->beta1) * g;
            double b = o->beta2 * sr_get_flat(m2, e) + (1 - o->beta2) * g * g;
            sr_set_flat(m1, e, a);
            sr_set_flat(m2, e, b);
            sr_set_flat(&p->value, e, w - o->lr * (a / c1) / (sqrt(b / c2) + o->eps));
        }
    }
    return 0;
}

int sr_optim_step(sr_optim *o, sr_module *m)
{
    if (ensure_slots(o, m))
        return -1;
    step_state s = {o, 0, 0, NULL, NULL};
    sr_module_walk_params(m, update_cb, &s);
    if (s.rc)
        return -1;
    o->step++;
    return 0;
}

static int state_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)owner;
    step_state *s = ud;
    if (!p->trainable)
        return 0;
    int i = s->i++;
    char name[600];
    sr_tensor *slots[2] = {&s->o->state1[i], &s->o->state2[i]};
    for (int k = 0; k < 2; k++) {
        if (!slots[k]->storage &&
            (k == 0 || s->o->kind == SR_OPT_ADAMW) &&
            sr_tensor_zeros(slots[k], p->value.dtype, p->value.ndim, p->value.shape))
            return s->rc = -1;
        if (!slots[k]->storage)
            continue;
        snprintf(name, sizeof name, "optim.state%d.%s", k + 1, path);
        if (s->fn(name, slots[k], s->ud))
            return s->rc = -1;
    }
    return 0;
}

int sr_optim_walk_state(sr_optim *o, sr_module *m, sr_state_visitor fn, void *ud)
{
    if (ensure_slots(o, m))
        return -1;
    step_state s = {o, 0, 0, fn, ud};
    sr_module_walk_params(m, state_cb, &s);
    return s.rc;
}
