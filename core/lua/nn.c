/* lua/nn.c - srgeo.nn: module userdata, layer constructors from the registry
 * (layers.c), containers, and forward / jvp / vjp from Lua. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua/aux.h"
#include "lua/open.h"
#include "nn/layers.h"
#include "tensor/tensor_ops.h"

typedef struct {
    sr_module *m;
} lua_module;

sr_module *sr_lua_check_module(lua_State *L, int idx)
{
    lua_module *u = luaL_testudata(L, idx, SR_MODULE_MT);
    if (!u)
        luaL_typeerror(L, idx, "srgeo module");
    if (!u->m)
        luaL_argerror(L, idx, "module was released");
    return u->m;
}

static sr_module *test_module(lua_State *L, int idx)
{
    lua_module *u = luaL_testudata(L, idx, SR_MODULE_MT);
    return u ? u->m : NULL;
}

void sr_lua_push_module(lua_State *L, sr_module *m)
{
    lua_module *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->m = m;
    luaL_setmetatable(L, SR_MODULE_MT);
}

static int m_gc(lua_State *L)
{
    lua_module *u = luaL_checkudata(L, 1, SR_MODULE_MT);
    sr_module_release(u->m);
    u->m = NULL;
    return 0;
}

static int l_layer(lua_State *L)
{
    static const char *const also[] = {"seed", NULL};
    const sr_layer_def *def = lua_touserdata(L, lua_upvalueindex(1));
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, 1, def->name);
    sr_module *m = def->create(&lo.o);
    if (!m)
        return luaL_error(L, "%s (options: %s)", sr_errmsg(), def->help);
    sr_lua_push_module(L, m); /* owned by Lua from here: errors below cannot leak it */
    sr_lua_opts_check_used(&lo, def->help, also);
    uint64_t seed = sr_default_seed();
    if (lo.idx && lua_getfield(L, 1, "seed") != LUA_TNIL)
        seed = (uint64_t)luaL_checkinteger(L, -1);
    lua_pop(L, lo.idx ? 1 : 0);
    sr_rng rng;
    sr_rng_seed(&rng, seed);
    sr_module_reset(m, &rng);
    return 1;
}

/* --- containers ----------------------------------------------------------
 * sequential{m1, m2} names children "0", "1"; entries may be {name, module}
 * to name them; name "" is transparent (see module.h). */
static void add_children(lua_State *L, int tidx, sr_module *c, int first)
{
    lua_Integer n = luaL_len(L, tidx);
    for (lua_Integer i = first; i <= n; i++) {
        lua_geti(L, tidx, i);
        const char *name;
        char idx[32];
        sr_module *child = test_module(L, -1);
        if (child) {
            snprintf(idx, sizeof idx, "%lld", (long long)(i - first));
            name = idx;
        } else if (lua_istable(L, -1)) {
            lua_geti(L, -1, 1);
            lua_geti(L, -2, 2);
            name = sr_lua_to_cstring(L, -2, c->ops->kind, "a child's name");
            child = test_module(L, -1);
            if (!name || !child)
                luaL_error(L, "%s: entry %d must be a module or {name, module}", c->ops->kind, (int)i);
            lua_pop(L, 1); /* keep name string alive under the entry */
        } else {
            return (void)luaL_error(L, "%s: entry %d must be a module or {name, module} (got %s)",
                                    c->ops->kind, (int)i, luaL_typename(L, -1));
        }
        if (sr_module_add_child(c, name, child))
            sr_lua_fail(L);
        lua_settop(L, tidx + 1);
    }
}

static int l_sequential(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    sr_module *m = sr_sequential_new();
    if (!m)
        return sr_lua_fail(L);
    sr_lua_push_module(L, m);
    add_children(L, 1, m, 1);
    lua_settop(L, 2);
    return 1;
}

/* residual{body [, shortcut]} or residual{{"", body}, {"downsample", sc}} */
static int l_residual(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 1);
    luaL_argcheck(L, n == 1 || n == 2, 1, "residual takes a body and an optional shortcut");
    sr_module *m = sr_residual_new();
    if (!m)
        return sr_lua_fail(L);
    sr_lua_push_module(L, m);
    add_children(L, 1, m, 1);
    lua_settop(L, 2);
    return 1;
}

/* graph{ {name, module [, inputs]}, ..., output = name }: inputs is a node
 * name or a list of them ("input" is the graph's input); without one a node
 * reads the node before it (the first one the input). */
