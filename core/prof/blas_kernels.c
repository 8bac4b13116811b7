/* blas_kernels.c: the OpenBLAS kernels a run uses and the rule that chose
 * them (blas_kernels.h). */
#include "core/prof/blas_kernels.h"

#include <errno.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/util/common.h"
#include "kernels/cpu/blas.h" /* OpenBLAS, loaded on first use: its corename */


#define LIBRARY_CORE_ENV "VB_BLAS_LIBRARY_CORE"

void vb_cpu_features_detect(vb_cpu_features *f) {
    memset(f, 0, sizeof *f);
#if defined(__x86_64__) || defined(__i386__)
    /* the compiler's CPU model checks the OS's register support (XGETBV)
     * for the AVX and AVX-512 bits too */
    __builtin_cpu_init();
    f->avx = __builtin_cpu_supports("avx");
    f->avx2 = __builtin_cpu_supports("avx2");
    f->fma = __builtin_cpu_supports("fma");
    f->avx512f = __builtin_cpu_supports("avx512f");
    f->avx512cd = __builtin_cpu_supports("avx512cd");
    f->avx512bw = __builtin_cpu_supports("avx512bw");
    f->avx512dq = __builtin_cpu_supports("avx512dq");
    f->avx512vl = __builtin_cpu_supports("avx512vl");
#endif
}

static bool has_avx512(const vb_cpu_features *f) {
    return f->avx512f && f->avx512cd && f->avx512bw && f->avx512dq && f->avx512vl;
}

const char *vb_cpu_features_vector(const vb_cpu_features *f) {
#if defined(__x86_64__) || defined(__i386__)
    if (has_avx512(f) && f->avx2 && f->fma) return "avx512";
    if (f->avx2 && f->fma) return "avx2";
    if (f->avx) return "avx";
    return "sse";
#else
    (void)f;
    return "";
#endif
}

const char *vb_blas_core_vector(const char *core) {
    static const struct {
        const char *core, *vector;
    } k_cores[] = {
        {"SkylakeX", "avx512"},    {"CooperLake", "avx512"},  {"SapphireRapids", "avx512"},
        {"Haswell", "avx2"},       {"Zen", "avx2"},           {"Excavator", "avx2"},
        {"Sandybridge", "avx"},    {"Bulldozer", "avx"},      {"Piledriver", "avx"},
        {"Steamroller", "avx"},    {"Prescott", "sse"},       {"Core2", "sse"},
        {"Penryn", "sse"},         {"Dunnington", "sse"},     {"Nehalem", "sse"},
        {"Atom", "sse"},           {"Opteron", "sse"},        {"Barcelona", "sse"},
        {"Nano", "sse"},           {"Katmai", "sse"},
    };
    for (size_t i = 0; core && i < sizeof k_cores / sizeof *k_cores; i++)
        if (strcasecmp(core, k_cores[i].core) == 0) return k_cores[i].vector;
    return "";
}

int vb_vector_rank(const char *v) {
    static const char *const k_order[] = {"sse", "avx", "avx2", "avx512"};
    for (int i = 0; v && i < 4; i++)
        if (strcmp(v, k_order[i]) == 0) return i + 1;
    return 0;
}

/* the core type of the widest kernels of each width (OpenBLAS 0.3.x names) */
static const char *core_for_vector(const char *v) {
    if (strcmp(v, "avx512") == 0) return "SkylakeX";
    if (strcmp(v, "avx2") == 0) return "Haswell";
    if (strcmp(v, "avx") == 0) return "Sandybridge";
    return NULL;
}

const char *vb_blas_core_wanted(const char *library_core, const vb_cpu_features *f) {
    const int have = vb_vector_rank(vb_blas_core_vector(library_core));
    const char *cpu = vb_cpu_features_vector(f);
    /* a core type this table does not know (another architecture, a newer
     * OpenBLAS) is the library's business */
    if (have == 0 || vb_vector_rank(cpu) <= have) return NULL;
    return core_for_vector(cpu);
}

const char *vb_blas_rule_name(vb_blas_rule r) {
    switch (r) {
    case VB_BLAS_RULE_VITBENCH: return "vitbench";
    case VB_BLAS_RULE_ENVIRONMENT: return "environment";
    case VB_BLAS_RULE_LIBRARY: break;
    }
    return "library";
}

vb_blas_decision vb_blas_decide(const char *env_coretype, const char *env_library_core, const char *library_core,
                                const vb_cpu_features *f) {
    vb_blas_decision d = {VB_BLAS_RULE_LIBRARY, NULL, ""};
    if (env_coretype && env_coretype[0]) {
        /* set by this rule before the execv (both variables), or by whoever
         * started vitbench, which is kept */
        if (env_library_core && env_library_core[0]) {
            d.rule = VB_BLAS_RULE_VITBENCH;
            vb_snprintf(d.library_core, sizeof d.library_core, "%.60s", env_library_core);
        } else {
            d.rule = VB_BLAS_RULE_ENVIRONMENT;
        }
        return d;
    }
    vb_snprintf(d.library_core, sizeof d.library_core, "%.60s", library_core ? library_core : "");
    d.reexec_core = vb_blas_core_wanted(library_core, f);
    return d;
}

