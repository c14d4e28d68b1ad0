/* onnx_import.c - ONNX graphs as module graphs (onnx_import.h).
 *
 * Nodes are translated in the model's order (ONNX lists them sorted).  A
 * node whose inputs are all static is folded (onnx_fold.c); any other
 * becomes one or a few graph nodes built from the layer registry with
 * string options, exactly as srgeo.nn.NAME{...} builds them, so an
 * imported graph holds nothing the Lua side could not build.
 *
 * A dynamic value is kept as (batch, ps...) in memory, ps its per-sample
 * dims.  Its ONNX (logical) dims are ps with the batch inserted as dim bat,
 * or merged into dim bat with the per-sample dim after it (MERGE_AFTER:
 * B·m, batch-major, as the (B·nW, T, C) of a window partition and the
 * (B·heads, T, d) of attention), the one before it (MERGE_BEFORE: m·B, as
 * the (T·B, D) of PyTorch's multi-head attention) or both.  bat -1: no
 * batch (the no_batch option).  Each op is mapped onto ps: an axis
 * of the logical value is a per-sample dim unless it is the batch, which
 * no op may reduce, gather, concatenate along or mix. */
#include "import/onnx_import.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx_fold.h"
#include "nn/layers.h"

enum { V_STATIC = 1, V_DYN };
enum { SKIP_PRUNED = 2 };
/* The per-sample dims the batch's logical dim also holds: the one after
 * the batch (B·m), the one before it (m·B). */
enum { MERGE_AFTER = 1, MERGE_BEFORE = 2 };

typedef struct {
    char *name;
    int store;                  /* V_STATIC or V_DYN */
    sr_fold_val s;              /* V_STATIC */
    int id;                     /* V_DYN: graph value */
    int nd, bat, merged;        /* merged: MERGE_AFTER | MERGE_BEFORE, or 0 */
    int64_t ps[SR_MAXDIM];
    int uses, consumer;         /* readers among the nodes, and the first one */
    int node;                   /* the node that made it, + 1 (0: not a node's output) */
    int init;                   /* an initializer */
} ival;

/* Dims for messages: "(2,4,4)". */
static const char *dims_str(int nd, const int64_t *d, const char *suffix, char *buf)
{
    sr_tensor t = SR_TENSOR_INIT;
    t.ndim = nd < 0 ? 0 : nd > SR_MAXDIM ? SR_MAXDIM : nd;
    memcpy(t.shape, d, (size_t)t.ndim * sizeof *d);
    sr_shape_str(&t, buf, SR_SHAPE_BUF);
    strcat(buf, suffix);
    return buf;
}
#define DIMS(nd, d) dims_str((nd), (d), "", (char[SR_SHAPE_BUF + 12]){0})
#define PS(v) dims_str((v)->nd, (v)->ps, " per sample", (char[SR_SHAPE_BUF + 12]){0})

typedef struct {
    const sr_onnx_model *m;
    const sr_onnx_import_opts *o;
    sr_module *g;
    ival *v;
    int nv, cap;
    int *tab, tcap;             /* name -> value index + 1 */
    int64_t n0;                 /* the batch size shapes baked into the file were made for */
    unsigned char *skip;        /* nodes absorbed by an earlier one (1), or pruned (SKIP_PRUNED) */
    int folded;
    int64_t folded_values;      /* elements all folded constants hold (both batch sizes) */
    int64_t fold_budget;        /* ... and at most this many (see translate) */
    int64_t fold_max;           /* elements one folded tensor may hold (see translate) */
    int64_t fold_work, fold_work_budget; /* folding's work so far and at most (see translate) */
    int head_in;                /* value index of the last classifier head's input, or -1 */
    int head_node;
    const char *img;            /* the image input's name */
} imp;

/* --- values by name ---------------------------------------------------------- */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static ival *find(imp *I, const char *name)
{
    if (!name || !*name)
        return NULL;
    for (uint64_t h = hash_str(name) & (uint64_t)(I->tcap - 1);; h = (h + 1) & (uint64_t)(I->tcap - 1)) {
        int k = I->tab[h];
        if (!k)
            return NULL;
        if (!strcmp(I->v[k - 1].name, name))
            return &I->v[k - 1];
    }
}

/* A new value `name` (names are defined once in ONNX). */
static ival *define(imp *I, const char *name)
{
    if (find(I, name)) {
        sr_fail("value '%s' is defined twice", name);
        return NULL;
    }
    if (I->nv >= I->cap || 2 * (I->nv + 1) > I->tcap)
        return sr_fail("too many values"), NULL;
    ival *v = &I->v[I->nv];
    memset(v, 0, sizeof *v);
    v->consumer = -1;
    if (!(v->name = strdup(name)))
        return sr_fail("out of memory"), NULL;
    uint64_t h = hash_str(name) & (uint64_t)(I->tcap - 1);
    while (I->tab[h])
        h = (h + 1) & (uint64_t)(I->tcap - 1);
    I->tab[h] = ++I->nv;
    return v;
}

static int index_of(const imp *I, const ival *v) { return (int)(v - I->v); }

/* --- the layout of dynamic values -------------------------------------------- */
/* How many per-sample dims the batch's logical dim holds, and whether
 * one comes before the batch. */
static int mcount(int merged) { return (merged & 1) + (merged >> 1 & 1); }
static int mbefore(int merged) { return merged >> 1 & 1; }

static int lrank(const ival *v) { return v->bat < 0 ? v->nd : v->nd + 1 - mcount(v->merged); }

/* Logical dims at batch size N. */
static void ldims(const ival *v, int64_t N, int64_t *out)
{
    int mc = mcount(v->merged);
    for (int i = 0, j = 0; i < lrank(v); i++) {
        if (v->bat >= 0 && i == v->bat) {
            out[i] = N;
            for (int k = 0; k < mc; k++)
                out[i] *= v->ps[j++];
        } else {
            out[i] = v->ps[j++];
        }
    }
}

/* Logical dim i: the per-sample dim it is (>= 0), or -1 for the batch on
 * its own; *merged gets the flags when it is the batch merged with
 * per-sample dims (which then start at the dim returned). */
static int item(const ival *v, int i, int *merged)
{
    *merged = 0;
    if (v->bat < 0 || i < v->bat)
        return i;
    int mc = mcount(v->merged);
    if (i == v->bat) {
        *merged = v->merged;
        return mc ? i : -1;
    }
    return i - 1 + mc;
}

/* The per-sample dim of logical axis a (negative from the end), refusing
 * the batch: op names the use in the message. */
static int ps_axis(const ival *v, int64_t a, const char *op, int *q)
{
    int r = lrank(v), m;
    int64_t b = a < 0 ? a + r : a;
    if (b < 0 || b >= r)
        return sr_fail("axis %lld is out of range for a value of rank %d", (long long)a, r);
    int it = item(v, (int)b, &m);
    if (it < 0 || m)
        return sr_fail("%s axis %lld is the batch axis", op, (long long)a);
    *q = it;
    return 0;
}

/* A per-sample dim of size 1 merged with the batch is none. */
static void normalize_layout(ival *v)
{
    for (int flag = MERGE_BEFORE; v->bat >= 0 && flag; flag = flag == MERGE_BEFORE ? MERGE_AFTER : 0) {
        if (!(v->merged & flag))
            continue;
        int d = v->bat + (flag == MERGE_AFTER ? mbefore(v->merged) : 0);
        if (v->ps[d] != 1)
            continue;
        for (; d + 1 < v->nd; d++)
            v->ps[d] = v->ps[d + 1];
        v->nd--;
        v->merged &= ~flag;
    }
}

#define VALUE_MAX ((int64_t)1 << 40)
static ival *def_dyn(imp *I, const char *name, int id, int nd, const int64_t *ps, int bat, int merged)
{
    if (nd > SR_MAXDIM - 1)
        return sr_fail("'%s' would have %d dims after the batch (at most %d)", name, nd, SR_MAXDIM - 1), NULL;
    /* Bounded, so the shape arithmetic on values never overflows. */
    int64_t n = 1;
    for (int d = 0; d < nd; d++) {
        if (ps[d] < 0 || (ps[d] && n > VALUE_MAX / ps[d]))
            return sr_fail("'%s' would be %s per sample (at most %lld values)", name, DIMS(nd, ps),
                           (long long)VALUE_MAX), NULL;
        n *= ps[d];
    }
    ival *v = define(I, name);
    if (!v)
        return NULL;
    v->store = V_DYN;
    v->id = id;
    v->nd = nd;
    memcpy(v->ps, ps, (size_t)nd * sizeof *ps);
    v->bat = bat;
    v->merged = merged;
    normalize_layout(v);
    return v;
}

/* The same layout under a new name (Identity, Dropout, a no-op). */
static ival *alias(imp *I, const char *name, const ival *x)
{
    return def_dyn(I, name, x->id, x->nd, x->ps, x->bat, x->merged);
}

/* --- layers ------------------------------------------------------------------ */
typedef struct {
    const char *kv[64];
    char *buf[32];
    int n, nb;
} kvs;

