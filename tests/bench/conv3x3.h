/* conv3x3.h - the benchmarks' 3x3 convolution (padding 1, no bias, seeded
 * weights), shared by bench_conv.c and bench_wino.c. */
#ifndef SR_BENCH_CONV3X3_H
#define SR_BENCH_CONV3X3_H

#include <stdio.h>

#include "nn/layers.h"

/* extra: more option pairs ({"algo", "winograd", ...}), NULL-terminated; at most 8 pairs. */
static inline sr_module *bench_conv3x3(int64_t cin, int64_t cout, int64_t stride, const char *const *extra)
{
    char ci[24], co[24], st[24];
    snprintf(ci, sizeof ci, "%lld", (long long)cin);
    snprintf(co, sizeof co, "%lld", (long long)cout);
    snprintf(st, sizeof st, "%lld", (long long)stride);
    const char *kv[32] = {"in_channels", ci, "out_channels", co, "kernel_size", "3",
                          "stride",      st, "padding",      "1", "bias",       "false"};
    int n = 12;
    for (int i = 0; extra && extra[i] && n < 30; i += 2)
        kv[n++] = extra[i], kv[n++] = extra[i + 1];
    sr_opts o;
    sr_opts_kv_data d;
    sr_opts_kv(&o, &d, "conv2d", kv);
    sr_module *m = sr_conv2d_create(&o);
    if (m) {
        sr_rng r;
        sr_rng_seed(&r, 1);
        sr_module_reset(m, &r);
    }
    return m;
}

#endif
