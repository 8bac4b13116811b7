/* report_run.c: the per-run sections of a report (report.h): provenance,
 * the HTA time breakdown per rank (timeline.csv), stragglers (iterations.csv)
 * and the top ops (ops.csv); plus the per-group communication of ops.csv. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/breakdown.h"
#include "analysis/rundir.h"
#include "analysis/report.h"
#include "analysis/verdict.h"
#include "core/prof/fingerprint.h"
#include "core/util/stats.h"
#include "core/results/results.h"

#include <stdbool.h>

const char *const rp_group_name[RP_NGROUPS] = {"tp", "cp", "dp", "other"};

/* Which group a communication op of ops.csv belongs to. Collectives are
 * named after the communicator's group (core/comm/comm.c): allreduce_tp,
 * allgather_cp, reduce_scatter_cp, iallreduce_dp, iallreduce_cpdp (DDP over
 * cp x dp); allreduce_wait is DDP's wait for its buckets. Runs from before
 * the group suffix existed are read by what each op was used for inside a
 * timed step: the blocking allreduce only for the tp row sums, allgather and
 * reduce_scatter only for the cp K/V exchange, iallreduce for DDP. Barrier,
 * broadcast, the gathers and world-wide collectives are the harness's own. */
static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

int rp_comm_group_of(const char *name) {
    if (strcmp(name, "allreduce_wait") == 0) return RP_G_DP;
    if (has_suffix(name, "_tp")) return RP_G_TP;
    if (has_suffix(name, "_cpdp") || has_suffix(name, "_dp")) return RP_G_DP;
    if (has_suffix(name, "_cp")) return RP_G_CP;
    if (strcmp(name, "allreduce") == 0) return RP_G_TP;
    if (strcmp(name, "allgather") == 0 || strcmp(name, "reduce_scatter") == 0) return RP_G_CP;
    if (strcmp(name, "iallreduce") == 0) return RP_G_DP;
    return RP_G_OTHER;
}

/* Timed FULL steps rank 0 ran (iterations.csv); 0 when unknown. */
static int full_steps(const rp_run *r) {
    vb_csv t;
    if (rp_read_csv(r->dir, VB_ITERATIONS_CSV, &t) != 0) return 0;
    int ct = vb_csv_col(&t, VB_COL_TRIAL_TYPE), cw = vb_csv_col(&t, VB_COL_WARMUP), cr = vb_csv_col(&t, VB_COL_RANK);
    int n = 0;
    for (int i = 0; i < t.nrows; i++)
        if (strcmp(vb_csv_get(&t, i, ct), "FULL") == 0 && !rp_is_warmup(vb_csv_get(&t, i, cw)) &&
            (cr < 0 || strcmp(vb_csv_get(&t, i, cr), "0") == 0))
            n++;
    vb_csv_free(&t);
    return n;
}

int rp_comm_groups(const rp_run *r, rp_group_comm g[RP_NGROUPS]) {
    memset(g, 0, RP_NGROUPS * sizeof *g);
    for (int k = 0; k < RP_NGROUPS; k++) g[k].bytes_per_step = NAN;
    vb_csv t;
    if (rp_read_csv(r->dir, VB_OPS_CSV, &t) != 0) return -1;
    int ct = vb_csv_col(&t, VB_COL_TRIAL_TYPE), cc = vb_csv_col(&t, VB_COL_CATEGORY), cn = vb_csv_col(&t, VB_COL_NAME);
    int cr = vb_csv_col(&t, VB_COL_RANK), cb = vb_csv_col(&t, VB_COL_BYTES), cs = vb_csv_col(&t, VB_COL_SHARE_OF_STEP);
    double bytes[RP_NGROUPS] = {0};
    int ranks_seen[1024] = {0}, nranks = 0;
    for (int i = 0; i < t.nrows; i++) {
        if (ct >= 0 && strcmp(vb_csv_get(&t, i, ct), "FULL") != 0) continue;
        double rank = 0, b = 0, s = 0;
        if (cr >= 0 && vb_csv_num(&t, i, cr, &rank) && rank >= 0 && rank < 1024 && !ranks_seen[(int)rank]) {
            ranks_seen[(int)rank] = 1;
            nranks++;
        }
        if (strcmp(vb_csv_get(&t, i, cc), "comm") != 0) continue;
        int k = rp_comm_group_of(vb_csv_get(&t, i, cn));
        g[k].seen = true;
        if (vb_csv_num(&t, i, cb, &b)) bytes[k] += b;
        if (vb_csv_num(&t, i, cs, &s)) g[k].exposed_share += s;
    }
    if (nranks < 1) nranks = 1;
    int steps = full_steps(r);
    /* without trial_type the rows cover the SYNTHETIC steps too: no per-step bytes */
    for (int k = 0; k < RP_NGROUPS; k++) {
        g[k].exposed_share /= nranks;
        if (steps > 0 && ct >= 0) g[k].bytes_per_step = bytes[k] / nranks / steps;
    }
    vb_csv_free(&t);
    return 0;
}

