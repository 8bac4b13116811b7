/* optim.h: torch.optim.Adam (no weight decay) over the contiguous parameter
 * buffer, and the tutorial's learning-rate schedules. */
#ifndef VB_OPTIM_H
#define VB_OPTIM_H

#include <stddef.h>
#include "kernels/ops.h"
#include "core/profile.h"

typedef struct vb_adam {
    float beta1, beta2, eps;   /* 0.9, 0.95, 1e-8 (the tutorial's) */
    int step;                  /* updates done so far */
    size_t n;
    float *m, *v;              /* backend memory [n] */
    const vb_ops *ops;
} vb_adam;

void vb_adam_init(vb_adam *a, size_t n, const vb_ops *ops);
void vb_adam_free(vb_adam *a);
/* One update with learning rate lr: step++, then torch.optim.Adam's math. */
void vb_adam_step(vb_adam *a, float *params, const float *grads, float lr, vb_profiler *prof);

/* Learning rate for the update at 0-based iteration t:
 *   "cosine", warmup 0:  lr * 0.5 * (1 + cos(pi * t / num_iters))
 *   "cosine", warmup w:  lr * min((t + 1) / w, 0.5 * (1 + cos(pi * t / num_iters)))
 *   "constant":          lr */
float vb_lr_at(const char *schedule, float lr, int warmup, int num_iters, int t);

#endif
