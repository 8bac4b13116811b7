/* model.c: the tutorials' ViT (networks/vit.py) forward and backward by hand,
 * every op through the backend table (kernels/ops.h), every op call timed by
 * the profiler (core/profile.h).
 *
 * Shapes: B batch, N tokens = (H/p)(W/p), D embed dim, NH heads, HD = D/NH,
 * D4 = 4D MLP hidden, BT = B*N rows. Activations are [BT, C] row-major, i.e.
 * [B, N, C], exactly the layout of PyTorch's [B, N, C] token tensors.
 */
#include "core/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"

/* Times one op call under its own name in the profiler. `call` may contain
 * commas (they are inside its parentheses). */
#define VIT_TIMED(m, opname, cat, call)                                 \
    do {                                                                \
        int vit_op_id_ = VB_OP_ID((m)->prof, opname, cat);              \
        double vit_op_t0_ = vb_prof_begin((m)->prof, vit_op_id_);       \
        call;                                                           \
        vb_prof_end((m)->prof, vit_op_id_, vit_op_t0_, 0);              \
    } while (0)
#define VIT_OP(m, opname, call) VIT_TIMED(m, opname, VB_CAT_COMPUTE, call)
/* zeroing gradient buffers is memory traffic, not compute */
#define VIT_ZERO(m, ptr, nbytes) VIT_TIMED(m, "zero", VB_CAT_MEMCPY, (m)->ops->zero(ptr, nbytes))

/* Saved activations of one block (views into m->acts, sized for max_batch). */
typedef struct vit_block_acts {
    float *ln1, *ln1_mean, *ln1_rstd;  /* [BT,D], [BT], [BT] */
    float *q, *k, *v;                  /* [BT,D] each */
    float *att;                        /* [B,NH,N,N] softmax probabilities */
    float *atty;                       /* [BT,D] attention output before proj */
    float *res_att;                    /* [BT,D] x + proj(atty) */
    float *ln2, *ln2_mean, *ln2_rstd;  /* [BT,D], [BT], [BT] */
    float *fc1;                        /* [BT,D4] pre-GELU */
    float *gelu;                       /* [BT,D4] */
    float *out;                        /* [BT,D] block output = res_att + fc2(gelu) */
} vit_block_acts;

typedef struct vit_acts {
    /* forward */
    float *patches;                    /* [B,N,Cin*p*p] */
    float *x0;                         /* [BT,D] patch embedding + pos_embed */
    vit_block_acts *blocks;            /* host array [depth] */
    float *lnf, *lnf_mean, *lnf_rstd;  /* [BT,D], [BT], [BT] */
    float *head;                       /* [BT,Cout*p*p] */
    float *pred;                       /* [B,Cout,H,W] */
    float *per_sample;                 /* [B] loss terms */
    /* backward scratch (shared by all blocks) */
    float *dpred;                      /* [B,Cout,H,W] */
    float *dhead;                      /* [BT,Cout*p*p] */
    float *dres;                       /* [BT,D] gradient of the residual stream */
    float *dln;                        /* [BT,D] gradient of a LayerNorm output */
    float *datty;                      /* [BT,D] */
    float *dq, *dk, *dv;               /* [BT,D] each */
    float *dfc1, *dgelu;               /* [BT,D4] each */
    float *att_scratch;                /* [B,NH,N,N] */
    /* the target of the last forward (caller's memory), for backward */
    const float *tar;
} vit_acts;

/* ---------------------------------------------------------------------------
 * tensor table */

static void add_tensor(vit_model *m, int *count, size_t *offset, int init, int ndim,
                       const int *shape, const char *fmt, int layer) {
    vit_tensor *t = &m->tensors[*count];
    vb_snprintf(t->name, sizeof t->name, fmt, layer);
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->numel *= (size_t)shape[i];
    }
    t->offset = *offset;
    t->init = init;
    *offset += t->numel;
    (*count)++;
}

#define T1(a) ((const int[]){a})
#define T2(a, b) ((const int[]){a, b})

