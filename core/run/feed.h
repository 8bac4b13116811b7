/* feed.h: the batches of a loop of steps, from a loader through the staging
 * (staging.h) to each step, in one place for every loop that runs steps
 * (the benchy trials, the train loop).
 *
 * Per step: vb_feed_next hands out the step's batch (the held one, the one
 * fetched ahead, or a fresh fetch); the step copies it in (vb_staging_put,
 * unless a copy is already staged) and runs; vb_feed_done gives the batch
 * back to its loader and, under data_loader_config dali, fetches the next
 * batch and enqueues its copy so that it runs while this step computes (not
 * past the loop's last step: what follows, a validation pass or the next
 * trial's reset, reads no prefetched batch). vb_feed_end gives back what the
 * feed still holds, after the last step or before an exit in the middle.
 */
#ifndef VB_FEED_H
#define VB_FEED_H

#include <stdbool.h>

#include "core/data/data.h"
#include "core/run/staging.h"

/* The timed fetch of step k's batch, or NULL for a bare vb_loader_next. */
typedef const vb_batch *(*vb_feed_fetch_fn)(void *arg, int k);

typedef struct vb_feed {
    vb_staging *staging;
    vb_loader *loader;
    int nsteps;              /* steps in this loop */
    bool prefetch;           /* dali: the next batch's copy runs under the step before */
    vb_feed_fetch_fn fetch;
    void *fetch_arg;
    const vb_batch *held;    /* handed out for every step (benchy's SYNTHETIC); NULL: none */
    const vb_batch *ahead;   /* dali: fetched during the step before, its copy under way */
} vb_feed;

/* A feed of nsteps steps from loader l into staging st; prefetch: copy each
 * next batch while the step before computes (dali, for steps that train).
 * fetch / arg: how a batch is fetched (NULL: vb_loader_next). */
void vb_feed_begin(vb_feed *f, vb_staging *st, vb_loader *l, int nsteps, bool prefetch, vb_feed_fetch_fn fetch,
                   void *arg);

/* From now on every step gets b (fetched from the feed's loader, given back
 * by vb_feed_end); with prefetch, its copy for the first step is enqueued
 * now, to overlap whatever ran on it before. */
void vb_feed_hold(vb_feed *f, const vb_batch *b);

/* Step k's batch. */
const vb_batch *vb_feed_next(vb_feed *f, int k);

/* Step k has been enqueued on batch b: b goes back to the loader (unless
 * held) and, with prefetch and a step k + 1 to come, the next batch is
 * fetched and its copy enqueued. */
void vb_feed_done(vb_feed *f, const vb_batch *b, int k);

/* Gives back the held batch and one fetched ahead, if any. */
void vb_feed_end(vb_feed *f);

#endif
