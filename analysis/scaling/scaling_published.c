/* scaling_published.c: `vitbench model --published FILE` (scaling_model.h): the
 * tutorials' published scaling results that the model can represent,
 * predicted beside published, one row each with its error.
 *
 * The file (scenarios/published/tutorials.yaml):
 *   models:     named model dims (scaling_ref.h's keys)
 *   references: named compute references (scaling_ref.h): published one-GPU
 *               figures, or published runs of several GPUs whose one-rank
 *               compute is solved for on the machine they ran on
 *   rows:       id, what (where the number is published), reference,
 *               machine (a machine file relative to this file, or a list of
 *               the files it may have been: each is predicted), model
 *               (default the reference's), implementation (default the
 *               reference's: the code the run used, scaling_price.h),
 *               measurement (default the id: rows predicting one published
 *               run name it alike), layout {tp, cp, dp, order}, local_batch,
 *               bucket_cap_mb (25), samples_per_s [published]
 *   cannot_represent: what, why -- results the model has no way to predict
 *
 * Nothing here is fitted to the rows: each prediction uses its reference,
 * its machine file, its implementation and the model's forms only; a row far
 * off stays far off, and docs/model.md says why.
 *
 * Per row: the reference is priced on its machine (vb_mref_price) and, when
 * measured on several ranks, solved for there (vb_mref_calibrate); the row's
 * layout, model size and machine are then priced op by op. A reference of
 * FLOP shares (a machine that cannot price) is rescaled by FLOPs and carried
 * across machines by the peaks, as before pricing existed. The interval and
 * the sensitivity are scaling_model.c's (every input at either end of its
 * uncertainty, the compute's included; each level's beta x0.75 / x1.25).
 * error = (predicted - published) / published samples/s.
 *
 * The summary comes first: per class (same model: the reference measured
 * the row's model; rescaled: it measured another size) and per choice of
 * the machines a row leaves open, the mean and largest |error| over the
 * distinct measurements (one row per `measurement`).
 */
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/csv.h"
#include "analysis/scaling/machine.h"
#include "analysis/markdown.h"
#include "analysis/scaling/scaling_model.h"
#include "analysis/scaling/scaling_price.h"
#include "analysis/scaling/scaling_ref.h"
#include "analysis/scaling/scaling_yaml.h"
#include "core/config/config.h"
#include "core/util/common.h"
#include "core/results/results.h"
#include "core/util/fileio.h"
#include "core/util/outdir.h"

#define MAX_ALTS VB_MREF_MAX_MACHINES

typedef struct {
    char id[64], what[320], ref_name[64], measurement[64], impl[40];
    char machine_path[VB_PATH_MAX], machine_name[64];
    int alt, nalt;          /* which of the row's machines, of how many */
    bool rescaled;          /* the reference measured another model size */
    vb_mlayout l;
    double pub, pub_spread; /* published samples/s: median, relative spread */
    double pred, lo, hi;    /* predicted samples/s and its interval */
    double err;
    char compute[200];      /* the reference and how it became this row's compute */
    char sens[160];         /* the level whose beta moves the answer most */
    vb_priced_op ops[VB_PRICE_MAX_OPS]; /* the compute op by op (a priced reference), scaled to its step */
    int nops;
} pub_row;

typedef struct {
    char what[320], why[1024];
} pub_not;

