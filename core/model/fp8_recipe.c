/* fp8_recipe.c: delayed scaling's per-tensor state (fp8_recipe.h). */
#include "core/model/fp8_recipe.h"

#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"

vit_fp8 *vit_fp8_create(const vb_ops *ops, vb_ctx *ctx, int ngemm, const vit_fp8_recipe *r, size_t xq_n,
                        size_t wq_n, size_t gq_n) {
    if (r->amax_history_len < 1)
        vb_die_input("fp8_amax_history_len = %d must be >= 1", r->amax_history_len);
    if (r->margin < 0) vb_die_input("fp8_margin = %d must be >= 0", r->margin);
    if (!ops->fp8_quantize || !ops->fp8_scale_update)
        vb_die_input("amp_mode = fp8 is only emulated on the CPU backend so far (the %s backend has no FP8 GEMMs yet)",
                     ops->name);
    vit_fp8 *f = vb_malloc(sizeof *f);
    f->recipe = *r;
    f->ops = ops;
    f->ctx = ctx;
    f->ngemm = ngemm;
    f->ntensors = 3 * ngemm;
    f->scale = ops->alloc(ctx, sizeof(float) * (size_t)f->ntensors);
    f->history = ops->alloc(ctx, sizeof(float) * (size_t)f->ntensors * (size_t)r->amax_history_len);
    /* TE starts every scale at 1: the first step quantises unscaled values */
    float *ones = vb_malloc(sizeof(float) * (size_t)f->ntensors);
    for (int i = 0; i < f->ntensors; i++) ones[i] = 1.0f;
    ops->memcpy_h2d(ctx, f->scale, ones, sizeof(float) * (size_t)f->ntensors);
    ops->synchronize(ctx);
    vb_free(ones);
    f->xq_n = xq_n, f->wq_n = wq_n, f->gq_n = gq_n;
    f->xq = ops->alloc(ctx, sizeof(float) * (xq_n ? xq_n : 1));
    f->wq = ops->alloc(ctx, sizeof(float) * (wq_n ? wq_n : 1));
    f->gq = ops->alloc(ctx, sizeof(float) * (gq_n ? gq_n : 1));
    return f;
}

void vit_fp8_destroy(vit_fp8 *f) {
    if (!f) return;
    f->ops->synchronize(f->ctx);
    f->ops->free(f->ctx, f->scale);
    f->ops->free(f->ctx, f->history);
    f->ops->free(f->ctx, f->xq);
    f->ops->free(f->ctx, f->wq);
    f->ops->free(f->ctx, f->gq);
    vb_free(f);
}

void vit_fp8_quantize(vit_fp8 *f, int t, float *out, const float *inp, size_t n, int record) {
    if (t < 0 || t >= f->ntensors) vb_die_internal("fp8: tensor %d of %d", t, f->ntensors);
    f->ops->fp8_quantize(f->ctx, out, inp, n, vit_fp8_format(f, t), f->scale + t,
                         record ? vit_fp8_amax_slot(f, t) : NULL);
}

void vit_fp8_step_end(vit_fp8 *f) {
    const vit_fp8_recipe *r = &f->recipe;
    const int nf = 2 * f->ngemm;
    /* the forward tensors' E4M3 scales, then the gradients' E5M2 ones */
    f->ops->fp8_scale_update(f->ctx, f->scale, f->history, nf, f->ntensors, r->amax_history_len, f->newest,
                             VB_FP8_E4M3, r->amax_compute_algo, r->margin);
    f->ops->fp8_scale_update(f->ctx, f->scale + nf, f->history + nf, f->ngemm, f->ntensors, r->amax_history_len,
                             f->newest, VB_FP8_E5M2, r->amax_compute_algo, r->margin);
    /* the oldest row leaves the window: the next step records over zeros */
    f->newest = (f->newest + 1) % r->amax_history_len;
    f->ops->zero(f->ctx, f->history + (size_t)f->newest * (size_t)f->ntensors, sizeof(float) * (size_t)f->ntensors);
    f->steps++;
}

int vit_fp8_parse_algo(const char *s) {
    if (strcmp(s, "max") == 0) return VB_FP8_AMAX_MAX;
    if (strcmp(s, "most_recent") == 0) return VB_FP8_AMAX_MOST_RECENT;
    return -1;
}
