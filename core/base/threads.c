/* threads.c - one thread count shared by OpenBLAS and OpenMP. */
#include "base/threads.h"

#include "base/error.h"

#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void openblas_set_num_threads(int);

static int nthreads;

int sr_threads_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int sr_threads_env(void)
{
    const char *e = getenv("SRGEO_THREADS");
    return e && atoi(e) > 0 ? atoi(e) : 0;
}

/* SRGEO_THREADS, else the CPUs this process may run on; never more than
 * those (sr_threads_cpus says why). */
static int default_threads(void)
{
    int cpus = sr_threads_cpus(), e = sr_threads_env();
    return e > 0 && e < cpus ? e : cpus;
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

int sr_threads_parts(int nparts, int (*fn)(void *ctx, int part), void *ctx)
{
    if (nparts <= 1)
        return fn(ctx, 0) ? -1 : 0;
    int fails = 0;
    sr_threads_blas(1);
#ifdef _OPENMP
#pragma omp parallel num_threads(nparts) reduction(+ : fails)
    for (int t = omp_get_thread_num(); t < nparts; t += omp_get_num_threads())
        fails += fn(ctx, t) != 0;
#else
    for (int t = 0; t < nparts; t++)
        fails += fn(ctx, t) != 0;
#endif
    sr_threads_blas(sr_threads_get());
    return fails ? sr_fail("interrupted") : 0;
}
