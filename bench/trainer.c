/* trainer.c: run setup (inputs validated before anything is written), the
 * training step shared by benchy's trials and the train loop, run.json. */
#include "bench/trainer.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <hdf5.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/checkpoint.h"
#include "core/results.h"

/* The run whose run.json the atexit handler marks "failed". One per process. */
static vb_run *g_active_run = NULL;

static volatile sig_atomic_t g_stop_signal = 0;

static void on_stop_signal(int sig) {
    g_stop_signal = sig;
    signal(sig, SIG_DFL); /* a second Ctrl-C does not wait for the step to end */
}

bool vb_run_interrupted(void) { return g_stop_signal != 0; }

void vb_run_exit_interrupted(vb_run *r) {
    int sig = g_stop_signal ? g_stop_signal : SIGINT;
    fflush(stdout);
    vb_iso_time(r->end_time, sizeof r->end_time);
    if (r->world.rank == 0) vb_run_write_json(r, "interrupted");
    r->finished = true;
    vb_warn("interrupted by signal %d after %d training steps; finished results are in %s", sig, r->iteration,
            r->run_dir);
    exit(128 + sig);
}

void vb_pyfloat(char *buf, size_t n, double x) {
    if (isnan(x)) {
        vb_snprintf(buf, n, "nan");
        return;
    }
    if (isinf(x)) {
        vb_snprintf(buf, n, x > 0 ? "inf" : "-inf");
        return;
    }
    /* shortest mantissa that reads back as the same double: what repr() uses */
    char e[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    const char *s = e;
    bool neg = false;
    if (*s == '-') {
        neg = true;
        s++;
    }
    char digits[32];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9') digits[nd++] = *s;
    digits[nd] = '\0';
    int exp10 = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = '\0';

    char out[96];
    int k = 0;
    if (neg) out[k++] = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 >= 0) {
            for (int i = 0; i <= exp10; i++) out[k++] = i < nd ? digits[i] : '0';
            out[k++] = '.';
            if (nd > exp10 + 1)
                for (int i = exp10 + 1; i < nd; i++) out[k++] = digits[i];
            else
                out[k++] = '0';
        } else {
            out[k++] = '0';
            out[k++] = '.';
            for (int i = 0; i < -exp10 - 1; i++) out[k++] = '0';
            for (int i = 0; i < nd; i++) out[k++] = digits[i];
        }
        out[k] = '\0';
    } else {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++) out[k++] = digits[i];
        }
        snprintf(out + k, sizeof out - (size_t)k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    vb_snprintf(buf, n, "%s", out);
}

void vb_run_path(const vb_run *r, char *buf, size_t n, const char *name) {
    vb_snprintf(buf, n, "%s/%s", r->run_dir, name);
}

/* argv joined with spaces; arguments with shell metacharacters single-quoted,
 * so the line can be pasted back into a shell. */
static char *join_command_line(int argc, char **argv) {
    size_t len = 1;
    for (int i = 0; i < argc; i++) len += 4 * strlen(argv[i]) + 3;
    char *s = malloc(len);
    if (!s) vb_die_internal("out of memory");
    size_t k = 0;
    for (int i = 0; i < argc; i++) {
        if (i) s[k++] = ' ';
        const char *a = argv[i];
        bool plain = *a != '\0';
        for (const char *c = a; *c; c++)
            if (!(isalnum((unsigned char)*c) || strchr("-_./=,:+@%", *c))) plain = false;
        if (plain) {
            memcpy(s + k, a, strlen(a));
            k += strlen(a);
            continue;
        }
        s[k++] = '\'';
        for (const char *c = a; *c; c++) {
            if (*c == '\'') {
                memcpy(s + k, "'\\''", 4);
                k += 4;
            } else {
                s[k++] = *c;
            }
        }
        s[k++] = '\'';
    }
    s[k] = '\0';
    return s;
}

static void require_dir(const char *key, const char *path) {
    if (!path[0]) vb_die_input("%s is empty: give a directory with --%s", key, key);
    if (!vb_dir_exists(path)) vb_die_input("%s %s: no such directory", key, path);
}

static void require_file(const char *key, const char *path) {
    if (!path[0]) vb_die_input("%s is empty: give a file with --%s", key, key);
    if (!vb_file_exists(path)) vb_die_input("%s %s: no such file", key, path);
}

static void mark_failed_at_exit(void) {
    vb_run *r = g_active_run;
    if (!r || r->finished || !r->run_dir[0] || r->world.rank != 0) return;
    vb_iso_time(r->end_time, sizeof r->end_time);
    vb_run_write_json(r, "failed");
}