void rp_run_provenance(rp_doc *d, const rp_run *r) {
    if (!r->has_json) {
        rp_para(d, "Provenance: run.json missing.");
        return;
    }
    if (r->imported[0]) {
        /* vitbench import: another program's run, with what its files say */
        rp_para(d, "Imported by vitbench import: a run of %s, from %s. Not known (its files do not say): %s.",
                r->imported, r->imported_from ? r->imported_from : "?",
                r->imported_unknown ? r->imported_unknown : "nothing listed");
        if (r->command_line && r->command_line[0]) rp_pre(d, r->command_line);
        return;
    }
    rp_para(d, "Config %s, status %s, backend %s, commit %s%s, host %s.", r->config[0] ? r->config : "?", r->status,
            r->backend[0] ? r->backend : "?", r->git_commit[0] ? r->git_commit : "?",
            strcmp(r->git_dirty, "true") == 0 ? " (dirty tree)" : "", r->host[0] ? r->host : "?");
    if (r->machine_key[0])
        rp_para(d, "Fingerprint: machine_key %s; CPU %s; %s cores in the affinity mask; %s OpenMP threads; BLAS %s "
                   "(core type %s); compiler %s%s%s.",
                r->machine_key, r->cpu_model[0] ? r->cpu_model : "?", r->affinity_cores[0] ? r->affinity_cores : "?",
                r->omp_threads[0] ? r->omp_threads : "?", r->blas[0] ? r->blas : "?",
                r->blas_coretype[0] ? r->blas_coretype : "?", r->compiler[0] ? r->compiler : "?",
                r->gpu_name[0] ? "; GPU " : "", r->gpu_name);
    else
        rp_para(d, "Fingerprint: not recorded (run.json from before fingerprints; OpenMP threads %s).",
                r->omp_threads[0] ? r->omp_threads : "?");
    if (r->versions[0]) rp_para(d, "Library versions: %s.", r->versions);
    if (r->command_line && r->command_line[0]) rp_pre(d, r->command_line);
}

/* the lane of a row in the step figure: compute, communication, memcpy, data wait; -1 none */
static int step_lane(const vb_tl_event *e) {
    if (strcmp(e->kind, "compute") == 0) return 0;
    if (strcmp(e->kind, "comm") == 0) return 1;
    if (strcmp(e->kind, "memcpy") == 0 && strncmp(e->lane, "loader", 6) != 0) return 2;
    if (strcmp(e->kind, "io") == 0 && strcmp(e->lane, "main") == 0) return 3; /* the training thread's data wait */
    return -1;
}

/* Rank 0's timed FULL step times from iterations.csv (seconds, n of them);
 * NULL when the file or its rows are missing. */
static double *full_step_seconds(const rp_run *r, int *n) {
    *n = 0;
    vb_csv t;
    if (rp_read_csv(r->dir, VB_ITERATIONS_CSV, &t) != 0) return NULL;
    const int ct = vb_csv_col(&t, VB_COL_TRIAL_TYPE), cw = vb_csv_col(&t, VB_COL_WARMUP);
    const int cr = vb_csv_col(&t, VB_COL_RANK), cs = vb_csv_col(&t, VB_COL_SECONDS);
    double *v = NULL;
    if (ct >= 0 && cw >= 0 && cs >= 0) {
        v = vb_calloc_check((size_t)t.nrows + 1, sizeof *v);
        for (int i = 0; i < t.nrows; i++) {
            double x;
            if (strcmp(vb_csv_get(&t, i, ct), "FULL") == 0 && !rp_is_warmup(vb_csv_get(&t, i, cw)) &&
                (cr < 0 || strcmp(vb_csv_get(&t, i, cr), "0") == 0) && vb_csv_num(&t, i, cs, &x) && x > 0)
                v[(*n)++] = x;
        }
    }
    vb_csv_free(&t);
    if (*n == 0) free(v), v = NULL;
    return v;
}

/* One timed FULL step of every rank as lanes: of the steps timeline.csv
 * recorded, rank 0's nearest in length to the median of all its timed FULL
 * steps (iterations.csv; the window's own median without it), and every
 * rank's rows of that trial and step, clipped to that rank's step, in ms
 * from rank 0's start (the timeline's clocks leave one barrier together).
 * The title names the step and its length beside the median. */
