/* tensor_ops.c - elementwise arithmetic, reductions, matmul, cat/stack,
 * index_select, transpose and finiteness checks, each written once over
 * `real` (generic.h) and dispatched on the dtype.
 *
 * Elementwise loops and reductions use OpenMP above a size threshold (below
 * it the fork costs more than the loop).  Reductions split their work into
 * pieces whose boundaries depend only on the shape, each piece summed
 * sequentially in double and the pieces combined in order, so a result is
 * bit-identical for any thread count.  GEMMs run outside OpenMP regions
 * because OpenBLAS keeps its own busy-waiting pool (threads.h). */
#ifndef SR_OPS_MACROS
#define SR_OPS_MACROS
/* Elements below which a loop stays serial. */
#define SR_OPS_OMP_MIN 65536
/* One elementwise loop over i in [0, n) (the names n and i are fixed because
 * _Pragma cannot see macro arguments). */
#define SR_EW(stmt)                                                                                \
    _Pragma("omp parallel for schedule(static) if (n > 65536)") for (int64_t i = 0; i < n; i++)    \
    {                                                                                              \
        stmt;                                                                                      \
    }
#define SR_POWT(x, y) _Generic((x), float: powf, default: pow)((x), (y))
/* NaN-propagating max/min, as torch.maximum / torch.minimum. */
#define SR_MAXT(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (x) > (y) ? (x) : (y))
#define SR_MINT(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (x) < (y) ? (x) : (y))
/* Column block of a dim reduction: small enough for its accumulators to
 * stay in L1 while the reduced dim streams past. */
#define SR_RED_BLOCK 256
#endif

#ifdef SR_REAL

static inline real SR_FN(apply)(real x, real y, sr_binop op)
{
    switch (op) {
    case SR_OP_ADD: return x + y;
    case SR_OP_SUB: return x - y;
    case SR_OP_MUL: return x * y;
    case SR_OP_DIV: return x / y;
    case SR_OP_POW: return SR_POWT(x, y);
    case SR_OP_MAXIMUM: return SR_MAXT(x, y);
    case SR_OP_MINIMUM: return SR_MINT(x, y);
    }
    return 0;
}

/* y = a op b over n elements (y may be a or b: elementwise in place). */
static void SR_FN(bin_flat)(real *y, const real *a, const real *b, int64_t n, sr_binop op)
{
    switch (op) {
    case SR_OP_ADD: SR_EW(y[i] = a[i] + b[i]) break;
    case SR_OP_SUB: SR_EW(y[i] = a[i] - b[i]) break;
    case SR_OP_MUL: SR_EW(y[i] = a[i] * b[i]) break;
    case SR_OP_DIV: SR_EW(y[i] = a[i] / b[i]) break;
    default: SR_EW(y[i] = SR_FN(apply)(a[i], b[i], op)) break;
    }
}

/* y = a op s (or s op a). */
static void SR_FN(bin_scalar)(real *y, const real *a, double sd, int64_t n, sr_binop op, int first)
{
    const real s = (real)sd;
    if (!first) {
        switch (op) {
        case SR_OP_ADD: SR_EW(y[i] = a[i] + s) break;
        case SR_OP_SUB: SR_EW(y[i] = a[i] - s) break;
        case SR_OP_MUL: SR_EW(y[i] = a[i] * s) break;
        case SR_OP_DIV: SR_EW(y[i] = a[i] / s) break;
        default: SR_EW(y[i] = SR_FN(apply)(a[i], s, op)) break;
        }
    } else {
        SR_EW(y[i] = SR_FN(apply)(s, a[i], op))
    }
}

/* Broadcast: out rows of length `last`; row r starts at element offsets
 * oa / ob of a / b found by decomposing r over the leading out dims. */
static void SR_FN(bin_bcast)(real *y, const real *a, const real *b, int nd, const int64_t *shape,
                             const int64_t *sa, const int64_t *sb, sr_binop op)
{
    int64_t last = nd ? shape[nd - 1] : 1, rows = 1;
    for (int d = 0; d + 1 < nd; d++)
        rows *= shape[d];
    int64_t la = nd ? sa[nd - 1] : 0, lb = nd ? sb[nd - 1] : 0;
#pragma omp parallel for schedule(static) if (rows * last > SR_OPS_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t rem = r, oa = 0, ob = 0;
        for (int d = nd - 2; d >= 0; d--) {
            int64_t k = rem % shape[d];
            rem /= shape[d];
            oa += k * sa[d];
            ob += k * sb[d];
        }
        real *yr = y + r * last;
        for (int64_t j = 0; j < last; j++)
            yr[j] = SR_FN(apply)(a[oa + j * la], b[ob + j * lb], op);
    }
}

static void SR_FN(unary)(real *y, const real *a, int64_t n, sr_unop op)
{
    switch (op) {
    case SR_OP_NEG: SR_EW(y[i] = -a[i]) break;
    case SR_OP_ABS: SR_EW(y[i] = SR_FABS(a[i])) break;
    case SR_OP_SQRT: SR_EW(y[i] = SR_SQRT(a[i])) break;
    case SR_OP_EXP: SR_EW(y[i] = SR_EXP(a[i])) break;
    case SR_OP_LOG: SR_EW(y[i] = SR_LOG(a[i])) break;
    case SR_OP_SQUARE: SR_EW(y[i] = a[i] * a[i]) break;
    case SR_OP_SIGN: SR_EW(y[i] = a[i] != a[i] ? a[i] : (real)((a[i] > 0) - (a[i] < 0))) break;
    }
}

static void SR_FN(clamp)(real *y, const real *a, int64_t n, double lod, double hid)
{
    const real lo = (real)lod, hi = (real)hid;
    SR_EW(y[i] = a[i] < lo ? lo : a[i] > hi ? hi : a[i])
}

