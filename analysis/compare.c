/* compare.c: `vitbench compare BASE NEW`, the noise-aware comparison and
 * regression gate.
 *
 *   vitbench compare BASE NEW [--metric M[,M...]] [--alpha A] [--threshold T]
 *                    [--allow_different KEY[,KEY...]] [--output FILE]
 *
 * BASE and NEW are each a run directory (run.json + trials.csv), or a sweep
 * directory (index.csv; its runs at <sweep>/<run_dir>); a baseline under
 * results/baselines/ is a kept copy of either. A sweep's completed rows are
 * grouped into points by their swept keys (every index.csv column but the
 * bookkeeping and headline ones below); rows differing only in `repeat` are
 * repeats of one point and their samples pool. Sweep against sweep matches
 * points by those keys; a run against a sweep needs a sweep of one point.
 *
 * Metrics (--metric, comma list; default FULL,SYNTHETIC):
 *   IO, SYNTHETIC, FULL, VALIDATION  per-trial samples_per_s of timed trials, rank 0
 *                        (higher is better)
 *   step_time            mean seconds of a timed FULL step, one sample per
 *                        trial, rank 0 (iterations.csv): a trial's steps share
 *                        its machine state and are not independent samples
 *   op:NAME              the op's avg_s from ops.csv, one sample per run (rank 0,
 *                        the FULL rows where ops.csv splits by trial type)
 * Per metric and point: the rule of verdict.h (faster, slower, equivalent,
 * inconclusive), with each sample's run, so that runs are the unit, and
 * each side's load from load.csv (run_load.h). BASE points missing in NEW,
 * or whose NEW runs all failed, are named and make the gate inconclusive.
 *
 * Comparability (run.json of each side; for sweeps the first run of the first
 * matched point): config name, model dims, batch sizes, layout, backend and
 * fingerprint.machine_key must agree, else every difference is printed on
 * stdout, then one error line, exit 2. --allow_different accepts named ones.
 *
 * Output: a Markdown table on stdout, a note for each busy side (its trials'
 * spread and recorded load) and for one run a side (the floor assumed), the
 * ops that grew most under a regression, then one verdict line; compare.json
 * with every number goes to --output, else into NEW's directory, else (not
 * writable) the working directory. Exit status (analysis.h): 0 pass (every
 * comparison equivalent or faster), 1 a regression, 2 bad input,
 * incomparable sides, or a metric with no samples on a side (nothing
 * measured is never a pass), 5 inconclusive.
 */
#include "analysis/analysis.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "analysis/advice.h"
#include "analysis/csv.h"
#include "analysis/rundir.h"
#include "analysis/trials_csv.h"
#include "analysis/run_load.h"
#include "analysis/markdown.h"
#include "analysis/verdict.h"
#include "core/config/flag.h"
#include "core/config/cli.h"
#include "core/util/common.h"
#include "core/util/outdir.h"
#include "core/results/results.h"
#include "core/util/stats.h"

#define MIN_SAMPLES VB_VERDICT_MIN_SAMPLES
#define TOP_OPS 5

/* ---- small helpers ---- */

#define GROW(arr, n, cap)                                                                    \
    do {                                                                                     \
        if ((n) == (cap)) {                                                                  \
            (cap) = (cap) ? 2 * (cap) : 8;                                                   \
            (arr) = vb_realloc_check((arr), (size_t)(cap) * sizeof *(arr));                  \
        }                                                                                    \
    } while (0)

static void read_csv_or_die(const char *path, vb_csv *t) {
    char err[VB_PATH_MAX + 256];
    if (vb_csv_read(path, t, err, sizeof err) != 0) vb_die_input("compare: %s", err);
    /* every file vitbench writes ends with a line end: without one the last
     * record may be a number cut short, which would still parse */
    if (!t->terminated)
        vb_die_input("compare: %s: record %d has no line end (the file was cut short while being written)", path,
                     t->nrows + 1);
}

static int need_col(const vb_csv *t, const char *path, const char *name) {
    int c = vb_csv_col(t, name);
    if (c < 0) vb_die_input("compare: %s: no column '%s'", path, name);
    return c;
}

static double need_num(const vb_csv *t, const char *path, int row, int col) {
    double v;
    if (!vb_csv_num(t, row, col, &v))
        vb_die_input("compare: %s: record %d: %s '%s' is not a number", path, row + 2, t->header[col],
                     vb_csv_get(t, row, col));
    return v;
}

/* a row belongs to rank 0 (files without a rank column have only rank 0) */
static bool rank0(const vb_csv *t, const char *path, int row, int rank_col) {
    return rank_col < 0 || need_num(t, path, row, rank_col) == 0;
}

/* ---- metrics ---- */

typedef enum { M_THROUGHPUT, M_STEP_TIME, M_OP } metric_kind;

typedef struct {
    metric_kind kind;
    vb_trial_kind trial; /* M_THROUGHPUT: whose trials */
    char name[160];   /* as the table shows it: FULL, step_time, op:NAME */
    const char *op;   /* M_OP: the op's name (inside name) */
    bool higher_is_better;
    const char *unit;
} metric;

static void parse_metric(const char *text, metric *m) {
    memset(m, 0, sizeof *m);
    for (int k = 0; k < VB_TRIAL_NKINDS; k++) {
        if (strcasecmp(text, vb_trial_kinds[k].name) == 0) {
            m->kind = M_THROUGHPUT;
            m->trial = (vb_trial_kind)k;
            vb_snprintf(m->name, sizeof m->name, "%s", vb_trial_kinds[k].name);
            m->higher_is_better = true;
            m->unit = "samples/s";
            return;
        }
    }
    if (strcmp(text, "step_time") == 0) {
        m->kind = M_STEP_TIME;
        vb_snprintf(m->name, sizeof m->name, "step_time");
        m->unit = "s";
        return;
    }
    if (strncmp(text, "op:", 3) == 0 && text[3] && strlen(text) < sizeof m->name) {
        m->kind = M_OP;
        vb_snprintf(m->name, sizeof m->name, "%s", text);
        m->op = m->name + 3;
        m->unit = "s";
        return;
    }
    vb_die_input("compare: --metric: unknown metric '%s' (%s, step_time or op:NAME)", text, vb_trial_kind_list());
}

static metric *parse_metrics(const char *list, int *n) {
    char *copy = vb_strdup_check(list);
    metric *ms = NULL;
    int cap = 0;
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        GROW(ms, *n, cap);
        parse_metric(tok, &ms[*n]);
        /* FULL,FULL (or full,FULL) is one metric: named twice it would be
         * tested, counted and reported twice */
        bool again = false;
        for (int i = 0; i < *n && !again; i++) again = strcmp(ms[i].name, ms[*n].name) == 0;
        if (!again) (*n)++;
    }
    free(copy);
    /* op points into its own element, which GROW may have moved */
    for (int i = 0; i < *n; i++)
        if (ms[i].kind == M_OP) ms[i].op = ms[i].name + 3;
    if (*n == 0) vb_die_input("compare: --metric: empty list");
    return ms;
}

/* Samples of one metric over the runs of one point, each with the run it
 * came from: the verdict's unit is the run (verdict.h). */
typedef struct {
    double *v;
    int *run;         /* index of the run (0 .. nruns - 1) each sample came from */
    int n, cap, rcap;
    int nruns;        /* runs read */
    int min_per_run;  /* fewest samples one run gave (0 when none) */
} samples;

static void add_sample(samples *s, double v) {
    GROW(s->run, s->n, s->rcap);
    GROW(s->v, s->n, s->cap);
    s->run[s->n] = s->nruns;
    s->v[s->n++] = v;
}

/* samples_per_s of the timed rank-0 trials of one type, through the one
 * trials.csv reader and its checks (trials_csv.h: a cut record, a swapped
 * header, a repeated trial, rows of another run, numbers that disagree) */
static void throughput_samples(const char *run, vb_trial_kind type, samples *s) {
    vb_trials t;
    char why[VB_PATH_MAX + 512];
    if (vb_trials_read(run, &t, why, sizeof why) != 0) {
        vb_trials_free(&t);
        vb_die_input("compare: %s", why);
    }
    for (int i = 0; i < t.n[type]; i++) add_sample(s, t.rate[type][i]);
    vb_trials_free(&t);
}

/* The mean FULL step time of each timed trial on rank 0 (iterations.csv):
 * one sample per trial, not per step. The steps of one trial share its
 * machine state (clocks, caches, the neighbours' load), so they are not
 * independent samples: two identical runs compared step by step get p-values
 * near 1e-12 from a few percent of drift between the runs. */
static void step_time_samples(const char *run, samples *s) {
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, run, VB_ITERATIONS_CSV);
    vb_csv t;
    read_csv_or_die(path, &t);
    int ct = need_col(&t, path, "trial_type"), cw = need_col(&t, path, "warmup");
    int cv = need_col(&t, path, "seconds"), cr = vb_csv_col(&t, VB_COL_RANK);
    int ci = need_col(&t, path, "trial_index");
    double *sum = vb_calloc_check((size_t)t.nrows + 1, sizeof *sum);
    int *cnt = vb_calloc_check((size_t)t.nrows + 1, sizeof *cnt), *idx = vb_calloc_check((size_t)t.nrows + 1, sizeof *idx);
    int ntrials = 0;
    for (int i = 0; i < t.nrows; i++) {
        if (strcmp(vb_csv_get(&t, i, ct), "FULL") != 0) continue;
        if (need_num(&t, path, i, cw) != 0 || !rank0(&t, path, i, cr)) continue;
        const int trial = (int)need_num(&t, path, i, ci);
        int k = 0;
        while (k < ntrials && idx[k] != trial) k++;
        if (k == ntrials) idx[ntrials++] = trial;
        sum[k] += need_num(&t, path, i, cv);
        cnt[k]++;
    }
    for (int k = 0; k < ntrials; k++) add_sample(s, sum[k] / cnt[k]);
    free(sum), free(cnt), free(idx);
    vb_csv_free(&t);
}

