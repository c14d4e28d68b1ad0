/* npy.c - read and write NumPy .npy arrays. */
#include "io/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/checked.h"
#include "base/fsutil.h"

/* Find 'key': value in the header dict; returns pointer after the colon. */
static const char *dict_value(const char *h, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p)
        return NULL;
    p = strchr(p + strlen(pat), ':');
    if (!p)
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

/* The quoted string at p ('<f4' or "<f4") into buf, or "?" when it is not one. */
static const char *quoted(const char *p, char *buf, size_t n)
{
    char q = *p;
    const char *end = (q == '\'' || q == '"') ? strchr(p + 1, q) : NULL;
    if (!end || (size_t)(end - p - 1) >= n) {
        snprintf(buf, n, "?");
        return buf;
    }
    memcpy(buf, p + 1, (size_t)(end - p - 1));
    buf[end - p - 1] = 0;
    return buf;
}

static int parse_header(const char *path, const char *h, sr_dtype *dt, int *ndim, int64_t *shape)
{
    const char *d = dict_value(h, "descr"), *f = dict_value(h, "fortran_order"), *s = dict_value(h, "shape");
    if (!d || !f || !s)
        return sr_fail("npy %s: header lacks descr, fortran_order or shape", path);
    char descr[16];
    quoted(d, descr, sizeof descr);
    if (strcmp(descr, "<f4") == 0)
        *dt = SR_F32;
    else if (strcmp(descr, "<f8") == 0)
        *dt = SR_F64;
    else
        return sr_fail("npy %s: dtype '%s' is not supported (float32 <f4 or float64 <f8, little-endian)", path,
                       descr);
    if (strncmp(f, "False", 5) != 0)
        return sr_fail("npy %s: Fortran-order arrays are not supported (save with C order)", path);
    if (*s != '(')
        return sr_fail("npy %s: malformed shape", path);
    s++;
    *ndim = 0;
    while (1) {
        while (*s == ' ' || *s == ',')
            s++;
        if (*s == ')')
            break;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || errno)
            return sr_fail("npy %s: malformed shape", path);
        if (*ndim >= SR_MAXDIM)
            return sr_fail("npy %s: more than %d dimensions", path, SR_MAXDIM);
        shape[(*ndim)++] = v;
        s = end;
    }
    return 0;
}

int sr_npy_load(sr_tensor *out, const char *path)
{
    FILE *fp = sr_fs_open_regular(path, "npy");
    if (!fp)
        return -1;
    int rc = -1;
    unsigned char pre[12];
    char *header = NULL;
    sr_tensor t = SR_TENSOR_INIT;
    struct stat st;
    if (fstat(fileno(fp), &st) != 0) {
        sr_fail("npy %s: %s", path, strerror(errno));
        goto done;
    }
    if (fread(pre, 1, 10, fp) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        sr_fail("npy %s: not a .npy file (bad magic)", path);
        goto done;
    }
    size_t hlen, pre_len = 10;
    if (pre[6] == 1) {
        hlen = pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, fp) != 2) {
            sr_fail("npy %s: truncated header", path);
            goto done;
        }
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
        pre_len = 12;
    } else {
        sr_fail("npy %s: unknown format version %d", path, pre[6]);
        goto done;
    }
    if (hlen > (1u << 20)) {
        sr_fail("npy %s: header of %zu bytes is implausible", path, hlen);
        goto done;
    }
    header = malloc(hlen + 1);
    if (!header || fread(header, 1, hlen, fp) != hlen) {
        sr_fail("npy %s: truncated header", path);
        goto done;
    }
    header[hlen] = 0;
    sr_dtype dt = SR_F32;
    int ndim = 0;
    int64_t shape[SR_MAXDIM], n;
    char op[80];
    snprintf(op, sizeof op, "npy %.60s: shape", path);
    size_t need;
    if (parse_header(path, header, &dt, &ndim, shape) || sr_shape_count(op, ndim, shape, &n) ||
        sr_count_bytes(&need, op, n, sr_dtype_size(dt)))
        goto done;
    /* The data must be exactly what the header promises, checked against
     * the file's size before anything is allocated: a 72-byte file claiming
     * 10^9 elements fails here, not after a 4 GB allocation. */
    if (S_ISREG(st.st_mode)) {
        uint64_t at = pre_len + hlen, have = (uint64_t)st.st_size > at ? (uint64_t)st.st_size - at : 0;
        if (have != need) {
            sr_fail("npy %s: %s: the file holds %llu data bytes, the header's shape (%lld values of %s) needs %zu",
                    path, have < need ? "truncated data" : "trailing bytes after the data",
                    (unsigned long long)have, (long long)n, sr_dtype_name(dt), need);
            goto done;
        }
    }
    if (sr_tensor_alloc(&t, dt, ndim, shape))
        goto done;
    if (fread(sr_data(&t), 1, need, fp) != need) {
        sr_fail("npy %s: truncated data (expected %lld values of %s)", path, (long long)n, sr_dtype_name(dt));
        goto done;
    }
    if (fgetc(fp) != EOF) { /* a pipe or device: no size to check first */
        sr_fail("npy %s: trailing bytes after the data", path);
        goto done;
    }
    sr_tensor_free(out);
    *out = t;
    t = (sr_tensor)SR_TENSOR_INIT;
    rc = 0;
done:
    sr_tensor_free(&t);
    free(header);
    fclose(fp);
    return rc;
}

int sr_npy_save(const char *path, const sr_tensor *t)
{
    char dict[256], shape[160] = "";
    size_t k = 0;
    for (int i = 0; i < t->ndim; i++)
        k += (size_t)snprintf(shape + k, sizeof shape - k, "%lld,%s", (long long)t->shape[i],
                              (i + 1 < t->ndim) ? " " : "");
    if (t->ndim > 1)
        shape[k - 1] = 0; /* "(2, 3)" not "(2, 3,)" */
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     t->dtype == SR_F64 ? "<f8" : "<f4", shape);
    /* Pad so magic(6)+version(2)+len(2)+header is a multiple of 64. */
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    char header[512];
    memcpy(header, "\x93NUMPY\x01\x00", 8);
    int hl = n + pad + 1;
    header[8] = (char)(hl & 0xff);
    header[9] = (char)(hl >> 8);
    memcpy(header + 10, dict, (size_t)n);
    memset(header + 10 + n, ' ', (size_t)pad);
    header[10 + n + pad] = '\n';
    sr_atomic_file f;
    if (sr_atomic_open(&f, path))
        return sr_fail_context("npy save");
    fwrite(header, 1, (size_t)(10 + hl), f.fp);
    fwrite(sr_data(t), sr_dtype_size(t->dtype), (size_t)sr_numel(t), f.fp);
    return sr_atomic_commit(&f) ? sr_fail_context("npy save") : 0;
}
