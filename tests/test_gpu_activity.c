/* test_gpu_activity.c: GPU activities kept for timeline.csv's stream<N>
 * lanes (core/prof/gpu_activity.c): clock conversion to the nanosecond, the
 * kinds `vitbench nsys` gives the same rows, names demangled once, the
 * list's bound, and untimed records skipped. */
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/prof/gpu_activity.h"
#include "core/prof/timeline.h"

/* CUPTI's clock on Linux counts from the epoch: 2025-11-23 in ns */
static const uint64_t CUPTI_BASE = 1763900000000000000ull;
/* vb_now() at CUPTI_BASE: 1000 s, the recorder's origin */
static const int64_t OFFSET = 1000000000000ll - 1763900000000000000ll;

static int g_display_calls;

/* a stand-in demangler: "_Z<n><name>v" -> "<name>()", others kept */
static char *fake_demangle(const char *name) {
    g_display_calls++;
    if (strncmp(name, "_Z", 2) != 0) return NULL;
    const char *p = name + 2;
    char *end;
    long n = strtol(p, &end, 10);
    if (n <= 0 || (long)strlen(end) < n) return NULL;
    char *out = malloc((size_t)n + 3);
    memcpy(out, end, (size_t)n);
    memcpy(out + n, "()", 3);
    return out;
}

/* a recorder whose window holds FULL_0 steps 0 and 1 at [1001, 1002) and [1002, 1003) */
static vb_tlrec *two_steps(void) {
    vb_tlrec *t = vb_tlrec_create(2, 0, 8);
    vb_tlrec_set_origin(t, 1000.0);
    for (int k = 0; k < 2; k++) {
        assert_true(vb_tlrec_begin_step(t, "FULL", 0, k));
        vb_tlrec_add(t, VB_TL_MAIN, VB_TLK_STEP, "step", 1001.0 + k, 1.0, 0, 0, -1);
        vb_tlrec_end_step(t);
    }
    return t;
}

static uint64_t at(double host_s, uint64_t extra_ns) {
    return CUPTI_BASE + (uint64_t)((host_s - 1000.0) * 1e9 + 0.5) + extra_ns;
}

static void test_kinds_times_and_names(void **state) {
    (void)state;
    vb_gacts *a = vb_gacts_create(100);
    assert_non_null(a);
    vb_tlrec *t = two_steps();
    g_display_calls = 0;
    /* the same kernel twice (one demangling), NCCL's kernel mangled and
     * demangled, a copy with its bytes, a memset; one before the window */
    assert_int_equal(vb_gacts_add(a, VB_GACT_KERNEL, "_Z4gemmv", 7, at(1001, 123), at(1001, 2123), 0), 0);
    assert_int_equal(vb_gacts_add(a, VB_GACT_KERNEL, "_Z4gemmv", 7, at(1002, 5), at(1002, 1005), 0), 0);
    assert_int_equal(vb_gacts_add(a, VB_GACT_KERNEL, "_Z23ncclDevKernel_AllReducev", 13, at(1001.5, 0),
                                  at(1001.75, 0), 0), 0);
    assert_int_equal(vb_gacts_add(a, VB_GACT_KERNEL, "void ncclKernel_x<1>(int)", 14, at(1002.5, 0),
                                  at(1002.5, 10), 0), 0);
    assert_int_equal(vb_gacts_add(a, VB_GACT_MEMCPY, "[CUDA memcpy Host-to-Device]", 3, at(1001.25, 0),
                                  at(1001.25, 4000), 8192), 0);
    assert_int_equal(vb_gacts_add(a, VB_GACT_MEMSET, "[CUDA memset]", 7, at(1002.25, 0), at(1002.25, 100), 64), 0);
    assert_int_equal(vb_gacts_add(a, VB_GACT_KERNEL, "_Z4gemmv", 7, at(1000.5, 0), at(1000.5, 1), 0), 0);
    assert_int_equal(vb_gacts_count(a), 7);

    long dropped = -1;
    assert_int_equal(vb_gacts_to_timeline(a, t, OFFSET, fake_demangle, &dropped), 6);
    assert_int_equal(dropped, 0);
    assert_int_equal(vb_gacts_count(a), 0);
    /* one call per distinct kernel name; copies' names are not demangled */
    assert_int_equal(g_display_calls, 3);

    char *rows = vb_tlrec_csv_rows(t, 0);
    assert_non_null(strstr(rows, "0,stream7,compute,gemm(),FULL,0,0,1.000000123,0.000002000,0,0,-1\n"));
    assert_non_null(strstr(rows, "0,stream7,compute,gemm(),FULL,0,1,2.000000005,0.000001000,0,0,-1\n"));
    assert_non_null(strstr(rows, "0,stream7,memcpy,[CUDA memset],FULL,0,1,2.250000000,0.000000100,64,0,-1\n"));
    assert_non_null(strstr(rows, "0,stream13,comm,ncclDevKernel_AllReduce(),FULL,0,0,1.500000000,0.250000000,"));
    assert_non_null(strstr(rows, "0,stream14,comm,void ncclKernel_x<1>(int),FULL,0,1,2.500000000,0.000000010,"));
    assert_non_null(
        strstr(rows, "0,stream3,memcpy,[CUDA memcpy Host-to-Device],FULL,0,0,1.250000000,0.000004000,8192,"));
    assert_null(strstr(rows, ",0.500000000,")); /* the one before the window */
    free(rows);

    /* the names outlive the move: a second batch reuses them, demangled already */
    assert_int_equal(vb_gacts_add(a, VB_GACT_KERNEL, "_Z4gemmv", 7, at(1001.5, 0), at(1001.5, 1), 0), 0);
    assert_int_equal(vb_gacts_to_timeline(a, t, OFFSET, fake_demangle, NULL), 1);
    assert_int_equal(g_display_calls, 3);
    vb_tlrec_destroy(t);
    vb_gacts_destroy(a);
}

