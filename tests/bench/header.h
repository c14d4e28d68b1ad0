/* header.h - the first lines of every C benchmark: the CPU, its vector
 * features, the BLAS kernels, srgeo's GEMM, threads and the load average
 * (base/blas.h: the same lines srgeo --version and the Lua benches print). */
#ifndef SR_BENCH_HEADER_H
#define SR_BENCH_HEADER_H

#include <stdio.h>

#include "base/blas.h"

static inline void bench_header(void)
{
    char lines[1024];
    sr_blas_describe(lines, sizeof lines, 1);
    fputs(lines, stdout);
}

#endif
