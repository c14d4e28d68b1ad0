/* test_profile.c - the r_η engine on maps whose answer is known exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "stats/profile.h"
#include "check.h"
#include "test.h"

/* A test-only smooth map y = x ⊙ x (elementwise square), so that
 *   Φ(x+ηu) − Φ(x) = 2η x⊙u + η² u⊙u   and   J u = 2 x⊙u:
 * the ratio has a closed form in the sampled directions. */
static int sq_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    (void)run;
    if (sr_tensor_ensure_like(&m->out, x))
        return -1;
    for (int64_t i = 0; i < sr_numel(x); i++)
        sr_set_flat(&m->out, i, sr_get_flat(x, i) * sr_get_flat(x, i));
    return 0;
}

static int sq_jvp(sr_module *m, const sr_tensor *xv, sr_run *run)
{
    if (sr_tensor_ensure_like(&m->out, xv))
        return -1;
    int64_t rs = sr_rowsize(xv), n = run->n;
    for (int64_t i = 0; i < n * rs; i++)
        sr_set_flat(&m->out, i, sr_get_flat(xv, i) * sr_get_flat(xv, i));
    for (int64_t t = 0; t < n * run->k; t++)
        for (int64_t e = 0; e < rs; e++) {
            double x = sr_get_flat(xv, sr_tangent_primal(run, t) * rs + e);
            sr_set_flat(&m->out, (n + t) * rs + e, 2 * x * sr_get_flat(xv, (n + t) * rs + e));
        }
    return 0;
}

static const sr_module_ops sq_ops = {.kind = "square", .forward = sq_forward, .jvp = sq_jvp};

/* The defaults with what every test here sets: directions, JVP directions
 * and the ladder of scales. */
static sr_profile_opts opts_of(int64_t ndirs, int64_t njvp, const double *scales, int nscales)
{
    sr_profile_opts o;
    sr_profile_opts_default(&o);
    o.ndirs = ndirs;
    o.njvp = njvp;
    o.scales = scales;
    o.nscales = nscales;
    return o;
}

static double closed_form_r(const sr_profile_opts *o, const sr_tensor *xt, int64_t d, double eta, int64_t total)
{
    double num = 0, den = 0, *u = malloc((size_t)d * sizeof *u);
    const double *x = sr_f64(xt);
    for (int64_t i = 0; i < total; i++) {
        sr_profile_direction(o, i, xt, u);
        double D = 0, J = 0;
        for (int64_t e = 0; e < d; e++) {
            double diff = 2 * eta * x[e] * u[e] + eta * eta * u[e] * u[e];
            D += diff * diff;
            J += 4 * x[e] * x[e] * u[e] * u[e];
        }
        num += D;
        if (i < o->njvp)
            den += J;
    }
    free(u);
    return (num / (double)total) / (eta * eta * den / (double)o->njvp);
}

static void run_square(int antipodal, double *max_err, double *lin_term)
{
    sr_module *m = sr_module_new(&sq_ops, 0);
    m->dtype = SR_F64;
    sr_tensor x = SR_TENSOR_INIT;
    check_randn(&x, 4, (int64_t[]){1, 2, 3, 3}, 5);
    double scales[] = {1e-3, 1e-2, 0.1, 1, 3};
    sr_profile_opts o = opts_of(40, antipodal ? 80 : 40, scales, 5);
    o.antipodal = antipodal;
    o.seed = 9;
    o.batch = 7; /* awkward on purpose: batches split directions unevenly */
    o.jvp_k = 3;
    sr_profile_result r;
    *max_err = INFINITY;
    if (sr_profile_image(m, &x, &o, &r) == 0) {
        *max_err = 0;
        for (int s = 0; s < 5; s++) {
            double want = closed_form_r(&o, &x, 18, scales[s], r.ndirs_total);
            double e = fabs(r.r[s] - want) / want;
            if (e > *max_err)
                *max_err = e;
        }
        /* r − 1 at small η: O(η) without antipodes, O(η²) with. */
        *lin_term = (r.r[1] - 1) / scales[1];
        sr_profile_result_free(&r);
    }
    sr_tensor_free(&x);
    sr_module_release(m);
}

TEST(profile_quadratic_map_matches_closed_form)
{
    double err, lin;
    run_square(1, &err, &lin);
    CHECK(err < 1e-10, "antipodal: rel err %g", err);
    run_square(0, &err, &lin);
    CHECK(err < 1e-10, "one-sided: rel err %g", err);
}

TEST(profile_antipodal_pairs_remove_linear_bias)
{
    double err, lin_anti, lin_one;
    run_square(1, &err, &lin_anti);
    run_square(0, &err, &lin_one);
    /* (r−1)/η at η = 1e-2: the odd η³ term in D makes it O(1) one-sided; the
     * antipodes cancel it exactly, leaving O(η). */
    CHECK(fabs(lin_one) > 10 * fabs(lin_anti), "one-sided %g vs antipodal %g", lin_one, lin_anti);
    CHECK(fabs(lin_anti) < 0.05, "antipodal residual %g", lin_anti);
}

