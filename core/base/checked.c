/* checked.c - overflow-checked counts (see checked.h). */
#include "base/checked.h"

#include <stdio.h>

#include "base/error.h"

/* "a x b x c" into buf, for messages. */
static const char *factors_str(char *buf, size_t cap, int n, const int64_t *f)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, i ? " x %lld" : "%lld", (long long)f[i]);
    return buf;
}

int sr_count_n(int64_t *out, const char *what, int n, const int64_t *f)
{
    int64_t prod = 1, nonzero = 1;
    char buf[256];
    for (int i = 0; i < n; i++) {
        if (f[i] < 0)
            return sr_fail("%s: negative size in %s", what, factors_str(buf, sizeof buf, n, f));
        if (f[i] == 0) {
            prod = 0;
            continue;
        }
        /* both in 1..2^40: the product is below 2^80 only in theory; ask first */
        if (nonzero > SR_MAX_ELEMS / f[i])
            return sr_fail("%s: %s is too large (more than 2^40 elements)", what, factors_str(buf, sizeof buf, n, f));
        nonzero *= f[i];
        prod = prod ? prod * f[i] : 0;
    }
    *out = prod;
    return 0;
}

int sr_count_bytes(size_t *out, const char *what, int64_t count, size_t size)
{
    if (count < 0 || count > SR_MAX_ELEMS || size > 64)
        return sr_fail("%s: %lld elements of %zu bytes is out of range (at most 2^40 elements)", what,
                       (long long)count, size);
    *out = (size_t)count * size;
    return 0;
}

int sr_add_u64(uint64_t *out, const char *what, uint64_t a, uint64_t b)
{
    if (a > UINT64_MAX - b)
        return sr_fail("%s: %llu + %llu overflows", what, (unsigned long long)a, (unsigned long long)b);
    *out = a + b;
    return 0;
}
