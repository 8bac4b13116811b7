/* verdict.c: the comparison rule (verdict.h). */
#include "analysis/verdict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/util/common.h"

/* What one side contributes: the mean of its run centres (log scale), the
 * variance of that mean and its degrees of freedom, or for a single run its
 * centre and the variance of its median from the trials. */
typedef struct {
    int n, runs;
    double centre;      /* mean of log(run median) */
    double var_centres; /* sample variance of the run centres (runs >= 2) */
    double within;      /* one run: variance of log(median) from its trials, (pi/2) s^2 / n with s from
                           their median absolute deviation; NaN for n < 2 */
    double spread;      /* largest max / min inside one run; NaN when no run has two samples */
    bool undefined;     /* a sample <= 0 or not finite */
} side_stats;

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static side_stats side_of(const vb_verdict_side *s) {
    side_stats r = {s->n, 0, NAN, NAN, NAN, NAN, false};
    if (s->n <= 0) return r;
    for (int i = 0; i < s->n; i++)
        if (!(s->v[i] > 0) || !isfinite(s->v[i])) r.undefined = true;
    if (r.undefined) return r;
    /* runs in order of first appearance; centres and spreads per run */
    int *ids = vb_malloc_check((size_t)s->n * sizeof *ids);
    double *centres = vb_calloc_check((size_t)s->n, sizeof *centres), *tmp = vb_calloc_check((size_t)s->n, sizeof *tmp);
    for (int i = 0; i < s->n; i++) {
        const int id = s->run ? s->run[i] : 0;
        bool seen = false;
        for (int k = 0; k < r.runs && !seen; k++) seen = ids[k] == id;
        if (!seen) ids[r.runs++] = id;
    }
    for (int k = 0; k < r.runs; k++) {
        int m = 0;
        for (int i = 0; i < s->n; i++)
            if ((s->run ? s->run[i] : 0) == ids[k]) tmp[m++] = s->v[i];
        centres[k] = log(vb_stats_median(tmp, m));
        if (m >= 2) {
            qsort(tmp, (size_t)m, sizeof *tmp, cmp_double);
            const double sp = tmp[m - 1] / tmp[0];
            if (isnan(r.spread) || sp > r.spread) r.spread = sp;
        }
    }
    r.centre = vb_stats_mean(centres, r.runs);
    if (r.runs >= 2) r.var_centres = vb_stats_std(centres, r.runs, 1) * vb_stats_std(centres, r.runs, 1);
    if (r.runs == 1 && s->n >= 2) {
        /* the spread of its trials by their median absolute deviation, as
         * robust as the median it qualifies (one slow trial moves neither) */
        const double mid = centres[0];
        for (int i = 0; i < s->n; i++) tmp[i] = fabs(log(s->v[i]) - mid);
        const double sd = 1.4826 * vb_stats_median(tmp, s->n);
        r.within = M_PI / 2 * sd * sd / s->n; /* large-sample variance of a median */
    }
    free(ids), free(centres), free(tmp);
    return r;
}

double vb_verdict_centre(const vb_verdict_side *s) {
    const side_stats r = side_of(s);
    return r.n > 0 && !r.undefined ? exp(r.centre) : NAN;
}

vb_verdict_opts vb_verdict_defaults(bool higher_is_better) {
    return (vb_verdict_opts){higher_is_better, VB_VERDICT_ALPHA, VB_VERDICT_THRESHOLD, VB_VERDICT_RUN_FLOOR, false};
}

bool vb_verdict_busy(double spread, double load) {
    return (spread > VB_VERDICT_NOISY_SPREAD) || (load > VB_VERDICT_BUSY_LOAD);
}

/* the slowdown a lost share of thread time explains; NaN when not recorded */
static double load_factor(double load) {
    if (!isfinite(load)) return NAN;
    return load < 0.99 ? 1 / (1 - (load > 0 ? load : 0)) : 100;
}

/* The run-to-run sd (log scale) a side that lost a share s of its thread
 * time has at least: VB_VERDICT_LOAD_SD per unit of the slowdown the load
 * explains beyond none, s / (1 - s); 0 for a side that was not busy or did
 * not record its load. */
static double busy_sd(double load) {
    if (!(load > VB_VERDICT_BUSY_LOAD)) return 0;
    const double s = load < 0.95 ? load : 0.95;
    return VB_VERDICT_LOAD_SD * s / (1 - s);
}

