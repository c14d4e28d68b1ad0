/* sha256.h - SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104).
 *
 *   uint8_t mac[SR_SHA256_LEN];
 *   sr_hmac_sha256(key, keylen, parts, lens, nparts, mac);
 *   sr_hex(mac, SR_SHA256_LEN, hex);          // hex: 2*n + 1 bytes
 *
 * The Jupyter kernel signs and checks every message with HMAC-SHA256 over
 * the header, parent header, metadata and content frames (wire/); the MAC
 * takes those as separate parts so no frame is copied.  Checked against
 * FIPS 180-4's and RFC 4231's vectors (tests/c/test_sha256.c). */
#ifndef SR_SHA256_H
#define SR_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SR_SHA256_LEN 32

typedef struct {
    uint32_t h[8];
    uint64_t bytes; /* message length so far */
    uint8_t block[64];
    size_t fill; /* bytes in block */
} sr_sha256;

void sr_sha256_init(sr_sha256 *s);
void sr_sha256_update(sr_sha256 *s, const void *data, size_t n);
void sr_sha256_final(sr_sha256 *s, uint8_t out[SR_SHA256_LEN]);

/* HMAC-SHA256 of the concatenation of parts[0..nparts). */
void sr_hmac_sha256(const void *key, size_t keylen, const void *const *parts, const size_t *lens, int nparts,
                    uint8_t out[SR_SHA256_LEN]);

/* Lower-case hex of n bytes into hex (2n + 1 bytes, NUL-terminated). */
void sr_hex(const uint8_t *bytes, size_t n, char *hex);

/* Equal strings of n bytes, in time independent of where they differ
 * (a signature check must not tell an attacker how many bytes matched). */
int sr_equal_const_time(const void *a, const void *b, size_t n);

#endif
