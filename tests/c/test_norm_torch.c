/* test_norm_torch.c - normalisation layers and activations against PyTorch
 * fixtures (tests/fixtures/gen_norm.py): forward, forward-mode tangents
 * (batchnorm train: joint tangents of the batch statistics), input and
 * parameter gradients, and the running statistics after one train-mode
 * forward; float32 (rel <= 1e-5, computed in float32 from the float32
 * fixtures) and float64 (rel <= 1e-12). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/layers.h"
#include "../../core/npy.h"
#include "check.h"
#include "test.h"

#define FIX "tests/fixtures/norm/"

typedef struct {
    const char *name;
    sr_layer_ctor create;
    const char *op;
    const char *kv[12];
    const char *params[5]; /* local names loaded from p_NAME, NULL-terminated */
    const char *grads[3];  /* trainable ones compared with g_NAME */
    int training;
} torch_case;

/* Mirrors CASES in gen_norm.py. */
static const torch_case cases[] = {
    {"bn_eval", sr_batchnorm2d_create, "batchnorm2d", {"num_features", "4"},
     {"weight", "bias", "running_mean", "running_var"}, {"weight", "bias"}, 0},
    {"bn_train", sr_batchnorm2d_create, "batchnorm2d", {"num_features", "4"},
     {"weight", "bias", "running_mean", "running_var"}, {"weight", "bias"}, 1},
    {"ln_last", sr_layernorm_create, "layernorm", {"normalized_shape", "8", "eps", "1e-6"},
     {"weight", "bias"}, {"weight", "bias"}, 0},
    {"ln_channels", sr_layernorm_create, "layernorm",
     {"normalized_shape", "6", "eps", "1e-6", "dim", "channels"}, {"weight", "bias"}, {"weight", "bias"}, 0},
    {"normalize", sr_normalize_create, "normalize", {"mean", "0.485,0.456,0.406", "std", "0.229,0.224,0.225"},
     {0}, {0}, 0},
    {"relu", sr_relu_create, "relu", {0}, {0}, {0}, 0},
    {"gelu_none", sr_gelu_create, "gelu", {0}, {0}, {0}, 0},
    {"gelu_tanh", sr_gelu_create, "gelu", {"approximate", "tanh"}, {0}, {0}, 0},
    {"softmax", sr_softmax_create, "softmax", {0}, {0}, {0}, 0},
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
    sr_module_set_training(m, tc->training);
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

    /* forward; in train mode it also moves the running statistics once */
    sr_run run = SR_RUN_INIT;
    if (sr_module_forward(m, &x, &run))
        goto done;
    UPDATE(&m->out, &y, "forward");
    if (tc->training) {
        if (load(&t, tc->name, "rm1", dt))
            goto done;
        UPDATE(&sr_module_local_param(m, "running_mean")->value, &t, "running_mean");
        if (load(&t, tc->name, "rv1", dt))
            goto done;
        UPDATE(&sr_module_local_param(m, "running_var")->value, &t, "running_var");
        if (sr_get_flat(&sr_module_local_param(m, "num_batches_tracked")->value, 0) != 1) {
            sr_fail("%s: num_batches_tracked is not 1", tc->name);
            goto done;
        }
    }

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
    for (int i = 0; tc->grads[i]; i++) {
        char what[64];
        snprintf(what, sizeof what, "g_%s", tc->grads[i]);
        sr_param *p = sr_module_local_param(m, tc->grads[i]);
        if (load(&t, tc->name, what, dt))
            goto done;
        if (!p->grad.storage) {
            sr_fail("%s: no gradient for %s", tc->name, tc->grads[i]);
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

TEST(norm_torch_f32) { run_all(SR_F32, 1e-5); }
TEST(norm_torch_f64) { run_all(SR_F64, 1e-12); }
