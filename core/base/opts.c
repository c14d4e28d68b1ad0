/* opts.c - typed option getters, declared options (sr_opt_spec) and the
 * key/value-string implementation. */
#include "base/opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
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
    return sr_opt_int_min(o, key, 0, min, out);
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

/* "a", "b" or "c" */
static const char *choice_list(const char *const *names, char *buf, size_t n)
{
    size_t k = 0;
    int count = 0;
    while (names[count])
        count++;
    buf[0] = 0;
    for (int i = 0; i < count && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s\"%s\"", i == 0 ? "" : i == count - 1 ? " or " : ", ", names[i]);
    return buf;
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
    char list[256];
    return sr_fail("%s: option %s must be %s (got \"%s\")", o->op, key, choice_list(names, list, sizeof list), v);
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

/* --- declared options ------------------------------------------------------ */

/* v as a bound or a default: integers without an exponent (1000000, not
 * 1e+06), infinities as "inf". */
static const char *fmt_num(char *buf, size_t n, double v)
{
    if (v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, n, "%.0f", v);
    else
        snprintf(buf, n, "%.14g", v);
    return buf;
}

static int in_range(const sr_opt_spec *s, double v)
{
    if (v != v)
        return 0;
    if ((s->flags & SR_OPT_OPEN_LO) ? !(v > s->lo) : !(v >= s->lo))
        return 0;
    return (s->flags & SR_OPT_OPEN_HI) ? v < s->hi : v <= s->hi;
}

static const char *int_what(const sr_opt_spec *s, char *buf, size_t n)
{
    /* integers: an open bound is the next integer in */
    double lo = (s->flags & SR_OPT_OPEN_LO) ? floor(s->lo) + 1 : ceil(s->lo);
    double hi = (s->flags & SR_OPT_OPEN_HI) ? ceil(s->hi) - 1 : floor(s->hi);
    const char *orfalse = (s->flags & SR_OPT_FALSE_NONE) ? " or false" : "";
    char a[32], b[32];
    if (isfinite(lo) && isfinite(hi))
        snprintf(buf, n, "an integer in %s..%s%s", fmt_num(a, sizeof a, lo), fmt_num(b, sizeof b, hi), orfalse);
    else if (isfinite(lo))
        snprintf(buf, n, "an integer >= %s%s", fmt_num(a, sizeof a, lo), orfalse);
    else if (isfinite(hi))
        snprintf(buf, n, "an integer <= %s%s", fmt_num(b, sizeof b, hi), orfalse);
    else
        snprintf(buf, n, "an integer%s", orfalse);
    return buf;
}

static const char *num_what(const sr_opt_spec *s, char *buf, size_t n)
{
    int open_lo = (s->flags & SR_OPT_OPEN_LO) != 0, open_hi = (s->flags & SR_OPT_OPEN_HI) != 0;
    int has_lo = isfinite(s->lo), has_hi = isfinite(s->hi);
    const char *fin = (!has_lo && open_lo) || (!has_hi && open_hi) ? "finite " : "";
    char a[32], b[32];
    if (has_lo && has_hi)
        snprintf(buf, n, "a number in %c%s, %s%c", open_lo ? '(' : '[', fmt_num(a, sizeof a, s->lo),
                 fmt_num(b, sizeof b, s->hi), open_hi ? ')' : ']');
    else if (has_lo)
        snprintf(buf, n, "a %snumber %s %s", fin, open_lo ? ">" : ">=", fmt_num(a, sizeof a, s->lo));
    else if (has_hi)
        snprintf(buf, n, "a %snumber %s %s", fin, open_hi ? "<" : "<=", fmt_num(b, sizeof b, s->hi));
    else
        snprintf(buf, n, "a %snumber", fin);
    return buf;
}

const char *sr_opt_spec_what(const sr_opt_spec *s, char *buf, size_t n)
{
    if (s->what) {
        snprintf(buf, n, "%s", s->what);
        return buf;
    }
    switch (s->type) {
    case SR_OPT_INT:
        return int_what(s, buf, n);
    case SR_OPT_NUM:
        return num_what(s, buf, n);
    case SR_OPT_BOOL:
        snprintf(buf, n, "true or false");
        return buf;
    case SR_OPT_STR:
        snprintf(buf, n, "%s", (s->flags & SR_OPT_NONEMPTY) ? "a non-empty string" : "a string");
        return buf;
    case SR_OPT_CHOICE:
        return choice_list(s->choices, buf, n);
    default:
        snprintf(buf, n, "a value");
        return buf;
    }
}

const char *sr_opt_spec_default(const sr_opt_spec *s, char *buf, size_t n)
{
    if (s->def_text)
        snprintf(buf, n, "%s", s->def_text);
    else if (s->type == SR_OPT_INT || s->type == SR_OPT_NUM)
        fmt_num(buf, n, s->def);
    else if (s->type == SR_OPT_BOOL)
        snprintf(buf, n, "%s", s->def != 0 ? "true" : "false");
    else if (s->type == SR_OPT_CHOICE)
        snprintf(buf, n, "\"%s\"", s->choices[(int)s->def]);
    else
        snprintf(buf, n, "none");
    return buf;
}

const sr_opt_spec *sr_opt_spec_find(const sr_opt_spec *specs, const char *name)
{
    for (const sr_opt_spec *s = specs; s->name; s++)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

static int bad_value(const char *op, const sr_opt_spec *s, const char *shown)
{
    char what[256];
    return sr_fail("%s: %s must be %s, got %s", op, s->name, sr_opt_spec_what(s, what, sizeof what), shown);
}

/* The field's size and default, as the types store them. */
static void store_default(const sr_opt_spec *s, void *field)
{
    switch (s->type) {
    case SR_OPT_INT:
        *(int64_t *)field = (int64_t)s->def;
        break;
    case SR_OPT_NUM:
        *(double *)field = s->def;
        break;
    case SR_OPT_BOOL:
        *(int *)field = s->def != 0;
        break;
    case SR_OPT_CHOICE:
        *(int *)field = (int)s->def;
        break;
    case SR_OPT_STR:
        *(const char **)field = NULL;
        break;
    default:
        break;
    }
}

/* A number that is an integer, exactly. */
static int value_integer(const sr_optv *v, int64_t *out)
{
    if (v->kind != SR_OPTV_NUMBER)
        return 0;
    if (v->is_int) {
        *out = v->integer;
        return 1;
    }
    if (v->num != floor(v->num) || !(fabs(v->num) < 9.2e18))
        return 0;
    *out = (int64_t)v->num;
    return 1;
}

static int choice_index(const sr_opt_spec *s, const sr_optv *v)
{
    const char *str = v->kind == SR_OPTV_STRING ? v->str : v->kind == SR_OPTV_NUMBER ? v->shown : NULL;
    for (int i = 0; str && s->choices[i]; i++)
        if (strcmp(str, s->choices[i]) == 0)
            return i;
    return -1;
}

int sr_opt_get(const sr_opts *o, const sr_opt_spec *s, void *field)
{
    sr_optv v;
    memset(&v, 0, sizeof v);
    if (!o->get_value)
        return sr_fail("%s: this options source cannot read declared options", o->op);
    if (o->get_value(o, s->name, &v))
        return -1;
    int caller = (s->flags & SR_OPT_CALLER) != 0;
    if (v.kind == SR_OPTV_ABSENT) {
        if (!caller)
            store_default(s, field);
        return 0;
    }
    int64_t i = 0;
    int k;
    switch (s->type) {
    case SR_OPT_INT:
        if ((s->flags & SR_OPT_FALSE_NONE) && v.kind == SR_OPTV_BOOL && v.num == 0)
            i = 0;
        else if (!value_integer(&v, &i) || !in_range(s, (double)i))
            return bad_value(o->op, s, v.shown);
        if (!caller)
            *(int64_t *)field = i;
        return 0;
    case SR_OPT_NUM:
        if (v.kind != SR_OPTV_NUMBER || !in_range(s, v.num))
            return bad_value(o->op, s, v.shown);
        if (!caller)
            *(double *)field = v.num;
        return 0;
    case SR_OPT_BOOL:
        if (v.kind != SR_OPTV_BOOL && v.kind != SR_OPTV_NUMBER)
            return bad_value(o->op, s, v.shown);
        if (!caller)
            *(int *)field = v.num != 0;
        return 0;
    case SR_OPT_STR:
        if (v.kind != SR_OPTV_STRING || ((s->flags & SR_OPT_NONEMPTY) && !v.str[0]))
            return bad_value(o->op, s, v.shown);
        if (!caller)
            *(const char **)field = v.str;
        return 0;
    case SR_OPT_CHOICE:
        if ((k = choice_index(s, &v)) < 0)
            return bad_value(o->op, s, v.shown);
        if (!caller)
            *(int *)field = k;
        return 0;
    default:
        return 0; /* the caller reads and checks it */
    }
}

typedef struct {
    const sr_opt_spec *specs;
    char unknown[64];
} key_check;

static int key_declared(const char *key, void *ctx)
{
    key_check *c = ctx;
    if (sr_opt_spec_find(c->specs, key))
        return 0;
    snprintf(c->unknown, sizeof c->unknown, "%s", key);
    return 1;
}

int sr_opts_read(const sr_opts *o, const sr_opt_spec *specs, void *dst)
{
    if (o->each_key) {
        key_check c = {specs, ""};
        int r = o->each_key(o, key_declared, &c);
        if (r < 0)
            return -1;
        if (r > 0) {
            /* the names a misspelt key was probably meant to be */
            char names[512] = "";
            size_t k = 0;
            for (const sr_opt_spec *s = specs; s->name && k < sizeof names; s++)
                k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", s == specs ? "" : ", ", s->name);
            return sr_fail("%s: unknown option '%s' (options: %s)", o->op, c.unknown, names);
        }
    }
    for (const sr_opt_spec *s = specs; s->name; s++)
        if (sr_opt_get(o, s, (char *)dst + s->offset))
            return -1;
    return 0;
}

void sr_opts_defaults(const sr_opt_spec *specs, void *dst)
{
    for (const sr_opt_spec *s = specs; s->name; s++)
        if (!(s->flags & SR_OPT_CALLER))
            store_default(s, (char *)dst + s->offset);
}

int sr_opts_check(const char *op, const sr_opt_spec *specs, const void *src)
{
    char shown[64];
    for (const sr_opt_spec *s = specs; s->name; s++) {
        if (s->flags & SR_OPT_CALLER)
            continue;
        const void *f = (const char *)src + s->offset;
        if (s->type == SR_OPT_INT) {
            int64_t i = *(const int64_t *)f;
            if (i != (int64_t)s->def && !in_range(s, (double)i) && !((s->flags & SR_OPT_FALSE_NONE) && i == 0)) {
                snprintf(shown, sizeof shown, "%lld", (long long)i);
                return bad_value(op, s, shown);
            }
        } else if (s->type == SR_OPT_NUM) {
            double d = *(const double *)f;
            if (!(d == s->def) && !in_range(s, d)) {
                snprintf(shown, sizeof shown, "%.14g", d);
                return bad_value(op, s, shown);
            }
        } else if (s->type == SR_OPT_CHOICE) {
            int k = *(const int *)f, n = 0;
            while (s->choices[n])
                n++;
            if (k < 0 || k >= n) {
                snprintf(shown, sizeof shown, "choice %d", k);
                return bad_value(op, s, shown);
            }
        } else if (s->type == SR_OPT_STR) {
            const char *str = *(const char *const *)f;
            if (str && (s->flags & SR_OPT_NONEMPTY) && !str[0])
                return bad_value(op, s, "''");
        }
    }
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

static int kv_value(const sr_opts *o, const char *key, sr_optv *v)
{
    const char *s = kv_find(o, key);
    memset(v, 0, sizeof *v);
    if (!s) {
        v->kind = SR_OPTV_ABSENT;
        return 0;
    }
    char *end;
    if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
        v->kind = SR_OPTV_BOOL;
        v->num = s[0] == 't';
        snprintf(v->shown, sizeof v->shown, "%s", s);
        return 0;
    }
    v->num = strtod(s, &end);
    if (end != s && !*end) {
        v->kind = SR_OPTV_NUMBER;
        errno = 0;
        long long i = strtoll(s, &end, 10);
        v->is_int = !*end && errno == 0;
        v->integer = i;
        snprintf(v->shown, sizeof v->shown, "%s", s);
        return 0;
    }
    v->kind = SR_OPTV_STRING;
    v->str = s;
    snprintf(v->shown, sizeof v->shown, "'%s'", s);
    return 0;
}

static int kv_each_key(const sr_opts *o, int (*fn)(const char *key, void *ctx), void *ctx)
{
    const sr_opts_kv_data *d = o->ud;
    for (const char *const *p = d->kv; p && p[0]; p += 2) {
        int r = fn(p[0], ctx);
        if (r)
            return r;
    }
    return 0;
}

void sr_opts_kv(sr_opts *o, sr_opts_kv_data *d, const char *op, const char *const *kv)
{
    d->kv = kv;
    o->ud = d;
    o->op = op;
    o->get_num = kv_num;
    o->get_str = kv_str;
    o->get_nums = kv_nums;
    o->get_value = kv_value;
    o->each_key = kv_each_key;
}
