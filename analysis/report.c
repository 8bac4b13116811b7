/* report.c: `vitbench report PATH [--output_dir DIR] [--no_plots]` (analysis.h).
 *
 * PATH is a run directory (run.json / trials.csv / summary.csv) or a sweep
 * directory (index.csv). The report goes to PATH/report/ or DIR: report.md,
 * report.html (figures inlined as SVG: one file to mail or open anywhere),
 * every table as CSV, and per figure .dat + .gp + .png + .svg. The main table
 * is printed on stdout. Without gnuplot (or with --no_plots) only tables are
 * written, after one warning. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis.h"
#include "analysis/report.h"
#include "core/config/cli.h"
#include "analysis/rundir.h"
#include "core/results/results.h"

typedef struct args {
    const char *path;
    const char *out;
    bool no_plots;
} args;

static void report_path(void *ctx, const char *arg, const char *next) {
    (void)next;
    args *a = ctx;
    if (strncmp(arg, "--", 2) == 0) vb_die_input("report: unknown flag %s%s", arg, *vb_cli_hint(arg) ? vb_cli_hint(arg) : " (see vitbench report --help)");
    if (a->path) vb_die_input("report: one PATH only (got %s and %s)", a->path, arg);
    a->path = arg;
}

/* One table parses the flags and prints --help (core/config/cli.h). */
static args parse_args(int argc, char **argv) {
    args a = {0};
    const vb_cli_opt opts[] = {
        {.name = "output_dir", .kind = VB_CLI_STRING, .ptr = &a.out, .arg = "DIR",
         .help = "where the report goes (default PATH/report)"},
        {.name = "no_plots", .kind = VB_CLI_BOOL, .ptr = &a.no_plots,
         .help = "tables only, no gnuplot figures (also when gnuplot is not on PATH)"},
    };
    const vb_cli cli = {
        .cmd = "report",
        .usage = "vitbench report PATH [--output_dir DIR] [--no_plots]",
        .about = "Turns a run directory (run.json, trials.csv ...) or a sweep directory (index.csv) into\n"
                 "report.md and report.html: a summary first (what bounds FULL, scaling efficiency at the\n"
                 "largest size, communication overhead, each flag's best setting with its verdict, the model\n"
                 "beside the measurement, warnings), then contents, tables (also as CSV) and figures (PNG and\n"
                 "SVG, with the .dat and .gp that redraw them). The main table is printed on stdout. Verdicts\n"
                 "use compare's rule (vitbench compare --help). Nothing in the results tree is executed.",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
        .other = report_path,
        .ctx = &a,
        .other_help = "PATH: the run or sweep directory.",
    };
    vb_cli_parse(&cli, argc, argv);
    if (!a.path) vb_die_input("report: missing PATH (usage: vitbench report PATH [--output_dir DIR] [--no_plots])");
    return a;
}

void rp_figure(rp_doc *d, const rp_opts *o, const vb_plot *p) {
    bool any = false;
    for (int i = 0; i < p->ns; i++) any = any || (p->s[i]->n > 0 && !p->s[i]->ideal);
    if (!o->plots || !any) return;
    char err[VB_PATH_MAX + 256];
    if (vb_plot_render(&o->out, p, err, sizeof err) != 0) {
        rp_problem(d, "figure %s not drawn: %s", p->name, err);
        return;
    }
    rp_add_figure(d, p->title, p->name);
}

/* The run's own throughput per trial type. */
static rp_table *run_throughput(rp_doc *d, const rp_run *r, const rp_opts *o) {
    const char *cols[] = {"trial_type", "trials", "mean_samples_per_s", "ci_lo", "ci_hi", "std", "notes"};
    rp_table *t = rp_table_new("throughput.csv", "Throughput of the timed trials (rank 0)", 7, cols);
    vb_plot pl;
    vb_plot_init(&pl, "throughput", "Throughput per trial type (mean, 95% CI)", "trial type",
                 "throughput (samples/s, log scale)");
    /* log scale: the loader alone (IO) often runs 10-100x the step, which
     * would flatten SYNTHETIC and FULL on a linear axis */
    pl.categorical = pl.dots = pl.logy10 = true;
    vb_plot_series *s = vb_plot_series_add(&pl, "mean of timed trials", false);
    for (int k = 0; k < RP_NTYPES; k++) {
        const rp_samples *x = &r->thr[k];
        if (x->n == 0) continue;
        rp_est e = rp_mean_est(x);
        double var = 0;
        for (int i = 0; i < x->n; i++) var += (x->v[i] - e.mean) * (x->v[i] - e.mean);
        rp_table_add(t, "%s", vb_trial_kinds[k].name);
        rp_table_add(t, "%d", x->n);
        rp_table_num(t, e.mean);
        rp_table_num(t, e.lo);
        rp_table_num(t, e.hi);
        rp_table_num(t, sqrt(var / x->n));
        rp_table_add(t, "%s", x->n == 1 ? "one trial: no CI" : "");
        vb_plot_point(s, s->n, e.mean, e.lo, e.hi, vb_trial_kinds[k].name);
    }
    rp_para(d, "Mean of the timed trials' samples_per_s with a 95%% Student-t interval on the log scale (never "
               "below 0); std is benchy's population standard deviation.");
    rp_add_table(d, t);
    rp_figure(d, o, &pl);
    vb_plot_free(&pl);
    return t;
}

