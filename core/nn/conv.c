/* conv.c - the conv2d layer: options, parameters (weight (O, C/groups,
 * kh, kw), bias (O)), PyTorch's default init, and forward, stacked JVP and
 * backward through the convolution kernel (kernels/conv.h).  The JVP is the
 * same linear map over the stacked [x; v] batch, the bias on the primal
 * rows only.  In a sequential's inference fusion the layer writes its
 * output through the folded map of the layers after it (conv_maps). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/conv.h"
#include "nn/layers.h"
#include "tensor/tensor_ops.h"

static void pair_str(char *buf, size_t n, int64_t a, int64_t b)
{
    if (a == b)
        snprintf(buf, n, "%lld", (long long)a);
    else
        snprintf(buf, n, "%lldx%lld", (long long)a, (long long)b);
}

/* Forward (bias_rows = all rows) or stacked JVP (bias on the primal rows,
 * run->n of them).  ep (may be NULL) is applied to the output as it is
 * written, the tangent rows getting its JVP. */
static int conv_run(sr_module *m, const sr_tensor *x, int64_t bias_rows, const sr_epilogue *ep, sr_run *run)
{
    sr_conv *c = m->impl;
    int64_t shape[4];
    if (sr_conv_out_shape(c, x, shape) || sr_module_output(m, run, x->dtype, 4, shape))
        return -1;
    if (run->save)
        sr_tensor_share(&m->saved, x);
    const sr_tensor *w = &m->params[0].value, *b = c->cfg.bias ? &m->params[1].value : NULL;
    if (!run->bf16 || x->dtype != SR_F32)
        return sr_conv_forward(c, &m->out, x, w, b, bias_rows, ep, run->pool);
    /* bf16 emulation (sr_run.bf16): both factors rounded, the bias and the
     * accumulation float32 */
    sr_tensor xr = SR_TENSOR_INIT, wr = SR_TENSOR_INIT;
    int rc = sr_bf16_round_tensor(&xr, x) || sr_bf16_round_tensor(&wr, w) ||
             sr_conv_forward(c, &m->out, &xr, &wr, b, bias_rows, ep, run->pool);
    sr_tensor_free(&xr);
    sr_tensor_free(&wr);
    return rc ? -1 : 0;
}

static int conv_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    return conv_run(m, x, x->ndim > 0 ? x->shape[0] : 0, NULL, run);
}

static int conv_jvp(sr_module *m, const sr_tensor *xv, sr_run *run)
{
    /* d(W⋆x + b) = W⋆dx: bias on the primal images only. */
    return conv_run(m, xv, run->n, NULL, run);
}

static int conv_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    sr_conv *c = m->impl;
    const sr_tensor *x = &m->saved;
    int64_t shape[4];
    if (!x->storage)
        return sr_fail("conv2d backward: forward was not run with save");
    if (sr_conv_out_shape(c, x, shape) || sr_module_grad_input_like(m, run, x))
        return -1;
    sr_param *w = &m->params[0], *b = c->cfg.bias ? &m->params[1] : NULL;
    void *gw = NULL, *gb = NULL;
    if (run->param_grads && (!(gw = sr_param_grad(m, w)) || (b && !(gb = sr_param_grad(m, b)))))
        return -1;
    return sr_conv_backward(c, &m->gin, gw, gb, gy, x, &w->value, run->pool);
}

static void conv_reset(sr_module *m, sr_rng *rng)
{
    sr_conv *im = m->impl;
    const sr_conv_cfg *c = &im->cfg;
    /* PyTorch's default: kaiming_uniform(a=√5) == U(±1/√fan_in), same for bias. */
    double bound = 1.0 / sqrt((double)(c->cin / c->groups * c->kh * c->kw));
    sr_tensor_fill_uniform(&m->params[0].value, rng, -bound, bound);
    if (c->bias)
        sr_tensor_fill_uniform(&m->params[1].value, rng, -bound, bound);
}

static void conv_free_impl(sr_module *m) { sr_conv_free(m->impl); }

static void conv_describe(const sr_module *m, char *buf, size_t n)
{
    const sr_conv_cfg *c = &((const sr_conv *)m->impl)->cfg;
    char k[48], s[48], p[48], d[48];
    pair_str(k, sizeof k, c->kh, c->kw);
    pair_str(s, sizeof s, c->sh, c->sw);
    if (c->pb != c->ph || c->pr != c->pw)
        snprintf(p, sizeof p, "%lld,%lld,%lld,%lld", (long long)c->ph, (long long)c->pw, (long long)c->pb,
                 (long long)c->pr);
    else
        pair_str(p, sizeof p, c->ph, c->pw);
    pair_str(d, sizeof d, c->dh, c->dw);
    int len = snprintf(buf, n, "%lld -> %lld, k%s s%s p%s", (long long)c->cin, (long long)c->cout, k, s, p);
    if (len >= 0 && (size_t)len < n && (c->dh != 1 || c->dw != 1))
        len += snprintf(buf + len, n - (size_t)len, " d%s", d);
    if (len >= 0 && (size_t)len < n && c->groups != 1)
        len += snprintf(buf + len, n - (size_t)len, " groups %lld", (long long)c->groups);
    if (len >= 0 && (size_t)len < n && !c->bias)
        snprintf(buf + len, n - (size_t)len, ", no bias");
}

