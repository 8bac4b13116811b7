/* sweep_index.c: the sweep directory and its bookkeeping.
 *
 * Contract: a sweep directory DIR/<name>_<stamp>[-N] is claimed with mkdir
 * (never shared, never reused) and holds scenario.yaml, sweep.json (written
 * once at the start), runs/, logs/ and index.csv. index.csv has one row per
 * run that has a status, in launch order, with the headline numbers read
 * from the run's summary.csv once it completed, and is rewritten atomically
 * (sweep.h documents its columns). On --resume the rows that stand
 * (completed, submitted, failed unless retried) are kept and every other
 * run's leftover directory is moved aside so the new run gets its name.
 */
#include "bench/sweep/sweep_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analysis/csv.h"
#include "core/results/results.h"

#ifndef VB_GIT_COMMIT
#define VB_GIT_COMMIT "unknown"
#endif

static const char *const k_headline_cols[2 * VB_INDEX_HEADLINE_NKINDS] = {VB_INDEX_HEADLINE_COLUMNS};
static const vb_trial_kind k_headline_kinds[VB_INDEX_HEADLINE_NKINDS] = {VB_INDEX_HEADLINE_KINDS};

typedef struct {
    const vb_sweep_plan *plan;
    const sweep_item *items;
    int n;
} index_ctx;

static void write_index(FILE *f, void *vctx) {
    const index_ctx *x = vctx;
    fputs(VB_INDEX_LEAD_COLUMNS, f);
    for (int c = 0; c < x->plan->ncolumns; c++) {
        fputc(',', f);
        vb_csv_field(f, x->plan->columns[c]);
    }
    for (int h = 0; h < SWEEP_HEADLINES; h++) fprintf(f, ",%s", k_headline_cols[h]);
    fputs("," VB_INDEX_FAILURE_COLUMN "\n", f);
    for (int i = 0; i < x->n; i++) {
        const sweep_item *it = &x->items[i];
        const vb_sweep_run *r = it->run;
        if (!it->status) continue; /* not run yet */
        fprintf(f, "%d,", i);
        char dir[300];
        snprintf(dir, sizeof dir, "runs/%s", it->name);
        vb_csv_field(f, dir);
        fprintf(f, ",%s,", it->status ? it->status : "");
        if (it->exit_code != INT_MIN) fprintf(f, "%d", it->exit_code);
        fprintf(f, ",%d,%d,%d", it->repeat, r->ranks, it->threads);
        for (int c = 0; c < x->plan->ncolumns; c++) {
            fputc(',', f);
            vb_csv_field(f, vb_sweep_kvs_get(&r->params, x->plan->columns[c]));
        }
        for (int h = 0; h < SWEEP_HEADLINES; h++) {
            fputc(',', f);
            if (!isnan(it->headline[h])) fprintf(f, "%.9g", it->headline[h]);
        }
        fputc(',', f);
        vb_csv_field(f, it->failure);
        fputc('\n', f);
    }
}

int sweep_write_index(const sweep_tree *tree, const vb_sweep_plan *plan, const sweep_item *items, int n) {
    index_ctx ix = {plan, items, n};
    char why[3 * VB_PATH_MAX];
    int rc = sweep_tree_write(tree, SWEEP_ROOT, VB_INDEX_CSV, 0, write_index, &ix, why, sizeof why);
    if (rc == VB_OUTDIR_NOT_A_DIR) vb_die_input("sweep: %s", why);
    return rc;
}

/* A finished run's headline (FULL, SYNTHETIC, IO, VALIDATION) mean and std
 * from its summary.csv, read in runs/<run> opened as a real directory. */
