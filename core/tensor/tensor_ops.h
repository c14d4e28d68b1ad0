/* tensor_ops.h - arithmetic, reductions, matmul and reshuffles on sr_tensor
 * (Lua-free; the bindings in lua/tensor.c are thin wrappers over these).
 *
 * Conventions shared by every function here:
 *  - Return 0 on success, -1 with a message naming the op and the shapes
 *    (error.h).  Nothing aborts: a huge shape is an "out of memory" error.
 *  - Results go into `out`, which is empty or is released / reused first
 *    (sr_tensor_ensure).  `out` may be the same struct as an input: for
 *    elementwise ops whose result has that input's shape the op then runs in
 *    place (views sharing the storage see the change); in every other case
 *    of aliasing the result is built in a temporary and moved into `out`, so
 *    an input is never read after it has been overwritten.
 *  - Dimensions are 0-based; a negative dim counts from the end (-1 = last).
 *  - Operands must share a dtype: mixing float32 and float64 is an error
 *    ("add: float32 and float64 tensors; convert with :double()"), never a
 *    silent conversion, because a silent float32 round trip is exactly the
 *    kind of precision loss srgeo's noise estimates must see.
 *  - Sums, means, norms and dots accumulate in double for both dtypes, in a
 *    fixed chunk order, so results do not depend on the thread count.
 */
#ifndef SR_TENSOR_OPS_H
#define SR_TENSOR_OPS_H

#include "base/rng.h"
#include "tensor/tensor.h"

/* --- elementwise -------------------------------------------------------- */

typedef enum { SR_OP_ADD, SR_OP_SUB, SR_OP_MUL, SR_OP_DIV, SR_OP_POW, SR_OP_MAXIMUM, SR_OP_MINIMUM } sr_binop;
const char *sr_binop_name(sr_binop op);

/* out = a op b.  Shapes must be equal or broadcast NumPy-style (aligned at
 * the last dim; each pair of dims equal or one of them 1), which covers a
 * row vector (D) against (N,D) and per-channel (C,1,1) against (N,C,H,W). */
int sr_binary(sr_tensor *out, const sr_tensor *a, const sr_tensor *b, sr_binop op);
/* out = a op s, or s op a when `scalar_first` (for 1 - t, 2 / t). */
int sr_binary_scalar(sr_tensor *out, const sr_tensor *a, double s, sr_binop op, int scalar_first);

static inline int sr_add(sr_tensor *o, const sr_tensor *a, const sr_tensor *b) { return sr_binary(o, a, b, SR_OP_ADD); }
static inline int sr_sub(sr_tensor *o, const sr_tensor *a, const sr_tensor *b) { return sr_binary(o, a, b, SR_OP_SUB); }
static inline int sr_mul(sr_tensor *o, const sr_tensor *a, const sr_tensor *b) { return sr_binary(o, a, b, SR_OP_MUL); }
static inline int sr_div(sr_tensor *o, const sr_tensor *a, const sr_tensor *b) { return sr_binary(o, a, b, SR_OP_DIV); }

typedef enum { SR_OP_NEG, SR_OP_ABS, SR_OP_SQRT, SR_OP_EXP, SR_OP_LOG, SR_OP_SQUARE, SR_OP_SIGN } sr_unop;
const char *sr_unop_name(sr_unop op);
int sr_unary(sr_tensor *out, const sr_tensor *a, sr_unop op);
/* out = a ^ p. */
int sr_pow_scalar(sr_tensor *out, const sr_tensor *a, double p);
/* out = min(max(a, lo), hi); pass -INFINITY / INFINITY for a one-sided
 * clamp.  lo > hi is an error; NaN stays NaN. */
int sr_clamp(sr_tensor *out, const sr_tensor *a, double lo, double hi);

/* --- reductions --------------------------------------------------------- */

typedef enum { SR_RED_SUM, SR_RED_MEAN, SR_RED_NORM, SR_RED_MAX, SR_RED_MIN } sr_reduce_op;
const char *sr_reduce_name(sr_reduce_op op);

/* Over all elements.  *index (may be NULL) gets the flat index of the max /
 * min (the first one; a NaN wins, as in PyTorch).  Sum of an empty tensor is
 * 0, mean NaN, max/min an error. */
int sr_reduce_all(const sr_tensor *a, sr_reduce_op op, double *value, int64_t *index);
/* Along one dim: out has that dim removed (or kept as 1 with keepdim).
 * For max/min, `indices` (may be NULL; ignored for the other ops) gets the
 * 0-based positions along dim as a float64 tensor of out's shape (exact up
 * to 2^53). */
