/* norm.c - normalisation layers:
 *   batchnorm2d  (N,C,H,W)  per channel; eval: running statistics (an affine map);
 *                           train: batch statistics over (N,H,W) and the running-stat update
 *   layernorm    (N,...,D)  over the last dim (ViT tokens), or (N,C,H,W) over C at each
 *                           pixel (dim="channels", torchvision ConvNeXt's LayerNorm2d)
 *   normalize    (N,C,H,W)  (x - mean)/std per channel: the input normalisation folded into Φ
 *   affine       (N,C,...)  x·weight + bias per channel (dim 1): a learned scale and offset, which
 *                           fuses into a convolution's output map as batchnorm in eval does
 *   groupnorm    (N,C,...)  per sample over each group of C/G channels (torch's GroupNorm; G = C
 *                           is InstanceNorm), then weight and bias per channel
 *
 * Statistics are accumulated in double for both dtypes, in two passes
 * (mean, then squared deviations).  Every sum belongs to one thread (loops
 * run in parallel over channels, groups or features, never split a sum), so
 * results do not depend on the thread count.
 *
 * Derivatives.  Both norms standardise a group of M values (a channel over
 * the batch, or one token / pixel across D features): x̂ = (x − μ)·r with
 * r = 1/√(σ² + ε), σ² the biased variance.  Differentiating μ and σ² too,
 *     dx̂ = P(v),   P(u) = r·(u − mean(u) − x̂·mean(x̂ ⊙ u)),
 * and P is symmetric, so the JVP is w ⊙ P(v) and the backward P(w ⊙ gy).
 * For batchnorm in train mode the group spans the batch, so tangent j of the
 * stack is one joint perturbation of all primal rows (rows n + i·k + j over
 * i), exactly what torch's forward AD computes for a batch.  In eval mode
 * the map is affine and tangents are only scaled. */
#ifdef SR_REAL

/* Per channel over the first n rows: sum[c] = Σ x (sum != NULL), then
 * with mean given, sq[c] = Σ (x − mean[c])² (sq != NULL). */
static void SR_FN(bn_sums)(double *sum, double *sq, const double *mean, const real *x, int64_t n, int64_t C,
                           int64_t P)
{
    #pragma omp parallel for schedule(static) if (n * C * P > NORM_OMP_MIN)
    for (int64_t c = 0; c < C; c++) {
        double s = 0, q = 0;
        if (sum) {
            for (int64_t i = 0; i < n; i++) {
                const real *xc = x + (i * C + c) * P;
                #pragma omp simd reduction(+ : s)
                for (int64_t p = 0; p < P; p++)
                    s += xc[p];
            }
            sum[c] = s;
        }
        if (sq) {
            double mu = mean[c];
            for (int64_t i = 0; i < n; i++) {
                const real *xc = x + (i * C + c) * P;
                #pragma omp simd reduction(+ : q)
                for (int64_t p = 0; p < P; p++) {
                    double d = xc[p] - mu;
                    q += d * d;
                }
            }
            sq[c] = q;
        }
    }
}

/* Per channel over the first n rows (M = n·P values): the mean and the
 * (biased) variance in one sweep, as sums of d = x − k and d² with k the
 * channel's first value: the shift keeps Σd² − (Σd)²/M from cancelling
 * (off by (mean − k)²/var units of double rounding, not mean²/var).  Two
 * sweeps (bn_sums twice) read each train-mode input twice. */
static void SR_FN(bn_moments)(double *mean, double *var, const real *x, int64_t n, int64_t C, int64_t P)
{
    const double M = (double)(n * P);
    #pragma omp parallel for schedule(static) if (n * C * P > NORM_OMP_MIN)
    for (int64_t c = 0; c < C; c++) {
        double k = x[c * P], s = 0, q = 0;
        for (int64_t i = 0; i < n; i++) {
            const real *xc = x + (i * C + c) * P;
            #pragma omp simd reduction(+ : s, q)
            for (int64_t p = 0; p < P; p++) {
                double d = xc[p] - k;
                s += d;
                q += d * d;
            }
        }
        double m = s / M, v = q / M - m * m;
        mean[c] = k + m;
        var[c] = v > 0 ? v : 0;
    }
}

/* Tangents of train-mode batchnorm: dy = w·P(v) per channel, the means in P
 * running over the joint tangent j (rows n + i·k + j for all i). */
static void SR_FN(bn_train_tangents)(real *y, const real *xv, int64_t n, int64_t k, int64_t C,
                                     int64_t P, const double *mu, const double *rstd, const double *w)
{
    double M = (double)(n * P);
    #pragma omp parallel for collapse(2) schedule(static) if (n * k * C * P > NORM_OMP_MIN)
    for (int64_t c = 0; c < C; c++)
        for (int64_t j = 0; j < k; j++) {
            double m = mu[c], r = rstd[c], sv = 0, sxv = 0;
            for (int64_t i = 0; i < n; i++) {
                const real *xc = xv + (i * C + c) * P, *vc = xv + ((n + i * k + j) * C + c) * P;
                #pragma omp simd reduction(+ : sv, sxv)
                for (int64_t p = 0; p < P; p++) {
                    sv += vc[p];
                    sxv += (xc[p] - m) * r * vc[p];
                }
            }
            double mv = sv / M, mxv = sxv / M, s = w[c] * r;
            for (int64_t i = 0; i < n; i++) {
                const real *xc = xv + (i * C + c) * P, *vc = xv + ((n + i * k + j) * C + c) * P;
                real *yc = y + ((n + i * k + j) * C + c) * P;
                #pragma omp simd
                for (int64_t p = 0; p < P; p++)
                    yc[p] = (real)(s * (vc[p] - mv - (xc[p] - m) * r * mxv));
            }
        }
}

/* Backward with the statistics (μ, r) the forward used, in two halves.
 * bn_bwd_sums: s1[c] = Σ gy, s2[c] = Σ gy·x̂ over this process's rows, and
 * gw += s2, gb += s1 (gw, gb may be NULL).  bn_bwd_gx: train, gx = w·P(gy)
 * (batch statistics depend on x) with the means of P over M values (all
 * processes' rows when synchronised: t1, t2 their summed s1, s2); eval,
 * gx = w·r·gy. */
static void SR_FN(bn_bwd_sums)(double *s1, double *s2, real *gw, real *gb, const real *gy, const real *x, int64_t n,
                               int64_t C, int64_t P, const double *mu, const double *rstd)
{
    #pragma omp parallel for schedule(static) if (n * C * P > NORM_OMP_MIN)
    for (int64_t c = 0; c < C; c++) {
        double m = mu[c], r = rstd[c], a = 0, b = 0;
        for (int64_t i = 0; i < n; i++) {
            const real *xc = x + (i * C + c) * P, *gc = gy + (i * C + c) * P;
            #pragma omp simd reduction(+ : a, b)
            for (int64_t p = 0; p < P; p++) {
                a += gc[p];
                b += gc[p] * (xc[p] - m) * r;
            }
        }
        s1[c] = a;
        s2[c] = b;
        if (gw)
            gw[c] += (real)b;
        if (gb)
            gb[c] += (real)a;
    }
}

