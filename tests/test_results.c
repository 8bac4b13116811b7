/* test_results.c: run directories never overwrite, atomic writes, CSV quoting,
 * the schema's names agree with its headers. */
#include "tests/test_util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analysis/csv.h"
#include "core/config/config.h"
#include "core/util/common.h"
#include "core/results/results.h"

static void fill_config(vb_config *c, const char *output_dir, const char *run_name) {
    /* only the fields the run directory looks at; no dependency on config.c */
    memset(c, 0, sizeof *c);
    snprintf(c->config, sizeof c->config, "tiny");
    snprintf(c->output_dir, sizeof c->output_dir, "%s", output_dir);
    snprintf(c->run_name, sizeof c->run_name, "%s", run_name);
}

static void test_run_dir_never_overwrites(void **state) {
    (void)state;
    char tmp[256], out[512];
    tu_tmpdir(tmp, sizeof tmp, "results_dir");
    snprintf(out, sizeof out, "%s/nested/out", tmp); /* created on demand */
    vb_config c;
    fill_config(&c, out, "myrun");

    char d1[VB_PATH_MAX], d2[VB_PATH_MAX], d3[VB_PATH_MAX], id1[256], id2[256], id3[256];
    vb_run_dir_create(c.output_dir, c.run_name, c.config, d1, sizeof d1, id1, sizeof id1);
    vb_run_dir_create(c.output_dir, c.run_name, c.config, d2, sizeof d2, id2, sizeof id2);
    vb_run_dir_create(c.output_dir, c.run_name, c.config, d3, sizeof d3, id3, sizeof id3);
    assert_string_equal(id1, "myrun");
    assert_string_equal(id2, "myrun-1");
    assert_string_equal(id3, "myrun-2");
    assert_string_not_equal(d1, d2);
    assert_true(vb_dir_exists(d1));
    assert_true(vb_dir_exists(d2));
    assert_true(vb_dir_exists(d3));
    char expect[VB_PATH_MAX];
    snprintf(expect, sizeof expect, "%s/myrun-1", out);
    assert_string_equal(d2, expect);

    /* no run_name: <config>_<timestamp>, still unique when made twice in a second */
    fill_config(&c, out, "");
    vb_run_dir_create(c.output_dir, c.run_name, c.config, d1, sizeof d1, id1, sizeof id1);
    vb_run_dir_create(c.output_dir, c.run_name, c.config, d2, sizeof d2, id2, sizeof id2);
    assert_true(strncmp(id1, "tiny_", 5) == 0);
    assert_string_not_equal(d1, d2);
    tu_rm_rf(tmp);
}

static void test_run_dir_bad_output_dir_exits_2(void **state) {
    (void)state;
    char tmp[256], blocker[512];
    tu_tmpdir(tmp, sizeof tmp, "results_bad");
    snprintf(blocker, sizeof blocker, "%s/file", tmp);
    FILE *f = fopen(blocker, "w");
    fputs("x", f);
    fclose(f);
    /* output_dir below a regular file cannot be created: exit 2, in a child
     * process so the exit does not end this test */
    vb_config c;
    fill_config(&c, blocker, "r");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        char d[VB_PATH_MAX], id[64];
        vb_run_dir_create(c.output_dir, c.run_name, c.config, d, sizeof d, id, sizeof id);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
    tu_rm_rf(tmp);
}

static void write_hello(FILE *f, void *ctx) { fprintf(f, "hello %s\n", (const char *)ctx); }