/* The ops.csv rows to use: rank 0, and where ops.csv splits by trial type
 * (a trial_type column with FULL rows) only FULL's; else the rows that hold
 * every timed step. Returns the trial type chosen ("FULL" or ""). */
static const char *ops_trial_type(const vb_csv *t) {
    int ct = vb_csv_col(t, VB_COL_TRIAL_TYPE);
    if (ct < 0) return "";
    for (int i = 0; i < t->nrows; i++)
        if (strcmp(vb_csv_get(t, i, ct), "FULL") == 0) return "FULL";
    return "";
}

static bool ops_row_used(const vb_csv *t, const char *path, int row, const char *type) {
    int ct = vb_csv_col(t, VB_COL_TRIAL_TYPE);
    if (ct >= 0 && strcmp(vb_csv_get(t, row, ct), type) != 0) return false;
    return rank0(t, path, row, vb_csv_col(t, VB_COL_RANK));
}

/* the op's avg_s on rank 0: one sample per run (none if the op is absent) */
static void op_samples(const char *run, const char *op, samples *s) {
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, run, VB_OPS_CSV);
    vb_csv t;
    read_csv_or_die(path, &t);
    int cn = need_col(&t, path, "name"), cv = need_col(&t, path, "avg_s");
    const char *type = ops_trial_type(&t);
    for (int i = 0; i < t.nrows; i++) {
        if (strcmp(vb_csv_get(&t, i, cn), op) != 0 || !ops_row_used(&t, path, i, type)) continue;
        add_sample(s, need_num(&t, path, i, cv));
        break;
    }
    vb_csv_free(&t);
}

static void collect_run(const char *run, const metric *m, samples *s) {
    int before = s->n;
    switch (m->kind) {
    case M_THROUGHPUT: throughput_samples(run, m->trial, s); break;
    case M_STEP_TIME: step_time_samples(run, s); break;
    case M_OP: op_samples(run, m->op, s); break;
    }
    int got = s->n - before;
    if (s->nruns == 0 || got < s->min_per_run) s->min_per_run = got;
    s->nruns++;
}

/* ---- the two sides ---- */

typedef struct {
    char *key;     /* swept key=value pairs sorted by key: what matches points */
    char *label;   /* the same pairs in index.csv's order: what the table shows */
    char **runs;   /* run directories of its completed rows (repeats pool) */
    int *rounds;   /* each run's round (index.csv's repeat); -1 when it has none */
    int nruns, cap, rcap;
} point;

typedef struct {
    const char *role;  /* "BASE" or "NEW" */
    const char *path;
    bool sweep;
    point *pts;
    int npts, cap;
    point *failed;     /* sweep: the points of its rows that did not complete (runs: the rows' run_dir) */
    int nfailed, fcap;
} side;

/* The point of `key` in pts, added when absent; takes key and label (an
 * empty label becomes "-"). */
static point *point_of(point **pts, int *n, int *cap, char *key, char *label) {
    for (int i = 0; i < *n; i++)
        if (strcmp((*pts)[i].key, key) == 0) {
            free(key), free(label);
            return &(*pts)[i];
        }
    GROW(*pts, *n, *cap);
    point *p = &(*pts)[(*n)++];
    *p = (point){key, label[0] ? label : vb_strdup_check("-"), NULL, NULL, 0, 0, 0};
    if (!label[0]) free(label);
    return p;
}

/* index of the point with this key, or -1 */
static int find_point(const side *sd, const char *key) {
    for (int i = 0; i < sd->npts; i++)
        if (strcmp(sd->pts[i].key, key) == 0) return i;
    return -1;
}

static void point_add_run(point *p, const char *run, int round) {
    GROW(p->rounds, p->nruns, p->rcap);
    GROW(p->runs, p->nruns, p->cap);
    p->rounds[p->nruns] = round;
    p->runs[p->nruns++] = vb_strdup_check(run);
}

/* index.csv's repeat of a record as a round, -1 without one */
static int round_of(const vb_csv *t, int row, int col) {
    const char *v = col >= 0 ? vb_csv_get(t, row, col) : "";
    char *end;
    const long r = strtol(v, &end, 10);
    return *v && !*end && r >= 0 && r < 1000000 ? (int)r : -1;
}

typedef struct {
    const char *name, *value;
} kv;

static int cmp_kv(const void *a, const void *b) { return strcmp(((const kv *)a)->name, ((const kv *)b)->name); }

/* "k=v k=v" of n pairs */
static char *join_pairs(const kv *pairs, int n) {
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(pairs[i].name) + strlen(pairs[i].value) + 2;
    char *s = vb_calloc_check(len, 1);
    for (int i = 0; i < n; i++) {
        if (i) strcat(s, " ");
        strcat(s, pairs[i].name);
        strcat(s, "=");
        strcat(s, pairs[i].value);
    }
    return s;
}

static void load_sweep(side *sd) {
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, sd->path, VB_INDEX_CSV);
    vb_csv t;
    read_csv_or_die(path, &t);
    int cdir = need_col(&t, path, "run_dir"), cst = need_col(&t, path, "status");
    const int crep = vb_csv_col(&t, VB_COL_REPEAT);
    kv *pairs = vb_calloc_check((size_t)t.ncols, sizeof *pairs);
    for (int r = 0; r < t.nrows; r++) {
        const bool done = strcmp(vb_csv_get(&t, r, cst), "completed") == 0;
        const char *dir = vb_csv_get(&t, r, cdir);
        char run[VB_PATH_MAX], why[VB_PATH_MAX + 128];
        if (done && vb_sweep_run_path(run, sizeof run, sd->path, dir, why, sizeof why) != 0)
            vb_die_input("compare: %s: record %d: %s", path, r + 2, why);
        int n = 0;
        for (int c = 0; c < t.ncols; c++)
            if (vb_index_column_is_swept(t.header[c])) pairs[n++] = (kv){t.header[c], vb_csv_get(&t, r, c)};
        char *label = join_pairs(pairs, n);
        qsort(pairs, (size_t)n, sizeof *pairs, cmp_kv);
        char *key = join_pairs(pairs, n);
        if (!done) { /* a run that failed, was interrupted or never ran: named when its point is compared */
            point *f = point_of(&sd->failed, &sd->nfailed, &sd->fcap, key, label);
            char what[VB_PATH_MAX + 64];
            vb_snprintf(what, sizeof what, "%s (%s)", *dir ? dir : "?", vb_csv_get(&t, r, cst));
            point_add_run(f, what, -1);
            continue;
        }
        point *p = point_of(&sd->pts, &sd->npts, &sd->cap, key, label);
        if (!vb_dir_exists(run)) vb_die_input("compare: %s: record %d: run directory %s does not exist", path, r + 2, run);
        point_add_run(p, run, round_of(&t, r, crep));
    }
    free(pairs);
    vb_csv_free(&t);
    if (sd->npts == 0) vb_die_input("compare: %s: no completed run", path);
}

static void load_side(side *sd, const char *role, const char *path) {
    memset(sd, 0, sizeof *sd);
    sd->role = role;
    sd->path = path;
    if (!vb_dir_exists(path)) vb_die_input("compare: %s %s is not a directory", role, path);
    char f[VB_PATH_MAX];
    vb_dir_file(f, sizeof f, path, VB_INDEX_CSV);
    if (vb_file_exists(f)) {
        sd->sweep = true;
        load_sweep(sd);
        return;
    }
    vb_dir_file(f, sizeof f, path, VB_RUN_JSON);
    if (!vb_file_exists(f))
        vb_die_input("compare: %s %s is neither a run directory (run.json) nor a sweep directory (index.csv)", role,
                     path);
    GROW(sd->pts, sd->npts, sd->cap);
    sd->pts[sd->npts++] = (point){vb_strdup_check(""), vb_strdup_check("-"), NULL, NULL, 0, 0, 0};
    point_add_run(&sd->pts[0], path, -1);
}

static void free_points(point *pts, int n) {
    for (int i = 0; i < n; i++) {
        point *p = &pts[i];
        for (int r = 0; r < p->nruns; r++) free(p->runs[r]);
        free(p->runs), free(p->rounds), free(p->key), free(p->label);
    }
    free(pts);
}

static void free_side(side *sd) {
    free_points(sd->pts, sd->npts);
    free_points(sd->failed, sd->nfailed);
}

/* the side's failed runs of the point with this key, or NULL */
static const point *failed_of(const side *sd, const char *key) {
    for (int i = 0; i < sd->nfailed; i++)
        if (strcmp(sd->failed[i].key, key) == 0) return &sd->failed[i];
    return NULL;
}

