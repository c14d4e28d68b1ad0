/* conv.c - the convolution kernel of conv.h, over NCHW batches:
 *   y = W ⋆ x + b,  x (N,C,H,W) -> y (N,O,Ho,Wo);  W (O, C/groups, kh, kw), b (O)
 *   Ho = (H + ph + pb − dh·(kh−1) − 1) / sh + 1   (likewise Wo)
 *
 * Three forward kernels, chosen per call (conv_plan_make):
 *
 * im2col + GEMM per group.  The K = (C/groups)·kh·kw input values under an
 * output pixel's window form its column, so y_g (O/groups, pixels) =
 * W_g (O/groups, K) · col (K, pixels).  The pixel axis is the GEMM's N and
 * is kept fat: big images go one at a time (split into pixel chunks only if
 * the column buffer would pass max_workspace) with the GEMM writing straight
 * into y; small images (7x7, 14x14) are laid side by side in one GEMM
 * (512 × 392 × 4608 instead of 512 × 49 × 4608, which runs at half speed)
 * and scattered into NCHW; a 1x1 stride-1 unpadded conv reads x in place.
 *
 * Tap-wise GEMMs (big images, long rows).  im2col writes kh·kw copies of the
 * input, which OpenBLAS then reads again to pack; at 64 output channels that
 * traffic costs 20-25% on top of the GEMM.  Instead the padded input is split
 * by stride phase once, after which every tap's column matrix is a shifted
 * view of the planes (computing w2 − wo junk columns per output row), and y
 * accumulates one GEMM per tap, or per run of taps sharing a shift (K = C
 * per tap), reading the planes in place.
 *
 * Depthwise (groups == C > 1): direct kernels of their own (depthwise.c).
 *
 * The JVP is the same linear map: the stacked [x; v] batch goes through the
 * same GEMMs (chunks cut across it as if it were one batch) and only the
 * first run->n images get the bias.  Backward (im2col): gW += gy_g · colᵀ
 * (col recomputed from the saved input), gcol = W_gᵀ · gy_g added back into
 * gx by col2im, gb += Σ gy.
 *
 * Threads: the copies between GEMMs (im2col, col2im, phase split, crop,
 * scatter) run on the calling thread, not under OpenMP.  OpenBLAS's pthread
 * pool busy-waits ~0.1 s after every call and libgomp's idle team spins after
 * every region, so short regions alternating with GEMMs put three or four
 * busy threads on two cores.  Measured at 2 threads: a parallel phase split
 * ran 14x slower than the serial one and the GEMMs after it 2-3x slower; a
 * parallel im2col gave conv/sgemm 0.41-0.47 against 0.61-0.65 serial.
 *
 * With many GEMM chunks (small images, big stacked batches) the batch is
 * instead split into one run of images per thread, each running the serial
 * kernel with single-threaded BLAS (see "splitting a batch" below).
 *
 * Workspaces (column buffer, phase planes, chunk output) are lent by the
 * pass's buffer pool and given back after the call, so consecutive layers
 * reuse the same warm pages (first touch is slow on these VMs).  Options
 * gemm_cols, max_workspace, algo ("auto", "im2col", "taps") and split
 * ("auto", "images", "gemm") tune the plan; tests use them to drive every
 * branch. */
#ifdef SR_REAL

/* Output columns [lo, hi) whose input column ow·sw + off lies in [0, w). */
static inline void SR_FN(valid_cols)(int64_t off, int64_t sw, int64_t w, int64_t wo, int64_t *lo,
                                     int64_t *hi)
{
    int64_t a = off >= 0 ? 0 : (-off + sw - 1) / sw;
    int64_t b = w - 1 - off < 0 ? 0 : (w - 1 - off) / sw + 1;
    *lo = a < wo ? a : wo;
    *hi = b < wo ? b : wo;
    if (*hi < *lo)
        *hi = *lo;
}

/* One input plane zero-padded into pad (ph + h + pb rows of pw + w + pr),
 * so the im2col copies below need no bounds checks: for small planes (7x7)
 * the checks and short zero runs cost more than the copying. */
static void SR_FN(pad_plane)(real *pad, const real *xp, const conv_geom *g)
{
    const int64_t wp = g->w + g->pw + g->pr, pw = g->pw;
    memset(pad, 0, (size_t)(g->ph * wp) * sizeof(real));
    for (int64_t h = 0; h < g->h; h++) {
        real *r = pad + (h + g->ph) * wp;
        for (int64_t k = 0; k < pw; k++)
            r[k] = 0;
        for (int64_t k = 0; k < g->pr; k++)
            r[pw + g->w + k] = 0;
        memcpy(r + pw, xp + h * g->w, (size_t)g->w * sizeof(real));
    }
    memset(pad + (g->h + g->ph) * wp, 0, (size_t)(g->pb * wp) * sizeof(real));
}

/* The kh·kw im2col rows of one padded plane (row (i, j) at dst + (i·kw + j)·ld)
 * for output pixels [p0, p0+np), which may start and end mid-row. */
static void SR_FN(im2col_plane)(real *dst, int64_t ld, const real *pad, const conv_geom *g, int64_t p0,
                                int64_t np)
{
    const int64_t wo = g->wo, sw = g->sw, wp = g->w + g->pw + g->pr, end = p0 + np;
    for (int64_t i = 0; i < g->kh; i++)
        for (int64_t j = 0; j < g->kw; j++) {
            real *d = dst + (i * g->kw + j) * ld;
            for (int64_t p = p0, oh = p0 / wo, a = p0 % wo; p < end; oh++, a = 0) {
                int64_t n = (a + (end - p) < wo ? a + (end - p) : wo) - a; /* pixels (oh, a..a+n) */
                real *restrict dr = d + (p - p0);
                const real *restrict sr = pad + (oh * g->sh + i * g->dh) * wp + j * g->dw + a * sw;
                if (sw == 1 && end - (p + n) >= 8) {
                    /* Not the block's last rows: copy whole blocks of 8; the
                     * overshoot (< 8) lands on the following rows, which are
                     * written next, and reads at most 8 past the row (the
                     * pad buffer has 8 spare).  Short 7..14-pixel rows. */
                    for (int64_t k = 0; k < n; k += 8)
                        memcpy(dr + k, sr + k, 8 * sizeof(real));
                } else if (sw == 1) {
                    CONV_SIMD
                    for (int64_t k = 0; k < n; k++)
                        dr[k] = sr[k];
                } else if (sw == 2) { /* a constant stride vectorises as shuffles */
                    CONV_SIMD
                    for (int64_t k = 0; k < n; k++)
                        dr[k] = sr[2 * k];
                } else {
                    CONV_SIMD
                    for (int64_t k = 0; k < n; k++)
                        dr[k] = sr[k * sw];
                }
                p += n;
            }
        }
}

/* The im2col rows of channels [c0, c0+nc) of group grp (a K chunk), images
 * [img0, img0+nimg), pixels [p0, p0+np): col (nc·kh·kw, nimg·np), row
 * ((c − c0)·kh + i)·kw + j, image b's pixels at column b·np. */
static void SR_FN(im2col)(real *col, const real *x, const conv_geom *g, int64_t grp, int64_t c0, int64_t nc,
                          int64_t img0, int64_t nimg, int64_t p0, int64_t np, real *pad)
{
    const int64_t ld = nimg * np, kk = g->kh * g->kw;
    for (int64_t b = 0; b < nimg; b++)
        for (int64_t c = 0; c < nc; c++) {
            SR_FN(pad_plane)(pad, x + ((img0 + b) * g->c + grp * g->cg + c0 + c) * g->h * g->w, g);
            SR_FN(im2col_plane)(col + c * kk * ld + b * np, ld, pad, g, p0, np);
        }
}

/* Adjoint of im2col: gx += col2im(col), plane by plane: the taps of channel
 * c are summed into the padded plane, whose interior is then added to gx. */
static void SR_FN(col2im)(real *gx, const real *col, const conv_geom *g, int64_t grp, int64_t c0, int64_t nc,
                          int64_t img0, int64_t nimg, int64_t p0, int64_t np, real *pad)
{
    const int64_t ld = nimg * np, wo = g->wo, sw = g->sw, end = p0 + np, wp = g->w + g->pw + g->pr;
    for (int64_t b = 0; b < nimg; b++)
        for (int64_t c = 0; c < nc; c++) {
            memset(pad, 0, (size_t)((g->h + g->ph + g->pb) * wp) * sizeof(real));
            for (int64_t i = 0; i < g->kh; i++)
                for (int64_t j = 0; j < g->kw; j++) {
                    const real *src = col + ((c * g->kh + i) * g->kw + j) * ld + b * np;
                    for (int64_t p = p0, oh = p0 / wo, a = p0 % wo; p < end; oh++, a = 0) {
                        int64_t n = (a + (end - p) < wo ? a + (end - p) : wo) - a;
                        const real *restrict s = src + (p - p0);
                        real *restrict gr = pad + (oh * g->sh + i * g->dh) * wp + j * g->dw + a * sw;
                        if (sw == 1) {
                            CONV_SIMD
                            for (int64_t k = 0; k < n; k++)
                                gr[k] += s[k];
                        } else {
                            CONV_SIMD
                            for (int64_t k = 0; k < n; k++)
                                gr[k * sw] += s[k];
                        }
                        p += n;
                    }
                }
            real *gp = gx + ((img0 + b) * g->c + grp * g->cg + c0 + c) * g->h * g->w;
            for (int64_t h = 0; h < g->h; h++) {
                real *restrict d = gp + h * g->w;
                const real *restrict s = pad + (h + g->ph) * wp + g->pw;
                CONV_SIMD
                for (int64_t w = 0; w < g->w; w++)
                    d[w] += s[w];
            }
        }
}