static void SR_FN(bn_bwd_gx)(real *gx, const real *gy, const real *x, int64_t n, int64_t C, int64_t P,
                             const double *mu, const double *rstd, const double *w, const double *t1,
                             const double *t2, double M, int train)
{
    #pragma omp parallel for schedule(static) if (n * C * P > NORM_OMP_MIN)
    for (int64_t c = 0; c < C; c++) {
        double m = mu[c], r = rstd[c];
        double s = w[c] * r, mg = train ? t1[c] / M : 0, mxg = train ? t2[c] / M : 0;
        for (int64_t i = 0; i < n; i++) {
            const real *xc = x + (i * C + c) * P, *gc = gy + (i * C + c) * P;
            real *oc = gx + (i * C + c) * P;
            #pragma omp simd
            for (int64_t p = 0; p < P; p++)
                oc[p] = (real)(s * (gc[p] - mg - (xc[p] - m) * r * mxg));
        }
    }
}

/* running ← (1 − momentum)·running + momentum·batch, with the unbiased
 * variance (M/(M−1)) as PyTorch does; the count goes up by one. */
static void SR_FN(bn_update)(real *rm, real *rv, real *count, const double *mean, const double *var,
                             int64_t C, double momentum, double M)
{
    for (int64_t c = 0; c < C; c++) {
        rm[c] = (real)((1 - momentum) * rm[c] + momentum * mean[c]);
        rv[c] = (real)((1 - momentum) * rv[c] + momentum * var[c] * M / (M - 1));
    }
    count[0] += 1;
}

static void SR_FN(to_f64)(double *d, const real *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = s[i];
}

/* --- layernorm ----------------------------------------------------------
 * Sample layout: G groups of D values per sample (rs = G·D elements).
 * dim="last": group q is the contiguous row at q·D ("rows" kernels, which
 * vectorise along D).  dim="channels": value d of group q (a pixel) sits at
 * d·G + q, so LN_QB adjacent pixels are handled together ("cols" kernels,
 * which vectorise along the pixels). */
#define LN_QB 64

/* Mean and 1/√(var+ε) of one contiguous row, two passes in double. */
static inline void SR_FN(ln_row_stats)(const real *x, int64_t D, double eps, double *mu, double *rstd)
{
    double s = 0, q = 0;
    #pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < D; d++)
        s += x[d];
    double m = s / (double)D;
    #pragma omp simd reduction(+ : q)
    for (int64_t d = 0; d < D; d++) {
        double t = x[d] - m;
        q += t * t;
    }
    *mu = m;
    *rstd = 1 / sqrt(q / (double)D + eps);
}

/* out = post ⊙ P(pre ⊙ u) for one row, at most one of pre, post given:
 * post = w is the JVP, pre = w the backward. */
static inline void SR_FN(ln_row_project)(real *out, const real *u, const real *x, int64_t D, double mu,
                                         double r, const real *pre, const real *post)
{
    double su = 0, sxu = 0;
    #pragma omp simd reduction(+ : su, sxu)
    for (int64_t d = 0; d < D; d++) {
        double ud = pre ? (double)pre[d] * u[d] : u[d];
        su += ud;
        sxu += (x[d] - mu) * r * ud;
    }
    double mu_u = su / (double)D, mxu = sxu / (double)D;
    /* the weight cases as separate loops: a select inside would keep GCC
     * from vectorising */
    if (post) {
        #pragma omp simd
        for (int64_t d = 0; d < D; d++)
            out[d] = (real)(post[d] * r * (u[d] - mu_u - (x[d] - mu) * r * mxu));
    } else if (pre) {
        #pragma omp simd
        for (int64_t d = 0; d < D; d++)
            out[d] = (real)(r * ((double)pre[d] * u[d] - mu_u - (x[d] - mu) * r * mxu));
    } else {
        #pragma omp simd
        for (int64_t d = 0; d < D; d++)
            out[d] = (real)(r * (u[d] - mu_u - (x[d] - mu) * r * mxu));
    }
}

/* The same for B <= LN_QB adjacent pixels of a channels layout (stride G
 * between a pixel's values); mu, r hold the B pixels' statistics. */
static inline void SR_FN(ln_col_stats)(const real *x, int64_t B, int64_t D, int64_t G, double eps,
                                       double *mu, double *r)
{
    double s[LN_QB] = {0}, q[LN_QB] = {0};
    for (int64_t d = 0; d < D; d++) {
        const real *xd = x + d * G;
        #pragma omp simd
        for (int64_t b = 0; b < B; b++)
            s[b] += xd[b];
    }
    for (int64_t b = 0; b < B; b++)
        mu[b] = s[b] / (double)D;
    for (int64_t d = 0; d < D; d++) {
        const real *xd = x + d * G;
        #pragma omp simd
        for (int64_t b = 0; b < B; b++) {
            double t = xd[b] - mu[b];
            q[b] += t * t;
        }
    }
    for (int64_t b = 0; b < B; b++)
        r[b] = 1 / sqrt(q[b] / (double)D + eps);
}

static inline void SR_FN(ln_col_project)(real *out, const real *u, const real *x, int64_t B, int64_t D,
                                         int64_t G, const double *mu, const double *r, const real *pre,
                                         const real *post)
{
    double su[LN_QB] = {0}, sxu[LN_QB] = {0};
    for (int64_t d = 0; d < D; d++) {
        const real *xd = x + d * G, *ud = u + d * G;
        double pw = pre ? pre[d] : 1;
        #pragma omp simd
        for (int64_t b = 0; b < B; b++) {
            double uv = pw * ud[b];
            su[b] += uv;
            sxu[b] += (xd[b] - mu[b]) * r[b] * uv;
        }
    }
    for (int64_t b = 0; b < B; b++) {
        su[b] /= (double)D;
        sxu[b] /= (double)D;
    }
    for (int64_t d = 0; d < D; d++) {
        const real *xd = x + d * G, *ud = u + d * G;
        real *od = out + d * G;
        double pw = pre ? pre[d] : 1, qw = post ? post[d] : 1;
        #pragma omp simd
        for (int64_t b = 0; b < B; b++) {
            double p = r[b] * (pw * ud[b] - su[b] - (xd[b] - mu[b]) * r[b] * sxu[b]);
            od[b] = (real)(qw * p);
        }
    }
}

/* Forward (k = 0) or stacked JVP: tangent rows reuse their primal group's
 * statistics.  Parallel over primal groups (rows) or pixel blocks (cols);
 * each task also does its group's k tangents. */
