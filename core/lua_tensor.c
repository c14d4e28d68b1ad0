/* lua_tensor.c - the srgeo.tensor userdata: constructors, metamethods,
 * methods.  (Minimal core; extended by the tensor-ops work.) */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lua_srgeo.h"
#include "rng.h"

static int t_gc(lua_State *L)
{
    sr_tensor *t = luaL_checkudata(L, 1, SR_TENSOR_MT);
    sr_tensor_free(t);
    return 0;
}

sr_tensor *sr_lua_new_tensor(lua_State *L)
{
    sr_tensor *t = lua_newuserdatauv(L, sizeof *t, 0);
    *t = (sr_tensor)SR_TENSOR_INIT;
    luaL_setmetatable(L, SR_TENSOR_MT);
    return t;
}

sr_tensor *sr_lua_test_tensor(lua_State *L, int idx) { return luaL_testudata(L, idx, SR_TENSOR_MT); }

sr_tensor *sr_lua_check_tensor(lua_State *L, int idx)
{
    sr_tensor *t = luaL_testudata(L, idx, SR_TENSOR_MT);
    if (!t)
        luaL_typeerror(L, idx, "srgeo tensor");
    return t;
}

static int l_zeros(lua_State *L)
{
    int64_t shape[SR_MAXDIM];
    int nd = sr_lua_check_shape(L, 1, shape);
    sr_dtype dt = sr_lua_opt_dtype(L, lua_istable(L, 1) ? 2 : nd + 1, SR_F32);
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_tensor_zeros(t, dt, nd, shape))
        return sr_lua_fail(L);
    return 1;
}

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
    return 1;
}

static int l_randn(lua_State *L) { return random_tensor(L, 1); }
static int l_rand(lua_State *L) { return random_tensor(L, 0); }

static int t_shape(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    lua_createtable(L, t->ndim, 0);
    for (int i = 0; i < t->ndim; i++) {
        lua_pushinteger(L, t->shape[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int t_len(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    lua_pushinteger(L, t->ndim ? t->shape[0] : 0);
    return 1;
}

static int t_convert(lua_State *L, sr_dtype dt)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    sr_tensor *o = sr_lua_new_tensor(L);
    if (sr_tensor_convert(o, t, dt))
        return sr_lua_fail(L);
    return 1;
}
static int t_double(lua_State *L) { return t_convert(L, SR_F64); }
static int t_float(lua_State *L) { return t_convert(L, SR_F32); }

static int t_dtype(lua_State *L)
{
    lua_pushstring(L, sr_dtype_name(sr_lua_check_tensor(L, 1)->dtype));
    return 1;
}

static int t_tostring(lua_State *L)
{
    sr_tensor *t = sr_lua_check_tensor(L, 1);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    char buf[128];
    snprintf(buf, sizeof buf, "tensor%s %s [", SR_SHAPE(t), sr_dtype_name(t->dtype));
    luaL_addstring(&b, buf);
    int64_t n = sr_numel(t);
    for (int64_t i = 0; i < n && i < 8; i++) {
        snprintf(buf, sizeof buf, i ? ", %.6g" : "%.6g", sr_get_flat(t, i));
        luaL_addstring(&b, buf);
    }
    luaL_addstring(&b, n > 8 ? ", ...]" : "]");
    luaL_pushresult(&b);
    return 1;
}

static const luaL_Reg tensor_methods[] = {
    {"shape", t_shape},
    {"double", t_double},
    {"float", t_float},
    {"dtype", t_dtype},
    {NULL, NULL},
};

static const luaL_Reg tensor_meta[] = {
    {"__gc", t_gc},
    {"__close", t_gc},
    {"__len", t_len},
    {"__tostring", t_tostring},
    {NULL, NULL},
};

static const luaL_Reg tensor_funcs[] = {
    {"zeros", l_zeros},
    {"randn", l_randn},
    {"rand", l_rand},
    {NULL, NULL},
};

void sr_lua_open_tensor(lua_State *L)
{
    luaL_newmetatable(L, SR_TENSOR_MT);
    luaL_setfuncs(L, tensor_meta, 0);
    luaL_newlib(L, tensor_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_setfuncs(L, tensor_funcs, 0);
}
