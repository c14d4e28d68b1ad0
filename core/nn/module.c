/* module.c - the module tree: lifetime, parameters, run drivers and the
 * pass's buffer pool, tree walks and lookups.  The containers built on it
 * are in containers.c, the leaf layers in their own files. */
#include "nn/module.h"

#include "base/strmap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- construction ------------------------------------------------------ */
sr_module *sr_module_new(const sr_module_ops *ops, size_t impl_size)
{
    sr_module *m = calloc(1, sizeof *m);
    if (!m) {
        sr_fail("%s: out of memory", ops->kind);
        return NULL;
    }
    if (impl_size && !(m->impl = calloc(1, impl_size))) {
        free(m);
        sr_fail("%s: out of memory", ops->kind);
        return NULL;
    }
    m->ops = ops;
    m->refcount = 1;
    m->stop_at = -1;
    m->dtype = SR_F32;
    return m;
}

void sr_module_retain(sr_module *m) { m->refcount++; }

void sr_module_release(sr_module *m)
{
    if (!m || --m->refcount > 0)
        return;
    if (m->ops->free_impl)
        m->ops->free_impl(m);
    for (int i = 0; i < m->nparams; i++) {
        free(m->params[i].name);
        sr_tensor_free(&m->params[i].value);
        sr_tensor_free(&m->params[i].grad);
    }
    free(m->params);
    for (int i = 0; i < m->nchildren; i++) {
        free(m->children[i].name);
        sr_module_release(m->children[i].m);
    }
    free(m->children);
    sr_tensor_free(&m->out);
    sr_tensor_free(&m->gin);
    sr_tensor_free(&m->saved);
    sr_pool_clear(&m->pool);
    for (int i = 0; i < m->naliases; i++) {
        free(m->alias_names[i]);
        free(m->alias_paths[i]);
    }
    free(m->alias_names);
    free(m->alias_paths);
    free(m->default_tap);
    free(m->impl);
    free(m);
}

sr_param *sr_module_add_param(sr_module *m, const char *name, int ndim, const int64_t *shape,
                              int trainable)
{
    sr_param *p = realloc(m->params, (size_t)(m->nparams + 1) * sizeof *p);
    if (!p) {
        sr_fail("%s: out of memory", m->ops->kind);
        return NULL;
    }
    m->params = p;
    p = &m->params[m->nparams];
    memset(p, 0, sizeof *p);
    if (!(p->name = strdup(name))) {
        sr_fail("%s: out of memory", m->ops->kind);
        return NULL;
    }
    if (sr_tensor_zeros(&p->value, m->dtype, ndim, shape)) {
        free(p->name);
        sr_fail_context("%s: parameter %s", m->ops->kind, name);
        return NULL;
    }
    p->trainable = trainable;
    m->nparams++;
    return p;
}

const char *sr_param_role_name(int role)
{
    static const char *const names[] = {"", "scale", "shift", "embedding", "token", "slope"};
    return role > 0 && role < (int)(sizeof names / sizeof *names) ? names[role] : "";
}

int sr_module_add_child(sr_module *m, const char *name, sr_module *child)
{
    /* grown by doubling (the capacity is the next power of two, at least 4):
     * a graph of 10^5 nodes adds them one by one */
    int n = m->nchildren;
    sr_child *c = m->children;
    if (n == 0 || (n >= 4 && !(n & (n - 1)))) {
        c = realloc(m->children, (size_t)(n < 4 ? 4 : 2 * n) * sizeof *c);
        if (!c)
            return sr_fail("%s: out of memory", m->ops->kind);
        m->children = c;
    }
    if (!(c[m->nchildren].name = strdup(name ? name : "")))
        return sr_fail("%s: out of memory", m->ops->kind);
    sr_module_retain(child);
    c[m->nchildren].m = child;
    m->nchildren++;
    return 0;
}

void *sr_param_grad(sr_module *m, sr_param *p)
{
    if (!p->grad.storage && sr_tensor_zeros(&p->grad, m->dtype, p->value.ndim, p->value.shape))
        return NULL;
    return sr_data(&p->grad);
}

sr_param *sr_module_local_param(const sr_module *m, const char *name)
{
    for (int i = 0; i < m->nparams; i++)
        if (strcmp(m->params[i].name, name) == 0)
            return &m->params[i];
    return NULL;
}

