/* lua/tensor.c - the srgeo.tensor userdata: constructors, metamethods,
 * methods, srgeo.cat/stack/check_finite and srgeo.npy.
 *
 * Indexing from Lua is 1-based throughout, as in Lua itself and torch7:
 *  - dimension arguments (t:size(d), t:sum(d), srgeo.cat(list, d), ...)
 *    are 1..t:dim(); a negative one counts from the end (-1 = last dim);
 *  - element and row indices (t:get(i, j), t:narrow(d, i, len), t:slice(i, j),
 *    t:row(i), t:index{...}) are 1..size, negative from the end; slice's
 *    range i..j is inclusive;
 *  - positions returned by max/min/argmax/argmin are 1-based as well.
 * The C core underneath (tensor_ops.h) is 0-based; the translation happens
 * here, in one place, together with the 1-based error messages.
 *
 * Every result is a new userdata created *empty* before the core allocates
 * into it, so an error at any point unwinds through __gc without leaks.
 * Views (reshape, narrow, row, ...) share storage with their source;
 * everything else is a fresh tensor, except fill and copy, which write in
 * place and return the tensor itself.
 *
 * Big results are charged to a per-state GC budget (see gc_budget). */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "io/npy.h"
#include "lua/aux.h"
#include "lua/open.h"
#include "tensor/tensor_ops.h"

/* luaL_error with C printf formats (lua_pushfstring lacks %lld and %g). */
static int lfail(lua_State *L, const char *fmt, ...) SR_PRINTF(2, 3);
static int lfail(lua_State *L, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return luaL_error(L, "%s", buf);
}

/* The userdata: the tensor first (so sr_lua_check_tensor's pointer is the
 * sr_tensor itself), then the storage bytes it was charged to the GC
 * budget below. */
typedef struct {
    sr_tensor t;
    size_t charged;
} tensor_ud;

/* Lua's collector sees only the small userdata, not the storage behind it,
 * so a loop making big temporaries would grow without bound before the Lua
 * heap itself grew enough to trigger a collection.  And forcing GC steps
 * does not help in generational mode (the shell's): a tensor that survives
 * two minor collections while still referenced becomes old and is then only
 * freed by a major one.  So srgeo keeps its own budget, per lua_State (in
 * the registry): bytes of tensor storage created since the last full
 * collection; beyond max(SR_GC_MIN, what was live after that collection) it
 * runs a full collection -- Lua's own "pause" rule, applied to the memory
 * Lua cannot see (SRGEO_GC_MIN_MB sets another SR_GC_MIN).  Peak memory stays near twice the live tensors plus
 * SR_GC_MIN, and a full collection costs far less than first-touching that
 * many fresh pages. */
#define SR_GC_MIN ((size_t)64 << 20)

typedef struct {
    size_t since; /* bytes charged since the last full collection */
    size_t live;  /* bytes charged and not yet released */
    size_t base;  /* `live` right after the last full collection */
    size_t min;   /* SR_GC_MIN, or SRGEO_GC_MIN_MB from the environment */
} gc_budget;

static const char budget_key = 'b'; /* its address keys the registry entry */

static gc_budget *budget(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &budget_key);
    gc_budget *b = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return b;
}

/* Charge the tensor at idx (if it owns fresh storage, or, shared, if it is a
 * module's result) and collect when the budget is spent.  Exported (aux.h)
 * so other bindings that return big new tensors can call it too. */
static void charge(lua_State *L, int idx, int shared)
{
    tensor_ud *u = luaL_testudata(L, idx, SR_TENSOR_MT);
    if (!u || u->charged || !u->t.storage || (!shared && u->t.storage->refcount != 1))
        return;
    gc_budget *b = budget(L);
    if (!b)
        return;
    u->charged = u->t.storage->nbytes;
    b->live += u->charged;
    b->since += u->charged;
    if (b->since > (b->base > b->min ? b->base : b->min) && lua_gc(L, LUA_GCISRUNNING)) {
        lua_gc(L, LUA_GCCOLLECT);
        b->since = 0;
        b->base = b->live;
    }
}

void sr_lua_track_tensor(lua_State *L, int idx) { charge(L, idx, 0); }
void sr_lua_track_result(lua_State *L, int idx) { charge(L, idx, 1); }

/* Return the tensor on top of the stack, charged to the budget. */
static int tracked(lua_State *L)
{
    sr_lua_track_tensor(L, -1);
    return 1;
}

static void track_at(lua_State *L, int idx) { sr_lua_track_tensor(L, idx); }

static int t_gc(lua_State *L)
{
    tensor_ud *u = luaL_checkudata(L, 1, SR_TENSOR_MT);
    if (u->charged) {
        gc_budget *b = budget(L);
        if (b)
            b->live -= u->charged < b->live ? u->charged : b->live;
        u->charged = 0;
    }
    sr_tensor_free(&u->t);
    return 0;
}

sr_tensor *sr_lua_new_tensor(lua_State *L)
{
    tensor_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->t = (sr_tensor)SR_TENSOR_INIT;
    u->charged = 0;
    luaL_setmetatable(L, SR_TENSOR_MT);
    return &u->t;
}

sr_tensor *sr_lua_test_tensor(lua_State *L, int idx) { return luaL_testudata(L, idx, SR_TENSOR_MT); }

sr_tensor *sr_lua_check_tensor(lua_State *L, int idx)
{
    sr_tensor *t = luaL_testudata(L, idx, SR_TENSOR_MT);
    if (!t)
        luaL_typeerror(L, idx, "srgeo tensor");
    return t;
}

/* --- argument helpers --------------------------------------------------- */

static const char *type_name(lua_State *L, int idx)
{
    return sr_lua_test_tensor(L, idx) ? "tensor" : luaL_typename(L, idx);
}

