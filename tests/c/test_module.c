/* test_module.c - how a module tree holds its buffers: a pass that keeps
 * nothing for backward returns each consumed activation to the model's pool,
 * a warm pool serves the next pass without fresh allocations, and none of
 * this changes a single output bit (forward, taps, jvp, backward). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/module.h"
#include "check.h"
#include "test.h"

static int add(sr_module *parent, const char *name, sr_module *child)
{
    if (!child)
        return -1;
    int rc = sr_module_add_child(parent, name, child);
    sr_module_release(child);
    return rc;
}

/* conv-bn-relu, a residual block (body conv-bn-relu-conv, identity skip),
 * relu, global pool, flatten, linear: every buffer-handling path of
 * ResNet, in float64 so comparisons are exact. */
static sr_module *make_net(sr_module **block)
{
    sr_module *root = sr_sequential_new(), *res = sr_residual_new(), *body = sr_sequential_new();
    const char *conv8[] = {"in_channels", "8", "out_channels", "8", "kernel_size", "3", "padding", "1", NULL};
    if (!root || !res || !body ||
        add(body, "conv1", check_layer("conv2d", conv8)) ||
        add(body, "bn1", check_layer("batchnorm2d", (const char *[]){"num_features", "8", NULL})) ||
        add(body, "relu", check_layer("relu", (const char *[]){NULL})) ||
        add(body, "conv2", check_layer("conv2d", conv8)) || add(res, "", body) ||
        add(root, "conv1", check_layer("conv2d", (const char *[]){"in_channels", "3", "out_channels", "8",
                                                                   "kernel_size", "3", "padding", "1", NULL})) ||
        add(root, "bn1", check_layer("batchnorm2d", (const char *[]){"num_features", "8", NULL})) ||
        add(root, "relu", check_layer("relu", (const char *[]){NULL})) || add(root, "block", res) ||
        add(root, "relu2", check_layer("relu", (const char *[]){NULL})) ||
        add(root, "pool", check_layer("adaptive_avgpool2d", (const char *[]){"output_size", "1", NULL})) ||
        add(root, "flatten", check_layer("flatten", (const char *[]){NULL})) ||
        add(root, "fc", check_layer("linear", (const char *[]){"in_features", "8", "out_features", "5", NULL})))
        return NULL;
    sr_rng r;
    sr_rng_seed(&r, 7);
    sr_module_reset(root, &r);
    sr_module_set_training(root, 0);
    if (sr_module_to_dtype(root, SR_F64)) {
        sr_module_release(root);
        return NULL;
    }
    *block = res;
    return root;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

/* The pool's storages, sorted, into buf (at most 64). */
static int pool_set(const sr_pool *p, void **buf)
{
    int n = p->n < 64 ? p->n : 64;
    for (int i = 0; i < n; i++)
        buf[i] = p->blocks[i];
    qsort(buf, (size_t)n, sizeof *buf, cmp_ptr);
    return n;
}

/* Buffers the tree holds: modules holding an output, an input gradient, and
 * the distinct storages of the saved inputs (at most 32). */
typedef struct {
    int out, gin, nsaved;
    const sr_storage *saved[32];
} held_stats;

static int held_cb(const char *path, sr_module *m, int depth, void *ud)
{
    (void)path;
    (void)depth;
    held_stats *h = ud;
    h->out += m->out.storage != NULL;
    h->gin += m->gin.storage != NULL;
    if (!m->saved.storage)
        return 0;
    for (int i = 0; i < h->nsaved; i++)
        if (h->saved[i] == m->saved.storage)
            return 0;
    if (h->nsaved < 32)
        h->saved[h->nsaved++] = m->saved.storage;
    return 0;
}

static double max_abs_diff(const sr_tensor *a, const sr_tensor *b)
{
    if (!sr_same_shape(a, b))
        return 1e300;
    double w = 0;
    for (int64_t i = 0; i < sr_numel(a); i++) {
        double d = sr_get_flat(a, i) - sr_get_flat(b, i);
        w = d < 0 ? (-d > w ? -d : w) : (d > w ? d : w);
    }
    return w;
}

TEST(module_pass_returns_buffers_to_the_pool)
{
    sr_module *block = NULL, *m = make_net(&block);
    CHECK(m, "net: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){3, 3, 12, 12}, 1));

    sr_tensor first = SR_TENSOR_INIT;
    void *set2[64], *set3[64];
    int n2 = 0, n3 = 0;
    for (int pass = 1; pass <= 3; pass++) {
        sr_run run = SR_RUN_INIT;
        CHECK_OK(sr_module_forward(m, &x, &run));
        if (pass == 1)
            sr_tensor_copy(&first, &m->out);
        CHECK(max_abs_diff(&m->out, &first) == 0, "pass %d output differs from pass 1", pass);
        held_stats s = {0};
        sr_module_walk(m, held_cb, &s);
        /* root and fc share the one output the caller reads */
        CHECK(s.out == 2, "pass %d: %d modules still hold an output", pass, s.out);
        /* a handful (the residual's live pair, spares, the conv workspaces;
         * six here from the second pass on), not one buffer per module */
        CHECK(m->pool.n <= 6, "pass %d: the pool holds %d blocks for 13 modules", pass, m->pool.n);
        if (pass == 2)
            n2 = pool_set(&m->pool, set2);
        if (pass == 3)
            n3 = pool_set(&m->pool, set3);
    }
    CHECK(n2 > 0 && n2 == n3 && memcmp(set2, set3, (size_t)n2 * sizeof *set2) == 0,
          "a warm pool serves the pass from its own blocks (%d then %d blocks)", n2, n3);

    /* The same bits as a pass that saves for backward (which holds its
     * activations through the layers' saved inputs, see below). */
    sr_run save = SR_RUN_INIT;
    save.save = 1;
    CHECK_OK(sr_module_forward(m, &x, &save));
    CHECK(max_abs_diff(&m->out, &first) == 0, "pooled passes differ from the save pass by %g",
          max_abs_diff(&m->out, &first));

    /* A tap inside the residual block survives the pass that frees around
     * it, and a saving pass records the same bits there. */
    sr_tensor tap_out[1] = {SR_TENSOR_INIT}, tap_save[1] = {SR_TENSOR_INIT};
    const sr_module *taps[1] = {block};
    sr_run tr = SR_RUN_INIT;
    tr.ntaps = 1;
    tr.taps = taps;
    tr.tap_out = tap_out;
    CHECK_OK(sr_module_forward(m, &x, &tr));
    sr_run save2 = SR_RUN_INIT;
    save2.save = 1;
    save2.ntaps = 1;
    save2.taps = taps;
    save2.tap_out = tap_save;
    CHECK_OK(sr_module_forward(m, &x, &save2));
    CHECK(tap_save[0].storage && max_abs_diff(&tap_out[0], &tap_save[0]) == 0,
          "tap output differs from the save pass");
    sr_run_clear(&tr);
    sr_run_clear(&save2);

    /* jvp passes reuse the same pool and stay exact. */
    sr_tensor xv = SR_TENSOR_INIT, j1 = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&xv, 4, (int64_t[]){3 * 3, 3, 12, 12}, 2));
    for (int pass = 0; pass < 2; pass++) {
        sr_run jr = SR_RUN_INIT;
        jr.n = 3;
        jr.k = 2;
        CHECK_OK(sr_module_jvp(m, &xv, &jr));
        if (pass == 0)
            sr_tensor_copy(&j1, &m->out);
        else
            CHECK(max_abs_diff(&m->out, &j1) == 0, "second jvp pass differs");
    }

    /* Backward after pooled passes: a save pass rebuilds what it needs. */
    sr_tensor gy = SR_TENSOR_INIT, gx = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&gy, 2, (int64_t[]){3, 5}, 3));
    sr_run b1 = SR_RUN_INIT;
    b1.save = 1;
    CHECK_OK(sr_module_forward(m, &x, &b1));
    CHECK_OK(sr_module_backward(m, &gy, &b1));
    sr_tensor_copy(&gx, &m->gin);
    sr_run plain = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(m, &x, &plain));
    sr_run b2 = SR_RUN_INIT;
    b2.save = 1;
    CHECK_OK(sr_module_forward(m, &x, &b2));
    CHECK_OK(sr_module_backward(m, &gy, &b2));
    CHECK(max_abs_diff(&m->gin, &gx) == 0, "input gradient after a pooled pass differs");

    /* A bigger batch: the pool's too-small blocks give way, results exact. */
    sr_tensor x2 = SR_TENSOR_INIT, ref2 = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x2, 4, (int64_t[]){7, 3, 12, 12}, 4));
    sr_run s3 = SR_RUN_INIT;
    s3.save = 1;
    CHECK_OK(sr_module_forward(m, &x2, &s3));
    sr_tensor_copy(&ref2, &m->out);
    sr_run p3 = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(m, &x2, &p3));
    CHECK(max_abs_diff(&m->out, &ref2) == 0, "bigger batch after a warm pool differs");

    sr_module_clear_buffers(m);
    CHECK(m->pool.n == 0, "clear_buffers empties the pool");
    sr_tensor *ts[] = {&x, &first, &y, &xv, &j1, &gy, &gx, &x2, &ref2};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        sr_tensor_free(ts[i]);
    sr_module_release(m);
}

