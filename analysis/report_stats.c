/* report_stats.c: the estimates the report prints (report.h), built on
 * core/util/stats.h and the rule of verdict.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/report.h"
#include "core/util/stats.h"

#define RP_LEVEL 0.95

void rp_push_run(rp_samples *s, double x, int run) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        double *v = vb_realloc_check(s->v, (size_t)s->cap * sizeof *v);
        int *r = vb_realloc_check(s->run, (size_t)s->cap * sizeof *r);
        s->v = v;
        s->run = r;
    }
    s->run[s->n] = run;
    s->v[s->n++] = x;
}

void rp_push(rp_samples *s, double x) { rp_push_run(s, x, 0); }

void rp_samples_append_run(rp_samples *dst, const rp_samples *src, int run) {
    for (int i = 0; i < src->n; i++) rp_push_run(dst, src->v[i], run);
}

int rp_samples_runs(const rp_samples *s) {
    int n = 0;
    for (int i = 0; i < s->n; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = s->run[j] == s->run[i];
        n += !seen;
    }
    return n;
}

void rp_samples_free(rp_samples *s) {
    free(s->v);
    free(s->run);
    s->v = NULL;
    s->run = NULL;
    s->n = s->cap = 0;
}

/* The samples an interval is made of: the runs' means when there are two or
 * more runs, else the trials themselves. */
static rp_samples unit_samples(const rp_samples *s, int *runs) {
    rp_samples u = {0};
    *runs = rp_samples_runs(s);
    if (*runs < 2) {
        rp_samples_append_run(&u, s, 0);
        return u;
    }
    for (int i = 0; i < s->n; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = s->run[j] == s->run[i];
        if (seen) continue;
        double sum = 0;
        int k = 0;
        for (int j = i; j < s->n; j++)
            if (s->run[j] == s->run[i]) sum += s->v[j], k++;
        rp_push_run(&u, sum / k, s->run[i]);
    }
    return u;
}

rp_est rp_mean_est(const rp_samples *s) {
    rp_est e = {NAN, NAN, NAN, s->n, 0};
    if (s->n == 0) return e;
    rp_samples u = unit_samples(s, &e.runs);
    e.mean = vb_stats_mean(u.v, u.n);
    if (u.n >= 2) {
        const double se = vb_stats_std(u.v, u.n, 1) / sqrt(u.n);
        const double t = vb_stats_t_quantile(0.5 + RP_LEVEL / 2, u.n - 1);
        bool positive = true;
        for (int i = 0; i < u.n; i++) positive = positive && u.v[i] > 0;
        if (positive) { /* on the log scale: a throughput's interval never reaches 0 */
            e.lo = e.mean * exp(-t * se / e.mean);
            e.hi = e.mean * exp(t * se / e.mean);
        } else { /* values that can be 0: the linear interval, cut where the quantity ends */
            e.lo = fmax(e.mean - t * se, 0);
            e.hi = e.mean + t * se;
        }
    }
    rp_samples_free(&u);
    return e;
}

/* r = mx/my; Var(r) ~ r^2 (vx/mx^2 + vy/my^2) with vx, vy the variances of
 * the means; the t quantile uses the Welch-Satterthwaite df of that sum. */
rp_est rp_ratio_of_means(const rp_samples *num_s, const rp_samples *den_s) {
    rp_est e = {NAN, NAN, NAN, num_s->n < den_s->n ? num_s->n : den_s->n, 0};
    if (num_s->n == 0 || den_s->n == 0) return e;
    int rn, rd;
    rp_samples nu = unit_samples(num_s, &rn), du = unit_samples(den_s, &rd);
    const rp_samples *num = &nu, *den = &du;
    e.runs = rn < rd ? rn : rd;
    double mx = vb_stats_mean(num->v, num->n), my = vb_stats_mean(den->v, den->n);
    if (my == 0) goto done;
    e.mean = mx / my;
    if (num_s == den_s) { /* a point against itself is exactly 1 */
        e.lo = e.hi = e.mean;
        goto done;
    }
    if (num->n < 2 || den->n < 2 || mx == 0) goto done;
    double sx = vb_stats_std(num->v, num->n, 1), sy = vb_stats_std(den->v, den->n, 1);
    double ax = sx * sx / num->n / (mx * mx), ay = sy * sy / den->n / (my * my);
    double rel = ax + ay;
    if (rel == 0) {
        e.lo = e.hi = e.mean;
        goto done;
    }
    double df = rel * rel / (ax * ax / (num->n - 1) + ay * ay / (den->n - 1));
    int idf = df < 1 ? 1 : (int)floor(df);
    /* on the log scale, where rel is the variance of log(mx / my) to first
     * order: the interval stays positive, as a ratio of throughputs is, and
     * grows to the right as the ratio's uncertainty does (the linear form
     * went below 0 for two noisy repeats) */
    if (e.mean <= 0) goto done;
    double half = vb_stats_t_quantile(0.5 + RP_LEVEL / 2, idf) * sqrt(rel);
    e.lo = e.mean * exp(-half);
    e.hi = e.mean * exp(half);
done:
    rp_samples_free(&nu);
    rp_samples_free(&du);
    return e;
}

rp_cmp rp_compare(const rp_samples *base, double base_load, const rp_samples *new_, double new_load) {
    const vb_verdict_opts o = vb_verdict_defaults(true);
    const vb_verdict_side b = {base->v, base->run, base->n, base_load, NULL},
                          n = {new_->v, new_->run, new_->n, new_load, NULL};
    const vb_verdict v = vb_verdict_judge(&b, &n, &o);
    return (rp_cmp){v.ratio, v.ci.lo, v.ci.hi, v.p, base->n, new_->n, v.kind, v};
}

const char *rp_verdict_text(const rp_cmp *c, char *buf, size_t n) {
    if (c->verdict != VB_VERDICT_INCONCLUSIVE) {
        snprintf(buf, n, "%s", vb_verdict_word(c->verdict));
        return buf;
    }
    char why[400];
    snprintf(buf, n, "inconclusive: %s", vb_verdict_reason(&c->v, why, sizeof why));
    return buf;
}

unsigned rp_verdict_rgb(int verdict) {
    switch (verdict) {
    case -1: return 0x000000;
    case VB_VERDICT_BETTER: return 0x009E73;
    case VB_VERDICT_WORSE: return 0xD55E00;
    case VB_VERDICT_EQUIVALENT: return 0x0072B2;
    default: return 0x999999;
    }
}

bool rp_spread_exceeds(double effect, double lo, double hi) {
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(effect)) return true;
    return hi - lo > fabs(effect);
}
