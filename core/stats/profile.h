/* profile.h - the scale-resolved statistic for one image (README, "The statistic, exactly").
 *
 * For an image x, directions u_i (unit L2 norm in pixel space) and scales η_s:
 *
 *   D_s,i   = ‖Φ(x + η_s u_i) − Φ(x)‖²        measured displacement energy
 *   E_J     = mean_{i < njvp} ‖J(x) u_i‖²     exact JVPs (stacked, k at a time)
 *   r_s     = mean_i D_s,i / (η_s² E_J)       ratio of means
 *
 * (paired: E_J over the same directions as the numerator; stats/rung.h
 * has the estimate and its CI from each rung's moments)
 *
 * One call runs the base directions first..first+ndirs−1 (stats/directions.h:
 * each fixed by the seed and its index), so a caller can continue a run
 * with the next directions and merge the rungs' moments
 * (lua/srgeo/profile.lua's sequential estimator does).  The engine streams: directions are generated on the fly from a per-image
 * seed (direction i depends only on (seed, i), so any batch size gives the
 * same numbers), and memory stays bounded by one batch whatever the number
 * of directions.  Perturbed inputs are not clipped to [0,1].
 */
#ifndef SR_PROFILE_H
#define SR_PROFILE_H

#include "base/opts.h"
#include "nn/module.h"
#include "stats/directions.h"
#include "stats/rung.h"

typedef struct sr_profile_opts {
    int64_t ndirs;         /* distinct (base) directions of this run */
    int64_t first;         /* global index of the first: base directions first..first+ndirs−1 */
    int antipodal;         /* also -u_i: the set is u_1..u_n, -u_1..-u_n */
    /* paired: every base direction has its own exact JVP and r's
     * denominator runs over the same directions as its numerator, so r is 1
     * by construction wherever Φ is linear and the CI is the paired one
     * (stats/rung.h); njvp is then ignored.  Unpaired (the paper's
     * protocol): the denominator uses the first njvp of the set. */
    int paired;
    int64_t njvp;
    int64_t orthogonal;    /* orthonormal blocks of this many directions (<= 1: independent) */
    int nscales;
    const double *scales;  /* η, in raw pixel L2 units */
    uint64_t seed;         /* per-image seed, shared across scales */
    int64_t batch;         /* rows per forward batch */
    int64_t jvp_k;         /* tangents per stacked jvp */
    const sr_module *tap;  /* NULL: the module's output */
    int64_t noise_dirs;    /* directions re-evaluated in float64 (0: no bound; else >= 2 base directions) */
    int noise_fpc;         /* finite-population correction of the noise bound (off: more directions follow) */
    double noise_max;      /* discard a rung when the float32 error bound of r or of its energy exceeds this */
    int per_direction;     /* keep every D_s,i in res->per_dir */
    sr_dir_family family;
    const sr_tensor *user_dirs; /* (n, C, H, W) or (n, d) for SR_DIRS_USER: row b is base direction b */
    double lowpass_sigma;       /* SR_DIRS_LOWPASS: blur σ in pixels */
    /* ReLU networks: pairs (u, η) with η below u's first activation
     * boundary get D = η²‖Ju‖² exactly, without a forward (a JVP per
     * direction instead).  Errors if the net has other nonlinearities. */
    int exact_relu;
    /* Run the model's leading affine layers (normalize, conv, BatchNorm:
     * sr_module_affine_prefix) once per direction, as A + η·L(u),
     * instead of once per row (default on; the same numbers up to
     * rounding, ResNet-50's stem is 4% of a forward). */
    int share_prefix;
    /* The JVPs' rule at kinks and ties (kernels/kink.h, sr_run.directional):
     * 1 (default) the one-sided directional derivative D⁺Φ(x; u) of each
     * direction, u and −u each their own (with antipodes a unit's JVP
     * energy is their mean), so r → 1 as η → 0 on every input of a
     * piecewise-linear Φ; 0 PyTorch's subgradient (a JVP per base direction,
     * ‖J(−u)‖ = ‖Ju‖). */
    int directional;
    /* The numerator's forwards (Φ(x) and every Φ(x + ηu)) with conv2d's and
     * linear's factors rounded to bfloat16 (sr_run.bf16): what bf16 inputs
     * with float32 accumulation would cost r; the JVPs and the noise
     * check's float64 reference stay exact, so noise and noise_energy
     * bound the bf16 error (README, "Precision").  A measuring instrument:
     * no faster than float32.  Needs a float32 model whose products are all
     * emulated (SR_MOD_BF16). */
    int emulate_bf16;
} sr_profile_opts;

