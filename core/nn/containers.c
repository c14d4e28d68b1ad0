/* containers.c - the modules made of others: sequential (children in
 * order, with inference fusion), residual (body + shortcut) and identity.
 * They know their children only through the ops table (module.h): what
 * fuses, what is affine, what is a ReLU comes from the children's hooks
 * and flags, never from their kind. */
#include <string.h>

#include "nn/module.h"

/* --- sequential -------------------------------------------------------- */
/* Called on each child once its output has been consumed: the subtree's
 * outputs go back to the pass's pool, so peak memory is a few live
 * activations rather than all of them.  Taps, ReLU records, the caller and,
 * in a pass that saves for backward, the consumers' m->saved hold
 * references of their own, which keep those buffers out of the pool: a
 * saving pass thus holds what backward reads and nothing else (a
 * BatchNorm output once the ReLU after it has saved its own output). */
void sr_module_drop_outputs(sr_module *m, sr_run *run)
{
    sr_pool_put(run->pool, &m->out);
    for (int i = 0; i < m->nchildren; i++)
        sr_module_drop_outputs(m->children[i].m, run);
}

/* Backward's counterpart, once a child's input gradient has been read.
 * After a module's backward only its own m->gin holds a gradient of its
 * subtree (containers give their children's back), so no walk is needed. */
static void drop_grad(sr_module *m, sr_run *run) { sr_pool_put(run->pool, &m->gin); }

/* Inference fusion.  In a plain forward or stacked JVP (nothing saved for
 * backward, no ReLU records), a sequential runs a child that has a
 * run_mapped hook together with the children after it that fold into its
 * output map: conv2d -> batchnorm2d (eval) [-> relu] as one convolution
 * that maps each output block while it is still in cache (a JVP's tangents
 * are then masked in one pass), and in a forward residual -> relu as a sum
 * that clips, itself done in the map of the body's last conv -> batchnorm
 * when the body ends with one (res_run).  Results are bit-identical
 * (kernels/epilogue.h).  The intermediate outputs are never materialised,
 * so a tap on any but the last layer of a group ends the group there. */

/* How many children from i one fused op covers (0: none applies), its map
 * in ep.  addend (a residual's other branch, or NULL) joins the map when
 * the group ends this sequential and has no ReLU yet: the residual's sum,
 * then the ReLU after it; *addend_used says whether it did. */
static int fusable(sr_module *m, int i, const sr_run *run, int jvp, const sr_tensor *addend, sr_epilogue *ep,
                   int *addend_used)
{
    sr_module *c = m->children[i].m;
    *addend_used = 0;
    if (run->save || run->record_relu || run->unfused || !c->ops->run_mapped || sr_run_tapped(run, c))
        return 0;
    *ep = (sr_epilogue){0};
    int j = i + 1;
    for (; j < m->nchildren && !sr_run_tapped(run, m->children[j - 1].m); j++) {
        sr_module *f = m->children[j].m;
        if (!f->ops->fold || !f->ops->fold(f, ep))
            break;
    }
    if (j - i < 2 || !c->ops->maps(c, ep, jvp))
        return 0;
    if (addend && j == m->nchildren && !ep->relu) {
        sr_epilogue with = *ep;
        with.add = addend, with.relu = 1;
        if (c->ops->maps(c, &with, jvp)) {
            *ep = with;
            *addend_used = 1;
        }
    }
    return j - i;
}

/* Run children [i, i + n) fused; the result becomes the last one's output.
 * Returns the number of children run: 1 when the pass stopped at a tap
 * inside the first (a residual, before its sum), else n; -1 on error. */
static int run_fused(sr_module *m, int i, int n, const sr_epilogue *ep, const sr_tensor *x, sr_run *run,
                     int jvp)
{
    sr_module *first = m->children[i].m, *last = m->children[i + n - 1].m;
    if (sr_module_run_mapped(first, x, jvp, ep, run))
        return -1;
    if (run->stopped) {
        sr_module_ran(first, run);
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
        int summed;
        n = fusable(m, i, run, jvp, addend, &ep, &summed);
        if (summed)
            run->addend_used = 1;
        if (n)
            n = run_fused(m, i, n, &ep, cur, run, jvp);
        else
            n = (jvp ? sr_module_jvp(c, cur, run) : sr_module_forward(c, cur, run)) ? -1 : 1;
        if (n < 0)
            return sr_fail_context("%s", *m->children[i].name ? m->children[i].name : c->ops->kind);
        if (i > 0)
            sr_module_drop_outputs(m->children[i - 1].m, run);
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

static int seq_forward_from(sr_module *m, int first, const sr_tensor *x, sr_run *run)
{
    return seq_run(m, first, x, run, 0);
}

static int seq_affine_prefix(const sr_module *m)
{
    int n = 0;
    while (n < m->nchildren - 1 && sr_module_is_affine(m->children[n].m))
        n++;
    return n;
}

static const sr_module_ops seq_ops = {
    .kind = "sequential", .forward = seq_forward, .jvp = seq_jvp, .backward = seq_backward,
    .flags = SR_MOD_COMBINES, .affine_prefix = seq_affine_prefix, .forward_from = seq_forward_from,
};
sr_module *sr_sequential_new(void) { return sr_module_new(&seq_ops, 0); }

int sr_module_forward_from(sr_module *m, int first, const sr_tensor *x, sr_run *run)
{
    if (!m->ops->forward_from || first < 1 || first >= m->nchildren)
        return sr_fail("forward from child %d: needs a sequential or graph with more children (got %s with %d)",
                       first, m->ops->kind, m->nchildren);
    if (sr_interrupted() || sr_module_check_dtype(m, x))
        return -1;
    int root = sr_run_begin(m, run), rc = m->ops->forward_from(m, first, x, run);
    sr_run_end(run, root);
    if (rc)
        return -1;
    sr_module_ran(m, run);
    return 0;
}

int sr_module_affine_prefix(const sr_module *m) { return m->ops->affine_prefix ? m->ops->affine_prefix(m) : 0; }

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
    /* Backward reads neither branch's output (see sr_module_drop_outputs). */
    for (int i = 0; i < m->nchildren; i++)
        sr_module_drop_outputs(m->children[i].m, run);
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

/* A residual maps its output by the ReLU alone (the sum has no affine
 * part to fold into), and only in a forward: then the body's last
 * conv -> batchnorm can take the sum into its own map. */
static int res_maps(const sr_module *m, const sr_epilogue *e, int jvp)
{
    (void)m;
    return !jvp && !e->C && !e->add && e->relu;
}

static int res_mapped(sr_module *m, const sr_tensor *x, int jvp, const sr_epilogue *e, sr_run *run)
{
    return res_run(m, x, run, jvp, e->relu);
}

static const sr_module_ops res_ops = {
    .kind = "residual", .forward = res_forward, .jvp = res_jvp, .backward = res_backward,
    .flags = SR_MOD_COMBINES, .maps = res_maps, .run_mapped = res_mapped,
};
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

static const sr_module_ops id_ops = {
    .kind = "identity", .forward = id_forward, .jvp = id_forward, .backward = id_backward,
    .is_affine = sr_module_affine_always
};
sr_module *sr_identity_new(void) { return sr_module_new(&id_ops, 0); }
