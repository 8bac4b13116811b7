/* vit.c: the tutorials' ViT (networks/vit.py) forward and backward by hand,
 * every op through the backend table (kernels/ops.h), every op call timed by
 * the profiler (core/prof/profile.h), every collective through core/comm/comm.h.
 *
 * Shapes: B batch, N tokens = (H/p)(W/p), D embed dim, NH heads, HD = D/NH,
 * D4 = 4D MLP hidden. Under tensor parallelism (tp) a rank holds Dl = D/tp
 * q/k/v columns (NHl = NH/tp heads) and D4l = D4/tp hidden units; under
 * context parallelism (cp) it holds Nl of the N tokens (vit_token_split).
 * BT = B*Nl rows. Activations are [BT, C] row-major, i.e. [B, Nl, C], exactly
 * the layout of PyTorch's [B, N, C] token tensors. With tp = cp = 1 every
 * local size equals the full one and the code path is the single-rank one.
 */
#include "core/model/vit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm/comm.h"
#include "core/util/common.h"

/* Times one op call under its own name in the profiler: a token from
 * vb_prof_begin, ended after the call (the duration is resolved at the
 * profiler's next flush, once the op's work has completed). `call` may
 * contain commas (they are inside its parentheses). */
#define VIT_TIMED(m, opname, cat, call)                                 \
    do {                                                                \
        vb_prof_token vit_op_tok_ =                                     \
            vb_prof_begin((m)->prof, VB_OP_ID((m)->prof, opname, cat)); \
        call;                                                           \
        vb_prof_end((m)->prof, vit_op_tok_, 0);                         \
    } while (0)
#define VIT_OP(m, opname, call) VIT_TIMED(m, opname, VB_CAT_COMPUTE, call)
/* A compute op that reports its work: FLOPs and bytes moved (ops.csv
 * gflop_per_s / gb_per_s, timeline.csv). */
#define VIT_OPW(m, opname, flops, bytes, call)                                       \
    do {                                                                             \
        vb_prof_token vit_op_tok_ =                                                  \
            vb_prof_begin((m)->prof, VB_OP_ID((m)->prof, opname, VB_CAT_COMPUTE));  \
        call;                                                                        \
        vb_prof_end_flops((m)->prof, vit_op_tok_, (size_t)(bytes), (flops));         \
    } while (0)
/* out[M,N] = in[M,K] w[K,N]: 2MKN FLOPs, each operand touched once */
#define VIT_MM_FWD(m, role, M, K, N, call)                                                      \
    VIT_OPW(m, "matmul_forward_" role, 2.0 * (double)(M) * (K) * (N),                            \
            sizeof(float) * ((double)(M) * (K) + (double)(K) * (N) + (double)(M) * (N)), call)
/* dW (2MKN) and, when wanted, din (2MKN); reads dout, in, w, writes din, dW */
#define VIT_MM_BWD(m, role, M, K, N, has_dinp, call)                                           \
    VIT_OPW(m, "matmul_backward_" role, ((has_dinp) ? 4.0 : 2.0) * (double)(M) * (K) * (N),      \
            sizeof(float) * (2.0 * (double)(M) * (K) + 2.0 * (double)(K) * (N) + (double)(M) * (N)), call)
/* elementwise: bytes = n floats read per input + n written; FLOPs unreported */
#define VIT_EW(m, opname, nfloats_moved, call) VIT_OPW(m, opname, 0.0, sizeof(float) * (double)(nfloats_moved), call)
/* zeroing gradient buffers is memory traffic, not compute */
#define VIT_ZERO(m, ptr, nbytes) VIT_TIMED(m, "zero", VB_CAT_MEMCPY, (m)->ops->zero((m)->ctx, ptr, nbytes))

/* Saved activations of one block (views into m->acts, sized for max_batch).
 * vb_act tensors are in the context's dtype, statistics float32. */
typedef struct vit_block_acts {
    vb_act *ln1;                       /* [BT,D] */
    float *ln1_mean, *ln1_rstd;        /* [BT], [BT] */
    vb_act *q;                         /* [BT,Dl] */
    vb_act *k, *v;                     /* [B,N,Dl] each: all tokens (gathered over cp) */
    vb_act *atty;                      /* [BT,Dl] attention output before proj */
    float *lse;                        /* [B,NHl,Nl] log-sum-exp of each query's scores */
    vb_act *res_att;                   /* [BT,D] x + proj(atty) */
    vb_act *ln2;                       /* [BT,D] */
    float *ln2_mean, *ln2_rstd;        /* [BT], [BT] */
    vb_act *fc1;                       /* [BT,D4l] pre-GELU */
    vb_act *gelu;                      /* [BT,D4l] */
    vb_act *out;                       /* [BT,D] block output = res_att + fc2(gelu) */
} vit_block_acts;

typedef struct vit_acts {
    /* forward */
    vb_act *patches_all;               /* [B,N,Cin*p*p] every patch (cp > 1; else == patches) */
    vb_act *patches;                   /* [B,Nl,Cin*p*p] this rank's patches */
    vb_act *x0;                        /* [BT,D] patch embedding + pos_embed */
    vit_block_acts *blocks;            /* host array [depth] */
    vb_act *lnf;                       /* [BT,D] */
    float *lnf_mean, *lnf_rstd;        /* [BT], [BT] */
    vb_act *head;                      /* [BT,Cout*p*p] this rank's tokens */
    vb_act *head_all;                  /* [B,N,Cout*p*p] gathered over cp (cp > 1; else == head) */
    vb_act *pred;                      /* [B,Cout,H,W] */
    float *loss;                       /* [1] */
    float *per_sample;                 /* [B] loss terms */
    /* backward scratch (shared by all blocks) */
    vb_act *dpred;                     /* [B,Cout,H,W] */
    vb_act *dhead_all;                 /* [B,N,Cout*p*p] (cp > 1; else == dhead) */
    vb_act *dhead;                     /* [BT,Cout*p*p] */
    vb_act *dres;                      /* [BT,D] gradient of the residual stream */
    vb_act *dln;                       /* [BT,D] gradient of a LayerNorm output */
    vb_act *datty;                     /* [BT,Dl] */
    vb_act *dq;                        /* [BT,Dl] */
    vb_act *dk, *dv;                   /* [B,N,Dl] each: partial over cp until reduce-scattered */
    vb_act *dfc1, *dgelu;              /* [BT,D4l] each */
    void *att_ws;                      /* attention workspace, shared by every block's forward and backward */
    size_t att_ws_bytes;
    /* context-parallel staging (cp > 1 only, else NULL) */
    vb_act *kv_local;                  /* [2][B][Nl][Dl]: this rank's k then v, or their gradients */
    vb_act *cp_buf;                    /* rank-major [cp][...]: allgatherv output / reduce-scatter input */
    /* the target of the last forward (caller's memory), for backward */
    const float *tar;
    /* cp token split (host) and per-collective counts */
    int *tok_counts, *tok_offsets;     /* [cp] */
    int *coll_counts;                  /* [cp] scratch */
} vit_acts;

/* ---------------------------------------------------------------------------
 * token split and shard copies */

void vit_token_split(int ntok, int cp, int *counts, int *offsets) {
    if (cp < 1) vb_die_input("model: context_parallel must be >= 1 (got %d)", cp);
    if (ntok < cp)
        vb_die_input("model: context_parallel %d leaves a rank without tokens (%d tokens)", cp, ntok);
    /* div-up balances the load; fall back to floor when the last rank would be
     * left empty, exactly as the tutorial's compute_split_shapes */
    int chunk = (ntok + cp - 1) / cp;
    int last = ntok - chunk * (cp - 1);
    if (last <= 0) {
        chunk = ntok / cp;
        last = ntok - chunk * (cp - 1);
    }
    int off = 0;
    for (int r = 0; r < cp; r++) {
        counts[r] = r < cp - 1 ? chunk : last;
        offsets[r] = off;
        off += counts[r];
    }
}