static vb_loader *make_loader(const vb_run *r, const char *dir, int64_t limit, bool shuffle) {
    const vb_config *c = &r->cfg;
    vb_loader_opts o = {
        .data_dir = dir,
        .means_path = c->global_means_path,
        .stds_path = c->global_stds_path,
        .img_h = c->img_size[0],
        .img_w = c->img_size[1],
        .n_in_channels = c->n_in_channels,
        .n_out_channels = c->n_out_channels,
        .dt = c->dt,
        .local_batch = r->local_batch,
        .limit_nsamples = limit,
        .shuffle = shuffle,
        .seed = c->seed,
        .num_workers = c->num_data_workers,
        .dp_rank = r->world.rank,
        .dp_size = r->ranks,
    };
    return vb_loader_create(&o);
}

void vb_run_setup(vb_run *r, vb_run_mode mode, int argc, char **argv, int first, const vb_comm *world) {
    memset(r, 0, sizeof *r);
    r->mode = mode;
    r->world = *world;
    vb_iso_time(r->start_time, sizeof r->start_time);
    r->command_line = join_command_line(argc, argv);
    vb_hostname(r->host, sizeof r->host);

    vb_config *c = &r->cfg;
    vb_config_defaults(c);
    vb_config_from_args(c, argc, argv, first);
    if (mode == VB_MODE_RUN) c->enable_benchy = true;
    r->benchy = c->enable_benchy;

    if (r->benchy) {
        const char *env = getenv("BENCHY_CONFIG_FILE");
        const char *file = c->benchy_config[0] ? c->benchy_config : (env && *env ? env : "");
        if (file[0] && !vb_file_exists(file))
            vb_die_input("%s %s: no such file", c->benchy_config[0] ? "benchy_config" : "BENCHY_CONFIG_FILE", file);
        vb_snprintf(r->benchy_file, sizeof r->benchy_file, "%s", file);
        vb_benchy_resolve(&r->bcfg, c->benchy_config);
    } else {
        vb_benchy_defaults(&r->bcfg);
    }

    r->ops = vb_ops_by_name(c->backend);
    if (!r->ops) vb_die_input("backend %s: not available in this build (available: cpu)", c->backend);

    /* The tutorial's batch rule: --local_batch_size wins and fixes the global
     * batch; otherwise the global batch is split evenly over the ranks. */
    r->ranks = world->size;
    if (c->local_batch_size > 0) {
        r->local_batch = c->local_batch_size;
        r->global_batch = c->local_batch_size * r->ranks;
    } else {
        if (c->global_batch_size < r->ranks || c->global_batch_size % r->ranks != 0)
            vb_die_input("global_batch_size %d cannot be split evenly over %d ranks (set local_batch_size)",
                         c->global_batch_size, r->ranks);
        r->local_batch = c->global_batch_size / r->ranks;
        r->global_batch = c->global_batch_size;
    }

    /* every input checked before the run directory exists */
    require_dir("train_data_path", c->train_data_path);
    require_file("global_means_path", c->global_means_path);
    require_file("global_stds_path", c->global_stds_path);
    bool do_train = mode == VB_MODE_TRAIN && !(r->benchy && r->bcfg.exit_after_tests);
    if (do_train) require_dir("valid_data_path", c->valid_data_path);
    if (c->init_checkpoint[0]) require_file("init_checkpoint", c->init_checkpoint);

    r->train_loader = make_loader(r, c->train_data_path, c->limit_nsamples, c->shuffle);
    if (vb_loader_steps_per_epoch(r->train_loader) < 1)
        vb_die_input("train_data_path %s: %lld samples is less than one local batch of %d on %d ranks",
                     c->train_data_path, (long long)vb_loader_nsamples(r->train_loader), r->local_batch, r->ranks);
    if (do_train) {
        r->valid_loader = make_loader(r, c->valid_data_path, c->limit_nsamples_val, false);
        if (vb_loader_steps_per_epoch(r->valid_loader) < 1)
            vb_die_input("valid_data_path %s: %lld samples (limit_nsamples_val %d) is less than one local batch of %d on %d ranks",
                         c->valid_data_path, (long long)vb_loader_nsamples(r->valid_loader), c->limit_nsamples_val,
                         r->local_batch, r->ranks);
    }

    r->prof = vb_prof_create();
    r->world.prof = r->prof;
    vit_dims d = {
        .img_h = c->img_size[0],
        .img_w = c->img_size[1],
        .patch = c->patch_size,
        .cin = c->n_in_channels,
        .cout = c->n_out_channels,
        .dim = c->embed_dim,
        .depth = c->depth,
        .heads = c->num_heads,
        .ln_eps = 1e-6f,
    };
    vit_parallel par = {.tp_size = 1, .tp_rank = 0, .cp_size = 1, .cp_rank = 0};
    r->model = vit_create(&d, &par, r->local_batch, r->ops, r->prof);
    vb_adam_init(&r->opt, r->model->nparams, r->ops);
    if (c->init_checkpoint[0])
        vb_checkpoint_load(c->init_checkpoint, r->model, &r->opt);
    else
        vit_init_weights(r->model, c->seed);

    size_t hw = (size_t)c->img_size[0] * (size_t)c->img_size[1];
    r->inp_bytes = (size_t)r->local_batch * (size_t)c->n_in_channels * hw * sizeof(float);
    r->tar_bytes = (size_t)r->local_batch * (size_t)c->n_out_channels * hw * sizeof(float);
    r->inp_dev = r->ops->alloc(r->inp_bytes);
    r->tar_dev = r->ops->alloc(r->tar_bytes);

    /* rank 0 picks the (fresh) directory; the others learn its name */
    if (r->world.rank == 0) vb_run_dir_create(c, r->run_dir, sizeof r->run_dir, r->run_id, sizeof r->run_id);
    if (r->ranks > 1) {
        vb_broadcast(&r->world, r->run_dir, sizeof r->run_dir, 0);
        vb_broadcast(&r->world, r->run_id, sizeof r->run_id, 0);
    }
    vb_log("vitbench: run directory %s", r->run_dir);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    g_active_run = r;
    static bool registered = false;
    if (!registered) {
        atexit(mark_failed_at_exit);
        registered = true;
    }
    if (r->world.rank == 0) vb_run_write_json(r, "running");
}

