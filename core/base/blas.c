/* blas.c - the BLAS kernels that run, checked against the CPU (blas.h). */
#include "base/blas.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/threads.h"

char *openblas_get_corename(void);
char *openblas_get_config(void);

/* OpenBLAS's x86 core names by the vector level of their float GEMM
 * kernels (Excavator's are its FMA3 Piledriver line, not Haswell's AVX2). */
static const struct {
    const char *name;
    int isa;
} cores[] = {
    {"Katmai", SR_ISA_SSE3},      {"Coppermine", SR_ISA_SSE3}, {"Northwood", SR_ISA_SSE3},   {"Prescott", SR_ISA_SSE3},
    {"Banias", SR_ISA_SSE3},      {"Atom", SR_ISA_SSE3},       {"Core2", SR_ISA_SSE3},       {"Penryn", SR_ISA_SSE3},
    {"Dunnington", SR_ISA_SSE3},  {"Nehalem", SR_ISA_SSE3},    {"Athlon", SR_ISA_SSE3},      {"Opteron", SR_ISA_SSE3},
    {"Opteron_SSE3", SR_ISA_SSE3}, {"Opteron(SSE3)", SR_ISA_SSE3}, {"Barcelona", SR_ISA_SSE3}, {"Nano", SR_ISA_SSE3},
    {"Bobcat", SR_ISA_SSE3},      {"Sandybridge", SR_ISA_AVX}, {"Bulldozer", SR_ISA_AVX},    {"Piledriver", SR_ISA_AVX},
    {"Steamroller", SR_ISA_AVX},  {"Excavator", SR_ISA_AVX},   {"Haswell", SR_ISA_AVX2},     {"Zen", SR_ISA_AVX2},
    {"SkylakeX", SR_ISA_AVX512},  {"Cooperlake", SR_ISA_AVX512}, {"SapphireRapids", SR_ISA_AVX512},
};

int sr_blas_core_isa(const char *core)
{
    for (size_t i = 0; core && i < sizeof cores / sizeof *cores; i++)
        if (!strcasecmp(core, cores[i].name))
            return cores[i].isa;
    return SR_ISA_UNKNOWN;
}

/* Names OPENBLAS_CORETYPE takes: 0.3.21 refuses Cooperlake ("Core not
 * found", then its own choice), whose sgemm and dgemm are SkylakeX's. */
const char *sr_blas_best_core(const sr_cpu *c)
{
    int amd = !strcmp(c->vendor, "AuthenticAMD") || !strcmp(c->vendor, "HygonGenuine");
    switch (sr_cpu_isa(c->features)) {
    case SR_ISA_AVX512:
        return "SkylakeX";
    case SR_ISA_AVX2:
        return amd ? "Zen" : "Haswell";
    case SR_ISA_AVX:
        return amd ? "Bulldozer" : "Sandybridge";
    case SR_ISA_SSE3:
        return "Prescott";
    default:
        return NULL;
    }
}

void sr_blas_assess(sr_blas_info *b, const sr_cpu *cpu)
{
    b->isa = sr_blas_core_isa(b->core);
    b->best = sr_blas_best_core(cpu);
    b->best_isa = sr_blas_core_isa(b->best);
    b->note[0] = 0;
    if (!b->best || b->isa == SR_ISA_UNKNOWN || b->isa >= b->best_isa)
        return;
    const char *isa = sr_isa_name(b->isa), *best_isa = sr_isa_name(b->best_isa);
    size_t n = sizeof b->note;
    if (!b->dynamic)
        snprintf(b->note, n, "%s is built for %s (%s) kernels only; this CPU could run %s (%s)", b->name, b->core, isa,
                 b->best, best_isa);
    else if (b->coretype && b->by_srgeo)
        snprintf(b->note, n, "srgeo set OPENBLAS_CORETYPE=%s, but %s runs its %s (%s) kernels; this CPU could run %s",
                 b->coretype, b->name, b->core, isa, best_isa);
    else if (b->coretype)
        snprintf(b->note, n, "OPENBLAS_CORETYPE=%s runs %s's %s (%s) kernels; this CPU could run %s (%s)", b->coretype,
                 b->name, b->core, isa, b->best, best_isa);
    else
        snprintf(b->note, n,
                 "%s chose its %s (%s) kernels; this CPU could run %s (%s): set OPENBLAS_CORETYPE=%s "
                 "before starting %s (the srgeo shell does this itself)",
                 b->name, b->core, isa, b->best, best_isa, b->best, program_invocation_short_name);
}

