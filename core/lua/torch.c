/* lua/torch.c - srgeo.torch: PyTorch checkpoints read without Python.
 *
 *   obj = srgeo.torch.load(path [, dtype])
 *
 * The object torch.save wrote, rebuilt by io/pth.c's restricted unpickler:
 * dicts (OrderedDict too) become tables keyed by their str / int keys,
 * lists and tuples arrays, tensors srgeo tensors (float64 storages as
 * float64, every other dtype as float32 — F16/BF16 widened exactly, integer
 * buffers such as num_batches_tracked converted — unless dtype is given).
 * A value the pickle shares (memo) is one Lua value; nesting deeper than
 * MAX_DEPTH is an error.  Finding the state_dict inside a checkpoint and
 * mapping its keys is srgeo.torchkeys' job (Lua).
 */
#include <string.h>

#include "io/pth.h"
#include "lua/aux.h"
#include "lua/open.h"

#define PTH_MT "srgeo.pth"
#define MAX_DEPTH 100

static int pth_gc(lua_State *L)
{
    sr_pth_file *f = luaL_checkudata(L, 1, PTH_MT);
    if (f->zip.path)
        sr_pth_close(f);
    return 0;
}

typedef struct conv {
    sr_pth_file *f;
    int cache;    /* stack index of {lightuserdata -> converted value} */
    int dtype;    /* -1: as stored */
} conv;

static void push_value(lua_State *L, const conv *c, const sr_pv *v, int depth)
{
    if (depth > MAX_DEPTH)
        luaL_error(L, "torch.load %s: values nested deeper than %d", c->f->zip.path, MAX_DEPTH);
    luaL_checkstack(L, 8, "torch.load");
    switch (v->kind) {
    case SR_PV_NONE: lua_pushnil(L); return;
    case SR_PV_BOOL: lua_pushboolean(L, (int)v->i); return;
    case SR_PV_INT: lua_pushinteger(L, (lua_Integer)v->i); return;
    case SR_PV_FLOAT: lua_pushnumber(L, v->f); return;
    case SR_PV_STR: lua_pushlstring(L, v->s, v->len); return;
    default: break;
    }
    /* Containers and tensors: once each, so shared values stay shared and a
     * cycle ends at its first repeat. */
    if (lua_rawgetp(L, c->cache, v) != LUA_TNIL)
        return;
    lua_pop(L, 1);
    if (v->kind == SR_PV_TENSOR) {
        sr_st_dtype st = sr_pth_tensor_dtype(c->f, v->t);
        sr_dtype dt = c->dtype >= 0 ? (sr_dtype)c->dtype : st == SR_ST_F64 || st == SR_ST_I64 || st == SR_ST_I32 ? SR_F64 : SR_F32;
        sr_tensor *t = sr_lua_new_tensor(L);
        if (sr_pth_read(c->f, v->t, t, dt))
            sr_lua_fail(L);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, c->cache, v);
        return;
    }
    if (v->kind != SR_PV_TUPLE && v->kind != SR_PV_LIST && v->kind != SR_PV_DICT)
        luaL_error(L, "torch.load %s: a %s value is not data", c->f->zip.path,
                   v->kind == SR_PV_GLOBAL ? "global" : "storage");
    int dict = v->kind == SR_PV_DICT;
    int n = dict ? v->n / 2 : v->n; /* a dict's items are key, value, key, ... */
    lua_createtable(L, dict ? 0 : n, dict ? n : 0);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, c->cache, v);
    for (int i = 0; i < n; i++) {
        if (dict) {
            const sr_pv *k = v->items[2 * i];
            if (k->kind != SR_PV_STR && k->kind != SR_PV_INT)
                luaL_error(L, "torch.load %s: a dict key of kind %s (only str and int keys are kept)",
                           c->f->zip.path, k->kind == SR_PV_NONE ? "None" : "tuple, float or bool");
            push_value(L, c, k, depth + 1);
            push_value(L, c, v->items[2 * i + 1], depth + 1);
            lua_rawset(L, -3);
        } else {
            push_value(L, c, v->items[i], depth + 1);
            lua_rawseti(L, -2, i + 1);
        }
    }
}

static int l_load(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "torch.load");
    int dtype = lua_isnoneornil(L, 2) ? -1 : (int)sr_lua_opt_dtype(L, 2, SR_F32);
    sr_pth_file *f = lua_newuserdatauv(L, sizeof *f, 0);
    memset(f, 0, sizeof *f);
    luaL_setmetatable(L, PTH_MT);
    if (sr_pth_open(f, path))
        return sr_lua_fail(L);
    int ud = lua_gettop(L);
    lua_newtable(L);
    conv c = {.f = f, .cache = lua_gettop(L), .dtype = dtype};
    push_value(L, &c, f->root, 0);
    sr_pth_close(f); /* now, not at the next collection: the file stays mapped until then */
    lua_replace(L, ud);
    lua_settop(L, ud);
    return 1;
}

static const luaL_Reg pth_meta[] = {{"__gc", pth_gc}, {"__close", pth_gc}, {NULL, NULL}};
static const luaL_Reg pth_methods[] = {{NULL, NULL}};
static const luaL_Reg torch_funcs[] = {{"load", l_load}, {NULL, NULL}};

void sr_lua_open_torch(lua_State *L)
{
    sr_lua_new_class(L, PTH_MT, pth_meta, pth_methods);
    luaL_newlib(L, torch_funcs);
    lua_setfield(L, -2, "torch");
}