/* y rows [o][0, cols) at stride ld start at the bias b, or at 0 if b is
 * NULL (the GEMM then adds with beta = 1). */
static void SR_FN(fill_bias)(real *y, const real *b, int64_t rows, int64_t cols, int64_t ld)
{
    for (int64_t o = 0; o < rows; o++) {
        real *r = y + o * ld, v = b ? b[o] : 0;
        CONV_SIMD
        for (int64_t p = 0; p < cols; p++)
            r[p] = v;
    }
}

/* tmp (og, nimg·P) -> y images [b][o][P] (y at image 0, channel grp·og;
 * image stride ys), plus the bias on the first bias_imgs images. */
static void SR_FN(scatter)(real *y, const real *tmp, const real *b, int64_t og, int64_t nimg,
                           int64_t P, int64_t ys, int64_t bias_imgs)
{
    for (int64_t i = 0; i < nimg; i++)
        for (int64_t o = 0; o < og; o++) {
            real *d = y + i * ys + o * P;
            const real *s = tmp + (o * nimg + i) * P;
            real bv = b && i < bias_imgs ? b[o] : 0;
            CONV_SIMD
            for (int64_t p = 0; p < P; p++)
                d[p] = s[p] + bv;
        }
}

/* Inverse layout move for backward: gy images -> tmp (og, nimg·P). */
static void SR_FN(gather)(real *tmp, const real *gy, int64_t og, int64_t nimg, int64_t P, int64_t ys)
{
    for (int64_t i = 0; i < nimg; i++)
        for (int64_t o = 0; o < og; o++)
            memcpy(tmp + (o * nimg + i) * P, gy + i * ys + o * P, (size_t)P * sizeof(real));
}

/* C = A·B, or C += A·B with acc: gemm.c's product when the part runs on
 * one thread (gs, its scratch, given; A packed at Ap, ka columns), else
 * sr_gemm_blas on A (lda), threaded when the call is one part (gemm.c's
 * threaded form or OpenBLAS, whichever runs the products).  On a CPU with
 * 512-bit vectors gemm.c uses them, which the OpenBLAS kernel a pinned
 * OPENBLAS_CORETYPE selects may not (Zen 5: a ResNet-50 profile forward
 * took 29 ms instead of 43). */
static void SR_FN(conv_gemm)(int64_t M, int64_t N, int64_t K, const real *A, int64_t lda, const real *Ap,
                             int64_t ka, const real *B, int64_t ldb, real *C, int64_t ldc, const sr_gemm_runs *runs,
                             int acc, real *gs)
{
    if (gs)
        SR_FN(sr_gemm)(M, N, K, Ap, ka, B, ldb, C, ldc, runs, acc, gs);
    else
        SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1, A, (int)lda, B,
                (int)ldb, acc ? 1 : 0, C, (int)ldc);
}

/* Forward over a whole (possibly stacked) batch; bias on images < bias_rows.
 * With gs (gemm.c), wp holds the weights already packed (conv_pack_cb).
 * Each GEMM chunk (nb images, or cnt pixels of one) runs over K in chunks of
 * kc channels, so the column buffer stays cache-sized (~1.5 MB): im2col then
 * writes and OpenBLAS packs from L2 instead of DRAM, which for the 7x7 and
 * 14x14 layers halved the im2col time.  OpenBLAS blocks K itself (by a few
 * hundred), so accumulating K chunks of ≥ 256 rows costs the GEMM nothing. */
static int SR_FN(conv_fwd)(real *y, const real *x, const real *w, const real *bias, const conv_geom *g,
                           const conv_plan *pl, real *col, real *tmp, real *pad, real *wp, real *gs,
                           int64_t bias_rows, const sr_epilogue *ep)
{
    const int64_t P = g->P, K = g->K, og = g->og, ys = g->o * P, kk = g->kh * g->kw;
    const int64_t psz = sr_gemm_packed_size(og, K);
    for (int64_t img0 = 0; img0 < g->n; img0 += pl->nimg) {
        if (sr_interrupted())
            return -1;
        int64_t nb = g->n - img0 < pl->nimg ? g->n - img0 : pl->nimg;
        /* The GEMM writes into y: for one image, or for a 1x1 convolution
         * by gemm.c, which reads and writes the chunk's images in place
         * (runs); else into tmp, scattered after. */
        int direct = nb == 1 || (gs && pl->in_place);
        const sr_gemm_runs runs = {P, g->c * P, ys};
        for (int64_t p0 = 0; p0 < P; p0 += pl->np) {
            int64_t cnt = P - p0 < pl->np ? P - p0 : pl->np, cols = nb * cnt;
            for (int64_t grp = 0; grp < g->groups; grp++) {
                const real *wg = w + grp * og * K, *bg = bias ? bias + grp * og : NULL;
                int with_bias = direct && bg && img0 < bias_rows;
                real *C = direct ? y + img0 * ys + grp * og * P + p0 : tmp;
                int64_t ldc = direct ? P : cols;
                /* y starts at the bias (beta = 1 costs no more than beta =
                 * 0's zeroing pass); a chunk's tangent images at zero */
                for (int64_t i = 0; with_bias && i < nb; i++)
                    SR_FN(fill_bias)(C + i * ys, img0 + i < bias_rows ? bg : NULL, og, cnt, P);
                if (pl->in_place && direct) {
                    SR_FN(conv_gemm)(og, cols, K, wg, K, wp + grp * psz, K, x + (img0 * g->c + grp * g->cg) * P + p0,
                                     P, C, ldc, nb > 1 ? &runs : NULL, with_bias, gs);
                } else {
                    for (int64_t c0 = 0; c0 < g->cg; c0 += pl->kc) {
                        int64_t nc = g->cg - c0 < pl->kc ? g->cg - c0 : pl->kc;
                        SR_FN(im2col)(col, x, g, grp, c0, nc, img0, nb, p0, cnt, pad);
                        SR_FN(conv_gemm)(og, cols, nc * kk, wg + c0 * kk, K, wp + grp * psz + c0 * kk * GEMM_MR, K,
                                         col, cols, C, ldc, NULL, c0 || with_bias, gs);
                    }
                }
                if (!direct) {
                    int64_t bimgs = bias_rows - img0 < 0 ? 0 : bias_rows - img0;
                    SR_FN(scatter)(y + img0 * ys + grp * og * P, tmp, bg, og, nb, P, ys, bimgs);
                }
                /* The fused output map, while the block is still in cache. */
                if (ep && nb == 1)
                    SR_FN(sr_epilogue_rows)(C, C, og, cnt, P, P, grp * og, ep, img0 >= bias_rows);
                for (int64_t i = 0; ep && nb > 1 && i < nb; i++) {
                    real *yi = y + (img0 + i) * ys + grp * og * P;
                    SR_FN(sr_epilogue_rows)(yi, yi, og, P, P, P, grp * og, ep, img0 + i >= bias_rows);
                }
            }
        }
    }
    return 0;
}

/* Tap-wise path, phase split: the zero-padded image decimated by the
 * stride, xph[(a·sw + b)·C + c][r][q] = xpad[c][r·sh + a][q·sw + b], each
 * plane h2 x w2.  Tap (i, j) of output pixel (oh, ow) reads plane
 * (i·dh mod sh, j·dw mod sw) at (oh + i·dh div sh, ow + j·dw div sw), so
 * over the grid ho x w2 (w2 − wo junk columns per row) its column matrix is
 * a shifted view of the planes: the GEMM reads it in place, ldb = h2·w2. */