void vb_run_copy_batch(vb_run *r, const vb_batch *b) {
    const vb_config *c = &r->cfg;
    size_t hw = (size_t)c->img_size[0] * (size_t)c->img_size[1];
    size_t inp = (size_t)b->B * (size_t)c->n_in_channels * hw * sizeof(float);
    size_t tar = (size_t)b->B * (size_t)c->n_out_channels * hw * sizeof(float);
    int id = VB_OP_ID(r->prof, "h2d", VB_CAT_MEMCPY);
    double t0 = vb_prof_begin(r->prof, id);
    r->ops->memcpy_h2d(r->inp_dev, b->inp, inp);
    r->ops->memcpy_h2d(r->tar_dev, b->tar, tar);
    vb_prof_end(r->prof, id, t0, inp + tar);
}

float vb_train_step(vb_run *r, const vb_batch *b, float *lr_used) {
    const vb_config *c = &r->cfg;
    VB_NVTX_PUSH("step");
    vb_run_copy_batch(r, b);

    VB_NVTX_PUSH("forward");
    float loss = vit_forward(r->model, r->inp_dev, r->tar_dev, b->B);
    VB_NVTX_POP();

    VB_NVTX_PUSH("backward");
    vit_backward(r->model);
    if (r->ranks > 1) {
        /* plain data parallelism until DDP buckets land: average the gradients */
        vb_allreduce_sum_f32(&r->world, r->model->grads, r->model->nparams);
        r->ops->scale(r->model->grads, 1.0f / (float)r->ranks, r->model->nparams);
    }
    VB_NVTX_POP();

    float lr = vb_lr_at(c->lr_schedule, c->lr, c->warmup, c->num_iters, r->iteration);
    if (c->base_batch_size > 0) lr *= sqrtf((float)r->global_batch / (float)c->base_batch_size);
    VB_NVTX_PUSH("optimizer");
    vb_adam_step(&r->opt, r->model->params, r->model->grads, lr, r->prof);
    VB_NVTX_POP();
    r->iteration++;
    VB_NVTX_POP();
    if (lr_used) *lr_used = lr;
    return loss;
}

/* ---- run.json ---- */

static void add_versions(cJSON *root) {
    cJSON *v = cJSON_AddObjectToObject(root, "versions");
    unsigned maj = 0, min = 0, rel = 0;
    VB_H5(H5get_libversion(&maj, &min, &rel));
    char buf[512];
    vb_snprintf(buf, sizeof buf, "%u.%u.%u", maj, min, rel);
    cJSON_AddStringToObject(v, "hdf5", buf);
    cJSON_AddStringToObject(v, "openblas", openblas_get_config());
    vb_mpi_version(buf, sizeof buf);
    cJSON_AddStringToObject(v, "mpi", buf);
    cJSON_AddStringToObject(v, "libyaml", yaml_get_version_string());
    cJSON_AddStringToObject(v, "cjson", cJSON_Version());
    cJSON_AddStringToObject(v, "compiler", __VERSION__);
    cJSON_AddNumberToObject(v, "openmp", _OPENMP);
}

