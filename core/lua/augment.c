/* lua/augment.c - srgeo.augment: the trainer's reproducible data pipeline.
 *
 *   p = srgeo.augment.permutation(n, seed)           -- Lua list, a permutation of 1..n
 *   X = srgeo.augment.batch(images, idx [, {crop=4, flip=true, seed=0, out=tensor}])
 *         -- rows idx (1-based Lua list) of images (N,C,H,W), randomly
 *         -- cropped from the zero-padded image and flipped; out is reused
 *   Y = srgeo.augment.gaussian(X, sigma, seed [, clip])  -- X + sigma N(0,1) (a new tensor; clip: to [0,1])
 *   s = srgeo.augment.seed_mix(seed, a [, b])        -- derived seed (53 bits)
 *   U = srgeo.augment.uniform{n=, shape={C,H,W}, seed=0, first=0, dtype=}   -- noise images
 *   X = srgeo.augment.cat{t1, t2, ...}               -- srgeo.cat: concatenate along dim 0
 *   names = srgeo._listdir(dir)                      -- entries of a directory (or nil, msg)
 *
 * Seeds make every draw a function of (seed, row), so a batch is the same
 * whatever the thread count and whenever it is made (resume). */
#include <errno.h>
#include <string.h>

#include "data/augment.h"
#include "lua/aux.h"
#include "lua/open.h"
#include "tensor/tensor_ops.h"

static int l_permutation(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    luaL_argcheck(L, n >= 0 && n <= (1 << 30), 1, "length must be in 0..2^30");
    uint64_t seed = (uint64_t)luaL_optinteger(L, 2, 0);
    int64_t *p = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *p, 0);
    if (sr_permutation(p, n, seed))
        return sr_lua_fail(L);
    sr_lua_push_integers(L, p, n, 1);
    return 1;
}

static int l_batch(lua_State *L)
{
    sr_tensor *src = sr_lua_check_tensor(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int64_t n = (int64_t)luaL_len(L, 2);
    luaL_argcheck(L, n >= 1, 2, "empty index list");
    int pad = (int)sr_lua_opt_integer_in(L, 3, "augment.batch", "crop", 0, 0, 65536);
    int flip = sr_lua_opt_boolean(L, 3, "augment.batch", "flip", 0);
    uint64_t seed = (uint64_t)sr_lua_opt_integer(L, 3, "augment.batch", "seed", 0);
    int out_idx = 0;
    if (lua_istable(L, 3)) {
        lua_getfield(L, 3, "out");
        if (sr_lua_test_tensor(L, -1))
            out_idx = lua_gettop(L);
        else
            lua_pop(L, 1);
    }
    int64_t *idx = lua_newuserdatauv(L, (size_t)n * sizeof *idx, 0);
    for (int64_t i = 0; i < n; i++) {
        lua_geti(L, 2, i + 1);
        int ok;
        idx[i] = lua_tointegerx(L, -1, &ok) - 1;
        if (!ok)
            return luaL_error(L, "augment.batch: index %d is not an integer", (int)i + 1);
        lua_pop(L, 1);
    }
    sr_tensor *out;
    if (out_idx) {
        lua_pushvalue(L, out_idx);
        out = sr_lua_check_tensor(L, -1);
    } else {
        out = sr_lua_new_tensor(L);
    }
    if (sr_augment_batch(out, src, idx, n, pad, flip, seed))
        return sr_lua_fail(L);
    return 1;
}

static int l_gaussian(lua_State *L)
{
    sr_tensor *x = sr_lua_check_tensor(L, 1);
    double sigma = luaL_checknumber(L, 2);
    uint64_t seed = (uint64_t)luaL_optinteger(L, 3, 0);
    int clip = lua_toboolean(L, 4);
    sr_tensor *y = sr_lua_new_tensor(L);
    if (sr_tensor_copy(y, x) || sr_add_gaussian(y, sigma, seed) || (clip && sr_clamp(y, y, 0, 1)))
        return sr_lua_fail(L);
    return 1;
}

/* seed_mix(seed, a [, b]): a derived seed (splitmix64 finalisers). */
static int l_seed_mix(lua_State *L)
{
    uint64_t s = (uint64_t)luaL_checkinteger(L, 1), a = (uint64_t)luaL_checkinteger(L, 2),
             b = (uint64_t)luaL_optinteger(L, 3, 0);
    /* 53 bits, so the seed round-trips through JSON (doubles) exactly. */
    lua_pushinteger(L, (lua_Integer)(sr_seed_mix(s, a, b) >> 11));
    return 1;
}

static int l_uniform(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, 1, "n");
    lua_Integer n = luaL_checkinteger(L, -1);
    lua_getfield(L, 1, "shape");
    int64_t shape[SR_MAXDIM];
    luaL_argcheck(L, lua_istable(L, -1), 1, "uniform: shape={C,H,W} is required");
    int nd = sr_lua_check_shape(L, lua_gettop(L), shape + 1);
    luaL_argcheck(L, nd + 1 <= SR_MAXDIM && n >= 0, 1, "uniform: bad n or shape");
    shape[0] = n;
    lua_getfield(L, 1, "first");
    lua_Integer first = luaL_optinteger(L, -1, 0);
    lua_getfield(L, 1, "dtype");
    sr_dtype dt = sr_lua_opt_dtype(L, lua_gettop(L), SR_F32);
    uint64_t seed = (uint64_t)sr_lua_opt_integer(L, 1, "augment.uniform", "seed", 0);
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_tensor_alloc(t, dt, nd + 1, shape) || (n > 0 && sr_fill_uniform_rows(t, seed, first)))
        return sr_lua_fail(L);
    return 1;
}

static int l_listdir(lua_State *L)
{
    const char *dir = sr_lua_check_cstring(L, 1, "augment.listdir");
    if (sr_lua_push_dir_names(L, dir) >= 0)
        return 1;
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", dir, strerror(errno));
    return 2;
}

static const luaL_Reg augment_funcs[] = {
    {"permutation", l_permutation}, {"batch", l_batch}, {"gaussian", l_gaussian}, {"uniform", l_uniform},
    {"seed_mix", l_seed_mix},       {NULL, NULL},
};

void sr_lua_open_augment(lua_State *L)
{
    luaL_newlib(L, augment_funcs);
    lua_getfield(L, -2, "cat"); /* srgeo.cat (lua/tensor.c, opened first) */
    lua_setfield(L, -2, "cat");
    lua_setfield(L, -2, "augment");
    lua_pushcfunction(L, l_listdir);
    lua_setfield(L, -2, "_listdir");
}