/* A 1-based (or negative) dim argument as a 0-based dim among `nd`. */
static int check_dim(lua_State *L, int arg, int nd, const char *op, const sr_tensor *t)
{
    lua_Integer d = luaL_checkinteger(L, arg);
    lua_Integer r = d < 0 ? d + nd : d - 1;
    if (d == 0 || r < 0 || r >= nd)
        lfail(L, "%s: dim %lld out of range for %s (dims are 1..%d, or negative from the end)", op, (long long)d,
              SR_SHAPE(t), nd);
    return (int)r;
}

/* A 1-based (or negative) index into a dim of `size` as 0-based. */
static int64_t check_index(lua_State *L, lua_Integer i, int64_t size, const char *op, int dim, const sr_tensor *t)
{
    int64_t r = i < 0 ? (int64_t)i + size : (int64_t)i - 1;
    if (i == 0 || r < 0 || r >= size)
        lfail(L, "%s: index %lld out of range for dim %d of %s (1..%lld)", op, (long long)i, dim + 1, SR_SHAPE(t),
              (long long)size);
    return r;
}

/* An integer Lua value at idx, with a message naming the op and what. */
static lua_Integer check_int(lua_State *L, int idx, const char *op, const char *what)
{
    int ok;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (!ok)
        lfail(L, "%s: %s must be an integer (got %s)", op, what,
              lua_type(L, idx) == LUA_TNUMBER ? "a fraction" : luaL_typename(L, idx));
    return v;
}

/* A shape for reshape/view: a table or integer arguments from idx; -1 is
 * allowed (sr_lua_check_shape rejects it, rightly, for constructors). */
static int check_view_shape(lua_State *L, int idx, int64_t *shape, const char *op)
{
    int n = 0;
    if (lua_istable(L, idx)) {
        lua_Integer len = luaL_len(L, idx);
        if (len > SR_MAXDIM)
            lfail(L, "%s: %lld dimensions (at most %d)", op, (long long)len, SR_MAXDIM);
        for (n = 0; n < len; n++) {
            lua_geti(L, idx, n + 1);
            shape[n] = check_int(L, -1, op, "a shape entry");
            lua_pop(L, 1);
        }
        return n;
    }
    int top = lua_gettop(L);
    if (top - idx + 1 > SR_MAXDIM)
        lfail(L, "%s: %d dimensions (at most %d)", op, top - idx + 1, SR_MAXDIM);
    for (int i = idx; i <= top; i++)
        shape[n++] = check_int(L, i, op, "a shape entry");
    return n;
}

/* --- constructors ------------------------------------------------------- */

/* zeros/ones/full: shape as a table or integers, then the dtype. */
static int filled(lua_State *L, int kind)
{
    int64_t shape[SR_MAXDIM];
    int nd = sr_lua_check_shape(L, 1, shape);
    int next = lua_istable(L, 1) ? 2 : nd + 1;
    double v = kind == 0 ? 0 : 1;
    if (kind == 2) {
        if (!lua_istable(L, 1))
            luaL_typeerror(L, 1, "shape table (full{2,3}, v)");
        v = luaL_checknumber(L, next++);
    }
    sr_dtype dt = sr_lua_opt_dtype(L, next, SR_F32);
    sr_tensor *t = sr_lua_new_tensor(L);
    if (kind == 0 ? sr_tensor_zeros(t, dt, nd, shape) : sr_tensor_alloc(t, dt, nd, shape))
        return sr_lua_fail(L);
    if (kind)
        sr_tensor_fill(t, v);
    return tracked(L);
}

static int l_zeros(lua_State *L) { return filled(L, 0); }
static int l_ones(lua_State *L) { return filled(L, 1); }
static int l_full(lua_State *L) { return filled(L, 2); }

/* randn(shape [, seed [, dtype]]) / rand(...) */
static int random_tensor(lua_State *L, int normal)
{
    int64_t shape[SR_MAXDIM];
    luaL_checktype(L, 1, LUA_TTABLE);
    int nd = sr_lua_check_shape(L, 1, shape);
    uint64_t seed = lua_isnoneornil(L, 2) ? sr_default_seed() : (uint64_t)luaL_checkinteger(L, 2);
    sr_dtype dt = sr_lua_opt_dtype(L, 3, SR_F32);
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_tensor_alloc(t, dt, nd, shape))
        return sr_lua_fail(L);
    sr_rng r;
    sr_rng_seed(&r, seed);
    if (normal)
        sr_tensor_fill_normal(t, &r, 0, 1);
    else
        sr_tensor_fill_uniform(t, &r, 0, 1);
    return tracked(L);
}

/* hashrand(shape, seed [, offset [, scale [, dtype]]]): element i is
 * offset + scale * sr_rng_hash_unit(seed, i), reproducible outside srgeo
 * (fixtures built in NumPy regenerate here without being committed) */
static int l_hashrand(lua_State *L)
{
    int64_t shape[SR_MAXDIM];
    luaL_checktype(L, 1, LUA_TTABLE);
    int nd = sr_lua_check_shape(L, 1, shape);
    uint64_t seed = (uint64_t)luaL_checkinteger(L, 2);
    double offset = luaL_optnumber(L, 3, 0), scale = luaL_optnumber(L, 4, 1);
    if (!isfinite(offset) || !isfinite(scale))
        return luaL_error(L, "hashrand: offset %f and scale %f must be finite", offset, scale);
    sr_dtype dt = sr_lua_opt_dtype(L, 5, SR_F32);
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_tensor_alloc(t, dt, nd, shape))
        return sr_lua_fail(L);
    sr_tensor_fill_hash(t, seed, offset, scale);
    return tracked(L);
}

static int l_randn(lua_State *L) { return random_tensor(L, 1); }
static int l_rand(lua_State *L) { return random_tensor(L, 0); }

/* arange(n) -> 0..n-1; arange(a, b [, step]) -> a, a+step, ... < b (as in
 * NumPy: these are values, not indices); an optional dtype comes last. */
