/* report.h: the pieces of `vitbench report` (analysis.h) shared by
 * analysis/report*.c. Not a public API: the command is the interface.
 *
 *   report.c        command line, run-or-sweep dispatch, writing the outputs
 *   report_doc.c    tables and the document (blocks rendered to Markdown,
 *                   self-contained HTML with inline SVG, CSV, the terminal)
 *   report_load.c   reading a run directory and a sweep's index.csv/sweep.json
 *   report_stats.c  the estimates every figure is: mean with a t CI, ratios
 *                   of means with a delta-method CI, median ratios with a
 *                   bootstrap CI and a Mann-Whitney p-value
 *   report_sweep.c  grouping runs into points, the sweep kind, its analyses
 *   report_run.c    per-run sections: provenance, HTA breakdown, stragglers, top ops
 * plot.h renders figures with gnuplot.
 *
 * Failure policy: a malformed file (CSV, JSON) exits 2 naming it; a missing
 * file is a line in the report's "Data problems" section, never a guess.
 */
#ifndef VB_ANALYSIS_REPORT_H
#define VB_ANALYSIS_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "analysis/advice.h"
#include "analysis/csv.h"
#include "analysis/plot.h"
#include "analysis/run_load.h"
#include "analysis/verdict.h"
#include "core/results/results.h"
#include "core/util/common.h"

/* ---- growable list of doubles, each tagged with the run it came from ---- */
typedef struct rp_samples {
    double *v;
    int *run; /* run of each value (0 unless pushed with one) */
    int n, cap;
} rp_samples;
void rp_push(rp_samples *s, double x);
void rp_push_run(rp_samples *s, double x, int run);
/* appends src's values, each tagged `run` */
void rp_samples_append_run(rp_samples *dst, const rp_samples *src, int run);
/* distinct runs among the values */
int rp_samples_runs(const rp_samples *s);
void rp_samples_free(rp_samples *s);

/* ---- estimates (report_stats.c) ----
 * The unit is the run wherever a side has two or more (verdict.h): a
 * point's samples are then its runs' means, whose spread holds what differs
 * between runs; with one run, its trials, whose spread does not. */
typedef struct rp_est {
    double mean, lo, hi; /* lo/hi NaN when fewer than two samples */
    int n;
    int runs;            /* runs behind it (the fewest of a ratio's two sides) */
} rp_est;
/* mean and its 95% interval: Student t on the log scale (delta method:
 * mean * exp(+-t * se / mean)), never below 0; for samples that can be 0
 * (exposed communication) the linear t interval cut at 0. */
rp_est rp_mean_est(const rp_samples *s);
/* mean(num) / mean(den), 95% CI by the delta method on the log scale
 * (first-order Taylor of log of the ratio, Welch-Satterthwaite degrees of
 * freedom, t quantile): ratio * exp(+-t * sqrt(relative variance)), never
 * below 0. */
rp_est rp_ratio_of_means(const rp_samples *num, const rp_samples *den);
/* new against base by verdict.h's rule (higher throughput is better): the
 * one rule compare uses; loads are the sides' load shares (NaN: unknown). */
typedef struct rp_cmp {
    double ratio, lo, hi, p;
    int nbase, nnew;
    vb_verdict_kind verdict;
    vb_verdict v; /* everything the rule worked out */
} rp_cmp;
rp_cmp rp_compare(const rp_samples *base, double base_load, const rp_samples *new_, double new_load);
/* "faster" / "slower" / "equivalent" / "inconclusive: <why>" into buf */
const char *rp_verdict_text(const rp_cmp *c, char *buf, size_t n);
/* a verdict's colour in figures (green faster, vermillion slower, blue
 * equivalent, grey inconclusive); -1 for the baseline itself (black) */
unsigned rp_verdict_rgb(int verdict);
/* true when the interval [lo, hi] is wider than |effect| (or unknown). */
bool rp_spread_exceeds(double effect, double lo, double hi);

