/* shell.c - the `srgeo` shell: Lua 5.4's stand-alone interpreter (lua.c)
 * with the srgeo module preloaded, a readline REPL that completes fields and
 * methods, auto-printing that shows tables readably, and Ctrl-C that reaches
 * the C kernels.
 *
 * The structure follows lua.c on purpose, so anyone who knows that file
 * knows this one: pmain runs everything in protected mode, collectargs /
 * runargs parse the command line, docall runs a chunk under a message
 * handler and the SIGINT handler, and the REPL is loadline (try "return
 * LINE", then LINE as a statement, then keep reading while the parser says
 * '<eof>') followed by l_print.
 *
 * What differs from lua.c, and why:
 *  - Ctrl-C must also stop C kernels (a convolution over a batch does not
 *    run Lua code, so a Lua hook alone would fire only when it returns): the
 *    handler raises the core's interrupt flag too (sr_interrupt_raise).
 *  - Ctrl-C at an idle prompt abandons the line instead of killing the
 *    process (lua.c leaves SIGINT at SIG_DFL there): a long session with
 *    loaded models is worth protecting.  The prompt is read with readline's
 *    callback interface under select(), with a self-pipe written by the
 *    handler, so an interrupt wakes the reader whichever thread the kernel
 *    delivered the signal to.
 *  - `-i` also works when stdin is not a terminal (a plain line reader
 *    replaces readline), so the REPL itself is testable through a pipe.
 *  - An error prints its message at the user's line, not a traceback
 *    (msghandler, with lua/srgeo/repl.lua's user_error); the traceback is
 *    kept for srgeo.traceback() / :tb, and --traceback or SRGEO_TRACEBACK=1
 *    prints it as lua.c does.
 *  - `srgeo NAME` runs the subcommand NAME even when a file NAME is in the
 *    working folder (`srgeo run NAME` or `srgeo ./NAME` runs the file).
 *
 * Signal handlers can only talk to the program through process-wide
 * variables, so this file (unlike the core) keeps a few statics; each is
 * documented where it is declared.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "base/blas.h"
#include "base/error.h"
#include "lua/srgeo.h"
#include "shell/kernel.h"

#define PROGNAME "srgeo"
#define PROMPT1 "srgeo> "
#define PROMPT2 ">> "
#define HISTORY_FILE ".srgeo_history"
#define HISTORY_MAX 1000 /* entries kept in the history file */
#define INIT_VAR "SRGEO_INIT"

/* Program name prefixed to error messages; NULL inside the REPL, where the
 * prefix would only be noise (as in lua.c). */
static const char *progname = PROGNAME;

/* The state the SIGINT handler sets its hook on (lua.c's globalL). */
static lua_State *globalL = NULL;

/* Ctrl-C presses since the current chunk started: the first interrupts, the
 * second warns, the third falls through to SIG_DFL (a kernel that never
 * checks the flag must still be killable). */
static volatile sig_atomic_t interrupt_presses = 0;

/* Set by the prompt's SIGINT handler; the write end of the self-pipe that
 * wakes the line reader (-1 outside the REPL). */
static volatile sig_atomic_t prompt_interrupted = 0;
static int wake_pipe[2] = {-1, -1};

/* ------------------------------------------------------------------------
 * Signals (lua.c: setsignal, lstop, laction)
 * ---------------------------------------------------------------------- */

/* sigaction without SA_RESTART, so a blocking read() in user code (io.read)
 * or in the line reader returns EINTR and the interrupt is seen at once. */
static void setsignal_old(int sig, void (*handler)(int), struct sigaction *old)
{
    struct sigaction sa;
    sa.sa_handler = handler;
    sa.sa_flags = 0;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, old);
}

static void setsignal(int sig, void (*handler)(int)) { setsignal_old(sig, handler, NULL); }

static int msghandler(lua_State *L);

/* Hook set by laction.  The interrupt is delivered once: if a C kernel has
 * already taken it (the core flag is consumed and an "interrupted" error is
 * unwinding), Lua code such as srgeo.profile's pcall may handle that error
 * and keep partial results, so the hook only removes itself.  Otherwise Lua
 * code was running and the hook raises the error here. */
static void lstop(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0); /* reset hook */
    if (!sr_interrupt_pending())
        return;
    sr_interrupt_clear();
    luaL_error(L, "interrupted!");
}

/* SIGINT while a chunk runs.  lua_sethook and writing a sig_atomic_t flag
 * are the only things done here, both safe in a signal handler (lua.c relies
 * on the former).  The core flag makes a running kernel fail with
 * "interrupted" at its next check; the hook catches Lua code. */
static void laction(int sig)
{
    int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
    sr_interrupt_raise();
    interrupt_presses++;
    if (interrupt_presses == 2) {
        static const char msg[] = "\n" PROGNAME ": interrupt pending; press Ctrl-C again to quit\n";
        ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)r;
        setsignal(sig, SIG_DFL); /* the next one terminates the process */
    }
    lua_sethook(globalL, lstop, flag, 1);
}

/* SIGINT while the prompt waits for input: abandon the line. */
static void prompt_sigint(int sig)
{
    (void)sig;
    prompt_interrupted = 1;
    if (wake_pipe[1] >= 0) {
        char c = 1;
        ssize_t r = write(wake_pipe[1], &c, 1); /* non-blocking: a full pipe is fine */
        (void)r;
    }
}

/* ------------------------------------------------------------------------
 * Running chunks (lua.c: l_message, report, msghandler, docall)
 * ---------------------------------------------------------------------- */

