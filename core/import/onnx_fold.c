/* onnx_fold.c - constant folding for the ONNX importer (onnx_fold.h): the
 * ops exporters use to compute shapes, masks and tables from constants,
 * evaluated in float64 once per batch size (once in all when no input
 * depends on the batch).  Semantics follow the ONNX operator spec,
 * integers truncating where the spec says so (Div, Cast). */
#include "import/onnx_fold.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kernels/bf16.h"
#include "tensor/tensor_ops.h"

/* Every folded tensor is made here.  Folding computes what a file only
 * describes (ConstantOfShape, Expand, Tile, Range): a few bytes may ask for
 * any size, so the size is bounded by lim, which the importer sets from the
 * file (sr_fold_node): real exports fold shapes, masks and tables, far
 * below it, and casts or transposes of their own weights. */
static int new_f64(int64_t lim, sr_tensor *out, int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) {
        if (shape[d] < 0)
            break; /* sr_tensor_alloc says so */
        n = shape[d] && n > lim / shape[d] ? lim + 1 : n * shape[d];
    }
    if (n > lim) {
        sr_tensor t = SR_TENSOR_INIT; /* only its shape, for the message */
        t.ndim = nd > SR_MAXDIM ? SR_MAXDIM : nd;
        memcpy(t.shape, shape, (size_t)t.ndim * sizeof *shape);
        return sr_fail("folding: a constant of shape %s is more than %lld elements", SR_SHAPE(&t),
                       (long long)lim);
    }
    sr_tensor_free(out);
    return sr_tensor_alloc(out, SR_F64, nd, shape);
}

int64_t sr_fold_int(double v)
{
    const double lim = 4611686018427387904.0; /* 2^62 */
    if (isnan(v))
        return 0;
    return v >= lim ? (int64_t)lim : v <= -lim ? -(int64_t)lim : (int64_t)v;
}

void sr_fold_val_free(sr_fold_val *s)
{
    sr_tensor_free(&s->v[0]);
    sr_tensor_free(&s->v[1]);
    s->type = 0;
}

int sr_fold_val_batched(const sr_fold_val *s) { return s->v[0].storage != s->v[1].storage; }

int sr_fold_val_set(sr_fold_val *s, int type, const sr_tensor *t)
{
    sr_fold_val_free(s);
    s->type = type;
    if (sr_tensor_convert(&s->v[0], t, SR_F64))
        return -1;
    sr_tensor_share(&s->v[1], &s->v[0]);
    return 0;
}

/* --- attributes ------------------------------------------------------------ */
static int64_t attr_int(const sr_onnx_node *n, const char *name, int64_t def)
{
    const sr_onnx_attr *a = sr_onnx_attr_find(n, name);
    return a && a->type == SR_ONNX_ATTR_INT ? a->i : def;
}

static double attr_float(const sr_onnx_node *n, const char *name, double def)
{
    const sr_onnx_attr *a = sr_onnx_attr_find(n, name);
    return a && a->type == SR_ONNX_ATTR_FLOAT ? a->f : a && a->type == SR_ONNX_ATTR_INT ? (double)a->i : def;
}

/* An int list from attribute name, or else from input `in` (a 1-D static
 * tensor); *n = -1 when neither is there. */
static int int_list(const sr_onnx_node *n, const char *name, const sr_tensor *in, int64_t *out, int max, int *cnt)
{
    const sr_onnx_attr *a = sr_onnx_attr_find(n, name);
    *cnt = -1;
    if (a && a->type == SR_ONNX_ATTR_INTS) {
        if (a->n > max)
            return sr_fail("%s: attribute %s has %d entries (at most %d)", n->op_type, name, a->n, max);
        for (int i = 0; i < a->n; i++)
            out[i] = a->ints[i];
        *cnt = a->n;
    } else if (in) {
        int64_t k = sr_numel(in);
        if (in->ndim > 1 || k > max)
            return sr_fail("%s: input %s %s must be a list of at most %d", n->op_type, name, SR_SHAPE(in), max);
        for (int64_t i = 0; i < k; i++)
            out[i] = sr_fold_int(sr_f64(in)[i]);
        *cnt = (int)k;
    }
    return 0;
}

static int norm_axis(const char *op, int64_t axis, int rank, int *out)
{
    int64_t a = axis < 0 ? axis + rank : axis;
    *out = 0;
    if (a < 0 || a >= rank)
        return sr_fail("%s: axis %lld is out of range for rank %d", op, (long long)axis, rank);
    *out = (int)a;
    return 0;
}

/* --- elementwise with broadcasting ------------------------------------------ */
typedef double (*fold_fn)(const double *x, const void *ctx);

