/* cifar.h - CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin):
 * records of 1 label byte (0..9) + 3072 pixel bytes (3 x 32 x 32, CHW, the
 * red plane first), 10000 records a file.  No Lua here. */
#ifndef SR_CIFAR_H
#define SR_CIFAR_H

#include "io/idx.h"

#define SR_CIFAR_RECORD 3073

/* Read npaths batch files, concatenated in order, into images (n, 3, 32, 32)
 * and labels[n] (malloc'd).  A file whose size is not a positive multiple
 * of 3073 bytes (a CIFAR-100 file has 3074-byte records), a label above 9,
 * a short read: an error naming the file (and the record). */
int sr_cifar_load(const char *const *paths, int npaths, sr_u8images *images, int64_t **labels,
                  int64_t *n);

#endif
