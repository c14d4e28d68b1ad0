/* fuzz_pth.c - libFuzzer target: any byte string given to the zip reader
 * and the restricted unpickler (io/pth.c) must be refused cleanly or give a
 * tree whose every tensor reads inside its storage (read each to prove it).
 *
 * The first byte picks what the rest is: even, a whole archive (the zip
 * reader's input); odd, a data.pkl that is wrapped here into a valid archive
 * with storages a/data/0..3 of 64 bytes each, so mutations of the pickle
 * reach the unpickler instead of stopping at the archive's CRC check. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io/pth.h"

static unsigned char *put(unsigned char *p, uint32_t v, int k)
{
    for (int i = 0; i < k; i++)
        *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

/* A stored zip of n entries (names[i], data[i], sizes[i]); *len its size. */
static unsigned char *make_zip(int n, const char **names, const unsigned char **data, const size_t *sizes, size_t *len)
{
    size_t total = 22;
    for (int i = 0; i < n; i++)
        total += 30 + 46 + 2 * strlen(names[i]) + sizes[i];
    unsigned char *z = malloc(total), *p = z;
    uint32_t offs[8];
    for (int i = 0; i < n; i++) {
        uint32_t nl = (uint32_t)strlen(names[i]), crc = (uint32_t)crc32(0, data[i], (uInt)sizes[i]);
        offs[i] = (uint32_t)(p - z);
        p = put(p, 0x04034b50, 4), p = put(p, 20, 2), p = put(p, 0, 2), p = put(p, 0, 2), p = put(p, 0, 4);
        p = put(p, crc, 4), p = put(p, (uint32_t)sizes[i], 4), p = put(p, (uint32_t)sizes[i], 4);
        p = put(p, nl, 2), p = put(p, 0, 2);
        memcpy(p, names[i], nl), p += nl;
        memcpy(p, data[i], sizes[i]), p += sizes[i];
    }
    unsigned char *cd = p;
    for (int i = 0; i < n; i++) {
        uint32_t nl = (uint32_t)strlen(names[i]), crc = (uint32_t)crc32(0, data[i], (uInt)sizes[i]);
        p = put(p, 0x02014b50, 4), p = put(p, 20, 2), p = put(p, 20, 2), p = put(p, 0, 2), p = put(p, 0, 2);
        p = put(p, 0, 4), p = put(p, crc, 4), p = put(p, (uint32_t)sizes[i], 4), p = put(p, (uint32_t)sizes[i], 4);
        p = put(p, nl, 2), p = put(p, 0, 2), p = put(p, 0, 2), p = put(p, 0, 2), p = put(p, 0, 2), p = put(p, 0, 4);
        p = put(p, offs[i], 4);
        memcpy(p, names[i], nl), p += nl;
    }
    uint32_t cds = (uint32_t)(p - cd), cdo = (uint32_t)(cd - z);
    p = put(p, 0x06054b50, 4), p = put(p, 0, 4), p = put(p, (uint32_t)n, 2), p = put(p, (uint32_t)n, 2);
    p = put(p, cds, 4), p = put(p, cdo, 4), p = put(p, 0, 2);
    *len = (size_t)(p - z);
    return z;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned char *zipbuf = NULL;
    const unsigned char *in = data + 1;
    size_t n = size - 1;
    if (data[0] & 1) {
        static unsigned char storage[64];
        for (int i = 0; i < 64; i++)
            storage[i] = (unsigned char)(i * 37);
        const char *names[] = {"a/data.pkl", "a/data/0", "a/data/1", "a/data/2", "a/data/3"};
        const unsigned char *bytes[] = {in, storage, storage, storage, storage};
        size_t sizes[] = {n, 64, 64, 64, 64};
        zipbuf = make_zip(5, names, bytes, sizes, &n);
        in = zipbuf;
    }
    sr_pth_file f;
    if (sr_pth_open_memory(&f, in, n, "fuzz") == 0) {
        for (int64_t i = 0; i < f.nvalues; i++) {
            const sr_pv *v = f.values[i];
            if (v->kind != SR_PV_TENSOR)
                continue;
            sr_tensor t = SR_TENSOR_INIT;
            int64_t count = 1;
            for (int d = 0; d < v->t->ndim; d++)
                count *= v->t->shape[d] > 0 ? v->t->shape[d] : 1;
            /* Cap the work per input: a valid pickle may describe big views. */
            if (count <= (1 << 20))
                sr_pth_read(&f, v->t, &t, i % 2 ? SR_F64 : SR_F32);
            sr_tensor_free(&t);
        }
        sr_pth_close(&f);
    }
    free(zipbuf);
    return 0;
}
