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
    {"conv2d", sr_conv2d_create, "in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=true"},
    {"batchnorm2d", sr_batchnorm2d_create, "num_features, eps=1e-5, momentum=0.1"},
    {"layernorm", sr_layernorm_create, "normalized_shape, eps=1e-5 (1e-6 for ViT), dim=\"last\"|\"channels\", affine=true"},
    {"normalize", sr_normalize_create, "mean={...}, std={...}: per-channel (x-mean)/std on NCHW input"},
    {"relu", sr_relu_create, "(no options)"},
    {"gelu", sr_gelu_create, "approximate=\"none\"|\"tanh\""},
    {"softmax", sr_softmax_create, "over the last dimension"},
    {"maxpool2d", sr_maxpool2d_create, "kernel_size, stride=kernel_size, padding=0 (each an int or {h,w})"},
    {"avgpool2d", sr_avgpool2d_create, "kernel_size, stride=kernel_size, padding=0 (each an int or {h,w}), count_include_pad=true"},
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
