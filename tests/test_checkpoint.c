/* test_checkpoint.c: HDF5 checkpoints round-trip bit-exactly, are laid out
 * like the PyTorch state_dict, bad files (NaN/Inf included) exit 2 naming file
 * and dataset, and a save that cannot be written exits 1 leaving no temporary. */
#include "tests/test_util.h"

#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/checkpoint.h"
#include "core/util/common.h"

static const vit_dims TINY = {.img_h = 8, .img_w = 16, .patch = 4, .cin = 3, .cout = 2,
                              .dim = 16, .depth = 2, .heads = 2, .ln_eps = 1e-6f};

typedef struct {
    char dir[256];
    char path[320]; /* the saved checkpoint */
    vit_model *m;
    vb_adam opt;
} fixture;

/* A model with non-trivial params and optimizer state (3 Adam steps on
 * random gradients), saved to <tmp>/ckpt.h5. The forked children below only
 * do file IO before dying, never an OpenMP region (libgomp is not fork-safe). */
static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    tu_tmpdir(f->dir, sizeof f->dir, "ckpt");
    snprintf(f->path, sizeof f->path, "%s/ckpt.h5", f->dir);
    f->m = vit_create(&TINY, NULL, 1, tu_ctx(), NULL);
    vit_init_weights(f->m, 42);
    vb_adam_init(&f->opt, f->m->nparams, tu_ctx());
    float *g = vb_malloc(f->m->nparams * sizeof(float));
    for (int t = 0; t < 3; t++) {
        tu_fill_uniform(g, f->m->nparams, -1, 1, 500 + (uint64_t)t);
        tu_h2d(tu_ctx(), f->m->grads, g, f->m->nparams * sizeof(float));
        vb_adam_step(&f->opt, f->m->params, f->m->params_act, f->m->grads, 1e-3f, NULL);
    }
    vb_free(g);
    vb_checkpoint_save(f->path, f->m, &f->opt);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    vb_adam_free(&f->opt);
    vit_destroy(f->m);
    tu_rm_rf(f->dir);
    free(f);
    return 0;
}

static void test_round_trip_bit_exact(void **state) {
    fixture *f = *state;
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp", f->path);
    assert_true(vb_file_exists(f->path));
    assert_false(vb_file_exists(tmp)); /* renamed into place */

    vit_model *m2 = vit_create(&TINY, NULL, 1, tu_ctx(), NULL);
    vit_init_weights(m2, 7);
    vb_adam opt2;
    vb_adam_init(&opt2, m2->nparams, tu_ctx());
    const size_t bytes = m2->nparams * sizeof(float);
    vb_ctx *ctx = tu_ctx();
    assert_true(tu_dev_cmp(ctx, m2->params, f->m->params, bytes) != 0);

    vb_checkpoint_load(f->path, m2, &opt2);
    assert_true(tu_dev_cmp(ctx, m2->params, f->m->params, bytes) == 0);
    assert_true(tu_dev_cmp(ctx, opt2.m, f->opt.m, bytes) == 0);
    assert_true(tu_dev_cmp(ctx, opt2.v, f->opt.v, bytes) == 0);
    assert_int_equal(opt2.step, 3);

    /* save the loaded state again: identical datasets (overwrites in place) */
    vb_checkpoint_save(f->path, m2, &opt2);
    vit_model *m3 = vit_create(&TINY, NULL, 1, tu_ctx(), NULL);
    vb_checkpoint_load(f->path, m3, NULL); /* no optimizer: params only */
    assert_true(tu_dev_cmp(ctx, m3->params, f->m->params, bytes) == 0);
    vit_destroy(m3);
    vb_adam_free(&opt2);
    vit_destroy(m2);
}

