/* idx.c - IDX readers (plain or gzip) and the uint8 image store. */
#include "io/idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define IDX_IMAGES 0x00000803u
#define IDX_LABELS 0x00000801u

void sr_u8images_free(sr_u8images *s)
{
    free(s->data);
    *s = (sr_u8images)SR_U8IMAGES_INIT;
}

int sr_u8images_gather(sr_tensor *out, const sr_u8images *s, const int64_t *idx, int64_t b,
                       sr_dtype dtype)
{
    for (int64_t i = 0; i < b; i++)
        if (idx[i] < 0 || idx[i] >= s->n)
            return sr_fail("gather: index %lld out of range (0..%lld)", (long long)idx[i],
                           (long long)s->n - 1);
    if (sr_tensor_ensure(out, dtype, 4, (int64_t[]){b, s->c, s->h, s->w}))
        return -1;
    int64_t per = sr_u8images_itemsize(s);
    /* A table rather than a division: value/255 exactly as a float. */
    double lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = v / 255.0;
    for (int64_t i = 0; i < b; i++) {
        const uint8_t *src = s->data + idx[i] * per;
        if (dtype == SR_F64) {
            double *dst = sr_f64(out) + i * per;
            for (int64_t j = 0; j < per; j++)
                dst[j] = lut[src[j]];
        } else {
            float *dst = sr_f32(out) + i * per;
            for (int64_t j = 0; j < per; j++)
                dst[j] = (float)lut[src[j]];
        }
    }
    return 0;
}

/* ---- the IDX format: 0 0 type ndims, ndims big-endian u32 dims, data --- */

typedef struct {
    const char *path;
    gzFile f;
    int64_t fsize; /* on disk */
} idx_file;

static const char *gz_msg(idx_file *x)
{
    int code = 0;
    const char *m = gzerror(x->f, &code);
    if (code == Z_ERRNO)
        return strerror(errno);
    return (code != Z_OK && m && *m) ? m : "unexpected end of file";
}

