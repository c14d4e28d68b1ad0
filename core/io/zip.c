/* zip.c - validated read-only zip archives (see zip.h). */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "io/zip.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_END 0x06054b50u

static uint32_t u16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t u32(const unsigned char *p) { return u16(p) | u16(p + 2) << 16; }

void sr_zip_close(sr_zip *z)
{
    for (int i = 0; i < z->n; i++)
        free(z->entries[i].name);
    free(z->entries);
    free(z->by_name);
    if (z->mapped && z->map)
        munmap((void *)z->map, z->size);
    free(z->path);
    memset(z, 0, sizeof *z);
}

int sr_zip_sniff(const void *buf, size_t size) { return size >= 4 && u32(buf) == SIG_LOCAL; }

/* A name an extractor could be led outside its folder by, or that is not a
 * plain relative path, is refused: the reader never writes files, but a
 * name is a name wherever it goes next. */
static int check_name(const sr_zip *z, const unsigned char *p, uint32_t len)
{
    if (len == 0 || len > SR_ZIP_MAX_NAME)
        return sr_fail("zip %s: entry name of %u bytes (1 to %d)", z->path, len, SR_ZIP_MAX_NAME);
    if (memchr(p, 0, len))
        return sr_fail("zip %s: entry name holds a NUL byte", z->path);
    if (memchr(p, '\\', len))
        return sr_fail("zip %s: entry name '%.*s' holds a backslash", z->path, (int)len, (const char *)p);
    if (p[0] == '/')
        return sr_fail("zip %s: entry name '%.*s' is absolute", z->path, (int)len, (const char *)p);
    uint32_t start = 0;
    for (uint32_t i = 0; i <= len; i++) {
        if (i == len || p[i] == '/') {
            uint32_t n = i - start;
            if ((n == 2 && p[start] == '.' && p[start + 1] == '.') || (n == 0 && i != len) ||
                (n == 1 && p[start] == '.'))
                return sr_fail("zip %s: entry name '%.*s' has a '..', '.' or empty component (path traversal)",
                               z->path, (int)len, (const char *)p);
            start = i + 1;
        }
    }
    return 0;
}

static int cmp_header(const void *a, const void *b)
{
    const sr_zip_entry *x = *(sr_zip_entry *const *)a, *y = *(sr_zip_entry *const *)b;
    return x->header < y->header ? -1 : x->header > y->header;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(sr_zip_entry *const *)a)->name, (*(sr_zip_entry *const *)b)->name);
}

