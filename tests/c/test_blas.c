/* test_blas.c - the CPU's features (base/cpu.h) against the kernel's own
 * reading of cpuid, and the BLAS check (base/blas.h): vector levels of
 * OpenBLAS's core names, the core chosen for a CPU, and the note for each
 * way the kernels can be older than the CPU runs.  The shell's re-exec is
 * tested end to end in tests/lua/shell_spec.lua. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/blas.h"
#include "base/cpu.h"
#include "test.h"

/* Does /proc/cpuinfo's first flags line list `flag` as a whole word? */
static int cpuinfo_has(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)); p += n)
        if (p[-1] == ' ' && (p[n] == ' ' || p[n] == '\n' || p[n] == 0))
            return 1;
    return 0;
}

TEST(cpu_features_match_proc_cpuinfo)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return; /* not Linux: nothing to compare with */
    char line[8192], *flags = NULL;
    while (!flags && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5))
            flags = strchr(line, ':');
    fclose(f);
    if (!flags)
        return;
    const sr_cpu *c = sr_cpu_get();
    CHECK(c->vendor[0], "no vendor string");
    for (int i = 0; sr_cpu_feature_name(i); i++) {
        const char *name = sr_cpu_feature_name(i);
        int want = cpuinfo_has(flags, strcmp(name, "sse3") ? name : "pni"); /* Linux calls SSE3 pni */
        CHECK(!!(c->features & (1u << i)) == want, "%s: cpuid says %d, /proc/cpuinfo %d", name,
              !!(c->features & (1u << i)), want);
    }
    CHECK(sr_cpu_feature_name(11) == NULL, "feature list and SR_CPU_* bits out of step");
}

TEST(cpu_isa_needs_every_feature_of_its_level)
{
    unsigned avx2 = SR_CPU_SSE3 | SR_CPU_AVX | SR_CPU_FMA | SR_CPU_AVX2;
    unsigned avx512 = avx2 | SR_CPU_AVX512F | SR_CPU_AVX512BW | SR_CPU_AVX512VL | SR_CPU_AVX512DQ;
    CHECK(sr_cpu_isa(avx512) == SR_ISA_AVX512, "AVX-512 F+BW+VL+DQ");
    CHECK(sr_cpu_isa(avx512 & ~SR_CPU_AVX512DQ) == SR_ISA_AVX2, "no DQ: AVX2");
    CHECK(sr_cpu_isa(avx2) == SR_ISA_AVX2, "AVX2+FMA");
    CHECK(sr_cpu_isa(avx2 & ~SR_CPU_FMA) == SR_ISA_AVX, "AVX2 without FMA: AVX");
    CHECK(sr_cpu_isa(SR_CPU_SSE3) == SR_ISA_SSE3 && sr_cpu_isa(0) == SR_ISA_UNKNOWN, "SSE3, none");
    char buf[64];
    sr_cpu_feature_names(SR_CPU_AVX2 | SR_CPU_AVX512_BF16, buf, sizeof buf);
    CHECK(!strcmp(buf, "avx2 avx512_bf16"), "names: '%s'", buf);
    sr_cpu_feature_names(0, buf, sizeof buf);
    CHECK(!strcmp(buf, "none"), "no features: '%s'", buf);
}

