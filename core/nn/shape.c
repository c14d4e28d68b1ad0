/* shape.c - layers that move, select or frame elements, each over the dims
 * of a sample (dim 0, the batch, is never touched; dims are 0-based, so
 * the first one after the batch is 1, and negative ones count from the end):
 *   reshape       (N, ...) -> (N, shape...)              a view; one entry may be -1
 *   slice         entries start, start + step, ... < stop along dim (step may be negative)
 *   index_select  entries index[0], index[1], ... along dim (repeats allowed)
 *   concat        inputs (and constant pieces) joined along dim
 *   pad           padding = {before, after} pairs from the last dim backwards (as torch's
 *                 F.pad; negative crops), mode "constant" (value), "reflect" or "edge"
 *
 * All are linear in x except for the constants (concat's constant pieces,
 * pad's value), which the tangent rows leave out, so each JVP is the op on
 * the whole stack with the constants on the primal rows only; backward is
 * the adjoint (the gather's scatter-add). */
#ifdef SR_REAL

/* y (rows, out per sample) = x gathered through per-dim index maps: output
 * element (i_1 .. i_nd) reads x at (map_1[i_1] .. map_nd[i_nd]), or is fill
 * where a map says -1 (fill: 0 on the tangent rows, rows >= fill_rows). */
static void SR_FN(shape_gather)(real *y, const real *x, int64_t rows, int64_t fill_rows, real fill, int nd,
                                const int64_t *oshape, int64_t *const *map, const int64_t *xstride, int64_t xrs,
                                int64_t yrs)
{
    int64_t last = oshape[nd - 1], outer = yrs / (last ? last : 1);
    #pragma omp parallel for schedule(static) if (rows * yrs > SHAPE_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        real f = r < fill_rows ? fill : 0;
        for (int64_t o = 0; o < outer; o++) {
            int pad;
            int64_t off = shape_map_offset(o, nd, oshape, map, xstride, &pad);
            real *yr = y + r * yrs + o * last;
            const real *xr = x + r * xrs + off;
            const int64_t *ml = map[nd - 1];
            if (pad) {
                for (int64_t e = 0; e < last; e++)
                    yr[e] = f;
                continue;
            }
            for (int64_t e = 0; e < last; e++)
                yr[e] = ml[e] < 0 ? f : xr[ml[e] * xstride[nd - 1]];
        }
    }
}

/* The adjoint: gx (zeroed here) += gy scattered back through the maps. */
static void SR_FN(shape_scatter)(real *gx, const real *gy, int64_t rows, int nd, const int64_t *oshape,
                                 int64_t *const *map, const int64_t *xstride, int64_t xrs, int64_t yrs)
{
    int64_t last = oshape[nd - 1], outer = yrs / (last ? last : 1);
    #pragma omp parallel for schedule(static) if (rows * yrs > SHAPE_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        real *gr = gx + r * xrs;
        for (int64_t e = 0; e < xrs; e++)
            gr[e] = 0;
        for (int64_t o = 0; o < outer; o++) {
            int pad;
            int64_t off = shape_map_offset(o, nd, oshape, map, xstride, &pad);
            if (pad)
                continue;
            const real *yr = gy + r * yrs + o * last;
            const int64_t *ml = map[nd - 1];
            for (int64_t e = 0; e < last; e++)
                if (ml[e] >= 0)
                    gr[off + ml[e] * xstride[nd - 1]] += yr[e];
        }
    }
}

#else /* generic part */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "tensor/tensor_ops.h"

#define SHAPE_OMP_MIN 65536

/* The input offset of output row o (an index over all output dims but the
 * last) through the per-dim maps; *pad: some dim of it maps to padding. */
static inline int64_t shape_map_offset(int64_t o, int nd, const int64_t *oshape, int64_t *const *map,
                                       const int64_t *xstride, int *pad)
{
    int64_t off = 0;
    *pad = 0;
    for (int d = nd - 2; d >= 0; d--) {
        int64_t i = map[d][o % oshape[d]];
        o /= oshape[d];
        *pad |= i < 0;
        off += i * xstride[d];
    }
    return off;
}

