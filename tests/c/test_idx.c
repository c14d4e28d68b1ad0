/* test_idx.c - IDX (plain and gzip) and CIFAR-10 readers: the installed
 * Fashion-MNIST (counts, label/pixel checksums), round trips of files the
 * test writes, every malformed-file error, and a mutation fuzz of both
 * readers (run it under ASan: `make sanitize`). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/rng.h"
#include "io/cifar.h"
#include "io/idx.h"
#include "check.h"
#include "test.h"

#define FMNIST "/usr/share/datasets/fashion-mnist/"

/* bytes -> file, plain or gzip */
static int write_bytes(const char *path, const unsigned char *b, size_t n, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f)
            return -1;
        int ok = n == 0 || gzwrite(f, b, (unsigned)n) == (int)n;
        return gzclose(f) == Z_OK && ok ? 0 : -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(b, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* An IDX byte image: magic, dims, then payload. */
static size_t idx_bytes(unsigned char *out, uint32_t magic, const uint32_t *dims, int nd,
                        const unsigned char *data, size_t n)
{
    size_t k = 0;
    for (int s = 24; s >= 0; s -= 8)
        out[k++] = (unsigned char)(magic >> s);
    for (int d = 0; d < nd; d++)
        for (int s = 24; s >= 0; s -= 8)
            out[k++] = (unsigned char)(dims[d] >> s);
    memcpy(out + k, data, n);
    return k + n;
}

TEST(idx_fashion_mnist_counts_and_checksums)
{
    sr_u8images tr = SR_U8IMAGES_INIT, te = SR_U8IMAGES_INIT;
    int64_t *ltr = NULL, *lte = NULL, ntr = 0, nte = 0;
    CHECK_OK(sr_idx_load_images(FMNIST "train-images-idx3-ubyte.gz", &tr));
    CHECK_OK(sr_idx_load_images(FMNIST "t10k-images-idx3-ubyte.gz", &te));
    CHECK_OK(sr_idx_load_labels(FMNIST "train-labels-idx1-ubyte.gz", &ltr, &ntr));
    CHECK_OK(sr_idx_load_labels(FMNIST "t10k-labels-idx1-ubyte.gz", &lte, &nte));
    CHECK(tr.n == 60000 && te.n == 10000 && ntr == 60000 && nte == 10000, "counts %lld %lld",
          (long long)tr.n, (long long)te.n);
    CHECK(tr.c == 1 && tr.h == 28 && tr.w == 28, "item shape");
    /* pixel byte sums computed independently once (numpy on the raw files) */
    uint64_t s = 0;
    for (int64_t i = 0; i < 60000 * 784; i++)
        s += tr.data[i];
    CHECK(s == 3431114169ull, "train pixel sum %llu", (unsigned long long)s);
    s = 0;
    for (int64_t i = 0; i < 10000 * 784; i++)
        s += te.data[i];
    CHECK(s == 573469082ull, "test pixel sum %llu", (unsigned long long)s);
    int64_t counts[10] = {0};
    for (int64_t i = 0; i < 60000; i++) {
        CHECK(ltr[i] >= 0 && ltr[i] < 10, "label %lld", (long long)ltr[i]);
        counts[ltr[i]]++;
    }
    for (int k = 0; k < 10; k++)
        CHECK(counts[k] == 6000, "class %d has %lld", k, (long long)counts[k]);
    CHECK(ltr[0] == 9 && ltr[1] == 0 && ltr[3] == 3 && lte[0] == 9 && lte[1] == 2, "first labels");
    /* gather: value/255 as float, in the requested rows */
    sr_tensor t = SR_TENSOR_INIT;
    CHECK_OK(sr_u8images_gather(&t, &te, (int64_t[]){9999, 0}, 2, SR_F32));
    CHECK(t.ndim == 4 && t.shape[0] == 2 && t.shape[1] == 1 && t.shape[2] == 28, "%s", SR_SHAPE(&t));
    for (int j = 0; j < 784; j++)
        CHECK(sr_f32(&t)[j] == te.data[9999 * 784 + j] / 255.0f &&
                  sr_f32(&t)[784 + j] == te.data[j] / 255.0f,
              "gathered pixel %d", j);
    CHECK_OK(sr_u8images_gather(&t, &te, (int64_t[]){5}, 1, SR_F64));
    CHECK(t.dtype == SR_F64 && sr_f64(&t)[400] == te.data[5 * 784 + 400] / 255.0, "f64 gather");
    CHECK_ERR(sr_u8images_gather(&t, &te, (int64_t[]){10000}, 1, SR_F32), "index 10000 out of range");
    sr_tensor_free(&t);
    sr_u8images_free(&tr), sr_u8images_free(&te);
    free(ltr), free(lte);
}

TEST(idx_roundtrip_plain_and_gzip)
{
    unsigned char px[3 * 4 * 5], buf[256];
    for (int i = 0; i < 60; i++)
        px[i] = (unsigned char)(i * 37 + 1);
    size_t n = idx_bytes(buf, 0x803, (uint32_t[]){3, 4, 5}, 3, px, 60);
    for (int gz = 0; gz < 2; gz++) {
        const char *p = check_scratch(gz ? "img.idx.gz" : "img.idx");
        CHECK(write_bytes(p, buf, n, gz) == 0, "write");
        sr_u8images s = SR_U8IMAGES_INIT;
        CHECK_OK(sr_idx_load_images(p, &s));
        CHECK(s.n == 3 && s.c == 1 && s.h == 4 && s.w == 5 && memcmp(s.data, px, 60) == 0,
              "gz=%d roundtrip", gz);
        sr_u8images_free(&s);
    }
    unsigned char lab[7] = {0, 1, 2, 9, 255, 3, 3};
    n = idx_bytes(buf, 0x801, (uint32_t[]){7}, 1, lab, 7);
    for (int gz = 0; gz < 2; gz++) {
        const char *p = check_scratch("lab.idx");
        CHECK(write_bytes(p, buf, n, gz) == 0, "write");
        int64_t *l = NULL, k = 0;
        CHECK_OK(sr_idx_load_labels(p, &l, &k));
        CHECK(k == 7 && l[3] == 9 && l[4] == 255, "labels");
        free(l);
    }
    /* zero images is a valid (empty) file */
    n = idx_bytes(buf, 0x803, (uint32_t[]){0, 28, 28}, 3, px, 0);
    const char *p = check_scratch("empty.idx");
    CHECK(write_bytes(p, buf, n, 0) == 0, "write");
    sr_u8images s = SR_U8IMAGES_INIT;
    CHECK_OK(sr_idx_load_images(p, &s));
    CHECK(s.n == 0 && s.h == 28, "empty set");
    sr_u8images_free(&s);
}

TEST(idx_malformed_files_are_clear_errors)
{
    sr_u8images s = SR_U8IMAGES_INIT;
    int64_t *l = NULL, k = 0;
    unsigned char px[2 * 3 * 3] = {0}, buf[256];
    CHECK_ERR(sr_idx_load_images("/nonexistent/train-images", &s), "/nonexistent/train-images: No such file");
    CHECK_ERR(sr_idx_load_images("/tmp", &s), "is a directory");
    /* labels given as images, and the other way round */
    CHECK_ERR(sr_idx_load_images(FMNIST "t10k-labels-idx1-ubyte.gz", &s),
              "bad magic 0x00000801 (an IDX label file), expected 0x00000803");
    CHECK_ERR(sr_idx_load_labels(FMNIST "t10k-images-idx3-ubyte.gz", &l, &k),
              "bad magic 0x00000803 (an IDX image file)");
    /* not IDX at all */
    const char *p = check_scratch("junk");
    CHECK(write_bytes(p, (const unsigned char *)"hello, world!!!!", 16, 0) == 0, "write");
    CHECK_ERR(sr_idx_load_images(p, &s), "(not an IDX file)");
    CHECK(strstr(sr_errmsg(), p), "message names the file: %s", sr_errmsg());
    /* IDX of another element type (0x0D float) */
    size_t n = idx_bytes(buf, 0x0D03, (uint32_t[]){2, 3, 3}, 3, px, 18);
    CHECK(write_bytes(p, buf, n, 0) == 0, "write");
    CHECK_ERR(sr_idx_load_images(p, &s), "non-ubyte");
    /* short header */
    idx_bytes(buf, 0x803, (uint32_t[]){2, 3, 3}, 3, px, 18);
    CHECK(write_bytes(p, buf, 6, 0) == 0, "write");
    CHECK_ERR(sr_idx_load_images(p, &s), "truncated");
    /* truncated data, plain and gzip */
    n = idx_bytes(buf, 0x803, (uint32_t[]){2, 3, 3}, 3, px, 18);
    CHECK(write_bytes(p, buf, n - 5, 0) == 0, "write");
    CHECK_ERR(sr_idx_load_images(p, &s), "truncated: the file has 29 bytes, its header promises 34");
    CHECK(write_bytes(p, buf, n - 5, 1) == 0, "write");
    CHECK_ERR(sr_idx_load_images(p, &s), "truncated");
    /* trailing bytes */
    unsigned char big[64] = {0};
    memcpy(big, buf, n);
    CHECK(write_bytes(p, big, n + 3, 0) == 0, "write");
    CHECK_ERR(sr_idx_load_images(p, &s), "trailing bytes");
    CHECK(write_bytes(p, big, n + 3, 1) == 0, "write");
    CHECK_ERR(sr_idx_load_images(p, &s), "trailing bytes");
    /* junk after the gzip stream (zlib's gzread skipped it): rejected as
     * junk after a plain file is; a second gzip member is not junk */
    CHECK(write_bytes(p, buf, n, 1) == 0, "write");
    FILE *fj = fopen(p, "ab");
    fputs("junk", fj);
    fclose(fj);
    CHECK_ERR(sr_idx_load_images(p, &s), "trailing bytes after the gzip stream");
    CHECK(write_bytes(p, buf, 20, 1) == 0 && write_bytes("build/idx_part2.gz", buf + 20, n - 20, 1) == 0, "write");
    fj = fopen(p, "ab");
    FILE *f2 = fopen("build/idx_part2.gz", "rb");
    int ch;
    while ((ch = fgetc(f2)) != EOF)
        fputc(ch, fj);
    fclose(f2);
    fclose(fj);
    remove("build/idx_part2.gz");
    CHECK_OK(sr_idx_load_images(p, &s));
    CHECK(s.n == 2 && s.h == 3 && s.w == 3 && memcmp(s.data, px, 18) == 0, "two-member gzip file");
    sr_u8images_free(&s);
    /* implausible dims (no huge allocation attempted) */
    n = idx_bytes(buf, 0x803, (uint32_t[]){5, 0, 28}, 3, px, 0);
    CHECK(write_bytes(p, buf, n, 0) == 0, "write");
    CHECK_ERR(sr_idx_load_images(p, &s), "implausible dims 5 x 0 x 28");
    n = idx_bytes(buf, 0x803, (uint32_t[]){0xffffffffu, 28, 28}, 3, px, 0);
    CHECK(write_bytes(p, buf, n, 1) == 0, "write");
    CHECK_ERR(sr_idx_load_images(p, &s), "implausible dims");
    /* a header promising 10^8 images in a short gzip file: fails on the
     * data, having allocated at most one chunk */
    n = idx_bytes(buf, 0x803, (uint32_t[]){100000000u, 28, 28}, 3, px, 18);
    CHECK(write_bytes(p, buf, n, 1) == 0, "write");
    CHECK_ERR(sr_idx_load_images(p, &s), "truncated");
    /* corrupt gzip stream: a valid file with bytes flipped in the middle */
    unsigned char payload[2000];
    for (int i = 0; i < 2000; i++)
        payload[i] = (unsigned char)(i * i);
    unsigned char whole[2100];
    n = idx_bytes(whole, 0x803, (uint32_t[]){20, 10, 10}, 3, payload, 2000);
    CHECK(write_bytes(p, whole, n, 1) == 0, "write");
    FILE *f = fopen(p, "r+b");
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, sz / 2, SEEK_SET);
    for (int i = 0; i < 8; i++)
        fputc(0xff, f);
    fclose(f);
    CHECK(sr_idx_load_images(p, &s) != 0, "corrupt gzip accepted");
    CHECK(strstr(sr_errmsg(), p), "message names the file: %s", sr_errmsg());
    CHECK(s.data == NULL && s.n == 0, "failed loads leave the store empty");
}

