/* lua_train.c - losses, optimisers and the fused training step for Lua.
 *
 *   loss, correct, grad = srgeo.cross_entropy(logits, labels [, {grad=true}])
 *   opt = srgeo.optim.sgd{lr=0.1, momentum=0.9, nesterov=false, weight_decay=5e-4}
 *   opt = srgeo.optim.adamw{lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.05}
 *   opt:step(model)  opt:set_lr(lr)  opt:state(model) -> {name = tensor}  opt.steps
 *   loss, correct = srgeo._train_step(model, opt, X, labels [, {tap="logits", input_grad=false}])
 *
 * Labels are 0-based class indices (as in PyTorch), given as a Lua list. */
#include <stdlib.h>
#include <string.h>

#include "lua_srgeo.h"
#include "module.h"
#include "train.h"

#define OPT_MT "srgeo.optim"

/* Labels from a Lua list into a GC-owned int64 array of n entries. */
static int64_t *check_labels(lua_State *L, int idx, int64_t n)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    if ((int64_t)luaL_len(L, idx) != n)
        luaL_error(L, "labels: %d labels for %d rows", (int)luaL_len(L, idx), (int)n);
    int64_t *lab = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *lab, 0);
    for (int64_t i = 0; i < n; i++) {
        lua_geti(L, idx, i + 1);
        int ok;
        lab[i] = lua_tointegerx(L, -1, &ok);
        if (!ok)
            luaL_error(L, "labels: entry %d is not an integer", (int)i + 1);
        lua_pop(L, 1);
    }
    return lab;
}

static int l_cross_entropy(lua_State *L)
{
    sr_tensor *logits = sr_lua_check_tensor(L, 1);
    if (logits->ndim != 2)
        return luaL_error(L, "cross_entropy: logits %s must be (N, classes)", SR_SHAPE(logits));
    int64_t *lab = check_labels(L, 2, logits->shape[0]);
    int want_grad = 1;
    if (lua_istable(L, 3)) {
        lua_getfield(L, 3, "grad");
        want_grad = lua_isnil(L, -1) ? 1 : lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    sr_tensor *g = want_grad ? sr_lua_new_tensor(L) : NULL;
    double loss;
    int64_t correct;
    if (sr_cross_entropy(logits, lab, &loss, &correct, g))
        return sr_lua_fail(L);
    lua_pushnumber(L, loss);
    lua_pushinteger(L, correct);
    if (g)
        lua_pushvalue(L, -3);
    return g ? 3 : 2;
}

static sr_optim *check_opt(lua_State *L, int idx) { return luaL_checkudata(L, idx, OPT_MT); }

static int opt_gc(lua_State *L)
{
    sr_optim_free(check_opt(L, 1));
    return 0;
}

static double field_num(lua_State *L, int t, const char *k, double def)
{
    lua_getfield(L, t, k);
    double v = def;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) == LUA_TBOOLEAN)
            v = lua_toboolean(L, -1);
        else if (lua_isnumber(L, -1))
            v = lua_tonumber(L, -1);
        else
            luaL_error(L, "optim: option %s must be a number", k);
    }
    lua_pop(L, 1);
    return v;
}

static int new_opt(lua_State *L, sr_opt_kind kind)
{
    static const char *const sgd_keys[] = {"lr", "momentum", "nesterov", "weight_decay", NULL};
    static const char *const adam_keys[] = {"lr", "beta1", "beta2", "eps", "weight_decay", NULL};
    const char *const *keys = kind == SR_OPT_SGD ? sgd_keys : adam_keys;
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, 1)) {
            lua_pop(L, 1);
            int ok = 0;
            for (int i = 0; keys[i]; i++)
                ok |= lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), keys[i]) == 0;
            if (!ok)
                return luaL_error(L, "optim.%s: unknown option '%s'", kind == SR_OPT_SGD ? "sgd" : "adamw",
                                  lua_tostring(L, -1));
        }
    } else {
        lua_newtable(L);
        lua_replace(L, 1);
    }
    sr_optim *o = lua_newuserdatauv(L, sizeof *o, 0);
    sr_optim_init(o, kind);
    luaL_setmetatable(L, OPT_MT);
    o->lr = field_num(L, 1, "lr", o->lr);
    o->weight_decay = field_num(L, 1, "weight_decay", o->weight_decay);
    if (kind == SR_OPT_SGD) {
        o->momentum = field_num(L, 1, "momentum", o->momentum);
        o->nesterov = field_num(L, 1, "nesterov", 0) != 0;
        if (o->nesterov && o->momentum <= 0)
            return luaL_error(L, "optim.sgd: nesterov needs momentum > 0");
    } else {
        o->beta1 = field_num(L, 1, "beta1", o->beta1);
        o->beta2 = field_num(L, 1, "beta2", o->beta2);
        o->eps = field_num(L, 1, "eps", o->eps);
    }
    if (!(o->lr >= 0) || o->weight_decay < 0 || o->momentum < 0)
        return luaL_error(L, "optim: lr, momentum and weight_decay must be non-negative");
    return 1;
}

