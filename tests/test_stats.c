/* test_stats.c: core/util/stats.c against golden values from scipy and numpy.
 *
 * Every reference number below was computed once by tools/stats_reference.py
 * (scipy 1.17.1, numpy 2.4.6, mpmath 1.3.0) and pasted here; that script
 * lists the exact calls: scipy.stats.mannwhitneyu(x, y, use_continuity=True,
 * alternative="two-sided", method="auto"), t quantiles by mpmath (40 digits, down to p = 1e-100;
 * scipy.stats.t.ppf agrees to 1e-9 except next to p = 0.5, where it loses
 * digits), scipy.stats.norm.ppf(p), scipy.stats.t.interval(0.95, n-1, loc=mean,
 * scale=scipy.stats.sem(x)), numpy.percentile / median / std(ddof), and
 * scipy.stats.bootstrap(method="percentile") for the bootstrap bounds.
 * The tests need no Python.
 */
#include "tests/test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/util/stats.h"

typedef struct {
    const double *x;
    int nx;
    const double *y;
    int ny;
    double u, p;
    bool exact;
} mwu_case;

typedef struct {
    double p;
    int df;
    double q;
} quantile_case;

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- golden values: output of tools/stats_reference.py ---- */
static const double mwu_x0[] = {1.0, 2.0, 3.0, 4.0, 5.0};
static const double mwu_y0[] = {6.0, 7.0, 8.0, 9.0, 10.0};
static const double mwu_x1[] = {1.1, 3.2, 5.5, 2.0};
static const double mwu_y1[] = {4.1, 6.3, 0.5, 7.7, 8.8, 9.9};
static const double mwu_x2[] = {10.5, 11.2, 9.8};
static const double mwu_y2[] = {9.1, 8.7, 10.1, 9.5, 8.2, 10.9, 9.9, 8.8};
static const double mwu_x3[] = {3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0, 6.0};
static const double mwu_y3[] = {2.5, 3.5, 8.0, 9.7, 9.3, 2.3, 8.4, 6.2};
static const double mwu_x4[] = {1.0};
static const double mwu_y4[] = {2.0};
static const double mwu_x5[] = {5.0, 6.0, 7.0, 8.0, 9.0};
static const double mwu_y5[] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5, 15.5, 16.5, 17.5, 18.5, 19.5};
static const double mwu_x6[] = {1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0, 5.0, 9.0, 10.0};
static const double mwu_y6[] = {2.0, 3.0, 4.0, 4.0, 5.0, 6.0, 6.0, 7.0, 8.0, 11.0};
static const double mwu_x7[] = {1.0, 2.0, 2.0, 3.0};
static const double mwu_y7[] = {2.0, 3.0, 4.0, 5.0, 5.0};
static const double mwu_x8[] = {0.0, 1.37, 2.74, 4.11, 5.48, 6.8500000000000005, 8.22, 9.59, 10.96, 12.330000000000002, 13.700000000000001, 15.07};
static const double mwu_y8[] = {0.05, 2.1599999999999997, 4.27, 6.38, 8.49, 10.6, 12.71, 14.82, 16.93, 19.04, 2.1499999999999977, 4.259999999999997, 6.37, 8.48, 10.59};
static const double mwu_x9[] = {4.0, 4.0, 4.0, 4.0, 4.0, 4.0};
static const double mwu_y9[] = {4.0, 4.0, 4.0, 4.0, 4.0, 4.0};
/* {x, nx, y, ny, U1, p, exact} */
static const mwu_case mwu_cases[] = {
    {mwu_x0, 5, mwu_y0, 5, 0.0, 0.007936507936507936, true},
    {mwu_x1, 4, mwu_y1, 6, 5.0, 0.17142857142857143, true},
    {mwu_x2, 3, mwu_y2, 8, 20.0, 0.13333333333333333, true},
    {mwu_x3, 8, mwu_y3, 8, 17.0, 0.13038073038073036, true},
    {mwu_x4, 1, mwu_y4, 1, 0.0, 1.0, true},
    {mwu_x5, 5, mwu_y5, 20, 35.0, 0.335554300771692, true},
    {mwu_x6, 10, mwu_y6, 10, 31.0, 0.15880458231023753, false},
    {mwu_x7, 4, mwu_y7, 5, 2.5, 0.07854585095119067, false},
    {mwu_x8, 12, mwu_y8, 15, 82.0, 0.7143930376343264, false},
    {mwu_x9, 6, mwu_y9, 6, 18.0, 1.0, false},
};
static const quantile_case t_cases[] = {
    {0.975, 1, 12.706204736174694},
    {0.995, 1, 63.656741162871526},
    {0.9, 1, 3.077683537175254},
    {0.6, 1, 0.32491969623290623},
    {0.025, 1, -12.706204736174705},
    {0.999999, 1, 318309.88617359026},
    {0.5000001, 1, 3.1415926519363007e-07},
    {1e-100, 1, -3.1830988618379064e+99},
    {0.975, 2, 4.302652729749462},
    {0.995, 2, 9.92484320091829},
    {0.9, 2, 1.885618083164127},
    {0.6, 2, 0.2886751345948128},
    {0.025, 2, -4.302652729749464},
    {0.999999, 2, 707.1057205157671},
    {0.5000001, 2, 2.8284271232574876e-07},
    {1e-100, 2, -7.071067811865475e+49},
    {0.975, 3, 3.1824463052837086},
    {0.995, 3, 5.840909309733355},
    {0.9, 3, 1.6377443536962104},
    {0.6, 3, 0.27667066233268983},
    {0.025, 3, -3.1824463052837095},
    {0.999999, 3, 103.29946777942897},
    {0.5000001, 3, 2.720699044919316e-07},
    {1e-100, 3, -2.225769823822442e+33},
    {0.975, 4, 2.7764451051977934},
    {0.995, 4, 4.604094871349992},
    {0.9, 4, 1.533206274058944},
    {0.6, 4, 0.27072229470759734},
    {0.025, 4, -2.7764451051977943},
    {0.999999, 4, 41.5778541501515},
    {0.5000001, 4, 2.666666665263091e-07},
    {1e-100, 4, -1.3160740129524924e+25},
    {0.975, 5, 2.5705818356363146},
    {0.995, 5, 4.032142983555227},
    {0.9, 5, 1.4758840488244813},
    {0.6, 5, 0.26718086570414507},
    {0.025, 5, -2.5705818356363155},
    {0.999999, 5, 24.77102972037249},
    {0.5000001, 5, 2.634305522753727e-07},
    {1e-100, 5, -1.5683925590993378e+20},
    {0.975, 7, 2.364624251592785},
    {0.995, 7, 3.4994832973504932},
    {0.9, 7, 1.4149239276505086},
    {0.6, 7, 0.2631668613520228},
    {0.025, 7, -2.3646242515927853},
    {0.999999, 7, 14.241469651921154},
    {0.5000001, 7, 2.5974602742784954e-07},
    {1e-100, 7, -387862584049539.9},
    {0.975, 10, 2.2281388519862744},
    {0.995, 10, 3.169272672616951},
    {0.9, 10, 1.3721836411103359},
    {0.6, 10, 0.26018482949208016},
    {0.025, 10, -2.228138851986275},
    {0.999999, 10, 9.751995490909854},
    {0.5000001, 10, 2.5699780335778006e-07},
    {1e-100, 10, -25645257189.48198},
    {0.975, 19, 2.093024054408309},
    {0.995, 19, 2.860934606464979},
    {0.9, 19, 1.3277282090267986},
    {0.6, 19, 0.25692281979615467},
    {0.025, 19, -2.0930240544083096},
    {0.999999, 19, 6.723394282186009},
    {0.5000001, 19, 2.5398127877336377e-07},
    {1e-100, 19, -704008.5470071809},
    {0.975, 30, 2.0422724563012378},
    {0.995, 30, 2.749995653567225},
    {0.9, 30, 1.3104150253913958},
    {0.6, 30, 0.2556053649519127},
    {0.025, 30, -2.042272456301238},
    {0.999999, 30, 5.871117120408623},
    {0.5000001, 30, 2.5276002247929695e-07},
    {1e-100, 30, -10810.645001143976},
    {0.975, 100, 1.9839715185235518},
    {0.995, 100, 2.6258905214380177},
    {0.9, 100, 1.290074761346516},
    {0.6, 100, 0.2540221824582278},
    {0.025, 100, -1.9839715185235522},
    {0.999999, 100, 5.048830877221447},
    {0.5000001, 100, 2.5129025790483257e-07},
    {1e-100, 100, -96.31474307783093},
    {0.975, 999, 1.9623414611334495},
    {0.995, 999, 2.5807596372676365},
    {0.9, 999, 1.2823995700373974},
    {0.6, 999, 0.2534145833303673},
    {0.025, 999, -1.96234146113345},
    {0.999999, 999, 4.781636978824167},
    {0.5000001, 999, 2.507255636055127e-07},
    {1e-100, 999, -23.933539701995954},
    {0.975, 1000, 1.962339080826408},
    {0.995, 1000, 2.5807546980659506},
    {0.9, 1000, 1.2823987214609245},
    {0.6, 1000, 0.2534145158394987},
    {0.025, 1000, -1.9623390808264085},
    {0.999999, 1000, 4.781608620452438},
    {0.5000001, 1000, 2.507255008614169e-07},
    {1e-100, 1000, -23.930617087826445},
};
static const quantile_case norm_cases[] = {
    {1e-10, 0, -6.361340902404056},
    {0.001, 0, -3.090232306167813},
    {0.025, 0, -1.9599639845400545},
    {0.3, 0, -0.5244005127080409},
    {0.5, 0, 0.0},
    {0.7, 0, 0.5244005127080407},
    {0.975, 0, 1.959963984540054},
    {0.999, 0, 3.090232306167813},
    {0.9999999999, 0, 6.361340889697422},
};
static const double desc_x[] = {523.1, 498.7, 530.2, 512.9, 505.5, 499.0, 541.3, 517.8, 509.6, 522.4, 515.0};
static const double desc_q[] = {0.0, 10.0, 25.0, 33.3, 50.0, 90.0, 99.0, 100.0};
static const double desc_pct[] = {498.7, 499.0, 507.55, 510.689, 515.0, 530.2, 540.1899999999999, 541.3};
/* mean, median, std ddof 0, std ddof 1 (numpy) */
static const double desc_ref[] = {515.9545454545455, 515.0, 12.381904952305755, 12.986251471180095};
/* median of the first 10 values (an even count) */
static const double desc_median_even[] = {515.3499999999999};
/* 95% t interval of the mean */
static const double desc_ci95[] = {507.23026300669596, 524.678827902395};
static const double boot_base[] = {100.0, 103.4749944313574, 100.23337669391951, 98.72255595301681, 101.48234005341583, 102.89546133787047, 98.90037593721938, 99.6455886632889, 102.57748544456949, 101.69022171939184, 98.11580752436133, 101.0530029225574};
static const double boot_new[] = {82.5, 80.91874707156147, 78.35777811657763, 78.18516923949964, 81.42129167825094, 82.94146906432006, 80.13488855140662, 77.88069599467222, 79.09753935643192, 81.61899084663469};
/* stats.c's algorithm re-implemented in Python: 2000 iters, seed 42, level 0.95 */
static const double boot_same_algo[] = {0.7741896064017895, 0.8176388107857342};
/* scipy.stats.bootstrap percentile, 20000 resamples, numpy rng 0 */
static const double boot_scipy[] = {0.7749831773499011, 0.8176981415023752};
/* ---- end of golden values ---- */

