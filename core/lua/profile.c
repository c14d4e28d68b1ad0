/* lua_profile.c - srgeo._profile_image(model, x, opts): the C engine for one
 * image (core/profile.c); lua/srgeo/profile.lua builds the user-facing
 * srgeo.profile on top (ladders, images, medians, bands, descriptors). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lua/aux.h"
#include "lua/open.h"
#include "nn/module.h"
#include "stats/jacobian.h"
#include "stats/metrics.h"
#include "stats/profile.h"
#include "tensor/tensor_ops.h"

static void push_array(lua_State *L, const double *a, int64_t n)
{
    lua_createtable(L, (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        lua_pushnumber(L, a[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

static int l_profile_image(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_tensor *x = sr_lua_check_tensor(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    sr_profile_opts o;
    sr_profile_opts_default(&o);
    o.ndirs = sr_lua_opt_integer(L, 3, "profile", "directions", o.ndirs);
    o.antipodal = sr_lua_opt_boolean(L, 3, "profile", "antipodal", o.antipodal);
    o.njvp = sr_lua_opt_integer(L, 3, "profile", "jvp_directions", o.njvp);
    o.seed = (uint64_t)sr_lua_opt_integer(L, 3, "profile", "seed", 0);
    o.batch = sr_lua_opt_integer(L, 3, "profile", "batch", 0);
    o.jvp_k = sr_lua_opt_integer(L, 3, "profile", "jvp_batch", o.jvp_k);
    o.noise_dirs = sr_lua_opt_integer(L, 3, "profile", "noise_directions", o.noise_dirs);
    o.noise_max = sr_lua_opt_number(L, 3, "profile", "noise_max", o.noise_max);
    o.per_direction = sr_lua_opt_boolean(L, 3, "profile", "per_direction", 0);
    o.target_ci = sr_lua_opt_number(L, 3, "profile", "target_ci", 0);
    o.exact_relu = sr_lua_opt_boolean(L, 3, "profile", "exact_relu", 0);
    o.seq_chunk = sr_lua_opt_integer(L, 3, "profile", "seq_chunk", o.seq_chunk);
    o.seq_min = sr_lua_opt_integer(L, 3, "profile", "seq_min", 0);
    o.share_prefix = sr_lua_opt_boolean(L, 3, "profile", "share_prefix", o.share_prefix);
    if (o.target_ci < 0)
        return luaL_error(L, "profile: target_ci must be positive (a relative CI half-width such as 0.02)");
    if (o.ndirs < 1)
        return luaL_error(L, "profile: directions must be >= 1");
    if (o.njvp > o.ndirs * (o.antipodal ? 2 : 1))
        o.njvp = o.ndirs * (o.antipodal ? 2 : 1);

    if (lua_getfield(L, 3, "tap") == LUA_TSTRING) {
        o.tap = sr_module_find(m, lua_tostring(L, -1));
        if (!o.tap)
            return luaL_error(L, "profile: tap: %s", sr_errmsg());
    } else if (!lua_isnil(L, -1)) {
        return luaL_error(L, "profile: option tap must be a module path");
    } else if (m->default_tap) {
        o.tap = sr_module_find(m, m->default_tap);
    }
    lua_pop(L, 1);

    o.lowpass_sigma = sr_lua_opt_number(L, 3, "profile", "lowpass_sigma", 0);
    if (o.lowpass_sigma < 0)
        return luaL_error(L, "profile: lowpass_sigma must be >= 0");
    if (o.lowpass_sigma > 0)
        o.family = SR_DIRS_LOWPASS;
    if (lua_getfield(L, 3, "user_directions") != LUA_TNIL) {
        o.user_dirs = sr_lua_check_tensor(L, -1);
        o.family = SR_DIRS_USER;
        if (o.user_dirs->ndim < 1 || o.user_dirs->shape[0] < o.ndirs)
            return luaL_error(L, "profile: user directions %s hold fewer than %d rows",
                              SR_SHAPE(o.user_dirs), (int)o.ndirs);
    }
    lua_pop(L, 1); /* the tensor stays referenced by the options table */

    if (lua_getfield(L, 3, "scales") != LUA_TTABLE)
        return luaL_error(L, "profile: option scales must be a list of η values");
    int ns = (int)luaL_len(L, -1);
    if (ns < 1 || ns > 4096)
        return luaL_error(L, "profile: %d scales (need 1..4096)", ns);
    double *scales = lua_newuserdatauv(L, (size_t)ns * sizeof(double), 0); /* GC-owned */
    for (int s = 0; s < ns; s++) {
        lua_geti(L, -2, s + 1);
        if (!lua_isnumber(L, -1))
            return luaL_error(L, "profile: scales[%d] is not a number", s + 1);
        scales[s] = lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    o.scales = scales;
    o.nscales = ns;

    sr_profile_result res;
    if (sr_profile_image(m, x, &o, &res))
        return sr_lua_fail(L);
    /* Copy into Lua tables; a memory error while pushing must not leak the
     * C arrays, so they are copied into a GC-owned block first. */
    int64_t npd = res.per_dir ? (int64_t)ns * res.ndirs_total : 0;
    int64_t nj = res.njvp_used;
    double *copy = lua_newuserdatauv(L, (size_t)(5 * ns + npd + nj) * sizeof(double), 0);
    memcpy(copy, res.energy, (size_t)ns * sizeof(double));
    memcpy(copy + ns, res.r, (size_t)ns * sizeof(double));
    memcpy(copy + 2 * ns, res.noise, (size_t)ns * sizeof(double));
    memcpy(copy + 3 * ns, res.ci, (size_t)ns * sizeof(double));
    if (npd)
        memcpy(copy + 4 * ns, res.per_dir, (size_t)npd * sizeof(double));
    memcpy(copy + 4 * ns + npd, res.jvp_sq, (size_t)nj * sizeof(double));
    /* directions (with antipodes) behind each rung's r, as "directions" counts them */
    for (int s = 0; s < ns; s++)
        copy[4 * ns + npd + nj + s] = (double)(res.rung_ndirs[s] * (o.antipodal ? 2 : 1));
    double ej = res.jac_energy, secs = res.seconds;
    lua_Integer nfwd = res.nforward, total = res.ndirs_total, used = res.ndirs_used, nexact = res.nexact;
    lua_Integer shared = res.shared_layers;
    sr_profile_result_free(&res);

    lua_createtable(L, 0, 8);
    push_array(L, copy, ns);
    lua_setfield(L, -2, "energy");
    push_array(L, copy + ns, ns);
    lua_setfield(L, -2, "r");
    push_array(L, copy + 2 * ns, ns);
    lua_setfield(L, -2, "noise");
    if (npd) {
        lua_createtable(L, ns, 0);
        for (int s = 0; s < ns; s++) {
            push_array(L, copy + 4 * ns + (int64_t)s * total, total);
            lua_rawseti(L, -2, s + 1);
        }
        lua_setfield(L, -2, "per_direction");
    }
    push_array(L, copy + 3 * ns, ns);
    lua_setfield(L, -2, "ci");
    push_array(L, copy + 4 * ns + npd, nj);
    lua_setfield(L, -2, "jvp_sq");
    lua_createtable(L, ns, 0);
    for (int s = 0; s < ns; s++) {
        lua_pushinteger(L, (lua_Integer)copy[4 * ns + npd + nj + s]);
        lua_rawseti(L, -2, s + 1);
    }
    lua_setfield(L, -2, "rung_directions");
    lua_pushinteger(L, used);
    lua_setfield(L, -2, "base_directions");
    lua_pushinteger(L, nexact);
    lua_setfield(L, -2, "exact_pairs");
    lua_pushinteger(L, shared);
    lua_setfield(L, -2, "shared_layers");
    lua_pushnumber(L, ej);
    lua_setfield(L, -2, "jac_energy");
    lua_pushnumber(L, secs);
    lua_setfield(L, -2, "seconds");
    lua_pushinteger(L, nfwd);
    lua_setfield(L, -2, "forwards");
    lua_pushinteger(L, total);
    lua_setfield(L, -2, "directions");
    return 1;
}