/* The file is what a PyTorch script expects: state_dict names and shapes. */
static void test_layout_is_state_dict(void **state) {
    fixture *f = *state;
    hid_t file = H5Fopen(f->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(file >= 0);
    struct { const char *name; int ndim; hsize_t dims[4]; } want[] = {
        {"patch_embed.proj.weight", 4, {16, 3, 4, 4}},
        {"pos_embed", 3, {1, 8, 16}},
        {"blocks.1.attn.q.weight", 2, {16, 16}},
        {"blocks.0.mlp.fc1.weight", 2, {64, 16}},
        {"blocks.0.mlp.fc2.bias", 1, {16}},
        {"head.weight", 2, {32, 16}},
        {"optimizer/exp_avg", 1, {(hsize_t)f->m->nparams}},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        hid_t ds = H5Dopen2(file, want[i].name, H5P_DEFAULT);
        if (ds < 0) fail_msg("dataset %s missing", want[i].name);
        hid_t sp = H5Dget_space(ds);
        hsize_t dims[4] = {0};
        assert_int_equal(H5Sget_simple_extent_ndims(sp), want[i].ndim);
        H5Sget_simple_extent_dims(sp, dims, NULL);
        for (int k = 0; k < want[i].ndim; k++) assert_int_equal(dims[k], want[i].dims[k]);
        hid_t ty = H5Dget_type(ds);
        assert_true(H5Tget_class(ty) == H5T_FLOAT && H5Tget_size(ty) == 4);
        H5Tclose(ty), H5Sclose(sp), H5Dclose(ds);
    }
    /* a tensor's values are the params at its offset */
    int qi = vit_find_tensor(f->m, "blocks.1.attn.q.weight");
    float q[256];
    hid_t ds = H5Dopen2(file, "blocks.1.attn.q.weight", H5P_DEFAULT);
    assert_true(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, q) >= 0);
    H5Dclose(ds);
    float *qwant = tu_download(tu_ctx(), f->m->params + f->m->tensors[qi].offset, 256);
    assert_memory_equal(q, qwant, sizeof q);
    vb_free(qwant);
    /* optimizer/step is an int64 scalar */
    ds = H5Dopen2(file, "optimizer/step", H5P_DEFAULT);
    assert_true(ds >= 0);
    hid_t sp = H5Dget_space(ds);
    assert_int_equal(H5Sget_simple_extent_ndims(sp), 0);
    int64_t step = 0;
    assert_true(H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &step) >= 0);
    assert_int_equal(step, 3);
    H5Sclose(sp), H5Dclose(ds);
    /* informational attributes */
    int depth = 0;
    hid_t at = H5Aopen(file, "depth", H5P_DEFAULT);
    assert_true(at >= 0);
    H5Aread(at, H5T_NATIVE_INT, &depth);
    H5Aclose(at);
    assert_int_equal(depth, 2);
    H5Fclose(file);
}

/* ---------------------------------------------------------------------------
 * bad files: exit 2, one line, naming the file and the dataset */

/* Copies the fixture's checkpoint to <dir>/<name> and returns its path. */
static void copy_ckpt(const fixture *f, const char *name, char *out, size_t n) {
    snprintf(out, n, "%s/%s", f->dir, name);
    char *cmd = NULL;
    assert_true(asprintf(&cmd, "cp '%s' '%s'", f->path, out) > 0);
    assert_int_equal(system(cmd), 0);
    free(cmd);
}

typedef struct {
    const fixture *f;
    const char *path;
    bool with_opt;
} load_args;

static void load_child(void *p) {
    const load_args *a = p;
    vb_adam opt = a->f->opt; /* same sizes; the child's copy-on-write memory */
    vb_checkpoint_load(a->path, a->f->m, a->with_opt ? &opt : NULL);
}

static void expect_load_dies(const fixture *f, const char *path, bool with_opt, const char *needle1,
                             const char *needle2) {
    load_args a = {f, path, with_opt};
    tu_expect_exit_all(2, (const char *const[]){needle1, needle2, NULL}, load_child, &a);
}

static void test_missing_dataset_exits_2(void **state) {
    fixture *f = *state;
    char path[400];
    copy_ckpt(f, "missing.h5", path, sizeof path);
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(file >= 0);
    assert_true(H5Ldelete(file, "blocks.1.mlp.fc2.bias", H5P_DEFAULT) >= 0);
    H5Fclose(file);
    expect_load_dies(f, path, true, "missing.h5", "'blocks.1.mlp.fc2.bias' missing");

    copy_ckpt(f, "missing_opt.h5", path, sizeof path);
    file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(H5Ldelete(file, "optimizer/exp_avg_sq", H5P_DEFAULT) >= 0);
    H5Fclose(file);
    expect_load_dies(f, path, true, "missing_opt.h5", "'optimizer/exp_avg_sq' missing");
}

