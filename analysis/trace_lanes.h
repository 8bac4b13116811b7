/* trace_lanes.h: what the two trace writers of `vitbench trace` share
 * (trace.c, the Chrome trace; trace_kineto.c, the Kineto traces HTA reads):
 * lane names to thread ids, the nesting depth of an event kind, and strings
 * made valid UTF-8 for JSON.
 */
#ifndef VB_ANALYSIS_TRACE_LANES_H
#define VB_ANALYSIS_TRACE_LANES_H

#include <stddef.h>

#include "analysis/breakdown.h"

#define VB_TRACE_TID_OTHER_BASE 200000

/* k for a lane named prefix<k> with 0 <= k < limit (digits only, no sign or
 * space); -1 for any other name. */
int vb_trace_numbered_lane(const char *lane, const char *prefix, long limit);

/* Stable thread ids per lane name: main 0, comm 1, loader<k> 10+k (k < 90),
 * stream<N> 100+N (N < 100000), any other lane VB_TRACE_TID_OTHER_BASE + its
 * index among the other lane names sorted (so the same lanes get the same
 * ids whatever the row order). tid has t->n entries. */
void vb_trace_assign_tids(const vb_timeline *t, int *tid);

/* Where a timeline event kind nests among events that start together:
 * trial 0, step 1, phase 2, an op (any other kind) 3, marker 4; both writers
 * order equal starts by it, parents first. */
int vb_trace_depth_of(const char *kind);

/* A malloc'd copy of s in which every byte that does not begin a valid
 * UTF-8 sequence is U+FFFD, so strict JSON readers accept it. */
char *vb_trace_utf8_clean(const char *s);

#endif
