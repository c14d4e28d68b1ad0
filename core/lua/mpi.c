/* lua/mpi.c - srgeo._mpi, the MPI world for Lua (lua/srgeo/mpi.lua makes
 * it srgeo.mpi), and the data-parallel sum the core's training uses.
 *
 * Launch.  Only a process started by mpirun (Open MPI sets
 * OMPI_COMM_WORLD_SIZE; PMIx launchers set PMIX_RANK) loads MPI: the opener
 * dlopens build/srgeo_mpi.so (core/mpi/comm.c, linked with libmpi) with
 * RTLD_GLOBAL, as Open MPI's plugins need, initialises it, and registers
 * an exit handler that finalizes on a zero exit status and aborts the job
 * on any other (a rank that fails must not leave the others waiting in a
 * collective).  Anywhere else srgeo._mpi is one process: rank 0 of 1, the
 * collectives the identity, and libmpi never loaded.  SRGEO_MPI=0 keeps a
 * launched process alone; SRGEO_MPI_LIB names the library.
 *
 * Threads.  Under mpirun a rank's default thread count is the cores it
 * may run on: its CPU affinity when the launcher bound it, else the
 * node's cores shared by the ranks on the node (SRGEO_THREADS overrides).
 * Results depend on the thread count (GEMM blocking, reduction order), and
 * images go to whichever rank asks first, so ranks with different counts
 * gave a profile matching no single run (and differing between two
 * identical jobs): at start-up the ranks agree on the smallest count, and
 * rank 0 says so when they differed.  srgeo.threads(n) afterwards sets n
 * on the rank that calls it: call it on every rank alike.
 *
 * Values.  bcast, gather and the hand-out send Lua values through pack:
 * nil, booleans, integers and floats (bit-exact, subtype kept), strings,
 * tables (keys and values of these kinds; metatables are not sent) and
 * tensors (dtype, shape, data).  Functions and other userdata raise an
 * error naming the field, in one process too (nothing travels there, but a
 * script that works alone must not fail first on a cluster).  Ranks are assumed to share byte order.
 *
 *   srgeo._mpi.rank(), .size(), .local_size(), .active(), .dynamic()
 *   .barrier()  .bcast(v [, root])  .gather(v [, root]) -> list on root
 *   .allreduce(x [, "sum"|"max"|"min"]) -> number or new tensor
 *   .bcast_tensors(module or {name = tensor} [, root])   (in place)
 *   .pack(v) -> string, .unpack(s) -> v, .check(v) -> v (or pack's error)
 *   .serve_begin(first, last), .serve_next() -> i|nil, .serve_put(i, v),
 *   .serve_take(wait) -> i, v (rank 0), .serve_end()   (see core/mpi/comm.h) */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/threads.h"
#include "lua/aux.h"
#include "lua/open.h"
#include "mpi/comm.h"
#include "nn/module.h"

/* The MPI world of this process: set once by the opener, like MPI's own. */
static const sr_comm_api *comm;
static int world_rank, world_size = 1, node_size = 1;

static int mpi_fail(lua_State *L) { return luaL_error(L, "%s", comm->error()); }

/* --- values as bytes --------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
} box;

static int box_gc(lua_State *L)
{
    box *b = lua_touserdata(L, 1);
    free(b->p);
    b->p = NULL;
    return 0;
}

/* A growable buffer owned by a userdata on the stack, so an error while
 * packing frees it. */
