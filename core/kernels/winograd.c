/* winograd.c - 3x3 stride-1 convolution by Winograd's minimal filtering
 * F(2x2, 3x3) (Lavin & Gray, "Fast algorithms for convolutional neural
 * networks", 2016).
 *
 * Each 2x2 block of outputs (a tile) reads a 4x4 input patch d (tiles of a
 * row overlap by two columns).  With the fixed matrices
 *
 *     Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *     G  = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]      Aᵀ = [1 1 1 0; 0 1 -1 -1]
 *
 * the tile is Y = Aᵀ [Σ_c (G g_oc Gᵀ) ⊙ (Bᵀ d_c B)] A, so after transforming
 * the weights (U = G g Gᵀ) and every input patch (V = Bᵀ d B) the channel
 * sum is 16 independent GEMMs, M[ξ] (O x tiles) = U[ξ] (O x C) · V[ξ]
 * (C x tiles), one per position ξ = 4a + b of the 4x4 transformed tile:
 * 16 multiply-adds per tile and channel pair instead of 36, 2.25x fewer
 * FLOPs, at the price of the transforms (a few adds per element, linear in
 * C + O, not C·O) and of tile buffers 4x the input and output.
 *
 * Backward is the exact adjoint of that forward, in the same tile space:
 * Mg = A gY Aᵀ per tile, ∂U[ξ] = Mg[ξ] · V[ξ]ᵀ (then gW = Gᵀ ∂U G),
 * ∂V[ξ] = U[ξ]ᵀ · Mg[ξ] (then gx += B ∂V Bᵀ, overlapping tiles added).
 *
 * Numerics: the transforms use only ±1 and ½, so F(2x2, 3x3) loses about a
 * bit against the direct sum (F(4x4, 3x3) would save another 1.8x but its
 * transform constants cost several bits in float32, too much for the
 * finite-scale differences the profile engine takes).
 *
 * Layout: row vectors are split into even and odd columns once, so every
 * transform is a contiguous, vectorisable loop over the tiles of a row.
 * Work is cut into chunks of whole tile rows (global index R = image·th +
 * row) sized so one chunk's buffers stay near WINO_WS; with several threads
 * each thread runs its own range of tile rows (whole images in backward,
 * whose gx rows overlap between neighbouring tile rows) with
 * single-threaded BLAS, so the transforms run on every core. */
#ifdef SR_REAL

/* p[i] = row ih at column i − pw for i in [pw, pw + w), the whole row
 * zero when ih is outside the plane.  The padding columns, [0, pw) and
 * [pw + w, 2·wino_row_len), are zeroed by the caller once per call and
 * never written here: with them zeroed per row (memset, memcpy, memset),
 * the calls cost more than the copy at 8x8 planes. */
static void SR_FN(wino_pad_row)(real *restrict p, const real *restrict xc, int64_t ih, const sr_wino_geom *g)
{
    const int64_t w = g->w;
    if (ih < 0 || ih >= g->h) {
        memset(p, 0, (size_t)(2 * wino_row_len(g->tw)) * sizeof(real));
        return;
    }
    const real *xr = xc + ih * w;
    p += g->pw;
    WINO_SIMD
    for (int64_t i = 0; i < w; i++)
        p[i] = xr[i];
}

/* Rows ih0 .. ih0 + rows − 1 of plane xc (zero outside it), padded by g
 * and split into their even and odd columns: E and O, rows of n =
 * wino_row_len(g->tw) at s + 2·n·most (P, the padded rows, first; its
 * padding zeroed by the caller).  Passes, not one row at a time: see
 * wino_in. */
static void SR_FN(wino_split_rows)(real *s, int64_t most, const real *xc, int64_t ih0, int64_t rows,
                                   const sr_wino_geom *g, real **E, real **O)
{
    const int64_t n = wino_row_len(g->tw);
    real *P = s, *e = s + 2 * n * most, *od = e + n * rows;
    for (int64_t i = 0; i < rows; i++)
        SR_FN(wino_pad_row)(P + 2 * n * i, xc, ih0 + i, g);
    WINO_SIMD
    for (int64_t i = 0; i < n * rows; i++) {
        e[i] = P[2 * i];
        od[i] = P[2 * i + 1];
    }
    *E = e, *O = od;
}

/* V[ξ][c][t] = (Bᵀ d B)[ξ] for every channel and every tile of tile rows
 * [R0, R1), t = (R − R0)·tw + tj; ld columns per V[ξ] row.  With strips,
 * each V[ξ] is instead in gemm.c's strips of NR tiles, C x NR blocks
 * wino_strip apart (the last one's columns past the tiles zeroed);
 * wino_vplane gives the planes' stride.  s: wino_scratch elements.
 *
 * Channel outermost, then the chunk's run of tile rows in each image, in
 * three passes over the run's input rows: copy their pixels into rows of
 * 2n (n = wino_row_len) whose padding columns were zeroed once, split
 * every row into its even and odd columns (E, O: rows of n, one loop of
 * whole vectors, no edge cases), then each tile row's 16 outputs from its
 * four rows of E and O.  Passes, not one row at a time, because each pass
 * reads with whole vectors what the last wrote in pieces (the split's
 * vectors read at an offset): read at once, loads wait for the stores to
 * drain, and did, for half this transform's time at 4x4 planes. */