static void print_usage(FILE *f, const char *badoption)
{
    if (badoption) {
        fprintf(f, "%s: ", PROGNAME);
        if (badoption[1] == 'e' || badoption[1] == 'l')
            fprintf(f, "'%s' needs argument\n", badoption);
        else
            fprintf(f, "unrecognized option '%s'\n", badoption);
    }
    fprintf(f,
            "usage: %s [options] [script [args]]\n"
            "       %s COMMAND [args]     a subcommand (listed below): %s bump --help\n"
            "       %s run FILE [args]    run FILE, even one named like a subcommand\n"
            "Available options are:\n"
            "  -e stat    execute string 'stat' (may be repeated)\n"
            "  -i         enter interactive mode after executing 'script'\n"
            "  -l mod     require library 'mod' into global 'mod'\n"
            "  -l g=mod   require library 'mod' into global 'g'\n"
            "  -v         show version information\n"
            "  -E         ignore environment variables (" INIT_VAR ")\n"
            "  -W         turn warnings on\n"
            "  --traceback  print the full traceback of an error (SRGEO_TRACEBACK=1;\n"
            "             otherwise the message and your line; srgeo.traceback() or :tb)\n"
            "  --version  show version information and exit\n"
            "  --lua-path print the LUA_PATH / LUA_CPATH exports that let a stock lua5.4\n"
            "             `require \"srgeo\"` this installation, and exit\n"
            "  -h, --help show this help and exit\n"
            "  --         stop handling options\n"
            "  -          stop handling options and execute stdin\n"
            "With no arguments on a terminal, %s starts a REPL (the srgeo module is\n"
            "the global 'srgeo'); otherwise stdin is run as a script.  In the REPL,\n"
            "expressions print their value, Tab completes names, fields and methods,\n"
            "Ctrl-C stops a running computation, Ctrl-D quits; type help() for topics.\n"
            "Scripts get their arguments in 'arg' (arg[0] is the script).\n"
            "Environment: SRGEO_THREADS (thread count), SRGEO_ROOT (library root),\n"
            "SRGEO_HISTORY (history file, default ~/" HISTORY_FILE "),\n" INIT_VAR
            " (chunk or @file run first), SRGEO_PROGRESS (seconds between\n"
            "progress lines when stderr is not a terminal; 0: none), SRGEO_TRACEBACK\n"
            "(1: full tracebacks), SRGEO_CACHE (the weights cache folder, default\n"
            "~/.cache/srgeo), SRGEO_OFFLINE (1: never download weights).\n"
            "OpenBLAS: unless OPENBLAS_CORETYPE is set, %s gives OpenBLAS the\n"
            "kernels of the CPU's widest vectors when its own table picked older ones\n"
            "(it re-executes itself once, marking its choice in SRGEO_BLAS_CORETYPE);\n"
            "an OPENBLAS_CORETYPE you set is kept, with one warning when the CPU could\n"
            "run newer kernels (SRGEO_BLAS_WARNED keeps the processes it starts from\n"
            "repeating it).  --version names the CPU's features and the kernels.\n",
            PROGNAME, PROGNAME, PROGNAME, PROGNAME, PROGNAME, PROGNAME);
    fflush(f);
}

static void l_message(const char *pname, const char *msg)
{
    if (pname)
        lua_writestringerror("%s: ", pname);
    lua_writestringerror("%s\n", msg);
}

/* Print the error on top of the stack (if any) and pop it. */
static int report(lua_State *L, int status)
{
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        l_message(progname, msg ? msg : "(error object is not a string)");
        lua_pop(L, 1);
    }
    return status;
}

/* SRGEO_TRACEBACK=1 or --traceback: print every error's full traceback. */
static int full_traceback = 0;

/* Registry key of the srgeo.repl module (its error formatter). */
static const char *const REPL_KEY = "srgeo.shell.repl";

/* Message handler.  Error objects with a __tostring (the library's user
 * errors: a bad command line, spec or notebook) print as that text.  For
 * string errors the full traceback is kept (srgeo.traceback(), :tb) and
 * the message printed is lua/srgeo/repl.lua's user_error: the message at
 * the first line of the user's code (an error the library raised inside
 * its own files points there instead), with a hint where the traceback
 * is.  lua.c's traceback when full_traceback is set or the formatter
 * cannot run. */
static int msghandler(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    int tb = lua_gettop(L);
    if (lua_getfield(L, LUA_REGISTRYINDEX, REPL_KEY) != LUA_TTABLE ||
        lua_getfield(L, -1, "user_error") != LUA_TFUNCTION) {
        lua_settop(L, tb);
        return 1;
    }
    lua_pushstring(L, msg);
    lua_pushvalue(L, tb);
    lua_pushboolean(L, progname == NULL); /* inside the REPL */
    lua_pushboolean(L, full_traceback);
    if (lua_pcall(L, 4, 1, 0) != LUA_OK || !lua_isstring(L, -1)) {
        lua_settop(L, tb);
        return 1;
    }
    return 1;
}

/* Call the function under narg arguments with the message handler and the
 * interrupt handler in place.  Afterwards the previous handler is back (the
 * REPL's, which keeps an idle session alive; or SIG_DFL / an inherited
 * SIG_IGN outside it) and every trace of a Ctrl-C is removed: a press that
 * arrived as the chunk finished must not leave a hook that fires in the next
 * line, nor a core flag that fails the next kernel. */
static int docall(lua_State *L, int narg, int nres)
{
    int base = lua_gettop(L) - narg; /* function index */
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    globalL = L;
    interrupt_presses = 0;
    sr_interrupt_clear();
    struct sigaction old;
    setsignal_old(SIGINT, laction, &old);
    int status = lua_pcall(L, narg, nres, base);
    sigaction(SIGINT, &old, NULL);
    lua_sethook(L, NULL, 0, 0);
    sr_interrupt_clear();
    interrupt_presses = 0;
    lua_remove(L, base);
    return status;
}

/* The version line; with `kernels`, the CPU and BLAS lines after it
 * (base/blas.h: a warning when the BLAS runs older kernels than the CPU
 * could). */
static int print_version(lua_State *L, int kernels)
{
    lua_getglobal(L, "srgeo");
    const char *v = NULL;
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "version");
        v = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    printf("%s %s (Lua %s.%s)\n", PROGNAME, v ? v : "?", LUA_VERSION_MAJOR, LUA_VERSION_MINOR);
    if (kernels) {
        char lines[1024];
        sr_blas_describe(lines, sizeof lines, 0);
        fputs(lines, stdout);
    }
    fflush(stdout);
    return 0;
}

/* arg table exactly as lua.c builds it: the script at index 0, its
 * arguments at 1..n, the interpreter and its options at negative indices.
 * Without a script, arg[0] is the interpreter. */
