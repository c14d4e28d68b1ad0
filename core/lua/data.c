/* lua/data.c - the C half of srgeo.data: low-level readers and helpers that
 * lua/srgeo/data.lua builds dataset objects on.  They live in srgeo._data
 * (srgeo.data itself is the lazily loaded Lua module, which re-exports them).
 *
 *   store = _data.idx_images(path)        -- uint8 image store (userdata)
 *   labels = _data.idx_labels(path)       -- {0-based class ids}
 *   store, labels = _data.cifar{paths...} (or one path)
 *   X = store:gather(indices [, dtype])   -- 1-based indices -> (b,C,H,W) in [0,1]
 *   n, c, h, w = store:size() ; store:checksum() ; store:hash()
 *   X = _data.synth(kind, seed, indices, {c,h,w} [, {mean=,std=,alpha=,rmin=,rmax=}] [, dtype])
 *   labels = _data.synth_labels(seed, n, classes)
 *   idx = _data.permutation(n, k, seed)   -- k distinct 1-based indices of 1..n
 *   entries = _data.listdir(dir)          -- {{name=, dir=bool}, ...} sorted by name
 *   X = _data.gather(T, indices)          -- rows of any tensor
 *   X = _data.stack{t1, t2, ...}          -- srgeo.cat: concatenate along dim 0
 *   P = _data.radial_spectrum(T)          -- radially averaged power spectrum
 *   mn, mx, mean = _data.stats(T) ; d = _data.maxdiff(A, B)
 *
 * Indices are 1-based (Lua) here and 0-based in the core; labels are 0-based
 * class ids everywhere (they index classifier outputs, as in torchvision).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/synth.h"
#include "io/cifar.h"
#include "io/idx.h"
#include "lua/aux.h"
#include "lua/open.h"

#define SR_U8_MT "srgeo.u8images"

static sr_u8images *check_store(lua_State *L, int idx)
{
    return luaL_checkudata(L, idx, SR_U8_MT);
}

/* Created empty with its metatable before the reader allocates: a failed
 * read leaves nothing to leak, a later error is collected by __gc. */
static sr_u8images *new_store(lua_State *L)
{
    sr_u8images *s = lua_newuserdatauv(L, sizeof *s, 0);
    *s = (sr_u8images)SR_U8IMAGES_INIT;
    luaL_setmetatable(L, SR_U8_MT);
    return s;
}

static int store_gc(lua_State *L)
{
    sr_u8images_free(check_store(L, 1));
    return 0;
}

/* A list of 1-based indices at idx -> 0-based int64 array (GC-owned
 * userdata pushed on the stack), each checked against [1, n] when n >= 0. */
static int64_t *check_indices(lua_State *L, int idx, int64_t n, int64_t *b)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    *b = (int64_t)luaL_len(L, idx);
    int64_t *v = lua_newuserdatauv(L, sizeof *v * (size_t)(*b ? *b : 1), 0);
    for (int64_t i = 0; i < *b; i++) {
        lua_geti(L, idx, i + 1);
        int ok;
        lua_Integer x = lua_tointegerx(L, -1, &ok);
        if (!ok || x < 1 || (n >= 0 && x > n)) {
            if (n >= 0)
                luaL_error(L, "index %s (entry %d) is not an item index in 1..%d",
                           luaL_tolstring(L, -1, NULL), (int)(i + 1), (int)n);
            luaL_error(L, "index %s (entry %d) is not a positive integer",
                       luaL_tolstring(L, -1, NULL), (int)(i + 1));
        }
        lua_pop(L, 1);
        v[i] = x - 1;
    }
    return v;
}

static int store_gather(lua_State *L)
{
    sr_u8images *s = check_store(L, 1);
    lua_settop(L, 3); /* check_indices pushes its buffer above the arguments */
    int64_t b;
    int64_t *idx = check_indices(L, 2, s->n, &b);
    sr_dtype dt = sr_lua_opt_dtype(L, 3, SR_F32);
    luaL_argcheck(L, b > 0, 2, "empty index list");
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_u8images_gather(t, s, idx, b, dt))
        return sr_lua_fail(L);
    return 1;
}

static int store_size(lua_State *L)
{
    sr_u8images *s = check_store(L, 1);
    lua_pushinteger(L, s->n);
    lua_pushinteger(L, s->c);
    lua_pushinteger(L, s->h);
    lua_pushinteger(L, s->w);
    return 4;
}

static int store_len(lua_State *L)
{
    lua_pushinteger(L, check_store(L, 1)->n);
    return 1;
}

/* Sum of every pixel byte: a cheap fingerprint for tests. */
static int store_checksum(lua_State *L)
{
    sr_u8images *s = check_store(L, 1);
    int64_t n = s->n * sr_u8images_itemsize(s);
    uint64_t sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += s->data[i];
    lua_pushinteger(L, (lua_Integer)sum);
    return 1;
}

/* FNV-1a 64 of the bytes (order-sensitive, unlike the sum), as hex. */
static int store_hash(lua_State *L)
{
    sr_u8images *s = check_store(L, 1);
    int64_t n = s->n * sr_u8images_itemsize(s);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < n; i++)
        h = (h ^ s->data[i]) * 0x100000001b3ull;
    char buf[20];
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
    lua_pushstring(L, buf);
    return 1;
}

