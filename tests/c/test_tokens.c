/* test_tokens.c - ViT pieces (to_tokens, cls_pos, token_select, layer_scale):
 * derivatives incl. parameter grads, exact semantics, parameter names and
 * shapes, init, bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "check.h"
#include "test.h"

typedef struct {
    sr_layer_ctor ctor;
    const char *op;
    const char *kv[12];
    int ndim;
    int64_t shape[4];
} tok_case;

static const tok_case deriv_cases[] = {
    {sr_to_tokens_create, "to_tokens", {0}, 4, {2, 5, 3, 4}},
    {sr_to_tokens_create, "to_tokens", {0}, 4, {1, 3, 1, 7}},
    {sr_cls_pos_create, "cls_pos", {"dim", "6", "num_patches", "12"}, 3, {2, 12, 6}},
    {sr_cls_pos_create, "cls_pos", {"dim", "5", "num_patches", "7", "cls", "false"}, 3, {3, 7, 5}},
    {sr_token_select_create, "token_select", {0}, 3, {2, 7, 5}},
    {sr_token_select_create, "token_select", {"index", "3"}, 3, {2, 7, 5}},
    {sr_token_select_create, "token_select", {"pool", "mean"}, 3, {2, 7, 5}},
    {sr_token_select_create, "token_select", {"pool", "mean", "start", "1"}, 3, {3, 4, 2}},
    {sr_layer_scale_create, "layer_scale", {"dim", "6"}, 3, {2, 5, 6}},
    {sr_layer_scale_create, "layer_scale", {"dim", "6"}, 2, {3, 6}},
    {sr_layer_scale_create, "layer_scale", {"dim", "4", "dim_axis", "channels"}, 4, {2, 4, 3, 5}},
};

TEST(tokens_derivatives_f64)
{
    for (size_t c = 0; c < sizeof deriv_cases / sizeof *deriv_cases; c++) {
        const tok_case *tc = &deriv_cases[c];
        sr_module *m = check_make_f64(tc->ctor, tc->op, tc->kv);
        CHECK(m, "case %zu create: %s", c, sr_errmsg());
        check_fill_params(m, 30 + c, 1);
        sr_tensor x = SR_TENSOR_INIT;
        CHECK_OK(check_randn(&x, tc->ndim, tc->shape, 200 + c));
        check_result r;
        CHECK_OK(check_module(m, &x, 3, 1e-6, 9 + c, &r));
        if (getenv("SRGEO_TEST_VERBOSE"))
            printf("  %-14s case %2zu: jvp-fd %.2g adjoint %.2g param-fd %.2g\n", tc->op, c, r.jvp_fd,
                   r.adjoint, r.param_fd);
        CHECK(r.primal == 0, "case %zu (%s): primal %g", c, tc->op, r.primal);
        CHECK(r.jvp_fd < 1e-6, "case %zu (%s): jvp vs fd %g", c, tc->op, r.jvp_fd);
        CHECK(r.adjoint < 1e-10, "case %zu (%s): adjoint %g", c, tc->op, r.adjoint);
        CHECK(r.param_fd < 1e-6, "case %zu (%s): param fd %g", c, tc->op, r.param_fd);
        sr_tensor_free(&x);
        sr_module_release(m);
    }
}

TEST(to_tokens_is_flatten_transpose)
{
    sr_module *m = sr_to_tokens_create(NULL);
    CHECK(m, "create: %s", sr_errmsg());
    int64_t N = 2, C = 3, H = 4, W = 5;
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&x, SR_F32, 4, (int64_t[]){N, C, H, W}));
    for (int64_t i = 0; i < sr_numel(&x); i++)
        sr_set_flat(&x, i, (double)i);
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK(m->out.ndim == 3 && m->out.shape[0] == N && m->out.shape[1] == H * W && m->out.shape[2] == C,
          "shape %s", SR_SHAPE(&m->out));
    for (int64_t n = 0; n < N; n++)
        for (int64_t t = 0; t < H * W; t++)
            for (int64_t c = 0; c < C; c++) {
                double got = sr_get_flat(&m->out, (n * H * W + t) * C + c);
                double want = (double)((n * C + c) * H * W + t);
                CHECK(got == want, "y[%lld,%lld,%lld] = %g, want %g", (long long)n, (long long)t,
                      (long long)c, got, want);
            }
    sr_tensor_free(&x);
    sr_module_release(m);
}

/* Tangent rows: zeros in the class slot and no position add; primal rows:
 * [cls; x] + pos exactly. */
