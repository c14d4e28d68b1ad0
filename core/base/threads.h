/* threads.h - the one thread setting for OpenBLAS and OpenMP.
 *
 * OpenBLAS (pthread build) keeps its own busy-waiting pool, so it must never
 * be called from inside an OpenMP parallel region; kernels parallelise their
 * own loops with OpenMP *between* GEMM calls, and both use this count. */
#ifndef SR_THREADS_H
#define SR_THREADS_H

/* Set the thread count (>= 1); 0 means "the default" (SRGEO_THREADS or the
 * CPUs this process may run on, at most those).  n itself is taken as
 * given (tests compare 1 and 2 threads on any machine): callers that take
 * a user's count bound it by sr_threads_cpus(). */
void sr_threads_set(int n);
/* The CPUs this process may run on (its affinity mask, else the online
 * CPUs).  More threads than these only wait for each other: OpenBLAS's
 * pool busy-waits (sched_yield) for its slowest worker at every GEMM and
 * OpenMP's for every loop, so 64 threads on 2 cores ran a small_resnet
 * forward 11x slower than 2 (63 OpenMP + 55 OpenBLAS threads), and under
 * load spun for minutes. */
int sr_threads_cpus(void);
/* SRGEO_THREADS as a positive count, or 0 when unset or not one. */
int sr_threads_env(void);
int sr_threads_get(void);
/* OpenBLAS's own count alone: a kernel that runs one single-threaded GEMM
 * per OpenMP thread sets 1 around its parallel region, then restores
 * sr_threads_get(). */
void sr_threads_blas(int n);
/* Run fn(ctx, part) for every part in [0, nparts): on the calling thread
 * when nparts == 1, else one part per OpenMP thread with OpenBLAS held to
 * one thread meanwhile (each part runs its own single-threaded GEMMs).
 * Returns 0, or -1 when a part failed; a worker's failure (only ever an
 * interrupt) is reported as "interrupted" on the calling thread, whose
 * error buffer the caller reads. */
int sr_threads_parts(int nparts, int (*fn)(void *ctx, int part), void *ctx);
/* Apply SRGEO_THREADS from the environment once at start-up. */
void sr_threads_init(void);

#endif
