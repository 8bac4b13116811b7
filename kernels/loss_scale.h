/* loss_scale.h: GradScaler's scale update (torch's _amp_update_scale_), once
 * for both backends: the CPU calls it on the host, the CUDA backend in a
 * one-thread kernel on the device, so the state never leaves device memory.
 *
 * After a step whose gradients held an inf or nan (found_inf), the scale
 * backs off and the step counts as skipped; after growth_interval good steps
 * in a row it grows, unless growing would overflow float32. The records the
 * host reads afterwards (last_scale, last_skipped, steps) are set here too. */
#ifndef VB_LOSS_SCALE_H
#define VB_LOSS_SCALE_H

#include "kernels/ops.h"

#ifdef __CUDACC__
#define VB_HOST_DEVICE __host__ __device__
#else
#include <math.h>
#define VB_HOST_DEVICE
#endif

static inline VB_HOST_DEVICE void vb_loss_scale_step(vb_loss_scale_state *ls) {
    ls->last_scale = ls->scale;
    ls->last_skipped = ls->found_inf != 0.0f;
    if (ls->last_skipped) {
        ls->scale *= ls->backoff_factor;
        ls->growth_tracker = 0;
        ls->skipped++;
    } else if (++ls->growth_tracker >= ls->growth_interval) {
        const float grown = ls->scale * ls->growth_factor;
        if (isfinite(grown)) ls->scale = grown;
        ls->growth_tracker = 0;
    }
    ls->found_inf = 0.0f;
    ls->steps++;
}

#endif
