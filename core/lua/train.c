/* lua/train.c - losses, optimisers and the fused training step for Lua.
 *
 *   loss, correct, grad = srgeo.cross_entropy(logits, labels [, {grad=true}])
 *   opt = srgeo.optim.sgd{lr=0.1, momentum=0.9, nesterov=false, weight_decay=5e-4}
 *   opt = srgeo.optim.adamw{lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.05}
 *   opt:step(model)  opt:set_lr(lr)  opt:state(model) -> {name = tensor}  opt.steps
 *   loss, correct [, gx] = srgeo._train_step(model, opt|nil, X, labels [, {input_grad=false, rows=, sync_bn=, bucket=, overlap=false, timing=}])
 *   opt:load_state(model, {name = tensor})
 *   loss, correct, losses, gx = srgeo._grad_pass(model, X, labels, {weights=, param_grads=, input_grad=})
 *   loss_sum, correct = srgeo._eval_batch(model, X, labels)
 *   xadv, loss, correct = srgeo._pgd(model, X, labels, {norm=, eps=, steps=, ..., row_offset=})
 *   r = srgeo._llr_step(model, opt|nil, X, labels, {eps=, lambda=, mu=, ...})
 *
 * Labels are 0-based class indices (as in PyTorch), given as a Lua list. */
#include <stdlib.h>
#include <string.h>

#include "lua/aux.h"
#include "lua/open.h"
#include "nn/module.h"
#include "train/train.h"

#define OPT_MT "srgeo.optim"

/* One value per row from the Lua list at idx (what: "labels") into a
 * GC-owned array pushed on the stack: int64 when integers, else double. */
static void *check_rows(lua_State *L, int idx, int64_t n, const char *what, int integers)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    if ((int64_t)luaL_len(L, idx) != n)
        luaL_error(L, "%s: %d %s for %d rows", what, (int)luaL_len(L, idx), what, (int)n);
    void *v = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * (integers ? sizeof(int64_t) : sizeof(double)), 0);
    for (int64_t i = 0; i < n; i++) {
        lua_geti(L, idx, i + 1);
        int ok;
        if (integers)
            ((int64_t *)v)[i] = lua_tointegerx(L, -1, &ok);
        else
            ((double *)v)[i] = lua_tonumberx(L, -1, &ok);
        if (!ok)
            luaL_error(L, "%s: entry %d is not %s", what, (int)i + 1, integers ? "an integer" : "a number");
        lua_pop(L, 1);
    }
    return v;
}

/* Labels (0-based class ids) from a Lua list of n. */
static int64_t *check_labels(lua_State *L, int idx, int64_t n) { return check_rows(L, idx, n, "labels", 1); }

/* The batch at idx (at least one row) and its labels at idx + 1; op names
 * the caller in the message. */
static sr_tensor *check_batch(lua_State *L, int idx, const char *op, int64_t **lab)
{
    sr_tensor *x = sr_lua_check_tensor(L, idx);
    if (x->ndim < 1 || x->shape[0] < 1)
        luaL_error(L, "%s: input %s has no batch dimension", op, SR_SHAPE(x));
    *lab = check_labels(L, idx + 1, x->shape[0]);
    return x;
}