static void SR_FN(ln_run)(real *y, const real *xv, int64_t n, int64_t k, int64_t G, int64_t D,
                          int channels, double eps, const real *w, const real *b)
{
    int64_t rs = G * D, nb = channels ? (G + LN_QB - 1) / LN_QB : G;
    #pragma omp parallel for schedule(static) if (n * (1 + k) * rs > NORM_OMP_MIN)
    for (int64_t task = 0; task < n * nb; task++) {
        int64_t i = task / nb, q0 = (task % nb) * (channels ? LN_QB : 1);
        int64_t off = i * rs + (channels ? q0 : q0 * D);
        const real *x = xv + off;
        real *yg = y + off;
        if (!channels) {
            double mu, r;
            SR_FN(ln_row_stats)(x, D, eps, &mu, &r);
            if (w) {
                #pragma omp simd
                for (int64_t d = 0; d < D; d++)
                    yg[d] = (real)((x[d] - mu) * r * w[d] + b[d]);
            } else {
                #pragma omp simd
                for (int64_t d = 0; d < D; d++)
                    yg[d] = (real)((x[d] - mu) * r);
            }
            for (int64_t j = 0; j < k; j++) {
                int64_t to = (n + i * k + j - i) * rs; /* primal row -> tangent row */
                SR_FN(ln_row_project)(yg + to, x + to, x, D, mu, r, NULL, w);
            }
        } else {
            int64_t B = G - q0 < LN_QB ? G - q0 : LN_QB;
            double mu[LN_QB], r[LN_QB];
            SR_FN(ln_col_stats)(x, B, D, G, eps, mu, r);
            for (int64_t d = 0; d < D; d++) {
                const real *xd = x + d * G;
                real *yd = yg + d * G;
                double wd = w ? w[d] : 1, bd = w ? b[d] : 0;
                #pragma omp simd
                for (int64_t c = 0; c < B; c++)
                    yd[c] = (real)((xd[c] - mu[c]) * r[c] * wd + bd);
            }
            for (int64_t j = 0; j < k; j++) {
                int64_t to = (n + i * k + j - i) * rs;
                SR_FN(ln_col_project)(yg + to, x + to, x, B, D, G, mu, r, NULL, w);
            }
        }
    }
}

/* gx = P(w ⊙ gy) per group; the statistics go to stats (mean, 1/std per
 * group, group g = i·G + q) for the parameter gradients. */
static void SR_FN(ln_bwd)(real *gx, double *stats, const real *gy, const real *x, int64_t n, int64_t G,
                          int64_t D, int channels, double eps, const real *w)
{
    int64_t rs = G * D, nb = channels ? (G + LN_QB - 1) / LN_QB : G;
    #pragma omp parallel for schedule(static) if (n * rs > NORM_OMP_MIN)
    for (int64_t task = 0; task < n * nb; task++) {
        int64_t i = task / nb, q0 = (task % nb) * (channels ? LN_QB : 1);
        int64_t off = i * rs + (channels ? q0 : q0 * D);
        double *st = stats + 2 * (i * G + q0);
        if (!channels) {
            SR_FN(ln_row_stats)(x + off, D, eps, &st[0], &st[1]);
            SR_FN(ln_row_project)(gx + off, gy + off, x + off, D, st[0], st[1], w, NULL);
        } else {
            int64_t B = G - q0 < LN_QB ? G - q0 : LN_QB;
            double mu[LN_QB], r[LN_QB];
            SR_FN(ln_col_stats)(x + off, B, D, G, eps, mu, r);
            SR_FN(ln_col_project)(gx + off, gy + off, x + off, B, D, G, mu, r, w, NULL);
            for (int64_t c = 0; c < B; c++) {
                st[2 * c] = mu[c];
                st[2 * c + 1] = r[c];
            }
        }
    }
}

/* gw += Σ_groups gy ⊙ x̂, gb += Σ_groups gy.  Threads own features (blocks
 * of LN_DBLOCK for rows, single channels for cols), so the sums need no
 * reduction across threads and do not depend on the thread count. */
#define LN_DBLOCK 16
static void SR_FN(ln_param_grads)(real *gw, real *gb, const real *gy, const real *x,
                                  const double *stats, int64_t n, int64_t G, int64_t D, int channels)
{
    int64_t rs = G * D;
    if (channels) {
        #pragma omp parallel for schedule(static) if (n * rs > NORM_OMP_MIN)
        for (int64_t d = 0; d < D; d++) {
            double aw = 0, ab = 0;
            for (int64_t i = 0; i < n; i++) {
                const real *xd = x + i * rs + d * G, *gd = gy + i * rs + d * G;
                const double *st = stats + 2 * i * G;
                #pragma omp simd reduction(+ : aw, ab)
                for (int64_t q = 0; q < G; q++) {
                    aw += gd[q] * (xd[q] - st[2 * q]) * st[2 * q + 1];
                    ab += gd[q];
                }
            }
            gw[d] += (real)aw;
            gb[d] += (real)ab;
        }
        return;
    }
    int64_t nb = (D + LN_DBLOCK - 1) / LN_DBLOCK;
    #pragma omp parallel for schedule(static) if (n * rs > NORM_OMP_MIN)
    for (int64_t blk = 0; blk < nb; blk++) {
        int64_t d0 = blk * LN_DBLOCK, nd = D - d0 < LN_DBLOCK ? D - d0 : LN_DBLOCK;
        double aw[LN_DBLOCK] = {0}, ab[LN_DBLOCK] = {0};
        for (int64_t g = 0; g < n * G; g++) {
            const real *xg = x + g * D + d0, *gg = gy + g * D + d0;
            double mu = stats[2 * g], r = stats[2 * g + 1];
            #pragma omp simd
            for (int64_t c = 0; c < nd; c++) {
                aw[c] += gg[c] * (xg[c] - mu) * r;
                ab[c] += gg[c];
            }
        }
        for (int64_t c = 0; c < nd; c++) {
            gw[d0 + c] += (real)aw[c];
            gb[d0 + c] += (real)ab[c];
        }
    }
}

/* --- groupnorm ----------------------------------------------------------
 * Sample layout (C, S): G groups of Cg = C/G channels, group g the
 * contiguous row of D = Cg·S values at g·D, standardised as a layernorm
 * row (the same P), then scaled and shifted per channel: the JVP is
 * w_c · P(v), the backward P(w_c ⊙ gy). */
