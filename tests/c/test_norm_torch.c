/* test_norm_torch.c - normalisation layers and activations against PyTorch
 * fixtures (tests/fixtures/gen_norm.py): forward, forward-mode tangents
 * (batchnorm train: joint tangents of the batch statistics), input and
 * parameter gradients, and the running statistics after one train-mode
 * forward; float32 (rel <= 1e-5, computed in float32 from the float32
 * fixtures) and float64 (rel <= 1e-12). */
#include "nn/layers.h"
#include "check.h"
#include "test.h"

static const torch_files files = {"tests/fixtures/norm/", 0, "jv", "p_", "g_"};

#define BN_PARAMS .params = {"weight", "bias", "running_mean", "running_var"}, .grads = {"weight", "bias"}

/* Mirrors CASES in gen_norm.py. */
static const torch_case cases[] = {
    {"bn_eval", sr_batchnorm2d_create, "batchnorm2d", .kv = {"num_features", "4"}, BN_PARAMS},
    {"bn_train", sr_batchnorm2d_create, "batchnorm2d", .kv = {"num_features", "4"}, BN_PARAMS, .training = 1},
    {"ln_last", sr_layernorm_create, "layernorm", .kv = {"normalized_shape", "8", "eps", "1e-6"},
     .params = {"weight", "bias"}},
    {"ln_channels", sr_layernorm_create, "layernorm",
     .kv = {"normalized_shape", "6", "eps", "1e-6", "dim", "channels"}, .params = {"weight", "bias"}},
    {"normalize", sr_normalize_create, "normalize",
     .kv = {"mean", "0.485,0.456,0.406", "std", "0.229,0.224,0.225"}},
    {"relu", sr_relu_create, "relu", .kv = {0}},
    {"gelu_none", sr_gelu_create, "gelu", .kv = {0}},
    {"gelu_tanh", sr_gelu_create, "gelu", .kv = {"approximate", "tanh"}},
    {"softmax", sr_softmax_create, "softmax", .kv = {0}},
    {"gn_2x3", sr_groupnorm_create, "groupnorm", .kv = {"num_groups", "2", "num_channels", "6"},
     .params = {"weight", "bias"}},
    {"gn_1d", sr_groupnorm_create, "groupnorm", .kv = {"num_groups", "2", "num_channels", "4"},
     .params = {"weight", "bias"}},
    {"instance_norm", sr_groupnorm_create, "groupnorm", .kv = {"num_groups", "4", "num_channels", "4"},
     .params = {"weight", "bias"}},
};

#define N (sizeof cases / sizeof *cases)

TEST(norm_torch_f32) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F32, 1e-5)); }
TEST(norm_torch_f64) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F64, 1e-12)); }
