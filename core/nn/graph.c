/* graph.c - the graph container: a DAG of named nodes, each a module
 * reading earlier values.  Value 0 is the graph's input, value i + 1 the
 * output of node i; a node may only read values that exist when it is
 * added, so the order of addition is a topological order and there are no
 * cycles by construction.  Nodes of several inputs (a sum, a product, a
 * concatenation) run through the modules' _n hooks (module.h).
 *
 * A pass runs the nodes in order.  Each value is given back to the pass's
 * pool once its last consumer has run (as a sequential gives back each
 * child's output), so peak memory is the live values; what backward needs
 * is held by the consumers' saved references.  Backward walks the nodes in
 * reverse, summing the gradients of a value read by several nodes.
 *
 * Inference fusion, as in a sequential (containers.c), asked through the
 * ops table only: in a forward or JVP that saves nothing, a node with a
 * run_mapped hook whose output feeds one node that folds (batchnorm in
 * eval, relu), and so on, runs as one op; in a forward the chain may also
 * end in a sum (SR_MOD_SUM) of its output and another value, taken as the
 * map's addend (then a ReLU after the sum may fold too), which is how a
 * residual block's conv -> batchnorm -> add -> relu runs as one
 * convolution.  The other value is computed first when it is not yet: it
 * cannot depend on the chain, whose values each have one consumer, the
 * next node of the chain.  Results are bit-identical to running the nodes
 * one by one (kernels/epilogue.h).  A tapped node ends a chain. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strmap.h"
#include "nn/module.h"

typedef struct {
    int nin;
    int *in;        /* value ids */
    sr_tensor *gin; /* backward: dL/d of each input */
} graph_node;

typedef struct {
    int n, cap;
    graph_node *nodes; /* node i is child i */
    int output;        /* value the graph returns; -1: the last node's */
    sr_strmap names;   /* node name -> index (the keys are the children's names) */
    /* One pass's state. */
    const sr_tensor *x;
    int *uses;           /* consumers left per value (n + 1) */
    int *consumer;       /* a consumer of each value (the only one when uses is 1) */
    unsigned char *done; /* node has run */
    unsigned char *busy; /* node of a chain waiting for its addend */
    sr_tensor *grad;     /* backward: dL/d value (n + 1) */
    int stop_value;      /* the value a pass stopped at, or -1 */
    int maxin;           /* most inputs of a node: the size of xs */
    const sr_tensor **xs;
    int in_ndim;         /* the last pass's input shape */
    int64_t in_shape[SR_MAXDIM];
    sr_dtype in_dtype;
} graph_impl;

static const sr_module_ops graph_ops;

static int out_value(const graph_impl *g) { return g->output >= 0 ? g->output : g->n; }

static const sr_tensor *value_of(sr_module *m, const graph_impl *g, int v)
{
    return v ? &m->children[v - 1].m->out : g->x;
}

/* Consumers of every value in this pass: each node's reads, plus one for
 * the value returned, which is never given back. */
static void count_uses(graph_impl *g)
{
    memset(g->uses, 0, (size_t)(g->n + 1) * sizeof *g->uses);
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].nin; j++) {
            g->uses[g->nodes[i].in[j]]++;
            g->consumer[g->nodes[i].in[j]] = i;
        }
    g->uses[out_value(g)]++;
    g->consumer[out_value(g)] = -1;
}

/* A fold that sets nothing but the ReLU: the only map that may follow a
 * fused sum (the epilogue adds after its affine part, then clips). */
static int folds_relu_only(sr_module *f)
{
    sr_epilogue t = {0};
    return f->ops->fold && f->ops->fold(f, &t) && t.relu && !t.C && !t.add;
}

/* The chain of nodes node i runs fused with (chain[0] = i; 0: none), its
 * map in ep, the sum's other value in *addend (-1: none). */