static void SR_FN(gn_run)(real *y, const real *xv, int64_t n, int64_t k, int64_t G, int64_t Cg, int64_t S,
                          double eps, const real *w, const real *b)
{
    int64_t D = Cg * S, rs = G * D;
    #pragma omp parallel for schedule(static) if (n * (1 + k) * rs > NORM_OMP_MIN)
    for (int64_t task = 0; task < n * G; task++) {
        int64_t i = task / G, g = task % G, off = i * rs + g * D;
        const real *x = xv + off;
        real *yg = y + off;
        double mu, r;
        SR_FN(ln_row_stats)(x, D, eps, &mu, &r);
        for (int64_t c = 0; c < Cg; c++) {
            double wc = w ? w[g * Cg + c] : 1, bc = w ? b[g * Cg + c] : 0;
            const real *xc = x + c * S;
            real *yc = yg + c * S;
            #pragma omp simd
            for (int64_t s = 0; s < S; s++)
                yc[s] = (real)((xc[s] - mu) * r * wc + bc);
        }
        for (int64_t j = 0; j < k; j++) {
            int64_t to = (n + i * k + j - i) * rs; /* primal row -> tangent row */
            SR_FN(ln_row_project)(yg + to, x + to, x, D, mu, r, NULL, NULL);
            for (int64_t c = 0; w && c < Cg; c++) {
                real wc = w[g * Cg + c], *yc = yg + to + c * S;
                #pragma omp simd
                for (int64_t s = 0; s < S; s++)
                    yc[s] *= wc;
            }
        }
    }
}

/* gx = P(w ⊙ gy) per group (w ⊙ gy written into gx first, projected in
 * place: ln_row_project reads u[d] before it writes out[d]); the
 * statistics go to stats (mean, 1/std of group i·G + g). */
static void SR_FN(gn_bwd)(real *gx, double *stats, const real *gy, const real *x, int64_t n, int64_t G,
                          int64_t Cg, int64_t S, double eps, const real *w)
{
    int64_t D = Cg * S, rs = G * D;
    #pragma omp parallel for schedule(static) if (n * rs > NORM_OMP_MIN)
    for (int64_t task = 0; task < n * G; task++) {
        int64_t i = task / G, g = task % G, off = i * rs + g * D;
        double *st = stats + 2 * task;
        SR_FN(ln_row_stats)(x + off, D, eps, &st[0], &st[1]);
        const real *u = gy + off;
        if (w) {
            for (int64_t c = 0; c < Cg; c++) {
                real wc = w[g * Cg + c], *o = gx + off + c * S;
                const real *gc = gy + off + c * S;
                #pragma omp simd
                for (int64_t s = 0; s < S; s++)
                    o[s] = wc * gc[s];
            }
            u = gx + off;
        }
        SR_FN(ln_row_project)(gx + off, u, x + off, D, st[0], st[1], NULL, NULL);
    }
}

/* gw[c] += Σ gy ⊙ x̂, gb[c] += Σ gy over the batch and the channel's
 * values; threads own channels. */
static void SR_FN(gn_param_grads)(real *gw, real *gb, const real *gy, const real *x, const double *stats,
                                  int64_t n, int64_t G, int64_t Cg, int64_t S)
{
    int64_t C = G * Cg, rs = C * S;
    #pragma omp parallel for schedule(static) if (n * rs > NORM_OMP_MIN)
    for (int64_t ch = 0; ch < C; ch++) {
        int64_t g = ch / Cg;
        double aw = 0, ab = 0;
        for (int64_t i = 0; i < n; i++) {
            const real *xc = x + i * rs + ch * S, *gc = gy + i * rs + ch * S;
            double mu = stats[2 * (i * G + g)], r = stats[2 * (i * G + g) + 1];
            #pragma omp simd reduction(+ : aw, ab)
            for (int64_t s = 0; s < S; s++) {
                aw += gc[s] * (xc[s] - mu) * r;
                ab += gc[s];
            }
        }
        gw[ch] += (real)aw;
        gb[ch] += (real)ab;
    }
}

#else /* generic part */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"

/* Below this many elements a loop is not worth waking the OpenMP team. */
#define NORM_OMP_MIN 32768

#define SR_GENERIC_FILE "nn/norm.c"
#include "base/generic.h"

static void param_f64(double *d, const sr_param *p)
{
    SR_DISPATCH(p->value.dtype, to_f64, d, sr_data(&p->value), sr_numel(&p->value));
}

/* ======================= batchnorm2d ===================================== */

enum { BN_W, BN_B, BN_RM, BN_RV, BN_COUNT };

typedef struct {
    int64_t C;
    double eps, momentum;
    /* C doubles each: this pass's mean, variance, 1/√(var+ε), w·r, w, b; the
     * mean and 1/√(var+ε) the last saving forward used, for backward; and
     * 2C + 1 of scratch for the sums a synchronised pass adds up. */
    double *mu, *var, *rstd, *scale, *w, *b, *smu, *srstd, *sums;
    double sM; /* values per channel the saving forward normalised over */
    int saved_train;
} bn_impl;

/* Synchronised train-mode statistics (run->sync): each channel's sum over
 * every process's rows, its mean, then the squared deviations from that
 * mean likewise; *M becomes the count over all processes.  The order of
 * the sums is the processes', so the result agrees with one process
 * holding every row to rounding. */
static int bn_sync_stats(bn_impl *c, const sr_tensor *x, int64_t n, int64_t P, const sr_sum_hook *h, double *M)
{
    int64_t C = c->C;
    SR_DISPATCH(x->dtype, bn_sums, c->sums, NULL, NULL, sr_data(x), n, C, P);
    c->sums[C] = (double)(n * P);
    if (h->sum(c->sums, C + 1, SR_F64, h->ctx))
        return sr_fail_context("batchnorm2d (synchronised)");
    *M = c->sums[C];
    if (*M < 2)
        return sr_fail("batchnorm2d: training needs more than one value per channel (%g over all processes)", *M);
    for (int64_t ch = 0; ch < C; ch++)
        c->mu[ch] = c->sums[ch] / *M;
    SR_DISPATCH(x->dtype, bn_sums, NULL, c->sums, c->mu, sr_data(x), n, C, P);
    if (h->sum(c->sums, C, SR_F64, h->ctx))
        return sr_fail_context("batchnorm2d (synchronised)");
    for (int64_t ch = 0; ch < C; ch++)
        c->var[ch] = c->sums[ch] / *M;
    return 0;
}

static int bn_check(const sr_module *m, const sr_tensor *x)
{
    const bn_impl *c = m->impl;
    if (x->ndim != 4)
        return sr_fail("batchnorm2d: input %s must be 4D (N,C,H,W)", SR_SHAPE(x));
    if (x->shape[1] != c->C)
        return sr_fail("batchnorm2d: input %s has %lld channels but num_features=%lld", SR_SHAPE(x),
                       (long long)x->shape[1], (long long)c->C);
    return 0;
}

/* The map's coefficients: w, b, and in eval mode the running statistics
 * (in train mode bn_run has just filled mu, var), then 1/√(var+ε), w·r. */
static void bn_affine(sr_module *m)
{
    bn_impl *c = m->impl;
    param_f64(c->w, &m->params[BN_W]);
    param_f64(c->b, &m->params[BN_B]);
    if (!m->training) {
        param_f64(c->mu, &m->params[BN_RM]);
        param_f64(c->var, &m->params[BN_RV]);
    }
    for (int64_t ch = 0; ch < c->C; ch++) {
        c->rstd[ch] = 1 / sqrt(c->var[ch] + c->eps);
        c->scale[ch] = c->w[ch] * c->rstd[ch];
    }
}

