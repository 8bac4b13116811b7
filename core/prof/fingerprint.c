/* fingerprint.c: machine, build and library facts for run.json (fingerprint.h). */
#include "core/prof/fingerprint.h"

#include <omp.h>
#include <stdlib.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu/blas.h"

#include "core/util/common.h"

#ifndef VB_GIT_COMMIT
#define VB_GIT_COMMIT "unknown"
#endif
#ifndef VB_GIT_DIRTY
#define VB_GIT_DIRTY 0
#endif
#ifndef VB_CFLAGS
#define VB_CFLAGS ""
#endif


/* With OMP_PROC_BIND set, libgomp binds the initial thread to its first
 * place as the program starts, so the mask seen from main is that one place
 * (one core under OMP_PLACES=cores); the team's cores are those of the places
 * OpenMP built from the mask the process started with. */
static int bound_team_procs(void) {
    if (omp_get_proc_bind() == omp_proc_bind_false) return 0;
    const int n = omp_get_partition_num_places();
    if (n <= 0) return 0;
    int *places = malloc((size_t)n * sizeof *places);
    if (!places) return 0;
    omp_get_partition_place_nums(places);
    int procs = 0;
    for (int i = 0; i < n; i++) procs += omp_get_place_num_procs(places[i]);
    free(places);
    return procs;
}

int vb_affinity_cores(void) {
    const int bound = bound_team_procs();
    if (bound > 0) return bound;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (int)n : 1;
    }
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

static void cpu_model(char *buf, size_t n) {
    vb_snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *v = strchr(line, ':');
        if (!v) continue;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        size_t len = strcspn(v, "\n");
        while (len > 0 && v[len - 1] == ' ') len--;
        if (len >= n) len = n - 1;
        memcpy(buf, v, len);
        buf[len] = '\0';
        break;
    }
    fclose(f);
}

static void fnv1a(uint64_t *h, const char *s) {
    for (; *s; s++) {
        *h ^= (unsigned char)*s;
        *h *= 1099511628211ULL;
    }
    *h ^= 0x1f; /* field separator: ("ab","c") and ("a","bc") differ */
    *h *= 1099511628211ULL;
}

void vb_fingerprint_collect(vb_fingerprint *f, const char *backend, int ranks, const char *gpu_name,
                            const char *gpu_driver) {
    memset(f, 0, sizeof *f);
    if (gethostname(f->host, sizeof f->host) != 0) vb_snprintf(f->host, sizeof f->host, "unknown");
    f->host[sizeof f->host - 1] = '\0';
    cpu_model(f->cpu_model, sizeof f->cpu_model);
    f->affinity_cores = vb_affinity_cores();
    f->omp_threads = omp_get_max_threads();
    f->ranks = ranks;
    vb_snprintf(f->backend, sizeof f->backend, "%s", backend);
    vb_snprintf(f->blas, sizeof f->blas, "%.250s", vb_blas_config());
    const char *core = vb_blas_corename();
    vb_snprintf(f->blas_coretype, sizeof f->blas_coretype, "%.60s", core ? core : "unknown");
#if defined(__clang__)
    vb_snprintf(f->compiler, sizeof f->compiler, "clang %.100s", __clang_version__);
#elif defined(__GNUC__)
    vb_snprintf(f->compiler, sizeof f->compiler, "gcc %.100s", __VERSION__);
#else
    vb_snprintf(f->compiler, sizeof f->compiler, "unknown");
#endif
    vb_snprintf(f->cflags, sizeof f->cflags, "%.250s", VB_CFLAGS);
    vb_snprintf(f->git_commit, sizeof f->git_commit, "%.40s", VB_GIT_COMMIT);
    f->git_dirty = VB_GIT_DIRTY != 0;
    vb_snprintf(f->gpu_name, sizeof f->gpu_name, "%s", gpu_name ? gpu_name : "");
    vb_snprintf(f->gpu_driver, sizeof f->gpu_driver, "%s", gpu_driver ? gpu_driver : "");
    uint64_t h = 14695981039346656037ULL;
    char num[32];
    fnv1a(&h, f->cpu_model);
    snprintf(num, sizeof num, "%d", f->affinity_cores);
    fnv1a(&h, num);
    snprintf(num, sizeof num, "%d", f->omp_threads);
    fnv1a(&h, num);
    snprintf(num, sizeof num, "%d", f->ranks);
    fnv1a(&h, num);
    fnv1a(&h, f->backend);
    fnv1a(&h, f->blas_coretype);
    fnv1a(&h, f->gpu_name);
    snprintf(f->machine_key, sizeof f->machine_key, "%016llx", (unsigned long long)h);
    vb_cpu_features feat;
    vb_cpu_features_detect(&feat);
    vb_snprintf(f->cpu_vector, sizeof f->cpu_vector, "%s", vb_cpu_features_vector(&feat));
    vb_snprintf(f->blas_vector, sizeof f->blas_vector, "%s", vb_blas_core_vector(f->blas_coretype));
    const vb_blas_decision *d = vb_blas_choice();
    vb_snprintf(f->blas_rule, sizeof f->blas_rule, "%s", vb_blas_rule_name(d->rule));
    vb_snprintf(f->blas_library_core, sizeof f->blas_library_core, "%s", d->library_core);
}