static box *box_new(lua_State *L)
{
    box *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    if (luaL_newmetatable(L, "srgeo.mpi.box")) {
        lua_pushcfunction(L, box_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return b;
}

/* b NULL: only check that the value can travel (pack_check). */
static void box_add(lua_State *L, box *b, const void *s, size_t n)
{
    if (n == 0 || !b)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            luaL_error(L, "mpi: out of memory packing %I bytes", (lua_Integer)(b->n + n));
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

#define PACK_DEPTH 64

static void pack(lua_State *L, box *b, int idx, int depth, const char *field)
{
    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        box_add(L, b, "n", 1);
        return;
    case LUA_TBOOLEAN:
        box_add(L, b, lua_toboolean(L, idx) ? "t" : "f", 1);
        return;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            lua_Integer v = lua_tointeger(L, idx);
            box_add(L, b, "i", 1);
            box_add(L, b, &v, sizeof v);
        } else {
            lua_Number v = lua_tonumber(L, idx);
            box_add(L, b, "d", 1);
            box_add(L, b, &v, sizeof v);
        }
        return;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        int64_t len = (int64_t)n;
        box_add(L, b, "s", 1);
        box_add(L, b, &len, sizeof len);
        box_add(L, b, s, n);
        return;
    }
    case LUA_TTABLE:
        if (depth >= PACK_DEPTH)
            luaL_error(L, "mpi: cannot send field '%s': tables nested more than %d deep (a cycle?)", field,
                       PACK_DEPTH);
        luaL_checkstack(L, 4, "mpi: pack");
        box_add(L, b, "T", 1);
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : field;
            pack(L, b, -2, depth + 1, k);
            pack(L, b, -1, depth + 1, k);
            lua_pop(L, 1);
        }
        box_add(L, b, "e", 1);
        return;
    case LUA_TUSERDATA: {
        sr_tensor *t = sr_lua_test_tensor(L, idx);
        if (t && !t->storage) {
            box_add(L, b, "x", 1); /* an empty tensor */
            return;
        }
        if (t) {
            unsigned char head[2] = {(unsigned char)t->dtype, (unsigned char)t->ndim};
            box_add(L, b, "X", 1);
            box_add(L, b, head, 2);
            box_add(L, b, t->shape, sizeof(int64_t) * (size_t)t->ndim);
            box_add(L, b, sr_data(t), (size_t)sr_numel(t) * sr_dtype_size(t->dtype));
            return;
        }
        break;
    }
    default:
        break;
    }
    luaL_error(L, "mpi: cannot send field '%s': a %s (values are nil, booleans, numbers, strings, tables and tensors)",
               field, luaL_typename(L, idx));
}

typedef struct {
    const char *p, *end;
} reader;

static const void *take(lua_State *L, reader *r, size_t n)
{
    if ((size_t)(r->end - r->p) < n)
        luaL_error(L, "mpi: a truncated message (%I bytes missing)", (lua_Integer)(n - (size_t)(r->end - r->p)));
    const void *s = r->p;
    r->p += n;
    return s;
}

static void unpack(lua_State *L, reader *r, int depth)
{
    luaL_checkstack(L, 4, "mpi: unpack");
    char tag = *(const char *)take(L, r, 1);
    switch (tag) {
    case 'n':
        lua_pushnil(L);
        return;
    case 't':
    case 'f':
        lua_pushboolean(L, tag == 't');
        return;
    case 'i': {
        lua_Integer v;
        memcpy(&v, take(L, r, sizeof v), sizeof v);
        lua_pushinteger(L, v);
        return;
    }
    case 'd': {
        lua_Number v;
        memcpy(&v, take(L, r, sizeof v), sizeof v);
        lua_pushnumber(L, v);
        return;
    }
    case 's': {
        int64_t n;
        memcpy(&n, take(L, r, sizeof n), sizeof n);
        if (n < 0)
            luaL_error(L, "mpi: a corrupt message (string of %lld bytes)", (long long)n);
        lua_pushlstring(L, take(L, r, (size_t)n), (size_t)n);
        return;
    }
    case 'T':
        if (depth >= PACK_DEPTH)
            luaL_error(L, "mpi: a corrupt message (tables nested too deep)");
        lua_newtable(L);
        while (*(const char *)take(L, r, 1) != 'e') {
            r->p--;
            unpack(L, r, depth + 1);
            if (lua_isnil(L, -1))
                luaL_error(L, "mpi: a corrupt message (nil table key)");
            unpack(L, r, depth + 1);
            lua_rawset(L, -3);
        }
        return;
    case 'x':
        sr_lua_new_tensor(L);
        return;
    case 'X': {
        const unsigned char *head = take(L, r, 2);
        if (head[0] > SR_F64 || head[1] > SR_MAXDIM)
            luaL_error(L, "mpi: a corrupt message (tensor header)");
        int64_t shape[SR_MAXDIM];
        memcpy(shape, take(L, r, sizeof(int64_t) * head[1]), sizeof(int64_t) * head[1]);
        sr_tensor *t = sr_lua_new_tensor(L);
        if (sr_tensor_alloc(t, (sr_dtype)head[0], head[1], shape))
            sr_lua_fail(L);
        size_t bytes = (size_t)sr_numel(t) * sr_dtype_size(t->dtype);
        memcpy(sr_data(t), take(L, r, bytes), bytes);
        sr_lua_track_tensor(L, -1);
        return;
    }
    default:
        luaL_error(L, "mpi: a corrupt message (tag %d)", tag);
    }
}

