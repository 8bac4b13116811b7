/* scaling_price.c: a step priced op by op by what bounds each op (scaling_price.h). */
#include "analysis/scaling/scaling_price.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/util/common.h"

/* ---- implementations ----
 *
 * Element-wise bytes are per block and per token-feature (one element of a
 * [B, Nl, D] activation), read plus written, with 16-bit activations, as the
 * named code runs them. "repl" is work every tp rank does on the whole D
 * (LayerNorms, residual adds, casts of the LayerNorm output), "shard" work on
 * its D/tp or 4D/tp share (GELU, the attention output's transpose, bias
 * gradients of column-parallel layers), expressed per feature of D before
 * the division by tp.
 *
 * The tutorials under torch.autocast: LayerNorm is on autocast's float32
 * list, so its output is float32 (4 bytes) and each Linear casts it to 16
 * bits (read 4, write 2); the residual stream is float32 (the patch embedding
 * plus the float32 pos_embed); a residual add reads the float32 stream and
 * the 16-bit branch and writes float32 (10 bytes); a LayerNorm reads the
 * stream and writes float32 (8). Backward mirrors it: a LayerNorm backward
 * reads x and dy and writes dx (12), the residual gradient sum reads two
 * float32 gradients and writes one (12), a cast's backward reads 2 and
 * writes 4 (6), the float32 gradient handed to a 16-bit branch (proj's and
 * fc2's outputs) is cast to it (autograd casts a gradient to its input's
 * dtype: read 4, write 2, 6 each), a bias gradient reads dy (2 per output
 * feature), GELU backward reads x and dy and writes dx (3 x 2 x 4 per
 * feature of D: 24), GELU forward reads and writes 4D (16), the SDPA
 * output's transpose copies it (4), forward and backward.
 * SC25 (networks/vit.py, distributed/layers.py at NERSC/sc25-dl-tutorial
 * 8c6ccde): q, k and v are three Linears, so the LayerNorm output is cast
 * three times (18 forward, 18 backward) and their three input gradients are
 * summed (two float32 adds, 24). Per block forward: LN 8 + casts 18 +
 * residual 10 + LN 8 + fc1 cast 6 + residual 10 = 60 replicated, transpose 4
 * + GELU 16 = 20 sharded; backward: residual sums 12 + 12, branch casts 6 +
 * 6, fc1 cast 6, LN 12 + 12, q/k/v casts 18, their sum 24, proj and fc2 bias
 * gradients 2 + 2 = 112 replicated, GELU 24 + transpose 4 + fc1 bias 8 +
 * q/k/v biases 6 = 42 sharded.
 * The distributed layers (networks/vit.py Block: whenever tp x cp > 1, so
 * under context parallelism too) add each bias in its own kernel after the
 * GEMM (DistributedMatmul: x_out + self.bias), and the bias is a float32
 * parameter: a 16-bit tensor plus a float32 one promotes, so every biased
 * Linear's output is float32 (ViT() sets qkv_bias=True: q, k, v, proj, fc1,
 * fc2). Forward, over the fused-bias path: proj and fc2 bias adds read 2 and
 * write 4 (6 + 6), the two residual adds read a float32 branch (+2 + 2):
 * 16 replicated; q, k, v bias adds 18, fc1's on 4D 24, GELU on float32 4D
 * (+16), fc2's input cast to 16 bits (4D, 24): 82 sharded. The attention
 * casts q, k and v back to 16 bits (autocast's list: read 4 write 2 per
 * element of q, and of k and v at the length it sees them). Backward: the
 * float32 gradient of proj's and fc2's outputs is cast at the bias add
 * instead of the residual (0) and the two bias gradients read float32 (+2 +
 * 2): 4 replicated; fc2's input cast backward 24, GELU on float32 (+24),
 * fc1's bias add cast 24 and its gradient (+8), the q, k, v bias adds'
 * casts 18 and gradients (+6): 104 sharded; the attention's casts backward
 * (read 2 write 4). Tensor parallelism: copy_to before q, k, v and fc1
 * allreduces their input gradient in backward (four per block, float32: the
 * cast's backward hands back the LayerNorm output's dtype), reduce_from
 * after proj and fc2 allreduces the 16-bit GEMM output in forward (two,
 * before the bias add); all blocking (dist.all_reduce on the compute
 * stream's order).
 * Context parallelism in the same code: networks/vit.py embeds the whole
 * image (patch embedding, pos_embed) on every rank, scatters the sequence
 * after it and gathers the final LayerNorm's float32 output back before the
 * head (the scatter's backward gathers the stream's float32 gradient), so
 * the ends run on all N tokens on each cp rank. DistributedAttention
 * allgathers k and v over cp (distributed/helpers.py _gather), float32 from
 * their bias adds: each is a permuted view of its Linear's output, made
 * contiguous (read 4, write 4: 16 for the two), gathered into one flat
 * buffer that ProcessGroupNCCL copies into the output list, then the list is
 * concatenated (two copies of cp x Nl elements read and written: 32 cp per
 * local element for the two); the attention casts the gathered k and v.
 * Backward (_reduce_scatter) splits the gathered float32 gradients along the
 * sequence and makes each chunk contiguous, and ProcessGroupNCCL flattens
 * the list into one buffer (32 cp for the two), and the reduced (B, H, Nl, hd)
 * gradient, contiguous, is permuted back and reshaped to the Linear's (B,
 * Nl, D): a copy (16 for the two). The comm hook's extra cp allreduce of the
 * shared weights' gradients is DDP's allreduce over cp x dp already; the
 * copies around the two gathers of the stream (once a step, a few
 * milliseconds) are not priced. torch.compile leaves all of these alone
 * (@torch.compiler.disable on the mappings): the compiled variant has the
 * float32 k, v and their copies too; what Inductor makes of the bias adds
 * and casts between the GEMMs is not priced (its tp path has no row).
 * SC23 (NERSC/sc23-dl-tutorial 134b013): q, k, v are one Linear (one cast,
 * one input gradient: 48 / 20 forward, 76 / 42 backward before the copies
 * below), copy_to before qkv
 * and fc1 (two backward allreduces). q, k and v are unbind()s of the
 * permuted qkv output, so backward stacks their three gradients into a new
 * tensor and reshapes the permuted stack back to the Linear's layout, a
 * second copy (2 + 2 each on 3D: +24 sharded backward, 66). Its distributed
 * layers (tp > 1; no context parallelism) promote the same way, but proj has
 * no bias there: fc2's bias add 6 and its residual add +2 (8 replicated),
 * the qkv, fc1, GELU and fc2-cast work as SC25's (82 sharded) forward;
 * backward, fc2's bias gradient reads float32 (+2) and proj has none (-2):
 * 0 replicated, SC25's 104 sharded and the stack and reshape on float32
 * gradients (+24): 128.
 * torch.compile (train.py --enable_jit): Inductor fuses each chain of
 * pointwise ops between GEMMs, so a block keeps two residual + LayerNorm
 * kernels forward (read the float32 stream and the 16-bit branch, write the
 * stream and the 16-bit LayerNorm output: 12 each) and two LayerNorm
 * backwards with the residual gradient sum (16 each): 24 / 20, 36 / 42.
 * Adam: fused (--enable_fused) reads parameter, gradient and two moments and
 * writes three, float32: 28 bytes per parameter; PyTorch's foreach Adam
 * (torch/optim/adam.py _multi_tensor_adam) makes seven passes: lerp of m
 * (12), mul and addcmul of v (8 + 12), sqrt, div and add of the denominator
 * (8 x 3), addcdiv of the parameter (16): 72. set_to_none gradients cost no
 * zeroing pass.
 * TE (networks/vit_te.py, Transformer Engine without sequence parallelism):
 * te.Linear for q, k, v and fc1 (column-parallel) and proj, fc2 (row),
 * biases fused into the GEMMs, LayerNorm and GELU as in the custom code;
 * TE allreduces a column-parallel layer's input gradient in the activation
 * dtype asynchronously and computes the weight gradient meanwhile.
 * vitbench (core/model/vit.c): the bytes its VIT_EW annotations count
 * (residual_layernorm_forward 4 elements x 2, gelu_forward 2 x 4,
 * layernorm_backward 4 x 2, gelu_backward 3 x 4; tp_reduce_add_bias 3 x 2),
 * times 2 bytes; Adam on float32 master weights plus the 16-bit copy (30),
 * the gradient buffer zeroed (4). */
