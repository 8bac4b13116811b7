/* scaling_price.h: one rank's training step of the ViT priced op by op by
 * what bounds each op on a machine (machine.h's peaks, memory bandwidth and
 * efficiency), for the implementation that runs it:
 *
 *   GEMMs        FLOPs / (peak x w / (w + w0)): w the layer's narrow
 *                dimension on this rank (the smaller of its input and output
 *                features), w0 the machine's gemm_half_width (a tile's fixed
 *                cost, in units of width); never faster than its operands'
 *                bytes over the memory bandwidth
 *   attention    executed FLOPs / (peak x attention efficiency): the head
 *                dimension rounded up to the kernel's tile (FlashAttention-2
 *                instantiates head dims in multiples of 32, so 48 runs as 64);
 *                forward 4 B H Nq Nk hd, backward five products (it recomputes
 *                Q K^T), 2.5 x forward
 *   element-wise LayerNorms, residual adds, casts, GELU, bias adds: the
 *                implementation's bytes per token and feature over memory
 *                bandwidth x memory efficiency; replicated work is priced in
 *                full on every tp rank, sharded work at 1/tp
 *   optimizer    the implementation's bytes per parameter (fused Adam reads
 *                parameter, gradient and both moments and writes three)
 *
 * The op names are ops.csv's where the op exists there (matmul_forward_fc1,
 * attention_backward, adam_update, ...); the implementation's element-wise
 * work of a block is four ops: elementwise_forward, elementwise_backward
 * (replicated over tp) and elementwise_forward_sharded,
 * elementwise_backward_sharded (1/tp). Under context parallelism the
 * implementation's copies around its k, v gathers are cp_gather_copy_forward
 * and cp_gather_copy_backward; where the implementation's distributed layers
 * hand the attention float32 q, k and v, its casts to 16 bits are
 * sdpa_cast_forward and sdpa_cast_backward; and code that embeds and decodes the whole
 * sequence on every cp rank prices patch embedding, pos_embed and head at N
 * tokens, not Nl.
 *
 * Implementations (vb_impl) describe the code that runs the step: its
 * tensor-parallel collectives per block (how many, in which dtype, how they
 * overlap), its context-parallel scheme and its element-wise traffic. Every
 * number is read off the code it names (scaling_price.c says where); none
 * comes from a measured throughput.
 */
#ifndef VB_ANALYSIS_SCALING_PRICE_H
#define VB_ANALYSIS_SCALING_PRICE_H

#include <stdbool.h>
#include <stddef.h>

#include "analysis/scaling/machine.h"
#include "analysis/scaling/scaling_model.h"

typedef enum {
    VB_TP_BLOCKING,  /* every tp collective exposed (vitbench, the tutorials' custom layers) */
    VB_TP_WGRAD,     /* backward allreduce of a column-parallel layer's input gradient runs beside that
                        layer's weight-gradient GEMM: exposed max(0, allreduce - wgrad) (Megatron, TE
                        without sequence parallelism) */
    VB_TP_SP_OVERLAP /* sequence parallelism with comm overlap: allgather / reduce-scatter split in tp
                        chunks behind the GEMMs, one chunk exposed (TE userbuffers) */
} vb_tp_overlap;

typedef enum {
    VB_CP_ALLGATHER, /* k, v allgathered before attention, their gradients reduce-scattered (blocking) */
    VB_CP_RING       /* k, v passed around a ring beside attention on the chunk at hand:
                        exposed (cp - 1) max(0, transfer - attention chunk) */
} vb_cp_mode;

