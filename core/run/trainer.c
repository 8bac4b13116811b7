/* trainer.c: a run's setup (inputs validated before anything is written),
 * the training and evaluation steps on the run's batches, and its end (and
 * run.json's "failed" at an exit before it). The step's compute is step.c,
 * batches reach it through staging.c, run.json is written by run_json.c,
 * stopping on a signal or a diverged loss is stop.c, what a config makes
 * (the model's dims, a loader, whether its layout fits) from_config.c. */
#include "core/run/trainer.h"

#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/run/agree.h"
#include "core/run/from_config.h"
#include "core/run/stop.h"
#include "core/run/threads.h"
#include "core/model/checkpoint.h"
#include "core/results/results.h"
#include "core/util/proc_watch.h"

/* The run whose run.json the atexit handler marks "failed". One per process. */
static vb_run *g_active_run = NULL;

void vb_run_path(const vb_run *r, char *buf, size_t n, const char *name) {
    vb_snprintf(buf, n, "%s/%s", r->run_dir, name);
}


/* A FIFO or a directory where a file belongs is named as such: "no such
 * file" would send the user looking for a path that is there. */
static void require_dir(const char *key, const char *path) {
    if (!path[0]) vb_die_input("%s is empty: give a directory with --%s", key, key);
    char why[VB_PATH_MAX + 64];
    if (vb_dir_problem(path, why, sizeof why)) vb_die_input("%s %s: %s", key, path, why);
}

static void require_file(const char *key, const char *path) {
    if (!path[0]) vb_die_input("%s is empty: give a file with --%s", key, key);
    char why[VB_PATH_MAX + 64];
    if (vb_file_problem(path, why, sizeof why)) vb_die_input("%s %s: %s", key, path, why);
}

/* run.json must say what happened: a run that cannot record its status
 * stops (exit 1) rather than carry on unrecorded. */
static void write_json_or_die(const vb_run *r, const char *status) {
    if (vb_run_write_json(r, status) == 0) return;
    char path[VB_PATH_MAX];
    vb_run_path(r, path, sizeof path, VB_RUN_JSON);
    vb_die_env("cannot write %s: %s", path, strerror(errno));
}

static void mark_failed_at_exit(void) {
    vb_run *r = g_active_run;
    if (!r || r->finished || !r->run_dir[0] || r->world.rank != 0) return;
    vb_iso_time(r->end_time, sizeof r->end_time);
    /* best effort and silent: the error that ends the process has been
     * printed (often this very disk being full), and exit() from an atexit
     * handler is undefined */
    (void)vb_run_write_json(r, "failed");
}

/* tp and cp peers share a replica and so read the same samples: shard over dp only */
static vb_loader *make_loader(const vb_run *r, const char *dir, int64_t limit, bool shuffle) {
    return vb_config_loader(&r->cfg, dir, r->local_batch, limit, shuffle, r->dp_rank, r->dp, r->ctx);
}

/* Input errors every rank detects identically end collectively: rank 0's
 * line is printed before anyone leaves the barrier, then all exit 2. */
static const vb_comm *g_setup_world;
static void setup_error_sync(void) {
    if (g_setup_world && g_setup_world->size > 1) vb_barrier(g_setup_world);
    vb_world_finalize();
}

/* world = tp x cp x dp, the model's split constraints and the batch split.
 * Fills layout, coordinates, dp and the batch sizes. */
static void setup_layout(vb_run *r) {
    const vb_config *c = &r->cfg;
    const vb_comm *w = &r->world;
    char err[1024];
    if (vb_layout_check(c, w->size, err, sizeof err) != 0) vb_die_input("%s", err);
    if (vb_layout_init(&r->layout, w->size, c->tensor_parallel, c->context_parallel, c->parallel_order, err,
                       sizeof err) != 0)
        vb_die_input("%s", err);
    vb_layout_coords(&r->layout, w->rank, &r->tp_rank, &r->cp_rank, &r->dp_rank);
    r->dp = r->layout.dp;
    if (c->local_batch_size > 0) {
        r->local_batch = c->local_batch_size;
        r->global_batch = c->local_batch_size * r->dp;
    } else {
        r->local_batch = c->global_batch_size / r->dp;
        r->global_batch = c->global_batch_size;
    }
}