static void SR_FN(wino_in)(real *V, int64_t ld, int strips, const real *x, const sr_wino_geom *g, int64_t R0,
                           int64_t R1, real *s)
{
    const int64_t tw = g->tw, n = wino_row_len(tw), C = g->c, plane = g->h * g->w, vs = wino_vplane(C, ld, strips);
    /* A constant, so the run arithmetic below is shifts, not divisions. */
    const int64_t nr = sr_gemm_nr(sizeof(real)), ss = wino_strip(C, sizeof(real));
    const int64_t most = 2 * (R1 - R0 < g->th ? R1 - R0 : g->th) + 2; /* rows of the longest run */
    memset(s, 0, (size_t)(2 * n * most) * sizeof(real));                /* the padded rows' padding */
    for (int64_t c = 0; c < C; c++) {
        for (int64_t Ra = R0, Rb; Ra < R1; Ra = Rb) {
            const int64_t img = Ra / g->th, ti0 = Ra % g->th, ih0 = 2 * ti0 - g->ph;
            Rb = (img + 1) * g->th < R1 ? (img + 1) * g->th : R1;
            real *E, *O;
            SR_FN(wino_split_rows)(s, most, x + (img * C + c) * plane, ih0, 2 * (Rb - Ra) + 2, g, &E, &O);
            for (int64_t R = Ra; R < Rb; R++) {
                const int64_t t0 = (R - R0) * tw, r = 2 * (R - Ra) * n;
                const real *e0 = E + r, *o0 = O + r, *e1 = e0 + n, *o1 = o0 + n;
                const real *e2 = e1 + n, *o2 = o1 + n, *e3 = e2 + n, *o3 = o2 + n;
                /* Runs of the row's tiles [j0, j1) within one strip (one run
                 * when row-major), v[j] the tile's column in row c. */
                for (int64_t j0 = 0, j1; j0 < tw; j0 = j1) {
                    int64_t off = strips ? (t0 + j0) % nr : 0;
                    j1 = strips && tw - j0 > nr - off ? j0 + nr - off : tw;
                    real *v = strips ? V + (t0 + j0 - off) / nr * ss + c * nr + off - j0 : V + c * ld + t0;
                    /* Runs are short (tw: 4 at 7x7, 14 at 28x28), shorter
                     * than a vector: computed to a whole number of vectors,
                     * the extra tiles' values land where a later write
                     * replaces them (this row's next tiles, channel c + 1's
                     * row; past the last channel the plane's skew or the
                     * strip's spare row) and read junk within the
                     * scratch's slack.  Scalar remainders were most of this
                     * transform's time. */
                    const int64_t jv = j0 + (j1 - j0 + WINO_VW - 1) / WINO_VW * WINO_VW;
                    WINO_SIMD
                    for (int64_t j = j0; j < jv; j++) {
                        /* Rows t_a = Bᵀ d at columns (2j, 2j+1, 2j+2, 2j+3) = (e_j, o_j, e_j+1, o_j+1),
                         * then B on the columns of each. */
#define WINO_IN_ROW(a, E0, E1, O0, O1)                                          \
    do {                                                                        \
        real ea = (E0), eb = (E1), oa = (O0), ob = (O1);                        \
        v[(4 * (a)) * vs + j] = ea - eb;                                        \
        v[(4 * (a) + 1) * vs + j] = oa + eb;                                    \
        v[(4 * (a) + 2) * vs + j] = eb - oa;                                    \
        v[(4 * (a) + 3) * vs + j] = oa - ob;                                    \
    } while (0)
                        WINO_IN_ROW(0, e0[j] - e2[j], e0[j + 1] - e2[j + 1], o0[j] - o2[j], o0[j + 1] - o2[j + 1]);
                        WINO_IN_ROW(1, e1[j] + e2[j], e1[j + 1] + e2[j + 1], o1[j] + o2[j], o1[j + 1] + o2[j + 1]);
                        WINO_IN_ROW(2, e2[j] - e1[j], e2[j + 1] - e1[j + 1], o2[j] - o1[j], o2[j + 1] - o1[j + 1]);
                        WINO_IN_ROW(3, e1[j] - e3[j], e1[j + 1] - e3[j + 1], o1[j] - o3[j], o1[j + 1] - o3[j + 1]);
#undef WINO_IN_ROW
                    }
                }
            }
        }
    }
    int64_t T = (R1 - R0) * tw, used = strips ? T % nr : 0;
    for (int64_t xi = 0; used && xi < 16; xi++)
        for (int64_t c = 0; c < C; c++)
            memset(V + xi * vs + (T - used) / nr * ss + c * nr + used, 0, (size_t)(nr - used) * sizeof(real));
}

/* gx row ih (skipped outside the plane) at columns 2q − pw = e[q] and
 * 2q + 1 − pw = od[q], stored or (add) added. */