/* Parameter gradients, in walk order, copied into g (at most 16). */
typedef struct {
    sr_tensor *g;
    int n;
} grads_copy;

static int copy_grad_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path;
    (void)owner;
    grads_copy *c = ud;
    if (!p->trainable)
        return 0;
    if (c->n >= 16 || !p->grad.storage)
        return sr_fail("%s: no gradient", path);
    return sr_tensor_copy(&c->g[c->n++], &p->grad);
}

/* forward (save) + backward from gy with parameter gradients; the input and
 * parameter gradients are copied into gx and g. */
static int train_pass(sr_module *m, const sr_tensor *x, const sr_tensor *gy, int unpooled, held_stats *after_fwd,
                      sr_tensor *gx, grads_copy *g)
{
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    run.unpooled = unpooled;
    sr_module_zero_grad(m);
    if (sr_module_forward(m, x, &run))
        return -1;
    *after_fwd = (held_stats){0};
    sr_module_walk(m, held_cb, after_fwd);
    if (sr_module_backward(m, gy, &run))
        return -1;
    g->n = 0;
    return sr_tensor_copy(gx, &m->gin) || sr_module_walk_params(m, copy_grad_cb, g);
}

TEST(module_training_step_holds_only_what_backward_needs)
{
    sr_module *block = NULL, *m = make_net(&block);
    CHECK(m, "net: %s", sr_errmsg());
    sr_module_set_training(m, 1); /* BatchNorm on batch statistics: every pass alike */
    sr_tensor x = SR_TENSOR_INIT, gy = SR_TENSOR_INIT, gx_ref = SR_TENSOR_INIT, gx = SR_TENSOR_INIT;
    sr_tensor gref[16] = {SR_TENSOR_INIT}, gp[16] = {SR_TENSOR_INIT};
    grads_copy ref = {gref, 0}, cur = {gp, 0};
    CHECK_OK(check_randn(&x, 4, (int64_t[]){3, 3, 12, 12}, 1));
    CHECK_OK(check_randn(&gy, 2, (int64_t[]){3, 5}, 3));

    /* The reference: nothing lent, every buffer given back is freed. */
    held_stats h;
    CHECK_OK(train_pass(m, &x, &gy, 1, &h, &gx_ref, &ref));
    CHECK(ref.n == 12, "%d parameter gradients", ref.n);
    CHECK(m->pool.n == 0 && m->pool.fresh == 0, "an unpooled pass used the pool");

    long fresh[4] = {0};
    void *set[4][66];
    int nset[4] = {0};
    for (int step = 1; step <= 3; step++) {
        CHECK_OK(train_pass(m, &x, &gy, 0, &h, &gx, &cur));
        /* After forward: the input, the outputs of conv1, relu, the block's
         * conv1 and relu, relu2 and the global pool (fc's saved input is
         * a view of it), read by backward through the layers' saved
         * references; root and fc share the logits.  Not held: the BatchNorm
         * outputs (each ReLU saves its own output), the block's conv2 and
         * sum, the flatten view's own reference. */
        CHECK(h.out == 2, "step %d: %d modules hold an output after forward", step, h.out);
        CHECK(h.nsaved == 7, "step %d: %d distinct saved buffers after forward (want 7)", step, h.nsaved);
        CHECK(max_abs_diff(&gx, &gx_ref) == 0, "step %d: input gradient differs from the unpooled pass", step);
        for (int i = 0; i < ref.n; i++)
            CHECK(max_abs_diff(&gp[i], &gref[i]) == 0, "step %d: parameter gradient %d differs from unpooled",
                  step, i);
        /* After backward: only the logits and the root's input gradient. */
        held_stats after = {0};
        sr_module_walk(m, held_cb, &after);
        CHECK(after.out == 2 && after.gin == 1 && after.nsaved == 0,
              "step %d: after the step %d outputs, %d gradients, %d saved buffers are held", step, after.out,
              after.gin, after.nsaved);
        /* Every buffer of the step, in the pool or still held. */
        fresh[step] = m->pool.fresh;
        nset[step] = pool_set(&m->pool, set[step]);
        set[step][nset[step]++] = m->out.storage;
        set[step][nset[step]++] = m->gin.storage;
        qsort(set[step], (size_t)nset[step], sizeof *set[step], cmp_ptr);
    }
    /* A warm pool serves the next step: no fresh allocation, the same blocks. */
    CHECK(fresh[3] == fresh[2] && fresh[2] == fresh[1], "warm steps allocated %ld then %ld buffers",
          fresh[2] - fresh[1], fresh[3] - fresh[2]);
    CHECK(nset[2] == nset[3] && memcmp(set[2], set[3], (size_t)nset[2] * sizeof *set[2]) == 0,
          "the second and third steps use different buffers (%d then %d)", nset[2], nset[3]);

    sr_tensor *ts[] = {&x, &gy, &gx_ref, &gx};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        sr_tensor_free(ts[i]);
    for (int i = 0; i < 16; i++) {
        sr_tensor_free(&gref[i]);
        sr_tensor_free(&gp[i]);
    }
    sr_module_release(m);
}

