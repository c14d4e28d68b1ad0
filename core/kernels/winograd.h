/* winograd.h - 3x3 stride-1 convolution by Winograd's minimal filtering
 * F(2x2, 3x3): forward (and so the JVP) and backward, for conv.c.
 *
 * Applies to kernel 3x3, stride 1, dilation 1, groups 1, padding <= 2 in
 * each direction (larger paddings only add all-zero tiles: conv.c keeps
 * im2col for them). */
#ifndef SR_WINOGRAD_H
#define SR_WINOGRAD_H

#include <stdint.h>

#include "kernels/epilogue.h"
#include "tensor/tensor.h"

typedef struct {
    int64_t n, c, h, w;  /* input (N, C, H, W) */
    int64_t o, ph, pw;   /* output channels, padding */
    int64_t ho, wo;      /* output size, h + 2·ph − 2 by w + 2·pw − 2 */
    int64_t th, tw;      /* 2x2 output tiles per image: ⌈ho/2⌉ x ⌈wo/2⌉ */
} sr_wino_geom;

/* How a call is cut: max_workspace bounds the bytes of one part's tile
 * buffers (at least one tile row is used); split is 0 (auto), 1 (always
 * one part per thread, at least two: tests drive the threaded path on one
 * core) or 2 (one part, OpenBLAS-threaded GEMMs). */
typedef struct {
    int64_t max_workspace;
    int split;
} sr_wino_plan;

void sr_wino_geom_make(sr_wino_geom *g, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t ph,
                       int64_t pw);

/* y (n, o, ho, wo) = W ⋆ x + b, the bias (may be NULL) on images < bias_rows
 * only (the stacked JVP's tangent rows get none), then the output map ep
 * (may be NULL) as each row is written.  Workspaces are lent by pool (may
 * be NULL).  Returns -1 on an interrupt or out of memory. */
int sr_wino_forward(sr_dtype dt, void *y, const void *x, const void *w, const void *b, int64_t bias_rows,
                    const sr_epilogue *ep, const sr_wino_geom *g, const sr_wino_plan *pl, sr_pool *pool);

/* gx = ∂L/∂x (written; may be NULL), gw += ∂L/∂W and gb += Σ gy
 * (accumulated; either may be NULL), the exact adjoint of the forward. */
int sr_wino_backward(sr_dtype dt, void *gx, void *gw, void *gb, const void *gy, const void *x, const void *w,
                     const sr_wino_geom *g, const sr_wino_plan *pl, sr_pool *pool);

#endif