#define GRAPH_CHAIN 8
static int plan_chain(sr_module *m, graph_impl *g, int i, const sr_run *run, int jvp, sr_epilogue *ep,
                      int *chain, int *addend)
{
    sr_module *c = m->children[i].m;
    *addend = -1;
    chain[0] = i;
    if (run->save || run->record_relu || run->unfused || !c->ops->run_mapped || sr_run_tapped(run, c))
        return 0;
    *ep = (sr_epilogue){0};
    int len = 1, cur = i;
    while (len < GRAPH_CHAIN) {
        int v = cur + 1, j = g->consumer[v];
        if (g->uses[v] != 1 || j < 0 || sr_run_tapped(run, m->children[cur].m))
            break;
        graph_node *nj = &g->nodes[j];
        sr_module *f = m->children[j].m;
        if (nj->nin == 1 && *addend < 0 && f->ops->fold && f->ops->fold(f, ep)) {
            chain[len++] = cur = j;
            continue;
        }
        if (nj->nin == 1 && *addend >= 0 && !ep->relu && folds_relu_only(f)) {
            ep->relu = 1;
            chain[len++] = cur = j;
            continue;
        }
        if (!jvp && nj->nin == 2 && (f->ops->flags & SR_MOD_SUM) && *addend < 0 && !ep->relu &&
            nj->in[0] != nj->in[1]) {
            /* The other value must be there or computable first: not if
             * it waits for this chain, as another chain's head. */
            int other = nj->in[0] == v ? nj->in[1] : nj->in[0];
            sr_epilogue with = *ep;
            with.add = value_of(m, g, other);
            if (!(other && g->busy[other - 1]) && c->ops->maps(c, &with, jvp)) {
                *ep = with;
                *addend = other;
                chain[len++] = cur = j;
                continue;
            }
        }
        break;
    }
    /* Every fold above was checked against c's maps except the last. */
    return len >= 2 && c->ops->maps(c, ep, jvp) ? len : 0;
}

static int run_node(sr_module *m, int i, sr_run *run, int jvp);

/* Run the nodes value v needs that have not run (v's producer last). */
static int need(sr_module *m, int v, sr_run *run, int jvp)
{
    graph_impl *g = m->impl;
    if (!v || g->done[v - 1] || run->stopped)
        return 0;
    if (g->busy[v - 1])
        return sr_fail("graph: value %d is needed by its own fused chain", v);
    graph_node *nd = &g->nodes[v - 1];
    for (int j = 0; j < nd->nin; j++)
        if (need(m, nd->in[j], run, jvp))
            return -1;
    return run->stopped || g->done[v - 1] ? 0 : run_node(m, v - 1, run, jvp);
}

/* One value read: give it back once nobody else will. */
static void release(sr_module *m, graph_impl *g, int v, sr_run *run)
{
    if (--g->uses[v] == 0 && v)
        sr_module_drop_outputs(m->children[v - 1].m, run);
}

static int run_node(sr_module *m, int i, sr_run *run, int jvp)
{
    graph_impl *g = m->impl;
    graph_node *nd = &g->nodes[i];
    int chain[GRAPH_CHAIN], addend;
    sr_epilogue ep;
    int len = plan_chain(m, g, i, run, jvp, &ep, chain, &addend);
    if (len && addend >= 0) {
        for (int k = 0; k < len; k++)
            g->busy[chain[k]] = 1;
        int rc = need(m, addend, run, jvp);
        for (int k = 0; k < len; k++)
            g->busy[chain[k]] = 0;
        if (rc || run->stopped)
            return rc;
    }
    sr_module *c = m->children[i].m;
    int ran = 1, rc;
    if (len) {
        rc = sr_module_run_mapped(c, value_of(m, g, nd->in[0]), jvp, &ep, run);
        if (!rc && run->stopped) {
            sr_module_ran(c, run); /* stopped inside c (a container): its own output */
        } else if (!rc) {
            sr_module *last = m->children[chain[len - 1]].m;
            if (last != c) {
                sr_tensor_share(&last->out, &c->out);
                for (int k = 0; k < len - 1; k++)
                    sr_pool_put(run->pool, &m->children[chain[k]].m->out);
            }
            for (int k = 0; k < len; k++) {
                sr_module *ck = m->children[chain[k]].m;
                ck->out_ndim = last->out.ndim;
                memcpy(ck->out_shape, last->out.shape, sizeof ck->out_shape);
                ck->out_dtype = last->out.dtype;
            }
            sr_run_record(run, last);
            run->nfused++;
            ran = len;
        }
    } else {
        for (int j = 0; j < nd->nin; j++)
            g->xs[j] = value_of(m, g, nd->in[j]);
        rc = jvp ? sr_module_jvp_n(c, nd->nin, g->xs, run) : sr_module_forward_n(c, nd->nin, g->xs, run);
    }
    if (rc)
        return sr_fail_context("%s", m->children[i].name);
    if (ran == 1)
        len = 1, chain[0] = i;
    for (int k = 0; k < len; k++) {
        graph_node *nk = &g->nodes[chain[k]];
        g->done[chain[k]] = 1;
        for (int j = 0; j < nk->nin; j++)
            if (k == 0 || nk->in[j] != chain[k - 1] + 1)
                release(m, g, nk->in[j], run);
    }
    int last = chain[len - 1];
    if (run->stopped && g->stop_value < 0)
        g->stop_value = (ran == 1 ? i : last) + 1;
    else if (!g->uses[last + 1])
        sr_module_drop_outputs(m->children[last].m, run); /* nobody reads it */
    return 0;
}

