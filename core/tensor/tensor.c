/* tensor.c - storage, shapes, views, copies. */
#include "tensor/tensor.h"

#include "base/checked.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

const char *sr_dtype_name(sr_dtype d) { return d == SR_F64 ? "float64" : "float32"; }

int64_t sr_numel(const sr_tensor *t)
{
    if (!t->storage)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

int64_t sr_rowsize(const sr_tensor *t)
{
    int64_t n = 1;
    for (int i = 1; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

const char *sr_shape_str(const sr_tensor *t, char *buf, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "(");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)t->shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, ")");
    return buf;
}

int sr_shape_count(const char *op, int ndim, const int64_t *shape, int64_t *numel)
{
    if (ndim < 0 || ndim > SR_MAXDIM)
        return sr_fail("%s: %d dimensions (at most %d)", op, ndim, SR_MAXDIM);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return sr_fail("%s: negative dimension %lld", op, (long long)shape[i]);
    return sr_count_n(numel, op, ndim, shape);
}

/* Validate dims and compute the byte size without overflow. */
static int shape_bytes(sr_dtype dtype, int ndim, const int64_t *shape, size_t *nbytes)
{
    int64_t n;
    if (sr_shape_count("tensor", ndim, shape, &n))
        return -1;
    return sr_count_bytes(nbytes, "tensor", n, sr_dtype_size(dtype));
}

/* Buffers from STORAGE_HUGE bytes on are huge-page aligned (see
 * storage_new); 2 MB is x86-64's and arm64's (4 KB granule) huge page. */
#define STORAGE_HUGE_PAGE ((size_t)2 << 20)
#define STORAGE_HUGE ((size_t)8 << 20)

static sr_storage *storage_new(size_t nbytes)
{
    sr_storage *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    /* 64-byte alignment for AVX-512 loads; never a zero-size request.
     * Large buffers (activations of a batch) start and end on a huge-page
     * boundary and ask for transparent huge pages (Debian's default THP
     * mode is madvise, and madvise wants an aligned range: with 64-byte
     * alignment it failed and every buffer ran on 4 KB pages): first
     * touch is 512x fewer page faults, and streaming a 128 MB activation
     * no longer walks the page tables every 4 KB. */
    size_t sz = (nbytes + 63) & ~(size_t)63, align = 64;
    if (sz == 0)
        sz = 64;
    if (sz >= STORAGE_HUGE) {
        align = STORAGE_HUGE_PAGE;
        sz = (sz + align - 1) & ~(align - 1);
    }
    s->data = aligned_alloc(align, sz);
    if (!s->data) {
        free(s);
        return NULL;
    }
    if (align > 64)
        madvise(s->data, sz, MADV_HUGEPAGE); /* advice: failure changes nothing */
    s->refcount = 1;
    s->nbytes = sz;
    s->idle = 0;
    return s;
}

static void storage_release(sr_storage *s)
{
    free(s->data);
    free(s);
}

static void set_shape(sr_tensor *t, sr_dtype dtype, int ndim, const int64_t *shape)
{
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < SR_MAXDIM; i++)
        t->shape[i] = i < ndim ? shape[i] : 0;
}

void sr_tensor_free(sr_tensor *t)
{
    if (t->storage && --t->storage->refcount == 0)
        storage_release(t->storage);
    t->storage = NULL;
    t->ndim = 0;
    t->offset = 0;
}

int sr_tensor_alloc(sr_tensor *out, sr_dtype dtype, int ndim, const int64_t *shape)
{
    size_t nbytes;
    int64_t shp[SR_MAXDIM];
    if (ndim > 0 && ndim <= SR_MAXDIM)
        memcpy(shp, shape, (size_t)ndim * sizeof *shp); /* shape may alias out */
    if (shape_bytes(dtype, ndim, shp, &nbytes))
        return -1;
    sr_storage *s = storage_new(nbytes);
    if (!s)
        return sr_fail("tensor: out of memory allocating %zu bytes", nbytes);
    sr_tensor_free(out);
    out->storage = s;
    out->offset = 0;
    set_shape(out, dtype, ndim, shp);
    return 0;
}

