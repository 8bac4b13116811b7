/* report_kinds.c: the analysis each kind of sweep calls for
 * (report_sweep.h): weak / strong scaling, DDP buckets, tp/cp layouts,
 * flag comparisons, and throughput against any other swept key. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/report_sweep.h"

#define NOTE_FP "fingerprint differs"
#define NOTE_ONE "one sample: no CI"

static int cmp_double(double a, double b) { return a < b ? -1 : a > b; }

static int cmp_pt_ranks(const void *a, const void *b) {
    const rp_point *x = *(rp_point *const *)a, *y = *(rp_point *const *)b;
    return cmp_double(x->ranks, y->ranks);
}

static void note_add(char *notes, size_t n, const char *what) {
    size_t k = strlen(notes);
    snprintf(notes + k, n - k, "%s%s", k ? "; " : "", what);
}

/* what qualifies a point's numbers: another machine, one sample, an
 * oversubscribed or busy run behind it, an interval wider than +-10% */
static void point_notes(const rp_sweep *s, const rp_point *p, char *notes, size_t n) {
    notes[0] = '\0';
    if (p->fp_differs) note_add(notes, n, NOTE_FP);
    if (p->thr.n == 1) note_add(notes, n, NOTE_ONE);
    else if (p->nruns == 1) note_add(notes, n, "one run: its CI holds no run-to-run spread");
    bool over = false, spread = false, loaded = false;
    for (int a = 0; a < p->nruns; a++) {
        const rp_run *r = &s->runs[p->runs[a]];
        over = over || r->oversubscribed;
        const int type = s->type >= 0 ? s->type : RP_FULL;
        const rp_samples *x = &r->thr[type];
        if (x->n > 1) {
            const double lo = vb_stats_min(x->v, x->n), hi = vb_stats_max(x->v, x->n);
            spread = spread || (lo > 0 && hi / lo > VB_VERDICT_NOISY_SPREAD);
        }
        loaded = loaded || vb_verdict_busy(NAN, r->load[type].share);
    }
    if (over) note_add(notes, n, "oversubscribed");
    if (spread) note_add(notes, n, "busy run (trials spread > 1.5x)");
    if (loaded) {
        char l[96];
        snprintf(l, sizeof l, "busy machine (%.3g%% of thread time lost to other work)", 100 * p->load);
        note_add(notes, n, l);
    }
    if (isfinite(p->est.lo) && p->est.mean > 0 && (p->est.hi - p->est.lo) / 2 > 0.1 * p->est.mean)
        note_add(notes, n, "wide CI (> +-10%)");
}

/* What a point's runs show (report_advice.c). */
static void point_cause(const rp_sweep *s, const rp_point *p, rp_cause *c) {
    rp_run **runs = vb_calloc_check((size_t)p->nruns + 1, sizeof *runs);
    for (int a = 0; a < p->nruns; a++) runs[a] = &s->runs[p->runs[a]];
    rp_cause_of(runs, p->nruns, s->type >= 0 ? s->type : RP_FULL, c);
    free(runs);
}

/* An efficiency above the ideal beyond its interval: no measurement of a
 * correct program gives it (weak scaling adds ranks and work alike; strong
 * scaling beyond N/N0 needs the smaller share of each rank to reach a
 * faster memory, which the report cannot see). One line for the summary:
 * no answer and what the two points' runs show (rp_run_warnings says what
 * to rerun with). */
static void scaling_anomaly(rp_doc *d, const rp_sweep *s, const rp_point *ref, const rp_point *p, rp_est eff,
                            bool strong, const char *series) {
    rp_cause cr, cp;
    point_cause(s, ref, &cr);
    point_cause(s, p, &cp);
    char a[600], b[600];
    vb_cause_describe(&cr, a, sizeof a);
    vb_cause_describe(&cp, b, sizeof b);
    rp_summary(d, "%s scaling efficiency at %g ranks%s%s: no answer. The measured %.3g [95%% CI %.3g, %.3g] lies "
                  "above the ideal (1) beyond its interval, which %s: a measurement anomaly. The %g-rank point: %s. "
                  "The %g-rank point: %s.",
               strong ? "Strong" : "Weak", p->ranks, series[0] ? ", " : "", series, eff.mean, eff.lo, eff.hi,
               strong ? "a correct measurement reaches only when each rank's smaller share fits a faster memory"
                      : "weak scaling cannot reach (more ranks, and as much more work)",
               ref->ranks, a, p->ranks, b);
}

static void table_est(rp_table *t, rp_est e) {
    rp_table_num(t, e.mean);
    rp_table_num(t, e.lo);
    rp_table_num(t, e.hi);
}

static const char *thr_unit(const rp_sweep *s) {
    static char buf[64];
    snprintf(buf, sizeof buf, "%s throughput (samples/s)", vb_trial_kinds[s->type].name);
    return buf;
}

/* ---- scaling ---- */

/* A series: the points sharing every varying key but ranks, by ranks. */
typedef struct series {
    char label[256];
    rp_point **p;
    int n;
} series;

static int collect_series(rp_sweep *s, series **out) {
    series *v = vb_calloc_check((size_t)s->npts + 1, sizeof *v);
    int ns = 0;
    for (int i = 0; i < s->npts; i++) {
        char lab[256];
        sw_label(s, &s->pts[i], "ranks", lab, sizeof lab);
        int k = 0;
        while (k < ns && strcmp(v[k].label, lab) != 0) k++;
        if (k == ns) {
            snprintf(v[ns].label, sizeof v[ns].label, "%s", lab);
            v[ns].p = vb_calloc_check((size_t)s->npts, sizeof *v[ns].p);
            ns++;
        }
        v[k].p[v[k].n++] = &s->pts[i];
    }
    for (int k = 0; k < ns; k++) qsort(v[k].p, (size_t)v[k].n, sizeof *v[k].p, cmp_pt_ranks);
    *out = v;
    return ns;
}

static void free_series(series *v, int n) {
    for (int k = 0; k < n; k++) free(v[k].p);
    free(v);
}