static void kv_add(kvs *k, const char *key, char *val)
{
    if (k->n + 3 > 64 || k->nb >= 32 || !val) {
        free(val);
        return;
    }
    k->buf[k->nb++] = val;
    k->kv[k->n++] = key;
    k->kv[k->n++] = val;
    k->kv[k->n] = NULL;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    if (vasprintf(&s, f, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static void kv_s(kvs *k, const char *key, const char *v) { kv_add(k, key, strdup(v)); }
static void kv_i(kvs *k, const char *key, int64_t v) { kv_add(k, key, fmt("%lld", (long long)v)); }
static void kv_d(kvs *k, const char *key, double v) { kv_add(k, key, fmt("%.17g", v)); }

static void kv_li(kvs *k, const char *key, const int64_t *v, int n)
{
    size_t cap = (size_t)n * 24 + 2;
    char *s = malloc(cap);
    if (!s)
        return;
    size_t len = 0;
    s[0] = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, i ? ",%lld" : "%lld", (long long)v[i]);
    kv_add(k, key, s);
}

static void kv_ld(kvs *k, const char *key, const double *v, int n)
{
    size_t cap = (size_t)n * 28 + 2;
    char *s = malloc(cap);
    if (!s)
        return;
    size_t len = 0;
    s[0] = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, i ? ",%.17g" : "%.17g", v[i]);
    kv_add(k, key, s);
}

static void kv_free(kvs *k)
{
    for (int i = 0; i < k->nb; i++)
        free(k->buf[i]);
    k->nb = k->n = 0;
}

/* A registry layer from the options in k (freed), in the import's dtype. */
static sr_module *layer(imp *I, const char *kind, kvs *k)
{
    const sr_layer_def *d = sr_layer_lookup(kind);
    sr_module *m = NULL;
    if (!d) {
        sr_fail("no layer %s", kind);
    } else {
        sr_opts o;
        sr_opts_kv_data data;
        k->kv[k->n] = NULL;
        sr_opts_kv(&o, &data, kind, k->kv);
        m = d->create(&o);
    }
    kv_free(k);
    if (m) {
        sr_module_set_training(m, 0);
        if (I->o->dtype != m->dtype && sr_module_to_dtype(m, I->o->dtype)) {
            sr_module_release(m);
            return NULL;
        }
    }
    return m;
}

static int set_param(sr_module *m, const char *name, const sr_tensor *t)
{
    sr_param *p = sr_module_local_param(m, name);
    if (!p)
        return sr_fail("%s has no parameter %s", m->ops->kind, name);
    if (sr_numel(&p->value) != sr_numel(t))
        return sr_fail("%s parameter %s is %s, the constant %s", m->ops->kind, name, SR_SHAPE(&p->value),
                       SR_SHAPE(t));
    return sr_tensor_assign(&p->value, t);
}

/* Add m as a graph node reading values in[]; the name is base, made unique.
 * Takes m's reference; returns the value id or -1. */
static int add_node(imp *I, const char *base, sr_module *m, int nin, const int *in)
{
    if (!m)
        return -1;
    char name[512];
    snprintf(name, sizeof name, "%s", *base ? base : m->ops->kind);
    for (int k = 2; !strcmp(name, "input") || sr_graph_value(I->g, name) > 0; k++)
        snprintf(name, sizeof name, "%s_%d", *base ? base : m->ops->kind, k);
    int id = sr_graph_add(I->g, name, m, nin, in);
    sr_module_release(m);
    return id;
}

/* A graph node name for ONNX node n: the prefix of its weight's name
 * ("layer1.0.conv1" for "layer1.0.conv1.weight", so parameters keep
 * PyTorch's keys), else the node's name, else its first output's. */
static void node_name(const sr_onnx_node *n, const char *weight, char *out, size_t cap)
{
    size_t wl = weight ? strlen(weight) : 0;
    if (wl > 7 && !strcmp(weight + wl - 7, ".weight") && wl - 7 < cap)
        snprintf(out, cap, "%.*s", (int)(wl - 7), weight);
    else
        snprintf(out, cap, "%s", *n->name ? n->name : n->noutputs ? n->outputs[0] : n->op_type);
}

/* --- node attributes ---------------------------------------------------------- */
static int64_t ai(const sr_onnx_node *n, const char *name, int64_t def)
{
    const sr_onnx_attr *a = sr_onnx_attr_find(n, name);
    return a && a->type == SR_ONNX_ATTR_INT ? a->i : def;
}

static double af(const sr_onnx_node *n, const char *name, double def)
{
    const sr_onnx_attr *a = sr_onnx_attr_find(n, name);
    return a && a->type == SR_ONNX_ATTR_FLOAT ? a->f : a && a->type == SR_ONNX_ATTR_INT ? (double)a->i : def;
}

static const char *as(const sr_onnx_node *n, const char *name, const char *def)
{
    const sr_onnx_attr *a = sr_onnx_attr_find(n, name);
    return a && a->type == SR_ONNX_ATTR_STRING ? a->s : def;
}

/* The type of each attribute the importer and the folding read (an INT
 * is taken for a FLOAT: its value is exact); one of another type is an
 * error naming both, never the default read instead (LeakyRelu's alpha
 * "0.5", a string, ran as 0.01; Flatten's axis 1.5 ran as 1).  "value" is
 * Pad's number before opset 11, else Constant's tensor. */
static const struct {
    const char *name;
    int type;
} attr_types[] = {
    {"axis", SR_ONNX_ATTR_INT}, {"axes", SR_ONNX_ATTR_INTS}, {"alpha", SR_ONNX_ATTR_FLOAT},
    {"beta", SR_ONNX_ATTR_FLOAT}, {"epsilon", SR_ONNX_ATTR_FLOAT}, {"to", SR_ONNX_ATTR_INT},
    {"starts", SR_ONNX_ATTR_INTS}, {"ends", SR_ONNX_ATTR_INTS}, {"start", SR_ONNX_ATTR_INT},
    {"end", SR_ONNX_ATTR_INT}, {"split", SR_ONNX_ATTR_INTS}, {"shape", SR_ONNX_ATTR_INTS},
    {"perm", SR_ONNX_ATTR_INTS}, {"pads", SR_ONNX_ATTR_INTS}, {"noop_with_empty_axes", SR_ONNX_ATTR_INT},
    {"min", SR_ONNX_ATTR_FLOAT}, {"max", SR_ONNX_ATTR_FLOAT}, {"keepdims", SR_ONNX_ATTR_INT},
    {"allowzero", SR_ONNX_ATTR_INT}, {"transA", SR_ONNX_ATTR_INT}, {"transB", SR_ONNX_ATTR_INT},
    {"training_mode", SR_ONNX_ATTR_INT}, {"strides", SR_ONNX_ATTR_INTS}, {"repeats", SR_ONNX_ATTR_INTS},
    {"ratio", SR_ONNX_ATTR_FLOAT}, {"mode", SR_ONNX_ATTR_STRING}, {"kernel_shape", SR_ONNX_ATTR_INTS},
    {"is_test", SR_ONNX_ATTR_INT}, {"group", SR_ONNX_ATTR_INT}, {"fmod", SR_ONNX_ATTR_INT},
    {"dilations", SR_ONNX_ATTR_INTS}, {"count_include_pad", SR_ONNX_ATTR_INT}, {"ceil_mode", SR_ONNX_ATTR_INT},
    {"auto_pad", SR_ONNX_ATTR_STRING}, {"approximate", SR_ONNX_ATTR_STRING},
    {"coordinate_transformation_mode", SR_ONNX_ATTR_STRING}, {"nearest_mode", SR_ONNX_ATTR_STRING},
    {"keep_aspect_ratio_policy", SR_ONNX_ATTR_STRING}, {"antialias", SR_ONNX_ATTR_INT},
    {"cubic_coeff_a", SR_ONNX_ATTR_FLOAT}, {"exclude_outside", SR_ONNX_ATTR_INT},
    {"extrapolation_value", SR_ONNX_ATTR_FLOAT}, {"scales", SR_ONNX_ATTR_FLOATS}, {"num_groups", SR_ONNX_ATTR_INT},
    {"stash_type", SR_ONNX_ATTR_INT}, {"output_padding", SR_ONNX_ATTR_INTS}, {"output_shape", SR_ONNX_ATTR_INTS},
    {"blocksize", SR_ONNX_ATTR_INT}, {"equation", SR_ONNX_ATTR_STRING}, {"gamma", SR_ONNX_ATTR_FLOAT},
    {"num_outputs", SR_ONNX_ATTR_INT},
};

static const char *attr_type_name(int type)
{
    switch (type) {
    case SR_ONNX_ATTR_FLOAT: return "a float";
    case SR_ONNX_ATTR_INT: return "an int";
    case SR_ONNX_ATTR_STRING: return "a string";
    case SR_ONNX_ATTR_TENSOR: return "a tensor";
    case SR_ONNX_ATTR_FLOATS: return "a list of floats";
    case SR_ONNX_ATTR_INTS: return "a list of ints";
    case SR_ONNX_ATTR_STRINGS: return "a list of strings";
    default: return "another kind (a graph, a type, sparse tensors)";
    }
}

static int check_attr_types(const sr_onnx_node *n, int64_t opset)
{
    for (int i = 0; i < n->nattrs; i++) {
        const sr_onnx_attr *a = &n->attrs[i];
        int want = 0;
        if (!strcmp(a->name, "value"))
            want = !strcmp(n->op_type, "Pad") ? (opset < 11 ? SR_ONNX_ATTR_FLOAT : 0) : SR_ONNX_ATTR_TENSOR;
        for (size_t k = 0; !want && k < sizeof attr_types / sizeof *attr_types; k++)
            if (!strcmp(attr_types[k].name, a->name))
                want = attr_types[k].type;
        if (want && a->type != want && !(want == SR_ONNX_ATTR_FLOAT && a->type == SR_ONNX_ATTR_INT))
            return sr_fail("attribute %s is %s, %s takes %s", a->name, attr_type_name(a->type), n->op_type,
                           attr_type_name(want));
    }
    return 0;
}

/* Ints from attribute name or static input v (either may be absent): *cnt
 * -1 when neither is there. */
static int ints_of(const sr_onnx_node *n, const char *name, const ival *v, int64_t *out, int max, int *cnt)
{
    const sr_onnx_attr *a = name ? sr_onnx_attr_find(n, name) : NULL;
    *cnt = -1;
    if (a && a->type == SR_ONNX_ATTR_INTS) {
        if (a->n > max)
            return sr_fail("attribute %s has %d entries (at most %d)", name, a->n, max);
        memcpy(out, a->ints, (size_t)a->n * sizeof *out);
        *cnt = a->n;
    } else if (v) {
        if (v->store != V_STATIC || sr_fold_val_batched(&v->s))
            return sr_fail("input '%s' must be a constant", v->name);
        const sr_tensor *t = &v->s.v[0];
        if (t->ndim > 1 || sr_numel(t) > max)
            return sr_fail("input '%s' %s must be a list of at most %d", v->name, SR_SHAPE(t), max);
        for (int64_t i = 0; i < sr_numel(t); i++)
            out[i] = sr_fold_int(sr_f64(t)[i]);
        *cnt = (int)sr_numel(t);
    }
    return 0;
}

/* The one number in static value v (a scalar or a one-element tensor). */
static int scalar_of(const ival *v, double *out)
{
    if (!v || v->store != V_STATIC || sr_fold_val_batched(&v->s) || sr_numel(&v->s.v[0]) != 1)
        return sr_fail("input '%s' must be a constant number", v ? v->name : "?");
    *out = sr_f64(&v->s.v[0])[0];
    return 0;
}

/* An unsupported attribute: a distinct message the conformance report
 * counts as a documented skip. */
#define UNSUPPORTED(...) sr_fail("unsupported: " __VA_ARGS__)

/* --- constants as operands of dynamic values ---------------------------------- */
/* The per-sample form of static c broadcast against dynamic x: c's dim at
 * x's batch (right-aligned) must be 1 there (an Expand of a constant over
 * the batch counts: its rows are equal) and is dropped.  *lo gets the
 * logical rank of the broadcast. */
static int per_sample(const ival *c, const ival *x, sr_tensor *out, int *lo)
{
    const sr_tensor *t0 = &c->s.v[0], *t1 = &c->s.v[1];
    int rc = t0->ndim, lx = lrank(x), bdim = -1;
    *lo = rc > lx ? rc : lx;
    if (sr_fold_val_batched(&c->s)) {
        /* the dim that grows with the batch, and no other change */
        for (int d = 0; d < rc; d++)
            if (t0->shape[d] != t1->shape[d]) {
                if (bdim >= 0 || t0->shape[d] % SR_FOLD_N1 || t1->shape[d] % SR_FOLD_N2 ||
                    t0->shape[d] / SR_FOLD_N1 != t1->shape[d] / SR_FOLD_N2)
                    return sr_fail("constant '%s' depends on the batch in a way srgeo cannot follow", c->name);
                bdim = d;
            }
        if (bdim < 0)
            return sr_fail("constant '%s' depends on the batch in its values", c->name);
    }
    int xb = x->bat >= 0 ? x->bat + (*lo - lx) : -1; /* x's batch in broadcast coords */
    int cb = xb >= 0 ? xb - (*lo - rc) : -1;         /* ... in c's dims */
    int mc = mcount(x->merged);
    if (bdim >= 0 && (bdim != cb || mc))
        return sr_fail("constant '%s' grows with the batch along a dim that is not the batch of '%s'", c->name,
                       x->name);
    int64_t shape[SR_MAXDIM + 2];
    int nd = 0;
    for (int d = 0; d < rc; d++) {
        if (d == cb) {
            if (bdim < 0 && t0->shape[d] != 1)
                return sr_fail("constant '%s' %s varies along the batch axis of '%s'", c->name, SR_SHAPE(t0),
                               x->name);
            /* 1 against the batch merged with per-sample dims: 1 for each */
            for (int k = 0; k < mc; k++)
                shape[nd++] = 1;
            continue;
        }
        shape[nd++] = t0->shape[d];
    }
    if (nd > SR_MAXDIM)
        return sr_fail("constant '%s' would have too many dims", c->name);
    if (bdim < 0)
        return sr_tensor_reshape(out, t0, nd, shape) ? -1 : 0;
    /* an expanded constant: its first batch row */
    sr_tensor row = SR_TENSOR_INIT;
    int64_t outer = 1, inner = 1, n = t0->shape[bdim] / SR_FOLD_N1;
    for (int d = 0; d < bdim; d++)
        outer *= t0->shape[d];
    for (int d = bdim + 1; d < rc; d++)
        inner *= t0->shape[d];
    if (n != 1)
        return sr_fail("constant '%s' merges the batch", c->name);
    if (sr_tensor_alloc(&row, SR_F64, nd, shape))
        return -1;
    for (int64_t o = 0; o < outer; o++)
        memcpy(sr_f64(&row) + o * inner, sr_f64(t0) + o * t0->shape[bdim] * inner, (size_t)inner * sizeof(double));
    sr_tensor_free(out);
    *out = row;
    return 0;
}

/* Per-sample broadcast of two shapes (right-aligned). */
static int bcast_ps(int an, const int64_t *a, int bn, const int64_t *b, int *on, int64_t *o)
{
    int n = an > bn ? an : bn;
    for (int i = 0; i < n; i++) {
        int ia = an - n + i, ib = bn - n + i;
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return sr_fail("operands do not broadcast");
        o[i] = da == 1 ? db : da;
    }
    *on = n;
    return 0;
}

/* --- translation of one node ---------------------------------------------------- */
typedef struct {
    imp *I;
    const sr_onnx_node *n;
    int idx;
    ival *in[64];
    int nin;
    char name[512];
    ival batched; /* as_batch's view of an input */
    const char *oname; /* output 0's name when a translator makes a step of a composite op */
    int role;          /* SR_ROLE_* of a constant operand when the op says it (PRelu's slope) */
} ctx;

static const char *out_name(const ctx *c, int i)
{
    return !i && c->oname ? c->oname : i < c->n->noutputs ? c->n->outputs[i] : "";
}

/* Only output 0 may be read (Dropout's mask, MaxPool's indices...). */
static int only_first_output(const ctx *c)
{
    for (int i = 1; i < c->n->noutputs; i++)
        if (*c->n->outputs[i]) {
            /* an output nobody reads is fine */
            int used = 0;
            const sr_onnx_model *m = c->I->m;
            for (int j = c->idx + 1; j < m->nnodes && !used; j++)
                for (int k = 0; k < m->nodes[j].ninputs && c->I->skip[j] != SKIP_PRUNED; k++)
                    used |= !strcmp(m->nodes[j].inputs[k], c->n->outputs[i]);
            /* of the graph's outputs, only the one returned */
            const char *ret = c->I->o->output ? c->I->o->output : m->noutputs ? m->outputs[0].name : "";
            used |= !strcmp(ret, c->n->outputs[i]);
            if (used)
                return UNSUPPORTED("%s output %d ('%s') is read", c->n->op_type, i + 1, c->n->outputs[i]);
        }
    return 0;
}

static ival *dyn_in(const ctx *c, int i)
{
    ival *v = i < c->nin ? c->in[i] : NULL;
    return v && v->store == V_DYN ? v : NULL;
}

/* A single-input layer on x with output layout (nd, ps, bat, merged). */
static int emit1(ctx *c, const char *kind, kvs *k, const ival *x, int nd, const int64_t *ps, int bat, int merged)
{
    sr_module *m = layer(c->I, kind, k);
    int id = add_node(c->I, c->name, m, 1, &x->id);
    return id < 0 || !def_dyn(c->I, out_name(c, 0), id, nd, ps, bat, merged) ? -1 : 0;
}

/* An elementwise layer: same layout out as in. */
static int emit_same(ctx *c, const char *kind, kvs *k, const ival *x)
{
    return emit1(c, kind, k, x, x->nd, x->ps, x->bat, x->merged);
}

/* Reshape dynamic x to logical shape S (at the two batch sizes: S1, S2;
 * entries 0 copy x's dim unless allowzero, one may be -1). */
/* Entries of a target shape, and their product, are bounded so that the
 * arithmetic below stays inside int64. */
#define RESHAPE_MAX VALUE_MAX
static int reshape_to(ctx *c, const ival *x, const int64_t *S1in, const int64_t *S2in, int ns, int allowzero,
                      const char *name)
{
    imp *I = c->I;
    int lx = lrank(x);
    int64_t L1[SR_MAXDIM + 1], L2[SR_MAXDIM + 1], S1[SR_MAXDIM], S2[SR_MAXDIM];
    if (ns > SR_MAXDIM)
        return sr_fail("reshape to %d dims", ns);
    ldims(x, SR_FOLD_N1, L1);
    ldims(x, SR_FOLD_N2, L2);
    int free_d = -1, dep = -1;
    for (int i = 0; i < ns; i++) {
        S1[i] = S1in[i], S2[i] = S2in[i];
        if (S1[i] == 0 && !allowzero) {
            if (i >= lx)
                return sr_fail("reshape: entry %d is 0 but the input has %d dims", i, lx);
            S1[i] = L1[i], S2[i] = L2[i];
        }
        if (S1[i] == -1 && S2[i] == -1) {
            if (free_d >= 0)
                return sr_fail("reshape: two entries are -1");
            free_d = i;
        } else if (S1[i] < 0 || S2[i] < 0 || S1[i] > RESHAPE_MAX || S2[i] > RESHAPE_MAX) {
            return sr_fail("reshape: entry %d is %lld", i, (long long)(S1[i] < 0 || S1[i] > RESHAPE_MAX ? S1[i] : S2[i]));
        } else if (S1[i] != S2[i]) {
            if (dep >= 0)
                return sr_fail("reshape: entries %d and %d both depend on the batch", dep, i);
            dep = i;
        }
    }
    for (int k = 0; k < 2; k++) {
        const int64_t *S = k ? S2 : S1;
        int64_t prod = 1;
        for (int i = 0; i < ns; i++) {
            if (i == free_d)
                continue;
            if (S[i] && prod > RESHAPE_MAX / S[i])
                return sr_fail("reshape: the shape %s holds more than %lld values", DIMS(ns, S), (long long)RESHAPE_MAX);
            prod *= S[i];
        }
    }
    int64_t psn = 1;
    for (int d = 0; d < x->nd; d++)
        psn *= x->ps[d];
    ival tmp = {0};
    if (x->bat < 0) {
        /* no batch: the shape is the per-sample shape */
        if (dep >= 0)
            return sr_fail("reshape: a batch-dependent shape for a value without a batch");
        int64_t known = 1;
        for (int i = 0; i < ns; i++)
            known *= i == free_d ? 1 : S1[i];
        for (int i = 0; i < ns; i++)
            tmp.ps[i] = i == free_d ? (known ? psn / known : 0) : S1[i];
        tmp.nd = ns;
        tmp.bat = -1;
    } else {
        /* the per-sample values before the batch in the logical order: the
         * dims before its dim, and one merged before it */
        int64_t pre = 1;
        for (int i = 0; i < x->bat; i++)
            pre *= x->ps[i];
        if (mbefore(x->merged))
            pre *= x->ps[x->bat];
        int p = -1;
        int64_t coef = -1; /* the batch dim's size over the batch (-1: from the rest) */
        if (dep >= 0) {
            if (S1[dep] % SR_FOLD_N1 || S2[dep] % SR_FOLD_N2 || S1[dep] / SR_FOLD_N1 != S2[dep] / SR_FOLD_N2)
                return sr_fail("reshape: entry %d (%lld at batch %d, %lld at %d) is not a multiple of the batch", dep,
                               (long long)S1[dep], SR_FOLD_N1, (long long)S2[dep], SR_FOLD_N2);
            p = dep;
            coef = S1[dep] / SR_FOLD_N1;
        } else {
            /* a shape baked for batch n0: the leftmost dim whose values
             * before it divide those before the batch */
            int64_t acc = 1;
            for (p = 0; p < ns; p++) {
                if (p == free_d)
                    break;
                if (pre % acc == 0 && S1[p] % I->n0 == 0 && (S1[p] / I->n0) % (pre / acc) == 0)
                    break;
                acc *= S1[p];
            }
            if (p >= ns)
                return sr_fail("reshape: no dim of the shape can hold the batch (batch size %lld when exported)",
                               (long long)I->n0);
            if (p != free_d)
                coef = S1[p] / I->n0;
        }
        int64_t known = 1, npre = 1;
        for (int i = 0; i < ns; i++)
            if (i != free_d && i != p)
                known *= S1[i];
        for (int i = 0; i < p; i++)
            if (i != free_d)
                npre *= S1[i];
        if (free_d >= 0 && free_d != p) {
            if (!known || psn % (known * coef))
                return sr_fail("reshape: %lld values per sample do not fit the shape %s", (long long)psn, DIMS(ns, S1));
            S1[free_d] = psn / (known * coef);
            if (free_d < p)
                npre *= S1[free_d];
        } else if (free_d == p) {
            if (!known || psn % known)
                return sr_fail("reshape: %lld values per sample do not fit the shape %s", (long long)psn, DIMS(ns, S1));
            coef = psn / known;
        }
        /* the batch dim holds a·B·m': a values before the batch, m' after */
        if (!npre || pre % npre)
            return sr_fail("reshape: the new shape moves values across the batch (%lld values before it, %lld in "
                           "the dims before the batch's)", (long long)pre, (long long)npre);
        int64_t a = pre / npre;
        if (!a || coef % a)
            return sr_fail("reshape: the batch's dim %lld is not a multiple of the %lld values before the batch",
                           (long long)coef, (long long)a);
        int64_t mp = coef / a;
        if (ns + 1 > SR_MAXDIM)
            return sr_fail("reshape: too many dims");
        int nd = 0;
        for (int i = 0; i < ns; i++) {
            if (i != p) {
                tmp.ps[nd++] = S1[i];
                continue;
            }
            tmp.ps[nd++] = a;
            tmp.ps[nd++] = mp;
        }
        tmp.nd = nd;
        tmp.bat = p;
        tmp.merged = MERGE_BEFORE | MERGE_AFTER;
        normalize_layout(&tmp);
    }
    int64_t tot = 1;
    for (int i = 0; i < tmp.nd; i++)
        tot *= tmp.ps[i];
    if (tot != psn)
        return sr_fail("reshape: %lld values per sample, the shape holds %lld", (long long)psn, (long long)tot);
    if (tmp.nd == x->nd && !memcmp(tmp.ps, x->ps, (size_t)x->nd * sizeof *x->ps))
        return def_dyn(I, name, x->id, tmp.nd, tmp.ps, tmp.bat, tmp.merged) ? 0 : -1;
    kvs k = {0};
    kv_li(&k, "shape", tmp.ps, tmp.nd);
    sr_module *m = layer(I, "reshape", &k);
    char nm[560];
    snprintf(nm, sizeof nm, "%s%s", c->name, strcmp(name, out_name(c, 0)) ? "/reshape" : "");
    int id = add_node(I, nm, m, 1, &x->id);
    return id < 0 || !def_dyn(I, name, id, tmp.nd, tmp.ps, tmp.bat, tmp.merged) ? -1 : 0;
}

static int do_reshape(ctx *c)
{
    const ival *x = dyn_in(c, 0), *s = c->nin > 1 ? c->in[1] : NULL;
    if (!s || s->store != V_STATIC)
        return sr_fail("the shape must be a constant");
    const sr_tensor *a = &s->s.v[0], *b = &s->s.v[1];
    if (a->ndim != 1 || b->ndim != 1 || sr_numel(a) != sr_numel(b) || sr_numel(a) > SR_MAXDIM)
        return sr_fail("the shape %s is not a list of at most %d", SR_SHAPE(a), SR_MAXDIM);
    int64_t S1[SR_MAXDIM], S2[SR_MAXDIM];
    for (int i = 0; i < sr_numel(a); i++)
        S1[i] = sr_fold_int(sr_f64(a)[i]), S2[i] = sr_fold_int(sr_f64(b)[i]);
    return reshape_to(c, x, S1, S2, (int)sr_numel(a), (int)ai(c->n, "allowzero", 0), out_name(c, 0));
}

static int do_flatten(ctx *c)
{
    const ival *x = dyn_in(c, 0);
    int lx = lrank(x);
    int64_t a = ai(c->n, "axis", 1), L1[SR_MAXDIM + 1], L2[SR_MAXDIM + 1];
    a = a < 0 ? a + lx : a;
    if (a < 0 || a > lx)
        return sr_fail("axis %lld for rank %d", (long long)a, lx);
    ldims(x, SR_FOLD_N1, L1);
    ldims(x, SR_FOLD_N2, L2);
    int64_t S1[2] = {1, 1}, S2[2] = {1, 1};
    for (int i = 0; i < lx; i++) {
        S1[i >= a] *= L1[i];
        S2[i >= a] *= L2[i];
    }
    return reshape_to(c, x, S1, S2, 2, 0, out_name(c, 0));
}

/* Squeeze / Unsqueeze: logical items removed or inserted. */
static int do_squeeze(ctx *c, int unsqueeze)
{
    const ival *x = dyn_in(c, 0);
    int64_t axes[SR_MAXDIM];
    int na;
    if (ints_of(c->n, "axes", c->nin > 1 ? c->in[1] : NULL, axes, SR_MAXDIM, &na))
        return -1;
    int lx = lrank(x), lo = unsqueeze ? lx + (na > 0 ? na : 0) : lx;
    if (unsqueeze && (na < 1 || lo > SR_MAXDIM))
        return sr_fail("needs axes (rank %d)", lo);
    int flag[SR_MAXDIM + 1] = {0};
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + lo : axes[i];
        if (a < 0 || a >= lo || flag[a]++)
            return sr_fail("axis %lld is out of range or repeated", (long long)axes[i]);
    }
    /* walk the output's logical items: inserted ones, or the input's */
    int64_t ps[SR_MAXDIM];
    int nd = 0, bat = -1, merged = 0, pos = 0;
    for (int i = 0, j = 0; i < (unsqueeze ? lo : lx); i++) {
        if (unsqueeze && flag[i]) {
            ps[nd++] = 1;
            pos++;
            continue;
        }
        int m, it = item(x, j++, &m);
        if (!unsqueeze) {
            int sq = na < 0 ? it >= 0 && !m && x->ps[it] == 1 : flag[i];
            if (sq && (it < 0 || m))
                return sr_fail("squeezes the batch axis");
            if (sq && x->ps[it] != 1)
                return sr_fail("axis %d has size %lld, not 1", i, (long long)x->ps[it]);
            if (sq)
                continue;
        }
        if (it < 0 || m)
            bat = pos, merged = m;
        for (int k = 0; it >= 0 && k < (m ? mcount(m) : 1); k++)
            ps[nd++] = x->ps[it + k];
        pos++;
    }
    if (nd == x->nd)
        return def_dyn(c->I, out_name(c, 0), x->id, nd, ps, bat, merged) ? 0 : -1;
    kvs k = {0};
    kv_li(&k, "shape", ps, nd);
    return emit1(c, "reshape", &k, x, nd, ps, bat, merged);
}

/* x's logical dims permuted by p (np of them) into c's output 0. */
static int transpose_to(ctx *c, const ival *x, const int64_t *p, int np)
{
    int lx = lrank(x);
    if (np != lx)
        return sr_fail("perm has %d entries for rank %d", np, lx);
    int64_t ps[SR_MAXDIM], dims[SR_MAXDIM + 1];
    int nd = 0, bat = -1, merged = 0, seen[SR_MAXDIM + 1] = {0}, ident = 1;
    dims[0] = 0;
    for (int i = 0; i < lx; i++) {
        int64_t a = p[i] < 0 ? p[i] + lx : p[i];
        if (a < 0 || a >= lx || seen[a]++)
            return sr_fail("perm is not a permutation");
        int m, it = item(x, (int)a, &m);
        if (it < 0) {
            bat = i;
            continue;
        }
        if (m)
            bat = i, merged = m;
        for (int k = 0; k < (m ? mcount(m) : 1); k++) {
            ident &= it + k == nd;
            dims[1 + nd] = 1 + it + k;
            ps[nd++] = x->ps[it + k];
        }
    }
    if (x->bat < 0)
        bat = -1;
    if (ident)
        return def_dyn(c->I, out_name(c, 0), x->id, nd, ps, bat, merged) ? 0 : -1;
    kvs k = {0};
    kv_li(&k, "dims", dims, nd + 1);
    return emit1(c, "permute", &k, x, nd, ps, bat, merged);
}

/* --- learned constants and fixed ones ------------------------------------------ */
/* The node that made value name, or NULL (an initializer, the input, a
 * value made by a step of a composite op). */
static const sr_onnx_node *producer(const imp *I, const char *name)
{
    const ival *v = find((imp *)I, name);
    return v && v->node ? &I->m->nodes[v->node - 1] : NULL;
}

/* Whether static value name is a tensor the file stores (an initializer or
 * a Constant node's), as it is or through ops that only move, repeat or
 * select its entries (a weight viewed to broadcast, a class token expanded
 * over the batch, the q/k/v part of an attention's packed bias, a
 * relative-position bias gathered from its table).  A value computed from
 * others (an attention mask, anything folded from shapes) is not. */
static int stored_constant(const imp *I, const char *name)
{
    static const char *const moves[] = {"Identity", "Cast", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                        "Transpose", "Expand", "Slice", "Split", "Gather", "Tile"};
    for (int guard = 0; guard < 16; guard++) {
        const ival *v = find((imp *)I, name);
        if (v && v->init)
            return 1;
        const sr_onnx_node *p = producer(I, name);
        if (!p)
            return 0;
        if (!strcmp(p->op_type, "Constant"))
            return 1;
        int moved = 0;
        for (size_t k = 0; k < sizeof moves / sizeof *moves; k++)
            moved |= !strcmp(p->op_type, moves[k]);
        if (!moved || p->ninputs < 1)
            return 0;
        name = p->inputs[0];
    }
    return 0;
}

/* Whether value x is the image input as the graph's preprocessing leaves
 * it: the input itself, or after a chain of Mul / Add / Sub / Div by
 * constants (x·255, (x − mean)/std) through Cast, Identity and Transpose,
 * as normalizes() below describes them. */
static int preprocessed_input(const imp *I, const ival *x)
{
    const char *name = x->name;
    for (int guard = 0; guard < 16; guard++) {
        if (I->img && !strcmp(name, I->img))
            return 1;
        const sr_onnx_node *p = producer(I, name);
        if (!p || p->ninputs < 1)
            return 0;
        if (!strcmp(p->op_type, "Cast") || !strcmp(p->op_type, "Identity") || !strcmp(p->op_type, "Transpose")) {
            name = p->inputs[0];
            continue;
        }
        if ((strcmp(p->op_type, "Mul") && strcmp(p->op_type, "Add") && strcmp(p->op_type, "Sub") &&
             strcmp(p->op_type, "Div")) || p->ninputs != 2)
            return 0;
        const ival *a = find((imp *)I, p->inputs[0]), *b = find((imp *)I, p->inputs[1]);
        if (!a || !b || (a->store == V_DYN) == (b->store == V_DYN))
            return 0;
        name = a->store == V_DYN ? p->inputs[0] : p->inputs[1];
    }
    return 0;
}

/* The role of static operand cst of node c (on value x), when it is a
 * learned constant, else SR_ROLE_NONE (a fixed one, a buffer).  Learned:
 * a float tensor the file stores (stored_constant), not the input's
 * preprocessing, and either the op's own parameter (PRelu's slope: c->role)
 * or, holding at least two different nonzero values, an operand of the
 * role the op gives it (role: Mul / Div a scale, Add / Sub a shift, a
 * position embedding when it varies along two or more per-sample dims
 * (ps, nps), Concat a class token; SR_ROLE_NONE: never learned).
 * Activation constants (hardswish's 3 and 6, GELU's 0.5 and √2), eps, the
 * exporter's ones and zeros, masks of one value and 0 are fixed. */
static int constant_role(const ctx *c, int role, const ival *cst, const ival *x, int nps, const int64_t *ps)
{
    const imp *I = c->I;
    if (sr_onnx_type_is_int(cst->s.type) || !stored_constant(I, cst->name) || preprocessed_input(I, x))
        return SR_ROLE_NONE;
    if (c->role)
        return c->role;
    int varying = 0;
    for (int d = 0; d < nps; d++)
        varying += ps[d] > 1;
    if (role == SR_ROLE_SHIFT && varying >= 2)
        role = SR_ROLE_EMBEDDING;
    const sr_tensor *t = &cst->s.v[0];
    double first = 0;
    for (int64_t i = 0; role && i < sr_numel(t); i++) {
        double v = sr_f64(t)[i];
        if (v == 0 || v == first)
            continue;
        if (first != 0)
            return role;
        first = v;
    }
    return SR_ROLE_NONE;
}

static int do_transpose(ctx *c)
{
    const ival *x = dyn_in(c, 0);
    int lx = lrank(x);
    int64_t p[SR_MAXDIM + 1];
    int np;
    if (ints_of(c->n, "perm", NULL, p, SR_MAXDIM + 1, &np))
        return -1;
    if (np < 0)
        for (np = 0; np < lx; np++)
            p[np] = lx - 1 - np;
    return transpose_to(c, x, p, np);
}

/* Elementwise Add / Sub / Mul / Div / Max / Min / Pow with one or two
 * dynamic operands, into value oname. */
