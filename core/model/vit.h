/* vit.h: the tutorials' ViT (networks/vit.py), forward and backward by hand.
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
 * Parallelism (vit_parallel), as the tutorials' train_mp.py / distributed/:
 *  - tensor parallel (tp, Megatron): q, k, v, fc1 are column-parallel (rank r
 *    holds output rows [r*O/tp, (r+1)*O/tp) of weight [O, C] and bias: heads
 *    [r*NH/tp, ...) and that slice of the MLP hidden dim); proj and fc2 are
 *    row-parallel (rank r holds input columns [r*C/tp, ...) of weight [O, C],
 *    bias replicated and added once after the tp allreduce of the partial
 *    sums). LayerNorm outputs enter the parallel region by identity forward /
 *    tp-allreduce of their gradient backward. Everything else is replicated
 *    over tp and its gradient comes out identical on every tp rank.
 *  - context parallel (cp): the N tokens are split over cp (vit_token_split);
 *    each rank embeds its own patches and carries only its tokens through the
 *    blocks; attention all-gathers K and V over cp (reduce-scatters their
 *    gradients). The head output is all-gathered so every cp rank computes the
 *    full prediction and the same loss. Weights are replicated over cp: their
 *    gradients are PARTIAL sums that the caller (DDP) must sum over cp.
 * The buffers hold this rank's shards (local shapes), still in state_dict
 * order; vit_tensor also records the full shape and the slice held here.
 *
 * Activations are allocated once for max_batch in vit_create; forward and
 * backward allocate nothing. All compute goes through model->ops on the
 * caller's context (model->ctx, one per rank); nothing here reads backend
 * memory on the host: the loss and the prediction stay in backend memory
 * until the caller copies them out.
 *
 * Precision: parameters, their gradients and Adam's state are float32;
 * activations are in the context's dtype (ctx->act). Forward and backward
 * read the weights through params_act, the activation-dtype copy of params,
 * which is params itself when ctx->act is float32 (the CPU).
 */
#ifndef VB_VIT_H
#define VB_VIT_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/ops.h"
#include "core/model/fp8_recipe.h"
#include "core/prof/profile.h"

typedef struct vit_dims {
    int img_h, img_w, patch;
    int cin, cout;
    int dim, depth, heads;
    float ln_eps;        /* 1e-6 */
} vit_dims;

/* Parallel layout of this rank's model shard (single rank: all 1/0).
 * The model sizes its shards from it. A communicator may be NULL with its
 * size > 1 only to inspect shards in one process (tensor table, init,
 * checkpoint load); vit_forward / vit_backward / a tp > 1 checkpoint save then
 * exit 1. When given, comm->size / comm->rank must equal *_size / *_rank. */
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
    int shape[VIT_MAX_NDIM];   /* this rank's (local) shape; == full_shape unless tp-sharded */
    size_t offset;             /* into params / grads, in floats */
    size_t numel;              /* local: product of shape */
    int init;                  /* VIT_INIT_* */
    /* sharding (tensor parallel only: cp replicates every tensor) */
    int full_shape[VIT_MAX_NDIM]; /* PyTorch state_dict shape */
    int shard_dim;             /* dim split over tp, -1 if replicated */
    int shard_offset, shard_len; /* this rank's range along shard_dim (0, 0 if replicated) */
    size_t full_offset;        /* offset in a single-rank model's buffer (checkpoint optimizer layout) */
    size_t full_numel;         /* product of full_shape */
} vit_tensor;

enum { VIT_INIT_TRUNC_NORMAL = 0, VIT_INIT_ZERO, VIT_INIT_ONE };

/* Per-layer views of one parameter-shaped buffer: T float for the gradients,
 * vb_act for the weights forward reads. */
#define VIT_BLOCK_TENSORS(T)                      \
    T *ln1_w, *ln1_b;                             \
    T *q_w, *q_b, *k_w, *k_b, *v_w, *v_b;         \
    T *proj_w, *proj_b;                           \
    T *ln2_w, *ln2_b;                             \
    T *fc1_w, *fc1_b, *fc2_w, *fc2_b;

typedef struct vit_block_params { VIT_BLOCK_TENSORS(float) } vit_block_params;
typedef struct vit_block_weights { VIT_BLOCK_TENSORS(vb_act) } vit_block_weights;

typedef struct vit_param_ptrs {      /* float32: gradients */
    float *pe_w, *pe_b, *pos;
    vit_block_params *blocks;        /* [depth] */
    float *norm_w, *norm_b, *head_w;
} vit_param_ptrs;

