/* train.c - softmax cross-entropy, the SGD / AdamW updates (matching
 * torch.nn.functional.cross_entropy and torch.optim.{SGD, AdamW}), and the
 * PGD and local-linearity objectives. */
#ifdef SR_REAL

/* torch.optim.SGD: g += wd·w; buf = μ·buf + g (buf starts at zero, which
 * equals torch's clone on the first step exactly); nesterov: g += μ·buf,
 * else g = buf; w -= lr·g. */
static void SR_FN(sgd_update)(real *w, const real *g, real *buf, int64_t n, double lr, double mom, double wd,
                              int nesterov)
{
    for (int64_t e = 0; e < n; e++) {
        double d = (double)g[e] + wd * w[e];
        if (mom != 0) {
            real b = (real)(mom * buf[e] + d);
            buf[e] = b;
            d = nesterov ? d + mom * b : b;
        }
        w[e] = (real)(w[e] - lr * d);
    }
}

/* torch.optim.AdamW: w *= 1 − lr·wd; m, v moments; bias-corrected step. */
static void SR_FN(adamw_update)(real *w, const real *g, real *m1, real *m2, int64_t n, double lr, double wd,
                                double b1, double b2, double eps, double c1, double c2)
{
    for (int64_t e = 0; e < n; e++) {
        double x = w[e] * (1 - lr * wd), gr = g[e];
        real a = (real)(b1 * m1[e] + (1 - b1) * gr);
        real b = (real)(b2 * m2[e] + (1 - b2) * gr * gr);
        m1[e] = a;
        m2[e] = b;
        w[e] = (real)(x - lr * (a / c1) / (sqrt(b) / sqrt(c2) + eps));
    }
}

static double SR_FN(row_norm)(const real *a, int64_t d)
{
    double s = 0;
    for (int64_t i = 0; i < d; i++)
        s += (double)a[i] * a[i];
    return sqrt(s);
}

static inline double SR_FN(clip1)(double v, double lo, double hi)
{
    if (lo <= hi)
        v = v < lo ? lo : v > hi ? hi : v;
    return v;
}

/* Random start around x: L∞ uniform in [−ε, ε]^d; L2 ε·z/‖z‖ with z
 * Gaussian (the robustness library's L2 random_perturb); then clip. */
static void SR_FN(pgd_start)(real *xa, const real *x, int64_t rows, int64_t d, int norm, double eps, double lo,
                             double hi, uint64_t seed, int64_t first)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        sr_rng g;
        sr_rng_seed(&g, sr_seed_mix(seed, 3, (uint64_t)(first + r)));
        real *a = xa + r * d;
        const real *b = x + r * d;
        if (norm == SR_NORM_LINF) {
            for (int64_t i = 0; i < d; i++)
                a[i] = (real)SR_FN(clip1)(b[i] + eps * (2 * sr_rng_uniform(&g) - 1), lo, hi);
        } else {
            for (int64_t i = 0; i < d; i++)
                a[i] = (real)sr_rng_normal(&g);
            double s = eps / (SR_FN(row_norm)(a, d) + 1e-10);
            for (int64_t i = 0; i < d; i++)
                a[i] = (real)SR_FN(clip1)(b[i] + s * a[i], lo, hi);
        }
    }
}

/* One ascent step along g, projection to the ε-ball around x, clip.  L2
 * follows the robustness library: x += α g/(‖g‖+1e-10); δ renormed to ε
 * when longer (torch.renorm: scale ε/(‖δ‖+1e-7)). */
static void SR_FN(pgd_step)(real *xa, const real *x, const real *gr, int64_t rows, int64_t d, int norm, double eps,
                            double alpha, double lo, double hi)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        real *a = xa + r * d;
        const real *b = x + r * d, *g = gr + r * d;
        if (norm == SR_NORM_LINF) {
            for (int64_t i = 0; i < d; i++) {
                double v = a[i] + alpha * ((g[i] > 0) - (g[i] < 0));
                double dl = v - b[i];
                dl = dl < -eps ? -eps : dl > eps ? eps : dl;
                a[i] = (real)SR_FN(clip1)(b[i] + dl, lo, hi);
            }
        } else {
            double s = alpha / (SR_FN(row_norm)(g, d) + 1e-10);
            double dn = 0;
            for (int64_t i = 0; i < d; i++) {
                a[i] = (real)(a[i] + s * g[i]);
                double dl = (double)a[i] - b[i];
                dn += dl * dl;
            }
            dn = sqrt(dn);
            double c = dn > eps ? eps / (dn + 1e-7) : 1;
            for (int64_t i = 0; i < d; i++)
                a[i] = (real)SR_FN(clip1)(b[i] + c * ((double)a[i] - b[i]), lo, hi);
        }
    }
}

/* out[r] = <a_r − b_r, c_r> (b may be NULL), accumulated in double. */
static void SR_FN(row_dot_diff)(double *out, const real *a, const real *b, const real *c, int64_t rows, int64_t d)
{
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t i = 0; i < d; i++)
            s += ((double)a[r * d + i] - (b ? b[r * d + i] : 0)) * c[r * d + i];
        out[r] = s;
    }
}

/* out = x + c·δ (δ given), rowwise constant c. */
static void SR_FN(axpy_rows)(real *out, const real *x, const real *dl, double c, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = (real)(x[i] + c * dl[i]);
}

/* h_r = s_r·(a_r − b_r). */
static void SR_FN(signed_diff)(real *h, const real *a, const real *b, const double *s, int64_t rows, int64_t d)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < d; i++)
            h[r * d + i] = (real)(s[r] * ((double)a[r * d + i] - b[r * d + i]));
}

#else /* generic part */

#include "train/train.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/augment.h"

#define SR_GENERIC_FILE "train/train.c"
#include "base/generic.h"

