/* lua/safetensors.c - srgeo.safetensors: open/inspect/read/write weight files.
 *
 *   f = srgeo.safetensors.open(path)   -- validated header, data mmapped
 *   f:keys() f:info(name) f:get(name [, dtype]) f:metadata() f:close()
 *   srgeo.safetensors.save(path, {name = tensor, ...} [, {key = "value"}])
 */
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "lua/aux.h"
#include "lua/open.h"

#define ST_MT "srgeo.safetensors"

static sr_st_file *check_st(lua_State *L, int idx)
{
    sr_st_file *f = luaL_checkudata(L, idx, ST_MT);
    if (!f->path)
        luaL_error(L, "safetensors: file is closed");
    return f;
}

/* f:close(), __close and __gc: idempotent, so a closed file may be collected. */
static int st_gc(lua_State *L)
{
    sr_st_file *f = luaL_checkudata(L, 1, ST_MT);
    if (f->path)
        sr_st_close(f);
    return 0;
}

static int l_open(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "safetensors.open");
    sr_st_file *f = lua_newuserdatauv(L, sizeof *f, 0);
    memset(f, 0, sizeof *f);
    luaL_setmetatable(L, ST_MT);
    if (sr_st_open(f, path))
        return sr_lua_fail(L);
    return 1;
}

