/* step.c: one training step's compute (step.h). */
#include "core/run/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"

void vb_adam_per_tensor(vb_adam *a, const vit_model *m) {
    size_t *off = vb_malloc_check((size_t)m->ntensors * sizeof *off), *num = vb_malloc_check((size_t)m->ntensors * sizeof *num);
    for (int i = 0; i < m->ntensors; i++) off[i] = m->tensors[i].offset, num[i] = m->tensors[i].numel;
    vb_adam_set_segments(a, m->ntensors, off, num);
    free(off);
    free(num);
}

float vb_step_lr(const vb_config *c, int global_batch, int iteration) {
    float lr = vb_lr_at(c->lr_schedule, c->lr, c->warmup, c->num_iters, iteration);
    if (c->base_batch_size > 0) lr *= sqrtf((float)global_batch / (float)c->base_batch_size);
    return lr;
}

/* The step, top to bottom, as both paths run it (the graph path records
 * it): forward; backward, DDP's bucket allreduces overlapping it and waited
 * for (with the 1/dp scaling) before the optimizer; GradScaler's unscale and
 * check of the reduced gradients; Adam, whose arguments (lr, step) the
 * caller has copied in, skipped on the device when the scaler flagged the
 * step; the scale's update. prof: per-op timing (NULL inside a recording: a
 * replay cannot re-time its ops; CUPTI's kernels.csv can). tl: the
 * timeline's forward / backward / optimizer phases, or NULL. */
static void step_body(const vb_step *s, const float *inp, const float *tar, int B, vb_profiler *prof,
                      vb_tlrec *tl) {
    vit_model *m = s->model;
    vb_profiler *model_prof = m->prof;
    m->prof = prof;
    const double t_fwd = tl ? vb_now() : 0;
    VB_NVTX_PUSH("forward");
    vit_forward(m, inp, tar, B);
    VB_NVTX_POP();

    const double t_bwd = tl ? vb_now() : 0;
    VB_NVTX_PUSH("backward");
    if (s->ddp) vb_ddp_begin_step(s->ddp);
    vit_backward(m); /* the grad_ready hook starts each bucket's allreduce */
    if (s->ddp) vb_ddp_finish(s->ddp); /* the optimizer needs every bucket, averaged */
    VB_NVTX_POP();

    const double t_opt = tl ? vb_now() : 0;
    VB_NVTX_PUSH("optimizer");
    if (s->scaler) vb_loss_scaler_unscale(s->scaler, m->grads, m->nparams, prof);
    vb_adam_launch(s->opt, m->params, m->params_act, m->grads, prof);
    if (s->scaler) vb_loss_scaler_update(s->scaler, prof);
    VB_NVTX_POP();
    m->prof = model_prof;
    if (tl) {
        const double t_end = vb_now();
        vb_tlrec_add(tl, VB_TL_MAIN, VB_TLK_PHASE, "forward", t_fwd, t_bwd - t_fwd, 0, 0, -1);
        vb_tlrec_add(tl, VB_TL_MAIN, VB_TLK_PHASE, "backward", t_bwd, t_opt - t_bwd, 0, 0, -1);
        vb_tlrec_add(tl, VB_TL_MAIN, VB_TLK_PHASE, "optimizer", t_opt, t_end - t_opt, 0, 0, -1);
    }
}

/* cuda_graphs: the first step on a (buffers, batch) key runs eagerly (it also
 * makes every lazy choice: cuBLASLt's algorithms, cuDNN's plans), the second
 * records the step and replays it, later ones replay. */
static void step_graphed(const vb_step *s, const float *inp, const float *tar, int B) {
    vit_model *m = s->model;
    vb_ctx *ctx = m->ctx;
    const vb_ops *ops = m->ops;
    vb_step_graphs *gs = s->graphs;
    if (s->ddp) vb_die_internal("cuda_graphs with DDP: the run's setup should have refused it");
    int k = 0;
    while (k < gs->n && !(gs->g[k].inp == inp && gs->g[k].tar == tar && gs->g[k].B == B)) k++;
    if (k == gs->n) {
        /* another batch size may make a library grow (free and reallocate) a
         * workspace the recorded graphs point into: they are recorded anew */
        if (gs->n > 0 && gs->g[0].B != B) {
            ops->synchronize(ctx);
            for (int j = 0; j < gs->n; j++)
                if (gs->g[j].exec) ops->graph_destroy(ctx, gs->g[j].exec);
            gs->n = 0;
        }
        if (gs->n < VB_STEP_GRAPHS_MAX) gs->g[gs->n++] = (vb_step_graph){.inp = inp, .tar = tar, .B = B};
        step_body(s, inp, tar, B, m->prof, NULL);
        gs->eager++;
        return;
    }
    const unsigned long gen = ops->workspace_generation ? ops->workspace_generation(ctx) : 0;
    if (gs->g[k].exec && gs->g[k].workspace_gen != gen) {
        /* an eager step since the recording (another batch buffer's, or a
         * validation forward) made a library reallocate a workspace this graph
         * points into: recorded anew */
        ops->synchronize(ctx);
        ops->graph_destroy(ctx, gs->g[k].exec);
        gs->g[k].exec = NULL;
        gs->rerecords++;
    }
    if (!gs->g[k].exec) {
        VB_NVTX_PUSH("cuda_graph_capture");
        ops->graph_capture_begin(ctx);
        step_body(s, inp, tar, B, NULL, NULL);
        gs->g[k].exec = ops->graph_capture_end(ctx);
        gs->g[k].workspace_gen = gen; /* a capture runs nothing, so it reallocates nothing */
        VB_NVTX_POP();
        gs->captures++;
    }
    VB_NVTX_PUSH("cuda_graph_launch");
    ops->graph_launch(ctx, gs->g[k].exec);
    VB_NVTX_POP();
    gs->replays++;
}

void vb_step_graphs_free(vb_step_graphs *g, vb_ctx *ctx) {
    if (!g) return;
    for (int k = 0; k < g->n; k++)
        if (g->g[k].exec) ctx->ops->graph_destroy(ctx, g->g[k].exec);
    memset(g, 0, sizeof *g);
}

float vb_step_train(const vb_step *s, int iteration, const float *inp, const float *tar, int B) {
    /* Adam's arguments go to backend memory from the host every step, ahead
     * of the step's work: a graph replays the update that reads them */
    const float lr = vb_step_lr(s->cfg, s->global_batch, iteration);
    vb_adam_set_args(s->opt, lr);
    if (s->graphs)
        step_graphed(s, inp, tar, B);
    else
        step_body(s, inp, tar, B, s->model->prof, vb_tlrec_active(s->timeline) ? s->timeline : NULL);
    return lr;
}
