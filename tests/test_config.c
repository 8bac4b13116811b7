/* test_config.c: run configs (defaults, scenarios/vit.yaml, YAML features,
 * command-line overrides, validation), their JSON form, and benchy's YAML.
 *
 * Every error class is checked in a forked child whose stderr goes to a file:
 * the child must exit 2 after exactly one line that names the key/flag/file.
 */
#include "tests/test_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/comm/comm.h"
#include "core/config/config.h"
#include "core/prof/cupti_trace.h"
#include "core/results/results.h"
#include "kernels/ops.h"

static char g_vit[VB_PATH_MAX];     /* <source>/scenarios/vit.yaml */
static char g_quick[VB_PATH_MAX];   /* <source>/scenarios/benchy/quick.yaml */
static char g_default[VB_PATH_MAX]; /* <source>/scenarios/benchy/default.yaml */
static char g_tmp[VB_PATH_MAX];     /* scratch directory for this run */

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Writes `text` to a fresh file in the scratch dir; returns its path (static slot). */
static const char *tmp_yaml(const char *text) {
    static char paths[8][VB_PATH_MAX];
    static int next = 0;
    static int serial = 0;
    char *p = paths[next];
    next = (next + 1) % 8;
    vb_snprintf(p, VB_PATH_MAX, "%s/cfg_%d.yaml", g_tmp, serial++);
    write_text(p, text);
    return p;
}

/* ---- running code that must fail: in a child (tu_expect_exit_all) that
 * must exit 2 after one "vitbench: error: ..." line naming every needle ---- */

typedef struct {
    const char *argv[32];
    int argc;
} argset;

static void child_from_args(void *p) {
    argset *a = p;
    vb_config c;
    vb_config_defaults(&c);
    vb_config_from_args(&c, a->argc, (char **)a->argv, 0);
    /* accepted: say which case in the failure message */
    fputs("accepted:", stderr);
    for (int i = 0; i < a->argc; i++) fprintf(stderr, " %s", a->argv[i]);
    fputc('\n', stderr);
}

static argset make_args(const char *const *args) {
    argset a = {.argc = 0};
    for (; *args; args++) {
        assert_true(a.argc < 31);
        a.argv[a.argc++] = *args;
    }
    a.argv[a.argc] = NULL;
    return a;
}

/* args and needles are NULL-terminated lists */
static void args_fail(const char *const *args, const char *const *needles) {
    argset a = make_args(args);
    tu_expect_exit_all(2, needles, child_from_args, &a);
}
#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Loads config `name` of a YAML text; it must fail with the needles. */
static void yaml_fail(const char *text, const char *name, const char *const *needles) {
    const char *path = tmp_yaml(text);
    args_fail(LIST("--yaml_config", path, "--config", name), needles);
}

static void parse_ok(vb_config *c, const char *const *args) {
    argset a = make_args(args);
    vb_config_defaults(c);
    vb_config_from_args(c, a.argc, (char **)a.argv, 0);
}

/* ---- setup ---- */

static int setup(void **state) {
    (void)state;
    vb_snprintf(g_vit, sizeof g_vit, "%s/scenarios/vit.yaml", tu_source_dir());
    vb_snprintf(g_quick, sizeof g_quick, "%s/scenarios/benchy/quick.yaml", tu_source_dir());
    vb_snprintf(g_default, sizeof g_default, "%s/scenarios/benchy/default.yaml", tu_source_dir());
    tu_tmpdir(g_tmp, sizeof g_tmp, "config");
    unsetenv("BENCHY_CONFIG_FILE");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tu_rm_rf(g_tmp);
    return 0;
}

/* ---- run config: values ---- */

/* The tutorial's base config, written out independently of config.c. */
static void check_tutorial_base(const vb_config *c) {
    assert_int_equal(c->embed_dim, 384);
    assert_int_equal(c->depth, 12);
    assert_true(c->dropout == 0.0f);
    assert_int_equal(c->patch_size, 8);
    assert_int_equal(c->num_heads, 8);
    assert_int_equal(c->img_size[0], 360);
    assert_int_equal(c->img_size[1], 720);
    assert_int_equal(c->dt, 1);
    assert_int_equal(c->global_batch_size, 16);
    assert_int_equal(c->num_iters, 30000);
    assert_string_equal(c->amp_mode, "none");
    /* Transformer Engine's DelayedScaling defaults, in use only under fp8 */
    assert_int_equal(c->fp8_amax_history_len, 1024);
    assert_string_equal(c->fp8_amax_compute_algo, "max");
    assert_int_equal(c->fp8_margin, 0);
    assert_false(c->enable_fused);
    assert_false(c->enable_jit);
    /* GradScaler's defaults, in use only under fp16 */
    assert_string_equal(c->loss_scale, "auto");
    assert_true(c->loss_scale_init == 65536.0f);
    assert_int_equal(c->loss_scale_growth_interval, 2000);
    assert_false(vb_config_loss_scaling(c));
    assert_true(c->tf32);
    assert_false(c->cupti);
    assert_string_equal(c->expdir, "/logs");
    assert_string_equal(c->lr_schedule, "cosine");
    assert_true(c->lr == 5e-4f);
    assert_int_equal(c->warmup, 0);
    assert_string_equal(c->optimizer, "Adam");
    assert_string_equal(c->data_loader_config, "pytorch");
    assert_int_equal(c->num_data_workers, 0);
    assert_int_equal(c->n_in_channels, 20);
    assert_int_equal(c->n_out_channels, 20);
    assert_string_equal(c->train_data_path, "/data/train");
    assert_string_equal(c->valid_data_path, "/data/valid");
    assert_string_equal(c->inf_data_path, "/data/test");
    assert_string_equal(c->time_means_path, "/data/stats/time_means.npy");
    assert_string_equal(c->global_means_path, "/data/stats/global_means.npy");
    assert_string_equal(c->global_stds_path, "/data/stats/global_stds.npy");
    assert_int_equal(c->limit_nsamples, 0);
    assert_int_equal(c->limit_nsamples_val, 0);
    assert_string_equal(c->wireup_info, "env");
    assert_string_equal(c->wireup_store, "tcp");
}

static void test_defaults(void **state) {
    (void)state;
    vb_config c;
    memset(&c, 0x5a, sizeof c); /* garbage must be fully replaced */
    vb_config_defaults(&c);
    check_tutorial_base(&c);
    assert_string_equal(c.yaml_config, "scenarios/vit.yaml");
    assert_string_equal(c.config, "base");
    assert_int_equal(c.local_batch_size, 0);
    assert_int_equal(c.num_epochs, 0);
    assert_int_equal(c.base_batch_size, 0);
    assert_true(c.shuffle);
    assert_true(c.seed == 0);
    assert_string_equal(c.init_checkpoint, "");
    assert_string_equal(c.output_dir, "results");
    assert_string_equal(c.run_name, "");
    assert_string_equal(c.backend, "cpu");
    assert_false(c.enable_benchy);
    assert_string_equal(c.benchy_config, "");
    assert_true(c.save_checkpoint);
    assert_int_equal(c.tensor_parallel, 1);
    assert_int_equal(c.context_parallel, 1);
    assert_string_equal(c.parallel_order, "tp-cp-dp");
    assert_int_equal(c.bucket_cap_mb, 25);
    assert_false(c.noddp);
    assert_false(c.disable_broadcast_buffers);
    vb_config_validate(&c, "defaults"); /* must not exit */
}

