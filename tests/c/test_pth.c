/* test_pth.c - io/zip.c and io/pth.c without Lua: a torch.save fixture's
 * tree and a non-contiguous tensor read in logical order; a real deflated
 * entry (zlib) read back, and the same entry declaring 100x its size
 * refused as a zip bomb. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io/pth.h"
#include "io/zip.h"
#include "check.h"
#include "test.h"

static const sr_pv *dict_get(const sr_pv *d, const char *key)
{
    for (int i = 0; i + 1 < d->n; i += 2)
        if (d->items[i]->kind == SR_PV_STR && strcmp(d->items[i]->s, key) == 0)
            return d->items[i + 1];
    return NULL;
}

TEST(pth_fixture_tree_and_strided_tensor)
{
    sr_pth_file f;
    CHECK_OK(sr_pth_open(&f, "tests/fixtures/pth/resnet18.pth"));
    const sr_pv *fc = f.root->kind == SR_PV_DICT ? dict_get(f.root, "fc.weight") : NULL;
    int ok = fc && fc->kind == SR_PV_TENSOR && fc->t->ndim == 2 && fc->t->shape[0] == 10 && fc->t->shape[1] == 16 &&
             fc->t->stride[0] == 1 && fc->t->stride[1] == 10;
    sr_tensor t = SR_TENSOR_INIT;
    /* element (i, j) is storage[j * 10 + i]: the logical order, not the storage's */
    const sr_pth_storage *st = ok ? &f.storages[fc->t->storage] : NULL;
    const unsigned char *d = NULL;
    void *owned = NULL;
    if (ok && sr_pth_read(&f, fc->t, &t, SR_F64) == 0 && sr_zip_read(&f.zip, st->entry, &d, &owned) == 0) {
        for (int i = 0; ok && i < 10; i++)
            for (int j = 0; ok && j < 16; j++)
                ok = sr_f64(&t)[i * 16 + j] == sr_st_load(d, st->dtype, j * 10 + i);
    } else {
        ok = 0;
    }
    free(owned);
    sr_tensor_free(&t);
    sr_pth_close(&f);
    CHECK(ok, "fc.weight: not the (10,16) view with strides (1,10) read in logical order");
}

/* A zip of one deflated entry "a/x" (usize patched to declared). */
static unsigned char *deflated_zip(const unsigned char *src, size_t n, uint32_t declared, size_t *len)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY);
    size_t cap = deflateBound(&s, (uLong)n);
    unsigned char *c = malloc(cap);
    s.next_in = (Bytef *)src, s.avail_in = (uInt)n, s.next_out = c, s.avail_out = (uInt)cap;
    deflate(&s, Z_FINISH);
    uint32_t cs = (uint32_t)s.total_out, crc = (uint32_t)crc32(0, src, (uInt)n);
    deflateEnd(&s);
    unsigned char *z = calloc(1, 30 + 3 + cs + 46 + 3 + 22), *p = z;
#define PUT(v, k) for (int i_ = 0; i_ < (k); i_++) *p++ = (unsigned char)((uint64_t)(v) >> (8 * i_))
    PUT(0x04034b50, 4); PUT(20, 2); PUT(0, 2); PUT(8, 2); PUT(0, 4); PUT(crc, 4); PUT(cs, 4); PUT(declared, 4);
    PUT(3, 2); PUT(0, 2); memcpy(p, "a/x", 3); p += 3; memcpy(p, c, cs); p += cs;
    unsigned char *cd = p;
    PUT(0x02014b50, 4); PUT(20, 2); PUT(20, 2); PUT(0, 2); PUT(8, 2); PUT(0, 4); PUT(crc, 4); PUT(cs, 4);
    PUT(declared, 4); PUT(3, 2); PUT(0, 2); PUT(0, 2); PUT(0, 2); PUT(0, 2); PUT(0, 4); PUT(0, 4);
    memcpy(p, "a/x", 3); p += 3;
    uint32_t cdl = (uint32_t)(p - cd), cdo = (uint32_t)(cd - z);
    PUT(0x06054b50, 4); PUT(0, 4); PUT(1, 2); PUT(1, 2); PUT(cdl, 4); PUT(cdo, 4); PUT(0, 2);
#undef PUT
    free(c);
    *len = (size_t)(p - z);
    return z;
}

TEST(zip_deflate_read_and_bomb_refused)
{
    size_t n = 1 << 20, len;
    unsigned char *src = malloc(n);
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i % 251 < 5 ? i : 0); /* compressible, not trivial */
    unsigned char *z = deflated_zip(src, n, (uint32_t)n, &len);
    sr_zip zip;
    const unsigned char *d = NULL;
    void *owned = NULL;
    int opened = sr_zip_open_memory(&zip, z, len, "t.zip") == 0;
    int ok = opened && zip.n == 1 && sr_zip_read(&zip, &zip.entries[0], &d, &owned) == 0 && memcmp(d, src, n) == 0;
    free(owned);
    if (opened)
        sr_zip_close(&zip);
    free(z);
    z = deflated_zip(src, n, (uint32_t)n * 100, &len); /* declares 100 MB from ~25 KB */
    int r = sr_zip_open_memory(&zip, z, len, "bomb.zip");
    free(z);
    free(src);
    CHECK(ok, "the deflated entry did not read back: %s", sr_errmsg());
    CHECK(r != 0 && strstr(sr_errmsg(), "zip bomb"), "a 100x declared size was not refused: %s", sr_errmsg());
}