/* Σ x (or Σ x²) over a contiguous run, in double; four accumulators keep
 * the adds pipelined (and fix the rounding order). */
static double SR_FN(run_sum)(const real *x, int64_t n, int sq)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    if (sq) {
        for (; i + 4 <= n; i += 4) {
            s0 += (double)x[i] * x[i];
            s1 += (double)x[i + 1] * x[i + 1];
            s2 += (double)x[i + 2] * x[i + 2];
            s3 += (double)x[i + 3] * x[i + 3];
        }
        for (; i < n; i++)
            s0 += (double)x[i] * x[i];
    } else {
        for (; i + 4 <= n; i += 4) {
            s0 += x[i];
            s1 += x[i + 1];
            s2 += x[i + 2];
            s3 += x[i + 3];
        }
        for (; i < n; i++)
            s0 += x[i];
    }
    return (s0 + s1) + (s2 + s3);
}

static double SR_FN(run_dot)(const real *a, const real *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)a[i] * b[i];
        s1 += (double)a[i + 1] * b[i + 1];
        s2 += (double)a[i + 2] * b[i + 2];
        s3 += (double)a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += (double)a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* Position of the max (or min) of x[0], x[s], ... x[(n-1)s], n >= 1; the
 * first one wins ties and the first NaN wins outright. */
static int64_t SR_FN(run_arg)(const real *x, int64_t n, int64_t s, int is_max, real *best)
{
    real b = x[0];
    int64_t bi = 0;
    if (b == b)
        for (int64_t k = 1; k < n; k++) {
            real v = x[k * s];
            if (v != v) {
                b = v;
                bi = k;
                break;
            }
            if (is_max ? v > b : v < b) {
                b = v;
                bi = k;
            }
        }
    *best = b;
    return bi;
}

/* Whole-tensor reduction: `np` pieces of `piece` elements (the last one
 * shorter), partial results combined in piece order. */
static void SR_FN(reduce_all)(const real *x, int64_t n, int64_t piece, int np, sr_reduce_op op,
                              double *value, int64_t *index)
{
    double part[256];
    int64_t pidx[256];
    int is_arg = op == SR_RED_MAX || op == SR_RED_MIN;
#pragma omp parallel for schedule(static) if (n > SR_OPS_OMP_MIN)
    for (int p = 0; p < np; p++) {
        int64_t lo = (int64_t)p * piece, len = lo + piece > n ? n - lo : piece;
        if (is_arg) {
            real b;
            pidx[p] = lo + SR_FN(run_arg)(x + lo, len, 1, op == SR_RED_MAX, &b);
            part[p] = b;
        } else {
            part[p] = SR_FN(run_sum)(x + lo, len, op == SR_RED_NORM);
        }
    }
    if (is_arg) {
        double b = part[0];
        int64_t bi = pidx[0];
        for (int p = 1; p < np && b == b; p++) {
            double v = part[p];
            if (v != v || (op == SR_RED_MAX ? v > b : v < b)) {
                b = v;
                bi = pidx[p];
            }
        }
        *value = b;
        if (index)
            *index = bi;
    } else {
        double s = 0;
        for (int p = 0; p < np; p++)
            s += part[p];
        *value = op == SR_RED_MEAN ? s / (double)n : op == SR_RED_NORM ? sqrt(s) : s;
    }
}

static void SR_FN(dot_all)(const real *a, const real *b, int64_t n, int64_t piece, int np, double *out)
{
    double part[256];
#pragma omp parallel for schedule(static) if (n > SR_OPS_OMP_MIN)
    for (int p = 0; p < np; p++) {
        int64_t lo = (int64_t)p * piece, len = lo + piece > n ? n - lo : piece;
        part[p] = SR_FN(run_dot)(a + lo, b + lo, len);
    }
    double s = 0;
    for (int p = 0; p < np; p++)
        s += part[p];
    *out = s;
}

/* Reduce x viewed as (outer, n, inner) over its middle dim into y (outer,
 * inner); idx (double, may be NULL) gets argmax/argmin positions. */
static void SR_FN(reduce_dim)(real *y, double *idx, const real *x, int64_t outer, int64_t n, int64_t inner,
                              sr_reduce_op op)
{
    int is_arg = op == SR_RED_MAX || op == SR_RED_MIN, sq = op == SR_RED_NORM;
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (outer * n > SR_OPS_OMP_MIN)
        for (int64_t o = 0; o < outer; o++) {
            const real *row = x + o * n;
            if (is_arg) {
                real b;
                int64_t k = SR_FN(run_arg)(row, n, 1, op == SR_RED_MAX, &b);
                y[o] = b;
                if (idx)
                    idx[o] = (double)k;
            } else {
                double s = SR_FN(run_sum)(row, n, sq);
                y[o] = (real)(op == SR_RED_MEAN ? s / (double)n : sq ? sqrt(s) : s);
            }
        }
        return;
    }
    int64_t nb = (inner + SR_RED_BLOCK - 1) / SR_RED_BLOCK;