static vb_blas_decision g_choice;
static bool g_chosen;

/* With OMP_PROC_BIND set, libgomp bound the initial thread to its first
 * place when this image loaded, so the mask the new image would start with
 * is that one place, and its places (and team) would shrink to one core.
 * The new image gets the mask the places were built from: all their CPUs. */
static void restore_places_mask(void) {
    if (omp_get_proc_bind() == omp_proc_bind_false) return;
    const int places = omp_get_num_places();
    if (places <= 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int p = 0; p < places; p++) {
        const int n = omp_get_place_num_procs(p);
        int ids[CPU_SETSIZE];
        if (n <= 0 || n > CPU_SETSIZE) continue;
        omp_get_place_proc_ids(p, ids);
        for (int i = 0; i < n; i++)
            if (ids[i] >= 0 && ids[i] < CPU_SETSIZE) CPU_SET(ids[i], &set);
    }
    if (CPU_COUNT(&set) > 0 && sched_setaffinity(0, sizeof set, &set) != 0)
        vb_warn("cannot give the restarted image the CPUs of its OpenMP places (%s): its team may be smaller",
                strerror(errno));
}

void vb_blas_choose(char **argv) {
    vb_cpu_features f;
    vb_cpu_features_detect(&f);
    const char *lib = vb_blas_corename();
    g_choice = vb_blas_decide(getenv("OPENBLAS_CORETYPE"), getenv(LIBRARY_CORE_ENV), lib, &f);
    g_chosen = true;
    if (!g_choice.reexec_core) return;
    /* the library read its variables when it loaded: only a new image loads
     * it again. Nothing else has started yet (no MPI, no threads). */
    if (setenv("OPENBLAS_CORETYPE", g_choice.reexec_core, 1) != 0 ||
        setenv(LIBRARY_CORE_ENV, g_choice.library_core, 1) != 0) {
        vb_warn("OpenBLAS chose %s kernels on a CPU with %s; cannot set OPENBLAS_CORETYPE=%s (%s): keeping them",
                g_choice.library_core, vb_cpu_features_vector(&f), g_choice.reexec_core, strerror(errno));
    } else {
        fflush(NULL);
        restore_places_mask();
        execv("/proc/self/exe", argv);
        vb_warn("OpenBLAS chose %s kernels on a CPU with %s; starting again with OPENBLAS_CORETYPE=%s failed (%s): "
                "keeping them",
                g_choice.library_core, vb_cpu_features_vector(&f), g_choice.reexec_core, strerror(errno));
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv(LIBRARY_CORE_ENV);
    }
    g_choice.reexec_core = NULL;
}

const vb_blas_decision *vb_blas_choice(void) {
    if (!g_chosen) {
        const char *lib = vb_blas_corename();
        g_choice = (vb_blas_decision){VB_BLAS_RULE_LIBRARY, NULL, ""};
        vb_snprintf(g_choice.library_core, sizeof g_choice.library_core, "%.60s", lib ? lib : "");
        g_chosen = true;
    }
    return &g_choice;
}

void vb_blas_advice(char *buf, size_t n, const char *core, const char *cpu_vector, const char *rule_name,
                    const char *library_core) {
    buf[0] = '\0';
    const char *have = vb_blas_core_vector(core);
    if (!have[0] || !cpu_vector || vb_vector_rank(have) >= vb_vector_rank(cpu_vector)) return;
    const char *want = core_for_vector(cpu_vector);
    if (rule_name && strcmp(rule_name, "environment") == 0) {
        vb_snprintf(buf, n,
                    "OPENBLAS_CORETYPE=%s was set before vitbench started: OpenBLAS's %s kernels (%s) on a CPU with "
                    "%s, so the CPU backend's GEMMs run well under its FMA peak; unset it and vitbench picks %s, "
                    "unless it is set because OpenBLAS fails with its own choice on this machine",
                    core, core, have, cpu_vector, want ? want : "the CPU's own");
    } else if (rule_name && strcmp(rule_name, "library") == 0) {
        vb_snprintf(buf, n,
                    "OpenBLAS chose its %s kernels (%s) on a CPU with %s and vitbench could not start again with "
                    "OPENBLAS_CORETYPE=%s: the CPU backend's GEMMs run well under its FMA peak; set it yourself or "
                    "use an OpenBLAS that knows this CPU",
                    core, have, cpu_vector, want ? want : "?");
    } else {
        vb_snprintf(buf, n,
                    "OpenBLAS's %s kernels (%s) ran on a CPU with %s%s%s: the CPU backend's GEMMs ran well under its "
                    "FMA peak; with OPENBLAS_CORETYPE unset vitbench now picks %s where the library picks narrower "
                    "kernels",
                    core, have, cpu_vector, library_core && library_core[0] ? ", the library's own choice " : "",
                    library_core && library_core[0] ? library_core : "", want ? want : "the CPU's own");
    }
}