/* srgeo.jacobian_top(m, x, {k=8, iters=20, seed=0, tap=}) -> V (k,C,H,W), {σ_1..σ_k} */
static int l_jacobian_top(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_tensor *x = sr_lua_check_tensor(L, 2);
    int t = lua_istable(L, 3) ? 3 : 0;
    lua_Integer k = sr_lua_opt_integer(L, 3, "jacobian_top", "k", 8);
    lua_Integer iters = sr_lua_opt_integer(L, 3, "jacobian_top", "iters", 20);
    lua_Integer seed = sr_lua_opt_integer(L, 3, "jacobian_top", "seed", 0);
    const sr_module *tap = NULL;
    const char *tname = NULL;
    if (t && lua_getfield(L, t, "tap") == LUA_TSTRING)
        tname = lua_tostring(L, -1);
    if (t)
        lua_pop(L, 1);
    if (!tname)
        tname = m->default_tap;
    if (tname && !(tap = sr_module_find(m, tname)))
        return luaL_error(L, "jacobian_top: tap: %s", sr_errmsg());
    luaL_argcheck(L, k >= 1 && k <= 4096, 3, "k must be in 1..4096");
    double *sv = lua_newuserdatauv(L, (size_t)k * sizeof(double), 0);
    sr_tensor *V = sr_lua_new_tensor(L);
    if (sr_jacobian_top(m, x, tap, k, (int)iters, (uint64_t)seed, V, sv))
        return sr_lua_fail(L);
    push_array(L, sv, k);
    return 2;
}

