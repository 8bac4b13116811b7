/* run_json.c: run.json, the run's provenance and status (trainer.h
 * vb_run_write_json). */
#include "core/run/trainer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <hdf5.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/results/results.h"
#include "core/util/common.h"
#include "kernels/cpu/blas.h"

static void add_versions(cJSON *root) {
    cJSON *v = cJSON_AddObjectToObject(root, "versions");
    unsigned maj = 0, min = 0, rel = 0;
    VB_H5(H5get_libversion(&maj, &min, &rel));
    char buf[512];
    vb_snprintf(buf, sizeof buf, "%u.%u.%u", maj, min, rel);
    cJSON_AddStringToObject(v, "hdf5", buf);
    cJSON_AddStringToObject(v, "openblas", vb_blas_config());
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
    for (int k = 0; k < VB_TRIAL_NKINDS; k++) {
        const vb_benchy_trial_cfg *t = &b->trial[k];
        cJSON *s = cJSON_AddObjectToObject(o, vb_trial_kinds[k].section);
        cJSON_AddBoolToObject(s, "run_benchmark", t->run_benchmark);
        cJSON_AddNumberToObject(s, "nbatches", t->nbatches);
        cJSON_AddNumberToObject(s, "ntrials", t->ntrials);
        cJSON_AddNumberToObject(s, "nwarmup", t->nwarmup);
    }
}

/* The layout, the DDP settings and where every rank ran. */
static void add_parallel(cJSON *root, const vb_run *r) {
    const vb_config *c = &r->cfg;
    cJSON *o = cJSON_AddObjectToObject(root, "parallel");
    cJSON_AddNumberToObject(o, "tp", r->layout.tp);
    cJSON_AddNumberToObject(o, "cp", r->layout.cp);
    cJSON_AddNumberToObject(o, "dp", r->layout.dp);
    char order[32] = "";
    if (r->layout.world > 0) vb_layout_order_string(&r->layout, order, sizeof order);
    cJSON_AddStringToObject(o, "parallel_order", order);
    /* the shortest decimal that reads back as the same float: 0.05, not 0.0500000007 */
    char cap[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(cap, sizeof cap, "%.*g", prec, (double)c->bucket_cap_mb);
        if (strtof(cap, NULL) == c->bucket_cap_mb) break;
    }
    cJSON_AddNumberToObject(o, "bucket_cap_mb", strtod(cap, NULL));
    cJSON_AddNumberToObject(o, "ddp_buckets", r->ddp.nbuckets);
    cJSON_AddBoolToObject(o, "noddp", c->noddp);
    cJSON_AddBoolToObject(o, "disable_broadcast_buffers", c->disable_broadcast_buffers);
    cJSON_AddStringToObject(o, "grad_reduce_group", r->layout.cp > 1 ? "cp-dp" : "dp");
    cJSON_AddBoolToObject(o, "grad_reduce", r->ddp_on);
    if (!r->hosts || r->layout.world < 1) return;
    cJSON *ranks = cJSON_AddArrayToObject(root, "rank_hosts");
    for (int k = 0; k < r->world.size; k++) {
        int tp = 0, cp = 0, dp = 0;
        vb_layout_coords(&r->layout, k, &tp, &cp, &dp);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "rank", k);
        cJSON_AddStringToObject(e, "host", r->hosts + (size_t)k * VB_HOST_LEN);
        cJSON_AddNumberToObject(e, "tp_rank", tp);
        cJSON_AddNumberToObject(e, "cp_rank", cp);
        cJSON_AddNumberToObject(e, "dp_rank", dp);
        cJSON_AddItemToArray(ranks, e);
    }
}

/* What makes runs comparable (core/prof/fingerprint.h), the thread decision,
 * the timeline window and every rank's peak memory. */
