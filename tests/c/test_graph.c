/* test_graph.c - the graph container (nn/graph.c) and the two-input layers
 * it runs (nn/arith.c): derivatives of a DAG with shared values, broadcast
 * products and quotients against finite differences and the adjoint
 * identity; fusion (conv -> bn -> add -> relu with the shortcut computed out
 * of order) bit-identical to the unfused pass and to the native residual;
 * taps; buffers going back to the pool; thread counts; bad graphs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn/layers.h"
#include "check.h"
#include "test.h"

/* Add node name = layer(inputs...) (the layer's reference moves to g);
 * returns its value id or -1. */
static int node(sr_module *g, const char *name, sr_module *layer, int nin, const int *in)
{
    if (!layer)
        return -1;
    int v = sr_graph_add(g, name, layer, nin, in);
    sr_module_release(layer);
    return v;
}
#define NODE(g, name, layer, ...) node(g, name, layer, sizeof((int[]){__VA_ARGS__}) / sizeof(int), (int[]){__VA_ARGS__})
#define L(name, ...) check_layer(name, (const char *[]){__VA_ARGS__, NULL})

static double max_abs_diff(const sr_tensor *a, const sr_tensor *b)
{
    if (!sr_same_shape(a, b))
        return 1e300;
    double w = 0;
    for (int64_t i = 0; i < sr_numel(a); i++)
        w = fmax(w, fabs(sr_get_flat(a, i) - sr_get_flat(b, i)));
    return w;
}

static int same_bits(const sr_tensor *a, const sr_tensor *b)
{
    return a->dtype == b->dtype && sr_same_shape(a, b) &&
           memcmp(sr_data(a), sr_data(b), (size_t)sr_numel(a) * sr_dtype_size(a->dtype)) == 0;
}

/* A DAG with every kind of edge: c1 read by four nodes, a broadcast
 * product (an SE-like gate), a quotient by a positive denominator, a
 * trainable constant subtracted from (reverse), a sum of two branches.
 * The conv splits its work by images: the graph's results must not depend
 * on the thread count, and a GEMM split across threads may round
 * differently (the sanitizer build's generic kernels do). */
static sr_module *smooth_graph(void)
{
    sr_module *g = sr_graph_new();
    int c1 = NODE(g, "c1", L("conv2d", "in_channels", "3", "out_channels", "4", "kernel_size", "3", "padding", "1",
                             "algo", "im2col", "split", "images"), 0);
    int ge = NODE(g, "gelu", L("gelu", "approximate", "none"), c1);
    int po = NODE(g, "pool", L("adaptive_avgpool2d", "output_size", "1"), ge);
    int se = NODE(g, "gate", L("mul", "trainable", "false"), ge, po);
    int sq = NODE(g, "square", L("mul", "trainable", "false"), c1, c1);
    int den = NODE(g, "den", L("add", "value", "1"), sq);
    int q = NODE(g, "quot", L("div", "trainable", "false"), se, den);
    int sh = NODE(g, "shift", L("sub", "shape", "4,1,1", "reverse", "true", "trainable", "true"), q);
    int out = NODE(g, "sum", L("add", "trainable", "false"), sh, c1);
    int fl = NODE(g, "flat", L("flatten", "start_dim", "1"), out);
    if (fl < 0 || !(c1 && ge && po && se && sq && den && q && sh && out)) {
        sr_module_release(g);
        return NULL;
    }
    return g;
}

TEST(graph_derivatives_match_finite_differences)
{
    sr_module *g = smooth_graph();
    CHECK(g, "graph: %s", sr_errmsg());
    check_fill_params(g, 3, 0.5);
    CHECK_OK(sr_module_to_dtype(g, SR_F64));
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){2, 3, 5, 5}, 7));
    check_result r;
    CHECK_OK(check_module(g, &x, 3, 1e-6, 11, &r));
    CHECK(r.primal < 1e-12, "jvp primal rows differ from forward by %g", r.primal);
    CHECK(r.jvp_fd < 1e-6, "jvp vs finite differences: %g", r.jvp_fd);
    CHECK(r.adjoint < 1e-12, "adjoint identity: %g", r.adjoint);
    CHECK(r.param_fd < 1e-6, "parameter gradients vs finite differences: %g", r.param_fd);
    /* the trainable constant got a gradient, the buffers did not */
    sr_param *shift = sr_module_find_param(g, "shift.value"), *one = sr_module_find_param(g, "den.value");
    CHECK(shift && shift->trainable && shift->grad.storage && one && !one->trainable && !one->grad.storage,
          "constant gradients: trainable %p, buffer %p", (void *)shift->grad.storage, (void *)one->grad.storage);
    sr_tensor_free(&x);
    sr_module_release(g);
}

