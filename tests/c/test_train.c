/* test_train.c - losses, optimiser updates, the data pipeline's random
 * parts, PGD and the LLR gradient. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/augment.h"
#include "nn/layers.h"
#include "train/train.h"
#include "check.h"
#include "test.h"

/* linear(din -> 4), gelu, linear(4 -> k): smooth, so ∇ₓℓ depends on θ
 * with non-zero second derivatives (what LLR's outer gradient needs). */
static sr_module *make_mlp(const char *din, const char *k, sr_dtype dt, uint64_t seed)
{
    sr_module *parts[3] = {
        check_layer("linear", (const char *[]){"in_features", din, "out_features", "4", NULL}),
        check_layer("gelu", (const char *[]){NULL}),
        check_layer("linear", (const char *[]){"in_features", "4", "out_features", k, NULL}),
    };
    return check_sequential(parts, 3, seed, dt);
}

TEST(train_cross_entropy_hand_example)
{
    /* logits [[1, 2, 3], [0, 0, 0]], labels [2, 1]:
     * ℓ0 = log(e + e² + e³) − 3, ℓ1 = log 3; grads (softmax − onehot)/2. */
    sr_tensor z = SR_TENSOR_INIT, g = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&z, SR_F64, 2, (int64_t[]){2, 3}));
    double v[6] = {1, 2, 3, 0, 0, 0};
    for (int i = 0; i < 6; i++)
        sr_set_flat(&z, i, v[i]);
    int64_t lab[2] = {2, 1};
    double loss;
    int64_t correct;
    CHECK_OK(sr_cross_entropy(&z, lab, &loss, &correct, &g));
    double s = exp(1) + exp(2) + exp(3);
    double l0 = log(s) - 3, l1 = log(3.0);
    CHECK(fabs(loss - (l0 + l1) / 2) < 1e-14, "loss %.17g want %.17g", loss, (l0 + l1) / 2);
    CHECK(correct == 1, "correct %lld (row 0 is argmax 2 = label; row 1 ties -> argmax 0)", (long long)correct);
    double want[6] = {exp(1) / s / 2, exp(2) / s / 2, (exp(3) / s - 1) / 2, 1.0 / 6, (1.0 / 3 - 1) / 2, 1.0 / 6};
    for (int i = 0; i < 6; i++)
        CHECK(fabs(sr_get_flat(&g, i) - want[i]) < 1e-15, "grad[%d] %g want %g", i, sr_get_flat(&g, i), want[i]);
    /* Weighted form: per-row losses and w_i scaling. */
    double w[2] = {0.25, -2}, ls[2];
    int64_t pred[2];
    CHECK_OK(sr_cross_entropy_ex(&z, lab, w, &loss, NULL, ls, pred, &g));
    CHECK(fabs(ls[0] - l0) < 1e-14 && fabs(ls[1] - l1) < 1e-14, "per-row losses %g %g", ls[0], ls[1]);
    CHECK(fabs(loss - (0.25 * l0 - 2 * l1)) < 1e-14, "weighted loss %g", loss);
    CHECK(pred[0] == 2 && pred[1] == 0, "pred %lld %lld", (long long)pred[0], (long long)pred[1]);
    CHECK(fabs(sr_get_flat(&g, 4) - (-2) * (1.0 / 3 - 1)) < 1e-15, "weighted grad %g", sr_get_flat(&g, 4));
    sr_tensor_free(&z);
    sr_tensor_free(&g);
}

TEST(train_cross_entropy_grad_vs_fd_f64)
{
    sr_tensor z = SR_TENSOR_INIT, g = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&z, 2, (int64_t[]){5, 7}, 3));
    int64_t lab[5] = {0, 6, 3, 3, 1};
    double loss;
    CHECK_OK(sr_cross_entropy(&z, lab, &loss, NULL, &g));
    double worst = 0, h = 1e-6;
    for (int64_t i = 0; i < 35; i++) {
        double x0 = sr_get_flat(&z, i), lp, lm;
        sr_set_flat(&z, i, x0 + h);
        CHECK_OK(sr_cross_entropy(&z, lab, &lp, NULL, NULL));
        sr_set_flat(&z, i, x0 - h);
        CHECK_OK(sr_cross_entropy(&z, lab, &lm, NULL, NULL));
        sr_set_flat(&z, i, x0);
        double fd = (lp - lm) / (2 * h), e = fabs(fd - sr_get_flat(&g, i));
        worst = e > worst ? e : worst;
    }
    CHECK(worst < 1e-9, "CE grad vs FD: %g", worst);
    sr_tensor_free(&z);
    sr_tensor_free(&g);
}

