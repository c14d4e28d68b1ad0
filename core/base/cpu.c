/* cpu.c - the CPU's identity and vector features from cpuid (cpu.h). */
#include "base/cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define SR_X86 1
#endif

/* In SR_CPU_* bit order. */
static const char *const feature_names[] = {
    "sse3", "avx", "fma", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "amx_tile", "amx_bf16",
};
#define NFEATURES (int)(sizeof feature_names / sizeof *feature_names)

const char *sr_cpu_feature_name(int i) { return i >= 0 && i < NFEATURES ? feature_names[i] : NULL; }

void sr_cpu_feature_names(unsigned features, char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = 0;
    for (int i = 0; i < NFEATURES; i++)
        if (features & (1u << i)) {
            int w = snprintf(buf + len, n - len, "%s%s", len ? " " : "", feature_names[i]);
            if (w < 0 || (size_t)w >= n - len)
                return;
            len += (size_t)w;
        }
    if (!len)
        snprintf(buf, n, "none");
}

int sr_cpu_isa(unsigned f)
{
    const unsigned avx512 = SR_CPU_AVX512F | SR_CPU_AVX512BW | SR_CPU_AVX512VL | SR_CPU_AVX512DQ;
    if ((f & avx512) == avx512 && (f & SR_CPU_AVX2))
        return SR_ISA_AVX512;
    if ((f & (SR_CPU_AVX2 | SR_CPU_FMA)) == (SR_CPU_AVX2 | SR_CPU_FMA))
        return SR_ISA_AVX2;
    if (f & SR_CPU_AVX)
        return SR_ISA_AVX;
    return f & SR_CPU_SSE3 ? SR_ISA_SSE3 : SR_ISA_UNKNOWN;
}

const char *sr_isa_name(int isa)
{
    static const char *const names[] = {"unknown", "SSE3", "AVX", "AVX2", "AVX-512"};
    return isa >= 0 && isa <= SR_ISA_AVX512 ? names[isa] : "unknown";
}

int sr_cpu_build_isa(void)
{
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
    return SR_ISA_AVX512;
#elif defined(__AVX2__) && defined(__FMA__)
    return SR_ISA_AVX2;
#elif defined(__AVX__)
    return SR_ISA_AVX;
#elif defined(__SSE3__)
    return SR_ISA_SSE3;
#else
    return SR_ISA_UNKNOWN;
#endif
}

#ifdef SR_X86
static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static void detect(sr_cpu *c)
{
    unsigned a = 0, b = 0, cx = 0, d = 0, max = 0;
    if (!__get_cpuid(0, &max, &b, &cx, &d))
        return;
    memcpy(c->vendor, &b, 4), memcpy(c->vendor + 4, &d, 4), memcpy(c->vendor + 8, &cx, 4);
    __get_cpuid(1, &a, &b, &cx, &d);
    int fam = (a >> 8) & 0xf, mod = (a >> 4) & 0xf;
    c->family = fam == 0xf ? fam + (int)((a >> 20) & 0xff) : fam;
    c->model_id = fam == 0x6 || fam == 0xf ? mod | (int)((a >> 16) & 0xf) << 4 : mod;
    unsigned f = cx & 1u ? SR_CPU_SSE3 : 0;
    /* The OS saves the AVX state (XCR0 bits 1-2), the AVX-512 state (5-7)
     * and the AMX tiles (17-18) only when it enabled XSAVE (OSXSAVE). */
    uint64_t x = cx & (1u << 27) ? xcr0() : 0;
    int os_avx = (x & 0x6) == 0x6, os_avx512 = os_avx && (x & 0xe0) == 0xe0, os_amx = (x & 0x60000) == 0x60000;
    if (os_avx && (cx & (1u << 28)))
        f |= SR_CPU_AVX;
    if (os_avx && (cx & (1u << 12)))
        f |= SR_CPU_FMA;
    if (max >= 7) {
        unsigned sub;
        __cpuid_count(7, 0, sub, b, cx, d);
        if (os_avx && (b & (1u << 5)))
            f |= SR_CPU_AVX2;
        if (os_avx512) {
            f |= b & (1u << 16) ? SR_CPU_AVX512F : 0;
            f |= b & (1u << 17) ? SR_CPU_AVX512DQ : 0;
            f |= b & (1u << 30) ? SR_CPU_AVX512BW : 0;
            f |= b & (1u << 31) ? SR_CPU_AVX512VL : 0;
        }
        if (os_amx) {
            f |= d & (1u << 24) ? SR_CPU_AMX_TILE : 0;
            f |= d & (1u << 22) ? SR_CPU_AMX_BF16 : 0;
        }
        if (sub >= 1) {
            __cpuid_count(7, 1, a, b, cx, d);
            if (os_avx512 && (a & (1u << 5)))
                f |= SR_CPU_AVX512_BF16;
        }
    }
    c->features = f;
    unsigned ext = 0;
    __get_cpuid(0x80000000, &ext, &b, &cx, &d);
    if (ext >= 0x80000004) {
        unsigned r[12];
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        char s[49];
        memcpy(s, r, 48);
        s[48] = 0;
        char *p = s + strspn(s, " ");
        size_t n = strlen(p);
        while (n && p[n - 1] == ' ')
            p[--n] = 0;
        snprintf(c->model, sizeof c->model, "%s", p);
    }
}
#else
static void detect(sr_cpu *c) { (void)c; }
#endif

const sr_cpu *sr_cpu_get(void)
{
    static sr_cpu cpu;
    static int done;
    if (!done) {
        detect(&cpu);
        done = 1;
    }
    return &cpu;
}
