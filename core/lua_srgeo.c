/* lua_srgeo.c - luaopen_srgeo: the srgeo table, shared binding helpers, and
 * the hook that loads the Lua half of the library (lua/srgeo/init.lua). */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lua_srgeo.h"
#include "rng.h"
#include "threads.h"

#ifndef SRGEO_VERSION
#define SRGEO_VERSION "0.1.0"
#endif

int sr_lua_fail(lua_State *L) { return luaL_error(L, "%s", sr_errmsg()); }

sr_dtype sr_lua_opt_dtype(lua_State *L, int idx, sr_dtype def)
{
    static const char *const names[] = {"float32", "float64", "float", "double", NULL};
    if (lua_isnoneornil(L, idx))
        return def;
    int i = luaL_checkoption(L, idx, NULL, names);
    return (i == 1 || i == 3) ? SR_F64 : SR_F32;
}

int sr_lua_check_shape(lua_State *L, int idx, int64_t *shape)
{
    int n = 0;
    if (lua_istable(L, idx)) {
        n = (int)luaL_len(L, idx);
        luaL_argcheck(L, n <= SR_MAXDIM, idx, "too many dimensions");
        for (int i = 0; i < n; i++) {
            lua_geti(L, idx, i + 1);
            int ok;
            lua_Integer v = lua_tointegerx(L, -1, &ok);
            if (!ok || v < 0)
                luaL_error(L, "shape: entry %d must be a non-negative integer", i + 1);
            shape[i] = v;
            lua_pop(L, 1);
        }
        return n;
    }
    while (!lua_isnoneornil(L, idx + n) && lua_isinteger(L, idx + n)) {
        luaL_argcheck(L, n < SR_MAXDIM, idx + n, "too many dimensions");
        lua_Integer v = lua_tointeger(L, idx + n);
        luaL_argcheck(L, v >= 0, idx + n, "dimension must be non-negative");
        shape[n] = v;
        n++;
    }
    return n;
}

/* --- options tables ------------------------------------------------------ */

/* Push field k of the options table at t (nil when t is none or nil) and
 * return its type. */
static int opt_field(lua_State *L, int t, const char *k)
{
    if (lua_isnoneornil(L, t)) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    luaL_checktype(L, t, LUA_TTABLE);
    return lua_getfield(L, t, k);
}

/* A wrong value for a message: a number, boolean or string as written
 * (may push it), anything else by its type. */
static const char *got(lua_State *L, int idx)
{
    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        return lua_pushfstring(L, "'%s'", lua_tostring(L, idx));
    case LUA_TNUMBER:
    case LUA_TBOOLEAN:
        return luaL_tolstring(L, idx, NULL);
    default:
        return luaL_typename(L, idx);
    }
}

lua_Number sr_lua_opt_number(lua_State *L, int t, const char *op, const char *k, lua_Number def)
{
    lua_Number v = def;
    if (opt_field(L, t, k) != LUA_TNIL) {
        int ok;
        v = lua_tonumberx(L, -1, &ok);
        if (!ok)
            luaL_error(L, "%s: option %s must be a number (got %s)", op, k, got(L, -1));
    }
    lua_pop(L, 1);
    return v;
}

static lua_Integer opt_int(lua_State *L, int t, const char *op, const char *k, lua_Integer def, int ranged,
                           lua_Integer lo, lua_Integer hi)
{
    lua_Integer v = def;
    int ty = opt_field(L, t, k);
    if (ranged && ty == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
        v = 0;
    } else if (ty != LUA_TNIL) {
        int ok;
        v = lua_tointegerx(L, -1, &ok);
        if (!ok || v < lo || v > hi) {
            if (ranged)
                luaL_error(L, "%s: option %s must be an integer in %I..%I (got %s)", op, k, lo, hi, got(L, -1));
            luaL_error(L, "%s: option %s must be an integer (got %s)", op, k, got(L, -1));
        }
    }
    lua_pop(L, 1);
    return v;
}

