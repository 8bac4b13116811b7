/* breakdown.h: timeline events in memory, and the time breakdown HTA and
 * `nsys stats` users read, per rank.
 *
 * Definitions (Holistic Trace Analysis's, over a rank's step windows):
 *   compute          union of the rank's compute intervals
 *   comm             union of its communication intervals, any lane
 *   comm_hidden      comm intersected with compute (overlapped)
 *   comm_exposed     comm minus compute
 *   memcpy, data_wait  unions of memcpy / io (data wait) intervals on the main lane
 *   idle             step time minus the union of every busy interval above
 *   overlap_pct      100 * comm_hidden / comm (NaN when there is no communication)
 * Every interval is clipped to the step windows (rows of kind "step"); a
 * timeline without step rows (an nsys trace) is one window from the first
 * start to the last end.
 *
 * Details the definitions leave open, as implemented:
 *   - windows are per rank: a rank's own step rows, merged where they touch;
 *     `steps` counts its step rows (1 for the single window of a timeline
 *     that has no step rows at all); step_s is the windows' total length
 *   - "compute" and "comm" are rows of those kinds on any lane, so a
 *     main-lane comm row (blocking) is in the comm union and exposed unless
 *     compute elsewhere covers it
 *   - memcpy counts main-lane rows and, for GPU traces, rows on stream<N>
 *     lanes (a copy engine is busy time); loader<k> lanes' io and memcpy are
 *     background reads, not data wait, and count nowhere
 *   - tiny negative results of subtraction (rounding) are reported as 0
 */
#ifndef VB_ANALYSIS_BREAKDOWN_H
#define VB_ANALYSIS_BREAKDOWN_H

#include <stddef.h>

#include "core/util/outdir.h"

typedef struct vb_tl_event {
    int rank;
    char lane[24];        /* main, comm, loader<k>; a stream for nsys traces */
    char kind[12];        /* trial, step, phase, compute, comm, memcpy, io, marker */
    char name[96];
    char trial_type[16];
    int trial_index, step, bucket;
    double start_s, dur_s, bytes, flops;
} vb_tl_event;

typedef struct vb_timeline {
    vb_tl_event *ev;
    int n;
    int nranks;           /* highest rank + 1 */
} vb_timeline;

/* Reads timeline.csv (core/prof/timeline.h). 0; -1 cannot open; -2 malformed
 * (err names the file, record and column). Columns are found by name and
 * extra columns ignored; all twelve are required, every numeric field must
 * be a finite number (rank, trial_index, step, bucket integers; rank >= 0,
 * dur_s >= 0). A lane, kind or trial_type longer than its field is
 * malformed; a longer name is cut (at a UTF-8 character boundary) to fit. */
int vb_timeline_read(const char *path, vb_timeline *t, char *err, size_t errn);
void vb_timeline_free(vb_timeline *t);

typedef struct vb_breakdown {
    int rank;
    int steps;
    double step_s, compute_s, comm_s, comm_hidden_s, comm_exposed_s, memcpy_s, data_wait_s, idle_s;
    double overlap_pct;
} vb_breakdown;

/* One entry per rank 0..nranks-1 (a rank without events has steps 0) into
 * a malloc'd array the caller frees; returns the count. */
int vb_breakdown_ranks(const vb_timeline *t, vb_breakdown **out);

/* The same breakdown fed one event at a time, without a timeline in memory
 * (an nsys import of a million-row trace): only the intervals each rank's
 * sums need are kept, 16 bytes each. kind and lane as in vb_tl_event. */
typedef struct vb_breakdown_acc vb_breakdown_acc;
vb_breakdown_acc *vb_breakdown_acc_create(void);
void vb_breakdown_acc_add(vb_breakdown_acc *a, int rank, const char *lane, const char *kind, double start_s,
                          double dur_s);
/* vb_breakdown_ranks' result over what was added; frees a. */
int vb_breakdown_acc_finish(vb_breakdown_acc *a, vb_breakdown **out);

/* Appends a copy of *e to t (growing t->ev; t starts zeroed) and raises
 * t->nranks to cover e->rank. For timelines built in memory (nsys import). */
void vb_timeline_add(vb_timeline *t, const vb_tl_event *e);

/* Writes breakdown.csv into dir (outdir.h: by rename, never through a link):
 *   rank,steps,step_s,compute_s,comm_s,comm_hidden_s,comm_exposed_s,memcpy_s,
 *   data_wait_s,idle_s,overlap_pct
 * overlap_pct is empty when NaN (no communication). Returns 0, or
 * vb_outdir_write's code with why (n bytes) filled. */
int vb_breakdown_write_csv(const vb_outdir *dir, const vb_breakdown *b, int n, char *why, size_t whyn);

/* ---- interval arithmetic the breakdown is made of ---- */

typedef struct vb_interval {
    double a, b;          /* [a, b), a <= b */
} vb_interval;

/* Sorts iv[0..n) by start and merges overlapping or touching intervals in
 * place; empty ones (b <= a) are dropped. Returns the new count. */
int vb_iv_union(vb_interval *iv, int n);
/* Intersection of two unions (sorted, disjoint: vb_iv_union's output) into
 * out, which must hold nx + ny intervals. Returns the count (a union). */
int vb_iv_intersect(const vb_interval *x, int nx, const vb_interval *y, int ny, vb_interval *out);
/* Total length of a union. */
double vb_iv_length(const vb_interval *iv, int n);

#endif