static void SR_FN(wino_put_row)(real *gc, const real *e, const real *od, int64_t ih, int add,
                                const sr_wino_geom *g)
{
    if (ih < 0 || ih >= g->h)
        return;
    const int64_t n1 = g->tw + 1, w = g->w, pw = g->pw;
    real *gr = gc + ih * w;
    int64_t qa, qb;
    wino_inside(g, &qa, &qb);
    if (add) {
        WINO_SIMD
        for (int64_t q = qa; q < qb; q++) {
            gr[2 * q - pw] += e[q];
            gr[2 * q + 1 - pw] += od[q];
        }
    } else {
        WINO_SIMD
        for (int64_t q = qa; q < qb; q++) {
            gr[2 * q - pw] = e[q];
            gr[2 * q + 1 - pw] = od[q];
        }
    }
    for (int64_t q = 0; q < n1; q++) {
        if (q == qa)
            q = qb;
        if (q >= n1)
            break;
        int64_t c0 = 2 * q - pw;
        if (c0 >= 0 && c0 < w)
            gr[c0] = add ? gr[c0] + e[q] : e[q];
        if (c0 + 1 >= 0 && c0 + 1 < w)
            gr[c0 + 1] = add ? gr[c0 + 1] + od[q] : od[q];
    }
}

/* One column pair q of a tile row in wino_in_adj.  Transposes of wino_in:
 * per transformed row t_a the column adjoint of (e_j − e_j+1, o_j + e_j+1,
 * e_j+1 − o_j, o_j − o_j+1) collects tile q (cur) and tile q − 1 (prev)
 * into ∂t_a at columns 2q, 2q + 1; then the rows, of t0 = d0 − d2,
 * t1 = d1 + d2, t2 = d2 − d1, t3 = d1 − d3, give the patch rows ∂d_k.
 * ∂d0, ∂d1 complete the rows carried in s (c0, c1) into r0, r1; ∂d2, ∂d3
 * become the new carried rows.  s: 8 rows of n (wino_row_len), the even
 * then the odd columns of c0, c1, r0, r1.  Scalars only: gcc vectorises
 * this over q, the tile reads masked by prev and cur. */
WINO_INLINE void SR_FN(wino_adj_col)(real *restrict s, int64_t n, const real *gv, int64_t vs, int64_t q,
                                   int prev, int cur)
{
#define WINO_ADJ_T(a, E, O)                                                     \
    real E = 0, O = 0;                                                          \
    {                                                                           \
        const real *v = gv + 4 * (a) * vs;                                      \
        if (cur)                                                                \
            E = v[q], O = v[vs + q] - v[2 * vs + q] + v[3 * vs + q];            \
        if (prev)                                                               \
            E += v[vs + q - 1] + v[2 * vs + q - 1] - v[q - 1], O -= v[3 * vs + q - 1]; \
    }
    WINO_ADJ_T(0, e0, o0)
    WINO_ADJ_T(1, e1, o1)
    WINO_ADJ_T(2, e2, o2)
    WINO_ADJ_T(3, e3, o3)
#undef WINO_ADJ_T
    real *restrict c0e = s, *restrict c0o = s + n, *restrict c1e = s + 2 * n, *restrict c1o = s + 3 * n;
    real *restrict r0e = s + 4 * n, *restrict r0o = s + 5 * n, *restrict r1e = s + 6 * n,
                   *restrict r1o = s + 7 * n;
    r0e[q] = c0e[q] + e0, r0o[q] = c0o[q] + o0;
    r1e[q] = c1e[q] + e1 - e2 + e3, r1o[q] = c1o[q] + o1 - o2 + o3;
    c0e[q] = e1 + e2 - e0, c0o[q] = o1 + o2 - o0;
    c1e[q] = -e3, c1o[q] = -o3;
}

/* Adjoint of wino_in: gx = B ∂V Bᵀ summed over the tiles of tile rows
 * [R0, R1), written (not added: every element of gx belongs to some
 * patch, and the caller keeps threads on different images).  Like wino_in,
 * channel outermost with the patch rows shared by consecutive tile rows
 * carried (rows 2, 3 of one are rows 0, 1 of the next), so each tile row
 * is one pass over its columns plus the stores of the two rows it
 * completes.  A tile row that begins a call in mid-image adds to the two
 * rows the previous call stored.  The pass runs whole vectors of 8 over
 * columns [0, qn) of s's rows, qn the tw + 1 columns rounded up to 8
 * (columns past tw read no tile and stay zero): the tw + 1 columns (5 at
 * 7x7) were a scalar head, a vector body too short to run and a scalar
 * tail; in vectors of 16 over the rows' n columns 7x7 did 3x the work and
 * lost. */
static void SR_FN(wino_in_adj)(real *gx, const real *GV, int64_t ld, const sr_wino_geom *g, int64_t R0,
                               int64_t R1, real *s)
{
    const int64_t tw = g->tw, n = wino_row_len(tw), C = g->c, plane = g->h * g->w, vs = wino_plane(C, ld);
    const int64_t qn = (tw + 8) / 8 * 8;
    for (int64_t c = 0; c < C; c++) {
        for (int64_t R = R0; R < R1; R++) {
            int64_t img = R / g->th, ti = R % g->th, ih = 2 * ti - g->ph;
            const real *gv = GV + c * ld + (R - R0) * tw;
            real *gc = gx + (img * C + c) * plane;
            int add = R == R0 && ti > 0;
            if (R == R0 || ti == 0)
                memset(s, 0, (size_t)(4 * n) * sizeof(real));
            _Pragma("omp simd simdlen(8)")
            for (int64_t q = 0; q < qn; q++)
                SR_FN(wino_adj_col)(s, n, gv, vs, q, q > 0, q < tw);
            SR_FN(wino_put_row)(gc, s + 4 * n, s + 5 * n, ih, add, g);
            SR_FN(wino_put_row)(gc, s + 6 * n, s + 7 * n, ih + 1, add, g);
            if (ti == g->th - 1 || R == R1 - 1) {
                SR_FN(wino_put_row)(gc, s, s + n, ih + 2, 0, g);
                SR_FN(wino_put_row)(gc, s + 2 * n, s + 3 * n, ih + 3, 0, g);
            }
        }
    }
}