static int parse(sr_zip *z)
{
    const unsigned char *m = z->map;
    size_t size = z->size;
    if (size < 22)
        return sr_fail("zip %s: %zu bytes, too short for a zip archive (truncated?)", z->path, size);
    /* The end record: 22 bytes plus a comment of at most 65535. */
    size_t lo = size > 22 + 65535 ? size - 22 - 65535 : 0, end = (size_t)-1;
    for (size_t i = size - 22 + 1; i-- > lo;)
        if (u32(m + i) == SIG_END && i + 22 + u16(m + i + 20) == size) {
            end = i;
            break;
        }
    if (end == (size_t)-1)
        return sr_fail("zip %s: no end-of-central-directory record (not a zip archive, or truncated)", z->path);
    const unsigned char *e = m + end;
    uint32_t disk = u16(e + 4), cd_disk = u16(e + 6), n_disk = u16(e + 8), n = u16(e + 10);
    uint32_t cd_size = u32(e + 12), cd_off = u32(e + 16);
    if (n == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu)
        return sr_fail("zip %s: zip64 archive (entries %u, directory size %u, offset %u): not supported "
                       "(files over 4 GiB or 65535 entries)", z->path, n, cd_size, cd_off);
    if (disk != 0 || cd_disk != 0 || n_disk != n)
        return sr_fail("zip %s: multi-disk archive (disk %u, directory disk %u, %u of %u entries here)", z->path,
                       disk, cd_disk, n_disk, n);
    if ((uint64_t)cd_off + cd_size > end)
        return sr_fail("zip %s: central directory [%u, +%u) runs past its end record at %zu", z->path, cd_off,
                       cd_size, end);
    if ((uint64_t)n * 46 > cd_size)
        return sr_fail("zip %s: %u entries cannot fit a central directory of %u bytes", z->path, n, cd_size);
    z->entries = calloc((size_t)n + 1, sizeof *z->entries);
    z->by_name = malloc(sizeof *z->by_name * ((size_t)n + 1));
    if (!z->entries || !z->by_name)
        return sr_fail("zip %s: out of memory", z->path);
    const unsigned char *p = m + cd_off, *cd_end = m + cd_off + cd_size;
    for (uint32_t i = 0; i < n; i++) {
        if (cd_end - p < 46 || u32(p) != SIG_CENTRAL)
            return sr_fail("zip %s: central entry %u at %zu: bad signature or truncated", z->path, i,
                           (size_t)(p - m));
        uint32_t flags = u16(p + 8), method = u16(p + 10), crc = u32(p + 16), csize = u32(p + 20),
                 usize = u32(p + 24), nlen = u16(p + 28), xlen = u16(p + 30), clen = u16(p + 32),
                 sdisk = u16(p + 34), hoff = u32(p + 42);
        if ((size_t)(cd_end - p) < 46 + (size_t)nlen + xlen + clen)
            return sr_fail("zip %s: central entry %u: name, extra and comment (%u+%u+%u bytes) run past the "
                           "directory", z->path, i, nlen, xlen, clen);
        if (check_name(z, p + 46, nlen))
            return -1;
        sr_zip_entry *en = &z->entries[z->n];
        if (!(en->name = malloc(nlen + 1)))
            return sr_fail("zip %s: out of memory", z->path);
        memcpy(en->name, p + 46, nlen);
        en->name[nlen] = 0;
        z->n++;
        if (flags & 0x41)
            return sr_fail("zip %s: entry '%s' is encrypted (flags 0x%x)", z->path, en->name, flags);
        if (method != 0 && method != 8)
            return sr_fail("zip %s: entry '%s' uses compression method %u (only stored 0 and deflate 8)",
                           z->path, en->name, method);
        if (csize == 0xFFFFFFFFu || usize == 0xFFFFFFFFu || hoff == 0xFFFFFFFFu)
            return sr_fail("zip %s: entry '%s' has zip64 sizes or offset: not supported (entries over 4 GiB)",
                           z->path, en->name);
        if (sdisk != 0)
            return sr_fail("zip %s: entry '%s' starts on disk %u", z->path, en->name, sdisk);
        if (method == 0 && csize != usize)
            return sr_fail("zip %s: stored entry '%s' has compressed size %u but size %u", z->path, en->name, csize,
                           usize);
        if (method == 8 && (uint64_t)usize > (uint64_t)csize * SR_ZIP_MAX_RATIO + 65536)
            return sr_fail("zip %s: deflated entry '%s' declares %u bytes from %u (over %u:1: a zip bomb?)", z->path,
                           en->name, usize, csize, SR_ZIP_MAX_RATIO);
        /* The local header: before the directory, its name the same. */
        if ((uint64_t)hoff + 30 > cd_off)
            return sr_fail("zip %s: entry '%s' local header at %u lies past the central directory (%u)", z->path,
                           en->name, hoff, cd_off);
        const unsigned char *lh = m + hoff;
        uint32_t lnlen = u16(lh + 26), lxlen = u16(lh + 28);
        if (u32(lh) != SIG_LOCAL)
            return sr_fail("zip %s: entry '%s': no local header at %u", z->path, en->name, hoff);
        uint64_t data = (uint64_t)hoff + 30 + lnlen + lxlen;
        if (lnlen != nlen || data > cd_off || memcmp(lh + 30, en->name, nlen) != 0)
            return sr_fail("zip %s: entry '%s': the local header at %u names another entry or runs past the "
                           "directory", z->path, en->name, hoff);
        if (data + csize > cd_off)
            return sr_fail("zip %s: entry '%s' data [%llu, +%u) runs past the central directory at %u "
                           "(truncated?)", z->path, en->name, (unsigned long long)data, csize, cd_off);
        en->header = hoff;
        en->data = data;
        en->csize = csize;
        en->usize = usize;
        en->crc = crc;
        en->method = (int)method;
        p += 46 + nlen + xlen + clen;
    }
    for (int i = 0; i < z->n; i++)
        z->by_name[i] = &z->entries[i];
    qsort(z->by_name, (size_t)z->n, sizeof *z->by_name, cmp_header);
    for (int i = 1; i < z->n; i++)
        if (z->by_name[i]->header < z->by_name[i - 1]->data + z->by_name[i - 1]->csize)
            return sr_fail("zip %s: entries '%s' and '%s' overlap", z->path, z->by_name[i - 1]->name,
                           z->by_name[i]->name);
    qsort(z->by_name, (size_t)z->n, sizeof *z->by_name, cmp_name);
    for (int i = 1; i < z->n; i++)
        if (strcmp(z->by_name[i]->name, z->by_name[i - 1]->name) == 0)
            return sr_fail("zip %s: entry '%s' appears twice", z->path, z->by_name[i]->name);
    return 0;
}