#pragma omp parallel for schedule(static) if (outer * n * inner > SR_OPS_OMP_MIN)
    for (int64_t t = 0; t < outer * nb; t++) {
        int64_t o = t / nb, j0 = (t % nb) * SR_RED_BLOCK;
        int64_t w = j0 + SR_RED_BLOCK > inner ? inner - j0 : SR_RED_BLOCK;
        const real *base = x + o * n * inner + j0;
        real *yo = y + o * inner + j0;
        if (is_arg) {
            real bv[SR_RED_BLOCK];
            int64_t bi[SR_RED_BLOCK];
            for (int64_t j = 0; j < w; j++) {
                bv[j] = base[j];
                bi[j] = 0;
            }
            for (int64_t k = 1; k < n; k++) {
                const real *r = base + k * inner;
                for (int64_t j = 0; j < w; j++) {
                    real v = r[j];
                    if (bv[j] == bv[j] && (v != v || (op == SR_RED_MAX ? v > bv[j] : v < bv[j]))) {
                        bv[j] = v;
                        bi[j] = k;
                    }
                }
            }
            for (int64_t j = 0; j < w; j++) {
                yo[j] = bv[j];
                if (idx)
                    idx[o * inner + j0 + j] = (double)bi[j];
            }
        } else {
            double acc[SR_RED_BLOCK] = {0};
            for (int64_t k = 0; k < n; k++) {
                const real *r = base + k * inner;
                if (sq)
                    for (int64_t j = 0; j < w; j++)
                        acc[j] += (double)r[j] * r[j];
                else
                    for (int64_t j = 0; j < w; j++)
                        acc[j] += r[j];
            }
            for (int64_t j = 0; j < w; j++)
                yo[j] = (real)(op == SR_RED_MEAN ? acc[j] / (double)n : sq ? sqrt(acc[j]) : acc[j]);
        }
    }
}

/* C (m,n) = A (m,k) · B (k,n), all row-major and contiguous; m,n,k > 0. */
static void SR_FN(gemm)(real *c, const real *a, const real *b, int m, int n, int k)
{
    SR_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
}

static void SR_FN(gemm_naive)(real *c, const real *a, const real *b, int64_t m, int64_t n, int64_t k)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += (double)a[i * k + p] * b[p * n + j];
            c[i * n + j] = (real)s;
        }
}

/* (m,n) -> (n,m) in 32×32 tiles so both sides stay cache-friendly. */
static void SR_FN(transpose)(real *y, const real *x, int64_t m, int64_t n)
{
#pragma omp parallel for schedule(static) if (m * n > SR_OPS_OMP_MIN)
    for (int64_t i0 = 0; i0 < m; i0 += 32)
        for (int64_t j0 = 0; j0 < n; j0 += 32)
            for (int64_t i = i0; i < i0 + 32 && i < m; i++)
                for (int64_t j = j0; j < j0 + 32 && j < n; j++)
                    y[j * m + i] = x[i * n + j];
}

void SR_FN(sr_bias_grad)(real *gb, const real *gy, int64_t n, int64_t c, int64_t P)
{
    for (int64_t o = 0; o < c; o++) {
        real s = 0;
        for (int64_t i = 0; i < n; i++) {
            const real *r = gy + (i * c + o) * P;
            _Pragma("omp simd reduction(+ : s)")
            for (int64_t p = 0; p < P; p++)
                s += r[p];
        }
        gb[o] += s;
    }
}

static int64_t SR_FN(find_nonfinite)(const real *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return i;
    return -1;
}

#else /* generic part */

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor_ops.h"

#include "base/checked.h"

#define SR_GENERIC_FILE "tensor/tensor_ops.c"
#include "base/generic.h"

const char *sr_binop_name(sr_binop op)
{
    static const char *const names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};
    return (unsigned)op < sizeof names / sizeof *names ? names[op] : "binary";
}

const char *sr_unop_name(sr_unop op)
{
    static const char *const names[] = {"neg", "abs", "sqrt", "exp", "log", "square", "sign"};
    return (unsigned)op < sizeof names / sizeof *names ? names[op] : "unary";
}

const char *sr_reduce_name(sr_reduce_op op)
{
    static const char *const names[] = {"sum", "mean", "norm", "max", "min"};
    return (unsigned)op < sizeof names / sizeof *names ? names[op] : "reduce";
}

/* --- shared checks and the output protocol ------------------------------ */

static int check_input(const char *op, const sr_tensor *t)
{
    if (!t->storage)
        return sr_fail("%s: input is an empty (unallocated) tensor", op);
    return 0;
}

static int check_dtypes(const char *op, const sr_tensor *a, const sr_tensor *b)
{
    if (a->dtype != b->dtype)
        return sr_fail("%s: %s and %s tensors; convert with :double()", op, sr_dtype_name(a->dtype),
                       sr_dtype_name(b->dtype));
    return 0;
}

static int shares(const sr_tensor *out, const sr_tensor *x)
{
    return out->storage && out->storage == x->storage;
}

/* Where a result is built: `out` itself, or `tmp` when out shares storage
 * with an input (writing out would clobber what is still to be read). */
static sr_tensor *target(sr_tensor *out, sr_tensor *tmp, const sr_tensor *a, const sr_tensor *b)
{
    return (shares(out, a) || (b && shares(out, b))) ? tmp : out;
}

/* Move a result built in tmp into out. */
static void finish(sr_tensor *out, sr_tensor *dst)
{
    if (dst != out) {
        sr_tensor_free(out);
        *out = *dst;
    }
}

static int shape_equal(int nd, const int64_t *shape, const sr_tensor *t)
{
    if (t->ndim != nd)
        return 0;
    for (int i = 0; i < nd; i++)
        if (t->shape[i] != shape[i])
            return 0;
    return 1;
}

/* Elementwise result of a given shape: in place into an input that is the
 * same struct as out (and not overlapped differently by the other operand),
 * else a fresh or reused buffer.  Sets *dst; the caller finishes. */