/* y tiles = Aᵀ M A (+ bias on images < bias_rows), cropped at the edges;
 * channel outermost so each image plane of y is written in order.  ep maps
 * each image's run of rows once it is written (one call per plane, not
 * per row: at 7 to 56 columns the calls cost more than the map). */
static void SR_FN(wino_out)(real *y, const real *M, int64_t ld, const real *b, int64_t bias_rows,
                            const sr_epilogue *ep, const sr_wino_geom *g, int64_t R0, int64_t R1, real *s)
{
    const int64_t tw = g->tw, O = g->o, ms = wino_plane(O, ld), P = g->ho * g->wo, wo = g->wo;
    for (int64_t o = 0; o < O; o++) {
        real *run = NULL; /* rows of image run_img written since the last map */
        int64_t run_n = 0, run_img = -1;
        for (int64_t R = R0; R < R1; R++) {
            int64_t img = R / g->th, ti = R % g->th, t0 = (R - R0) * tw;
            const real *m = M + o * ld + t0;
            real bv = b && img < bias_rows ? b[o] : 0;
            real *yo = y + (img * O + o) * P + 2 * ti * wo;
            int64_t rows = 2 * ti + 1 < g->ho ? 2 : 1;
            /* Two whole rows go straight to y; cropped ones through s. */
            int whole = 2 * tw == wo && rows == 2;
            real *restrict r0 = whole ? yo : s, *restrict r1 = whole ? yo + wo : s + 2 * tw;
            WINO_SIMD
            for (int64_t j = 0; j < tw; j++) {
                real s0 = m[j] + m[4 * ms + j] + m[8 * ms + j];
                real s1 = m[ms + j] + m[5 * ms + j] + m[9 * ms + j];
                real s2 = m[2 * ms + j] + m[6 * ms + j] + m[10 * ms + j];
                real s3 = m[3 * ms + j] + m[7 * ms + j] + m[11 * ms + j];
                real q0 = m[4 * ms + j] - m[8 * ms + j] - m[12 * ms + j];
                real q1 = m[5 * ms + j] - m[9 * ms + j] - m[13 * ms + j];
                real q2 = m[6 * ms + j] - m[10 * ms + j] - m[14 * ms + j];
                real q3 = m[7 * ms + j] - m[11 * ms + j] - m[15 * ms + j];
                r0[2 * j] = s0 + s1 + s2 + bv;
                r0[2 * j + 1] = s1 - s2 - s3 + bv;
                r1[2 * j] = q0 + q1 + q2 + bv;
                r1[2 * j + 1] = q1 - q2 - q3 + bv;
            }
            if (!whole) {
                memcpy(yo, r0, (size_t)wo * sizeof(real));
                if (rows == 2)
                    memcpy(yo + wo, r1, (size_t)wo * sizeof(real));
            }
            if (ep && img != run_img) {
                if (run_n)
                    SR_FN(sr_epilogue_rows)(run, run, 1, run_n, run_n, run_n, o, ep, run_img >= bias_rows);
                run = yo, run_n = 0, run_img = img;
            }
            run_n += rows * wo;
        }
        if (ep && run_n)
            SR_FN(sr_epilogue_rows)(run, run, 1, run_n, run_n, run_n, o, ep, run_img >= bias_rows);
    }
}

/* Adjoint of wino_out's transform for one tile: Mg[ξ] = (A gY Aᵀ)[ξ] from
 * its 2x2 output gradient (rows h_a of A gY: g0, g0 + g1, g0 − g1, −g1;
 * columns the same).  Scalars only: gcc vectorises this over j. */
WINO_INLINE void SR_FN(wino_gy_tile)(real *m, int64_t ms, int64_t j, real g00, real g01, real g10, real g11)
{
#define WINO_GY_ROW(a, H, P)                                                    \
    do {                                                                        \
        real h = (H), p = (P);                                                  \
        m[(4 * (a)) * ms + j] = h, m[(4 * (a) + 1) * ms + j] = h + p;           \
        m[(4 * (a) + 2) * ms + j] = h - p, m[(4 * (a) + 3) * ms + j] = -p;      \
    } while (0)
    WINO_GY_ROW(0, g00, g01);
    WINO_GY_ROW(1, g00 + g10, g01 + g11);
    WINO_GY_ROW(2, g00 - g10, g01 - g11);
    WINO_GY_ROW(3, -g10, -g11);
#undef WINO_GY_ROW
}

/* Mg for tile rows [R0, R1): zero past the output's edge.  Channel
 * outermost, as in wino_out: an image's rows of one channel are then read
 * in order (rows of 28 floats, one channel after another, left the
 * prefetcher behind: half this transform's time was in those loads).  As
 * in wino_in, each image's run of gy rows is first split into even and odd
 * columns (the plane gy as an input of ho x wo, unpadded), so each tile row
 * is one loop of whole vectors, its extra tiles landing where later writes
 * replace them (next tile row, channel o + 1's row, the plane's skew).
 * s: wino_scratch elements. */