static int graph_input(lua_State *L, sr_module *g, int idx, int entry)
{
    const char *name = lua_tostring(L, idx);
    if (!name || lua_type(L, idx) != LUA_TSTRING)
        return luaL_error(L, "graph: entry %d: inputs must be node names (got %s)", entry, luaL_typename(L, idx));
    int v = sr_graph_value(g, name);
    if (v < 0)
        return luaL_error(L, "graph: entry %d reads '%s', which is not an earlier node nor \"input\"", entry, name);
    return v;
}

static int l_graph(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    sr_module *g = sr_graph_new();
    if (!g)
        return sr_lua_fail(L);
    sr_lua_push_module(L, g); /* index 2 */
    lua_Integer n = luaL_len(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_settop(L, 2);
        if (lua_geti(L, 1, i) != LUA_TTABLE)
            return luaL_error(L, "graph: entry %d must be {name, module [, inputs]} (got %s)", (int)i,
                              luaL_typename(L, 3));
        lua_geti(L, 3, 1);
        lua_geti(L, 3, 2);
        lua_geti(L, 3, 3); /* 4 name, 5 module, 6 inputs */
        const char *name = lua_tostring(L, 4);
        sr_module *child = test_module(L, 5);
        if (lua_type(L, 4) != LUA_TSTRING || !child)
            return luaL_error(L, "graph: entry %d must be {name, module [, inputs]}", (int)i);
        int in[64], nin = 0;
        if (lua_isnil(L, 6)) {
            in[nin++] = g->nchildren;
        } else if (lua_istable(L, 6)) {
            lua_Integer k = luaL_len(L, 6);
            if (k < 1 || k > 64)
                return luaL_error(L, "graph: entry %d: between 1 and 64 inputs, got %d", (int)i, (int)k);
            for (lua_Integer j = 1; j <= k; j++) {
                lua_geti(L, 6, j);
                in[nin++] = graph_input(L, g, -1, (int)i);
                lua_pop(L, 1);
            }
        } else {
            in[nin++] = graph_input(L, g, 6, (int)i);
        }
        if (sr_graph_add(g, name, child, nin, in) < 0)
            return sr_lua_fail(L);
    }
    lua_settop(L, 2);
    if (lua_getfield(L, 1, "output") != LUA_TNIL && sr_graph_set_output(g, graph_input(L, g, 3, 0)))
        return sr_lua_fail(L);
    lua_settop(L, 2);
    return 1;
}

/* --- running -------------------------------------------------------------- */
/* Resolve opts.tap / opts.taps into run taps; returns ntaps (0 = whole
 * model).  names[] receives the tap names for the result table. */
#define MAX_TAPS 16
typedef struct {
    const sr_module *mods[MAX_TAPS];
    sr_tensor out[MAX_TAPS];
    const char *names[MAX_TAPS];
    int n, multi;
} taps_t;

