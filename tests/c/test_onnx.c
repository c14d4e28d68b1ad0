/* test_onnx.c - the ONNX reader and importer in C: whole imported graphs
 * (tests/fixtures/onnx, torchvision exports) against central differences
 * and the adjoint identity in float64, with the batch carried through their
 * attention reshapes and window partitions; malformed files and bad
 * imports as clear errors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import/onnx_import.h"
#include "io/npy.h"
#include "check.h"
#include "test.h"

static sr_module *import(const char *name, sr_dtype dt)
{
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/onnx/%s.onnx", name);
    sr_onnx_model m;
    sr_module *g = NULL;
    if (!sr_onnx_read(&m, path)) {
        sr_onnx_import_opts o = {.dtype = dt};
        g = sr_onnx_import(&m, &o, NULL);
    }
    sr_onnx_free(&m);
    return g;
}

/* The smooth architectures (GELU, SiLU: no kink a step could straddle). */
TEST(onnx_imported_graphs_derivatives)
{
    const char *names[] = {"vit_b_16", "swin_t", "convnext_tiny", "efficientnet_b0"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        sr_module *g = import(names[i], SR_F64);
        CHECK(g, "%s: %s", names[i], sr_errmsg());
        sr_tensor x = SR_TENSOR_INIT;
        CHECK_OK(check_randn(&x, 4, (int64_t[]){2, 3, 32, 32}, 3 + i));
        check_result r;
        CHECK_OK(check_module(g, &x, 2, 1e-6, 5, &r));
        CHECK(r.primal < 1e-12 && r.jvp_fd < 1e-6 && r.adjoint < 1e-11 && r.param_fd < 1e-6,
              "%s: primal %g jvp-fd %g adjoint %g param-fd %g", names[i], r.primal, r.jvp_fd, r.adjoint, r.param_fd);
        sr_tensor_free(&x);
        sr_module_release(g);
    }
}

/* LayerNormalization over several trailing dims is imported as a reshape,
 * srgeo's layernorm over the flattened dims and a reshape back: its
 * derivatives (input and the scale / bias, read as trainable parameters)
 * on ONNX's own node test model, when libonnx-testdata is installed. */
TEST(onnx_layernorm_over_trailing_dims_derivatives)
{
    const char *dir = "/usr/share/libonnx-testdata/data/node/test_layer_normalization_4d_axis1";
    char path[512];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("     (libonnx-testdata is not installed: not run)\n");
        return;
    }
    fclose(f);
    sr_onnx_model m;
    CHECK_OK(sr_onnx_read(&m, path));
    sr_onnx_tensor c[2] = {{0}, {0}};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", dir, i + 1);
        CHECK_OK(sr_onnx_read_tensor(&c[i], path));
    }
    /* X (2,3,4,5) normalised over its last three dims; the first as the batch */
    const char *names[2] = {m.inputs[1].name, m.inputs[2].name};
    const sr_onnx_tensor *vals[2] = {&c[0], &c[1]};
    sr_onnx_import_opts o = {.dtype = SR_F64, .input = m.inputs[0].name, .nsize = 3, .size = {3, 4, 5},
                             .nconst = 2, .const_names = names, .const_values = vals};
    sr_module *g = sr_onnx_import(&m, &o, NULL);
    CHECK(g, "import: %s", sr_errmsg());
    check_fill_params(g, 7, 0.5);
    sr_tensor x = SR_TENSOR_INIT;
    CHECK_OK(check_randn(&x, 4, (int64_t[]){2, 3, 4, 5}, 11));
    check_result r;
    CHECK_OK(check_module(g, &x, 3, 1e-6, 13, &r));
    CHECK(r.primal < 1e-12 && r.jvp_fd < 1e-6 && r.adjoint < 1e-11 && r.param_fd < 1e-6,
          "primal %g jvp-fd %g adjoint %g param-fd %g", r.primal, r.jvp_fd, r.adjoint, r.param_fd);
    sr_tensor_free(&x);
    sr_module_release(g);
    for (int i = 0; i < 2; i++)
        sr_onnx_tensor_free(&c[i]);
    sr_onnx_free(&m);
}
