/* idx.h - IDX files (MNIST / Fashion-MNIST), plain or gzip-compressed, and
 * the uint8 image store the dataset readers share.  No Lua here.
 *
 * Images stay uint8 in memory (Fashion-MNIST train: 47 MB instead of 188 MB
 * of float32, which also keeps the first-touch cost of fresh pages down on
 * these VMs); batches are converted to float [0,1] on demand by
 * sr_u8images_gather, which costs far less than the forward pass they feed.
 */
#ifndef SR_IDX_H
#define SR_IDX_H

#include <stdint.h>

#include "tensor/tensor.h"

/* n items of (c, h, w) bytes each, item-major, CHW inside an item. */
typedef struct sr_u8images {
    int64_t n, c, h, w;
    uint8_t *data;
} sr_u8images;

#define SR_U8IMAGES_INIT {0, 0, 0, 0, NULL}

void sr_u8images_free(sr_u8images *s);
/* Bytes per item (c*h*w). */
static inline int64_t sr_u8images_itemsize(const sr_u8images *s) { return s->c * s->h * s->w; }

/* out = items idx[0..b) as a (b, c, h, w) tensor of value/255 in dtype.
 * Indices are 0-based; one out of range is an error naming it. */
int sr_u8images_gather(sr_tensor *out, const sr_u8images *s, const int64_t *idx, int64_t b,
                       sr_dtype dtype);

/* IDX image file (magic 0x00000803: unsigned bytes, 3 dims n, rows, cols)
 * -> n items of (1, rows, cols).  gzip is detected from the content (zlib's
 * gzread reads plain files unchanged), so ".gz" in the name is not needed.
 * Bad magic, implausible dims, truncation, trailing bytes, a corrupt gzip
 * stream: an error naming the file. */
int sr_idx_load_images(const char *path, sr_u8images *out);

/* IDX label file (magic 0x00000801: unsigned bytes, 1 dim n) -> labels[n]
 * (malloc'd int64, 0..255), *n. */
int sr_idx_load_labels(const char *path, int64_t **labels, int64_t *n);

#endif
