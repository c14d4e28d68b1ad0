/* lua_data.c - placeholder until the dataset readers land. */
#include "lua_srgeo.h"
void sr_lua_open_data(lua_State *L) { (void)L; }