static int bcast(int64_t lim, const char *op, sr_tensor *out, int nin, const sr_tensor *const *in, fold_fn fn, const void *ctx)
{
    int nd = 0;
    for (int i = 0; i < nin; i++)
        nd = in[i]->ndim > nd ? in[i]->ndim : nd;
    int64_t shape[SR_MAXDIM], st[8][SR_MAXDIM];
    for (int d = 0; d < nd; d++) {
        shape[d] = 1;
        for (int i = 0; i < nin; i++) {
            int id = in[i]->ndim - nd + d;
            int64_t s = id >= 0 ? in[i]->shape[id] : 1;
            if (s != 1 && shape[d] != 1 && s != shape[d])
                return sr_fail("%s: shapes %s and %s do not broadcast", op, SR_SHAPE(in[0]), SR_SHAPE(in[i]));
            if (s != 1)
                shape[d] = s;
        }
    }
    for (int i = 0; i < nin; i++) {
        int64_t s = 1;
        for (int d = nd - 1; d >= 0; d--) {
            int id = in[i]->ndim - nd + d;
            int64_t sz = id >= 0 ? in[i]->shape[id] : 1;
            st[i][d] = sz == 1 ? 0 : s;
            s *= sz;
        }
    }
    sr_tensor r = SR_TENSOR_INIT;
    if (new_f64(lim, &r, nd, shape))
        return -1;
    /* The inputs' offsets follow the output index as it counts up (a
     * bounded but large Expand takes seconds otherwise under ASan). */
    int64_t n = sr_numel(&r), idx[SR_MAXDIM] = {0}, off[8] = {0};
    const double *src[8];
    for (int i = 0; i < nin; i++)
        src[i] = sr_f64(in[i]);
    double *dst = sr_f64(&r);
    for (int64_t e = 0; e < n; e++) {
        double x[8];
        for (int i = 0; i < nin; i++)
            x[i] = src[i][off[i]];
        dst[e] = fn(x, ctx);
        for (int d = nd - 1; d >= 0; d--) {
            int wrap = ++idx[d] == shape[d];
            for (int i = 0; i < nin; i++)
                off[i] += wrap ? -(shape[d] - 1) * st[i][d] : st[i][d];
            if (!wrap)
                break;
            idx[d] = 0;
        }
    }
    sr_tensor_free(out);
    *out = r;
    return 0;
}

typedef struct {
    const char *op;
    int is_int, fmod;
    double a, b;
} op_ctx;

static double round_even(double v) { return v - floor(v) == 0.5 ? 2 * round(v / 2) : round(v); }

static double f_unary(const double *x, const void *ctx)
{
    const op_ctx *c = ctx;
    const char *op = c->op;
    double v = x[0];
    if (!strcmp(op, "Neg")) return -v;
    if (!strcmp(op, "Abs")) return fabs(v);
    if (!strcmp(op, "Sqrt")) return sqrt(v);
    if (!strcmp(op, "Exp")) return exp(v);
    if (!strcmp(op, "Log")) return log(v);
    if (!strcmp(op, "Floor")) return floor(v);
    if (!strcmp(op, "Ceil")) return ceil(v);
    if (!strcmp(op, "Round")) return round_even(v);
    if (!strcmp(op, "Reciprocal")) return 1 / v;
    if (!strcmp(op, "Sigmoid")) return 1 / (1 + exp(-v));
    if (!strcmp(op, "Relu")) return v > 0 ? v : 0;
    if (!strcmp(op, "Tanh")) return tanh(v);
    if (!strcmp(op, "Erf")) return erf(v);
    if (!strcmp(op, "Not")) return v == 0;
    if (!strcmp(op, "Sign")) return v > 0 ? 1 : v < 0 ? -1 : 0;
    if (!strcmp(op, "Clip")) return v < c->a ? c->a : v > c->b ? c->b : v;
    return v; /* Identity, Dropout */
}

static double f_binary(const double *x, const void *ctx)
{
    const op_ctx *c = ctx;
    const char *op = c->op;
    double a = x[0], b = x[1];
    if (!strcmp(op, "Add") || !strcmp(op, "Sum")) return a + b;
    if (!strcmp(op, "Sub")) return a - b;
    if (!strcmp(op, "Mul")) return a * b;
    if (!strcmp(op, "Div")) return c->is_int ? (b == 0 ? 0 : trunc(a / b)) : a / b;
    if (!strcmp(op, "Pow")) return pow(a, b);
    if (!strcmp(op, "Mod")) {
        if (c->fmod || !c->is_int)
            return fmod(a, b);
        if (b == 0)
            return 0;
        double r = fmod(a, b); /* the sign of the divisor, as Python */
        return r != 0 && (r < 0) != (b < 0) ? r + b : r;
    }
    if (!strcmp(op, "Max")) return a > b || isnan(a) ? a : b;
    if (!strcmp(op, "Min")) return a < b || isnan(a) ? a : b;
    if (!strcmp(op, "Equal")) return a == b;
    if (!strcmp(op, "Less")) return a < b;
    if (!strcmp(op, "Greater")) return a > b;
    if (!strcmp(op, "LessOrEqual")) return a <= b;
    if (!strcmp(op, "GreaterOrEqual")) return a >= b;
    if (!strcmp(op, "And")) return a != 0 && b != 0;
    if (!strcmp(op, "Or")) return a != 0 || b != 0;
    return (a != 0) != (b != 0); /* Xor */
}

static double f_where(const double *x, const void *ctx)
{
    (void)ctx;
    return x[0] != 0 ? x[1] : x[2];
}

static const char *const unary_ops[] = {"Neg", "Abs", "Sqrt", "Exp", "Log", "Floor", "Ceil", "Round", "Reciprocal",
                                        "Sigmoid", "Relu", "Tanh", "Erf", "Not", "Sign", "Identity", "Dropout",
                                        "Clip", NULL};
static const char *const binary_ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Equal",
                                         "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor",
                                         NULL};
