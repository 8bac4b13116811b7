/* double_buffer.h: the order of copies and steps of data_loader_config dali,
 * over two device batch buffers ("slots").
 *
 * Pure bookkeeping, no backend calls: each call returns a plan that the
 * trainer carries out with the op table's events on two contexts, the
 * compute context (the step) and the copy context (host-to-device copies):
 *
 *   stage (a host batch is copied into the next slot, on the copy context):
 *     if plan.record_free_now: record free[slot] on compute
 *     if plan.wait_free:       copy context waits free[slot]
 *     copy; record copied[slot] on the copy context
 *   use (the step takes the staged batch):
 *     if plan.record_free >= 0: record free[plan.record_free] on compute
 *     compute waits copied[plan.slot]; the step reads plan.slot
 *   host release (before a host batch goes back to the loader):
 *     s = vb_dbuf_host_release(...); if s >= 0: the host waits copied[s]
 *
 * free[s] is recorded on compute after every op that reads slot s has been
 * enqueued: lazily, when the OTHER slot is next used (so it covers the step
 * that read s, and whatever else read s, e.g. a validation forward), which
 * is before the copy that overwrites s is enqueued. That copy waits for it,
 * so batch i+1's copy (into the slot step i-1 read) overlaps step i, and
 * never overwrites what step i-1 still reads. At most one batch is staged
 * ahead of the step; stages alternate between the slots.
 *
 * Copies run in order on one context, so waiting for the latest copy that
 * reads a host batch means every earlier copy has finished too.
 */
#ifndef VB_DOUBLE_BUFFER_H
#define VB_DOUBLE_BUFFER_H

#include <stdbool.h>

typedef struct vb_dbuf {
    int next;               /* slot the next stage writes */
    int staged;             /* slot holding a copied batch no step has used yet; -1 none */
    bool used[2];           /* a step (or forward) has been handed slot s */
    bool free_pending[2];   /* s was used and free[s] has not been recorded since */
    const void *host[2];    /* host batch the latest copy into s read, until the host waited for it */
    unsigned long seq[2];   /* stage number of that copy */
    unsigned long nstaged;
} vb_dbuf;

typedef struct vb_dbuf_stage_plan {
    int slot;               /* copy into this slot, then record copied[slot] on the copy context */
    bool record_free_now;   /* record free[slot] on compute first: its reader has not recorded it */
    bool wait_free;         /* the copy context waits free[slot] before the copy */
} vb_dbuf_stage_plan;

typedef struct vb_dbuf_use_plan {
    int slot;               /* compute waits copied[slot], then reads the slot */
    int record_free;        /* slot whose free event compute records first; -1 none */
} vb_dbuf_use_plan;

void vb_dbuf_init(vb_dbuf *d);

/* Plans the copy of host batch `host` into the next slot. -1 (nothing
 * changed) when a staged batch has not been used yet: only one goes ahead. */
int vb_dbuf_stage(vb_dbuf *d, const void *host, vb_dbuf_stage_plan *plan);

/* Plans the step on the staged batch. -1 when nothing is staged. */
int vb_dbuf_use(vb_dbuf *d, vb_dbuf_use_plan *plan);

/* Whether a batch is staged and not yet used. */
bool vb_dbuf_has_staged(const vb_dbuf *d);

/* The slot whose copied event the host must wait for before `host` may be
 * reused (the latest copy reading it), or -1 when no copy in flight reads
 * it. Forgets every copy up to that one: once it has completed, so have
 * they. */
int vb_dbuf_host_release(vb_dbuf *d, const void *host);

#endif