static void test_scenario_base_and_short(void **state) {
    (void)state;
    vb_config c;
    parse_ok(&c, LIST("--yaml_config", g_vit));
    check_tutorial_base(&c);
    assert_string_equal(c.config, "base");
    assert_string_equal(c.yaml_config, g_vit);

    parse_ok(&c, LIST("--yaml_config", g_vit, "--config", "short"));
    assert_string_equal(c.config, "short");
    assert_int_equal(c.limit_nsamples, 512);
    assert_int_equal(c.limit_nsamples_val, 128);
    assert_int_equal(c.num_iters, 128);
    /* everything else merged from base */
    assert_int_equal(c.embed_dim, 384);
    assert_int_equal(c.img_size[1], 720);
    assert_string_equal(c.global_stds_path, "/data/stats/global_stds.npy");
}

static void test_scenario_tiny_small(void **state) {
    (void)state;
    vb_config c;
    /* start from non-default values: every key the file names must replace them */
    vb_config_defaults(&c);
    c.lr = 1.0f;
    c.limit_nsamples = 77;
    vb_config_load_yaml(&c, g_vit, "tiny");
    assert_string_equal(c.config, "tiny");
    assert_int_equal(c.img_size[0], 32);
    assert_int_equal(c.img_size[1], 64);
    assert_int_equal(c.n_in_channels, 4);
    assert_int_equal(c.n_out_channels, 4);
    assert_int_equal(c.patch_size, 4);
    assert_int_equal(c.embed_dim, 64);
    assert_int_equal(c.depth, 2);
    assert_int_equal(c.num_heads, 4);
    assert_int_equal(c.global_batch_size, 8);
    assert_int_equal(c.num_iters, 64);
    assert_string_equal(c.train_data_path, "data/tiny/train");
    assert_string_equal(c.valid_data_path, "data/tiny/valid");
    assert_string_equal(c.global_means_path, "data/tiny/stats/global_means.npy");
    assert_string_equal(c.global_stds_path, "data/tiny/stats/global_stds.npy");
    /* from base through the merge key */
    assert_true(c.lr == 5e-4f);
    assert_int_equal(c.limit_nsamples, 0);
    assert_string_equal(c.lr_schedule, "cosine");
    assert_string_equal(c.wireup_store, "tcp");
    assert_int_equal(vb_config_tokens(&c), 8 * 16);
    vb_config_validate(&c, "tiny");

    parse_ok(&c, LIST("--config", "small", "--yaml_config", g_vit));
    assert_int_equal(c.img_size[0], 96);
    assert_int_equal(c.img_size[1], 192);
    assert_int_equal(c.n_in_channels, 20);
    assert_int_equal(c.n_out_channels, 20);
    assert_int_equal(c.patch_size, 8);
    assert_int_equal(c.embed_dim, 192);
    assert_int_equal(c.depth, 6);
    assert_int_equal(c.num_heads, 6);
    assert_int_equal(c.global_batch_size, 8);
    assert_int_equal(c.num_iters, 128);
    assert_string_equal(c.train_data_path, "data/small/train");
    assert_string_equal(c.valid_data_path, "data/small/valid");
    assert_string_equal(c.global_means_path, "data/small/stats/global_means.npy");
    assert_int_equal(vb_config_tokens(&c), 12 * 24);
}

/* With no --yaml_config, scenarios/vit.yaml is found via the source dir even
 * when the cwd has no scenarios/ directory. */
static void test_default_yaml_path(void **state) {
    (void)state;
    char cwd[VB_PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(g_tmp), 0);
    vb_config c;
    vb_config_defaults(&c);
    char *argv[] = {"vitbench", "train", "--config", "tiny", NULL};
    vb_config_from_args(&c, 4, argv, 2);
    assert_int_equal(chdir(cwd), 0);
    assert_string_equal(c.config, "tiny");
    assert_int_equal(c.embed_dim, 64);
    size_t n = strlen(c.yaml_config);
    assert_true(n >= 18 && strcmp(c.yaml_config + n - 18, "scenarios/vit.yaml") == 0);
}

static const char *FEATURES_YAML =
    "# anchors, aliases, multi-merge, None, booleans, floats\n"
    "common: &common\n"
    "  embed_dim: 32\n"
    "  num_heads: 2\n"
    "  lr: 5E-4\n"
    "  shuffle: no\n"
    "a_part: &a\n"
    "  depth: 3\n"
    "  dt: 2\n"
    "  lr: 7.07e-4\n"
    "b_part: &b\n"
    "  depth: 5\n"
    "  warmup: 7\n"
    "  num_iters: 11\n"
    "multi:\n"
    "  <<: [*a, *b, *common]\n"
    "  num_iters: 99\n"
    "  limit_nsamples: None\n"
    "  limit_nsamples_val: ~\n"
    "  enable_jit: !!bool False\n"
    "  enable_fused: True\n"
    "  noddp: yes\n"
    "  disable_broadcast_buffers: false\n"
    "  img_size: [16, 32]\n"
    "  patch_size: 4\n"
    "  seed: 18446744073709551615\n"
    "  run_name: \"quoted name\"\n"
    "  init_checkpoint: 'None'\n"
    "  n_in_channels: 3\n"
    "  n_out_channels: 3\n"
    "  global_batch_size: 4\n"
    "level1: &l1\n"
    "  <<: *common\n"
    "  depth: 4\n"
    "level2:\n"
    "  <<: *l1\n"
    "  num_heads: 4\n"
    "  img_size:\n"
    "    - 8\n"
    "    - 16\n"
    "  patch_size: 8\n"
    "  limit_nsamples: null\n"
    "  lr: 1e-3\n"
    "  expdir: ~\n";

