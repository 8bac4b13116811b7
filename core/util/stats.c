/* stats.c: descriptive and inferential statistics (stats.h). */
#include "core/util/stats.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"

/* ---- descriptive ---- */

double vb_stats_mean(const double *x, int n) {
    if (n <= 0) return NAN;
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return s / n;
}

double vb_stats_std(const double *x, int n, int ddof) {
    if (n <= 0) return NAN;
    if (n <= ddof) return 0;
    double m = vb_stats_mean(x, n), ss = 0;
    /* two passes: the textbook sum-of-squares form cancels badly for
     * throughputs of ~1e4 with a spread of ~1 */
    for (int i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    return sqrt(ss / (n - ddof));
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy's linear interpolation on an already sorted array */
static double percentile_sorted(const double *s, int n, double q) {
    double idx = q / 100.0 * (n - 1);
    int lo = (int)floor(idx);
    if (lo < 0) lo = 0;
    if (lo >= n - 1) return s[n - 1];
    double t = idx - lo, a = s[lo], b = s[lo + 1];
    /* numpy's _lerp: from the nearer end, so t = 1 gives b exactly */
    return t >= 0.5 ? b - (b - a) * (1 - t) : a + (b - a) * t;
}

static double *sorted_copy(const double *x, int n) {
    double *s = vb_malloc_check((size_t)n * sizeof *s);
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return s;
}

double vb_stats_percentile(const double *x, int n, double q) {
    if (n <= 0 || !(q >= 0 && q <= 100)) return NAN;
    double *s = sorted_copy(x, n);
    double v = percentile_sorted(s, n, q);
    free(s);
    return v;
}

double vb_stats_median(const double *x, int n) { return vb_stats_percentile(x, n, 50); }

double vb_stats_min(const double *x, int n) {
    if (n <= 0) return NAN;
    double m = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] < m) m = x[i];
    return m;
}

double vb_stats_max(const double *x, int n) {
    if (n <= 0) return NAN;
    double m = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > m) m = x[i];
    return m;
}

