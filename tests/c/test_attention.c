/* test_attention.c - multi-head self-attention: derivatives (both styles),
 * fast vs naive loops, parameter names and init, buffer reuse, bad input. */
#include <math.h>
#include <string.h>

#include "nn/layers.h"
#include "check.h"
#include "test.h"

static sr_module *make_attn(int dim, int heads, const char *style, const char *qkv_bias,
                            uint64_t seed)
{
    char ds[16], hs[16];
    snprintf(ds, sizeof ds, "%d", dim);
    snprintf(hs, sizeof hs, "%d", heads);
    sr_module *m = MAKE(sr_attention_create, "attention", "dim", ds, "num_heads", hs, "style", style, "qkv_bias",
                        qkv_bias);
    return check_reset(m, seed);
}

/* {N, T, D, heads, k} */
static const int shapes[][5] = {
    {1, 1, 8, 2, 1}, {3, 5, 8, 4, 3}, {1, 5, 6, 1, 3}, {3, 1, 12, 4, 1}, {2, 5, 8, 2, 1}, {1, 7, 4, 4, 3},
};
#define NSHAPES ((int)(sizeof shapes / sizeof *shapes))

TEST(attention_derivatives_f64)
{
    const char *styles[] = {"timm", "torchvision"};
    const char *bias[] = {"true", "false"};
    for (int st = 0; st < 2; st++)
        for (int b = 0; b < 2; b++)
            for (int s = 0; s < NSHAPES; s++) {
                const int *c = shapes[s];
                if (b == 1 && s > 1)
                    continue; /* the bias-free variant on two shapes is enough */
                sr_module *m = make_attn(c[2], c[3], styles[st], bias[b], 3);
                CHECK(m, "create: %s", sr_errmsg());
                CHECK_OK(sr_module_to_dtype(m, SR_F64));
                check_fill_params(m, 100 + (uint64_t)s, 0.4);
                sr_tensor x = SR_TENSOR_INIT;
                CHECK_OK(check_randn(&x, 3, (int64_t[]){c[0], c[1], c[2]}, 5 + (uint64_t)s));
                check_result r;
                CHECK_OK(check_module(m, &x, c[4], 1e-6, 17 + (uint64_t)s, &r));
                CHECK(r.primal < 1e-12, "%s bias=%s shape %d: primal %g", styles[st], bias[b], s, r.primal);
                CHECK(r.jvp_fd < 1e-6, "%s bias=%s shape %d: jvp vs fd %g", styles[st], bias[b], s, r.jvp_fd);
                CHECK(r.adjoint < 1e-10, "%s bias=%s shape %d: adjoint %g", styles[st], bias[b], s, r.adjoint);
                CHECK(r.param_fd < 1e-6, "%s bias=%s shape %d: param fd %g", styles[st], bias[b], s, r.param_fd);
                sr_tensor_free(&x);
                sr_module_release(m);
            }
}

/* Fast (GEMM) forward and stacked JVP vs the naive loops, primal and tangent
 * blocks compared separately (their scales differ). */
static double block_rel(const sr_tensor *a, const sr_tensor *b, int64_t start, int64_t len)
{
    sr_tensor va = SR_TENSOR_INIT, vb = SR_TENSOR_INIT;
    if (sr_tensor_narrow(&va, a, start, len) || sr_tensor_narrow(&vb, b, start, len))
        return INFINITY;
    double e = check_rel_diff(&va, &vb);
    sr_tensor_free(&va);
    sr_tensor_free(&vb);
    return e;
}

