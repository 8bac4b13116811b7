/* test_nonfinite.c: non-finite numbers are reported, not carried.
 *
 * The vitbench binary runs on a small generated dataset into which single
 * NaN / Inf values are written with the HDF5 C API (and stats files with a
 * zero, denormal or NaN entry): each must end the run with exit 2 and one
 * line naming the file, the sample and the channel, run.json "failed". A
 * loss that turns non-finite on finite data (a huge lr) is a training
 * failure: exit 1, one line with the step and the lr. */
#include "tests/test_util.h"

#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"
#include "core/data/data.h"

static char g_dir[256];

/* 2 train years x 16 samples of 4 channels 32x64 = 4 batches of 8 per epoch */
static int setup_group(void **state) {
    (void)state;
    tu_tmpdir(g_dir, sizeof g_dir, "nonfinite");
    char out[4096];
    int rc = tu_run(out, sizeof out,
                    "cd '%s' && '%s' datagen --output_dir data --years 2 --valid_years 1 --samples_per_year 16 "
                    "--channels 4 --img_size 32,64 --seed 5",
                    g_dir, tu_vitbench());
    if (rc != 0) fprintf(stderr, "datagen: %s\n", out);
    return rc;
}

static int teardown_group(void **state) {
    (void)state;
    tu_rm_rf(g_dir);
    return 0;
}

/* A fresh copy of the dataset as <g_dir>/<name>; returns its path in out. */
static void copy_data(const char *name, char *out, size_t n) {
    snprintf(out, n, "%s/%s", g_dir, name);
    assert_int_equal(tu_run(NULL, 0, "rm -rf '%s' && cp -r '%s/data' '%s'", out, g_dir, out), 0);
}

/* stats file entry c = v (the [1, 4, 1, 1] float32 .npy datagen writes) */
static void poke_stat(const char *file, int c, float v) {
    float x[4];
    vb_npy_load_stats(file, 4, x);
    x[c] = v;
    const int shape[4] = {1, 4, 1, 1};
    assert_int_equal(vb_npy_save_f32(file, x, shape, 4), 0);
}

/* Runs `vitbench <cmd>` on dataset `data` with the tiny config, stderr
 * kept apart; returns the exit status, *err the stderr text, status the
 * run.json status (run name "r"; "" without one). */
static int run_vb(const char *data, const char *cmd, const char *extra, char **err, char status[64]) {
    char out[8192];
    int rc = tu_run(out, sizeof out,
                    "cd '%s' && rm -rf out && (OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 '%s' %s "
                    "--yaml_config '%s/scenarios/vit.yaml' --config tiny --train_data_path %s/train "
                    "--valid_data_path %s/valid --global_means_path %s/stats/global_means.npy "
                    "--global_stds_path %s/stats/global_stds.npy --output_dir out --run_name r %s "
                    "> stdout.txt 2> stderr.txt)",
                    g_dir, tu_vitbench(), cmd, tu_source_dir(), data, data, data, data, extra);
    char path[512];
    snprintf(path, sizeof path, "%s/stderr.txt", g_dir);
    *err = tu_read_file(path);
    status[0] = '\0';
    snprintf(path, sizeof path, "%s/out/r/run.json", g_dir);
    char *rj = tu_read_file(path);
    const char *p = rj ? strstr(rj, "\"status\":") : NULL;
    if (p) sscanf(p, "\"status\": \"%63[^\"]\"", status);
    if (p && !status[0]) sscanf(p, "\"status\":\t\"%63[^\"]\"", status);
    free(rj);
    return rc;
}

/* exit `want`, ONE stderr line "vitbench: error: ..." holding every needle
 * (after any warnings, e.g. benchy's nbatches capped at an epoch) */