/* "run_a (failed), run_b (failed)" of a failed point, into buf */
static const char *failed_runs(const point *f, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int r = 0; r < f->nruns && k + 1 < n; r++) {
        int w = snprintf(buf + k, n - k, "%s%s", r ? ", " : "", f->runs[r]);
        if (w < 0) break;
        k += (size_t)w;
    }
    return buf;
}

/* One point of each side, compared. */
typedef struct {
    const point *base, *new_;
    const char *label;
} pair;

/* Matches the sides' points: sweep against sweep by swept keys, otherwise a
 * run against a run or a one-point sweep. A BASE point NEW lacks (never run,
 * or every run of it failed) is named and counted in *missing: the gate
 * cannot pass on what was not measured. NEW's extra points have no baseline
 * and are noted; runs of a matched point that failed are noted too. */
static pair *match_points(const side *b, const side *n, int *npairs, int *missing, cJSON *json) {
    pair *ps = vb_calloc_check((size_t)(b->npts > n->npts ? b->npts : n->npts) + 1, sizeof *ps);
    *npairs = 0;
    *missing = 0;
    char runs[2048];
    if (b->sweep && n->sweep) {
        for (int i = 0; i < b->npts; i++) {
            int q = find_point(n, b->pts[i].key);
            const point *f = failed_of(n, b->pts[i].key);
            if (q >= 0) {
                ps[(*npairs)++] = (pair){&b->pts[i], &n->pts[q], b->pts[i].label};
                if (f)
                    printf("note: point %s: %d run%s of NEW did not complete and %s not compared: %s\n",
                           b->pts[i].label, f->nruns, f->nruns == 1 ? "" : "s", f->nruns == 1 ? "is" : "are",
                           failed_runs(f, runs, sizeof runs));
                continue;
            }
            (*missing)++;
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "point", b->pts[i].label);
            if (f) {
                printf("MISSING: point %s of BASE has no completed run in NEW: %s\n", b->pts[i].label,
                       failed_runs(f, runs, sizeof runs));
                cJSON_AddStringToObject(e, "why", "failed in NEW");
                cJSON_AddStringToObject(e, "runs", runs);
            } else {
                printf("MISSING: point %s of BASE is not in NEW\n", b->pts[i].label);
                cJSON_AddStringToObject(e, "why", "not in NEW");
            }
            cJSON_AddItemToArray(json, e);
        }
        for (int i = 0; i < n->npts; i++)
            if (find_point(b, n->pts[i].key) < 0)
                printf("note: point %s is only in NEW (no baseline to compare it with)\n", n->pts[i].label);
        if (*npairs == 0)
            vb_die_input("compare: no point of NEW %s matches one of BASE %s by its swept keys%s", n->path, b->path,
                         *missing ? " (BASE's points are missing or failed in NEW, listed above)" : "");
        return ps;
    }
    const side *sw = b->sweep ? b : n->sweep ? n : NULL;
    if (sw && sw->npts != 1)
        vb_die_input("compare: %s %s is a sweep of %d points and the other side a single run: compare two sweeps, "
                     "or the run with one of its runs",
                     sw->role, sw->path, sw->npts);
    ps[(*npairs)++] = (pair){&b->pts[0], &n->pts[0], sw ? sw->pts[0].label : "-"};
    return ps;
}

/* ---- comparability ---- */

static cJSON *load_run_json(const char *run) {
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, run, VB_RUN_JSON);
    const char *why;
    cJSON *j = vb_read_json_object(path, &why);
    if (!j) vb_die_input("compare: %s: %s", path, why);
    return j;
}

/* item as compact JSON text ("" when absent), caller frees */
static char *json_text(const cJSON *item) {
    if (!item) return vb_strdup_check("");
    if (cJSON_IsString(item)) return vb_strdup_check(item->valuestring);
    char *s = cJSON_PrintUnformatted(item);
    if (!s) vb_die_internal("cannot print JSON");
    char *d = vb_strdup_check(s);
    cJSON_free(s);
    return d;
}

typedef struct {
    char **allowed;
    int nallowed;
    int blocking;   /* differences not allowed */
    int accepted;   /* differences allowed by --allow_different */
    cJSON *list;    /* compare.json "differences" */
    /* warnings wait until the sides pass: an exit 2 prints one line only */
    char warnings[3][VB_PATH_MAX + 128];
    int nwarnings;
} diffs;

static void defer_warning(diffs *d, const char *fmt, const char *a, const char *b) {
    if (d->nwarnings < 3) vb_snprintf(d->warnings[d->nwarnings++], sizeof d->warnings[0], fmt, a, b);
}

static bool allowed(const diffs *d, const char *name) {
    for (int i = 0; i < d->nallowed; i++)
        if (strcmp(d->allowed[i], name) == 0) return true;
    return false;
}

/* Records a difference between a and b (JSON texts) named `name` (what
 * --allow_different takes) and `group` (a name that also accepts it, or NULL). */
static void differ(diffs *d, const char *name, const char *group, const char *what, const char *a, const char *b) {
    bool ok = allowed(d, name) || (group && allowed(d, group));
    printf("difference: %s: BASE %s, NEW %s%s\n", what, *a ? a : "(absent)", *b ? b : "(absent)",
           ok ? " (allowed)" : "");
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "key", name);
    cJSON_AddStringToObject(e, "what", what);
    cJSON_AddStringToObject(e, "base", a);
    cJSON_AddStringToObject(e, "new", b);
    cJSON_AddBoolToObject(e, "allowed", ok);
    cJSON_AddItemToArray(d->list, e);
    if (ok)
        d->accepted++;
    else
        d->blocking++;
}

/* compares one item; absent on both sides is no difference */
static void check_item(diffs *d, const cJSON *a, const cJSON *b, const char *name, const char *group,
                       const char *what) {
    if (!a && !b) return;
    char *ta = json_text(a), *tb = json_text(b);
    if (strcmp(ta, tb) != 0) differ(d, name, group, what, ta, tb);
    free(ta);
    free(tb);
}

/* config keys that name the model and what a sample is */
static const char *const k_config_keys[] = {"config",        "embed_dim",      "depth",         "num_heads",
                                             "patch_size",    "img_size",       "n_in_channels", "n_out_channels"};
/* fingerprint fields machine_key is made of (results.h) */
static const char *const k_machine_fields[] = {"cpu_model", "affinity_cores", "omp_threads", "ranks",
                                               "backend",   "blas_coretype",  "gpu_name"};
#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void check_config(diffs *d, const cJSON *a, const cJSON *b) {
    const cJSON *ca = cJSON_GetObjectItemCaseSensitive(a, "config");
    const cJSON *cb = cJSON_GetObjectItemCaseSensitive(b, "config");
    for (int i = 0; i < N_OF(k_config_keys); i++) {
        char what[96];
        vb_snprintf(what, sizeof what, "config %s", k_config_keys[i]);
        check_item(d, cJSON_GetObjectItemCaseSensitive(ca, k_config_keys[i]),
                   cJSON_GetObjectItemCaseSensitive(cb, k_config_keys[i]), k_config_keys[i], NULL, what);
    }
    check_item(d, cJSON_GetObjectItemCaseSensitive(a, "global_batch_size"),
               cJSON_GetObjectItemCaseSensitive(b, "global_batch_size"), "global_batch_size", NULL,
               "global_batch_size");
    check_item(d, cJSON_GetObjectItemCaseSensitive(a, "local_batch_size"),
               cJSON_GetObjectItemCaseSensitive(b, "local_batch_size"), "local_batch_size", NULL,
               "local_batch_size");
    /* other config keys may differ on purpose (that is what an A/B compares):
     * shown, never blocking */
    const cJSON *item;
    cJSON_ArrayForEach(item, ca) {
        const char *k = item->string;
        bool core = strcmp(k, "output_dir") == 0 || strcmp(k, "run_name") == 0;
        for (int i = 0; i < N_OF(k_config_keys) && !core; i++) core = strcmp(k, k_config_keys[i]) == 0;
        if (core) continue;
        char *ta = json_text(item), *tb = json_text(cJSON_GetObjectItemCaseSensitive(cb, k));
        if (strcmp(ta, tb) != 0) printf("note: config %s: BASE %s, NEW %s\n", k, ta, *tb ? tb : "(absent)");
        free(ta);
        free(tb);
    }
}

/* cross: one side is an imported run of another program, whose files do
 * not say its tp x cp x dp layout or backend: its ranks are compared */
static void check_layout(diffs *d, const cJSON *a, const cJSON *b, bool cross) {
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "parallel");
    const cJSON *pb = cJSON_GetObjectItemCaseSensitive(b, "parallel");
    static const char *const dims[] = {"tp", "cp", "dp"};
    for (int i = 0; i < 3 && !cross; i++) {
        char what[32];
        vb_snprintf(what, sizeof what, "layout %s", dims[i]);
        check_item(d, cJSON_GetObjectItemCaseSensitive(pa, dims[i]), cJSON_GetObjectItemCaseSensitive(pb, dims[i]),
                   dims[i], "layout", what);
    }
    check_item(d, cJSON_GetObjectItemCaseSensitive(a, "ranks"), cJSON_GetObjectItemCaseSensitive(b, "ranks"), "ranks",
               "layout", "layout ranks");
    if (!cross)
        check_item(d, cJSON_GetObjectItemCaseSensitive(a, "backend"), cJSON_GetObjectItemCaseSensitive(b, "backend"),
                   "backend", NULL, "backend");
}

/* The program an imported run (vitbench import) came from, or NULL for
 * vitbench's own run. */