bool sweep_read_headline(const sweep_tree *tree, sweep_item *it) {
    for (int h = 0; h < SWEEP_HEADLINES; h++) it->headline[h] = NAN;
    vb_outdir run;
    char why[3 * VB_PATH_MAX];
    int rc = sweep_tree_run_dir(tree, it->name, &run, why, sizeof why);
    if (rc == VB_OUTDIR_NOT_A_DIR) return false;
    if (rc != 0) return true; /* not there: no numbers, nothing else wrong */
    char path[VB_PATH_MAX + 64];
    vb_outdir_fd_path(&run, VB_SUMMARY_CSV, path, sizeof path);
    vb_csv t;
    char err[VB_PATH_MAX + 512];
    rc = vb_csv_read(path, &t, err, sizeof err);
    vb_outdir_close(&run);
    if (rc != 0) return true;
    int ct = vb_csv_col(&t, VB_COL_TRIAL_TYPE), cm = vb_csv_col(&t, VB_COL_MEAN_SAMPLES_PER_S),
        cs = vb_csv_col(&t, VB_COL_STD_SAMPLES_PER_S);
    for (int row = 0; row < t.nrows; row++)
        for (int k = 0; k < VB_INDEX_HEADLINE_NKINDS; k++)
            if (strcmp(vb_csv_get(&t, row, ct), vb_trial_kinds[k_headline_kinds[k]].name) == 0) {
                vb_csv_num(&t, row, cm, &it->headline[2 * k]);
                vb_csv_num(&t, row, cs, &it->headline[2 * k + 1]);
            }
    vb_csv_free(&t);
    return true;
}

/* The sweep's table at its end: one line per run, read at a glance. */
void sweep_print_table(const vb_sweep_plan *plan, const sweep_item *items, int n) {
    /* rows in index.csv's order: every run with a status */
    printf("\n%-4s %-44s %-9s %24s %24s %14s\n", "#", "run", "status", "FULL samples/s", "SYNTHETIC samples/s",
           "IO samples/s");
    for (int i = 0; i < n; i++) {
        const sweep_item *it = &items[i];
        if (!it->status) continue;
        char cell[3][40];
        for (int k = 0; k < 3; k++) {
            if (isnan(it->headline[2 * k]))
                snprintf(cell[k], sizeof cell[k], "-");
            else if (k == 2)
                snprintf(cell[k], sizeof cell[k], "%.1f", it->headline[2 * k]);
            else
                snprintf(cell[k], sizeof cell[k], "%.2f +/- %.2f", it->headline[2 * k], it->headline[2 * k + 1]);
        }
        printf("%-4d %-44.44s %-9s %24s %24s %14s\n", i, it->name, it->status ? it->status : "-", cell[0], cell[1],
               cell[2]);
    }
    (void)plan;
    fflush(stdout);
}

/* DIR/<name>_<stamp>[-N]: mkdir is the atomic claim, so two sweeps started
 * in the same second never share a directory. */
void sweep_create_dir(const char *out_dir, const char *name, char *dir, size_t n, char *id, size_t idn) {
    if (vb_mkdir_p(out_dir) != 0) vb_die_input("flag --output_dir %s: cannot create directory (%s)", out_dir, strerror(errno));
    if (vb_results_dir_claim_stamped(out_dir, name, dir, n, id, idn) == 0) return;
    if (errno == EEXIST) vb_die_input("flag --output_dir %s: too many sweeps named %s_<this second>", out_dir, name);
    vb_die_input("flag --output_dir %s: cannot create a %s_<stamp> directory in it (%s)", out_dir, name, strerror(errno));
}

typedef struct {
    const char *bytes;
    size_t len;
} bytes_ctx;

static void write_bytes(FILE *f, void *ctx) {
    const bytes_ctx *b = ctx;
    fwrite(b->bytes, 1, b->len, f);
}

