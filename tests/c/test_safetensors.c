/* test_safetensors.c - round trips, dtype conversion, and every header
 * violation the reader must reject with a message naming the tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "io/safetensors.h"
#include "check.h"
#include "test.h"

/* An in-memory file from a header string and raw data bytes. */
static unsigned char *make_file(const char *header, const void *data, size_t dlen, size_t *size)
{
    size_t hl = strlen(header);
    *size = 8 + hl + dlen;
    unsigned char *b = malloc(*size);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    if (dlen)
        memcpy(b + 8 + hl, data, dlen);
    return b;
}

static int open_hdr(sr_st_file *f, const char *header, size_t dlen, unsigned char **buf)
{
    size_t size;
    unsigned char *zeros = calloc(1, dlen + 1);
    *buf = make_file(header, zeros, dlen, &size);
    free(zeros);
    return sr_st_open_memory(f, *buf, size, "t.safetensors");
}

#define EXPECT_REJECT(header, dlen, needle)                                                        \
    do {                                                                                           \
        sr_st_file f;                                                                              \
        unsigned char *buf;                                                                        \
        int r = open_hdr(&f, header, dlen, &buf);                                                  \
        free(buf);                                                                                 \
        if (r == 0) sr_st_close(&f);                                                               \
        CHECK(r != 0, "accepted: %s", header);                                                     \
        CHECK(strstr(sr_errmsg(), needle), "'%s': message '%s' lacks '%s'", header, sr_errmsg(), needle); \
    } while (0)

TEST(safetensors_roundtrip_with_metadata)
{
    sr_tensor a = SR_TENSOR_INIT, b = SR_TENSOR_INIT, c = SR_TENSOR_INIT;
    sr_rng r;
    sr_rng_seed(&r, 1);
    CHECK_OK(sr_tensor_alloc(&a, SR_F32, 2, (int64_t[]){3, 5}));
    CHECK_OK(sr_tensor_alloc(&b, SR_F64, 1, (int64_t[]){7}));
    sr_tensor_fill_normal(&a, &r, 0, 1);
    sr_tensor_fill_normal(&b, &r, 0, 1);
    const char *names[] = {"layer.weight", "bias"};
    const sr_tensor *ts[] = {&a, &b};
    const char *meta[] = {"architecture", "resnet18", "step", "100"};
    CHECK_OK(sr_st_write("build/t.safetensors", 2, names, ts, 2, meta));
    sr_st_file f;
    CHECK_OK(sr_st_open(&f, "build/t.safetensors"));
    CHECK(f.n == 2, "n = %d", f.n);
    CHECK(strcmp(sr_st_meta(&f, "architecture"), "resnet18") == 0, "metadata");
    CHECK(((8 + (f.data - f.map - 8)) % 8) == 0, "data area aligned");
    const sr_st_entry *e = sr_st_find(&f, "layer.weight");
    CHECK(e && e->dtype == SR_ST_F32 && e->ndim == 2 && e->shape[1] == 5, "entry");
    CHECK_OK(sr_st_read(&f, e, &c, SR_F32));
    CHECK(memcmp(sr_data(&c), sr_data(&a), 15 * 4) == 0, "f32 data");
    CHECK_OK(sr_st_read(&f, sr_st_find(&f, "bias"), &c, SR_F64));
    CHECK(memcmp(sr_data(&c), sr_data(&b), 7 * 8) == 0, "f64 data");
    CHECK_OK(sr_st_read(&f, e, &c, SR_F64)); /* converted on read */
    CHECK(check_rel_diff(&c, &a) == 0, "f32 -> f64 exact");
    sr_st_close(&f);
    sr_tensor_free(&a);
    sr_tensor_free(&b);
    sr_tensor_free(&c);
    remove("build/t.safetensors");
}

TEST(safetensors_reads_f16_bf16_and_integers)
{
    /* 1.0, -2.0, 0.5, 65504 (max half), a subnormal 2^-24 */
    uint16_t h[5] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001};
    /* bf16: 1.0, -3.0 */
    uint16_t bf[2] = {0x3f80, 0xc040};
    int64_t iv[2] = {-5, 1234567};
    unsigned char data[10 + 4 + 16];
    memcpy(data, h, 10);
    memcpy(data + 10, bf, 4);
    memcpy(data + 14, iv, 16);
    const char *hdr = "{\"a\":{\"dtype\":\"F16\",\"shape\":[5],\"data_offsets\":[0,10]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[10,14]},"
                      "\"n\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[14,30]}}";
    size_t size;
    unsigned char *buf = make_file(hdr, data, sizeof data, &size);
    sr_st_file f;
    CHECK_OK(sr_st_open_memory(&f, buf, size, "mem"));
    sr_tensor t = SR_TENSOR_INIT;
    CHECK_OK(sr_st_read(&f, sr_st_find(&f, "a"), &t, SR_F64));
    double want[5] = {1, -2, 0.5, 65504, 5.960464477539063e-08};
    for (int i = 0; i < 5; i++)
        CHECK(sr_f64(&t)[i] == want[i], "f16[%d] = %.17g", i, sr_f64(&t)[i]);
    CHECK_OK(sr_st_read(&f, sr_st_find(&f, "b"), &t, SR_F32));
    CHECK(sr_f32(&t)[0] == 1.0f && sr_f32(&t)[1] == -3.0f, "bf16");
    CHECK_OK(sr_st_read(&f, sr_st_find(&f, "n"), &t, SR_F64));
    CHECK(sr_f64(&t)[0] == -5 && sr_f64(&t)[1] == 1234567, "i64");
    sr_tensor_free(&t);
    sr_st_close(&f);
    free(buf);
}

