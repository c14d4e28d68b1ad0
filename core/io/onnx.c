/* onnx.c - ONNX ModelProto / TensorProto files into the plain structs of
 * onnx.h, through protobuf-c (onnx.pb-c.h is generated from Debian's
 * onnx.proto at build time).  protobuf-c checks the wire format; the rest
 * is checked here, field by field, before anything is used: a tensor's
 * dims and data must agree, strings must be strings, sizes must fit. */
#include "io/onnx.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <onnx.pb-c.h>

#include "base/fsutil.h"
#include "io/pbwire.h"

/* A model bigger than this is refused before reading (protobuf itself
 * cannot hold a message over 2 GB; external data may add more). */
#define ONNX_MAX_FILE ((size_t)2 << 30)
#define ONNX_MAX_NAME 4096
/* Checked on the wire before protobuf-c unpacks anything (io/pbwire.h):
 * messages nest at most this deep (a model with a tensor attribute is 5
 * deep, each If / Loop body adds 3 more; protobuf-c recurses per level), and
 * the unpacked messages may take at most ONNX_UNPACK_FACTOR times the
 * file's bytes plus ONNX_UNPACK_SLACK.  Real models unpack into 1.2-2.3
 * times their size (their weights are raw bytes), a chain of 10^5 bare
 * nodes into 8.4 times; a file of empty sub-messages would take 80 times. */
#define ONNX_MAX_DEPTH 64
#define ONNX_UNPACK_FACTOR 16
#define ONNX_UNPACK_SLACK ((size_t)16 << 20)

const char *sr_onnx_type_name(int type)
{
    switch (type) {
    case SR_ONNX_FLOAT: return "float";
    case SR_ONNX_UINT8: return "uint8";
    case SR_ONNX_INT8: return "int8";
    case SR_ONNX_UINT16: return "uint16";
    case SR_ONNX_INT16: return "int16";
    case SR_ONNX_INT32: return "int32";
    case SR_ONNX_INT64: return "int64";
    case 8: return "string";
    case SR_ONNX_BOOL: return "bool";
    case SR_ONNX_FLOAT16: return "float16";
    case SR_ONNX_DOUBLE: return "double";
    case SR_ONNX_UINT32: return "uint32";
    case SR_ONNX_UINT64: return "uint64";
    case 14: return "complex64";
    case 15: return "complex128";
    case SR_ONNX_BFLOAT16: return "bfloat16";
    default: return "an unknown type";
    }
}

int sr_onnx_type_is_int(int type)
{
    return type == SR_ONNX_UINT8 || type == SR_ONNX_INT8 || type == SR_ONNX_UINT16 || type == SR_ONNX_INT16 ||
           type == SR_ONNX_INT32 || type == SR_ONNX_INT64 || type == SR_ONNX_BOOL || type == SR_ONNX_UINT32 ||
           type == SR_ONNX_UINT64;
}

/* Bytes per element as stored in raw_data (0: not a numeric type we read). */
static size_t elem_size(int type)
{
    switch (type) {
    case SR_ONNX_UINT8: case SR_ONNX_INT8: case SR_ONNX_BOOL: return 1;
    case SR_ONNX_UINT16: case SR_ONNX_INT16: case SR_ONNX_FLOAT16: case SR_ONNX_BFLOAT16: return 2;
    case SR_ONNX_FLOAT: case SR_ONNX_INT32: case SR_ONNX_UINT32: return 4;
    case SR_ONNX_INT64: case SR_ONNX_DOUBLE: case SR_ONNX_UINT64: return 8;
    default: return 0;
    }
}

static double half_to_double(uint16_t h)
{
    int e = h >> 10 & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return h >> 15 ? -v : v;
}

