/* trials_csv.c: a run's trials.csv, read and checked once for every reader
 * (trials_csv.h). */
#include "analysis/trials_csv.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/csv.h"
#include "analysis/rundir.h"
#include "core/results/results.h"
#include "core/util/common.h"

/* the schema's columns, in order */
enum { C_RUN_ID, C_TYPE, C_INDEX, C_WARMUP, C_NBATCHES, C_GBATCH, C_RANKS, C_RANK, C_SECONDS, C_RATE, NCOLS };

typedef struct {
    int type, index, warmup, rank;
    double nbatches, gbatch, seconds, rate;
} trial_row;

static int refuse(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (why && n) vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return -2;
}

static bool whole(const vb_csv *t, int row, int col, double lo, double *out) {
    double v;
    if (!vb_csv_num(t, row, col, &v) || v < lo || v != floor(v) || v > 2147483647.0) return false;
    *out = v;
    return true;
}

int vb_trial_warmup_of(const char *s) {
    if (!strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "False")) return 0;
    if (!strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "True")) return 1;
    return -1;
}

/* The header: the schema's columns, by name and in order. */
static int check_header(const vb_csv *t, const char *path, char *why, size_t n) {
    char schema[] = VB_TRIALS_CSV_HEADER;
    char *save = NULL;
    int i = 0;
    for (char *name = strtok_r(schema, ",", &save); name; name = strtok_r(NULL, ",", &save), i++) {
        int at = vb_csv_col(t, name);
        if (at < 0) return refuse(why, n, "%s: no column '%s' (the schema's header is " VB_TRIALS_CSV_HEADER ")", path, name);
        if (at != i)
            return refuse(why, n,
                          "%s: column %d is '%s', where the schema has '%s' (columns renamed or swapped; the "
                          "schema's header is " VB_TRIALS_CSV_HEADER ")",
                          path, i + 1, t->header[i], name);
    }
    return 0;
}

/* An imported run (run.json's "imported": vitbench import) leaves empty what
 * its files did not say: nbatches, global_batch, ranks and seconds. */
static bool unknown_cell(const vb_csv *t, int r, int col, bool imported) {
    return imported && !vb_csv_get(t, r, col)[0] &&
           (col == C_NBATCHES || col == C_GBATCH || col == C_RANKS || col == C_SECONDS);
}

static int parse_row(const vb_csv *t, int r, const char *path, trial_row *x, bool imported, char *why, size_t n) {
    const int rec = r + 2; /* the header is record 1 */
    x->type = vb_trial_kind_by_name(vb_csv_get(t, r, C_TYPE));
    if (x->type < 0)
        return refuse(why, n, "%s: record %d: trial_type '%s' is not one of %s", path, rec,
                      vb_csv_get(t, r, C_TYPE), vb_trial_kind_list());
    x->warmup = vb_trial_warmup_of(vb_csv_get(t, r, C_WARMUP));
    if (x->warmup < 0)
        return refuse(why, n, "%s: record %d: warmup '%s' is not 0 or 1", path, rec, vb_csv_get(t, r, C_WARMUP));
    static const struct {
        int col;
        double lo;
    } whole_cols[] = {{C_INDEX, 0}, {C_NBATCHES, 1}, {C_GBATCH, 1}, {C_RANKS, 1}, {C_RANK, 0}};
    double v[5];
    for (int k = 0; k < 5; k++)
        if (unknown_cell(t, r, whole_cols[k].col, imported))
            v[k] = 0;
        else if (!whole(t, r, whole_cols[k].col, whole_cols[k].lo, &v[k]))
            return refuse(why, n, "%s: record %d: %s '%s' is not a whole number >= %g", path, rec,
                          t->header[whole_cols[k].col], vb_csv_get(t, r, whole_cols[k].col), whole_cols[k].lo);
    x->index = (int)v[0];
    x->nbatches = v[1];
    x->gbatch = v[2];
    x->rank = (int)v[4];
    if (v[3] > 0 && x->rank >= (int)v[3])
        return refuse(why, n, "%s: record %d: rank %d is not below ranks %.0f", path, rec, x->rank, v[3]);
    const int cols[2] = {C_SECONDS, C_RATE};
    double *dst[2] = {&x->seconds, &x->rate};
    for (int k = 0; k < 2; k++)
        if (unknown_cell(t, r, cols[k], imported))
            *dst[k] = NAN;
        else if (!vb_csv_num(t, r, cols[k], dst[k]) || !(*dst[k] > 0))
            return refuse(why, n, "%s: record %d: %s '%s' is not a number > 0", path, rec, t->header[cols[k]],
                          vb_csv_get(t, r, cols[k]));
    if (x->nbatches == 0 || x->gbatch == 0 || isnan(x->seconds)) return 0; /* unknown: nothing to check it by */
    const double want = x->nbatches * x->gbatch / x->seconds;
    if (!(fabs(x->rate - want) <= 1e-6 * want))
        return refuse(why, n, "%s: record %d: samples_per_s %s is not nbatches x global_batch / seconds = %.9g", path,
                      rec, vb_csv_get(t, r, C_RATE), want);
    return 0;
}

