/* safetensors.c - validated reader and atomic writer (see safetensors.h). */
#include "io/safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/checked.h"
#include "base/fsutil.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[SR_ST_NDTYPES] = {
    {"F32", 4}, {"F64", 8}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
    {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1},
};

const char *sr_st_dtype_name(sr_st_dtype d) { return d < SR_ST_NDTYPES ? dtypes[d].name : "?"; }

void sr_st_close(sr_st_file *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->entries[i].name);
    free(f->entries);
    free(f->by_name);
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_vals[i]);
    }
    free(f->meta_keys);
    free(f->meta_vals);
    if (f->mapped && f->map)
        munmap((void *)f->map, f->size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

#define META_KEY "__metadata__"

static int cmp_begin(const void *a, const void *b)
{
    const sr_st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp((*(sr_st_entry *const *)a)->name, (*(sr_st_entry *const *)b)->name);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int parse_entry(sr_st_file *f, const cJSON *item, sr_st_entry *e)
{
    const char *nm = item->string;
    if (!cJSON_IsObject(item))
        return sr_fail("safetensors %s: tensor '%s' is not an object", f->path, nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off))
        return sr_fail("safetensors %s: tensor '%s' needs dtype, shape and data_offsets", f->path, nm);
    e->dtype = SR_ST_NDTYPES;
    for (int d = 0; d < SR_ST_NDTYPES; d++)
        if (strcmp(dt->valuestring, dtypes[d].name) == 0)
            e->dtype = (sr_st_dtype)d;
    if (e->dtype == SR_ST_NDTYPES)
        return sr_fail("safetensors %s: tensor '%s' has unsupported dtype %s", f->path, nm, dt->valuestring);
    int nd = cJSON_GetArraySize(sh);
    if (nd > SR_MAXDIM)
        return sr_fail("safetensors %s: tensor '%s' has %d dimensions (at most %d)", f->path, nm, nd, SR_MAXDIM);
    e->ndim = nd;
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, sh)
    {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) ||
            v->valuedouble > 9.0e15)
            return sr_fail("safetensors %s: tensor '%s' has a bad dimension", f->path, nm);
        e->shape[i++] = (int64_t)v->valuedouble;
    }
    int64_t count;
    if (sr_shape_count("shape", nd, e->shape, &count))
        return sr_fail_context("safetensors %s: tensor '%s'", f->path, nm);
    if (cJSON_GetArraySize(off) != 2)
        return sr_fail("safetensors %s: tensor '%s' data_offsets must be [begin, end]", f->path, nm);
    double b = cJSON_GetArrayItem(off, 0)->valuedouble, en = cJSON_GetArrayItem(off, 1)->valuedouble;
    if (!cJSON_IsNumber(cJSON_GetArrayItem(off, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(off, 1)) ||
        b < 0 || en < b || b != floor(b) || en != floor(en) || en > 1.8e19)
        return sr_fail("safetensors %s: tensor '%s' has bad data_offsets", f->path, nm);
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    if (e->end > f->data_size)
        return sr_fail("safetensors %s: tensor '%s' data [%llu, %llu) lies outside the data area (%zu bytes)",
                       f->path, nm, (unsigned long long)e->begin, (unsigned long long)e->end, f->data_size);
    if (e->end - e->begin != (uint64_t)count * dtypes[e->dtype].size)
        return sr_fail("safetensors %s: tensor '%s' has %llu bytes but shape × %s needs %llu", f->path, nm,
                       (unsigned long long)(e->end - e->begin), dtypes[e->dtype].name,
                       (unsigned long long)count * dtypes[e->dtype].size);
    if (!(e->name = strdup(nm)))
        return sr_fail("safetensors %s: out of memory", f->path);
    return 0;
}

static int parse_meta(sr_st_file *f, const cJSON *meta)
{
    if (f->meta_keys) /* (a second one would leak the first's arrays) */
        return sr_fail("safetensors %s: __metadata__ appears twice", f->path);
    if (!cJSON_IsObject(meta))
        return sr_fail("safetensors %s: __metadata__ must be an object of strings", f->path);
    int n = cJSON_GetArraySize(meta);
    f->meta_keys = calloc((size_t)n + 1, sizeof(char *));
    f->meta_vals = calloc((size_t)n + 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_vals)
        return sr_fail("safetensors %s: out of memory", f->path);
    const cJSON *it;
    cJSON_ArrayForEach(it, meta)
    {
        if (!cJSON_IsString(it))
            return sr_fail("safetensors %s: __metadata__ value '%s' is not a string", f->path, it->string);
        f->meta_keys[f->nmeta] = strdup(it->string);
        f->meta_vals[f->nmeta] = strdup(it->valuestring);
        f->nmeta++;
        if (!f->meta_keys[f->nmeta - 1] || !f->meta_vals[f->nmeta - 1])
            return sr_fail("safetensors %s: out of memory", f->path);
    }
    return 0;
}