static void step_figure(rp_doc *d, const rp_opts *o, const rp_run *r, const vb_timeline *tl) {
    int *steps = vb_calloc_check((size_t)tl->n + 1, sizeof *steps), ns = 0;
    for (int i = 0; i < tl->n; i++)
        if (tl->ev[i].rank == 0 && strcmp(tl->ev[i].kind, "step") == 0 && strcmp(tl->ev[i].trial_type, "FULL") == 0)
            steps[ns++] = i;
    if (ns == 0) {
        free(steps);
        return;
    }
    int nall = 0;
    double *all = full_step_seconds(r, &nall);
    double median = NAN;
    if (all) {
        median = vb_stats_median(all, nall);
    } else {
        double *w = vb_calloc_check((size_t)ns, sizeof *w);
        for (int i = 0; i < ns; i++) w[i] = tl->ev[steps[i]].dur_s;
        median = vb_stats_median(w, ns);
        free(w);
    }
    free(all);
    const vb_tl_event *pick = &tl->ev[steps[0]];
    for (int i = 1; i < ns; i++)
        if (fabs(tl->ev[steps[i]].dur_s - median) < fabs(pick->dur_s - median)) pick = &tl->ev[steps[i]];
    free(steps);
    const double t0 = pick->start_s;
    static const char *const lane_name[4] = {"compute", "communication", "memcpy", "data wait"};
    char base[128], title[256];
    snprintf(base, sizeof base, "step_timeline_%.80s", r->name); /* vb_plot_init keeps it to [A-Za-z0-9_.-] */
    if (nall > 0)
        snprintf(title, sizeof title,
                 "One FULL step per rank: trial %d, step %d, %.4g ms (rank 0's median of %d timed steps: %.4g ms)",
                 pick->trial_index, pick->step, 1e3 * pick->dur_s, nall, 1e3 * median);
    else
        snprintf(title, sizeof title, "One FULL step per rank: trial %d, step %d, %.4g ms (the recorded steps' median)",
                 pick->trial_index, pick->step, 1e3 * pick->dur_s);
    vb_plot p;
    vb_plot_init(&p, base, title, "ms from rank 0's step start", "rank and lane");
    p.lanes = true;
    vb_plot_series *ser[4];
    for (int k = 0; k < 4; k++) ser[k] = vb_plot_series_add(&p, lane_name[k], false);
    for (int rk = 0; rk < tl->nranks; rk++) {
        /* this rank's own row of the step: what its lanes are clipped to */
        double s0 = NAN, s1 = NAN;
        for (int i = 0; i < tl->n; i++) {
            const vb_tl_event *e = &tl->ev[i];
            if (e->rank == rk && strcmp(e->kind, "step") == 0 && strcmp(e->trial_type, "FULL") == 0 &&
                e->trial_index == pick->trial_index && e->step == pick->step)
                s0 = e->start_s, s1 = e->start_s + e->dur_s;
        }
        if (!isfinite(s0)) continue;
        const int row0 = p.nrows;
        for (int k = 0; k < 4; k++) {
            char row[64];
            snprintf(row, sizeof row, "rank %d %s", rk, lane_name[k]);
            vb_plot_row(&p, row);
        }
        for (int i = 0; i < tl->n; i++) {
            const vb_tl_event *e = &tl->ev[i];
            const int k = e->rank == rk ? step_lane(e) : -1;
            if (k < 0) continue;
            const double a = fmax(e->start_s, s0), b = fmin(e->start_s + e->dur_s, s1);
            if (!(b > a)) continue;
            vb_plot_point(ser[k], 1e3 * (a - t0), row0 + k, 1e3 * (b - t0), NAN, NULL);
        }
    }
    if (p.nrows > 0) {
        rp_para(d, "One timed FULL step of every rank from timeline.csv, as lanes: compute, communication (DDP's "
                   "all-reduces in flight and blocking collectives), memcpy and the training thread's data wait; "
                   "what the trace viewer shows, for a login node without one.");
        rp_figure(d, o, &p);
    }
    vb_plot_free(&p);
}

static void breakdown_section(rp_doc *d, const rp_run *r, const rp_opts *o, const char *prefix, int level,
                              bool figure) {
    char path[VB_PATH_MAX], err[512], csv[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, r->dir, VB_TIMELINE_CSV);
    vb_timeline tl;
    int rc = vb_timeline_read(path, &tl, err, sizeof err);
    if (rc == -2) vb_die_input("report: %s", err);
    rp_heading(d, level, "Time breakdown per rank (%s)", r->name);
    if (rc != 0) {
        rp_para(d, "%s: missing (no timeline: profile_steps 0, or a run from before timelines).", path);
        return;
    }
    vb_breakdown *b = NULL;
    int n = vb_breakdown_ranks(&tl, &b);
    const char *cols[] = {"rank",         "steps",      "step_ms",      "compute_ms", "comm_hidden_ms",
                          "comm_exposed_ms", "memcpy_ms", "data_wait_ms", "idle_ms",    "overlap_pct"};
    vb_snprintf(csv, sizeof csv, "%s" VB_BREAKDOWN_CSV, prefix);
    rp_table *t = rp_table_new(csv, "HTA breakdown, ms per step over the timeline window (overlap = hidden / all comm)",
                               10, cols);
    for (int i = 0; i < n; i++) {
        double s = b[i].steps > 0 ? 1e3 / b[i].steps : NAN;
        rp_table_add(t, "%d", b[i].rank);
        rp_table_add(t, "%d", b[i].steps);
        double v[7] = {b[i].step_s,   b[i].compute_s,   b[i].comm_hidden_s, b[i].comm_exposed_s,
                       b[i].memcpy_s, b[i].data_wait_s, b[i].idle_s};
        for (int k = 0; k < 7; k++) rp_table_num(t, v[k] * s);
        rp_table_num(t, b[i].overlap_pct);
    }
    rp_add_table(d, t);
    free(b);
    if (figure) step_figure(d, o, r, &tl);
    vb_timeline_free(&tl);
}