static const char *const other_ops[] = {"Where", "Cast", "CastLike", "Concat", "Gather", "Unsqueeze", "Squeeze",
                                        "Reshape", "Flatten", "Transpose", "Slice", "Expand", "Tile", "Range",
                                        "ConstantOfShape", "Constant", "Split", "Size", "ReduceProd", "ReduceSum",
                                        "ReduceMean", "ReduceMax", "ReduceMin", "MatMul", "Shape", NULL};

static int in_list(const char *const *l, const char *op)
{
    for (; *l; l++)
        if (!strcmp(*l, op))
            return 1;
    return 0;
}

int sr_fold_knows(const char *op)
{
    return in_list(unary_ops, op) || in_list(binary_ops, op) || in_list(other_ops, op);
}

/* --- reshuffles ---------------------------------------------------------- */
static int64_t strides_of(const sr_tensor *t, int64_t *st)
{
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        st[d] = s;
        s *= t->shape[d];
    }
    return s;
}


static int reshaped(sr_tensor *out, const sr_tensor *x, int nd, const int64_t *shape, const char *op)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    if (n != sr_numel(x) || nd > SR_MAXDIM)
        return sr_fail("%s: %s cannot take %lld values", op, SR_SHAPE(x), (long long)n);
    sr_tensor r = SR_TENSOR_INIT;
    if (sr_tensor_copy(&r, x))
        return -1;
    r.ndim = nd;
    memcpy(r.shape, shape, (size_t)nd * sizeof *shape);
    sr_tensor_free(out);
    *out = r;
    return 0;
}

/* out = x with dims permuted: out.shape[d] = x.shape[perm[d]]. */
static int permuted(int64_t lim, sr_tensor *out, const sr_tensor *x, const int *perm)
{
    int nd = x->ndim;
    int64_t xs[SR_MAXDIM], shape[SR_MAXDIM], idx[SR_MAXDIM] = {0};
    strides_of(x, xs);
    for (int d = 0; d < nd; d++)
        shape[d] = x->shape[perm[d]];
    sr_tensor r = SR_TENSOR_INIT;
    if (new_f64(lim, &r, nd, shape))
        return -1;
    for (int64_t e = 0, n = sr_numel(&r); e < n; e++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++)
            off += idx[d] * xs[perm[d]];
        sr_f64(&r)[e] = sr_f64(x)[off];
        for (int d = nd - 1; d >= 0 && ++idx[d] == shape[d]; d--)
            idx[d] = 0;
    }
    sr_tensor_free(out);
    *out = r;
    return 0;
}

/* out = x[:, ..., start + i·step (i < len), ...] along axis. */
static int sliced(int64_t lim, sr_tensor *out, const sr_tensor *x, int axis, int64_t start, int64_t step, int64_t len)
{
    int64_t shape[SR_MAXDIM], outer = 1, inner = 1;
    memcpy(shape, x->shape, sizeof shape);
    shape[axis] = len;
    for (int d = 0; d < axis; d++)
        outer *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++)
        inner *= x->shape[d];
    sr_tensor r = SR_TENSOR_INIT;
    if (new_f64(lim, &r, x->ndim, shape))
        return -1;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < len; i++)
            memcpy(sr_f64(&r) + (o * len + i) * inner, sr_f64(x) + (o * x->shape[axis] + start + i * step) * inner,
                   (size_t)inner * sizeof(double));
    sr_tensor_free(out);
    *out = r;
    return 0;
}

/* ONNX's Slice bounds for one axis of size n: start, step, count. */
static void slice_bounds(int64_t n, int64_t st, int64_t en, int64_t step, int64_t *start, int64_t *len)
{
    if (st < 0)
        st += n;
    if (en < 0)
        en += n;
    if (step > 0) {
        st = st < 0 ? 0 : st > n ? n : st;
        en = en < 0 ? 0 : en > n ? n : en;
        *len = en > st ? (en - st + step - 1) / step : 0;
    } else {
        st = st < 0 ? 0 : st > n - 1 ? n - 1 : st;
        en = en < -1 ? -1 : en > n - 1 ? n - 1 : en;
        *len = st > en ? (st - en - step - 1) / -step : 0;
    }
    *start = st;
}

/* Broadcast x to shape (Expand; shape may also be smaller, as numpy). */
static double f_copy(const double *x, const void *ctx)
{
    (void)ctx;
    return x[0];
}