static int l_arange(lua_State *L)
{
    int top = lua_gettop(L);
    sr_dtype dt = SR_F32;
    if (top >= 1 && lua_type(L, top) == LUA_TSTRING)
        dt = sr_lua_opt_dtype(L, top--, SR_F32);
    double a = 0, b, step = 1;
    if (top == 1) {
        b = luaL_checknumber(L, 1);
    } else if (top == 2 || top == 3) {
        a = luaL_checknumber(L, 1);
        b = luaL_checknumber(L, 2);
        step = top == 3 ? luaL_checknumber(L, 3) : 1;
    } else {
        return luaL_error(L, "arange: expected (n), (start, stop) or (start, stop, step)");
    }
    if (step == 0 || !isfinite(a) || !isfinite(b) || !isfinite(step))
        return lfail(L, "arange: bad range start=%g stop=%g step=%g", a, b, step);
    double cnt = ceil((b - a) / step);
    int64_t n = cnt > 0 ? (int64_t)cnt : 0;
    if (cnt > 1e15)
        return lfail(L, "arange: %g elements is too many", cnt);
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_tensor_alloc(t, dt, 1, &n))
        return sr_lua_fail(L);
    for (int64_t i = 0; i < n; i++)
        sr_set_flat(t, i, a + (double)i * step);
    return tracked(L);
}

/* srgeo.tensor{...}: nested tables -> shape from the first entries, then a
 * recursive fill that checks every level (a ragged table is an error
 * naming the offending entry). */
typedef struct {
    lua_State *L;
    sr_tensor *t;
    int nd;
    int64_t shape[SR_MAXDIM], path[SR_MAXDIM], pos;
} from_table;

static const char *path_str(const from_table *f, int depth, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < depth && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "[%lld]", (long long)f->path[d] + 1);
    return depth ? buf : "the top level";
}

static void fill_level(from_table *f, int depth)
{
    lua_State *L = f->L;
    char pb[SR_MAXDIM * 24];
    if (depth == f->nd) {
        if (sr_lua_test_tensor(L, -1))
            lfail(L, "tensor: entry %s is a tensor; join tensors with srgeo.stack or srgeo.cat",
                  path_str(f, depth, pb, sizeof pb));
        if (lua_type(L, -1) != LUA_TNUMBER)
            lfail(L, "tensor: entry %s is a %s, expected a number (ragged or mixed nesting?)",
                  path_str(f, depth, pb, sizeof pb), luaL_typename(L, -1));
        sr_set_flat(f->t, f->pos++, lua_tonumber(L, -1));
        return;
    }
    if (!lua_istable(L, -1))
        lfail(L, "tensor: entry %s is a %s, expected a table of %lld entries (ragged nesting)",
              path_str(f, depth, pb, sizeof pb), luaL_typename(L, -1), (long long)f->shape[depth]);
    lua_Unsigned len = lua_rawlen(L, -1);
    if ((int64_t)len != f->shape[depth])
        lfail(L, "tensor: ragged nested table: %s has %llu entries, expected %lld", path_str(f, depth, pb, sizeof pb),
              (unsigned long long)len, (long long)f->shape[depth]);
    luaL_checkstack(L, 2, "tensor: nesting too deep");
    for (int64_t i = 0; i < f->shape[depth]; i++) {
        f->path[depth] = i;
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        fill_level(f, depth + 1);
        lua_pop(L, 1);
    }
}

