/* test_profile.c - the r_η engine on maps whose answer is known exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
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

/* Over many seeds, the paired 95% interval r(1 ± ci) of one fixed-count
 * run covers the square map's true r about 95% of the time, at a nearly
 * linear rung and at strongly nonlinear ones. */
TEST(profile_paired_ci_has_near_nominal_coverage)
{
    sr_module *m = sr_module_new(&sq_ops, 0);
    m->dtype = SR_F64;
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){1, 1, 4, 4}, 11));
    enum { NS = 4, REPS = 400 };
    double scales[NS] = {0.05, 1.5, 3, 6}, truth[NS];
    for (int s = 0; s < NS; s++)
        truth[s] = square_true_r(&x, scales[s]);
    sr_profile_opts o = opts_of(64, 1, scales, NS);
    o.paired = 1;
    o.noise_dirs = 0;
    int covered[NS] = {0};
    for (int rep = 0; rep < REPS; rep++) {
        sr_profile_result r;
        o.seed = 1000 + (uint64_t)rep;
        CHECK_OK(sr_profile_image(m, &x, &o, &r));
        for (int s = 0; s < NS; s++)
            covered[s] += fabs(r.r[s] - truth[s]) <= r.ci[s] * r.r[s];
        sr_profile_result_free(&r);
    }
    for (int s = 0; s < NS; s++) {
        printf("     rung %d: true r %.4f, coverage %.3f\n", s, truth[s], (double)covered[s] / REPS);
        /* binomial sd at 95% over 400 runs is 1.1% */
        CHECK(covered[s] >= 0.91 * REPS, "rung %d: coverage %.3f", s, (double)covered[s] / REPS);
    }
    sr_tensor_free(&x);
    sr_module_release(m);
}

/* Paired: the denominator runs over the numerator's own directions, so at
 * a tiny η r is 1 up to O(η²) whatever the draw; unpaired with a few JVPs,
 * r is off by the denominator's sampling error at every rung. */
TEST(profile_paired_plateau_is_one_by_construction)
{
    sr_module *m = sr_module_new(&sq_ops, 0);
    m->dtype = SR_F64;
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){1, 2, 3, 3}, 5));
    double scales[] = {1e-5, 1e-3};
    sr_profile_opts o = opts_of(24, 4, scales, 2);
    o.noise_dirs = 0;
    sr_profile_result a, b;
    CHECK_OK(sr_profile_image(m, &x, &o, &a));
    o.paired = 1;
    CHECK_OK(sr_profile_image(m, &x, &o, &b));
    CHECK(fabs(a.r[0] - 1) > 1e-3, "unpaired, 4 JVPs: r %.9f", a.r[0]);
    CHECK(fabs(b.r[0] - 1) < 1e-9 && fabs(b.r[1] - 1) < 1e-5, "paired: r %.12f %.12f", b.r[0], b.r[1]);
    CHECK(b.njvp_used == 24 && b.moments[0].n == 24 && b.moments[0].nj == 24 && !isnan(b.moments[0].c),
          "paired moments: n %lld nj %lld", (long long)b.moments[0].n, (long long)b.moments[0].nj);
    CHECK(isnan(a.moments[0].c) && a.moments[0].nj == 4, "unpaired moments");
    CHECK(b.ci[0] < 1e-8, "paired CI at the plateau %g", b.ci[0]);
    sr_profile_result_free(&a);
    sr_profile_result_free(&b);
    sr_tensor_free(&x);
    sr_module_release(m);
}

/* A run continued from first_direction sees exactly the directions (and
 * energies) the longer run has at those indices. */
TEST(profile_first_direction_continues_a_run)
{
    sr_module *m = sr_module_new(&sq_ops, 0);
    m->dtype = SR_F64;
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){1, 2, 3, 3}, 6));
    double scales[] = {0.3, 2};
    for (int orth = 0; orth <= 1; orth++) {
        sr_profile_opts o = opts_of(20, 1, scales, 2);
        o.paired = 1;
        o.per_direction = 1;
        o.noise_dirs = 0;
        o.orthogonal = orth ? 8 : 0;
        sr_profile_result all, part;
        CHECK_OK(sr_profile_image(m, &x, &o, &all));
        o.first = 13;
        o.ndirs = 7;
        CHECK_OK(sr_profile_image(m, &x, &o, &part));
        double worst = 0;
        for (int s = 0; s < 2; s++)
            for (int64_t i = 0; i < 7; i++)
                for (int k = 0; k < 2; k++) {
                    double a = all.per_dir[s * 40 + k * 20 + 13 + i], b = part.per_dir[s * 14 + k * 7 + i];
                    worst = fmax(worst, fabs(a - b) / a);
                }
        for (int64_t i = 0; i < 7; i++)
            worst = fmax(worst, fabs(all.jvp_sq[13 + i] - part.jvp_sq[i]) / all.jvp_sq[13 + i]);
        CHECK(worst < 1e-12, "orthogonal %d: continued run differs by %g", orth, worst);
        sr_profile_result_free(&all);
        sr_profile_result_free(&part);
    }
    sr_tensor_free(&x);
    sr_module_release(m);
}