static void add_fingerprint(cJSON *root, const vb_run *r) {
    const vb_fingerprint *f = &r->fp;
    cJSON *o = cJSON_AddObjectToObject(root, "fingerprint");
    cJSON_AddStringToObject(o, "host", f->host);
    cJSON_AddStringToObject(o, "cpu_model", f->cpu_model);
    cJSON_AddNumberToObject(o, "affinity_cores", f->affinity_cores);
    cJSON_AddNumberToObject(o, "omp_threads", f->omp_threads);
    cJSON_AddNumberToObject(o, "ranks", f->ranks);
    cJSON_AddStringToObject(o, "backend", f->backend);
    cJSON_AddStringToObject(o, "blas", f->blas);
    cJSON_AddStringToObject(o, "blas_coretype", f->blas_coretype);
    cJSON_AddStringToObject(o, "compiler", f->compiler);
    cJSON_AddStringToObject(o, "cflags", f->cflags);
    cJSON_AddStringToObject(o, "git_commit", f->git_commit);
    cJSON_AddBoolToObject(o, "git_dirty", f->git_dirty);
    cJSON_AddStringToObject(o, "gpu_name", f->gpu_name);
    cJSON_AddStringToObject(o, "gpu_driver", f->gpu_driver);
    cJSON_AddStringToObject(o, "machine_key", f->machine_key);
    cJSON_AddStringToObject(o, "cpu_vector", f->cpu_vector);
    cJSON_AddStringToObject(o, "blas_vector", f->blas_vector);
    cJSON_AddStringToObject(o, "blas_rule", f->blas_rule);
    cJSON_AddStringToObject(o, "blas_library_core", f->blas_library_core);
    /* the device itself, beyond the name the key uses: memory, clocks, ECC */
    if (r->device.name[0]) {
        const vb_device_desc *d = &r->device;
        cJSON *g = cJSON_AddObjectToObject(root, "gpu");
        cJSON_AddStringToObject(g, "name", d->name);
        cJSON_AddStringToObject(g, "driver", d->driver);
        cJSON_AddStringToObject(g, "pci_bus_id", d->pci_bus_id);
        cJSON_AddNumberToObject(g, "memory_gib", d->memory_gib);
        cJSON_AddNumberToObject(g, "sm_count", d->sm_count);
        char cc[16];
        vb_snprintf(cc, sizeof cc, "%d.%d", d->cc_major, d->cc_minor);
        cJSON_AddStringToObject(g, "compute_capability", cc);
        cJSON_AddNumberToObject(g, "clock_mhz", d->clock_mhz);
        cJSON_AddNumberToObject(g, "memory_clock_mhz", d->memory_clock_mhz);
        cJSON_AddBoolToObject(g, "ecc", d->ecc);
    }
    cJSON *t = cJSON_AddObjectToObject(root, "threads");
    cJSON_AddNumberToObject(t, "requested", r->threads_requested);
    cJSON_AddNumberToObject(t, "per_rank", f->omp_threads);
    cJSON_AddNumberToObject(t, "node_ranks", r->node_ranks);
    cJSON_AddBoolToObject(t, "oversubscribed", r->oversubscribed);
    /* what thread_policy chose, and the probe behind it (threads.h) */
    const vb_thread_choice *tc = &r->thread_choice;
    cJSON_AddStringToObject(t, "policy", r->cfg.thread_policy);
    cJSON_AddNumberToObject(t, "team", tc->team);
    cJSON_AddStringToObject(t, "chosen_by", tc->rule);
    if (!isnan(tc->wait_share)) {
        cJSON_AddNumberToObject(t, "probe_seconds", tc->probe_s);
        cJSON_AddNumberToObject(t, "probe_wait_share", tc->wait_share);
        cJSON_AddNumberToObject(t, "probe_other_cpus", tc->others);
    }
    char why[512];
    vb_threads_describe(tc, why, sizeof why);
    if (why[0]) cJSON_AddStringToObject(t, "reason", why);
    if (r->timeline) {
        cJSON *w = cJSON_AddObjectToObject(root, "timeline");
        cJSON_AddNumberToObject(w, "profile_steps", r->cfg.profile_steps);
        cJSON_AddNumberToObject(w, "steps_recorded", vb_tlrec_steps_done(r->timeline));
        cJSON_AddNumberToObject(w, "events_rank0", (double)vb_tlrec_events(r->timeline));
        cJSON_AddNumberToObject(w, "dropped_rank0", (double)vb_tlrec_dropped(r->timeline));
    }
    cJSON *mem = cJSON_AddObjectToObject(root, "memory");
    cJSON_AddNumberToObject(mem, "estimate_bytes", r->mem.total);
    cJSON_AddNumberToObject(mem, "parameters_bytes", r->mem.params);
    cJSON_AddNumberToObject(mem, "gradients_bytes", r->mem.grads);
    cJSON_AddNumberToObject(mem, "optimizer_bytes", r->mem.optimizer);
    cJSON_AddNumberToObject(mem, "activations_bytes", r->mem.activations);
    cJSON_AddNumberToObject(mem, "data_bytes", r->mem.data);
    cJSON_AddNumberToObject(mem, "records_bytes", r->mem.records);
    cJSON_AddNumberToObject(mem, "available_bytes", r->mem_limit);
    cJSON_AddStringToObject(mem, "available_source", r->mem_limit_source);
    if (r->peak_mem) {
        double peak = 0;
        for (int k = 0; k < r->world.size; k++) peak = r->peak_mem[k] > peak ? r->peak_mem[k] : peak;
        cJSON_AddNumberToObject(mem, "peak_rss_bytes", peak); /* measured: the largest rank's */
    }
    if (r->peak_mem) {
        cJSON *m = cJSON_AddArrayToObject(root, "peak_mem_bytes_per_rank");
        for (int k = 0; k < r->world.size; k++) cJSON_AddItemToArray(m, cJSON_CreateNumber(r->peak_mem[k]));
    }
}

