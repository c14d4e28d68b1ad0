/* blas.h - which BLAS kernels run, and making them the best the CPU has.
 *
 * srgeo links Debian's OpenBLAS, a DYNAMIC_ARCH build that picks its kernels
 * (a "core") once, when the library loads: from OPENBLAS_CORETYPE when that
 * is set, else from its own table of CPU models.  A table older than the CPU
 * falls back to old kernels without a word: 0.3.21 runs its Prescott (SSE3)
 * kernels on an Intel Emerald Rapids (family 6 model 207), sgemm 56 GFLOP/s
 * on 2 threads where its AVX-512 kernels give ~190.  So:
 *  - the shell (core/shell/shell.c) asks sr_blas_wanted_core() at start-up
 *    and, when it names a core, sets OPENBLAS_CORETYPE to it (and
 *    SRGEO_BLAS_CORETYPE, the mark that srgeo chose it) and re-executes
 *    itself once; the re-executed process has OPENBLAS_CORETYPE set, so it
 *    never does it again;
 *  - srgeo.so loaded into a stock lua5.4 cannot: sr_blas_warn_once() names
 *    the variable to set;
 *  - a user's own OPENBLAS_CORETYPE is kept; when it names older kernels
 *    than the CPU runs, sr_blas_warn_once() says so.
 * Kernels compare by vector level (cpu.h): SkylakeX and Cooperlake (which
 * OpenBLAS picks itself on a Zen 5 and adds bf16 GEMMs srgeo does not call)
 * are both AVX-512, so neither makes srgeo re-execute for the other.
 *
 * Test hook: SRGEO_TEST_BLAS_CORE=NAME stands for the core OpenBLAS chose
 * by itself (only while OPENBLAS_CORETYPE is unset), to simulate a CPU the
 * installed OpenBLAS does not know (tests/lua/shell_spec.lua). */
#ifndef SR_BLAS_H
#define SR_BLAS_H

#include <stddef.h>

#include "base/cpu.h"

typedef struct sr_blas_info {
    char name[32];        /* "OpenBLAS 0.3.21" */
    const char *core;     /* the kernels that run (openblas_get_corename) */
    const char *config;   /* openblas_get_config() */
    int dynamic;          /* a DYNAMIC_ARCH build: OPENBLAS_CORETYPE chooses */
    const char *coretype; /* OPENBLAS_CORETYPE at start-up, NULL when unset */
    int by_srgeo;         /* srgeo's shell set it (it equals SRGEO_BLAS_CORETYPE) */
    /* Filled by sr_blas_assess: */
    int isa;          /* SR_ISA_* of core; SR_ISA_UNKNOWN for a name srgeo does not know */
    const char *best; /* the core this CPU should run; NULL when srgeo knows none */
    int best_isa;
    char note[320]; /* "" when core is as new as the CPU allows, else why not and what to do */
    /* float32 products on srgeo's GEMM (kernels/gemm.c: sr_gemm_blas)
     * rather than this BLAS: its kernels are older than the build's
     * vectors.  SRGEO_GEMM=own or blas decides instead (tests, benches). */
    int own_gemm;
} sr_blas_info;

/* The BLAS of this process, read once (the first call; make it before
 * starting threads, and before changing OPENBLAS_CORETYPE). */
const sr_blas_info *sr_blas_get(void);
/* Fill b's isa, best, best_isa and note from its other fields and the CPU. */
void sr_blas_assess(sr_blas_info *b, const sr_cpu *cpu);
/* The vector level of an OpenBLAS core name (any case); SR_ISA_UNKNOWN for
 * names not in srgeo's table, which never count as old. */
int sr_blas_core_isa(const char *core);
/* The OpenBLAS core for this CPU's level, a name OPENBLAS_CORETYPE takes
 * (SkylakeX for AVX-512, Haswell or Zen for AMD's AVX2, ...); NULL for none. */
const char *sr_blas_best_core(const sr_cpu *cpu);
/* The value the shell sets OPENBLAS_CORETYPE to before re-executing, or
 * NULL: it is set already, the build cannot choose, or the kernels that run
 * are the CPU's best level. */
const char *sr_blas_wanted_core(void);

/* Print the note on stderr ("srgeo: warning: ..."), once per process, and
 * not in a process whose parent srgeo printed the same (SRGEO_BLAS_WARNED
 * holds the core it warned about): a script that runs srgeo many times
 * warns once.  Nothing when the note is empty. */
void sr_blas_warn_once(void);
/* The caller has shown the note itself (the shell's --version and REPL
 * banner print sr_blas_describe): sr_blas_warn_once stays quiet. */
void sr_blas_noted(void);

/* The lines that say what runs the arithmetic, for --version,
 * srgeo.config().summary and every bench header:
 *   cpu: MODEL (VENDOR family F model M): FEATURES
 *   blas: NAME, CORE kernels (ISA), OPENBLAS_CORETYPE ...; srgeo GEMM ISA; N threads, OpenMP
 *   warning: NOTE                      (only when the note is not empty)
 *   load average: 1 5 15 min           (only with `load`, from /proc/loadavg)
 * Each line ends in '\n'; truncated to n. */
void sr_blas_describe(char *buf, size_t n, int load);

#endif
