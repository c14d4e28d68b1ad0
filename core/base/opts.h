/* opts.h - named options for constructors, independent of Lua.
 *
 * Layer constructors read their configuration through this small interface
 * so the core stays Lua-free; lua_nn.c implements it over a Lua table and C
 * tests over a list of key/value strings.  Every key a constructor reads is
 * marked used, so the caller can reject unknown (misspelt) options.
 */
#ifndef SR_OPTS_H
#define SR_OPTS_H

#include <stdint.h>

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

/* Options from a NULL-terminated list of "key", "value" strings, for C tests:
 * sr_opts_kv(&o, &kv, "conv2d", (const char *[]){"in_channels","3",NULL}). */
typedef struct sr_opts_kv_data {
    const char *const *kv;
} sr_opts_kv_data;
void sr_opts_kv(sr_opts *o, sr_opts_kv_data *d, const char *op, const char *const *kv);

#endif