int sr_cross_entropy_ex(const sr_tensor *logits, const int64_t *labels, const double *w, double *loss,
                        int64_t *correct, double *losses, int64_t *pred, sr_tensor *grad)
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
            if (!isfinite(v))
                return sr_fail("cross_entropy: logit %lld of row %lld is %g (diverged? lower the learning rate)",
                               (long long)j + 1, (long long)i + 1, v);
            if (v > mx) {
                mx = v;
                arg = j;
            }
        }
        double z = 0;
        for (int64_t j = 0; j < k; j++)
            z += exp(sr_get_flat(logits, i * k + j) - mx);
        double lse = mx + log(z);
        double li = lse - sr_get_flat(logits, i * k + labels[i]);
        double wi = w ? w[i] : 1.0 / (double)n;
        total += wi * li;
        good += arg == labels[i];
        if (losses)
            losses[i] = li;
        if (pred)
            pred[i] = arg;
        if (grad)
            for (int64_t j = 0; j < k; j++) {
                double p = exp(sr_get_flat(logits, i * k + j) - lse);
                sr_set_flat(grad, i * k + j, wi * (p - (j == labels[i])));
            }
    }
    *loss = total;
    if (correct)
        *correct = good;
    return 0;
}

int sr_cross_entropy(const sr_tensor *logits, const int64_t *labels, double *loss, int64_t *correct,
                     sr_tensor *grad)
{
    return sr_cross_entropy_ex(logits, labels, NULL, loss, correct, NULL, NULL, grad);
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

/* sr_ce_pass with the run given (a data-parallel step sets run->sync). */
static int ce_pass_run(sr_module *m, const sr_tensor *x, const int64_t *labels, const double *w, sr_run *run,
                       double *loss, int64_t *correct, double *losses)
{
    sr_tensor grad = SR_TENSOR_INIT;
    int rc = -1;
    if (sr_module_forward(m, x, run))
        goto done;
    if (m->out.ndim != 2 || m->out.shape[0] != x->shape[0]) {
        sr_fail("train: the model's output %s is not (N, classes) for input %s", SR_SHAPE(&m->out), SR_SHAPE(x));
        goto done;
    }
    if (sr_cross_entropy_ex(&m->out, labels, w, loss, correct, losses, NULL, &grad) ||
        sr_module_backward(m, &grad, run))
        goto done;
    rc = 0;
done:
    sr_tensor_free(&grad);
    return rc;
}

int sr_ce_pass(sr_module *m, const sr_tensor *x, const int64_t *labels, const double *w, int param_grads,
               double *loss, int64_t *correct, double *losses)
{
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = param_grads;
    return ce_pass_run(m, x, labels, w, &run, loss, correct, losses);
}

/* Forward only, in the current mode, with per-row losses and predictions. */
static int ce_forward(sr_module *m, const sr_tensor *x, const int64_t *labels, double *losses, int64_t *pred,
                      double *loss, int64_t *correct)
{
    sr_run run = SR_RUN_INIT;
    if (sr_module_forward(m, x, &run))
        return -1;
    if (m->out.ndim != 2 || m->out.shape[0] != x->shape[0])
        return sr_fail("train: the model's output %s is not (N, classes) for input %s", SR_SHAPE(&m->out),
                       SR_SHAPE(x));
    double l;
    return sr_cross_entropy_ex(&m->out, labels, NULL, loss ? loss : &l, correct, losses, pred, NULL);
}

/* --- optimisers ---------------------------------------------------------- */

#define OPTIM(f) offsetof(sr_optim, f)
#define FINITE_NONNEG .lo = 0, .hi = INFINITY, .flags = SR_OPT_OPEN_HI
const sr_opt_spec sr_sgd_specs[] = {
    {.name = "lr", .type = SR_OPT_NUM, FINITE_NONNEG, .def = 0.1, .offset = OPTIM(lr), .help = "learning rate"},
    {.name = "momentum", .type = SR_OPT_NUM, .lo = 0, .hi = 1, .def = 0.9, .offset = OPTIM(momentum),
     .help = "momentum (torch.optim.SGD's)"},
    {.name = "nesterov", .type = SR_OPT_BOOL, .def = 0, .offset = OPTIM(nesterov), .help = "Nesterov momentum"},
    {.name = "weight_decay", .type = SR_OPT_NUM, FINITE_NONNEG, .def = 5e-4, .offset = OPTIM(weight_decay),
     .help = "L2 penalty, coupled (added to the gradient)"},
    {.name = NULL},
};
const sr_opt_spec sr_adamw_specs[] = {
    {.name = "lr", .type = SR_OPT_NUM, FINITE_NONNEG, .def = 1e-3, .offset = OPTIM(lr), .help = "learning rate"},
    {.name = "beta1", .type = SR_OPT_NUM, .lo = 0, .hi = 1, .flags = SR_OPT_OPEN_HI, .def = 0.9, .offset = OPTIM(beta1),
     .help = "decay of the first moment"},
    {.name = "beta2", .type = SR_OPT_NUM, .lo = 0, .hi = 1, .flags = SR_OPT_OPEN_HI, .def = 0.999,
     .offset = OPTIM(beta2), .help = "decay of the second moment"},
    {.name = "eps", .type = SR_OPT_NUM, .lo = 0, .hi = INFINITY, .flags = SR_OPT_OPEN_LO | SR_OPT_OPEN_HI, .def = 1e-8,
     .offset = OPTIM(eps), .help = "added to the second moment's root"},
    {.name = "weight_decay", .type = SR_OPT_NUM, FINITE_NONNEG, .def = 0.05, .offset = OPTIM(weight_decay),
     .help = "decoupled weight decay (torch.optim.AdamW's)"},
    {.name = NULL},
};
#undef OPTIM

int sr_optim_init(sr_optim *o, sr_opt_kind kind)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    sr_opts_defaults(kind == SR_OPT_SGD ? sr_sgd_specs : sr_adamw_specs, o);
    return 0;
}