#define SR_GENERIC_FILE "nn/shape.c"
#include "base/generic.h"

/* A dim option (0-based, negative from the end) resolved for an nd-dim
 * input; dim 0 (the batch) is refused. */
static int resolve_dim(const sr_module *m, int64_t dim, const sr_tensor *x, int *out)
{
    int64_t d = dim < 0 ? dim + x->ndim : dim;
    if (d < 1 || d >= x->ndim)
        return sr_fail("%s: dim %lld does not fit input %s (dims 1..%d; dim 0 is the batch)", m->ops->kind,
                       (long long)dim, SR_SHAPE(x), x->ndim - 1);
    *out = (int)d;
    return 0;
}

/* --- the gather layers: slice, index_select, pad ---------------------------
 * Each builds per-dim index maps for the input's sample shape, then runs
 * shape_gather / shape_scatter. */
typedef struct {
    int kind;            /* SHAPE_SLICE, SHAPE_INDEX, SHAPE_PAD */
    int64_t dim, start, stop, step; /* slice */
    int64_t nidx, *idx;             /* index_select */
    int npad;                       /* pad: entries of padding (pairs, last dim first) */
    int64_t pads[2 * SR_MAXDIM];
    int mode;                       /* pad: constant, reflect, edge */
    double value;
    /* the last call: sample dims (input and output), maps */
    int nd;
    int64_t ishape[SR_MAXDIM], oshape[SR_MAXDIM], xstride[SR_MAXDIM];
    int64_t *map[SR_MAXDIM];
    size_t map_cap[SR_MAXDIM];
    int64_t xrs, yrs;
} gather_impl;

enum { SHAPE_SLICE, SHAPE_INDEX, SHAPE_PAD };
enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE };

static int64_t *map_of(gather_impl *c, int d, int64_t n)
{
    if ((size_t)n > c->map_cap[d]) {
        int64_t *p = realloc(c->map[d], (size_t)n * sizeof *p);
        if (!p)
            return NULL;
        c->map[d] = p;
        c->map_cap[d] = (size_t)n;
    }
    return c->map[d];
}

/* Source index of output i along a dim of size n padded by before. */
static int64_t pad_source(int mode, int64_t i, int64_t before, int64_t n)
{
    int64_t s = i - before;
    if (s >= 0 && s < n)
        return s;
    if (mode == PAD_CONSTANT)
        return -1;
    if (mode == PAD_EDGE)
        return s < 0 ? 0 : n - 1;
    /* reflect (no edge repeat), n >= 2 and |pad| < n checked at plan time */
    int64_t period = 2 * (n - 1);
    s = ((s % period) + period) % period;
    return s < n ? s : period - s;
}