static void SR_FN(wino_gy)(real *Mg, int64_t ld, const real *gy, const sr_wino_geom *g, int64_t R0, int64_t R1,
                           real *s)
{
    const int64_t tw = g->tw, O = g->o, ms = wino_plane(O, ld), P = g->ho * g->wo, n = wino_row_len(tw);
    const int64_t most = 2 * (R1 - R0 < g->th ? R1 - R0 : g->th) + 2, jv = (tw + WINO_VW - 1) / WINO_VW * WINO_VW;
    const sr_wino_geom gg = {.h = g->ho, .w = g->wo, .tw = tw}; /* gy as a plane, no padding */
    memset(s, 0, (size_t)(2 * n * most) * sizeof(real));
    for (int64_t o = 0; o < O; o++) {
        for (int64_t Ra = R0, Rb; Ra < R1; Ra = Rb) {
            const int64_t img = Ra / g->th;
            Rb = (img + 1) * g->th < R1 ? (img + 1) * g->th : R1;
            real *E, *Od;
            SR_FN(wino_split_rows)(s, most, gy + (img * O + o) * P, 2 * (Ra % g->th), 2 * (Rb - Ra), &gg, &E, &Od);
            for (int64_t R = Ra; R < Rb; R++) {
                const int64_t r = 2 * (R - Ra) * n;
                const real *e0 = E + r, *o0 = Od + r, *e1 = e0 + n, *o1 = o0 + n;
                real *m = Mg + o * ld + (R - R0) * tw;
                WINO_SIMD
                for (int64_t j = 0; j < jv; j++)
                    SR_FN(wino_gy_tile)(m, ms, j, e0[j], o0[j], e1[j], o1[j]);
            }
        }
    }
}

/* The 1-D kernel transform G (4x3) on C columns at once: rows
 * d, d + ds, d + 2·ds, d + 3·ds from rows k0, k1, k2. */
WINO_INLINE void SR_FN(wino_g_rows)(real *d, int64_t ds, const real *k0, const real *k1, const real *k2, int64_t C)
{
    WINO_SIMD
    for (int64_t c = 0; c < C; c++) {
        d[c] = k0[c];
        d[ds + c] = (real)0.5 * (k0[c] + k1[c] + k2[c]);
        d[2 * ds + c] = (real)0.5 * (k0[c] - k1[c] + k2[c]);
        d[3 * ds + c] = k2[c];
    }
}

/* U[ξ] (O x C) = (G g Gᵀ)[ξ] for every 3x3 kernel g = w[o][c], o in
 * [o0, o1).  It runs on every call (weights change between training
 * steps), so it must not cost much next to the GEMMs.  One output channel's
 * kernels are first laid out tap-major in sc (9·C) so the loops over c are
 * contiguous; G on the kernel columns goes to 12 rows of C in sc too, and
 * G on their rows writes 4 planes' row o at a time: writing all 16 planes
 * per c instead puts 16 streams a multiple of 4 KB apart into one 8-way L1
 * set (512 -> 512: 26 ms of a 140 ms convolution).  With Up, the rows are
 * then packed for gemm.c ([o0, o1) whole panels). */
static void SR_FN(wino_weights)(real *U, real *Up, const real *w, int64_t O, int64_t C, int64_t o0, int64_t o1,
                                real *sc)
{
    const int64_t us = O * C;
    real *t = sc + 9 * C; /* t[(a + 4j)·C + c] = (G g)[a][j] */
    for (int64_t o = o0; o < o1; o++) {
        const real *wo = w + o * C * 9;
        for (int64_t c = 0; c < C; c++)
            for (int k = 0; k < 9; k++)
                sc[k * C + c] = wo[c * 9 + k];
        for (int j = 0; j < 3; j++)
            SR_FN(wino_g_rows)(t + 4 * j * C, C, sc + j * C, sc + (3 + j) * C, sc + (6 + j) * C, C);
        for (int a = 0; a < 4; a++)
            SR_FN(wino_g_rows)(U + 4 * a * us + o * C, us, t + a * C, t + (a + 4) * C, t + (a + 8) * C, C);
    }
    for (int xi = 0; Up && xi < 16; xi++)
        SR_FN(sr_gemm_pack_a)(Up + xi * sr_gemm_packed_size(O, C), U + xi * us, C, o0, o1, O, C);
}

/* gw[o][c] += Gᵀ ∂U G (3x3 from 4x4), in double. */
static void SR_FN(wino_wgrad)(real *gw, const real *dU, int64_t O, int64_t C)
{
    const int64_t us = O * C;
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++) {
            double r[3][4];
            for (int b = 0; b < 4; b++) {
                const real *d = dU + b * us + o * C + c;
                double d0 = d[0], d1 = d[4 * us], d2 = d[8 * us], d3 = d[12 * us];
                r[0][b] = d0 + 0.5 * (d1 + d2);
                r[1][b] = 0.5 * (d1 - d2);
                r[2][b] = 0.5 * (d1 + d2) + d3;
            }
            real *k = gw + (o * C + c) * 9;
            for (int i = 0; i < 3; i++) {
                k[3 * i] += (real)(r[i][0] + 0.5 * (r[i][1] + r[i][2]));
                k[3 * i + 1] += (real)(0.5 * (r[i][1] - r[i][2]));
                k[3 * i + 2] += (real)(0.5 * (r[i][1] + r[i][2]) + r[i][3]);
            }
        }
}

