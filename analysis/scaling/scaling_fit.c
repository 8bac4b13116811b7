/* scaling_fit.c: alpha-beta fits of commbench.csv (scaling_model.h).
 *
 * commbench.csv has one row per (collective, group, size, rank) with the
 * rank's mean time per call. A collective finishes when its slowest rank
 * does, so each size's time is the maximum over the ranks (and over the
 * groups of that kind: ngroups > 1 groups run side by side). Each
 * (collective, group, group_size) is then fitted to its ring cost form by
 * linear least squares in (alpha, 1/beta), weighted by 1/t^2 so a 4-byte
 * message's 20 us and a 64 MiB message's 50 ms count by their relative
 * misfit alike.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/csv.h"
#include "analysis/rundir.h"
#include "analysis/scaling/scaling_model.h"
#include "core/results/results.h"
#include "core/util/common.h"
#include "core/util/stats.h"

const char *const vb_coll_name[VB_NCOLL] = {"allreduce", "allgather", "reduce_scatter", "broadcast"};

int vb_coll_of(const char *name) {
    for (int c = 0; c < VB_NCOLL; c++)
        if (strcmp(name, vb_coll_name[c]) == 0) return c;
    return -1;
}

void vb_ab_coeffs(int coll, int p, double *a, double *b) {
    const double pm1 = p - 1.0;
    switch (coll) {
    case VB_COLL_ALLREDUCE: *a = 2.0 * pm1, *b = 2.0 * pm1 / p; break;
    case VB_COLL_ALLGATHER:
    case VB_COLL_REDUCE_SCATTER: *a = pm1, *b = pm1 / p; break;
    default: *a = 1.0, *b = 1.0; break; /* broadcast */
    }
}

/* bytes / (beta GB/s) in microseconds is bytes * 1e-3 / beta: gamma = 1e-3 / beta */
static double gamma_of(double beta_GBps) { return isinf(beta_GBps) ? 0.0 : 1e-3 / beta_GBps; }

int vb_ab_fit_points(int coll, int p, const double *bytes, const double *t_us, int n, vb_ab_fit *out, char *err,
                     size_t errn) {
    if (p < 2) {
        vb_errf(err, errn, "group size %d: nothing to fit (a group of one rank does not communicate)", p);
        return -1;
    }
    int distinct = 0;
    double xmax = 0;
    for (int i = 0; i < n; i++) {
        if (!(t_us[i] > 0) || !isfinite(t_us[i]) || !(bytes[i] >= 0)) {
            vb_errf(err, errn, "size %.0f bytes: time %g us is not a positive number", bytes[i], t_us[i]);
            return -1;
        }
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = bytes[j] == bytes[i];
        distinct += !seen;
        if (bytes[i] > xmax) xmax = bytes[i];
    }
    if (distinct < 2) {
        vb_errf(err, errn, "%d distinct message size%s: alpha and beta need at least 2", distinct,
                distinct == 1 ? "" : "s");
        return -1;
    }
    double a, b;
    vb_ab_coeffs(coll, p, &a, &b);
    /* unknowns: la = a*alpha and g = gamma * b * xmax, the regressor x = bytes / xmax in [0, 1] */
    double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
    for (int i = 0; i < n; i++) {
        const double w = 1.0 / (t_us[i] * t_us[i]), x = bytes[i] / xmax;
        sw += w, sx += w * x, sxx += w * x * x, st += w * t_us[i], sxt += w * x * t_us[i];
    }
    const double det = sw * sxx - sx * sx;
    double la = det > 0 ? (st * sxx - sx * sxt) / det : -1, g = det > 0 ? (sw * sxt - sx * st) / det : -1;
    if (la < 0 || det <= 0) la = 0, g = sxx > 0 ? sxt / sxx : 0; /* bandwidth alone */
    if (g < 0) g = 0, la = st / sw;                             /* latency alone */
    memset(out, 0, sizeof *out);
    out->coll = coll;
    out->p = p;
    out->alpha_us = la / a;
    const double gamma = g / (b * xmax); /* us per byte */
    out->beta_GBps = gamma > 0 ? 1e-3 / gamma : INFINITY;
    double ss = 0;
    for (int i = 0; i < n; i++) {
        const double fit = a * out->alpha_us + b * bytes[i] * gamma_of(out->beta_GBps);
        const double r = (fit - t_us[i]) / t_us[i];
        ss += r * r;
    }
    out->rel_rms = sqrt(ss / n);
    out->nsizes = distinct;
    return 0;
}