static const char *imported_program(const cJSON *run_json) {
    const cJSON *im = cJSON_GetObjectItemCaseSensitive(run_json, "imported");
    if (!cJSON_IsObject(im)) return NULL;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(im, "program");
    return cJSON_IsString(p) ? p->valuestring : "another program";
}

/* The machine: equal machine_keys pass. Different ones are explained by the
 * fingerprint fields they are made of, each its own (allowable) difference;
 * a key that differs with no such field to show is one "machine_key"
 * difference. Without machine_key (an older run.json) the fields both sides
 * have are compared; without a fingerprint the machine is not checked. */
static void check_machine(diffs *d, const cJSON *a, const cJSON *b) {
    /* an imported run has no fingerprint to match: its machine key is unknown,
     * which is said, never taken for a match */
    const bool ia = imported_program(a), ib = imported_program(b);
    if (ia || ib) {
        defer_warning(d, "compare: machine key unknown on %s: %s no machine fingerprint (vitbench import); the "
                         "machines are not compared and no match with a baseline's machine is claimed",
                      ia && ib ? "both sides" : ia ? "BASE" : "NEW",
                      ia && ib ? "BASE and NEW are imported runs, which carry" : "an imported run carries");
        return;
    }
    const cJSON *fa = cJSON_GetObjectItemCaseSensitive(a, "fingerprint");
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(b, "fingerprint");
    if (!cJSON_IsObject(fa) || !cJSON_IsObject(fb)) {
        defer_warning(d, "compare: %s run.json has no fingerprint: the machines are not compared%s",
                      !cJSON_IsObject(fa) ? "BASE's" : "NEW's", "");
        return;
    }
    const cJSON *ka = cJSON_GetObjectItemCaseSensitive(fa, "machine_key");
    const cJSON *kb = cJSON_GetObjectItemCaseSensitive(fb, "machine_key");
    char *ta = json_text(ka), *tb = json_text(kb);
    bool keys = ka && kb;
    bool same = keys && strcmp(ta, tb) == 0;
    if (!keys)
        defer_warning(d, "compare: no fingerprint.machine_key on %s%s: comparing the fingerprint fields both have",
                      !ka ? "BASE" : "NEW", "");
    if (!same) {
        int before = d->blocking + d->accepted;
        for (int i = 0; i < N_OF(k_machine_fields); i++) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(fa, k_machine_fields[i]);
            const cJSON *y = cJSON_GetObjectItemCaseSensitive(fb, k_machine_fields[i]);
            if (!x || !y) continue;
            char what[64];
            vb_snprintf(what, sizeof what, "fingerprint %s", k_machine_fields[i]);
            check_item(d, x, y, k_machine_fields[i], "machine_key", what);
        }
        if (keys && d->blocking + d->accepted == before)
            differ(d, "machine_key", NULL, "fingerprint machine_key", ta, tb);
    }
    free(ta);
    free(tb);
}

/* Names --allow_different takes: the fixed ones, any config key and any
 * fingerprint field of either side. */
static void check_allow_names(const diffs *d, const cJSON *a, const cJSON *b) {
    static const char *const fixed[] = {"config", "layout", "backend", "machine_key", "tp", "cp", "dp", "ranks",
                                        "global_batch_size", "local_batch_size"};
    for (int i = 0; i < d->nallowed; i++) {
        const char *k = d->allowed[i];
        bool known = false;
        for (int j = 0; j < N_OF(fixed) && !known; j++) known = strcmp(k, fixed[j]) == 0;
        const cJSON *sides[2] = {a, b};
        for (int s = 0; s < 2 && !known; s++) {
            known = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sides[s], "config"), k) ||
                    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sides[s], "fingerprint"), k);
        }
        for (int j = 0; j < N_OF(k_machine_fields) && !known; j++) known = strcmp(k, k_machine_fields[j]) == 0;
        if (!known)
            vb_die_input("compare: --allow_different: unknown key '%s' (config, layout, backend, machine_key, a "
                         "config key or a fingerprint field)",
                         k);
    }
}

static void warn_status(diffs *d, const char *run, const cJSON *j) {
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
    if (cJSON_IsString(st) && strcmp(st->valuestring, "completed") != 0)
        defer_warning(d, "compare: %s/run.json: status is '%s': comparing the trials it finished", run,
                      st->valuestring);
}

/* Exits 2 after listing the differences when the sides are not comparable.
 * A side imported from another program (vitbench import) beside vitbench's
 * own run is a comparison of two trainers: their configs and backends are
 * not held to each other (the imported files have none), their ranks and
 * batches are, and caveat (n bytes) says so; "" otherwise. */
static void check_comparable(diffs *d, const char *base_run, const char *new_run, char *caveat, size_t n) {
    cJSON *a = load_run_json(base_run), *b = load_run_json(new_run);
    const char *pa = imported_program(a), *pb = imported_program(b);
    const bool cross = (pa != NULL) != (pb != NULL);
    caveat[0] = '\0';
    if (cross)
        vb_snprintf(caveat, n, "BASE is %s, NEW %s: different programs. The ratios say how the two trainers compare "
                    "at each point on the machines they ran on, not how a change to one of them did",
                    pa ? pa : "vitbench's trainer", pb ? pb : "vitbench's trainer");
    check_allow_names(d, a, b);
    warn_status(d, base_run, a);
    warn_status(d, new_run, b);
    if (!cross) check_config(d, a, b);
    else
        check_item(d, cJSON_GetObjectItemCaseSensitive(a, "global_batch_size"),
                   cJSON_GetObjectItemCaseSensitive(b, "global_batch_size"), "global_batch_size", NULL,
                   "global_batch_size");
    check_layout(d, a, b, cross);
    check_machine(d, a, b);
    cJSON_Delete(a);
    cJSON_Delete(b);
    if (d->blocking > 0) {
        fflush(stdout);
        vb_die_input("compare: BASE and NEW are not comparable: %d difference%s listed above (accept named ones "
                     "with --allow_different KEY,...)",
                     d->blocking, d->blocking == 1 ? "" : "s");
    }
    for (int i = 0; i < d->nwarnings; i++) vb_warn("%s", d->warnings[i]);
}

/* ---- statistics and verdicts ---- */

/* The table's and compare.json's words: the rule's (verdict.h) */
#define V_EQUIVALENT VB_VERDICT_EQUIVALENT
#define V_IMPROVEMENT VB_VERDICT_BETTER
#define V_REGRESSION VB_VERDICT_WORSE
#define V_INCONCLUSIVE VB_VERDICT_INCONCLUSIVE
#define V_NO_SAMPLES VB_VERDICT_NO_SAMPLES
#define NVERDICTS 5

typedef struct {
    int n, nruns, per_run;
    double median, mean, std, min, max;
    double spread;     /* largest max / min inside one run (NaN: no run with two samples) */
    double load;       /* mean load share over its runs that recorded one (run_load.h); NaN: none */
    int load_runs;     /* runs with load.csv */
    vb_run_load load0; /* the first run's, for the notes */
    vb_cause cause;    /* what its runs show (advice.h): load, spread, threads given and run */
} side_summary;

typedef struct {
    const pair *pr;
    const metric *m;
    side_summary base, new_;
    double ratio;
    vb_ci ci;
    vb_verdict vv;
    vb_verdict_kind v;
    int repeats_needed;  /* inconclusive: runs a side the rule would want */
} result;

static bool noisy(const side_summary *s) {
    return vb_verdict_busy(s->spread, s->load);
}

/* largest max / min inside one run */
static double run_spread(const samples *s) {
    double sp = NAN;
    for (int r = 0; r < s->nruns; r++) {
        double lo = INFINITY, hi = -INFINITY;
        int k = 0;
        for (int i = 0; i < s->n; i++)
            if (s->run[i] == r) {
                lo = s->v[i] < lo ? s->v[i] : lo;
                hi = s->v[i] > hi ? s->v[i] : hi;
                k++;
            }
        if (k >= 2 && lo > 0 && (isnan(sp) || hi / lo > sp)) sp = hi / lo;
    }
    return sp;
}

static side_summary summarize(const samples *s) {
    side_summary r = {s->n, s->nruns, s->min_per_run, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 0, {0}, {0}};
    if (s->n == 0) return r;
    r.median = vb_stats_median(s->v, s->n);
    r.mean = vb_stats_mean(s->v, s->n);
    r.std = vb_stats_std(s->v, s->n, 1);
    r.min = vb_stats_min(s->v, s->n);
    r.max = vb_stats_max(s->v, s->n);
    r.spread = run_spread(s);
    return r;
}