static void createargtable(lua_State *L, char **argv, int argc, int script)
{
    if (script == argc)
        script = 0; /* no script name? */
    int narg = argc - (script + 1);
    lua_createtable(L, narg, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int dochunk(lua_State *L, int status)
{
    if (status == LUA_OK)
        status = docall(L, 0, 0);
    return report(L, status);
}

static int dofile(lua_State *L, const char *name) { return dochunk(L, luaL_loadfile(L, name)); }

static int dostring(lua_State *L, const char *s, const char *name)
{
    return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* 'globname[=modname]': globname = require(modname). */
static int dolibrary(lua_State *L, char *globname)
{
    char *modname = strchr(globname, '=');
    if (modname == NULL) {
        modname = globname;
    } else {
        *modname = '\0';
        modname++;
    }
    lua_getglobal(L, "require");
    lua_pushstring(L, modname);
    int status = docall(L, 1, 1);
    if (status == LUA_OK)
        lua_setglobal(L, globname);
    return report(L, status);
}

/* Push arg[1..n] as the script's varargs. */
static int pushargs(lua_State *L)
{
    if (lua_getglobal(L, "arg") != LUA_TTABLE)
        luaL_error(L, "'arg' is not a table");
    int n = (int)luaL_len(L, -1);
    luaL_checkstack(L, n + 3, "too many arguments to script");
    int i;
    for (i = 1; i <= n; i++)
        lua_rawgeti(L, -i, i);
    lua_remove(L, -i);
    return n;
}

/* `srgeo NAME args...`: a plain word NAME is a subcommand when
 * lua/srgeo/cli.lua knows one of that name (every scripts/NAME.lua of the
 * library root, and its built-ins), even when a file NAME is in the working
 * folder: a stray file named `train` must not take over `srgeo train`
 * (`srgeo ./train` or `srgeo run train` runs the file).  A word that names
 * no subcommand runs the file of that name, as lua.c does.  Pushes the path
 * of the subcommand's file (or nil) and cli's message. */
static int push_subcommand(lua_State *L, const char *name)
{
    static const char code[] = "return require('srgeo.cli').command(...)";
    int status = luaL_loadbuffer(L, code, sizeof code - 1, "=subcommand");
    if (status != LUA_OK)
        return status;
    lua_pushstring(L, name);
    return docall(L, 1, 2);
}

static int is_word(const char *s)
{
    if (!*s || *s == '-')
        return 0;
    for (; *s; s++)
        if (!(*s == '_' || *s == '-' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

/* as_file: `srgeo run FILE`, where FILE is never a subcommand. */
static int handle_script(lua_State *L, char **argv, int as_file)
{
    const char *fname = argv[0];
    if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0)
        fname = NULL; /* stdin */
    int pushed = 0;
    if (fname && !as_file && is_word(fname)) {
        int status = push_subcommand(L, fname);
        if (status != LUA_OK)
            return report(L, status);
        struct stat st; /* a folder named like a word is not a script */
        if (lua_isstring(L, -2)) {
            lua_pop(L, 1);
            fname = lua_tostring(L, -1);
            pushed = 1;
            /* arg[0] is the file that runs, as for `srgeo scripts/NAME.lua` */
            lua_getglobal(L, "arg");
            lua_pushvalue(L, -2);
            lua_rawseti(L, -2, 0);
            lua_pop(L, 1);
        } else if (stat(fname, &st) == 0 && !S_ISDIR(st.st_mode)) {
            lua_pop(L, 2); /* no such subcommand: the file runs */
        } else {
            lua_remove(L, -2);
            return report(L, LUA_ERRRUN); /* neither: cli's message names the nearest subcommands */
        }
    }
    int status = luaL_loadfile(L, fname);
    if (pushed)
        lua_remove(L, -2); /* the path, under the chunk or the message */
    if (status == LUA_OK) {
        int n = pushargs(L);
        status = docall(L, n, LUA_MULTRET);
    }
    return report(L, status);
}

/* The subcommands' list for --help (nothing when the library cannot say). */
static void print_commands(lua_State *L, FILE *f)
{
    static const char code[] = "return require('srgeo.cli').commands_text()";
    if (luaL_loadbuffer(L, code, sizeof code - 1, "=help") == LUA_OK && lua_pcall(L, 0, 1, 0) == LUA_OK &&
        lua_isstring(L, -1))
        fprintf(f, "\n%s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    fflush(f);
}

/* --lua-path: the shell's lines for a stock Lua to find this srgeo:
 * LUA_CPATH names the folder of srgeo.so (beside the shell in a build,
 * PREFIX/lib/lua/5.4 after `make install`, which prints the same hint);
 * LUA_PATH the library's lua/ folder, for its modules (srgeo.so adds it
 * itself once loaded, so only require "srgeo.cli" before "srgeo" needs
 * it).  ";;" keeps Lua's defaults. */
static int print_lua_path(lua_State *L)
{
    char exe[4096], so[4096 + 64];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) {
        l_message(PROGNAME, "--lua-path: cannot find the shell's own path (/proc/self/exe)");
        return 0;
    }
    exe[k] = '\0';
    char *slash = strrchr(exe, '/');
    *slash = '\0';
    const char *cdir = NULL;
    struct stat st;
    snprintf(so, sizeof so, "%s/srgeo.so", exe);
    if (stat(so, &st) == 0)
        cdir = exe; /* a build folder */
    else {
        char *up = strrchr(exe, '/');
        if (up) {
            *up = '\0';
            snprintf(so, sizeof so, "%s/lib/lua/5.4/srgeo.so", exe);
            if (stat(so, &st) == 0) {
                snprintf(so, sizeof so, "%s/lib/lua/5.4", exe);
                cdir = so;
            }
        }
    }
    lua_getglobal(L, "srgeo");
    lua_getfield(L, -1, "root");
    const char *root = lua_tostring(L, -1);
    if (!cdir) {
        l_message(PROGNAME, "--lua-path: no srgeo.so beside the shell nor in ../lib/lua/5.4 (a copied shell?)");
        return 0;
    }
    printf("export LUA_PATH=\"%s/lua/?.lua;;\"\nexport LUA_CPATH=\"%s/?.so;;\"\n", root ? root : ".", cdir);
    fflush(stdout);
    lua_pop(L, 2);
    return 1;
}

/* Bits of the argument indicators returned by collectargs. */
#define has_error 1 /* bad option */
#define has_i 2     /* -i */
#define has_v 4     /* -v or --version */
#define has_e 8     /* -e */
#define has_E 16    /* -E */
#define has_h 32    /* -h or --help */
#define has_V 64    /* --version: print and exit */
#define has_P 128   /* --lua-path: print the exports and exit */

/* Scan the options up to the script name (lua.c's collectargs plus the
 * long options).  *first is the index of the script, 0 if none; on error it
 * is the index of the bad option. */
static int collectargs(char **argv, int *first)
{
    int args = 0;
    if (argv[0] == NULL) {
        *first = -1;
        return 0;
    }
    for (int i = 1; argv[i] != NULL; i++) {
        *first = i;
        if (argv[i][0] != '-') /* not an option: the script */
            return args;
        switch (argv[i][1]) {
        case '-': /* '--' or a long option */
            if (argv[i][2] == '\0') {
                *first = i + 1;
                return args;
            }
            if (strcmp(argv[i], "--help") == 0)
                args |= has_h;
            else if (strcmp(argv[i], "--version") == 0)
                args |= has_v | has_V;
            else if (strcmp(argv[i], "--traceback") == 0)
                full_traceback = 1;
            else if (strcmp(argv[i], "--lua-path") == 0)
                args |= has_P;
            else
                return has_error;
            break;
        case '\0': /* '-': the script is stdin */
            return args;
        case 'E':
            if (argv[i][2] != '\0')
                return has_error;
            args |= has_E;
            break;
        case 'W':
            if (argv[i][2] != '\0')
                return has_error;
            break;
        case 'h':
            if (argv[i][2] != '\0')
                return has_error;
            args |= has_h;
            break;
        case 'i':
            args |= has_i; /* -i implies -v */
            /* FALLTHROUGH */
        case 'v':
            if (argv[i][2] != '\0')
                return has_error;
            args |= has_v;
            break;
        case 'e':
            args |= has_e;
            /* FALLTHROUGH */
        case 'l': /* both need an argument */
            if (argv[i][2] == '\0') {
                i++;
                if (argv[i] == NULL || argv[i][0] == '-')
                    return has_error;
            }
            break;
        default:
            return has_error;
        }
    }
    *first = 0; /* no script name */
    return args;
}

/* Run -e and -l in command-line order; 0 if one failed. */
static int runargs(lua_State *L, char **argv, int n)
{
    for (int i = 1; i < n; i++) {
        int option = argv[i][1];
        switch (option) {
        case 'e':
        case 'l': {
            char *extra = argv[i] + 2;
            if (*extra == '\0')
                extra = argv[++i];
            int status = (option == 'e') ? dostring(L, extra, "=(command line)") : dolibrary(L, extra);
            if (status != LUA_OK)
                return 0;
            break;
        }
        case 'W':
            lua_warning(L, "@on", 0);
            break;
        }
    }
    return 1;
}

/* SRGEO_INIT: a chunk, or "@file", run before the arguments (lua.c's
 * LUA_INIT; a separate name so stock lua's settings do not leak in). */
static int handle_init(lua_State *L)
{
    const char *init = getenv(INIT_VAR);
    if (init == NULL)
        return LUA_OK;
    if (init[0] == '@')
        return dofile(L, init + 1);
    return dostring(L, init, "=" INIT_VAR);
}

/* ------------------------------------------------------------------------
 * Printing results, and the fallback help(): lua/srgeo/repl.lua
 * ---------------------------------------------------------------------- */

/* Registry key of the printer. */
static const char *const REPR_KEY = "srgeo.shell.repr";

/* require "srgeo.repl": keep its printer; set the global help unless the
 * library already provides one.  (luaopen_srgeo has already failed when the
 * Lua half of the library cannot be found; a printer that fails to load
 * leaves results printed as print does.) */
static void open_shell_lua(lua_State *L)
{
    lua_getglobal(L, "require");
    lua_pushliteral(L, "srgeo.repl");
    if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_istable(L, -1)) {
        lua_pop(L, 1);
        return;
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, REPL_KEY);
    lua_getfield(L, -1, "repr");
    lua_setfield(L, LUA_REGISTRYINDEX, REPR_KEY);
    if (lua_getglobal(L, "help") == LUA_TNIL) {
        lua_getfield(L, -2, "help");
        lua_setglobal(L, "help");
    }
    lua_pop(L, 2);
}

/* Print the REPL results on the stack (lua.c's l_print, with our printer). */
static void l_print(lua_State *L)
{
    int n = lua_gettop(L);
    if (n > 0) {
        luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
        if (lua_getfield(L, LUA_REGISTRYINDEX, REPR_KEY) == LUA_TNIL) {
            lua_pop(L, 1);
            lua_getglobal(L, "print"); /* open_shell_lua found no printer */
            lua_insert(L, 1);
            if (lua_pcall(L, n, 0, 0) != LUA_OK)
                l_message(progname, lua_tostring(L, -1));
            lua_settop(L, 0);
            return;
        }
        lua_insert(L, 1);
        if (lua_pcall(L, n, 1, 0) != LUA_OK) {
            l_message(progname, lua_pushfstring(L, "error printing the result (%s)", lua_tostring(L, -2)));
            lua_settop(L, 0);
            return;
        }
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        if (s) {
            lua_writestring(s, len);
            lua_writeline();
        }
        lua_settop(L, 0);
    }
}

/* ------------------------------------------------------------------------
 * Tab completion
 *
 * The word under the cursor is split at its last '.' or ':' into a path
 * ("srgeo.nn") and a partial name ("con").  The path is resolved from the
 * globals with ordinary indexing (so lazy loaders run, as they would if the
 * user typed the name), then the candidates are the table's own string keys
 * plus, recursively, those of its metatable's __index tables: that is where
 * tensors and modules keep their methods.  After ':' only functions are
 * offered; names starting with '_' (the library's private helpers) only
 * when the partial name does.  Everything runs under lua_pcall, so odd input or an erroring
 * __index yields no completions rather than an error.
 * ---------------------------------------------------------------------- */

/* The state completion reads (set while the REPL runs). */
static lua_State *completion_L = NULL;
/* Candidates of the current completion: a Lua-free copy for the generator. */
static char **cand = NULL;
static int ncand = 0;

static const char *const lua_keywords[] = {
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
    "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while", NULL,
};

static int is_keyword(const char *s)
{
    for (int i = 0; lua_keywords[i]; i++)
        if (strcmp(s, lua_keywords[i]) == 0)
            return 1;
    return 0;
}

static int is_ident(const char *s, size_t n)
{
    if (n == 0 || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return 0;
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return 0;
    }
    return 1;
}

/* Add candidate `key` with a kind character ('f' function, 't' table, 'k'
 * keyword, 'o' other) to the result table at index res, keyed by name so a
 * method found at two levels appears once. */
static void add_candidate(lua_State *L, int res, const char *key, char kind)
{
    lua_pushlstring(L, &kind, 1);
    lua_setfield(L, res, key);
}

/* Candidates from the value at idx: own keys, then __index tables. */
static void add_fields(lua_State *L, int idx, int res, const char *partial, int methods, int depth)
{
    idx = lua_absindex(L, idx);
    size_t plen = strlen(partial);
    if (depth > 8)
        return; /* __index chains longer than this are cycles */
    if (lua_type(L, idx) == LUA_TTABLE) {
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            size_t klen;
            if (lua_type(L, -2) == LUA_TSTRING) {
                const char *k = lua_tolstring(L, -2, &klen);
                int t = lua_type(L, -1);
                /* private names (srgeo._clock, m:_train_step) only when asked for with a leading '_' */
                if (klen >= plen && strncmp(k, partial, plen) == 0 && is_ident(k, klen) && !is_keyword(k) &&
                    (k[0] != '_' || partial[0] == '_') && (!methods || t == LUA_TFUNCTION))
                    add_candidate(L, res, k, t == LUA_TFUNCTION ? 'f' : t == LUA_TTABLE ? 't' : 'o');
            }
            lua_pop(L, 1);
        }
    }
    if (lua_getmetatable(L, idx)) {
        lua_pushliteral(L, "__index");
        lua_rawget(L, -2);
        if (lua_type(L, -1) == LUA_TTABLE)
            add_fields(L, -1, res, partial, methods, depth + 1);
        lua_pop(L, 2);
    }
}

/* The srgeo table loads lua/srgeo/NAME.lua on first use: offer those names
 * before they are loaded, read from the library directory. */
static void add_lazy_modules(lua_State *L, int value, int res, const char *partial)
{
    lua_getglobal(L, "package");
    if (!lua_istable(L, -1) || lua_getfield(L, -1, "loaded") != LUA_TTABLE ||
        lua_getfield(L, -1, "srgeo") == LUA_TNIL || !lua_rawequal(L, -1, value)) {
        lua_settop(L, res);
        return;
    }
    lua_getfield(L, value, "root");
    const char *root = lua_tostring(L, -1);
    char dir[4096];
    if (!root || snprintf(dir, sizeof dir, "%s/lua/srgeo", root) >= (int)sizeof dir) {
        lua_settop(L, res);
        return;
    }
    DIR *d = opendir(dir);
    if (!d) {
        lua_settop(L, res);
        return;
    }
    size_t plen = strlen(partial);
    struct dirent *e;
    /* Names are copied to Lua before anything can raise, and the directory
     * is closed before add_candidate can (memory errors), so no leak. */
    lua_newtable(L);
    int names = lua_gettop(L);
    while ((e = readdir(d)) != NULL) {
        char name[256];
        snprintf(name, sizeof name, "%s", e->d_name);
        size_t n = strlen(name);
        if (n > 4 && strcmp(name + n - 4, ".lua") == 0) {
            name[n - 4] = '\0';
            n -= 4;
        } else {
            char sub[4096 + 512];
            struct stat st;
            snprintf(sub, sizeof sub, "%s/%s/init.lua", dir, name);
            if (stat(sub, &st) != 0)
                continue;
        }
        if (strcmp(name, "init") == 0 || !is_ident(name, n) || strncmp(name, partial, plen) != 0)
            continue;
        lua_pushstring(L, name);
        lua_rawseti(L, names, (lua_Integer)lua_rawlen(L, names) + 1);
    }
    closedir(d);
    for (lua_Integer i = 1; lua_rawgeti(L, names, i) == LUA_TSTRING; i++) {
        const char *name = lua_tostring(L, -1);
        lua_pushstring(L, name);
        if (lua_rawget(L, res) == LUA_TNIL)
            add_candidate(L, res, name, 't');
        lua_pop(L, 2);
    }
    lua_settop(L, res);
}

/* lua_CFunction (text) -> {name = kind}, prefix.  Runs under pcall. */
static int collect_completions(lua_State *L)
{
    const char *text = luaL_checkstring(L, 1);
    lua_newtable(L); /* 2: result */
    int res = 2;
    const char *sep = NULL; /* the last '.' or ':' */
    for (const char *c = text; *c; c++)
        if (*c == '.' || *c == ':')
            sep = c;
    if (sep == NULL) { /* a global name or a keyword */
        lua_pushglobaltable(L);
        add_fields(L, -1, res, text, 0, 0);
        lua_pop(L, 1);
        size_t n = strlen(text);
        for (int i = 0; lua_keywords[i]; i++)
            if (strncmp(lua_keywords[i], text, n) == 0)
                add_candidate(L, res, lua_keywords[i], 'k');
        lua_pushliteral(L, "");
        return 2;
    }
    /* Resolve the path before sep: identifiers joined by '.', nothing else
     * (no calls, no brackets, no ':' before the last separator). */
    lua_pushglobaltable(L);
    for (const char *p = text;;) {
        const char *q = p;
        while (q < sep && *q != '.' && *q != ':')
            q++;
        if (!is_ident(p, (size_t)(q - p)) || (q < sep && *q == ':'))
            return 0;
        if (lua_type(L, -1) != LUA_TTABLE) {
            if (luaL_getmetafield(L, -1, "__index") == LUA_TNIL)
                return 0; /* cannot be indexed: no candidates */
            lua_pop(L, 1);
        }
        lua_pushlstring(L, p, (size_t)(q - p));
        lua_gettable(L, -2); /* may run __index: a lazy module loads */
        lua_remove(L, -2);
        if (q == sep)
            break;
        p = q + 1;
    }
    int methods = *sep == ':';
    int value = lua_gettop(L);
    add_fields(L, value, res, sep + 1, methods, 0);
    if (!methods)
        add_lazy_modules(L, value, res, sep + 1);
    lua_settop(L, res);
    lua_pushlstring(L, text, (size_t)(sep - text) + 1); /* prefix incl. separator */
    return 2;
}

static void free_candidates(void)
{
    for (int i = 0; i < ncand; i++)
        free(cand[i]);
    free(cand);
    cand = NULL;
    ncand = 0;
}

static char *candidate_generator(const char *text, int state)
{
    static int next;
    (void)text;
    if (state == 0)
        next = 0;
    if (next < ncand) {
        char *s = cand[next];
        cand[next++] = NULL; /* readline owns it now */
        return s;
    }
    return NULL;
}

/* Show only the last name of each match in the list ("conv2d", not
 * "srgeo.nn.conv2d"), as shells show file names without their directory. */
static void display_matches(char **matches, int num, int max_length)
{
    (void)max_length;
    char **shown = malloc(((size_t)num + 2) * sizeof *shown);
    if (!shown) {
        rl_display_match_list(matches, num, max_length);
        rl_forced_update_display();
        return;
    }
    int maxlen = 0;
    for (int i = 0; i <= num; i++) {
        const char *d = strrchr(matches[i], '.'), *c = strrchr(matches[i], ':');
        const char *s = d > c ? d : c;
        shown[i] = (char *)(s ? s + 1 : matches[i]);
        int n = (int)strlen(shown[i]);
        if (i > 0 && n > maxlen)
            maxlen = n;
    }
    shown[num + 1] = NULL;
    rl_display_match_list(shown, num, maxlen);
    rl_forced_update_display();
    free(shown);
}

static char **shell_completion(const char *text, int start, int end)
{
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1; /* never fall back to file names */
    rl_completion_append_character = '\0';
    lua_State *L = completion_L;
    if (!L)
        return NULL;
    int top = lua_gettop(L);
    char **matches = NULL;
    free_candidates();
    lua_pushcfunction(L, collect_completions);
    lua_pushstring(L, text);
    if (lua_pcall(L, 1, 2, 0) == LUA_OK && lua_istable(L, -2) && lua_isstring(L, -1)) {
        size_t plen;
        const char *prefix = lua_tolstring(L, -1, &plen);
        int n = 0;
        char kind = 'o';
        lua_pushnil(L);
        while (lua_next(L, -3)) {
            n++;
            kind = lua_tostring(L, -1)[0];
            lua_pop(L, 1);
        }
        cand = calloc((size_t)n + 1, sizeof *cand);
        if (cand) {
            lua_pushnil(L);
            while (lua_next(L, -3) && ncand < n) {
                size_t klen;
                const char *k = lua_tolstring(L, -2, &klen);
                char *s = malloc(plen + klen + 1);
                if (s) {
                    memcpy(s, prefix, plen);
                    memcpy(s + plen, k, klen + 1);
                    cand[ncand++] = s;
                }
                lua_pop(L, 1);
            }
        }
        /* A unique match: make the next keystroke easy: open the call of a
         * method, descend into a table, a space after a keyword.  Plain
         * functions get nothing: srgeo's constructors are called f{...}. */
        if (n == 1) {
            int method = plen > 0 && prefix[plen - 1] == ':';
            rl_completion_append_character = kind == 'f' ? (method ? '(' : '\0')
                                             : kind == 't' ? '.'
                                             : kind == 'k' ? ' '
                                                           : '\0';
        }
        if (ncand > 0)
            matches = rl_completion_matches(text, candidate_generator);
    }
    free_candidates();
    lua_settop(L, top);
    return matches;
}

/* ------------------------------------------------------------------------
 * Reading lines: readline on a terminal, a plain reader otherwise.  Both
 * return 1 with a malloc'd line, 0 at end of input, -1 on Ctrl-C.
 * ---------------------------------------------------------------------- */

/* Whether this REPL reads through readline (stdin is a terminal) or the
 * plain reader, and where its history goes ("" for nowhere). */
static int use_readline = 0;
static char history_path[4096];

/* Wait until stdin is readable (1) or Ctrl-C was pressed (-1). */
static int wait_input(void)
{
    for (;;) {
        if (prompt_interrupted)
            return -1;
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(STDIN_FILENO, &fds);
        int maxfd = STDIN_FILENO;
        if (wake_pipe[0] >= 0) {
            FD_SET(wake_pipe[0], &fds);
            if (wake_pipe[0] > maxfd)
                maxfd = wake_pipe[0];
        }
        int r = select(maxfd + 1, &fds, NULL, NULL, NULL);
        /* The handler may have run as select returned with input ready
         * (Ctrl-C typed just before more keys): the interrupt comes first. */
        if (prompt_interrupted)
            return -1;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return 1; /* let read() report the problem */
        }
        if (wake_pipe[0] >= 0 && FD_ISSET(wake_pipe[0], &fds)) {
            char buf[64];
            while (read(wake_pipe[0], buf, sizeof buf) > 0) {
            }
            if (prompt_interrupted)
                return -1;
        }
        if (FD_ISSET(STDIN_FILENO, &fds))
            return 1;
    }
}

/* Byte-at-a-time so nothing past the line is consumed: code the user runs
 * (io.read) sees the rest of stdin. */
static int plain_readline(const char *prompt, char **out)
{
    fputs(prompt, stdout);
    fflush(stdout);
    size_t n = 0, cap = 256;
    char *b = malloc(cap);
    if (!b)
        return 0;
    for (;;) {
        if (wait_input() < 0) {
            free(b);
            return -1;
        }
        char c;
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (n == 0) {
                free(b);
                return 0;
            }
            break; /* last line without a newline */
        }
        if (c == '\n')
            break;
        if (n + 2 > cap) {
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                return 0;
            }
            b = nb;
            cap *= 2;
        }
        b[n++] = c;
    }
    if (n > 0 && b[n - 1] == '\r')
        n--;
    b[n] = '\0';
    *out = b;
    return 1;
}

