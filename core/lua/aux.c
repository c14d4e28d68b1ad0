/* aux.c - the lauxlib of srgeo: the helpers every binding uses (errors,
 * tensors and modules as userdata, shapes, options tables, classes). */
#include <dirent.h>
#include <limits.h>
#include <string.h>

#include "lua/aux.h"

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
