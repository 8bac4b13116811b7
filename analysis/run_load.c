/* run_load.c: a run's load from load.csv (run_load.h). */
#include "analysis/run_load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/rundir.h"
#include "analysis/trials_csv.h"
#include "core/results/results.h"
#include "core/util/common.h"

/* A load.csv cell that must hold a number in [lo, hi] (whole when asked),
 * or may be empty when the kernel kept no figure. */
static bool load_cell_ok(const vb_csv *t, int row, int col, double lo, double hi, bool whole, bool may_be_empty) {
    const char *s = vb_csv_get(t, row, col);
    if (!*s) return may_be_empty;
    double v;
    return vb_csv_num(t, row, col, &v) && v >= lo && v <= hi && (!whole || v == floor(v));
}

/* two rows' trial (trial_type, trial_index, warmup, rank: columns 1-4 of
 * the schema) in order */
static int load_trial_key(const vb_csv *t, int a, int b) {
    static const int cols[] = {1, 2, 4};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        int c = strcmp(vb_csv_get(t, a, cols[i]), vb_csv_get(t, b, cols[i]));
        if (c) return c;
    }
    return vb_trial_warmup_of(vb_csv_get(t, a, 3)) - vb_trial_warmup_of(vb_csv_get(t, b, 3));
}

static const vb_csv *g_load_rows;
static int cmp_load_trial(const void *pa, const void *pb) {
    const int a = *(const int *)pa, b = *(const int *)pb;
    int c = load_trial_key(g_load_rows, a, b);
    return c ? c : (a > b) - (a < b);
}

/* load.csv is read as strictly as trials.csv (trials_csv.h): a cut last
 * record, a header that is not the schema's, a row of another run, a
 * repeated trial, or a cell outside what its column can hold (a share is
 * in [0, 1]: a share of -3 would print "-300% of thread time lost") exit 2
 * naming the file and the record. */
static void check_load(const vb_csv *t, const char *run_dir, const char *who) {
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, run_dir, VB_LOAD_CSV);
    if (!t->terminated)
        vb_die_input("%s: %s: record %d has no line end (the file was cut short while being written)", who, path,
                     t->nrows + 1);
    char schema[] = VB_LOAD_CSV_HEADER;
    char *save = NULL;
    int i = 0;
    for (char *name = strtok_r(schema, ",", &save); name; name = strtok_r(NULL, ",", &save), i++)
        if (i >= t->ncols || strcmp(t->header[i], name) != 0)
            vb_die_input("%s: %s: column %d is '%s', where the schema has '%s' (the schema's header is "
                         VB_LOAD_CSV_HEADER ")",
                         who, path, i + 1, i < t->ncols ? t->header[i] : "", name);
    /* the schema's columns, in order */
    enum { L_RUN_ID, L_TYPE, L_INDEX, L_WARMUP, L_RANK, L_SECONDS, L_CPUS, L_LA0, L_LA1, L_STEAL, L_WAIT, L_NIVCSW };
    static const struct {
        int col;
        double lo, hi;
        bool whole, may_be_empty;
        const char *what;
    } cells[] = {{L_INDEX, 0, 2147483647.0, true, false, "a whole number >= 0"},
                 {L_RANK, 0, 2147483647.0, true, false, "a whole number >= 0"},
                 {L_SECONDS, 0, INFINITY, false, false, "a number >= 0"},
                 {L_CPUS, 1, 2147483647.0, true, true, "a whole number >= 1"},
                 {L_LA0, 0, INFINITY, false, true, "a number >= 0"},
                 {L_LA1, 0, INFINITY, false, true, "a number >= 0"},
                 {L_STEAL, 0, 1, false, true, "a share in [0, 1]"},
                 {L_WAIT, 0, 1, false, true, "a share in [0, 1]"},
                 {L_NIVCSW, 0, INFINITY, true, true, "a whole number >= 0"}};
    char id[256];
    vb_run_json_id(run_dir, id, sizeof id, NULL);
    const bool from_json = id[0] != '\0';
    for (int r = 0; r < t->nrows; r++) {
        const int rec = r + 2; /* the header is record 1 */
        const char *rid = vb_csv_get(t, r, L_RUN_ID);
        if (!id[0]) snprintf(id, sizeof id, "%s", rid);
        if (strcmp(rid, id) != 0)
            vb_die_input("%s: %s: record %d: run_id '%s' is not this run's ('%s'%s): a row of another run", who, path,
                         rec, rid, id, from_json ? ", its run.json" : ", the first record's");
        if (vb_trial_kind_by_name(vb_csv_get(t, r, L_TYPE)) < 0)
            vb_die_input("%s: %s: record %d: trial_type '%s' is not one of %s", who, path, rec,
                         vb_csv_get(t, r, L_TYPE), vb_trial_kind_list());
        if (vb_trial_warmup_of(vb_csv_get(t, r, L_WARMUP)) < 0)
            vb_die_input("%s: %s: record %d: warmup '%s' is not 0 or 1", who, path, rec, vb_csv_get(t, r, L_WARMUP));
        for (size_t k = 0; k < sizeof cells / sizeof cells[0]; k++)
            if (!load_cell_ok(t, r, cells[k].col, cells[k].lo, cells[k].hi, cells[k].whole, cells[k].may_be_empty))
                vb_die_input("%s: %s: record %d: %s '%s' is not %s%s", who, path, rec, t->header[cells[k].col],
                             vb_csv_get(t, r, cells[k].col), cells[k].what, cells[k].may_be_empty ? " (or empty)" : "");
    }
    /* one trial counted twice would weigh twice: rows ordered by trial, a
     * repeat is its neighbour */
    int *order = vb_malloc_check(((size_t)t->nrows + 1) * sizeof *order);
    for (int r = 0; r < t->nrows; r++) order[r] = r;
    g_load_rows = t;
    qsort(order, (size_t)t->nrows, sizeof *order, cmp_load_trial);
    for (int k = 1; k < t->nrows; k++)
        if (load_trial_key(t, order[k - 1], order[k]) == 0) {
            const int a = order[k - 1] < order[k] ? order[k - 1] : order[k], b = order[k - 1] ^ order[k] ^ a;
            vb_die_input("%s: %s: record %d repeats record %d (trial_type %s, trial_index %s, rank %s)", who, path,
                         b + 2, a + 2, vb_csv_get(t, b, 1), vb_csv_get(t, b, 2), vb_csv_get(t, b, 4));
        }
    free(order);
}

