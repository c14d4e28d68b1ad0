/* open.h - the binding entry points: each adds its area's functions to the
 * srgeo table on top of the stack.  Declared for the opener (lua/srgeo.c),
 * the only caller, and for each binding's definition to be checked against. */
#ifndef SR_LUA_OPEN_H
#define SR_LUA_OPEN_H

#include <lua.h>

void sr_lua_open_tensor(lua_State *L);
void sr_lua_open_nn(lua_State *L);
void sr_lua_open_image(lua_State *L);
void sr_lua_open_data(lua_State *L);
void sr_lua_open_profile(lua_State *L);
void sr_lua_open_safetensors(lua_State *L);
void sr_lua_open_torch(lua_State *L);
void sr_lua_open_train(lua_State *L);
void sr_lua_open_augment(lua_State *L);
void sr_lua_open_opts(lua_State *L);
void sr_lua_open_fs(lua_State *L);
void sr_lua_open_json(lua_State *L);
void sr_lua_open_onnx(lua_State *L);
void sr_lua_open_markdown(lua_State *L);
void sr_lua_open_mpi(lua_State *L);
void sr_lua_open_download(lua_State *L);

#endif
