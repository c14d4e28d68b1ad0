/* test_pool_torch.c - pooling, shape and token layers against PyTorch
 * fixtures (tests/fixtures/gen_pool.py): forward, forward-mode tangents,
 * input and parameter gradients, in float32 (rel <= 1e-5, computed in float32
 * from the float32 fixtures) and float64 (rel <= 1e-10). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/layers.h"
#include "../../core/npy.h"
#include "check.h"
#include "test.h"

#define FIX "tests/fixtures/pool/"

typedef struct {
    const char *name;
    sr_layer_ctor create;
    const char *op;
    const char *kv[12];
    const char *params[3]; /* parameter local names, NULL-terminated */
} torch_case;

/* Mirrors CASES in gen_pool.py. */
static const torch_case cases[] = {
    {"maxpool_k3s2p1", sr_maxpool2d_create, "maxpool2d", {"kernel_size", "3", "stride", "2", "padding", "1"}, {0}},
    {"maxpool_k2", sr_maxpool2d_create, "maxpool2d", {"kernel_size", "2"}, {0}},
    {"avgpool_k3s2p1", sr_avgpool2d_create, "avgpool2d", {"kernel_size", "3", "stride", "2", "padding", "1"}, {0}},
    {"avgpool_k3s2p1_nopad", sr_avgpool2d_create, "avgpool2d",
     {"kernel_size", "3", "stride", "2", "padding", "1", "count_include_pad", "false"}, {0}},
    {"avgpool_k32s21p11", sr_avgpool2d_create, "avgpool2d",
     {"kernel_size", "3,2", "stride", "2,1", "padding", "1,1", "count_include_pad", "false"}, {0}},
    {"adaptive_1", sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", {"output_size", "1"}, {0}},
    {"adaptive_3", sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", {"output_size", "3"}, {0}},
    {"adaptive_3x2", sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", {"output_size", "3,2"}, {0}},
    {"flatten", sr_flatten_create, "flatten", {0}, {0}},
    {"permute_0231", sr_permute_create, "permute", {"dims", "0,2,3,1"}, {0}},
    {"permute_0312", sr_permute_create, "permute", {"dims", "0,3,1,2"}, {0}},
    {"to_tokens", sr_to_tokens_create, "to_tokens", {0}, {0}},
    {"cls_pos", sr_cls_pos_create, "cls_pos", {"dim", "6", "num_patches", "12"}, {"cls_token", "pos_embed"}},
    {"pos_only", sr_cls_pos_create, "cls_pos", {"dim", "6", "num_patches", "12", "cls", "false"}, {"pos_embed"}},
    {"token_index0", sr_token_select_create, "token_select", {0}, {0}},
    {"token_mean", sr_token_select_create, "token_select", {"pool", "mean"}, {0}},
    {"token_mean1", sr_token_select_create, "token_select", {"pool", "mean", "start", "1"}, {0}},
    {"layer_scale_last", sr_layer_scale_create, "layer_scale", {"dim", "6"}, {"gamma"}},
    {"layer_scale_channels", sr_layer_scale_create, "layer_scale",
     {"dim", "6", "dim_axis", "channels", "name", "layer_scale"}, {"layer_scale"}},
};

static int load(sr_tensor *t, const char *c, const char *what, const char *dt)
{
    char path[256];
    snprintf(path, sizeof path, FIX "%s_%s_%s.npy", c, what, dt);
    return sr_npy_load(t, path);
}

/* Runs one case in one dtype; *worst gets the largest relative error. */
static int run_case(const torch_case *tc, sr_dtype dtype, double *worst)
{
    const char *dt = dtype == SR_F64 ? "f64" : "f32";
    int rc = -1;
    sr_tensor x = SR_TENSOR_INIT, y = SR_TENSOR_INIT, v = SR_TENSOR_INIT, jv = SR_TENSOR_INIT,
              gy = SR_TENSOR_INIT, gx = SR_TENSOR_INIT, stack = SR_TENSOR_INIT, t = SR_TENSOR_INIT,
              view = SR_TENSOR_INIT;
    sr_opts o;
    sr_opts_kv_data d;
    sr_opts_kv(&o, &d, tc->op, tc->kv);
    sr_module *m = tc->create(&o);
    *worst = 0;
    if (!m || sr_module_to_dtype(m, dtype))
        goto done;
    if (load(&x, tc->name, "x", dt) || load(&y, tc->name, "y", dt) || load(&v, tc->name, "v", dt) ||
        load(&jv, tc->name, "jv", dt) || load(&gy, tc->name, "gy", dt) || load(&gx, tc->name, "gx", dt))
        goto done;
    if (x.dtype != dtype) {
        sr_fail("%s: fixture x is %s", tc->name, sr_dtype_name(x.dtype));
        goto done;
    }
    for (int i = 0; tc->params[i]; i++) {
        char what[64];
        snprintf(what, sizeof what, "p_%s", tc->params[i]);
        sr_param *p = sr_module_local_param(m, tc->params[i]);
        if (!p) {
            sr_fail("%s: no parameter %s", tc->name, tc->params[i]);
            goto done;
        }
        if (load(&t, tc->name, what, dt))
            goto done;
        if (!sr_same_shape(&t, &p->value)) {
            sr_fail("%s: parameter %s is %s, fixture %s", tc->name, tc->params[i], SR_SHAPE(&p->value),
                    SR_SHAPE(&t));
            goto done;
        }
        if (sr_tensor_assign(&p->value, &t))
            goto done;
    }
#define UPDATE(got, want, what)                                                          \
    do {                                                                                 \
        if (!sr_same_shape((got), (want))) {                                             \
            sr_fail("%s %s: shape %s, torch %s", tc->name, what, SR_SHAPE(got), SR_SHAPE(want)); \
            goto done;                                                                   \
        }                                                                                \
        double e_ = check_rel_diff((got), (want));                                       \
        if (e_ > *worst)                                                                 \
            *worst = e_;                                                                 \
    } while (0)

    /* forward */
    sr_run run = SR_RUN_INIT;
    if (sr_module_forward(m, &x, &run))
        goto done;
    UPDATE(&m->out, &y, "forward");

    /* jvp: stack [x; v] with v (N,K,...) already input-major */
    int64_t n = x.shape[0], k = v.shape[1], shape[SR_MAXDIM];
    memcpy(shape, x.shape, sizeof shape);
    shape[0] = n * (1 + k);
    if (sr_tensor_alloc(&stack, dtype, x.ndim, shape))
        goto done;
    size_t es = sr_dtype_size(dtype);
    memcpy(sr_data(&stack), sr_data(&x), (size_t)sr_numel(&x) * es);
    memcpy((char *)sr_data(&stack) + (size_t)sr_numel(&x) * es, sr_data(&v), (size_t)sr_numel(&v) * es);
    run = (sr_run)SR_RUN_INIT;
    run.n = n;
    run.k = k;
    if (sr_module_jvp(m, &stack, &run))
        goto done;
    if (sr_tensor_narrow(&view, &m->out, 0, n))
        goto done;
    UPDATE(&view, &y, "jvp primal");
    /* torch's jv is (N,K,...); ours is (N*K,...) in the same order */
    int64_t js[SR_MAXDIM];
    js[0] = n * k;
    for (int i = 1; i < y.ndim; i++)
        js[i] = y.shape[i];
    if (sr_tensor_reshape(&t, &jv, y.ndim, js) || sr_tensor_narrow(&view, &m->out, n, n * k))
        goto done;
    UPDATE(&view, &t, "jvp tangents");

    /* backward with parameter grads */
    sr_module_zero_grad(m);
    run = (sr_run)SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    if (sr_module_forward(m, &x, &run) || sr_module_backward(m, &gy, &run))
        goto done;
    UPDATE(&m->gin, &gx, "input grad");
    for (int i = 0; tc->params[i]; i++) {
        char what[64];
        snprintf(what, sizeof what, "g_%s", tc->params[i]);
        sr_param *p = sr_module_local_param(m, tc->params[i]);
        if (load(&t, tc->name, what, dt))
            goto done;
        if (!p->grad.storage) {
            sr_fail("%s: no gradient for %s", tc->name, tc->params[i]);
            goto done;
        }
        UPDATE(&p->grad, &t, what);
    }
#undef UPDATE
    rc = 0;
done:;
    sr_tensor *all[] = {&x, &y, &v, &jv, &gy, &gx, &stack, &t, &view};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sr_tensor_free(all[i]);
    sr_module_release(m);
    return rc;
}

static void run_all(sr_dtype dtype, double tol)
{
    int verbose = getenv("SRGEO_TEST_VERBOSE") != NULL;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        double e;
        CHECK_OK(run_case(&cases[i], dtype, &e));
        if (verbose)
            printf("  %-22s %s worst rel %.3g\n", cases[i].name, sr_dtype_name(dtype), e);
        CHECK(e <= tol, "%s %s: rel %g > %g", cases[i].name, sr_dtype_name(dtype), e, tol);
    }
}

TEST(pool_torch_f32) { run_all(SR_F32, 1e-5); }
TEST(pool_torch_f64) { run_all(SR_F64, 1e-10); }