static void SR_FN(phase_split)(real *xph, const real *x, const conv_geom *g, const conv_plan *pl,
                               const sr_conv_taps *tp)
{
    const int64_t h2 = pl->h2, w2 = pl->w2, plane = h2 * w2, sw = g->sw;
    /* Channel outermost: its plane stays in L1 while all phases are cut.
     * Rows are short (7..58), so no memcpy/memset calls per row. */
    for (int64_t c = 0; c < g->c; c++)
        for (int64_t a = 0; a < g->sh; a++)
            for (int64_t b = 0; b < sw; b++) {
                int64_t lo, hi;
                SR_FN(valid_cols)(b - g->pw, sw, g->w, w2, &lo, &hi);
                real *d = xph + (tp->perm[a * sw + b] * g->c + c) * plane;
                const real *xc = x + c * g->h * g->w;
                const int64_t off = b - g->pw; /* input column of q = 0 */
                for (int64_t r = 0; r < h2; r++) {
                    real *restrict dr = d + r * w2;
                    int64_t ih = r * g->sh + a - g->ph;
                    if (ih < 0 || ih >= g->h) {
                        CONV_SIMD
                        for (int64_t q = 0; q < w2; q++)
                            dr[q] = 0;
                        continue;
                    }
                    const real *restrict xr = xc + ih * g->w;
                    for (int64_t q = 0; q < lo; q++)
                        dr[q] = 0;
                    if (sw == 1) {
                        CONV_SIMD
                        for (int64_t q = lo; q < hi; q++)
                            dr[q] = xr[q + off];
                    } else if (sw == 2) { /* a constant stride vectorises as shuffles */
                        CONV_SIMD
                        for (int64_t q = lo; q < hi; q++)
                            dr[q] = xr[2 * q + off];
                    } else {
                        CONV_SIMD
                        for (int64_t q = lo; q < hi; q++)
                            dr[q] = xr[q * sw + off];
                    }
                    for (int64_t q = hi; q < w2; q++)
                        dr[q] = 0;
                }
            }
    /* Junk columns of the last rows read a little past the last plane. */
    memset(xph + g->sh * sw * g->c * plane, 0, (size_t)pl->slack * sizeof(real));
}

/* Forward by accumulating GEMMs per image and group: y_g += W_g[:, :, taps] ·
 * shift(xph).  A GEMM covers one tap, or with groups == 1 a run of taps with
 * the same shift whose phase planes are adjacent (sr_conv_taps), K = m·C/groups:
 * a 3x3 stride-2 conv makes 4 GEMMs (K = 4C, 2C, 2C, C), a 16x16 stride-16
 * patch embedding one.  No im2col buffer: the only copies are the phase
 * split (input-sized) and the output crop. */
static int SR_FN(conv_fwd_taps)(real *y, const real *x, const real *w, const real *bias, const conv_geom *g,
                                const conv_plan *pl, const sr_conv_taps *tp, real *xph, real *wt, real *tmp,
                                real *wp, real *gs, int64_t bias_rows)
{
    const int64_t kk = g->kh * g->kw, og = g->og, cg = g->cg, w2 = pl->w2, Q = g->ho * w2;
    const int64_t plane = pl->h2 * w2, ogr = sr_gemm_packed_size(og, 1);
    /* wt[grp][gemm] = W_g[:, :, taps of the GEMM], (og, m·cg) row-major. */
    for (int64_t grp = 0; grp < g->groups; grp++)
        for (int e = 0; e < tp->ngemm; e++) {
            int64_t s0 = tp->start[e], m = tp->start[e + 1] - s0;
            real *A = wt + (grp * kk + s0) * og * cg;
            for (int64_t o = 0; o < og; o++)
                for (int64_t k = 0; k < m; k++)
                    for (int64_t c = 0; c < cg; c++)
                        A[(o * m + k) * cg + c] = w[((grp * og + o) * cg + c) * kk + tp->order[s0 + k]];
            if (gs)
                SR_FN(sr_gemm_pack_a)(wp + (grp * kk + s0) * ogr * cg, A, m * cg, 0, og, og, m * cg);
        }
    for (int64_t n = 0; n < g->n; n++) {
        if (sr_interrupted())
            return -1;
        SR_FN(phase_split)(xph, x + n * g->c * g->h * g->w, g, pl, tp);
        for (int64_t grp = 0; grp < g->groups; grp++)
            for (int e = 0; e < tp->ngemm; e++) {
                int64_t s0 = tp->start[e], m = tp->start[e + 1] - s0, t = tp->order[s0];
                int64_t ri = t / g->kw * g->dh, rj = t % g->kw * g->dw;
                int64_t pos = tp->perm[(ri % g->sh) * g->sw + rj % g->sw];
                const real *B = xph + (pos * g->c + grp * cg) * plane + (ri / g->sh) * w2 + rj / g->sw;
                SR_FN(conv_gemm)(og, Q, m * cg, wt + (grp * kk + s0) * og * cg, m * cg,
                                 wp + (grp * kk + s0) * ogr * cg, m * cg, B, plane, tmp + grp * og * Q, Q, NULL, e > 0,
                                 gs);
            }
        real *yn = y + n * g->o * g->P;
        for (int64_t o = 0; o < g->o; o++) {
            real bv = bias && n < bias_rows ? bias[o] : 0;
            for (int64_t oh = 0; oh < g->ho; oh++) {
                real *restrict d = yn + (o * g->ho + oh) * g->wo;
                const real *restrict s = tmp + o * Q + oh * w2;
                CONV_SIMD
                for (int64_t ow = 0; ow < g->wo; ow++)
                    d[ow] = s[ow] + bv;
            }
        }
    }
    return 0;
}

/* Backward: gx = col2im(W_gᵀ · gy_g) (written), gw += gy_g · colᵀ and gb += Σ gy
 * (accumulated; either may be NULL), chunked like the forward.  col holds
 * im2col(x) of a K chunk for the gw GEMM, then is overwritten by that
 * chunk's column gradient. */
static int SR_FN(conv_bwd)(real *gx, real *gw, real *gb, const real *gy, const real *x, const real *w,
                           const conv_geom *g, const conv_plan *pl, real *col, real *tmp, real *pad)
{
    const int64_t P = g->P, K = g->K, og = g->og, ys = g->o * P, kk = g->kh * g->kw;
    /* The in-place 1x1 path writes every gx element with beta = 0. */
    if (!(pl->in_place && pl->nimg == 1))
        memset(gx, 0, (size_t)(g->n * g->c * g->h * g->w) * sizeof(real));
    for (int64_t img0 = 0; img0 < g->n; img0 += pl->nimg) {
        if (sr_interrupted())
            return -1;
        int64_t nb = g->n - img0 < pl->nimg ? g->n - img0 : pl->nimg;
        for (int64_t p0 = 0; p0 < P; p0 += pl->np) {
            int64_t cnt = P - p0 < pl->np ? P - p0 : pl->np, cols = nb * cnt;
            for (int64_t grp = 0; grp < g->groups; grp++) {
                const real *wg = w + grp * og * K;
                const real *G = gy + img0 * ys + grp * og * P + p0;
                int64_t ldg = P;
                if (nb > 1) {
                    SR_FN(gather)(tmp, G, og, nb, P, ys);
                    G = tmp;
                    ldg = cols;
                }
                if (pl->in_place && nb == 1) {
                    const real *xg = x + (img0 * g->c + grp * g->cg) * P + p0;
                    if (gw)
                        SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasTrans, (int)og, (int)K, (int)cnt, 1, G,
                                (int)ldg, xg, (int)P, 1, gw + grp * og * K, (int)K);
                    SR_FN(sr_gemm_blas)(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)cnt, (int)og, 1, wg,
                            (int)K, G, (int)ldg, 0, gx + (img0 * g->c + grp * g->cg) * P + p0, (int)P);
                    continue;
                }
                for (int64_t c0 = 0; c0 < g->cg; c0 += pl->kc) {
                    int64_t nc = g->cg - c0 < pl->kc ? g->cg - c0 : pl->kc, kc = nc * kk;
                    if (gw) {
                        SR_FN(im2col)(col, x, g, grp, c0, nc, img0, nb, p0, cnt, pad);
                        SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasTrans, (int)og, (int)kc, (int)cols, 1, G,
                                (int)ldg, col, (int)cols, 1, gw + grp * og * K + c0 * kk, (int)K);
                    }
                    SR_FN(sr_gemm_blas)(CblasRowMajor, CblasTrans, CblasNoTrans, (int)kc, (int)cols, (int)og, 1,
                            wg + c0 * kk, (int)K, G, (int)ldg, 0, col, (int)cols);
                    SR_FN(col2im)(gx, col, g, grp, c0, nc, img0, nb, p0, cnt, pad);
                }
            }
        }
    }
    if (gb)
        SR_FN(sr_bias_grad)(gb, gy, g->n, g->o, P);
    return 0;
}

/* Reference: the definition, one output at a time, summing in double. */
static void SR_FN(conv_ref)(real *y, const real *x, const real *w, const real *b, const conv_geom *g)
{
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t o = 0; o < g->o; o++)
            for (int64_t oh = 0; oh < g->ho; oh++)
                for (int64_t ow = 0; ow < g->wo; ow++) {
                    double s = b ? b[o] : 0;
                    int64_t grp = o / g->og;
                    for (int64_t c = 0; c < g->cg; c++)
                        for (int64_t i = 0; i < g->kh; i++)
                            for (int64_t j = 0; j < g->kw; j++) {
                                int64_t ih = oh * g->sh - g->ph + i * g->dh;
                                int64_t iw = ow * g->sw - g->pw + j * g->dw;
                                if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w)
                                    continue;
                                s += (double)x[((n * g->c + grp * g->cg + c) * g->h + ih) * g->w + iw] *
                                     w[((o * g->cg + c) * g->kh + i) * g->kw + j];
                            }
                    y[((n * g->o + o) * g->ho + oh) * g->wo + ow] = (real)s;
                }
}