static void test_atomic_write(void **state) {
    (void)state;
    char tmp[256], path[512];
    tu_tmpdir(tmp, sizeof tmp, "results_atomic");
    snprintf(path, sizeof path, "%s/a.csv", tmp);
    assert_int_equal(vb_atomic_write(path, write_hello, "one"), 0);
    char *s = tu_read_file(path);
    assert_string_equal(s, "hello one\n");
    free(s);
    assert_int_equal(vb_atomic_write(path, write_hello, "two"), 0);
    s = tu_read_file(path);
    assert_string_equal(s, "hello two\n"); /* replaced, not appended */
    free(s);
    char out[4096];
    assert_int_equal(tu_run(out, sizeof out, "ls -A '%s'", tmp), 0);
    assert_string_equal(out, "a.csv\n"); /* no temporaries left */
    /* a directory that does not exist: an error, not a crash */
    snprintf(path, sizeof path, "%s/missing/a.csv", tmp);
    assert_int_not_equal(vb_atomic_write(path, write_hello, "x"), 0);
    tu_rm_rf(tmp);
}

/* A full disk without root or mount: RLIMIT_FSIZE makes a write past the
 * limit fail with EFBIG (SIGXFSZ ignored), also for root, in a child so the
 * limit ends with it. The child reports the call's result and errno in its
 * exit status: 0 = failed with EFBIG, no temporary left, old file intact. */
static char g_full_dir[256];

static void write_big(FILE *f, void *ctx) {
    (void)ctx;
    for (int i = 0; i < 100000; i++) fputs("0123456789abcdef\n", f); /* 1.7 MB, fully buffered */
}

static void full_disk_child(void *ctx) {
    (void)ctx;
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {.rlim_cur = 64 * 1024, .rlim_max = RLIM_INFINITY};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) exit(10);
    char path[512];
    snprintf(path, sizeof path, "%s/a.csv", g_full_dir);
    errno = 0;
    if (vb_atomic_write(path, write_big, NULL) == 0) exit(11);
    if (errno != EFBIG) exit(12);
    /* the caller's one line names the file and strerror */
    vb_atomic_write_or_die(path, write_big, NULL);
    exit(13);
}

static void test_atomic_write_full_disk_reports_errno(void **state) {
    (void)state;
    tu_tmpdir(g_full_dir, sizeof g_full_dir, "results_full");
    char path[512];
    snprintf(path, sizeof path, "%s/a.csv", g_full_dir);
    assert_int_equal(vb_atomic_write(path, write_hello, "old"), 0);
    char *err = NULL;
    int rc = tu_run_child(full_disk_child, NULL, 30, &err);
    if (rc != 1) fprintf(stderr, "child exited %d: <<%s>>\n", rc, err ? err : "");
    assert_int_equal(rc, 1);
    char want[700];
    snprintf(want, sizeof want, "vitbench: error: cannot write %s: %s\n", path, strerror(EFBIG));
    assert_string_equal(err, want);
    free(err);
    char *s = tu_read_file(path);
    assert_string_equal(s, "hello old\n"); /* the previous version survives */
    free(s);
    char out[4096];
    assert_int_equal(tu_run(out, sizeof out, "ls -A '%s'", g_full_dir), 0);
    assert_string_equal(out, "a.csv\n"); /* the temporary was removed */
    /* a missing directory reports ENOENT */
    snprintf(path, sizeof path, "%s/missing/a.csv", g_full_dir);
    errno = 0;
    assert_int_not_equal(vb_atomic_write(path, write_hello, "x"), 0);
    assert_int_equal(errno, ENOENT);
    tu_rm_rf(g_full_dir);
}

/* vb_write_reserved keeps room in the file as trailing whitespace, and
 * run.json's readers (cJSON here, via the failure mark) take such a file.
 * Its in-place fallback needs a full filesystem: test_full_disk.sh. */