static int do_arith_named(ctx *c, const char *kind, const char *oname)
{
    ival *a = c->in[0], *b = c->nin > 1 ? c->in[1] : NULL;
    if (!a || !b)
        return sr_fail("needs two operands");
    imp *I = c->I;
    if (a->store == V_DYN && b->store == V_DYN) {
        if (a->bat >= 0 && b->bat >= 0 &&
            (lrank(a) - a->bat != lrank(b) - b->bat || a->merged != b->merged))
            return sr_fail("the batch axes of '%s' and '%s' do not line up", a->name, b->name);
        if ((a->bat < 0) != (b->bat < 0))
            return sr_fail("'%s' and '%s': one has a batch axis, the other not", a->name, b->name);
        int64_t ps[SR_MAXDIM];
        int nd;
        if (bcast_ps(a->nd, a->ps, b->nd, b->ps, &nd, ps))
            return sr_fail("'%s' %s and '%s' %s do not broadcast", a->name, PS(a), b->name, PS(b));
        int la = lrank(a), lb = lrank(b), lo = la > lb ? la : lb;
        kvs k = {0};
        sr_module *m = layer(I, kind, &k);
        int id = add_node(I, c->name, m, 2, (int[]){a->id, b->id});
        int bat = a->bat >= 0 ? a->bat + (lo - la) : -1;
        return id < 0 || !def_dyn(I, oname, id, nd, ps, bat, a->merged) ? -1 : 0;
    }
    int rev = a->store != V_DYN;
    ival *x = rev ? b : a, *cst = rev ? a : b;
    sr_tensor t = SR_TENSOR_INIT;
    int lo;
    if (per_sample(cst, x, &t, &lo))
        return -1;
    int64_t ps[SR_MAXDIM];
    int nd;
    if (bcast_ps(x->nd, x->ps, t.ndim, t.shape, &nd, ps)) {
        sr_fail("'%s' %s and constant '%s' %s do not broadcast", x->name, PS(x), cst->name, SR_SHAPE(&cst->s.v[0]));
        sr_tensor_free(&t);
        return -1;
    }
    kvs k = {0};
    if (t.ndim)
        kv_li(&k, "shape", t.shape, t.ndim);
    else
        kv_d(&k, "value", sr_f64(&t)[0]);
    if (rev && (!strcmp(kind, "sub") || !strcmp(kind, "div") || !strcmp(kind, "pow_of")))
        kv_s(&k, "reverse", "true");
    /* a learned constant (a norm's scale, a position embedding) is a
     * weight with its role; a fixed one a buffer */
    int role = constant_role(c, !strcmp(kind, "mul") || !strcmp(kind, "div") ? SR_ROLE_SCALE
                                : !strcmp(kind, "add") || !strcmp(kind, "sub") ? SR_ROLE_SHIFT : SR_ROLE_NONE,
                             cst, x, t.ndim, t.shape);
    kv_s(&k, "trainable", role ? "true" : "false");
    sr_module *m = layer(I, kind, &k);
    /* set in the graph's dtype (value= fills it in float32 first) */
    int rc = m ? set_param(m, "value", &t) : -1;
    if (!rc)
        sr_module_local_param(m, "value")->role = role;
    sr_tensor_free(&t);
    if (rc) {
        sr_module_release(m);
        return -1;
    }
    int id = add_node(I, c->name, m, 1, &x->id);
    int bat = x->bat >= 0 ? x->bat + (lo - lrank(x)) : -1;
    return id < 0 || !def_dyn(I, oname, id, nd, ps, bat, x->merged) ? -1 : 0;
}

static int do_arith(ctx *c, const char *kind) { return do_arith_named(c, kind, out_name(c, 0)); }

/* MatMul / Gemm by a constant matrix: a linear layer (weight (out, in)). */
static int emit_linear(ctx *c, const ival *x, const sr_tensor *w, int transpose_w, double alpha, const sr_tensor *bias,
                       double beta, const char *wname, const char *outname)
{
    imp *I = c->I;
    int lm, last = x->nd ? item(x, lrank(x) - 1, &lm) : -1;
    if (last < 0 || lm)
        return sr_fail("the product runs over the batch axis of '%s'", x->name);
    if (w->ndim != 2)
        return UNSUPPORTED("a product by a constant of rank %d", w->ndim);
    int64_t K = transpose_w ? w->shape[1] : w->shape[0], N = transpose_w ? w->shape[0] : w->shape[1];
    if (x->ps[x->nd - 1] != K)
        return sr_fail("'%s' ends in %lld, the matrix %s takes %lld", x->name, (long long)x->ps[x->nd - 1], SR_SHAPE(w),
                       (long long)K);
    kvs k = {0};
    kv_i(&k, "in_features", K);
    kv_i(&k, "out_features", N);
    kv_s(&k, "bias", bias ? "true" : "false");
    sr_module *m = layer(I, "linear", &k);
    sr_tensor wt = SR_TENSOR_INIT, bt = SR_TENSOR_INIT;
    int rc = !m;
    if (!rc) {
        /* weight (N, K) = W or Wᵀ, times alpha */
        rc = sr_tensor_alloc(&wt, SR_F64, 2, (int64_t[]){N, K});
        for (int64_t i = 0; !rc && i < N; i++)
            for (int64_t j = 0; j < K; j++)
                sr_f64(&wt)[i * K + j] = alpha * sr_get_flat(w, transpose_w ? i * K + j : j * N + i);
        rc = rc || set_param(m, "weight", &wt);
    }
    if (!rc && bias) {
        if (sr_numel(bias) != N) {
            rc = sr_fail("bias %s does not fit %lld outputs", SR_SHAPE(bias), (long long)N);
        } else {
            rc = sr_tensor_alloc(&bt, SR_F64, 1, &N);
            for (int64_t i = 0; !rc && i < N; i++)
                sr_f64(&bt)[i] = beta * sr_get_flat(bias, i);
            rc = rc || set_param(m, "bias", &bt);
        }
    }
    sr_tensor_free(&wt);
    sr_tensor_free(&bt);
    if (rc) {
        sr_module_release(m);
        return -1;
    }
    char nm[512];
    node_name(c->n, wname, nm, sizeof nm);
    int id = add_node(I, nm, m, 1, &x->id);
    if (id < 0)
        return -1;
    int64_t ps[SR_MAXDIM];
    memcpy(ps, x->ps, sizeof ps);
    ps[x->nd - 1] = N;
    /* the classifier candidate (not a transposed copy made here) */
    if (x >= I->v && x < I->v + I->nv) {
        I->head_in = index_of(I, x);
        I->head_node = c->idx;
    }
    return def_dyn(I, outname, id, x->nd, ps, x->bat, x->merged) ? 0 : -1;
}

static int do_matmul(ctx *c)
{
    imp *I = c->I;
    ival *a = c->in[0], *b = c->nin > 1 ? c->in[1] : NULL;
    if (!a || !b)
        return sr_fail("needs two operands");
    if (a->store == V_DYN && b->store == V_DYN) {
        if (a->nd < 2 || b->nd < 2 || (a->bat >= 0 && (a->bat >= lrank(a) - 2 || b->bat >= lrank(b) - 2)))
            return UNSUPPORTED("a product whose matrices are not after the batch (%s, %s)", a->name, b->name);
        if ((a->bat < 0) != (b->bat < 0) || (a->bat >= 0 && (lrank(a) - a->bat != lrank(b) - b->bat ||
                                                            a->merged != b->merged)))
            return sr_fail("the batch axes of '%s' and '%s' do not line up", a->name, b->name);
        int64_t lead[SR_MAXDIM], ps[SR_MAXDIM];
        int nl;
        if (bcast_ps(a->nd - 2, a->ps, b->nd - 2, b->ps, &nl, lead) || a->ps[a->nd - 1] != b->ps[b->nd - 2])
            return sr_fail("'%s' and '%s' do not multiply", a->name, b->name);
        memcpy(ps, lead, (size_t)nl * sizeof *ps);
        ps[nl] = a->ps[a->nd - 2];
        ps[nl + 1] = b->ps[b->nd - 1];
        kvs k = {0};
        sr_module *m = layer(I, "matmul", &k);
        int id = add_node(I, c->name, m, 2, (int[]){a->id, b->id});
        int la = lrank(a), lo = la > lrank(b) ? la : lrank(b);
        return id < 0 || !def_dyn(I, out_name(c, 0), id, nl + 2, ps, a->bat >= 0 ? a->bat + lo - la : -1, a->merged)
                   ? -1
                   : 0;
    }
    if (a->store != V_DYN)
        return UNSUPPORTED("a constant times a value (only value times constant)");
    if (sr_fold_val_batched(&b->s))
        return sr_fail("the matrix '%s' depends on the batch", b->name);
    /* x @ W + bias, when the only reader of the product adds a constant
     * vector (nn.Linear on more than two dims exports so) */
    const sr_tensor *bias = NULL;
    const char *outname = out_name(c, 0);
    ival *mo = NULL;
    for (int j = c->idx + 1; j < I->m->nnodes; j++) {
        const sr_onnx_node *nx = &I->m->nodes[j];
        int reads = 0;
        for (int k = 0; k < nx->ninputs; k++)
            reads += !strcmp(nx->inputs[k], outname);
        if (!reads)
            continue;
        if (reads == 1 && !strcmp(nx->op_type, "Add") && nx->ninputs == 2 && nx->noutputs >= 1) {
            const char *other = strcmp(nx->inputs[0], outname) ? nx->inputs[0] : nx->inputs[1];
            mo = find(I, other);
            if (mo && mo->store == V_STATIC && !sr_fold_val_batched(&mo->s) && mo->s.v[0].ndim == 1 &&
                mo->s.v[0].shape[0] == b->s.v[0].shape[b->s.v[0].ndim - 1] && !I->skip[j]) {
                int other_readers = 0;
                for (int q = c->idx + 1; q < I->m->nnodes; q++)
                    for (int k = 0; k < I->m->nodes[q].ninputs; k++)
                        other_readers += q != j && !strcmp(I->m->nodes[q].inputs[k], outname);
                for (int q = 0; q < I->m->noutputs; q++)
                    other_readers += !strcmp(I->m->outputs[q].name, outname);
                if (!other_readers) {
                    bias = &mo->s.v[0];
                    I->skip[j] = 1;
                    outname = nx->outputs[0];
                }
            }
        }
        break;
    }
    return emit_linear(c, a, &b->s.v[0], 0, 1, bias, 1, b->name, outname);
}

static int do_gemm(ctx *c)
{
    ival *a = c->in[0], *b = c->nin > 1 ? c->in[1] : NULL, *cc = c->nin > 2 ? c->in[2] : NULL;
    if (!a || !b || a->store != V_DYN || b->store != V_STATIC)
        return UNSUPPORTED("Gemm of a value by a constant matrix only");
    if (lrank(a) != 2 || a->bat > 0)
        return sr_fail("Gemm: '%s' must be (batch, features)", a->name);
    if (cc && cc->store != V_STATIC)
        return UNSUPPORTED("Gemm with a computed C");
    ival at;
    if (ai(c->n, "transA", 0)) {
        /* Aᵀ: only without a batch axis (it would move the batch) */
        if (a->bat >= 0)
            return sr_fail("Gemm with transA moves the batch axis of '%s'", a->name);
        kvs kv = {0};
        kv_li(&kv, "dims", (int64_t[]){0, 2, 1}, 3);
        char nm[600];
        snprintf(nm, sizeof nm, "%s/transpose", c->name);
        int id = add_node(c->I, nm, layer(c->I, "permute", &kv), 1, &a->id);
        if (id < 0)
            return -1;
        at = *a;
        at.id = id, at.ps[0] = a->ps[1], at.ps[1] = a->ps[0];
        a = &at;
    }
    int transb = (int)ai(c->n, "transB", 0);
    int64_t N = transb ? b->s.v[0].shape[0] : b->s.v[0].shape[1];
    const sr_tensor *bias = NULL, *t = cc ? &cc->s.v[0] : NULL;
    double beta = af(c->n, "beta", 1);
    int vector = t && (t->ndim == 1 || (t->ndim == 2 && t->shape[0] == 1)) && sr_numel(t) == N;
    if (vector)
        bias = t;
    char mid[600];
    snprintf(mid, sizeof mid, "%s//product", out_name(c, 0));
    if (emit_linear(c, a, &b->s.v[0], transb, af(c->n, "alpha", 1), bias, beta, b->name,
                    !t || vector ? out_name(c, 0) : mid))
        return -1;
    if (!t || vector)
        return 0;
    /* any other C broadcasts onto the product: a constant add, beta·C */
    ival *prod = find(c->I, mid), *cv = NULL;
    char cname[600];
    snprintf(cname, sizeof cname, "%s//beta_c", out_name(c, 0));
    if (!(cv = define(c->I, cname)))
        return -1;
    cv->store = V_STATIC;
    if (sr_fold_val_set(&cv->s, SR_ONNX_DOUBLE, t))
        return -1;
    for (int64_t i = 0; i < sr_numel(&cv->s.v[0]); i++)
        sr_f64(&cv->s.v[0])[i] *= beta;
    ctx sub = *c;
    sub.in[0] = prod, sub.in[1] = cv, sub.nin = 2;
    snprintf(sub.name, sizeof sub.name, "%.500s/c", c->name);
    return do_arith(&sub, "add");
}

/* SAME padding of one axis: total pad for size n, kernel extent ek, stride s. */
static void same_pad(int64_t n, int64_t ek, int64_t s, int upper, int64_t *lo, int64_t *hi)
{
    int64_t out = (n + s - 1) / s, tot = (out - 1) * s + ek - n;
    tot = tot < 0 ? 0 : tot;
    *lo = upper ? tot / 2 : tot - tot / 2;
    *hi = tot - *lo;
}

/* Kernels, strides, dilations and pads are bounded (far above any real
 * model's) so the window arithmetic stays inside int64. */
#define WINDOW_MAX ((int64_t)1 << 20)

/* kernel_shape / strides / pads / dilations / auto_pad of a 2-D window op
 * on x (N, C, H, W): pads as top, left, bottom, right. */
static int window2d(ctx *c, const ival *x, const int64_t *kernel, int64_t *s, int64_t *p, int64_t *d)
{
    int64_t t[8];
    int n;
    s[0] = s[1] = d[0] = d[1] = 1;
    p[0] = p[1] = p[2] = p[3] = 0;
    if (ints_of(c->n, "strides", NULL, t, 8, &n) || (n >= 0 && n != 2))
        return n >= 0 ? UNSUPPORTED("strides of %d dims (2-D only)", n) : -1;
    if (n == 2)
        s[0] = t[0], s[1] = t[1];
    if (ints_of(c->n, "dilations", NULL, t, 8, &n) || (n >= 0 && n != 2))
        return n >= 0 ? UNSUPPORTED("dilations of %d dims", n) : -1;
    if (n == 2)
        d[0] = t[0], d[1] = t[1];
    if (ints_of(c->n, "pads", NULL, t, 8, &n) || (n >= 0 && n != 4))
        return n >= 0 ? UNSUPPORTED("pads of %d entries", n) : -1;
    if (n == 4)
        p[0] = t[0], p[1] = t[1], p[2] = t[2], p[3] = t[3];
    for (int a = 0; a < 2; a++)
        if (kernel[a] < 1 || s[a] < 1 || d[a] < 1 || kernel[a] > WINDOW_MAX || s[a] > WINDOW_MAX ||
            d[a] > WINDOW_MAX)
            return sr_fail("kernel %lldx%lld, strides %lld,%lld, dilations %lld,%lld: each must be 1 to %lld",
                           (long long)kernel[0], (long long)kernel[1], (long long)s[0], (long long)s[1],
                           (long long)d[0], (long long)d[1], (long long)WINDOW_MAX);
    for (int i = 0; i < 4; i++)
        if (p[i] < 0 || p[i] > WINDOW_MAX)
            return sr_fail("pads %lld,%lld,%lld,%lld: each must be 0 to %lld", (long long)p[0], (long long)p[1],
                           (long long)p[2], (long long)p[3], (long long)WINDOW_MAX);
    const char *ap = as(c->n, "auto_pad", "NOTSET");
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        for (int a = 0; a < 2; a++)
            same_pad(x->ps[1 + a], d[a] * (kernel[a] - 1) + 1, s[a], ap[5] == 'U', &p[a], &p[a + 2]);
    } else if (!strcmp(ap, "VALID")) {
        p[0] = p[1] = p[2] = p[3] = 0;
    } else if (strcmp(ap, "NOTSET")) {
        return sr_fail("auto_pad '%s'", ap);
    }
    return 0;
}

/* A value without a batch axis whose first dim is 1 is, in memory, a
 * batch of one image: the image layers take it as that (ONNX's node tests,
 * imported with no_batch). */
static const ival *as_batch(ctx *c, const ival *x)
{
    if (x->bat >= 0 || x->nd < 2 || x->ps[0] != 1)
        return x;
    kvs k = {0};
    kv_li(&k, "shape", x->ps + 1, x->nd - 1);
    char nm[600];
    snprintf(nm, sizeof nm, "%s/batch", c->name);
    int id = add_node(c->I, nm, layer(c->I, "reshape", &k), 1, &x->id);
    if (id < 0)
        return NULL;
    c->batched = *x;
    c->batched.id = id;
    c->batched.nd = x->nd - 1;
    memmove(c->batched.ps, x->ps + 1, (size_t)(x->nd - 1) * sizeof *x->ps);
    c->batched.bat = 0;
    c->batched.merged = 0;
    return &c->batched;
}

/* An (N, C, H, W) batch of images, the batch first. */
static const ival *image_input(ctx *c, const ival *x)
{
    x = as_batch(c, x);
    if (x && (x->nd != 3 || x->bat != 0 || x->merged)) {
        sr_fail("'%s' must be an (N, C, H, W) batch of images with the batch first (2-D ops only)", x->name);
        return NULL;
    }
    return x;
}

/* A conv2d or conv_transpose2d layer (op: its output_padding) on x, weight
 * w and bias b (may be NULL), making the output ps (C, H, W). */
static int emit_conv(ctx *c, const char *kind, const ival *x, const ival *w, const ival *b, const int64_t *k,
                     const int64_t *s, const int64_t *p, const int64_t *d, const int64_t *op, int64_t groups,
                     const int64_t *ps)
{
    const sr_tensor *W = &w->s.v[0];
    if (ps[1] < 1 || ps[2] < 1)
        return sr_fail("the output would be %lldx%lld", (long long)ps[1], (long long)ps[2]);
    kvs kv = {0};
    kv_i(&kv, "in_channels", x->ps[0]);
    kv_i(&kv, "out_channels", ps[0]);
    kv_li(&kv, "kernel_size", k, 2);
    kv_li(&kv, "stride", s, 2);
    kv_li(&kv, "padding", p, 4);
    if (op)
        kv_li(&kv, "output_padding", op, 2);
    kv_li(&kv, "dilation", d, 2);
    kv_i(&kv, "groups", groups);
    kv_s(&kv, "bias", b ? "true" : "false");
    sr_module *m = layer(c->I, kind, &kv);
    if (!m || set_param(m, "weight", W) || (b && set_param(m, "bias", &b->s.v[0]))) {
        sr_module_release(m);
        return -1;
    }
    char nm[512];
    node_name(c->n, w->name, nm, sizeof nm);
    int id = add_node(c->I, nm, m, 1, &x->id);
    return id < 0 || !def_dyn(c->I, out_name(c, 0), id, 3, ps, 0, 0) ? -1 : 0;
}

static int do_conv(ctx *c)
{
    const ival *x = dyn_in(c, 0), *w = c->nin > 1 ? c->in[1] : NULL, *b = c->nin > 2 ? c->in[2] : NULL;
    if (!w || w->store != V_STATIC || (b && b->store != V_STATIC))
        return UNSUPPORTED("Conv with computed weights");
    const sr_tensor *W = &w->s.v[0];
    if (W->ndim != 4)
        return UNSUPPORTED("Conv of %d spatial dims (2-D only)", W->ndim - 2);
    if (!(x = image_input(c, x)))
        return -1;
    const int64_t *img = x->ps;
    int64_t k[2] = {W->shape[2], W->shape[3]}, s[2], p[4], d[2], group = ai(c->n, "group", 1);
    if (window2d(c, x, k, s, p, d))
        return -1;
    int64_t cin = img[0], cout = W->shape[0];
    if (group < 1 || group > cin || cin % group || W->shape[1] * group != cin)
        return sr_fail("weight %s does not fit %lld input channels in %lld groups", SR_SHAPE(W), (long long)cin,
                       (long long)group);
    int64_t ho = (img[1] + p[0] + p[2] - d[0] * (k[0] - 1) - 1) / s[0] + 1;
    int64_t wo = (img[2] + p[1] + p[3] - d[1] * (k[1] - 1) - 1) / s[1] + 1;
    int64_t ps[3] = {cout, ho, wo};
    return emit_conv(c, "conv2d", x, w, b, k, s, p, d, NULL, group, ps);
}

static int do_pool(ctx *c, int max)
{
    const ival *x = dyn_in(c, 0);
    int64_t k[8], s[2], p[4], d[2];
    int nk;
    if (only_first_output(c))
        return -1;
    if (ints_of(c->n, "kernel_shape", NULL, k, 8, &nk) || nk != 2)
        return nk >= 0 ? UNSUPPORTED("pooling over %d dims (2-D only)", nk) : sr_fail("needs kernel_shape");
    if (!(x = image_input(c, x)) || window2d(c, x, k, s, p, d))
        return -1;
    if (d[0] != 1 || d[1] != 1)
        return UNSUPPORTED("dilated pooling");
    int ceil_mode = (int)ai(c->n, "ceil_mode", 0);
    for (int a = 0; a < 2; a++)
        if (p[a] > k[a] / 2 || p[a + 2] > k[a] / 2)
            return UNSUPPORTED("pads wider than half the kernel");
    int64_t oh[2];
    for (int a = 0; a < 2; a++) {
        int64_t e = x->ps[1 + a] + p[a] + p[a + 2] - k[a];
        if (e < 0)
            return sr_fail("'%s' %s is smaller than the kernel %lldx%lld (pads %lld,%lld,%lld,%lld)", x->name, PS(x),
                           (long long)k[0], (long long)k[1], (long long)p[0], (long long)p[1], (long long)p[2],
                           (long long)p[3]);
        oh[a] = (ceil_mode ? e + s[a] - 1 : e) / s[a] + 1;
        if (ceil_mode && (oh[a] - 1) * s[a] >= x->ps[1 + a] + p[a])
            oh[a]--;
    }
    kvs kv = {0};
    kv_li(&kv, "kernel_size", k, 2);
    kv_li(&kv, "stride", s, 2);
    kv_li(&kv, "padding", p, 4);
    kv_s(&kv, "ceil_mode", ceil_mode ? "true" : "false");
    if (!max)
        kv_s(&kv, "count_include_pad", ai(c->n, "count_include_pad", 0) ? "true" : "false");
    int64_t ps[3] = {x->ps[0], oh[0], oh[1]};
    return emit1(c, max ? "maxpool2d" : "avgpool2d", &kv, x, 3, ps, 0, 0);
}

