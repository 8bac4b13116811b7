/* model.c: the tutorials' ViT (networks/vit.py) forward and backward by hand,
 * every op through the backend table (kernels/ops.h), every op call timed by
 * the profiler (core/profile.h), every collective through core/comm.h.
 *
 * Shapes: B batch, N tokens = (H/p)(W/p), D embed dim, NH heads, HD = D/NH,
 * D4 = 4D MLP hidden. Under tensor parallelism (tp) a rank holds Dl = D/tp
 * q/k/v columns (NHl = NH/tp heads) and D4l = D4/tp hidden units; under
 * context parallelism (cp) it holds Nl of the N tokens (vit_token_split).
 * BT = B*Nl rows. Activations are [BT, C] row-major, i.e. [B, Nl, C], exactly
 * the layout of PyTorch's [B, N, C] token tensors. With tp = cp = 1 every
 * local size equals the full one and the code path is the single-rank one.
 */
#include "core/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/common.h"

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
#define VIT_ZERO(m, ptr, nbytes) VIT_TIMED(m, "zero", VB_CAT_MEMCPY, (m)->ops->zero(ptr, nbytes))

/* Saved activations of one block (views into m->acts, sized for max_batch). */
typedef struct vit_block_acts {
    float *ln1, *ln1_mean, *ln1_rstd;  /* [BT,D], [BT], [BT] */
    float *q;                          /* [BT,Dl] */
    float *k, *v;                      /* [B,N,Dl] each: all tokens (gathered over cp) */
    float *att;                        /* [B,NHl,Nl,N] softmax probabilities */
    float *atty;                       /* [BT,Dl] attention output before proj */
    float *res_att;                    /* [BT,D] x + proj(atty) */
    float *ln2, *ln2_mean, *ln2_rstd;  /* [BT,D], [BT], [BT] */
    float *fc1;                        /* [BT,D4l] pre-GELU */
    float *gelu;                       /* [BT,D4l] */
    float *out;                        /* [BT,D] block output = res_att + fc2(gelu) */
} vit_block_acts;

