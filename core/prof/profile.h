/* profile.h: per-op timers (ops.csv), timeline events and NVTX ranges.
 *
 * The model/optimizer/loader wrap each op call:
 *     vb_prof_token tok = vb_prof_begin(prof, VB_OP_ID(prof, "matmul_forward", VB_CAT_COMPUTE));
 *     ops->matmul_forward(ctx, ...);
 *     vb_prof_end(prof, tok, bytes);
 * vb_prof_begin stamps the op's start on the profiler's clock and returns a
 * token (the op and the stamp's slot); vb_prof_end stamps its end. Tokens may
 * nest and overlap: each holds its own slots. Durations are not computed at
 * vb_prof_end: the pair of stamps waits until the profiler is FLUSHED, after
 * the work has completed, and only then becomes an ops.csv sample and a
 * timeline event. That is what lets a device clock (events recorded into a
 * stream, read back with event_elapsed after a synchronize) sit behind the
 * same calls as the host clock, whose stamps are vb_now() readings and whose
 * resolution is a subtraction.
 *
 * Flushes happen at vb_prof_flush (the harness calls it after synchronizing,
 * e.g. at a step's end), when the slot ring is full, before ops.csv rows are
 * rendered or the profiler is reset, and when the attached timeline closes a
 * step or renders its rows. The trial type (vb_prof_set_trial_type), the
 * enabled state and the timeline's step are taken at vb_prof_end, so a
 * sample lands where it would have landed had it been resolved at once.
 *
 * vb_prof_begin also pushes an NVTX range of the op's name, vb_prof_end pops
 * it (NVTX ranges nest: overlapping tokens show as nested ranges there).
 * `prof` may be NULL (then nothing is recorded and the calls cost a branch).
 * Samples are only recorded while the profiler is enabled (timed trials).
 * Sample storage grows by doubling and is reused across trials, so a steady
 * state step allocates nothing.
 *
 * A profiler is used by one thread at a time (the training thread).
 */
#ifndef VB_PROFILE_H
#define VB_PROFILE_H

#include <stddef.h>
#include <stdio.h>
#include <stdbool.h>

typedef enum { VB_CAT_COMPUTE = 0, VB_CAT_COMM, VB_CAT_MEMCPY, VB_CAT_IO, VB_CAT_COUNT } vb_op_category;
const char *vb_cat_name(vb_op_category c); /* "compute", "comm", "memcpy", "io" */

typedef struct vb_profiler vb_profiler;

/* A profiler on the host clock (vb_prof_clock_host(4096)). */
vb_profiler *vb_prof_create(void);
void vb_prof_destroy(vb_profiler *p);
void vb_prof_set_enabled(vb_profiler *p, bool on);
void vb_prof_reset(vb_profiler *p);          /* drop samples, keep registrations */
/* Samples go to the accumulators of this trial type (a string that outlives
 * the profiler, e.g. "FULL"); ops.csv has one row per (trial type, op). */
void vb_prof_set_trial_type(vb_profiler *p, const char *trial_type);
/* While `t`'s window is open every timed op is also a timeline event (main
 * lane), on every rank, whether or not this profiler is enabled. The
 * profiler registers with t as an event source (timeline.h) so its held-back
 * ops reach t before a step closes; NULL detaches. Destroy the profiler (or
 * detach it) before destroying t. */
struct vb_tlrec;
void vb_prof_set_timeline(vb_profiler *p, struct vb_tlrec *t);

/* Registers (or finds) an op by name in the PROCESS-WIDE registry; returns a
 * stable id valid for every profiler. Thread-safe. */
int vb_prof_op(const char *name, vb_op_category cat);

/* An op in flight: its id and the clock slot holding its start stamp
 * (slot < 0: nothing is being timed, e.g. a disabled profiler outside the
 * timeline's window). A small value: pass it by value to vb_prof_end. */
typedef struct vb_prof_token {
    int id;
    int slot;
} vb_prof_token;

vb_prof_token vb_prof_begin(vb_profiler *p, int id);
void vb_prof_end(vb_profiler *p, vb_prof_token tok, size_t bytes);
/* As vb_prof_end, with the floating-point operations the call performed
 * (ops.csv flops and gflop_per_s; 0 = not reported). */
void vb_prof_end_flops(vb_profiler *p, vb_prof_token tok, size_t bytes, double flops);
/* As vb_prof_begin / vb_prof_end for an op enqueued on another context of
 * the clock's backend (data_loader_config dali's copies, on a copy stream):
 * a device clock stamps on that context's queue and waits for it too before
 * resolving; the host clock ignores ctx. */