static int do_global_pool(ctx *c)
{
    const ival *x = as_batch(c, dyn_in(c, 0));
    if (!x)
        return -1;
    if (x->bat == 0 && !x->merged && x->nd == 3) {
        kvs kv = {0};
        kv_i(&kv, "output_size", 1);
        int64_t ps[3] = {x->ps[0], 1, 1};
        return emit1(c, "adaptive_avgpool2d", &kv, x, 3, ps, 0, 0);
    }
    /* other ranks: the mean over the dims after the channels */
    if (x->bat != 0 || x->merged || x->nd < 2)
        return sr_fail("'%s' must be (N, C, ...) with the batch first", x->name);
    int first = 1;
    int64_t dims[SR_MAXDIM], ps[SR_MAXDIM];
    int nr = 0;
    for (int d = first; d < x->nd; d++)
        dims[nr++] = d + 1;
    memcpy(ps, x->ps, sizeof ps);
    for (int d = first; d < x->nd; d++)
        ps[d] = 1;
    kvs kv = {0};
    kv_li(&kv, "dims", dims, nr);
    kv_s(&kv, "keepdim", "true");
    return emit1(c, "reduce", &kv, x, x->nd, ps, x->bat, 0);
}

static int do_batchnorm(ctx *c)
{
    imp *I = c->I;
    const ival *x = dyn_in(c, 0);
    if (ai(c->n, "training_mode", 0))
        return UNSUPPORTED("BatchNormalization in training mode");
    if (only_first_output(c))
        return -1;
    for (int i = 1; i < 5; i++)
        if (i >= c->nin || !c->in[i] || c->in[i]->store != V_STATIC || sr_fold_val_batched(&c->in[i]->s))
            return UNSUPPORTED("BatchNormalization with computed statistics");
    const sr_tensor *sc = &c->in[1]->s.v[0], *bb = &c->in[2]->s.v[0], *mu = &c->in[3]->s.v[0],
                    *var = &c->in[4]->s.v[0];
    if (!(x = as_batch(c, x)))
        return -1;
    if (x->bat != 0 || x->merged || x->nd < 1)
        return sr_fail("'%s' must be (N, C, ...) with the batch first", x->name);
    int64_t C = x->ps[0];
    if (sr_numel(sc) != C || sr_numel(bb) != C || sr_numel(mu) != C || sr_numel(var) != C)
        return sr_fail("statistics do not have %lld channels", (long long)C);
    double eps = af(c->n, "epsilon", 1e-5);
    char nm[512];
    node_name(c->n, c->in[1]->name, nm, sizeof nm);
    sr_module *m;
    kvs kv = {0};
    kv_i(&kv, "num_features", C);
    if (x->bat == 0 && x->nd == 3) {
        kv_d(&kv, "eps", eps);
        m = layer(I, "batchnorm2d", &kv);
        if (!m || set_param(m, "weight", sc) || set_param(m, "bias", bb) || set_param(m, "running_mean", mu) ||
            set_param(m, "running_var", var)) {
            sr_module_release(m);
            return -1;
        }
    } else {
        /* other ranks: the per-channel map it is in eval mode, folded */
        m = layer(I, "affine", &kv);
        sr_tensor w = SR_TENSOR_INIT, b = SR_TENSOR_INIT;
        int rc = !m || sr_tensor_alloc(&w, SR_F64, 1, &C) || sr_tensor_alloc(&b, SR_F64, 1, &C);
        for (int64_t i = 0; !rc && i < C; i++) {
            double s = sr_get_flat(sc, i) / sqrt(sr_get_flat(var, i) + eps);
            sr_f64(&w)[i] = s;
            sr_f64(&b)[i] = sr_get_flat(bb, i) - sr_get_flat(mu, i) * s;
        }
        rc = rc || set_param(m, "weight", &w) || set_param(m, "bias", &b);
        sr_tensor_free(&w);
        sr_tensor_free(&b);
        if (rc) {
            sr_module_release(m);
            return -1;
        }
    }
    int id = add_node(I, nm, m, 1, &x->id);
    return id < 0 || !def_dyn(I, out_name(c, 0), id, x->nd, x->ps, x->bat, 0) ? -1 : 0;
}

/* LayerNormalization over the last dim of x (its per-sample dim q), the
 * result defined as outname. */
static int layernorm_last(ctx *c, const ival *x, int q, const char *outname)
{
    imp *I = c->I;
    const ival *s = c->nin > 1 ? c->in[1] : NULL, *b = c->nin > 2 ? c->in[2] : NULL;
    if (!s || s->store != V_STATIC || (b && b->store != V_STATIC))
        return UNSUPPORTED("LayerNormalization with computed scale or bias");
    int64_t D = x->ps[q];
    kvs kv = {0};
    kv_i(&kv, "normalized_shape", D);
    kv_d(&kv, "eps", af(c->n, "epsilon", 1e-5));
    sr_module *m = layer(I, "layernorm", &kv);
    if (!m || set_param(m, "weight", &s->s.v[0]) || (b && set_param(m, "bias", &b->s.v[0]))) {
        sr_module_release(m);
        return -1;
    }
    char nm[512];
    node_name(c->n, s->name, nm, sizeof nm);
    int id = add_node(I, nm, m, 1, &x->id);
    return id < 0 || !def_dyn(I, outname, id, x->nd, x->ps, x->bat, x->merged) ? -1 : 0;
}

/* Over the last dim: srgeo's layernorm.  Over several trailing dims (not
 * the batch): those dims flattened into one, normalised, reshaped back
 * (the scale and bias, of the normalised shape, read flat). */
static int do_layernorm(ctx *c)
{
    const ival *x = dyn_in(c, 0);
    if (only_first_output(c))
        return -1;
    int lx = lrank(x), q;
    int64_t axis = ai(c->n, "axis", -1);
    axis = axis < 0 ? axis + lx : axis;
    if (axis < 0 || axis >= lx)
        return sr_fail("axis %lld for rank %d", (long long)ai(c->n, "axis", -1), lx);
    if (axis == lx - 1) {
        if (ps_axis(x, axis, "LayerNormalization", &q) || q != x->nd - 1)
            return -1;
        return layernorm_last(c, x, q, out_name(c, 0));
    }
    int64_t L1[SR_MAXDIM + 1], L2[SR_MAXDIM + 1], S1[SR_MAXDIM + 1], S2[SR_MAXDIM + 1];
    ldims(x, SR_FOLD_N1, L1);
    ldims(x, SR_FOLD_N2, L2);
    for (int i = 0; i <= axis; i++)
        S1[i] = L1[i], S2[i] = L2[i];
    for (int i = (int)axis + 1; i < lx; i++)
        S1[axis] *= L1[i], S2[axis] *= L2[i];
    if (S1[axis] != S2[axis])
        return UNSUPPORTED("LayerNormalization over the batch axis");
    char flat[4200], normed[4200]; /* names are at most 4096 bytes (io/onnx.c) */
    if (snprintf(flat, sizeof flat, "%s/flat", out_name(c, 0)) >= (int)sizeof flat ||
        snprintf(normed, sizeof normed, "%s/normed", out_name(c, 0)) >= (int)sizeof normed)
        return sr_fail("the output name is too long");
    if (reshape_to(c, x, S1, S2, (int)axis + 1, 0, flat))
        return -1;
    const ival *y = find(c->I, flat);
    if (!y || ps_axis(y, axis, "LayerNormalization", &q) || q != y->nd - 1)
        return y ? -1 : sr_fail("'%s' was not made", flat);
    if (layernorm_last(c, y, q, normed))
        return -1;
    return reshape_to(c, find(c->I, normed), L1, L2, lx, 0, out_name(c, 0));
}

/* Softmax, or LogSoftmax (log): the softmax layer. */
static int do_softmax(ctx *c, int log)
{
    const ival *x = dyn_in(c, 0);
    int lx = lrank(x), q;
    int64_t axis = ai(c->n, "axis", c->I->m->opset >= 13 ? -1 : 1);
    axis = axis < 0 ? axis + lx : axis;
    if (c->I->m->opset < 13 && axis != lx - 1)
        return UNSUPPORTED("Softmax of opset %lld over the flattened dims from axis %lld", (long long)c->I->m->opset,
                           (long long)axis);
    if (ps_axis(x, axis, "Softmax", &q))
        return -1;
    kvs kv = {0};
    kv_i(&kv, "dim", q + 1);
    if (log)
        kv_s(&kv, "log", "true");
    return emit_same(c, "softmax", &kv, x);
}

static int do_reduce(ctx *c, const char *kind)
{
    const ival *x = dyn_in(c, 0);
    int64_t axes[SR_MAXDIM + 1], dims[SR_MAXDIM];
    int na;
    if (ints_of(c->n, "axes", c->nin > 1 ? c->in[1] : NULL, axes, SR_MAXDIM + 1, &na))
        return -1;
    int keep = (int)ai(c->n, "keepdims", 1), lx = lrank(x);
    if (na == 0 && ai(c->n, "noop_with_empty_axes", 0))
        return alias(c->I, out_name(c, 0), x) ? 0 : -1;
    if (na <= 0) {
        if (x->bat >= 0)
            return sr_fail("reduces over every axis, the batch too");
        for (na = 0; na < lx; na++)
            axes[na] = na;
    }
    int red[SR_MAXDIM] = {0};
    for (int i = 0; i < na; i++) {
        int q;
        if (ps_axis(x, axes[i], c->n->op_type, &q))
            return -1;
        red[q] = 1;
        dims[i] = q + 1;
    }
    int64_t ps[SR_MAXDIM];
    int nd = 0, bat = x->bat;
    for (int i = 0; i < lx; i++) { /* a removed dim before the batch moves it left */
        int m, it = item(x, i, &m);
        if (it >= 0 && !m && red[it] && !keep && x->bat >= 0 && i < x->bat)
            bat--;
    }
    for (int d = 0; d < x->nd; d++)
        if (!red[d] || keep)
            ps[nd++] = red[d] ? 1 : x->ps[d];
    kvs kv = {0};
    kv_li(&kv, "dims", dims, na);
    kv_s(&kv, "op", kind);
    kv_s(&kv, "keepdim", keep ? "true" : "false");
    return emit1(c, "reduce", &kv, x, nd, ps, bat, x->merged);
}

static int do_pointwise(ctx *c, const char *kind)
{
    const ival *x = dyn_in(c, 0);
    const char *op = c->n->op_type;
    kvs kv = {0};
    if (!strcmp(op, "HardSigmoid")) {
        kv_d(&kv, "alpha", af(c->n, "alpha", 0.2));
        kv_d(&kv, "beta", af(c->n, "beta", 0.5));
    } else if (!strcmp(op, "LeakyRelu")) {
        kv_d(&kv, "negative_slope", af(c->n, "alpha", 0.01));
    } else if (!strcmp(op, "Elu")) {
        kv_d(&kv, "alpha", af(c->n, "alpha", 1));
    } else if (!strcmp(op, "Gelu")) {
        kv_s(&kv, "approximate", as(c->n, "approximate", "none"));
    } else if (!strcmp(op, "Clip")) {
        double lo = -INFINITY, hi = INFINITY;
        if (c->I->m->opset < 11) {
            lo = af(c->n, "min", -INFINITY);
            hi = af(c->n, "max", INFINITY);
        } else if ((c->nin > 1 && c->in[1] && scalar_of(c->in[1], &lo)) ||
                   (c->nin > 2 && c->in[2] && scalar_of(c->in[2], &hi))) {
            return -1;
        }
        if (lo > hi)
            return sr_fail("min %g is above max %g", lo, hi);
        kv_d(&kv, "min", lo);
        kv_d(&kv, "max", hi);
    } else if (!strcmp(op, "Pow")) {
        double e;
        kv_d(&kv, "exponent", scalar_of(c->in[1], &e) ? 0 : e);
    }
    return emit_same(c, kind, &kv, x);
}

/* Sum, Max, Min of several operands: a chain of two-operand layers. */
static int do_variadic(ctx *c, const char *kind)
{
    if (c->nin == 1)
        return alias(c->I, out_name(c, 0), dyn_in(c, 0)) ? 0 : -1;
    /* fold the constants among them first?  ONNX lists few; pairwise is exact */
    ival *acc = c->in[0];
    char tmp[4200]; /* names are at most 4096 bytes (io/onnx.c) */
    for (int i = 1; i < c->nin; i++) {
        ctx sub = *c;
        sub.in[0] = acc, sub.in[1] = c->in[i], sub.nin = 2;
        const char *name = i == c->nin - 1 ? out_name(c, 0) : tmp;
        snprintf(tmp, sizeof tmp, "%s//%d", out_name(c, 0), i);
        if (i < c->nin - 1)
            snprintf(sub.name, sizeof sub.name, "%.480s/%d", c->name, i);
        if (acc->store != V_DYN && c->in[i]->store != V_DYN) {
            /* two constants in a row: not worth a layer (rare); refuse */
            return UNSUPPORTED("%s of constants among values", c->n->op_type);
        }
        int rc = do_arith_named(&sub, kind, name);
        if (rc)
            return -1;
        acc = find(c->I, name);
    }
    return 0;
}

static int do_concat(ctx *c)
{
    imp *I = c->I;
    const ival *x = NULL;
    for (int i = 0; i < c->nin && !x; i++)
        x = dyn_in(c, i);
    int q;
    if (!sr_onnx_attr_find(c->n, "axis") && !(I->m->opset >= 1 && I->m->opset < 4))
        return sr_fail("attribute axis is required (Concat since opset 4)");
    if (ps_axis(x, ai(c->n, "axis", 1), "Concat", &q)) /* Concat-1 joined on axis 1 by default */
        return -1;
    kvs kv = {0};
    kv_i(&kv, "dim", q + 1);
    sr_module *m = layer(I, "concat", &kv);
    if (!m)
        return -1;
    int ids[64], nd = 0;
    int64_t total = 0;
    for (int i = 0; i < c->nin; i++) {
        const ival *v = c->in[i];
        if (!v)
            continue;
        if (v->store == V_DYN) {
            if (v->nd != x->nd || v->bat != x->bat || v->merged != x->merged) {
                sr_module_release(m);
                return sr_fail("'%s' and '%s' differ in rank or batch axis", v->name, x->name);
            }
            total += v->ps[q];
            ids[nd++] = v->id;
            continue;
        }
        sr_tensor t = SR_TENSOR_INIT;
        int lo;
        if (per_sample(v, x, &t, &lo) || t.ndim != x->nd) {
            sr_tensor_free(&t);
            sr_module_release(m);
            return sr_fail_context("constant '%s'", v->name);
        }
        if (sr_numel(&t) == 0) { /* an empty piece: nothing to join */
            sr_tensor_free(&t);
            continue;
        }
        int role = constant_role(c, SR_ROLE_TOKEN, v, x, t.ndim, t.shape);
        sr_param *p = sr_concat_add_constant(m, nd + (int)(m->nparams), t.ndim, t.shape, role != SR_ROLE_NONE);
        int rc = !p || sr_tensor_assign(&p->value, &t);
        if (p)
            p->role = role;
        total += t.shape[q];
        sr_tensor_free(&t);
        if (rc) {
            sr_module_release(m);
            return -1;
        }
    }
    int64_t ps[SR_MAXDIM];
    memcpy(ps, x->ps, sizeof ps);
    ps[q] = total;
    int id = add_node(I, c->name, m, nd, ids);
    return id < 0 || !def_dyn(I, out_name(c, 0), id, x->nd, ps, x->bat, x->merged) ? -1 : 0;
}

/* One slice of x along logical axis a into output `name`. */
static int slice_one(ctx *c, const ival *x, int64_t a, int64_t start, int64_t stop, int64_t step, const char *name,
                     int part)
{
    const int64_t big = (int64_t)1 << 50;
    int lx = lrank(x), m;
    int64_t b = a < 0 ? a + lx : a;
    if (b < 0 || b >= lx)
        return sr_fail("axis %lld for rank %d", (long long)a, lx);
    int it = item(x, (int)b, &m);
    if (it < 0 || m) {
        /* the batch: only the whole of it */
        if (step == 1 && start <= 0 && stop >= big)
            return def_dyn(c->I, name, x->id, x->nd, x->ps, x->bat, x->merged) ? 0 : -1;
        return sr_fail("slices the batch axis");
    }
    int64_t n = x->ps[it], st = start < -big ? -big : start > big ? big : start, en = stop < -big ? -big : stop > big ? big : stop;
    /* Python's (and ONNX's) clamping, to know the size */
    int64_t s = st < 0 ? st + n : st, e = en < 0 ? en + n : en, len;
    if (step > 0) {
        s = s < 0 ? 0 : s > n ? n : s, e = e < 0 ? 0 : e > n ? n : e;
        len = e > s ? (e - s + step - 1) / step : 0;
    } else {
        s = s < 0 ? 0 : s > n - 1 ? n - 1 : s, e = e < -1 ? -1 : e > n - 1 ? n - 1 : e;
        len = s > e ? (s - e - step - 1) / -step : 0;
    }
    if (len == n && step == 1)
        return def_dyn(c->I, name, x->id, x->nd, x->ps, x->bat, x->merged) ? 0 : -1;
    if (len == 0)
        return UNSUPPORTED("an empty slice");
    kvs kv = {0};
    kv_i(&kv, "dim", it + 1);
    kv_i(&kv, "start", s);
    kv_i(&kv, "stop", step > 0 ? s + len * step : (s + len * step < 0 ? -big : s + len * step));
    kv_i(&kv, "step", step);
    int64_t ps[SR_MAXDIM];
    memcpy(ps, x->ps, sizeof ps);
    ps[it] = len;
    sr_module *mod = layer(c->I, "slice", &kv);
    char nm[600];
    if (part >= 0)
        snprintf(nm, sizeof nm, "%s/%d", c->name, part);
    else
        snprintf(nm, sizeof nm, "%s", c->name);
    int id = add_node(c->I, nm, mod, 1, &x->id);
    return id < 0 || !def_dyn(c->I, name, id, x->nd, ps, x->bat, x->merged) ? -1 : 0;
}

