/* lua/fs.c - what the Lua writers need from the file system beyond io:
 *
 *   srgeo._pid()                -> this process's id (temporaries are NAME.tmp.PID)
 *   srgeo._disk_free(dir)       -> bytes an unprivileged writer may still use there
 *   srgeo._clean_tmp(path)      -> remove dead writers' temporaries in path's folder,
 *                                  once per folder (sr_lua_clean_tmp; base/fsutil.h)
 *   lock = srgeo._lock(path [, wait])  -> an advisory lock (flock) on path, or
 *                                  nil, message when another process holds it
 *                                  (wait: block until it is free); lock:unlock()
 *                                  releases it, as do closing the variable
 *                                  (local l <close>) and the collector.
 *   srgeo._lstat(path)          -> {kind =, size =} of the entry itself (a link is
 *                                  not followed; kind "file", "dir", "link",
 *                                  "fifo", "socket", "device"), or nil, message
 *   srgeo._realpath(path)       -> the absolute path, every link resolved, or
 *                                  nil, message: with _lstat, what confines a
 *                                  tree walk (srgeo.index) to the tree
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "lua/aux.h"
#include "lua/open.h"

#define LOCK_MT "srgeo.lock"

static int l_pid(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)getpid());
    return 1;
}

static int l_disk_free(lua_State *L)
{
    const char *dir = sr_lua_check_cstring(L, 1, "_disk_free");
    struct statvfs sv;
    if (statvfs(dir, &sv) != 0)
        return luaL_error(L, "_disk_free %s: %s", dir, strerror(errno));
    lua_pushinteger(L, (lua_Integer)((unsigned long long)sv.f_bavail * sv.f_frsize));
    return 1;
}

static const char *file_kind(mode_t m)
{
    if (S_ISREG(m))
        return "file";
    if (S_ISDIR(m))
        return "dir";
    if (S_ISLNK(m))
        return "link";
    if (S_ISFIFO(m))
        return "fifo";
    if (S_ISSOCK(m))
        return "socket";
    return "device";
}

static int l_lstat(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "_lstat");
    struct stat st;
    if (lstat(path, &st) != 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, strerror(errno));
        return 2;
    }
    lua_createtable(L, 0, 2);
    lua_pushstring(L, file_kind(st.st_mode));
    lua_setfield(L, -2, "kind");
    lua_pushinteger(L, (lua_Integer)st.st_size);
    lua_setfield(L, -2, "size");
    return 1;
}

static int l_realpath(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "_realpath");
    char buf[PATH_MAX];
    if (!realpath(path, buf)) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, strerror(errno));
        return 2;
    }
    lua_pushstring(L, buf);
    return 1;
}

static int l_clean_tmp(lua_State *L)
{
    sr_lua_clean_tmp(L, sr_lua_check_cstring(L, 1, "_clean_tmp"));
    return 0;
}

static int l_lock(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "_lock");
    int wait = lua_toboolean(L, 2);
    int *fd = lua_newuserdatauv(L, sizeof *fd, 0);
    *fd = -1;
    luaL_setmetatable(L, LOCK_MT);
    *fd = sr_lock_file(path, wait);
    if (*fd < 0) {
        lua_pushnil(L);
        lua_pushstring(L, sr_errmsg());
        return 2;
    }
    return 1;
}

static int lock_unlock(lua_State *L)
{
    int *fd = luaL_checkudata(L, 1, LOCK_MT);
    if (*fd >= 0)
        close(*fd); /* closing the descriptor releases the flock */
    *fd = -1;
    return 0;
}

static const luaL_Reg lock_methods[] = {{"unlock", lock_unlock}, {NULL, NULL}};
static const luaL_Reg lock_meta[] = {{"__gc", lock_unlock}, {"__close", lock_unlock}, {NULL, NULL}};

static const luaL_Reg fs_funcs[] = {
    {"_pid", l_pid},
    {"_clean_tmp", l_clean_tmp},
    {"_disk_free", l_disk_free},
    {"_lock", l_lock},
    {"_lstat", l_lstat},
    {"_realpath", l_realpath},
    {NULL, NULL},
};

void sr_lua_open_fs(lua_State *L)
{
    sr_lua_new_class(L, LOCK_MT, lock_meta, lock_methods);
    luaL_setfuncs(L, fs_funcs, 0);
}