static const vb_impl k_impls[] = {
    {.name = "vitbench", .what = "vitbench's own step (core/model/vit.c)", .tp_fwd_ar = 2, .tp_bwd_ar = 2,
     .tp_overlap = VB_TP_BLOCKING, .cp_mode = VB_CP_ALLGATHER, .ew_fwd_repl = 16, .ew_fwd_shard = 16,
     .ew_bwd_repl = 16, .ew_bwd_shard = 24, .ew_tp_fwd_repl = 12, .adam_bytes = 30, .zero_bytes = 4,
     .attn_head_tile = 1},
    {.name = "tutorial-sc25", .what = "the SC25 tutorial's train_mp.py without torch.compile (custom tp/cp layers)",
     .tp_fwd_ar = 2, .tp_bwd_ar = 4, .tp_bwd_bytes = 4, .tp_overlap = VB_TP_BLOCKING, .cp_mode = VB_CP_ALLGATHER,
     .ew_fwd_repl = 60, .ew_fwd_shard = 20, .ew_bwd_repl = 112, .ew_bwd_shard = 42, .ew_tp_fwd_repl = 16,
     .ew_tp_fwd_shard = 82, .ew_tp_bwd_repl = 4, .ew_tp_bwd_shard = 104, .dist_with_cp = true, .attn_cast_fwd = 6,
     .attn_cast_bwd = 6, .cp_copy_fwd = 16, .cp_copy_fwd_per_cp = 32, .cp_copy_bwd = 16, .cp_copy_bwd_per_cp = 32,
     .cp_kv_bytes = 4, .cp_ends_whole = true, .cp_ends_bytes = 4, .adam_bytes = 28, .attn_head_tile = 32},
    {.name = "tutorial-sc25-compiled", .what = "the SC25 tutorial's train.py with torch.compile and fused Adam",
     .tp_fwd_ar = 2, .tp_bwd_ar = 4, .tp_bwd_bytes = 4, .tp_overlap = VB_TP_BLOCKING, .cp_mode = VB_CP_ALLGATHER,
     .ew_fwd_repl = 24, .ew_fwd_shard = 20, .ew_bwd_repl = 36, .ew_bwd_shard = 42, .dist_with_cp = true,
     .attn_cast_fwd = 6, .attn_cast_bwd = 6, .cp_copy_fwd = 16, .cp_copy_fwd_per_cp = 32, .cp_copy_bwd = 16,
     .cp_copy_bwd_per_cp = 32, .cp_kv_bytes = 4, .cp_ends_whole = true, .cp_ends_bytes = 4, .adam_bytes = 28,
     .attn_head_tile = 32},
    {.name = "tutorial-sc23", .what = "the SC23 tutorial's train_mp.py as its README runs it (no compile, foreach Adam)",
     .tp_fwd_ar = 2, .tp_bwd_ar = 2, .tp_bwd_bytes = 4, .tp_overlap = VB_TP_BLOCKING, .cp_mode = VB_CP_ALLGATHER,
     .qkv_fused = true, .ew_fwd_repl = 48, .ew_fwd_shard = 20, .ew_bwd_repl = 76, .ew_bwd_shard = 66,
     .ew_tp_fwd_repl = 8, .ew_tp_fwd_shard = 82, .ew_tp_bwd_shard = 128, .attn_cast_fwd = 6, .attn_cast_bwd = 6,
     .adam_bytes = 72, .attn_head_tile = 32},
    {.name = "tutorial-sc23-compiled", .what = "the SC23 tutorial's train.py with torch.compile and fused Adam",
     .tp_fwd_ar = 2, .tp_bwd_ar = 2, .tp_bwd_bytes = 4, .tp_overlap = VB_TP_BLOCKING, .cp_mode = VB_CP_ALLGATHER,
     .qkv_fused = true, .ew_fwd_repl = 24, .ew_fwd_shard = 20, .ew_bwd_repl = 36, .ew_bwd_shard = 42,
     .adam_bytes = 28, .attn_head_tile = 32},
    {.name = "te", .what = "the SC25 tutorial's Transformer Engine model (networks/vit_te.py), no sequence parallelism",
     .tp_fwd_ar = 2, .tp_bwd_ar = 4, .tp_overlap = VB_TP_WGRAD, .cp_mode = VB_CP_RING, .ew_fwd_repl = 60,
     .ew_fwd_shard = 20, .ew_bwd_repl = 112, .ew_bwd_shard = 42, .adam_bytes = 28, .attn_head_tile = 32},
    {.name = "megatron", .what = "Megatron-LM / TE fused layers without sequence parallelism (wgrad overlap)",
     .tp_fwd_ar = 2, .tp_bwd_ar = 2, .tp_overlap = VB_TP_WGRAD, .cp_mode = VB_CP_RING, .qkv_fused = true,
     .ew_fwd_repl = 24, .ew_fwd_shard = 20, .ew_bwd_repl = 36, .ew_bwd_shard = 42, .adam_bytes = 28,
     .attn_head_tile = 32},
    {.name = "te-sp", .what = "Megatron-LM / TE with sequence parallelism and tp comm overlap",
     .tp_fwd_ar = 2, .tp_bwd_ar = 2, .tp_overlap = VB_TP_SP_OVERLAP, .cp_mode = VB_CP_RING, .qkv_fused = true,
     .seq_parallel = true, .ew_fwd_repl = 24, .ew_fwd_shard = 20, .ew_bwd_repl = 36, .ew_bwd_shard = 42,
     .adam_bytes = 28, .attn_head_tile = 32},
};
#define NIMPLS ((int)(sizeof k_impls / sizeof *k_impls))