static int do_slice(ctx *c)
{
    const ival *x = dyn_in(c, 0);
    int64_t st[SR_MAXDIM + 1], en[SR_MAXDIM + 1], ax[SR_MAXDIM + 1], sp[SR_MAXDIM + 1];
    int ns, ne, na = -1, nsp = -1;
    if (c->I->m->opset < 10) {
        if (ints_of(c->n, "starts", NULL, st, SR_MAXDIM + 1, &ns) || ints_of(c->n, "ends", NULL, en, SR_MAXDIM + 1, &ne) ||
            ints_of(c->n, "axes", NULL, ax, SR_MAXDIM + 1, &na))
            return -1;
    } else if (ints_of(c->n, NULL, c->nin > 1 ? c->in[1] : NULL, st, SR_MAXDIM + 1, &ns) ||
               ints_of(c->n, NULL, c->nin > 2 ? c->in[2] : NULL, en, SR_MAXDIM + 1, &ne) ||
               ints_of(c->n, NULL, c->nin > 3 ? c->in[3] : NULL, ax, SR_MAXDIM + 1, &na) ||
               ints_of(c->n, NULL, c->nin > 4 ? c->in[4] : NULL, sp, SR_MAXDIM + 1, &nsp)) {
        return -1;
    }
    if (ns < 1 || ns != ne || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
        return sr_fail("starts, ends, axes and steps differ in length");
    /* one slice layer per axis, chained */
    const ival *cur = x;
    for (int i = 0; i < ns; i++) {
        char tmp[4200]; /* names are at most 4096 bytes (io/onnx.c) */
        const char *name = i == ns - 1 ? out_name(c, 0) : tmp;
        snprintf(tmp, sizeof tmp, "%s//axis%d", out_name(c, 0), i);
        int64_t step = nsp >= 0 ? sp[i] : 1;
        if (!step)
            return sr_fail("step 0");
        if (slice_one(c, cur, na >= 0 ? ax[i] : i, st[i], en[i], step, name, ns > 1 ? i : -1))
            return -1;
        cur = find(c->I, name);
    }
    return 0;
}

static int do_split(ctx *c)
{
    const ival *x = dyn_in(c, 0);
    int q, no = c->n->noutputs;
    int64_t axis = ai(c->n, "axis", 0), sz[256];
    int ns;
    if (no < 1 || no > 256)
        return sr_fail("%d outputs (1 to 256)", no);
    if (ps_axis(x, axis, "Split", &q) || ints_of(c->n, "split", c->nin > 1 ? c->in[1] : NULL, sz, 256, &ns))
        return -1;
    if (ns < 0) {
        /* Split-18's num_outputs: ceil(n / no) each, the last one what is left */
        int64_t each = sr_onnx_attr_find(c->n, "num_outputs") ? (x->ps[q] + no - 1) / no : x->ps[q] / no;
        if (each * no != x->ps[q] && (each * (no - 1) >= x->ps[q] || !sr_onnx_attr_find(c->n, "num_outputs")))
            return sr_fail("%lld does not split in %d", (long long)x->ps[q], no);
        for (int i = 0; i < no; i++)
            sz[i] = i < no - 1 ? each : x->ps[q] - each * (no - 1);
        ns = no;
    }
    if (ns != no)
        return sr_fail("%d sizes for %d outputs", ns, no);
    for (int i = 0; i < no; i++)
        if (sz[i] < 0 || sz[i] > x->ps[q])
            return sr_fail("split size %lld of an axis of %lld", (long long)sz[i], (long long)x->ps[q]);
    int64_t off = 0;
    for (int i = 0; i < no; i++) {
        if (*c->n->outputs[i] && slice_one(c, x, axis, off, off + sz[i], 1, c->n->outputs[i], i))
            return -1;
        off += sz[i];
    }
    if (off != x->ps[q])
        return sr_fail("sizes add up to %lld, the axis is %lld", (long long)off, (long long)x->ps[q]);
    return 0;
}

static int do_gather(ctx *c)
{
    const ival *x = dyn_in(c, 0), *ix = c->nin > 1 ? c->in[1] : NULL;
    int q;
    if (!ix || ix->store != V_STATIC || sr_fold_val_batched(&ix->s))
        return UNSUPPORTED("Gather with computed indices");
    int64_t axis = ai(c->n, "axis", 0);
    if (ps_axis(x, axis, "Gather", &q))
        return -1;
    const sr_tensor *t = &ix->s.v[0];
    int64_t k = sr_numel(t);
    if (k < 1 || k > 65536)
        return UNSUPPORTED("Gather of %lld indices", (long long)k);
    if (x->nd - 1 + t->ndim > SR_MAXDIM - 1)
        return sr_fail("the result has too many dims");
    int64_t *idx = malloc((size_t)k * sizeof *idx);
    if (!idx)
        return sr_fail("out of memory");
    for (int64_t i = 0; i < k; i++) {
        idx[i] = sr_fold_int(sr_f64(t)[i]);
        if (idx[i] < -x->ps[q] || idx[i] >= x->ps[q]) { /* refused here, not at the first forward */
            int64_t bad = idx[i];
            free(idx);
            return sr_fail("index %lld is out of range for axis %lld (of size %lld) of %s", (long long)bad,
                           (long long)axis, (long long)x->ps[q], PS(x));
        }
    }
    kvs kv = {0};
    kv_i(&kv, "dim", q + 1);
    kv_li(&kv, "index", idx, (int)k);
    free(idx);
    /* the result replaces the axis by the indices' dims */
    int64_t ps[SR_MAXDIM], sel[SR_MAXDIM];
    int nd = 0;
    memcpy(sel, x->ps, sizeof sel);
    sel[q] = k;
    for (int d = 0; d < x->nd; d++) {
        if (d != q) {
            ps[nd++] = x->ps[d];
            continue;
        }
        for (int j = 0; j < t->ndim; j++)
            ps[nd++] = t->shape[j];
    }
    int bat = x->bat, lx = lrank(x);
    int64_t b = axis < 0 ? axis + lx : axis; /* the logical axis gathered */
    if (bat >= 0 && b < bat)
        bat += t->ndim - 1;
    if (t->ndim == 1)
        return emit1(c, "index_select", &kv, x, nd, ps, bat, x->merged);
    sr_module *m = layer(c->I, "index_select", &kv);
    char nm[600];
    snprintf(nm, sizeof nm, "%s/select", c->name);
    int id = add_node(c->I, nm, m, 1, &x->id);
    if (id < 0)
        return -1;
    kvs kr = {0};
    kv_li(&kr, "shape", ps, nd);
    m = layer(c->I, "reshape", &kr);
    id = add_node(c->I, c->name, m, 1, &id);
    return id < 0 || !def_dyn(c->I, out_name(c, 0), id, nd, ps, bat, x->merged) ? -1 : 0;
}

static int do_pad(ctx *c)
{
    const ival *x = dyn_in(c, 0);
    int lx = lrank(x), np;
    int64_t pads[2 * SR_MAXDIM + 2], axes[SR_MAXDIM + 1];
    const char *mode = as(c->n, "mode", "constant");
    double value = 0;
    if (c->I->m->opset < 11) {
        if (ints_of(c->n, "pads", NULL, pads, 2 * SR_MAXDIM + 2, &np))
            return -1;
        value = af(c->n, "value", 0);
    } else {
        if (ints_of(c->n, NULL, c->nin > 1 ? c->in[1] : NULL, pads, 2 * SR_MAXDIM + 2, &np))
            return -1;
        if (c->nin > 2 && c->in[2] && *c->n->inputs[2] && scalar_of(c->in[2], &value))
            return -1;
    }
    int na = -1;
    if (c->nin > 3 && c->in[3] && ints_of(c->n, NULL, c->in[3], axes, SR_MAXDIM + 1, &na))
        return -1;
    int nax = na >= 0 ? na : lx;
    if (np != 2 * nax)
        return sr_fail("%d pads for %d axes", np, nax);
    int64_t lo[SR_MAXDIM + 1] = {0}, hi[SR_MAXDIM + 1] = {0};
    for (int i = 0; i < nax; i++) {
        int64_t a = na >= 0 ? axes[i] : i;
        a = a < 0 ? a + lx : a;
        if (a < 0 || a >= lx)
            return sr_fail("axis %lld", (long long)axes[i]);
        lo[a] = pads[i], hi[a] = pads[i + nax];
    }
    int64_t ps[SR_MAXDIM], torch_pads[2 * SR_MAXDIM];
    memcpy(ps, x->ps, sizeof ps);
    for (int i = 0; i < lx; i++) {
        int m, it = item(x, i, &m);
        if (it < 0 || m) {
            if (lo[i] || hi[i])
                return sr_fail("pads the batch axis");
            continue;
        }
        ps[it] = x->ps[it] + lo[i] + hi[i];
        torch_pads[2 * (x->nd - 1 - it)] = lo[i];
        torch_pads[2 * (x->nd - 1 - it) + 1] = hi[i];
        if (ps[it] < 1)
            return sr_fail("pads crop axis %d to nothing", i);
    }
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge"))
        return UNSUPPORTED("Pad mode '%s'", mode);
    /* pads of zeros (torch.onnx puts one before each average pool): the
     * value itself, not a copy of it per pass */
    int any = 0;
    for (int d = 0; d < 2 * x->nd; d++)
        any |= torch_pads[d] != 0;
    if (!any)
        return alias(c->I, out_name(c, 0), x) ? 0 : -1;
    /* what the layer would refuse at the first forward, refused here: a
     * reflection longer than its axis; a few bytes of pads asking for
     * gigabytes (at most 2^24 values per sample, or 4 times the input's) */
    int64_t nin = 1, nout = 1;
    for (int d = 0; d < x->nd; d++) {
        if (!strcmp(mode, "reflect") && ps[d] != x->ps[d] &&
            (torch_pads[2 * (x->nd - 1 - d)] >= x->ps[d] || torch_pads[2 * (x->nd - 1 - d) + 1] >= x->ps[d]))
            return sr_fail("reflect pads %lld, %lld of an axis of %lld (each must be less)",
                           (long long)torch_pads[2 * (x->nd - 1 - d)], (long long)torch_pads[2 * (x->nd - 1 - d) + 1],
                           (long long)x->ps[d]);
        nin *= x->ps[d];
        nout = nout > ((int64_t)1 << 40) / ps[d] ? (int64_t)1 << 41 : nout * ps[d];
    }
    if (nout > ((int64_t)1 << 24) && nout > 4 * nin)
        return sr_fail("pads make %s of %s (at most 2^24 values, or 4 times the input's)",
                       DIMS(x->nd, ps), PS(x));
    kvs kv = {0};
    kv_li(&kv, "padding", torch_pads, 2 * x->nd);
    if (!strcmp(mode, "constant"))
        kv_d(&kv, "value", value);
    kv_s(&kv, "mode", mode);
    return emit1(c, "pad", &kv, x, x->nd, ps, x->bat, x->merged);
}

/* Shape / Size of a dynamic value: static, per batch size. */
static int do_shape(ctx *c, int size)
{
    const ival *x = dyn_in(c, 0);
    int lx = lrank(x);
    int64_t L[2][SR_MAXDIM + 1];
    ldims(x, SR_FOLD_N1, L[0]);
    ldims(x, SR_FOLD_N2, L[1]);
    int64_t st = ai(c->n, "start", 0), en = ai(c->n, "end", lx);
    st = st < 0 ? st + lx : st, en = en < 0 ? en + lx : en;
    st = st < 0 ? 0 : st > lx ? lx : st, en = en < 0 ? 0 : en > lx ? lx : en;
    ival *o = define(c->I, out_name(c, 0));
    if (!o)
        return -1;
    o->store = V_STATIC;
    o->s.type = SR_ONNX_INT64;
    for (int k = 0; k < 2; k++) {
        int64_t n = size ? 1 : en > st ? en - st : 0;
        if (sr_tensor_alloc(&o->s.v[k], SR_F64, size ? 0 : 1, &n))
            return -1;
        if (size) {
            double t = 1;
            for (int i = 0; i < lx; i++)
                t *= (double)L[k][i];
            sr_f64(&o->s.v[k])[0] = t;
        } else {
            for (int64_t i = st; i < en; i++)
                sr_f64(&o->s.v[k])[i - st] = (double)L[k][i];
        }
    }
    return 0;
}

/* Expand of a value: to its own shape an alias; a broadcast that grows
 * per-sample dims (torch's F.normalize writes norm.expand_as(x)) a product
 * by a constant of ones of the expanded shape, exact. */
static int do_expand(ctx *c)
{
    ival *x = dyn_in(c, 0), *s = c->nin > 1 ? c->in[1] : NULL;
    if (!s || s->store != V_STATIC)
        return sr_fail("the shape must be a constant");
    int lx = lrank(x), ns = (int)sr_numel(&s->s.v[0]), lo = ns > lx ? ns : lx, grow = 0;
    int64_t L[SR_MAXDIM + 1], T[SR_MAXDIM + 1];
    ldims(x, SR_FOLD_N1, L);
    if (lo > SR_MAXDIM)
        return sr_fail("expands to %d dims", lo);
    int b = x->bat >= 0 ? x->bat + (lo - lx) : -1; /* the batch in the expanded dims */
    for (int i = 0; i < lo; i++) {
        int ix = i - (lo - lx), is = i - (lo - ns);
        int64_t have = ix >= 0 ? L[ix] : 1, want = is >= 0 ? sr_fold_int(sr_f64(&s->s.v[0])[is]) : 1;
        if (i == b) { /* the batch itself (or the exported one): left to broadcast */
            T[i] = 1;
            continue;
        }
        if (want != 1 && have != 1 && want != have)
            return sr_fail("'%s' %s does not expand from %lld to %lld along dim %d", x->name, DIMS(lx, L),
                           (long long)have, (long long)want, i);
        if (want < 0 || want > VALUE_MAX)
            return sr_fail("expands dim %d to %lld", i, (long long)want);
        T[i] = have == 1 ? want : have;
        grow |= T[i] != have || ix < 0;
    }
    if (!grow)
        return alias(c->I, out_name(c, 0), x) ? 0 : -1;
    if (x->merged)
        return UNSUPPORTED("Expand of a value whose batch axis holds other dims");
    ival ones = {.name = "expand ones", .store = V_STATIC};
    sr_tensor t = SR_TENSOR_INIT;
    int rc = sr_tensor_alloc(&t, SR_F64, lo, T);
    for (int64_t e = 0; !rc && e < sr_numel(&t); e++)
        sr_f64(&t)[e] = 1;
    rc = rc || sr_fold_val_set(&ones.s, SR_ONNX_FLOAT, &t);
    sr_tensor_free(&t);
    if (!rc) {
        ctx m = *c;
        m.in[0] = x, m.in[1] = &ones, m.nin = 2;
        rc = do_arith(&m, "mul");
    }
    sr_fold_val_free(&ones.s);
    return rc ? -1 : 0;
}

/* --- ops composed of layers --------------------------------------------------------- */
/* A step of a composite op: c with input 0 (and 1) replaced, output 0
 * named oname (made from c's output name and suffix), its nodes named
 * c's name and suffix. */
static ctx step(const ctx *c, ival *in0, ival *in1, const char *suffix, char *oname, size_t cap)
{
    ctx s = *c;
    s.in[0] = in0;
    if (in1)
        s.in[1] = in1, s.nin = s.nin < 2 ? 2 : s.nin;
    snprintf(oname, cap, "%s//%s", out_name(c, 0), suffix);
    s.oname = oname;
    snprintf(s.name, sizeof s.name, "%.480s/%s", c->name, suffix);
    return s;
}

/* A pointwise layer `kind` on x into c's output 0 (exponent e for pow). */
static int pointwise_into(ctx *c, const char *kind, const ival *x, double e)
{
    kvs kv = {0};
    if (e)
        kv_d(&kv, "exponent", e);
    return emit_same(c, kind, &kv, x);
}

/* PRelu(x, slope) = relu(x) + slope·(x − relu(x)): the slope a layer's
 * constant operand (a weight when it is a float initializer). */
static int op_prelu(ctx *c, const char *arg)
{
    (void)arg;
    ival *x = c->in[0], *slope = c->nin > 1 ? c->in[1] : NULL;
    if (!slope || slope->store != V_STATIC)
        return UNSUPPORTED("PRelu with a computed slope");
    char rn[4200], nn[4200], sn[4200]; /* names are at most 4096 bytes (io/onnx.c) */
    ctx r = step(c, x, NULL, "relu", rn, sizeof rn);
    if (pointwise_into(&r, "relu", x, 0))
        return -1;
    ctx n = step(c, x, find(c->I, rn), "negative", nn, sizeof nn);
    if (do_arith(&n, "sub"))
        return -1;
    ctx m = step(c, find(c->I, nn), slope, "slope", sn, sizeof sn);
    m.role = SR_ROLE_SLOPE;
    if (do_arith(&m, "mul"))
        return -1;
    ctx a = *c;
    a.in[0] = find(c->I, rn), a.in[1] = find(c->I, sn), a.nin = 2;
    return do_arith(&a, "add");
}

/* ReduceL2 = sqrt(ReduceSum(x²)), ReduceSumSquare = ReduceSum(x²), ReduceL1
 * = ReduceSum(|x|) (the axes and keepdims are the node's). */
static int op_reduce_norm(ctx *c, const char *arg)
{
    ival *x = c->in[0];
    char pn[4200], sn[4200];
    int l1 = !strcmp(arg, "l1"), l2 = !strcmp(arg, "l2");
    ctx p = step(c, x, NULL, l1 ? "abs" : "square", pn, sizeof pn);
    if (pointwise_into(&p, l1 ? "abs" : "pow", x, l1 ? 0 : 2))
        return -1;
    ctx r = step(c, find(c->I, pn), NULL, "sum", sn, sizeof sn);
    if (!l2)
        r.oname = NULL, snprintf(r.name, sizeof r.name, "%s", c->name);
    if (do_reduce(&r, "sum"))
        return -1;
    return l2 ? pointwise_into(c, "sqrt", find(c->I, sn), 0) : 0;
}

/* GlobalMaxPool: the max over the dims after the channels. */
static int op_global_max(ctx *c, const char *arg)
{
    (void)arg;
    const ival *x = as_batch(c, dyn_in(c, 0));
    if (!x)
        return -1;
    if (x->bat != 0 || x->merged || x->nd < 2)
        return sr_fail("'%s' must be (N, C, ...) with the batch first", x->name);
    int64_t dims[SR_MAXDIM], ps[SR_MAXDIM];
    int nr = 0;
    memcpy(ps, x->ps, sizeof ps);
    for (int d = 1; d < x->nd; d++)
        dims[nr++] = d + 1, ps[d] = 1;
    kvs kv = {0};
    kv_li(&kv, "dims", dims, nr);
    kv_s(&kv, "op", "max");
    kv_s(&kv, "keepdim", "true");
    return emit1(c, "reduce", &kv, x, x->nd, ps, 0, 0);
}

/* ConvTranspose (2-D): a conv_transpose2d layer.  output_shape and
 * SAME auto_pad set the pads as ONNX says (the total split with the odd one
 * at the end for SAME_UPPER and the default, at the start for SAME_LOWER);
 * an output_shape beyond the full output adds the rows past it as
 * output_padding. */
static int op_conv_transpose(ctx *c, const char *arg)
{
    (void)arg;
    const ival *x = dyn_in(c, 0), *w = c->nin > 1 ? c->in[1] : NULL, *b = c->nin > 2 ? c->in[2] : NULL;
    if (!w || w->store != V_STATIC || (b && b->store != V_STATIC))
        return UNSUPPORTED("ConvTranspose with computed weights");
    const sr_tensor *W = &w->s.v[0];
    if (W->ndim != 4)
        return UNSUPPORTED("ConvTranspose of %d spatial dims (2-D only)", W->ndim - 2);
    if (!(x = image_input(c, x)))
        return -1;
    int64_t g = ai(c->n, "group", 1), s[2] = {1, 1}, d[2] = {1, 1}, op[2] = {0, 0}, p[4] = {0, 0, 0, 0}, t[8], os[2];
    int n, nos;
    if (ints_of(c->n, "strides", NULL, t, 8, &n) || (n >= 0 && n != 2))
        return n >= 0 ? sr_fail("strides of %d dims", n) : -1;
    if (n == 2)
        s[0] = t[0], s[1] = t[1];
    if (ints_of(c->n, "dilations", NULL, t, 8, &n) || (n >= 0 && n != 2))
        return n >= 0 ? sr_fail("dilations of %d dims", n) : -1;
    if (n == 2)
        d[0] = t[0], d[1] = t[1];
    if (ints_of(c->n, "output_padding", NULL, t, 8, &n) || (n >= 0 && n != 2))
        return n >= 0 ? sr_fail("output_padding of %d dims", n) : -1;
    if (n == 2)
        op[0] = t[0], op[1] = t[1];
    if (ints_of(c->n, "pads", NULL, t, 8, &n) || (n >= 0 && n != 4))
        return n >= 0 ? sr_fail("pads of %d entries", n) : -1;
    if (n == 4)
        memcpy(p, t, sizeof p);
    if (ints_of(c->n, "output_shape", NULL, t, 8, &nos))
        return -1;
    int64_t cin = x->ps[0], k[2] = {W->shape[2], W->shape[3]};
    if (g < 1 || W->shape[0] != cin || cin % g)
        return sr_fail("weight %s does not fit %lld input channels in %lld groups", SR_SHAPE(W), (long long)cin,
                       (long long)g);
    for (int a = 0; a < 2; a++)
        if (k[a] < 1 || s[a] < 1 || d[a] < 1 || s[a] > WINDOW_MAX || d[a] > WINDOW_MAX || k[a] > WINDOW_MAX ||
            op[a] < 0 || op[a] > WINDOW_MAX)
            return sr_fail("kernel %lldx%lld, strides %lld,%lld, dilations %lld,%lld, output_padding %lld,%lld",
                           (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1], (long long)d[0],
                           (long long)d[1], (long long)op[0], (long long)op[1]);
    const char *ap = as(c->n, "auto_pad", "NOTSET");
    int same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    if (nos >= 0 || same) {
        /* the output size asked for: the pads follow */
        if (nos >= 0 && nos != 2 && nos != 4)
            return sr_fail("output_shape of %d entries", nos);
        for (int a = 0; a < 2; a++) {
            os[a] = nos >= 0 ? t[nos - 2 + a] : x->ps[1 + a] * s[a];
            int64_t tot = s[a] * (x->ps[1 + a] - 1) + op[a] + (k[a] - 1) * d[a] + 1 - os[a];
            if (tot < 0) { /* more than the full output: rows past it, as output_padding */
                op[a] += -tot;
                tot = 0;
            }
            int lower = !strcmp(ap, "SAME_LOWER");
            p[a] = lower ? tot - tot / 2 : tot / 2;
            p[a + 2] = tot - p[a];
        }
    } else if (!strcmp(ap, "VALID")) {
        memset(p, 0, sizeof p);
    } else if (strcmp(ap, "NOTSET")) {
        return sr_fail("auto_pad '%s'", ap);
    }
    for (int i = 0; i < 4; i++)
        if (p[i] < 0 || p[i] > WINDOW_MAX)
            return sr_fail("pads %lld,%lld,%lld,%lld", (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3]);
    for (int a = 0; a < 2; a++)
        if (op[a] >= s[a] && op[a] >= d[a])
            return UNSUPPORTED("ConvTranspose output_padding %lld not below the stride or the dilation", (long long)op[a]);
    int64_t cout = W->shape[1] * g, ps[3] = {cout, 0, 0};
    for (int a = 0; a < 2; a++)
        ps[1 + a] = (x->ps[1 + a] - 1) * s[a] - p[a] - p[a + 2] + d[a] * (k[a] - 1) + op[a] + 1;
    return emit_conv(c, "conv_transpose2d", x, w, b, k, s, p, d, op, g, ps);
}

/* Mish (opset 18) = x·tanh(softplus(x)), as torch computes it (below opset
 * 18 torch.onnx writes these three ops itself). */
static int op_mish(ctx *c, const char *arg)
{
    (void)arg;
    ival *x = c->in[0];
    char sn[4200], tn[4200]; /* names are at most 4096 bytes (io/onnx.c) */
    ctx s = step(c, x, NULL, "softplus", sn, sizeof sn);
    if (pointwise_into(&s, "softplus", x, 0))
        return -1;
    ctx t = step(c, find(c->I, sn), NULL, "tanh", tn, sizeof tn);
    if (pointwise_into(&t, "tanh", find(c->I, sn), 0))
        return -1;
    ctx m = *c;
    m.in[1] = find(c->I, tn), m.nin = 2;
    return do_arith(&m, "mul");
}

/* DepthToSpace (mode DCR, TensorFlow's depth_to_space; CRD, torch's
 * pixel_shuffle) and SpaceToDepth (the inverse of DCR) of an (N, C, H, W)
 * image, b the block size: a reshape to five dims per sample, a permute
 * and a reshape, as ONNX defines them. */
static int op_depth_space(ctx *c, const char *arg)
{
    int to_space = !strcmp(arg, "to_space");
    const ival *x = image_input(c, dyn_in(c, 0));
    if (!x)
        return -1;
    int64_t b = ai(c->n, "blocksize", 0), C = x->ps[0], H = x->ps[1], W = x->ps[2];
    const char *mode = as(c->n, "mode", "DCR");
    if (b < 1 || b > WINDOW_MAX)
        return sr_fail("blocksize %lld", (long long)b);
    if (to_space && strcmp(mode, "DCR") && strcmp(mode, "CRD"))
        return sr_fail("mode '%s' (DCR or CRD)", mode);
    if (to_space ? C % (b * b) : H % b || W % b)
        return sr_fail("'%s' %s does not split into blocks of %lld", x->name, PS(x), (long long)b);
    int64_t s5[5], perm[5], out[3];
    if (!to_space) { /* (C, H/b, b1, W/b, b2) -> (b1, b2, C, H/b, W/b) */
        memcpy(s5, (int64_t[]){C, H / b, b, W / b, b}, sizeof s5);
        memcpy(perm, (int64_t[]){2, 4, 0, 1, 3}, sizeof perm);
        memcpy(out, (int64_t[]){C * b * b, H / b, W / b}, sizeof out);
    } else if (!strcmp(mode, "DCR")) { /* (b1, b2, C', H, W) -> (C', H, b1, W, b2) */
        memcpy(s5, (int64_t[]){b, b, C / (b * b), H, W}, sizeof s5);
        memcpy(perm, (int64_t[]){2, 3, 0, 4, 1}, sizeof perm);
    } else { /* CRD: (C', b1, b2, H, W) -> (C', H, b1, W, b2) */
        memcpy(s5, (int64_t[]){C / (b * b), b, b, H, W}, sizeof s5);
        memcpy(perm, (int64_t[]){0, 3, 1, 4, 2}, sizeof perm);
    }
    if (to_space)
        memcpy(out, (int64_t[]){C / (b * b), H * b, W * b}, sizeof out);
    int64_t dims[6] = {0};
    for (int i = 0; i < 5; i++)
        dims[1 + i] = 1 + perm[i];
    kvs k1 = {0}, k2 = {0}, k3 = {0};
    kv_li(&k1, "shape", s5, 5);
    kv_li(&k2, "dims", dims, 6);
    kv_li(&k3, "shape", out, 3);
    char nm[600];
    snprintf(nm, sizeof nm, "%s/blocks", c->name);
    int id = add_node(c->I, nm, layer(c->I, "reshape", &k1), 1, &x->id);
    snprintf(nm, sizeof nm, "%s/permute", c->name);
    if (id >= 0)
        id = add_node(c->I, nm, layer(c->I, "permute", &k2), 1, &id);
    if (id >= 0)
        id = add_node(c->I, c->name, layer(c->I, "reshape", &k3), 1, &id);
    return id < 0 || !def_dyn(c->I, out_name(c, 0), id, 3, out, 0, 0) ? -1 : 0;
}

/* x op the number k (kind "mul" or "add") into c's output 0: a fixed
 * buffer, not a weight (an attribute of the op, not a learned constant). */
static int number_into(ctx *c, const char *kind, const ival *x, double k)
{
    kvs kv = {0};
    kv_d(&kv, "value", k);
    kv_s(&kv, "trainable", "false");
    sr_module *m = layer(c->I, kind, &kv);
    sr_tensor t = SR_TENSOR_INIT;
    int rc = !m || sr_tensor_alloc(&t, SR_F64, 0, NULL);
    if (!rc) {
        sr_f64(&t)[0] = k;
        rc = set_param(m, "value", &t); /* in the graph's dtype (value= fills it in float32) */
    }
    sr_tensor_free(&t);
    if (rc) {
        sr_module_release(m);
        return -1;
    }
    int id = add_node(c->I, c->name, m, 1, &x->id);
    return id < 0 || !def_dyn(c->I, out_name(c, 0), id, x->nd, x->ps, x->bat, x->merged) ? -1 : 0;
}

/* Selu = γ·elu(x; α); Celu = α·elu(x/α; 1) (torch's celu); Softsign =
 * x / (1 + |x|): Keras activations tf2onnx writes as these ops, and
 * torch's nn.SELU / nn.CELU. */
static int op_elu_family(ctx *c, const char *arg)
{
    ival *x = c->in[0];
    char an[4200], bn[4200]; /* names are at most 4096 bytes (io/onnx.c) */
    if (!strcmp(arg, "softsign")) {
        ctx a = step(c, x, NULL, "abs", an, sizeof an);
        if (pointwise_into(&a, "abs", x, 0))
            return -1;
        ctx b = step(c, find(c->I, an), NULL, "plus1", bn, sizeof bn);
        if (number_into(&b, "add", find(c->I, an), 1))
            return -1;
        ctx d = *c;
        d.in[1] = find(c->I, bn), d.nin = 2;
        return do_arith(&d, "div");
    }
    int selu = !strcmp(arg, "selu");
    double alpha = af(c->n, "alpha", selu ? 1.67326319217681884765625 : 1),
           gamma = selu ? af(c->n, "gamma", 1.05070102214813232421875) : alpha;
    if (!selu && !(alpha != 0 && isfinite(alpha)))
        return sr_fail("alpha %g", alpha);
    const ival *in = x;
    if (!selu && alpha != 1) {
        ctx a = step(c, x, NULL, "scaled", an, sizeof an);
        if (number_into(&a, "mul", x, 1 / alpha))
            return -1;
        in = find(c->I, an);
    }
    kvs kv = {0};
    kv_d(&kv, "alpha", selu ? alpha : 1);
    if (gamma == 1)
        return emit_same(c, "elu", &kv, in);
    ctx e = step(c, x, NULL, "elu", bn, sizeof bn);
    if (emit_same(&e, "elu", &kv, in))
        return -1;
    return number_into(c, "mul", find(c->I, bn), gamma);
}

/* --- Einsum ------------------------------------------------------------------------ */
/* An operand's labels: letters as themselves, the dims an ellipsis stands
 * for as 1..EINSUM_ELL (right-aligned across operands, as they broadcast). */
enum { EINSUM_ELL = SR_MAXDIM + 1 };
typedef struct {
    int n, lab[SR_MAXDIM + 1];
} einsum_term;

/* Term s (its end e) of rank r (ell: how many dims the widest ellipsis holds,
 * -1 for the output, which takes them all). */
static int einsum_term_parse(const char *s, const char *e, int r, int ell, einsum_term *t)
{
    int letters = 0, dots = 0;
    for (const char *p = s; p < e; p++) {
        if (*p == '.') {
            if (dots++ || e - p < 3 || p[1] != '.' || p[2] != '.')
                return sr_fail("the equation's term '%.*s' has a stray '.'", (int)(e - s), s);
            p += 2;
        } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
            letters++;
        } else if (*p != ' ') {
            return sr_fail("the equation's term '%.*s' has '%c'", (int)(e - s), s, *p);
        }
    }
    int ne = ell < 0 ? 0 : r - letters;
    if (ell < 0) {
        ne = dots ? r : 0; /* the output: r is the widest ellipsis here */
        r = letters + ne;
    }
    if (ne < 0 || (!dots && ne) || r > SR_MAXDIM + 1)
        return sr_fail("the equation's term '%.*s' does not fit rank %d", (int)(e - s), s, r);
    t->n = 0;
    for (const char *p = s; p < e; p++) {
        if (*p == '.') {
            int base = ell < 0 ? 0 : ell - ne;
            for (int j = 0; j < ne; j++)
                t->lab[t->n++] = 1 + base + j;
            p += 2;
        } else if (*p != ' ') {
            t->lab[t->n++] = (unsigned char)*p;
        }
    }
    return 0;
}

