/* changepoint.h: where a series changes level, by E-Divisive means
 * (Matteson and James, "A Nonparametric Approach for Multiple Change Point
 * Analysis of Multivariate Data", 2014) with its permutation test replaced by
 * a two-sided Student t-test, in sliding windows with a split and a merge
 * pass (Fleming et al., "Hunter: Using Change Point Detection to Hunt for
 * Performance Regressions", ICPE 2023): Apache Otava's method, deterministic.
 *
 * x[0..n) is one metric in the order it was measured (oldest first). A
 * change point is the index of the FIRST point of the new level: the commit
 * that brought the change.
 *
 * Candidate of a segment [s, e): the split tau (s < tau < e) and end kappa
 * (tau < kappa <= e) that maximise the E-statistic (alpha = 1) scaled by
 * n m / (n + m), with X = x[s, tau) (n points) and Y = x[tau, kappa) (m):
 *
 *   Q = 2/(n+m) sum_{X,Y} |x_i - y_j| - 2m/((n+m)(n-1)) sum_{i<k in X} |x_i - x_k|
 *                                     - 2n/((n+m)(m-1)) sum_{j<k in Y} |y_j - y_k|
 *
 * (a sum over the pairs of one point is 0); the first maximum in order of
 * tau, then kappa. Its significance: the two-sided Student t-test (pooled
 * variance from the sample variances, n1 + n2 - 2 degrees of freedom) of
 * x[s, tau) against x[tau, e), the whole segment on both sides; p = 1 with
 * two points in all, p = 0 when both sides are constant and differ.
 *
 * 1. Split: windows of `window` points, the first at 0, each next one at
 *    max(the last change found in the window before, its start +
 *    window / 2). In a window, changes are found divisively: the best
 *    candidate over the window's segments (between the changes found so
 *    far) is kept when its p <= the weak threshold (10 x pvalue below 0.05,
 *    2 x below 0.5, else pvalue) and the search goes on, until a candidate
 *    is not. The union of every window's changes, each then tested against
 *    its neighbours in the whole series, are the weak change points.
 * 2. Merge: while the weakest (largest p) has p >= pvalue, or every p is
 *    below it but the smallest magnitude is <= min_magnitude, that change is
 *    dropped and the two changes beside it are tested again against their
 *    new neighbours. magnitude = max(|after / before - 1|, |before / after - 1|)
 *    of the two means.
 *
 * Where this differs from Otava 0.8.0 (docs/analysis.md says so too): Otava
 * passes numpy's population standard deviations (n) to a t-test that expects
 * sample ones (n - 1), which makes its p somewhat smaller for short
 * segments; and after dropping a change in the merge it tests again the
 * change after it and the one after that, not the one before it, whose stats
 * then stay those of its old neighbour.
 */
#ifndef VB_ANALYSIS_CHANGEPOINT_H
#define VB_ANALYSIS_CHANGEPOINT_H

#include <stdbool.h>

/* Otava's defaults */
#define VB_CP_PVALUE 0.001
#define VB_CP_WINDOW 50
#define VB_CP_MIN_MAGNITUDE 0.0
/* the largest window: a window's pairwise distances are kept as a prefix
 * table of (window + 1)^2 doubles (32 MB at 2000) */
#define VB_CP_WINDOW_MAX 2000

typedef struct vb_cp_opts {
    double pvalue;        /* in (0, 1] */
    int window;           /* points a window holds, 2 .. VB_CP_WINDOW_MAX */
    double min_magnitude; /* >= 0 */
} vb_cp_opts;

vb_cp_opts vb_cp_defaults(void);
/* the split pass's ("weak") threshold for pvalue: 10 x below 0.05, 2 x below 0.5, else pvalue */
double vb_cp_weak_pvalue(double p);

typedef struct vb_cp {
    int index;                   /* first point of the new level */
    int begin, end;              /* tested: x[begin, index) against x[index, end) */
    double mean_before, mean_after;
    double sd_before, sd_after;  /* sample standard deviations (n - 1); 0 for one point */
    double pvalue;
    double magnitude;
} vb_cp;

/* The change points of x[0..n) (finite values) by the method above, sorted
 * by index, into *out (malloc'd; NULL when there are none). Returns how many. */
int vb_cp_find(const double *x, int n, const vb_cp_opts *o, vb_cp **out);

/* The candidate of segment x[begin, end) (end - begin >= 2): its tau and Q.
 * False for a shorter segment. */
bool vb_cp_candidate(const double *x, int begin, int end, int *tau, double *qhat);

/* The t-test of x[begin, index) against x[index, end) into c (index, begin,
 * end, means, sds, p, magnitude). */
void vb_cp_test(const double *x, int begin, int index, int end, vb_cp *c);

/* Points after the change point, inside its new level x[index + 1, end),
 * that stay on it: nearer the new level's mean than the old one's. A change
 * is confirmed when at least one does; the newest point alone (index =
 * n - 1) or a level of one point before the next change never is. */
int vb_cp_points_on_level(const double *x, const vb_cp *c);

#endif
