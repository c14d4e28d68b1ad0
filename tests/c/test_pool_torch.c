/* test_pool_torch.c - pooling, shape and token layers against PyTorch
 * fixtures (tests/fixtures/gen_pool.py): forward, forward-mode tangents,
 * input and parameter gradients, in float32 (rel <= 1e-5, computed in float32
 * from the float32 fixtures) and float64 (rel <= 1e-10). */
#include "nn/layers.h"
#include "check.h"
#include "test.h"

static const torch_files files = {"tests/fixtures/pool/", 0, "jv", "p_", "g_"};

/* Mirrors CASES in gen_pool.py. */
static const torch_case cases[] = {
    {"maxpool_k3s2p1", sr_maxpool2d_create, "maxpool2d", .kv = {"kernel_size", "3", "stride", "2", "padding", "1"}},
    {"maxpool_k2", sr_maxpool2d_create, "maxpool2d", .kv = {"kernel_size", "2"}},
    {"avgpool_k3s2p1", sr_avgpool2d_create, "avgpool2d", .kv = {"kernel_size", "3", "stride", "2", "padding", "1"}},
    {"avgpool_k3s2p1_nopad", sr_avgpool2d_create, "avgpool2d",
     .kv = {"kernel_size", "3", "stride", "2", "padding", "1", "count_include_pad", "false"}},
    {"avgpool_k32s21p11", sr_avgpool2d_create, "avgpool2d",
     .kv = {"kernel_size", "3,2", "stride", "2,1", "padding", "1,1", "count_include_pad", "false"}},
    {"adaptive_1", sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", .kv = {"output_size", "1"}},
    {"adaptive_3", sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", .kv = {"output_size", "3"}},
    {"adaptive_3x2", sr_adaptive_avgpool2d_create, "adaptive_avgpool2d", .kv = {"output_size", "3,2"}},
    {"flatten", sr_flatten_create, "flatten", .kv = {0}},
    {"permute_0231", sr_permute_create, "permute", .kv = {"dims", "0,2,3,1"}},
    {"permute_0312", sr_permute_create, "permute", .kv = {"dims", "0,3,1,2"}},
    {"to_tokens", sr_to_tokens_create, "to_tokens", .kv = {0}},
    {"cls_pos", sr_cls_pos_create, "cls_pos", .kv = {"dim", "6", "num_patches", "12"},
     .params = {"cls_token", "pos_embed"}},
    {"pos_only", sr_cls_pos_create, "cls_pos", .kv = {"dim", "6", "num_patches", "12", "cls", "false"},
     .params = {"pos_embed"}},
    {"token_index0", sr_token_select_create, "token_select", .kv = {0}},
    {"token_mean", sr_token_select_create, "token_select", .kv = {"pool", "mean"}},
    {"token_mean1", sr_token_select_create, "token_select", .kv = {"pool", "mean", "start", "1"}},
    {"layer_scale_last", sr_layer_scale_create, "layer_scale", .kv = {"dim", "6"}, .params = {"gamma"}},
    {"layer_scale_channels", sr_layer_scale_create, "layer_scale",
     .kv = {"dim", "6", "dim_axis", "channels", "name", "layer_scale"}, .params = {"layer_scale"}},
    {"maxpool_k3s2_ceil", sr_maxpool2d_create, "maxpool2d", .kv = {"kernel_size", "3", "stride", "2", "ceil_mode", "true"}},
    {"maxpool_k3s2p1_ceil", sr_maxpool2d_create, "maxpool2d",
     .kv = {"kernel_size", "3", "stride", "2", "padding", "1", "ceil_mode", "true"}},
    {"avgpool_k3s2_ceil", sr_avgpool2d_create, "avgpool2d", .kv = {"kernel_size", "3", "stride", "2", "ceil_mode", "true"}},
    {"avgpool_k3s2p1_ceil_nopad", sr_avgpool2d_create, "avgpool2d",
     .kv = {"kernel_size", "3", "stride", "2", "padding", "1", "ceil_mode", "true", "count_include_pad", "false"}},
    {"maxpool_k3s2_pad0101", sr_maxpool2d_create, "maxpool2d",
     .kv = {"kernel_size", "3", "stride", "2", "padding", "0,1,1,1"}},
    {"avgpool_k2s2_pad0011", sr_avgpool2d_create, "avgpool2d",
     .kv = {"kernel_size", "2", "stride", "2", "padding", "0,0,1,1"}},
    /* F.interpolate: mode="nearest" is asymmetric + floor, bilinear half_pixel or align_corners */
    {"resize_nearest_x2", sr_resize2d_create, "resize2d",
     .kv = {"scale", "2", "coordinate", "asymmetric", "nearest", "floor"}},
    {"resize_nearest_7x5", sr_resize2d_create, "resize2d",
     .kv = {"size", "7,5", "coordinate", "asymmetric", "nearest", "floor"}},
    {"resize_bilinear_x2", sr_resize2d_create, "resize2d", .kv = {"scale", "2", "mode", "linear"}},
    {"resize_bilinear_corners", sr_resize2d_create, "resize2d",
     .kv = {"size", "7,9", "mode", "linear", "coordinate", "align_corners"}},
    {"resize_bilinear_down", sr_resize2d_create, "resize2d",
     .kv = {"size", "3,2", "mode", "linear", "coordinate", "pytorch_half_pixel"}},
    /* bicubic: Keys' a = -0.75, half_pixel (not clamped) or align_corners */
    {"resize_bicubic_x2", sr_resize2d_create, "resize2d", .kv = {"scale", "2", "mode", "cubic"}},
    {"resize_bicubic_corners", sr_resize2d_create, "resize2d",
     .kv = {"size", "7,9", "mode", "cubic", "coordinate", "align_corners"}},
    {"resize_bicubic_down", sr_resize2d_create, "resize2d", .kv = {"size", "3,2", "mode", "cubic"}},
};

#define N (sizeof cases / sizeof *cases)

TEST(pool_torch_f32) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F32, 1e-5)); }
TEST(pool_torch_f64) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F64, 1e-10)); }