/* A tensor seen as [outer, full_shape[shard_dim], inner]: the shard is the
 * same `outer` blocks of shard_len*inner contiguous floats. */
static void shard_geometry(const vit_tensor *t, size_t *outer, size_t *inner) {
    *outer = 1, *inner = 1;
    for (int k = 0; k < t->shard_dim; k++) *outer *= (size_t)t->full_shape[k];
    for (int k = t->shard_dim + 1; k < t->ndim; k++) *inner *= (size_t)t->full_shape[k];
}

static void shard_copy(const vit_tensor *t, int shard_offset, float *full, float *shard, bool to_full) {
    if (t->shard_dim < 0) {
        if (to_full) memcpy(full, shard, t->numel * sizeof(float));
        else memcpy(shard, full, t->numel * sizeof(float));
        return;
    }
    size_t outer, inner;
    shard_geometry(t, &outer, &inner);
    const size_t full_d = (size_t)t->full_shape[t->shard_dim], run = (size_t)t->shard_len * inner;
    for (size_t o = 0; o < outer; o++) {
        float *f = full + (o * full_d + (size_t)shard_offset) * inner;
        float *s = shard + o * run;
        if (to_full) memcpy(f, s, run * sizeof(float));
        else memcpy(s, f, run * sizeof(float));
    }
}

void vit_shard_extract(const vit_tensor *t, int shard_offset, const float *full, float *shard) {
    shard_copy(t, shard_offset, (float *)full, shard, false);
}

void vit_shard_insert(const vit_tensor *t, int shard_offset, const float *shard, float *full) {
    shard_copy(t, shard_offset, full, (float *)shard, true);
}

/* ---------------------------------------------------------------------------
 * tensor table */

/* Appends one tensor of full (state_dict) shape `shape`, split over tp along
 * `shard_dim` (-1: replicated). */
static void add_tensor(vit_model *m, int *count, size_t *offset, size_t *full_offset, int init,
                       int shard_dim, int ndim, const int *shape, const char *fmt, int layer) {
    vit_tensor *t = &m->tensors[*count];
    vb_snprintf(t->name, sizeof t->name, fmt, layer);
    t->ndim = ndim;
    t->numel = 1;
    t->full_numel = 1;
    t->shard_dim = m->par.tp_size > 1 ? shard_dim : -1;
    t->shard_offset = 0;
    t->shard_len = 0;
    for (int i = 0; i < ndim; i++) {
        t->full_shape[i] = shape[i];
        t->shape[i] = shape[i];
        if (i == t->shard_dim) {
            /* divisibility was checked in check_dims (heads % tp) */
            t->shard_len = shape[i] / m->par.tp_size;
            t->shard_offset = m->par.tp_rank * t->shard_len;
            t->shape[i] = t->shard_len;
        }
        t->numel *= (size_t)t->shape[i];
        t->full_numel *= (size_t)shape[i];
    }
    t->offset = *offset;
    t->full_offset = *full_offset;
    t->init = init;
    *offset += t->numel;
    *full_offset += t->full_numel;
    (*count)++;
}

#define T1(a) ((const int[]){a})
#define T2(a, b) ((const int[]){a, b})
enum { REPL = -1, ROWS = 0, COLS = 1 }; /* shard dims: column-parallel split rows, row-parallel columns */

/* Lays out the state_dict: names, shapes and offsets in PyTorch order. */
static void build_tensor_table(vit_model *m) {
    const int D = m->d.dim, D4 = m->hidden, L = m->d.depth, p = m->d.patch;
    m->ntensors = 3 + 16 * L + 3;
    m->tensors = vb_malloc(sizeof(vit_tensor) * (size_t)m->ntensors);
    int n = 0;
    size_t off = 0, full = 0;
#define ADD(init, sd, ndim, shape, fmt, l) add_tensor(m, &n, &off, &full, init, sd, ndim, shape, fmt, l)
    ADD(VIT_INIT_TRUNC_NORMAL, REPL, 4, ((const int[]){D, m->d.cin, p, p}), "patch_embed.proj.weight", 0);
    ADD(VIT_INIT_ZERO, REPL, 1, T1(D), "patch_embed.proj.bias", 0);
    /* pos_embed stays whole under cp: a rank reads and updates its token rows */
    ADD(VIT_INIT_TRUNC_NORMAL, REPL, 3, ((const int[]){1, m->ntok, D}), "pos_embed", 0);
    for (int l = 0; l < L; l++) {
        ADD(VIT_INIT_ONE, REPL, 1, T1(D), "blocks.%d.norm1.weight", l);
        ADD(VIT_INIT_ZERO, REPL, 1, T1(D), "blocks.%d.norm1.bias", l);
        ADD(VIT_INIT_TRUNC_NORMAL, ROWS, 2, T2(D, D), "blocks.%d.attn.q.weight", l);
        ADD(VIT_INIT_ZERO, ROWS, 1, T1(D), "blocks.%d.attn.q.bias", l);
        ADD(VIT_INIT_TRUNC_NORMAL, ROWS, 2, T2(D, D), "blocks.%d.attn.k.weight", l);
        ADD(VIT_INIT_ZERO, ROWS, 1, T1(D), "blocks.%d.attn.k.bias", l);
        ADD(VIT_INIT_TRUNC_NORMAL, ROWS, 2, T2(D, D), "blocks.%d.attn.v.weight", l);
        ADD(VIT_INIT_ZERO, ROWS, 1, T1(D), "blocks.%d.attn.v.bias", l);
        ADD(VIT_INIT_TRUNC_NORMAL, COLS, 2, T2(D, D), "blocks.%d.attn.proj.weight", l);
        ADD(VIT_INIT_ZERO, REPL, 1, T1(D), "blocks.%d.attn.proj.bias", l);
        ADD(VIT_INIT_ONE, REPL, 1, T1(D), "blocks.%d.norm2.weight", l);
        ADD(VIT_INIT_ZERO, REPL, 1, T1(D), "blocks.%d.norm2.bias", l);
        ADD(VIT_INIT_TRUNC_NORMAL, ROWS, 2, T2(D4, D), "blocks.%d.mlp.fc1.weight", l);
        ADD(VIT_INIT_ZERO, ROWS, 1, T1(D4), "blocks.%d.mlp.fc1.bias", l);
        ADD(VIT_INIT_TRUNC_NORMAL, COLS, 2, T2(D, D4), "blocks.%d.mlp.fc2.weight", l);
        ADD(VIT_INIT_ZERO, REPL, 1, T1(D), "blocks.%d.mlp.fc2.bias", l);
    }
    ADD(VIT_INIT_ONE, REPL, 1, T1(D), "norm.weight", 0);
    ADD(VIT_INIT_ZERO, REPL, 1, T1(D), "norm.bias", 0);
    ADD(VIT_INIT_TRUNC_NORMAL, REPL, 2, T2(m->head_out, D), "head.weight", 0);
#undef ADD
    if (n != m->ntensors) vb_die_internal("tensor table has %d entries, expected %d", n, m->ntensors);
    m->nparams = off;
    m->nparams_full = full;
}

/* Points the per-layer views of `base` (elements of esz bytes: grads, or
 * params_act) at the tensor table. Relies on the table order above: 3 stem
 * tensors, 16 per block, 3 at the end. A macro, since the two view structs
 * differ only in their element type. */
