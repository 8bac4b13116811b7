/* comm_device.c: what device memory needs from the data plane's front-end.
 *
 * Host staging. A plane that reads and writes host memory only (MPI here:
 * Open MPI is not built CUDA-aware) cannot be handed device pointers. The
 * front-end copies a collective's input from the device into a page-locked
 * host buffer on the context's queue, waits for it, runs the collective on
 * the host copy and enqueues the copy back. Staging buffers come from a small
 * pool per context: a buffer is handed out again only once the copy back out
 * of it has completed (an event recorded after that copy), so a non-blocking
 * collective's buffer is never overwritten while it is in flight.
 *
 * Event-timed exposure. A plane that enqueues on the context's stream (NCCL)
 * returns at once: the host clock would call its cost zero. The time the
 * stream spends in a blocking collective, or stalls on a wait for a
 * non-blocking one, is what the step loses; it is measured between two
 * events recorded around the enqueue on the context, and added to the
 * process totals' blocking seconds when they are next read (after the step's
 * synchronize every such event has completed).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm/comm.h"
#include "core/comm/comm_impl.h"
#include "core/util/common.h"

/* ---- staging pool ---- */

enum { STAGE_SLOTS = 64 };

typedef struct stage_slot {
    vb_ctx *ctx;    /* owner; NULL: unused slot */
    void *host;     /* page-locked, from ctx->ops->alloc_host */
    size_t bytes;
    vb_event *done; /* recorded after the last copy out of host */
    bool busy;      /* handed out, not yet put back */
    bool draining;  /* put back; done may not have completed yet */
} stage_slot;

static stage_slot g_slots[STAGE_SLOTS];

static void slot_settle(stage_slot *s) {
    if (s->draining) s->ctx->ops->event_synchronize(s->ctx, s->done);
    s->draining = false;
}

void *vb_comm_stage_get(vb_ctx *ctx, size_t bytes, int *slot) {
    if (bytes == 0) bytes = 1;
    int best = -1, spare = -1, empty = -1;
    for (int i = 0; i < STAGE_SLOTS; i++) {
        stage_slot *s = &g_slots[i];
        if (!s->ctx) {
            if (empty < 0) empty = i;
            continue;
        }
        if (s->ctx != ctx || s->busy) continue;
        if (s->bytes >= bytes && (best < 0 || s->bytes < g_slots[best].bytes)) best = i;
        if (s->bytes < bytes && spare < 0) spare = i;
    }
    if (best < 0 && spare >= 0) { /* grow a free buffer of this context rather than take a new slot */
        stage_slot *s = &g_slots[spare];
        slot_settle(s);
        ctx->ops->free_host(ctx, s->host);
        s->host = ctx->ops->alloc_host(ctx, bytes);
        s->bytes = bytes;
        best = spare;
    } else if (best < 0) {
        if (empty < 0)
            vb_die_internal("data plane: more than %d host staging buffers in flight (non-blocking collectives "
                            "never waited?)",
                            STAGE_SLOTS);
        stage_slot *s = &g_slots[empty];
        s->ctx = ctx;
        s->host = ctx->ops->alloc_host(ctx, bytes);
        s->bytes = bytes;
        s->done = ctx->ops->event_create(ctx);
        best = empty;
    }
    stage_slot *s = &g_slots[best];
    slot_settle(s);
    s->busy = true;
    *slot = best;
    return s->host;
}

void vb_comm_stage_put(vb_ctx *ctx, int slot) {
    if (slot < 0 || slot >= STAGE_SLOTS || g_slots[slot].ctx != ctx || !g_slots[slot].busy)
        vb_die_internal("data plane: staging slot %d put back twice or by another context", slot);
    stage_slot *s = &g_slots[slot];
    ctx->ops->event_record(ctx, s->done); /* after the copies already enqueued out of it */
    s->busy = false;
    s->draining = true;
}

/* ---- device scratch ---- */

enum { SCRATCH_SLOTS = 8 };

static struct {
    vb_ctx *ctx;
    void *p;
    size_t bytes;
} g_scratch[SCRATCH_SLOTS];