/* The engine's options, declared once (name, type, range, default, help;
 * base/opts.h) over sr_profile_opts: the bindings read them with
 * sr_profile_opts_read, sr_profile_image checks a struct filled in C
 * against the same table, and help text lists it.  Entries flagged
 * SR_OPT_CALLER are not plain values (tap, user_directions, scales: the
 * caller resolves them into tap, user_dirs, scales) or belong to the
 * aggregation over images in lua/srgeo/profile.lua (ci, bootstrap); they
 * are declared here so one table checks every option of srgeo.profile. */
extern const sr_opt_spec sr_profile_specs[];

/* Every field at its declared default (Gaussian directions, no tap). */
void sr_profile_opts_default(sr_profile_opts *o);
/* Defaults, then the options present in src (sr_opts_read: types, ranges,
 * unknown keys); lowpass_sigma > 0 selects low-pass directions. */
int sr_profile_opts_read(const sr_opts *src, sr_profile_opts *o);
/* o->tap from a module path (NULL: m's default tap, if it has one). */
int sr_profile_set_tap(sr_profile_opts *o, sr_module *m, const char *path);

typedef struct sr_profile_result {
    int nscales;
    int64_t ndirs_total;   /* ndirs × (antipodal ? 2 : 1) */
    double jac_energy;     /* E_J over all JVP directions */
    double *energy;        /* [nscales] mean_i D_s,i */
    double *r;             /* [nscales] ratio; NaN where discarded */
    double *ci;            /* [nscales] relative 95% CI half-width of r */
    sr_rung_moments *moments; /* [nscales] each rung's moments (stats/rung.h) */
    /* Float32 runs re-evaluate the first noise_dirs base directions (and
     * antipodes) in float64, numerator and JVPs; from their float32 errors,
     * two-sided 95% upper bounds on the relative float32 error over the
     * whole direction set (|estimate| + t_{0.975} SE, the checked
     * directions as a sample of the set; profile.c noise_check), NaN if not
     * checked: */
    double *noise;         /* [nscales] of r */
    double *noise_energy;  /* [nscales] of the mean displacement energy (the numerator) */
    double noise_jvp;      /* of the mean JVP energy (the denominator) */
    /* The same directions' JVP energy against a float64 one-sided forward
     * difference at a per-pixel RMS step of 1e-8 (forwards only: independent
     * of the JVP and its rule at kinks), ΣJ/ΣFD − 1 in float64; NaN if not
     * checked.  Float64 models run this check alone. */
    double fd_jvp;
    double *per_dir;       /* [nscales × ndirs_total] when per_direction */
    double *jvp_sq;        /* [njvp_used] ‖J u_i‖² per JVP direction */
    int64_t njvp_used;
    int64_t nexact;        /* (direction, rung) pairs filled by the exact shortcut */
    int shared_layers;     /* leading layers run once per direction (share_prefix) */
    int64_t nforward;      /* rows pushed through the model (forward + jvp) */
    /* The image's ties and singular points met by the first JVP pass
     * (kernels/kink.h; counted under directional only, else zero). */
    sr_kinks kinks;
    double seconds;
} sr_profile_result;

void sr_profile_result_free(sr_profile_result *r);

/* Run the statistic for one image x (1, C, H, W) on a model in eval mode.
 * The model must be float32 or float64; with noise_dirs > 0 and a float32
 * model, the model is temporarily converted to float64 for the estimate
 * (exactly restored afterwards).  The options are checked first: each field
 * against sr_profile_specs, then the rules between them.  njvp above the
 * set's size (ndirs, doubled with antipodes) means the whole set: the
 * count "all JVPs" has no other spelling once ndirs comes from the
 * directions a family produced. */
int sr_profile_image(sr_module *m, const sr_tensor *x, const sr_profile_opts *o,
                     sr_profile_result *res);

/* Direction i of the set (stats/directions.h's set index, for tests and
 * other metrics): unit vector in double with x's size (x gives the image
 * shape for spatial families). */
int sr_profile_direction(const sr_profile_opts *o, int64_t i, const sr_tensor *x, double *out);

#endif