static int SR_FN(wino_fwd_part)(const wino_ctx *cx, int t)
{
    const sr_wino_geom *g = cx->g;
    const real *U = cx->U, *Up = cx->Up;
    const int64_t ld = cx->ld, C = g->c, O = g->o, vs = wino_vplane(C, ld, Up != NULL), ms = wino_plane(O, ld);
    real *V = (real *)cx->ws + t * cx->ws_part, *M = V + 16 * vs, *s = M + 16 * ms;
    const int64_t pk = sr_gemm_packed_size(O, C);
    for (int64_t R = cx->R[t]; R < cx->R[t + 1]; R += cx->rpc) {
        if (sr_interrupted())
            return -1;
        int64_t R1 = R + cx->rpc < cx->R[t + 1] ? R + cx->rpc : cx->R[t + 1], T = (R1 - R) * g->tw;
        SR_FN(wino_in)(V, ld, Up != NULL, cx->x, g, R, R1, s);
        for (int xi = 0; xi < 16; xi++)
            if (Up)
                SR_FN(sr_gemm_strips)(O, T, C, Up + xi * pk, V + xi * vs, wino_strip(C, sizeof(real)), M + xi * ms,
                                      ld);
            else
                SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)O, (int)T, (int)C, 1,
                        U + xi * O * C, (int)C, V + xi * vs, (int)ld, 0, M + xi * ms, (int)ld);
        SR_FN(wino_out)(cx->y, M, ld, cx->b, cx->bias_rows, cx->ep, g, R, R1, s);
    }
    return 0;
}

/* Backward over the whole images of tile rows [R[t], R[t+1]): gx written
 * for them, ∂U accumulated into this part's own dU (zeroed here). */
static int SR_FN(wino_bwd_part)(const wino_ctx *cx, int t)
{
    const sr_wino_geom *g = cx->g;
    const int64_t ld = cx->ld, C = g->c, O = g->o, vs = wino_plane(C, ld), ms = wino_plane(O, ld);
    real *V = (real *)cx->ws + t * cx->ws_part, *M = V + 16 * vs, *s = M + 16 * ms;
    real *dU = cx->dU ? (real *)cx->dU + t * 16 * O * C : NULL;
    const real *U = cx->U;
    if (dU)
        memset(dU, 0, (size_t)(16 * O * C) * sizeof(real));
    for (int64_t R = cx->R[t]; R < cx->R[t + 1]; R += cx->rpc) {
        if (sr_interrupted())
            return -1;
        int64_t R1 = R + cx->rpc < cx->R[t + 1] ? R + cx->rpc : cx->R[t + 1], T = (R1 - R) * g->tw;
        SR_FN(wino_gy)(M, ld, cx->gy, g, R, R1, s);
        if (dU) {
            SR_FN(wino_in)(V, ld, 0, cx->x, g, R, R1, s);
            for (int xi = 0; xi < 16; xi++)
                SR_FN(sr_gemm_blas)(CblasRowMajor, CblasNoTrans, CblasTrans, (int)O, (int)C, (int)T, 1, M + xi * ms,
                        (int)ld, V + xi * vs, (int)ld, 1, dU + xi * O * C, (int)C);
        }
        if (cx->gx) {
            for (int xi = 0; xi < 16; xi++)
                SR_FN(sr_gemm_blas)(CblasRowMajor, CblasTrans, CblasNoTrans, (int)C, (int)T, (int)O, 1, U + xi * O * C,
                        (int)C, M + xi * ms, (int)ld, 0, V + xi * vs, (int)ld);
            SR_FN(wino_in_adj)(cx->gx, V, ld, g, R, R1, s);
        }
    }
    return 0;
}

#else /* generic part */

#include <cblas.h>
#include <string.h>

#include "base/checked.h"
#include "base/error.h"
#include "base/threads.h"
#include "kernels/gemm.h"
#include "kernels/winograd.h"
#include "tensor/tensor_ops.h"

/* The build's -O2 vectorises only loops whose trip count it knows. */
#define WINO_SIMD _Pragma("omp simd")
/* Per-column bodies called from several loops: inlined so the loops over
 * columns vectorise. */
#define WINO_INLINE static inline __attribute__((always_inline))
/* Target bytes of one part's tile buffers (V and M of a chunk): about the
 * L2 plus a share of L3 here.  But a GEMM needs width: with many channels
 * (512 -> 512 at 7x7: 256 KB per tile row of 4 tiles) chunks still get
 * WINO_MIN_COLS tiles, up to max_workspace; at least one tile row is used
 * whatever its size. */
#define WINO_WS ((size_t)4 << 20)
#define WINO_MIN_COLS 256
#define WINO_MAX_PARTS 64
/* Elements per vector (64 bytes): transforms run whole vectors past the
 * end of short runs (wino_in), reading at most WINO_SLACK elements past
 * the scratch's rows and writing at most one vector past a run. */
#define WINO_VW ((int64_t)(64 / sizeof(real)))
#define WINO_SLACK 64
/* Elements of a deinterleaved row in wino_in: the tw + 1 column pairs,
 * rounded up to whole vectors. */
static inline int64_t wino_row_len(int64_t tw) { return (tw + 16) / 16 * 16; }
/* Row scratch of the transforms, elements per part, for chunks of rpc
 * tile rows: wino_in's padded and split rows of a run (at most 2·rpc + 2
 * rows of one image), more than wino_in_adj's 8·(tw + 1) and wino_out's
 * 4·tw. */
