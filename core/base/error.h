/* error.h - how the C core reports failure.
 *
 * Every fallible core function returns 0 on success and -1 on failure, with
 * a message left in a per-thread buffer (the libvips convention).  The core
 * never exits or aborts on a user error: in a REPL that would kill the
 * session.  The Lua bindings turn the message into luaL_error.
 */
#ifndef SR_ERROR_H
#define SR_ERROR_H

#if defined(__GNUC__)
#define SR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SR_PRINTF(a, b)
#endif

/* Set the message (printf-style) and return -1, so callers can write
 * `return sr_fail("conv2d: ...", ...);`. */
int sr_fail(const char *fmt, ...) SR_PRINTF(1, 2);

/* Prefix the current message with "op: " context, return -1. */
int sr_fail_context(const char *fmt, ...) SR_PRINTF(1, 2);

/* The last message set on this thread ("" if none). */
const char *sr_errmsg(void);

/* Ctrl-C support.  The shell's SIGINT handler calls sr_interrupt_raise();
 * long loops call sr_interrupted(), which fails with "interrupted" and
 * clears the flag.  This flag and the thread count are the only process-wide
 * mutable state of the core. */
void sr_interrupt_raise(void);
void sr_interrupt_clear(void);
int sr_interrupt_pending(void);
int sr_interrupted(void);

#endif
