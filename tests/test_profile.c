/* test_profile.c: the op registry, per-op statistics and ops.csv. */
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/profile.h"
#include "core/timeline.h"

static void test_registry_ids_stable(void **state) {
    (void)state;
    int a = vb_prof_op("tp_op_a", VB_CAT_COMPUTE);
    int b = vb_prof_op("tp_op_b", VB_CAT_COMM);
    assert_true(a >= 0);
    assert_true(b >= 0);
    assert_int_not_equal(a, b);
    /* same name, same id, whatever category a later caller claims */
    assert_int_equal(vb_prof_op("tp_op_a", VB_CAT_COMPUTE), a);
    assert_int_equal(vb_prof_op("tp_op_b", VB_CAT_COMM), b);
    /* the per-call-site cache returns the registry's id */
    vb_profiler *p = vb_prof_create();
    assert_int_equal(VB_OP_ID(p, "tp_op_a", VB_CAT_COMPUTE), a);
    vb_prof_destroy(p);
    assert_string_equal(vb_cat_name(VB_CAT_COMPUTE), "compute");
    assert_string_equal(vb_cat_name(VB_CAT_COMM), "comm");
    assert_string_equal(vb_cat_name(VB_CAT_MEMCPY), "memcpy");
    assert_string_equal(vb_cat_name(VB_CAT_IO), "io");
}

/* Finds the ops.csv row for `name` and parses it. Returns 1 if found. */
typedef struct {
    int rank;
    char category[16];
    long calls;
    double bytes, flops, total, avg, min, max, median, share;
} csv_row;

/* The row of op `name` (first match) in ops.csv text:
 * rank,trial_type,name,category,calls,bytes,flops,total_s,avg_s,min_s,max_s,median_s,share_of_step,... */
static int find_row(const char *csv, const char *name, csv_row *r) {
    char needle[128];
    snprintf(needle, sizeof needle, ",%s,", name);
    const char *line = csv;
    while (line && *line) {
        const char *hit = strstr(line, needle);
        const char *eol = strchr(line, '\n');
        if (hit && (!eol || hit < eol)) {
            memset(r, 0, sizeof *r);
            if (sscanf(line, "%d,", &r->rank) != 1) return 0;
            int k = sscanf(hit + strlen(needle), "%15[^,],%ld,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf", r->category, &r->calls,
                           &r->bytes, &r->flops, &r->total, &r->avg, &r->min, &r->max, &r->median, &r->share);
            return k == 10;
        }
        line = eol ? eol + 1 : NULL;
    }
    return 0;
}

