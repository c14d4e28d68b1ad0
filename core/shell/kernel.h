/* kernel.h - the C half of `srgeo kernel` (a Jupyter kernel): the wire
 * (jupyter/wire.h) bound to Lua, cells run with Ctrl-C reaching the core,
 * and the REPL's completion and continuation rule, which shell.c owns and
 * hands over here.  lua/srgeo/kernel.lua is the protocol. */
#ifndef SR_KERNEL_H
#define SR_KERNEL_H

#include <lua.h>

/* The REPL's pieces the kernel reuses rather than repeats (shell.c). */
typedef struct {
    lua_CFunction complete;                  /* (text) -> {name = kind}, prefix */
    int (*incomplete)(lua_State *L, int st); /* a load status: 1 when the chunk only lacks its end (pops) */
} sr_kernel_repl;

/* require "srgeo.kernel_shell": the table lua/srgeo/kernel.lua runs on. */
int sr_kernel_open(lua_State *L, const sr_kernel_repl *repl);

#endif
