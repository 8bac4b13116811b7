/* history_append.c: `vitbench history append FILE --from SET_DIR
 * [--commit REV] [--time ISO]` (history.h): one row of a machine's history
 * made from a gate set, the runs scripts/perf_ci.sh writes (index.csv and
 * runs/<run>/), or from one run directory.
 *
 * Each throughput column is the centre the verdict rule compares
 * (verdict.h, vb_verdict_centre): the geometric mean of the runs' median
 * timed-trial samples/s, empty where no run has timed trials of the kind.
 * instructions and est_cycles come from SET_DIR/counts.csv when it is there,
 * else they are empty. A counted set (perf_ci.sh --counts: counts.csv and
 * run.json, the run's trials.csv left below it) records its counts alone:
 * the trials of a run under valgrind time the simulator, not the machine,
 * so its throughput columns stay empty. The machine is the runs' fingerprint.machine_key
 * (they must agree, and FILE must be named <machine_key>.csv); the commit
 * --commit, else the runs' fingerprint.git_commit (they must agree); the
 * time --time, else the earliest start_time of the runs, else now.
 *
 * FILE is checked as `vitbench history` reads it before anything is added
 * (its header must be the history's, VB_HISTORY_CSV_HEADER), and written
 * again whole, to a temporary beside it that is renamed over it: a reader
 * sees the old file or the new one. A new FILE gets the header first.
 * Appends to one FILE take turns on a lock beside it (.<FILE>.lock). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analysis/csv.h"
#include "analysis/history.h"
#include "analysis/rundir.h"
#include "analysis/trials_csv.h"
#include "analysis/verdict.h"
#include "core/config/cli.h"
#include "core/results/results.h"
#include "core/util/outdir.h"
#include "core/util/stats.h"

#define CMD "history append"

typedef struct args {
    const char *file;
    const char *from;
    const char *commit;
    const char *time;
} args;

static void append_file(void *ctx, const char *arg, const char *next) {
    (void)next;
    args *a = ctx;
    if (strncmp(arg, "--", 2) == 0)
        vb_die_input(CMD ": unknown flag %s%s", arg,
                     *vb_cli_hint(arg) ? vb_cli_hint(arg) : " (see vitbench history append --help)");
    if (a->file) vb_die_input(CMD ": one FILE only (got %s and %s)", a->file, arg);
    a->file = arg;
}

static args parse_args(int argc, char **argv) {
    args a = {0};
    const vb_cli_opt opts[] = {
        {.name = "from", .kind = VB_CLI_STRING, .ptr = &a.from, .arg = "SET_DIR",
         .help = "the gate set to record: index.csv and runs/<run>/ (scripts/perf_ci.sh), or one run directory"},
        {.name = "commit", .kind = VB_CLI_STRING, .ptr = &a.commit, .arg = "REV",
         .help = "the commit the row is for (default: the runs' fingerprint.git_commit)"},
        {.name = "time", .kind = VB_CLI_STRING, .ptr = &a.time, .arg = "ISO",
         .help = "the row's time, ISO 8601 (default: the earliest start_time of the runs)"},
    };
    const vb_cli cli = {
        .cmd = CMD,
        .usage = "vitbench history append FILE|DIR --from SET_DIR [--commit REV] [--time ISO]",
        .about = "Appends one row made from a gate set to a machine's history FILE\n"
                 "(results/history/<machine_key>.csv; created with its header when new):\n"
                 "  time, commit, machine_key  the time (UTC), the commit, the runs' machine_key\n"
                 "  <KIND>_samples_per_s       FULL, SYNTHETIC, IO: the geometric mean of the runs'\n"
                 "                             median timed-trial samples/s (compare's centre)\n"
                 "  instructions, est_cycles   SET_DIR/counts.csv's (metric,value), else empty\n"
                 "A counted set (counts.csv and run.json, no trials.csv: perf_ci.sh --counts) gives\n"
                 "its counts alone: trials timed under valgrind measure the simulator.\n"
                 "Every run must have the machine_key FILE is named after; given a directory\n"
                 "(results/history), the file is DIR/<machine_key>.csv. The file is rewritten\n"
                 "through a temporary and a rename, one append at a time.",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
        .other = append_file,
        .ctx = &a,
        .other_help = "FILE: the history CSV, or DIR: the directory of histories (DIR/<machine_key>.csv).",
    };
    vb_cli_parse(&cli, argc, argv);
    if (!a.file) vb_die_input(CMD ": missing FILE (usage: vitbench history append FILE --from SET_DIR)");
    if (!a.from) vb_die_input(CMD ": missing --from SET_DIR (the gate set whose row this is)");
    return a;
}

/* ---- the set's runs ---- */