/* The nodes from first on, x the graph's input (first = 0) or value
 * first, which stands for node first − 1's output (forward_from: no later
 * node reads an earlier value, graph_affine_prefix). */
static int graph_run(sr_module *m, int first, const sr_tensor *x, sr_run *run, int jvp)
{
    graph_impl *g = m->impl;
    if (!g->n)
        return sr_fail("graph: has no nodes");
    /* Last pass's outputs back to the pool, so the nodes reuse them. */
    sr_pool_put(run->pool, &m->out);
    for (int i = 0; i < g->n; i++)
        sr_pool_put(run->pool, &m->children[i].m->out);
    g->x = x;
    g->in_ndim = x->ndim;
    memcpy(g->in_shape, x->shape, sizeof g->in_shape);
    g->in_dtype = x->dtype;
    g->stop_value = -1;
    count_uses(g);
    memset(g->done, 0, (size_t)g->n);
    memset(g->busy, 0, (size_t)g->n);
    if (first) {
        memset(g->done, 1, (size_t)first);
        sr_tensor_share(&m->children[first - 1].m->out, x);
    }
    for (int i = first; i < g->n && !run->stopped; i++)
        if (!g->done[i] && run_node(m, i, run, jvp))
            return -1;
    int v = g->stop_value >= 0 ? g->stop_value : out_value(g);
    sr_tensor_share(&m->out, value_of(m, g, v));
    g->x = NULL;
    return 0;
}

static int graph_forward(sr_module *m, const sr_tensor *x, sr_run *run) { return graph_run(m, 0, x, run, 0); }
static int graph_jvp(sr_module *m, const sr_tensor *x, sr_run *run) { return graph_run(m, 0, x, run, 1); }
static int graph_forward_from(sr_module *m, int first, const sr_tensor *x, sr_run *run)
{
    return graph_run(m, first, x, run, 0);
}

/* The most leading nodes that are affine and cut the graph: no node after
 * them reads a value before the last of them's, nor is the output one (so
 * the input reaches the rest through that value alone); all but the last
 * node at most. */
static int graph_affine_prefix(const sr_module *m)
{
    const graph_impl *g = m->impl;
    int len = 0, best = 0;
    while (len < g->n - 1 && sr_module_is_affine(m->children[len].m))
        len++;
    /* low = the least value read by nodes [p, n), scanned from the end */
    int low = out_value(g);
    for (int p = g->n - 1; p >= 1; p--) {
        for (int j = 0; j < g->nodes[p].nin; j++)
            low = g->nodes[p].in[j] < low ? g->nodes[p].in[j] : low;
        if (p <= len && low >= p) {
            best = p;
            break;
        }
    }
    return best;
}

/* grad[v] += g (g is given back; grad[v] takes it over when empty, and is
 * summed into a buffer of its own when someone else holds it). */