/* the load of a point's runs during the metric's trials */
static void side_load(side_summary *sum, const point *pt, const metric *m) {
    vb_run_load *l = vb_calloc_check((size_t)pt->nruns, sizeof *l);
    /* step_time and op: FULL's steps */
    const char *type = vb_trial_kinds[m->kind == M_THROUGHPUT ? m->trial : VB_TRIAL_FULL].name;
    for (int i = 0; i < pt->nruns; i++) {
        vb_run_load_read(pt->runs[i], type, "compare", &l[i]);
        sum->load_runs += l[i].recorded;
    }
    sum->load = vb_run_load_mean(l, pt->nruns);
    sum->load0 = l[0];
    /* what the advice needs: the busiest run's load, the trials' spread, the
     * threads each run was given and ran (run.json's threads) */
    vb_cause *c = &sum->cause;
    *c = (vb_cause){.runs = pt->nruns, .load = NAN, .spread = sum->spread};
    for (int i = 0; i < pt->nruns; i++) {
        if (l[i].recorded && !(l[i].share <= c->load)) c->load = l[i].share;
        char path[VB_PATH_MAX];
        vb_dir_file(path, sizeof path, pt->runs[i], VB_RUN_JSON);
        const char *why;
        cJSON *j = vb_read_json_object(path, &why);
        const cJSON *th = cJSON_GetObjectItemCaseSensitive(j, "threads");
        const cJSON *team = cJSON_GetObjectItemCaseSensitive(th, "team"), *used = cJSON_GetObjectItemCaseSensitive(th, "per_rank");
        if (cJSON_IsNumber(used) && used->valuedouble >= 1 && used->valuedouble < 1e6) {
            const int u = (int)used->valuedouble;
            const int t = cJSON_IsNumber(team) && team->valuedouble >= u && team->valuedouble < 1e6 ? (int)team->valuedouble : u;
            if (u > c->used) c->used = u;
            if (t > c->team) c->team = t;
            c->gave_way = c->gave_way || t > u;
        }
        c->oversubscribed = c->oversubscribed || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(th, "oversubscribed"));
        cJSON_Delete(j);
    }
    free(l);
}

/* Runs a side that would settle an inconclusive verdict: enough for 5
 * samples, and at least two (the run-to-run spread) */
static int repeats_for(const side_summary *s) {
    int r = s->per_run > 0 ? (MIN_SAMPLES + s->per_run - 1) / s->per_run : MIN_SAMPLES;
    if (r < s->nruns) r = s->nruns;
    return r < 2 ? 2 : r;
}

static result compare_one(const pair *pr, const metric *m, const vb_verdict_opts *opts) {
    samples sb = {0}, sn = {0};
    for (int i = 0; i < pr->base->nruns; i++) collect_run(pr->base->runs[i], m, &sb);
    for (int i = 0; i < pr->new_->nruns; i++) collect_run(pr->new_->runs[i], m, &sn);
    result r = {.pr = pr, .m = m, .base = summarize(&sb), .new_ = summarize(&sn), .ratio = NAN};
    side_load(&r.base, pr->base, m);
    side_load(&r.new_, pr->new_, m);
    vb_verdict_opts o = *opts;
    o.higher_is_better = m->higher_is_better;
    /* paired: every run of both points in a round (index.csv's repeat) */
    int *rb = NULL, *rn = NULL;
    if (o.paired) {
        rb = vb_calloc_check((size_t)sb.n + 1, sizeof *rb), rn = vb_calloc_check((size_t)sn.n + 1, sizeof *rn);
        for (int i = 0; i < sb.n; i++) rb[i] = pr->base->rounds[sb.run[i]];
        for (int i = 0; i < sn.n; i++) rn[i] = pr->new_->rounds[sn.run[i]];
        for (int i = 0; i < sb.n && o.paired; i++) o.paired = rb[i] >= 0;
        for (int i = 0; i < sn.n && o.paired; i++) o.paired = rn[i] >= 0;
        if (!o.paired)
            vb_die_input("compare: --paired: a run of point %s has no round (index.csv's repeat column); pair two "
                         "sweeps whose runs alternated in rounds (vitbench sweep --ab, perf_ci.sh --base)",
                         pr->label);
    }
    const vb_verdict_side b = {sb.v, sb.run, sb.n, r.base.load, rb}, n = {sn.v, sn.run, sn.n, r.new_.load, rn};
    r.vv = vb_verdict_judge(&b, &n, &o);
    free(rb), free(rn);
    r.ratio = r.vv.ratio;
    r.ci = r.vv.ci;
    r.v = r.vv.kind;
    if (r.v == V_INCONCLUSIVE) {
        int rb = repeats_for(&r.base), rn = repeats_for(&r.new_);
        r.repeats_needed = rb > rn ? rb : rn;
    }
    free(sb.v), free(sb.run);
    free(sn.v), free(sn.run);
    return r;
}

/* ---- per-op growth under a regression ---- */

typedef struct {
    char *name;
    double base, new_;  /* seconds per step (or per call, see ops_per_step) */
    int nb, nn;         /* runs that had the op */
} op_growth;

typedef struct {
    op_growth *v;
    int n, cap;
    bool per_call;      /* some run had no usable iterations.csv: avg_s per call instead */
} op_table;

/* timed steps on rank 0 that the chosen ops.csv rows cover: FULL's when ops
 * are split by trial type, else every timed SYNTHETIC and FULL step; 0 when
 * iterations.csv is missing or unusable */
static int timed_steps(const char *run, const char *type) {
    char path[VB_PATH_MAX], err[VB_PATH_MAX + 256];
    vb_dir_file(path, sizeof path, run, VB_ITERATIONS_CSV);
    vb_csv t;
    if (vb_csv_read(path, &t, err, sizeof err) != 0) return 0;
    int ct = vb_csv_col(&t, VB_COL_TRIAL_TYPE), cw = vb_csv_col(&t, VB_COL_WARMUP), cr = vb_csv_col(&t, VB_COL_RANK);
    int n = 0;
    for (int i = 0; ct >= 0 && cw >= 0 && i < t.nrows; i++) {
        const char *tt = vb_csv_get(&t, i, ct);
        bool wanted = *type ? strcmp(tt, type) == 0 : strcmp(tt, "SYNTHETIC") == 0 || strcmp(tt, "FULL") == 0;
        double w, rk = 0;
        if (!wanted || !vb_csv_num(&t, i, cw, &w) || w != 0) continue;
        if (cr >= 0 && (!vb_csv_num(&t, i, cr, &rk) || rk != 0)) continue;
        n++;
    }
    vb_csv_free(&t);
    return n;
}

static op_growth *op_entry(op_table *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->v[i].name, name) == 0) return &t->v[i];
    GROW(t->v, t->n, t->cap);
    t->v[t->n] = (op_growth){vb_strdup_check(name), 0, 0, 0, 0};
    return &t->v[t->n++];
}

/* adds one run's per-step op times to the table (is_new picks the column);
 * returns false (and adds nothing) without a readable ops.csv */
static bool add_run_ops(op_table *t, const char *run, bool is_new, bool per_call) {
    char path[VB_PATH_MAX], err[VB_PATH_MAX + 256];
    vb_dir_file(path, sizeof path, run, VB_OPS_CSV);
    vb_csv c;
    if (vb_csv_read(path, &c, err, sizeof err) != 0) return false;
    int cn = vb_csv_col(&c, VB_COL_NAME), ctot = vb_csv_col(&c, VB_COL_TOTAL_S), cavg = vb_csv_col(&c, VB_COL_AVG_S);
    const char *type = ops_trial_type(&c);
    int steps = per_call ? 0 : timed_steps(run, type);
    bool ok = cn >= 0 && (per_call ? cavg >= 0 : ctot >= 0 && steps > 0);
    for (int i = 0; ok && i < c.nrows; i++) {
        int ct = vb_csv_col(&c, VB_COL_TRIAL_TYPE), cr = vb_csv_col(&c, VB_COL_RANK);
        double rk = 0, v;
        if (ct >= 0 && strcmp(vb_csv_get(&c, i, ct), type) != 0) continue;
        if (cr >= 0 && (!vb_csv_num(&c, i, cr, &rk) || rk != 0)) continue;
        if (!vb_csv_num(&c, i, per_call ? cavg : ctot, &v)) continue;
        op_growth *g = op_entry(t, vb_csv_get(&c, i, cn));
        if (is_new) {
            g->new_ += per_call ? v : v / steps;
            g->nn++;
        } else {
            g->base += per_call ? v : v / steps;
            g->nb++;
        }
    }
    vb_csv_free(&c);
    return ok;
}

static int cmp_growth(const void *a, const void *b) {
    const op_growth *x = a, *y = b;
    double gx = x->new_ - x->base, gy = y->new_ - y->base;
    return (gy > gx) - (gy < gx);
}

static void fill_op_table(op_table *t, const pair *pr, bool per_call) {
    for (int i = 0; i < pr->base->nruns; i++)
        if (!add_run_ops(t, pr->base->runs[i], false, per_call)) t->per_call = true;
    for (int i = 0; i < pr->new_->nruns; i++)
        if (!add_run_ops(t, pr->new_->runs[i], true, per_call)) t->per_call = true;
}

/* Mean per-step time of every op on each side, sorted by growth. Per step
 * (total_s / timed steps) where every run has iterations.csv, else per call
 * (avg_s), so the two sides are always in the same unit. */
static op_table op_growths(const pair *pr) {
    op_table t = {0};
    fill_op_table(&t, pr, false);
    if (t.per_call) {
        for (int i = 0; i < t.n; i++) free(t.v[i].name);
        t.n = 0;
        fill_op_table(&t, pr, true);
        t.per_call = true;
    }
    for (int i = 0; i < t.n; i++) {
        if (t.v[i].nb) t.v[i].base /= t.v[i].nb;
        if (t.v[i].nn) t.v[i].new_ /= t.v[i].nn;
    }
    if (t.n > 1) qsort(t.v, (size_t)t.n, sizeof *t.v, cmp_growth); /* t.v is NULL without ops */
    return t;
}

