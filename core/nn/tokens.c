/* tokens.c - Vision Transformer pieces:
 *   to_tokens     (N,C,H,W) -> (N,H*W,C)   flatten(2).transpose(1,2) after the patch conv
 *   cls_pos       (N,P,D) -> (N,P+1,D)     prepend the class token, add the position embedding
 *   token_select  (N,T,D) -> (N,D)         the class token, or the mean over tokens
 *   layer_scale   y = x * gamma            over the last dim (timm ls1.gamma) or over the
 *                                          channels of NCHW (torchvision ConvNeXt layer_scale)
 *
 * All are linear in x except for cls_pos's constant (class token and
 * position embedding), which the tangent rows leave out: d(cat(c, x) + p) =
 * cat(0, dx).  So the JVP is the forward op on the whole stack [x; v], with
 * the constants on the primal rows only. */
#ifdef SR_REAL

/* y (rows, T, D), T = cls + P: primal rows [cls; x] + pos, tangent rows [0; x]. */
static void SR_FN(cls_pos_fwd)(real *y, const real *x, const real *cls, const real *pos,
                               int64_t rows, int64_t primal_rows, int64_t P, int64_t D, int has_cls)
{
    int64_t T = P + has_cls;
    #pragma omp parallel for if (rows * T * D > TOK_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        real *yr = y + r * T * D;
        const real *xr = x + r * P * D;
        int primal = r < primal_rows;
        if (has_cls)
            for (int64_t d = 0; d < D; d++)
                yr[d] = primal ? cls[d] + pos[d] : 0;
        real *yt = yr + has_cls * D;
        const real *pt = pos + has_cls * D;
        for (int64_t e = 0; e < P * D; e++)
            yt[e] = primal ? xr[e] + pt[e] : xr[e];
    }
}

/* gx = gy without the class slot; gcls += Σ_rows gy[:,0]; gpos += Σ_rows gy. */
static void SR_FN(cls_pos_bwd)(real *gx, real *gcls, real *gpos, const real *gy, int64_t rows,
                               int64_t P, int64_t D, int has_cls)
{
    int64_t T = P + has_cls;
    for (int64_t r = 0; r < rows; r++) {
        const real *gr = gy + r * T * D;
        memcpy(gx + r * P * D, gr + has_cls * D, (size_t)(P * D) * sizeof(real));
        if (gpos)
            for (int64_t e = 0; e < T * D; e++)
                gpos[e] += gr[e];
        if (gcls)
            for (int64_t d = 0; d < D; d++)
                gcls[d] += gr[d];
    }
}

/* y (rows, D) = x[:, index] or the mean of x[:, start:]. */
static void SR_FN(token_select_fwd)(real *y, const real *x, int64_t rows, int64_t T, int64_t D,
                                    int mean, int64_t first)
{
    #pragma omp parallel for if (rows * T * D > TOK_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const real *xr = x + r * T * D;
        real *yr = y + r * D;
        if (!mean) {
            memcpy(yr, xr + first * D, (size_t)D * sizeof(real));
            continue;
        }
        for (int64_t d = 0; d < D; d++)
            yr[d] = 0;
        for (int64_t t = first; t < T; t++)
            for (int64_t d = 0; d < D; d++)
                yr[d] += xr[t * D + d];
        real inv = (real)1 / (real)(T - first);
        for (int64_t d = 0; d < D; d++)
            yr[d] *= inv;
    }
}

static void SR_FN(token_select_bwd)(real *gx, const real *gy, int64_t rows, int64_t T, int64_t D,
                                    int mean, int64_t first)
{
    #pragma omp parallel for if (rows * T * D > TOK_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        real *gr = gx + r * T * D;
        const real *yr = gy + r * D;
        real inv = mean ? (real)1 / (real)(T - first) : 1;
        for (int64_t t = 0; t < T; t++) {
            int on = mean ? t >= first : t == first;
            for (int64_t d = 0; d < D; d++)
                gr[t * D + d] = on ? yr[d] * inv : 0;
        }
    }
}

/* x viewed as (outer, D, S): y = x * g[d].  "last": S = 1; "channels":
 * outer = N, S = H*W. */
