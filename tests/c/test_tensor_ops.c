/* test_tensor_ops.c - tensor_ops: every op against a plain loop in double, in
 * both dtypes; broadcasting, aliasing (in place / out == input), dtype and
 * shape errors, thread-count independence of reductions, matmul vs the
 * naive triple loop on awkward shapes, and huge shapes failing cleanly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/rng.h"
#include "base/threads.h"
#include "tensor/tensor_ops.h"
#include "check.h"
#include "test.h"

/* A 4 TB request must come back as NULL under AddressSanitizer too (its
 * default is to abort on allocations over its limit), so the out-of-memory
 * path is what gets tested.  Weak, in case another test file sets it. */
__attribute__((weak)) const char *__asan_default_options(void);
__attribute__((weak)) const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static double ref_bin(double x, double y, sr_binop op)
{
    switch (op) {
    case SR_OP_ADD: return x + y;
    case SR_OP_SUB: return x - y;
    case SR_OP_MUL: return x * y;
    case SR_OP_DIV: return x / y;
    case SR_OP_POW: return pow(x, y);
    case SR_OP_MAXIMUM: return x > y ? x : y;
    case SR_OP_MINIMUM: return x < y ? x : y;
    }
    return NAN;
}

static double tol_of(sr_dtype dt) { return dt == SR_F64 ? 1e-14 : 1e-6; }

static int close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(1, fabs(b)); }

TEST(tensor_ops_elementwise_same_shape_and_scalar)
{
    for (int d = 0; d < 2; d++) {
        sr_dtype dt = d ? SR_F64 : SR_F32;
        sr_tensor a = SR_TENSOR_INIT, b = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
        int64_t shape[] = {3, 5, 7};
        CHECK_OK(check_randu_dt(&a, dt, 3, shape, 0.5, 2.0, 1));
        CHECK_OK(check_randu_dt(&b, dt, 3, shape, 0.5, 2.0, 2));
        int64_t n = sr_numel(&a);
        for (int op = SR_OP_ADD; op <= SR_OP_MINIMUM; op++) {
            CHECK_OK(sr_binary(&y, &a, &b, (sr_binop)op));
            CHECK(sr_same_shape(&y, &a) && y.dtype == dt, "%s shape", sr_binop_name(op));
            for (int64_t i = 0; i < n; i++) {
                double want = ref_bin(sr_get_flat(&a, i), sr_get_flat(&b, i), (sr_binop)op);
                CHECK(close_rel(sr_get_flat(&y, i), want, tol_of(dt)), "%s %s [%lld]: %g vs %g", sr_binop_name(op),
                      sr_dtype_name(dt), (long long)i, sr_get_flat(&y, i), want);
            }
            for (int first = 0; first < 2; first++) {
                CHECK_OK(sr_binary_scalar(&y, &a, 1.5, (sr_binop)op, first));
                for (int64_t i = 0; i < n; i++) {
                    double x = sr_get_flat(&a, i);
                    double want = first ? ref_bin(1.5, x, (sr_binop)op) : ref_bin(x, 1.5, (sr_binop)op);
                    CHECK(close_rel(sr_get_flat(&y, i), want, tol_of(dt)), "%s scalar first=%d", sr_binop_name(op),
                          first);
                }
            }
        }
        /* unary ops and pow / clamp */
        for (int op = SR_OP_NEG; op <= SR_OP_SIGN; op++) {
            CHECK_OK(sr_unary(&y, &a, (sr_unop)op));
            for (int64_t i = 0; i < n; i++) {
                double x = sr_get_flat(&a, i), want = 0;
                switch ((sr_unop)op) {
                case SR_OP_NEG: want = -x; break;
                case SR_OP_ABS: want = fabs(x); break;
                case SR_OP_SQRT: want = sqrt(x); break;
                case SR_OP_EXP: want = exp(x); break;
                case SR_OP_LOG: want = log(x); break;
                case SR_OP_SQUARE: want = x * x; break;
                case SR_OP_SIGN: want = x > 0 ? 1 : x < 0 ? -1 : 0; break;
                }
                CHECK(close_rel(sr_get_flat(&y, i), want, tol_of(dt)), "%s [%lld]", sr_unop_name(op), (long long)i);
            }
        }
        CHECK_OK(sr_pow_scalar(&y, &a, 2.5));
        for (int64_t i = 0; i < n; i++)
            CHECK(close_rel(sr_get_flat(&y, i), pow(sr_get_flat(&a, i), 2.5), tol_of(dt)), "pow");
        CHECK_OK(sr_clamp(&y, &a, 0.8, 1.2));
        for (int64_t i = 0; i < n; i++) {
            double x = sr_get_flat(&a, i), want = x < 0.8 ? 0.8 : x > 1.2 ? 1.2 : x;
            CHECK(close_rel(sr_get_flat(&y, i), want, tol_of(dt)), "clamp");
        }
        sr_tensor_free(&a);
        sr_tensor_free(&b);
        sr_tensor_free(&y);
    }
}

TEST(tensor_ops_nan_and_special_values)
{
    sr_tensor a = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&a, SR_F32, 1, (int64_t[]){4}));
    float *p = sr_f32(&a);
    p[0] = 1, p[1] = NAN, p[2] = -3, p[3] = 0;
    CHECK_OK(sr_clamp(&y, &a, -1, 0.5));
    CHECK(sr_f32(&y)[0] == 0.5f && isnan(sr_f32(&y)[1]) && sr_f32(&y)[2] == -1, "clamp keeps NaN");
    CHECK_OK(sr_clamp(&y, &a, -INFINITY, 0));
    CHECK(sr_f32(&y)[0] == 0 && sr_f32(&y)[2] == -3, "one-sided clamp");
    CHECK_ERR(sr_clamp(&y, &a, 1, -1), "clamp: bounds [1, -1] are not ordered");
    double v;
    int64_t idx;
    CHECK_OK(sr_reduce_all(&a, SR_RED_MAX, &v, &idx));
    CHECK(isnan(v) && idx == 1, "max propagates NaN: %g at %lld", v, (long long)idx);
    CHECK_OK(sr_unary(&y, &a, SR_OP_SIGN));
    CHECK(isnan(sr_f32(&y)[1]) && sr_f32(&y)[3] == 0 && sr_f32(&y)[2] == -1, "sign");
    CHECK(sr_find_nonfinite(&a) == 1, "find_nonfinite");
    CHECK_ERR(sr_check_finite(&a, "acts"), "check_finite: acts (4) has nan at [1] (flat index 1)");
    p[1] = INFINITY;
    CHECK_ERR(sr_check_finite(&a, "acts"), "has inf at [1]");
    p[1] = 2;
    CHECK_OK(sr_check_finite(&a, "acts"));
    sr_tensor_free(&a);
    sr_tensor_free(&y);
}