/* Fusion: the convolution writes its output through a folded per-channel
 * map for its own channel count, or just a ReLU (and a residual's sum in a
 * forward). */
static int conv_maps(const sr_module *m, const sr_epilogue *e, int jvp)
{
    const sr_tensor *w = &m->params[0].value;
    return w->ndim == 4 && (w->shape[0] == e->C || (!e->C && (e->relu || e->add))) && !(e->add && jvp);
}

static int conv_mapped(sr_module *m, const sr_tensor *x, int jvp, const sr_epilogue *e, sr_run *run)
{
    if (!jvp)
        return conv_run(m, x, x->ndim > 0 ? x->shape[0] : 0, e, run);
    /* the map's ReLU takes the pass's rule at 0 (kernels/kink.h) */
    sr_epilogue with = *e;
    with.directional = run->directional;
    with.kinks = run->kinks;
    return conv_run(m, x, run->n, &with, run);
}

static const sr_module_ops conv_ops = {
    .kind = "conv2d", .forward = conv_forward, .jvp = conv_jvp, .backward = conv_backward, .reset = conv_reset,
    .free_impl = conv_free_impl, .describe = conv_describe, .is_affine = sr_module_affine_always,
    .maps = conv_maps, .run_mapped = conv_mapped, .flags = SR_MOD_PRODUCTS | SR_MOD_BF16,
};

static int check_pair(const char *key, const int64_t v[2], int64_t min)
{
    if (v[0] < min || v[1] < min)
        return sr_fail("conv2d: option %s must be >= %lld (got %lldx%lld)", key, (long long)min,
                       (long long)v[0], (long long)v[1]);
    return 0;
}

/* padding = p (all sides), {ph, pw} (each axis, both sides) or {top, left,
 * bottom, right} (ONNX's order): p gets top, left, bottom, right. */
static int conv_padding(const sr_opts *o, int64_t p[4])
{
    double v[4];
    int n = 0, r = o->get_nums(o, "padding", v, 4, &n);
    if (r < 0)
        return -1;
    if (r == 0)
        n = 1, v[0] = 0;
    if (n != 1 && n != 2 && n != 4)
        return sr_fail("conv2d: option padding takes 1, 2 ({h, w}) or 4 ({top, left, bottom, right}) values, got %d",
                       n);
    /* Only what an int64 holds here; the kernel checks the extents. */
    for (int i = 0; i < n; i++)
        if (v[i] != floor(v[i]) || v[i] < 0 || v[i] > 0x1p62)
            return sr_fail("conv2d: option padding must be >= 0 integers (entry %d is %g)", i + 1, v[i]);
    for (int i = 0; i < 4; i++)
        p[i] = (int64_t)v[n == 1 ? 0 : n == 2 ? i % 2 : i];
    return 0;
}

sr_module *sr_conv2d_create(const sr_opts *o)
{
    sr_conv_cfg c;
    int64_t k[2], s[2], p[4], d[2];
    if (sr_opt_req_int(o, "in_channels", 1, &c.cin) || sr_opt_req_int(o, "out_channels", 1, &c.cout))
        return NULL;
    double kv[2];
    int nk, r = o->get_nums(o, "kernel_size", kv, 2, &nk);
    if (r < 0)
        return NULL;
    if (r == 0) {
        sr_fail("%s: option kernel_size is required", o->op);
        return NULL;
    }
    if (sr_opt_pair(o, "kernel_size", 0, k) || check_pair("kernel_size", k, 1) ||
        sr_opt_pair(o, "stride", 1, s) || check_pair("stride", s, 1) ||
        conv_padding(o, p) ||
        sr_opt_pair(o, "dilation", 1, d) || check_pair("dilation", d, 1) ||
        sr_opt_int_min(o, "groups", 1, 1, &c.groups) || sr_opt_bool(o, "bias", 1, &c.bias) ||
        sr_opt_int_min(o, "gemm_cols", SR_CONV_COLS, 1, &c.gemm_cols) ||
        sr_opt_int_min(o, "max_workspace", SR_CONV_COL_BYTES, 1, &c.max_workspace) ||
        sr_opt_choice(o, "algo", (const char *[]){"auto", "im2col", "taps", "winograd", NULL}, &c.algo) ||
        sr_opt_choice(o, "split", (const char *[]){"auto", "images", "gemm", NULL}, &c.split))
        return NULL;
    c.kh = k[0], c.kw = k[1], c.sh = s[0], c.sw = s[1], c.ph = p[0], c.pw = p[1], c.dh = d[0], c.dw = d[1];
    c.pb = p[2], c.pr = p[3];
    sr_module *m = sr_module_new(&conv_ops, sizeof(sr_conv));
    if (!m)
        return NULL;
    int64_t ws[4] = {c.cout, c.cin / c.groups, c.kh, c.kw};
    if (sr_conv_init(m->impl, &c) || !sr_module_add_param(m, "weight", 4, ws, 1) ||
        (c.bias && !sr_module_add_param(m, "bias", 1, &c.cout, 1))) {
        sr_module_release(m);
        return NULL;
    }
    return m;
}

