/* optim.h: torch.optim.Adam (no weight decay) over the contiguous parameter
 * buffer, and the tutorial's learning-rate schedules. */
#ifndef VB_OPTIM_H
#define VB_OPTIM_H

#include <stddef.h>
#include "kernels/ops.h"
#include "core/prof/profile.h"

typedef struct vb_adam {
    float beta1, beta2, eps;   /* 0.9, 0.95, 1e-8 (the tutorial's) */
    int step;                  /* updates done so far */
    size_t n;
    float *m, *v;              /* backend memory [n] */
    vb_ctx *ctx;
    /* The step's arguments: written by the host into a page-locked slot and
     * copied (asynchronously) into args_dev, which adam_update reads. Two
     * slots, so a step never rewrites the slot a copy may still be reading;
     * slot_ev[k] marks where slot k's copy was enqueued. */
    vb_adam_args *args_dev;    /* backend memory [1] */
    vb_adam_args *args_host;   /* page-locked host [2] */
    vb_event *slot_ev[2];
    int slot_used[2];
    /* Launch layout: nseg == 0 is one fused update over the whole buffer
     * (enable_fused); otherwise one update per segment (the model's
     * tensors, torch.optim.Adam's per-parameter loop), same math per element. */
    int nseg;
    size_t *seg_offset, *seg_numel; /* host [nseg], in floats */
    /* The loss scaler's state (backend memory) when scaling is on, else NULL:
     * a step it flags is skipped on the device and `step` counts it anyway
     * (vb_adam_steps_taken subtracts the skipped ones). */
    const vb_loss_scale_state *loss_scale;
} vb_adam;

void vb_adam_init(vb_adam *a, size_t n, vb_ctx *ctx);
void vb_adam_free(vb_adam *a);
/* One launch per segment [offset[i], offset[i] + numel[i]) instead of one over
 * the buffer; the segments must tile [0, n) in order (exit 1 otherwise).
 * nseg 0 goes back to the fused launch. The arrays are copied. */
void vb_adam_set_segments(vb_adam *a, int nseg, const size_t *offset, const size_t *numel);
/* Updates actually applied: step minus the steps the loss scaler skipped.
 * Reads backend memory when a scaler is attached: synchronizes a->ctx. */
int vb_adam_steps_taken(const vb_adam *a);
/* One update with learning rate lr: step++, then torch.optim.Adam's math on
 * params (float32 master) and, when it is a separate buffer, params_act (the
 * activation-dtype copy the next forward reads; == params or NULL: none), in
 * one launch or one per segment. With a loss scaler attached the device skips
 * the whole update when the scaler has flagged this step. Enqueued on a->ctx:
 * returns without waiting. */
void vb_adam_step(vb_adam *a, float *params, vb_act *params_act, const float *grads, float lr,
                  vb_profiler *prof);
/* vb_adam_step in its two halves, for a step recorded as a graph: the
 * arguments (step++, lr) copied into backend memory, which the host does
 * every step, then the update that reads them, which a graph replays. */
void vb_adam_set_args(vb_adam *a, float lr);
void vb_adam_launch(vb_adam *a, float *params, vb_act *params_act, const float *grads, vb_profiler *prof);

/* Learning rate for the update at 0-based iteration t:
 *   "cosine", warmup 0:  lr * 0.5 * (1 + cos(pi * t / num_iters))
 *   "cosine", warmup w:  lr * min((t + 1) / w, 0.5 * (1 + cos(pi * t / num_iters)))
 *   "constant":          lr */
float vb_lr_at(const char *schedule, float lr, int warmup, int num_iters, int t);

#endif