static sr_module *linear_model(int64_t in, int64_t out)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "%lld", (long long)in);
    snprintf(b, sizeof b, "%lld", (long long)out);
    return check_reset(MAKE(sr_linear_create, "linear", "in_features", a, "out_features", b), 3);
}

TEST(profile_linear_map_gives_one_everywhere)
{
    sr_module *m = linear_model(30, 7);
    CHECK_OK(sr_module_to_dtype(m, SR_F64));
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 2, (int64_t[]){1, 30}, 2));
    double scales[] = {1e-4, 1e-2, 1, 1e2, 1e4};
    sr_profile_opts o = opts_of(16, 32, scales, 5);
    sr_profile_result r;
    CHECK_OK(sr_profile_image(m, &x, &o, &r));
    for (int s = 0; s < 5; s++)
        CHECK(fabs(r.r[s] - 1) < 1e-6, "eta %g: r = %.12g", scales[s], r.r[s]);
    CHECK(isnan(r.noise[0]), "float64 model: no noise estimate expected");
    sr_profile_result_free(&r);
    sr_tensor_free(&x);
    sr_module_release(m);
}

TEST(profile_is_independent_of_batch_sizes)
{
    sr_module *m = linear_model(12, 5);
    sr_tensor x = SR_TENSOR_INIT;
    /* float64: float32 GEMMs of different sizes may round differently. */
    CHECK_OK(sr_module_to_dtype(m, SR_F64));
    CHECK_OK(check_randn(&x, 2, (int64_t[]){1, 12}, 2));
    double scales[] = {0.1, 1};
    sr_profile_opts o = opts_of(10, 6, scales, 2);
    o.noise_dirs = 0;
    o.per_direction = 1;
    sr_profile_result a, b;
    o.batch = 1;
    o.jvp_k = 1;
    CHECK_OK(sr_profile_image(m, &x, &o, &a));
    o.batch = 64;
    o.jvp_k = 5;
    CHECK_OK(sr_profile_image(m, &x, &o, &b));
    for (int64_t i = 0; i < 2 * a.ndirs_total; i++)
        CHECK(fabs(a.per_dir[i] - b.per_dir[i]) <= 1e-12 * fabs(b.per_dir[i]), "D[%lld] %g vs %g",
              (long long)i, a.per_dir[i], b.per_dir[i]);
    CHECK(fabs(a.jac_energy - b.jac_energy) <= 1e-12 * b.jac_energy, "E_J %g vs %g", a.jac_energy, b.jac_energy);
    sr_profile_result_free(&a);
    sr_profile_result_free(&b);
    sr_tensor_free(&x);
    sr_module_release(m);
}

TEST(profile_float32_noise_flags_rungs_float64_shows_wrong)
{
    /* Φ(x) = x⊙x with a large offset: at tiny η the float32 difference
     * Φ(x+ηu) − Φ(x) is pure rounding, while float64 is still exact. */
    sr_module *m = sr_module_new(&sq_ops, 0);
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 2, (int64_t[]){1, 64}, 4));
    for (int64_t e = 0; e < 64; e++)
        sr_f64(&x)[e] += 100;
    double scales[] = {1e-5, 1e-3, 1e-1, 10};
    sr_profile_opts o = opts_of(16, 32, scales, 4);
    o.noise_dirs = 8;
    sr_profile_result r64, r32;
    m->dtype = SR_F64;
    CHECK_OK(sr_profile_image(m, &x, &o, &r64));
    CHECK_OK(sr_tensor_convert(&x, &x, SR_F32));
    m->dtype = SR_F32;
    CHECK_OK(sr_profile_image(m, &x, &o, &r32));
    CHECK(m->dtype == SR_F32, "model dtype restored");
    int flagged = 0;
    for (int s = 0; s < 4; s++) {
        double e32 = r32.energy[s] / r64.energy[s] - 1;
        if (isnan(r32.r[s])) {
            flagged++;
            CHECK(r32.noise[s] > 0.05, "rung %d discarded with noise %g", s, r32.noise[s]);
        } else {
            CHECK(fabs(e32) < 0.05, "rung %d kept but float32 energy is off by %g", s, e32);
        }
        if (fabs(e32) > 0.2)
            CHECK(isnan(r32.r[s]), "rung %d wrong by %g in float32 but not discarded", s, e32);
    }
    CHECK(flagged >= 1 && !isnan(r32.r[3]), "expected the tiny rungs flagged and the large kept (%d)", flagged);
    sr_profile_result_free(&r64);
    sr_profile_result_free(&r32);
    sr_tensor_free(&x);
    sr_module_release(m);
}

TEST(profile_bad_input_is_an_error)
{
    sr_module *m = linear_model(12, 5);
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 2, (int64_t[]){2, 12}));
    double scales[] = {0.1};
    sr_profile_opts o = opts_of(4, 4, scales, 1);
    sr_profile_result r;
    CHECK_ERR(sr_profile_image(m, &x, &o, &r), "must be a single input");
    CHECK_OK(sr_tensor_zeros(&x, SR_F32, 2, (int64_t[]){1, 12}));
    sr_f32(&x)[3] = NAN;
    CHECK_ERR(sr_profile_image(m, &x, &o, &r), "NaN or Inf");
    sr_f32(&x)[3] = 0;
    scales[0] = -1;
    CHECK_ERR(sr_profile_image(m, &x, &o, &r), "scales must be positive");
    scales[0] = 0.1;
    sr_module_set_training(m, 1);
    CHECK_ERR(sr_profile_image(m, &x, &o, &r), "training mode");
    sr_tensor_free(&x);
    sr_module_release(m);
}