TEST(train_cross_entropy_bad_input)
{
    sr_tensor z = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&z, SR_F32, 2, (int64_t[]){2, 3}));
    int64_t bad[2] = {0, 3};
    double loss;
    CHECK_ERR(sr_cross_entropy(&z, bad, &loss, NULL, NULL), "label 3 of row 2 is outside [0, 3)");
    sr_tensor z1 = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&z1, SR_F32, 1, (int64_t[]){3}));
    CHECK_ERR(sr_cross_entropy(&z1, bad, &loss, NULL, NULL), "must be (N, classes)");
    sr_set_flat(&z, 1, NAN);
    int64_t ok[2] = {0, 1};
    CHECK_ERR(sr_cross_entropy(&z, ok, &loss, NULL, NULL), "logit 2 of row 1 is nan");
    sr_tensor_free(&z);
    sr_tensor_free(&z1);
}

static void set3(sr_tensor *t, double a, double b, double c)
{
    sr_set_flat(t, 0, a);
    sr_set_flat(t, 1, b);
    sr_set_flat(t, 2, c);
}

/* A float64 module with one 3-vector parameter *p = (a, b, c) and a zero
 * gradient, which the tests set by hand.  NULL on error. */
static sr_module *make_param_holder(double a, double b, double c, sr_param **p)
{
    sr_module *m = check_layer("linear", (const char *[]){"in_features", "3", "out_features", "1", "bias", "false", NULL});
    if (!m || sr_module_to_dtype(m, SR_F64))
        goto fail;
    *p = sr_module_local_param(m, "weight");
    if (sr_tensor_zeros(&(*p)->grad, SR_F64, (*p)->value.ndim, (*p)->value.shape))
        goto fail;
    set3(&(*p)->value, a, b, c);
    return m;
fail:
    sr_module_release(m);
    return NULL;
}

TEST(train_sgd_steps_match_hand_computation)
{
    /* Two steps of torch.optim.SGD(lr=.1, momentum=.9, weight_decay=.01,
     * nesterov=0/1) on w = (1, -2, 0.5) with grads g1 = (.3, .1, -.2),
     * g2 = (-.1, .4, 0), computed by hand from the update rule. */
    for (int nest = 0; nest < 2; nest++) {
        sr_param *p;
        sr_module *m = make_param_holder(1, -2, 0.5, &p);
        CHECK(m, "create: %s", sr_errmsg());
        sr_optim o;
        sr_optim_init(&o, SR_OPT_SGD);
        o.lr = 0.1;
        o.momentum = 0.9;
        o.weight_decay = 0.01;
        o.nesterov = nest;
        double w[3] = {1, -2, 0.5}, buf[3] = {0, 0, 0};
        double g[2][3] = {{0.3, 0.1, -0.2}, {-0.1, 0.4, 0}};
        for (int s = 0; s < 2; s++) {
            set3(&p->grad, g[s][0], g[s][1], g[s][2]);
            CHECK_OK(sr_optim_step(&o, m));
            for (int e = 0; e < 3; e++) {
                double d = g[s][e] + 0.01 * w[e];
                buf[e] = s == 0 ? d : 0.9 * buf[e] + d;
                double u = nest ? d + 0.9 * buf[e] : buf[e];
                w[e] -= 0.1 * u;
                CHECK(fabs(sr_get_flat(&p->value, e) - w[e]) < 1e-15, "nesterov %d step %d w[%d] %.17g want %.17g",
                      nest, s, e, sr_get_flat(&p->value, e), w[e]);
            }
        }
        /* Step 1 by hand, nesterov = 0, element 0: d = .3 + .01 = .31,
         * w = 1 − .031 = .969 — the recurrence above reproduces it. */
        CHECK(o.step == 2, "steps %lld", (long long)o.step);
        sr_optim_free(&o);
        sr_module_release(m);
    }
}

