/* config.c: built-in defaults < named YAML config < command-line flags,
 * then validation; plus benchy's own YAML.
 *
 * Every key lives in one table (name, type, field). YAML values and flags are
 * both turned into text and go through the same typed setter, so a key
 * behaves identically wherever it is written. Each key also remembers where
 * its current value came from so that a failed cross-key check can name the
 * file or flag to fix.
 */
#include "core/config/config.h"
#include "core/results/results.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/comm/comm.h"
#include "core/config/flag.h"
#include "core/prof/cupti_trace.h"
#include "core/util/yaml_util.h"
#include "kernels/ops.h"

typedef enum {
    KT_INT,   /* int */
    KT_FLOAT, /* float */
    KT_BOOL,  /* bool; on the command line `--key` alone means true */
    KT_STR,   /* char[size] */
    KT_INT2,  /* int[2]: YAML [a, b] or flag a,b */
    KT_LIMIT, /* int where None/null/~ means 0 = no limit */
    KT_U64,   /* unsigned long long */
} key_type;

/* One key of the config: its parser, its field and its help, so that the
 * help `run --help` prints is the list of what the parser accepts. */
typedef struct {
    const char *name;
    key_type type;
    size_t offset, size;
    bool cli_only;       /* yaml_config/config choose the file, so they cannot sit inside it */
    const char *section; /* non-NULL on the first key of a help section: its title */
    const char *value;   /* the value's form in the help: N, FILE, true|false ... */
    const char *help;
} key_def;

#define FIELD(f) offsetof(vb_config, f), sizeof(((vb_config *)0)->f)

static const key_def g_keys[] = {
    {"yaml_config", KT_STR, FIELD(yaml_config), true, "run and train", "FILE", "named configs in the tutorial's YAML layout"},
    {"config", KT_STR, FIELD(config), true, NULL, "NAME", "the named config to start from: base, short, tiny, small"},
    {"embed_dim", KT_INT, FIELD(embed_dim), false, "model (the tutorial's ViT)", "N", "embedding width"},
    {"depth", KT_INT, FIELD(depth), false, NULL, "N", "transformer blocks"},
    {"patch_size", KT_INT, FIELD(patch_size), false, NULL, "N", "square patch edge in grid points"},
    {"num_heads", KT_INT, FIELD(num_heads), false, NULL, "N", "attention heads (embed_dim / num_heads = head dim)"},
    {"dropout", KT_FLOAT, FIELD(dropout), false, NULL, "X", "accepted for the tutorial's configs; only 0 (this trainer has no dropout)"},
    {"img_size", KT_INT2, FIELD(img_size), false, NULL, "H,W", "grid of every field"},
    {"n_in_channels", KT_INT, FIELD(n_in_channels), false, NULL, "N", "input variables"},
    {"n_out_channels", KT_INT, FIELD(n_out_channels), false, NULL, "N", "predicted variables"},
    {"dt", KT_INT, FIELD(dt), false, "training", "N", "steps between input and target"},
    {"global_batch_size", KT_INT, FIELD(global_batch_size), false, NULL, "N", "samples a step over all data-parallel ranks"},
    {"local_batch_size", KT_INT, FIELD(local_batch_size), false, NULL, "N", "samples a step per data-parallel rank (global = N x dp); 0 = from the global one"},
    {"num_iters", KT_INT, FIELD(num_iters), false, NULL, "N", "training steps"},
    {"num_epochs", KT_INT, FIELD(num_epochs), false, NULL, "N", "stop after N epochs if sooner (0 = num_iters decides)"},
    {"lr", KT_FLOAT, FIELD(lr), false, NULL, "X", "peak learning rate"},
    {"lr_schedule", KT_STR, FIELD(lr_schedule), false, NULL, "cosine|constant", "learning-rate schedule"},
    {"warmup", KT_INT, FIELD(warmup), false, NULL, "N", "linear warm-up steps of the learning rate"},
    {"base_batch_size", KT_INT, FIELD(base_batch_size), false, NULL, "N", "scale lr by sqrt(global batch / N) (0 = no scaling)"},
    {"optimizer", KT_STR, FIELD(optimizer), false, NULL, "Adam", "the optimizer (Adam only)"},
    {"amp_mode", KT_STR, FIELD(amp_mode), false, NULL, "none|bf16|fp16|fp8", "mixed precision (bf16 and fp16 need --backend cuda; fp8 runs FP8 GEMMs on cuda, emulated in float32 on cpu)"},
    {"fp8_amax_history_len", KT_INT, FIELD(fp8_amax_history_len), false, NULL, "N", "fp8: steps of amax history behind each scale (delayed scaling)"},
    {"fp8_amax_compute_algo", KT_STR, FIELD(fp8_amax_compute_algo), false, NULL, "max|most_recent", "fp8: the amax a scale derives from: the history's max or newest"},
    {"fp8_margin", KT_INT, FIELD(fp8_margin), false, NULL, "N", "fp8: scale = fp8_max / amax / 2^N"},
    {"enable_fused", KT_BOOL, FIELD(enable_fused), false, NULL, "true|false", "fused Adam (one pass over parameters, gradients and moments)"},
    {"enable_jit", KT_BOOL, FIELD(enable_jit), false, NULL, "true|false", "fused elementwise passes (the tutorial's torch.jit scripting)"},
    {"cuda_graphs", KT_BOOL, FIELD(cuda_graphs), false, NULL, "true|false", "record each step once as a CUDA graph and replay it (cuda)"},
    {"loss_scale", KT_STR, FIELD(loss_scale), false, NULL, "auto|dynamic|none", "fp16 loss scaling (auto = dynamic with fp16)"},
    {"loss_scale_init", KT_FLOAT, FIELD(loss_scale_init), false, NULL, "X", "initial fp16 loss scale"},
    {"loss_scale_growth_interval", KT_INT, FIELD(loss_scale_growth_interval), false, NULL, "N", "steps without overflow before the loss scale doubles"},
    {"tf32", KT_BOOL, FIELD(tf32), false, NULL, "true|false", "TF32 tensor cores for float32 GEMMs and attention (cuda)"},
    {"attention", KT_STR, FIELD(attention), false, NULL, "flash|cudnn", "attention kernel: vitbench's own, or cuDNN's fused one (cuda)"},
    {"expdir", KT_STR, FIELD(expdir), false, NULL, "DIR", "the tutorial's log directory key (accepted; results go to --output_dir)"},
    {"data_loader_config", KT_STR, FIELD(data_loader_config), false, "data", "pytorch|dali", "dali: copy the next batch on a second CUDA stream during the step"},
    {"num_data_workers", KT_INT, FIELD(num_data_workers), false, NULL, "N", "loader threads (0 = load on the training thread)"},
    {"data_read", KT_STR, FIELD(data_read), false, NULL, "mmap|pread", "how the loader reads contiguous datasets"},
    {"normalize_on_device", KT_BOOL, FIELD(normalize_on_device), false, NULL, "true|false", "the loader copies raw values; batches are normalised after the copy"},
    {"synthetic_resident", KT_BOOL, FIELD(synthetic_resident), false, NULL, "true|false", "SYNTHETIC trials copy their batch to the device once and reuse it (pytorch loader)"},
    {"limit_nsamples", KT_LIMIT, FIELD(limit_nsamples), false, NULL, "N|None", "use at most N training samples (None or 0 = all)"},
    {"limit_nsamples_val", KT_LIMIT, FIELD(limit_nsamples_val), false, NULL, "N|None", "use at most N validation samples (None or 0 = all)"},
    {"train_data_path", KT_STR, FIELD(train_data_path), false, NULL, "DIR", "training year files (*.h5)"},
    {"valid_data_path", KT_STR, FIELD(valid_data_path), false, NULL, "DIR", "validation year files (*.h5)"},
    {"inf_data_path", KT_STR, FIELD(inf_data_path), false, NULL, "DIR", "the tutorial's inference split (accepted, unused)"},
    {"time_means_path", KT_STR, FIELD(time_means_path), false, NULL, "FILE", "the tutorial's time-means file (accepted, unused)"},
    {"global_means_path", KT_STR, FIELD(global_means_path), false, NULL, "FILE", "per-channel means (.npy) for normalisation"},
    {"global_stds_path", KT_STR, FIELD(global_stds_path), false, NULL, "FILE", "per-channel standard deviations (.npy)"},
    {"shuffle", KT_BOOL, FIELD(shuffle), false, NULL, "true|false", "shuffle training samples each epoch"},
    {"seed", KT_U64, FIELD(seed), false, "runs and results", "N", "seed of initialisation and shuffling"},
    {"init_checkpoint", KT_STR, FIELD(init_checkpoint), false, NULL, "FILE", "start from a checkpoint.h5"},
    {"output_dir", KT_STR, FIELD(output_dir), false, NULL, "DIR", "where run directories go"},
    {"run_name", KT_STR, FIELD(run_name), false, NULL, "NAME", "run directory name (default <config>_<time>; never overwritten; also --run_num)"},
    {"backend", KT_STR, FIELD(backend), false, NULL, "cpu|cuda|auto", "where the step runs (auto: cuda when a GPU is visible)"},
    {"comm_backend", KT_STR, FIELD(comm_backend), false, NULL, "auto|mpi|nccl", "data plane for collectives (auto: nccl on cuda when built)"},
    {"thread_policy", KT_STR, FIELD(thread_policy), false, NULL, "adapt|fixed", "cpu: fewer OpenMP threads when other work holds the cores as the run starts (adapt), or OMP_NUM_THREADS as given (default $VB_THREAD_POLICY, else adapt)"},
    {"enable_benchy", KT_BOOL, FIELD(enable_benchy), false, NULL, "true|false", "train: run benchy's trials instead (what run does)"},
    {"benchy_config", KT_STR, FIELD(benchy_config), false, NULL, "FILE", "benchy's YAML (default $BENCHY_CONFIG_FILE, else benchy's defaults)"},
    {"save_checkpoint", KT_BOOL, FIELD(save_checkpoint), false, NULL, "true|false", "train: write checkpoint.h5"},
    {"progress", KT_STR, FIELD(progress), false, NULL, "auto|bar|lines|none", "progress output (auto: a bar on a terminal, lines under mpirun/srun)"},
    {"profile_steps", KT_INT, FIELD(profile_steps), false, NULL, "N", "timed FULL steps recorded in timeline.csv, from the last timed FULL trials (0 = none)"},
    {"cupti", KT_BOOL, FIELD(cupti), false, NULL, "true|false", "per-kernel GPU times from CUPTI into kernels.csv (run, cuda)"},
    {"tensor_parallel", KT_INT, FIELD(tensor_parallel), false, "distributed (under mpirun -np N or srun; a plain ./vitbench is one rank)", "N", "split heads / MLP over N ranks"},
    {"context_parallel", KT_INT, FIELD(context_parallel), false, NULL, "N", "split the tokens over N ranks"},
    {"parallel_order", KT_STR, FIELD(parallel_order), false, NULL, "O", "rank layout, first named varies fastest; dp = ranks / (tp x cp)"},
    {"bucket_cap_mb", KT_FLOAT, FIELD(bucket_cap_mb), false, NULL, "X", "DDP gradient bucket size in MiB (fractions allowed)"},
    {"noddp", KT_BOOL, FIELD(noddp), false, NULL, "true|false", "no gradient communication (measures its cost; replicas diverge)"},
    {"disable_broadcast_buffers", KT_BOOL, FIELD(disable_broadcast_buffers), false, NULL, "true|false", "accepted (the ViT has no buffers)"},
    {"wireup_info", KT_STR, FIELD(wireup_info), false, NULL, "env", "the tutorial's wire-up key (accepted; MPI or Slurm set up the ranks)"},
    {"wireup_store", KT_STR, FIELD(wireup_store), false, NULL, "tcp", "the tutorial's wire-up key (accepted)"},
};
#define NKEYS ((int)(sizeof g_keys / sizeof g_keys[0]))

