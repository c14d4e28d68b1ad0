/* safetensors.h - the safetensors weight format (read F32/F64/F16/BF16 and
 * integer buffers; write F32/F64), with __metadata__.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 *  "__metadata__": {"key": "value"}}, then the data area.  Everything in
 * the header is validated before any tensor is read: header length bounded,
 * JSON well formed, offsets inside the data area, no overlaps, byte length =
 * product(shape) × dtype size, no overflow; a violation names the tensor.
 * Opening is O(n log n) in the number of entries (names are checked for
 * duplicates by sorting), so a hostile header of a million entries costs a
 * sort, not 10^12 comparisons.  "__metadata__" is the format's reserved key:
 * no tensor may have that name (the writer refuses it). */
#ifndef SR_SAFETENSORS_H
#define SR_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/tensor.h"

#define SR_ST_MAX_HEADER (100u << 20)

typedef enum {
    SR_ST_F32, SR_ST_F64, SR_ST_F16, SR_ST_BF16, SR_ST_I64, SR_ST_I32, SR_ST_I16, SR_ST_I8,
    SR_ST_U8, SR_ST_BOOL, SR_ST_NDTYPES
} sr_st_dtype;

typedef struct sr_st_entry {
    char *name;
    sr_st_dtype dtype;
    int ndim;
    int64_t shape[SR_MAXDIM];
    uint64_t begin, end; /* byte offsets into the data area */
} sr_st_entry;

typedef struct sr_st_file {
    char *path;
    const unsigned char *map; /* whole file (mmap) or caller's buffer */
    size_t size;
    int mapped;
    const unsigned char *data; /* start of the data area */
    size_t data_size;
    int n;
    sr_st_entry *entries;     /* in file order of data offsets */
    sr_st_entry **by_name;    /* the entries in name order (sr_st_find's binary search) */
    int nmeta;
    char **meta_keys, **meta_vals;
} sr_st_file;

const char *sr_st_dtype_name(sr_st_dtype d);
/* Element i of raw little-endian data of dtype d as double (unaligned-safe
 * loads; F16/BF16 widened exactly): the one conversion every reader of raw
 * weights (safetensors, pth) uses. */
double sr_st_load(const unsigned char *p, sr_st_dtype d, int64_t i);

/* Open and validate (mmap: no per-tensor seeks).  Closes f on failure. */
int sr_st_open(sr_st_file *f, const char *path);
/* Validate an in-memory file (not copied; must outlive f).  For tests/fuzz. */
int sr_st_open_memory(sr_st_file *f, const void *buf, size_t size, const char *label);
void sr_st_close(sr_st_file *f);

const sr_st_entry *sr_st_find(const sr_st_file *f, const char *name);
/* Read entry into out converted to dtype. */
int sr_st_read(const sr_st_file *f, const sr_st_entry *e, sr_tensor *out, sr_dtype dtype);
/* Read entry into the existing tensor dst (same shape; converted to dst's
 * dtype), writing its storage in place: loading a model's parameters this
 * way needs no temporary copy of each. */
int sr_st_read_into(const sr_st_file *f, const sr_st_entry *e, sr_tensor *dst);
const char *sr_st_meta(const sr_st_file *f, const char *key);

/* Write tensors (stored as their own dtype, F32 or F64) and metadata,
 * atomically.  names/tensors have n entries; meta has 2*nmeta strings.
 * A name given twice, or "__metadata__", is an error. */
int sr_st_write(const char *path, int n, const char *const *names, const sr_tensor *const *tensors,
                int nmeta, const char *const *meta);

#endif
