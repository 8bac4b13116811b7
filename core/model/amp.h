/* amp.h: dynamic loss scaling, as torch.cuda.amp.GradScaler does it for
 * amp_mode fp16 (init_scale 65536, growth_factor 2, backoff_factor 0.5,
 * growth_interval 2000).
 *
 * The state (vb_loss_scale_state, kernels/ops.h) lives in backend memory and
 * is only ever changed by ops enqueued on the context, so a step never waits
 * for the host and a captured step can be replayed. Per step:
 *
 *   backward   the loss gradient is seeded with state->scale (the model's
 *              dloss points at it): every gradient comes out scaled
 *   unscale    vb_loss_scaler_unscale: grads *= 1/scale, found_inf |= any
 *              non-finite gradient, then the ranks agree on found_inf
 *   Adam       skips the whole update while found_inf is set (vb_adam's
 *              loss_scale pointer); its bias-correction step excludes skips
 *   update     vb_loss_scaler_update: backoff or growth, found_inf cleared,
 *              and a copy of the state to the host for the step's records
 *
 * Agreement. Tensor-parallel shards hold different gradients, so a tp rank
 * can see an inf its peers cannot; if only it skipped, the replica's shards
 * would drift apart. found_inf is therefore max-allreduced over the tp group
 * and over the gradient group (dp, or cp x dp), whose product is the world:
 * every rank takes the same decision and keeps the same scale. (After DDP's
 * allreduce the gradient group already holds equal gradients; the second
 * reduction is one float, and it also covers noddp, where they are not.)
 */
#ifndef VB_AMP_H
#define VB_AMP_H

#include <stdbool.h>

#include "core/comm/comm.h"
#include "core/prof/profile.h"
#include "kernels/ops.h"

/* GradScaler's defaults */
#define VB_LOSS_SCALE_INIT 65536.0f
#define VB_LOSS_SCALE_GROWTH_INTERVAL 2000

typedef struct vb_loss_scaler {
    vb_ctx *ctx;
    vb_loss_scale_state *dev;  /* backend memory: what the ops read and write */
    vb_loss_scale_state *host; /* page-locked copy of dev made at the end of each step:
                                * valid once the context has been synchronized */
    const vb_comm *agree[2];   /* groups found_inf is max-reduced over (NULL: none) */
    float init_scale;
    int growth_interval;
} vb_loss_scaler;

/* A fresh state (scale init_scale, nothing skipped) on ctx; agree_a / agree_b
 * may be NULL or of size 1. */
void vb_loss_scaler_init(vb_loss_scaler *s, vb_ctx *ctx, float init_scale, int growth_interval,
                         const vb_comm *agree_a, const vb_comm *agree_b);
void vb_loss_scaler_free(vb_loss_scaler *s);

/* After the gradients are final (DDP finished): unscales grads[n] in place,
 * flags a non-finite one, and agrees on the flag across the groups. */
void vb_loss_scaler_unscale(vb_loss_scaler *s, float *grads, size_t n, vb_profiler *prof);

/* After the optimizer: GradScaler.update(), then the state copied to s->host. */
void vb_loss_scaler_update(vb_loss_scaler *s, vb_profiler *prof);

#endif