static void add_benchy(cJSON *root, const vb_run *r) {
    const vb_benchy_config *b = &r->bcfg;
    cJSON *o = cJSON_AddObjectToObject(root, "benchy");
    cJSON_AddStringToObject(o, "config_file", r->benchy_file);
    cJSON_AddNumberToObject(o, "report_freq", b->report_freq);
    cJSON_AddBoolToObject(o, "exit_after_tests", b->exit_after_tests);
    cJSON_AddStringToObject(o, "profiler_mode", b->profiler_mode);
    cJSON_AddStringToObject(o, "output_filename", b->output_filename);
    cJSON_AddStringToObject(o, "output_dir", b->output_dir);
    cJSON_AddBoolToObject(o, "use_distributed_barrier", b->use_distributed_barrier);
    const char *names[3] = {"IO", "synthetic", "full"};
    const vb_benchy_trial_cfg *t[3] = {&b->io, &b->synthetic, &b->full};
    for (int i = 0; i < 3; i++) {
        cJSON *s = cJSON_AddObjectToObject(o, names[i]);
        cJSON_AddBoolToObject(s, "run_benchmark", t[i]->run_benchmark);
        cJSON_AddNumberToObject(s, "nbatches", t[i]->nbatches);
        cJSON_AddNumberToObject(s, "ntrials", t[i]->ntrials);
        cJSON_AddNumberToObject(s, "nwarmup", t[i]->nwarmup);
    }
}

static void write_text(FILE *f, void *ctx) { fputs((const char *)ctx, f); }

void vb_run_write_json(const vb_run *r, const char *status) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "run_id", r->run_id);
    cJSON_AddStringToObject(root, "run_dir", r->run_dir);
    cJSON_AddStringToObject(root, "command", r->mode == VB_MODE_RUN ? "run" : "train");
    cJSON_AddStringToObject(root, "command_line", r->command_line ? r->command_line : "");
    cJSON_AddStringToObject(root, "status", status);
    cJSON_AddStringToObject(root, "start_time", r->start_time);
    if (r->end_time[0])
        cJSON_AddStringToObject(root, "end_time", r->end_time);
    else
        cJSON_AddNullToObject(root, "end_time");
    cJSON_AddStringToObject(root, "git_commit", VB_GIT_COMMIT);
    cJSON_AddStringToObject(root, "host", r->host);
    cJSON_AddStringToObject(root, "backend", r->ops ? r->ops->name : r->cfg.backend);
    cJSON_AddNumberToObject(root, "world_size", r->world.size);
    cJSON_AddNumberToObject(root, "ranks", r->ranks);
    cJSON_AddNumberToObject(root, "local_batch_size", r->local_batch);
    cJSON_AddNumberToObject(root, "global_batch_size", r->global_batch);
    cJSON_AddNumberToObject(root, "omp_max_threads", omp_get_max_threads());
    if (r->model) {
        cJSON_AddNumberToObject(root, "nparams", (double)r->model->nparams);
        cJSON_AddNumberToObject(root, "train_flops_per_sample", vit_train_flops(r->model, 1));
    }
    if (r->train_loader) {
        cJSON_AddNumberToObject(root, "train_samples", (double)vb_loader_nsamples(r->train_loader));
        cJSON_AddNumberToObject(root, "steps_per_epoch", vb_loader_steps_per_epoch(r->train_loader));
    }
    cJSON_AddNumberToObject(root, "iterations_done", r->iteration);
    add_versions(root);

    char *cfg_json = vb_config_to_json(&r->cfg);
    cJSON *cfg = cfg_json ? cJSON_Parse(cfg_json) : NULL;
    free(cfg_json);
    if (cfg)
        cJSON_AddItemToObject(root, "config", cfg);
    else
        cJSON_AddNullToObject(root, "config");
    if (r->benchy) add_benchy(root, r);

    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) vb_die_internal("cannot serialise run.json");
    size_t len = strlen(text);
    char *withnl = malloc(len + 2);
    if (!withnl) vb_die_internal("out of memory");
    memcpy(withnl, text, len);
    withnl[len] = '\n';
    withnl[len + 1] = '\0';
    cJSON_free(text);
    char path[VB_PATH_MAX];
    vb_run_path(r, path, sizeof path, "run.json");
    if (vb_atomic_write(path, write_text, withnl) != 0) vb_warn("could not write %s", path);
    free(withnl);
}

void vb_run_finish(vb_run *r) {
    vb_iso_time(r->end_time, sizeof r->end_time);
    if (r->world.rank == 0) vb_run_write_json(r, "completed");
    r->finished = true;
    vb_log("vitbench: run directory %s", r->run_dir);

    if (r->train_loader) vb_loader_destroy(r->train_loader);
    if (r->valid_loader) vb_loader_destroy(r->valid_loader);
    if (r->inp_dev) r->ops->free(r->inp_dev);
    if (r->tar_dev) r->ops->free(r->tar_dev);
    vb_adam_free(&r->opt);
    if (r->model) vit_destroy(r->model);
    vb_prof_destroy(r->prof);
    free(r->command_line);
    if (g_active_run == r) g_active_run = NULL;
    memset(r, 0, sizeof *r);
}