static void test_yaml_features(void **state) {
    (void)state;
    const char *path = tmp_yaml(FEATURES_YAML);
    vb_config c;
    vb_config_defaults(&c);
    c.limit_nsamples = 9;
    c.limit_nsamples_val = 9;
    c.enable_jit = true;
    c.disable_broadcast_buffers = true;
    vb_config_load_yaml(&c, path, "multi");
    assert_int_equal(c.depth, 3);     /* *a is listed before *b: a wins */
    assert_int_equal(c.dt, 2);        /* only in a */
    assert_true(c.lr == 7.07e-4f);    /* a before common */
    assert_int_equal(c.warmup, 7);    /* only in b */
    assert_int_equal(c.num_iters, 99); /* explicit beats every merge source */
    assert_int_equal(c.embed_dim, 32); /* only in common */
    assert_int_equal(c.num_heads, 2);
    assert_false(c.shuffle); /* no */
    assert_int_equal(c.limit_nsamples, 0);
    assert_int_equal(c.limit_nsamples_val, 0);
    assert_false(c.enable_jit);
    assert_true(c.enable_fused);
    assert_true(c.noddp);
    assert_false(c.disable_broadcast_buffers);
    assert_int_equal(c.img_size[0], 16);
    assert_int_equal(c.img_size[1], 32);
    assert_true(c.seed == 18446744073709551615ull);
    assert_string_equal(c.run_name, "quoted name");
    assert_string_equal(c.init_checkpoint, "None"); /* quoted: a string, not null */
    vb_config_validate(&c, path);

    vb_config_defaults(&c);
    c.limit_nsamples = 9;
    vb_config_load_yaml(&c, path, "level2");
    assert_int_equal(c.depth, 4);      /* level1's own key */
    assert_int_equal(c.embed_dim, 32); /* common, two merges down */
    assert_int_equal(c.num_heads, 4);
    assert_int_equal(c.img_size[0], 8); /* block sequence */
    assert_int_equal(c.img_size[1], 16);
    assert_int_equal(c.limit_nsamples, 0);
    assert_true(c.lr == 1e-3f);
    assert_string_equal(c.expdir, ""); /* null string */
    assert_int_equal(c.num_iters, 30000); /* untouched default */
    vb_config_validate(&c, path);
}

static void test_overrides(void **state) {
    (void)state;
    vb_config c;
    parse_ok(&c, LIST("--lr", "1e-3", "--depth=3", "--img_size", "64,128", "--enable_benchy", "--noddp",
                      "--shuffle", "false", "--save_checkpoint=false", "--run_num", "exp7", "--local_batch_size",
                      "2", "--benchy_config", "b.yaml", "--limit_nsamples", "100", "--limit_nsamples_val=None",
                      "--seed", "42", "--embed_dim", "128", "--enable_jit", "--disable_broadcast_buffers",
                      "true", "--enable_fused", "--yaml_config", g_vit, "--config", "tiny"));
    assert_string_equal(c.config, "tiny");
    assert_true(c.lr == 1e-3f);
    assert_int_equal(c.depth, 3);
    assert_int_equal(c.img_size[0], 64);
    assert_int_equal(c.img_size[1], 128);
    assert_true(c.enable_benchy);
    assert_true(c.noddp);
    assert_false(c.shuffle);
    assert_false(c.save_checkpoint);
    assert_string_equal(c.run_name, "exp7");
    assert_int_equal(c.local_batch_size, 2);
    assert_string_equal(c.benchy_config, "b.yaml");
    assert_int_equal(c.limit_nsamples, 100);
    assert_int_equal(c.limit_nsamples_val, 0);
    assert_true(c.seed == 42);
    assert_int_equal(c.embed_dim, 128); /* flag beats the file's 64 */
    assert_true(c.enable_jit);
    assert_true(c.disable_broadcast_buffers);
    assert_true(c.enable_fused);
    assert_int_equal(c.num_heads, 4); /* untouched file value */
    assert_int_equal(c.n_in_channels, 4);

    /* bracketed list, --key=value for a list, bool followed by a non-bool value */
    parse_ok(&c, LIST("--yaml_config", g_vit, "--config=tiny", "--img_size=[16, 32]", "--shuffle", "--lr",
                      "0.25", "--run_name=", "--output_dir", "/tmp/x", "--seed=0"));
    assert_int_equal(c.img_size[0], 16);
    assert_int_equal(c.img_size[1], 32);
    assert_true(c.shuffle);
    assert_true(c.lr == 0.25f);
    assert_string_equal(c.run_name, "");
    assert_string_equal(c.output_dir, "/tmp/x");

    /* vb_config_set directly */
    vb_config_set(&c, "warmup", "5", "test");
    assert_int_equal(c.warmup, 5);
    vb_config_set(&c, "run_num", "r1", "test");
    assert_string_equal(c.run_name, "r1");
    vb_config_set(&c, "img_size", "[8, 24]", "test");
    assert_int_equal(c.img_size[1], 24);
}

/* ---- run config: the flag grammar every command shares (core/config/flag.h) ---- */

static void test_flag_grammar(void **state) {
    (void)state;
    vb_config c;
    /* '-' for '_', --key=VALUE and --key VALUE, bool words in any case */
    parse_ok(&c, LIST("--yaml_config", g_vit, "--local-batch-size=4", "--shuffle", "no", "--num-iters", "3",
                      "--noddp=1", "--enable_jit", "YES", "--tf32", "off", "--run-num", "r7"));
    assert_int_equal(c.local_batch_size, 4);
    assert_false(c.shuffle);
    assert_int_equal(c.num_iters, 3);
    assert_true(c.noddp && c.enable_jit && !c.tf32);
    assert_string_equal(c.run_name, "r7");
    parse_ok(&c, LIST("--yaml_config", g_vit, "--shuffle", "0", "--enable-fused"));
    assert_false(c.shuffle);
    assert_true(c.enable_fused);
    /* a typo names the nearest key, as a flag */
    args_fail(LIST("--yaml_config", g_vit, "--local_bach_size", "4"),
              LIST("flag --local_bach_size: unknown option; did you mean --local_batch_size?"));
    args_fail(LIST("--shufle"), LIST("flag --shufle: unknown option; did you mean --shuffle?"));
    args_fail(LIST("--foo", "3"), LIST("flag --foo: unknown option\n"));
}

/* ---- run config: every error class ---- */

static void test_flag_errors(void **state) {
    (void)state;
    args_fail(LIST("--yaml_config", g_vit, "--foo", "3"), LIST("flag --foo", "unknown option"));
    args_fail(LIST("--yaml_config", g_vit, "tiny"), LIST("unexpected argument 'tiny'"));
    args_fail(LIST("-lr", "3"), LIST("unexpected argument '-lr'"));
    args_fail(LIST("--noddp", "maybe"), LIST("flag --noddp", "unexpected argument 'maybe'"));
    args_fail(LIST("--yaml_config", g_vit, "--lr", "abc"), LIST("flag --lr: 'abc' is not a number"));
    args_fail(LIST("--lr=1e-3x"), LIST("flag --lr", "'1e-3x' is not a number"));
    args_fail(LIST("--lr", "nan"), LIST("flag --lr", "'nan'"));
    args_fail(LIST("--lr", "1e50"), LIST("flag --lr", "'1e50'", "finite"));
    args_fail(LIST("--embed_dim", "3.5"), LIST("flag --embed_dim", "'3.5' is not an integer"));
    args_fail(LIST("--depth", "99999999999"), LIST("flag --depth", "'99999999999' is not an integer"));
    args_fail(LIST("--shuffle=maybe"), LIST("flag --shuffle", "'maybe' is not a boolean"));
    args_fail(LIST("--img_size", "32"), LIST("flag --img_size", "'32' is not two integers"));
    args_fail(LIST("--img_size", "32,64,3"), LIST("flag --img_size", "'32,64,3'"));
    args_fail(LIST("--limit_nsamples", "lots"), LIST("flag --limit_nsamples", "'lots' is not an integer or None"));
    args_fail(LIST("--seed", "-1"), LIST("flag --seed", "'-1' is not a non-negative integer"));
    args_fail(LIST("--run_name", "a", "--lr"), LIST("flag --lr: missing value"));
    args_fail(LIST("--lr", "--depth", "2"), LIST("flag --lr", "missing value", "--depth"));
    args_fail(LIST("--config="), LIST("--config", "empty config name"));
    args_fail(LIST("--yaml_config", g_vit, "--config", "nope"),
              LIST("vit.yaml", "no config named 'nope'", "tiny", "small"));
    args_fail(LIST("--yaml_config", "/nonexistent/x.yaml"), LIST("/nonexistent/x.yaml", "cannot open"));
    args_fail(LIST("--yaml_config", g_tmp), LIST(g_tmp, "not a regular file"));
}