/* Orthogonal blocks: unit, mutually orthogonal within a block, the first
 * of a block the independent draw itself, antipodes negated; a full block
 * of d directions gives the mean JVP energy ‖J‖_F²/d exactly. */
TEST(profile_orthogonal_blocks)
{
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){1, 2, 3, 3}, 7));
    double scales[] = {1};
    sr_profile_opts o = opts_of(18, 1, scales, 1);
    enum { D = 18 };
    double u[2 * D][D], v[D];
    o.orthogonal = 6;
    for (int i = 0; i < 2 * D; i++)
        CHECK_OK(sr_profile_direction(&o, i, &x, u[i]));
    double worst = 0;
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            double dot = 0;
            for (int e = 0; e < D; e++)
                dot += u[i][e] * u[j][e];
            if (i / 6 == j / 6)
                worst = fmax(worst, fabs(dot - (i == j)));
        }
    CHECK(worst < 1e-12, "Gram matrix of a block is off the identity by %g", worst);
    for (int e = 0; e < D; e++)
        CHECK(u[D + 5][e] == -u[5][e], "antipode");
    o.orthogonal = 0;
    for (int b = 0; b < D; b += 6) {
        CHECK_OK(sr_profile_direction(&o, b, &x, v));
        for (int e = 0; e < D; e++)
            CHECK(fabs(v[e] - u[b][e]) < 1e-15, "first of block %d is the independent draw", b / 6);
    }
    /* J u = 2 x ⊙ u: over an orthonormal basis Σ‖Ju‖² = Σ_e (2x_e)² */
    sr_module *m = sr_module_new(&sq_ops, 0);
    m->dtype = SR_F64;
    double fro = 0;
    for (int e = 0; e < D; e++)
        fro += 4 * sr_f64(&x)[e] * sr_f64(&x)[e];
    o.orthogonal = D;
    o.paired = 1;
    sr_profile_result r;
    CHECK_OK(sr_profile_image(m, &x, &o, &r));
    CHECK(fabs(r.jac_energy * D / fro - 1) < 1e-12, "full block: E_J %.15g vs %.15g", r.jac_energy, fro / D);
    sr_profile_result_free(&r);
    o.orthogonal = D + 1;
    CHECK_ERR(sr_profile_image(m, &x, &o, &r), "orthogonal blocks of 19 directions exceed the input's 18 dimensions");
    sr_tensor_free(&x);
    sr_module_release(m);
}

/* The estimate from moments is the delta method written out on the units
 * (paired), and the unpaired formula at other counts scales as 1/√n. */
