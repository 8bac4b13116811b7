/* scaling_predict.c: one training step of a tp x cp x dp layout (scaling_model.h).
 *
 * Compute. A reference priced op by op (scaling_price.h: a step measured
 * elsewhere) prices this layout's ops where they run, for the implementation
 * that runs them, times the reference's factor. Otherwise the reference is a
 * one-rank run's ops.csv: every op's seconds per timed step, scaled by the
 * work one rank does in the layout, as core/model/vit.c divides it:
 *   - the blocks' q/k/v/proj/fc1/fc2 GEMMs, attention and GELU work on this
 *     rank's heads / hidden units (1/tp) of this rank's tokens (Nl/N, Nl the
 *     largest cp shard: the slowest rank gates the step); a CUDA run's GEMMs
 *     and attention move by their price ratio on the machine instead, so a
 *     narrower GEMM runs at its own efficiency;
 *   - every other per-token op (LayerNorms, residual adds, patch embedding,
 *     head, pos_embed) on this rank's tokens only (Nl/N), replicated over tp;
 *   - patchify, unpatchify, the loss, the host-to-device copy and the data
 *     wait on the whole image: replicated over tp and cp;
 *   - Adam and the gradient zeroing on this rank's parameters (tp shards the
 *     block matrices), independent of the batch;
 *   - per-sample ops at the layout's local batch: linear between the two
 *     reference runs whose batches surround it, proportional to the batch
 *     beyond the smallest or largest (per-sample cost is not constant on the
 *     CPU: a batch of 4 costs more per sample than one of 8).
 * A shard reference (a one-rank run of this layout's tp x cp shard, bench_step
 * --shard_tp/--shard_cp) replaces these scaled times by measured ones for
 * every op it ran: GEMMs of a shard are not always 1/tp of the whole.
 * Time the step spends outside any op is kept, batch-independent. Then the CPU: a rank
 * with fewer OpenMP threads than the reference is slower in proportion
 * (linear thread scaling assumed), and ranks x threads beyond the node's
 * cores share them: compute x max(1, node_ranks x threads / cores) (on GPU
 * clusters, one rank per GPU, the factor is 1).
 *
 * Knobs (scaling_model.h vb_mknobs): the compute times compute_mul and, at an
 * interval corner, the reference's spread combined with the machine's
 * efficiency uncertainty wherever ops were repriced; every collective at the
 * corner of its own source's uncertainty and with its level's beta multiplier
 * (scaling_comm.h prices them: commbench where measured, the machine file's
 * levels along the group's placement elsewhere).
 *
 * Communication, as the implementation (scaling_price.h) runs it. tp: per
 * block its forward allreduces of the [B, Nl, D] activations (after proj and
 * fc2) and its backward ones (before qkv and fc1; float32 in the tutorials),
 * exposed whole (blocking), beside the column-parallel layer's weight
 * gradient (max(0, allreduce - wgrad)), or one tp chunk of each (sequence
 * parallelism with overlap); cp: per block one allgather of k and v (2 B N Dl
 * elements gathered) in forward and one reduce-scatter of their gradients in
 * backward, blocking or as a ring beside attention, and one allgather of the
 * head's output (B N head_out). DDP: the buckets of core/model/ddp.c's plan
 * (float32 gradients) allreduced over cp x dp (cp alone under noddp) on one
 * channel overlapping backward (vb_overlap_exposed); each bucket is ready
 * when the backward op producing its last gradient ends, on a backward
 * timeline rebuilt op by op in core/model/vit.c's order (exposed tp/cp
 * collectives included, they block it). Compute that ran beside a collective
 * is slower by the machine's overlap_slowdown.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/scaling/scaling_model.h"
#include "analysis/scaling/scaling_comm.h"
#include "analysis/scaling/scaling_price.h"
#include "core/util/common.h"
#include "core/model/ddp.h"

double vb_overlap_exposed(const double *ready_s, const double *dur_s, int n, double bwd_end_s, double *end_last_s) {
    double end = 0;
    for (int i = 0; i < n; i++) {
        const double start = ready_s[i] > end ? ready_s[i] : end;
        end = start + dur_s[i];
    }
    if (end_last_s) *end_last_s = end;
    return n > 0 && end > bwd_end_s ? end - bwd_end_s : 0.0;
}

double vb_eff_weak(double t1_s, double tp_s) { return t1_s > 0 && tp_s > 0 ? t1_s / tp_s : NAN; }

double vb_eff_strong(double t1_s, double tp_s, int p) {
    return t1_s > 0 && tp_s > 0 && p >= 1 ? t1_s / ((double)p * tp_s) : NAN;
}

int vb_mdims_ntok(const vb_mdims *d) { return (d->img_h / d->patch) * (d->img_w / d->patch); }

bool vb_mdims_equal(const vb_mdims *a, const vb_mdims *b) {
    return a->dim == b->dim && a->depth == b->depth && a->heads == b->heads && a->patch == b->patch &&
           a->img_h == b->img_h && a->img_w == b->img_w && a->cin == b->cin && a->cout == b->cout;
}

/* The largest cp shard, as vit_token_split makes them. */
int vb_tokens_local(int ntok, int cp) {
    int chunk = (ntok + cp - 1) / cp;
    if (ntok - chunk * (cp - 1) <= 0) chunk = ntok / cp;
    int last = ntok - chunk * (cp - 1);
    return chunk > last ? chunk : last;
}

