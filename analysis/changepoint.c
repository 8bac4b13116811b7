/* changepoint.c: E-Divisive means with a Student t-test, windowed, split and
 * merge (changepoint.h). */
#include "analysis/changepoint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"
#include "core/util/stats.h"

vb_cp_opts vb_cp_defaults(void) { return (vb_cp_opts){VB_CP_PVALUE, VB_CP_WINDOW, VB_CP_MIN_MAGNITUDE}; }

/* ---- the candidate: Q over every (tau, kappa) of a segment ---- */

/* The pairwise distances |x_i - x_j| of x[base, base + w) as a 2-D prefix
 * table: P[i][j] = sum over a < i, b < j of D(a, b), so the sum over any
 * rectangle of D is four lookups and Q costs O(1) for each (tau, kappa). */
typedef struct {
    int base, w;
    double *p; /* (w + 1) x (w + 1) */
} dist_table;

static void dist_table_init(dist_table *t, const double *x, int base, int w) {
    t->base = base;
    t->w = w;
    const size_t stride = (size_t)w + 1;
    t->p = vb_calloc_check(stride * stride, sizeof *t->p);
    for (int i = 0; i < w; i++) {
        double row = 0;
        for (int j = 0; j < w; j++) {
            row += fabs(x[base + i] - x[base + j]);
            t->p[(size_t)(i + 1) * stride + (size_t)(j + 1)] = t->p[(size_t)i * stride + (size_t)(j + 1)] + row;
        }
    }
}

/* sum of D over rows [a0, a1) and columns [b0, b1), absolute indices */
static double rect(const dist_table *t, int a0, int a1, int b0, int b1) {
    const size_t s = (size_t)t->w + 1;
    a0 -= t->base, a1 -= t->base, b0 -= t->base, b1 -= t->base;
    return t->p[(size_t)a1 * s + (size_t)b1] - t->p[(size_t)a0 * s + (size_t)b1] - t->p[(size_t)a1 * s + (size_t)b0] +
           t->p[(size_t)a0 * s + (size_t)b0];
}

/* The best (tau, kappa) of segment [s, e) by Q; false for fewer than 2 points. */
static bool candidate_in(const dist_table *t, int s, int e, int *tau_out, double *q_out) {
    if (e - s < 2) return false;
    bool found = false;
    double best = 0;
    int best_tau = s + 1;
    for (int tau = s + 1; tau < e; tau++) {
        const double n = tau - s;
        const double within_x = rect(t, s, tau, s, tau) / 2; /* each pair once; the diagonal is 0 */
        for (int kappa = tau + 1; kappa <= e; kappa++) {
            const double m = kappa - tau;
            const double between = rect(t, s, tau, tau, kappa);
            const double within_y = rect(t, tau, kappa, tau, kappa) / 2;
            double q = 2 / (n + m) * between;
            if (n > 1) q -= 2 * m / ((n + m) * (n - 1)) * within_x;
            if (m > 1) q -= 2 * n / ((n + m) * (m - 1)) * within_y;
            if (!found || q > best) {
                found = true;
                best = q;
                best_tau = tau;
            }
        }
    }
    *tau_out = best_tau;
    *q_out = best;
    return true;
}

bool vb_cp_candidate(const double *x, int begin, int end, int *tau, double *qhat) {
    if (end - begin < 2) return false;
    dist_table t;
    dist_table_init(&t, x, begin, end - begin);
    const bool ok = candidate_in(&t, begin, end, tau, qhat);
    free(t.p);
    return ok;
}

/* ---- the significance test ---- */

static void mean_ss(const double *x, int a, int b, double *mean, double *ss) {
    double m = 0;
    for (int i = a; i < b; i++) m += x[i];
    m /= b - a;
    double s = 0;
    for (int i = a; i < b; i++) s += (x[i] - m) * (x[i] - m);
    *mean = m;
    *ss = s;
}

static double rel_change(double from, double to) { return from == 0 ? 0 : to / from - 1; }

void vb_cp_test(const double *x, int begin, int index, int end, vb_cp *c) {
    memset(c, 0, sizeof *c);
    c->begin = begin;
    c->index = index;
    c->end = end;
    const int n1 = index - begin, n2 = end - index;
    double ss1, ss2;
    mean_ss(x, begin, index, &c->mean_before, &ss1);
    mean_ss(x, index, end, &c->mean_after, &ss2);
    c->sd_before = n1 > 1 ? sqrt(ss1 / (n1 - 1)) : 0;
    c->sd_after = n2 > 1 ? sqrt(ss2 / (n2 - 1)) : 0;
    const double a = rel_change(c->mean_before, c->mean_after), b = rel_change(c->mean_after, c->mean_before);
    c->magnitude = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    const int df = n1 + n2 - 2;
    const double diff = c->mean_after - c->mean_before;
    if (df < 1) {
        c->pvalue = 1; /* two points: nothing to tell the spread from */
        return;
    }
    const double pooled = (ss1 + ss2) / df;
    const double se = sqrt(pooled * (1.0 / n1 + 1.0 / n2));
    if (!(se > 0)) {
        c->pvalue = diff == 0 ? 1 : 0; /* both sides constant: they differ or they do not */
        return;
    }
    c->pvalue = 2 * vb_stats_t_sf(fabs(diff) / se, df);
    if (c->pvalue > 1) c->pvalue = 1;
}

