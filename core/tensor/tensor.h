/* tensor.h - contiguous, refcounted, float32/float64 tensors (no Lua here).
 *
 * A tensor is a small value struct (dtype, shape, offset) pointing at a
 * refcounted storage.  Data is always C-contiguous; views share storage and
 * differ only in shape (reshape) or offset along dim 0 (slicing), so every
 * kernel can treat a tensor as a flat array.
 *
 * Ownership: a tensor struct owns one reference to its storage.  Initialise
 * with SR_TENSOR_INIT, release with sr_tensor_free.  Functions that produce a
 * tensor write into an `out` argument that must be empty or will be
 * released first (see sr_tensor_ensure, which reuses the buffer when it can).
 */
#ifndef SR_TENSOR_H
#define SR_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define SR_MAXDIM 8

typedef enum { SR_F32 = 0, SR_F64 = 1 } sr_dtype;

typedef struct sr_storage {
    long refcount;
    size_t nbytes;
    void *data;
    unsigned idle; /* in a pool: passes ended since it was given back (sr_pool_pass_end) */
} sr_storage;

typedef struct sr_tensor {
    sr_dtype dtype;
    int ndim;
    int64_t shape[SR_MAXDIM];
    size_t offset;      /* in elements, into storage->data */
    sr_storage *storage; /* NULL for an empty tensor */
} sr_tensor;

#define SR_TENSOR_INIT {SR_F32, 0, {0}, 0, NULL}

static inline size_t sr_dtype_size(sr_dtype d) { return d == SR_F64 ? 8 : 4; }
const char *sr_dtype_name(sr_dtype d);

/* Check a shape (0..SR_MAXDIM dims, each >= 0, the product of its nonzero
 * dims at most SR_MAX_ELEMS: base/checked.h) and count its elements: 0, or
 * -1 with a message naming op.  Every tensor's shape passes this check
 * (allocation, views), so the products the kernels form from a tensor's
 * dims (row sizes, outer x inner, flat indices) cannot overflow. */
int sr_shape_count(const char *op, int ndim, const int64_t *shape, int64_t *numel);
/* Number of elements (1 for a 0-d tensor with storage, 0 when empty). */
int64_t sr_numel(const sr_tensor *t);
/* Elements per row of dim 0 (product of shape[1:]). */
int64_t sr_rowsize(const sr_tensor *t);
static inline void *sr_data(const sr_tensor *t)
{
    return t->storage ? (char *)t->storage->data + t->offset * sr_dtype_size(t->dtype) : NULL;
}
static inline float *sr_f32(const sr_tensor *t) { return (float *)sr_data(t); }
static inline double *sr_f64(const sr_tensor *t) { return (double *)sr_data(t); }

/* "(2,3,32,32)" into buf, returned for use in messages. */
const char *sr_shape_str(const sr_tensor *t, char *buf, size_t n);
#define SR_SHAPE_BUF 96
/* Shape string in a compound literal buffer: valid for the full expression. */
#define SR_SHAPE(t) sr_shape_str((t), (char[SR_SHAPE_BUF]){0}, SR_SHAPE_BUF)

/* Allocate uninitialised / zeroed storage.  Fails cleanly (no abort) on
 * bad dims, overflow or out of memory.  `out` is released first. */
int sr_tensor_alloc(sr_tensor *out, sr_dtype dtype, int ndim, const int64_t *shape);
int sr_tensor_zeros(sr_tensor *out, sr_dtype dtype, int ndim, const int64_t *shape);
/* Make `out` a buffer of the given dtype/shape, reusing its storage when it
 * is the only owner and large enough; contents are unspecified.  This is how
 * modules keep activation buffers across calls without touching fresh pages
 * (first touch is slow on these VMs). */
int sr_tensor_ensure(sr_tensor *out, sr_dtype dtype, int ndim, const int64_t *shape);
/* Like sr_tensor_ensure with the dtype/shape of `like`. */
int sr_tensor_ensure_like(sr_tensor *out, const sr_tensor *like);

