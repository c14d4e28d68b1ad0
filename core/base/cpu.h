/* cpu.h - what the CPU this process runs on can do (cpuid), so srgeo can
 * check that its kernels use it and say which ones run: the BLAS check
 * (base/blas.h), `srgeo --version`, srgeo.config() and the bench headers.
 *
 * A vector feature counts only when the OS also saves its registers on a
 * context switch (XCR0 through xgetbv), as a kernel using it needs: a VM
 * may report AVX-512 in cpuid with the state disabled.  Off x86 every
 * field is empty and the features are 0. */
#ifndef SR_CPU_H
#define SR_CPU_H

#include <stddef.h>

enum {
    SR_CPU_SSE3 = 1u << 0,
    SR_CPU_AVX = 1u << 1,
    SR_CPU_FMA = 1u << 2,
    SR_CPU_AVX2 = 1u << 3,
    SR_CPU_AVX512F = 1u << 4,
    SR_CPU_AVX512BW = 1u << 5,
    SR_CPU_AVX512VL = 1u << 6,
    SR_CPU_AVX512DQ = 1u << 7,
    SR_CPU_AVX512_BF16 = 1u << 8,
    SR_CPU_AMX_TILE = 1u << 9,
    SR_CPU_AMX_BF16 = 1u << 10,
};

/* Vector levels of float GEMM kernels, oldest first: what a CPU can run
 * (sr_cpu_isa) and what a BLAS core runs (sr_blas_core_isa) compare on it. */
enum { SR_ISA_UNKNOWN, SR_ISA_SSE3, SR_ISA_AVX, SR_ISA_AVX2, SR_ISA_AVX512 };

typedef struct sr_cpu {
    char vendor[13]; /* "GenuineIntel", "AuthenticAMD", ... */
    char model[49];  /* the brand string, spaces trimmed */
    int family, model_id;
    unsigned features; /* SR_CPU_* */
} sr_cpu;

/* The CPU, read once (the first call; make it before starting threads). */
const sr_cpu *sr_cpu_get(void);
/* The widest level the features allow: AVX-512 needs F, BW, VL and DQ (what
 * OpenBLAS's SkylakeX kernels use), AVX2 needs FMA too. */
int sr_cpu_isa(unsigned features);
/* "SSE3", "AVX", "AVX2", "AVX-512"; "unknown" for SR_ISA_UNKNOWN. */
const char *sr_isa_name(int isa);
/* The level this build's own kernels were compiled for (-march at build
 * time: srgeo's GEMM uses 64-byte vectors under AVX-512, kernels/gemm.h). */
int sr_cpu_build_isa(void);
/* Feature names as /proc/cpuinfo spells them, space-separated ("avx2 fma
 * avx512f ..."; "none" for 0), truncated to n. */
void sr_cpu_feature_names(unsigned features, char *buf, size_t n);
/* The name of feature bit i (0 <= i < n), NULL past the last: for lists. */
const char *sr_cpu_feature_name(int i);

#endif
