/* onnx.h - ONNX models (ModelProto) read into plain C: the graph's nodes
 * with their attributes, the initializers as tensors, the inputs and
 * outputs with their declared shapes, the metadata.  Parsed with protobuf-c
 * from Debian's onnx.proto (the generated code lives in the build tree);
 * nothing here knows about modules (core/import/ builds the graph).
 *
 * Every field is validated: dims, data sizes (raw or typed), element
 * types, attribute types, names; external data is read from regular files
 * beside the model (relative paths without "..", inside the model's folder
 * once symlinks are resolved, offset and length in range).  Before
 * protobuf-c unpacks a file, its bytes are walked (io/pbwire.h): messages
 * nested more than 64 deep, or whose unpacked form would take more than 16
 * times the file plus 16 MB, are refused.  A malformed file is an error
 * naming the file and the tensor, node or attribute, never a crash. */
#ifndef SR_ONNX_H
#define SR_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/tensor.h"

/* ONNX's TensorProto.DataType values srgeo reads. */
enum {
    SR_ONNX_FLOAT = 1, SR_ONNX_UINT8 = 2, SR_ONNX_INT8 = 3, SR_ONNX_UINT16 = 4, SR_ONNX_INT16 = 5,
    SR_ONNX_INT32 = 6, SR_ONNX_INT64 = 7, SR_ONNX_BOOL = 9, SR_ONNX_FLOAT16 = 10, SR_ONNX_DOUBLE = 11,
    SR_ONNX_UINT32 = 12, SR_ONNX_UINT64 = 13, SR_ONNX_BFLOAT16 = 16,
};
/* "float", "int64", ... (for messages) */
const char *sr_onnx_type_name(int type);
/* 1 for the integer and boolean element types. */
int sr_onnx_type_is_int(int type);

/* A constant: values as float32 (float, float16, bfloat16: exact) or
 * float64 (double and the integer types: exact up to 2^53). */
typedef struct {
    char *name;
    int type;         /* the element type in the file */
    sr_tensor value;  /* shape as declared (ndim <= SR_MAXDIM) */
} sr_onnx_tensor;

enum { SR_ONNX_ATTR_FLOAT = 1, SR_ONNX_ATTR_INT, SR_ONNX_ATTR_STRING, SR_ONNX_ATTR_TENSOR,
       SR_ONNX_ATTR_FLOATS = 6, SR_ONNX_ATTR_INTS, SR_ONNX_ATTR_STRINGS, SR_ONNX_ATTR_OTHER = 100 };

typedef struct {
    char *name;
    int type;          /* SR_ONNX_ATTR_* (other kinds: SR_ONNX_ATTR_OTHER) */
    double f;          /* FLOAT: the simplest number the stored float32 rounds from (1/6, 1e-5) */
    int64_t i;
    char *s;           /* STRING (NUL-terminated; an embedded NUL is an error) */
    int n;             /* FLOATS, INTS */
    double *floats;    /* FLOATS: each read as FLOAT is */
    int64_t *ints;
    sr_onnx_tensor *t; /* TENSOR */
} sr_onnx_attr;

typedef struct {
    char *name, *op_type, *domain;  /* domain "" is ONNX's own */
    int ninputs, noutputs;
    char **inputs, **outputs;       /* "" marks an omitted optional input */
    int nattrs;
    sr_onnx_attr *attrs;
} sr_onnx_node;

/* A graph input or output: element type and shape, each dim a size or
 * symbolic (-1, with its name in dim_names[d]; the shape may be unknown:
 * ndim -1). */
typedef struct {
    char *name;
    int type;
    int ndim;
    int64_t dims[SR_MAXDIM];
    char *dim_names[SR_MAXDIM];
} sr_onnx_value;

typedef struct {
    char *path;
    int64_t ir_version, opset; /* opset of the default domain (0: not declared) */
    char *producer;
    int nnodes, ninits, ninputs, noutputs, nmeta;
    sr_onnx_node *nodes;
    sr_onnx_tensor *inits;
    sr_onnx_value *inputs, *outputs;
    char **meta_keys, **meta_values;
} sr_onnx_model;

/* Read the model at path (external data from its folder).  0, or -1 with
 * "onnx PATH: ..." naming what is wrong.  sr_onnx_free releases either way. */
int sr_onnx_read(sr_onnx_model *m, const char *path);
/* The same from a buffer; dir (may be NULL: external data is refused) is
 * the folder external data is read from, name labels messages. */
int sr_onnx_parse(sr_onnx_model *m, const uint8_t *buf, size_t n, const char *dir, const char *name);
void sr_onnx_free(sr_onnx_model *m);

/* A TensorProto file (ONNX's test data input_0.pb, output_0.pb). */
int sr_onnx_read_tensor(sr_onnx_tensor *t, const char *path);
void sr_onnx_tensor_free(sr_onnx_tensor *t);

/* The attribute name of node (NULL when absent). */
const sr_onnx_attr *sr_onnx_attr_find(const sr_onnx_node *node, const char *name);
/* The metadata value of key (NULL when absent). */
const char *sr_onnx_meta(const sr_onnx_model *m, const char *key);

#endif
