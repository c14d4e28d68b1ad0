/* onnx_import.h - an ONNX model (io/onnx.h) as a module graph
 * (nn/graph.c): every node that depends on the input becomes a graph node
 * (a layer from the registry: conv2d, batchnorm2d, linear, add, matmul,
 * softmax, ...) with exact forward, stacked JVP and backward; everything
 * else is folded into constants at import (onnx_fold.h).
 *
 * The batch.  ONNX values carry the batch as one of their dims, and
 * exporters move it (a transpose puts it second, a reshape folds it into
 * windows or heads); srgeo's modules take it first.  Each imported value
 * is therefore kept as (batch, sample dims) in memory, with the position
 * of the batch among the ONNX value's dims recorded beside it (and whether
 * it is merged into one of them, batch-major, as (B·windows, T, C) is):
 * every ONNX op becomes the per-sample op that leaves the batch in front,
 * so the graph runs any batch size, and a JVP's stacked rows stay rows.
 * Shapes computed in the graph are folded at two batch sizes, which tells
 * the entries that are the batch apart from those that are not; a shape
 * baked for one batch size puts the batch in the leftmost dim that can
 * hold it.
 *
 * Errors name the node, its op and what is wrong (an op or attribute srgeo
 * does not support, a dynamic shape it cannot fix, an operand across the
 * batch). */
#ifndef SR_ONNX_IMPORT_H
#define SR_ONNX_IMPORT_H

#include "io/onnx.h"
#include "nn/module.h"

typedef struct {
    sr_dtype dtype;             /* of the parameters (default float32) */
    int no_batch;               /* the input has no batch dim (ONNX's node tests): the graph takes
                                 * (1, input dims...) */
    const char *input;          /* the image input (default: the only input that is not an initializer
                                 * nor given in constants) */
    const char *output;         /* the value returned (default: the first graph output); only the nodes
                                 * it depends on are imported */
    int nsize;                  /* input_size: the input's sample dims (C,H,W), for symbolic ones */
    int64_t size[SR_MAXDIM];
    int nmean;                  /* mean / std (nmean values each): a normalize node in front; without
                                 * them the model's metadata srgeo.mean / srgeo.std (comma-separated,
                                 * as scripts/convert_torch.py --onnx writes them) give it */
    const double *mean, *std;
    int raw;                    /* the input is raw pixels: no normalisation, whatever the metadata says */
    /* Further graph inputs given as constants (ONNX's node tests). */
    int nconst;
    const char *const *const_names;
    const sr_onnx_tensor *const *const_values;
} sr_onnx_import_opts;

enum { SR_ONNX_NORM_NONE, SR_ONNX_NORM_GIVEN, SR_ONNX_NORM_METADATA };

/* What the import found, for the caller's choices and messages. */
typedef struct {
    int ndim;                    /* the input's sample dims as imported (C,H,W for an NHWC file) */
    int64_t sample[SR_MAXDIM];
    int nhwc;                    /* the file's input is (N, H, W, C): the graph takes (N, C, H, W) and
                                  * permutes it first */
    char features[512];          /* the input of the classifier head (Gemm/MatMul) when there is one,
                                  * as a graph value name ("" otherwise); aliased "embedding" (and
                                  * "features"); the value returned is aliased "output" */
    int scores;                  /* the head makes class scores (a softmax after it, or as many outputs
                                  * as a common label set: 10, 100, 1000, ImageNet-21k's): the default
                                  * tap is then "embedding" */
    char tap[16];                /* the default tap: "embedding" or "output" */
    int normalizes;              /* the graph's first ops are Mul / Add / Sub / Div by constants (x·255,
                                  * (x − mean)/std), described in preprocess */
    char preprocess[256];
    int normalization;           /* the normalize node in front: SR_ONNX_NORM_* */
    int nodes, folded;           /* graph nodes made, ONNX nodes folded into constants */
    int pruned;                  /* ONNX nodes left out: the value returned does not depend on them */
} sr_onnx_import_info;

/* The graph, or NULL with the error set (info may be NULL). */
sr_module *sr_onnx_import(const sr_onnx_model *m, const sr_onnx_import_opts *o, sr_onnx_import_info *info);

/* Every output of a model whose inputs are all given as constants
 * (o->const_*), folded (ONNX's node tests of the ops srgeo folds): out[i]
 * gets output i as float64.  0 or -1. */
int sr_onnx_evaluate(const sr_onnx_model *m, const sr_onnx_import_opts *o, sr_tensor *out, int nout);

/* How the importer takes op (default domain): SR_ONNX_OP_VALUES, on the
 * input's values (and on constants); SR_ONNX_OP_CONSTANTS, only folded
 * from constants (shape arithmetic, comparisons); 0, not at all. */
enum { SR_ONNX_OP_CONSTANTS = 1, SR_ONNX_OP_VALUES = 2 };
int sr_onnx_op_supported(const char *op);

#endif
