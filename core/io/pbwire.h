/* pbwire.h - a protobuf message checked on the wire before protobuf-c
 * unpacks it.  protobuf-c recurses once per nested message (a file nesting
 * thousands of messages overflows the C stack) and allocates a struct per
 * message and a slot per repeated value before the reader can look at any
 * count (a few MB of empty sub-messages become GB).  sr_pb_check walks the
 * bytes without recursion, guided by the descriptors protoc-c generates
 * (which fields are messages, strings, packed numbers), and refuses a
 * message nested deeper than max_depth, or one whose unpacked form would
 * take more than max_bytes, before anything is allocated.  Malformed wire
 * data (a truncated varint or length, a group, wire types 6 and 7, field 0)
 * is refused too. */
#ifndef SR_PBWIRE_H
#define SR_PBWIRE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

typedef struct {
    int depth;       /* deepest nesting seen (the root message is 1) */
    size_t messages; /* messages, the root included */
    size_t bytes;    /* the most protobuf-c would hold at once: structs, arrays, strings, unknown fields,
                      * and its scratch records of the fields of the messages being parsed (an upper
                      * bound) */
} sr_pb_cost;

/* 0, or -1 with a message saying what is wrong and at which byte; cost (may
 * be NULL) gets the totals either way (up to where the walk stopped). */
int sr_pb_check(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t n, int max_depth, size_t max_bytes,
                sr_pb_cost *cost);

#endif
