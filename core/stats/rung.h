/* rung.h - one rung's estimate of r and its confidence interval.
 *
 * The units of a rung are base directions: D̄_i, the displacement energy of
 * u_i averaged with that of its antipode (how they enter r), and J_i =
 * ‖J u_i‖² (under the directional rule at kinks, stats/profile.h, the mean
 * of ‖D⁺Φ(x; u_i)‖² and ‖D⁺Φ(x; −u_i)‖²).  A rung is summarised by its moments, which runs over disjoint
 * direction sets merge exactly (lua/srgeo/profile.lua continues a run that
 * way), and its estimate is computed from the moments only:
 *
 *   r = mean D̄ / (η² mean J)                           (a ratio of means)
 *   paired (J_i is u_i's own JVP): the delta method on the residuals
 *     e_i = D̄_i − r η² J_i, which average to 0 and are small wherever Φ
 *     is close to linear: SE(r)/r = sd(e) / (√n mean D̄);
 *   unpaired (the JVPs are another set, e.g. the paper's first 256):
 *     SE(r)/r = √(var D̄ / (n mean D̄²) + var J / (nj mean J²));
 *   CI half-width (relative) = t_{0.975, df} · SE(r)/r, df = min(n, nj) − 1.
 * The t quantile keeps intervals honest when a rung rests on one chunk.
 */
#ifndef SR_RUNG_H
#define SR_RUNG_H

#include <stdint.h>

typedef struct sr_rung_moments {
    int64_t n;            /* units behind d_* */
    double d_mean, d_m2;  /* mean of D̄ and Σ (D̄ − mean)² */
    int64_t nj;           /* JVP energies behind j_* */
    double j_mean, j_m2;
    double c;             /* Σ (D̄_i − d_mean)(J_i − j_mean) when paired (nj == n), NaN otherwise */
} sr_rung_moments;

typedef struct sr_rung_est {
    double r;   /* NaN without units */
    double se;  /* standard error of r relative to r (Inf from a single unit) */
    double ci;  /* relative 95% CI half-width: t975(df) · se */
    int64_t df;
} sr_rung_est;

/* Moments of dpos[0..n) (averaged with dneg[0..n) when dneg is given) and
 * jsq[0..nj); paired needs nj == n (jsq[i] belongs to unit i). */
void sr_rung_moments_of(sr_rung_moments *m, const double *dpos, const double *dneg, int64_t n, const double *jsq,
                        int64_t nj, int paired);

/* The estimate at scale eta from the moments.  as_n, as_nj > 0: the
 * interval the unpaired protocol with as_n units and as_nj JVPs would give
 * for a rung whose units vary as these do (the paper preset's own CI,
 * predicted from any run); 0 for the run's own interval. */
sr_rung_est sr_rung_estimate(const sr_rung_moments *m, double eta, int64_t as_n, int64_t as_nj);

/* Two-sided 95% quantile of Student's t with nu degrees of freedom (Inf for nu < 1). */
double sr_t975(int64_t nu);

#endif