static void parse_taps(lua_State *L, sr_module *m, int oidx, taps_t *t, sr_run *run)
{
    t->n = 0;
    t->multi = 0;
    if (!oidx || lua_isnoneornil(L, oidx)) {
        /* No tap asked for: the model's default (e.g. "features"). */
        if (m->default_tap) {
            t->names[t->n++] = m->default_tap;
            goto resolve;
        }
        return;
    }
    luaL_checktype(L, oidx, LUA_TTABLE);
    if (lua_getfield(L, oidx, "tap") == LUA_TSTRING) {
        t->names[t->n++] = sr_lua_to_cstring(L, -1, "forward", "opts.tap");
    } else if (!lua_isnil(L, -1)) {
        luaL_error(L, "forward: opts.tap must be a module path string");
    }
    lua_pop(L, 1);
    if (lua_getfield(L, oidx, "taps") == LUA_TTABLE) {
        t->multi = 1;
        lua_Integer len = luaL_len(L, -1);
        for (lua_Integer i = 1; i <= len; i++) {
            lua_geti(L, -1, i);
            if (!lua_isstring(L, -1) || t->n >= MAX_TAPS)
                luaL_error(L, "forward: opts.taps must be a list of at most %d module paths", MAX_TAPS);
            t->names[t->n++] = lua_type(L, -1) == LUA_TSTRING ? sr_lua_to_cstring(L, -1, "forward", "opts.taps entry")
                                                               : lua_tostring(L, -1);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    if (t->n == 0 && m->default_tap)
        t->names[t->n++] = m->default_tap;
resolve:
    for (int i = 0; i < t->n; i++) {
        t->mods[i] = sr_module_find(m, t->names[i]);
        if (!t->mods[i])
            luaL_error(L, "forward: %s", sr_errmsg());
        t->out[i] = (sr_tensor)SR_TENSOR_INIT;
    }
    run->ntaps = t->n;
    run->taps = t->mods;
    run->tap_out = t->out;
    run->stop_after_taps = 1;
}

/* dst = rows [r0, r0 + len) of a module's buffer src, as a Lua result:
 * a view (charged to the GC budget: the module's next pass must take
 * another buffer while Lua pins this one), or, when src sits in a pooled
 * block far larger than the rows (the pool lends up to twice the size
 * asked for plus 1 MB), a compact copy, so that a 1 KB result does not pin
 * a 1 MB block until the collector runs and the module keeps its buffer. */
static int result_rows(lua_State *L, sr_tensor *dst, const sr_tensor *src, int64_t r0, int64_t len)
{
    sr_tensor v = SR_TENSOR_INIT;
    if (src->ndim == 0 ? (sr_tensor_share(&v, src), 0) : sr_tensor_narrow(&v, src, r0, len))
        return -1;
    size_t need = (size_t)sr_numel(&v) * sr_dtype_size(v.dtype);
    int rc = 0;
    if (v.storage && v.storage->nbytes > 2 * need + ((size_t)64 << 10)) {
        rc = sr_tensor_copy(dst, &v);
        sr_tensor_free(&v);
        sr_lua_track_tensor(L, -1);
    } else {
        sr_tensor_free(dst);
        *dst = v;
        sr_lua_track_result(L, -1);
    }
    return rc;
}

/* Move the run's tap results (or the module output) into Lua tensors.  For
 * jvp, each result is split into primal and tangent parts. */
static int push_results(lua_State *L, sr_module *m, taps_t *t, sr_run *run, int split_jvp)
{
    int nres = t->n ? t->n : 1;
    int ret = split_jvp ? 2 : 1;
    if (t->multi) {
        lua_createtable(L, 0, nres);
        if (split_jvp)
            lua_createtable(L, 0, nres);
    }
    for (int i = 0; i < nres; i++) {
        const sr_tensor *src = t->n ? &t->out[i] : &m->out;
        sr_tensor *a = sr_lua_new_tensor(L);
        if (split_jvp) {
            if (result_rows(L, a, src, 0, run->n))
                return sr_lua_fail(L);
            sr_tensor *b = sr_lua_new_tensor(L);
            if (result_rows(L, b, src, run->n, run->n * run->k))
                return sr_lua_fail(L);
            if (t->multi) { /* stack: primal table, tangent table, a, b */
                lua_setfield(L, -3, t->names[i]);
                lua_setfield(L, -3, t->names[i]);
            }
        } else {
            if (result_rows(L, a, src, 0, src->ndim ? src->shape[0] : 0))
                return sr_lua_fail(L);
            if (t->multi)
                lua_setfield(L, -2, t->names[i]);
        }
    }
    return ret;
}

static void free_taps(taps_t *t)
{
    for (int i = 0; i < t->n; i++)
        sr_tensor_free(&t->out[i]);
}

/* A run that stopped before its last requested tap is an error, not a
 * silently short result table. */
static int tap_check(int rc, const taps_t *t, const sr_run *run, const char *op)
{
    if (rc == 0 && t->n && run->ntaps_done < t->n)
        rc = sr_fail("%s: tap was not reached", op);
    return rc;
}

/* The tail shared by m:forward and m:jvp: push the outputs (or raise) and
 * release the tap buffers either way. */
static int finish_run(lua_State *L, sr_module *m, taps_t *t, sr_run *run, int rc, const char *op, int jvp)
{
    if (tap_check(rc, t, run, op)) {
        free_taps(t);
        return sr_lua_fail(L);
    }
    int r = push_results(L, m, t, run, jvp);
    free_taps(t);
    return r;
}

/* m:forward(x [, {tap=, taps=}]) */
static int m_forward(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_tensor *x = sr_lua_check_tensor(L, 2);
    sr_run run = SR_RUN_INIT;
    taps_t t;
    parse_taps(L, m, 3, &t, &run);
    return finish_run(L, m, &t, &run, sr_module_forward(m, x, &run), "forward", 0);
}

/* m:jvp(x, v [, opts]) -> y, Jv.  v holds k tangents per input, input-major
 * (tangent j of input i is row i*k + j).  opts.directional: the one-sided
 * directional derivative at kinks and ties (kernels/kink.h) instead of
 * PyTorch's subgradient. */
static int m_jvp(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_tensor *x = sr_lua_check_tensor(L, 2);
    sr_tensor *v = sr_lua_check_tensor(L, 3);
    lua_settop(L, 4); /* the stacked input goes above the arguments */
    sr_tensor *stack = sr_lua_new_tensor(L);
    if (sr_tensor_stack_jvp(stack, x, v))
        return sr_lua_fail(L);
    sr_run run = SR_RUN_INIT;
    run.n = x->shape[0];
    run.k = v->shape[0] / x->shape[0];
    if (lua_istable(L, 4)) {
        lua_getfield(L, 4, "directional");
        if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
            return luaL_error(L, "jvp: opts.directional must be a boolean");
        run.directional = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    taps_t t;
    parse_taps(L, m, 4, &t, &run);
    int rc = sr_module_jvp(m, stack, &run);
    sr_tensor_free(stack);
    return finish_run(L, m, &t, &run, rc, "jvp", 1);
}

/* m:vjp(x, w [, {tap=, param_grads=false}]) -> Jᵀw (input gradient), with
 * J the Jacobian of the tap (default: the model's default tap). */
static int m_vjp(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_tensor *x = sr_lua_check_tensor(L, 2);
    sr_tensor *w = sr_lua_check_tensor(L, 3);
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    taps_t t;
    if (lua_istable(L, 4)) {
        lua_getfield(L, 4, "param_grads");
        run.param_grads = lua_toboolean(L, -1);
        lua_pop(L, 1);
        if (lua_getfield(L, 4, "taps") != LUA_TNIL)
            return luaL_error(L, "vjp: one tap at a time (opts.tap)");
        lua_pop(L, 1);
    }
    parse_taps(L, m, lua_istable(L, 4) ? 4 : 0, &t, &run);
    int rc = tap_check(sr_module_forward(m, x, &run), &t, &run, "vjp");
    if (rc == 0) {
        const sr_tensor *out = t.n ? &t.out[0] : &m->out;
        if (!sr_same_shape(w, out))
            rc = sr_fail("vjp: cotangent %s does not match the output %s", SR_SHAPE(w), SR_SHAPE(out));
    }
    free_taps(&t);
    if (rc || sr_module_backward(m, w, &run))
        return sr_lua_fail(L);
    sr_tensor *g = sr_lua_new_tensor(L);
    if (result_rows(L, g, &m->gin, 0, m->gin.ndim ? m->gin.shape[0] : 0))
        return sr_lua_fail(L);
    return 1;
}

/* Which parameters a walk lists: the trainable ones, the buffers (running
 * statistics, constants), or both (the state dict files hold). */
enum { WALK_TRAINABLE = 1, WALK_BUFFERS = 2, WALK_ALL = 3 };

typedef struct {
    lua_State *L;
    int which, grads, list;
    lua_Integer i;
} params_state;

static int params_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)owner;
    params_state *s = ud;
    if (!(s->which & (p->trainable ? WALK_TRAINABLE : WALK_BUFFERS)))
        return 0;
    if (s->list) {
        lua_pushstring(s->L, path);
        lua_rawseti(s->L, -2, ++s->i);
        return 0;
    }
    const sr_tensor *src = s->grads ? &p->grad : &p->value;
    if (!src->storage)
        return 0;
    sr_tensor *t = sr_lua_new_tensor(s->L);
    sr_tensor_share(t, src);
    lua_setfield(s->L, -2, path);
    return 0;
}

/* {path = tensor (shared storage)}, or the list of paths. */
static int walk_params_lua(lua_State *L, int which, int grads, int list)
{
    sr_module *m = sr_lua_check_module(L, 1);
    params_state s = {L, which, grads, list, 0};
    lua_newtable(L);
    sr_module_walk_params(m, params_cb, &s);
    return 1;
}
/* m:parameters(): the trainable ones; m:buffers(): the others (BatchNorm
 * running statistics, a graph's constants); m:state_dict(): both, which is
 * what m:save writes and m:load reads; m:param_names(): its keys in order. */
static int m_parameters(lua_State *L) { return walk_params_lua(L, WALK_TRAINABLE, 0, 0); }
static int m_buffers(lua_State *L) { return walk_params_lua(L, WALK_BUFFERS, 0, 0); }
static int m_state_dict(lua_State *L) { return walk_params_lua(L, WALK_ALL, 0, 0); }
static int m_grads(lua_State *L) { return walk_params_lua(L, WALK_TRAINABLE, 1, 0); }
static int m_param_names(lua_State *L) { return walk_params_lua(L, WALK_ALL, 0, 1); }

/* m:roles(): {path = role} of the trainable constants an importer found a
 * role for (sr_param.role: "scale", "shift", "embedding", "token",
 * "slope"), which srgeo.models.twin draws anew by. */
static int roles_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)owner;
    lua_State *L = ud;
    if (p->trainable && p->role) {
        lua_pushstring(L, sr_param_role_name(p->role));
        lua_setfield(L, -2, path);
    }
    return 0;
}