/* ---- split: windows, divisive inside each ---- */

typedef struct {
    int *v;
    int n, cap;
} int_list;

static void list_insert_sorted(int_list *l, int x) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = vb_realloc_check(l->v, (size_t)l->cap * sizeof *l->v);
    }
    int k = l->n;
    while (k > 0 && l->v[k - 1] > x) {
        l->v[k] = l->v[k - 1];
        k--;
    }
    l->v[k] = x;
    l->n++;
}

static bool list_has(const int_list *l, int x) {
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == x) return true;
    return false;
}

/* The changes of window x[ws, we) (divisive, at threshold p) into found,
 * sorted. Each candidate is tested inside its segment of the window. */
static void window_changes(const double *x, int ws, int we, double p, int_list *found) {
    found->n = 0;
    dist_table t;
    dist_table_init(&t, x, ws, we - ws);
    for (;;) {
        int best_tau = -1, best_s = 0, best_e = 0;
        double best_q = 0;
        for (int k = 0; k <= found->n; k++) {
            const int s = k == 0 ? ws : found->v[k - 1], e = k == found->n ? we : found->v[k];
            int tau;
            double q;
            if (candidate_in(&t, s, e, &tau, &q) && (best_tau < 0 || q > best_q)) {
                best_tau = tau, best_q = q, best_s = s, best_e = e;
            }
        }
        if (best_tau < 0) break;
        vb_cp c;
        vb_cp_test(x, best_s, best_tau, best_e, &c);
        if (!(c.pvalue <= p)) break;
        list_insert_sorted(found, best_tau);
    }
    free(t.p);
}

double vb_cp_weak_pvalue(double p) { return p < 0.05 ? 10 * p : p < 0.5 ? 2 * p : p; }

/* each change tested against its neighbours in the whole series */
static void retest(const double *x, int n, vb_cp *c, int nc, int k) {
    if (k < 0 || k >= nc) return;
    const int begin = k == 0 ? 0 : c[k - 1].index, end = k == nc - 1 ? n : c[k + 1].index;
    vb_cp_test(x, begin, c[k].index, end, &c[k]);
}

int vb_cp_find(const double *x, int n, const vb_cp_opts *o, vb_cp **out) {
    *out = NULL;
    if (n < 2) return 0;
    const int window = o->window < 2 ? 2 : o->window > VB_CP_WINDOW_MAX ? VB_CP_WINDOW_MAX : o->window;
    const int step = window / 2;
    const double p1 = vb_cp_weak_pvalue(o->pvalue);
    int_list weak = {0}, found = {0};
    for (int start = 0; start < n;) {
        const int end = start + window < n ? start + window : n;
        window_changes(x, start, end, p1, &found);
        const int last = found.n ? found.v[found.n - 1] : 0;
        for (int i = 0; i < found.n; i++)
            if (!list_has(&weak, found.v[i])) list_insert_sorted(&weak, found.v[i]);
        start = last > start + step ? last : start + step;
    }
    free(found.v);
    int nc = weak.n;
    vb_cp *c = vb_calloc_check((size_t)nc + 1, sizeof *c);
    for (int k = 0; k < nc; k++) c[k].index = weak.v[k];
    free(weak.v);
    for (int k = 0; k < nc; k++) {
        const int begin = k == 0 ? 0 : c[k - 1].index, end = k == nc - 1 ? n : c[k + 1].index;
        vb_cp_test(x, begin, c[k].index, end, &c[k]);
    }
    /* merge: the weakest goes first, until every p and magnitude passes */
    while (nc > 0) {
        int w = 0;
        for (int k = 1; k < nc; k++)
            if (c[k].pvalue > c[w].pvalue) w = k;
        if (c[w].pvalue < o->pvalue) {
            w = 0;
            for (int k = 1; k < nc; k++)
                if (c[k].magnitude < c[w].magnitude) w = k;
            if (c[w].magnitude > o->min_magnitude) break;
        }
        memmove(&c[w], &c[w + 1], (size_t)(nc - w - 1) * sizeof *c);
        nc--;
        retest(x, n, c, nc, w - 1);
        retest(x, n, c, nc, w);
    }
    if (nc == 0) {
        free(c);
        return 0;
    }
    *out = c;
    return nc;
}

int vb_cp_points_on_level(const double *x, const vb_cp *c) {
    int k = 0;
    for (int j = c->index + 1; j < c->end; j++)
        if (fabs(x[j] - c->mean_after) < fabs(x[j] - c->mean_before)) k++;
    return k;
}
