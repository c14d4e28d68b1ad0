/* lua/onnx.c - srgeo.onnx: ONNX models as module graphs (import/onnx_import.h).
 *
 *   m, info = srgeo.onnx.load(path [, {dtype=, input=, output=, input_size=, mean=, std=, raw=,
 *                                      no_batch=, constants={name=tensor}}])
 *   info: input (sample dims; C,H,W also for a file whose input is NHWC: nhwc true), features (the classifier's input value, tap "embedding"),
 *         tap (the default: "embedding" when the head makes class scores, else "output"), scores,
 *         normalization ("given", "metadata", "none"), normalizes (the graph itself starts with
 *         Mul / Add / Sub / Div by constants), preprocess (those ops, for messages), nodes, folded,
 *         pruned (nodes the output does not depend on, left out), opset, producer, metadata
 *   srgeo.onnx.info(path)                        -- inputs, outputs, op types, node names, opset, metadata
 *   srgeo.onnx.evaluate(path, {constants=})      -- every output of a model of constants, folded
 * constants = {value name = tensor or {tensor, "int64"}}: graph inputs given as constants.
 *   t, type = srgeo.onnx.read_tensor(path)      -- a TensorProto file (ONNX test data)
 *   srgeo.onnx.supported(op)                     -- "values", "constants" (folded only) or false
 * srgeo.models.load(path.onnx) is the usual way in (lua/srgeo/models.lua). */
#include <stdlib.h>
#include <string.h>

#include "import/onnx_import.h"
#include "lua/aux.h"
#include "lua/open.h"

static const char *const load_keys[] = {"dtype", "input", "output", "input_size", "mean", "std", "raw",
                                        "no_batch", "constants", NULL};