static int cmp_dbl(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static yaml_node_t *find_ref(const vb_my *y, yaml_node_t *refs, const char *name) {
    vb_yaml_pairs p;
    vb_my_pairs(y, refs, "references", &p);
    yaml_node_t *n = vb_my_get(&p, name, NULL);
    vb_yaml_pairs_free(&p);
    return n;
}

/* What a row says, before any machine is chosen. */
typedef struct {
    char id[64], what[320], ref_name[64], measurement[64], impl[40];
    char machines[VB_MREF_MAX_MACHINES][VB_MREF_PATH];
    int nmachines;
    bool has_dims;
    vb_mdims dims;
    vb_mlayout l;
    double pub, pub_spread;
} row_spec;

static void parse_row(const vb_my *y, yaml_node_t *row, int i, yaml_node_t *models, const char *dir, row_spec *rs) {
    char where[64];
    snprintf(where, sizeof where, "rows[%d]", i);
    vb_yaml_pairs p;
    vb_my_pairs(y, row, where, &p);
    static const char *const known[] = {"id",          "what",          "reference",     "machine",
                                        "model",       "layout",        "local_batch",   "bucket_cap_mb",
                                        "samples_per_s", "measurement", "implementation", NULL};
    vb_my_only_keys(y, &p, where, known);
    memset(rs, 0, sizeof *rs);
    vb_my_str(y, &p, where, "id", rs->id, sizeof rs->id);
    snprintf(where, sizeof where, "rows[%d] (%s)", i, rs->id);
    vb_my_str(y, &p, where, "what", rs->what, sizeof rs->what);
    vb_my_str(y, &p, where, "reference", rs->ref_name, sizeof rs->ref_name);
    if (!vb_my_str_or(y, &p, where, "measurement", rs->measurement, sizeof rs->measurement))
        snprintf(rs->measurement, sizeof rs->measurement, "%s", rs->id);
    if (vb_my_str_or(y, &p, where, "implementation", rs->impl, sizeof rs->impl)) {
        char iw[160];
        snprintf(iw, sizeof iw, "%s: %s.implementation", y->file, where);
        vb_impl_find_or_die(rs->impl, iw);
    }
    rs->nmachines = vb_my_machine_files(y, &p, where, dir, rs->machines);
    if (!rs->nmachines) vb_die_input("%s: %s: missing required key 'machine'", y->file, where);
    int line = 0;
    yaml_node_t *dn = vb_my_get(&p, "model", &line);
    if (dn) {
        char mw[96];
        snprintf(mw, sizeof mw, "%s.model", where);
        if (vb_yaml_scalar(dn)) {
            vb_yaml_pairs mp;
            if (!models) vb_die_input("%s: %s (line %d): no models mapping to name one from", y->file, mw, line);
            vb_my_pairs(y, models, "models", &mp);
            yaml_node_t *named = vb_my_get(&mp, vb_yaml_scalar(dn), NULL);
            if (!named)
                vb_die_input("%s: %s (line %d): no model named '%s' under models", y->file, mw, line,
                             vb_yaml_scalar(dn));
            snprintf(mw, sizeof mw, "models.%s", vb_yaml_scalar(dn));
            vb_mdims_from_yaml(y, named, mw, &rs->dims);
            vb_yaml_pairs_free(&mp);
        } else {
            vb_mdims_from_yaml(y, dn, mw, &rs->dims);
        }
        rs->has_dims = true;
    }
    /* the row's layout: one rank per GPU, as the launcher places them */
    vb_mlayout *l = &rs->l;
    *l = (vb_mlayout){.tp = 1, .cp = 1, .dp = 1};
    yaml_node_t *ln = vb_my_get(&p, "layout", &line);
    if (!ln) vb_die_input("%s: %s: missing required key 'layout'", y->file, where);
    {
        vb_yaml_pairs lp;
        char lw[96];
        snprintf(lw, sizeof lw, "%s.layout", where);
        vb_my_pairs(y, ln, lw, &lp);
        static const char *const lk[] = {"tp", "cp", "dp", "order", NULL};
        vb_my_only_keys(y, &lp, lw, lk);
        l->tp = vb_my_int_or(y, &lp, lw, "tp", 1, 1 << 20, 1);
        l->cp = vb_my_int_or(y, &lp, lw, "cp", 1, 1 << 20, 1);
        l->dp = vb_my_int_or(y, &lp, lw, "dp", 1, 1 << 20, 1);
        vb_my_str_or(y, &lp, lw, "order", l->order, sizeof l->order);
        vb_yaml_pairs_free(&lp);
    }
    l->local_batch = vb_my_int(y, &p, where, "local_batch", 1, 1 << 24);
    l->bucket_cap_mb = vb_my_num_or(y, &p, where, "bucket_cap_mb", 1e-6, 1e6, VB_BUCKET_CAP_MB_DEFAULT);
    /* published: the median of the listed throughputs and their spread */
    yaml_node_t *sn = vb_my_get(&p, "samples_per_s", &line);
    if (!sn) vb_die_input("%s: %s: missing required key 'samples_per_s' (the published throughputs)", y->file, where);
    char sw[96];
    snprintf(sw, sizeof sw, "%s.samples_per_s", where);
    int n = 0;
    yaml_node_t **it = vb_my_list(y, sn, sw, &n);
    if (n < 1) vb_die_input("%s: %s (line %d): an empty list", y->file, sw, line);
    double *v = vb_malloc_check(sizeof(double) * (size_t)n);
    for (int k = 0; k < n; k++) v[k] = vb_my_node_num(y, it[k], sw, 1e-12, 1e12);
    free(it);
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    rs->pub = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    rs->pub_spread = vb_rel_spread(v, n);
    free(v);
    vb_yaml_pairs_free(&p);
}

/* One row on its machine number k: its reference made into this row's compute, then the model. */
static void predict_row(const vb_my *y, const row_spec *rs, int i, int k, yaml_node_t *models, yaml_node_t *refs,
                        const char *dir, pub_row *r) {
    char where[96];
    snprintf(where, sizeof where, "rows[%d] (%s)", i, rs->id);
    memset(r, 0, sizeof *r);
    snprintf(r->id, sizeof r->id, "%s", rs->id);
    snprintf(r->what, sizeof r->what, "%s", rs->what);
    snprintf(r->ref_name, sizeof r->ref_name, "%s", rs->ref_name);
    snprintf(r->measurement, sizeof r->measurement, "%s", rs->measurement);
    snprintf(r->machine_path, sizeof r->machine_path, "%s", rs->machines[k]);
    r->alt = k, r->nalt = rs->nmachines, r->pub = rs->pub, r->pub_spread = rs->pub_spread;

    /* the reference, at its own dims, on the machine it ran on: the row's
     * machine when the reference lists it too (one unstated pair of cards) */
    yaml_node_t *rn = find_ref(y, refs, rs->ref_name);
    if (!rn) vb_die_input("%s: %s.reference: no reference named '%s' under references", y->file, where, rs->ref_name);
    char rw[96];
    snprintf(rw, sizeof rw, "references.%s", rs->ref_name);
    vb_mref ref;
    vb_mref_src src;
    vb_mref_from_yaml(y, rn, models, rw, dir, &ref, &src);
    if (!src.nmachines) vb_die_input("%s: %s: missing required key 'machine' (where it was measured)", y->file, rw);
    int rk = 0;
    if (src.nmachines > 1) {
        rk = -1;
        for (int j = 0; j < src.nmachines; j++)
            if (strcmp(src.machines[j], rs->machines[k]) == 0) rk = j;
        if (rk < 0)
            vb_die_input("%s: %s.machine: %s is not one of the machines reference '%s' may have run on", y->file,
                         where, rs->machines[k], rs->ref_name);
    }
    vb_machine rmach, mach;
    vb_machine_load(src.machines[rk], &rmach);
    vb_machine_load(rs->machines[k], &mach);
    snprintf(r->machine_name, sizeof r->machine_name, "%s", mach.name);
    vb_mref_price(&ref, &rmach);
    const bool priced = ref.price_factor > 0;
    /* how the machine file prices the reference's own step: measured / priced */
    const double own_price = ref.price_factor;
    vb_ab_table none = {0};
    const int rworld = src.layout.tp * src.layout.cp * src.layout.dp;
    double calib = 1;
    if (rworld > 1) {
        vb_mctx rc = {.ref = &ref, .fits = &none, .machine = &rmach, .mode = VB_DDP_OVERLAP, .compute_scale = 1};
        vb_mlayout rl = src.layout;
        rl.local_batch = ref.batch[0], rl.threads = rl.cores = 1, rl.bucket_cap_mb = VB_BUCKET_CAP_MB_DEFAULT;
        rl.node_ranks = rmach.ranks_per_node < rworld ? rmach.ranks_per_node : rworld;
        rl.cores = rl.node_ranks;
        calib = vb_mref_calibrate(&rc, &ref, &rl, src.step_s);
    }

    /* this row's model: another size is rescaled (priced refs price it) */
    const vb_mdims dims = rs->has_dims ? rs->dims : ref.d;
    vb_mref used = ref;
    r->rescaled = !vb_mdims_equal(&dims, &ref.d);
    if (r->rescaled) vb_mref_rescale(&ref, &dims, &used);

    /* machines: a priced reference is priced on this row's; a FLOP-share one
     * is carried over by the two machines' peaks in its precision */
    double cscale = 1;
    if (!priced && strcmp(src.machines[rk], rs->machines[k]) != 0) {
        const double a = vb_machine_rank_peak(&rmach, ref.prec, 1), b = vb_machine_rank_peak(&mach, ref.prec, 1);
        if (!(a > 0) || !(b > 0))
            vb_die_input("%s: %s: no peak_tflops.%s to carry the reference's compute over", y->file, where,
                         vb_prec_name[ref.prec]);
        cscale = a / b;
    }
    const vb_impl *im = rs->impl[0] ? vb_impl_find(rs->impl) : NULL;
    snprintf(r->impl, sizeof r->impl, "%s", im ? im->name : ref.impl ? ref.impl->name : vb_impl_default()->name);

    vb_mlayout *l = &r->l;
    *l = rs->l;
    const int world = l->tp * l->cp * l->dp;
    l->node_ranks = mach.ranks_per_node < world ? mach.ranks_per_node : world;
    l->threads = 1, l->cores = l->node_ranks; /* one rank per GPU: no CPU factor */
    char err[256];
    if (vb_model_check_layout(&dims, l, err, sizeof err) != 0) vb_die_input("%s: %s: %s", y->file, where, err);

    vb_mctx m = {.ref = &used, .fits = &none, .machine = &mach, .mode = VB_DDP_OVERLAP, .compute_scale = cscale,
                 .impl = im};
    vb_mknobs kn;
    vb_mknobs_nominal(&kn);
    vb_mpred q, qlo, qhi;
    vb_model_predict(&m, l, &kn, &q);
    kn.corner = -1;
    vb_model_predict(&m, l, &kn, &qlo);
    kn.corner = 1;
    vb_model_predict(&m, l, &kn, &qhi);
    kn.corner = 0;
    r->pred = q.samples_per_s, r->hi = qlo.samples_per_s, r->lo = qhi.samples_per_s;
    if (used.price_factor > 0) { /* the ops vb_model_predict priced for this layout */
        const vb_impl *pim = im ? im : used.impl ? used.impl : vb_impl_default();
        const vb_price_in pin = {.d = &used.d, .impl = pim, .m = &mach, .prec = used.prec, .act_bytes = used.act_bytes,
                                 .tp = l->tp, .cp = l->cp, .batch = l->local_batch};
        r->nops = vb_price_ops(&pin, r->ops);
        for (int i = 0; i < r->nops; i++) r->ops[i].step_s *= used.price_factor;
    }
    r->err = (r->pred - r->pub) / r->pub;
    /* the level whose beta moves the answer most, at -25% */
    double big = 0;
    int bl = -1;
    for (int lv = 0; lv < mach.nlevels; lv++) {
        kn.beta_mul[lv] = 0.75;
        vb_mpred s;
        vb_model_predict(&m, l, &kn, &s);
        kn.beta_mul[lv] = 1;
        const double d = (s.step_s - q.step_s) / q.step_s;
        if (d > big) big = d, bl = lv;
    }
    if (bl >= 0)
        snprintf(r->sens, sizeof r->sens, "%s -25%%: step +%.2f%%", mach.level[bl].name, 100 * big);
    else
        snprintf(r->sens, sizeof r->sens, "no communication");
    int len = snprintf(r->compute, sizeof r->compute, "%s", rs->ref_name);
    if (priced && len < (int)sizeof r->compute)
        len += snprintf(r->compute + len, sizeof r->compute - (size_t)len, ", priced on %s (ran x%.3g its price)",
                        rmach.name, own_price);
    if (rworld > 1 && len < (int)sizeof r->compute)
        len += snprintf(r->compute + len, sizeof r->compute - (size_t)len, ", compute solved on its %d ranks (x%.4g)",
                        rworld, calib);
    if (r->rescaled && len < (int)sizeof r->compute)
        len += snprintf(r->compute + len, sizeof r->compute - (size_t)len, ", %s to D=%d",
                        priced ? "repriced" : "FLOP-rescaled", dims.dim);
    if (cscale != 1 && len < (int)sizeof r->compute)
        snprintf(r->compute + len, sizeof r->compute - (size_t)len, ", x%.3g peak %s", cscale, vb_prec_name[ref.prec]);
    if (r->rescaled) free(used.ops);
    free(ref.ops);
}

/* ---- the summary: per class and choice of open machines, over distinct measurements ---- */

enum { CLASS_SAME, CLASS_RESCALED, CLASS_ALL, NCLASS };
static const char *const k_class[NCLASS] = {"same model", "rescaled from another size", "all"};

typedef struct {
    int n;
    double mean, max;
    char worst[64];
} pub_stat;

/* Rows of hypothesis h (each open row at its machine min(h, nalt - 1)) in
 * class c, one per measurement (the first row naming it; CLASS_ALL prefers a
 * same-model row). */
static pub_stat stat_of(const pub_row *r, int n, int h, int c) {
    pub_stat st = {0};
    const char **chosen = vb_calloc_check((size_t)n + 1, sizeof *chosen);
    for (int pass = 0; pass < 2; pass++) /* same-model rows first, then rescaled ones */
        for (int i = 0; i < n; i++) {
            const pub_row *a = &r[i];
            if (a->alt != (h < a->nalt ? h : a->nalt - 1) || a->rescaled != (pass == 1)) continue;
            if ((c == CLASS_SAME && a->rescaled) || (c == CLASS_RESCALED && !a->rescaled)) continue;
            bool seen = false;
            for (int k = 0; k < st.n && !seen; k++) seen = strcmp(chosen[k], a->measurement) == 0;
            if (seen) continue;
            chosen[st.n++] = a->measurement;
            const double e = fabs(a->err);
            st.mean += e;
            if (e >= st.max) st.max = e, snprintf(st.worst, sizeof st.worst, "%s", a->id);
        }
    free(chosen);
    if (st.n) st.mean /= st.n;
    return st;
}

/* The hypotheses: how many choices the most open row leaves, and their names. */
static int nhyp(const pub_row *r, int n) {
    int h = 1;
    for (int i = 0; i < n; i++)
        if (r[i].nalt > h) h = r[i].nalt;
    return h;
}

static void hyp_label(const pub_row *r, int n, int h, char *buf, size_t len) {
    buf[0] = '\0';
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].nalt < 2 || r[i].alt != (h < r[i].nalt ? h : r[i].nalt - 1)) continue;
        if (strstr(buf, r[i].machine_name)) continue;
        at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%s", at ? ", " : "", r[i].machine_name);
    }
}

