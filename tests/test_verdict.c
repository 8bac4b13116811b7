/* test_verdict.c: the one verdict rule (analysis/verdict.h) that compare,
 * the report and perf_ci.sh share.
 *   - four outcomes: identical repeats are equivalent; identical single runs
 *     are inconclusive (run-to-run spread unknown), never equivalent; a 30%
 *     drop on single runs is far enough beyond the floor to be slower; a
 *     time that grows is slower, one that shrinks faster
 *   - the interval by hand: run centres are log medians, Welch t on them
 *   - the interval never reaches 0, and it and p agree: the interval lies
 *     beyond 1 only when p < alpha
 *   - fewer than 5 samples a side: inconclusive, however large the effect
 *   - load: equal load on both sides is not read as none (a busy side's
 *     run-to-run sd is at least VB_VERDICT_LOAD_SD x s / (1 - s), so three
 *     runs a side that agree by chance under load decide nothing, while an
 *     effect beyond that spread still does); the difference of the sides'
 *     recorded load widens the interval further; a busy single run widens
 *     it by its trials' spread on top of its load's sd
 *   - an interval that reaches across the threshold is inconclusive
 *   - the centre (vb_verdict_centre): the geometric mean of run medians
 */
#include "tests/test_util.h"

#include <math.h>
#include <string.h>

#include "analysis/verdict.h"
#include "core/util/stats.h"

/* n runs of m trials: run r's trials are base * drift[r] * (1 + 0.002 (k - m/2)) */
static void make_runs(double *v, int *run, int nruns, int m, double base, const double *drift) {
    for (int r = 0; r < nruns; r++)
        for (int k = 0; k < m; k++) {
            v[r * m + k] = base * drift[r] * (1 + 0.002 * (k - m / 2));
            run[r * m + k] = r;
        }
}

static const double k_drift[] = {1, 1.02, 0.98, 1.01, 0.99, 1.015, 0.985, 1.005};

/* two sides of 5 runs of 8 trials around 100, their runs drifting 2% apart */
typedef struct {
    double a[40], b[40];
    int ra[40], rb[40];
} two_sides;

static void make_two_sides(two_sides *t) {
    make_runs(t->a, t->ra, 5, 8, 100, k_drift);
    make_runs(t->b, t->rb, 5, 8, 100, k_drift + 1);
}

static void test_four_outcomes(void **state) {
    (void)state;
    two_sides t;
    make_two_sides(&t);
    const double *a = t.a;
    vb_verdict_opts o = vb_verdict_defaults(true);
    vb_verdict_side sa = {t.a, t.ra, 40, NAN, NULL}, sb = {t.b, t.rb, 40, NAN, NULL};
    vb_verdict v = vb_verdict_judge(&sa, &sb, &o);
    assert_int_equal(v.kind, VB_VERDICT_EQUIVALENT);
    assert_int_equal(v.runs_base, 5);
    assert_int_equal(v.run_sd_source, VB_RUNSD_MEASURED);
    assert_true(v.ci.lo >= 0.95 && v.ci.hi <= 1.05);

    /* one run a side, identical: no spread between runs to go on */
    vb_verdict_side s1 = {a, NULL, 8, NAN, NULL}, s2 = {a, NULL, 8, NAN, NULL};
    v = vb_verdict_judge(&s1, &s2, &o);
    assert_int_equal(v.kind, VB_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.why, VB_WHY_ONE_RUN);
    char why[400];
    assert_non_null(strstr(vb_verdict_reason(&v, why, sizeof why), "one run a side"));

    /* a 30% drop on single runs: beyond the floor's interval */
    double c[8];
    for (int i = 0; i < 8; i++) c[i] = a[i] * 0.7;
    vb_verdict_side s3 = {c, NULL, 8, NAN, NULL};
    v = vb_verdict_judge(&s1, &s3, &o);
    assert_int_equal(v.kind, VB_VERDICT_WORSE);
    assert_true(v.ci.hi < 0.95 && v.p < 0.05);

    /* times: lower is better */
    vb_verdict_opts ot = vb_verdict_defaults(false);
    v = vb_verdict_judge(&s1, &s3, &ot);
    assert_int_equal(v.kind, VB_VERDICT_BETTER);
    v = vb_verdict_judge(&s3, &s1, &ot);
    assert_int_equal(v.kind, VB_VERDICT_WORSE);
}