typedef struct vb_impl {
    const char *name;
    const char *what;          /* the code it describes */
    int tp_fwd_ar, tp_bwd_ar;  /* tensor-parallel allreduces per block, forward and backward */
    int tp_bwd_bytes;          /* bytes per element of the backward ones; 0: the activations' */
    vb_tp_overlap tp_overlap;
    vb_cp_mode cp_mode;
    bool qkv_fused;            /* q, k, v one GEMM of 3D/tp outputs (else three of D/tp) */
    bool seq_parallel;         /* replicated element-wise work split over tp (sequence parallelism) */
    /* element-wise bytes per block per token and feature (B Nl D elements) with
     * 16-bit activations (twice with float32 ones): replicated over tp, sharded
     * over tp, and what only the distributed layers' code path adds */
    double ew_fwd_repl, ew_fwd_shard, ew_bwd_repl, ew_bwd_shard;
    double ew_tp_fwd_repl, ew_tp_fwd_shard, ew_tp_bwd_repl, ew_tp_bwd_shard;
    bool dist_with_cp;         /* the distributed layers run when tp x cp > 1 (else when tp > 1) */
    /* on the distributed layers' path, the attention's own casts of q, k and v
     * to 16 bits: bytes per element of q (B Nl D/tp) and of k and v as the
     * attention sees them (B N D/tp once gathered), forward and backward */
    double attn_cast_fwd, attn_cast_bwd;
    /* context parallelism's copies around the k, v gathers, bytes per
     * token-feature of this rank's k and v (B Nl D/tp elements, 16-bit
     * activations): fixed + per_cp x cp, forward and backward */
    double cp_copy_fwd, cp_copy_fwd_per_cp, cp_copy_bwd, cp_copy_bwd_per_cp;
    int cp_kv_bytes;           /* bytes per element of the gathered k, v (0: the activations') */
    bool cp_ends_whole;        /* patch embedding, pos_embed and head run on the whole sequence on every cp rank */
    /* with cp_ends_whole: the sequence is gathered as the (B, N, D) stream at
     * this many bytes per element, before the head and (the scatter's
     * gradient) at the end of backward; 0: the head's output, once */
    int cp_ends_bytes;
    double adam_bytes;         /* optimizer bytes per parameter */
    double zero_bytes;         /* gradient zeroing bytes per parameter */
    int attn_head_tile;        /* head dims run rounded up to a multiple of this (1: as they are) */
} vb_impl;

/* The implementation named `name`, NULL when unknown. */
const vb_impl *vb_impl_find(const char *name);
/* vitbench's own (core/model/vit.c): the default of a run reference. */
const vb_impl *vb_impl_default(void);
/* Every name, comma-separated, for messages and --help. */
const char *vb_impl_names(void);
/* vb_impl_find or exit 2 naming `where` and the names known. */
const vb_impl *vb_impl_find_or_die(const char *name, const char *where);

/* GEMM efficiency of narrow dimension w on m: w / (w + gemm_half_width), 1 without one. */
double vb_price_gemm_eff(const vb_machine *m, double w);

/* Executed forward FLOPs of one block's attention on a rank: 4 B (H / tp) Nl N hd_run,
 * hd_run the head dimension rounded up to the implementation's tile. */
double vb_price_attn_fwd_flops(const vb_mdims *d, const vb_impl *im, int tp, int cp, double batch);

typedef struct vb_price_in {
    const vb_mdims *d;
    const vb_impl *impl;
    const vb_machine *m;  /* must pass vb_machine_can_price */
    int prec;             /* vb_prec of the GEMMs and attention */
    int act_bytes;        /* 2 or 4 */
    int tp, cp;
    double batch;         /* local batch */
} vb_price_in;

typedef struct vb_priced_op {
    char name[40];
    double step_s;   /* seconds per step on this rank */
    double calls;    /* per step */
    double flops;    /* per step (0: a memory-bound op) */
} vb_priced_op;

#define VB_PRICE_MAX_OPS 40

/* Every op of one rank's step priced on in->m; returns the count (<= VB_PRICE_MAX_OPS).
 * Exits 2 when the machine has no memory bandwidth or no peak in in->prec. */
int vb_price_ops(const vb_price_in *in, vb_priced_op *out);

/* The sum of vb_price_ops' times. */
double vb_price_step(const vb_price_in *in);

/* Parameters one tp rank holds (core/model/vit.c's tensor table). */
double vb_price_nparams(const vb_mdims *d, int tp);

#endif