static void test_reserved_write_pads_and_parses(void **state) {
    (void)state;
    char tmp[256], path[512];
    tu_tmpdir(tmp, sizeof tmp, "results_reserved");
    snprintf(path, sizeof path, "%s/run.json", tmp);
    const char *json = "{\n\t\"run_id\":\t\"r\",\n\t\"status\":\t\"running\"\n}\n";
    assert_int_equal(vb_write_reserved(path, json, 4096), 0);
    size_t len = 0;
    char *s = vb_read_file(path, &len);
    assert_non_null(s);
    assert_int_equal(len, 4096);
    assert_memory_equal(s, json, strlen(json));
    for (size_t i = strlen(json); i + 1 < len; i++)
        if (s[i] != ' ') fail_msg("byte %zu of the padding is 0x%02x, want a space", i, (unsigned char)s[i]);
    assert_int_equal(s[len - 1], '\n');
    free(s);
    /* the padded file parses; with room on the disk the rewrite is atomic and unpadded */
    assert_int_equal(vb_run_json_mark_failed(path, "disk gone"), 1);
    s = tu_read_file(path);
    assert_non_null(strstr(s, "\"status\":\t\"failed\""));
    assert_non_null(strstr(s, "\"failure\":\t\"disk gone\""));
    assert_true(strlen(s) < 4096 && s[strlen(s) - 1] == '\n' && s[strlen(s) - 2] == '}');
    free(s);
    /* a reserve below the text's length adds nothing */
    assert_int_equal(vb_write_reserved(path, "{}\n", 2), 0);
    s = tu_read_file(path);
    assert_string_equal(s, "{}\n");
    free(s);
    /* a failure that is not for want of room is not retried in place */
    snprintf(path, sizeof path, "%s/missing/run.json", tmp);
    errno = 0;
    assert_int_equal(vb_write_reserved(path, "{}\n", 64), -1);
    assert_int_equal(errno, ENOENT);
    char out[4096];
    assert_int_equal(tu_run(out, sizeof out, "ls -A '%s'", tmp), 0);
    assert_string_equal(out, "run.json\n"); /* no temporaries left */
    tu_rm_rf(tmp);
}

static void write_fields(FILE *f, void *vctx) {
    const char **fields = vctx;
    for (int i = 0; fields[i]; i++) {
        if (i) fputc(',', f);
        vb_csv_field(f, fields[i]);
    }
    fputc('\n', f);
}

static void test_csv_quoting(void **state) {
    (void)state;
    char tmp[256], path[512];
    tu_tmpdir(tmp, sizeof tmp, "results_csv");
    snprintf(path, sizeof path, "%s/q.csv", tmp);
    const char *fields[] = {"plain", "a,b", "say \"hi\"", "two\nlines", "", NULL};
    assert_int_equal(vb_atomic_write(path, write_fields, fields), 0);
    char *s = tu_read_file(path);
    assert_string_equal(s, "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\n");
    free(s);
    /* and Python's csv module reads the fields back unchanged */
    char out[4096];
    int rc = tu_run(out, sizeof out,
                    "python3 -c 'import csv,sys; r=list(csv.reader(open(sys.argv[1], newline=\"\")));"
                    " assert r==[[\"plain\",\"a,b\",\"say \\\"hi\\\"\",\"two\\nlines\",\"\"]], r' '%s'",
                    path);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    assert_int_equal(rc, 0);
    tu_rm_rf(tmp);
}

/* text a spreadsheet would run as a formula is written with a leading
 * apostrophe; numbers stay numbers; the reader gives every value back */
static void test_csv_formula_cells(void **state) {
    (void)state;
    char tmp[256], path[512], err[256];
    tu_tmpdir(tmp, sizeof tmp, "results_csv_formula");
    snprintf(path, sizeof path, "%s/f.csv", tmp);
    const char *fields[] = {"=HYPERLINK(\"http://x\",\"y\")", "+1+2", "-2+3", "@SUM(A1)", "\tx", "-5", "+3.5",
                            "-1e-3", "-inf", "'=x", "''", "'abc", "a=b", "-", NULL};
    assert_int_equal(vb_atomic_write(path, write_fields, fields), 0);
    char *s = tu_read_file(path);
    assert_string_equal(s, "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\",'+1+2,'-2+3,'@SUM(A1),'\tx,-5,+3.5,-1e-3,'-inf,"
                           "''=x,''','abc,a=b,'-\n");
    free(s);
    vb_csv t;
    assert_int_equal(vb_csv_read(path, &t, err, sizeof err), 0);
    for (int i = 0; fields[i]; i++) assert_string_equal(t.header[i], fields[i]);
    vb_csv_free(&t);
    tu_rm_rf(tmp);
}