static int l_tensor(lua_State *L)
{
    sr_dtype dt = sr_lua_opt_dtype(L, 2, SR_F32);
    from_table f = {.L = L};
    if (lua_type(L, 1) == LUA_TNUMBER) { /* a 0-d tensor */
        double v = lua_tonumber(L, 1);
        sr_tensor *t = sr_lua_new_tensor(L);
        if (sr_tensor_alloc(t, dt, 0, NULL))
            return sr_lua_fail(L);
        sr_set_flat(t, 0, v);
        return 1;
    }
    if (sr_lua_test_tensor(L, 1)) {
        sr_tensor *src = sr_lua_test_tensor(L, 1);
        sr_tensor *t = sr_lua_new_tensor(L);
        if (sr_tensor_convert(t, src, lua_isnoneornil(L, 2) ? src->dtype : dt))
            return sr_lua_fail(L);
        return tracked(L);
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    /* Shape: follow the first entry down. */
    lua_pushvalue(L, 1);
    while (lua_istable(L, -1)) {
        if (f.nd == SR_MAXDIM)
            return lfail(L, "tensor: nested deeper than %d levels", SR_MAXDIM);
        lua_Unsigned len = lua_rawlen(L, -1);
        f.shape[f.nd++] = (int64_t)len;
        if (len == 0)
            break;
        lua_rawgeti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
    f.t = sr_lua_new_tensor(L);
    if (sr_tensor_alloc(f.t, dt, f.nd, f.shape))
        return sr_lua_fail(L);
    lua_pushvalue(L, 1);
    fill_level(&f, 0);
    lua_pop(L, 1);
    return tracked(L);
}

/* --- shape and views ---------------------------------------------------- */

static int push_shape(lua_State *L, const sr_tensor *t)
{
    sr_lua_push_size(L, t->shape, t->ndim);
    return 1;
}

static int t_shape(lua_State *L) { return push_shape(L, sr_lua_check_tensor(L, 1)); }

/* t:size() -> the shape as a size (prints "(2,3,4)"); t:size(d) -> size of dim d. */
static int t_size(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    if (lua_isnoneornil(L, 2))
        return push_shape(L, t);
    lua_pushinteger(L, t->shape[check_dim(L, 2, t->ndim, "size", t)]);
    return 1;
}

static int t_dim(lua_State *L)
{
    lua_pushinteger(L, sr_lua_check_tensor(L, 1)->ndim);
    return 1;
}

static int t_numel(lua_State *L)
{
    lua_pushinteger(L, sr_numel(sr_lua_check_tensor(L, 1)));
    return 1;
}

static int t_len(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    lua_pushinteger(L, t->ndim ? t->shape[0] : 0);
    return 1;
}

/* t:hash([h]) -> FNV-1a 64 of the element bytes, continuing from h (an
 * earlier result, to chain tensors; default the offset basis): an identity
 * of a model's weights (lua/srgeo/identity.lua), not a cryptographic one.
 * float32 and float64 copies of the same values hash differently. */
static int t_hash(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    uint64_t h = lua_isnoneornil(L, 2) ? 0xcbf29ce484222325ull : (uint64_t)luaL_checkinteger(L, 2);
    const unsigned char *p = sr_data(t);
    size_t n = (size_t)sr_numel(t) * sr_dtype_size(t->dtype);
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    lua_pushinteger(L, (lua_Integer)h);
    return 1;
}

static int t_dtype(lua_State *L)
{
    lua_pushstring(L, sr_dtype_name(sr_lua_check_tensor(L, 1)->dtype));
    return 1;
}

static int t_convert(lua_State *L, sr_dtype dt)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    sr_tensor *o = sr_lua_new_tensor(L);
    if (sr_tensor_convert(o, t, dt))
        return sr_lua_fail(L);
    return tracked(L);
}
static int t_double(lua_State *L) { return t_convert(L, SR_F64); }
static int t_float(lua_State *L) { return t_convert(L, SR_F32); }
static int t_clone(lua_State *L) { return t_convert(L, sr_lua_check_tensor(L, 1)->dtype); }

/* t:reshape(2, -1) / t:reshape{2, -1}: a view (storage is contiguous). */
static int t_reshape(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    int64_t shape[SR_MAXDIM];
    int nd = check_view_shape(L, 2, shape, "reshape");
    sr_tensor *v = sr_lua_new_tensor(L);
    if (sr_tensor_reshape(v, t, nd, shape))
        return sr_lua_fail(L);
    return 1;
}

/* Rows [r0, r0+len) of dim 0 as a view (0-based, already checked). */
static int push_rows(lua_State *L, sr_tensor *t, int64_t r0, int64_t len)
{
    sr_tensor *v = sr_lua_new_tensor(L);
    if (sr_tensor_narrow(v, t, r0, len))
        return sr_lua_fail(L);
    return 1;
}

static void need_rows(lua_State *L, const sr_tensor *t, const char *op)
{
    if (t->ndim < 1)
        lfail(L, "%s: a 0-d tensor has no rows", op);
}

/* t:narrow(dim, start, len): entries start .. start+len-1 of dim, in
 * Torch7's order and 1-based like every index here (PyTorch has the same
 * order, 0-based).  Along dim 1 this is a view; along any other dim the
 * entries are not contiguous, so it is a copy (writes to it do not reach t).
 * srgeo 0.1 took (start, len [, dim]): a two-argument call is that order and
 * is refused; a three-argument one cannot be told apart, but usually lands
 * out of range, and those messages restate the order. */
static int t_narrow(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    need_rows(L, t, "narrow");
    static const char order[] = "narrow takes (dim, start, len), as in Torch7 and PyTorch";
    if (lua_gettop(L) < 4)
        return lfail(L, "narrow: %s; got %d argument%s for %s (srgeo 0.1's narrow(start, len [, dim]) order is gone)",
                     order, lua_gettop(L) - 1, lua_gettop(L) == 2 ? "" : "s", SR_SHAPE(t));
    lua_Integer dl = luaL_checkinteger(L, 2), s = luaL_checkinteger(L, 3), len = luaL_checkinteger(L, 4);
    if (dl == 0 || dl > t->ndim || dl < -t->ndim)
        return lfail(L, "narrow: dim %lld out of range for %s (dims are 1..%d, or negative from the end; %s)",
                     (long long)dl, SR_SHAPE(t), t->ndim, order);
    int d = dl < 0 ? (int)(dl + t->ndim) : (int)(dl - 1);
    int64_t n = t->shape[d], r0 = s < 0 ? (int64_t)s + n : (int64_t)s - 1;
    if (s == 0 || len < 0 || r0 < 0 || r0 > n || len > n - r0) {
        int64_t end = r0 > 0 && len > INT64_MAX - r0 ? INT64_MAX : r0 + len; /* for the message only */
        return lfail(L, "narrow: %lld..%lld (start %lld, length %lld) out of range for dim %d of %s (1..%lld; %s)",
                     (long long)r0 + 1, (long long)end, (long long)s, (long long)len, d + 1, SR_SHAPE(t),
                     (long long)n, order);
    }
    if (d == 0)
        return push_rows(L, t, r0, len);
    sr_tensor *o = sr_lua_new_tensor(L);
    if (sr_narrow_copy(o, t, d, r0, len))
        return sr_lua_fail(L);
    return tracked(L);
}

/* t:slice(i [, j]): rows i..j inclusive (1-based; j defaults to the last;
 * j = i-1 gives an empty slice). */
static int t_slice(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    need_rows(L, t, "slice");
    int64_t n = t->shape[0];
    lua_Integer i = luaL_checkinteger(L, 2), j = luaL_optinteger(L, 3, -1);
    int64_t a = i < 0 ? (int64_t)i + n : (int64_t)i - 1, b = j < 0 ? (int64_t)j + n : (int64_t)j - 1;
    if (i == 0 || j == 0 || a < 0 || a > n || b >= n || b < a - 1)
        return lfail(L, "slice: rows %lld..%lld out of range for %s (rows 1..%lld)", (long long)i, (long long)j,
                     SR_SHAPE(t), (long long)n);
    return push_rows(L, t, a, b - a + 1);
}

/* t:row(i): row i of dim 0 as a view that keeps the dim: (1, ...). */
static int t_row(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    need_rows(L, t, "row");
    int64_t r = check_index(L, luaL_checkinteger(L, 2), t->shape[0], "row", 0, t);
    return push_rows(L, t, r, 1);
}

/* t:unsqueeze(d): a view with a size-1 dim inserted at position d (1..dim+1). */
static int t_unsqueeze(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    if (t->ndim >= SR_MAXDIM)
        return lfail(L, "unsqueeze: %s already has %d dims", SR_SHAPE(t), t->ndim);
    int d = check_dim(L, 2, t->ndim + 1, "unsqueeze", t);
    int64_t shape[SR_MAXDIM];
    for (int i = 0, k = 0; i <= t->ndim; i++)
        shape[i] = i == d ? 1 : t->shape[k++];
    sr_tensor *v = sr_lua_new_tensor(L);
    if (sr_tensor_reshape(v, t, t->ndim + 1, shape))
        return sr_lua_fail(L);
    return 1;
}

/* t:squeeze([d]): drop dim d (which must have size 1), or all size-1 dims. */
static int t_squeeze(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    int only = -1;
    if (!lua_isnoneornil(L, 2)) {
        only = check_dim(L, 2, t->ndim, "squeeze", t);
        if (t->shape[only] != 1)
            return lfail(L, "squeeze: dim %d of %s has size %lld, not 1", only + 1, SR_SHAPE(t),
                         (long long)t->shape[only]);
    }
    int64_t shape[SR_MAXDIM];
    int nd = 0;
    for (int i = 0; i < t->ndim; i++)
        if (!(t->shape[i] == 1 && (only < 0 || only == i)))
            shape[nd++] = t->shape[i];
    sr_tensor *v = sr_lua_new_tensor(L);
    if (sr_tensor_reshape(v, t, nd, shape))
        return sr_lua_fail(L);
    return 1;
}

/* --- elements ----------------------------------------------------------- */

/* Flat position of the indices at args first.. (one per dim, 1-based). */
static int64_t flat_index(lua_State *L, sr_tensor *t, int first, const char *op)
{
    int given = lua_gettop(L) - first + 1;
    if (given < 0)
        given = 0;
    if (given != t->ndim)
        lfail(L, "%s: %d indices for a %d-D tensor %s (one per dim, 1-based)", op, given, t->ndim, SR_SHAPE(t));
    int64_t flat = 0;
    for (int d = 0; d < t->ndim; d++) {
        lua_Integer i = check_int(L, first + d, op, "an index");
        flat = flat * t->shape[d] + check_index(L, i, t->shape[d], op, d, t);
    }
    return flat;
}

static int t_get(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    int64_t i = flat_index(L, t, 2, "get");
    lua_pushnumber(L, sr_get_flat(t, i));
    return 1;
}

/* t:set(value, i, j, ...) -> t */
static int t_set(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    double v = luaL_checknumber(L, 2);
    int64_t i = flat_index(L, t, 3, "set");
    sr_set_flat(t, i, v);
    lua_settop(L, 1);
    return 1;
}

static void push_level(lua_State *L, const sr_tensor *t, int d, int64_t *pos)
{
    if (d == t->ndim) {
        lua_pushnumber(L, sr_get_flat(t, (*pos)++));
        return;
    }
    luaL_checkstack(L, 2, "totable");
    int64_t n = t->shape[d];
    lua_createtable(L, n < INT_MAX ? (int)n : 0, 0);
    for (int64_t i = 0; i < n; i++) {
        push_level(L, t, d + 1, pos);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

/* t:totable(): nested Lua tables (a number for a 0-d tensor). */
static int t_totable(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    if (!t->storage)
        return luaL_error(L, "totable: empty tensor");
    int64_t pos = 0;
    push_level(L, t, 0, &pos);
    return 1;
}

/* t:fill(v): in place, returns t. */
static int t_fill(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    sr_tensor_fill(t, luaL_checknumber(L, 2));
    lua_settop(L, 1);
    return 1;
}

/* t:copy(u): u's values into t in place (same shape; dtype converted, as
 * asked for explicitly), returns t. */
static int t_copy(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1), *u = sr_lua_check_tensor(L, 2);
    if (!sr_same_shape(t, u))
        return lfail(L, "copy: source %s and destination %s shapes differ", SR_SHAPE(u), SR_SHAPE(t));
    if (sr_tensor_assign(t, u))
        return sr_lua_fail(L);
    lua_settop(L, 1);
    return 1;
}

/* --- arithmetic --------------------------------------------------------- */

/* a op b with tensors and numbers on either side (metamethods and
 * methods share this: for t:add(u) the tensor is argument 1). */
static int arith(lua_State *L, sr_binop op)
{
    const char *name = sr_binop_name(op);
    sr_tensor *a = sr_lua_test_tensor(L, 1), *b = sr_lua_test_tensor(L, 2);
    sr_tensor *o;
    if (a && b) {
        o = sr_lua_new_tensor(L);
        if (sr_binary(o, a, b, op))
            return sr_lua_fail(L);
    } else if (a && lua_type(L, 2) == LUA_TNUMBER) {
        double s = lua_tonumber(L, 2);
        o = sr_lua_new_tensor(L);
        if (sr_binary_scalar(o, a, s, op, 0))
            return sr_lua_fail(L);
    } else if (b && lua_type(L, 1) == LUA_TNUMBER) {
        double s = lua_tonumber(L, 1);
        o = sr_lua_new_tensor(L);
        if (sr_binary_scalar(o, b, s, op, 1))
            return sr_lua_fail(L);
    } else {
        return lfail(L, "%s: expected tensors or numbers, got %s and %s", name, type_name(L, 1), type_name(L, 2));
    }
    return tracked(L);
}

static int t_add(lua_State *L) { return arith(L, SR_OP_ADD); }
static int t_sub(lua_State *L) { return arith(L, SR_OP_SUB); }
static int t_mul(lua_State *L) { return arith(L, SR_OP_MUL); }
static int t_div(lua_State *L) { return arith(L, SR_OP_DIV); }
static int t_pow(lua_State *L) { return arith(L, SR_OP_POW); }
static int t_maximum(lua_State *L) { return arith(L, SR_OP_MAXIMUM); }
static int t_minimum(lua_State *L) { return arith(L, SR_OP_MINIMUM); }

static int unary(lua_State *L, sr_unop op)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    sr_tensor *o = sr_lua_new_tensor(L);
    if (sr_unary(o, t, op))
        return sr_lua_fail(L);
    return tracked(L);
}

static int t_neg(lua_State *L) { return unary(L, SR_OP_NEG); }
static int t_abs(lua_State *L) { return unary(L, SR_OP_ABS); }
static int t_sqrt(lua_State *L) { return unary(L, SR_OP_SQRT); }
static int t_exp(lua_State *L) { return unary(L, SR_OP_EXP); }
static int t_log(lua_State *L) { return unary(L, SR_OP_LOG); }
static int t_square(lua_State *L) { return unary(L, SR_OP_SQUARE); }
static int t_sign(lua_State *L) { return unary(L, SR_OP_SIGN); }

/* __unm receives the operand twice; only the first matters. */
static int t_unm(lua_State *L)
{
    lua_settop(L, 1);
    return unary(L, SR_OP_NEG);
}

/* t:clamp(lo, hi): nil for an open side. */
static int t_clamp(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    double lo = luaL_optnumber(L, 2, -INFINITY), hi = luaL_optnumber(L, 3, INFINITY);
    sr_tensor *o = sr_lua_new_tensor(L);
    if (sr_clamp(o, t, lo, hi))
        return sr_lua_fail(L);
    return tracked(L);
}

/* --- reductions --------------------------------------------------------- */

/* t:sum() -> number; t:sum(d [, keepdim]) -> tensor.  For max/min: with
 * no dim, value and 1-based flat position; with a dim, values and 1-based
 * positions along it (a float64 tensor).  argmax / argmin return the
 * positions only. */
static int reduce(lua_State *L, sr_reduce_op op, int positions_only, const char *name)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    int is_arg = op == SR_RED_MAX || op == SR_RED_MIN;
    if (lua_isnoneornil(L, 2)) {
        double v;
        int64_t idx = 0;
        if (sr_reduce_all(t, op, &v, &idx))
            return sr_lua_fail(L);
        if (positions_only) {
            lua_pushinteger(L, idx + 1);
            return 1;
        }
        lua_pushnumber(L, v);
        if (is_arg) {
            lua_pushinteger(L, idx + 1);
            return 2;
        }
        return 1;
    }
    int d = check_dim(L, 2, t->ndim, name, t);
    int keep = lua_toboolean(L, 3);
    sr_tensor *vals = sr_lua_new_tensor(L);
    sr_tensor *pos = is_arg ? sr_lua_new_tensor(L) : NULL;
    if (sr_reduce_dim(vals, pos, t, op, d, keep))
        return sr_lua_fail(L);
    if (pos && sr_binary_scalar(pos, pos, 1, SR_OP_ADD, 0)) /* in place: 1-based */
        return sr_lua_fail(L);
    track_at(L, -1);
    if (!pos || positions_only)
        return 1;
    track_at(L, -2);
    return 2;
}