const vb_impl *vb_impl_find(const char *name) {
    for (int i = 0; i < NIMPLS; i++)
        if (strcmp(k_impls[i].name, name) == 0) return &k_impls[i];
    return NULL;
}

const vb_impl *vb_impl_default(void) { return &k_impls[0]; }

const char *vb_impl_names(void) {
    static char buf[256];
    if (!buf[0]) {
        size_t len = 0;
        for (int i = 0; i < NIMPLS && len < sizeof buf; i++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? ", " : "", k_impls[i].name);
    }
    return buf;
}

const vb_impl *vb_impl_find_or_die(const char *name, const char *where) {
    const vb_impl *im = vb_impl_find(name);
    if (!im) vb_die_input("%s: implementation '%s' (expected one of %s)", where, name, vb_impl_names());
    return im;
}

/* ---- prices ---- */

double vb_price_gemm_eff(const vb_machine *m, double w) {
    return m->gemm_half_width > 0 ? w / (w + m->gemm_half_width) : 1.0;
}

double vb_price_nparams(const vb_mdims *d, int tp) {
    const double D = d->dim, Dl = D / tp, D4l = 4.0 * D / tp, pp = (double)d->patch * d->patch;
    const double block = 4 * D + 3 * (Dl * D + Dl) + D * Dl + D + D4l * D + D4l + D * D4l + D;
    return D * d->cin * pp + D + vb_mdims_ntok(d) * D + d->depth * block + 2 * D + d->cout * pp * D;
}