TEST(graph_threads_agree)
{
    sr_module *g = smooth_graph();
    CHECK(g, "graph: %s", sr_errmsg());
    check_fill_params(g, 3, 0.5);
    sr_tensor x = SR_TENSOR_INIT, xv = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&x, SR_F32, 4, (int64_t[]){4, 3, 6, 6}, 1));
    CHECK_OK(check_randn_dt(&xv, SR_F32, 4, (int64_t[]){12, 3, 6, 6}, 2));
    CHECK_OK(check_threads_agree(g, &x, NULL, &xv, 4, 2));
    sr_tensor_free(&x);
    sr_tensor_free(&xv);
    sr_module_release(g);
}

/* A ResNet basic block with a projection shortcut, as ONNX lists it: the
 * main branch first, the shortcut after, so the sum's other operand is not
 * there when conv2 -> bn2 -> add -> relu is reached. */
static void set_bn(sr_module *bn, int64_t C, double off)
{
    for (int p = 0; p < 4; p++)
        for (int64_t c = 0; c < C; c++)
            sr_set_flat(&bn->params[p].value, c, off + (p == 3 ? 0.5 + 0.25 * c : 0.1 * c - 0.2 * p));
}

static sr_module *block_graph(sr_dtype dt, int relu2)
{
    const char *c33[] = {"in_channels", "4", "out_channels", "4", "kernel_size", "3", "padding", "1", NULL};
    sr_module *g = sr_graph_new();
    int a = NODE(g, "conv1", check_layer("conv2d", c33), 0);
    a = NODE(g, "bn1", L("batchnorm2d", "num_features", "4"), a);
    a = NODE(g, "relu1", L("relu", NULL), a);
    a = NODE(g, "conv2", check_layer("conv2d", c33), a);
    a = NODE(g, "bn2", L("batchnorm2d", "num_features", "4"), a);
    int s = NODE(g, "down", L("conv2d", "in_channels", "4", "out_channels", "4", "kernel_size", "1", "bias", "false"), 0);
    s = NODE(g, "downbn", L("batchnorm2d", "num_features", "4"), s);
    a = NODE(g, "sum", L("add", "trainable", "false"), a, s);
    if (relu2)
        a = NODE(g, "relu2", L("relu", NULL), a);
    if (a < 0 || s < 0) {
        sr_module_release(g);
        return NULL;
    }
    check_reset(g, 5);
    sr_module_set_training(g, 0);
    set_bn(g->children[1].m, 4, 0.3);
    set_bn(g->children[4].m, 4, -0.2);
    set_bn(g->children[6].m, 4, 0.1);
    if (sr_module_to_dtype(g, dt)) {
        sr_module_release(g);
        return NULL;
    }
    return g;
}

