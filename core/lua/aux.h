/* aux.h - shared helpers for the Lua bindings (the only C that sees Lua).
 *
 * Conventions every lua_*.c file follows:
 *  - A tensor is a full userdata holding an sr_tensor, metatable "srgeo.tensor".
 *    Create it *empty* first (sr_lua_new_tensor pushes it), then compute into
 *    it: if the computation fails, luaL_error unwinds and __gc frees whatever
 *    was allocated, so no path leaks.
 *  - Core failures become Lua errors through sr_lua_fail(L), which raises the
 *    core's message (it already names the op and the shapes).
 *  - Each binding file exports `void sr_lua_open_NAME(lua_State *L)` (lua/open.h)
 *    that adds its functions to the srgeo table on top of the stack; only
 *    the opener, lua/srgeo.c, calls them (from luaopen_srgeo).
 */
#ifndef SR_LUA_AUX_H
#define SR_LUA_AUX_H

#include <lauxlib.h>
#include <lua.h>

#include "base/opts.h"
#include "tensor/tensor.h"

#define SR_TENSOR_MT "srgeo.tensor"
#define SR_MODULE_MT "srgeo.module"
#define SR_SIZE_MT "srgeo.size"

/* Push a new empty tensor userdata and return its sr_tensor to fill. */
sr_tensor *sr_lua_new_tensor(lua_State *L);
/* Check argument idx is a tensor (luaL_checkudata with a readable message). */
sr_tensor *sr_lua_check_tensor(lua_State *L, int idx);
/* The tensor at idx, or NULL if it is not one. */
sr_tensor *sr_lua_test_tensor(lua_State *L, int idx);
/* Count a freshly allocated tensor's bytes towards a full GC (Lua cannot
 * see tensor storage); call on big new tensors a binding returns. */
void sr_lua_track_tensor(lua_State *L, int idx);
/* The same for a result that shares a module's buffer (m:forward's output,
 * m:vjp's gradient): Lua's reference pins it, so the module's next pass
 * takes another one, and these add up like fresh tensors until a full
 * collection frees them (uncharged, 1,200 calls of m:vjp on small_resnet
 * grew RSS by 0.5 MB a call with no collection in sight). */
void sr_lua_track_result(lua_State *L, int idx);
/* Check argument idx is a module (srgeo.nn ...). */
struct sr_module *sr_lua_check_module(lua_State *L, int idx);
/* Push a module userdata owning one reference to m (takes the reference). */
void sr_lua_push_module(lua_State *L, struct sr_module *m);
/* Raise the core error message as a Lua error (never returns). */
int sr_lua_fail(lua_State *L);

/* Strings that become C strings (paths, tensor and module names, option
 * keys and values): a Lua string has a length and may hold NUL bytes, C
 * would see only the part before the first one (a file saved under a
 * truncated name, a lookup of another tensor).  Such a string is an error.
 * sr_lua_check_cstring: argument idx (a string or a number), as
 * luaL_checkstring, else "OP: argument #IDX contains a NUL byte at
 * position K" (op: what the user called, "npy.save");
 * sr_lua_opt_cstring: the same, def when absent or nil;
 * sr_lua_to_cstring: the string value at idx (a table entry), raising
 * "OP: WHAT contains a NUL byte at position K" (NULL when not a string). */
const char *sr_lua_check_cstring(lua_State *L, int idx, const char *op);
const char *sr_lua_opt_cstring(lua_State *L, int idx, const char *op, const char *def);
const char *sr_lua_to_cstring(lua_State *L, int idx, const char *op, const char *what);

/* Read a shape from a table {2,3,4} or from integer arguments starting at
 * idx; returns ndim. */
int sr_lua_check_shape(lua_State *L, int idx, int64_t *shape);

/* Check that argument idx is a "float32"/"float64" string (or absent: def). */
sr_dtype sr_lua_opt_dtype(lua_State *L, int idx, sr_dtype def);

/* Options tables.  Every binding reads them through one sr_opts over a Lua
 * table (base/opts.h), so layer constructors, declared options and the
 * single-option readers below share its conversions and messages. */
typedef struct sr_lua_opts {
    sr_opts o;
    lua_State *L;
    int idx;                   /* absolute index of the table; 0: no options */
    const char *used[32];      /* the keys read so far */
    int nused;
} sr_lua_opts;
/* lo over the options table at t: none or nil is no options, anything else
 * but a table an argument error.  op names the function the user called
 * ("pgd", "image.load"), for messages. */