int sr_optim_read(sr_optim *o, sr_opt_kind kind, const sr_opts *src)
{
    sr_optim_init(o, kind);
    if (sr_opts_read(src, kind == SR_OPT_SGD ? sr_sgd_specs : sr_adamw_specs, o))
        return -1;
    if (o->nesterov && !(o->momentum > 0))
        return sr_fail("%s: nesterov needs momentum > 0", src->op);
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

static int count_trainable(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path, (void)owner;
    *(int *)ud += p->trainable != 0;
    return 0;
}

/* State slots follow the order of the distinct trainable parameters in the
 * tree walk, which is fixed for a given architecture.  A parameter shared
 * by two places in the tree has one slot and one update per step, from its
 * one gradient (backward through a module used twice is refused: it keeps
 * one saved input). */
static int ensure_slots(sr_optim *o, sr_module *m)
{
    int n = 0;
    if (sr_module_walk_params_once(m, count_trainable, &n, NULL))
        return -1;
    if (o->nstate == n)
        return 0;
    if (o->nstate)
        return sr_fail("optimizer: model has %d trainable parameters, optimizer state has %d", n, o->nstate);
    o->state1 = calloc((size_t)n + 1, sizeof *o->state1);
    o->state2 = calloc((size_t)n + 1, sizeof *o->state2);
    if (!o->state1 || !o->state2) {
        free(o->state1);
        free(o->state2);
        o->state1 = o->state2 = NULL;
        return sr_fail("optimizer: out of memory");
    }
    o->nstate = n;
    return 0;
}

/* Allocate (zeroed) the state slots of parameter p that this optimiser
 * uses; a slot whose shape or dtype no longer matches is an error. */
static int ensure_state(sr_optim *o, const char *path, sr_param *p, int i)
{
    sr_tensor *slots[2] = {&o->state1[i], &o->state2[i]};
    for (int k = 0; k < 2; k++) {
        if (k == 1 && o->kind != SR_OPT_ADAMW)
            continue;
        if (k == 0 && o->kind == SR_OPT_SGD && o->momentum == 0)
            continue;
        if (!slots[k]->storage) {
            if (sr_tensor_zeros(slots[k], p->value.dtype, p->value.ndim, p->value.shape))
                return -1;
        } else if (!sr_same_shape(slots[k], &p->value) || slots[k]->dtype != p->value.dtype) {
            return sr_fail("optimizer: state for %s is %s %s, parameter %s %s", path, SR_SHAPE(slots[k]),
                           sr_dtype_name(slots[k]->dtype), SR_SHAPE(&p->value), sr_dtype_name(p->value.dtype));
        }
    }
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
    if (ensure_state(o, path, p, i))
        return s->rc = -1;
    if (p->grad.dtype != p->value.dtype || sr_numel(&p->grad) != sr_numel(&p->value)) {
        sr_fail("optimizer: gradient of %s is %s %s, parameter %s %s", path, SR_SHAPE(&p->grad),
                sr_dtype_name(p->grad.dtype), SR_SHAPE(&p->value), sr_dtype_name(p->value.dtype));
        return s->rc = -1;
    }
    int64_t n = sr_numel(&p->value);
    void *m1 = o->state1[i].storage ? sr_data(&o->state1[i]) : NULL;
    if (o->kind == SR_OPT_SGD) {
        SR_DISPATCH(p->value.dtype, sgd_update, sr_data(&p->value), sr_data(&p->grad), m1, n, o->lr, o->momentum,
                    o->weight_decay, o->nesterov);
    } else {
        double t = (double)(o->step + 1);
        SR_DISPATCH(p->value.dtype, adamw_update, sr_data(&p->value), sr_data(&p->grad), m1,
                    sr_data(&o->state2[i]), n, o->lr, o->weight_decay, o->beta1, o->beta2, o->eps,
                    1 - pow(o->beta1, t), 1 - pow(o->beta2, t));
    }
    return 0;
}

int sr_optim_step(sr_optim *o, sr_module *m)
{
    if (ensure_slots(o, m))
        return -1;
    step_state s = {o, 0, 0, NULL, NULL};
    if (sr_module_walk_params_once(m, update_cb, &s, NULL) || s.rc)
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
    if (ensure_state(s->o, path, p, i))
        return s->rc = -1;
    char name[600];
    sr_tensor *slots[2] = {&s->o->state1[i], &s->o->state2[i]};
    for (int k = 0; k < 2; k++) {
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
    return sr_module_walk_params_once(m, state_cb, &s, NULL) || s.rc ? -1 : 0;
}

/* --- data-parallel steps ---------------------------------------------------- */

int sr_train_step(sr_module *m, sr_optim *o, const sr_tensor *x, const int64_t *labels, const sr_data_parallel *dp,
                  double *loss, int64_t *correct)
{
    if (x->ndim < 1 || x->shape[0] < 1)
        return sr_fail("train_step: input %s has no batch dimension", SR_SHAPE(x));
    int64_t n = x->shape[0];
    const sr_sum_hook *sum = dp ? dp->sum : NULL;
    if (dp && dp->rows && dp->rows < n)
        return sr_fail("train_step: a shard of %lld rows of a batch of %lld", (long long)n, (long long)dp->rows);
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = o != NULL;
    run.sync = sum && dp->sync_bn ? sum : NULL;
    double *w = NULL;
    if (dp && dp->rows && dp->rows != n) {
        if (!(w = malloc(sizeof *w * (size_t)n)))
            return sr_fail("train_step: out of memory");
        for (int64_t i = 0; i < n; i++)
            w[i] = 1.0 / (double)dp->rows;
    }
    sr_grad_sync *gs = NULL;
    if (sum && o && dp->overlap && sr_grad_sync_new(&gs, m, sum, dp->bucket, &run)) {
        free(w);
        return -1;
    }
    int rc = ce_pass_run(m, x, labels, w, &run, loss, correct, NULL);
    free(w);
    if (rc) {
        sr_grad_sync_abandon(gs);
        return -1;
    }
    if (!o)
        return 0;
    if (sum && ((!gs && sr_grad_sync_new(&gs, m, sum, dp->bucket, NULL)) || sr_grad_sync_finish(gs, dp->sum_seconds) ||
                (!dp->sync_bn && sr_buffers_mean(m, sum, dp->nproc))))
        return -1;
    if (sr_optim_step(o, m))
        return -1;
    sr_module_zero_grad(m);
    return 0;
}

/* --- buffers ------------------------------------------------------------- */

typedef struct {
    sr_buffers *b;
    int i, restore, rc;
} buf_state;

static int buf_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)owner;
    buf_state *s = ud;
    if (p->trainable)
        return 0;
    int i = s->i++;
    if (s->b->t == NULL)
        return 0; /* counting pass */
    if (s->restore) {
        if (i >= s->b->n || sr_tensor_assign(&p->value, &s->b->t[i])) {
            sr_fail("buffers: cannot restore %s (the model changed?)", path);
            return s->rc = -1;
        }
    } else if (sr_tensor_copy(&s->b->t[i], &p->value)) {
        return s->rc = -1;
    }
    return 0;
}