TEST(train_sgd_first_step_literal)
{
    /* Literal numbers: w=1, g=.3, lr=.1, wd=.01, μ=.9: buf = .31, w = .969;
     * nesterov: w = 1 − .1(.31 + .9·.31) = .9411. */
    for (int nest = 0; nest < 2; nest++) {
        sr_param *p;
        sr_module *m = make_param_holder(1, 1, 1, &p);
        CHECK(m, "create: %s", sr_errmsg());
        set3(&p->grad, 0.3, 0.3, 0.3);
        sr_optim o;
        sr_optim_init(&o, SR_OPT_SGD);
        o.lr = 0.1, o.momentum = 0.9, o.weight_decay = 0.01, o.nesterov = nest;
        CHECK_OK(sr_optim_step(&o, m));
        double want = nest ? 0.9411 : 0.969;
        CHECK(fabs(sr_get_flat(&p->value, 0) - want) < 1e-15, "w %.17g want %g", sr_get_flat(&p->value, 0), want);
        CHECK(fabs(sr_get_flat(&o.state1[0], 0) - 0.31) < 1e-15, "buf %.17g", sr_get_flat(&o.state1[0], 0));
        sr_optim_free(&o);
        sr_module_release(m);
    }
}

TEST(train_adamw_steps_match_hand_computation)
{
    /* torch.optim.AdamW(lr=.01, betas=(.9,.999), eps=1e-8, wd=.1), two steps. */
    sr_param *p;
    sr_module *m = make_param_holder(1, -2, 0.5, &p);
    CHECK(m, "create: %s", sr_errmsg());
    sr_optim o;
    sr_optim_init(&o, SR_OPT_ADAMW);
    o.lr = 0.01;
    o.weight_decay = 0.1;
    double w[3] = {1, -2, 0.5}, m1[3] = {0}, m2[3] = {0};
    double g[2][3] = {{0.3, 0.1, -0.2}, {-0.1, 0.4, 0}};
    for (int s = 0; s < 2; s++) {
        set3(&p->grad, g[s][0], g[s][1], g[s][2]);
        CHECK_OK(sr_optim_step(&o, m));
        for (int e = 0; e < 3; e++) {
            w[e] *= 1 - 0.01 * 0.1;
            m1[e] = 0.9 * m1[e] + 0.1 * g[s][e];
            m2[e] = 0.999 * m2[e] + 0.001 * g[s][e] * g[s][e];
            double mh = m1[e] / (1 - pow(0.9, s + 1)), vh = m2[e] / (1 - pow(0.999, s + 1));
            w[e] -= 0.01 * mh / (sqrt(vh) + 1e-8);
            CHECK(fabs(sr_get_flat(&p->value, e) - w[e]) < 1e-14, "step %d w[%d] %.17g want %.17g", s, e,
                  sr_get_flat(&p->value, e), w[e]);
        }
    }
    /* First step by hand, element 0: w = 1·(1 − 1e-3) − .01·sign(.3) ≈ .989. */
    sr_optim_free(&o);
    sr_module_release(m);
}

static int count_state(const char *name, sr_tensor *t, void *ud)
{
    (void)t;
    (*(int *)ud) += strncmp(name, "optim.state", 11) == 0;
    return 0;
}

TEST(train_optimizer_state_walk)
{
    sr_module *m = make_mlp("5", "3", SR_F32, 1);
    CHECK(m, "create: %s", sr_errmsg());
    sr_optim o;
    sr_optim_init(&o, SR_OPT_ADAMW);
    int n = 0;
    CHECK_OK(sr_optim_walk_state(&o, m, count_state, &n));
    CHECK(n == 8, "AdamW: 2 moments x 4 params = 8 state tensors, got %d", n);
    sr_optim_free(&o);
    sr_optim_init(&o, SR_OPT_SGD);
    o.momentum = 0;
    n = 0;
    CHECK_OK(sr_optim_walk_state(&o, m, count_state, &n));
    CHECK(n == 0, "SGD without momentum keeps no state, got %d", n);
    sr_optim_free(&o);
    sr_module_release(m);
}

/* sequential{l, relu, l}: one linear(3 -> 3) used twice, float64. */
static sr_module *make_shared(uint64_t seed)
{
    sr_module *l = check_layer("linear", (const char *[]){"in_features", "3", "out_features", "3", NULL});
    if (l)
        sr_module_retain(l);
    sr_module *parts[3] = {l, check_layer("relu", (const char *[]){NULL}), l};
    return check_sequential(parts, 3, seed, SR_F64);
}

/* A module used twice in a tree: the optimiser steps each distinct
 * parameter once, by its one gradient (set by hand: backward through a
 * module used twice is refused, below). */
