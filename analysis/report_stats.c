/* report_stats.c: the estimates the report prints (report.h), built on
 * core/util/stats.h. */
#include <math.h>
#include <stdlib.h>

#include "analysis/report.h"
#include "core/util/stats.h"

#define RP_LEVEL 0.95


void rp_push(rp_samples *s, double x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        double *v = realloc(s->v, (size_t)s->cap * sizeof *v);
        if (!v) vb_die_internal("out of memory");
        s->v = v;
    }
    s->v[s->n++] = x;
}

void rp_samples_append(rp_samples *dst, const rp_samples *src) {
    for (int i = 0; i < src->n; i++) rp_push(dst, src->v[i]);
}

void rp_samples_free(rp_samples *s) {
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

rp_est rp_mean_est(const rp_samples *s) {
    rp_est e = {NAN, NAN, NAN, s->n};
    if (s->n == 0) return e;
    e.mean = vb_stats_mean(s->v, s->n);
    if (s->n < 2) return e;
    vb_ci ci = vb_stats_mean_ci(s->v, s->n, RP_LEVEL);
    e.lo = ci.lo;
    e.hi = ci.hi;
    return e;
}

/* r = mx/my; Var(r) ~ r^2 (vx/mx^2 + vy/my^2) with vx, vy the variances of
 * the means; the t quantile uses the Welch-Satterthwaite df of that sum. */
rp_est rp_ratio_of_means(const rp_samples *num, const rp_samples *den) {
    rp_est e = {NAN, NAN, NAN, num->n < den->n ? num->n : den->n};
    if (num->n == 0 || den->n == 0) return e;
    double mx = vb_stats_mean(num->v, num->n), my = vb_stats_mean(den->v, den->n);
    if (my == 0) return e;
    e.mean = mx / my;
    if (num == den) { /* a point against itself is exactly 1 */
        e.lo = e.hi = e.mean;
        return e;
    }
    if (num->n < 2 || den->n < 2 || mx == 0) return e;
    double sx = vb_stats_std(num->v, num->n, 1), sy = vb_stats_std(den->v, den->n, 1);
    double ax = sx * sx / num->n / (mx * mx), ay = sy * sy / den->n / (my * my);
    double rel = ax + ay;
    if (rel == 0) {
        e.lo = e.hi = e.mean;
        return e;
    }
    double df = rel * rel / (ax * ax / (num->n - 1) + ay * ay / (den->n - 1));
    int idf = df < 1 ? 1 : (int)floor(df);
    /* on the log scale, where rel is the variance of log(mx / my) to first
     * order: the interval stays positive, as a ratio of throughputs is, and
     * grows to the right as the ratio's uncertainty does (the linear form
     * went below 0 for two noisy repeats) */
    if (e.mean <= 0) return e;
    double half = vb_stats_t_quantile(0.5 + RP_LEVEL / 2, idf) * sqrt(rel);
    e.lo = e.mean * exp(-half);
    e.hi = e.mean * exp(half);
    return e;
}

rp_cmp rp_compare(const rp_samples *base, const rp_samples *new_) {
    const vb_verdict v = vb_verdict_of(base->v, base->n, new_->v, new_->n, true, VB_VERDICT_ALPHA,
                                       VB_VERDICT_THRESHOLD);
    return (rp_cmp){v.ratio, v.ci.lo, v.ci.hi, v.p, base->n, new_->n, v.kind};
}

const char *rp_verdict_words(vb_verdict_kind v, const char *differs, const char *same) {
    switch (v) {
    case VB_VERDICT_BETTER:
    case VB_VERDICT_WORSE: return differs;
    case VB_VERDICT_UNCHANGED: return same;
    case VB_VERDICT_INCONCLUSIVE: return "inconclusive: fewer than 5 samples a side";
    case VB_VERDICT_NO_SAMPLES: return "no samples";
    case VB_VERDICT_UNDEFINED: break;
    }
    return "undefined (baseline median 0)";
}

unsigned rp_verdict_rgb(int verdict) {
    switch (verdict) {
    case -1: return 0x000000;
    case VB_VERDICT_BETTER: return 0x009E73;
    case VB_VERDICT_WORSE: return 0xD55E00;
    case VB_VERDICT_UNCHANGED: return 0x777777;
    default: return 0xBBBBBB;
    }
}

bool rp_spread_exceeds(double effect, double lo, double hi) {
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(effect)) return true;
    return hi - lo > fabs(effect);
}