/* Other spellings the tutorial uses: train.py's --run_num tags the run. */
static const struct { const char *alias, *name; } g_aliases[] = {{"run_num", "run_name"}};

static int find_key(const char *name) {
    for (size_t a = 0; a < sizeof g_aliases / sizeof g_aliases[0]; a++)
        if (strcmp(name, g_aliases[a].alias) == 0) name = g_aliases[a].name;
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(g_keys[i].name, name) == 0) return i;
    return -1;
}

static int key_index(const char *name) {
    int k = find_key(name);
    if (k < 0) vb_die_internal("config key table has no '%s'", name);
    return k;
}

/* "; did you mean [--]KEY?" with the nearest key (aliases too) when one is
 * close to the unknown name, else "" */
static const char *key_hint(const char *name, bool as_flag, char *out, size_t n) {
    vb_flag_near near;
    vb_flag_near_init(&near, name);
    for (int i = 0; i < NKEYS; i++) vb_flag_near_try(&near, g_keys[i].name);
    for (size_t a = 0; a < sizeof g_aliases / sizeof g_aliases[0]; a++) vb_flag_near_try(&near, g_aliases[a].alias);
    const char *best = vb_flag_near_best(&near);
    if (best)
        snprintf(out, n, "; did you mean %s%s?", as_flag ? "--" : "", best);
    else
        out[0] = '\0';
    return out;
}

/* ---- where each value came from ----
 * A side table rather than a field of vb_config so the struct stays plain
 * data (copied, broadcast). It belongs to one config at a time; for any
 * other config, messages fall back to the origin the caller passes. */
enum { ORIGIN_UNKNOWN = -1, ORIGIN_DEFAULT = 0, ORIGIN_FILE = 1, ORIGIN_FLAG = 2 };
static struct {
    const vb_config *owner;
    int rank[NKEYS];
    char text[NKEYS][VB_PATH_MAX + 96];
} g_origin;

static void origin_claim(const vb_config *c, int rank) {
    if (g_origin.owner == c && rank == ORIGIN_UNKNOWN) return;
    g_origin.owner = c;
    for (int i = 0; i < NKEYS; i++) {
        g_origin.rank[i] = rank;
        snprintf(g_origin.text[i], sizeof g_origin.text[i], "built-in default");
    }
}

static void origin_record(const vb_config *c, int key, const char *origin, int rank) {
    origin_claim(c, ORIGIN_UNKNOWN); /* no-op when c already owns the table */
    g_origin.rank[key] = rank;
    snprintf(g_origin.text[key], sizeof g_origin.text[key], "%s", origin);
}

static int origin_rank(const vb_config *c, int key) {
    return g_origin.owner == c ? g_origin.rank[key] : ORIGIN_UNKNOWN;
}

static const char *origin_text(const vb_config *c, int key, const char *fallback) {
    return origin_rank(c, key) == ORIGIN_UNKNOWN ? fallback : g_origin.text[key];
}

static int origin_rank_of(const char *origin) {
    return strncmp(origin, "flag ", 5) == 0 ? ORIGIN_FLAG : ORIGIN_FILE;
}

/* ---- text -> typed values, shared by YAML, flags and benchy ---- */

