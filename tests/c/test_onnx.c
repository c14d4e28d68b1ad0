/* test_onnx.c - the ONNX reader and importer in C: whole imported graphs
 * (tests/fixtures/onnx, torchvision exports) against central differences
 * and the adjoint identity in float64, with the batch carried through their
 * attention reshapes and window partitions; malformed files and bad
 * imports as clear errors; the wire check's depth and size bounds; folding
 * interrupted. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

#include "import/onnx_fold.h"
#include "import/onnx_import.h"
#include "io/pbwire.h"
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

/* The wire check (io/pbwire.c) before protobuf-c: ModelProto -> GraphProto
 * -> ValueInfoProto -> TypeProto -> (Sequence -> TypeProto)* nests 4 + 2k
 * messages deep; at most the limit passes, one more is refused naming the
 * field.  Its cost is what protobuf-c would hold: n empty nodes cost n
 * NodeProto structs and pointers, so a bound below that refuses them. */
static size_t put_len(uint8_t *out, int field, const uint8_t *body, size_t n)
{
    size_t k = 0;
    out[k++] = (uint8_t)(field << 3 | 2);
    for (size_t v = n;; v >>= 7) {
        out[k++] = (uint8_t)((v & 0x7f) | (v >> 7 ? 0x80 : 0));
        if (!(v >> 7))
            break;
    }
    memmove(out + k, body, n);
    return k + n;
}

static size_t nested_types(uint8_t *buf, size_t cap, int k)
{
    uint8_t *a = malloc(cap), *b = malloc(cap);
    size_t n = 0; /* an empty TypeProto */
    for (int i = 0; i < k; i++) {
        n = put_len(b, 1, a, n); /* Sequence.elem_type */
        n = put_len(a, 4, b, n); /* TypeProto.sequence_type */
    }
    n = put_len(b, 2, a, n);     /* ValueInfoProto.type */
    n = put_len(a, 13, b, n);    /* GraphProto.value_info */
    n = put_len(buf, 7, a, n);   /* ModelProto.graph */
    free(a);
    free(b);
    return n;
}

TEST(onnx_wire_check_bounds_depth_and_unpacked_size)
{
    static uint8_t buf[1 << 16];
    sr_pb_cost cost;
    /* 4 + 2·30 = 64 deep passes, 66 is refused */
    size_t n = nested_types(buf, sizeof buf, 30);
    CHECK_OK(sr_pb_check(&onnx__model_proto__descriptor, buf, n, 64, SIZE_MAX, &cost));
    CHECK(cost.depth == 64, "depth %d", cost.depth);
    n = nested_types(buf, sizeof buf, 31);
    CHECK_ERR(sr_pb_check(&onnx__model_proto__descriptor, buf, n, 64, SIZE_MAX, NULL),
              "messages nested more than 64 deep (TypeProto.sequence_type at byte");
    /* 10,000 empty nodes in a graph: each a NodeProto and its pointer */
    static uint8_t nodes[20000];
    for (int i = 0; i < 10000; i++)
        nodes[2 * i] = 0x0a, nodes[2 * i + 1] = 0;
    n = put_len(buf, 7, nodes, sizeof nodes);
    CHECK_OK(sr_pb_check(&onnx__model_proto__descriptor, buf, n, 64, SIZE_MAX, &cost));
    size_t per = onnx__node_proto__descriptor.sizeof_message + 8;
    CHECK(cost.messages == 10002 && cost.bytes >= 10000 * per && cost.bytes < 10000 * (per + 64) + 4096,
          "%zu messages, %zu bytes (%zu per node at least)", cost.messages, cost.bytes, per);
    CHECK_ERR(sr_pb_check(&onnx__model_proto__descriptor, buf, n, 64, 10000 * per, NULL), "unpacking would take more than");
    /* malformed: a length past the end, a group, field 0 */
    CHECK_ERR(sr_pb_check(&onnx__model_proto__descriptor, buf, n - 1, 64, SIZE_MAX, NULL), "cut short at byte 0");
    CHECK_ERR(sr_pb_check(&onnx__model_proto__descriptor, (const uint8_t[]){0x0b}, 1, 64, SIZE_MAX, NULL), "wire type 3");
    CHECK_ERR(sr_pb_check(&onnx__model_proto__descriptor, (const uint8_t[]){0x02, 0x00}, 2, 64, SIZE_MAX, NULL),
              "a bad field key at byte 0");
}

/* Folding a MatMul honours Ctrl-C between rows (the import checks it
 * between nodes): with the flag raised, the fold stops with "interrupted". */
TEST(onnx_fold_matmul_is_interruptible)
{
    sr_fold_val w = {0}, out = {0};
    sr_tensor t = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_alloc(&t, SR_F64, 2, (int64_t[]){64, 64}));
    sr_tensor_fill(&t, 1);
    CHECK_OK(sr_fold_val_set(&w, SR_ONNX_FLOAT, &t));
    char *ins[2] = {"w", "w"}, *outs[1] = {"p"};
    sr_onnx_node node = {.name = "mm", .op_type = "MatMul", .domain = "", .ninputs = 2, .noutputs = 1,
                         .inputs = ins, .outputs = outs};
    sr_fold_val *in[2] = {&w, &w};
    CHECK_OK(sr_fold_node(&node, 13, in, &out, 1 << 20));
    CHECK(sr_f64(&out.v[0])[0] == 64, "w·w = %g", sr_f64(&out.v[0])[0]);
    CHECK(sr_fold_work(&node, in) == 1 + 2 * 4096 + 64 * 64 * 64, "work %lld", (long long)sr_fold_work(&node, in));
    sr_interrupt_raise();
    CHECK_ERR(sr_fold_node(&node, 13, in, &out, 1 << 20), "interrupted");
    CHECK(!sr_interrupt_pending(), "the flag is cleared");
    sr_fold_val_free(&w);
    sr_fold_val_free(&out);
    sr_tensor_free(&t);
}
