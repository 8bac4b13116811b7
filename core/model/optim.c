/* optim.c: torch.optim.Adam (no weight decay) over the flat parameter buffer
 * and the tutorial's learning-rate schedules (train.py). */
#include "core/model/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"

void vb_adam_init(vb_adam *a, size_t n, vb_ctx *ctx) {
    memset(a, 0, sizeof *a);
    /* the tutorial: optim.Adam(model.parameters(), lr, betas=(0.9, 0.95)), eps default 1e-8 */
    a->beta1 = 0.9f;
    a->beta2 = 0.95f;
    a->eps = 1e-8f;
    a->step = 0;
    a->n = n;
    a->ctx = ctx;
    const vb_ops *ops = ctx->ops;
    a->m = ops->alloc(ctx, n * sizeof(float)); /* zero-filled == torch's fresh state */
    a->v = ops->alloc(ctx, n * sizeof(float));
    a->args_dev = ops->alloc(ctx, sizeof(vb_adam_args));
    a->args_host = ops->alloc_host(ctx, 2 * sizeof(vb_adam_args));
    for (int k = 0; k < 2; k++) a->slot_ev[k] = ops->event_create(ctx);
}

void vb_adam_free(vb_adam *a) {
    if (!a || !a->ctx) return;
    const vb_ops *ops = a->ctx->ops;
    ops->synchronize(a->ctx); /* no update or copy may still use the buffers */
    ops->free(a->ctx, a->m);
    ops->free(a->ctx, a->v);
    ops->free(a->ctx, a->args_dev);
    ops->free_host(a->ctx, a->args_host);
    for (int k = 0; k < 2; k++) ops->event_destroy(a->ctx, a->slot_ev[k]);
    free(a->seg_offset);
    free(a->seg_numel);
    memset(a, 0, sizeof *a);
}

void vb_adam_set_segments(vb_adam *a, int nseg, const size_t *offset, const size_t *numel) {
    free(a->seg_offset);
    free(a->seg_numel);
    a->seg_offset = a->seg_numel = NULL;
    a->nseg = 0;
    if (nseg <= 0) return;
    size_t next = 0;
    for (int i = 0; i < nseg; i++) {
        if (offset[i] != next)
            vb_die_internal("adam segments: segment %d starts at %zu, expected %zu", i, offset[i], next);
        next += numel[i];
    }
    if (next != a->n) vb_die_internal("adam segments cover %zu values, the buffer has %zu", next, a->n);
    a->seg_offset = vb_malloc_check((size_t)nseg * sizeof *a->seg_offset);
    a->seg_numel = vb_malloc_check((size_t)nseg * sizeof *a->seg_numel);
    memcpy(a->seg_offset, offset, (size_t)nseg * sizeof *offset);
    memcpy(a->seg_numel, numel, (size_t)nseg * sizeof *numel);
    a->nseg = nseg;
}

int vb_adam_steps_taken(const vb_adam *a) {
    if (!a->loss_scale) return a->step;
    const vb_ops *ops = a->ctx->ops;
    vb_loss_scale_state st;
    ops->memcpy_d2h(a->ctx, &st, a->loss_scale, sizeof st);
    ops->synchronize(a->ctx);
    return a->step - st.skipped;
}

void vb_adam_set_args(vb_adam *a, float lr) {
    const vb_ops *ops = a->ctx->ops;
    a->step++;
    /* this slot's previous copy (two steps ago) must have read it */
    const int k = a->step & 1;
    if (a->slot_used[k]) ops->event_synchronize(a->ctx, a->slot_ev[k]);
    a->args_host[k] = (vb_adam_args){
        .lr = lr, .beta1 = a->beta1, .beta2 = a->beta2, .eps = a->eps, .grad_scale = 1.0f, .step = a->step};
    ops->memcpy_h2d(a->ctx, a->args_dev, &a->args_host[k], sizeof(vb_adam_args));
    ops->event_record(a->ctx, a->slot_ev[k]);
    a->slot_used[k] = 1;
}

void vb_adam_launch(vb_adam *a, float *params, vb_act *params_act, const float *grads, vb_profiler *prof) {
    const vb_ops *ops = a->ctx->ops;
    vb_prof_token tok = vb_prof_begin(prof, VB_OP_ID(prof, "adam_update", VB_CAT_COMPUTE));
    vb_act *act = params_act == (vb_act *)params ? NULL : params_act;
    if (a->nseg == 0) {
        ops->adam_update(a->ctx, params, act, grads, a->m, a->v, a->n, a->args_dev, a->loss_scale);
    } else {
        /* torch.optim.Adam's default (foreach off, fused off): parameter by
         * parameter; every element sees the same arithmetic as the fused launch */
        for (int i = 0; i < a->nseg; i++) {
            const size_t o = a->seg_offset[i];
            ops->adam_update(a->ctx, params + o, act ? vb_act_at(a->ctx, act, o) : NULL, grads + o, a->m + o,
                             a->v + o, a->seg_numel[i], a->args_dev, a->loss_scale);
        }
    }
    /* per parameter: reads param, grad, m, v and writes param, m, v; ~12 FLOPs
     * (two moment updates, bias corrections, sqrt, divide, the step) */
    vb_prof_end_flops(prof, tok, 7 * sizeof(float) * a->n, 12.0 * (double)a->n);
}

void vb_adam_step(vb_adam *a, float *params, vb_act *params_act, const float *grads, float lr,
                  vb_profiler *prof) {
    VB_NVTX_PUSH("optimizer");
    vb_adam_set_args(a, lr);
    vb_adam_launch(a, params, params_act, grads, prof);
    VB_NVTX_POP();
}

float vb_lr_at(const char *schedule, float lr, int warmup, int num_iters, int t) {
    if (strcmp(schedule, "constant") == 0) return lr;
    if (strcmp(schedule, "cosine") != 0)
        vb_die_input("lr_schedule '%s' is unknown (expected 'cosine' or 'constant')", schedule);
    if (num_iters < 1) vb_die_input("num_iters must be >= 1 for the cosine lr_schedule (got %d)", num_iters);
    /* CosineAnnealingLR(T_max=num_iters, eta_min=0) in closed form; with warmup the
     * tutorial's LambdaLR: min((t+1)/warmup, cosine factor). Doubles, like Python. */
    const double pi = 3.14159265358979323846;
    double cosine = 0.5 * (1.0 + cos(pi * (double)t / (double)num_iters));
    double scale = cosine;
    if (warmup > 0) {
        double ramp = (double)(t + 1) / (double)warmup;
        scale = ramp < cosine ? ramp : cosine;
    }
    return (float)((double)lr * scale);
}
