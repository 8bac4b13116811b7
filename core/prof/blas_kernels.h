/* blas_kernels.h: which OpenBLAS kernels a run uses, and which rule chose
 * them.
 *
 * OpenBLAS picks its kernels once, when the library loads, from the CPUs
 * it knows. A CPU newer than the library gets its oldest x86-64 kernels:
 * Debian's OpenBLAS 0.3.21 on an Emerald Rapids Xeon (family 6, model 207,
 * AVX-512) reports Prescott (SSE3), and the CPU step runs at a third of its
 * speed. OPENBLAS_CORETYPE, read when the library loads, overrides the
 * choice. The rule, applied first in the commands that train (run, train):
 *
 *   - OPENBLAS_CORETYPE set before vitbench started: kept, whatever it is
 *     (a machine may set it because an older OpenBLAS fails with its own
 *     choice there); the run says in one line when it is narrower than the
 *     CPU ("environment");
 *   - unset, and the library's kernels narrower than the widest the CPU
 *     runs: vitbench starts itself again (execv of /proc/self/exe, same
 *     arguments, before MPI or any thread) with OPENBLAS_CORETYPE set to
 *     those (SkylakeX for AVX-512 F/CD/BW/DQ/VL, Haswell for AVX2 with FMA,
 *     Sandybridge for AVX) and VB_BLAS_LIBRARY_CORE naming what the library
 *     had picked ("vitbench");
 *   - otherwise the library's own choice ("library").
 *
 * run.json's fingerprint records the kernels in use, the library's own
 * choice, the CPU's width and the rule.
 */
#ifndef VB_BLAS_KERNELS_H
#define VB_BLAS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

/* The CPU's vector extensions that decide OpenBLAS's x86-64 kernels (with
 * the operating system's support for their registers). */
typedef struct vb_cpu_features {
    bool avx, avx2, fma, avx512f, avx512cd, avx512bw, avx512dq, avx512vl;
} vb_cpu_features;

void vb_cpu_features_detect(vb_cpu_features *f);
/* "avx512", "avx2", "avx", "sse" or "" (not x86-64): the widest the
 * kernels below can use (AVX-512 counts only with F, CD, BW, DQ and VL) */
const char *vb_cpu_features_vector(const vb_cpu_features *f);

/* The vector width an OpenBLAS core type's kernels use ("" for one this
 * table does not know), and the order of widths: sse < avx < avx2 < avx512
 * (0 for ""). */
const char *vb_blas_core_vector(const char *core);
int vb_vector_rank(const char *vector);

/* The OpenBLAS core type of the widest kernels the CPU runs, when they are
 * wider than library_core's; NULL to keep library_core (it is as wide, or a
 * core type this table does not know, e.g. another architecture's). */
const char *vb_blas_core_wanted(const char *library_core, const vb_cpu_features *f);

typedef enum vb_blas_rule { VB_BLAS_RULE_LIBRARY = 0, VB_BLAS_RULE_VITBENCH, VB_BLAS_RULE_ENVIRONMENT } vb_blas_rule;
const char *vb_blas_rule_name(vb_blas_rule r); /* "library", "vitbench", "environment" */

/* What the rule decides, from the environment's two variables (NULL when
 * unset), the library's core name and the CPU: reexec_core non-NULL means
 * start again with OPENBLAS_CORETYPE = reexec_core. library_core is what
 * OpenBLAS picked by itself, where known. */
typedef struct vb_blas_decision {
    vb_blas_rule rule;
    const char *reexec_core;
    char library_core[64];
} vb_blas_decision;
vb_blas_decision vb_blas_decide(const char *env_coretype, const char *env_library_core, const char *library_core,
                                const vb_cpu_features *f);

/* Applies the rule to this process (argv as main got it): may not return
 * (execv). If the execv fails, the library's kernels stay and one line
 * says so. The decision is kept for vb_blas_choice. */
void vb_blas_choose(char **argv);
/* The rule and the library's own choice for this process ("library" and
 * the core in use when vb_blas_choose did not run) */
const vb_blas_decision *vb_blas_choice(void);

/* One line for a user when the kernels in use (core) are narrower than the
 * CPU (cpu_vector), naming the cause and the fix for the rule that chose
 * them; "" otherwise. rule_name may be "" (a run recorded before rules). */
void vb_blas_advice(char *buf, size_t n, const char *core, const char *cpu_vector, const char *rule_name,
                    const char *library_core);

#endif