TEST(train_shared_module_is_stepped_once)
{
    sr_tensor w0 = SR_TENSOR_INIT;
    for (int kind = 0; kind < 2; kind++) {
        sr_module *m = make_shared(5);
        CHECK(m, "create: %s", sr_errmsg());
        sr_param *w = sr_module_find_param(m, "0.weight");
        CHECK(w && w == sr_module_find_param(m, "2.weight"), "the two paths name one parameter");
        /* g[e] = (e − 4)/10 − 0.05: signs of both kinds, none zero */
        CHECK(sr_param_grad(m->children[0].m, w), "grad: %s", sr_errmsg());
        for (int64_t e = 0; e < sr_numel(&w->value); e++)
            sr_set_flat(&w->grad, e, (double)(e - 4) / 10 - 0.05);
        CHECK_OK(sr_tensor_copy(&w0, &w->value));
        sr_optim o;
        sr_optim_init(&o, kind ? SR_OPT_ADAMW : SR_OPT_SGD);
        o.lr = 0.1;
        o.weight_decay = 0;
        CHECK_OK(sr_optim_step(&o, m));
        CHECK(o.nstate == 2, "%s: %d state slots for 2 distinct parameters", kind ? "adamw" : "sgd", o.nstate);
        for (int64_t e = 0; e < sr_numel(&w0); e++) {
            /* AdamW's first step without decay: w − lr·g/(|g| + eps) */
            double ge = sr_get_flat(&w->grad, e), step = kind ? ge / (fabs(ge) + o.eps) : ge;
            double want = sr_get_flat(&w0, e) - 0.1 * step;
            CHECK(fabs(sr_get_flat(&w->value, e) - want) < 1e-15, "%s: w[%lld] %.17g want %.17g (w0 %.17g, g %.17g)",
                  kind ? "adamw" : "sgd", (long long)e, sr_get_flat(&w->value, e), want, sr_get_flat(&w0, e), ge);
        }
        int n = 0;
        CHECK_OK(sr_optim_walk_state(&o, m, count_state, &n));
        CHECK(n == (kind ? 4 : o.momentum > 0 ? 2 : 0), "%s: %d state tensors", kind ? "adamw" : "sgd", n);
        sr_optim_free(&o);
        sr_module_release(m);
    }
    sr_tensor_free(&w0);
}

/* Backward through a module used twice: the module keeps one saved input,
 * the second use's, and gives it back after that use's backward, so the
 * first use's backward fails with a message (never a gradient computed
 * from the wrong input). */
TEST(train_shared_module_backward_is_refused)
{
    sr_module *m = make_shared(5);
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 2, (int64_t[]){6, 3}, 4));
    int64_t lab[6] = {0, 2, 1, 1, 0, 2};
    double loss;
    CHECK_ERR(sr_ce_pass(m, &x, lab, NULL, 1, &loss, NULL, NULL), "linear at '0' is also at '2' (one module used twice)");
    sr_tensor_free(&x);
    sr_module_release(m);
}

TEST(train_permutation_is_seeded_permutation)
{
    int64_t a[1000], b[1000], c[1000];
    CHECK_OK(sr_permutation(a, 1000, 7));
    CHECK_OK(sr_permutation(b, 1000, 7));
    CHECK_OK(sr_permutation(c, 1000, 8));
    int seen[1000] = {0}, same = 1, diff = 0;
    for (int i = 0; i < 1000; i++) {
        CHECK(a[i] >= 0 && a[i] < 1000 && !seen[a[i]], "not a permutation at %d", i);
        seen[a[i]] = 1;
        same &= a[i] == b[i];
        diff += a[i] != c[i];
    }
    CHECK(same, "same seed, different permutation");
    CHECK(diff > 900, "seeds 7 and 8 agree in %d places", 1000 - diff);
}

