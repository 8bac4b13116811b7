/* test_cupti_records.c: CUPTI activity records, built by hand with the
 * layouts CUPTI 13's headers declare for each kind, read back through
 * vb_cupti_decode (core/prof/cupti_records.h) and into the summaries the tracer
 * feeds. Needs CUPTI's headers only; without them (no CUDA toolkit) it
 * reports itself skipped (exit 77). */
#include <stdio.h>

#ifndef VB_HAVE_CUPTI
int main(void) {
    printf("test_cupti_records: SKIP: CUPTI's headers were not found (the CUDA backend is not built)\n");
    return 77;
}
#else

#include <stdlib.h>
#include <string.h>

#include "tests/test_util.h"
#include "core/prof/cupti_records.h"
#include "core/prof/gpu_summary.h"

static void test_kernel(void **state) {
    (void)state;
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = "_Z21layernorm_forward_kernelv";
    k.streamId = 7;
    k.start = 1000000123;
    k.end = 1000004567;
    k.correlationId = 99; /* neighbours of the fields read, set so a shifted read shows */
    k.gridX = 1234;
    vb_cupti_rec r;
    memset(&r, 0xab, sizeof r);
    assert_int_equal(vb_cupti_decode((const CUpti_Activity *)&k, &r), 1);
    assert_int_equal(r.type, VB_GACT_KERNEL);
    assert_ptr_equal(r.name, k.name);
    assert_int_equal(r.stream, 7);
    assert_true(r.start_ns == 1000000123ull && r.end_ns == 1000004567ull);
    assert_true(r.bytes == 0.0);
    k.kind = CUPTI_ACTIVITY_KIND_KERNEL; /* the serialized kind has the same layout */
    k.name = NULL;
    assert_int_equal(vb_cupti_decode((const CUpti_Activity *)&k, &r), 1);
    assert_string_equal(r.name, "<unnamed kernel>");
}

static void test_memcpy_memset(void **state) {
    (void)state;
    CUpti_ActivityMemcpy6 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m.bytes = 41472000;
    m.start = 5000;
    m.end = 9000;
    m.streamId = 13;
    vb_cupti_rec r;
    assert_int_equal(vb_cupti_decode((const CUpti_Activity *)&m, &r), 1);
    assert_int_equal(r.type, VB_GACT_MEMCPY);
    assert_string_equal(r.name, "[CUDA memcpy Host-to-Device]");
    assert_int_equal(r.stream, 13);
    assert_true(r.bytes == 41472000.0 && r.start_ns == 5000 && r.end_ns == 9000);
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    assert_int_equal(vb_cupti_decode((const CUpti_Activity *)&m, &r), 1);
    assert_string_equal(r.name, "[CUDA memcpy Device-to-Host]");
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    assert_int_equal(vb_cupti_decode((const CUpti_Activity *)&m, &r), 1);
    assert_string_equal(r.name, "[CUDA memcpy Device-to-Device]");

    CUpti_ActivityMemset4 s;
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s.bytes = 4096;
    s.start = 10;
    s.end = 30;
    s.streamId = 2;
    assert_int_equal(vb_cupti_decode((const CUpti_Activity *)&s, &r), 1);
    assert_int_equal(r.type, VB_GACT_MEMSET);
    assert_string_equal(r.name, "[CUDA memset]");
    assert_true(r.bytes == 4096.0 && r.stream == 2 && r.start_ns == 10 && r.end_ns == 30);
}

/* kinds the tracer never enables are skipped, out untouched */
static void test_other_kinds(void **state) {
    (void)state;
    CUpti_Activity a;
    memset(&a, 0, sizeof a);
    vb_cupti_rec r, before;
    memset(&r, 0x5a, sizeof r);
    before = r;
    const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_RUNTIME,
                                        CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_MEMCPY2};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        a.kind = kinds[i];
        assert_int_equal(vb_cupti_decode(&a, &r), 0);
        assert_memory_equal(&r, &before, sizeof r);
    }
}

/* a kernel CUPTI could not time (both times 0) is left out of the summary,
 * as the tracer counts it (untimed), not booked as a 0 ns instance */
static void test_untimed_kernel(void **state) {
    (void)state;
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = "k";
    vb_cupti_rec r;
    assert_int_equal(vb_cupti_decode((const CUpti_Activity *)&k, &r), 1);
    vb_gsum *g = vb_gsum_create();
    assert_non_null(g);
    assert_int_equal(vb_gsum_add(g, r.name, r.start_ns, r.end_ns), 1);
    k.start = 100;
    k.end = 50; /* end before start */
    assert_int_equal(vb_cupti_decode((const CUpti_Activity *)&k, &r), 1);
    assert_int_equal(vb_gsum_add(g, r.name, r.start_ns, r.end_ns), 1);
    k.end = 150;
    assert_int_equal(vb_cupti_decode((const CUpti_Activity *)&k, &r), 1);
    assert_int_equal(vb_gsum_add(g, r.name, r.start_ns, r.end_ns), 0);
    vb_gsum_destroy(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel),
        cmocka_unit_test(test_memcpy_memset),
        cmocka_unit_test(test_other_kinds),
        cmocka_unit_test(test_untimed_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