static int accumulate(graph_impl *g, int v, sr_tensor *gi, sr_run *run)
{
    sr_tensor *acc = &g->grad[v];
    if (!gi->storage)
        return 0;
    if (!acc->storage) {
        sr_tensor_share(acc, gi);
        sr_pool_put(run->pool, gi);
        return 0;
    }
    if (!sr_same_shape(acc, gi))
        return sr_fail("graph backward: gradients %s and %s of one value differ in shape", SR_SHAPE(acc),
                       SR_SHAPE(gi));
    if (acc->storage->refcount > 1) {
        sr_tensor sum = SR_TENSOR_INIT;
        if (sr_pool_ensure_like(run->pool, &sum, acc))
            return -1;
        sr_add_relu(acc->dtype, sr_data(&sum), sr_data(acc), sr_data(gi), sr_numel(acc), 0);
        sr_pool_put(run->pool, acc);
        *acc = sum;
    } else {
        sr_add_relu(acc->dtype, sr_data(acc), sr_data(acc), sr_data(gi), sr_numel(acc), 0);
    }
    sr_pool_put(run->pool, gi);
    return 0;
}

static int graph_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    graph_impl *g = m->impl;
    int top = g->stop_value >= 0 ? g->stop_value : out_value(g);
    sr_pool_put(run->pool, &m->gin);
    sr_tensor_share(&g->grad[top], gy);
    int rc = 0;
    for (int i = g->n - 1; i >= 0; i--) {
        sr_module *c = m->children[i].m;
        graph_node *nd = &g->nodes[i];
        sr_tensor *gv = &g->grad[i + 1];
        if (rc || !g->done[i] || !gv->storage) {
            /* did not run, or nothing reaches the output through it */
            sr_pool_put(run->pool, gv);
            sr_pool_put(run->pool, &c->saved);
            continue;
        }
        if (sr_module_backward_n(c, gv, nd->nin, nd->gin, run)) {
            rc = sr_fail_context("%s", m->children[i].name);
        } else {
            for (int j = 0; j < nd->nin && !rc; j++)
                rc = accumulate(g, nd->in[j], &nd->gin[j], run);
        }
        sr_pool_put(run->pool, gv);
        sr_pool_put(run->pool, &c->gin);
        for (int j = 0; j < nd->nin; j++)
            sr_pool_put(run->pool, &nd->gin[j]);
    }
    if (!rc && g->grad[0].storage) {
        sr_tensor_share(&m->gin, &g->grad[0]);
    } else if (!rc) { /* the output does not depend on the input */
        rc = sr_module_grad_input(m, run, g->in_dtype, g->in_ndim, g->in_shape);
        if (!rc)
            sr_tensor_fill(&m->gin, 0);
    }
    for (int v = 0; v <= g->n; v++)
        sr_pool_put(run->pool, &g->grad[v]);
    return rc;
}

/* Affine when every node is (sums and concatenations are linear). */
static int graph_is_affine(const sr_module *m)
{
    for (int i = 0; i < m->nchildren; i++)
        if (!sr_module_is_affine(m->children[i].m))
            return 0;
    return m->nchildren > 0;
}

static void graph_free(sr_module *m)
{
    graph_impl *g = m->impl;
    for (int i = 0; i < g->n; i++) {
        for (int j = 0; j < g->nodes[i].nin; j++)
            sr_tensor_free(&g->nodes[i].gin[j]);
        free(g->nodes[i].in);
        free(g->nodes[i].gin);
    }
    for (int v = 0; g->grad && v <= g->n; v++)
        sr_tensor_free(&g->grad[v]);
    free(g->nodes);
    free(g->uses);
    free(g->consumer);
    free(g->done);
    free(g->busy);
    free(g->grad);
    free(g->xs);
    sr_strmap_free(&g->names);
}

static void graph_describe(const sr_module *m, char *buf, size_t n)
{
    const graph_impl *g = m->impl;
    int v = out_value(g);
    snprintf(buf, n, "%d nodes, output %s", g->n, v ? m->children[v - 1].name : "input");
}

static const sr_module_ops graph_ops = {
    .kind = "graph", .forward = graph_forward, .jvp = graph_jvp, .backward = graph_backward,
    .free_impl = graph_free, .describe = graph_describe, .is_affine = graph_is_affine,
    .flags = SR_MOD_COMBINES, .affine_prefix = graph_affine_prefix, .forward_from = graph_forward_from,
};

sr_module *sr_graph_new(void)
{
    sr_module *m = sr_module_new(&graph_ops, sizeof(graph_impl));
    if (m)
        ((graph_impl *)m->impl)->output = -1;
    return m;
}