/* Forward (jvp = 0: xv holds n rows) or stacked JVP (n primal rows, k
 * tangents each).  Only a forward updates the running statistics, so a JVP
 * in train mode measures the network without changing it. */
static int bn_run(sr_module *m, const sr_tensor *xv, int64_t n, int64_t k, sr_run *run, int jvp)
{
    bn_impl *c = m->impl;
    if (bn_check(m, xv) || sr_module_output_like(m, run, xv))
        return -1;
    int64_t C = c->C, P = xv->shape[2] * xv->shape[3];
    double M = (double)(n * P);
    if (m->training && run->sync && !jvp) {
        if (bn_sync_stats(c, xv, n, P, run->sync, &M))
            return -1;
    } else if (m->training) {
        if (M < 2)
            return sr_fail("batchnorm2d: training needs more than one value per channel (input %s%s)",
                           SR_SHAPE(xv), jvp ? ", stacked" : "");
        SR_DISPATCH(xv->dtype, bn_moments, c->mu, c->var, sr_data(xv), n, C, P);
    }
    bn_affine(m);
    int64_t rows = xv->shape[0];
    if (m->training && k > 0) {
        sr_epilogue_apply(xv->dtype, sr_data(&m->out), sr_data(xv), n, n, C, P,
                          &(sr_epilogue){c->mu, c->scale, c->b, C, 0, NULL, NULL, 0, NULL});
        SR_DISPATCH(xv->dtype, bn_train_tangents, sr_data(&m->out), sr_data(xv), n, k, C, P, c->mu,
                    c->rstd, c->w);
    } else {
        sr_epilogue_apply(xv->dtype, sr_data(&m->out), sr_data(xv), rows, n, C, P,
                          &(sr_epilogue){c->mu, c->scale, c->b, C, 0, NULL, NULL, 0, NULL});
    }
    if (jvp)
        return 0;
    if (m->training)
        SR_DISPATCH(xv->dtype, bn_update, sr_data(&m->params[BN_RM].value),
                    sr_data(&m->params[BN_RV].value), sr_data(&m->params[BN_COUNT].value), c->mu, c->var,
                    C, c->momentum, M);
    if (run->save) {
        sr_tensor_share(&m->saved, xv);
        memcpy(c->smu, c->mu, (size_t)C * sizeof *c->mu);
        memcpy(c->srstd, c->rstd, (size_t)C * sizeof *c->rstd);
        c->saved_train = m->training;
        c->sM = M;
    }
    return 0;
}

static int bn_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    return bn_run(m, x, x->ndim ? x->shape[0] : 0, 0, run, 0);
}

static int bn_jvp(sr_module *m, const sr_tensor *xv, sr_run *run)
{
    return bn_run(m, xv, run->n, run->k, run, 1);
}

static int bn_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    bn_impl *c = m->impl;
    const sr_tensor *x = &m->saved;
    if (!x->storage)
        return sr_fail("batchnorm2d backward: forward was not run with save");
    if (sr_module_grad_input_like(m, run, x))
        return -1;
    void *gw = NULL, *gb = NULL;
    if (run->param_grads &&
        (!(gw = sr_param_grad(m, &m->params[BN_W])) || !(gb = sr_param_grad(m, &m->params[BN_B]))))
        return -1;
    param_f64(c->w, &m->params[BN_W]);
    int64_t n = x->shape[0], C = c->C, P = x->shape[2] * x->shape[3];
    double *s1 = c->sums, *s2 = c->sums + C;
    SR_DISPATCH(x->dtype, bn_bwd_sums, s1, s2, gw, gb, sr_data(gy), sr_data(x), n, C, P, c->smu, c->srstd);
    /* Synchronised: P's means run over every process's rows (gw, gb keep
     * this process's share; the trainer sums parameter gradients). */
    if (c->saved_train && run->sync && run->sync->sum(c->sums, 2 * C, SR_F64, run->sync->ctx))
        return sr_fail_context("batchnorm2d backward (synchronised)");
    SR_DISPATCH(x->dtype, bn_bwd_gx, sr_data(&m->gin), sr_data(gy), sr_data(x), n, C, P, c->smu, c->srstd, c->w, s1,
                s2, c->sM, c->saved_train);
    return 0;
}

/* PyTorch's reset_parameters + reset_running_stats. */
static void bn_reset(sr_module *m, sr_rng *rng)
{
    (void)rng;
    sr_tensor_fill(&m->params[BN_W].value, 1);
    sr_tensor_fill(&m->params[BN_B].value, 0);
    sr_tensor_fill(&m->params[BN_RM].value, 0);
    sr_tensor_fill(&m->params[BN_RV].value, 1);
    sr_tensor_fill(&m->params[BN_COUNT].value, 0);
}

static void bn_free(sr_module *m)
{
    bn_impl *c = m->impl;
    free(c->mu); /* one block holds all nine arrays */
}

static void bn_describe(const sr_module *m, char *buf, size_t n)
{
    const bn_impl *c = m->impl;
    snprintf(buf, n, "%lld, eps %g, momentum %g", (long long)c->C, c->eps, c->momentum);
}

/* Fusion: in eval mode the layer is a per-channel affine map, folded into
 * the output map of the layer before it (a convolution) when that map has
 * no part of its own yet. */
static int bn_fold(sr_module *m, sr_epilogue *e)
{
    if (m->training || e->C || e->relu || e->add)
        return 0;
    bn_impl *c = m->impl;
    bn_affine(m);
    *e = (sr_epilogue){.mu = c->mu, .scale = c->scale, .shift = c->b, .C = c->C};
    return 1;
}

/* Batch statistics couple the rows in training: affine in eval only. */
static int bn_is_affine(const sr_module *m) { return !m->training; }

static const sr_module_ops bn_ops = {
    .kind = "batchnorm2d", .forward = bn_forward, .jvp = bn_jvp, .backward = bn_backward, .reset = bn_reset,
    .free_impl = bn_free, .describe = bn_describe, .is_affine = bn_is_affine, .fold = bn_fold,
};