/* The test of hypothesis h: the rows it leaves open (one per measurement)
 * whose published value lies outside the interval predicted on h's machine.
 * One such row contradicts the choice as far as the model's inputs are
 * stated; none leaves it standing, which is weaker than confirming it. */
static void write_test(FILE *f, const pub_row *r, int n, int h, bool md) {
    int nopen = 0, nout = 0;
    const char **chosen = vb_calloc_check((size_t)n + 1, sizeof *chosen);
    char outs[1024] = "";
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        const pub_row *a = &r[i];
        if (a->nalt < 2 || a->alt != (h < a->nalt ? h : a->nalt - 1)) continue;
        bool seen = false;
        for (int k = 0; k < nopen && !seen; k++) seen = strcmp(chosen[k], a->measurement) == 0;
        if (seen) continue;
        chosen[nopen++] = a->measurement;
        if (a->pub >= a->lo && a->pub <= a->hi) continue;
        nout++;
        if (at < sizeof outs)
            at += (size_t)snprintf(outs + at, sizeof outs - at, "%s%s %.4g vs [%.4g, %.4g]", nout > 1 ? "; " : "",
                                   a->id, a->pub, a->lo, a->hi);
    }
    free(chosen);
    if (!nopen) return;
    fprintf(f, "%stest of this choice: %d of %d measurements on the open machines published outside their interval%s%s%s: "
               "%s\n",
            md ? "- " : "  ", nout, nopen, nout ? " (" : "", outs, nout ? ")" : "",
            nout ? "contradicted" : "not contradicted");
}