static int reduce(int64_t lim, const char *op, sr_tensor *out, const sr_tensor *x, const int64_t *axes, int naxes, int keep)
{
    int red[SR_MAXDIM] = {0}, nd = x->ndim;
    if (naxes < 0)
        for (int d = 0; d < nd; d++)
            red[d] = 1;
    for (int i = 0; i < naxes; i++) {
        int a;
        if (norm_axis(op, axes[i], nd, &a))
            return -1;
        red[a] = 1;
    }
    int64_t oshape[SR_MAXDIM], kshape[SR_MAXDIM], xs[SR_MAXDIM], idx[SR_MAXDIM] = {0};
    int ond = 0;
    for (int d = 0; d < nd; d++) {
        kshape[d] = red[d] ? 1 : x->shape[d];
        if (!red[d] || keep)
            oshape[ond++] = kshape[d];
    }
    sr_tensor r = SR_TENSOR_INIT;
    if (new_f64(lim, &r, nd, kshape))
        return -1;
    strides_of(&r, xs);
    int64_t n = sr_numel(&r), cnt = n ? sr_numel(x) / n : 0;
    int prod = !strcmp(op, "ReduceProd"), mx = !strcmp(op, "ReduceMax"), mn = !strcmp(op, "ReduceMin");
    for (int64_t o = 0; o < n; o++)
        sr_f64(&r)[o] = prod ? 1 : mx ? -INFINITY : mn ? INFINITY : 0;
    for (int64_t e = 0, m = sr_numel(x); e < m; e++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++)
            off += red[d] ? 0 : idx[d] * xs[d];
        double v = sr_f64(x)[e], *t = sr_f64(&r) + off;
        *t = prod ? *t * v : mx ? fmax(*t, v) : mn ? fmin(*t, v) : *t + v;
        for (int d = nd - 1; d >= 0 && ++idx[d] == x->shape[d]; d--)
            idx[d] = 0;
    }
    if (!strcmp(op, "ReduceMean"))
        for (int64_t o = 0; o < n; o++)
            sr_f64(&r)[o] /= (double)cnt;
    r.ndim = ond;
    memcpy(r.shape, oshape, sizeof oshape);
    sr_tensor_free(out);
    *out = r;
    return 0;
}

/* v rounded to bfloat16 (through float32, as a Cast from float does). */
static double to_bf16(double v) { return sr_bf16_round((float)v); }

/* v rounded to float16 (nearest even, once, from the double: what a cast
 * to C's _Float16 does where the target has it; clang on x86-64 has not). */
static double to_f16(double v)
{
    if (isnan(v) || isinf(v))
        return v;
    double a = fabs(v);
    if (a >= 65520) /* from half-way to 2^16 up: overflow */
        return v < 0 ? -INFINITY : INFINITY;
    int e;
    frexp(a, &e);                               /* a = m 2^e, m in [0.5, 1) */
    double q = ldexp(1, (e < -13 ? -13 : e) - 11); /* the spacing: 10 fraction bits; subnormals below 2^-14 */
    return nearbyint(v / q) * q;                /* nearest even in the default rounding mode */
}

static double cast_to(double v, int type)
{
    switch (type) {
    case SR_ONNX_FLOAT: return (float)v;
    case SR_ONNX_FLOAT16: return to_f16(v);
    case SR_ONNX_BFLOAT16: return to_bf16(v);
    case SR_ONNX_BOOL: return v != 0;
    case SR_ONNX_DOUBLE: return v;
    default: return isnan(v) ? 0 : trunc(v);
    }
}