TEST(graph_fusion_is_bit_identical)
{
    for (int d = 0; d < 4; d++) {
        /* d >= 2: the sum is the output, no ReLU after it */
        sr_dtype dt = d & 1 ? SR_F64 : SR_F32;
        int relu2 = d < 2;
        sr_module *g = block_graph(dt, relu2);
        CHECK(g, "graph: %s", sr_errmsg());
        sr_tensor x = SR_TENSOR_INIT, ref = SR_TENSOR_INIT, xv = SR_TENSOR_INIT, jref = SR_TENSOR_INIT;
        CHECK_OK(check_randn_dt(&x, dt, 4, (int64_t[]){2, 4, 7, 7}, 3));
        sr_run un = SR_RUN_INIT;
        un.unfused = 1;
        CHECK_OK(sr_module_forward(g, &x, &un));
        CHECK_OK(sr_tensor_copy(&ref, &g->out));
        for (int rep = 0; rep < 2; rep++) {
            sr_run fr = SR_RUN_INIT;
            CHECK_OK(sr_module_forward(g, &x, &fr));
            /* conv1-bn1-relu1, down-downbn, conv2-bn2-sum-relu2 */
            CHECK(fr.nfused == 3 && un.nfused == 0, "%s: %d groups fused", sr_dtype_name(dt), fr.nfused);
            CHECK(same_bits(&g->out, &ref), "%s: fused forward differs by %g", sr_dtype_name(dt),
                  max_abs_diff(&g->out, &ref));
        }
        /* With the ReLU some outputs are clipped, without it some are negative. */
        int zero = 0, pos = 0, neg = 0;
        for (int64_t i = 0; i < sr_numel(&ref); i++)
            zero += sr_get_flat(&ref, i) == 0, pos += sr_get_flat(&ref, i) > 0, neg += sr_get_flat(&ref, i) < 0;
        CHECK(pos > 0 && (relu2 ? zero > 0 && !neg : neg > 0), "output pattern not exercised (%d zeros, %d < 0)",
              zero, neg);
        if (!relu2) {
            sr_tensor_free(&x);
            sr_tensor_free(&ref);
            sr_module_release(g);
            continue;
        }

        /* The same block as the native sequential{residual{body, shortcut}, relu}. */
        sr_module *seq = sr_sequential_new(), *res = sr_residual_new(), *body = sr_sequential_new(),
                  *sc = sr_sequential_new();
        for (int i = 0; i < 5; i++)
            sr_module_add_child(body, g->children[i].name, g->children[i].m);
        sr_module_add_child(sc, "down", g->children[5].m);
        sr_module_add_child(sc, "downbn", g->children[6].m);
        sr_module_add_child(res, "", body);
        sr_module_add_child(res, "downsample", sc);
        sr_module_add_child(seq, "block", res);
        sr_module_add_child(seq, "relu", g->children[8].m);
        sr_module_release(body), sr_module_release(sc), sr_module_release(res);
        sr_run nr = SR_RUN_INIT;
        CHECK_OK(sr_module_forward(seq, &x, &nr));
        CHECK(same_bits(&seq->out, &ref), "%s: the native residual block differs by %g", sr_dtype_name(dt),
              max_abs_diff(&seq->out, &ref));
        sr_module_release(seq);

        /* JVP: the sum is not fused (its addend's tangents would need the
         * map's JVP), the conv -> bn pairs are. */
        int64_t n = 2, k = 3;
        CHECK_OK(check_randn_dt(&xv, dt, 4, (int64_t[]){n * (1 + k), 4, 7, 7}, 4));
        sr_run ju = SR_RUN_INIT, jf = SR_RUN_INIT;
        ju.n = jf.n = n, ju.k = jf.k = k, ju.unfused = 1;
        CHECK_OK(sr_module_jvp(g, &xv, &ju));
        CHECK_OK(sr_tensor_copy(&jref, &g->out));
        CHECK_OK(sr_module_jvp(g, &xv, &jf));
        CHECK(jf.nfused == 3, "%s: jvp fused %d groups", sr_dtype_name(dt), jf.nfused);
        CHECK(same_bits(&g->out, &jref), "%s: fused jvp differs by %g", sr_dtype_name(dt),
              max_abs_diff(&g->out, &jref));
        sr_tensor *all[] = {&x, &ref, &xv, &jref};
        for (size_t i = 0; i < 4; i++)
            sr_tensor_free(all[i]);
        sr_module_release(g);
    }
}

/* A tap in the middle of a fusable chain ends it there; the pass stops
 * at the tap; backward from the tap gives the gradient of that value. */