TEST(cls_pos_primal_and_tangent_rows)
{
    sr_module *m = MAKE_F64(sr_cls_pos_create, "cls_pos", "dim", "3", "num_patches", "2");
    CHECK(m, "create: %s", sr_errmsg());
    check_fill_params(m, 4, 1);
    const double *cls = sr_f64(&m->params[0].value), *pos = sr_f64(&m->params[1].value);
    CHECK(strcmp(m->params[0].name, "cls_token") == 0 && strcmp(m->params[1].name, "pos_embed") == 0,
          "names %s %s", m->params[0].name, m->params[1].name);
    CHECK(m->params[1].value.shape[1] == 3, "pos %s", SR_SHAPE(&m->params[1].value));
    sr_tensor xv = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&xv, 3, (int64_t[]){1 + 2, 2, 3}, 8)); /* n=1, k=2 */
    sr_run run = SR_RUN_INIT;
    run.n = 1;
    run.k = 2;
    CHECK_OK(sr_module_jvp(m, &xv, &run));
    CHECK(m->out.shape[0] == 3 && m->out.shape[1] == 3 && m->out.shape[2] == 3, "%s", SR_SHAPE(&m->out));
    const double *y = sr_f64(&m->out), *x = sr_f64(&xv);
    for (int d = 0; d < 3; d++)
        CHECK(y[d] == cls[d] + pos[d], "class slot %d", d);
    for (int e = 0; e < 6; e++)
        CHECK(y[3 + e] == x[e] + pos[3 + e], "patch %d", e);
    for (int r = 1; r < 3; r++) {
        for (int d = 0; d < 3; d++)
            CHECK(y[r * 9 + d] == 0, "tangent %d class slot %d = %g", r, d, y[r * 9 + d]);
        for (int e = 0; e < 6; e++)
            CHECK(y[r * 9 + 3 + e] == x[r * 6 + e], "tangent %d patch %d", r, e);
    }
    sr_tensor_free(&xv);
    sr_module_release(m);
}

static int find_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)p;
    (void)owner;
    char *buf = ud;
    strcat(buf, path);
    strcat(buf, " ");
    return 0;
}

/* torchvision keeps class_token at the root and encoder.pos_embedding in
 * the encoder: a transparent cls_pos with dotted names gives both paths. */
TEST(cls_pos_torchvision_names_and_shapes)
{
    sr_module *m = MAKE(sr_cls_pos_create, "cls_pos", "dim", "8", "num_patches", "196", "cls_name",
                        "class_token", "pos_name", "encoder.pos_embedding");
    CHECK(m, "create: %s", sr_errmsg());
    sr_module *root = sr_sequential_new();
    CHECK_OK(sr_module_add_child(root, "", m));
    char names[256] = "";
    sr_module_walk_params(root, find_cb, names);
    CHECK(strcmp(names, "class_token encoder.pos_embedding ") == 0, "paths: %s", names);
    sr_param *p = sr_module_find_param(root, "encoder.pos_embedding");
    CHECK(p && p->value.ndim == 3 && p->value.shape[0] == 1 && p->value.shape[1] == 197 &&
              p->value.shape[2] == 8, "pos %s", p ? SR_SHAPE(&p->value) : "missing");
    p = sr_module_find_param(root, "class_token");
    CHECK(p && p->value.ndim == 3 && p->value.shape[2] == 8 && p->trainable, "class token");
    sr_module_release(m);
    sr_module_release(root);

    /* cls=false: only the position embedding, over the patches */
    m = MAKE(sr_cls_pos_create, "cls_pos", "dim", "4", "num_patches", "9", "cls", "false");
    CHECK(m && m->nparams == 1 && m->params[0].value.shape[1] == 9, "pos only");
    sr_module_release(m);
}