static void fast_vs_naive(sr_dtype dt, double tol)
{
    /* {N, T, D, heads, k}: T=1, odd T, head_dim 1 and 5, T > 32 */
    static const int cases[][5] = {{1, 1, 4, 2, 1}, {3, 7, 12, 3, 2}, {2, 17, 20, 4, 3}, {1, 33, 8, 8, 1}, {2, 3, 6, 1, 4}};
    const char *styles[] = {"timm", "torchvision"};
    for (int st = 0; st < 2; st++)
        for (int s = 0; s < 5; s++) {
            const int *c = cases[s];
            int64_t n = c[0], T = c[1], D = c[2], k = c[4];
            sr_module *m = make_attn((int)D, c[3], styles[st], "true", 9);
            CHECK(m, "create: %s", sr_errmsg());
            CHECK_OK(sr_module_to_dtype(m, dt));
            check_fill_params(m, 40 + (uint64_t)s, 0.4);
            sr_tensor xv = SR_TENSOR_INIT, x = SR_TENSOR_INIT, yn = SR_TENSOR_INIT,
                      yf = SR_TENSOR_INIT, jn = SR_TENSOR_INIT;
            sr_rng r;
            sr_rng_seed(&r, 70 + (uint64_t)s);
            CHECK_OK(sr_tensor_alloc(&xv, dt, 3, (int64_t[]){n * (1 + k), T, D}));
            sr_tensor_fill_normal(&xv, &r, 0, 1);
            CHECK_OK(sr_tensor_narrow(&x, &xv, 0, n));

            /* forward */
            sr_run run = SR_RUN_INIT;
            CHECK_OK(sr_module_forward(m, &x, &run));
            CHECK_OK(sr_tensor_copy(&yf, &m->out));
            CHECK_OK(sr_attention_naive(m, &x, n, 0, &yn));
            double e = check_rel_diff(&yf, &yn);
            CHECK(e < tol, "%s case %d forward: rel %g", styles[st], s, e);

            /* stacked jvp */
            run.n = n;
            run.k = k;
            CHECK_OK(sr_module_jvp(m, &xv, &run));
            CHECK_OK(sr_attention_naive(m, &xv, n, k, &jn));
            CHECK(sr_same_shape(&m->out, &jn), "jvp out %s, naive %s", SR_SHAPE(&m->out), SR_SHAPE(&jn));
            double ep = block_rel(&m->out, &jn, 0, n), et = block_rel(&m->out, &jn, n, n * k);
            CHECK(ep < tol, "%s case %d jvp primal: rel %g", styles[st], s, ep);
            CHECK(et < tol, "%s case %d jvp tangents: rel %g", styles[st], s, et);
            /* the naive check is only meaningful if the tangents are not ~0 */
            double mx = 0;
            for (int64_t i = n * T * D; i < sr_numel(&jn); i++)
                mx = fmax(mx, fabs(sr_get_flat(&jn, i)));
            CHECK(mx > 1e-3, "%s case %d: tangent outputs vanish (%g)", styles[st], s, mx);
            sr_tensor *all[] = {&xv, &x, &yn, &yf, &jn};
            for (int i = 0; i < 5; i++)
                sr_tensor_free(all[i]);
            sr_module_release(m);
        }
}

TEST(attention_fast_matches_naive_f32) { fast_vs_naive(SR_F32, 1e-5); }
TEST(attention_fast_matches_naive_f64) { fast_vs_naive(SR_F64, 1e-12); }

/* The naive reference itself must see a wrong value: perturb one in-proj
 * weight and the comparison has to fail (guards against comparing a
 * function with itself). */
TEST(attention_naive_detects_a_wrong_weight)
{
    sr_module *m = make_attn(8, 2, "timm", "true", 1);
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, y0 = SR_TENSOR_INIT, y1 = SR_TENSOR_INIT;
    sr_rng r;
    sr_rng_seed(&r, 2);
    CHECK_OK(sr_tensor_alloc(&x, SR_F32, 3, (int64_t[]){2, 5, 8}));
    sr_tensor_fill_normal(&x, &r, 0, 1);
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(sr_tensor_copy(&y0, &m->out));
    sr_param *w = sr_module_find_param(m, "qkv.weight");
    CHECK(w, "%s", sr_errmsg());
    /* a key weight of head 1: changes only attention probabilities */
    sr_set_flat(&w->value, (8 + 5) * 8 + 3, sr_get_flat(&w->value, (8 + 5) * 8 + 3) + 0.5);
    CHECK_OK(sr_attention_naive(m, &x, 2, 0, &y1));
    double e = check_rel_diff(&y0, &y1);
    CHECK(e > 1e-4, "a changed key weight went unnoticed (rel %g)", e);
    sr_tensor_free(&x);
    sr_tensor_free(&y0);
    sr_tensor_free(&y1);
    sr_module_release(m);
}

