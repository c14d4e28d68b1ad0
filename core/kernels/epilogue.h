/* epilogue.h - a per-channel affine map on (rows, C, P) batches,
 *     y = (x − mu_c)·scale_c + shift_c,   then max(y, 0) when relu;
 * on a stacked JVP's tangent rows only y = x·scale_c (an affine map's JVP).
 *
 * batchnorm2d (eval, and train-mode primal rows) and normalize run it as
 * their own pass (sr_epilogue_apply); a sequential's inference fusion
 * (nn/containers.c) runs it inside the pass that writes a convolution's output,
 * block by block while the block is in cache (sr_epilogue_rows), with the
 * BatchNorm's map and the following ReLU.  One implementation, so a fused
 * forward is bit-identical to running the layers one after another: nothing
 * downstream, the profile engine's finite differences included, can tell
 * the two apart. */
#ifndef SR_EPILOGUE_H
#define SR_EPILOGUE_H

#include <stdint.h>

#include "kernels/kink.h"
#include "tensor/tensor.h"

typedef struct sr_epilogue {
    const double *mu, *scale, *shift; /* C each; shift may be NULL (zero) */
    int64_t C;                        /* channels the map is for; 0: no affine map (add, relu only) */
    int relu;
    /* Primal rows only: add's element at the same place after the map,
     * before the ReLU (a residual's sum fused into its body's last map).
     * base is the start of the output dst lies in: dst − base is that
     * place.  NULL: nothing added. */
    const sr_tensor *add;
    const void *base;
    /* A stacked JVP's ReLU (sr_epilogue_jvp_mask): its rule at 0 and the
     * tie counts (sr_run.directional, sr_run.kinks). */
    int directional;
    sr_kinks *kinks;
} sr_epilogue;

/* dst[r][0, n) = map(src[r][0, n)) for channels c0 .. c0 + rows − 1, row
 * strides ld_dst / ld_src (dst may equal src).  One thread: for passes that
 * already run per thread on a block still in cache.  tangent: the rows are
 * a stacked JVP's tangents, which the affine map only scales (y·scale_c);
 * their ReLU needs the primal's pattern, applied afterwards
 * (sr_epilogue_jvp_mask). */
void sr_epilogue_rows_f32(float *dst, const float *src, int64_t rows, int64_t n, int64_t ld_dst,
                          int64_t ld_src, int64_t c0, const sr_epilogue *e, int tangent);
void sr_epilogue_rows_f64(double *dst, const double *src, int64_t rows, int64_t n, int64_t ld_dst,
                          int64_t ld_src, int64_t c0, const sr_epilogue *e, int tangent);

/* y = map(x) over a (rows, C, P) batch whose first primal_rows rows are
 * primals (the rest tangents; primal_rows = 0 also gives the map's
 * backward), threaded; y may be x. */
void sr_epilogue_apply(sr_dtype dt, void *y, const void *x, int64_t rows, int64_t primal_rows, int64_t C,
                       int64_t P, const sr_epilogue *e);

/* A stacked JVP's output (n primal rows, then k tangents each, rs elements
 * a row), mapped by rows_f32/f64 with e->relu cleared: when e->relu, the
 * ReLU's JVP (sr_relu_tangents with e->directional, e->kinks), which needs
 * the primal rows before the clip (a kink at exactly 0 is not visible in
 * max(x, 0)), then the clip of the primal rows.  Bit-identical to clipping
 * in the map: relu1 on the same rounded value. */
void sr_epilogue_jvp_mask(sr_dtype dt, void *y, int64_t n, int64_t k, int64_t rs, const sr_epilogue *e);

/* --- ReLU: one expression for the layer, the fused map and the residual's
 * clipping sum (y = x < 0 ? 0 : x: NaN passes, -0 stays), threaded. ---- */
/* y = relu(x) over n elements (y may be x). */
void sr_relu_apply(sr_dtype dt, void *y, const void *x, int64_t n);
/* ReLU's JVP on stacked rows: yt = vt where the primal row of x is > 0,
 * 0 where x < 0, and where x is 0 (either sign) 0 or, when directional,
 * max(vt, 0) (kernels/kink.h); n primal rows of rs elements, k tangents
 * each; yt may be vt.  kinks (directional only; may be NULL): n counts,
 * each row's zeros added to ties.  With n = k = 1, rs = all elements and
 * directional 0, the backward gx = gy·[x > 0]. */
void sr_relu_tangents(sr_dtype dt, void *yt, const void *vt, const void *x, int64_t n, int64_t k, int64_t rs,
                      int directional, sr_kinks *kinks);
/* out = a + b over n elements, clipped by the ReLU when relu (out may be a
 * or b). */
void sr_add_relu(sr_dtype dt, void *out, const void *a, const void *b, int64_t n, int relu);

#endif
