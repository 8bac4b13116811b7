/* test_gpu_summary.c: the nsys-style summaries behind kernels.csv
 * (core/prof/gpu_summary.c): statistics as nsys defines them, row order, CSV
 * format and quoting, and `vitbench nsys` reading the files back. */
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis.h"
#include "analysis/csv.h"
#include "core/prof/gpu_summary.h"

static const char *KERN_HEADER =
    "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n";
static const char *MEM_HEADER =
    "Time (%),Total Time (ns),Count,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Operation\n";

/* adds durations (ns) of `name`, back to back from t */
static uint64_t add_durs(vb_gsum *g, const char *name, uint64_t t, const uint64_t *d, size_t n) {
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(vb_gsum_add(g, name, t, t + d[i]), 0);
        t += d[i] + 10;
    }
    return t;
}

static void test_stats(void **state) {
    (void)state;
    vb_gsum *g = vb_gsum_create();
    assert_non_null(g);
    /* odd count: median is the middle one; sample stddev of 1,2,6 (x1000) */
    const uint64_t a[] = {6000, 1000, 2000};
    /* even count: median is the mean of the middle two */
    const uint64_t b[] = {1000, 4000, 2000, 3000};
    const uint64_t c[] = {500};
    uint64_t t = add_durs(g, "kern_a", 100, a, 3);
    t = add_durs(g, "kern_b", t, b, 4);
    add_durs(g, "kern_c", t, c, 1);
    assert_int_equal(vb_gsum_names(g), 3);
    assert_int_equal(vb_gsum_records(g), 8);

    vb_gsum_row *rows;
    size_t n = vb_gsum_rows(g, &rows);
    assert_int_equal(n, 3);
    /* totals 10000, 9000, 500: largest first */
    assert_string_equal(rows[0].name, "kern_b");
    assert_string_equal(rows[1].name, "kern_a");
    assert_string_equal(rows[2].name, "kern_c");
    const double grand = 19500.0;

    assert_int_equal(rows[0].total_ns, 10000);
    assert_int_equal(rows[0].instances, 4);
    assert_true(fabs(rows[0].avg_ns - 2500.0) < 1e-9);
    assert_true(fabs(rows[0].med_ns - 2500.0) < 1e-9);
    assert_int_equal(rows[0].min_ns, 1000);
    assert_int_equal(rows[0].max_ns, 4000);
    /* sample stddev of 1,2,3,4 thousand: sqrt(5e6 / 3) */
    assert_true(fabs(rows[0].stddev_ns - sqrt(5e6 / 3.0)) < 1e-6);
    assert_true(fabs(rows[0].time_pct - 100.0 * 10000 / grand) < 1e-9);

    assert_int_equal(rows[1].total_ns, 9000);
    assert_true(fabs(rows[1].avg_ns - 3000.0) < 1e-9);
    assert_true(fabs(rows[1].med_ns - 2000.0) < 1e-9);
    assert_int_equal(rows[1].min_ns, 1000);
    assert_int_equal(rows[1].max_ns, 6000);
    /* deviations -2000, -1000, 3000: sum of squares 14e6 over n - 1 = 2 */
    assert_true(fabs(rows[1].stddev_ns - sqrt(7e6)) < 1e-6);

    /* one instance: no spread */
    assert_int_equal(rows[2].instances, 1);
    assert_true(rows[2].stddev_ns == 0.0);
    assert_true(fabs(rows[2].med_ns - 500.0) < 1e-9);
    double pct = rows[0].time_pct + rows[1].time_pct + rows[2].time_pct;
    assert_true(fabs(pct - 100.0) < 1e-9);
    free(rows);
    vb_gsum_destroy(g);
}

