/* aux.c - the lauxlib of srgeo: the helpers every binding uses (errors,
 * tensors and modules as userdata, shapes, options tables, classes). */
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/fsutil.h"
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

/* Position (1-based) of the first NUL byte of s[0..len), or 0. */
static size_t nul_at(const char *s, size_t len)
{
    const char *z = memchr(s, 0, len);
    return z ? (size_t)(z - s) + 1 : 0;
}

const char *sr_lua_check_cstring(lua_State *L, int idx, const char *op)
{
    luaL_checkstring(L, idx); /* (a number becomes its string form, in place) */
    char what[32];
    snprintf(what, sizeof what, "argument #%d", idx);
    return sr_lua_to_cstring(L, idx, op, what);
}

const char *sr_lua_opt_cstring(lua_State *L, int idx, const char *op, const char *def)
{
    return lua_isnoneornil(L, idx) ? def : sr_lua_check_cstring(L, idx, op);
}

const char *sr_lua_to_cstring(lua_State *L, int idx, const char *op, const char *what)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        return NULL;
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    size_t k = nul_at(s, len);
    if (k)
        luaL_error(L, "%s: %s contains a NUL byte at position %d", op, what, (int)k);
    return s;
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
                luaL_argerror(L, idx, lua_pushfstring(L, "shape: entry %d must be a non-negative integer, got %s",
                                                      i + 1, luaL_tolstring(L, -1, NULL)));
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
    /* a fraction (zeros(1.5)) is a bad size, not the start of the options */
    if (lua_type(L, idx + n) == LUA_TNUMBER)
        luaL_argerror(L, idx + n, lua_pushfstring(L, "shape: dimension %d must be a non-negative integer, got %s",
                                                  n + 1, luaL_tolstring(L, idx + n, NULL)));
    return n;
}

/* --- options tables ------------------------------------------------------ */

static void mark_used(sr_lua_opts *lo, const char *key)
{
    for (int i = 0; i < lo->nused; i++)
        if (strcmp(lo->used[i], key) == 0)
            return;
    if (lo->nused < (int)(sizeof lo->used / sizeof lo->used[0]))
        lo->used[lo->nused++] = key;
}

static int table_value(const sr_opts *o, const char *key, sr_optv *v)
{
    sr_lua_opts *lo = o->ud;
    lua_State *L = lo->L;
    mark_used(lo, key);
    memset(v, 0, sizeof *v);
    v->kind = SR_OPTV_ABSENT;
    if (!lo->idx)
        return 0;
    switch (lua_getfield(L, lo->idx, key)) {
    case LUA_TNIL:
        break;
    case LUA_TBOOLEAN:
        v->kind = SR_OPTV_BOOL;
        v->num = lua_toboolean(L, -1);
        snprintf(v->shown, sizeof v->shown, "%s", v->num ? "true" : "false");
        break;
    case LUA_TNUMBER:
        v->kind = SR_OPTV_NUMBER;
        v->is_int = lua_isinteger(L, -1);
        v->integer = v->is_int ? (int64_t)lua_tointeger(L, -1) : 0;
        v->num = lua_tonumber(L, -1);
        snprintf(v->shown, sizeof v->shown, "%s", luaL_tolstring(L, -1, NULL)); /* as Lua prints it */
        lua_pop(L, 1);
        break;
    case LUA_TSTRING: {
        size_t len;
        v->kind = SR_OPTV_STRING;
        v->str = lua_tolstring(L, -1, &len); /* stays alive: the table holds it */
        snprintf(v->shown, sizeof v->shown, "'%s'", v->str);
        if (nul_at(v->str, len)) {
            lua_pop(L, 1);
            return sr_fail("%s: option %s contains a NUL byte at position %d", o->op, key,
                           (int)nul_at(v->str, len));
        }
        break;
    }
    default:
        v->kind = SR_OPTV_OTHER;
        snprintf(v->shown, sizeof v->shown, "%s", luaL_typename(L, -1));
        break;
    }
    lua_pop(L, 1);
    return 0;
}