static rp_table *scaling(rp_doc *d, rp_sweep *s, const rp_opts *o, bool strong) {
    series *v;
    int ns = collect_series(s, &v);
    rp_heading(d, 1, strong ? "Strong scaling (fixed global batch)" : "Weak scaling (fixed local batch)");
    rp_para(d, strong ? "speedup(N) = thr(N) / thr(N0), efficiency(N) = speedup(N) * N0 / N, where N0 is the "
                        "smallest rank count of the series (1 when the sweep has it). Ideal: speedup N/N0, "
                        "efficiency 1."
                      : "efficiency E(N) = thr(N) / (N/N0 * thr(N0)), N0 the smallest rank count of the series "
                        "(1 when the sweep has it); the ideal throughput is N/N0 * thr(N0). Ideal E = 1.");
    const char *wcols[] = {"series", "ranks", "repeats", "samples", "thr_mean", "thr_ci_lo", "thr_ci_hi",
                           "ideal_thr", "efficiency", "eff_ci_lo", "eff_ci_hi", "notes"};
    const char *scols[] = {"series",     "ranks",     "repeats",   "samples",    "thr_mean",
                           "thr_ci_lo",  "thr_ci_hi", "speedup",   "speedup_ci_lo", "speedup_ci_hi",
                           "efficiency", "eff_ci_lo", "eff_ci_hi", "notes"};
    rp_table *t = strong ? rp_table_new("scaling.csv", "Strong scaling: throughput, speedup and efficiency", 14, scols)
                         : rp_table_new("scaling.csv", "Weak scaling: throughput and efficiency", 12, wcols);
    vb_plot pt, pe, psp;
    vb_plot_init(&pt, "throughput", strong ? "Strong scaling: throughput (mean, 95% CI)" : "Weak scaling: throughput (mean, 95% CI)", "ranks",
                 thr_unit(s));
    vb_plot_init(&pe, "efficiency", strong ? "Strong scaling: efficiency (95% CI)" : "Weak scaling: efficiency (95% CI)", "ranks",
                 "efficiency (ideal = 1)");
    vb_plot_init(&psp, "speedup", "Strong scaling: speedup (95% CI)", "ranks", "speedup over the smallest rank count");
    /* log-log: the ideal is a straight line and every point's distance from
     * it reads as a ratio; efficiency in a panel under it */
    pt.logx2 = pe.logx2 = psp.logx2 = true;
    pt.logy = psp.logy = true;
    pt.below = &pe;
    pe.hline = 1;
    snprintf(pe.hline_title, sizeof pe.hline_title, "ideal");
    /* efficiency from 0, a little above the ideal or the highest estimate:
     * an interval that reaches further is cut at the axis (the table has it) */
    pe.ymin = 0;
    pe.ymax = 1.2;
    int nanomalies = 0;
    for (int k = 0; k < ns; k++) {
        rp_point *ref = v[k].p[0];
        double n0 = ref->ranks;
        char title[300];
        vb_plot_series *st = vb_plot_series_add(&pt, v[k].label, false);
        snprintf(title, sizeof title, "ideal %s", v[k].label);
        vb_plot_series *si = vb_plot_series_add(&pt, title, true);
        snprintf(si->color_key, sizeof si->color_key, "%.*s", (int)sizeof si->color_key - 1, v[k].label);
        vb_plot_series *se = vb_plot_series_add(&pe, v[k].label, false);
        vb_plot_series *ss = vb_plot_series_add(&psp, v[k].label, false);
        vb_plot_series *ssi = vb_plot_series_add(&psp, title, true);
        snprintf(ssi->color_key, sizeof ssi->color_key, "%.*s", (int)sizeof ssi->color_key - 1, v[k].label);
        for (int i = 0; i < v[k].n; i++) {
            rp_point *p = v[k].p[i];
            double scale = n0 / p->ranks;
            rp_est r = rp_ratio_of_means(&p->thr, &ref->thr);
            rp_est eff = {r.mean * scale, r.lo * scale, r.hi * scale, r.n, r.runs};
            char notes[256];
            point_notes(s, p, notes, sizeof notes);
            if (ref->fp_differs && p != ref) note_add(notes, sizeof notes, "reference point's fingerprint differs");
            if (p != ref && isfinite(eff.lo) && eff.lo <= 1 && eff.hi >= 1)
                note_add(notes, sizeof notes, "CI includes 1: not distinguishable from ideal");
            const bool anomaly = p != ref && isfinite(eff.lo) && eff.lo > 1;
            if (anomaly) {
                note_add(notes, sizeof notes, "measurement anomaly: above the ideal beyond its interval");
                nanomalies++;
            }
            rp_table_add(t, "%s", v[k].label);
            rp_table_add(t, "%g", p->ranks);
            rp_table_add(t, "%d", p->nruns);
            rp_table_add(t, "%d", p->thr.n);
            table_est(t, p->est);
            if (strong) {
                table_est(t, r);
            } else {
                rp_table_num(t, ref->est.mean / scale);
            }
            table_est(t, eff);
            rp_table_add(t, "%s", notes);
            vb_plot_point(st, p->ranks, p->est.mean, p->est.lo, p->est.hi, NULL);
            vb_plot_point(si, p->ranks, ref->est.mean / scale, NAN, NAN, NULL);
            vb_plot_point(se, p->ranks, eff.mean, eff.lo, eff.hi, NULL);
            if (eff.mean * 1.15 > pe.ymax) pe.ymax = eff.mean * 1.15;
            vb_plot_point(ss, p->ranks, r.mean, r.lo, r.hi, NULL);
            vb_plot_point(ssi, p->ranks, 1 / scale, NAN, NAN, NULL);
        }
        if (n0 != 1)
            rp_para(d, "Series %s has no 1-rank point: its reference is N0 = %g ranks.", v[k].label, n0);
        if (v[k].n > 1) {
            rp_point *last = v[k].p[v[k].n - 1];
            rp_est r = rp_ratio_of_means(&last->thr, &ref->thr);
            const double sc = n0 / last->ranks;
            const rp_est eff = {r.mean * sc, r.lo * sc, r.hi * sc, r.n, r.runs};
            if (isfinite(eff.lo) && eff.lo > 1) {
                scaling_anomaly(d, s, ref, last, eff, strong, ns > 1 ? v[k].label : "");
                continue;
            }
            rp_summary(d, "%s scaling efficiency at %g ranks%s%s: %.3g [95%% CI %.3g, %.3g] against %g rank%s "
                          "(%s throughput %.4g samples/s).",
                       strong ? "Strong" : "Weak", last->ranks, ns > 1 ? ", " : "", ns > 1 ? v[k].label : "",
                       r.mean * sc, r.lo * sc, r.hi * sc, n0, n0 == 1 ? "" : "s", vb_trial_kinds[s->type].name,
                       last->est.mean);
        }
    }
    if (nanomalies)
        rp_warning(d, "%d point%s an efficiency above the ideal beyond %s interval (scaling.csv's notes): a "
                      "measurement anomaly, not a result",
                   nanomalies, nanomalies == 1 ? " has" : "s have", nanomalies == 1 ? "its" : "their");
    rp_add_table(d, t);
    rp_figure(d, o, &pt);
    if (strong) rp_figure(d, o, &psp);
    vb_plot_free(&pt);
    vb_plot_free(&pe);
    vb_plot_free(&psp);
    free_series(v, ns);
    return t;
}

