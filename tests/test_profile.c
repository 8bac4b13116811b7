/* test_profile.c: the op registry, tokens and their resolution at a flush,
 * per-op statistics, ops.csv and the timeline. */
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"
#include "core/prof/profile.h"
#include "kernels/ops.h"
#include "core/prof/timeline.h"

/* ---- a scripted clock: stamps read g_fake_now, which the test sets ----
 * It also counts how often the profiler resolves, and checks that it syncs
 * before it reads a duration, as a device clock needs. */
static double g_fake_now;
typedef struct {
    double *t;
    long elapsed_calls, syncs;
    bool synced; /* a sync since the last record */
} fake_impl;

static void fake_record(vb_prof_clock *c, int slot) {
    fake_impl *f = c->impl;
    f->t[slot] = g_fake_now;
    f->synced = false;
}
static void fake_sync(vb_prof_clock *c) {
    fake_impl *f = c->impl;
    f->syncs++;
    f->synced = true;
}
static double fake_elapsed(vb_prof_clock *c, int a, int b) {
    fake_impl *f = c->impl;
    assert_true(f->synced); /* resolved only after a sync */
    f->elapsed_calls++;
    return f->t[b] - f->t[a];
}
static double fake_host_time(vb_prof_clock *c, int slot) { return ((fake_impl *)c->impl)->t[slot]; }
static void fake_destroy(vb_prof_clock *c) {
    fake_impl *f = c->impl;
    free(f->t);
    free(f);
    free(c);
}

/* A scripted clock of nslots slots; *impl (if not NULL) lets the test read its counters. */
static vb_prof_clock *fake_clock(int nslots, fake_impl **impl) {
    vb_prof_clock *c = calloc(1, sizeof *c);
    fake_impl *f = calloc(1, sizeof *f);
    assert_non_null(c);
    assert_non_null(f);
    f->t = calloc((size_t)nslots, sizeof *f->t);
    *c = (vb_prof_clock){.nslots = nslots, .record = fake_record, .sync = fake_sync, .elapsed = fake_elapsed,
                         .host_time = fake_host_time, .destroy = fake_destroy, .impl = f};
    if (impl) *impl = f;
    return c;
}

/* One op of exactly `dur` seconds on the scripted clock. */
static void timed(vb_profiler *p, int id, double dur, size_t bytes, double flops) {
    g_fake_now += 1.0;
    vb_prof_token tok = vb_prof_begin(p, id);
    g_fake_now += dur;
    vb_prof_end_flops(p, tok, bytes, flops);
}

/* A profiler on a scripted clock, enabled. */
static vb_profiler *scripted_profiler(int nslots, fake_impl **impl) {
    vb_profiler *p = vb_prof_create();
    vb_prof_set_clock(p, fake_clock(nslots, impl));
    vb_prof_set_enabled(p, true);
    g_fake_now = 100.0;
    return p;
}

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
    vb_profiler *p = scripted_profiler(4096, NULL);
    int id = vb_prof_op("tp_matmul", VB_CAT_COMPUTE);
    int cid = vb_prof_op("tp_allreduce", VB_CAT_COMM);
    /* durations 0.1, 0.5, 0.2, 0.4 s; median of four = (0.2 + 0.4) / 2 */
    const double d[4] = {0.1, 0.5, 0.2, 0.4};
    for (int i = 0; i < 4; i++) timed(p, id, d[i], 1000, 0);
    /* more calls than the initial sample capacity so the array must grow */
    for (int i = 0; i < 200; i++) timed(p, cid, 0.001, 8, 0);
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
    const double tol = 1e-9; /* the scripted clock is exact; %.9g rounds */
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
    timed(p, cid, 0.25, 0, 0);
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
    /* a fresh profiler is disabled: its tokens time nothing */
    vb_prof_token t0 = vb_prof_begin(p, id);
    assert_true(t0.slot < 0);
    vb_prof_end(p, t0, 123);
    vb_prof_add_step_time(p, 1.0);
    /* begun enabled, ended disabled: dropped (the state at the end decides) */
    vb_prof_set_enabled(p, true);
    vb_prof_token t1 = vb_prof_begin(p, id);
    assert_true(t1.slot >= 0);
    vb_prof_set_enabled(p, false);
    vb_prof_end(p, t1, 123);

    char dir[256], path[512];
    tu_tmpdir(dir, sizeof dir, "profile_off");
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    assert_int_equal(vb_prof_write_csv(p, path, 0), 0);
    assert_int_equal(tu_count_lines(path), 1); /* header only */
    vb_prof_destroy(p);

    /* NULL profiler: every call is a no-op */
    vb_prof_token t = vb_prof_begin(NULL, id);
    vb_prof_end(NULL, t, 1);
    vb_prof_flush(NULL);
    vb_prof_add_step_time(NULL, 1.0);
    vb_prof_set_enabled(NULL, true);
    vb_prof_reset(NULL);
    tu_rm_rf(dir);
}