/* Reference backward into double accumulators gx, gw, gb (zeroed by the
 * caller): the same loops as conv_ref with every product's two partials. */
static void SR_FN(conv_ref_bwd)(double *gx, double *gw, double *gb, const real *gy, const real *x,
                                const real *w, const conv_geom *g)
{
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t o = 0; o < g->o; o++)
            for (int64_t oh = 0; oh < g->ho; oh++)
                for (int64_t ow = 0; ow < g->wo; ow++) {
                    double gv = gy[((n * g->o + o) * g->ho + oh) * g->wo + ow];
                    int64_t grp = o / g->og;
                    gb[o] += gv;
                    for (int64_t c = 0; c < g->cg; c++)
                        for (int64_t i = 0; i < g->kh; i++)
                            for (int64_t j = 0; j < g->kw; j++) {
                                int64_t ih = oh * g->sh - g->ph + i * g->dh;
                                int64_t iw = ow * g->sw - g->pw + j * g->dw;
                                if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w)
                                    continue;
                                int64_t xi = ((n * g->c + grp * g->cg + c) * g->h + ih) * g->w + iw;
                                int64_t wi = ((o * g->cg + c) * g->kh + i) * g->kw + j;
                                gx[xi] += gv * w[wi];
                                gw[wi] += gv * x[xi];
                            }
                }
}

#else /* generic part */

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/threads.h"
#include "kernels/conv.h"
#include "kernels/depthwise.h"
#include "kernels/epilogue.h"
#include "kernels/gemm.h"
#include "kernels/winograd.h"
#include "tensor/tensor_ops.h"

/* The build's -O2 vectorises only loops whose trip count it knows, so the
 * hot copy and axpy loops ask for SIMD explicitly (iterations independent). */
#define CONV_SIMD _Pragma("omp simd")
/* Below this many elements a loop is not worth waking the OpenMP team. */
#define CONV_OMP_MIN 32768
/* Column buffer target (bytes, fits L2 with room for OpenBLAS's packs) and
 * least K chunk (rows) of the im2col path. */
#define CONV_COL_CACHE ((size_t)3 << 19)
#define CONV_MIN_K 256
/* Tap-wise path: least output grid (ho·w2 columns) per thread, least mean
 * K per GEMM (a 7x7 stem over 3 channels makes K = 12 GEMMs: im2col's
 * K = 147 wins). */
#define CONV_TAP_COLS 192
/* Least input and output channels, and tiles per call, for Winograd under
 * algo = "auto" (see conv_winograd). */
#define CONV_WINO_CH 16
#define CONV_WINO_TILES 256
#define CONV_TAP_K 32

/* Sizes of one call. */
typedef struct {
    int64_t n, c, h, w;       /* input */
    int64_t o, ho, wo, P;     /* output channels, size, pixels per image */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int64_t pb, pr;           /* padding after the image (ph, pw: before) */
    int64_t cg, og, K;        /* per group: input, output channels; K = cg·kh·kw */
} conv_geom;

/* How the batch is cut: nimg images per GEMM (np == P then), or one image
 * in pixel chunks of np; K in chunks of kc channels. */
typedef struct {
    int in_place; /* 1x1, stride 1, no padding: x is its own column matrix */
    int64_t nimg, np;
    int64_t kc;   /* channels per K chunk of the column buffer */
    int taps;     /* forward by tap-wise GEMMs over phase-split planes */
    int64_t h2, w2, slack;
} conv_plan;

/* Workspace kinds: WS_COL (kc·kh·kw, nimg·np) column buffer, then its
 * gradient; taps: phase planes.  WS_TMP (O/groups, nimg·P) GEMM output /
 * gathered gy of a multi-image chunk.  WS_WT taps: weights regrouped per
 * tap.  WS_PAD im2col: one zero-padded input plane.  Forward on one
 * thread per part (gemm.c): WS_WP the weights packed, WS_GEMM the scratch. */
enum { WS_COL, WS_TMP, WS_WT, WS_PAD, WS_WP, WS_GEMM, WS_N };
_Static_assert(WS_N == SR_CONV_NWS, "sr_conv.ws holds one tensor per workspace kind");

#define SR_GENERIC_FILE "kernels/conv.c"
#include "base/generic.h"

static int conv_geometry(const sr_conv_cfg *c, const sr_tensor *x, conv_geom *g)
{
    if (x->ndim != 4)
        return sr_fail("conv2d: input %s must be 4D (N,C,H,W)", SR_SHAPE(x));
    if (x->shape[1] != c->cin)
        return sr_fail("conv2d: input %s has %lld channels, expected in_channels=%lld", SR_SHAPE(x),
                       (long long)x->shape[1], (long long)c->cin);
    g->n = x->shape[0];
    g->c = c->cin;
    g->h = x->shape[2];
    g->w = x->shape[3];
    g->o = c->cout;
    g->kh = c->kh, g->kw = c->kw, g->sh = c->sh, g->sw = c->sw, g->ph = c->ph, g->pw = c->pw;
    g->pb = c->pb, g->pr = c->pr;
    g->dh = c->dh, g->dw = c->dw, g->groups = c->groups;
    /* Options reach here unbounded (any integer a layer option holds), so
     * every extent is a checked count before anything is compared or
     * multiplied: padded plane, kernel span, output grid, K. */
    int64_t ekh, ekw, hp, wp, plane, pad;
    if (SR_COUNT(&pad, "conv2d: padding", c->ph) || SR_COUNT(&pad, "conv2d: padding", c->pw) ||
        SR_COUNT(&pad, "conv2d: padding", c->pb) || SR_COUNT(&pad, "conv2d: padding", c->pr) ||
        SR_COUNT(&ekh, "conv2d: kernel span", c->dh, c->kh) || SR_COUNT(&ekw, "conv2d: kernel span", c->dw, c->kw) ||
        SR_COUNT(&plane, "conv2d: padded input plane", g->h + c->ph + c->pb, g->w + c->pw + c->pr) ||
        SR_COUNT(&g->K, "conv2d: K = in_channels/groups x kernel", c->cin / c->groups, c->kh, c->kw))
        return -1;
    hp = c->ph + c->pb, wp = c->pw + c->pr; /* each pad <= 2^40: no overflow */
    ekh = ekh - c->dh + 1, ekw = ekw - c->dw + 1; /* dh·(kh−1) + 1 */
    if (g->h + hp < ekh || g->w + wp < ekw)
        return sr_fail("conv2d: kernel %lldx%lld (dilation %lldx%lld) spans %lldx%lld, larger than "
                       "the padded input %lldx%lld of %s (padding %lld,%lld before, %lld,%lld after)",
                       (long long)c->kh, (long long)c->kw, (long long)c->dh, (long long)c->dw,
                       (long long)ekh, (long long)ekw, (long long)(g->h + hp), (long long)(g->w + wp), SR_SHAPE(x),
                       (long long)c->ph, (long long)c->pw, (long long)c->pb, (long long)c->pr);
    g->ho = (g->h + hp - ekh) / c->sh + 1;
    g->wo = (g->w + wp - ekw) / c->sw + 1;
    g->cg = c->cin / c->groups;
    g->og = c->cout / c->groups;
    if (SR_COUNT(&g->P, "conv2d: output plane", g->ho, g->wo))
        return -1;
    /* BLAS takes int dimensions. */
    if (g->K > INT32_MAX || g->P > INT32_MAX / 64 || plane > INT32_MAX / 2)
        return sr_fail("conv2d: input %s is too large for one GEMM", SR_SHAPE(x));
    return 0;
}

/* The depthwise kernels (depthwise.c) pad both sides alike: an asymmetric
 * one takes the im2col path. */
static int is_depthwise(const conv_geom *g)
{
    return g->groups > 1 && g->groups == g->c && g->ph == g->pb && g->pw == g->pr;
}

static sr_dw_geom dw_geom(const conv_geom *g)
{
    return (sr_dw_geom){g->n, g->c, g->h, g->w, g->o, g->ho, g->wo, g->kh, g->kw,
                        g->sh, g->sw, g->ph, g->pw, g->dh, g->dw};
}

/* Tests set tiny gemm_cols / max_workspace and algo to drive every branch.
 * fwd: the forward may take the tap-wise path (backward always im2col). */