TEST(attention_param_names_and_init)
{
    struct {
        const char *style, *bias;
        const char *names[4];
        int np;
    } want[] = {
        {"timm", "true", {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"}, 4},
        {"timm", "false", {"qkv.weight", "proj.weight", "proj.bias"}, 3},
        {"torchvision", "true", {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}, 4},
        {"torchvision", "false", {"in_proj_weight", "out_proj.weight"}, 2},
    };
    for (int i = 0; i < 4; i++) {
        sr_module *m = make_attn(16, 4, want[i].style, want[i].bias, 5);
        CHECK(m, "create: %s", sr_errmsg());
        CHECK(m->nparams == want[i].np, "%s bias=%s: %d params", want[i].style, want[i].bias, m->nparams);
        for (int j = 0; j < want[i].np; j++) {
            sr_param *p = sr_module_find_param(m, want[i].names[j]);
            CHECK(p, "%s: %s", want[i].style, sr_errmsg());
            int64_t rows = strstr(want[i].names[j], "proj") && !strstr(want[i].names[j], "in_proj") ? 16 : 48;
            CHECK(p->value.shape[0] == rows, "%s shape %s", want[i].names[j], SR_SHAPE(&p->value));
            CHECK(p->value.ndim == (strstr(want[i].names[j], "weight") ? 2 : 1), "%s ndim %d",
                  want[i].names[j], p->value.ndim);
        }
        sr_module_release(m);
    }
    /* init: timm = nn.Linear defaults (all U(±1/√D)); torchvision = xavier
     * in_proj_weight, zero biases, default out_proj.weight. */
    double lin = 1 / sqrt(16.0), xav = sqrt(6.0 / 64.0);
    struct {
        const char *style, *name;
        double bound; /* 0: all zero */
    } init[] = {
        {"timm", "qkv.weight", lin}, {"timm", "qkv.bias", lin}, {"timm", "proj.weight", lin},
        {"timm", "proj.bias", lin}, {"torchvision", "in_proj_weight", xav},
        {"torchvision", "in_proj_bias", 0}, {"torchvision", "out_proj.weight", lin},
        {"torchvision", "out_proj.bias", 0},
    };
    for (int i = 0; i < 8; i++) {
        sr_module *m = make_attn(16, 4, init[i].style, "true", 5);
        CHECK(m, "create: %s", sr_errmsg());
        sr_param *p = sr_module_find_param(m, init[i].name);
        CHECK(p, "%s", sr_errmsg());
        double mx = 0;
        for (int64_t j = 0; j < sr_numel(&p->value); j++)
            mx = fmax(mx, fabs(sr_get_flat(&p->value, j)));
        if (init[i].bound == 0)
            CHECK(mx == 0, "%s %s not zero (%g)", init[i].style, init[i].name, mx);
        else
            CHECK(mx <= init[i].bound && mx > 0.8 * init[i].bound, "%s %s: max |w| %g, bound %g",
                  init[i].style, init[i].name, mx, init[i].bound);
        sr_module_release(m);
    }
}

TEST(attention_buffers_reused_and_grads_accumulate)
{
    sr_module *m = make_attn(8, 2, "timm", "true", 3);
    CHECK(m, "create: %s", sr_errmsg());
    CHECK_OK(sr_module_to_dtype(m, SR_F64));
    sr_tensor x = SR_TENSOR_INIT, gy = SR_TENSOR_INIT, g1 = SR_TENSOR_INIT, y1 = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 3, (int64_t[]){2, 5, 8}, 1));
    CHECK_OK(check_randn(&gy, 3, (int64_t[]){2, 5, 8}, 2));
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(sr_tensor_copy(&y1, &m->out));
    void *outbuf = sr_data(&m->out);
    CHECK_OK(sr_module_backward(m, &gy, &run));
    sr_param *w = sr_module_find_param(m, "qkv.weight");
    CHECK(w && w->grad.storage, "no qkv.weight grad");
    CHECK_OK(sr_tensor_copy(&g1, &w->grad));
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK(sr_data(&m->out) == outbuf, "output buffer not reused");
    CHECK(check_rel_diff(&m->out, &y1) == 0, "second forward differs");
    CHECK_OK(sr_module_backward(m, &gy, &run));
    double e = 0;
    for (int64_t i = 0; i < sr_numel(&g1); i++)
        e = fmax(e, fabs(sr_get_flat(&w->grad, i) - 2 * sr_get_flat(&g1, i)));
    CHECK(e < 1e-12, "grads did not accumulate (err %g)", e);
    sr_tensor *all[] = {&x, &gy, &g1, &y1};
    for (int i = 0; i < 4; i++)
        sr_tensor_free(all[i]);
    sr_module_release(m);
}

