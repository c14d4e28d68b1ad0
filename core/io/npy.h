/* npy.h - NumPy .npy files (format 1.0/2.0/3.0), float32 and float64, C order. */
#ifndef SR_NPY_H
#define SR_NPY_H

#include "tensor/tensor.h"

/* Load path into out (dtype as stored: <f4 or <f8).  Malformed files,
 * Fortran order, other dtypes, truncation: an error naming the file. */
int sr_npy_load(sr_tensor *out, const char *path);
/* Save atomically (temp file + rename). */
int sr_npy_save(const char *path, const sr_tensor *t);

#endif
