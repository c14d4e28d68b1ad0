/* shell.c - placeholder REPL: runs a file with the srgeo module preloaded. */
#include <stdio.h>
#include <lauxlib.h>
#include <lualib.h>
#include "lua_srgeo.h"
int main(int argc, char **argv)
{
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    luaL_requiref(L, "srgeo", luaopen_srgeo, 0);
    lua_pop(L, 1);
    lua_createtable(L, argc, 0);
    for (int i = 0; i < argc; i++) { lua_pushstring(L, argv[i]); lua_rawseti(L, -2, i - 1); }
    lua_setglobal(L, "arg");
    if (argc < 2) { fprintf(stderr, "usage: srgeo FILE.lua\n"); return 1; }
    if (luaL_dofile(L, argv[1]) != LUA_OK) { fprintf(stderr, "srgeo: %s\n", lua_tostring(L, -1)); return 1; }
    lua_close(L);
    return 0;
}