static int m_roles(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    lua_newtable(L);
    sr_module_walk_params(m, roles_cb, L);
    return 1;
}

/* m:set(path, tensor): copy values in (shapes must agree; dtype converted). */
static int m_set(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    const char *path = sr_lua_check_cstring(L, 2, "m:set");
    sr_tensor *src = sr_lua_check_tensor(L, 3);
    sr_param *p = sr_module_find_param(m, path);
    if (!p)
        return sr_lua_fail(L);
    if (!sr_same_shape(&p->value, src))
        return luaL_error(L, "set %s: tensor %s, parameter %s", path, SR_SHAPE(src), SR_SHAPE(&p->value));
    if (sr_tensor_assign(&p->value, src))
        return sr_lua_fail(L);
    return 0;
}

static int m_get(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_param *p = sr_module_find_param(m, sr_lua_check_cstring(L, 2, "m:get"));
    if (!p)
        return sr_lua_fail(L);
    sr_tensor_share(sr_lua_new_tensor(L), &p->value);
    return 1;
}

static int m_find(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_module *c = sr_module_find(m, sr_lua_check_cstring(L, 2, "m:find"));
    if (!c)
        return sr_lua_fail(L);
    sr_module_retain(c);
    sr_lua_push_module(L, c);
    return 1;
}