static int parse(sr_st_file *f)
{
    if (f->size < 8)
        return sr_fail("safetensors %s: file too short (%zu bytes) for the header length", f->path, f->size);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | f->map[i];
    if (hl > SR_ST_MAX_HEADER)
        return sr_fail("safetensors %s: header length %llu exceeds the %u MB limit", f->path,
                       (unsigned long long)hl, SR_ST_MAX_HEADER >> 20);
    if (hl > f->size - 8)
        return sr_fail("safetensors %s: header length %llu exceeds the file (%zu bytes): truncated?", f->path,
                       (unsigned long long)hl, f->size);
    f->data = f->map + 8 + hl;
    f->data_size = f->size - 8 - (size_t)hl;
    cJSON *root = cJSON_ParseWithLength((const char *)f->map + 8, (size_t)hl);
    if (!root)
        return sr_fail("safetensors %s: header is not valid JSON", f->path);
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        sr_fail("safetensors %s: header is not a JSON object", f->path);
        goto done;
    }
    int n = cJSON_GetArraySize(root);
    f->entries = calloc((size_t)n + 1, sizeof *f->entries);
    if (!f->entries) {
        sr_fail("safetensors %s: out of memory", f->path);
        goto done;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        if (strcmp(it->string, META_KEY) == 0) {
            if (parse_meta(f, it))
                goto done;
            continue;
        }
        if (parse_entry(f, it, &f->entries[f->n]))
            goto done;
        f->n++;
    }
    qsort(f->entries, (size_t)f->n, sizeof *f->entries, cmp_begin);
    /* Names in sorted order: duplicates are neighbours, and sr_st_find
     * searches this index. */
    f->by_name = malloc(sizeof *f->by_name * (size_t)(f->n + 1));
    if (!f->by_name) {
        sr_fail("safetensors %s: out of memory", f->path);
        goto done;
    }
    for (int i = 0; i < f->n; i++)
        f->by_name[i] = &f->entries[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_entry_name);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->by_name[i]->name, f->by_name[i - 1]->name) == 0) {
            sr_fail("safetensors %s: tensor '%s' appears twice", f->path, f->by_name[i]->name);
            goto done;
        }
    for (int i = 1; i < f->n; i++)
        if (f->entries[i].begin < f->entries[i - 1].end && f->entries[i].end > f->entries[i].begin) {
            sr_fail("safetensors %s: tensors '%s' and '%s' overlap", f->path, f->entries[i - 1].name,
                    f->entries[i].name);
            goto done;
        }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

int sr_st_open_memory(sr_st_file *f, const void *buf, size_t size, const char *label)
{
    memset(f, 0, sizeof *f);
    f->path = strdup(label ? label : "<memory>");
    f->map = buf;
    f->size = size;
    if (!f->path || parse(f)) {
        sr_st_close(f);
        return -1;
    }
    return 0;
}

int sr_st_open(sr_st_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    const void *map;
    if (sr_fs_map_regular(path, "safetensors", &map, &f->size))
        return -1;
    f->map = map;
    f->mapped = map != NULL;
    f->path = strdup(path);
    if (!f->path || parse(f)) {
        sr_st_close(f);
        return -1;
    }
    return 0;
}

const sr_st_entry *sr_st_find(const sr_st_file *f, const char *name)
{
    int lo = 0, hi = f->n; /* binary search over the names in order */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->by_name[mid]->name, name);
        if (c == 0)
            return f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *sr_st_meta(const sr_st_file *f, const char *key)
{
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_keys[i], key) == 0)
            return f->meta_vals[i];
    return NULL;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

double sr_st_load(const unsigned char *p, sr_st_dtype d, int64_t i)
{
    switch (d) {
    case SR_ST_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case SR_ST_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case SR_ST_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return half_to_float(v); }
    case SR_ST_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); uint32_t b = (uint32_t)v << 16; float f; memcpy(&f, &b, 4); return f; }
    case SR_ST_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case SR_ST_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case SR_ST_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case SR_ST_I8: return (int8_t)p[i];
    case SR_ST_U8: return p[i];
    case SR_ST_BOOL: return p[i] != 0;
    default: return NAN;
    }
}