static int l_sgd(lua_State *L) { return new_opt(L, SR_OPT_SGD); }
static int l_adamw(lua_State *L) { return new_opt(L, SR_OPT_ADAMW); }

static int opt_step(lua_State *L)
{
    sr_optim *o = check_opt(L, 1);
    if (sr_optim_step(o, sr_lua_check_module(L, 2)))
        return sr_lua_fail(L);
    return 0;
}

static int opt_set_lr(lua_State *L)
{
    sr_optim *o = check_opt(L, 1);
    double lr = luaL_checknumber(L, 2);
    luaL_argcheck(L, lr >= 0, 2, "learning rate must be non-negative");
    o->lr = lr;
    return 0;
}

static int opt_index(lua_State *L)
{
    sr_optim *o = check_opt(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "steps") == 0) {
        lua_pushinteger(L, o->step);
        return 1;
    }
    if (strcmp(k, "lr") == 0) {
        lua_pushnumber(L, o->lr);
        return 1;
    }
    if (strcmp(k, "kind") == 0) {
        lua_pushstring(L, o->kind == SR_OPT_SGD ? "sgd" : "adamw");
        return 1;
    }
    luaL_getmetatable(L, OPT_MT);
    lua_getfield(L, -1, "methods");
    lua_getfield(L, -1, k);
    return 1;
}

static int push_state_cb(const char *name, sr_tensor *t, void *ud)
{
    lua_State *L = ud;
    sr_tensor_share(sr_lua_new_tensor(L), t);
    lua_setfield(L, -2, name);
    return 0;
}

/* opt:state(model) -> {name = tensor}: shared views, so loading a checkpoint
 * can copy into them in place; "optim.steps" is a 0-d tensor copy. */
static int opt_state(lua_State *L)
{
    sr_optim *o = check_opt(L, 1);
    sr_module *m = sr_lua_check_module(L, 2);
    lua_newtable(L);
    if (sr_optim_walk_state(o, m, push_state_cb, L))
        return sr_lua_fail(L);
    return 1;
}

static int opt_set_steps(lua_State *L)
{
    sr_optim *o = check_opt(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_argcheck(L, n >= 0, 2, "step count must be non-negative");
    o->step = n;
    return 0;
}

/* One SGD/AdamW step on a batch: forward in the model's current mode with
 * save, softmax cross-entropy on the tap (default: the full output),
 * backward with parameter gradients, update, zero the gradients.  With
 * input_grad=true also returns dL/dX (for adversarial objectives). */
static int l_train_step(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    sr_optim *o = lua_isnil(L, 2) ? NULL : check_opt(L, 2);
    sr_tensor *x = sr_lua_check_tensor(L, 3);
    if (x->ndim < 1)
        return luaL_error(L, "train_step: input %s has no batch dimension", SR_SHAPE(x));
    int64_t *lab = check_labels(L, 4, x->shape[0]);
    int input_grad = 0;
    if (lua_istable(L, 5)) {
        lua_getfield(L, 5, "input_grad");
        input_grad = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = o != NULL;
    sr_tensor *grad = sr_lua_new_tensor(L);
    double loss;
    int64_t correct;
    if (sr_module_forward(m, x, &run) || sr_cross_entropy(&m->out, lab, &loss, &correct, grad) ||
        sr_module_backward(m, grad, &run))
        return sr_lua_fail(L);
    if (o && sr_optim_step(o, m))
        return sr_lua_fail(L);
    if (o)
        sr_module_zero_grad(m);
    lua_pushnumber(L, loss);
    lua_pushinteger(L, correct);
    if (input_grad) {
        sr_tensor_share(sr_lua_new_tensor(L), &m->gin);
        return 3;
    }
    return 2;
}

static const luaL_Reg opt_methods[] = {
    {"step", opt_step}, {"set_lr", opt_set_lr}, {"state", opt_state}, {"set_steps", opt_set_steps}, {NULL, NULL},
};

void sr_lua_open_train(lua_State *L)
{
    luaL_newmetatable(L, OPT_MT);
    lua_pushcfunction(L, opt_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, opt_index);
    lua_setfield(L, -2, "__index");
    luaL_newlib(L, opt_methods);
    lua_setfield(L, -2, "methods");
    lua_pop(L, 1);
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, l_sgd);
    lua_setfield(L, -2, "sgd");
    lua_pushcfunction(L, l_adamw);
    lua_setfield(L, -2, "adamw");
    lua_setfield(L, -2, "optim");
    lua_pushcfunction(L, l_cross_entropy);
    lua_setfield(L, -2, "cross_entropy");
    lua_pushcfunction(L, l_train_step);
    lua_setfield(L, -2, "_train_step");
}