typedef struct {
    char **dirs;
    int n;
} run_list;

static void add_run(run_list *l, const char *dir) {
    l->dirs = vb_realloc_check(l->dirs, (size_t)(l->n + 1) * sizeof *l->dirs);
    l->dirs[l->n++] = vb_strdup_check(dir);
}

static run_list set_runs(const char *set) {
    run_list l = {0};
    char why[VB_PATH_MAX + 128];
    if (vb_dir_problem(set, why, sizeof why)) vb_die_input(CMD ": --from %s: %s", set, why);
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, set, VB_INDEX_CSV);
    if (!vb_file_exists(path)) {
        vb_dir_file(path, sizeof path, set, VB_RUN_JSON);
        if (!vb_file_exists(path))
            vb_die_input(CMD ": --from %s is neither a gate set (index.csv) nor a run directory (run.json)", set);
        add_run(&l, set);
        return l;
    }
    vb_csv t;
    char err[VB_PATH_MAX + 256];
    if (vb_csv_read(path, &t, err, sizeof err) != 0) vb_die_input(CMD ": %s", err);
    if (!t.terminated)
        vb_die_input(CMD ": %s: record %d has no line end (the file was cut short while being written)", path,
                     t.nrows + 1);
    const int cdir = vb_csv_col(&t, VB_COL_RUN_DIR), cst = vb_csv_col(&t, VB_COL_STATUS);
    if (cdir < 0 || cst < 0)
        vb_die_input(CMD ": %s: no column '%s'", path, cdir < 0 ? VB_COL_RUN_DIR : VB_COL_STATUS);
    for (int r = 0; r < t.nrows; r++) {
        if (strcmp(vb_csv_get(&t, r, cst), "completed") != 0) continue; /* a failed run measured nothing */
        char run[VB_PATH_MAX];
        if (vb_sweep_run_path(run, sizeof run, set, vb_csv_get(&t, r, cdir), why, sizeof why) != 0)
            vb_die_input(CMD ": %s: record %d: %s", path, t.record[r], why);
        if (!vb_dir_exists(run))
            vb_die_input(CMD ": %s: record %d: run directory %s does not exist", path, t.record[r], run);
        add_run(&l, run);
    }
    vb_csv_free(&t);
    if (l.n == 0) vb_die_input(CMD ": %s: no completed run: nothing was measured", path);
    return l;
}

