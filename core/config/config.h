/* config.h: the resolved run configuration.
 *
 * Sources, later wins: built-in defaults < the named config in --yaml_config
 * (YAML anchors and `<<: *base` merge keys honoured) < command-line overrides
 * `--key value` / `--key=value` (lists as `--img_size 32,64`), in the flag
 * grammar every command shares (core/config/flag.h: '-' and '_' alike,
 * booleans 1/0, true/false, yes/no, on/off; a bare boolean flag is true).
 * Key names are the tutorial's (config/ViT.yaml, train.py flags) plus this
 * project's own (init_checkpoint, shuffle, seed, output_dir, run_name, ...).
 *
 * Any unknown key, wrong type or impossible value makes vb_config_* exit 2
 * with one line naming the key, the value and the file or flag it came from.
 */
#ifndef VB_CONFIG_H
#define VB_CONFIG_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "core/results/results.h" /* vb_trial_kind */
#include "core/util/common.h"

/* DDP's bucket size in MiB when none is given: PyTorch DDP's bucket_cap_mb
 * default. The scaling model assumes it for references and published rows
 * that name none. */
#define VB_BUCKET_CAP_MB_DEFAULT 25

typedef struct vb_config {
    /* where it came from */
    char yaml_config[VB_PATH_MAX]; /* default scenarios/vit.yaml (relative to cwd, then VB_SOURCE_DIR) */
    char config[64];               /* default "base" */

    /* model */
    int embed_dim, depth, patch_size, num_heads;
    float dropout;                 /* accepted; must be 0 (no dropout in this trainer) */
    int img_size[2];               /* H, W crop of the full field */
    int n_in_channels, n_out_channels;

    /* training */
    int dt;
    int global_batch_size;
    int local_batch_size;          /* 0 = global_batch_size / dp; set by --local_batch_size */
    int num_iters;
    int num_epochs;                /* 0 = num_iters / steps_per_epoch, like train.py */
    float lr;
    char lr_schedule[16];          /* "cosine" | "constant" */
    int warmup;
    int base_batch_size;           /* 0 = off; else lr *= sqrt(global/base) */
    char optimizer[16];            /* "Adam" */
    char amp_mode[8];              /* "none", "bf16" or "fp16" (the last two on the CUDA backend only), or
                                    * "fp8" (Transformer Engine's delayed scaling, emulated on the CPU only) */
    int fp8_amax_history_len;      /* fp8: steps of amax history a scale derives from (TE's default 1024) */
    char fp8_amax_compute_algo[16]; /* fp8: "max" of the history (TE's default) or its "most_recent" entry */
    int fp8_margin;                /* fp8: scale = fp8_max / amax / 2^margin (TE's default 0) */
    bool enable_fused;             /* Adam: one launch over the whole parameter buffer (true) or one per
                                    * parameter tensor (false, the tutorial's default); same results */
    bool enable_jit;               /* fused elementwise passes (vit_model.fused_elementwise) */
    bool cuda_graphs;              /* the step recorded once as a CUDA graph and replayed (one rank, CUDA backend) */
    char loss_scale[16];           /* "auto" (default: dynamic under fp16, else none), "dynamic", "none" */
    float loss_scale_init;         /* dynamic loss scaling's first scale (default 65536, GradScaler's) */
    int loss_scale_growth_interval; /* good steps before the scale doubles (default 2000, GradScaler's) */
    char attention[8];             /* "flash" (vitbench's kernels) or "cudnn" (cuDNN's fused attention; CUDA, bf16/fp16) */
    bool tf32;                     /* float32 GEMMs on TF32 tensor cores (CUDA, amp_mode none; PyTorch's default, as the tutorial measured); no effect on CPU */
    char expdir[VB_PATH_MAX];      /* accepted, unused: output_dir holds results */

    /* data */
    char data_loader_config[16];   /* "pytorch" (the HDF5 loader, synchronous copy) or "dali" (the same
                                    * loader, copies overlapped on a second stream; CUDA backend only) */
    int num_data_workers;
    char data_read[8];             /* how the loader reads contiguous datasets: "mmap" (default) or "pread" */
    bool normalize_on_device;      /* the loader hands raw values; each batch is normalised on the backend after its copy */
    bool synthetic_resident;       /* SYNTHETIC trials copy their one batch to the device once, not every step */
    int limit_nsamples;            /* 0 = None (no limit) */
    int limit_nsamples_val;
    char train_data_path[VB_PATH_MAX];
    char valid_data_path[VB_PATH_MAX];
    char inf_data_path[VB_PATH_MAX];
    char time_means_path[VB_PATH_MAX];
    char global_means_path[VB_PATH_MAX];
    char global_stds_path[VB_PATH_MAX];
    bool shuffle;                  /* default true */

    /* this project */
    unsigned long long seed;       /* default 0 */
    char init_checkpoint[VB_PATH_MAX];
    char output_dir[VB_PATH_MAX];  /* default "results" */
    char run_name[128];            /* default "" -> run id is <config>_<timestamp> */
    char backend[16];              /* "cpu" (default), "cuda" or "auto" (cuda when compiled in and a GPU is visible) */
    char comm_backend[8];          /* data plane: "auto" (default: nccl on cuda when built, else mpi), "mpi", "nccl" */
    char thread_policy[16];        /* CPU backend: "adapt" (default: fewer OpenMP threads when other work holds the
                                    * cores as the run starts, core/run/threads.h) or "fixed" (OMP_NUM_THREADS);
                                    * the default is $VB_THREAD_POLICY where set */
    bool enable_benchy;            /* train --enable_benchy == run */
    char benchy_config[VB_PATH_MAX]; /* default "" -> $BENCHY_CONFIG_FILE -> benchy defaults */
    bool save_checkpoint;          /* default true for train */
    char progress[8];              /* auto | bar | lines | none (default auto) */
    int profile_steps;             /* timed FULL steps recorded in timeline.csv (default 5; 0 = off) */
    bool cupti;                    /* per-kernel GPU timings from CUPTI (kernels.csv; CUDA backend only; default false) */

    /* distributed (checked against the world size at run setup: vb_layout_check) */
    int tensor_parallel, context_parallel; /* default 1 */
    char parallel_order[32];               /* default "tp-cp-dp" */
    float bucket_cap_mb;                   /* default VB_BUCKET_CAP_MB_DEFAULT; fractions allowed */
    bool noddp, disable_broadcast_buffers;
    /* accepted tutorial keys with no effect here */
    char wireup_info[16], wireup_store[16];
} vb_config;

