/* lua/download.c - one file fetched over HTTP(S) (io/download.h), for the
 * weights cache (lua/srgeo/weights.lua):
 *
 *   hex = srgeo._download(url, dest [, {sha256 =, max_bytes =, connect_timeout =,
 *                         stall_timeout =, max_redirects =, progress =}])
 *
 * dest appears only complete and checked; its SHA-256 is returned.  Errors
 * (HTTP status, limits, a digest mismatch, Ctrl-C) are raised with the
 * core's message. */
#include "io/download.h"
#include "lua/aux.h"
#include "lua/open.h"

static int l_download(lua_State *L)
{
    const char *url = sr_lua_check_cstring(L, 1, "_download");
    const char *dest = sr_lua_check_cstring(L, 2, "_download");
    sr_download_opts o;
    sr_lua_read_opts(L, 3, "download", sr_download_specs, &o);
    char hex[2 * SR_SHA256_LEN + 1];
    if (sr_download(url, dest, &o, hex))
        return sr_lua_fail(L);
    lua_pushstring(L, hex);
    return 1;
}

static const luaL_Reg download_funcs[] = {{"_download", l_download}, {NULL, NULL}};

void sr_lua_open_download(lua_State *L) { luaL_setfuncs(L, download_funcs, 0); }
