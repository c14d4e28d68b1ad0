/* main.c - runs every registered C test (optionally those whose name
 * contains argv[1]) and prints "N passed, N failed". */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "test.h"

typedef struct {
    const char *name, *file;
    test_fn fn;
} test_case;

static test_case *cases;
static int ncases, cap;
static int current_failed;

void test_register(const char *name, test_fn fn, const char *file)
{
    if (ncases == cap) {
        cap = cap ? 2 * cap : 64;
        cases = realloc(cases, (size_t)cap * sizeof *cases);
        if (!cases)
            abort();
    }
    cases[ncases++] = (test_case){name, file, fn};
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    printf("FAIL ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("  (%s:%d)\n", file, line);
    current_failed = 1;
}

int test_failed(void) { return current_failed; }

static int by_name(const void *a, const void *b)
{
    return strcmp(((const test_case *)a)->name, ((const test_case *)b)->name);
}

int main(int argc, char **argv)
{
    int passed = 0, failed = 0;
    qsort(cases, (size_t)ncases, sizeof *cases, by_name);
    for (int i = 0; i < ncases; i++) {
        if (argc > 1 && !strstr(cases[i].name, argv[1]))
            continue;
        current_failed = 0;
        sr_interrupt_clear();
        cases[i].fn();
        if (current_failed) {
            printf("  in test %s\n", cases[i].name);
            failed++;
        } else {
            printf("ok   %s\n", cases[i].name);
            passed++;
        }
        fflush(stdout);
    }
    printf("c: %d passed, %d failed\n", passed, failed);
    free(cases);
    return failed ? 1 : 0;
}
