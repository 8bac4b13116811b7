/* stats.h: the statistics every figure vitbench prints is made of.
 *
 * Descriptive: mean, standard deviation, median and percentiles (numpy's
 * default linear interpolation), min/max. Inferential, as Google benchmark's
 * compare.py and the tutorials' scaling plots use them:
 *   - Student's t confidence interval of a mean;
 *   - the two-sided Mann-Whitney U test: the exact distribution of U when
 *     both samples are small and untied, else the normal approximation with
 *     tie correction and continuity correction (scipy.stats.mannwhitneyu's
 *     method="auto" and use_continuity=True, whose results the tests hold it to);
 *   - a seeded percentile-bootstrap confidence interval of the ratio of two
 *     medians (new / base), resampling each side with replacement.
 * Inputs are never reordered; functions that need a sorted copy make one.
 * n == 0 gives NaN for every statistic (callers say "no samples").
 */
#ifndef VB_STATS_H
#define VB_STATS_H

#include <stdbool.h>
#include <stdint.h>

double vb_stats_mean(const double *x, int n);
/* ddof 0: population (np.std, benchy's summary); ddof 1: sample. n <= ddof gives 0. */
double vb_stats_std(const double *x, int n, int ddof);
/* np.percentile(x, 50): for an even count the linear interpolation
 * b - (b - a) / 2 of the two middle values a <= b (what compare and report
 * print). vb_stats_summarize's median is np.median's (a + b) / 2 instead; the
 * two agree except, when a < b / 2, possibly in the last bit. */
double vb_stats_median(const double *x, int n);
/* q in [0, 100], numpy's linear method. */
double vb_stats_percentile(const double *x, int n, double q);
/* The first smallest / largest value in input order (NaNs are skipped unless
 * x[0] is one). */
double vb_stats_min(const double *x, int n);
double vb_stats_max(const double *x, int n);

/* A sample's descriptive statistics in one call (one sorted copy). */
typedef struct vb_stats_summary {
    int n;
    double mean;     /* sum in input order / n, as vb_stats_mean */
    double std;      /* vb_stats_std with the ddof passed to vb_stats_summarize */
    double min, max; /* vb_stats_min / vb_stats_max */
    double median;   /* np.median: the middle value, or (a + b) / 2 of the two middle ones */
    double p05, p95; /* vb_stats_percentile 5 and 95 */
} vb_stats_summary;

/* Summary of x[0..n-1]; ddof 0 (population) or 1 (sample) picks the std.
 * n == 0 gives n 0 and NaN everywhere else. */
vb_stats_summary vb_stats_summarize(const double *x, int n, int ddof);

/* Quantile of Student's t with df degrees of freedom (df >= 1), p in (0, 1). */
double vb_stats_t_quantile(double p, int df);
/* P(T > t) of Student's t with df > 0 degrees of freedom (df need not be
 * an integer: Welch-Satterthwaite's are not); +inf df is the normal's tail. */
double vb_stats_t_sf(double t, double df);
/* Quantile of the standard normal, p in (0, 1) (0 and 1 give -inf / +inf). */
double vb_stats_norm_quantile(double p);
/* P(Z <= z) of the standard normal. */
double vb_stats_norm_cdf(double z);

typedef struct vb_ci {
    double lo, hi;
} vb_ci;

/* mean +- t_{(1+level)/2, n-1} * s / sqrt(n) (s with ddof 1); level e.g. 0.95.
 * n == 1 gives [mean, mean]. */
vb_ci vb_stats_mean_ci(const double *x, int n, double level);

typedef struct vb_mwu {
    double u;      /* U statistic of x (scipy's U1: pairs with x > y plus half the ties) */
    double p;      /* two-sided p-value */
    bool exact;    /* exact distribution used (else normal approximation) */
} vb_mwu;

/* Two-sided Mann-Whitney U test of x against y; nx, ny >= 1 (else NaN).
 * Exact when no value is tied and either sample has at most 8 values (scipy's
 * auto rule: "if both inputs are large, asymptotic"), else asymptotic. One
 * bound scipy lacks: nx * ny above 10000 is always asymptotic, since the
 * exact distribution costs ~ (nx ny)^2 / 4 operations. p = 2 P(U >= max(U1,
 * U2)), clipped to 1, as scipy. */
vb_mwu vb_stats_mann_whitney(const double *x, int nx, const double *y, int ny);

/* Percentile bootstrap CI of median(new) / median(base) over `iters`
 * resamples (e.g. 2000) from a splitmix64 stream seeded with `seed`: the same
 * inputs and seed give the same interval on every machine. Each resample
 * draws base then new, index floor(vb_rng_uniform * n) per value; the bounds
 * are numpy-linear percentiles (1-level)/2 and (1+level)/2 of the ratios.
 * NaN bounds when a resampled base median is 0 (the ratio is undefined). */
vb_ci vb_stats_bootstrap_median_ratio(const double *base, int nbase, const double *new_, int nnew, int iters,
                                      uint64_t seed, double level);

#endif