static void test_skips_untimed_and_ties(void **state) {
    (void)state;
    vb_gsum *g = vb_gsum_create();
    /* CUPTI leaves 0/0 for an activity it could not time; an end before the start is as bad */
    assert_int_equal(vb_gsum_add(g, "k", 0, 0), 1);
    assert_int_equal(vb_gsum_add(g, "k", 200, 100), 1);
    assert_int_equal(vb_gsum_records(g), 0);
    vb_gsum_row *rows = (vb_gsum_row *)1;
    assert_int_equal(vb_gsum_rows(g, &rows), 0);
    assert_null(rows);
    /* an empty summary is the header alone */
    char *csv = vb_gsum_csv(g, VB_GSUM_KERNELS, NULL);
    assert_string_equal(csv, KERN_HEADER);
    free(csv);
    /* equal totals: by name */
    vb_gsum_add(g, "zeta", 10, 20);
    vb_gsum_add(g, "alpha", 30, 40);
    assert_int_equal(vb_gsum_rows(g, &rows), 2);
    assert_string_equal(rows[0].name, "alpha");
    assert_string_equal(rows[1].name, "zeta");
    free(rows);
    /* reset keeps nothing */
    vb_gsum_reset(g);
    assert_int_equal(vb_gsum_names(g), 0);
    vb_gsum_add(g, "zeta", 10, 30);
    assert_int_equal(vb_gsum_rows(g, &rows), 1);
    assert_int_equal(rows[0].total_ns, 20);
    free(rows);
    vb_gsum_destroy(g);
}

/* many names: the name table grows and every name keeps its own records */
static void test_many_names(void **state) {
    (void)state;
    vb_gsum *g = vb_gsum_create();
    char name[32];
    for (int rep = 0; rep < 3; rep++)
        for (int i = 0; i < 1000; i++) {
            snprintf(name, sizeof name, "kernel_%d", i);
            assert_int_equal(vb_gsum_add(g, name, 1000, 1000 + (uint64_t)(i + 1)), 0);
        }
    assert_int_equal(vb_gsum_names(g), 1000);
    vb_gsum_row *rows;
    assert_int_equal(vb_gsum_rows(g, &rows), 1000);
    assert_string_equal(rows[0].name, "kernel_999");
    assert_int_equal(rows[0].total_ns, 3000);
    assert_int_equal(rows[0].instances, 3);
    assert_string_equal(rows[999].name, "kernel_0");
    assert_int_equal(rows[999].total_ns, 3);
    free(rows);
    vb_gsum_destroy(g);
}

static char *shout(const char *name) {
    if (strcmp(name, "_Z3fooPf") != 0) return NULL;
    return strdup("foo(float*)");
}