/* The pool lends best fit, but never a block far bigger than asked: a
 * small tensor that outlives the pass (an output held by Lua until the
 * collector runs) would pin it. */
TEST(pool_does_not_lend_a_far_bigger_block)
{
    sr_pool pool = {0};
    sr_tensor big = SR_TENSOR_INIT, small = SR_TENSOR_INIT, mid = SR_TENSOR_INIT;
    int64_t nbig = 2 << 20, nsmall = 256, nmid = (int64_t)1 << 20; /* float32: 8 MB, 1 KB, 4 MB */
    CHECK_OK(sr_pool_ensure(&pool, &big, SR_F32, 1, &nbig));
    const void *block = sr_data(&big);
    sr_pool_put(&pool, &big);
    CHECK_OK(sr_pool_ensure(&pool, &small, SR_F32, 1, &nsmall));
    CHECK(sr_data(&small) != block && pool.n == 1, "a 1 KB tensor was lent the 8 MB block");
    CHECK_OK(sr_pool_ensure(&pool, &mid, SR_F32, 1, &nmid));
    CHECK(sr_data(&mid) == block && pool.n == 0, "a 4 MB tensor was not lent the 8 MB block");
    sr_tensor_free(&small);
    sr_tensor_free(&mid);
    sr_pool_clear(&pool);
}