static double bf16_to_double(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Element i of little-endian raw data of the given type, as a double. */
static double raw_at(const uint8_t *p, int type, int64_t i)
{
    size_t es = elem_size(type);
    p += (size_t)i * es;
    uint64_t u = 0;
    for (size_t b = 0; b < es; b++)
        u |= (uint64_t)p[b] << (8 * b);
    switch (type) {
    case SR_ONNX_FLOAT: { float f; uint32_t w = (uint32_t)u; memcpy(&f, &w, 4); return f; }
    case SR_ONNX_DOUBLE: { double d; memcpy(&d, &u, 8); return d; }
    case SR_ONNX_FLOAT16: return half_to_double((uint16_t)u);
    case SR_ONNX_BFLOAT16: return bf16_to_double((uint16_t)u);
    case SR_ONNX_UINT8: case SR_ONNX_UINT16: case SR_ONNX_UINT32: case SR_ONNX_BOOL: return (double)u;
    case SR_ONNX_INT8: return (int8_t)u;
    case SR_ONNX_INT16: return (int16_t)u;
    case SR_ONNX_INT32: return (int32_t)u;
    case SR_ONNX_INT64: return (double)(int64_t)u;
    default: return (double)u; /* uint64 */
    }
}

/* A copy of a protobuf string, checked (NULL -> ""). */
static int dup_str(char **out, const char *s, const char *what, const char *file)
{
    s = s ? s : "";
    size_t n = strnlen(s, ONNX_MAX_NAME + 1);
    if (n > ONNX_MAX_NAME)
        return sr_fail("onnx %s: %s is longer than %d bytes", file, what, ONNX_MAX_NAME);
    if (!(*out = strdup(s)))
        return sr_fail("onnx %s: out of memory", file);
    return 0;
}

/* The external data file loc in the model's folder dir, opened when it is
 * a regular file inside that folder once symlinks are resolved (a link
 * w.bin -> /etc/passwd is refused; a link within the folder is followed). */
static FILE *open_confined(const char *dir, const char *loc, const char *file, const char *tname)
{
    char path[2048], rdir[PATH_MAX], rfile[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, loc);
    if (!realpath(dir, rdir) || !realpath(path, rfile))
        return sr_fail("onnx %s: tensor '%s': cannot open external data %s: %s", file, tname, path,
                       strerror(errno)), NULL;
    size_t nd = strlen(rdir);
    if (strncmp(rfile, rdir, nd) || (rfile[nd] != '/' && strcmp(rdir, "/")))
        return sr_fail("onnx %s: tensor '%s': external data %s resolves to %s, outside the model's folder %s", file,
                       tname, loc, rfile, rdir), NULL;
    FILE *f = sr_fs_open_regular(rfile, "external data");
    if (!f)
        sr_fail_context("onnx %s: tensor '%s'", file, tname);
    return f;
}

/* External data: the file named by "location" beside the model. */
static int read_external(uint8_t **buf, size_t need, const Onnx__TensorProto *tp, const char *dir,
                         const char *file, const char *tname)
{
    const char *loc = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        const char *k = e->key ? e->key : "", *v = e->value ? e->value : "";
        char *end;
        if (strcmp(k, "location") == 0) {
            loc = v;
        } else if (strcmp(k, "offset") == 0 || strcmp(k, "length") == 0) {
            errno = 0;
            long long x = strtoll(v, &end, 10);
            if (end == v || *end || errno || x < 0)
                return sr_fail("onnx %s: tensor '%s': external data %s '%s' is not a size", file, tname, k, v);
            *(k[0] == 'o' ? &offset : &length) = x;
        }
    }
    if (!dir)
        return sr_fail("onnx %s: tensor '%s' has external data, and no folder to read it from", file, tname);
    if (!loc || !*loc || loc[0] == '/' || strstr(loc, "..") || strlen(loc) > 1024)
        return sr_fail("onnx %s: tensor '%s': external data location '%s' must be a file name relative to the "
                       "model's folder (no '..')", file, tname, loc ? loc : "");
    if (length >= 0 && (size_t)length != need)
        return sr_fail("onnx %s: tensor '%s': external data length %lld, the dims need %zu bytes", file, tname,
                       (long long)length, need);
    FILE *f = open_confined(dir, loc, file, tname);
    if (!f)
        return -1;
    struct stat st;
    int rc = 0;
    if (fstat(fileno(f), &st) || (uint64_t)offset > (uint64_t)st.st_size ||
        (uint64_t)st.st_size - (uint64_t)offset < need)
        rc = sr_fail("onnx %s: tensor '%s': external data %s holds no %zu bytes at offset %lld", file, tname, loc,
                     need, (long long)offset);
    else if (!(*buf = malloc(need ? need : 1)))
        rc = sr_fail("onnx %s: tensor '%s': out of memory for %zu bytes", file, tname, need);
    else if (fseeko(f, offset, SEEK_SET) || fread(*buf, 1, need, f) != need)
        rc = sr_fail("onnx %s: tensor '%s': reading external data %s failed", file, tname, loc);
    fclose(f);
    if (rc) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

static int convert_tensor(sr_onnx_tensor *t, const Onnx__TensorProto *tp, const char *dir, const char *file)
{
    memset(t, 0, sizeof *t);
    t->value = (sr_tensor)SR_TENSOR_INIT;
    if (dup_str(&t->name, tp->name, "a tensor name", file))
        return -1;
    const char *tn = t->name;
    t->type = tp->has_data_type ? tp->data_type : 0;
    size_t es = elem_size(t->type);
    if (!es)
        return sr_fail("onnx %s: tensor '%s' holds %s values (srgeo reads numbers and booleans)", file, tn,
                       sr_onnx_type_name(t->type));
    if (tp->n_dims > SR_MAXDIM)
        return sr_fail("onnx %s: tensor '%s' has %zu dims (at most %d)", file, tn, tp->n_dims, SR_MAXDIM);
    if (tp->segment)
        return sr_fail("onnx %s: tensor '%s' is segmented (not supported)", file, tn);
    int64_t shape[SR_MAXDIM], numel = 1;
    for (size_t d = 0; d < tp->n_dims; d++) {
        if (tp->dims[d] < 0 || tp->dims[d] > ((int64_t)1 << 40) ||
            (tp->dims[d] && numel > ((int64_t)1 << 40) / tp->dims[d]))
            return sr_fail("onnx %s: tensor '%s' has dim %zu of size %lld", file, tn, d, (long long)tp->dims[d]);
        shape[d] = tp->dims[d];
        numel *= tp->dims[d];
    }
    int is_float = t->type == SR_ONNX_FLOAT || t->type == SR_ONNX_FLOAT16 || t->type == SR_ONNX_BFLOAT16;
    sr_dtype dt = is_float ? SR_F32 : SR_F64;
    /* Where the values are: raw bytes (in the file or beside it), or one of
     * the typed fields, whose count must be numel. */
    uint8_t *ext = NULL;
    const uint8_t *raw = NULL;
    size_t need = (size_t)numel * es;
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        if (read_external(&ext, need, tp, dir, file, tn))
            return -1;
        raw = ext;
    } else if (tp->has_raw_data) {
        if (tp->raw_data.len != need)
            return sr_fail("onnx %s: tensor '%s' %s of %lld values has %zu raw bytes, not %zu", file, tn,
                           sr_onnx_type_name(t->type), (long long)numel, tp->raw_data.len, need);
        raw = tp->raw_data.data;
    }
    size_t have = 0;
    if (!raw) {
        switch (t->type) {
        case SR_ONNX_FLOAT: have = tp->n_float_data; break;
        case SR_ONNX_DOUBLE: have = tp->n_double_data; break;
        case SR_ONNX_INT64: have = tp->n_int64_data; break;
        case SR_ONNX_UINT32: case SR_ONNX_UINT64: have = tp->n_uint64_data; break;
        default: have = tp->n_int32_data; break; /* int32 and narrower, bool, float16 bits */
        }
        if (have != (size_t)numel)
            return sr_fail("onnx %s: tensor '%s' %s of %lld values holds %zu", file, tn, sr_onnx_type_name(t->type),
                           (long long)numel, have);
    }
    int rc = 0;
    if (sr_tensor_alloc(&t->value, dt, (int)tp->n_dims, shape)) {
        rc = sr_fail_context("onnx %s: tensor '%s'", file, tn);
    } else {
        for (int64_t i = 0; i < numel; i++) {
            double v;
            if (raw)
                v = raw_at(raw, t->type, i);
            else if (t->type == SR_ONNX_FLOAT)
                v = tp->float_data[i];
            else if (t->type == SR_ONNX_DOUBLE)
                v = tp->double_data[i];
            else if (t->type == SR_ONNX_INT64)
                v = (double)tp->int64_data[i];
            else if (t->type == SR_ONNX_UINT32 || t->type == SR_ONNX_UINT64)
                v = (double)tp->uint64_data[i];
            else if (t->type == SR_ONNX_FLOAT16)
                v = half_to_double((uint16_t)tp->int32_data[i]);
            else if (t->type == SR_ONNX_BFLOAT16)
                v = bf16_to_double((uint16_t)tp->int32_data[i]);
            else
                v = tp->int32_data[i];
            if (dt == SR_F32)
                sr_f32(&t->value)[i] = (float)v;
            else
                sr_f64(&t->value)[i] = v;
        }
    }
    free(ext);
    return rc;
}