#define VIT_BIND_VIEWS(m, pp, block_type, base, esz)                                                   \
    do {                                                                                               \
        const vit_tensor *t_ = (m)->tensors;                                                           \
        char *b_ = (char *)(base);                                                                     \
        (pp)->pe_w = (void *)(b_ + t_[0].offset * (esz));                                              \
        (pp)->pe_b = (void *)(b_ + t_[1].offset * (esz));                                              \
        (pp)->pos = (void *)(b_ + t_[2].offset * (esz));                                               \
        (pp)->blocks = vb_malloc(sizeof(block_type) * (size_t)(m)->d.depth);                           \
        for (int l_ = 0; l_ < (m)->d.depth; l_++) {                                                    \
            const vit_tensor *bt_ = t_ + 3 + 16 * l_;                                                  \
            block_type *k_ = &(pp)->blocks[l_];                                                        \
            void *v_[16];                                                                              \
            for (int i_ = 0; i_ < 16; i_++) v_[i_] = b_ + bt_[i_].offset * (esz);                      \
            k_->ln1_w = v_[0], k_->ln1_b = v_[1], k_->q_w = v_[2], k_->q_b = v_[3];                    \
            k_->k_w = v_[4], k_->k_b = v_[5], k_->v_w = v_[6], k_->v_b = v_[7];                        \
            k_->proj_w = v_[8], k_->proj_b = v_[9], k_->ln2_w = v_[10], k_->ln2_b = v_[11];            \
            k_->fc1_w = v_[12], k_->fc1_b = v_[13], k_->fc2_w = v_[14], k_->fc2_b = v_[15];            \
        }                                                                                              \
        int e_ = 3 + 16 * (m)->d.depth;                                                                \
        (pp)->norm_w = (void *)(b_ + t_[e_].offset * (esz));                                           \
        (pp)->norm_b = (void *)(b_ + t_[e_ + 1].offset * (esz));                                       \
        (pp)->head_w = (void *)(b_ + t_[e_ + 2].offset * (esz));                                       \
    } while (0)

/* ---------------------------------------------------------------------------
 * activation layout */

/* Hands out 64-byte aligned views of one buffer. With base == NULL it only
 * measures, so the same code both sizes and carves the buffer. esz: bytes of
 * an activation element (the context's dtype). */
typedef struct {
    char *base;
    size_t used; /* bytes */
    size_t esz;
} carver;

static void *carve_bytes(carver *c, size_t bytes) {
    void *p = c->base ? c->base + c->used : NULL;
    c->used += (bytes + 63) & ~(size_t)63; /* keep every view 64-byte aligned */
    return p;
}

static vb_act *carve(carver *c, size_t n) { return carve_bytes(c, n * c->esz); }
static float *carve_f32(carver *c, size_t n) { return carve_bytes(c, n * sizeof(float)); }

/* ws_bytes: the backend's attention workspace for max_batch */
static void layout_acts(vit_model *m, vit_acts *a, carver *c, size_t ws_bytes) {
    const size_t B = (size_t)m->max_batch, N = (size_t)m->ntok, Nl = (size_t)m->ntok_local;
    const size_t D = (size_t)m->d.dim, Dl = (size_t)m->dim_local, D4l = (size_t)m->hidden_local;
    const size_t NHl = (size_t)m->heads_local, BT = B * Nl, HO = (size_t)m->head_out;
    const size_t img_out = B * (size_t)m->d.cout * (size_t)m->d.img_h * (size_t)m->d.img_w;
    const bool cp = m->par.cp_size > 1;
    a->patches = carve(c, BT * (size_t)m->patch_in);
    a->patches_all = cp ? carve(c, B * N * (size_t)m->patch_in) : a->patches;
    a->x0 = carve(c, BT * D);
    for (int l = 0; l < m->d.depth; l++) {
        vit_block_acts *b = &a->blocks[l];
        b->ln1 = carve(c, BT * D);
        b->ln1_mean = carve_f32(c, BT);
        b->ln1_rstd = carve_f32(c, BT);
        b->q = carve(c, BT * Dl);
        b->k = carve(c, B * N * Dl);
        b->v = carve(c, B * N * Dl);
        b->atty = carve(c, BT * Dl);
        b->lse = carve_f32(c, B * NHl * Nl);
        b->res_att = carve(c, BT * D);
        b->ln2 = carve(c, BT * D);
        b->ln2_mean = carve_f32(c, BT);
        b->ln2_rstd = carve_f32(c, BT);
        b->fc1 = carve(c, BT * D4l);
        b->gelu = carve(c, BT * D4l);
        b->out = carve(c, BT * D);
    }
    a->lnf = carve(c, BT * D);
    a->lnf_mean = carve_f32(c, BT);
    a->lnf_rstd = carve_f32(c, BT);
    a->head = carve(c, BT * HO);
    a->head_all = cp ? carve(c, B * N * HO) : a->head;
    a->pred = carve(c, img_out);
    a->loss = carve_f32(c, 1);
    a->per_sample = carve_f32(c, B);
    a->dpred = carve(c, img_out);
    a->dhead = carve(c, BT * HO);
    a->dhead_all = cp ? carve(c, B * N * HO) : a->dhead;
    a->dres = carve(c, BT * D);
    a->dln = carve(c, BT * D);
    a->datty = carve(c, BT * Dl);
    a->dq = carve(c, BT * Dl);
    a->dk = carve(c, B * N * Dl);
    a->dv = carve(c, B * N * Dl);
    a->dfc1 = carve(c, BT * D4l);
    a->dgelu = carve(c, BT * D4l);
    a->att_ws = carve_bytes(c, ws_bytes);
    a->att_ws_bytes = ws_bytes;
    if (cp) {
        a->kv_local = carve(c, 2 * BT * Dl);
        /* the largest rank-major exchange: k and v of all tokens, or the head output */
        const size_t kv_all = 2 * B * N * Dl, head_all = B * N * HO;
        a->cp_buf = carve(c, kv_all > head_all ? kv_all : head_all);
    } else {
        a->kv_local = a->cp_buf = NULL;
    }
}

/* ---------------------------------------------------------------------------
 * create / destroy / init */

static void check_dims(const vit_dims *d, const vit_parallel *par, int max_batch) {
    const struct { const char *key; int v; } pos[] = {
        {"img_size[0] (height)", d->img_h}, {"img_size[1] (width)", d->img_w},
        {"patch_size", d->patch},           {"n_in_channels", d->cin},
        {"n_out_channels", d->cout},        {"embed_dim", d->dim},
        {"depth", d->depth},                {"num_heads", d->heads},
        {"batch size", max_batch},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v < 1) vb_die_input("model: %s must be >= 1 (got %d)", pos[i].key, pos[i].v);
    if (d->img_h % d->patch != 0 || d->img_w % d->patch != 0)
        vb_die_input("model: img_size [%d, %d] is not divisible by patch_size %d", d->img_h,
                     d->img_w, d->patch);
    if (d->dim % d->heads != 0)
        vb_die_input("model: embed_dim %d is not divisible by num_heads %d", d->dim, d->heads);
    if (!(d->ln_eps >= 0.0f) || !isfinite(d->ln_eps))
        vb_die_input("model: layernorm eps must be >= 0 (got %g)", (double)d->ln_eps);
    /* 32-bit ints index rows and columns in the ops (and count floats in the cp
     * collectives, at most 2*B*N*D); keep every dimension product in range */
    const double ntok = (double)(d->img_h / d->patch) * (double)(d->img_w / d->patch);
    if ((double)max_batch * ntok * 4.0 * d->dim > 2147483647.0 ||
        (double)d->cin * d->patch * d->patch > 2147483647.0 ||
        (double)d->cout * d->patch * d->patch > 2147483647.0)
        vb_die_input("model: img_size [%d, %d] x embed_dim %d x batch %d is too large", d->img_h,
                     d->img_w, d->dim, max_batch);
    if (!par) return;
    if (par->tp_size < 1) vb_die_input("model: tensor_parallel must be >= 1 (got %d)", par->tp_size);
    if (par->cp_size < 1) vb_die_input("model: context_parallel must be >= 1 (got %d)", par->cp_size);
    /* whole heads per rank: rank r owns heads [r*NH/tp, (r+1)*NH/tp) */
    if (d->heads % par->tp_size != 0)
        vb_die_input("model: num_heads %d is not divisible by tensor_parallel %d", d->heads, par->tp_size);
    if (par->tp_rank < 0 || par->tp_rank >= par->tp_size || par->cp_rank < 0 || par->cp_rank >= par->cp_size)
        vb_die_internal("model: tp rank %d of %d / cp rank %d of %d out of range", par->tp_rank,
                        par->tp_size, par->cp_rank, par->cp_size);
    const struct { const char *kind; const vb_comm *c; int size, rank; } comms[2] = {
        {"tp", par->tp, par->tp_size, par->tp_rank}, {"cp", par->cp, par->cp_size, par->cp_rank}};
    for (int i = 0; i < 2; i++)
        if (comms[i].c && (comms[i].c->size != comms[i].size || comms[i].c->rank != comms[i].rank))
            vb_die_internal("model: %s communicator is rank %d of %d, layout says %d of %d", comms[i].kind,
                            comms[i].c->rank, comms[i].c->size, comms[i].rank, comms[i].size);
}

