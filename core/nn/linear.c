/* linear.c - fully connected layer over the last dimension:
 * y = x Wᵀ + b, x (..., in) -> y (..., out); W (out, in), b (out).
 *
 * The JVP runs primal and tangent rows through one GEMM and adds the bias to
 * the primal rows only, since d(xWᵀ+b) = dx Wᵀ. */
#ifdef SR_REAL

/* Y (rows, out) = X (rows, in) · Wᵀ (+ b on the first bias_rows rows).
 * The bias rows are written first and the GEMM adds onto them (beta = 1):
 * with beta = 0 OpenBLAS zeroes Y in a pass of its own, and a bias pass
 * after the GEMM reads and writes Y once more, on one thread (together 6%
 * of a ConvNeXt-T forward, whose MLPs are 4·dim wide). */
static void SR_FN(linear_fwd)(real *y, const real *x, const real *w, const real *b, int64_t rows,
                              int64_t bias_rows, int64_t in, int64_t out)
{
    if (rows == 0)
        return;
    int64_t nb = b ? (bias_rows < rows ? bias_rows : rows) : 0;
    for (int64_t r = 0; r < nb; r++)
        memcpy(y + r * out, b, (size_t)out * sizeof(real));
    if (nb > 0)
        SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nb, (int)out, (int)in, 1, x, (int)in, w,
                (int)in, 1, y, (int)out);
    if (nb < rows)
        SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(rows - nb), (int)out, (int)in, 1,
                x + nb * in, (int)in, w, (int)in, 0, y + nb * out, (int)out);
}

/* gx = gy · W; gW += gyᵀ · x; gb += Σ_rows gy. */
static void SR_FN(linear_bwd)(real *gx, real *gw, real *gb, const real *gy, const real *x,
                              const real *w, int64_t rows, int64_t in, int64_t out)
{
    SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)in, (int)out, 1, gy, (int)out, w,
            (int)in, 0, gx, (int)in);
    if (gw)
        SR_FN(sr_gemm_blas)(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in, (int)rows, 1, gy, (int)out, x,
                (int)in, 1, gw, (int)in);
    if (gb)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t o = 0; o < out; o++)
                gb[o] += gy[r * out + o];
}

/* Naive reference for tests: three loops, accumulating in double. */
static void SR_FN(linear_naive)(real *y, const real *x, const real *w, const real *b, int64_t rows,
                                int64_t in, int64_t out)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) {
            double s = b ? b[o] : 0;
            for (int64_t i = 0; i < in; i++)
                s += (double)x[r * in + i] * w[o * in + i];
            y[r * out + o] = (real)s;
        }
}

#else /* generic part */

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/gemm.h"
#include "nn/layers.h"
#include "tensor/tensor_ops.h"

#define SR_GENERIC_FILE "nn/linear.c"
#include "base/generic.h"

typedef struct {
    int64_t in, out;
    int bias;
} linear_cfg;

static int linear_shapes(sr_module *m, const sr_tensor *x, int64_t *rows, sr_tensor *yshape)
{
    linear_cfg *c = m->impl;
    if (x->ndim < 1 || x->shape[x->ndim - 1] != c->in)
        return sr_fail("linear: input %s must end in in_features=%lld", SR_SHAPE(x), (long long)c->in);
    *rows = sr_numel(x) / c->in;
    *yshape = *x;
    yshape->shape[x->ndim - 1] = c->out;
    return 0;
}

int sr_linear_apply(const sr_tensor *x, const sr_tensor *w, const sr_tensor *b, sr_tensor *y,
                    int64_t bias_rows, int naive)
{
    int64_t in = w->shape[1], out = w->shape[0], rows = sr_numel(x) / in;
    if (naive)
        SR_DISPATCH(x->dtype, linear_naive, sr_data(y), sr_data(x), sr_data(w), b ? sr_data(b) : NULL,
                    rows, in, out);
    else
        SR_DISPATCH(x->dtype, linear_fwd, sr_data(y), sr_data(x), sr_data(w), b ? sr_data(b) : NULL,
                    rows, bias_rows, in, out);
    return 0;
}