/* The point equal to p in every swept key but noddp, with noddp = true. */
static rp_point *noddp_partner(rp_sweep *s, const rp_point *p) {
    for (int i = 0; i < s->npts; i++) {
        rp_point *q = &s->pts[i];
        if (strcmp(sw_val(s, q, VB_COL_NODDP), "true") != 0) continue;
        bool same = true;
        for (int k = 0; k < s->nkeys && same; k++)
            if (strcmp(s->keys[k], "noddp") != 0) same = strcmp(sw_val(s, p, s->keys[k]), sw_val(s, q, s->keys[k])) == 0;
        if (same) return q;
    }
    return NULL;
}

/* dp of a point: summary.csv's, else ranks / (tp * cp) from the columns. */
static double point_dp(const rp_sweep *s, const rp_point *p) {
    double dp = s->runs[p->runs[0]].dp;
    if (isfinite(dp)) return dp;
    double tp = sw_num(s, p, "tensor_parallel"), cp = sw_num(s, p, "context_parallel");
    return p->ranks / (isfinite(tp) ? tp : 1) / (isfinite(cp) ? cp : 1);
}

/* The SC21 tutorial's measure: overhead(N) = 1 - thr_ddp(N) / thr_noddp(N). */
static void comm_overhead(rp_doc *d, rp_sweep *s, const rp_opts *o) {
    if (vb_csv_col(&s->idx, VB_COL_NODDP) < 0) return;
    const char *cols[] = {"series", "ranks", "dp", "thr_ddp", "thr_noddp", "overhead", "overhead_ci_lo",
                          "overhead_ci_hi", "notes"};
    rp_table *t = rp_table_new("comm_overhead.csv", "Communication overhead 1 - thr_ddp / thr_noddp", 9, cols);
    vb_plot pl;
    vb_plot_init(&pl, "comm_overhead", "Communication overhead (1 - DDP / no-DDP throughput)", "ranks",
                 "overhead (fraction of no-DDP throughput)");
    pl.logx2 = true;
    pl.hline = 0;
    snprintf(pl.hline_title, sizeof pl.hline_title, "ideal (no overhead)");
    /* an overhead is at most 1 (all of the throughput); below -1 DDP would
     * be twice as fast as no DDP: intervals reaching further are noise,
     * cut at the axis (the table has them) */
    pl.ymin = -1;
    pl.ymax = 1;
    vb_plot_series *ps = NULL;
    char last[256] = "";
    rp_point **order = vb_calloc_check((size_t)s->npts + 1, sizeof *order);
    for (int i = 0; i < s->npts; i++) order[i] = &s->pts[i];
    qsort(order, (size_t)s->npts, sizeof *order, cmp_pt_ranks);
    bool noise_at_dp1 = false, dp1_in_table = false;
    double big[4] = {NAN, NAN, NAN, NAN}; /* ranks, overhead, CI of the largest rank count */
    for (int i = 0; i < s->npts; i++) {
        rp_point *p = order[i];
        if (strcmp(sw_val(s, p, VB_COL_NODDP), "false") != 0) continue;
        rp_point *q = noddp_partner(s, p);
        if (!q) continue;
        rp_est r = rp_ratio_of_means(&p->thr, &q->thr);
        double ov = 1 - r.mean, lo = 1 - r.hi, hi = 1 - r.lo;
        double dp = point_dp(s, p);
        char lab[256], notes[512];
        sw_label(s, p, "ranks", lab, sizeof lab);
        char *nd = strstr(lab, "noddp=false"); /* the series is the DDP side; name it without the key */
        if (nd) memmove(nd, nd + 11, strlen(nd + 11) + 1);
        for (size_t k = strlen(lab); k > 0 && lab[k - 1] == ' '; k--) lab[k - 1] = '\0';
        if (!lab[0]) snprintf(lab, sizeof lab, "ddp vs noddp");
        point_notes(s, p, notes, sizeof notes);
        if (q->fp_differs && !p->fp_differs) note_add(notes, sizeof notes, "noddp " NOTE_FP);
        if (dp == 1 && isfinite(lo) && (lo > 0 || hi < 0)) {
            note_add(notes, sizeof notes, "dp = 1 has no communication, yet the CI excludes 0: run-to-run noise");
            noise_at_dp1 = true;
        } else if (dp != 1 && isfinite(lo) && lo <= 0 && hi >= 0) {
            /* the question is whether the interval holds 0, not how wide it is */
            note_add(notes, sizeof notes, "CI includes 0: not distinguishable from no overhead");
        }
        if (!(p->ranks < big[0])) big[0] = p->ranks, big[1] = ov, big[2] = lo, big[3] = hi;
        rp_table_add(t, "%s", lab);
        rp_table_add(t, "%g", p->ranks);
        rp_table_num(t, dp);
        rp_table_num(t, p->est.mean);
        rp_table_num(t, q->est.mean);
        rp_table_num(t, ov);
        rp_table_num(t, lo);
        rp_table_num(t, hi);
        rp_table_add(t, "%s", notes);
        if (!ps || strcmp(last, lab) != 0) {
            ps = NULL;
            for (int k = 0; k < pl.ns; k++)
                if (strcmp(pl.s[k]->title, lab) == 0) ps = pl.s[k];
            if (!ps) ps = vb_plot_series_add(&pl, lab, false);
            snprintf(last, sizeof last, "%s", lab);
        }
        /* the 1-rank (dp = 1) point has no communication to show: only run-to-run
         * noise, often larger than every real overhead; table only */
        if (dp != 1) vb_plot_point(ps, p->ranks, ov, lo, hi, NULL);
        else dp1_in_table = true;
    }
    free(order);
    if (rp_table_rows(t) == 0) {
        rp_table_free(t);
        vb_plot_free(&pl);
        return;
    }
    rp_summary(d, "Communication overhead (1 - DDP / no-DDP throughput) at %g ranks: %.3g%% [95%% CI %.3g%%, "
                  "%.3g%%]%s.",
               big[0], 100 * big[1], 100 * big[2], 100 * big[3],
               isfinite(big[2]) && big[2] <= 0 && big[3] >= 0 ? ": not distinguishable from none" : "");
    if (noise_at_dp1)
        rp_warning(d, "at dp = 1 (no gradient communication) the DDP and no-DDP runs still differ beyond their "
                      "intervals: run-to-run noise of that size hides communication costs as small");
    rp_heading(d, 1, "Communication overhead (DDP against no DDP)");
    rp_para(d, "overhead(N) = 1 - thr_ddp(N) / thr_noddp(N): the share of throughput the gradient all-reduce costs "
               "(the SC21 tutorial's measure); CI: delta method on the ratio of means.");
    if (noise_at_dp1)
        rp_para(d, "WARNING: at dp = 1 there is no gradient communication, yet the overhead's CI excludes 0 there: "
                   "the runs differ by more than the repeats show, so overheads of that size elsewhere are not "
                   "evidence of communication cost.");
    rp_add_table(d, t);
    /* a curve needs two rank counts with communication: one point on a log
     * axis is no figure */
    int nx = 0;
    double xs[2] = {NAN, NAN};
    for (int k = 0; k < pl.ns; k++)
        for (int i = 0; i < pl.s[k]->n && nx < 2; i++)
            if (nx == 0 || pl.s[k]->x[i] != xs[0]) xs[nx++] = pl.s[k]->x[i];
    if (nx < 2) {
        rp_para(d, "One rank count with gradient communication (dp > 1): no overhead curve to draw; the table "
                   "has the number.");
    } else {
        if (dp1_in_table)
            rp_para(d, "The figure leaves out the dp = 1 points: with one data-parallel rank there is no gradient "
                       "communication, so the overhead there is only the noise between the DDP and no-DDP runs (it "
                       "is in the table).");
        rp_figure(d, o, &pl);
    }
    vb_plot_free(&pl);
}