double vb_ab_seconds(const vb_ab_fit *f, int p, double bytes) {
    if (p <= 1 || !f) return 0.0;
    double a, b;
    vb_ab_coeffs(f->coll, p, &a, &b);
    return (a * f->alpha_us + b * bytes * gamma_of(f->beta_GBps)) * 1e-6;
}

/* ---- commbench.csv ---- */

typedef struct {
    int coll, p, world;
    char group[16];
    double bytes, t_us; /* max over ranks */
    /* sums over ranks of time_us and of --beside_gemm's GEMM times */
    double sum_t, sum_gemm, sum_beside;
    int nranks, ngemm;
} ab_row;

/* commbench --beside_gemm: a size counts when its collective lasted at least
 * one GEMM (both means over the ranks), as commbench's own summary counts
 * it; its slowdown is the mean GEMM time beside over alone, less one */
static void add_beside(vb_ab_table *tab, const ab_row *r) {
    if (r->ngemm != r->nranks || r->nranks == 0) return;
    const double t = r->sum_t / r->nranks, g = r->sum_gemm / r->nranks, b = r->sum_beside / r->nranks;
    if (!(g > 0) || t < g) return;
    double *grown = vb_realloc_check(tab->slowdowns, sizeof *grown * (size_t)(tab->nslowdowns + 1));
    tab->slowdowns = grown;
    tab->slowdowns[tab->nslowdowns++] = b / g - 1.0;
}

double vb_ab_overlap_slowdown(const vb_ab_table *t) {
    if (t->nslowdowns == 0) return -1.0;
    const double med = vb_stats_median(t->slowdowns, t->nslowdowns);
    return med > 0 ? med : 0.0;
}

static int req_col(const vb_csv *t, const char *path, const char *name) {
    int c = vb_csv_col(t, name);
    if (c < 0) vb_die_input("model: %s: no column '%s' (is it vitbench commbench's commbench.csv?)", path, name);
    return c;
}

