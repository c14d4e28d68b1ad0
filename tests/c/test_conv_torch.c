/* test_conv_torch.c - conv2d against PyTorch's F.conv2d: forward, forward-mode
 * AD tangents and backward, from tests/fixtures/gen_conv.py (cases mirrored
 * here).  float32 in float32 (rel <= 1e-5), float64 (rel <= 1e-10). */
#include <stdio.h>
#include <string.h>

#include "../../core/layers.h"
#include "../../core/npy.h"
#include "check.h"
#include "test.h"

#define K 2 /* tangents per input, as in the generator */

typedef struct {
    const char *name;
    const char *kv[20];
    int bias;
} torch_case;

static const torch_case tcases[] = {
    {"k3p1", {"in_channels", "3", "out_channels", "4", "kernel_size", "3", "padding", "1", NULL}, 1},
    {"k32s2p10",
     {"in_channels", "4", "out_channels", "6", "kernel_size", "3,2", "stride", "2", "padding", "1,0", NULL},
     1},
    {"k3d2p2", {"in_channels", "3", "out_channels", "5", "kernel_size", "3", "padding", "2", "dilation", "2", NULL},
     1},
    {"k3s12g2_nobias",
     {"in_channels", "6", "out_channels", "4", "kernel_size", "3", "stride", "1,2", "padding", "1", "groups", "2",
      "bias", "false", NULL},
     0},
    {"depthwise_x2_s2",
     {"in_channels", "4", "out_channels", "8", "kernel_size", "3", "stride", "2", "padding", "1", "groups", "4",
      NULL},
     1},
    {"k1", {"in_channels", "8", "out_channels", "5", "kernel_size", "1", NULL}, 1},
    {"k1s2", {"in_channels", "4", "out_channels", "3", "kernel_size", "1", "stride", "2", NULL}, 1},
};

static int load(sr_tensor *t, const char *cs, const char *name, const char *dt)
{
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/conv/%s_%s_%s.npy", cs, name, dt);
    return sr_npy_load(t, path);
}

static void run_case(const torch_case *c, sr_dtype dt, double tol)
{
    const char *ds = dt == SR_F64 ? "f64" : "f32";
    sr_tensor x = SR_TENSOR_INIT, w = SR_TENSOR_INIT, b = SR_TENSOR_INIT, y = SR_TENSOR_INIT,
              v = SR_TENSOR_INIT, jv = SR_TENSOR_INIT, gy = SR_TENSOR_INIT, gx = SR_TENSOR_INIT,
              gw = SR_TENSOR_INIT, gb = SR_TENSOR_INIT, xv = SR_TENSOR_INIT, part = SR_TENSOR_INIT;
    CHECK_OK(load(&x, c->name, "x", ds));
    CHECK_OK(load(&w, c->name, "weight", ds));
    CHECK_OK(load(&y, c->name, "y", ds));
    CHECK_OK(load(&v, c->name, "v", ds));
    CHECK_OK(load(&jv, c->name, "jv", ds));
    CHECK_OK(load(&gy, c->name, "gy", ds));
    CHECK_OK(load(&gx, c->name, "gx", ds));
    CHECK_OK(load(&gw, c->name, "g_weight", ds));
    if (c->bias) {
        CHECK_OK(load(&b, c->name, "bias", ds));
        CHECK_OK(load(&gb, c->name, "g_bias", ds));
    }
    CHECK(x.dtype == dt, "%s: fixture dtype %s", c->name, sr_dtype_name(x.dtype));

    sr_opts o;
    sr_opts_kv_data d;
    sr_opts_kv(&o, &d, "conv2d", c->kv);
    sr_module *m = sr_conv2d_create(&o);
    CHECK(m, "%s: create: %s", c->name, sr_errmsg());
    CHECK_OK(sr_module_to_dtype(m, dt));
    CHECK(m->nparams == 1 + c->bias, "%s: %d params", c->name, m->nparams);
    CHECK(sr_same_shape(&m->params[0].value, &w), "%s: weight %s, torch %s", c->name,
          SR_SHAPE(&m->params[0].value), SR_SHAPE(&w));
    CHECK_OK(sr_tensor_assign(&m->params[0].value, &w));
    if (c->bias)
        CHECK_OK(sr_tensor_assign(&m->params[1].value, &b));

    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK(sr_same_shape(&m->out, &y), "%s: y %s, torch %s", c->name, SR_SHAPE(&m->out), SR_SHAPE(&y));
    double e = check_rel_diff(&m->out, &y);
    CHECK(e <= tol, "%s %s: forward rel %g", c->name, ds, e);
    CHECK_OK(sr_module_backward(m, &gy, &run));
    e = check_rel_diff(&m->gin, &gx);
    CHECK(e <= tol, "%s %s: grad x rel %g", c->name, ds, e);
    e = check_rel_diff(&m->params[0].grad, &gw);
    CHECK(e <= tol, "%s %s: grad weight rel %g", c->name, ds, e);
    if (c->bias) {
        e = check_rel_diff(&m->params[1].grad, &gb);
        CHECK(e <= tol, "%s %s: grad bias rel %g", c->name, ds, e);
    }

    /* Stacked JVP: [x; v] in, [y; J v] out. */
    int64_t n = x.shape[0], xs[4] = {n * (1 + K), x.shape[1], x.shape[2], x.shape[3]};
    CHECK(v.shape[0] == n * K, "%s: v %s", c->name, SR_SHAPE(&v));
    CHECK_OK(sr_tensor_alloc(&xv, dt, 4, xs));
    size_t es = sr_dtype_size(dt);
    memcpy(sr_data(&xv), sr_data(&x), (size_t)sr_numel(&x) * es);
    memcpy((char *)sr_data(&xv) + (size_t)sr_numel(&x) * es, sr_data(&v), (size_t)sr_numel(&v) * es);
    sr_run jr = SR_RUN_INIT;
    jr.n = n;
    jr.k = K;
    CHECK_OK(sr_module_jvp(m, &xv, &jr));
    CHECK_OK(sr_tensor_narrow(&part, &m->out, 0, n));
    e = check_rel_diff(&part, &y);
    CHECK(e <= tol, "%s %s: jvp primal rel %g", c->name, ds, e);
    CHECK_OK(sr_tensor_narrow(&part, &m->out, n, n * K));
    CHECK(sr_same_shape(&part, &jv), "%s: jv %s, torch %s", c->name, SR_SHAPE(&part), SR_SHAPE(&jv));
    e = check_rel_diff(&part, &jv);
    CHECK(e <= tol, "%s %s: jvp tangent rel %g", c->name, ds, e);

    sr_tensor *all[] = {&x, &w, &b, &y, &v, &jv, &gy, &gx, &gw, &gb, &xv, &part};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sr_tensor_free(all[i]);
    sr_module_release(m);
}

TEST(conv_matches_torch_f32)
{
    for (size_t i = 0; i < sizeof tcases / sizeof *tcases; i++) {
        run_case(&tcases[i], SR_F32, 1e-5);
        if (test_failed())
            return;
    }
}

TEST(conv_matches_torch_f64)
{
    for (size_t i = 0; i < sizeof tcases / sizeof *tcases; i++) {
        run_case(&tcases[i], SR_F64, 1e-10);
        if (test_failed())
            return;
    }
}
