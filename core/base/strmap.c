/* strmap.c - the string -> int map of strmap.h: linear probing in a table
 * kept at most half full, doubled when it would fill further. */
#include "base/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static size_t slot_of(const char *s, size_t cap)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)(h ^ h >> 32) & (cap - 1);
}

int sr_strmap_get(const sr_strmap *m, const char *key)
{
    if (!m->n)
        return -1;
    for (size_t k = slot_of(key, m->cap); m->key[k]; k = (k + 1) & (m->cap - 1))
        if (!strcmp(m->key[k], key))
            return m->val[k];
    return -1;
}

static void place(const char **keys, int *vals, size_t cap, const char *key, int val)
{
    size_t k = slot_of(key, cap);
    while (keys[k] && strcmp(keys[k], key))
        k = (k + 1) & (cap - 1);
    keys[k] = key;
    vals[k] = val;
}

int sr_strmap_put(sr_strmap *m, const char *key, int val)
{
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        const char **keys = calloc(cap, sizeof *keys);
        int *vals = malloc(cap * sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return sr_fail("out of memory (a table of %zu names)", cap);
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i])
                place(keys, vals, cap, m->key[i], m->val[i]);
        free(m->key);
        free(m->val);
        m->key = keys, m->val = vals, m->cap = cap;
    }
    m->n += sr_strmap_get(m, key) < 0;
    place(m->key, m->val, m->cap, key, val);
    return 0;
}

void sr_strmap_free(sr_strmap *m)
{
    free(m->key);
    free(m->val);
    *m = (sr_strmap)SR_STRMAP_INIT;
}