/* Random byte flips, truncations and extensions of valid small files: each
 * load either succeeds with sane dims or fails with a message naming the
 * file; under ASan any memory error stops the run. */
TEST(idx_cifar_fuzz_mutations)
{
    unsigned char payload[300], base[400], mut[520];
    for (int i = 0; i < 300; i++)
        payload[i] = (unsigned char)(i * 7);
    size_t nimg = idx_bytes(base, 0x803, (uint32_t[]){3, 10, 10}, 3, payload, 300);
    sr_rng r;
    sr_rng_seed(&r, 2024);
    const char *p = check_scratch("fuzz");
    int ok = 0, failed = 0;
    for (int it = 0; it < 1500; it++) {
        size_t n = nimg;
        memcpy(mut, base, n);
        int kind = (int)sr_rng_below(&r, 4);
        if (kind == 0) { /* flip bytes, mostly in the header */
            int flips = 1 + (int)sr_rng_below(&r, 4);
            for (int f = 0; f < flips; f++) {
                size_t at = sr_rng_below(&r, 2) ? sr_rng_below(&r, 16) : sr_rng_below(&r, n);
                mut[at] ^= (unsigned char)(1 + sr_rng_below(&r, 255));
            }
        } else if (kind == 1) {
            n = sr_rng_below(&r, n + 1);
        } else if (kind == 2) {
            size_t extra = sr_rng_below(&r, 100);
            for (size_t e = 0; e < extra; e++)
                mut[n + e] = (unsigned char)sr_rng_u64(&r);
            n += extra;
        } else {
            mut[4 + sr_rng_below(&r, 12)] = (unsigned char)sr_rng_u64(&r); /* a dim byte */
        }
        int gz = (int)sr_rng_below(&r, 2);
        CHECK(write_bytes(p, mut, n, gz) == 0, "write");
        sr_u8images s = SR_U8IMAGES_INIT;
        int64_t *l = NULL, k = 0;
        if (sr_idx_load_images(p, &s) == 0) {
            CHECK(s.n >= 0 && s.h >= 1 && s.w >= 1 && s.n * s.h * s.w <= 500, "accepted dims");
            ok++;
        } else {
            CHECK(strstr(sr_errmsg(), p) != NULL, "message lacks the path: %s", sr_errmsg());
            failed++;
        }
        sr_u8images_free(&s);
        if (sr_idx_load_labels(p, &l, &k) == 0)
            free(l);
        else
            CHECK(strstr(sr_errmsg(), p) != NULL, "labels message lacks the path");
    }
    CHECK(ok > 50 && failed > 500, "fuzz mix: %d accepted, %d rejected", ok, failed);
    /* CIFAR: random sizes and label bytes */
    for (int it = 0; it < 300; it++) {
        size_t n = (size_t)sr_rng_below(&r, 4) * SR_CIFAR_RECORD + (sr_rng_below(&r, 3) ? 0 : sr_rng_below(&r, 10));
        unsigned char *b = calloc(n + 1, 1);
        for (size_t i = 0; i < n; i++)
            b[i] = (unsigned char)(i % SR_CIFAR_RECORD == 0 ? sr_rng_below(&r, 12) : sr_rng_u64(&r));
        CHECK(write_bytes(p, b, n, 0) == 0, "write");
        free(b);
        sr_u8images s = SR_U8IMAGES_INIT;
        int64_t *l = NULL, k = 0;
        const char *one[1] = {p};
        if (sr_cifar_load(one, 1, &s, &l, &k) == 0) {
            CHECK(k == (int64_t)(n / SR_CIFAR_RECORD) && s.n == k, "cifar count");
            for (int64_t i = 0; i < k; i++)
                CHECK(l[i] >= 0 && l[i] <= 9, "cifar label %lld", (long long)l[i]);
            free(l);
        } else {
            CHECK(strstr(sr_errmsg(), p) != NULL, "cifar message lacks the path: %s", sr_errmsg());
        }
        sr_u8images_free(&s);
    }
}