/* Untimed records are skipped; past its bound the list drops, and what the
 * timeline has no room for comes back as dropped. */
static void test_bounds(void **state) {
    (void)state;
    vb_gacts *a = vb_gacts_create(40);
    assert_int_equal(vb_gacts_add(a, VB_GACT_KERNEL, "k", 1, 0, 0, 0), 1);
    assert_int_equal(vb_gacts_add(a, VB_GACT_KERNEL, "k", 1, at(1001, 10), at(1001, 5), 0), 1);
    assert_int_equal(vb_gacts_count(a), 0);
    for (int i = 0; i < 40; i++)
        assert_int_equal(vb_gacts_add(a, VB_GACT_KERNEL, "k", 1, at(1001, i), at(1001, i + 1), 0), 0);
    assert_int_equal(vb_gacts_add(a, VB_GACT_KERNEL, "k", 1, at(1001, 50), at(1001, 51), 0), -1);
    assert_int_equal(vb_gacts_count(a), 40);
    vb_tlrec *t = two_steps(); /* a stream lane holds 2 x 8 x 2 = 32 */
    long dropped = 0;
    assert_int_equal(vb_gacts_to_timeline(a, t, OFFSET, NULL, &dropped), 32);
    assert_int_equal(dropped, 8);
    assert_int_equal(vb_tlrec_dropped(t), 8);
    vb_tlrec_destroy(t);
    vb_gacts_destroy(a);
}

/* Many distinct names (the table grows): each record keeps its own. */
static void test_many_names(void **state) {
    (void)state;
    vb_gacts *a = vb_gacts_create(1000);
    vb_tlrec *t = vb_tlrec_create(1, 0, 300);
    vb_tlrec_set_origin(t, 1000.0);
    assert_true(vb_tlrec_begin_step(t, "FULL", 0, 0));
    vb_tlrec_add(t, VB_TL_MAIN, VB_TLK_STEP, "step", 1001.0, 1.0, 0, 0, -1);
    vb_tlrec_end_step(t);
    char name[32];
    for (int i = 0; i < 500; i++) {
        snprintf(name, sizeof name, "kernel_%d", i);
        assert_int_equal(vb_gacts_add(a, VB_GACT_KERNEL, name, 1, at(1001, 1000 * (uint64_t)i),
                                      at(1001, 1000 * (uint64_t)i + 1), 0), 0);
    }
    assert_int_equal(vb_gacts_to_timeline(a, t, OFFSET, NULL, NULL), 500);
    char *rows = vb_tlrec_csv_rows(t, 0);
    /* kernel_i started at 1 + i us: its row carries its own name */
    for (int i = 0; i < 500; i += 37) {
        char want[96];
        snprintf(want, sizeof want, "0,stream1,compute,kernel_%d,FULL,0,0,%.9f,", i, 1.0 + 1e-6 * i);
        assert_non_null(strstr(rows, want));
    }
    free(rows);
    vb_tlrec_destroy(t);
    vb_gacts_destroy(a);
}

static void test_nccl_names(void **state) {
    (void)state;
    assert_true(vb_gpu_name_is_nccl("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
    assert_true(vb_gpu_name_is_nccl("void ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)"));
    assert_true(vb_gpu_name_is_nccl("NCCLkernel"));
    assert_true(vb_gpu_name_is_nccl("_Z29ncclDevKernel_AllReduce_Sumv")); /* mangled, no demangler at hand */
    assert_false(vb_gpu_name_is_nccl("_Z4gemmPKfPf"));
    assert_false(vb_gpu_name_is_nccl("_Zncclish"));
    assert_false(vb_gpu_name_is_nccl("void gemm_nccl_like(int)"));
    assert_false(vb_gpu_name_is_nccl("ncc"));
    assert_false(vb_gpu_name_is_nccl(""));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_times_and_names),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_many_names),
        cmocka_unit_test(test_nccl_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