/* ---- DDP buckets ---- */

static bool is_true(const char *s) { return s && strcmp(s, "true") == 0; }

static double point_bucket(const rp_sweep *s, const rp_point *p) {
    double b = sw_num(s, p, "bucket_cap_mb");
    if (!isfinite(b) && s->runs[p->runs[0]].bucket_cap_mb[0]) b = atof(s->runs[p->runs[0]].bucket_cap_mb);
    return b;
}

static bool point_noddp(const rp_sweep *s, const rp_point *p) {
    const char *v = sw_val(s, p, VB_COL_NODDP);
    return is_true(v && *v ? v : s->runs[p->runs[0]].noddp);
}

/* A point's DDP buckets per step and their bytes (its runs' medians,
 * iterations.csv): what bucket_cap_mb actually made of the gradients. */
static void point_buckets(const rp_sweep *s, const rp_point *p, double *buckets, double *bytes) {
    double *c = vb_calloc_check((size_t)p->nruns + 1, sizeof *c), *b = vb_calloc_check((size_t)p->nruns + 1, sizeof *b);
    int n = 0;
    for (int k = 0; k < p->nruns; k++) {
        const rp_run *r = &s->runs[p->runs[k]];
        if (isfinite(r->buckets_per_step)) c[n] = r->buckets_per_step, b[n++] = r->allreduce_bytes_per_step;
    }
    *buckets = n ? vb_stats_median(c, n) : NAN;
    *bytes = n ? vb_stats_median(b, n) : NAN;
    free(c), free(b);
}

/* "466 KB" */
static void human_bytes(double b, char *out, size_t n) {
    if (!isfinite(b)) snprintf(out, n, "? bytes");
    else if (b >= 1e9) snprintf(out, n, "%.3g GB", b / 1e9);
    else if (b >= 1e6) snprintf(out, n, "%.3g MB", b / 1e6);
    else if (b >= 1e3) snprintf(out, n, "%.3g KB", b / 1e3);
    else snprintf(out, n, "%.0f bytes", b);
}

/* Bucket sizes that gave the same buckets ran the same configuration: one
 * paragraph and one summary line per such group. Returns how many groups
 * of two or more there are; same[i] is the group index of order[i] (-1 alone). */
static int same_bucket_groups(rp_doc *d, const rp_sweep *s, rp_point *const *order, int n, int *same) {
    int ngroups = 0;
    for (int i = 0; i < n; i++) same[i] = -1;
    for (int i = 0; i < n; i++) {
        if (same[i] >= 0 || point_noddp(s, order[i])) continue;
        double bi, yi;
        point_buckets(s, order[i], &bi, &yi);
        if (!isfinite(bi)) continue;
        char sizes[512] = "";
        size_t k = (size_t)snprintf(sizes, sizeof sizes, "%g", point_bucket(s, order[i]));
        int members = 1;
        for (int j = i + 1; j < n; j++) {
            if (same[j] >= 0 || point_noddp(s, order[j])) continue;
            double bj, yj;
            point_buckets(s, order[j], &bj, &yj);
            if (bj != bi || yj != yi) continue;
            if (members == 1) same[i] = ngroups;
            same[j] = ngroups;
            members++;
            if (k < sizeof sizes) k += (size_t)snprintf(sizes + k, sizeof sizes - k, ", %g", point_bucket(s, order[j]));
        }
        if (members < 2) continue;
        char by[32];
        human_bytes(yi, by, sizeof by);
        rp_para(d, "Same configuration: bucket_cap_mb %s MB all gave %g all-reduce bucket%s per step (%s of gradients "
                   "a step): these %d variants ran the same DDP schedule, and their differences are run-to-run noise, "
                   "not the bucket size.",
                sizes, bi, bi == 1 ? "" : "s", by, members);
        rp_summary(d, "DDP bucket sizes %s MB ran the same configuration (%g bucket%s a step, %s of gradients): they "
                      "are one measurement repeated, not different settings.",
                   sizes, bi, bi == 1 ? "" : "s", by);
        ngroups++;
    }
    return ngroups;
}

