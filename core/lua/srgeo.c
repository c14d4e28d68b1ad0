/* srgeo.c - luaopen_srgeo, the opener: the srgeo table, the functions that
 * belong to no area, each binding's sr_lua_open_*, and the hook that loads
 * the Lua half of the library (lua/srgeo/init.lua).  Only this file calls
 * the openers. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/rng.h"
#include "base/threads.h"
#include "lua/aux.h"
#include "lua/open.h"
#include "lua/srgeo.h"

#ifndef SRGEO_VERSION
#define SRGEO_VERSION "0.1.0"
#endif

static int l_threads(lua_State *L)
{
    if (!lua_isnoneornil(L, 1)) {
        lua_Integer n = luaL_checkinteger(L, 1);
        luaL_argcheck(L, n >= 0 && n <= 1024, 1, "thread count must be in 0..1024 (0 = default)");
        sr_threads_set((int)n);
    }
    lua_pushinteger(L, sr_threads_get());
    return 1;
}

static int l_seed(lua_State *L)
{
    if (!lua_isnoneornil(L, 1))
        sr_set_default_seed((uint64_t)luaL_checkinteger(L, 1));
    lua_pushinteger(L, (lua_Integer)sr_default_seed());
    return 1;
}

/* srgeo.interrupted(): true once after Ctrl-C (clears the flag), so Lua loops
 * can stop cleanly too. */
static int l_interrupted(lua_State *L)
{
    int p = sr_interrupt_pending();
    if (p)
        sr_interrupt_clear();
    lua_pushboolean(L, p);
    return 1;
}

/* srgeo._isatty(fd): progress bars only on a terminal. */
static int l_isatty(lua_State *L)
{
    lua_pushboolean(L, isatty((int)luaL_optinteger(L, 1, 2)));
    return 1;
}

/* srgeo._clock(): monotonic seconds, for timings and ETAs. */
static int l_clock(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
    return 1;
}

/* srgeo._stat(path) -> {size=, mtime=, mtime_nsec=, dir=} or nil, message
 * (mtime in whole seconds, mtime_nsec the nanoseconds within it; links
 * followed): a file's identity for the experiment and dataset caches,
 * without a shell. */
static int l_stat(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "_stat");
    struct stat st;
    if (stat(path, &st) != 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, strerror(errno));
        return 2;
    }
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, (lua_Integer)st.st_size);
    lua_setfield(L, -2, "size");
    lua_pushinteger(L, (lua_Integer)st.st_mtim.tv_sec);
    lua_setfield(L, -2, "mtime");
    lua_pushinteger(L, (lua_Integer)st.st_mtim.tv_nsec);
    lua_setfield(L, -2, "mtime_nsec");
    lua_pushboolean(L, S_ISDIR(st.st_mode));
    lua_setfield(L, -2, "dir");
    return 1;
}

/* The library root: the folder holding lua/srgeo/init.lua and beside it
 * models/, scripts/ and notebooks/.  Found relative to the file this code
 * was loaded from (the shell, or srgeo.so under a stock lua5.4; through the
 * address of this function, so either works), nothing compiled in: walking
 * up from that file's folder, the first ancestor D that is a source tree
 * (D/lua/srgeo/init.lua: build/srgeo, build/san/srgeo.so) or an install
 * prefix (D/share/srgeo/lua/srgeo/init.lua: PREFIX/bin/srgeo,
 * PREFIX/lib/lua/5.4/srgeo.so after `make install`; a LuaRocks tree keeps
 * the root with its Lua files, D/share/lua/5.4/srgeo-root: the rockspec).
 * SRGEO_ROOT, when set, is the root.  On failure *where says what was searched, for the error. */
#define ROOT_PROBE "/lua/srgeo/init.lua"
static int is_root(const char *d)
{
    char probe[PATH_MAX + 64];
    return snprintf(probe, sizeof probe, "%s" ROOT_PROBE, d) < (int)sizeof probe && access(probe, R_OK) == 0;
}