TEST(tensor_ops_broadcast_row_and_channel)
{
    struct {
        int na, nb;
        int64_t sa[4], sb[4], so[4];
        int no;
    } cases[] = {
        {2, 1, {4, 5}, {5}, {4, 5}, 2},                    /* row vector */
        {4, 3, {2, 3, 4, 5}, {3, 1, 1}, {2, 3, 4, 5}, 4},  /* per channel */
        {2, 2, {3, 1}, {1, 4}, {3, 4}, 2},                 /* outer */
        {1, 3, {5}, {2, 3, 5}, {2, 3, 5}, 3},              /* left smaller */
        {2, 2, {3, 4}, {1, 1}, {3, 4}, 2},                 /* one element */
    };
    for (int c = 0; c < 5; c++)
        for (int d = 0; d < 2; d++) {
            sr_dtype dt = d ? SR_F64 : SR_F32;
            sr_tensor a = SR_TENSOR_INIT, b = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
            CHECK_OK(check_randn_dt(&a, dt, cases[c].na, cases[c].sa, 10 + c));
            CHECK_OK(check_randn_dt(&b, dt, cases[c].nb, cases[c].sb, 20 + c));
            CHECK_OK(sr_binary(&y, &a, &b, SR_OP_SUB));
            CHECK(y.ndim == cases[c].no, "case %d ndim %d", c, y.ndim);
            for (int i = 0; i < y.ndim; i++)
                CHECK(y.shape[i] == cases[c].so[i], "case %d shape %s", c, SR_SHAPE(&y));
            /* Reference: decompose each out index and pick operands' elements. */
            int64_t n = sr_numel(&y);
            for (int64_t f = 0; f < n; f++) {
                int64_t rem = f, ia = 0, ib = 0, ma = 1, mb = 1;
                for (int k = y.ndim - 1; k >= 0; k--) {
                    int64_t ix = rem % y.shape[k];
                    rem /= y.shape[k];
                    int ka = a.ndim - y.ndim + k, kb = b.ndim - y.ndim + k;
                    if (ka >= 0) {
                        ia += (a.shape[ka] == 1 ? 0 : ix) * ma;
                        ma *= a.shape[ka];
                    }
                    if (kb >= 0) {
                        ib += (b.shape[kb] == 1 ? 0 : ix) * mb;
                        mb *= b.shape[kb];
                    }
                }
                double want = sr_get_flat(&a, ia) - sr_get_flat(&b, ib);
                CHECK(close_rel(sr_get_flat(&y, f), want, tol_of(dt)), "case %d [%lld]: %g vs %g", c, (long long)f,
                      sr_get_flat(&y, f), want);
            }
            sr_tensor_free(&a);
            sr_tensor_free(&b);
            sr_tensor_free(&y);
        }
}

TEST(tensor_ops_dtype_and_shape_errors)
{
    sr_tensor a = SR_TENSOR_INIT, b = SR_TENSOR_INIT, c = SR_TENSOR_INIT, y = SR_TENSOR_INIT, e = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&a, SR_F32, 2, (int64_t[]){2, 3}));
    CHECK_OK(sr_tensor_zeros(&b, SR_F64, 2, (int64_t[]){2, 3}));
    CHECK_OK(sr_tensor_zeros(&c, SR_F32, 1, (int64_t[]){4}));
    CHECK_ERR(sr_add(&y, &a, &b), "add: float32 and float64 tensors; convert with :double()");
    CHECK_ERR(sr_mul(&y, &b, &a), "mul: float64 and float32 tensors; convert with :double()");
    CHECK_ERR(sr_sub(&y, &a, &c), "sub: shapes (2,3) and (4) do not match (nor broadcast)");
    CHECK_ERR(sr_add(&y, &a, &e), "add: input is an empty (unallocated) tensor");
    double v;
    CHECK_ERR(sr_dot(&a, &b, &v), "dot: float32 and float64");
    CHECK_ERR(sr_dot(&a, &c, &v), "dot: shapes (2,3) and (4) differ");
    CHECK_ERR(sr_matmul(&y, &a, &b), "matmul: float32 and float64");
    CHECK_ERR(sr_reduce_dim(&y, NULL, &a, SR_RED_SUM, 2, 0), "sum: dim 2 out of range for (2,3) (2 dims)");
    CHECK_ERR(sr_reduce_dim(&y, NULL, &a, SR_RED_SUM, -3, 0), "sum: dim -3 out of range");
    CHECK_ERR(sr_transpose(&y, &c), "transpose: input (4) must be 2-D");
    const sr_tensor *ab[] = {&a, &b}, *ac[] = {&a, &c};
    CHECK_ERR(sr_cat(&y, ab, 2, 0), "cat: float32 and float64");
    CHECK_ERR(sr_cat(&y, ac, 2, 0), "cat: tensor 1 (4) does not match tensor 0 (2,3) outside dim 0");
    CHECK_ERR(sr_stack(&y, ac, 2, 0), "stack: tensor 1 (4) differs from tensor 0 (2,3)");
    CHECK_ERR(sr_cat(&y, ab, 0, 0), "cat: no tensors");
    CHECK_ERR(sr_stack(&y, ab, 1, 3), "stack: dim 3 out of range for (2,3)");
    CHECK_ERR(sr_index_select(&y, &a, (int64_t[]){0, 2}, 2), "index_select: index 2 (position 1) out of range for (2,3)");
    CHECK_ERR(sr_index_select(&y, &a, (int64_t[]){-1}, 1), "index_select: index -1");
    /* Nothing was written into y by any failed call. */
    CHECK(y.storage == NULL, "failed ops left a result behind");
    sr_tensor_free(&a);
    sr_tensor_free(&b);
    sr_tensor_free(&c);
}