/* Per-rank step-time distribution of the timed FULL steps. */
static void straggler_section(rp_doc *d, const rp_run *r, const char *prefix, int level) {
    rp_heading(d, level, "Stragglers (%s)", r->name);
    vb_csv t;
    if (rp_read_csv(r->dir, VB_ITERATIONS_CSV, &t) != 0) {
        rp_para(d, "%s/iterations.csv: missing (no per-step times).", r->dir);
        return;
    }
    int ct = vb_csv_col(&t, VB_COL_TRIAL_TYPE), cw = vb_csv_col(&t, VB_COL_WARMUP), cr = vb_csv_col(&t, VB_COL_RANK);
    int cs = vb_csv_col(&t, VB_COL_SECONDS);
    int nranks = 0;
    for (int i = 0; i < t.nrows; i++) {
        double k;
        if (vb_csv_num(&t, i, cr, &k) && k >= 0 && k < 65536 && (int)k + 1 > nranks) nranks = (int)k + 1;
    }
    if (cr < 0) nranks = 1;
    rp_samples *per = vb_calloc_check((size_t)(nranks > 0 ? nranks : 1), sizeof *per);
    for (int i = 0; i < t.nrows; i++) {
        double k = 0, s;
        if (strcmp(vb_csv_get(&t, i, ct), "FULL") != 0 || rp_is_warmup(vb_csv_get(&t, i, cw))) continue;
        if ((cr >= 0 && !vb_csv_num(&t, i, cr, &k)) || !vb_csv_num(&t, i, cs, &s)) continue;
        rp_push(&per[(int)k], s);
    }
    char csv[VB_PATH_MAX];
    vb_snprintf(csv, sizeof csv, "%sstragglers.csv", prefix);
    const char *cols[] = {"rank", "steps", "median_ms", "p90_ms", "max_ms"};
    rp_table *tab = rp_table_new(csv, "Timed FULL step times per rank", 5, cols);
    rp_samples medians = {0};
    int slowest = -1;
    for (int k = 0; k < nranks; k++) {
        if (per[k].n == 0) continue;
        double med = vb_stats_median(per[k].v, per[k].n);
        rp_table_add(tab, "%d", k);
        rp_table_add(tab, "%d", per[k].n);
        rp_table_num(tab, med * 1e3);
        rp_table_num(tab, vb_stats_percentile(per[k].v, per[k].n, 90) * 1e3);
        rp_table_num(tab, vb_stats_max(per[k].v, per[k].n) * 1e3);
        if (slowest < 0 || med > medians.v[slowest < 0 ? 0 : slowest]) slowest = medians.n;
        rp_push(&medians, med);
    }
    if (medians.n == 0) {
        rp_para(d, "No timed FULL steps in %s/iterations.csv.", r->dir);
        rp_table_free(tab);
    } else {
        rp_add_table(d, tab);
        if (medians.n == 1) {
            rp_para(d, "One rank reported step times: no straggler to find.");
        } else {
            double mid = vb_stats_median(medians.v, medians.n);
            int rank = atoi(rp_table_cell(tab, slowest, 0));
            rp_para(d, "Slowest rank: %d, median step %.3f ms, %.1f%% behind the median rank (%.3f ms).", rank,
                    medians.v[slowest] * 1e3, 100 * (medians.v[slowest] / mid - 1), mid * 1e3);
        }
    }
    rp_samples_free(&medians);
    for (int k = 0; k < nranks; k++) rp_samples_free(&per[k]);
    free(per);
    vb_csv_free(&t);
}

typedef struct op_row {
    int row;
    double total;
} op_row;

static int cmp_op(const void *a, const void *b) {
    const op_row *x = a, *y = b;
    return x->total < y->total ? 1 : x->total > y->total ? -1 : x->row - y->row;
}