static void conv_plan_make(const sr_conv_cfg *c, const sr_conv_taps *tp, const conv_geom *g, size_t esize, int fwd,
                           conv_plan *pl)
{
    pl->in_place = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->pb == 0 &&
                   g->pr == 0;
    pl->h2 = (g->h + g->ph + g->pb + g->sh - 1) / g->sh;
    pl->w2 = (g->w + g->pw + g->pr + g->sw - 1) / g->sw;
    pl->slack = (g->kw - 1) * g->dw / g->sw;
    /* Tap-wise pays for w2 − wo junk columns per row and one GEMM per tap
     * group and image; worth it when rows are long and one image makes a
     * wide enough GEMM, wider with more threads (OpenBLAS splits the pixel
     * axis).  Measured on ResNet-18's 3x3 convs: faster at 56x56 and 28x28
     * (and 14x14 on 1 thread), slower at 7x7 outputs. */
    int64_t q = g->ho * pl->w2;
    pl->taps = fwd && !pl->in_place &&
               (c->algo == SR_CONV_TAPS ||
                (c->algo == SR_CONV_AUTO && g->kh * g->kw > 1 && (pl->w2 - g->wo) * 100 <= 15 * g->wo &&
                 q >= CONV_TAP_COLS * sr_threads_get() && g->K >= CONV_TAP_K * tp->ngemm));
    /* Columns per GEMM: one image, or enough small ones for gemm_cols,
     * balanced (8 images as 4 + 4, not 6 + 2 with a skinny last GEMM). */
    const int64_t kk = g->kh * g->kw;
    pl->nimg = 1;
    pl->np = g->P;
    if (g->P < c->gemm_cols && g->n > 1) {
        int64_t want = (c->gemm_cols + g->P - 1) / g->P;
        pl->nimg = want < g->n ? want : g->n;
        int64_t chunks = (g->n + pl->nimg - 1) / pl->nimg;
        pl->nimg = (g->n + chunks - 1) / chunks;
    }
    /* K chunk: a cache-sized column buffer, but at least CONV_MIN_K rows
     * so each GEMM still has a deep K; then the hard max_workspace bound,
     * cutting columns when even one channel's rows do not fit.  (A hostile
     * geometry makes the channel's rows overflow: then they are simply
     * "too big", and the column chunking takes over.) */
    int64_t chan_elems;
    size_t chan = SR_COUNT(&chan_elems, "conv2d", kk, pl->nimg, pl->np) ? SIZE_MAX / 2
                                                                          : (size_t)chan_elems * esize,
           cache = CONV_COL_CACHE;
    if ((size_t)c->max_workspace < cache)
        cache = (size_t)c->max_workspace;
    int64_t kc = (int64_t)(cache / chan), kmin = (CONV_MIN_K + kk - 1) / kk;
    if (kc < kmin)
        kc = kmin;
    if (kc > g->cg)
        kc = g->cg;
    if ((size_t)kc > (size_t)c->max_workspace / chan)
        kc = (int64_t)((size_t)c->max_workspace / chan);
    pl->kc = kc < 1 ? 1 : kc;
    if (chan > (size_t)c->max_workspace && !pl->in_place) {
        /* One image at a time, in equal pixel chunks rounded to 16 columns. */
        int64_t max_cols = (int64_t)((size_t)c->max_workspace / esize / (size_t)kk);
        if (max_cols < 16)
            max_cols = 16;
        pl->nimg = 1;
        if (g->P > max_cols) {
            int64_t chunks = (g->P + max_cols - 1) / max_cols;
            pl->np = ((g->P + chunks - 1) / chunks + 15) / 16 * 16;
        }
    }
    if (pl->nimg * pl->np > INT32_MAX / 2) /* BLAS dimensions are int */
        pl->np = INT32_MAX / 2 / pl->nimg;
}


/* Workspace sizes of one kernel call (elements; 0: not needed); counted
 * with checks, since a hostile geometry (a huge padding or kernel with a
 * tiny input) makes products the tensors themselves never hold. */
static int conv_ws_sizes(const conv_geom *g, const conv_plan *pl, int64_t sz[WS_N])
{
    for (int i = 0; i < WS_N; i++)
        sz[i] = 0;
    if (pl->taps) {
        int64_t planes; /* phase planes */
        if (SR_COUNT(&planes, "conv2d: tap-wise phase planes", g->sh, g->sw, g->c, pl->h2, pl->w2) ||
            SR_COUNT(&sz[WS_TMP], "conv2d: tap-wise output", g->o, g->ho, pl->w2) ||
            SR_COUNT(&sz[WS_WT], "conv2d: tap-wise weights", g->o, g->cg, g->kh, g->kw))
            return -1;
        sz[WS_COL] = planes + pl->slack;
        return 0;
    }
    if (!(pl->in_place && pl->nimg == 1)) {
        if (SR_COUNT(&sz[WS_COL], "conv2d: column workspace", pl->kc, g->kh, g->kw, pl->nimg, pl->np) ||
            SR_COUNT(&sz[WS_PAD], "conv2d: padded plane", g->h + g->ph + g->pb, g->w + g->pw + g->pr))
            return -1;
        sz[WS_PAD] += 8;
    }
    if (pl->nimg > 1 && SR_COUNT(&sz[WS_TMP], "conv2d: GEMM output workspace", g->og, pl->nimg, g->P))
        return -1;
    return 0;
}

/* nparts copies of each workspace (one of those in the mask `shared`),
 * lent by the pass's pool when there is one (conv_workspace_done gives
 * them back). */
static int conv_workspace(sr_conv *im, sr_pool *pool, sr_dtype dt, int nparts, const int64_t sz[WS_N],
                          unsigned shared)
{
    for (int i = 0; i < WS_N; i++) {
        int64_t n;
        if (SR_COUNT(&n, "conv2d: workspace", sz[i], shared >> i & 1 ? 1 : nparts) ||
            (n && sr_pool_ensure(pool, &im->ws[i], dt, 1, &n)))
            return -1;
    }
    return 0;
}

/* Element `i` of an array of `es`-byte elements at base. */
static void *conv_at(const void *base, int64_t i, size_t es) { return (char *)base + (size_t)i * es; }

/* Workspace i of part `part` (NULL when not needed). */
static void *conv_ws(sr_conv *im, int i, int part, const int64_t sz[WS_N])
{
    const sr_tensor *t = &im->ws[i];
    return sz[i] ? conv_at(sr_data(t), part * sz[i], sr_dtype_size(t->dtype)) : NULL;
}

/* Scratch lives only within a call: with a pool, the next layer reuses it
 * (53 convolutions of ResNet-50 would otherwise each keep their own). */
static int conv_workspace_done(sr_conv *im, sr_pool *pool, int rc)
{
    if (pool)
        for (int i = 0; i < WS_N; i++)
            sr_pool_put(pool, &im->ws[i]);
    return rc;
}

/* --- splitting a batch across threads --------------------------------
 * With several threads there are two ways to run a batch: one kernel call
 * whose GEMMs sr_gemm_blas threads (copies such as im2col then run on one core
 * between them), or each thread running the serial kernel on its own run of
 * images with single-threaded BLAS and its own workspaces.  The second keeps
 * both cores busy and wins when there are many GEMM chunks: small images and
 * few channels (small_resnet training got 1.08x from its second thread the
 * first way), or the profile engine's batches of hundreds of rows.  Each
 * part is planned anew for its own images, so only the split of images can
 * be uneven: with at least 8 images per thread it is at most one in 8 (at
 * 7x7, 64 channels, batch 128 the whole batch was 7 chunks: OpenBLAS-
 * threaded, its idle worker spinning in sched_yield took 8% of the
 * small_resnet training step's CPU time).  One big image per chunk splits
 * well inside OpenBLAS, and a few chunks that do not divide evenly would
 * leave a thread idle, so those keep the first way.  A forward whose images
 * divide evenly among the threads is split too, whatever its chunks: one
 * threaded product leaves its im2col and scatter on one core (ResNet-18's
 * 7x7 layers at batch 8 are one chunk of 8 images: its forward went from 68
 * to 78 img/s on a Zen 5). */
#define CONV_MAX_PARTS 64

typedef struct {
    conv_geom g;       /* images [lo, lo + g.n) of the batch */
    conv_plan pl;
    int64_t lo;
} conv_part;

/* How many parts to run (1: one call, BLAS-threaded), filled into parts;
 * sz gets the largest workspace sizes of any part.  -1 (error set) when a
 * workspace size is out of range. */
