/* timeline.h: every event of a bounded window of timed steps (timeline.csv).
 *
 * For the first `profile_steps` timed FULL steps of a run (config key
 * profile_steps, default 5; 0 turns the timeline off) each rank records
 * every op, communication call, data wait and copy with its start and
 * duration, per lane, into preallocated per-lane buffers (no allocation and
 * no lock on the hot path; events past a lane's capacity are counted as
 * dropped, never written over others). Rank 0 gathers every rank's events and
 * writes timeline.csv after the window closes.
 *
 * timeline.csv, one row per event, rows grouped by rank then lane, each
 * lane's rows in start order:
 *   rank,lane,kind,name,trial_type,trial_index,step,start_s,dur_s,bytes,flops,bucket
 *   lane    main (the training thread), comm (DDP gradient allreduces in flight:
 *           from the non-blocking post to the test or wait that saw them
 *           finish, i.e. the CPU's stand-in for a NCCL stream), loader<k>
 *           (data-loader worker k's reads), stream<N> (what CUDA stream N
 *           executed, from CUPTI's records: see vb_tlrec_add_stream)
 *   kind    trial | step | phase (forward, backward, optimizer, data) |
 *           compute | comm | memcpy | io | marker (an instant, dur_s 0:
 *           bucket_ready, where a DDP bucket's last gradient arrived)
 *   name    op name as in ops.csv (matmul_forward_qkv, allreduce, h2d, ...),
 *           the trial label (FULL_0), "step", or the phase; on a stream<N>
 *           lane the kernel's demangled name as nsys prints it, or
 *           "[CUDA memcpy Host-to-Device]", "[CUDA memset]", ...
 *   trial_type, trial_index   the trial the event belongs to (FULL, 0)
 *   step    step index within the trial; -1 for the trial row
 *   start_s seconds from the run's time origin: a barrier every rank leaves
 *           together before the first trial, so one node's ranks share a clock
 *   dur_s   seconds (0 for markers)
 *   bytes, flops   what the event moved / computed (0 when not applicable)
 *   bucket  DDP bucket index for allreduce rows and bucket_ready markers, else -1
 * Nesting on the main lane: trial > step > phase > op; communication that
 * blocks the training thread (a DDP wait, a tp/cp collective) is a main-lane
 * comm row, i.e. exposed communication. Lanes are ordered main, comm,
 * loader<k> by k, then stream<N> by N.
 */
#ifndef VB_TIMELINE_H
#define VB_TIMELINE_H

#include <stdbool.h>

/* Lanes: 0 main, 1 comm, 2 + k loader worker k. */
enum { VB_TL_MAIN = 0, VB_TL_COMM = 1, VB_TL_LOADER0 = 2 };

typedef enum {
    VB_TLK_TRIAL = 0,
    VB_TLK_STEP,
    VB_TLK_PHASE,
    VB_TLK_COMPUTE,
    VB_TLK_COMM,
    VB_TLK_MEMCPY,
    VB_TLK_IO,
    VB_TLK_MARKER,
} vb_tl_kind;

typedef struct vb_tlrec vb_tlrec;

/* A recorder for `steps` steps with `nloaders` loader lanes; buffers are
 * sized for `events_per_step` main-lane events a step (more are dropped and
 * counted). */
vb_tlrec *vb_tlrec_create(int steps, int nloaders, int events_per_step);
void vb_tlrec_destroy(vb_tlrec *t);
/* The run's time origin (vb_now() after the start barrier). */
void vb_tlrec_set_origin(vb_tlrec *t, double origin);
/* Opens the window for one step: events are recorded until end_step (which
 * first has every source add its stamped events). Returns
 * false (recording nothing) once `steps` steps were recorded. trial_type must
 * be a string that outlives the recorder. */
bool vb_tlrec_begin_step(vb_tlrec *t, const char *trial_type, int trial_index, int step);
void vb_tlrec_end_step(vb_tlrec *t);
bool vb_tlrec_active(const vb_tlrec *t);
int vb_tlrec_steps_done(const vb_tlrec *t);
/* Records one event (start = absolute vb_now() time). `name` must outlive the
 * recorder (an op registry name or a literal). No-op when t is NULL or the
 * window is closed. Each lane has one writer thread. */
void vb_tlrec_add(vb_tlrec *t, int lane, vb_tl_kind kind, const char *name, double start, double dur, double bytes,
                  double flops, int bucket);
/* Where in the window an event happened: the open step's trial and index.
 * A recorder that resolves its times later (the profiler, at a flush) takes
 * the stamp when the event ends and adds the event with it afterwards. */
typedef struct vb_tl_stamp {
    const char *trial_type;
    int trial_index, step;
} vb_tl_stamp;
/* Fills *s and returns true while a step is open; false (s untouched) when t
 * is NULL or the window is closed. */
bool vb_tlrec_stamp(const vb_tlrec *t, vb_tl_stamp *s);
/* vb_tlrec_add at a stamped position: recorded even when the step has closed
 * since (same lane rules and capacity). */
void vb_tlrec_add_stamped(vb_tlrec *t, const vb_tl_stamp *s, int lane, vb_tl_kind kind, const char *name,
                          double start, double dur, double bytes, double flops, int bucket);
/* A source of stamped events not yet added (a profiler with unresolved op
 * times): `flush(ctx)` is called on the training thread before a step closes
 * and before the events are counted or rendered, so it adds them in time.
 * At most 8 sources; adding one twice keeps one. remove_source before the
 * source goes away (the profiler does it when detached or destroyed). */
void vb_tlrec_add_source(vb_tlrec *t, void (*flush)(void *ctx), void *ctx);
void vb_tlrec_remove_source(vb_tlrec *t, void *ctx);
/* GPU activities: one lane per CUDA stream, "stream<N>" with N the
 * stream's id as CUPTI and nsys number them, created on first use (at most
 * VB_TL_MAX_STREAMS lanes, each sized for twice the main lane's events).
 * They are added after the fact, by the training thread once the device
 * has finished, with `start` on vb_now()'s clock: an activity joins the
 * window step whose step row (main lane, kind step) contains its start and
 * takes that step's trial and index. kind is compute, comm (NCCL's kernels)
 * or memcpy (copies and memsets). `name` must outlive the recorder.
 * Returns 1 when added; 0 when it started in no recorded step (before the
 * window, between two trials, after the window: not the window's); -1 when
 * dropped (its lane is full, or its stream would be one lane too many),
 * which vb_tlrec_dropped counts. */
enum { VB_TL_MAX_STREAMS = 16 };
int vb_tlrec_add_stream(vb_tlrec *t, unsigned stream, vb_tl_kind kind, const char *name, double start, double dur,
                        double bytes);
/* A trial row (kind trial) for the trial that held window steps. */
void vb_tlrec_add_trial(vb_tlrec *t, const char *trial_type, int trial_index, double start, double dur);
long vb_tlrec_events(const vb_tlrec *t);
long vb_tlrec_dropped(const vb_tlrec *t);
/* This rank's rows (no header) as a malloc'd string; "" when NULL. */
char *vb_tlrec_csv_rows(const vb_tlrec *t, int rank);
/* Writes timeline.csv atomically: the header, then `rows`. 0 on success. */
int vb_tlrec_write_csv(const char *path, const char *rows);

#endif