static void free_op_table(op_table *t) {
    for (int i = 0; i < t->n; i++) free(t->v[i].name);
    free(t->v);
}

/* Prints (and records in json) the TOP_OPS ops whose time grew most. */
static void report_op_growth(const pair *pr, cJSON *json) {
    op_table t = op_growths(pr);
    int shown = 0;
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < t.n && shown < TOP_OPS; i++) {
        const op_growth *g = &t.v[i];
        double grow = g->new_ - g->base;
        if (!(grow > 0)) break;
        if (shown == 0) {
            fputs("\nOps that grew most", stdout);
            if (strcmp(pr->label, "-") != 0) {
                fputs(" at ", stdout);
                vb_md_prose(stdout, pr->label);
            }
            printf(" (%s, rank 0; ops.csv):\n\n| op | base | new | growth |\n|---|---|---|---|\n",
                   t.per_call ? "avg_s per call" : "seconds per timed step");
        }
        fputs("| ", stdout);
        vb_md_cell(stdout, g->name); /* op names come from ops.csv */
        printf(" | %.4g | %.4g | +%.4g (%+.1f%%) |\n", g->base, g->new_, grow,
               g->base > 0 ? 100 * grow / g->base : INFINITY);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "op", g->name);
        cJSON_AddNumberToObject(e, "base_s", g->base);
        cJSON_AddNumberToObject(e, "new_s", g->new_);
        cJSON_AddNumberToObject(e, "growth_s", grow);
        cJSON_AddItemToArray(arr, e);
        shown++;
    }
    if (shown == 0) printf("\nNo op of point %s grew (or no ops.csv): the per-op breakdown does not explain it.\n",
                           pr->label);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "point", pr->label);
    cJSON_AddStringToObject(o, "unit", t.per_call ? "avg_s per call" : "seconds per timed step");
    cJSON_AddItemToObject(o, "ops", arr);
    cJSON_AddItemToArray(json, o);
    free_op_table(&t);
}

/* ---- output ---- */

/* what one sample of a metric is: the unit n counts */
static const char *sample_unit(const metric *m) { return m->kind == M_OP ? "runs" : "trials"; }

/* the verdict cell: the rule's word, and for an inconclusive one why and
 * what would settle it */
static void print_verdict_cell(const result *r) {
    char why[512];
    if (r->v != V_INCONCLUSIVE) {
        printf("%s |\n", vb_verdict_word(r->v));
        return;
    }
    vb_verdict_reason(&r->vv, why, sizeof why);
    fputs("inconclusive: ", stdout);
    vb_md_prose(stdout, why);
    switch (r->vv.why) {
    case VB_WHY_FEW_SAMPLES:
        if (r->m->kind == M_OP)
            printf(" (one per run): sweep with --repeats %d", r->repeats_needed);
        else if (r->base.nruns <= 1 && r->new_.nruns <= 1)
            printf(": run each side with benchy ntrials >= %d, e.g. --benchy_config scenarios/benchy/perf_ci.yaml, "
                   "and repeat it (sweep --repeats %d)",
                   MIN_SAMPLES, r->repeats_needed);
        else
            printf(": run %d repeats a side", r->repeats_needed);
        break;
    case VB_WHY_ONE_RUN: printf(": repeat each side (sweep --repeats %d)", r->repeats_needed); break;
    case VB_WHY_BUSY: fputs(": rerun the busy side on a quieter machine", stdout); break;
    default: break;
    }
    fputs(" |\n", stdout);
}

static void print_table(const result *rs, int n) {
    const double level = n > 0 ? 100 * rs[0].vv.level : 95;
    printf("\n| point | metric | base | new | ratio | %.3g%% CI | p | n base/new (runs) | verdict |\n"
           "|---|---|---|---|---|---|---|---|---|\n",
           level);
    for (int i = 0; i < n; i++) {
        const result *r = &rs[i];
        /* point labels are sweep values; op metrics carry ops.csv's names */
        fputs("| ", stdout);
        vb_md_cell(stdout, r->pr->label);
        fputs(" | ", stdout);
        vb_md_cell(stdout, r->m->name);
        printf(" (%s) | ", r->m->unit);
        if (r->v == V_NO_SAMPLES) {
            printf("- | - | - | - | - | %d (%d) / %d (%d) | no samples |\n", r->base.n, r->base.nruns, r->new_.n,
                   r->new_.nruns);
            continue;
        }
        printf("%.6g | %.6g | %.4f | ", r->vv.centre_base, r->vv.centre_new, r->ratio);
        if (!isnan(r->ci.lo))
            printf("[%.4f, %.4f] | ", r->ci.lo, r->ci.hi);
        else
            printf("undefined | ");
        printf("%.3g | %d (%d) / %d (%d) | ", r->vv.p, r->base.n, r->base.nruns, r->new_.n, r->new_.nruns);
        print_verdict_cell(r);
    }
}

/* One line after the notes when the load or the threads explain what the
 * table could not decide: what to rerun with (advice.h), from every side. */
static void print_advice(const result *rs, int n, bool sweeps, cJSON *root) {
    const vb_cause **c = vb_calloc_check(2 * (size_t)n + 1, sizeof *c);
    int k = 0;
    for (int i = 0; i < n; i++) {
        /* a decided verdict needs no rerun */
        if (rs[i].v != V_INCONCLUSIVE) continue;
        c[k++] = &rs[i].base.cause;
        c[k++] = &rs[i].new_.cause;
    }
    char adv[900];
    vb_advice(c, k, sweeps, adv, sizeof adv);
    if (adv[0]) printf("advice: %s\n", adv);
    cJSON_AddStringToObject(root, "advice", adv);
    free(c);
}

/* a line per busy side, after the table: its trials' spread and its load */
static void print_noise_notes(const result *rs, int n) {
    for (int i = 0; i < n; i++) {
        const side_summary *sides[2] = {&rs[i].base, &rs[i].new_};
        const bool at = strcmp(rs[i].pr->label, "-") != 0;
        for (int k = 0; k < 2; k++) {
            if (!noisy(sides[k])) continue;
            char load[160];
            vb_run_load_describe(&sides[k]->load0, load, sizeof load);
            /* a run of one trial has no spread: said so, never "nan" */
            char spread[64];
            if (isfinite(sides[k]->spread))
                snprintf(spread, sizeof spread, "largest max/min in one run %.2g", sides[k]->spread);
            else
                snprintf(spread, sizeof spread, "one trial a run: no spread within a run");
            printf("note: %s %s%s%s ran on a busy machine: samples %.4g .. %.4g %s (%s); %s%s", k ? "NEW" : "BASE",
                   at ? rs[i].pr->label : "", at ? " " : "", rs[i].m->name, sides[k]->min, sides[k]->max,
                   rs[i].m->unit, spread, sides[k]->nruns > 1 ? "first run: " : "", load);
            if (rs[i].vv.noise > 0) printf("; the interval is widened by %.3g%% for it", 100 * rs[i].vv.noise);
            printf("\n");
        }
        if (rs[i].vv.pairs > 0 && (i == 0 || rs[i - 1].pr != rs[i].pr))
            printf("note: %s%spaired over %d rounds: the unit is the round, the difference of its two runs\n",
                   at ? rs[i].pr->label : "", at ? ": " : "", rs[i].vv.pairs);
        if (isfinite(rs[i].base.load) && isfinite(rs[i].new_.load) &&
            fabs(rs[i].base.load - rs[i].new_.load) > rs[i].vv.threshold)
            printf("note: %s%s%s: BASE and NEW ran under very different load (%.3g%% and %.3g%% of thread time lost "
                   "to other work)\n",
                   at ? rs[i].pr->label : "", at ? " " : "", rs[i].m->name, 100 * rs[i].base.load,
                   100 * rs[i].new_.load);
        if (rs[i].vv.run_sd_source == VB_RUNSD_FLOOR && rs[i].v != V_NO_SAMPLES && (i == 0 || rs[i - 1].pr != rs[i].pr))
            printf("note: %s%sone run a side: the run-to-run spread is unknown; the interval assumes this machine's "
                   "floor of %.3g%% (--run_floor), and only an effect far beyond it can be told\n",
                   at ? rs[i].pr->label : "", at ? ": " : "", 100 * rs[i].vv.run_sd);
    }
}

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static cJSON *summary_json(const side_summary *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", s->n);
    cJSON_AddNumberToObject(o, "runs", s->nruns);
    cJSON_AddNumberToObject(o, "samples_per_run", s->per_run);
    cJSON_AddItemToObject(o, "median", num_or_null(s->median));
    cJSON_AddItemToObject(o, "mean", num_or_null(s->mean));
    cJSON_AddItemToObject(o, "std", num_or_null(s->std));
    cJSON_AddItemToObject(o, "min", num_or_null(s->min));
    cJSON_AddItemToObject(o, "max", num_or_null(s->max));
    cJSON_AddItemToObject(o, "spread_in_run", num_or_null(s->spread));
    cJSON_AddItemToObject(o, "load_share", num_or_null(s->load));
    cJSON_AddNumberToObject(o, "runs_with_load", s->load_runs);
    cJSON_AddBoolToObject(o, "busy", noisy(s));
    return o;
}

static const char *k_runsd_source[] = {"measured", "other side", "floor"};