/* Lays out the state_dict: names, shapes and offsets in PyTorch order. */
static void build_tensor_table(vit_model *m) {
    const int D = m->d.dim, D4 = m->hidden, L = m->d.depth, p = m->d.patch;
    m->ntensors = 3 + 16 * L + 3;
    m->tensors = vb_malloc(sizeof(vit_tensor) * (size_t)m->ntensors);
    int n = 0;
    size_t off = 0;
    add_tensor(m, &n, &off, VIT_INIT_TRUNC_NORMAL, 4, (const int[]){D, m->d.cin, p, p},
               "patch_embed.proj.weight", 0);
    add_tensor(m, &n, &off, VIT_INIT_ZERO, 1, T1(D), "patch_embed.proj.bias", 0);
    add_tensor(m, &n, &off, VIT_INIT_TRUNC_NORMAL, 3, (const int[]){1, m->ntok, D}, "pos_embed", 0);
    for (int l = 0; l < L; l++) {
        add_tensor(m, &n, &off, VIT_INIT_ONE, 1, T1(D), "blocks.%d.norm1.weight", l);
        add_tensor(m, &n, &off, VIT_INIT_ZERO, 1, T1(D), "blocks.%d.norm1.bias", l);
        add_tensor(m, &n, &off, VIT_INIT_TRUNC_NORMAL, 2, T2(D, D), "blocks.%d.attn.q.weight", l);
        add_tensor(m, &n, &off, VIT_INIT_ZERO, 1, T1(D), "blocks.%d.attn.q.bias", l);
        add_tensor(m, &n, &off, VIT_INIT_TRUNC_NORMAL, 2, T2(D, D), "blocks.%d.attn.k.weight", l);
        add_tensor(m, &n, &off, VIT_INIT_ZERO, 1, T1(D), "blocks.%d.attn.k.bias", l);
        add_tensor(m, &n, &off, VIT_INIT_TRUNC_NORMAL, 2, T2(D, D), "blocks.%d.attn.v.weight", l);
        add_tensor(m, &n, &off, VIT_INIT_ZERO, 1, T1(D), "blocks.%d.attn.v.bias", l);
        add_tensor(m, &n, &off, VIT_INIT_TRUNC_NORMAL, 2, T2(D, D), "blocks.%d.attn.proj.weight", l);
        add_tensor(m, &n, &off, VIT_INIT_ZERO, 1, T1(D), "blocks.%d.attn.proj.bias", l);
        add_tensor(m, &n, &off, VIT_INIT_ONE, 1, T1(D), "blocks.%d.norm2.weight", l);
        add_tensor(m, &n, &off, VIT_INIT_ZERO, 1, T1(D), "blocks.%d.norm2.bias", l);
        add_tensor(m, &n, &off, VIT_INIT_TRUNC_NORMAL, 2, T2(D4, D), "blocks.%d.mlp.fc1.weight", l);
        add_tensor(m, &n, &off, VIT_INIT_ZERO, 1, T1(D4), "blocks.%d.mlp.fc1.bias", l);
        add_tensor(m, &n, &off, VIT_INIT_TRUNC_NORMAL, 2, T2(D, D4), "blocks.%d.mlp.fc2.weight", l);
        add_tensor(m, &n, &off, VIT_INIT_ZERO, 1, T1(D), "blocks.%d.mlp.fc2.bias", l);
    }
    add_tensor(m, &n, &off, VIT_INIT_ONE, 1, T1(D), "norm.weight", 0);
    add_tensor(m, &n, &off, VIT_INIT_ZERO, 1, T1(D), "norm.bias", 0);
    add_tensor(m, &n, &off, VIT_INIT_TRUNC_NORMAL, 2, T2(m->head_out, D), "head.weight", 0);
    if (n != m->ntensors) vb_die_internal("tensor table has %d entries, expected %d", n, m->ntensors);
    m->nparams = off;
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
    const size_t B = (size_t)m->max_batch, N = (size_t)m->ntok, D = (size_t)m->d.dim;
    const size_t BT = B * N, D4 = (size_t)m->hidden, NH = (size_t)m->d.heads;
    const size_t img_out = B * (size_t)m->d.cout * (size_t)m->d.img_h * (size_t)m->d.img_w;
    a->patches = carve(c, BT * (size_t)m->patch_in);
    a->x0 = carve(c, BT * D);
    for (int l = 0; l < m->d.depth; l++) {
        vit_block_acts *b = &a->blocks[l];
        b->ln1 = carve(c, BT * D);
        b->ln1_mean = carve(c, BT);
        b->ln1_rstd = carve(c, BT);
        b->q = carve(c, BT * D);
        b->k = carve(c, BT * D);
        b->v = carve(c, BT * D);
        b->att = carve(c, B * NH * N * N);
        b->atty = carve(c, BT * D);
        b->res_att = carve(c, BT * D);
        b->ln2 = carve(c, BT * D);
        b->ln2_mean = carve(c, BT);
        b->ln2_rstd = carve(c, BT);
        b->fc1 = carve(c, BT * D4);
        b->gelu = carve(c, BT * D4);
        b->out = carve(c, BT * D);
    }
    a->lnf = carve(c, BT * D);
    a->lnf_mean = carve(c, BT);
    a->lnf_rstd = carve(c, BT);
    a->head = carve(c, BT * (size_t)m->head_out);
    a->pred = carve(c, img_out);
    a->per_sample = carve(c, B);
    a->dpred = carve(c, img_out);
    a->dhead = carve(c, BT * (size_t)m->head_out);
    a->dres = carve(c, BT * D);
    a->dln = carve(c, BT * D);
    a->datty = carve(c, BT * D);
    a->dq = carve(c, BT * D);
    a->dk = carve(c, BT * D);
    a->dv = carve(c, BT * D);
    a->dfc1 = carve(c, BT * D4);
    a->dgelu = carve(c, BT * D4);
    a->att_scratch = carve(c, B * NH * N * N);
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
    /* 32-bit ints index rows and columns in the ops; keep every dimension product in range */
    const double ntok = (double)(d->img_h / d->patch) * (double)(d->img_w / d->patch);
    if ((double)max_batch * ntok * 4.0 * d->dim > 2147483647.0 ||
        (double)d->cin * d->patch * d->patch > 2147483647.0 ||
        (double)d->cout * d->patch * d->patch > 2147483647.0)
        vb_die_input("model: img_size [%d, %d] x embed_dim %d x batch %d is too large", d->img_h,
                     d->img_w, d->dim, max_batch);
    if (par && (par->tp_size != 1 || par->cp_size != 1))
        vb_die_input("model: tensor/context parallelism not supported yet (tensor_parallel %d, "
                     "context_parallel %d)", par->tp_size, par->cp_size);
}