void sweep_copy_file(const char *from, const sweep_tree *t, const char *name) {
    char why[3 * VB_PATH_MAX];
    FILE *in = vb_fopen_regular(from, why, sizeof why);
    if (!in) {
        vb_warn("could not copy %s into %s: %s", from, t->dir, why);
        return;
    }
    /* read whole before anything is written: a read error leaves no half copy */
    size_t cap = 8192, len = 0, k;
    char *buf = vb_malloc_check(cap);
    while ((k = fread(buf + len, 1, cap - len, in)) > 0)
        if ((len += k) == cap) buf = vb_realloc_check(buf, cap *= 2);
    bool bad = ferror(in) != 0;
    fclose(in);
    bytes_ctx b = {buf, len};
    if (bad)
        vb_warn("could not copy %s into %s: read error", from, t->dir);
    else if (sweep_tree_write(t, SWEEP_ROOT, name, 0, write_bytes, &b, why, sizeof why) != 0)
        vb_warn("could not copy %s: %s", from, why);
    free(buf);
}

typedef struct {
    cJSON *json;
} json_ctx;

static void write_json(FILE *f, void *vctx) {
    char *s = cJSON_Print(((json_ctx *)vctx)->json);
    if (s) fputs(s, f);
    fputc('\n', f);
    free(s);
}

/* What the sweep varies, for `vitbench report` (results.h's one rule): the
 * scenario's facts. While ranks vary the batch a run fixes is the local one
 * when local_batch_size is given, else the global one. */
static const char *sweep_kind(const vb_scenario *s, const vb_sweep_plan *p, const sweep_cli *c) {
    vb_sweep_facts f = {.layouts = s->has_layouts, .variants = s->has_flags, .variants_ddp_only = true};
    for (int i = 0; i < s->nflags; i++)
        if (strcmp(s->flags[i].key, "bucket_cap_mb") != 0 && strcmp(s->flags[i].key, "noddp") != 0)
            f.variants_ddp_only = false;
    for (int i = 1; i < p->nruns; i++)
        if (p->runs[i].ranks != p->runs[0].ranks) f.ranks_vary = true;
    f.fixed_batch =
        sweep_kvs_has(&s->base, "local_batch_size") || sweep_kvs_has(&c->ov.config, "local_batch_size") ? 1 : 2;
    f.npoints = s->nmatrix > 0 ? 2 : 1; /* a matrix has points to tell apart */
    return vb_sweep_kind(&f, NULL);
}

static void write_json_to(const sweep_tree *t, cJSON *j) {
    json_ctx x = {j};
    char why[3 * VB_PATH_MAX];
    if (sweep_tree_write(t, SWEEP_ROOT, VB_SWEEP_JSON, 0, write_json, &x, why, sizeof why) != 0)
        vb_warn("could not write %s", why);
}

void sweep_write_sweep_json(const sweep_tree *t, const char *id, const vb_scenario *s, const sweep_cli *c,
                            const vb_sweep_plan *plan, const char *exe, int argc, char **argv, int nruns) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "sweep_id", id);
    cJSON_AddStringToObject(j, "scenario", s->name);
    cJSON_AddStringToObject(j, "scenario_file", s->path);
    cJSON_AddStringToObject(j, "command", s->command);
    cJSON *cl = cJSON_AddArrayToObject(j, "command_line");
    cJSON_AddItemToArray(cl, cJSON_CreateString("vitbench"));
    for (int i = 0; i < argc; i++) cJSON_AddItemToArray(cl, cJSON_CreateString(argv[i]));
    cJSON_AddStringToObject(j, "launcher", sweep_launchers[c->launcher].name);
    cJSON_AddStringToObject(j, "binary", exe);
    cJSON_AddBoolToObject(j, "dry_run", c->dry_run);
    cJSON_AddNumberToObject(j, "nruns", nruns);
    cJSON_AddNumberToObject(j, "npoints", plan->nruns);
    cJSON_AddNumberToObject(j, "repeats", s->repeats);
    cJSON_AddStringToObject(j, "order", vb_scenario_shuffled(s) ? "shuffled" : "sequential");
    cJSON_AddNumberToObject(j, "order_seed", (double)s->order_seed);
    cJSON_AddStringToObject(j, "kind", sweep_kind(s, plan, c));
    cJSON *cols = cJSON_AddArrayToObject(j, "swept_columns");
    cJSON_AddItemToArray(cols, cJSON_CreateString("ranks"));
    for (int i = 0; i < plan->ncolumns; i++) cJSON_AddItemToArray(cols, cJSON_CreateString(plan->columns[i]));
    char tm[32], cwd[VB_PATH_MAX];
    vb_iso_time(tm, sizeof tm);
    cJSON_AddStringToObject(j, "start_time", tm);
    cJSON_AddStringToObject(j, "cwd", getcwd(cwd, sizeof cwd) ? cwd : "");
    cJSON_AddStringToObject(j, "git_commit", VB_GIT_COMMIT);
    write_json_to(t, j);
    cJSON_Delete(j);
}

