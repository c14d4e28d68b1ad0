/* error.c - per-thread error buffer and the interrupt flag. */
#include "base/error.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SR_ERRMAX 1024

/* A message longer than the buffer is cut, which is fine for a message. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* Thread-local so OpenMP workers cannot tear each other's messages. */
static _Thread_local char errbuf[SR_ERRMAX];

int sr_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return -1;
}

int sr_fail_context(const char *fmt, ...)
{
    char prefix[SR_ERRMAX], old[SR_ERRMAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, errbuf, sizeof old);
    snprintf(errbuf, sizeof errbuf, "%s: %s", prefix, old);
    return -1;
}

const char *sr_errmsg(void) { return errbuf; }

static volatile sig_atomic_t interrupt_flag;

void sr_interrupt_raise(void) { interrupt_flag = 1; }
void sr_interrupt_clear(void) { interrupt_flag = 0; }
int sr_interrupt_pending(void) { return interrupt_flag != 0; }

int sr_interrupted(void)
{
    if (!interrupt_flag)
        return 0;
    interrupt_flag = 0;
    return sr_fail("interrupted");
}
