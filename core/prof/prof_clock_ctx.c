/* prof_clock_ctx.c: the profiler's clock on a backend context's events.
 *
 * On an asynchronous backend (CUDA) an op returns when it is enqueued, so
 * host timestamps around it measure the launch, not the work. This clock
 * records one event per stamp into the context's queue instead; when the
 * profiler resolves (after clock->sync, i.e. a synchronize of the context)
 * durations are event_elapsed_ms between the op's two events. Timeline
 * start times (host_time) are placed on vb_now()'s time line through a
 * reference event recorded at each sync, whose host time is read right after
 * it completes: slot time = ref host time - (ref - slot) on the device clock.
 *
 * Events are created once, one per slot, so nothing is allocated while
 * profiling. The context must outlive the clock.
 */
#include "core/prof/profile.h"

#include <stdlib.h>

#include "core/util/common.h"
#include "kernels/ops.h"

typedef struct ctx_clock {
    vb_ctx *ctx;
    vb_event **ev;  /* [nslots] */
    vb_event *ref;  /* recorded at every sync */
    double ref_host; /* vb_now() when ref had completed */
    int have_ref;
    vb_ctx *others[4]; /* other queues stamped on (record_on): sync waits for them */
    int nothers;
} ctx_clock;

static void ctx_record(vb_prof_clock *c, int slot) {
    ctx_clock *k = c->impl;
    k->ctx->ops->event_record(k->ctx, k->ev[slot]);
}

/* A stamp on another queue of the same device (a copy stream): events are
 * not tied to a queue, so elapsed times between queues are well defined. */
static void ctx_record_on(vb_prof_clock *c, int slot, vb_ctx *on) {
    ctx_clock *k = c->impl;
    int i = 0;
    while (i < k->nothers && k->others[i] != on) i++;
    if (on != k->ctx && i == k->nothers) {
        if (k->nothers == (int)(sizeof k->others / sizeof k->others[0]))
            vb_die_internal("profiler: a device clock stamps on at most %d other contexts", k->nothers);
        k->others[k->nothers++] = on;
    }
    on->ops->event_record(on, k->ev[slot]);
}

static void ctx_sync(vb_prof_clock *c) {
    ctx_clock *k = c->impl;
    /* stamps on other queues complete before ref is taken, so every slot
     * precedes ref on the device clock */
    for (int i = 0; i < k->nothers; i++) k->others[i]->ops->synchronize(k->others[i]);
    k->ctx->ops->event_record(k->ctx, k->ref);
    k->ctx->ops->event_synchronize(k->ctx, k->ref);
    k->ref_host = vb_now();
    k->have_ref = 1;
}

static double ctx_elapsed(vb_prof_clock *c, int start, int end) {
    ctx_clock *k = c->impl;
    return 1e-3 * k->ctx->ops->event_elapsed_ms(k->ctx, k->ev[start], k->ev[end]);
}

static double ctx_host_time(vb_prof_clock *c, int slot) {
    ctx_clock *k = c->impl;
    /* the profiler resolves only after a sync, so ref follows every recorded slot */
    if (!k->have_ref) vb_die_internal("profiler: device clock read before a sync");
    return k->ref_host - 1e-3 * k->ctx->ops->event_elapsed_ms(k->ctx, k->ev[slot], k->ref);
}

static void ctx_destroy(vb_prof_clock *c) {
    if (!c) return;
    ctx_clock *k = c->impl;
    for (int i = 0; i < c->nslots; i++) k->ctx->ops->event_destroy(k->ctx, k->ev[i]);
    k->ctx->ops->event_destroy(k->ctx, k->ref);
    vb_free(k->ev);
    vb_free(k);
    vb_free(c);
}

vb_prof_clock *vb_prof_clock_ctx(vb_ctx *ctx, int nslots) {
    if (!ctx) vb_die_internal("profiler: a context clock needs a context");
    if (nslots < 2) vb_die_internal("profiler: a clock needs at least 2 slots (got %d)", nslots);
    ctx_clock *k = vb_malloc(sizeof *k);
    k->ctx = ctx;
    k->ev = vb_malloc(sizeof(vb_event *) * (size_t)nslots);
    for (int i = 0; i < nslots; i++) k->ev[i] = ctx->ops->event_create(ctx);
    k->ref = ctx->ops->event_create(ctx);
    k->ref_host = 0.0;
    k->have_ref = 0;
    k->nothers = 0;
    vb_prof_clock *c = vb_malloc(sizeof *c);
    *c = (vb_prof_clock){.nslots = nslots, .record = ctx_record, .record_on = ctx_record_on, .sync = ctx_sync,
                         .elapsed = ctx_elapsed,
                         .host_time = ctx_host_time, .destroy = ctx_destroy, .impl = k};
    return c;
}
