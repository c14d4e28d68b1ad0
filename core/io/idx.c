/* idx.c - IDX readers (plain or gzip) and the uint8 image store. */
#include "io/idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "base/checked.h"
#include "base/fsutil.h"

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

/* An IDX file, plain or gzip-compressed (detected by its first two bytes,
 * 1f 8b).  gzip goes through zlib's inflate directly rather than gzread:
 * gzread silently skips whatever follows the last gzip member, so junk
 * after the stream passed while the same junk after a plain file did not.
 * Here both are errors; concatenated members (what `cat a.gz b.gz` makes,
 * and gzip -d reads) are one stream, as gzip has it. */
typedef struct {
    const char *path;
    FILE *fp;
    int64_t fsize;     /* on disk */
    int gz;            /* gzip stream */
    int member_end;    /* inflate finished a member; next: another member or the end */
    z_stream zs;
    unsigned char in[1 << 16];
} idx_file;

static int idx_open(idx_file *x, const char *path)
{
    x->path = path;
    struct stat st;
    x->fp = sr_fs_open_regular(path, "idx");
    if (!x->fp)
        return -1;
    if (fstat(fileno(x->fp), &st) != 0) {
        fclose(x->fp);
        x->fp = NULL;
        return sr_fail("idx %s: %s", path, strerror(errno));
    }
    x->fsize = st.st_size;
    setvbuf(x->fp, NULL, _IOFBF, 1 << 18);
    size_t k = fread(x->in, 1, 2, x->fp);
    if (k == 2 && x->in[0] == 0x1f && x->in[1] == 0x8b) {
        x->gz = 1;
        x->zs.next_in = x->in;
        x->zs.avail_in = 2;
        if (inflateInit2(&x->zs, 16 + MAX_WBITS) != Z_OK) { /* 16: gzip wrapper */
            fclose(x->fp);
            x->fp = NULL;
            return sr_fail("idx %s: zlib: cannot start inflating", path);
        }
    } else {
        rewind(x->fp);
    }
    return 0;
}

static void idx_close(idx_file *x)
{
    if (x->gz)
        inflateEnd(&x->zs);
    if (x->fp)
        fclose(x->fp);
    x->fp = NULL;
}

/* Keep at least `want` (1 or 2) unread compressed bytes in x->in, reading
 * more from the file; returns how many are there (fewer at the end). */
static int gz_have(idx_file *x, unsigned want)
{
    if (x->zs.avail_in >= want)
        return (int)x->zs.avail_in;
    memmove(x->in, x->zs.next_in, x->zs.avail_in);
    size_t k = fread(x->in + x->zs.avail_in, 1, sizeof x->in - x->zs.avail_in, x->fp);
    if (ferror(x->fp))
        return sr_fail("idx %s: %s", x->path, strerror(errno));
    x->zs.next_in = x->in;
    x->zs.avail_in += (unsigned)k;
    return (int)x->zs.avail_in;
}

/* Up to n bytes of data into buf: the count (0 only at the end of the
 * data), or -1 with the error set. */
static int64_t idx_read_some(idx_file *x, void *buf, size_t n)
{
    if (!x->gz) {
        size_t k = fread(buf, 1, n, x->fp);
        if (k == 0 && ferror(x->fp))
            return sr_fail("idx %s: %s", x->path, strerror(errno));
        return (int64_t)k;
    }
    x->zs.next_out = buf;
    x->zs.avail_out = n > (1u << 30) ? (1u << 30) : (unsigned)n;
    unsigned asked = x->zs.avail_out;
    while (x->zs.avail_out > 0) {
        if (x->member_end) {
            int have = gz_have(x, 2);
            if (have < 0)
                return -1;
            if (have == 0)
                break; /* the end of the data */
            if (have < 2 || x->zs.next_in[0] != 0x1f || x->zs.next_in[1] != 0x8b)
                return sr_fail("idx %s: trailing bytes after the gzip stream", x->path);
            inflateReset(&x->zs); /* the next member of a concatenated gzip file */
            x->member_end = 0;
        }
        int have = gz_have(x, 1);
        if (have < 0)
            return -1;
        if (have == 0)
            return sr_fail("idx %s: truncated gzip stream (the file ends inside it)", x->path);
        int r = inflate(&x->zs, Z_NO_FLUSH);
        if (r == Z_STREAM_END)
            x->member_end = 1;
        else if (r != Z_OK && r != Z_BUF_ERROR)
            return sr_fail("idx %s: corrupt gzip data: %s", x->path, x->zs.msg ? x->zs.msg : "inflate failed");
    }
    return (int64_t)(asked - x->zs.avail_out);
}

/* Read exactly n bytes; short reads name what was being read. */
static int idx_read(idx_file *x, void *buf, size_t n, const char *what)
{
    size_t got = 0;
    while (got < n) {
        int64_t k = idx_read_some(x, (char *)buf + got, n - got);
        if (k < 0)
            return -1;
        if (k == 0)
            return sr_fail("idx %s: truncated: %zu of %zu bytes of the %s", x->path, got, n, what);
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
    if (!x->gz && x->fsize != header_bytes + n)
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
    int64_t k = idx_read_some(x, &extra, 1);
    if (k != 0) {
        free(buf);
        return k > 0 ? sr_fail("idx %s: trailing bytes after the %lld data bytes the header "
                               "promises", x->path, (long long)n)
                     : -1;
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
    int64_t bytes;
    if (d[1] < 1 || d[2] < 1 || d[1] > 16384 || d[2] > 16384 || SR_COUNT(&bytes, "idx", d[0], d[1], d[2])) {
        sr_fail("idx %s: implausible dims %lld x %lld x %lld", path, (long long)d[0],
                (long long)d[1], (long long)d[2]);
        goto done;
    }
    if (idx_body(&x, bytes, &data, 16))
        goto done;
    sr_u8images_free(out);
    *out = (sr_u8images){d[0], 1, d[1], d[2], data};
    rc = 0;
done:
    idx_close(&x);
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
    idx_close(&x);
    return rc;
}
