/* kernel.c - the shell's half of `srgeo kernel` (kernel.h).
 *
 *   local k = require "srgeo.kernel_shell"     -- only inside the srgeo shell
 *   local w = k.open{transport=, ip=, shell_port=, control_port=, iopub_port=,
 *                    stdin_port=, hb_port=, key=, signature_scheme=, session=}
 *   local m = w:recv(ms)      -- nil, or {channel=, ids=, header=, parent=, metadata=, content=}
 *   w:send(channel, ids, header, parent, metadata, content)   -- JSON strings
 *   k.run(f, ...)             -- true, results... | false, message, traceback
 *   k.complete(text)          -- the REPL's completion: {name = kind}, prefix
 *   k.is_complete(code)       -- "complete", "incomplete" or "invalid"
 *   k.exe()                   -- the shell's own path (the kernelspec's argv[0])
 *
 * Ctrl-C: the kernelspec says interrupt_mode "signal", so Jupyter sends
 * SIGINT; an interrupt_request on the control channel does the same
 * (wire.c's control thread answers it and signals the process).  While a
 * cell runs, the handler raises the core's interrupt flag (a profile or a
 * convolution stops at its next check) and sets a Lua hook (Lua code stops
 * at its next instruction), as the REPL's does; between cells it does
 * nothing.  Unlike the REPL's handler it never falls back to SIG_DFL after
 * repeated presses: the kernel's process is the notebook's session, and
 * Jupyter restarts a kernel that ignores interrupts on its own.
 *
 * Signal handlers talk through process-wide variables, so this file, like
 * shell.c, keeps a few statics: there is one kernel per process. */
#include "shell/kernel.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "base/error.h"
#include "jupyter/wire.h"

#define WIRE_MT "srgeo.kernel.wire"

static sr_kernel_repl repl;
static lua_State *running_L = NULL;         /* the state a cell runs on */
static volatile sig_atomic_t running = 0;   /* a cell is running */
static struct sigaction old_sigint;         /* restored when the wire closes */
static int sigint_set = 0;

static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    if (!sr_interrupt_pending())
        return; /* a C kernel took it: its "interrupted" error is unwinding */
    sr_interrupt_clear();
    luaL_error(L, "interrupted!");
}