static void test_wrong_shape_exits_2(void **state) {
    fixture *f = *state;
    char path[400];
    copy_ckpt(f, "shape.h5", path, sizeof path);
    /* head.weight transposed: same numel, wrong shape */
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(H5Ldelete(file, "head.weight", H5P_DEFAULT) >= 0);
    hsize_t dims[2] = {16, 32};
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t ds = H5Dcreate2(file, "head.weight", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(ds >= 0);
    H5Dclose(ds), H5Sclose(sp), H5Fclose(file);
    expect_load_dies(f, path, true, "shape.h5", "'head.weight' has shape [16, 32], expected [32, 16]");

    /* a deeper model's checkpoint: extra blocks are refused, not silently dropped */
    copy_ckpt(f, "extra.h5", path, sizeof path);
    file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t d1[1] = {16};
    sp = H5Screate_simple(1, d1, NULL);
    ds = H5Dcreate2(file, "blocks.2.norm1.weight", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds), H5Sclose(sp), H5Fclose(file);
    expect_load_dies(f, path, false, "extra.h5", "blocks.2.norm1.weight");
}

/* ---------------------------------------------------------------------------
 * amp_mode fp8: the delayed-scaling state travels with the checkpoint */

static vit_model *fp8_model(int history_len) {
    vit_model *m = vit_create(&TINY, NULL, 1, tu_ctx(), NULL);
    vit_init_weights(m, 42);
    const vit_fp8_recipe r = {.amax_history_len = history_len, .amax_compute_algo = VB_FP8_AMAX_MAX, .margin = 0};
    vit_fp8_enable(m, &r, NULL, NULL);
    return m;
}

typedef struct {
    const char *path;
    int history_len;
} fp8_load_args;

static void fp8_load_child(void *p) {
    const fp8_load_args *a = p;
    vb_checkpoint_load(a->path, fp8_model(a->history_len), NULL);
}

/* A run resumed from an fp8 checkpoint quantises with the scales and amax
 * history it stopped with (bit for bit), not with scale 1; a run in another
 * precision ignores them; a history of another length or a bad scale exits
 * 2 naming the dataset. */
static void test_fp8_state_round_trip(void **state) {
    fixture *f = *state;
    char path[400];
    snprintf(path, sizeof path, "%s/fp8.h5", f->dir);
    vit_model *m = fp8_model(4);
    const vit_fp8 *fp = m->fp8;
    const size_t nt = (size_t)fp->ntensors, nh = 4 * nt;
    float *scale = vb_malloc(nt * sizeof(float)), *hist = vb_malloc(nh * sizeof(float));
    for (size_t i = 0; i < nt; i++) scale[i] = 448.0f / (float)(i + 1);
    for (size_t i = 0; i < nh; i++) hist[i] = i % 7 == 0 ? 0.0f : 0.125f * (float)i;
    hist[3] = INFINITY; /* a NaN amax is recorded as +inf */
    tu_h2d(tu_ctx(), fp->scale, scale, nt * sizeof(float));
    tu_h2d(tu_ctx(), fp->history, hist, nh * sizeof(float));
    m->fp8->steps = 5;
    vb_checkpoint_save(path, m, NULL);

    vit_model *m2 = fp8_model(4);
    vb_checkpoint_load(path, m2, NULL);
    assert_true(tu_dev_cmp(tu_ctx(), m2->fp8->scale, scale, nt * sizeof(float)) == 0);
    assert_true(tu_dev_cmp(tu_ctx(), m2->fp8->history, hist, nh * sizeof(float)) == 0);
    assert_int_equal(m2->fp8->steps, 5);
    assert_true(tu_dev_cmp(tu_ctx(), m2->params, m->params, m->nparams * sizeof(float)) == 0);

    /* a float32 run loads the same file and ignores the fp8 group */
    vit_model *m3 = vit_create(&TINY, NULL, 1, tu_ctx(), NULL);
    vb_checkpoint_load(path, m3, NULL);
    assert_true(tu_dev_cmp(tu_ctx(), m3->params, m->params, m->nparams * sizeof(float)) == 0);
    vit_destroy(m3);

    /* another history length is refused, naming the dataset and the key */
    fp8_load_args a = {path, 3};
    tu_expect_exit_all(2, (const char *const[]){"fp8.h5", "fp8/amax_history", "fp8_amax_history_len", NULL},
                       fp8_load_child, &a);
    /* a scale that is not finite and positive is refused */
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t ds = H5Dopen2(file, "fp8/scale", H5P_DEFAULT);
    scale[2] = 0.0f;
    assert_true(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, scale) >= 0);
    H5Dclose(ds), H5Fclose(file);
    a.history_len = 4;
    tu_expect_exit_all(2, (const char *const[]){"fp8.h5", "'fp8/scale' holds 0 at element 2", NULL}, fp8_load_child,
                       &a);
    vb_free(scale), vb_free(hist);
    vit_destroy(m2);
    vit_destroy(m);
}