typedef struct {
    const char *flag, *value, *needle;
} bad_value;

static void test_validation_errors(void **state) {
    (void)state;
    /* each on top of the tiny config (img 32x64, patch 4, embed 64, heads 4) */
    static const bad_value cases[] = {
        {"--num_heads", "5", "embed_dim = 64 is not divisible by num_heads = 5"},
        {"--embed_dim", "102", "embed_dim = 102 is not divisible by num_heads = 4"},
        {"--patch_size", "5", "img_size = [32, 64] is not divisible by patch_size = 5"},
        {"--img_size", "32,66", "img_size = [32, 66] is not divisible by patch_size = 4"},
        {"--img_size", "0,64", "img_size = [0, 64] must be two positive integers"},
        {"--global_batch_size", "0", "global_batch_size = 0 must be >= 1"},
        {"--local_batch_size", "-1", "local_batch_size = -1 must be >= 0"},
        {"--depth", "0", "depth = 0 must be >= 1"},
        {"--embed_dim", "0", "embed_dim = 0 must be >= 1"},
        {"--num_heads", "0", "num_heads = 0 must be >= 1"},
        {"--patch_size", "0", "patch_size = 0 must be >= 1"},
        {"--n_in_channels", "0", "n_in_channels = 0 must be >= 1"},
        {"--n_out_channels", "-3", "n_out_channels = -3 must be >= 1"},
        {"--num_iters", "0", "num_iters = 0 must be >= 1"},
        {"--dt", "0", "dt = 0 must be >= 1"},
        {"--lr", "0", "lr = 0 must be > 0"},
        {"--lr", "-1e-3", "lr = -0.001 must be > 0"},
        {"--warmup", "-1", "warmup = -1 must be >= 0"},
        {"--num_data_workers", "-1", "num_data_workers = -1 must be >= 0"},
        {"--limit_nsamples", "-1", "limit_nsamples = -1 must be >= 0"},
        {"--limit_nsamples_val", "-2", "limit_nsamples_val = -2 must be >= 0"},
        {"--lr_schedule", "step", "lr_schedule = 'step' must be cosine or constant"},
        {"--optimizer", "SGD", "optimizer = 'SGD' is not supported"},
        {"--amp_mode", "fp16", "amp_mode = fp16 needs the CUDA backend"},
        {"--amp_mode", "bf16", "amp_mode = bf16 needs the CUDA backend"},
        {"--amp_mode", "fp4", "amp_mode = 'fp4' must be none, fp16, bf16 or fp8"},
        {"--fp8_amax_history_len", "0", "fp8_amax_history_len = 0 must be >= 1"},
        {"--fp8_margin", "-1", "fp8_margin = -1 must be >= 0"},
        {"--fp8_amax_compute_algo", "mean", "fp8_amax_compute_algo = 'mean' must be max or most_recent"},
        {"--attention", "fast", "attention = 'fast' must be flash or cudnn"},
        {"--attention", "cudnn", "attention = cudnn needs the CUDA backend"},
        {"--data_loader_config", "dali", "data_loader_config = dali needs the CUDA backend"},
        {"--data_loader_config", "numpy", "data_loader_config = 'numpy' must be pytorch or dali"},
        {"--data_read", "mmap2", "data_read = 'mmap2' must be mmap or pread"},
        {"--dropout", "0.1", "dropout = 0.1 is not supported"},
        {"--backend", "gpu", "backend = 'gpu' must be cpu, cuda or auto"},
        {"--comm_backend", "gloo", "comm_backend = 'gloo' must be auto, mpi or nccl"},
        {"--comm_backend", "nccl", "comm_backend = nccl needs the CUDA backend"},
        {"--cupti", "true", "cupti = true needs the CUDA backend"},
        {"--cuda_graphs", "true", "cuda_graphs = true needs the CUDA backend"},
        {"--cupti", "maybe", "cupti"},
        {"--tensor_parallel", "0", "tensor_parallel = 0 must be >= 1"},
        {"--context_parallel", "0", "context_parallel = 0 must be >= 1"},
        {"--parallel_order", "tp-dp", "parallel_order = 'tp-dp'"},
        {"--parallel_order", "tp-cp-cp", "parallel_order = 'tp-cp-cp'"},
        {"--parallel_order", "tp--cp-dp", "parallel_order = 'tp--cp-dp'"},
        {"--parallel_order", "tp-cp-dp-", "parallel_order = 'tp-cp-dp-'"},
        {"--bucket_cap_mb", "0", "bucket_cap_mb = 0 must be > 0"},
        {"--bucket_cap_mb", "-0.5", "bucket_cap_mb = -0.5 must be > 0"},
        {"--num_epochs", "-1", "num_epochs = -1 must be >= 0"},
        {"--loss_scale", "static", "loss_scale = 'static' must be auto, dynamic or none"},
        {"--loss_scale_init", "0", "loss_scale_init = 0 must be a finite number > 0"},
        {"--loss_scale_growth_interval", "0", "loss_scale_growth_interval = 0 must be >= 1"},
        {"--run_name", "a\n<img src=x onerror=alert(1)>", "run_name holds a line break or control character (byte 0x0a)"},
        {"--run_name", "a\rb", "run_name holds a line break or control character (byte 0x0d)"},
        /* run.json holds every string as UTF-8 */
        {"--run_name", "\xff\xfe", "the value is not valid UTF-8 (byte 0xff at byte 0)"},
        {"--output_dir", "out\xc3(", "is not valid UTF-8 (byte 0xc3 at byte 3)"},
        {"--run_name", "a\xed\xa0\x80", "is not valid UTF-8 (byte 0xed at byte 1)"}, /* a UTF-16 surrogate */
        {"--output_dir", "", "output_dir is empty"},
        /* shown reversed after it: "abc<U+202E>txt.exe" reads as abcexe.txt */
        {"--run_name", "abc\xe2\x80\xae" "txt.exe", "run_name holds U+202E (at byte 3), an invisible character"},
        {"--run_name", "a\xc2\x85" "b", "run_name holds U+0085 (at byte 1)"},
        /* numbers said as given: not the 0 an underflow became, never C's hexadecimal floats */
        {"--lr", "1e-400", "'1e-400' is too small for a single-precision number"},
        {"--lr", "1e-46", "'1e-46' is too small for a single-precision number"},
        {"--lr", "0x1p-3", "'0x1p-3' is a hexadecimal number"},
        {"--loss_scale_init", "1e39", "'1e39' is not a finite single-precision number"},
        {"--lr", "inf", "'inf' is not a number"},
        /* 2^200 is infinite in float: every scale would be 0 */
        {"--fp8_margin", "200", "fp8_margin = 200 must be <= 126"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char origin[128];
        vb_snprintf(origin, sizeof origin, "flag %s: ", cases[i].flag);
        args_fail(LIST("--yaml_config", g_vit, "--config", "tiny", cases[i].flag, cases[i].value),
                  LIST(origin, cases[i].needle));
    }
    /* cuda is a valid name; whether it is accepted depends on the build */
    if (!vb_ops_by_name("cuda"))
        args_fail(LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "cuda"),
                  LIST("flag --backend: ", "backend = cuda is not available in this build"));

    if (!vb_cupti_compiled() && vb_ops_by_name("cuda"))
        args_fail(LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "cuda", "--cupti", "true"),
                  LIST("flag --cupti: ", "cupti = true is not available in this build"));
    /* dali: refused on cpu (above, and with cpu spelled out); with cuda it is
     * accepted where the build has CUDA, else the backend is what fails */
    args_fail(LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "cpu", "--data_loader_config", "dali"),
              LIST("flag --data_loader_config: ", "data_loader_config = dali needs the CUDA backend"));
    if (vb_ops_by_name("cuda")) {
        vb_config d;
        parse_ok(&d, LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "cuda", "--data_loader_config",
                          "dali"));
        assert_string_equal(d.data_loader_config, "dali");
        assert_string_equal(d.backend, "cuda");
    } else {
        args_fail(LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "cuda", "--data_loader_config",
                       "dali"),
                  LIST("flag --backend: ", "backend = cuda is not available in this build"));
    }
    /* auto is resolved when the run starts, which refuses dali if it became cpu */
    {
        vb_config d;
        parse_ok(&d, LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "auto", "--data_loader_config",
                          "dali"));
        assert_string_equal(d.data_loader_config, "dali");
    }

    if (!vb_comm_data_nccl() && vb_ops_by_name("cuda"))
        args_fail(LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "cuda", "--comm_backend", "nccl"),
                  LIST("flag --comm_backend: ", "comm_backend = nccl is not available in this build"));

    /* amp_mode fp16 (dynamic loss scaling) is a CUDA mode: accepted with
     * --backend cuda in a CUDA build; on the CPU one line naming amp_mode */
    if (vb_ops_by_name("cuda")) {
        vb_config f;
        parse_ok(&f, LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "cuda", "--amp_mode", "fp16"));
        assert_string_equal(f.amp_mode, "fp16");
        assert_true(vb_config_loss_scaling(&f));
        args_fail(LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "cuda", "--amp_mode", "fp16",
                       "--loss_scale", "none"),
                  LIST("loss_scale = none with amp_mode = fp16", "needs dynamic loss scaling"));
    }
    args_fail(LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "cpu", "--amp_mode", "fp16"),
              LIST("flag --amp_mode: ", "amp_mode = fp16 needs the CUDA backend"));

    /* amp_mode fp8, with no loss scaling */
    {
        vb_config f;
        parse_ok(&f, LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "cpu", "--amp_mode", "fp8",
                          "--fp8_amax_history_len", "16", "--fp8_amax_compute_algo", "most_recent", "--fp8_margin",
                          "2"));
        assert_string_equal(f.amp_mode, "fp8");
        assert_int_equal(f.fp8_amax_history_len, 16);
        assert_string_equal(f.fp8_amax_compute_algo, "most_recent");
        assert_int_equal(f.fp8_margin, 2);
        assert_false(vb_config_loss_scaling(&f));
    }
    args_fail(LIST("--yaml_config", g_vit, "--config", "tiny", "--backend", "cpu", "--amp_mode", "fp8", "--loss_scale",
                   "dynamic"),
              LIST("loss_scale = dynamic with amp_mode = fp8"));

    /* accepted permutation and values on the edge */
    vb_config c;
    parse_ok(&c, LIST("--yaml_config", g_vit, "--config", "tiny", "--parallel_order", "dp-tp-cp", "--lr_schedule",
                      "constant", "--local_batch_size", "0", "--warmup", "0"));
    assert_string_equal(c.parallel_order, "dp-tp-cp");

    /* a cross-key failure names both origins: the flag first, then the file */
    args_fail(LIST("--yaml_config", g_vit, "--config", "tiny", "--num_heads", "6"),
              LIST("flag --num_heads: embed_dim = 64 is not divisible by num_heads = 6 (embed_dim from ", g_vit,
                   "[config tiny])"));
}

