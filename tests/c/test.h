/* test.h - a minimal self-registering C test harness.
 *
 *   TEST(conv_matches_naive) { ... CHECK(err < 1e-6, "err %g", err); }
 *
 * Tests register themselves at load time (no central list to edit); the
 * runner (tests/c/main.c) runs them in name order and prints one line per
 * test plus "N passed, N failed".  A CHECK failure ends the test. */
#ifndef SR_TEST_H
#define SR_TEST_H

#include <stdio.h>

typedef void (*test_fn)(void);
void test_register(const char *name, test_fn fn, const char *file);
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int test_failed(void);

#define TEST(name)                                                                \
    static void name(void);                                                       \
    __attribute__((constructor)) static void register_##name(void)                \
    {                                                                             \
        test_register(#name, name, __FILE__);                                     \
    }                                                                             \
    static void name(void)

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            test_fail(__FILE__, __LINE__, __VA_ARGS__);                           \
            return;                                                               \
        }                                                                         \
    } while (0)

/* CHECK that a core call returned 0, printing the core's message if not. */
#define CHECK_OK(call)                                                            \
    do {                                                                          \
        if ((call) != 0) {                                                        \
            test_fail(__FILE__, __LINE__, "%s failed: %s", #call, sr_errmsg());   \
            return;                                                               \
        }                                                                         \
    } while (0)

/* CHECK that a core call failed with a message containing `needle`. */
#define CHECK_ERR(call, needle)                                                   \
    do {                                                                          \
        if ((call) == 0) {                                                        \
            test_fail(__FILE__, __LINE__, "%s succeeded, expected an error", #call); \
            return;                                                               \
        }                                                                         \
        if (!strstr(sr_errmsg(), (needle))) {                                     \
            test_fail(__FILE__, __LINE__, "%s: error '%s' lacks '%s'", #call,     \
                      sr_errmsg(), (needle));                                     \
            return;                                                               \
        }                                                                         \
    } while (0)

#endif