/* |got - want| <= rel * |want| + abs_tol, with both numbers in the message */
static void near(double got, double want, double rel, double abs_tol, const char *what) {
    if (!(fabs(got - want) <= rel * fabs(want) + abs_tol)) {
        print_error("%s: got %.17g, want %.17g\n", what, got, want);
        fail();
    }
}

static void test_mann_whitney_matches_scipy(void **state) {
    (void)state;
    for (int i = 0; i < N_OF(mwu_cases); i++) {
        const mwu_case *c = &mwu_cases[i];
        vb_mwu r = vb_stats_mann_whitney(c->x, c->nx, c->y, c->ny);
        char what[64];
        snprintf(what, sizeof what, "case %d U", i);
        near(r.u, c->u, 0, 1e-9, what);
        snprintf(what, sizeof what, "case %d p", i);
        /* exact p-values are sums of the same probabilities scipy counts */
        near(r.p, c->p, c->exact ? 1e-12 : 1e-10, 1e-15, what);
        if (r.exact != c->exact) {
            print_error("case %d: exact %d, want %d\n", i, r.exact, c->exact);
            fail();
        }
    }
}

static void test_mann_whitney_symmetry_and_edges(void **state) {
    (void)state;
    /* swapping the samples keeps p and turns U1 into nx*ny - U1 */
    for (int i = 0; i < N_OF(mwu_cases); i++) {
        const mwu_case *c = &mwu_cases[i];
        vb_mwu a = vb_stats_mann_whitney(c->x, c->nx, c->y, c->ny);
        vb_mwu b = vb_stats_mann_whitney(c->y, c->ny, c->x, c->nx);
        near(b.p, a.p, 1e-12, 1e-15, "swapped p");
        near(b.u, (double)c->nx * c->ny - a.u, 0, 1e-9, "swapped U");
    }
    /* no samples: NaN, never a number */
    vb_mwu r = vb_stats_mann_whitney(mwu_x0, 0, mwu_y0, 5);
    assert_true(isnan(r.p));
    /* two completely separated samples of 8: the smallest exact p, 2 / C(16, 8) */
    double lo[8], hi[8];
    for (int i = 0; i < 8; i++) lo[i] = i, hi[i] = 100 + i;
    r = vb_stats_mann_whitney(lo, 8, hi, 8);
    assert_true(r.exact);
    near(r.p, 2.0 / 12870.0, 1e-12, 0, "separated 8 vs 8");
    /* the documented bound on the exact distribution's cost: 5 x 2001 pairs
     * (> 10000) go asymptotic even though one side is small */
    static double big[2001];
    for (int i = 0; i < 2001; i++) big[i] = i + 0.5;
    r = vb_stats_mann_whitney(lo, 5, big, 2001);
    assert_false(r.exact);
    r = vb_stats_mann_whitney(lo, 5, big, 2000);
    assert_true(r.exact);
}