/* Pack the value at idx into a box pushed on the stack. */
static box *pack_value(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    box *b = box_new(L);
    pack(L, b, idx, 0, "(value)");
    return b;
}

/* Raise the error pack would for the value at idx, copying nothing: one
 * process refuses what mpirun could not send (a bcast of a function worked
 * alone and failed only on a cluster). */
static void pack_check(lua_State *L, int idx) { pack(L, NULL, lua_absindex(L, idx), 0, "(value)"); }

static void unpack_value(lua_State *L, const void *s, size_t n)
{
    reader r = {s, (const char *)s + n};
    unpack(L, &r, 0);
    if (r.p != r.end)
        luaL_error(L, "mpi: a corrupt message (%I bytes after the value)", (lua_Integer)(r.end - r.p));
}

static int l_pack(lua_State *L)
{
    luaL_checkany(L, 1);
    box *b = pack_value(L, 1);
    lua_pushlstring(L, b->p, b->n);
    return 1;
}

/* check(v): v, or the error sending it would raise (mpi.map's results in
 * one process). */
static int l_check(lua_State *L)
{
    luaL_checkany(L, 1);
    lua_settop(L, 1);
    pack_check(L, 1);
    return 1;
}

static int l_unpack(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    unpack_value(L, s, n);
    return 1;
}

/* --- the world ----------------------------------------------------------- */

static int l_rank(lua_State *L)
{
    lua_pushinteger(L, world_rank);
    return 1;
}

static int l_size(lua_State *L)
{
    lua_pushinteger(L, world_size);
    return 1;
}

static int l_local_size(lua_State *L)
{
    lua_pushinteger(L, node_size);
    return 1;
}

static int l_active(lua_State *L)
{
    lua_pushboolean(L, comm != NULL);
    return 1;
}

static int l_dynamic(lua_State *L)
{
    lua_pushboolean(L, comm == NULL || comm->dynamic());
    return 1;
}

static int l_barrier(lua_State *L)
{
    if (comm && comm->barrier())
        return mpi_fail(L);
    return 0;
}

static int check_root(lua_State *L, int idx)
{
    lua_Integer root = luaL_optinteger(L, idx, 0);
    if (root < 0 || root >= world_size)
        luaL_error(L, "mpi: root %d is not a rank of 0..%d", (int)root, world_size - 1);
    return (int)root;
}

/* v = bcast(v [, root]): root's value on every rank. */
static int l_bcast(lua_State *L)
{
    int root = check_root(L, 2);
    lua_settop(L, 1);
    if (!comm) {
        pack_check(L, 1);
        return 1;
    }
    int64_t len = 0;
    box *b = NULL;
    if (world_rank == root) {
        b = pack_value(L, 1);
        len = (int64_t)b->n;
    }
    if (comm->bcast(&len, sizeof len, root))
        return mpi_fail(L);
    if (world_rank == root) {
        if (comm->bcast(b->p, len, root))
            return mpi_fail(L);
        lua_settop(L, 1);
        return 1;
    }
    box *in = box_new(L);
    in->p = malloc(len > 0 ? (size_t)len : 1);
    if (!in->p)
        return luaL_error(L, "mpi.bcast: out of memory for %lld bytes", (long long)len);
    if (comm->bcast(in->p, len, root))
        return mpi_fail(L);
    unpack_value(L, in->p, (size_t)len);
    return 1;
}

/* list = gather(v [, root]): on root the values of every rank, in rank
 * order (list[r + 1] from rank r); nil elsewhere. */
static int l_gather(lua_State *L)
{
    int root = check_root(L, 2);
    lua_settop(L, 1);
    if (!comm) {
        pack_check(L, 1);
        lua_createtable(L, 1, 0);
        lua_pushvalue(L, 1);
        lua_rawseti(L, -2, 1);
        return 1;
    }
    box *b = pack_value(L, 1);
    int64_t *lens = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)world_size, 0);
    box *all = box_new(L);
    void *out = NULL;
    if (comm->gather(b->p, (int64_t)b->n, root, &out, lens))
        return mpi_fail(L);
    if (world_rank != root)
        return 0;
    all->p = out;
    lua_createtable(L, world_size, 0);
    size_t at = 0;
    for (int r = 0; r < world_size; r++) {
        unpack_value(L, all->p + at, (size_t)lens[r]);
        lua_rawseti(L, -2, r + 1);
        at += (size_t)lens[r];
    }
    return 1;
}