static void test_stats_and_csv(void **state) {
    (void)state;
    vb_profiler *p = vb_prof_create();
    vb_prof_set_enabled(p, true);
    int id = vb_prof_op("tp_matmul", VB_CAT_COMPUTE);
    int cid = vb_prof_op("tp_allreduce", VB_CAT_COMM);
    /* crafted starts: durations ~ 0.1, 0.5, 0.2, 0.4 s (plus microseconds);
     * median of four = (0.2 + 0.4) / 2 */
    const double d[4] = {0.1, 0.5, 0.2, 0.4};
    for (int i = 0; i < 4; i++) vb_prof_end(p, id, vb_now() - d[i], 1000);
    /* more calls than the initial sample capacity so the array must grow */
    for (int i = 0; i < 200; i++) vb_prof_end(p, cid, vb_now() - 0.001, 8);
    vb_prof_add_step_time(p, 2.4);

    char dir[256], path[512];
    tu_tmpdir(dir, sizeof dir, "profile");
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    assert_int_equal(vb_prof_write_csv(p, path, 3), 0);
    char *csv = tu_read_file(path);
    assert_non_null(csv);
    static const char header[] = "rank,trial_type,name,category,calls,bytes,flops,total_s,avg_s,min_s,max_s,"
                                 "median_s,share_of_step,gflop_per_s,gb_per_s\n";
    assert_true(strncmp(csv, header, strlen(header)) == 0);

    csv_row r;
    assert_true(find_row(csv, "tp_matmul", &r));
    assert_int_equal(r.rank, 3);
    assert_string_equal(r.category, "compute");
    assert_int_equal(r.calls, 4);
    assert_true(fabs(r.bytes - 4000) < 0.5);
    const double tol = 2e-3; /* clock reads between vb_now() calls */
    assert_true(fabs(r.total - 1.2) < 4 * tol);
    assert_true(fabs(r.avg - 0.3) < tol);
    assert_true(fabs(r.min - 0.1) < tol);
    assert_true(fabs(r.max - 0.5) < tol);
    assert_true(fabs(r.median - 0.3) < tol);
    assert_true(fabs(r.share - 0.5) < 0.01); /* 1.2 s of a 2.4 s step */

    assert_true(find_row(csv, "tp_allreduce", &r));
    assert_string_equal(r.category, "comm");
    assert_int_equal(r.calls, 200);
    assert_true(fabs(r.bytes - 1600) < 0.5);
    assert_true(fabs(r.median - 0.001) < tol);
    free(csv);

    /* reset drops the samples; ops with no calls are not written */
    vb_prof_reset(p);
    vb_prof_end(p, cid, vb_now() - 0.25, 0);
    assert_int_equal(vb_prof_write_csv(p, path, 0), 0);
    csv = tu_read_file(path);
    assert_false(find_row(csv, "tp_matmul", &r));
    assert_true(find_row(csv, "tp_allreduce", &r));
    assert_int_equal(r.calls, 1);
    assert_true(fabs(r.median - 0.25) < tol);
    assert_true(fabs(r.share) < 1e-12); /* no step time after the reset */
    free(csv);

    /* no temporary files left next to it */
    char out[4096];
    assert_int_equal(tu_run(out, sizeof out, "ls -A '%s'", dir), 0);
    assert_string_equal(out, "ops.csv\n");
    vb_prof_destroy(p);
    tu_rm_rf(dir);
}

static void test_disabled_records_nothing(void **state) {
    (void)state;
    vb_profiler *p = vb_prof_create();
    int id = vb_prof_op("tp_disabled_op", VB_CAT_IO);
    /* a fresh profiler is disabled */
    double t0 = vb_prof_begin(p, id);
    vb_prof_end(p, id, t0, 123);
    vb_prof_add_step_time(p, 1.0);
    vb_prof_set_enabled(p, true);
    vb_prof_set_enabled(p, false);
    vb_prof_end(p, id, vb_now() - 1.0, 123);

    char dir[256], path[512];
    tu_tmpdir(dir, sizeof dir, "profile_off");
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    assert_int_equal(vb_prof_write_csv(p, path, 0), 0);
    assert_int_equal(tu_count_lines(path), 1); /* header only */
    vb_prof_destroy(p);

    /* NULL profiler: every call is a no-op */
    double t = vb_prof_begin(NULL, id);
    vb_prof_end(NULL, id, t, 1);
    vb_prof_add_step_time(NULL, 1.0);
    vb_prof_set_enabled(NULL, true);
    vb_prof_reset(NULL);
    tu_rm_rf(dir);
}

/* The rows rank 0 gathers: no header, the given rank in every row, and two
 * ranks' rows concatenated under one header read back as both ranks' rows. */