lua_Integer sr_lua_opt_integer(lua_State *L, int t, const char *op, const char *k, lua_Integer def)
{
    return opt_int(L, t, op, k, def, 0, LUA_MININTEGER, LUA_MAXINTEGER);
}

lua_Integer sr_lua_opt_integer_in(lua_State *L, int t, const char *op, const char *k, lua_Integer def,
                                  lua_Integer lo, lua_Integer hi)
{
    return opt_int(L, t, op, k, def, 1, lo, hi);
}

int sr_lua_opt_boolean(lua_State *L, int t, const char *op, const char *k, int def)
{
    int v = def, ty = opt_field(L, t, k);
    if (ty == LUA_TBOOLEAN)
        v = lua_toboolean(L, -1);
    else if (ty == LUA_TNUMBER)
        v = lua_tonumber(L, -1) != 0;
    else if (ty != LUA_TNIL)
        luaL_error(L, "%s: option %s must be true or false (got %s)", op, k, got(L, -1));
    lua_pop(L, 1);
    return v;
}

int sr_lua_opt_choice(lua_State *L, int t, const char *op, const char *k, int def, const char *const *names)
{
    int v = def, ty = opt_field(L, t, k);
    if (ty != LUA_TNIL) {
        /* lua_tostring turns a number into a string only in this stack copy */
        const char *s = ty == LUA_TSTRING || ty == LUA_TNUMBER ? lua_tostring(L, -1) : NULL;
        for (v = 0; s && names[v] && strcmp(s, names[v]) != 0; v++) {
        }
        if (!s || !names[v]) {
            const char *g = got(L, -1);
            luaL_Buffer b;
            luaL_buffinit(L, &b);
            for (int i = 0; names[i]; i++) {
                if (i > 0)
                    luaL_addstring(&b, names[i + 1] ? ", " : " or ");
                luaL_addchar(&b, '"');
                luaL_addstring(&b, names[i]);
                luaL_addchar(&b, '"');
            }
            luaL_pushresult(&b);
            luaL_error(L, "%s: option %s must be %s (got %s)", op, k, lua_tostring(L, -1), g);
        }
    }
    lua_pop(L, 1);
    return v;
}

void sr_lua_check_keys(lua_State *L, int t, const char *op, const char *const *keys)
{
    if (lua_isnoneornil(L, t))
        return;
    luaL_checktype(L, t, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        int ok = 0;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (const char *const *p = keys; *p && !ok; p++)
                ok = strcmp(*p, lua_tostring(L, -1)) == 0;
        if (!ok)
            luaL_error(L, "%s: unknown option '%s'", op, luaL_tolstring(L, -1, NULL));
    }
}

/* --- lists, directories, classes ----------------------------------------- */

void sr_lua_push_integers(lua_State *L, const int64_t *v, int64_t n, int64_t add)
{
    lua_createtable(L, n > 0 && n <= INT_MAX ? (int)n : 0, 0);
    for (int64_t i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)(v[i] + add));
        lua_rawseti(L, -2, i + 1);
    }
}

int sr_lua_push_dir_names(lua_State *L, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    lua_newtable(L);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        lua_pushstring(L, e->d_name);
        lua_rawseti(L, -2, ++n);
    }
    closedir(d);
    return n;
}

void sr_lua_new_class(lua_State *L, const char *mt, const luaL_Reg *meta, const luaL_Reg *methods)
{
    luaL_newmetatable(L, mt);
    luaL_setfuncs(L, meta, 0);
    if (methods) {
        int own_index = lua_getfield(L, -1, "__index") != LUA_TNIL;
        lua_pop(L, 1);
        lua_newtable(L);
        luaL_setfuncs(L, methods, 0);
        lua_setfield(L, -2, own_index ? "methods" : "__index");
    }
    lua_pop(L, 1);
}

