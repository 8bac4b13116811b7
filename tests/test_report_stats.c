/* test_report_stats.c: the report's interval of a ratio of mean throughputs
 * (analysis/report_stats.c rp_ratio_of_means), as scaling efficiency and
 * flag and layout ratios use it: the delta method on the log scale.
 *   - a ratio of positive throughputs gets an interval above 0, however few
 *     and noisy the samples (two repeats ten-fold apart)
 *   - the interval is symmetric on the log scale around the ratio of means
 *   - its half width is t(0.975, Welch df) * sqrt(relative variance), by hand
 *   - a point against itself is exactly 1 with no width
 *   - a mean's interval is on the log scale too: samples scattered from 1 to
 *     200 give an interval above 0 (the linear t went far below)
 *   - with two or more runs the run is the unit: two runs whose trials are
 *     tight but whose means differ 20% get the interval of two samples, not
 *     of all their trials
 */
#include "tests/test_util.h"

#include <math.h>

#include "analysis/report.h"
#include "core/util/stats.h"

static rp_samples samples(const double *v, int n) {
    rp_samples s = {0};
    for (int i = 0; i < n; i++) rp_push(&s, v[i]);
    return s;
}

static void test_noisy_ratio_stays_positive(void **state) {
    (void)state;
    const double a[] = {0.1, 1.9}, b[] = {1.0, 1.0};
    rp_samples num = samples(a, 2), den = samples(b, 2);
    rp_est e = rp_ratio_of_means(&num, &den);
    assert_true(fabs(e.mean - 1.0) < 1e-12);
    assert_true(e.lo > 0);
    assert_true(e.lo < e.mean && e.mean < e.hi);
    /* log-symmetric: mean / lo == hi / mean */
    assert_true(fabs(log(e.mean / e.lo) - log(e.hi / e.mean)) < 1e-12);
    rp_samples_free(&num);
    rp_samples_free(&den);
}

static void test_half_width_by_hand(void **state) {
    (void)state;
    const double a[] = {90, 100, 110}, b[] = {48, 50, 52, 50};
    rp_samples num = samples(a, 3), den = samples(b, 4);
    rp_est e = rp_ratio_of_means(&num, &den);
    const double mx = 100, my = 50;
    const double sx = 10, sy = sqrt(8.0 / 3.0); /* sample standard deviations */
    const double ax = sx * sx / 3 / (mx * mx), ay = sy * sy / 4 / (my * my);
    const double df = (ax + ay) * (ax + ay) / (ax * ax / 2 + ay * ay / 3);
    const double half = vb_stats_t_quantile(0.975, (int)floor(df)) * sqrt(ax + ay);
    assert_true(fabs(e.mean - 2.0) < 1e-12);
    assert_true(fabs(e.lo - 2.0 * exp(-half)) < 1e-12);
    assert_true(fabs(e.hi - 2.0 * exp(half)) < 1e-12);
    rp_samples_free(&num);
    rp_samples_free(&den);
}

static void test_point_against_itself(void **state) {
    (void)state;
    const double a[] = {3, 5, 4};
    rp_samples s = samples(a, 3);
    rp_est e = rp_ratio_of_means(&s, &s);
    assert_true(e.mean == 1.0 && e.lo == 1.0 && e.hi == 1.0);
    rp_samples_free(&s);
}

static void test_mean_interval_positive(void **state) {
    (void)state;
    const double a[] = {1, 200, 3, 150};
    rp_samples s = samples(a, 4);
    rp_est e = rp_mean_est(&s);
    assert_true(e.lo > 0 && e.lo < e.mean && e.mean < e.hi);
    rp_samples_free(&s);
}

static void test_runs_are_the_unit(void **state) {
    (void)state;
    rp_samples s = {0};
    for (int k = 0; k < 10; k++) rp_push_run(&s, 100 + 0.01 * k, 0);
    for (int k = 0; k < 10; k++) rp_push_run(&s, 120 + 0.01 * k, 1);
    assert_int_equal(rp_samples_runs(&s), 2);
    rp_est e = rp_mean_est(&s);
    assert_int_equal(e.runs, 2);
    /* two run means, 100.045 and 120.045: t(0.975, 1) = 12.706 */
    const double m = 110.045, se = 10.0; /* sd 20 / sqrt(2), over sqrt(2) runs */
    const double h = vb_stats_t_quantile(0.975, 1) * se / m;
    assert_true(fabs(e.mean - m) < 1e-9);
    assert_true(fabs(e.lo - m * exp(-h)) < 1e-9);
    assert_true(fabs(e.hi - m * exp(h)) < 1e-9);
    rp_samples_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_noisy_ratio_stays_positive),
        cmocka_unit_test(test_half_width_by_hand),
        cmocka_unit_test(test_point_against_itself),
        cmocka_unit_test(test_mean_interval_positive),
        cmocka_unit_test(test_runs_are_the_unit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