/* The CPU backend zero-fills its allocations, so an activation buffer larger
 * than RAM would not fail cleanly: the OOM killer would end the run mid-memset.
 * Refuse such a configuration up front, as bad input (it is the batch or image
 * size the user asked for). */
static void check_host_memory(const vit_model *m) {
    if (strcmp(m->ops->name, "cpu") != 0) return;
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0) return;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    double ram = (double)pages * (double)page_size;
    /* activations + params + grads + Adam's two moments */
    double need = ((double)m->nacts + 4.0 * (double)m->nparams) * sizeof(float);
    if (need > ram)
        vb_die_input("model: batch %d of %dx%d images with embed_dim %d, depth %d needs %.1f GiB of "
                     "activations and parameters, more than this machine's %.1f GiB of memory "
                     "(reduce local_batch_size or img_size)",
                     m->max_batch, m->d.img_h, m->d.img_w, m->d.dim, m->d.depth, need / gib, ram / gib);
}

vit_model *vit_create(const vit_dims *d, const vit_parallel *par, int max_batch,
                      const vb_ops *ops, vb_profiler *prof) {
    if (!d || !ops) vb_die_internal("vit_create: NULL dims or ops");
    check_dims(d, par, max_batch);
    vit_model *m = vb_malloc(sizeof *m);
    m->d = *d;
    /* 0 means "not set": the tutorial's LayerNorm eps */
    if (m->d.ln_eps == 0.0f) m->d.ln_eps = 1e-6f;
    if (par) m->par = *par;
    else m->par = (vit_parallel){.tp_size = 1, .tp_rank = 0, .cp_size = 1, .cp_rank = 0};
    m->ntok = (d->img_h / d->patch) * (d->img_w / d->patch);
    m->hd = d->dim / d->heads;
    m->hidden = 4 * d->dim;
    m->patch_in = d->cin * d->patch * d->patch;
    m->head_out = d->cout * d->patch * d->patch;
    m->ops = ops;
    m->prof = prof;
    m->max_batch = max_batch;

    build_tensor_table(m);
    m->params = ops->alloc(m->nparams * sizeof(float));
    m->grads = ops->alloc(m->nparams * sizeof(float));
    bind_param_ptrs(m, &m->p, m->params);
    bind_param_ptrs(m, &m->g, m->grads);

    vit_acts *a = vb_malloc(sizeof *a);
    a->blocks = vb_malloc(sizeof(vit_block_acts) * (size_t)d->depth);
    carver c = {NULL, 0};
    layout_acts(m, a, &c);
    m->nacts = c.used;
    check_host_memory(m);
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
    vb_free(a);
    vb_free(m->p.blocks);
    vb_free(m->g.blocks);
    vb_free(m->tensors);
    vb_free(m);
}