static int conv_split(const sr_conv *im, const conv_geom *g, size_t es, int fwd, conv_part *parts,
                      int64_t sz[WS_N])
{
    conv_plan whole;
    conv_plan_make(&im->cfg, &im->tp, g, es, fwd, &whole);
    int T = sr_threads_get();
    int64_t chunks = (g->n + whole.nimg - 1) / whole.nimg;
    int even = chunks % T == 0 || (fwd && g->n % T == 0);
    int split = im->cfg.split == SR_CONV_SPLIT_IMAGES ? g->n > 1
              : im->cfg.split == SR_CONV_SPLIT_GEMM  ? 0
                                                  : T > 1 && (even || chunks >= 8 * T || g->n >= 8 * T);
    if (split && T < 2)
        T = 2; /* forced: tests drive this path on one thread too */
    if (T > g->n)
        T = (int)g->n;
    if (T > CONV_MAX_PARTS)
        T = CONV_MAX_PARTS;
    if (!split)
        T = 1;
    for (int i = 0; i < WS_N; i++)
        sz[i] = 0;
    for (int t = 0; t < T; t++) {
        conv_part *p = &parts[t];
        p->lo = g->n * t / T;
        p->g = *g;
        p->g.n = g->n * (t + 1) / T - p->lo;
        if (T == 1)
            p->pl = whole;
        else
            conv_plan_make(&im->cfg, &im->tp, &p->g, es, fwd, &p->pl);
        int64_t s[WS_N];
        if (conv_ws_sizes(&p->g, &p->pl, s))
            return -1;
        if (fwd && sr_gemm_serial(T, sr_threads_get())) {
            s[WS_WP] = g->groups * sr_gemm_packed_size(g->og, g->K);
            s[WS_GEMM] = sr_gemm_scratch_size();
        }
        for (int i = 0; i < WS_N; i++)
            sz[i] = s[i] > sz[i] ? s[i] : sz[i];
    }
    return T;
}

/* One kernel call's arguments, shared by the parts (sr_threads_parts):
 * part t runs images [parts[t].lo, ...) with workspace copy t. */
typedef struct {
    sr_conv *im;
    const conv_geom *g;
    const conv_part *parts;
    const int64_t *sz;
    sr_dtype dt;
    const void *x, *w, *b, *gy;
    void *y, *gx, *gw, *gb;
    void *acc;              /* backward: parts after the first sum gw, gb here */
    int64_t bias_rows, nw;  /* nw: weight elements (acc stride nw + O) */
    int nparts;
    const sr_epilogue *ep;  /* forward, JVP: fused output map, or NULL */
} conv_call;

/* Part t packs its share of whole panels of every group's weights for
 * gemm.c, into the one copy all parts read: packing them in every part, as
 * the tap-wise path still does, had each thread pack all of ResNet-50's
 * weights per forward (2% of a profile forward at 51 rows). */
static int conv_pack_cb(void *ctx, int t)
{
    const conv_call *c = ctx;
    const conv_geom *g = c->g;
    const int64_t psz = sr_gemm_packed_size(g->og, g->K);
    const size_t es = sr_dtype_size(c->dt);
    int64_t r0, r1;
    sr_gemm_panel_share(g->og, t, c->nparts, &r0, &r1);
    void *wp = conv_ws(c->im, WS_WP, 0, c->sz);
    for (int64_t grp = 0; grp < g->groups && r0 < r1; grp++)
        SR_DISPATCH(c->dt, sr_gemm_pack_a, conv_at(wp, grp * psz, es), conv_at(c->w, grp * g->og * g->K, es), g->K,
                    r0, r1, g->og, g->K);
    return 0;
}

static int conv_fwd_cb(void *ctx, int t)
{
    const conv_call *c = ctx;
    const conv_part *p = &c->parts[t];
    const conv_geom *g = c->g;
    const size_t es = sr_dtype_size(c->dt);
    sr_conv *im = c->im;
    void *y = conv_at(c->y, p->lo * g->o * g->P, es);
    const void *x = conv_at(c->x, p->lo * g->c * g->h * g->w, es);
    if (p->pl.taps) {
        int rc = SR_DISPATCH_RET(c->dt, conv_fwd_taps, y, x, c->w, c->b, &p->g, &p->pl, &im->tp,
                                 conv_ws(im, WS_COL, t, c->sz), conv_ws(im, WS_WT, t, c->sz),
                                 conv_ws(im, WS_TMP, t, c->sz), conv_ws(im, WS_WP, t, c->sz),
                                 conv_ws(im, WS_GEMM, t, c->sz), c->bias_rows - p->lo);
        /* Tap-wise GEMMs accumulate over the whole part: map it afterwards. */
        if (!rc && c->ep)
            sr_epilogue_apply(c->dt, y, y, p->g.n, c->bias_rows - p->lo, g->o, g->P, c->ep);
        return rc;
    }
    return SR_DISPATCH_RET(c->dt, conv_fwd, y, x, c->w, c->b, &p->g, &p->pl, conv_ws(im, WS_COL, t, c->sz),
                           conv_ws(im, WS_TMP, t, c->sz), conv_ws(im, WS_PAD, t, c->sz), conv_ws(im, WS_WP, 0, c->sz),
                           conv_ws(im, WS_GEMM, t, c->sz), c->bias_rows - p->lo, c->ep);
}

static int conv_bwd_cb(void *ctx, int t)
{
    const conv_call *c = ctx;
    const conv_part *p = &c->parts[t];
    const conv_geom *g = c->g;
    const size_t es = sr_dtype_size(c->dt);
    const int64_t stride = c->nw + g->o;
    sr_conv *im = c->im;
    void *gw = c->gw && t ? conv_at(c->acc, (t - 1) * stride, es) : c->gw;
    void *gb = c->gb && t ? conv_at(c->acc, (t - 1) * stride + c->nw, es) : c->gb;
    return SR_DISPATCH_RET(c->dt, conv_bwd, conv_at(c->gx, p->lo * g->c * g->h * g->w, es), gw, gb,
                           conv_at(c->gy, p->lo * g->o * g->P, es), conv_at(c->x, p->lo * g->c * g->h * g->w, es),
                           c->w, &p->g, &p->pl, conv_ws(im, WS_COL, t, c->sz), conv_ws(im, WS_TMP, t, c->sz),
                           conv_ws(im, WS_PAD, t, c->sz));
}

/* Winograd F(2x2, 3x3) (winograd.c) takes 3x3 stride-1 dense convolutions:
 * 2.25x fewer multiply-adds, but under algo = "auto" only where that shows.
 * With few channels its 16 GEMMs have a short K (= C) and the transforms,
 * linear in C + O, weigh more; with few tiles the GEMMs are narrow and the
 * weight gradient's K (= tiles) short; an odd output wastes a quarter of
 * the last tile row and column (7x7: 64 outputs computed for 49), which
 * many tiles pay back.  Against im2col it won from 16 channels up on large
 * planes and, at 7x7 with 512 channels, lost below about 256 tiles per
 * call and won above: hence CONV_WINO_CH and CONV_WINO_TILES.
 * algo = "winograd" takes it wherever it applies. */
static int conv_winograd(const sr_conv_cfg *c, const conv_geom *g, sr_wino_geom *wg, sr_wino_plan *wp)
{
    if (c->kh != 3 || c->kw != 3 || c->sh != 1 || c->sw != 1 || c->dh != 1 || c->dw != 1 || c->groups != 1 ||
        c->ph > 2 || c->pw > 2 || c->pb != c->ph || c->pr != c->pw)
        return 0;
    int64_t th = (g->ho + 1) / 2, tw = (g->wo + 1) / 2, tiles = g->n * th * tw, used = 100 * g->P;
    int worth = tiles >= CONV_WINO_TILES && used >= 85 * 4 * th * tw;
    worth |= tiles >= 2 * CONV_WINO_TILES && used >= 75 * 4 * th * tw;
    if (c->algo != SR_CONV_WINOGRAD &&
        !(c->algo == SR_CONV_AUTO && g->c >= CONV_WINO_CH && g->o >= CONV_WINO_CH && worth))
        return 0;
    sr_wino_geom_make(wg, g->n, g->c, g->h, g->w, g->o, g->ph, g->pw);
    wp->max_workspace = c->max_workspace;
    wp->split = c->split == SR_CONV_SPLIT_IMAGES ? 1 : c->split == SR_CONV_SPLIT_GEMM ? 2 : 0;
    return 1;
}

/* After a stacked JVP with an output map: the ReLU's JVP needs the primal
 * rows' pre-activations, so it is one pass over the tangents at the end,
 * then the primal rows' clip (sr_epilogue_jvp_mask). */
static int conv_mapped_jvp(sr_tensor *y, const sr_tensor *x, int64_t primal_rows, const sr_epilogue *ep, int rc)
{
    if (!rc && ep && primal_rows < x->shape[0])
        sr_epilogue_jvp_mask(x->dtype, sr_data(y), primal_rows, (x->shape[0] - primal_rows) / primal_rows,
                             sr_rowsize(y), ep);
    return rc;
}

