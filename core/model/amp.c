/* amp.c: dynamic loss scaling (amp.h). */
#include "core/model/amp.h"

#include <string.h>

#include "core/util/common.h"

void vb_loss_scaler_init(vb_loss_scaler *s, vb_ctx *ctx, float init_scale, int growth_interval,
                         const vb_comm *agree_a, const vb_comm *agree_b) {
    memset(s, 0, sizeof *s);
    if (!(init_scale > 0.0f) || growth_interval < 1)
        vb_die_internal("loss scaler: init_scale %g and growth_interval %d must be positive", (double)init_scale,
                        growth_interval);
    const vb_ops *ops = ctx->ops;
    s->ctx = ctx;
    s->init_scale = init_scale;
    s->growth_interval = growth_interval;
    s->agree[0] = agree_a;
    s->agree[1] = agree_b;
    s->dev = ops->alloc(ctx, sizeof *s->dev);
    s->host = ops->alloc_host(ctx, sizeof *s->host);
    *s->host = (vb_loss_scale_state){
        .scale = init_scale,
        .growth_interval = growth_interval,
        .growth_factor = 2.0f,
        .backoff_factor = 0.5f,
        .last_scale = init_scale,
    };
    ops->memcpy_h2d(ctx, s->dev, s->host, sizeof *s->dev);
    ops->synchronize(ctx); /* the copy has read host before the first step's copy-out rewrites it */
}

void vb_loss_scaler_free(vb_loss_scaler *s) {
    if (!s || !s->ctx) return;
    const vb_ops *ops = s->ctx->ops;
    ops->synchronize(s->ctx);
    ops->free(s->ctx, s->dev);
    ops->free_host(s->ctx, s->host);
    memset(s, 0, sizeof *s);
}

void vb_loss_scaler_unscale(vb_loss_scaler *s, float *grads, size_t n, vb_profiler *prof) {
    const vb_ops *ops = s->ctx->ops;
    vb_prof_token tok = vb_prof_begin(prof, VB_OP_ID(prof, "grad_unscale_check", VB_CAT_COMPUTE));
    ops->grad_unscale_check(s->ctx, grads, n, s->dev);
    /* reads and writes every gradient once; one multiply and one check each */
    vb_prof_end_flops(prof, tok, 2 * sizeof(float) * n, (double)n);
    for (int k = 0; k < 2; k++)
        if (s->agree[k] && s->agree[k]->size > 1)
            vb_data_allreduce(s->agree[k], &s->dev->found_inf, 1, VB_DTYPE_F32, VB_RED_MAX, s->ctx);
}

void vb_loss_scaler_update(vb_loss_scaler *s, vb_profiler *prof) {
    const vb_ops *ops = s->ctx->ops;
    vb_prof_token tok = vb_prof_begin(prof, VB_OP_ID(prof, "loss_scale_update", VB_CAT_COMPUTE));
    ops->loss_scale_update(s->ctx, s->dev);
    vb_prof_end(prof, tok, 2 * sizeof *s->dev);
    /* for the step's records; the host reads it after its next synchronize */
    ops->memcpy_d2h(s->ctx, s->host, s->dev, sizeof *s->dev);
}