/* readline's callback interface, driven by our select() loop (the approach
 * of CPython's readline module), so Ctrl-C can end the wait cleanly. */
static char *rl_line;
static int rl_got_line;

static void rl_line_handler(char *line)
{
    rl_line = line;
    rl_got_line = 1;
    rl_callback_handler_remove();
}

static int term_readline(const char *prompt, char **out)
{
    rl_line = NULL;
    rl_got_line = 0;
    rl_callback_handler_install(prompt, rl_line_handler);
    while (!rl_got_line) {
        if (wait_input() < 0) {
            rl_echo_signal_char(SIGINT);
            rl_free_line_state();
            rl_callback_sigcleanup();
            rl_cleanup_after_signal();
            rl_callback_handler_remove();
            fputs("\n", stdout);
            fflush(stdout);
            return -1;
        }
        rl_callback_read_char();
    }
    if (!rl_line) {
        return 0;
    }
    *out = rl_line;
    return 1;
}

/* The REPL's SIGINT handler stays installed between lines too (docall
 * restores it), so a press while a result prints is dropped, not fatal. */
static int read_line(const char *prompt, char **out)
{
    prompt_interrupted = 0;
    int r = use_readline ? term_readline(prompt, out) : plain_readline(prompt, out);
    if (r < 0 && !use_readline) {
        fputs("\n", stdout);
        fflush(stdout);
    }
    prompt_interrupted = 0;
    return r;
}

