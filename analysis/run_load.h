/* run_load.h: the load a run's trials ran under, from its load.csv
 * (core/results/results.h, machine_load.h), as verdicts (verdict.h) and
 * the report's notes use it. One reader for compare, report and perf_ci.
 *
 * A trial's load is its largest rank's cpu_wait_share + steal_share: the
 * share of the thread time the machine took from the run. A run's load for
 * a trial type is the mean over its timed trials of that type. A run
 * without load.csv (recorded before it existed) has no load: NaN, and the
 * verdict falls back on the spread of its trials. */
#ifndef VB_ANALYSIS_RUN_LOAD_H
#define VB_ANALYSIS_RUN_LOAD_H

#include <stdbool.h>

typedef struct vb_run_load {
    bool recorded;      /* load.csv had rows of that trial type */
    int trials;         /* timed trials behind the figures */
    double share;       /* mean of each trial's largest rank's wait + steal share; NaN when not recorded */
    double max_share;   /* the largest trial's */
    double loadavg;     /* mean 1-minute load average before the trials */
    double cpus;        /* online CPUs */
    double nivcsw_per_s; /* involuntary context switches per second of trial, rank 0 */
} vb_run_load;

/* Reads run_dir/load.csv for the timed trials of trial_type ("FULL",
 * "SYNTHETIC", "IO"; NULL: every timed trial). A missing file gives
 * recorded false and NaNs; a malformed one exits 2 naming it, prefixed by
 * `who` ("compare", "report"): read as strictly as trials.csv (the schema's
 * header, every row this run's, no trial twice, each cell in its column's
 * range: shares in [0, 1], counts whole). */
void vb_run_load_read(const char *run_dir, const char *trial_type, const char *who, vb_run_load *out);

/* The mean share over runs that recorded one (NaN when none did). */
double vb_run_load_mean(const vb_run_load *loads, int n);

/* "load 4.2 on 2 CPUs, 31% of thread time lost" into buf; "load not recorded" without one. */
const char *vb_run_load_describe(const vb_run_load *l, char *buf, int n);

#endif
