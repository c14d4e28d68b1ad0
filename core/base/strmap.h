/* strmap.h - a string -> int map (open addressing, FNV-1a), for name
 * lookups that would otherwise scan a list: a graph's node names, a
 * model's tap aliases, where a linear scan per insertion made building a
 * graph of 10^5 nodes quadratic.  Keys are not copied: each must outlive
 * the map (they point into the names their owner keeps). */
#ifndef SR_STRMAP_H
#define SR_STRMAP_H

#include <stddef.h>

typedef struct {
    const char **key;
    int *val;
    size_t cap, n;
} sr_strmap;

#define SR_STRMAP_INIT {NULL, NULL, 0, 0}

/* The value of key, or -1 when absent. */
int sr_strmap_get(const sr_strmap *m, const char *key);
/* Set key to val (>= 0), replacing its value if present: 0, or -1 (out of
 * memory, with the error set). */
int sr_strmap_put(sr_strmap *m, const char *key, int val);
void sr_strmap_free(sr_strmap *m);

#endif