static void init_readline(lua_State *L)
{
    completion_L = L;
    if (pipe(wake_pipe) == 0) {
        for (int i = 0; i < 2; i++) {
            fcntl(wake_pipe[i], F_SETFL, fcntl(wake_pipe[i], F_GETFL) | O_NONBLOCK);
            fcntl(wake_pipe[i], F_SETFD, FD_CLOEXEC);
        }
    } else {
        wake_pipe[0] = wake_pipe[1] = -1;
    }
    setsignal(SIGINT, prompt_sigint);
    use_readline = isatty(STDIN_FILENO);
    if (!use_readline)
        return;
    rl_readline_name = PROGNAME;
    rl_catch_signals = 0; /* SIGINT is ours; readline keeps SIGWINCH */
    rl_attempted_completion_function = shell_completion;
    rl_completion_display_matches_hook = display_matches;
    /* No '.' or ':' here: "srgeo.nn.con" is one word to complete. */
    rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{(,)}[]+-*/%^~#";
    rl_completer_word_break_characters = rl_basic_word_break_characters;
    using_history();
    stifle_history(HISTORY_MAX);
    const char *h = getenv("SRGEO_HISTORY"), *home = getenv("HOME");
    history_path[0] = '\0';
    if (h)
        snprintf(history_path, sizeof history_path, "%s", h);
    else if (home && *home)
        snprintf(history_path, sizeof history_path, "%s/" HISTORY_FILE, home);
    if (history_path[0]) {
        if (read_history(history_path) != 0)
            write_history(history_path); /* create it, so appends work */
        history_truncate_file(history_path, HISTORY_MAX);
    }
}