static void ops_section(rp_doc *d, const rp_run *r, const char *prefix, bool compact, int level) {
    rp_heading(d, level, "Top ops by total time (%s)", r->name);
    vb_csv t;
    if (rp_read_csv(r->dir, VB_OPS_CSV, &t) != 0) {
        rp_para(d, "%s/ops.csv: missing (no per-op profile).", r->dir);
        return;
    }
    int ct = vb_csv_col(&t, VB_COL_TRIAL_TYPE), cr = vb_csv_col(&t, VB_COL_RANK), ctot = vb_csv_col(&t, VB_COL_TOTAL_S);
    int cf = vb_csv_col(&t, VB_COL_FLOPS), cg = vb_csv_col(&t, VB_COL_GFLOP_PER_S), cgb = vb_csv_col(&t, VB_COL_GB_PER_S);
    op_row *rows = vb_malloc_check(((size_t)t.nrows + 1) * sizeof *rows);
    /* a run's timed FULL steps on rank 0; an nsys import (trial_type nsys,
     * a rank per device) has no FULL rows: its first device's */
    const char *type = "FULL";
    bool any_full = false;
    for (int i = 0; ct >= 0 && i < t.nrows && !any_full; i++) any_full = strcmp(vb_csv_get(&t, i, ct), "FULL") == 0;
    if (ct >= 0 && !any_full) type = "nsys";
    double rank0 = 0;
    bool first = true;
    for (int i = 0; cr >= 0 && i < t.nrows; i++) {
        double rk;
        if ((ct >= 0 && strcmp(vb_csv_get(&t, i, ct), type) != 0) || !vb_csv_num(&t, i, cr, &rk)) continue;
        if (first || rk < rank0) rank0 = rk;
        first = false;
    }
    int n = 0;
    for (int i = 0; i < t.nrows; i++) {
        double tot, rk;
        if (ct >= 0 && strcmp(vb_csv_get(&t, i, ct), type) != 0) continue;
        if (cr >= 0 && (!vb_csv_num(&t, i, cr, &rk) || rk != rank0)) continue;
        if (!vb_csv_num(&t, i, ctot, &tot)) continue;
        rows[n++] = (op_row){i, tot};
    }
    qsort(rows, (size_t)n, sizeof *rows, cmp_op);
    char csv[VB_PATH_MAX];
    vb_snprintf(csv, sizeof csv, "%stop_ops.csv", prefix);
    const char *cols[] = {"name", "category", "calls", "total_s", "share_of_step_pct", "gflop_per_s", "gb_per_s"};
    char title[96];
    if (ct < 0)
        snprintf(title, sizeof title, "Rank 0, timed SYNTHETIC and FULL steps");
    else if (any_full)
        snprintf(title, sizeof title, "Rank %.0f, timed FULL steps", rank0);
    else
        snprintf(title, sizeof title, "Device %.0f of the imported nsys profile", rank0);
    rp_table *tab = rp_table_new(csv, title, 7, cols);
    int limit = compact ? 5 : 15;
    for (int k = 0; k < n && k < limit; k++) {
        int i = rows[k].row;
        double share = NAN, g = NAN, gb = NAN, fl;
        vb_csv_num(&t, i, vb_csv_col(&t, VB_COL_SHARE_OF_STEP), &share);
        if (!vb_csv_num(&t, i, cg, &g) && vb_csv_num(&t, i, cf, &fl) && fl > 0 && rows[k].total > 0)
            g = fl / rows[k].total / 1e9; /* older ops.csv: flops without the rate */
        vb_csv_num(&t, i, cgb, &gb);
        rp_table_add(tab, "%s", vb_csv_get(&t, i, vb_csv_col(&t, VB_COL_NAME)));
        rp_table_add(tab, "%s", vb_csv_get(&t, i, vb_csv_col(&t, VB_COL_CATEGORY)));
        rp_table_add(tab, "%s", vb_csv_get(&t, i, vb_csv_col(&t, VB_COL_CALLS)));
        rp_table_num(tab, rows[k].total);
        rp_table_num(tab, share * 100);
        rp_table_num(tab, g);
        rp_table_num(tab, gb);
    }
    rp_add_table(d, tab);
    free(rows);
    vb_csv_free(&t);
}

/* One line for a sweep's run: the sweep's provenance section has the rest,
 * and flags what differs between runs. */
static void compact_provenance(rp_doc *d, const rp_run *r) {
    rp_para(d, "Status %s, commit %s%s, machine_key %s, %s OpenMP threads.", r->status,
            r->git_commit[0] ? r->git_commit : "?", strcmp(r->git_dirty, "true") == 0 ? " (dirty tree)" : "",
            r->machine_key[0] ? r->machine_key : "?", r->omp_threads[0] ? r->omp_threads : "?");
    if (r->command_line && r->command_line[0]) rp_pre(d, r->command_line);
}