TEST(profile_rung_estimate_from_moments)
{
    double dp[] = {1.0, 1.3, 0.8, 1.6, 1.1}, dn[] = {1.2, 0.9, 1.0, 1.5, 1.2}, j[] = {0.9, 1.1, 0.95, 1.4, 1.0};
    double eta = 0.5, eta2 = eta * eta;
    sr_rung_moments mo;
    sr_rung_moments_of(&mo, dp, dn, 5, j, 5, 1);
    sr_rung_est e = sr_rung_estimate(&mo, eta, 0, 0);
    double sd = 0, sj = 0;
    for (int i = 0; i < 5; i++) {
        sd += 0.5 * (dp[i] + dn[i]);
        sj += j[i];
    }
    double r = sd / (eta2 * sj), ss = 0;
    for (int i = 0; i < 5; i++) {
        double res = 0.5 * (dp[i] + dn[i]) - r * eta2 * j[i];
        ss += res * res;
    }
    double se = sqrt(ss / 4 / 5) / (sd / 5);
    CHECK(fabs(e.r - r) < 1e-14 && fabs(e.se - se) < 1e-12 && e.df == 4, "paired: r %g se %g vs %g %g", e.r, e.se, r,
          se);
    CHECK(fabs(e.ci - 2.77644511 * se) < 1e-8, "ci %g", e.ci);
    sr_rung_moments_of(&mo, dp, dn, 5, j, 5, 0);
    sr_rung_est u5 = sr_rung_estimate(&mo, eta, 0, 0), u20 = sr_rung_estimate(&mo, eta, 20, 20);
    CHECK(fabs(u20.se * 2 - u5.se) < 1e-12 && u20.df == 19, "as-if counts: se %g vs %g", u20.se, u5.se);
    CHECK(isnan(mo.c), "unpaired: no co-moment");
    sr_rung_moments_of(&mo, dp, NULL, 1, j, 1, 1);
    e = sr_rung_estimate(&mo, eta, 0, 0);
    CHECK(isinf(e.ci) && fabs(e.r - dp[0] / (eta2 * j[0])) < 1e-14, "one unit: r %g, ci %g", e.r, e.ci);
}

/* A test-only square map whose float32 JVP is off by a factor 1 + bias
 * (as when E‖Ju‖² loses precision in float32) while its forward is exact:
 * the noise estimate must see it in r although the energies are right. */
static int biased_jvp(sr_module *m, const sr_tensor *xv, sr_run *run, double bias)
{
    if (sq_jvp(m, xv, run))
        return -1;
    if (m->dtype == SR_F32) {
        int64_t rs = sr_rowsize(xv);
        for (int64_t i = run->n * rs; i < sr_numel(&m->out); i++)
            sr_set_flat(&m->out, i, sr_get_flat(&m->out, i) * sqrt(1 + bias));
    }
    return 0;
}
static int jvp_off_2pct(sr_module *m, const sr_tensor *xv, sr_run *run) { return biased_jvp(m, xv, run, 0.02); }
static int jvp_off_10pct(sr_module *m, const sr_tensor *xv, sr_run *run) { return biased_jvp(m, xv, run, 0.10); }
static const sr_module_ops off2_ops = {.kind = "square", .forward = sq_forward, .jvp = jvp_off_2pct};
static const sr_module_ops off10_ops = {.kind = "square", .forward = sq_forward, .jvp = jvp_off_10pct};

TEST(profile_float32_noise_covers_the_jvp_denominator)
{
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 2, (int64_t[]){1, 16}, 8));
    CHECK_OK(sr_tensor_convert(&x, &x, SR_F32));
    double scales[] = {0.1, 1};
    sr_profile_opts o = opts_of(16, 1, scales, 2);
    o.paired = 1;
    o.noise_dirs = 8;
    const sr_module_ops *ops[] = {&off2_ops, &off10_ops};
    for (int k = 0; k < 2; k++) {
        sr_module *m = sr_module_new(ops[k], 0);
        m->dtype = SR_F32;
        sr_profile_result r;
        CHECK_OK(sr_profile_image(m, &x, &o, &r));
        double want = k ? 0.10 : 0.02;
        CHECK(fabs(r.noise_jvp - want) < 1e-3 * (1 + want), "JVP noise %g, want %g", r.noise_jvp, want);
        for (int s = 0; s < 2; s++) {
            CHECK(r.noise_energy[s] < 1e-5, "rung %d: energy noise %g", s, r.noise_energy[s]);
            CHECK(fabs(r.noise[s] - want / (1 + want)) < 1e-3, "rung %d: noise of r %g", s, r.noise[s]);
            CHECK(k ? isnan(r.r[s]) : !isnan(r.r[s]), "rung %d: r %g (%s expected)", s, r.r[s],
                  k ? "discarded" : "kept");
        }
        CHECK(m->dtype == SR_F32, "model dtype restored");
        sr_profile_result_free(&r);
        sr_module_release(m);
    }
    sr_tensor_free(&x);
}

/* The float32 noise bound against the float32 error of r over the whole
 * direction set, from a float64 run on the same directions.  Φ = x ⊙ x
 * with a large offset: at small η the float32 differences are mostly
 * rounding, different per direction, so the bound's sampling term matters.
 * actual[s] = |r32 / r64 − 1| with r from each run's moments (defined also
 * where a rung is discarded). */