void sweep_record_warmup(const sweep_tree *t, const char *point, int exit_code, double seconds) {
    char path[VB_PATH_MAX + 64], shown[VB_PATH_MAX + 64];
    sweep_tree_fd_path(t, SWEEP_ROOT, VB_SWEEP_JSON, path, sizeof path);
    char *text = vb_read_file(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!cJSON_IsObject(j)) {
        vb_warn("could not record the warm-up run in %s", sweep_tree_path(t, SWEEP_ROOT, VB_SWEEP_JSON, shown, sizeof shown));
        cJSON_Delete(j);
        return;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(j, "warmup");
    cJSON *w = cJSON_AddObjectToObject(j, "warmup");
    cJSON_AddStringToObject(w, "point", point);
    cJSON_AddStringToObject(w, "log", "logs/warmup.log");
    cJSON_AddNumberToObject(w, "exit_code", exit_code);
    cJSON_AddNumberToObject(w, "seconds", seconds);
    cJSON_AddStringToObject(w, "why", "discarded: the machine's first run after a pause is slower than its repeats");
    write_json_to(t, j);
    cJSON_Delete(j);
}

/* --resume: rows of the sweep's index.csv that stand keep their status
 * (completed and submitted always, failed unless --retry_failed); every other
 * run (never started, cut off when the sweep died, or failed and retried)
 * runs again, its leftover directory and log moved aside under one suffix
 * (runs/<run>.unfinished-N, logs/<run>.unfinished-N.log) so the new attempt
 * gets the names index.csv and the report point to, and the earlier
 * attempt's log, often the only account of why it failed, is not truncated
 * by the new one. A leftover that is a link is moved aside as the link it
 * is. Returns how many were kept. */
int sweep_keep_finished(const sweep_tree *tree, sweep_item *items, int n, bool retry_failed) {
    char path[VB_PATH_MAX + 64], shown[VB_PATH_MAX + 64], err[VB_PATH_MAX + 512];
    sweep_tree_fd_path(tree, SWEEP_ROOT, VB_INDEX_CSV, path, sizeof path);
    sweep_tree_path(tree, SWEEP_ROOT, VB_INDEX_CSV, shown, sizeof shown);
    vb_csv t;
    if (vb_csv_read(path, &t, err, sizeof err) != 0)
        vb_die_input("flag --resume: %s: %s", shown, strstr(err, ": ") ? strstr(err, ": ") + 2 : err);
    int cdir = vb_csv_col(&t, VB_COL_RUN_DIR), cst = vb_csv_col(&t, VB_COL_STATUS), ccode = vb_csv_col(&t, VB_COL_EXIT_CODE);
    int cfail = vb_csv_col(&t, VB_INDEX_FAILURE_COLUMN);
    if (cdir < 0 || cst < 0) vb_die_input("flag --resume: %s has no run_dir / status columns", shown);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        sweep_item *it = &items[i];
        char want[300];
        snprintf(want, sizeof want, "runs/%s", it->name);
        bool retried = false;
        for (int row = 0; row < t.nrows; row++) {
            if (strcmp(vb_csv_get(&t, row, cdir), want) != 0) continue;
            const char *st = vb_csv_get(&t, row, cst);
            bool keep = strcmp(st, "completed") == 0 || strcmp(st, "submitted") == 0 ||
                        (strcmp(st, "failed") == 0 && !retry_failed);
            retried = strcmp(st, "failed") == 0;
            if (!keep) break;
            it->status = strcmp(st, "completed") == 0 ? "completed" : strcmp(st, "submitted") == 0 ? "submitted" : "failed";
            double code;
            if (vb_csv_num(&t, row, ccode, &code)) it->exit_code = (int)code;
            if (strcmp(it->status, "failed") == 0) {
                if (cfail >= 0 && vb_csv_get(&t, row, cfail)[0])
                    snprintf(it->failure, sizeof it->failure, "%s", vb_csv_get(&t, row, cfail));
                else if (it->exit_code != INT_MIN)
                    sweep_failure_class(it->exit_code, "", it->failure, sizeof it->failure);
            }
            if (strcmp(st, "completed") == 0) (void)sweep_read_headline(tree, it);
            kept++;
            break;
        }
        if (it->status) continue;
        char log[320], aside[340], log_aside[360];
        snprintf(log, sizeof log, "%s.log", it->name);
        bool has_dir = sweep_tree_exists(tree, SWEEP_RUNS, it->name), has_log = sweep_tree_exists(tree, SWEEP_LOGS, log);
        if (!has_dir && !has_log) continue;
        /* one N for both, free for both: the pair names the same attempt */
        for (int k = 1; k < 1000; k++) {
            snprintf(aside, sizeof aside, "%s.unfinished-%d", it->name, k);
            snprintf(log_aside, sizeof log_aside, "%s.unfinished-%d.log", it->name, k);
            if (!sweep_tree_exists(tree, SWEEP_RUNS, aside) && !sweep_tree_exists(tree, SWEEP_LOGS, log_aside)) break;
        }
        char a[VB_PATH_MAX + 400], b[VB_PATH_MAX + 400];
        if (has_dir && sweep_tree_rename(tree, SWEEP_RUNS, it->name, aside) != 0)
            vb_die_input("cannot move the unfinished run %s aside (%s)",
                         sweep_tree_path(tree, SWEEP_RUNS, it->name, a, sizeof a), strerror(errno));
        if (has_log && sweep_tree_rename(tree, SWEEP_LOGS, log, log_aside) != 0)
            vb_die_input("cannot move the earlier log %s aside (%s)", sweep_tree_path(tree, SWEEP_LOGS, log, a, sizeof a),
                         strerror(errno));
        printf("vitbench sweep: %s %s before; moved to %s%s%s\n", it->name, retried ? "failed" : "did not finish",
               has_dir ? sweep_tree_path(tree, SWEEP_RUNS, aside, a, sizeof a) : "", has_dir && has_log ? " and " : "",
               has_log ? sweep_tree_path(tree, SWEEP_LOGS, log_aside, b, sizeof b) : "");
    }
    vb_csv_free(&t);
    return kept;
}

void sweep_mark_run_failed(const sweep_tree *t, const sweep_item *it, const char *why) {
    char reason[160];
    if (!why) {
        snprintf(reason, sizeof reason, "the run ended with exit status %d before it could record its end",
                 it->exit_code);
        why = reason;
    }
    vb_outdir run;
    char err[3 * VB_PATH_MAX];
    /* never through a link at runs/<run>: run.json there is another's */
    if (sweep_tree_run_dir(t, it->name, &run, err, sizeof err) != 0) return;
    char rj[VB_PATH_MAX + 64];
    vb_outdir_fd_path(&run, VB_RUN_JSON, rj, sizeof rj);
    struct stat st;
    /* run.json itself a link: left alone (the rename would replace it, but it is not the run's own) */
    if (fstatat(run.fd, VB_RUN_JSON, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
        (void)vb_run_json_mark_failed(rj, why);
    vb_outdir_close(&run);
}
