/* lua/opts.c - the declared option sets (base/opts.h) as seen from Lua, so
 * the Lua layers (srgeo.train's loop, the scripts' command lines) validate
 * with the core's declarations instead of a policy of their own:
 *
 *   v = srgeo._options(name, tbl [, op])
 *       name: "train", "sgd", "adamw", "pgd", "llr", "gaussian", "profile";
 *       every declared option of tbl checked (types, ranges, unknown keys:
 *       "OP: NAME must be WHAT, got VALUE"); returns the values with
 *       defaults filled in (a choice as its string; an "auto"/"none"
 *       default, one outside the option's range, as nil; options only the
 *       caller can read are left out).
 *   list = srgeo._option_specs(name) -> {{name=, type=, what=, default=, help=}, ...}
 *   srgeo._check_option(op, decl, value): one value against a declaration
 *       made in Lua, decl = {name=, type="integer"|"number", lo=, hi=,
 *       open_lo=, open_hi=} (a script's own option), with the same message.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lua/aux.h"
#include "lua/open.h"
#include "stats/profile.h"
#include "train/train.h"

static const struct {
    const char *name;
    const sr_opt_spec *specs;
} sets[] = {
    {"train", sr_train_specs}, {"sgd", sr_sgd_specs},     {"adamw", sr_adamw_specs},   {"pgd", sr_pgd_specs},
    {"llr", sr_llr_specs},     {"gaussian", sr_gaussian_specs}, {"profile", sr_profile_specs},
};

static const sr_opt_spec *check_set(lua_State *L, int idx)
{
    const char *name = luaL_checkstring(L, idx);
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (strcmp(sets[i].name, name) == 0)
            return sets[i].specs;
    luaL_error(L, "options: no declared option set '%s'", name);
    return NULL;
}

/* An "auto" or "none" default: outside the option's own range. */
static int sentinel(const sr_opt_spec *s, double v)
{
    if (s->type != SR_OPT_INT && s->type != SR_OPT_NUM)
        return 0;
    return v < s->lo || v > s->hi || ((s->flags & SR_OPT_OPEN_LO) && v == s->lo) ||
           ((s->flags & SR_OPT_OPEN_HI) && v == s->hi);
}

static int l_options(lua_State *L)
{
    const sr_opt_spec *specs = check_set(L, 1);
    const char *op = luaL_optstring(L, 3, lua_tostring(L, 1));
    if (!lua_isnoneornil(L, 2))
        luaL_checktype(L, 2, LUA_TTABLE);
    size_t size = 0;
    for (const sr_opt_spec *s = specs; s->name; s++)
        size = s->offset + 8 > size ? s->offset + 8 : size;
    void *buf = lua_newuserdatauv(L, size, 0); /* the struct the specs describe, GC-owned */
    memset(buf, 0, size);
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, 2, op);
    if (sr_opts_read(&lo.o, specs, buf))
        return sr_lua_fail(L);
    lua_newtable(L);
    for (const sr_opt_spec *s = specs; s->name; s++) {
        if (s->flags & SR_OPT_CALLER || s->type == SR_OPT_OTHER)
            continue;
        const char *f = (const char *)buf + s->offset;
        switch (s->type) {
        case SR_OPT_INT: {
            int64_t v;
            memcpy(&v, f, sizeof v);
            if (sentinel(s, (double)v) && (double)v == s->def)
                continue;
            if (v == 0 && (s->flags & SR_OPT_FALSE_NONE) && s->lo > 0)
                lua_pushboolean(L, 0);
            else
                lua_pushinteger(L, (lua_Integer)v);
            break;
        }
        case SR_OPT_NUM: {
            double v;
            memcpy(&v, f, sizeof v);
            if (sentinel(s, v) && v == s->def)
                continue;
            lua_pushnumber(L, v);
            break;
        }
        case SR_OPT_BOOL: {
            int v;
            memcpy(&v, f, sizeof v);
            lua_pushboolean(L, v);
            break;
        }
        case SR_OPT_STR: {
            const char *v;
            memcpy(&v, f, sizeof v);
            if (!v)
                continue;
            lua_pushstring(L, v);
            break;
        }
        case SR_OPT_CHOICE: {
            int v;
            memcpy(&v, f, sizeof v);
            lua_pushstring(L, s->choices[v]);
            break;
        }
        default:
            continue;
        }
        lua_setfield(L, -2, s->name);
    }
    return 1;
}

static int l_option_specs(lua_State *L)
{
    sr_lua_push_specs(L, check_set(L, 1));
    return 1;
}

static int l_check_option(lua_State *L)
{
    const char *op = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 3);
    sr_opt_spec s = {.lo = -INFINITY, .hi = INFINITY};
    lua_getfield(L, 2, "name");
    s.name = sr_lua_to_cstring(L, -1, op, "an option name");
    luaL_argcheck(L, s.name != NULL, 2, "decl.name must be a string");
    lua_getfield(L, 2, "type");
    const char *ty = lua_tostring(L, -1);
    s.type = ty && strcmp(ty, "number") == 0 ? SR_OPT_NUM : SR_OPT_INT;
    if (lua_getfield(L, 2, "lo") == LUA_TNUMBER)
        s.lo = lua_tonumber(L, -1);
    if (lua_getfield(L, 2, "hi") == LUA_TNUMBER)
        s.hi = lua_tonumber(L, -1);
    lua_getfield(L, 2, "open_lo");
    lua_getfield(L, 2, "open_hi");
    s.flags = (lua_toboolean(L, -2) ? SR_OPT_OPEN_LO : 0) | (lua_toboolean(L, -1) ? SR_OPT_OPEN_HI : 0);
    lua_settop(L, 3);
    lua_createtable(L, 0, 1); /* {[name] = value}: the one-entry source sr_opt_get reads */
    lua_pushvalue(L, 3);
    lua_setfield(L, -2, s.name);
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, 4, op);
    union {
        int64_t i;
        double d;
    } field;
    if (sr_opt_get(&lo.o, &s, &field))
        return sr_lua_fail(L);
    lua_pushvalue(L, 3);
    return 1;
}

static const luaL_Reg opts_funcs[] = {
    {"_options", l_options},
    {"_option_specs", l_option_specs},
    {"_check_option", l_check_option},
    {NULL, NULL},
};

void sr_lua_open_opts(lua_State *L) { luaL_setfuncs(L, opts_funcs, 0); }