static int t_sum(lua_State *L) { return reduce(L, SR_RED_SUM, 0, "sum"); }
static int t_mean(lua_State *L) { return reduce(L, SR_RED_MEAN, 0, "mean"); }
static int t_norm(lua_State *L) { return reduce(L, SR_RED_NORM, 0, "norm"); }
static int t_max(lua_State *L) { return reduce(L, SR_RED_MAX, 0, "max"); }
static int t_min(lua_State *L) { return reduce(L, SR_RED_MIN, 0, "min"); }
static int t_argmax(lua_State *L) { return reduce(L, SR_RED_MAX, 1, "argmax"); }
static int t_argmin(lua_State *L) { return reduce(L, SR_RED_MIN, 1, "argmin"); }

static int t_dot(lua_State *L)
{
    sr_tensor *a = sr_lua_check_tensor(L, 1), *b = sr_lua_check_tensor(L, 2);
    double v;
    if (sr_dot(a, b, &v))
        return sr_lua_fail(L);
    lua_pushnumber(L, v);
    return 1;
}

static int t_matmul(lua_State *L)
{
    sr_tensor *a = sr_lua_check_tensor(L, 1), *b = sr_lua_check_tensor(L, 2);
    sr_tensor *o = sr_lua_new_tensor(L);
    if (sr_matmul(o, a, b))
        return sr_lua_fail(L);
    return tracked(L);
}