/* Sample shapes and maps for input x. */
static int gather_plan(sr_module *m, const sr_tensor *x)
{
    gather_impl *c = m->impl;
    int nd = x->ndim - 1;
    if (nd < 1)
        return sr_fail("%s: input %s has no dims after the batch", m->ops->kind, SR_SHAPE(x));
    memcpy(c->ishape, x->shape + 1, (size_t)nd * sizeof(int64_t));
    memcpy(c->oshape, c->ishape, sizeof c->ishape);
    int dim = -1;
    if (c->kind != SHAPE_PAD && resolve_dim(m, c->dim, x, &dim))
        return -1;
    dim -= 1; /* in the sample's dims */
    if (c->kind == SHAPE_SLICE) {
        /* Python's slice rules: clamp start and stop into the dim. */
        int64_t n = c->ishape[dim], st = c->step, a = c->start, b = c->stop;
        a = a < 0 ? a + n : a, b = b < 0 ? b + n : b;
        if (st > 0) {
            a = a < 0 ? 0 : a > n ? n : a, b = b < 0 ? 0 : b > n ? n : b;
            c->oshape[dim] = b > a ? (b - a + st - 1) / st : 0;
        } else {
            a = a < -1 ? -1 : a > n - 1 ? n - 1 : a, b = b < -1 ? -1 : b > n - 1 ? n - 1 : b;
            c->oshape[dim] = a > b ? (a - b - st - 1) / -st : 0;
        }
        int64_t *mp = map_of(c, dim, c->oshape[dim] ? c->oshape[dim] : 1);
        if (!mp)
            return sr_fail("slice: out of memory");
        for (int64_t i = 0; i < c->oshape[dim]; i++)
            mp[i] = a + i * st;
    } else if (c->kind == SHAPE_INDEX) {
        int64_t n = c->ishape[dim];
        int64_t *mp = map_of(c, dim, c->nidx);
        if (!mp)
            return sr_fail("index_select: out of memory");
        for (int64_t i = 0; i < c->nidx; i++) {
            int64_t j = c->idx[i] < 0 ? c->idx[i] + n : c->idx[i];
            if (j < 0 || j >= n)
                return sr_fail("index_select: index %lld is out of range for dim %lld of input %s (size %lld)",
                               (long long)c->idx[i], (long long)c->dim, SR_SHAPE(x), (long long)n);
            mp[i] = j;
        }
        c->oshape[dim] = c->nidx;
    } else {
        if (c->npad / 2 > nd)
            return sr_fail("pad: %d padding pairs for input %s with %d dims after the batch", c->npad / 2,
                           SR_SHAPE(x), nd);
        for (int p = 0; p < c->npad / 2; p++) {
            int d = nd - 1 - p;
            int64_t n = c->ishape[d], lo = c->pads[2 * p], hi = c->pads[2 * p + 1], on = n + lo + hi;
            if (on < 0 || (c->mode != PAD_CONSTANT && (-lo >= n || -hi >= n)))
                return sr_fail("pad: padding (%lld, %lld) crops dim %d of input %s to nothing", (long long)lo,
                               (long long)hi, d + 1, SR_SHAPE(x));
            if (c->mode == PAD_REFLECT && (lo >= n || hi >= n))
                return sr_fail("pad: reflect padding (%lld, %lld) must be less than dim %d of input %s",
                               (long long)lo, (long long)hi, d + 1, SR_SHAPE(x));
            if (c->mode == PAD_EDGE && n < 1)
                return sr_fail("pad: edge padding of the empty dim %d of %s", d + 1, SR_SHAPE(x));
            c->oshape[d] = on;
        }
    }
    for (int d = 0; d < nd; d++) {
        int is_mapped = (c->kind != SHAPE_PAD && d == dim) ||
                        (c->kind == SHAPE_PAD && nd - 1 - d < c->npad / 2);
        if (is_mapped && c->kind != SHAPE_PAD)
            continue;
        int64_t *mp = map_of(c, d, c->oshape[d] ? c->oshape[d] : 1);
        if (!mp)
            return sr_fail("%s: out of memory", m->ops->kind);
        int64_t before = is_mapped ? c->pads[2 * (nd - 1 - d)] : 0;
        for (int64_t i = 0; i < c->oshape[d]; i++)
            mp[i] = is_mapped ? pad_source(c->mode, i, before, c->ishape[d]) : i;
    }
    c->nd = nd;
    c->xstride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--)
        c->xstride[d] = c->xstride[d + 1] * c->ishape[d + 1];
    c->xrs = sr_rowsize(x);
    c->yrs = 1;
    for (int d = 0; d < nd; d++)
        c->yrs *= c->oshape[d];
    return 0;
}

static int gather_run(sr_module *m, const sr_tensor *x, int64_t fill_rows, sr_run *run)
{
    gather_impl *c = m->impl;
    if (gather_plan(m, x))
        return -1;
    int64_t ys[SR_MAXDIM];
    ys[0] = x->shape[0];
    memcpy(ys + 1, c->oshape, (size_t)c->nd * sizeof(int64_t));
    if (sr_module_output(m, run, x->dtype, c->nd + 1, ys))
        return -1;
    if (c->yrs)
        SR_DISPATCH(x->dtype, shape_gather, sr_data(&m->out), sr_data(x), x->shape[0], fill_rows, c->value, c->nd,
                    c->oshape, c->map, c->xstride, c->xrs, c->yrs);
    return 0;
}