static void test_yaml_errors(void **state) {
    (void)state;
    yaml_fail("t:\n  embed_dimm: 3\n", "t", LIST("[config t]: unknown key 'embed_dimm' (line 2)"));
    yaml_fail("t:\n  depth: 2\n  embed_dim: 3.5\n", "t",
              LIST("[config t]: embed_dim: '3.5' is not an integer (line 3)"));
    yaml_fail("t:\n  lr: abc\n", "t", LIST("[config t]: lr: 'abc' is not a number"));
    yaml_fail("t:\n  lr: None\n", "t", LIST("[config t]: lr: 'None' is not a number"));
    yaml_fail("t:\n  num_iters:\n", "t", LIST("[config t]: num_iters: '' is not an integer"));
    yaml_fail("t:\n  img_size: [1, 2, 3]\n", "t", LIST("[config t]: img_size: '1,2,3' is not two integers"));
    yaml_fail("t:\n  img_size: {a: 1}\n", "t", LIST("[config t]: img_size: expected a single value, found a mapping"));
    yaml_fail("t:\n  img_size: [[1, 2], 3]\n", "t", LIST("[config t]: img_size: list entries must be numbers"));
    yaml_fail("t:\n  embed_dim: [1]\n", "t", LIST("[config t]: embed_dim: expected a single value, found a list"));
    yaml_fail("t:\n  enable_jit: !!bool maybe\n", "t", LIST("[config t]: enable_jit: 'maybe' is not a boolean"));
    yaml_fail("t:\n  limit_nsamples: lots\n", "t", LIST("limit_nsamples: 'lots' is not an integer or None"));
    yaml_fail("t:\n  config: other\n", "t", LIST("[config t]: key 'config'", "command line"));
    yaml_fail("t:\n  depth: 2\n  depth: 3\n", "t", LIST("[config t]: duplicate key 'depth' (line 3)"));
    yaml_fail("t:\n  <<: 3\n", "t", LIST("[config t]: merge key '<<'", "not a scalar"));
    yaml_fail("a: &a {depth: 2}\nt:\n  <<: [*a, 3]\n", "t", LIST("[config t]: merge key '<<'", "entry 2"));
    yaml_fail("t: 3\n", "t", LIST("[config t]: expected a mapping", "found a scalar"));
    yaml_fail("- a\n- b\n", "t", LIST("top level", "found a list"));
    yaml_fail("", "t", LIST("file is empty"));
    yaml_fail("# only a comment\n", "t", LIST("file is empty"));
    yaml_fail("t:\n  a: [1, 2\n", "t", LIST("malformed YAML at line"));
    yaml_fail("t:\n  depth: 1\n bad: 2\n", "t", LIST("malformed YAML at line"));
    yaml_fail("t:\n  <<: *nope\n", "t", LIST("malformed YAML", "undefined alias"));
    yaml_fail("t:\n  depth: 2\n", "u", LIST("no config named 'u' (available: t)"));
    /* the brief's own example: an impossible combination inside one config */
    yaml_fail("t:\n  embed_dim: 100\n  num_heads: 8\n", "t",
              LIST("[config t]: embed_dim = 100 is not divisible by num_heads = 8"));
    /* the file path heads the message */
    const char *p = tmp_yaml("t:\n  embed_dim: 3.5\n");
    args_fail(LIST("--yaml_config", p, "--config", "t"), LIST(p));
}