static void SR_FN(scale_fwd)(real *y, const real *x, const real *g, int64_t outer, int64_t D,
                             int64_t S)
{
    #pragma omp parallel for if (outer * D * S > TOK_OMP_MIN)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t d = 0; d < D; d++) {
            const real *xp = x + (o * D + d) * S;
            real *yp = y + (o * D + d) * S;
            for (int64_t s = 0; s < S; s++)
                yp[s] = xp[s] * g[d];
        }
}

/* gg[d] += Σ_{o,s} gy x, one d per iteration so the sum order is fixed for
 * any thread count. */
static void SR_FN(scale_grad)(real *gg, const real *gy, const real *x, int64_t outer, int64_t D,
                              int64_t S)
{
    #pragma omp parallel for if (outer * D * S > TOK_OMP_MIN)
    for (int64_t d = 0; d < D; d++) {
        real acc = 0;
        for (int64_t o = 0; o < outer; o++) {
            const real *xp = x + (o * D + d) * S, *gp = gy + (o * D + d) * S;
            for (int64_t s = 0; s < S; s++)
                acc += gp[s] * xp[s];
        }
        gg[d] += acc;
    }
}

#else /* generic part */

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/layers.h"
#include "tensor/tensor_ops.h"

/* Below this many element steps a parallel region costs more than it saves. */
#define TOK_OMP_MIN 32768

#define SR_GENERIC_FILE "nn/tokens.c"
#include "base/generic.h"

/* --- to_tokens ----------------------------------------------------------- */
typedef struct {
    int64_t h, w; /* last input plane, for backward */
} to_tokens_impl;

static int to_tokens_run(sr_module *m, const sr_tensor *x, sr_run *run)
{
    to_tokens_impl *c = m->impl;
    if (x->ndim != 4)
        return sr_fail("to_tokens: input %s must be 4D (N,C,H,W)", SR_SHAPE(x));
    if (sr_module_output_like(m, run, x) || sr_permute_apply(&m->out, x, 4, (const int[]){0, 2, 3, 1}))
        return -1;
    /* (N,H,W,C) is already (N,H*W,C) in memory. */
    c->h = x->shape[2];
    c->w = x->shape[3];
    m->out.ndim = 3;
    m->out.shape[1] = c->h * c->w;
    m->out.shape[2] = x->shape[1];
    m->out.shape[3] = 0;
    return 0;
}

static int to_tokens_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    to_tokens_impl *c = m->impl;
    sr_tensor g4 = SR_TENSOR_INIT;
    if (sr_module_grad_input_like(m, run, gy) ||
        sr_tensor_reshape(&g4, gy, 4, (int64_t[]){gy->shape[0], c->h, c->w, gy->shape[2]}))
        return -1;
    int rc = sr_permute_apply(&m->gin, &g4, 4, (const int[]){0, 3, 1, 2});
    sr_tensor_free(&g4);
    return rc;
}

static const sr_module_ops to_tokens_ops = {
    .kind = "to_tokens", .forward = to_tokens_run, .jvp = to_tokens_run, .backward = to_tokens_backward,
    .is_affine = sr_module_affine_always
};

sr_module *sr_to_tokens_create(const sr_opts *o)
{
    (void)o;
    return sr_module_new(&to_tokens_ops, sizeof(to_tokens_impl));
}

/* --- cls_pos ---------------------------------------------------------------
 * Parameters: class token (1,1,D) then position embedding (1,cls+P,D).  Their
 * names are options because torchvision keeps them apart (class_token at the
 * root, encoder.pos_embedding): a name may hold dots, so a transparent leaf
 * at the root gives both their state_dict paths. */
typedef struct {
    int64_t dim, patches;
    int cls;
} cls_pos_impl;

static sr_param *pos_param(sr_module *m) { return &m->params[((cls_pos_impl *)m->impl)->cls]; }