TEST(train_augment_crop_flip_semantics)
{
    /* One 1x3x4 image with values 1..12: crop with padding 1 and flip must
     * give src(y+oy, w-1-x+ox) or 0, with (oy, ox) in [-1, 1]. */
    sr_tensor src = SR_TENSOR_INIT, out = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&src, SR_F32, 4, (int64_t[]){2, 1, 3, 4}));
    for (int i = 0; i < 24; i++)
        sr_set_flat(&src, i, i + 1);
    int64_t idx[64];
    for (int i = 0; i < 64; i++)
        idx[i] = i % 2;
    CHECK_OK(sr_augment_batch(&out, &src, idx, 64, 1, 1, 99));
    int flips = 0, shifts[3][3] = {{0}};
    for (int r = 0; r < 64; r++) {
        int found = 0;
        for (int oy = -1; oy <= 1 && !found; oy++)
            for (int ox = -1; ox <= 1 && !found; ox++)
                for (int fl = 0; fl < 2 && !found; fl++) {
                    int ok = 1;
                    for (int y = 0; y < 3 && ok; y++)
                        for (int x = 0; x < 4 && ok; x++) {
                            int sy = y + oy, sx = (fl ? 3 - x : x) + ox;
                            double want = (sy >= 0 && sy < 3 && sx >= 0 && sx < 4) ? idx[r] * 12 + sy * 4 + sx + 1 : 0;
                            ok = sr_get_flat(&out, r * 12 + y * 4 + x) == want;
                        }
                    if (ok) {
                        found = 1;
                        flips += fl;
                        shifts[oy + 1][ox + 1]++;
                    }
                }
        CHECK(found, "row %d is no crop/flip of its source", r);
    }
    CHECK(flips > 16 && flips < 48, "%d flips of 64", flips);
    int used = 0;
    for (int i = 0; i < 9; i++)
        used += shifts[i / 3][i % 3] > 0;
    CHECK(used >= 7, "only %d of 9 crop offsets drawn in 64 rows", used);
    /* Same seed: same batch; pad 0 and no flip: a plain gather. */
    sr_tensor again = SR_TENSOR_INIT;
    CHECK_OK(sr_augment_batch(&again, &src, idx, 64, 1, 1, 99));
    CHECK(memcmp(sr_data(&again), sr_data(&out), 64 * 12 * 4) == 0, "augmentation not reproducible");
    CHECK_OK(sr_augment_batch(&again, &src, (int64_t[]){1, 0}, 2, 0, 0, 5));
    for (int i = 0; i < 24; i++)
        CHECK(sr_get_flat(&again, i) == (double)((i + 12) % 24 + 1), "gather[%d]", i);
    CHECK_ERR(sr_augment_batch(&again, &src, (int64_t[]){2}, 1, 0, 0, 5), "index 2 (row 0 of the batch) is outside the 2 images");
    CHECK_ERR(sr_augment_batch(&again, &src, idx, 1, 4, 0, 5), "crop padding 4");
    sr_tensor_free(&src);
    sr_tensor_free(&out);
    sr_tensor_free(&again);
}

TEST(train_gaussian_noise_and_uniform_rows)
{
    sr_tensor x = SR_TENSOR_INIT, u1 = SR_TENSOR_INIT, u2 = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F64, 2, (int64_t[]){4, 5000}));
    CHECK_OK(sr_add_gaussian(&x, 0.5, 3));
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < 20000; i++) {
        double v = sr_get_flat(&x, i);
        s += v;
        s2 += v * v;
    }
    CHECK(fabs(s / 20000) < 0.02 && fabs(sqrt(s2 / 20000) - 0.5) < 0.01, "noise mean %g std %g", s / 20000,
          sqrt(s2 / 20000));
    /* Image i of a noise set does not depend on the chunk it is made in. */
    CHECK_OK(sr_tensor_alloc(&u1, SR_F32, 2, (int64_t[]){5, 7}));
    CHECK_OK(sr_tensor_alloc(&u2, SR_F32, 2, (int64_t[]){2, 7}));
    CHECK_OK(sr_fill_uniform_rows(&u1, 11, 0));
    CHECK_OK(sr_fill_uniform_rows(&u2, 11, 3));
    for (int i = 0; i < 14; i++)
        CHECK(sr_get_flat(&u1, 21 + i) == sr_get_flat(&u2, i), "noise image chunking differs at %d", i);
    CHECK_ERR(sr_add_gaussian(&x, -1, 0), "sigma -1");
    sr_tensor_free(&x);
    sr_tensor_free(&u1);
    sr_tensor_free(&u2);
}