int sr_buffers_save(sr_buffers *b, sr_module *m)
{
    memset(b, 0, sizeof *b);
    buf_state s = {b, 0, 0, 0};
    sr_module_walk_params(m, buf_cb, &s);
    b->n = s.i;
    b->t = calloc((size_t)b->n + 1, sizeof *b->t);
    if (!b->t)
        return sr_fail("buffers: out of memory");
    s.i = 0;
    sr_module_walk_params(m, buf_cb, &s);
    if (s.rc) {
        sr_buffers_free(b);
        return -1;
    }
    return 0;
}

int sr_buffers_restore(const sr_buffers *b, sr_module *m)
{
    buf_state s = {(sr_buffers *)b, 0, 1, 0};
    sr_module_walk_params(m, buf_cb, &s);
    if (!s.rc && s.i != b->n)
        return sr_fail("buffers: model has %d buffers, snapshot %d", s.i, b->n);
    return s.rc;
}

void sr_buffers_free(sr_buffers *b)
{
    for (int i = 0; i < b->n; i++)
        sr_tensor_free(&b->t[i]);
    free(b->t);
    b->t = NULL;
    b->n = 0;
}

/* --- PGD ----------------------------------------------------------------- */

/* The attacks' options.  norm and clip are read by the attack's reader
 * (CALLER: the struct holds a norm enum and a clip range); step_size's
 * default is "auto", 2.5 eps / steps (Madry et al.). */
static const char *const norm_names[] = {"l2", "L2", "2", "linf", "Linf", "inf", NULL};
#define ATTACK_SPECS(S, norm_def, eps_def, eps_text, steps_def)                                                   \
    {.name = "norm", .type = SR_OPT_CHOICE, .flags = SR_OPT_CALLER, .def = (norm_def), .choices = norm_names,     \
     .help = "threat model: L2 or L-infinity ball"},                                                             \
        {.name = "eps", .type = SR_OPT_NUM, FINITE_NONNEG, .def = (eps_def), .def_text = (eps_text),           \
         .offset = offsetof(S, eps), .help = "radius of the ball, raw pixel units"},                             \
        {.name = "steps", .type = SR_OPT_INT, .lo = 0, .hi = 100000, .def = (steps_def),                         \
         .offset = offsetof(S, steps), .help = "ascent steps"},                                                  \
        {.name = "step_size", .type = SR_OPT_NUM, FINITE_NONNEG, .def = -1, .def_text = "2.5 eps / steps",       \
         .offset = offsetof(S, step_size), .help = "size of each ascent step"},                                  \
        {.name = "random_start", .type = SR_OPT_BOOL, .def = 1, .offset = offsetof(S, random_start),            \
         .help = "start at a random point of the ball"},                                                         \
        {.name = "clip", .type = SR_OPT_BOOL, .flags = SR_OPT_CALLER, .def = 1,                                 \
         .help = "clip the iterates to the pixel range [0, 1]"},                                                 \
        {.name = "eval_mode", .type = SR_OPT_BOOL, .def = 1, .offset = offsetof(S, eval_mode),                  \
         .help = "attack with the model in eval mode (BatchNorm running statistics)"},                          \
        {.name = "seed", .type = SR_OPT_INT, .lo = -INFINITY, .hi = INFINITY, .def = 0, .offset = offsetof(S, seed), \
         .help = "seed of the random start"}

const sr_opt_spec sr_pgd_specs[] = {
    ATTACK_SPECS(sr_pgd_opts, 0, 0.5, NULL, 7),
    {.name = "use_best", .type = SR_OPT_BOOL, .def = 0, .offset = offsetof(sr_pgd_opts, use_best),
     .help = "return each row's highest-loss iterate, not the last"},
    {.name = "row_offset", .type = SR_OPT_INT, .lo = 0, .hi = 1e15, .def = 0, .offset = offsetof(sr_pgd_opts, first_row),
     .help = "the first row's place in the whole batch (a data-parallel shard draws that batch's random starts)"},
    {.name = NULL},
};

/* An attack's struct from its declaration: the declared fields (defaults
 * when src is NULL), then norm and clip (CALLER entries, read here into
 * the struct's own terms) and the auto step. */
static int attack_read(const sr_opts *src, const sr_opt_spec *specs, void *o, sr_norm *norm, const double *eps,
                       const int64_t *steps, double *step_size, double *lo, double *hi)
{
    sr_opt_spec n = *sr_opt_spec_find(specs, "norm"), c = *sr_opt_spec_find(specs, "clip");
    int ni = (int)n.def, clip = (int)c.def;
    if (src) {
        n.flags &= ~SR_OPT_CALLER;
        c.flags &= ~SR_OPT_CALLER;
        if (sr_opts_read(src, specs, o) || sr_opt_get(src, &n, &ni) || sr_opt_get(src, &c, &clip))
            return -1;
    } else {
        sr_opts_defaults(specs, o);
    }
    *norm = ni < 3 ? SR_NORM_L2 : SR_NORM_LINF;
    if (*step_size < 0) /* auto */
        *step_size = *steps > 0 ? 2.5 * *eps / (double)*steps : 0;
    *lo = clip ? 0 : 1;
    *hi = clip ? 1 : 0; /* lo > hi: no clip */
    return 0;
}

void sr_pgd_defaults(sr_pgd_opts *o)
{
    memset(o, 0, sizeof *o);
    attack_read(NULL, sr_pgd_specs, o, &o->norm, &o->eps, &o->steps, &o->step_size, &o->lo, &o->hi);
}

int sr_pgd_opts_read(const sr_opts *src, sr_pgd_opts *o)
{
    memset(o, 0, sizeof *o);
    return attack_read(src, sr_pgd_specs, o, &o->norm, &o->eps, &o->steps, &o->step_size, &o->lo, &o->hi);
}

/* What PGD and the LLR inner maximisation share: a projected ascent on the
 * per-row losses in a ball around x.  Their option structs carry these
 * fields under the same names; ATTACK() copies them, attack_begin fills
 * the rest. */
typedef struct {
    const char *op; /* "pgd" or "llr", for messages */
    sr_norm norm;
    double eps, step_size, lo, hi;
    int steps, random_start, eval_mode;
    uint64_t seed;
    int64_t n, d; /* rows of x, values per row */
    int64_t first_row; /* row 0's place in the whole batch: random starts are drawn by it */
    int prev;     /* the model's mode before the attack, restored by attack_end */
    double *w;    /* per-row loss weights, all 1 */
} attack;