/* The caller's numbers at field k of table t into v (at most max). */
static int opt_numbers(lua_State *L, int t, const char *k, double *v, int max)
{
    int n = 0;
    if (lua_getfield(L, t, k) == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (!lua_istable(L, -1))
        luaL_error(L, "onnx.load: %s must be a list of numbers", k);
    lua_Integer len = luaL_len(L, -1);
    if (len < 1 || len > max)
        luaL_error(L, "onnx.load: %s must list 1 to %d numbers, got %d", k, max, (int)len);
    for (lua_Integer i = 1; i <= len; i++) {
        lua_geti(L, -1, i);
        int ok;
        v[n++] = lua_tonumberx(L, -1, &ok);
        if (!ok)
            luaL_error(L, "onnx.load: %s[%d] must be a number", k, (int)i);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return n;
}

typedef struct {
    sr_onnx_model model;
    sr_onnx_tensor *consts;
    const sr_onnx_tensor **cptr;
    const char **cnames;
    int nconst;
} load_state;

/* Released by the state's __gc / __close even when a Lua error unwinds. */
static int state_gc(lua_State *L)
{
    load_state *s = lua_touserdata(L, 1);
    sr_onnx_free(&s->model);
    for (int i = 0; i < s->nconst; i++)
        sr_tensor_free(&s->consts[i].value);
    free(s->consts);
    free(s->cptr);
    free(s->cnames);
    memset(s, 0, sizeof *s);
    return 0;
}

/* A load_state on the stack, released by its __gc even when a Lua error unwinds. */
static load_state *new_state(lua_State *L)
{
    load_state *s = lua_newuserdatauv(L, sizeof *s, 0);
    memset(s, 0, sizeof *s);
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, state_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    return s;
}

/* opts.constants = {value name = tensor}: further graph inputs as constants
 * (the names and tensors stay referenced by the options table). */
static void read_constants(lua_State *L, int t, load_state *s, sr_onnx_import_opts *o)
{
    if (lua_getfield(L, t, "constants") != LUA_TTABLE) {
        if (!lua_isnil(L, -1))
            luaL_error(L, "onnx: constants must map value names to tensors");
        lua_pop(L, 1);
        return;
    }
    int ct = lua_gettop(L), n = 0;
    for (lua_pushnil(L); lua_next(L, ct); lua_pop(L, 1))
        n++;
    s->consts = calloc((size_t)n + 1, sizeof *s->consts);
    s->cptr = calloc((size_t)n + 1, sizeof *s->cptr);
    s->cnames = calloc((size_t)n + 1, sizeof *s->cnames);
    if (!s->consts || !s->cptr || !s->cnames)
        luaL_error(L, "onnx: out of memory");
    for (lua_pushnil(L); lua_next(L, ct); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "onnx: constants must map value names to tensors");
        /* a tensor, or {tensor, element type} ("int64": integer division) */
        int type = SR_ONNX_DOUBLE;
        if (lua_istable(L, -1)) {
            lua_geti(L, -1, 2);
            const char *tn = luaL_checkstring(L, -1);
            for (int k = 1; k <= 16; k++)
                if (!strcmp(tn, sr_onnx_type_name(k)))
                    type = k;
            lua_pop(L, 1);
            lua_geti(L, -1, 1);
            lua_replace(L, -2); /* the tensor in the table's place; the table stays in opts */
        }
        sr_tensor *v = sr_lua_check_tensor(L, -1);
        s->cnames[s->nconst] = lua_tostring(L, -2);
        s->consts[s->nconst].type = type;
        sr_tensor_share(&s->consts[s->nconst].value, v);
        s->cptr[s->nconst] = &s->consts[s->nconst];
        s->nconst++;
    }
    lua_pop(L, 1);
    o->nconst = s->nconst, o->const_names = s->cnames, o->const_values = s->cptr;
}

static int l_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    int t = lua_istable(L, 2) ? 2 : 0;
    if (!lua_isnoneornil(L, 2))
        luaL_checktype(L, 2, LUA_TTABLE);
    if (t)
        sr_lua_check_keys(L, t, "onnx.load", load_keys);
    sr_onnx_import_opts o = {0};
    double mean[16], std[16], size[SR_MAXDIM];
    o.dtype = SR_F32;
    if (t) {
        lua_getfield(L, t, "dtype");
        o.dtype = sr_lua_opt_dtype(L, -1, SR_F32);
        lua_pop(L, 1);
        if (lua_getfield(L, t, "input") != LUA_TNIL)
            o.input = luaL_checkstring(L, -1); /* kept alive by the options table */
        lua_pop(L, 1);
        if (lua_getfield(L, t, "output") != LUA_TNIL)
            o.output = luaL_checkstring(L, -1);
        lua_pop(L, 1);
        o.no_batch = sr_lua_opt_boolean(L, t, "onnx.load", "no_batch", 0);
        o.raw = sr_lua_opt_boolean(L, t, "onnx.load", "raw", 0);
        o.nsize = opt_numbers(L, t, "input_size", size, SR_MAXDIM - 1);
        for (int i = 0; i < o.nsize; i++) {
            if (size[i] != (double)(int64_t)size[i] || size[i] < 0)
                return luaL_error(L, "onnx.load: input_size entries must be integers >= 0");
            o.size[i] = (int64_t)size[i];
        }
        int nm = opt_numbers(L, t, "mean", mean, 16), ns = opt_numbers(L, t, "std", std, 16);
        if (nm != ns)
            return luaL_error(L, "onnx.load: mean has %d values, std %d", nm, ns);
        for (int i = 0; i < ns; i++)
            if (!(std[i] > 0))
                return luaL_error(L, "onnx.load: std[%d] must be positive", i + 1);
        o.nmean = nm, o.mean = mean, o.std = std;
    }
    load_state *s = new_state(L);
    int sidx = lua_gettop(L);
    if (t)
        read_constants(L, t, s, &o);
    lua_settop(L, sidx);
    if (sr_onnx_read(&s->model, path))
        return sr_lua_fail(L);
    sr_onnx_import_info info;
    sr_module *m = sr_onnx_import(&s->model, &o, &info);
    if (!m)
        return sr_lua_fail(L);
    sr_lua_push_module(L, m);
    lua_createtable(L, 0, 8);
    sr_lua_push_integers(L, info.sample, info.ndim, 0);
    lua_setfield(L, -2, "input");
    if (info.features[0]) {
        lua_pushstring(L, info.features);
        lua_setfield(L, -2, "features");
    }
    lua_pushstring(L, info.tap);
    lua_setfield(L, -2, "tap");
    lua_pushboolean(L, info.nhwc);
    lua_setfield(L, -2, "nhwc");
    lua_pushboolean(L, info.scores);
    lua_setfield(L, -2, "scores");
    lua_pushboolean(L, info.normalizes);
    lua_setfield(L, -2, "normalizes");
    if (info.normalizes) {
        lua_pushstring(L, info.preprocess);
        lua_setfield(L, -2, "preprocess");
    }
    lua_pushinteger(L, info.pruned);
    lua_setfield(L, -2, "pruned");
    lua_pushstring(L, info.normalization == SR_ONNX_NORM_GIVEN      ? "given"
                      : info.normalization == SR_ONNX_NORM_METADATA ? "metadata"
                                                                    : "none");
    lua_setfield(L, -2, "normalization");
    lua_pushinteger(L, info.nodes);
    lua_setfield(L, -2, "nodes");
    lua_pushinteger(L, info.folded);
    lua_setfield(L, -2, "folded");
    lua_pushinteger(L, s->model.opset);
    lua_setfield(L, -2, "opset");
    lua_pushstring(L, s->model.producer);
    lua_setfield(L, -2, "producer");
    lua_createtable(L, 0, s->model.nmeta);
    for (int i = 0; i < s->model.nmeta; i++) {
        lua_pushstring(L, s->model.meta_values[i]);
        lua_setfield(L, -2, s->model.meta_keys[i]);
    }
    lua_setfield(L, -2, "metadata");
    return 2;
}

/* srgeo.onnx.info(path): {opset, producer, ops = {op types in order of first use},
 * inputs/outputs = {{name, type, shape (-1 symbolic)}}, metadata} */