/* Built-in defaults (== the tutorial's base with project defaults). */
void vb_config_defaults(vb_config *c);

/* Parses argv[first..argc) as overrides, loads --yaml_config/--config first
 * (wherever they appear), applies overrides, validates. Positional arguments
 * are an error. Exits 2 on any problem. */
void vb_config_from_args(vb_config *c, int argc, char **argv, int first);

/* Loads config `name` from YAML file `path` into c (on top of what is in c). */
void vb_config_load_yaml(vb_config *c, const char *path, const char *name);

/* Applies one override; `origin` names where it came from for error messages
 * (e.g. "flag --lr"). */
void vb_config_set(vb_config *c, const char *key, const char *value, const char *origin);

/* Checks cross-key constraints (img_size % patch_size, embed_dim % num_heads,
 * batch >= 1, ...). `origin` names the file/flags for messages. Exits 2. */
void vb_config_validate(const vb_config *c, const char *origin);

/* The keys as `--key VALUE  help (default D)` lines in their sections: the
 * help of run and train, printed from the table the parser reads, so every
 * flag the parser accepts is in it. */
void vb_config_print_help(FILE *f);
/* how many keys there are, and key i's name (NULL out of range) */
int vb_config_nkeys(void);
const char *vb_config_key_name(int i);

/* Writes the resolved config as a flat JSON object (caller frees with free()). */
char *vb_config_to_json(const vb_config *c);

/* Derived values. */
/* Whether steps run with dynamic loss scaling (core/model/amp.h): loss_scale
 * dynamic, or auto under amp_mode fp16. */
static inline bool vb_config_loss_scaling(const vb_config *c) {
    return strcmp(c->loss_scale, "dynamic") == 0 ||
           (strcmp(c->loss_scale, "auto") == 0 && strcmp(c->amp_mode, "fp16") == 0);
}
static inline int vb_config_tokens(const vb_config *c) {
    return (c->img_size[0] / c->patch_size) * (c->img_size[1] / c->patch_size);
}

/* ---- benchy's own options (benchy's YAML: sections global, IO, synthetic,
 * full, and validation, which benchy does not have: vb_trial_kinds) ---- */
typedef struct vb_benchy_trial_cfg {
    bool run_benchmark; /* default true (validation: false, benchy runs none) */
    int nbatches;       /* default 50 (benchy's) */
    int ntrials;        /* default 3 */
    int nwarmup;        /* default 1 */
} vb_benchy_trial_cfg;

typedef struct vb_benchy_config {
    int report_freq;              /* default 10 */
    bool exit_after_tests;        /* default true */
    char profiler_mode[16];       /* "single" (benchy default) | "all" | "none" */
    char output_filename[VB_PATH_MAX]; /* default "benchy_output.json" (benchy's json_prefix also accepted) */
    char output_dir[VB_PATH_MAX];      /* default "" -> the run directory */
    bool use_distributed_barrier; /* default false */
    vb_benchy_trial_cfg trial[VB_TRIAL_NKINDS]; /* by vb_trial_kind */
} vb_benchy_config;

void vb_benchy_defaults(vb_benchy_config *b);
/* Loads `path` (exits 2 naming the file/section/key on error). */
void vb_benchy_load(vb_benchy_config *b, const char *path);
/* Resolves: explicit path if non-empty, else $BENCHY_CONFIG_FILE, else defaults. */
void vb_benchy_resolve(vb_benchy_config *b, const char *explicit_path);

#endif