/* One instance of the op: out[k] from in[.][k]; *type the output type. */
static int fold_one(int64_t lim, const sr_onnx_node *n, int64_t opset, const sr_tensor *const *in, const int *types, int nin,
                    sr_tensor *outs, int *otype)
{
    const char *op = n->op_type;
    sr_tensor *out = &outs[0];
    const sr_tensor *x = nin > 0 ? in[0] : NULL;
    *otype = nin > 0 && types[0] ? types[0] : SR_ONNX_FLOAT;
    op_ctx c = {op, sr_onnx_type_is_int(*otype), (int)attr_int(n, "fmod", 0), 0, 0};
    /* The inputs that must be there (an empty name is an optional input
     * left out); later ones are optional where the ops below read them. */
    int need = !strcmp(op, "Constant") ? 0
               : in_list(binary_ops, op) ? nin
               : !strcmp(op, "Where") || !strcmp(op, "Range") ? 3
               : !strcmp(op, "Gather") || !strcmp(op, "MatMul") ? 2 : 1;
    for (int i = 0; i < need; i++)
        if (i >= nin || !in[i])
            return sr_fail("%s: input %d is missing", op, i + 1);
    /* inputs read as scalars must hold a value */
    int scalars = !strcmp(op, "Range") ? 3 : !strcmp(op, "Clip") ? nin : 0;
    for (int i = !strcmp(op, "Clip"); i < scalars && i < nin; i++)
        if (in[i] && sr_numel(in[i]) < 1)
            return sr_fail("%s: input %d %s is empty", op, i + 1, SR_SHAPE(in[i]));
    if (in_list(unary_ops, op)) {
        if (!strcmp(op, "Clip")) {
            c.a = nin > 1 && in[1] ? sr_f64(in[1])[0] : attr_float(n, "min", -INFINITY);
            c.b = nin > 2 && in[2] ? sr_f64(in[2])[0] : attr_float(n, "max", INFINITY);
        }
        if (!strcmp(op, "Not"))
            *otype = SR_ONNX_BOOL;
        return bcast(lim, op, out, 1, &x, f_unary, &c);
    }
    if (in_list(binary_ops, op)) {
        if (nin < 1)
            return sr_fail("%s: no inputs", op);
        if (nin == 1)
            return bcast(lim, op, out, 1, &x, f_copy, &c);
        if (bcast(lim, op, out, 2, in, f_binary, &c))
            return -1;
        for (int i = 2; i < nin; i++) { /* variadic Max, Min, Sum */
            const sr_tensor *pair[2] = {out, in[i]};
            sr_tensor t = SR_TENSOR_INIT;
            if (bcast(lim, op, &t, 2, pair, f_binary, &c))
                return -1;
            sr_tensor_free(out);
            *out = t;
        }
        if (strstr("Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor", op))
            *otype = SR_ONNX_BOOL;
        return 0;
    }
    if (!strcmp(op, "Where")) {
        if (nin < 3)
            return sr_fail("Where: needs 3 inputs");
        *otype = types[1];
        return bcast(lim, op, out, 3, in, f_where, NULL);
    }
    if (!strcmp(op, "Cast") || !strcmp(op, "CastLike")) {
        int to = !strcmp(op, "Cast") ? (int)attr_int(n, "to", SR_ONNX_FLOAT) : nin > 1 ? types[1] : SR_ONNX_FLOAT;
        if (to == 8)
            return sr_fail("Cast: to strings is not supported");
        sr_tensor_free(out);
        if (sr_tensor_copy(out, x))
            return -1;
        for (int64_t e = 0, k = sr_numel(out); e < k; e++)
            sr_f64(out)[e] = cast_to(sr_f64(out)[e], to);
        *otype = to;
        return 0;
    }
    if (!strcmp(op, "Shape")) {
        int64_t r = x->ndim, st = attr_int(n, "start", 0), en = attr_int(n, "end", r);
        st = st < 0 ? st + r : st, en = en < 0 ? en + r : en;
        st = st < 0 ? 0 : st > r ? r : st, en = en < 0 ? 0 : en > r ? r : en;
        int64_t k = en > st ? en - st : 0;
        if (new_f64(lim, out, 1, &k))
            return -1;
        for (int64_t i = 0; i < k; i++)
            sr_f64(out)[i] = (double)x->shape[st + i];
        *otype = SR_ONNX_INT64;
        return 0;
    }
    if (!strcmp(op, "Size")) {
        sr_tensor_free(out);
        if (new_f64(lim, out, 0, NULL))
            return -1;
        sr_f64(out)[0] = (double)sr_numel(x);
        *otype = SR_ONNX_INT64;
        return 0;
    }
    if (!strcmp(op, "Constant")) {
        const sr_onnx_attr *a = n->nattrs ? &n->attrs[0] : NULL;
        sr_tensor_free(out);
        if (!a)
            return sr_fail("Constant: no value attribute");
        if (a->type == SR_ONNX_ATTR_TENSOR) {
            *otype = a->t->type;
            return sr_tensor_convert(out, &a->t->value, SR_F64);
        }
        if (a->type == SR_ONNX_ATTR_FLOAT || a->type == SR_ONNX_ATTR_INT) {
            *otype = a->type == SR_ONNX_ATTR_INT ? SR_ONNX_INT64 : SR_ONNX_FLOAT;
            if (new_f64(lim, out, 0, NULL))
                return -1;
            sr_f64(out)[0] = a->type == SR_ONNX_ATTR_INT ? (double)a->i : a->f;
            return 0;
        }
        if (a->type == SR_ONNX_ATTR_FLOATS || a->type == SR_ONNX_ATTR_INTS) {
            *otype = a->type == SR_ONNX_ATTR_INTS ? SR_ONNX_INT64 : SR_ONNX_FLOAT;
            int64_t k = a->n;
            if (new_f64(lim, out, 1, &k))
                return -1;
            for (int i = 0; i < a->n; i++)
                sr_f64(out)[i] = a->type == SR_ONNX_ATTR_INTS ? (double)a->ints[i] : a->floats[i];
            return 0;
        }
        return sr_fail("Constant: attribute %s is not supported", a->name);
    }
    if (!strcmp(op, "ConstantOfShape")) {
        const sr_onnx_attr *a = sr_onnx_attr_find(n, "value");
        int64_t shape[SR_MAXDIM];
        int nd;
        if (int_list(n, "", x, shape, SR_MAXDIM, &nd))
            return -1;
        for (int d = 0; d < nd; d++)
            if (shape[d] < 0 || shape[d] > ((int64_t)1 << 32))
                return sr_fail("ConstantOfShape: dim %d is %lld", d, (long long)shape[d]);
        if (new_f64(lim, out, nd, shape))
            return -1;
        double v = 0;
        *otype = SR_ONNX_FLOAT;
        if (a && a->type == SR_ONNX_ATTR_TENSOR && sr_numel(&a->t->value) == 1) {
            v = sr_get_flat(&a->t->value, 0);
            *otype = a->t->type;
        }
        sr_tensor_fill(out, v);
        return 0;
    }
    if (!strcmp(op, "Range")) {
        if (nin < 3)
            return sr_fail("Range: needs start, limit, delta");
        double s = sr_f64(in[0])[0], l = sr_f64(in[1])[0], d = sr_f64(in[2])[0];
        double cnt = d == 0 ? -1 : ceil((l - s) / d);
        if (!(cnt >= 0) || cnt > 1e8)
            return sr_fail("Range: %g to %g by %g", s, l, d);
        int64_t k = (int64_t)cnt;
        if (new_f64(lim, out, 1, &k))
            return -1;
        for (int64_t i = 0; i < k; i++)
            sr_f64(out)[i] = s + (double)i * d;
        return 0;
    }
    int nd = x->ndim;
    if (!strcmp(op, "Concat")) {
        int axis;
        if (!sr_onnx_attr_find(n, "axis") && !(opset >= 1 && opset < 4))
            return sr_fail("Concat: attribute axis is required (since opset 4)");
        if (norm_axis(op, attr_int(n, "axis", 1), nd, &axis)) /* Concat-1 joined on axis 1 by default */
            return -1;
        sr_tensor_free(out);
        const sr_tensor *ts[nin > 0 ? nin : 1];
        int k = 0;
        for (int i = 0; i < nin; i++)
            if (in[i] && sr_numel(in[i]))
                ts[k++] = in[i];
        if (!k) /* all empty */
            return sr_tensor_copy(out, x);
        return sr_cat(out, ts, k, axis);
    }
    if (!strcmp(op, "Gather")) {
        int axis;
        if (nin < 2 || norm_axis(op, attr_int(n, "axis", 0), nd, &axis))
            return nin < 2 ? sr_fail("Gather: needs indices") : -1;
        const sr_tensor *ix = in[1];
        int ond = nd - 1 + ix->ndim;
        if (ond > SR_MAXDIM)
            return sr_fail("Gather: the result has %d dims", ond);
        int64_t shape[SR_MAXDIM], outer = 1, inner = 1, k = sr_numel(ix), m = x->shape[axis];
        int o = 0;
        for (int d = 0; d < axis; d++)
            outer *= shape[o++] = x->shape[d];
        for (int d = 0; d < ix->ndim; d++)
            shape[o++] = ix->shape[d];
        for (int d = axis + 1; d < nd; d++)
            inner *= shape[o++] = x->shape[d];
        sr_tensor r = SR_TENSOR_INIT;
        if (new_f64(lim, &r, ond, shape))
            return -1;
        for (int64_t a = 0; a < outer; a++)
            for (int64_t i = 0; i < k; i++) {
                int64_t j = sr_fold_int(sr_f64(ix)[i]);
                j = j < 0 ? j + m : j;
                if (j < 0 || j >= m) {
                    sr_tensor_free(&r);
                    return sr_fail("Gather: index %lld is out of range for axis %d of %s",
                                   (long long)sr_fold_int(sr_f64(ix)[i]), axis, SR_SHAPE(x));
                }
                memcpy(sr_f64(&r) + (a * k + i) * inner, sr_f64(x) + (a * m + j) * inner,
                       (size_t)inner * sizeof(double));
            }
        sr_tensor_free(out);
        *out = r;
        return 0;
    }
    if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze")) {
        int64_t axes[SR_MAXDIM];
        int na, sq = op[0] == 'S';
        if (int_list(n, "axes", nin > 1 ? in[1] : NULL, axes, SR_MAXDIM, &na))
            return -1;
        int64_t shape[SR_MAXDIM];
        int ond = 0;
        if (sq) {
            int drop[SR_MAXDIM] = {0};
            for (int i = 0; i < na; i++) {
                int a;
                if (norm_axis(op, axes[i], nd, &a))
                    return -1;
                if (x->shape[a] != 1)
                    return sr_fail("Squeeze: axis %d of %s is not 1", a, SR_SHAPE(x));
                drop[a] = 1;
            }
            for (int d = 0; d < nd; d++)
                if (na < 0 ? x->shape[d] != 1 : !drop[d])
                    shape[ond++] = x->shape[d];
        } else {
            ond = nd + (na > 0 ? na : 0);
            if (na < 0 || ond > SR_MAXDIM)
                return sr_fail("Unsqueeze: needs axes (result of rank %d)", ond);
            int ins[SR_MAXDIM] = {0};
            for (int i = 0; i < na; i++) {
                int a;
                if (norm_axis(op, axes[i], ond, &a))
                    return -1;
                if (ins[a]++)
                    return sr_fail("Unsqueeze: axis %d twice", a);
            }
            for (int d = 0, j = 0; d < ond; d++)
                shape[d] = ins[d] ? 1 : x->shape[j++];
        }
        return reshaped(out, x, ond, shape, op);
    }
    if (!strcmp(op, "Reshape")) {
        int64_t s[SR_MAXDIM];
        int ns, free_d = -1;
        if (nin < 2 || int_list(n, "shape", in[1], s, SR_MAXDIM, &ns))
            return nin < 2 ? sr_fail("Reshape: needs a shape") : -1;
        int64_t known = 1;
        for (int d = 0; d < ns; d++) {
            if (s[d] == 0 && !attr_int(n, "allowzero", 0))
                s[d] = d < nd ? x->shape[d] : 0;
            if (s[d] == -1 && free_d < 0)
                free_d = d;
            else if (s[d] < 0)
                return sr_fail("Reshape: shape entry %d is %lld", d, (long long)s[d]);
            else
                known *= s[d];
        }
        if (free_d >= 0)
            s[free_d] = known ? sr_numel(x) / known : 0;
        return reshaped(out, x, ns, s, op);
    }
    if (!strcmp(op, "Flatten")) {
        int axis;
        int64_t a = attr_int(n, "axis", 1);
        if (a != nd && norm_axis(op, a, nd, &axis))
            return -1;
        axis = a == nd ? nd : axis;
        int64_t s[2] = {1, 1};
        for (int d = 0; d < nd; d++)
            s[d >= axis] *= x->shape[d];
        return reshaped(out, x, 2, s, op);
    }
    if (!strcmp(op, "Transpose")) {
        int64_t p[SR_MAXDIM];
        int np, perm[SR_MAXDIM], seen[SR_MAXDIM] = {0};
        if (int_list(n, "perm", NULL, p, SR_MAXDIM, &np))
            return -1;
        if (np < 0)
            for (np = 0; np < nd; np++)
                p[np] = nd - 1 - np;
        if (np != nd)
            return sr_fail("Transpose: perm has %d entries for %s", np, SR_SHAPE(x));
        for (int d = 0; d < nd; d++) {
            if (norm_axis(op, p[d], nd, &perm[d]) || seen[perm[d]]++)
                return sr_fail("Transpose: perm is not a permutation");
        }
        return permuted(lim, out, x, perm);
    }
    if (!strcmp(op, "Slice")) {
        int64_t st[SR_MAXDIM], en[SR_MAXDIM], ax[SR_MAXDIM], sp[SR_MAXDIM];
        int ns, ne, na, nsp;
        if (opset < 10) {
            if (int_list(n, "starts", NULL, st, SR_MAXDIM, &ns) || int_list(n, "ends", NULL, en, SR_MAXDIM, &ne) ||
                int_list(n, "axes", NULL, ax, SR_MAXDIM, &na))
                return -1;
            nsp = -1;
        } else if (int_list(n, "", nin > 1 ? in[1] : NULL, st, SR_MAXDIM, &ns) ||
                   int_list(n, "", nin > 2 ? in[2] : NULL, en, SR_MAXDIM, &ne) ||
                   int_list(n, "", nin > 3 ? in[3] : NULL, ax, SR_MAXDIM, &na) ||
                   int_list(n, "", nin > 4 ? in[4] : NULL, sp, SR_MAXDIM, &nsp)) {
            return -1;
        }
        if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
            return sr_fail("Slice: starts, ends, axes and steps differ in length");
        sr_tensor cur = SR_TENSOR_INIT;
        if (sr_tensor_copy(&cur, x))
            return -1;
        for (int i = 0; i < ns; i++) {
            int a;
            int64_t step = nsp >= 0 ? sp[i] : 1, start, len;
            if (norm_axis(op, na >= 0 ? ax[i] : i, nd, &a) || step == 0) {
                sr_tensor_free(&cur);
                return step ? -1 : sr_fail("Slice: step 0");
            }
            slice_bounds(cur.shape[a], st[i], en[i], step, &start, &len);
            if (sliced(lim, &cur, &cur, a, start, step, len)) {
                sr_tensor_free(&cur);
                return -1;
            }
        }
        sr_tensor_free(out);
        *out = cur;
        return 0;
    }
    if (!strcmp(op, "Expand")) {
        int64_t s[SR_MAXDIM];
        int ns;
        if (nin < 2 || int_list(n, "shape", in[1], s, SR_MAXDIM, &ns))
            return nin < 2 ? sr_fail("Expand: needs a shape") : -1;
        sr_tensor shape_t = SR_TENSOR_INIT;
        if (new_f64(lim, &shape_t, ns, s)) /* a tensor of the target shape to broadcast with */
            return -1;
        sr_tensor_fill(&shape_t, 0);
        const sr_tensor *two[2] = {x, &shape_t};
        int rc = bcast(lim, op, out, 2, two, f_binary, &(op_ctx){"Add", 0, 0, 0, 0});
        sr_tensor_free(&shape_t);
        return rc;
    }
    if (!strcmp(op, "Tile")) {
        int64_t r[SR_MAXDIM], shape[SR_MAXDIM], st[SR_MAXDIM], idx[SR_MAXDIM] = {0};
        int nr;
        if (nin < 2 || int_list(n, "repeats", in[1], r, SR_MAXDIM, &nr) || nr != nd)
            return sr_fail("Tile: repeats must have %d entries", nd);
        int64_t s = 1;
        for (int d = nd - 1; d >= 0; d--) {
            if (r[d] < 0 || (x->shape[d] && r[d] > INT64_MAX / x->shape[d]))
                return sr_fail("Tile: repeat %lld", (long long)r[d]);
            shape[d] = x->shape[d] * r[d];
            st[d] = s;
            s *= x->shape[d];
        }
        sr_tensor t = SR_TENSOR_INIT;
        if (new_f64(lim, &t, nd, shape))
            return -1;
        /* element idx of the result is element idx mod x's shape of x */
        for (int64_t e = 0, total = sr_numel(&t); e < total; e++) {
            int64_t off = 0;
            for (int d = 0; d < nd; d++)
                off += idx[d] % x->shape[d] * st[d];
            sr_f64(&t)[e] = sr_f64(x)[off];
            for (int d = nd - 1; d >= 0 && ++idx[d] == shape[d]; d--)
                idx[d] = 0;
        }
        sr_tensor_free(out);
        *out = t;
        return 0;
    }
    if (!strcmp(op, "Split")) {
        int axis;
        int64_t sz[256];
        int ns;
        if (norm_axis(op, attr_int(n, "axis", 0), nd, &axis) ||
            int_list(n, "split", nin > 1 ? in[1] : NULL, sz, 256, &ns))
            return -1;
        int no = n->noutputs;
        if (ns < 0) {
            if (no < 1 || x->shape[axis] % no)
                return sr_fail("Split: %lld does not split in %d", (long long)x->shape[axis], no);
            for (int i = 0; i < no; i++)
                sz[i] = x->shape[axis] / no;
            ns = no;
        }
        if (ns != no)
            return sr_fail("Split: %d sizes for %d outputs", ns, no);
        for (int i = 0, off = 0; i < no; i++) {
            if (sz[i] < 0 || off + sz[i] > x->shape[axis])
                return sr_fail("Split: sizes do not fit %s", SR_SHAPE(x));
            if (sliced(lim, &outs[i], x, axis, off, 1, sz[i]))
                return -1;
            off += (int)sz[i];
        }
        return 0;
    }
    if (!strncmp(op, "Reduce", 6)) {
        int64_t axes[SR_MAXDIM];
        int na;
        if (int_list(n, "axes", nin > 1 ? in[1] : NULL, axes, SR_MAXDIM, &na))
            return -1;
        if (na == 0 && attr_int(n, "noop_with_empty_axes", 0))
            return sr_tensor_copy(out, x);
        return reduce(lim, op, out, x, axes, na, (int)attr_int(n, "keepdims", 1));
    }
    if (!strcmp(op, "MatMul")) {
        if (nin < 2 || nd != 2 || in[1]->ndim != 2 || x->shape[1] != in[1]->shape[0])
            return sr_fail("MatMul: constant operands %s and %s (2-D only)", SR_SHAPE(x), SR_SHAPE(in[1]));
        int64_t M = x->shape[0], K = x->shape[1], N = in[1]->shape[1], s[2] = {M, N};
        if (new_f64(lim, out, 2, s))
            return -1;
        /* row by row (each sum still in k's order), so a row of b is read
         * once per row of a, not a column per output; Ctrl-C between rows */
        const double *a = sr_f64(x), *b = sr_f64(in[1]);
        for (int64_t i = 0; i < M; i++) {
            double *o = sr_f64(out) + i * N;
            for (int64_t j = 0; j < N; j++)
                o[j] = 0;
            for (int64_t k = 0; k < K; k++)
                for (int64_t j = 0; j < N; j++)
                    o[j] += a[i * K + k] * b[k * N + j];
            if (sr_interrupted())
                return -1;
        }
        return 0;
    }
    return sr_fail("%s: not an op srgeo folds", op);
}