static int m_train(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_module_set_training(m, lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2));
    lua_settop(L, 1);
    return 1;
}

static int m_eval(lua_State *L)
{
    sr_module_set_training(sr_lua_check_module(L, 1), 0);
    lua_settop(L, 1);
    return 1;
}

static int m_training(lua_State *L)
{
    lua_pushboolean(L, sr_lua_check_module(L, 1)->training);
    return 1;
}

static int to_dtype(lua_State *L, sr_dtype dt)
{
    if (sr_module_to_dtype(sr_lua_check_module(L, 1), dt))
        return sr_lua_fail(L);
    lua_settop(L, 1);
    return 1;
}
static int m_double(lua_State *L) { return to_dtype(L, SR_F64); }
static int m_float(lua_State *L) { return to_dtype(L, SR_F32); }

static int m_dtype(lua_State *L)
{
    lua_pushstring(L, sr_dtype_name(sr_lua_check_module(L, 1)->dtype));
    return 1;
}

static int m_init(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_rng rng;
    sr_rng_seed(&rng, lua_isnoneornil(L, 2) ? sr_default_seed() : (uint64_t)luaL_checkinteger(L, 2));
    sr_module_reset(m, &rng);
    lua_settop(L, 1);
    return 1;
}

static int m_zero_grad(lua_State *L)
{
    sr_module_zero_grad(sr_lua_check_module(L, 1));
    return 0;
}

static int m_clear(lua_State *L)
{
    sr_module_clear_buffers(sr_lua_check_module(L, 1));
    return 0;
}

/* m:buffer_stats() -> {blocks=, bytes=, fresh=, freed=, passes=}: the spare
 * buffers of the model's pool (tensor/tensor.h): blocks and bytes held now,
 * blocks its lending had to allocate and its bounds freed, passes run. */
static int m_buffer_stats(lua_State *L)
{
    const sr_pool *p = &sr_lua_check_module(L, 1)->pool;
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, p->n);
    lua_setfield(L, -2, "blocks");
    lua_pushinteger(L, (lua_Integer)p->bytes);
    lua_setfield(L, -2, "bytes");
    lua_pushinteger(L, p->fresh);
    lua_setfield(L, -2, "fresh");
    lua_pushinteger(L, p->freed);
    lua_setfield(L, -2, "freed");
    lua_pushinteger(L, p->passes);
    lua_setfield(L, -2, "passes");
    return 1;
}