static int gather_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    return gather_run(m, x, x->ndim ? x->shape[0] : 0, run);
}
static int gather_jvp(sr_module *m, const sr_tensor *x, sr_run *run) { return gather_run(m, x, run->n, run); }

static int gather_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    gather_impl *c = m->impl;
    int64_t xs[SR_MAXDIM];
    xs[0] = gy->shape[0];
    memcpy(xs + 1, c->ishape, (size_t)c->nd * sizeof(int64_t));
    if (sr_module_grad_input(m, run, gy->dtype, c->nd + 1, xs))
        return -1;
    SR_DISPATCH(gy->dtype, shape_scatter, sr_data(&m->gin), sr_data(gy), gy->shape[0], c->nd, c->oshape, c->map,
                c->xstride, c->xrs, c->yrs);
    return 0;
}

static void gather_free(sr_module *m)
{
    gather_impl *c = m->impl;
    for (int d = 0; d < SR_MAXDIM; d++)
        free(c->map[d]);
    free(c->idx);
}

static void gather_describe(const sr_module *m, char *buf, size_t n)
{
    const gather_impl *c = m->impl;
    if (c->kind == SHAPE_SLICE) {
        snprintf(buf, n, "dim %lld, %lld:%lld:%lld", (long long)c->dim, (long long)c->start, (long long)c->stop,
                 (long long)c->step);
    } else if (c->kind == SHAPE_INDEX) {
        int len = snprintf(buf, n, "dim %lld, %lld indices", (long long)c->dim, (long long)c->nidx);
        if (c->nidx == 1 && len > 0 && (size_t)len < n)
            snprintf(buf + len, n - (size_t)len, " (%lld)", (long long)c->idx[0]);
    } else {
        size_t len = (size_t)snprintf(buf, n, "%s {", c->mode == PAD_REFLECT ? "reflect" : c->mode == PAD_EDGE ? "edge"
                                                                                                                : "constant");
        for (int i = 0; i < c->npad && len < n; i++)
            len += (size_t)snprintf(buf + len, n - len, i ? ",%lld" : "%lld", (long long)c->pads[i]);
        if (len < n)
            len += (size_t)snprintf(buf + len, n - len, "}");
        if (c->mode == PAD_CONSTANT && c->value != 0 && len < n)
            snprintf(buf + len, n - len, " value %g", c->value);
    }
}

#define GATHER_OPS(NAME)                                                                                        \
    static const sr_module_ops NAME##_ops = {                                                                   \
        .kind = #NAME, .forward = gather_forward, .jvp = gather_jvp, .backward = gather_backward,                \
        .free_impl = gather_free, .describe = gather_describe, .is_affine = sr_module_affine_always,                      \
    };
GATHER_OPS(slice)
GATHER_OPS(index_select)
GATHER_OPS(pad)

static sr_module *gather_new(const sr_module_ops *ops, const gather_impl *cfg)
{
    sr_module *m = sr_module_new(ops, sizeof *cfg);
    if (m)
        *(gather_impl *)m->impl = *cfg;
    return m;
}

sr_module *sr_slice_create(const sr_opts *o)
{
    gather_impl cfg = {.kind = SHAPE_SLICE};
    if (sr_opt_int(o, "dim", 1, &cfg.dim) || sr_opt_int(o, "step", 1, &cfg.step))
        return NULL;
    if (cfg.step == 0) {
        sr_fail("slice: step must not be 0");
        return NULL;
    }
    /* Python's defaults: the whole dim, in the step's direction */
    if (sr_opt_int(o, "start", cfg.step > 0 ? 0 : -1, &cfg.start) ||
        sr_opt_int(o, "stop", cfg.step > 0 ? INT64_MAX : INT64_MIN, &cfg.stop))
        return NULL;
    if (cfg.dim == 0) {
        sr_fail("slice: dim 0 is the batch (use dim >= 1)");
        return NULL;
    }
    return gather_new(&slice_ops, &cfg);
}