static rp_table *buckets(rp_doc *d, rp_sweep *s, const rp_opts *o) {
    rp_heading(d, 1, "DDP gradient buckets");
    rp_point *nod = NULL, *dflt = NULL;
    for (int i = 0; i < s->npts; i++) {
        rp_point *p = &s->pts[i];
        if (point_noddp(s, p)) {
            nod = p;
            continue;
        }
        if (point_bucket(s, p) == 25) dflt = p;
    }
    const char *cols[] = {"variant", "bucket_cap_mb", "noddp", "samples", "buckets_per_step", "thr_mean",
                          "thr_ci_lo", "thr_ci_hi", "vs_default", "vs_default_ci_lo", "vs_default_ci_hi",
                          "vs_default_verdict", "vs_noddp", "vs_noddp_ci_lo", "vs_noddp_ci_hi", "exposed_comm_ms",
                          "exposed_ci_lo", "exposed_ci_hi", "notes"};
    rp_table *t = rp_table_new("buckets.csv", "Throughput and exposed communication per bucket size", 19, cols);
    vb_plot pt, pe;
    vb_plot_init(&pt, "buckets_throughput", "DDP buckets: throughput per bucket_cap_mb", "variant", thr_unit(s));
    vb_plot_init(&pe, "buckets_exposed_comm", "DDP buckets: exposed communication per step", "variant",
                 "exposed communication (ms per step)");
    pt.categorical = pe.categorical = true;
    if (nod) {
        pt.hline = nod->est.mean;
        snprintf(pt.hline_title, sizeof pt.hline_title, "noddp (no communication)");
    }
    vb_plot_series *st = vb_plot_series_add(&pt, "throughput (mean, 95% CI)", false);
    vb_plot_series *se = vb_plot_series_add(&pe, "exposed comm (mean, 95% CI)", false);
    /* bucket sizes in numeric order, noddp last: the x axis reads as a size axis */
    rp_point **order = vb_calloc_check((size_t)s->npts + 1, sizeof *order);
    int *same = vb_calloc_check((size_t)s->npts + 1, sizeof *same);
    rp_cmp *vs = vb_calloc_check((size_t)s->npts + 1, sizeof *vs);
    for (int i = 0; i < s->npts; i++) order[i] = &s->pts[i];
    for (int i = 1; i < s->npts; i++)
        for (int j = i; j > 0; j--) {
            rp_point *a = order[j - 1], *b = order[j];
            const double ka = point_noddp(s, a) ? INFINITY : point_bucket(s, a);
            const double kb = point_noddp(s, b) ? INFINITY : point_bucket(s, b);
            if (!(kb < ka)) break;
            order[j - 1] = b, order[j] = a;
        }
    /* the best bucket size by the ratio the verdict is made of (against the
     * default), so that "best" and its ratio are one statistic */
    int best = -1;
    for (int i = 0; i < s->npts; i++) {
        rp_point *p = order[i];
        vs[i] = (rp_cmp){.ratio = NAN, .lo = NAN, .hi = NAN, .p = NAN, .verdict = VB_VERDICT_NO_SAMPLES};
        if (point_noddp(s, p) || !dflt) continue;
        if (p == dflt)
            vs[i].ratio = vs[i].lo = vs[i].hi = 1;
        else
            vs[i] = rp_compare(&dflt->thr, dflt->load, &p->thr, p->load);
        if (isfinite(vs[i].ratio) && (best < 0 || vs[i].ratio > vs[best].ratio)) best = i;
    }
    for (int i = 0; i < s->npts; i++) {
        rp_point *p = order[i];
        char lab[256], notes[256], vtext[320] = "";
        const char *var = sw_val(s, p, VB_COL_VARIANT);
        if (point_noddp(s, p))
            snprintf(lab, sizeof lab, "noddp");
        else
            snprintf(lab, sizeof lab, "%g MB%s", point_bucket(s, p), p == dflt ? " (default)" : "");
        point_notes(s, p, notes, sizeof notes);
        rp_est r = nod ? rp_ratio_of_means(&p->thr, &nod->thr) : (rp_est){NAN, NAN, NAN, 0, 0};
        rp_est ex = rp_mean_est(&p->exposed);
        double nb, by;
        point_buckets(s, p, &nb, &by);
        if (p->exposed.n == 0) note_add(notes, sizeof notes, "no comm_exposed_s in iterations.csv");
        if (p == dflt) snprintf(vtext, sizeof vtext, "default");
        else if (vs[i].verdict != VB_VERDICT_NO_SAMPLES) rp_verdict_text(&vs[i], vtext, sizeof vtext);
        rp_table_add(t, "%s", var ? var : "?");
        rp_table_num(t, point_bucket(s, p));
        rp_table_add(t, "%s", point_noddp(s, p) ? "true" : "false");
        rp_table_add(t, "%d", p->thr.n);
        rp_table_num(t, point_noddp(s, p) ? NAN : nb);
        table_est(t, p->est);
        rp_table_num(t, vs[i].ratio);
        rp_table_num(t, vs[i].lo);
        rp_table_num(t, vs[i].hi);
        rp_table_add(t, "%s", vtext);
        table_est(t, r);
        rp_table_num(t, ex.mean * 1e3);
        rp_table_num(t, ex.lo * 1e3);
        rp_table_num(t, ex.hi * 1e3);
        rp_table_add(t, "%s", notes);
        vb_plot_point(st, i, p->est.mean, p->est.lo, p->est.hi, lab);
        vb_plot_point(se, i, ex.mean * 1e3, ex.lo * 1e3, ex.hi * 1e3, lab);
    }
    rp_para(d, "vs_default: the verdict rule's ratio against the default 25 MB (the ratio of the runs' median "
               "throughputs, run-to-run spread in its interval; verdict.h); vs_noddp = thr / thr_noddp (1 = "
               "communication fully hidden); buckets_per_step: DDP's all-reduce buckets in a timed FULL step "
               "(iterations.csv); exposed communication: comm_exposed_s per timed FULL step, averaged over ranks, "
               "mean with a t CI.");
    if (!nod) rp_para(d, "No noddp point: no no-communication ceiling to compare with.");
    rp_add_table(d, t);
    const int ngroups = same_bucket_groups(d, s, order, s->npts, same);
    if (best >= 0 && order[best] != dflt) {
        rp_point *bp = order[best];
        const rp_cmp *c = &vs[best];
        char vtext[320];
        rp_verdict_text(c, vtext, sizeof vtext);
        int di = -1;
        for (int i = 0; i < s->npts; i++)
            if (order[i] == dflt) di = i;
        const bool same_as_default = ngroups > 0 && di >= 0 && same[best] >= 0 && same[best] == same[di];
        rp_para(d, "Highest ratio to the default: %s (%g MB), %.4g x the default 25 MB [95%% CI %.4g, %.4g], p = %.3g: "
                   "%s%s.",
                sw_val(s, bp, VB_COL_VARIANT), point_bucket(s, bp), c->ratio, c->lo, c->hi, c->p, vtext,
                same_as_default ? " (it ran the same configuration as the default: noise)" : "");
        if (same_as_default)
            rp_summary(d, "DDP bucket size: no setting differs from the default 25 MB in effect (the highest ratio, "
                          "%g MB's %.3g x [95%% CI %.3g, %.3g], ran the default's configuration).",
                       point_bucket(s, bp), c->ratio, c->lo, c->hi);
        else
            rp_summary(d, "DDP bucket size with the highest ratio to the default 25 MB: %g MB, %.3g x [95%% CI %.3g, "
                          "%.3g]: %s.",
                       point_bucket(s, bp), c->ratio, c->lo, c->hi, vtext);
    } else if (best >= 0) {
        rp_para(d, "Highest ratio to the default: the default 25 MB itself (no other size above 1).");
        rp_summary(d, "DDP bucket size: no setting beat the default 25 MB (%.4g samples/s).", dflt->est.mean);
    } else {
        rp_point *bm = NULL;
        for (int i = 0; i < s->npts; i++)
            if (!point_noddp(s, &s->pts[i]) && (!bm || s->pts[i].est.mean > bm->est.mean)) bm = &s->pts[i];
        if (bm)
            rp_para(d, "Highest mean throughput: %s (%g MB, %.4g samples/s); no 25 MB point to test it against.",
                    sw_val(s, bm, VB_COL_VARIANT), point_bucket(s, bm), bm->est.mean);
    }
    free(order);
    free(same);
    free(vs);
    rp_figure(d, o, &pt);
    rp_figure(d, o, &pe);
    vb_plot_free(&pt);
    vb_plot_free(&pe);
    return t;
}