/* conv2d -> batchnorm2d (eval, non-trivial statistics) [-> relu] in a
 * sequential, fused in a plain forward and a stacked JVP, against the same
 * net run layer by layer (run.unfused): bit-identical on every convolution
 * path, both dtypes, with and without the ReLU; a residual -> relu likewise. */
static sr_module *fuse_net(const char *const *conv_kv, int64_t C, int relu, int residual, int bn, sr_dtype dt)
{
    sr_module *root = sr_sequential_new(), *body = residual ? sr_sequential_new() : root;
    char cs[16];
    snprintf(cs, sizeof cs, "%lld", (long long)C);
    if (!root || !body || add(body, "conv", check_layer("conv2d", conv_kv)) ||
        (bn && add(body, "bn", check_layer("batchnorm2d", (const char *[]){"num_features", cs, NULL}))))
        return NULL;
    if (residual) {
        sr_module *res = sr_residual_new();
        if (!res || add(res, "", body) || add(root, "block", res))
            return NULL;
    }
    if (relu && add(root, "relu", check_layer("relu", (const char *[]){NULL})))
        return NULL;
    sr_rng r;
    sr_rng_seed(&r, 11);
    sr_module_reset(root, &r);
    sr_module_set_training(root, 0);
    if (sr_module_to_dtype(root, dt))
        return NULL;
    sr_module *bnm = !bn ? NULL : residual ? body->children[1].m : root->children[1].m;
    /* Running statistics and affine parameters away from (0, 1, 1, 0). */
    for (int p = 0; bnm && p < 4; p++)
        for (int64_t c = 0; c < C; c++) {
            double v = p == 0 ? 0.5 + 0.1 * c : p == 1 ? 0.3 - 0.05 * c : p == 2 ? 0.2 * c - 0.4 : 0.5 + 0.25 * c;
            sr_set_flat(&bnm->params[p].value, c, v);
        }
    return root;
}

