/* test_sweep.c: scenario expansion, bad scenario files, and the launch loop.
 *
 * The launch tests run real mpirun, but on THIS binary: the sweep launches
 * /proc/self/exe, and main() below acts as a stand-in `vitbench run` when its
 * first argument is "run" (creates the run directory, exits with the code
 * given by --seed 13 -> 3, sleeps for --seed 99). That checks fork/exec,
 * logs, index.csv statuses and the sweep going on after a failure without
 * needing the trainer.
 */
#include "tests/test_util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/sweep/sweep.h"
#include "bench/sweep/sweep_internal.h"
#include "core/util/common.h"

static char g_tmp[VB_PATH_MAX];
static int g_last_sweep_rc;

/* Data paths the preflight finds: the stand-in run reads nothing, but a
 * sweep refuses points whose data is missing. */
static char g_data_base[3 * VB_PATH_MAX];

static int setup(void **state) {
    (void)state;
    tu_tmpdir(g_tmp, sizeof g_tmp, "sweep");
    char out[256];
    if (tu_run(out, sizeof out, "mkdir -p %s/data/train && touch %s/data/means.npy %s/data/stds.npy", g_tmp, g_tmp,
               g_tmp) != 0)
        return -1;
    vb_snprintf(g_data_base, sizeof g_data_base,
                "base: {train_data_path: %s/data/train, global_means_path: %s/data/means.npy, "
                "global_stds_path: %s/data/stds.npy}\n",
                g_tmp, g_tmp, g_tmp);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tu_rm_rf(g_tmp);
    return 0;
}