static void child_set_unknown(void *arg) {
    (void)arg;
    vb_config c;
    vb_config_defaults(&c);
    vb_config_set(&c, "no_such_key", "1", "test origin");
}

static void test_set_unknown(void **state) {
    (void)state;
    tu_expect_exit_all(2, LIST("test origin", "unknown key 'no_such_key'"), child_set_unknown, NULL);
}

/* ---- JSON ---- */

static const char *ALL_KEYS[] = {
    "yaml_config", "config", "embed_dim", "depth", "patch_size", "num_heads", "dropout", "img_size",
    "n_in_channels", "n_out_channels", "dt", "global_batch_size", "local_batch_size", "num_iters", "num_epochs",
    "lr", "lr_schedule", "warmup", "base_batch_size", "optimizer", "amp_mode", "fp8_amax_history_len",
    "fp8_amax_compute_algo", "fp8_margin", "enable_fused", "enable_jit", "cuda_graphs",
    "loss_scale", "loss_scale_init", "loss_scale_growth_interval", "tf32",
    "attention",
    "expdir", "data_loader_config", "num_data_workers", "data_read", "normalize_on_device", "synthetic_resident", "limit_nsamples", "limit_nsamples_val",
    "train_data_path", "valid_data_path", "inf_data_path", "time_means_path", "global_means_path",
    "global_stds_path", "shuffle", "seed", "init_checkpoint", "output_dir", "run_name", "backend", "comm_backend",
    "enable_benchy", "benchy_config", "save_checkpoint", "progress", "profile_steps", "cupti", "tensor_parallel", "context_parallel", "parallel_order",
    "bucket_cap_mb", "noddp", "disable_broadcast_buffers", "wireup_info", "wireup_store", "thread_policy",
};

static void test_json(void **state) {
    (void)state;
    vb_config c;
    parse_ok(&c, LIST("--yaml_config", g_vit, "--config", "tiny", "--seed", "18446744073709551615", "--noddp",
                      "--run_name", "j\"son"));
    char *s = vb_config_to_json(&c);
    assert_non_null(s);
    cJSON *o = cJSON_Parse(s);
    assert_non_null(o);
    assert_true(cJSON_IsObject(o));
    size_t nkeys = sizeof ALL_KEYS / sizeof ALL_KEYS[0];
    assert_int_equal(cJSON_GetArraySize(o), (int)nkeys);
    for (size_t i = 0; i < nkeys; i++) {
        if (!cJSON_GetObjectItemCaseSensitive(o, ALL_KEYS[i])) fprintf(stderr, "JSON lacks %s\n", ALL_KEYS[i]);
        assert_non_null(cJSON_GetObjectItemCaseSensitive(o, ALL_KEYS[i]));
    }
    cJSON *img = cJSON_GetObjectItemCaseSensitive(o, "img_size");
    assert_true(cJSON_IsArray(img));
    assert_int_equal(cJSON_GetArraySize(img), 2);
    assert_int_equal(cJSON_GetArrayItem(img, 0)->valueint, 32);
    assert_int_equal(cJSON_GetArrayItem(img, 1)->valueint, 64);
    cJSON *lr = cJSON_GetObjectItemCaseSensitive(o, "lr");
    assert_true(cJSON_IsNumber(lr));
    assert_true(fabs(lr->valuedouble - 5e-4) < 1e-12); /* shortest form, not float noise */
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "embed_dim")->valueint, 64);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "noddp")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "enable_benchy")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "shuffle")));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "train_data_path")->valuestring, "data/tiny/train");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "config")->valuestring, "tiny");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "run_name")->valuestring, "j\"son");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "limit_nsamples")->valueint, 0);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "seed")));
    assert_non_null(strstr(s, "18446744073709551615")); /* exact digits, not a rounded double */
    cJSON_Delete(o);
    free(s);
}

/* ---- benchy ---- */

static void check_benchy_defaults(const vb_benchy_config *b) {
    assert_int_equal(b->report_freq, 10);
    assert_true(b->exit_after_tests);
    assert_string_equal(b->profiler_mode, "single");
    assert_string_equal(b->output_filename, "benchy_output.json");
    assert_string_equal(b->output_dir, "");
    assert_false(b->use_distributed_barrier);
    const vb_benchy_trial_cfg *t[3] = {&b->trial[VB_TRIAL_IO], &b->trial[VB_TRIAL_SYNTHETIC], &b->trial[VB_TRIAL_FULL]};
    for (int i = 0; i < 3; i++) {
        assert_true(t[i]->run_benchmark);
        assert_int_equal(t[i]->nbatches, 50);
        assert_int_equal(t[i]->ntrials, 3);
        assert_int_equal(t[i]->nwarmup, 1);
    }
}

static void check_benchy_quick(const vb_benchy_config *b) {
    assert_int_equal(b->report_freq, 5);
    const vb_benchy_trial_cfg *t[3] = {&b->trial[VB_TRIAL_IO], &b->trial[VB_TRIAL_SYNTHETIC], &b->trial[VB_TRIAL_FULL]};
    for (int i = 0; i < 3; i++) {
        assert_true(t[i]->run_benchmark);
        assert_int_equal(t[i]->nbatches, 5);
        assert_int_equal(t[i]->ntrials, 2);
        assert_int_equal(t[i]->nwarmup, 1);
    }
}