static int l_cross_entropy(lua_State *L)
{
    lua_settop(L, 3); /* check_labels pushes its buffer above the arguments */
    sr_tensor *logits = sr_lua_check_tensor(L, 1);
    if (logits->ndim != 2)
        return luaL_error(L, "cross_entropy: logits %s must be (N, classes)", SR_SHAPE(logits));
    int64_t *lab = check_labels(L, 2, logits->shape[0]);
    int want_grad = sr_lua_opt_boolean(L, 3, "cross_entropy", "grad", 1);
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

/* The optimiser's options are declared in core/train (sr_sgd_specs,
 * sr_adamw_specs): types, ranges, unknown keys, one message format. */
static int new_opt(lua_State *L, sr_opt_kind kind)
{
    lua_settop(L, 1);
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, 1, kind == SR_OPT_SGD ? "optim.sgd" : "optim.adamw");
    sr_optim *o = lua_newuserdatauv(L, sizeof *o, 0);
    if (sr_optim_read(o, kind, &lo.o)) {
        sr_optim_free(o);
        return sr_lua_fail(L);
    }
    luaL_setmetatable(L, OPT_MT);
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
    const char *k = sr_lua_check_cstring(L, 2, "optim");
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
 * save, softmax cross-entropy on the full output, backward with parameter
 * gradients, update, zero the gradients.  With opt = nil nothing is updated
 * (no parameter gradients either); with input_grad=true also returns dL/dX
 * (for adversarial objectives).  Data-parallel under mpirun when rows is
 * given (train.h's sr_train_step): X is this rank's shard of a batch of
 * `rows` rows (the loss is the whole batch's mean: this returns the shard's
 * share), the gradients are summed over the ranks, and sync_bn=true
 * normalises train-mode BatchNorm over the whole batch; bucket: gradient
 * values per sum; overlap=true starts each bucket's sum during backward
 * (the same bits); timing: a table that gets sum_seconds, the seconds the step
 * spent in the gradient sums' calls (the all-reduce time not hidden). */
static int l_train_step(lua_State *L)
{
    static const char *const keys[] = {"input_grad", "rows", "sync_bn", "bucket", "overlap", "timing", NULL};
    lua_settop(L, 5);
    sr_module *m = sr_lua_check_module(L, 1);
    sr_optim *o = lua_isnil(L, 2) ? NULL : check_opt(L, 2);
    int64_t *lab;
    sr_tensor *x = check_batch(L, 3, "train_step", &lab);
    sr_lua_check_keys(L, 5, "train_step", keys);
    int input_grad = sr_lua_opt_boolean(L, 5, "train_step", "input_grad", 0);
    double sum_seconds = 0;
    sr_data_parallel dp = {NULL, 0, sr_lua_mpi_size(), 0, 0, 0, &sum_seconds};
    dp.rows = sr_lua_opt_integer_in(L, 5, "train_step", "rows", 0, 0, INT64_MAX);
    if (dp.rows) /* a shard: the ranks of the MPI world train together */
        dp.sum = sr_lua_mpi_sum();
    dp.sync_bn = sr_lua_opt_boolean(L, 5, "train_step", "sync_bn", 0);
    dp.bucket = sr_lua_opt_integer_in(L, 5, "train_step", "bucket", 0, 0, INT64_MAX);
    dp.overlap = sr_lua_opt_boolean(L, 5, "train_step", "overlap", 0);
    double loss;
    int64_t correct;
    if (sr_train_step(m, o, x, lab, &dp, &loss, &correct))
        return sr_lua_fail(L);
    if (lua_istable(L, 5)) {
        int t = lua_getfield(L, 5, "timing");
        if (t == LUA_TTABLE) {
            lua_pushnumber(L, sum_seconds);
            lua_setfield(L, -2, "sum_seconds");
        } else if (t != LUA_TNIL) {
            return luaL_error(L, "train_step: timing must be a table, got %s", luaL_typename(L, -1));
        }
        lua_pop(L, 1);
    }
    lua_pushnumber(L, loss);
    lua_pushinteger(L, correct);
    if (input_grad) {
        sr_tensor_share(sr_lua_new_tensor(L), &m->gin);
        sr_lua_track_result(L, -1);
        return 3;
    }
    return 2;
}

/* Per-row weights from a Lua list or a tensor of n values into a GC-owned
 * array. */
static double *check_weights(lua_State *L, int idx, int64_t n)
{
    sr_tensor *t = sr_lua_test_tensor(L, idx);
    if (!t)
        return check_rows(L, idx, n, "weights", 0);
    if (sr_numel(t) != n)
        luaL_error(L, "weights: %d weights for %d rows", (int)sr_numel(t), (int)n);
    double *w = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *w, 0);
    for (int64_t i = 0; i < n; i++)
        w[i] = sr_get_flat(t, i);
    return w;
}

/* loss, correct, losses, gx = srgeo._grad_pass(model, X, labels,
 *     {weights=, param_grads=true, input_grad=false, losses=false})
 * One forward (save) + weighted cross-entropy Σ w_i ℓ_i (default: the mean)
 * + backward, accumulating parameter gradients (no update, no zeroing):
 * the building block for objectives made of several passes.  losses: a
 * float64 tensor (N) of ℓ_i; gx: dL/dX. */
static int l_grad_pass(lua_State *L)
{
    lua_settop(L, 4);
    sr_module *m = sr_lua_check_module(L, 1);
    int64_t *lab;
    sr_tensor *x = check_batch(L, 2, "grad_pass", &lab);
    int64_t n = x->shape[0];
    double *w = NULL;
    if (lua_istable(L, 4)) {
        lua_getfield(L, 4, "weights");
        if (!lua_isnil(L, -1))
            w = check_weights(L, lua_gettop(L), n);
    }
    int pg = sr_lua_opt_boolean(L, 4, "grad_pass", "param_grads", 1),
        ig = sr_lua_opt_boolean(L, 4, "grad_pass", "input_grad", 0),
        want_losses = sr_lua_opt_boolean(L, 4, "grad_pass", "losses", 0);
    sr_tensor *lt = NULL;
    double *losses = NULL;
    int lidx = 0;
    if (want_losses) {
        lt = sr_lua_new_tensor(L);
        lidx = lua_gettop(L);
        if (sr_tensor_alloc(lt, SR_F64, 1, &n))
            return sr_lua_fail(L);
        losses = sr_f64(lt);
    }
    double loss;
    int64_t correct;
    if (sr_ce_pass(m, x, lab, w, pg, &loss, &correct, losses))
        return sr_lua_fail(L);
    lua_pushnumber(L, loss);
    lua_pushinteger(L, correct);
    if (lidx)
        lua_pushvalue(L, lidx);
    else
        lua_pushnil(L);
    if (ig) {
        sr_tensor_share(sr_lua_new_tensor(L), &m->gin);
        sr_lua_track_result(L, -1);
        return 4;
    }
    return 3;
}

/* loss_sum, correct = srgeo._eval_batch(model, X, labels): forward only (the
 * model's current mode), cross-entropy summed over the rows, top-1 hits. */
static int l_eval_batch(lua_State *L)
{
    sr_module *m = sr_lua_check_module(L, 1);
    int64_t *lab;
    sr_tensor *x = check_batch(L, 2, "eval", &lab);
    int64_t n = x->shape[0];
    sr_run run = SR_RUN_INIT;
    if (sr_module_forward(m, x, &run))
        return sr_lua_fail(L);
    if (m->out.ndim != 2 || m->out.shape[0] != n)
        return luaL_error(L, "eval: the model's output %s is not (N, classes)", SR_SHAPE(&m->out));
    double *w = lua_newuserdatauv(L, (size_t)n * sizeof *w, 0);
    for (int64_t i = 0; i < n; i++)
        w[i] = 1;
    double loss;
    int64_t correct;
    if (sr_cross_entropy_ex(&m->out, lab, w, &loss, &correct, NULL, NULL, NULL))
        return sr_lua_fail(L);
    lua_pushnumber(L, loss);
    lua_pushinteger(L, correct);
    return 2;
}

/* xadv, loss, correct = srgeo._pgd(model, X, labels, {norm="l2"|"linf",
 *     eps=0.5, steps=7, step_size=2.5*eps/steps, random_start=true,
 *     use_best=false, clip=true, eval_mode=true, seed=0, row_offset=0})
 * row_offset: X's first row in the whole batch (a data-parallel shard), so
 * each row's random start is the one the whole batch would draw. */
static int l_pgd(lua_State *L)
{
    lua_settop(L, 4);
    sr_module *m = sr_lua_check_module(L, 1);
    int64_t *lab;
    sr_tensor *x = check_batch(L, 2, "pgd", &lab);
    sr_pgd_opts o;
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, 4, "pgd");
    if (sr_pgd_opts_read(&lo.o, &o)) /* declared in core/train: sr_pgd_specs */
        return sr_lua_fail(L);
    sr_tensor *xa = sr_lua_new_tensor(L);
    double loss;
    int64_t correct;
    if (sr_pgd_attack(m, x, lab, &o, xa, &loss, &correct))
        return sr_lua_fail(L);
    lua_pushnumber(L, loss);
    lua_pushinteger(L, correct);
    return 3;
}