/* Keep a complete entry in the history, written through to the file at
 * once so a killed session keeps it. */
static void save_line(const char *line)
{
    if (!use_readline || line[0] == '\0')
        return;
    HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
    if (last && strcmp(last->line, line) == 0)
        return; /* no consecutive duplicates */
    add_history(line);
    if (history_path[0])
        append_history(1, history_path);
}

static void close_readline(void)
{
    setsignal(SIGINT, SIG_DFL);
    if (use_readline && history_path[0])
        history_truncate_file(history_path, HISTORY_MAX);
    completion_L = NULL;
    for (int i = 0; i < 2; i++)
        if (wake_pipe[i] >= 0) {
            close(wake_pipe[i]);
            wake_pipe[i] = -1;
        }
}

/* ------------------------------------------------------------------------
 * The REPL (lua.c: get_prompt, incomplete, pushline, addreturn, multiline,
 * loadline, doREPL)
 * ---------------------------------------------------------------------- */

/* _PROMPT / _PROMPT2 override the prompts, as in lua.c.  Pushes it. */
static const char *get_prompt(lua_State *L, int firstline)
{
    if (lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) {
        lua_pop(L, 1);
        lua_pushstring(L, firstline ? PROMPT1 : PROMPT2);
        return lua_tostring(L, -1);
    }
    const char *p = luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    return p;
}