/* Layer constructors' getters (booleans read as 1/0 numbers, for bias=false). */
static int table_num(const sr_opts *o, const char *key, double *v)
{
    sr_optv x;
    if (table_value(o, key, &x))
        return -1;
    if (x.kind == SR_OPTV_ABSENT)
        return 0;
    if (x.kind != SR_OPTV_NUMBER && x.kind != SR_OPTV_BOOL)
        return sr_fail("%s: option %s must be a number (got %s)", o->op, key, x.shown);
    *v = x.num;
    return 1;
}

static int table_str(const sr_opts *o, const char *key, const char **v)
{
    sr_optv x;
    if (table_value(o, key, &x))
        return -1;
    if (x.kind == SR_OPTV_ABSENT)
        return 0;
    if (x.kind != SR_OPTV_STRING)
        return sr_fail("%s: option %s must be a string (got %s)", o->op, key, x.shown);
    *v = x.str;
    return 1;
}

static int table_nums(const sr_opts *o, const char *key, double *v, int max, int *n)
{
    sr_lua_opts *lo = o->ud;
    lua_State *L = lo->L;
    mark_used(lo, key);
    if (!lo->idx)
        return 0;
    int t = lua_getfield(L, lo->idx, key);
    int r = 1;
    if (t == LUA_TNIL) {
        r = 0;
    } else if (t == LUA_TNUMBER) {
        v[0] = lua_tonumber(L, -1);
        *n = 1;
    } else if (t == LUA_TTABLE) {
        lua_Integer len = luaL_len(L, -1);
        if (len > max)
            r = sr_fail("%s: option %s has %lld values (at most %d)", o->op, key, (long long)len, max);
        for (lua_Integer i = 1; r == 1 && i <= len; i++) {
            lua_geti(L, -1, i);
            if (!lua_isnumber(L, -1))
                r = sr_fail("%s: option %s[%lld] must be a number", o->op, key, (long long)i);
            else
                v[i - 1] = lua_tonumber(L, -1);
            lua_pop(L, 1);
        }
        *n = (int)len;
    } else {
        r = sr_fail("%s: option %s must be a number or a list (got %s)", o->op, key, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return r;
}

static int table_each_key(const sr_opts *o, int (*fn)(const char *key, void *ctx), void *ctx)
{
    sr_lua_opts *lo = o->ud;
    lua_State *L = lo->L;
    if (!lo->idx)
        return 0;
    lua_pushnil(L);
    while (lua_next(L, lo->idx)) {
        lua_pop(L, 1);
        /* (lua_tostring on a number key would break the traversal) */
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_pop(L, 1);
            return sr_fail("%s: options must be named (got a positional value)", o->op);
        }
        size_t len;
        const char *key = lua_tolstring(L, -1, &len);
        if (nul_at(key, len)) {
            lua_pop(L, 1);
            return sr_fail("%s: option name '%s' contains a NUL byte at position %d", o->op, key,
                           (int)nul_at(key, len));
        }
        int r = fn(key, ctx);
        if (r) {
            lua_pop(L, 1);
            return r;
        }
    }
    return 0;
}

void sr_lua_opts_init(sr_lua_opts *lo, lua_State *L, int t, const char *op)
{
    memset(lo, 0, sizeof *lo);
    lo->L = L;
    if (!lua_isnoneornil(L, t)) {
        luaL_checktype(L, t, LUA_TTABLE);
        lo->idx = lua_absindex(L, t);
    }
    lo->o = (sr_opts){.ud = lo, .op = op, .get_num = table_num, .get_str = table_str, .get_nums = table_nums,
                      .get_value = table_value, .each_key = table_each_key};
}

/* A key neither read (lo, when given) nor named in names. */
typedef struct {
    const sr_lua_opts *lo;
    const char *const *names;
    char bad[64];
} key_filter;

static int key_unknown(const char *key, void *ctx)
{
    key_filter *f = ctx;
    for (int i = 0; f->lo && i < f->lo->nused; i++)
        if (strcmp(f->lo->used[i], key) == 0)
            return 0;
    for (const char *const *p = f->names; p && *p; p++)
        if (strcmp(*p, key) == 0)
            return 0;
    snprintf(f->bad, sizeof f->bad, "%s", key);
    return 1;
}

static void reject_unknown(sr_lua_opts *lo, key_filter *f, const char *help)
{
    lua_State *L = lo->L;
    int r = lo->o.each_key(&lo->o, key_unknown, f);
    const char *sep = help ? "; options: " : "", *list = help ? help : "";
    if (r < 0)
        luaL_error(L, "%s%s%s", sr_errmsg(), sep, list);
    if (r > 0)
        luaL_error(L, "%s: unknown option '%s'%s%s", lo->o.op, f->bad, sep, list);
}

void sr_lua_opts_check_used(sr_lua_opts *lo, const char *help, const char *const *also)
{
    key_filter f = {lo, also, ""};
    reject_unknown(lo, &f, help);
}

void sr_lua_check_keys(lua_State *L, int t, const char *op, const char *const *keys)
{
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, t, op);
    key_filter f = {NULL, keys, ""};
    reject_unknown(&lo, &f, NULL);
}