/* --- running ----------------------------------------------------------- */
int sr_module_check_dtype(const sr_module *m, const sr_tensor *x)
{
    if (!x->storage)
        return sr_fail("%s: input is an empty tensor", m->ops->kind);
    if (m->nparams && x->dtype != m->dtype)
        return sr_fail("%s: input is %s but the parameters are %s (use :double() or :float())",
                       m->ops->kind, sr_dtype_name(x->dtype), sr_dtype_name(m->dtype));
    return 0;
}

void sr_run_record(sr_run *run, const sr_module *child)
{
    for (int i = 0; i < run->ntaps; i++) {
        if (run->taps[i] == child && !run->tap_out[i].storage) {
            sr_tensor_share(&run->tap_out[i], &child->out);
            run->ntaps_done++;
        }
    }
    if (run->stop_after_taps && run->ntaps && run->ntaps_done >= run->ntaps)
        run->stopped = 1;
}

int sr_run_tapped(const sr_run *run, const sr_module *m)
{
    for (int i = 0; i < run->ntaps; i++)
        if (run->taps[i] == m)
            return 1;
    return 0;
}

void sr_run_clear(sr_run *run)
{
    for (int i = 0; i < run->ntaps; i++)
        sr_tensor_free(&run->tap_out[i]);
    run->ntaps_done = 0;
    run->stopped = 0;
}

int sr_module_output(sr_module *m, sr_run *run, sr_dtype dtype, int ndim, const int64_t *shape)
{
    return sr_pool_ensure(run->pool, &m->out, dtype, ndim, shape);
}

int sr_module_output_like(sr_module *m, sr_run *run, const sr_tensor *like)
{
    return sr_pool_ensure_like(run->pool, &m->out, like);
}

int sr_module_grad_input(sr_module *m, sr_run *run, sr_dtype dtype, int ndim, const int64_t *shape)
{
    return sr_pool_ensure(run->pool, &m->gin, dtype, ndim, shape);
}

int sr_module_grad_input_like(sr_module *m, sr_run *run, const sr_tensor *like)
{
    return sr_pool_ensure_like(run->pool, &m->gin, like);
}

/* The call that starts a pass lends it this module's pool for its duration
 * only (a run struct may outlive the model it first ran): sr_run_begin says
 * whether this call is that one, sr_run_end takes the pool back. */
int sr_run_begin(sr_module *m, sr_run *run)
{
    int root = !run->pool && !run->unpooled;
    if (root)
        run->pool = &m->pool;
    return root;
}

void sr_run_end(sr_run *run, int root)
{
    if (root) {
        sr_pool_pass_end(run->pool); /* the pool's bounds (tensor/tensor.h) */
        run->pool = NULL;
    }
}

void sr_run_tap(sr_run *run, const sr_module *const *taps, sr_tensor *out)
{
    if (taps[0]) {
        run->ntaps = 1;
        run->taps = taps;
        run->tap_out = out;
        run->stop_after_taps = 1;
    }
}

/* Run one op. */
static int run_op(sr_module *m, const sr_tensor *x, sr_run *run,
                  int (*op)(sr_module *, const sr_tensor *, sr_run *))
{
    int root = sr_run_begin(m, run), rc = op(m, x, run);
    sr_run_end(run, root);
    return rc;
}

void sr_module_ran(sr_module *m, sr_run *run)
{
    m->out_ndim = m->out.ndim;
    memcpy(m->out_shape, m->out.shape, sizeof m->out_shape);
    m->out_dtype = m->out.dtype;
    sr_run_record(run, m);
}

/* The checks every entry point makes before it runs an op. */
static int check_input(sr_module *m, const sr_tensor *x, sr_run *run, int jvp)
{
    if (sr_interrupted() || sr_module_check_dtype(m, x))
        return -1;
    if (!jvp && run->save && !run->single_use_checked) {
        run->single_use_checked = 1;
        if (sr_module_check_single_use(m))
            return -1;
    }
    if (jvp && !m->ops->jvp && !m->ops->jvp_n)
        return sr_fail("%s: jvp is not implemented", m->ops->kind);
    return jvp ? sr_run_check_stacked(m, x, run) : 0;
}

int sr_module_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    if (check_input(m, x, run, 0))
        return -1;
    if (run_op(m, x, run, m->ops->forward))
        return -1;
    sr_module_ran(m, run);
    return 0;
}

int sr_run_check_stacked(const sr_module *m, const sr_tensor *xv, const sr_run *run)
{
    if (run->k < 1 || xv->ndim < 1 || xv->shape[0] != run->n * (1 + run->k))
        return sr_fail("%s jvp: input %s does not hold %lld primal rows plus %lld tangents each",
                       m->ops->kind, SR_SHAPE(xv), (long long)run->n, (long long)run->k);
    return 0;
}