static int einsum_pos(const einsum_term *t, int lab)
{
    for (int i = 0; i < t->n; i++)
        if (t->lab[i] == lab)
            return i;
    return -1;
}

/* The logical shape of labels lab (n of them) grouped into ng groups of
 * grp[g] consecutive labels (each a product; an empty group 1), at both
 * batch sizes from the size tables z1, z2 (indexed by label). */
static int einsum_shape(const int *lab, const int *grp, int ng, const int64_t *z1, const int64_t *z2, int64_t *S1,
                        int64_t *S2)
{
    for (int g = 0, j = 0; g < ng; g++) {
        S1[g] = S2[g] = 1;
        for (int k = 0; k < grp[g]; k++, j++)
            S1[g] *= z1[lab[j]], S2[g] *= z2[lab[j]];
    }
    return 0;
}

/* x reshaped to its labels lab grouped by grp, into a step named suffix. */
static ival *einsum_reshape(ctx *c, ival *x, const int *lab, const int *grp, int ng, const int64_t *z1,
                            const int64_t *z2, const char *suffix, char *buf, size_t cap)
{
    int64_t S1[SR_MAXDIM + 1], S2[SR_MAXDIM + 1];
    einsum_shape(lab, grp, ng, z1, z2, S1, S2);
    ctx s = step(c, x, NULL, suffix, buf, cap);
    return reshape_to(&s, x, S1, S2, ng, 1, buf) ? NULL : find(c->I, buf);
}

/* x's logical dims, labelled t, permuted to the labels want (n). */
static ival *einsum_permute(ctx *c, ival *x, const einsum_term *t, const int *want, int n, const char *suffix,
                            char *buf, size_t cap)
{
    int64_t p[SR_MAXDIM + 1];
    for (int i = 0; i < n; i++)
        p[i] = einsum_pos(t, want[i]);
    ctx s = step(c, x, NULL, suffix, buf, cap);
    return transpose_to(&s, x, p, n) ? NULL : find(c->I, buf);
}

/* Einsum of one operand (a permutation) or two (a product): each operand
 * permuted to (batch labels, free labels, summed labels), reshaped to three
 * groups where a group holds several, a batched MatMul (or a linear layer
 * when the second operand is constant), reshaped back and permuted to the
 * output's order: the forms exporters write for attention and linear maps
 * ("bij,bjk->bik", "bhid,bhjd->bhij", "bnd,dk->bnk", "...ij,...jk").  Not
 * taken: a label repeated in one operand (a diagonal) or summed away in
 * one operand only. */