TEST(train_pgd_constraints_and_fgsm)
{
    sr_module *m = make_mlp("6", "3", SR_F64, 5);
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, xa = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&x, SR_F64, 2, (int64_t[]){8, 6}));
    sr_rng r;
    sr_rng_seed(&r, 1);
    sr_tensor_fill_uniform(&x, &r, 0.2, 0.8);
    int64_t lab[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    double l0, la;
    CHECK_OK(sr_ce_pass(m, &x, lab, NULL, 0, &l0, NULL, NULL));
    sr_tensor g0 = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_copy(&g0, &m->gin));
    for (int norm = 0; norm <= 2; norm += 2) {
        sr_pgd_opts o;
        sr_pgd_defaults(&o);
        o.norm = norm;
        o.eps = 0.1;
        o.steps = 5;
        o.step_size = 0.05;
        o.seed = 3;
        CHECK_OK(sr_pgd_attack(m, &x, lab, &o, &xa, &la, NULL));
        CHECK(la > l0, "norm %d: attack loss %g <= clean %g", norm, la, l0);
        for (int i = 0; i < 8; i++) {
            double n2 = 0, ninf = 0;
            for (int j = 0; j < 6; j++) {
                double d = sr_get_flat(&xa, i * 6 + j) - sr_get_flat(&x, i * 6 + j);
                n2 += d * d;
                ninf = fabs(d) > ninf ? fabs(d) : ninf;
                double v = sr_get_flat(&xa, i * 6 + j);
                CHECK(v >= 0 && v <= 1, "x_adv %g outside [0, 1]", v);
            }
            if (norm == SR_NORM_L2)
                CHECK(sqrt(n2) <= 0.1 + 1e-9, "row %d: L2 %g > eps", i, sqrt(n2));
            else
                CHECK(ninf <= 0.1 + 1e-12, "row %d: Linf %g > eps", i, ninf);
        }
        /* use_best never returns a lower loss than the final iterate. */
        double lb;
        o.use_best = 1;
        CHECK_OK(sr_pgd_attack(m, &x, lab, &o, &xa, &lb, NULL));
        CHECK(lb >= la - 1e-12, "use_best %g < final %g", lb, la);
    }
    /* One L∞ step from x without random start, step = eps: FGSM,
     * x + eps sign(∇ℓ) (inputs are away from the clip range). */
    sr_pgd_opts o;
    sr_pgd_defaults(&o);
    o.norm = SR_NORM_LINF, o.eps = 0.05, o.steps = 1, o.step_size = 0.05, o.random_start = 0;
    CHECK_OK(sr_pgd_attack(m, &x, lab, &o, &xa, NULL, NULL));
    for (int i = 0; i < 48; i++) {
        double g = sr_get_flat(&g0, i), want = sr_get_flat(&x, i) + 0.05 * ((g > 0) - (g < 0));
        CHECK(fabs(sr_get_flat(&xa, i) - want) < 1e-15, "FGSM [%d] %g want %g", i, sr_get_flat(&xa, i), want);
    }
    /* L2, one step, no start: x + α g/‖g‖ per row (inside the ball). */
    o.norm = SR_NORM_L2, o.eps = 1, o.step_size = 0.05;
    CHECK_OK(sr_pgd_attack(m, &x, lab, &o, &xa, NULL, NULL));
    for (int i = 0; i < 8; i++) {
        double n = 0;
        for (int j = 0; j < 6; j++)
            n += sr_get_flat(&g0, i * 6 + j) * sr_get_flat(&g0, i * 6 + j);
        n = sqrt(n);
        for (int j = 0; j < 6; j++) {
            /* g0 is of the mean loss (÷8), the attack uses per-row sums: the
             * same direction up to the 1e-10 guard in g/(‖g‖ + 1e-10). */
            double want = sr_get_flat(&x, i * 6 + j) + 0.05 * sr_get_flat(&g0, i * 6 + j) / n;
            CHECK(fabs(sr_get_flat(&xa, i * 6 + j) - want) < 1e-9, "L2 step [%d,%d] %.17g want %.17g (x %.17g)", i, j, sr_get_flat(&xa, i * 6 + j), want, sr_get_flat(&x, i * 6 + j));
        }
    }
    CHECK(!m->training, "mode not restored (was eval)");
    sr_module_set_training(m, 1);
    CHECK_OK(sr_pgd_attack(m, &x, lab, &o, &xa, NULL, NULL));
    CHECK(m->training, "train mode not restored after the attack");
    o.eps = -1;
    CHECK_ERR(sr_pgd_attack(m, &x, lab, &o, &xa, NULL, NULL), "eps -1");
    sr_tensor_free(&x);
    sr_tensor_free(&xa);
    sr_tensor_free(&g0);
    sr_module_release(m);
}

/* J(θ) = Σ_i [ℓ_i(x) + λ s_i(ℓ_i(x+δ) − ℓ_i(x) − δᵢ·∇ℓ_i(x)) + μ q_i δᵢ·∇ℓ_i(x)] / N,
 * with exact input gradients (backward), fixed δ, s, q. */