TEST(tokens_init_follows_timm)
{
    sr_module *m = MAKE(sr_cls_pos_create, "cls_pos", "dim", "384", "num_patches", "196");
    CHECK(m, "create: %s", sr_errmsg());
    sr_rng r;
    sr_rng_seed(&r, 1);
    sr_module_reset(m, &r);
    double s[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        const sr_tensor *t = &m->params[i].value;
        for (int64_t e = 0; e < sr_numel(t); e++)
            s[i] += sr_get_flat(t, e) * sr_get_flat(t, e);
        s[i] = sqrt(s[i] / (double)sr_numel(t));
    }
    CHECK(s[0] > 0.7e-6 && s[0] < 1.3e-6, "cls_token std %g, want ~1e-6", s[0]);
    CHECK(fabs(s[1] - 0.02) < 0.0005, "pos_embed std %g, want 0.02", s[1]);
    sr_module_release(m);

    m = MAKE(sr_layer_scale_create, "layer_scale", "dim", "5", "init", "0.25", "name", "layer_scale",
             "dim_axis", "channels");
    CHECK(m, "create: %s", sr_errmsg());
    sr_module_reset(m, &r);
    const sr_param *g = &m->params[0];
    CHECK(strcmp(g->name, "layer_scale") == 0 && g->trainable, "name %s", g->name);
    CHECK(g->value.ndim == 3 && g->value.shape[0] == 5 && g->value.shape[1] == 1 && g->value.shape[2] == 1,
          "torchvision shape (C,1,1), got %s", SR_SHAPE(&g->value));
    for (int i = 0; i < 5; i++)
        CHECK(sr_get_flat(&g->value, i) == 0.25, "gamma[%d] = %g", i, sr_get_flat(&g->value, i));
    sr_module_release(m);
    m = MAKE(sr_layer_scale_create, "layer_scale", "dim", "5");
    sr_module_reset(m, &r);
    CHECK(m->params[0].value.ndim == 1 && strcmp(m->params[0].name, "gamma") == 0, "timm gamma (D)");
    CHECK(fabsf(sr_f32(&m->params[0].value)[4] - 1e-6f) < 1e-12f, "default init 1e-6");
    sr_module_release(m);
}

/* channels: y[n,c,h,w] = x * gamma[c]; last: y[..., d] = x * gamma[d]. */
TEST(layer_scale_axes)
{
    for (int ch = 0; ch < 2; ch++) {
        sr_module *m = ch ? MAKE(sr_layer_scale_create, "layer_scale", "dim", "3", "dim_axis", "channels")
                          : MAKE(sr_layer_scale_create, "layer_scale", "dim", "3");
        CHECK(m, "create: %s", sr_errmsg());
        for (int i = 0; i < 3; i++)
            sr_set_flat(&m->params[0].value, i, i + 1);
        sr_tensor x = SR_TENSOR_INIT;
        CHECK_OK(sr_tensor_alloc(&x, SR_F32, 4, (int64_t[]){2, 3, 3, 3}));
        sr_tensor_fill(&x, 1);
        sr_run run = SR_RUN_INIT;
        CHECK_OK(sr_module_forward(m, &x, &run));
        for (int64_t i = 0; i < 54; i++) {
            int64_t d = ch ? (i / 9) % 3 : i % 3;
            CHECK(sr_f32(&m->out)[i] == (float)(d + 1), "%s: y[%lld] = %g", ch ? "channels" : "last",
                  (long long)i, sr_f32(&m->out)[i]);
        }
        sr_tensor_free(&x);
        sr_module_release(m);
    }
}

