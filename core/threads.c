/* threads.c - one thread count shared by OpenBLAS and OpenMP. */
#include "threads.h"

#include <stdlib.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void openblas_set_num_threads(int);

static int nthreads;

static int default_threads(void)
{
    const char *e = getenv("SRGEO_THREADS");
    if (e && atoi(e) > 0)
        return atoi(e);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void sr_threads_set(int n)
{
    nthreads = n > 0 ? n : default_threads();
    openblas_set_num_threads(nthreads);
#ifdef _OPENMP
    omp_set_num_threads(nthreads);
#endif
}

void sr_threads_blas(int n) { openblas_set_num_threads(n > 0 ? n : 1); }

int sr_threads_get(void)
{
    if (!nthreads)
        sr_threads_set(0);
    return nthreads;
}

void sr_threads_init(void)
{
    if (!nthreads)
        sr_threads_set(0);
}