int sr_module_jvp(sr_module *m, const sr_tensor *xv, sr_run *run)
{
    if (check_input(m, xv, run, 1))
        return -1;
    if (run_op(m, xv, run, m->ops->jvp))
        return -1;
    sr_module_ran(m, run);
    return 0;
}

int sr_module_run_mapped(sr_module *m, const sr_tensor *x, int jvp, const sr_epilogue *e, sr_run *run)
{
    if (!m->ops->run_mapped)
        return sr_fail("%s: cannot run with a fused output map", m->ops->kind);
    if (check_input(m, x, run, jvp))
        return -1;
    int root = sr_run_begin(m, run), rc = m->ops->run_mapped(m, x, jvp, e, run);
    sr_run_end(run, root);
    return rc;
}

/* Backward consumes what forward saved.  A reference of our own makes it
 * go to the pass's pool (for the next step to reuse) rather than to free(),
 * whether or not the op has already released m->saved. */
static int backward_op(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    sr_tensor saved = SR_TENSOR_INIT;
    sr_tensor_share(&saved, &m->saved);
    int rc = m->ops->backward(m, gy, run);
    sr_pool_put(run->pool, &m->saved);
    sr_pool_put(run->pool, &saved);
    return rc;
}

/* The checks before a backward: a forward was recorded and gy fits it. */
static int check_grad(const sr_module *m, const sr_tensor *gy)
{
    if (sr_interrupted())
        return -1;
    /* The output buffer itself may be back in a pool: check its record. */
    if (!m->out_ndim)
        return sr_fail("%s backward: no forward pass recorded (run forward with save first)",
                       m->ops->kind);
    sr_tensor out = {m->out_dtype, m->out_ndim, {0}, 0, NULL};
    memcpy(out.shape, m->out_shape, sizeof out.shape);
    if (!sr_same_shape(gy, &out))
        return sr_fail("%s backward: gradient %s does not match output %s", m->ops->kind,
                       SR_SHAPE(gy), SR_SHAPE(&out));
    if (gy->dtype != out.dtype)
        return sr_fail("%s backward: gradient is %s, output %s", m->ops->kind,
                       sr_dtype_name(gy->dtype), sr_dtype_name(out.dtype));
    return 0;
}

static int grads_final(const sr_module *m, sr_run *run)
{
    return run->param_grads && run->grads_final ? run->grads_final(m, run->grads_ctx) : 0;
}

int sr_module_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    if (!m->ops->backward)
        return sr_fail("%s: backward is not implemented", m->ops->kind);
    if (check_grad(m, gy))
        return -1;
    if (run_op(m, gy, run, backward_op))
        return -1;
    return grads_final(m, run);
}

/* --- several inputs ------------------------------------------------------ */
int sr_module_arity(const sr_module *m) { return m->ops->arity ? m->ops->arity(m) : 1; }

static int check_arity(const sr_module *m, int nin)
{
    int a = sr_module_arity(m);
    if (nin < 1 || (a >= 0 && nin != a))
        return sr_fail("%s: takes %d input%s, given %d", m->ops->kind, a, a == 1 ? "" : "s", nin);
    return 0;
}

static int run_n(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run, int jvp)
{
    if (check_arity(m, nin))
        return -1;
    int (*op)(sr_module *, int, const sr_tensor *const *, sr_run *) = jvp ? m->ops->jvp_n : m->ops->forward_n;
    if (!op) {
        if (nin == 1)
            return jvp ? sr_module_jvp(m, x[0], run) : sr_module_forward(m, x[0], run);
        return sr_fail("%s: cannot take %d inputs", m->ops->kind, nin);
    }
    for (int i = 0; i < nin; i++) {
        if (check_input(m, x[i], run, jvp))
            return sr_fail_context("input %d", i + 1);
        if (x[i]->dtype != x[0]->dtype)
            return sr_fail("%s: input 1 is %s, input %d %s", m->ops->kind, sr_dtype_name(x[0]->dtype), i + 1,
                           sr_dtype_name(x[i]->dtype));
    }
    int root = sr_run_begin(m, run), rc = op(m, nin, x, run);
    sr_run_end(run, root);
    if (rc)
        return -1;
    sr_module_ran(m, run);
    return 0;
}

int sr_module_forward_n(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run)
{
    return run_n(m, nin, x, run, 0);
}