int vb_model_check_layout(const vb_mdims *d, const vb_mlayout *l, char *err, size_t errn) {
    if (l->tp < 1 || l->cp < 1 || l->dp < 1) {
        vb_errf(err, errn, "tp %d x cp %d x dp %d: every size must be >= 1", l->tp, l->cp, l->dp);
        return -1;
    }
    if (d->heads % l->tp != 0) {
        vb_errf(err, errn, "tensor_parallel %d does not divide num_heads %d", l->tp, d->heads);
        return -1;
    }
    if (l->cp > vb_mdims_ntok(d)) {
        vb_errf(err, errn, "context_parallel %d exceeds the %d tokens", l->cp, vb_mdims_ntok(d));
        return -1;
    }
    if (l->local_batch < 1 || l->threads < 1 || l->node_ranks < 1 || l->cores < 1) {
        vb_errf(err, errn, "local batch %d, threads %d, ranks per node %d, cores %d: each must be >= 1",
                l->local_batch, l->threads, l->node_ranks, l->cores);
        return -1;
    }
    return 0;
}

/* The state_dict of core/model/vit.c with this tp rank's shard sizes, tiling
 * the gradient buffer in order; returns the tensor count. */
static int build_tensors(const vb_mdims *d, int tp, vit_tensor **out, size_t *nparams, size_t *nparams_full) {
    const size_t D = (size_t)d->dim, Dl = D / (size_t)tp, D4 = 4 * D, D4l = D4 / (size_t)tp;
    const size_t pp = (size_t)d->patch * (size_t)d->patch, N = (size_t)vb_mdims_ntok(d);
    const int n = 3 + 16 * d->depth + 3;
    vit_tensor *t = vb_calloc_check((size_t)n, sizeof *t);
    int k = 0;
    size_t off = 0, fsum = 0;
#define PUT(lo, fu)                               \
    do {                                          \
        t[k].offset = off, t[k].numel = (lo);     \
        off += (lo), fsum += (fu), k++;           \
    } while (0)
    PUT(D * (size_t)d->cin * pp, D * (size_t)d->cin * pp);
    PUT(D, D);
    PUT(N * D, N * D);
    /* norm1 w,b; q,k,v w,b; proj w,b; norm2 w,b; fc1 w,b; fc2 w,b */
    const size_t bl[16] = {D, D, Dl * D, Dl, Dl * D, Dl, Dl * D, Dl, D * Dl, D, D, D, D4l * D, D4l, D * D4l, D};
    const size_t bf[16] = {D, D, D * D, D, D * D, D, D * D, D, D * D, D, D, D, D4 * D, D4, D * D4, D};
    for (int l = 0; l < d->depth; l++)
        for (int j = 0; j < 16; j++) PUT(bl[j], bf[j]);
    PUT(D, D);
    PUT(D, D);
    const size_t ho = (size_t)d->cout * pp;
    PUT(ho * D, ho * D);
#undef PUT
    *out = t;
    *nparams = off;
    *nparams_full = fsum;
    return n;
}

enum { OP_TP_CP, OP_CP, OP_PARAM, OP_REPL };

/* What an op's work grows with, by its ops.csv name: the blocks' sharded
 * work (1/tp x Nl/N), per-token work every tp rank does in full (Nl/N),
 * parameter-sized work, and work on the whole image (replicated). */
static int op_shard_class(const char *name) {
    static const char *const tpcp[] = {"qkv", "proj", "fc1", "fc2", "attention", "gelu", "_sharded"};
    static const char *const cp[] = {"patch_embed", "matmul_forward_head", "matmul_backward_head", "layernorm",
                                     "add_pos_embed", "add_bias", "cp_", "residual_add", "elementwise_"};
    if (strcmp(name, "adam_update") == 0 || strcmp(name, "zero") == 0) return OP_PARAM;
    for (size_t i = 0; i < sizeof tpcp / sizeof *tpcp; i++)
        if (strstr(name, tpcp[i])) return OP_TP_CP;
    for (size_t i = 0; i < sizeof cp / sizeof *cp; i++)
        if (strstr(name, cp[i])) return OP_CP;
    return OP_REPL;
}