void vit_init_weights(vit_model *m, uint64_t seed) {
    float *host = vb_malloc(m->nparams * sizeof(float));
    vb_rng rng;
    vb_rng_seed(&rng, seed);
    for (int i = 0; i < m->ntensors; i++) {
        const vit_tensor *t = &m->tensors[i];
        float *w = host + t->offset;
        for (size_t j = 0; j < t->numel; j++) {
            switch (t->init) {
            case VIT_INIT_TRUNC_NORMAL:
                /* torch.nn.init.trunc_normal_(std=.02) with its default absolute bounds [-2, 2] */
                w[j] = (float)vb_rng_trunc_normal(&rng, 0.0, 0.02, -2.0, 2.0);
                break;
            case VIT_INIT_ONE: w[j] = 1.0f; break;
            default: w[j] = 0.0f; break;
            }
        }
    }
    m->ops->memcpy_h2d(m->params, host, m->nparams * sizeof(float));
    vb_free(host);
}

int vit_find_tensor(const vit_model *m, const char *name) {
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return i;
    return -1;
}

/* ---------------------------------------------------------------------------
 * forward */

float vit_forward(vit_model *m, const float *inp, const float *tar, int B) {
    if (B < 1 || B > m->max_batch)
        vb_die_internal("vit_forward: batch %d outside [1, max_batch %d]", B, m->max_batch);
    const vb_ops *ops = m->ops;
    vit_acts *a = m->priv;
    const vit_dims *d = &m->d;
    const int N = m->ntok, D = d->dim, D4 = m->hidden, NH = d->heads, HD = m->hd;
    const int BT = B * N;
    const float eps = d->ln_eps;

    VB_NVTX_PUSH("forward");
    m->batch = B;
    a->tar = tar;

    /* patch embedding: Conv2d(k = s = p) == patchify + Linear(Cin*p*p, D) */
    VIT_OP(m, "patchify", ops->patchify(a->patches, inp, B, d->cin, d->img_h, d->img_w, d->patch));
    VIT_OP(m, "matmul_forward",
           ops->matmul_forward(a->x0, a->patches, m->p.pe_w, m->p.pe_b, BT, m->patch_in, D));
    VIT_OP(m, "add_pos_embed", ops->add_pos_embed(a->x0, a->x0, m->p.pos, B, N, D));

    const float *x = a->x0; /* residual stream entering the block */
    for (int l = 0; l < d->depth; l++) {
        const vit_block_params *w = &m->p.blocks[l];
        vit_block_acts *s = &a->blocks[l];
        /* x + attn(LN1(x)) */
        VIT_OP(m, "layernorm_forward",
               ops->layernorm_forward(s->ln1, s->ln1_mean, s->ln1_rstd, x, w->ln1_w, w->ln1_b, BT, D, eps));
        VIT_OP(m, "matmul_forward", ops->matmul_forward(s->q, s->ln1, w->q_w, w->q_b, BT, D, D));
        VIT_OP(m, "matmul_forward", ops->matmul_forward(s->k, s->ln1, w->k_w, w->k_b, BT, D, D));
        VIT_OP(m, "matmul_forward", ops->matmul_forward(s->v, s->ln1, w->v_w, w->v_b, BT, D, D));
        VIT_OP(m, "attention_forward",
               ops->attention_forward(s->atty, s->att, s->q, s->k, s->v, B, N, N, NH, HD));
        VIT_OP(m, "matmul_forward",
               ops->matmul_forward(s->res_att, s->atty, w->proj_w, w->proj_b, BT, D, D));
        VIT_OP(m, "add", ops->add(s->res_att, s->res_att, x, (size_t)BT * D));
        /* + mlp(LN2(.)) */
        VIT_OP(m, "layernorm_forward",
               ops->layernorm_forward(s->ln2, s->ln2_mean, s->ln2_rstd, s->res_att, w->ln2_w, w->ln2_b,
                                      BT, D, eps));
        VIT_OP(m, "matmul_forward", ops->matmul_forward(s->fc1, s->ln2, w->fc1_w, w->fc1_b, BT, D, D4));
        VIT_OP(m, "gelu_forward", ops->gelu_forward(s->gelu, s->fc1, (size_t)BT * D4));
        VIT_OP(m, "matmul_forward", ops->matmul_forward(s->out, s->gelu, w->fc2_w, w->fc2_b, BT, D4, D));
        VIT_OP(m, "add", ops->add(s->out, s->out, s->res_att, (size_t)BT * D));
        x = s->out;
    }

    VIT_OP(m, "layernorm_forward",
           ops->layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, x, m->p.norm_w, m->p.norm_b, BT, D, eps));
    VIT_OP(m, "matmul_forward",
           ops->matmul_forward(a->head, a->lnf, m->p.head_w, NULL, BT, D, m->head_out));
    VIT_OP(m, "unpatchify", ops->unpatchify(a->pred, a->head, B, d->cout, d->img_h, d->img_w, d->patch));

    float loss = 0.0f;
    if (tar) {
        const size_t n = (size_t)d->cout * d->img_h * d->img_w;
        VIT_OP(m, "rel_l2_loss_forward", loss = ops->rel_l2_loss_forward(a->per_sample, a->pred, tar, B, n));
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
    const vb_ops *ops = m->ops;
    const vit_dims *d = &m->d;
    const int B = m->batch, N = m->ntok, D = d->dim, D4 = m->hidden, NH = d->heads, HD = m->hd;
    const int BT = B * N;
    const size_t nD = (size_t)BT * D, nD4 = (size_t)BT * D4;
    const size_t nimg = (size_t)d->cout * d->img_h * d->img_w;

    VB_NVTX_PUSH("backward");
    VIT_ZERO(m, m->grads, m->nparams * sizeof(float));

    /* loss -> head tokens */
    VIT_OP(m, "rel_l2_loss_backward", ops->rel_l2_loss_backward(a->dpred, a->pred, a->tar, B, nimg, 1.0f));
    VIT_OP(m, "unpatchify_backward",
           ops->unpatchify_backward(a->dhead, a->dpred, B, d->cout, d->img_h, d->img_w, d->patch));

    /* head (no bias), then the final LayerNorm into the residual gradient */
    VIT_ZERO(m, a->dln, nD * sizeof(float));
    VIT_OP(m, "matmul_backward",
           ops->matmul_backward(a->dln, m->g.head_w, NULL, a->dhead, a->lnf, m->p.head_w, BT, D, m->head_out));
    int t = m->ntensors - 1;
    grads_ready(m, t, t); /* head.weight */
    const float *x_last = d->depth > 0 ? a->blocks[d->depth - 1].out : a->x0;
    VIT_ZERO(m, a->dres, nD * sizeof(float));
    VIT_OP(m, "layernorm_backward",
           ops->layernorm_backward(a->dres, m->g.norm_w, m->g.norm_b, a->dln, x_last, m->p.norm_w,
                                   a->lnf_mean, a->lnf_rstd, BT, D));
    grads_ready(m, t - 1, t - 2); /* norm.bias, norm.weight */

    /* dres holds d(block output); each block turns it into d(block input) in place.
     * The residual connections are the "+=" of layernorm_backward into dres. */
    for (int l = d->depth - 1; l >= 0; l--) {
        const vit_block_params *w = &m->p.blocks[l];
        vit_block_params *g = &m->g.blocks[l];
        const vit_block_acts *s = &a->blocks[l];
        const float *x = l > 0 ? a->blocks[l - 1].out : a->x0;
        const int base = 3 + 16 * l; /* index of blocks.l.norm1.weight */

        /* out = res_att + fc2(gelu(fc1(LN2(res_att)))) */
        VIT_ZERO(m, a->dgelu, nD4 * sizeof(float));
        VIT_OP(m, "matmul_backward",
               ops->matmul_backward(a->dgelu, g->fc2_w, g->fc2_b, a->dres, s->gelu, w->fc2_w, BT, D4, D));
        grads_ready(m, base + 15, base + 14); /* fc2.bias, fc2.weight */
        VIT_ZERO(m, a->dfc1, nD4 * sizeof(float));
        VIT_OP(m, "gelu_backward", ops->gelu_backward(a->dfc1, s->fc1, a->dgelu, nD4));
        VIT_ZERO(m, a->dln, nD * sizeof(float));
        VIT_OP(m, "matmul_backward",
               ops->matmul_backward(a->dln, g->fc1_w, g->fc1_b, a->dfc1, s->ln2, w->fc1_w, BT, D, D4));
        grads_ready(m, base + 13, base + 12); /* fc1.bias, fc1.weight */
        VIT_OP(m, "layernorm_backward",
               ops->layernorm_backward(a->dres, g->ln2_w, g->ln2_b, a->dln, s->res_att, w->ln2_w,
                                       s->ln2_mean, s->ln2_rstd, BT, D));
        grads_ready(m, base + 11, base + 10); /* norm2.bias, norm2.weight */

        /* res_att = x + proj(attention(q, k, v)) */
        VIT_ZERO(m, a->datty, nD * sizeof(float));
        VIT_OP(m, "matmul_backward",
               ops->matmul_backward(a->datty, g->proj_w, g->proj_b, a->dres, s->atty, w->proj_w, BT, D, D));
        grads_ready(m, base + 9, base + 8); /* proj.bias, proj.weight */
        VIT_ZERO(m, a->dq, nD * sizeof(float));
        VIT_ZERO(m, a->dk, nD * sizeof(float));
        VIT_ZERO(m, a->dv, nD * sizeof(float));
        VIT_OP(m, "attention_backward",
               ops->attention_backward(a->dq, a->dk, a->dv, a->att_scratch, a->datty, s->att, s->q, s->k,
                                       s->v, B, N, N, NH, HD));
        /* v, k, q in that order so their gradients finish in reverse tensor order */
        VIT_ZERO(m, a->dln, nD * sizeof(float));
        VIT_OP(m, "matmul_backward",
               ops->matmul_backward(a->dln, g->v_w, g->v_b, a->dv, s->ln1, w->v_w, BT, D, D));
        grads_ready(m, base + 7, base + 6); /* v.bias, v.weight */
        VIT_OP(m, "matmul_backward",
               ops->matmul_backward(a->dln, g->k_w, g->k_b, a->dk, s->ln1, w->k_w, BT, D, D));
        grads_ready(m, base + 5, base + 4); /* k.bias, k.weight */
        VIT_OP(m, "matmul_backward",
               ops->matmul_backward(a->dln, g->q_w, g->q_b, a->dq, s->ln1, w->q_w, BT, D, D));
        grads_ready(m, base + 3, base + 2); /* q.bias, q.weight */
        VIT_OP(m, "layernorm_backward",
               ops->layernorm_backward(a->dres, g->ln1_w, g->ln1_b, a->dln, x, w->ln1_w, s->ln1_mean,
                                       s->ln1_rstd, BT, D));
        grads_ready(m, base + 1, base); /* norm1.bias, norm1.weight */
    }

    /* x0 = patch_embed(patches) + pos_embed */
    VIT_OP(m, "add_pos_embed_backward", ops->add_pos_embed_backward(m->g.pos, a->dres, B, N, D));
    grads_ready(m, 2, 2); /* pos_embed */
    /* dinp NULL: the patches are input data */
    VIT_OP(m, "matmul_backward",
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
 * usual MFU convention); the first layer's skipped dinp GEMM is ignored too. */
double vit_train_flops(const vit_model *m, int B) {
    const double N = m->ntok, D = m->d.dim, L = m->d.depth, NH = m->d.heads, HD = m->hd;
    const double gemm = 2.0 * B * N * ((double)m->patch_in * D + L * (4.0 * D * D + 8.0 * D * D) +
                                       (double)m->head_out * D);
    const double attn = L * 2.0 * B * NH * 2.0 * N * N * HD;
    return 3.0 * (gemm + attn);
}