/* t:t() / t:transpose(): the 2-D transpose; t:transpose(a, b): dims a and
 * b swapped (1-based).  Always a copy (storage is contiguous). */
static int t_transpose(lua_State *L)
{
    sr_tensor *a = sr_lua_check_tensor(L, 1);
    int swap = !lua_isnoneornil(L, 2);
    int d0 = swap ? check_dim(L, 2, a->ndim, "transpose", a) : 0;
    int d1 = swap ? check_dim(L, 3, a->ndim, "transpose", a) : 1;
    sr_tensor *o = sr_lua_new_tensor(L);
    if (swap ? sr_transpose_dims(o, a, d0, d1) : sr_transpose(o, a))
        return sr_lua_fail(L);
    return tracked(L);
}

/* t:index{i, j, ...} or t:index(idx_tensor): rows of dim 0 (1-based). */
static int t_index(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    need_rows(L, t, "index");
    lua_settop(L, 2);
    sr_tensor *it = sr_lua_test_tensor(L, 2);
    int64_t n;
    if (it) {
        if (it->ndim != 1)
            return lfail(L, "index: an index tensor must be 1-D, got %s", SR_SHAPE(it));
        n = it->shape[0];
    } else {
        luaL_checktype(L, 2, LUA_TTABLE);
        n = (int64_t)luaL_len(L, 2);
    }
    /* The index buffer lives in a userdata so an error below frees it. */
    int64_t *idx = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *idx, 0);
    for (int64_t i = 0; i < n; i++) {
        lua_Integer v;
        if (it) {
            double x = sr_get_flat(it, i);
            if (x != floor(x) || fabs(x) > 9e15)
                return lfail(L, "index: entry %lld (%g) is not an integer", (long long)i + 1, x);
            v = (lua_Integer)x;
        } else {
            lua_geti(L, 2, (lua_Integer)i + 1);
            v = check_int(L, -1, "index", "a row index");
            lua_pop(L, 1);
        }
        idx[i] = check_index(L, v, t->shape[0], "index", 0, t);
    }
    sr_tensor *o = sr_lua_new_tensor(L);
    if (sr_index_select(o, t, idx, n))
        return sr_lua_fail(L);
    return tracked(L);
}

