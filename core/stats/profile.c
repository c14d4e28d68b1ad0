/* profile.c - streaming engine for r_η of one image (see profile.h). */
#ifdef SR_REAL

/* row = x + η u for one (direction, scale) pair. */
static void SR_FN(fill_row)(real *row, const real *x, const double *u, double eta, int64_t d)
{
    for (int64_t e = 0; e < d; e++)
        row[e] = (real)(x[e] + eta * u[e]);
}

/* row = A + η L at the output of the shared affine prefix. */
static void SR_FN(fill_affine)(real *row, const real *a, const real *l, double eta, int64_t q)
{
    for (int64_t e = 0; e < q; e++)
        row[e] = (real)((double)a[e] + eta * (double)l[e]);
}

/* out[r] = ‖y_r − f0‖² in double, for rows of length m. */
static void SR_FN(sq_dist)(double *out, const real *y, const double *f0, int64_t rows, int64_t m)
{
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        const real *yr = y + r * m;
        for (int64_t e = 0; e < m; e++) {
            double t = (double)yr[e] - f0[e];
            s += t * t;
        }
        out[r] = s;
    }
}

/* Σ over rows of ‖row‖², in double. */
static double SR_FN(sq_sum)(const real *y, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)y[i] * y[i];
    return s;
}

static void SR_FN(to_real)(real *dst, const double *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = (real)src[i];
}

#else

#include "stats/profile.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/blur.h"
#include "stats/metrics.h"
#include "tensor/tensor_ops.h"

#define SR_GENERIC_FILE "stats/profile.c"
#include "base/generic.h"

#define FIELD(f) offsetof(sr_profile_opts, f)
const sr_opt_spec sr_profile_specs[] = {
    {.name = "directions", .type = SR_OPT_INT, .lo = 1, .hi = 1e6, .def = 1024, .offset = FIELD(ndirs),
     .help = "distinct directions u_1..u_n per image"},
    {.name = "antipodal", .type = SR_OPT_BOOL, .def = 1, .offset = FIELD(antipodal),
     .help = "also -u_i: the set is u_1..u_n, -u_1..-u_n"},
    {.name = "jvp_directions", .type = SR_OPT_INT, .lo = 1, .hi = 2e6, .def = 256, .offset = FIELD(njvp),
     .help = "exact JVPs behind the denominator: the first n of the set (more than the set: all of it)"},
    {.name = "seed", .type = SR_OPT_INT, .lo = -INFINITY, .hi = INFINITY, .def = 0, .offset = FIELD(seed),
     .help = "per-image seed of the directions"},
    {.name = "batch", .type = SR_OPT_INT, .lo = 1, .hi = 1e6, .def = 0, .def_text = "auto", .offset = FIELD(batch),
     .help = "rows per forward batch (auto: about 32 MB of input rows)"},
    {.name = "jvp_batch", .type = SR_OPT_INT, .lo = 1, .hi = 4096, .def = 16, .offset = FIELD(jvp_k),
     .help = "tangents per stacked JVP"},
    {.name = "noise_directions", .type = SR_OPT_INT, .lo = 0, .hi = 1e6, .def = 8, .offset = FIELD(noise_dirs),
     .help = "directions re-evaluated in float64 for the float32 noise estimate (0: none)"},
    {.name = "noise_max", .type = SR_OPT_NUM, .lo = 0, .hi = INFINITY, .def = 0.05, .offset = FIELD(noise_max),
     .help = "discard a rung whose float32 noise exceeds this fraction of its energy"},
    {.name = "per_direction", .type = SR_OPT_BOOL, .def = 0, .offset = FIELD(per_direction),
     .help = "keep every direction's displacement energy"},
    {.name = "target_ci", .type = SR_OPT_NUM, .lo = 0, .hi = 1, .flags = SR_OPT_OPEN_LO | SR_OPT_OPEN_HI, .def = 0,
     .def_text = "off", .offset = FIELD(target_ci),
     .help = "sequential mode: a rung closes once the relative 95% CI half-width of its r is within this"},
    {.name = "seq_chunk", .type = SR_OPT_INT, .lo = 1, .hi = 1e6, .def = 32, .offset = FIELD(seq_chunk),
     .help = "sequential mode: base directions added per step"},
    {.name = "seq_min", .type = SR_OPT_INT, .lo = 0, .hi = 1e6, .def = 0, .offset = FIELD(seq_min),
     .help = "sequential mode: base directions before a rung may close (0: one chunk)"},
    {.name = "exact_relu", .type = SR_OPT_BOOL, .def = 0, .offset = FIELD(exact_relu),
     .help = "ReLU nets: pairs below the direction's first activation boundary are exact, without a forward"},
    {.name = "share_prefix", .type = SR_OPT_BOOL, .def = 1, .offset = FIELD(share_prefix),
     .help = "run the model's leading affine layers once per direction"},
    {.name = "lowpass_sigma", .type = SR_OPT_NUM, .lo = 0, .hi = 1e4, .def = 0, .def_text = "none",
     .offset = FIELD(lowpass_sigma), .help = "blur of low-pass directions in pixels (> 0 selects them)"},
    {.name = "tap", .type = SR_OPT_STR, .flags = SR_OPT_CALLER | SR_OPT_NONEMPTY, .what = "a module path",
     .def_text = "the model's default tap", .help = "features of this module (a path as m:find takes)"},
    {.name = "user_directions", .type = SR_OPT_OTHER, .flags = SR_OPT_CALLER,
     .what = "a tensor of at least `directions` rows", .help = "the directions, one per row (normalised)"},
    {.name = "scales", .type = SR_OPT_OTHER, .flags = SR_OPT_CALLER, .what = "a list of 1..4096 positive numbers",
     .help = "the ladder of η, in pixel L2 units"},
    {.name = "ci", .type = SR_OPT_NUM, .lo = 0, .hi = 1, .flags = SR_OPT_CALLER | SR_OPT_OPEN_LO | SR_OPT_OPEN_HI,
     .def = 0.95, .help = "confidence level of the bootstrap bands over images"},
    {.name = "bootstrap", .type = SR_OPT_INT, .lo = 1, .hi = 1e6, .flags = SR_OPT_CALLER, .def = 1000,
     .help = "bootstrap resamples of the images behind the bands"},
    {.name = NULL},
};
#undef FIELD