/* rows ordered by trial (type, warmup, index, rank): repeats are
 * neighbours, and a step of iterations.csv finds its trial by bisection */
static const trial_row *g_sort_rows;

static int cmp_key(const trial_row *a, const trial_row *b) {
    if (a->type != b->type) return a->type < b->type ? -1 : 1;
    if (a->warmup != b->warmup) return a->warmup < b->warmup ? -1 : 1;
    if (a->index != b->index) return a->index < b->index ? -1 : 1;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return 0;
}

static int cmp_order(const void *pa, const void *pb) {
    const int a = *(const int *)pa, b = *(const int *)pb;
    int c = cmp_key(&g_sort_rows[a], &g_sort_rows[b]);
    return c ? c : (a > b) - (a < b); /* the earlier record first */
}

/* the record of trial `key` among rows (order sorted by cmp_order), or -1 */
static int find_trial(const trial_row *rows, const int *order, int n, const trial_row *key) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = cmp_key(&rows[order[mid]], key);
        if (c == 0) return order[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Each trial's seconds against the sum of its steps in iterations.csv, where
 * that file has them: rows (type, index, warmup, rank) summed. */
static int check_against_steps(const char *run_dir, const char *path, const trial_row *rows, const int *order,
                               int nrows, char *why, size_t n) {
    vb_csv it;
    char err[VB_PATH_MAX + 256];
    if (vb_dir_read_csv(run_dir, VB_ITERATIONS_CSV, &it, err, sizeof err) != 0) return 0; /* optional here */
    const int ct = vb_csv_col(&it, VB_COL_TRIAL_TYPE), ci = vb_csv_col(&it, VB_COL_TRIAL_INDEX), cw = vb_csv_col(&it, VB_COL_WARMUP),
              cr = vb_csv_col(&it, VB_COL_RANK), cs = vb_csv_col(&it, VB_COL_SECONDS);
    int rc = 0;
    if (ct >= 0 && ci >= 0 && cw >= 0 && cr >= 0 && cs >= 0) {
        double *sum = vb_calloc_check((size_t)nrows + 1, sizeof *sum);
        int *steps = vb_calloc_check((size_t)nrows + 1, sizeof *steps);
        for (int s = 0; s < it.nrows; s++) {
            trial_row key = {.type = vb_trial_kind_by_name(vb_csv_get(&it, s, ct)), .warmup = vb_trial_warmup_of(vb_csv_get(&it, s, cw))};
            double idx, rank, sec;
            if (key.type < 0 || key.warmup < 0 || !vb_csv_num(&it, s, ci, &idx) || !vb_csv_num(&it, s, cr, &rank) ||
                !vb_csv_num(&it, s, cs, &sec) || fabs(idx) > 1e9 || fabs(rank) > 1e9)
                continue;
            key.index = (int)idx;
            key.rank = (int)rank;
            int k = find_trial(rows, order, nrows, &key);
            if (k < 0) continue;
            sum[k] += sec;
            steps[k]++;
        }
        for (int k = 0; k < nrows && rc == 0; k++) {
            /* 9 digits per step, each rounded: the sum may be off by a step's rounding */
            if (rows[k].nbatches == 0 || steps[k] != (int)rows[k].nbatches || isnan(rows[k].seconds)) continue;
            if (!(fabs(sum[k] - rows[k].seconds) <= 1e-6 * rows[k].seconds + 1e-9 * steps[k]))
                rc = refuse(why, n,
                            "%s: record %d: seconds %.9g is not the %d steps' %.9g s of %s trial %d (rank %d) in "
                            "iterations.csv (seconds and samples_per_s swapped?)",
                            path, k + 2, rows[k].seconds, steps[k], sum[k], vb_trial_kinds[rows[k].type].name,
                            rows[k].index, rows[k].rank);
        }
        free(sum);
        free(steps);
    }
    vb_csv_free(&it);
    return rc;
}

static void push(vb_trials *t, int type, double v) {
    if ((t->n[type] & (t->n[type] - 1)) == 0) { /* 0, 1, 2, 4 ...: grow */
        double *grown = vb_realloc_check(t->rate[type], (size_t)(t->n[type] ? 2 * t->n[type] : 1) * sizeof *grown);
        t->rate[type] = grown;
    }
    t->rate[type][t->n[type]++] = v;
}

int vb_trials_read(const char *run_dir, vb_trials *t, char *why, size_t n) {
    memset(t, 0, sizeof *t);
    vb_dir_file(t->path, sizeof t->path, run_dir, VB_TRIALS_CSV);
    const char *path = t->path;
    vb_csv c;
    char err[VB_PATH_MAX + 256];
    int rc = vb_csv_read(path, &c, err, sizeof err);
    if (rc == -1) {
        if (why && n) snprintf(why, n, "%s", err);
        return -1;
    }
    if (rc != 0) return refuse(why, n, "%s", err);
    trial_row *rows = NULL;
    /* every file vitbench writes ends with a line end: without one the last
     * record may be a number cut short, which would still parse */
    if (!c.terminated)
        rc = refuse(why, n, "%s: record %d has no line end (the file was cut short while being written)", path,
                    c.nrows + 1);
    if (rc == 0) rc = check_header(&c, path, why, n);
    if (rc == 0) {
        rows = vb_calloc_check((size_t)c.nrows + 1, sizeof *rows);
    }
    char id[256] = "";
    bool imported = false;
    if (rc == 0) vb_run_json_id(run_dir, id, sizeof id, &imported);
    const bool from_json = id[0] != '\0';
    for (int r = 0; rc == 0 && r < c.nrows; r++) {
        rc = parse_row(&c, r, path, &rows[r], imported, why, n);
        if (rc != 0) break;
        const char *rid = vb_csv_get(&c, r, C_RUN_ID);
        if (!id[0]) snprintf(id, sizeof id, "%s", rid);
        if (strcmp(rid, id) != 0) {
            rc = refuse(why, n, "%s: record %d: run_id '%s' is not this run's ('%s'%s): a row of another run", path,
                        r + 2, rid, id, from_json ? ", its run.json" : ", the first record's");
            break;
        }
    }
    int *order = NULL;
    if (rc == 0) {
        order = vb_malloc_check(((size_t)c.nrows + 1) * sizeof *order);
        for (int r = 0; r < c.nrows; r++) order[r] = r;
        g_sort_rows = rows;
        qsort(order, (size_t)c.nrows, sizeof *order, cmp_order);
        for (int k = 1; k < c.nrows && rc == 0; k++) {
            const trial_row *a = &rows[order[k - 1]], *b = &rows[order[k]];
            if (cmp_key(a, b) == 0)
                rc = refuse(why, n, "%s: record %d repeats record %d (trial_type %s, trial_index %d, rank %d)", path,
                            order[k] + 2, order[k - 1] + 2, vb_trial_kinds[b->type].name, b->index, b->rank);
        }
    }
    if (rc == 0) rc = check_against_steps(run_dir, path, rows, order, c.nrows, why, n);
    free(order);
    for (int r = 0; rc == 0 && r < c.nrows; r++)
        if (!rows[r].warmup && rows[r].rank == 0) push(t, rows[r].type, rows[r].rate);
    free(rows);
    vb_csv_free(&c);
    return rc;
}

void vb_trials_free(vb_trials *t) {
    for (int k = 0; k < VB_TRIAL_NKINDS; k++) free(t->rate[k]);
    memset(t, 0, sizeof *t);
}
