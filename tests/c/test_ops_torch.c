/* test_ops_torch.c - the layers imported graphs need, against PyTorch
 * fixtures (tests/fixtures/gen_ops.py): pointwise maps, softmax over any
 * dim, arithmetic with a (trainable) constant, slice, index_select, pad
 * (constant, channels, reflect, edge, crop), reshape, reduce, affine:
 * forward, forward-mode tangents, input and parameter gradients, in float32
 * (rel <= 1e-5, computed in float32 from the float32 fixtures) and float64
 * (rel <= 1e-12). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/npy.h"
#include "nn/layers.h"
#include "check.h"
#include "test.h"

static const torch_files files = {"tests/fixtures/ops/", 0, "jv", "p_", "g_"};

#define PW(name, ctor, ...) {name, ctor, name, .kv = {__VA_ARGS__}}
#define VALUE .params = {"value"}

/* Mirrors CASES in gen_ops.py. */
static const torch_case cases[] = {
    PW("sigmoid", sr_sigmoid_create, NULL),
    PW("tanh", sr_tanh_create, NULL),
    {"hardsigmoid", sr_hardsigmoid_create, "hardsigmoid", .kv = {"alpha", "0.16666666666666666", "beta", "0.5"}},
    PW("hardswish", sr_hardswish_create, NULL),
    {"leaky_relu", sr_leaky_relu_create, "leaky_relu", .kv = {"negative_slope", "0.1"}},
    {"relu6", sr_clip_create, "clip", .kv = {"min", "0", "max", "6"}},
    {"clip", sr_clip_create, "clip", .kv = {"min", "-1", "max", "0.5"}},
    {"elu", sr_elu_create, "elu", .kv = {"alpha", "0.7"}},
    PW("softplus", sr_softplus_create, NULL),
    PW("erf", sr_erf_create, NULL),
    PW("sqrt", sr_sqrt_create, NULL),
    {"pow2", sr_pow_create, "pow", .kv = {"exponent", "2"}},
    {"pow3", sr_pow_create, "pow", .kv = {"exponent", "3"}},
    {"pow2_5", sr_pow_create, "pow", .kv = {"exponent", "2.5"}},
    PW("exp", sr_exp_create, NULL),
    PW("log", sr_log_create, NULL),
    PW("abs", sr_abs_create, NULL),
    PW("neg", sr_neg_create, NULL),
    PW("reciprocal", sr_reciprocal_create, NULL),
    {"softmax_dim1", sr_softmax_create, "softmax", .kv = {"dim", "1"}},
    {"softmax_dim2", sr_softmax_create, "softmax", .kv = {"dim", "2"}},
    {"log_softmax_dim1", sr_softmax_create, "softmax", .kv = {"dim", "1", "log", "true"}},
    {"log_softmax_last", sr_softmax_create, "softmax", .kv = {"log", "true"}},
    {"add_channel", sr_add_create, "add", .kv = {"shape", "3,1,1", "trainable", "true"}, VALUE},
    {"sub_reverse", sr_sub_create, "sub", .kv = {"shape", "4,5", "reverse", "true", "trainable", "true"}, VALUE},
    {"mul_last", sr_mul_create, "mul", .kv = {"shape", "5", "trainable", "true"}, VALUE},
    {"mul_scalar", sr_mul_create, "mul", .kv = {"shape", "1", "trainable", "true"}, VALUE},
    {"div_channel", sr_div_create, "div", .kv = {"shape", "3,1,1", "trainable", "true"}, VALUE},
    {"div_reverse", sr_div_create, "div", .kv = {"shape", "1,5", "reverse", "true", "trainable", "true"}, VALUE},
    {"add_broadcast_up", sr_add_create, "add", .kv = {"shape", "4,5", "trainable", "true"}, VALUE},
    {"slice", sr_slice_create, "slice", .kv = {"dim", "2", "start", "1", "stop", "4", "step", "2"}},
    {"slice_reverse", sr_slice_create, "slice", .kv = {"dim", "3", "step", "-2"}},
    {"index_select", sr_index_select_create, "index_select", .kv = {"dim", "1", "index", "2,0,2"}},
    {"index_last", sr_index_select_create, "index_select", .kv = {"dim", "-1", "index", "-1"}},
    {"pad_constant", sr_pad_create, "pad", .kv = {"padding", "1,2,0,1", "value", "0.5"}},
    {"pad_channels", sr_pad_create, "pad", .kv = {"padding", "0,0,0,0,1,2"}},
    {"pad_reflect", sr_pad_create, "pad", .kv = {"padding", "2,1,1,2", "mode", "reflect"}},
    {"pad_edge", sr_pad_create, "pad", .kv = {"padding", "2,0,0,3", "mode", "edge"}},
    {"pad_crop", sr_pad_create, "pad", .kv = {"padding", "-1,1,1,-2"}},
    {"reshape", sr_reshape_create, "reshape", .kv = {"shape", "5,-1"}},
    {"mean_hw_keepdim", sr_reduce_create, "reduce", .kv = {"dims", "2,3", "keepdim", "true"}},
    {"sum_dim1", sr_reduce_create, "reduce", .kv = {"dims", "1", "op", "sum"}},
    {"mean_last", sr_reduce_create, "reduce", .kv = {"dims", "-1"}},
    {"affine_nchw", sr_affine_create, "affine", .kv = {"num_features", "3"}, .params = {"weight", "bias"}},
    {"affine_nc", sr_affine_create, "affine", .kv = {"num_features", "3"}, .params = {"weight", "bias"}},
    {"max_const", sr_max_create, "max", .kv = {"shape", "4,5", "trainable", "true"}, VALUE},
    {"min_const", sr_min_create, "min", .kv = {"shape", "3,1,1", "trainable", "true"}, VALUE},
    {"pow_of_const", sr_pow_of_create, "pow_of", .kv = {"shape", "5", "trainable", "true"}, VALUE},
    {"pow_of_reverse", sr_pow_of_create, "pow_of", .kv = {"shape", "5", "reverse", "true", "trainable", "true"},
     VALUE},
    {"reduce_max_hw", sr_reduce_create, "reduce", .kv = {"dims", "2,3", "op", "max", "keepdim", "true"}},
    {"reduce_min_dim1", sr_reduce_create, "reduce", .kv = {"dims", "1", "op", "min"}},
};