static int l_threads(lua_State *L)
{
    if (!lua_isnoneornil(L, 1)) {
        lua_Integer n = luaL_checkinteger(L, 1);
        luaL_argcheck(L, n >= 0 && n <= 1024, 1, "thread count must be in 0..1024 (0 = default)");
        sr_threads_set((int)n);
    }
    lua_pushinteger(L, sr_threads_get());
    return 1;
}

static int l_seed(lua_State *L)
{
    if (!lua_isnoneornil(L, 1))
        sr_set_default_seed((uint64_t)luaL_checkinteger(L, 1));
    lua_pushinteger(L, (lua_Integer)sr_default_seed());
    return 1;
}

/* srgeo.interrupted(): true once after Ctrl-C (clears the flag), so Lua loops
 * can stop cleanly too. */
static int l_interrupted(lua_State *L)
{
    int p = sr_interrupt_pending();
    if (p)
        sr_interrupt_clear();
    lua_pushboolean(L, p);
    return 1;
}

/* srgeo._isatty(fd): progress bars only on a terminal. */
static int l_isatty(lua_State *L)
{
    lua_pushboolean(L, isatty((int)luaL_optinteger(L, 1, 2)));
    return 1;
}

/* srgeo._clock(): monotonic seconds, for timings and ETAs. */
static int l_clock(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
    return 1;
}

/* The project root: the nearest ancestor of the binary (build/srgeo,
 * build/san/srgeo.so, ...) holding lua/srgeo/init.lua, found through the
 * address of this function so it works for the shell and for require.
 * SRGEO_ROOT overrides it. */
static int root_dir(char *buf, size_t n)
{
    const char *env = getenv("SRGEO_ROOT");
    if (env && *env) {
        snprintf(buf, n, "%s", env);
        return 0;
    }
    Dl_info info;
    char path[PATH_MAX];
    if (dladdr((void *)root_dir, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        if (!realpath(info.dli_fname, path))
            return -1;
    } else {
        ssize_t k = readlink("/proc/self/exe", path, sizeof path - 1);
        if (k <= 0)
            return -1;
        path[k] = 0;
    }
    char *d = dirname(path);
    for (int up = 0; up < 6; up++) {
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/lua/srgeo/init.lua", d);
        if (access(probe, R_OK) == 0) {
            snprintf(buf, n, "%s", d);
            return 0;
        }
        if (strcmp(d, "/") == 0)
            break;
        d = dirname(d);
    }
    return -1;
}

static const luaL_Reg srgeo_funcs[] = {
    {"threads", l_threads},
    {"seed", l_seed},
    {"interrupted", l_interrupted},
    {"_isatty", l_isatty},
    {"_clock", l_clock},
    {NULL, NULL},
};

int luaopen_srgeo(lua_State *L)
{
    sr_threads_init();
    luaL_newlib(L, srgeo_funcs);
    lua_pushliteral(L, SRGEO_VERSION);
    lua_setfield(L, -2, "version");
    sr_lua_open_tensor(L);
    sr_lua_open_nn(L);
    sr_lua_open_image(L);
    sr_lua_open_data(L);
    sr_lua_open_profile(L);
    sr_lua_open_safetensors(L);
    sr_lua_open_train(L);
    sr_lua_open_augment(L);

    /* Make lua/?.lua requirable and run lua/srgeo/init.lua(core) to add the
     * Lua half of the library. */
    char root[PATH_MAX];
    if (root_dir(root, sizeof root) == 0) {
        lua_pushstring(L, root);
        lua_setfield(L, -2, "root");
        lua_getglobal(L, "package");
        lua_getfield(L, -1, "path");
        lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua;%s", root, root, lua_tostring(L, -1));
        lua_setfield(L, -3, "path");
        lua_pop(L, 2);
        char init[PATH_MAX + 32];
        snprintf(init, sizeof init, "%s/lua/srgeo/init.lua", root);
        if (access(init, R_OK) == 0) {
            if (luaL_loadfile(L, init) != LUA_OK)
                return lua_error(L);
            lua_pushvalue(L, -2);
            lua_call(L, 1, 0);
        }
    }
    return 1;
}