static int st_keys(lua_State *L)
{
    sr_st_file *f = check_st(L, 1);
    lua_createtable(L, f->n, 0);
    for (int i = 0; i < f->n; i++) {
        lua_pushstring(L, f->entries[i].name);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static void push_info(lua_State *L, const sr_st_entry *e)
{
    lua_createtable(L, 0, 3);
    lua_pushstring(L, sr_st_dtype_name(e->dtype));
    lua_setfield(L, -2, "dtype");
    lua_createtable(L, e->ndim, 0);
    for (int d = 0; d < e->ndim; d++) {
        lua_pushinteger(L, e->shape[d]);
        lua_rawseti(L, -2, d + 1);
    }
    lua_setfield(L, -2, "shape");
    lua_pushinteger(L, (lua_Integer)(e->end - e->begin));
    lua_setfield(L, -2, "bytes");
}

static const sr_st_entry *check_entry(lua_State *L, sr_st_file *f, int idx)
{
    const char *name = sr_lua_check_cstring(L, idx, "safetensors");
    const sr_st_entry *e = sr_st_find(f, name);
    if (!e)
        luaL_error(L, "safetensors %s: no tensor named '%s'", f->path, name);
    return e;
}

static int st_info(lua_State *L)
{
    sr_st_file *f = check_st(L, 1);
    if (lua_isnoneornil(L, 2)) { /* all entries: name -> info */
        lua_createtable(L, 0, f->n);
        for (int i = 0; i < f->n; i++) {
            push_info(L, &f->entries[i]);
            lua_setfield(L, -2, f->entries[i].name);
        }
        return 1;
    }
    push_info(L, check_entry(L, f, 2));
    return 1;
}

/* f:get(name [, dtype]) -> new tensor; f:get(name, t) reads into t (same
 * shape, t's dtype; its storage is written in place) and returns t. */
static int st_get(lua_State *L)
{
    sr_st_file *f = check_st(L, 1);
    const sr_st_entry *e = check_entry(L, f, 2);
    sr_tensor *dst = sr_lua_test_tensor(L, 3);
    if (dst) {
        if (sr_st_read_into(f, e, dst))
            return sr_lua_fail(L);
        lua_settop(L, 3);
        return 1;
    }
    sr_dtype dt = sr_lua_opt_dtype(L, 3, e->dtype == SR_ST_F64 ? SR_F64 : SR_F32);
    sr_tensor *t = sr_lua_new_tensor(L);
    if (sr_st_read(f, e, t, dt))
        return sr_lua_fail(L);
    return 1;
}

static int st_metadata(lua_State *L)
{
    sr_st_file *f = check_st(L, 1);
    lua_createtable(L, 0, f->nmeta);
    for (int i = 0; i < f->nmeta; i++) {
        lua_pushstring(L, f->meta_vals[i]);
        lua_setfield(L, -2, f->meta_keys[i]);
    }
    return 1;
}

static int st_tostring(lua_State *L)
{
    sr_st_file *f = luaL_checkudata(L, 1, ST_MT);
    if (!f->path)
        lua_pushliteral(L, "safetensors (closed)");
    else
        lua_pushfstring(L, "safetensors %s: %d tensors, %d metadata keys", f->path, f->n, f->nmeta);
    return 1;
}

/* save(path, tensors, meta): tensors is {name = tensor} (written in sorted
 * name order, so files are reproducible) or a list of {name, tensor}. */
static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int l_save(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "safetensors.save");
    luaL_checktype(L, 2, LUA_TTABLE);
    int nmeta = 0, n = 0;
    /* Collect names (keeps strings alive: they stay in the tables). */
    lua_Integer len = luaL_len(L, 2);
    int list = len > 0;
    int cap = list ? (int)len : 0;
    if (!list) {
        lua_pushnil(L);
        while (lua_next(L, 2)) {
            cap++;
            lua_pop(L, 1);
        }
    }
    const char **names = lua_newuserdatauv(L, sizeof(char *) * (size_t)(cap + 1), 0);
    const sr_tensor **ts = lua_newuserdatauv(L, sizeof(sr_tensor *) * (size_t)(cap + 1), 0);
    int top = lua_gettop(L);
    if (list) {
        for (lua_Integer i = 1; i <= len; i++) {
            lua_geti(L, 2, i);
            if (!lua_istable(L, -1))
                return luaL_error(L, "safetensors.save: entry %d must be {name, tensor}", (int)i);
            lua_geti(L, -1, 1);
            names[n] = sr_lua_to_cstring(L, -1, "safetensors.save", "a tensor name");
            lua_geti(L, -2, 2);
            ts[n] = sr_lua_test_tensor(L, -1);
            if (!names[n] || !ts[n])
                return luaL_error(L, "safetensors.save: entry %d must be {name, tensor} with a string name",
                                  (int)i);
            n++;
            lua_settop(L, top); /* the strings/tensors stay referenced by table 2 */
        }
    } else {
        lua_pushnil(L);
        while (lua_next(L, 2)) {
            if (lua_type(L, -2) != LUA_TSTRING || !sr_lua_test_tensor(L, -1))
                return luaL_error(L, "safetensors.save: tensors must map names to tensors");
            names[n++] = sr_lua_to_cstring(L, -2, "safetensors.save", "a tensor name");
            lua_pop(L, 1);
        }
        qsort(names, (size_t)n, sizeof *names, cmp_str);
        for (int i = 0; i < n; i++) {
            lua_getfield(L, 2, names[i]);
            ts[i] = sr_lua_test_tensor(L, -1);
            lua_pop(L, 1);
        }
    }
    const char **meta = NULL;
    if (lua_istable(L, 3)) {
        int cnt = 0;
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            cnt++;
            lua_pop(L, 1);
        }
        meta = lua_newuserdatauv(L, sizeof(char *) * (size_t)(2 * cnt + 1), 0);
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                return luaL_error(L, "safetensors.save: metadata keys must be strings");
            /* Values are converted in place to strings (numbers allowed). */
            if (!lua_isstring(L, -1))
                return luaL_error(L, "safetensors.save: metadata '%s' must be a string or number",
                                  lua_tostring(L, -2));
            lua_pushvalue(L, -2);
            lua_insert(L, -2);
            lua_tostring(L, -1);
            lua_settable(L, 3); /* store the string form back so it stays alive */
        }
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            meta[2 * nmeta] = sr_lua_to_cstring(L, -2, "safetensors.save", "a metadata key");
            meta[2 * nmeta + 1] = sr_lua_to_cstring(L, -1, "safetensors.save", "a metadata value");
            nmeta++;
            lua_pop(L, 1);
        }
    }
    sr_lua_clean_tmp(L, path);
    if (sr_st_write(path, n, names, ts, nmeta, meta))
        return sr_lua_fail(L);
    return 0;
}

static const luaL_Reg st_methods[] = {
    {"keys", st_keys}, {"info", st_info}, {"get", st_get},
    {"metadata", st_metadata}, {"close", st_gc}, {NULL, NULL},
};

static const luaL_Reg st_meta[] = {
    {"__gc", st_gc}, {"__close", st_gc}, {"__tostring", st_tostring}, {NULL, NULL},
};

static const luaL_Reg st_funcs[] = {{"open", l_open}, {"save", l_save}, {NULL, NULL}};

void sr_lua_open_safetensors(lua_State *L)
{
    sr_lua_new_class(L, ST_MT, st_meta, st_methods);
    luaL_newlib(L, st_funcs);
    lua_setfield(L, -2, "safetensors");
}
