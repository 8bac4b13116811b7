/* test_strtab.c: the string interner (core/util/strtab.c): dense indices in order
 * of first appearance, one copy per string, growth past many slot tables,
 * clear starting the indices again. */
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/strtab.h"

static void test_dense_indices(void **state) {
    (void)state;
    vb_strtab *t = vb_strtab_create();
    assert_non_null(t);
    assert_int_equal(vb_strtab_count(t), 0);
    char buf[32];
    snprintf(buf, sizeof buf, "%s", "gemm");
    assert_int_equal(vb_strtab_intern(t, buf), 0);
    assert_int_equal(vb_strtab_intern(t, ""), 1);
    assert_int_equal(vb_strtab_intern(t, "gemm_"), 2);
    assert_int_equal(vb_strtab_intern(t, "gemm"), 0);
    assert_int_equal(vb_strtab_intern(t, ""), 1);
    assert_int_equal(vb_strtab_count(t), 3);
    /* the table keeps its own copy */
    buf[0] = 'x';
    assert_string_equal(vb_strtab_str(t, 0), "gemm");
    assert_string_equal(vb_strtab_str(t, 1), "");
    assert_string_equal(vb_strtab_str(t, 2), "gemm_");
    vb_strtab_destroy(t);
    vb_strtab_destroy(NULL);
}

/* Far more strings than the first slot table holds: each keeps its index
 * through every growth, and a second pass finds them all. */
static void test_growth(void **state) {
    (void)state;
    enum { N = 20000 };
    vb_strtab *t = vb_strtab_create();
    assert_non_null(t);
    char buf[64];
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof buf, "void kernel_%d<float, %d>(int)", i, i % 7);
        assert_int_equal(vb_strtab_intern(t, buf), i);
    }
    assert_int_equal(vb_strtab_count(t), N);
    for (int i = N - 1; i >= 0; i--) {
        snprintf(buf, sizeof buf, "void kernel_%d<float, %d>(int)", i, i % 7);
        assert_int_equal(vb_strtab_intern(t, buf), i);
        assert_string_equal(vb_strtab_str(t, i), buf);
    }
    assert_int_equal(vb_strtab_count(t), N);
    vb_strtab_destroy(t);
}

/* clear forgets every string: indices start from 0 again, in the new order. */
static void test_clear(void **state) {
    (void)state;
    vb_strtab *t = vb_strtab_create();
    assert_non_null(t);
    char buf[32];
    for (int i = 0; i < 500; i++) {
        snprintf(buf, sizeof buf, "op%d", i);
        assert_int_equal(vb_strtab_intern(t, buf), i);
    }
    vb_strtab_clear(t);
    assert_int_equal(vb_strtab_count(t), 0);
    assert_int_equal(vb_strtab_intern(t, "op499"), 0);
    assert_int_equal(vb_strtab_intern(t, "op0"), 1);
    assert_int_equal(vb_strtab_intern(t, "op499"), 0);
    assert_int_equal(vb_strtab_count(t), 2);
    vb_strtab_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_indices),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_clear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