static void expect_one_line(int rc, int want, char *all, const char *const *needles) {
    if (rc != want) fprintf(stderr, "exit %d, want %d; stderr: <<%s>>\n", rc, want, all ? all : "");
    assert_int_equal(rc, want);
    assert_non_null(all);
    const char *err = all;
    while (strncmp(err, "vitbench: warning: ", 19) == 0 && strchr(err, '\n')) err = strchr(err, '\n') + 1;
    if (strncmp(err, "vitbench: error: ", 17) != 0) fprintf(stderr, "stderr: <<%s>>\n", err);
    assert_true(strncmp(err, "vitbench: error: ", 17) == 0);
    const char *nl = strchr(err, '\n');
    assert_non_null(nl);
    if (nl[1] != '\0') fprintf(stderr, "more than one line: <<%s>>\n", err);
    assert_true(nl[1] == '\0');
    for (const char *const *n = needles; *n; n++) {
        if (!strstr(err, *n)) fprintf(stderr, "missing '%s' in <<%s>>\n", *n, err);
        assert_non_null(strstr(err, *n));
    }
}

static void test_nan_in_train_data(void **state) {
    (void)state;
    char data[400], file[600], status[64], *err = NULL;
    copy_data("nan_train", data, sizeof data);
    snprintf(file, sizeof file, "%s/train/2001.h5", data);
    tu_h5_poke_field(file, 5, 2, 3, 4, NAN);
    const char *needles[] = {"train/2001.h5", "is nan", "channel 2", "sample", ", 2, 3, 4]", NULL};
    /* train: the first epoch reads every sample */
    int rc = run_vb("nan_train", "train", "--num_iters 4", &err, status);
    expect_one_line(rc, 2, err, needles);
    assert_string_equal(status, "failed");
    free(err);
    /* run: benchy's trials read it as well (it used to pass silently) */
    rc = run_vb("nan_train", "run", "", &err, status);
    expect_one_line(rc, 2, err, needles);
    assert_string_equal(status, "failed");
    free(err);
}

/* validation used to report "Avg val loss=nan" and complete */
static void test_inf_in_valid_data(void **state) {
    (void)state;
    char data[400], file[600], status[64], *err = NULL;
    copy_data("inf_valid", data, sizeof data);
    snprintf(file, sizeof file, "%s/valid/2002.h5", data);
    tu_h5_poke_field(file, 7, 0, 31, 63, -INFINITY);
    const char *needles[] = {"valid/2002.h5", "is inf", "channel 0", "sample", NULL};
    int rc = run_vb("inf_valid", "train", "--num_iters 4", &err, status);
    expect_one_line(rc, 2, err, needles);
    assert_string_equal(status, "failed");
    free(err);
}

/* zero, denormal and NaN stds, a NaN mean: the file and channel, before any run directory */
static void test_bad_stats(void **state) {
    (void)state;
    struct {
        const char *name, *file;
        int c;
        float v;
        const char *needle;
    } cases[] = {
        {"std_zero", "global_stds.npy", 1, 0.0f, "std of channel 1 is 0"},
        {"std_denormal", "global_stds.npy", 3, 1e-40f, "std of channel 3 is"},
        {"std_nan", "global_stds.npy", 0, NAN, "channel 0"},
        {"mean_inf", "global_means.npy", 2, INFINITY, "channel 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char data[400], file[600], status[64], *err = NULL;
        copy_data(cases[i].name, data, sizeof data);
        snprintf(file, sizeof file, "%s/stats/%s", data, cases[i].file);
        poke_stat(file, cases[i].c, cases[i].v);
        const char *needles[] = {cases[i].file, cases[i].needle, NULL};
        int rc = run_vb(cases[i].name, "train", "--num_iters 1", &err, status);
        expect_one_line(rc, 2, err, needles);
        assert_string_equal(status, ""); /* checked before the run directory exists */
        free(err);
    }
}

/* finite data, absurd lr: a training failure naming the step and the lr */
static void test_divergence_is_a_failure(void **state) {
    (void)state;
    char status[64], *err = NULL;
    const char *needles[] = {"training diverged", "loss is nan at step", "with lr ", "e+", NULL};
    int rc = run_vb("data", "train", "--num_iters 8 --lr 1e30", &err, status);
    expect_one_line(rc, 1, err, needles);
    assert_string_equal(status, "failed");
    free(err);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nan_in_train_data),
        cmocka_unit_test(test_inf_in_valid_data),
        cmocka_unit_test(test_bad_stats),
        cmocka_unit_test(test_divergence_is_a_failure),
    };
    return cmocka_run_group_tests(tests, setup_group, teardown_group);
}