#define INDEX_MAX 65536

sr_module *sr_index_select_create(const sr_opts *o)
{
    gather_impl cfg = {.kind = SHAPE_INDEX};
    if (sr_opt_int(o, "dim", 1, &cfg.dim))
        return NULL;
    if (cfg.dim == 0) {
        sr_fail("index_select: dim 0 is the batch (use dim >= 1)");
        return NULL;
    }
    double *v = malloc(INDEX_MAX * sizeof *v);
    int n = 0, r = v ? o->get_nums(o, "index", v, INDEX_MAX, &n) : -1;
    if (!v)
        sr_fail("index_select: out of memory");
    if (r == 0)
        sr_fail("index_select: option index (a list of 0-based positions) is required");
    if (r > 0 && n < 1)
        sr_fail("index_select: index lists no position"), r = 0;
    cfg.idx = r > 0 ? malloc((size_t)n * sizeof *cfg.idx) : NULL;
    for (int i = 0; r > 0 && cfg.idx && i < n; i++) {
        if (v[i] != floor(v[i]) || fabs(v[i]) > 1e15) {
            sr_fail("index_select: index entry %d is %g, not an integer", i + 1, v[i]);
            r = 0;
        }
        cfg.idx[i] = (int64_t)v[i];
    }
    free(v);
    if (r <= 0 || !cfg.idx) {
        if (r > 0)
            sr_fail("index_select: out of memory");
        free(cfg.idx);
        return NULL;
    }
    cfg.nidx = n;
    sr_module *m = gather_new(&index_select_ops, &cfg);
    if (!m)
        free(cfg.idx);
    return m;
}

sr_module *sr_pad_create(const sr_opts *o)
{
    gather_impl cfg = {.kind = SHAPE_PAD};
    double p[2 * SR_MAXDIM];
    int np = 0, r = o->get_nums(o, "padding", p, 2 * SR_MAXDIM, &np);
    if (r < 0 || sr_opt_choice(o, "mode", (const char *[]){"constant", "reflect", "edge", NULL}, &cfg.mode) ||
        sr_opt_num(o, "value", 0, &cfg.value))
        return NULL;
    if (r == 0 || np < 2 || np % 2) {
        sr_fail("pad: option padding must list {before, after} pairs, last dim first (got %d values)", r ? np : 0);
        return NULL;
    }
    if (!isfinite(cfg.value) && cfg.mode == PAD_CONSTANT && !isinf(cfg.value)) {
        sr_fail("pad: value must be a number, got %g", cfg.value);
        return NULL;
    }
    for (int i = 0; i < np; i++) {
        if (p[i] != floor(p[i]) || fabs(p[i]) > 1e12) {
            sr_fail("pad: padding entry %d is %g, not an integer", i + 1, p[i]);
            return NULL;
        }
        cfg.pads[i] = (int64_t)p[i];
    }
    cfg.npad = np;
    return gather_new(&pad_ops, &cfg);
}

/* --- reshape ---------------------------------------------------------------
 * A view: m->out shares x's storage, m->gin shares gy's. */
typedef struct {
    int nd;                       /* sample dims of the target */
    int64_t shape[SR_MAXDIM];     /* as given, one entry may be -1 */
    int in_ndim;
    int64_t in_shape[SR_MAXDIM];  /* last input, for backward */
} reshape_impl;

static int reshape_run(sr_module *m, const sr_tensor *x, sr_run *run)
{
    (void)run;
    reshape_impl *c = m->impl;
    if (x->ndim < 1)
        return sr_fail("reshape: input %s needs a batch dimension", SR_SHAPE(x));
    int64_t s[SR_MAXDIM], known = 1, rs = sr_rowsize(x);
    int free_dim = -1;
    s[0] = x->shape[0];
    for (int d = 0; d < c->nd; d++) {
        s[d + 1] = c->shape[d];
        if (c->shape[d] < 0)
            free_dim = d + 1;
        else
            known *= c->shape[d];
    }
    if (free_dim > 0) {
        if (known == 0 || rs % known)
            return sr_fail("reshape: input %s has %lld values per sample, not a multiple of %lld", SR_SHAPE(x),
                           (long long)rs, (long long)known);
        s[free_dim] = rs / known;
    } else if (known != rs) {
        return sr_fail("reshape: input %s has %lld values per sample, the shape %lld", SR_SHAPE(x), (long long)rs,
                       (long long)known);
    }
    c->in_ndim = x->ndim;
    memcpy(c->in_shape, x->shape, sizeof c->in_shape);
    return sr_tensor_reshape(&m->out, x, c->nd + 1, s);
}

