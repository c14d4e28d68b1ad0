/* rung.c - one rung's estimate of r and its confidence interval (see rung.h). */
#include "stats/rung.h"

#include <math.h>

/* Table below 5, above it the Cornish-Fisher expansion (Abramowitz &
 * Stegun 26.7.5), within 3e-4 at nu = 5 and 1e-6 from nu = 20. */
double sr_t975(int64_t nu)
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

static double unit(const double *dpos, const double *dneg, int64_t i)
{
    return dneg ? 0.5 * (dpos[i] + dneg[i]) : dpos[i];
}

void sr_rung_moments_of(sr_rung_moments *m, const double *dpos, const double *dneg, int64_t n, const double *jsq,
                        int64_t nj, int paired)
{
    double sd = 0, sj = 0;
    for (int64_t i = 0; i < n; i++)
        sd += unit(dpos, dneg, i);
    for (int64_t i = 0; i < nj; i++)
        sj += jsq[i];
    m->n = n;
    m->nj = nj;
    m->d_mean = n ? sd / (double)n : NAN;
    m->j_mean = nj ? sj / (double)nj : NAN;
    m->d_m2 = m->j_m2 = 0;
    for (int64_t i = 0; i < n; i++) {
        double t = unit(dpos, dneg, i) - m->d_mean;
        m->d_m2 += t * t;
    }
    for (int64_t i = 0; i < nj; i++)
        m->j_m2 += (jsq[i] - m->j_mean) * (jsq[i] - m->j_mean);
    m->c = NAN;
    if (paired && nj == n) {
        m->c = 0;
        for (int64_t i = 0; i < n; i++)
            m->c += (unit(dpos, dneg, i) - m->d_mean) * (jsq[i] - m->j_mean);
    }
}

sr_rung_est sr_rung_estimate(const sr_rung_moments *m, double eta, int64_t as_n, int64_t as_nj)
{
    sr_rung_est e = {NAN, INFINITY, INFINITY, 0};
    if (m->n < 1 || m->nj < 1)
        return e;
    double eta2 = eta * eta, B = m->j_mean;
    e.r = m->d_mean / (eta2 * B);
    int paired = !isnan(m->c) && m->nj == m->n && as_n <= 0;
    int64_t n = as_n > 0 ? as_n : m->n, nj = as_nj > 0 ? as_nj : m->nj;
    if (m->n < 2 || (!paired && m->nj < 2))
        return e; /* no spread to judge from */
    if (paired) {
        /* Σ e_i² from the moments: the residuals' mean is 0 by the choice of
         * r; rounding can take a near-zero sum (a linear map) below zero */
        double k = e.r * eta2;
        double ss = m->d_m2 - 2 * k * m->c + k * k * m->j_m2;
        e.se = sqrt((ss > 0 ? ss : 0) / (double)(m->n - 1) / (double)m->n) / (m->d_mean > 0 ? m->d_mean : eta2 * B);
        e.df = m->n - 1;
    } else {
        double vd = m->d_m2 / (double)(m->n - 1), vj = m->j_m2 / (double)(m->nj - 1);
        e.se = sqrt(vd / (double)n / (m->d_mean * m->d_mean) + vj / (double)nj / (B * B));
        e.df = (n < nj ? n : nj) - 1;
    }
    e.ci = sr_t975(e.df) * e.se;
    return e;
}