/* The data plane of the run's groups (comm_backend): NCCL for a CUDA
 * context when built and every rank has a GPU of its own (auto), MPI
 * otherwise -- on a GPU it stages through page-locked host buffers, slower,
 * but several ranks may share one GPU, which NCCL refuses. Collective. */
static void setup_comm_backend(vb_run *r) {
    const char *want = r->cfg.comm_backend;
    const vb_comm_data_ops *plane = vb_comm_data_mpi(), *nccl = vb_comm_data_nccl();
    const bool asked = strcmp(want, "nccl") == 0;
    if (nccl && !r->ops->host_memory && (asked || strcmp(want, "auto") == 0)) {
        char why[512] = "";
        if (!nccl->usable || nccl->usable(&r->world, r->ctx, why, sizeof why))
            plane = nccl;
        else if (asked) {
            vb_set_input_errors_collective(setup_error_sync); /* every rank has the same verdict: one line */
            vb_die_input("comm_backend = nccl needs one GPU per rank: %s (use --comm_backend mpi to share a GPU, "
                         "or start fewer ranks per node)",
                         why);
        } else {
            vb_log("comm_backend auto: mpi (%s; NCCL needs one GPU per rank)", why);
        }
    }
    r->comm_backend = plane->name;
    vb_comm *groups[4] = {&r->tp_comm, &r->cp_comm, &r->dp_comm, &r->grad_comm};
    if (plane != vb_comm_data_mpi())
        for (int i = 0; i < 4; i++) vb_comm_set_data_plane(groups[i], plane);
}

/* Communicators for this rank's tp, cp, dp and gradient-reduction groups.
 * Collective over the world: every rank creates them in the same order. */
static void setup_groups(vb_run *r) {
    int *ranks = vb_malloc_check((size_t)r->world.size * sizeof *ranks);
    const struct {
        vb_group_kind kind;
        vb_comm *out;
        const char *name; /* suffix of the group's op names in ops.csv / timeline.csv */
    } g[4] = {{VB_GROUP_TP, &r->tp_comm, "tp"},
              {VB_GROUP_CP, &r->cp_comm, "cp"},
              {VB_GROUP_DP, &r->dp_comm, "dp"},
              /* with cp the weight gradients are partial sums over the cp
               * peers' tokens: they are summed over cp and dp together */
              {VB_GROUP_CP_DP, &r->grad_comm, r->layout.cp > 1 ? "cpdp" : "dp"}};
    for (int i = 0; i < 4; i++) {
        int n = vb_layout_group(&r->layout, r->world.rank, g[i].kind, ranks);
        vb_comm_from_ranks(&r->world, ranks, n, g[i].out);
        vb_snprintf(g[i].out->group, sizeof g[i].out->group, "%s", g[i].name);
    }
    free(ranks);
}

/* A rank never runs more OpenMP threads than cores in its affinity mask:
 * under mpirun's binding a 2-thread rank on 1 core runs many times slower
 * than 1 thread, and the figure would be the binding's, not the model's.
 * Ranks x threads beyond the node's cores is allowed (oversubscription is a
 * choice), warned about once and recorded. Collective (node-local size). */
