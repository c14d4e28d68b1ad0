/* conv_transpose.c - conv_transpose2d, PyTorch's ConvTranspose2d and ONNX's
 * ConvTranspose: weight (in_channels, out_channels/groups, kh, kw), bias
 * (out_channels), stride, padding (top, left, bottom, right), output_padding,
 * dilation, groups.  The output is (H−1)·s − pad_top − pad_bottom +
 * d·(k−1) + output_padding + 1 high (likewise wide).
 *
 * It is the input gradient of the convolution from out_channels to
 * in_channels with the same weight and geometry (whose forward maps the
 * output size back to H: the output_padding rows are those no window of it
 * covers), so the forward is that convolution's backward-data
 * (kernels/conv.h), the backward its forward, and the weight gradient its
 * weight gradient with the roles of input and output gradient swapped.  The
 * map is linear: the JVP is the forward on the whole stack, the bias on the
 * primal rows only. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/conv.h"
#include "nn/layers.h"
#include "tensor/tensor_ops.h"

typedef struct {
    sr_conv conv;       /* out_channels -> in_channels: the map this one transposes */
    int64_t cin, cout, op[2];
    int bias;
    sr_tensor scratch;  /* backward: the throwaway input gradient of the weight-gradient pass */
} ct_impl;

static int ct_out_shape(const ct_impl *c, const sr_tensor *x, int64_t shape[4])
{
    const sr_conv_cfg *g = &c->conv.cfg;
    if (x->ndim != 4 || x->shape[1] != c->cin)
        return sr_fail("conv_transpose2d: input %s must be (N,%lld,H,W)", SR_SHAPE(x), (long long)c->cin);
    int64_t ho = (x->shape[2] - 1) * g->sh - g->ph - g->pb + g->dh * (g->kh - 1) + c->op[0] + 1;
    int64_t wo = (x->shape[3] - 1) * g->sw - g->pw - g->pr + g->dw * (g->kw - 1) + c->op[1] + 1;
    if (ho < 1 || wo < 1 || x->shape[2] < 1 || x->shape[3] < 1)
        return sr_fail("conv_transpose2d: input %s gives an output of %lldx%lld", SR_SHAPE(x), (long long)ho,
                       (long long)wo);
    shape[0] = x->shape[0], shape[1] = c->cout, shape[2] = ho, shape[3] = wo;
    return 0;
}

/* bias on the first rows images of y */
static void ct_bias(sr_tensor *y, const sr_tensor *b, int64_t rows)
{
    int64_t C = y->shape[1], P = y->shape[2] * y->shape[3];
    for (int64_t n = 0; n < rows; n++)
        for (int64_t ch = 0; ch < C; ch++) {
            double bv = sr_get_flat(b, ch);
            if (y->dtype == SR_F64) {
                double *p = sr_f64(y) + (n * C + ch) * P;
                for (int64_t q = 0; q < P; q++)
                    p[q] += bv;
            } else {
                float *p = sr_f32(y) + (n * C + ch) * P;
                for (int64_t q = 0; q < P; q++)
                    p[q] += (float)bv;
            }
        }
}

static int ct_run(sr_module *m, const sr_tensor *x, int64_t bias_rows, sr_run *run)
{
    ct_impl *c = m->impl;
    int64_t shape[4];
    if (ct_out_shape(c, x, shape) || sr_module_output(m, run, x->dtype, 4, shape))
        return -1;
    if (run->save)
        sr_tensor_share(&m->saved, x);
    /* the output as the convolution's input gradient (its input, whose
     * shape the kernel takes, is not read without a weight gradient) */
    if (sr_conv_backward(&c->conv, &m->out, NULL, NULL, x, &m->out, &m->params[0].value, run->pool))
        return sr_fail_context("conv_transpose2d");
    if (c->bias)
        ct_bias(&m->out, &m->params[1].value, bias_rows);
    return 0;
}

static int ct_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    return ct_run(m, x, x->ndim > 0 ? x->shape[0] : 0, run);
}

static int ct_jvp(sr_module *m, const sr_tensor *xv, sr_run *run) { return ct_run(m, xv, run->n, run); }

static int ct_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    ct_impl *c = m->impl;
    const sr_tensor *x = &m->saved;
    int64_t shape[4];
    if (!x->storage)
        return sr_fail("conv_transpose2d backward: forward was not run with save");
    if (ct_out_shape(c, x, shape) || sr_module_grad_input_like(m, run, x))
        return -1;
    if (gy->ndim != 4 || memcmp(gy->shape, shape, sizeof shape))
        return sr_fail("conv_transpose2d backward: gradient %s, the output was (%lld,%lld,%lld,%lld)", SR_SHAPE(gy),
                       (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)shape[3]);
    if (sr_conv_forward(&c->conv, &m->gin, gy, &m->params[0].value, NULL, 0, NULL, run->pool))
        return sr_fail_context("conv_transpose2d backward");
    if (!run->param_grads)
        return 0;
    void *gw = sr_param_grad(m, &m->params[0]);
    if (!gw)
        return -1;
    /* the convolution's weight gradient: its input is our output gradient,
     * its output gradient our input */
    if (sr_tensor_ensure(&c->scratch, gy->dtype, 4, gy->shape) ||
        sr_conv_backward(&c->conv, &c->scratch, gw, NULL, x, gy, &m->params[0].value, run->pool))
        return sr_fail_context("conv_transpose2d backward");
    if (c->bias) {
        void *gb = sr_param_grad(m, &m->params[1]);
        if (!gb)
            return -1;
        int64_t C = shape[1], P = shape[2] * shape[3];
        for (int64_t ch = 0; ch < C; ch++) {
            double s = 0;
            for (int64_t n = 0; n < shape[0]; n++)
                for (int64_t q = 0; q < P; q++)
                    s += sr_get_flat(gy, (n * C + ch) * P + q);
            if (gy->dtype == SR_F64)
                ((double *)gb)[ch] += s;
            else
                ((float *)gb)[ch] += (float)s;
        }
    }
    return 0;
}