/* The rows rank 0 gathers: no header, the given rank in every row, and two
 * ranks' rows concatenated under one header read back as both ranks' rows. */
static void test_rows_for_gather(void **state) {
    (void)state;
    vb_profiler *p = scripted_profiler(64, NULL);
    int id = vb_prof_op("tp_rows_op", VB_CAT_COMPUTE);
    timed(p, id, 0.01, 16, 0);
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
    vb_profiler *p = scripted_profiler(64, NULL);
    int id = vb_prof_op("tp_typed_gemm", VB_CAT_COMPUTE);
    vb_prof_set_trial_type(p, "SYNTHETIC");
    timed(p, id, 0.5, 100, 2e9);
    /* the trial type at the op's end decides, although it resolves later */
    vb_prof_set_trial_type(p, "FULL");
    vb_prof_add_step_time(p, 1.0); /* FULL's step time; the SYNTHETIC op resolves here */
    vb_prof_set_trial_type(p, "SYNTHETIC");
    vb_prof_add_step_time(p, 1.0);
    vb_prof_set_trial_type(p, "FULL");
    timed(p, id, 0.25, 100, 1e9);
    timed(p, id, 0.25, 100, 1e9);
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
    vb_profiler *p2 = scripted_profiler(64, NULL);
    timed(p2, vb_prof_op("tp_untyped_op", VB_CAT_COMPUTE), 0.1, 0, 0);
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
    vb_prof_end(p, vb_prof_begin(p, id), 8); /* outside the window: nothing */
    assert_int_equal(vb_tlrec_events(t), 0);
    for (int step = 0; step < 3; step++) {
        bool open = vb_tlrec_begin_step(t, "FULL", 0, step);
        assert_true(open == (step < 2)); /* two steps, then the window is closed */
        double t0 = vb_now();
        vb_prof_end(p, vb_prof_begin(p, id), 8);
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

/* GPU activities (CUPTI's records) join the window after the fact: each
 * takes the step whose span holds its start, one lane per stream ordered by
 * stream id after the host lanes; activities outside every recorded step are
 * not the window's, and what does not fit is counted as dropped. */
static void test_timeline_stream_lanes(void **state) {
    (void)state;
    vb_tlrec *t = vb_tlrec_create(3, 1, 2); /* stream lanes hold 2 x 2 x 3 = 12 */
    vb_tlrec_set_origin(t, 100.0);
    /* FULL_0 steps 0 and 1 at [101, 102) and [102, 104); FULL_1 step 0 at [110, 111) */
    const struct {
        int trial, step;
        double start, dur;
    } steps[] = {{0, 0, 101, 1}, {0, 1, 102, 2}, {1, 0, 110, 1}};
    for (int i = 0; i < 3; i++) {
        assert_true(vb_tlrec_begin_step(t, "FULL", steps[i].trial, steps[i].step));
        vb_tlrec_add(t, VB_TL_MAIN, VB_TLK_STEP, "step", steps[i].start, steps[i].dur, 0, 0, -1);
        vb_tlrec_end_step(t);
    }
    assert_false(vb_tlrec_active(t)); /* closed: activities are still placed */
    assert_int_equal(vb_tlrec_add_stream(t, 7, VB_TLK_COMPUTE, "gemm", 100.5, 0.1, 0), 0);   /* before */
    assert_int_equal(vb_tlrec_add_stream(t, 7, VB_TLK_COMPUTE, "gemm", 101.0, 0.25, 0), 1);  /* step 0's start */
    assert_int_equal(vb_tlrec_add_stream(t, 7, VB_TLK_COMPUTE, "gelu", 102.0, 0.5, 0), 1);   /* step 1's start */
    assert_int_equal(vb_tlrec_add_stream(t, 7, VB_TLK_COMPUTE, "gemm", 103.5, 0.25, 0), 1);  /* inside step 1 */
    assert_int_equal(vb_tlrec_add_stream(t, 7, VB_TLK_COMPUTE, "gemm", 104.0, 0.25, 0), 0);  /* step 1's end */
    assert_int_equal(vb_tlrec_add_stream(t, 7, VB_TLK_COMPUTE, "gemm", 105.0, 0.25, 0), 0);  /* between trials */
    assert_int_equal(vb_tlrec_add_stream(t, 3, VB_TLK_MEMCPY, "[CUDA memcpy Host-to-Device]", 110.25, 0.5, 4096),
                     1);
    assert_int_equal(vb_tlrec_add_stream(t, 13, VB_TLK_COMM, "ncclDevKernel_AllReduce", 110.5, 0.25, 0), 1);
    assert_int_equal(vb_tlrec_add_stream(t, 3, VB_TLK_MEMCPY, "[CUDA memset]", 111.5, 0.1, 0), 0); /* after */
    assert_int_equal(vb_tlrec_events(t), 3 + 5);
    assert_int_equal(vb_tlrec_dropped(t), 0);

    char *rows = vb_tlrec_csv_rows(t, 2);
    /* host lanes first, then stream3, stream7, stream13: by id, not by first use */
    const char *m = strstr(rows, "2,main,step,step,FULL,1,0,");
    const char *s3 =
        strstr(rows, "2,stream3,memcpy,[CUDA memcpy Host-to-Device],FULL,1,0,10.250000000,0.500000000,4096,0,-1\n");
    const char *s7a = strstr(rows, "2,stream7,compute,gemm,FULL,0,0,1.000000000,0.250000000,0,0,-1\n");
    const char *s7b = strstr(rows, "2,stream7,compute,gelu,FULL,0,1,2.000000000,0.500000000,0,0,-1\n");
    const char *s7c = strstr(rows, "2,stream7,compute,gemm,FULL,0,1,3.500000000,");
    const char *s13 = strstr(rows, "2,stream13,comm,ncclDevKernel_AllReduce,FULL,1,0,10.500000000,");
    assert_non_null(m);
    assert_non_null(s3);
    assert_non_null(s7a);
    assert_non_null(s7b);
    assert_non_null(s7c);
    assert_non_null(s13);
    assert_true(m < s3 && s3 < s7a && s7a < s7b && s7b < s7c && s7c < s13);
    free(rows);

    /* a full stream lane drops and counts; so does a stream past the last lane */
    for (int i = 0; i < 20; i++) vb_tlrec_add_stream(t, 7, VB_TLK_COMPUTE, "k", 101.5, 0, 0);
    assert_int_equal(vb_tlrec_events(t), 3 + 5 + 9); /* stream7 held 3 of its 12 */
    assert_int_equal(vb_tlrec_dropped(t), 11);
    for (unsigned sid = 100; sid < 100 + VB_TL_MAX_STREAMS; sid++) {
        int rc = vb_tlrec_add_stream(t, sid, VB_TLK_COMPUTE, "k", 101.5, 0, 0);
        assert_int_equal(rc, sid < 100 + VB_TL_MAX_STREAMS - 3 ? 1 : -1); /* 3 lanes taken already */
    }
    assert_int_equal(vb_tlrec_dropped(t), 11 + 3);
    vb_tlrec_destroy(t);
    /* no recorder: nothing, no crash */
    assert_int_equal(vb_tlrec_add_stream(NULL, 1, VB_TLK_COMPUTE, "k", 0, 0, 0), 0);
}

/* Durations are resolved at the flush, not at vb_prof_end: before it the
 * clock was never asked for one; after it, after a sync, every pair was. */
static void test_resolved_at_flush(void **state) {
    (void)state;
    fake_impl *f;
    vb_profiler *p = scripted_profiler(64, &f);
    int id = vb_prof_op("tp_deferred", VB_CAT_COMPUTE);
    for (int i = 0; i < 5; i++) timed(p, id, 0.125 * (i + 1), 4, 0);
    assert_int_equal(f->elapsed_calls, 0);
    assert_int_equal(f->syncs, 0);
    vb_prof_flush(p);
    assert_int_equal(f->syncs, 1);
    assert_int_equal(f->elapsed_calls, 5);
    vb_prof_flush(p); /* nothing pending: no sync, nothing resolved twice */
    assert_int_equal(f->syncs, 1);
    assert_int_equal(f->elapsed_calls, 5);
    char *rows = vb_prof_csv_rows(p, 0);
    csv_row r;
    assert_true(find_row(rows, "tp_deferred", &r));
    assert_int_equal(r.calls, 5);
    assert_true(fabs(r.total - 0.125 * 15) < 1e-9);
    assert_true(fabs(r.min - 0.125) < 1e-9);
    assert_true(fabs(r.max - 0.625) < 1e-9);
    assert_true(fabs(r.median - 0.375) < 1e-9);
    free(rows);
    vb_prof_destroy(p);
}

/* Tokens nest and overlap in any order: each op's duration is its own
 * begin-to-end span. */
static void test_tokens_nested_overlapping(void **state) {
    (void)state;
    vb_profiler *p = scripted_profiler(64, NULL);
    int a = vb_prof_op("tp_tok_a", VB_CAT_COMPUTE), b = vb_prof_op("tp_tok_b", VB_CAT_COMM),
        c = vb_prof_op("tp_tok_c", VB_CAT_MEMCPY), d = vb_prof_op("tp_tok_d", VB_CAT_IO);
    g_fake_now = 10.0;
    vb_prof_token ta = vb_prof_begin(p, a); /* a: 10 .. 17 */
    g_fake_now = 11.0;
    vb_prof_token tb = vb_prof_begin(p, b); /* b: 11 .. 15, overlaps a's end */
    g_fake_now = 12.0;
    vb_prof_token td = vb_prof_begin(p, d); /* d: 12 .. 12.5, nested in both */
    g_fake_now = 12.5;
    vb_prof_end(p, td, 0);
    g_fake_now = 14.0;
    vb_prof_token tc = vb_prof_begin(p, c); /* c: 14 .. 20, begins inside a and b, ends last */
    g_fake_now = 15.0;
    vb_prof_end(p, tb, 0);
    g_fake_now = 17.0;
    vb_prof_end(p, ta, 0);
    g_fake_now = 20.0;
    vb_prof_end(p, tc, 0);
    char *rows = vb_prof_csv_rows(p, 0);
    const struct {
        const char *name;
        double dur;
    } want[4] = {{"tp_tok_a", 7.0}, {"tp_tok_b", 4.0}, {"tp_tok_c", 6.0}, {"tp_tok_d", 0.5}};
    for (int i = 0; i < 4; i++) {
        csv_row r;
        assert_true(find_row(rows, want[i].name, &r));
        assert_int_equal(r.calls, 1);
        assert_true(fabs(r.total - want[i].dur) < 1e-9);
    }
    free(rows);
    vb_prof_destroy(p);
}

/* A ring smaller than a step's ops: it flushes when full, never frees a slot
 * an open token holds, and an outer op spanning many flushes keeps its start. */
static void test_small_ring_open_tokens(void **state) {
    (void)state;
    fake_impl *f;
    vb_profiler *p = scripted_profiler(6, &f);
    int outer = vb_prof_op("tp_ring_outer", VB_CAT_COMPUTE), inner = vb_prof_op("tp_ring_inner", VB_CAT_COMM);
    g_fake_now = 0.0;
    vb_prof_token to = vb_prof_begin(p, outer);
    vb_prof_token t2 = vb_prof_begin(p, outer); /* a second long one, ended first */
    for (int i = 0; i < 50; i++) {
        g_fake_now += 1.0;
        vb_prof_token ti = vb_prof_begin(p, inner);
        g_fake_now += 0.5;
        vb_prof_end(p, ti, 1);
        if (i == 20) vb_prof_end(p, t2, 0); /* t2: 0 .. 20 * 1.5 + 1.5 */
    }
    g_fake_now += 1.0;
    vb_prof_end(p, to, 0);
    assert_true(f->syncs >= 10); /* 6 slots cannot hold 50 ops: resolved on the way */
    char *rows = vb_prof_csv_rows(p, 0);
    csv_row r;
    assert_true(find_row(rows, "tp_ring_inner", &r));
    assert_int_equal(r.calls, 50);
    assert_true(fabs(r.total - 25.0) < 1e-9);
    assert_true(fabs(r.max - 0.5) < 1e-9 && fabs(r.min - 0.5) < 1e-9);
    assert_true(find_row(rows, "tp_ring_outer", &r));
    assert_int_equal(r.calls, 2);
    assert_true(fabs(r.max - 76.0) < 1e-9); /* 50 x 1.5 + 1 */
    assert_true(fabs(r.min - 31.5) < 1e-9);
    free(rows);
    vb_prof_destroy(p);
}

/* Times `calls` spins of `spin` seconds under op `name` on p's clock and
 * checks each is at least the spin, and their sum at most what the host saw
 * around them (slack: the clock's own rounding). The spin is counted from
 * after vb_prof_begin returns, so a preemption inside begin (a shared
 * machine) lengthens the op rather than shortening it below the spin.
 * Destroys p. */
static void check_spin_durations(vb_profiler *p, const char *name, int calls, double spin, double slack) {
    vb_prof_set_enabled(p, true);
    int id = vb_prof_op(name, VB_CAT_COMPUTE);
    double outside = 0;
    for (int i = 0; i < calls; i++) {
        double t0 = vb_now();
        vb_prof_token tok = vb_prof_begin(p, id);
        double t1 = vb_now();
        while (vb_now() - t1 < spin) {
        }
        vb_prof_end(p, tok, 0);
        outside += vb_now() - t0;
    }
    vb_prof_flush(p);
    char *rows = vb_prof_csv_rows(p, 0);
    csv_row r;
    assert_true(find_row(rows, name, &r));
    assert_int_equal(r.calls, calls);
    assert_true(r.min >= 0.99 * spin);
    assert_true(r.total <= outside + slack);
    assert_true(r.total >= 0.99 * spin * calls);
    free(rows);
    vb_prof_destroy(p);
}

/* On the host clock a resolved duration is the time between the begin and
 * end calls, as when it was computed at vb_prof_end. */
static void test_host_clock_durations(void **state) {
    (void)state;
    check_spin_durations(vb_prof_create(), "tp_host_spin", 3, 0.01, 1e-9);
}

/* The context clock on the CPU backend (whose events read the host clock):
 * the same durations as the host clock, also past a full ring of slots (20
 * ops, 16 slots). On CUDA the same code times the enqueued work. */
static void test_ctx_clock_durations(void **state) {
    (void)state;
    vb_ctx_opts opts = {.act = VB_DTYPE_F32};
    char err[128];
    vb_ctx *ctx = vb_ops_cpu()->ctx_create(&opts, err, sizeof err);
    assert_non_null(ctx);
    vb_profiler *p = vb_prof_create();
    vb_prof_set_clock(p, vb_prof_clock_ctx(ctx, 16));
    check_spin_durations(p, "tp_ctx_spin", 20, 0.002, 1e-6);
    ctx->ops->ctx_destroy(ctx);
}

/* Ops stamped on a second context (dali's copy stream) through the context
 * clock: timed like the rest, mixed with ops on the clock's own context,
 * also past a full ring of slots (12 ops, 16 slots); the host clock takes
 * begin_on / end_on as plain stamps. */
static void test_ctx_clock_other_context(void **state) {
    (void)state;
    vb_ctx_opts opts = {.act = VB_DTYPE_F32};
    char err[128];
    vb_ctx *ctx = vb_ops_cpu()->ctx_create(&opts, err, sizeof err);
    vb_ctx *copy = vb_ops_cpu()->ctx_create(&opts, err, sizeof err);
    assert_non_null(ctx);
    assert_non_null(copy);
    for (int clock = 0; clock < 2; clock++) {
        vb_profiler *p = vb_prof_create();
        if (clock) vb_prof_set_clock(p, vb_prof_clock_ctx(ctx, 16));
        vb_prof_set_enabled(p, true);
        const char *name = clock ? "tp_other_ctx_copy" : "tp_other_host_copy";
        int id = vb_prof_op(name, VB_CAT_MEMCPY), main_id = vb_prof_op("tp_other_main", VB_CAT_COMPUTE);
        const double spin = 0.002;
        for (int i = 0; i < 6; i++) {
            vb_prof_token tok = vb_prof_begin_on(p, id, copy);
            vb_prof_token inner = vb_prof_begin(p, main_id); /* overlapping, on the main context */
            double t1 = vb_now();
            while (vb_now() - t1 < spin) {
            }
            vb_prof_end(p, inner, 0);
            vb_prof_end_on(p, tok, 100, copy);
        }
        vb_prof_flush(p);
        char *rows = vb_prof_csv_rows(p, 0);
        csv_row r;
        assert_true(find_row(rows, name, &r));
        assert_int_equal(r.calls, 6);
        assert_true(r.min >= 0.99 * spin);
        assert_true(find_row(rows, "tp_other_main", &r));
        assert_int_equal(r.calls, 6);
        free(rows);
        vb_prof_destroy(p);
    }
    copy->ops->ctx_destroy(copy);
    ctx->ops->ctx_destroy(ctx);
}

static void child_unended_tokens(void *ctx) {
    (void)ctx;
    vb_profiler *p = vb_prof_create();
    vb_prof_set_clock(p, vb_prof_clock_host(8));
    vb_prof_set_enabled(p, true);
    int id = vb_prof_op("tp_never_ended", VB_CAT_COMPUTE);
    for (int i = 0; i < 9; i++) (void)vb_prof_begin(p, id);
}

static void child_ended_twice(void *ctx) {
    (void)ctx;
    vb_profiler *p = vb_prof_create();
    vb_prof_set_enabled(p, true);
    int id = vb_prof_op("tp_ended_twice", VB_CAT_COMPUTE);
    vb_prof_token t = vb_prof_begin(p, id);
    vb_prof_end(p, t, 0);
    vb_prof_flush(p);
    vb_prof_end(p, t, 0);
    vb_prof_flush(p);
}

/* Misuse is a bug, reported as one internal-error line. */
static void test_token_misuse(void **state) {
    (void)state;
    tu_expect_exit(1, "ops open at once", child_unended_tokens, NULL);
    tu_expect_exit(1, "ended twice", child_ended_twice, NULL);
}

/* An op ending inside a timeline step but resolved later (at end_step, when
 * the timeline pulls its sources) is a row of that step, at its begin time,
 * even when the profiler itself is disabled. */
static void test_timeline_stamp_at_end(void **state) {
    (void)state;
    vb_tlrec *t = vb_tlrec_create(3, 0, 8);
    vb_tlrec_set_origin(t, 1000.0);
    fake_impl *f;
    vb_profiler *p = vb_prof_create();
    vb_prof_set_clock(p, fake_clock(64, &f));
    vb_prof_set_timeline(p, t);
    int id = vb_prof_op("tp_tl_stamped", VB_CAT_COMM);
    for (int step = 0; step < 2; step++) {
        assert_true(vb_tlrec_begin_step(t, "FULL", 4, step));
        g_fake_now = 1000.0 + 10.0 * step + 1.0;
        vb_prof_token tok = vb_prof_begin(p, id);
        g_fake_now += 0.25;
        vb_prof_end(p, tok, 64);
        assert_int_equal(f->elapsed_calls, step); /* not resolved yet */
        vb_tlrec_end_step(t);                     /* pulls the profiler */
        assert_int_equal(f->elapsed_calls, step + 1);
    }
    /* ended outside the window: no row */
    vb_prof_end(p, vb_prof_begin(p, id), 64);
    assert_int_equal(vb_tlrec_events(t), 2);
    char *rows = vb_tlrec_csv_rows(t, 0);
    assert_non_null(strstr(rows, "0,main,comm,tp_tl_stamped,FULL,4,0,1.000000000,0.250000000,64,0,-1\n"));
    assert_non_null(strstr(rows, "0,main,comm,tp_tl_stamped,FULL,4,1,11.000000000,0.250000000,64,0,-1\n"));
    free(rows);
    /* a disabled profiler recorded no ops.csv sample for them */
    char *ops = vb_prof_csv_rows(p, 0);
    assert_string_equal(ops, "");
    free(ops);
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
        cmocka_unit_test(test_resolved_at_flush),
        cmocka_unit_test(test_tokens_nested_overlapping),
        cmocka_unit_test(test_small_ring_open_tokens),
        cmocka_unit_test(test_host_clock_durations),
        cmocka_unit_test(test_ctx_clock_durations),
        cmocka_unit_test(test_ctx_clock_other_context),
        cmocka_unit_test(test_token_misuse),
        cmocka_unit_test(test_timeline_stamp_at_end),
        cmocka_unit_test(test_timeline_stream_lanes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