static void on_sigint(int sig)
{
    (void)sig;
    if (!running)
        return;
    sr_interrupt_raise();
    lua_sethook(running_L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

/* The control thread's interrupt_request: the same path as Jupyter's SIGINT. */
static void interrupt_self(void) { kill(getpid(), SIGINT); }

/* ------------------------------------------------------------------------
 * The wire as a Lua object
 * ---------------------------------------------------------------------- */

static sr_wire **checkwire(lua_State *L)
{
    sr_wire **w = luaL_checkudata(L, 1, WIRE_MT);
    if (!*w)
        luaL_error(L, "kernel: the wire is closed");
    return w;
}

static const char *field(lua_State *L, int t, const char *k, const char *def)
{
    lua_getfield(L, t, k);
    const char *s = lua_isnil(L, -1) ? def : luaL_tolstring(L, -1, NULL);
    lua_pop(L, lua_isnil(L, -1) ? 1 : 2);
    return s; /* the config table keeps the strings alive */
}

static int port(lua_State *L, int t, const char *k)
{
    lua_getfield(L, t, k);
    int isnum;
    lua_Integer p = lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    if (!isnum || p < 1 || p > 65535)
        return luaL_error(L, "kernel: the connection file's %s must be a port number (1..65535)", k);
    return (int)p;
}

static int l_open(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    sr_wire_config c = {0};
    c.transport = field(L, 1, "transport", "tcp");
    c.ip = field(L, 1, "ip", "127.0.0.1");
    c.ports[SR_WIRE_SHELL] = port(L, 1, "shell_port");
    c.ports[SR_WIRE_CONTROL] = port(L, 1, "control_port");
    c.ports[SR_WIRE_IOPUB] = port(L, 1, "iopub_port");
    c.ports[SR_WIRE_STDIN] = port(L, 1, "stdin_port");
    c.hb_port = port(L, 1, "hb_port");
    c.key = field(L, 1, "key", "");
    c.scheme = field(L, 1, "signature_scheme", "hmac-sha256");
    c.session = field(L, 1, "session", "kernel");
    sr_wire **w = lua_newuserdatauv(L, sizeof *w, 0);
    *w = NULL;
    luaL_setmetatable(L, WIRE_MT);
    if (!(*w = sr_wire_open(&c, interrupt_self)))
        return luaL_error(L, "%s", sr_errmsg());
    if (!sigint_set) {
        struct sigaction sa;
        sa.sa_handler = on_sigint;
        sa.sa_flags = 0; /* no SA_RESTART: a blocking read in a cell returns EINTR */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_sigint);
        sigint_set = 1;
    }
    return 1;
}

static const char *const channels[] = {"shell", "control", "iopub", "stdin", NULL};

static int l_recv(lua_State *L)
{
    sr_wire **w = checkwire(L);
    int ms = (int)luaL_optinteger(L, 2, 100);
    sr_wire_msg m;
    int r = sr_wire_recv(*w, ms, &m);
    if (r < 0)
        return luaL_error(L, "%s", sr_errmsg());
    if (r == 0)
        return 0;
    lua_createtable(L, 0, 6);
    lua_pushstring(L, channels[m.channel]);
    lua_setfield(L, -2, "channel");
    lua_createtable(L, m.nids, 0);
    for (int i = 0; i < m.nids; i++) {
        lua_pushlstring(L, m.ids[i], m.idlens[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "ids");
    const char *names[4] = {"header", "parent", "metadata", "content"};
    const char *vals[4] = {m.header, m.parent, m.metadata, m.content};
    for (int i = 0; i < 4; i++) {
        lua_pushstring(L, vals[i]);
        lua_setfield(L, -2, names[i]);
    }
    sr_wire_msg_free(&m);
    return 1;
}

static int l_send(lua_State *L)
{
    sr_wire **w = checkwire(L);
    int ch = luaL_checkoption(L, 2, NULL, channels);
    luaL_checktype(L, 3, LUA_TTABLE);
    int n = (int)luaL_len(L, 3);
    if (n > 64)
        return luaL_error(L, "kernel: %d routing ids (at most 64)", n);
    const char *ids[64];
    size_t lens[64];
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 3, i + 1);
        ids[i] = luaL_checklstring(L, -1, &lens[i]); /* kept alive by the table */
        lua_pop(L, 1);
    }
    const char *json[4];
    for (int i = 0; i < 4; i++)
        json[i] = luaL_checkstring(L, 4 + i);
    if (sr_wire_send(*w, ch, ids, lens, n, json[0], json[1], json[2], json[3]) != 0)
        return luaL_error(L, "%s", sr_errmsg());
    return 0;
}

static int l_dropped(lua_State *L)
{
    lua_pushinteger(L, sr_wire_dropped(*checkwire(L)));
    return 1;
}

static int l_close(lua_State *L)
{
    sr_wire **w = luaL_checkudata(L, 1, WIRE_MT);
    if (*w) {
        sr_wire_close(*w);
        *w = NULL;
        if (sigint_set) {
            sigaction(SIGINT, &old_sigint, NULL);
            sigint_set = 0;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Running a cell
 * ---------------------------------------------------------------------- */

/* Message handler: {msg = the text shown, traceback = the full one}.  The
 * text is srgeo.repl's user_error when the REPL has one (the message at the
 * user's line, the traceback kept for srgeo.traceback()), else the message;
 * SRGEO_TRACEBACK=1 shows the traceback itself. */
static int msghandler(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL)
        msg = luaL_tolstring(L, 1, NULL); /* __tostring, or "table: 0x..." */
    luaL_traceback(L, L, msg, 1);
    int tb = lua_gettop(L);
    const char *env = getenv("SRGEO_TRACEBACK");
    int full = env && *env && strcmp(env, "0") != 0;
    lua_pushstring(L, full ? lua_tostring(L, tb) : msg);
    int shown = lua_gettop(L);
    if (lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE) == LUA_TTABLE &&
        lua_getfield(L, -1, "srgeo.repl") == LUA_TTABLE && lua_getfield(L, -1, "user_error") == LUA_TFUNCTION) {
        lua_pushstring(L, msg);
        lua_pushvalue(L, tb);
        lua_pushboolean(L, 1); /* interactive, as the REPL */
        lua_pushboolean(L, full);
        if (lua_pcall(L, 4, 1, 0) == LUA_OK && lua_isstring(L, -1))
            lua_replace(L, shown);
    }
    lua_settop(L, shown);
    lua_createtable(L, 0, 2);
    lua_pushvalue(L, shown);
    lua_setfield(L, -2, "msg");
    lua_pushvalue(L, tb);
    lua_setfield(L, -2, "traceback");
    return 1;
}

static int l_run(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    int narg = lua_gettop(L) - 1;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, 1);
    running_L = L;
    sr_interrupt_clear();
    running = 1;
    int st = lua_pcall(L, narg, LUA_MULTRET, 1);
    running = 0;
    lua_sethook(L, NULL, 0, 0); /* a press as the cell ended must not reach the next one */
    sr_interrupt_clear();
    lua_remove(L, 1);
    if (st == LUA_OK) {
        lua_pushboolean(L, 1);
        lua_insert(L, 1);
        return lua_gettop(L);
    }
    lua_pushboolean(L, 0);
    if (lua_istable(L, -2)) {
        lua_getfield(L, -2, "msg");
        lua_getfield(L, -3, "traceback");
    } else { /* memory error: no handler ran */
        lua_pushvalue(L, -2);
        lua_pushvalue(L, -1);
    }
    return 3;
}

/* The REPL's rule: "return CODE;" or CODE loads: complete; CODE fails only
 * for lack of its end (shell.c's incomplete): incomplete; else invalid. */
static int l_is_complete(lua_State *L)
{
    size_t n;
    const char *code = luaL_checklstring(L, 1, &n);
    lua_pushfstring(L, "return %s;", code);
    int st = luaL_loadbuffer(L, lua_tostring(L, -1), lua_rawlen(L, -1), "=stdin");
    if (st != LUA_OK) {
        lua_pop(L, 1);
        st = luaL_loadbuffer(L, code, n, "=stdin");
    }
    if (st == LUA_OK)
        lua_pushliteral(L, "complete");
    else if (repl.incomplete(L, st))
        lua_pushliteral(L, "incomplete");
    else
        lua_pushliteral(L, "invalid");
    return 1;
}

/* The shell's own path: the kernelspec's argv[0]. */
static int l_exe(lua_State *L)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return luaL_error(L, "kernel: cannot find the shell's own path (/proc/self/exe); pass --exe PATH");
    lua_pushlstring(L, buf, (size_t)n);
    return 1;
}

int sr_kernel_open(lua_State *L, const sr_kernel_repl *r)
{
    repl = *r;
    static const luaL_Reg wire_methods[] = {
        {"recv", l_recv}, {"send", l_send}, {"dropped", l_dropped}, {"close", l_close}, {NULL, NULL},
    };
    if (luaL_newmetatable(L, WIRE_MT)) {
        luaL_newlib(L, wire_methods);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, l_close);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    lua_createtable(L, 0, 4);
    lua_pushcfunction(L, l_open);
    lua_setfield(L, -2, "open");
    lua_pushcfunction(L, l_run);
    lua_setfield(L, -2, "run");
    lua_pushcfunction(L, repl.complete);
    lua_setfield(L, -2, "complete");
    lua_pushcfunction(L, l_is_complete);
    lua_setfield(L, -2, "is_complete");
    lua_pushcfunction(L, l_exe);
    lua_setfield(L, -2, "exe");
    return 1;
}