TEST(graph_taps_stop_and_backward_from_them)
{
    sr_module *g = block_graph(SR_F64, 1);
    CHECK(g, "graph: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, want = SR_TENSOR_INIT, w = SR_TENSOR_INIT, gx = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){2, 4, 5, 5}, 3));
    sr_module *bn2 = sr_module_find(g, "bn2");
    CHECK(bn2, "find: %s", sr_errmsg());
    const sr_module *taps[1] = {bn2};
    sr_tensor got[1] = {SR_TENSOR_INIT};
    sr_run un = SR_RUN_INIT;
    un.unfused = 1;
    sr_run_tap(&un, taps, got);
    CHECK_OK(sr_module_forward(g, &x, &un));
    CHECK_OK(sr_tensor_copy(&want, &got[0]));
    sr_tensor_free(&got[0]);
    sr_run tr = SR_RUN_INIT;
    sr_run_tap(&tr, taps, got);
    CHECK_OK(sr_module_forward(g, &x, &tr));
    CHECK(tr.stopped && same_bits(&got[0], &want) && same_bits(&g->out, &want),
          "tap: stopped %d, differs by %g", tr.stopped, max_abs_diff(&got[0], &want));
    CHECK(tr.nfused == 2, "%d groups fused before the tap (conv1-bn1-relu1, conv2-bn2)", tr.nfused);
    sr_tensor_free(&got[0]);

    /* Backward from the tap: <w, J_tap v> = <J_tapᵀ w, v> against a JVP to the tap. */
    CHECK_OK(check_randn(&w, want.ndim, want.shape, 8));
    sr_run br = SR_RUN_INIT;
    br.save = 1;
    sr_run_tap(&br, taps, got);
    CHECK_OK(sr_module_forward(g, &x, &br));
    CHECK_OK(sr_module_backward(g, &w, &br));
    CHECK_OK(sr_tensor_copy(&gx, &g->gin));
    sr_tensor_free(&got[0]);
    sr_tensor xv = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&xv, 4, (int64_t[]){4, 4, 5, 5}, 9));
    memcpy(sr_f64(&xv), sr_f64(&x), (size_t)sr_numel(&x) * sizeof(double));
    sr_run jr = SR_RUN_INIT;
    jr.n = 2, jr.k = 1;
    sr_run_tap(&jr, taps, got);
    CHECK_OK(sr_module_jvp(g, &xv, &jr));
    double lhs = 0, rhs = 0;
    int64_t ys = sr_numel(&want), xs = sr_numel(&x);
    for (int64_t i = 0; i < ys; i++)
        lhs += sr_f64(&w)[i] * sr_f64(&got[0])[ys + i];
    for (int64_t i = 0; i < xs; i++)
        rhs += sr_f64(&gx)[i] * sr_f64(&xv)[xs + i];
    CHECK(fabs(lhs - rhs) < 1e-10 * (fabs(lhs) + 1), "adjoint at the tap: %g vs %g", lhs, rhs);
    sr_tensor *all[] = {&x, &want, &w, &gx, &xv, &got[0]};
    for (size_t i = 0; i < 6; i++)
        sr_tensor_free(all[i]);
    sr_module_release(g);
}

