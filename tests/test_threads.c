/* test_threads.c: the OpenMP team a run's probe picks (core/run/threads.h). */
#include "tests/test_util.h"

#include <math.h>
#include <string.h>

#include "core/run/threads.h"

/* The rule on the shares measured on the 2-core Xeon (threads.h): the team
 * keeps its threads until the other work is worth more than the slack. */
static void test_team_for_share(void **state) {
    (void)state;
    static const struct {
        int team;
        double wait;
        int want;
    } cases[] = {
        {2, 0.0, 2},       /* quiet */
        {2, 0.005, 2},     /* quiet, with the machine's own housekeeping */
        {2, 0.084, 2},     /* one 20% duty-cycle loop: 2 threads still 1.14x faster */
        {2, 0.184, 1},     /* two such loops: k 0.45, 2 threads no faster than 1 */
        {2, 0.5, 1},       /* one busy loop per core */
        {2, 0.9, 1},       /* never fewer than 1 */
        {16, 1.0 / 17, 15}, /* one busy neighbour on 16 cores: one thread gives way */
        {16, 2.0 / 18, 14},
        {16, 0.01, 16},
        {1, 0.5, 1},
        {0, 0.5, 1},       /* a team of none is one */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double k = -1;
        const int got = vb_threads_for_wait(cases[i].team, cases[i].wait, &k);
        if (got != cases[i].want)
            fail_msg("team %d, wait share %g: %d threads, want %d", cases[i].team, cases[i].wait, got, cases[i].want);
        if (cases[i].team >= 1) {
            const double want_k = cases[i].team * cases[i].wait / (1 - cases[i].wait);
            assert_true(fabs(k - want_k) <= 1e-12 * (1 + want_k));
        }
    }
}

/* A share that is no share leaves the team alone and implies nothing. */
static void test_share_not_measured(void **state) {
    (void)state;
    const double bad[] = {NAN, -0.1, 1.0, 1.5, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double k = 0;
        assert_int_equal(vb_threads_for_wait(4, bad[i], &k), 4);
        assert_true(isnan(k));
    }
    assert_int_equal(vb_threads_for_wait(4, 0.5, NULL), 1);
}

/* The line says what was chosen, what the probe saw and how to keep the
 * team; nothing when the team stands. */
static void test_describe(void **state) {
    (void)state;
    char line[512];
    vb_thread_choice kept = {2, 2, "probe", 0.01, 0.02, 0.05};
    vb_threads_describe(&kept, line, sizeof line);
    assert_string_equal(line, "");
    vb_thread_choice fixed = {2, 2, "fixed", NAN, NAN, 0};
    vb_threads_describe(&fixed, line, sizeof line);
    assert_string_equal(line, "");
    vb_thread_choice cut = {2, 1, "probe", 0.5, 2.0, 0.05};
    vb_threads_describe(&cut, line, sizeof line);
    assert_non_null(strstr(line, "1 OpenMP thread instead of 2"));
    assert_non_null(strstr(line, "waited 50% of a 50 ms probe"));
    assert_non_null(strstr(line, "about 2.0 CPUs of other work"));
    assert_non_null(strstr(line, "thread_policy fixed keeps 2"));
    assert_null(strchr(line, '\n'));
}

/* The probe measures: a share in [0, 1) where the kernel keeps schedstat. */
static void test_probe_measures(void **state) {
    (void)state;
    const double w = vb_threads_probe(2, 0.01);
    if (isnan(w)) skip();
    assert_true(w >= 0 && w < 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_team_for_share),
        cmocka_unit_test(test_share_not_measured),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_probe_measures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
