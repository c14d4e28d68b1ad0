/* module.c - module lifetime, tree walks, run drivers and the containers
 * (sequential, residual, identity). */
#include "nn/module.h"

#include "nn/layers.h"

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
        return NULL;
    }
    p->trainable = trainable;
    m->nparams++;
    return p;
}

int sr_module_add_child(sr_module *m, const char *name, sr_module *child)
{
    sr_child *c = realloc(m->children, (size_t)(m->nchildren + 1) * sizeof *c);
    if (!c)
        return sr_fail("%s: out of memory", m->ops->kind);
    m->children = c;
    if (!(c[m->nchildren].name = strdup(name ? name : "")))
        return sr_fail("%s: out of memory", m->ops->kind);
    sr_module_retain(child);
    c[m->nchildren].m = child;
    m->nchildren++;
    return 0;
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
 * only (a run struct may outlive the model it first ran): pass_begin says
 * whether this call is that one, pass_end takes the pool back. */
static int pass_begin(sr_module *m, sr_run *run)
{
    int root = !run->pool && !run->unpooled;
    if (root)
        run->pool = &m->pool;
    return root;
}

static void pass_end(sr_run *run, int root)
{
    if (root)
        run->pool = NULL;
}

/* Run one op. */
static int run_op(sr_module *m, const sr_tensor *x, sr_run *run,
                  int (*op)(sr_module *, const sr_tensor *, sr_run *))
{
    int root = pass_begin(m, run), rc = op(m, x, run);
    pass_end(run, root);
    return rc;
}

/* After forward or jvp: keep the output's shape (the buffer may go back to
 * a pool) and record taps. */
static void ran(sr_module *m, sr_run *run)
{
    m->out_ndim = m->out.ndim;
    memcpy(m->out_shape, m->out.shape, sizeof m->out_shape);
    m->out_dtype = m->out.dtype;
    sr_run_record(run, m);
}

int sr_module_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    if (sr_interrupted() || sr_module_check_dtype(m, x))
        return -1;
    if (run_op(m, x, run, m->ops->forward))
        return -1;
    ran(m, run);
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
    if (sr_interrupted() || sr_module_check_dtype(m, xv))
        return -1;
    if (!m->ops->jvp)
        return sr_fail("%s: jvp is not implemented", m->ops->kind);
    if (sr_run_check_stacked(m, xv, run))
        return -1;
    if (run_op(m, xv, run, m->ops->jvp))
        return -1;
    ran(m, run);
    return 0;
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

int sr_module_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    if (sr_interrupted())
        return -1;
    if (!m->ops->backward)
        return sr_fail("%s: backward is not implemented", m->ops->kind);
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
    return run_op(m, gy, run, backward_op);
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
    if (!sr_module_find(m, path))
        return sr_fail_context("alias %s", name);
    char *p = strdup(path);
    if (!p)
        return sr_fail("alias: out of memory");
    for (int i = 0; i < m->naliases; i++)
        if (strcmp(m->alias_names[i], name) == 0) {
            free(m->alias_paths[i]);
            m->alias_paths[i] = p;
            return 0;
        }
    char **n = realloc(m->alias_names, (size_t)(m->naliases + 1) * sizeof *n);
    if (n)
        m->alias_names = n;
    char **q = realloc(m->alias_paths, (size_t)(m->naliases + 1) * sizeof *q);
    if (q)
        m->alias_paths = q;
    char *nm = strdup(name);
    if (!n || !q || !nm) {
        free(p);
        free(nm);
        return sr_fail("alias: out of memory");
    }
    m->alias_names[m->naliases] = nm;
    m->alias_paths[m->naliases] = p;
    m->naliases++;
    return 0;
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

/* --- sequential -------------------------------------------------------- */
/* Called on each child once its output has been consumed: the subtree's
 * outputs go back to the pass's pool, so peak memory is a few live
 * activations rather than all of them.  Taps, ReLU records, the caller and,
 * in a pass that saves for backward, the consumers' m->saved hold
 * references of their own, which keep those buffers out of the pool: a
 * saving pass thus holds what backward reads and nothing else (a
 * BatchNorm output once the ReLU after it has saved its own output). */
static void drop_outputs(sr_module *m, sr_run *run)
{
    sr_pool_put(run->pool, &m->out);
    for (int i = 0; i < m->nchildren; i++)
        drop_outputs(m->children[i].m, run);
}

/* Backward's counterpart, once a child's input gradient has been read.
 * After a module's backward only its own m->gin holds a gradient of its
 * subtree (containers give their children's back), so no walk is needed. */
static void drop_grad(sr_module *m, sr_run *run) { sr_pool_put(run->pool, &m->gin); }

/* Inference fusion.  In a plain forward or stacked JVP (nothing saved for
 * backward, no ReLU records), a sequential runs conv2d -> batchnorm2d
 * (eval) [-> relu] as one convolution that maps each output block while it
 * is still in cache (a JVP's tangents are then masked in one pass), and in
 * a forward residual -> relu as a sum that clips, itself done in the map of
 * the body's last conv -> batchnorm when the body ends with one (res_run):
 * one to three passes over the activation fewer,
 * with bit-identical results (epilogue.h).  The
 * intermediate outputs are never materialised, so a tap on any but the last
 * layer of the group turns it off.  ResNet-50 at 224, batch 17, 2 threads:
 * the forward went 2.43 -> 2.23 s. */
static int is_kind(const sr_module *m, const char *kind) { return strcmp(m->ops->kind, kind) == 0; }

static int tapped(const sr_run *run, const sr_module *m)
{
    for (int i = 0; i < run->ntaps; i++)
        if (run->taps[i] == m)
            return 1;
    return 0;
}

/* How many children from i one fused op covers (0: none applies); fills ep
 * (for a residual only ep->relu: the sum has no affine part). */
static int fusable(sr_module *m, int i, const sr_run *run, int jvp, sr_epilogue *ep)
{
    sr_module *c = m->children[i].m, *next = i + 1 < m->nchildren ? m->children[i + 1].m : NULL;
    if (run->save || run->record_relu || run->unfused || !next || tapped(run, c))
        return 0;
    int n;
    if (is_kind(c, "conv2d") && !tapped(run, next) && sr_batchnorm2d_epilogue(next, ep) &&
        c->params[0].value.ndim == 4 && c->params[0].value.shape[0] == ep->C)
        n = 2;
    else if (is_kind(c, "residual") && !jvp)
        *ep = (sr_epilogue){0}, n = 1;
    else
        return 0;
    if (i + n < m->nchildren && is_kind(m->children[i + n].m, "relu"))
        ep->relu = 1, n++;
    return n > 1 ? n : 0;
}

static int res_run(sr_module *m, const sr_tensor *x, sr_run *run, int jvp, int relu);

/* Run children [i, i + n) fused; the result becomes the last one's output.
 * Returns the number of children run: 1 when the pass stopped at a tap
 * inside the residual (before its sum), else n; -1 on error. */
static int run_fused(sr_module *m, int i, int n, const sr_epilogue *ep, const sr_tensor *x, sr_run *run,
                     int jvp)
{
    sr_module *first = m->children[i].m, *last = m->children[i + n - 1].m;
    int rc = is_kind(first, "conv2d") ? sr_conv2d_run_mapped(first, x, jvp, ep, run)
                                      : sr_module_check_dtype(first, x) || res_run(first, x, run, 0, ep->relu);
    if (rc)
        return -1;
    if (run->stopped) {
        ran(first, run);
        return 1;
    }
    sr_tensor_share(&last->out, &first->out);
    for (int j = i; j < i + n - 1; j++)
        sr_pool_put(run->pool, &m->children[j].m->out);
    for (int j = i; j < i + n; j++) {
        sr_module *c = m->children[j].m;
        c->out_ndim = last->out.ndim;
        memcpy(c->out_shape, last->out.shape, sizeof c->out_shape);
        c->out_dtype = last->out.dtype;
    }
    sr_run_record(run, last);
    run->nfused++;
    return n;
}

/* Children [first, n) on x (child first − 1's output when first > 0). */
static int seq_run(sr_module *m, int first, const sr_tensor *x, sr_run *run, int jvp)
{
    /* Drop our view of the last child's output first, so that child can
     * reuse its buffer instead of allocating a new one. */
    sr_pool_put(run->pool, &m->out);
    const sr_tensor *cur = x, *addend = run->addend; /* ours, not a nested sequential's */
    run->addend = NULL;
    for (int i = first, n; i < m->nchildren; i += n) {
        sr_module *c = m->children[i].m;
        /* A later view child (flatten, identity) still holds this child's
         * last output; drop that view so the child can reuse its buffer. */
        for (int j = i + 1; j < m->nchildren && c->out.storage; j++)
            if (m->children[j].m->out.storage == c->out.storage)
                sr_tensor_free(&m->children[j].m->out);
        sr_epilogue ep;
        n = fusable(m, i, run, jvp, &ep);
        /* The residual's sum in the last conv -> batchnorm map (ReLU after it). */
        if (addend && n == 2 && i + n == m->nchildren && is_kind(c, "conv2d")) {
            ep.add = addend, ep.relu = 1;
            run->addend_used = 1;
        }
        if (n)
            n = run_fused(m, i, n, &ep, cur, run, jvp);
        else
            n = (jvp ? sr_module_jvp(c, cur, run) : sr_module_forward(c, cur, run)) ? -1 : 1;
        if (n < 0)
            return sr_fail_context("%s", *m->children[i].name ? m->children[i].name : c->ops->kind);
        if (i > 0)
            drop_outputs(m->children[i - 1].m, run);
        cur = &m->children[i + n - 1].m->out;
        if (run->stopped) {
            m->stop_at = i + n - 1;
            break;
        }
    }
    if (!run->stopped)
        m->stop_at = -1;
    sr_tensor_share(&m->out, cur);
    return 0;
}

static int seq_forward(sr_module *m, const sr_tensor *x, sr_run *run) { return seq_run(m, 0, x, run, 0); }
static int seq_jvp(sr_module *m, const sr_tensor *x, sr_run *run) { return seq_run(m, 0, x, run, 1); }

static int seq_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    const sr_tensor *g = gy;
    sr_pool_put(run->pool, &m->gin);
    int last = m->stop_at >= 0 ? m->stop_at : m->nchildren - 1;
    for (int i = last; i >= 0; i--) {
        sr_module *c = m->children[i].m;
        if (sr_module_backward(c, g, run))
            return sr_fail_context("%s", *m->children[i].name ? m->children[i].name : c->ops->kind);
        if (i < last)
            drop_grad(m->children[i + 1].m, run);
        g = &c->gin;
    }
    sr_tensor_share(&m->gin, g);
    if (last >= 0)
        drop_grad(m->children[0].m, run);
    return 0;
}

