/* profile.h: per-op CPU timers (ops.csv) and NVTX ranges.
 *
 * The model/optimizer/loader wrap each op call:
 *     double t0 = vb_prof_begin(prof, VB_OP_ID(prof, "matmul_forward", VB_CAT_COMPUTE));
 *     ops->matmul_forward(...);
 *     vb_prof_end(prof, id, t0, bytes);
 * vb_prof_begin also pushes an NVTX range of the op's name, vb_prof_end pops it.
 * `prof` may be NULL (then nothing is recorded and the calls cost a branch).
 * Samples are only recorded while the profiler is enabled (timed trials).
 * Sample storage grows by doubling and is reused across trials, so a steady
 * state step allocates nothing. The CUDA backend will swap the clock for CUPTI
 * activity records behind the same interface.
 */
#ifndef VB_PROFILE_H
#define VB_PROFILE_H

#include <stddef.h>
#include <stdio.h>
#include <stdbool.h>

typedef enum { VB_CAT_COMPUTE = 0, VB_CAT_COMM, VB_CAT_MEMCPY, VB_CAT_IO, VB_CAT_COUNT } vb_op_category;
const char *vb_cat_name(vb_op_category c); /* "compute", "comm", "memcpy", "io" */

typedef struct vb_profiler vb_profiler;

vb_profiler *vb_prof_create(void);
void vb_prof_destroy(vb_profiler *p);
void vb_prof_set_enabled(vb_profiler *p, bool on);
void vb_prof_reset(vb_profiler *p);          /* drop samples, keep registrations */
/* Samples go to the accumulators of this trial type (a string that outlives
 * the profiler, e.g. "FULL"); ops.csv has one row per (trial type, op). */
void vb_prof_set_trial_type(vb_profiler *p, const char *trial_type);
/* While `t`'s window is open every timed op is also a timeline event (main
 * lane), on every rank, whether or not this profiler is enabled. */
struct vb_tlrec;
void vb_prof_set_timeline(vb_profiler *p, struct vb_tlrec *t);

/* Registers (or finds) an op by name in the PROCESS-WIDE registry; returns a
 * stable id valid for every profiler. Thread-safe. */
int vb_prof_op(const char *name, vb_op_category cat);
double vb_prof_begin(vb_profiler *p, int id);               /* returns start time */
void vb_prof_end(vb_profiler *p, int id, double t0, size_t bytes);
/* As vb_prof_end, with the floating-point operations the call performed
 * (ops.csv flops and gflop_per_s; 0 = not reported). */
void vb_prof_end_flops(vb_profiler *p, int id, double t0, size_t bytes, double flops);

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