#define N (sizeof cases / sizeof *cases)

TEST(ops_torch_f32) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F32, 1e-5)); }
TEST(ops_torch_f64) { CHECK_OK(check_torch_cases(&files, cases, N, SR_F64, 1e-12)); }

/* The same layers' derivatives in float64 against central differences and
 * the adjoint identity, on each fixture's input (away from the kinks: a
 * step of 1e-6 straddles none of them there) and random parameters. */
TEST(ops_derivatives_f64)
{
    for (size_t i = 0; i < N; i++) {
        const torch_case *c = &cases[i];
        char path[256];
        snprintf(path, sizeof path, "%s%s_x_f64.npy", files.dir, c->name);
        sr_tensor x = SR_TENSOR_INIT;
        CHECK_OK(sr_npy_load(&x, path));
        sr_module *m = check_make_f64(c->create, c->op, c->kv);
        CHECK(m, "%s: %s", c->name, sr_errmsg());
        check_fill_params(m, 3 + i, 0.5);
        /* a divisor, and a base raised to a power, stay away from 0 */
        if (m->nparams && (c->create == sr_div_create || (c->create == sr_pow_of_create && strstr(c->name, "reverse"))))
            for (int64_t e = 0; e < sr_numel(&m->params[0].value); e++)
                sr_f64(&m->params[0].value)[e] = 1 + fabs(sr_f64(&m->params[0].value)[e]);
        check_result r;
        CHECK_OK(check_module(m, &x, 2, 1e-6, 9 + i, &r));
        CHECK(r.primal < 1e-12 && r.jvp_fd < 1e-6 && r.adjoint < 1e-12 && r.param_fd < 1e-6,
              "%s: primal %g jvp-fd %g adjoint %g param-fd %g", c->name, r.primal, r.jvp_fd, r.adjoint, r.param_fd);
        sr_module_release(m);
        sr_tensor_free(&x);
    }
}