static cJSON *result_json(const result *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "point", r->pr->label);
    cJSON_AddStringToObject(o, "metric", r->m->name);
    cJSON_AddStringToObject(o, "unit", r->m->unit);
    cJSON_AddStringToObject(o, "n_counts", sample_unit(r->m));
    cJSON_AddBoolToObject(o, "higher_is_better", r->m->higher_is_better);
    cJSON_AddItemToObject(o, "base", summary_json(&r->base));
    cJSON_AddItemToObject(o, "new", summary_json(&r->new_));
    cJSON_AddItemToObject(o, "base_centre", num_or_null(r->vv.centre_base));
    cJSON_AddItemToObject(o, "new_centre", num_or_null(r->vv.centre_new));
    cJSON_AddItemToObject(o, "ratio", num_or_null(r->ratio));
    cJSON_AddNumberToObject(o, "level", r->vv.level);
    cJSON *ci = cJSON_AddArrayToObject(o, "ci");
    cJSON_AddItemToArray(ci, num_or_null(r->ci.lo));
    cJSON_AddItemToArray(ci, num_or_null(r->ci.hi));
    cJSON *cr = cJSON_AddArrayToObject(o, "ci_before_load");
    cJSON_AddItemToArray(cr, num_or_null(r->vv.ci_runs.lo));
    cJSON_AddItemToArray(cr, num_or_null(r->vv.ci_runs.hi));
    cJSON_AddItemToObject(o, "load_widening", num_or_null(r->vv.noise));
    cJSON_AddBoolToObject(o, "load_differs", r->vv.load_differs);
    cJSON_AddItemToObject(o, "p", num_or_null(r->vv.p));
    cJSON_AddItemToObject(o, "df", num_or_null(r->vv.df));
    cJSON_AddItemToObject(o, "run_sd", num_or_null(r->vv.run_sd));
    cJSON_AddNumberToObject(o, "paired_rounds", r->vv.pairs);
    cJSON_AddStringToObject(o, "run_sd_from", k_runsd_source[r->vv.run_sd_source]);
    cJSON_AddStringToObject(o, "verdict", vb_verdict_word(r->v));
    if (r->v == V_INCONCLUSIVE) {
        char why[512];
        cJSON_AddStringToObject(o, "why", vb_verdict_reason(&r->vv, why, sizeof why));
        cJSON_AddNumberToObject(o, "repeats_needed", r->repeats_needed);
    }
    return o;
}

static void write_text(FILE *f, void *ctx) { fputs((const char *)ctx, f); }

/* body into dir/name by outdir.h's rule (a real directory, by rename); 0,
 * or -1 with why filled */
static int write_into(const char *dir, const char *name, const char *body, char *why, size_t n) {
    vb_outdir out;
    if (vb_outdir_open(&out, dir, "", why, n) != 0) return -1;
    int rc = vb_outdir_write(&out, name, write_text, (void *)body, why, n);
    vb_outdir_close(&out);
    return rc == 0 ? 0 : -1;
}

/* --output, else NEW's directory, else the working directory */
static void write_json(cJSON *root, const char *output, const char *new_dir) {
    char *text = cJSON_Print(root);
    if (!text) vb_die_internal("cannot serialise compare.json");
    size_t len = strlen(text);
    char *body = vb_calloc_check(len + 2, 1);
    memcpy(body, text, len);
    body[len] = '\n';
    cJSON_free(text);
    char path[VB_PATH_MAX], why[3 * VB_PATH_MAX];
    if (output) {
        char dir[VB_PATH_MAX], name[VB_PATH_MAX], copy[VB_PATH_MAX];
        vb_snprintf(copy, sizeof copy, "%s", output);
        vb_snprintf(dir, sizeof dir, "%s", dirname(copy));
        vb_snprintf(copy, sizeof copy, "%s", output);
        vb_snprintf(name, sizeof name, "%s", basename(copy));
        if (output[strlen(output) - 1] == '/' || write_into(dir, name, body, why, sizeof why) != 0)
            vb_die_input("compare: --output %s: cannot write (%s)", output,
                         output[strlen(output) - 1] == '/' ? "names a directory, not a file" : why);
        vb_snprintf(path, sizeof path, "%s", output);
    } else {
        vb_dir_file(path, sizeof path, new_dir, VB_COMPARE_JSON);
        if (access(new_dir, W_OK) != 0 || write_into(new_dir, VB_COMPARE_JSON, body, why, sizeof why) != 0) {
            vb_snprintf(path, sizeof path, VB_COMPARE_JSON);
            if (write_into(".", VB_COMPARE_JSON, body, why, sizeof why) != 0) {
                vb_warn("compare: could not write compare.json in %s or the working directory (%s)", new_dir, why);
                free(body);
                return;
            }
        }
    }
    fprintf(stderr, "vitbench: compare: wrote %s\n", path);
    free(body);
}

/* ---- command line ---- */

typedef struct {
    const char *base, *new_;
    const char *metrics;
    double alpha, threshold;
    const char *allow;
    const char *output;
    double run_floor;
    bool paired;
} options;

static double parse_fraction(const char *flag, const char *text, double lo, double hi, bool lo_open) {
    double v = NAN;
    if (vb_flag_parse_double(text, &v) != VB_NUM_OK || (lo_open ? v <= lo : v < lo) || v >= hi)
        vb_die_input("compare: %s: '%s' must be a number in %s%g, %g)", flag, text, lo_open ? "(" : "[", lo, hi);
    return v;
}

static void set_alpha(const char *flag, const char *value, void *ptr) {
    *(double *)ptr = parse_fraction(flag, value, 0, 1, true);
}

static void set_threshold(const char *flag, const char *value, void *ptr) {
    *(double *)ptr = parse_fraction(flag, value, 0, 1, false);
}

static void set_run_floor(const char *flag, const char *value, void *ptr) {
    *(double *)ptr = parse_fraction(flag, value, 0, 1, true);
}

/* BASE then NEW; anything else that is not a flag of the table is refused */
static void positional(void *ctx, const char *arg, const char *next) {
    options *o = ctx;
    (void)next;
    if (arg[0] == '-' && arg[1]) vb_die_input("compare: unknown flag '%s'%s", arg,
                     *vb_cli_hint(arg) ? vb_cli_hint(arg) : " (see vitbench compare --help)");
    if (!o->base)
        o->base = arg;
    else if (!o->new_)
        o->new_ = arg;
    else
        vb_die_input("compare: unexpected argument '%s' (BASE and NEW already given)", arg);
}

/* One table parses the flags and prints --help (core/config/cli.h). */
static void parse_args(int argc, char **argv, options *o) {
    *o = (options){NULL, NULL, "FULL,SYNTHETIC", VB_VERDICT_ALPHA, VB_VERDICT_THRESHOLD, NULL, NULL,
                   VB_VERDICT_RUN_FLOOR, false};
    const vb_cli_opt opts[] = {
        {.name = "metric", .kind = VB_CLI_STRING, .ptr = &o->metrics, .arg = "M[,M...]",
         .help = "FULL, SYNTHETIC, IO, VALIDATION (samples/s of each timed trial), step_time (mean FULL step of each "
                 "trial), op:NAME (ops.csv avg_s, one per run); default FULL,SYNTHETIC"},
        {.name = "alpha", .kind = VB_CLI_FUNC, .ptr = &o->alpha, .fn = set_alpha, .arg = "A",
         .help = "significance level of the verdict (its t test's p, and 1 - its interval's level), in (0, 1) (default 0.05)"},
        {.name = "threshold", .kind = VB_CLI_FUNC, .ptr = &o->threshold, .fn = set_threshold, .arg = "T",
         .help = "smallest relative change that counts, in [0, 1) (default 0.05)"},
        {.name = "run_floor", .kind = VB_CLI_FUNC, .ptr = &o->run_floor, .fn = set_run_floor, .arg = "S",
         .help = "run-to-run spread assumed when each side is one run: the sd of log(median) between identical "
                 "runs, in (0, 1) (default 0.05, measured on a shared 2-core machine)"},
        {.name = "allow_different", .kind = VB_CLI_STRING, .ptr = &o->allow, .arg = "KEY[,KEY...]",
         .help = "accept differences in these keys (config, a config key, layout, backend, machine_key, a "
                 "fingerprint field)"},
        {.name = "output", .kind = VB_CLI_STRING, .ptr = &o->output, .arg = "FILE",
         .help = "compare.json path (default: NEW's directory, else .)"},
        {.name = "paired", .kind = VB_CLI_BOOL, .ptr = &o->paired,
         .help = "two sweeps whose runs alternated in rounds (index.csv's repeat): the unit is the round, the "
                 "difference of its two runs (at least 5 rounds)"},
    };
    const vb_cli cli = {
        .cmd = "compare",
        .usage = "vitbench compare BASE NEW [--metric M[,M...]] [--alpha A] [--threshold T]\n"
                 "                        [--run_floor S] [--allow_different KEY[,KEY...]] [--output FILE] [--paired]",
        .about = "The regression gate between two runs, two sweeps (repeats) or baselines.\n"
                 "verdict per metric, one rule (also the report's and perf_ci.sh's): on the log scale,\n"
                 "each run's median is one sample of what differs between runs; NEW / BASE with a\n"
                 "Welch t interval at 1 - alpha (widened by the load a busy side ran under, load.csv)\n"
                 "and the p of the same t:\n"
                 "  faster / slower  p < alpha and the whole interval beyond 1 +- T\n"
                 "  equivalent       the whole interval inside 1 +- T, two or more runs on a side\n"
                 "  inconclusive     anything else: fewer than 5 samples a side (trials; runs for\n"
                 "                   op:NAME), an interval across 1 +- T, one run a side (the run-to-\n"
                 "                   run spread unknown: --run_floor stands in, and only an effect\n"
                 "                   far beyond it is told), a busy side whose noise hides the effect.\n"
                 "Repeat each side (vitbench sweep --repeats N; compare two sweeps) for equivalence.\n"
                 "exit status: 0 every comparison equivalent or faster (pass), 1 a regression,\n"
                 "2 bad input, incomparable sides or a side with nothing measured, 5 inconclusive:\n"
                 "nothing slower, but something undecided or a BASE point missing or failed in NEW",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
        .other = positional,
        .ctx = o,
        .other_help = "BASE, NEW: run directories, sweep directories (index.csv) or baselines.",
    };
    vb_cli_parse(&cli, argc, argv);
    if (!o->base || !o->new_) vb_die_input("compare: needs BASE and NEW (see vitbench compare --help)");
}