static int t_isfinite(lua_State *L)
{
    lua_pushboolean(L, sr_find_nonfinite(sr_lua_check_tensor(L, 1)) < 0);
    return 1;
}

/* srgeo.check_finite(t [, name]) -> t, or an error naming the first bad
 * element (1-based index) and its value. */
static int l_check_finite(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    const char *name = sr_lua_opt_cstring(L, 2, "check_finite", "tensor");
    int64_t i = sr_find_nonfinite(t);
    if (i >= 0) {
        char ib[SR_MAXDIM * 24];
        double v = sr_get_flat(t, i);
        return lfail(L, "check_finite: %s %s has %s at %s (1-based; flat %lld)", name, SR_SHAPE(t),
                     isnan(v) ? "nan" : v > 0 ? "inf" : "-inf", sr_index_str(t, i, 1, ib, sizeof ib), (long long)i + 1);
    }
    lua_settop(L, 1);
    return 1;
}

/* srgeo.cat({a, b, ...} [, dim]) / srgeo.stack(...): dim is 1-based
 * (default 1); tensors are anchored by the list table while C holds their
 * pointers. */
static int join(lua_State *L, int stack)
{
    const char *op = stack ? "stack" : "cat";
    lua_settop(L, 2); /* the pointer buffer below goes to slot 3 */
    luaL_checktype(L, 1, LUA_TTABLE);
    /* Raw access: the tensors must stay anchored in this table while C
     * holds their pointers (an __index could hand out unanchored ones). */
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    if (n < 1)
        return lfail(L, "%s: empty list of tensors", op);
    if (n > INT_MAX / 2)
        return lfail(L, "%s: %lld tensors is too many", op, (long long)n);
    const sr_tensor **ts = lua_newuserdatauv(L, (size_t)n * sizeof *ts, 0);
    for (lua_Integer i = 0; i < n; i++) {
        lua_rawgeti(L, 1, i + 1);
        ts[i] = sr_lua_test_tensor(L, -1);
        if (!ts[i])
            return lfail(L, "%s: entry %lld is a %s, expected a tensor", op, (long long)i + 1, luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    int d = 0;
    if (!lua_isnoneornil(L, 2))
        d = check_dim(L, 2, ts[0]->ndim + stack, op, ts[0]);
    sr_tensor *o = sr_lua_new_tensor(L);
    if (stack ? sr_stack(o, ts, (int)n, d) : sr_cat(o, ts, (int)n, d))
        return sr_lua_fail(L);
    return tracked(L);
}

static int l_cat(lua_State *L) { return join(L, 0); }
static int l_stack(lua_State *L) { return join(L, 1); }

/* --- tostring: a torch-like preview ------------------------------------- */

#define PV_EDGE 3        /* entries shown at each end of a summarised dim */
#define PV_SUMMARY 200   /* summarise above this many elements */
#define PV_LINE 96       /* wrap rows of the last dim at this width */

typedef struct {
    const sr_tensor *t;
    int summarize;
    /* format chosen from the shown values */
    int all_int, sci, width;
    double maxabs, minabs;
    luaL_Buffer *b;
    int col;
} preview;

static int pv_shown(const preview *p, int64_t n, int64_t i)
{
    return !p->summarize || n <= 2 * PV_EDGE || i < PV_EDGE || i >= n - PV_EDGE;
}

static int pv_format(const preview *p, double v, char *buf, size_t n)
{
    if (isnan(v))
        return snprintf(buf, n, "nan");
    if (isinf(v))
        return snprintf(buf, n, v > 0 ? "inf" : "-inf");
    if (p->all_int)
        return snprintf(buf, n, "%.0f.", v);
    return snprintf(buf, n, p->sci ? "%.4e" : "%.4f", v);
}

/* mode 0: gather statistics; 1: widths; 2: print. */
static void pv_walk(preview *p, int mode, int d, int64_t off)
{
    const sr_tensor *t = p->t;
    int64_t n = t->shape[d], stride = 1;
    for (int i = d + 1; i < t->ndim; i++)
        stride *= t->shape[i];
    char buf[64];
    if (mode == 2) {
        luaL_addchar(p->b, '[');
        p->col++;
    }
    int first = 1;
    for (int64_t i = 0; i < n; i++) {
        if (!pv_shown(p, n, i)) {
            if (mode == 2) {
                if (d == t->ndim - 1) {
                    luaL_addstring(p->b, ", ...");
                    p->col += 5;
                } else {
                    luaL_addstring(p->b, ",\n");
                    for (int k = 0; k <= d; k++)
                        luaL_addchar(p->b, ' ');
                    luaL_addstring(p->b, "...");
                    p->col = d + 4;
                }
            }
            i = n - PV_EDGE - 1;
            continue;
        }
        int64_t o = off + i * stride;
        if (d == t->ndim - 1) {
            double v = sr_get_flat(t, o);
            if (mode == 0) {
                double a = fabs(v);
                if (isfinite(v)) {
                    if (v != floor(v) || a >= 1e15)
                        p->all_int = 0;
                    if (a > p->maxabs)
                        p->maxabs = a;
                    if (a > 0 && a < p->minabs)
                        p->minabs = a;
                }
            } else {
                int w = pv_format(p, v, buf, sizeof buf);
                if (mode == 1) {
                    if (w > p->width)
                        p->width = w;
                } else {
                    if (!first) {
                        luaL_addchar(p->b, ',');
                        p->col++;
                        if (p->col + p->width + 2 > PV_LINE) {
                            luaL_addchar(p->b, '\n');
                            for (int k = 0; k <= d; k++)
                                luaL_addchar(p->b, ' ');
                            p->col = d + 1;
                        } else {
                            luaL_addchar(p->b, ' ');
                            p->col++;
                        }
                    }
                    for (int k = w; k < p->width; k++)
                        luaL_addchar(p->b, ' ');
                    luaL_addstring(p->b, buf);
                    p->col += p->width > w ? p->width : w;
                }
            }
        } else {
            if (mode == 2 && !first) {
                luaL_addchar(p->b, ',');
                for (int k = d; k < t->ndim - 1; k++)
                    luaL_addchar(p->b, '\n');
                for (int k = 0; k <= d; k++)
                    luaL_addchar(p->b, ' ');
                p->col = d + 1;
            }
            pv_walk(p, mode, d + 1, o);
        }
        first = 0;
    }
    if (mode == 2) {
        luaL_addchar(p->b, ']');
        p->col++;
    }
}

static int t_tostring(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    luaL_Buffer b;
    char head[160];
    int64_t n = sr_numel(t);
    snprintf(head, sizeof head, "tensor%s %s", SR_SHAPE(t), sr_dtype_name(t->dtype));
    luaL_buffinit(L, &b);
    luaL_addstring(&b, head);
    if (!t->storage) {
        luaL_addstring(&b, " (empty)");
    } else if (t->ndim == 0) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.8g", sr_get_flat(t, 0));
        luaL_addchar(&b, ' ');
        luaL_addstring(&b, buf);
    } else if (n == 0) {
        luaL_addstring(&b, " []");
    } else {
        preview p = {.t = t, .summarize = n > PV_SUMMARY, .all_int = 1, .minabs = INFINITY, .b = &b};
        pv_walk(&p, 0, 0, 0);
        p.sci = !p.all_int && (p.maxabs >= 1e5 || (p.minabs < 1e-4 && p.minabs < INFINITY) ||
                               (p.maxabs > 0 && p.maxabs / p.minabs >= 1e6));
        pv_walk(&p, 1, 0, 0);
        luaL_addchar(&b, '\n');
        pv_walk(&p, 2, 0, 0);
    }
    luaL_pushresult(&b);
    return 1;
}

/* --- npy ---------------------------------------------------------------- */

static int l_npy_load(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "npy.load");
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_npy_load(t, path))
        return sr_lua_fail(L);
    return tracked(L);
}