TEST(token_select_mean_and_index)
{
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&x, SR_F64, 3, (int64_t[]){2, 4, 3}));
    for (int64_t i = 0; i < 24; i++)
        sr_set_flat(&x, i, (double)i);
    sr_module *m = MAKE(sr_token_select_create, "token_select", "pool", "mean", "start", "1");
    CHECK(m, "create: %s", sr_errmsg());
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(m, &x, &run));
    /* row n, dim d: mean over t=1..3 of 12n + 3t + d = 12n + 6 + d */
    for (int n = 0; n < 2; n++)
        for (int d = 0; d < 3; d++)
            CHECK(fabs(sr_f64(&m->out)[n * 3 + d] - (12 * n + 6 + d)) < 1e-14, "mean[%d,%d]", n, d);
    sr_module_release(m);
    m = MAKE(sr_token_select_create, "token_select", "index", "2");
    CHECK_OK(sr_module_forward(m, &x, &run));
    for (int n = 0; n < 2; n++)
        for (int d = 0; d < 3; d++)
            CHECK(sr_f64(&m->out)[n * 3 + d] == 12 * n + 6 + d, "index[%d,%d]", n, d);
    sr_tensor_free(&x);
    sr_module_release(m);
}

/* Parameter grads accumulate across backward calls (like linear.c). */
TEST(tokens_param_grads_accumulate)
{
    sr_module *m = MAKE_F64(sr_layer_scale_create, "layer_scale", "dim", "4");
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, gy = SR_TENSOR_INIT, g1 = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 2, (int64_t[]){3, 4}, 1));
    CHECK_OK(check_randn(&gy, 2, (int64_t[]){3, 4}, 2));
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(sr_module_backward(m, &gy, &run));
    CHECK_OK(sr_tensor_copy(&g1, &m->params[0].grad));
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(sr_module_backward(m, &gy, &run));
    for (int i = 0; i < 4; i++)
        CHECK(fabs(sr_f64(&m->params[0].grad)[i] - 2 * sr_f64(&g1)[i]) < 1e-14, "grad %d not accumulated", i);
    /* without param_grads, grads stay untouched */
    run.param_grads = 0;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_OK(sr_module_backward(m, &gy, &run));
    CHECK(fabs(sr_f64(&m->params[0].grad)[0] - 2 * sr_f64(&g1)[0]) < 1e-14, "grads changed");
    /* backward needs a forward with save */
    run.save = 0;
    CHECK_OK(sr_module_forward(m, &x, &run));
    CHECK_ERR(sr_module_backward(m, &gy, &run), "layer_scale backward: forward was not run with save");
    sr_tensor *all[] = {&x, &gy, &g1};
    for (int i = 0; i < 3; i++)
        sr_tensor_free(all[i]);
    sr_module_release(m);
}