#define ATTACK(name, o)                                                                                            \
    {.op = (name), .norm = (o)->norm, .eps = (o)->eps, .step_size = (o)->step_size, .lo = (o)->lo, .hi = (o)->hi,  \
     .steps = (o)->steps, .random_start = (o)->random_start, .eval_mode = (o)->eval_mode, .seed = (o)->seed}

static int check_attack(const attack *a, const sr_tensor *x)
{
    if (x->ndim < 1 || !x->storage || x->shape[0] < 1)
        return sr_fail("%s: input %s has no batch dimension", a->op, SR_SHAPE(x));
    if (a->norm != SR_NORM_L2 && a->norm != SR_NORM_LINF)
        return sr_fail("%s: norm must be L2 or Linf", a->op);
    if (!(a->eps >= 0) || !isfinite(a->eps) || !(a->step_size >= 0) || !isfinite(a->step_size))
        return sr_fail("%s: eps %g and step size %g must be finite and >= 0", a->op, a->eps, a->step_size);
    if (a->steps < 0 || a->steps > 100000)
        return sr_fail("%s: %d steps (must be 0..100000)", a->op, a->steps);
    return 0;
}

/* Checks the arguments, puts the model in the asked mode, makes the
 * weights (1 per row: row i's input gradient is then ∇ℓ_i whatever the
 * batch size; the L∞ and L2 steps are scale-free anyway) and the start
 * point xa: x itself (clipped) or a random start.  On failure nothing is
 * left to undo; on success attack_end undoes it. */
static int attack_begin(attack *a, sr_module *m, const sr_tensor *x, sr_tensor *xa)
{
    if (check_attack(a, x))
        return -1;
    if (xa->storage && xa->storage == x->storage)
        return sr_fail("attack: output shares storage with the input");
    a->n = x->shape[0];
    a->d = sr_rowsize(x);
    a->w = malloc((size_t)a->n * sizeof *a->w);
    if (!a->w)
        return sr_fail("%s: out of memory", a->op);
    for (int64_t i = 0; i < a->n; i++)
        a->w[i] = 1;
    if (sr_tensor_ensure_like(xa, x) || sr_tensor_assign(xa, x)) {
        free(a->w);
        return -1;
    }
    if (a->random_start && a->eps > 0)
        SR_DISPATCH(x->dtype, pgd_start, sr_data(xa), sr_data(x), a->n, a->d, a->norm, a->eps, a->lo, a->hi, a->seed,
                    a->first_row);
    else
        SR_DISPATCH(x->dtype, pgd_step, sr_data(xa), sr_data(x), sr_data(x), a->n, a->d, a->norm, a->eps, 0.0, a->lo,
                    a->hi);
    a->prev = m->training;
    if (a->eval_mode)
        sr_module_set_training(m, 0);
    return 0;
}

/* One ascent step of xa along g, projected to the ball around x, clipped. */
static void attack_step(const attack *a, sr_tensor *xa, const sr_tensor *x, const sr_tensor *g)
{
    SR_DISPATCH(x->dtype, pgd_step, sr_data(xa), sr_data(x), sr_data(g), a->n, a->d, a->norm, a->eps, a->step_size,
                a->lo, a->hi);
}

static void attack_end(attack *a, sr_module *m)
{
    sr_module_set_training(m, a->prev);
    free(a->w);
}

static void copy_row(sr_tensor *dst, const sr_tensor *src, int64_t r)
{
    size_t row = (size_t)sr_rowsize(src) * sr_dtype_size(src->dtype);
    memcpy((char *)sr_data(dst) + r * row, (const char *)sr_data(src) + r * row, row);
}

int sr_pgd_attack(sr_module *m, const sr_tensor *x, const int64_t *labels, const sr_pgd_opts *o, sr_tensor *xadv,
                  double *loss, int64_t *correct)
{
    attack a = ATTACK("pgd", o);
    a.first_row = o->first_row;
    if (attack_begin(&a, m, x, xadv))
        return -1;
    int64_t n = a.n;
    double *ls = malloc((size_t)n * sizeof *ls), *best = malloc((size_t)n * sizeof *best);
    int64_t *pred = malloc((size_t)n * sizeof *pred), *best_ok = malloc((size_t)n * sizeof *best_ok);
    sr_tensor bestx = SR_TENSOR_INIT;
    int rc = -1;
    if (!ls || !best || !pred || !best_ok) {
        sr_fail("pgd: out of memory");
        goto done;
    }
    if (o->use_best && sr_tensor_copy(&bestx, xadv))
        goto done;
    for (int k = 0; k <= o->steps; k++) {
        double l;
        if (k < o->steps) {
            if (sr_ce_pass(m, xadv, labels, a.w, 0, &l, NULL, ls))
                goto done;
        } else if (o->use_best || loss || correct) {
            if (ce_forward(m, xadv, labels, ls, pred, NULL, NULL))
                goto done;
        } else {
            break;
        }
        if (o->use_best) {
            /* robustness library replace_best: keep the highest loss seen
             * (ties keep the earlier iterate). */
            if (k < o->steps && sr_argmax_rows(&m->out, pred))
                goto done;
            for (int64_t i = 0; i < n; i++)
                if (k == 0 || ls[i] > best[i]) {
                    best[i] = ls[i];
                    best_ok[i] = pred[i] == labels[i];
                    if (k > 0)
                        copy_row(&bestx, xadv, i);
                }
        }
        if (k < o->steps)
            attack_step(&a, xadv, x, &m->gin);
    }
    double tl = 0;
    int64_t tc = 0;
    if (o->use_best) {
        if (sr_tensor_assign(xadv, &bestx))
            goto done;
        for (int64_t i = 0; i < n; i++) {
            tl += best[i];
            tc += best_ok[i];
        }
    } else if (loss || correct) {
        for (int64_t i = 0; i < n; i++) {
            tl += ls[i];
            tc += pred[i] == labels[i];
        }
    }
    if (loss)
        *loss = tl / (double)n;
    if (correct)
        *correct = tc;
    rc = 0;
done:
    attack_end(&a, m);
    sr_tensor_free(&bestx);
    free(ls);
    free(best);
    free(pred);
    free(best_ok);
    return rc;
}