void sr_onnx_tensor_free(sr_onnx_tensor *t)
{
    if (!t)
        return;
    free(t->name);
    sr_tensor_free(&t->value);
    memset(t, 0, sizeof *t);
}

/* ONNX keeps float attributes in float32, so an exporter's 1/6 (torch's
 * hardsigmoid slope) or 1e-5 (an epsilon) arrive rounded.  Read each as the
 * simplest number that rounds to it: a fraction p/q with q <= 64, else the
 * shortest decimal; in float64 the model then computes what its author
 * wrote (a float32 model cannot tell the difference). */
static double simplest(float f)
{
    if (!isfinite(f) || f == 0)
        return f;
    for (int q = 1; q <= 64; q++) {
        double p = nearbyint((double)f * q);
        if (fabs(p) < 1e9 && p != 0 && (float)(p / q) == f)
            return p / q;
    }
    char buf[32];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f)
            return d;
    }
    return f;
}

static int convert_attr(sr_onnx_attr *a, const Onnx__AttributeProto *ap, const char *dir, const char *file,
                        const char *node)
{
    memset(a, 0, sizeof *a);
    if (dup_str(&a->name, ap->name, "an attribute name", file))
        return -1;
    int type = ap->has_type ? (int)ap->type : 0;
    switch (type) {
    case SR_ONNX_ATTR_FLOAT: a->f = simplest(ap->f); break;
    case SR_ONNX_ATTR_INT: a->i = ap->i; break;
    case SR_ONNX_ATTR_STRING:
        if ((ap->s.len && memchr(ap->s.data, 0, ap->s.len)) || ap->s.len > ONNX_MAX_NAME)
            return sr_fail("onnx %s: node '%s': attribute %s is not a text string", file, node, a->name);
        if (!(a->s = malloc(ap->s.len + 1)))
            return sr_fail("onnx %s: out of memory", file);
        if (ap->s.len) /* an empty string's data may be NULL */
            memcpy(a->s, ap->s.data, ap->s.len);
        a->s[ap->s.len] = 0;
        break;
    case SR_ONNX_ATTR_TENSOR:
        if (!ap->t)
            return sr_fail("onnx %s: node '%s': tensor attribute %s has no tensor", file, node, a->name);
        if (!(a->t = calloc(1, sizeof *a->t)))
            return sr_fail("onnx %s: out of memory", file);
        if (convert_tensor(a->t, ap->t, dir, file))
            return sr_fail_context("node '%s' attribute %s", node, a->name);
        break;
    case SR_ONNX_ATTR_FLOATS:
    case SR_ONNX_ATTR_INTS: {
        size_t n = type == SR_ONNX_ATTR_INTS ? ap->n_ints : ap->n_floats;
        if (n > INT_MAX / 16)
            return sr_fail("onnx %s: node '%s': attribute %s has %zu values", file, node, a->name, n);
        a->n = (int)n;
        if (type == SR_ONNX_ATTR_INTS) {
            if (!(a->ints = malloc((n ? n : 1) * sizeof *a->ints)))
                return sr_fail("onnx %s: out of memory", file);
            if (n)
                memcpy(a->ints, ap->ints, n * sizeof *a->ints);
        } else {
            if (!(a->floats = malloc((n ? n : 1) * sizeof *a->floats)))
                return sr_fail("onnx %s: out of memory", file);
            for (size_t i = 0; i < n; i++)
                a->floats[i] = simplest(ap->floats[i]);
        }
        break;
    }
    default:
        type = SR_ONNX_ATTR_OTHER;
    }
    a->type = type;
    return 0;
}