void rp_run_sections(rp_doc *d, const rp_run *r, const rp_opts *o, const char *prefix, bool compact,
                     int heading_level, bool timeline_figure) {
    const char *out_dir = o->out_dir;
    if (compact)
        compact_provenance(d, r);
    else
        rp_run_provenance(d, r);
    char trace[VB_PATH_MAX], rel[VB_PATH_MAX];
    vb_snprintf(trace, sizeof trace, "%s/trace.json", r->dir);
    if (vb_file_exists(trace)) {
        rp_relpath(out_dir, trace, rel, sizeof rel);
        /* the run's own file, beside report/: a copy of report/ alone loses it, and says so */
        const bool outside = rel[0] == '/' || strncmp(rel, "../", 3) == 0;
        rp_link(d,
                outside ? "Chrome trace (trace.json: open in chrome://tracing or ui.perfetto.dev) (outside report/)"
                        : "Chrome trace (trace.json: open in chrome://tracing or ui.perfetto.dev)",
                rel);
    } else {
        rp_para(d, "No trace.json yet (`vitbench trace %s` writes one).", r->dir);
    }
    breakdown_section(d, r, o, prefix, heading_level, timeline_figure);
    straggler_section(d, r, prefix, heading_level);
    ops_section(d, r, prefix, compact, heading_level);
}

/* ---- findings for the summary ---- */

void rp_cause_of(rp_run *const *runs, int n, int type, rp_cause *c) {
    memset(c, 0, sizeof *c);
    c->load = c->spread = NAN;
    for (int i = 0; i < n; i++) {
        const rp_run *r = runs[i];
        c->runs++;
        const double l = r->load[type].share;
        if (isfinite(l) && !(l <= c->load)) c->load = l;
        const rp_samples *x = &r->thr[type];
        if (x->n > 1) {
            const double lo = vb_stats_min(x->v, x->n), hi = vb_stats_max(x->v, x->n);
            if (lo > 0 && !(hi / lo <= c->spread)) c->spread = hi / lo;
        }
        if (r->threads_team > c->team) c->team = r->threads_team;
        if (r->threads_used > c->used) c->used = r->threads_used;
        if (r->threads_used > 0 && r->threads_team > r->threads_used) c->gave_way = true;
        c->oversubscribed = c->oversubscribed || r->oversubscribed;
    }
}

void rp_bound_finding(rp_doc *d, const rp_samples thr[RP_NTYPES], const char *where, const vb_cause *cause) {
    const rp_samples *io = &thr[RP_IO], *syn = &thr[RP_SYNTHETIC], *full = &thr[RP_FULL];
    if (full->n == 0 || syn->n == 0) return;
    const rp_est fs = rp_ratio_of_means(full, syn);
    const double m_io = io->n ? rp_mean_est(io).mean : NAN, m_syn = rp_mean_est(syn).mean;
    char ratio[200], loader[160], seen[700] = "";
    snprintf(ratio, sizeof ratio, "FULL runs at %.3g%% of SYNTHETIC [95%% CI %.3g%%, %.3g%%]%s", 100 * fs.mean,
             100 * fs.lo, 100 * fs.hi, fs.runs < 2 ? " (one run: the interval holds its trials' spread only)" : "");
    if (isfinite(m_io))
        snprintf(loader, sizeof loader, "the loader alone (IO, %.4g samples/s) runs %.3gx the step's rate (SYNTHETIC, "
                 "%.4g samples/s)", m_io, m_io / m_syn, m_syn);
    else
        snprintf(loader, sizeof loader, "no IO trials measured the loader alone");
    if (cause) {
        char what[600];
        vb_cause_describe(cause, what, sizeof what);
        snprintf(seen, sizeof seen, " What the runs show: %s.", what);
    }
    if (!isfinite(fs.lo)) {
        rp_summary(d, "What bounds FULL%s cannot be told: %s, and one trial a side gives no interval.", where, ratio);
        return;
    }
    /* FULL trains on the loader's batches, SYNTHETIC on one cached batch: FULL
     * cannot be faster than the step itself, nor than the loader alone (IO
     * reads the same batches with the same workers and nothing else). Beyond
     * its interval either is an anomaly of the measurement, not a finding. */
    if (fs.lo > 1) {
        rp_summary(d, "What bounds FULL%s: no answer. %s, above the training step's own rate, which FULL cannot beat: a "
                      "measurement anomaly (the SYNTHETIC trials ran while the machine was busier, clock or thermal "
                      "drift between the trial kinds, or too few trials).%s",
                   where, ratio, seen);
        rp_warning(d, "FULL above SYNTHETIC beyond its interval%s: a measurement anomaly (load or clock drift between "
                      "trial kinds), not a property of the code",
                   where);
        return;
    }
    if (io->n >= 2) {
        const rp_est fi = rp_ratio_of_means(full, io);
        if (isfinite(fi.lo) && fi.lo > 1) {
            rp_summary(d, "What bounds FULL%s: no answer. FULL runs at %.3gx the loader alone [95%% CI %.3g, %.3g] "
                          "(IO, %.4g samples/s), which reads the same batches and does nothing else: a measurement "
                          "anomaly (the IO trials ran while the machine was busier, or the files' pages were not yet "
                          "cached).%s",
                       where, fi.mean, fi.lo, fi.hi, m_io, seen);
            rp_warning(d, "FULL above the loader's own rate (IO) beyond its interval%s: a measurement anomaly, not a "
                          "property of the code",
                       where);
            return;
        }
    }
    /* a statement only when the interval excludes the alternative: the step
     * bounds FULL when the whole interval lies within 5% of SYNTHETIC (or
     * above it); loading (or their overlap) when the whole interval lies
     * below that */
    if (fs.lo >= 0.95)
        rp_summary(d, "What bounds FULL%s: the training step. %s; %s.", where, ratio, loader);
    else if (fs.hi < 0.95 && isfinite(m_io) && m_io < 1.05 * m_syn)
        rp_summary(d, "What bounds FULL%s: data loading. %s, and %s: more loader workers or a faster read path.",
                   where, ratio, loader);
    else if (fs.hi < 0.95)
        rp_summary(d, "What bounds FULL%s: the overlap of loading and the step. %s, although %s: they share cores or "
                      "memory bandwidth, or each trial's first batch waits for the loader (longer trials amortise "
                      "that).",
                   where, ratio, loader);
    else
        rp_summary(d, "What bounds FULL%s cannot be told yet: %s, an interval that reaches both within 5%% of the step "
                      "(step-bound) and below it (loading-bound); more trials or repeats would decide; %s.",
                   where, ratio, loader);
}

