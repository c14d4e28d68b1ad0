/* lua/profile.c - srgeo._profile_image(model, x, opts): the C engine for one
 * image (core/stats/profile.c); lua/srgeo/profile.lua builds the user-facing
 * srgeo.profile on top (ladders, images, medians, bands, descriptors). */
#include <limits.h>
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

/* The engine's options from the table at idx (declared in
 * sr_profile_specs: the core checks every value); tap, user_directions and
 * scales are Lua values, resolved here.  Leaves the scales' buffer (GC-owned)
 * on the stack. */
static void read_profile_opts(lua_State *L, int idx, sr_module *m, sr_profile_opts *o)
{
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, idx, "profile");
    if (sr_profile_opts_read(&lo.o, o))
        sr_lua_fail(L);
    lua_getfield(L, idx, "tap"); /* a non-empty string, if present (checked above) */
    if (sr_profile_set_tap(o, m, lua_tostring(L, -1)))
        sr_lua_fail(L);
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "user_directions") != LUA_TNIL) {
        o->user_dirs = sr_lua_check_tensor(L, -1);
        o->family = SR_DIRS_USER;
    }
    lua_pop(L, 1); /* the tensor stays referenced by the options table */
    if (lua_getfield(L, idx, "scales") != LUA_TTABLE)
        luaL_error(L, "profile: option scales must be a list of η values");
    lua_Integer ns = luaL_len(L, -1);
    luaL_argcheck(L, ns >= 0 && ns <= INT_MAX / (int)sizeof(double), idx, "profile: too many scales");
    double *scales = lua_newuserdatauv(L, (size_t)(ns > 0 ? ns : 1) * sizeof(double), 0); /* GC-owned */
    for (int s = 0; s < ns; s++) {
        lua_geti(L, -2, s + 1);
        if (!lua_isnumber(L, -1))
            luaL_error(L, "profile: scales[%d] is not a number", s + 1);
        scales[s] = lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    lua_remove(L, -2);
    o->scales = scales;
    o->nscales = (int)ns;
}

/* A rung's moments (stats/rung.h) as a Lua table, and back: the fields in
 * one order (n and nj are counts, c may be NaN when unpaired). */
static const char *const moment_names[] = {"n", "d_mean", "d_m2", "nj", "j_mean", "j_m2", "c"};

static void moment_values(const sr_rung_moments *m, double v[7])
{
    v[0] = (double)m->n, v[1] = m->d_mean, v[2] = m->d_m2, v[3] = (double)m->nj;
    v[4] = m->j_mean, v[5] = m->j_m2, v[6] = m->c;
}

static void push_moments(lua_State *L, const sr_rung_moments *m)
{
    double v[7];
    moment_values(m, v);
    lua_createtable(L, 0, 7);
    for (int k = 0; k < 7; k++) {
        if (k == 0 || k == 3)
            lua_pushinteger(L, (lua_Integer)v[k]);
        else
            lua_pushnumber(L, v[k]);
        lua_setfield(L, -2, moment_names[k]);
    }
}

static void check_moments(lua_State *L, int t, sr_rung_moments *m)
{
    double v[7];
    for (int k = 0; k < 7; k++) {
        lua_getfield(L, t, moment_names[k]);
        int ok;
        v[k] = lua_tonumberx(L, -1, &ok);
        if (!ok && k != 6)
            luaL_error(L, "rung_estimate: moments.%s must be a number", moment_names[k]);
        lua_pop(L, 1);
        if (!ok)
            v[k] = NAN;
    }
    m->n = (int64_t)v[0], m->d_mean = v[1], m->d_m2 = v[2], m->nj = (int64_t)v[3];
    m->j_mean = v[4], m->j_m2 = v[5], m->c = v[6];
}