int sr_conv_forward(sr_conv *im, sr_tensor *y, const sr_tensor *x, const sr_tensor *w, const sr_tensor *bias,
                    int64_t bias_rows, const sr_epilogue *ep, sr_pool *pool)
{
    conv_geom g;
    if (conv_geometry(&im->cfg, x, &g))
        return -1;
    if (w->ndim != 4 || w->dtype != x->dtype || w->shape[0] != g.o || w->shape[1] != g.cg || w->shape[2] != g.kh ||
        w->shape[3] != g.kw || (bias && (bias->dtype != x->dtype || sr_numel(bias) != g.o)))
        return sr_fail("conv2d: weight %s or bias does not fit %lld -> %lld channels, kernel %lldx%lld",
                       SR_SHAPE(w), (long long)g.c, (long long)g.o, (long long)g.kh, (long long)g.kw);
    if (y->ndim != 4 || y->dtype != x->dtype || y->shape[0] != g.n || y->shape[1] != g.o || y->shape[2] != g.ho ||
        y->shape[3] != g.wo)
        return sr_fail("conv2d: output %s does not fit input %s", SR_SHAPE(y), SR_SHAPE(x));
    void *b = bias ? sr_data(bias) : NULL;
    if (sr_numel(y) == 0)
        return 0;
    if (ep && ep->C && ep->C != g.o)
        return sr_fail("conv2d: fused output map is for %lld channels, output %s has %lld", (long long)ep->C,
                       SR_SHAPE(y), (long long)g.o);
    sr_epilogue with_base;
    if (ep && ep->add) {
        if (!sr_same_shape(ep->add, y) || ep->add->dtype != y->dtype)
            return sr_fail("residual: branch outputs %s and %s differ in shape", SR_SHAPE(y),
                           SR_SHAPE(ep->add));
        with_base = *ep;
        with_base.base = sr_data(y);
        ep = &with_base;
    }
    /* A stacked JVP's ReLU needs the primal rows before the clip (its rule
     * at exactly 0): the blocks are mapped without it, and
     * conv_mapped_jvp clips them once the tangents are done. */
    sr_epilogue unclipped;
    const sr_epilogue *blk = ep;
    if (ep && ep->relu && bias_rows < g.n) {
        unclipped = *ep;
        unclipped.relu = 0;
        blk = &unclipped;
    }
    int rc;
    if (is_depthwise(&g)) {
        sr_dw_geom dg = dw_geom(&g);
        rc = sr_dw_forward(x->dtype, sr_data(y), sr_data(x), sr_data(w), b, &dg, bias_rows);
        if (!rc && ep)
            sr_epilogue_apply(x->dtype, sr_data(y), sr_data(y), g.n, bias_rows, g.o, g.P, blk);
        return conv_mapped_jvp(y, x, bias_rows, ep, rc);
    }
    sr_wino_geom wg;
    sr_wino_plan wp;
    if (conv_winograd(&im->cfg, &g, &wg, &wp))
        return conv_mapped_jvp(y, x, bias_rows, ep,
                               sr_wino_forward(x->dtype, sr_data(y), sr_data(x),
                                               sr_data(w), b, bias_rows, blk, &wg, &wp, pool));
    conv_part parts[CONV_MAX_PARTS];
    int64_t sz[WS_N];
    const size_t es = sr_dtype_size(x->dtype);
    int T = conv_split(im, &g, es, 1, parts, sz);
    if (T < 0)
        return -1;
    int shared_wp = sz[WS_WP] && !parts[0].pl.taps; /* else each tap-wise part packs its own */
    if (conv_workspace(im, pool, x->dtype, T, sz, shared_wp ? 1u << WS_WP : 0))
        return -1;
    conv_call call = {.im = im, .g = &g, .parts = parts, .sz = sz, .dt = x->dtype, .x = sr_data(x),
                      .w = sr_data(w), .b = b, .y = sr_data(y), .bias_rows = bias_rows,
                      .ep = blk, .nparts = T};
    rc = shared_wp ? sr_threads_parts(T, conv_pack_cb, &call) : 0;
    if (!rc)
        rc = sr_threads_parts(T, conv_fwd_cb, &call);
    rc = conv_workspace_done(im, pool, rc);
    return conv_mapped_jvp(y, x, bias_rows, ep, rc);
}


int sr_conv_backward(sr_conv *im, sr_tensor *gx, void *gw, void *gb, const sr_tensor *gy, const sr_tensor *x,
                     const sr_tensor *w, sr_pool *pool)
{
    conv_geom g;
    sr_wino_geom wg;
    sr_wino_plan wp;
    if (conv_geometry(&im->cfg, x, &g))
        return -1;
    if (!sr_same_shape(gx, x) || gx->dtype != x->dtype || gy->ndim != 4 || gy->dtype != x->dtype ||
        gy->shape[0] != g.n || gy->shape[1] != g.o || gy->shape[2] != g.ho || gy->shape[3] != g.wo ||
        sr_numel(w) != g.o * g.K)
        return sr_fail("conv2d backward: gradient %s, input gradient %s or weight %s does not fit input %s",
                       SR_SHAPE(gy), SR_SHAPE(gx), SR_SHAPE(w), SR_SHAPE(x));
    if (sr_numel(gy) == 0) {
        memset(sr_data(gx), 0, (size_t)sr_numel(x) * sr_dtype_size(x->dtype));
    } else if (is_depthwise(&g)) {
        sr_dw_geom dg = dw_geom(&g);
        if (sr_dw_backward(x->dtype, sr_data(gx), gw, gb, sr_data(gy), sr_data(x), sr_data(w), &dg))
            return -1;
    } else if (conv_winograd(&im->cfg, &g, &wg, &wp)) {
        if (sr_wino_backward(x->dtype, sr_data(gx), gw, gb, sr_data(gy), sr_data(x), sr_data(w),
                             &wg, &wp, pool))
            return -1;
    } else {
        conv_part parts[CONV_MAX_PARTS];
        int64_t sz[WS_N];
        const size_t es = sr_dtype_size(x->dtype);
        int T = conv_split(im, &g, es, 0, parts, sz), rc;
        if (T < 0)
            return -1;
        /* Parts after the first accumulate parameter gradients into zeroed
         * scratch of their own, summed into gw and gb afterwards. */
        const int64_t nw = sr_numel(w), stride = nw + g.o;
        sr_tensor acc = SR_TENSOR_INIT;
        int64_t nacc = (T - 1) * stride;
        if (conv_workspace(im, pool, x->dtype, T, sz, 0) ||
            (gw && T > 1 && sr_pool_ensure(pool, &acc, x->dtype, 1, &nacc)))
            return conv_workspace_done(im, pool, -1);
        if (gw && T > 1)
            memset(sr_data(&acc), 0, (size_t)nacc * es);
        conv_call call = {.im = im, .g = &g, .parts = parts, .sz = sz, .dt = x->dtype, .x = sr_data(x),
                          .w = sr_data(w), .gy = sr_data(gy), .gx = sr_data(gx), .gw = gw, .gb = gb,
                          .acc = sr_data(&acc), .nw = nw};
        rc = sr_threads_parts(T, conv_bwd_cb, &call);
        if (!rc && gw)
            for (int t = 1; t < T; t++) {
                sr_add_into(x->dtype, gw, conv_at(call.acc, (t - 1) * stride, es), nw);
                if (gb)
                    sr_add_into(x->dtype, gb, conv_at(call.acc, (t - 1) * stride + nw, es), g.o);
            }
        sr_pool_put(pool, &acc);
        if (conv_workspace_done(im, pool, rc))
            return -1;
    }
    return 0;
}


/* Lay the taps out for a phase order perm: sort by (shift, block), then a
 * GEMM continues while the shift is the same and the block is the next one
 * (only with groups == 1: otherwise a group's channels are not contiguous
 * across blocks).  Returns the GEMM count. */
static int taps_layout(const sr_conv_cfg *c, const int *perm, int *order, int *start)
{
    int kk = (int)(c->kh * c->kw);
    int64_t *key = malloc(2 * (size_t)kk * sizeof(int64_t)), *blk = key + kk;
    if (!key)
        return -1;
    for (int t = 0; t < kk; t++) {
        int64_t ri = t / c->kw * c->dh, rj = t % c->kw * c->dw;
        key[t] = (ri / c->sh) * (c->kw * c->dw + 1) + rj / c->sw;
        blk[t] = perm[(ri % c->sh) * c->sw + rj % c->sw];
        order[t] = t;
    }
    for (int a = 1; a < kk; a++) /* insertion sort: kk is small */
        for (int b = a; b > 0; b--) {
            int u = order[b - 1], v = order[b];
            if (key[u] < key[v] || (key[u] == key[v] && blk[u] <= blk[v]))
                break;
            order[b - 1] = v, order[b] = u;
        }
    int n = 0;
    for (int t = 0; t < kk; t++) {
        int u = t ? order[t - 1] : 0, v = order[t];
        if (!t || c->groups != 1 || key[u] != key[v] || blk[v] != blk[u] + 1)
            start[n++] = t;
    }
    start[n] = kk;
    free(key);
    return n;
}