static int convert_value(sr_onnx_value *v, const Onnx__ValueInfoProto *vp, const char *file)
{
    memset(v, 0, sizeof *v);
    v->ndim = -1;
    if (dup_str(&v->name, vp->name, "a value name", file))
        return -1;
    const Onnx__TypeProto *tp = vp->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return 0; /* not a tensor (or no type): the importer says so if it matters */
    v->type = tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
    const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
    if (!sp)
        return 0;
    if (sp->n_dim > SR_MAXDIM)
        return sr_fail("onnx %s: value '%s' has %zu dims (at most %d)", file, v->name, sp->n_dim, SR_MAXDIM);
    v->ndim = (int)sp->n_dim;
    for (int d = 0; d < v->ndim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = sp->dim[d];
        v->dims[d] = -1;
        if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (dim->dim_value < 0)
                return sr_fail("onnx %s: value '%s' has dim %d of size %lld", file, v->name, d,
                               (long long)dim->dim_value);
            v->dims[d] = dim->dim_value;
        } else if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   dup_str(&v->dim_names[d], dim->dim_param, "a dim name", file)) {
            return -1;
        }
    }
    return 0;
}

static int convert_node(sr_onnx_node *n, const Onnx__NodeProto *np, const char *dir, const char *file)
{
    memset(n, 0, sizeof *n);
    if (dup_str(&n->name, np->name, "a node name", file) || dup_str(&n->op_type, np->op_type, "an op type", file) ||
        dup_str(&n->domain, np->domain, "a domain", file))
        return -1;
    if (np->n_input > 4096 || np->n_output > 4096 || np->n_attribute > 4096)
        return sr_fail("onnx %s: node '%s' has %zu inputs, %zu outputs, %zu attributes", file, n->name,
                       np->n_input, np->n_output, np->n_attribute);
    n->inputs = calloc(np->n_input + 1, sizeof *n->inputs);
    n->outputs = calloc(np->n_output + 1, sizeof *n->outputs);
    n->attrs = calloc(np->n_attribute + 1, sizeof *n->attrs);
    if (!n->inputs || !n->outputs || !n->attrs)
        return sr_fail("onnx %s: out of memory", file);
    for (size_t i = 0; i < np->n_input; i++, n->ninputs++)
        if (dup_str(&n->inputs[i], np->input[i], "an input name", file))
            return -1;
    for (size_t i = 0; i < np->n_output; i++, n->noutputs++)
        if (dup_str(&n->outputs[i], np->output[i], "an output name", file))
            return -1;
    for (size_t i = 0; i < np->n_attribute; i++) {
        n->nattrs++;
        if (convert_attr(&n->attrs[i], np->attribute[i], dir, file, n->name))
            return -1;
    }
    return 0;
}