typedef enum { PH_FORWARD, PH_BACKWARD, PH_OTHER } phase;

static phase op_phase(const char *name) {
    if (strstr(name, "backward") || strcmp(name, "zero") == 0) return PH_BACKWARD;
    if (strcmp(name, "adam_update") == 0 || strcmp(name, "data_wait") == 0 || strcmp(name, "h2d") == 0)
        return PH_OTHER;
    return PH_FORWARD;
}

double vb_mref_at_batch(const vb_mref *r, const double *v, double b, bool proportional) {
    const int n = r->nref;
    if (n < 1) return 0.0;
    if (b <= r->batch[0]) return proportional ? v[0] * b / r->batch[0] : v[0];
    if (b >= r->batch[n - 1]) return proportional ? v[n - 1] * b / r->batch[n - 1] : v[n - 1];
    int i = 0;
    while (i + 1 < n - 1 && r->batch[i + 1] < b) i++;
    const double w = (b - r->batch[i]) / (double)(r->batch[i + 1] - r->batch[i]);
    return v[i] + w * (v[i + 1] - v[i]);
}

/* The price ratio of the layout's GEMMs and attention over the same ops on
 * one rank (scaling_price.h): shape-dependent efficiency carried onto a
 * measured op. n == 0: no machine to price with (the ratio is the work's). */
typedef struct {
    vb_priced_op at[VB_PRICE_MAX_OPS], one[VB_PRICE_MAX_OPS];
    int n, n_one;
} price_ratio;

static double ratio_of(const price_ratio *r, const char *name) {
    if (strncmp(name, "matmul_", 7) != 0 && strncmp(name, "attention_", 10) != 0) return -1;
    /* by name in both lists: a layout's own ops (cp copies, casts) shift the indices */
    for (int i = 0; i < r->n; i++) {
        if (strcmp(r->at[i].name, name) != 0) continue;
        for (int j = 0; j < r->n_one; j++)
            if (strcmp(r->one[j].name, name) == 0 && r->one[j].step_s > 0) return r->at[i].step_s / r->one[j].step_s;
    }
    return -1;
}

typedef struct {
    const vb_mref *ref;
    double batch, tok_f, tp_f, param_f, cpu_f;
    const price_ratio *pr; /* NULL: shares of the work */
} scaler;

/* Seconds per step of op o in the layout: its one-rank time at this batch
 * (parameter-sized ops: batch-independent), times the rank's share of its
 * work (a GEMM or attention: its price ratio when the machine prices them)
 * and the CPU factor. */
static double op_step_s(const scaler *s, const vb_mop *o) {
    switch (op_shard_class(o->name)) {
    case OP_TP_CP: {
        const double r = s->pr ? ratio_of(s->pr, o->name) : -1;
        return vb_mref_at_batch(s->ref, o->step_s, s->batch, true) * (r >= 0 ? r : s->tok_f * s->tp_f) * s->cpu_f;
    }
    case OP_CP: return vb_mref_at_batch(s->ref, o->step_s, s->batch, true) * s->tok_f * s->cpu_f;
    case OP_PARAM: return vb_mref_at_batch(s->ref, o->step_s, s->batch, false) * s->param_f * s->cpu_f;
    default: return vb_mref_at_batch(s->ref, o->step_s, s->batch, true) * s->cpu_f;
    }
}

double vb_corner_factor(int corner, double u) {
    if (corner == 0 || !(u > 0)) return 1.0;
    return corner > 0 ? 1.0 + u : 1.0 / (1.0 + u);
}

void vb_mknobs_nominal(vb_mknobs *k) {
    memset(k, 0, sizeof *k);
    k->compute_mul = 1.0;
    for (int l = 0; l < VB_MACHINE_MAX_LEVELS; l++) k->beta_mul[l] = 1.0;
}

/* CPU factor of a layout's rank against a reference's: fewer threads are
 * slower in proportion, ranks x threads beyond the cores share them. */
static double cpu_factor(const vb_mref *ref, const vb_mlayout *l) {
    const double over_l = fmax(1.0, (double)l->node_ranks * l->threads / l->cores);
    const double over_r = fmax(1.0, (double)ref->node_ranks * ref->threads / ref->cores);
    return (double)ref->threads / l->threads * over_l / over_r;
}