void rp_single_report(rp_doc *d, const char *path, const rp_opts *o) {
    rp_run r;
    memset(&r, 0, sizeof r);
    rp_run_load(&r, path, d);
    /* vitbench nsys's output: a profile (ops, timeline, breakdown) with no
     * run.json and no benchy trials, reported as such */
    char trials[VB_PATH_MAX];
    vb_dir_file(trials, sizeof trials, path, VB_TRIALS_CSV);
    const bool imported = !r.has_json && !vb_file_exists(trials);
    if (imported)
        rp_para(d, "Directory %s: an imported profile (vitbench nsys: ops.csv, timeline.csv, breakdown.csv), with no "
                   "run.json and no benchy trials; its profile follows.",
                path);
    else
        rp_para(d, "Run directory %s (status %s).", path, r.status);
    rp_run *const self[1] = {&r};
    rp_caption(d, self, 1, r.oversubscribed);
    if (!imported && strcmp(r.status, "completed") != 0)
        rp_warning(d, "the run's status is %s, not completed: its trials may be partial", r.status);
    rp_run *const one[1] = {&r};
    rp_run_warnings(d, one, 1, false);
    static const vb_trial_kind headline[VB_INDEX_HEADLINE_NKINDS] = {VB_INDEX_HEADLINE_KINDS};
    for (int h = 0; h < VB_INDEX_HEADLINE_NKINDS; h++)
        if (r.thr[headline[h]].n) {
            const int k = headline[h];
            rp_est e = rp_mean_est(&r.thr[k]);
            rp_summary(d, "%s throughput: %.4g samples/s [95%% CI %.4g, %.4g] over %d timed trial%s of one run (the "
                          "interval holds this run's trial-to-trial spread, not what differs between runs: repeat "
                          "the run for that).",
                       vb_trial_kinds[k].name, e.mean, e.lo, e.hi, r.thr[k].n, r.thr[k].n == 1 ? "" : "s");
            break;
        }
    rp_cause cause;
    rp_cause_of(one, 1, RP_FULL, &cause);
    rp_bound_finding(d, r.thr, "", &cause);
    rp_table *main_table = run_throughput(d, &r, o);
    if (rp_table_rows(main_table) > 0)
        rp_table_print(main_table, stdout);
    else if (!imported)
        rp_para(d, "No timed trials in trials.csv.");
    rp_heading(d, 1, "Provenance and profile");
    rp_run_sections(d, &r, o, "", false, 2, true);
    rp_run_free(&r);
}

int vb_report_main(int argc, char **argv) {
    args a = parse_args(argc, argv);
    if (!vb_dir_exists(a.path)) vb_die_input("report: %s: no such directory", a.path);
    const vb_dir_kind kind = vb_dir_kind_of(a.path);
    const bool sweep = kind == VB_DIR_SWEEP;
    if (kind == VB_DIR_NEITHER)
        vb_die_input("report: %s: neither a run directory (run.json, trials.csv; ops.csv of an nsys import) nor a "
                     "sweep directory (index.csv)",
                     a.path);
    rp_opts o = {.plots = !a.no_plots};
    /* the tree is --output_dir, else the run or sweep directory with the
     * report in its report/ (outdir.h: no link followed below the root) */
    vb_outdir_open_or_die(&o.out, a.out ? a.out : a.path, a.out ? "" : VB_REPORT_DIR, "report");
    vb_snprintf(o.out_dir, sizeof o.out_dir, "%s", o.out.path);
    if (o.plots && !vb_plot_gnuplot_available()) {
        vb_warn("report: gnuplot not found on PATH: writing tables only (install gnuplot for the figures)");
        o.plots = false;
    }
    rp_doc d = {0};
    char title[VB_PATH_MAX + 32];
    const char *base = strrchr(a.path, '/');
    base = base && base[1] ? base + 1 : a.path;
    vb_snprintf(title, sizeof title, "vitbench report: %s", base);
    if (sweep)
        rp_sweep_report(&d, a.path, &o);
    else
        rp_single_report(&d, a.path, &o);
    rp_doc_write(&d, &o.out, title);
    if (d.nproblems) vb_warn("report: %d data problem(s), listed at the end of report.md", d.nproblems);
    printf("vitbench: report written to %s/report.md and report.html\n", o.out_dir);
    rp_doc_free(&d);
    vb_outdir_close(&o.out);
    return 0;
}