static void push_values(lua_State *L, const sr_onnx_value *v, int n)
{
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, v[i].name);
        lua_setfield(L, -2, "name");
        lua_pushstring(L, sr_onnx_type_name(v[i].type));
        lua_setfield(L, -2, "type");
        if (v[i].ndim >= 0) {
            sr_lua_push_integers(L, v[i].dims, v[i].ndim, 0);
            lua_setfield(L, -2, "shape");
        }
        lua_rawseti(L, -2, i + 1);
    }
}

static int l_info(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    load_state *s = new_state(L);
    if (sr_onnx_read(&s->model, path))
        return sr_lua_fail(L);
    const sr_onnx_model *m = &s->model;
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, m->opset);
    lua_setfield(L, -2, "opset");
    lua_pushstring(L, m->producer);
    lua_setfield(L, -2, "producer");
    lua_createtable(L, 0, 0);
    lua_createtable(L, 0, 0); /* seen */
    int k = 0;
    for (int i = 0; i < m->nnodes; i++) {
        if (lua_getfield(L, -1, m->nodes[i].op_type) == LUA_TNIL) {
            lua_pushboolean(L, 1);
            lua_setfield(L, -3, m->nodes[i].op_type);
            lua_pushstring(L, m->nodes[i].op_type);
            lua_rawseti(L, -4, ++k);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_setfield(L, -2, "ops");
    lua_pushinteger(L, m->nnodes);
    lua_setfield(L, -2, "nodes");
    lua_createtable(L, m->nnodes, 0);
    for (int i = 0; i < m->nnodes; i++) { /* a nameless node by its first output, as messages name it */
        const sr_onnx_node *n = &m->nodes[i];
        lua_pushstring(L, *n->name || !n->noutputs ? n->name : n->outputs[0]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "node_names");
    int nin = 0;
    sr_onnx_value *ins = calloc((size_t)m->ninputs + 1, sizeof *ins);
    if (!ins)
        return luaL_error(L, "onnx.info: out of memory");
    for (int i = 0; i < m->ninputs; i++) { /* inputs that are not initializers */
        int init = 0;
        for (int j = 0; j < m->ninits && !init; j++)
            init = !strcmp(m->inits[j].name, m->inputs[i].name);
        if (!init)
            ins[nin++] = m->inputs[i];
    }
    push_values(L, ins, nin);
    free(ins);
    lua_setfield(L, -2, "inputs");
    push_values(L, m->outputs, m->noutputs);
    lua_setfield(L, -2, "outputs");
    lua_createtable(L, 0, m->nmeta);
    for (int i = 0; i < m->nmeta; i++) {
        lua_pushstring(L, m->meta_values[i]);
        lua_setfield(L, -2, m->meta_keys[i]);
    }
    lua_setfield(L, -2, "metadata");
    return 1;
}

/* srgeo.onnx.evaluate(path, {constants = {name = tensor}}) -> {output name = tensor}:
 * a model whose inputs are all constants, folded. */
static int l_evaluate(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char *const keys[] = {"constants", NULL};
    sr_lua_check_keys(L, 2, "onnx.evaluate", keys);
    sr_onnx_import_opts o = {0};
    o.dtype = SR_F64;
    load_state *s = new_state(L);
    read_constants(L, 2, s, &o);
    if (sr_onnx_read(&s->model, path))
        return sr_lua_fail(L);
    int n = s->model.noutputs;
    sr_tensor *out = calloc((size_t)n + 1, sizeof *out);
    if (!out)
        return luaL_error(L, "onnx.evaluate: out of memory");
    if (sr_onnx_evaluate(&s->model, &o, out, n)) {
        for (int i = 0; i < n; i++)
            sr_tensor_free(&out[i]);
        free(out);
        return sr_lua_fail(L);
    }
    lua_createtable(L, 0, n);
    for (int i = 0; i < n; i++) {
        sr_tensor *t = sr_lua_new_tensor(L);
        *t = out[i];
        lua_setfield(L, -2, s->model.outputs[i].name);
    }
    free(out);
    return 1;
}

static int l_read_tensor(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    sr_onnx_tensor t;
    if (sr_onnx_read_tensor(&t, path)) {
        sr_onnx_tensor_free(&t);
        return sr_lua_fail(L);
    }
    sr_tensor *out = sr_lua_new_tensor(L);
    *out = t.value;
    t.value = (sr_tensor)SR_TENSOR_INIT;
    lua_pushstring(L, sr_onnx_type_name(t.type));
    sr_onnx_tensor_free(&t);
    return 2;
}

/* "values" (translated for the input's values), "constants" (folded
 * only), or false. */
static int l_supported(lua_State *L)
{
    int how = sr_onnx_op_supported(luaL_checkstring(L, 1));
    if (how)
        lua_pushstring(L, how == SR_ONNX_OP_VALUES ? "values" : "constants");
    else
        lua_pushboolean(L, 0);
    return 1;
}

static const luaL_Reg funcs[] = {
    {"load", l_load},
    {"info", l_info},
    {"evaluate", l_evaluate},
    {"read_tensor", l_read_tensor},
    {"supported", l_supported},
    {NULL, NULL},
};

void sr_lua_open_onnx(lua_State *L)
{
    luaL_newlib(L, funcs);
    lua_setfield(L, -2, "onnx");
}