static void test_rows_for_gather(void **state) {
    (void)state;
    vb_profiler *p = vb_prof_create();
    vb_prof_set_enabled(p, true);
    int id = vb_prof_op("tp_rows_op", VB_CAT_COMPUTE);
    vb_prof_end(p, id, vb_now() - 0.01, 16);
    vb_prof_add_step_time(p, 0.02);

    char *r0 = vb_prof_csv_rows(p, 0);
    char *r1 = vb_prof_csv_rows(p, 1);
    assert_non_null(r0);
    assert_non_null(r1);
    assert_null(strstr(r0, "rank,trial_type"));
    csv_row r;
    assert_true(find_row(r1, "tp_rows_op", &r));
    assert_int_equal(r.rank, 1);
    assert_int_equal(r.calls, 1);

    char dir[256], path[512];
    tu_tmpdir(dir, sizeof dir, "profile_rows");
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    size_t n0 = strlen(r0), n1 = strlen(r1);
    char *both = malloc(n0 + n1 + 1);
    assert_non_null(both);
    memcpy(both, r0, n0);
    memcpy(both + n0, r1, n1 + 1);
    assert_int_equal(vb_prof_write_csv_rows(path, both), 0);
    char *csv = tu_read_file(path);
    assert_non_null(csv);
    assert_true(strncmp(csv, "rank,trial_type,name,", 21) == 0);
    assert_true(find_row(csv, "tp_rows_op", &r));
    assert_int_equal(r.rank, 0); /* rank order: rank 0's row first */
    const char *second = strchr(strchr(csv, '\n') + 1, '\n') + 1;
    assert_true(find_row(second, "tp_rows_op", &r));
    assert_int_equal(r.rank, 1);
    assert_int_equal(tu_count_lines(path), 3);
    /* the same rows as vb_prof_write_csv writes for one rank, after its header */
    assert_int_equal(vb_prof_write_csv(p, path, 0), 0);
    char *single = tu_read_file(path);
    assert_non_null(single);
    assert_string_equal(strchr(single, '\n') + 1, r0);
    free(single);
    free(csv);
    free(both);
    free(r0);
    free(r1);

    /* no profiler or no samples: no rows, an empty string to gather */
    char *none = vb_prof_csv_rows(NULL, 0);
    assert_string_equal(none, "");
    free(none);
    vb_prof_reset(p);
    none = vb_prof_csv_rows(p, 0);
    assert_string_equal(none, "");
    free(none);
    vb_prof_destroy(p);
    tu_rm_rf(dir);
}

/* SYNTHETIC and FULL samples are kept apart (one row each), FLOPs give
 * gflop_per_s, and ops without reported work leave the rate empty. */
static void test_trial_types_and_flops(void **state) {
    (void)state;
    vb_profiler *p = vb_prof_create();
    vb_prof_set_enabled(p, true);
    int id = vb_prof_op("tp_typed_gemm", VB_CAT_COMPUTE);
    vb_prof_set_trial_type(p, "SYNTHETIC");
    vb_prof_end_flops(p, id, vb_now() - 0.5, 100, 2e9);
    vb_prof_add_step_time(p, 1.0);
    vb_prof_set_trial_type(p, "FULL");
    vb_prof_end_flops(p, id, vb_now() - 0.25, 100, 1e9);
    vb_prof_end_flops(p, id, vb_now() - 0.25, 100, 1e9);
    vb_prof_add_step_time(p, 1.0);
    char *rows = vb_prof_csv_rows(p, 0);
    const char *syn = strstr(rows, "0,SYNTHETIC,tp_typed_gemm,");
    const char *full = strstr(rows, "0,FULL,tp_typed_gemm,");
    assert_non_null(syn);
    assert_non_null(full);
    csv_row r;
    assert_true(find_row(syn, "tp_typed_gemm", &r));
    assert_int_equal(r.calls, 1);
    assert_true(fabs(r.flops - 2e9) < 1);
    assert_true(find_row(full, "tp_typed_gemm", &r));
    assert_int_equal(r.calls, 2);
    assert_true(fabs(r.flops - 2e9) < 1);
    assert_true(fabs(r.share - 0.5) < 0.01);
    /* gflop_per_s = 2e9 FLOPs / 0.5 s = 4 (the second-to-last field) */
    const char *eol = strchr(full, '\n');
    const char *q = eol;
    int commas = 0;
    while (q > full && commas < 2) commas += *--q == ',';
    assert_true(fabs(strtod(q + 1, NULL) - 4.0) < 0.05);
    free(rows);
    /* an op reporting no FLOPs: its rate is left empty, not 0 */
    vb_profiler *p2 = vb_prof_create();
    vb_prof_set_enabled(p2, true);
    vb_prof_end(p2, vb_prof_op("tp_untyped_op", VB_CAT_COMPUTE), vb_now() - 0.1, 0);
    char *r2 = vb_prof_csv_rows(p2, 0);
    assert_non_null(strstr(r2, ",,\n"));
    free(r2);
    vb_prof_destroy(p2);
    vb_prof_destroy(p);
}