/* Read once (pthread_once: the first call may come from a GEMM on any
 * thread). */
static sr_blas_info blas;

static void blas_read(void)
{
    sr_blas_info *b = &blas;
    b->config = openblas_get_config();
    b->core = openblas_get_corename();
    int len = 0; /* "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." */
    sscanf(b->config, "OpenBLAS %*s%n", &len);
    snprintf(b->name, sizeof b->name, "%.*s", len ? len : 8, len ? b->config : "OpenBLAS");
    b->dynamic = strstr(b->config, "DYNAMIC_ARCH") != NULL;
    const char *ct = getenv("OPENBLAS_CORETYPE"), *mark = getenv("SRGEO_BLAS_CORETYPE");
    b->coretype = ct && *ct ? ct : NULL;
    b->by_srgeo = b->coretype && mark && !strcmp(mark, b->coretype);
    const char *fake = getenv("SRGEO_TEST_BLAS_CORE");
    if (!b->coretype && fake && *fake)
        b->core = fake;
    sr_blas_assess(b, sr_cpu_get());
    const char *g = getenv("SRGEO_GEMM");
    if (g && !strcmp(g, "own"))
        b->own_gemm = 1;
    else if (g && !strcmp(g, "blas"))
        b->own_gemm = 0;
    else
        b->own_gemm = b->isa != SR_ISA_UNKNOWN && b->isa < sr_cpu_build_isa();
}

const sr_blas_info *sr_blas_get(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, blas_read);
    return &blas;
}

const char *sr_blas_wanted_core(void)
{
    const sr_blas_info *b = sr_blas_get();
    if (b->coretype || !b->dynamic || !b->best || b->isa == SR_ISA_UNKNOWN || b->isa >= b->best_isa)
        return NULL;
    return b->best;
}

static int noted;

void sr_blas_noted(void)
{
    const sr_blas_info *b = sr_blas_get();
    if (!noted && b->note[0])
        setenv("SRGEO_BLAS_WARNED", b->core, 1); /* the processes it starts keep quiet too */
    noted = 1;
}

void sr_blas_warn_once(void)
{
    if (noted)
        return;
    const sr_blas_info *b = sr_blas_get();
    const char *w = getenv("SRGEO_BLAS_WARNED");
    if (b->note[0] && !(w && !strcmp(w, b->core)))
        fprintf(stderr, "srgeo: warning: %s\n", b->note);
    sr_blas_noted();
}

void sr_blas_describe(char *buf, size_t n, int load)
{
    const sr_cpu *c = sr_cpu_get();
    const sr_blas_info *b = sr_blas_get();
    char feats[256], how[160];
    sr_cpu_feature_names(c->features, feats, sizeof feats);
    if (b->coretype)
        snprintf(how, sizeof how, "OPENBLAS_CORETYPE=%s (%s)", b->coretype, b->by_srgeo ? "set by srgeo" : "the environment's");
    else
        snprintf(how, sizeof how, "OpenBLAS's own choice (OPENBLAS_CORETYPE unset)");
    int threads = sr_threads_get();
#ifdef _OPENMP
    const char *omp = ", OpenMP";
#else
    const char *omp = "";
#endif
    size_t len = 0;
#define ADD(...)                                                                                                       \
    do {                                                                                                               \
        int w_ = snprintf(buf + len, n - len, __VA_ARGS__);                                                            \
        if (w_ < 0 || (size_t)w_ >= n - len)                                                                           \
            return;                                                                                                    \
        len += (size_t)w_;                                                                                             \
    } while (0)
    if (n)
        buf[0] = 0;
    ADD("cpu: %s (%s family %d model %d): %s\n", c->model[0] ? c->model : "unknown", c->vendor[0] ? c->vendor : "?",
        c->family, c->model_id, feats);
    ADD("blas: %s, %s kernels (%s), %s; srgeo GEMM %s%s; %d thread%s%s\n", b->name, b->core, sr_isa_name(b->isa),
        how, sr_isa_name(sr_cpu_build_isa()), b->own_gemm ? ", running the float32 products" : "", threads,
        threads == 1 ? "" : "s", omp);
    if (b->note[0])
        ADD("warning: %s\n", b->note);
    if (load) {
        double l[3];
        FILE *f = fopen("/proc/loadavg", "r");
        int got = f && fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) == 3;
        if (f)
            fclose(f);
        if (got)
            ADD("load average: %.2f %.2f %.2f (1, 5, 15 min)\n", l[0], l[1], l[2]);
    }
#undef ADD
}