int sr_reduce_dim(sr_tensor *out, sr_tensor *indices, const sr_tensor *a, sr_reduce_op op, int dim,
                  int keepdim);

/* <a, b> over all elements of two same-shape tensors (Frobenius for
 * matrices), accumulated in double. */
int sr_dot(const sr_tensor *a, const sr_tensor *b, double *out);

/* --- linear algebra ----------------------------------------------------- */

/* Matrix product through cblas s/dgemm (never inside OpenMP):
 *   (M,K) x (K,N) -> (M,N);  (B,M,K) x (B,K,N) -> (B,M,N);
 *   (B,M,K) x (K,N) -> (B,M,N) (one GEMM over B*M rows);
 *   (K) x (K,N) -> (N);  (M,K) x (K) -> (M). */
int sr_matmul(sr_tensor *out, const sr_tensor *a, const sr_tensor *b);
/* Three loops in double, same shapes as sr_matmul: the reference for tests. */
int sr_matmul_naive(sr_tensor *out, const sr_tensor *a, const sr_tensor *b);
/* (M,N) -> (N,M) copy. */
int sr_transpose(sr_tensor *out, const sr_tensor *a);
/* Swap dims d0 and d1 of any tensor (a copy: storage stays contiguous). */
int sr_transpose_dims(sr_tensor *out, const sr_tensor *a, int d0, int d1);

/* --- assembling and selecting ------------------------------------------- */

/* Concatenate n >= 1 tensors along dim: equal dtype and ndim, equal sizes
 * except along dim. */
int sr_cat(sr_tensor *out, const sr_tensor *const *ts, int n, int dim);
/* Stack n >= 1 same-shape tensors along a new dim (0..ndim). */
int sr_stack(sr_tensor *out, const sr_tensor *const *ts, int n, int dim);
/* The stacked input sr_module_jvp runs (nn/module.h): x's n rows, then the
 * n·k tangent rows of v, tangent j of row i at row n + i·k + j (v is
 * input-major, k = v's rows / n).  v must have x's dtype and row shape and
 * a positive multiple of n rows; out is reused when it can be. */
int sr_tensor_stack_jvp(sr_tensor *out, const sr_tensor *x, const sr_tensor *v);
/* Entries [start, start+len) along dim, as a copy (sr_tensor_narrow is the
 * view for dim 0). */
int sr_narrow_copy(sr_tensor *out, const sr_tensor *a, int dim, int64_t start, int64_t len);
/* Rows idx[0..n) of dim 0 (0-based; repeats allowed). */
int sr_index_select(sr_tensor *out, const sr_tensor *a, const int64_t *idx, int64_t n);

/* a += b over n raw elements of type dt (summing per-thread partial
 * gradients inside kernels). */
void sr_add_into(sr_dtype dt, void *a, const void *b, int64_t n);
/* gb[o] += Σ over images and pixels of gy (n, c, P): the bias gradient of
 * a convolution, typed (called from kernels written over `real`). */
void sr_bias_grad_f32(float *gb, const float *gy, int64_t n, int64_t c, int64_t P);
void sr_bias_grad_f64(double *gb, const double *gy, int64_t n, int64_t c, int64_t P);

/* --- checks ------------------------------------------------------------- */

/* Flat index of the first NaN/Inf, or -1 when all are finite. */
int64_t sr_find_nonfinite(const sr_tensor *t);
/* 0 if all finite, else -1 with "check_finite: NAME (2,3) has nan at
 * [0,2] (flat index 2)" (0-based, as everywhere in C). */
int sr_check_finite(const sr_tensor *t, const char *name);
/* The multi-index of flat index i, written "[i0,i1,...]" with `base` added
 * to each (1 for Lua messages). */
const char *sr_index_str(const sr_tensor *t, int64_t flat, int base, char *buf, size_t n);

/* --- random fills --------------------------------------------------------- */
/* Element by element in flat order from r: the same seed gives the same
 * tensor whatever the thread count. */
void sr_tensor_fill_uniform(sr_tensor *t, sr_rng *r, double lo, double hi);
/* offset + scale * sr_rng_hash_unit(seed, i) at flat index i, computed in
 * double and rounded once to t's dtype */
void sr_tensor_fill_hash(sr_tensor *t, uint64_t seed, double offset, double scale);
void sr_tensor_fill_normal(sr_tensor *t, sr_rng *r, double mean, double std);

#endif