int sr_tensor_zeros(sr_tensor *out, sr_dtype dtype, int ndim, const int64_t *shape)
{
    if (sr_tensor_alloc(out, dtype, ndim, shape))
        return -1;
    memset(sr_data(out), 0, (size_t)sr_numel(out) * sr_dtype_size(dtype));
    return 0;
}

int sr_tensor_ensure(sr_tensor *out, sr_dtype dtype, int ndim, const int64_t *shape)
{
    return sr_pool_ensure(NULL, out, dtype, ndim, shape);
}

int sr_tensor_ensure_like(sr_tensor *out, const sr_tensor *like)
{
    return sr_tensor_ensure(out, like->dtype, like->ndim, like->shape);
}

/* A block lent (from the pool or freshly allocated for it) or given back. */
static void pool_lent(sr_pool *p, size_t nbytes)
{
    p->out += (int64_t)nbytes;
    if (p->out > p->peak)
        p->peak = p->out;
}

static void pool_drop(sr_pool *p, int i)
{
    p->bytes -= p->blocks[i]->nbytes;
    storage_release(p->blocks[i]);
    p->blocks[i] = p->blocks[--p->n];
}

void sr_pool_put(sr_pool *p, sr_tensor *t)
{
    sr_storage *s = t->storage;
    if (!p || !s || s->refcount > 1) {
        sr_tensor_free(t);
        return;
    }
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        sr_storage **b = realloc(p->blocks, (size_t)cap * sizeof *b);
        if (!b) {
            sr_tensor_free(t); /* no room to keep it: just free it */
            return;
        }
        p->blocks = b;
        p->cap = cap;
    }
    s->idle = 0;
    p->blocks[p->n++] = s;
    p->bytes += s->nbytes;
    /* (a block lent in an earlier pass, returned in this one, is not this
     * pass's: the floor keeps it from hiding this pass's own loans) */
    p->out = p->out > (int64_t)s->nbytes ? p->out - (int64_t)s->nbytes : 0;
    t->storage = NULL;
    t->ndim = 0;
    t->offset = 0;
}

int sr_pool_ensure(sr_pool *p, sr_tensor *t, sr_dtype dtype, int ndim, const int64_t *shape)
{
    size_t nbytes;
    int64_t shp[SR_MAXDIM];
    if (ndim > 0 && ndim <= SR_MAXDIM)
        memcpy(shp, shape, (size_t)ndim * sizeof *shp);
    if (shape_bytes(dtype, ndim, shp, &nbytes))
        return -1;
    int own = t->storage && t->storage->refcount == 1 && t->storage->nbytes >= nbytes;
    if (p && p->n && !own) {
        /* Best fit keeps big blocks for big tensors.  A miss means the pool's
         * blocks are too small for this work (the batch grew): free the
         * largest of them rather than keep memory nothing will use. */
        int best = -1, big = -1;
        for (int i = 0; i < p->n; i++) {
            size_t b = p->blocks[i]->nbytes;
            if (b >= nbytes && (best < 0 || b < p->blocks[best]->nbytes))
                best = i;
            if (b < nbytes && (big < 0 || b > p->blocks[big]->nbytes))
                big = i;
        }
        /* Nor lend a block far bigger than asked: a small tensor that
         * outlives the pass (the output handed to Lua, held until the
         * garbage collector runs) would pin it, and the next pass would
         * allocate its replacement.  Measured: VGG-11's 128 KB features
         * took a 100 MB block per forward once Winograd's workspaces had
         * used the small ones, and peak RSS doubled. */
        if (best >= 0 && p->blocks[best]->nbytes > 2 * nbytes + ((size_t)1 << 20)) {
            if (sr_tensor_alloc(t, dtype, ndim, shp))
                return -1;
            p->fresh++;
            pool_lent(p, t->storage->nbytes);
            return 0;
        }
        if (best < 0) {
            pool_drop(p, big);
        } else {
            sr_storage *s = p->blocks[best];
            p->blocks[best] = p->blocks[--p->n];
            p->bytes -= s->nbytes;
            pool_lent(p, s->nbytes);
            sr_tensor_free(t);
            t->storage = s;
            own = 1;
        }
    }
    if (!own) {
        if (sr_tensor_alloc(t, dtype, ndim, shp))
            return -1;
        if (p) {
            p->fresh++;
            pool_lent(p, t->storage->nbytes);
        }
        return 0;
    }
    t->offset = 0;
    set_shape(t, dtype, ndim, shp);
    return 0;
}

