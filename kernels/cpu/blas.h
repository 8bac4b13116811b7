/* blas.h: OpenBLAS, loaded when it is first needed.
 *
 * vitbench does not link OpenBLAS. Its library constructor maps a buffer of
 * VB_BLAS_BUFFER_BYTES and, under an address-space limit (ulimit -v) that
 * does not leave room for it, retries forever -- before main runs, so that
 * every command hung, `vitbench report` included. Loaded with dlopen on first
 * use instead (the OpenMP build found at configure time), it costs the
 * commands that compute (run, train, commbench) what it always did and the
 * analysis commands (report, compare, trace, nsys, model) nothing; and a run
 * can check first that the address space has room for it (core/run/memcheck.h).
 */
#ifndef VB_BLAS_H
#define VB_BLAS_H

#include <stdbool.h>
#include <stddef.h>
#include <cblas.h>

/* OpenBLAS's buffer (BUFFER_SIZE of its x86-64 builds): mapped once when it
 * loads and once per thread that runs a GEMM. */
#define VB_BLAS_BUFFER_BYTES ((size_t)128 << 20)

/* The library dlopen loads: the OpenBLAS found at configure time, or the
 * one the environment names in VB_OPENBLAS_LIBRARY (a path, or a name the
 * dynamic loader finds), e.g. a newer build that knows a newer CPU, without
 * rebuilding vitbench. The environment is the user's, as LD_PRELOAD is. */
#define VB_OPENBLAS_LIBRARY_ENV "VB_OPENBLAS_LIBRARY"
const char *vb_blas_library_path(void);

/* Loads OpenBLAS and resolves what vitbench calls; idempotent and thread
 * safe. false with the reason in why (n bytes) when it cannot be loaded. */
bool vb_blas_load(char *why, size_t n);

/* Address space OpenBLAS takes when loaded and used by `threads` threads:
 * its mapped library, the buffer it maps when it loads and one per thread. */
size_t vb_blas_address_space(int threads);

/* cblas_sgemm, openblas_get_config, openblas_get_corename and
 * openblas_get_parallel through the loaded library; each loads it first when
 * needed, and a library that cannot be loaded ends the process with one line
 * (exit 1: the installation, not the input, is at fault). */
void vb_blas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                   float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
const char *vb_blas_config(void);
const char *vb_blas_corename(void);
int vb_blas_parallel(void);

#endif