/* --- LLR ----------------------------------------------------------------- */

const sr_opt_spec sr_llr_specs[] = {
    ATTACK_SPECS(sr_llr_opts, 3, 8.0 / 255, "8/255", 3),
    {.name = "lambda", .type = SR_OPT_NUM, FINITE_NONNEG, .def = 4, .offset = offsetof(sr_llr_opts, lambda),
     .help = "weight of the local-linearity gap"},
    {.name = "mu", .type = SR_OPT_NUM, FINITE_NONNEG, .def = 3, .offset = offsetof(sr_llr_opts, mu),
     .help = "weight of the gradient-alignment term"},
    {.name = "fd", .type = SR_OPT_NUM, .lo = 0, .hi = INFINITY, .flags = SR_OPT_OPEN_LO | SR_OPT_OPEN_HI, .def = 0.1,
     .offset = offsetof(sr_llr_opts, fd), .help = "finite-difference step of the alignment term's gradient"},
    {.name = NULL},
};

void sr_llr_defaults(sr_llr_opts *o)
{
    memset(o, 0, sizeof *o);
    attack_read(NULL, sr_llr_specs, o, &o->norm, &o->eps, &o->steps, &o->step_size, &o->lo, &o->hi);
}

int sr_llr_opts_read(const sr_opts *src, sr_llr_opts *o)
{
    memset(o, 0, sizeof *o);
    return attack_read(src, sr_llr_specs, o, &o->norm, &o->eps, &o->steps, &o->step_size, &o->lo, &o->hi);
}

static double sgn(double v) { return (v > 0) - (v < 0); }

int sr_llr_inner(sr_module *m, const sr_tensor *x, const int64_t *labels, const sr_llr_opts *o, sr_tensor *delta,
                 double *gap, double *dir)
{
    attack a = ATTACK("llr", o);
    sr_tensor g0 = SR_TENSOR_INIT, xa = SR_TENSOR_INIT, h = SR_TENSOR_INIT;
    if (attack_begin(&a, m, x, &xa)) {
        sr_tensor_free(&xa);
        return -1;
    }
    int64_t n = a.n, d = a.d;
    double *l0 = malloc((size_t)n * sizeof *l0), *l1 = malloc((size_t)n * sizeof *l1),
           *s = malloc((size_t)n * sizeof *s);
    int rc = -1;
    if (!l0 || !l1 || !s) {
        sr_fail("llr: out of memory");
        goto done;
    }
    double l;
    /* ℓ_i(x) and ∇ℓ_i(x) once; then ascend g_i(δ) whose gradient in δ is
     * sign(gap_i)·(∇ℓ_i(x+δ) − ∇ℓ_i(x)). */
    if (sr_ce_pass(m, x, labels, a.w, 0, &l, NULL, l0) || sr_tensor_copy(&g0, &m->gin) ||
        sr_tensor_ensure_like(&h, x))
        goto done;
    for (int k = 0; k <= o->steps; k++) {
        if (k < o->steps) {
            if (sr_ce_pass(m, &xa, labels, a.w, 0, &l, NULL, l1))
                goto done;
        } else if (ce_forward(m, &xa, labels, l1, NULL, NULL, NULL)) {
            goto done;
        }
        SR_DISPATCH(x->dtype, row_dot_diff, dir, sr_data(&xa), sr_data(x), sr_data(&g0), n, d);
        for (int64_t i = 0; i < n; i++) {
            gap[i] = l1[i] - l0[i] - dir[i];
            s[i] = gap[i] >= 0 ? 1 : -1;
        }
        if (k == o->steps)
            break;
        SR_DISPATCH(x->dtype, signed_diff, sr_data(&h), sr_data(&m->gin), sr_data(&g0), s, n, d);
        attack_step(&a, &xa, x, &h);
    }
    if (sr_tensor_ensure_like(delta, x))
        goto done;
    SR_DISPATCH(x->dtype, axpy_rows, sr_data(delta), sr_data(&xa), sr_data(x), -1.0, n * d);
    rc = 0;
done:
    attack_end(&a, m);
    sr_tensor_free(&g0);
    sr_tensor_free(&xa);
    sr_tensor_free(&h);
    free(l0);
    free(l1);
    free(s);
    return rc;
}

int sr_llr_outer(sr_module *m, const sr_tensor *x, const int64_t *labels, const sr_llr_opts *o,
                 const sr_tensor *delta, const double *gap, const double *dir, sr_llr_result *res)
{
    attack a = ATTACK("llr", o);
    if (check_attack(&a, x))
        return -1;
    if (!sr_same_shape(x, delta) || x->dtype != delta->dtype)
        return sr_fail("llr: delta %s does not match the input %s", SR_SHAPE(delta), SR_SHAPE(x));
    if (!(o->fd > 0) || !isfinite(o->fd))
        return sr_fail("llr: finite-difference step fd %g must be > 0", o->fd);
    int64_t n = x->shape[0], d = sr_rowsize(x);
    double t = o->fd, N = (double)n;
    double *w = malloc((size_t)n * sizeof *w), *lp = malloc((size_t)n * sizeof *lp),
           *lc = malloc((size_t)n * sizeof *lc), *ld = malloc((size_t)n * sizeof *ld),
           *la = malloc((size_t)n * sizeof *la);
    sr_tensor z = SR_TENSOR_INIT;
    sr_buffers snap = {0, NULL};
    int rc = -1, have_snap = 0;
    if (!w || !lp || !lc || !ld || !la) {
        sr_fail("llr: out of memory");
        goto done;
    }
    if (sr_tensor_ensure_like(&z, x) || sr_buffers_save(&snap, m))
        goto done;
    have_snap = 1;
    double l;
    /* x + δ: λ s_i ℓ_i(x+δ) */
    SR_DISPATCH(x->dtype, axpy_rows, sr_data(&z), sr_data(x), sr_data(delta), 1.0, n * d);
    for (int64_t i = 0; i < n; i++)
        w[i] = o->lambda * sgn(gap[i]) / N;
    if (sr_ce_pass(m, &z, labels, w, 1, &l, NULL, lp))
        goto done;
    /* x ± tδ: (−λ s_i + μ q_i)·(ℓ_i(x+tδ) − ℓ_i(x−tδ)) / (2t) */
    for (int sgn_t = 1; sgn_t >= -1; sgn_t -= 2) {
        SR_DISPATCH(x->dtype, axpy_rows, sr_data(&z), sr_data(x), sr_data(delta), sgn_t * t, n * d);
        for (int64_t i = 0; i < n; i++)
            w[i] = sgn_t * (-o->lambda * sgn(gap[i]) + o->mu * sgn(dir[i])) / (2 * t * N);
        if (sr_ce_pass(m, &z, labels, w, 1, &l, NULL, sgn_t > 0 ? lc : ld))
            goto done;
    }
    /* The extra passes must not move BatchNorm running statistics: undo
     * them, so only the clean pass below updates them, as in a plain step. */
    if (sr_buffers_restore(&snap, m))
        goto done;
    for (int64_t i = 0; i < n; i++)
        w[i] = (1 - o->lambda * sgn(gap[i])) / N;
    int64_t correct = 0;
    if (sr_ce_pass(m, x, labels, w, 1, &l, &correct, la))
        goto done;
    double ce = 0, gam = 0, al = 0;
    for (int64_t i = 0; i < n; i++) {
        double dd = (lc[i] - ld[i]) / (2 * t);
        ce += la[i];
        gam += fabs(lp[i] - la[i] - dd);
        al += fabs(dd);
    }
    res->ce = ce / N;
    res->gamma = gam / N;
    res->align = al / N;
    res->loss = res->ce + o->lambda * res->gamma + o->mu * res->align;
    res->correct = correct;
    rc = 0;
done:
    if (have_snap)
        sr_buffers_free(&snap);
    sr_tensor_free(&z);
    free(w);
    free(lp);
    free(lc);
    free(ld);
    free(la);
    return rc;
}