static int idx_open(idx_file *x, const char *path)
{
    x->path = path;
    struct stat st;
    if (stat(path, &st) != 0)
        return sr_fail("idx %s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return sr_fail("idx %s: is a directory", path);
    x->fsize = st.st_size;
    x->f = gzopen(path, "rb");
    if (!x->f)
        return sr_fail("idx %s: %s", path, errno ? strerror(errno) : "cannot open");
    gzbuffer(x->f, 1 << 18);
    return 0;
}

/* Read exactly n bytes; short reads name what was being read. */
static int idx_read(idx_file *x, void *buf, size_t n, const char *what)
{
    size_t got = 0;
    while (got < n) {
        unsigned chunk = n - got > (1u << 30) ? (1u << 30) : (unsigned)(n - got);
        int k = gzread(x->f, (char *)buf + got, chunk);
        if (k < 0)
            return sr_fail("idx %s: corrupt data reading the %s: %s", x->path, what, gz_msg(x));
        if (k == 0)
            return sr_fail("idx %s: truncated: %zu of %zu bytes of the %s (%s)", x->path, got, n,
                           what, gz_msg(x));
        got += (size_t)k;
    }
    return 0;
}

/* Header: magic and dims, validated against what the caller expects. */
static int idx_header(idx_file *x, uint32_t want, int ndim, int64_t *dims)
{
    unsigned char h[4];
    if (idx_read(x, h, 4, "header"))
        return -1;
    uint32_t magic = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    if (magic != want) {
        const char *kind = magic == IDX_IMAGES   ? " (an IDX image file)"
                           : magic == IDX_LABELS ? " (an IDX label file)"
                           : (h[0] || h[1])      ? " (not an IDX file)"
                           : h[2] != 0x08        ? " (IDX with non-ubyte elements)"
                                                 : "";
        return sr_fail("idx %s: bad magic 0x%08x%s, expected 0x%08x (%s)", x->path, magic, kind,
                       want, want == IDX_IMAGES ? "images" : "labels");
    }
    (void)ndim;
    unsigned char d[12];
    if (idx_read(x, d, 4 * (size_t)ndim, "dimensions"))
        return -1;
    for (int i = 0; i < ndim; i++)
        dims[i] = (int64_t)d[4 * i] << 24 | d[4 * i + 1] << 16 | d[4 * i + 2] << 8 | d[4 * i + 3];
    return 0;
}

/* Read `n` data bytes into a buffer that grows as data arrives, so a header
 * promising terabytes in a short file fails on the data, not in malloc.
 * Then insist on the end of the file: trailing bytes mean a wrong header. */
static int idx_body(idx_file *x, int64_t n, uint8_t **out, int64_t header_bytes)
{
    if (gzdirect(x->f) && x->fsize != header_bytes + n)
        return sr_fail("idx %s: %s: the file has %lld bytes, its header promises %lld", x->path,
                       x->fsize < header_bytes + n ? "truncated" : "trailing bytes",
                       (long long)x->fsize, (long long)(header_bytes + n));
    size_t cap = n < (64 << 20) ? (size_t)n : (size_t)(64 << 20), got = 0;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf)
        return sr_fail("idx %s: out of memory for %lld bytes", x->path, (long long)n);
    while (got < (size_t)n) {
        if (got == cap) {
            size_t nc = cap * 2 < (size_t)n ? cap * 2 : (size_t)n;
            uint8_t *nb = realloc(buf, nc);
            if (!nb) {
                free(buf);
                return sr_fail("idx %s: out of memory for %lld bytes", x->path, (long long)n);
            }
            buf = nb;
            cap = nc;
        }
        size_t want = cap - got;
        if (idx_read(x, buf + got, want, "data")) {
            /* restate with totals: the caller wants to know how short */
            char m[512];
            snprintf(m, sizeof m, "%s", sr_errmsg());
            free(buf);
            if (strstr(m, "truncated"))
                return sr_fail("idx %s: truncated: expected %lld data bytes, the file ends first",
                               x->path, (long long)n);
            return sr_fail("%s", m);
        }
        got += want;
    }
    char extra;
    int k = gzread(x->f, &extra, 1);
    if (k != 0) {
        free(buf);
        return k > 0 ? sr_fail("idx %s: trailing bytes after the %lld data bytes the header "
                               "promises", x->path, (long long)n)
                     : sr_fail("idx %s: corrupt data: %s", x->path, gz_msg(x));
    }
    *out = buf;
    return 0;
}

int sr_idx_load_images(const char *path, sr_u8images *out)
{
    idx_file x = {0};
    if (idx_open(&x, path))
        return -1;
    int64_t d[3];
    int rc = -1;
    uint8_t *data = NULL;
    if (idx_header(&x, IDX_IMAGES, 3, d))
        goto done;
    if (d[1] < 1 || d[2] < 1 || d[1] > 16384 || d[2] > 16384 || d[0] > ((int64_t)1 << 40) / (d[1] * d[2])) {
        sr_fail("idx %s: implausible dims %lld x %lld x %lld", path, (long long)d[0],
                (long long)d[1], (long long)d[2]);
        goto done;
    }
    if (idx_body(&x, d[0] * d[1] * d[2], &data, 16))
        goto done;
    sr_u8images_free(out);
    *out = (sr_u8images){d[0], 1, d[1], d[2], data};
    rc = 0;
done:
    gzclose(x.f);
    return rc;
}

int sr_idx_load_labels(const char *path, int64_t **labels, int64_t *n)
{
    idx_file x = {0};
    if (idx_open(&x, path))
        return -1;
    int64_t d[1];
    int rc = -1;
    uint8_t *data = NULL;
    int64_t *lab = NULL;
    if (idx_header(&x, IDX_LABELS, 1, d) || idx_body(&x, d[0], &data, 8))
        goto done;
    lab = malloc(sizeof *lab * (size_t)(d[0] ? d[0] : 1));
    if (!lab) {
        sr_fail("idx %s: out of memory", path);
        goto done;
    }
    for (int64_t i = 0; i < d[0]; i++)
        lab[i] = data[i];
    *labels = lab;
    *n = d[0];
    rc = 0;
done:
    free(data);
    gzclose(x.f);
    return rc;
}
