/* test_report_stats.c: the report's interval of a ratio of mean throughputs
 * (analysis/report_stats.c rp_ratio_of_means), as scaling efficiency and
 * flag and layout ratios use it: the delta method on the log scale.
 *   - a ratio of positive throughputs gets an interval above 0, however few
 *     and noisy the samples (two repeats ten-fold apart)
 *   - the interval is symmetric on the log scale around the ratio of means
 *   - its half width is t(0.975, Welch df) * sqrt(relative variance), by hand
 *   - a point against itself is exactly 1 with no width
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_noisy_ratio_stays_positive),
        cmocka_unit_test(test_half_width_by_hand),
        cmocka_unit_test(test_point_against_itself),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