/* Naive reductions over dim d of a (outer, n, inner) view. */
static double ref_reduce(const sr_tensor *a, int d, int64_t o, int64_t j, sr_reduce_op op, int64_t *arg)
{
    int64_t outer = 1, inner = 1, n = a->shape[d];
    for (int i = 0; i < d; i++)
        outer *= a->shape[i];
    for (int i = d + 1; i < a->ndim; i++)
        inner *= a->shape[i];
    (void)outer;
    double s = 0, best = 0;
    for (int64_t k = 0; k < n; k++) {
        double x = sr_get_flat(a, (o * n + k) * inner + j);
        if (op == SR_RED_NORM)
            s += x * x;
        else
            s += x;
        if (k == 0 || (op == SR_RED_MAX ? x > best : x < best)) {
            best = x;
            *arg = k;
        }
    }
    switch (op) {
    case SR_RED_SUM: return s;
    case SR_RED_MEAN: return s / (double)n;
    case SR_RED_NORM: return sqrt(s);
    default: return best;
    }
}

TEST(tensor_ops_reductions_along_each_dim)
{
    /* inner = 1, small inner, and inner > one column block (256) */
    int64_t shapes[][3] = {{3, 4, 5}, {2, 300, 3}, {1, 7, 301}};
    for (int s = 0; s < 3; s++)
        for (int dd = 0; dd < 2; dd++) {
            sr_dtype dt = dd ? SR_F64 : SR_F32;
            sr_tensor a = SR_TENSOR_INIT, y = SR_TENSOR_INIT, ix = SR_TENSOR_INIT;
            CHECK_OK(check_randn_dt(&a, dt, 3, shapes[s], 30 + s));
            for (int op = SR_RED_SUM; op <= SR_RED_MIN; op++)
                for (int d = 0; d < 3; d++)
                    for (int keep = 0; keep < 2; keep++) {
                        int is_arg = op >= SR_RED_MAX;
                        CHECK_OK(sr_reduce_dim(&y, is_arg ? &ix : NULL, &a, (sr_reduce_op)op, d - 3 * keep, keep));
                        CHECK(y.ndim == (keep ? 3 : 2), "ndim");
                        CHECK(!keep || y.shape[d] == 1, "keepdim shape %s", SR_SHAPE(&y));
                        int64_t outer = 1, inner = 1;
                        for (int i = 0; i < d; i++)
                            outer *= a.shape[i];
                        for (int i = d + 1; i < 3; i++)
                            inner *= a.shape[i];
                        for (int64_t o = 0; o < outer; o++)
                            for (int64_t j = 0; j < inner; j++) {
                                int64_t arg = -1;
                                double want = ref_reduce(&a, d, o, j, (sr_reduce_op)op, &arg);
                                double got = sr_get_flat(&y, o * inner + j);
                                CHECK(close_rel(got, want, dt == SR_F64 ? 1e-12 : 1e-5), "%s dim %d shape %d: %g vs %g",
                                      sr_reduce_name(op), d, s, got, want);
                                if (is_arg)
                                    CHECK(sr_get_flat(&ix, o * inner + j) == (double)arg, "%s index",
                                          sr_reduce_name(op));
                            }
                    }
            /* whole tensor */
            double v, want = 0;
            int64_t at = -1, n = sr_numel(&a);
            for (int64_t i = 0; i < n; i++)
                want += sr_get_flat(&a, i);
            CHECK_OK(sr_reduce_all(&a, SR_RED_SUM, &v, NULL));
            CHECK(close_rel(v, want, 1e-12), "sum all %g vs %g", v, want);
            CHECK_OK(sr_reduce_all(&a, SR_RED_MEAN, &v, NULL));
            CHECK(close_rel(v, want / (double)n, 1e-12), "mean all");
            CHECK_OK(sr_reduce_all(&a, SR_RED_MIN, &v, &at));
            CHECK(v == sr_get_flat(&a, at), "min value at its index");
            for (int64_t i = 0; i < n; i++)
                CHECK(sr_get_flat(&a, i) >= v, "min is the min");
            sr_tensor_free(&a);
            sr_tensor_free(&y);
            sr_tensor_free(&ix);
        }
}

TEST(tensor_ops_reductions_empty_and_aliasing)
{
    sr_tensor a = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
    double v;
    CHECK_OK(sr_tensor_zeros(&a, SR_F32, 2, (int64_t[]){0, 3}));
    CHECK_OK(sr_reduce_all(&a, SR_RED_SUM, &v, NULL));
    CHECK(v == 0, "empty sum");
    CHECK_OK(sr_reduce_all(&a, SR_RED_MEAN, &v, NULL));
    CHECK(isnan(v), "empty mean is NaN");
    CHECK_ERR(sr_reduce_all(&a, SR_RED_MAX, &v, NULL), "max: empty tensor (0,3) has no max");
    CHECK_ERR(sr_reduce_dim(&y, NULL, &a, SR_RED_MAX, 0, 0), "max: dim 0 of (0,3) is empty");
    CHECK_OK(sr_reduce_dim(&y, NULL, &a, SR_RED_SUM, 0, 0));
    CHECK(y.ndim == 1 && y.shape[0] == 3 && sr_get_flat(&y, 0) == 0, "sum over an empty dim is 0");
    CHECK_OK(sr_reduce_dim(&y, NULL, &a, SR_RED_SUM, 1, 0));
    CHECK(y.ndim == 1 && y.shape[0] == 0, "sum over dim 1 of (0,3) is (0)");
    sr_tensor_free(&a);
    /* out == input: the result replaces the input only after it is read */
    CHECK_OK(check_randn_dt(&a, SR_F64, 2, (int64_t[]){4, 6}, 5));
    sr_tensor keep = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_copy(&keep, &a));
    CHECK_OK(sr_reduce_dim(&a, NULL, &a, SR_RED_SUM, 1, 0));
    CHECK(a.ndim == 1 && a.shape[0] == 4, "aliased reduce shape %s", SR_SHAPE(&a));
    double s0 = 0;
    for (int j = 0; j < 6; j++)
        s0 += sr_get_flat(&keep, j);
    CHECK(close_rel(sr_get_flat(&a, 0), s0, 1e-14), "aliased reduce value");
    sr_tensor_free(&a);
    sr_tensor_free(&keep);
    sr_tensor_free(&y);
}