struct vb_ctx;
vb_prof_token vb_prof_begin_on(vb_profiler *p, int id, struct vb_ctx *ctx);
void vb_prof_end_on(vb_profiler *p, vb_prof_token tok, size_t bytes, struct vb_ctx *ctx);
/* Resolves every ended op's duration (clock->sync first, then elapsed per
 * stamp pair) into ops.csv samples and timeline events, and frees their
 * slots. Ops still open keep theirs. Call after the work has completed. */
void vb_prof_flush(vb_profiler *p);

/* Where stamps come from. The clock owns a ring of `nslots` stamp slots; the
 * profiler hands out slots (record) and frees them after resolving (elapsed,
 * host_time), and never asks for a slot that was not recorded.
 *   host clock (vb_prof_clock_host): record reads vb_now() into the slot.
 *   device clock (CUDA): slots are pre-created events; record enqueues one on
 *     the stream, sync waits for the last one, elapsed is event_elapsed_ms,
 *     host_time maps a slot onto vb_now()'s time line through a reference
 *     event whose host time was taken at a synchronize. */
typedef struct vb_prof_clock {
    int nslots;
    void (*record)(struct vb_prof_clock *c, int slot);
    /* optional: record the stamp on another queue of the same backend; sync
     * then waits for that queue as well. NULL: record (the host clock). */
    void (*record_on)(struct vb_prof_clock *c, int slot, struct vb_ctx *ctx);
    /* every stamp recorded so far has completed (host: nothing to do) */
    void (*sync)(struct vb_prof_clock *c);
    /* seconds from the stamp in slot `start` to the one in `end` */
    double (*elapsed)(struct vb_prof_clock *c, int start, int end);
    /* the stamp's time on vb_now()'s clock (timeline.csv start_s) */
    double (*host_time)(struct vb_prof_clock *c, int slot);
    void (*destroy)(struct vb_prof_clock *c);
    void *impl;
} vb_prof_clock;
/* The host clock with `nslots` slots (at least 2). */
vb_prof_clock *vb_prof_clock_host(int nslots);
/* A clock on `ctx`'s events (core/prof/prof_clock_ctx.c): durations of the work
 * enqueued between begin and end, for backends whose ops return before their
 * work is done (vb_ops.host_memory == 0). The context must outlive it, and
 * so must every context it was asked to stamp on (record_on, at most 4). */
vb_prof_clock *vb_prof_clock_ctx(struct vb_ctx *ctx, int nslots);
/* Replaces p's clock (the profiler owns it from now on and destroys it);
 * resolves what the previous clock stamped first. NULL: a new host clock. */
void vb_prof_set_clock(vb_profiler *p, vb_prof_clock *clock);

/* Step time accumulated by the harness: share_of_step = total / step_seconds. */
void vb_prof_add_step_time(vb_profiler *p, double seconds);

/* Writes ops.csv atomically (tmp + rename); header:
 *   rank,trial_type,name,category,calls,bytes,flops,total_s,avg_s,min_s,max_s,
 *   median_s,share_of_step,gflop_per_s,gb_per_s
 * share_of_step = total / the trial type's summed step time; gflop_per_s and
 * gb_per_s = flops or bytes / total, empty when the op reports none.
 * Returns 0 on success. */
int vb_prof_write_csv(vb_profiler *p, const char *path, int rank);

/* This profiler's ops.csv rows (no header; rank column = `rank`) as a malloc'd
 * C string the caller frees; "" when p is NULL or nothing was recorded. Text,
 * so several ranks' rows can be gathered to one writer and concatenated. */
char *vb_prof_csv_rows(vb_profiler *p, int rank);
/* Writes ops.csv atomically as the header followed by `rows` (from
 * vb_prof_csv_rows, possibly several ranks' concatenated). Returns 0 on success. */
int vb_prof_write_csv_rows(const char *path, const char *rows);

/* Cache the id in a static per call site: VB_OP_ID(prof, "name", VB_CAT_COMPUTE). */
#define VB_OP_ID(prof, name, cat)                                    \
    ({                                                               \
        static int vb_op_id_ = -1;                                   \
        (void)(prof);                                                \
        if (vb_op_id_ < 0) vb_op_id_ = vb_prof_op((name), (cat));    \
        vb_op_id_;                                                   \
    })

/* ---- NVTX: header-only nvtx3 when VB_HAVE_NVTX, else nothing ---- */
#ifdef VB_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#define VB_NVTX_PUSH(name) nvtxRangePushA(name)
#define VB_NVTX_POP() nvtxRangePop()
#else
#define VB_NVTX_PUSH(name) ((void)(name))
#define VB_NVTX_POP() ((void)0)
#endif

#endif