static void test_benchy_load(void **state) {
    (void)state;
    vb_benchy_config b;
    memset(&b, 0x5a, sizeof b);
    vb_benchy_defaults(&b);
    check_benchy_defaults(&b);

    vb_benchy_load(&b, g_default); /* the sample file spells out the defaults */
    check_benchy_defaults(&b);

    vb_benchy_defaults(&b);
    vb_benchy_load(&b, g_quick);
    check_benchy_quick(&b);

    /* partial file: only the named keys change; json_prefix names the output */
    const char *p = tmp_yaml("global:\n  json_prefix: run1\n  use_distributed_barrier: yes\n"
                             "  profiler_mode: none\n  output_dir: /tmp/out\n  exit_after_tests: False\n"
                             "io:\n  nbatches: 7\n"
                             "full:\n  run_benchmark: false\n"
                             "synthetic:\n");
    vb_benchy_defaults(&b);
    vb_benchy_load(&b, p);
    assert_string_equal(b.output_filename, "run1.json");
    assert_true(b.use_distributed_barrier);
    assert_string_equal(b.profiler_mode, "none");
    assert_string_equal(b.output_dir, "/tmp/out");
    assert_false(b.exit_after_tests);
    assert_int_equal(b.trial[VB_TRIAL_IO].nbatches, 7);
    assert_int_equal(b.trial[VB_TRIAL_IO].ntrials, 3);
    assert_false(b.trial[VB_TRIAL_FULL].run_benchmark);
    assert_int_equal(b.trial[VB_TRIAL_FULL].nbatches, 50);
    assert_true(b.trial[VB_TRIAL_SYNTHETIC].run_benchmark);
    assert_int_equal(b.report_freq, 10);

    /* names near the run's own are not theirs */
    static const char *const fine[] = {"summary.csv.json", "my_summary.csv", "kernels_rank.csv", "kernels_rankx.csv",
                                       "kernels_rank1.json", "reports"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        char text[128];
        vb_snprintf(text, sizeof text, "global:\n  output_filename: '%s'\n", fine[i]);
        vb_benchy_defaults(&b);
        vb_benchy_load(&b, tmp_yaml(text));
        assert_string_equal(b.output_filename, fine[i]);
    }

    /* empty file: defaults stand */
    vb_benchy_defaults(&b);
    vb_benchy_load(&b, tmp_yaml(""));
    check_benchy_defaults(&b);
}

static void child_benchy_load(void *arg) {
    vb_benchy_config b;
    vb_benchy_defaults(&b);
    vb_benchy_load(&b, (const char *)arg);
}

static void benchy_fail(const char *text, const char *const *needles) {
    const char *p = tmp_yaml(text);
    tu_expect_exit_all(2, needles, child_benchy_load, (void *)p);
}

static void child_benchy_resolve_env(void *arg) {
    (void)arg;
    vb_benchy_config b;
    vb_benchy_resolve(&b, NULL);
}

static void test_benchy_errors(void **state) {
    (void)state;
    benchy_fail("io_bench:\n  nbatches: 3\n", LIST("unknown section 'io_bench'", "line 1"));
    benchy_fail("IO:\n  nbatch: 3\n", LIST("[IO]: unknown key 'nbatch' (line 2)"));
    benchy_fail("global:\n  nbatches: 3\n", LIST("[global]: unknown key 'nbatches'"));
    benchy_fail("IO:\n  nbatches: many\n", LIST("[IO]: nbatches: 'many' is not an integer (line 2)"));
    benchy_fail("full:\n  run_benchmark: sometimes\n", LIST("[full]: run_benchmark: 'sometimes' is not a boolean"));
    benchy_fail("synthetic:\n  nbatches: 0\n", LIST("[synthetic]: nbatches = 0 must be >= 1"));
    benchy_fail("IO:\n  ntrials: 0\n", LIST("[IO]: ntrials = 0 must be >= 1"));
    benchy_fail("IO:\n  nwarmup: -1\n", LIST("[IO]: nwarmup = -1 must be >= 0"));
    benchy_fail("global:\n  report_freq: 0\n", LIST("[global]: report_freq = 0 must be >= 1"));
    benchy_fail("global:\n  profiler_mode: sometimes\n", LIST("[global]: profiler_mode = 'sometimes'"));
    benchy_fail("IO: 3\n", LIST("[IO]: expected a mapping"));
    benchy_fail("IO:\n  nbatches: [1]\n", LIST("[IO]: nbatches: expected a single value, found a list"));
    benchy_fail("IO:\n  nbatches: 3\n nwarmup: 2\n", LIST("malformed YAML"));
    benchy_fail("- IO\n", LIST("expected a mapping"));
    benchy_fail("global:\n  output_filename: '../../../etc/x.json'\n",
                LIST("[global]: output_filename = '../../../etc/x.json' must be a file name without '/' (line 2)"));
    benchy_fail("global:\n  json_prefix: 'sub/out'\n", LIST("json_prefix = 'sub/out.json' must be a file name"));
    /* a name the run directory already uses: one file would replace the other */
    benchy_fail("global:\n  output_filename: 'summary.csv'\n",
                LIST("[global]: output_filename = 'summary.csv' is a name of the results schema", "(line 2)"));
    benchy_fail("global:\n  json_prefix: run\n", LIST("[global]: json_prefix = 'run.json' is a name of the results schema"));
    static const char *const reserved[] = {
        "run.json", "trials.csv", "iterations.csv", "ops.csv", "timeline.csv", "train_log.csv", "validation.csv",
        "checkpoint.h5", "trace.json", "report", "kineto", "kernels.csv", "kernels_SYNTHETIC.csv", "kernels_FULL.csv",
        "gpu_mem_time.csv", "kernels_rank3.csv", "kernels_FULL_rank12.csv", "gpu_mem_time_rank1.csv",
        "Summary.CSV", /* the same file where case is not told apart */
    };
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        char text[256], want[256];
        vb_snprintf(text, sizeof text, "global:\n  output_filename: '%s'\n", reserved[i]);
        vb_snprintf(want, sizeof want, "output_filename = '%s' is a name of the results schema", reserved[i]);
        benchy_fail(text, LIST(want));
    }
    /* every name of the schema's one list, those the tools write afterwards
     * (compare.json into NEW, breakdown.csv, model.csv ...) included: a
     * name added to the list is refused from then on */
    static const char *const schema[] = {VB_RESULTS_NAMES};
    for (size_t i = 0; i < sizeof schema / sizeof schema[0]; i++) {
        char text[256], want[256];
        vb_snprintf(text, sizeof text, "global:\n  output_filename: '%s'\n", schema[i]);
        vb_snprintf(want, sizeof want, "output_filename = '%s' is a name of the results schema", schema[i]);
        benchy_fail(text, LIST(want));
    }
    benchy_fail("global:\n  output_filename: 'compare.json'\n", LIST("'compare.json' is a name of the results schema"));
    /* nesting is capped (VB_YAML_MAX_DEPTH) before the document is built:
     * libyaml's loader is quadratic in the depth, 100,000 levels ran for
     * minutes; the root mapping, IO's and 62 lists are 64 levels, one more
     * is refused */
    {
        static char deep[2 * 100000 + 64];
        for (int levels = 62; levels <= 63; levels++) {
            int k = snprintf(deep, sizeof deep, "IO:\n  nbatches: ");
            for (int i = 0; i < levels; i++) deep[k++] = '[';
            for (int i = 0; i < levels; i++) deep[k++] = ']';
            deep[k] = '\0';
            benchy_fail(deep, levels == 62 ? LIST("nbatches: expected a single value, found a list")
                                           : LIST("nested more than 64 levels deep (line 2)"));
        }
        int k = snprintf(deep, sizeof deep, "base: ");
        for (int i = 0; i < 100000; i++) deep[k++] = '[';
        for (int i = 0; i < 100000; i++) deep[k++] = ']';
        deep[k] = '\0';
        benchy_fail(deep, LIST("nested more than 64 levels deep (line 1)"));
    }
    tu_expect_exit_all(2, LIST("/nonexistent/benchy.yaml", "cannot open"), child_benchy_load,
                       (void *)"/nonexistent/benchy.yaml");
    /* a bad file named by the environment says so */
    const char *bad = tmp_yaml("IO:\n  nbatches: 0\n");
    setenv("BENCHY_CONFIG_FILE", bad, 1);
    tu_expect_exit_all(2, LIST("BENCHY_CONFIG_FILE=", bad, "nbatches = 0"), child_benchy_resolve_env, NULL);
    unsetenv("BENCHY_CONFIG_FILE");
}