int sr_pool_ensure_like(sr_pool *p, sr_tensor *t, const sr_tensor *like)
{
    return sr_pool_ensure(p, t, like->dtype, like->ndim, like->shape);
}

void sr_pool_pass_end(sr_pool *p)
{
    if (!p)
        return;
    p->peaks[p->passes % SR_POOL_WINDOW] = p->peak;
    p->passes++;
    p->out = p->peak = 0;
    int64_t most = 0;
    for (int i = 0; i < SR_POOL_WINDOW; i++)
        most = p->peaks[i] > most ? p->peaks[i] : most;
    size_t budget = (size_t)most * SR_POOL_PEAKS_MULT + SR_POOL_SLACK;
    for (int i = p->n - 1; i >= 0; i--)
        if (++p->blocks[i]->idle > SR_POOL_IDLE_PASSES) {
            pool_drop(p, i);
            p->freed++;
        }
    while (p->bytes > budget && p->n) {
        int worst = 0; /* idle longest, then largest */
        for (int i = 1; i < p->n; i++) {
            const sr_storage *a = p->blocks[i], *b = p->blocks[worst];
            if (a->idle > b->idle || (a->idle == b->idle && a->nbytes > b->nbytes))
                worst = i;
        }
        pool_drop(p, worst);
        p->freed++;
    }
}

void sr_pool_clear(sr_pool *p)
{
    for (int i = 0; i < p->n; i++)
        storage_release(p->blocks[i]);
    free(p->blocks);
    *p = (sr_pool)SR_POOL_INIT;
}

void sr_tensor_share(sr_tensor *dst, const sr_tensor *src)
{
    if (dst == src)
        return;
    if (src->storage)
        src->storage->refcount++;
    sr_tensor_free(dst);
    *dst = *src;
}

int sr_tensor_copy(sr_tensor *dst, const sr_tensor *src)
{
    return sr_tensor_convert(dst, src, src->dtype);
}

int sr_tensor_convert(sr_tensor *dst, const sr_tensor *src, sr_dtype dtype)
{
    sr_tensor tmp = SR_TENSOR_INIT;
    if (!src->storage)
        return sr_fail("tensor: copy of an empty tensor");
    if (sr_tensor_alloc(&tmp, dtype, src->ndim, src->shape))
        return -1;
    if (sr_tensor_assign(&tmp, src)) {
        sr_tensor_free(&tmp);
        return -1;
    }
    sr_tensor_free(dst);
    *dst = tmp;
    return 0;
}

int sr_tensor_assign(sr_tensor *dst, const sr_tensor *src)
{
    int64_t n = sr_numel(src);
    if (n != sr_numel(dst))
        return sr_fail("tensor assign: %s into %s (element counts differ)", SR_SHAPE(src), SR_SHAPE(dst));
    if (src->dtype == dst->dtype) {
        memmove(sr_data(dst), sr_data(src), (size_t)n * sr_dtype_size(src->dtype));
    } else if (src->dtype == SR_F32) {
        const float *s = sr_f32(src);
        double *d = sr_f64(dst);
        for (int64_t i = 0; i < n; i++)
            d[i] = s[i];
    } else {
        const double *s = sr_f64(src);
        float *d = sr_f32(dst);
        for (int64_t i = 0; i < n; i++)
            d[i] = (float)s[i];
    }
    return 0;
}

