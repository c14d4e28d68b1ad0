/* test_sha256.c - SHA-256 against FIPS 180-4's examples and HMAC-SHA256
 * against RFC 4231's test cases (the Jupyter kernel's message signing); a
 * file's digest and the digest-prefix rule (the weights cache). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "base/sha256.h"
#include "io/download.h"
#include "test.h"

static void sha_hex(const void *data, size_t n, char *hex)
{
    sr_sha256 s;
    uint8_t d[SR_SHA256_LEN];
    sr_sha256_init(&s);
    sr_sha256_update(&s, data, n);
    sr_sha256_final(&s, d);
    sr_hex(d, sizeof d, hex);
}

TEST(sha256_fips_vectors)
{
    char hex[65];
    sha_hex("", 0, hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0, "'' -> %s", hex);
    sha_hex("abc", 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "abc -> %s", hex);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 448 bits: padding spills a block */
    sha_hex(two, strlen(two), hex);
    CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0, "448 bits -> %s", hex);
    /* a million 'a' fed in uneven pieces: the block buffer's edges */
    sr_sha256 s;
    uint8_t d[SR_SHA256_LEN];
    char chunk[1024]; /* steps stay below 1004 */
    memset(chunk, 'a', sizeof chunk);
    sr_sha256_init(&s);
    size_t left = 1000000, step = 1;
    while (left > 0) {
        size_t n = step < left ? step : left;
        sr_sha256_update(&s, chunk, n);
        left -= n;
        step = step % 997 + 7;
    }
    sr_sha256_final(&s, d);
    sr_hex(d, sizeof d, hex);
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0, "1e6 a -> %s", hex);
}

static void hmac_hex(const void *key, size_t kn, const void *data, size_t n, char *hex)
{
    uint8_t d[SR_SHA256_LEN];
    const void *parts[1] = {data};
    size_t lens[1] = {n};
    sr_hmac_sha256(key, kn, parts, lens, 1, d);
    sr_hex(d, sizeof d, hex);
}

TEST(hmac_sha256_rfc4231)
{
    char hex[65];
    uint8_t k[131], data[50];
    memset(k, 0x0b, 20);
    hmac_hex(k, 20, "Hi There", 8, hex); /* 4.2 */
    CHECK(strcmp(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7") == 0, "4.2 -> %s", hex);
    const char *q = "what do ya want for nothing?"; /* 4.3: a key shorter than the output */
    hmac_hex("Jefe", 4, q, strlen(q), hex);
    CHECK(strcmp(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843") == 0, "4.3 -> %s", hex);
    memset(k, 0xaa, 20); /* 4.4 */
    memset(data, 0xdd, 50);
    hmac_hex(k, 20, data, 50, hex);
    CHECK(strcmp(hex, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe") == 0, "4.4 -> %s", hex);
    for (int i = 0; i < 25; i++) /* 4.5 */
        k[i] = (uint8_t)(i + 1);
    memset(data, 0xcd, 50);
    hmac_hex(k, 25, data, 50, hex);
    CHECK(strcmp(hex, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b") == 0, "4.5 -> %s", hex);
    memset(k, 0xaa, 131); /* 4.7 and 4.8: a key longer than a block is hashed first */
    const char *t7 = "Test Using Larger Than Block-Size Key - Hash Key First";
    hmac_hex(k, 131, t7, strlen(t7), hex);
    CHECK(strcmp(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54") == 0, "4.7 -> %s", hex);
    const char *t8 = "This is a test using a larger than block-size key and a larger than block-size data. "
                     "The key needs to be hashed before being used by the HMAC algorithm.";
    hmac_hex(k, 131, t8, strlen(t8), hex);
    CHECK(strcmp(hex, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2") == 0, "4.8 -> %s", hex);
    /* parts: the MAC of a message split into frames is that of the whole */
    const void *parts[3] = {t8, t8 + 10, t8 + 70};
    size_t lens[3] = {10, 60, strlen(t8) - 70};
    uint8_t d[SR_SHA256_LEN];
    sr_hmac_sha256(k, 131, parts, lens, 3, d);
    sr_hex(d, sizeof d, hex);
    CHECK(strcmp(hex, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2") == 0, "parts -> %s", hex);
    CHECK(sr_equal_const_time("abcd", "abcd", 4) && !sr_equal_const_time("abcd", "abce", 4), "const-time compare");
}

/* A file's digest (the weights cache's check, base/fsutil.c): a million 'a'
 * read through the 64 KiB buffer gives FIPS's digest; the prefix rule of
 * torchvision-style names (io/download.c) wants 8 to 64 hex digits. */
TEST(sha256_file_and_prefix)
{
    char path[] = "/tmp/srgeo-sha256-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0)
        return;
    char chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    int ok = 1;
    for (int i = 0; i < 1000; i++)
        ok &= write(fd, chunk, sizeof chunk) == (ssize_t)sizeof chunk;
    close(fd);
    CHECK(ok, "write");
    char hex[65] = "";
    CHECK(sr_fs_sha256_file(path, "test", hex, NULL) == 0, "%s", sr_errmsg());
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0, "file -> %s", hex);
    unlink(path);
    CHECK(sr_fs_sha256_file(path, "test", hex, NULL) != 0, "a missing file fails");
    CHECK(sr_sha256_matches(hex, "cdc76e5c") && sr_sha256_matches(hex, "CDC76E5C99"), "prefix, any case");
    CHECK(!sr_sha256_matches(hex, "cdc76e5"), "fewer than 8 digits never match");
    CHECK(!sr_sha256_matches(hex, "cdc76e5d"), "a wrong prefix");
    CHECK(sr_sha256_matches(hex, hex), "the whole digest");
}