static int is_graph(const sr_module *m, const char *op)
{
    return m->ops == &graph_ops ? 0 : sr_fail("%s: %s is not a graph", op, m->ops->kind);
}

int sr_graph_value(const sr_module *m, const char *name)
{
    if (is_graph(m, "graph"))
        return -1;
    if (!*name || strcmp(name, "input") == 0)
        return 0;
    int i = sr_strmap_get(&((const graph_impl *)m->impl)->names, name);
    if (i >= 0)
        return i + 1;
    return sr_fail("graph: no node named '%s'", name);
}

/* Grow every per-node and per-value array to hold n + 1 nodes. */
static int reserve(graph_impl *g)
{
    if (g->n + 1 <= g->cap)
        return 0;
    int cap = g->cap ? 2 * g->cap : 16;
    graph_node *nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
    if (nodes)
        g->nodes = nodes;
    int *uses = realloc(g->uses, (size_t)(cap + 1) * sizeof *uses);
    if (uses)
        g->uses = uses;
    int *cons = realloc(g->consumer, (size_t)(cap + 1) * sizeof *cons);
    if (cons)
        g->consumer = cons;
    unsigned char *done = realloc(g->done, (size_t)cap);
    if (done)
        g->done = done;
    unsigned char *busy = realloc(g->busy, (size_t)cap);
    if (busy)
        g->busy = busy;
    sr_tensor *grad = realloc(g->grad, (size_t)(cap + 1) * sizeof *grad);
    if (grad) {
        for (int v = g->cap ? g->cap + 1 : 0; v <= cap; v++)
            grad[v] = (sr_tensor)SR_TENSOR_INIT;
        g->grad = grad;
    }
    if (!nodes || !uses || !cons || !done || !busy || !grad)
        return sr_fail("graph: out of memory");
    g->cap = cap;
    return 0;
}

int sr_graph_add(sr_module *m, const char *name, sr_module *child, int nin, const int *inputs)
{
    if (is_graph(m, "graph add"))
        return -1;
    graph_impl *g = m->impl;
    if (!name || !*name || strcmp(name, "input") == 0)
        return sr_fail("graph: a node needs a name (not empty, not 'input'), got '%s'", name ? name : "");
    if (sr_strmap_get(&g->names, name) >= 0)
        return sr_fail("graph: two nodes named '%s'", name);
    int a = sr_module_arity(child);
    if (nin < 1 || (a >= 0 && nin != a))
        return sr_fail("graph: node '%s' (%s) takes %d input%s, given %d", name, child->ops->kind, a,
                       a == 1 ? "" : "s", nin);
    for (int j = 0; j < nin; j++)
        if (inputs[j] < 0 || inputs[j] > g->n)
            return sr_fail("graph: node '%s' reads value %d, but only values 0..%d exist (the input and "
                           "earlier nodes)", name, inputs[j], g->n);
    if (reserve(g))
        return -1;
    if (nin > g->maxin) {
        const sr_tensor **xs = realloc(g->xs, (size_t)nin * sizeof *xs);
        if (!xs)
            return sr_fail("graph: out of memory");
        g->xs = xs;
        g->maxin = nin;
    }
    graph_node nd = {nin, malloc((size_t)nin * sizeof(int)), calloc((size_t)nin, sizeof(sr_tensor))};
    if (!nd.in || !nd.gin) {
        free(nd.in);
        free(nd.gin);
        return sr_fail("graph: out of memory");
    }
    memcpy(nd.in, inputs, (size_t)nin * sizeof(int));
    if (sr_module_add_child(m, name, child) ||
        sr_strmap_put(&g->names, m->children[m->nchildren - 1].name, m->nchildren - 1)) {
        if (m->nchildren > g->n) { /* added, not indexed: taken back */
            m->nchildren--;
            free(m->children[m->nchildren].name);
            sr_module_release(child);
        }
        free(nd.in);
        free(nd.gin);
        return -1;
    }
    g->nodes[g->n++] = nd;
    return g->n;
}

int sr_graph_set_output(sr_module *m, int value)
{
    if (is_graph(m, "graph output"))
        return -1;
    graph_impl *g = m->impl;
    if (value < 0 || value > g->n)
        return sr_fail("graph: output value %d does not exist (0..%d)", value, g->n);
    g->output = value;
    return 0;
}