/* ---- layouts ---- */

static rp_table *layouts(rp_doc *d, rp_sweep *s, const rp_opts *o) {
    rp_heading(d, 1, "Tensor / context / data-parallel layouts");
    const char *cols[] = {"tp", "cp", "dp", "parallel_order", "samples", "thr_mean", "thr_ci_lo", "thr_ci_hi",
                          "peak_mem_mib_per_rank", "tp_mb_per_step", "tp_exposed_pct", "cp_mb_per_step",
                          "cp_exposed_pct", "dp_mb_per_step", "dp_exposed_pct", "notes"};
    rp_table *t = rp_table_new("layouts.csv", "Throughput, memory and communication per layout", 16, cols);
    vb_plot pt;
    vb_plot_init(&pt, "layouts_throughput", "Layouts: throughput per tp x cp x dp and order", "layout", thr_unit(s));
    pt.categorical = pt.boxes = true;
    vb_plot_series *st = vb_plot_series_add(&pt, "throughput", false);
    rp_point *best = NULL, *second = NULL;
    double best_key = NAN, second_key = NAN;
    bool cpdp = false, missing_ops = false;
    for (int i = 0; i < s->npts; i++) {
        rp_point *p = &s->pts[i];
        const rp_run *r0 = &s->runs[p->runs[0]];
        char notes[256], lab[128];
        point_notes(s, p, notes, sizeof notes);
        rp_group_comm g[RP_NGROUPS];
        bool have_ops = rp_comm_groups(r0, g) == 0;
        if (!have_ops) {
            missing_ops = true;
            note_add(notes, sizeof notes, "no ops.csv");
        }
        if (strcmp(r0->grad_reduce_group, "cp-dp") == 0) cpdp = true;
        double mem = 0;
        int nmem = 0;
        for (int k = 0; k < p->nruns; k++)
            if (isfinite(s->runs[p->runs[k]].peak_mem)) mem += s->runs[p->runs[k]].peak_mem, nmem++;
        const char *order = sw_val(s, p, "parallel_order");
        double tp = sw_num(s, p, "tensor_parallel"), cp = sw_num(s, p, "context_parallel");
        snprintf(lab, sizeof lab, "tp%g cp%g dp%g %s", tp, cp, point_dp(s, p), order ? order : "");
        rp_table_num(t, tp);
        rp_table_num(t, cp);
        rp_table_num(t, point_dp(s, p));
        rp_table_add(t, "%s", order ? order : "");
        rp_table_add(t, "%d", p->thr.n);
        table_est(t, p->est);
        rp_table_num(t, nmem ? mem / nmem / (1024.0 * 1024.0) : NAN);
        for (int k = RP_G_TP; k <= RP_G_DP; k++) {
            /* a group with no comm rows moved nothing; without ops.csv it is unknown */
            rp_table_num(t, !have_ops ? NAN : g[k].seen ? g[k].bytes_per_step / 1e6 : 0);
            rp_table_num(t, !have_ops ? NAN : g[k].seen ? g[k].exposed_share * 100 : 0);
        }
        rp_table_add(t, "%s", notes);
        vb_plot_point(st, i, p->est.mean, p->est.lo, p->est.hi, lab);
        /* ranked by the verdict's own statistic (each against the first
         * layout: the order of their run-median centres), so that "best" and
         * the ratio given for it are one statistic */
        const double key = i == 0 ? 1 : rp_compare(&s->pts[0].thr, s->pts[0].load, &p->thr, p->load).ratio;
        if (!isfinite(key)) continue;
        if (!best || key > best_key) {
            second = best, second_key = best_key;
            best = p, best_key = key;
        } else if (!second || key > second_key) {
            second = p, second_key = key;
        }
    }
    rp_para(d, "Communication per group from ops.csv (rank 0's timed FULL steps; every rank's with profiler_mode "
               "all), by the group each collective ran on: tp = allreduce_tp (Megatron row-parallel sums), "
               "cp = allgather_cp + reduce_scatter_cp (K/V exchange), dp = iallreduce_dp/_cpdp + allreduce_wait "
               "(DDP gradient buckets). Each row is time the training thread spent in the call (a post for iallreduce), "
               "so its share of the step is exposed time; DDP's overlapped part is in the per-run breakdown.%s%s",
            cpdp ? " With cp > 1 DDP reduces gradients over cp x dp together: the dp columns include cp's share of "
                   "the gradient all-reduce, which ops.csv cannot separate."
                 : "",
            missing_ops ? " Layouts without ops.csv have empty communication cells: unknown, not zero." : "");
    rp_add_table(d, t);
    if (best) {
        char lab[256];
        sw_label(s, best, NULL, lab, sizeof lab);
        if (second) {
            rp_cmp c = rp_compare(&second->thr, second->load, &best->thr, best->load);
            char lab2[256], vtext[320];
            sw_label(s, second, NULL, lab2, sizeof lab2);
            rp_verdict_text(&c, vtext, sizeof vtext);
            const bool told = c.verdict == VB_VERDICT_BETTER;
            rp_para(d, "%s layout: %s (mean %.4g samples/s); against the runner-up %s: ratio %.4g [95%% CI %.4g, %.4g], "
                       "p = %.3g: %s.",
                    told ? "Best" : "Highest-ranked", lab, best->est.mean, lab2, c.ratio, c.lo, c.hi, c.p, vtext);
            if (told)
                rp_summary(d, "Best layout: %s, %.3g x the runner-up %s [95%% CI %.3g, %.3g]: faster.", lab, c.ratio,
                           lab2, c.lo, c.hi);
            else
                rp_summary(d, "No best layout can be told: the highest-ranked, %s, is %.3g x the runner-up %s [95%% CI "
                              "%.3g, %.3g]: %s.",
                           lab, c.ratio, lab2, c.lo, c.hi, vtext);
        } else {
            rp_para(d, "Best layout: %s (the only one).", lab);
        }
    }
    rp_figure(d, o, &pt);
    vb_plot_free(&pt);
    return t;
}