/* r = srgeo._llr_step(model, opt|nil, X, labels, {norm="linf", eps=8/255,
 *     steps=3, step_size, random_start=true, lambda=4, mu=3, fd=0.1,
 *     clip=true, eval_mode=true, seed=0})
 * -> {loss=, ce=, gamma=, align=, correct=}.  opt = nil: only the inner
 * maximisation (γ and |δᵀ∇ℓ| of the model as it is). */
static int l_llr_step(lua_State *L)
{
    lua_settop(L, 5);
    sr_module *m = sr_lua_check_module(L, 1);
    sr_optim *opt = lua_isnil(L, 2) ? NULL : check_opt(L, 2);
    int64_t *lab;
    sr_tensor *x = check_batch(L, 3, "llr", &lab);
    sr_llr_opts o;
    sr_lua_opts lo;
    sr_lua_opts_init(&lo, L, 5, "llr");
    if (sr_llr_opts_read(&lo.o, &o)) /* declared in core/train: sr_llr_specs */
        return sr_lua_fail(L);
    sr_llr_result r;
    if (sr_llr_step(m, opt, x, lab, &o, &r))
        return sr_lua_fail(L);
    lua_createtable(L, 0, 5);
    lua_pushnumber(L, r.loss);
    lua_setfield(L, -2, "loss");
    lua_pushnumber(L, r.ce);
    lua_setfield(L, -2, "ce");
    lua_pushnumber(L, r.gamma);
    lua_setfield(L, -2, "gamma");
    lua_pushnumber(L, r.align);
    lua_setfield(L, -2, "align");
    lua_pushinteger(L, r.correct);
    lua_setfield(L, -2, "correct");
    return 1;
}

