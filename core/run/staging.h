/* staging.h: a run's batches on their way from the loader to the step.
 *
 * data_loader_config pytorch: one device batch buffer, copied on the compute
 * context, the host waiting for the copy (torch's synchronous .to(device)
 * from pinned memory). dali: two buffers ("slots") filled on a copy context
 * of their own while the step before computes, ordered against the steps
 * with events as core/data/double_buffer.h plans it. With
 * normalize_on_device each copied batch is normalised on the context that
 * copied it.
 *
 * The loop that feeds a step: vb_staging_put (the copy), vb_staging_take (the
 * step reads inp_dev / tar_dev), vb_staging_release (the host batch goes
 * back to its loader once no copy reads it).
 */
#ifndef VB_STAGING_H
#define VB_STAGING_H

#include <stdbool.h>
#include <stddef.h>

#include "core/data/data.h"          /* vb_batch, vb_loader */
#include "core/data/double_buffer.h" /* the dali plan */
#include "core/prof/profile.h"       /* the h2d and normalize ops */
#include "kernels/ops.h"

typedef struct vb_staging {
    const vb_ops *ops;
    vb_ctx *ctx;                      /* compute: steps read the staged batches here */
    vb_ctx *copy_ctx;                 /* dali: the copies' own context; NULL under pytorch */
    vb_profiler *prof;
    bool dali;
    int in_channels, out_channels;
    size_t hw;                        /* pixels per channel */
    float *inp_dev, *tar_dev;         /* the batch the compute context reads now: one of the slots */
    float *inp_slot[2], *tar_slot[2]; /* [0] only (pytorch), both (dali) */
    int slot_B[2];                    /* samples of the batch copied into each */
    bool staged;                      /* pytorch: a batch was copied and no step has used it yet */
    vb_event *batch_copied;           /* pytorch: recorded after a batch's copies */
    float *norm_mean, *norm_std;      /* normalize_on_device: [max(in, out) channels]; NULL: off */
    vb_event *copied[2], *freed[2];   /* dali: after the copy into slot s; on compute after the
                                       * last op that reads slot s */
    vb_dbuf dbuf;
} vb_staging;

/* Allocates the buffers for batches of up to local_batch samples on ctx
 * (and, under dali, creates the copy context on ctx's device, exiting 1
 * naming data_loader_config dali when it cannot). mean / std: the loader's
 * per-channel stats to normalise with on the device, or NULL. */
void vb_staging_init(vb_staging *s, const vb_ops *ops, vb_ctx *ctx, vb_profiler *prof, bool dali, bool tf32,
                     int local_batch, int in_channels, int out_channels, size_t hw, const float *mean,
                     const float *std);

/* Copies batch b to the backend for the next step (profiled as memcpy
 * "h2d"). pytorch: into the device buffer on the compute context, and the
 * host waits for the copy, not for the work queued before it. dali: enqueued
 * on the copy context into the next slot, so it runs while the step already
 * enqueued computes; it waits (device-side) for the last step that read that
 * slot. At most one batch is staged ahead of the steps (exits 1, a bug,
 * otherwise). */
void vb_staging_put(vb_staging *s, const vb_batch *b);

/* pytorch: the batch copied last is staged again without a copy, for a
 * step that reads it once more (SYNTHETIC under synthetic_resident: one
 * batch that stays on the device, as a loop over device-resident data).
 * The step reads its batch and never writes it, so the buffer still holds
 * the copied (and normalised) values. Exits 1 (a bug) under dali, before
 * any copy, or with a batch already staged. */
void vb_staging_reuse(vb_staging *s);

/* Whether a staged batch waits for its step. */
bool vb_staging_has(const vb_staging *s);

/* The staged batch becomes the one the compute context reads next
 * (inp_dev, tar_dev); returns its sample count. Exits 1 (a bug) when none
 * is staged. */
int vb_staging_take(vb_staging *s);

/* Gives b back to loader l (vb_loader_release) once no copy reads it: under
 * dali the host waits for b's latest copy first, normally finished long
 * before (it ran during the previous step). Every batch a run staged goes
 * back this way, never through a bare vb_loader_release or an implicit
 * release by vb_loader_next / vb_loader_reset. */
void vb_staging_release(vb_staging *s, vb_loader *l, const vb_batch *b);

/* Copies a batch for an op outside the training step (the validation
 * forward reads inp_dev / tar_dev); the host waits for the copy, so b may go
 * back to its loader (plain vb_loader_release) when it returns. No batch may
 * be staged. */
void vb_staging_copy(vb_staging *s, const vb_batch *b);

/* Waits for the copy context (dali); the compute context is the caller's. */
void vb_staging_synchronize(vb_staging *s);

/* Frees the buffers, events and stats; the copy context stays until
 * vb_staging_destroy_copy_ctx (it must outlive a profiler clock that stamps
 * on it). */
void vb_staging_free(vb_staging *s);
void vb_staging_destroy_copy_ctx(vb_staging *s);

#endif
