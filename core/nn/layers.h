/* layers.h - constructors of every leaf layer (one .c file per concept) and
 * the kernel entry points other C code (tests, the engine) calls directly. */
#ifndef SR_LAYERS_H
#define SR_LAYERS_H

#include "kernels/epilogue.h"
#include "nn/module.h"

/* linear.c */
sr_module *sr_linear_create(const sr_opts *o);
/* y = x Wᵀ (+ b on the first bias_rows rows); naive=1: reference loops. */
int sr_linear_apply(const sr_tensor *x, const sr_tensor *w, const sr_tensor *b, sr_tensor *y,
                    int64_t bias_rows, int naive);
/* Backward of y = x Wᵀ + b over rows × in -> out: gx = gy · W (written);
 * gW += gyᵀ · x and gb += Σ_rows gy when not NULL (attention's projections
 * use it too). */
void sr_linear_backward(sr_dtype dt, void *gx, void *gw, void *gb, const void *gy, const void *x, const void *w,
                        int64_t rows, int64_t in, int64_t out);

/* conv.c */
sr_module *sr_conv2d_create(const sr_opts *o);
/* conv_transpose.c */
sr_module *sr_conv_transpose2d_create(const sr_opts *o);

/* norm.c */
sr_module *sr_batchnorm2d_create(const sr_opts *o);
sr_module *sr_layernorm_create(const sr_opts *o);
sr_module *sr_normalize_create(const sr_opts *o);
sr_module *sr_affine_create(const sr_opts *o);
sr_module *sr_groupnorm_create(const sr_opts *o);

/* act.c */
sr_module *sr_relu_create(const sr_opts *o);
sr_module *sr_gelu_create(const sr_opts *o);
sr_module *sr_softmax_create(const sr_opts *o);
sr_module *sr_sigmoid_create(const sr_opts *o);
sr_module *sr_tanh_create(const sr_opts *o);
sr_module *sr_hardsigmoid_create(const sr_opts *o);
sr_module *sr_hardswish_create(const sr_opts *o);
sr_module *sr_leaky_relu_create(const sr_opts *o);
sr_module *sr_clip_create(const sr_opts *o);
sr_module *sr_elu_create(const sr_opts *o);
sr_module *sr_softplus_create(const sr_opts *o);
sr_module *sr_erf_create(const sr_opts *o);
sr_module *sr_sqrt_create(const sr_opts *o);
sr_module *sr_pow_create(const sr_opts *o);
sr_module *sr_exp_create(const sr_opts *o);
sr_module *sr_log_create(const sr_opts *o);
sr_module *sr_abs_create(const sr_opts *o);
sr_module *sr_neg_create(const sr_opts *o);
sr_module *sr_reciprocal_create(const sr_opts *o);

/* pool.c (and shape-only layers) */
sr_module *sr_maxpool2d_create(const sr_opts *o);
sr_module *sr_avgpool2d_create(const sr_opts *o);
sr_module *sr_adaptive_avgpool2d_create(const sr_opts *o);
sr_module *sr_flatten_create(const sr_opts *o);
sr_module *sr_permute_create(const sr_opts *o);
/* y = x with dims reordered: y.shape[d] = x.shape[perm[d]] (perm has nd
 * entries, perm[0] = 0); y is (re)used through sr_tensor_ensure. */
int sr_permute_apply(sr_tensor *y, const sr_tensor *x, int nd, const int *perm);

/* resize.c */
sr_module *sr_resize2d_create(const sr_opts *o);

/* attention.c */
sr_module *sr_attention_create(const sr_opts *o);
/* Reference loops (double accumulation) for tests: y = attention m applied to
 * xv (S,T,D); with k > 0, xv is stacked like jvp input (n primal samples, then
 * k tangents per primal) and y holds the outputs and JVPs.  y is allocated. */
int sr_attention_naive(const sr_module *m, const sr_tensor *xv, int64_t n, int64_t k, sr_tensor *y);

/* arith.c: elementwise add, sub, mul, div, max, min, pow of two inputs or
 * of the input and a constant */
sr_module *sr_add_create(const sr_opts *o);
sr_module *sr_sub_create(const sr_opts *o);
sr_module *sr_mul_create(const sr_opts *o);
sr_module *sr_div_create(const sr_opts *o);
sr_module *sr_max_create(const sr_opts *o);
sr_module *sr_min_create(const sr_opts *o);
/* a ^ b of two inputs, or x ^ c, c ^ x with a constant (pow: a constant exponent) */
sr_module *sr_pow_of_create(const sr_opts *o);

/* shape.c: reshape, slice, index_select, concat, pad */
sr_module *sr_reshape_create(const sr_opts *o);
sr_module *sr_slice_create(const sr_opts *o);
sr_module *sr_index_select_create(const sr_opts *o);
sr_module *sr_concat_create(const sr_opts *o);
sr_module *sr_pad_create(const sr_opts *o);
/* A constant piece of a concat (a parameter "constantQ" of the per-sample
 * shape, 0 on the tangent rows), at `position` among the pieces; constants
 * are added in increasing positions, at most SR_CONCAT_CONSTANTS. */
#define SR_CONCAT_CONSTANTS 8
sr_param *sr_concat_add_constant(sr_module *m, int position, int ndim, const int64_t *shape, int trainable);

/* reduce.c: sums and means over dims of a sample */
sr_module *sr_reduce_create(const sr_opts *o);

/* matmul.c: the product of two inputs */
sr_module *sr_matmul_create(const sr_opts *o);

/* tokens.c: ViT pieces */
sr_module *sr_to_tokens_create(const sr_opts *o);
sr_module *sr_cls_pos_create(const sr_opts *o);
sr_module *sr_token_select_create(const sr_opts *o);
sr_module *sr_layer_scale_create(const sr_opts *o);

#endif