static bool is_null_text(const char *s) {
    static const char *nulls[] = {"~", "null", "Null", "NULL", "None", "none"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        if (strcmp(s, nulls[i]) == 0) return true;
    return false;
}

static bool parse_int_text(const char *s, int *out) {
    long long v;
    if (!vb_flag_parse_ll(s, &v) || v < INT_MIN || v > INT_MAX) return false;
    *out = (int)v;
    return true;
}

/* "32,64", "32, 64" or "[32, 64]" */
static bool parse_int2_text(const char *s, int out[2]) {
    char buf[128];
    size_t len = strlen(s);
    if (len >= sizeof buf) return false;
    const char *b = s, *e = s + len;
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    if (b < e && *b == '[') {
        if (e[-1] != ']') return false;
        b++, e--;
    }
    memcpy(buf, b, (size_t)(e - b));
    buf[e - b] = '\0';
    char *comma = strchr(buf, ',');
    if (!comma || strchr(comma + 1, ',')) return false;
    *comma = '\0';
    char *parts[2] = {buf, comma + 1};
    for (int i = 0; i < 2; i++) {
        char *p = parts[i], *q = p + strlen(p);
        while (*p && isspace((unsigned char)*p)) p++;
        while (q > p && isspace((unsigned char)q[-1])) *--q = '\0';
        if (!parse_int_text(p, &out[i])) return false;
    }
    return true;
}

/* Parses `text` as type t into dst (size bytes). On failure writes a short
 * reason naming the value into err and returns false. */
static bool parse_value(key_type t, const char *text, bool is_null, void *dst, size_t size, char *err,
                        size_t errn) {
    switch (t) {
    case KT_INT:
        if (is_null || !parse_int_text(text, (int *)dst)) {
            snprintf(err, errn, "'%s' is not an integer", text);
            return false;
        }
        return true;
    case KT_LIMIT:
        if (is_null || is_null_text(text)) {
            *(int *)dst = 0;
            return true;
        }
        if (!parse_int_text(text, (int *)dst)) {
            snprintf(err, errn, "'%s' is not an integer or None", text);
            return false;
        }
        return true;
    case KT_U64: {
        errno = 0;
        char *end;
        unsigned long long v = is_null ? 0 : strtoull(text, &end, 10);
        if (is_null || !isdigit((unsigned char)text[0]) || *end || errno) {
            snprintf(err, errn, "'%s' is not a non-negative integer", text);
            return false;
        }
        *(unsigned long long *)dst = v;
        return true;
    }
    case KT_FLOAT: {
        double v = 0;
        vb_num_status st = is_null ? VB_NUM_BAD : vb_flag_parse_double(text, &v);
        if (st == VB_NUM_OK && fabs(v) > FLT_MAX) st = VB_NUM_OVERFLOW;
        /* named as given: 1e-400 is not "lr = 0" */
        if (st == VB_NUM_OK && v != 0 && (float)v == 0) st = VB_NUM_UNDERFLOW;
        if (st == VB_NUM_OVERFLOW || st == VB_NUM_UNDERFLOW) {
            snprintf(err, errn, "'%s' is %s single-precision number (%s)", text,
                     st == VB_NUM_OVERFLOW ? "not a finite" : "too small for a",
                     st == VB_NUM_OVERFLOW ? "at most 3.4e38" : "one below 1.4e-45 is 0");
            return false;
        }
        if (st != VB_NUM_OK) {
            snprintf(err, errn, "'%s' is %s", text, vb_num_problem(st));
            return false;
        }
        *(float *)dst = (float)v;
        return true;
    }
    case KT_BOOL:
        if (is_null || !vb_flag_parse_bool(text, (bool *)dst)) {
            snprintf(err, errn, "'%s' is not a boolean (true or false)", text);
            return false;
        }
        return true;
    case KT_INT2:
        if (is_null || !parse_int2_text(text, (int *)dst)) {
            snprintf(err, errn, "'%s' is not two integers (e.g. [32, 64], or 32,64 on the command line)", text);
            return false;
        }
        return true;
    case KT_STR: {
        const char *s = is_null ? "" : text;
        size_t len = strlen(s);
        /* run.json and the results' CSVs hold it as UTF-8 text */
        const long bad = vb_utf8_invalid_at(s);
        if (bad >= 0) {
            snprintf(err, errn, "the value is not valid UTF-8 (byte 0x%02x at byte %ld)", (unsigned char)s[bad], bad);
            return false;
        }
        if (len >= size) {
            snprintf(err, errn, "'%.40s...' is too long (%zu characters, at most %zu)", s, len, size - 1);
            return false;
        }
        memcpy(dst, s, len + 1);
        return true;
    }
    }
    snprintf(err, errn, "unhandled key type");
    return false;
}

/* Sets key k from text. `origin` is stored for later messages; `where`
 * (origin plus detail such as a line number) prefixes a parse error. */
static void set_key(vb_config *c, int k, const char *text, bool is_null, const char *origin, int rank,
                    const char *line_note) {
    const key_def *d = &g_keys[k];
    char err[512];
    if (!parse_value(d->type, text, is_null, (char *)c + d->offset, d->size, err, sizeof err)) {
        /* a flag already names its key: "flag --lr: 'abc' is not a number" */
        if (rank == ORIGIN_FLAG) vb_die_input("%s: %s%s", origin, err, line_note);
        vb_die_input("%s: %s: %s%s", origin, d->name, err, line_note);
    }
    origin_record(c, k, origin, rank);
}

void vb_config_set(vb_config *c, const char *key, const char *value, const char *origin) {
    int k = find_key(key);
    char hint[160];
    if (k < 0) vb_die_input("%s: unknown key '%s'%s", origin, key, key_hint(key, origin_rank_of(origin) == ORIGIN_FLAG, hint, sizeof hint));
    if (!value) vb_die_input("%s: %s: missing value", origin, key);
    set_key(c, k, value, false, origin, origin_rank_of(origin), "");
}

/* ---- defaults ---- */

void vb_config_defaults(vb_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->yaml_config, sizeof c->yaml_config, "scenarios/vit.yaml");
    snprintf(c->config, sizeof c->config, "base");
    /* the tutorial's base config (config/ViT.yaml) */
    c->embed_dim = 384;
    c->depth = 12;
    c->patch_size = 8;
    c->num_heads = 8;
    c->dropout = 0.0f;
    c->img_size[0] = 360;
    c->img_size[1] = 720;
    c->n_in_channels = 20;
    c->n_out_channels = 20;
    c->dt = 1;
    c->global_batch_size = 16;
    c->local_batch_size = 0;
    c->num_iters = 30000;
    c->num_epochs = 0;
    c->lr = 5e-4f;
    snprintf(c->lr_schedule, sizeof c->lr_schedule, "cosine");
    c->warmup = 0;
    c->base_batch_size = 0;
    snprintf(c->optimizer, sizeof c->optimizer, "Adam");
    snprintf(c->amp_mode, sizeof c->amp_mode, "none");
    /* Transformer Engine's DelayedScaling defaults */
    c->fp8_amax_history_len = 1024;
    snprintf(c->fp8_amax_compute_algo, sizeof c->fp8_amax_compute_algo, "max");
    c->fp8_margin = 0;
    c->enable_fused = false;
    c->enable_jit = false;
    c->cuda_graphs = false;
    snprintf(c->loss_scale, sizeof c->loss_scale, "auto");
    c->loss_scale_init = 65536.0f;
    c->loss_scale_growth_interval = 2000;
    c->tf32 = true;
    snprintf(c->attention, sizeof c->attention, "flash");
    snprintf(c->expdir, sizeof c->expdir, "/logs");
    snprintf(c->data_loader_config, sizeof c->data_loader_config, "pytorch");
    c->num_data_workers = 0;
    snprintf(c->data_read, sizeof c->data_read, "mmap");
    c->normalize_on_device = false;
    c->synthetic_resident = false;
    c->limit_nsamples = 0;
    c->limit_nsamples_val = 0;
    snprintf(c->train_data_path, sizeof c->train_data_path, "/data/train");
    snprintf(c->valid_data_path, sizeof c->valid_data_path, "/data/valid");
    snprintf(c->inf_data_path, sizeof c->inf_data_path, "/data/test");
    snprintf(c->time_means_path, sizeof c->time_means_path, "/data/stats/time_means.npy");
    snprintf(c->global_means_path, sizeof c->global_means_path, "/data/stats/global_means.npy");
    snprintf(c->global_stds_path, sizeof c->global_stds_path, "/data/stats/global_stds.npy");
    c->shuffle = true;
    /* this project */
    c->seed = 0;
    c->init_checkpoint[0] = '\0';
    snprintf(c->output_dir, sizeof c->output_dir, VB_RESULTS_DEFAULT_DIR);
    c->run_name[0] = '\0';
    snprintf(c->backend, sizeof c->backend, "cpu");
    snprintf(c->comm_backend, sizeof c->comm_backend, "auto");
    snprintf(c->thread_policy, sizeof c->thread_policy, "adapt");
    c->enable_benchy = false;
    c->benchy_config[0] = '\0';
    c->save_checkpoint = true;
    snprintf(c->progress, sizeof c->progress, "auto");
    c->profile_steps = 5;
    c->cupti = false;
    /* distributed */
    c->tensor_parallel = 1;
    c->context_parallel = 1;
    snprintf(c->parallel_order, sizeof c->parallel_order, "tp-cp-dp");
    c->bucket_cap_mb = VB_BUCKET_CAP_MB_DEFAULT;
    c->noddp = false;
    c->disable_broadcast_buffers = false;
    snprintf(c->wireup_info, sizeof c->wireup_info, "env");
    snprintf(c->wireup_store, sizeof c->wireup_store, "tcp");
    origin_claim(c, ORIGIN_DEFAULT);
    /* a machine's or a test suite's default for every run started there
     * (a file or a flag still wins): validated with the key, named by origin */
    const char *policy = getenv("VB_THREAD_POLICY");
    if (policy && policy[0]) {
        snprintf(c->thread_policy, sizeof c->thread_policy, "%.15s", policy);
        origin_record(c, key_index("thread_policy"), "environment VB_THREAD_POLICY", ORIGIN_DEFAULT);
    }
}