static void test_interval_by_hand(void **state) {
    (void)state;
    /* three runs a side of one trial each: the centres are the values */
    const double a[] = {100, 104, 98}, b[] = {90, 95, 91};
    const int ra[] = {0, 1, 2}, rb[] = {0, 1, 2};
    /* padded to five samples a side with repeats inside the same runs, so
     * the medians (centres) stay the values above */
    double a5[] = {100, 100, 104, 104, 98}, b5[] = {90, 90, 95, 95, 91};
    int ra5[] = {0, 0, 1, 1, 2}, rb5[] = {0, 0, 1, 1, 2};
    (void)ra, (void)rb;
    vb_verdict_opts o = vb_verdict_defaults(true);
    vb_verdict_side sa = {a5, ra5, 5, NAN, NULL}, sb = {b5, rb5, 5, NAN, NULL};
    vb_verdict v = vb_verdict_judge(&sa, &sb, &o);
    double la[3], lb[3];
    for (int i = 0; i < 3; i++) la[i] = log(a[i]), lb[i] = log(b[i]);
    const double ma = vb_stats_mean(la, 3), mb = vb_stats_mean(lb, 3);
    const double va = pow(vb_stats_std(la, 3, 1), 2) / 3, vbv = pow(vb_stats_std(lb, 3, 1), 2) / 3;
    const double df = (va + vbv) * (va + vbv) / (va * va / 2 + vbv * vbv / 2);
    const double h = vb_stats_t_quantile(0.975, (int)floor(df)) * sqrt(va + vbv);
    assert_true(fabs(v.ratio - exp(mb - ma)) < 1e-12);
    assert_true(fabs(v.df - df) < 1e-9);
    assert_true(fabs(v.ci.lo - exp(mb - ma - h)) < 1e-12);
    assert_true(fabs(v.ci.hi - exp(mb - ma + h)) < 1e-12);
    assert_true(fabs(v.p - 2 * vb_stats_t_sf(fabs(mb - ma) / sqrt(va + vbv), df)) < 1e-12);
}

/* a small deterministic generator for the agreement check */
static double uni(unsigned long long *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((*s >> 11) + 0.5) / 9007199254740992.0;
}

static void test_interval_positive_and_agrees_with_p(void **state) {
    (void)state;
    unsigned long long seed = 7;
    vb_verdict_opts o = vb_verdict_defaults(true);
    for (int trial = 0; trial < 400; trial++) {
        double a[12], b[12];
        int ra[12], rb[12];
        const int nruns = 1 + trial % 4, m = 12 / nruns;
        const double shift = 0.6 + 0.8 * uni(&seed), spread = 0.01 + 0.6 * uni(&seed);
        for (int i = 0; i < nruns * m; i++) {
            a[i] = 100 * exp(spread * (uni(&seed) - 0.5));
            b[i] = 100 * shift * exp(spread * (uni(&seed) - 0.5));
            ra[i] = rb[i] = i / m;
        }
        vb_verdict_side sa = {a, ra, nruns * m, NAN, NULL}, sb = {b, rb, nruns * m, NAN, NULL};
        const vb_verdict v = vb_verdict_judge(&sa, &sb, &o);
        assert_true(v.ci.lo > 0 && v.ci.lo <= v.ratio && v.ratio <= v.ci.hi);
        if (v.ci.lo > 1 || v.ci.hi < 1) assert_true(v.p < o.alpha);
        if (v.kind == VB_VERDICT_BETTER) assert_true(v.ci.lo > 1 + o.threshold);
        if (v.kind == VB_VERDICT_WORSE) assert_true(v.ci.hi < 1 - o.threshold);
        if (v.kind == VB_VERDICT_EQUIVALENT) assert_true(v.ci.lo >= 1 - o.threshold && v.ci.hi <= 1 + o.threshold);
    }
}

static void test_few_samples(void **state) {
    (void)state;
    const double a[] = {100, 101, 99, 100}, b[] = {50, 51, 49, 50};
    vb_verdict_opts o = vb_verdict_defaults(true);
    vb_verdict_side sa = {a, NULL, 4, NAN, NULL}, sb = {b, NULL, 4, NAN, NULL};
    vb_verdict v = vb_verdict_judge(&sa, &sb, &o);
    assert_int_equal(v.kind, VB_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.why, VB_WHY_FEW_SAMPLES);
    vb_verdict_side none = {a, NULL, 0, NAN, NULL};
    assert_int_equal(vb_verdict_judge(&none, &sb, &o).kind, VB_VERDICT_NO_SAMPLES);
}