static int ew_target(sr_tensor *out, sr_tensor *tmp, sr_tensor **dst, const sr_tensor *a, const sr_tensor *b,
                     sr_dtype dt, int nd, const int64_t *shape, int strict)
{
    const sr_tensor *other = out == a ? b : a;
    /* The other operand may share out's storage only where it reads each
     * element just before it is overwritten: the very same tensor. */
    int apart = !other || !shares(out, other) ||
                (!strict && other->offset == out->offset && sr_same_shape(other, out));
    if ((out == a || (b && out == b)) && shape_equal(nd, shape, out) && apart) {
        *dst = out;
        return 0;
    }
    *dst = target(out, tmp, a, b);
    return sr_tensor_ensure(*dst, dt, nd, shape);
}

/* Resolve a possibly negative dim against ndim (or ndim+1 for stack). */
static int resolve_dim(const char *op, const sr_tensor *a, int dim, int limit, int *out)
{
    int d = dim < 0 ? dim + limit : dim;
    if (d < 0 || d >= limit)
        return sr_fail("%s: dim %d out of range for %s (%d dims)", op, dim, SR_SHAPE(a), a->ndim);
    *out = d;
    return 0;
}

/* --- elementwise -------------------------------------------------------- */

static int bcast_shape(const char *op, const sr_tensor *a, const sr_tensor *b, int *nd, int64_t *shape)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = a->ndim - n + i, ib = b->ndim - n + i;
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return sr_fail("%s: shapes %s and %s do not match (nor broadcast)", op, SR_SHAPE(a), SR_SHAPE(b));
        shape[i] = da == 1 ? db : da;
    }
    *nd = n;
    return 0;
}

/* Element strides of t seen in an nd-dim broadcast shape (0 where t is
 * absent or has size 1). */
static void bcast_strides(const sr_tensor *t, int nd, const int64_t *shape, int64_t *st)
{
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        int it = t->ndim - nd + i;
        if (it < 0 || (t->shape[it] == 1 && shape[i] != 1)) {
            st[i] = 0;
        } else {
            st[i] = s;
        }
        if (it >= 0)
            s *= t->shape[it];
    }
}

void sr_add_into(sr_dtype dt, void *a, const void *b, int64_t n)
{
    SR_DISPATCH(dt, bin_flat, a, a, b, n, SR_OP_ADD);
}

int sr_binary(sr_tensor *out, const sr_tensor *a, const sr_tensor *b, sr_binop op)
{
    const char *name = sr_binop_name(op);
    int nd = 0;
    int64_t shape[SR_MAXDIM];
    if (check_input(name, a) || check_input(name, b) || check_dtypes(name, a, b) ||
        bcast_shape(name, a, b, &nd, shape))
        return -1;
    sr_tensor tmp = SR_TENSOR_INIT, *dst;
    /* A one-element operand is a scalar: take the fast path. */
    int same = sr_same_shape(a, b);
    if (!same && sr_numel(b) == 1) {
        double s = sr_get_flat(b, 0);
        if (ew_target(out, &tmp, &dst, a, b, a->dtype, nd, shape, 0))
            return -1;
        SR_DISPATCH(a->dtype, bin_scalar, sr_data(dst), sr_data(a), s, sr_numel(dst), op, 0);
    } else if (!same && sr_numel(a) == 1) {
        double s = sr_get_flat(a, 0);
        if (ew_target(out, &tmp, &dst, a, b, a->dtype, nd, shape, 0))
            return -1;
        SR_DISPATCH(a->dtype, bin_scalar, sr_data(dst), sr_data(b), s, sr_numel(dst), op, 1);
    } else if (same) {
        if (ew_target(out, &tmp, &dst, a, b, a->dtype, nd, shape, 0))
            return -1;
        SR_DISPATCH(a->dtype, bin_flat, sr_data(dst), sr_data(a), sr_data(b), sr_numel(a), op);
    } else {
        /* In place into the full-shape operand is safe (it is read at the
         * position being written) unless the broadcast one overlaps it. */
        int64_t sa[SR_MAXDIM], sb[SR_MAXDIM];
        bcast_strides(a, nd, shape, sa);
        bcast_strides(b, nd, shape, sb);
        if (ew_target(out, &tmp, &dst, a, b, a->dtype, nd, shape, 1))
            return -1;
        if (sr_numel(dst))
            SR_DISPATCH(a->dtype, bin_bcast, sr_data(dst), sr_data(a), sr_data(b), nd, shape, sa, sb, op);
    }
    finish(out, dst);
    return 0;
}

int sr_binary_scalar(sr_tensor *out, const sr_tensor *a, double s, sr_binop op, int scalar_first)
{
    sr_tensor tmp = SR_TENSOR_INIT, *dst;
    if (check_input(sr_binop_name(op), a) || ew_target(out, &tmp, &dst, a, NULL, a->dtype, a->ndim, a->shape, 0))
        return -1;
    SR_DISPATCH(a->dtype, bin_scalar, sr_data(dst), sr_data(a), s, sr_numel(a), op, scalar_first);
    finish(out, dst);
    return 0;
}

int sr_unary(sr_tensor *out, const sr_tensor *a, sr_unop op)
{
    sr_tensor tmp = SR_TENSOR_INIT, *dst;
    if (check_input(sr_unop_name(op), a) || ew_target(out, &tmp, &dst, a, NULL, a->dtype, a->ndim, a->shape, 0))
        return -1;
    SR_DISPATCH(a->dtype, unary, sr_data(dst), sr_data(a), sr_numel(a), op);
    finish(out, dst);
    return 0;
}

int sr_pow_scalar(sr_tensor *out, const sr_tensor *a, double p)
{
    if (p == 2)
        return sr_unary(out, a, SR_OP_SQUARE);
    return sr_binary_scalar(out, a, p, SR_OP_POW, 0);
}