/* Dims, layout and the derived sizes (everything but memory). */
static void set_shape(vit_model *m, const vit_dims *d, const vit_parallel *par, int max_batch) {
    m->d = *d;
    /* 0 means "not set": the tutorial's LayerNorm eps */
    if (m->d.ln_eps == 0.0f) m->d.ln_eps = 1e-6f;
    if (par) m->par = *par;
    else m->par = (vit_parallel){.tp_size = 1, .tp_rank = 0, .cp_size = 1, .cp_rank = 0};
    if (m->par.tp_size == 1) m->par.tp = NULL; /* size-1 groups need no traffic */
    if (m->par.cp_size == 1) m->par.cp = NULL;
    m->ntok = (d->img_h / d->patch) * (d->img_w / d->patch);
    m->hd = d->dim / d->heads;
    m->hidden = 4 * d->dim;
    m->patch_in = d->cin * d->patch * d->patch;
    m->head_out = d->cout * d->patch * d->patch;
    m->max_batch = max_batch;
    m->heads_local = d->heads / m->par.tp_size;
    m->dim_local = m->heads_local * m->hd;
    m->hidden_local = m->hidden / m->par.tp_size;
}

static void check_ctx(const vb_ctx *ctx) {
    if (!ctx || !ctx->ops) vb_die_internal("model: NULL backend context");
}

static size_t attention_ws_bytes(const vit_model *m, vb_ctx *ctx) {
    return ctx->ops->attention_workspace_bytes(ctx, m->max_batch, m->ntok_local, m->ntok, m->heads_local, m->hd);
}

vit_footprint vit_footprint_of(const vit_dims *d, const vit_parallel *par, int max_batch, vb_ctx *ctx) {
    check_dims(d, par, max_batch);
    vit_model m;
    memset(&m, 0, sizeof m);
    set_shape(&m, d, par, max_batch);
    check_ctx(ctx);
    const int cp = m.par.cp_size;
    int *counts = vb_malloc(sizeof(int) * (size_t)cp), *offsets = vb_malloc(sizeof(int) * (size_t)cp);
    vit_token_split(m.ntok, cp, counts, offsets);
    m.ntok_local = counts[m.par.cp_rank];
    m.tok_offset = offsets[m.par.cp_rank];
    vb_free(counts);
    vb_free(offsets);
    build_tensor_table(&m);
    const size_t esz = vb_dtype_size(ctx->act);
    vit_footprint f = {.nparams = m.nparams,
                       .param_act_bytes = ctx->act == VB_DTYPE_F32 ? 0 : m.nparams * esz};
    vb_free(m.tensors);
    /* layouts of one and of two blocks give the fixed and the per-block
     * bytes (each view is padded alike), without a table as deep as the model */
    const size_t ws = attention_ws_bytes(&m, ctx);
    vit_block_acts blocks[2];
    vit_acts a;
    memset(&a, 0, sizeof a);
    a.blocks = blocks;
    carver one = {NULL, 0, esz}, two = {NULL, 0, esz};
    m.d.depth = 1;
    layout_acts(&m, &a, &one, ws);
    m.d.depth = 2;
    layout_acts(&m, &a, &two, ws);
    size_t per_block = two.used - one.used;
    f.act_bytes = one.used - per_block + per_block * (size_t)d->depth;
    return f;
}

vit_model *vit_create(const vit_dims *d, const vit_parallel *par, int max_batch, vb_ctx *ctx,
                      vb_profiler *prof) {
    if (!d || !ctx) vb_die_internal("vit_create: NULL dims or context");
    check_dims(d, par, max_batch);
    vit_model *m = vb_malloc(sizeof *m);
    set_shape(m, d, par, max_batch);
    check_ctx(ctx);
    m->ctx = ctx;
    m->ops = ctx->ops;
    m->prof = prof;
    m->fused_elementwise = true;
    const vb_ops *ops = m->ops;
    const int cp = m->par.cp_size;
    vit_acts *a = vb_malloc(sizeof *a);
    a->tok_counts = vb_malloc(sizeof(int) * (size_t)cp);
    a->tok_offsets = vb_malloc(sizeof(int) * (size_t)cp);
    a->coll_counts = vb_malloc(sizeof(int) * (size_t)cp);
    vit_token_split(m->ntok, cp, a->tok_counts, a->tok_offsets);
    m->ntok_local = a->tok_counts[m->par.cp_rank];
    m->tok_offset = a->tok_offsets[m->par.cp_rank];

    build_tensor_table(m);
    const size_t esz = vb_dtype_size(ctx->act);
    m->params = ops->alloc(ctx, m->nparams * sizeof(float));
    m->grads = ops->alloc(ctx, m->nparams * sizeof(float));
    /* float32 activations read the master weights themselves */
    m->params_act = ctx->act == VB_DTYPE_F32 ? (vb_act *)m->params : ops->alloc(ctx, m->nparams * esz);
    VIT_BIND_VIEWS(m, &m->p, vit_block_weights, m->params_act, esz);
    VIT_BIND_VIEWS(m, &m->g, vit_block_params, m->grads, sizeof(float));

    a->blocks = vb_malloc(sizeof(vit_block_acts) * (size_t)d->depth);
    const size_t ws = attention_ws_bytes(m, ctx);
    carver c = {NULL, 0, esz};
    layout_acts(m, a, &c, ws);
    m->act_bytes = c.used;
    m->acts = ops->alloc(ctx, m->act_bytes);
    c = (carver){m->acts, 0, esz};
    layout_acts(m, a, &c, ws);
    m->pred = a->pred;
    m->loss_dev = a->loss;
    m->per_sample_dev = a->per_sample;
    m->priv = a;
    return m;
}

void vit_destroy(vit_model *m) {
    if (!m) return;
    vit_acts *a = m->priv;
    /* nothing enqueued may still use the buffers */
    m->ops->synchronize(m->ctx);
    vit_fp8_destroy(m->fp8);
    m->ops->free(m->ctx, m->acts);
    if (m->params_act != (vb_act *)m->params) m->ops->free(m->ctx, m->params_act);
    m->ops->free(m->ctx, m->params);
    m->ops->free(m->ctx, m->grads);
    vb_free(a->blocks);
    vb_free(a->tok_counts);
    vb_free(a->tok_offsets);
    vb_free(a->coll_counts);
    vb_free(a);
    vb_free(m->p.blocks);
    vb_free(m->g.blocks);
    vb_free(m->tensors);
    vb_free(m);
}

/* Bytes of the FP8 GEMMs' scratch: the most any GEMM of the model needs
 * (max_batch rows). Exits 2 naming the layer when the backend's FP8 GEMMs
 * cannot take its shape. */