/* Next permutation in lexicographic order; 0 after the last. */
static int next_perm(int *p, int n)
{
    int i = n - 2;
    while (i >= 0 && p[i] >= p[i + 1])
        i--;
    if (i < 0)
        return 0;
    int j = n - 1;
    while (p[j] <= p[i])
        j--;
    int t = p[i];
    p[i] = p[j], p[j] = t;
    for (int a = i + 1, b = n - 1; a < b; a++, b--)
        t = p[a], p[a] = p[b], p[b] = t;
    return 1;
}

/* Choose the phase order with the fewest GEMMs (all orders up to 4 phases,
 * e.g. stride 2; the natural one beyond). */
static int taps_build(sr_conv_taps *tp, const sr_conv_cfg *c)
{
    int kk = (int)(c->kh * c->kw), np = (int)(c->sh * c->sw);
    tp->perm = malloc((size_t)np * sizeof(int));
    tp->order = malloc((size_t)kk * sizeof(int));
    tp->start = malloc((size_t)(kk + 1) * sizeof(int));
    int *p = malloc((size_t)np * sizeof(int));
    if (!tp->perm || !tp->order || !tp->start || !p) {
        free(p);
        return sr_fail("conv2d: out of memory");
    }
    for (int i = 0; i < np; i++)
        p[i] = tp->perm[i] = i;
    tp->ngemm = taps_layout(c, tp->perm, tp->order, tp->start);
    while (tp->ngemm > 0 && np <= 4 && c->groups == 1 && next_perm(p, np)) {
        int n = taps_layout(c, p, tp->order, tp->start);
        if (n > 0 && n < tp->ngemm) {
            tp->ngemm = n;
            memcpy(tp->perm, p, (size_t)np * sizeof(int));
        }
    }
    free(p);
    if (tp->ngemm <= 0 || taps_layout(c, tp->perm, tp->order, tp->start) <= 0)
        return sr_fail("conv2d: out of memory");
    return 0;
}

int sr_conv_init(sr_conv *c, const sr_conv_cfg *cfg)
{
    memset(c, 0, sizeof *c);
    if (cfg->cin < 1 || cfg->cout < 1 || cfg->groups < 1 || cfg->kh < 1 || cfg->kw < 1 || cfg->sh < 1 ||
        cfg->sw < 1 || cfg->dh < 1 || cfg->dw < 1 || cfg->ph < 0 || cfg->pw < 0 || cfg->pb < 0 || cfg->pr < 0 ||
        cfg->gemm_cols < 1 || cfg->max_workspace < 1)
        return sr_fail("conv2d: bad configuration (channels %lld -> %lld, kernel %lldx%lld, stride %lldx%lld, "
                       "padding %lld,%lld before and %lld,%lld after, dilation %lldx%lld, groups %lld)",
                       (long long)cfg->cin, (long long)cfg->cout, (long long)cfg->kh, (long long)cfg->kw,
                       (long long)cfg->sh, (long long)cfg->sw, (long long)cfg->ph, (long long)cfg->pw,
                       (long long)cfg->pb, (long long)cfg->pr, (long long)cfg->dh, (long long)cfg->dw,
                       (long long)cfg->groups);
    if (cfg->cin % cfg->groups || cfg->cout % cfg->groups)
        return sr_fail("conv2d: groups=%lld must divide in_channels=%lld and out_channels=%lld",
                       (long long)cfg->groups, (long long)cfg->cin, (long long)cfg->cout);
    /* The tap layout indexes taps and stride phases with ints and forms
     * (span / stride) x span products: a dilated kernel spanning more than
     * 2^31 pixels fits no input the GEMMs can take (conv_geometry), so it
     * is refused here, before any of those products. */
    int64_t taps, phases, span_h, span_w;
    if (SR_COUNT(&taps, "conv2d: kernel taps", cfg->kh, cfg->kw) ||
        SR_COUNT(&phases, "conv2d: stride phases", cfg->sh, cfg->sw) ||
        SR_COUNT(&span_h, "conv2d: kernel span", cfg->kh, cfg->dh) ||
        SR_COUNT(&span_w, "conv2d: kernel span", cfg->kw, cfg->dw))
        return -1;
    if (taps > INT32_MAX / 4 || phases > INT32_MAX / 4 || span_h > INT32_MAX || span_w > INT32_MAX)
        return sr_fail("conv2d: kernel %lldx%lld, stride %lldx%lld, dilation %lldx%lld: too large for any input",
                       (long long)cfg->kh, (long long)cfg->kw, (long long)cfg->sh, (long long)cfg->sw,
                       (long long)cfg->dh, (long long)cfg->dw);
    c->cfg = *cfg;
    for (int i = 0; i < WS_N; i++)
        c->ws[i] = (sr_tensor)SR_TENSOR_INIT;
    if (taps_build(&c->tp, cfg)) {
        sr_conv_free(c);
        return -1;
    }
    return 0;
}

void sr_conv_free(sr_conv *c)
{
    for (int i = 0; i < WS_N; i++)
        sr_tensor_free(&c->ws[i]);
    free(c->tp.perm);
    free(c->tp.order);
    free(c->tp.start);
    c->tp = (sr_conv_taps){0};
}

int sr_conv_out_shape(const sr_conv *c, const sr_tensor *x, int64_t shape[4])
{
    conv_geom g;
    if (conv_geometry(&c->cfg, x, &g))
        return -1;
    shape[0] = g.n, shape[1] = g.o, shape[2] = g.ho, shape[3] = g.wo;
    return 0;
}

/* --- reference kernels for tests ---------------------------------------- */
static int ref_geometry(const sr_tensor *x, const sr_tensor *w, const sr_conv2d_params *p, conv_geom *g)
{
    if (w->ndim != 4 || x->ndim != 4 || x->dtype != w->dtype)
        return sr_fail("conv2d ref: input %s and weight %s must be 4D of one dtype", SR_SHAPE(x), SR_SHAPE(w));
    sr_conv_cfg c = {x->shape[1], w->shape[0], w->shape[2], w->shape[3], p->stride[0], p->stride[1],
                  p->padding[0], p->padding[1], p->dilation[0], p->dilation[1], p->groups,
                  p->padding_end[0], p->padding_end[1], 0, SR_CONV_COLS, SR_CONV_COL_BYTES, SR_CONV_AUTO, SR_CONV_AUTO};
    if (c.sh < 1 || c.sw < 1 || c.dh < 1 || c.dw < 1 || c.ph < 0 || c.pw < 0 || c.pb < 0 || c.pr < 0)
        return sr_fail("conv2d ref: bad stride, dilation or padding");
    if (c.groups < 1 || c.cin % c.groups || c.cout % c.groups || w->shape[1] * c.groups != c.cin)
        return sr_fail("conv2d ref: weight %s does not fit input %s with groups=%lld", SR_SHAPE(w),
                       SR_SHAPE(x), (long long)c.groups);
    return conv_geometry(&c, x, g);
}

int sr_conv2d_ref(const sr_tensor *x, const sr_tensor *w, const sr_tensor *b, const sr_conv2d_params *p,
                  sr_tensor *y)
{
    conv_geom g;
    if (ref_geometry(x, w, p, &g) || sr_tensor_alloc(y, x->dtype, 4, (int64_t[]){g.n, g.o, g.ho, g.wo}))
        return -1;
    SR_DISPATCH(x->dtype, conv_ref, sr_data(y), sr_data(x), sr_data(w), b ? sr_data(b) : NULL, &g);
    return 0;
}

static int from_double(sr_tensor *t, sr_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    if (sr_tensor_alloc(t, dt, ndim, shape))
        return -1;
    for (int64_t i = 0, n = sr_numel(t); i < n; i++)
        sr_set_flat(t, i, v[i]);
    return 0;
}

int sr_conv2d_ref_backward(const sr_tensor *x, const sr_tensor *w, const sr_tensor *gy,
                           const sr_conv2d_params *p, sr_tensor *gx, sr_tensor *gw, sr_tensor *gb)
{
    conv_geom g;
    if (ref_geometry(x, w, p, &g))
        return -1;
    if (gy->ndim != 4 || gy->dtype != x->dtype || gy->shape[0] != g.n || gy->shape[1] != g.o ||
        gy->shape[2] != g.ho || gy->shape[3] != g.wo)
        return sr_fail("conv2d ref backward: gradient %s does not match the output", SR_SHAPE(gy));
    int64_t nx = sr_numel(x), nw = sr_numel(w);
    double *ax = calloc((size_t)(nx + nw + g.o), sizeof(double));
    if (!ax)
        return sr_fail("conv2d ref backward: out of memory");
    double *aw = ax + nx, *ab = aw + nw;
    SR_DISPATCH(x->dtype, conv_ref_bwd, ax, aw, ab, sr_data(gy), sr_data(x), sr_data(w), &g);
    int rc = from_double(gx, x->dtype, 4, x->shape, ax) || from_double(gw, x->dtype, 4, w->shape, aw) ||
             (gb && from_double(gb, x->dtype, 1, &g.o, ab));
    free(ax);
    return rc ? -1 : 0;
}

#endif