double vb_price_attn_fwd_flops(const vb_mdims *d, const vb_impl *im, int tp, int cp, double batch) {
    const double hd = (double)d->dim / d->heads, tile = im->attn_head_tile > 1 ? im->attn_head_tile : 1;
    const double hd_run = ceil(hd / tile) * tile;
    return 4.0 * batch * ((double)d->heads / tp) * vb_tokens_local(vb_mdims_ntok(d), cp) * vb_mdims_ntok(d) * hd_run;
}

typedef struct {
    const vb_price_in *in;
    double peak, bw; /* FLOP/s, B/s */
    vb_priced_op *out;
    int n;
} pricer;

static void put(pricer *p, const char *name, double s, double calls, double flops) {
    if (p->n >= VB_PRICE_MAX_OPS) vb_die_internal("scaling_price: more than %d ops", VB_PRICE_MAX_OPS);
    vb_priced_op *o = &p->out[p->n++];
    snprintf(o->name, sizeof o->name, "%s", name);
    o->step_s = s, o->calls = calls, o->flops = flops;
}

static double mem_s(const pricer *p, double bytes) { return bytes / (p->bw * p->in->m->mem_eff); }

/* ncalls GEMMs of M x K times K x N (forward; backward: dgrad and wgrad, or wgrad alone) */
static void gemm(pricer *p, const char *name, double ncalls, double M, double K, double N, int mult) {
    const double esz = p->in->act_bytes, f = 2.0 * M * K * N * mult;
    const double bytes = esz * (M * K + K * N + M * N) * mult;
    const double w = K < N ? K : N;
    const double t = fmax(f / (p->peak * vb_price_gemm_eff(p->in->m, w)), mem_s(p, bytes));
    put(p, name, ncalls * t, ncalls, ncalls * f);
}

