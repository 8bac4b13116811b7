/* model.h: the tutorials' ViT (networks/vit.py), forward and backward by hand.
 *
 *   x [B,Cin,H,W] -> patchify -> patch_embed Linear(Cin*p*p, D) (== Conv2d k=s=p) + pos_embed[1,N,D]
 *   depth x pre-norm block:  x += proj(attn(q(LN1 x), k(LN1 x), v(LN1 x)));  x += fc2(gelu(fc1(LN2 x)))
 *   LN (eps 1e-6) -> head Linear(D, Cout*p*p, no bias) -> unpatchify -> [B,Cout,H,W]
 *   loss = mean_b ||pred_b - tar_b|| / ||tar_b||
 *
 * Parameters live in ONE contiguous buffer (and gradients in another, same
 * layout), tensor by tensor in the PyTorch state_dict order below; DDP buckets
 * slice it. Every tensor is described by vit_tensor (name as in state_dict,
 * shape, offset), so checkpoints and buckets need no per-layer code.
 *
 * Activations are allocated once for max_batch in vit_create; forward and
 * backward allocate nothing. All compute goes through model->ops.
 */
#ifndef VB_MODEL_H
#define VB_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/ops.h"
#include "core/profile.h"

typedef struct vit_dims {
    int img_h, img_w, patch;
    int cin, cout;
    int dim, depth, heads;
    float ln_eps;        /* 1e-6 */
} vit_dims;

/* Parallel layout of this rank's model shard (single rank: all 1/0).
 * Filled by the distributed issue; the model sizes its shards from it. */
struct vb_comm;
typedef struct vit_parallel {
    int tp_size, tp_rank;     /* heads and MLP hidden split over tp */
    int cp_size, cp_rank;     /* tokens split over cp */
    const struct vb_comm *tp; /* tp group (NULL when tp_size == 1) */
    const struct vb_comm *cp; /* cp group (NULL when cp_size == 1) */
} vit_parallel;

#define VIT_MAX_NAME 64
#define VIT_MAX_NDIM 4

typedef struct vit_tensor {
    char name[VIT_MAX_NAME];   /* state_dict key, e.g. "blocks.3.attn.q.weight" */
    int ndim;
    int shape[VIT_MAX_NDIM];   /* PyTorch shape (full, unsharded for now) */
    size_t offset;             /* into params / grads, in floats */
    size_t numel;
    int init;                  /* VIT_INIT_* */
} vit_tensor;

enum { VIT_INIT_TRUNC_NORMAL = 0, VIT_INIT_ZERO, VIT_INIT_ONE };

typedef struct vit_block_params {
    float *ln1_w, *ln1_b;
    float *q_w, *q_b, *k_w, *k_b, *v_w, *v_b;
    float *proj_w, *proj_b;
    float *ln2_w, *ln2_b;
    float *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} vit_block_params;

typedef struct vit_param_ptrs {
    float *pe_w, *pe_b, *pos;
    vit_block_params *blocks;  /* [depth] */
    float *norm_w, *norm_b, *head_w;
} vit_param_ptrs;

/* Called from backward as soon as tensor `index`'s gradient is final
 * (tensors finish in reverse order). DDP buckets hook in here. */
typedef void (*vit_grad_ready_fn)(void *ctx, int tensor_index);

typedef struct vit_model {
    vit_dims d;
    vit_parallel par;
    int ntok;            /* N = (H/p)*(W/p) */
    int hd;              /* dim / heads */
    int hidden;          /* 4 * dim */
    int patch_in;        /* cin * p * p */
    int head_out;        /* cout * p * p */

    const vb_ops *ops;
    vb_profiler *prof;   /* may be NULL */

    int ntensors;
    vit_tensor *tensors; /* host array [ntensors] */
    size_t nparams;
    float *params;       /* backend memory [nparams] */
    float *grads;        /* backend memory [nparams] */
    vit_param_ptrs p, g; /* views into params / grads */

    vit_grad_ready_fn grad_ready;
    void *grad_ready_ctx;

    int max_batch;
    int batch;           /* batch of the last forward */
    float *acts;         /* one backend buffer for every activation */
    size_t nacts;
    float *pred;         /* [B,Cout,H,W] of the last forward (view into acts) */
    float loss;          /* of the last forward with a target */
    void *priv;          /* activation and scratch views, model.c's business */
} vit_model;

/* Checks dims (exit 2 naming the value if impossible), lays out tensors,
 * allocates params/grads/activations for up to max_batch samples. */
vit_model *vit_create(const vit_dims *d, const vit_parallel *par, int max_batch,
                      const vb_ops *ops, vb_profiler *prof);
void vit_destroy(vit_model *m);

/* The tutorial's init: trunc_normal(std 0.02) for Linear weights and pos_embed
 * (and the patch-embed conv weight), zero biases, LayerNorm (1, 0). Seeded. */
void vit_init_weights(vit_model *m, uint64_t seed);

/* Forward for B <= max_batch samples. inp [B,Cin,H,W] and tar [B,Cout,H,W] are
 * backend memory (tar may be NULL: no loss). Returns the loss (or 0). */
float vit_forward(vit_model *m, const float *inp, const float *tar, int B);

/* Zeroes grads, backpropagates the loss of the last forward (which must have
 * had a target), calling grad_ready per tensor as gradients become final. */
void vit_backward(vit_model *m);

/* Tensor lookup by state_dict name; -1 if absent. */
int vit_find_tensor(const vit_model *m, const char *name);

/* FLOPs of one training step (forward + backward) for B samples, counting
 * 2 per multiply-add in GEMMs and attention. */
double vit_train_flops(const vit_model *m, int B);

#endif