/* ---- help ---- */

int vb_config_nkeys(void) { return NKEYS; }
const char *vb_config_key_name(int i) { return i >= 0 && i < NKEYS ? g_keys[i].name : NULL; }

/* a key's value in c as text (the help's defaults) */
static void key_text(const vb_config *c, const key_def *d, char *out, size_t n) {
    const char *p = (const char *)c + d->offset;
    switch (d->type) {
    case KT_INT: snprintf(out, n, "%d", *(const int *)p); break;
    case KT_LIMIT:
        if (*(const int *)p)
            snprintf(out, n, "%d", *(const int *)p);
        else
            snprintf(out, n, "None");
        break;
    case KT_FLOAT: snprintf(out, n, "%g", (double)*(const float *)p); break;
    case KT_BOOL: snprintf(out, n, "%s", *(const bool *)p ? "true" : "false"); break;
    case KT_STR: snprintf(out, n, "%s", *p ? p : "''"); break;
    case KT_INT2: snprintf(out, n, "%d,%d", ((const int *)p)[0], ((const int *)p)[1]); break;
    case KT_U64: snprintf(out, n, "%llu", *(const unsigned long long *)p); break;
    }
}

void vb_config_print_help(FILE *f) {
    vb_config dflt;
    vb_config_defaults(&dflt);
    fputs("Every key of the config file is a flag, as --key VALUE or --key=VALUE (a bare --key sets a true|false\n"
          "key to true); flags override the named config, which overrides these defaults. '-' and '_' are alike\n"
          "in a name (--local-batch-size); true|false is also 1|0, yes|no, on|off, in any case.\n",
          f);
    for (int i = 0; i < NKEYS; i++) {
        const key_def *d = &g_keys[i];
        if (d->section) fprintf(f, "\n%s:\n", d->section);
        char flag[96], def[128];
        snprintf(flag, sizeof flag, "--%s %s", d->name, d->value);
        key_text(&dflt, d, def, sizeof def);
        fprintf(f, "  %-34s %s (default %s)\n", flag, d->help, def);
    }
}

/* ---- YAML ---- */

/* A relative path is looked up in the cwd first, then in the source tree,
 * so `vitbench` run from a build directory still finds scenarios/vit.yaml.
 * Only a path with nothing at it falls back: a FIFO, directory or dangling
 * symlink in the cwd is what the user named, and the loader says what it is
 * rather than quietly reading the source tree's file of that name. */
static void resolve_path(const char *path, char *out, size_t n, const char *what) {
    const char *chosen = path;
#ifdef VB_SOURCE_DIR
    char alt[VB_PATH_MAX];
    struct stat st;
    if (path[0] && path[0] != '/' && lstat(path, &st) != 0 && errno == ENOENT) {
        int k = snprintf(alt, sizeof alt, "%s/%s", VB_SOURCE_DIR, path);
        if (k > 0 && (size_t)k < sizeof alt && vb_file_exists(alt)) chosen = alt;
    }
#endif
    if (strlen(chosen) >= n) vb_die_input("%s: path '%.60s...' is too long", what, path);
    memmove(out, chosen, strlen(chosen) + 1);
}

/* Text of a YAML value for a scalar key; lists are joined with ',' so that
 * img_size: [32, 64] and --img_size 32,64 parse the same way. */
static const char *yaml_value_text(yaml_document_t *doc, yaml_node_t *v, const key_def *d, const char *where,
                                   int line, char *buf, size_t n) {
    if (v->type == YAML_SCALAR_NODE) return vb_yaml_scalar(v);
    if (v->type == YAML_SEQUENCE_NODE && d->type == KT_INT2) {
        size_t used = 0;
        buf[0] = '\0';
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
            const char *s = vb_yaml_scalar(yaml_document_get_node(doc, *it));
            if (!s) vb_die_input("%s: %s: list entries must be numbers (line %d)", where, d->name, line);
            int k = snprintf(buf + used, n - used, "%s%s", used ? "," : "", s);
            if (k < 0 || (size_t)k >= n - used)
                vb_die_input("%s: %s: list is too long (line %d)", where, d->name, line);
            used += (size_t)k;
        }
        return buf;
    }
    vb_die_input("%s: %s: expected a single value, found %s (line %d)", where, d->name, vb_yaml_kind(v), line);
}