sr_module *sr_batchnorm2d_create(const sr_opts *o)
{
    int64_t C;
    double eps, momentum;
    if (sr_opt_req_int(o, "num_features", 1, &C) || sr_opt_num(o, "eps", 1e-5, &eps) ||
        sr_opt_num(o, "momentum", 0.1, &momentum))
        return NULL;
    if (!(eps >= 0)) {
        sr_fail("%s: option eps must be >= 0 (got %g)", o->op, eps);
        return NULL;
    }
    if (!(momentum >= 0 && momentum <= 1)) {
        sr_fail("%s: option momentum must be in [0, 1] (got %g)", o->op, momentum);
        return NULL;
    }
    sr_module *m = sr_module_new(&bn_ops, sizeof(bn_impl));
    if (!m)
        return NULL;
    bn_impl *c = m->impl;
    c->C = C;
    c->eps = eps;
    c->momentum = momentum;
    double *buf = malloc((size_t)(10 * C + 1) * sizeof *buf);
    if (!buf) {
        sr_fail("%s: out of memory", o->op);
        sr_module_release(m);
        return NULL;
    }
    double **arr[] = {&c->mu, &c->var, &c->rstd, &c->scale, &c->w, &c->b, &c->smu, &c->srstd, &c->sums};
    for (int i = 0; i < 9; i++)
        *arr[i] = buf + i * C;
    /* torchvision's state_dict keys and order; num_batches_tracked is a 0-d
     * count (int64 in torch, stored here in the parameter dtype). */
    if (!sr_module_add_param(m, "weight", 1, &C, 1) || !sr_module_add_param(m, "bias", 1, &C, 1) ||
        !sr_module_add_param(m, "running_mean", 1, &C, 0) ||
        !sr_module_add_param(m, "running_var", 1, &C, 0) ||
        !sr_module_add_param(m, "num_batches_tracked", 0, NULL, 0)) {
        sr_module_release(m);
        return NULL;
    }
    bn_reset(m, NULL);
    return m;
}

/* ======================= layernorm ======================================= */

typedef struct {
    int64_t D;
    double eps;
    int channels, affine;
    sr_tensor stats; /* backward: (mean, 1/std) per group, float64 */
} ln_impl;

/* Groups per sample: G rows of D (dim="last") or G pixels (dim="channels"). */
static int ln_layout(const sr_module *m, const sr_tensor *x, int64_t *G)
{
    const ln_impl *c = m->impl;
    if (x->ndim < 2)
        return sr_fail("layernorm: input %s needs a batch dimension", SR_SHAPE(x));
    if (c->channels && x->shape[1] != c->D)
        return sr_fail("layernorm: input %s must be (N,C,...) with C=normalized_shape=%lld "
                       "(dim=\"channels\")", SR_SHAPE(x), (long long)c->D);
    if (!c->channels && x->shape[x->ndim - 1] != c->D)
        return sr_fail("layernorm: input %s must end in normalized_shape=%lld", SR_SHAPE(x),
                       (long long)c->D);
    *G = sr_rowsize(x) / c->D;
    return 0;
}

static int ln_run(sr_module *m, const sr_tensor *xv, int64_t n, int64_t k, sr_run *run)
{
    ln_impl *c = m->impl;
    int64_t G;
    if (ln_layout(m, xv, &G) || sr_module_output_like(m, run, xv))
        return -1;
    const void *w = c->affine ? sr_data(&m->params[0].value) : NULL;
    const void *b = c->affine ? sr_data(&m->params[1].value) : NULL;
    SR_DISPATCH(xv->dtype, ln_run, sr_data(&m->out), sr_data(xv), n, k, G, c->D, c->channels, c->eps, w, b);
    if (run->save && k == 0)
        sr_tensor_share(&m->saved, xv);
    return 0;
}

static int ln_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    return ln_run(m, x, x->ndim ? x->shape[0] : 0, 0, run);
}

static int ln_jvp(sr_module *m, const sr_tensor *xv, sr_run *run)
{
    return ln_run(m, xv, run->n, run->k, run);
}

static int ln_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    ln_impl *c = m->impl;
    const sr_tensor *x = &m->saved;
    int64_t G;
    if (!x->storage)
        return sr_fail("layernorm backward: forward was not run with save");
    if (ln_layout(m, x, &G) || sr_module_grad_input_like(m, run, x))
        return -1;
    int64_t n = x->shape[0];
    if (sr_tensor_ensure(&c->stats, SR_F64, 1, (int64_t[]){2 * n * G}))
        return -1;
    const void *w = c->affine ? sr_data(&m->params[0].value) : NULL;
    SR_DISPATCH(x->dtype, ln_bwd, sr_data(&m->gin), sr_f64(&c->stats), sr_data(gy), sr_data(x), n, G, c->D,
                c->channels, c->eps, w);
    if (run->param_grads && c->affine) {
        void *gw, *gb;
        if (!(gw = sr_param_grad(m, &m->params[0])) || !(gb = sr_param_grad(m, &m->params[1])))
            return -1;
        SR_DISPATCH(x->dtype, ln_param_grads, gw, gb, sr_data(gy), sr_data(x), sr_f64(&c->stats), n, G, c->D,
                    c->channels);
    }
    return 0;
}

static void ln_reset(sr_module *m, sr_rng *rng)
{
    (void)rng;
    const ln_impl *c = m->impl;
    if (c->affine) {
        sr_tensor_fill(&m->params[0].value, 1);
        sr_tensor_fill(&m->params[1].value, 0);
    }
}

static void ln_free(sr_module *m)
{
    ln_impl *c = m->impl;
    sr_tensor_free(&c->stats);
}

static void ln_describe(const sr_module *m, char *buf, size_t n)
{
    const ln_impl *c = m->impl;
    snprintf(buf, n, "%lld, eps %g, over %s%s", (long long)c->D, c->eps,
             c->channels ? "channels" : "the last dim", c->affine ? "" : ", no affine");
}

static const sr_module_ops ln_ops = {
    .kind = "layernorm", .forward = ln_forward, .jvp = ln_jvp, .backward = ln_backward, .reset = ln_reset,
    .free_impl = ln_free, .describe = ln_describe
};

sr_module *sr_layernorm_create(const sr_opts *o)
{
    ln_impl cfg = {0};
    if (sr_opt_req_int(o, "normalized_shape", 1, &cfg.D) || sr_opt_num(o, "eps", 1e-5, &cfg.eps) ||
        sr_opt_bool(o, "affine", 1, &cfg.affine))
        return NULL;
    if (!(cfg.eps >= 0)) {
        sr_fail("%s: option eps must be >= 0 (got %g)", o->op, cfg.eps);
        return NULL;
    }
    if (sr_opt_choice(o, "dim", (const char *[]){"last", "channels", NULL}, &cfg.channels))
        return NULL;
    sr_module *m = sr_module_new(&ln_ops, sizeof cfg);
    if (!m)
        return NULL;
    *(ln_impl *)m->impl = cfg;
    if (cfg.affine &&
        (!sr_module_add_param(m, "weight", 1, &cfg.D, 1) || !sr_module_add_param(m, "bias", 1, &cfg.D, 1))) {
        sr_module_release(m);
        return NULL;
    }
    ln_reset(m, NULL);
    return m;
}

/* ======================= groupnorm ======================================= */

typedef struct {
    int64_t G, C;
    double eps;
    int affine;
    sr_tensor stats; /* backward: (mean, 1/std) per sample and group, float64 */
} gn_impl;