TEST(tensor_ops_reductions_do_not_depend_on_threads)
{
    sr_tensor a = SR_TENSOR_INIT, y1 = SR_TENSOR_INIT, y2 = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&a, SR_F32, 2, (int64_t[]){1000, 1003}, 9));
    int old = sr_threads_get();
    double v1, v2, d1, d2;
    sr_threads_set(1);
    CHECK_OK(sr_reduce_all(&a, SR_RED_SUM, &v1, NULL));
    CHECK_OK(sr_dot(&a, &a, &d1));
    CHECK_OK(sr_reduce_dim(&y1, NULL, &a, SR_RED_MEAN, 0, 0));
    sr_threads_set(2);
    CHECK_OK(sr_reduce_all(&a, SR_RED_SUM, &v2, NULL));
    CHECK_OK(sr_dot(&a, &a, &d2));
    CHECK_OK(sr_reduce_dim(&y2, NULL, &a, SR_RED_MEAN, 0, 0));
    sr_threads_set(old);
    CHECK(v1 == v2, "sum differs across thread counts: %.17g vs %.17g", v1, v2);
    CHECK(d1 == d2, "dot differs across thread counts");
    CHECK(memcmp(sr_data(&y1), sr_data(&y2), 1003 * sizeof(float)) == 0, "mean(dim) differs");
    /* and the double accumulation is accurate: compare with a Kahan sum */
    double s = 0, comp = 0;
    for (int64_t i = 0; i < sr_numel(&a); i++) {
        double yv = sr_get_flat(&a, i) - comp, t = s + yv;
        comp = (t - s) - yv;
        s = t;
    }
    CHECK(fabs(v1 - s) < 1e-9 * fmax(1, fabs(s)), "sum %g vs Kahan %g", v1, s);
    CHECK_OK(sr_reduce_all(&a, SR_RED_NORM, &v1, NULL));
    CHECK(close_rel(v1 * v1, d1, 1e-12), "norm^2 == <a,a>");
    /* argmax across pieces: plant the max late in the tensor */
    int64_t at;
    sr_f32(&a)[777777] = 100;
    CHECK_OK(sr_reduce_all(&a, SR_RED_MAX, &v1, &at));
    CHECK(v1 == 100 && at == 777777, "max %g at %lld", v1, (long long)at);
    sr_f32(&a)[888888] = -100;
    CHECK_OK(sr_reduce_all(&a, SR_RED_MIN, &v1, &at));
    CHECK(v1 == -100 && at == 888888, "min %g at %lld", v1, (long long)at);
    sr_tensor_free(&a);
    /* more than 256 pieces' worth (2^23 elements): pieces grow instead */
    CHECK_OK(sr_tensor_alloc(&a, SR_F32, 1, (int64_t[]){9000001}));
    sr_tensor_fill(&a, 1);
    CHECK_OK(sr_reduce_all(&a, SR_RED_SUM, &v1, NULL));
    CHECK(v1 == 9000001, "sum of 9000001 ones = %.17g", v1);
    sr_tensor_free(&a);
    sr_tensor_free(&y1);
    sr_tensor_free(&y2);
}

TEST(tensor_ops_in_place_and_aliasing)
{
    sr_tensor a = SR_TENSOR_INIT, b = SR_TENSOR_INIT, view = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&a, SR_F32, 2, (int64_t[]){3, 4}, 1));
    CHECK_OK(check_randn_dt(&b, SR_F32, 2, (int64_t[]){3, 4}, 2));
    sr_tensor_share(&view, &a); /* another reference: in place must keep sharing */
    float a0 = sr_f32(&a)[5], b0 = sr_f32(&b)[5];
    void *data = sr_data(&a);
    CHECK_OK(sr_add(&a, &a, &b));
    CHECK(sr_data(&a) == data && sr_f32(&view)[5] == a0 + b0, "in-place add is visible through a view");
    CHECK_OK(sr_binary_scalar(&a, &a, 2, SR_OP_MUL, 0));
    CHECK(sr_f32(&view)[5] == 2 * (a0 + b0), "in-place scale");
    CHECK_OK(sr_mul(&a, &a, &a));
    CHECK(sr_f32(&view)[5] == 4 * (a0 + b0) * (a0 + b0), "a *= a");
    /* out = a view of an input: built in a temporary, the input intact */
    sr_tensor v2 = SR_TENSOR_INIT;
    sr_tensor_share(&v2, &b);
    float before = sr_f32(&b)[0];
    CHECK_OK(sr_transpose(&v2, &b));
    CHECK(sr_f32(&b)[0] == before && v2.shape[0] == 4 && v2.storage != b.storage, "transpose into a view of b");
    /* a broadcast result into its own operand: a (3,4) += row (4) */
    sr_tensor row = SR_TENSOR_INIT, rowv = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_narrow(&rowv, &a, 0, 1));
    CHECK_OK(sr_tensor_reshape(&row, &rowv, 1, (int64_t[]){4}));
    sr_tensor expect = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_copy(&expect, &a));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            sr_f32(&expect)[i * 4 + j] += sr_f32(&row)[j];
    CHECK_OK(sr_add(&a, &a, &row)); /* row overlaps a's first row */
    CHECK(check_rel_diff(&a, &expect) == 0, "overlapping broadcast in place: %g", check_rel_diff(&a, &expect));
    /* a broadcast operand apart from out: truly in place, seen by views */
    sr_tensor bias = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&bias, SR_F32, 1, (int64_t[]){4}, 6));
    float v5 = sr_f32(&a)[5];
    data = sr_data(&a);
    sr_tensor_free(&view);
    sr_tensor_share(&view, &a);
    CHECK_OK(sr_add(&a, &a, &bias));
    CHECK(sr_data(&a) == data && sr_f32(&view)[5] == v5 + sr_f32(&bias)[1], "broadcast add in place");
    sr_tensor_free(&bias);
    /* same-shape operands overlapping at different offsets: lo = rows 0..2,
     * hi = rows 1..3 of one (4,4) storage; hi += lo must read lo's old rows */
    sr_tensor m = SR_TENSOR_INIT, lo = SR_TENSOR_INIT, hi = SR_TENSOR_INIT, want = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&m, SR_F64, 2, (int64_t[]){4, 4}, 3));
    CHECK_OK(sr_tensor_narrow(&lo, &m, 0, 3));
    CHECK_OK(sr_tensor_narrow(&hi, &m, 1, 3));
    CHECK_OK(sr_tensor_copy(&want, &hi));
    for (int i = 0; i < 12; i++)
        sr_f64(&want)[i] += sr_f64(&lo)[i];
    CHECK_OK(sr_add(&hi, &hi, &lo));
    CHECK(check_rel_diff(&hi, &want) == 0, "overlapping same-shape add: %g", check_rel_diff(&hi, &want));
    sr_tensor *all[] = {&a, &b, &view, &y, &v2, &row, &rowv, &expect, &m, &lo, &hi, &want};
    for (int i = 0; i < 12; i++)
        sr_tensor_free(all[i]);
}

