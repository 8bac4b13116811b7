/* model_published.c: `vitbench model --published FILE` (model.h): the
 * tutorials' published scaling results that the model can represent,
 * predicted beside published, one row each with its error.
 *
 * The file (scenarios/published/tutorials.yaml):
 *   models:     named model dims (model_ref.h's keys)
 *   references: named compute references (model_ref.h): published one-GPU
 *               figures, or published runs of several GPUs whose one-rank
 *               compute is solved for on the machine they ran on
 *   rows:       id, what (where the number is published), reference,
 *               machine (a machine file, relative to this file), model
 *               (default the reference's), layout {tp, cp, dp, order},
 *               local_batch, bucket_cap_mb (25), samples_per_s [published]
 *   cannot_represent: what, why -- results the model has no way to predict
 *
 * Nothing here is fitted to the rows: each prediction uses its reference,
 * its machine file and the model's forms only; a row far off stays far off,
 * and docs/model.md says why.
 *
 * Per row: a reference of other model dims is rescaled by FLOPs
 * (vb_mref_rescale), a reference from another machine by the two machines'
 * peaks in its precision; the interval and the sensitivity are model.c's
 * (every input at either end of its uncertainty; each level's beta
 * x0.75 / x1.25). error = (predicted - published) / published samples/s.
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
#include "analysis/scaling/scaling_ref.h"
#include "analysis/scaling/scaling_yaml.h"
#include "core/config/config.h"
#include "core/util/common.h"
#include "core/results/results.h"
#include "core/util/fileio.h"
#include "core/util/outdir.h"

typedef struct {
    char id[64], what[320], ref_name[64], machine_path[VB_PATH_MAX], machine_name[64];
    vb_mlayout l;
    double pub, pub_spread; /* published samples/s: median, relative spread */
    double pred, lo, hi;    /* predicted samples/s and its interval */
    double err;
    char compute[200];      /* the reference and how it became this row's compute */
    char sens[160];         /* the level whose beta moves the answer most */
} pub_row;

typedef struct {
    char what[320], why[1024];
} pub_not;