static void setup_threads(vb_run *r) {
    r->threads_requested = omp_get_max_threads();
    int cores = vb_affinity_cores();
    if (r->threads_requested > cores) omp_set_num_threads(cores);
    r->node_ranks = vb_node_local_size(&r->world);
    r->local_rank = vb_node_local_rank(&r->world);
    if (r->threads_requested > cores)
        vb_warn("OpenMP threads capped at %d (the cores in this rank's affinity mask; %d requested)", cores,
                r->threads_requested);
    /* fewer threads where other work holds the cores (threads.h) */
    r->thread_choice = vb_threads_choose(&r->world, omp_get_max_threads(),
                                         strcmp(r->cfg.thread_policy, "adapt") == 0, r->ops->host_memory);
    char line[512];
    vb_threads_describe(&r->thread_choice, line, sizeof line);
    if (line[0] && r->world.rank == 0) vb_warn("%s", line);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = omp_get_max_threads();
    r->oversubscribed = online > 0 && (long)r->node_ranks * threads > online;
    if (r->oversubscribed)
        vb_warn("%d ranks x %d threads on a node with %ld cores: oversubscribed, throughput is not comparable to "
                "a run with a core per thread",
                r->node_ranks, threads, online);
    memset(&r->device, 0, sizeof r->device);
    if (r->ctx && r->ops->device_describe) r->ops->device_describe(r->ctx, &r->device);
    vb_fingerprint_collect(&r->fp, r->ops ? r->ops->name : r->cfg.backend, r->world.size, r->device.name,
                           r->device.driver);
    /* the CPU backend's GEMMs on kernels narrower than the CPU: one line,
     * naming the cause and the fix (blas_kernels.h) */
    if (r->world.rank == 0 && r->ops && r->ops->host_memory) {
        char why[512];
        vb_blas_advice(why, sizeof why, r->fp.blas_coretype, r->fp.cpu_vector, r->fp.blas_rule,
                       r->fp.blas_library_core);
        if (why[0]) vb_warn("%s", why);
    }
}

void vb_run_timeline_phase(vb_run *r, const char *phase, double t0, double t1) {
    vb_tlrec_add(r->timeline, VB_TL_MAIN, VB_TLK_PHASE, phase, t0, t1 - t0, 0, 0, -1);
}

vb_ctx *vb_run_ctx_create(const vb_config *c, const vb_comm *world) {
    vb_ctx_opts opts = {.act = VB_DTYPE_F32, .device = 0, .tf32 = c->tf32 ? 1 : 0,
                        .attention = strcmp(c->attention, "cudnn") == 0 ? VB_ATTENTION_CUDNN : VB_ATTENTION_FLASH};
    if (strcmp(c->amp_mode, "bf16") == 0) opts.act = VB_DTYPE_BF16;
    else if (strcmp(c->amp_mode, "fp16") == 0) opts.act = VB_DTYPE_F16;
    char err[256] = "";
    const vb_ops *ops = vb_ops_by_name(c->backend); /* auto: cuda when a device is usable, else cpu */
    if (!ops)
        vb_die_input("backend %s: not available in this build (available: cpu%s)", c->backend,
                     vb_ops_cuda() ? ", cuda" : "");
    /* one GPU per rank of a node: srun --gpus-per-task leaves each rank one
     * visible device (index 0); a plain mpirun sees them all */
    int local = vb_node_local_rank(world);
    int ndev = ops->device_count ? ops->device_count() : 1;
    opts.device = ndev > 0 && local > 0 ? local % ndev : 0;
    /* fp8: the CPU emulates its GEMMs in float32; elsewhere the activations
     * between them are bf16, as under Transformer Engine's autocast */
    if (strcmp(c->amp_mode, "fp8") == 0 && ops != vb_ops_cpu()) opts.act = VB_DTYPE_BF16;
    vb_ctx *ctx = ops->ctx_create(&opts, err, sizeof err);
    if (!ctx) vb_die_input("backend %s: %s", ops->name, err[0] ? err : "cannot create a context");
    return ctx;
}

void vb_run_model_fp8(vit_model *m, const vb_config *c, const vb_comm *agree_a, const vb_comm *agree_b) {
    if (strcmp(c->amp_mode, "fp8") != 0) return;
    const vit_fp8_recipe recipe = {.amax_history_len = c->fp8_amax_history_len,
                                   .amax_compute_algo = vit_fp8_parse_algo(c->fp8_amax_compute_algo),
                                   .margin = c->fp8_margin};
    vit_fp8_enable(m, &recipe, agree_a, agree_b);
}