/* sr_profile_image reads at most this many scales (a ladder, not a sweep). */
#define MAX_SCALES 4096

void sr_profile_opts_default(sr_profile_opts *o)
{
    memset(o, 0, sizeof *o);
    sr_opts_defaults(sr_profile_specs, o);
    o->family = SR_DIRS_GAUSSIAN;
}

int sr_profile_opts_read(const sr_opts *src, sr_profile_opts *o)
{
    sr_profile_opts_default(o);
    if (sr_opts_read(src, sr_profile_specs, o))
        return -1;
    if (o->lowpass_sigma > 0)
        o->family = SR_DIRS_LOWPASS;
    return 0;
}

int sr_profile_set_tap(sr_profile_opts *o, sr_module *m, const char *path)
{
    o->tap = NULL;
    if (!path)
        path = m->default_tap;
    if (path && !(o->tap = sr_module_find(m, path)))
        return sr_fail_context("profile: tap");
    return 0;
}

void sr_profile_result_free(sr_profile_result *r)
{
    free(r->energy);
    free(r->r);
    free(r->noise);
    free(r->per_dir);
    free(r->ci);
    free(r->jvp_sq);
    free(r->rung_ndirs);
    memset(r, 0, sizeof *r);
}

static int64_t total_dirs(const sr_profile_opts *o) { return o->ndirs * (o->antipodal ? 2 : 1); }

/* JVP directions of a fixed-count run: njvp, at most the whole set. */
static int64_t jvp_count(const sr_profile_opts *o) { return o->njvp < total_dirs(o) ? o->njvp : total_dirs(o); }

/* The rows SR_DIRS_USER draws from: at least ndirs of d values each. */
static int check_user_dirs(const sr_profile_opts *o, int64_t d)
{
    const sr_tensor *u = o->user_dirs;
    if (!u || u->ndim < 1 || u->shape[0] < o->ndirs || sr_rowsize(u) != d)
        return sr_fail("profile: user directions %s must hold %lld rows of %lld values", u ? SR_SHAPE(u) : "(none)",
                       (long long)o->ndirs, (long long)d);
    return 0;
}