static sr_comm_op check_op(lua_State *L, int idx)
{
    static const char *const ops[] = {"sum", "max", "min", NULL};
    int i = luaL_checkoption(L, idx, "sum", ops);
    return i == 0 ? SR_COMM_SUM : i == 1 ? SR_COMM_MAX : SR_COMM_MIN;
}

/* allreduce(x [, op]): x a number (an integer stays one) or a tensor (a new
 * tensor of its dtype and shape is returned). */
static int l_allreduce(lua_State *L)
{
    sr_comm_op op = check_op(L, 2);
    if (lua_type(L, 1) == LUA_TNUMBER) {
        if (lua_isinteger(L, 1)) {
            int64_t v = lua_tointeger(L, 1);
            if (comm && comm->allreduce(&v, 1, SR_COMM_I64, op))
                return mpi_fail(L);
            lua_pushinteger(L, v);
        } else {
            double v = lua_tonumber(L, 1);
            if (comm && comm->allreduce(&v, 1, SR_COMM_F64, op))
                return mpi_fail(L);
            lua_pushnumber(L, v);
        }
        return 1;
    }
    sr_tensor *x = sr_lua_test_tensor(L, 1);
    if (!x)
        return luaL_error(L, "mpi.allreduce: expected a number or a tensor, got a %s", luaL_typename(L, 1));
    sr_tensor *y = sr_lua_new_tensor(L);
    if (sr_tensor_copy(y, x))
        return sr_lua_fail(L);
    if (comm && comm->allreduce(sr_data(y), sr_numel(y), y->dtype == SR_F64 ? SR_COMM_F64 : SR_COMM_F32, op))
        return mpi_fail(L);
    sr_lua_track_tensor(L, -1);
    return 1;
}

/* bcast_tensors(x [, root]): x a module (its parameters and buffers) or a
 * table of tensors (in key order) gets root's values in place: one model
 * and optimiser state on every rank of a data-parallel run.  The ranks'
 * tensors must agree in number and bytes. */
typedef struct {
    lua_State *L;
    int n;
} tensor_walk;

static int push_param(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path;
    (void)owner;
    tensor_walk *w = ud;
    lua_pushlightuserdata(w->L, &p->value);
    lua_rawseti(w->L, -2, ++w->n);
    return 0;
}

static int l_bcast_tensors(lua_State *L)
{
    int root = check_root(L, 2);
    lua_settop(L, 1);
    lua_newtable(L); /* 2: the tensors, as light userdata, in a fixed order */
    int n = 0;
    if (lua_type(L, 1) == LUA_TTABLE) {
        lua_newtable(L); /* 3: the keys, sorted */
        lua_pushnil(L);
        while (lua_next(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING || !sr_lua_test_tensor(L, -1))
                return luaL_error(L, "mpi.bcast_tensors: expected a module or a table of named tensors");
            lua_pop(L, 1);
            lua_pushvalue(L, -1);
            lua_rawseti(L, 3, ++n);
        }
        lua_getglobal(L, "table");
        lua_getfield(L, -1, "sort");
        lua_pushvalue(L, 3);
        lua_call(L, 1, 0);
        lua_pop(L, 1);
        for (int i = 1; i <= n; i++) {
            lua_rawgeti(L, 3, i);
            lua_gettable(L, 1);
            lua_pushlightuserdata(L, sr_lua_check_tensor(L, -1));
            lua_rawseti(L, 2, i);
            lua_pop(L, 1);
        }
        lua_settop(L, 2);
    } else {
        tensor_walk w = {L, 0};
        sr_module_walk_params(sr_lua_check_module(L, 1), push_param, &w);
        n = w.n;
    }
    if (!comm)
        return 0;
    int64_t shape[2] = {n, 0}, mine[2];
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        sr_tensor *t = lua_touserdata(L, -1);
        shape[1] += (int64_t)sr_numel(t) * (int64_t)sr_dtype_size(t->dtype);
        lua_pop(L, 1);
    }
    memcpy(mine, shape, sizeof mine);
    if (comm->bcast(shape, sizeof shape, root))
        return mpi_fail(L);
    int64_t any = shape[0] != mine[0] || shape[1] != mine[1];
    if (comm->allreduce(&any, 1, SR_COMM_I64, SR_COMM_MAX))
        return mpi_fail(L);
    if (any)
        return luaL_error(L, "mpi.bcast_tensors: rank %d holds %d tensors of %I bytes, rank %d %d of %I (the ranks' "
                          "models differ)", world_rank, (int)mine[0], (lua_Integer)mine[1], root, (int)shape[0],
                          (lua_Integer)shape[1]);
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        sr_tensor *t = lua_touserdata(L, -1);
        if (comm->bcast(sr_data(t), (int64_t)sr_numel(t) * (int64_t)sr_dtype_size(t->dtype), root))
            return mpi_fail(L);
        lua_pop(L, 1);
    }
    return 0;
}