static char **split_list(const char *list, int *n) {
    char **out = NULL;
    int cap = 0;
    *n = 0;
    if (!list) return NULL;
    char *copy = vb_strdup_check(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        GROW(out, *n, cap);
        out[(*n)++] = vb_strdup_check(tok);
    }
    free(copy);
    if (*n == 0) vb_die_input("compare: --allow_different: empty list");
    return out;
}

/* ---- the command ---- */

/* the file a metric's samples come from */
static const char *metric_file(const metric *m) {
    return m->kind == M_STEP_TIME ? VB_ITERATIONS_CSV : m->kind == M_OP ? VB_OPS_CSV : VB_TRIALS_CSV;
}

/* A comparison with nothing measured on a side is no comparison: a run
 * killed in its IO trials, a header-only trials.csv, an op name with a typo
 * would otherwise pass the gate as "no regression". */
static void refuse_no_samples(const result *rs, int n) {
    for (int i = 0; i < n; i++) {
        const result *r = &rs[i];
        if (r->v != V_NO_SAMPLES) continue;
        const bool at = strcmp(r->pr->label, "-") != 0;
        if (r->m->kind == M_OP && r->base.n == 0 && r->new_.n == 0)
            vb_die_input("compare: --metric %s: no op named '%s' in ops.csv of BASE or NEW%s%s (rank 0)", r->m->name,
                         r->m->op, at ? " at " : "", at ? r->pr->label : "");
        const bool base_empty = r->base.n == 0;
        const point *pt = base_empty ? r->pr->base : r->pr->new_;
        vb_die_input("compare: %s%s%s: no %s samples in %s/%s (no timed rank-0 %s: the run stopped early or skipped "
                     "them): nothing to compare",
                     base_empty ? "BASE" : "NEW", at ? " at " : "", at ? r->pr->label : "", r->m->name,
                     pt->nruns > 0 ? pt->runs[0] : "?", metric_file(r->m),
                     r->m->kind == M_OP ? "row of that op" : r->m->kind == M_STEP_TIME ? "FULL steps" : "trials");
    }
}

/* The gate's line: REGRESSION, INCONCLUSIVE or PASS, every slower or
 * undecided comparison named; returns the exit status. */
static int print_verdict(const result *rs, int n, int missing) {
    int count[NVERDICTS] = {0};
    for (int i = 0; i < n; i++) count[rs[i].v]++;
    const int undecided = count[V_INCONCLUSIVE] + missing;
    const char *sep = " ";
    if (count[V_REGRESSION]) {
        printf("\nvitbench compare: REGRESSION in %d of %d comparisons:", count[V_REGRESSION], n);
        for (int i = 0; i < n; i++) {
            if (rs[i].v != V_REGRESSION) continue;
            bool point = strcmp(rs[i].pr->label, "-") != 0;
            printf("%s%s%s%s %+.1f%%", sep, point ? rs[i].pr->label : "", point ? " " : "", rs[i].m->name,
                   100 * (rs[i].ratio - 1));
            sep = ", ";
        }
    } else if (undecided) {
        printf("\nvitbench compare: INCONCLUSIVE: nothing slower, but %d of %d comparison%s decided nothing%s:",
               undecided, n + missing, n + missing == 1 ? "" : "s", missing ? " (BASE points missing in NEW count)" : "");
        for (int i = 0; i < n; i++) {
            if (rs[i].v != V_INCONCLUSIVE) continue;
            bool point = strcmp(rs[i].pr->label, "-") != 0;
            printf("%s%s%s%s", sep, point ? rs[i].pr->label : "", point ? " " : "", rs[i].m->name);
            sep = ", ";
        }
        if (missing) printf("%s%d missing point%s", sep, missing, missing == 1 ? "" : "s");
    } else {
        printf("\nvitbench compare: PASS: every comparison equivalent or faster:");
    }
    printf(" (%d equivalent, %d faster, %d slower, %d inconclusive%s)\n", count[V_EQUIVALENT], count[V_IMPROVEMENT],
           count[V_REGRESSION], count[V_INCONCLUSIVE], missing ? ", missing points" : "");
    return count[V_REGRESSION] ? 1 : undecided ? VB_COMPARE_EXIT_INCONCLUSIVE : 0;
}

int vb_compare_main(int argc, char **argv) {
    options o;
    parse_args(argc, argv, &o);
    int nmetrics;
    metric *ms = parse_metrics(o.metrics, &nmetrics);
    diffs d = {0};
    d.allowed = split_list(o.allow, &d.nallowed);
    d.list = cJSON_CreateArray();

    side base, neu;
    load_side(&base, "BASE", o.base);
    load_side(&neu, "NEW", o.new_);
    int npairs, missing;
    cJSON *jmissing = cJSON_CreateArray();
    pair *pairs = match_points(&base, &neu, &npairs, &missing, jmissing);
    char caveat[512];
    check_comparable(&d, pairs[0].base->runs[0], pairs[0].new_->runs[0], caveat, sizeof caveat);
    if (caveat[0]) printf("caveat: %s.\n", caveat);

    vb_verdict_opts vopts = vb_verdict_defaults(true);
    vopts.alpha = o.alpha;
    vopts.threshold = o.threshold;
    vopts.run_floor = o.run_floor;
    vopts.paired = o.paired;
    int nres = npairs * nmetrics;
    result *rs = vb_calloc_check((size_t)nres, sizeof *rs);
    for (int i = 0; i < npairs; i++)
        for (int k = 0; k < nmetrics; k++) rs[i * nmetrics + k] = compare_one(&pairs[i], &ms[k], &vopts);
    refuse_no_samples(rs, nres);

    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "base", o.base);
    cJSON_AddStringToObject(root, "new", o.new_);
    cJSON_AddNumberToObject(root, "alpha", o.alpha);
    cJSON_AddNumberToObject(root, "threshold", o.threshold);
    cJSON_AddNumberToObject(root, "run_floor", o.run_floor > 0 ? o.run_floor : VB_VERDICT_RUN_FLOOR);
    cJSON_AddNumberToObject(root, "min_samples", MIN_SAMPLES);
    cJSON_AddStringToObject(root, "rule", vb_verdict_rule());
    cJSON_AddItemToObject(root, "differences", d.list);
    if (caveat[0]) cJSON_AddStringToObject(root, "caveat", caveat);
    cJSON_AddItemToObject(root, "missing_points", jmissing);
    cJSON *jr = cJSON_AddArrayToObject(root, "results");
    for (int i = 0; i < nres; i++) cJSON_AddItemToArray(jr, result_json(&rs[i]));

    print_table(rs, nres);
    /* n is the number of independent samples behind each p-value */
    bool op_metric = false, trial_metric = false;
    for (int k = 0; k < nmetrics; k++) {
        if (ms[k].kind == M_OP) op_metric = true;
        else trial_metric = true;
    }
    printf("\nbase, new: each side's median, over several runs the geometric mean of the runs' medians (the "
           "ratio's own terms); n counts %s%s%s (rank 0; a trial's steps are averaged into one sample, since they "
           "share its machine state), and (runs) the runs they came from: the interval's unit is the run, whose "
           "spread holds what differs between runs\n",
           trial_metric ? "timed trials" : "", trial_metric && op_metric ? "; for op: metrics, " : "",
           op_metric ? "runs" : "");
    print_noise_notes(rs, nres);
    print_advice(rs, nres, base.sweep || neu.sweep, root);
    cJSON *suspects = cJSON_AddArrayToObject(root, "op_growth");
    for (int i = 0; i < npairs; i++) {
        bool here = false;
        for (int k = 0; k < nmetrics; k++) here |= rs[i * nmetrics + k].v == V_REGRESSION;
        if (here) report_op_growth(&pairs[i], suspects);
    }
    const int status = print_verdict(rs, nres, missing);
    if (caveat[0]) printf("(two programs: see the caveat above)\n");
    cJSON_AddStringToObject(root, "verdict", status == 1 ? "regression" : status ? "inconclusive" : "pass");
    cJSON_AddNumberToObject(root, "exit_status", status);
    fflush(stdout);
    write_json(root, o.output, o.new_);
    cJSON_Delete(root);
    free(rs);
    free(pairs);
    free(ms);
    free_side(&base), free_side(&neu);
    for (int i = 0; i < d.nallowed; i++) free(d.allowed[i]);
    free(d.allowed);
    return status;
}
