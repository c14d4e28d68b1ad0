/* arith.c - elementwise arithmetic of two operands with NumPy broadcasting
 * inside a sample:
 *   add  y = a + b      sub  y = a − b      mul  y = a·b      div  y = a / b
 *   max  y = max(a, b)  min  y = min(a, b)  pow  y = a^b      (a NaN wins max and min)
 * Either both operands are inputs (a graph node of two inputs, each with
 * the batch first: (N, ...) and (N, ...), broadcast over the dims after the
 * batch), or one is a constant held as a parameter `value` of the per-sample
 * shape `shape` (or a number: `value=2`), second by default and first with
 * reverse=true (c − x, c / x).  A constant is a buffer unless trainable=true
 * (a learned scale or offset); it has no tangent.
 *
 * JVP, tangent j of primal i (primal values ap, bp, yp; tangents at, bt;
 * a constant's tangent is 0):
 *   add/sub  yt = at ± bt        mul  yt = at·bp + ap·bt
 *   div      yt = (at − yp·bt) / bp
 *   max/min  yt = the chosen operand's tangent (at a tie their mean, as PyTorch;
 *            under run->directional the larger tangent, min: the smaller,
 *            kernels/kink.h)
 *   pow      yt = bp·ap^(bp−1)·at + yp·ln(ap)·bt (the second term 0 where ap = 0 and bp >= 0)
 * Backward: ga, gb are gy·∂y/∂a, gy·∂y/∂b summed over the dims the operand
 * was broadcast along (for a constant also over the batch). */
#ifdef SR_REAL

/* One sample's elements: out dims nd (per sample), the operands' element
 * strides (0 along broadcast dims); visit the last dim in a loop of its own. */