static int store_tostring(lua_State *L)
{
    sr_u8images *s = check_store(L, 1);
    lua_pushfstring(L, "u8images(%d x %d x %d x %d)", (int)s->n, (int)s->c, (int)s->h, (int)s->w);
    return 1;
}

static int l_idx_images(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "data.idx_images");
    sr_u8images *s = new_store(L);
    if (sr_idx_load_images(path, s))
        return sr_lua_fail(L);
    return 1;
}

static int l_idx_labels(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "data.idx_labels");
    int64_t *lab = NULL, n = 0;
    if (sr_idx_load_labels(path, &lab, &n))
        return sr_lua_fail(L);
    /* copy into a GC-owned buffer first so a Lua memory error cannot leak */
    int64_t *keep = lua_newuserdatauv(L, sizeof *keep * (size_t)(n ? n : 1), 0);
    memcpy(keep, lab, sizeof *keep * (size_t)n);
    free(lab);
    sr_lua_push_integers(L, keep, n, 0);
    return 1;
}

static int l_cifar(lua_State *L)
{
    if (lua_type(L, 1) == LUA_TSTRING) { /* one file: wrap it in a list */
        lua_createtable(L, 1, 0);
        lua_pushvalue(L, 1);
        lua_rawseti(L, -2, 1);
        lua_replace(L, 1);
    }
    lua_settop(L, 1);
    luaL_checktype(L, 1, LUA_TTABLE);
    int np = (int)luaL_len(L, 1);
    luaL_argcheck(L, np > 0, 1, "empty list of batch files");
    const char **paths = lua_newuserdatauv(L, sizeof *paths * (size_t)np, 0);
    for (int i = 0; i < np; i++) {
        lua_geti(L, 1, i + 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "cifar: paths[%d] is not a string", i + 1);
        paths[i] = sr_lua_to_cstring(L, -1, "cifar", "a path");
        lua_pop(L, 1);
    }
    sr_u8images *s = new_store(L);
    int64_t *lab = NULL, n = 0;
    if (sr_cifar_load(paths, np, s, &lab, &n))
        return sr_lua_fail(L);
    int64_t *keep = lua_newuserdatauv(L, sizeof *keep * (size_t)(n ? n : 1), 0);
    memcpy(keep, lab, sizeof *keep * (size_t)n);
    free(lab);
    lua_pushvalue(L, -2); /* the store; keep stays on the stack below it */
    sr_lua_push_integers(L, keep, n, 0);
    return 2;
}

static int l_synth(lua_State *L)
{
    lua_settop(L, 6);
    const char *kind = sr_lua_check_cstring(L, 1, "data.synth");
    uint64_t seed = (uint64_t)luaL_checkinteger(L, 2);
    int64_t b;
    int64_t *idx = check_indices(L, 3, -1, &b);
    luaL_argcheck(L, b > 0, 3, "empty index list");
    int64_t shape[SR_MAXDIM];
    luaL_checktype(L, 4, LUA_TTABLE);
    int nd = sr_lua_check_shape(L, 4, shape);
    luaL_argcheck(L, nd == 3, 4, "item shape must be {C, H, W}");
    sr_synth_opts o = SR_SYNTH_OPTS_INIT;
    if (sr_synth_kind_parse(kind, &o.kind))
        return sr_lua_fail(L);
    o.mean = sr_lua_opt_number(L, 5, "synth", "mean", o.mean);
    o.std = sr_lua_opt_number(L, 5, "synth", "std", o.std);
    o.alpha = sr_lua_opt_number(L, 5, "synth", "alpha", o.alpha);
    o.rmin = sr_lua_opt_number(L, 5, "synth", "rmin", o.rmin);
    o.rmax = sr_lua_opt_number(L, 5, "synth", "rmax", o.rmax);
    sr_dtype dt = sr_lua_opt_dtype(L, 6, SR_F32);
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_synth_items(t, &o, seed, idx, b, shape[0], shape[1], shape[2], dt))
        return sr_lua_fail(L);
    return 1;
}