static void ct_reset(sr_module *m, sr_rng *rng)
{
    ct_impl *c = m->impl;
    const sr_conv_cfg *g = &c->conv.cfg;
    /* PyTorch's ConvTranspose2d default: U(±1/√fan_in), fan_in of its weight
     * (in, out/groups, kh, kw) being out/groups·kh·kw */
    double bound = 1.0 / sqrt((double)(c->cout / g->groups * g->kh * g->kw));
    sr_tensor_fill_uniform(&m->params[0].value, rng, -bound, bound);
    if (c->bias)
        sr_tensor_fill_uniform(&m->params[1].value, rng, -bound, bound);
}

static void ct_free(sr_module *m)
{
    ct_impl *c = m->impl;
    sr_conv_free(&c->conv);
    sr_tensor_free(&c->scratch);
}

static void ct_describe(const sr_module *m, char *buf, size_t n)
{
    const ct_impl *c = m->impl;
    const sr_conv_cfg *g = &c->conv.cfg;
    snprintf(buf, n, "%lld -> %lld, k%lldx%lld s%lld,%lld p%lld,%lld,%lld,%lld op%lld,%lld d%lld,%lld g%lld", (long long)c->cin,
             (long long)c->cout, (long long)g->kh, (long long)g->kw, (long long)g->sh, (long long)g->sw,
             (long long)g->ph, (long long)g->pw, (long long)g->pb, (long long)g->pr, (long long)c->op[0],
             (long long)c->op[1], (long long)g->dh, (long long)g->dw, (long long)g->groups);
}

static const sr_module_ops ct_ops = {
    .kind = "conv_transpose2d", .forward = ct_forward, .jvp = ct_jvp, .backward = ct_backward, .reset = ct_reset,
    .free_impl = ct_free, .describe = ct_describe, .is_affine = sr_module_affine_always, .flags = SR_MOD_PRODUCTS,
};

sr_module *sr_conv_transpose2d_create(const sr_opts *o)
{
    ct_impl c;
    memset(&c, 0, sizeof c);
    sr_conv_cfg g;
    memset(&g, 0, sizeof g);
    int64_t k[2], s[2], d[2], groups;
    double pv[4];
    int np = 0;
    if (sr_opt_req_int(o, "in_channels", 1, &c.cin) || sr_opt_req_int(o, "out_channels", 1, &c.cout) ||
        sr_opt_pair(o, "kernel_size", 0, k) || sr_opt_pair(o, "stride", 1, s) || sr_opt_pair(o, "dilation", 1, d) ||
        sr_opt_pair(o, "output_padding", 0, c.op) || sr_opt_int_min(o, "groups", 1, 1, &groups) ||
        sr_opt_bool(o, "bias", 1, &c.bias))
        return NULL;
    int rp = o->get_nums(o, "padding", pv, 4, &np);
    if (rp < 0)
        return NULL;
    if (!rp)
        np = 1, pv[0] = 0;
    if (np != 1 && np != 2 && np != 4) {
        sr_fail("%s: option padding takes 1, 2 ({h, w}) or 4 ({top, left, bottom, right}) values, got %d", o->op, np);
        return NULL;
    }
    int64_t p[4];
    for (int i = 0; i < 4; i++) {
        double v = pv[np == 1 ? 0 : np == 2 ? i % 2 : i];
        if (v != floor(v) || v < 0 || v > 0x1p40) {
            sr_fail("%s: padding entries must be integers >= 0 (got %g)", o->op, v);
            return NULL;
        }
        p[i] = (int64_t)v;
    }
    for (int a = 0; a < 2; a++)
        if (k[a] < 1 || s[a] < 1 || d[a] < 1 || c.op[a] < 0 || (c.op[a] >= s[a] && c.op[a] >= d[a])) {
            sr_fail("%s: kernel_size, stride, dilation must be >= 1 and output_padding below the stride or the "
                    "dilation (got k%lld s%lld d%lld output_padding %lld)", o->op, (long long)k[a], (long long)s[a],
                    (long long)d[a], (long long)c.op[a]);
            return NULL;
        }
    if (c.cin % groups || c.cout % groups) {
        sr_fail("%s: in_channels %lld and out_channels %lld must be multiples of groups %lld", o->op, (long long)c.cin,
                (long long)c.cout, (long long)groups);
        return NULL;
    }
    g.cin = c.cout, g.cout = c.cin, g.kh = k[0], g.kw = k[1], g.sh = s[0], g.sw = s[1], g.dh = d[0], g.dw = d[1];
    g.ph = p[0], g.pw = p[1], g.pb = p[2], g.pr = p[3], g.groups = groups, g.bias = 0;
    g.gemm_cols = SR_CONV_COLS, g.max_workspace = SR_CONV_COL_BYTES;
    sr_module *m = sr_module_new(&ct_ops, sizeof c);
    if (!m)
        return NULL;
    ct_impl *ci = m->impl;
    *ci = c;
    int64_t ws[4] = {c.cin, c.cout / groups, k[0], k[1]};
    if (sr_conv_init(&ci->conv, &g) || !sr_module_add_param(m, "weight", 4, ws, 1) ||
        (c.bias && !sr_module_add_param(m, "bias", 1, &c.cout, 1))) {
        sr_module_release(m);
        return NULL;
    }
    return m;
}
