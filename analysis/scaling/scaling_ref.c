/* scaling_ref.c: references from a step time and op shares (scaling_ref.h). */
#include "analysis/scaling/scaling_ref.h"

#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/scaling/scaling_price.h"
#include "core/util/common.h"

static int cmp_dbl(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* linear quantile q of sorted v */
static double quantile(const double *v, int n, double q) {
    const double pos = q * (n - 1);
    const int i = (int)floor(pos);
    if (i >= n - 1) return v[n - 1];
    return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

double vb_rel_spread(double *v, int n) {
    if (n < 2) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    const double med = quantile(v, n, 0.5);
    return med > 0 ? 0.5 * (quantile(v, n, 0.975) - quantile(v, n, 0.025)) / med : 0.0;
}

/* ---- the ViT's ops: calls per step and FLOPs per sample (vit_train_flops' accounting) ---- */

typedef struct {
    const char *name;
    int calls_per_block, calls_once; /* calls = per_block x depth + once */
    int kind;                        /* what its work grows with */
} op_def;

enum { K_PATCH_EMBED, K_QKV, K_ATTN, K_PROJ, K_MLP, K_HEAD, K_TOKENS, K_HIDDEN, K_PARAMS, K_IMAGE };

static const op_def k_ops[] = {
    {"patchify", 0, 1, K_IMAGE},
    {"matmul_forward_patch_embed", 0, 1, K_PATCH_EMBED},
    {"add_pos_embed", 0, 1, K_TOKENS},
    {"layernorm_forward", 2, 1, K_TOKENS},
    {"matmul_forward_qkv", 3, 0, K_QKV},
    {"attention_forward", 1, 0, K_ATTN},
    {"matmul_forward_proj", 1, 0, K_PROJ},
    {"residual_add", 2, 0, K_TOKENS},
    {"matmul_forward_fc1", 1, 0, K_MLP},
    {"gelu_forward", 1, 0, K_HIDDEN},
    {"matmul_forward_fc2", 1, 0, K_MLP},
    {"matmul_forward_head", 0, 1, K_HEAD},
    {"unpatchify", 0, 1, K_IMAGE},
    {"rel_l2_loss_forward", 0, 1, K_IMAGE},
    {"zero", 0, 1, K_PARAMS},
    {"rel_l2_loss_backward", 0, 1, K_IMAGE},
    {"unpatchify_backward", 0, 1, K_IMAGE},
    {"matmul_backward_head", 0, 1, K_HEAD},
    {"layernorm_backward", 2, 1, K_TOKENS},
    {"matmul_backward_fc2", 1, 0, K_MLP},
    {"gelu_backward", 1, 0, K_HIDDEN},
    {"matmul_backward_fc1", 1, 0, K_MLP},
    {"matmul_backward_proj", 1, 0, K_PROJ},
    {"attention_backward", 1, 0, K_ATTN},
    {"matmul_backward_qkv", 3, 0, K_QKV},
    {"add_pos_embed_backward", 0, 1, K_TOKENS},
    {"matmul_backward_patch_embed", 0, 1, K_PATCH_EMBED},
    {"adam_update", 0, 1, K_PARAMS},
};
#define NOPS ((int)(sizeof k_ops / sizeof *k_ops))

static const op_def *op_of(const char *name) {
    for (int i = 0; i < NOPS; i++)
        if (strcmp(k_ops[i].name, name) == 0) return &k_ops[i];
    return NULL;
}

static double ntok(const vb_mdims *d) { return vb_mdims_ntok(d); }

/* FLOPs per sample of op `o` over the whole step (all its calls); 0 for ops without arithmetic worth counting.
 * A GEMM's backward is two GEMMs of its forward's size (input and weight
 * gradients). Attention's backward executes five products of the forward's
 * two (fused attention recomputes Q K^T, then forms dV, dP, dQ and dK), so
 * 2.5x the forward: the work a GPU does, which prices time; vit_train_flops
 * counts 2x, the model-FLOPs convention of MFU. */
static double op_flops(const op_def *o, const vb_mdims *d) {
    const double N = ntok(d), D = d->dim, L = d->depth, pp = (double)d->patch * d->patch;
    const double bwd = strstr(o->name, "backward") ? 2.0 : 1.0;
    switch (o->kind) {
    case K_PATCH_EMBED: return bwd * 2.0 * N * d->cin * pp * D;
    case K_QKV: return bwd * L * 3.0 * 2.0 * N * D * D;
    case K_ATTN: return (bwd > 1 ? 2.5 : 1.0) * L * 2.0 * 2.0 * N * N * D;
    case K_PROJ: return bwd * L * 2.0 * N * D * D;
    case K_MLP: return bwd * L * 2.0 * N * D * 4.0 * D;
    case K_HEAD: return bwd * 2.0 * N * D * d->cout * pp;
    default: return 0.0;
    }
}

/* what an op's time grows with, for rescaling one without FLOPs */
static double op_size(const op_def *o, const vb_mdims *d) {
    const double N = ntok(d), D = d->dim;
    switch (o->kind) {
    case K_TOKENS: return N * D * (o->calls_per_block * d->depth + o->calls_once);
    case K_HIDDEN: return N * 4.0 * D * d->depth;
    case K_PARAMS: return vb_price_nparams(d, 1);
    case K_IMAGE: return (double)d->img_h * d->img_w * (d->cin + d->cout);
    default: return op_flops(o, d);
    }
}

static double total_flops(const vb_mdims *d) {
    double f = 0;
    for (int i = 0; i < NOPS; i++) f += op_flops(&k_ops[i], d);
    return f;
}

static vb_mop *add_op(vb_mref *r, const char *name, double step_s, double calls) {
    vb_mop *no = vb_realloc_check(r->ops, sizeof *no * (size_t)(r->nops + 1));
    r->ops = no;
    vb_mop *o = &r->ops[r->nops++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", name);
    o->step_s[0] = step_s;
    o->calls = calls;
    return o;
}

void vb_mdims_from_yaml(const vb_my *y, yaml_node_t *node, const char *where, vb_mdims *out) {
    vb_yaml_pairs p;
    vb_my_pairs(y, node, where, &p);
    static const char *const known[] = {"embed_dim",     "depth",          "num_heads", "patch_size", "img_size",
                                        "n_in_channels", "n_out_channels", NULL};
    vb_my_only_keys(y, &p, where, known);
    memset(out, 0, sizeof *out);
    out->dim = vb_my_int(y, &p, where, "embed_dim", 1, 1 << 20);
    out->depth = vb_my_int(y, &p, where, "depth", 1, 1 << 16);
    out->heads = vb_my_int(y, &p, where, "num_heads", 1, 1 << 16);
    out->patch = vb_my_int(y, &p, where, "patch_size", 1, 1 << 16);
    out->cin = vb_my_int(y, &p, where, "n_in_channels", 1, 1 << 16);
    out->cout = vb_my_int(y, &p, where, "n_out_channels", 1, 1 << 16);
    int line = 0;
    yaml_node_t *img = vb_my_get(&p, "img_size", &line);
    char what[128];
    snprintf(what, sizeof what, "%s.img_size", where);
    if (!img) vb_die_input("%s: %s: missing required key 'img_size' ([H, W])", y->file, where);
    int n = 0;
    yaml_node_t **it = vb_my_list(y, img, what, &n);
    if (n != 2) vb_die_input("%s: %s (line %d): expected [H, W]", y->file, what, line);
    out->img_h = (int)vb_my_node_num(y, it[0], what, 1, 1 << 20);
    out->img_w = (int)vb_my_node_num(y, it[1], what, 1, 1 << 20);
    free(it);
    if (out->img_h < out->patch || out->img_w < out->patch || out->dim % out->heads != 0)
        vb_die_input("%s: %s: an impossible model (img_size smaller than a patch, or embed_dim %% num_heads != 0)",
                     y->file, where);
    vb_yaml_pairs_free(&p);
}

static void layout_from_yaml(const vb_my *y, yaml_node_t *node, const char *where, vb_mlayout *l) {
    vb_yaml_pairs p;
    vb_my_pairs(y, node, where, &p);
    static const char *const known[] = {"tp", "cp", "dp", "order", NULL};
    vb_my_only_keys(y, &p, where, known);
    l->tp = vb_my_int_or(y, &p, where, "tp", 1, 1 << 20, 1);
    l->cp = vb_my_int_or(y, &p, where, "cp", 1, 1 << 20, 1);
    l->dp = vb_my_int_or(y, &p, where, "dp", 1, 1 << 20, 1);
    l->order[0] = '\0';
    vb_my_str_or(y, &p, where, "order", l->order, sizeof l->order);
    vb_yaml_pairs_free(&p);
}

static void resolve(const char *dir, const char *rel, char *out, size_t n) {
    if (rel[0] == '/' || !dir || !dir[0])
        vb_snprintf(out, n, "%s", rel);
    else
        vb_snprintf(out, n, "%s/%s", dir, rel);
}

int vb_my_machine_files(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *dir,
                        char files[VB_MREF_MAX_MACHINES][VB_MREF_PATH]) {
    int line = 0;
    yaml_node_t *n = vb_my_get(p, "machine", &line);
    if (!n) return 0;
    if (vb_yaml_scalar(n)) {
        resolve(dir, vb_yaml_scalar(n), files[0], VB_MREF_PATH);
        return 1;
    }
    char w[160];
    snprintf(w, sizeof w, "%s.machine", where);
    int count = 0;
    yaml_node_t **it = vb_my_list(y, n, w, &count);
    if (count < 1 || count > VB_MREF_MAX_MACHINES)
        vb_die_input("%s: %s (line %d): %d machine files (expected 1 to %d)", y->file, w, line, count,
                     VB_MREF_MAX_MACHINES);
    for (int k = 0; k < count; k++) {
        const char *t = vb_yaml_scalar(it[k]);
        if (!t || !t[0]) vb_die_input("%s: %s[%d]: not a file name", y->file, w, k);
        resolve(dir, t, files[k], VB_MREF_PATH);
    }
    free(it);
    return count;
}

void vb_mref_from_yaml(const vb_my *y, yaml_node_t *node, yaml_node_t *models, const char *where, const char *dir,
                       vb_mref *out, vb_mref_src *src) {
    vb_yaml_pairs p;
    vb_my_pairs(y, node, where, &p);
    static const char *const known[] = {"what",   "model",     "amp",           "precision", "machine", "local_batch",
                                        "samples_per_s", "step_s", "layout", "op_shares", "implementation", NULL};
    vb_my_only_keys(y, &p, where, known);
    memset(out, 0, sizeof *out);
    memset(src, 0, sizeof *src);
    vb_my_str(y, &p, where, "what", out->what, sizeof out->what);
    /* model: a mapping of dims, or the name of one in `models` */
    int line = 0;
    yaml_node_t *mn = vb_my_get(&p, "model", &line);
    if (!mn) vb_die_input("%s: %s: missing required key 'model' (dims, or a name under models)", y->file, where);
    char w[160];
    snprintf(w, sizeof w, "%s.model", where);
    if (vb_yaml_scalar(mn)) {
        const char *name = vb_yaml_scalar(mn);
        yaml_node_t *dn = NULL;
        if (models) {
            vb_yaml_pairs mp;
            vb_my_pairs(y, models, "models", &mp);
            dn = vb_my_get(&mp, name, NULL);
            vb_yaml_pairs_free(&mp);
        }
        if (!dn) vb_die_input("%s: %s (line %d): no model named '%s' under models", y->file, w, line, name);
        snprintf(w, sizeof w, "models.%s", name);
        mn = dn;
    }
    vb_mdims_from_yaml(y, mn, w, &out->d);

    char amp[16] = "none", prec[16] = "";
    vb_my_str_or(y, &p, where, "amp", amp, sizeof amp);
    if (strcmp(amp, "none") != 0 && strcmp(amp, "bf16") != 0 && strcmp(amp, "fp16") != 0)
        vb_die_input("%s: %s.amp: '%s' (expected none, bf16 or fp16)", y->file, where, amp);
    out->act_bytes = strcmp(amp, "none") == 0 ? 4 : 2;
    if (!vb_my_str_or(y, &p, where, "precision", prec, sizeof prec)) snprintf(prec, sizeof prec, "%s", strcmp(amp, "none") == 0 ? "fp32" : amp);
    out->prec = vb_prec_of(prec);
    if (out->prec < 0) vb_die_input("%s: %s.precision: '%s' (expected fp32, tf32, bf16 or fp16)", y->file, where, prec);
    src->nmachines = vb_my_machine_files(y, &p, where, dir, src->machines);
    if (src->nmachines) snprintf(src->machine, sizeof src->machine, "%s", src->machines[0]);
    char impl[64];
    if (vb_my_str_or(y, &p, where, "implementation", impl, sizeof impl)) {
        char iw[160];
        snprintf(iw, sizeof iw, "%s: %s.implementation", y->file, where);
        out->impl = vb_impl_find_or_die(impl, iw);
    }

    const int B = vb_my_int(y, &p, where, "local_batch", 1, 1 << 24);
    /* measurements: throughputs (samples/s of the local batch times dp) or step times */
    yaml_node_t *sps = vb_my_get(&p, "samples_per_s", NULL), *sts = vb_my_get(&p, "step_s", NULL);
    if (!sps == !sts) vb_die_input("%s: %s: give either samples_per_s or step_s (a list of measurements)", y->file, where);
    src->layout = (vb_mlayout){.tp = 1, .cp = 1, .dp = 1};
    yaml_node_t *ln = vb_my_get(&p, "layout", NULL);
    if (ln) {
        char lw[160];
        snprintf(lw, sizeof lw, "%s.layout", where);
        layout_from_yaml(y, ln, lw, &src->layout);
    }
    int n = 0;
    snprintf(w, sizeof w, "%s.%s", where, sps ? "samples_per_s" : "step_s");
    yaml_node_t **it = vb_my_list(y, sps ? sps : sts, w, &n);
    if (n < 1) vb_die_input("%s: %s: an empty list", y->file, w);
    double *steps = vb_malloc_check(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) {
        const double v = vb_my_node_num(y, it[i], w, 1e-12, 1e12);
        steps[i] = sps ? (double)B * src->layout.dp / v : v;
    }
    free(it);
    out->spread = vb_rel_spread(steps, n);
    const double step = n % 2 ? steps[n / 2] : 0.5 * (steps[n / 2 - 1] + steps[n / 2]);
    free(steps);
    src->step_s = step;
    out->nref = 1;
    out->batch[0] = B;
    out->step_s[0] = step;
    out->threads = out->node_ranks = out->cores = 1;
    out->shard_tp = out->shard_cp = 1;

    /* the ops: given shares, else FLOP shares */
    yaml_node_t *sh = vb_my_get(&p, "op_shares", NULL);
    const double F = total_flops(&out->d);
    out->flop_shares = !sh;
    if (!sh) {
        for (int i = 0; i < NOPS; i++) {
            const double f = op_flops(&k_ops[i], &out->d);
            if (f > 0) add_op(out, k_ops[i].name, step * f / F, k_ops[i].calls_per_block * out->d.depth + k_ops[i].calls_once);
        }
    } else {
        vb_yaml_pairs sp;
        vb_my_pairs(y, sh, "op_shares", &sp);
        double sum = 0;
        for (int i = 0; i < sp.n; i++) {
            const op_def *o = op_of(sp.pairs[i].key);
            if (!o)
                vb_die_input("%s: %s.op_shares.%s (line %d): not an op of the ViT (names as in ops.csv)", y->file, where,
                             sp.pairs[i].key, sp.pairs[i].line);
            char kw[200];
            snprintf(kw, sizeof kw, "%s.op_shares.%s", where, sp.pairs[i].key);
            const double s = vb_my_node_num(y, sp.pairs[i].value, kw, 0, 1);
            sum += s;
            add_op(out, o->name, step * s, o->calls_per_block * out->d.depth + o->calls_once);
        }
        if (sum > 1 + 1e-9) vb_die_input("%s: %s.op_shares: the shares add up to %g, more than the whole step", y->file, where, sum);
        if (sum < 1) add_op(out, "unattributed", step * (1 - sum), 1);
        vb_yaml_pairs_free(&sp);
    }
    vb_yaml_pairs_free(&p);
}

void vb_mref_load_file(const char *path, vb_mref *out, vb_mref_src *src) {
    yaml_document_t doc;
    char label[1100];
    snprintf(label, sizeof label, "--reference %s", path);
    if (!vb_yaml_load(&doc, path, label)) vb_die_input("%s: empty file (expected a reference)", path);
    vb_my y = {.file = path, .doc = &doc};
    char dir[VB_PATH_MAX];
    vb_snprintf(dir, sizeof dir, "%s", path);
    vb_mref_from_yaml(&y, yaml_document_get_root_node(&doc), NULL, "reference", dirname(dir), out, src);
    yaml_document_delete(&doc);
}

void vb_mref_price(vb_mref *ref, const vb_machine *m) {
    if (!ref->flop_shares || !vb_machine_can_price(m) || ref->nref != 1) return;
    const vb_impl *im = ref->impl ? ref->impl : vb_impl_default();
    vb_price_in in = {.d = &ref->d, .impl = im, .m = m, .prec = ref->prec, .act_bytes = ref->act_bytes, .tp = 1,
                      .cp = 1, .batch = ref->batch[0]};
    vb_priced_op po[VB_PRICE_MAX_OPS];
    const int n = vb_price_ops(&in, po);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += po[i].step_s;
    const double c = ref->step_s[0] / sum;
    free(ref->ops);
    ref->ops = vb_calloc_check((size_t)VB_PRICE_MAX_OPS, sizeof *ref->ops);
    ref->nops = n;
    for (int i = 0; i < n; i++) {
        vb_snprintf(ref->ops[i].name, sizeof ref->ops[i].name, "%s", po[i].name);
        ref->ops[i].step_s[0] = po[i].step_s * c;
        ref->ops[i].calls = po[i].calls;
    }
    ref->flop_shares = false;
    ref->price_machine = m;
    ref->price_factor = c;
    ref->price_dims = ref->d;
}

void vb_mref_rescale(const vb_mref *ref, const vb_mdims *to, vb_mref *out) {
    *out = *ref;
    out->d = *to;
    out->ops = vb_calloc_check((size_t)ref->nops + 1, sizeof *out->ops);
    if (ref->price_factor > 0) { /* priced: every prediction prices the new dims itself */
        memcpy(out->ops, ref->ops, sizeof *out->ops * (size_t)ref->nops);
        return;
    }
    const double fr = total_flops(to) / total_flops(&ref->d);
    double sum = 0;
    for (int i = 0; i < ref->nops; i++) {
        const vb_mop *o = &ref->ops[i];
        const op_def *od = op_of(o->name);
        double r = fr;
        if (od) {
            const double a = op_size(od, &ref->d), b = op_size(od, to);
            if (a > 0) r = b / a;
            out->ops[i].calls = od->calls_per_block * to->depth + od->calls_once;
        } else {
            out->ops[i].calls = o->calls;
        }
        snprintf(out->ops[i].name, sizeof out->ops[i].name, "%s", o->name);
        for (int k = 0; k < ref->nref; k++) out->ops[i].step_s[k] = o->step_s[k] * r;
        sum += o->step_s[0];
    }
    /* time outside any op: grows with the whole step's FLOPs */
    for (int k = 0; k < ref->nref; k++) {
        double in_ops = 0, in_new = 0;
        for (int i = 0; i < ref->nops; i++) in_ops += ref->ops[i].step_s[k], in_new += out->ops[i].step_s[k];
        out->step_s[k] = in_new + fmax(0.0, ref->step_s[k] - in_ops) * fr;
    }
    (void)sum;
}

void vb_mref_scale(vb_mref *ref, double c) {
    ref->price_factor *= c;
    for (int k = 0; k < ref->nref; k++) ref->step_s[k] *= c;
    for (int i = 0; i < ref->nops; i++)
        for (int k = 0; k < ref->nref; k++) ref->ops[i].step_s[k] *= c;
}

double vb_mref_calibrate(vb_mctx *m, vb_mref *ref, const vb_mlayout *l, double step_s) {
    /* step(c) is increasing in c (compute grows, exposed communication cannot
     * shrink by more): bisection on log c */
    vb_mknobs kn;
    vb_mknobs_nominal(&kn);
    vb_mpred q;
    const vb_mref *saved = m->ref;
    m->ref = ref;
    double lo = 1e-6, hi = 1e3;
    kn.compute_mul = lo;
    vb_model_predict(m, l, &kn, &q);
    if (q.step_s > step_s)
        vb_die_input("model: reference '%s': its layout tp %d x cp %d x dp %d needs %.4g s of communication alone, "
                     "more than its measured %.4g s step: its compute cannot be solved for",
                     ref->what, l->tp, l->cp, l->dp, q.step_s, step_s);
    kn.compute_mul = hi;
    vb_model_predict(m, l, &kn, &q);
    if (q.step_s < step_s) vb_die_input("model: reference '%s': no compute factor up to 1e3 reaches its step", ref->what);
    for (int it = 0; it < 200 && hi / lo > 1 + 1e-12; it++) {
        const double mid = sqrt(lo * hi);
        kn.compute_mul = mid;
        vb_model_predict(m, l, &kn, &q);
        if (q.step_s < step_s)
            lo = mid;
        else
            hi = mid;
    }
    m->ref = saved;
    const double c = sqrt(lo * hi);
    vb_mref_scale(ref, c);
    return c;
}