/* A busy side's whole noise as a relative change: the slowdown its load
 * explains, or the spread of its trials; 0 for a quiet side. */
static double side_noise(double spread, double load) {
    double f = 1;
    if (spread > VB_VERDICT_NOISY_SPREAD) f = spread;
    if (load > VB_VERDICT_BUSY_LOAD && load_factor(load) > f) f = load_factor(load);
    return f - 1;
}

/* How far the load widens the interval (verdict.h): with one run a side the
 * busy sides' whole noise; otherwise the difference of the sides' load
 * (the runs' spread holds its variation) and a single-run side's own trial
 * spread. */
static double load_noise(const vb_verdict *v) {
    double nb = 0, nn = 0;
    if (v->run_sd_source == VB_RUNSD_FLOOR) {
        /* a recorded load already set the sd its side's interval assumes
         * (busy_sd): only its trials' spread is left to widen by */
        nb = side_noise(v->spread_base, busy_sd(v->load_base) > 0 ? NAN : v->load_base);
        nn = side_noise(v->spread_new, busy_sd(v->load_new) > 0 ? NAN : v->load_new);
        return nb > nn ? nb : nn;
    }
    const double fb = load_factor(v->load_base), fn = load_factor(v->load_new);
    double n = 0;
    if (isfinite(fb) && isfinite(fn))
        n = fabs(fb - fn) / fmin(fb, fn);
    else if (isfinite(fb) || isfinite(fn))
        n = side_noise(NAN, isfinite(fb) ? v->load_base : v->load_new); /* one side's load unknown */
    if (v->runs_base == 1 && v->spread_base > VB_VERDICT_NOISY_SPREAD && v->spread_base - 1 > n)
        n = v->spread_base - 1;
    if (v->runs_new == 1 && v->spread_new > VB_VERDICT_NOISY_SPREAD && v->spread_new - 1 > n)
        n = v->spread_new - 1;
    return n;
}

/* Welch-Satterthwaite: df of a sum of variances v[i] with df[i] each
 * (infinite df for a known term) */
static double satterthwaite(const double *v, const double *df, int n) {
    double sum = 0, den = 0;
    for (int i = 0; i < n; i++) {
        sum += v[i];
        if (isfinite(df[i]) && df[i] > 0) den += v[i] * v[i] / df[i];
    }
    return den > 0 ? sum * sum / den : INFINITY;
}

static double quantile(double q, double df) {
    if (!isfinite(df) || df > 1e6) return vb_stats_norm_quantile(q);
    return vb_stats_t_quantile(q, df < 1 ? 1 : (int)floor(df)); /* floor: the wider interval */
}

/* The variance of the difference of the two sides' centres and its df
 * (*df); the run-to-run sd behind it and where it came from when wanted.
 * A side's run-to-run variance is at least its busy floor squared (fb, fn;
 * 0 for none): a few runs of a busy machine can agree by chance, and
 * identical runs under load spread that much. */
static double centre_variance(const side_stats *b, const side_stats *n, double floor_sd, double fb, double fn,
                              double *df, vb_runsd_source *src, double *run_sd) {
    const double vb = fmax(b->var_centres, fb * fb), vn = fmax(n->var_centres, fn * fn);
    double se2, sd;
    vb_runsd_source from;
    if (b->runs >= 2 && n->runs >= 2) {
        const double vv[2] = {vb / b->runs, vn / n->runs};
        const double dd[2] = {b->runs - 1.0, n->runs - 1.0};
        se2 = vv[0] + vv[1];
        *df = satterthwaite(vv, dd, 2);
        sd = sqrt(((b->runs - 1) * vb + (n->runs - 1) * vn) / (b->runs + n->runs - 2));
        from = VB_RUNSD_MEASURED;
    } else if (b->runs >= 2 || n->runs >= 2) {
        /* one side ran once: one run's centre varies as the other side's do
         * (or as its own load says, if more), unless its own trials say its
         * median is less certain still */
        const bool many_is_base = b->runs >= 2;
        const side_stats *many = many_is_base ? b : n, *one = many_is_base ? n : b;
        const double many_var = many_is_base ? vb : vn, one_floor = many_is_base ? fn : fb;
        const double one_var = fmax(many_var, one_floor * one_floor), mean_var = many_var / many->runs;
        if (!(one->within > one_var)) {
            se2 = one_var + mean_var;
            *df = many->runs - 1.0;
        } else {
            const double vv[2] = {one->within, mean_var}, dd[2] = {one->n - 1.0, many->runs - 1.0};
            se2 = vv[0] + vv[1];
            *df = satterthwaite(vv, dd, 2);
        }
        sd = sqrt(many_var);
        from = VB_RUNSD_OTHER;
    } else {
        /* one run a side: the run-to-run spread is unknown; the floor stands
         * in (or a busy side's, if more) */
        const double wb = isnan(b->within) ? 0 : b->within, wn = isnan(n->within) ? 0 : n->within;
        const double f = fmax(floor_sd, fmax(fb, fn));
        const double vv[3] = {wb, wn, 2 * f * f};
        const double dd[3] = {b->n - 1.0, n->n - 1.0, INFINITY};
        se2 = vv[0] + vv[1] + vv[2];
        *df = satterthwaite(vv, dd, 3);
        sd = f;
        from = VB_RUNSD_FLOOR;
    }
    if (src) *src = from;
    if (run_sd) *run_sd = sd;
    return se2;
}

