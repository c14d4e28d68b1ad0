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

#include "base/blas.h"
#include "base/cpu.h"
#include "base/fsutil.h"
#include "base/rng.h"
#include "base/threads.h"
#include "lua/aux.h"
#include "lua/open.h"
#include "lua/srgeo.h"

#ifndef SRGEO_VERSION
#define SRGEO_VERSION "0.1.0"
#endif

/* A count beyond the CPUs this process may run on is clamped to them, with
 * a notice (core/base/threads.h: oversubscribed threads spin waiting for
 * each other; 64 on a 2-core machine stalled for minutes). */
static int bounded_threads(int n, const char *asked)
{
    int cpus = sr_threads_cpus();
    if (n <= cpus)
        return n;
    fprintf(stderr, "srgeo: %s asks for %d threads, but this process may run on %d CPU%s: using %d (more "
                    "threads only wait for each other)\n", asked, n, cpus, cpus == 1 ? "" : "s", cpus);
    return cpus;
}

static int l_threads(lua_State *L)
{
    if (!lua_isnoneornil(L, 1)) {
        lua_Integer n = luaL_checkinteger(L, 1);
        luaL_argcheck(L, n >= 0 && n <= 1024, 1, "thread count must be in 0..1024 (0 = default)");
        sr_threads_set(n > 0 ? bounded_threads((int)n, "srgeo.threads") : 0);
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

/* srgeo._stat(path) -> {size=, mtime=, mtime_nsec=, ctime=, ctime_nsec=,
 * dev=, ino=, dir=, kind=} or nil, message (times in whole seconds and the
 * nanoseconds within them; links followed; kind "file", "directory",
 * "FIFO", "socket", "character device" or "block device"): a file's
 * identity for the experiment and dataset caches, and whether reading it
 * could block, without a shell. */
static void push_stat(lua_State *L, const struct stat *st)
{
    lua_createtable(L, 0, 10);
    lua_pushinteger(L, (lua_Integer)st->st_size);
    lua_setfield(L, -2, "size");
    lua_pushinteger(L, (lua_Integer)st->st_mtim.tv_sec);
    lua_setfield(L, -2, "mtime");
    lua_pushinteger(L, (lua_Integer)st->st_mtim.tv_nsec);
    lua_setfield(L, -2, "mtime_nsec");
    lua_pushinteger(L, (lua_Integer)st->st_ctim.tv_sec);
    lua_setfield(L, -2, "ctime");
    lua_pushinteger(L, (lua_Integer)st->st_ctim.tv_nsec);
    lua_setfield(L, -2, "ctime_nsec");
    lua_pushinteger(L, (lua_Integer)st->st_dev);
    lua_setfield(L, -2, "dev");
    lua_pushinteger(L, (lua_Integer)st->st_ino);
    lua_setfield(L, -2, "ino");
    lua_pushboolean(L, S_ISDIR(st->st_mode));
    lua_setfield(L, -2, "dir");
    lua_pushstring(L, S_ISREG(st->st_mode)    ? "file"
                      : S_ISDIR(st->st_mode)  ? "directory"
                      : S_ISFIFO(st->st_mode) ? "FIFO"
                      : S_ISSOCK(st->st_mode) ? "socket"
                      : S_ISCHR(st->st_mode)  ? "character device"
                      : S_ISBLK(st->st_mode)  ? "block device"
                                              : "other");
    lua_setfield(L, -2, "kind");
}

static int l_stat(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "_stat");
    struct stat st;
    if (stat(path, &st) != 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, strerror(errno));
        return 2;
    }
    push_stat(L, &st);
    return 1;
}

/* srgeo._file_hash(path [, "sha256"]) -> FNV-1a 64 of the file's bytes as
 * 16 hex digits (or its SHA-256 as 64), and the _stat table of the file read
 * (unchanged while it was read): the content identity of a weight file in
 * the unit cache (lua/srgeo/cache.lua), which keeps it by that status so big
 * files are not read on every run; the weights cache checks downloads and
 * cached files by SHA-256 (lua/srgeo/weights.lua). */