int sr_module_jvp_n(sr_module *m, int nin, const sr_tensor *const *xv, sr_run *run)
{
    return run_n(m, nin, xv, run, 1);
}

int sr_module_backward_n(sr_module *m, const sr_tensor *gy, int nin, sr_tensor *gin, sr_run *run)
{
    if (check_arity(m, nin))
        return -1;
    if (!m->ops->backward_n) {
        if (nin != 1 || sr_module_backward(m, gy, run))
            return nin != 1 ? sr_fail("%s: cannot take %d inputs", m->ops->kind, nin) : -1;
        sr_tensor_share(&gin[0], &m->gin);
        return 0;
    }
    if (check_grad(m, gy))
        return -1;
    int root = sr_run_begin(m, run), rc = m->ops->backward_n(m, gy, nin, gin, run);
    sr_run_end(run, root);
    return rc ? rc : grads_final(m, run);
}

/* --- tree utilities ---------------------------------------------------- */
void sr_module_set_training(sr_module *m, int training)
{
    m->training = training;
    for (int i = 0; i < m->nchildren; i++)
        sr_module_set_training(m->children[i].m, training);
}

void sr_module_clear_buffers(sr_module *m)
{
    sr_tensor_free(&m->out);
    sr_tensor_free(&m->gin);
    sr_tensor_free(&m->saved);
    sr_pool_clear(&m->pool);
    for (int i = 0; i < m->nchildren; i++)
        sr_module_clear_buffers(m->children[i].m);
}

int sr_module_to_dtype(sr_module *m, sr_dtype dtype)
{
    for (int i = 0; i < m->nparams; i++) {
        sr_param *p = &m->params[i];
        if (p->value.dtype != dtype && sr_tensor_convert(&p->value, &p->value, dtype))
            return -1;
        sr_tensor_free(&p->grad);
    }
    m->dtype = dtype;
    sr_tensor_free(&m->out);
    sr_tensor_free(&m->gin);
    sr_tensor_free(&m->saved);
    sr_pool_clear(&m->pool);
    for (int i = 0; i < m->nchildren; i++)
        if (sr_module_to_dtype(m->children[i].m, dtype))
            return -1;
    return 0;
}

void sr_module_reset(sr_module *m, sr_rng *rng)
{
    if (m->ops->reset)
        m->ops->reset(m, rng);
    for (int i = 0; i < m->nchildren; i++)
        sr_module_reset(m->children[i].m, rng);
}

void sr_module_zero_grad(sr_module *m)
{
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i].grad.storage)
            sr_tensor_fill(&m->params[i].grad, 0);
    for (int i = 0; i < m->nchildren; i++)
        sr_module_zero_grad(m->children[i].m);
}

int64_t sr_module_count_params(const sr_module *m, int recurse, int *ntensors)
{
    int64_t n = 0;
    int nt = 0;
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i].trainable)
            n += sr_numel(&m->params[i].value), nt++;
    for (int i = 0; recurse && i < m->nchildren; i++) {
        int ct;
        n += sr_module_count_params(m->children[i].m, 1, &ct);
        nt += ct;
    }
    if (ntensors)
        *ntensors = nt;
    return n;
}

#define SR_PATHMAX 512

static void join(char *dst, const char *prefix, const char *name)
{
    if (!*prefix)
        snprintf(dst, SR_PATHMAX, "%s", name);
    else if (!*name)
        snprintf(dst, SR_PATHMAX, "%s", prefix);
    else
        snprintf(dst, SR_PATHMAX, "%s.%s", prefix, name);
}

static int walk_params(sr_module *m, const char *prefix, sr_param_visitor fn, void *ud)
{
    char path[SR_PATHMAX];
    for (int i = 0; i < m->nparams; i++) {
        join(path, prefix, m->params[i].name);
        int r = fn(path, &m->params[i], m, ud);
        if (r)
            return r;
    }
    for (int i = 0; i < m->nchildren; i++) {
        join(path, prefix, m->children[i].name);
        int r = walk_params(m->children[i].m, path, fn, ud);
        if (r)
            return r;
    }
    return 0;
}

int sr_module_walk_params(sr_module *m, sr_param_visitor fn, void *ud)
{
    return walk_params(m, "", fn, ud);
}

/* Pointers seen so far (parameters, modules), an open-addressed set: a tree
 * has hundreds at most, but a linear scan per visit would be quadratic. */
typedef struct {
    const void **slot;
    size_t cap, n;
} ptr_set;