/* The layout's ops: each op's seconds per step and calls, from the shard
 * reference of this tp x cp when there is one (measured, not scaled), else
 * the one-rank reference scaled by the rank's share of the work, else (a
 * priced reference) the layout's own ops priced. */
typedef struct {
    char name[64];
    double step_s, calls;
} eff_op;

typedef struct {
    eff_op *v;
    int n;
} eff_ops;

static const vb_mref *shard_for(const vb_mctx *m, const vb_mlayout *l) {
    for (int i = 0; i < m->nshards; i++)
        if (m->shards[i].shard_tp == l->tp && m->shards[i].shard_cp == l->cp) return &m->shards[i];
    return NULL;
}

static const vb_mop *find_op(const vb_mref *r, const char *name) {
    for (int i = 0; i < r->nops; i++)
        if (strcmp(r->ops[i].name, name) == 0) return &r->ops[i];
    return NULL;
}

/* Seconds per step of shard op o at batch B: per-sample ops follow the
 * batch, parameter-sized ones do not; the shard is the rank's work already. */
static double shard_op_s(const vb_mref *sh, const vb_mop *o, double B) {
    return vb_mref_at_batch(sh, o->step_s, B, op_shard_class(o->name) != OP_PARAM);
}

static eff_op *eff_add(eff_ops *e, const char *name, double step_s, double calls) {
    eff_op *o = &e->v[e->n++];
    vb_snprintf(o->name, sizeof o->name, "%s", name);
    o->step_s = step_s, o->calls = calls;
    return o;
}

static eff_ops layout_ops(const vb_mctx *m, const vb_mlayout *l, const scaler *s, const vb_mref *sh, double sh_f) {
    const vb_mref *ref = m->ref;
    eff_ops e = {vb_calloc_check((size_t)(ref->nops + (sh ? sh->nops : 0)) + 1, sizeof(eff_op)), 0};
    for (int i = 0; i < ref->nops; i++) {
        const vb_mop *o = &ref->ops[i];
        const vb_mop *so = sh ? find_op(sh, o->name) : NULL;
        eff_add(&e, o->name, so ? shard_op_s(sh, so, l->local_batch) * sh_f : op_step_s(s, o), so ? so->calls : o->calls);
    }
    /* work only the shard does (its own rearrangements): it is the rank's too */
    for (int i = 0; sh && i < sh->nops; i++) {
        if (find_op(ref, sh->ops[i].name)) continue;
        eff_add(&e, sh->ops[i].name, shard_op_s(sh, &sh->ops[i], l->local_batch) * sh_f, sh->ops[i].calls);
    }
    return e;
}

/* A priced reference: the layout's ops priced where it runs, times the
 * reference's factor and mul. */
static eff_ops priced_ops(const vb_price_in *in, double mul) {
    vb_priced_op po[VB_PRICE_MAX_OPS];
    const int n = vb_price_ops(in, po);
    eff_ops e = {vb_calloc_check((size_t)n + 1, sizeof(eff_op)), 0};
    for (int i = 0; i < n; i++) eff_add(&e, po[i].name, po[i].step_s * mul, po[i].calls);
    return e;
}

static const eff_op *find_eff(const eff_ops *e, const char *name) {
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->v[i].name, name) == 0) return &e->v[i];
    return NULL;
}

/* One call of `name` in the layout, in seconds (0 when the reference never ran it). */
static double call_s(const eff_ops *e, const char *name) {
    const eff_op *o = find_eff(e, name);
    return o && o->calls > 0 ? o->step_s / o->calls : 0.0;
}

/* One block's share of `name` (its time over the depth; 0 when never run). */
static double block_s(const eff_ops *e, const char *name, int depth) {
    const eff_op *o = find_eff(e, name);
    return o ? o->step_s / depth : 0.0;
}

/* The backward timeline: advances *t by dur, marks tensors [first, last] ready at its end. */
static void step_to(double *t, double dur, double *ready, int last, int first) {
    *t += dur;
    for (int i = last; i >= first && i >= 0; i--) ready[i] = *t;
}

/* "tp: nvlink3 (machine)" and the like, appended to buf */
static void note_src(const vb_mctx *m, char *buf, size_t n, const char *g, const vb_mcomm_use *u) {
    if (u->source == VB_SRC_NONE) return;
    const size_t len = strlen(buf);
    const char *lv = m->machine && u->level >= 0 && u->level < m->machine->nlevels ? m->machine->level[u->level].name
                                                                                 : "";
    if (u->source == VB_SRC_COMMBENCH)
        snprintf(buf + len, n - len, "%s%s: commbench%s", len ? "; " : "", g, u->extrapolated ? " (other size)" : "");
    else
        snprintf(buf + len, n - len, "%s%s: %s", len ? "; " : "", g, lv);
}

