/* history.h: the pieces of `vitbench history` (analysis.h) shared by
 * analysis/history*.c: a machine's history file read and checked, the
 * metrics it holds and which way each is better. Not a public API: the
 * command is the interface.
 *
 *   history.c         the command line, change points per metric, the table / JSON
 *   history_csv.c     reading and checking a history file, its times
 *   history_append.c  `history append`: a row from a gate set
 *   history_page.c    the report page: history.md / history.html, a trend figure per metric
 *
 * The file (core/results/results.h, VB_HISTORY_CSV_HEADER) is what Apache
 * Otava's CSV importer reads as it is: a header, then a row per gate run,
 * oldest first.
 */
#ifndef VB_ANALYSIS_HISTORY_H
#define VB_ANALYSIS_HISTORY_H

#include <stdbool.h>
#include <stddef.h>

#include "analysis/changepoint.h"
#include "core/util/common.h"

/* A metric column of the history and its direction. */
typedef struct vb_history_metric {
    const char *name;      /* the column: FULL_samples_per_s, instructions ... */
    bool higher_is_better; /* throughput: a drop is a regression; counts: a rise is */
    const char *unit;      /* for axes and tables */
} vb_history_metric;

#define VB_HISTORY_NMETRICS 5
/* in VB_HISTORY_CSV_HEADER's order */
extern const vb_history_metric vb_history_metrics[VB_HISTORY_NMETRICS];
/* the index of the metric named `name`, or -1 */
int vb_history_metric_index(const char *name);
/* Whether change c of metric m is a regression: a lower mean after it where
 * higher is better, a higher one where lower is (else an improvement). */
bool vb_history_is_regression(int m, const vb_cp *c);
/* "FULL_samples_per_s, SYNTHETIC_samples_per_s, ...": for messages */
const char *vb_history_metric_list(void);

/* A history file, checked (vb_history_read). */
typedef struct vb_history {
    char path[VB_PATH_MAX];
    int nrows;
    char **time;        /* each row's time as written */
    long long *epoch;   /* ... as seconds since 1970-01-01 UTC */
    char **commit;
    char *machine_key;  /* every row's (they agree) */
    bool has[VB_HISTORY_NMETRICS];       /* the file has the column */
    double *value[VB_HISTORY_NMETRICS];  /* nrows each (when has); NaN for an empty cell */
} vb_history;

/* Reads and checks the history at path; `cmd` starts the message ("history",
 * "history append"). Exits 2 with one line naming the file, the record and
 * the column when the file cannot be read or is not a history: a NUL byte,
 * text that is not UTF-8, malformed CSV, a last record without its line end
 * (cut short), a record with fewer or more fields than the header, no
 * time / commit / machine_key column or one named twice, a time that is not
 * ISO 8601, an empty commit, a machine_key that is empty or not letters and
 * digits, rows of two machines, a metric
 * cell that is neither empty nor a finite number >= 0. */
void vb_history_read(const char *path, vb_history *h, const char *cmd);
void vb_history_free(vb_history *h);

/* ISO 8601 date and time: YYYY-MM-DDTHH:MM:SS (a space for the T allowed),
 * optional fraction of a second, then Z, +HH:MM, +HHMM, -HH:MM ... or
 * nothing (UTC). False for anything else, an impossible date included. */
bool vb_history_parse_time(const char *s, long long *epoch);
/* epoch as YYYY-MM-DDTHH:MM:SSZ */
void vb_history_format_time(long long epoch, char *buf, size_t n);

/* One metric's change points, as the command reports them. */
typedef struct vb_history_change {
    int metric;      /* into vb_history_metrics */
    int row;         /* the history's row of the change point (0 = the first data row) */
    vb_cp cp;        /* indices into the metric's rows with a value (row_of maps them) */
    int on_level;    /* later points on the new level (vb_cp_points_on_level) */
    bool confirmed;  /* on_level >= 1 */
    bool regression; /* worse in the metric's direction */
} vb_history_change;

/* What the page draws: the history, the metrics analysed, their change
 * points and each metric's rows with a value (row_of[m][0..nvals[m])). */
typedef struct vb_history_result {
    const vb_history *h;
    int metrics[VB_HISTORY_NMETRICS], nmetrics;
    int *row_of[VB_HISTORY_NMETRICS];
    double *vals[VB_HISTORY_NMETRICS];
    int nvals[VB_HISTORY_NMETRICS];
    vb_history_change *changes;
    int nchanges;
    vb_cp_opts opts;
} vb_history_result;

/* 100 x (mean_after / mean_before - 1); NaN when mean_before is 0 */
double vb_history_change_percent(const vb_cp *c);
/* Whether c is confirmed, in words: "yes (19 of 19 later points on the new
 * level)", "no (0 of 2 ...)", "no: the newest point" */
void vb_history_confirmed_text(const vb_history_result *r, const vb_history_change *c, char *buf, size_t n);

/* The change points as a table (report.h's): metric, index, commit, time,
 * the means, the change in %, p, direction, confirmed; with csv (its file
 * name on the page) the standard deviations as well. */
struct rp_table;
struct rp_table *vb_history_changes_table(const vb_history_result *r, const char *csv);

/* history.md, history.html, changes.csv and a figure per metric into
 * out_dir (outdir.h's rule); figures only when plots (gnuplot found and
 * not --no_plots). Exits as rp_doc_write does when a file cannot be written. */
void vb_history_page(const vb_history_result *r, const char *out_dir, bool plots);

/* `vitbench history append ...` (history_append.c); argv[0] = "append" */
int vb_history_append_main(int argc, char **argv);

#endif