/* A warm pass allocates nothing: every value went back to the pool. */
TEST(graph_gives_values_back_to_the_pool)
{
    sr_module *g = block_graph(SR_F32, 1);
    CHECK(g, "graph: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&x, SR_F32, 4, (int64_t[]){3, 4, 9, 9}, 3));
    for (int unfused = 0; unfused < 2; unfused++)
        for (int pass = 0; pass < 3; pass++) {
            sr_run r = SR_RUN_INIT;
            r.unfused = unfused;
            long before = g->pool.fresh;
            CHECK_OK(sr_module_forward(g, &x, &r));
            CHECK(pass == 0 || g->pool.fresh == before, "unfused %d pass %d: %ld fresh buffers", unfused, pass,
                  g->pool.fresh - before);
            int held = 0;
            for (int i = 0; i < g->nchildren; i++)
                held += g->children[i].m->out.storage != NULL;
            CHECK(held == 1, "unfused %d pass %d: %d nodes still hold an output", unfused, pass, held);
        }
    sr_tensor_free(&x);
    sr_module_release(g);
}

TEST(graph_rejects_bad_graphs_with_clear_errors)
{
    sr_module *g = sr_graph_new(), *relu = L("relu", NULL), *add2 = L("add", "trainable", "false");
    CHECK(g && relu && add2, "layers: %s", sr_errmsg());
    CHECK_ERR(sr_graph_add(g, "", relu, 1, (int[]){0}), "needs a name");
    CHECK_ERR(sr_graph_add(g, "input", relu, 1, (int[]){0}), "not 'input'");
    CHECK_ERR(sr_graph_add(g, "r", relu, 1, (int[]){1}), "only values 0..0 exist");
    CHECK(sr_graph_add(g, "r", relu, 1, (int[]){0}) == 1, "add: %s", sr_errmsg());
    CHECK_ERR(sr_graph_add(g, "r", relu, 1, (int[]){0}), "two nodes named 'r'");
    CHECK_ERR(sr_graph_add(g, "s", add2, 1, (int[]){1}), "takes 2 inputs, given 1");
    CHECK_ERR(sr_graph_add(g, "t", relu, 2, (int[]){0, 1}), "takes 1 input, given 2");
    CHECK_ERR(sr_graph_set_output(g, 7), "output value 7 does not exist");
    CHECK_ERR(sr_graph_value(g, "nope"), "no node named 'nope'");
    CHECK(sr_graph_add(g, "s", add2, 2, (int[]){0, 1}) == 2, "add: %s", sr_errmsg());
    /* operands that do not broadcast: the error names both shapes */
    sr_module *bad = sr_graph_new(), *pool = L("avgpool2d", "kernel_size", "2");
    CHECK(sr_graph_add(bad, "p", pool, 1, (int[]){0}) == 1 && sr_graph_add(bad, "s", add2, 2, (int[]){0, 1}) == 2,
          "bad: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&x, SR_F32, 4, (int64_t[]){1, 2, 4, 4}, 1));
    sr_run r = SR_RUN_INIT;
    CHECK_ERR(sr_module_forward(bad, &x, &r), "(1,2,4,4) and (1,2,2,2) do not broadcast");
    CHECK_ERR(sr_module_forward(bad, &x, &r), "s: ");
    /* an empty graph */
    sr_module *empty = sr_graph_new();
    CHECK_ERR(sr_module_forward(empty, &x, &r), "graph: has no nodes");
    sr_tensor_free(&x);
    sr_module_release(empty);
    sr_module_release(bad);
    sr_module_release(pool);
    sr_module_release(relu);
    sr_module_release(add2);
    sr_module_release(g);
}

/* The layers of two inputs and the reshuffles attention uses, in one
 * graph: products of values (matmul), softmax over a middle dim, a concat
 * of values and a constant piece, max / min / pow_of of two values, a
 * reduce by max: derivatives against central differences and the adjoint
 * identity (tangents through argmax and the chosen operand), parameter
 * gradients included. */
TEST(graph_two_input_layers_derivatives)
{
    sr_module *g = sr_graph_new();
    int q = NODE(g, "q", L("linear", "in_features", "6", "out_features", "5"), 0);
    int k = NODE(g, "k", L("linear", "in_features", "6", "out_features", "5"), 0);
    int kt = NODE(g, "kt", L("permute", "dims", "0,2,1"), k);
    int att = NODE(g, "att", check_layer("matmul", (const char *[]){NULL}), q, kt);
    int sm = NODE(g, "sm", L("softmax", "dim", "1"), att);
    int v = NODE(g, "v", L("linear", "in_features", "6", "out_features", "3"), 0);
    int o = NODE(g, "o", check_layer("matmul", (const char *[]){NULL}), sm, v);
    int sl = NODE(g, "sl", L("slice", "dim", "2", "start", "1", "stop", "4"), 0);
    sr_module *cat = L("concat", "dim", "1");
    CHECK(cat, "concat: %s", sr_errmsg());
    sr_param *piece = sr_concat_add_constant(cat, 1, 2, (int64_t[]){2, 3}, 1);
    CHECK(piece, "constant piece: %s", sr_errmsg());
    int c = node(g, "cat", cat, 2, (int[]){o, sl}); /* (N, 4 + 2 + 4, 3) */
    int base = NODE(g, "base", L("sigmoid", NULL), c);
    int ex = NODE(g, "ex", L("softplus", NULL), c);
    int pw = NODE(g, "pw", L("pow_of", NULL), base, ex);
    int mx = NODE(g, "mx", L("max", NULL), pw, base);
    int sh = NODE(g, "sh", L("mul", "value", "0.7"), c);
    int mn = NODE(g, "mn", L("min", NULL), sh, mx);
    int red = NODE(g, "red", L("reduce", "dims", "2", "op", "max"), mn);
    int sel = NODE(g, "sel", L("index_select", "dim", "1", "index", "0,3,3,4,9"), red);
    CHECK(q > 0 && k > 0 && kt > 0 && att > 0 && sm > 0 && v > 0 && o > 0 && sl > 0 && c > 0 && base > 0 && ex > 0 &&
              pw > 0 && mx > 0 && sh > 0 && mn > 0 && red > 0 && sel > 0,
          "graph: %s", sr_errmsg());
    check_fill_params(g, 5, 0.7);
    CHECK_OK(sr_module_to_dtype(g, SR_F64));
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 3, (int64_t[]){3, 4, 6}, 2));
    check_result r;
    CHECK_OK(check_module(g, &x, 3, 1e-6, 17, &r));
    CHECK(r.primal < 1e-12, "jvp primal rows differ from forward by %g", r.primal);
    CHECK(r.jvp_fd < 1e-6, "jvp vs finite differences: %g", r.jvp_fd);
    CHECK(r.adjoint < 1e-12, "adjoint identity: %g", r.adjoint);
    CHECK(r.param_fd < 1e-6, "parameter gradients vs finite differences: %g", r.param_fd);
    CHECK(piece->grad.storage, "the trainable constant piece got no gradient");
    sr_tensor_free(&x);
    sr_module_release(g);
}