TEST(tensor_ops_matmul_matches_naive_awkward_shapes)
{
    /* (M,K,N): vectors, odd sizes, sizes around BLAS kernel blocks */
    int64_t mkn[][3] = {{1, 1, 1}, {1, 17, 1}, {1, 9, 33}, {33, 9, 1}, {7, 13, 5}, {64, 1, 3}, {3, 65, 129}};
    for (int c = 0; c < 7; c++)
        for (int d = 0; d < 2; d++) {
            sr_dtype dt = d ? SR_F64 : SR_F32;
            double tol = d ? 1e-12 : 1e-5;
            int64_t M = mkn[c][0], K = mkn[c][1], N = mkn[c][2];
            sr_tensor a = SR_TENSOR_INIT, b = SR_TENSOR_INIT, y1 = SR_TENSOR_INIT, y2 = SR_TENSOR_INIT;
            CHECK_OK(check_randn_dt(&a, dt, 2, (int64_t[]){M, K}, 40 + c));
            CHECK_OK(check_randn_dt(&b, dt, 2, (int64_t[]){K, N}, 50 + c));
            CHECK_OK(sr_matmul(&y1, &a, &b));
            CHECK_OK(sr_matmul_naive(&y2, &a, &b));
            CHECK(y1.ndim == 2 && y1.shape[0] == M && y1.shape[1] == N, "shape %s", SR_SHAPE(&y1));
            /* the naive one is itself checked against a hand loop at one spot */
            double s = 0;
            for (int64_t p = 0; p < K; p++)
                s += sr_get_flat(&a, (M - 1) * K + p) * sr_get_flat(&b, p * N + N - 1);
            CHECK(close_rel(sr_get_flat(&y2, M * N - 1), s, tol), "naive corner");
            double e = check_rel_diff(&y1, &y2);
            CHECK(e < tol, "(%lld,%lld,%lld) %s rel %g", (long long)M, (long long)K, (long long)N,
                  sr_dtype_name(dt), e);
            /* batched: (B,M,K) x (B,K,N) and (B,M,K) x (K,N) */
            sr_tensor a3 = SR_TENSOR_INIT, b3 = SR_TENSOR_INIT;
            CHECK_OK(check_randn_dt(&a3, dt, 3, (int64_t[]){3, M, K}, 60 + c));
            CHECK_OK(check_randn_dt(&b3, dt, 3, (int64_t[]){3, K, N}, 70 + c));
            CHECK_OK(sr_matmul(&y1, &a3, &b3));
            CHECK_OK(sr_matmul_naive(&y2, &a3, &b3));
            CHECK(y1.ndim == 3 && y1.shape[0] == 3 && y1.shape[2] == N, "batched shape %s", SR_SHAPE(&y1));
            CHECK(check_rel_diff(&y1, &y2) < tol, "batched rel %g", check_rel_diff(&y1, &y2));
            /* batch entry 1 equals the 2-D product of the slices */
            sr_tensor as = SR_TENSOR_INIT, bs = SR_TENSOR_INIT, a2 = SR_TENSOR_INIT, b2 = SR_TENSOR_INIT,
                      y3 = SR_TENSOR_INIT;
            CHECK_OK(sr_tensor_narrow(&as, &a3, 1, 1));
            CHECK_OK(sr_tensor_reshape(&a2, &as, 2, (int64_t[]){M, K}));
            CHECK_OK(sr_tensor_narrow(&bs, &b3, 1, 1));
            CHECK_OK(sr_tensor_reshape(&b2, &bs, 2, (int64_t[]){K, N}));
            CHECK_OK(sr_matmul_naive(&y3, &a2, &b2));
            for (int64_t i = 0; i < M * N; i++)
                CHECK(close_rel(sr_get_flat(&y2, M * N + i), sr_get_flat(&y3, i), tol), "batch slice");
            CHECK_OK(sr_matmul(&y1, &a3, &b));
            CHECK_OK(sr_matmul_naive(&y2, &a3, &b));
            CHECK(y1.ndim == 3 && check_rel_diff(&y1, &y2) < tol, "3-D x 2-D");
            sr_tensor *all[] = {&a, &b, &y1, &y2, &a3, &b3, &as, &bs, &a2, &b2, &y3};
            for (int i = 0; i < 11; i++)
                sr_tensor_free(all[i]);
        }
}

