/* test_breakdown.c: interval arithmetic and the HTA-style breakdown against
 * hand-computed timelines; timeline.csv reading and its errors. */
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/breakdown.h"
#include "analysis/csv.h"

#define EPS 1e-12

static void test_union_merges_sorts_and_drops_empty(void **state) {
    (void)state;
    vb_interval iv[] = {{3, 5}, {1, 2}, {4, 7}, {2, 2.5}, {8, 8}, {9, 8.5}};
    int n = vb_iv_union(iv, 6);
    assert_int_equal(n, 2);
    /* (1,2) and (2,2.5) touch: one busy stretch */
    assert_true(iv[0].a == 1 && iv[0].b == 2.5);
    assert_true(iv[1].a == 3 && iv[1].b == 7);
    assert_true(fabs(vb_iv_length(iv, n) - 5.5) < EPS);
    vb_interval none[] = {{1, 1}};
    assert_int_equal(vb_iv_union(none, 1), 0);
    assert_int_equal(vb_iv_union(none, 0), 0);
}

static void test_intersect_two_unions(void **state) {
    (void)state;
    vb_interval x[] = {{0, 4}, {6, 10}};
    vb_interval y[] = {{2, 7}, {9, 12}};
    vb_interval out[4];
    int n = vb_iv_intersect(x, 2, y, 2, out);
    assert_int_equal(n, 3);
    assert_true(out[0].a == 2 && out[0].b == 4);
    assert_true(out[1].a == 6 && out[1].b == 7);
    assert_true(out[2].a == 9 && out[2].b == 10);
    assert_true(fabs(vb_iv_length(out, n) - 4) < EPS);
    /* touching is not overlapping */
    vb_interval p[] = {{0, 1}}, q[] = {{1, 2}};
    assert_int_equal(vb_iv_intersect(p, 1, q, 1, out), 0);
    assert_int_equal(vb_iv_intersect(p, 1, q, 0, out), 0);
}

static void add(vb_timeline *t, int rank, const char *lane, const char *kind, const char *name, int step, double a,
                double b) {
    vb_tl_event e = {.rank = rank, .trial_index = 0, .step = step, .bucket = -1, .start_s = a, .dur_s = b - a};
    snprintf(e.lane, sizeof e.lane, "%s", lane);
    snprintf(e.kind, sizeof e.kind, "%s", kind);
    snprintf(e.name, sizeof e.name, "%s", name);
    snprintf(e.trial_type, sizeof e.trial_type, "FULL");
    vb_timeline_add(t, &e);
}

/* rank 0, two steps [0,10] [10,20]:
 *   compute [1,4] [5,9] [11,15]; outside the windows [20,22] (clipped away)
 *   comm lane [3,6] [14,19]; blocking main-lane comm [18,19] (inside the second)
 *   memcpy main [0,1]; io main [9,10]; loader io [0,20] (counts nowhere)
 * comm = 3 + 5 = 8; hidden = [3,4]+[5,6]+[14,15] = 3; exposed 5; overlap 37.5 %
 * busy = [0,10] + [11,19] = 18; idle = 20 - 18 = 2
 * rank 1 has no events; rank 2: step [0,4], compute [1,2] -> idle 3, no comm */