/* m:alias(name, path): a tap name for this model ("features" -> "flatten"). */
static int m_alias(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    if (sr_module_set_alias(m, sr_lua_check_cstring(L, 2, "m:alias"), sr_lua_check_cstring(L, 3, "m:alias")))
        return sr_lua_fail(L);
    lua_settop(L, 1);
    return 1;
}

/* m:default_tap([name]): get or set the tap forward/jvp use by default. */
static int m_default_tap(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    if (lua_gettop(L) >= 2) {
        if (sr_module_set_default_tap(m, sr_lua_opt_cstring(L, 2, "m:default_tap", NULL)))
            return sr_lua_fail(L);
    }
    if (m->default_tap)
        lua_pushstring(L, m->default_tap);
    else
        lua_pushnil(L);
    return 1;
}

/* m:aliases() -> {name = path} */
static int m_aliases(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    lua_createtable(L, 0, m->naliases);
    for (int i = 0; i < m->naliases; i++) {
        lua_pushstring(L, m->alias_paths[i]);
        lua_setfield(L, -2, m->alias_names[i]);
    }
    return 1;
}

/* m:output_shape(): size of the last output (after forward), or nil. */
static int m_output_shape(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    if (!m->out_ndim) /* never ran (the buffer itself may be back in a pool) */
        return 0;
    sr_lua_push_size(L, m->out_shape, m->out_ndim);
    return 1;
}

static int m_describe(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    char desc[256] = "";
    if (m->ops->describe)
        m->ops->describe(m, desc, sizeof desc);
    lua_pushstring(L, desc);
    return 1;
}

static int m_kind(lua_State *L)
{
    lua_pushstring(L, sr_lua_check_module(L, 1)->ops->kind);
    return 1;
}

/* m:children() -> list of {name, module} */
static int m_children(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    lua_createtable(L, m->nchildren, 0);
    for (int i = 0; i < m->nchildren; i++) {
        lua_createtable(L, 2, 0);
        lua_pushstring(L, m->children[i].name);
        lua_rawseti(L, -2, 1);
        sr_module_retain(m->children[i].m);
        sr_lua_push_module(L, m->children[i].m);
        lua_rawseti(L, -2, 2);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static const luaL_Reg module_methods[] = {
    {"forward", m_forward},     {"jvp", m_jvp},       {"vjp", m_vjp},
    {"parameters", m_parameters}, {"buffers", m_buffers}, {"state_dict", m_state_dict},
    {"grads", m_grads}, {"param_names", m_param_names}, {"roles", m_roles},
    {"set", m_set},             {"get", m_get},       {"find", m_find},
    {"train", m_train},         {"eval", m_eval},     {"training", m_training},
    {"double", m_double},       {"float", m_float},   {"dtype", m_dtype},
    {"init", m_init},           {"zero_grad", m_zero_grad}, {"clear_buffers", m_clear},
    {"buffer_stats", m_buffer_stats},
    {"kind", m_kind},           {"children", m_children},
    {"alias", m_alias},         {"default_tap", m_default_tap}, {"aliases", m_aliases},
    {"output_shape", m_output_shape}, {"describe", m_describe},
    {NULL, NULL},
};

static const luaL_Reg module_meta[] = {
    {"__gc", m_gc},
    /* __tostring: the tree, written in Lua (lua/srgeo/module.lua) */
    {NULL, NULL},
};

void sr_lua_open_nn(lua_State *L)
{
    luaL_newmetatable(L, SR_MODULE_MT);
    luaL_setfuncs(L, module_meta, 0);
    luaL_newlib(L, module_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    lua_newtable(L); /* srgeo.nn */
    for (const sr_layer_def *d = sr_layers; d->name; d++) {
        lua_pushlightuserdata(L, (void *)d);
        lua_pushcclosure(L, l_layer, 1);
        lua_setfield(L, -2, d->name);
    }
    lua_pushcfunction(L, l_sequential);
    lua_setfield(L, -2, "sequential");
    lua_pushcfunction(L, l_residual);
    lua_setfield(L, -2, "residual");
    lua_pushcfunction(L, l_graph);
    lua_setfield(L, -2, "graph");
    /* srgeo.nn.help: layer name -> option summary */
    lua_newtable(L);
    for (const sr_layer_def *d = sr_layers; d->name; d++) {
        lua_pushstring(L, d->help);
        lua_setfield(L, -2, d->name);
    }
    lua_setfield(L, -2, "options");
    lua_setfield(L, -2, "nn");
}
