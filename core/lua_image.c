/* lua_image.c - placeholder until the image pipeline lands. */
#include "lua_srgeo.h"
void sr_lua_open_image(lua_State *L) { (void)L; }