static void free_attr(sr_onnx_attr *a)
{
    free(a->name);
    free(a->s);
    free(a->floats);
    free(a->ints);
    if (a->t) {
        sr_onnx_tensor_free(a->t);
        free(a->t);
    }
}

void sr_onnx_free(sr_onnx_model *m)
{
    for (int i = 0; i < m->nnodes; i++) {
        sr_onnx_node *n = &m->nodes[i];
        for (int j = 0; j < n->ninputs; j++)
            free(n->inputs[j]);
        for (int j = 0; j < n->noutputs; j++)
            free(n->outputs[j]);
        for (int j = 0; j < n->nattrs; j++)
            free_attr(&n->attrs[j]);
        free(n->inputs);
        free(n->outputs);
        free(n->attrs);
        free(n->name);
        free(n->op_type);
        free(n->domain);
    }
    for (int i = 0; i < m->ninits; i++)
        sr_onnx_tensor_free(&m->inits[i]);
    sr_onnx_value *vs[2] = {m->inputs, m->outputs};
    int nv[2] = {m->ninputs, m->noutputs};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < nv[k]; i++) {
            free(vs[k][i].name);
            for (int d = 0; d < SR_MAXDIM; d++)
                free(vs[k][i].dim_names[d]);
        }
    for (int i = 0; i < m->nmeta; i++) {
        free(m->meta_keys[i]);
        free(m->meta_values[i]);
    }
    free(m->nodes);
    free(m->inits);
    free(m->inputs);
    free(m->outputs);
    free(m->meta_keys);
    free(m->meta_values);
    free(m->producer);
    free(m->path);
    memset(m, 0, sizeof *m);
}