static int l_file_hash(lua_State *L)
{
    const char *path = sr_lua_check_cstring(L, 1, "_file_hash");
    const char *algo = luaL_optstring(L, 2, "fnv1a64");
    struct stat st;
    char hex[2 * SR_SHA256_LEN + 1];
    if (strcmp(algo, "sha256") == 0) {
        if (sr_fs_sha256_file(path, "sha256", hex, &st))
            return sr_lua_fail(L);
    } else if (strcmp(algo, "fnv1a64") == 0) {
        uint64_t h;
        if (sr_fs_hash_file(path, "hash", &h, &st))
            return sr_lua_fail(L);
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    } else {
        return luaL_error(L, "_file_hash: algorithm must be \"fnv1a64\" or \"sha256\", got \"%s\"", algo);
    }
    lua_pushstring(L, hex);
    push_stat(L, &st);
    return 2;
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

static void set_str(lua_State *L, const char *k, const char *v)
{
    if (v) {
        lua_pushstring(L, v);
        lua_setfield(L, -2, k);
    }
}

static void set_int(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

/* srgeo._describe([load]): config().summary, with the load average when
 * `load` is true (the bench headers: tests/bench/common.lua). */
static void push_describe(lua_State *L, int load)
{
    char lines[1024];
    sr_blas_describe(lines, sizeof lines, load);
    lua_pushstring(L, lines);
}

static int l_describe(lua_State *L)
{
    push_describe(L, lua_toboolean(L, 1));
    return 1;
}

/* srgeo.config(): what runs the arithmetic (base/cpu.h, base/blas.h). */
static int l_config(lua_State *L)
{
    const sr_cpu *c = sr_cpu_get();
    const sr_blas_info *b = sr_blas_get();
    lua_createtable(L, 0, 7);
    set_str(L, "version", SRGEO_VERSION);
    lua_createtable(L, 0, 6);
    set_str(L, "model", c->model);
    set_str(L, "vendor", c->vendor);
    set_int(L, "family", c->family);
    set_int(L, "model_id", c->model_id);
    set_str(L, "isa", sr_isa_name(sr_cpu_isa(c->features)));
    lua_newtable(L);
    for (int i = 0, n = 0; sr_cpu_feature_name(i); i++)
        if (c->features & (1u << i)) {
            lua_pushstring(L, sr_cpu_feature_name(i));
            lua_rawseti(L, -2, ++n);
        }
    lua_setfield(L, -2, "features");
    lua_setfield(L, -2, "cpu");
    lua_createtable(L, 0, 9);
    set_str(L, "name", b->name);
    set_str(L, "core", b->core);
    set_str(L, "isa", sr_isa_name(b->isa));
    set_str(L, "config", b->config);
    set_str(L, "coretype", b->coretype);
    set_str(L, "coretype_by", b->coretype ? (b->by_srgeo ? "srgeo" : "environment") : NULL);
    set_str(L, "best", b->best);
    set_str(L, "warning", b->note[0] ? b->note : NULL);
    lua_setfield(L, -2, "blas");
    set_str(L, "gemm_isa", sr_isa_name(sr_cpu_build_isa()));
    set_str(L, "gemm", b->own_gemm ? "srgeo" : "blas"); /* what runs the float32 products */
    set_int(L, "threads", sr_threads_get());
#ifdef _OPENMP
    set_int(L, "openmp", _OPENMP);
#else
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "openmp");
#endif
    push_describe(L, 0);
    lua_setfield(L, -2, "summary");
    return 1;
}

static const luaL_Reg srgeo_funcs[] = {
    {"config", l_config},
    {"_describe", l_describe},
    {"threads", l_threads},
    {"seed", l_seed},
    {"interrupted", l_interrupted},
    {"_isatty", l_isatty},
    {"_clock", l_clock},
    {"_stat", l_stat},
    {"_file_hash", l_file_hash},
    {NULL, NULL},
};

int luaopen_srgeo(lua_State *L)
{
    static int told; /* once per process, not per Lua state */
    if (!told++ && sr_threads_env() > 0)
        bounded_threads(sr_threads_env(), "SRGEO_THREADS");
    sr_threads_init();
    sr_blas_warn_once();
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
    sr_lua_open_download(L);

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