TEST(profile_sequential_mode_stops_at_the_target_ci)
{
    sr_module *m = sr_module_new(&sq_ops, 0);
    m->dtype = SR_F64;
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){1, 2, 4, 4}, 5));
    double scales[] = {0.01, 0.3, 1, 3};
    sr_profile_opts o = opts_of(512, 1024, scales, 4);
    o.seed = 3;
    sr_profile_result full, seq;
    CHECK_OK(sr_profile_image(m, &x, &o, &full));
    o.target_ci = 0.05;
    o.seq_chunk = 16;
    CHECK_OK(sr_profile_image(m, &x, &o, &seq));
    CHECK(seq.ndirs_used < 512, "sequential used all %lld directions", (long long)seq.ndirs_used);
    CHECK(seq.nforward * 3 < full.nforward, "forwards %lld vs %lld", (long long)seq.nforward,
          (long long)full.nforward);
    for (int s = 0; s < 4; s++) {
        CHECK(seq.ci[s] <= 0.05, "rung %d ci %g above target", s, seq.ci[s]);
        /* the full run's r lies within the sequential CI (plus its own) */
        double tol = (seq.ci[s] + full.ci[s]) * seq.r[s] * 1.5;
        CHECK(fabs(seq.r[s] - full.r[s]) <= tol, "rung %d: %g vs %g (tol %g)", s, seq.r[s], full.r[s], tol);
    }
    sr_profile_result_free(&full);
    sr_profile_result_free(&seq);
    sr_tensor_free(&x);
    sr_module_release(m);
}

/* The square map's r in closed form over the sphere: with E u_e² = 1/d,
 * E u_e³ = 0 and E u_e⁴ = 3/(d(d+2)),
 *   r = 1 + 3 η² d / (4 (d+2) Σ x_e²). */
static double square_true_r(const sr_tensor *x, double eta)
{
    double S = 0;
    int64_t d = sr_numel(x);
    for (int64_t e = 0; e < d; e++)
        S += sr_get_flat(x, e) * sr_get_flat(x, e);
    return 1 + 3 * eta * eta * (double)d / (4 * (double)(d + 2) * S);
}

TEST(profile_sequential_ci_has_near_nominal_coverage)
{
    /* Repeated sequential runs (fresh directions each) on a map with known
     * r: the per-rung 95% interval r(1 ± ci) must cover the truth about 95%
     * of the time, although each rung stops on its own when its interval
     * looks narrow enough (optional stopping can only make it worse). */
    sr_module *m = sr_module_new(&sq_ops, 0);
    m->dtype = SR_F64;
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){1, 1, 4, 4}, 11));
    enum { NS = 4, REPS = 400 };
    double scales[NS] = {0.05, 1.5, 3, 6}, truth[NS];
    for (int s = 0; s < NS; s++)
        truth[s] = square_true_r(&x, scales[s]);
    sr_profile_opts o;
    sr_profile_opts_default(&o);
    o.ndirs = 4096;
    o.scales = scales;
    o.nscales = NS;
    o.noise_dirs = 0;
    o.target_ci = 0.04;
    o.seq_chunk = 32;
    int covered[NS] = {0}, all = 0;
    double mean_n[NS] = {0};
    for (int rep = 0; rep < REPS; rep++) {
        sr_profile_result r;
        o.seed = 1000 + (uint64_t)rep;
        CHECK_OK(sr_profile_image(m, &x, &o, &r));
        for (int s = 0; s < NS; s++) {
            int in = fabs(r.r[s] - truth[s]) <= r.ci[s] * r.r[s];
            covered[s] += in;
            all += in;
            mean_n[s] += (double)r.rung_ndirs[s] / REPS;
        }
        sr_profile_result_free(&r);
    }
    for (int s = 0; s < NS; s++) {
        printf("     rung %d: true r %.4f, coverage %.3f, mean directions %.0f\n", s, truth[s],
               (double)covered[s] / REPS, mean_n[s]);
        /* binomial sd at 95% over 400 runs is 1.1% */
        CHECK(covered[s] >= 0.91 * REPS, "rung %d: coverage %.3f", s, (double)covered[s] / REPS);
    }
    CHECK(all >= 0.93 * NS * REPS, "coverage %.3f over all rungs", (double)all / (NS * REPS));
    /* the rungs stop separately: the linear one after a single chunk */
    CHECK(fabs(mean_n[0] - (double)o.seq_chunk) < 1e-9 && mean_n[NS - 1] > 4 * o.seq_chunk, "directions per rung %g .. %g",
          mean_n[0], mean_n[NS - 1]);
    sr_tensor_free(&x);
    sr_module_release(m);
}