static void test_load(void **state) {
    (void)state;
    two_sides t;
    make_two_sides(&t);
    const double *a = t.a;
    vb_verdict_opts o = vb_verdict_defaults(true);
    /* the same load on both sides: identical runs agreeing within 2% are no
     * evidence of equivalence when runs under a 40% load spread by
     * 0.4 x 0.4 / 0.6 in log */
    vb_verdict_side sa = {t.a, t.ra, 40, 0.4, NULL}, sb = {t.b, t.rb, 40, 0.4, NULL};
    vb_verdict v = vb_verdict_judge(&sa, &sb, &o);
    assert_int_equal(v.kind, VB_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.why, VB_WHY_BUSY);
    assert_true(v.noise == 0);
    assert_true(fabs(v.load_sd - VB_VERDICT_LOAD_SD * 0.4 / 0.6) < 1e-12);
    assert_true(v.busy_base && v.busy_new);
    assert_true(v.ci_runs.lo >= 0.95 && v.ci_runs.hi <= 1.05); /* the runs alone: equivalent */
    /* the interval by hand: each side's run variance floored, Welch t */
    const double f2 = pow(VB_VERDICT_LOAD_SD * 0.4 / 0.6, 2), se = sqrt(f2 / 5 + f2 / 5);
    const double h = vb_stats_t_quantile(0.975, (int)floor(v.df)) * se;
    assert_true(fabs(v.df - 8) < 1e-9);
    assert_true(fabs(log(v.ci.hi / v.ratio) - h) < 1e-9);
    /* under a quiet machine's load the same runs are equivalent */
    sa.load = sb.load = 0.02;
    assert_int_equal(vb_verdict_judge(&sa, &sb, &o).kind, VB_VERDICT_EQUIVALENT);

    /* three runs a side that agree by chance under a 50% load, 25% apart:
     * the runs alone would say slower (p < 0.05); under that load nothing */
    double x[24], y[24];
    int rx[24], ry[24];
    make_runs(x, rx, 3, 8, 100, k_drift);
    make_runs(y, ry, 3, 8, 75, k_drift + 1);
    vb_verdict_side bx = {x, rx, 24, 0.5, NULL}, by = {y, ry, 24, 0.5, NULL};
    v = vb_verdict_judge(&bx, &by, &o);
    assert_int_equal(v.kind, VB_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.why, VB_WHY_BUSY);
    assert_true(v.ci_runs.hi < 0.95 && v.ci.hi > 1);
    /* ... while five times slower clears even that */
    for (int i = 0; i < 24; i++) y[i] /= 3.75; /* 100 -> 20 */
    assert_int_equal(vb_verdict_judge(&bx, &by, &o).kind, VB_VERDICT_WORSE);

    /* a busy BASE (40%) against a quiet NEW (2%): BASE's floor, and 1/0.6
     * against 1/0.98 on top */
    sa.load = 0.4, sb.load = 0.02;
    v = vb_verdict_judge(&sa, &sb, &o);
    assert_int_equal(v.kind, VB_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.why, VB_WHY_BUSY);
    assert_true(v.load_differs);
    assert_true(fabs(v.noise - (1 / 0.6 - 1 / 0.98) / (1 / 0.98)) < 1e-12);
    /* a single busy run against a quiet one: its load's sd (0.4 at 50%)
     * stands for the unknown run-to-run spread; a 30% drop does not clear
     * it, and on a quiet machine it does */
    double c[8];
    for (int i = 0; i < 8; i++) c[i] = a[i] * 0.7;
    vb_verdict_side s1 = {a, NULL, 8, 0.5, NULL}, s3 = {c, NULL, 8, 0.01, NULL};
    v = vb_verdict_judge(&s1, &s3, &o);
    assert_int_equal(v.kind, VB_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.why, VB_WHY_BUSY);
    assert_true(fabs(v.run_sd - VB_VERDICT_LOAD_SD) < 1e-12); /* 0.4 x 0.5 / 0.5 */
    s1.load = 0.01;
    assert_int_equal(vb_verdict_judge(&s1, &s3, &o).kind, VB_VERDICT_WORSE);
}

/* Paired rounds: runs that drift 10% from round to round, both sides alike
 * in each round (the neighbours' load, the host's speed), are equivalent
 * paired and cannot be told unpaired; a 20% drop paired is slower; fewer
 * than VB_VERDICT_MIN_PAIRS rounds decide nothing; a busy round's
 * difference sd is floored. */