/* The summary lines (printed first, and at the top of published.md). */
static void write_summary(FILE *f, const pub_row *r, int n, bool md) {
    const int H = nhyp(r, n);
    for (int h = 0; h < H; h++) {
        char lab[256];
        hyp_label(r, n, h, lab, sizeof lab);
        if (H > 1 && md) fprintf(f, "%sIf the open machines are %s:\n\n", h ? "\n" : "", lab);
        if (H > 1 && !md) fprintf(f, "if the open machines are %s:\n", lab);
        for (int c = 0; c < NCLASS; c++) {
            const pub_stat st = stat_of(r, n, h, c);
            if (!st.n) continue;
            const bool within = st.mean <= 0.10 && st.max <= 0.20;
            fprintf(f, "%s%s: %d distinct measurement%s, mean |error| %.1f%%, max %.1f%% (%s); %s the bounds "
                       "(mean <= 10%%, max <= 20%%)\n",
                    md ? "- " : "  ", k_class[c], st.n, st.n == 1 ? "" : "s", 100 * st.mean, 100 * st.max, st.worst,
                    within ? "within" : "outside");
        }
        if (H > 1) write_test(f, r, n, h, md);
    }
}

typedef struct {
    const pub_row *rows;
    int nrows;
    const pub_not *nots;
    int nnots;
    const char *file;
} pub_out;