TEST(tensor_ops_matmul_vectors_empty_and_errors)
{
    sr_tensor a = SR_TENSOR_INIT, v = SR_TENSOR_INIT, y = SR_TENSOR_INIT, z = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&a, SR_F64, 2, (int64_t[]){5, 3}, 1));
    CHECK_OK(check_randn_dt(&v, SR_F64, 1, (int64_t[]){3}, 2));
    CHECK_OK(sr_matmul(&y, &a, &v));
    CHECK(y.ndim == 1 && y.shape[0] == 5, "(5,3)x(3) -> %s", SR_SHAPE(&y));
    for (int i = 0; i < 5; i++) {
        double s = 0;
        for (int k = 0; k < 3; k++)
            s += sr_f64(&a)[i * 3 + k] * sr_f64(&v)[k];
        CHECK(close_rel(sr_f64(&y)[i], s, 1e-14), "matvec");
    }
    sr_tensor w = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&w, SR_F64, 1, (int64_t[]){5}, 3));
    CHECK_OK(sr_matmul(&y, &w, &a));
    CHECK(y.ndim == 1 && y.shape[0] == 3, "(5)x(5,3) -> %s", SR_SHAPE(&y));
    CHECK_ERR(sr_matmul(&y, &v, &v), "matmul: (3) and (3) are both 1-D; use dot");
    CHECK_ERR(sr_matmul(&y, &a, &a), "matmul: inner dimensions differ in (5,3) x (5,3) (3 vs 5)");
    sr_tensor e0 = SR_TENSOR_INIT, e1 = SR_TENSOR_INIT, b4 = SR_TENSOR_INIT;
    /* K = 0: the product is zeros (BLAS would reject lda = 0) */
    CHECK_OK(sr_tensor_zeros(&e0, SR_F64, 2, (int64_t[]){2, 0}));
    CHECK_OK(sr_tensor_zeros(&e1, SR_F64, 2, (int64_t[]){0, 4}));
    CHECK_OK(sr_tensor_alloc(&z, SR_F64, 2, (int64_t[]){2, 4}));
    sr_tensor_fill(&z, 7);
    CHECK_OK(sr_matmul(&z, &e0, &e1));
    CHECK(z.shape[0] == 2 && z.shape[1] == 4 && sr_f64(&z)[7] == 0, "K=0 gives zeros");
    CHECK_ERR(sr_matmul(&y, &e1, &a), "matmul: inner dimensions differ in (0,4) x (5,3)");
    CHECK_OK(sr_tensor_zeros(&b4, SR_F64, 4, (int64_t[]){1, 1, 5, 3}));
    CHECK_ERR(sr_matmul(&y, &b4, &a), "matmul: (1,1,5,3) x (5,3): expected");
    sr_tensor x3 = SR_TENSOR_INIT, y3 = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&x3, SR_F64, 3, (int64_t[]){2, 5, 3}));
    CHECK_OK(sr_tensor_zeros(&y3, SR_F64, 3, (int64_t[]){3, 3, 4}));
    CHECK_ERR(sr_matmul(&y, &x3, &y3), "matmul: batch sizes differ in (2,5,3) x (3,3,4)");
    /* out aliases an input */
    sr_tensor sq = SR_TENSOR_INIT, ref = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&sq, SR_F64, 2, (int64_t[]){4, 4}, 8));
    CHECK_OK(sr_matmul_naive(&ref, &sq, &sq));
    CHECK_OK(sr_matmul(&sq, &sq, &sq));
    CHECK(check_rel_diff(&sq, &ref) < 1e-13, "a = a·a");
    sr_tensor *all[] = {&a, &v, &y, &z, &w, &e0, &e1, &b4, &x3, &y3, &sq, &ref};
    for (int i = 0; i < 12; i++)
        sr_tensor_free(all[i]);
}

TEST(tensor_ops_transpose_cat_stack_index_select)
{
    sr_tensor a = SR_TENSOR_INIT, b = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&a, SR_F32, 2, (int64_t[]){37, 70}, 1));
    CHECK_OK(sr_transpose(&y, &a));
    CHECK(y.shape[0] == 70 && y.shape[1] == 37, "transpose shape");
    for (int i = 0; i < 37; i++)
        for (int j = 0; j < 70; j++)
            CHECK(sr_f32(&y)[j * 37 + i] == sr_f32(&a)[i * 70 + j], "transpose [%d,%d]", i, j);
    sr_tensor_free(&a);
    /* cat along each dim of (2,3,4) with (2,3,4)-like pieces of varying size */
    for (int d = 0; d < 3; d++) {
        int64_t sa[3] = {2, 3, 4}, sb[3] = {2, 3, 4};
        sb[d] = 5;
        CHECK_OK(check_randn_dt(&a, SR_F64, 3, sa, 2));
        CHECK_OK(check_randn_dt(&b, SR_F64, 3, sb, 3));
        const sr_tensor *ts[] = {&a, &b, &a};
        CHECK_OK(sr_cat(&y, ts, 3, d));
        CHECK(y.shape[d] == 2 * sa[d] + 5, "cat dim %d shape %s", d, SR_SHAPE(&y));
        for (int i = 0; i < y.shape[0]; i++)
            for (int j = 0; j < y.shape[1]; j++)
                for (int k = 0; k < y.shape[2]; k++) {
                    int64_t ix[3] = {i, j, k};
                    int64_t p = ix[d];
                    const sr_tensor *src = p < sa[d] ? &a : p < sa[d] + 5 ? &b : &a;
                    ix[d] = p < sa[d] ? p : p < sa[d] + 5 ? p - sa[d] : p - sa[d] - 5;
                    double want = sr_get_flat(src, (ix[0] * src->shape[1] + ix[1]) * src->shape[2] + ix[2]);
                    CHECK(sr_get_flat(&y, (i * y.shape[1] + j) * y.shape[2] + k) == want, "cat dim %d value", d);
                }
        sr_tensor_free(&a);
        sr_tensor_free(&b);
    }
    /* stack along each of 0..2 of two (3,4) */
    CHECK_OK(check_randn_dt(&a, SR_F32, 2, (int64_t[]){3, 4}, 4));
    CHECK_OK(check_randn_dt(&b, SR_F32, 2, (int64_t[]){3, 4}, 5));
    const sr_tensor *ab[] = {&a, &b};
    for (int d = 0; d < 3; d++) {
        CHECK_OK(sr_stack(&y, ab, 2, d));
        CHECK(y.ndim == 3 && y.shape[d] == 2, "stack dim %d shape %s", d, SR_SHAPE(&y));
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 4; j++) {
                    int64_t ix[3], src[2] = {i, j};
                    for (int q = 0, r = 0; q < 3; q++)
                        ix[q] = q == d ? s : src[r++];
                    double got = sr_get_flat(&y, (ix[0] * y.shape[1] + ix[1]) * y.shape[2] + ix[2]);
                    CHECK(got == sr_get_flat(ab[s], i * 4 + j), "stack dim %d", d);
                }
    }
    CHECK_OK(sr_stack(&y, ab, 2, -1));
    CHECK(y.shape[2] == 2, "stack at -1 appends a dim");
    /* index_select with repeats */
    int64_t idx[] = {2, 0, 2};
    CHECK_OK(sr_index_select(&y, &a, idx, 3));
    CHECK(y.shape[0] == 3 && y.shape[1] == 4, "index_select shape");
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < 4; j++)
            CHECK(sr_f32(&y)[r * 4 + j] == sr_f32(&a)[idx[r] * 4 + j], "index_select row %d", r);
    CHECK_OK(sr_index_select(&y, &a, idx, 0));
    CHECK(y.shape[0] == 0 && y.shape[1] == 4, "no rows");
    /* cat into an input */
    const sr_tensor *aa[] = {&a, &a};
    sr_tensor saved = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_copy(&saved, &a));
    CHECK_OK(sr_cat(&a, aa, 2, 0));
    CHECK(a.shape[0] == 6, "a = cat{a, a} shape");
    for (int i = 0; i < 24; i++)
        CHECK(sr_f32(&a)[i] == sr_f32(&saved)[i % 12], "a = cat{a, a} [%d]", i);
    sr_tensor_free(&saved);
    sr_tensor_free(&a);
    sr_tensor_free(&b);
    sr_tensor_free(&y);
}

