/* test_plot.c: figures' data files keep every label as written: a label
 * ending in a backslash (a run or sweep value) is read back by gnuplot with
 * its backslash; one with a quote or a line break stays one field of one
 * record. The .dat is written before gnuplot runs; gnuplot itself reads it
 * back here (it is installed with the test dependencies). */
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/plot.h"
#include "core/util/outdir.h"

static void test_labels_round_trip_through_gnuplot(void **state) {
    (void)state;
    char dir[256], why[1024];
    tu_tmpdir(dir, sizeof dir, "plot_labels");
    vb_plot p;
    vb_plot_init(&p, "labels", "labels", "flag", "samples/s");
    p.categorical = p.dots = true;
    static const char *const labels[] = {"dir=C:\\\\runs\\\\", "a\\\\b", "say \"hi\"", "plain"};
    static const char *const want[] = {"dir=C:\\\\runs\\\\", "a\\\\b", "say 'hi'", "plain"};
    vb_plot_series *s = vb_plot_series_add(&p, "measured", false);
    for (int k = 0; k < 4; k++) vb_plot_point(s, k, 10.0 + k, NAN, NAN, labels[k]);
    vb_outdir out;
    assert_int_equal(vb_outdir_open(&out, dir, "", why, sizeof why), 0);
    (void)vb_plot_render(&out, &p, why, sizeof why); /* the .dat is written whether gnuplot runs or not */
    vb_outdir_close(&out);
    vb_plot_free(&p);

    /* gnuplot's own reading of the data file: one label per line */
    char out_text[8192];
    int rc = tu_run(out_text, sizeof out_text,
                    "cd '%s' && gnuplot -e \"set table 'read.txt'; plot 'labels.dat' index 0 using 1:2:5 with labels; "
                    "unset table\" && grep '^ *[0-9]' read.txt",
                    dir);
    assert_int_equal(rc, 0);
    char *line = out_text;
    for (int k = 0; k < 4; k++) {
        char *q1 = strchr(line, '"'), *q2 = q1 ? strrchr(strtok(q1, "\n"), '"') : NULL;
        assert_non_null(q1);
        assert_non_null(q2);
        *q2 = '\0';
        if (strcmp(q1 + 1, want[k]) != 0) fprintf(stderr, "label %d read back as <%s>, want <%s>\n", k, q1 + 1, want[k]);
        assert_string_equal(q1 + 1, want[k]);
        line = q2 + 2;
    }
    tu_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels_round_trip_through_gnuplot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