typedef struct vit_weight_ptrs {     /* activation dtype: params_act */
    vb_act *pe_w, *pe_b, *pos;
    vit_block_weights *blocks;       /* [depth] */
    vb_act *norm_w, *norm_b, *head_w;
} vit_weight_ptrs;

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

    vb_ctx *ctx;         /* the caller's; every op runs on it */
    const vb_ops *ops;   /* ctx->ops */
    vb_profiler *prof;   /* may be NULL */

    int ntensors;
    vit_tensor *tensors; /* host array [ntensors] */
    size_t nparams;
    float *params;       /* backend memory [nparams], float32 master weights */
    vb_act *params_act;  /* [nparams] in ctx->act: == params when that is float32 */
    float *grads;        /* backend memory [nparams] */
    vit_weight_ptrs p;   /* views into params_act (what forward and backward read) */
    vit_param_ptrs g;    /* views into grads */

    vit_grad_ready_fn grad_ready;
    void *grad_ready_ctx;
    /* backend memory [1]: the gradient backward seeds the loss with (the
     * loss scaler's scale under dynamic loss scaling); NULL: 1 */
    const float *dloss;
    /* the tutorial's enable_jit: true (vit_create's default) runs fc1's bias
     * and GELU in one pass over the GEMM's output and each residual add in
     * one pass with the LayerNorm that reads it; false runs one op for each
     * elementwise step, as eager PyTorch does. Same results up to rounding:
     * the fused bias+GELU adds the bias after the product, the unfused GEMM
     * seeds its output with the bias as nn.Linear does. */
    bool fused_elementwise;
    /* amp_mode fp8 (vit_fp8_enable): the linear layers' GEMMs read E4M3
     * inputs and weights and E5M2 output gradients under delayed scaling;
     * NULL: they read the activation dtype */
    vit_fp8 *fp8;

    int max_batch;
    int batch;           /* batch of the last forward */
    void *acts;          /* one backend buffer for every activation and scratch */
    size_t act_bytes;
    vb_act *pred;        /* [B,Cout,H,W] of the last forward (view into acts) */
    float *loss_dev;     /* backend [1]: the loss of the last forward with a target */
    float *per_sample_dev; /* backend [max_batch]: its per-sample terms */
    void *priv;          /* activation and scratch views, vit.c's business */

    /* this rank's share under vit_parallel (single rank: the full sizes) */
    int ntok_local;      /* tokens held here (cp) */
    int tok_offset;      /* first of them in the full sequence */
    int dim_local;       /* dim / tp: q/k/v output columns = heads_local * hd */
    int heads_local;     /* heads / tp */
    int hidden_local;    /* 4 * dim / tp */
    size_t nparams_full; /* nparams of a single-rank model (sum of full_numel) */
} vit_model;

/* Checks dims and the layout (exit 2 naming the value if impossible:
 * num_heads % tensor_parallel, fewer tokens than context_parallel), lays out
 * this rank's tensors, allocates params/grads/activations for up to
 * max_batch samples on ctx (created by the caller with ctx->ops->ctx_create,
 * kept by the caller; it must outlive the model). par NULL: one rank. */
vit_model *vit_create(const vit_dims *d, const vit_parallel *par, int max_batch,
                      vb_ctx *ctx, vb_profiler *prof);
void vit_destroy(vit_model *m);

/* amp_mode fp8: every GEMM of the model (patch embedding, q, k, v, proj,
 * fc1, fc2 of each block, head) runs through the backend's FP8 GEMMs with
 * Transformer Engine's DelayedScaling recipe (Format.HYBRID): forward, input
 * and weight in E4M3; backward, the output gradient in E5M2 (the bias
 * gradient from the unquantised one), and the weight and input gradients'
 * GEMMs read it with the forward's quantised operands. Each forward and
 * backward records the tensors' amaxes; vit_backward ends the step with the
 * amax reduction over agree_a and agree_b (NULL: none; together they must
 * cover every rank, so tp and cp shards and dp replicas share scales) and
 * the scale update (fp8_recipe.h). Master weights, gradients and Adam stay
 * float32. Exits 2 when the backend or its context cannot run FP8 GEMMs
 * (the CPU emulates them with float32 activations; CUDA needs bf16 and
 * compute capability 8.9 or later). GEMM g's tensors: g = 0 the patch
 * embedding, 1 the head, 2 + 6 l + {0..5} block l's q, k, v, proj, fc1,
 * fc2. */