static void layout_text(const vb_mlayout *l, char *buf, size_t n) {
    snprintf(buf, n, "tp%d cp%d dp%d%s%s", l->tp, l->cp, l->dp, l->order[0] ? " " : "", l->order);
}

static void write_csv(FILE *f, void *vo) {
    const pub_out *o = vo;
    fputs(VB_PUBLISHED_CSV_HEADER "\n", f);
    for (int i = 0; i < o->nrows; i++) {
        const pub_row *r = &o->rows[i];
        vb_csv_field(f, r->id);
        fputc(',', f);
        vb_csv_field(f, r->measurement);
        fprintf(f, ",%s,", r->rescaled ? "rescaled" : "same_model");
        vb_csv_field(f, r->machine_name);
        fprintf(f, ",%d,%d,%d,", r->l.tp, r->l.cp, r->l.dp);
        vb_csv_field(f, r->l.order);
        fprintf(f, ",%d,", r->l.local_batch);
        vb_csv_field(f, r->impl);
        fputc(',', f);
        vb_csv_field(f, r->compute);
        fprintf(f, ",%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%s,", r->pub, r->pub_spread, r->pred, r->lo, r->hi, r->err,
                r->pub >= r->lo && r->pub <= r->hi ? "true" : "false");
        vb_csv_field(f, r->sens);
        fputc('\n', f);
    }
}