TEST(tensor_ops_transpose_dims_and_narrow_copy)
{
    sr_tensor a = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
    int64_t s[4] = {2, 3, 4, 5};
    CHECK_OK(check_randn_dt(&a, SR_F64, 4, s, 1));
    for (int d0 = 0; d0 < 4; d0++)
        for (int d1 = 0; d1 < 4; d1++) {
            CHECK_OK(sr_transpose_dims(&y, &a, d0, d1));
            for (int64_t f = 0; f < 120; f++) {
                int64_t ix[4], rem = f;
                for (int k = 3; k >= 0; k--) {
                    ix[k] = rem % y.shape[k];
                    rem /= y.shape[k];
                }
                int64_t t = ix[d0];
                ix[d0] = ix[d1];
                ix[d1] = t;
                int64_t src = ((ix[0] * 3 + ix[1]) * 4 + ix[2]) * 5 + ix[3];
                CHECK(sr_f64(&y)[f] == sr_f64(&a)[src], "transpose %d,%d at %lld", d0, d1, (long long)f);
            }
        }
    CHECK_ERR(sr_transpose_dims(&y, &a, 0, 4), "transpose: dim 4 out of range for (2,3,4,5)");
    for (int d = 0; d < 4; d++) {
        CHECK_OK(sr_narrow_copy(&y, &a, d, 1, s[d] - 1));
        CHECK(y.shape[d] == s[d] - 1 && y.storage != a.storage, "narrow_copy shape");
        for (int64_t f = 0; f < sr_numel(&y); f++) {
            int64_t ix[4], rem = f;
            for (int k = 3; k >= 0; k--) {
                ix[k] = rem % y.shape[k];
                rem /= y.shape[k];
            }
            ix[d] += 1;
            CHECK(sr_f64(&y)[f] == sr_f64(&a)[((ix[0] * 3 + ix[1]) * 4 + ix[2]) * 5 + ix[3]], "narrow dim %d", d);
        }
    }
    CHECK_ERR(sr_narrow_copy(&y, &a, 2, 3, 2), "narrow: [3, 5) out of range for dim 2 of (2,3,4,5)");
    sr_tensor_free(&a);
    sr_tensor_free(&y);
}

TEST(tensor_ops_huge_shapes_fail_cleanly)
{
    sr_tensor t = SR_TENSOR_INIT, a = SR_TENSOR_INIT, b = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
    CHECK_ERR(sr_tensor_zeros(&t, SR_F32, 1, (int64_t[]){(int64_t)1e12}), "out of memory");
    CHECK(t.storage == NULL, "no storage after a failed allocation");
    CHECK_ERR(sr_tensor_alloc(&t, SR_F64, 2, (int64_t[]){(int64_t)1e6, (int64_t)1e6}), "out of memory");
    CHECK_ERR(sr_tensor_alloc(&t, SR_F32, 3, (int64_t[]){(int64_t)1 << 40, 1 << 20, 1 << 20}), "too large");
    /* An op whose *result* is huge: (1e6,1) x (1,1e6) -> 1e12 elements */
    CHECK_OK(sr_tensor_zeros(&a, SR_F32, 2, (int64_t[]){1000000, 1}));
    CHECK_OK(sr_tensor_zeros(&b, SR_F32, 2, (int64_t[]){1, 1000000}));
    CHECK_ERR(sr_matmul(&y, &a, &b), "out of memory");
    CHECK_ERR(sr_add(&y, &a, &b), "out of memory"); /* broadcast to (1e6,1e6) */
    CHECK(y.storage == NULL, "nothing left behind");
    sr_tensor_free(&a);
    sr_tensor_free(&b);
}

TEST(tensor_ops_index_str)
{
    sr_tensor t = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&t, SR_F32, 3, (int64_t[]){2, 3, 4}));
    char buf[64];
    CHECK(strcmp(sr_index_str(&t, 23, 0, buf, sizeof buf), "[1,2,3]") == 0, "got %s", buf);
    CHECK(strcmp(sr_index_str(&t, 5, 1, buf, sizeof buf), "[1,2,2]") == 0, "got %s", buf);
    sr_tensor_free(&t);
}

/* Buffers of a batch's activations (8 MB and up) start on a 2 MB boundary:
 * madvise(MADV_HUGEPAGE) needs an aligned range, and with the 64-byte
 * alignment of small buffers it failed, leaving them on 4 KB pages. */
TEST(tensor_large_buffers_on_huge_page_boundaries)
{
    sr_tensor big = SR_TENSOR_INIT, small = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&big, SR_F32, 2, (int64_t[]){3, 1 << 21})); /* 24 MB */
    CHECK_OK(sr_tensor_alloc(&small, SR_F32, 1, (int64_t[]){1000}));
    uintptr_t b = (uintptr_t)sr_data(&big), s = (uintptr_t)sr_data(&small);
    sr_f32(&big)[3 * (1 << 21) - 1] = 1; /* the whole range is usable */
    sr_tensor_free(&big);
    sr_tensor_free(&small);
    CHECK(b % ((uintptr_t)2 << 20) == 0, "24 MB buffer at %#lx, not 2 MB aligned", (unsigned long)b);
    CHECK(s % 64 == 0, "small buffer at %#lx, not 64-byte aligned", (unsigned long)s);
}