#define EOFMARK "<eof>"
#define marklen (sizeof(EOFMARK) / sizeof(char) - 1)

/* A syntax error that ends at '<eof>' means "keep reading". */
static int incomplete(lua_State *L, int status)
{
    if (status == LUA_ERRSYNTAX) {
        size_t lmsg;
        const char *msg = lua_tolstring(L, -1, &lmsg);
        if (lmsg >= marklen && strcmp(msg + lmsg - marklen, EOFMARK) == 0) {
            lua_pop(L, 1);
            return 1;
        }
    }
    return 0;
}

/* Read a line and push it: 1 read, 0 end of input, -1 Ctrl-C (nothing
 * pushed in either of the last two). */
static int pushline(lua_State *L, int firstline)
{
    char *b = NULL;
    const char *prmt = get_prompt(L, firstline);
    int r = read_line(prmt, &b);
    lua_pop(L, 1); /* prompt */
    if (r <= 0)
        return r;
    size_t l = strlen(b);
    if (l > 0 && b[l - 1] == '\n')
        b[--l] = '\0';
    if (firstline && b[0] == '=') /* 5.2 compatibility: "=x" is "return x" */
        lua_pushfstring(L, "return %s", b + 1);
    else if (firstline && strcmp(b, ":tb") == 0) /* the last error's traceback */
        lua_pushliteral(L, "srgeo.traceback()");
    else
        lua_pushlstring(L, b, l);
    free(b);
    return 1;
}

/* Try the line as "return LINE;": an expression to print. */
static int addreturn(lua_State *L)
{
    const char *line = lua_tostring(L, -1);
    const char *retline = lua_pushfstring(L, "return %s;", line);
    int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
    if (status == LUA_OK) {
        lua_remove(L, -2); /* modified line */
        save_line(line);
    } else {
        lua_pop(L, 2); /* error message and modified line */
    }
    return status;
}

/* Read continuation lines while the chunk is incomplete.  Returns the load
 * status, or -2 if Ctrl-C abandoned the statement. */
static int multiline(lua_State *L)
{
    for (;;) {
        size_t len;
        const char *line = lua_tolstring(L, 1, &len);
        int status = luaL_loadbuffer(L, line, len, "=stdin");
        if (!incomplete(L, status)) {
            save_line(line);
            return status;
        }
        int r = pushline(L, 0);
        if (r < 0)
            return -2;
        if (r == 0) { /* end of input inside a statement: report it */
            save_line(line);
            return luaL_loadbuffer(L, line, len, "=stdin");
        }
        lua_pushliteral(L, "\n");
        lua_insert(L, -2);
        lua_concat(L, 3);
    }
}

/* Read a complete chunk and compile it: its status (function or error on
 * the stack), -1 at end of input, -2 when Ctrl-C dropped the input. */
static int loadline(lua_State *L)
{
    lua_settop(L, 0);
    int r = pushline(L, 1);
    if (r == 0)
        return -1;
    if (r < 0)
        return -2;
    int status = addreturn(L);
    if (status != LUA_OK)
        status = multiline(L);
    if (status == -2) {
        lua_settop(L, 0);
        return -2;
    }
    lua_remove(L, 1); /* the line */
    return status;
}

static void doREPL(lua_State *L)
{
    int status;
    const char *oldprogname = progname;
    progname = NULL;
    init_readline(L);
    /* srgeo.repl.interactive: the REPL echoes results now (srgeo.plot then
     * returns a figure's path without also printing it) */
    if (lua_getfield(L, LUA_REGISTRYINDEX, REPL_KEY) == LUA_TTABLE) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "interactive");
    }
    lua_pop(L, 1);
    while ((status = loadline(L)) != -1) {
        if (status == -2)
            continue; /* Ctrl-C at the prompt: a fresh line */
        if (status == LUA_OK)
            status = docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK)
            l_print(L);
        else
            report(L, status);
        fflush(stdout);
    }
    lua_settop(L, 0);
    lua_writeline();
    close_readline();
    progname = oldprogname;
}