static int llr_objective(sr_module *m, const sr_tensor *x, const int64_t *lab, const sr_tensor *dl, const double *s,
                         const double *q, double lambda, double mu, double *J)
{
    int64_t n = x->shape[0], d = sr_rowsize(x);
    double w1[16], l0[16], lp[16];
    for (int i = 0; i < n; i++)
        w1[i] = 1;
    double l;
    if (sr_ce_pass(m, x, lab, w1, 0, &l, NULL, l0))
        return -1;
    double dot[16];
    for (int i = 0; i < n; i++) {
        dot[i] = 0;
        for (int j = 0; j < d; j++)
            dot[i] += sr_get_flat(dl, i * d + j) * sr_get_flat(&m->gin, i * d + j);
    }
    sr_tensor z = SR_TENSOR_INIT;
    if (sr_tensor_copy(&z, x))
        return -1;
    for (int64_t e = 0; e < n * d; e++)
        sr_set_flat(&z, e, sr_get_flat(x, e) + sr_get_flat(dl, e));
    int rc = sr_ce_pass(m, &z, lab, w1, 0, &l, NULL, lp);
    sr_tensor_free(&z);
    if (rc)
        return -1;
    *J = 0;
    for (int i = 0; i < n; i++)
        *J += (l0[i] + lambda * s[i] * (lp[i] - l0[i] - dot[i]) + mu * q[i] * dot[i]) / (double)n;
    return 0;
}

typedef struct {
    sr_tensor *t[8];
    sr_tensor *g[8];
    int n;
} plist;

static int collect(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path;
    (void)owner;
    plist *l = ud;
    if (p->trainable && l->n < 8) {
        l->t[l->n] = &p->value;
        l->g[l->n] = &p->grad;
        l->n++;
    }
    return 0;
}

TEST(train_llr_outer_gradient_vs_fd_f64)
{
    sr_module *m = make_mlp("5", "3", SR_F64, 9);
    CHECK(m, "create: %s", sr_errmsg());
    sr_tensor x = SR_TENSOR_INIT, dl = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 2, (int64_t[]){6, 5}, 2));
    CHECK_OK(check_randn(&dl, 2, (int64_t[]){6, 5}, 4));
    for (int64_t e = 0; e < 30; e++)
        sr_set_flat(&dl, e, 0.3 * sr_get_flat(&dl, e));
    int64_t lab[6] = {0, 1, 2, 2, 1, 0};
    /* Mixed signs, so every branch of both absolute values is exercised. */
    double gap[6] = {0.3, -0.1, 0.2, -0.5, 0.1, 0.4}, dir[6] = {-0.2, 0.5, 0.1, 0.3, -0.4, -0.1};
    double s[6], q[6];
    for (int i = 0; i < 6; i++) {
        s[i] = gap[i] > 0 ? 1 : -1;
        q[i] = dir[i] > 0 ? 1 : -1;
    }
    sr_llr_opts o;
    sr_llr_defaults(&o);
    o.lambda = 1.5;
    o.mu = 0.7;
    o.fd = 1e-4;
    o.lo = 1, o.hi = 0; /* no clipping: x is Gaussian here */
    sr_module_zero_grad(m);
    sr_llr_result res;
    CHECK_OK(sr_llr_outer(m, &x, lab, &o, &dl, gap, dir, &res));
    plist pl = {{0}, {0}, 0};
    sr_module_walk_params(m, collect, &pl);
    CHECK(pl.n == 4, "%d params", pl.n);
    double worst = 0, scale = 0;
    for (int k = 0; k < pl.n; k++) {
        int64_t ne = sr_numel(pl.t[k]);
        for (int64_t e = 0; e < ne; e++) {
            double v = sr_get_flat(pl.t[k], e), h = 1e-5, jp, jm;
            sr_set_flat(pl.t[k], e, v + h);
            CHECK_OK(llr_objective(m, &x, lab, &dl, s, q, o.lambda, o.mu, &jp));
            sr_set_flat(pl.t[k], e, v - h);
            CHECK_OK(llr_objective(m, &x, lab, &dl, s, q, o.lambda, o.mu, &jm));
            sr_set_flat(pl.t[k], e, v);
            double fd = (jp - jm) / (2 * h), an = sr_get_flat(pl.g[k], e);
            worst = fabs(fd - an) > worst ? fabs(fd - an) : worst;
            scale = fabs(fd) > scale ? fabs(fd) : scale;
        }
    }
    CHECK(scale > 1e-3, "gradient scale %g too small to test", scale);
    CHECK(worst / scale < 1e-6, "LLR outer gradient vs FD: rel %g (abs %g)", worst / scale, worst);
    /* The reported values: the same J at the current θ (up to the FD
     * approximation of δ·∇ℓ) when the signs match the values'. */
    CHECK(isfinite(res.ce) && res.gamma >= 0 && res.align >= 0, "res %g %g %g", res.ce, res.gamma, res.align);
    sr_tensor_free(&x);
    sr_tensor_free(&dl);
    sr_module_release(m);
}