static int convert_model(sr_onnx_model *m, const Onnx__ModelProto *mp, const char *dir, const char *file)
{
    m->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if ((!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) && o->has_version) {
            if (o->version < 1)
                return sr_fail("onnx %s: the default domain's opset is %lld (ONNX's opsets start at 1)", file,
                               (long long)o->version);
            m->opset = o->version;
        }
    }
    if (dup_str(&m->producer, mp->producer_name, "the producer name", file))
        return -1;
    const Onnx__GraphProto *g = mp->graph;
    if (!g)
        return sr_fail("onnx %s: the model has no graph", file);
    if (g->n_sparse_initializer)
        return sr_fail("onnx %s: sparse initializers are not supported", file);
    if (g->n_node > (1 << 20) || g->n_initializer > (1 << 20) || g->n_input > (1 << 16) || g->n_output > (1 << 16) ||
        mp->n_metadata_props > (1 << 16))
        return sr_fail("onnx %s: the graph is too large (%zu nodes, %zu initializers)", file, g->n_node,
                       g->n_initializer);
    m->nodes = calloc(g->n_node + 1, sizeof *m->nodes);
    m->inits = calloc(g->n_initializer + 1, sizeof *m->inits);
    m->inputs = calloc(g->n_input + 1, sizeof *m->inputs);
    m->outputs = calloc(g->n_output + 1, sizeof *m->outputs);
    m->meta_keys = calloc(mp->n_metadata_props + 1, sizeof *m->meta_keys);
    m->meta_values = calloc(mp->n_metadata_props + 1, sizeof *m->meta_values);
    if (!m->nodes || !m->inits || !m->inputs || !m->outputs || !m->meta_keys || !m->meta_values)
        return sr_fail("onnx %s: out of memory", file);
    for (size_t i = 0; i < mp->n_metadata_props; i++) {
        m->nmeta++;
        if (dup_str(&m->meta_keys[i], mp->metadata_props[i]->key, "a metadata key", file) ||
            dup_str(&m->meta_values[i], mp->metadata_props[i]->value, "a metadata value", file))
            return -1;
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        m->ninits++;
        if (convert_tensor(&m->inits[i], g->initializer[i], dir, file))
            return -1; /* the message names the file and the tensor */
    }
    for (size_t i = 0; i < g->n_input; i++) {
        m->ninputs++;
        if (convert_value(&m->inputs[i], g->input[i], file))
            return -1;
    }
    for (size_t i = 0; i < g->n_output; i++) {
        m->noutputs++;
        if (convert_value(&m->outputs[i], g->output[i], file))
            return -1;
    }
    for (size_t i = 0; i < g->n_node; i++) {
        m->nnodes++;
        if (convert_node(&m->nodes[i], g->node[i], dir, file))
            return -1;
    }
    return 0;
}