/* Values per channel of x (N, C, ...). */
static int gn_layout(const sr_module *m, const sr_tensor *x, int64_t *S)
{
    const gn_impl *c = m->impl;
    if (x->ndim < 2 || x->shape[1] != c->C)
        return sr_fail("groupnorm: input %s must be (N,C,...) with C=num_channels=%lld", SR_SHAPE(x),
                       (long long)c->C);
    *S = sr_rowsize(x) / c->C;
    return 0;
}

static int gn_run(sr_module *m, const sr_tensor *xv, int64_t n, int64_t k, sr_run *run)
{
    gn_impl *c = m->impl;
    int64_t S;
    if (gn_layout(m, xv, &S) || sr_module_output_like(m, run, xv))
        return -1;
    const void *w = c->affine ? sr_data(&m->params[0].value) : NULL;
    const void *b = c->affine ? sr_data(&m->params[1].value) : NULL;
    SR_DISPATCH(xv->dtype, gn_run, sr_data(&m->out), sr_data(xv), n, k, c->G, c->C / c->G, S, c->eps, w, b);
    if (run->save && k == 0)
        sr_tensor_share(&m->saved, xv);
    return 0;
}

static int gn_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    return gn_run(m, x, x->ndim ? x->shape[0] : 0, 0, run);
}

static int gn_jvp(sr_module *m, const sr_tensor *xv, sr_run *run) { return gn_run(m, xv, run->n, run->k, run); }

static int gn_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    gn_impl *c = m->impl;
    const sr_tensor *x = &m->saved;
    int64_t S;
    if (!x->storage)
        return sr_fail("groupnorm backward: forward was not run with save");
    if (gn_layout(m, x, &S) || sr_module_grad_input_like(m, run, x))
        return -1;
    int64_t n = x->shape[0];
    if (sr_tensor_ensure(&c->stats, SR_F64, 1, (int64_t[]){2 * n * c->G}))
        return -1;
    const void *w = c->affine ? sr_data(&m->params[0].value) : NULL;
    SR_DISPATCH(x->dtype, gn_bwd, sr_data(&m->gin), sr_f64(&c->stats), sr_data(gy), sr_data(x), n, c->G,
                c->C / c->G, S, c->eps, w);
    if (run->param_grads && c->affine) {
        void *gw, *gb;
        if (!(gw = sr_param_grad(m, &m->params[0])) || !(gb = sr_param_grad(m, &m->params[1])))
            return -1;
        SR_DISPATCH(x->dtype, gn_param_grads, gw, gb, sr_data(gy), sr_data(x), sr_f64(&c->stats), n, c->G,
                    c->C / c->G, S);
    }
    return 0;
}

static void gn_reset(sr_module *m, sr_rng *rng)
{
    (void)rng;
    if (((const gn_impl *)m->impl)->affine) {
        sr_tensor_fill(&m->params[0].value, 1);
        sr_tensor_fill(&m->params[1].value, 0);
    }
}

static void gn_free(sr_module *m) { sr_tensor_free(&((gn_impl *)m->impl)->stats); }

static void gn_describe(const sr_module *m, char *buf, size_t n)
{
    const gn_impl *c = m->impl;
    snprintf(buf, n, "%lld groups of %lld channels, eps %g%s", (long long)c->G, (long long)(c->C / c->G), c->eps,
             c->affine ? "" : ", no affine");
}

static const sr_module_ops gn_ops = {
    .kind = "groupnorm", .forward = gn_forward, .jvp = gn_jvp, .backward = gn_backward, .reset = gn_reset,
    .free_impl = gn_free, .describe = gn_describe
};

sr_module *sr_groupnorm_create(const sr_opts *o)
{
    gn_impl cfg = {0};
    if (sr_opt_req_int(o, "num_groups", 1, &cfg.G) || sr_opt_req_int(o, "num_channels", 1, &cfg.C) ||
        sr_opt_num(o, "eps", 1e-5, &cfg.eps) || sr_opt_bool(o, "affine", 1, &cfg.affine))
        return NULL;
    if (!(cfg.eps >= 0)) {
        sr_fail("%s: option eps must be >= 0 (got %g)", o->op, cfg.eps);
        return NULL;
    }
    if (cfg.C % cfg.G) {
        sr_fail("%s: num_channels %lld is not a multiple of num_groups %lld", o->op, (long long)cfg.C,
                (long long)cfg.G);
        return NULL;
    }
    sr_module *m = sr_module_new(&gn_ops, sizeof cfg);
    if (!m)
        return NULL;
    *(gn_impl *)m->impl = cfg;
    if (cfg.affine &&
        (!sr_module_add_param(m, "weight", 1, &cfg.C, 1) || !sr_module_add_param(m, "bias", 1, &cfg.C, 1))) {
        sr_module_release(m);
        return NULL;
    }
    gn_reset(m, NULL);
    return m;
}

/* ======================= normalize ======================================= */

#define NORMALIZE_MAX 16

typedef struct {
    int64_t C;
    double mean[NORMALIZE_MAX], inv[NORMALIZE_MAX]; /* inv = 1/std */
} nz_impl;

static int nz_check(const sr_module *m, const sr_tensor *x)
{
    const nz_impl *c = m->impl;
    if (x->ndim < 2)
        return sr_fail("normalize: input %s must be (N,C,H,W)", SR_SHAPE(x));
    if (x->shape[1] != c->C)
        return sr_fail("normalize: input %s has %lld channels but mean/std have %lld", SR_SHAPE(x),
                       (long long)x->shape[1], (long long)c->C);
    return 0;
}

static int nz_run(sr_module *m, const sr_tensor *xv, int64_t n, sr_run *run)
{
    nz_impl *c = m->impl;
    if (nz_check(m, xv) || sr_module_output_like(m, run, xv))
        return -1;
    sr_epilogue_apply(xv->dtype, sr_data(&m->out), sr_data(xv), xv->shape[0], n, c->C, sr_rowsize(xv) / c->C,
                      &(sr_epilogue){c->mean, c->inv, NULL, c->C, 0, NULL, NULL, 0, NULL});
    return 0;
}

static int nz_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    return nz_run(m, x, x->ndim ? x->shape[0] : 0, run);
}

static int nz_jvp(sr_module *m, const sr_tensor *xv, sr_run *run) { return nz_run(m, xv, run->n, run); }

/* gx = gy / std: the linear part alone, so no input needs saving. */
static int nz_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    nz_impl *c = m->impl;
    if (sr_module_grad_input_like(m, run, gy))
        return -1;
    sr_epilogue_apply(gy->dtype, sr_data(&m->gin), sr_data(gy), gy->shape[0], 0, c->C, sr_rowsize(gy) / c->C,
                      &(sr_epilogue){c->mean, c->inv, NULL, c->C, 0, NULL, NULL, 0, NULL});
    return 0;
}

static void nz_describe(const sr_module *m, char *buf, size_t n)
{
    const nz_impl *c = m->impl;
    size_t len = (size_t)snprintf(buf, n, "mean {");
    for (int64_t i = 0; i < c->C && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, i ? ", %g" : "%g", c->mean[i]);
    if (len < n)
        len += (size_t)snprintf(buf + len, n - len, "}, std {");
    for (int64_t i = 0; i < c->C && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, i ? ", %g" : "%g", 1 / c->inv[i]);
    if (len < n)
        snprintf(buf + len, n - len, "}");
}