static void write_text(char *path, size_t n, const char *name, const char *text) {
    vb_snprintf(path, n, "%s/%s", g_tmp, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expand_text(const char *text, const vb_sweep_overrides *o, vb_scenario *s, vb_sweep_plan *p) {
    char path[VB_PATH_MAX];
    write_text(path, sizeof path, "scenario.yaml", text);
    vb_scenario_load(s, path);
    vb_sweep_expand(s, o, p);
}

static const char *arg_of(const vb_sweep_run *r, const char *key) { return vb_sweep_kvs_get(&r->args, key); }

/* --------------------------------------------------------------------- */

static void test_matrix_product_counts_and_order(void **state) {
    (void)state;
    vb_scenario s;
    vb_sweep_plan p;
    expand_text("name: m\n"
                "base: {config: tiny}\n"
                "ranks: [1, 2]\n"
                "matrix:\n"
                "  noddp: [false, true]\n"
                "  bucket_cap_mb: [1, 5, 25]\n",
                NULL, &s, &p);
    assert_int_equal(p.nruns, 2 * 2 * 3);
    assert_int_equal(p.ncolumns, 2);
    assert_string_equal(p.columns[0], "noddp");
    assert_string_equal(p.columns[1], "bucket_cap_mb");
    /* ranks outermost, then the first matrix key, the last key fastest */
    static const char *noddp[] = {"false", "false", "false", "true", "true", "true"};
    static const char *bucket[] = {"1", "5", "25"};
    for (int i = 0; i < p.nruns; i++) {
        const vb_sweep_run *r = &p.runs[i];
        assert_int_equal(r->index, i);
        assert_int_equal(r->ranks, i < 6 ? 1 : 2);
        assert_string_equal(vb_sweep_kvs_get(&r->params, "noddp"), noddp[i % 6]);
        assert_string_equal(vb_sweep_kvs_get(&r->params, "bucket_cap_mb"), bucket[i % 3]);
        assert_string_equal(arg_of(r, "noddp"), noddp[i % 6]);
        assert_string_equal(arg_of(r, "config"), "tiny");
    }
    assert_string_equal(p.runs[0].name, "000_ranks=1_noddp=false_bucket_cap_mb=1");
    assert_string_equal(p.runs[11].name, "011_ranks=2_noddp=true_bucket_cap_mb=25");
    vb_sweep_plan_free(&p);
    vb_scenario_free(&s);

    /* no matrix: one run per rank count, no swept columns */
    expand_text("name: plain\nranks: [1, 2, 4]\n", NULL, &s, &p);
    assert_int_equal(p.nruns, 3);
    assert_int_equal(p.ncolumns, 0);
    assert_string_equal(p.runs[2].name, "002_ranks=4");
    vb_sweep_plan_free(&p);
    vb_scenario_free(&s);
}

static int count_layouts(int world, const char *extra, bool keep) {
    char text[512];
    snprintf(text, sizeof text,
             "name: l\nworld_size: %d\nlayouts:\n  orders: [tp-cp-dp, cp-tp-dp, dp-tp-cp]\n  keep_equivalent: %s\n%s",
             world, keep ? "true" : "false", extra);
    vb_scenario s;
    vb_sweep_plan p;
    expand_text(text, NULL, &s, &p);
    int n = p.nruns;
    /* every row is a valid factorization of the world with its order */
    for (int i = 0; i < p.nruns; i++) {
        int tp = atoi(vb_sweep_kvs_get(&p.runs[i].params, "tensor_parallel"));
        int cp = atoi(vb_sweep_kvs_get(&p.runs[i].params, "context_parallel"));
        assert_int_equal(p.runs[i].ranks, world);
        assert_int_equal(world % (tp * cp), 0);
        assert_non_null(arg_of(&p.runs[i], "parallel_order"));
        assert_string_equal(arg_of(&p.runs[i], "tensor_parallel"), vb_sweep_kvs_get(&p.runs[i].params, "tensor_parallel"));
    }
    vb_sweep_plan_free(&p);
    vb_scenario_free(&s);
    return n;
}

static void test_layouts_factorizations(void **state) {
    (void)state;
    /* ordered (tp, cp, dp) with product 4: 6; with product 8: 10 */
    assert_int_equal(count_layouts(4, "", true), 6 * 3);
    assert_int_equal(count_layouts(8, "", true), 10 * 3);
    /* equivalent orders dropped: a factorization with one dim > 1 runs once,
     * with two dims > 1 once per distinct relative order of those two (2 of
     * these 3 orders), with three dims > 1 all 3 orders.
     * world 4: 3*1 + 3*2 = 9; world 8: 3*1 + 6*2 + 1*3 = 18 */
    assert_int_equal(count_layouts(4, "", false), 9);
    assert_int_equal(count_layouts(8, "", false), 18);
    /* allowed values restrict the factorizations: tp in {1,2}, cp 1 -> (1,1,8) (2,1,4) */
    assert_int_equal(count_layouts(8, "  tensor_parallel: [1, 2]\n  context_parallel: [1]\n", false), 1 + 2);

    /* --world_size overrides the file, and layout rows come before matrix points */
    vb_scenario s;
    vb_sweep_plan p;
    vb_sweep_overrides o = {0};
    o.world_size = 2;
    expand_text("name: l\nworld_size: 64\nlayouts: {orders: [tp-cp-dp]}\nmatrix: {noddp: [false, true]}\n", &o, &s, &p);
    assert_int_equal(p.nruns, 3 * 2); /* (1,1,2) (1,2,1) (2,1,1) x noddp */
    assert_string_equal(p.columns[0], "tensor_parallel");
    assert_string_equal(p.columns[3], "noddp");
    assert_string_equal(p.runs[0].name, "000_ranks=2_tp=1_cp=1_order=tp-cp-dp_noddp=false");
    assert_string_equal(vb_sweep_kvs_get(&p.runs[1].params, "noddp"), "true");
    assert_string_equal(vb_sweep_kvs_get(&p.runs[2].params, "context_parallel"), "2");
    vb_sweep_plan_free(&p);
    vb_scenario_free(&s);
}

static void test_overrides_precedence_and_ranks(void **state) {
    (void)state;
    vb_scenario s;
    vb_sweep_plan p;
    vb_sweep_overrides o = {0};
    int nr;
    o.ranks = vb_sweep_parse_int_list("1,2", "flag --ranks", &nr);
    o.nranks = nr;
    vb_sweep_kvs_set(&o.config, "lr", "0.01");
    vb_sweep_kvs_set(&o.config, "seed", "3");
    vb_sweep_kvs_set(&o.config, "config", "tiny");
    expand_text("name: o\n"
                "base: &b {config: base, local_batch_size: 8, lr: 0.001}\n"
                "ranks: [1, 2, 4, 8]\n"
                "matrix: {noddp: [true]}\n",
                &o, &s, &p);
    assert_int_equal(p.nruns, 2); /* --ranks replaced the file's four */
    assert_int_equal(p.runs[1].ranks, 2);
    const vb_sweep_run *r = &p.runs[0];
    assert_string_equal(arg_of(r, "config"), "tiny");          /* command line beats base */
    assert_string_equal(arg_of(r, "lr"), "0.01");
    assert_string_equal(arg_of(r, "local_batch_size"), "8");   /* base kept */
    assert_string_equal(arg_of(r, "seed"), "3");               /* new key added */
    assert_string_equal(arg_of(r, "noddp"), "true");           /* swept */
    assert_null(arg_of(r, "output_dir"));                       /* the sweep adds it at launch */
    vb_sweep_plan_free(&p);
    vb_scenario_free(&s);
    free(o.ranks);
    vb_sweep_kvs_free(&o.config);
}

static void test_flags_form(void **state) {
    (void)state;
    vb_scenario s;
    vb_sweep_plan p;
    expand_text("name: f\n"
                "ranks: [1, 2]\n"
                "baseline: {num_data_workers: 0, noddp: false}\n"
                "flags:\n  num_data_workers: [1, 2]\n  noddp: [true]\n",
                NULL, &s, &p);
    assert_int_equal(p.nruns, 2 * (1 + 3));
    assert_string_equal(p.columns[0], "variant");
    assert_string_equal(p.columns[1], "num_data_workers");
    assert_string_equal(p.columns[2], "noddp");
    static const char *variant[] = {"baseline", "num_data_workers=1", "num_data_workers=2", "noddp=true"};
    static const char *workers[] = {"0", "1", "2", "0"};
    static const char *noddp[] = {"false", "false", "false", "true"};
    for (int i = 0; i < p.nruns; i++) {
        assert_string_equal(vb_sweep_kvs_get(&p.runs[i].params, "variant"), variant[i % 4]);
        assert_string_equal(arg_of(&p.runs[i], "num_data_workers"), workers[i % 4]);
        assert_string_equal(arg_of(&p.runs[i], "noddp"), noddp[i % 4]);
    }
    assert_string_equal(p.runs[0].name, "000_ranks=1_baseline");
    assert_string_equal(p.runs[7].name, "007_ranks=2_noddp=true");
    vb_sweep_plan_free(&p);
    vb_scenario_free(&s);
}

/* --------------------------------------------------------------------- */
/* vb_sweep_main in a child: exit status plus everything it printed */

/* tu_run_child's fn: vb_sweep_main on a NULL-ended args list, stdout joined to stderr */
static void sweep_main_child(void *ctx) {
    const char *const *args = ctx;
    if (dup2(2, 1) < 0) _exit(99);
    char *argv[64];
    int argc = 0;
    argv[argc++] = "sweep";
    for (int i = 0; args[i] && argc < 63; i++) argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    exit(vb_sweep_main(argc, argv));
}

static int sweep_child(char *out, size_t n, const char *const *args) {
    char *text = NULL;
    int rc = tu_run_child(sweep_main_child, (void *)args, 0, &text);
    snprintf(out, n, "%s", text);
    free(text);
    return rc;
}

/* scenario text (NULL: use `file` as given) + extra args -> exit 2, one line naming each needle */
static void expect_bad(const char *text, const char *const *extra, const char *const *needles) {
    char path[VB_PATH_MAX], outdir[VB_PATH_MAX];
    write_text(path, sizeof path, "bad.yaml", text ? text : "name: ok\n");
    vb_snprintf(outdir, sizeof outdir, "%s/bad_out", g_tmp);
    const char *args[32] = {path, "--dry-run", "--output_dir", outdir};
    int n = 4;
    for (int i = 0; extra && extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    const char *want[16];
    int k = 0;
    for (; needles[k]; k++) {
        assert_true(k < 15);
        want[k] = strcmp(needles[k], "@FILE") == 0 ? path : needles[k];
    }
    want[k] = NULL;
    tu_expect_exit_all(2, want, sweep_main_child, args);
    /* nothing created for a sweep that never started */
    assert_false(vb_dir_exists(outdir));
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_bad_files_exit_2(void **state) {
    (void)state;
    expect_bad("name: x\nmatrx: {noddp: [true]}\n", NULL, L("@FILE", "matrx", "line 2"));
    expect_bad("name: x\nmatrix: {nodp: [true]}\n", NULL, L("@FILE", "matrix.nodp", "nodp"));
    expect_bad("name: x\nbase: {local_batch_size: many}\n", NULL, L("@FILE", "base.local_batch_size", "many"));
    expect_bad("name: x\nmatrix: {noddp: [false, maybe]}\n", NULL, L("@FILE", "matrix.noddp", "maybe"));
    expect_bad("name: x\nranks: [1, 0]\n", NULL, L("@FILE", "ranks", "'0'"));
    expect_bad("name: x\nranks: [1, 2]\nworld_size: 4\nlayouts: {}\n", NULL, L("@FILE", "ranks", "world_size"));
    expect_bad("name: x\nworld_size: 4\nlayouts: {orders: [tp-pp-dp]}\n", NULL, L("@FILE", "layouts.orders", "tp-pp-dp"));
    expect_bad("name: x\nworld_size: 4\nlayouts: {order: [tp-cp-dp]}\n", NULL, L("@FILE", "layouts", "order"));
    expect_bad("name: x\nbaseline: {noddp: false}\nflags: {bucket_cap_mb: [1]}\n", NULL,
               L("@FILE", "flags.bucket_cap_mb", "baseline"));
    expect_bad("name: x\nbase: {noddp: true}\nmatrix: {noddp: [false, true]}\n", NULL, L("@FILE", "matrix.noddp", "base"));
    expect_bad("name: x\nbase: {output_dir: /tmp/elsewhere}\n", NULL, L("@FILE", "output_dir"));
    expect_bad("base: {config: tiny}\n", NULL, L("@FILE", "name"));
    expect_bad("name: x\nmatrix: {noddp: [true\n", NULL, L("@FILE", "malformed"));
    expect_bad("name: ../up\n", NULL, L("@FILE", "name", "../up"));
    /* a command that takes no run flags would pass, then fail at every point */
    expect_bad("name: x\ncommand: datagen\n", NULL, L("@FILE", "command (line 2)", "not datagen"));
    expect_bad("name: x\ncommand: report\n", NULL, L("@FILE", "command (line 2)", "not report"));
    expect_bad("name: x\ncommand: nosuch\n", NULL, L("@FILE", "command (line 2)", "not nosuch"));
    /* command-line mistakes name the flag */
    expect_bad("name: x\nmatrix: {noddp: [false, true]}\n", L("--noddp", "true"), L("--noddp", "matrix"));
    expect_bad(NULL, L("--ranks", "1,0"), L("--ranks", "'0'"));
    expect_bad(NULL, L("--launcher", "condor"), L("--launcher", "condor"));
    expect_bad(NULL, L("--world_size", "4"), L("--world_size", "layouts"));
    expect_bad(NULL, L("--run_name", "mine"), L("run_name"));
    expect_bad(NULL, L("--lr", "fast"), L("--lr", "fast"));
    expect_bad(NULL, L("--nosuchkey", "1"), L("nosuchkey"));
    /* a config name that does not exist would fail every run: caught up front */
    expect_bad(NULL, L("--config", "tny"), L("vit.yaml", "tny"));
    expect_bad("name: x\nmatrix: {config: [tiny, smal]}\n", NULL, L("vit.yaml", "smal"));

    /* a missing file names it */
    char missing[VB_PATH_MAX];
    vb_snprintf(missing, sizeof missing, "%s/nope.yaml", g_tmp);
    tu_expect_exit(2, missing, sweep_main_child, (void *)L(missing, "--dry-run"));
}

/* Dry runs of the shipped scenario files, sized as a 2-core machine runs them. */
static void test_dry_run_shipped_scenarios(void **state) {
    (void)state;
    static const struct {
        const char *file, *flag, *value;
        int rows;
    } cases[] = {
        {"weak_scaling", "--ranks", "1,2", 4},      {"strong_scaling", "--ranks", "1,2", 2},
        {"ddp_buckets", "--ranks", "2", 5},         {"tp_cp_layouts", "--world_size", "4", 9},
        {"optimization_flags", "--ranks", "1", 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char file[VB_PATH_MAX], outdir[VB_PATH_MAX], out[16384];
        vb_snprintf(file, sizeof file, "%s/scenarios/%s.yaml", tu_source_dir(), cases[c].file);
        vb_snprintf(outdir, sizeof outdir, "%s/dry_%s", g_tmp, cases[c].file);
        int rc = sweep_child(out, sizeof out,
                             L(file, "--dry-run", "--output_dir", outdir, cases[c].flag, cases[c].value, "--config", "tiny"));
        if (rc != 0) fail_msg("%s: exit %d: %s", cases[c].file, rc, out);
        /* one mpirun line per run */
        int lines = 0;
        for (const char *q = out; (q = strstr(q, "mpirun -np ")); q++) lines++;
        if (lines != cases[c].rows) fail_msg("%s: %d mpirun lines, want %d: %s", cases[c].file, lines, cases[c].rows, out);
        char cmd[2 * VB_PATH_MAX], found[VB_PATH_MAX];
        vb_snprintf(cmd, sizeof cmd, "ls -d %s/%s_*/index.csv", outdir, cases[c].file);
        assert_int_equal(tu_run(found, sizeof found, "%s", cmd), 0);
        found[strcspn(found, "\n")] = '\0';
        assert_int_equal(tu_count_lines(found), cases[c].rows + 1);
        char *csv = tu_read_file(found);
        assert_non_null(strstr(csv, "run_index,run_dir,status,exit_code,repeat,ranks,threads_per_rank"));
        assert_non_null(strstr(csv, "full_samples_per_s,full_std,synthetic_samples_per_s,synthetic_std,io_samples_per_s,io_std,"
                                    "validation_samples_per_s,validation_std,failure\n"));
        assert_non_null(strstr(csv, ",dry-run,,"));
        free(csv);
    }
}

/* --------------------------------------------------------------------- */
/* real launches of the stand-in run (see main) */

/* Runs a sweep of `text` (real mpirun, the stand-in run); returns the sweep
 * directory in dir and its index.csv text (caller frees). */
static char *launch_sweep(const char *text, const char *tag, const char *const *extra, char *dir, size_t n, char *out,
                          size_t outn) {
    char path[VB_PATH_MAX], outdir[VB_PATH_MAX], name[64], full[8192];
    snprintf(name, sizeof name, "%s.yaml", tag);
    vb_snprintf(full, sizeof full, "%s%s", g_data_base, text);
    write_text(path, sizeof path, name, full);
    vb_snprintf(outdir, sizeof outdir, "%s/%s_out", g_tmp, tag);
    const char *args[16] = {path, "--output_dir", outdir, "--launcher", "mpirun"};
    int k = 5;
    for (int i = 0; extra && extra[i]; i++) args[k++] = extra[i];
    args[k] = NULL;
    int rc = sweep_child(out, outn, args);
    g_last_sweep_rc = rc;
    if (rc != 0 && rc != 1) fail_msg("sweep exit %d: %s", rc, out);
    assert_int_equal(tu_run(dir, n, "ls -d %s/%s_*", outdir, tag), 0);
    dir[strcspn(dir, "\n")] = '\0';
    char p[2 * VB_PATH_MAX];
    vb_snprintf(p, sizeof p, "%s/index.csv", dir);
    char *csv = tu_read_file(p);
    assert_non_null(csv);
    return csv;
}

static void test_launch_records_failures_and_goes_on(void **state) {
    (void)state;
    char dir[VB_PATH_MAX], out[16384], p[2 * VB_PATH_MAX];
    /* seed 13 makes the stand-in exit 3 */
    char *csv = launch_sweep("name: launch\nranks: [1, 2]\nthreads_per_rank: 1\nmatrix: {seed: [1, 13]}\n", "launch",
                             L("--no_report"), dir, sizeof dir, out, sizeof out);
    /* run_index,run_dir,status,exit_code,repeat,ranks,threads_per_rank,seed,<headline: empty for the stand-in>,
     * failure (its class) */
    static const char *rows[] = {
        "0,runs/000_ranks=1_seed=1,completed,0,0,1,1,1,,,,,,,,,\n",
        "1,runs/001_ranks=1_seed=13,failed,3,0,1,1,13,,,,,,,,,exit 3\n",
        "2,runs/002_ranks=2_seed=1,completed,0,0,2,1,1,,,,,,,,,\n",
        "3,runs/003_ranks=2_seed=13,failed,3,0,2,1,13,,,,,,,,,exit 3\n",
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!strstr(csv, rows[i])) {
            vb_snprintf(p, sizeof p, "%s/logs/001_ranks=1_seed=13.log", dir);
            char *log = tu_read_file(p);
            fail_msg("index.csv lacks '%s':\n%s\nlog of run 1:\n%s", rows[i], csv, log ? log : "(none)");
        }
    }
    free(csv);
    /* the completed 2-rank run's directory exists, with a file from each rank */
    vb_snprintf(p, sizeof p, "%s/runs/002_ranks=2_seed=1/rank1", dir);
    assert_true(vb_file_exists(p));
    /* the child's output went to its log, after the command line */
    vb_snprintf(p, sizeof p, "%s/logs/003_ranks=2_seed=13.log", dir);
    char *log = tu_read_file(p);
    assert_non_null(log);
    assert_non_null(strstr(log, "# OMP_NUM_THREADS=1 mpirun -np 2 --oversubscribe -x OMP_NUM_THREADS --bind-to none "));
    assert_non_null(strstr(log, "stand-in run failing on purpose"));
    free(log);
    assert_non_null(strstr(out, "2 of 4 runs failed"));
    assert_int_equal(g_last_sweep_rc, 1); /* a sweep with failed runs exits 1 */
}

/* A run killed outright cannot record its end: the sweep marks its run.json
 * failed with the exit status. */
static void test_killed_run_marked_failed(void **state) {
    (void)state;
    char dir[VB_PATH_MAX], out[8192], p[2 * VB_PATH_MAX];
    char *csv = launch_sweep("name: killed\nranks: [1]\nthreads_per_rank: 1\nmatrix: {seed: [77]}\n", "killed",
                             L("--no_report"), dir, sizeof dir, out, sizeof out);
    if (!strstr(csv, "0,runs/000_ranks=1_seed=77,failed,")) fail_msg("killed row missing:\n%s", csv);
    free(csv);
    vb_snprintf(p, sizeof p, "%s/runs/000_ranks=1_seed=77/run.json", dir);
    char *j = tu_read_file(p);
    assert_non_null(j);
    if (!strstr(j, "\"failed\"") || !strstr(j, "before it could record its end")) fail_msg("run.json: %s", j);
    free(j);
}

static void test_launch_timeout_kills_run(void **state) {
    (void)state;
    char dir[VB_PATH_MAX], out[8192];
    /* seed 99 makes the stand-in sleep 30 s; mpirun itself takes ~2 s to start here */
    double t0 = vb_now();
    char *csv = launch_sweep("name: slow\nranks: [1]\nmatrix: {seed: [99]}\ntimeout_s: 60\n", "slow",
                             L("--timeout_s", "5", "--no_report"), dir, sizeof dir, out, sizeof out);
    /* the sweep stopped it with SIGTERM: recorded as 128 + 15, whatever mpirun exited with */
    if (!strstr(csv, "0,runs/000_ranks=1_seed=99,failed,143,")) fail_msg("timeout row missing:\n%s", csv);
    free(csv);
    assert_true(vb_now() - t0 < 25); /* --timeout_s beat the file's 60 and the 30 s sleep */
    assert_non_null(strstr(out, "timeout"));
}

static void test_sbatch_dry_run_writes_job_scripts(void **state) {
    (void)state;
    char path[VB_PATH_MAX], outdir[VB_PATH_MAX], out[8192];
    write_text(path, sizeof path, "sb.yaml",
               "name: sb\nranks: [2, 8]\nranks_per_node: 4\nsbatch: {time: '00:10:00', qos: debug}\n"
               "matrix: {noddp: [false]}\n");
    vb_snprintf(outdir, sizeof outdir, "%s/sb_out", g_tmp);
    int rc = sweep_child(out, sizeof out, L(path, "--dry-run", "--launcher", "sbatch", "--output_dir", outdir));
    if (rc != 0) fail_msg("exit %d: %s", rc, out);
    char found[VB_PATH_MAX];
    assert_int_equal(tu_run(found, sizeof found, "ls -d %s/sb_*", outdir), 0);
    found[strcspn(found, "\n")] = '\0';
    char p[2 * VB_PATH_MAX];
    vb_snprintf(p, sizeof p, "%s/jobs/001_ranks=8_noddp=false.sbatch", found);
    char *job = tu_read_file(p);
    if (!job) fail_msg("no job script %s; output: %s", p, out);
    static const char *want[] = {"#!/bin/bash", "#SBATCH --ntasks=8\n", "#SBATCH --nodes=2\n",
                                 "#SBATCH --ntasks-per-node=4\n", "#SBATCH --time=00:10:00\n", "#SBATCH --qos=debug\n",
                                 "#SBATCH --job-name=sb_001\n", "logs/001_ranks=8_noddp=false.log",
                                 "srun --ntasks=8 --nodes=2 --ntasks-per-node=4 ", " run --noddp false --output_dir ",
                                 "--run_name 001_ranks=8_noddp=false"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(job, want[i])) fail_msg("job script lacks '%s':\n%s", want[i], job);
    free(job);
    vb_snprintf(p, sizeof p, "%s/jobs/000_ranks=2_noddp=false.sbatch", found);
    job = tu_read_file(p);
    assert_non_null(job);
    assert_non_null(strstr(job, "#SBATCH --nodes=1\n"));
    assert_non_null(strstr(job, "#SBATCH --ntasks-per-node=2\n"));
    free(job);
    assert_non_null(strstr(out, "sbatch "));
    vb_snprintf(p, sizeof p, "%s/index.csv", found);
    assert_int_equal(tu_count_lines(p), 3);
}

/* Slurm's time limit formats, and the ones it would reject. */
static void test_slurm_time_formats(void **state) {
    (void)state;
    static const char *good[] = {"30", "00:30:00", "1:00:00", "45:30", "1-0", "2-12", "1-12:30", "1-12:30:15",
                                 "0-00:10:00", "1440"};
    static const char *bad[] = {"", "0", "00:00:00", "1:75:00", "10:60", "1-24", "1-1:60", "1:2:3:4", "-5", "1-",
                                "30m", "1h", "00:30:00 ", " 30", "1--2", "a-1", "12345-1", "1:2-3"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (!vb_sweep_slurm_time_ok(good[i])) fail_msg("'%s' refused", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (vb_sweep_slurm_time_ok(bad[i])) fail_msg("'%s' accepted", bad[i]);
}

/* The Slurm keys of a scenario file, the sbatch: mapping's time / account
 * folded into them, and what the file gets wrong naming file and key. */
static void test_slurm_keys(void **state) {
    (void)state;
    vb_scenario s;
    vb_sweep_plan p;
    expand_text("name: k\nranks: [4]\nnodes: 2\ngpus_per_node: 4\ncpus_per_task: 32\ntime: '1-00:00'\n"
                "qos: regular\nconstraint: 'gpu&hbm80g'\npartition: p1\nreservation: r1\ngpu_bind: closest\n"
                "srun_mpi: pmix\nsweep_job: true\nsbatch_extra: ['--mail-type=END', '--signal=B:USR1@60']\n"
                "preamble: [module load a, 'export X=\"1 2\"']\nsbatch: {account: m0000, exclusive: ''}\n",
                NULL, &s, &p);
    assert_int_equal(s.slurm.nodes, 2);
    assert_int_equal(s.slurm.gpus_per_node, 4);
    assert_int_equal(s.slurm.cpus_per_task, 32);
    assert_string_equal(s.slurm.time, "1-00:00");
    assert_string_equal(s.slurm.account, "m0000"); /* from sbatch: */
    assert_string_equal(s.slurm.constraint, "gpu&hbm80g");
    assert_string_equal(s.slurm.gpu_bind, "closest");
    assert_string_equal(s.slurm.srun_mpi, "pmix");
    assert_true(s.slurm.sweep_job);
    assert_int_equal(s.slurm.nsbatch_extra, 2);
    assert_string_equal(s.slurm.sbatch_extra[1], "--signal=B:USR1@60");
    assert_int_equal(s.slurm.npreamble, 2);
    assert_string_equal(s.slurm.preamble[1], "export X=\"1 2\"");
    assert_int_equal(s.sbatch.n, 1); /* exclusive stays an extra option; account moved */
    assert_string_equal(s.sbatch.v[0].key, "exclusive");
    vb_sweep_plan_free(&p);
    vb_scenario_free(&s);

    expect_bad("name: x\ntime: 90:99\n", NULL, L("@FILE", "time", "90:99"));
    expect_bad("name: x\ntime: 30\nsbatch: {time: 40}\n", NULL, L("@FILE", "sbatch.time", "time"));
    expect_bad("name: x\nsbatch: {cpus-per-task: 4}\n", NULL, L("@FILE", "sbatch", "cpus_per_task"));
    expect_bad("name: x\nsbatch_extra: [--ntasks=4]\n", NULL, L("@FILE", "sbatch_extra", "ranks"));
    expect_bad("name: x\npreamble: {a: b}\n", NULL, L("@FILE", "preamble", "mapping"));
    expect_bad("name: x\nqos: 'two words'\n", NULL, L("@FILE", "qos"));
    expect_bad("name: x\ngpus_per_node: -1\n", NULL, L("@FILE", "gpus_per_node", "-1"));
    expect_bad("name: x\nsweep_job: sometimes\n", NULL, L("@FILE", "sweep_job", "sometimes"));
    expect_bad("name: x\nranks: [6]\nranks_per_node: 4\n", L("--launcher", "sbatch"), L("@FILE", "ranks_per_node", "6"));
    expect_bad("name: x\nranks: [4]\nranks_per_node: 4\ngpus_per_node: 4\n", L("--launcher", "sbatch"),
               L("@FILE", "gpus_per_node", "backend"));
    expect_bad(NULL, L("--launcher", "sbatch", "--time", "soon"), L("--time", "soon"));
    expect_bad(NULL, L("--sweep_job"), L("sweep_job", "sbatch"));
}

/* Each scheduler's time limit as its own command reads it: LSF's -W
 * [hour:]minute, PBS's walltime [[h:]m:]s (a bare number is seconds there, so
 * at least m:s is asked), Flux's minutes or standard duration. */
static void test_scheduler_time_formats(void **state) {
    (void)state;
    static const struct {
        const sweep_scheduler *sc;
        const char *good[10], *bad[16];
    } cases[] = {
        {&sweep_sched_lsf, {"30", "0:30", "2:00", "10:59", "90", "1:5"},
         {"", "0", "0:00", "1:60", "1:5:0", "1:", ":30", "30m", "00:30:00", "1:075", " 30", "1/hostA"}},
        {&sweep_sched_pbs, {"00:30:00", "30:00", "1:00:00", "100:00:00", "0:0:1", "0:59"},
         {"", "30", "0:00", "1:75:00", "1:2:3:4", "1h", ":30", "10:60", "1:00:00 ", "a:00", "0:00:00", "-1:00"}},
        {&sweep_sched_flux, {"30", "30m", "1.5h", "2d", "0.5", "45s", ".5m"},
         {"", "0", "0m", "1:00", "m", "1.2.3", "30 m", "-5", "1hh", "30M", "1e3", "inf"}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int i = 0; cases[c].good[i]; i++)
            if (!cases[c].sc->time_ok(cases[c].good[i])) fail_msg("%s: '%s' refused", cases[c].sc->name, cases[c].good[i]);
        for (int i = 0; cases[c].bad[i]; i++)
            if (cases[c].sc->time_ok(cases[c].bad[i])) fail_msg("%s: '%s' accepted", cases[c].sc->name, cases[c].bad[i]);
    }
}

/* The job id in what each submit command prints, and nothing where it
 * printed none. */
static void test_scheduler_job_ids(void **state) {
    (void)state;
    static const struct {
        const sweep_scheduler *sc;
        const char *line, *id; /* id NULL: none */
    } cases[] = {
        {&sweep_sched_slurm, "Submitted batch job 123\n", "123"},
        {&sweep_sched_slurm, "123;perlmutter\n", "123"},
        {&sweep_sched_slurm, "sbatch: error: Batch job submission failed\n", NULL},
        {&sweep_sched_lsf, "Job <4242> is submitted to queue <debug>.\n", "4242"},
        {&sweep_sched_lsf, "Job <4242> is submitted to default queue <batch>.\n", "4242"},
        {&sweep_sched_lsf, "Job <abc> is submitted\n", NULL},
        {&sweep_sched_lsf, "Project not specified. Job not submitted.\n", NULL},
        {&sweep_sched_pbs, "4242.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov\n", "4242.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"},
        {&sweep_sched_pbs, "4242[].pbs01\n", "4242[].pbs01"},
        {&sweep_sched_pbs, "qsub: Unknown queue\n", NULL},
        {&sweep_sched_flux, "\xc6\x92" "2FS\n", "\xc6\x92" "2FS"},
        {&sweep_sched_flux, "f2FS\n", "f2FS"},
        {&sweep_sched_flux, "flux-batch: ERROR: Number of slots to allocate must be specified\n", NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char id[128] = "";
        bool got = cases[c].sc->job_id(cases[c].line, id, sizeof id);
        if (got != (cases[c].id != NULL) || (got && strcmp(id, cases[c].id) != 0))
            fail_msg("%s: '%s' gave %s '%s', want %s", cases[c].sc->name, cases[c].line, got ? "an id" : "no id", id,
                     cases[c].id ? cases[c].id : "none");
    }
}

/* status/<run>.job: the id of the latest submission (the submit log is
 * appended to, so a run submitted again has its earlier id first), with
 * its scheduler; a bare id from before other schedulers is Slurm's. An id
 * is the sweep's own scheduler's, by its grammar: a file naming another
 * scheduler, 0 or an option is no id. */
static void test_job_ids_recorded(void **state) {
    (void)state;
    char dir[VB_PATH_MAX], log[VB_PATH_MAX], path[VB_PATH_MAX], id[128];
    vb_snprintf(dir, sizeof dir, "%s/jobs_rec", g_tmp);
    vb_snprintf(path, sizeof path, "%s/status", dir);
    assert_int_equal(vb_mkdir_p(path), 0);
    vb_snprintf(path, sizeof path, "%s/logs", dir);
    assert_int_equal(vb_mkdir_p(path), 0);
    sweep_tree t;
    sweep_tree_open(&t, dir, true);
    write_text(log, sizeof log, "jobs_rec/logs/r.submit.log",
               "Job <11> is submitted to queue <debug>.\nJob <12> is submitted to queue <debug>.\n");
    sweep_record_job(&t, "r", "r.submit.log", &sweep_sched_lsf);
    vb_snprintf(path, sizeof path, "%s/status/r.job", dir);
    char *text = tu_read_file(path);
    assert_string_equal(text, "lsf 12\n");
    free(text);
    assert_true(sweep_read_job(&t, &sweep_sched_lsf, "r", id, sizeof id));
    assert_string_equal(id, "12");
    /* the tag does not pick the scheduler: an LSF sweep's file read as Slurm's is none */
    assert_false(sweep_read_job(&t, &sweep_sched_slurm, "r", id, sizeof id));
    write_text(path, sizeof path, "jobs_rec/status/old.job", "4242\n");
    assert_true(sweep_read_job(&t, &sweep_sched_slurm, "old", id, sizeof id));
    assert_string_equal(id, "4242");
    assert_false(sweep_read_job(&t, &sweep_sched_lsf, "old", id, sizeof id));
    /* Slurm's as it always was: the id alone */
    write_text(log, sizeof log, "jobs_rec/logs/s.submit.log", "Submitted batch job 77\n");
    sweep_record_job(&t, "s", "s.submit.log", &sweep_sched_slurm);
    vb_snprintf(path, sizeof path, "%s/status/s.job", dir);
    text = tu_read_file(path);
    assert_string_equal(text, "77\n");
    free(text);
    assert_true(sweep_read_job(&t, &sweep_sched_slurm, "s", id, sizeof id));
    write_text(path, sizeof path, "jobs_rec/status/odd.job", "condor 1\n");
    assert_false(sweep_read_job(&t, &sweep_sched_lsf, "odd", id, sizeof id));
    assert_false(sweep_read_job(&t, &sweep_sched_lsf, "none", id, sizeof id));
    /* what would cancel more than the job: 0 (bkill 0: every job of the
     * user), options, another scheduler's id under the sweep's tag */
    static const struct {
        const sweep_scheduler *sc;
        const char *text;
    } refused[] = {{&sweep_sched_lsf, "lsf 0\n"},          {&sweep_sched_lsf, "lsf -u\n"},
                   {&sweep_sched_lsf, "lsf 12 13\n"},      {&sweep_sched_slurm, "--user=root\n"},
                   {&sweep_sched_slurm, "0\n"},            {&sweep_sched_slurm, "007\n"},
                   {&sweep_sched_pbs, "pbs -Wforce\n"},    {&sweep_sched_pbs, "pbs 12.-x\n"},
                   {&sweep_sched_flux, "flux --all\n"},    {&sweep_sched_flux, "flux f0OIl\n"},
                   {&sweep_sched_flux, "flux 0\n"},        {&sweep_sched_lsf, "lsf 12[x]\n"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        write_text(path, sizeof path, "jobs_rec/status/bad.job", refused[i].text);
        if (sweep_read_job(&t, refused[i].sc, "bad", id, sizeof id))
            fail_msg("%s: '%s' read as job id '%s'", refused[i].sc->name, refused[i].text, id);
    }
    static const struct {
        const sweep_scheduler *sc;
        const char *text, *id;
    } taken[] = {{&sweep_sched_slurm, "123_4\n", "123_4"},       {&sweep_sched_lsf, "lsf 123[4]\n", "123[4]"},
                 {&sweep_sched_pbs, "pbs 123.server\n", "123.server"}, {&sweep_sched_pbs, "pbs 9[].pbs01\n", "9[].pbs01"},
                 {&sweep_sched_flux, "flux f2FS\n", "f2FS"},     {&sweep_sched_flux, "flux \xc6\x92" "2FS\n", "\xc6\x92" "2FS"}};
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) {
        write_text(path, sizeof path, "jobs_rec/status/good.job", taken[i].text);
        if (!sweep_read_job(&t, taken[i].sc, "good", id, sizeof id) || strcmp(id, taken[i].id) != 0)
            fail_msg("%s: '%s' not read as job id '%s'", taken[i].sc->name, taken[i].text, taken[i].id);
    }
    sweep_tree_close(&t);
}

/* The cluster: block holds every scheduler's keys, each set once (there or
 * at the top level); the launcher's scheduler refuses the others'. */
static void test_cluster_block(void **state) {
    (void)state;
    vb_scenario s;
    vb_sweep_plan p;
    expand_text("name: c\nranks: [6, 12]\nranks_per_node: 6\ncluster:\n  gpus_per_node: 6\n  time: '0:30'\n"
                "  account: stf218\n  alloc_flags: gpumps smt4\n  smpiargs: -disable_gpu_hooks\n  queue: debug\n"
                "  bsub_extra: ['-B', '-wa USR1 -wt 5']\n  preamble: [module load cuda]\n",
                NULL, &s, &p);
    assert_int_equal(s.slurm.gpus_per_node, 6);
    assert_string_equal(s.slurm.time, "0:30");
    assert_string_equal(s.slurm.account, "stf218");
    assert_string_equal(s.slurm.alloc_flags, "gpumps smt4");
    assert_string_equal(s.slurm.smpiargs, "-disable_gpu_hooks");
    assert_string_equal(s.slurm.queue, "debug");
    assert_int_equal(s.slurm.nbsub_extra, 2);
    assert_string_equal(s.slurm.bsub_extra[1], "-wa USR1 -wt 5");
    assert_int_equal(s.slurm.npreamble, 1);
    assert_non_null(strstr(sweep_key_origin(&s, "time"), "cluster.time (line 6)"));
    vb_sweep_plan_free(&p);
    vb_scenario_free(&s);

    expect_bad("name: x\ntime: 30\ncluster: {time: 40}\n", NULL, L("@FILE", "cluster.time", "also set", "time (line 2)"));
    expect_bad("name: x\ncluster: {nodez: 2}\n", NULL, L("@FILE", "cluster", "nodez", "known:"));
    expect_bad("name: x\ncluster: {preamble: {a: b}}\n", NULL, L("@FILE", "cluster.preamble", "mapping"));
    expect_bad("name: x\ncluster: {resource_set: per_gpu}\n", NULL, L("@FILE", "resource_set", "per_task|per_node"));
    expect_bad("name: x\ncluster: {time: '1:75'}\n", NULL, L("@FILE", "cluster.time", "1:75", "no scheduler"));
    /* a key the launcher's scheduler does not take names where it was set */
    expect_bad("name: x\nranks: [2]\nranks_per_node: 2\ncluster: {alloc_flags: smt4}\n", L("--launcher", "sbatch"),
               L("@FILE", "cluster.alloc_flags", "Slurm's keys", "sbatch_extra"));
    expect_bad("name: x\nranks: [2]\nranks_per_node: 2\nqos: regular\n", L("--launcher", "qsub"),
               L("@FILE", "qos (line 4)", "PBS's keys"));
    expect_bad(NULL, L("--launcher", "flux-batch", "--ranks_per_node", "1", "--account", "a1"),
               L("flag --account", "Flux's keys"));
    expect_bad("name: x\nranks: [2]\nranks_per_node: 2\nsbatch: {exclusive: ''}\n", L("--launcher", "bsub"),
               L("@FILE", "sbatch.exclusive", "Slurm's"));
    /* the keys wait under mpirun, which has no scheduler: a cluster file tried on one machine */
    expand_text("name: m\ncluster: {alloc_flags: smt4, qos: regular}\n", NULL, &s, &p);
    sweep_cluster_check(&s, &p, LAUNCH_MPIRUN, 0);
    vb_sweep_plan_free(&p);
    vb_scenario_free(&s);
}

/* run_names: the points named from a template ({nodes}, {ranks}, {index},
 * swept keys), checked for characters and for two points named alike. */
static void test_run_names(void **state) {
    (void)state;
    vb_scenario s;
    vb_sweep_plan p;
    expand_text("name: w\nranks: [6, 12, 24]\nranks_per_node: 6\nrun_names: weak_scale_{nodes}\n", NULL, &s, &p);
    assert_int_equal(p.nruns, 3);
    assert_string_equal(p.runs[0].name, "weak_scale_1");
    assert_string_equal(p.runs[2].name, "weak_scale_4");
    vb_sweep_plan_free(&p);
    vb_scenario_free(&s);
    expand_text("name: w\nranks: [1, 2]\nrun_names: '{index}_r{ranks}_{noddp}'\nmatrix: {noddp: [false, true]}\n", NULL,
                &s, &p);
    assert_int_equal(p.nruns, 4);
    assert_string_equal(p.runs[3].name, "003_r2_true");
    vb_sweep_plan_free(&p);
    vb_scenario_free(&s);

    expect_bad("name: x\nranks: [1, 2]\nrun_names: same\n", NULL, L("@FILE", "run_names", "names two points same"));
    expect_bad("name: x\nrun_names: 'a/{ranks}'\n", NULL, L("@FILE", "run_names (line 2)", "a/{ranks}"));
    expect_bad("name: x\nrun_names: 'r{Ranks}'\n", NULL, L("@FILE", "run_names", "r{Ranks}"));
    expect_bad("name: x\nrun_names: 'r_{seed}'\n", NULL, L("@FILE", "run_names", "{seed}", "swept key"));
    expect_bad("name: x\nrun_names: 'n{nodes}'\n", NULL, L("@FILE", "run_names", "{nodes}", "ranks_per_node"));
}

/* A CR or LF in any value that reaches a job script or a launcher line is
 * refused, one line naming where it came from, before anything is created:
 * config values in base / matrix / baseline / flags, the sbatch: mapping,
 * the Slurm keys, and the same as flags. */
static void test_line_breaks_refused(void **state) {
    (void)state;
    const char *const sb[] = {"--launcher", "sbatch", NULL};
    expect_bad("name: x\nbase: {train_data_path: \"/d\\ntouch /tmp/x\"}\n", sb,
               L("@FILE", "base.train_data_path", "line break", "\\n"));
    expect_bad("name: x\nmatrix: {train_data_path: [/a, \"/b\\rc\"]}\n", NULL,
               L("@FILE", "matrix.train_data_path", "line break", "\\r"));
    expect_bad("name: x\nbaseline: {valid_data_path: /v}\nflags: {valid_data_path: [\"/w\\nx\"]}\n", NULL,
               L("@FILE", "flags.valid_data_path", "line break"));
    expect_bad("name: x\nsbatch: {comment: \"a\\nb\"}\n", sb, L("@FILE", "sbatch.comment", "line break"));
    expect_bad("name: x\nsbatch: {account: \"a\\rb\"}\n", sb, L("@FILE", "sbatch.account", "line break"));
    expect_bad("name: x\npreamble: [\"echo a\\recho b\"]\n", sb, L("@FILE", "preamble", "line break"));
    expect_bad(NULL, L("--launcher", "sbatch", "--valid_data_path", "/v\n/w"), L("--valid_data_path", "line break"));
    expect_bad(NULL, L("--launcher_args", "--tag-output\n--x"), L("--launcher_args", "line break"));
    expect_bad(NULL, L("--launcher", "sbatch", "--qos", "q\r"), L("--qos", "line break"));
    char outdir[VB_PATH_MAX];
    vb_snprintf(outdir, sizeof outdir, "%s/nl\ntouch %s/pwned #", g_tmp, g_tmp);
    expect_bad(NULL, L("--launcher", "sbatch", "--output_dir", outdir), L("--output_dir", "line break"));
    assert_false(vb_dir_exists(outdir));
}

/* sweep_fput_quoted writes one shell word on one line whatever it holds:
 * bash reads every test word back byte for byte, and no CR or LF reaches the
 * file (one would end the line of a job script inside the quotes). */
static void test_fput_quoted_one_line(void **state) {
    (void)state;
    static const char *words[] = {"plain-word_1.x", "two words", "it's", "a\nb", "cr\rlf\r\n", "\n",
                                  "'\n'", "$HOME `id` \"q\" #c", ""};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        char script[VB_PATH_MAX], got_path[VB_PATH_MAX];
        vb_snprintf(script, sizeof script, "%s/quoted.sh", g_tmp);
        vb_snprintf(got_path, sizeof got_path, "%s/quoted.out", g_tmp);
        FILE *f = fopen(script, "w");
        assert_non_null(f);
        fputs("printf '%s' ", f);
        sweep_fput_quoted(f, words[i]);
        fputc('\n', f);
        fclose(f);
        char *text = tu_read_file(script);
        assert_non_null(text);
        size_t len = strlen(text);
        if (strpbrk(text, "\r") || strchr(text, '\n') != text + len - 1)
            fail_msg("word %zu is not on one line: <<%s>>", i, text);
        free(text);
        char out[256];
        if (tu_run(out, sizeof out, "bash %s >%s", script, got_path) != 0) fail_msg("bash %s: %s", script, out);
        char *got = tu_read_file(got_path);
        assert_non_null(got);
        if (strcmp(got, words[i]) != 0) fail_msg("word %zu came back as <<%s>>", i, got);
        free(got);
    }
}

/* --------------------------------------------------------------------- */

/* Stand-in for `vitbench run` when the sweep launches this binary. */
static int stand_in_run(int argc, char **argv) {
    const char *out = NULL, *name = NULL, *seed = "0";
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--output_dir") == 0) out = argv[i + 1];
        if (strcmp(argv[i], "--run_name") == 0) name = argv[i + 1];
        if (strcmp(argv[i], "--seed") == 0) seed = argv[i + 1];
    }
    if (!out || !name) return 2;
    if (strcmp(seed, "99") == 0) sleep(30);
    if (strcmp(seed, "77") == 0) { /* killed outright with its run.json still "running" */
        char d[2 * VB_PATH_MAX], j[3 * VB_PATH_MAX];
        snprintf(d, sizeof d, "%s/%s", out, name);
        mkdir(d, 0775);
        snprintf(j, sizeof j, "%s/run.json", d);
        FILE *fj = fopen(j, "w");
        if (fj) {
            fputs("{\"run_id\": \"x\", \"status\": \"running\"}\n", fj);
            fclose(fj);
        }
        raise(SIGKILL);
    }
    if (strcmp(seed, "13") == 0) {
        fprintf(stderr, "stand-in run failing on purpose\n");
        return 3;
    }
    char dir[2 * VB_PATH_MAX], f[3 * VB_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", out, name);
    if (mkdir(dir, 0775) != 0 && errno != EEXIST) return 1;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    snprintf(f, sizeof f, "%s/rank%s", dir, rank ? rank : "0");
    FILE *fp = fopen(f, "w");
    if (!fp) return 1;
    fclose(fp);
    return 0;
}

/* The run_dir column of every row of a dry run's index.csv, in order. */
static int dry_run_dirs(const char *text, const char *tag, const char *const *extra, char dirs[][128], int max) {
    char path[VB_PATH_MAX], outdir[VB_PATH_MAX], name[64], full[8192], out[16384];
    snprintf(name, sizeof name, "%s.yaml", tag);
    vb_snprintf(full, sizeof full, "%s%s", g_data_base, text);
    write_text(path, sizeof path, name, full);
    vb_snprintf(outdir, sizeof outdir, "%s/%s_out", g_tmp, tag);
    const char *args[16] = {path, "--output_dir", outdir, "--dry-run"};
    int k = 4;
    for (int i = 0; extra && extra[i]; i++) args[k++] = extra[i];
    args[k] = NULL;
    int rc = sweep_child(out, sizeof out, args);
    if (rc != 0) fail_msg("dry run exit %d: %s", rc, out);
    char dir[VB_PATH_MAX], p[2 * VB_PATH_MAX];
    assert_int_equal(tu_run(dir, sizeof dir, "ls -d %s/*/ | tail -1", outdir), 0);
    dir[strcspn(dir, "\n")] = '\0';
    vb_snprintf(p, sizeof p, "%s/index.csv", dir);
    char *csv = tu_read_file(p);
    assert_non_null(csv);
    int n = 0;
    for (char *line = strchr(csv, '\n') + 1; *line && n < max; line = strchr(line, '\n') + 1) {
        char *c1 = strchr(line, ',') + 1;
        size_t len = strcspn(c1, ",");
        if (len >= 128) len = 127;
        memcpy(dirs[n], c1, len);
        dirs[n][len] = '\0';
        n++;
    }
    free(csv);
    return n;
}

/* repeats run in rounds: every point once per round; shuffled rounds are
 * permutations fixed by the seed, and differ between rounds and seeds. */
static void test_repeats_in_rounds_and_shuffled(void **state) {
    (void)state;
    const char *text = "name: rounds\nranks: [1]\nmatrix: {seed: [1, 2, 3, 4, 5, 6]}\n";
    char a[16][128], b[16][128], c[16][128];
    int n = dry_run_dirs(text, "rounds", L("--repeats", "2", "--order", "sequential"), a, 16);
    assert_int_equal(n, 12);
    /* sequential: plan order in each round, named by point and repeat */
    assert_string_equal(a[0], "runs/000_ranks=1_seed=1_rep=0");
    assert_string_equal(a[5], "runs/005_ranks=1_seed=6_rep=0");
    assert_string_equal(a[6], "runs/000_ranks=1_seed=1_rep=1");
    n = dry_run_dirs(text, "shuf1", L("--repeats", "2", "--order", "shuffled", "--order_seed", "7"), b, 16);
    assert_int_equal(n, 12);
    int n2 = dry_run_dirs(text, "shuf2", L("--repeats", "2", "--order", "shuffled", "--order_seed", "7"), c, 16);
    assert_int_equal(n2, 12);
    bool same_seed_same = true, round_differs = false, differs_from_plan = false;
    for (int i = 0; i < 12; i++) same_seed_same &= strcmp(b[i], c[i]) == 0;
    assert_true(same_seed_same);
    for (int round = 0; round < 2; round++) {
        /* each round holds every point exactly once */
        for (int pt = 0; pt < 6; pt++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "runs/%03d_", pt);
            int hits = 0;
            for (int i = 0; i < 6; i++) hits += strncmp(b[round * 6 + i], prefix, strlen(prefix)) == 0;
            assert_int_equal(hits, 1);
        }
    }
    for (int i = 0; i < 6; i++) {
        round_differs |= strncmp(b[i], b[6 + i], 9) != 0;
        differs_from_plan |= strncmp(b[i], a[i], 9) != 0;
    }
    assert_true(round_differs);
    assert_true(differs_from_plan);
    /* with repeats and no order given, rounds are shuffled (seed 0): the
     * first planned point does not always run first on a cold machine */
    char d0[16][128], s0[16][128];
    n = dry_run_dirs(text, "dflt", L("--repeats", "2"), d0, 16);
    assert_int_equal(n, 12);
    n2 = dry_run_dirs(text, "shuf0", L("--repeats", "2", "--order", "shuffled", "--order_seed", "0"), s0, 16);
    assert_int_equal(n2, 12);
    for (int i = 0; i < 12; i++) assert_string_equal(d0[i], s0[i]);
    bool dflt_differs = false;
    for (int i = 0; i < 6; i++) dflt_differs |= strncmp(d0[i], a[i], 9) != 0;
    assert_true(dflt_differs);
}

/* A point that `vitbench run` would refuse stops the sweep before anything
 * is created: one line naming the point, exit 2. */
static void test_preflight_refuses_bad_points(void **state) {
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"name: pf1\nranks: [2]\nmatrix: {tensor_parallel: [1, 3]}\n",
         "point 001_ranks=2_tp=3: 2 ranks: world size 2 is not divisible"},
        {"name: pf2\nranks: [1]\nmatrix: {embed_dim: [64, -3]}\n", "embed_dim"},
        {"name: pf3\nranks: [1, 3]\nmatrix: {global_batch_size: [4]}\n", "point 001_ranks=3_global_batch_size=4: 3 ranks"},
        {"name: pf4\nranks: [1]\nmatrix: {config: [tiny], num_heads: [3]}\n", "num_heads"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[VB_PATH_MAX], outdir[VB_PATH_MAX], full[8192], out[8192], name[32];
        snprintf(name, sizeof name, "pf%zu.yaml", i);
        vb_snprintf(full, sizeof full, "%s%s", g_data_base, cases[i].text);
        write_text(path, sizeof path, name, full);
        vb_snprintf(outdir, sizeof outdir, "%s/pf_out%zu", g_tmp, i);
        int rc = sweep_child(out, sizeof out, L(path, "--output_dir", outdir, "--launcher", "mpirun"));
        if (rc != 2 || !strstr(out, cases[i].want)) fail_msg("case %zu: exit %d, want 2 and '%s': %s", i, rc, cases[i].want, out);
        int lines = 0;
        for (const char *q = out; *q; q++) lines += *q == '\n';
        if (lines != 1) fail_msg("case %zu: want one line: %s", i, out);
        assert_false(vb_dir_exists(outdir)); /* refused before anything was created */
    }
    /* missing data: named, exit 2, for a real launch */
    char path[VB_PATH_MAX], outdir[VB_PATH_MAX], out[8192];
    write_text(path, sizeof path, "nodata.yaml", "name: nodata\nranks: [1]\nbase: {train_data_path: /nonexistent/train}\n");
    vb_snprintf(outdir, sizeof outdir, "%s/nodata_out", g_tmp);
    int rc = sweep_child(out, sizeof out, L(path, "--output_dir", outdir, "--launcher", "mpirun"));
    if (rc != 2 || !strstr(out, "train_data_path /nonexistent/train: no such directory"))
        fail_msg("missing data: exit %d: %s", rc, out);
}

/* --resume: completed and failed rows stay, a run that never finished runs
 * again (its leftover directory and log moved aside), --retry_failed reruns
 * failures, the failed attempt's log kept beside the new one; index.csv
 * stays one table in run order. */
static void test_resume_continues_a_sweep(void **state) {
    (void)state;
    char dir[VB_PATH_MAX], out[16384], p[2 * VB_PATH_MAX];
    char *csv = launch_sweep("name: resume\nranks: [1]\nthreads_per_rank: 1\nmatrix: {seed: [1, 13, 2]}\n", "resume",
                             L("--no_report"), dir, sizeof dir, out, sizeof out);
    assert_int_equal(g_last_sweep_rc, 1);
    free(csv);
    /* as if the sweep had died during its last run: no row, a half-written directory */
    assert_int_equal(tu_run(out, sizeof out, "cd %s && head -3 index.csv > i && mv i index.csv && "
                                             "rm -rf runs/002_ranks=1_seed=2 && mkdir runs/002_ranks=1_seed=2 && "
                                             "touch runs/002_ranks=1_seed=2/half",
                            dir),
                     0);
    int rc = sweep_child(out, sizeof out, L("--resume", dir));
    if (rc != 1) fail_msg("resume: exit %d, want 1 (the failed run stays failed): %s", rc, out);
    if (!strstr(out, "2 runs kept, 1 to run")) fail_msg("resume did not keep 2 runs: %s", out);
    vb_snprintf(p, sizeof p, "%s/index.csv", dir);
    csv = tu_read_file(p);
    static const char *rows[] = {"0,runs/000_ranks=1_seed=1,completed,0,0,1,1,1,", "1,runs/001_ranks=1_seed=13,failed,3,0,1,1,13,",
                                 "2,runs/002_ranks=1_seed=2,completed,0,0,1,1,2,"};
    for (size_t i = 0; i < 3; i++)
        if (!strstr(csv, rows[i])) fail_msg("index.csv after resume lacks '%s':\n%s", rows[i], csv);
    assert_int_equal(tu_count_lines(p), 4);
    free(csv);
    vb_snprintf(p, sizeof p, "%s/runs/002_ranks=1_seed=2.unfinished-1/half", dir);
    assert_true(vb_file_exists(p));
    vb_snprintf(p, sizeof p, "%s/runs/002_ranks=1_seed=2/rank0", dir);
    assert_true(vb_file_exists(p));
    /* the cut-off attempt's log went aside with its directory, under the same suffix */
    vb_snprintf(p, sizeof p, "%s/logs/002_ranks=1_seed=2.unfinished-1.log", dir);
    assert_true(vb_file_exists(p));
    vb_snprintf(p, sizeof p, "%s/logs/002_ranks=1_seed=2.log", dir);
    assert_true(vb_file_exists(p));
    /* a kept failure keeps its log where it was */
    assert_int_equal(tu_run(out, sizeof out, "cd %s/logs && grep -q 'failing on purpose' 001_ranks=1_seed=13.log && "
                                             "echo 'first attempt' >> 001_ranks=1_seed=13.log",
                            dir),
                     0);
    /* --retry_failed runs the failure again (it fails again: still exit 1) */
    rc = sweep_child(out, sizeof out, L("--resume", dir, "--retry_failed"));
    if (rc != 1 || !strstr(out, "2 runs kept, 1 to run") || !strstr(out, "001_ranks=1_seed=13: failed, exit 3"))
        fail_msg("resume --retry_failed: exit %d: %s", rc, out);
    /* both attempts' logs survive: the first one aside, the new one in its place */
    vb_snprintf(p, sizeof p, "%s/logs/001_ranks=1_seed=13.unfinished-1.log", dir);
    char *first = tu_read_file(p);
    if (!first || !strstr(first, "failing on purpose") || !strstr(first, "first attempt"))
        fail_msg("the failed attempt's log was not kept as %s: %s", p, first ? first : "(missing)");
    free(first);
    vb_snprintf(p, sizeof p, "%s/logs/001_ranks=1_seed=13.log", dir);
    char *second = tu_read_file(p);
    if (!second || !strstr(second, "failing on purpose") || strstr(second, "first attempt"))
        fail_msg("%s is not the retry's own log: %s", p, second ? second : "(missing)");
    free(second);
    if (!strstr(out, "001_ranks=1_seed=13 failed before; moved to ") ||
        !strstr(out, "/logs/001_ranks=1_seed=13.unfinished-1.log\n"))
        fail_msg("resume --retry_failed did not say where the failed attempt's log went: %s", out);
    /* options belong to the sweep: only a few may be added */
    rc = sweep_child(out, sizeof out, L("--resume", dir, "--ranks", "2"));
    if (rc != 2 || !strstr(out, "keeps the options it started with")) fail_msg("resume --ranks: exit %d: %s", rc, out);
    vb_snprintf(p, sizeof p, "%s/nope", g_tmp);
    rc = sweep_child(out, sizeof out, L("--resume", p));
    if (rc != 2 || !strstr(out, "no sweep.json")) fail_msg("resume of no sweep: exit %d: %s", rc, out);
}

/* A sweep killed with SIGKILL takes its running run down with it instead of
 * leaving mpirun and its ranks to finish unrecorded. */
static void test_killed_sweep_leaves_no_run_behind(void **state) {
    (void)state;
    char path[VB_PATH_MAX], outdir[VB_PATH_MAX], full[8192], out[4096];
    vb_snprintf(full, sizeof full, "%sname: orphan\nranks: [1]\nmatrix: {seed: [99]}\n", g_data_base);
    write_text(path, sizeof path, "orphan.yaml", full);
    vb_snprintf(outdir, sizeof outdir, "%s/orphan_out_%d", g_tmp, (int)getpid());
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 1), dup2(devnull, 2);
        const char *args[] = {"sweep", path, "--output_dir", outdir, "--launcher", "mpirun", "--no_report", NULL};
        _exit(vb_sweep_main(7, (char **)args));
    }
    /* pgrep patterns that match the run's command lines but not the shell
     * running pgrep (whose own command line holds the pattern's text) */
    char pat[VB_PATH_MAX + 16];
    vb_snprintf(pat, sizeof pat, "%s/[o]rphan_out_%d", g_tmp, (int)getpid());
    /* wait until the stand-in run is up (it sleeps 30 s), then kill the sweep */
    bool up = false;
    for (int i = 0; i < 200 && !up; i++) {
        up = tu_run(out, sizeof out, "pgrep -f -- 'run .*%s' >/dev/null", pat) == 0;
        if (!up) usleep(100000);
    }
    assert_true(up);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    bool gone = false;
    for (int i = 0; i < 150 && !gone; i++) {
        gone = tu_run(out, sizeof out, "pgrep -f -- '%s' >/dev/null", pat) != 0;
        if (!gone) usleep(100000);
    }
    if (!gone) {
        tu_run(out, sizeof out, "pkill -9 -f -- '%s'", pat); /* do not leave it to the next test */
        fail_msg("the run outlived its SIGKILLed sweep");
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "run") == 0) return stand_in_run(argc, argv);
    /* the sweep's launcher probe runs `<vitbench> version` under mpirun first */
    if (argc > 1 && strcmp(argv[1], "version") == 0) {
        printf("test_sweep stand-in for vitbench\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_product_counts_and_order),
        cmocka_unit_test(test_layouts_factorizations),
        cmocka_unit_test(test_overrides_precedence_and_ranks),
        cmocka_unit_test(test_flags_form),
        cmocka_unit_test(test_bad_files_exit_2),
        cmocka_unit_test(test_dry_run_shipped_scenarios),
        cmocka_unit_test(test_sbatch_dry_run_writes_job_scripts),
        cmocka_unit_test(test_slurm_time_formats),
        cmocka_unit_test(test_slurm_keys),
        cmocka_unit_test(test_scheduler_time_formats),
        cmocka_unit_test(test_scheduler_job_ids),
        cmocka_unit_test(test_job_ids_recorded),
        cmocka_unit_test(test_cluster_block),
        cmocka_unit_test(test_run_names),
        cmocka_unit_test(test_line_breaks_refused),
        cmocka_unit_test(test_fput_quoted_one_line),
        cmocka_unit_test(test_launch_records_failures_and_goes_on),
        cmocka_unit_test(test_launch_timeout_kills_run),
        cmocka_unit_test(test_killed_run_marked_failed),
        cmocka_unit_test(test_repeats_in_rounds_and_shuffled),
        cmocka_unit_test(test_preflight_refuses_bad_points),
        cmocka_unit_test(test_resume_continues_a_sweep),
        cmocka_unit_test(test_killed_sweep_leaves_no_run_behind),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