int sr_tensor_reshape(sr_tensor *dst, const sr_tensor *src, int ndim, const int64_t *shape)
{
    int64_t shp[SR_MAXDIM] = {0}, known = 1;
    int infer = -1;
    if (ndim < 0 || ndim > SR_MAXDIM)
        return sr_fail("reshape: %d dimensions (at most %d)", ndim, SR_MAXDIM);
    for (int i = 0; i < ndim; i++) {
        shp[i] = shape[i];
        if (shp[i] == -1) {
            if (infer >= 0)
                return sr_fail("reshape: only one dimension may be -1");
            infer = i;
            shp[i] = 1; /* counted as 1 below, then inferred */
        }
    }
    /* The new shape must be a valid one on its own (no dimension product
     * beyond the element bound): a product that wraps to the source's
     * element count would make a view reaching outside the storage. */
    if (sr_shape_count("reshape", ndim, shp, &known))
        return -1;
    int64_t n = sr_numel(src);
    if (infer >= 0) {
        if (known == 0 || n % known)
            return sr_fail("reshape: cannot infer -1 for %s", SR_SHAPE(src));
        shp[infer] = n / known;
        known = n;
    }
    if (known != n) {
        sr_tensor probe = {src->dtype, ndim, {0}, 0, NULL};
        for (int i = 0; i < ndim; i++)
            probe.shape[i] = shp[i];
        return sr_fail("reshape: %s has %lld elements, %s has %lld", SR_SHAPE(src), (long long)n,
                       SR_SHAPE(&probe), (long long)known);
    }
    sr_tensor v = *src;
    set_shape(&v, src->dtype, ndim, shp);
    if (v.storage)
        v.storage->refcount++;
    sr_tensor_free(dst);
    *dst = v;
    return 0;
}

int sr_tensor_narrow(sr_tensor *dst, const sr_tensor *src, int64_t start, int64_t len)
{
    if (src->ndim < 1)
        return sr_fail("narrow: 0-d tensor");
    if (start < 0 || len < 0 || start > src->shape[0] || len > src->shape[0] - start)
        return sr_fail("narrow: rows [%lld, %lld) out of range for %s", (long long)start,
                       (long long)sr_sat_add(start, len), SR_SHAPE(src));
    sr_tensor v = *src;
    v.offset = src->offset + (size_t)(start * sr_rowsize(src));
    v.shape[0] = len;
    if (v.storage)
        v.storage->refcount++;
    sr_tensor_free(dst);
    *dst = v;
    return 0;
}

int sr_same_shape(const sr_tensor *a, const sr_tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

void sr_tensor_fill(sr_tensor *t, double v)
{
    int64_t n = sr_numel(t);
    if (t->dtype == SR_F64) {
        double *p = sr_f64(t);
        for (int64_t i = 0; i < n; i++)
            p[i] = v;
    } else {
        float *p = sr_f32(t);
        for (int64_t i = 0; i < n; i++)
            p[i] = (float)v;
    }
}

double sr_get_flat(const sr_tensor *t, int64_t i)
{
    return t->dtype == SR_F64 ? sr_f64(t)[i] : (double)sr_f32(t)[i];
}

void sr_set_flat(sr_tensor *t, int64_t i, double v)
{
    if (t->dtype == SR_F64)
        sr_f64(t)[i] = v;
    else
        sr_f32(t)[i] = (float)v;
}

int sr_tensor_all_finite(const sr_tensor *t, int64_t *first_bad)
{
    int64_t n = sr_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(sr_get_flat(t, i))) {
            if (first_bad)
                *first_bad = i;
            return 0;
        }
    }
    return 1;
}