/* a fingerprint string of run.json ("" when absent) */
static void fingerprint_field(const cJSON *j, const char *key, char *out, size_t n) {
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(j, "fingerprint");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(fp, key);
    snprintf(out, n, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

/* what a key may hold: it names the file */
static bool key_ok(const char *k) {
    if (!*k) return false;
    for (; *k; k++)
        if (!((*k >= '0' && *k <= '9') || (*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z'))) return false;
    return true;
}

static bool has_control(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return true;
    return false;
}

/* The value every run must share (machine_key, git_commit): the first
 * run's is kept with its directory, a later one that differs is refused. */
static void same_across(const char *what, const char *value, const char *dir, char *kept, size_t n, char *kept_dir,
                        size_t dn, const char *hint) {
    if (!kept[0]) {
        snprintf(kept, n, "%s", value);
        snprintf(kept_dir, dn, "%s", dir);
    } else if (strcmp(kept, value) != 0) {
        vb_die_input(CMD ": %s: %s %s, where %s has %s: %s", dir, what, value, kept_dir, kept, hint);
    }
}

/* ---- counts.csv ---- */

static void read_counts(const char *set, double *instructions, double *cycles) {
    *instructions = *cycles = NAN;
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, set, VB_COUNTS_CSV);
    char why[VB_PATH_MAX + 64];
    const char *problem = vb_file_problem(path, why, sizeof why);
    if (problem && strcmp(problem, "no such file") == 0) return; /* no counts in this set */
    if (problem) vb_die_input(CMD ": %s: %s", path, problem);
    vb_csv t;
    char err[VB_PATH_MAX + 256];
    if (vb_csv_read(path, &t, err, sizeof err) != 0) vb_die_input(CMD ": %s", err);
    if (!t.terminated)
        vb_die_input(CMD ": %s: record %d has no line end (the file was cut short while being written)", path,
                     t.nrows ? t.record[t.nrows - 1] : 1);
    const int cm = vb_csv_col(&t, VB_COL_METRIC), cv = vb_csv_col(&t, VB_COL_VALUE);
    if (cm < 0 || cv < 0)
        vb_die_input(CMD ": %s: no column '%s' (counts.csv's header is " VB_COUNTS_CSV_HEADER ")", path,
                     cm < 0 ? VB_COL_METRIC : VB_COL_VALUE);
    const char *names[2] = {VB_COL_INSTRUCTIONS, VB_COL_EST_CYCLES};
    double *dst[2] = {instructions, cycles};
    int seen[2] = {0, 0};
    for (int r = 0; r < t.nrows; r++)
        for (int k = 0; k < 2; k++) {
            if (strcmp(vb_csv_get(&t, r, cm), names[k]) != 0) continue;
            if (seen[k])
                vb_die_input(CMD ": %s: record %d: %s again (record %d has it)", path, t.record[r], names[k], seen[k]);
            seen[k] = t.record[r];
            double v;
            if (!vb_csv_num(&t, r, cv, &v) || v < 0)
                vb_die_input(CMD ": %s: record %d, column %s: %s '%s' is not a number >= 0", path, t.record[r],
                             VB_COL_VALUE, names[k], vb_csv_get(&t, r, cv));
            *dst[k] = v;
        }
    vb_csv_free(&t);
}

/* ---- the row ---- */

typedef struct {
    char time[32];
    char commit[256];
    char key[64];
    double value[VB_HISTORY_NMETRICS];
    int runs;
} row;

/* the throughput columns' kinds, in the history's order */
static const vb_trial_kind k_kinds[3] = {VB_TRIAL_FULL, VB_TRIAL_SYNTHETIC, VB_TRIAL_IO};

static row make_row(const args *a) {
    row w;
    memset(&w, 0, sizeof w);
    run_list runs = set_runs(a->from);
    w.runs = runs.n;
    char first_key_run[VB_PATH_MAX] = "", first_commit_run[VB_PATH_MAX] = "";
    long long earliest = 0;
    bool have_start = false;
    char counts_path[VB_PATH_MAX];
    vb_dir_file(counts_path, sizeof counts_path, a->from, VB_COUNTS_CSV);
    const bool counted = vb_file_exists(counts_path);
    double *v[3] = {NULL};
    int *id[3] = {NULL}, nv[3] = {0}, with[3] = {0}, first_with[3] = {-1, -1, -1}, first_without[3] = {-1, -1, -1};
    for (int r = 0; r < runs.n; r++) {
        const char *dir = runs.dirs[r];
        char path[VB_PATH_MAX];
        vb_dir_file(path, sizeof path, dir, VB_RUN_JSON);
        const char *why;
        cJSON *j = vb_read_json_object(path, &why);
        if (!j) vb_die_input(CMD ": %s: %s", path, why);
        char key[64], commit[256];
        fingerprint_field(j, "machine_key", key, sizeof key);
        fingerprint_field(j, "git_commit", commit, sizeof commit);
        if (!key_ok(key))
            vb_die_input(CMD ": %s: fingerprint.machine_key '%s' is %s", path, key,
                         key[0] ? "not letters and digits" : "missing (a vitbench without run fingerprints)");
        same_across(VB_COL_MACHINE_KEY, key, dir, w.key, sizeof w.key, first_key_run, sizeof first_key_run,
                    "a history row is one machine's");
        if (!a->commit) {
            if (!commit[0]) vb_die_input(CMD ": %s: no fingerprint.git_commit: give --commit REV", path);
            same_across("git_commit", commit, dir, w.commit, sizeof w.commit, first_commit_run, sizeof first_commit_run,
                        "give --commit REV for the row");
        }
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "start_time");
        long long e;
        if (cJSON_IsString(st) && vb_history_parse_time(st->valuestring, &e) && (!have_start || e < earliest)) {
            earliest = e;
            have_start = true;
        }
        cJSON_Delete(j);
        char trials_path[VB_PATH_MAX];
        vb_dir_file(trials_path, sizeof trials_path, dir, VB_TRIALS_CSV);
        if (counted && !vb_file_exists(trials_path)) continue; /* the counts alone */
        vb_trials tr;
        char twhy[VB_PATH_MAX + 512];
        if (vb_trials_read(dir, &tr, twhy, sizeof twhy) != 0) {
            vb_trials_free(&tr);
            vb_die_input(CMD ": %s", twhy);
        }
        for (int k = 0; k < 3; k++) {
            const int kind = k_kinds[k], m = tr.n[kind];
            if (m == 0) {
                if (first_without[k] < 0) first_without[k] = r;
                continue;
            }
            if (first_with[k] < 0) first_with[k] = r;
            with[k]++;
            v[k] = vb_realloc_check(v[k], (size_t)(nv[k] + m) * sizeof *v[k]);
            id[k] = vb_realloc_check(id[k], (size_t)(nv[k] + m) * sizeof *id[k]);
            for (int i = 0; i < m; i++) {
                v[k][nv[k]] = tr.rate[kind][i];
                id[k][nv[k]++] = r;
            }
        }
        vb_trials_free(&tr);
    }
    for (int k = 0; k < 3; k++) {
        w.value[k] = NAN;
        if (with[k] > 0 && with[k] < runs.n)
            vb_die_input(CMD ": %s has no timed %s trials, where %s has: the runs of one set measure the same", 
                         runs.dirs[first_without[k]], vb_trial_kinds[k_kinds[k]].name, runs.dirs[first_with[k]]);
        if (with[k] > 0) {
            const vb_verdict_side side = {.v = v[k], .run = id[k], .n = nv[k], .load = NAN, .round = NULL};
            w.value[k] = vb_verdict_centre(&side);
            if (!isfinite(w.value[k]))
                vb_die_input(CMD ": %s: the %s trials have no positive median", a->from, vb_trial_kinds[k_kinds[k]].name);
        }
        free(v[k]);
        free(id[k]);
    }
    read_counts(a->from, &w.value[3], &w.value[4]);
    if (a->commit) {
        if (has_control(a->commit)) vb_die_input(CMD ": --commit holds a control character (a line break?)");
        snprintf(w.commit, sizeof w.commit, "%s", a->commit);
    } else if (has_control(w.commit)) {
        vb_die_input(CMD ": %s: fingerprint.git_commit holds a control character: give --commit REV", first_commit_run);
    }
    long long t;
    if (a->time) {
        if (!vb_history_parse_time(a->time, &t))
            vb_die_input(CMD ": --time '%s' is not an ISO 8601 time (2026-11-21T23:52:51Z)", a->time);
    } else {
        t = have_start ? earliest : (long long)time(NULL);
    }
    vb_history_format_time(t, w.time, sizeof w.time);
    for (int r = 0; r < runs.n; r++) free(runs.dirs[r]);
    free(runs.dirs);
    return w;
}

/* a value as the history keeps it: whole numbers (counts) exactly, rates to
 * 9 significant digits (trials.csv's precision), empty for none */
static void put_value(FILE *f, double v) {
    if (isnan(v)) return;
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        fprintf(f, "%.0f", v);
    else
        fprintf(f, "%.9g", v);
}

typedef struct {
    const char *old; /* the file's text so far, or NULL for a new file */
    size_t old_len;
    const row *w;
} write_ctx;

static void write_history(FILE *f, void *ctx) {
    const write_ctx *c = ctx;
    if (c->old)
        fwrite(c->old, 1, c->old_len, f);
    else
        fputs(VB_HISTORY_CSV_HEADER "\n", f);
    fputs(c->w->time, f);
    fputc(',', f);
    vb_csv_field(f, c->w->commit);
    fputc(',', f);
    fputs(c->w->key, f);
    for (int m = 0; m < VB_HISTORY_NMETRICS; m++) {
        fputc(',', f);
        put_value(f, c->w->value[m]);
    }
    fputc('\n', f);
}

int vb_history_append_main(int argc, char **argv) {
    const args a = parse_args(argc, argv);
    const row w = make_row(&a);
    char want[128];
    snprintf(want, sizeof want, "%s" VB_HISTORY_EXT, w.key);
    /* a directory (results/history): the runs' machine's file in it */
    char file[VB_PATH_MAX];
    if (vb_dir_exists(a.file))
        vb_snprintf(file, sizeof file, "%s%s%s", a.file, a.file[strlen(a.file) - 1] == '/' ? "" : "/", want);
    else
        vb_snprintf(file, sizeof file, "%s", a.file);
    const char *slash = strrchr(file, '/');
    const char *base = slash ? slash + 1 : file;
    char dir[VB_PATH_MAX];
    if (slash)
        vb_snprintf(dir, sizeof dir, "%.*s", slash == file ? 1 : (int)(slash - file), file);
    else
        vb_snprintf(dir, sizeof dir, ".");
    if (strcmp(base, want) != 0)
        vb_die_input(CMD ": %s is named %s, but the runs' machine_key is %s: a history holds one machine's rows, in %s",
                     file, base, w.key, want);
    /* two appends to one history at once (two CI jobs on one machine) take
     * turns: each reads the file only once it holds the lock, so neither
     * renames its copy over a row the other added */
    vb_outdir d;
    vb_outdir_open_or_die(&d, dir, NULL, CMD);
    char lock_name[160];
    snprintf(lock_name, sizeof lock_name, ".%s.lock", want); /* base, checked above */
    const int lock = openat(d.fd, lock_name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (lock < 0) vb_die_env("%s: cannot create the lock %s/%s: %s", CMD, dir, lock_name, strerror(errno));
    while (flock(lock, LOCK_EX) != 0)
        if (errno != EINTR) break; /* a file system without flock: one writer is the caller's to ensure */
    /* the file so far, checked as the command reads it */
    char *old = NULL;
    size_t old_len = 0;
    char why[VB_PATH_MAX + 64];
    const char *problem = vb_file_problem(file, why, sizeof why);
    if (problem && strcmp(problem, "no such file") != 0) vb_die_input(CMD ": %s: %s", file, problem);
    if (!problem) {
        old = vb_read_file(file, &old_len);
        if (!old) vb_die_input(CMD ": %s: cannot be read (%s)", file, strerror(errno));
        if (old_len == 0) {
            free(old); /* an empty file: nothing to keep, started as a new one */
            old = NULL;
        } else {
            const size_t line = strcspn(old, "\n");
            if (line != strlen(VB_HISTORY_CSV_HEADER) || strncmp(old, VB_HISTORY_CSV_HEADER, line) != 0)
                vb_die_input(CMD ": %s: its header is '%.*s', not the history's '" VB_HISTORY_CSV_HEADER
                             "': not appended to",
                             file, (int)(line > 200 ? 200 : line), old);
            vb_history h;
            vb_history_read(file, &h, CMD);
            if (h.machine_key && strcmp(h.machine_key, w.key) != 0)
                vb_die_input(CMD ": %s: its rows are machine %s, the runs' machine_key is %s", file, h.machine_key,
                             w.key);
            vb_history_free(&h);
        }
    }
    write_ctx c = {old, old_len, &w};
    vb_outdir_write_or_die(&d, base, write_history, &c, CMD);
    close(lock); /* releases the flock; the lock file stays (git-ignored beside the history) */
    vb_outdir_close(&d);
    free(old);
    printf("history append: %s: %s, commit %s, from %d run%s:", file, w.time, w.commit, w.runs, w.runs == 1 ? "" : "s");
    for (int m = 0; m < VB_HISTORY_NMETRICS; m++) {
        if (isnan(w.value[m])) continue;
        printf(" %s %.6g", vb_history_metrics[m].name, w.value[m]);
    }
    putchar('\n');
    return 0;
}
