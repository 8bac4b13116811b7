/* fingerprint.h: what makes two runs' throughputs comparable.
 *
 * Collected once per rank at run setup and written to run.json
 * ("fingerprint") and summary.csv. machine_key names the parts that decide
 * throughput and that a user does not change on purpose between A and B:
 * cpu_model, affinity_cores, omp_threads, ranks, backend, blas_coretype,
 * gpu_name. host, compiler, cflags and git commit are recorded, not keyed:
 * they are exactly what a comparison of two builds or two nodes varies.
 */
#ifndef VB_FINGERPRINT_H
#define VB_FINGERPRINT_H

#include <stdbool.h>

#include "core/prof/blas_kernels.h" /* the kernels' widths and the rule that chose them */

typedef struct vb_fingerprint {
    char host[256];
    char cpu_model[256];     /* /proc/cpuinfo "model name" */
    int affinity_cores;      /* CPUs in this rank's affinity mask */
    int omp_threads;         /* OpenMP threads this rank runs */
    int ranks;
    char backend[32];
    char blas[256];          /* openblas_get_config() */
    char blas_coretype[64];  /* openblas_get_corename(): the kernels in use */
    char compiler[128];
    char cflags[256];
    char git_commit[48];
    bool git_dirty;
    char gpu_name[256];      /* "" without a GPU */
    char gpu_driver[64];
    char machine_key[17];    /* 16 hex digits, FNV-1a of the keyed fields */
    /* recorded, not keyed: the widest vector instructions the CPU has and
     * those the BLAS kernels use (sse, avx, avx2, avx512; "" unknown). BLAS
     * kernels narrower than the CPU (OPENBLAS_CORETYPE=Haswell on an AVX-512
     * machine, or a CPU OpenBLAS does not know, given Prescott's SSE) run
     * well below its FMA peak: the report warns. */
    char cpu_vector[16];
    char blas_vector[16];
    /* which rule chose blas_coretype (blas_kernels.h: library, vitbench,
     * environment) and what OpenBLAS picked by itself, where known */
    char blas_rule[16];
    char blas_library_core[64];
} vb_fingerprint;

/* gpu_name / gpu_driver: the backend's device (ops->device_describe), NULL
 * or "" without a GPU */
void vb_fingerprint_collect(vb_fingerprint *f, const char *backend, int ranks, const char *gpu_name,
                            const char *gpu_driver);


/* CPUs the rank may run its OpenMP team on (at least 1): those of the
 * OpenMP places of its partition when OMP_PROC_BIND binds threads (libgomp
 * has by then bound the calling thread to one place), else the calling
 * thread's affinity mask. */
int vb_affinity_cores(void);

#endif