/* exp(d +- t se) at level 1 - alpha, and the p of the same t (p may be NULL) */
static void interval(double d, double se2, double df, double alpha, vb_ci *ci, double *p) {
    const double se = sqrt(se2);
    if (se > 0) {
        const double h = quantile(1 - alpha / 2, df) * se;
        *ci = (vb_ci){exp(d - h), exp(d + h)};
        if (p) *p = fmin(1, 2 * vb_stats_t_sf(fabs(d) / se, df));
    } else {
        *ci = (vb_ci){exp(d), exp(d)};
        if (p) *p = d == 0 ? 1 : 0;
    }
}

/* Each run's centre (log median) and its round, runs in order of first
 * appearance; returns how many. */
static int run_centres(const vb_verdict_side *s, double *centre, int *round) {
    int *ids = vb_malloc_check((size_t)s->n * sizeof *ids), runs = 0;
    double *tmp = vb_malloc_check((size_t)s->n * sizeof *tmp);
    for (int i = 0; i < s->n; i++) {
        const int id = s->run ? s->run[i] : 0;
        int k = 0;
        while (k < runs && ids[k] != id) k++;
        if (k < runs) continue;
        ids[runs] = id;
        round[runs] = s->round[i];
        int m = 0;
        for (int j = i; j < s->n; j++)
            if ((s->run ? s->run[j] : 0) == id) tmp[m++] = s->v[j];
        centre[runs++] = log(vb_stats_median(tmp, m));
    }
    free(ids), free(tmp);
    return runs;
}

/* The paired differences: for each round both sides ran, NEW's centre less
 * BASE's (a side with two runs in a round: their mean). Returns how many. */
static int round_differences(const vb_verdict_side *b, const vb_verdict_side *n, double *diff) {
    double *cb = vb_malloc_check((size_t)b->n * sizeof *cb), *cn = vb_malloc_check((size_t)n->n * sizeof *cn);
    int *rb = vb_malloc_check((size_t)b->n * sizeof *rb), *rn = vb_malloc_check((size_t)n->n * sizeof *rn);
    const int nb = run_centres(b, cb, rb), nn = run_centres(n, cn, rn);
    int pairs = 0;
    for (int i = 0; i < nb; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = rb[j] == rb[i];
        if (seen) continue;
        double sb = 0, sn = 0;
        int kb = 0, kn = 0;
        for (int j = i; j < nb; j++)
            if (rb[j] == rb[i]) sb += cb[j], kb++;
        for (int j = 0; j < nn; j++)
            if (rn[j] == rb[i]) sn += cn[j], kn++;
        if (kn) diff[pairs++] = sn / kn - sb / kb;
    }
    free(cb), free(cn), free(rb), free(rn);
    return pairs;
}

