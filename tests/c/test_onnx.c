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