/* Building a graph of n nodes and aliasing each (as the ONNX importer
 * aliases every value) takes time linear in n: a name check per node was a
 * scan of the nodes before it, an alias a walk of the tree (8,000 nodes
 * 0.32 s, 10^5 not built in 60 s).  CPU seconds at 2·10^4 and 10^5 nodes:
 * their ratio is 5 when linear, 25 when quadratic. */
static double chain_seconds(int n)
{
    sr_module *g = sr_graph_new(), *relu = L("relu", NULL);
    char **names = malloc((size_t)n * 2 * sizeof *names);
    if (!g || !relu || !names)
        return -1;
    for (int i = 0; i < 2 * n; i++) {
        names[i] = malloc(16);
        snprintf(names[i], 16, "%s%d", i < n ? "r" : "v", i % n);
    }
    clock_t t0 = clock();
    int ok = 1;
    for (int i = 0; i < n && ok; i++)
        ok = sr_graph_add(g, names[i], relu, 1, (int[]){i}) == i + 1;
    ok = ok && !sr_module_set_aliases(g, n, (const char *const *)names + n, (const char *const *)names) &&
         sr_graph_value(g, names[n - 1]) == n && sr_module_find(g, names[2 * n - 1]) == relu;
    double t = (double)(clock() - t0) / CLOCKS_PER_SEC;
    for (int i = 0; i < 2 * n; i++)
        free(names[i]);
    free(names);
    sr_module_release(relu);
    sr_module_release(g);
    return ok ? t : -1;
}

TEST(graph_builds_and_aliases_in_linear_time)
{
    /* best of 2 each: on a loaded machine (and with fresh pages slow to
     * touch) one run can take several times another; the quadratic walk
     * this guards against took 30 s at 10^5 nodes, far beyond the bound */
    double t1 = chain_seconds(20000), t2 = chain_seconds(100000);
    double u1 = chain_seconds(20000), u2 = chain_seconds(100000);
    CHECK(t1 >= 0 && t2 >= 0 && u1 >= 0 && u2 >= 0, "building the chains: %s", sr_errmsg());
    t1 = u1 < t1 ? u1 : t1, t2 = u2 < t2 ? u2 : t2;
    printf("     2e4 nodes %.3f s, 1e5 nodes %.3f s: ratio %.1f (linear 5, quadratic 25)\n", t1, t2, t2 / t1);
    CHECK(t2 < 15 * t1 + 0.25, "10^5 nodes took %.3f s, 2·10^4 %.3f s", t2, t1);
}