static uint64_t mix(uint64_t seed, uint64_t i)
{
    uint64_t z = seed ^ (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int sr_profile_direction(const sr_profile_opts *o, int64_t i, const sr_tensor *x, double *out)
{
    int64_t total = total_dirs(o), d = sr_numel(x);
    if (i < 0 || i >= total)
        return sr_fail("profile: direction %lld out of range (set has %lld)", (long long)i, (long long)total);
    int64_t base = i % o->ndirs;
    double sign = (o->antipodal && i >= o->ndirs) ? -1.0 : 1.0;
    if (o->family == SR_DIRS_USER) {
        if (check_user_dirs(o, d))
            return -1;
        for (int64_t e = 0; e < d; e++)
            out[e] = sr_get_flat(o->user_dirs, base * d + e);
    } else {
        sr_rng r;
        sr_rng_seed(&r, mix(o->seed, (uint64_t)base));
        for (int64_t e = 0; e < d; e++)
            out[e] = sr_rng_normal(&r);
        if (o->family == SR_DIRS_LOWPASS && o->lowpass_sigma > 0) {
            /* Blur the noise image over its spatial dims (the same kernel
             * as the blurred evaluation sets), then normalise below. */
            sr_tensor t = SR_TENSOR_INIT;
            if (sr_tensor_alloc(&t, SR_F64, x->ndim, x->shape))
                return -1;
            memcpy(sr_data(&t), out, (size_t)d * sizeof *out);
            int rc = sr_blur(&t, &t, o->lowpass_sigma, 0);
            if (rc == 0)
                memcpy(out, sr_data(&t), (size_t)d * sizeof *out);
            sr_tensor_free(&t);
            if (rc)
                return sr_fail_context("profile: lowpass directions");
        }
    }
    double nrm = 0;
    for (int64_t e = 0; e < d; e++)
        nrm += out[e] * out[e];
    nrm = sqrt(nrm);
    if (!(nrm > 0) || !isfinite(nrm))
        return sr_fail("profile: direction %lld has norm %g (cannot normalise)", (long long)base, nrm);
    for (int64_t e = 0; e < d; e++)
        out[e] *= sign / nrm;
    return 0;
}

/* Features of a batch: a view of the tap's (or model's) output; from
 * child `first` of m on (x standing for the output before it) when first > 0. */
static int features(sr_module *m, int first, const sr_tensor *x, const sr_module *tap, sr_tensor *view)
{
    sr_run run = SR_RUN_INIT;
    sr_tensor tap_out = SR_TENSOR_INIT;
    const sr_module *taps[1] = {tap};
    sr_run_tap(&run, taps, &tap_out);
    if (first ? sr_sequential_forward_from(m, first, x, &run) : sr_module_forward(m, x, &run))
        return -1;
    if (tap && !tap_out.storage)
        return sr_fail("profile: the tap was not reached by the forward pass");
    sr_tensor_share(view, tap ? &tap_out : &m->out);
    sr_tensor_free(&tap_out);
    return 0;
}

/* The stacked JVP at x along u_1..u_k (k rows of x's size, in double), up
 * to tap (NULL: the whole model): *out becomes a view of [f(x); J u_1;
 * ...; J u_k].  tan, stack: the caller's buffers (the tangents rounded to
 * x's dtype, the stacked input), reused across calls. */
static int stacked_jvp(sr_module *m, const sr_tensor *x, const double *u, int64_t k, const sr_module *tap,
                       int record_relu, sr_tensor *tan, sr_tensor *stack, sr_tensor *out)
{
    int64_t shape[SR_MAXDIM];
    memcpy(shape, x->shape, sizeof shape);
    shape[0] = k;
    if (sr_tensor_ensure(tan, x->dtype, x->ndim, shape))
        return -1;
    SR_DISPATCH(x->dtype, to_real, sr_data(tan), u, k * sr_numel(x));
    if (sr_tensor_stack_jvp(stack, x, tan))
        return -1;
    sr_run run = SR_RUN_INIT;
    sr_tensor tap_out = SR_TENSOR_INIT;
    const sr_module *taps[1] = {tap};
    run.n = 1;
    run.k = k;
    run.record_relu = record_relu;
    sr_run_tap(&run, taps, &tap_out);
    if (sr_module_jvp(m, stack, &run))
        return -1;
    sr_tensor_share(out, tap ? &tap_out : &m->out);
    sr_tensor_free(&tap_out);
    return 0;
}

/* Leading children of m shared by every row of a batch: an affine prefix
 * (sr_sequential_affine_prefix) maps x + ηu to A + η·L(u), A its output at
 * x and L its linear part, so each direction needs one pass through it (a
 * stacked JVP) instead of one per rung, and the rows start after it.  The
 * tap, if inside, ends it. */
static int shared_prefix(const sr_module *m, const sr_profile_opts *o)
{
    int n = o->share_prefix ? sr_sequential_affine_prefix(m) : 0;
    for (int i = 0; i < n; i++)
        if (m->children[i].m == o->tap)
            n = i;
    return n;
}

/* D[s * nidx + a] = D_s for direction idx[a], at the rungs s with
 * on[s] (all when on is NULL; the others get NaN).  With exact (ReLU nets),
 * pairs whose η lies below the direction's first activation boundary
 * exact->dist[a] are η²‖Ju‖² (exact->jsq[a]) without a forward; their count
 * is added to exact->filled. */
typedef struct {
    const double *dist, *jsq;
    int64_t filled;
} exact_info;

static int energies(sr_module *m, const sr_tensor *x, const double *f0, int64_t nf,
                    const sr_profile_opts *o, const int64_t *idx, int64_t nidx, int64_t batch, double *D,
                    int64_t *nfwd, exact_info *exact, const unsigned char *on)
{
    int ns = o->nscales, pre = shared_prefix(m, o);
    int64_t d = sr_numel(x);
    int64_t per = batch / ns > 0 ? batch / ns : 1; /* directions generated at a time */
    int64_t cap = per * ns;                        /* rows per forward batch */
    size_t es = sr_dtype_size(x->dtype);
    int rc = -1;
    double *u = malloc((size_t)(per * d) * sizeof *u);
    double *dist = malloc((size_t)cap * sizeof *dist);
    int64_t *pair = malloc((size_t)cap * sizeof *pair); /* a * ns + s within the chunk */
    sr_tensor rows = SR_TENSOR_INIT, y = SR_TENSOR_INIT, A = SR_TENSOR_INIT, lin = SR_TENSOR_INIT,
              tan = SR_TENSOR_INIT, stack = SR_TENSOR_INIT;
    const sr_module *pend = pre ? m->children[pre - 1].m : NULL;
    if (!u || !dist || !pair) {
        sr_fail("profile: out of memory for a batch of %lld directions", (long long)per);
        goto done;
    }
    /* A, once: the same rounding for every chunk, whatever its size */
    if (pre && features(m, 0, x, pend, &A))
        goto done;
    for (int64_t a0 = 0; a0 < nidx; a0 += per) {
        int64_t na = a0 + per <= nidx ? per : nidx - a0, npairs = 0;
        for (int64_t a = 0; a < na; a++)
            for (int s = 0; s < ns; s++) {
                if (on && !on[s]) {
                    D[s * nidx + a0 + a] = NAN;
                } else if (exact && o->scales[s] < exact->dist[a0 + a]) {
                    D[s * nidx + a0 + a] = o->scales[s] * o->scales[s] * exact->jsq[a0 + a];
                    exact->filled++;
                } else {
                    pair[npairs++] = a * ns + s;
                }
            }
        if (npairs == 0)
            continue;
        for (int64_t a = 0; a < na; a++)
            if (sr_profile_direction(o, idx[a0 + a], x, u + a * d))
                goto done;
        if (pre && stacked_jvp(m, x, u, na, pend, 0, &tan, &stack, &lin))
            goto done;
        const sr_tensor *start = pre ? &A : x; /* the rows' shape */
        int64_t q = sr_numel(start), shape[SR_MAXDIM];
        memcpy(shape, start->shape, sizeof shape);
        shape[0] = npairs;
        if (sr_tensor_ensure(&rows, x->dtype, start->ndim, shape))
            goto done;
        for (int64_t r = 0; r < npairs; r++) {
            int64_t a = pair[r] / ns;
            int s = (int)(pair[r] % ns);
            void *row = (char *)sr_data(&rows) + (size_t)(r * q) * es;
            if (pre)
                SR_DISPATCH(x->dtype, fill_affine, row, sr_data(&A),
                            (const void *)((const char *)sr_data(&lin) + (size_t)((1 + a) * q) * es), o->scales[s],
                            q);
            else
                SR_DISPATCH(x->dtype, fill_row, row, sr_data(x), u + a * d, o->scales[s], d);
        }
        sr_tensor_free(&lin);
        if (features(m, pre, &rows, o->tap, &y))
            goto done;
        if (y.shape[0] != npairs || sr_rowsize(&y) != nf) {
            sr_fail("profile: batch features %s, expected %lld rows of %lld", SR_SHAPE(&y),
                    (long long)npairs, (long long)nf);
            goto done;
        }
        SR_DISPATCH(y.dtype, sq_dist, dist, sr_data(&y), f0, npairs, nf);
        sr_tensor_free(&y);
        for (int64_t r = 0; r < npairs; r++)
            D[(pair[r] % ns) * nidx + a0 + pair[r] / ns] = dist[r];
        *nfwd += npairs;
    }
    rc = 0;
done:
    free(u);
    free(dist);
    free(pair);
    sr_tensor_free(&rows);
    sr_tensor_free(&y);
    sr_tensor_free(&A);
    sr_tensor_free(&lin);
    sr_tensor_free(&tan);
    sr_tensor_free(&stack);
    return rc;
}

/* jsq[a] = ‖J u_idx[a]‖², k tangents per stacked jvp. */
static int jac_energies(sr_module *m, const sr_tensor *x, const sr_profile_opts *o, const int64_t *idx,
                        int64_t nidx, double *jsq, int64_t *nfwd, double *dpos, double *dneg)
{
    int64_t d = sr_numel(x), k = o->jvp_k;
    int rc = -1;
    double *u = malloc((size_t)(k * d) * sizeof *u);
    sr_tensor tan = SR_TENSOR_INIT, stack = SR_TENSOR_INIT, out = SR_TENSOR_INIT;
    if (!u) {
        sr_fail("profile: out of memory for %lld tangents", (long long)k);
        goto done;
    }
    for (int64_t j0 = 0; j0 < nidx; j0 += k) {
        int64_t kk = j0 + k <= nidx ? k : nidx - j0;
        for (int64_t a = 0; a < kk; a++)
            if (sr_profile_direction(o, idx[j0 + a], x, u + a * d))
                goto done;
        if (stacked_jvp(m, x, u, kk, o->tap, dpos != NULL, &tan, &stack, &out))
            goto done;
        if (dpos && sr_relu_boundary_walk(m, kk, dpos + j0, dneg ? dneg + j0 : NULL, NULL))
            goto done;
        int64_t nf = sr_rowsize(&out);
        size_t es = sr_dtype_size(out.dtype);
        for (int64_t a = 0; a < kk; a++)
            jsq[j0 + a] = SR_DISPATCH_RET(out.dtype, sq_sum,
                                          (const void *)((const char *)sr_data(&out) + (size_t)((1 + a) * nf) * es), nf);
        sr_tensor_free(&out);
        *nfwd += 1 + kk;
    }
    rc = 0;
done:
    free(u);
    sr_tensor_free(&tan);
    sr_tensor_free(&stack);
    sr_tensor_free(&out);
    return rc;
}

static double mean_of(const double *v, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    return n ? s / (double)n : NAN;
}

static double var_of(const double *v, int64_t n, double mean)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (v[i] - mean) * (v[i] - mean);
    return n > 1 ? s / (double)(n - 1) : INFINITY;
}

/* Two-sided 95% quantile of Student's t with nu degrees of freedom: a table
 * below 5, above it the Cornish-Fisher expansion (Abramowitz & Stegun
 * 26.7.5), within 3e-4 at nu = 5 and 1e-6 from nu = 20.  Sequential mode
 * judges a rung from as few as one chunk of directions, where the normal
 * quantile would make the interval too narrow. */
static double t975(int64_t nu)
{
    static const double small[] = {INFINITY, 12.7062047, 4.30265273, 3.18244631, 2.77644511};
    if (nu < 1)
        return INFINITY;
    if (nu < 5)
        return small[nu];
    double z = 1.959963984540054, v = (double)nu;
    double z2 = z * z, z3 = z2 * z, z5 = z3 * z2, z7 = z5 * z2, z9 = z7 * z2;
    return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
           (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v) +
           (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / (92160 * v * v * v * v);
}

/* One rung: mean energy, r and the relative 95% CI half-width of r.
 * dpos[i] and dneg[i] (NULL without antipodes) are D of base direction i
 * and of its antipode, i < n; jsq[j], j < nj, are JVP energies.  The units
 * are base directions (a direction and its antipode averaged, which is how
 * they enter r).  paired (JVP i belongs to direction i, nj == n): the delta
 * method on the per-unit residual D̄_i − r η² J_i, which is small wherever
 * Φ is close to linear; otherwise numerator and denominator are treated as
 * independent means. */
typedef struct {
    double energy, r, ci;
} rung_est;

static rung_est rung_estimate(const double *dpos, const double *dneg, int64_t n, const double *jsq, int64_t nj,
                              int paired, double eta2, double *scratch)
{
    rung_est e;
    double B = mean_of(jsq, nj), rel;
    int64_t df;
    for (int64_t i = 0; i < n; i++)
        scratch[i] = dneg ? 0.5 * (dpos[i] + dneg[i]) : dpos[i];
    e.energy = mean_of(scratch, n);
    e.r = e.energy / (eta2 * B);
    if (paired && nj == n) {
        for (int64_t i = 0; i < n; i++)
            scratch[i] = (scratch[i] - e.r * eta2 * jsq[i]) / (eta2 * B);
        /* var_of with mean 0: the residuals average to 0 by construction */
        rel = sqrt(var_of(scratch, n, 0) / (double)n) / (e.r > 0 ? e.r : 1);
        df = n - 1;
    } else {
        double va = var_of(scratch, n, e.energy), vb = var_of(jsq, nj, B);
        rel = sqrt(va / (double)n / (e.energy * e.energy) + vb / (double)nj / (B * B));
        df = (n < nj ? n : nj) - 1;
    }
    e.ci = t975(df) * rel;
    return e;
}

static int64_t auto_batch(int64_t d)
{
    /* About 32 MB of float32 input rows per batch: enough rows to keep the
     * GEMMs of the late, small-plane layers fat (ResNet-50 at 224: 51 rows
     * ran 8% faster per image than 17, no gain beyond), small enough for
     * activations of big models to fit. */
    int64_t b = ((int64_t)8 << 20) / (d > 0 ? d : 1);
    return b < 8 ? 8 : b > 512 ? 512 : b;
}

static int check_opts(const sr_module *m, const sr_tensor *x, const sr_profile_opts *o)
{
    if (x->ndim < 2 || x->shape[0] != 1)
        return sr_fail("profile: image %s must be a single input (1, C, H, W)", SR_SHAPE(x));
    if (x->dtype != m->dtype)
        return sr_fail("profile: image is %s but the model is %s", sr_dtype_name(x->dtype),
                       sr_dtype_name(m->dtype));
    if (m->training)
        return sr_fail("profile: the model is in training mode; call m:eval() first");
    if (sr_opts_check("profile", sr_profile_specs, o))
        return -1;
    if (o->nscales < 1 || o->nscales > MAX_SCALES || !o->scales)
        return sr_fail("profile: %d scales (need 1..%d)", o->nscales, MAX_SCALES);
    if (o->family == SR_DIRS_USER && check_user_dirs(o, sr_numel(x)))
        return -1;
    for (int s = 0; s < o->nscales; s++)
        if (!(o->scales[s] > 0) || !isfinite(o->scales[s]))
            return sr_fail("profile: scale %d is %g (scales must be positive and finite)", s + 1,
                           o->scales[s]);
    if (!sr_tensor_all_finite(x, NULL))
        return sr_fail("profile: the image %s contains NaN or Inf", SR_SHAPE(x));
    return 0;
}

/* Direction indices of base directions [b0, b1): the bases, then (with
 * antipodes) their antipodes, so D blocks keep the u..., −u... layout. */
static void index_range(const sr_profile_opts *o, int64_t b0, int64_t b1, int64_t *idx)
{
    int64_t n = b1 - b0;
    for (int64_t b = 0; b < n; b++) {
        idx[b] = b0 + b;
        if (o->antipodal)
            idx[n + b] = o->ndirs + b0 + b;
    }
}

/* Boundary distances and JVP energies of the base directions idx[0..nb)
 * and (with antipodes) of their antipodes, in index_range's order: one JVP
 * per base direction serves both signs. */
static int exact_prepare(sr_module *m, const sr_tensor *x, const sr_profile_opts *o, const int64_t *idx, int64_t nb,
                         double *jsq, double *dist, int64_t *nfwd)
{
    if (jac_energies(m, x, o, idx, nb, jsq, nfwd, dist, o->antipodal ? dist + nb : NULL))
        return -1;
    if (o->antipodal)
        memcpy(jsq + nb, jsq, (size_t)nb * sizeof *jsq);
    return 0;
}

/* Base directions at which an open rung is judged next, after its CI at
 * n directions came out as ci > target: where the CI is predicted to meet
 * the target (it shrinks as 1/√n), at least a quarter and at most one
 * chunk ahead, so a rung is not carried a whole chunk past its need. */
static int64_t next_look(int64_t n, double ci, double target, int64_t chunk)
{
    double need = (double)n * (ci / target) * (ci / target);
    int64_t lo = chunk / 4 > 0 ? chunk / 4 : 1;
    int64_t step = need < (double)(n + chunk) ? (int64_t)ceil(need) - n : chunk;
    return n + (step < lo ? lo : step);
}

/* Sequential mode: steps of base directions, each with its JVP, each
 * evaluated only at the rungs still open.  A rung is judged at want[s]
 * directions (the first time at seq_min) and closes once the paired CI of
 * its r is within target_ci; its r then stays the ratio of means over the
 * directions it has, a prefix 0..rung_ndirs[s) of the set.  D[s * total +
 * i] in the final [u..., −u...] layout with stride total; NaN where a rung
 * had closed. */
static int sequential(sr_module *m, const sr_tensor *x, const double *f0, int64_t nf, const sr_profile_opts *o,
                      int64_t batch, double *D, int64_t *idx, double *scratch, exact_info *exact, double *xdist,
                      double *xjsq, sr_profile_result *res)
{
    int ns = o->nscales, anti = o->antipodal ? 1 : 0;
    int64_t total = total_dirs(o), chunk = o->seq_chunk > 0 ? o->seq_chunk : 32;
    int64_t minimum = o->seq_min > 0 ? o->seq_min : chunk, used = 0;
    int rc = -1, open = ns;
    double *stepD = malloc((size_t)(ns * chunk * (1 + anti)) * sizeof *stepD);
    unsigned char *on = malloc((size_t)ns);
    int64_t *want = malloc((size_t)ns * sizeof *want);
    if (!stepD || !on || !want) {
        sr_fail("profile: out of memory");
        goto done;
    }
    for (int s = 0; s < ns; s++) {
        on[s] = 1;
        want[s] = minimum;
    }
    for (int64_t i = 0; i < ns * total; i++)
        D[i] = NAN;
    while (used < o->ndirs && open > 0) {
        /* up to the next look of any open rung, at most a chunk */
        int64_t b1 = used + chunk < o->ndirs ? used + chunk : o->ndirs;
        for (int s = 0; s < ns; s++)
            if (on[s] && want[s] < b1)
                b1 = want[s];
        int64_t nb = b1 - used, nidx = nb * (1 + anti);
        for (int64_t b = 0; b < nb; b++)
            idx[b] = used + b;
        if (exact) {
            if (exact_prepare(m, x, o, idx, nb, xjsq, xdist, &res->nforward))
                goto done;
            memcpy(res->jvp_sq + used, xjsq, (size_t)nb * sizeof *xjsq);
        } else if (jac_energies(m, x, o, idx, nb, res->jvp_sq + used, &res->nforward, NULL, NULL)) {
            goto done;
        }
        index_range(o, used, b1, idx);
        if (energies(m, x, f0, nf, o, idx, nidx, batch, stepD, &res->nforward, exact, on))
            goto done;
        for (int s = 0; s < ns; s++) {
            if (!on[s])
                continue;
            for (int64_t b = 0; b < nb; b++) {
                D[s * total + used + b] = stepD[s * nidx + b];
                if (anti)
                    D[s * total + o->ndirs + used + b] = stepD[s * nidx + nb + b];
            }
            res->rung_ndirs[s] = b1;
        }
        used = b1;
        res->njvp_used = used;
        for (int s = 0; s < ns; s++) {
            if (!on[s] || want[s] > used)
                continue;
            const double *Ds = D + s * total;
            rung_est e = rung_estimate(Ds, anti ? Ds + o->ndirs : NULL, used, res->jvp_sq, used, 1,
                                       o->scales[s] * o->scales[s], scratch);
            if (e.ci <= o->target_ci) {
                on[s] = 0;
                open--;
            } else {
                want[s] = next_look(used, e.ci, o->target_ci, chunk);
            }
        }
    }
    res->ndirs_used = used;
    rc = 0;
done:
    free(stepD);
    free(on);
    free(want);
    return rc;
}

int sr_profile_image(sr_module *m, const sr_tensor *x, const sr_profile_opts *o,
                     sr_profile_result *res)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(res, 0, sizeof *res);
    if (check_opts(m, x, o))
        return -1;
    int ns = o->nscales, anti = o->antipodal ? 1 : 0;
    int seq = o->target_ci > 0;
    int64_t total = total_dirs(o), batch = o->batch > 0 ? o->batch : auto_batch(sr_numel(x));
    int64_t nnoise = o->noise_dirs < total ? o->noise_dirs : total;
    int rc = -1, converted = 0;
    double *f0 = NULL, *D = NULL, *D64 = NULL, *scratch = NULL, *xdist = NULL, *xjsq = NULL;
    int64_t *idx = NULL;
    sr_tensor y0 = SR_TENSOR_INIT, x64 = SR_TENSOR_INIT;
    exact_info ex = {NULL, NULL, 0}, *exact = NULL;
    res->nscales = ns;
    res->energy = calloc((size_t)ns, sizeof(double));
    res->r = calloc((size_t)ns, sizeof(double));
    res->noise = calloc((size_t)ns, sizeof(double));
    res->ci = calloc((size_t)ns, sizeof(double));
    res->rung_ndirs = calloc((size_t)ns, sizeof(int64_t));
    D = malloc((size_t)(ns * total) * sizeof *D);
    idx = malloc((size_t)total * sizeof *idx);
    scratch = malloc((size_t)total * sizeof *scratch);
    res->jvp_sq = malloc((size_t)(seq ? o->ndirs : jvp_count(o)) * sizeof(double));
    if (!res->energy || !res->r || !res->noise || !res->ci || !res->rung_ndirs || !D || !idx || !scratch ||
        !res->jvp_sq) {
        sr_fail("profile: out of memory");
        goto done;
    }

    /* Primal features Φ(x), kept in double. */
    if (features(m, 0, x, o->tap, &y0))
        goto done;
    int64_t nf = sr_numel(&y0);
    if (!(f0 = malloc((size_t)nf * sizeof *f0))) {
        sr_fail("profile: out of memory");
        goto done;
    }
    for (int64_t e = 0; e < nf; e++)
        f0[e] = sr_get_flat(&y0, e);
    sr_tensor_free(&y0);
    res->nforward = 1;

    if (o->exact_relu) {
        if (sr_check_piecewise_linear(m)) {
            sr_fail_context("profile: exact_relu");
            goto done;
        }
        xdist = malloc((size_t)total * sizeof *xdist);
        xjsq = malloc((size_t)total * sizeof *xjsq);
        if (!xdist || !xjsq) {
            sr_fail("profile: out of memory");
            goto done;
        }
        ex.dist = xdist;
        ex.jsq = xjsq;
        exact = &ex;
    }
    if (!seq) {
        /* JVPs 0..njvp reach into the antipodes past the base directions,
         * but J(−u) = −Ju: an antipode's energy is its base's, no new
         * sample (counting it would narrow the CIs), so they are skipped.
         * With exact_relu every base direction has its JVP already. */
        int64_t ndistinct = o->njvp < o->ndirs ? o->njvp : o->ndirs;
        for (int64_t b = 0; b < (exact ? o->ndirs : ndistinct); b++)
            idx[b] = b;
        /* exact: all base directions at once, so exact_prepare's order is
         * the set's order */
        if (exact ? exact_prepare(m, x, o, idx, o->ndirs, xjsq, xdist, &res->nforward)
                  : jac_energies(m, x, o, idx, ndistinct, res->jvp_sq, &res->nforward, NULL, NULL))
            goto done;
        if (exact)
            memcpy(res->jvp_sq, xjsq, (size_t)ndistinct * sizeof *xjsq);
        res->njvp_used = ndistinct;
        for (int64_t i = 0; i < total; i++)
            idx[i] = i;
        if (energies(m, x, f0, nf, o, idx, total, batch, D, &res->nforward, exact, NULL))
            goto done;
        res->ndirs_used = o->ndirs;
        for (int s = 0; s < ns; s++)
            res->rung_ndirs[s] = o->ndirs;
    } else if (sequential(m, x, f0, nf, o, batch, D, idx, scratch, exact, xdist, xjsq, res)) {
        goto done;
    }
    res->nexact = ex.filled;
    res->shared_layers = shared_prefix(m, o);
    int64_t nbase = res->ndirs_used, nused = nbase * (1 + anti);
    if (seq && nbase < o->ndirs) /* compact to [s][u_0..u_{n-1}, −u_0..−u_{n-1}] */
        for (int s = 0; s < ns; s++) {
            memmove(D + s * nused, D + s * total, (size_t)nbase * sizeof *D);
            if (anti)
                memmove(D + s * nused + nbase, D + s * total + o->ndirs, (size_t)nbase * sizeof *D);
        }
    res->ndirs_total = nused;
    res->jac_energy = mean_of(res->jvp_sq, res->njvp_used);
    for (int s = 0; s < ns; s++) {
        const double *Ds = D + s * nused;
        int64_t n = res->rung_ndirs[s];
        /* sequential: the JVP set is the direction set (paired CI) */
        rung_est e = rung_estimate(Ds, anti ? Ds + nbase : NULL, n, res->jvp_sq, seq ? n : res->njvp_used, seq,
                                   o->scales[s] * o->scales[s], scratch);
        res->energy[s] = e.energy;
        res->r[s] = e.r;
        res->ci[s] = e.ci;
        res->noise[s] = NAN;
    }

    /* Float32 noise: re-evaluate the first directions in float64 and compare
     * the energies; a rung whose error exceeds noise_max is discarded.  Every
     * rung has at least its first chunk of directions. */
    for (int s = 0; s < ns; s++)
        if (nnoise > res->rung_ndirs[s])
            nnoise = res->rung_ndirs[s];
    if (nnoise > 0 && m->dtype == SR_F32) {
        if (!(D64 = malloc((size_t)(ns * nnoise) * sizeof *D64)))
            goto done;
        if (sr_module_to_dtype(m, SR_F64))
            goto done;
        converted = 1;
        if (sr_tensor_convert(&x64, x, SR_F64) || features(m, 0, &x64, o->tap, &y0))
            goto done;
        double *g0 = malloc((size_t)nf * sizeof *g0);
        if (!g0)
            goto done;
        for (int64_t e = 0; e < nf; e++)
            g0[e] = sr_get_flat(&y0, e);
        sr_tensor_free(&y0);
        for (int64_t i = 0; i < nnoise; i++)
            idx[i] = i;
        int bad = energies(m, &x64, g0, nf, o, idx, nnoise, batch, D64, &res->nforward, NULL, NULL);
        free(g0);
        if (bad)
            goto done;
        for (int s = 0; s < ns; s++) {
            double err = 0, ref = 0;
            for (int64_t i = 0; i < nnoise; i++) {
                err += fabs(D[s * nused + i] - D64[s * nnoise + i]);
                ref += D64[s * nnoise + i];
            }
            res->noise[s] = ref > 0 ? err / ref : (err > 0 ? INFINITY : 0);
            if (res->noise[s] > o->noise_max)
                res->r[s] = NAN;
        }
    }
    if (o->per_direction) {
        res->per_dir = D;
        D = NULL;
    }
    rc = 0;
done:
    if (converted && sr_module_to_dtype(m, SR_F32) && rc == 0)
        rc = -1;
    free(f0);
    free(D);
    free(D64);
    free(scratch);
    free(xdist);
    free(xjsq);
    free(idx);
    sr_tensor_free(&y0);
    sr_tensor_free(&x64);
    if (rc)
        sr_profile_result_free(res);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}

#endif