/* ---- flags ---- */

/* The summary's lines per swept flag: every setting that is faster or
 * slower than the baseline, each with its own ratio and interval; a flag
 * with none gets one line with its highest ratio and that verdict, so no
 * significant result of the table is missing from the summary and "best"
 * is the verdict's own statistic. Variants are FLAG=VALUE. */
static void flag_findings(rp_doc *d, rp_sweep *s, const rp_point *base, const rp_cmp *cmps) {
    if (!base) return;
    bool *done = vb_calloc_check((size_t)s->npts + 1, sizeof *done);
    for (int i = 0; i < s->npts; i++) {
        if (done[i] || &s->pts[i] == base) continue;
        const char *var = sw_val(s, &s->pts[i], VB_COL_VARIANT);
        const char *eq = strchr(var, '=');
        const size_t nlen = eq ? (size_t)(eq - var) : strlen(var);
        int best = -1, nset = 0, ntold = 0;
        for (int j = i; j < s->npts; j++) {
            const char *vj = sw_val(s, &s->pts[j], VB_COL_VARIANT);
            if (&s->pts[j] == base || strncmp(vj, var, nlen) != 0 || (vj[nlen] != '=' && vj[nlen] != '\0')) continue;
            done[j] = true;
            nset++;
            const rp_cmp *c = &cmps[j];
            if (c->verdict == VB_VERDICT_BETTER || c->verdict == VB_VERDICT_WORSE) {
                rp_summary(d, "%s is %s than the baseline: throughput ratio %.3g [95%% CI %.3g, %.3g], p = %.2g.", vj,
                           c->verdict == VB_VERDICT_BETTER ? "faster" : "slower", c->ratio, c->lo, c->hi, c->p);
                ntold++;
            }
            if (isfinite(c->ratio) && (best < 0 || c->ratio > cmps[best].ratio)) best = j;
        }
        if (ntold || best < 0) continue;
        const rp_cmp *c = &cmps[best];
        char vtext[320];
        rp_verdict_text(c, vtext, sizeof vtext);
        rp_summary(d, "%.*s: no setting is faster or slower than the baseline; %s%s: throughput ratio %.3g [95%% CI %.3g, "
                      "%.3g], p = %.2g: %s.",
                   (int)nlen, var, nset > 1 ? "the highest ratio, " : "", sw_val(s, &s->pts[best], VB_COL_VARIANT), c->ratio,
                   c->lo, c->hi, c->p, vtext);
    }
    free(done);
}

/* A point's runs' median throughputs, space-separated in run order (the
 * numbers its verdict is made of), and their geometric mean (the ratio's
 * own term). */
static double run_medians(const rp_sweep *s, const rp_point *p, char *out, size_t n) {
    size_t k = 0;
    double logsum = 0;
    int m = 0;
    out[0] = '\0';
    for (int a = 0; a < p->nruns; a++) {
        const rp_samples *x = &s->runs[p->runs[a]].thr[s->type];
        if (x->n == 0) continue;
        const double med = vb_stats_median(x->v, x->n);
        if (med > 0) logsum += log(med), m++;
        const int w = snprintf(out + k, n - k, "%s%.4g", k ? " " : "", med);
        if (w > 0 && (size_t)w < n - k) k += (size_t)w;
    }
    return m ? exp(logsum / m) : NAN;
}

typedef struct {
    const char *name;
    rp_point *p;
} named_point;

static int cmp_variant_name(const void *a, const void *b) {
    return strcmp(((const named_point *)a)->name, ((const named_point *)b)->name);
}

static rp_table *flags(rp_doc *d, rp_sweep *s, const rp_opts *o) {
    rp_heading(d, 1, "Flags against the baseline");
    rp_point *base = NULL;
    for (int i = 0; i < s->npts; i++)
        if (strcmp(sw_val(s, &s->pts[i], VB_COL_VARIANT), "baseline") == 0) base = &s->pts[i];
    const char *cols[] = {"variant", "runs",  "samples", "run_medians", "centre",  "ratio",
                          "ratio_ci_lo", "ratio_ci_hi", "p_value", "verdict", "notes"};
    rp_table *t = rp_table_new("flags.csv", "Each variant against the baseline (the verdict rule's ratio)", 11, cols);
    if (!base) rp_para(d, "No completed baseline run: variants cannot be compared (throughput only).");
    rp_para(d, "Verdicts by the rule compare uses: %s. run_medians are each run's median throughput (samples/s), "
               "centre their geometric mean: ratio = a variant's centre / the baseline's.",
            vb_verdict_rule());
    vb_plot pr;
    vb_plot_init(&pr, "flags_ratio", "Flags: throughput ratio to the baseline (95% CI, log scale)", "variant",
                 "throughput ratio (variant / baseline)");
    /* a ratio's interval is symmetric on the log scale, as the rule makes it */
    pr.categorical = pr.logy = true;
    pr.hline = 1;
    snprintf(pr.hline_title, sizeof pr.hline_title, "baseline (ratio 1)");
    /* a legend entry per verdict, in its colour */
    static const struct {
        int verdict;
        const char *name;
    } k_legend[] = {{VB_VERDICT_BETTER, "faster"},
                    {VB_VERDICT_WORSE, "slower"},
                    {VB_VERDICT_EQUIVALENT, "equivalent"},
                    {VB_VERDICT_INCONCLUSIVE, "inconclusive"},
                    {-1, "baseline"}};
    vb_plot_series *sr[5];
    for (int k = 0; k < 5; k++) {
        sr[k] = vb_plot_series_add(&pr, k_legend[k].name, false);
        sr[k]->color = rp_verdict_rgb(k_legend[k].verdict);
    }
    /* the baseline first, then the variants by name (a flag's settings side
     * by side), whatever order the shuffled rounds ran them in */
    named_point *order = vb_calloc_check((size_t)s->npts + 1, sizeof *order);
    int no = 0;
    if (base) order[no++] = (named_point){"", base};
    for (int i = 0; i < s->npts; i++)
        if (&s->pts[i] != base) order[no++] = (named_point){sw_val(s, &s->pts[i], VB_COL_VARIANT), &s->pts[i]};
    qsort(order + (base ? 1 : 0), (size_t)(no - (base ? 1 : 0)), sizeof *order, cmp_variant_name);
    rp_cmp *cmps = vb_calloc_check((size_t)s->npts + 1, sizeof *cmps);
    for (int j = 0; j < no; j++) {
        rp_point *p = order[j].p;
        const int i = (int)(p - s->pts);
        const char *var = sw_val(s, p, VB_COL_VARIANT);
        char notes[256], meds[512];
        point_notes(s, p, notes, sizeof notes);
        const double centre = run_medians(s, p, meds, sizeof meds);
        rp_cmp c = {.ratio = NAN, .lo = NAN, .hi = NAN, .p = NAN, .verdict = VB_VERDICT_NO_SAMPLES};
        char verdict[320] = "";
        if (base && p != base) {
            c = rp_compare(&base->thr, base->load, &p->thr, p->load);
            rp_verdict_text(&c, verdict, sizeof verdict);
            if (base->fp_differs && !p->fp_differs) note_add(notes, sizeof notes, "baseline " NOTE_FP);
        } else if (p == base) {
            c.ratio = c.lo = c.hi = 1;
            snprintf(verdict, sizeof verdict, "baseline");
        }
        rp_table_add(t, "%s", var);
        rp_table_add(t, "%d", p->nruns);
        rp_table_add(t, "%d", p->thr.n);
        rp_table_add(t, "%s", meds);
        rp_table_num(t, centre);
        rp_table_num(t, c.ratio);
        rp_table_num(t, c.lo);
        rp_table_num(t, c.hi);
        rp_table_num(t, c.p);
        rp_table_add(t, "%s", verdict);
        rp_table_add(t, "%s", notes);
        if (base) {
            int k = 4;
            while (k > 0 && k_legend[k].verdict != (p == base ? -1 : (int)c.verdict)) k--;
            if (p != base && k_legend[k].verdict != (int)c.verdict) k = 3; /* no samples: grey */
            vb_plot_point(sr[k], j, c.ratio, c.lo, c.hi, var);
        }
        cmps[i] = c;
    }
    free(order);
    flag_findings(d, s, base, cmps);
    free(cmps);
    rp_add_table(d, t);
    rp_figure(d, o, &pr);
    vb_plot_free(&pr);
    return t;
}