void vb_run_setup(vb_run *r, vb_run_mode mode, int argc, char **argv, int first, const vb_comm *world) {
    memset(r, 0, sizeof *r);
    r->mode = mode;
    r->world = *world;
    vb_iso_time(r->start_time, sizeof r->start_time);
    r->command_line = vb_shell_join(argc, argv);
    vb_hostname(r->host, sizeof r->host);

    vb_config *c = &r->cfg;
    vb_config_defaults(c);
    /* argv, the config file and the layout are the same on every rank: one line, from rank 0 */
    g_setup_world = &r->world;
    vb_set_input_errors_collective(setup_error_sync);
    vb_config_from_args(c, argc, argv, first);
    vb_set_input_errors_collective(NULL);
    if (mode == VB_MODE_RUN) c->enable_benchy = true;
    r->benchy = c->enable_benchy;
    /* CUPTI traces benchy's trials (kernels.csv per trial type); a training
     * loop without them would trace nothing and say nothing */
    if (c->cupti && !r->benchy)
        vb_die_input("cupti = true traces benchy's trials, and train runs none: use vitbench run (or "
                     "--enable_benchy true) for kernels.csv");

    if (r->benchy) {
        const char *env = getenv("BENCHY_CONFIG_FILE");
        const char *file = c->benchy_config[0] ? c->benchy_config : (env && *env ? env : "");
        if (file[0]) require_file(c->benchy_config[0] ? "benchy_config" : "BENCHY_CONFIG_FILE", file);
        vb_snprintf(r->benchy_file, sizeof r->benchy_file, "%s", file);
        vb_benchy_resolve(&r->bcfg, c->benchy_config);
    } else {
        vb_benchy_defaults(&r->bcfg);
    }

    r->ctx = vb_run_ctx_create(c, &r->world);
    r->ops = r->ctx->ops;
    /* backend auto resolved to the CPU: nothing for CUPTI to trace */
    if (c->cupti && strcmp(r->ops->name, "cuda") != 0)
        vb_die_input("cupti = true needs the CUDA backend: backend %s runs on %s here (no usable GPU)", c->backend,
                     r->ops->name);
    /* the config refused dali with backend cpu; auto is only known now */
    r->dali = strcmp(c->data_loader_config, "dali") == 0;
    if (r->dali && r->ops->host_memory) {
        vb_set_input_errors_collective(setup_error_sync);
        vb_die_input("data_loader_config = dali needs the CUDA backend, and backend %s resolved to %s (no usable "
                     "GPU): use pytorch, or run where a GPU is visible",
                     c->backend, r->ops->name);
    }

    /* a CUDA graph records the step on one GPU; the collectives of several
     * ranks (DDP's buckets, tp and cp exchanges) are not recorded yet */
    if (c->cuda_graphs && (!r->ops->graph_capture_begin || r->world.size > 1)) {
        vb_set_input_errors_collective(setup_error_sync);
        if (!r->ops->graph_capture_begin)
            vb_die_input("cuda_graphs = true needs the CUDA backend, and backend %s resolved to %s (no usable GPU): "
                         "run without it, or where a GPU is visible",
                         c->backend, r->ops->name);
        vb_die_input("cuda_graphs = true runs on one rank (the step's collectives are not recorded in a graph "
                     "yet), and this run has %d: start one rank, or run without cuda_graphs",
                     r->world.size);
    }

    vb_set_input_errors_collective(setup_error_sync);
    setup_layout(r);
    vb_set_input_errors_collective(NULL);
    setup_threads(r);

    /* every input checked before the run directory exists */
    require_dir("train_data_path", c->train_data_path);
    require_file("global_means_path", c->global_means_path);
    require_file("global_stds_path", c->global_stds_path);
    bool do_train = mode == VB_MODE_TRAIN && !(r->benchy && r->bcfg.exit_after_tests);
    /* the valid split: train's validation, or benchy's VALIDATION trials */
    bool do_valid = do_train || (r->benchy && r->bcfg.trial[VB_TRIAL_VALIDATION].run_benchmark);
    if (do_valid) require_dir("valid_data_path", c->valid_data_path);
    if (c->init_checkpoint[0]) require_file("init_checkpoint", c->init_checkpoint);

    r->train_loader = make_loader(r, c->train_data_path, c->limit_nsamples, c->shuffle);
    if (vb_loader_steps_per_epoch(r->train_loader) < 1)
        vb_die_input("train_data_path %s: %lld samples is less than one local batch of %d on %d data-parallel ranks",
                     c->train_data_path, (long long)vb_loader_nsamples(r->train_loader), r->local_batch, r->dp);
    if (do_valid) {
        r->valid_loader = make_loader(r, c->valid_data_path, c->limit_nsamples_val, false);
        if (vb_loader_steps_per_epoch(r->valid_loader) < 1)
            vb_die_input("valid_data_path %s: %lld samples (limit_nsamples_val %d) is less than one local batch of %d on %d data-parallel ranks",
                         c->valid_data_path, (long long)vb_loader_nsamples(r->valid_loader), c->limit_nsamples_val,
                         r->local_batch, r->dp);
    }

    /* every rank must run the same thing before the first collective that assumes it */
    vb_run_agree(r);

    r->prof = vb_prof_create();
    /* an asynchronous backend's ops return before their work is done: time
     * them with its events, resolved after the step's synchronize */
    if (!r->ops->host_memory) vb_prof_set_clock(r->prof, vb_prof_clock_ctx(r->ctx, 4096));
    r->world.prof = r->prof;
    setup_groups(r); /* after the profiler: the groups time their collectives into it */
    setup_comm_backend(r);
    vit_dims d = vb_config_vit_dims(c);
    vit_parallel par = {
        .tp_size = r->layout.tp,
        .tp_rank = r->tp_rank,
        .cp_size = r->layout.cp,
        .cp_rank = r->cp_rank,
        .tp = r->layout.tp > 1 ? &r->tp_comm : NULL,
        .cp = r->layout.cp > 1 ? &r->cp_comm : NULL,
    };
    /* memory: a run that cannot fit is refused before any of it is taken */
    r->mem_limit = vb_mem_available(r->mem_limit_source, sizeof r->mem_limit_source);
    vb_mem_estimate_run(c, &r->bcfg, r->benchy, do_train, &d, &par, r->local_batch,
                        vb_loader_steps_per_epoch(r->train_loader), r->world.size, r->ctx, &r->mem);
    vb_mem_check(&r->mem, r->node_ranks, r->mem_limit, r->mem_limit_source);
    vb_address_space_check(r->mem.total, "the model, its optimizer, activations and buffers (memory estimate)");
    r->model = vit_create(&d, &par, r->local_batch, r->ctx, r->prof);
    r->model->fused_elementwise = r->cfg.enable_jit;
    /* fp8: all ranks agree on every amax, as on found_inf below (the tp
     * group times the gradient group is the world) */
    vb_run_model_fp8(r->model, c, &r->tp_comm, &r->grad_comm);
    vb_adam_init(&r->opt, r->model->nparams, r->ctx);
    if (c->init_checkpoint[0])
        vb_checkpoint_load(c->init_checkpoint, r->model, &r->opt);
    else
        vit_init_weights(r->model, c->seed);
    /* As DDP's constructor: every replica starts from the parameters of the
     * first rank of its group, whatever its own init or file read produced
     * (the grad group spans every replica of this rank's shard), on the data
     * plane, ordered after the context that wrote them. */
    vb_data_broadcast(&r->grad_comm, r->model->params, r->model->nparams, VB_DTYPE_F32, 0, r->ctx);
    vit_params_changed(r->model);
    /* enable_fused false (the tutorial's default): Adam parameter by parameter */
    if (!c->enable_fused) vb_adam_per_tensor(&r->opt, r->model);

    /* The bucket plan always exists (run.json reports it); the hook only when
     * gradients are actually reduced. */
    /* --noddp drops the data-parallel averaging only (the tutorial's way to
     * measure its cost). Under context parallelism the cp peers' weight
     * gradients are partial sums over their tokens and must still be summed,
     * or the cp ranks would train different models. */
    const vb_comm *reduce_comm = c->noddp ? &r->cp_comm : &r->grad_comm;
    float reduce_scale = c->noddp ? 1.0f : 1.0f / (float)r->dp;
    vb_ddp_init(&r->ddp, r->model->tensors, r->model->ntensors, r->model->nparams, r->model->grads,
                c->bucket_cap_mb, reduce_comm, reduce_scale, r->ctx, r->prof);
    r->ddp_on = reduce_comm->size > 1;
    if (r->ddp_on) vb_ddp_attach(&r->ddp, r->model);

    /* the timeline window: every op of profile_steps timed FULL steps, all ranks */
    /* memory: buffers for no more steps than the timed FULL trials have */
    const vb_benchy_trial_cfg *full = &r->bcfg.trial[VB_TRIAL_FULL];
    long full_steps = full->run_benchmark ? (long)full->ntrials * (full->nbatches > 0 ? full->nbatches : 1) : 0;
    int spe = vb_loader_steps_per_epoch(r->train_loader);
    if (full->nbatches <= 0 || full->nbatches > spe) full_steps = (long)full->ntrials * spe;
    int window = (long)c->profile_steps < full_steps ? c->profile_steps : (int)full_steps;
    if (r->benchy && window > 0) {
        int events_per_step = 64 * c->depth + 256; /* ~40 ops a block plus comm and the rest */
        r->timeline = vb_tlrec_create(window, c->num_data_workers, events_per_step);
        vb_prof_set_timeline(r->prof, r->timeline);
        r->ddp.timeline = r->timeline;
        vb_loader_set_timeline(r->train_loader, r->timeline);
    }

    const size_t hw = (size_t)c->img_size[0] * (size_t)c->img_size[1];
    vb_staging_init(&r->staging, r->ops, r->ctx, r->prof, r->dali, c->tf32, r->local_batch, c->n_in_channels,
                    c->n_out_channels, hw, c->normalize_on_device ? vb_loader_means(r->train_loader) : NULL,
                    c->normalize_on_device ? vb_loader_stds(r->train_loader) : NULL);
    r->loss_host = r->ops->alloc_host(r->ctx, sizeof(float));
    /* dynamic loss scaling: every rank of the world must take the same skip
     * decision; the tp group times the gradient group is the world (amp.h) */
    r->scaler_on = vb_config_loss_scaling(c);
    if (r->scaler_on) {
        vb_loss_scaler_init(&r->scaler, r->ctx, c->loss_scale_init, c->loss_scale_growth_interval, &r->tp_comm,
                            &r->grad_comm);
        r->model->dloss = &r->scaler.dev->scale;
        r->opt.loss_scale = r->scaler.dev;
    }
    r->step = (vb_step){.model = r->model,
                        .opt = &r->opt,
                        .ddp = r->ddp_on ? &r->ddp : NULL,
                        .cfg = &r->cfg,
                        .global_batch = r->global_batch,
                        .timeline = r->timeline,
                        .scaler = r->scaler_on ? &r->scaler : NULL,
                        .graphs = c->cuda_graphs ? &r->graphs : NULL};

    /* rank 0 picks the (fresh) directory; the others learn its name */
    if (r->world.rank == 0) vb_run_dir_create(c->output_dir, c->run_name, c->config, r->run_dir, sizeof r->run_dir, r->run_id, sizeof r->run_id);
    if (r->world.size > 1) {
        vb_broadcast(&r->world, r->run_dir, sizeof r->run_dir, 0);
        vb_broadcast(&r->world, r->run_id, sizeof r->run_id, 0);
    }
    /* every rank's host for run.json, so a slow node can be named */
    if (r->world.rank == 0) {
        r->hosts = vb_calloc_check((size_t)r->world.size, VB_HOST_LEN);
    }
    vb_gather_bytes(&r->world, r->host, VB_HOST_LEN, r->hosts, 0);
    vb_log("vitbench: run directory %s", r->run_dir);

    vb_run_stop_init(r);

    g_active_run = r;
    static bool registered = false;
    if (!registered) {
        atexit(mark_failed_at_exit);
        registered = true;
    }
    if (r->world.rank == 0) write_json_or_die(r, "running");
}