static int linear_run(sr_module *m, const sr_tensor *x, int64_t primal_rows, sr_run *run)
{
    linear_cfg *c = m->impl;
    int64_t rows;
    sr_tensor ys;
    if (linear_shapes(m, x, &rows, &ys))
        return -1;
    if (sr_module_output(m, run, x->dtype, ys.ndim, ys.shape))
        return -1;
    if (run->save)
        sr_tensor_share(&m->saved, x);
    const sr_tensor *w = &m->params[0].value, *b = c->bias ? &m->params[1].value : NULL;
    if (!run->bf16 || x->dtype != SR_F32)
        return sr_linear_apply(x, w, b, &m->out, primal_rows, 0);
    /* bf16 emulation (sr_run.bf16), as conv2d's */
    sr_tensor xr = SR_TENSOR_INIT, wr = SR_TENSOR_INIT;
    int rc = sr_bf16_round_tensor(&xr, x) || sr_bf16_round_tensor(&wr, w) ||
             sr_linear_apply(&xr, &wr, b, &m->out, primal_rows, 0);
    sr_tensor_free(&xr);
    sr_tensor_free(&wr);
    return rc ? -1 : 0;
}

static int linear_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    linear_cfg *c = m->impl;
    return linear_run(m, x, sr_numel(x) / c->in, run);
}

static int linear_jvp(sr_module *m, const sr_tensor *xv, sr_run *run)
{
    linear_cfg *c = m->impl;
    if (xv->ndim < 2)
        return sr_fail("linear jvp: input %s needs a batch dimension", SR_SHAPE(xv));
    /* Bias on the primal block only: its rows are the first n of dim 0. */
    return linear_run(m, xv, run->n * (sr_rowsize(xv) / c->in), run);
}

void sr_linear_backward(sr_dtype dt, void *gx, void *gw, void *gb, const void *gy, const void *x, const void *w,
                        int64_t rows, int64_t in, int64_t out)
{
    SR_DISPATCH(dt, linear_bwd, gx, gw, gb, gy, x, w, rows, in, out);
}

static int linear_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    linear_cfg *c = m->impl;
    const sr_tensor *x = &m->saved;
    if (!x->storage)
        return sr_fail("linear backward: forward was not run with save");
    if (sr_module_grad_input_like(m, run, x))
        return -1;
    sr_param *w = &m->params[0], *b = c->bias ? &m->params[1] : NULL;
    void *gw = NULL, *gb = NULL;
    if (run->param_grads && (!(gw = sr_param_grad(m, w)) || (b && !(gb = sr_param_grad(m, b)))))
        return -1;
    sr_linear_backward(gy->dtype, sr_data(&m->gin), gw, gb, sr_data(gy), sr_data(x), sr_data(&w->value),
                       sr_numel(x) / c->in, c->in, c->out);
    return 0;
}

static void linear_reset(sr_module *m, sr_rng *rng)
{
    linear_cfg *c = m->impl;
    /* PyTorch's default: kaiming_uniform(a=√5) == U(±1/√fan_in), same for bias. */
    double bound = 1.0 / sqrt((double)c->in);
    sr_tensor_fill_uniform(&m->params[0].value, rng, -bound, bound);
    if (c->bias)
        sr_tensor_fill_uniform(&m->params[1].value, rng, -bound, bound);
}

static void linear_describe(const sr_module *m, char *buf, size_t n)
{
    const linear_cfg *c = m->impl;
    snprintf(buf, n, "%lld -> %lld%s", (long long)c->in, (long long)c->out, c->bias ? "" : ", no bias");
}

static const sr_module_ops linear_ops = {
    .kind = "linear", .forward = linear_forward, .jvp = linear_jvp, .backward = linear_backward,
    .reset = linear_reset, .describe = linear_describe, .is_affine = sr_module_affine_always,
    .flags = SR_MOD_PRODUCTS | SR_MOD_BF16,
};

sr_module *sr_linear_create(const sr_opts *o)
{
    linear_cfg cfg;
    const char *wname, *bname;
    if (sr_opt_req_int(o, "in_features", 1, &cfg.in) || sr_opt_req_int(o, "out_features", 1, &cfg.out) ||
        sr_opt_bool(o, "bias", 1, &cfg.bias) || sr_opt_str(o, "weight_name", "weight", &wname) ||
        sr_opt_str(o, "bias_name", "bias", &bname))
        return NULL;
    sr_module *m = sr_module_new(&linear_ops, sizeof cfg);
    if (!m)
        return NULL;
    *(linear_cfg *)m->impl = cfg;
    int64_t ws[2] = {cfg.out, cfg.in};
    if (!sr_module_add_param(m, wname, 2, ws, 1) ||
        (cfg.bias && !sr_module_add_param(m, bname, 1, &cfg.out, 1))) {
        sr_module_release(m);
        return NULL;
    }
    return m;
}

#endif
