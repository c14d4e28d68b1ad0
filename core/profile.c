/* profile.c - streaming engine for r_η of one image (see profile.h). */
#ifdef SR_REAL

/* rows[a*ns + s] = x + η_s u_a for a < na. */
static void SR_FN(fill_rows)(real *rows, const real *x, const double *u, int64_t na,
                             const double *scales, int ns, int64_t d)
{
    #pragma omp parallel for collapse(2) if (na * ns * d > 1 << 16)
    for (int64_t a = 0; a < na; a++)
        for (int s = 0; s < ns; s++) {
            real *r = rows + (a * ns + s) * d;
            const double *ua = u + a * d;
            double eta = scales[s];
            for (int64_t e = 0; e < d; e++)
                r[e] = (real)(x[e] + eta * ua[e]);
        }
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

#include "profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SR_GENERIC_FILE "profile.c"
#include "generic.h"

void sr_profile_opts_default(sr_profile_opts *o)
{
    memset(o, 0, sizeof *o);
    o->ndirs = 1024;
    o->antipodal = 1;
    o->njvp = 256;
    o->jvp_k = 16;
    o->noise_dirs = 8;
    o->noise_max = 0.05;
    o->family = SR_DIRS_GAUSSIAN;
}

void sr_profile_result_free(sr_profile_result *r)
{
    free(r->energy);
    free(r->r);
    free(r->noise);
    free(r->per_dir);
    memset(r, 0, sizeof *r);
}

static int64_t total_dirs(const sr_profile_opts *o) { return o->ndirs * (o->antipodal ? 2 : 1); }

static uint64_t mix(uint64_t seed, uint64_t i)
{
    uint64_t z = seed ^ (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int sr_profile_direction(const sr_profile_opts *o, int64_t i, int64_t d, double *out)
{
    int64_t total = total_dirs(o);
    if (i < 0 || i >= total)
        return sr_fail("profile: direction %lld out of range (set has %lld)", (long long)i, (long long)total);
    int64_t base = i % o->ndirs;
    double sign = (o->antipodal && i >= o->ndirs) ? -1.0 : 1.0;
    if (o->family == SR_DIRS_USER) {
        const sr_tensor *u = o->user_dirs;
        if (!u || u->ndim < 1 || u->shape[0] < o->ndirs || sr_rowsize(u) != d)
            return sr_fail("profile: user directions %s must hold %lld rows of %lld values",
                           u ? SR_SHAPE(u) : "(none)", (long long)o->ndirs, (long long)d);
        for (int64_t e = 0; e < d; e++)
            out[e] = sr_get_flat(u, base * d + e);
    } else {
        sr_rng r;
        sr_rng_seed(&r, mix(o->seed, (uint64_t)base));
        for (int64_t e = 0; e < d; e++)
            out[e] = sr_rng_normal(&r);
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

/* Features of a batch: a view of the tap's (or model's) output. */
static int features(sr_module *m, const sr_tensor *x, const sr_module *tap, sr_tensor *view)
{
    sr_run run = SR_RUN_INIT;
    sr_tensor tap_out = SR_TENSOR_INIT;
    const sr_module *taps[1] = {tap};
    if (tap) {
        run.ntaps = 1;
        run.taps = taps;
        run.tap_out = &tap_out;
        run.stop_after_taps = 1;
    }
    if (sr_module_forward(m, x, &run))
        return -1;
    if (tap && !tap_out.storage)
        return sr_fail("profile: the tap was not reached by the forward pass");
    sr_tensor_share(view, tap ? &tap_out : &m->out);
    sr_tensor_free(&tap_out);
    return 0;
}

/* D[s * nd + (i - i0)] for directions i0 <= i < i1, all scales. */
static int energies(sr_module *m, const sr_tensor *x, const double *f0, int64_t nf,
                    const sr_profile_opts *o, int64_t i0, int64_t i1, int64_t batch, double *D,
                    int64_t *nfwd)
{
    int ns = o->nscales;
    int64_t d = sr_numel(x), nd = i1 - i0;
    int64_t per = batch / ns > 0 ? batch / ns : 1; /* directions per batch */
    int rc = -1;
    double *u = malloc((size_t)(per * d) * sizeof *u);
    double *dist = malloc((size_t)(per * ns) * sizeof *dist);
    sr_tensor rows = SR_TENSOR_INIT, y = SR_TENSOR_INIT;
    if (!u || !dist) {
        sr_fail("profile: out of memory for a batch of %lld directions", (long long)per);
        goto done;
    }
    for (int64_t a0 = i0; a0 < i1; a0 += per) {
        int64_t na = a0 + per <= i1 ? per : i1 - a0;
        for (int64_t a = 0; a < na; a++)
            if (sr_profile_direction(o, a0 + a, d, u + a * d))
                goto done;
        int64_t shape[SR_MAXDIM];
        memcpy(shape, x->shape, sizeof shape);
        shape[0] = na * ns;
        if (sr_tensor_ensure(&rows, x->dtype, x->ndim, shape))
            goto done;
        SR_DISPATCH(x->dtype, fill_rows, sr_data(&rows), sr_data(x), u, na, o->scales, ns, d);
        if (features(m, &rows, o->tap, &y))
            goto done;
        if (y.shape[0] != na * ns || sr_rowsize(&y) != nf) {
            sr_fail("profile: batch features %s, expected %lld rows of %lld", SR_SHAPE(&y),
                    (long long)(na * ns), (long long)nf);
            goto done;
        }
        SR_DISPATCH(y.dtype, sq_dist, dist, sr_data(&y), f0, na * ns, nf);
        sr_tensor_free(&y);
        for (int64_t a = 0; a < na; a++)
            for (int s = 0; s < ns; s++)
                D[s * nd + (a0 - i0 + a)] = dist[a * ns + s];
        *nfwd += na * ns;
    }
    rc = 0;
done:
    free(u);
    free(dist);
    sr_tensor_free(&rows);
    sr_tensor_free(&y);
    return rc;
}

/* E_J = mean ‖J u_i‖² over the first njvp directions, k per stacked jvp. */
static int jac_energy(sr_module *m, const sr_tensor *x, const sr_profile_opts *o, double *ej,
                      int64_t *nfwd)
{
    int64_t d = sr_numel(x), k = o->jvp_k;
    int rc = -1;
    double *u = malloc((size_t)(k * d) * sizeof *u);
    sr_tensor stack = SR_TENSOR_INIT, tap_out = SR_TENSOR_INIT;
    double sum = 0;
    if (!u) {
        sr_fail("profile: out of memory for %lld tangents", (long long)k);
        goto done;
    }
    for (int64_t j0 = 0; j0 < o->njvp; j0 += k) {
        int64_t kk = j0 + k <= o->njvp ? k : o->njvp - j0;
        for (int64_t a = 0; a < kk; a++)
            if (sr_profile_direction(o, j0 + a, d, u + a * d))
                goto done;
        int64_t shape[SR_MAXDIM];
        memcpy(shape, x->shape, sizeof shape);
        shape[0] = 1 + kk;
        if (sr_tensor_ensure(&stack, x->dtype, x->ndim, shape))
            goto done;
        size_t es = sr_dtype_size(x->dtype);
        memcpy(sr_data(&stack), sr_data(x), (size_t)d * es);
        SR_DISPATCH(x->dtype, to_real, (void *)((char *)sr_data(&stack) + (size_t)d * es), u, kk * d);
        sr_run run = SR_RUN_INIT;
        const sr_module *taps[1] = {o->tap};
        run.n = 1;
        run.k = kk;
        if (o->tap) {
            run.ntaps = 1;
            run.taps = taps;
            run.tap_out = &tap_out;
            run.stop_after_taps = 1;
        }
        if (sr_module_jvp(m, &stack, &run))
            goto done;
        const sr_tensor *out = o->tap ? &tap_out : &m->out;
        int64_t nf = sr_rowsize(out);
        sum += SR_DISPATCH_RET(out->dtype, sq_sum, (const void *)((const char *)sr_data(out) + (size_t)nf * es), kk * nf);
        sr_tensor_free(&tap_out);
        *nfwd += 1 + kk;
    }
    *ej = sum / (double)o->njvp;
    rc = 0;
done:
    free(u);
    sr_tensor_free(&stack);
    sr_tensor_free(&tap_out);
    return rc;
}

static int64_t auto_batch(int64_t d)
{
    /* About 16 MB of float32 input rows per batch: enough rows to keep the
     * GEMMs fat, small enough for activations of big models to fit. */
    int64_t b = ((int64_t)4 << 20) / (d > 0 ? d : 1);
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
    if (o->ndirs < 1 || o->nscales < 1 || !o->scales)
        return sr_fail("profile: need at least one direction and one scale");
    if (o->njvp < 1 || o->njvp > total_dirs(o))
        return sr_fail("profile: njvp=%lld must be in 1..%lld (the direction count)",
                       (long long)o->njvp, (long long)total_dirs(o));
    if (o->jvp_k < 1)
        return sr_fail("profile: jvp_k must be >= 1");
    for (int s = 0; s < o->nscales; s++)
        if (!(o->scales[s] > 0) || !isfinite(o->scales[s]))
            return sr_fail("profile: scale %d is %g (scales must be positive and finite)", s + 1,
                           o->scales[s]);
    if (!sr_tensor_all_finite(x, NULL))
        return sr_fail("profile: the image %s contains NaN or Inf", SR_SHAPE(x));
    return 0;
}

int sr_profile_image(sr_module *m, const sr_tensor *x, const sr_profile_opts *o,
                     sr_profile_result *res)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(res, 0, sizeof *res);
    if (check_opts(m, x, o))
        return -1;
    int ns = o->nscales;
    int64_t total = total_dirs(o), batch = o->batch > 0 ? o->batch : auto_batch(sr_numel(x));
    int64_t nnoise = o->noise_dirs < total ? o->noise_dirs : total;
    int rc = -1, converted = 0;
    double *f0 = NULL, *D = NULL, *D64 = NULL;
    sr_tensor y0 = SR_TENSOR_INIT, x64 = SR_TENSOR_INIT;
    res->nscales = ns;
    res->ndirs_total = total;
    res->energy = calloc((size_t)ns, sizeof(double));
    res->r = calloc((size_t)ns, sizeof(double));
    res->noise = calloc((size_t)ns, sizeof(double));
    D = malloc((size_t)(ns * total) * sizeof *D);
    if (!res->energy || !res->r || !res->noise || !D) {
        sr_fail("profile: out of memory");
        goto done;
    }

    /* Primal features Φ(x), kept in double. */
    if (features(m, x, o->tap, &y0))
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

    if (jac_energy(m, x, o, &res->jac_energy, &res->nforward))
        goto done;
    if (energies(m, x, f0, nf, o, 0, total, batch, D, &res->nforward))
        goto done;
    for (int s = 0; s < ns; s++) {
        double sum = 0;
        for (int64_t i = 0; i < total; i++)
            sum += D[s * total + i];
        res->energy[s] = sum / (double)total;
        res->r[s] = res->energy[s] / (o->scales[s] * o->scales[s] * res->jac_energy);
        res->noise[s] = NAN;
    }

    /* Float32 noise: re-evaluate the first directions in float64 and compare
     * the energies; a rung whose error exceeds noise_max is discarded. */
    if (nnoise > 0 && m->dtype == SR_F32) {
        if (!(D64 = malloc((size_t)(ns * nnoise) * sizeof *D64)))
            goto done;
        if (sr_module_to_dtype(m, SR_F64))
            goto done;
        converted = 1;
        if (sr_tensor_convert(&x64, x, SR_F64) || features(m, &x64, o->tap, &y0))
            goto done;
        double *g0 = malloc((size_t)nf * sizeof *g0);
        if (!g0)
            goto done;
        for (int64_t e = 0; e < nf; e++)
            g0[e] = sr_get_flat(&y0, e);
        sr_tensor_free(&y0);
        int bad = energies(m, &x64, g0, nf, o, 0, nnoise, batch, D64, &res->nforward);
        free(g0);
        if (bad)
            goto done;
        for (int s = 0; s < ns; s++) {
            double err = 0, ref = 0;
            for (int64_t i = 0; i < nnoise; i++) {
                err += fabs(D[s * total + i] - D64[s * nnoise + i]);
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
    sr_tensor_free(&y0);
    sr_tensor_free(&x64);
    if (rc)
        sr_profile_result_free(res);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}

#endif
