/* fuzz_onnx.c - libFuzzer target: the ONNX reader and the importer.  Any
 * byte string must be rejected with an error or parse into a model whose
 * import (constant folding, the module graph, with and without a batch
 * axis) succeeds or fails cleanly, within the bounds folding sets (a few
 * bytes may not ask for gigabytes).  Running an imported graph is left to
 * the layers' own tests: a valid graph may legitimately be big.
 *
 * Graph inputs after the first are given as constants (as ONNX's node tests
 * are run, tests/lua/onnx_spec.lua): of their declared type and shape
 * (symbolic dims 1), small, their values drawn from the input bytes, so
 * the fuzzer reaches the ops behind them instead of stopping at "srgeo
 * takes one image input".
 * The corpus: hand-made models (a small CNN with a residual sum, attention
 * with folded shape arithmetic), a few of ONNX's backend node tests, and
 * the inputs that once crashed or were read wrong (regress_*, also
 * replayed by onnx_spec: nesting that overflowed protobuf-c's stack,
 * attributes of the wrong type, indices and pads checked only at the
 * first forward). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "import/onnx_import.h"
#include "io/onnx.h"

enum { MAX_CONST = 8, MAX_CONST_VALUES = 4096 };

static int is_init(const sr_onnx_model *m, const char *name)
{
    for (int i = 0; i < m->ninits; i++)
        if (!strcmp(m->inits[i].name, name))
            return 1;
    return 0;
}

/* The constant for graph input v, its values from data: 0, or -1 (too big). */
static int make_const(sr_onnx_tensor *t, const sr_onnx_value *v, const uint8_t *data, size_t size)
{
    int64_t shape[SR_MAXDIM], n = 1;
    for (int d = 0; d < v->ndim; d++) {
        shape[d] = v->dims[d] < 1 ? 1 : v->dims[d];
        if (shape[d] > MAX_CONST_VALUES || (n *= shape[d]) > MAX_CONST_VALUES)
            return -1;
    }
    t->name = v->name;
    t->type = v->type;
    t->value = (sr_tensor)SR_TENSOR_INIT;
    if (sr_tensor_alloc(&t->value, SR_F64, v->ndim, shape))
        return -1;
    int ints = sr_onnx_type_is_int(v->type);
    for (int64_t i = 0; i < n; i++) {
        uint8_t b = size ? data[(size_t)i % size] : 0;
        sr_f64(&t->value)[i] = ints ? b % 4 : (b - 128) / 32.0;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sr_onnx_model m;
    if (sr_onnx_parse(&m, data, size, NULL, "fuzz") == 0) {
        sr_onnx_tensor consts[MAX_CONST];
        const sr_onnx_tensor *cv[MAX_CONST];
        const char *cn[MAX_CONST];
        const char *image = NULL;
        int nc = 0, ok = 1;
        for (int i = 0; i < m.ninputs && ok; i++) {
            if (is_init(&m, m.inputs[i].name))
                continue;
            if (!image) {
                image = m.inputs[i].name;
            } else if (nc < MAX_CONST && make_const(&consts[nc], &m.inputs[i], data, size) == 0) {
                cn[nc] = consts[nc].name, cv[nc] = &consts[nc];
                nc++;
            } else {
                ok = 0;
            }
        }
        for (int no_batch = 0; no_batch < 2 && ok; no_batch++) {
            sr_onnx_import_opts o = {.dtype = no_batch ? SR_F64 : SR_F32, .no_batch = no_batch, .raw = 1,
                                     .input = image, .nconst = nc, .const_names = cn, .const_values = cv};
            sr_module *g = sr_onnx_import(&m, &o, NULL);
            if (g)
                sr_module_release(g);
        }
        for (int i = 0; i < nc; i++)
            sr_tensor_free(&consts[i].value);
    }
    sr_onnx_free(&m);
    return 0;
}