vb_stats_summary vb_stats_summarize(const double *x, int n, int ddof) {
    vb_stats_summary r = {0, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    if (n <= 0) return r;
    r.n = n;
    r.mean = vb_stats_mean(x, n);
    r.std = vb_stats_std(x, n, ddof);
    /* scans in input order, not s[0] / s[n-1]: the same value as the
     * functions, NaNs included */
    r.min = vb_stats_min(x, n);
    r.max = vb_stats_max(x, n);
    double *s = sorted_copy(x, n);
    /* np.median averages the two middle values: one rounding of a + b, so
     * (a + b) / 2 exactly, which the interpolation of percentile_sorted
     * does not always give */
    r.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    r.p05 = percentile_sorted(s, n, 5);
    r.p95 = percentile_sorted(s, n, 95);
    free(s);
    return r;
}

/* ---- distributions ---- */

double vb_stats_norm_cdf(double z) { return 0.5 * erfc(-z / sqrt(2.0)); }

/* Acklam's rational approximation (relative error 1.15e-9), then one Halley
 * step on the exact CDF (erfc), which brings it to double precision. */
double vb_stats_norm_quantile(double p) {
    if (!(p > 0 && p < 1)) return p == 0 ? -INFINITY : p == 1 ? INFINITY : NAN;
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                               1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01,  -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    const double plow = 0.02425;
    double x;
    if (p < plow || p > 1 - plow) {
        double q = sqrt(-2 * log(p < plow ? p : 1 - p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
        if (p > 1 - plow) x = -x;
    } else {
        double q = p - 0.5, r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    }
    /* the upper tail through the lower one: 1 - p loses digits near 1 */
    double e = p < 0.5 ? vb_stats_norm_cdf(x) - p : (1 - p) - vb_stats_norm_cdf(-x); /* = cdf(x) - p */
    double u = e * sqrt(2 * M_PI) * exp(x * x / 2);
    return x - u / (1 + x * u / 2);
}

/* Continued fraction of the regularized incomplete beta (modified Lentz). */
static double betacf(double a, double b, double x) {
    const double tiny = 1e-300, eps = 1e-16;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 100000; m++) {
        int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < eps) break;
    }
    return h;
}

/* I_x(a, b), the regularized incomplete beta function, x in [0, 1], with
 * y = 1 - x passed separately: the caller can often form it without the
 * cancellation of 1 - x (t near 0 makes x = df / (df + t^2) round to 1). */
static double incbeta(double a, double b, double x, double y) {
    if (x <= 0) return 0;
    if (y <= 0) return 1;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log(y);
    double bt = exp(lbt);
    /* the continued fraction converges fast only on this side of the mean */
    if (x < (a + 1) / (a + b + 2)) return bt * betacf(a, b, x) / a;
    return 1 - bt * betacf(b, a, y) / b;
}

/* P(T > t) for t >= 0, straight from the incomplete beta: forming it as
 * 1 - cdf would leave 1e-16 absolute error on tails of 1e-12. */
static double t_tail(double t, double df) {
    double t2 = t * t;
    return 0.5 * incbeta(df / 2, 0.5, df / (df + t2), t2 / (df + t2));
}

/* density of Student's t with df degrees of freedom */
static double t_pdf(double t, double df) {
    double l = lgamma((df + 1) / 2) - lgamma(df / 2) - 0.5 * log(df * M_PI) - (df + 1) / 2 * log1p(t * t / df);
    return exp(l);
}

/* Upper-tail quantile of t for q = P(T > t) in (0, 0.5): closed forms for df
 * 1 and 2; otherwise Newton on log tail(t) against log t, from a
 * Cornish-Fisher start, inside a bracket that bisection (in log t) shrinks
 * whenever a Newton step would leave it. In those coordinates the tail is
 * nearly a straight line of slope -df far out (tail ~ t^-df), so Newton
 * converges in a few steps even for q = 1e-300, where steps in t itself
 * would crawl by a factor 1 + 1/df per iteration. */
static double t_upper(double q, int df) {
    if (df == 1) return 1 / tan(M_PI * q); /* Cauchy: cot(pi q), no 0.5 - q cancellation */
    if (df == 2) {
        double a = 4 * q * (1 - q);
        return (1 - 2 * q) * sqrt(2 / a);
    }
    double v = df, z = -vb_stats_norm_quantile(q); /* not quantile(1 - q): 1 - q rounds to 1 for tiny q */
    double z2 = z * z;
    double g1 = (z2 + 1) * z / 4, g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
    double g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
    double x = z + g1 / v + g2 / (v * v) + g3 / (v * v * v);
    if (!(x > 0 && isfinite(x))) x = 1;
    /* bracket the root in t: tail(lo) > q >= tail(hi) */
    double lo = x, hi = x;
    while (t_tail(lo, v) <= q) lo /= 2;
    while (t_tail(hi, v) > q) hi *= 2;
    double s = log(x), slo = log(lo), shi = log(hi), lq = log(q);
    if (!(s > slo && s < shi)) s = (slo + shi) / 2;
    for (int it = 0; it < 200; it++) {
        double t = exp(s), tail = t_tail(t, v);
        if (tail > q)
            slo = s;
        else
            shi = s;
        /* d log tail / d log t = -pdf(t) t / tail */
        double ns = tail > 0 ? s - (log(tail) - lq) / (-t_pdf(t, v) * t / tail) : NAN;
        if (!(ns > slo && ns < shi)) ns = (slo + shi) / 2;
        if (fabs(ns - s) <= 1e-15 * (1 + fabs(ns)) || shi - slo <= 1e-15 * (1 + fabs(shi))) return exp(ns);
        s = ns;
    }
    return exp(s);
}

double vb_stats_t_sf(double t, double df) {
    if (isnan(t) || !(df > 0)) return NAN;
    if (isinf(df)) return vb_stats_norm_cdf(-t); /* erfc keeps the far tail's digits */
    if (t < 0) return 1 - t_tail(-t, df);
    return t_tail(t, df);
}

double vb_stats_t_quantile(double p, int df) {
    if (df < 1 || !(p > 0 && p < 1)) return NAN;
    if (p == 0.5) return 0;
    return p > 0.5 ? t_upper(1 - p, df) : -t_upper(p, df);
}

vb_ci vb_stats_mean_ci(const double *x, int n, double level) {
    vb_ci ci = {NAN, NAN};
    if (n <= 0 || !(level > 0 && level < 1)) return ci;
    double m = vb_stats_mean(x, n);
    if (n == 1) return (vb_ci){m, m};
    double h = vb_stats_t_quantile((1 + level) / 2, n - 1) * vb_stats_std(x, n, 1) / sqrt(n);
    return (vb_ci){m - h, m + h};
}

/* ---- Mann-Whitney U ---- */

typedef struct {
    double v;
    int from_x;
} rank_item;

static int cmp_rank_item(const void *a, const void *b) {
    return cmp_double(&((const rank_item *)a)->v, &((const rank_item *)b)->v);
}

/* Average ranks (1-based) of x then y in the pooled sample, as scipy's
 * rankdata(method="average"); *tie_term gets sum(t^3 - t) over tie groups. */
static double rank_sum_x(const double *x, int nx, const double *y, int ny, double *tie_term) {
    int n = nx + ny;
    rank_item *it = vb_malloc_check((size_t)n * sizeof *it);
    for (int i = 0; i < nx; i++) it[i] = (rank_item){x[i], 1};
    for (int i = 0; i < ny; i++) it[nx + i] = (rank_item){y[i], 0};
    /* tied values share their average rank, so their order does not matter */
    qsort(it, (size_t)n, sizeof *it, cmp_rank_item);
    double rx = 0, tt = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && it[j + 1].v == it[i].v) j++;
        double t = j - i + 1, avg = (i + j) / 2.0 + 1;
        tt += t * t * t - t;
        for (int k = i; k <= j; k++)
            if (it[k].from_x) rx += avg;
        i = j + 1;
    }
    free(it);
    *tie_term = tt;
    return rx;
}