static size_t ptr_hash(const void *p, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15u;
    return (size_t)(h >> 32) & (cap - 1);
}

/* Insert p: 1 if it was new, 0 if already there, -1 out of memory. */
static int ptr_set_insert(ptr_set *s, const void *p)
{
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        const void **slot = calloc(cap, sizeof *slot);
        if (!slot)
            return -1;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slot[i])
                continue;
            size_t k = ptr_hash(s->slot[i], cap);
            while (slot[k])
                k = (k + 1) & (cap - 1);
            slot[k] = s->slot[i];
        }
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    size_t k = ptr_hash(p, s->cap);
    for (; s->slot[k]; k = (k + 1) & (s->cap - 1))
        if (s->slot[k] == p)
            return 0;
    s->slot[k] = p;
    s->n++;
    return 1;
}

typedef struct {
    sr_param_visitor fn;
    void *ud;
    ptr_set seen;
    int repeats;
} once_state;

static int once_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    once_state *s = ud;
    int fresh = ptr_set_insert(&s->seen, p);
    if (fresh < 0)
        return sr_fail("%s: out of memory listing parameters", owner->ops->kind);
    if (!fresh) {
        s->repeats++;
        return 0;
    }
    return s->fn(path, p, owner, s->ud);
}

int sr_module_walk_params_once(sr_module *m, sr_param_visitor fn, void *ud, int *repeats)
{
    once_state s = {fn, ud, {NULL, 0, 0}, 0};
    int r = walk_params(m, "", once_cb, &s);
    free(s.seen.slot);
    if (repeats)
        *repeats = s.repeats;
    return r;
}

static int walk(sr_module *m, const char *path, int depth, sr_module_visitor fn, void *ud)
{
    int r = fn(path, m, depth, ud);
    if (r)
        return r;
    char sub[SR_PATHMAX];
    for (int i = 0; i < m->nchildren; i++) {
        join(sub, path, m->children[i].name);
        /* A transparent child sits at its parent's depth in listings. */
        r = walk(m->children[i].m, sub, depth + (*m->children[i].name != 0), fn, ud);
        if (r)
            return r;
    }
    return 0;
}

int sr_module_walk(sr_module *m, sr_module_visitor fn, void *ud) { return walk(m, "", 0, fn, ud); }

/* Only a module with more than one reference can sit in two places (the
 * others are skipped). */
typedef struct {
    ptr_set seen;
    const sr_module *dup;
    char at[SR_PATHMAX], first[SR_PATHMAX];
} single_use_state;

static int single_use_cb(const char *path, sr_module *m, int depth, void *ud)
{
    (void)depth;
    single_use_state *s = ud;
    if (m->refcount < 2)
        return 0;
    int fresh = ptr_set_insert(&s->seen, m);
    if (fresh < 0)
        return sr_fail("%s: out of memory listing modules", m->ops->kind);
    if (!fresh) {
        s->dup = m;
        snprintf(s->at, sizeof s->at, "%s", path);
        return 1;
    }
    return 0;
}

static int first_use_cb(const char *path, sr_module *m, int depth, void *ud)
{
    (void)depth;
    single_use_state *s = ud;
    if (m != s->dup)
        return 0;
    snprintf(s->first, sizeof s->first, "%s", path);
    return 1;
}

int sr_module_check_single_use(sr_module *m)
{
    single_use_state s = {0};
    int r = walk(m, "", 0, single_use_cb, &s);
    free(s.seen.slot);
    if (!s.dup)
        return r;
    walk(m, "", 0, first_use_cb, &s);
    return sr_fail("backward: the %s at '%s' is also at '%s' (one module used twice); backward needs each "
                   "use's saved input and a module keeps one, so a pass that saves for backward (training, "
                   "vjp) cannot run through it: give each use its own module",
                   s.dup->ops->kind, s.first, s.at);
}

typedef struct {
    const char *want;
    sr_param *param;
    sr_module *module;
} find_state;

static int find_param_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)owner;
    find_state *s = ud;
    if (strcmp(path, s->want) == 0) {
        s->param = p;
        return 1;
    }
    return 0;
}

sr_param *sr_module_find_param(sr_module *m, const char *path)
{
    find_state s = {path, NULL, NULL};
    sr_module_walk_params(m, find_param_cb, &s);
    if (!s.param)
        sr_fail("no parameter named '%s'", path);
    return s.param;
}