static void test_breakdown_by_hand(void **state) {
    (void)state;
    vb_timeline t = {0};
    add(&t, 0, "main", "trial", "FULL_0", -1, 0, 22);
    add(&t, 0, "main", "step", "step", 0, 0, 10);
    add(&t, 0, "main", "step", "step", 1, 10, 20);
    add(&t, 0, "main", "phase", "forward", 0, 1, 9);
    add(&t, 0, "main", "memcpy", "h2d", 0, 0, 1);
    add(&t, 0, "main", "compute", "matmul", 0, 1, 4);
    add(&t, 0, "main", "compute", "matmul", 0, 5, 9);
    add(&t, 0, "main", "io", "data_wait", 0, 9, 10);
    add(&t, 0, "main", "compute", "matmul", 1, 11, 15);
    add(&t, 0, "main", "comm", "ddp_wait", 1, 18, 19);
    add(&t, 0, "main", "compute", "after", -1, 20, 22);
    add(&t, 0, "main", "marker", "bucket_ready", 0, 4, 4);
    add(&t, 0, "comm", "comm", "allreduce", 0, 3, 6);
    add(&t, 0, "comm", "comm", "allreduce", 1, 14, 19);
    add(&t, 0, "loader0", "io", "read", 0, 0, 20);
    add(&t, 2, "main", "step", "step", 0, 0, 4);
    add(&t, 2, "main", "compute", "matmul", 0, 1, 2);
    assert_int_equal(t.nranks, 3);

    vb_breakdown *b = NULL;
    int n = vb_breakdown_ranks(&t, &b);
    assert_int_equal(n, 3);
    assert_int_equal(b[0].rank, 0);
    assert_int_equal(b[0].steps, 2);
    assert_true(fabs(b[0].step_s - 20) < EPS);
    assert_true(fabs(b[0].compute_s - 11) < EPS);
    assert_true(fabs(b[0].comm_s - 8) < EPS);
    assert_true(fabs(b[0].comm_hidden_s - 3) < EPS);
    assert_true(fabs(b[0].comm_exposed_s - 5) < EPS);
    assert_true(fabs(b[0].memcpy_s - 1) < EPS);
    assert_true(fabs(b[0].data_wait_s - 1) < EPS);
    assert_true(fabs(b[0].idle_s - 2) < EPS);
    assert_true(fabs(b[0].overlap_pct - 37.5) < 1e-9);

    assert_int_equal(b[1].rank, 1);
    assert_int_equal(b[1].steps, 0);
    assert_true(b[1].step_s == 0 && b[1].compute_s == 0 && b[1].idle_s == 0);
    assert_true(isnan(b[1].overlap_pct));

    assert_int_equal(b[2].steps, 1);
    assert_true(fabs(b[2].step_s - 4) < EPS);
    assert_true(fabs(b[2].compute_s - 1) < EPS);
    assert_true(fabs(b[2].idle_s - 3) < EPS);
    assert_true(b[2].comm_s == 0);
    assert_true(isnan(b[2].overlap_pct));
    free(b);
    vb_timeline_free(&t);
}

/* A GPU trace: no step rows, so one window [0,15] per rank.
 *   stream7 compute [0,10]; stream20 nccl [8,14]; stream7 memcpy [14,15]
 *   compute 10, comm 6, hidden 2, exposed 4, memcpy 1, idle 0, overlap 1/3 */