static int reshape_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    (void)run;
    reshape_impl *c = m->impl;
    int64_t s[SR_MAXDIM];
    memcpy(s, c->in_shape, sizeof s);
    s[0] = gy->shape[0];
    return sr_tensor_reshape(&m->gin, gy, c->in_ndim, s);
}

static void reshape_describe(const sr_module *m, char *buf, size_t n)
{
    const reshape_impl *c = m->impl;
    size_t len = (size_t)snprintf(buf, n, "-> (N");
    for (int d = 0; d < c->nd && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, ",%lld", (long long)c->shape[d]);
    if (len < n)
        snprintf(buf + len, n - len, ")");
}

static const sr_module_ops reshape_ops = {
    .kind = "reshape", .forward = reshape_run, .jvp = reshape_run, .backward = reshape_backward,
    .describe = reshape_describe, .is_affine = sr_module_affine_always,
};

sr_module *sr_reshape_create(const sr_opts *o)
{
    double v[SR_MAXDIM];
    int nd = 0, r = o->get_nums(o, "shape", v, SR_MAXDIM - 1, &nd);
    if (r < 0)
        return NULL;
    if (r == 0) {
        sr_fail("reshape: option shape (the dims after the batch) is required");
        return NULL;
    }
    reshape_impl cfg = {.nd = nd};
    int free_dims = 0;
    for (int d = 0; d < nd; d++) {
        if (v[d] != floor(v[d]) || v[d] < -1 || v[d] > 1e15) {
            sr_fail("reshape: shape entry %d is %g (sizes >= 0, or -1 once)", d + 1, v[d]);
            return NULL;
        }
        free_dims += v[d] < 0;
        cfg.shape[d] = (int64_t)v[d];
    }
    if (free_dims > 1) {
        sr_fail("reshape: shape has %d entries of -1 (at most one)", free_dims);
        return NULL;
    }
    sr_module *m = sr_module_new(&reshape_ops, sizeof cfg);
    if (m)
        *(reshape_impl *)m->impl = cfg;
    return m;
}

/* --- concat -------------------------------------------------------------
 * Pieces along dim, in order: the inputs, and constant pieces (parameters
 * "constant0", ... added by sr_concat_add_constant, which say where they go). */
typedef struct {
    int64_t dim;
    int nconst;
    int pos[SR_CONCAT_CONSTANTS]; /* position of constant q among the pieces */
    int nin;                      /* inputs of the last call */
    int64_t sizes[256];           /* input sizes along dim, last call (backward); -1: unknown */
    int nd;
    int64_t ishape0[SR_MAXDIM];   /* input 0's shape, last call */
} concat_impl;

/* Copy piece src (rows, a·len·b) into dst (rows, a·L·b) at offset off along
 * the dim, or back (to_piece). */
static void concat_copy(char *dst, const char *src, int64_t rows, int64_t a, int64_t len, int64_t L, int64_t b,
                        int64_t off, size_t es, int to_piece)
{
    #pragma omp parallel for schedule(static) if (rows * a * len * b > SHAPE_OMP_MIN)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < a; i++) {
            size_t whole = (size_t)(((r * a + i) * L + off) * b) * es, part = (size_t)((r * a + i) * len * b) * es;
            if (to_piece)
                memcpy(dst + part, src + whole, (size_t)(len * b) * es);
            else
                memcpy(dst + whole, src + part, (size_t)(len * b) * es);
        }
}