/* srgeo.relu_boundary(m, x, V) -> {t_1..t_k}: for each direction (row of
 * V, any norm), the step t at which x + t·v first crosses a ReLU boundary
 * (math.huge if never).  Exact for nets whose only nonlinearity is ReLU. */
static int l_relu_boundary(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_tensor *x = sr_lua_check_tensor(L, 2);
    sr_tensor *v = sr_lua_check_tensor(L, 3);
    if (x->ndim < 1 || x->shape[0] != 1)
        return luaL_error(L, "relu_boundary: input %s must be one row", SR_SHAPE(x));
    sr_tensor *stack = sr_lua_new_tensor(L);
    if (sr_tensor_stack_jvp(stack, x, v)) {
        sr_fail_context("relu_boundary: directions");
        return sr_lua_fail(L);
    }
    int64_t k = v->shape[0];
    double *dist = lua_newuserdatauv(L, (size_t)k * sizeof(double), 0);
    int64_t units;
    if (sr_relu_boundary(m, stack, k, dist, &units))
        return sr_lua_fail(L);
    push_array(L, dist, k);
    lua_pushinteger(L, units);
    return 2;
}

/* srgeo.relu_flips(m, x, X) -> {f_1..f_R}: fraction of ReLU units whose sign
 * at row r of X differs from the sign at x. */
static int l_relu_flips(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_tensor *x = sr_lua_check_tensor(L, 2);
    sr_tensor *X = sr_lua_check_tensor(L, 3);
    if (X->ndim < 1 || X->shape[0] < 1)
        return luaL_error(L, "relu_flips: no rows in %s", SR_SHAPE(X));
    double *f = lua_newuserdatauv(L, (size_t)X->shape[0] * sizeof(double), 0);
    if (sr_relu_flips(m, x, X, f))
        return sr_lua_fail(L);
    push_array(L, f, X->shape[0]);
    return 1;
}

void sr_lua_open_profile(lua_State *L)
{
    lua_pushcfunction(L, l_relu_boundary);
    lua_setfield(L, -2, "relu_boundary");
    lua_pushcfunction(L, l_relu_flips);
    lua_setfield(L, -2, "relu_flips");
    lua_pushcfunction(L, l_jacobian_top);
    lua_setfield(L, -2, "jacobian_top");
    lua_pushcfunction(L, l_profile_image);
    lua_setfield(L, -2, "_profile_image");
}