int sr_llr_step(sr_module *m, sr_optim *opt, const sr_tensor *x, const int64_t *labels, const sr_llr_opts *o,
                sr_llr_result *res)
{
    attack a = ATTACK("llr", o);
    if (check_attack(&a, x))
        return -1;
    int64_t n = x->shape[0];
    double *gap = malloc((size_t)n * sizeof *gap), *dir = malloc((size_t)n * sizeof *dir);
    sr_tensor delta = SR_TENSOR_INIT;
    int rc = -1;
    memset(res, 0, sizeof *res);
    if (!gap || !dir) {
        sr_fail("llr: out of memory");
        goto done;
    }
    if (sr_llr_inner(m, x, labels, o, &delta, gap, dir))
        goto done;
    if (!opt) {
        for (int64_t i = 0; i < n; i++) {
            res->gamma += fabs(gap[i]) / (double)n;
            res->align += fabs(dir[i]) / (double)n;
        }
        res->ce = NAN;
        res->loss = NAN;
        rc = 0;
        goto done;
    }
    if (sr_llr_outer(m, x, labels, o, &delta, gap, dir, res) || sr_optim_step(opt, m))
        goto done;
    sr_module_zero_grad(m);
    rc = 0;
done:
    sr_tensor_free(&delta);
    free(gap);
    free(dir);
    return rc;
}

/* --- the training loop's options ---------------------------------------- */

const sr_opt_spec sr_gaussian_specs[] = {
    {.name = "sigma", .type = SR_OPT_NUM, FINITE_NONNEG, .def = 0.25, .offset = offsetof(sr_gaussian_opts, sigma),
     .help = "noise standard deviation, raw pixel units"},
    {.name = "clip", .type = SR_OPT_BOOL, .def = 0, .offset = offsetof(sr_gaussian_opts, clip),
     .help = "clip the noisy images to [0, 1]"},
    {.name = NULL},
};

static const char *const optimizers[] = {"sgd", "adamw", NULL}, *const schedules[] = {"cosine", "step", "constant", NULL},
                         *const label_kinds[] = {"true", "random", NULL}, *const data_kinds[] = {"real", "noise", NULL},
                         *const objectives[] = {"ce", "pgd", "gaussian", "llr", NULL},
                         *const keep_optims[] = {"latest", "all", NULL};
#define TRAIN(f) offsetof(sr_train_opts, f)
/* What only the loop (lua/srgeo/train.lua) can read: declared for the
 * unknown-key check and the help. */
