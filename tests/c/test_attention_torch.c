/* test_attention_torch.c - attention vs PyTorch references written by
 * tests/fixtures/gen_attention.py (timm's Attention written out in torch, and
 * torch.nn.MultiheadAttention for the torchvision style): forward, stacked
 * JVP, input and parameter gradients, in float32 and float64. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../core/layers.h"
#include "../../core/npy.h"
#include "check.h"
#include "test.h"

#define DIR "tests/fixtures/attention/"

typedef struct {
    const char *name, *style, *qkv_bias;
    int n, T, D, heads, k;
    const char *params[4];
} fixture;

static const fixture fixtures[] = {
    {"timm", "timm", "true", 2, 17, 32, 4, 2, {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"}},
    {"timm_nobias", "timm", "false", 1, 5, 8, 2, 1, {"qkv.weight", "proj.weight", "proj.bias", NULL}},
    {"tv", "torchvision", "true", 3, 9, 24, 3, 2,
     {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}},
    {"tv_nobias", "torchvision", "false", 2, 3, 8, 1, 1, {"in_proj_weight", "out_proj.weight", NULL, NULL}},
};

/* Load DIR<case>_<what>.npy converted to dtype. */
static int load(sr_tensor *t, const fixture *f, const char *what, sr_dtype dt)
{
    char path[256];
    snprintf(path, sizeof path, DIR "%s_%s.npy", f->name, what);
    return sr_npy_load(t, path) || sr_tensor_convert(t, t, dt);
}

static void check_fixture(const fixture *f, sr_dtype dt, double tol)
{
    char ds[16], hs[16];
    snprintf(ds, sizeof ds, "%d", f->D);
    snprintf(hs, sizeof hs, "%d", f->heads);
    sr_opts o;
    sr_opts_kv_data d;
    const char *kv[] = {"dim", ds, "num_heads", hs, "style", f->style, "qkv_bias", f->qkv_bias, NULL};
    sr_opts_kv(&o, &d, "attention", kv);
    sr_module *m = sr_attention_create(&o);
    CHECK(m, "%s: create: %s", f->name, sr_errmsg());
    CHECK_OK(sr_module_to_dtype(m, dt));
    int np = 0;
    for (; np < 4 && f->params[np]; np++) {
        sr_tensor t = SR_TENSOR_INIT;
        sr_param *p = sr_module_find_param(m, f->params[np]);
        CHECK(p, "%s: %s", f->name, sr_errmsg());
        CHECK_OK(load(&t, f, f->params[np], dt));
        CHECK(sr_same_shape(&t, &p->value), "%s %s: fixture %s, module %s", f->name, f->params[np],
              SR_SHAPE(&t), SR_SHAPE(&p->value));
        CHECK_OK(sr_tensor_assign(&p->value, &t));
        sr_tensor_free(&t);
    }
    CHECK(np == m->nparams, "%s: module has %d params, fixture %d", f->name, m->nparams, np);

    sr_tensor x = SR_TENSOR_INIT, v = SR_TENSOR_INIT, gy = SR_TENSOR_INIT, ref = SR_TENSOR_INIT,
              stack = SR_TENSOR_INIT, view = SR_TENSOR_INIT;
    CHECK_OK(load(&x, f, "x", dt));
    CHECK_OK(load(&v, f, "v", dt));
    CHECK_OK(load(&gy, f, "gy", dt));
    int64_t n = f->n, k = f->k, rs = sr_rowsize(&x);
    size_t es = sr_dtype_size(dt);

    /* forward (saved for backward) */
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(load(&ref, f, "y", dt));
    double e = check_rel_diff(&m->out, &ref);
    CHECK(e < tol, "%s %s forward: rel %g", f->name, sr_dtype_name(dt), e);

    /* backward: input and parameter grads */
    sr_module_zero_grad(m);
    CHECK_OK(sr_module_backward(m, &gy, &run));
    CHECK_OK(load(&ref, f, "gx", dt));
    e = check_rel_diff(&m->gin, &ref);
    CHECK(e < tol, "%s %s grad x: rel %g", f->name, sr_dtype_name(dt), e);
    for (int i = 0; i < np; i++) {
        char what[64];
        snprintf(what, sizeof what, "grad_%s", f->params[i]);
        sr_param *p = sr_module_find_param(m, f->params[i]);
        CHECK(p && p->grad.storage, "%s: no grad for %s", f->name, f->params[i]);
        CHECK_OK(load(&ref, f, what, dt));
        e = check_rel_diff(&p->grad, &ref);
        CHECK(e < tol, "%s %s %s: rel %g", f->name, sr_dtype_name(dt), what, e);
    }

    /* stacked jvp: [x; v] with v already input-major */
    CHECK_OK(sr_tensor_alloc(&stack, dt, 3, (int64_t[]){n * (1 + k), f->T, f->D}));
    memcpy(sr_data(&stack), sr_data(&x), (size_t)(n * rs) * es);
    memcpy((char *)sr_data(&stack) + (size_t)(n * rs) * es, sr_data(&v), (size_t)(n * k * rs) * es);
    run = (sr_run)SR_RUN_INIT;
    run.n = n;
    run.k = k;
    CHECK_OK(sr_module_jvp(m, &stack, &run));
    CHECK_OK(load(&ref, f, "y", dt));
    CHECK_OK(sr_tensor_narrow(&view, &m->out, 0, n));
    e = check_rel_diff(&view, &ref);
    CHECK(e < tol, "%s %s jvp primal: rel %g", f->name, sr_dtype_name(dt), e);
    CHECK_OK(load(&ref, f, "jvp", dt));
    CHECK_OK(sr_tensor_narrow(&view, &m->out, n, n * k));
    e = check_rel_diff(&view, &ref);
    CHECK(e < tol, "%s %s jvp tangents: rel %g", f->name, sr_dtype_name(dt), e);

    sr_tensor *all[] = {&x, &v, &gy, &ref, &stack, &view};
    for (int i = 0; i < 6; i++)
        sr_tensor_free(all[i]);
    sr_module_release(m);
}

TEST(attention_torch_f32)
{
    for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
        check_fixture(&fixtures[i], SR_F32, 1e-5);
        if (test_failed())
            return;
    }
}

TEST(attention_torch_f64)
{
    for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
        check_fixture(&fixtures[i], SR_F64, 1e-10);
        if (test_failed())
            return;
    }
}