static int cmp_dbl(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void resolve(const char *dir, const char *rel, char *out, size_t n) {
    if (rel[0] == '/')
        vb_snprintf(out, n, "%s", rel);
    else
        vb_snprintf(out, n, "%s/%s", dir, rel);
}

static yaml_node_t *find_ref(const vb_my *y, yaml_node_t *refs, const char *name) {
    vb_yaml_pairs p;
    vb_my_pairs(y, refs, "references", &p);
    yaml_node_t *n = vb_my_get(&p, name, NULL);
    vb_yaml_pairs_free(&p);
    return n;
}

static bool same_dims(const vb_mdims *a, const vb_mdims *b) {
    return a->dim == b->dim && a->depth == b->depth && a->heads == b->heads && a->patch == b->patch &&
           a->img_h == b->img_h && a->img_w == b->img_w && a->cin == b->cin && a->cout == b->cout;
}

/* One row: its reference made into this row's compute, then the model. */
static void predict_row(const vb_my *y, yaml_node_t *row, int i, yaml_node_t *models, yaml_node_t *refs,
                        const char *dir, pub_row *r) {
    char where[64];
    snprintf(where, sizeof where, "rows[%d]", i);
    vb_yaml_pairs p;
    vb_my_pairs(y, row, where, &p);
    static const char *const known[] = {"id",          "what",       "reference",     "machine", "model", "layout",
                                        "local_batch", "bucket_cap_mb", "samples_per_s", NULL};
    vb_my_only_keys(y, &p, where, known);
    memset(r, 0, sizeof *r);
    vb_my_str(y, &p, where, "id", r->id, sizeof r->id);
    snprintf(where, sizeof where, "rows[%d] (%s)", i, r->id);
    vb_my_str(y, &p, where, "what", r->what, sizeof r->what);
    vb_my_str(y, &p, where, "reference", r->ref_name, sizeof r->ref_name);
    char mrel[512];
    vb_my_str(y, &p, where, "machine", mrel, sizeof mrel);
    resolve(dir, mrel, r->machine_path, sizeof r->machine_path);

    /* the reference, at its own dims, solved for on its machine when it ran on several ranks */
    yaml_node_t *rn = find_ref(y, refs, r->ref_name);
    if (!rn) vb_die_input("%s: %s.reference: no reference named '%s' under references", y->file, where, r->ref_name);
    char rw[96];
    snprintf(rw, sizeof rw, "references.%s", r->ref_name);
    vb_mref ref;
    vb_mref_src src;
    vb_mref_from_yaml(y, rn, models, rw, dir, &ref, &src);
    if (!src.machine[0]) vb_die_input("%s: %s: missing required key 'machine' (where it was measured)", y->file, rw);
    vb_machine rmach, mach;
    vb_machine_load(src.machine, &rmach);
    vb_machine_load(r->machine_path, &mach);
    snprintf(r->machine_name, sizeof r->machine_name, "%s", mach.name);
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

    /* this row's model: rescaled by FLOPs when its dims differ */
    vb_mdims dims = ref.d;
    int line = 0;
    yaml_node_t *mn = vb_my_get(&p, "model", &line);
    if (mn) {
        char mw[96];
        snprintf(mw, sizeof mw, "%s.model", where);
        if (vb_yaml_scalar(mn)) {
            vb_yaml_pairs mp;
            if (!models) vb_die_input("%s: %s (line %d): no models mapping to name one from", y->file, mw, line);
            vb_my_pairs(y, models, "models", &mp);
            yaml_node_t *dn = vb_my_get(&mp, vb_yaml_scalar(mn), NULL);
            if (!dn) vb_die_input("%s: %s (line %d): no model named '%s' under models", y->file, mw, line, vb_yaml_scalar(mn));
            snprintf(mw, sizeof mw, "models.%s", vb_yaml_scalar(mn));
            vb_mdims_from_yaml(y, dn, mw, &dims);
            vb_yaml_pairs_free(&mp);
        } else {
            vb_mdims_from_yaml(y, mn, mw, &dims);
        }
    }
    vb_mref used = ref;
    const bool rescaled = !same_dims(&dims, &ref.d);
    if (rescaled) vb_mref_rescale(&ref, &dims, &used);

    /* machines: the reference's peak over this row's, in its precision */
    double cscale = 1;
    if (strcmp(src.machine, r->machine_path) != 0) {
        const double a = vb_machine_rank_peak(&rmach, ref.prec, 1), b = vb_machine_rank_peak(&mach, ref.prec, 1);
        if (!(a > 0) || !(b > 0))
            vb_die_input("%s: %s: no peak_tflops.%s to carry the reference's compute over", y->file, where,
                         vb_prec_name[ref.prec]);
        cscale = a / b;
    }

    /* the row's layout: one rank per GPU, as the launcher places them */
    vb_mlayout *l = &r->l;
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
    const int world = l->tp * l->cp * l->dp;
    l->local_batch = vb_my_int(y, &p, where, "local_batch", 1, 1 << 24);
    l->bucket_cap_mb = vb_my_num_or(y, &p, where, "bucket_cap_mb", 1e-6, 1e6, VB_BUCKET_CAP_MB_DEFAULT);
    l->node_ranks = mach.ranks_per_node < world ? mach.ranks_per_node : world;
    l->threads = 1, l->cores = l->node_ranks; /* one rank per GPU: no CPU factor */
    char err[256];
    if (vb_model_check_layout(&dims, l, err, sizeof err) != 0) vb_die_input("%s: %s: %s", y->file, where, err);

    /* published: the median of the listed throughputs and their spread */
    yaml_node_t *sn = vb_my_get(&p, "samples_per_s", &line);
    if (!sn) vb_die_input("%s: %s: missing required key 'samples_per_s' (the published throughputs)", y->file, where);
    char sw[96];
    snprintf(sw, sizeof sw, "%s.samples_per_s", where);
    int n = 0;
    yaml_node_t **it = vb_my_list(y, sn, sw, &n);
    if (n < 1) vb_die_input("%s: %s (line %d): an empty list", y->file, sw, line);
    double *v = malloc(sizeof(double) * (size_t)n);
    if (!v) vb_die_internal("out of memory");
    for (int k = 0; k < n; k++) v[k] = vb_my_node_num(y, it[k], sw, 1e-12, 1e12);
    free(it);
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    r->pub = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    r->pub_spread = vb_rel_spread(v, n);
    free(v);

    vb_mctx m = {.ref = &used, .fits = &none, .machine = &mach, .mode = VB_DDP_OVERLAP, .compute_scale = cscale};
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
    int len = snprintf(r->compute, sizeof r->compute, "%s", r->ref_name);
    if (rworld > 1 && len < (int)sizeof r->compute)
        len += snprintf(r->compute + len, sizeof r->compute - (size_t)len, ", compute solved on its %d ranks (x%.4g)", rworld, calib);
    if (rescaled && len < (int)sizeof r->compute)
        len += snprintf(r->compute + len, sizeof r->compute - (size_t)len, ", FLOP-rescaled to D=%d", dims.dim);
    if (cscale != 1 && len < (int)sizeof r->compute)
        snprintf(r->compute + len, sizeof r->compute - (size_t)len, ", x%.3g peak %s", cscale, vb_prec_name[ref.prec]);
    if (rescaled) free(used.ops);
    free(ref.ops);
    vb_yaml_pairs_free(&p);
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
    fputs("id,machine,tp,cp,dp,order,local_batch,reference,published_samples_per_s,published_spread,"
          "predicted_samples_per_s,predicted_lo,predicted_hi,rel_error,published_in_interval,most_sensitive\n",
          f);
    for (int i = 0; i < o->nrows; i++) {
        const pub_row *r = &o->rows[i];
        vb_csv_field(f, r->id);
        fputc(',', f);
        vb_csv_field(f, r->machine_name);
        fprintf(f, ",%d,%d,%d,", r->l.tp, r->l.cp, r->l.dp);
        vb_csv_field(f, r->l.order);
        fprintf(f, ",%d,", r->l.local_batch);
        vb_csv_field(f, r->compute);
        fprintf(f, ",%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%s,", r->pub, r->pub_spread, r->pred, r->lo, r->hi, r->err,
                r->pub >= r->lo && r->pub <= r->hi ? "true" : "false");
        vb_csv_field(f, r->sens);
        fputc('\n', f);
    }
}

/* The Markdown table docs/model.md carries (the test holds the two equal). */
static void write_md(FILE *f, void *vo) {
    const pub_out *o = vo;
    fputs("| id | machine | layout | local batch | compute reference | published samples/s | predicted samples/s "
          "[interval] | error | most sensitive to |\n|---|---|---|---|---|---|---|---|---|\n",
          f);
    char lay[64];
    for (int i = 0; i < o->nrows; i++) {
        const pub_row *r = &o->rows[i];
        layout_text(&r->l, lay, sizeof lay);
        fputs("| ", f);
        vb_md_cell(f, r->id);
        fputs(" | ", f);
        vb_md_cell(f, r->machine_name);
        fputs(" | ", f);
        vb_md_cell(f, lay);
        fprintf(f, " | %d | ", r->l.local_batch);
        vb_md_cell(f, r->compute);
        fprintf(f, " | %.4g | %.4g [%.4g, %.4g] | %+.1f%% | ", r->pub, r->pred, r->lo, r->hi, 100 * r->err);
        vb_md_cell(f, r->sens);
        fputs(" |\n", f);
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
    int nr = 0, nn = 0;
    yaml_node_t **ri = vb_my_list(&y, rows, "rows", &nr);
    if (nr < 1) vb_die_input("%s: rows: an empty list", file);
    pub_row *pr = calloc((size_t)nr, sizeof *pr);
    if (!pr) vb_die_internal("out of memory");
    for (int i = 0; i < nr; i++) {
        predict_row(&y, ri[i], i, models, refs, dir, &pr[i]);
        for (int k = 0; k < i; k++)
            if (strcmp(pr[k].id, pr[i].id) == 0) vb_die_input("%s: rows[%d].id: '%s' names two rows", file, i, pr[i].id);
    }
    free(ri);
    pub_not *pn = NULL;
    if (nots) {
        yaml_node_t **ni = vb_my_list(&y, nots, "cannot_represent", &nn);
        pn = calloc((size_t)nn + 1, sizeof *pn);
        if (!pn) vb_die_internal("out of memory");
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
        if (vb_results_dir_claim_stamped("results", "published", out, sizeof out, NULL, 0) != 0)
            vb_die_env("model: cannot create a published_<stamp> directory in results/ (%s)", strerror(errno));
    }
    vb_outdir od; /* --output_dir is the tree: files by rename, no link followed */
    vb_outdir_open_or_die(&od, out, "", "model");
    pub_out o = {.rows = pr, .nrows = nr, .nots = pn, .nnots = nn, .file = file};
    vb_outdir_write_or_die(&od, VB_PUBLISHED_CSV, write_csv, &o, "model");
    vb_outdir_write_or_die(&od, VB_PUBLISHED_MD, write_md, &o, "model");
    vb_outdir_close(&od);

    printf("Published scaling results beside the model (%s); error = (predicted - published) / published:\n", file);
    printf("%-22s %-16s %-22s %5s %10s %10s %21s %8s  %s\n", "id", "machine", "layout", "batch", "published",
           "predicted", "interval", "error", "compute reference");
    char lay[64], iv[48];
    double sum = 0, mx = 0;
    for (int i = 0; i < nr; i++) {
        const pub_row *r = &pr[i];
        layout_text(&r->l, lay, sizeof lay);
        snprintf(iv, sizeof iv, "[%.4g, %.4g]", r->lo, r->hi);
        printf("%-22s %-16s %-22s %5d %10.4g %10.4g %21s %+7.1f%%  %s\n", r->id, r->machine_name, lay,
               r->l.local_batch, r->pub, r->pred, iv, 100 * r->err, r->compute);
        sum += fabs(r->err);
        if (fabs(r->err) > mx) mx = fabs(r->err);
    }
    for (int i = 0; i < nn; i++) printf("not representable: %s: %s\n", pn[i].what, pn[i].why);
    printf("vitbench model: %d published rows, mean |error| %.1f%%, max %.1f%%; wrote %s/published.csv, "
           "published.md\n",
           nr, 100 * sum / nr, 100 * mx, out);
    free(pr);
    free(pn);
    return 0;
}
