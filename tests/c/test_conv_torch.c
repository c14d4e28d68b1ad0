/* test_conv_torch.c - conv2d against PyTorch's F.conv2d: forward, forward-mode
 * AD tangents and backward, from tests/fixtures/gen_conv.py (cases mirrored
 * here).  float32 in float32 (rel <= 1e-5), float64 (rel <= 1e-10). */
#include "nn/layers.h"
#include "check.h"
#include "test.h"

#define K 2 /* tangents per input, as in the generator */

static const torch_files files = {"tests/fixtures/conv/", 0, "jv", "", "g_"};

#define CONV sr_conv2d_create, "conv2d"
#define WB {"weight", "bias"}, {0}, K, 0, 1

static const torch_case cases[] = {
    {"k3p1", CONV, {"in_channels", "3", "out_channels", "4", "kernel_size", "3", "padding", "1"}, WB},
    {"k32s2p10", CONV,
     {"in_channels", "4", "out_channels", "6", "kernel_size", "3,2", "stride", "2", "padding", "1,0"}, WB},
    {"k3d2p2", CONV,
     {"in_channels", "3", "out_channels", "5", "kernel_size", "3", "padding", "2", "dilation", "2"}, WB},
    {"k3s12g2_nobias", CONV,
     {"in_channels", "6", "out_channels", "4", "kernel_size", "3", "stride", "1,2", "padding", "1", "groups", "2",
      "bias", "false"},
     {"weight"}, {0}, K, 0, 1},
    {"depthwise_x2_s2", CONV,
     {"in_channels", "4", "out_channels", "8", "kernel_size", "3", "stride", "2", "padding", "1", "groups", "4"},
     WB},
    {"k1", CONV, {"in_channels", "8", "out_channels", "5", "kernel_size", "1"}, WB},
    {"k1s2", CONV, {"in_channels", "4", "out_channels", "3", "kernel_size", "1", "stride", "2"}, WB},
    {"k3s2_same_tf", CONV,
     {"in_channels", "3", "out_channels", "4", "kernel_size", "3", "stride", "2", "padding", "0,0,1,1"}, WB},
    {"k3_pad1020", CONV, {"in_channels", "3", "out_channels", "4", "kernel_size", "3", "padding", "1,0,2,0"}, WB},
    {"depthwise_s2_pad0110", CONV,
     {"in_channels", "4", "out_channels", "4", "kernel_size", "3", "stride", "2", "padding", "0,1,1,0", "groups",
      "4"},
     WB},
};

#define N (sizeof cases / sizeof *cases)

TEST(conv_matches_torch_f32) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F32, 1e-5)); }
TEST(conv_matches_torch_f64) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F64, 1e-10)); }