/* The code a prediction runs: the context's, else the reference's, else vitbench's. */
static const vb_impl *impl_of(const vb_mctx *m) {
    if (m->impl) return m->impl;
    if (m->ref->impl) return m->ref->impl;
    return vb_impl_default();
}

/* Exposed tensor-parallel time of one block, forward and backward, and where
 * the backward part falls: after fc1's backward (*at_fc1) and after qkv's
 * (*at_qkv). ar_f / ar_b: one forward / backward collective; w_qkv, w_fc1:
 * the weight-gradient GEMMs a column-parallel layer's allreduce can hide
 * behind (half of its backward); *hidden: compute that ran beside a
 * collective (for the interference slowdown). */
static void tp_block(const vb_impl *im, int tp, double ar_f, double ar_b, double w_qkv, double w_fc1, double *fwd,
                     double *at_fc1, double *at_qkv, double *hidden) {
    const int nf = im->tp_fwd_ar, nb = im->tp_bwd_ar, nq = nb > 1 ? nb - 1 : 0;
    *hidden = 0;
    switch (im->tp_overlap) {
    case VB_TP_WGRAD:
        *fwd = nf * ar_f;
        *at_fc1 = fmax(0.0, ar_b - w_fc1);
        *at_qkv = nq ? nq * fmax(0.0, ar_b - w_qkv / nq) : 0;
        *hidden = fmin(ar_b, w_fc1) + (nq ? nq * fmin(ar_b, w_qkv / nq) : 0);
        break;
    case VB_TP_SP_OVERLAP: /* split in tp chunks behind the GEMMs: the first chunk of each is exposed */
        *fwd = nf * ar_f / tp;
        *at_fc1 = ar_b / tp;
        *at_qkv = nq * ar_b / tp;
        *hidden = (nf * ar_f + nb * ar_b) * (tp - 1.0) / tp;
        break;
    default:
        *fwd = nf * ar_f;
        *at_fc1 = ar_b;
        *at_qkv = nq * ar_b;
        break;
    }
}