void sr_lua_read_opts(lua_State *L, int t, const char *op, const sr_opt_spec *specs, void *dst)
{
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, t, op);
    if (sr_opts_read(&lo.o, specs, dst))
        sr_lua_fail(L);
}

void sr_lua_push_specs(lua_State *L, const sr_opt_spec *specs)
{
    static const char *const types[] = {"integer", "number", "boolean", "string", "choice", "other"};
    char buf[256];
    lua_newtable(L);
    for (const sr_opt_spec *s = specs; s->name; s++) {
        lua_createtable(L, 0, 5);
        lua_pushstring(L, s->name);
        lua_setfield(L, -2, "name");
        lua_pushstring(L, types[s->type]);
        lua_setfield(L, -2, "type");
        lua_pushstring(L, sr_opt_spec_what(s, buf, sizeof buf));
        lua_setfield(L, -2, "what");
        lua_pushstring(L, sr_opt_spec_default(s, buf, sizeof buf));
        lua_setfield(L, -2, "default");
        lua_pushstring(L, s->help ? s->help : "");
        lua_setfield(L, -2, "help");
        lua_rawseti(L, -2, (lua_Integer)(s - specs) + 1);
    }
}

/* One option as a one-entry declaration reads it. */
static void opt_one(lua_State *L, int t, const char *op, const sr_opt_spec *s, void *field)
{
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, t, op);
    if (sr_opt_get(&lo.o, s, field))
        sr_lua_fail(L);
}

lua_Number sr_lua_opt_number(lua_State *L, int t, const char *op, const char *k, lua_Number def)
{
    sr_opt_spec s = {.name = k, .type = SR_OPT_NUM, .lo = -INFINITY, .hi = INFINITY, .def = def};
    double v;
    opt_one(L, t, op, &s, &v);
    return v;
}

/* An integer option; absent, def as given (a spec's double default keeps
 * only 53 bits of it). */
static lua_Integer opt_int(lua_State *L, int t, const char *op, const sr_opt_spec *s, lua_Integer def)
{
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, t, op);
    sr_optv x;
    int64_t v = def;
    if (table_value(&lo.o, s->name, &x) || (x.kind != SR_OPTV_ABSENT && sr_opt_get(&lo.o, s, &v)))
        sr_lua_fail(L);
    return (lua_Integer)v;
}

lua_Integer sr_lua_opt_integer(lua_State *L, int t, const char *op, const char *k, lua_Integer def)
{
    sr_opt_spec s = {.name = k, .type = SR_OPT_INT, .lo = -INFINITY, .hi = INFINITY, .def = (double)def};
    return opt_int(L, t, op, &s, def);
}