int sr_clamp(sr_tensor *out, const sr_tensor *a, double lo, double hi)
{
    if (check_input("clamp", a))
        return -1;
    if (isnan(lo) || isnan(hi) || lo > hi)
        return sr_fail("clamp: bounds [%g, %g] are not ordered", lo, hi);
    sr_tensor tmp = SR_TENSOR_INIT, *dst;
    if (ew_target(out, &tmp, &dst, a, NULL, a->dtype, a->ndim, a->shape, 0))
        return -1;
    SR_DISPATCH(a->dtype, clamp, sr_data(dst), sr_data(a), sr_numel(a), lo, hi);
    finish(out, dst);
    return 0;
}

/* --- reductions --------------------------------------------------------- */

/* At most 256 pieces of at least 2^15 elements: boundaries depend on n
 * only, which is what makes the sums thread-count independent. */
static void pieces(int64_t n, int64_t *piece, int *np)
{
    int64_t p = (int64_t)1 << 15;
    if ((n + p - 1) / p > 256)
        p = (n + 255) / 256;
    *piece = p;
    *np = n ? (int)((n + p - 1) / p) : 0;
}

int sr_reduce_all(const sr_tensor *a, sr_reduce_op op, double *value, int64_t *index)
{
    const char *name = sr_reduce_name(op);
    if (check_input(name, a))
        return -1;
    int64_t n = sr_numel(a), piece;
    int np;
    if (n == 0) {
        if (op == SR_RED_MAX || op == SR_RED_MIN)
            return sr_fail("%s: empty tensor %s has no %s", name, SR_SHAPE(a), name);
        *value = op == SR_RED_MEAN ? NAN : 0;
        return 0;
    }
    pieces(n, &piece, &np);
    SR_DISPATCH(a->dtype, reduce_all, sr_data(a), n, piece, np, op, value, index);
    return 0;
}

int sr_reduce_dim(sr_tensor *out, sr_tensor *indices, const sr_tensor *a, sr_reduce_op op, int dim, int keepdim)
{
    const char *name = sr_reduce_name(op);
    int d;
    if (check_input(name, a))
        return -1;
    if (a->ndim == 0)
        return sr_fail("%s: a 0-d tensor has no dim %d", name, dim);
    if (resolve_dim(name, a, dim, a->ndim, &d))
        return -1;
    int is_arg = op == SR_RED_MAX || op == SR_RED_MIN;
    int64_t outer = 1, inner = 1, n = a->shape[d];
    for (int i = 0; i < d; i++)
        outer *= a->shape[i];
    for (int i = d + 1; i < a->ndim; i++)
        inner *= a->shape[i];
    if (is_arg && n == 0 && outer * inner > 0)
        return sr_fail("%s: dim %d of %s is empty", name, dim, SR_SHAPE(a));
    int64_t shape[SR_MAXDIM];
    int nd = 0;
    for (int i = 0; i < a->ndim; i++) {
        if (i != d)
            shape[nd++] = a->shape[i];
        else if (keepdim)
            shape[nd++] = 1;
    }
    if (indices == out)
        return sr_fail("%s: values and indices must be different tensors", name);
    sr_tensor tmp = SR_TENSOR_INIT, itmp = SR_TENSOR_INIT;
    sr_tensor *dst = target(out, &tmp, a, NULL);
    sr_tensor *idst = indices && is_arg ? target(indices, &itmp, a, NULL) : NULL;
    if (sr_tensor_ensure(dst, a->dtype, nd, shape) || (idst && sr_tensor_ensure(idst, SR_F64, nd, shape))) {
        sr_tensor_free(&tmp);
        sr_tensor_free(&itmp);
        return -1;
    }
    if (outer * inner > 0)
        SR_DISPATCH(a->dtype, reduce_dim, sr_data(dst), idst ? sr_f64(idst) : NULL, sr_data(a), outer, n, inner, op);
    finish(out, dst);
    if (idst)
        finish(indices, idst);
    return 0;
}

int sr_dot(const sr_tensor *a, const sr_tensor *b, double *out)
{
    if (check_input("dot", a) || check_input("dot", b) || check_dtypes("dot", a, b))
        return -1;
    if (!sr_same_shape(a, b))
        return sr_fail("dot: shapes %s and %s differ", SR_SHAPE(a), SR_SHAPE(b));
    int64_t n = sr_numel(a), piece;
    int np;
    pieces(n, &piece, &np);
    *out = 0;
    if (n)
        SR_DISPATCH(a->dtype, dot_all, sr_data(a), sr_data(b), n, piece, np, out);
    return 0;
}

/* --- linear algebra ----------------------------------------------------- */

typedef struct {
    int64_t batch, m, n, k;
    int64_t a_stride, b_stride; /* elements between batch entries (0: shared) */
    int nd;
    int64_t shape[3];
} mm_plan;