void vb_model_predict(const vb_mctx *m, const vb_mlayout *l, const vb_mknobs *kn_in, vb_mpred *out) {
    memset(out, 0, sizeof *out);
    vb_mknobs nominal;
    vb_mknobs_nominal(&nominal);
    const vb_mknobs *kn = kn_in ? kn_in : &nominal;
    const vb_mref *ref = m->ref;
    const vb_mdims *d = &ref->d;
    const vb_impl *im = impl_of(m);
    const int N = vb_mdims_ntok(d), Nl = vb_tokens_local(N, l->cp), L = d->depth, world = l->tp * l->cp * l->dp;
    const double B = l->local_batch, esz = ref->act_bytes, D = d->dim, Dl = (double)d->dim / l->tp;
    vit_tensor *tens;
    size_t np, npf;
    const int nt = build_tensors(d, l->tp, &tens, &np, &npf);

    /* compute: the reference's (a priced one: this layout's ops priced where it
     * runs), times the peak ratio of the two machines, the knob and the
     * uncertainty corner: the reference's spread, and the machine's efficiency
     * uncertainty wherever ops were repriced away from what was measured */
    const vb_mref *sh = shard_for(m, l);
    const bool priced = ref->price_factor > 0;
    const vb_machine *pm = priced ? (m->machine ? m->machine : ref->price_machine) : ref->gpu ? m->machine : NULL;
    const bool can_price = vb_machine_can_price(pm);
    double spread = ref->spread, ueff = 0;
    if (sh && sh->spread > spread) spread = sh->spread;
    /* a reference's own steps may agree to 0.1%; scaling them to another
     * layout is known to no better than the step's run-to-run floor */
    if (!(spread > VB_MODEL_COMPUTE_UNCERTAINTY)) spread = VB_MODEL_COMPUTE_UNCERTAINTY;
    if (priced) {
        const bool same_point = l->tp == 1 && l->cp == 1 && B == ref->batch[0] && vb_mdims_equal(d, &ref->price_dims) &&
                                strcmp(pm->path, ref->price_machine->path) == 0 &&
                                im == (ref->impl ? ref->impl : vb_impl_default());
        if (!same_point) ueff = pm->eff_uncertainty;
    } else if (!sh && can_price && (l->tp > 1 || l->cp > 1)) {
        ueff = pm->eff_uncertainty;
    }
    out->compute_u = sqrt(spread * spread + ueff * ueff);
    const double corner = kn->compute_mul * vb_corner_factor(kn->corner, out->compute_u);
    const double cmul = (!priced && m->compute_scale > 0 ? m->compute_scale : 1.0) * corner;
    scaler s = {.ref = ref,
                .batch = B,
                .tok_f = (double)Nl / N,
                .tp_f = 1.0 / l->tp,
                .param_f = (double)np / (double)npf};
    s.cpu_f = cpu_factor(ref, l) * cmul;
    out->cpu_factor = priced ? 1.0 : cpu_factor(ref, l);
    const double sh_f = sh ? cpu_factor(sh, l) * cmul : 0.0;
    vb_price_in pin = {.d = d, .impl = im, .m = pm, .prec = ref->prec, .act_bytes = ref->act_bytes, .tp = l->tp,
                       .cp = l->cp, .batch = B};
    eff_ops e;
    price_ratio *pr = NULL;
    if (priced) {
        e = priced_ops(&pin, ref->price_factor * corner);
        snprintf(out->compute_ref, sizeof out->compute_ref, "priced on %s (%s) x%.4g", pm->name, im->name,
                 ref->price_factor);
    } else {
        if (!sh && can_price && (l->tp > 1 || l->cp > 1)) {
            pr = vb_calloc_check(1, sizeof *pr);
            pr->n = vb_price_ops(&pin, pr->at);
            vb_price_in one = pin;
            one.tp = one.cp = 1;
            pr->n_one = vb_price_ops(&one, pr->one);
            s.pr = pr;
        }
        e = layout_ops(m, l, &s, sh, sh_f);
        if (sh)
            snprintf(out->compute_ref, sizeof out->compute_ref, "shard tp%d cp%d measured", l->tp, l->cp);
        else if (pr)
            snprintf(out->compute_ref, sizeof out->compute_ref, "one rank, GEMMs and attention repriced on %s",
                     pm->name);
        else if (l->tp > 1 || l->cp > 1)
            snprintf(out->compute_ref, sizeof out->compute_ref, "one rank scaled by 1/tp x Nl/N");
        else
            snprintf(out->compute_ref, sizeof out->compute_ref, "one rank");
    }

    /* compute by phase; the time outside any op is batch-independent (times the CPU factor) */
    for (int i = 0; i < e.n; i++) {
        switch (op_phase(e.v[i].name)) {
        case PH_FORWARD: out->forward_s += e.v[i].step_s; break;
        case PH_BACKWARD: out->backward_s += e.v[i].step_s; break;
        default: out->other_s += e.v[i].step_s; break;
        }
    }
    if (!priced) {
        double outside[VB_MODEL_MAX_REFS];
        for (int k = 0; k < ref->nref; k++) outside[k] = ref->step_s[k];
        for (int i = 0; i < ref->nops; i++)
            for (int k = 0; k < ref->nref; k++) outside[k] -= ref->ops[i].step_s[k];
        for (int k = 0; k < ref->nref; k++) outside[k] = fmax(0.0, outside[k]);
        out->other_s += vb_mref_at_batch(ref, outside, B, false) * s.cpu_f;
    }
    out->compute_s = out->forward_s + out->backward_s + out->other_s;

    /* where the groups sit (a machine file), then the tp and cp collectives,
     * sizes in bytes as commbench counts them */
    const vb_group_kind gkind = l->noddp ? VB_GROUP_CP : VB_GROUP_CP_DP;
    vb_mplace ptp, pcp, pgr;
    const vb_mplace *pl_tp = NULL, *pl_cp = NULL, *pl_gr = NULL;
    if (m->machine) {
        vb_layout lay;
        char err[512];
        if (vb_layout_init(&lay, world, l->tp, l->cp, l->order[0] ? l->order : NULL, err, sizeof err) != 0)
            vb_die_input("model: %s", err);
        if (vb_mplace_group(m->machine, &lay, l->node_ranks, VB_GROUP_TP, &ptp, err, sizeof err) != 0 ||
            vb_mplace_group(m->machine, &lay, l->node_ranks, VB_GROUP_CP, &pcp, err, sizeof err) != 0 ||
            vb_mplace_group(m->machine, &lay, l->node_ranks, gkind, &pgr, err, sizeof err) != 0)
            vb_die_input("model: %s (%s)", err, m->machine->path);
        pl_tp = &ptp, pl_cp = &pcp, pl_gr = &pgr;
    }
    vb_mcomm_use u_tp = {0}, u_ag = {0}, u_rs = {0}, u_dd = {0};
    double tp_ar_f = 0, tp_ar_b = 0, cp_ag_kv = 0, cp_ag_head = 0, cp_rs_kv = 0;
    if (l->tp > 1) {
        const double act = B * Nl * D * esz, bwd = B * Nl * D * (im->tp_bwd_bytes ? im->tp_bwd_bytes : esz);
        tp_ar_f = vb_mcomm_seconds(m, pl_tp, VB_COLL_ALLREDUCE, "tp", l->tp, world, l->node_ranks, act, kn, &u_tp);
        tp_ar_b = vb_mcomm_seconds(m, pl_tp, VB_COLL_ALLREDUCE, "tp", l->tp, world, l->node_ranks, bwd, kn, NULL);
    }
    if (l->cp > 1) {
        /* k and v at the code's dtype; the ends: the (B, N, D) stream before
         * the head and its gradient after backward, or the head's output */
        const double kv = 2.0 * B * N * Dl * (im->cp_kv_bytes ? im->cp_kv_bytes : esz);
        const bool stream = im->cp_ends_whole && im->cp_ends_bytes > 0;
        const double head = stream ? B * N * D * im->cp_ends_bytes : B * N * (double)d->cout * d->patch * d->patch * esz;
        cp_ag_kv = vb_mcomm_seconds(m, pl_cp, VB_COLL_ALLGATHER, "cp", l->cp, world, l->node_ranks, kv, kn, &u_ag);
        cp_ag_head = (stream ? 2 : 1) *
                     vb_mcomm_seconds(m, pl_cp, VB_COLL_ALLGATHER, "cp", l->cp, world, l->node_ranks, head, kn, NULL);
        cp_rs_kv = vb_mcomm_seconds(m, pl_cp, VB_COLL_REDUCE_SCATTER, "cp", l->cp, world, l->node_ranks, kv, kn, &u_rs);
    }

    /* backward per block, in core/model/vit.c's order, for the buckets' ready times */
    const double head = block_s(&e, "matmul_backward_head", 1);
    const double ln_final = call_s(&e, "layernorm_backward");
    /* a block's two LayerNorm backwards: measured ones (2 depth + 1 calls), or
     * half each of a priced block's replicated element-wise backward */
    const eff_op *ewb = find_eff(&e, "elementwise_backward");
    const double ln_blk = ewb ? 0.5 * ewb->step_s / L : ln_final;
    const double fc2 = block_s(&e, "matmul_backward_fc2", L);
    const double gelu = block_s(&e, "gelu_backward", L) + block_s(&e, "elementwise_backward_sharded", L);
    const double fc1 = block_s(&e, "matmul_backward_fc1", L), proj = block_s(&e, "matmul_backward_proj", L);
    const double att = block_s(&e, "attention_backward", L) + block_s(&e, "sdpa_cast_backward", L);
    const double cp_copy = block_s(&e, "cp_gather_copy_backward", L);
    const double qkv = block_s(&e, "matmul_backward_qkv", L);
    const double att_f = block_s(&e, "attention_forward", L);
    const double pos = block_s(&e, "add_pos_embed_backward", 1), pe = block_s(&e, "matmul_backward_patch_embed", 1);

    /* tp: exposed per block by the implementation's overlap; cp: blocking
     * allgather / reduce-scatter, or a ring beside attention */
    double tp_fwd = 0, tp_at_fc1 = 0, tp_at_qkv = 0, hidden = 0;
    if (l->tp > 1) tp_block(im, l->tp, tp_ar_f, tp_ar_b, 0.5 * qkv, 0.5 * fc1, &tp_fwd, &tp_at_fc1, &tp_at_qkv, &hidden);
    double cp_fwd = cp_ag_kv, cp_bwd = cp_rs_kv;
    if (l->cp > 1 && im->cp_mode == VB_CP_RING) {
        const double share = (l->cp - 1.0) / l->cp;
        cp_fwd = fmax(0.0, cp_ag_kv - att_f * share);
        cp_bwd = fmax(0.0, cp_ag_kv + cp_rs_kv - att * share);
        hidden += fmin(cp_ag_kv, att_f * share) + fmin(cp_ag_kv + cp_rs_kv, att * share);
    }
    hidden *= L; /* per block so far */
    out->exposed_tp_s = L * (tp_fwd + tp_at_fc1 + tp_at_qkv);
    out->exposed_cp_s = L * (cp_fwd + cp_bwd) + cp_ag_head;

    double *ready = vb_calloc_check((size_t)nt, sizeof *ready);
    double t = 0, placed = 0;
    const char *const seq_ops[] = {"zero", "rel_l2_loss_backward", "unpatchify_backward", "cp_slice"};
    for (size_t i = 0; i < sizeof seq_ops / sizeof *seq_ops; i++) {
        const eff_op *o = find_eff(&e, seq_ops[i]);
        if (o) t += o->step_s;
    }
    placed = t + head + ln_final + L * (fc2 + gelu + fc1 + proj + att + cp_copy + qkv + 2 * ln_blk) + pos + pe;
    /* backward work not in the sequence (an op this model does not know) goes first */
    t += fmax(0.0, out->backward_s - placed);
    step_to(&t, head, ready, nt - 1, nt - 1);
    step_to(&t, ln_final, ready, nt - 2, nt - 3);
    for (int b = L - 1; b >= 0; b--) {
        const int base = 3 + 16 * b;
        step_to(&t, fc2, ready, base + 15, base + 14);
        step_to(&t, gelu + fc1, ready, base + 13, base + 12);
        step_to(&t, tp_at_fc1 + ln_blk, ready, base + 11, base + 10);
        step_to(&t, proj, ready, base + 9, base + 8);
        step_to(&t, att + cp_copy + cp_bwd + qkv / 3, ready, base + 7, base + 6);
        step_to(&t, qkv / 3, ready, base + 5, base + 4);
        step_to(&t, qkv / 3, ready, base + 3, base + 2);
        step_to(&t, tp_at_qkv + ln_blk, ready, base + 1, base);
    }
    step_to(&t, pos, ready, 2, 2);
    step_to(&t, pe, ready, 1, 0);
    const double bwd_end = t;

    /* DDP buckets over cp x dp (cp alone under noddp) */
    const int p_red = l->noddp ? l->cp : l->cp * l->dp;
    if (p_red > 1) {
        const size_t cap = vb_ddp_cap_bytes(l->bucket_cap_mb);
        vb_ddp_bucket *bk = vb_calloc_check((size_t)nt, sizeof *bk);
        int *bucket_of = vb_calloc_check((size_t)nt, sizeof *bucket_of);
        double *br = vb_calloc_check((size_t)nt, sizeof *br), *bd = vb_calloc_check((size_t)nt, sizeof *bd);
        const int nb = vb_ddp_plan(tens, nt, np, cap, bk, bucket_of);
        const char *g = l->noddp ? "cp" : l->cp > 1 ? "cpdp" : "dp";
        for (int k = 0; k < nb; k++) {
            double r = 0;
            for (int i = bk[k].first; i <= bk[k].last; i++) r = fmax(r, ready[i]);
            br[k] = m->mode == VB_DDP_AFTER_BACKWARD ? bwd_end : r;
            bd[k] = vb_mcomm_seconds(m, pl_gr, VB_COLL_ALLREDUCE, g, p_red, world, l->node_ranks,
                                     (double)bk[k].numel * sizeof(float), kn, &u_dd);
            out->ddp_comm_s += bd[k];
        }
        double end_last = 0;
        out->exposed_ddp_s = vb_overlap_exposed(br, bd, nb, bwd_end, &end_last);
        if (m->mode != VB_DDP_AFTER_BACKWARD) hidden += fmax(0.0, out->ddp_comm_s - out->exposed_ddp_s);
        out->nbuckets = nb;
        free(bk), free(bucket_of), free(br), free(bd);
    }
    /* compute that ran beside a collective is slower by the interference
     * commbench measured, else by the machine file's */
    const double measured = m->fits ? vb_ab_overlap_slowdown(m->fits) : -1.0;
    const double slowdown = measured >= 0 ? measured : m->machine ? m->machine->overlap_slowdown : 0.0;
    if (slowdown > 0) {
        const double slow = slowdown * hidden;
        out->backward_s += slow, out->compute_s += slow;
    }
    out->extrapolated = u_tp.extrapolated || u_ag.extrapolated || u_rs.extrapolated || u_dd.extrapolated;
    note_src(m, out->comm_src, sizeof out->comm_src, "tp", &u_tp);
    note_src(m, out->comm_src, sizeof out->comm_src, "cp allgather", &u_ag);
    note_src(m, out->comm_src, sizeof out->comm_src, "cp reduce_scatter", &u_rs);
    note_src(m, out->comm_src, sizeof out->comm_src, l->noddp ? "cp grads" : "ddp", &u_dd);
    out->step_s = out->compute_s + out->exposed_tp_s + out->exposed_cp_s + out->exposed_ddp_s;
    out->samples_per_s = B * l->dp / out->step_s;
    free(e.v);
    free(pr);
    free(ready);
    free(tens);
}