lua_Integer sr_lua_opt_integer_in(lua_State *L, int t, const char *op, const char *k, lua_Integer def,
                                  lua_Integer lo, lua_Integer hi)
{
    sr_opt_spec s = {.name = k, .type = SR_OPT_INT, .lo = (double)lo, .hi = (double)hi,
                     .flags = SR_OPT_FALSE_NONE, .def = (double)def};
    return opt_int(L, t, op, &s, def);
}

int sr_lua_opt_boolean(lua_State *L, int t, const char *op, const char *k, int def)
{
    sr_opt_spec s = {.name = k, .type = SR_OPT_BOOL, .def = def};
    int v;
    opt_one(L, t, op, &s, &v);
    return v;
}

int sr_lua_opt_choice(lua_State *L, int t, const char *op, const char *k, int def, const char *const *names)
{
    sr_opt_spec s = {.name = k, .type = SR_OPT_CHOICE, .def = def, .choices = names};
    int v;
    opt_one(L, t, op, &s, &v);
    return v;
}

/* --- files ------------------------------------------------------------------ */

static const char cleaned_key = 'c'; /* its address keys the registry's table of folders done */

void sr_lua_clean_tmp(lua_State *L, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == path)
        lua_pushliteral(L, "/");
    else if (slash)
        lua_pushlstring(L, path, (size_t)(slash - path));
    else
        lua_pushliteral(L, ".");
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &cleaned_key) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &cleaned_key);
    }
    lua_pushvalue(L, -2);
    if (lua_rawget(L, -2) == LUA_TNIL) {
        int removed = 0;
        sr_tmp_clean(lua_tostring(L, -3), &removed); /* a folder it cannot read: the write will say */
        lua_pushvalue(L, -3);
        lua_pushinteger(L, removed);
        lua_rawset(L, -4);
    }
    lua_pop(L, 3);
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

/* A size prints as the core's messages write shapes, "(2,3,4)", compares
 * equal to another size with the same entries, and concatenates as that
 * text; otherwise it is the plain list of sizes (#, [i], ipairs, and every
 * function taking a shape table accept it). */
static int size_tostring(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addchar(&b, '(');
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        if (i > 1)
            luaL_addchar(&b, ',');
        luaL_addvalue(&b);
    }
    luaL_addchar(&b, ')');
    luaL_pushresult(&b);
    return 1;
}

static int size_eq(lua_State *L)
{
    int same = lua_istable(L, 1) && lua_istable(L, 2) && lua_rawlen(L, 1) == lua_rawlen(L, 2);
    for (lua_Integer i = 1; same && i <= (lua_Integer)lua_rawlen(L, 1); i++) {
        lua_rawgeti(L, 1, i);
        lua_rawgeti(L, 2, i);
        same = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
    }
    lua_pushboolean(L, same);
    return 1;
}

static int size_concat(lua_State *L)
{
    luaL_tolstring(L, 1, NULL);
    luaL_tolstring(L, 2, NULL);
    lua_concat(L, 2);
    return 1;
}

void sr_lua_push_size(lua_State *L, const int64_t *shape, int ndim)
{
    sr_lua_push_integers(L, shape, ndim, 0);
    if (luaL_newmetatable(L, SR_SIZE_MT)) {
        static const luaL_Reg meta[] = {
            {"__tostring", size_tostring}, {"__eq", size_eq}, {"__concat", size_concat}, {NULL, NULL}};
        luaL_setfuncs(L, meta, 0);
    }
    lua_setmetatable(L, -2);
}

void sr_lua_push_numbers(lua_State *L, const double *v, int64_t n)
{
    lua_createtable(L, n > 0 && n <= INT_MAX ? (int)n : 0, 0);
    for (int64_t i = 0; i < n; i++) {
        lua_pushnumber(L, v[i]);
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
