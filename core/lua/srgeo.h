/* srgeo.h - luaopen_srgeo, the C module entry (build/srgeo.so) and what the
 * shell preloads. */
#ifndef SR_LUA_SRGEO_H
#define SR_LUA_SRGEO_H

#include <lua.h>

int luaopen_srgeo(lua_State *L);

#endif