static void test_t_quantile_matches_scipy(void **state) {
    (void)state;
    for (int i = 0; i < N_OF(t_cases); i++) {
        char what[64];
        snprintf(what, sizeof what, "t.ppf(%g, %d)", t_cases[i].p, t_cases[i].df);
        near(vb_stats_t_quantile(t_cases[i].p, t_cases[i].df), t_cases[i].q, 1e-9, 1e-15, what);
    }
    assert_true(vb_stats_t_quantile(0.5, 7) == 0);
    assert_true(isnan(vb_stats_t_quantile(0.975, 0)));
    assert_true(isnan(vb_stats_t_quantile(1.0, 5)));
}

static void test_norm_quantile_matches_scipy(void **state) {
    (void)state;
    for (int i = 0; i < N_OF(norm_cases); i++) {
        char what[64];
        snprintf(what, sizeof what, "norm.ppf(%g)", norm_cases[i].p);
        near(vb_stats_norm_quantile(norm_cases[i].p), norm_cases[i].q, 1e-12, 1e-15, what);
        near(vb_stats_norm_cdf(norm_cases[i].q), norm_cases[i].p, 1e-9, 1e-15, "norm.cdf(ppf(p))");
    }
    assert_true(isnan(vb_stats_norm_quantile(-0.1)));
}

