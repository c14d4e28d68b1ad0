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

#include "stats/metrics.h"
#include "tensor/tensor_ops.h"

#define SR_GENERIC_FILE "stats/profile.c"
#include "base/generic.h"

#define FIELD(f) offsetof(sr_profile_opts, f)
static const char *const range_names[] = {"auto", "paper", NULL};

const sr_opt_spec sr_profile_specs[] = {
    {.name = "directions", .type = SR_OPT_INT, .lo = 1, .hi = 1e6, .def = 1024, .offset = FIELD(ndirs),
     .help = "distinct directions u_1..u_n per image (sequential: at most this many)"},
    {.name = "first_direction", .type = SR_OPT_INT, .lo = 0, .hi = 1e15, .def = 0, .offset = FIELD(first),
     .help = "index of the first direction (directions are fixed by the seed and their index: a run can be continued)"},
    {.name = "antipodal", .type = SR_OPT_BOOL, .def = 1, .offset = FIELD(antipodal),
     .help = "also -u_i: the set is u_1..u_n, -u_1..-u_n"},
    {.name = "paired", .type = SR_OPT_BOOL, .def = 0, .offset = FIELD(paired),
     .help = "every direction with its own exact JVP, the denominator over the same directions (r = 1 where "
             "the model is linear); off: the first jvp_directions only, as the paper"},
    {.name = "jvp_directions", .type = SR_OPT_INT, .lo = 1, .hi = 2e6, .def = 256, .offset = FIELD(njvp),
     .help = "unpaired: exact JVPs behind the denominator, the first n of the set (more than the set: all of it)"},
    {.name = "orthogonal", .type = SR_OPT_INT, .lo = 0, .hi = 1e6, .flags = SR_OPT_FALSE_NONE, .def = 0,
     .def_text = "none", .offset = FIELD(orthogonal),
     .help = "directions in orthonormal blocks of this many (Gram-Schmidt of the Gaussian draws, at most the "
             "input's dimension; 0 or 1: independent)"},
    {.name = "seed", .type = SR_OPT_INT, .lo = -INFINITY, .hi = INFINITY, .def = 0, .offset = FIELD(seed),
     .help = "per-image seed of the directions"},
    {.name = "batch", .type = SR_OPT_INT, .lo = 1, .hi = 1e6, .def = 0, .def_text = "auto", .offset = FIELD(batch),
     .help = "rows per forward batch (auto: about 32 MB of input rows)"},
    {.name = "jvp_batch", .type = SR_OPT_INT, .lo = 1, .hi = 4096, .def = 16, .offset = FIELD(jvp_k),
     .help = "tangents per stacked JVP"},
    {.name = "noise_directions", .type = SR_OPT_INT, .lo = 0, .hi = 1e6, .def = 16, .offset = FIELD(noise_dirs),
     .help = "directions (antipodes counted; 0 or at least 2 base directions) re-evaluated in float64, numerator "
             "and JVPs: p.noise is then a 95% upper confidence bound on the float32 error of r over the whole "
             "direction set (|error on them| + t_0.975 x its standard error as a sample of the set; 0: none); "
             "their JVP energies are checked against a float64 forward difference (p.fd_jvp, float64 runs too), "
             "and both widen every shape call's bounds"},
    {.name = "noise_fpc", .type = SR_OPT_BOOL, .def = 1, .offset = FIELD(noise_fpc),
     .help = "finite-population correction of the noise bound (off: the run adds directions later, as the "
             "sequential estimator's first step)"},
    {.name = "noise_max", .type = SR_OPT_NUM, .lo = 0, .hi = INFINITY, .def = 0.05, .offset = FIELD(noise_max),
     .help = "discard a rung whose float32 error bound, of r or of its energy, exceeds this fraction"},
    {.name = "per_direction", .type = SR_OPT_BOOL, .def = 0, .offset = FIELD(per_direction),
     .help = "keep every direction's displacement energy"},
    {.name = "exact_relu", .type = SR_OPT_BOOL, .def = 0, .offset = FIELD(exact_relu),
     .help = "ReLU nets: pairs below the direction's first activation boundary are exact, without a forward"},
    {.name = "share_prefix", .type = SR_OPT_BOOL, .def = 1, .offset = FIELD(share_prefix),
     .help = "run the model's leading affine layers once per direction"},
    {.name = "directional", .type = SR_OPT_BOOL, .def = 1, .offset = FIELD(directional),
     .help = "JVPs take the one-sided directional derivative at kinks and ties (ReLU at 0, tied maxima), u and -u "
             "each their own, so r -> 1 as eta -> 0 on every input of a piecewise-linear model; false: PyTorch's "
             "subgradient"},
    {.name = "emulate_bf16", .type = SR_OPT_BOOL, .def = 0, .offset = FIELD(emulate_bf16),
     .help = "measure what bfloat16 would cost: the displacement forwards round conv2d's and linear's inputs and "
             "weights to bf16 (float32 accumulation), the JVPs and the float64 check stay exact, so p.noise bounds "
             "the bf16 error of r (no faster)"},
    {.name = "lowpass_sigma", .type = SR_OPT_NUM, .lo = 0, .hi = 1e4, .def = 0, .def_text = "none",
     .offset = FIELD(lowpass_sigma), .help = "blur of low-pass directions in pixels (> 0 selects them)"},
    {.name = "tap", .type = SR_OPT_STR, .flags = SR_OPT_CALLER | SR_OPT_NONEMPTY, .what = "a module path",
     .def_text = "the model's default tap", .help = "features of this module (a path as m:find takes)"},
    {.name = "user_directions", .type = SR_OPT_OTHER, .flags = SR_OPT_CALLER,
     .what = "a tensor of at least `directions` rows", .help = "the directions, one per row (normalised)"},
    {.name = "scales", .type = SR_OPT_OTHER, .flags = SR_OPT_CALLER, .what = "a list of 1..4096 positive numbers",
     .help = "the ladder of η, in pixel L2 units"},
    /* the estimator over images (lua/srgeo/profile.lua) */
    {.name = "ci", .type = SR_OPT_NUM, .lo = 0, .hi = 1, .flags = SR_OPT_CALLER | SR_OPT_OPEN_LO | SR_OPT_OPEN_HI,
     .def = 0.95, .help = "confidence level of the bootstrap bands over images"},
    {.name = "bootstrap", .type = SR_OPT_INT, .lo = 1, .hi = 1e6, .flags = SR_OPT_CALLER, .def = 1000,
     .help = "bootstrap resamples of the images behind the bands"},
    {.name = "alpha", .type = SR_OPT_NUM, .lo = 0, .hi = 0.5, .flags = SR_OPT_CALLER | SR_OPT_OPEN_LO, .def = 0.05,
     .help = "level of the shape tests behind the bump call (familywise over the rungs compared)"},
    {.name = "range", .type = SR_OPT_CHOICE, .choices = range_names, .flags = SR_OPT_CALLER, .def = 1,
     .def_text = "\"paper\" (scripts and notebooks: \"auto\")",
     .help = "auto: the paper ladder extended upward with the same spacing until the shape is decided or the "
             "perturbation's per-pixel RMS reaches 1; paper: the published ladder"},
    {.name = "refine", .type = SR_OPT_BOOL, .flags = SR_OPT_CALLER, .def = 0,
     .help = "add rungs halfway between the peak's neighbours, so peak η is located within half a rung spacing"},
    {.name = "target_ci", .type = SR_OPT_NUM, .lo = 0, .hi = 1, .flags = SR_OPT_CALLER | SR_OPT_OPEN_LO | SR_OPT_OPEN_HI,
     .def = 0, .def_text = "off",
     .help = "sequential: close a rung once the relative 95% CI of the image's r is within this (instead of "
             "seq_between and seq_paper)"},
    {.name = "seq_between", .type = SR_OPT_NUM, .lo = 0, .hi = 1, .flags = SR_OPT_CALLER, .def = 0.25,
     .help = "sequential: close a rung once the image's SE of r is at most this fraction of the between-image "
             "SD at the rung (0: off)"},
    {.name = "seq_paper", .type = SR_OPT_NUM, .lo = 0, .hi = 1, .flags = SR_OPT_CALLER, .def = 0.5,
     .help = "sequential: close a rung once the image's 95% CI of r is at most this fraction of the one the paper "
             "protocol would give on it (0: off)"},
    {.name = "seq_chunk", .type = SR_OPT_INT, .lo = 1, .hi = 1e6, .flags = SR_OPT_CALLER, .def = 32,
     .help = "sequential: base directions in the first step and the least added per step"},
    {.name = "seq_min", .type = SR_OPT_INT, .lo = 0, .hi = 1e6, .flags = SR_OPT_CALLER, .def = 0,
     .def_text = "one chunk", .help = "sequential: base directions before a rung may close"},
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
    free(r->ci);
    free(r->moments);
    free(r->noise);
    free(r->noise_energy);
    free(r->per_dir);
    free(r->jvp_sq);
    memset(r, 0, sizeof *r);
}

