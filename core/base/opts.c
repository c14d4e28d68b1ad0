/* opts.c - typed option getters and the key/value-string implementation. */
#include "base/opts.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static int as_int(const sr_opts *o, const char *key, double v, int64_t *out)
{
    if (v != floor(v) || fabs(v) > 9e15)
        return sr_fail("%s: option %s must be an integer (got %g)", o->op, key, v);
    *out = (int64_t)v;
    return 0;
}

int sr_opt_int(const sr_opts *o, const char *key, int64_t def, int64_t *out)
{
    double v;
    int r = o->get_num(o, key, &v);
    if (r < 0)
        return -1;
    if (r == 0) {
        *out = def;
        return 0;
    }
    return as_int(o, key, v, out);
}

int sr_opt_int_min(const sr_opts *o, const char *key, int64_t def, int64_t min, int64_t *out)
{
    if (sr_opt_int(o, key, def, out))
        return -1;
    if (*out < min)
        return sr_fail("%s: option %s must be >= %lld (got %lld)", o->op, key, (long long)min,
                       (long long)*out);
    return 0;
}

int sr_opt_req_int(const sr_opts *o, const char *key, int64_t min, int64_t *out)
{
    double v;
    int r = o->get_num(o, key, &v);
    if (r < 0)
        return -1;
    if (r == 0)
        return sr_fail("%s: option %s is required", o->op, key);
    if (as_int(o, key, v, out))
        return -1;
    if (*out < min)
        return sr_fail("%s: option %s must be >= %lld (got %lld)", o->op, key, (long long)min,
                       (long long)*out);
    return 0;
}

int sr_opt_num(const sr_opts *o, const char *key, double def, double *out)
{
    int r = o->get_num(o, key, out);
    if (r < 0)
        return -1;
    if (r == 0)
        *out = def;
    return 0;
}

int sr_opt_bool(const sr_opts *o, const char *key, int def, int *out)
{
    double v;
    int r = o->get_num(o, key, &v); /* bindings map true/false to 1/0 */
    if (r < 0)
        return -1;
    *out = r == 0 ? def : v != 0;
    return 0;
}

int sr_opt_str(const sr_opts *o, const char *key, const char *def, const char **out)
{
    int r = o->get_str(o, key, out);
    if (r < 0)
        return -1;
    if (r == 0)
        *out = def;
    return 0;
}

int sr_opt_choice(const sr_opts *o, const char *key, const char *const *names, int *out)
{
    const char *v;
    if (sr_opt_str(o, key, names[0], &v))
        return -1;
    int n = 0;
    for (; names[n]; n++)
        if (strcmp(v, names[n]) == 0) {
            *out = n;
            return 0;
        }
    /* "a", "b" or "c" */
    char list[256] = "";
    size_t k = 0;
    for (int i = 0; i < n && k < sizeof list; i++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s\"%s\"", i == 0 ? "" : i == n - 1 ? " or " : ", ",
                              names[i]);
    return sr_fail("%s: option %s must be %s (got \"%s\")", o->op, key, list, v);
}

int sr_opt_pair(const sr_opts *o, const char *key, int64_t def, int64_t out[2])
{
    double v[2];
    int n = 0;
    int r = o->get_nums(o, key, v, 2, &n);
    if (r < 0)
        return -1;
    if (r == 0) {
        out[0] = out[1] = def;
        return 0;
    }
    if (n != 1 && n != 2)
        return sr_fail("%s: option %s must be a number or a pair {h, w}", o->op, key);
    if (as_int(o, key, v[0], &out[0]) || as_int(o, key, v[n - 1], &out[1]))
        return -1;
    return 0;
}

/* --- key/value strings -------------------------------------------------- */
static const char *kv_find(const sr_opts *o, const char *key)
{
    const sr_opts_kv_data *d = o->ud;
    for (const char *const *p = d->kv; p && p[0]; p += 2)
        if (strcmp(p[0], key) == 0)
            return p[1];
    return NULL;
}

static int kv_num(const sr_opts *o, const char *key, double *v)
{
    const char *s = kv_find(o, key);
    if (!s)
        return 0;
    char *end;
    if (strcmp(s, "true") == 0) { *v = 1; return 1; }
    if (strcmp(s, "false") == 0) { *v = 0; return 1; }
    *v = strtod(s, &end);
    if (end == s || *end)
        return sr_fail("%s: option %s must be a number (got '%s')", o->op, key, s);
    return 1;
}

static int kv_str(const sr_opts *o, const char *key, const char **v)
{
    const char *s = kv_find(o, key);
    if (!s)
        return 0;
    *v = s;
    return 1;
}

/* Lists are written "3,5". */
static int kv_nums(const sr_opts *o, const char *key, double *v, int max, int *n)
{
    const char *s = kv_find(o, key);
    if (!s)
        return 0;
    *n = 0;
    while (*s) {
        char *end;
        double x = strtod(s, &end);
        if (end == s)
            return sr_fail("%s: option %s must be numbers (got '%s')", o->op, key, s);
        if (*n >= max)
            return sr_fail("%s: option %s has more than %d values", o->op, key, max);
        v[(*n)++] = x;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return sr_fail("%s: option %s: bad list", o->op, key);
    }
    return 1;
}

void sr_opts_kv(sr_opts *o, sr_opts_kv_data *d, const char *op, const char *const *kv)
{
    d->kv = kv;
    o->ud = d;
    o->op = op;
    o->get_num = kv_num;
    o->get_str = kv_str;
    o->get_nums = kv_nums;
}