static void test_missing_or_bad_file_exits_2(void **state) {
    fixture *f = *state;
    char path[400];
    snprintf(path, sizeof path, "%s/nonexistent.h5", f->dir);
    expect_load_dies(f, path, true, "nonexistent.h5", "no such file");
    /* a directory is named as one, not reported missing */
    snprintf(path, sizeof path, "%s/dir.h5", f->dir);
    assert_int_equal(mkdir(path, 0775), 0);
    expect_load_dies(f, path, true, "dir.h5", "a directory, not a regular file");
    rmdir(path);
    snprintf(path, sizeof path, "%s/garbage.h5", f->dir);
    FILE *g = fopen(path, "w");
    fputs("this is not an hdf5 file\n", g);
    fclose(g);
    expect_load_dies(f, path, true, "garbage.h5", "not an HDF5 file");
}

/* A PyTorch-written init checkpoint has no optimizer group: params load,
 * the optimizer stays fresh. */
static void test_params_only_checkpoint(void **state) {
    fixture *f = *state;
    char path[400];
    copy_ckpt(f, "params_only.h5", path, sizeof path);
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(H5Ldelete(file, "optimizer", H5P_DEFAULT) >= 0);
    H5Fclose(file);
    vit_model *m2 = vit_create(&TINY, NULL, 1, tu_ctx(), NULL);
    vb_adam opt2;
    vb_adam_init(&opt2, m2->nparams, tu_ctx());
    vb_checkpoint_load(path, m2, &opt2);
    assert_true(tu_dev_cmp(tu_ctx(), m2->params, f->m->params, m2->nparams * sizeof(float)) == 0);
    assert_int_equal(opt2.step, 0);
    float *mh = tu_download(tu_ctx(), opt2.m, opt2.n), *vh = tu_download(tu_ctx(), opt2.v, opt2.n);
    for (size_t i = 0; i < opt2.n; i++) assert_true(mh[i] == 0.0f && vh[i] == 0.0f);
    vb_free(mh), vb_free(vh);
    vb_adam_free(&opt2);
    vit_destroy(m2);
}

/* Runs fn in a child and checks an environment failure: exit 1, ONE
 * "vitbench: error: " line holding every needle. */
static void expect_env_failure(tu_child_fn fn, void *ctx, const char *const *needles) {
    char *err = NULL;
    int rc = tu_run_child(fn, ctx, 30, &err);
    if (rc != 1) fprintf(stderr, "child exited %d, want 1; stderr: <<%s>>\n", rc, err ? err : "");
    assert_int_equal(rc, 1);
    assert_non_null(err);
    assert_true(strncmp(err, "vitbench: error: ", 17) == 0);
    assert_non_null(strchr(err, '\n'));
    assert_true(strchr(err, '\n')[1] == '\0'); /* one line */
    for (const char *const *n = needles; *n; n++) {
        if (!strstr(err, *n)) fprintf(stderr, "missing '%s' in <<%s>>\n", *n, err);
        assert_non_null(strstr(err, *n));
    }
    free(err);
}

