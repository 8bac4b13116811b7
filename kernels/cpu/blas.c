/* blas.c: OpenBLAS through dlopen (blas.h). */
#include "kernels/cpu/blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef VB_OPENBLAS_LIBRARY
#error "VB_OPENBLAS_LIBRARY (the OpenBLAS library's path) comes from CMakeLists.txt"
#endif

typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                         float, const float *, blasint, const float *, blasint, float, float *, blasint);
typedef char *(*text_fn)(void);
typedef int (*int_fn)(void);

static struct {
    pthread_once_t once;
    bool ok;
    char why[512];
    sgemm_fn sgemm;
    text_fn config, corename;
    int_fn parallel;
} g_blas = {.once = PTHREAD_ONCE_INIT};

const char *vb_blas_library_path(void) {
    const char *env = getenv(VB_OPENBLAS_LIBRARY_ENV);
    return env && env[0] ? env : VB_OPENBLAS_LIBRARY;
}

static void *need(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) snprintf(g_blas.why, sizeof g_blas.why, "%.400s: no symbol %s", vb_blas_library_path(), name);
    return p;
}

static void load_once(void) {
    const char *path = vb_blas_library_path();
    const bool named = getenv(VB_OPENBLAS_LIBRARY_ENV) && getenv(VB_OPENBLAS_LIBRARY_ENV)[0];
    /* dlopen opens what it is given and reads it: a FIFO there would block
     * it until a writer came, a device read forever. A path names a regular
     * file (a link to one is fine); a bare name is the loader's to find. */
    struct stat st;
    if (strchr(path, '/') && stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(g_blas.why, sizeof g_blas.why, "cannot load OpenBLAS%s%s: %.400s is %s, not a library file",
                 named ? " named by " : "", named ? VB_OPENBLAS_LIBRARY_ENV : "", path,
                 S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)" : S_ISDIR(st.st_mode) ? "a directory"
                 : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISSOCK(st.st_mode) ? "a socket"
                                                                        : "not a regular file");
        return;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(g_blas.why, sizeof g_blas.why, "cannot load OpenBLAS%s%s (%.400s)",
                 named ? " named by " : "", named ? VB_OPENBLAS_LIBRARY_ENV : "", e ? e : path);
        return;
    }
    g_blas.sgemm = (sgemm_fn)need(lib, "cblas_sgemm");
    g_blas.config = (text_fn)need(lib, "openblas_get_config");
    g_blas.corename = (text_fn)need(lib, "openblas_get_corename");
    g_blas.parallel = (int_fn)need(lib, "openblas_get_parallel");
    g_blas.ok = g_blas.sgemm && g_blas.config && g_blas.corename && g_blas.parallel;
}

bool vb_blas_load(char *why, size_t n) {
    pthread_once(&g_blas.once, load_once);
    if (!g_blas.ok && why && n) snprintf(why, n, "%s", g_blas.why);
    return g_blas.ok;
}

static void load_or_exit(void) {
    char why[512];
    if (vb_blas_load(why, sizeof why)) return;
    fflush(stdout);
    fprintf(stderr, "vitbench: error: %s\n", why);
    exit(1);
}

size_t vb_blas_address_space(int threads) {
    struct stat st;
    size_t lib = stat(vb_blas_library_path(), &st) == 0 ? (size_t)st.st_size : (size_t)64 << 20;
    return lib + (size_t)(1 + (threads > 0 ? threads : 1)) * VB_BLAS_BUFFER_BYTES;
}

void vb_blas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                   float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    load_or_exit();
    g_blas.sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char *vb_blas_config(void) {
    load_or_exit();
    return g_blas.config();
}

const char *vb_blas_corename(void) {
    load_or_exit();
    return g_blas.corename();
}

int vb_blas_parallel(void) {
    load_or_exit();
    return g_blas.parallel();
}