int sr_st_read_into(const sr_st_file *f, const sr_st_entry *e, sr_tensor *dst)
{
    int same = dst->ndim == e->ndim;
    for (int i = 0; same && i < e->ndim; i++)
        same = dst->shape[i] == e->shape[i];
    if (!same) {
        sr_tensor want = {.ndim = e->ndim};
        memcpy(want.shape, e->shape, (size_t)e->ndim * sizeof *e->shape);
        return sr_fail("safetensors %s: tensor '%s' has shape %s, the destination %s", f->path, e->name,
                       SR_SHAPE(&want), SR_SHAPE(dst));
    }
    const unsigned char *p = f->data + e->begin;
    int64_t n = sr_numel(dst);
    if ((e->dtype == SR_ST_F32 && dst->dtype == SR_F32) || (e->dtype == SR_ST_F64 && dst->dtype == SR_F64)) {
        memcpy(sr_data(dst), p, (size_t)(e->end - e->begin));
    } else if (dst->dtype == SR_F32) {
        float *o = sr_f32(dst);
        for (int64_t i = 0; i < n; i++)
            o[i] = (float)sr_st_load(p, e->dtype, i);
    } else {
        double *o = sr_f64(dst);
        for (int64_t i = 0; i < n; i++)
            o[i] = sr_st_load(p, e->dtype, i);
    }
    return 0;
}

int sr_st_read(const sr_st_file *f, const sr_st_entry *e, sr_tensor *out, sr_dtype dtype)
{
    if (sr_tensor_alloc(out, dtype, e->ndim, e->shape))
        return sr_fail_context("safetensors %s: tensor '%s'", f->path, e->name);
    return sr_st_read_into(f, e, out);
}

int sr_st_write(const char *path, int n, const char *const *names, const sr_tensor *const *tensors,
                int nmeta, const char *const *meta)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return sr_fail("safetensors %s: out of memory", path);
    int rc = -1;
    char *hdr = NULL;
    const char **sorted = NULL;
    uint64_t off = 0;
    if (nmeta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; m && i < nmeta; i++)
            if (!cJSON_AddStringToObject(m, meta[2 * i], meta[2 * i + 1]))
                m = NULL;
        if (!m) {
            sr_fail("safetensors %s: out of memory", path);
            goto done;
        }
    }
    /* Names: none reserved, none twice (sorted copy: O(n log n)). */
    sorted = malloc(sizeof *sorted * (size_t)(n > 0 ? n : 1));
    if (!sorted) {
        sr_fail("safetensors %s: out of memory", path);
        goto done;
    }
    memcpy(sorted, names, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
    for (int i = 0; i < n; i++) {
        if (strcmp(sorted[i], META_KEY) == 0) {
            sr_fail("safetensors %s: '" META_KEY "' is the format's reserved key for the metadata, not a tensor name",
                    path);
            goto done;
        }
        if (i && strcmp(sorted[i], sorted[i - 1]) == 0) {
            sr_fail("safetensors %s: tensor name '%s' given twice", path, sorted[i]);
            goto done;
        }
    }
    for (int i = 0; i < n; i++) {
        const sr_tensor *t = tensors[i];
        if (!t || !t->storage) {
            sr_fail("safetensors %s: tensor '%s' is empty", path, names[i]);
            goto done;
        }
        uint64_t bytes = (uint64_t)sr_numel(t) * sr_dtype_size(t->dtype);
        cJSON *e = cJSON_AddObjectToObject(root, names[i]);
        cJSON *sh = cJSON_CreateArray(), *of = cJSON_CreateArray();
        if (!e || !sh || !of) {
            cJSON_Delete(sh);
            cJSON_Delete(of);
            sr_fail("safetensors %s: out of memory", path);
            goto done;
        }
        cJSON_AddStringToObject(e, "dtype", t->dtype == SR_F64 ? "F64" : "F32");
        for (int d = 0; d < t->ndim; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddItemToObject(e, "shape", sh);
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off + bytes)));
        cJSON_AddItemToObject(e, "data_offsets", of);
        off += bytes;
    }
    hdr = cJSON_PrintUnformatted(root);
    if (!hdr) {
        sr_fail("safetensors %s: out of memory", path);
        goto done;
    }
    /* Pad the header with spaces to a multiple of 8 so the data area stays
     * aligned for readers that map it directly (as the format recommends). */
    size_t hl = strlen(hdr), padded = (hl + 7) & ~(size_t)7;
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    sr_atomic_file af;
    if (sr_atomic_open(&af, path)) {
        sr_fail_context("safetensors save");
        goto done;
    }
    fwrite(len, 1, 8, af.fp);
    fwrite(hdr, 1, hl, af.fp);
    for (size_t i = hl; i < padded; i++)
        fputc(' ', af.fp);
    for (int i = 0; i < n; i++)
        fwrite(sr_data(tensors[i]), sr_dtype_size(tensors[i]->dtype), (size_t)sr_numel(tensors[i]), af.fp);
    rc = sr_atomic_commit(&af) ? sr_fail_context("safetensors save") : 0;
done:
    free(hdr);
    free(sorted);
    cJSON_Delete(root);
    return rc;
}