TEST(train_llr_inner_finds_a_gap_in_the_ball)
{
    sr_module *m = make_mlp("5", "3", SR_F64, 4);
    sr_tensor x = SR_TENSOR_INIT, dl = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&x, SR_F64, 2, (int64_t[]){6, 5}));
    sr_rng r;
    sr_rng_seed(&r, 5);
    sr_tensor_fill_uniform(&x, &r, 0.3, 0.7);
    int64_t lab[6] = {0, 1, 2, 2, 1, 0};
    double gap[6], dir[6], gap0[6], dir0[6];
    sr_llr_opts o;
    sr_llr_defaults(&o);
    o.eps = 0.2;
    o.steps = 0;
    o.step_size = 0;
    CHECK_OK(sr_llr_inner(m, &x, lab, &o, &dl, gap0, dir0));
    o.steps = 10;
    o.step_size = 0.05;
    CHECK_OK(sr_llr_inner(m, &x, lab, &o, &dl, gap, dir));
    double g0 = 0, g1 = 0;
    for (int i = 0; i < 6; i++) {
        g0 += fabs(gap0[i]);
        g1 += fabs(gap[i]);
        for (int j = 0; j < 5; j++)
            CHECK(fabs(sr_get_flat(&dl, i * 5 + j)) <= 0.2 + 1e-12, "delta outside the Linf ball");
    }
    CHECK(g1 > g0, "ascent did not increase the linearity gap: %g -> %g", g0, g1);
    /* A full step moves parameters; γ-only mode (opt = NULL) does not. */
    sr_param *w = sr_module_find_param(m, "0.weight");
    double before = sr_get_flat(&w->value, 0);
    sr_llr_result res;
    CHECK_OK(sr_llr_step(m, NULL, &x, lab, &o, &res));
    CHECK(sr_get_flat(&w->value, 0) == before && res.gamma > 0, "gamma-only changed weights or gamma %g", res.gamma);
    sr_optim opt;
    sr_optim_init(&opt, SR_OPT_SGD);
    CHECK_OK(sr_llr_step(m, &opt, &x, lab, &o, &res));
    CHECK(sr_get_flat(&w->value, 0) != before, "LLR step did not update");
    CHECK(fabs(res.loss - (res.ce + o.lambda * res.gamma + o.mu * res.align)) < 1e-12, "loss decomposition");
    sr_optim_free(&opt);
    sr_tensor_free(&x);
    sr_tensor_free(&dl);
    sr_module_release(m);
}

TEST(train_buffers_snapshot_restores_running_stats)
{
    sr_module *bn = check_layer("batchnorm2d", (const char *[]){"num_features", "2", NULL});
    CHECK(bn, "create: %s", sr_errmsg());
    sr_module_set_training(bn, 1);
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){3, 2, 2, 2}, 1));
    CHECK_OK(sr_module_to_dtype(bn, SR_F64));
    sr_buffers b;
    CHECK_OK(sr_buffers_save(&b, bn));
    CHECK(b.n >= 2, "%d buffers", b.n);
    sr_param *rm = sr_module_local_param(bn, "running_mean");
    double v0 = sr_get_flat(&rm->value, 0);
    sr_run run = SR_RUN_INIT;
    CHECK_OK(sr_module_forward(bn, &x, &run));
    CHECK(sr_get_flat(&rm->value, 0) != v0, "train forward did not move running_mean");
    CHECK_OK(sr_buffers_restore(&b, bn));
    CHECK(sr_get_flat(&rm->value, 0) == v0, "running_mean not restored");
    sr_buffers_free(&b);
    sr_tensor_free(&x);
    sr_module_release(bn);
}