static int concat_run(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run, int jvp)
{
    concat_impl *c = m->impl;
    const sr_tensor *x0 = x[0];
    int dim;
    if (resolve_dim(m, c->dim, x0, &dim))
        return -1;
    int npieces = nin + c->nconst;
    if (nin > (int)(sizeof c->sizes / sizeof *c->sizes))
        return sr_fail("concat: at most %d inputs", (int)(sizeof c->sizes / sizeof *c->sizes));
    int64_t a = 1, b = 1, L = 0, shape[SR_MAXDIM];
    memcpy(shape, x0->shape, sizeof shape);
    for (int d = 1; d < dim; d++)
        a *= x0->shape[d];
    for (int d = dim + 1; d < x0->ndim; d++)
        b *= x0->shape[d];
    /* Check every piece against input 0 and sum the sizes along dim. */
    for (int p = 0, in = 0, q = 0; p < npieces; p++) {
        int is_const = q < c->nconst && c->pos[q] == p;
        const sr_tensor *t = is_const ? &m->params[q].value : x[in];
        int off = is_const ? 1 : 0; /* a constant has no batch dim */
        if (t->ndim + off != x0->ndim || (!is_const && t->shape[0] != x0->shape[0]))
            return sr_fail("concat: piece %d %s does not fit input 1 %s", p + 1, SR_SHAPE(t), SR_SHAPE(x0));
        for (int d = 1; d < x0->ndim; d++)
            if (d != dim && t->shape[d - off] != x0->shape[d])
                return sr_fail("concat: piece %d %s and input 1 %s differ outside dim %d", p + 1, SR_SHAPE(t),
                               SR_SHAPE(x0), dim);
        L += t->shape[dim - off];
        if (is_const)
            q++;
        else
            c->sizes[in++] = t->shape[dim];
    }
    shape[dim] = L;
    if (sr_module_output(m, run, x0->dtype, x0->ndim, shape))
        return -1;
    int64_t rows = x0->shape[0], np = jvp ? run->n : rows;
    size_t es = sr_dtype_size(x0->dtype);
    char *y = sr_data(&m->out);
    for (int p = 0, in = 0, q = 0, off = 0; p < npieces; p++) {
        int is_const = q < c->nconst && c->pos[q] == p;
        if (is_const) {
            const sr_tensor *t = &m->params[q++].value;
            int64_t len = t->shape[dim - 1];
            /* the constant on every primal row, zeros on the tangent rows */
            for (int64_t r = 0; r < rows; r++) {
                if (r < np)
                    concat_copy(y + (size_t)(r * a * L * b) * es, sr_data(t), 1, a, len, L, b, off, es, 0);
                else
                    for (int64_t i = 0; i < a; i++)
                        memset(y + (size_t)(((r * a + i) * L + off) * b) * es, 0, (size_t)(len * b) * es);
            }
            off += (int)len;
        } else {
            int64_t len = x[in]->shape[dim];
            concat_copy(y, sr_data(x[in]), rows, a, len, L, b, off, es, 0);
            off += (int)len;
            in++;
        }
    }
    c->nin = nin;
    c->nd = x0->ndim;
    memcpy(c->ishape0, x0->shape, sizeof c->ishape0);
    return 0;
}

static int concat_forward_n(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run)
{
    return concat_run(m, nin, x, run, 0);
}
static int concat_jvp_n(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run)
{
    return concat_run(m, nin, x, run, 1);
}
static int concat_forward(sr_module *m, const sr_tensor *x, sr_run *run) { return concat_run(m, 1, &x, run, 0); }
static int concat_jvp(sr_module *m, const sr_tensor *x, sr_run *run) { return concat_run(m, 1, &x, run, 1); }