void sr_tensor_free(sr_tensor *t);

/* A pool of spare storages, owned by whoever runs a sequence of passes (a
 * model: core/nn/module.c).  A pass puts each activation back once its
 * consumer has run (unless backward holds it), backward does the same with
 * gradients and saved inputs, and the next buffer is lent from the pool, so
 * peak memory is the live buffers instead of all of them, and a warm pool
 * never touches fresh pages (first touch is slow on these VMs).  Not shared
 * between threads.
 *
 * Bounded: whoever runs the passes calls sr_pool_pass_end after each one.
 * A block not lent for SR_POOL_IDLE_PASSES passes is freed, and the pooled
 * bytes are kept within SR_POOL_PEAKS_MULT times the largest peak of the
 * last SR_POOL_WINDOW passes (bytes lent at once, as lends and returns
 * during the pass count them) plus SR_POOL_SLACK, freeing the blocks idle
 * longest first.  A pass that repeats keeps every block it uses. */
#define SR_POOL_IDLE_PASSES 16
#define SR_POOL_WINDOW 16
#define SR_POOL_PEAKS_MULT 2
#define SR_POOL_SLACK ((size_t)4 << 20)
typedef struct sr_pool {
    int n, cap;
    sr_storage **blocks;
    long fresh;      /* storages its lending had to allocate (a warm pool adds none) */
    size_t bytes;    /* pooled now */
    int64_t out;     /* this pass: bytes lent less bytes given back (at least 0) */
    int64_t peak;    /* this pass: the largest `out` */
    int64_t peaks[SR_POOL_WINDOW]; /* the last passes' peaks */
    long passes;     /* passes ended */
    long freed;      /* blocks the bounds freed */
} sr_pool;
#define SR_POOL_INIT {0}
/* Release t.  When t held the last reference to its storage, the storage
 * goes to the pool (p may be NULL: then it is freed). */
void sr_pool_put(sr_pool *p, sr_tensor *t);
/* sr_tensor_ensure, but when t's own storage cannot serve, t first gets the
 * smallest pooled storage that can (p may be NULL). */
int sr_pool_ensure(sr_pool *p, sr_tensor *t, sr_dtype dtype, int ndim, const int64_t *shape);
int sr_pool_ensure_like(sr_pool *p, sr_tensor *t, const sr_tensor *like);
/* The end of a pass: apply the bounds above (p may be NULL). */
void sr_pool_pass_end(sr_pool *p);
/* Free every pooled storage. */
void sr_pool_clear(sr_pool *p);
/* dst becomes a view of src (shares storage, one more reference). */
void sr_tensor_share(sr_tensor *dst, const sr_tensor *src);
/* Deep copy (contiguous, same dtype). */
int sr_tensor_copy(sr_tensor *dst, const sr_tensor *src);
/* Copy with dtype conversion (a plain copy when dtypes agree). */
int sr_tensor_convert(sr_tensor *dst, const sr_tensor *src, sr_dtype dtype);
/* Copy values of src into existing dst of the same numel (dtype converted). */
int sr_tensor_assign(sr_tensor *dst, const sr_tensor *src);

/* Views.  reshape: same numel, one dim may be -1.  narrow: rows
 * [start, start+len) of dim 0. */
int sr_tensor_reshape(sr_tensor *dst, const sr_tensor *src, int ndim, const int64_t *shape);
int sr_tensor_narrow(sr_tensor *dst, const sr_tensor *src, int64_t start, int64_t len);

int sr_same_shape(const sr_tensor *a, const sr_tensor *b);

/* Fill helpers. */
void sr_tensor_fill(sr_tensor *t, double v);

/* Element access by flat index, in double (slow; for bindings and tests). */
double sr_get_flat(const sr_tensor *t, int64_t i);
void sr_set_flat(sr_tensor *t, int64_t i, double v);

/* 1 if every element is finite; else 0 and *first_bad is the flat index. */
int sr_tensor_all_finite(const sr_tensor *t, int64_t *first_bad);

#endif