static void test_benchy_resolve(void **state) {
    (void)state;
    vb_benchy_config b;
    unsetenv("BENCHY_CONFIG_FILE");
    vb_benchy_resolve(&b, NULL);
    check_benchy_defaults(&b);
    vb_benchy_resolve(&b, "");
    check_benchy_defaults(&b);

    setenv("BENCHY_CONFIG_FILE", g_quick, 1);
    memset(&b, 0, sizeof b);
    vb_benchy_resolve(&b, NULL);
    check_benchy_quick(&b);
    vb_benchy_resolve(&b, "");
    check_benchy_quick(&b);

    /* an explicit path beats the environment; resolve starts from defaults */
    const char *p = tmp_yaml("IO:\n  nbatches: 7\n");
    vb_benchy_resolve(&b, p);
    assert_int_equal(b.trial[VB_TRIAL_IO].nbatches, 7);
    assert_int_equal(b.trial[VB_TRIAL_SYNTHETIC].nbatches, 50);
    assert_int_equal(b.report_freq, 10);
    unsetenv("BENCHY_CONFIG_FILE");

    /* relative path resolved through the source tree from an unrelated cwd */
    char cwd[VB_PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(g_tmp), 0);
    vb_benchy_resolve(&b, "scenarios/benchy/quick.yaml");
    assert_int_equal(chdir(cwd), 0);
    check_benchy_quick(&b);
}

/* run --help is printed from the key table the parser reads: every key the
 * parser accepts is in it, with its default */
static void test_help_lists_every_key(void **state) {
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    vb_config_print_help(f);
    fclose(f);
    assert_true(vb_config_nkeys() > 60);
    for (int i = 0; i < vb_config_nkeys(); i++) {
        char want[96];
        snprintf(want, sizeof want, "\n  --%s ", vb_config_key_name(i));
        if (!strstr(buf, want)) fail_msg("run --help does not list --%s", vb_config_key_name(i));
    }
    assert_non_null(strstr(buf, "--amp_mode none|bf16|fp16|fp8"));
    assert_non_null(strstr(buf, "(default scenarios/vit.yaml)"));
    assert_non_null(strstr(buf, "also --run_num"));
    free(buf);
}

/* A config path that is there but is not a regular file (a FIFO, a
 * directory) is named for what it is, never reported missing, and never
 * opened: reading a FIFO would wait for a writer forever. */
static void test_not_regular_files(void **state) {
    (void)state;
    char fifo[VB_PATH_MAX], dir[VB_PATH_MAX];
    vb_snprintf(fifo, sizeof fifo, "%s/fifo.yaml", g_tmp);
    vb_snprintf(dir, sizeof dir, "%s/dir.yaml", g_tmp);
    assert_int_equal(mkfifo(fifo, 0664), 0);
    assert_int_equal(mkdir(dir, 0775), 0);

    args_fail(LIST("--yaml_config", fifo), LIST(fifo, "cannot open: a FIFO (named pipe), not a regular file"));
    args_fail(LIST("--yaml_config", dir), LIST(dir, "cannot open: a directory, not a regular file"));
    tu_expect_exit_all(2, LIST(fifo, "a FIFO (named pipe), not a regular file"), child_benchy_load, fifo);
    setenv("BENCHY_CONFIG_FILE", dir, 1);
    tu_expect_exit_all(2, LIST("BENCHY_CONFIG_FILE=", dir, "a directory, not a regular file"),
                       child_benchy_resolve_env, NULL);
    unsetenv("BENCHY_CONFIG_FILE");

    /* a relative path names the cwd's entry even when it is a FIFO: the
     * source tree's file of the same name is not read in its place */
    char cwd[VB_PATH_MAX], sub[VB_PATH_MAX];
    vb_snprintf(sub, sizeof sub, "%s/rel/scenarios/benchy", g_tmp);
    assert_int_equal(vb_mkdir_p(sub), 0);
    vb_snprintf(sub, sizeof sub, "%s/rel/scenarios/benchy/quick.yaml", g_tmp);
    assert_int_equal(mkfifo(sub, 0664), 0);
    assert_non_null(getcwd(cwd, sizeof cwd));
    vb_snprintf(sub, sizeof sub, "%s/rel", g_tmp);
    assert_int_equal(chdir(sub), 0);
    tu_expect_exit_all(2, LIST("scenarios/benchy/quick.yaml", "a FIFO (named pipe)"), child_benchy_load,
                       (void *)"scenarios/benchy/quick.yaml");
    assert_int_equal(chdir(cwd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_scenario_base_and_short),
        cmocka_unit_test(test_scenario_tiny_small),
        cmocka_unit_test(test_default_yaml_path),
        cmocka_unit_test(test_yaml_features),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_flag_errors),
        cmocka_unit_test(test_validation_errors),
        cmocka_unit_test(test_yaml_errors),
        cmocka_unit_test(test_set_unknown),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_benchy_load),
        cmocka_unit_test(test_benchy_errors),
        cmocka_unit_test(test_benchy_resolve),
        cmocka_unit_test(test_help_lists_every_key),
        cmocka_unit_test(test_flag_grammar),
        cmocka_unit_test(test_not_regular_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