static void test_csv_format(void **state) {
    (void)state;
    vb_gsum *g = vb_gsum_create();
    const uint64_t d1[] = {1000000, 2000000, 3000000};
    const uint64_t d2[] = {1000000, 2000000};
    const uint64_t d3[] = {1000000};
    uint64_t t = add_durs(g, "void gemm_kernel<float, 128>(float const*, float*)", 0, d1, 3);
    t = add_durs(g, "say \"hi\"", t, d2, 2);
    add_durs(g, "_Z3fooPf", t, d3, 1);
    char *csv = vb_gsum_csv(g, VB_GSUM_KERNELS, shout);
    assert_non_null(csv);
    const char *want =
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
        "60.0,6000000,3,2000000.0,2000000.0,1000000,3000000,1000000.0,\"void gemm_kernel<float, 128>(float const*, float*)\"\n"
        "30.0,3000000,2,1500000.0,1500000.0,1000000,2000000,707106.8,\"say \"\"hi\"\"\"\n"
        "10.0,1000000,1,1000000.0,1000000.0,1000000,1000000,0.0,foo(float*)\n";
    assert_string_equal(csv, want);
    free(csv);
    vb_gsum_destroy(g);

    g = vb_gsum_create();
    vb_gsum_add(g, "[CUDA memset]", 0, 100);
    csv = vb_gsum_csv(g, VB_GSUM_MEMOPS, NULL);
    assert_true(strncmp(csv, MEM_HEADER, strlen(MEM_HEADER)) == 0);
    assert_string_equal(csv + strlen(MEM_HEADER), "100.0,100,1,100.0,100.0,100,100,0.0,[CUDA memset]\n");
    free(csv);
    vb_gsum_destroy(g);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static const char *cell(const vb_csv *t, const char *name, const char *col) {
    int cn = vb_csv_col(t, "name"), cc = vb_csv_col(t, col);
    for (int r = 0; r < t->nrows; r++)
        if (!strcmp(vb_csv_get(t, r, cn), name)) return vb_csv_get(t, r, cc);
    fail_msg("no row for %s in the imported ops.csv", name);
    return "";
}

static double num(const vb_csv *t, const char *name, const char *col) { return strtod(cell(t, name, col), NULL); }

/* What the tracer writes is what `vitbench nsys` reads as cuda_gpu_kern_sum
 * and cuda_gpu_mem_time_sum: same names, calls, totals and statistics. */
static void test_nsys_reads_it_back(void **state) {
    (void)state;
    char dir[256], kpath[512], mpath[512], out[512], ops[600];
    tu_tmpdir(dir, sizeof dir, "gsum_nsys");
    snprintf(kpath, sizeof kpath, "%s/kernels.csv", dir);
    snprintf(mpath, sizeof mpath, "%s/gpu_mem_time.csv", dir);
    snprintf(out, sizeof out, "%s/imported", dir);

    vb_gsum *k = vb_gsum_create(), *m = vb_gsum_create();
    const uint64_t d1[] = {3000, 1000, 2000};
    const uint64_t d2[] = {500, 1500};
    uint64_t t = add_durs(k, "void gemm<float, 4>(float*, int)", 0, d1, 3);
    add_durs(k, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)", t, d2, 2);
    vb_gsum_add(m, "[CUDA memcpy Host-to-Device]", 0, 4000);
    vb_gsum_add(m, "[CUDA memset]", 5000, 6000);
    char *kt = vb_gsum_csv(k, VB_GSUM_KERNELS, NULL), *mt = vb_gsum_csv(m, VB_GSUM_MEMOPS, NULL);
    write_file(kpath, kt);
    write_file(mpath, mt);
    free(kt);
    free(mt);
    vb_gsum_destroy(k);
    vb_gsum_destroy(m);

    char *argv[] = {"nsys", kpath, mpath, "--output_dir", out, NULL};
    assert_int_equal(vb_nsys_main(5, argv), 0);
    snprintf(ops, sizeof ops, "%s/ops.csv", out);
    vb_csv t2;
    char err[256];
    assert_int_equal(vb_csv_read(ops, &t2, err, sizeof err), 0);
    assert_int_equal(t2.nrows, 4);
    const char *gemm = "void gemm<float, 4>(float*, int)";
    const char *ar = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)";
    assert_string_equal(cell(&t2, gemm, "category"), "compute");
    assert_string_equal(cell(&t2, gemm, "calls"), "3");
    assert_true(fabs(num(&t2, gemm, "total_s") - 6e-6) < 1e-12);
    assert_true(fabs(num(&t2, gemm, "avg_s") - 2e-6) < 1e-12);
    assert_true(fabs(num(&t2, gemm, "median_s") - 2e-6) < 1e-12);
    assert_true(fabs(num(&t2, gemm, "min_s") - 1e-6) < 1e-12);
    assert_true(fabs(num(&t2, gemm, "max_s") - 3e-6) < 1e-12);
    assert_string_equal(cell(&t2, ar, "category"), "comm");
    assert_string_equal(cell(&t2, ar, "calls"), "2");
    assert_true(fabs(num(&t2, ar, "median_s") - 1e-6) < 1e-12);
    assert_string_equal(cell(&t2, "[CUDA memcpy Host-to-Device]", "category"), "memcpy");
    assert_true(fabs(num(&t2, "[CUDA memcpy Host-to-Device]", "total_s") - 4e-6) < 1e-12);
    assert_string_equal(cell(&t2, "[CUDA memset]", "category"), "memcpy");
    vb_csv_free(&t2);
    tu_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_skips_untimed_and_ties),
        cmocka_unit_test(test_many_names),
        cmocka_unit_test(test_csv_format),
        cmocka_unit_test(test_nsys_reads_it_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