static const sr_module_ops seq_ops = {"sequential", seq_forward, seq_jvp, seq_backward, NULL, NULL, NULL};
sr_module *sr_sequential_new(void) { return sr_module_new(&seq_ops, 0); }

int sr_sequential_forward_from(sr_module *m, int first, const sr_tensor *x, sr_run *run)
{
    if (m->ops != &seq_ops || first < 0 || first >= m->nchildren)
        return sr_fail("forward from child %d: needs a sequential with more children (got %s with %d)", first,
                       m->ops->kind, m->nchildren);
    if (sr_interrupted() || sr_module_check_dtype(m, x))
        return -1;
    int root = pass_begin(m, run), rc = seq_run(m, first, x, run, 0);
    pass_end(run, root);
    if (rc)
        return -1;
    ran(m, run);
    return 0;
}

/* Leaf layers whose map is affine in eval mode (BatchNorm's batch
 * statistics couple the rows in training). */
static const char *const affine_kinds[] = {
    "identity", "linear", "conv2d", "batchnorm2d", "avgpool2d", "adaptive_avgpool2d", "flatten", "permute",
    "normalize", "to_tokens", "token_select", "layer_scale", "cls_pos", NULL,
};

int sr_module_is_affine(const sr_module *m)
{
    for (const char *const *k = affine_kinds; *k; k++)
        if (is_kind(m, *k))
            return !(is_kind(m, "batchnorm2d") && m->training);
    return 0;
}

