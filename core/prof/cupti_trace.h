/* cupti_trace.h: per-kernel GPU timings from CUPTI's activity API.
 *
 * With the config key `cupti: true` (CUDA backend only) the ranks that
 * benchy's profiler_mode picks record every kernel (CUPTI_ACTIVITY_KIND_
 * CONCURRENT_KERNEL: NCCL's kernels included), memcpy and memset of their
 * timed SYNTHETIC and FULL trials, between vb_cupti_begin and vb_cupti_end.
 * CUPTI fills buffers it asks for through cuptiActivityRegisterCallbacks and
 * hands them back full, or at vb_cupti_end's cuptiActivityFlushAll (called
 * after the harness synchronized the device, so every record of the trial is
 * complete); each record goes into gpu_summary.h's accumulators of the trial
 * in progress, under a mutex since CUPTI may deliver from its own thread.
 *
 * The summaries (gpu_summary.h, nsys stats' columns) come out as text per
 * view:
 *   VB_CUPTI_KERNELS            kernels of every traced trial (kernels.csv)
 *   VB_CUPTI_KERNELS_SYNTHETIC  the timed SYNTHETIC trials' (kernels_SYNTHETIC.csv)
 *   VB_CUPTI_KERNELS_FULL       the timed FULL trials' (kernels_FULL.csv)
 *   VB_CUPTI_MEMOPS             memcpy / memset of every traced trial,
 *                               cuda_gpu_mem_time_sum's columns (gpu_mem_time.csv)
 * Kernel names are CUPTI's (mangled), demangled with the C++ runtime's
 * __cxa_demangle when the process has it (looked up at run time, so this
 * file stays C), as nsys prints them; a name it cannot demangle is kept.
 *
 * The timeline's GPU lanes: a trial begun with for_timeline (a FULL trial
 * the timeline window is open for) also keeps each record whole, stream
 * and times included (gpu_activity.h), and vb_cupti_to_timeline moves them
 * into timeline.csv's stream<N> lanes. CUPTI's clock (CLOCK_REALTIME on
 * Linux) is put on vb_now()'s (CLOCK_MONOTONIC) by the offset between
 * cuptiGetTimestamp and the host clock, read at vb_cupti_begin as the
 * narrowest of a few bracketing reads.
 *
 * Compiled in when the CUDA backend is built and CMake finds cupti.h
 * (VB_HAVE_CUPTI); otherwise vb_cupti_compiled() is false and the other
 * calls are not to be made (the config check refuses `cupti: true` first).
 * CUPTI failures go through CUPTICHECK: one line naming the call, CUPTI's
 * error, the host, the file and the line, exit 1; a failure inside CUPTI's
 * buffer callback is kept and reported so by vb_cupti_end, on the training
 * thread. vb_cupti_init turns each activity kind on and off once, so that a
 * tool already holding CUPTI (nsys, ncu, compute-sanitizer) is found before
 * any trial: exit 2, one line naming `cupti`. Record layouts are read in
 * cupti_records.h.
 *
 * One tracer per process, driven by the training thread.
 */
#ifndef VB_CUPTI_TRACE_H
#define VB_CUPTI_TRACE_H

#include <stdbool.h>

typedef enum {
    VB_CUPTI_KERNELS = 0,
    VB_CUPTI_KERNELS_SYNTHETIC,
    VB_CUPTI_KERNELS_FULL,
    VB_CUPTI_MEMOPS,
    VB_CUPTI_NVIEWS
} vb_cupti_view;

/* true when this build has the tracer */
bool vb_cupti_compiled(void);

/* Registers the buffer callbacks (once per process). */
void vb_cupti_init(void);
/* Starts recording into the accumulators of `trial_type` ("SYNTHETIC",
 * "FULL"; any other type counts in the combined views only); for_timeline:
 * keep the records for vb_cupti_to_timeline too. */
void vb_cupti_begin(const char *trial_type, bool for_timeline);
/* Delivers every completed record (call after the device work of the trial
 * has finished) and stops recording. */
void vb_cupti_end(void);
/* After vb_cupti_end: moves the records kept for the timeline into t's
 * stream<N> lanes (training thread; destroy t before the process's tracer
 * goes away, i.e. any time: the tracer lives as long as the process).
 * Returns how many landed in the window's steps. Warns once when records
 * were kept but none landed (the clocks disagree), and once when some could
 * not be kept. */
struct vb_tlrec;
long vb_cupti_to_timeline(struct vb_tlrec *t);
/* The view's CSV text (malloc'd, the caller frees) and its file name in the
 * run directory ("kernels.csv", ...). */
char *vb_cupti_csv(vb_cupti_view view);
const char *vb_cupti_file(vb_cupti_view view);
/* What the summaries miss, so far: records CUPTI reported dropped (its
 * buffers were full) or lost to a failed allocation; records CUPTI could not
 * time (both times 0: no device memory for them); buffers a forced flush
 * returned ending in an unfinished record (the rest of such a buffer cannot
 * be read). */
typedef struct {
    unsigned long long dropped, untimed, incomplete_buffers;
} vb_cupti_loss;
vb_cupti_loss vb_cupti_losses(void);

#endif