/* P(U >= k) for U of samples of sizes n <= m with no ties, by the recurrence
 * on who holds the largest value: an x (probability n/(n+m)) beats all m y's.
 *   P[n][m](u) = n/(n+m) P[n-1][m](u-m) + m/(n+m) P[n][m-1](u)
 * Every term is a positive probability, so nothing cancels. Cost ~ n^2 m^2 / 4. */
static double exact_sf(int n, int m, int k) {
    if (n > m) {
        int t = n;
        n = m;
        m = t;
    }
    /* row[i] = distribution of U for sizes (i, j) at the current j; length i*j+1 */
    double **row = vb_calloc_check((size_t)n + 1, sizeof *row);
    for (int i = 0; i <= n; i++) {
        row[i] = vb_calloc_check((size_t)i * (size_t)m + 1, sizeof **row);
    }
    /* j = 0: U = 0 for every i */
    for (int i = 0; i <= n; i++) row[i][0] = 1;
    for (int j = 1; j <= m; j++) {
        /* i descending would overwrite row[i-1] at j before row[i] reads it;
         * ascending reads row[i-1] already at j, which is what we need */
        for (int i = 1; i <= n; i++) {
            double px = (double)i / (i + j), py = (double)j / (i + j);
            int len = i * j + 1;
            /* row[i] holds (i, j-1), length i*(j-1)+1: update in place from the top */
            for (int u = len - 1; u >= 0; u--) {
                double from_y = u <= i * (j - 1) ? row[i][u] : 0;
                double from_x = (u >= j && u - j <= (i - 1) * j) ? row[i - 1][u - j] : 0;
                row[i][u] = py * from_y + px * from_x;
            }
        }
    }
    double sf = 0;
    for (int u = k; u <= n * m; u++) sf += row[n][u];
    for (int i = 0; i <= n; i++) free(row[i]);
    free(row);
    return sf;
}

/* The exact distribution costs ~ n^2 m^2 / 4 operations; beyond this the
 * normal approximation is used even for a small side (scipy has no cap). */
#define VB_MWU_EXACT_MAX_PAIRS 10000

vb_mwu vb_stats_mann_whitney(const double *x, int nx, const double *y, int ny) {
    vb_mwu r = {NAN, NAN, false};
    if (nx <= 0 || ny <= 0) return r;
    double tie_term;
    double rx = rank_sum_x(x, nx, y, ny, &tie_term);
    double u1 = rx - (double)nx * (nx + 1) / 2, u2 = (double)nx * ny - u1;
    double u = u1 > u2 ? u1 : u2;
    r.u = u1;
    bool small = nx <= 8 || ny <= 8;
    if (small && tie_term == 0 && (long)nx * ny <= VB_MWU_EXACT_MAX_PAIRS) {
        r.exact = true;
        r.p = 2 * exact_sf(nx, ny, (int)lround(u));
    } else {
        double n = nx + ny, mu = (double)nx * ny / 2;
        double s = sqrt((double)nx * ny / 12 * ((n + 1) - tie_term / (n * (n - 1))));
        double num = u - mu - 0.5; /* continuity: the mass at U stays in the tail */
        r.p = s > 0 ? 2 * vb_stats_norm_cdf(-num / s) : 1;
    }
    if (r.p > 1) r.p = 1;
    return r;
}

/* ---- bootstrap ---- */

/* Median of n values drawn with replacement from x, into scratch. */
static double resampled_median(vb_rng *rng, const double *x, int n, double *scratch) {
    for (int i = 0; i < n; i++) {
        int k = (int)(vb_rng_uniform(rng) * n); /* uniform() < 1, so k < n */
        scratch[i] = x[k];
    }
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_double);
    return percentile_sorted(scratch, n, 50);
}

vb_ci vb_stats_bootstrap_median_ratio(const double *base, int nbase, const double *new_, int nnew, int iters,
                                      uint64_t seed, double level) {
    vb_ci ci = {NAN, NAN};
    if (nbase <= 0 || nnew <= 0 || iters <= 0 || !(level > 0 && level < 1)) return ci;
    double *ratios = vb_malloc_check((size_t)iters * sizeof *ratios);
    double *scratch = vb_malloc_check((size_t)(nbase > nnew ? nbase : nnew) * sizeof *scratch);
    vb_rng rng;
    vb_rng_seed(&rng, seed);
    bool finite = true;
    for (int i = 0; i < iters; i++) {
        /* base first, then new: the order is part of the reproducible stream */
        double mb = resampled_median(&rng, base, nbase, scratch);
        double mn = resampled_median(&rng, new_, nnew, scratch);
        ratios[i] = mn / mb;
        if (!isfinite(ratios[i])) finite = false;
    }
    /* a zero base median makes the ratio undefined: report NaN, not a number */
    if (finite) {
        qsort(ratios, (size_t)iters, sizeof *ratios, cmp_double);
        ci.lo = percentile_sorted(ratios, iters, (1 - level) / 2 * 100);
        ci.hi = percentile_sorted(ratios, iters, (1 + level) / 2 * 100);
    }
    free(ratios);
    free(scratch);
    return ci;
}
