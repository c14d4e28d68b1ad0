/* opts.h - named options for constructors and engines, independent of Lua.
 *
 * Two ways to read options, over one seam (sr_opts):
 *  - Layer constructors pull keys one at a time through the typed getters
 *    (sr_opt_int, sr_opt_pair, ...); every key they read is marked used, so
 *    the caller can reject unknown (misspelt) options.
 *  - Engines declare their options once, as a table of sr_opt_spec (name,
 *    type, range, default, help, where in the options struct), and read them
 *    all with sr_opts_read: one place checks types, ranges and NaN, with one
 *    message format, "OP: NAME must be WHAT, got VALUE", and the same table
 *    gives the help text (sr_opt_spec_what) and validates a struct filled in
 *    C (sr_opts_check).
 * The core stays Lua-free: lua/aux.c implements the seam over a Lua table,
 * sr_opts_kv over key/value strings (C tests).
 */
#ifndef SR_OPTS_H
#define SR_OPTS_H

#include <stddef.h>
#include <stdint.h>

/* A raw value as its source holds it (for the declared-options reader). */
typedef enum { SR_OPTV_ABSENT, SR_OPTV_NUMBER, SR_OPTV_BOOL, SR_OPTV_STRING, SR_OPTV_OTHER } sr_optv_kind;
typedef struct sr_optv {
    sr_optv_kind kind;
    double num;       /* NUMBER; BOOL as 0/1 */
    int is_int;       /* NUMBER with an integer value, exactly in `integer` (all 64 bits of a Lua integer) */
    int64_t integer;
    const char *str;  /* STRING, borrowed from the source */
    char shown[64];   /* the value as written, for messages: 3, 0.5, 'abc', true, table */
} sr_optv;

typedef struct sr_opts sr_opts;
struct sr_opts {
    void *ud;
    const char *op; /* for messages: "conv2d" */
    /* Each returns 1 and sets *v when present, 0 when absent, -1 (error set)
     * when present with the wrong type. */
    int (*get_num)(const sr_opts *o, const char *key, double *v);
    int (*get_str)(const sr_opts *o, const char *key, const char **v);
    /* A number or a list of numbers (kernel_size=3 or {3,5}); *n = count. */
    int (*get_nums)(const sr_opts *o, const char *key, double *v, int max, int *n);
    /* For sr_opts_read: the raw value of key (kind ABSENT when absent);
     * 0, or -1 with the error set. */
    int (*get_value)(const sr_opts *o, const char *key, sr_optv *v);
    /* For sr_opts_read's unknown-key check (NULL: no check): fn on every
     * key present; stops at and returns the first nonzero fn result, -1
     * with the error set for a key that is not a name. */
    int (*each_key)(const sr_opts *o, int (*fn)(const char *key, void *ctx), void *ctx);
};

/* Typed getters with defaults; return 0 or -1 (error set, naming o->op and
 * the key). */
int sr_opt_int(const sr_opts *o, const char *key, int64_t def, int64_t *out);
int sr_opt_int_min(const sr_opts *o, const char *key, int64_t def, int64_t min, int64_t *out);
int sr_opt_num(const sr_opts *o, const char *key, double def, double *out);
int sr_opt_bool(const sr_opts *o, const char *key, int def, int *out);
int sr_opt_str(const sr_opts *o, const char *key, const char *def, const char **out);
/* One of a NULL-terminated list of names (default: the first); *out is
 * its index.  Anything else is an error listing the names. */
int sr_opt_choice(const sr_opts *o, const char *key, const char *const *names, int *out);
/* One int applying to both, or a pair {h, w}. */
int sr_opt_pair(const sr_opts *o, const char *key, int64_t def, int64_t out[2]);
/* Required integer option (error if absent). */
int sr_opt_req_int(const sr_opts *o, const char *key, int64_t min, int64_t *out);

/* --- declared options ----------------------------------------------------- */

