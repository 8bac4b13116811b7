/* report_sweep.h: a loaded sweep directory, shared by report_sweep.c (which
 * loads it and writes the generic sections) and report_kinds.c (the analysis
 * each kind of sweep calls for). */
#ifndef VB_ANALYSIS_REPORT_SWEEP_H
#define VB_ANALYSIS_REPORT_SWEEP_H

#include "analysis/report.h"

/* Completed runs with equal swept keys: the repeats of one measurement. */
typedef struct rp_point {
    int row;            /* index.csv row of its first run: where its key values are read */
    int *runs, nruns;   /* indices into rp_sweep.runs */
    rp_samples thr;     /* pooled throughput samples (the sweep's trial type) */
    rp_samples exposed; /* pooled exposed comm per FULL step */
    rp_est est;         /* mean throughput with its t CI (runs as the unit when it has two or more) */
    double load;        /* mean load share of its runs' timed trials (load.csv); NaN: not recorded */
    double ranks;
    bool fp_differs;    /* a run's fingerprint is not comparable with the sweep's reference */
} rp_point;

typedef struct rp_sweep {
    char path[VB_PATH_MAX];
    char name[256];
    char kind[32], kind_why[160];
    vb_csv idx;
    const char **keys;  /* swept columns of index.csv, in order */
    int nkeys;
    rp_run *runs;       /* one per index.csv row */
    int nruns;
    rp_point *pts;
    int npts;
    int planned;        /* runs the sweep planned (sweep.json's nruns); 0 when unknown */
    int type;           /* RP_FULL normally; -1 when no run has timed trials */
    bool fp_differs;
} rp_sweep;

/* Value of swept key `key` at point p; NULL when the column is absent. */
const char *sw_val(const rp_sweep *s, const rp_point *p, const char *key);
/* ... as a number; NaN when absent or not numeric. */
double sw_num(const rp_sweep *s, const rp_point *p, const char *key);
/* true when the key takes more than one value over the points. */
bool sw_key_varies(const rp_sweep *s, const char *key);
/* "k=v k=v" over the varying keys except `skip`; "all" when none. */
void sw_label(const rp_sweep *s, const rp_point *p, const char *skip, char *out, size_t n);

/* The kind's analysis (tables, figures, verdicts) into d; returns its main
 * table (owned by d) for the terminal, or NULL. */
rp_table *rp_kind_analysis(rp_doc *d, rp_sweep *s, const rp_opts *o);

#endif