/* ------------------------------------------------------------------------
 * `srgeo kernel` (scripts/kernel.lua): a Jupyter kernel, lua/srgeo/kernel.lua
 * on core/shell/kernel.c, which answers completion and is_complete with the
 * REPL's own functions.  Offered as require "srgeo.kernel_shell".
 * ---------------------------------------------------------------------- */

static int open_kernel(lua_State *L)
{
    static const sr_kernel_repl repl = {collect_completions, incomplete};
    return sr_kernel_open(L, &repl);
}

static void preload_kernel(lua_State *L)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, open_kernel);
    lua_setfield(L, -2, "srgeo.kernel_shell");
    lua_pop(L, 1);
}

/* ------------------------------------------------------------------------
 * main
 * ---------------------------------------------------------------------- */

/* package.loaded.srgeo and the global srgeo (raises when the library's
 * Lua half cannot be found: core/lua/srgeo.c). */
static int open_srgeo(lua_State *L)
{
    luaL_requiref(L, "srgeo", luaopen_srgeo, 1);
    lua_pop(L, 1);
    return 0;
}

static int pmain(lua_State *L)
{
    int argc = (int)lua_tointeger(L, 1);
    char **argv = (char **)lua_touserdata(L, 2);
    int script;
    int args = collectargs(argv, &script);
    int optlim = (script > 0) ? script : argc;
    /* `srgeo run FILE args`: FILE is the script (never a subcommand) */
    int as_file = 0;
    if (script > 0 && strcmp(argv[script], "run") == 0 && strcmp(argv[script - 1], "--") != 0) {
        if (argv[script + 1] == NULL) {
            l_message(PROGNAME, "run needs a file: srgeo run FILE [args]");
            return 0;
        }
        script++;
        as_file = 1;
    }
    luaL_checkversion(L);
    if (args == has_error) {
        print_usage(stderr, argv[script]);
        return 0;
    }
    if (args & has_E) {
        lua_pushboolean(L, 1);
        lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
    } else {
        const char *tb = getenv("SRGEO_TRACEBACK");
        if (tb && *tb && strcmp(tb, "0") != 0)
            full_traceback = 1;
    }
    luaL_openlibs(L);
    /* -v, --version and the terminal REPL's banner name the kernels and
     * print the BLAS warning (if any) on stdout, and --help runs none: the
     * opener then keeps it off stderr (base/blas.h).  -i, which implies -v
     * as in lua.c, prints lua.c's one line (its session may be a pipe). */
    int kernels = (args & has_v && !(args & has_i)) || (script < 1 && !(args & (has_e | has_v)) && isatty(STDIN_FILENO));
    if (kernels || args & has_h)
        sr_blas_noted();
    if (args & has_h) { /* the usage even when the library cannot load; its subcommands when it can */
        print_usage(stdout, NULL);
        lua_pushcfunction(L, open_srgeo);
        if (lua_pcall(L, 0, 0, 0) == LUA_OK)
            print_commands(L, stdout);
        else
            l_message(progname, lua_tostring(L, -1));
        lua_pushboolean(L, 1);
        return 1;
    }
    open_srgeo(L);
    open_shell_lua(L);
    preload_kernel(L);
    if (args & has_P) {
        lua_pushboolean(L, print_lua_path(L));
        return 1;
    }
    if (args & has_v)
        print_version(L, kernels);
    if (args & has_V) {
        lua_pushboolean(L, 1);
        return 1;
    }
    createargtable(L, argv, argc, script);
    lua_gc(L, LUA_GCRESTART);
    lua_gc(L, LUA_GCGEN, 0, 0);
    if (!(args & has_E) && handle_init(L) != LUA_OK)
        return 0;
    if (!runargs(L, argv, optlim))
        return 0;
    if (script > 0 && handle_script(L, argv + script, as_file) != LUA_OK)
        return 0;
    if (args & has_i) {
        doREPL(L);
    } else if (script < 1 && !(args & (has_e | has_v))) {
        if (isatty(STDIN_FILENO)) {
            print_version(L, 1);
            printf("Type help() for topics, Tab to complete, Ctrl-D to quit.\n");
            doREPL(L);
        } else if (dofile(L, NULL) != LUA_OK) { /* stdin as a script */
            return 0;
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

int main(int argc, char **argv)
{
    /* OpenMP's worker threads spin between parallel loops by default, and so
     * do OpenBLAS's between GEMMs; interleaved, the two pools fight for the
     * cores (on a loaded 2-core machine a forward ran 12x slower).  OpenBLAS's
     * workers spin 2^28 cycles (~0.1 s) after a threaded GEMM; a convolution
     * that then runs one single-threaded GEMM per OpenMP thread shares a core
     * with the spinner and loses its second thread (ResNet-18 3x3 convs right
     * after a threaded sgemm: conv/sgemm 0.61; with 2^22 cycles, ~2 ms, which
     * still bridges back-to-back GEMMs: 0.89).  Both libraries read these only
     * when they load, so set them and re-exec once; values the user chose are
     * kept.  The same re-exec gives OpenBLAS the kernels of the CPU's widest
     * vectors when its own table does not know the CPU (base/blas.h); the
     * re-executed process has OPENBLAS_CORETYPE set, so it never loops. */
    int reexec = 0;
    if (!getenv("OMP_WAIT_POLICY"))
        reexec = !setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    if (!getenv("OPENBLAS_THREAD_TIMEOUT"))
        reexec |= !setenv("OPENBLAS_THREAD_TIMEOUT", "22", 1);
    const char *core = sr_blas_wanted_core();
    if (core && !setenv("OPENBLAS_CORETYPE", core, 1))
        reexec |= !setenv("SRGEO_BLAS_CORETYPE", core, 1);
    if (reexec)
        execv("/proc/self/exe", argv); /* on failure: carry on with the defaults */
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        l_message(argv[0], "cannot create state: not enough memory");
        return EXIT_FAILURE;
    }
    lua_gc(L, LUA_GCSTOP); /* no collections while building the state */
    lua_pushcfunction(L, &pmain);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    int status = lua_pcall(L, 2, 1, 0);
    int result = lua_toboolean(L, -1);
    report(L, status);
    lua_close(L);
    return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
