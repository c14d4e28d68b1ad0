/* pbwire.c - protobuf wire data walked with an explicit stack (pbwire.h).
 *
 * The cost model follows protobuf-c 1.4's unpack: every message is one
 * allocation of the descriptor's sizeof_message; a repeated field is one
 * array of its elements (a pointer per message or string, a
 * ProtobufCBinaryData per bytes value, the number itself otherwise); a
 * string is copied with its NUL, bytes as they are; an unknown field is
 * kept with its data.  Each field read also costs a scanned-member record
 * while its message is parsed (freed after it: the peak holds the records
 * of the messages on the path being parsed).  Every allocation is counted
 * with 16 bytes of malloc's overhead, so the total is an upper bound. */
#include "io/pbwire.h"

#include <stdlib.h>

#include "base/error.h"

enum { WT_VARINT = 0, WT_64 = 1, WT_LEN = 2, WT_32 = 5 };
#define OVERHEAD 16
#define SCANNED 32 /* protobuf-c's ScannedMember, per field read */

/* A varint at *p below end: 0, or -1 (truncated, or more than 10 bytes). */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int i = 0; i < 10 && *p < end; i++) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* Bytes one element of a repeated field takes in protobuf-c's array. */
static size_t elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
        return 8;
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:
        return 4; /* int32, enums, bool (protobuf_c_boolean), float, fixed32 */
    }
}

/* How many numbers a packed field of len bytes holds. */
static size_t packed_count(ProtobufCType t, const uint8_t *p, size_t len)
{
    switch (t) {
    case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FLOAT:
        return len / 4;
    case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        return len / 8;
    default: {
        size_t c = 0;
        for (size_t i = 0; i < len; i++)
            c += !(p[i] & 0x80);
        return c;
    }
    }
}

typedef struct {
    const ProtobufCMessageDescriptor *d; /* the message being read */
    const uint8_t *end;
    size_t scratch; /* its fields' scanned-member records */
} frame;

int sr_pb_check(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t n, int max_depth, size_t max_bytes,
                sr_pb_cost *cost)
{
    sr_pb_cost c = {1, 1, d->sizeof_message + OVERHEAD};
    frame *st = malloc((size_t)(max_depth > 0 ? max_depth : 1) * sizeof *st);
    if (!st)
        return sr_fail("out of memory");
    int sp = 1, rc = 0;
    size_t kept = c.bytes, scratch = 0; /* what stays allocated; the records alive now */
    st[0] = (frame){d, buf + n, 0};
    const uint8_t *p = buf;
    while (sp > 0 && !rc) {
        frame *f = &st[sp - 1];
        if (p == f->end) {
            scratch -= f->scratch;
            sp--;
            continue;
        }
        size_t at = (size_t)(p - buf);
        uint64_t key, v = 0;
        if (varint(&p, f->end, &key) || key >> 3 == 0 || key >> 3 > 0x1fffffff) {
            rc = sr_fail("the protobuf does not parse (a bad field key at byte %zu)", at);
            break;
        }
        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(f->d, (unsigned)(key >> 3));
        int repeated = fd && fd->label == PROTOBUF_C_LABEL_REPEATED, wt = (int)(key & 7), cut = 0;
        size_t add = 0;
        f->scratch += SCANNED;
        scratch += SCANNED;
        if (wt == WT_VARINT) {
            cut = varint(&p, f->end, &v);
        } else if (wt == WT_64 || wt == WT_32) {
            size_t w = wt == WT_64 ? 8 : 4;
            cut = (size_t)(f->end - p) < w;
            p += cut ? 0 : w;
        } else if (wt == WT_LEN) {
            cut = varint(&p, f->end, &v) || v > (uint64_t)(f->end - p);
        } else {
            rc = sr_fail("the protobuf does not parse (wire type %d at byte %zu)", wt, at);
            break;
        }
        if (cut) {
            rc = sr_fail("the protobuf does not parse (field %llu is cut short at byte %zu)",
                         (unsigned long long)(key >> 3), at);
            break;
        }
        if (wt == WT_LEN && fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
            if (sp >= max_depth) {
                rc = sr_fail("messages nested more than %d deep (%s.%s at byte %zu)", max_depth, f->d->short_name,
                             fd->name, at);
                break;
            }
            const ProtobufCMessageDescriptor *sub = fd->descriptor;
            c.messages++;
            add += sub->sizeof_message + OVERHEAD + (repeated ? 8 : 0);
            st[sp++] = (frame){sub, p + v, 0};
            c.depth = sp > c.depth ? sp : c.depth;
            /* p stays at the start of the sub-message */
        } else if (wt == WT_LEN) {
            if (fd && (fd->type == PROTOBUF_C_TYPE_STRING || fd->type == PROTOBUF_C_TYPE_BYTES))
                add += (size_t)v + 1 + OVERHEAD + (repeated ? elem_size(fd->type) : 0);
            else if (fd && repeated) /* packed numbers */
                add += packed_count(fd->type, p, (size_t)v) * elem_size(fd->type);
            else /* unknown, kept as it is */
                add += (size_t)v + 2 * OVERHEAD;
            p += v;
        } else {
            add += !fd ? 2 * OVERHEAD : repeated ? elem_size(fd->type) : 0;
        }
        kept += add;
        c.bytes = kept + scratch > c.bytes ? kept + scratch : c.bytes;
        if (c.bytes > max_bytes)
            rc = sr_fail("unpacking would take more than %zu bytes (%zu messages by byte %zu)", max_bytes, c.messages,
                         at);
    }
    free(st);
    if (cost)
        *cost = c;
    return rc;
}