static int64_t total_dirs(const sr_profile_opts *o) { return o->ndirs * (o->antipodal ? 2 : 1); }

/* The run's direction set (stats/directions.h) for image x. */
static int dirs_open(const sr_profile_opts *o, const sr_tensor *x, sr_dir_set *g)
{
    memset(g, 0, sizeof *g);
    g->family = o->family;
    g->seed = o->seed;
    g->first = o->first;
    g->ndirs = o->ndirs;
    g->antipodal = o->antipodal;
    g->block = o->orthogonal;
    g->user = o->user_dirs;
    g->lowpass_sigma = o->lowpass_sigma;
    return sr_dirs_init(g, x);
}

int sr_profile_direction(const sr_profile_opts *o, int64_t i, const sr_tensor *x, double *out)
{
    sr_dir_set g;
    int rc = dirs_open(o, x, &g);
    if (rc == 0)
        rc = sr_dirs_get(&g, i, out);
    sr_dirs_free(&g);
    return rc;
}

/* Features of a batch: a view of the tap's (or model's) output; from
 * child `first` of m on (x standing for the output before it) when first > 0;
 * bf16: sr_run.bf16. */
static int features(sr_module *m, int first, const sr_tensor *x, const sr_module *tap, int bf16, sr_tensor *view)
{
    sr_run run = SR_RUN_INIT;
    run.bf16 = bf16;
    sr_tensor tap_out = SR_TENSOR_INIT;
    const sr_module *taps[1] = {tap};
    sr_run_tap(&run, taps, &tap_out);
    if (first ? sr_module_forward_from(m, first, x, &run) : sr_module_forward(m, x, &run))
        return -1;
    if (tap && !tap_out.storage)
        return sr_fail("profile: the tap was not reached by the forward pass");
    sr_tensor_share(view, tap ? &tap_out : &m->out);
    sr_tensor_free(&tap_out);
    return 0;
}