static inline int64_t wino_scratch(const sr_wino_geom *g, int64_t rpc)
{
    return 4 * wino_row_len(g->tw) * (2 * (rpc < g->th ? rpc : g->th) + 2) + WINO_SLACK;
}

typedef struct {
    sr_dtype dt;
    const sr_wino_geom *g;
    int64_t rpc;     /* tile rows per chunk */
    int64_t ld;      /* columns of the tile buffers: rpc · tw */
    int64_t ws_part; /* elements of one part's V, M and scratch */
    int64_t R[WINO_MAX_PARTS + 1];
    int nparts;
    int own_gemm;    /* forward GEMMs by gemm.c's strips (else sr_gemm_blas) */
    void *y, *gx, *ws, *U, *dU;
    void *Up;        /* forward on one thread per part: U packed for gemm.c */
    const void *x, *gy, *b, *w;
    int64_t bias_rows;
    const sr_epilogue *ep;
} wino_ctx;

/* Column pairs q of a deinterleaved row (columns 2q − pw, 2q + 1 − pw)
 * with both columns inside the plane: q in [qa, qb). */
static void wino_inside(const sr_wino_geom *g, int64_t *qa, int64_t *qb)
{
    int64_t n1 = g->tw + 1;
    *qa = (g->pw + 1) / 2, *qb = (g->w + g->pw) / 2;
    if (*qb > n1)
        *qb = n1;
    if (*qa > *qb)
        *qa = *qb;
}

/* Elements from one plane ξ of a tile buffer (rows x ld) to the next: one
 * cache line more than the plane, so the transforms' 16 streams (a plane
 * each) fall into different cache sets.  Unskewed, 64 -> 64 at 32x32 puts
 * them 128 KB apart, all in one set of the 8-way L1 and L2: the input
 * transform was 10% of a CIFAR ResNet-18 forward. */
#define WINO_SKEW 16
static inline int64_t wino_plane(int64_t rows, int64_t ld) { return rows * ld + WINO_SKEW; }

/* Elements from one strip of a V[ξ] in gemm.c's layout to the next: one
 * row more than its C x NR, for the same reason: the input transform,
 * channel outermost, writes consecutive strips in turn, which would
 * otherwise be 4 KB apart at 64 channels. */
static inline int64_t wino_strip(int64_t C, size_t es) { return (C + 1) * sr_gemm_nr(es); }

/* The plane stride of V (C channels): row-major, or ld / NR strips of
 * wino_strip, C + 1 rows of ld. */
static inline int64_t wino_vplane(int64_t C, int64_t ld, int strips) { return wino_plane(C + (strips != 0), ld); }

#define SR_GENERIC_FILE "kernels/winograd.c"
#include "base/generic.h"

void sr_wino_geom_make(sr_wino_geom *g, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t ph,
                       int64_t pw)
{
    g->n = n, g->c = c, g->h = h, g->w = w, g->o = o, g->ph = ph, g->pw = pw;
    g->ho = h + 2 * ph - 2;
    g->wo = w + 2 * pw - 2;
    g->th = (g->ho + 1) / 2;
    g->tw = (g->wo + 1) / 2;
}

static int64_t wino_gcd(int64_t a, int64_t b) { return b ? wino_gcd(b, a % b) : a; }

/* Parts (ranges of tile rows; whole images in backward) and chunk size. */
static void wino_cut(wino_ctx *cx, const sr_wino_plan *pl, int bwd, size_t es)
{
    const sr_wino_geom *g = cx->g;
    size_t per_row = (size_t)(16 * (g->c + g->o) * g->tw) * es, budget = WINO_WS;
    if ((size_t)pl->max_workspace < budget)
        budget = (size_t)pl->max_workspace;
    int64_t rpc = (int64_t)(budget / per_row), wide = (WINO_MIN_COLS + g->tw - 1) / g->tw;
    int64_t most_ws = (int64_t)((size_t)pl->max_workspace / per_row);
    if (rpc < wide)
        rpc = most_ws < wide ? most_ws : wide;
    /* Whole strips: gemm.c computes all NR columns of a chunk's last strip,
     * tiles or not, so chunks of a multiple of NR tiles waste nothing
     * (256 -> 256 at 14x14: 37 tile rows of 7 were 259 tiles in 288
     * columns; 32 rows are 224 in 224). */
    int64_t nr = sr_gemm_nr(es), whole = nr / wino_gcd(g->tw, nr); /* rows */
    if (rpc >= whole)
        rpc -= rpc % whole;
    int T = sr_threads_get();
    int split = pl->split == 1 ? 1 : pl->split == 2 ? 0 : T > 1;
    if (split && T < 2)
        T = 2;
    int64_t unit = bwd ? g->th : 1, units = bwd ? g->n : g->n * g->th;
    if (T > units)
        T = (int)units;
    if (T > WINO_MAX_PARTS)
        T = WINO_MAX_PARTS;
    if (!split || T < 1)
        T = 1;
    cx->nparts = T;
    for (int t = 0; t <= T; t++)
        cx->R[t] = units * t / T * unit;
    int64_t most = (units + T - 1) / T * unit;
    cx->rpc = rpc < 1 ? 1 : rpc > most ? most : rpc;
    cx->ld = cx->rpc * g->tw;
    /* gemm.c's kernel, its input in whole strips, when a part's BLAS would
     * run on one thread. */
    cx->own_gemm = !bwd && sr_gemm_serial(T, sr_threads_get());
    if (cx->own_gemm)
        cx->ld = (cx->ld + sr_gemm_nr(es) - 1) / sr_gemm_nr(es) * sr_gemm_nr(es);
    cx->ws_part = 16 * (wino_vplane(g->c, cx->ld, cx->own_gemm) + wino_plane(g->o, cx->ld)) + wino_scratch(g, cx->rpc);
    if (cx->ws_part < 21 * g->c) /* wino_weights' scratch */
        cx->ws_part = 21 * g->c;
}