TEST(blas_core_levels_and_the_core_for_a_cpu)
{
    CHECK(sr_blas_core_isa("Prescott") == SR_ISA_SSE3 && sr_blas_core_isa("Sandybridge") == SR_ISA_AVX, "old cores");
    CHECK(sr_blas_core_isa("haswell") == SR_ISA_AVX2 && sr_blas_core_isa("Zen") == SR_ISA_AVX2, "AVX2 cores, any case");
    CHECK(sr_blas_core_isa("SkylakeX") == SR_ISA_AVX512 && sr_blas_core_isa("Cooperlake") == SR_ISA_AVX512, "AVX-512");
    CHECK(sr_blas_core_isa("NeoverseN1") == SR_ISA_UNKNOWN && sr_blas_core_isa(NULL) == SR_ISA_UNKNOWN, "unknown");
    unsigned avx2 = SR_CPU_SSE3 | SR_CPU_AVX | SR_CPU_FMA | SR_CPU_AVX2;
    unsigned avx512 = avx2 | SR_CPU_AVX512F | SR_CPU_AVX512BW | SR_CPU_AVX512VL | SR_CPU_AVX512DQ;
    /* Emerald Rapids, family 6 model 207: OpenBLAS 0.3.21 picks Prescott. */
    sr_cpu emr = {.vendor = "GenuineIntel", .family = 6, .model_id = 207,
                  .features = avx512 | SR_CPU_AVX512_BF16 | SR_CPU_AMX_TILE | SR_CPU_AMX_BF16};
    sr_cpu zen2 = {.vendor = "AuthenticAMD", .family = 23, .model_id = 49, .features = avx2};
    sr_cpu hsw = {.vendor = "GenuineIntel", .family = 6, .model_id = 63, .features = avx2};
    sr_cpu old = {.vendor = "GenuineIntel", .family = 6, .model_id = 15, .features = SR_CPU_SSE3};
    CHECK(!strcmp(sr_blas_best_core(&emr), "SkylakeX"), "EMR: %s", sr_blas_best_core(&emr));
    CHECK(!strcmp(sr_blas_best_core(&zen2), "Zen"), "Zen 2: %s", sr_blas_best_core(&zen2));
    CHECK(!strcmp(sr_blas_best_core(&hsw), "Haswell"), "Haswell: %s", sr_blas_best_core(&hsw));
    CHECK(!strcmp(sr_blas_best_core(&old), "Prescott"), "Core 2: %s", sr_blas_best_core(&old));
    sr_cpu none = {0};
    CHECK(sr_blas_best_core(&none) == NULL, "no features: no core");
}

TEST(blas_note_says_why_the_kernels_are_old_and_what_to_set)
{
    unsigned avx512 = SR_CPU_SSE3 | SR_CPU_AVX | SR_CPU_FMA | SR_CPU_AVX2 | SR_CPU_AVX512F | SR_CPU_AVX512BW |
                      SR_CPU_AVX512VL | SR_CPU_AVX512DQ;
    sr_cpu emr = {.vendor = "GenuineIntel", .family = 6, .model_id = 207, .features = avx512};
    sr_blas_info b = {.name = "OpenBLAS 0.3.21", .core = "Prescott", .dynamic = 1};
    sr_blas_assess(&b, &emr); /* OpenBLAS's own choice, where srgeo cannot re-exec (lua5.4) */
    CHECK(b.isa == SR_ISA_SSE3 && !strcmp(b.best, "SkylakeX") && b.best_isa == SR_ISA_AVX512, "levels");
    CHECK(strstr(b.note, "chose its Prescott (SSE3) kernels") && strstr(b.note, "set OPENBLAS_CORETYPE=SkylakeX"),
          "unset: %s", b.note);
    b.coretype = "Haswell", b.core = "Haswell"; /* the user's */
    sr_blas_assess(&b, &emr);
    CHECK(strstr(b.note, "OPENBLAS_CORETYPE=Haswell runs") && strstr(b.note, "could run SkylakeX (AVX-512)"),
          "user's: %s", b.note);
    b.by_srgeo = 1, b.coretype = "SkylakeX", b.core = "Prescott"; /* srgeo set it and OpenBLAS refused */
    sr_blas_assess(&b, &emr);
    CHECK(strstr(b.note, "srgeo set OPENBLAS_CORETYPE=SkylakeX, but"), "srgeo's: %s", b.note);
    b.by_srgeo = 0, b.coretype = NULL, b.dynamic = 0; /* a build for one core: the variable does nothing */
    sr_blas_assess(&b, &emr);
    CHECK(strstr(b.note, "is built for Prescott (SSE3) kernels only"), "not DYNAMIC_ARCH: %s", b.note);
    const char *fine[] = {"SkylakeX", "Cooperlake", "NeoverseN1"}; /* as new as the CPU; unknown: never old */
    for (int i = 0; i < 3; i++) {
        b = (sr_blas_info){.name = "OpenBLAS 0.3.21", .core = fine[i], .dynamic = 1};
        sr_blas_assess(&b, &emr);
        CHECK(b.note[0] == 0, "%s: %s", fine[i], b.note);
    }
}