static size_t fp8_scratch(const vit_model *m, vb_ctx *ctx) {
    const int BT = m->max_batch * m->ntok_local, D = m->d.dim, Dl = m->dim_local, D4l = m->hidden_local;
    static const char *const names[] = {"patch_embed", "head", "q, k, v", "proj", "fc1", "fc2"};
    const int shapes[][2] = {{m->patch_in, D}, {D, m->head_out}, {D, Dl}, {Dl, D}, {D, D4l}, {D4l, D}};
    size_t most = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const size_t b = ctx->ops->fp8_scratch_bytes(ctx, BT, shapes[i][0], shapes[i][1]);
        if (b == 0)
            vb_die_input("amp_mode = fp8: the %s backend's FP8 GEMMs cannot take %s (%d inputs, %d outputs per "
                         "token; on cuda both must be multiples of 16): change embed_dim, patch_size or the channels",
                         ctx->ops->name, names[i], shapes[i][0], shapes[i][1]);
        if (b > most) most = b;
    }
    return most;
}

void vit_fp8_enable(vit_model *m, const vit_fp8_recipe *r, const vb_comm *agree_a, const vb_comm *agree_b) {
    if (m->fp8) vb_die_internal("vit_fp8_enable: already enabled");
    if (!m->ops->fp8_scratch_bytes) vb_die_input("amp_mode = fp8: the %s backend has no FP8 GEMMs", m->ops->name);
    m->fp8 = vit_fp8_create(m->ops, m->ctx, VIT_FP8_BLOCK0 + 6 * m->d.depth, r, fp8_scratch(m, m->ctx));
    vit_fp8_set_agree(m->fp8, agree_a, agree_b);
}

size_t vit_fp8_footprint(const vit_dims *d, const vit_parallel *par, int max_batch, int history_len, vb_ctx *ctx) {
    check_dims(d, par, max_batch);
    vit_model m;
    memset(&m, 0, sizeof m);
    set_shape(&m, d, par, max_batch);
    const size_t ncp = (size_t)m.par.cp_size;
    int *counts = vb_malloc(sizeof(int) * ncp), *offsets = vb_malloc(sizeof(int) * ncp);
    vit_token_split(m.ntok, m.par.cp_size, counts, offsets);
    m.ntok_local = counts[m.par.cp_rank];
    vb_free(counts);
    vb_free(offsets);
    const size_t scratch = ctx->ops->fp8_scratch_bytes ? fp8_scratch(&m, ctx) : 0;
    const size_t ntensors = 3 * (size_t)(VIT_FP8_BLOCK0 + 6 * d->depth);
    return scratch + sizeof(float) * ntensors * (1 + (size_t)(history_len > 0 ? history_len : 0));
}

void vit_params_changed(vit_model *m) {
    if (m->params_act != (vb_act *)m->params) m->ops->cast_to_act(m->ctx, m->params_act, m->params, m->nparams);
}

/* Every rank draws the FULL tensors in state_dict order from the same stream
 * and keeps its shard, so any tp layout starts from the single-rank model. */
void vit_init_weights(vit_model *m, uint64_t seed) {
    size_t max_full = 0;
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].full_numel > max_full) max_full = m->tensors[i].full_numel;
    float *host = vb_malloc(m->nparams * sizeof(float));
    float *full = vb_malloc(max_full * sizeof(float));
    vb_rng rng;
    vb_rng_seed(&rng, seed);
    for (int i = 0; i < m->ntensors; i++) {
        const vit_tensor *t = &m->tensors[i];
        for (size_t j = 0; j < t->full_numel; j++) {
            switch (t->init) {
            case VIT_INIT_TRUNC_NORMAL:
                /* torch.nn.init.trunc_normal_(std=.02) with its default absolute bounds [-2, 2] */
                full[j] = (float)vb_rng_trunc_normal(&rng, 0.0, 0.02, -2.0, 2.0);
                break;
            case VIT_INIT_ONE: full[j] = 1.0f; break;
            default: full[j] = 0.0f; break;
            }
        }
        vit_shard_extract(t, t->shard_offset, full, host + t->offset);
    }
    m->ops->memcpy_h2d(m->ctx, m->params, host, m->nparams * sizeof(float));
    vit_params_changed(m);
    /* the copy reads host until it completes */
    m->ops->synchronize(m->ctx);
    vb_free(full);
    vb_free(host);
}

int vit_find_tensor(const vit_model *m, const char *name) {
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return i;
    return -1;
}

/* ---------------------------------------------------------------------------
 * collectives and token movement */

/* A size > 1 group needs its communicator; a model built without one (for
 * inspecting shards in one process) cannot run. */
static void require_comms(const vit_model *m, const char *what) {
    if (m->par.tp_size > 1 && !m->par.tp)
        vb_die_internal("%s: tensor_parallel %d but no tp communicator", what, m->par.tp_size);
    if (m->par.cp_size > 1 && !m->par.cp)
        vb_die_internal("%s: context_parallel %d but no cp communicator", what, m->par.cp_size);
}

/* dst[b, dst_off + t, :] = src[b, src_off + t, :] for t < count and every b:
 * moves a token range between two [B, ntok, C] layouts of activations. */
static void copy_token_rows(const vit_model *m, vb_act *dst, int dst_ntok, int dst_off, const vb_act *src,
                            int src_ntok, int src_off, int count, int B, int C) {
    const size_t esz = vb_dtype_size(m->ctx->act);
    const size_t run = (size_t)count * C * esz;
    for (int b = 0; b < B; b++)
        m->ops->memcpy_d2d(m->ctx, (char *)dst + ((size_t)b * dst_ntok + dst_off) * C * esz,
                           (const char *)src + ((size_t)b * src_ntok + src_off) * C * esz, run);
}

/* cp_buf holds, rank-major, [cp][nmat][B][Nl_r][C] (the layout of a cp
 * allgatherv of [nmat][B][Nl][C] per rank). to_tokens: scatter it into the
 * token-major mats[j] [B][N][C]; else pack mats into it. */
static void cp_rearrange(const vit_model *m, vb_act *const *mats, int nmat, int B, int C, bool to_tokens) {
    const vit_acts *a = m->priv;
    vb_act *blk = a->cp_buf;
    for (int r = 0; r < m->par.cp_size; r++) {
        const int n = a->tok_counts[r], off = a->tok_offsets[r];
        for (int j = 0; j < nmat; j++) {
            if (to_tokens) copy_token_rows(m, mats[j], m->ntok, off, blk, n, 0, n, B, C);
            else copy_token_rows(m, blk, n, 0, mats[j], m->ntok, off, n, B, C);
            blk = vb_act_at(m->ctx, blk, (size_t)B * n * C);
        }
    }
}

/* Sets coll_counts[r] = elements of rank r's [nmat][B][Nl_r][C] block. */
static const int *cp_counts(const vit_model *m, int nmat, int B, int C) {
    vit_acts *a = m->priv;
    for (int r = 0; r < m->par.cp_size; r++) a->coll_counts[r] = nmat * B * a->tok_counts[r] * C;
    return a->coll_counts;
}

/* All-gathers over cp: send [nmat][B][Nl][C] (this rank's tokens, packed so
 * ONE collective moves all nmat tensors) -> mats[j] [B][N][C], every token.
 * The collectives run on the data plane in the activation dtype, ordered
 * after the model's context (the plane synchronizes it when it must). */
static void cp_allgather_tokens(vit_model *m, const vb_act *send, vb_act *const *mats, int nmat, int B, int C) {
    vit_acts *a = m->priv;
    vb_data_allgatherv(m->par.cp, send, a->cp_buf, cp_counts(m, nmat, B, C), m->ctx->act, m->ctx);
    VIT_TIMED(m, "cp_rearrange", VB_CAT_MEMCPY, cp_rearrange(m, mats, nmat, B, C, true));
}

/* The adjoint: mats[j] [B][N][C] hold this rank's partial gradients for every
 * token; recv [nmat][B][Nl][C] gets this rank's tokens summed over cp. */
static void cp_reduce_scatter_tokens(vit_model *m, vb_act *const *mats, vb_act *recv, int nmat, int B, int C) {
    vit_acts *a = m->priv;
    VIT_TIMED(m, "cp_rearrange", VB_CAT_MEMCPY, cp_rearrange(m, mats, nmat, B, C, false));
    vb_data_reduce_scatterv(m->par.cp, a->cp_buf, recv, cp_counts(m, nmat, B, C), m->ctx->act, VB_RED_SUM, m->ctx);
}