vb_verdict vb_verdict_judge(const vb_verdict_side *base, const vb_verdict_side *new_, const vb_verdict_opts *o) {
    const double floor_sd = o->run_floor > 0 ? o->run_floor : VB_VERDICT_RUN_FLOOR;
    vb_verdict v = {.ratio = NAN, .ci = {NAN, NAN}, .p = NAN, .df = NAN, .level = 1 - o->alpha, .nbase = base->n,
                    .nnew = new_->n, .centre_base = NAN, .centre_new = NAN, .run_sd = NAN,
                    .run_sd_source = VB_RUNSD_FLOOR, .ci_runs = {NAN, NAN},
                    .spread_base = NAN, .spread_new = NAN, .load_base = base->load, .load_new = new_->load,
                    .threshold = o->threshold, .kind = VB_VERDICT_NO_SAMPLES, .why = VB_WHY_NONE};
    if (base->n <= 0 || new_->n <= 0) return v;
    const side_stats b = side_of(base), n = side_of(new_);
    v.runs_base = b.runs, v.runs_new = n.runs;
    v.spread_base = b.spread, v.spread_new = n.spread;
    v.kind = VB_VERDICT_INCONCLUSIVE;
    if (b.undefined || n.undefined) {
        v.why = VB_WHY_UNDEFINED;
        return v;
    }

    /* the variance of each side's centre and the df of their sum, from the
     * runs alone (ci_runs), then with a busy side's run-to-run spread taken
     * as at least what its load gives identical runs (the interval used) */
    const double fb = busy_sd(base->load), fn = busy_sd(new_->load);
    double df_raw = NAN, p_raw = NAN, se2_raw, se2, d = n.centre - b.centre;
    if (o->paired && base->round && new_->round) {
        /* the rounds: each one's difference, its mean and spread over them */
        double *diff = vb_malloc_check((size_t)(base->n + 1) * sizeof *diff);
        v.pairs = round_differences(base, new_, diff);
        if (v.pairs < VB_VERDICT_MIN_PAIRS) {
            free(diff);
            v.why = VB_WHY_FEW_SAMPLES;
            return v;
        }
        d = vb_stats_mean(diff, v.pairs);
        const double sd = vb_stats_std(diff, v.pairs, 1);
        free(diff);
        const double floor_d = VB_VERDICT_LOAD_SD_PAIRED / VB_VERDICT_LOAD_SD * fmax(fb, fn);
        se2_raw = sd * sd / v.pairs;
        se2 = fmax(sd, floor_d) * fmax(sd, floor_d) / v.pairs;
        df_raw = v.df = v.pairs - 1;
        v.run_sd = fmax(sd, floor_d) / sqrt(2); /* a run's share of the difference's spread */
        v.run_sd_source = VB_RUNSD_MEASURED;
        v.load_sd = floor_d;
    } else {
        se2_raw = centre_variance(&b, &n, floor_sd, 0, 0, &df_raw, NULL, NULL);
        vb_runsd_source src;
        double run_sd;
        se2 = centre_variance(&b, &n, floor_sd, fb, fn, &v.df, &src, &run_sd);
        v.run_sd = run_sd, v.run_sd_source = src;
        v.load_sd = fmax(fb, fn);
    }
    v.centre_base = exp(b.centre), v.centre_new = exp(n.centre);
    v.ratio = exp(d);
    interval(d, se2_raw, df_raw, o->alpha, &v.ci_runs, &p_raw);
    interval(d, se2, v.df, o->alpha, &v.ci, &v.p);

    /* the load each side ran under widens the interval */
    v.busy_base = vb_verdict_busy(b.spread, base->load);
    v.busy_new = vb_verdict_busy(n.spread, new_->load);
    v.load_differs = v.busy_base != v.busy_new || (isfinite(base->load) && isfinite(new_->load) &&
                                                   fabs(base->load - new_->load) > o->threshold);
    v.noise = load_noise(&v);
    if (v.noise > 0) v.ci = (vb_ci){v.ci.lo / (1 + v.noise), v.ci.hi * (1 + v.noise)};

    if (b.n < VB_VERDICT_MIN_SAMPLES || n.n < VB_VERDICT_MIN_SAMPLES) {
        v.why = VB_WHY_FEW_SAMPLES;
        return v;
    }
    const double up = 1 + o->threshold, down = 1 - o->threshold;
    const bool sig = v.p < o->alpha;
    const bool above = sig && v.ci.lo > up, below = sig && v.ci.hi < down;
    if (above || below) {
        v.kind = above == o->higher_is_better ? VB_VERDICT_BETTER : VB_VERDICT_WORSE;
        return v;
    }
    const bool inside = v.ci.lo >= down && v.ci.hi <= up;
    if (inside && v.run_sd_source != VB_RUNSD_FLOOR) {
        v.kind = VB_VERDICT_EQUIVALENT;
        return v;
    }
    /* what the runs alone would have said, had the load not widened it */
    const bool widened = v.noise > 0 || se2 > se2_raw;
    const bool raw_decided = widened && ((p_raw < o->alpha && (v.ci_runs.lo > up || v.ci_runs.hi < down)) ||
                                         (v.ci_runs.lo >= down && v.ci_runs.hi <= up &&
                                          v.run_sd_source != VB_RUNSD_FLOOR));
    if (raw_decided)
        v.why = VB_WHY_BUSY;
    else if (v.run_sd_source == VB_RUNSD_FLOOR)
        v.why = VB_WHY_ONE_RUN;
    else
        v.why = VB_WHY_STRADDLES;
    return v;
}