/* features() of one row in double: *out (malloc'd; the caller frees it)
 * gets its *n values. */
static int features_f64(sr_module *m, int first, const sr_tensor *x, const sr_module *tap, int bf16, double **out,
                        int64_t *n)
{
    sr_tensor y = SR_TENSOR_INIT;
    if (features(m, first, x, tap, bf16, &y))
        return -1;
    *n = sr_numel(&y);
    if (!(*out = malloc((size_t)*n * sizeof **out))) {
        sr_tensor_free(&y);
        return sr_fail("profile: out of memory");
    }
    for (int64_t e = 0; e < *n; e++)
        (*out)[e] = sr_get_flat(&y, e);
    sr_tensor_free(&y);
    return 0;
}

/* The stacked JVP at x along u_1..u_k (k rows of x's size, in double), up
 * to tap (NULL: the whole model): *out becomes a view of [f(x); J u_1;
 * ...; J u_k].  tan, stack: the caller's buffers (the tangents rounded to
 * x's dtype, the stacked input), reused across calls. */
static int stacked_jvp(sr_module *m, const sr_tensor *x, const double *u, int64_t k, const sr_module *tap,
                       int record_relu, int directional, sr_kinks *kinks, sr_tensor *tan, sr_tensor *stack,
                       sr_tensor *out)
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
    run.directional = directional;
    run.kinks = kinks;
    sr_run_tap(&run, taps, &tap_out);
    if (sr_module_jvp(m, stack, &run))
        return -1;
    sr_tensor_share(out, tap ? &tap_out : &m->out);
    sr_tensor_free(&tap_out);
    return 0;
}

/* Leading children of m shared by every row of a batch: an affine prefix
 * (sr_module_affine_prefix) maps x + ηu to A + η·L(u), A its output at
 * x and L its linear part, so each direction needs one pass through it (a
 * stacked JVP) instead of one per rung, and the rows start after it.  The
 * tap, if inside, ends it. */
static int shared_prefix(const sr_module *m, const sr_profile_opts *o)
{
    int n = o->share_prefix ? sr_module_affine_prefix(m) : 0;
    for (int i = 0; i < n; i++)
        if (m->children[i].m == o->tap)
            n = i;
    return n;
}

/* D[s * nidx + a] = D_s for direction idx[a] of the set g.  With exact (ReLU nets),
 * pairs whose η lies below the direction's first activation boundary
 * exact->dist[a] are η²‖Ju‖² (exact->jsq[a]) without a forward; their count
 * is added to exact->filled. */