static int mm_plan_make(const sr_tensor *a, const sr_tensor *b, mm_plan *p)
{
    if (check_input("matmul", a) || check_input("matmul", b) || check_dtypes("matmul", a, b))
        return -1;
    int na = a->ndim, nb = b->ndim;
    const int64_t *sa = a->shape, *sb = b->shape;
    p->batch = 1;
    p->a_stride = p->b_stride = 0;
    if (na == 1 && nb == 1)
        return sr_fail("matmul: %s and %s are both 1-D; use dot", SR_SHAPE(a), SR_SHAPE(b));
    if (na < 1 || na > 3 || nb < 1 || nb > 3 || (nb == 3 && na != 3))
        return sr_fail("matmul: %s x %s: expected (M,K)x(K,N), (B,M,K)x(B,K,N), (B,M,K)x(K,N), (K)x(K,N) or "
                       "(M,K)x(K)", SR_SHAPE(a), SR_SHAPE(b));
    if (na == 1) { /* (K) x (K,N) -> (N) */
        p->m = 1, p->k = sa[0], p->n = sb[1];
        p->nd = 1, p->shape[0] = p->n;
    } else if (nb == 1) { /* (..., M, K) x (K) -> (..., M) */
        p->m = na == 3 ? sa[0] * sa[1] : sa[0], p->k = sa[na - 1], p->n = 1;
        p->nd = na - 1;
        for (int i = 0; i < na - 1; i++)
            p->shape[i] = sa[i];
    } else if (nb == 2) { /* (..., M, K) x (K, N): one GEMM over all rows */
        p->m = na == 3 ? sa[0] * sa[1] : sa[0], p->k = sa[na - 1], p->n = sb[1];
        p->nd = na;
        for (int i = 0; i < na - 1; i++)
            p->shape[i] = sa[i];
        p->shape[na - 1] = p->n;
    } else { /* (B,M,K) x (B,K,N) */
        if (sa[0] != sb[0])
            return sr_fail("matmul: batch sizes differ in %s x %s", SR_SHAPE(a), SR_SHAPE(b));
        p->batch = sa[0], p->m = sa[1], p->k = sa[2], p->n = sb[2];
        p->a_stride = p->m * p->k, p->b_stride = p->k * p->n;
        p->nd = 3, p->shape[0] = sa[0], p->shape[1] = p->m, p->shape[2] = p->n;
    }
    int64_t kb = nb == 1 ? sb[0] : sb[nb - 2];
    if (kb != p->k)
        return sr_fail("matmul: inner dimensions differ in %s x %s (%lld vs %lld)", SR_SHAPE(a), SR_SHAPE(b),
                       (long long)p->k, (long long)kb);
    if (p->m > INT_MAX || p->n > INT_MAX || p->k > INT_MAX)
        return sr_fail("matmul: %s x %s exceeds the BLAS int range", SR_SHAPE(a), SR_SHAPE(b));
    return 0;
}

static int matmul_run(sr_tensor *out, const sr_tensor *a, const sr_tensor *b, int naive)
{
    mm_plan p;
    if (mm_plan_make(a, b, &p))
        return -1;
    sr_tensor tmp = SR_TENSOR_INIT, *dst = target(out, &tmp, a, b);
    if (sr_tensor_ensure(dst, a->dtype, p.nd, p.shape))
        return -1;
    size_t es = sr_dtype_size(a->dtype);
    char *pa = sr_data(a), *pb = sr_data(b), *pc = sr_data(dst);
    for (int64_t i = 0; i < p.batch; i++) {
        char *c = pc + (size_t)(i * p.m * p.n) * es;
        const char *ai = pa + (size_t)(i * p.a_stride) * es, *bi = pb + (size_t)(i * p.b_stride) * es;
        if (p.m == 0 || p.n == 0)
            continue;
        if (p.k == 0) /* BLAS rejects lda = 0; the product is all zeros */
            memset(c, 0, (size_t)(p.m * p.n) * es);
        else if (naive)
            SR_DISPATCH(a->dtype, gemm_naive, (void *)c, (const void *)ai, (const void *)bi, p.m, p.n, p.k);
        else
            SR_DISPATCH(a->dtype, gemm, (void *)c, (const void *)ai, (const void *)bi, (int)p.m, (int)p.n,
                        (int)p.k);
    }
    finish(out, dst);
    return 0;
}

int sr_matmul(sr_tensor *out, const sr_tensor *a, const sr_tensor *b) { return matmul_run(out, a, b, 0); }
int sr_matmul_naive(sr_tensor *out, const sr_tensor *a, const sr_tensor *b) { return matmul_run(out, a, b, 1); }

int sr_transpose(sr_tensor *out, const sr_tensor *a)
{
    if (check_input("transpose", a))
        return -1;
    if (a->ndim != 2)
        return sr_fail("transpose: input %s must be 2-D", SR_SHAPE(a));
    sr_tensor tmp = SR_TENSOR_INIT, *dst = target(out, &tmp, a, NULL);
    if (sr_tensor_ensure(dst, a->dtype, 2, (int64_t[]){a->shape[1], a->shape[0]}))
        return -1;
    SR_DISPATCH(a->dtype, transpose, sr_data(dst), sr_data(a), a->shape[0], a->shape[1]);
    finish(out, dst);
    return 0;
}

int sr_transpose_dims(sr_tensor *out, const sr_tensor *a, int d0, int d1)
{
    if (check_input("transpose", a))
        return -1;
    if (a->ndim == 0)
        return sr_fail("transpose: a 0-d tensor has no dims to swap");
    if (resolve_dim("transpose", a, d0, a->ndim, &d0) || resolve_dim("transpose", a, d1, a->ndim, &d1))
        return -1;
    if (d0 > d1) {
        int t = d0;
        d0 = d1;
        d1 = t;
    }
    int64_t shape[SR_MAXDIM];
    memcpy(shape, a->shape, sizeof shape);
    shape[d0] = a->shape[d1];
    shape[d1] = a->shape[d0];
    if (d0 == d1)
        return sr_tensor_copy(out, a);
    if (a->ndim == 2)
        return sr_transpose(out, a); /* the tiled kernel */
    /* a as (A, n0, B, n1, C) -> out (A, n1, B, n0, C): one memcpy of C
     * elements per (A, n1, B, n0) index. */
    int64_t A = 1, B = 1, C = 1, n0 = a->shape[d0], n1 = a->shape[d1];
    for (int i = 0; i < d0; i++)
        A *= a->shape[i];
    for (int i = d0 + 1; i < d1; i++)
        B *= a->shape[i];
    for (int i = d1 + 1; i < a->ndim; i++)
        C *= a->shape[i];
    sr_tensor tmp = SR_TENSOR_INIT, *dst = target(out, &tmp, a, NULL);
    if (sr_tensor_ensure(dst, a->dtype, a->ndim, shape))
        return -1;
    size_t es = sr_dtype_size(a->dtype), blk = (size_t)C * es;
    const char *x = sr_data(a);
    char *y = sr_data(dst);
    for (int64_t i = 0; i < A; i++)
        for (int64_t j1 = 0; j1 < n1; j1++)
            for (int64_t b = 0; b < B; b++)
                for (int64_t j0 = 0; j0 < n0; j0++) {
                    size_t src = (size_t)((((i * n0 + j0) * B + b) * n1 + j1) * C);
                    size_t dd = (size_t)((((i * n1 + j1) * B + b) * n0 + j0) * C);
                    memcpy(y + dd * es, x + src * es, blk);
                }
    finish(out, dst);
    return 0;
}