/* Sum over tp of an activation (or its gradient) every tp rank holds a partial of. */
static void tp_allreduce(vit_model *m, vb_act *x, size_t n) {
    vb_data_allreduce(m->par.tp, x, n, m->ctx->act, VB_RED_SUM, m->ctx);
}

/* Row-parallel Linear epilogue: out [BT,D] holds this rank's partial sum over
 * its input columns; sum over tp, then add the replicated bias once. */
static void tp_reduce_add_bias(vit_model *m, vb_act *out, const vb_act *bias, int BT, int D) {
    tp_allreduce(m, out, (size_t)BT * D);
    /* add_pos_embed with T = 1 adds one [D] row to each of BT rows */
    VIT_OP(m, "add_bias", m->ops->add_pos_embed(m->ctx, out, out, bias, BT, 1, D));
}

/* res += b (in place), then out = LayerNorm(res) with its statistics: one
 * pass when m->fused_elementwise, else an add and a LayerNorm (two passes
 * over res) */
static void residual_layernorm(vit_model *m, vb_act *res, vb_act *out, float *mean, float *rstd, const vb_act *b,
                               const vb_act *w, const vb_act *bias, int BT, int D, float eps) {
    vb_ctx *ctx = m->ctx;
    const vb_ops *ops = m->ops;
    if (m->fused_elementwise) {
        VIT_EW(m, "residual_layernorm_forward", 4.0 * BT * D,
               ops->residual_layernorm_forward(ctx, res, out, mean, rstd, res, b, w, bias, BT, D, eps));
        return;
    }
    VIT_EW(m, "residual_add", 3.0 * BT * D, ops->add(ctx, res, res, b, (size_t)BT * D));
    VIT_EW(m, "layernorm_forward", 2.0 * BT * D, ops->layernorm_forward(ctx, out, mean, rstd, res, w, bias, BT, D, eps));
}

/* ---------------------------------------------------------------------------
 * forward */

/* ---------------------------------------------------------------------------
 * amp_mode fp8 (vit_fp8_enable): the operands a GEMM reads */

/* out = inp @ w^T + bias: GEMM g of the model, through the backend's FP8
 * GEMM under fp8 (its input and weight amaxes recorded), else the plain one */
static void linear_forward(vit_model *m, int g, vb_act *out, const vb_act *inp, const vb_act *w, const vb_act *bias,
                           int N, int C, int OC) {
    if (m->fp8) {
        vb_fp8_gemm q;
        vit_fp8_gemm_state(m->fp8, g, &q);
        m->ops->fp8_matmul_forward(m->ctx, out, inp, w, bias, N, C, OC, &q);
    } else {
        m->ops->matmul_forward(m->ctx, out, inp, w, bias, N, C, OC);
    }
}

/* linear_forward's gradients (matmul_backward's contract); under fp8 the
 * output gradient's amax is recorded */
static void linear_backward(vit_model *m, int g, vb_act *dinp, float *dw, float *db, const vb_act *dout,
                            const vb_act *inp, const vb_act *w, int N, int C, int OC, int accumulate_dinp) {
    if (m->fp8) {
        vb_fp8_gemm q;
        vit_fp8_gemm_state(m->fp8, g, &q);
        m->ops->fp8_matmul_backward(m->ctx, dinp, dw, db, dout, inp, w, N, C, OC, accumulate_dinp, &q);
    } else {
        m->ops->matmul_backward(m->ctx, dinp, dw, db, dout, inp, w, N, C, OC, accumulate_dinp);
    }
}

void vit_forward(vit_model *m, const float *inp, const float *tar, int B) {
    if (B < 1 || B > m->max_batch)
        vb_die_internal("vit_forward: batch %d outside [1, max_batch %d]", B, m->max_batch);
    require_comms(m, "vit_forward");
    const vb_ops *ops = m->ops;
    vb_ctx *ctx = m->ctx;
    vit_acts *a = m->priv;
    const vit_dims *d = &m->d;
    const int N = m->ntok, Nl = m->ntok_local, D = d->dim, HD = m->hd;
    const int Dl = m->dim_local, D4l = m->hidden_local, NHl = m->heads_local;
    const int BT = B * Nl;
    const bool tp = m->par.tp_size > 1, cp = m->par.cp_size > 1;
    const float eps = d->ln_eps;

    VB_NVTX_PUSH("forward");
    m->batch = B;
    a->tar = tar;

    /* patch embedding: Conv2d(k = s = p) == patchify + Linear(Cin*p*p, D), on
     * this rank's tokens only; their rows of pos_embed */
    const double nin = (double)B * d->cin * d->img_h * d->img_w, nout = (double)B * d->cout * d->img_h * d->img_w;
    VIT_EW(m, "patchify", 2.0 * nin, ops->patchify(ctx, a->patches_all, inp, B, d->cin, d->img_h, d->img_w, d->patch));
    if (cp)
        VIT_TIMED(m, "cp_slice", VB_CAT_MEMCPY,
                  copy_token_rows(m, a->patches, Nl, 0, a->patches_all, N, m->tok_offset, Nl, B, m->patch_in));
    VIT_MM_FWD(m, "patch_embed", BT, m->patch_in, D,
               linear_forward(m, VIT_FP8_PATCH, a->x0, a->patches, m->p.pe_w, m->p.pe_b, BT, m->patch_in, D));
    VIT_OP(m, "add_pos_embed",
           ops->add_pos_embed(ctx, a->x0, a->x0, vb_act_at(ctx, m->p.pos, (size_t)m->tok_offset * D), B, Nl, D));
    /* the first LN1 (depth >= 1: check_dims); every later LayerNorm is fused
     * with the residual add before it */
    {
        const vit_block_weights *w0 = &m->p.blocks[0];
        vit_block_acts *s0 = &a->blocks[0];
        VIT_EW(m, "layernorm_forward", 2.0 * BT * D,
               ops->layernorm_forward(ctx, s0->ln1, s0->ln1_mean, s0->ln1_rstd, a->x0, w0->ln1_w, w0->ln1_b, BT, D,
                                      eps));
    }

    const vb_act *x = a->x0; /* residual stream entering the block */
    for (int l = 0; l < d->depth; l++) {
        const vit_block_weights *w = &m->p.blocks[l];
        vit_block_acts *s = &a->blocks[l];
        /* x + attn(LN1(x)); LN1's output (s->ln1, made by the previous block's
         * fused residual add) enters the tp region as is (identity) */
        /* column-parallel q, k, v: this rank's heads */
        /* under fp8 each of q, k, v quantises LN1's output with its own
         * scale, as three separate te.Linear layers would */
        VIT_MM_FWD(m, "qkv", BT, D, Dl, linear_forward(m, vit_fp8_gemm(l, VIT_FP8_Q), s->q, s->ln1, w->q_w, w->q_b, BT, D, Dl));
        /* k then v of the local tokens side by side under cp, one allgatherv for both */
        vb_act *kout = cp ? a->kv_local : s->k;
        vb_act *vout = cp ? vb_act_at(ctx, a->kv_local, (size_t)BT * Dl) : s->v;
        VIT_MM_FWD(m, "qkv", BT, D, Dl, linear_forward(m, vit_fp8_gemm(l, VIT_FP8_K), kout, s->ln1, w->k_w, w->k_b, BT, D, Dl));
        VIT_MM_FWD(m, "qkv", BT, D, Dl, linear_forward(m, vit_fp8_gemm(l, VIT_FP8_V), vout, s->ln1, w->v_w, w->v_b, BT, D, Dl));
        if (cp) {
            vb_act *kv[2] = {s->k, s->v};
            cp_allgather_tokens(m, a->kv_local, kv, 2, B, Dl);
        }
        /* local queries against every token's keys and values */
        /* q k^T and P v: 2 x 2 B NHl Nl N HD; reads q, k, v, writes out and the log-sum-exps */
        VIT_OPW(m, "attention_forward", 4.0 * B * NHl * (double)Nl * N * HD,
                sizeof(float) * (2.0 * BT * Dl + 2.0 * (double)B * N * Dl + (double)B * NHl * Nl),
                ops->attention_forward(ctx, s->atty, s->lse, a->att_ws, s->q, s->k, s->v, B, Nl, N, NHl, HD));
        /* row-parallel proj: partial sums, then tp allreduce + bias */
        VIT_MM_FWD(m, "proj", BT, Dl, D,
                   linear_forward(m, vit_fp8_gemm(l, VIT_FP8_PROJ), s->res_att, s->atty, w->proj_w,
                                  tp ? NULL : w->proj_b, BT, Dl, D));
        if (tp) tp_reduce_add_bias(m, s->res_att, w->proj_b, BT, D);
        /* res_att = x + proj(...), and LN2 of it in the same pass (after the tp
         * sum and bias: the residual needs the whole projection) */
        residual_layernorm(m, s->res_att, s->ln2, s->ln2_mean, s->ln2_rstd, x, w->ln2_w, w->ln2_b, BT, D, eps);
        /* + mlp(LN2(.)): column-parallel fc1 with its GELU (fused unless
         * m->fused_elementwise is off), row-parallel fc2 */
        /* (the FP8 GEMM has no fused GELU) */
        if (m->fused_elementwise && !m->fp8) {
            VIT_MM_FWD(m, "fc1", BT, D, D4l,
                       ops->matmul_bias_gelu_forward(ctx, s->fc1, s->gelu, s->ln2, w->fc1_w, w->fc1_b, BT, D, D4l));
        } else {
            VIT_MM_FWD(m, "fc1", BT, D, D4l,
                       linear_forward(m, vit_fp8_gemm(l, VIT_FP8_FC1), s->fc1, s->ln2, w->fc1_w, w->fc1_b, BT, D, D4l));
            VIT_EW(m, "gelu_forward", 2.0 * BT * D4l, ops->gelu_forward(ctx, s->gelu, s->fc1, (size_t)BT * D4l));
        }
        VIT_MM_FWD(m, "fc2", BT, D4l, D,
                   linear_forward(m, vit_fp8_gemm(l, VIT_FP8_FC2), s->out, s->gelu, w->fc2_w, tp ? NULL : w->fc2_b,
                                  BT, D4l, D));
        if (tp) tp_reduce_add_bias(m, s->out, w->fc2_b, BT, D);
        /* out = res_att + mlp(...), fused with the LayerNorm that reads it:
         * the next block's LN1, or the final norm */
        vb_act *ln_out;
        float *ln_mean, *ln_rstd;
        const vb_act *ln_w, *ln_b;
        if (l + 1 < d->depth) {
            vit_block_acts *sn = &a->blocks[l + 1];
            ln_out = sn->ln1, ln_mean = sn->ln1_mean, ln_rstd = sn->ln1_rstd;
            ln_w = m->p.blocks[l + 1].ln1_w, ln_b = m->p.blocks[l + 1].ln1_b;
        } else {
            ln_out = a->lnf, ln_mean = a->lnf_mean, ln_rstd = a->lnf_rstd;
            ln_w = m->p.norm_w, ln_b = m->p.norm_b;
        }
        residual_layernorm(m, s->out, ln_out, ln_mean, ln_rstd, s->res_att, ln_w, ln_b, BT, D, eps);
        x = s->out;
    }

    VIT_MM_FWD(m, "head", BT, D, m->head_out,
               linear_forward(m, VIT_FP8_HEAD, a->head, a->lnf, m->p.head_w, NULL, BT, D, m->head_out));
    /* every cp rank assembles the whole sequence: full prediction, same loss */
    if (cp) cp_allgather_tokens(m, a->head, &a->head_all, 1, B, m->head_out);
    VIT_EW(m, "unpatchify", 2.0 * nout,
           ops->unpatchify(ctx, a->pred, a->head_all, B, d->cout, d->img_h, d->img_w, d->patch));

    if (tar) {
        const size_t n = (size_t)d->cout * d->img_h * d->img_w;
        VIT_EW(m, "rel_l2_loss_forward", 2.0 * nout,
               ops->rel_l2_loss_forward(ctx, a->loss, a->per_sample, a->pred, tar, B, n));
    }
    VB_NVTX_POP();
}