static int cls_pos_run(sr_module *m, const sr_tensor *x, int64_t primal_rows, sr_run *run)
{
    cls_pos_impl *c = m->impl;
    if (x->ndim != 3 || x->shape[1] != c->patches || x->shape[2] != c->dim)
        return sr_fail("cls_pos: input %s must be (N,%lld,%lld) (num_patches=%lld, dim=%lld)",
                       SR_SHAPE(x), (long long)c->patches, (long long)c->dim, (long long)c->patches,
                       (long long)c->dim);
    int64_t ys[3] = {x->shape[0], c->patches + c->cls, c->dim};
    if (sr_module_output(m, run, x->dtype, 3, ys))
        return -1;
    SR_DISPATCH(x->dtype, cls_pos_fwd, sr_data(&m->out), sr_data(x),
                c->cls ? sr_data(&m->params[0].value) : NULL, sr_data(&pos_param(m)->value),
                x->shape[0], primal_rows, c->patches, c->dim, c->cls);
    return 0;
}

static int cls_pos_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    return cls_pos_run(m, x, x->shape[0], run);
}

static int cls_pos_jvp(sr_module *m, const sr_tensor *xv, sr_run *run)
{
    return cls_pos_run(m, xv, run->n, run);
}

static int cls_pos_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    cls_pos_impl *c = m->impl;
    int64_t rows = gy->shape[0];
    if (sr_module_grad_input(m, run, gy->dtype, 3, (int64_t[]){rows, c->patches, c->dim}))
        return -1;
    void *gcls = NULL, *gpos = NULL;
    if (run->param_grads) {
        if ((c->cls && !(gcls = sr_param_grad(m, &m->params[0]))) || !(gpos = sr_param_grad(m, pos_param(m))))
            return -1;
    }
    SR_DISPATCH(gy->dtype, cls_pos_bwd, sr_data(&m->gin), gcls, gpos, sr_data(gy), rows, c->patches,
                c->dim, c->cls);
    return 0;
}

static void cls_pos_reset(sr_module *m, sr_rng *rng)
{
    cls_pos_impl *c = m->impl;
    /* timm: trunc_normal(std=.02) for pos_embed (truncation at ±2 is ±100σ,
     * so a plain normal is the same law in practice) and normal(std=1e-6)
     * for cls_token; torchvision zero-initialises class_token. */
    if (c->cls)
        sr_tensor_fill_normal(&m->params[0].value, rng, 0, 1e-6);
    sr_tensor_fill_normal(&pos_param(m)->value, rng, 0, 0.02);
}

static void cls_pos_describe(const sr_module *m, char *buf, size_t n)
{
    const cls_pos_impl *c = m->impl;
    snprintf(buf, n, "%lld patches%s, dim %lld", (long long)c->patches, c->cls ? " + class token" : "",
             (long long)c->dim);
}

static const sr_module_ops cls_pos_ops = {
    .kind = "cls_pos", .forward = cls_pos_forward, .jvp = cls_pos_jvp, .backward = cls_pos_backward,
    .reset = cls_pos_reset, .describe = cls_pos_describe, .is_affine = sr_module_affine_always
};

sr_module *sr_cls_pos_create(const sr_opts *o)
{
    cls_pos_impl cfg;
    const char *cname, *pname;
    if (sr_opt_req_int(o, "dim", 1, &cfg.dim) || sr_opt_req_int(o, "num_patches", 1, &cfg.patches) ||
        sr_opt_bool(o, "cls", 1, &cfg.cls) || sr_opt_str(o, "cls_name", "cls_token", &cname) ||
        sr_opt_str(o, "pos_name", "pos_embed", &pname))
        return NULL;
    if (!*cname || !*pname || strcmp(cname, pname) == 0) {
        sr_fail("cls_pos: cls_name and pos_name must be distinct and non-empty");
        return NULL;
    }
    sr_module *m = sr_module_new(&cls_pos_ops, sizeof cfg);
    if (!m)
        return NULL;
    *(cls_pos_impl *)m->impl = cfg;
    if ((cfg.cls && !sr_module_add_param(m, cname, 3, (int64_t[]){1, 1, cfg.dim}, 1)) ||
        !sr_module_add_param(m, pname, 3, (int64_t[]){1, cfg.patches + cfg.cls, cfg.dim}, 1)) {
        sr_module_release(m);
        return NULL;
    }
    return m;
}