void sr_lua_opts_init(sr_lua_opts *lo, lua_State *L, int t, const char *op);
/* Raise "<op>: unknown option '<key>'; options: <help>" for a key of lo's
 * table that nothing read and also (NULL-terminated, or NULL) does not
 * name: a misspelt option silently ignored would give a result the user
 * did not ask for. */
void sr_lua_opts_check_used(sr_lua_opts *lo, const char *help, const char *const *also);
/* The options declared in specs from the table at t into the struct dst
 * (sr_opts_read: defaults, types, ranges, unknown keys), raising the core's
 * message ("profile: batch must be an integer in 1..1000000, got 0").
 * Strings in dst are the table's: keep it alive while they are used. */
void sr_lua_read_opts(lua_State *L, int t, const char *op, const sr_opt_spec *specs, void *dst);

/* Push a declared option set as a list {{name=, type=, what=, default=,
 * help=}, ...}, for help texts (type: "integer", "number", "boolean",
 * "string", "choice" or "other"). */
void sr_lua_push_specs(lua_State *L, const sr_opt_spec *specs);

/* Single options, for bindings whose options are a handful of fields of no
 * core struct: field k of the table at t, or def when t is none or nil or
 * the field is nil, read as a one-entry declaration would (messages
 * "<op>: <k> must be ..., got ..."). */
lua_Number sr_lua_opt_number(lua_State *L, int t, const char *op, const char *k, lua_Number def);
lua_Integer sr_lua_opt_integer(lua_State *L, int t, const char *op, const char *k, lua_Integer def);
/* An integer in lo..hi.  false reads as 0, for options where 0 is "none"
 * (crop=false, resize=false) and, like def, is not range-checked. */
lua_Integer sr_lua_opt_integer_in(lua_State *L, int t, const char *op, const char *k, lua_Integer def,
                                  lua_Integer lo, lua_Integer hi);
/* true/false, or a number (0 is false, as sr_opt_bool reads it). */
int sr_lua_opt_boolean(lua_State *L, int t, const char *op, const char *k, int def);
/* The position in names (NULL-terminated) of the string field k (a number
 * counts as its string form: norm=2 is "2"), or def when absent. */
int sr_lua_opt_choice(lua_State *L, int t, const char *op, const char *k, int def, const char *const *names);
/* Raise "<op>: unknown option '<key>'" for a key of the table at t (none or
 * nil: no keys) not in keys (NULL-terminated). */
void sr_lua_check_keys(lua_State *L, int t, const char *op, const char *const *keys);

/* Before a write to path: remove the temporaries dead writers left in its
 * folder (base/fsutil.h's sr_tmp_clean), once per folder and Lua state
 * (the folders done are kept in the registry), so a run that writes
 * thousands of files scans each folder once. */
void sr_lua_clean_tmp(lua_State *L, const char *path);

/* Push the list {v[0] + add, ..., v[n-1] + add} (add = 1: 0-based core
 * indices as 1-based Lua ones). */
void sr_lua_push_integers(lua_State *L, const int64_t *v, int64_t n, int64_t add);
/* Push a size: the list {shape[0], ..., shape[ndim-1]} with metatable
 * "srgeo.size", which prints it as "(2,3,4)" (t:size(), m:output_shape()). */
void sr_lua_push_size(lua_State *L, const int64_t *shape, int ndim);
/* Push the list {v[0], ..., v[n-1]}. */
void sr_lua_push_numbers(lua_State *L, const double *v, int64_t n);
/* Push a list of the entry names of directory dir (unsorted, without "."
 * and ".."); returns their count, or -1 with errno set and nothing pushed. */
int sr_lua_push_dir_names(lua_State *L, const char *dir);
/* Register metatable mt: the metamethods in meta, and methods (NULL: none)
 * as its __index table, or, when meta has its own __index function, as the
 * table mt.methods for that function to look methods up in. */
void sr_lua_new_class(lua_State *L, const char *mt, const luaL_Reg *meta, const luaL_Reg *methods);

/* The data-parallel sum over the MPI world (lua/mpi.c) for the core's
 * training (sr_run.sync, the gradient sums), or NULL when this process
 * runs alone (not launched by mpirun, or one rank). */
const struct sr_sum_hook *sr_lua_mpi_sum(void);
/* The ranks of the MPI world (1 without mpirun). */
int sr_lua_mpi_size(void);

#endif