void vb_run_load_read(const char *run_dir, const char *trial_type, const char *who, vb_run_load *out) {
    *out = (vb_run_load){false, 0, NAN, NAN, NAN, NAN, NAN};
    vb_csv t;
    char err[VB_PATH_MAX + 256];
    int rc = vb_dir_read_csv(run_dir, VB_LOAD_CSV, &t, err, sizeof err);
    if (rc == -1) return; /* not recorded */
    if (rc != 0) vb_die_input("%s: %s", who, err);
    check_load(&t, run_dir, who);
    const int ct = vb_csv_col(&t, VB_COL_TRIAL_TYPE), ci = vb_csv_col(&t, VB_COL_TRIAL_INDEX), cw = vb_csv_col(&t, VB_COL_WARMUP);
    const int cr = vb_csv_col(&t, VB_COL_RANK), cs = vb_csv_col(&t, VB_COL_SECONDS), cc = vb_csv_col(&t, VB_COL_ONLINE_CPUS);
    const int cl = vb_csv_col(&t, VB_COL_LOADAVG_BEFORE), cst = vb_csv_col(&t, VB_COL_STEAL_SHARE);
    const int cq = vb_csv_col(&t, VB_COL_CPU_WAIT_SHARE), cn = vb_csv_col(&t, VB_COL_NIVCSW);
    /* per timed trial: the largest rank's share; rank 0's rate of switches */
    double sum = 0, big = NAN, la = 0, cpus = NAN, ivc = 0, secs = 0;
    int n = 0, nla = 0;
    for (int i = 0; i < t.nrows; i++) {
        if (trial_type && strcmp(vb_csv_get(&t, i, ct), trial_type) != 0) continue;
        double w;
        if (!vb_csv_num(&t, i, cw, &w) || w != 0) continue;
        /* first row of this trial: gather its ranks */
        bool first = true;
        for (int j = 0; j < i && first; j++)
            first = !(strcmp(vb_csv_get(&t, j, ct), vb_csv_get(&t, i, ct)) == 0 &&
                      strcmp(vb_csv_get(&t, j, ci), vb_csv_get(&t, i, ci)) == 0 &&
                      strcmp(vb_csv_get(&t, j, cw), vb_csv_get(&t, i, cw)) == 0);
        if (!first) continue;
        double worst = NAN;
        for (int j = i; j < t.nrows; j++) {
            if (strcmp(vb_csv_get(&t, j, ct), vb_csv_get(&t, i, ct)) != 0 ||
                strcmp(vb_csv_get(&t, j, ci), vb_csv_get(&t, i, ci)) != 0 ||
                strcmp(vb_csv_get(&t, j, cw), vb_csv_get(&t, i, cw)) != 0)
                continue;
            double q, st = 0, rk = 0;
            if (!vb_csv_num(&t, j, cq, &q)) continue;
            if (cst >= 0 && !vb_csv_num(&t, j, cst, &st)) st = 0;
            if (q + st > worst || isnan(worst)) worst = q + st;
            if (cr >= 0 && (!vb_csv_num(&t, j, cr, &rk) || rk != 0)) continue;
            double v;
            if (cl >= 0 && vb_csv_num(&t, j, cl, &v)) la += v, nla++;
            if (cc >= 0 && vb_csv_num(&t, j, cc, &v)) cpus = v;
            double s;
            if (cn >= 0 && cs >= 0 && vb_csv_num(&t, j, cn, &v) && vb_csv_num(&t, j, cs, &s)) ivc += v, secs += s;
        }
        if (isnan(worst)) continue;
        sum += worst;
        if (isnan(big) || worst > big) big = worst;
        n++;
    }
    vb_csv_free(&t);
    if (n == 0) return;
    out->recorded = true;
    out->trials = n;
    out->share = sum / n;
    out->max_share = big;
    out->loadavg = nla ? la / nla : NAN;
    out->cpus = cpus;
    out->nivcsw_per_s = secs > 0 ? ivc / secs : NAN;
}

double vb_run_load_mean(const vb_run_load *loads, int n) {
    double s = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (loads[i].recorded && isfinite(loads[i].share)) s += loads[i].share, k++;
    return k ? s / k : NAN;
}

const char *vb_run_load_describe(const vb_run_load *l, char *buf, int n) {
    if (!l->recorded) {
        snprintf(buf, (size_t)n, "load not recorded");
        return buf;
    }
    char avg[64] = "";
    if (isfinite(l->loadavg)) {
        if (isfinite(l->cpus))
            snprintf(avg, sizeof avg, "load average %.2g on %.0f CPUs, ", l->loadavg, l->cpus);
        else
            snprintf(avg, sizeof avg, "load average %.2g, ", l->loadavg);
    }
    snprintf(buf, (size_t)n, "%s%.3g%% of thread time lost to other work", avg, 100 * l->share);
    return buf;
}