static void test_descriptive_matches_numpy(void **state) {
    (void)state;
    int n = N_OF(desc_x);
    for (int i = 0; i < N_OF(desc_q); i++) {
        char what[64];
        snprintf(what, sizeof what, "percentile %g", desc_q[i]);
        near(vb_stats_percentile(desc_x, n, desc_q[i]), desc_pct[i], 1e-13, 0, what);
    }
    near(vb_stats_mean(desc_x, n), desc_ref[0], 1e-14, 0, "mean");
    near(vb_stats_median(desc_x, n), desc_ref[1], 1e-14, 0, "median");
    near(vb_stats_std(desc_x, n, 0), desc_ref[2], 1e-12, 0, "std ddof 0");
    near(vb_stats_std(desc_x, n, 1), desc_ref[3], 1e-12, 0, "std ddof 1");
    near(vb_stats_median(desc_x, 10), desc_median_even[0], 1e-14, 0, "median of an even count");
    near(vb_stats_min(desc_x, n), 498.7, 0, 0, "min");
    near(vb_stats_max(desc_x, n), 541.3, 0, 0, "max");
    vb_ci ci = vb_stats_mean_ci(desc_x, n, 0.95);
    near(ci.lo, desc_ci95[0], 1e-12, 0, "t interval low");
    near(ci.hi, desc_ci95[1], 1e-12, 0, "t interval high");
    /* the input is never reordered */
    assert_true(desc_x[0] == 523.1 && desc_x[1] == 498.7);
    /* n == 0: NaN; n <= ddof: 0; one value: a zero-width interval */
    assert_true(isnan(vb_stats_mean(desc_x, 0)) && isnan(vb_stats_median(desc_x, 0)));
    assert_true(isnan(vb_stats_std(desc_x, 0, 0)) && isnan(vb_stats_percentile(desc_x, 0, 50)));
    assert_true(vb_stats_std(desc_x, 1, 1) == 0);
    ci = vb_stats_mean_ci(desc_x, 1, 0.95);
    assert_true(ci.lo == desc_x[0] && ci.hi == desc_x[0]);
}