TEST(cifar_reads_records_and_rejects_bad_files)
{
    /* two files of 2 and 1 records: label, then R, G, B planes */
    unsigned char rec[3 * SR_CIFAR_RECORD];
    for (int r = 0; r < 3; r++) {
        rec[r * SR_CIFAR_RECORD] = (unsigned char)(r * 4 + 1); /* 1, 5, 9 */
        for (int i = 0; i < 3072; i++)
            rec[r * SR_CIFAR_RECORD + 1 + i] = (unsigned char)((i / 1024) * 80 + r + (i % 7));
    }
    char a[256], b[256];
    snprintf(a, sizeof a, "%s", check_scratch("data_batch_1.bin"));
    snprintf(b, sizeof b, "%s", check_scratch("data_batch_2.bin"));
    CHECK(write_bytes(a, rec, 2 * SR_CIFAR_RECORD, 0) == 0 &&
              write_bytes(b, rec + 2 * SR_CIFAR_RECORD, SR_CIFAR_RECORD, 0) == 0,
          "write");
    const char *paths[2] = {a, b};
    sr_u8images s = SR_U8IMAGES_INIT;
    int64_t *l = NULL, n = 0;
    CHECK_OK(sr_cifar_load(paths, 2, &s, &l, &n));
    CHECK(n == 3 && s.n == 3 && s.c == 3 && s.h == 32 && s.w == 32, "shape");
    CHECK(l[0] == 1 && l[1] == 5 && l[2] == 9, "labels %lld %lld %lld", (long long)l[0],
          (long long)l[1], (long long)l[2]);
    for (int r = 0; r < 3; r++)
        CHECK(memcmp(s.data + r * 3072, rec + r * SR_CIFAR_RECORD + 1, 3072) == 0, "record %d", r);
    sr_tensor t = SR_TENSOR_INIT;
    CHECK_OK(sr_u8images_gather(&t, &s, (int64_t[]){2}, 1, SR_F32));
    /* channel 1 (green) pixel 0 of record 2 = 80 + 2 + 1024 % 7 */
    CHECK(sr_f32(&t)[1024] == 84 / 255.0f, "CHW layout: %g", sr_f32(&t)[1024] * 255);
    sr_tensor_free(&t);
    free(l);
    /* wrong sizes: one byte short, CIFAR-100's 3074-byte records, empty */
    CHECK(write_bytes(b, rec, SR_CIFAR_RECORD - 1, 0) == 0, "write");
    CHECK_ERR(sr_cifar_load(paths, 2, &s, &l, &n), "data_batch_2.bin: size 3072 bytes is not a positive multiple of 3073");
    unsigned char c100[2 * 3074] = {0};
    CHECK(write_bytes(b, c100, sizeof c100, 0) == 0, "write");
    CHECK_ERR(sr_cifar_load(paths, 2, &s, &l, &n), "CIFAR-100");
    CHECK(write_bytes(b, rec, 0, 0) == 0, "write");
    CHECK_ERR(sr_cifar_load(paths, 2, &s, &l, &n), "size 0 bytes");
    /* a label out of range names the record */
    rec[SR_CIFAR_RECORD] = 10;
    CHECK(write_bytes(b, rec, 2 * SR_CIFAR_RECORD, 0) == 0, "write");
    CHECK_ERR(sr_cifar_load(paths, 2, &s, &l, &n), "data_batch_2.bin: record 1 has label 10");
    const char *missing[1] = {"/nonexistent/test_batch.bin"};
    CHECK_ERR(sr_cifar_load(missing, 1, &s, &l, &n), "/nonexistent/test_batch.bin: No such file");
    CHECK(s.n == 3, "a failed load leaves the previous store untouched");
    sr_u8images_free(&s);
}