int64_t sr_fold_work(const sr_onnx_node *node, sr_fold_val *const *in)
{
    double w = 1;
    for (int i = 0; i < node->ninputs && i < 64; i++)
        if (in[i])
            w += (double)sr_numel(&in[i]->v[0]) * (sr_fold_val_batched(in[i]) ? 2 : 1);
    const sr_tensor *a = node->ninputs >= 2 && in[0] ? &in[0]->v[0] : NULL, *b = a && in[1] ? &in[1]->v[0] : NULL;
    if (!strcmp(node->op_type, "MatMul") && b && a->ndim == 2 && b->ndim == 2)
        w += (double)a->shape[0] * (double)a->shape[1] * (double)b->shape[1] *
             (sr_fold_val_batched(in[0]) || sr_fold_val_batched(in[1]) ? 2 : 1);
    return w < 0x1p60 ? (int64_t)w : (int64_t)1 << 60;
}

int sr_fold_node(const sr_onnx_node *node, int64_t opset, sr_fold_val *const *in, sr_fold_val *out, int64_t lim)
{
    int nin = node->ninputs, types[64] = {0};
    if (nin > 64)
        return sr_fail("%s: %d inputs", node->op_type, nin);
    if (node->noutputs > 256 || node->noutputs < 1)
        return sr_fail("%s: %d outputs", node->op_type, node->noutputs);
    int batched = 0;
    for (int i = 0; i < nin; i++) {
        types[i] = in[i] ? in[i]->type : 0;
        batched |= in[i] && sr_fold_val_batched(in[i]);
    }
    sr_tensor outs[2][256];
    for (int k = 0; k < 2; k++)
        for (int o = 0; o < node->noutputs; o++)
            outs[k][o] = (sr_tensor)SR_TENSOR_INIT;
    int rc = 0, type = 0;
    for (int k = 0; k < 1 + batched && !rc; k++) {
        const sr_tensor *ins[64];
        for (int i = 0; i < nin; i++)
            ins[i] = in[i] ? &in[i]->v[k] : NULL;
        rc = fold_one(lim, node, opset, ins, types, nin, outs[k], &type);
    }
    for (int o = 0; o < node->noutputs; o++) {
        sr_fold_val_free(&out[o]);
        if (!rc && !outs[0][o].storage)
            rc = sr_fail("%s: output %d was not computed", node->op_type, o);
        if (!rc) {
            out[o].type = type;
            out[o].v[0] = outs[0][o];
            /* equal at both batch sizes: does not depend on the batch */
            if (batched && !(sr_same_shape(&outs[0][o], &outs[1][o]) &&
                             !memcmp(sr_data(&outs[0][o]), sr_data(&outs[1][o]),
                                     (size_t)sr_numel(&outs[0][o]) * sizeof(double)))) {
                out[o].v[1] = outs[1][o];
            } else {
                sr_tensor_free(&outs[1][o]);
                sr_tensor_share(&out[o].v[1], &outs[0][o]);
            }
        } else {
            sr_tensor_free(&outs[0][o]);
            sr_tensor_free(&outs[1][o]);
        }
    }
    return rc;
}
