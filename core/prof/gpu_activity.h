/* gpu_activity.h: GPU activities kept for timeline.csv's stream<N> lanes.
 *
 * While a trial holds timeline steps, the CUPTI tracer (cupti_trace.h)
 * keeps each kernel, memcpy and memset record it is handed here, from
 * whichever thread CUPTI delivers on (callers serialize). Once the device
 * has finished, the training thread moves them into the timeline with
 * vb_gacts_to_timeline:
 *   - times go from CUPTI's clock to vb_now()'s by an offset the tracer
 *     measured when the trial began: host_ns = cupti_ns + offset_ns
 *   - the kind is the one `vitbench nsys` gives the same rows: a kernel
 *     whose name starts with "nccl" (any case, after an optional "void ")
 *     is comm, any other kernel compute, copies and memsets memcpy
 *   - each goes to its stream's lane; the timeline keeps those that started
 *     inside one of its recorded steps (timeline.h, vb_tlrec_add_stream)
 * A kernel's name is shown as `display` maps it (the tracer demangles, as
 * nsys prints names), computed once per distinct name. Names are copied
 * once each and live as long as the list: destroy the timeline first.
 *
 * No CUDA here, so the unit tests run it on the CPU.
 */
#ifndef VB_GPU_ACTIVITY_H
#define VB_GPU_ACTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vb_tlrec;

typedef enum { VB_GACT_KERNEL = 0, VB_GACT_MEMCPY, VB_GACT_MEMSET } vb_gact_type;

typedef struct vb_gacts vb_gacts;

/* A list that keeps at most max_records records at a time; NULL when out
 * of memory. */
vb_gacts *vb_gacts_create(size_t max_records);
void vb_gacts_destroy(vb_gacts *a);

/* Keeps one record: a kernel's name as CUPTI gives it, or a copy's or
 * memset's operation name ("[CUDA memcpy Host-to-Device]"). Returns 0 when
 * kept, 1 when skipped (no times: CUPTI leaves both 0 for an activity it
 * could not time, or the end precedes the start), -1 when dropped (the
 * list is full, or out of memory). */
int vb_gacts_add(vb_gacts *a, vb_gact_type type, const char *name, uint32_t stream, uint64_t start_ns,
                 uint64_t end_ns, double bytes);
/* Records kept and not yet moved. */
size_t vb_gacts_count(const vb_gacts *a);

/* Moves every kept record into t (see above) and forgets them; the names
 * stay. display may be NULL (names as given); it returns a malloc'd string
 * the list frees, or NULL to keep the name. Returns how many t placed in a
 * step; *dropped (when not NULL) gets how many t had no room for. */
long vb_gacts_to_timeline(vb_gacts *a, struct vb_tlrec *t, int64_t offset_ns, char *(*display)(const char *name),
                          long *dropped);

/* NCCL's kernels, as nsys users pick them out: the name (after an optional
 * "void ") starts with "nccl", in any case. */
bool vb_gpu_name_is_nccl(const char *name);

#endif