/* ---------------------------------------------------------------------------
 * backward */

/* Tells the caller (DDP buckets) that tensors [first, last] are final, in
 * reverse index order as the contract promises. */
static void grads_ready(vit_model *m, int last, int first) {
    if (!m->grad_ready) return;
    for (int i = last; i >= first; i--) m->grad_ready(m->grad_ready_ctx, i);
}

void vit_backward(vit_model *m) {
    vit_acts *a = m->priv;
    if (!a->tar) vb_die_internal("vit_backward: the last forward had no target");
    require_comms(m, "vit_backward");
    const vb_ops *ops = m->ops;
    vb_ctx *ctx = m->ctx;
    const vit_dims *d = &m->d;
    const int B = m->batch, N = m->ntok, Nl = m->ntok_local, D = d->dim, HD = m->hd;
    const int Dl = m->dim_local, D4l = m->hidden_local, NHl = m->heads_local;
    const int BT = B * Nl;
    const bool tp = m->par.tp_size > 1, cp = m->par.cp_size > 1;
    const size_t nD = (size_t)BT * D, nD4l = (size_t)BT * D4l;
    const size_t nimg = (size_t)d->cout * d->img_h * d->img_w;
    const size_t esz = vb_dtype_size(ctx->act);

    VB_NVTX_PUSH("backward");
    /* parameter gradients accumulate: one zeroing per step. Input gradients
     * are overwritten by their op, so no activation gradient is zeroed except
     * dres, which only LayerNorm backwards (+=) write. */
    VIT_ZERO(m, m->grads, m->nparams * sizeof(float));

    /* loss -> head tokens. Every cp rank has the whole dpred; each keeps its
     * own tokens' rows, so together they backpropagate each token once. */
    VIT_OP(m, "rel_l2_loss_backward", ops->rel_l2_loss_backward(ctx, a->dpred, a->pred, a->tar, B, nimg, m->dloss));
    VIT_OP(m, "unpatchify_backward",
           ops->unpatchify_backward(ctx, a->dhead_all, a->dpred, B, d->cout, d->img_h, d->img_w, d->patch));
    if (cp)
        VIT_TIMED(m, "cp_slice", VB_CAT_MEMCPY,
                  copy_token_rows(m, a->dhead, Nl, 0, a->dhead_all, N, m->tok_offset, Nl, B, m->head_out));

    /* head (no bias), then the final LayerNorm into the residual gradient */
    VIT_MM_BWD(m, "head", BT, D, m->head_out, true,
               linear_backward(m, VIT_FP8_HEAD, a->dln, m->g.head_w, NULL, a->dhead, a->lnf, m->p.head_w, BT, D,
                               m->head_out, 0));
    int t = m->ntensors - 1;
    grads_ready(m, t, t); /* head.weight */
    const vb_act *x_last = a->blocks[d->depth - 1].out;
    VIT_ZERO(m, a->dres, nD * esz);
    VIT_EW(m, "layernorm_backward", 4.0 * BT * D,
           ops->layernorm_backward(ctx, a->dres, m->g.norm_w, m->g.norm_b, a->dln, x_last, m->p.norm_w,
                                   a->lnf_mean, a->lnf_rstd, BT, D));
    grads_ready(m, t - 1, t - 2); /* norm.bias, norm.weight */

    /* dres holds d(block output); each block turns it into d(block input) in place.
     * The residual connections are the "+=" of layernorm_backward into dres.
     * dres is the same on every tp rank, so everything replicated over tp
     * (LayerNorms, the proj/fc2 biases, which sum the full dres) gets the same
     * gradient on every tp rank. */
    for (int l = d->depth - 1; l >= 0; l--) {
        const vit_block_weights *w = &m->p.blocks[l];
        vit_block_params *g = &m->g.blocks[l];
        const vit_block_acts *s = &a->blocks[l];
        const vb_act *x = l > 0 ? a->blocks[l - 1].out : a->x0;
        const int base = 3 + 16 * l; /* index of blocks.l.norm1.weight */

        /* out = res_att + fc2(gelu(fc1(LN2(res_att)))) */
        VIT_MM_BWD(m, "fc2", BT, D4l, D, true,
                   linear_backward(m, vit_fp8_gemm(l, VIT_FP8_FC2), a->dgelu, g->fc2_w, g->fc2_b, a->dres, s->gelu,
                                   w->fc2_w, BT, D4l, D, 0));
        grads_ready(m, base + 15, base + 14); /* fc2.bias, fc2.weight */
        VIT_EW(m, "gelu_backward", 3.0 * nD4l, ops->gelu_backward(ctx, a->dfc1, s->fc1, a->dgelu, nD4l));
        VIT_MM_BWD(m, "fc1", BT, D, D4l, true,
                   linear_backward(m, vit_fp8_gemm(l, VIT_FP8_FC1), a->dln, g->fc1_w, g->fc1_b, a->dfc1, s->ln2,
                                   w->fc1_w, BT, D, D4l, 0));
        grads_ready(m, base + 13, base + 12); /* fc1.bias, fc1.weight */
        /* leaving the tp region: LN2's output fed every rank's fc1 shard */
        if (tp) tp_allreduce(m, a->dln, nD);
        VIT_EW(m, "layernorm_backward", 4.0 * BT * D,
               ops->layernorm_backward(ctx, a->dres, g->ln2_w, g->ln2_b, a->dln, s->res_att, w->ln2_w,
                                       s->ln2_mean, s->ln2_rstd, BT, D));
        grads_ready(m, base + 11, base + 10); /* norm2.bias, norm2.weight */

        /* res_att = x + proj(attention(q, k, v)) */
        VIT_MM_BWD(m, "proj", BT, Dl, D, true,
                   linear_backward(m, vit_fp8_gemm(l, VIT_FP8_PROJ), a->datty, g->proj_w, g->proj_b, a->dres,
                                   s->atty, w->proj_w, BT, Dl, D, 0));
        grads_ready(m, base + 9, base + 8); /* proj.bias, proj.weight */
        /* flash-style backward: recomputes the probabilities from q, k and the
         * saved log-sum-exps; S = q k^T and P, then dv = P^T dO, dP = dO v^T,
         * dq, dk: 5 GEMMs of 2 B NHl Nl N HD */
        VIT_OPW(m, "attention_backward", 10.0 * B * NHl * (double)Nl * N * HD,
                sizeof(float) * (4.0 * BT * Dl + 4.0 * (double)B * N * Dl + (double)B * NHl * Nl),
                ops->attention_backward(ctx, a->dq, a->dk, a->dv, a->att_ws, a->datty, s->atty, s->lse, s->q, s->k,
                                        s->v, B, Nl, N, NHl, HD));
        /* dk, dv cover every token but only this rank's queries: sum over cp
         * and keep this rank's tokens */
        const vb_act *dk = a->dk, *dv = a->dv;
        if (cp) {
            vb_act *kv[2] = {a->dk, a->dv};
            cp_reduce_scatter_tokens(m, kv, a->kv_local, 2, B, Dl);
            dk = a->kv_local;
            dv = vb_act_at(ctx, a->kv_local, (size_t)BT * Dl);
        }
        /* v, k, q in that order so their gradients finish in reverse tensor
         * order; the first overwrites dln, the other two add to it */
        VIT_MM_BWD(m, "qkv", BT, D, Dl, true,
                   linear_backward(m, vit_fp8_gemm(l, VIT_FP8_V), a->dln, g->v_w, g->v_b, dv, s->ln1, w->v_w, BT, D,
                                   Dl, 0));
        grads_ready(m, base + 7, base + 6); /* v.bias, v.weight */
        VIT_MM_BWD(m, "qkv", BT, D, Dl, true,
                   linear_backward(m, vit_fp8_gemm(l, VIT_FP8_K), a->dln, g->k_w, g->k_b, dk, s->ln1, w->k_w, BT, D,
                                   Dl, 1));
        grads_ready(m, base + 5, base + 4); /* k.bias, k.weight */
        VIT_MM_BWD(m, "qkv", BT, D, Dl, true,
                   linear_backward(m, vit_fp8_gemm(l, VIT_FP8_Q), a->dln, g->q_w, g->q_b, a->dq, s->ln1, w->q_w, BT,
                                   D, Dl, 1));
        grads_ready(m, base + 3, base + 2); /* q.bias, q.weight */
        if (tp) tp_allreduce(m, a->dln, nD);
        VIT_EW(m, "layernorm_backward", 4.0 * BT * D,
               ops->layernorm_backward(ctx, a->dres, g->ln1_w, g->ln1_b, a->dln, x, w->ln1_w, s->ln1_mean,
                                       s->ln1_rstd, BT, D));
        grads_ready(m, base + 1, base); /* norm1.bias, norm1.weight */
    }

    /* x0 = patch_embed(patches) + pos_embed: only this rank's pos_embed rows
     * get a gradient here; the cp sum of the caller fills in the rest */
    VIT_OP(m, "add_pos_embed_backward",
           ops->add_pos_embed_backward(ctx, m->g.pos + (size_t)m->tok_offset * D, a->dres, B, Nl, D));
    grads_ready(m, 2, 2); /* pos_embed */
    /* dinp NULL: the patches are input data */
    VIT_MM_BWD(m, "patch_embed", BT, m->patch_in, D, false,
               linear_backward(m, VIT_FP8_PATCH, NULL, m->g.pe_w, m->g.pe_b, a->dres, a->patches, m->p.pe_w, BT,
                               m->patch_in, D, 0));
    grads_ready(m, 1, 0); /* patch_embed.proj.bias, .weight */
    /* the step's amaxes are all recorded: delayed scaling's update */
    if (m->fp8) VIT_OP(m, "fp8_scale_update", vit_fp8_step_end(m->fp8));
    VB_NVTX_POP();
}

