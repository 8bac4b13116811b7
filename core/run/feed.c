/* feed.c: a loop's batches from the loader to its steps (feed.h). */
#include "core/run/feed.h"

#include <stddef.h>

void vb_feed_begin(vb_feed *f, vb_staging *st, vb_loader *l, int nsteps, bool prefetch, vb_feed_fetch_fn fetch,
                   void *arg) {
    *f = (vb_feed){.staging = st, .loader = l, .nsteps = nsteps, .prefetch = prefetch, .fetch = fetch,
                   .fetch_arg = arg};
}

static const vb_batch *feed_fetch(vb_feed *f, int k) {
    return f->fetch ? f->fetch(f->fetch_arg, k) : vb_loader_next(f->loader);
}

void vb_feed_hold(vb_feed *f, const vb_batch *b) {
    f->held = b;
    /* dali copies the batch again for every step, each copy overlapping the
     * step before */
    if (f->prefetch && f->nsteps > 0) vb_staging_put(f->staging, b);
}

const vb_batch *vb_feed_next(vb_feed *f, int k) {
    if (f->held) return f->held;
    const vb_batch *b = f->ahead;
    f->ahead = NULL;
    return b ? b : feed_fetch(f, k);
}

void vb_feed_done(vb_feed *f, const vb_batch *b, int k) {
    if (b != f->held) vb_staging_release(f->staging, f->loader, b);
    /* the fetch's wait is step k's (the timed fetch records it there) */
    if (f->prefetch && k + 1 < f->nsteps) {
        if (!f->held) f->ahead = feed_fetch(f, k + 1);
        vb_staging_put(f->staging, f->held ? f->held : f->ahead);
    }
}

void vb_feed_end(vb_feed *f) {
    if (f->ahead) vb_staging_release(f->staging, f->loader, f->ahead);
    if (f->held) vb_staging_release(f->staging, f->loader, f->held);
    f->ahead = f->held = NULL;
}
