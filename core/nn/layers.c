/* layers.c - the registry behind srgeo.nn.NAME{...}: one row per leaf layer,
 * with its options and defaults (shown by help and on a bad option). */
#include <string.h>

#include "nn/layers.h"

static sr_module *identity_create(const sr_opts *o)
{
    (void)o;
    return sr_identity_new();
}

const sr_layer_def sr_layers[] = {
    {"linear", sr_linear_create, "in_features, out_features, bias=true, weight_name=\"weight\", bias_name=\"bias\""},
    {"conv2d", sr_conv2d_create, "in_channels, out_channels, kernel_size, stride=1, padding=0 (or {h,w}, or {top,left,bottom,right}), dilation=1, groups=1, bias=true"},
    {"conv_transpose2d", sr_conv_transpose2d_create, "in_channels, out_channels, kernel_size, stride=1, padding=0 (or {h,w}, or {top,left,bottom,right}), output_padding=0, dilation=1, groups=1, bias=true: weight (in, out/groups, kh, kw) as torch's ConvTranspose2d"},
    {"batchnorm2d", sr_batchnorm2d_create, "num_features, eps=1e-5, momentum=0.1"},
    {"layernorm", sr_layernorm_create, "normalized_shape, eps=1e-5 (1e-6 for ViT), dim=\"last\"|\"channels\", affine=true"},
    {"normalize", sr_normalize_create, "mean={...}, std={...}: per-channel (x-mean)/std on NCHW input"},
    {"affine", sr_affine_create, "num_features: x * weight + bias per channel (dim 1)"},
    {"groupnorm", sr_groupnorm_create, "num_groups, num_channels, eps=1e-5, affine=true: (N,C,...) normalised over each group of C/num_groups channels (instance norm: num_groups=num_channels)"},
    {"relu", sr_relu_create, "(no options)"},
    {"gelu", sr_gelu_create, "approximate=\"none\"|\"tanh\""},
    {"softmax", sr_softmax_create, "dim=-1: over one dimension (the last by default), log=false (true: log-softmax)"},
    {"sigmoid", sr_sigmoid_create, "(no options)"},
    {"tanh", sr_tanh_create, "(no options)"},
    {"hardsigmoid", sr_hardsigmoid_create, "alpha=0.2, beta=0.5: max(0, min(1, alpha*x + beta)) (torch's: alpha=1/6)"},
    {"hardswish", sr_hardswish_create, "(no options): x * relu6(x + 3) / 6"},
    {"leaky_relu", sr_leaky_relu_create, "negative_slope=0.01"},
    {"clip", sr_clip_create, "min=-inf, max=inf (ReLU6: min=0, max=6)"},
    {"elu", sr_elu_create, "alpha=1"},
    {"softplus", sr_softplus_create, "(no options): log(1 + e^x)"},
    {"erf", sr_erf_create, "(no options)"},
    {"sqrt", sr_sqrt_create, "(no options)"},
    {"pow", sr_pow_create, "exponent: x^exponent"},
    {"exp", sr_exp_create, "(no options)"},
    {"log", sr_log_create, "(no options)"},
    {"abs", sr_abs_create, "(no options)"},
    {"neg", sr_neg_create, "(no options)"},
    {"reciprocal", sr_reciprocal_create, "(no options): 1/x"},
    {"maxpool2d", sr_maxpool2d_create, "kernel_size, stride=kernel_size, padding=0 (each an int or {h,w}; padding also {top,left,bottom,right}), ceil_mode=false"},
    {"avgpool2d", sr_avgpool2d_create, "kernel_size, stride=kernel_size, padding=0 (each an int or {h,w}; padding also {top,left,bottom,right}), ceil_mode=false, count_include_pad=true"},
    {"resize2d", sr_resize2d_create, "size={h,w} or scale={sh,sw}, mode=\"nearest\"|\"linear\"|\"cubic\", cubic_a=-0.75 (TensorFlow: -0.5), exclude_outside=false, coordinate=\"half_pixel\"|\"pytorch_half_pixel\"|\"asymmetric\"|\"align_corners\"|\"tf_half_pixel_for_nn\", nearest=\"round_prefer_floor\"|\"round_prefer_ceil\"|\"floor\"|\"ceil\" (ONNX Resize; torch F.interpolate: nearest = asymmetric + floor, bilinear and bicubic = half_pixel or align_corners)"},
    {"adaptive_avgpool2d", sr_adaptive_avgpool2d_create, "output_size=1 or {h,w}"},
    {"flatten", sr_flatten_create, "start_dim=1, end_dim=-1: (N,C,H,W) -> (N,C*H*W)"},
    {"permute", sr_permute_create, "dims={0,2,3,1}: reorder dimensions (dim 0 stays the batch)"},
    {"attention", sr_attention_create, "dim, num_heads, qkv_bias=true, style=\"timm\"|\"torchvision\": multi-head self-attention on (N,T,D)"},
    {"to_tokens", sr_to_tokens_create, "(N,C,H,W) -> (N,H*W,C)"},
    {"cls_pos", sr_cls_pos_create, "dim, num_patches, cls=true, cls_name=\"cls_token\", pos_name=\"pos_embed\": prepend class token, add position embedding"},
    {"token_select", sr_token_select_create, "index=0 | pool=\"token\"|\"mean\", start=0 (mean from token start): (N,T,D) -> (N,D)"},
    {"layer_scale", sr_layer_scale_create, "dim, init=1e-6, name=\"gamma\", dim_axis=\"last\"|\"channels\""},
    {"add", sr_add_create, "(two inputs, in a graph) | shape={...} or value=c, reverse=false, trainable=false: x + c"},
    {"sub", sr_sub_create, "(two inputs, in a graph) | shape={...} or value=c, reverse=false (c - x), trainable=false"},
    {"mul", sr_mul_create, "(two inputs, in a graph) | shape={...} or value=c, reverse=false, trainable=false: x * c"},
    {"div", sr_div_create, "(two inputs, in a graph) | shape={...} or value=c, reverse=false (c / x), trainable=false"},
    {"max", sr_max_create, "(two inputs, in a graph) | shape={...} or value=c, trainable=false: the larger (NaN wins)"},
    {"min", sr_min_create, "(two inputs, in a graph) | shape={...} or value=c, trainable=false: the smaller (NaN wins)"},
    {"pow_of", sr_pow_of_create, "(two inputs, in a graph: a ^ b) | shape={...} or value=c, reverse=false (c ^ x), trainable=false"},
    {"reshape", sr_reshape_create, "shape={...}: (N, ...) -> (N, shape...), one entry may be -1 (a view)"},
    {"slice", sr_slice_create, "dim=1, start=0, stop=end, step=1: entries start, start+step, ... before stop (Python rules)"},
    {"index_select", sr_index_select_create, "dim=1, index={...}: the entries at these 0-based positions, in order"},
    {"concat", sr_concat_create, "dim=1: the inputs joined along dim (in a graph)"},
    {"pad", sr_pad_create, "padding={before, after, ...} (last dim first, as F.pad; negative crops), mode=\"constant\"|\"reflect\"|\"edge\", value=0"},
    {"reduce", sr_reduce_create, "dims={...}, op=\"mean\"|\"sum\"|\"max\"|\"min\", keepdim=false: over dims of a sample (>= 1)"},
    {"matmul", sr_matmul_create, "(two inputs, in a graph): a @ b with numpy's matmul rules after the batch dim"},
    {"identity", identity_create, "(no options); also dropout and stochastic depth at eval"},
    {NULL, NULL, NULL},
};

const sr_layer_def *sr_layer_lookup(const char *name)
{
    for (const sr_layer_def *d = sr_layers; d->name; d++)
        if (strcmp(d->name, name) == 0)
            return d;
    return NULL;
}