static int concat_backward_n(sr_module *m, const sr_tensor *gy, int nin, sr_tensor *gin, sr_run *run)
{
    concat_impl *c = m->impl;
    if (nin != c->nin)
        return sr_fail("concat backward: %d inputs, the forward had %d", nin, c->nin);
    int dim = (int)(c->dim < 0 ? c->dim + c->nd : c->dim);
    int64_t a = 1, b = 1, L = gy->shape[dim], rows = gy->shape[0];
    for (int d = 1; d < dim; d++)
        a *= gy->shape[d];
    for (int d = dim + 1; d < gy->ndim; d++)
        b *= gy->shape[d];
    size_t es = sr_dtype_size(gy->dtype);
    for (int p = 0, in = 0, q = 0, off = 0; p < nin + c->nconst; p++) {
        if (q < c->nconst && c->pos[q] == p) {
            sr_param *cp = &m->params[q++];
            int64_t len = cp->value.shape[dim - 1];
            void *g;
            if (run->param_grads && cp->trainable) {
                if (!(g = sr_param_grad(m, cp)))
                    return -1;
                sr_tensor part = SR_TENSOR_INIT;
                if (sr_pool_ensure_like(run->pool, &part, &cp->value))
                    return -1;
                for (int64_t r = 0; r < rows; r++) {
                    concat_copy(sr_data(&part), (const char *)sr_data(gy) + (size_t)(r * a * L * b) * es, 1, a,
                                len, L, b, off, es, 1);
                    sr_add_into(gy->dtype, g, sr_data(&part), sr_numel(&part));
                }
                sr_pool_put(run->pool, &part);
            }
            off += (int)len;
            continue;
        }
        int64_t shape[SR_MAXDIM];
        memcpy(shape, c->ishape0, sizeof shape);
        shape[0] = rows;
        shape[dim] = c->sizes[in];
        if (sr_pool_ensure(run->pool, &gin[in], gy->dtype, c->nd, shape))
            return -1;
        concat_copy(sr_data(&gin[in]), sr_data(gy), rows, a, c->sizes[in], L, b, off, es, 1);
        off += (int)c->sizes[in++];
    }
    return 0;
}

static int concat_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    return concat_backward_n(m, gy, 1, &m->gin, run);
}

static int concat_arity(const sr_module *m)
{
    (void)m;
    return -1;
}

static void concat_describe(const sr_module *m, char *buf, size_t n)
{
    const concat_impl *c = m->impl;
    int len = snprintf(buf, n, "dim %lld", (long long)c->dim);
    if (c->nconst && len > 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, ", %d constant piece%s", c->nconst, c->nconst > 1 ? "s" : "");
}

static const sr_module_ops concat_ops = {
    .kind = "concat", .forward = concat_forward, .jvp = concat_jvp, .backward = concat_backward,
    .describe = concat_describe, .is_affine = sr_module_affine_always, .arity = concat_arity,
    .forward_n = concat_forward_n, .jvp_n = concat_jvp_n, .backward_n = concat_backward_n,
};

sr_module *sr_concat_create(const sr_opts *o)
{
    concat_impl cfg = {0};
    if (sr_opt_int(o, "dim", 1, &cfg.dim))
        return NULL;
    if (cfg.dim == 0) {
        sr_fail("concat: dim 0 is the batch (use dim >= 1)");
        return NULL;
    }
    sr_module *m = sr_module_new(&concat_ops, sizeof cfg);
    if (m)
        *(concat_impl *)m->impl = cfg;
    return m;
}

sr_param *sr_concat_add_constant(sr_module *m, int position, int ndim, const int64_t *shape, int trainable)
{
    if (m->ops != &concat_ops) {
        sr_fail("concat constant: %s is not a concat", m->ops->kind);
        return NULL;
    }
    concat_impl *c = m->impl;
    if (c->nconst >= SR_CONCAT_CONSTANTS || (c->nconst && position <= c->pos[c->nconst - 1]) || position < 0) {
        sr_fail("concat constant: position %d after %d constants (at most %d, in increasing positions)", position,
                c->nconst, SR_CONCAT_CONSTANTS);
        return NULL;
    }
    char name[32];
    snprintf(name, sizeof name, "constant%d", c->nconst);
    sr_param *p = sr_module_add_param(m, name, ndim, shape, trainable);
    if (p)
        c->pos[c->nconst++] = position;
    return p;
}

#endif