/* --- token_select ---------------------------------------------------------
 * pool="token" (default): x[:, index]; pool="mean": mean of x[:, start:]
 * (timm's global_pool="avg" is start=num_prefix_tokens, i.e. 1). */
typedef struct {
    int mean;
    int64_t first; /* the index, or the first averaged token */
    int64_t tokens; /* last input, for backward */
} token_select_impl;

static int token_select_run(sr_module *m, const sr_tensor *x, sr_run *run)
{
    token_select_impl *c = m->impl;
    if (x->ndim != 3)
        return sr_fail("token_select: input %s must be 3D (N,T,D)", SR_SHAPE(x));
    if (c->first >= x->shape[1])
        return sr_fail("token_select: %s %lld is out of range for input %s with %lld tokens",
                       c->mean ? "start" : "index", (long long)c->first, SR_SHAPE(x),
                       (long long)x->shape[1]);
    c->tokens = x->shape[1];
    if (sr_module_output(m, run, x->dtype, 2, (int64_t[]){x->shape[0], x->shape[2]}))
        return -1;
    SR_DISPATCH(x->dtype, token_select_fwd, sr_data(&m->out), sr_data(x), x->shape[0], x->shape[1],
                x->shape[2], c->mean, c->first);
    return 0;
}

static int token_select_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    token_select_impl *c = m->impl;
    int64_t rows = gy->shape[0], D = gy->shape[1];
    if (sr_module_grad_input(m, run, gy->dtype, 3, (int64_t[]){rows, c->tokens, D}))
        return -1;
    SR_DISPATCH(gy->dtype, token_select_bwd, sr_data(&m->gin), sr_data(gy), rows, c->tokens, D,
                c->mean, c->first);
    return 0;
}

static void token_select_describe(const sr_module *m, char *buf, size_t n)
{
    const token_select_impl *c = m->impl;
    if (c->mean)
        snprintf(buf, n, "mean over tokens %lld..", (long long)c->first);
    else
        snprintf(buf, n, "token %lld", (long long)c->first);
}

static const sr_module_ops token_select_ops = {
    .kind = "token_select", .forward = token_select_run, .jvp = token_select_run,
    .backward = token_select_backward, .describe = token_select_describe,
    .is_affine = sr_module_affine_always
};

sr_module *sr_token_select_create(const sr_opts *o)
{
    token_select_impl cfg = {0};
    const char *pool;
    double dummy;
    if (sr_opt_str(o, "pool", "token", &pool))
        return NULL;
    if (strcmp(pool, "mean") == 0 || strcmp(pool, "avg") == 0) {
        cfg.mean = 1;
        /* index would be silently ignored: reject it. */
        int has_index = o->get_num(o, "index", &dummy);
        if (has_index < 0)
            return NULL;
        if (has_index) {
            sr_fail("token_select: index applies to pool=\"token\", not pool=\"%s\" (use start)", pool);
            return NULL;
        }
        if (sr_opt_int_min(o, "start", 0, 0, &cfg.first))
            return NULL;
    } else if (strcmp(pool, "token") == 0) {
        int has_start = o->get_num(o, "start", &dummy);
        if (has_start < 0)
            return NULL;
        if (has_start) {
            sr_fail("token_select: start applies to pool=\"mean\", not pool=\"token\" (use index)");
            return NULL;
        }
        if (sr_opt_int_min(o, "index", 0, 0, &cfg.first))
            return NULL;
    } else {
        sr_fail("token_select: pool must be \"token\" or \"mean\" (got \"%s\")", pool);
        return NULL;
    }
    sr_module *m = sr_module_new(&token_select_ops, sizeof cfg);
    if (m)
        *(token_select_impl *)m->impl = cfg;
    return m;
}

/* --- layer_scale ---------------------------------------------------------- */
typedef struct {
    int64_t dim;
    double init;
    int channels; /* 0: over the last dim, gamma (D); 1: over NCHW channels, gamma (D,1,1) */
} layer_scale_impl;

