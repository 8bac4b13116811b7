/* comm_impl.h: what the communicator's own files (comm.c, comm_data.c,
 * comm_mpi.c) share. Not for other modules: comm.h is the interface. */
#ifndef VB_COMM_IMPL_H
#define VB_COMM_IMPL_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/comm/comm.h"

/* c's MPI communicator; MPI_COMM_WORLD for a NULL comm (the world). */
MPI_Comm vb_comm_mpi(const vb_comm *c);
/* c's size and rank, asking MPI for the world's when c is NULL. */
int vb_comm_size_of(const vb_comm *c);
int vb_comm_rank_of(const vb_comm *c);
/* True when a collective on c needs no traffic: a group of one. A NULL comm
 * (the world) always goes to MPI, which handles a single process itself. */
bool vb_comm_trivial(const vb_comm *c);

/* One timed collective: a profiler token (op "<op>_<group>") and a host
 * clock reading for the process totals. */
typedef struct vb_comm_timer {
    vb_profiler *prof;
    vb_prof_token tok;
    double t0;
} vb_comm_timer;
/* `op` must be a string literal: its address keys the id cache. */
vb_comm_timer vb_comm_timer_start(const vb_comm *c, const char *op);
/* Ends the profiler token with `bytes` and counts the call; a blocking call's
 * host time also goes into the totals' blocking seconds. */
void vb_comm_timer_stop(const vb_comm_timer *t, size_t bytes, bool blocking);
/* Seconds blocked outside a timed call (vb_wait). */
void vb_comm_totals_add_blocking(double seconds);

/* ---- device memory (comm_device.c) ---- */
/* A page-locked host buffer of at least `bytes` from ctx's staging pool,
 * free of any earlier copy; *slot names it for vb_comm_stage_put. */
void *vb_comm_stage_get(vb_ctx *ctx, size_t bytes, int *slot);
/* Hands the buffer back once the copies enqueued so far on ctx out of it
 * have completed (an event recorded now). */
void vb_comm_stage_put(vb_ctx *ctx, int slot);
/* A buffer of at least `bytes` in ctx's own (device) memory, grown and kept
 * per context: the padded uneven collectives' staging. Uses are ordered by
 * ctx's queue; the contents do not survive growing. */
void *vb_comm_device_scratch(vb_ctx *ctx, size_t bytes);
/* An event-timed span of ctx's queue (a collective enqueued on its stream,
 * or a stream waiting for one): its seconds join the totals' blocking time
 * when vb_comm_spans_resolve runs (vb_comm_totals_get). */
int vb_comm_span_begin(vb_ctx *ctx);
void vb_comm_span_end(vb_ctx *ctx, int span);
/* Adds every recorded span's seconds to *seconds (waits for the spans' end
 * events). */
void vb_comm_spans_resolve(double *seconds);

#endif