int sr_zip_open_memory(sr_zip *z, const void *buf, size_t size, const char *label)
{
    memset(z, 0, sizeof *z);
    z->path = strdup(label ? label : "<memory>");
    z->map = buf;
    z->size = size;
    if (!z->path || parse(z)) {
        sr_zip_close(z);
        return -1;
    }
    return 0;
}

int sr_zip_open(sr_zip *z, const char *path)
{
    memset(z, 0, sizeof *z);
    const void *map;
    if (sr_fs_map_regular(path, "zip", &map, &z->size))
        return -1;
    z->map = map;
    z->mapped = map != NULL;
    z->path = strdup(path);
    if (!z->path || parse(z)) {
        sr_zip_close(z);
        return -1;
    }
    return 0;
}

const sr_zip_entry *sr_zip_find(const sr_zip *z, const char *name)
{
    int lo = 0, hi = z->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(z->by_name[mid]->name, name);
        if (c == 0)
            return z->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* zlib's crc32 takes uInt lengths: feed it in pieces. */
static uint32_t crc_of(const unsigned char *p, uint64_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

static int inflate_entry(const sr_zip *z, const sr_zip_entry *e, unsigned char *out)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -MAX_WBITS) != Z_OK)
        return sr_fail("zip %s: entry '%s': inflateInit failed", z->path, e->name);
    s.next_in = (Bytef *)(z->map + e->data);
    s.avail_in = (uInt)e->csize;
    s.next_out = out;
    s.avail_out = (uInt)e->usize; /* never past the declared size */
    int rc = inflate(&s, Z_FINISH);
    uint64_t got = s.total_out;
    inflateEnd(&s);
    if (rc != Z_STREAM_END || got != e->usize)
        return sr_fail("zip %s: deflated entry '%s' is corrupt or does not inflate to its declared %llu bytes "
                       "(zlib %d after %llu bytes)", z->path, e->name, (unsigned long long)e->usize, rc,
                       (unsigned long long)got);
    return 0;
}

int sr_zip_read(const sr_zip *z, const sr_zip_entry *e, const unsigned char **data, void **owned)
{
    *data = NULL;
    *owned = NULL;
    if (e->method == 0) {
        *data = z->map + e->data;
    } else {
        unsigned char *buf = malloc(e->usize ? (size_t)e->usize : 1);
        if (!buf)
            return sr_fail("zip %s: entry '%s': out of memory for %llu bytes", z->path, e->name,
                           (unsigned long long)e->usize);
        if (inflate_entry(z, e, buf)) {
            free(buf);
            return -1;
        }
        *data = buf;
        *owned = buf;
    }
    if (crc_of(*data, e->usize) != e->crc) {
        free(*owned);
        *owned = NULL;
        *data = NULL;
        return sr_fail("zip %s: entry '%s' fails its CRC-32 check (corrupt)", z->path, e->name);
    }
    return 0;
}
