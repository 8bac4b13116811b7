/* test_alloc_check.c: the checked allocation idiom (core/util/common.h's
 * vb_*_check and the backends' kernels/alloc_check.h): what each returns, and
 * that out of memory is one line naming the size and the caller's file and
 * line, with exit 1. */
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util/common.h"
#include "kernels/alloc_check.h"

#if defined(__SANITIZE_ADDRESS__)
#define VB_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VB_TEST_ASAN 1
#endif
#endif

static void test_results(void **state) {
    (void)state;
    unsigned char *z = vb_calloc_check(100, 3);
    for (int i = 0; i < 300; i++) assert_int_equal(z[i], 0);
    free(z);
    /* 0 elements or bytes: a pointer all the same (a calloc for 0 elements
     * holds one) */
    double *one = vb_calloc_check(0, sizeof *one);
    assert_non_null(one);
    assert_true(one[0] == 0.0);
    free(one);
    void *m = vb_malloc_check(0);
    assert_non_null(m);
    free(m);
    int *v = vb_malloc_check(4 * sizeof *v);
    for (int i = 0; i < 4; i++) v[i] = i + 1;
    v = vb_realloc_check(v, 1000 * sizeof *v);
    for (int i = 0; i < 4; i++) assert_int_equal(v[i], i + 1);
    v = vb_realloc_check(v, 0);
    assert_non_null(v);
    free(v);
    char *s = vb_strdup_check("ViT");
    assert_string_equal(s, "ViT");
    free(s);
    s = vb_strdup_check(NULL);
    assert_string_equal(s, "");
    free(s);
    char *k = vb_kernels_calloc_check(7, 9);
    for (int i = 0; i < 63; i++) assert_int_equal(k[i], 0);
    free(k);
}

/* Runs what in a child with stderr to a pipe; its exit status, its stderr in
 * err. */
static int child(void (*what)(void), char *err, size_t n) {
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        what();
        _exit(0);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < n && (r = read(fd[0], err + got, n - 1 - got)) > 0) got += (size_t)r;
    err[got] = '\0';
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* each call's line, for the message to name */
static const int k_calloc_line = __LINE__ + 2;
static void calloc_overflow(void) {
    void *p = vb_calloc_check(SIZE_MAX / 2, 4);
    free(p);
}
static const int k_kernels_line = __LINE__ + 2;
static void kernels_calloc_overflow(void) {
    void *p = vb_kernels_calloc_check(SIZE_MAX / 2, 4);
    free(p);
}
static const int k_malloc_line = __LINE__ + 2;
static void malloc_huge(void) {
    void *p = vb_malloc_check(SIZE_MAX - 4096);
    free(p);
}

/* err is exactly one line and holds want */
static void one_line_with(const char *err, const char *want) {
    assert_non_null(strstr(err, want));
    assert_non_null(strchr(err, '\n'));
    assert_int_equal(strchr(err, '\n') - err, (long)strlen(err) - 1);
}

static void test_out_of_memory_names_size_and_line(void **state) {
    (void)state;
    char err[1024], want[256];
    assert_int_equal(child(calloc_overflow, err, sizeof err), 1);
    snprintf(want, sizeof want,
             "vitbench: internal error: out of memory allocating %zu x 4 bytes (more than the address space) at "
             "test_alloc_check.c:%d\n",
             SIZE_MAX / 2, k_calloc_line);
    one_line_with(err, want);

    assert_int_equal(child(kernels_calloc_overflow, err, sizeof err), 1);
    snprintf(want, sizeof want, "vitbench: internal error: out of memory allocating %zu bytes at test_alloc_check.c:%d\n",
             SIZE_MAX, k_kernels_line);
    one_line_with(err, want);

#ifndef VB_TEST_ASAN /* AddressSanitizer stops a request this size itself */
    assert_int_equal(child(malloc_huge, err, sizeof err), 1);
    snprintf(want, sizeof want, "vitbench: internal error: out of memory allocating %zu bytes at test_alloc_check.c:%d\n",
             SIZE_MAX - 4096, k_malloc_line);
    one_line_with(err, want);
#else
    (void)malloc_huge;
    (void)k_malloc_line;
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results),
        cmocka_unit_test(test_out_of_memory_names_size_and_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