static int l_synth_labels(lua_State *L)
{
    uint64_t seed = (uint64_t)luaL_checkinteger(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2), k = luaL_checkinteger(L, 3);
    luaL_argcheck(L, n >= 0 && n <= ((lua_Integer)1 << 31), 2, "count out of range");
    luaL_argcheck(L, k >= 1, 3, "need at least one class");
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 0; i < n; i++) {
        lua_pushinteger(L, sr_synth_label(seed, i, k));
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int l_permutation(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1), k = luaL_checkinteger(L, 2);
    uint64_t seed = (uint64_t)luaL_checkinteger(L, 3);
    luaL_argcheck(L, n >= 0 && n <= ((lua_Integer)1 << 31), 1, "count out of range");
    if (k < 0 || k > n)
        return luaL_error(L, "sample: cannot draw %d of %d items without replacement", (int)k,
                          (int)n);
    int64_t *p = lua_newuserdatauv(L, sizeof *p * (size_t)(k ? k : 1), 0);
    if (sr_sample_indices(p, n, k, seed))
        return sr_lua_fail(L);
    sr_lua_push_integers(L, p, k, 1);
    return 1;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Directory entries (no "." / ".."), sorted bytewise like Python's sorted()
 * on the names torchvision's ImageFolder sees; `dir` follows symlinks. */
static int l_listdir(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "data.listdir");
    /* names collected in a Lua table first (no C allocation to leak) */
    int n = sr_lua_push_dir_names(L, path);
    if (n < 0)
        return luaL_error(L, "listdir %s: %s", path, strerror(errno));
    const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(n ? n : 1), 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, -2, i + 1);
        names[i] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    lua_createtable(L, n, 0);
    luaL_Buffer b;
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 0, 2);
        lua_pushstring(L, names[i]);
        lua_setfield(L, -2, "name");
        luaL_buffinit(L, &b);
        luaL_addstring(&b, path);
        luaL_addchar(&b, '/');
        luaL_addstring(&b, names[i]);
        luaL_pushresult(&b);
        struct stat st;
        int isdir = stat(lua_tostring(L, -1), &st) == 0 && S_ISDIR(st.st_mode);
        lua_pop(L, 1);
        lua_pushboolean(L, isdir);
        lua_setfield(L, -2, "dir");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int l_gather(lua_State *L)
{
    sr_tensor *x = sr_lua_check_tensor(L, 1);
    luaL_argcheck(L, x->ndim >= 1 && x->storage, 1, "need a tensor with a batch dim");
    lua_settop(L, 2);
    int64_t b;
    int64_t *idx = check_indices(L, 2, x->shape[0], &b);
    luaL_argcheck(L, b > 0, 2, "empty index list");
    int64_t shape[SR_MAXDIM];
    memcpy(shape, x->shape, sizeof shape);
    shape[0] = b;
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_tensor_alloc(t, x->dtype, x->ndim, shape))
        return sr_lua_fail(L);
    size_t row = (size_t)sr_rowsize(x) * sr_dtype_size(x->dtype);
    for (int64_t i = 0; i < b; i++)
        memcpy((char *)sr_data(t) + i * row, (const char *)sr_data(x) + idx[i] * row, row);
    return 1;
}

static int l_radial_spectrum(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    luaL_argcheck(L, t->ndim >= 2, 1, "need (..., H, W)");
    int64_t H = t->shape[t->ndim - 2], W = t->shape[t->ndim - 1];
    int nb = (int)((H < W ? H : W) / 2 + 1);
    double *p = lua_newuserdatauv(L, sizeof *p * (size_t)nb, 0);
    if (sr_radial_spectrum(t, p, nb))
        return sr_lua_fail(L);
    sr_lua_push_numbers(L, p, nb);
    return 1;
}

/* min, max, mean of every element (for checks and summaries). */
static int l_stats(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    int64_t n = sr_numel(t);
    luaL_argcheck(L, n > 0 && t->storage, 1, "empty tensor");
    double mn = INFINITY, mx = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = sr_get_flat(t, i);
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        s += v;
    }
    lua_pushnumber(L, mn);
    lua_pushnumber(L, mx);
    lua_pushnumber(L, s / (double)n);
    return 3;
}

/* max |a - b| over two tensors of the same element count. */
static int l_maxdiff(lua_State *L)
{
    sr_tensor *a = sr_lua_check_tensor(L, 1), *b = sr_lua_check_tensor(L, 2);
    int64_t n = sr_numel(a);
    if (n != sr_numel(b))
        return luaL_error(L, "maxdiff: %s vs %s", SR_SHAPE(a), SR_SHAPE(b));
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(sr_get_flat(a, i) - sr_get_flat(b, i));
        m = d > m || d != d ? d : m;
    }
    lua_pushnumber(L, m);
    return 1;
}

static const luaL_Reg store_methods[] = {
    {"gather", store_gather},
    {"size", store_size},
    {"checksum", store_checksum},
    {"hash", store_hash},
    {NULL, NULL},
};

static const luaL_Reg store_meta[] = {
    {"__gc", store_gc},
    {"__len", store_len},
    {"__tostring", store_tostring},
    {NULL, NULL},
};

static const luaL_Reg data_funcs[] = {
    {"idx_images", l_idx_images},
    {"idx_labels", l_idx_labels},
    {"cifar", l_cifar},
    {"synth", l_synth},
    {"synth_labels", l_synth_labels},
    {"permutation", l_permutation},
    {"listdir", l_listdir},
    {"gather", l_gather},
    {"radial_spectrum", l_radial_spectrum},
    {"stats", l_stats},
    {"maxdiff", l_maxdiff},
    {NULL, NULL},
};

void sr_lua_open_data(lua_State *L)
{
    sr_lua_new_class(L, SR_U8_MT, store_meta, store_methods);
    luaL_newlib(L, data_funcs);
    lua_getfield(L, -2, "cat"); /* stack = srgeo.cat (lua/tensor.c, opened first) */
    lua_setfield(L, -2, "stack");
    lua_setfield(L, -2, "_data");
}