TEST(tensor_ops_stack_jvp_layout_and_errors)
{
    /* 2 inputs of (1,3), 2 tangents each, input-major: rows x0 x1 v00 v01 v10 v11 */
    sr_tensor x = SR_TENSOR_INIT, v = SR_TENSOR_INIT, out = SR_TENSOR_INIT, bad = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&x, SR_F64, 3, (int64_t[]){2, 1, 3}, 1));
    CHECK_OK(check_randn_dt(&v, SR_F64, 3, (int64_t[]){4, 1, 3}, 2));
    CHECK_OK(sr_tensor_stack_jvp(&out, &x, &v));
    CHECK(out.ndim == 3 && out.shape[0] == 6 && out.shape[1] == 1 && out.shape[2] == 3, "shape %s", SR_SHAPE(&out));
    for (int64_t e = 0; e < 6; e++)
        CHECK(sr_f64(&out)[e] == sr_f64(&x)[e], "primal element %lld", (long long)e);
    for (int64_t e = 0; e < 12; e++)
        CHECK(sr_f64(&out)[6 + e] == sr_f64(&v)[e], "tangent element %lld", (long long)e);
    CHECK_OK(check_randn_dt(&bad, SR_F64, 3, (int64_t[]){3, 1, 3}, 3)); /* 3 rows for 2 inputs */
    CHECK_ERR(sr_tensor_stack_jvp(&out, &x, &bad), "jvp: tangents (3,1,3) must be (N*k, ...) for input (2,1,3)");
    CHECK_OK(check_randn_dt(&bad, SR_F64, 3, (int64_t[]){2, 3, 1}, 3));
    CHECK_ERR(sr_tensor_stack_jvp(&out, &x, &bad), "must be (N*k, ...)");
    CHECK_OK(check_randn_dt(&bad, SR_F32, 3, (int64_t[]){2, 1, 3}, 3));
    CHECK_ERR(sr_tensor_stack_jvp(&out, &x, &bad), "jvp: tangents are float32, input float64");
    sr_tensor_free(&x);
    sr_tensor_free(&v);
    sr_tensor_free(&out);
    sr_tensor_free(&bad);
}

/* Shapes whose products wrap: every one an error naming the op, never a
 * view that reaches outside its storage (the view of a 0-element tensor as
 * (2^62, 4) once passed, its product wrapping to 0, and read the heap). */
TEST(tensor_views_reject_wrapping_shapes)
{
    sr_tensor e = SR_TENSOR_INIT, v = SR_TENSOR_INIT, t = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&e, SR_F32, 1, (int64_t[]){0}));
    CHECK_ERR(sr_tensor_reshape(&v, &e, 2, (int64_t[]){(int64_t)1 << 62, 4}), "reshape: 4611686018427387904 x 4 is too large");
    CHECK_ERR(sr_tensor_reshape(&v, &e, 2, (int64_t[]){(int64_t)1 << 40, 1 << 24}), "too large");
    CHECK_ERR(sr_tensor_reshape(&v, &e, 3, (int64_t[]){0, (int64_t)1 << 32, (int64_t)1 << 32}), "too large");
    CHECK_ERR(sr_tensor_reshape(&v, &e, 2, (int64_t[]){-1, (int64_t)1 << 62}), "too large");
    CHECK_ERR(sr_tensor_reshape(&v, &e, 2, (int64_t[]){-2, 0}), "negative dimension -2");
    CHECK(v.storage == NULL, "no view after a failure");
    /* at the bound itself: a valid (empty) view whose reductions run */
    CHECK_OK(sr_tensor_reshape(&v, &e, 2, (int64_t[]){0, (int64_t)1 << 40}));
    double s = -1;
    CHECK_OK(sr_reduce_all(&v, SR_RED_SUM, &s, NULL));
    CHECK(s == 0, "sum %g", s);
    CHECK_OK(sr_reduce_dim(&t, NULL, &v, SR_RED_SUM, 1, 0));
    CHECK(t.ndim == 1 && t.shape[0] == 0, "reduced %s", SR_SHAPE(&t));
    /* narrow with lengths whose end would wrap */
    sr_tensor a = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&a, SR_F32, 2, (int64_t[]){4, 3}));
    CHECK_ERR(sr_tensor_narrow(&v, &a, 1, INT64_MAX), "out of range");
    CHECK_ERR(sr_tensor_narrow(&v, &a, INT64_MAX, 1), "out of range");
    CHECK_ERR(sr_narrow_copy(&t, &a, 1, 2, INT64_MAX - 1), "out of range");
    /* the helper itself */
    int64_t n = -1;
    CHECK_OK(SR_COUNT(&n, "t", 0, (int64_t)1 << 40, 1));
    CHECK_ERR(SR_COUNT(&n, "t", 0, (int64_t)1 << 40, 2), "too large"); /* nonzero factors bounded */
    CHECK(n == 0, "count %lld", (long long)n);
    CHECK_OK(SR_COUNT(&n, "t", (int64_t)1 << 20, (int64_t)1 << 20));
    CHECK(n == (int64_t)1 << 40, "count %lld", (long long)n);
    CHECK_ERR(SR_COUNT(&n, "conv2d: workspace", (int64_t)1 << 20, ((int64_t)1 << 20) + 1), "conv2d: workspace: ");
    CHECK_ERR(SR_COUNT(&n, "t", 3, -1), "negative size");
    CHECK_ERR(SR_COUNT(&n, "t", INT64_MAX, INT64_MAX), "too large");
    size_t b = 0;
    CHECK_ERR(sr_count_bytes(&b, "t", SR_MAX_ELEMS + 1, 4), "out of range");
    sr_tensor_free(&e);
    sr_tensor_free(&a);
    sr_tensor_free(&v);
    sr_tensor_free(&t);
}