void vb_config_load_yaml(vb_config *c, const char *path, const char *name) {
    char resolved[VB_PATH_MAX];
    resolve_path(path, resolved, sizeof resolved, "yaml_config");
    yaml_document_t doc;
    if (!vb_yaml_load(&doc, resolved, resolved))
        vb_die_input("%s: file is empty (expected named configs such as base:)", resolved);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root->type != YAML_MAPPING_NODE)
        vb_die_input("%s: the top level must map config names to configs, found %s", resolved, vb_yaml_kind(root));

    vb_yaml_pairs top;
    vb_yaml_mapping_pairs(&doc, root, resolved, &top);
    yaml_node_t *node = NULL;
    int node_line = 0;
    char available[512] = "";
    for (int i = 0; i < top.n; i++) {
        if (strcmp(top.pairs[i].key, name) == 0) {
            node = top.pairs[i].value;
            node_line = top.pairs[i].line;
        }
        if (top.pairs[i].value->type == YAML_MAPPING_NODE && strlen(available) + strlen(top.pairs[i].key) + 8 < sizeof available) {
            if (available[0]) strcat(available, ", ");
            strcat(available, top.pairs[i].key);
        }
    }
    vb_yaml_pairs_free(&top);
    if (!node) vb_die_input("%s: no config named '%s' (available: %s)", resolved, name, available);
    if (strlen(name) >= sizeof c->config) vb_die_input("%s: config name '%s' is too long", resolved, name);

    char where[VB_PATH_MAX + 96];
    snprintf(where, sizeof where, "%s [config %s]", resolved, name);
    if (node->type != YAML_MAPPING_NODE)
        vb_die_input("%s: expected a mapping of key: value, found %s (line %d)", where, vb_yaml_kind(node), node_line);

    vb_yaml_pairs pairs;
    vb_yaml_mapping_pairs(&doc, node, where, &pairs);
    for (int i = 0; i < pairs.n; i++) {
        const vb_yaml_pair *p = &pairs.pairs[i];
        int k = find_key(p->key);
        if (k < 0) vb_die_input("%s: unknown key '%s' (line %d)", where, p->key, p->line);
        if (g_keys[k].cli_only)
            vb_die_input("%s: key '%s' (line %d) can only be given on the command line", where, p->key, p->line);
        char listbuf[256], note[32];
        const char *text = yaml_value_text(&doc, p->value, &g_keys[k], where, p->line, listbuf, sizeof listbuf);
        snprintf(note, sizeof note, " (line %d)", p->line);
        set_key(c, k, text, vb_yaml_is_null(p->value), where, ORIGIN_FILE, note);
    }
    vb_yaml_pairs_free(&pairs);
    yaml_document_delete(&doc);

    snprintf(c->yaml_config, sizeof c->yaml_config, "%s", resolved);
    snprintf(c->config, sizeof c->config, "%s", name);
    origin_record(c, key_index("yaml_config"), where, ORIGIN_FILE);
    origin_record(c, key_index("config"), where, ORIGIN_FILE);
}

/* ---- command line ---- */

typedef struct {
    int key;
    const char *value;
    char origin[112]; /* "flag --" + a key of < 96 characters */
} flag_override;

void vb_config_from_args(vb_config *c, int argc, char **argv, int first) {
    int nflags = argc > first ? argc - first : 0;
    flag_override *ov = vb_calloc_check((size_t)nflags + 1, sizeof *ov);
    int n = 0;

    /* pass 1: tokenize and type-check the shape of every flag, so a typo is
     * reported before any file is read */
    const char *bare_bool = NULL; /* previous token: a boolean flag given without a value */
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0' || arg[2] == '=') {
            if (bare_bool)
                vb_die_input("flag %s: unexpected argument '%s' after it (a boolean flag takes true/false or nothing)",
                             bare_bool, arg);
            vb_die_input("unexpected argument '%s' (settings are given as --key value or --key=value)", arg);
        }
        bare_bool = NULL;
        char key[96];
        const char *value;
        if (!vb_flag_split(arg, key, sizeof key, &value)) vb_die_input("flag %.60s...: unknown option", arg);
        int k = find_key(key);
        char hint[160];
        if (k < 0) vb_die_input("flag --%s: unknown option%s", key, key_hint(key, true, hint, sizeof hint));
        if (value) {
            /* --key=value */
        } else if (g_keys[k].type == KT_BOOL) {
            /* store_true like train.py's flags, but `--shuffle false` also works */
            bool ignored;
            if (i + 1 < argc && vb_flag_parse_bool(argv[i + 1], &ignored)) {
                value = argv[++i];
            } else {
                value = "true";
                bare_bool = arg;
            }
        } else {
            if (i + 1 >= argc) vb_die_input("flag --%s: missing value", key);
            if (strncmp(argv[i + 1], "--", 2) == 0 && argv[i + 1][2] != '\0')
                vb_die_input("flag --%s: missing value (next is '%s'; use --%s=VALUE for a value starting with --)",
                             key, argv[i + 1], key);
            value = argv[++i];
        }
        ov[n].key = k;
        ov[n].value = value;
        snprintf(ov[n].origin, sizeof ov[n].origin, "flag --%s", key);
        n++;
    }

    /* the file and config name come first wherever they appear */
    const char *yaml_path = c->yaml_config, *config_name = c->config;
    const char *yaml_origin = NULL, *config_origin = NULL;
    for (int i = 0; i < n; i++) {
        if (strcmp(g_keys[ov[i].key].name, "yaml_config") == 0) yaml_path = ov[i].value, yaml_origin = ov[i].origin;
        if (strcmp(g_keys[ov[i].key].name, "config") == 0) config_name = ov[i].value, config_origin = ov[i].origin;
    }
    if (!yaml_path[0]) vb_die_input("%s: empty path", yaml_origin ? yaml_origin : "yaml_config");
    if (!config_name[0]) vb_die_input("%s: empty config name", config_origin ? config_origin : "config");
    /* copies: the load overwrites c->yaml_config / c->config */
    char path_copy[VB_PATH_MAX], name_copy[sizeof c->config];
    if (strlen(yaml_path) >= sizeof path_copy) vb_die_input("%s: path is too long", yaml_origin ? yaml_origin : "yaml_config");
    if (strlen(config_name) >= sizeof name_copy)
        vb_die_input("%s: config name '%s' is too long", config_origin ? config_origin : "config", config_name);
    strcpy(path_copy, yaml_path);
    strcpy(name_copy, config_name);
    vb_config_load_yaml(c, path_copy, name_copy);

    for (int i = 0; i < n; i++) {
        const char *kn = g_keys[ov[i].key].name;
        if (strcmp(kn, "yaml_config") == 0 || strcmp(kn, "config") == 0) continue;
        set_key(c, ov[i].key, ov[i].value, false, ov[i].origin, ORIGIN_FLAG, "");
    }
    free(ov);

    char where[VB_PATH_MAX + 96];
    snprintf(where, sizeof where, "%s [config %s]", c->yaml_config, c->config);
    vb_config_validate(c, where);
}

/* ---- validation ---- */

/* One line led by the origin of the most recently overriding key (a flag
 * beats a file beats a default); the other key's origin is added when it
 * differs, so the user knows both places to look. */
static void vfail(const vb_config *c, const char *fallback, const char *k1, const char *k2, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 5, 6)));
static void vfail(const vb_config *c, const char *fallback, const char *k1, const char *k2, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int a = key_index(k1), b = k2 ? key_index(k2) : -1;
    if (b >= 0 && origin_rank(c, b) > origin_rank(c, a)) {
        int t = a;
        a = b, b = t;
    }
    const char *lead = origin_text(c, a, fallback);
    if (b >= 0) {
        const char *other = origin_text(c, b, fallback);
        /* a second flag needs no pointer: the user just typed it */
        if (strcmp(other, lead) != 0 && origin_rank(c, b) != ORIGIN_FLAG)
            vb_die_input("%s: %s (%s from %s)", lead, msg, g_keys[b].name, other);
    }
    vb_die_input("%s: %s", lead, msg);
}

static void require_min(const vb_config *c, const char *origin, const char *name, int value, int min) {
    if (value < min) vfail(c, origin, name, NULL, "%s = %d must be >= %d", name, value, min);
}

