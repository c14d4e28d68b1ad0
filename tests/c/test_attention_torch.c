/* test_attention_torch.c - attention vs PyTorch references written by
 * tests/fixtures/gen_attention.py (timm's Attention written out in torch, and
 * torch.nn.MultiheadAttention for the torchvision style): forward, stacked
 * JVP, input and parameter gradients, in float32 and float64. */
#include <math.h>

#include "nn/layers.h"
#include "check.h"
#include "test.h"

/* float64 fixtures, converted to the run dtype */
static const torch_files files = {"tests/fixtures/attention/", 1, "jvp", "", "grad_"};

#define ATTN(dim, heads, style, bias) \
    sr_attention_create, "attention", {"dim", dim, "num_heads", heads, "style", style, "qkv_bias", bias, NULL}

static const torch_case cases[] = {
    {"timm", ATTN("32", "4", "timm", "true"),
     {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"}, {0}, 2, 0, 1},
    {"timm_nobias", ATTN("8", "2", "timm", "false"), {"qkv.weight", "proj.weight", "proj.bias"}, {0}, 1, 0, 1},
    {"tv", ATTN("24", "3", "torchvision", "true"),
     {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}, {0}, 2, 0, 1},
    {"tv_nobias", ATTN("8", "1", "torchvision", "false"), {"in_proj_weight", "out_proj.weight"}, {0}, 1, 0, 1},
};

#define N (sizeof cases / sizeof *cases)

/* These tolerances were strict (rel < tol): the largest double below tol
 * keeps them so under check_torch_cases' rel <= tol. */
TEST(attention_torch_f32) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F32, nextafter(1e-5, 0))); }
TEST(attention_torch_f64) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F64, nextafter(1e-10, 0))); }