void *vb_comm_device_scratch(vb_ctx *ctx, size_t bytes) {
    int pick = -1;
    for (int i = 0; i < SCRATCH_SLOTS && pick < 0; i++)
        if (g_scratch[i].ctx == ctx) pick = i;
    for (int i = 0; i < SCRATCH_SLOTS && pick < 0; i++)
        if (!g_scratch[i].ctx) pick = i;
    if (pick < 0) vb_die_internal("data plane: device scratch for more than %d contexts", SCRATCH_SLOTS);
    if (g_scratch[pick].ctx && g_scratch[pick].bytes >= bytes) return g_scratch[pick].p;
    if (g_scratch[pick].p) {
        ctx->ops->synchronize(ctx); /* earlier collectives may still read it */
        ctx->ops->free(ctx, g_scratch[pick].p);
    }
    g_scratch[pick].ctx = ctx;
    g_scratch[pick].p = ctx->ops->alloc(ctx, bytes ? bytes : 1); /* zero-filled: padding is never garbage */
    g_scratch[pick].bytes = bytes;
    return g_scratch[pick].p;
}

/* ---- event-timed spans ---- */

enum { SPAN_SLOTS = 1024 };

typedef struct span {
    vb_ctx *ctx;
    vb_event *begin, *end;
    bool pending; /* recorded, not yet added to the totals */
} span;

static span g_spans[SPAN_SLOTS];
static int g_nspans; /* slots in use: [0, g_nspans) */

/* resolved spans' seconds into *seconds; every pending span of every context */
void vb_comm_spans_resolve(double *seconds) {
    for (int i = 0; i < g_nspans; i++) {
        span *s = &g_spans[i];
        if (!s->pending) continue;
        s->ctx->ops->event_synchronize(s->ctx, s->end);
        *seconds += 1e-3 * s->ctx->ops->event_elapsed_ms(s->ctx, s->begin, s->end);
        s->pending = false;
    }
}

int vb_comm_span_begin(vb_ctx *ctx) {
    int pick = -1;
    for (int i = 0; i < g_nspans && pick < 0; i++)
        if (!g_spans[i].pending && g_spans[i].ctx == ctx) pick = i;
    if (pick < 0 && g_nspans < SPAN_SLOTS) {
        pick = g_nspans++;
        g_spans[pick].ctx = ctx;
        g_spans[pick].begin = ctx->ops->event_create(ctx);
        g_spans[pick].end = ctx->ops->event_create(ctx);
    }
    if (pick < 0) { /* all in use: settle them (a step with > 1024 collectives) */
        double s = 0;
        vb_comm_spans_resolve(&s);
        vb_comm_totals_add_blocking(s);
        return vb_comm_span_begin(ctx);
    }
    span *s = &g_spans[pick];
    s->pending = true;
    ctx->ops->event_record(ctx, s->begin);
    return pick;
}

void vb_comm_span_end(vb_ctx *ctx, int id) {
    if (id < 0 || id >= g_nspans || g_spans[id].ctx != ctx)
        vb_die_internal("data plane: event span %d ended by another context", id);
    ctx->ops->event_record(ctx, g_spans[id].end);
}

/* ---- a context going away ---- */

void vb_comm_ctx_release(vb_ctx *ctx) {
    if (!ctx) return;
    double s = 0;
    vb_comm_spans_resolve(&s);
    vb_comm_totals_add_blocking(s);
    for (int i = 0; i < STAGE_SLOTS; i++) {
        stage_slot *st = &g_slots[i];
        if (st->ctx != ctx) continue;
        if (st->busy) vb_die_internal("data plane: a context released with a collective still staged on it");
        slot_settle(st);
        ctx->ops->free_host(ctx, st->host);
        ctx->ops->event_destroy(ctx, st->done);
        memset(st, 0, sizeof *st);
    }
    for (int i = 0; i < SCRATCH_SLOTS; i++) {
        if (g_scratch[i].ctx != ctx) continue;
        ctx->ops->synchronize(ctx);
        ctx->ops->free(ctx, g_scratch[i].p);
        memset(&g_scratch[i], 0, sizeof g_scratch[i]);
    }
    /* spans: compact out this context's */
    int keep = 0;
    for (int i = 0; i < g_nspans; i++) {
        if (g_spans[i].ctx == ctx) {
            ctx->ops->event_destroy(ctx, g_spans[i].begin);
            ctx->ops->event_destroy(ctx, g_spans[i].end);
            continue;
        }
        g_spans[keep++] = g_spans[i];
    }
    g_nspans = keep;
}