#define TRAIN_OTHER(n, w, h) {.name = (n), .type = SR_OPT_OTHER, .flags = SR_OPT_CALLER, .what = (w), .help = (h)}
const sr_opt_spec sr_train_specs[] = {
    TRAIN_OTHER("model", "a module", "the model to train (required)"),
    TRAIN_OTHER("data", "a dataset", "training data (required)"),
    TRAIN_OTHER("test_data", "a dataset", "test data, evaluated at each checkpoint"),
    {.name = "epochs", .type = SR_OPT_INT, .lo = 1, .hi = 1e6, .def = 0, .def_text = "none",
     .offset = TRAIN(epochs), .help = "epochs (give this or steps)"},
    {.name = "steps", .type = SR_OPT_INT, .lo = 1, .hi = 1e12, .def = 0, .def_text = "none", .offset = TRAIN(steps),
     .help = "optimiser steps (give this or epochs)"},
    {.name = "batch", .type = SR_OPT_INT, .lo = 1, .hi = 1e7, .def = 128, .offset = TRAIN(batch),
     .help = "batch size (at most the training set)"},
    {.name = "optimizer", .type = SR_OPT_CHOICE, .choices = optimizers, .offset = TRAIN(optimizer),
     .help = "the optimiser"},
    TRAIN_OTHER("lr", "a number >= 0", "learning rate (SGD 0.1, AdamW 1e-3: optim.sgd / optim.adamw)"),
    TRAIN_OTHER("momentum", "a number in [0, 1]", "SGD momentum (0.9)"),
    TRAIN_OTHER("nesterov", "true or false", "SGD Nesterov momentum (false)"),
    TRAIN_OTHER("weight_decay", "a number >= 0", "weight decay (SGD 5e-4 coupled, AdamW 0.05 decoupled)"),
    TRAIN_OTHER("beta1", "a number in [0, 1)", "AdamW beta1 (0.9)"),
    TRAIN_OTHER("beta2", "a number in [0, 1)", "AdamW beta2 (0.999)"),
    TRAIN_OTHER("adam_eps", "a number > 0", "AdamW eps (1e-8)"),
    {.name = "schedule", .type = SR_OPT_CHOICE, .choices = schedules, .offset = TRAIN(schedule),
     .help = "learning-rate schedule (cosine: per step to 0)"},
    TRAIN_OTHER("milestones", "a list of fractions of the run or step counts", "step schedule: when lr drops"),
    {.name = "gamma", .type = SR_OPT_NUM, .lo = 0, .hi = 1, .def = 0.1, .offset = TRAIN(gamma),
     .help = "step schedule: lr factor at each milestone"},
    {.name = "warmup", .type = SR_OPT_INT, .lo = 0, .hi = 1e12, .def = 0, .offset = TRAIN(warmup),
     .help = "linear warm-up steps"},
    TRAIN_OTHER("augment", "true, false or {crop =, flip =}", "random crop + flip (off for the controls)"),
    {.name = "labels", .type = SR_OPT_CHOICE, .choices = label_kinds, .offset = TRAIN(labels),
     .help = "random: labels permuted across the training set"},
    {.name = "data_kind", .type = SR_OPT_CHOICE, .choices = data_kinds, .offset = TRAIN(data_kind),
     .help = "noise: seeded uniform-noise images replace the inputs"},
    {.name = "objective", .type = SR_OPT_CHOICE, .choices = objectives, .offset = TRAIN(objective),
     .help = "training objective"},
    TRAIN_OTHER("pgd", "a table of pgd options", "objective pgd's options (srgeo.train.attack's)"),
    TRAIN_OTHER("gaussian", "a table of gaussian options", "objective gaussian's options (sigma, clip)"),
    TRAIN_OTHER("llr", "a table of llr options", "objective llr's options"),
    {.name = "blur", .type = SR_OPT_NUM, .lo = 0, .hi = 1e4, .def = 0, .def_text = "none", .offset = TRAIN(blur),
     .help = "Gaussian-blur the training images with this sigma (pixels)"},
    {.name = "blur_test", .type = SR_OPT_BOOL, .def = 0, .offset = TRAIN(blur_test), .help = "blur the test set too"},
    TRAIN_OTHER("checkpoints", "\"log\", \"none\" or a list of steps", "when to checkpoint"),
    {.name = "per_decade", .type = SR_OPT_INT, .lo = 1, .hi = 1000, .def = 4, .offset = TRAIN(per_decade),
     .help = "log-spaced checkpoints per decade of steps"},
    {.name = "epoch_checkpoints", .type = SR_OPT_BOOL, .def = 1, .offset = TRAIN(epoch_checkpoints),
     .help = "also checkpoint at epoch ends"},
    TRAIN_OTHER("out", "a folder", "run folder (checkpoints, log.csv); none: no files"),
    {.name = "seed", .type = SR_OPT_INT, .lo = -INFINITY, .hi = INFINITY, .def = 0, .offset = TRAIN(seed),
     .help = "seed of shuffles, augmentation, attacks, label permutation, noise data"},
    {.name = "resume", .type = SR_OPT_BOOL, .def = 1, .offset = TRAIN(resume),
     .help = "continue from the latest checkpoint in out"},
    {.name = "eval_train", .type = SR_OPT_INT, .lo = 1, .hi = 1e12, .flags = SR_OPT_FALSE_NONE, .def = 5000,
     .offset = TRAIN(eval_train), .help = "train-accuracy subset at each checkpoint (false: none)"},
    {.name = "eval_test", .type = SR_OPT_INT, .lo = 1, .hi = 1e12, .def = 0, .def_text = "all",
     .offset = TRAIN(eval_test), .help = "test-accuracy subset"},
    {.name = "eval_batch", .type = SR_OPT_INT, .lo = 1, .hi = 1e7, .def = 256, .offset = TRAIN(eval_batch),
     .help = "evaluation batch size"},
    {.name = "eval_every", .type = SR_OPT_INT, .lo = 1, .hi = 1e12, .def = 0, .def_text = "none",
     .offset = TRAIN(eval_every), .help = "extra evaluations every N steps"},
    {.name = "log_every", .type = SR_OPT_INT, .lo = 1, .hi = 1e12, .def = 50, .offset = TRAIN(log_every),
     .help = "log interval in steps"},
    TRAIN_OTHER("progress", "true, false or \"lines\"", "progress display (default: a line on a terminal)"),
    {.name = "keep_optim", .type = SR_OPT_CHOICE, .choices = keep_optims, .offset = TRAIN(keep_optim),
     .help = "optimiser files kept (latest: only the newest)"},
    {.name = "stop_at", .type = SR_OPT_INT, .lo = 0, .hi = 1e12, .def = -1, .def_text = "the end",
     .offset = TRAIN(stop_at), .help = "stop after this many steps of the planned run (resume later)"},
    {.name = "drop_last", .type = SR_OPT_BOOL, .def = 0, .offset = TRAIN(drop_last),
     .help = "drop the last partial batch of each epoch"},
    {.name = "threads", .type = SR_OPT_INT, .lo = 1, .hi = 4096, .def = 0, .def_text = "as set",
     .offset = TRAIN(threads), .help = "threads for the run"},
    {.name = "sync_bn", .type = SR_OPT_BOOL, .def = 0, .offset = TRAIN(sync_bn),
     .help = "under mpirun: BatchNorm's batch statistics over the whole batch, not each rank's shard"},
    {.name = "overlap", .type = SR_OPT_BOOL, .def = 0, .offset = TRAIN(overlap),
     .help = "under mpirun: sum each bucket of gradients while backward goes on, not after it (same bits)"},
    {.name = "bucket", .type = SR_OPT_INT, .lo = 1, .hi = 1e15, .def = SR_GRAD_BUCKET, .offset = TRAIN(bucket),
     .help = "under mpirun: gradient values per sum"},
    TRAIN_OTHER("name", "a string", "model name (recorded in the metadata)"),
    TRAIN_OTHER("command", "a string", "the command line (recorded in the metadata)"),
    TRAIN_OTHER("on_checkpoint", "a function", "called with (entry, model) after each checkpoint"),
    TRAIN_OTHER("on_log", "a function", "called with each log row"),
    {.name = NULL},
};
#undef TRAIN
#undef TRAIN_OTHER

#endif