/* Dynamic loss scaling as of the last step the host has waited for (the
 * state's copy made at the end of each step): the scale, the steps skipped
 * on a non-finite gradient and the steps counted. */
static void add_loss_scale(cJSON *root, const vb_run *r) {
    cJSON *o = cJSON_AddObjectToObject(root, "loss_scale");
    cJSON_AddStringToObject(o, "mode", r->scaler_on ? "dynamic" : "none");
    if (!r->scaler_on || !r->scaler.host) return;
    const vb_loss_scale_state *st = r->scaler.host;
    cJSON_AddNumberToObject(o, "init_scale", r->scaler.init_scale);
    cJSON_AddNumberToObject(o, "growth_interval", r->scaler.growth_interval);
    cJSON_AddNumberToObject(o, "scale", st->scale);
    cJSON_AddNumberToObject(o, "steps", st->steps);
    cJSON_AddNumberToObject(o, "skipped_steps", st->skipped);
}

/* cuda_graphs: how many steps ran eagerly, were recorded, were replays, and
 * how many of the recordings replaced a graph a workspace reallocation had
 * made stale */
static void add_cuda_graphs(cJSON *root, const vb_run *r) {
    cJSON *o = cJSON_AddObjectToObject(root, "cuda_graphs");
    cJSON_AddBoolToObject(o, "enabled", r->step.graphs != NULL);
    if (!r->step.graphs) return;
    cJSON_AddNumberToObject(o, "graphs", r->graphs.n);
    cJSON_AddNumberToObject(o, "eager_steps", (double)r->graphs.eager);
    cJSON_AddNumberToObject(o, "captures", (double)r->graphs.captures);
    cJSON_AddNumberToObject(o, "replays", (double)r->graphs.replays);
    cJSON_AddNumberToObject(o, "rerecorded", (double)r->graphs.rerecords);
}

int vb_run_write_json(const vb_run *r, const char *status) {
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
    cJSON_AddStringToObject(root, "comm_backend", r->comm_backend ? r->comm_backend : r->cfg.comm_backend);
    if (r->ctx && !r->ops->host_memory) cJSON_AddNumberToObject(root, "device", r->ctx->device);
    cJSON_AddNumberToObject(root, "local_rank", r->local_rank);
    cJSON_AddNumberToObject(root, "world_size", r->world.size);
    cJSON_AddNumberToObject(root, "ranks", r->world.size);
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
    add_loss_scale(root, r);
    add_cuda_graphs(root, r);
    add_fingerprint(root, r);
    add_parallel(root, r);
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
    char *withnl = vb_malloc_check(len + 2);
    memcpy(withnl, text, len);
    withnl[len] = '\n';
    withnl[len + 1] = '\0';
    cJSON_free(text);
    char path[VB_PATH_MAX];
    vb_run_path(r, path, sizeof path, VB_RUN_JSON);
    /* The run's final status is written when the disk may be full (often
     * the very reason the run stops), and an atomic write needs free space
     * for its temporary. So the "running" file keeps room for the final one
     * (fileio.h vb_write_reserved): twice its size covers what the end adds
     * (end time, per-rank peak memory: far less than the per-rank host list
     * already there). The final write goes without padding, as before, and
     * only falls back to that room when the disk has none. */
    size_t reserve = 0;
    if (strcmp(status, "running") == 0) {
        reserve = 2 * (len + 1);
        if (reserve < VB_RUN_JSON_RESERVE) reserve = VB_RUN_JSON_RESERVE;
    }
    int rc = vb_write_reserved(path, withnl, reserve);
    int err = errno;
    free(withnl);
    errno = err;
    return rc;
}