/* the stamped names sweeps, commbench and the model use: <prefix>_<stamp>,
 * a suffix when claimed twice in one second, never an existing directory */
static void test_stamped_claim_never_shares(void **state) {
    (void)state;
    char tmp[256], d1[VB_PATH_MAX], d2[VB_PATH_MAX], id1[256], id2[256];
    tu_tmpdir(tmp, sizeof tmp, "results_stamped");
    assert_int_equal(vb_results_dir_claim_stamped(tmp, "sweepx", d1, sizeof d1, id1, sizeof id1), 0);
    assert_int_equal(vb_results_dir_claim_stamped(tmp, "sweepx", d2, sizeof d2, id2, sizeof id2), 0);
    assert_true(strncmp(id1, "sweepx_", 7) == 0 && strncmp(id2, "sweepx_", 7) == 0);
    assert_string_equal(id1 + 7 + 15, ""); /* YYYYmmdd-HHMMSS */
    assert_string_not_equal(d1, d2);
    assert_true(vb_dir_exists(d1) && vb_dir_exists(d2));
    tu_rm_rf(tmp);
}

/* header (comma-separated) has column `col` as a whole field */
static bool has_column(const char *header, const char *col) {
    size_t n = strlen(col);
    for (const char *p = header; (p = strstr(p, col)); p += n)
        if ((p == header || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return true;
    return false;
}

/* The column names readers look up are the writers' header fields, and the
 * trial kinds' names are what the readers accept: a renamed column or kind
 * fails here, not in a reader that quietly finds nothing. */
static void test_schema_names_agree(void **state) {
    (void)state;
    const char *per_trial[] = {VB_TRIALS_CSV_HEADER, VB_LOAD_CSV_HEADER, VB_ITERATIONS_CSV_HEADER};
    for (size_t i = 0; i < sizeof per_trial / sizeof *per_trial; i++) {
        assert_true(has_column(per_trial[i], VB_COL_TRIAL_TYPE));
        assert_true(has_column(per_trial[i], VB_COL_TRIAL_INDEX));
        assert_true(has_column(per_trial[i], VB_COL_WARMUP));
        assert_true(has_column(per_trial[i], VB_COL_RANK));
        assert_true(has_column(per_trial[i], VB_COL_SECONDS));
    }
    assert_true(has_column(VB_TRIALS_CSV_HEADER, VB_COL_RUN_ID));
    assert_true(has_column(VB_LOAD_CSV_HEADER, VB_COL_RUN_ID));
    assert_true(has_column(VB_TRIALS_CSV_HEADER, VB_COL_SAMPLES_PER_S));
    assert_true(has_column(VB_ITERATIONS_CSV_HEADER, VB_COL_STEP));
    assert_true(has_column(VB_SUMMARY_CSV_HEADER, VB_COL_TRIAL_TYPE));
    assert_true(has_column(VB_SUMMARY_CSV_HEADER, VB_COL_MEAN_SAMPLES_PER_S));
    assert_true(has_column(VB_SUMMARY_CSV_HEADER, VB_COL_STD_SAMPLES_PER_S));
    assert_true(has_column(VB_OPS_CSV_HEADER, VB_COL_TRIAL_TYPE));
    assert_true(has_column(VB_OPS_CSV_HEADER, VB_COL_RANK));
    assert_true(has_column(VB_TIMELINE_CSV_HEADER, VB_COL_TRIAL_TYPE));
    assert_true(has_column(VB_TIMELINE_CSV_HEADER, VB_COL_STEP));
    assert_true(has_column(VB_ITERATIONS_CSV_HEADER, VB_COL_COMM_EXPOSED_S));
    assert_true(has_column(VB_ITERATIONS_CSV_HEADER, VB_COL_ALLREDUCE_CALLS));
    assert_true(has_column(VB_ITERATIONS_CSV_HEADER, VB_COL_ALLREDUCE_BYTES));
    assert_true(has_column(VB_BREAKDOWN_CSV_HEADER, VB_COL_COMM_EXPOSED_S));
    assert_true(has_column(VB_BREAKDOWN_CSV_HEADER, VB_COL_RANK));
    const char *commbench[] = {VB_COL_COLLECTIVE, VB_COL_GROUP, VB_COL_GROUP_SIZE, VB_COL_SIZE_BYTES,
                               VB_COL_TIME_US,    VB_COL_WRONG, VB_COL_RANK};
    for (size_t i = 0; i < sizeof commbench / sizeof *commbench; i++)
        assert_true(has_column(VB_COMMBENCH_CSV_HEADER, commbench[i]));
    const char *ops[] = {VB_COL_NAME,    VB_COL_CATEGORY,      VB_COL_CALLS,       VB_COL_BYTES,
                         VB_COL_FLOPS,   VB_COL_TOTAL_S,       VB_COL_AVG_S,       VB_COL_SHARE_OF_STEP,
                         VB_COL_GFLOP_PER_S, VB_COL_GB_PER_S};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) assert_true(has_column(VB_OPS_CSV_HEADER, ops[i]));
    const char *load[] = {VB_COL_ONLINE_CPUS, VB_COL_LOADAVG_BEFORE, VB_COL_STEAL_SHARE, VB_COL_CPU_WAIT_SHARE,
                          VB_COL_NIVCSW};
    for (size_t i = 0; i < sizeof load / sizeof *load; i++) assert_true(has_column(VB_LOAD_CSV_HEADER, load[i]));
    const char *lead[] = {VB_COL_RUN_INDEX, VB_COL_RUN_DIR, VB_COL_STATUS,          VB_COL_EXIT_CODE,
                          VB_COL_REPEAT,    VB_COL_RANKS,   VB_COL_THREADS_PER_RANK};
    for (size_t i = 0; i < sizeof lead / sizeof *lead; i++) assert_true(has_column(VB_INDEX_LEAD_COLUMNS, lead[i]));
    /* model.csv's columns, read back by the sweep's report */
    const char *model_cols[] = {VB_MODEL_CSV_COLUMNS};
    const char *model_read[] = {VB_COL_POINT,           VB_COL_RANKS,         VB_COL_SAMPLES_PER_S,
                                VB_COL_EFFICIENCY,      VB_COL_MEASURED_SAMPLES_PER_S, VB_COL_MEASURED_EFFICIENCY,
                                VB_COL_REL_ERROR,       VB_COL_SAMPLES_PER_S_LO, VB_COL_SAMPLES_PER_S_HI};
    for (size_t i = 0; i < sizeof model_read / sizeof *model_read; i++) {
        bool found = false;
        for (size_t j = 0; j < sizeof model_cols / sizeof *model_cols; j++)
            found = found || strcmp(model_cols[j], model_read[i]) == 0;
        assert_true(found);
    }
    assert_true(has_column(VB_MODEL_FITS_CSV_HEADER, VB_COL_COLLECTIVE));
    assert_true(has_column(VB_MODEL_FITS_CSV_HEADER, VB_COL_GROUP_SIZE));
    assert_true(has_column(VB_PUBLISHED_CSV_HEADER, VB_COL_REL_ERROR));
    assert_true(has_column(VB_COMMBENCH_CSV_HEADER, VB_COL_NGROUPS));
    const char *headline_all[] = {VB_INDEX_HEADLINE_COLUMNS};
    const char *headline_read[] = {VB_COL_FULL_SAMPLES_PER_S, VB_COL_SYNTHETIC_SAMPLES_PER_S};
    for (size_t i = 0; i < 2; i++) {
        bool found = false;
        for (size_t j = 0; j < sizeof headline_all / sizeof *headline_all; j++)
            found = found || strcmp(headline_all[j], headline_read[i]) == 0;
        assert_true(found);
    }
    /* the history: its fixed columns, each trial kind's throughput column
     * named <kind>_samples_per_s, the counts named as counts.csv names them */
    const char *history[] = {VB_COL_TIME,          VB_COL_COMMIT,       VB_COL_MACHINE_KEY,  VB_HISTORY_COL_FULL,
                             VB_HISTORY_COL_SYNTHETIC, VB_HISTORY_COL_IO, VB_COL_INSTRUCTIONS, VB_COL_EST_CYCLES};
    for (size_t i = 0; i < sizeof history / sizeof *history; i++)
        assert_true(has_column(VB_HISTORY_CSV_HEADER, history[i]));
    const vb_trial_kind history_kinds[] = {VB_TRIAL_FULL, VB_TRIAL_SYNTHETIC, VB_TRIAL_IO};
    for (size_t i = 0; i < 3; i++) {
        char col[64];
        snprintf(col, sizeof col, "%s_samples_per_s", vb_trial_kinds[history_kinds[i]].name);
        assert_string_equal(col, history[3 + i]);
    }
    assert_true(has_column(VB_COUNTS_CSV_HEADER, VB_COL_METRIC));
    assert_true(has_column(VB_COUNTS_CSV_HEADER, VB_COL_VALUE));
    /* a bench_step reference's iterations.csv: the leading step columns */
    assert_int_equal(strncmp(VB_ITERATIONS_CSV_HEADER, VB_ITERATIONS_CSV_STEP_COLUMNS ",",
                             strlen(VB_ITERATIONS_CSV_STEP_COLUMNS ",")), 0);
    assert_false(has_column(VB_TRIALS_CSV_HEADER, "trial")); /* whole fields only */
    /* index.csv's headline columns: <column>_samples_per_s and <column>_std per kind, in order */
    const char *headline[] = {VB_INDEX_HEADLINE_COLUMNS};
    const vb_trial_kind kinds[] = {VB_INDEX_HEADLINE_KINDS};
    assert_int_equal(sizeof headline / sizeof *headline, 2 * VB_INDEX_HEADLINE_NKINDS);
    assert_int_equal(sizeof kinds / sizeof *kinds, VB_INDEX_HEADLINE_NKINDS);
    for (int k = 0; k < VB_INDEX_HEADLINE_NKINDS; k++) {
        char want[64];
        snprintf(want, sizeof want, "%s_samples_per_s", vb_trial_kinds[kinds[k]].column);
        assert_string_equal(headline[2 * k], want);
        snprintf(want, sizeof want, "%s_std", vb_trial_kinds[kinds[k]].column);
        assert_string_equal(headline[2 * k + 1], want);
    }
    /* every kind has a headline, is found by its name, and nothing else is */
    for (int k = 0; k < VB_TRIAL_NKINDS; k++) {
        bool listed = false;
        for (int h = 0; h < VB_INDEX_HEADLINE_NKINDS; h++) listed = listed || kinds[h] == (vb_trial_kind)k;
        assert_true(listed);
        assert_int_equal(vb_trial_kind_by_name(vb_trial_kinds[k].name), k);
        assert_non_null(strstr(vb_trial_kind_list(), vb_trial_kinds[k].name));
    }
    assert_int_equal(vb_trial_kind_by_name("full"), -1); /* the CSVs' spelling only */
    assert_int_equal(vb_trial_kind_by_name(""), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_dir_never_overwrites),
        cmocka_unit_test(test_stamped_claim_never_shares),
        cmocka_unit_test(test_run_dir_bad_output_dir_exits_2),
        cmocka_unit_test(test_atomic_write),
        cmocka_unit_test(test_atomic_write_full_disk_reports_errno),
        cmocka_unit_test(test_reserved_write_pads_and_parses),
        cmocka_unit_test(test_csv_formula_cells),
        cmocka_unit_test(test_csv_quoting),
        cmocka_unit_test(test_schema_names_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