static bool valid_parallel_order(const char *s) {
    char buf[32];
    if (strlen(s) >= sizeof buf) return false;
    strcpy(buf, s);
    const char *want[3] = {"tp", "cp", "dp"};
    bool seen[3] = {false, false, false};
    int count = 0;
    char *save = NULL;
    /* strtok would accept "tp--cp-dp"; require exactly one '-' between names */
    for (const char *p = s; *p; p++)
        if (*p == '-' && (p == s || p[1] == '-' || p[1] == '\0')) return false;
    for (char *tok = strtok_r(buf, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
        int hit = -1;
        for (int i = 0; i < 3; i++)
            if (strcmp(tok, want[i]) == 0) hit = i;
        if (hit < 0 || seen[hit]) return false;
        seen[hit] = true;
        count++;
    }
    return count == 3;
}

void vb_config_validate(const vb_config *c, const char *origin) {
    if (c->img_size[0] < 1 || c->img_size[1] < 1)
        vfail(c, origin, "img_size", NULL, "img_size = [%d, %d] must be two positive integers", c->img_size[0],
              c->img_size[1]);
    require_min(c, origin, "patch_size", c->patch_size, 1);
    if (c->img_size[0] % c->patch_size || c->img_size[1] % c->patch_size)
        vfail(c, origin, "img_size", "patch_size", "img_size = [%d, %d] is not divisible by patch_size = %d",
              c->img_size[0], c->img_size[1], c->patch_size);
    require_min(c, origin, "embed_dim", c->embed_dim, 1);
    require_min(c, origin, "num_heads", c->num_heads, 1);
    if (c->embed_dim % c->num_heads)
        vfail(c, origin, "embed_dim", "num_heads", "embed_dim = %d is not divisible by num_heads = %d", c->embed_dim,
              c->num_heads);
    require_min(c, origin, "depth", c->depth, 1);
    require_min(c, origin, "n_in_channels", c->n_in_channels, 1);
    require_min(c, origin, "n_out_channels", c->n_out_channels, 1);
    require_min(c, origin, "dt", c->dt, 1);
    require_min(c, origin, "global_batch_size", c->global_batch_size, 1);
    require_min(c, origin, "local_batch_size", c->local_batch_size, 0);
    require_min(c, origin, "num_iters", c->num_iters, 1);
    require_min(c, origin, "num_epochs", c->num_epochs, 0);
    require_min(c, origin, "warmup", c->warmup, 0);
    require_min(c, origin, "base_batch_size", c->base_batch_size, 0);
    require_min(c, origin, "num_data_workers", c->num_data_workers, 0);
    require_min(c, origin, "profile_steps", c->profile_steps, 0);
    if (strcmp(c->progress, "auto") != 0 && strcmp(c->progress, "bar") != 0 && strcmp(c->progress, "lines") != 0 &&
        strcmp(c->progress, "none") != 0)
        vfail(c, origin, "progress", NULL, "progress = '%s' must be auto, bar, lines or none", c->progress);
    if (c->limit_nsamples < 0)
        vfail(c, origin, "limit_nsamples", NULL, "limit_nsamples = %d must be >= 0 (0 or None = no limit)",
              c->limit_nsamples);
    if (c->limit_nsamples_val < 0)
        vfail(c, origin, "limit_nsamples_val", NULL, "limit_nsamples_val = %d must be >= 0 (0 or None = no limit)",
              c->limit_nsamples_val);
    if (!(c->lr > 0.0f)) vfail(c, origin, "lr", NULL, "lr = %g must be > 0", (double)c->lr);
    if (c->dropout != 0.0f)
        vfail(c, origin, "dropout", NULL, "dropout = %g is not supported: this trainer has no dropout (use 0.0)",
              (double)c->dropout);
    if (strcmp(c->lr_schedule, "cosine") != 0 && strcmp(c->lr_schedule, "constant") != 0)
        vfail(c, origin, "lr_schedule", NULL, "lr_schedule = '%s' must be cosine or constant", c->lr_schedule);
    if (strcmp(c->optimizer, "Adam") != 0)
        vfail(c, origin, "optimizer", NULL, "optimizer = '%s' is not supported (only Adam)", c->optimizer);
    const bool amp_half = strcmp(c->amp_mode, "fp16") == 0 || strcmp(c->amp_mode, "bf16") == 0;
    if (amp_half && strcmp(c->backend, "cpu") == 0)
        vfail(c, origin, "amp_mode", NULL, "amp_mode = %s needs the CUDA backend (use none on cpu)", c->amp_mode);
    const bool amp_fp8 = strcmp(c->amp_mode, "fp8") == 0;
    if (!amp_half && !amp_fp8 && strcmp(c->amp_mode, "none") != 0)
        vfail(c, origin, "amp_mode", NULL, "amp_mode = '%s' must be none, fp16, bf16 or fp8", c->amp_mode);
    require_min(c, origin, "fp8_amax_history_len", c->fp8_amax_history_len, 1);
    require_min(c, origin, "fp8_margin", c->fp8_margin, 0);
    if (c->fp8_margin > VB_FP8_MAX_MARGIN)
        vfail(c, origin, "fp8_margin", NULL,
              "fp8_margin = %d must be <= %d: a scale is fp8_max / amax / 2^margin, and above %d it falls below the "
              "smallest normal float (2^-126) for values FP8 holds unscaled (from 128 on, every scale is 0)",
              c->fp8_margin, VB_FP8_MAX_MARGIN, VB_FP8_MAX_MARGIN);
    if (strcmp(c->fp8_amax_compute_algo, "max") != 0 && strcmp(c->fp8_amax_compute_algo, "most_recent") != 0)
        vfail(c, origin, "fp8_amax_compute_algo", NULL, "fp8_amax_compute_algo = '%s' must be max or most_recent",
              c->fp8_amax_compute_algo);
    /* delayed scaling scales every gradient GEMM operand itself */
    if (amp_fp8 && strcmp(c->loss_scale, "dynamic") == 0)
        vfail(c, origin, "loss_scale", "amp_mode",
              "loss_scale = dynamic with amp_mode = fp8: delayed scaling scales each gradient itself (use auto or "
              "none)");
    if (strcmp(c->attention, "flash") != 0 && strcmp(c->attention, "cudnn") != 0)
        vfail(c, origin, "attention", NULL, "attention = '%s' must be flash or cudnn", c->attention);
    else if (strcmp(c->attention, "cudnn") == 0 && strcmp(c->backend, "cpu") == 0)
        vfail(c, origin, "attention", NULL, "attention = cudnn needs the CUDA backend (use flash on cpu)");
    else if (strcmp(c->attention, "cudnn") == 0 && !amp_half && !(amp_fp8 && strcmp(c->backend, "cpu") != 0))
        /* fp8 on CUDA keeps bfloat16 activations between its FP8 GEMMs:
         * attention runs on them as under bf16 */
        vfail(c, origin, "attention", NULL,
              "attention = cudnn needs amp_mode bf16, fp16 or fp8 (cuDNN's fused attention has no float32)");
    if (strcmp(c->loss_scale, "auto") != 0 && strcmp(c->loss_scale, "dynamic") != 0 &&
        strcmp(c->loss_scale, "none") != 0)
        vfail(c, origin, "loss_scale", NULL, "loss_scale = '%s' must be auto, dynamic or none", c->loss_scale);
    /* float16 gradients underflow without scaling: the tutorial always pairs fp16 with GradScaler */
    if (strcmp(c->amp_mode, "fp16") == 0 && strcmp(c->loss_scale, "none") == 0)
        vfail(c, origin, "loss_scale", "amp_mode",
              "loss_scale = none with amp_mode = fp16: float16 training needs dynamic loss scaling (use auto or "
              "dynamic)");
    if (!(c->loss_scale_init > 0.0f) || !isfinite(c->loss_scale_init))
        vfail(c, origin, "loss_scale_init", NULL, "loss_scale_init = %g must be a finite number > 0",
              (double)c->loss_scale_init);
    require_min(c, origin, "loss_scale_growth_interval", c->loss_scale_growth_interval, 1);
    /* '' is no directory: it would silently mean results/ (as --config '' is
     * no config) */
    if (!c->output_dir[0])
        vfail(c, origin, "output_dir", NULL, "output_dir is empty: name the directory the run directories go to "
                                             "(default results)");
    /* the run name becomes a directory name, a report heading and a table
     * cell: a line break or other control character would start a new line
     * in each of them */
    bool control = false;
    for (const char *ch = c->run_name; *ch && !control; ch++)
        if ((unsigned char)*ch < 0x20 || *ch == 0x7f) {
            vfail(c, origin, "run_name", NULL, "run_name holds a line break or control character (byte 0x%02x)",
                  (unsigned char)*ch);
            control = true;
        }
    /* ... and a character that reorders what is shown around it would make
     * a listing, a report heading or a terminal show another name */
    unsigned hidden;
    if (!control && vb_utf8_invalid_at(c->run_name) < 0 && vb_utf8_hidden_at(c->run_name, &hidden) >= 0)
        vfail(c, origin, "run_name", NULL,
              "run_name holds U+%04X (at byte %ld), an invisible character that changes how the text around it is "
              "shown (a bidirectional or C1 control)",
              hidden, vb_utf8_hidden_at(c->run_name, &hidden));
    /* dali copies each batch on a second CUDA stream while the previous step
     * computes; backend auto is checked once it is resolved (trainer) */
    if (strcmp(c->data_read, "mmap") != 0 && strcmp(c->data_read, "pread") != 0)
        vfail(c, origin, "data_read", NULL, "data_read = '%s' must be mmap or pread", c->data_read);
    if (strcmp(c->data_loader_config, "pytorch") != 0 && strcmp(c->data_loader_config, "dali") != 0)
        vfail(c, origin, "data_loader_config", NULL, "data_loader_config = '%s' must be pytorch or dali",
              c->data_loader_config);
    else if (strcmp(c->data_loader_config, "dali") == 0 && strcmp(c->backend, "cpu") == 0)
        vfail(c, origin, "data_loader_config", NULL,
              "data_loader_config = dali needs the CUDA backend (it overlaps the batch copy with the step on a "
              "second CUDA stream): use --backend cuda, or pytorch on cpu");
    /* dali's point is a copy per step overlapped with the one before: a
     * batch that stays on the device has nothing to overlap */
    if (c->synthetic_resident && strcmp(c->data_loader_config, "dali") == 0)
        vfail(c, origin, "synthetic_resident", NULL,
              "synthetic_resident = true keeps SYNTHETIC's batch on the device, and data_loader_config = dali "
              "copies a batch every step: use one or the other");
    /* auto is resolved when the run starts (cuda when compiled in and a GPU is visible) */
    if (strcmp(c->backend, "cpu") != 0 && strcmp(c->backend, "cuda") != 0 && strcmp(c->backend, "auto") != 0)
        vfail(c, origin, "backend", NULL, "backend = '%s' must be cpu, cuda or auto", c->backend);
    else if (strcmp(c->backend, "cuda") == 0 && !vb_ops_by_name("cuda"))
        vfail(c, origin, "backend", NULL,
              "backend = cuda is not available in this build (configure with -DVB_CUDA=ON on a machine with the CUDA toolkit)");
    /* a CUDA graph records GPU work; auto is checked once resolved (trainer) */
    if (c->cuda_graphs && strcmp(c->backend, "cpu") == 0)
        vfail(c, origin, "cuda_graphs", "backend",
              "cuda_graphs = true needs the CUDA backend (a CUDA graph records GPU work): use --backend cuda");
    /* CUPTI traces GPU work; auto is checked once resolved (trainer) */
    if (c->cupti && strcmp(c->backend, "cpu") == 0)
        vfail(c, origin, "cupti", "backend", "cupti = true needs the CUDA backend (CUPTI times GPU kernels): use --backend cuda");
    else if (c->cupti && !vb_cupti_compiled())
        vfail(c, origin, "cupti", NULL,
              "cupti = true is not available in this build (the CUDA backend with cupti.h was not found when "
              "configuring)");
    /* NCCL moves device memory only; auto picks it on cuda when built (trainer) */
    if (strcmp(c->thread_policy, "adapt") != 0 && strcmp(c->thread_policy, "fixed") != 0)
        vfail(c, origin, "thread_policy", NULL, "thread_policy = '%s' must be adapt or fixed", c->thread_policy);
    if (strcmp(c->comm_backend, "auto") != 0 && strcmp(c->comm_backend, "mpi") != 0 &&
        strcmp(c->comm_backend, "nccl") != 0)
        vfail(c, origin, "comm_backend", NULL, "comm_backend = '%s' must be auto, mpi or nccl", c->comm_backend);
    else if (strcmp(c->comm_backend, "nccl") == 0 && strcmp(c->backend, "cpu") == 0)
        vfail(c, origin, "comm_backend", NULL,
              "comm_backend = nccl needs the CUDA backend (NCCL moves GPU memory): use --backend cuda, or mpi on cpu");
    else if (strcmp(c->comm_backend, "nccl") == 0 && !vb_comm_data_nccl())
        vfail(c, origin, "comm_backend", NULL,
              "comm_backend = nccl is not available in this build (the CUDA backend with NCCL was not found when "
              "configuring): use mpi");
    require_min(c, origin, "tensor_parallel", c->tensor_parallel, 1);
    require_min(c, origin, "context_parallel", c->context_parallel, 1);
    if (!valid_parallel_order(c->parallel_order))
        vfail(c, origin, "parallel_order", NULL,
              "parallel_order = '%s' must order tp, cp and dp separated by '-' (e.g. tp-cp-dp)", c->parallel_order);
    /* a float so that tiny models can still be split into several buckets (0.05 MiB) */
    if (!(c->bucket_cap_mb > 0.0f))
        vfail(c, origin, "bucket_cap_mb", NULL, "bucket_cap_mb = %g must be > 0 (MiB per DDP gradient bucket)",
              (double)c->bucket_cap_mb);
}

/* ---- JSON ---- */

/* Shortest decimal that reads back as the same float, so lr prints as
 * 0.0005 rather than 0.000500000023748725. */
static double float_for_json(float f) {
    char buf[48];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    return strtod(buf, NULL);
}

char *vb_config_to_json(const vb_config *c) {
    cJSON *o = cJSON_CreateObject();
    if (!o) vb_die_internal("cJSON_CreateObject failed");
    for (int i = 0; i < NKEYS; i++) {
        const key_def *d = &g_keys[i];
        const void *p = (const char *)c + d->offset;
        cJSON *v = NULL;
        switch (d->type) {
        case KT_INT:
        case KT_LIMIT: v = cJSON_CreateNumber(*(const int *)p); break;
        case KT_FLOAT: v = cJSON_CreateNumber(float_for_json(*(const float *)p)); break;
        case KT_BOOL: v = cJSON_CreateBool(*(const bool *)p); break;
        case KT_STR: v = cJSON_CreateString((const char *)p); break;
        case KT_INT2: v = cJSON_CreateIntArray((const int *)p, 2); break;
        case KT_U64: {
            /* raw digits: a double would round seeds above 2^53 */
            char buf[32];
            snprintf(buf, sizeof buf, "%llu", *(const unsigned long long *)p);
            v = cJSON_CreateRaw(buf);
            break;
        }
        }
        if (!v) vb_die_internal("cJSON failed to build key %s", d->name);
        cJSON_AddItemToObject(o, d->name, v);
    }
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    if (!s) vb_die_internal("cJSON_Print failed");
    return s;
}

/* ---- benchy ---- */

void vb_benchy_defaults(vb_benchy_config *b) {
    memset(b, 0, sizeof *b);
    b->report_freq = 10;
    b->exit_after_tests = true;
    snprintf(b->profiler_mode, sizeof b->profiler_mode, "single");
    snprintf(b->output_filename, sizeof b->output_filename, VB_BENCHY_JSON);
    b->output_dir[0] = '\0';
    b->use_distributed_barrier = false;
    vb_benchy_trial_cfg t = {.run_benchmark = true, .nbatches = 50, .ntrials = 3, .nwarmup = 1};
    for (int k = 0; k < VB_TRIAL_NKINDS; k++) b->trial[k] = t;
    /* benchy has no validation trials: a run times them only when asked */
    b->trial[VB_TRIAL_VALIDATION].run_benchmark = false;
}

/* Parses one benchy value; `where` is "<file> [<section>]". */
/* benchy's JSON goes into output_dir (the run directory by default): a file
 * name, never a path, so '../../etc/x.json' cannot send it elsewhere, and
 * not a name the run directory already uses, where one file would silently
 * replace the other. Refused whatever output_dir says: it may be the run
 * directory under another spelling. */
static void check_output_filename(const char *name, const char *where, const char *key, int line) {
    if (!name[0] || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        vb_die_input("%s: %s = '%s' must be a file name without '/' (line %d); the file goes to output_dir", where, key,
                     name, line);
    if (vb_run_file_reserved(name))
        vb_die_input("%s: %s = '%s' is a name of the results schema, a file vitbench writes in a run or sweep "
                     "directory (line %d): the two would replace each other; pick another name, e.g. "
                     "benchy_output.json",
                     where, key, name, line);
}

static void benchy_value(key_type t, const yaml_node_t *v, void *dst, size_t size, const char *where, const char *key,
                         int line) {
    const char *text = vb_yaml_scalar(v);
    if (!text)
        vb_die_input("%s: %s: expected a single value, found %s (line %d)", where, key, vb_yaml_kind(v), line);
    char err[512];
    if (!parse_value(t, text, vb_yaml_is_null(v), dst, size, err, sizeof err))
        vb_die_input("%s: %s: %s (line %d)", where, key, err, line);
}

static void benchy_min(const char *where, const char *key, int value, int min, int line) {
    if (value < min) vb_die_input("%s: %s = %d must be >= %d (line %d)", where, key, value, min, line);
}

static void benchy_load_labeled(vb_benchy_config *b, const char *path, const char *label) {
    yaml_document_t doc;
    if (!vb_yaml_load(&doc, path, label)) { /* an empty file changes nothing */
        yaml_document_delete(&doc);
        return;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    vb_yaml_pairs sections;
    vb_yaml_mapping_pairs(&doc, root, label, &sections);
    for (int s = 0; s < sections.n; s++) {
        const vb_yaml_pair *sp = &sections.pairs[s];
        vb_benchy_trial_cfg *trial = NULL;
        bool is_global = false;
        const char *section = NULL;
        /* benchy spells them global, IO, synthetic, full; case is forgiven */
        if (strcasecmp(sp->key, "global") == 0) is_global = true, section = "global";
        for (int k = 0; k < VB_TRIAL_NKINDS && !section; k++)
            if (strcasecmp(sp->key, vb_trial_kinds[k].section) == 0) trial = &b->trial[k], section = vb_trial_kinds[k].section;
        if (!section)
            vb_die_input("%s: unknown section '%s' (line %d; sections are global, IO, synthetic, full, validation)",
                         label, sp->key, sp->line);
        if (vb_yaml_is_null(sp->value)) continue; /* `IO:` with nothing under it */
        char where[VB_PATH_MAX + 64];
        snprintf(where, sizeof where, "%s [%s]", label, section);
        vb_yaml_pairs keys;
        vb_yaml_mapping_pairs(&doc, sp->value, where, &keys);
        for (int i = 0; i < keys.n; i++) {
            const char *key = keys.pairs[i].key;
            const yaml_node_t *v = keys.pairs[i].value;
            int line = keys.pairs[i].line;
            if (is_global) {
                if (strcmp(key, "report_freq") == 0) {
                    benchy_value(KT_INT, v, &b->report_freq, sizeof b->report_freq, where, key, line);
                    benchy_min(where, key, b->report_freq, 1, line);
                } else if (strcmp(key, "exit_after_tests") == 0) {
                    benchy_value(KT_BOOL, v, &b->exit_after_tests, sizeof b->exit_after_tests, where, key, line);
                } else if (strcmp(key, "profiler_mode") == 0) {
                    benchy_value(KT_STR, v, b->profiler_mode, sizeof b->profiler_mode, where, key, line);
                    if (strcmp(b->profiler_mode, "single") && strcmp(b->profiler_mode, "all") &&
                        strcmp(b->profiler_mode, "none"))
                        vb_die_input("%s: profiler_mode = '%s' must be single, all or none (line %d)", where,
                                     b->profiler_mode, line);
                } else if (strcmp(key, "output_filename") == 0) {
                    benchy_value(KT_STR, v, b->output_filename, sizeof b->output_filename, where, key, line);
                    check_output_filename(b->output_filename, where, key, line);
                } else if (strcmp(key, "json_prefix") == 0) {
                    /* older benchy named the output by prefix; the file is <prefix>.json */
                    char prefix[VB_PATH_MAX];
                    benchy_value(KT_STR, v, prefix, sizeof prefix - 5, where, key, line);
                    size_t len = strlen(prefix);
                    bool has_ext = len >= 5 && strcmp(prefix + len - 5, ".json") == 0;
                    memcpy(b->output_filename, prefix, len + 1); /* fits: prefix leaves 5 bytes spare */
                    if (!has_ext) strcat(b->output_filename, ".json");
                    check_output_filename(b->output_filename, where, key, line);
                } else if (strcmp(key, "output_dir") == 0) {
                    benchy_value(KT_STR, v, b->output_dir, sizeof b->output_dir, where, key, line);
                } else if (strcmp(key, "use_distributed_barrier") == 0) {
                    benchy_value(KT_BOOL, v, &b->use_distributed_barrier, sizeof b->use_distributed_barrier, where,
                                 key, line);
                } else {
                    vb_die_input("%s: unknown key '%s' (line %d)", where, key, line);
                }
            } else {
                if (strcmp(key, "run_benchmark") == 0) {
                    benchy_value(KT_BOOL, v, &trial->run_benchmark, sizeof trial->run_benchmark, where, key, line);
                } else if (strcmp(key, "nbatches") == 0) {
                    benchy_value(KT_INT, v, &trial->nbatches, sizeof trial->nbatches, where, key, line);
                    benchy_min(where, key, trial->nbatches, 1, line);
                } else if (strcmp(key, "ntrials") == 0) {
                    benchy_value(KT_INT, v, &trial->ntrials, sizeof trial->ntrials, where, key, line);
                    benchy_min(where, key, trial->ntrials, 1, line);
                } else if (strcmp(key, "nwarmup") == 0) {
                    benchy_value(KT_INT, v, &trial->nwarmup, sizeof trial->nwarmup, where, key, line);
                    benchy_min(where, key, trial->nwarmup, 0, line);
                } else {
                    vb_die_input("%s: unknown key '%s' (line %d)", where, key, line);
                }
            }
        }
        vb_yaml_pairs_free(&keys);
    }
    vb_yaml_pairs_free(&sections);
    yaml_document_delete(&doc);
}

void vb_benchy_load(vb_benchy_config *b, const char *path) {
    char resolved[VB_PATH_MAX];
    resolve_path(path, resolved, sizeof resolved, "benchy_config");
    benchy_load_labeled(b, resolved, resolved);
}

void vb_benchy_resolve(vb_benchy_config *b, const char *explicit_path) {
    vb_benchy_defaults(b);
    if (explicit_path && explicit_path[0]) {
        vb_benchy_load(b, explicit_path);
        return;
    }
    const char *env = getenv("BENCHY_CONFIG_FILE");
    if (env && env[0]) {
        char resolved[VB_PATH_MAX], label[VB_PATH_MAX + 32];
        resolve_path(env, resolved, sizeof resolved, "BENCHY_CONFIG_FILE");
        /* the user may not remember setting it: say where the path came from */
        snprintf(label, sizeof label, "BENCHY_CONFIG_FILE=%s", resolved);
        benchy_load_labeled(b, resolved, label);
    }
}