static void test_bootstrap_deterministic_and_close_to_scipy(void **state) {
    (void)state;
    int nb = N_OF(boot_base), nn = N_OF(boot_new);
    vb_ci a = vb_stats_bootstrap_median_ratio(boot_base, nb, boot_new, nn, 2000, 42, 0.95);
    vb_ci b = vb_stats_bootstrap_median_ratio(boot_base, nb, boot_new, nn, 2000, 42, 0.95);
    /* the same seed gives the same bits */
    assert_true(memcmp(&a, &b, sizeof a) == 0);
    /* the same draws as the Python re-implementation of the algorithm */
    near(a.lo, boot_same_algo[0], 1e-12, 0, "seeded bootstrap low");
    near(a.hi, boot_same_algo[1], 1e-12, 0, "seeded bootstrap high");
    /* and close to scipy's independent bootstrap (other RNG, 20000 resamples):
     * percentile bounds of 2000 resamples wander by well under 1% here */
    near(a.lo, boot_scipy[0], 0.01, 0, "bootstrap low vs scipy");
    near(a.hi, boot_scipy[1], 0.01, 0, "bootstrap high vs scipy");
    /* the point ratio of medians lies inside */
    double ratio = vb_stats_median(boot_new, nn) / vb_stats_median(boot_base, nb);
    assert_true(a.lo <= ratio && ratio <= a.hi);
    /* another seed: another, still close, interval */
    vb_ci c = vb_stats_bootstrap_median_ratio(boot_base, nb, boot_new, nn, 2000, 7, 0.95);
    assert_true(c.lo != a.lo || c.hi != a.hi);
    near(c.lo, boot_scipy[0], 0.01, 0, "seed 7 low vs scipy");
    /* a zero base median: undefined, NaN rather than inf */
    double zeros[3] = {0, 0, 0};
    vb_ci z = vb_stats_bootstrap_median_ratio(zeros, 3, boot_new, nn, 100, 1, 0.95);
    assert_true(isnan(z.lo) && isnan(z.hi));
}

/* vb_stats_summarize: the same numbers as the single functions, np.median's
 * midpoint for an even count, NaN for no samples. */
static void test_summary(void **state) {
    (void)state;
    int n = N_OF(desc_x);
    for (int ddof = 0; ddof <= 1; ddof++) {
        vb_stats_summary s = vb_stats_summarize(desc_x, n, ddof);
        assert_int_equal(s.n, n);
        /* bit for bit: callers print these where they printed their own */
        assert_true(s.mean == vb_stats_mean(desc_x, n));
        assert_true(s.std == vb_stats_std(desc_x, n, ddof));
        assert_true(s.min == vb_stats_min(desc_x, n) && s.max == vb_stats_max(desc_x, n));
        assert_true(s.median == vb_stats_median(desc_x, n)); /* odd count: the middle value */
        assert_true(s.p05 == vb_stats_percentile(desc_x, n, 5));
        assert_true(s.p95 == vb_stats_percentile(desc_x, n, 95));
        near(s.std, desc_ref[2 + ddof], 1e-12, 0, "summary std");
    }
    near(vb_stats_summarize(desc_x, 10, 0).median, desc_median_even[0], 1e-14, 0, "summary median, even count");
    /* even count, middle values a < b / 2: np.median gives (a + b) / 2 =
     * 2.0645000000000002, np.percentile(50) interpolates to 2.0645 */
    static const double pair[] = {3.487, 0.642, 9.0, 0.1};
    vb_stats_summary m = vb_stats_summarize(pair, 4, 0);
    assert_true(m.median == 0.5 * (0.642 + 3.487));
    assert_true(m.median == 2.0645000000000002);
    assert_true(vb_stats_median(pair, 4) == 2.0645);
    /* one value: everything is it, std 0 for either ddof */
    vb_stats_summary one = vb_stats_summarize(desc_x, 1, 1);
    assert_true(one.mean == 523.1 && one.median == 523.1 && one.min == 523.1 && one.max == 523.1);
    assert_true(one.p05 == 523.1 && one.p95 == 523.1 && one.std == 0);
    /* no samples */
    vb_stats_summary none = vb_stats_summarize(desc_x, 0, 0);
    assert_int_equal(none.n, 0);
    assert_true(isnan(none.mean) && isnan(none.std) && isnan(none.min) && isnan(none.max));
    assert_true(isnan(none.median) && isnan(none.p05) && isnan(none.p95));
    /* the input is never reordered */
    assert_true(pair[0] == 3.487 && pair[1] == 0.642);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mann_whitney_matches_scipy),
        cmocka_unit_test(test_mann_whitney_symmetry_and_edges),
        cmocka_unit_test(test_t_quantile_matches_scipy),
        cmocka_unit_test(test_norm_quantile_matches_scipy),
        cmocka_unit_test(test_descriptive_matches_numpy),
        cmocka_unit_test(test_bootstrap_deterministic_and_close_to_scipy),
        cmocka_unit_test(test_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