void rp_run_warnings(rp_doc *d, rp_run *const *runs, int n, bool sweep) {
    int over = 0, busy = 0, loaded = 0;
    const char *first_over = NULL, *first_busy = NULL, *first_loaded = NULL;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const rp_run *r = runs[i];
        if (r->oversubscribed) {
            over++;
            if (!first_over) first_over = r->name;
        }
        for (int k = 0; k < RP_NTYPES; k++)
            if (vb_verdict_busy(NAN, r->load[k].share)) {
                loaded++;
                if (!first_loaded) first_loaded = r->name;
                break;
            }
        for (int k = 0; k < RP_NTYPES; k++)
            if (r->load[k].share > worst) worst = r->load[k].share;
        for (int k = 0; k < RP_NTYPES; k++) {
            const rp_samples *x = &r->thr[k];
            if (x->n < 2) continue;
            const double lo = vb_stats_min(x->v, x->n), hi = vb_stats_max(x->v, x->n);
            if (lo > 0 && hi / lo > VB_VERDICT_NOISY_SPREAD) {
                busy++;
                if (!first_busy) first_busy = r->name;
                break;
            }
        }
    }
    /* BLAS kernels narrower than the CPU: the CPU backend's GEMMs run well
     * under its FMA peak; the cause and its fix depend on the rule that
     * chose them (core/prof/blas_kernels.h) */
    for (int i = 0; i < n; i++) {
        const rp_run *r = runs[i];
        if (strcmp(r->backend, "cuda") == 0 || !r->cpu_vector[0] || !r->blas_vector[0]) continue;
        char why[512];
        vb_blas_advice(why, sizeof why, r->blas_coretype, r->cpu_vector, r->blas_rule, r->blas_library_core);
        if (why[0]) {
            rp_warning(d, "BLAS runs below the CPU's vector width (%s): %s", r->name, why);
            break;
        }
    }
    if (over)
        rp_warning(d, "%d run%s oversubscribed (more threads than cores on a node, e.g. %s): their throughput "
                      "measures the contention, not the code",
                   over, over == 1 ? " was" : "s were", first_over);
    if (busy)
        rp_warning(d, "%d run%s trials spread more than %.1fx (max / min, e.g. %s): the machine was probably busy; "
                      "rerun before trusting comparisons that involve %s",
                   busy, busy == 1 ? "'s" : "s'", VB_VERDICT_NOISY_SPREAD, first_busy, busy == 1 ? "it" : "them");
    if (loaded)
        rp_warning(d, "%d run%s on a busy machine by the load recorded in load.csv (more than %.0f%% of its thread "
                      "time waiting for a CPU or stolen; up to %.3g%%, e.g. %s): verdicts involving %s are widened by "
                      "that load and are inconclusive unless the effect clears it",
                   loaded, loaded == 1 ? " ran" : "s ran", 100 * VB_VERDICT_BUSY_LOAD, 100 * worst, first_loaded,
                   loaded == 1 ? "it" : "them");
    /* the team a run gave up as it started, and what to rerun with when the
     * load or the threads explain the numbers (advice.h) */
    int gave = 0;
    const rp_run *first_gave = NULL;
    rp_cause *causes = vb_calloc_check((size_t)n + 1, sizeof *causes);
    const rp_cause **cp = vb_calloc_check((size_t)n + 1, sizeof *cp);
    for (int i = 0; i < n; i++) {
        int type = RP_FULL;
        while (type > 0 && runs[i]->thr[type].n == 0) type--;
        rp_cause_of(&runs[i], 1, type, &causes[i]);
        cp[i] = &causes[i];
        if (causes[i].gave_way && !gave++) first_gave = runs[i];
    }
    if (gave)
        rp_warning(d, "%d run%s fewer OpenMP threads than %s given (e.g. %s: %d of %d, thread_policy adapt): the "
                      "cores were busy with other work as %s started",
                   gave, gave == 1 ? " ran" : "s ran", gave == 1 ? "it was" : "they were", first_gave->name,
                   first_gave->threads_used, first_gave->threads_team, gave == 1 ? "it" : "they");
    char adv[900];
    vb_advice(cp, n, sweep, adv, sizeof adv);
    if (adv[0]) rp_warning(d, "what to rerun with: %s", adv);
    free(cp);
    free(causes);
    int imported = 0;
    const rp_run *first_imported = NULL;
    for (int i = 0; i < n; i++)
        if (runs[i]->imported[0]) {
            imported++;
            if (!first_imported) first_imported = runs[i];
        }
    if (imported && imported < n)
        rp_warning(d, "%d of %d runs are imported runs of %s (e.g. %s), the others vitbench's trainer: different "
                      "programs, so their ratios compare the two trainers on one machine, not a change to either",
                   imported, n, first_imported->imported, first_imported->name);
    else if (imported)
        rp_warning(d, "imported run%s of %s (vitbench import): no machine fingerprint, config or commit in %s files; "
                      "nothing here holds %s against another machine or a baseline",
                   n == 1 ? "" : "s", first_imported->imported, n == 1 ? "its" : "their", n == 1 ? "it" : "them");
}