static void test_paired(void **state) {
    (void)state;
    static const double drift[] = {1, 1.1, 0.9, 1.05, 0.95, 1.12, 0.88, 1.0};
    static const double jitter[] = {1.002, 0.998, 1.001, 0.999, 1.0, 1.003, 0.997, 1.001};
    double a[64], b[64];
    int ra[64], rb[64], rda[64], rdb[64];
    for (int r = 0; r < 8; r++)
        for (int k = 0; k < 8; k++) {
            const int i = r * 8 + k;
            a[i] = 100 * drift[r] * (1 + 0.001 * k);
            b[i] = 100 * drift[r] * jitter[r] * (1 + 0.001 * k);
            ra[i] = rb[i] = r;
            rda[i] = rdb[i] = r; /* run r ran in round r on both sides */
        }
    vb_verdict_opts o = vb_verdict_defaults(true);
    vb_verdict_side sa = {a, ra, 64, NAN, rda}, sb = {b, rb, 64, NAN, rdb};
    vb_verdict v = vb_verdict_judge(&sa, &sb, &o);
    assert_int_equal(v.kind, VB_VERDICT_INCONCLUSIVE); /* unpaired: the drift hides everything */
    assert_int_equal(v.pairs, 0);
    o.paired = true;
    v = vb_verdict_judge(&sa, &sb, &o);
    assert_int_equal(v.kind, VB_VERDICT_EQUIVALENT);
    assert_int_equal(v.pairs, 8);
    assert_true(fabs(v.df - 7) < 1e-12);
    for (int i = 0; i < 64; i++) b[i] *= 0.8;
    assert_int_equal(vb_verdict_judge(&sa, &sb, &o).kind, VB_VERDICT_WORSE);
    /* four rounds: nothing */
    vb_verdict_side s4a = {a, ra, 32, NAN, rda}, s4b = {b, rb, 32, NAN, rdb};
    v = vb_verdict_judge(&s4a, &s4b, &o);
    assert_int_equal(v.kind, VB_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.why, VB_WHY_FEW_SAMPLES);
    /* under a 50% load the rounds' difference spread is at least the floor */
    for (int i = 0; i < 64; i++) b[i] /= 0.8;
    sa.load = sb.load = 0.5;
    v = vb_verdict_judge(&sa, &sb, &o);
    assert_true(fabs(v.load_sd - VB_VERDICT_LOAD_SD_PAIRED) < 1e-12);
    assert_int_equal(v.kind, VB_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.why, VB_WHY_BUSY);
}

static void test_straddles(void **state) {
    (void)state;
    double a[40], b[40];
    int ra[40], rb[40];
    /* runs 15% apart around a 4% drop: too wide to be equivalent or slower */
    static const double wide[] = {1, 1.15, 0.85, 1.1, 0.9};
    make_runs(a, ra, 5, 8, 100, k_drift);
    make_runs(b, rb, 5, 8, 96, wide);
    vb_verdict_opts o = vb_verdict_defaults(true);
    vb_verdict_side sa = {a, ra, 40, NAN, NULL}, sb = {b, rb, 40, NAN, NULL};
    vb_verdict v = vb_verdict_judge(&sa, &sb, &o);
    assert_int_equal(v.kind, VB_VERDICT_INCONCLUSIVE);
    assert_int_equal(v.why, VB_WHY_STRADDLES);
    assert_true(v.ci.lo < 0.95 && v.ci.hi > 1);
}

/* the centre a history row records: exp(mean of log run medians) */
static void test_centre(void **state) {
    (void)state;
    const double v[] = {1, 2, 100, 4};
    const int run[] = {0, 0, 0, 1};
    const vb_verdict_side s = {v, run, 4, NAN, NULL};
    assert_true(fabs(vb_verdict_centre(&s) - sqrt(8)) < 1e-12); /* medians 2 and 4 */
    const vb_verdict_side one = {v, NULL, 3, NAN, NULL};
    assert_true(fabs(vb_verdict_centre(&one) - 2) < 1e-12); /* one run: its median */
    const vb_verdict_side none = {v, NULL, 0, NAN, NULL};
    assert_true(isnan(vb_verdict_centre(&none)));
    const double bad[] = {1, -1};
    const vb_verdict_side neg = {bad, NULL, 2, NAN, NULL};
    assert_true(isnan(vb_verdict_centre(&neg)));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_four_outcomes),
        cmocka_unit_test(test_interval_by_hand),
        cmocka_unit_test(test_interval_positive_and_agrees_with_p),
        cmocka_unit_test(test_few_samples),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_straddles),
        cmocka_unit_test(test_paired),
        cmocka_unit_test(test_centre),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
