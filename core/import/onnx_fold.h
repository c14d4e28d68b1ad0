/* onnx_fold.h - the ONNX importer's constant folding (onnx_fold.c), shared
 * with the graph translation (onnx_import.c).
 *
 * A static value is a tensor known at import: an initializer, a Constant,
 * and everything computed from them and from the shapes of the input's
 * values (Shape -> Gather -> Concat -> Reshape, as exporters write
 * x.view(x.size(0), -1)).  Shapes depend on the batch size, which an
 * imported graph must leave free, so every static value is evaluated at
 * two batch sizes, SR_FOLD_N1 and SR_FOLD_N2: an entry that differs between
 * the two is the batch (times a constant), one that agrees does not
 * depend on it.  Values are float64 (integers exact up to 2^53), with the
 * ONNX element type alongside for integer division and casts. */
#ifndef SR_ONNX_FOLD_H
#define SR_ONNX_FOLD_H

#include "io/onnx.h"
#include "tensor/tensor.h"

/* The two batch sizes (primes, unlike the small sizes models use). */
#define SR_FOLD_N1 3
#define SR_FOLD_N2 5

typedef struct {
    int type;        /* ONNX element type */
    sr_tensor v[2];  /* float64, at SR_FOLD_N1 and SR_FOLD_N2 (v[1] shares v[0] when equal) */
} sr_fold_val;

void sr_fold_val_free(sr_fold_val *s);
/* A batch-independent static value from a tensor of any dtype. */
int sr_fold_val_set(sr_fold_val *s, int type, const sr_tensor *t);
/* Whether the two instances may differ (not the same storage). */
int sr_fold_val_batched(const sr_fold_val *s);

/* Evaluate node, all of whose inputs are static (in[i] NULL for an omitted
 * optional input), into out[0..node->noutputs).  -1 with "OP: ..." when the
 * op cannot be folded (the caller adds the node's name), or when a tensor
 * it makes would hold more than lim values (checked before allocating). */
int sr_fold_node(const sr_onnx_node *node, int64_t opset, sr_fold_val *const *in, sr_fold_val *out, int64_t lim);
/* The work of folding node on in (the importer's budget, checked before
 * folding): its input values, plus M·K·N for a MatMul; the values it makes
 * are counted after.  At least 1, so that many empty nodes are work too. */
int64_t sr_fold_work(const sr_onnx_node *node, sr_fold_val *const *in);
/* The ops sr_fold_node knows (for messages and the conformance report). */
int sr_fold_knows(const char *op);

/* Integer view of a float64 value (clamped to ±2^62, truncated). */
int64_t sr_fold_int(double v);

#endif