/* ---- tables and the document (report_doc.c) ---- */
typedef struct rp_table {
    char *csv;    /* file name under the report directory, NULL = not written */
    char *title;
    int ncols;
    char **cols;
    int ncells, cap;
    char **cells; /* row-major */
} rp_table;
rp_table *rp_table_new(const char *csv, const char *title, int ncols, const char *const *cols);
/* Appends the next cell (row-major). */
void rp_table_add(rp_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends a number: %.6g, "" for NaN (unknown stays visibly empty). */
void rp_table_num(rp_table *t, double x);
int rp_table_rows(const rp_table *t);
const char *rp_table_cell(const rp_table *t, int row, int col);
void rp_table_free(rp_table *t);
/* Aligned plain-text rendering (the terminal's main table). */
void rp_table_print(const rp_table *t, FILE *f);

typedef enum { RP_HEADING, RP_PARA, RP_TABLE, RP_FIGURE, RP_PRE, RP_LINK } rp_block_kind;
typedef struct rp_block {
    rp_block_kind kind;
    int level;       /* heading level 1..4 */
    char *text;      /* heading / paragraph / pre text; figure title; link text */
    char *ref;       /* figure base name under the report dir; link target */
    char *caption;   /* figure: what it was measured on (config, machine, oversubscription) */
    rp_table *table; /* owned */
} rp_block;

typedef struct rp_doc {
    rp_block *b;
    int n, cap;
    char **problems; /* "Data problems" lines */
    int nproblems;
    /* the answers the report starts with, before any table: findings (each
     * number with its interval) and warnings that qualify them */
    char **summary;
    int nsummary;
    char **warnings;
    int nwarnings;
    char caption[768]; /* put under every figure added from now on */
} rp_doc;

void rp_heading(rp_doc *d, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void rp_para(rp_doc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rp_pre(rp_doc *d, const char *text);
void rp_link(rp_doc *d, const char *text, const char *href);
/* Takes ownership of t. */
void rp_add_table(rp_doc *d, rp_table *t);
void rp_add_figure(rp_doc *d, const char *title, const char *base);
void rp_problem(rp_doc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a finding for the summary at the top (prose, values escaped on output) */
void rp_summary(rp_doc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a warning for the summary at the top */
void rp_warning(rp_doc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rp_doc_free(rp_doc *d);

/* Writes report.md, report.html (figures' SVG inlined from dir) and every
 * table's CSV into dir (outdir.h: by rename, into real directories only).
 * Exits naming the file when one cannot be written: 2 when the tree holds a
 * link or a file where a directory goes, 1 when the OS refuses. */
void rp_doc_write(const rp_doc *d, const vb_outdir *dir, const char *title);
/* The same document under other names (history.md / history.html), with
 * `cmd` starting a failure's line. */
void rp_doc_write_as(const rp_doc *d, const vb_outdir *dir, const char *title, const char *md, const char *html,
                     const char *cmd);

/* ---- one run directory (report_load.c) ---- */
/* the trial kinds, numbered as results.h's vb_trial_kind */
enum {
    RP_IO = VB_TRIAL_IO,
    RP_SYNTHETIC = VB_TRIAL_SYNTHETIC,
    RP_FULL = VB_TRIAL_FULL,
    RP_VALIDATION = VB_TRIAL_VALIDATION,
    RP_NTYPES = VB_TRIAL_NKINDS
};

typedef struct rp_run {
    char dir[VB_PATH_MAX]; /* as found: PATH or SWEEP/runs/<name> */
    char name[256];        /* directory's base name */
    char status[32];       /* index.csv status, else run.json's, else "unknown" */
    char exit_code[16];
    char failure[48];      /* a run that did not complete: its class (index.csv failure, else from exit_code) */
    char last_line[256];   /* ... and the line of its log that says why */
    bool has_json;
    /* run.json */
    char git_commit[64], git_dirty[16], host[128], backend[32], config[64];
    char machine_key[40], cpu_model[192], affinity_cores[16], omp_threads[16];
    char blas[192], blas_coretype[64], compiler[192], gpu_name[128];
    char cpu_vector[16], blas_vector[16]; /* fingerprint: widest SIMD of the CPU / of the BLAS kernels */
    char blas_rule[16], blas_library_core[64]; /* fingerprint: the rule that chose the kernels ("" before it) */
    char versions[768];
    char *command_line;
    char grad_reduce_group[16];
    bool oversubscribed;   /* run.json threads.oversubscribed: more threads than cores on a node */
    int threads_team;      /* run.json threads.team: OpenMP threads a rank was given (0: not recorded) */
    int threads_used;      /* threads.per_rank: what it ran (fewer under thread_policy adapt on a busy node) */
    double probe_wait;     /* threads.probe_wait_share: the start's probe; NaN when none */
    /* run.json "imported" (vitbench import): the program and files it came
     * from, and what they do not say; "" for vitbench's own runs */
    char imported[160];
    char *imported_from, *imported_unknown;
    /* summary.csv (NaN / "" when absent) */
    double ranks, tp, cp, dp, local_batch, global_batch, peak_mem, tflops;
    char noddp[8], bucket_cap_mb[32], parallel_order[32];
    /* trials.csv: timed rank-0 samples_per_s per trial type */
    rp_samples thr[RP_NTYPES];
    /* iterations.csv: per timed FULL step, comm_exposed_s averaged over ranks */
    rp_samples exposed;
    /* iterations.csv, rank 0's timed FULL steps: DDP bucket all-reduces and
     * their bytes per step (medians; NaN without the columns or steps) */
    double buckets_per_step, allreduce_bytes_per_step;
    /* load.csv: the load each trial type's timed trials ran under */
    vb_run_load load[RP_NTYPES];
} rp_run;

/* Reads what exists of a run directory; a malformed file exits 2 naming it,
 * a missing one becomes a problem line in d. */
void rp_run_load(rp_run *r, const char *dir, rp_doc *d);
void rp_run_free(rp_run *r);
/* Reads dir/name: 0, or -1 when it cannot be opened; malformed exits 2 naming it. */
int rp_read_csv(const char *dir, const char *name, vb_csv *t);
/* warmup cell: "1" / "true" */
bool rp_is_warmup(const char *s);
/* Relative path from directory `from` to `to` (both must exist); falls back
 * to `to` itself when either cannot be resolved. */
void rp_relpath(const char *from, const char *to, char *out, size_t n);

/* ---- the summary's findings about runs (report_run.c) ---- */
/* What bounds FULL, benchy's reasoning on the three trial types of one run
 * or one point (`where` names it): the step (FULL near SYNTHETIC), the
 * loader (IO no faster than SYNTHETIC), or their overlap; no answer when
 * FULL beats SYNTHETIC or IO beyond its interval (an anomaly, with what
 * `cause`, when not NULL, shows of the runs and what to rerun with). */
void rp_bound_finding(rp_doc *d, const rp_samples thr[RP_NTYPES], const char *where, const vb_cause *cause);
/* Warnings about the runs behind the numbers: oversubscribed, busy (trials
 * spread more than compare's noise limit, or load), fewer threads than
 * given, and what to rerun with (phrased for a sweep or for one run). */
void rp_run_warnings(rp_doc *d, rp_run *const *runs, int n, bool sweep);
/* A figure caption: config and machine of the first run that has them, and
 * the threads and cores a rank of every run had (one phrase when they all
 * agree, else one per rank count: "1 rank: 2 threads on 2 cores; 2 ranks: 1
 * thread on 1 core"), and whether any was oversubscribed. */
void rp_caption(rp_doc *d, rp_run *const *runs, int n, bool any_oversubscribed);

/* ---- what stands behind a result the report cannot trust (advice.h) ---- */
typedef vb_cause rp_cause;
/* What runs[0..n) show for trial kind `type` (report_run.c). */
void rp_cause_of(rp_run *const *runs, int n, int type, rp_cause *c);

/* ---- per-run sections (report_run.c) ---- */
/* Communication per parallel group from ops.csv (FULL rows when the file has
 * trial_type), averaged over the ranks it holds. */
enum { RP_G_TP, RP_G_CP, RP_G_DP, RP_G_OTHER, RP_NGROUPS };
extern const char *const rp_group_name[RP_NGROUPS];
typedef struct rp_group_comm {
    bool seen;             /* the group had at least one comm row */
    double bytes_per_step; /* NaN when the step count is unknown */
    double exposed_share;  /* summed share_of_step of its (blocking) comm ops */
} rp_group_comm;
int rp_comm_group_of(const char *op_name);
/* 0, or -1 when ops.csv is missing. */
int rp_comm_groups(const rp_run *r, rp_group_comm g[RP_NGROUPS]);
/* Provenance, HTA breakdown, stragglers, top ops of run r into d; the tables'
 * CSVs are named with `prefix` ("" for a run report, "runs/<name>/" in a
 * sweep's); `compact` limits the op list. o->out_dir is the report
 * directory. With `timeline_figure`, one timed FULL step of every rank as
 * lanes (compute, communication, memcpy, data wait) from timeline.csv: a
 * figure (SVG in the HTML, PNG for slides) for machines without a trace
 * viewer. */
struct rp_opts;
void rp_run_sections(rp_doc *d, const rp_run *r, const struct rp_opts *o, const char *prefix, bool compact,
                     int heading_level, bool timeline_figure);
/* Provenance lines (config, commit, fingerprint, versions) of one run. */
void rp_run_provenance(rp_doc *d, const rp_run *r);

/* ---- a sweep directory (report_sweep.c) ---- */
typedef struct rp_opts {
    vb_outdir out;              /* the report's directory, open (outdir.h) */
    char out_dir[VB_PATH_MAX];  /* its path, for relative links */
    bool plots; /* gnuplot found and not --no_plots */
} rp_opts;

/* The whole sweep report into d; the main table is printed to stdout. */
void rp_sweep_report(rp_doc *d, const char *path, const rp_opts *o);
/* The run report into d (a single run directory). */
void rp_single_report(rp_doc *d, const char *path, const rp_opts *o);

/* Renders plot p when plots are on and adds it to d as a figure; otherwise
 * adds nothing (the tables carry the numbers). */
void rp_figure(rp_doc *d, const rp_opts *o, const vb_plot *p);

#endif