static const sr_module_ops nz_ops = {
    .kind = "normalize", .forward = nz_forward, .jvp = nz_jvp, .backward = nz_backward,
    .describe = nz_describe, .is_affine = sr_module_affine_always
};

sr_module *sr_normalize_create(const sr_opts *o)
{
    double mean[NORMALIZE_MAX], std[NORMALIZE_MAX];
    int nm = 0, ns = 0, rm, rs;
    if ((rm = o->get_nums(o, "mean", mean, NORMALIZE_MAX, &nm)) < 0 ||
        (rs = o->get_nums(o, "std", std, NORMALIZE_MAX, &ns)) < 0)
        return NULL;
    if (rm == 0 || rs == 0) {
        sr_fail("%s: options mean and std are required", o->op);
        return NULL;
    }
    if (nm != ns || nm < 1) {
        sr_fail("%s: mean has %d values but std has %d", o->op, nm, ns);
        return NULL;
    }
    nz_impl cfg = {nm, {0}, {0}};
    for (int i = 0; i < nm; i++) {
        if (!(std[i] > 0) || !isfinite(std[i]) || !isfinite(mean[i])) {
            sr_fail("%s: std[%d] must be positive and mean[%d] finite (got %g, %g)", o->op, i + 1, i + 1,
                    std[i], mean[i]);
            return NULL;
        }
        cfg.mean[i] = mean[i];
        cfg.inv[i] = 1 / std[i];
    }
    sr_module *m = sr_module_new(&nz_ops, sizeof cfg);
    if (m)
        *(nz_impl *)m->impl = cfg;
    return m;
}

/* ======================= affine ========================================== */

typedef struct {
    int64_t C;
    double *mu, *scale, *shift; /* the map as the epilogue reads it: 0, weight, bias */
} af_impl;

/* The epilogue arrays from the parameters (which may have changed). */
static const sr_epilogue *af_map(sr_module *m, sr_epilogue *e)
{
    af_impl *c = m->impl;
    param_f64(c->scale, &m->params[0]);
    param_f64(c->shift, &m->params[1]);
    *e = (sr_epilogue){c->mu, c->scale, c->shift, c->C, 0, NULL, NULL, 0, NULL};
    return e;
}

static int af_run(sr_module *m, const sr_tensor *xv, int64_t n, sr_run *run, int jvp)
{
    af_impl *c = m->impl;
    sr_epilogue e;
    if (xv->ndim < 2 || xv->shape[1] != c->C)
        return sr_fail("affine: input %s must be (N,%lld,...) (num_features=%lld)", SR_SHAPE(xv), (long long)c->C,
                       (long long)c->C);
    if (sr_module_output_like(m, run, xv))
        return -1;
    sr_epilogue_apply(xv->dtype, sr_data(&m->out), sr_data(xv), xv->shape[0], n, c->C, sr_rowsize(xv) / c->C,
                      af_map(m, &e));
    if (!jvp && run->save)
        sr_tensor_share(&m->saved, xv);
    return 0;
}

static int af_forward(sr_module *m, const sr_tensor *x, sr_run *run)
{
    return af_run(m, x, x->ndim ? x->shape[0] : 0, run, 0);
}
static int af_jvp(sr_module *m, const sr_tensor *xv, sr_run *run) { return af_run(m, xv, run->n, run, 1); }

/* gx = gy·weight; gweight += Σ gy·x, gbias += Σ gy (over the batch and the
 * positions of each channel). */
static int af_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    af_impl *c = m->impl;
    const sr_tensor *x = &m->saved;
    sr_epilogue e;
    if (!x->storage)
        return sr_fail("affine backward: forward was not run with save");
    if (sr_module_grad_input_like(m, run, gy))
        return -1;
    int64_t N = gy->shape[0], P = sr_rowsize(gy) / c->C;
    sr_epilogue_apply(gy->dtype, sr_data(&m->gin), sr_data(gy), N, 0, c->C, P, af_map(m, &e));
    if (!run->param_grads)
        return 0;
    void *gw = sr_param_grad(m, &m->params[0]), *gb = sr_param_grad(m, &m->params[1]);
    if (!gw || !gb)
        return -1;
    for (int64_t ch = 0; ch < c->C; ch++) {
        double sw = 0, sb = 0;
        for (int64_t i = 0; i < N; i++)
            for (int64_t p = 0; p < P; p++) {
                int64_t at = (i * c->C + ch) * P + p;
                double g = sr_get_flat(gy, at);
                sw += g * sr_get_flat(x, at);
                sb += g;
            }
        if (gy->dtype == SR_F64) {
            ((double *)gw)[ch] += sw;
            ((double *)gb)[ch] += sb;
        } else {
            ((float *)gw)[ch] += (float)sw;
            ((float *)gb)[ch] += (float)sb;
        }
    }
    return 0;
}

/* Fusion: the per-channel map folds into the output map of the layer
 * before it (a convolution) like batchnorm's in eval mode. */
static int af_fold(sr_module *m, sr_epilogue *e)
{
    if (e->C || e->relu || e->add)
        return 0;
    af_map(m, e);
    return 1;
}

static void af_reset(sr_module *m, sr_rng *rng)
{
    (void)rng;
    sr_tensor_fill(&m->params[0].value, 1);
    sr_tensor_fill(&m->params[1].value, 0);
}

static void af_free(sr_module *m) { free(((af_impl *)m->impl)->mu); }

static void af_describe(const sr_module *m, char *buf, size_t n)
{
    snprintf(buf, n, "%lld", (long long)((const af_impl *)m->impl)->C);
}

static const sr_module_ops af_ops = {
    .kind = "affine", .forward = af_forward, .jvp = af_jvp, .backward = af_backward, .reset = af_reset,
    .free_impl = af_free, .describe = af_describe, .is_affine = sr_module_affine_always, .fold = af_fold,
};

sr_module *sr_affine_create(const sr_opts *o)
{
    int64_t C;
    if (sr_opt_req_int(o, "num_features", 1, &C))
        return NULL;
    sr_module *m = sr_module_new(&af_ops, sizeof(af_impl));
    if (!m)
        return NULL;
    af_impl *c = m->impl;
    c->C = C;
    c->mu = calloc((size_t)(3 * C), sizeof(double));
    if (!c->mu || !sr_module_add_param(m, "weight", 1, &C, 1) || !sr_module_add_param(m, "bias", 1, &C, 1)) {
        if (!c->mu)
            sr_fail("affine: out of memory");
        sr_module_release(m);
        return NULL;
    }
    c->scale = c->mu + C, c->shift = c->mu + 2 * C;
    af_reset(m, NULL);
    return m;
}

#endif
