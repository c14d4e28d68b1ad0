/* conv.h - 2-D convolution over NCHW batches, the kernel under the conv2d
 * layer (nn/conv.c): its plans (im2col + GEMM, tap-wise GEMMs, Winograd,
 * depthwise), the split of a batch across threads, the stacked JVP (the
 * same linear map) with an optional output map, and the backward.  Pure:
 * pointers, shapes and workspaces lent by a buffer pool; no module tree.
 *
 *   y = W ⋆ x + b,  x (N,C,H,W) -> y (N,O,Ho,Wo);  W (O, C/groups, kh, kw), b (O)
 *   Ho = (H + ph + pb − dh·(kh−1) − 1) / sh + 1   (likewise Wo with pw + pr)
 * with ph, pw zero rows / columns before the image and pb, pr after it
 * (TensorFlow's "same" padding of an even input at stride 2 is 0 before,
 * 1 after).
 */
#ifndef SR_CONV_H
#define SR_CONV_H

#include "kernels/epilogue.h"
#include "tensor/tensor.h"

/* algo: which forward kernel (SR_CONV_AUTO picks per call). */
enum { SR_CONV_AUTO, SR_CONV_IM2COL, SR_CONV_TAPS, SR_CONV_WINOGRAD };
/* split: how a batch spreads over threads (SR_CONV_AUTO, or forced). */
enum { SR_CONV_SPLIT_IMAGES = 1, SR_CONV_SPLIT_GEMM };
/* Defaults of the two plan options.  gemm_cols: below ~1000 columns
 * OpenBLAS loses speed on these shapes, so small images are batched up to
 * this many columns.  max_workspace (bytes): hard bound of the column
 * buffer (rounded up to whole 16-column chunks); it normally stays near
 * the cache-sized target anyway. */
#define SR_CONV_COLS 1024
#define SR_CONV_COL_BYTES (16L << 20)

typedef struct sr_conv_cfg {
    int64_t cin, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int64_t pb, pr; /* padding after the image (bottom, right); ph, pw before it */
    int bias;
    int64_t gemm_cols, max_workspace; /* tests set tiny ones to drive every branch */
    int algo;  /* SR_CONV_AUTO, SR_CONV_IM2COL, SR_CONV_TAPS, SR_CONV_WINOGRAD */
    int split; /* SR_CONV_AUTO, SR_CONV_SPLIT_IMAGES, SR_CONV_SPLIT_GEMM */
} sr_conv_cfg;

/* Tap grouping of the tap-wise forward, fixed per configuration: phase
 * (a, b) = (i·dh mod sh, j·dw mod sw) is stored as plane block perm[a·sw + b];
 * GEMM e covers taps order[start[e] .. start[e+1]), which share one shift
 * and occupy consecutive blocks. */
typedef struct sr_conv_taps {
    int ngemm;
    int *perm, *order, *start;
} sr_conv_taps;

#define SR_CONV_NWS 6
/* One convolution: its configuration, tap layout and workspaces (each lent
 * by the pool for one call, or kept here when there is no pool). */
typedef struct sr_conv {
    sr_conv_cfg cfg;
    sr_conv_taps tp;
    sr_tensor ws[SR_CONV_NWS];
} sr_conv;

/* Check cfg (groups divide the channels) and build the tap layout. */
int sr_conv_init(sr_conv *c, const sr_conv_cfg *cfg);
void sr_conv_free(sr_conv *c);
/* The output shape for input x, or an error naming both. */
int sr_conv_out_shape(const sr_conv *c, const sr_tensor *x, int64_t shape[4]);
/* y = W ⋆ x + b, y already of the output shape and x's dtype; b (may be
 * NULL) on the first bias_rows images only: all of them for a forward, the
 * primal rows of a stacked JVP (the rest are tangents, whose map is W ⋆ v).
 * ep (may be NULL) is applied to the output as it is written, tangent rows
 * getting its JVP (ep->C must be O; ep->add the same shape as y).
 * Workspaces come from pool (NULL: allocated and kept in c). */
int sr_conv_forward(sr_conv *c, sr_tensor *y, const sr_tensor *x, const sr_tensor *w, const sr_tensor *b,
                    int64_t bias_rows, const sr_epilogue *ep, sr_pool *pool);
/* Backward for the output gradient gy of the forward at x: writes gx (of
 * x's shape, allocated by the caller) and, when not NULL, *accumulates*
 * the weight and bias gradients into gw (W's shape) and gb (O). */
int sr_conv_backward(sr_conv *c, sr_tensor *gx, void *gw, void *gb, const sr_tensor *gy, const sr_tensor *x,
                     const sr_tensor *w, sr_pool *pool);

/* --- reference kernels for tests ---------------------------------------- */
/* Geometry: {h, w} pairs and the group count (kernel size and channels come
 * from the weight (O, C/groups, kh, kw)). */
typedef struct sr_conv2d_params {
    int64_t stride[2], padding[2], dilation[2], groups;
    int64_t padding_end[2]; /* bottom, right */
} sr_conv2d_params;
/* Naive direct loops summing in double: y = W ⋆ x + b (b may be NULL); y
 * is allocated.  The backward writes (does not accumulate) gx, gw and gb
 * (gb may be NULL) for the output gradient gy. */
int sr_conv2d_ref(const sr_tensor *x, const sr_tensor *w, const sr_tensor *b, const sr_conv2d_params *p,
                  sr_tensor *y);
int sr_conv2d_ref_backward(const sr_tensor *x, const sr_tensor *w, const sr_tensor *gy,
                           const sr_conv2d_params *p, sr_tensor *gx, sr_tensor *gw, sr_tensor *gb);

#endif
