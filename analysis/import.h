/* import.h: what `vitbench import` (import.c) reads from the files of runs
 * vitbench did not make, shared by its readers and its writer:
 *   import_benchy.c  benchy's JSON and job logs (BENCHY:: lines, train.py's
 *                    epoch and loss lines)
 *   import_trace.c   PyTorch profiler traces (Chrome / Kineto JSON)
 *   import_write.c   one run in the results schema (core/results/results.h)
 *
 * Every reader returns 0, or -1 with one line in why (VB_IMP_WHY bytes)
 * naming the file and the field, having kept nothing: a directory import
 * reports that file and goes on with the others. Numbers a file prints are
 * kept exactly as it printed them (strtod of Python's repr is the double
 * Python held); what a file does not say is unknown (NaN, 0), never guessed.
 */
#ifndef VB_ANALYSIS_IMPORT_H
#define VB_ANALYSIS_IMPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/results/results.h"
#include "core/util/outdir.h"

#define VB_IMP_WHY 1536

typedef enum { VB_IMP_BENCHY_JSON, VB_IMP_LOG, VB_IMP_TRACE } vb_imp_format;
extern const char *const vb_imp_format_names[3]; /* "benchy JSON", "job log", "PyTorch profiler trace" */

/* A list of lines (notes, what is not known), owned. */
typedef struct vb_imp_list {
    char **v;
    int n;
} vb_imp_list;
void vb_imp_list_add(vb_imp_list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vb_imp_list_free(vb_imp_list *l);

/* One benchy trial (a trial label IO_0, FULL_WARMUP_1 ...). */
typedef struct vb_imp_trial {
    int kind;          /* vb_trial_kind */
    int index;
    bool warmup;
    double rate;       /* trial throughput, samples/s */
    double seconds;    /* trial_time; NaN unknown */
    int nbatches;      /* 0 unknown */
    int gbatch;        /* samples per iteration over all ranks; 0 unknown */
    double avg_iter;   /* Average Iteration Throughput; NaN unknown */
    double *iters;     /* iteration throughputs: every one (JSON's rates) or benchy's every report_freq-th (a log) */
    int niters;
    int line;          /* a log's line of its Trial Throughput; 0 in a JSON */
} vb_imp_trial;

/* One epoch of train.py's loop: its epoch line and the loss lines after it. */
typedef struct vb_imp_epoch {
    int epoch;
    double seconds, rate;             /* "Time taken for epoch N is X sec, avg Y samples/sec" */
    double train_loss, val_loss;      /* "Avg train loss=", "Avg val loss=" (NaN: absent or nan) */
    double val_seconds;               /* "Total validation time: T sec" */
    int line;
} vb_imp_epoch;

/* benchy's BENCHY::SUMMARY line of a kind: mean +/- std, 3 decimals. */
typedef struct vb_imp_summary {
    bool seen;
    double mean, std;
    int line;
} vb_imp_summary;

/* A profiler trace's per-op totals (one row of ops.csv) and events (rows of timeline.csv). */
typedef struct vb_imp_op {
    int rank;
    char *name;
    const char *category;  /* compute, comm, memcpy (GPU or a CPU-only trace's ops), cpu_op (host side of a GPU trace) */
    double calls, total_s, min_s, max_s, median_s, flops;
} vb_imp_op;

typedef struct vb_imp_event {
    int rank;
    char lane[24];     /* main (the thread of the profiler steps), thread<tid>, stream<N> */
    char kind[12];     /* step, compute, comm, memcpy */
    char *name;
    int step;          /* ProfilerStep#N's N; -1 outside the steps */
    double start_s, dur_s, flops;
} vb_imp_event;

typedef struct vb_imp_trace {
    int rank;          /* distributedInfo.rank, else 0 */
    int world;         /* distributedInfo.world_size; 0 unknown */
    bool gpu;          /* kernels, copies or memsets in it */
    int nsteps;        /* ProfilerStep#N annotations */
    double step_s;     /* their summed duration */
    vb_imp_op *ops;
    int nops;
    vb_imp_event *ev;
    int nev;
    int nkernels[3];   /* HTA's classes: compute, communication, memory */
} vb_imp_trace;

/* One input file, read. */
typedef struct vb_imp_file {
    char path[VB_PATH_MAX];
    vb_imp_format fmt;
    char label[256];          /* the run's name from the file's (import.c's rules) */
    /* benchy (JSON or log) */
    int nranks;               /* JSON's nranks or --ranks; 0 unknown */
    bool ranks_named;         /* --ranks FILE=N named this file (a plain --ranks N is for files that do not say) */
    vb_imp_trial *trials;
    int ntrials;
    vb_imp_summary summary[VB_TRIAL_NKINDS];
    char json_written[256];   /* a log: the file name of the JSON it says benchy wrote ("" none) */
    bool default_config;      /* a log: benchy said it used its default configuration */
    vb_imp_epoch *epochs;
    int nepochs;
    int nlines;               /* a log's lines */
    bool old_lines;           /* a log: benchy's lines from before trial throughputs (::Throughput, ::Avg Throughput) */
    vb_imp_list notes;        /* what reading it found: trials the log left unfinished ... */
    /* a trace */
    vb_imp_trace trace;
} vb_imp_file;

int vb_imp_read_benchy_json(const char *path, vb_imp_file *f, char *why);
int vb_imp_read_log(const char *path, vb_imp_file *f, char *why);
int vb_imp_read_trace(const char *path, vb_imp_file *f, char *why);
void vb_imp_file_free(vb_imp_file *f);

/* The whole file in memory (a gzip file decompressed, as torch's
 * tensorboard handler may write traces), NUL-terminated; NULL with why. */
char *vb_imp_slurp(const char *path, size_t *len, char *why);

/* "%.17g" of x into buf: the double exactly, for CSV cells; "" for NaN */
const char *vb_imp_num(char *buf, size_t n, double x);

/* One run to write: the files of one job, merged. */
typedef struct vb_imp_run {
    char name[256];           /* its directory's name under runs/ (or the run directory itself) */
    char point[256];          /* the point it measures: weak_scale_8 */
    char series[256];         /* weak_scale ("" when the label has no trailing number) */
    char point_value[64];     /* 8 ("" as above) */
    int repeat;               /* 0, 1 ... among the runs of its point */
    vb_imp_file *json, *log;  /* NULL when the job has none */
    vb_imp_file **traces;
    int ntraces;
    int nranks;               /* 0 unknown */
    vb_imp_trial *trials;     /* merged: the JSON's, the log's warm-ups (and all of a log's without a JSON) */
    int ntrials;
    vb_imp_epoch *epochs;     /* the log's */
    int nepochs;
    bool epochs_are_trials;   /* a log of train.py without benchy: its epochs are the FULL trials */
    int warmup_epochs;
    vb_imp_list notes;        /* what the cross-check found: run.json's "notes" and stdout's */
    vb_imp_list unknown;      /* what the files do not say: run.json's "unknown" */
    const char *command_line;
} vb_imp_run;

/* Merges the run's files into r->trials (checking the log against the JSON
 * where both hold a trial): 0, or -1 with why naming both files. */
int vb_imp_merge(vb_imp_run *r, char *why);

/* Mean and population standard deviation of the timed trials of a kind
 * (benchy's np.mean / np.std of trial_throughput); n 0 when none. */
void vb_imp_kind_stats(const vb_imp_run *r, int kind, double *mean, double *std, int *n);

/* Writes run r into the open directory d: run.json, trials.csv,
 * summary.csv, iterations.csv (per-iteration rates), train_log.csv and
 * validation.csv (epoch and loss lines), ops.csv and timeline.csv (traces).
 * Exits as outdir.h's writers do when the disk refuses. */
void vb_imp_write_run(const vb_outdir *d, const vb_imp_run *r);

#endif