typedef struct {
    lua_State *L;
    int tbl;
    int missing;
} load_state_ud;

static int load_state_cb(const char *name, sr_tensor *t, void *ud)
{
    load_state_ud *s = ud;
    lua_getfield(s->L, s->tbl, name);
    sr_tensor *src = sr_lua_test_tensor(s->L, -1);
    if (!src) {
        lua_pop(s->L, 1);
        return sr_fail("optimizer state: no tensor '%s' to load", name);
    }
    if (!sr_same_shape(src, t)) {
        lua_pop(s->L, 1);
        return sr_fail("optimizer state %s: tensor %s, state %s", name, SR_SHAPE(src), SR_SHAPE(t));
    }
    int rc = sr_tensor_assign(t, src);
    lua_pop(s->L, 1);
    return rc;
}

/* opt:load_state(model, {name = tensor}): copy every state tensor in (the
 * names opt:state(model) lists; all must be present). */
static int opt_load_state(lua_State *L)
{
    sr_optim *o = check_opt(L, 1);
    sr_module *m = sr_lua_check_module(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    load_state_ud s = {L, 3, 0};
    if (sr_optim_walk_state(o, m, load_state_cb, &s))
        return sr_lua_fail(L);
    return 0;
}

static const luaL_Reg opt_methods[] = {
    {"step", opt_step},           {"set_lr", opt_set_lr}, {"state", opt_state},
    {"load_state", opt_load_state}, {"set_steps", opt_set_steps}, {NULL, NULL},
};

/* opt_index serves the fields and looks methods up in the metatable. */
static const luaL_Reg opt_meta[] = {{"__gc", opt_gc}, {"__index", opt_index}, {NULL, NULL}};

static const luaL_Reg optim_funcs[] = {{"sgd", l_sgd}, {"adamw", l_adamw}, {NULL, NULL}};

static const luaL_Reg train_funcs[] = {
    {"cross_entropy", l_cross_entropy}, {"_train_step", l_train_step}, {"_grad_pass", l_grad_pass},
    {"_eval_batch", l_eval_batch},      {"_pgd", l_pgd},               {"_llr_step", l_llr_step},
    {NULL, NULL},
};

void sr_lua_open_train(lua_State *L)
{
    sr_lua_new_class(L, OPT_MT, opt_meta, opt_methods);
    luaL_newlib(L, optim_funcs);
    lua_setfield(L, -2, "optim");
    luaL_setfuncs(L, train_funcs, 0);
}
