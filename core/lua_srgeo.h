/* lua_srgeo.h - shared helpers for the Lua bindings (the only C that sees Lua).
 *
 * Conventions every lua_*.c file follows:
 *  - A tensor is a full userdata holding an sr_tensor, metatable "srgeo.tensor".
 *    Create it *empty* first (sr_lua_new_tensor pushes it), then compute into
 *    it: if the computation fails, luaL_error unwinds and __gc frees whatever
 *    was allocated, so no path leaks.
 *  - Core failures become Lua errors through sr_lua_fail(L), which raises the
 *    core's message (it already names the op and the shapes).
 *  - Each binding file exports `void sr_lua_open_NAME(lua_State *L)` that
 *    adds its functions to the srgeo table on top of the stack; lua_srgeo.c
 *    calls them all from luaopen_srgeo.
 */
#ifndef SR_LUA_SRGEO_H
#define SR_LUA_SRGEO_H

#include <lauxlib.h>
#include <lua.h>

#include "tensor.h"

#define SR_TENSOR_MT "srgeo.tensor"
#define SR_MODULE_MT "srgeo.module"

/* Push a new empty tensor userdata and return its sr_tensor to fill. */
sr_tensor *sr_lua_new_tensor(lua_State *L);
/* Check argument idx is a tensor (luaL_checkudata with a readable message). */
sr_tensor *sr_lua_check_tensor(lua_State *L, int idx);
/* The tensor at idx, or NULL if it is not one. */
sr_tensor *sr_lua_test_tensor(lua_State *L, int idx);
/* Count a freshly allocated tensor's bytes towards a full GC (Lua cannot
 * see tensor storage); call on big new tensors a binding returns. */
void sr_lua_track_tensor(lua_State *L, int idx);
/* Check argument idx is a module (srgeo.nn ...). */
struct sr_module *sr_lua_check_module(lua_State *L, int idx);
/* Raise the core error message as a Lua error (never returns). */
int sr_lua_fail(lua_State *L);

/* Read a shape from a table {2,3,4} or from integer arguments starting at
 * idx; returns ndim. */
int sr_lua_check_shape(lua_State *L, int idx, int64_t *shape);

/* Check that argument idx is a "float32"/"float64" string (or absent: def). */
sr_dtype sr_lua_opt_dtype(lua_State *L, int idx, sr_dtype def);

/* Binding entry points (one per lua_*.c file). */
void sr_lua_open_tensor(lua_State *L);
void sr_lua_open_nn(lua_State *L);
void sr_lua_open_image(lua_State *L);
void sr_lua_open_data(lua_State *L);
void sr_lua_open_profile(lua_State *L);
void sr_lua_open_safetensors(lua_State *L);
void sr_lua_open_train(lua_State *L);
void sr_lua_open_augment(lua_State *L);

/* luaopen_srgeo is the C module entry (build/srgeo.so) and what the shell
 * preloads. */
int luaopen_srgeo(lua_State *L);

#endif