/* ---------------------------------------------------------------------------
 * FLOPs
 *
 * Forward GEMMs per token (2 FLOPs per multiply-add):
 *   patch embed  patch_in*D, per block q,k,v,proj 4*D^2 and fc1,fc2 8*D^2,
 *   head         D*head_out
 * Attention per block and sample: q k^T and att v are NH * N^2 * HD MACs each.
 *   forward = 2*B*N*(patch_in*D + depth*12*D^2 + head_out*D) + depth*2*B*NH*2*N^2*HD
 * Backward costs twice the forward (dinp and dweight GEMMs), so a training step
 * is 3x forward. Elementwise ops, LayerNorm and softmax are not counted (the
 * usual MFU convention); the first layer's skipped dinp GEMM is ignored too.
 *
 * This rank's share: its Nl tokens (cp), its 1/tp of every block GEMM and of
 * the heads (Nl queries x N keys each), and 1/tp of the patch embedding and
 * head, which every tp rank computes in full. */
double vit_forward_flops(const vit_model *m, int B) {
    const double N = m->ntok, Nl = m->ntok_local, D = m->d.dim, L = m->d.depth, HD = m->hd;
    const double tp = m->par.tp_size, NHl = m->heads_local;
    const double gemm = 2.0 * B * Nl * (((double)m->patch_in * D + (double)m->head_out * D) / tp +
                                        L * (4.0 * D * D + 8.0 * D * D) / tp);
    const double attn = L * 2.0 * B * NHl * 2.0 * Nl * N * HD;
    return gemm + attn;
}

/* backward: twice the forward's GEMM and attention FLOPs */
double vit_train_flops(const vit_model *m, int B) { return 3.0 * vit_forward_flops(m, B); }