static void write_ops_csv(FILE *f, void *vo) {
    const pub_out *o = vo;
    fputs(VB_PUBLISHED_OPS_CSV_HEADER "\n", f);
    for (int i = 0; i < o->nrows; i++) {
        const pub_row *r = &o->rows[i];
        double sum = 0;
        for (int k = 0; k < r->nops; k++) sum += r->ops[k].step_s;
        for (int k = 0; k < r->nops; k++) {
            vb_csv_field(f, r->id);
            fputc(',', f);
            vb_csv_field(f, r->machine_name);
            fputc(',', f);
            vb_csv_field(f, r->ops[k].name);
            fprintf(f, ",%.6g,%.6g,%.6g,%.6g\n", r->ops[k].calls, r->ops[k].flops, r->ops[k].step_s,
                    sum > 0 ? r->ops[k].step_s / sum : 0.0);
        }
    }
}

static void md_rows(FILE *f, const pub_out *o, bool rescaled) {
    fputs("| id | machine | layout | local batch | code | compute reference | published samples/s | predicted samples/s "
          "[interval] | error | most sensitive to |\n|---|---|---|---|---|---|---|---|---|---|\n",
          f);
    char lay[64];
    for (int i = 0; i < o->nrows; i++) {
        const pub_row *r = &o->rows[i];
        if (r->rescaled != rescaled) continue;
        layout_text(&r->l, lay, sizeof lay);
        fputs("| ", f);
        vb_md_cell(f, r->id);
        fputs(" | ", f);
        vb_md_cell(f, r->machine_name);
        fputs(" | ", f);
        vb_md_cell(f, lay);
        fprintf(f, " | %d | ", r->l.local_batch);
        vb_md_cell(f, r->impl);
        fputs(" | ", f);
        vb_md_cell(f, r->compute);
        fprintf(f, " | %.4g | %.4g [%.4g, %.4g] | %+.1f%% | ", r->pub, r->pred, r->lo, r->hi, 100 * r->err);
        vb_md_cell(f, r->sens);
        fputs(" |\n", f);
    }
}