static int l_profile_image(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_tensor *x = sr_lua_check_tensor(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    sr_profile_opts o;
    read_profile_opts(L, 3, m, &o);
    int ns = o.nscales;

    sr_profile_result res;
    if (sr_profile_image(m, x, &o, &res))
        return sr_lua_fail(L);
    /* Copy into Lua tables; a memory error while pushing must not leak the
     * C arrays, so they are copied into GC-owned blocks first. */
    int64_t npd = res.per_dir ? (int64_t)ns * res.ndirs_total : 0;
    int64_t nj = res.njvp_used;
    double *copy = lua_newuserdatauv(L, (size_t)(5 * ns + npd + nj) * sizeof(double), 0);
    sr_rung_moments *mom = lua_newuserdatauv(L, (size_t)ns * sizeof *mom, 0);
    memcpy(copy, res.energy, (size_t)ns * sizeof(double));
    memcpy(copy + ns, res.r, (size_t)ns * sizeof(double));
    memcpy(copy + 2 * ns, res.noise, (size_t)ns * sizeof(double));
    memcpy(copy + 3 * ns, res.ci, (size_t)ns * sizeof(double));
    memcpy(copy + 4 * ns, res.noise_energy, (size_t)ns * sizeof(double));
    if (npd)
        memcpy(copy + 5 * ns, res.per_dir, (size_t)npd * sizeof(double));
    memcpy(copy + 5 * ns + npd, res.jvp_sq, (size_t)nj * sizeof(double));
    memcpy(mom, res.moments, (size_t)ns * sizeof *mom);
    double ej = res.jac_energy, secs = res.seconds, njvp_noise = res.noise_jvp, fd_jvp = res.fd_jvp;
    lua_Integer nfwd = res.nforward, total = res.ndirs_total, nexact = res.nexact;
    lua_Integer shared = res.shared_layers;
    sr_kinks kinks = res.kinks;
    sr_profile_result_free(&res);

    lua_createtable(L, 0, 14);
    static const char *const arrays[] = {"energy", "r", "noise", "ci", "noise_energy"};
    for (int a = 0; a < 5; a++) {
        sr_lua_push_numbers(L, copy + a * ns, ns);
        lua_setfield(L, -2, arrays[a]);
    }
    if (npd) {
        lua_createtable(L, ns, 0);
        for (int s = 0; s < ns; s++) {
            sr_lua_push_numbers(L, copy + 5 * ns + (int64_t)s * total, total);
            lua_rawseti(L, -2, s + 1);
        }
        lua_setfield(L, -2, "per_direction");
    }
    sr_lua_push_numbers(L, copy + 5 * ns + npd, nj);
    lua_setfield(L, -2, "jvp_sq");
    lua_createtable(L, ns, 0);
    for (int s = 0; s < ns; s++) {
        push_moments(L, &mom[s]);
        lua_rawseti(L, -2, s + 1);
    }
    lua_setfield(L, -2, "moments");
    lua_pushnumber(L, njvp_noise);
    lua_setfield(L, -2, "noise_jvp");
    lua_pushnumber(L, fd_jvp);
    lua_setfield(L, -2, "fd_jvp");
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
    /* the image's ties and singular points (kernels/kink.h) */
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, kinks.ties);
    lua_setfield(L, -2, "ties");
    lua_pushinteger(L, kinks.near);
    lua_setfield(L, -2, "near");
    lua_pushinteger(L, kinks.singular);
    lua_setfield(L, -2, "singular");
    lua_setfield(L, -2, "kinks");
    return 1;
}

/* srgeo._rung_estimate(moments, eta [, as_n, as_nj]) -> {r=, se=, ci=, df=}:
 * stats/rung.h's estimate from a rung's moments (as _profile_image returns
 * them, or merged over runs); as_n, as_nj: the unpaired protocol's
 * interval with that many units and JVPs instead. */
static int l_rung_estimate(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    double eta = luaL_checknumber(L, 2);
    lua_Integer as_n = luaL_optinteger(L, 3, 0), as_nj = luaL_optinteger(L, 4, 0);
    if (!(eta > 0) || !isfinite(eta))
        return luaL_error(L, "rung_estimate: eta must be positive and finite, got %g", eta);
    sr_rung_moments m;
    check_moments(L, 1, &m);
    sr_rung_est e = sr_rung_estimate(&m, eta, as_n, as_nj);
    lua_createtable(L, 0, 4);
    lua_pushnumber(L, e.r);
    lua_setfield(L, -2, "r");
    lua_pushnumber(L, e.se);
    lua_setfield(L, -2, "se");
    lua_pushnumber(L, e.ci);
    lua_setfield(L, -2, "ci");
    lua_pushinteger(L, e.df);
    lua_setfield(L, -2, "df");
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
        tname = sr_lua_to_cstring(L, -1, "jacobian_top", "opts.tap");
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
    sr_lua_push_numbers(L, sv, k);
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
    sr_lua_push_numbers(L, dist, k);
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
    sr_lua_push_numbers(L, f, X->shape[0]);
    return 1;
}

/* srgeo._profile_options() -> {{name=, type=, what=, default=, help=}, ...}:
 * the declared options of srgeo.profile (sr_profile_specs), for help text. */
static int l_profile_options(lua_State *L)
{
    sr_lua_push_specs(L, sr_profile_specs);
    return 1;
}

/* srgeo._profile_check(opts): check every declared option present in opts
 * (the same code and messages as the engine's own reading), so
 * lua/srgeo/profile.lua can reject a bad value, its own ci and bootstrap
 * included, before the first image.  Keys not declared here are
 * profile.lua's to check. */
static int l_profile_check(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, 1, "profile");
    lo.o.each_key = NULL;
    sr_profile_opts o;
    if (sr_profile_opts_read(&lo.o, &o))
        return sr_lua_fail(L);
    return 0;
}

static const luaL_Reg profile_funcs[] = {
    {"_profile_image", l_profile_image}, {"_profile_options", l_profile_options},
    {"_profile_check", l_profile_check}, {"_rung_estimate", l_rung_estimate}, {"jacobian_top", l_jacobian_top},
    {"relu_boundary", l_relu_boundary},  {"relu_flips", l_relu_flips},
    {NULL, NULL},
};

void sr_lua_open_profile(lua_State *L)
{
    luaL_setfuncs(L, profile_funcs, 0);
    /* maxima within this many epsilons tie (kernels/kink.h), for the summary */
    lua_pushinteger(L, SR_TIE_ULPS);
    lua_setfield(L, -2, "_tie_ulps");
}
