/* fuzz_trials: the one trials.csv reader (analysis/trials_csv.h) of report
 * and compare. The input is a run directory's trials.csv, and, after a form
 * feed byte, its iterations.csv (the steps seconds are checked against). The
 * reader reports by return value: nothing here may be rejected through
 * vb_die_input, and what it accepts must hold what it promises (finite,
 * positive rates; counts that fit). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/trials_csv.h"
#include "tests/fuzz/fuzz_util.h"

static void write_part(const char *dir, const char *name, const uint8_t *data, size_t size) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) abort();
}

static void load(const char *path, const uint8_t *data, size_t size) {
    (void)path;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/run", vb_fuzz_dir());
    char cmd[192];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0) abort();
    const uint8_t *ff = memchr(data, '\f', size);
    const size_t n1 = ff ? (size_t)(ff - data) : size;
    write_part(dir, "trials.csv", data, n1);
    if (ff)
        write_part(dir, "iterations.csv", ff + 1, size - n1 - 1);
    else {
        char it[192];
        snprintf(it, sizeof it, "%s/iterations.csv", dir);
        remove(it);
    }
    vb_trials t;
    char why[2048];
    if (vb_trials_read(dir, &t, why, sizeof why) == 0)
        for (int k = 0; k < VB_TRIAL_NKINDS; k++)
            for (int i = 0; i < t.n[k]; i++)
                if (!isfinite(t.rate[k][i]) || !(t.rate[k][i] > 0)) abort();
    vb_trials_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (vb_fuzz_run(data, size, ".csv", load)) abort(); /* must not exit(2) */
    return 0;
}