/* One pooled block: U, then each part's buffers, then (backward with gw)
 * each part's ∂U. */
static int wino_alloc(wino_ctx *cx, sr_tensor *ws, sr_dtype dt, int with_du, sr_pool *pool)
{
    const int64_t nup = cx->own_gemm ? 16 * sr_gemm_packed_size(cx->g->o, cx->g->c) : 0;
    int64_t nu, parts, du, n;
    /* (the tensors' own bounds keep these in range; counted anyway, as
     * every workspace size is) */
    if (SR_COUNT(&nu, "winograd: transformed weights", 16, cx->g->o, cx->g->c) ||
        SR_COUNT(&parts, "winograd: tile buffers", cx->nparts, cx->ws_part) ||
        SR_COUNT(&du, "winograd: weight gradients", with_du ? cx->nparts : 0, nu) ||
        SR_COUNT(&n, "winograd: workspace", nu + nup + parts + du) || sr_pool_ensure(pool, ws, dt, 1, &n))
        return -1;
    size_t es = sr_dtype_size(dt);
    cx->U = sr_data(ws);
    cx->Up = nup ? (char *)cx->U + (size_t)nu * es : NULL;
    cx->ws = (char *)cx->U + (size_t)(nu + nup) * es;
    cx->dU = with_du ? (char *)cx->ws + (size_t)(cx->nparts * cx->ws_part) * es : NULL;
    return 0;
}

/* Part t transforms its share of the output channels' kernels, in its own
 * tile buffers (not in use yet), and packs them for gemm.c (shares of
 * whole panels). */
static int wino_weights_cb(void *ctx, int t)
{
    const wino_ctx *cx = ctx;
    const int64_t O = cx->g->o, C = cx->g->c;
    int64_t o0, o1;
    sr_gemm_panel_share(O, t, cx->nparts, &o0, &o1);
    void *sc = (char *)cx->ws + (size_t)(t * cx->ws_part) * sr_dtype_size(cx->dt);
    SR_DISPATCH(cx->dt, wino_weights, cx->U, cx->Up, cx->w, O, C, o0, o1, sc);
    return 0;
}

static int wino_fwd_cb(void *ctx, int t)
{
    const wino_ctx *cx = ctx;
    return SR_DISPATCH_RET(cx->dt, wino_fwd_part, cx, t);
}

static int wino_bwd_cb(void *ctx, int t)
{
    const wino_ctx *cx = ctx;
    return SR_DISPATCH_RET(cx->dt, wino_bwd_part, cx, t);
}

int sr_wino_forward(sr_dtype dt, void *y, const void *x, const void *w, const void *b, int64_t bias_rows,
                    const sr_epilogue *ep, const sr_wino_geom *g, const sr_wino_plan *pl, sr_pool *pool)
{
    wino_ctx cx = {.dt = dt, .g = g, .y = y, .x = x, .b = b, .w = w, .bias_rows = bias_rows, .ep = ep};
    sr_tensor ws = SR_TENSOR_INIT;
    wino_cut(&cx, pl, 0, sr_dtype_size(dt));
    if (wino_alloc(&cx, &ws, dt, 0, pool))
        return -1;
    int rc = sr_threads_parts(cx.nparts, wino_weights_cb, &cx);
    if (!rc)
        rc = sr_threads_parts(cx.nparts, wino_fwd_cb, &cx);
    sr_pool_put(pool, &ws);
    return rc;
}

int sr_wino_backward(sr_dtype dt, void *gx, void *gw, void *gb, const void *gy, const void *x, const void *w,
                     const sr_wino_geom *g, const sr_wino_plan *pl, sr_pool *pool)
{
    if (gb)
        SR_DISPATCH(dt, sr_bias_grad, gb, gy, g->n, g->o, g->ho * g->wo);
    if (!gx && !gw)
        return 0;
    wino_ctx cx = {.dt = dt, .g = g, .gx = gx, .gy = gy, .x = x, .w = w};
    sr_tensor ws = SR_TENSOR_INIT;
    wino_cut(&cx, pl, 1, sr_dtype_size(dt));
    if (wino_alloc(&cx, &ws, dt, gw != NULL, pool))
        return -1;
    int rc = gx ? sr_threads_parts(cx.nparts, wino_weights_cb, &cx) : 0;
    if (!rc)
        rc = sr_threads_parts(cx.nparts, wino_bwd_cb, &cx);
    if (!rc && gw) {
        const int64_t nu = 16 * g->o * g->c;
        size_t es = sr_dtype_size(dt);
        for (int t = 1; t < cx.nparts; t++)
            sr_add_into(dt, cx.dU, (char *)cx.dU + (size_t)(t * nu) * es, nu);
        SR_DISPATCH(dt, wino_wgrad, gw, cx.dU, g->o, g->c);
    }
    sr_pool_put(pool, &ws);
    return rc;
}

#endif