typedef struct vit_acts {
    /* forward */
    float *patches_all;                /* [B,N,Cin*p*p] every patch (cp > 1; else == patches) */
    float *patches;                    /* [B,Nl,Cin*p*p] this rank's patches */
    float *x0;                         /* [BT,D] patch embedding + pos_embed */
    vit_block_acts *blocks;            /* host array [depth] */
    float *lnf, *lnf_mean, *lnf_rstd;  /* [BT,D], [BT], [BT] */
    float *head;                       /* [BT,Cout*p*p] this rank's tokens */
    float *head_all;                   /* [B,N,Cout*p*p] gathered over cp (cp > 1; else == head) */
    float *pred;                       /* [B,Cout,H,W] */
    float *per_sample;                 /* [B] loss terms */
    /* backward scratch (shared by all blocks) */
    float *dpred;                      /* [B,Cout,H,W] */
    float *dhead_all;                  /* [B,N,Cout*p*p] (cp > 1; else == dhead) */
    float *dhead;                      /* [BT,Cout*p*p] */
    float *dres;                       /* [BT,D] gradient of the residual stream */
    float *dln;                        /* [BT,D] gradient of a LayerNorm output */
    float *datty;                      /* [BT,Dl] */
    float *dq;                         /* [BT,Dl] */
    float *dk, *dv;                    /* [B,N,Dl] each: partial over cp until reduce-scattered */
    float *dfc1, *dgelu;               /* [BT,D4l] each */
    float *att_scratch;                /* [B,NHl,Nl,N] */
    /* context-parallel staging (cp > 1 only, else NULL) */
    float *kv_local;                   /* [2][B][Nl][Dl]: this rank's k then v, or their gradients */
    float *cp_buf;                     /* rank-major [cp][...]: allgatherv output / reduce-scatter input */
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

/* Points the per-layer views of `base` (params or grads) at the tensor table.
 * Relies on the table order above: 3 stem tensors, 16 per block, 3 at the end. */
static void bind_param_ptrs(vit_model *m, vit_param_ptrs *pp, float *base) {
    const vit_tensor *t = m->tensors;
    pp->pe_w = base + t[0].offset;
    pp->pe_b = base + t[1].offset;
    pp->pos = base + t[2].offset;
    pp->blocks = vb_malloc(sizeof(vit_block_params) * (size_t)m->d.depth);
    for (int l = 0; l < m->d.depth; l++) {
        const vit_tensor *bt = t + 3 + 16 * l;
        vit_block_params *b = &pp->blocks[l];
        float **slots[16] = {&b->ln1_w, &b->ln1_b, &b->q_w,   &b->q_b,   &b->k_w,   &b->k_b,
                             &b->v_w,   &b->v_b,   &b->proj_w, &b->proj_b, &b->ln2_w, &b->ln2_b,
                             &b->fc1_w, &b->fc1_b, &b->fc2_w, &b->fc2_b};
        for (int i = 0; i < 16; i++) *slots[i] = base + bt[i].offset;
    }
    int e = 3 + 16 * m->d.depth;
    pp->norm_w = base + t[e].offset;
    pp->norm_b = base + t[e + 1].offset;
    pp->head_w = base + t[e + 2].offset;
}

/* ---------------------------------------------------------------------------
 * activation layout */

/* Hands out 64-byte aligned views of one buffer. With base == NULL it only
 * measures, so the same code both sizes and carves the buffer. */
typedef struct { float *base; size_t used; } carver;

static float *carve(carver *c, size_t nfloats) {
    float *p = c->base ? c->base + c->used : NULL;
    c->used += (nfloats + 15) & ~(size_t)15; /* keep every view 64-byte aligned */
    return p;
}

static void layout_acts(vit_model *m, vit_acts *a, carver *c) {
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
        b->ln1_mean = carve(c, BT);
        b->ln1_rstd = carve(c, BT);
        b->q = carve(c, BT * Dl);
        b->k = carve(c, B * N * Dl);
        b->v = carve(c, B * N * Dl);
        b->att = carve(c, B * NHl * Nl * N);
        b->atty = carve(c, BT * Dl);
        b->res_att = carve(c, BT * D);
        b->ln2 = carve(c, BT * D);
        b->ln2_mean = carve(c, BT);
        b->ln2_rstd = carve(c, BT);
        b->fc1 = carve(c, BT * D4l);
        b->gelu = carve(c, BT * D4l);
        b->out = carve(c, BT * D);
    }
    a->lnf = carve(c, BT * D);
    a->lnf_mean = carve(c, BT);
    a->lnf_rstd = carve(c, BT);
    a->head = carve(c, BT * HO);
    a->head_all = cp ? carve(c, B * N * HO) : a->head;
    a->pred = carve(c, img_out);
    a->per_sample = carve(c, B);
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
    a->att_scratch = carve(c, B * NHl * Nl * N);
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

vit_footprint vit_footprint_of(const vit_dims *d, const vit_parallel *par, int max_batch) {
    check_dims(d, par, max_batch);
    vit_model m;
    memset(&m, 0, sizeof m);
    set_shape(&m, d, par, max_batch);
    const int cp = m.par.cp_size;
    int *counts = vb_malloc(sizeof(int) * (size_t)cp), *offsets = vb_malloc(sizeof(int) * (size_t)cp);
    vit_token_split(m.ntok, cp, counts, offsets);
    m.ntok_local = counts[m.par.cp_rank];
    m.tok_offset = offsets[m.par.cp_rank];
    vb_free(counts);
    vb_free(offsets);
    build_tensor_table(&m);
    vit_footprint f = {.nparams = m.nparams};
    vb_free(m.tensors);
    /* layouts of one and of two blocks give the fixed and the per-block
     * floats (each view is padded alike), without a table as deep as the model */
    vit_block_acts blocks[2];
    vit_acts a;
    memset(&a, 0, sizeof a);
    a.blocks = blocks;
    carver one = {NULL, 0}, two = {NULL, 0};
    m.d.depth = 1;
    layout_acts(&m, &a, &one);
    m.d.depth = 2;
    layout_acts(&m, &a, &two);
    size_t per_block = two.used - one.used;
    f.nacts = one.used - per_block + per_block * (size_t)d->depth;
    return f;
}

vit_model *vit_create(const vit_dims *d, const vit_parallel *par, int max_batch,
                      const vb_ops *ops, vb_profiler *prof) {
    if (!d || !ops) vb_die_internal("vit_create: NULL dims or ops");
    check_dims(d, par, max_batch);
    vit_model *m = vb_malloc(sizeof *m);
    set_shape(m, d, par, max_batch);
    m->ops = ops;
    m->prof = prof;
    const int cp = m->par.cp_size;
    vit_acts *a = vb_malloc(sizeof *a);
    a->tok_counts = vb_malloc(sizeof(int) * (size_t)cp);
    a->tok_offsets = vb_malloc(sizeof(int) * (size_t)cp);
    a->coll_counts = vb_malloc(sizeof(int) * (size_t)cp);
    vit_token_split(m->ntok, cp, a->tok_counts, a->tok_offsets);
    m->ntok_local = a->tok_counts[m->par.cp_rank];
    m->tok_offset = a->tok_offsets[m->par.cp_rank];

    build_tensor_table(m);
    m->params = ops->alloc(m->nparams * sizeof(float));
    m->grads = ops->alloc(m->nparams * sizeof(float));
    bind_param_ptrs(m, &m->p, m->params);
    bind_param_ptrs(m, &m->g, m->grads);

    a->blocks = vb_malloc(sizeof(vit_block_acts) * (size_t)d->depth);
    carver c = {NULL, 0};
    layout_acts(m, a, &c);
    m->nacts = c.used;
    m->acts = ops->alloc(m->nacts * sizeof(float));
    c = (carver){m->acts, 0};
    layout_acts(m, a, &c);
    m->pred = a->pred;
    m->priv = a;
    return m;
}

void vit_destroy(vit_model *m) {
    if (!m) return;
    vit_acts *a = m->priv;
    m->ops->free(m->acts);
    m->ops->free(m->params);
    m->ops->free(m->grads);
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
    m->ops->memcpy_h2d(m->params, host, m->nparams * sizeof(float));
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
 * moves a token range between two [B, ntok, C] layouts. */
static void copy_token_rows(const vit_model *m, float *dst, int dst_ntok, int dst_off, const float *src,
                            int src_ntok, int src_off, int count, int B, int C) {
    const size_t run = (size_t)count * C * sizeof(float);
    for (int b = 0; b < B; b++)
        m->ops->memcpy_d2d(dst + ((size_t)b * dst_ntok + dst_off) * C,
                           src + ((size_t)b * src_ntok + src_off) * C, run);
}

/* cp_buf holds, rank-major, [cp][nmat][B][Nl_r][C] (the layout of a cp
 * allgatherv of [nmat][B][Nl][C] per rank). to_tokens: scatter it into the
 * token-major mats[j] [B][N][C]; else pack mats into it. */
static void cp_rearrange(const vit_model *m, float *const *mats, int nmat, int B, int C, bool to_tokens) {
    const vit_acts *a = m->priv;
    float *blk = a->cp_buf;
    for (int r = 0; r < m->par.cp_size; r++) {
        const int n = a->tok_counts[r], off = a->tok_offsets[r];
        for (int j = 0; j < nmat; j++) {
            if (to_tokens) copy_token_rows(m, mats[j], m->ntok, off, blk, n, 0, n, B, C);
            else copy_token_rows(m, blk, n, 0, mats[j], m->ntok, off, n, B, C);
            blk += (size_t)B * n * C;
        }
    }
}

/* Sets coll_counts[r] = floats of rank r's [nmat][B][Nl_r][C] block. */
static const int *cp_counts(const vit_model *m, int nmat, int B, int C) {
    vit_acts *a = m->priv;
    for (int r = 0; r < m->par.cp_size; r++) a->coll_counts[r] = nmat * B * a->tok_counts[r] * C;
    return a->coll_counts;
}

/* All-gathers over cp: send [nmat][B][Nl][C] (this rank's tokens, packed so
 * ONE collective moves all nmat tensors) -> mats[j] [B][N][C], every token. */
static void cp_allgather_tokens(vit_model *m, const float *send, float *const *mats, int nmat, int B, int C) {
    vit_acts *a = m->priv;
    vb_allgatherv_f32(m->par.cp, send, a->cp_buf, cp_counts(m, nmat, B, C));
    VIT_TIMED(m, "cp_rearrange", VB_CAT_MEMCPY, cp_rearrange(m, mats, nmat, B, C, true));
}

/* The adjoint: mats[j] [B][N][C] hold this rank's partial gradients for every
 * token; recv [nmat][B][Nl][C] gets this rank's tokens summed over cp. */
static void cp_reduce_scatter_tokens(vit_model *m, float *const *mats, float *recv, int nmat, int B, int C) {
    vit_acts *a = m->priv;
    VIT_TIMED(m, "cp_rearrange", VB_CAT_MEMCPY, cp_rearrange(m, mats, nmat, B, C, false));
    vb_reduce_scatterv_sum_f32(m->par.cp, a->cp_buf, recv, cp_counts(m, nmat, B, C));
}

/* Row-parallel Linear epilogue: out [BT,D] holds this rank's partial sum over
 * its input columns; sum over tp, then add the replicated bias once. */
static void tp_reduce_add_bias(vit_model *m, float *out, const float *bias, int BT, int D) {
    vb_allreduce_sum_f32(m->par.tp, out, (size_t)BT * D);
    /* add_pos_embed with T = 1 adds one [D] row to each of BT rows */
    VIT_OP(m, "add_bias", m->ops->add_pos_embed(out, out, bias, BT, 1, D));
}

/* ---------------------------------------------------------------------------
 * forward */

float vit_forward(vit_model *m, const float *inp, const float *tar, int B) {
    if (B < 1 || B > m->max_batch)
        vb_die_internal("vit_forward: batch %d outside [1, max_batch %d]", B, m->max_batch);
    require_comms(m, "vit_forward");
    const vb_ops *ops = m->ops;
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
    VIT_EW(m, "patchify", 2.0 * nin, ops->patchify(a->patches_all, inp, B, d->cin, d->img_h, d->img_w, d->patch));
    if (cp)
        VIT_TIMED(m, "cp_slice", VB_CAT_MEMCPY,
                  copy_token_rows(m, a->patches, Nl, 0, a->patches_all, N, m->tok_offset, Nl, B, m->patch_in));
    VIT_MM_FWD(m, "patch_embed", BT, m->patch_in, D,
               ops->matmul_forward(a->x0, a->patches, m->p.pe_w, m->p.pe_b, BT, m->patch_in, D));
    VIT_OP(m, "add_pos_embed",
           ops->add_pos_embed(a->x0, a->x0, m->p.pos + (size_t)m->tok_offset * D, B, Nl, D));

    const float *x = a->x0; /* residual stream entering the block */
    for (int l = 0; l < d->depth; l++) {
        const vit_block_params *w = &m->p.blocks[l];
        vit_block_acts *s = &a->blocks[l];
        /* x + attn(LN1(x)); LN1's output enters the tp region as is (identity) */
        VIT_EW(m, "layernorm_forward", 2.0 * BT * D,
               ops->layernorm_forward(s->ln1, s->ln1_mean, s->ln1_rstd, x, w->ln1_w, w->ln1_b, BT, D, eps));
        /* column-parallel q, k, v: this rank's heads */
        VIT_MM_FWD(m, "qkv", BT, D, Dl, ops->matmul_forward(s->q, s->ln1, w->q_w, w->q_b, BT, D, Dl));
        if (cp) {
            /* k then v of the local tokens side by side, one allgatherv for both */
            float *kl = a->kv_local, *vl = a->kv_local + (size_t)BT * Dl;
            VIT_MM_FWD(m, "qkv", BT, D, Dl, ops->matmul_forward(kl, s->ln1, w->k_w, w->k_b, BT, D, Dl));
            VIT_MM_FWD(m, "qkv", BT, D, Dl, ops->matmul_forward(vl, s->ln1, w->v_w, w->v_b, BT, D, Dl));
            float *kv[2] = {s->k, s->v};
            cp_allgather_tokens(m, a->kv_local, kv, 2, B, Dl);
        } else {
            VIT_MM_FWD(m, "qkv", BT, D, Dl, ops->matmul_forward(s->k, s->ln1, w->k_w, w->k_b, BT, D, Dl));
            VIT_MM_FWD(m, "qkv", BT, D, Dl, ops->matmul_forward(s->v, s->ln1, w->v_w, w->v_b, BT, D, Dl));
        }
        /* local queries against every token's keys and values */
        /* q k^T and P v: 2 x 2 B NHl Nl N HD; reads q, k, v, writes out and the probabilities */
        VIT_OPW(m, "attention_forward", 4.0 * B * NHl * (double)Nl * N * HD,
                sizeof(float) * (2.0 * BT * Dl + 2.0 * (double)B * N * Dl + (double)B * NHl * Nl * N),
                ops->attention_forward(s->atty, s->att, s->q, s->k, s->v, B, Nl, N, NHl, HD));
        /* row-parallel proj: partial sums, then tp allreduce + bias */
        VIT_MM_FWD(m, "proj", BT, Dl, D,
                   ops->matmul_forward(s->res_att, s->atty, w->proj_w, tp ? NULL : w->proj_b, BT, Dl, D));
        if (tp) tp_reduce_add_bias(m, s->res_att, w->proj_b, BT, D);
        VIT_EW(m, "add", 3.0 * BT * D, ops->add(s->res_att, s->res_att, x, (size_t)BT * D));
        /* + mlp(LN2(.)): column-parallel fc1, row-parallel fc2 */
        VIT_EW(m, "layernorm_forward", 2.0 * BT * D,
               ops->layernorm_forward(s->ln2, s->ln2_mean, s->ln2_rstd, s->res_att, w->ln2_w, w->ln2_b,
                                      BT, D, eps));
        VIT_MM_FWD(m, "fc1", BT, D, D4l, ops->matmul_forward(s->fc1, s->ln2, w->fc1_w, w->fc1_b, BT, D, D4l));
        VIT_EW(m, "gelu_forward", 2.0 * BT * D4l, ops->gelu_forward(s->gelu, s->fc1, (size_t)BT * D4l));
        VIT_MM_FWD(m, "fc2", BT, D4l, D,
                   ops->matmul_forward(s->out, s->gelu, w->fc2_w, tp ? NULL : w->fc2_b, BT, D4l, D));
        if (tp) tp_reduce_add_bias(m, s->out, w->fc2_b, BT, D);
        VIT_EW(m, "add", 3.0 * BT * D, ops->add(s->out, s->out, s->res_att, (size_t)BT * D));
        x = s->out;
    }

    VIT_EW(m, "layernorm_forward", 2.0 * BT * D,
           ops->layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, x, m->p.norm_w, m->p.norm_b, BT, D, eps));
    VIT_MM_FWD(m, "head", BT, D, m->head_out,
               ops->matmul_forward(a->head, a->lnf, m->p.head_w, NULL, BT, D, m->head_out));
    /* every cp rank assembles the whole sequence: full prediction, same loss */
    if (cp) cp_allgather_tokens(m, a->head, &a->head_all, 1, B, m->head_out);
    VIT_EW(m, "unpatchify", 2.0 * nout, ops->unpatchify(a->pred, a->head_all, B, d->cout, d->img_h, d->img_w, d->patch));

    float loss = 0.0f;
    if (tar) {
        const size_t n = (size_t)d->cout * d->img_h * d->img_w;
        VIT_EW(m, "rel_l2_loss_forward", 2.0 * nout, loss = ops->rel_l2_loss_forward(a->per_sample, a->pred, tar, B, n));
    }
    m->loss = loss;
    VB_NVTX_POP();
    return loss;
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
    const vit_dims *d = &m->d;
    const int B = m->batch, N = m->ntok, Nl = m->ntok_local, D = d->dim, HD = m->hd;
    const int Dl = m->dim_local, D4l = m->hidden_local, NHl = m->heads_local;
    const int BT = B * Nl;
    const bool tp = m->par.tp_size > 1, cp = m->par.cp_size > 1;
    const size_t nD = (size_t)BT * D, nDl = (size_t)BT * Dl, nD4l = (size_t)BT * D4l;
    const size_t nkv = (size_t)B * N * Dl; /* k, v of every token */
    const size_t nimg = (size_t)d->cout * d->img_h * d->img_w;

    VB_NVTX_PUSH("backward");
    VIT_ZERO(m, m->grads, m->nparams * sizeof(float));

    /* loss -> head tokens. Every cp rank has the whole dpred; each keeps its
     * own tokens' rows, so together they backpropagate each token once. */
    VIT_OP(m, "rel_l2_loss_backward", ops->rel_l2_loss_backward(a->dpred, a->pred, a->tar, B, nimg, 1.0f));
    VIT_OP(m, "unpatchify_backward",
           ops->unpatchify_backward(a->dhead_all, a->dpred, B, d->cout, d->img_h, d->img_w, d->patch));
    if (cp)
        VIT_TIMED(m, "cp_slice", VB_CAT_MEMCPY,
                  copy_token_rows(m, a->dhead, Nl, 0, a->dhead_all, N, m->tok_offset, Nl, B, m->head_out));

    /* head (no bias), then the final LayerNorm into the residual gradient */
    VIT_ZERO(m, a->dln, nD * sizeof(float));
    VIT_MM_BWD(m, "head", BT, D, m->head_out, true,
               ops->matmul_backward(a->dln, m->g.head_w, NULL, a->dhead, a->lnf, m->p.head_w, BT, D, m->head_out));
    int t = m->ntensors - 1;
    grads_ready(m, t, t); /* head.weight */
    const float *x_last = d->depth > 0 ? a->blocks[d->depth - 1].out : a->x0;
    VIT_ZERO(m, a->dres, nD * sizeof(float));
    VIT_EW(m, "layernorm_backward", 4.0 * BT * D,
           ops->layernorm_backward(a->dres, m->g.norm_w, m->g.norm_b, a->dln, x_last, m->p.norm_w,
                                   a->lnf_mean, a->lnf_rstd, BT, D));
    grads_ready(m, t - 1, t - 2); /* norm.bias, norm.weight */

    /* dres holds d(block output); each block turns it into d(block input) in place.
     * The residual connections are the "+=" of layernorm_backward into dres.
     * dres is the same on every tp rank, so everything replicated over tp
     * (LayerNorms, the proj/fc2 biases, which sum the full dres) gets the same
     * gradient on every tp rank. */
    for (int l = d->depth - 1; l >= 0; l--) {
        const vit_block_params *w = &m->p.blocks[l];
        vit_block_params *g = &m->g.blocks[l];
        const vit_block_acts *s = &a->blocks[l];
        const float *x = l > 0 ? a->blocks[l - 1].out : a->x0;
        const int base = 3 + 16 * l; /* index of blocks.l.norm1.weight */

        /* out = res_att + fc2(gelu(fc1(LN2(res_att)))) */
        VIT_ZERO(m, a->dgelu, nD4l * sizeof(float));
        VIT_MM_BWD(m, "fc2", BT, D4l, D, true,
                   ops->matmul_backward(a->dgelu, g->fc2_w, g->fc2_b, a->dres, s->gelu, w->fc2_w, BT, D4l, D));
        grads_ready(m, base + 15, base + 14); /* fc2.bias, fc2.weight */
        VIT_ZERO(m, a->dfc1, nD4l * sizeof(float));
        VIT_EW(m, "gelu_backward", 3.0 * nD4l, ops->gelu_backward(a->dfc1, s->fc1, a->dgelu, nD4l));
        VIT_ZERO(m, a->dln, nD * sizeof(float));
        VIT_MM_BWD(m, "fc1", BT, D, D4l, true,
                   ops->matmul_backward(a->dln, g->fc1_w, g->fc1_b, a->dfc1, s->ln2, w->fc1_w, BT, D, D4l));
        grads_ready(m, base + 13, base + 12); /* fc1.bias, fc1.weight */
        /* leaving the tp region: LN2's output fed every rank's fc1 shard */
        if (tp) vb_allreduce_sum_f32(m->par.tp, a->dln, nD);
        VIT_EW(m, "layernorm_backward", 4.0 * BT * D,
               ops->layernorm_backward(a->dres, g->ln2_w, g->ln2_b, a->dln, s->res_att, w->ln2_w,
                                       s->ln2_mean, s->ln2_rstd, BT, D));
        grads_ready(m, base + 11, base + 10); /* norm2.bias, norm2.weight */

        /* res_att = x + proj(attention(q, k, v)) */
        VIT_ZERO(m, a->datty, nDl * sizeof(float));
        VIT_MM_BWD(m, "proj", BT, Dl, D, true,
                   ops->matmul_backward(a->datty, g->proj_w, g->proj_b, a->dres, s->atty, w->proj_w, BT, Dl, D));
        grads_ready(m, base + 9, base + 8); /* proj.bias, proj.weight */
        VIT_ZERO(m, a->dq, nDl * sizeof(float));
        VIT_ZERO(m, a->dk, nkv * sizeof(float));
        VIT_ZERO(m, a->dv, nkv * sizeof(float));
        /* recompute-free backward: dP = dO v^T, dv = P^T dO, dq, dk: 4 GEMMs of 2 B NHl Nl N HD */
        VIT_OPW(m, "attention_backward", 8.0 * B * NHl * (double)Nl * N * HD,
                sizeof(float) * (4.0 * BT * Dl + 4.0 * (double)B * N * Dl + 2.0 * (double)B * NHl * Nl * N),
               ops->attention_backward(a->dq, a->dk, a->dv, a->att_scratch, a->datty, s->att, s->q, s->k,
                                       s->v, B, Nl, N, NHl, HD));
        /* dk, dv cover every token but only this rank's queries: sum over cp
         * and keep this rank's tokens */
        const float *dk = a->dk, *dv = a->dv;
        if (cp) {
            float *kv[2] = {a->dk, a->dv};
            cp_reduce_scatter_tokens(m, kv, a->kv_local, 2, B, Dl);
            dk = a->kv_local;
            dv = a->kv_local + nDl;
        }
        /* v, k, q in that order so their gradients finish in reverse tensor order */
        VIT_ZERO(m, a->dln, nD * sizeof(float));
        VIT_MM_BWD(m, "qkv", BT, D, Dl, true,
                   ops->matmul_backward(a->dln, g->v_w, g->v_b, dv, s->ln1, w->v_w, BT, D, Dl));
        grads_ready(m, base + 7, base + 6); /* v.bias, v.weight */
        VIT_MM_BWD(m, "qkv", BT, D, Dl, true,
                   ops->matmul_backward(a->dln, g->k_w, g->k_b, dk, s->ln1, w->k_w, BT, D, Dl));
        grads_ready(m, base + 5, base + 4); /* k.bias, k.weight */
        VIT_MM_BWD(m, "qkv", BT, D, Dl, true,
                   ops->matmul_backward(a->dln, g->q_w, g->q_b, a->dq, s->ln1, w->q_w, BT, D, Dl));
        grads_ready(m, base + 3, base + 2); /* q.bias, q.weight */
        if (tp) vb_allreduce_sum_f32(m->par.tp, a->dln, nD);
        VIT_EW(m, "layernorm_backward", 4.0 * BT * D,
               ops->layernorm_backward(a->dres, g->ln1_w, g->ln1_b, a->dln, x, w->ln1_w, s->ln1_mean,
                                       s->ln1_rstd, BT, D));
        grads_ready(m, base + 1, base); /* norm1.bias, norm1.weight */
    }

    /* x0 = patch_embed(patches) + pos_embed: only this rank's pos_embed rows
     * get a gradient here; the cp sum of the caller fills in the rest */
    VIT_OP(m, "add_pos_embed_backward",
           ops->add_pos_embed_backward(m->g.pos + (size_t)m->tok_offset * D, a->dres, B, Nl, D));
    grads_ready(m, 2, 2); /* pos_embed */
    /* dinp NULL: the patches are input data */
    VIT_MM_BWD(m, "patch_embed", BT, m->patch_in, D, false,
               ops->matmul_backward(NULL, m->g.pe_w, m->g.pe_b, a->dres, a->patches, m->p.pe_w, BT,
                                    m->patch_in, D));
    grads_ready(m, 1, 0); /* patch_embed.proj.bias, .weight */
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
double vit_train_flops(const vit_model *m, int B) {
    const double N = m->ntok, Nl = m->ntok_local, D = m->d.dim, L = m->d.depth, HD = m->hd;
    const double tp = m->par.tp_size, NHl = m->heads_local;
    const double gemm = 2.0 * B * Nl * (((double)m->patch_in * D + (double)m->head_out * D) / tp +
                                        L * (4.0 * D * D + 8.0 * D * D) / tp);
    const double attn = L * 2.0 * B * NHl * 2.0 * Nl * N * HD;
    return 3.0 * (gemm + attn);
}