#define ARITH_LOOP(...)                                                                    \
    do {                                                                                   \
        int64_t last = nd ? shape[nd - 1] : 1, rows = 1;                                   \
        for (int d = 0; d + 1 < nd; d++)                                                   \
            rows *= shape[d];                                                              \
        int64_t la = nd ? sa[nd - 1] : 0, lb = nd ? sb[nd - 1] : 0;                        \
        for (int64_t r = 0; r < rows; r++) {                                               \
            int64_t rem = r, oa = 0, ob = 0;                                               \
            for (int d = nd - 2; d >= 0; d--) {                                            \
                int64_t q = rem % shape[d];                                                \
                rem /= shape[d];                                                           \
                oa += q * sa[d];                                                           \
                ob += q * sb[d];                                                           \
            }                                                                              \
            real *yr = y + r * last;                                                       \
            for (int64_t e = 0; e < last; e++) {                                           \
                int64_t ia = oa + e * la, ib = ob + e * lb;                                \
                (void)ia, (void)ib;                                                        \
                __VA_ARGS__;                                                               \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* y = a op b for one sample. */
static void SR_FN(arith_primal)(real *y, const real *a, const real *b, int op, int nd, const int64_t *shape,
                                const int64_t *sa, const int64_t *sb)
{
    switch (op) {
    case ARITH_ADD: ARITH_LOOP(yr[e] = a[ia] + b[ib]); break;
    case ARITH_SUB: ARITH_LOOP(yr[e] = a[ia] - b[ib]); break;
    case ARITH_MUL: ARITH_LOOP(yr[e] = a[ia] * b[ib]); break;
    case ARITH_DIV: ARITH_LOOP(yr[e] = a[ia] / b[ib]); break;
    case ARITH_MAX: ARITH_LOOP(yr[e] = a[ia] != a[ia] || a[ia] >= b[ib] ? a[ia] : b[ib]); break;
    case ARITH_MIN: ARITH_LOOP(yr[e] = a[ia] != a[ia] || a[ia] <= b[ib] ? a[ia] : b[ib]); break;
    default: ARITH_LOOP(yr[e] = (real)pow(a[ia], b[ib])); break;
    }
}

/* One tangent sample: at, bt its operands' tangents (NULL: a constant's,
 * zero), ap, bp the primal operands, yp the primal output (div). */
static void SR_FN(arith_tangent)(real *y, const real *at, const real *bt, const real *ap, const real *bp,
                                 const real *yp, int op, int directional, int nd, const int64_t *shape,
                                 const int64_t *sa, const int64_t *sb)
{
    switch (op) {
    case ARITH_ADD:
    case ARITH_SUB: {
        real s = op == ARITH_SUB ? -1 : 1;
        if (at && bt)
            ARITH_LOOP(yr[e] = op == ARITH_SUB ? at[ia] - bt[ib] : at[ia] + bt[ib]);
        else if (at)
            ARITH_LOOP(yr[e] = at[ia]);
        else
            ARITH_LOOP(yr[e] = s * bt[ib]);
        break;
    }
    case ARITH_MUL:
        if (at && bt)
            ARITH_LOOP(yr[e] = at[ia] * bp[ib] + ap[ia] * bt[ib]);
        else if (at)
            ARITH_LOOP(yr[e] = at[ia] * bp[ib]);
        else
            ARITH_LOOP(yr[e] = ap[ia] * bt[ib]);
        break;
    case ARITH_DIV: {
        const real *ypr = yp;
        if (at && bt)
            ARITH_LOOP(yr[e] = (at[ia] - ypr[r * last + e] * bt[ib]) / bp[ib]);
        else if (at)
            ARITH_LOOP(yr[e] = at[ia] / bp[ib]);
        else
            ARITH_LOOP(yr[e] = -ypr[r * last + e] * bt[ib] / bp[ib]);
        break;
    }
    case ARITH_MAX:
    case ARITH_MIN: {
        int mx = op == ARITH_MAX;
        if (directional) /* tied (SR_TIED at their magnitude): the larger tangent (min: the smaller) */
            ARITH_LOOP({
                real u = at ? at[ia] : 0, w = bt ? bt[ib] : 0, x = ap[ia], z = bp[ib];
                int tied = SR_TIED(x, z, SR_FABS(x) > SR_FABS(z) ? SR_FABS(x) : SR_FABS(z));
                yr[e] = tied ? (mx == (u > w) ? u : w) : x != x || (mx ? x > z : x < z) ? u : w;
            });
        else
            ARITH_LOOP({
                real u = at ? at[ia] : 0, w = bt ? bt[ib] : 0, x = ap[ia], z = bp[ib];
                yr[e] = x == z ? (u + w) / 2 : x != x || (mx ? x > z : x < z) ? u : w;
            });
        break;
    }
    default: {
        const real *ypr = yp;
        ARITH_LOOP({
            real x = ap[ia], z = bp[ib], v = 0;
            if (at)
                v += z * (real)pow(x, z - 1) * at[ia];
            if (bt && !(x == 0 && z >= 0))
                v += ypr[r * last + e] * (real)log(x) * bt[ib];
            yr[e] = v;
        });
        break;
    }
    }
}

/* One primal sample's ties and singular points under the directional rule
 * (kernels/kink.h): max / min operands tied (SR_TIED; near: not exactly),
 * a division by 0, pow at a = 0 with an exponent below 1 other than 0. */
static void SR_FN(arith_kinks)(real *y, const real *a, const real *b, int op, int nd, const int64_t *shape,
                               const int64_t *sa, const int64_t *sb, int64_t *ties, int64_t *near, int64_t *singular)
{
    /* y: the sample's output, which ARITH_LOOP walks (read only here) */
    int64_t t = 0, nr = 0, sg = 0;
    if (op == ARITH_MAX || op == ARITH_MIN)
        ARITH_LOOP({
            (void)yr;
            real x = a[ia], z = b[ib];
            int tied = SR_TIED(x, z, SR_FABS(x) > SR_FABS(z) ? SR_FABS(x) : SR_FABS(z));
            t += tied;
            nr += tied && x != z;
        });
    else if (op == ARITH_DIV)
        ARITH_LOOP({ (void)yr; sg += b[ib] == 0; });
    else if (op == ARITH_POW)
        ARITH_LOOP({ (void)yr; sg += a[ia] == 0 && b[ib] < 1 && b[ib] != 0; });
    *ties += t, *near += nr, *singular += sg;
}

/* The full-size gradient contribution to operand `which` (0: a, 1: b) of
 * one sample: gy·∂y/∂(a or b). */
static void SR_FN(arith_contrib)(real *y, const real *gy, const real *a, const real *b, int op, int which, int nd,
                                 const int64_t *shape, const int64_t *sa, const int64_t *sb)
{
    const real *g = gy;
    switch (op) {
    case ARITH_ADD: ARITH_LOOP(yr[e] = g[r * last + e]); break;
    case ARITH_SUB: ARITH_LOOP(yr[e] = which ? -g[r * last + e] : g[r * last + e]); break;
    case ARITH_MUL: ARITH_LOOP(yr[e] = g[r * last + e] * (which ? a[ia] : b[ib])); break;
    case ARITH_DIV:
        if (which)
            ARITH_LOOP(yr[e] = -g[r * last + e] * (a[ia] / b[ib]) / b[ib]);
        else
            ARITH_LOOP(yr[e] = g[r * last + e] / b[ib]);
        break;
    case ARITH_MAX:
    case ARITH_MIN: {
        int mx = op == ARITH_MAX;
        ARITH_LOOP({
            real x = a[ia], z = b[ib], gg = g[r * last + e];
            int a_wins = x != x || (mx ? x > z : x < z);
            yr[e] = x == z ? gg / 2 : (a_wins != which) ? gg : 0;
        });
        break;
    }
    default:
        ARITH_LOOP({
            real x = a[ia], z = b[ib], gg = g[r * last + e];
            yr[e] = which ? (x == 0 && z >= 0 ? 0 : gg * (real)pow(x, z) * (real)log(x)) : gg * z * (real)pow(x, z - 1);
        });
        break;
    }
}

/* acc[offset of element e in the operand] += src[e] over one sample (the
 * adjoint of reading the operand broadcast); sums in double. */
static void SR_FN(arith_reduce)(double *acc, const real *src, int nd, const int64_t *shape, const int64_t *st)
{
    int64_t last = nd ? shape[nd - 1] : 1, rows = 1, ls = nd ? st[nd - 1] : 0;
    for (int d = 0; d + 1 < nd; d++)
        rows *= shape[d];
    for (int64_t r = 0; r < rows; r++) {
        int64_t rem = r, o = 0;
        for (int d = nd - 2; d >= 0; d--) {
            o += (rem % shape[d]) * st[d];
            rem /= shape[d];
        }
        const real *s = src + r * last;
        for (int64_t e = 0; e < last; e++)
            acc[o + e * ls] += s[e];
    }
}

static void SR_FN(arith_store)(real *dst, const double *acc, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = (real)acc[i];
}

#else /* generic part */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/epilogue.h"
#include "nn/layers.h"
#include "tensor/tensor_ops.h"

enum { ARITH_ADD, ARITH_SUB, ARITH_MUL, ARITH_DIV, ARITH_MAX, ARITH_MIN, ARITH_POW };
static const char *const arith_names[] = {"add", "sub", "mul", "div", "max", "min", "pow"};

#define SR_GENERIC_FILE "nn/arith.c"
#include "base/generic.h"

/* Element i of an array of es-byte elements (es in scope). */
#define ARITH_AT(p, i) ((const void *)((const char *)(p) + (size_t)(i) * es))

typedef struct {
    int op;
    int constant; /* 1: operand b (a with reverse) is the parameter "value" */
    int reverse;
    sr_tensor sa, sb; /* saved operands for backward */
    int nd;           /* the last forward's per-sample broadcast */
    int64_t shape[SR_MAXDIM], sta[SR_MAXDIM], stb[SR_MAXDIM], as, bs; /* as, bs: sample strides */
} arith_impl;

/* Per-sample shape of t: dims 1.. of an input, all of a constant. */
typedef struct {
    int nd;
    const int64_t *shape;
} arith_ps;

static arith_ps ps_of(const sr_tensor *t, int batched)
{
    return batched ? (arith_ps){t->ndim - 1, t->shape + 1} : (arith_ps){t->ndim, t->shape};
}

/* The broadcast per-sample shape and each operand's element strides in it. */
static int arith_plan(sr_module *m, const sr_tensor *a, int a_batched, const sr_tensor *b, int b_batched)
{
    arith_impl *c = m->impl;
    arith_ps pa = ps_of(a, a_batched), pb = ps_of(b, b_batched);
    int nd = pa.nd > pb.nd ? pa.nd : pb.nd;
    if (nd > SR_MAXDIM - 1)
        return sr_fail("%s: operands %s and %s have too many dims", m->ops->kind, SR_SHAPE(a), SR_SHAPE(b));
    int64_t s_a = 1, s_b = 1;
    for (int i = nd - 1; i >= 0; i--) {
        int ia = pa.nd - nd + i, ib = pb.nd - nd + i;
        int64_t da = ia >= 0 ? pa.shape[ia] : 1, db = ib >= 0 ? pb.shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return sr_fail("%s: operands %s and %s do not broadcast (after the batch dim%s)", m->ops->kind,
                           SR_SHAPE(a), SR_SHAPE(b), a_batched && b_batched ? "" : "; the constant has none");
        c->shape[i] = da == 1 ? db : da;
        c->sta[i] = da == 1 ? 0 : s_a;
        c->stb[i] = db == 1 ? 0 : s_b;
        s_a *= da;
        s_b *= db;
    }
    c->nd = nd;
    c->as = a_batched ? s_a : 0;
    c->bs = b_batched ? s_b : 0;
    return 0;
}

static const sr_tensor *constant_of(sr_module *m) { return &m->params[0].value; }

/* Operands a, b of x (and the constant); *a_batched, *b_batched. */
static void operands(sr_module *m, int nin, const sr_tensor *const *x, const sr_tensor **a, const sr_tensor **b,
                     int *ab, int *bb)
{
    arith_impl *c = m->impl;
    if (nin == 2) {
        *a = x[0], *b = x[1], *ab = *bb = 1;
    } else if (c->reverse) {
        *a = constant_of(m), *b = x[0], *ab = 0, *bb = 1;
    } else {
        *a = x[0], *b = constant_of(m), *ab = 1, *bb = 0;
    }
}

static int arith_run(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run, int jvp)
{
    arith_impl *c = m->impl;
    const sr_tensor *a, *b;
    int ab, bb;
    operands(m, nin, x, &a, &b, &ab, &bb);
    if (x[0]->ndim < 1)
        return sr_fail("%s: input %s needs a batch dimension", m->ops->kind, SR_SHAPE(x[0]));
    if (nin == 2 && a->shape[0] != b->shape[0])
        return sr_fail("%s: inputs %s and %s differ in the batch dim", m->ops->kind, SR_SHAPE(a), SR_SHAPE(b));
    if (arith_plan(m, a, ab, b, bb))
        return -1;
    int64_t S = x[0]->shape[0], oshape[SR_MAXDIM], rs = 1;
    oshape[0] = S;
    for (int d = 0; d < c->nd; d++)
        rs *= oshape[d + 1] = c->shape[d];
    if (sr_module_output(m, run, x[0]->dtype, c->nd + 1, oshape))
        return -1;
    int64_t np = jvp ? run->n : S, k = jvp ? run->k : 0;
    size_t es = sr_dtype_size(x[0]->dtype);
    const void *pa = sr_data(a), *pb = sr_data(b), *py = sr_data(&m->out);
    if (run->save && !jvp) {
        sr_tensor_share(&c->sa, a);
        sr_tensor_share(&c->sb, b);
    }
    /* A sum of two values of one shape (a residual's): the tangent rows sum
     * like the primal ones, in one flat pass (the residual's own kernel). */
    if (c->op == ARITH_ADD && ab && bb && sr_same_shape(a, b)) {
        sr_add_relu(a->dtype, sr_data(&m->out), pa, pb, S * rs, 0);
        return 0;
    }
    #pragma omp parallel for schedule(static) if (S * rs > 32768)
    for (int64_t s = 0; s < S; s++) {
        void *y = (char *)sr_data(&m->out) + (size_t)(s * rs) * es;
        if (s < np) {
            SR_DISPATCH(a->dtype, arith_primal, y, ARITH_AT(pa, s * c->as), ARITH_AT(pb, s * c->bs), c->op, c->nd,
                        c->shape, c->sta, c->stb);
            if (jvp && run->directional && run->kinks) {
                int64_t t = 0, nr = 0, sg = 0;
                SR_DISPATCH(a->dtype, arith_kinks, y, ARITH_AT(pa, s * c->as), ARITH_AT(pb, s * c->bs), c->op, c->nd,
                            c->shape, c->sta, c->stb, &t, &nr, &sg);
                sr_kinks_add(&run->kinks[s], t, nr, sg);
            }
        } else {
            int64_t i = (s - np) / k;
            SR_DISPATCH(a->dtype, arith_tangent, y, ab ? ARITH_AT(pa, s * c->as) : NULL,
                        bb ? ARITH_AT(pb, s * c->bs) : NULL, ARITH_AT(pa, i * c->as), ARITH_AT(pb, i * c->bs),
                        ARITH_AT(py, i * rs), c->op, jvp && run->directional, c->nd, c->shape, c->sta, c->stb);
        }
    }
    return 0;
}

static int arith_forward_n(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run)
{
    return arith_run(m, nin, x, run, 0);
}
static int arith_jvp_n(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run)
{
    return arith_run(m, nin, x, run, 1);
}
static int arith_forward(sr_module *m, const sr_tensor *x, sr_run *run) { return arith_run(m, 1, &x, run, 0); }
static int arith_jvp(sr_module *m, const sr_tensor *x, sr_run *run) { return arith_run(m, 1, &x, run, 1); }

/* dst (operand t's shape, batched or not) = Σ over the broadcast of the
 * contribution of operand `which`. */
static int arith_grad(sr_module *m, const sr_tensor *gy, int which, const sr_tensor *t, int batched, void *dst,
                      sr_tensor *tmp, sr_run *run)
{
    arith_impl *c = m->impl;
    const sr_tensor *a = &c->sa, *b = &c->sb;
    int64_t S = gy->shape[0], rs = sr_rowsize(gy), nt = sr_numel(t), ts = batched ? nt / S : 0;
    size_t es = sr_dtype_size(gy->dtype);
    if (sr_pool_ensure(run->pool, tmp, gy->dtype, 1, &rs))
        return -1;
    double *acc = calloc((size_t)(nt ? nt : 1), sizeof *acc);
    if (!acc)
        return sr_fail("%s backward: out of memory", m->ops->kind);
    const int64_t *st = which ? c->stb : c->sta;
    for (int64_t s = 0; s < S; s++) {
        SR_DISPATCH(gy->dtype, arith_contrib, sr_data(tmp), ARITH_AT(sr_data(gy), s * rs),
                    ARITH_AT(sr_data(a), s * c->as), ARITH_AT(sr_data(b), s * c->bs), c->op, which, c->nd,
                    c->shape, c->sta, c->stb);
        SR_DISPATCH(gy->dtype, arith_reduce, acc + s * ts, sr_data(tmp), c->nd, c->shape, st);
    }
    SR_DISPATCH(gy->dtype, arith_store, dst, acc, nt);
    free(acc);
    return 0;
}

static int arith_backward_n(sr_module *m, const sr_tensor *gy, int nin, sr_tensor *gin, sr_run *run)
{
    arith_impl *c = m->impl;
    if (!c->sa.storage)
        return sr_fail("%s backward: forward was not run with save", m->ops->kind);
    int rc = 0;
    sr_tensor tmp = SR_TENSOR_INIT;
    for (int w = 0; w < 2 && !rc; w++) {
        const sr_tensor *t = w ? &c->sb : &c->sa;
        int is_const = nin == 1 && (w == 0) == (c->reverse != 0);
        if (is_const) {
            sr_param *p = &m->params[0];
            void *g;
            if (!run->param_grads || !p->trainable)
                continue;
            sr_tensor part = SR_TENSOR_INIT;
            if (!(g = sr_param_grad(m, p)) || sr_pool_ensure_like(run->pool, &part, &p->value)) {
                rc = -1;
                break;
            }
            rc = arith_grad(m, gy, w, t, 0, sr_data(&part), &tmp, run);
            if (!rc)
                sr_add_into(gy->dtype, g, sr_data(&part), sr_numel(&part));
            sr_pool_put(run->pool, &part);
        } else {
            sr_tensor *gi = nin == 2 ? &gin[w] : &gin[0];
            rc = sr_pool_ensure_like(run->pool, gi, t) || arith_grad(m, gy, w, t, 1, sr_data(gi), &tmp, run);
        }
    }
    sr_pool_put(run->pool, &tmp);
    sr_pool_put(run->pool, &c->sa);
    sr_pool_put(run->pool, &c->sb);
    return rc ? -1 : 0;
}

static int arith_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    return arith_backward_n(m, gy, 1, &m->gin, run);
}

static int arith_arity(const sr_module *m) { return ((const arith_impl *)m->impl)->constant ? 1 : 2; }

/* Affine: sums, and products or quotients by a constant. */
static int arith_is_affine(const sr_module *m)
{
    const arith_impl *c = m->impl;
    return c->op <= ARITH_SUB || (c->constant && (c->op == ARITH_MUL || (c->op == ARITH_DIV && !c->reverse)));
}

static void arith_free(sr_module *m)
{
    arith_impl *c = m->impl;
    sr_tensor_free(&c->sa);
    sr_tensor_free(&c->sb);
}

static void arith_describe(const sr_module *m, char *buf, size_t n)
{
    const arith_impl *c = m->impl;
    static const char *const fmt2[] = {"a + b", "a - b", "a * b", "a / b", "max(a, b)", "min(a, b)", "a ^ b"};
    const char *sym = "+-*/" + (c->op < ARITH_MAX ? c->op : 0);
    if (!c->constant) {
        snprintf(buf, n, "%s", fmt2[c->op]);
        return;
    }
    const sr_tensor *v = &m->params[0].value;
    char cs[SR_SHAPE_BUF];
    if (sr_numel(v) == 1)
        snprintf(cs, sizeof cs, "%g", sr_get_flat(v, 0));
    else
        sr_shape_str(v, cs, sizeof cs);
    if (c->op >= ARITH_MAX)
        snprintf(buf, n, c->op == ARITH_POW ? (c->reverse ? "%s ^ x" : "x ^ %s") : c->op == ARITH_MAX ? "max(x, %s)" : "min(x, %s)",
                 cs);
    else if (c->reverse)
        snprintf(buf, n, "%s %c x", cs, *sym);
    else
        snprintf(buf, n, "x %c %s", *sym, cs);
}

#define ARITH_OPS(NAME, FLAGS)                                                                                 \
    static const sr_module_ops NAME##_ops = {                                                                  \
        .kind = #NAME, .forward = arith_forward, .jvp = arith_jvp, .backward = arith_backward,                 \
        .free_impl = arith_free, .describe = arith_describe, .is_affine = arith_is_affine, .flags = FLAGS,     \
        .arity = arith_arity, .forward_n = arith_forward_n, .jvp_n = arith_jvp_n,                              \
        .backward_n = arith_backward_n,                                                                        \
    };
/* add: a sum of two inputs is SR_MOD_SUM only without a constant; the
 * flag is read together with the arity (nn/graph.c). */
ARITH_OPS(add, SR_MOD_SUM)
ARITH_OPS(sub, 0)
ARITH_OPS(mul, 0)
ARITH_OPS(div, 0)
ARITH_OPS(max, 0)
ARITH_OPS(min, 0)
ARITH_OPS(pow_of, 0)
static const sr_module_ops *const arith_ops[] = {&add_ops, &sub_ops, &mul_ops, &div_ops, &max_ops, &min_ops, &pow_of_ops};

static sr_module *arith_create(const sr_opts *o, int op)
{
    double shp[SR_MAXDIM], value = 0;
    int nd = 0, r = o->get_nums(o, "shape", shp, SR_MAXDIM - 1, &nd);
    int has_value = 0, reverse, trainable;
    if (r < 0 || (has_value = o->get_num(o, "value", &value)) < 0 || sr_opt_bool(o, "reverse", 0, &reverse) ||
        sr_opt_bool(o, "trainable", 0, &trainable))
        return NULL;
    if (r == 0 && !has_value && reverse) {
        sr_fail("%s: reverse needs a constant operand (shape={...} or value=)", arith_names[op]);
        return NULL;
    }
    int64_t shape[SR_MAXDIM];
    for (int d = 0; d < nd; d++) {
        if (shp[d] != floor(shp[d]) || shp[d] < 1 || shp[d] > 1e12) {
            sr_fail("%s: shape entry %d must be a positive integer, got %g", arith_names[op], d + 1, shp[d]);
            return NULL;
        }
        shape[d] = (int64_t)shp[d];
    }
    sr_module *m = sr_module_new(arith_ops[op], sizeof(arith_impl));
    if (!m)
        return NULL;
    arith_impl *c = m->impl;
    c->op = op;
    c->reverse = reverse;
    c->constant = r > 0 || has_value;
    if (c->constant) {
        sr_param *p = sr_module_add_param(m, "value", r > 0 ? nd : 0, shape, trainable);
        if (!p) {
            sr_module_release(m);
            return NULL;
        }
        if (has_value)
            sr_tensor_fill(&p->value, value);
    }
    return m;
}

sr_module *sr_add_create(const sr_opts *o) { return arith_create(o, ARITH_ADD); }
sr_module *sr_sub_create(const sr_opts *o) { return arith_create(o, ARITH_SUB); }
sr_module *sr_mul_create(const sr_opts *o) { return arith_create(o, ARITH_MUL); }
sr_module *sr_div_create(const sr_opts *o) { return arith_create(o, ARITH_DIV); }
sr_module *sr_max_create(const sr_opts *o) { return arith_create(o, ARITH_MAX); }
sr_module *sr_min_create(const sr_opts *o) { return arith_create(o, ARITH_MIN); }
sr_module *sr_pow_of_create(const sr_opts *o) { return arith_create(o, ARITH_POW); }

#endif