static void test_breakdown_without_steps(void **state) {
    (void)state;
    vb_timeline t = {0};
    add(&t, 0, "stream7", "compute", "gemm", -1, 0, 10);
    add(&t, 0, "stream20", "comm", "ncclKernel", -1, 8, 14);
    add(&t, 0, "stream7", "memcpy", "[CUDA memcpy HtoD]", -1, 14, 15);
    vb_breakdown *b = NULL;
    assert_int_equal(vb_breakdown_ranks(&t, &b), 1);
    assert_int_equal(b[0].steps, 1);
    assert_true(fabs(b[0].step_s - 15) < EPS);
    assert_true(fabs(b[0].compute_s - 10) < EPS);
    assert_true(fabs(b[0].comm_s - 6) < EPS);
    assert_true(fabs(b[0].comm_hidden_s - 2) < EPS);
    assert_true(fabs(b[0].comm_exposed_s - 4) < EPS);
    assert_true(fabs(b[0].memcpy_s - 1) < EPS);
    assert_true(fabs(b[0].idle_s - 0) < EPS);
    assert_true(fabs(b[0].overlap_pct - 100.0 / 3.0) < 1e-9);
    free(b);
    vb_timeline_free(&t);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_timeline_read_columns_by_name(void **state) {
    (void)state;
    char dir[256], path[512], err[512];
    tu_tmpdir(dir, sizeof dir, "breakdown_read");
    snprintf(path, sizeof path, "%s/timeline.csv", dir);
    /* columns reordered, an extra column, a quoted name with a comma */
    write_text(path, "extra,dur_s,start_s,rank,lane,kind,name,trial_type,trial_index,step,bytes,flops,bucket\r\n"
                     "x,0.5,1.25,1,comm,comm,\"allreduce, bucket\",FULL,0,3,4096,0,2\r\n"
                     "y,0,1.5,0,main,marker,bucket_ready,FULL,0,3,0,0,2\r\n");
    vb_timeline t;
    assert_int_equal(vb_timeline_read(path, &t, err, sizeof err), 0);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.nranks, 2);
    assert_int_equal(t.ev[0].rank, 1);
    assert_string_equal(t.ev[0].lane, "comm");
    assert_string_equal(t.ev[0].name, "allreduce, bucket");
    assert_true(t.ev[0].start_s == 1.25 && t.ev[0].dur_s == 0.5 && t.ev[0].bytes == 4096);
    assert_int_equal(t.ev[0].step, 3);
    assert_int_equal(t.ev[0].bucket, 2);
    vb_timeline_free(&t);

    write_text(path, "rank,lane,kind,name,trial_type,trial_index,step,start_s,bytes,flops,bucket\n");
    assert_int_equal(vb_timeline_read(path, &t, err, sizeof err), -2);
    assert_non_null(strstr(err, "dur_s"));
    assert_non_null(strstr(err, path));

    write_text(path, "rank,lane,kind,name,trial_type,trial_index,step,start_s,dur_s,bytes,flops,bucket\n"
                     "0,main,step,step,FULL,0,0,0,1,0,0,-1\n"
                     "0,main,compute,mm,FULL,0,0,abc,1,0,0,-1\n");
    assert_int_equal(vb_timeline_read(path, &t, err, sizeof err), -2);
    assert_non_null(strstr(err, "record 3"));
    assert_non_null(strstr(err, "start_s"));

    write_text(path, "rank,lane,kind,name,trial_type,trial_index,step,start_s,dur_s,bytes,flops,bucket\n"
                     "0.5,main,step,step,FULL,0,0,0,1,0,0,-1\n");
    assert_int_equal(vb_timeline_read(path, &t, err, sizeof err), -2);
    assert_non_null(strstr(err, "rank"));

    write_text(path, "rank,lane,kind,name,trial_type,trial_index,step,start_s,dur_s,bytes,flops,bucket\n"
                     "0,main,step,step,FULL,0,0,0,-1,0,0,-1\n");
    assert_int_equal(vb_timeline_read(path, &t, err, sizeof err), -2);
    assert_non_null(strstr(err, "dur_s"));

    /* header only: an empty timeline, not an error */
    write_text(path, "rank,lane,kind,name,trial_type,trial_index,step,start_s,dur_s,bytes,flops,bucket\n");
    assert_int_equal(vb_timeline_read(path, &t, err, sizeof err), 0);
    assert_int_equal(t.n, 0);
    assert_int_equal(t.nranks, 0);
    vb_breakdown *b = NULL;
    assert_int_equal(vb_breakdown_ranks(&t, &b), 0);
    vb_timeline_free(&t);

    snprintf(path, sizeof path, "%s/missing.csv", dir);
    assert_int_equal(vb_timeline_read(path, &t, err, sizeof err), -1);
    tu_rm_rf(dir);
}

static void test_breakdown_csv(void **state) {
    (void)state;
    char dir[256], path[512], err[256];
    tu_tmpdir(dir, sizeof dir, "breakdown_csv");
    snprintf(path, sizeof path, "%s/breakdown.csv", dir);
    vb_breakdown b[2] = {
        {.rank = 0, .steps = 2, .step_s = 20, .compute_s = 11, .comm_s = 8, .comm_hidden_s = 3, .comm_exposed_s = 5,
         .memcpy_s = 1, .data_wait_s = 1, .idle_s = 2, .overlap_pct = 37.5},
        {.rank = 1, .overlap_pct = NAN},
    };
    vb_outdir out;
    assert_int_equal(vb_outdir_open(&out, dir, "", err, sizeof err), 0);
    assert_int_equal(vb_breakdown_write_csv(&out, b, 2, err, sizeof err), 0);
    vb_outdir_close(&out);
    vb_csv t;
    assert_int_equal(vb_csv_read(path, &t, err, sizeof err), 0);
    assert_int_equal(t.nrows, 2);
    assert_int_equal(t.ncols, 11);
    assert_string_equal(vb_csv_get(&t, 0, vb_csv_col(&t, "comm_exposed_s")), "5");
    assert_string_equal(vb_csv_get(&t, 0, vb_csv_col(&t, "overlap_pct")), "37.5");
    assert_string_equal(vb_csv_get(&t, 1, vb_csv_col(&t, "overlap_pct")), "");
    vb_csv_free(&t);
    tu_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_union_merges_sorts_and_drops_empty),
        cmocka_unit_test(test_intersect_two_unions),
        cmocka_unit_test(test_breakdown_by_hand),
        cmocka_unit_test(test_breakdown_without_steps),
        cmocka_unit_test(test_timeline_read_columns_by_name),
        cmocka_unit_test(test_breakdown_csv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