/* --- assembling and selecting ------------------------------------------- */

int sr_narrow_copy(sr_tensor *out, const sr_tensor *a, int dim, int64_t start, int64_t len)
{
    int d;
    if (check_input("narrow", a))
        return -1;
    if (a->ndim == 0)
        return sr_fail("narrow: a 0-d tensor cannot be narrowed");
    if (resolve_dim("narrow", a, dim, a->ndim, &d))
        return -1;
    int64_t n = a->shape[d];
    if (start < 0 || len < 0 || start > n || len > n - start) /* (start + len could overflow) */
        return sr_fail("narrow: [%lld, %lld) out of range for dim %d of %s", (long long)start,
                       (long long)sr_sat_add(start, len), d, SR_SHAPE(a));
    int64_t shape[SR_MAXDIM], outer = 1, inner = 1;
    memcpy(shape, a->shape, sizeof shape);
    shape[d] = len;
    for (int i = 0; i < d; i++)
        outer *= a->shape[i];
    for (int i = d + 1; i < a->ndim; i++)
        inner *= a->shape[i];
    sr_tensor tmp = SR_TENSOR_INIT, *dst = target(out, &tmp, a, NULL);
    if (sr_tensor_ensure(dst, a->dtype, a->ndim, shape))
        return -1;
    size_t es = sr_dtype_size(a->dtype), blk = (size_t)(len * inner) * es;
    const char *x = sr_data(a);
    char *y = sr_data(dst);
    if (blk)
        for (int64_t o = 0; o < outer; o++)
            memcpy(y + (size_t)o * blk, x + (size_t)((o * n + start) * inner) * es, blk);
    finish(out, dst);
    return 0;
}

/* Copy of tensor j's block for each outer index: ts viewed as (outer,
 * len_j) with len_j = its size along dim times inner; everything is
 * contiguous, so this is one memcpy per (outer, input). */
static int cat_core(sr_tensor *out, const sr_tensor *const *ts, int n, int d, int nd,
                    const int64_t *shape, const int64_t *dimlen)
{
    sr_tensor tmp = SR_TENSOR_INIT, *dst = out;
    for (int j = 0; j < n; j++)
        if (shares(out, ts[j]))
            dst = &tmp;
    if (sr_tensor_ensure(dst, ts[0]->dtype, nd, shape))
        return -1;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; i++)
        outer *= shape[i];
    for (int i = d + 1; i < nd; i++)
        inner *= shape[i];
    size_t es = sr_dtype_size(ts[0]->dtype);
    char *y = sr_data(dst);
    size_t row = (size_t)(shape[d] * inner) * es;
    for (int64_t o = 0; o < outer; o++) {
        char *yo = y + (size_t)o * row;
        for (int j = 0; j < n; j++) {
            size_t len = (size_t)(dimlen[j] * inner) * es;
            if (len)
                memcpy(yo, (const char *)sr_data(ts[j]) + (size_t)o * len, len);
            yo += len;
        }
    }
    finish(out, dst);
    return 0;
}

int sr_cat(sr_tensor *out, const sr_tensor *const *ts, int n, int dim)
{
    if (n < 1)
        return sr_fail("cat: no tensors");
    const sr_tensor *t0 = ts[0];
    int d;
    for (int j = 0; j < n; j++)
        if (check_input("cat", ts[j]))
            return -1;
    if (t0->ndim == 0)
        return sr_fail("cat: 0-d tensors cannot be concatenated (use stack)");
    if (resolve_dim("cat", t0, dim, t0->ndim, &d))
        return -1;
    int64_t shape[SR_MAXDIM];
    memcpy(shape, t0->shape, sizeof shape);
    shape[d] = 0;
    for (int j = 0; j < n; j++) {
        const sr_tensor *t = ts[j];
        if (check_dtypes("cat", t0, t))
            return -1;
        int ok = t->ndim == t0->ndim;
        for (int i = 0; ok && i < t0->ndim; i++)
            ok = i == d || t->shape[i] == t0->shape[i];
        if (!ok)
            return sr_fail("cat: tensor %d %s does not match tensor 0 %s outside dim %d", j, SR_SHAPE(t),
                           SR_SHAPE(t0), d);
        if (t->shape[d] > SR_MAX_ELEMS - shape[d]) /* the allocation checks the rest of the shape */
            return sr_fail("cat: the sizes along dim %d add up to more than 2^40", d);
        shape[d] += t->shape[d];
    }
    int64_t *dimlen = malloc((size_t)n * sizeof *dimlen);
    if (!dimlen)
        return sr_fail("cat: out of memory");
    for (int j = 0; j < n; j++)
        dimlen[j] = ts[j]->shape[d];
    int r = cat_core(out, ts, n, d, t0->ndim, shape, dimlen);
    free(dimlen);
    return r;
}

