/* alloc_check.h: out of memory in the backends' host allocations, in the
 * harness's words (C and CUDA C++).
 *
 * kernels/ sits below core/util (cmake/layers.cmake), so the backends cannot
 * use core/util's vb_calloc_check; this is its equivalent: the same one line,
 * "vitbench: internal error: out of memory allocating N bytes at file:LINE",
 * naming the caller's line, and exit 1 (memory is the machine's limit, not
 * bad input).
 */
#ifndef VB_ALLOC_CHECK_H
#define VB_ALLOC_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noreturn)) static inline void vb_kernels_die_oom_at(size_t bytes, const char *file, int line) {
    const char *slash = strrchr(file, '/');
    fflush(stdout);
    fprintf(stderr, "vitbench: internal error: out of memory allocating %zu bytes at %s:%d\n", bytes,
            slash ? slash + 1 : file, line);
    exit(1);
}

/* calloc(n, size), never NULL: n * size checked for overflow, 0 elements made
 * as 1. */
#define vb_kernels_calloc_check(n, size) vb_kernels_calloc_check_at((n), (size), __FILE__, __LINE__)
static inline void *vb_kernels_calloc_check_at(size_t n, size_t size, const char *file, int line) {
    if (size && n > SIZE_MAX / size) vb_kernels_die_oom_at(SIZE_MAX, file, line);
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) vb_kernels_die_oom_at(n * size, file, line);
    return p;
}

#endif
