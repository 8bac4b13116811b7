/* fp8_recipe.c: delayed scaling's per-tensor state (fp8_recipe.h). */
#include "core/model/fp8_recipe.h"

#include <stdlib.h>
#include <string.h>

#include "core/comm/comm.h"
#include "core/util/common.h"

vit_fp8 *vit_fp8_create(const vb_ops *ops, vb_ctx *ctx, int ngemm, const vit_fp8_recipe *r, size_t scratch_bytes) {
    if (r->amax_history_len < 1)
        vb_die_input("fp8_amax_history_len = %d must be >= 1", r->amax_history_len);
    if (r->margin < 0 || r->margin > VB_FP8_MAX_MARGIN)
        vb_die_input("fp8_margin = %d must be in [0, %d] (a scale above that margin is below the smallest normal float)",
                     r->margin, VB_FP8_MAX_MARGIN);
    if (!ops->fp8_matmul_forward || !ops->fp8_matmul_backward || !ops->fp8_scale_update)
        vb_die_input("amp_mode = fp8: the %s backend has no FP8 GEMMs", ops->name);
    const char *why = ops->fp8_unsupported ? ops->fp8_unsupported(ctx) : NULL;
    if (why) vb_die_input("amp_mode = fp8 on the %s backend: %s", ops->name, why);
    vit_fp8 *f = vb_malloc(sizeof *f);
    memset(f, 0, sizeof *f);
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
    f->scratch_bytes = scratch_bytes;
    f->scratch = ops->alloc(ctx, scratch_bytes ? scratch_bytes : 1);
    return f;
}

void vit_fp8_destroy(vit_fp8 *f) {
    if (!f) return;
    f->ops->synchronize(f->ctx);
    f->ops->free(f->ctx, f->scale);
    f->ops->free(f->ctx, f->history);
    f->ops->free(f->ctx, f->scratch);
    vb_free(f);
}

void vit_fp8_set_agree(vit_fp8 *f, const vb_comm *a, const vb_comm *b) {
    f->agree[0] = a;
    f->agree[1] = b;
}

void vit_fp8_gemm_state(const vit_fp8 *f, int g, vb_fp8_gemm *out) {
    if (g < 0 || g >= f->ngemm) vb_die_internal("fp8: gemm %d of %d", g, f->ngemm);
    const int tx = vit_fp8_input(f, g), tw = vit_fp8_weight(f, g), tg = vit_fp8_grad(f, g);
    *out = (vb_fp8_gemm){.scale_x = f->scale + tx,
                         .scale_w = f->scale + tw,
                         .scale_g = f->scale + tg,
                         .amax_x = vit_fp8_amax_slot(f, tx),
                         .amax_w = vit_fp8_amax_slot(f, tw),
                         .amax_g = vit_fp8_amax_slot(f, tg),
                         .scratch = f->scratch};
    if (f->frozen) out->amax_x = out->amax_w = out->amax_g = NULL;
}

void vit_fp8_step_end(vit_fp8 *f) {
    const vit_fp8_recipe *r = &f->recipe;
    const int nf = 2 * f->ngemm;
    /* every rank's row 0 becomes the max over all of them: a sharded tensor
     * (tp, cp) or a shard of the batch (dp) gets the whole one's amax, and
     * every rank the same scales (the slots hold no NaN: vb_fp8_amax_merge) */
    for (int k = 0; k < 2; k++)
        if (f->agree[k] && f->agree[k]->size > 1)
            vb_data_allreduce(f->agree[k], f->history, (size_t)f->ntensors, VB_DTYPE_F32, VB_RED_MAX, f->ctx);
    /* the forward tensors' E4M3 scales, then the gradients' E5M2 ones */
    f->ops->fp8_scale_update(f->ctx, f->scale, f->history, nf, f->ntensors, r->amax_history_len, VB_FP8_E4M3,
                             r->amax_compute_algo, r->margin);
    f->ops->fp8_scale_update(f->ctx, f->scale + nf, f->history + nf, f->ngemm, f->ntensors, r->amax_history_len,
                             VB_FP8_E5M2, r->amax_compute_algo, r->margin);
    f->steps++;
}

int vit_fp8_parse_algo(const char *s) {
    if (strcmp(s, "max") == 0) return VB_FP8_AMAX_MAX;
    if (strcmp(s, "most_recent") == 0) return VB_FP8_AMAX_MOST_RECENT;
    return -1;
}