/* No file of the save is left in dir but `keep` (the temporaries removed). */
static void assert_only_file(const char *dir, const char *keep) {
    char out[4096];
    assert_int_equal(tu_run(out, sizeof out, "ls -A '%s'", dir), 0);
    char want[300];
    snprintf(want, sizeof want, "%s\n", keep);
    if (strcmp(out, want) != 0) fprintf(stderr, "files left: <<%s>>\n", out);
    assert_string_equal(out, want);
}

static void save_child(void *p) {
    const fixture *f = p;
    char path[400];
    snprintf(path, sizeof path, "%s/no/such/dir/ckpt.h5", f->dir);
    vb_checkpoint_save(path, f->m, &f->opt);
}

/* A checkpoint that cannot be written (its directory gone) names the file
 * and the OS error: an environment failure, exit 1. */
static void test_save_to_bad_dir_exits_1(void **state) {
    const char *needles[] = {"no/such/dir/ckpt.h5", "No such file or directory", NULL};
    expect_env_failure(save_child, *state, needles);
}

/* A full disk, simulated root-proof with RLIMIT_FSIZE (writes past the limit
 * fail with EFBIG once SIGXFSZ is ignored): exit 1 naming file and cause, the
 * previous checkpoint intact and no temporary left behind. */
static void save_full_disk_child(void *p) {
    const fixture *f = p;
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {.rlim_cur = 4096, .rlim_max = RLIM_INFINITY};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) exit(99);
    vb_checkpoint_save(f->path, f->m, &f->opt);
}

static void test_save_full_disk_exits_1(void **state) {
    fixture *f = *state;
    char *before = tu_read_file(f->path);
    assert_non_null(before);
    const char *needles[] = {"cannot write checkpoint", "ckpt.h5", "File too large", NULL};
    expect_env_failure(save_full_disk_child, f, needles);
    assert_only_file(f->dir, "ckpt.h5");
    free(before);
}

static int read_root_int_attr(const char *path, const char *name) {
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(file >= 0);
    int v = -1;
    if (H5Aexists(file, name) > 0) {
        hid_t a = H5Aopen(file, name, H5P_DEFAULT);
        assert_true(H5Aread(a, H5T_NATIVE_INT, &v) >= 0);
        H5Aclose(a);
    }
    H5Fclose(file);
    return v;
}

/* A save on the way out of an interrupted run is marked so, with its step;
 * a regular save carries neither attribute. Both load like any checkpoint. */
static void test_interrupted_checkpoint_is_marked(void **state) {
    fixture *f = *state;
    assert_int_equal(read_root_int_attr(f->path, "interrupted"), -1);
    char path[400];
    snprintf(path, sizeof path, "%s/stopped.h5", f->dir);
    vb_checkpoint_save_interrupted(path, f->m, &f->opt, 17);
    assert_int_equal(read_root_int_attr(path, "interrupted"), 1);
    assert_int_equal(read_root_int_attr(path, "step"), 17);
    vit_model *m2 = vit_create(&TINY, NULL, 1, tu_ctx(), NULL);
    vb_checkpoint_load(path, m2, NULL);
    assert_true(tu_dev_cmp(tu_ctx(), m2->params, f->m->params, m2->nparams * sizeof(float)) == 0);
    vit_destroy(m2);
}

/* A NaN or Inf in a checkpoint is bad input naming the dataset, for the
 * weights and the Adam moments alike. */
static void test_non_finite_exits_2(void **state) {
    fixture *f = *state;
    char path[400];
    copy_ckpt(f, "nan.h5", path, sizeof path);
    tu_h5_poke_at(path, "blocks.0.attn.proj.weight", 5, NAN);
    expect_load_dies(f, path, true, "nan.h5", "'blocks.0.attn.proj.weight' holds nan at element 5");
    copy_ckpt(f, "inf.h5", path, sizeof path);
    tu_h5_poke_at(path, "optimizer/exp_avg_sq", 3, INFINITY);
    expect_load_dies(f, path, true, "inf.h5", "'optimizer/exp_avg_sq' holds inf");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_bit_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layout_is_state_dict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_params_only_checkpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_dataset_exits_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_shape_exits_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_or_bad_file_exits_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_to_bad_dir_exits_1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_full_disk_exits_1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupted_checkpoint_is_marked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_non_finite_exits_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fp8_state_round_trip, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
