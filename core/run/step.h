/* step.h: one training step's compute, llm.c style, on a narrow struct of
 * its own: forward, backward (DDP's bucket allreduces overlapping it), loss
 * scaling, Adam; recorded once and replayed as a CUDA graph when asked. The
 * run (trainer.h) and bench_step both run their steps through vb_step_train.
 */
#ifndef VB_STEP_H
#define VB_STEP_H

#include "core/config/config.h"
#include "core/model/amp.h"
#include "core/model/ddp.h"
#include "core/model/optim.h"
#include "core/model/vit.h"
#include "core/prof/timeline.h"

/* cuda_graphs: a step's device work (forward, backward, loss scaling, Adam's
 * update) recorded once per (input buffer, target buffer, batch) after one
 * eager step with them, then replayed as one launch. Adam's arguments (lr,
 * step) are copied in before each replay, so the schedule goes on. A run
 * stages its batches in one or two device buffers (two with dali), so a few
 * graphs cover it; a further key runs eagerly. */
enum { VB_STEP_GRAPHS_MAX = 4 };
typedef struct vb_step_graph {
    const float *inp, *tar;
    int B;
    void *exec; /* NULL until recorded */
    unsigned long workspace_gen; /* the backend's workspace generation when recorded */
} vb_step_graph;
typedef struct vb_step_graphs {
    int n;
    vb_step_graph g[VB_STEP_GRAPHS_MAX];
    long captures, replays, eager; /* steps of each kind so far */
    long rerecords;                /* graphs dropped for a workspace reallocation (of captures) */
} vb_step_graphs;

/* Frees the recorded graphs (ctx: the context they replay on). */
void vb_step_graphs_free(vb_step_graphs *g, vb_ctx *ctx);

/* One training step's compute, whoever set the run up: forward, backward with
 * DDP's bucket allreduces overlapping it, wait + 1/dp scaling, Adam with the
 * run's lr (the schedule, and the sqrt(global / base_batch_size) scaling when
 * set). vb_train_step and bench_step both run their steps through it. */
typedef struct vb_step {
    vit_model *model;
    vb_adam *opt;
    vb_ddp *ddp;            /* NULL: gradients are not reduced */
    const vb_config *cfg;   /* lr, lr_schedule, warmup, num_iters, base_batch_size */
    int global_batch;       /* samples per update over every data-parallel rank */
    vb_tlrec *timeline;     /* forward / backward / optimizer phases of windowed steps; may be NULL */
    vb_loss_scaler *scaler; /* dynamic loss scaling (core/model/amp.h); NULL: none */
    vb_step_graphs *graphs; /* cuda_graphs (one rank, no DDP); NULL: every step eager */
} vb_step;

/* enable_fused false: Adam updates m's parameter buffer one tensor at a time
 * (a launch per tensor of m->tensors), as torch.optim.Adam's default loop. */
void vb_adam_per_tensor(vb_adam *a, const vit_model *m);

/* The lr of update `iteration` (0-based) for config c. */
float vb_step_lr(const vb_config *c, int global_batch, int iteration);

/* Update `iteration` on inp / tar (B samples, backend memory); returns the lr
 * it used. Enqueued on the model's context: the loss (model->loss_dev) can be
 * copied out once the context has finished it. */
float vb_step_train(const vb_step *s, int iteration, const float *inp, const float *tar, int B);

#endif
