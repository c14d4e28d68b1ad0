/* depthwise.h - depthwise 2-D convolution kernels (groups == channels), for
 * conv.c: output channel o reads input channel o / mult through its own
 * kh x kw filter, over NCHW batches. */
#ifndef SR_DEPTHWISE_H
#define SR_DEPTHWISE_H

#include "tensor/tensor.h"

/* One call's sizes: input (n, c, h, w), o = c·mult output channels of
 * (ho, wo), kernel, stride, padding, dilation. */
typedef struct sr_dw_geom {
    int64_t n, c, h, w, o, ho, wo;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} sr_dw_geom;

/* y = W ⋆ x, plus b (may be NULL) on images [0, bias_rows). */
int sr_dw_forward(sr_dtype dt, void *y, const void *x, const void *w, const void *b, const sr_dw_geom *g,
                  int64_t bias_rows);
/* gx = W ⋆ᵀ gy (written); gw and gb (either may be NULL) accumulate. */
int sr_dw_backward(sr_dtype dt, void *gx, void *gw, void *gb, const void *gy, const void *x, const void *w,
                   const sr_dw_geom *g);

#endif