void vb_run_synchronize(vb_run *r) {
    r->ops->synchronize(r->ctx);
    vb_staging_synchronize(&r->staging);
}

void vb_train_step(vb_run *r, const vb_batch *b, float *lr_used) {
    vb_staging_put(&r->staging, b);
    vb_train_step_staged(r, lr_used);
}

void vb_train_step_staged(vb_run *r, float *lr_used) {
    vb_comm_totals before, after;
    vb_comm_totals_get(&before);
    VB_NVTX_PUSH("step");
    int B = vb_staging_take(&r->staging);
    float lr = vb_step_train(&r->step, r->iteration, r->staging.inp_dev, r->staging.tar_dev, B);
    /* the loss leaves backend memory once per step, after the step's work */
    r->ops->memcpy_d2h(r->ctx, r->loss_host, r->model->loss_dev, sizeof(float));
    r->iteration++;
    VB_NVTX_POP();
    vb_comm_totals_get(&after);
    r->last_comm.allreduce_calls = r->ddp_on ? r->ddp.stats.allreduce_calls : 0;
    r->last_comm.allreduce_bytes = r->ddp_on ? (double)r->ddp.stats.allreduce_bytes : 0.0;
    r->last_comm.exposed_s = after.blocking_s - before.blocking_s;
    if (lr_used) *lr_used = lr;
}