typedef enum {
    SR_OPT_INT,    /* int64_t field (a uint64_t one takes the same bits) */
    SR_OPT_NUM,    /* double field; NaN is never accepted */
    SR_OPT_BOOL,   /* int field, 0 or 1; a number reads as != 0 */
    SR_OPT_STR,    /* const char * field, borrowed from the source */
    SR_OPT_CHOICE, /* int field: the index in choices; a number counts as its string form (norm=2) */
    SR_OPT_OTHER,  /* only the caller can read it (a tensor, a list): declared for help and
                    * the unknown-key check; needs SR_OPT_CALLER */
} sr_opt_type;

enum {
    SR_OPT_OPEN_LO = 1,    /* lo itself is out of range */
    SR_OPT_OPEN_HI = 2,    /* hi itself is out of range; with hi = INFINITY: finite */
    SR_OPT_CALLER = 4,     /* checked when present, never stored: the caller reads it */
    SR_OPT_FALSE_NONE = 8, /* INT: false reads as 0 ("none"), like the default not range-checked */
    SR_OPT_NONEMPTY = 16,  /* STR: "" is out of range */
};

typedef struct sr_opt_spec {
    const char *name; /* NULL ends a table */
    sr_opt_type type;
    double lo, hi;    /* INT, NUM: the range, inclusive unless flags open a bound; -INFINITY
                       * and INFINITY for none */
    unsigned flags;
    /* INT, NUM, BOOL; CHOICE: its index.  Written when the option is
     * absent and never range-checked, so a default outside the range can
     * mean "auto" or "off" (batch 0, target_ci 0) without the user being
     * able to ask for it by value. */
    double def;
    const char *const *choices; /* CHOICE: NULL-terminated */
    size_t offset;              /* of the field in the options struct */
    const char *what;           /* replaces the generated description (NULL: generated) */
    const char *def_text;       /* replaces the default's text ("auto", "off"; NULL: generated) */
    const char *help;
} sr_opt_spec;

/* Read every declared option from o into dst (a struct, fields at the
 * specs' offsets; absent options get their defaults), checking type, range
 * and NaN; with o->each_key, a key no spec declares is an error too.
 * Returns 0, or -1 with "OP: NAME must be WHAT, got VALUE" (or "OP: unknown
 * option 'KEY' (options: ...)"). */
int sr_opts_read(const sr_opts *o, const sr_opt_spec *specs, void *dst);
/* One option into *field (no unknown-key check). */
int sr_opt_get(const sr_opts *o, const sr_opt_spec *spec, void *field);
/* Every declared field of dst set to its default (CALLER options aside). */
void sr_opts_defaults(const sr_opt_spec *specs, void *dst);
/* Check a struct filled in C against the specs' ranges, with sr_opts_read's
 * messages under op; a field equal to its default passes (auto/off). */
int sr_opts_check(const char *op, const sr_opt_spec *specs, const void *src);

/* For help text: what the option takes ("an integer in 1..1000000", "a
 * number in (0, 1)", "\"l2\" or \"linf\"") and its default ("256", "true",
 * def_text, or "none" for STR and OTHER). */
const char *sr_opt_spec_what(const sr_opt_spec *s, char *buf, size_t n);
const char *sr_opt_spec_default(const sr_opt_spec *s, char *buf, size_t n);
/* The spec named name in specs, or NULL. */
const sr_opt_spec *sr_opt_spec_find(const sr_opt_spec *specs, const char *name);

/* Options from a NULL-terminated list of "key", "value" strings, for C tests:
 * sr_opts_kv(&o, &kv, "conv2d", (const char *[]){"in_channels","3",NULL}).
 * "true"/"false" read as booleans, numerals as numbers, anything else as a
 * string. */
typedef struct sr_opts_kv_data {
    const char *const *kv;
} sr_opts_kv_data;
void sr_opts_kv(sr_opts *o, sr_opts_kv_data *d, const char *op, const char *const *kv);

#endif