TEST(safetensors_rejects_malformed_headers)
{
    EXPECT_REJECT("{not json", 0, "not valid JSON");
    EXPECT_REJECT("[1,2]", 0, "not a JSON object");
    EXPECT_REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "outside the data area");
    EXPECT_REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "'w' has 8 bytes but shape");
    EXPECT_REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,8]}}", 8, "'w' has a bad dimension");
    EXPECT_REJECT("{\"w\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unsupported dtype Q4");
    EXPECT_REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "'w' needs dtype, shape and data_offsets");
    EXPECT_REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "bad data_offsets");
    EXPECT_REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap");
    EXPECT_REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                  "\"data_offsets\":[0,8]}}", 8, "too large");
    /* no elements, but a dimension product beyond any tensor's: rejected */
    EXPECT_REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[0,4294967296,4294967296],"
                  "\"data_offsets\":[0,0]}}", 0, "too large");
    EXPECT_REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"v\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                  "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, "'w' appears twice");
    /* a second __metadata__ is an error (and LeakSanitizer watches the first's arrays) */
    EXPECT_REJECT("{\"__metadata__\":{},\"__metadata__\":{\"a\":\"b\"}}", 0, "__metadata__ appears twice");
    EXPECT_REJECT("{\"__metadata__\":{\"a\":\"b\"},\"__metadata__\":{}}", 0, "__metadata__ appears twice");
    EXPECT_REJECT("{\"__metadata__\":{\"step\":3}}", 0, "not a string");
    EXPECT_REJECT("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "dimensions");
}

TEST(safetensors_rejects_truncated_and_huge_headers)
{
    unsigned char small[4] = {1, 2, 3, 4};
    sr_st_file f;
    CHECK_ERR(sr_st_open_memory(&f, small, 4, "s"), "too short");
    unsigned char big[16] = {0};
    uint64_t hl = (uint64_t)SR_ST_MAX_HEADER + 1;
    for (int i = 0; i < 8; i++)
        big[i] = (unsigned char)(hl >> (8 * i));
    CHECK_ERR(sr_st_open_memory(&f, big, 16, "b"), "exceeds the 100 MB limit");
    hl = 1000;
    for (int i = 0; i < 8; i++)
        big[i] = (unsigned char)(hl >> (8 * i));
    CHECK_ERR(sr_st_open_memory(&f, big, 16, "b"), "truncated");
    CHECK_ERR(sr_st_open(&f, "build/no-such-file.safetensors"), "No such file");
}

TEST(safetensors_writer_refuses_reserved_and_repeated_names)
{
    sr_tensor a = SR_TENSOR_INIT;
    CHECK_OK(sr_tensor_zeros(&a, SR_F32, 1, (int64_t[]){2}));
    const sr_tensor *ts[] = {&a, &a, &a};
    remove("build/t_names.safetensors");
    CHECK_ERR(sr_st_write("build/t_names.safetensors", 1, (const char *[]){"__metadata__"}, ts, 0, NULL),
              "'__metadata__' is the format's reserved key");
    CHECK_ERR(sr_st_write("build/t_names.safetensors", 3, (const char *[]){"b", "a", "b"}, ts, 0, NULL),
              "tensor name 'b' given twice");
    FILE *f = fopen("build/t_names.safetensors", "rb");
    CHECK(!f, "a refused write left a file behind");
    /* names sorted by the check, entries still written in the given order */
    CHECK_OK(sr_st_write("build/t_names.safetensors", 2, (const char *[]){"z", "a"}, ts, 0, NULL));
    sr_st_file st;
    CHECK_OK(sr_st_open(&st, "build/t_names.safetensors"));
    CHECK(st.n == 2 && strcmp(st.entries[0].name, "z") == 0 && sr_st_find(&st, "a") && sr_st_find(&st, "z") &&
              !sr_st_find(&st, "m"), "entries");
    sr_st_close(&st);
    remove("build/t_names.safetensors");
    sr_tensor_free(&a);
}

TEST(safetensors_find_searches_every_name)
{
    /* 300 entries in a scrambled name order: each found, absent names not */
    enum { N = 300 };
    char hdr[N * 80 + 8], *p = hdr;
    p += sprintf(p, "{");
    for (int i = 0; i < N; i++) {
        int k = (i * 37) % N;
        p += sprintf(p, "%s\"t%d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}", i ? "," : "", k, i,
                     i + 1);
    }
    sprintf(p, "}");
    sr_st_file f;
    unsigned char *buf;
    CHECK_OK(open_hdr(&f, hdr, N, &buf));
    char name[16];
    for (int k = 0; k < N; k++) {
        snprintf(name, sizeof name, "t%d", k);
        const sr_st_entry *e = sr_st_find(&f, name);
        CHECK(e && strcmp(e->name, name) == 0, "%s not found", name);
    }
    CHECK(!sr_st_find(&f, "t300") && !sr_st_find(&f, "") && !sr_st_find(&f, "t"), "absent names");
    sr_st_close(&f);
    free(buf);
}