TEST(module_fused_conv_bn_relu_is_bit_identical)
{
    /* strided: the output is smaller than the input (no residual variant). */
    static const struct {
        const char *what, *kv[16];
        int64_t cin, cout, n, hw;
        int strided;
    } cases[] = {
        {"im2col 3x3", {"kernel_size", "3", "padding", "1", "algo", "im2col", NULL}, 3, 6, 2, 9, 0},
        {"im2col, images batched", {"kernel_size", "3", "padding", "1", "algo", "im2col", "split", "gemm", NULL},
         4, 5, 5, 4, 0},
        {"im2col, pixel chunks", {"kernel_size", "3", "padding", "1", "algo", "im2col", "max_workspace", "2000",
                                  NULL}, 3, 5, 2, 9, 0},
        {"1x1 in place", {"kernel_size", "1", NULL}, 5, 7, 2, 6, 0},
        {"1x1 stride 2 + bias", {"kernel_size", "1", "stride", "2", "bias", "true", NULL}, 5, 7, 3, 7, 1},
        {"taps", {"kernel_size", "3", "stride", "2", "padding", "1", "algo", "taps", NULL}, 3, 6, 2, 9, 1},
        {"winograd", {"kernel_size", "3", "padding", "1", "algo", "winograd", NULL}, 4, 6, 2, 7, 0},
        {"depthwise", {"kernel_size", "3", "padding", "1", "groups", "4", NULL}, 4, 8, 2, 6, 0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (int variant = 0; variant < 8; variant++) {
            /* 6, 7: conv -> relu without a batchnorm (a map of the ReLU alone) */
            sr_dtype dt = variant & 1 ? SR_F64 : SR_F32;
            int relu = variant >= 2, residual = variant == 4 || variant == 5, bn = variant < 6;
            if (residual && cases[ci].strided)
                continue;
            /* A residual adds the input back: channels in = out. */
            int64_t cout = residual ? cases[ci].cin : cases[ci].cout;
            char ci_s[16], co_s[16];
            snprintf(ci_s, sizeof ci_s, "%lld", (long long)cases[ci].cin);
            snprintf(co_s, sizeof co_s, "%lld", (long long)cout);
            const char *kv[24] = {"in_channels", ci_s, "out_channels", co_s};
            int nkv = 4;
            for (int j = 0; cases[ci].kv[j]; j++)
                kv[nkv++] = cases[ci].kv[j];
            kv[nkv] = NULL;
            sr_module *m = fuse_net(kv, cout, relu, residual, bn, dt);
            CHECK(m, "%s: net: %s", cases[ci].what, sr_errmsg());
            sr_tensor x = SR_TENSOR_INIT, ref = SR_TENSOR_INIT;
            CHECK_OK(check_randn(&x, 4, (int64_t[]){cases[ci].n, cases[ci].cin, cases[ci].hw, cases[ci].hw}, 5));
            CHECK_OK(sr_tensor_convert(&x, &x, dt));
            sr_run plain = SR_RUN_INIT, unfused = SR_RUN_INIT;
            unfused.unfused = 1;
            CHECK_OK(sr_module_forward(m, &x, &unfused));
            sr_tensor_copy(&ref, &m->out);
            for (int rep = 0; rep < 2; rep++) { /* the second pass reuses buffers */
                plain.nfused = 0;
                CHECK_OK(sr_module_forward(m, &x, &plain));
                /* conv-bn(-relu), and a residual's sum with the relu. */
                CHECK(plain.nfused == 1 + (residual && relu) && unfused.nfused == 0,
                      "%s: %d groups fused (%d unfused)", cases[ci].what, plain.nfused, unfused.nfused);
                CHECK(sr_same_shape(&m->out, &ref) && memcmp(sr_data(&m->out), sr_data(&ref),
                                                             (size_t)sr_numel(&ref) * sr_dtype_size(dt)) == 0,
                      "%s, %s%s%s: fused output differs (max %g)", cases[ci].what, sr_dtype_name(dt),
                      relu ? ", relu" : "", residual ? ", residual" : "", max_abs_diff(&m->out, &ref));
            }
            {
                /* Stacked JVP, 2 tangents per image: fused (conv-bn(-relu);
                 * a residual's sum is not fused in a JVP) against unfused. */
                int64_t k = 2, n = cases[ci].n;
                sr_tensor xv = SR_TENSOR_INIT, jref = SR_TENSOR_INIT;
                CHECK_OK(check_randn(&xv, 4, (int64_t[]){n * (1 + k), cases[ci].cin, cases[ci].hw, cases[ci].hw},
                                     9));
                CHECK_OK(sr_tensor_convert(&xv, &xv, dt));
                sr_run jp = SR_RUN_INIT, ju = SR_RUN_INIT;
                jp.n = ju.n = n, jp.k = ju.k = k, ju.unfused = 1;
                CHECK_OK(sr_module_jvp(m, &xv, &ju));
                sr_tensor_copy(&jref, &m->out);
                CHECK_OK(sr_module_jvp(m, &xv, &jp));
                CHECK(jp.nfused == 1 && ju.nfused == 0, "%s: jvp fused %d groups", cases[ci].what, jp.nfused);
                CHECK(sr_same_shape(&m->out, &jref) && memcmp(sr_data(&m->out), sr_data(&jref),
                                                              (size_t)sr_numel(&jref) * sr_dtype_size(dt)) == 0,
                      "%s, %s%s%s: fused jvp differs (max %g)", cases[ci].what, sr_dtype_name(dt),
                      relu ? ", relu" : "", residual ? ", residual" : "", max_abs_diff(&m->out, &jref));
                /* The tangents were masked somewhere (relu) and not all zero. */
                int64_t off = n * sr_rowsize(&jref), zt = 0, nzt = 0;
                for (int64_t i = off; i < sr_numel(&jref); i++)
                    zt += sr_get_flat(&jref, i) == 0, nzt += sr_get_flat(&jref, i) != 0;
                CHECK(nzt > 0 && (!relu || residual || zt > 0), "%s: tangent pattern not exercised", cases[ci].what);
                sr_tensor_free(&xv);
                sr_tensor_free(&jref);
            }
            if (residual) {
                /* A tap inside the residual with stop_after_taps: the pass
                 * ends inside the fused group, at the residual (child 0),
                 * and the tap sees the unfused conv output. */
                sr_module *res = m->children[0].m, *conv = res->children[0].m->children[0].m;
                const sr_module *taps[1] = {conv};
                sr_tensor got[1] = {SR_TENSOR_INIT};
                sr_run tr = SR_RUN_INIT;
                tr.ntaps = 1, tr.taps = taps, tr.tap_out = got, tr.stop_after_taps = 1;
                CHECK_OK(sr_module_forward(m, &x, &tr));
                CHECK(tr.stopped && m->stop_at == 0, "%s: stopped %d at child %d", cases[ci].what, tr.stopped,
                      m->stop_at);
                sr_run ur = SR_RUN_INIT;
                ur.unfused = 1;
                CHECK_OK(sr_module_forward(conv, &x, &ur));
                CHECK(max_abs_diff(&got[0], &conv->out) == 0, "%s: tap inside the residual differs",
                      cases[ci].what);
                sr_tensor_free(&got[0]);
            }
            /* Some outputs are negative: the map and the ReLU both acted. */
            int neg = 0, zero = 0;
            for (int64_t i = 0; i < sr_numel(&ref); i++)
                neg += sr_get_flat(&ref, i) < 0, zero += sr_get_flat(&ref, i) == 0;
            CHECK(relu ? zero > 0 && neg == 0 : neg > 0, "%s: output sign pattern is not exercised", cases[ci].what);
            sr_tensor_free(&x);
            sr_tensor_free(&ref);
            sr_module_release(m);
        }
}

/* A BatchNorm whose num_features does not match the convolution before it:
 * the pair is not fused, and the forward and the JVP both fail with the
 * BatchNorm's own message naming the shapes (as unfused). */
/* float32 inputs of the mismatch tests: x (2, 3, 5, 5) and a stacked JVP
 * input xv with 2 tangents per image. */
static int mismatch_inputs(sr_tensor *x, sr_tensor *xv)
{
    return check_randn(x, 4, (int64_t[]){2, 3, 5, 5}, 1) || sr_tensor_convert(x, x, SR_F32) ||
           check_randn(xv, 4, (int64_t[]){6, 3, 5, 5}, 2) || sr_tensor_convert(xv, xv, SR_F32);
}

/* A residual whose body changes the channel count over an identity
 * shortcut: the sum fused into the body's conv -> batchnorm map, the
 * separate sum (unfused) and the JVP all refuse it with the same message. */
TEST(module_residual_branch_shape_mismatch_is_an_error)
{
    const char *conv[] = {"in_channels", "3", "out_channels", "4", "kernel_size", "3", "padding", "1", NULL};
    sr_module *m = sr_sequential_new(), *body = sr_sequential_new(), *res = sr_residual_new();
    CHECK(m && body && res && !add(body, "conv", check_layer("conv2d", conv)) &&
              !add(body, "bn", check_layer("batchnorm2d", (const char *[]){"num_features", "4", NULL})) &&
              !add(res, "", body) && !add(m, "block", res) &&
              !add(m, "relu", check_layer("relu", (const char *[]){NULL})),
          "net: %s", sr_errmsg());
    sr_module_set_training(m, 0);
    sr_tensor x = SR_TENSOR_INIT, xv = SR_TENSOR_INIT;
    CHECK_OK(mismatch_inputs(&x, &xv));
    sr_run run = SR_RUN_INIT, un = SR_RUN_INIT, jr = SR_RUN_INIT;
    CHECK_ERR(sr_module_forward(m, &x, &run), "residual: branch outputs (2,4,5,5) and (2,3,5,5) differ in shape");
    un.unfused = 1;
    CHECK_ERR(sr_module_forward(m, &x, &un), "differ in shape");
    jr.n = 2, jr.k = 2;
    CHECK_ERR(sr_module_jvp(m, &xv, &jr), "differ in shape");
    sr_tensor_free(&x);
    sr_tensor_free(&xv);
    sr_module_release(m);
}

/* A tap ends a fused group at the tapped layer (its output is the group's,
 * so it is materialised): conv -> bn [tap] -> relu runs conv -> bn fused
 * and the relu alone; a tap on the conv leaves nothing to fuse.  Outputs
 * and taps stay bit-identical to the unfused pass. */
TEST(module_fusion_ends_at_a_tap)
{
    const char *kv[] = {"in_channels", "3", "out_channels", "4", "kernel_size", "3", "padding", "1", NULL};
    sr_module *m = fuse_net(kv, 4, 1, 0, 1, SR_F32);
    CHECK(m, "net: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){2, 3, 6, 6}, 3));
    CHECK_OK(sr_tensor_convert(&x, &x, SR_F32));
    for (int at = 0; at < 3; at++) {
        const sr_module *taps[1] = {m->children[at].m};
        sr_tensor got[1] = {SR_TENSOR_INIT}, want[1] = {SR_TENSOR_INIT}, out = SR_TENSOR_INIT;
        sr_run ur = SR_RUN_INIT, fr = SR_RUN_INIT;
        ur.unfused = 1, ur.ntaps = fr.ntaps = 1, ur.taps = fr.taps = taps, ur.tap_out = want, fr.tap_out = got;
        CHECK_OK(sr_module_forward(m, &x, &ur));
        CHECK_OK(sr_tensor_copy(&out, &m->out));
        CHECK_OK(sr_module_forward(m, &x, &fr));
        /* conv tapped: nothing fuses; bn tapped: conv -> bn; relu: all three */
        CHECK(fr.nfused == (at > 0) && ur.nfused == 0, "tap on child %d: %d groups fused", at, fr.nfused);
        CHECK(max_abs_diff(&got[0], &want[0]) == 0 && sr_same_shape(&got[0], &want[0]),
              "tap on child %d differs from the unfused pass", at);
        CHECK(max_abs_diff(&m->out, &out) == 0, "output with a tap on child %d differs", at);
        sr_tensor_free(&got[0]);
        sr_tensor_free(&want[0]);
        sr_tensor_free(&out);
    }
    sr_tensor_free(&x);
    sr_module_release(m);
}

TEST(module_fusion_keeps_the_channel_mismatch_error)
{
    const char *conv[] = {"in_channels", "3", "out_channels", "6", "kernel_size", "3", "padding", "1", NULL};
    sr_module *m = sr_sequential_new();
    CHECK(m && !add(m, "conv", check_layer("conv2d", conv)) &&
              !add(m, "bn", check_layer("batchnorm2d", (const char *[]){"num_features", "5", NULL})) &&
              !add(m, "relu", check_layer("relu", (const char *[]){NULL})),
          "net: %s", sr_errmsg());
    sr_module_set_training(m, 0);
    sr_tensor x = SR_TENSOR_INIT, xv = SR_TENSOR_INIT;
    CHECK_OK(mismatch_inputs(&x, &xv));
    sr_run run = SR_RUN_INIT, jr = SR_RUN_INIT;
    CHECK_ERR(sr_module_forward(m, &x, &run), "has 6 channels but num_features=5");
    CHECK(run.nfused == 0, "a mismatched pair was fused");
    jr.n = 2, jr.k = 2;
    CHECK_ERR(sr_module_jvp(m, &xv, &jr), "has 6 channels but num_features=5");
    sr_tensor_free(&x);
    sr_tensor_free(&xv);
    sr_module_release(m);
}

/* The pool is bounded (tensor/tensor.h): after a large batch, a run of small
 * passes frees the large blocks (idle, and beyond twice the recent peak),
 * while the small passes themselves keep every block they use (a warm pass
 * allocates nothing).  The pool once kept every block it ever held. */
TEST(module_pool_is_bounded_by_recent_peaks)
{
    sr_module *block = NULL, *m = make_net(&block);
    CHECK(m, "net: %s", sr_errmsg());
    sr_tensor big = SR_TENSOR_INIT, small = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&big, 4, (int64_t[]){256, 3, 32, 32}, 1));
    CHECK_OK(check_randn(&small, 4, (int64_t[]){2, 3, 32, 32}, 2));
    for (int i = 0; i < 2; i++) {
        sr_run run = SR_RUN_INIT;
        CHECK_OK(sr_module_forward(m, &big, &run));
    }
    size_t after_big = m->pool.bytes;
    CHECK(after_big > ((size_t)32 << 20), "the large passes pooled only %zu bytes", after_big);
    long fresh_at = 0;
    for (int pass = 1; pass <= 2 * SR_POOL_WINDOW + 2; pass++) {
        sr_run run = SR_RUN_INIT;
        CHECK_OK(sr_module_forward(m, &small, &run));
        if (pass == SR_POOL_WINDOW + 2)
            fresh_at = m->pool.fresh;
    }
    int64_t most = 0;
    for (int i = 0; i < SR_POOL_WINDOW; i++)
        most = m->pool.peaks[i] > most ? m->pool.peaks[i] : most;
    CHECK(most > 0 && m->pool.bytes <= (size_t)most * SR_POOL_PEAKS_MULT + SR_POOL_SLACK,
          "pool %zu bytes after the small passes (was %zu), recent peak %lld", m->pool.bytes, after_big,
          (long long)most);
    /* what the small passes hold in a model that never saw the large batch */
    sr_module *block2 = NULL, *m2 = make_net(&block2);
    CHECK(m2, "net: %s", sr_errmsg());
    for (int pass = 1; pass <= 4; pass++) {
        sr_run run = SR_RUN_INIT;
        CHECK_OK(sr_module_forward(m2, &small, &run));
    }
    size_t alone = m2->pool.bytes;
    sr_module_release(m2);
    CHECK(m->pool.bytes <= 2 * alone + ((size_t)1 << 20), "pool %zu bytes (%zu after the large batch), %zu without it",
          m->pool.bytes, after_big, alone);
    CHECK(m->pool.fresh == fresh_at, "warm small passes allocated %ld blocks", m->pool.fresh - fresh_at);
    CHECK(m->pool.freed > 0, "nothing freed");
    sr_tensor_free(&big);
    sr_tensor_free(&small);
    sr_module_release(m);
}