static int l_npy_save(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "npy.save");
    sr_tensor *t = sr_lua_check_tensor(L, 2);
    sr_lua_clean_tmp(L, path);
    if (sr_npy_save(path, t))
        return sr_lua_fail(L);
    return 0;
}

/* --- registration ------------------------------------------------------- */

static const luaL_Reg tensor_methods[] = {
    {"shape", t_shape},
    {"size", t_size},
    {"dim", t_dim},
    {"numel", t_numel},
    {"hash", t_hash},
    {"dtype", t_dtype},
    {"double", t_double},
    {"float", t_float},
    {"clone", t_clone},
    {"reshape", t_reshape},
    {"view", t_reshape},
    {"narrow", t_narrow},
    {"slice", t_slice},
    {"row", t_row},
    {"unsqueeze", t_unsqueeze},
    {"squeeze", t_squeeze},
    {"get", t_get},
    {"set", t_set},
    {"totable", t_totable},
    {"fill", t_fill},
    {"copy", t_copy},
    {"add", t_add},
    {"sub", t_sub},
    {"mul", t_mul},
    {"div", t_div},
    {"pow", t_pow},
    {"maximum", t_maximum},
    {"minimum", t_minimum},
    {"neg", t_neg},
    {"abs", t_abs},
    {"sqrt", t_sqrt},
    {"exp", t_exp},
    {"log", t_log},
    {"square", t_square},
    {"sign", t_sign},
    {"clamp", t_clamp},
    {"sum", t_sum},
    {"mean", t_mean},
    {"norm", t_norm},
    {"max", t_max},
    {"min", t_min},
    {"argmax", t_argmax},
    {"argmin", t_argmin},
    {"dot", t_dot},
    {"matmul", t_matmul},
    {"t", t_transpose},
    {"transpose", t_transpose},
    {"index", t_index},
    {"isfinite", t_isfinite},
    {NULL, NULL},
};

static const luaL_Reg tensor_meta[] = {
    {"__gc", t_gc},
    {"__close", t_gc},
    {"__len", t_len},
    {"__tostring", t_tostring},
    {"__add", t_add},
    {"__sub", t_sub},
    {"__mul", t_mul},
    {"__div", t_div},
    {"__pow", t_pow},
    {"__unm", t_unm},
    {NULL, NULL},
};

static const luaL_Reg tensor_funcs[] = {
    {"tensor", l_tensor},
    {"zeros", l_zeros},
    {"ones", l_ones},
    {"full", l_full},
    {"randn", l_randn},
    {"rand", l_rand},
    {"hashrand", l_hashrand},
    {"arange", l_arange},
    {"cat", l_cat},
    {"stack", l_stack},
    {"check_finite", l_check_finite},
    {NULL, NULL},
};

static const luaL_Reg npy_funcs[] = {
    {"load", l_npy_load},
    {"save", l_npy_save},
    {NULL, NULL},
};

void sr_lua_open_tensor(lua_State *L)
{
    gc_budget *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    /* SRGEO_GC_MIN_MB: a smaller slack trades collections for memory (the
     * memory-growth test uses it to see a plateau within a few MB) */
    const char *env = getenv("SRGEO_GC_MIN_MB");
    long mb = env ? strtol(env, NULL, 10) : 0;
    b->min = mb > 0 && mb < (1L << 20) ? (size_t)mb << 20 : SR_GC_MIN;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &budget_key);
    luaL_newmetatable(L, SR_TENSOR_MT);
    luaL_setfuncs(L, tensor_meta, 0);
    luaL_newlib(L, tensor_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_setfuncs(L, tensor_funcs, 0);
    luaL_newlib(L, npy_funcs);
    lua_setfield(L, -2, "npy");
}