TEST(attention_bad_input_is_an_error)
{
    sr_module *m = make_attn(8, 2, "timm", "true", 1);
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, gy = SR_TENSOR_INIT;
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 2, (int64_t[]){2, 8}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "attention: input (2,8) must be 3D (N,T,D)");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){2, 3, 6}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "attention: input (2,3,6) must end in dim=8");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){2, 0, 8}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "attention: input (2,0,8) has no tokens");
    CHECK_OK(sr_tensor_zeros(&x, SR_F64, 3, (int64_t[]){2, 3, 8}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "attention: input is float64 but the parameters are float32");
    /* jvp with a stack that does not hold n(1+k) samples */
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){5, 3, 8}));
    run.n = 2;
    run.k = 2;
    CHECK_ERR(sr_module_jvp(m, &x, &run), "attention jvp: input (5,3,8) does not hold 2 primal rows");
    /* backward needs a saving forward; a jvp in between invalidates it */
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){1, 3, 8}));
    run = (sr_run)SR_RUN_INIT;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(sr_tensor_zeros(&gy, SR_F32, 3, (int64_t[]){1, 3, 8}));
    CHECK_ERR(sr_module_backward(m, &gy, &run), "attention backward: forward was not run with save");
    run.save = 1;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){2, 3, 8}));
    run.n = 1;
    run.k = 1;
    CHECK_OK(sr_module_jvp(m, &x, &run));
    CHECK_OK(sr_tensor_zeros(&gy, SR_F32, 3, (int64_t[]){2, 3, 8}));
    CHECK_ERR(sr_module_backward(m, &gy, &run), "attention backward: forward was not run with save");
    sr_tensor_free(&x);
    sr_tensor_free(&gy);
    sr_module_release(m);

    /* construction */
    const char *bad[][6] = {
        {"dim", "10", "num_heads", "3", NULL, NULL},
        {"dim", "8", "num_heads", "2", "style", "keras"},
        {"dim", "8", NULL, NULL, NULL, NULL},
        {"dim", "8", "num_heads", "0", NULL, NULL},
    };
    const char *msg[] = {"attention: dim=10 is not divisible by num_heads=3",
                         "attention: style must be \"timm\" or \"torchvision\" (got \"keras\")",
                         "attention: option num_heads is required",
                         "attention: option num_heads must be >= 1"};
    for (int i = 0; i < 4; i++) {
        const char *kv[7] = {bad[i][0], bad[i][1], bad[i][2], bad[i][3], bad[i][4], bad[i][5], NULL};
        sr_opts o;
        sr_opts_kv_data d;
        sr_opts_kv(&o, &d, "attention", kv);
        CHECK(sr_attention_create(&o) == NULL, "case %d accepted", i);
        CHECK(strstr(sr_errmsg(), msg[i]), "case %d: '%s' lacks '%s'", i, sr_errmsg(), msg[i]);
    }
}