static void noise_vs_float64(sr_profile_opts *o, uint64_t seed, double *noise, double *actual)
{
    sr_module *m = sr_module_new(&sq_ops, 0);
    sr_tensor x = SR_TENSOR_INIT, x32 = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 2, (int64_t[]){1, 64}, seed));
    for (int64_t e = 0; e < 64; e++)
        sr_f64(&x)[e] += 100;
    o->seed = seed;
    sr_profile_result r64, r32;
    m->dtype = SR_F64;
    CHECK_OK(sr_profile_image(m, &x, o, &r64));
    CHECK_OK(sr_tensor_convert(&x32, &x, SR_F32));
    m->dtype = SR_F32;
    CHECK_OK(sr_profile_image(m, &x32, o, &r32));
    for (int s = 0; s < o->nscales; s++) {
        double a = r32.moments[s].d_mean / r32.moments[s].j_mean, b = r64.moments[s].d_mean / r64.moments[s].j_mean;
        actual[s] = fabs(a / b - 1);
        noise[s] = r32.noise[s];
    }
    sr_profile_result_free(&r64);
    sr_profile_result_free(&r32);
    sr_tensor_free(&x);
    sr_tensor_free(&x32);
    sr_module_release(m);
}

TEST(profile_float32_noise_is_the_exact_error_when_every_direction_is_checked)
{
    double scales[] = {1e-4, 1e-3, 1e-2}, noise[3], actual[3];
    for (int paired = 0; paired <= 1; paired++) {
        /* unpaired: JVPs on all 32 base directions too (the check takes at
         * most the JVP directions) */
        sr_profile_opts o = opts_of(32, 32, scales, 3);
        o.paired = paired;
        o.noise_dirs = 64; /* all: the finite-population correction leaves no sampling term */
        noise_vs_float64(&o, 5, noise, actual);
        for (int s = 0; s < 3; s++)
            CHECK(fabs(noise[s] - actual[s]) <= 1e-6 * actual[s] && actual[s] > 1e-5,
                  "paired %d rung %d: noise %.12g, float32 error over the set %.12g", paired, s, noise[s], actual[s]);
    }
}

TEST(profile_float32_noise_bounds_the_error_of_r_over_the_whole_set)
{
    /* 4 of 64 base directions checked: a 95% bound, so over 30 images x 3
     * rungs a few misses are allowed; the estimate alone (no t·SE term)
     * misses about half of them. */
    double scales[] = {1e-4, 1e-3, 1e-2}, noise[3], actual[3];
    int miss = 0, cases = 0;
    double worst = INFINITY;
    for (int paired = 0; paired <= 1; paired++)
        for (uint64_t seed = 1; seed <= 15; seed++) {
            sr_profile_opts o = opts_of(64, 32, scales, 3);
            o.paired = paired;
            o.noise_dirs = 8;
            noise_vs_float64(&o, seed, noise, actual);
            for (int s = 0; s < 3; s++) {
                cases++;
                miss += !(noise[s] >= actual[s]);
                if (noise[s] / actual[s] < worst)
                    worst = noise[s] / actual[s];
            }
        }
    printf("     %d of %d (image, rung) cases above the bound; smallest bound / error %.3g\n", miss, cases, worst);
    CHECK(miss <= cases / 20, "%d of %d errors above the 95%% bound", miss, cases);
}

TEST(profile_float32_noise_needs_two_base_directions)
{
    sr_module *m = sr_module_new(&sq_ops, 0);
    m->dtype = SR_F32;
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 2, (int64_t[]){1, 8}, 1));
    CHECK_OK(sr_tensor_convert(&x, &x, SR_F32));
    double scales[] = {0.1};
    sr_profile_opts o = opts_of(8, 8, scales, 1);
    o.noise_dirs = 2;
    sr_profile_result r;
    CHECK_ERR(sr_profile_image(m, &x, &o, &r), "noise_directions 2 checks one base direction");
    o.noise_dirs = 3;
    CHECK_OK(sr_profile_image(m, &x, &o, &r));
    CHECK(isfinite(r.noise[0]), "two base directions: a finite bound, got %g", r.noise[0]);
    sr_profile_result_free(&r);
    sr_tensor_free(&x);
    sr_module_release(m);
}

/* bf16 rounding of a double computed as the engine computes it: x + ηu in
 * double, to float32, to bf16. */
static double bf(double v) { return sr_bf16_round((float)v); }