TEST(tokens_bad_input_is_an_error)
{
    sr_tensor x = SR_TENSOR_INIT;
    sr_run run = SR_RUN_INIT;
    sr_module *m = sr_to_tokens_create(NULL);
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){2, 3, 32}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "to_tokens: input (2,3,32) must be 4D (N,C,H,W)");
    sr_module_release(m);

    m = MAKE(sr_token_select_create, "token_select", "index", "3");
    CHECK_ERR(sr_module_forward(m, &x, &run), "token_select: index 3 is out of range for input (2,3,32) with 3 tokens");
    sr_tensor_free(&x);
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 2, (int64_t[]){2, 8}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "token_select: input (2,8) must be 3D (N,T,D)");
    sr_module_release(m);
    CHECK(!MAKE(sr_token_select_create, "token_select", "pool", "max"), "pool=max accepted");
    CHECK(strstr(sr_errmsg(), "token_select: pool must be \"token\" or \"mean\" (got \"max\")"), "msg: %s", sr_errmsg());
    CHECK(!MAKE(sr_token_select_create, "token_select", "pool", "mean", "index", "0"), "index with mean accepted");
    CHECK(strstr(sr_errmsg(), "token_select: index applies to pool=\"token\""), "msg: %s", sr_errmsg());
    CHECK(!MAKE(sr_token_select_create, "token_select", "index", "-1"), "negative index accepted");
    CHECK(strstr(sr_errmsg(), "token_select: option index must be >= 0"), "msg: %s", sr_errmsg());

    m = MAKE(sr_layer_scale_create, "layer_scale", "dim", "6");
    CHECK_ERR(sr_module_forward(m, &x, &run), "layer_scale: input (2,8) must end in dim=6 (dim_axis=\"last\")");
    sr_module_release(m);
    m = MAKE(sr_layer_scale_create, "layer_scale", "dim", "8", "dim_axis", "channels");
    CHECK_ERR(sr_module_forward(m, &x, &run), "layer_scale: input (2,8) must be (N,8,H,W) (dim_axis=\"channels\")");
    sr_module_release(m);
    CHECK(!MAKE(sr_layer_scale_create, "layer_scale", "dim", "8", "dim_axis", "first"), "bad axis accepted");
    CHECK(strstr(sr_errmsg(), "layer_scale: dim_axis must be \"last\" or \"channels\" (got \"first\")"), "msg: %s", sr_errmsg());
    CHECK(!MAKE(sr_layer_scale_create, "layer_scale", "init", "1"), "no dim accepted");
    CHECK(strstr(sr_errmsg(), "layer_scale: option dim is required"), "msg: %s", sr_errmsg());

    m = MAKE(sr_cls_pos_create, "cls_pos", "dim", "6", "num_patches", "12");
    sr_tensor_free(&x);
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 3, (int64_t[]){2, 10, 6}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "cls_pos: input (2,10,6) must be (N,12,6) (num_patches=12, dim=6)");
    sr_tensor_free(&x);
    CHECK_OK(sr_tensor_zeros(&x, SR_F64, 3, (int64_t[]){2, 12, 6}));
    CHECK_ERR(sr_module_forward(m, &x, &run), "cls_pos: input is float64 but the parameters are float32");
    sr_tensor_free(&x);
    sr_module_release(m);
    CHECK(!MAKE(sr_cls_pos_create, "cls_pos", "dim", "6"), "no num_patches accepted");
    CHECK(strstr(sr_errmsg(), "cls_pos: option num_patches is required"), "msg: %s", sr_errmsg());
    CHECK(!MAKE(sr_cls_pos_create, "cls_pos", "dim", "6", "num_patches", "4", "cls_name", "pos_embed"), "same names accepted");
    CHECK(strstr(sr_errmsg(), "cls_pos: cls_name and pos_name must be distinct"), "msg: %s", sr_errmsg());
}

/* Sizes above the OpenMP thresholds: 1 and 2 threads agree bit for bit,
 * parameter grads included. */
TEST(tokens_threads_agree_bitwise)
{
    struct {
        sr_module *m;
        int64_t shape[4];
        int ndim;
    } cases[] = {
        {MAKE(sr_layer_scale_create, "layer_scale", "dim", "16", "dim_axis", "channels"), {2, 16, 41, 39}, 4},
        {MAKE(sr_layer_scale_create, "layer_scale", "dim", "96"), {2, 196, 96, 0}, 3},
        {MAKE(sr_cls_pos_create, "cls_pos", "dim", "96", "num_patches", "196"), {2, 196, 96, 0}, 3},
        {MAKE(sr_token_select_create, "token_select", "pool", "mean", "start", "1"), {2, 197, 96, 0}, 3},
        {sr_to_tokens_create(NULL), {2, 96, 14, 14}, 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        sr_module *m = cases[c].m;
        CHECK(m, "create %zu: %s", c, sr_errmsg());
        check_fill_params(m, 5, 1);
        sr_tensor x = SR_TENSOR_INIT, gy = SR_TENSOR_INIT;
        sr_rng r;
        sr_rng_seed(&r, 6);
        CHECK_OK(sr_tensor_alloc(&x, SR_F32, cases[c].ndim, cases[c].shape));
        sr_tensor_fill_normal(&x, &r, 0, 1);
        /* a random cotangent of the output's shape */
        sr_run run = SR_RUN_INIT;
        CHECK_OK(sr_module_forward(m, &x, &run));
        CHECK_OK(sr_tensor_alloc(&gy, SR_F32, m->out.ndim, m->out.shape));
        sr_tensor_fill_normal(&gy, &r, 0, 1);
        CHECK(check_threads_agree(m, &x, &gy, NULL, 0, 0) == 0, "%s", sr_errmsg());
        sr_tensor_free(&x);
        sr_tensor_free(&gy);
        sr_module_release(m);
    }
}