static int op_einsum(ctx *c, const char *arg)
{
    (void)arg;
    imp *I = c->I;
    const char *eq = as(c->n, "equation", NULL);
    if (!eq)
        return sr_fail("needs an equation");
    const char *arrow = strstr(eq, "->"), *end = arrow ? arrow : eq + strlen(eq);
    ival *op[2] = {c->in[0], c->nin > 1 ? c->in[1] : NULL};
    int nop = 1;
    for (const char *p = eq; p < end; p++)
        nop += *p == ',';
    if (nop > 2 || nop != c->nin)
        return UNSUPPORTED("Einsum '%s' of %d operands (one or two)", eq, nop);
    for (int i = 0; i < nop; i++)
        if (!op[i])
            return sr_fail("operand %d is missing", i + 1);
    einsum_term t[3];
    int64_t z1[256] = {0}, z2[256] = {0};
    int rank[2], ell = 0, seen[256] = {0};
    for (int i = 0; i < nop; i++) {
        rank[i] = op[i]->store == V_DYN ? lrank(op[i]) : op[i]->s.v[0].ndim;
        int letters = 0;
        const char *s = i ? strchr(eq, ',') + 1 : eq, *e = i || nop == 1 ? end : strchr(eq, ',');
        for (const char *p = s; p < e; p++)
            letters += (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z');
        ell = rank[i] - letters > ell ? rank[i] - letters : ell;
    }
    for (int i = 0; i < nop; i++) {
        const char *s = i ? strchr(eq, ',') + 1 : eq, *e = i || nop == 1 ? end : strchr(eq, ',');
        if (einsum_term_parse(s, e, rank[i], ell, &t[i]))
            return -1;
        int64_t L1[SR_MAXDIM + 1], L2[SR_MAXDIM + 1];
        if (op[i]->store == V_DYN) {
            ldims(op[i], SR_FOLD_N1, L1);
            ldims(op[i], SR_FOLD_N2, L2);
        } else {
            memcpy(L1, op[i]->s.v[0].shape, sizeof(int64_t) * (size_t)rank[i]);
            memcpy(L2, op[i]->s.v[sr_fold_val_batched(&op[i]->s)].shape, sizeof(int64_t) * (size_t)rank[i]);
        }
        for (int d = 0; d < t[i].n; d++) {
            int l = t[i].lab[d];
            if (seen[l] & (1 << i))
                return UNSUPPORTED("Einsum '%s' with a label repeated in one operand", eq);
            seen[l] |= 1 << i;
            if (z1[l] > 1 && L1[d] > 1 && (z1[l] != L1[d] || z2[l] != L2[d]))
                return sr_fail("label '%c' has sizes %lld and %lld", l > EINSUM_ELL ? l : '.', (long long)z1[l],
                               (long long)L1[d]);
            if (L1[d] > z1[l] || !z1[l])
                z1[l] = L1[d], z2[l] = L2[d];
        }
    }
    if (arrow) {
        if (einsum_term_parse(arrow + 2, arrow + strlen(arrow), ell, -1, &t[2]))
            return -1;
    } else { /* implicit: the ellipsis, then the labels used once, sorted */
        t[2].n = 0;
        for (int l = 1; l <= ell; l++)
            t[2].lab[t[2].n++] = l;
        for (int l = EINSUM_ELL + 1; l < 256; l++)
            if (seen[l] == 1 || seen[l] == 2)
                t[2].lab[t[2].n++] = l;
    }
    int so[256] = {0};
    for (int d = 0; d < t[2].n; d++) {
        int l = t[2].lab[d];
        if (so[l]++ || !seen[l])
            return sr_fail("output label '%c' is repeated or in no operand", l > EINSUM_ELL ? l : '.');
    }
    for (int l = 1; l < 256; l++)
        if (seen[l] && seen[l] != 3 && !so[l])
            return UNSUPPORTED("Einsum '%s' summing a label of one operand only", eq);
    char b1[4200], b2[4200], b3[4200], b4[4200]; /* names are at most 4096 bytes (io/onnx.c) */
    if (nop == 1) {
        if (op[0]->store != V_DYN)
            return sr_fail("the operand must be a value");
        int64_t p[SR_MAXDIM + 1];
        for (int i = 0; i < t[2].n; i++)
            p[i] = einsum_pos(&t[0], t[2].lab[i]);
        return transpose_to(c, op[0], p, t[2].n);
    }
    int sw = op[0]->store != V_DYN; /* constant first: swap the operands (the output's order is free) */
    ival *A = op[sw], *B = op[1 - sw];
    const einsum_term *ta = &t[sw], *tb = &t[1 - sw];
    if (A->store != V_DYN)
        return sr_fail("Einsum of two constants");
    /* batch (both and out, the output's order), free (one and out), summed (both, A's order) */
    int bt[SR_MAXDIM + 1], fa[SR_MAXDIM + 1], fb[SR_MAXDIM + 1], ks[SR_MAXDIM + 1], nb = 0, na = 0, nf = 0, nk = 0;
    for (int d = 0; d < t[2].n; d++) {
        int l = t[2].lab[d], ia = einsum_pos(ta, l) >= 0, ib = einsum_pos(tb, l) >= 0;
        if (ia && ib)
            bt[nb++] = l;
        else if (ia)
            fa[na++] = l;
        else
            fb[nf++] = l;
    }
    for (int d = 0; d < ta->n; d++)
        if (!so[ta->lab[d]])
            ks[nk++] = ta->lab[d];
    int la[3 * (SR_MAXDIM + 1)], lb[3 * (SR_MAXDIM + 1)], lr[3 * (SR_MAXDIM + 1)], n = 0;
    memcpy(la, bt, sizeof(int) * (size_t)nb);
    memcpy(la + nb, fa, sizeof(int) * (size_t)na);
    memcpy(la + nb + na, ks, sizeof(int) * (size_t)nk);
    memcpy(lr, bt, sizeof(int) * (size_t)nb);
    memcpy(lr + nb, fa, sizeof(int) * (size_t)na);
    memcpy(lr + nb + na, fb, sizeof(int) * (size_t)nf);
    ival *a = einsum_permute(c, A, ta, la, nb + na + nk, "a", b1, sizeof b1), *r;
    if (!a)
        return -1;
    if (B->store != V_DYN) {
        /* a constant second operand: a linear layer on A's summed labels */
        if (nb)
            return UNSUPPORTED("Einsum '%s' with a label in a value, a constant and the output", eq);
        if (sr_fold_val_batched(&B->s))
            return sr_fail("the constant '%s' depends on the batch", B->name);
        int grp[SR_MAXDIM + 2];
        for (int i = 0; i < na; i++)
            grp[i] = 1;
        grp[na] = nk;
        if (nk != 1 && !(a = einsum_reshape(c, a, la, grp, na + 1, z1, z2, "a_rows", b2, sizeof b2)))
            return -1;
        int64_t K = 1, N = 1;
        for (int i = 0; i < nk; i++)
            K *= z1[ks[i]];
        for (int i = 0; i < nf; i++)
            N *= z1[fb[i]];
        sr_tensor w = SR_TENSOR_INIT; /* (K, N): B's entries in the order (summed, free) */
        if (sr_tensor_alloc(&w, SR_F64, 2, (int64_t[]){K, N}))
            return -1;
        const sr_tensor *bv = &B->s.v[0];
        int64_t st[SR_MAXDIM + 1], idx, acc = 1;
        for (int d = tb->n - 1; d >= 0; d--)
            st[d] = acc, acc *= bv->shape[d];
        for (int64_t e = 0; e < K * N; e++) {
            int64_t rem = e;
            idx = 0;
            for (int i = nf - 1; i >= 0; i--) {
                int d = einsum_pos(tb, fb[i]);
                idx += rem % z1[fb[i]] * st[d], rem /= z1[fb[i]];
            }
            for (int i = nk - 1; i >= 0; i--) {
                int d = einsum_pos(tb, ks[i]);
                idx += (bv->shape[d] == 1 ? 0 : rem % z1[ks[i]]) * st[d], rem /= z1[ks[i]];
            }
            sr_f64(&w)[e] = sr_get_flat(bv, idx);
        }
        ctx s = step(c, a, NULL, "linear", b3, sizeof b3);
        int rc = emit_linear(&s, a, &w, 0, 1, NULL, 1, B->name, b3);
        sr_tensor_free(&w);
        if (rc || !(r = find(I, b3)))
            return -1;
        n = na + nf;
        int rg[SR_MAXDIM + 2];
        for (int i = 0; i < n; i++)
            rg[i] = 1;
        if (nf != 1 && !(r = einsum_reshape(c, r, lr, rg, n, z1, z2, "split", b4, sizeof b4)))
            return -1;
    } else {
        memcpy(lb, bt, sizeof(int) * (size_t)nb);
        memcpy(lb + nb, ks, sizeof(int) * (size_t)nk);
        memcpy(lb + nb + nk, fb, sizeof(int) * (size_t)nf);
        ival *b = einsum_permute(c, B, tb, lb, nb + nk + nf, "b", b2, sizeof b2);
        if (!b)
            return -1;
        int ga[SR_MAXDIM + 3], gb[SR_MAXDIM + 3];
        for (int i = 0; i < nb; i++)
            ga[i] = gb[i] = 1;
        ga[nb] = na, ga[nb + 1] = nk, gb[nb] = nk, gb[nb + 1] = nf;
        if ((na != 1 || nk != 1) && !(a = einsum_reshape(c, a, la, ga, nb + 2, z1, z2, "a_mat", b3, sizeof b3)))
            return -1;
        if ((nk != 1 || nf != 1) && !(b = einsum_reshape(c, b, lb, gb, nb + 2, z1, z2, "b_mat", b4, sizeof b4)))
            return -1;
        char b5[4200];
        ctx m = step(c, a, b, "matmul", b5, sizeof b5);
        if (do_matmul(&m) || !(r = find(I, b5)))
            return -1;
        n = nb + na + nf;
        int rg[3 * (SR_MAXDIM + 1)];
        for (int i = 0; i < n; i++)
            rg[i] = 1;
        if ((na != 1 || nf != 1) && !(r = einsum_reshape(c, r, lr, rg, n, z1, z2, "split", b1, sizeof b1)))
            return -1;
    }
    einsum_term tr = {.n = n};
    memcpy(tr.lab, lr, sizeof(int) * (size_t)n);
    int64_t p[SR_MAXDIM + 1];
    for (int i = 0; i < t[2].n; i++)
        p[i] = einsum_pos(&tr, t[2].lab[i]);
    return transpose_to(c, r, p, t[2].n);
}

/* --- resizing, instance and group norms ------------------------------------------ */
/* The numbers of static input v (at the first batch size: sizes computed
 * from Shape hold the batch there); *cnt -1 when v is absent or empty, the
 * placeholder exporters write for an unused input. */
static int numbers_of(const ival *v, double *out, int max, int *cnt)
{
    *cnt = -1;
    if (!v)
        return 0;
    if (v->store != V_STATIC)
        return UNSUPPORTED("input '%s' computed from the image (it must be a constant)", v->name);
    const sr_tensor *t = &v->s.v[0];
    if (sr_numel(t) == 0)
        return 0;
    if (t->ndim != 1 || sr_numel(t) > max)
        return sr_fail("input '%s' %s must be a list of at most %d", v->name, SR_SHAPE(t), max);
    for (int64_t i = 0; i < sr_numel(t); i++)
        out[i] = sr_f64(t)[i];
    *cnt = (int)sr_numel(t);
    return 0;
}

/* A resize of (N, C, H, W) value x by scales sc (ns of them) or to sizes sz
 * (nz), one per logical axis: a resize2d layer. */
static int emit_resize(ctx *c, const ival *x, int ns, const double *sc, int nz, const int64_t *sz, const char *mode,
                       const char *coord, const char *nearest)
{
    int lx = lrank(x);
    int64_t L[SR_MAXDIM + 1];
    ldims(x, SR_FOLD_N1, L);
    if (!strcmp(mode, "bilinear"))
        mode = "linear";
    if (!strcmp(mode, "bicubic"))
        mode = "cubic";
    static const char *const modes[] = {"nearest", "linear", "cubic"}; /* resize2d's names for ONNX's */
    if (strcmp(mode, modes[0]) && strcmp(mode, modes[1]) && strcmp(mode, modes[2]))
        return UNSUPPORTED("%s mode '%s'", c->n->op_type, mode);
    if (!strcmp(coord, "tf_crop_and_resize"))
        return UNSUPPORTED("%s with coordinate_transformation_mode tf_crop_and_resize", c->n->op_type);
    if ((ns < 0) == (nz < 0))
        return sr_fail("needs either scales or sizes (%s given)", ns < 0 ? "neither" : "both");
    int n = ns >= 0 ? ns : nz;
    if (n != lx)
        return sr_fail("%d %s for a value of rank %d", n, ns >= 0 ? "scales" : "sizes", lx);
    if (lx != 4)
        return UNSUPPORTED("%s of a rank %d value (2-D images only)", c->n->op_type, lx);
    /* sizes baked for the batch exported (n0), or folded from Shape */
    for (int a = 0; a < 2; a++)
        if (ns >= 0 ? sc[a] != 1 : sz[a] != L[a] && !(a == 0 && x->bat == 0 && sz[0] == c->I->n0))
            return UNSUPPORTED("%s along the batch or channel axis", c->n->op_type);
    if (!(x = image_input(c, x)))
        return -1;
    int64_t ps[3] = {x->ps[0], 0, 0};
    for (int a = 0; a < 2; a++) {
        if (ns >= 0 && !(sc[2 + a] > 0 && sc[2 + a] <= 1e6))
            return sr_fail("scale %g (it must be in (0, 1e6])", sc[2 + a]);
        ps[1 + a] = ns >= 0 ? (int64_t)floor((double)x->ps[1 + a] * sc[2 + a]) : sz[2 + a];
    }
    if (ps[1] < 1 || ps[2] < 1 || ps[1] > ((int64_t)1 << 30) || ps[2] > ((int64_t)1 << 30))
        return sr_fail("'%s' %s would be resized to %lldx%lld", x->name, PS(x), (long long)ps[1], (long long)ps[2]);
    kvs kv = {0};
    if (ns >= 0)
        kv_ld(&kv, "scale", sc + 2, 2);
    else
        kv_li(&kv, "size", ps + 1, 2);
    kv_s(&kv, "mode", mode);
    kv_s(&kv, "coordinate", coord);
    kv_s(&kv, "nearest", nearest);
    if (!strcmp(mode, modes[2])) {
        kv_d(&kv, "cubic_a", af(c->n, "cubic_coeff_a", -0.75));
        kv_s(&kv, "exclude_outside", ai(c->n, "exclude_outside", 0) ? "true" : "false");
    }
    return emit1(c, "resize2d", &kv, x, 3, ps, 0, 0);
}

/* Resize (opsets 10, 11, 13, 18): nearest, linear and cubic, every
 * coordinate mode but tf_crop_and_resize; scales or sizes constant (or
 * folded). */
static int op_resize(ctx *c, const char *arg)
{
    (void)arg;
    const ival *x = dyn_in(c, 0);
    int64_t opset = c->I->m->opset, L[SR_MAXDIM + 1], sz[SR_MAXDIM + 1], axes[SR_MAXDIM + 1];
    double sc[SR_MAXDIM + 1], zd[SR_MAXDIM + 1];
    int ns, nz = -1, na, lx = lrank(x);
    const char *mode = as(c->n, "mode", "nearest");
    if (opset < 11 ? numbers_of(c->nin > 1 ? c->in[1] : NULL, sc, SR_MAXDIM + 1, &ns)
                   : numbers_of(c->nin > 2 ? c->in[2] : NULL, sc, SR_MAXDIM + 1, &ns) ||
                         numbers_of(c->nin > 3 ? c->in[3] : NULL, zd, SR_MAXDIM + 1, &nz))
        return -1;
    if (ints_of(c->n, "axes", NULL, axes, SR_MAXDIM + 1, &na))
        return -1;
    ldims(x, SR_FOLD_N1, L);
    for (int i = 0; i < nz; i++)
        sz[i] = (int64_t)zd[i];
    if (na >= 0) { /* opset 18: scales or sizes of these axes only */
        double s2[SR_MAXDIM + 1];
        int64_t z2[SR_MAXDIM + 1];
        if ((ns >= 0 ? ns : nz) != na)
            return sr_fail("%d axes for %d %s", na, ns >= 0 ? ns : nz, ns >= 0 ? "scales" : "sizes");
        for (int i = 0; i < lx; i++)
            s2[i] = 1, z2[i] = L[i];
        for (int i = 0; i < na; i++) {
            int64_t a = axes[i] < 0 ? axes[i] + lx : axes[i];
            if (a < 0 || a >= lx)
                return sr_fail("axis %lld for rank %d", (long long)axes[i], lx);
            if (ns >= 0)
                s2[a] = sc[i];
            else
                z2[a] = sz[i];
        }
        memcpy(sc, s2, sizeof s2);
        memcpy(sz, z2, sizeof z2);
        if (ns >= 0)
            ns = lx;
        else
            nz = lx;
    }
    int down = 0;
    for (int i = 0; i < (ns >= 0 ? ns : nz); i++)
        down |= ns >= 0 ? sc[i] < 1 : sz[i] < L[i];
    if (ai(c->n, "antialias", 0) && down && strcmp(mode, "nearest"))
        return UNSUPPORTED("Resize with antialias when downsampling");
    if (nz >= 0 && strcmp(as(c->n, "keep_aspect_ratio_policy", "stretch"), "stretch"))
        return UNSUPPORTED("Resize with keep_aspect_ratio_policy '%s'", as(c->n, "keep_aspect_ratio_policy", ""));
    if (opset < 11) {
        /* Resize-10: asymmetric coordinates; nearest takes the floor
         * (onnxruntime's), which we only follow when upsampling */
        if (down && !strcmp(mode, "nearest"))
            return UNSUPPORTED("Resize-10 nearest downsampling");
        return emit_resize(c, x, ns, sc, nz, sz, mode, "asymmetric", "floor");
    }
    return emit_resize(c, x, ns, sc, nz, sz, mode, as(c->n, "coordinate_transformation_mode", "half_pixel"),
                       as(c->n, "nearest_mode", "round_prefer_floor"));
}

/* Upsample (opsets 7, 9): asymmetric coordinates, nearest by the floor. */
static int op_upsample(ctx *c, const char *arg)
{
    (void)arg;
    double sc[SR_MAXDIM + 1];
    int ns = -1;
    const sr_onnx_attr *a = sr_onnx_attr_find(c->n, "scales");
    if (c->I->m->opset < 9 && a && a->type == SR_ONNX_ATTR_FLOATS) {
        if (a->n > SR_MAXDIM + 1)
            return sr_fail("%d scales", a->n);
        memcpy(sc, a->floats, (size_t)a->n * sizeof *sc);
        ns = a->n;
    } else if (numbers_of(c->nin > 1 ? c->in[1] : NULL, sc, SR_MAXDIM + 1, &ns)) {
        return -1;
    }
    for (int i = 0; i < ns; i++)
        if (sc[i] < 1)
            return sr_fail("scale %g is below 1 (Upsample only enlarges)", sc[i]);
    return emit_resize(c, dyn_in(c, 0), ns, sc, -1, NULL, as(c->n, "mode", "nearest"), "asymmetric", "floor");
}

/* InstanceNormalization (x, scale, B) and GroupNormalization-18 (x, scale,
 * bias of one entry per group, spread over the group's channels): a
 * groupnorm layer.  torch.onnx's GroupNorm below opset 18 (Reshape to
 * (N, G, -1), InstanceNormalization, Reshape back, Mul, Add) comes out as
 * those layers, exactly. */
static int op_groupnorm(ctx *c, const char *arg)
{
    imp *I = c->I;
    const ival *x = dyn_in(c, 0), *s = c->nin > 1 ? c->in[1] : NULL, *b = c->nin > 2 ? c->in[2] : NULL;
    int group = arg != NULL;
    if (!s || !b || s->store != V_STATIC || b->store != V_STATIC || sr_fold_val_batched(&s->s) ||
        sr_fold_val_batched(&b->s))
        return UNSUPPORTED("%s with computed scale or bias", c->n->op_type);
    if (!(x = as_batch(c, x)))
        return -1;
    if (x->bat != 0 || x->merged || x->nd < 1)
        return sr_fail("'%s' must be (N, C, ...) with the batch first", x->name);
    int64_t C = x->ps[0], G = group ? ai(c->n, "num_groups", 0) : C;
    if (G < 1 || C % G)
        return sr_fail("%lld channels in %lld groups", (long long)C, (long long)G);
    /* opset 18's scale and bias hold one entry per group (opset 21: per channel) */
    int64_t per = sr_numel(&s->s.v[0]) == G && group && G != C ? C / G : 1;
    if (sr_numel(&s->s.v[0]) * per != C || sr_numel(&b->s.v[0]) * per != C)
        return sr_fail("scale %s and bias %s do not fit %lld channels in %lld groups", SR_SHAPE(&s->s.v[0]),
                       SR_SHAPE(&b->s.v[0]), (long long)C, (long long)G);
    kvs kv = {0};
    kv_i(&kv, "num_groups", G);
    kv_i(&kv, "num_channels", C);
    kv_d(&kv, "eps", af(c->n, "epsilon", 1e-5));
    sr_module *m = layer(I, "groupnorm", &kv);
    sr_tensor w = SR_TENSOR_INIT, bb = SR_TENSOR_INIT;
    int rc = !m || sr_tensor_alloc(&w, SR_F64, 1, &C) || sr_tensor_alloc(&bb, SR_F64, 1, &C);
    for (int64_t i = 0; !rc && i < C; i++) {
        sr_f64(&w)[i] = sr_get_flat(&s->s.v[0], i / per);
        sr_f64(&bb)[i] = sr_get_flat(&b->s.v[0], i / per);
    }
    rc = rc || set_param(m, "weight", &w) || set_param(m, "bias", &bb);
    sr_tensor_free(&w);
    sr_tensor_free(&bb);
    if (rc) {
        sr_module_release(m);
        return -1;
    }
    char nm[512];
    node_name(c->n, s->name, nm, sizeof nm);
    int id = add_node(I, nm, m, 1, &x->id);
    return id < 0 || !def_dyn(I, out_name(c, 0), id, x->nd, x->ps, x->bat, 0) ? -1 : 0;
}

/* --- the dispatch: one table says which ops the importer takes and how ------- */
static int op_pointwise(ctx *c, const char *layer)
{
    if (!dyn_in(c, 0))
        return UNSUPPORTED("%s of a constant by a value", c->n->op_type);
    return do_pointwise(c, layer);
}

/* x ^ (one number) is a pointwise layer; anything else a pow_of */
static int op_pow(ctx *c, const char *arg)
{
    double e;
    if (!dyn_in(c, 0) || c->nin < 2 || !c->in[1] || c->in[1]->store != V_STATIC || scalar_of(c->in[1], &e))
        return do_arith(c, "pow_of");
    return op_pointwise(c, arg);
}

static int op_alias(ctx *c, const char *arg)
{
    (void)arg;
    return alias(c->I, out_name(c, 0), dyn_in(c, 0)) ? 0 : -1;
}

static int op_dropout(ctx *c, const char *arg)
{
    /* in training mode it drops at random: not a function of the input,
     * unless its ratio is 0 */
    double t = 0, ratio = af(c->n, "ratio", 0.5);
    int training = (c->nin > 2 && c->in[2] && (c->in[2]->store != V_STATIC || scalar_of(c->in[2], &t) || t != 0)) ||
                   (c->I->m->opset < 7 && !ai(c->n, "is_test", 0));
    if (c->nin > 1 && c->in[1] && (c->in[1]->store != V_STATIC || scalar_of(c->in[1], &ratio)))
        ratio = 0.5;
    if (training && ratio != 0)
        return UNSUPPORTED("Dropout in training mode");
    if (only_first_output(c))
        return -1;
    return op_alias(c, arg);
}

/* Cast / CastLike (arg "like") */
static int op_cast(ctx *c, const char *arg)
{
    const ival *x = dyn_in(c, 0);
    if (arg && !x) { /* a constant cast like a value: the value's type is float */
        ival *v = define(c->I, out_name(c, 0));
        if (!v || sr_fold_val_set(&v->s, SR_ONNX_DOUBLE, &c->in[0]->s.v[0]))
            return -1;
        v->store = V_STATIC;
        return 0;
    }
    /* to float or double: the graph computes in its own precision; a
     * rounding to 16 bits would be a layer of its own */
    int to = !arg ? (int)ai(c->n, "to", SR_ONNX_FLOAT)
           : c->nin > 1 && c->in[1] && c->in[1]->store == V_STATIC ? c->in[1]->s.type : SR_ONNX_FLOAT;
    if (x && to != SR_ONNX_FLOAT && to != SR_ONNX_DOUBLE)
        return UNSUPPORTED("%s of a value to %s", c->n->op_type, sr_onnx_type_name(to));
    return op_alias(c, arg);
}

/* The translators that take no argument, or a flag, behind the table's one
 * signature. */
#define OP_PLAIN(f) \
    static int op_##f(ctx *c, const char *arg) { (void)arg; return do_##f(c); }
OP_PLAIN(matmul) OP_PLAIN(gemm) OP_PLAIN(concat) OP_PLAIN(conv) OP_PLAIN(batchnorm) OP_PLAIN(global_pool)
OP_PLAIN(flatten) OP_PLAIN(reshape) OP_PLAIN(transpose) OP_PLAIN(split) OP_PLAIN(slice) OP_PLAIN(gather)
OP_PLAIN(layernorm) OP_PLAIN(pad) OP_PLAIN(expand)
#undef OP_PLAIN
static int op_softmax(ctx *c, const char *arg) { return do_softmax(c, arg != NULL); }
static int op_pool(ctx *c, const char *arg) { return do_pool(c, !strcmp(arg, "max")); }
static int op_squeeze(ctx *c, const char *arg) { return do_squeeze(c, arg != NULL); }
static int op_shape(ctx *c, const char *arg) { return do_shape(c, arg != NULL); }

/* Every op the importer takes on values.  VALUE_FIRST: the op needs a value
 * (not a constant) as its first input.  A NULL translator: the op only ever
 * makes constants (folded before dispatch). */
enum { VALUE_FIRST = 1 };
static const struct {
    const char *op;
    int (*fn)(ctx *c, const char *arg);
    const char *arg;
    int flags;
} ops[] = {
    {"Relu", op_pointwise, "relu", 0}, {"Sigmoid", op_pointwise, "sigmoid", 0}, {"Tanh", op_pointwise, "tanh", 0},
    {"HardSigmoid", op_pointwise, "hardsigmoid", 0}, {"HardSwish", op_pointwise, "hardswish", 0},
    {"LeakyRelu", op_pointwise, "leaky_relu", 0}, {"Elu", op_pointwise, "elu", 0},
    {"Softplus", op_pointwise, "softplus", 0}, {"Erf", op_pointwise, "erf", 0}, {"Sqrt", op_pointwise, "sqrt", 0},
    {"Exp", op_pointwise, "exp", 0}, {"Log", op_pointwise, "log", 0}, {"Abs", op_pointwise, "abs", 0},
    {"Neg", op_pointwise, "neg", 0}, {"Reciprocal", op_pointwise, "reciprocal", 0},
    {"Clip", op_pointwise, "clip", 0}, {"Gelu", op_pointwise, "gelu", 0}, {"Pow", op_pow, "pow", 0},
    {"Identity", op_alias, NULL, 0}, {"Dropout", op_dropout, NULL, 0},
    {"Cast", op_cast, NULL, 0}, {"CastLike", op_cast, "like", 0},
    {"Add", do_arith, "add", 0}, {"Sub", do_arith, "sub", 0}, {"Mul", do_arith, "mul", 0},
    {"Div", do_arith, "div", 0},
    {"Sum", do_variadic, "add", 0}, {"Max", do_variadic, "max", 0}, {"Min", do_variadic, "min", 0},
    {"MatMul", op_matmul, NULL, 0}, {"Gemm", op_gemm, NULL, 0}, {"Concat", op_concat, NULL, 0},
    {"Conv", op_conv, NULL, VALUE_FIRST}, {"BatchNormalization", op_batchnorm, NULL, VALUE_FIRST},
    {"MaxPool", op_pool, "max", VALUE_FIRST}, {"AveragePool", op_pool, "average", VALUE_FIRST},
    {"GlobalAveragePool", op_global_pool, NULL, VALUE_FIRST}, {"Flatten", op_flatten, NULL, VALUE_FIRST},
    {"Reshape", op_reshape, NULL, VALUE_FIRST}, {"Squeeze", op_squeeze, NULL, VALUE_FIRST},
    {"Unsqueeze", op_squeeze, "un", VALUE_FIRST}, {"Transpose", op_transpose, NULL, VALUE_FIRST},
    {"Split", op_split, NULL, VALUE_FIRST}, {"Slice", op_slice, NULL, VALUE_FIRST},
    {"Gather", op_gather, NULL, VALUE_FIRST},
    {"ReduceMean", do_reduce, "mean", VALUE_FIRST}, {"ReduceSum", do_reduce, "sum", VALUE_FIRST},
    {"ReduceMax", do_reduce, "max", VALUE_FIRST}, {"ReduceMin", do_reduce, "min", VALUE_FIRST},
    {"Softmax", op_softmax, NULL, VALUE_FIRST}, {"LogSoftmax", op_softmax, "log", VALUE_FIRST},
    {"LayerNormalization", op_layernorm, NULL, VALUE_FIRST},
    {"Pad", op_pad, NULL, VALUE_FIRST}, {"Shape", op_shape, NULL, VALUE_FIRST},
    {"Size", op_shape, "size", VALUE_FIRST}, {"Expand", op_expand, NULL, VALUE_FIRST},
    {"Resize", op_resize, NULL, VALUE_FIRST}, {"Upsample", op_upsample, NULL, VALUE_FIRST},
    {"InstanceNormalization", op_groupnorm, NULL, VALUE_FIRST},
    {"GroupNormalization", op_groupnorm, "group", VALUE_FIRST},
    {"PRelu", op_prelu, NULL, VALUE_FIRST}, {"GlobalMaxPool", op_global_max, NULL, VALUE_FIRST},
    {"ConvTranspose", op_conv_transpose, NULL, VALUE_FIRST},
    {"ReduceL2", op_reduce_norm, "l2", VALUE_FIRST}, {"ReduceSumSquare", op_reduce_norm, "sum_square", VALUE_FIRST},
    {"ReduceL1", op_reduce_norm, "l1", VALUE_FIRST}, {"Mish", op_mish, NULL, VALUE_FIRST},
    {"DepthToSpace", op_depth_space, "to_space", VALUE_FIRST}, {"SpaceToDepth", op_depth_space, "to_depth", VALUE_FIRST},
    {"Einsum", op_einsum, NULL, 0}, {"Selu", op_elu_family, "selu", VALUE_FIRST},
    {"Celu", op_elu_family, "celu", VALUE_FIRST}, {"Softsign", op_elu_family, "softsign", VALUE_FIRST},
    {"Constant", NULL, NULL, 0},
};

static int op_index(const char *op)
{
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(ops[i].op, op))
            return (int)i;
    return -1;
}

int sr_onnx_op_supported(const char *op)
{
    if (op_index(op) >= 0)
        return SR_ONNX_OP_VALUES;
    return sr_fold_knows(op) ? SR_ONNX_OP_CONSTANTS : 0;
}

static int translate_dynamic(ctx *c)
{
    const char *op = c->n->op_type;
    int i = op_index(op);
    if (i < 0 || !ops[i].fn)
        return sr_fail("unsupported op %s", op);
    if ((ops[i].flags & VALUE_FIRST) && !dyn_in(c, 0))
        return UNSUPPORTED("%s with a value in other than its first input", op);
    return ops[i].fn(c, ops[i].arg);
}

/* Folding may make what a file only describes (ConstantOfShape, Expand,
 * Tile, Range): a few bytes may ask for any size.  One folded tensor may
 * hold 2^20 values, or as many as the largest tensor the file (or the
 * caller) gives, whose casts and transposes real exports fold; all of them
 * together 2^24 plus four times the values given (checked after each node,
 * so that many small nodes cannot ask for any memory either). */
#define FOLD_BUDGET_BASE ((int64_t)1 << 24)
#define FOLD_MAX_BASE ((int64_t)1 << 20)
/* Folding's work (sr_fold_work: values read, M·K·N of a MatMul, values
 * made) is bounded too: 2^26 steps (about 0.3 s) plus 16 per value given,
 * so a file of many folds over its own weights (16 MatMuls of two 1024^2
 * weights, 2·10^5 ReduceSums) is refused, naming the node, instead of
 * folding for minutes.  The torchvision exports fold at most 2·10^5 steps. */
#define FOLD_WORK_BASE ((int64_t)1 << 26)
static void fold_max_grow(imp *I, const sr_tensor *t)
{
    if (sr_numel(t) > I->fold_max)
        I->fold_max = sr_numel(t);
}
static int translate(imp *I, int idx)
{
    const sr_onnx_node *n = &I->m->nodes[idx];
    ctx c = {.I = I, .n = n, .idx = idx, .nin = n->ninputs};
    if (*n->domain && strcmp(n->domain, "ai.onnx"))
        return sr_fail("node '%s': op %s of domain '%s' (srgeo reads ONNX's own ops)", n->name, n->op_type, n->domain);
    if (n->ninputs > 64)
        return sr_fail("node '%s' (%s): %d inputs", n->name, n->op_type, n->ninputs);
    if (n->noutputs < 1 || n->noutputs > 256)
        return sr_fail("node '%s' (%s): %d outputs", n->name, n->op_type, n->noutputs);
    int dynamic = 0;
    for (int i = 0; i < n->ninputs; i++) {
        if (!*n->inputs[i])
            continue;
        if (!(c.in[i] = find(I, n->inputs[i])))
            return sr_fail("node '%s' (%s) reads '%s', which no earlier node nor initializer makes", n->name,
                           n->op_type, n->inputs[i]);
        dynamic |= c.in[i]->store == V_DYN;
    }
    node_name(n, NULL, c.name, sizeof c.name);
    int rc = sr_onnx_op_supported(n->op_type) ? check_attr_types(n, I->m->opset) : 0;
    if (!rc && !dynamic) {
        sr_fold_val outs[256];
        memset(outs, 0, (size_t)n->noutputs * sizeof *outs); /* only those used: 256 are 60 KB */
        sr_fold_val *ins[64];
        for (int i = 0; i < n->ninputs; i++)
            ins[i] = c.in[i] ? &c.in[i]->s : NULL;
        int64_t work = sr_fold_work(n, ins), made = I->folded_values;
        if (work > I->fold_work_budget - I->fold_work)
            rc = sr_fail("folding would take more than %lld steps (this node %lld, %lld before it; at most 2^26 + "
                         "16 x the %lld values given)", (long long)I->fold_work_budget, (long long)work,
                         (long long)I->fold_work, (long long)(I->fold_work_budget - FOLD_WORK_BASE) / 16);
        else
            rc = sr_fold_node(n, I->m->opset, ins, outs, I->fold_max);
        for (int o = 0; !rc && o < n->noutputs; o++)
            I->folded_values += sr_numel(&outs[o].v[0]) + (sr_fold_val_batched(&outs[o]) ? sr_numel(&outs[o].v[1]) : 0);
        I->fold_work += work + (I->folded_values - made);
        if (!rc && I->folded_values > I->fold_budget)
            rc = sr_fail("the folded constants would hold %lld values (at most 2^24 + 4 x the %lld given: %lld)",
                         (long long)I->folded_values, (long long)(I->fold_budget - FOLD_BUDGET_BASE) / 4,
                         (long long)I->fold_budget);
        for (int o = 0; o < n->noutputs; o++) {
            ival *v = !rc && *n->outputs[o] ? define(I, n->outputs[o]) : NULL;
            if (!rc && *n->outputs[o] && !v)
                rc = -1;
            if (v) {
                v->store = V_STATIC;
                v->s = outs[o];
            } else {
                sr_fold_val_free(&outs[o]);
            }
        }
        I->folded += !rc;
    } else if (!rc) {
        rc = translate_dynamic(&c);
    }
    if (rc)
        return sr_fail_context("node '%s' (%s)", *n->name ? n->name : n->noutputs ? n->outputs[0] : "", n->op_type);
    for (int o = 0; o < n->noutputs; o++) { /* where each value came from (constant_role) */
        ival *v = *n->outputs[o] ? find(I, n->outputs[o]) : NULL;
        if (v && !v->node)
            v->node = idx + 1;
    }
    return 0;
}

/* --- the whole model ---------------------------------------------------------- */
/* Up to 16 comma-separated numbers; their count, or -1. */
static int meta_numbers(const char *s, double *v)
{
    int n = 0;
    while (*s && n < 16) {
        char *end;
        v[n++] = strtod(s, &end);
        if (end == s)
            return -1;
        s = end;
        while (*s == ' ' || *s == ',')
            s++;
    }
    return *s ? -1 : n;
}

/* Whether the input is a batch of (H, W, C) images, tf2onnx's: C 1 or 3 last
 * (and not second), and the single readers from it (elementwise ops by
 * constants, casts) reach a Transpose to (N, C, H, W). */