const char *vb_verdict_word(vb_verdict_kind k) {
    switch (k) {
    case VB_VERDICT_EQUIVALENT: return "equivalent";
    case VB_VERDICT_BETTER: return "faster";
    case VB_VERDICT_WORSE: return "slower";
    case VB_VERDICT_INCONCLUSIVE: return "inconclusive";
    case VB_VERDICT_NO_SAMPLES: break;
    }
    return "no samples";
}

const char *vb_verdict_reason(const vb_verdict *v, char *buf, size_t n) {
    buf[0] = '\0';
    if (v->kind != VB_VERDICT_INCONCLUSIVE) return buf;
    const double t = 100 * v->threshold;
    const char *who = v->busy_base && v->busy_new ? "BASE and NEW" : v->busy_base ? "BASE" : v->busy_new ? "NEW" : "a side";
    int k = 0;
    switch (v->why) {
    case VB_WHY_FEW_SAMPLES:
        k = snprintf(buf, n, "fewer than %d samples a side (%d / %d)", VB_VERDICT_MIN_SAMPLES, v->nbase, v->nnew);
        break;
    case VB_WHY_UNDEFINED: k = snprintf(buf, n, "a sample is not a positive number: no ratio"); break;
    case VB_WHY_ONE_RUN:
        k = snprintf(buf, n,
                     "one run a side: the run-to-run spread is unknown, so the interval [%.4g, %.4g] assumes this "
                     "machine's floor (%.3g%%) and only an effect far beyond it is told; equivalence needs two or "
                     "more runs on a side",
                     v->ci.lo, v->ci.hi, 100 * v->run_sd);
        break;
    case VB_WHY_BUSY:
        if (v->load_sd > 0 && v->noise > 0)
            snprintf(buf, n, "%s ran on a busy machine: the load widened the interval to [%.4g, %.4g] (runs under it "
                     "spread by %.3g%% or more, and the sides' loads differ by %.3g%%)%s, and the effect does not "
                     "clear it",
                     who, v->ci.lo, v->ci.hi, 100 * v->load_sd, 100 * v->noise,
                     v->load_differs ? "; the two sides ran under very different load" : "");
        else if (v->load_sd > 0)
            snprintf(buf, n, "%s ran on a busy machine: identical runs under that load spread by %.3g%% or more, "
                     "which widens the interval to [%.4g, %.4g] (from [%.4g, %.4g] by the runs alone), and the effect "
                     "does not clear it",
                     who, 100 * v->load_sd, v->ci.lo, v->ci.hi, v->ci_runs.lo, v->ci_runs.hi);
        else
            snprintf(buf, n, "%s ran on a busy machine: the load widened the interval to [%.4g, %.4g] (by %.3g%%)%s, "
                     "and the effect does not clear it",
                     who, v->ci.lo, v->ci.hi, 100 * v->noise,
                     v->load_differs ? "; the two sides ran under very different load" : "");
        return buf;
    case VB_WHY_STRADDLES:
    case VB_WHY_NONE:
        k = snprintf(buf, n, "the interval [%.4g, %.4g] reaches across +-%.3g%%: more runs a side would narrow it",
                     v->ci.lo, v->ci.hi, t);
        break;
    }
    if (v->noise > 0 && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "; %s ran on a busy machine, which widened it by %.3g%%%s", who,
                 100 * v->noise, v->load_differs ? " (the two sides ran under very different load)" : "");
    return buf;
}

const char *vb_verdict_rule(void) {
    return "on the log scale, each run's centre is its median; a side with several runs is the mean of their "
           "centres, a single run borrows the other side's run-to-run spread or this machine's floor; ratio = "
           "new / base with a Welch t interval (95%), widened by the load a busy side ran under, and the p of the "
           "same t; faster or slower when p < 0.05 and the whole interval lies beyond the threshold (5%); "
           "equivalent when it lies inside +-5% and a side has two or more runs; inconclusive otherwise (fewer "
           "than 5 samples a side, an interval across the threshold, one run a side, a busy side)";
}