static int root_dir(char *buf, size_t n, char *where, size_t wn)
{
    const char *env = getenv("SRGEO_ROOT");
    if (env && *env) {
        snprintf(where, wn, "SRGEO_ROOT=%s", env);
        if (!is_root(env) || snprintf(buf, n, "%s", env) >= (int)n)
            return -1;
        return 0;
    }
    Dl_info info;
    char path[PATH_MAX];
    if (dladdr((void *)root_dir, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        if (!realpath(info.dli_fname, path)) {
            snprintf(where, wn, "%s (%s)", info.dli_fname, strerror(errno));
            return -1;
        }
    } else {
        ssize_t k = readlink("/proc/self/exe", path, sizeof path - 1);
        if (k <= 0) {
            snprintf(where, wn, "/proc/self/exe (%s)", strerror(errno));
            return -1;
        }
        path[k] = 0;
    }
    snprintf(where, wn, "the folders above %s", path);
    char *d = dirname(path);
    for (int up = 0; up < 8; up++) {
        char pre[PATH_MAX + 32];
        if (is_root(d))
            return snprintf(buf, n, "%s", d) < (int)n ? 0 : -1;
        for (int k = 0; k < 2; k++) {
            static const char *const under[] = {"share/srgeo", "share/lua/5.4/srgeo-root"}; /* make install; LuaRocks */
            if (snprintf(pre, sizeof pre, "%s/%s", strcmp(d, "/") ? d : "", under[k]) < (int)sizeof pre && is_root(pre))
                return snprintf(buf, n, "%s", pre) < (int)n ? 0 : -1;
        }
        if (strcmp(d, "/") == 0)
            break;
        d = dirname(d);
    }
    return -1;
}

static const luaL_Reg srgeo_funcs[] = {
    {"threads", l_threads},
    {"seed", l_seed},
    {"interrupted", l_interrupted},
    {"_isatty", l_isatty},
    {"_clock", l_clock},
    {"_stat", l_stat},
    {NULL, NULL},
};

int luaopen_srgeo(lua_State *L)
{
    sr_threads_init();
    luaL_newlib(L, srgeo_funcs);
    lua_pushliteral(L, SRGEO_VERSION);
    lua_setfield(L, -2, "version");
    sr_lua_open_tensor(L);
    sr_lua_open_nn(L);
    sr_lua_open_image(L);
    sr_lua_open_data(L);
    sr_lua_open_profile(L);
    sr_lua_open_safetensors(L);
    sr_lua_open_torch(L);
    sr_lua_open_train(L);
    sr_lua_open_augment(L);
    sr_lua_open_opts(L);
    sr_lua_open_fs(L);
    sr_lua_open_json(L);
    sr_lua_open_onnx(L);
    sr_lua_open_markdown(L);
    sr_lua_open_mpi(L);

    /* Make lua/?.lua requirable and run lua/srgeo/init.lua(core) to add the
     * Lua half of the library.  Without it srgeo.models, .profile, .plot ...
     * would be missing, so a root that cannot be found is an error. */
    char root[PATH_MAX], where[PATH_MAX + 64];
    if (root_dir(root, sizeof root, where, sizeof where) != 0)
        return luaL_error(L,
                          "cannot find srgeo's Lua library (lua/srgeo/init.lua) in %s; "
                          "run srgeo from its build folder or from a `make install` prefix "
                          "(PREFIX/bin, PREFIX/lib/lua/5.4 with PREFIX/share/srgeo), "
                          "or set SRGEO_ROOT to the folder holding lua/srgeo/",
                          where);
    lua_pushstring(L, root);
    lua_setfield(L, -2, "root");
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua;%s", root, root, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
    char init[PATH_MAX + 32];
    snprintf(init, sizeof init, "%s" ROOT_PROBE, root);
    if (luaL_loadfile(L, init) != LUA_OK)
        return lua_error(L);
    lua_pushvalue(L, -2);
    lua_call(L, 1, 0);
    return 1;
}