void vb_ab_load(const char *path_in, vb_ab_table *tab) {
    char path[VB_PATH_MAX];
    if (vb_dir_exists(path_in))
        vb_dir_file(path, sizeof path, path_in, VB_COMMBENCH_CSV);
    else
        vb_snprintf(path, sizeof path, "%s", path_in);
    vb_csv t;
    char err[256];
    int rc = vb_csv_read(path, &t, err, sizeof err);
    if (rc == -1) vb_die_input("model: --commbench %s: cannot read (%s)", path, err);
    if (rc != 0) vb_die_input("model: %s: malformed CSV (%s)", path, err);
    const int cc = req_col(&t, path, VB_COL_COLLECTIVE), cg = req_col(&t, path, VB_COL_GROUP);
    const int cp = req_col(&t, path, VB_COL_GROUP_SIZE), cs = req_col(&t, path, VB_COL_SIZE_BYTES);
    const int ct = req_col(&t, path, VB_COL_TIME_US), cw = vb_csv_col(&t, VB_COL_WRONG);
    const int cng = vb_csv_col(&t, VB_COL_NGROUPS);
    /* optional: files from before --beside_gemm, or runs without it, lack them or leave them empty */
    const int cgu = vb_csv_col(&t, VB_COL_GEMM_US), cgb = vb_csv_col(&t, VB_COL_GEMM_BESIDE_US);
    ab_row *rows = vb_calloc_check((size_t)t.nrows + 1, sizeof *rows);
    int nr = 0;
    for (int i = 0; i < t.nrows; i++) {
        const int coll = vb_coll_of(vb_csv_get(&t, i, cc));
        double p, bytes, us, wrong = 0;
        if (coll < 0)
            vb_die_input("model: %s: row %d: collective '%s' (expected allreduce, allgather, reduce_scatter, "
                         "broadcast)",
                         path, i + 2, vb_csv_get(&t, i, cc));
        if (!vb_csv_num(&t, i, cp, &p) || p < 1 || p != floor(p) || !vb_csv_num(&t, i, cs, &bytes) || bytes < 0 ||
            !vb_csv_num(&t, i, ct, &us) || !(us > 0))
            vb_die_input("model: %s: row %d: group_size, size_bytes or time_us is not a valid number", path, i + 2);
        if (cw >= 0 && vb_csv_get(&t, i, cw)[0] && (!vb_csv_num(&t, i, cw, &wrong) || wrong != 0))
            vb_die_input("model: %s: row %d: wrong = %s: a collective that computed wrong results is not timed",
                         path, i + 2, vb_csv_get(&t, i, cw));
        if (p < 2) continue; /* a one-rank group does not communicate */
        const char *g = vb_csv_get(&t, i, cg);
        double ng = 0;
        if (cng >= 0 && (!vb_csv_num(&t, i, cng, &ng) || ng < 1 || ng != floor(ng)))
            vb_die_input("model: %s: row %d: ngroups is not a positive integer", path, i + 2);
        const int world = (int)(p * ng);
        int k = 0;
        for (; k < nr; k++)
            if (rows[k].coll == coll && rows[k].p == (int)p && rows[k].world == world && rows[k].bytes == bytes &&
                strcmp(rows[k].group, g) == 0)
                break;
        if (k == nr) {
            rows[nr].coll = coll, rows[nr].p = (int)p, rows[nr].world = world, rows[nr].bytes = bytes;
            rows[nr].t_us = 0;
            snprintf(rows[nr].group, sizeof rows[nr].group, "%s", g);
            nr++;
        }
        if (us > rows[k].t_us) rows[k].t_us = us;
        rows[k].sum_t += us, rows[k].nranks++;
        double gu, gb;
        if (cgu >= 0 && cgb >= 0 && vb_csv_get(&t, i, cgu)[0]) {
            if (!vb_csv_num(&t, i, cgu, &gu) || !(gu > 0) || !vb_csv_num(&t, i, cgb, &gb) || !(gb > 0))
                vb_die_input("model: %s: row %d: gemm_us or gemm_beside_us is not a positive number", path, i + 2);
            rows[k].sum_gemm += gu, rows[k].sum_beside += gb, rows[k].ngemm++;
        }
    }
    for (int k = 0; k < nr; k++) add_beside(tab, &rows[k]);
    double *xb = vb_malloc_check(sizeof(double) * ((size_t)nr + 1)), *yt = vb_malloc_check(sizeof(double) * ((size_t)nr + 1));
    bool *done = vb_calloc_check((size_t)nr + 1, sizeof *done);
    int nfit = 0;
    for (int i = 0; i < nr; i++) {
        if (done[i]) continue;
        int n = 0;
        for (int j = i; j < nr; j++)
            if (!done[j] && rows[j].coll == rows[i].coll && rows[j].p == rows[i].p && rows[j].world == rows[i].world &&
                strcmp(rows[j].group, rows[i].group) == 0) {
                done[j] = true;
                xb[n] = rows[j].bytes, yt[n] = rows[j].t_us, n++;
            }
        vb_ab_fit f;
        if (vb_ab_fit_points(rows[i].coll, rows[i].p, xb, yt, n, &f, err, sizeof err) != 0)
            vb_die_input("model: %s: %s over %s (%d ranks): %s", path, vb_coll_name[rows[i].coll], rows[i].group,
                         rows[i].p, err);
        snprintf(f.group, sizeof f.group, "%s", rows[i].group);
        f.world = rows[i].world;
        vb_ab_fit *nf = vb_realloc_check(tab->fits, sizeof *nf * (size_t)(tab->n + 1));
        tab->fits = nf;
        tab->fits[tab->n++] = f;
        nfit++;
    }
    if (nfit == 0) vb_die_input("model: %s: no rows with group_size >= 2: nothing to fit", path);
    free(xb), free(yt), free(done), free(rows);
    vb_csv_free(&t);
}

void vb_ab_free(vb_ab_table *t) {
    free(t->fits);
    free(t->slowdowns);
    t->fits = NULL;
    t->slowdowns = NULL;
    t->n = t->nslowdowns = 0;
}

const vb_ab_fit *vb_ab_lookup(const vb_ab_table *t, int coll, const char *group, int p, int world,
                              bool *extrapolated) {
    /* rank of a fit of size p: 0 same group and world, 1 same world, 2 same group, 3 any */
    const vb_ab_fit *best = NULL, *near = NULL;
    int best_rank = 4;
    for (int i = 0; i < t->n; i++) {
        const vb_ab_fit *f = &t->fits[i];
        if (f->coll != coll) continue;
        if (f->p == p) {
            const bool g = group && strcmp(f->group, group) == 0, w = world > 0 && f->world == world;
            const int r = g && w ? 0 : w ? 1 : g ? 2 : 3;
            if (r < best_rank) best = f, best_rank = r;
        }
        /* nearest size; on a tie the larger (closer to a cluster's many links) */
        if (!near || abs(f->p - p) < abs(near->p - p) || (abs(f->p - p) == abs(near->p - p) && f->p > near->p))
            near = f;
    }
    if (best) return best;
    if (near && extrapolated) *extrapolated = true;
    return near;
}