void vit_fp8_enable(vit_model *m, const vit_fp8_recipe *r, const struct vb_comm *agree_a,
                    const struct vb_comm *agree_b);
/* The bytes vit_fp8_enable allocates (the GEMMs' scratch, scales and
 * history) on ctx for a model like vit_create's with this max_batch. */
size_t vit_fp8_footprint(const vit_dims *d, const vit_parallel *par, int max_batch, int history_len, vb_ctx *ctx);
enum { VIT_FP8_PATCH = 0, VIT_FP8_HEAD = 1, VIT_FP8_BLOCK0 = 2 };
enum { VIT_FP8_Q = 0, VIT_FP8_K, VIT_FP8_V, VIT_FP8_PROJ, VIT_FP8_FC1, VIT_FP8_FC2 };
static inline int vit_fp8_gemm(int layer, int which) { return VIT_FP8_BLOCK0 + 6 * layer + which; }

/* The tutorial's init: trunc_normal(std 0.02) for Linear weights and pos_embed
 * (and the patch-embed conv weight), zero biases, LayerNorm (1, 0). Seeded. */
void vit_init_weights(vit_model *m, uint64_t seed);

/* After params were written other than by the optimizer (a copy, a load, a
 * broadcast): refreshes params_act from them (nothing when they are the same
 * buffer). Enqueued on m->ctx. */
void vit_params_changed(vit_model *m);

/* Forward for B <= max_batch samples. inp [B,Cin,H,W] and tar [B,Cout,H,W] are
 * float32 backend memory (tar may be NULL: no loss). With a target the loss
 * goes to m->loss_dev and the per-sample terms to m->per_sample_dev: backend
 * memory, read by copying out after the step. Enqueued on m->ctx. */
void vit_forward(vit_model *m, const float *inp, const float *tar, int B);

/* Zeroes grads, backpropagates the loss of the last forward (which must have
 * had a target), calling grad_ready per tensor as gradients become final. */
void vit_backward(vit_model *m);

/* Tensor lookup by state_dict name; -1 if absent. */
int vit_find_tensor(const vit_model *m, const char *name);

/* FLOPs of one training step (forward + backward) for B samples, counting
 * 2 per multiply-add in GEMMs and attention: this rank's share. Sharded work
 * (blocks, attention) counts what this rank computes; work replicated over tp
 * (patch embedding, head) counts 1/tp of it, so the sum over the tp x cp ranks
 * of one data-parallel replica equals the single-rank count. */
/* What one rank's model needs, before it exists: its parameter shard in
 * floats (grads are as many; Adam keeps two more), the bytes of the
 * activation-dtype copy of them (0 when params serve, float32), and the bytes
 * of the activations, saved statistics and scratch (the attention workspace
 * included) for a batch of max_batch. Exactly what vit_create would allocate
 * on a context like ctx; dims and layout are checked as vit_create checks
 * them (exit 2). */
typedef struct vit_footprint {
    size_t nparams;
    size_t param_act_bytes;
    size_t act_bytes;
} vit_footprint;
vit_footprint vit_footprint_of(const vit_dims *d, const vit_parallel *par, int max_batch, vb_ctx *ctx);

/* FLOPs of this rank's forward pass on B samples, and of a training step
 * (forward and backward, 3x the forward); vit.c says what is counted */
double vit_forward_flops(const vit_model *m, int B);
double vit_train_flops(const vit_model *m, int B);

/* The tutorial's compute_split_shapes: chunk = ceil(ntok / cp), ranks
 * 0..cp-2 get chunk tokens and the last the rest; if that leaves the last
 * empty (or negative), chunk = floor(ntok / cp) instead (the last gets the
 * remainder). E.g. 4050 / 4 -> 1013 1013 1013 1011, 5 / 4 -> 1 1 1 2.
 * counts[cp], offsets[cp] (prefix sums). Exits 2 naming context_parallel when
 * cp < 1 or a rank would get no token (ntok < cp). */
void vit_token_split(int ntok, int cp, int *counts, int *offsets);

/* Copies between a full (state_dict-shaped, full_numel) tensor and one tp
 * shard of it (numel floats) whose range along t->shard_dim starts at
 * shard_offset (t->shard_offset for this rank's own; r * t->shard_len for tp
 * rank r's). Replicated tensors (shard_dim -1) are copied whole. Host memory. */
void vit_shard_extract(const vit_tensor *t, int shard_offset, const float *full, float *shard);
void vit_shard_insert(const vit_tensor *t, int shard_offset, const float *shard, float *full);

#endif
