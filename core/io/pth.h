/* pth.h - PyTorch checkpoints (torch.save >= 1.6: a zip of ARCHIVE/data.pkl
 * and raw storages ARCHIVE/data/KEY) read without Python, through a
 * restricted unpickler that only rebuilds what a state_dict holds, like
 * torch.load(weights_only=True), and never runs code.
 *
 * The pickle (protocols 2 to 4) may use only: PROTO FRAME STOP MARK POP
 * EMPTY_DICT EMPTY_LIST EMPTY_TUPLE TUPLE TUPLE1..3 BINUNICODE
 * SHORT_BINUNICODE BININT BININT1 BININT2 LONG1 (up to 8 bytes) BINFLOAT
 * NEWTRUE NEWFALSE NONE BINPUT LONG_BINPUT BINGET LONG_BINGET MEMOIZE
 * SETITEM SETITEMS APPEND APPENDS GLOBAL STACK_GLOBAL REDUCE BUILD
 * BINPERSID.  GLOBAL names only collections.OrderedDict,
 * torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and the
 * typed storages torch.{Double,Float,Half,BFloat16,Long,Int,Short,Char,
 * Byte,Bool}Storage; REDUCE calls only the first three, with their
 * arguments checked (OrderedDict of (), a tensor of (storage, offset, size,
 * stride, requires_grad, hooks [, metadata])); BUILD only sets a dict's
 * attributes (state_dict._metadata, dropped) or a parameter's; BINPERSID
 * only ('storage', STORAGE_TYPE, 'KEY', 'LOCATION', NUMEL).  Anything else is
 * refused by name: the opcode byte and its offset in data.pkl, or the
 * global's module.name.  The stack is at most SR_PTH_MAX_STACK deep, the
 * marks SR_PTH_MAX_MARKS, the memo SR_PTH_MAX_MEMO entries; values are at
 * most SR_PTH_MAX_VALUES.
 *
 * Every storage is an entry ARCHIVE/data/KEY of exactly NUMEL × element
 * bytes; every tensor's offset + Σ (size_i − 1)·stride_i lies inside its
 * storage, strides are non-negative, the shape counts through
 * sr_shape_count.  A non-contiguous tensor is read contiguously (gathered).
 * ARCHIVE/byteorder, when present, must say "little". */
#ifndef SR_PTH_H
#define SR_PTH_H

#include <stdint.h>

#include "io/safetensors.h" /* sr_st_dtype and its element loads */
#include "io/zip.h"
#include "tensor/tensor.h"

#define SR_PTH_MAX_STACK 4096
#define SR_PTH_MAX_MARKS 1024
#define SR_PTH_MAX_MEMO (1 << 22)
#define SR_PTH_MAX_VALUES (1 << 24)

typedef enum {
    SR_PV_NONE, SR_PV_BOOL, SR_PV_INT, SR_PV_FLOAT, SR_PV_STR, SR_PV_TUPLE, SR_PV_LIST, SR_PV_DICT,
    SR_PV_TENSOR,
    SR_PV_GLOBAL, SR_PV_STORAGE, SR_PV_MARK /* internal: never in a finished tree */
} sr_pv_kind;

typedef struct sr_pth_tensor {
    int storage; /* index into sr_pth_file.storages */
    int ndim;
    int64_t shape[SR_MAXDIM], stride[SR_MAXDIM], offset;
} sr_pth_tensor;

typedef struct sr_pv {
    sr_pv_kind kind;
    int64_t i;      /* INT, BOOL; GLOBAL: which allowed global */
    double f;       /* FLOAT */
    char *s;        /* STR (NUL-terminated; len bytes) */
    size_t len;
    int n, cap;     /* TUPLE/LIST: n items; DICT: n/2 keys, key k at items[2k], its value at items[2k+1] */
    struct sr_pv **items;
    sr_pth_tensor *t; /* TENSOR */
} sr_pv;

typedef struct sr_pth_storage {
    const sr_zip_entry *entry;
    sr_st_dtype dtype;
    int64_t numel;
} sr_pth_storage;

typedef struct sr_pth_file {
    sr_zip zip;
    char *archive;     /* the folder data.pkl is in */
    sr_pv *root;
    sr_pv **values;    /* every value made (freed together: the tree may share and cycle) */
    int64_t nvalues, cap_values;
    sr_pth_storage *storages;
    int nstorages, cap_storages;
} sr_pth_file;

/* Open, unpickle and validate.  Closes f on failure. */
int sr_pth_open(sr_pth_file *f, const char *path);
int sr_pth_open_memory(sr_pth_file *f, const void *buf, size_t size, const char *label);
void sr_pth_close(sr_pth_file *f);

/* The tensor's dtype as stored. */
sr_st_dtype sr_pth_tensor_dtype(const sr_pth_file *f, const sr_pth_tensor *t);
/* Read a tensor (contiguous, converted to dtype). */
int sr_pth_read(const sr_pth_file *f, const sr_pth_tensor *t, sr_tensor *out, sr_dtype dtype);

#endif
