/* checked.h - overflow-checked counts: every element count, stride and byte
 * size the core builds from numbers it did not choose (shapes from Lua, file
 * headers, layer options) goes through these, so an overflow is an error
 * naming what was being sized instead of a wrapped value that later reads
 * or writes outside a buffer.
 *
 * The bound is on the product of the *nonzero* factors, not on the product:
 * a shape (0, 2^62) holds no elements, but its row size 2^62 would still
 * wrap once multiplied by a stride or a dtype size.  With every factor
 * product of a shape at most SR_MAX_ELEMS, every partial product of it
 * (row sizes, outer × inner splits of a reduction, flat indices) is in
 * range too, and so is any of those times an element size (2^43 bytes).
 */
#ifndef SR_CHECKED_H
#define SR_CHECKED_H

#include <stddef.h>
#include <stdint.h>

/* The most elements anything may hold: 2^40 (4 TB of float32). */
#define SR_MAX_ELEMS ((int64_t)1 << 40)

/* Product of n factors, each >= 0, into *out: 0, or -1 with the message
 * "WHAT: a x b x ... is too large (more than 2^40 elements)" (or "... negative size")
 * when a factor is negative or the product of the nonzero factors exceeds
 * SR_MAX_ELEMS.  what names the op and the thing sized ("conv2d: column
 * workspace"). */
int sr_count_n(int64_t *out, const char *what, int n, const int64_t *factors);

/* SR_COUNT(&n, "what", a, b, c): sr_count_n over the listed factors (each
 * converted to int64_t). */
#define SR_COUNT(out, what, ...)                                                                    \
    sr_count_n((out), (what), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),           \
               (int64_t[]){__VA_ARGS__})

/* count elements of size bytes each, as a size_t: 0, or -1 with "WHAT: ..."
 * when count is negative or above SR_MAX_ELEMS. */
int sr_count_bytes(size_t *out, const char *what, int64_t count, size_t size);

/* a + b for sizes and offsets (>= 0): 0, or -1 with "WHAT: a + b overflows". */
int sr_add_u64(uint64_t *out, const char *what, uint64_t a, uint64_t b);

/* a + b saturated to the int64 range, for messages that show an end. */
static inline int64_t sr_sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

#endif