static int find_module_cb(const char *path, sr_module *m, int depth, void *ud)
{
    (void)depth;
    find_state *s = ud;
    /* The outermost module at a path wins (a transparent child shares its
     * parent's path). */
    if (strcmp(path, s->want) == 0 && !s->module) {
        s->module = m;
        return 1;
    }
    return 0;
}

sr_module *sr_module_find(sr_module *m, const char *path)
{
    for (int i = 0; i < m->naliases; i++)
        if (strcmp(m->alias_names[i], path) == 0) {
            path = m->alias_paths[i];
            break;
        }
    find_state s = {path, NULL, NULL};
    sr_module_walk(m, find_module_cb, &s);
    if (!s.module)
        sr_fail("no module named '%s'", path);
    return s.module;
}

int sr_module_set_alias(sr_module *m, const char *name, const char *path)
{
    return sr_module_set_aliases(m, 1, &name, &path);
}

typedef struct {
    sr_strmap paths; /* every module path of the tree -> 0 */
    char **owned;    /* the path strings */
    size_t n, cap;
    int oom;
} paths_state;

static int collect_path_cb(const char *path, sr_module *m, int depth, void *ud)
{
    (void)m, (void)depth;
    paths_state *s = ud;
    if (sr_strmap_get(&s->paths, path) >= 0)
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        char **o = realloc(s->owned, cap * sizeof *o);
        if (!o)
            return s->oom = 1;
        s->owned = o, s->cap = cap;
    }
    if (!(s->owned[s->n] = strdup(path)) || sr_strmap_put(&s->paths, s->owned[s->n], 0))
        return s->oom = 1;
    s->n++;
    return 0;
}

int sr_module_set_aliases(sr_module *m, int n, const char *const *names, const char *const *paths)
{
    /* One walk lists every path and a map indexes the aliases, so n aliases
     * cost one walk, not n (an imported graph aliases every value). */
    paths_state s = {SR_STRMAP_INIT, NULL, 0, 0, 0};
    sr_strmap alias = SR_STRMAP_INIT;
    int rc = 0;
    sr_module_walk(m, collect_path_cb, &s);
    for (int i = 0; i < m->naliases && !s.oom; i++)
        s.oom = sr_strmap_put(&alias, m->alias_names[i], i) != 0;
    if (s.oom)
        rc = sr_fail("alias: out of memory");
    for (int i = 0; i < n && !rc; i++) {
        if (sr_strmap_get(&s.paths, paths[i]) < 0 && sr_strmap_get(&alias, paths[i]) < 0) {
            rc = sr_fail("alias %s: no module named '%s'", names[i], paths[i]);
            break;
        }
        char *p = strdup(paths[i]), *nm = NULL;
        int at = sr_strmap_get(&alias, names[i]);
        if (p && at >= 0) {
            free(m->alias_paths[at]);
            m->alias_paths[at] = p;
            continue;
        }
        if (p && !(m->naliases & (m->naliases - 1))) { /* doubled at powers of two */
            size_t cap = m->naliases ? 2 * (size_t)m->naliases : 1;
            char **a = realloc(m->alias_names, cap * sizeof *a);
            if (a)
                m->alias_names = a;
            char **b = realloc(m->alias_paths, cap * sizeof *b);
            if (b)
                m->alias_paths = b;
            if (!a || !b)
                free(p), p = NULL;
        }
        if (!p || !(nm = strdup(names[i])) || sr_strmap_put(&alias, nm, m->naliases)) {
            free(p);
            free(nm);
            rc = sr_fail("alias: out of memory");
            break;
        }
        m->alias_names[m->naliases] = nm;
        m->alias_paths[m->naliases] = p;
        m->naliases++;
    }
    for (size_t i = 0; i < s.n; i++)
        free(s.owned[i]);
    free(s.owned);
    sr_strmap_free(&s.paths);
    sr_strmap_free(&alias);
    return rc;
}

int sr_module_set_default_tap(sr_module *m, const char *tap)
{
    if (tap && *tap && !sr_module_find(m, tap))
        return sr_fail_context("default tap");
    char *t = (tap && *tap) ? strdup(tap) : NULL;
    if (tap && *tap && !t)
        return sr_fail("default tap: out of memory");
    free(m->default_tap);
    m->default_tap = t;
    return 0;
}

/* --- properties -------------------------------------------------------- */
int sr_module_affine_always(const sr_module *m)
{
    (void)m;
    return 1;
}

int sr_module_is_affine(const sr_module *m) { return m->ops->is_affine && m->ops->is_affine(m); }