static int nhwc_input(const imp *I, const sr_onnx_value *in)
{
    if (in->ndim != 4 || (in->dims[3] != 1 && in->dims[3] != 3) || in->dims[1] == 1 || in->dims[1] == 3)
        return 0;
    const char *v = in->name;
    for (int guard = 0; guard < 16; guard++) {
        const sr_onnx_node *next = NULL;
        int readers = 0;
        for (int j = 0; j < I->m->nnodes; j++)
            for (int k = 0; k < I->m->nodes[j].ninputs; k++)
                if (!strcmp(I->m->nodes[j].inputs[k], v))
                    readers++, next = &I->m->nodes[j];
        if (readers != 1 || next->noutputs < 1)
            return 0;
        const char *op = next->op_type;
        if (!strcmp(op, "Transpose")) {
            const sr_onnx_attr *a = sr_onnx_attr_find(next, "perm");
            return a && a->type == SR_ONNX_ATTR_INTS && a->n == 4 && a->ints[0] == 0 && a->ints[1] == 3 &&
                   a->ints[2] == 1 && a->ints[3] == 2;
        }
        if (strcmp(op, "Cast") && strcmp(op, "Identity") && strcmp(op, "Mul") && strcmp(op, "Add") &&
            strcmp(op, "Sub") && strcmp(op, "Div"))
            return 0;
        v = next->outputs[0];
    }
    return 0;
}

/* The image input: its layout, and its value (0, or the normalize node's). */
static int image_value(imp *I, const sr_onnx_value *in, const sr_onnx_import_opts *o, sr_onnx_import_info *info)
{
    if (in->type && in->type != SR_ONNX_FLOAT && in->type != SR_ONNX_DOUBLE && in->type != SR_ONNX_FLOAT16 &&
        in->type != SR_ONNX_BFLOAT16)
        return sr_fail("input '%s' holds %s values, not an image", in->name, sr_onnx_type_name(in->type));
    if (in->ndim < 1 + !o->no_batch)
        return sr_fail("input '%s' has %s shape (give input_size)", in->name, in->ndim < 0 ? "no" : "a too small");
    /* tf2onnx's (N, H, W, C) images (nhwc_input): srgeo's are (N, C, H, W),
     * which the graph takes (input_size C,H,W, mean and std per channel as
     * always) and permutes to the file's layout first */
    sr_onnx_value nchw;
    int nhwc = !o->no_batch && nhwc_input(I, in);
    if (nhwc) {
        nchw = *in;
        for (int d = 1; d < 4; d++) {
            int from = d == 1 ? 3 : d - 1;
            nchw.dims[d] = in->dims[from];
            nchw.dim_names[d] = in->dim_names[from];
        }
        in = &nchw;
    }
    int first = o->no_batch ? 0 : 1, nd = in->ndim - first;
    int64_t ps[SR_MAXDIM];
    if (nd > SR_MAXDIM - 1)
        return sr_fail("input '%s' has %d dims", in->name, in->ndim);
    /* input_size: every sample dim, or all but a known first (channels) */
    int skip = o->nsize == nd - 1 && nd > 1 && in->dims[first] > 0;
    if (o->nsize && o->nsize != nd && !skip)
        return sr_fail("input_size has %d dims, input '%s' %d after the batch", o->nsize, in->name, nd);
    for (int d = 0; d < nd; d++) {
        ps[d] = o->nsize && d >= skip ? o->size[d - skip] : in->dims[first + d];
        if (ps[d] == 0 && (o->nsize || in->dims[first + d] == 0))
            return UNSUPPORTED("input '%s' has an empty dim %d", in->name, first + d);
        if (ps[d] < 1)
            return sr_fail("input '%s' dim %d is %s: give input_size (srgeo fixes every dim but the batch)", in->name,
                           first + d, in->dim_names[first + d] ? in->dim_names[first + d] : "unknown");
        if (o->nsize && d >= skip && in->dims[first + d] > 0 && in->dims[first + d] != ps[d])
            return sr_fail("input_size dim %d is %lld, the model's input '%s' is fixed at %lld", d + 1,
                           (long long)ps[d], in->name, (long long)in->dims[first + d]);
    }
    I->n0 = !o->no_batch && in->dims[0] > 0 ? in->dims[0] : 1;
    int id = 0, nmean = o->nmean;
    double mean[16], std[16];
    const char *where = "mean and std";
    if (nmean > 0 && nmean <= 16) {
        memcpy(mean, o->mean, (size_t)nmean * sizeof *mean);
        memcpy(std, o->std, (size_t)nmean * sizeof *std);
    }
    if (!nmean && !o->raw && sr_onnx_meta(I->m, "srgeo.mean") && sr_onnx_meta(I->m, "srgeo.std")) {
        int ns = meta_numbers(sr_onnx_meta(I->m, "srgeo.std"), std);
        nmean = meta_numbers(sr_onnx_meta(I->m, "srgeo.mean"), mean);
        where = "metadata srgeo.mean and srgeo.std";
        if (nmean < 1 || ns != nmean)
            return sr_fail("the model's %s are not two lists of as many numbers ('%s', '%s')", where,
                           sr_onnx_meta(I->m, "srgeo.mean"), sr_onnx_meta(I->m, "srgeo.std"));
        for (int i = 0; i < ns; i++)
            if (!(std[i] > 0))
                return sr_fail("the model's metadata srgeo.std has %g", std[i]);
    }
    if (info)
        info->normalization = !nmean ? SR_ONNX_NORM_NONE : o->nmean ? SR_ONNX_NORM_GIVEN : SR_ONNX_NORM_METADATA;
    if (nmean) {
        if (nd < 1 || ps[0] != nmean || nmean > 16)
            return sr_fail("%s have %d values, the input '%s' %lld channels", where, nmean, in->name,
                           (long long)(nd ? ps[0] : 0));
        kvs k = {0};
        kv_ld(&k, "mean", mean, nmean);
        kv_ld(&k, "std", std, nmean);
        sr_module *m = layer(I, "normalize", &k);
        if ((id = add_node(I, "normalize", m, 1, &id)) < 0)
            return -1;
    }
    if (info) {
        info->ndim = nd;
        memcpy(info->sample, ps, (size_t)nd * sizeof *ps);
        info->nhwc = nhwc;
    }
    if (nhwc) {
        kvs k = {0};
        kv_li(&k, "dims", (int64_t[]){0, 2, 3, 1}, 4);
        if ((id = add_node(I, "to_nhwc", layer(I, "permute", &k), 1, &id)) < 0)
            return -1;
        int64_t hwc[3] = {ps[1], ps[2], ps[0]};
        memcpy(ps, hwc, sizeof hwc);
    }
    return def_dyn(I, in->name, id, nd, ps, o->no_batch ? -1 : 0, 0) ? 0 : -1;
}

/* Whether the graph normalises the input itself: its first ops (through
 * Cast, Identity and Transpose: tf2onnx's NHWC) are Mul / Add / Sub / Div
 * by constants of one or a few (per-channel) values, as x·255, x − 0.5,
 * (x − mean)/std.  desc gets them ("Mul 255, Sub (3), Div (3)"). */
static int normalizes(const imp *I, const char *input, char *desc, size_t cap)
{
    const char *v = input;
    int found = 0;
    size_t len = 0;
    desc[0] = 0;
    for (int guard = 0; guard < 16; guard++) {
        const sr_onnx_node *next = NULL;
        int readers = 0;
        for (int j = 0; j < I->m->nnodes; j++)
            for (int k = 0; k < I->m->nodes[j].ninputs; k++)
                if (!strcmp(I->m->nodes[j].inputs[k], v) && I->skip[j] != SKIP_PRUNED)
                    readers++, next = &I->m->nodes[j];
        if (readers != 1 || next->noutputs < 1)
            break;
        const char *op = next->op_type;
        if (!strcmp(op, "Cast") || !strcmp(op, "Identity") || !strcmp(op, "Transpose")) {
            v = next->outputs[0];
            continue;
        }
        if (strcmp(op, "Mul") && strcmp(op, "Add") && strcmp(op, "Sub") && strcmp(op, "Div"))
            break;
        if (next->ninputs != 2)
            break;
        const char *other = strcmp(next->inputs[0], v) ? next->inputs[0] : next->inputs[1];
        ival *cst = find((imp *)I, other);
        if (!cst || cst->store != V_STATIC || sr_fold_val_batched(&cst->s) || sr_numel(&cst->s.v[0]) < 1 ||
            sr_numel(&cst->s.v[0]) > 16)
            break;
        const sr_tensor *t = &cst->s.v[0];
        if (len < cap)
            len += sr_numel(t) == 1 ? (size_t)snprintf(desc + len, cap - len, "%s%s %.6g", found ? ", " : "", op,
                                                        sr_f64(t)[0])
                                    : (size_t)snprintf(desc + len, cap - len, "%s%s (%lld)", found ? ", " : "", op,
                                                        (long long)sr_numel(t));
        found++;
        v = next->outputs[0];
    }
    return found > 0;
}

/* The classifier head's input: the last Gemm / MatMul by a constant, when
 * the graph's output is its output (or that passed through ops that do not
 * mix features: Identity, Dropout, Flatten, Reshape, Softmax, LogSoftmax). */
static void find_head(imp *I, const char *output, sr_onnx_import_info *info)
{
    if (I->head_in < 0 || !info)
        return;
    const char *v = I->m->nodes[I->head_node].outputs[0];
    for (int guard = 0; guard < 64 && strcmp(v, output); guard++) {
        const sr_onnx_node *next = NULL;
        for (int j = 0; j < I->m->nnodes && !next; j++)
            for (int k = 0; k < I->m->nodes[j].ninputs; k++)
                if (!strcmp(I->m->nodes[j].inputs[k], v))
                    next = &I->m->nodes[j];
        if (!next || !next->noutputs ||
            !(strstr(" Identity Dropout Flatten Reshape Softmax LogSoftmax Add ", next->op_type) &&
              strstr(" Identity Dropout Flatten Reshape Softmax LogSoftmax Add ", next->op_type)[-1] == ' '))
            return;
        v = next->outputs[0];
    }
    if (strcmp(v, output))
        return;
    snprintf(info->features, sizeof info->features, "%s", I->v[I->head_in].name);
}

/* Whether the head's output (the graph's output out) is class scores: a
 * Softmax / LogSoftmax / Sigmoid on the way to the output, or as many
 * values as a common label set has (10: MNIST, CIFAR-10; 100: CIFAR-100;
 * 1000: ImageNet-1k; 11221, 21841, 21843: ImageNet-21k).  Otherwise the
 * last linear layer is taken to make the model's own descriptor (a face
 * embedding's 128 values), which the output is. */
static int head_scores(const imp *I, const ival *out, const char *outname)
{
    static const int64_t classes[] = {10, 100, 1000, 11221, 21841, 21843};
    const char *v = I->m->nodes[I->head_node].outputs[0];
    for (int guard = 0; guard < 64 && strcmp(v, outname); guard++) {
        const sr_onnx_node *next = NULL;
        for (int j = 0; j < I->m->nnodes && !next; j++)
            for (int k = 0; k < I->m->nodes[j].ninputs && !next; k++)
                if (!strcmp(I->m->nodes[j].inputs[k], v) && I->skip[j] != SKIP_PRUNED)
                    next = &I->m->nodes[j];
        if (!next || !next->noutputs)
            break;
        if (!strcmp(next->op_type, "Softmax") || !strcmp(next->op_type, "LogSoftmax") ||
            !strcmp(next->op_type, "Sigmoid"))
            return 1;
        v = next->outputs[0];
    }
    int64_t n = 1;
    for (int d = 0; d < out->nd; d++)
        n *= out->ps[d];
    for (size_t i = 0; i < sizeof classes / sizeof *classes; i++)
        if (n == classes[i])
            return 1;
    return 0;
}

/* The value table with the initializers and the caller's constants. */
static int imp_begin(imp *I, const sr_onnx_model *m, const sr_onnx_import_opts *o)
{
    memset(I, 0, sizeof *I);
    I->m = m, I->o = o, I->head_in = -1, I->head_node = -1;
    if (m->opset > 18)
        return sr_fail("onnx %s: opset %lld (srgeo reads up to 18; 11 to 17 are tested)", m->path,
                       (long long)m->opset);
    int nvals = m->ninits + m->ninputs + o->nconst + 64;
    for (int i = 0; i < m->nnodes; i++)
        nvals += m->nodes[i].noutputs + 8;
    I->cap = nvals;
    for (I->tcap = 64; I->tcap < 2 * nvals + 2; I->tcap *= 2)
        ;
    I->v = calloc((size_t)I->cap, sizeof *I->v);
    I->tab = calloc((size_t)I->tcap, sizeof *I->tab);
    I->skip = calloc((size_t)m->nnodes + 1, 1);
    I->g = sr_graph_new();
    if (!I->v || !I->tab || !I->skip || !I->g)
        return sr_fail("onnx %s: out of memory", m->path);
    if (I->g->dtype != o->dtype && sr_module_to_dtype(I->g, o->dtype))
        return -1;
    I->fold_budget = FOLD_BUDGET_BASE;
    I->fold_max = FOLD_MAX_BASE;
    I->fold_work_budget = FOLD_WORK_BASE;
    for (int i = 0; i < m->nnodes; i++)
        for (int a = 0; a < m->nodes[i].nattrs; a++)
            if (m->nodes[i].attrs[a].t)
                fold_max_grow(I, &m->nodes[i].attrs[a].t->value);
    for (int i = 0; i < m->ninits; i++) {
        I->fold_budget += 4 * sr_numel(&m->inits[i].value);
        I->fold_work_budget += 16 * sr_numel(&m->inits[i].value);
        fold_max_grow(I, &m->inits[i].value);
        ival *v = define(I, m->inits[i].name);
        if (!v || sr_fold_val_set(&v->s, m->inits[i].type, &m->inits[i].value))
            return sr_fail_context("onnx %s: initializer '%s'", m->path, m->inits[i].name);
        v->store = V_STATIC;
        v->init = 1;
    }
    for (int i = 0; i < o->nconst; i++) {
        I->fold_budget += 4 * sr_numel(&o->const_values[i]->value);
        I->fold_work_budget += 16 * sr_numel(&o->const_values[i]->value);
        fold_max_grow(I, &o->const_values[i]->value);
        ival *v = find(I, o->const_names[i]);
        if (!v)
            v = define(I, o->const_names[i]);
        if (!v || sr_fold_val_set(&v->s, o->const_values[i]->type, &o->const_values[i]->value))
            return sr_fail_context("onnx %s: constant '%s'", m->path, o->const_names[i]);
        v->store = V_STATIC;
    }
    return 0;
}

/* Only the nodes the value named want depends on are translated: the
 * others are marked SKIP_PRUNED (walking back from want over the sorted
 * nodes), so an op srgeo does not take is no error where nothing asked
 * for its result.  The number of nodes pruned, or -1. */
static int prune(imp *I, const char *want)
{
    const sr_onnx_model *m = I->m;
    int64_t cap = 64, n = 1;
    for (int j = 0; j < m->nnodes; j++)
        n += m->nodes[j].ninputs;
    while (cap < 2 * n)
        cap *= 2;
    const char **set = calloc((size_t)cap, sizeof *set);
    if (!set)
        return sr_fail("onnx %s: out of memory", m->path);
#define NEED_SLOT(name)                                                                          \
    for (h = hash_str(name) & (uint64_t)(cap - 1); set[h] && strcmp(set[h], name); h = (h + 1) & (uint64_t)(cap - 1)) \
        ;
    uint64_t h;
    NEED_SLOT(want);
    set[h] = want;
    int pruned = 0;
    for (int j = m->nnodes - 1; j >= 0; j--) {
        const sr_onnx_node *nd = &m->nodes[j];
        int need = 0;
        for (int k = 0; k < nd->noutputs && !need; k++) {
            if (!*nd->outputs[k])
                continue;
            NEED_SLOT(nd->outputs[k]);
            need = set[h] != NULL;
        }
        if (!need) {
            I->skip[j] = SKIP_PRUNED;
            pruned++;
            continue;
        }
        for (int k = 0; k < nd->ninputs; k++) {
            if (!*nd->inputs[k])
                continue;
            NEED_SLOT(nd->inputs[k]);
            set[h] = nd->inputs[k];
        }
    }
#undef NEED_SLOT
    free(set);
    return pruned;
}

static int imp_nodes(imp *I)
{
    for (int j = 0; j < I->m->nnodes; j++)
        if (!I->skip[j] && (sr_interrupted() || translate(I, j)))
            return sr_fail_context("onnx %s", I->m->path);
    return 0;
}

static void imp_end(imp *I)
{
    for (int i = 0; i < I->nv; i++) {
        free(I->v[i].name);
        sr_fold_val_free(&I->v[i].s);
    }
    free(I->v);
    free(I->tab);
    free(I->skip);
    sr_module_release(I->g);
    memset(I, 0, sizeof *I);
}

/* The module graph of an imported model, from imp_begin on. */
static sr_module *import_graph(imp *I, sr_onnx_import_info *info)
{
    const sr_onnx_model *m = I->m;
    const sr_onnx_import_opts *o = I->o;
    const sr_onnx_value *img = NULL;
    for (int i = 0; i < m->ninputs; i++) {
        if (find(I, m->inputs[i].name))
            continue; /* an initializer listed as input (IR < 4), or given */
        if (o->input && strcmp(o->input, m->inputs[i].name))
            return sr_fail("onnx %s: input '%s' has no value (give it as a constant)", m->path, m->inputs[i].name),
                   NULL;
        if (img)
            return sr_fail("onnx %s: inputs '%s' and '%s': srgeo takes one image input (name it with input=)", m->path,
                           img->name, m->inputs[i].name),
                   NULL;
        img = &m->inputs[i];
    }
    if (!img)
        return sr_fail("onnx %s: no input left for the image%s%s", m->path, o->input ? " named " : "",
                       o->input ? o->input : ""),
               NULL;
    I->img = img->name;
    if (image_value(I, img, o, info))
        return sr_fail_context("onnx %s", m->path), NULL;
    const char *outname = o->output ? o->output : m->noutputs ? m->outputs[0].name : "";
    int pruned = prune(I, outname);
    if (pruned < 0 || imp_nodes(I))
        return NULL;
    ival *out = find(I, outname);
    if (!out)
        return sr_fail("onnx %s: no value named '%s' to return", m->path, outname), NULL;
    if (out->store != V_DYN)
        return sr_fail("onnx %s: the output '%s' does not depend on the input", m->path, outname), NULL;
    if (out->bat > 0 || (out->bat == 0 && out->merged))
        return sr_fail("onnx %s: the output '%s' does not have the batch first (axis %d%s)", m->path, outname, out->bat,
                       out->merged ? ", merged" : ""),
               NULL;
    if (!I->g->nchildren) {
        /* the output is the input itself: one identity node */
        if (add_node(I, "identity", sr_identity_new(), 1, &out->id) < 0)
            return NULL;
        out->id = 1;
    }
    if (sr_graph_set_output(I->g, out->id))
        return NULL;
    /* every dynamic value name is a tap: an alias of the node making it
     * (set at once: one walk of the graph, not one per value) */
    const char **names = malloc(((size_t)I->nv + 1) * sizeof *names), **nodes = malloc(((size_t)I->nv + 1) * sizeof *nodes);
    int na = 0;
    for (int i = 0; names && nodes && i < I->nv; i++) {
        ival *v = &I->v[i];
        if (v->store == V_DYN && v->id && strcmp(I->g->children[v->id - 1].name, v->name))
            names[na] = v->name, nodes[na++] = I->g->children[v->id - 1].name;
    }
    int arc = !names || !nodes ? sr_fail("onnx %s: out of memory", m->path) : sr_module_set_aliases(I->g, na, names, nodes);
    free(names);
    free(nodes);
    /* "output": the value returned; "embedding" (and "features", its older
     * name): the classifier head's input, the default tap when the graph
     * ends in class scores (head_scores) */
    if (arc || sr_module_set_alias(I->g, "output", I->g->children[out->id - 1].name))
        return NULL;
    if (info) {
        find_head(I, outname, info);
        ival *f = info->features[0] ? find(I, info->features) : NULL;
        if (f && f->id &&
            (sr_module_set_alias(I->g, "features", I->g->children[f->id - 1].name) ||
             sr_module_set_alias(I->g, "embedding", I->g->children[f->id - 1].name)))
            return NULL;
        if (!f || !f->id)
            info->features[0] = 0;
        info->scores = info->features[0] && head_scores(I, out, outname);
        if (info->scores && sr_module_set_default_tap(I->g, "embedding"))
            return NULL;
        snprintf(info->tap, sizeof info->tap, "%s", info->scores ? "embedding" : "output");
        info->normalizes = normalizes(I, img->name, info->preprocess, sizeof info->preprocess);
        info->nodes = I->g->nchildren;
        info->folded = I->folded;
        info->pruned = pruned;
    }
    sr_module *g = I->g;
    I->g = NULL;
    return g;
}

sr_module *sr_onnx_import(const sr_onnx_model *m, const sr_onnx_import_opts *o, sr_onnx_import_info *info)
{
    sr_onnx_import_opts defaults = {0};
    imp I;
    if (info)
        memset(info, 0, sizeof *info);
    sr_module *g = imp_begin(&I, m, o ? o : &defaults) ? NULL : import_graph(&I, info);
    imp_end(&I);
    return g;
}

int sr_onnx_evaluate(const sr_onnx_model *m, const sr_onnx_import_opts *o, sr_tensor *out, int nout)
{
    sr_onnx_import_opts defaults = {0};
    imp I;
    int rc = imp_begin(&I, m, o ? o : &defaults);
    for (int i = 0; !rc && i < m->ninputs; i++)
        if (!find(&I, m->inputs[i].name))
            rc = sr_fail("onnx %s: input '%s' has no value (evaluation takes every input as a constant)", m->path,
                         m->inputs[i].name);
    if (!rc && nout != m->noutputs)
        rc = sr_fail("onnx %s: %d outputs, %d slots", m->path, m->noutputs, nout);
    if (!rc)
        rc = imp_nodes(&I);
    for (int i = 0; !rc && i < nout; i++) {
        ival *v = find(&I, m->outputs[i].name);
        if (!v || v->store != V_STATIC)
            rc = sr_fail("onnx %s: no value for output '%s'", m->path, m->outputs[i].name);
        else if (sr_fold_val_batched(&v->s))
            rc = sr_fail("onnx %s: output '%s' depends on the batch", m->path, m->outputs[i].name);
        else
            rc = sr_tensor_copy(&out[i], &v->s.v[0]);
    }
    imp_end(&I);
    return rc;
}