int sr_sequential_affine_prefix(const sr_module *m)
{
    int n = 0;
    while (m->ops == &seq_ops && n < m->nchildren - 1 && sr_module_is_affine(m->children[n].m))
        n++;
    return n;
}

/* --- residual ---------------------------------------------------------- */
/* out = body(x) + shortcut(x) (or + x).  Stacked jvp works unchanged since
 * the sum is linear. */
/* out = a + b, clipped at 0 when relu (the ReLU kernel's own expression). */
static int add_into(sr_pool *pool, sr_tensor *out, const sr_tensor *a, const sr_tensor *b, int relu,
                    const char *op)
{
    if (!sr_same_shape(a, b))
        return sr_fail("%s: branch outputs %s and %s differ in shape", op, SR_SHAPE(a), SR_SHAPE(b));
    if (sr_pool_ensure_like(pool, out, a))
        return -1;
    sr_add_relu(a->dtype, sr_data(out), sr_data(a), sr_data(b), sr_numel(a), relu);
    return 0;
}

/* relu (forward only): the ReLU after the block fused in (see fusable).
 * The shortcut runs first, so that in a fused forward the body's last
 * conv -> batchnorm can add it and clip in its output map (run->addend); a
 * body that cannot (other final layers, a tap there, a pass that saves)
 * leaves the sum to add_into. */