TEST(profile_emulate_bf16_rounds_the_numerators_factors)
{
    /* y = W x + b: with emulate_bf16 every D is ‖bf(W)(bf(x + ηu) − bf(x))‖²
     * (Φ(x) rounded as the rows are), the JVPs exact: r in closed form from
     * the directions, to float32's accumulation; and at a small rung far
     * from plain float32's. */
    const int64_t in = 30, out = 7;
    sr_module *m = linear_model(in, out);
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn_dt(&x, SR_F32, 2, (int64_t[]){1, in}, 2));
    double scales[] = {0.03, 0.3, 3};
    sr_profile_opts o = opts_of(8, 8, scales, 3);
    o.noise_dirs = 0;
    o.emulate_bf16 = 1;
    sr_profile_result rb, r32;
    CHECK_OK(sr_profile_image(m, &x, &o, &rb));
    o.emulate_bf16 = 0;
    CHECK_OK(sr_profile_image(m, &x, &o, &r32));
    const float *W = sr_f32(&m->params[0].value), *xv = sr_f32(&x);
    double u[30], y0[7], y[7];
    for (int64_t k = 0; k < out; k++) {
        y0[k] = 0;
        for (int64_t e = 0; e < in; e++)
            y0[k] += bf(W[k * in + e]) * bf(xv[e]);
    }
    double den = 0;
    for (int64_t i = 0; i < o.ndirs; i++) {
        CHECK_OK(sr_profile_direction(&o, i, &x, u));
        for (int64_t k = 0; k < out; k++) {
            double j = 0;
            for (int64_t e = 0; e < in; e++)
                j += (double)W[k * in + e] * (float)u[e];
            den += j * j;
        }
    }
    den /= (double)o.ndirs;
    for (int s = 1; s < 3; s++) {
        double num = 0;
        for (int64_t i = 0; i < rb.ndirs_total; i++) {
            CHECK_OK(sr_profile_direction(&o, i, &x, u));
            for (int64_t k = 0; k < out; k++) {
                y[k] = 0;
                for (int64_t e = 0; e < in; e++)
                    y[k] += bf(W[k * in + e]) * bf((double)xv[e] + scales[s] * u[e]);
                num += (y[k] - y0[k]) * (y[k] - y0[k]);
            }
        }
        double want = num / (double)rb.ndirs_total / (scales[s] * scales[s] * den);
        CHECK(fabs(rb.r[s] / want - 1) < 2e-5, "rung %d: emulated r %.8g, closed form %.8g", s, rb.r[s], want);
        CHECK(fabs(r32.r[s] - 1) < 1e-4, "rung %d: float32 r %.8g of a linear map", s, r32.r[s]);
    }
    CHECK(fabs(rb.r[0] / r32.r[0] - 1) > 0.01, "at eta 0.03 bf16 should be far from float32: %g vs %g", rb.r[0],
          r32.r[0]);
    sr_profile_result_free(&rb);
    sr_profile_result_free(&r32);
    sr_tensor_free(&x);
    sr_module_release(m);
}

TEST(profile_emulate_bf16_refuses_what_it_cannot_emulate)
{
    double scales[] = {0.1};
    sr_profile_opts o = opts_of(4, 4, scales, 1);
    o.emulate_bf16 = 1;
    sr_profile_result r;
    sr_tensor x = SR_TENSOR_INIT;
    sr_module *m = linear_model(12, 5);
    CHECK_OK(sr_module_to_dtype(m, SR_F64));
    CHECK_OK(check_randn(&x, 2, (int64_t[]){1, 12}, 1));
    CHECK_ERR(sr_profile_image(m, &x, &o, &r), "needs a float32 model");
    sr_module_release(m);
    m = check_reset(MAKE(sr_conv_transpose2d_create, "conv_transpose2d", "in_channels", "2", "out_channels", "3",
                         "kernel_size", "2"), 1);
    CHECK(m, "conv_transpose2d");
    CHECK_OK(check_randn_dt(&x, SR_F32, 4, (int64_t[]){1, 2, 3, 3}, 1));
    CHECK_ERR(sr_profile_image(m, &x, &o, &r), "conv_transpose2d");
    o.emulate_bf16 = 0;
    CHECK_OK(sr_profile_image(m, &x, &o, &r));
    sr_profile_result_free(&r);
    sr_tensor_free(&x);
    sr_module_release(m);
}