/* --- the hand-out (core/mpi/comm.h); items are 1-based here ------------- */

static void need_comm(lua_State *L, const char *op)
{
    if (!comm)
        luaL_error(L, "mpi.%s: not running under mpirun", op);
}

static int l_serve_begin(lua_State *L)
{
    need_comm(L, "serve_begin");
    lua_Integer first = luaL_checkinteger(L, 1), last = luaL_checkinteger(L, 2);
    if (first < 1 || last < first - 1)
        return luaL_error(L, "mpi.serve_begin: items %d..%d", (int)first, (int)last);
    if (comm->serve_begin(first - 1, last))
        return mpi_fail(L);
    return 0;
}

static int l_serve_next(lua_State *L)
{
    need_comm(L, "serve_next");
    int64_t item;
    if (comm->serve_next(&item))
        return mpi_fail(L);
    if (item < 0)
        lua_pushnil(L);
    else
        lua_pushinteger(L, item + 1);
    return 1;
}

static int l_serve_put(lua_State *L)
{
    need_comm(L, "serve_put");
    lua_Integer i = luaL_checkinteger(L, 1);
    luaL_checkany(L, 2);
    box *b = pack_value(L, 2);
    if (comm->serve_put(i - 1, b->p, (int64_t)b->n))
        return mpi_fail(L);
    return 0;
}

/* i, v = serve_take(wait): the next result deposited with rank 0, or nil
 * when none has arrived and not wait. */
static int l_serve_take(lua_State *L)
{
    need_comm(L, "serve_take");
    int wait = lua_toboolean(L, 1);
    int64_t item, len;
    box *b = box_new(L);
    int got = comm->serve_take(wait, &item, (void **)&b->p, &len);
    if (got < 0)
        return mpi_fail(L);
    if (!got)
        return 0;
    lua_pushinteger(L, item + 1);
    unpack_value(L, b->p, (size_t)len);
    return 2;
}

static int l_serve_end(lua_State *L)
{
    need_comm(L, "serve_end");
    if (comm->serve_end())
        return mpi_fail(L);
    return 0;
}

/* --- the core's data-parallel sum ----------------------------------------- */

static int hook_sum(void *buf, int64_t n, sr_dtype dt, void *ctx)
{
    (void)ctx;
    if (comm->allreduce(buf, n, dt == SR_F64 ? SR_COMM_F64 : SR_COMM_F32, SR_COMM_SUM))
        return sr_fail("%s", comm->error());
    return 0;
}

static int hook_start(void *buf, int64_t n, sr_dtype dt, void *ctx)
{
    (void)ctx;
    if (comm->iallreduce(buf, n, dt == SR_F64 ? SR_COMM_F64 : SR_COMM_F32, SR_COMM_SUM))
        return sr_fail("%s", comm->error());
    return 0;
}

static int hook_progress(void *ctx)
{
    (void)ctx;
    return comm->itest() ? sr_fail("%s", comm->error()) : 0;
}

static int hook_wait(void *ctx)
{
    (void)ctx;
    return comm->iwait() ? sr_fail("%s", comm->error()) : 0;
}

int sr_lua_mpi_size(void) { return world_size; }

const sr_sum_hook *sr_lua_mpi_sum(void)
{
    static const sr_sum_hook hook = {hook_sum, NULL, hook_start, hook_progress, hook_wait};
    return comm && world_size > 1 ? &hook : NULL;
}

/* --- launch ---------------------------------------------------------------- */

/* Open MPI's own notices come from its help-text system, which on this
 * Open MPI (4.1.4) sometimes fails ("ORTE_ERROR_LOG: Data unpack had
 * inadequate space") and prints nothing: say it ourselves. */
static void at_exit(int status, void *arg)
{
    (void)arg;
    if (status != 0)
        fprintf(stderr, "srgeo: rank %d of %d failed (exit status %d); ending the MPI job\n", world_rank,
                world_size, status);
    comm->finish(status);
}