static int res_run(sr_module *m, const sr_tensor *x, sr_run *run, int jvp, int relu)
{
    if (m->nchildren < 1 || m->nchildren > 2)
        return sr_fail("residual: needs a body and at most one shortcut (has %d children)", m->nchildren);
    sr_module *body = m->children[0].m, *sc = m->nchildren == 2 ? m->children[1].m : NULL;
    m->stop_at = -1;
    if (sc && (jvp ? sr_module_jvp(sc, x, run) : sr_module_forward(sc, x, run)))
        return -1;
    if (run->stopped) {
        m->stop_at = 1;
        sr_tensor_share(&m->out, &sc->out);
        return 0;
    }
    const sr_tensor *skip = sc ? &sc->out : x;
    run->addend = relu ? skip : NULL, run->addend_used = 0;
    int rc = jvp ? sr_module_jvp(body, x, run) : sr_module_forward(body, x, run), summed = run->addend_used;
    run->addend = NULL, run->addend_used = 0;
    if (rc)
        return -1;
    if (run->stopped) {
        m->stop_at = 0;
        sr_tensor_share(&m->out, &body->out);
        return 0;
    }
    if (summed)
        sr_tensor_share(&m->out, &body->out);
    else if (add_into(run->pool, &m->out, &body->out, skip, relu, "residual"))
        return -1;
    /* Backward reads neither branch's output (see drop_outputs). */
    for (int i = 0; i < m->nchildren; i++)
        drop_outputs(m->children[i].m, run);
    return 0;
}

static int res_forward(sr_module *m, const sr_tensor *x, sr_run *run) { return res_run(m, x, run, 0, 0); }
static int res_jvp(sr_module *m, const sr_tensor *x, sr_run *run) { return res_run(m, x, run, 1, 0); }

static int res_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    /* Stopped at a tap inside one branch: the gradient flows through it alone. */
    if (m->stop_at >= 0) {
        sr_module *c = m->children[m->stop_at].m;
        if (sr_module_backward(c, gy, run))
            return -1;
        sr_tensor_share(&m->gin, &c->gin);
        drop_grad(c, run);
        return 0;
    }
    sr_module *body = m->children[0].m, *sc = m->nchildren == 2 ? m->children[1].m : NULL;
    if (sr_module_backward(body, gy, run) || (sc && sr_module_backward(sc, gy, run)))
        return -1;
    int rc = add_into(run->pool, &m->gin, &body->gin, sc ? &sc->gin : gy, 0, "residual backward");
    drop_grad(body, run);
    if (sc)
        drop_grad(sc, run);
    return rc;
}

static const sr_module_ops res_ops = {"residual", res_forward, res_jvp, res_backward, NULL, NULL, NULL};
sr_module *sr_residual_new(void) { return sr_module_new(&res_ops, 0); }

/* --- identity ---------------------------------------------------------- */
static int id_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    (void)run;
    sr_tensor_share(&m->out, x);
    return 0;
}

static int id_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    (void)run;
    sr_tensor_share(&m->gin, gy);
    return 0;
}

static const sr_module_ops id_ops = {"identity", id_forward, id_forward, id_backward, NULL, NULL, NULL};
sr_module *sr_identity_new(void) { return sr_module_new(&id_ops, 0); }