/* x as (outer, D, S). */
static int scale_layout(const sr_module *m, const sr_tensor *x, int64_t *outer, int64_t *S)
{
    const layer_scale_impl *c = m->impl;
    if (c->channels) {
        if (x->ndim != 4 || x->shape[1] != c->dim)
            return sr_fail("layer_scale: input %s must be (N,%lld,H,W) (dim_axis=\"channels\")",
                           SR_SHAPE(x), (long long)c->dim);
        *outer = x->shape[0];
        *S = x->shape[2] * x->shape[3];
    } else {
        if (x->ndim < 2 || x->shape[x->ndim - 1] != c->dim)
            return sr_fail("layer_scale: input %s must end in dim=%lld (dim_axis=\"last\")", SR_SHAPE(x),
                           (long long)c->dim);
        *outer = sr_numel(x) / c->dim;
        *S = 1;
    }
    return 0;
}

static int layer_scale_run(sr_module *m, const sr_tensor *x, sr_run *run)
{
    layer_scale_impl *c = m->impl;
    int64_t outer, S;
    if (scale_layout(m, x, &outer, &S) || sr_module_output_like(m, run, x))
        return -1;
    if (run->save)
        sr_tensor_share(&m->saved, x);
    SR_DISPATCH(x->dtype, scale_fwd, sr_data(&m->out), sr_data(x), sr_data(&m->params[0].value), outer,
                c->dim, S);
    return 0;
}

static int layer_scale_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    layer_scale_impl *c = m->impl;
    const sr_tensor *x = &m->saved;
    int64_t outer, S;
    if (!x->storage)
        return sr_fail("layer_scale backward: forward was not run with save");
    if (scale_layout(m, x, &outer, &S) || sr_module_grad_input_like(m, run, x))
        return -1;
    sr_param *g = &m->params[0];
    SR_DISPATCH(gy->dtype, scale_fwd, sr_data(&m->gin), sr_data(gy), sr_data(&g->value), outer, c->dim, S);
    if (run->param_grads) {
        void *gg = sr_param_grad(m, g);
        if (!gg)
            return -1;
        SR_DISPATCH(gy->dtype, scale_grad, gg, sr_data(gy), sr_data(x), outer, c->dim, S);
    }
    return 0;
}

static void layer_scale_reset(sr_module *m, sr_rng *rng)
{
    (void)rng;
    sr_tensor_fill(&m->params[0].value, ((layer_scale_impl *)m->impl)->init);
}

static void layer_scale_describe(const sr_module *m, char *buf, size_t n)
{
    const layer_scale_impl *c = m->impl;
    snprintf(buf, n, "dim %lld over %s, init %g", (long long)c->dim, c->channels ? "channels" : "last dim",
             c->init);
}

static const sr_module_ops layer_scale_ops = {
    .kind = "layer_scale", .forward = layer_scale_run, .jvp = layer_scale_run,
    .backward = layer_scale_backward, .reset = layer_scale_reset, .describe = layer_scale_describe,
    .is_affine = sr_module_affine_always
};

sr_module *sr_layer_scale_create(const sr_opts *o)
{
    layer_scale_impl cfg;
    const char *name, *axis;
    if (sr_opt_req_int(o, "dim", 1, &cfg.dim) || sr_opt_num(o, "init", 1e-6, &cfg.init) ||
        sr_opt_str(o, "name", "gamma", &name) || sr_opt_str(o, "dim_axis", "last", &axis))
        return NULL;
    if (strcmp(axis, "last") == 0) {
        cfg.channels = 0;
    } else if (strcmp(axis, "channels") == 0) {
        cfg.channels = 1;
    } else {
        sr_fail("layer_scale: dim_axis must be \"last\" or \"channels\" (got \"%s\")", axis);
        return NULL;
    }
    if (!*name) {
        sr_fail("layer_scale: name must be non-empty");
        return NULL;
    }
    sr_module *m = sr_module_new(&layer_scale_ops, sizeof cfg);
    if (!m)
        return NULL;
    *(layer_scale_impl *)m->impl = cfg;
    int64_t shape[3] = {cfg.dim, 1, 1};
    if (!sr_module_add_param(m, name, cfg.channels ? 3 : 1, shape, 1)) {
        sr_module_release(m);
        return NULL;
    }
    return m;
}

#endif