/* A rank killed or failed: the launcher ends the others with SIGTERM. */
static void on_term(int sig)
{
    static const char msg[] = "srgeo: stopped by mpirun (another rank failed or was killed); what was finished "
                              "is kept: rerun the same command, with any number of ranks, to resume\n";
    if (world_rank == 0) {
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The cores this rank may use: its affinity when the launcher bound it to
 * fewer than the node's, else the node's shared by the ranks on it. */
static int rank_threads(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    int avail = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    long n = avail > 0 && avail < online ? avail : online / node_size;
    return n < 1 ? 1 : (int)n;
}

/* build/srgeo_mpi.so beside the object this code is in (the shell or
 * srgeo.so), or SRGEO_MPI_LIB. */
static void library_path(char *buf, size_t n)
{
    const char *env = getenv("SRGEO_MPI_LIB");
    if (env && *env) {
        snprintf(buf, n, "%s", env);
        return;
    }
    Dl_info info;
    char path[PATH_MAX];
    if (dladdr((void *)library_path, &info) && info.dli_fname && realpath(info.dli_fname, path))
        snprintf(buf, n, "%s/srgeo_mpi.so", dirname(path));
    else
        snprintf(buf, n, "srgeo_mpi.so");
}

static int launched(void)
{
    const char *off = getenv("SRGEO_MPI");
    if (off && strcmp(off, "0") == 0)
        return 0;
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || (off && strcmp(off, "1") == 0);
}

static void start(lua_State *L)
{
    char path[PATH_MAX + 32];
    library_path(path, sizeof path);
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        luaL_error(L, "srgeo: launched by mpirun, but %s cannot be loaded: %s (make builds it; SRGEO_MPI=0 runs "
                      "each process alone)", path, dlerror());
    const sr_comm_api *(*get)(void) = (const sr_comm_api *(*)(void))dlsym(h, "sr_comm_api_get");
    const sr_comm_api *api = get ? get() : NULL;
    if (!api || api->version != SR_COMM_API_VERSION)
        luaL_error(L, "srgeo: %s is not this srgeo's MPI library (version %d, want %d); rebuild with make", path,
                   api ? api->version : -1, SR_COMM_API_VERSION);
    if (api->init(&world_rank, &world_size, &node_size))
        luaL_error(L, "srgeo: %s", api->error());
    comm = api;
    /* lua_close dlcloses srgeo.so (stock lua5.4's require): pin it, or the
     * exit handler below would run unmapped code. */
    Dl_info self;
    if (dladdr((void *)at_exit, &self) && self.dli_fname)
        dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    on_exit(at_exit, NULL);
    signal(SIGTERM, on_term);
    if (!sr_threads_env())
        sr_threads_set(rank_threads());
    int64_t lo = sr_threads_get(), hi = lo;
    if (api->allreduce(&lo, 1, SR_COMM_I64, SR_COMM_MIN) || api->allreduce(&hi, 1, SR_COMM_I64, SR_COMM_MAX))
        luaL_error(L, "srgeo: %s", api->error());
    if (lo != hi) {
        sr_threads_set((int)lo);
        if (world_rank == 0)
            fprintf(stderr, "srgeo: the ranks' thread counts differ (%lld to %lld); every rank uses %lld, so results "
                            "match one process with SRGEO_THREADS=%lld\n", (long long)lo, (long long)hi,
                    (long long)lo, (long long)lo);
    }
}

static const luaL_Reg funcs[] = {
    {"rank", l_rank},
    {"size", l_size},
    {"local_size", l_local_size},
    {"active", l_active},
    {"dynamic", l_dynamic},
    {"barrier", l_barrier},
    {"bcast", l_bcast},
    {"gather", l_gather},
    {"allreduce", l_allreduce},
    {"bcast_tensors", l_bcast_tensors},
    {"pack", l_pack},
    {"check", l_check},
    {"unpack", l_unpack},
    {"serve_begin", l_serve_begin},
    {"serve_next", l_serve_next},
    {"serve_put", l_serve_put},
    {"serve_take", l_serve_take},
    {"serve_end", l_serve_end},
    {NULL, NULL},
};

void sr_lua_open_mpi(lua_State *L)
{
    if (!comm && launched())
        start(L);
    luaL_newlib(L, funcs);
    lua_setfield(L, -2, "_mpi");
}