int vb_price_ops(const vb_price_in *in, vb_priced_op *out) {
    const vb_machine *m = in->m;
    if (!vb_machine_can_price(m))
        vb_die_input("%s: no memory_GBps: the machine cannot price element-wise ops by their bytes", m->path);
    pricer p = {.in = in, .peak = 1e12 * vb_machine_rank_peak(m, in->prec, 1), .bw = 1e9 * m->memory_GBps, .out = out};
    if (!(p.peak > 0))
        vb_die_input("%s: no peak_tflops.%s to price the step's GEMMs with", m->path, vb_prec_name[in->prec]);
    const vb_mdims *d = in->d;
    const vb_impl *im = in->impl;
    const double B = in->batch, L = d->depth, D = d->dim, tp = in->tp, Nl = vb_tokens_local(vb_mdims_ntok(d), in->cp);
    const double M = B * Nl, M_ends = im->cp_ends_whole ? B * vb_mdims_ntok(d) : M;
    const double pp = (double)d->patch * d->patch, img = (double)d->img_h * d->img_w;
    const double act = in->act_bytes / 2.0; /* the table's bytes are for 16-bit activations */
    const double tok = M * D * act, sp = im->seq_parallel ? 1.0 / tp : 1.0;
    /* the distributed layers' path: its separate bias adds, casts and promotions */
    const double tpx = in->tp > 1 || (im->dist_with_cp && in->cp > 1) ? 1.0 : 0.0;
    const double attn_peak = p.peak * (m->attn_eff > 0 ? m->attn_eff : 1);
    const double att_f = vb_price_attn_fwd_flops(d, im, in->tp, in->cp, B);
    const double np = vb_price_nparams(d, in->tp);
    const double nq = im->qkv_fused ? 1 : 3, qkv_n = im->qkv_fused ? 3 * D / tp : D / tp;

    /* forward: the image in float32 (read, written as patches), every block, the head and loss */
    put(&p, "patchify", mem_s(&p, 8.0 * B * d->cin * img), 1, 0);
    gemm(&p, "matmul_forward_patch_embed", 1, M_ends, d->cin * pp, D, 1);
    put(&p, "add_pos_embed", mem_s(&p, 3.0 * tok * M_ends / M), 1, 0);
    gemm(&p, "matmul_forward_qkv", nq * L, M, D, qkv_n, 1);
    put(&p, "attention_forward", L * att_f / attn_peak, L, L * att_f);
    const double cpx = in->cp > 1 ? 1.0 : 0.0, kv_tok = tok / tp; /* a cp rank's k (or v) elements, x act */
    /* q over this rank's Nl tokens, k and v over the N the attention sees */
    const double cast_tok = kv_tok * (1.0 + 2.0 * in->cp);
    if (tpx > 0 && im->attn_cast_fwd > 0) put(&p, "sdpa_cast_forward", L * mem_s(&p, im->attn_cast_fwd * cast_tok), L, 0);
    if (cpx > 0 && im->cp_copy_fwd + im->cp_copy_fwd_per_cp > 0)
        put(&p, "cp_gather_copy_forward", L * mem_s(&p, (im->cp_copy_fwd + im->cp_copy_fwd_per_cp * in->cp) * kv_tok), L,
            0);
    gemm(&p, "matmul_forward_proj", L, M, D / tp, D, 1);
    gemm(&p, "matmul_forward_fc1", L, M, D, 4 * D / tp, 1);
    gemm(&p, "matmul_forward_fc2", L, M, 4 * D / tp, D, 1);
    put(&p, "elementwise_forward", L * mem_s(&p, (im->ew_fwd_repl * sp + im->ew_tp_fwd_repl * tpx) * tok), L, 0);
    put(&p, "elementwise_forward_sharded",
        L * mem_s(&p, (im->ew_fwd_shard + im->ew_tp_fwd_shard * tpx) * tok / tp), L, 0);
    put(&p, "layernorm_forward", mem_s(&p, 8.0 * tok * sp), 1, 0); /* the final norm */
    gemm(&p, "matmul_forward_head", 1, M_ends, D, d->cout * pp, 1);
    put(&p, "unpatchify", mem_s(&p, 8.0 * B * d->cout * img), 1, 0);
    put(&p, "rel_l2_loss_forward", mem_s(&p, 8.0 * B * d->cout * img), 1, 0);
    /* backward, in core/model/vit.c's order */
    if (im->zero_bytes > 0) put(&p, "zero", mem_s(&p, im->zero_bytes * np), 1, 0);
    put(&p, "rel_l2_loss_backward", mem_s(&p, 12.0 * B * d->cout * img), 1, 0);
    put(&p, "unpatchify_backward", mem_s(&p, 8.0 * B * d->cout * img), 1, 0);
    gemm(&p, "matmul_backward_head", 1, M_ends, D, d->cout * pp, 2);
    put(&p, "layernorm_backward", mem_s(&p, 12.0 * tok * sp), 1, 0);
    gemm(&p, "matmul_backward_fc2", L, M, 4 * D / tp, D, 2);
    put(&p, "elementwise_backward_sharded",
        L * mem_s(&p, (im->ew_bwd_shard + im->ew_tp_bwd_shard * tpx) * tok / tp), L, 0);
    gemm(&p, "matmul_backward_fc1", L, M, D, 4 * D / tp, 2);
    put(&p, "elementwise_backward", L * mem_s(&p, (im->ew_bwd_repl * sp + im->ew_tp_bwd_repl * tpx) * tok), L, 0);
    gemm(&p, "matmul_backward_proj", L, M, D / tp, D, 2);
    put(&p, "attention_backward", L * 2.5 * att_f / attn_peak, L, L * 2.5 * att_f);
    if (tpx > 0 && im->attn_cast_bwd > 0)
        put(&p, "sdpa_cast_backward", L * mem_s(&p, im->attn_cast_bwd * cast_tok), L, 0);
    if (cpx > 0 && im->cp_copy_bwd + im->cp_copy_bwd_per_cp > 0)
        put(&p, "cp_gather_copy_backward", L * mem_s(&p, (im->cp_copy_bwd + im->cp_copy_bwd_per_cp * in->cp) * kv_tok),
            L, 0);
    gemm(&p, "matmul_backward_qkv", nq * L, M, D, qkv_n, 2);
    put(&p, "add_pos_embed_backward", mem_s(&p, tok * M_ends / M), 1, 0);
    gemm(&p, "matmul_backward_patch_embed", 1, M_ends, d->cin * pp, D, 1); /* the weight gradient only */
    put(&p, "adam_update", mem_s(&p, im->adam_bytes * np), 1, 0);
    return p.n;
}

double vb_price_step(const vb_price_in *in) {
    vb_priced_op ops[VB_PRICE_MAX_OPS];
    const int n = vb_price_ops(in, ops);
    double s = 0;
    for (int i = 0; i < n; i++) s += ops[i].step_s;
    return s;
}