void vb_eval_step(vb_run *r, const vb_batch *b) {
    VB_NVTX_PUSH("eval_step");
    vb_staging_copy(&r->staging, b);
    vit_fp8_freeze(r->model->fp8, 1);
    vit_forward(r->model, r->staging.inp_dev, r->staging.tar_dev, b->B);
    vit_fp8_freeze(r->model->fp8, 0);
    r->ops->memcpy_d2h(r->ctx, r->loss_host, r->model->loss_dev, sizeof(float));
    VB_NVTX_POP();
}

float vb_run_step_loss(vb_run *r) {
    r->ops->synchronize(r->ctx);
    return r->loss_host[0];
}

void vb_run_finish(vb_run *r) {
    vb_iso_time(r->end_time, sizeof r->end_time);
    if (r->ctx) r->ops->synchronize(r->ctx); /* run.json's loss-scale record reads the last step's copy */
    if (r->world.rank == 0) write_json_or_die(r, "completed");
    r->finished = true;
    vb_log("vitbench: run directory %s", r->run_dir);

    /* no copy may still read a loader's (page-locked) buffers when they go */
    if (r->ctx) vb_run_synchronize(r);
    if (r->train_loader) vb_loader_destroy(r->train_loader);
    if (r->valid_loader) vb_loader_destroy(r->valid_loader);
    vb_staging_free(&r->staging);
    if (r->loss_host) r->ops->free_host(r->ctx, r->loss_host);
    vb_ddp_free(&r->ddp);
    if (r->scaler_on) vb_loss_scaler_free(&r->scaler);
    if (r->ctx) vb_step_graphs_free(&r->graphs, r->ctx);
    vb_adam_free(&r->opt);
    if (r->model) vit_destroy(r->model);
    /* a clock on the context's events must go before the context */
    if (r->prof) vb_prof_set_clock(r->prof, NULL);
    /* the data plane's staging and events, and its communicators, before the context */
    if (r->ctx) vb_comm_ctx_release(r->ctx);
    vb_comm_free(&r->grad_comm);
    vb_comm_free(&r->dp_comm);
    vb_comm_free(&r->cp_comm);
    vb_comm_free(&r->tp_comm);
    /* after the profiler's clock, which may stamp on it */
    vb_staging_destroy_copy_ctx(&r->staging);
    if (r->ctx) r->ops->ctx_destroy(r->ctx);
    vb_prof_destroy(r->prof);
    vb_tlrec_destroy(r->timeline);
    free(r->peak_mem);
    free(r->hosts);
    free(r->command_line);
    if (g_active_run == r) g_active_run = NULL;
    memset(r, 0, sizeof *r);
}
