/* double_buffer.c: the dali path's slot and event bookkeeping (double_buffer.h). */
#include "core/data/double_buffer.h"

#include <stddef.h>
#include <string.h>

void vb_dbuf_init(vb_dbuf *d) {
    memset(d, 0, sizeof *d);
    d->staged = -1;
}

int vb_dbuf_stage(vb_dbuf *d, const void *host, vb_dbuf_stage_plan *plan) {
    if (d->staged >= 0) return -1;
    const int s = d->next;
    plan->slot = s;
    /* the slot's last reader has not recorded free[s] (only when it was the
     * latest use): record it now, after everything enqueued on compute */
    plan->record_free_now = d->free_pending[s];
    d->free_pending[s] = false;
    /* a slot some step has read is overwritten only after that step */
    plan->wait_free = d->used[s];
    d->host[s] = host;
    d->seq[s] = ++d->nstaged;
    d->staged = s;
    d->next = 1 - s;
    return 0;
}

int vb_dbuf_use(vb_dbuf *d, vb_dbuf_use_plan *plan) {
    if (d->staged < 0) return -1;
    const int s = d->staged, o = 1 - s;
    plan->slot = s;
    /* every reader of the other slot has been enqueued by now */
    plan->record_free = d->free_pending[o] ? o : -1;
    d->free_pending[o] = false;
    d->used[s] = true;
    d->free_pending[s] = true;
    d->staged = -1;
    return 0;
}

bool vb_dbuf_has_staged(const vb_dbuf *d) { return d->staged >= 0; }

int vb_dbuf_host_release(vb_dbuf *d, const void *host) {
    int slot = -1;
    for (int s = 0; s < 2; s++)
        if (host && d->host[s] == host && (slot < 0 || d->seq[s] > d->seq[slot])) slot = s;
    if (slot < 0) return -1;
    const unsigned long upto = d->seq[slot];
    for (int s = 0; s < 2; s++)
        if (d->host[s] && d->seq[s] <= upto) d->host[s] = NULL;
    return slot;
}