typedef struct {
    const double *dist, *jsq;
    int64_t filled;
} exact_info;

static int energies(sr_module *m, const sr_tensor *x, const double *f0, int64_t nf,
                    const sr_profile_opts *o, sr_dir_set *g, const int64_t *idx, int64_t nidx, int64_t batch,
                    double *D, int64_t *nfwd, exact_info *exact)
{
    int ns = o->nscales, pre = shared_prefix(m, o), bf16 = o->emulate_bf16 && x->dtype == SR_F32;
    int64_t d = sr_numel(x);
    int64_t per = batch / ns > 0 ? batch / ns : 1; /* directions generated at a time */
    int64_t cap = per * ns;                        /* rows per forward batch */
    size_t es = sr_dtype_size(x->dtype);
    int rc = -1;
    double *u = malloc((size_t)(per * d) * sizeof *u), *fb = NULL;
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
    if (pre && features(m, 0, x, pend, 0, &A))
        goto done;
    /* bf16: Φ(x) as the rows are run (after the shared prefix, rounded
     * like them), so both sides of the difference carry bf16's rounding */
    if (bf16) {
        int64_t nb;
        if (features_f64(m, pre, pre ? &A : x, o->tap, 1, &fb, &nb))
            goto done;
        if (nb != nf) {
            sr_fail("profile: bf16 features of %lld values, expected %lld", (long long)nb, (long long)nf);
            goto done;
        }
        f0 = fb;
        *nfwd += 1;
    }
    for (int64_t a0 = 0; a0 < nidx; a0 += per) {
        int64_t na = a0 + per <= nidx ? per : nidx - a0, npairs = 0;
        for (int64_t a = 0; a < na; a++)
            for (int s = 0; s < ns; s++) {
                if (exact && o->scales[s] < exact->dist[a0 + a]) {
                    D[s * nidx + a0 + a] = o->scales[s] * o->scales[s] * exact->jsq[a0 + a];
                    exact->filled++;
                } else {
                    pair[npairs++] = a * ns + s;
                }
            }
        if (npairs == 0)
            continue;
        for (int64_t a = 0; a < na; a++)
            if (sr_dirs_get(g, idx[a0 + a], u + a * d))
                goto done;
        if (pre && stacked_jvp(m, x, u, na, pend, 0, 0, NULL, &tan, &stack, &lin))
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
        if (features(m, pre, &rows, o->tap, bf16, &y))
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
    free(fb);
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

/* jsq[a] = ‖J u_idx[a]‖², k tangents per stacked jvp.  Directional with
 * antipodes (o->directional && o->antipodal): −u has its own one-sided
 * JVP (kernels/kink.h), stacked with u's (k/2 directions a pass); jneg
 * (may be NULL) gets ‖D⁺Φ(x; −u)‖², and without it jsq gets the unit's
 * mean of the two.  dpos, dneg (exact_relu): each sign's first activation
 * boundary, from its own tangent when directional.  kinks (may be NULL):
 * the image's ties, counted in the first pass. */
static int jac_energies_sided(sr_module *m, const sr_tensor *x, const sr_profile_opts *o, sr_dir_set *g,
                              const int64_t *idx, int64_t nidx, double *jsq, double *jneg, int64_t *nfwd,
                              double *dpos, double *dneg, sr_kinks *kinks)
{
    int both = o->directional && o->antipodal;
    int64_t d = sr_numel(x), k = both ? (o->jvp_k > 1 ? o->jvp_k / 2 : 1) : o->jvp_k, nt = both ? 2 * k : k;
    int rc = -1;
    double *u = malloc((size_t)(nt * d) * sizeof *u), *bd = malloc((size_t)nt * sizeof *bd);
    sr_tensor tan = SR_TENSOR_INIT, stack = SR_TENSOR_INIT, out = SR_TENSOR_INIT;
    if (!u || !bd) {
        sr_fail("profile: out of memory for %lld tangents", (long long)nt);
        goto done;
    }
    for (int64_t j0 = 0; j0 < nidx; j0 += k) {
        int64_t kk = j0 + k <= nidx ? k : nidx - j0, nk = both ? 2 * kk : kk;
        for (int64_t a = 0; a < kk; a++)
            if (sr_dirs_get(g, idx[j0 + a], u + a * d))
                goto done;
        for (int64_t e = 0; both && e < kk * d; e++)
            u[kk * d + e] = -u[e];
        if (stacked_jvp(m, x, u, nk, o->tap, dpos != NULL, o->directional, j0 == 0 ? kinks : NULL, &tan, &stack,
                        &out))
            goto done;
        if (dpos && sr_relu_boundary_walk(m, nk, both ? bd : dpos + j0, both || !dneg ? NULL : dneg + j0, NULL))
            goto done;
        for (int64_t a = 0; dpos && both && a < kk; a++) {
            dpos[j0 + a] = bd[a];
            if (dneg)
                dneg[j0 + a] = bd[kk + a];
        }
        int64_t nf = sr_rowsize(&out);
        size_t es = sr_dtype_size(out.dtype);
        for (int64_t a = 0; a < nk; a++) {
            double e = SR_DISPATCH_RET(out.dtype, sq_sum,
                                       (const void *)((const char *)sr_data(&out) + (size_t)((1 + a) * nf) * es), nf);
            if (a < kk)
                jsq[j0 + a] = e;
            else if (jneg)
                jneg[j0 + a - kk] = e;
            else
                jsq[j0 + a - kk] = (jsq[j0 + a - kk] + e) / 2;
        }
        sr_tensor_free(&out);
        *nfwd += 1 + nk;
    }
    rc = 0;
done:
    free(u);
    free(bd);
    sr_tensor_free(&tan);
    sr_tensor_free(&stack);
    sr_tensor_free(&out);
    return rc;
}

/* A unit's JVP energy per base direction (the mean over both signs when
 * directional with antipodes): what r's denominator averages. */
static int jac_energies(sr_module *m, const sr_tensor *x, const sr_profile_opts *o, sr_dir_set *g,
                        const int64_t *idx, int64_t nidx, double *jsq, int64_t *nfwd, double *dpos, double *dneg)
{
    return jac_energies_sided(m, x, o, g, idx, nidx, jsq, NULL, nfwd, dpos, dneg, NULL);
}

static double mean_of(const double *v, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    return n ? s / (double)n : NAN;
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

/* emulate_bf16: a product the emulation does not round (its layer lacks
 * SR_MOD_BF16) would make the measured bf16 error too small. */
static int bf16_cb(const char *path, sr_module *m, int depth, void *ud)
{
    (void)depth;
    unsigned f = m->ops->flags;
    if ((f & SR_MOD_PRODUCTS) && !(f & SR_MOD_BF16))
        return sr_fail("profile: emulate_bf16 rounds the factors of conv2d and linear layers only; %s '%s' would "
                       "run its products in float32", m->ops->kind, path);
    (void)ud;
    return 0;
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
    for (int s = 0; s < o->nscales; s++)
        if (!(o->scales[s] > 0) || !isfinite(o->scales[s]))
            return sr_fail("profile: scale %d is %g (scales must be positive and finite)", s + 1,
                           o->scales[s]);
    if (o->noise_dirs > 0 && o->noise_dirs < (o->antipodal ? 3 : 2))
        return sr_fail("profile: noise_directions %lld checks one base direction; the float32 noise bound needs "
                       "at least 2, noise_directions >= %d, or 0 for none",
                       (long long)o->noise_dirs, o->antipodal ? 3 : 2);
    if (!sr_tensor_all_finite(x, NULL))
        return sr_fail("profile: the image %s contains NaN or Inf", SR_SHAPE(x));
    if (o->emulate_bf16 && m->dtype != SR_F32)
        return sr_fail("profile: emulate_bf16 measures bfloat16 against float64 and needs a float32 model (this one "
                       "is %s)", sr_dtype_name(m->dtype));
    if (o->emulate_bf16 && sr_module_walk((sr_module *)m, bf16_cb, NULL))
        return -1;
    return 0;
}

/* Boundary distances and JVP energies of the base directions idx[0..nb)
 * and (with antipodes) of their antipodes, in the set's order: one JVP per
 * base direction serves both signs. */
static int exact_prepare(sr_module *m, const sr_tensor *x, const sr_profile_opts *o, sr_dir_set *g,
                         const int64_t *idx, int64_t nb, double *jsq, double *dist, int64_t *nfwd, sr_kinks *kinks)
{
    int both = o->directional && o->antipodal;
    if (jac_energies_sided(m, x, o, g, idx, nb, jsq, both ? jsq + nb : NULL, nfwd, dist,
                           o->antipodal ? dist + nb : NULL, kinks))
        return -1;
    if (o->antipodal && !both)
        memcpy(jsq + nb, jsq, (size_t)nb * sizeof *jsq);
    return 0;
}

/* A ratio estimate from a sample of n of the N units of a population
 * (units: base directions, each with its antipode when the set has them):
 * *est = Σ err / Σ val over the sample, the estimate of the population's
 * Σ err / Σ val; returns its standard error (the ratio estimator's:
 * residuals err_i − est·val_i, finite-population correction 1 − n/N, none
 * for N = 0), Inf for a single unit. */
static double ratio_se(const double *err, const double *val, int64_t n, int64_t N, double *est)
{
    double se = 0, sv = 0;
    for (int64_t i = 0; i < n; i++) {
        se += err[i];
        sv += val[i];
    }
    *est = sv > 0 ? se / sv : (se != 0 ? INFINITY : 0);
    if (!isfinite(*est))
        return INFINITY;
    if (n < 2)
        return se != 0 ? INFINITY : 0;
    double ss = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = err[i] - *est * val[i];
        ss += e * e;
    }
    double fpc = N > 0 ? 1 - (double)n / (double)N : 1;
    return sqrt((fpc > 0 ? fpc : 0) * ss / (double)(n - 1) / (double)n) / (sv / (double)n);
}

/* The forward-difference check of the denominator: the float64 one-sided
 * forward difference ‖Φ(x + hu) − Φ(x)‖² / h² of the checked base
 * directions (and antipodes: a unit's energy is the mean of its two, as
 * r's numerator averages them), with h at a per-pixel RMS of SR_FD_RMS, far
 * below any rung and far above float64 rounding.  Measured on the shipped
 * small_resnet (2 Fashion-MNIST images, 8 directions ±): at RMS 1e-6 a
 * quarter of the directions met a kink within h (J/FD − 1 up to 4e-3), at
 * 1e-7 and 1e-8 none (|J/FD − 1| ≤ 2.6e-9 and ≤ 2.6e-8, the rounding's
 * share growing as h shrinks); 1e-8 leaves a tenth of 1e-7's kinks, and
 * its rounding stays ~1e-5 of a typical noise bound.  It uses forwards only, so
 * it is independent of the JVP code and of its rule at kinks and ties: on
 * a piecewise-linear Φ it is D⁺Φ(x; u) exactly unless a kink lies within h.
 * m, x, f0: float64; idx: the nb base directions then their antipodes;
 * J: the JVP energies of the same base directions (float64).  Returns
 * ΣJ / ΣFD − 1 over them in *dev. */
#define SR_FD_RMS 1e-8
static int fd_check(sr_module *m, const sr_tensor *x, const double *f0, int64_t nf, const sr_profile_opts *o,
                    sr_dir_set *g, const int64_t *idx, int64_t nb, const double *J, int64_t batch, int64_t *nfwd,
                    double *dev)
{
    int anti = o->antipodal ? 1 : 0;
    int64_t nidx = nb * (1 + anti);
    double h = SR_FD_RMS * sqrt((double)sr_numel(x));
    double *fd = malloc((size_t)nidx * sizeof *fd);
    if (!fd)
        return sr_fail("profile: out of memory");
    sr_profile_opts of = *o;
    of.nscales = 1;
    of.scales = &h;
    of.share_prefix = 0; /* x + hu through every layer: no tangent of the prefix either */
    if (energies(m, x, f0, nf, &of, g, idx, nidx, batch, fd, nfwd, NULL)) {
        free(fd);
        return -1;
    }
    double sj = 0, sf = 0;
    for (int64_t b = 0; b < nb; b++) {
        sj += J[b];
        sf += (anti ? (fd[b] + fd[nb + b]) / 2 : fd[b]) / (h * h);
    }
    free(fd);
    *dev = sf > 0 ? sj / sf - 1 : (sj > 0 ? INFINITY : 0);
    return 0;
}

/* Float32 noise as a bound: the first nb base directions of the set (and
 * their antipodes) again in float64, numerator and JVPs.  r's float32 error
 * is (1 + A)/(1 + B) − 1, with A = ΣΔD/ΣD over every direction of the
 * numerator and B = ΣΔJ/ΣJ over every JVP of the denominator (Δ: float32 −
 * float64).  The checked directions are a random sample of those units
 * (directions are exchangeable draws), so A and B are ratio estimates with
 * standard errors (ratio_se, corrected for the finite population unless
 * o->noise_fpc is off); each reported noise is |estimate| + t_{0.975, nb−1}
 * × its SE: a two-sided 95% t bound on the error of the whole run, which
 * covers the directions not checked.  For r, the SE of A − B is bounded by
 * SE_A + SE_B (whatever their correlation).  A rung whose bound for r or
 * for its energy exceeds noise_max is discarded.  D, jsq: the run's float32
 * values (D with stride total per rung); nj: the JVP directions behind the
 * denominator. */
static int noise_check(sr_module *m, const sr_tensor *x, const sr_profile_opts *o, const double *D, const double *jsq,
                       int64_t nb, int64_t nj, int64_t batch, sr_profile_result *res)
{
    int ns = o->nscales, anti = o->antipodal ? 1 : 0;
    int64_t total = total_dirs(o), nidx = nb * (1 + anti);
    int rc = -1, converted = 0;
    double *D64 = malloc((size_t)(ns * nidx) * sizeof *D64), *J64 = malloc((size_t)nb * sizeof *J64);
    double *err = malloc((size_t)nb * sizeof *err), *val = malloc((size_t)nb * sizeof *val);
    double *g0 = NULL;
    int64_t *idx = malloc((size_t)nidx * sizeof *idx);
    sr_tensor x64 = SR_TENSOR_INIT;
    sr_dir_set g;
    memset(&g, 0, sizeof g);
    if (!D64 || !J64 || !err || !val || !idx) {
        sr_fail("profile: out of memory");
        goto done;
    }
    for (int64_t b = 0; b < nb; b++) {
        idx[b] = b;
        if (anti)
            idx[nb + b] = o->ndirs + b;
    }
    if (sr_module_to_dtype(m, SR_F64))
        goto done;
    converted = 1;
    int64_t nf;
    if (sr_tensor_convert(&x64, x, SR_F64) || dirs_open(o, &x64, &g) ||
        features_f64(m, 0, &x64, o->tap, 0, &g0, &nf))
        goto done;
    if (jac_energies(m, &x64, o, &g, idx, nb, J64, &res->nforward, NULL, NULL) ||
        energies(m, &x64, g0, nf, o, &g, idx, nidx, batch, D64, &res->nforward, NULL) ||
        fd_check(m, &x64, g0, nf, o, &g, idx, nb, J64, batch, &res->nforward, &res->fd_jvp))
        goto done;
    double t = sr_t975(nb - 1), b_est;
    for (int64_t b = 0; b < nb; b++) {
        err[b] = jsq[b] - J64[b];
        val[b] = J64[b];
    }
    double b_se = ratio_se(err, val, nb, o->noise_fpc ? nj : 0, &b_est);
    res->noise_jvp = fabs(b_est) + t * b_se;
    for (int s = 0; s < ns; s++) {
        for (int64_t b = 0; b < nb; b++) {
            err[b] = val[b] = 0;
            for (int k = 0; k <= anti; k++) {
                double v32 = D[s * total + k * o->ndirs + b], v64 = D64[s * nidx + k * nb + b];
                err[b] += v32 - v64;
                val[b] += v64;
            }
        }
        double a_est, a_se = ratio_se(err, val, nb, o->noise_fpc ? o->ndirs : 0, &a_est);
        res->noise_energy[s] = fabs(a_est) + t * a_se;
        /* r32/r64 = (1 + A)/(1 + B): the η² and the counts cancel; its SE by
         * the delta method, each term at its worst sign */
        double q = 1 + b_est, dr = (1 + a_est) / q - 1;
        double dr_se = a_se / q + b_se * (1 + fabs(a_est)) / (q * q);
        res->noise[s] = q > 0 ? fabs(dr) + t * dr_se : INFINITY;
        if (!(res->noise[s] <= o->noise_max && res->noise_energy[s] <= o->noise_max))
            res->r[s] = NAN;
    }
    rc = 0;
done:
    if (converted && sr_module_to_dtype(m, SR_F32) && rc == 0)
        rc = -1;
    free(D64);
    free(J64);
    free(err);
    free(val);
    free(g0);
    free(idx);
    sr_dirs_free(&g);
    sr_tensor_free(&x64);
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
    int64_t total = total_dirs(o), batch = o->batch > 0 ? o->batch : auto_batch(sr_numel(x));
    /* JVP energies per base direction: with the subgradient rule
     * J(−u) = −Ju, so an antipode's energy is its base's, no new sample
     * (counting it would narrow the CIs); with the directional rule at a
     * tie ‖D⁺Φ(x; −u)‖ ≠ ‖D⁺Φ(x; u)‖, and a unit's energy is the mean of
     * its two (jac_energies_sided), still one sample.  Paired: every base
     * direction; unpaired: the first njvp of the set, as far as they are
     * base directions. */
    int64_t nj = o->paired ? o->ndirs : (o->njvp < o->ndirs ? o->njvp : o->ndirs);
    int rc = -1;
    double *f0 = NULL, *D = NULL, *xdist = NULL, *xjsq = NULL;
    int64_t *idx = NULL;
    exact_info ex = {NULL, NULL, 0}, *exact = NULL;
    sr_dir_set g;
    memset(&g, 0, sizeof g);
    res->nscales = ns;
    res->noise_jvp = res->fd_jvp = NAN;
    res->energy = calloc((size_t)ns, sizeof(double));
    res->r = calloc((size_t)ns, sizeof(double));
    res->ci = calloc((size_t)ns, sizeof(double));
    res->moments = calloc((size_t)ns, sizeof(sr_rung_moments));
    res->noise = calloc((size_t)ns, sizeof(double));
    res->noise_energy = calloc((size_t)ns, sizeof(double));
    res->jvp_sq = malloc((size_t)nj * sizeof(double));
    D = malloc((size_t)(ns * total) * sizeof *D);
    idx = malloc((size_t)total * sizeof *idx);
    if (!res->energy || !res->r || !res->ci || !res->moments || !res->noise || !res->noise_energy || !res->jvp_sq ||
        !D || !idx) {
        sr_fail("profile: out of memory");
        goto done;
    }
    if (dirs_open(o, x, &g))
        goto done;

    /* Primal features Φ(x), kept in double. */
    int64_t nf;
    if (features_f64(m, 0, x, o->tap, 0, &f0, &nf))
        goto done;
    res->nforward = 1;

    for (int64_t i = 0; i < total; i++)
        idx[i] = i;
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
        /* every base direction's JVP and boundary distance, in the set's order */
        if (exact_prepare(m, x, o, &g, idx, o->ndirs, xjsq, xdist, &res->nforward, &res->kinks))
            goto done;
        for (int64_t j = 0; j < nj; j++) /* a unit's energy: both signs' mean */
            res->jvp_sq[j] = o->directional && anti ? (xjsq[j] + xjsq[o->ndirs + j]) / 2 : xjsq[j];
    } else if (jac_energies_sided(m, x, o, &g, idx, nj, res->jvp_sq, NULL, &res->nforward, NULL, NULL,
                                  &res->kinks)) {
        goto done;
    }
    res->njvp_used = nj;
    if (energies(m, x, f0, nf, o, &g, idx, total, batch, D, &res->nforward, exact))
        goto done;
    res->nexact = ex.filled;
    res->shared_layers = shared_prefix(m, o);
    res->ndirs_total = total;
    res->jac_energy = mean_of(res->jvp_sq, nj);
    for (int s = 0; s < ns; s++) {
        const double *Ds = D + s * total;
        sr_rung_moments_of(&res->moments[s], Ds, anti ? Ds + o->ndirs : NULL, o->ndirs, res->jvp_sq, nj, o->paired);
        sr_rung_est e = sr_rung_estimate(&res->moments[s], o->scales[s], 0, 0);
        res->energy[s] = res->moments[s].d_mean;
        res->r[s] = e.r;
        res->ci[s] = e.ci;
        res->noise[s] = res->noise_energy[s] = NAN;
    }

    int64_t nb = anti ? (o->noise_dirs + 1) / 2 : o->noise_dirs;
    if (nb > nj)
        nb = nj;
    if (nb > 0 && m->dtype == SR_F32 && noise_check(m, x, o, D, res->jvp_sq, nb, nj, batch, res))
        goto done;
    if (nb > 0 && m->dtype == SR_F64) { /* no float32 error; the denominator's check all the same */
        for (int64_t b = 0; b < nb; b++) {
            idx[b] = b;
            if (anti)
                idx[nb + b] = o->ndirs + b;
        }
        if (fd_check(m, x, f0, nf, o, &g, idx, nb, res->jvp_sq, batch, &res->nforward, &res->fd_jvp))
            goto done;
    }
    if (o->per_direction) {
        res->per_dir = D;
        D = NULL;
    }
    rc = 0;
done:
    free(f0);
    free(D);
    free(xdist);
    free(xjsq);
    free(idx);
    sr_dirs_free(&g);
    if (rc)
        sr_profile_result_free(res);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}

#endif