/* "2 threads a rank on 2 cores", or per rank count when the runs differ */
static void threads_phrase(rp_run *const *runs, int n, char *out, size_t size) {
    const rp_run *first = NULL;
    bool differ = false;
    for (int i = 0; i < n; i++) {
        if (!runs[i]->has_json || !runs[i]->omp_threads[0]) continue;
        if (!first) first = runs[i];
        else if (strcmp(runs[i]->omp_threads, first->omp_threads) != 0 ||
                 strcmp(runs[i]->affinity_cores, first->affinity_cores) != 0)
            differ = true;
    }
    if (!first) {
        snprintf(out, size, "? threads a rank");
        return;
    }
    if (!differ) {
        snprintf(out, size, "%s thread%s a rank on %s core%s", first->omp_threads,
                 strcmp(first->omp_threads, "1") ? "s" : "", first->affinity_cores[0] ? first->affinity_cores : "?",
                 strcmp(first->affinity_cores, "1") ? "s" : "");
        return;
    }
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        const rp_run *r = runs[i];
        if (!r->has_json || !r->omp_threads[0]) continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = runs[j]->has_json && runs[j]->ranks == r->ranks &&
                   strcmp(runs[j]->omp_threads, r->omp_threads) == 0 &&
                   strcmp(runs[j]->affinity_cores, r->affinity_cores) == 0;
        if (seen) continue;
        int w = snprintf(out + k, size - k, "%s%g rank%s: %s thread%s on %s core%s", k ? ", " : "", r->ranks,
                         r->ranks == 1 ? "" : "s", r->omp_threads, strcmp(r->omp_threads, "1") ? "s" : "",
                         r->affinity_cores[0] ? r->affinity_cores : "?", strcmp(r->affinity_cores, "1") ? "s" : "");
        if (w < 0 || (size_t)w >= size - k) break;
        k += (size_t)w;
    }
    if (k + 12 < size) snprintf(out + k, size - k, " a rank");
}

void rp_caption(rp_doc *d, rp_run *const *runs, int n, bool any_oversubscribed) {
    const rp_run *r = NULL;
    for (int i = 0; i < n && !r; i++)
        if (runs[i]->has_json) r = runs[i];
    if (!r) {
        d->caption[0] = '\0';
        return;
    }
    if (r->imported[0]) {
        vb_snprintf(d->caption, sizeof d->caption, "Imported runs of %.100s: machine, config and threads unknown.",
                    r->imported);
        return;
    }
    char threads[320];
    threads_phrase(runs, n, threads, sizeof threads);
    vb_snprintf(d->caption, sizeof d->caption, "Config %s; %s%s%s; %s; BLAS %s; %s.",
             r->config[0] ? r->config : "?", r->gpu_name[0] ? r->gpu_name : r->cpu_model[0] ? r->cpu_model : "?",
             r->host[0] ? " on " : "", r->host, threads, r->blas_coretype[0] ? r->blas_coretype : "?",
             any_oversubscribed ? "some runs oversubscribed" : "no run oversubscribed");
}