/* ---- anything else: throughput against the swept keys ---- */

static rp_table *generic(rp_doc *d, rp_sweep *s, const rp_opts *o) {
    rp_heading(d, 1, "Throughput per point");
    int nc = s->nkeys + 6;
    const char **cols = vb_calloc_check((size_t)nc, sizeof *cols);
    for (int k = 0; k < s->nkeys; k++) cols[k] = s->keys[k];
    const char *tail[] = {"repeats", "samples", "thr_mean", "thr_ci_lo", "thr_ci_hi", "notes"};
    for (int k = 0; k < 6; k++) cols[s->nkeys + k] = tail[k];
    rp_table *t = rp_table_new("throughput.csv", "Throughput per point", nc, cols);
    free(cols);
    /* x axis: ranks when it varies, else the first varying key */
    const char *xkey = sw_key_varies(s, "ranks") ? "ranks" : NULL;
    for (int k = 0; k < s->nkeys && !xkey; k++)
        if (sw_key_varies(s, s->keys[k])) xkey = s->keys[k];
    bool numeric = xkey != NULL;
    for (int i = 0; i < s->npts && numeric; i++) numeric = isfinite(sw_num(s, &s->pts[i], xkey));
    char title[256];
    snprintf(title, sizeof title, "Throughput against %s", xkey ? xkey : "point");
    vb_plot pl;
    vb_plot_init(&pl, "throughput", title, xkey ? xkey : "point", thr_unit(s));
    pl.categorical = !numeric;
    for (int i = 0; i < s->npts; i++) {
        rp_point *p = &s->pts[i];
        char notes[256], lab[256], xl[256];
        point_notes(s, p, notes, sizeof notes);
        for (int k = 0; k < s->nkeys; k++) rp_table_add(t, "%s", sw_val(s, p, s->keys[k]));
        rp_table_add(t, "%d", p->nruns);
        rp_table_add(t, "%d", p->thr.n);
        table_est(t, p->est);
        rp_table_add(t, "%s", notes);
        sw_label(s, p, numeric ? xkey : NULL, lab, sizeof lab);
        const char *series_title = numeric ? lab : "throughput";
        vb_plot_series *ps = NULL;
        for (int k = 0; k < pl.ns; k++)
            if (strcmp(pl.s[k]->title, series_title) == 0) ps = pl.s[k];
        if (!ps) ps = vb_plot_series_add(&pl, series_title, false);
        snprintf(xl, sizeof xl, "%s", lab);
        vb_plot_point(ps, numeric ? sw_num(s, p, xkey) : i, p->est.mean, p->est.lo, p->est.hi, xl);
    }
    rp_add_table(d, t);
    if (s->npts >= 2)
        rp_figure(d, o, &pl);
    else
        rp_para(d, "One point: the table has its throughput, and no figure is drawn.");
    vb_plot_free(&pl);
    return t;
}

rp_table *rp_kind_analysis(rp_doc *d, rp_sweep *s, const rp_opts *o) {
    if (s->npts == 0) {
        rp_para(d, "No completed run: nothing to compare.");
        return NULL;
    }
    bool multi_ranks = sw_key_varies(s, "ranks");
    if (strcmp(s->kind, "weak_scaling") == 0 && multi_ranks) {
        rp_table *t = scaling(d, s, o, false);
        comm_overhead(d, s, o);
        return t;
    }
    if (strcmp(s->kind, "strong_scaling") == 0 && multi_ranks) return scaling(d, s, o, true);
    if (strcmp(s->kind, "ddp_buckets") == 0 && vb_csv_col(&s->idx, VB_COL_VARIANT) >= 0) return buckets(d, s, o);
    if (strcmp(s->kind, "flags") == 0 && vb_csv_col(&s->idx, VB_COL_VARIANT) >= 0) return flags(d, s, o);
    if (strcmp(s->kind, "layouts") == 0 && vb_csv_col(&s->idx, VB_COL_TENSOR_PARALLEL) >= 0) return layouts(d, s, o);
    if (strcmp(s->kind, "weak_scaling") == 0 || strcmp(s->kind, "strong_scaling") == 0)
        rp_para(d, "Only one rank count completed: no scaling to compute.");
    rp_table *t = generic(d, s, o);
    if (vb_csv_col(&s->idx, VB_COL_NODDP) >= 0) comm_overhead(d, s, o);
    return t;
}