int sr_tensor_stack_jvp(sr_tensor *out, const sr_tensor *x, const sr_tensor *v)
{
    int ok = x->ndim >= 1 && v->ndim == x->ndim && x->shape[0] > 0 && v->shape[0] > 0 &&
             v->shape[0] % x->shape[0] == 0;
    for (int i = 1; ok && i < x->ndim; i++)
        ok = v->shape[i] == x->shape[i];
    if (!ok)
        return sr_fail("jvp: tangents %s must be (N*k, ...) for input %s", SR_SHAPE(v), SR_SHAPE(x));
    if (v->dtype != x->dtype)
        return sr_fail("jvp: tangents are %s, input %s", sr_dtype_name(v->dtype), sr_dtype_name(x->dtype));
    /* input-major tangents make the stack a plain concatenation */
    const sr_tensor *parts[2] = {x, v};
    return sr_cat(out, parts, 2, 0);
}

int sr_stack(sr_tensor *out, const sr_tensor *const *ts, int n, int dim)
{
    if (n < 1)
        return sr_fail("stack: no tensors");
    const sr_tensor *t0 = ts[0];
    int d;
    for (int j = 0; j < n; j++)
        if (check_input("stack", ts[j]))
            return -1;
    if (t0->ndim >= SR_MAXDIM)
        return sr_fail("stack: %s already has %d dims (at most %d)", SR_SHAPE(t0), t0->ndim, SR_MAXDIM);
    if (resolve_dim("stack", t0, dim, t0->ndim + 1, &d))
        return -1;
    int64_t shape[SR_MAXDIM];
    for (int j = 0; j < n; j++) {
        if (check_dtypes("stack", t0, ts[j]))
            return -1;
        if (!sr_same_shape(ts[j], t0))
            return sr_fail("stack: tensor %d %s differs from tensor 0 %s", j, SR_SHAPE(ts[j]), SR_SHAPE(t0));
    }
    /* Stacking is concatenation along a new size-1 dim. */
    for (int i = 0, k = 0; i <= t0->ndim; i++)
        shape[i] = i == d ? n : t0->shape[k++];
    int64_t *dimlen = malloc((size_t)n * sizeof *dimlen);
    if (!dimlen)
        return sr_fail("stack: out of memory");
    for (int j = 0; j < n; j++)
        dimlen[j] = 1;
    int r = cat_core(out, ts, n, d, t0->ndim + 1, shape, dimlen);
    free(dimlen);
    return r;
}

int sr_index_select(sr_tensor *out, const sr_tensor *a, const int64_t *idx, int64_t n)
{
    if (check_input("index_select", a))
        return -1;
    if (a->ndim < 1)
        return sr_fail("index_select: 0-d tensor has no rows");
    if (n < 0)
        return sr_fail("index_select: negative index count %lld", (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= a->shape[0])
            return sr_fail("index_select: index %lld (position %lld) out of range for %s", (long long)idx[i],
                           (long long)i, SR_SHAPE(a));
    int64_t shape[SR_MAXDIM];
    memcpy(shape, a->shape, sizeof shape);
    shape[0] = n;
    sr_tensor tmp = SR_TENSOR_INIT, *dst = target(out, &tmp, a, NULL);
    if (sr_tensor_ensure(dst, a->dtype, a->ndim, shape))
        return -1;
    size_t row = (size_t)sr_rowsize(a) * sr_dtype_size(a->dtype);
    const char *x = sr_data(a);
    char *y = sr_data(dst);
    if (row)
        for (int64_t i = 0; i < n; i++)
            memcpy(y + (size_t)i * row, x + (size_t)idx[i] * row, row);
    finish(out, dst);
    return 0;
}

/* --- checks ------------------------------------------------------------- */

int64_t sr_find_nonfinite(const sr_tensor *t)
{
    if (!t->storage)
        return -1;
    return SR_DISPATCH_RET(t->dtype, find_nonfinite, sr_data(t), sr_numel(t));
}

const char *sr_index_str(const sr_tensor *t, int64_t flat, int base, char *buf, size_t n)
{
    int64_t idx[SR_MAXDIM];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = t->shape[d] ? flat % t->shape[d] : 0;
        flat = t->shape[d] ? flat / t->shape[d] : 0;
    }
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d ? ",%lld" : "%lld", (long long)(idx[d] + base));
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

int sr_check_finite(const sr_tensor *t, const char *name)
{
    int64_t i = sr_find_nonfinite(t);
    if (i < 0)
        return 0;
    char ib[SR_MAXDIM * 24];
    double v = sr_get_flat(t, i);
    return sr_fail("check_finite: %s %s has %s at %s (flat index %lld)", name ? name : "tensor", SR_SHAPE(t),
                   isnan(v) ? "nan" : v > 0 ? "inf" : "-inf", sr_index_str(t, i, 0, ib, sizeof ib), (long long)i);
}


/* --- random fills --------------------------------------------------------- */

void sr_tensor_fill_uniform(sr_tensor *t, sr_rng *r, double lo, double hi)
{
    int64_t n = sr_numel(t);
    for (int64_t i = 0; i < n; i++)
        sr_set_flat(t, i, lo + (hi - lo) * sr_rng_uniform(r));
}

void sr_tensor_fill_hash(sr_tensor *t, uint64_t seed, double offset, double scale)
{
    int64_t n = sr_numel(t);
    for (int64_t i = 0; i < n; i++)
        sr_set_flat(t, i, offset + scale * sr_rng_hash_unit(seed, (uint64_t)i));
}

void sr_tensor_fill_normal(sr_tensor *t, sr_rng *r, double mean, double std)
{
    int64_t n = sr_numel(t);
    for (int64_t i = 0; i < n; i++)
        sr_set_flat(t, i, mean + std * sr_rng_normal(r));
}

#endif