int sr_onnx_parse(sr_onnx_model *m, const uint8_t *buf, size_t n, const char *dir, const char *name)
{
    memset(m, 0, sizeof *m);
    name = name ? name : "(buffer)";
    if (dup_str(&m->path, name, "the file name", name))
        return -1;
    if (sr_pb_check(&onnx__model_proto__descriptor, buf, n, ONNX_MAX_DEPTH,
                    ONNX_UNPACK_FACTOR * n + ONNX_UNPACK_SLACK, NULL))
        return sr_fail_context("onnx %s: not an ONNX model srgeo reads", name);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, n, buf);
    if (!mp)
        return sr_fail("onnx %s: not an ONNX model (the protobuf does not parse)", name);
    int rc = convert_model(m, mp, dir, name);
    onnx__model_proto__free_unpacked(mp, NULL);
    return rc;
}

/* The whole file in memory (bounded). */
static int slurp(const char *path, uint8_t **buf, size_t *n)
{
    FILE *f = sr_fs_open_regular(path, "onnx");
    if (!f)
        return -1;
    struct stat st;
    int rc = 0;
    *buf = NULL;
    if (fstat(fileno(f), &st))
        rc = sr_fail("onnx %s: %s", path, strerror(errno));
    else if ((uint64_t)st.st_size > ONNX_MAX_FILE)
        rc = sr_fail("onnx %s: %lld bytes, more than protobuf's 2 GB (keep large weights as external data)", path,
                     (long long)st.st_size);
    else if (!(*buf = malloc((size_t)st.st_size + 1)))
        rc = sr_fail("onnx %s: out of memory for %lld bytes", path, (long long)st.st_size);
    else if (fread(*buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        rc = sr_fail("onnx %s: read failed", path);
    fclose(f);
    if (rc) {
        free(*buf);
        *buf = NULL;
    }
    *n = rc ? 0 : (size_t)st.st_size;
    return rc;
}

int sr_onnx_read(sr_onnx_model *m, const char *path)
{
    uint8_t *buf;
    size_t n;
    memset(m, 0, sizeof *m);
    if (slurp(path, &buf, &n))
        return -1;
    char dir[2048];
    const char *slash = strrchr(path, '/');
    if (slash && (size_t)(slash - path) < sizeof dir) {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = 0;
    } else {
        snprintf(dir, sizeof dir, ".");
    }
    int rc = sr_onnx_parse(m, buf, n, dir, path);
    free(buf);
    return rc;
}

int sr_onnx_read_tensor(sr_onnx_tensor *t, const char *path)
{
    uint8_t *buf;
    size_t n;
    memset(t, 0, sizeof *t);
    if (slurp(path, &buf, &n))
        return -1;
    Onnx__TensorProto *tp = NULL;
    if (sr_pb_check(&onnx__tensor_proto__descriptor, buf, n, ONNX_MAX_DEPTH, ONNX_UNPACK_FACTOR * n + ONNX_UNPACK_SLACK,
                    NULL))
        sr_fail_context("onnx %s: not a TensorProto srgeo reads", path);
    else if (!(tp = onnx__tensor_proto__unpack(NULL, n, buf)))
        sr_fail("onnx %s: not a TensorProto", path);
    free(buf);
    if (!tp)
        return -1;
    int rc = convert_tensor(t, tp, NULL, path);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return rc;
}

const sr_onnx_attr *sr_onnx_attr_find(const sr_onnx_node *node, const char *name)
{
    for (int i = 0; i < node->nattrs; i++)
        if (strcmp(node->attrs[i].name, name) == 0)
            return &node->attrs[i];
    return NULL;
}

const char *sr_onnx_meta(const sr_onnx_model *m, const char *key)
{
    for (int i = 0; i < m->nmeta; i++)
        if (strcmp(m->meta_keys[i], key) == 0)
            return m->meta_values[i];
    return NULL;
}