/* The Markdown docs/model.md carries (the test holds the two equal): the
 * summary, then same-model rows, then rescaled ones, then what cannot be
 * represented. */
static void write_md(FILE *f, void *vo) {
    const pub_out *o = vo;
    fputs("Summary, per distinct published measurement:\n\n", f);
    write_summary(f, o->rows, o->nrows, true);
    bool any_resc = false;
    for (int i = 0; i < o->nrows; i++) any_resc |= o->rows[i].rescaled;
    fputs("\nSame model (the reference measured the row's model):\n\n", f);
    md_rows(f, o, false);
    if (any_resc) {
        fputs("\nRescaled (the reference measured another model size):\n\n", f);
        md_rows(f, o, true);
    }
    if (o->nnots) {
        fputs("\nNot representable:\n\n", f);
        for (int i = 0; i < o->nnots; i++) {
            fputs("- ", f);
            vb_md_prose(f, o->nots[i].what);
            fputs(": ", f);
            vb_md_prose(f, o->nots[i].why);
            fputc('\n', f);
        }
    }
}

int vb_model_published(const char *file, const char *out_dir) {
    yaml_document_t doc;
    char label[VB_PATH_MAX + 32];
    snprintf(label, sizeof label, "--published %s", file);
    if (!vb_yaml_load(&doc, file, label)) vb_die_input("%s: empty file (expected models, references, rows)", file);
    vb_my y = {.file = file, .doc = &doc};
    char dbuf[VB_PATH_MAX];
    vb_snprintf(dbuf, sizeof dbuf, "%s", file);
    const char *dir = dirname(dbuf);
    vb_yaml_pairs top;
    vb_my_pairs(&y, yaml_document_get_root_node(&doc), "published", &top);
    static const char *const known[] = {"models", "references", "rows", "cannot_represent", NULL};
    vb_my_only_keys(&y, &top, "published", known);
    yaml_node_t *models = vb_my_get(&top, "models", NULL), *refs = vb_my_get(&top, "references", NULL);
    yaml_node_t *rows = vb_my_get(&top, "rows", NULL), *nots = vb_my_get(&top, "cannot_represent", NULL);
    if (!refs || !rows) vb_die_input("%s: missing required key '%s'", file, refs ? "rows" : "references");
    int nrow = 0, nn = 0, nr = 0;
    yaml_node_t **ri = vb_my_list(&y, rows, "rows", &nrow);
    if (nrow < 1) vb_die_input("%s: rows: an empty list", file);
    row_spec *rs = vb_calloc_check((size_t)nrow, sizeof *rs);
    pub_row *pr = vb_calloc_check((size_t)nrow * MAX_ALTS, sizeof *pr);
    for (int i = 0; i < nrow; i++) {
        parse_row(&y, ri[i], i, models, dir, &rs[i]);
        for (int k = 0; k < i; k++)
            if (strcmp(rs[k].id, rs[i].id) == 0) vb_die_input("%s: rows[%d].id: '%s' names two rows", file, i, rs[i].id);
        for (int k = 0; k < rs[i].nmachines; k++) predict_row(&y, &rs[i], i, k, models, refs, dir, &pr[nr++]);
    }
    free(ri);
    free(rs);
    pub_not *pn = NULL;
    if (nots) {
        yaml_node_t **ni = vb_my_list(&y, nots, "cannot_represent", &nn);
        pn = vb_calloc_check((size_t)nn + 1, sizeof *pn);
        for (int i = 0; i < nn; i++) {
            char w[64];
            snprintf(w, sizeof w, "cannot_represent[%d]", i);
            vb_yaml_pairs p;
            vb_my_pairs(&y, ni[i], w, &p);
            static const char *const nk[] = {"what", "why", NULL};
            vb_my_only_keys(&y, &p, w, nk);
            vb_my_str(&y, &p, w, "what", pn[i].what, sizeof pn[i].what);
            vb_my_str(&y, &p, w, "why", pn[i].why, sizeof pn[i].why);
            vb_yaml_pairs_free(&p);
        }
        free(ni);
    }
    vb_yaml_pairs_free(&top);
    yaml_document_delete(&doc);

    char out[VB_PATH_MAX];
    if (out_dir) {
        vb_snprintf(out, sizeof out, "%s", out_dir);
    } else {
        if (vb_results_dir_claim_stamped(VB_RESULTS_DEFAULT_DIR, "published", out, sizeof out, NULL, 0) != 0)
            vb_die_env("model: cannot create a published_<stamp> directory in results/ (%s)", strerror(errno));
    }
    vb_outdir od; /* --output_dir is the tree: files by rename, no link followed */
    vb_outdir_open_or_die(&od, out, "", "model");
    pub_out o = {.rows = pr, .nrows = nr, .nots = pn, .nnots = nn, .file = file};
    vb_outdir_write_or_die(&od, VB_PUBLISHED_CSV, write_csv, &o, "model");
    vb_outdir_write_or_die(&od, VB_PUBLISHED_MD, write_md, &o, "model");
    vb_outdir_write_or_die(&od, VB_PUBLISHED_OPS_CSV, write_ops_csv, &o, "model");
    vb_outdir_close(&od);

    printf("Published scaling results beside the model (%s); error = (predicted - published) / published "
           "samples/s, nothing fitted to them:\n",
           file);
    write_summary(stdout, pr, nr, false);
    printf("\n%-26s %-19s %-22s %5s %-22s %10s %10s %21s %8s\n", "id", "machine", "layout", "batch", "code",
           "published", "predicted", "interval", "error");
    char lay[64], iv[48];
    for (int i = 0; i < nr; i++) {
        const pub_row *r = &pr[i];
        layout_text(&r->l, lay, sizeof lay);
        snprintf(iv, sizeof iv, "[%.4g, %.4g]", r->lo, r->hi);
        printf("%-26s %-19s %-22s %5d %-22s %10.4g %10.4g %21s %+7.1f%%%s\n", r->id, r->machine_name, lay,
               r->l.local_batch, r->impl, r->pub, r->pred, iv, 100 * r->err, r->rescaled ? "  (rescaled)" : "");
    }
    for (int i = 0; i < nn; i++) printf("not representable: %s: %s\n", pn[i].what, pn[i].why);
    printf("vitbench model: %d published rows (%d predictions); the compute reference of each in published.csv, its "
           "ops in published_ops.csv; wrote %s/published.csv, published.md, published_ops.csv\n",
           nrow, nr, out);
    free(pr);
    free(pn);
    return 0;
}