/* The timeline records only inside its window, on every lane, with a bounded
 * buffer whose overflow is counted, and profiled ops become main-lane rows
 * even while the profiler itself is disabled (ranks that do not profile). */
static void test_timeline_window(void **state) {
    (void)state;
    vb_tlrec *t = vb_tlrec_create(2, 1, 4);
    assert_non_null(t);
    double origin = vb_now();
    vb_tlrec_set_origin(t, origin);
    vb_profiler *p = vb_prof_create(); /* disabled */
    vb_prof_set_timeline(p, t);
    int id = vb_prof_op("tp_tl_op", VB_CAT_COMPUTE);
    vb_prof_end(p, id, vb_prof_begin(p, id), 8); /* outside the window: nothing */
    assert_int_equal(vb_tlrec_events(t), 0);
    for (int step = 0; step < 3; step++) {
        bool open = vb_tlrec_begin_step(t, "FULL", 0, step);
        assert_true(open == (step < 2)); /* two steps, then the window is closed */
        double t0 = vb_prof_begin(p, id);
        vb_prof_end(p, id, t0, 8);
        vb_tlrec_add(t, VB_TL_COMM, VB_TLK_MARKER, "bucket_ready", vb_now(), 0, 0, 0, 3);
        vb_tlrec_add(t, VB_TL_LOADER0, VB_TLK_IO, "read_batch", vb_now(), 0.001, 64, 0, -1);
        vb_tlrec_add(t, VB_TL_MAIN, VB_TLK_STEP, "step", t0, vb_now() - t0, 0, 0, -1);
        vb_tlrec_end_step(t);
    }
    assert_int_equal(vb_tlrec_steps_done(t), 2);
    assert_int_equal(vb_tlrec_events(t), 8);
    /* overflow: the main lane holds 2 x 4 + 16 events; the rest is counted */
    vb_tlrec *small = vb_tlrec_create(1, 0, 1);
    assert_true(vb_tlrec_begin_step(small, "FULL", 0, 0));
    for (int i = 0; i < 30; i++) vb_tlrec_add(small, VB_TL_MAIN, VB_TLK_COMPUTE, "x", vb_now(), 0, 0, 0, -1);
    assert_int_equal(vb_tlrec_events(small), 17);
    assert_int_equal(vb_tlrec_dropped(small), 13);
    vb_tlrec_destroy(small);

    char *rows = vb_tlrec_csv_rows(t, 5);
    assert_non_null(strstr(rows, "5,main,compute,tp_tl_op,FULL,0,0,"));
    assert_non_null(strstr(rows, "5,comm,marker,bucket_ready,FULL,0,1,"));
    assert_non_null(strstr(rows, "5,loader0,io,read_batch,FULL,0,0,"));
    assert_non_null(strstr(rows, "5,main,step,step,FULL,0,1,"));
    /* within a lane, rows are in start order and starts are relative to the origin */
    double prev = -1;
    for (const char *line = rows; *line;) {
        if (strncmp(line, "5,main,", 7) == 0) {
            const char *f = line;
            for (int c = 0; c < 7; c++) f = strchr(f, ',') + 1;
            double start = strtod(f, NULL);
            assert_true(start >= prev);
            assert_true(start >= 0 && start < 60);
            prev = start;
        }
        const char *eol = strchr(line, '\n');
        line = eol ? eol + 1 : line + strlen(line);
    }
    free(rows);
    vb_prof_destroy(p);
    vb_tlrec_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trial_types_and_flops),
        cmocka_unit_test(test_timeline_window),
        cmocka_unit_test(test_registry_ids_stable),
        cmocka_unit_test(test_stats_and_csv),
        cmocka_unit_test(test_disabled_records_nothing),
        cmocka_unit_test(test_rows_for_gather),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
