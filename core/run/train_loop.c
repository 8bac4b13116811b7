/* train_loop.c: the `train` subcommand (train_loop.h). */
#include "core/run/train_loop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/checkpoint.h"
#include "core/results/results.h"
#include "core/run/feed.h"
#include "core/run/stop.h"
#include "core/util/pyfloat.h"

typedef struct {
    int step;       /* updates done including this one (train.py's iters) */
    int epoch;      /* 1-based, as train.py logs it */
    float loss;     /* forward loss of this step, before its update (mean over dp ranks) */
    float lr;       /* lr this update used */
    double seconds; /* data fetch + step */
    float loss_scale; /* dynamic loss scaling: the scale this step's gradients were seeded with */
    int skipped;      /* 1: a gradient was inf or nan and the update was skipped */
} train_row;

typedef struct {
    int epoch, step;
    double val_loss, rmse_u10m, seconds;
} valid_row;

typedef struct {
    const train_row *rows;
    int nrows;
    const valid_row *vrows;
    int nvrows;
    bool loss_scaling; /* train_log.csv gets the loss_scale and skipped columns */
} train_logs;

static void write_train_log(FILE *f, void *ctx) {
    const train_logs *l = ctx;
    fprintf(f, VB_TRAIN_LOG_CSV_HEADER "%s\n", l->loss_scaling ? "," VB_TRAIN_LOG_CSV_SCALING_COLUMNS : "");
    for (int i = 0; i < l->nrows; i++) {
        const train_row *t = &l->rows[i];
        fprintf(f, "%d,%d,%.9g,%.9g,%.9g", t->step, t->epoch, (double)t->loss, (double)t->lr, t->seconds);
        if (l->loss_scaling) fprintf(f, ",%.9g,%d", (double)t->loss_scale, t->skipped);
        fputc('\n', f);
    }
}

static void write_validation(FILE *f, void *ctx) {
    const train_logs *l = ctx;
    fputs(VB_VALIDATION_CSV_HEADER "\n", f);
    for (int i = 0; i < l->nvrows; i++) {
        const valid_row *v = &l->vrows[i];
        fprintf(f, "%d,%d,%.9g,%.9g,%.9g\n", v->epoch, v->step, v->val_loss, v->rmse_u10m, v->seconds);
    }
}

static void write_logs(const vb_run *r, train_logs *l) {
    if (r->world.rank != 0) return;
    char path[VB_PATH_MAX];
    vb_run_path(r, path, sizeof path, VB_TRAIN_LOG_CSV);
    vb_atomic_write_or_die(path, write_train_log, l);
    vb_run_path(r, path, sizeof path, VB_VALIDATION_CSV);
    vb_atomic_write_or_die(path, write_validation, l);
}

/* Above this size (parameters + two Adam moments) a save on the way out
 * could take more than a few seconds, more than a job's grace period between
 * SIGTERM and SIGKILL is likely to allow. */
#define INTERRUPT_SAVE_MAX_BYTES (2.0 * 1024 * 1024 * 1024)

/* A stop signal ends training early: keep the model it reached, marked as
 * interrupted with its step, when that is quick and safe. A tensor-parallel
 * save is collective and the tp peers may stop at another step, so it is
 * only attempted without tp (a local write by the replica that saves). A
 * second signal still kills at once (the handler resets it). */
static void save_interrupted_checkpoint(vb_run *r) {
    const vb_config *c = &r->cfg;
    if (!c->save_checkpoint || r->cp_rank != 0 || r->dp_rank != 0) return;
    char path[VB_PATH_MAX];
    vb_run_path(r, path, sizeof path, VB_CHECKPOINT_H5);
    double bytes = 3.0 * (double)r->model->nparams_full * sizeof(float);
    if (r->layout.tp > 1) {
        vb_warn("interrupted at step %d: no checkpoint saved (a tensor-parallel save needs every tp rank)",
                r->iteration);
        return;
    }
    if (bytes > INTERRUPT_SAVE_MAX_BYTES) {
        vb_warn("interrupted at step %d: no checkpoint saved (%.1f GB would take too long to write on the way out)",
                r->iteration, bytes / 1e9);
        return;
    }
    vb_checkpoint_save_interrupted(path, r->model, &r->opt, r->iteration);
    vb_log("Saved checkpoint %s (interrupted at step %d)", path, r->iteration);
}

/* Backend and host buffers of validation, allocated once. */
typedef struct {
    double *rmse_dev;   /* backend [n_out_channels]: RMSE sums over the samples */
    float *losses_dev;  /* backend [steps]: each batch's loss */
    double *rmse_host;  /* page-locked copies of both, read once at the end */
    float *losses_host;
    int steps;
} valid_bufs;

static void valid_bufs_init(vb_run *r, valid_bufs *v) {
    const int C = r->cfg.n_out_channels;
    v->steps = vb_loader_steps_per_epoch(r->valid_loader);
    v->rmse_dev = r->ops->alloc(r->ctx, (size_t)C * sizeof(double));
    v->losses_dev = r->ops->alloc(r->ctx, (size_t)v->steps * sizeof(float));
    v->rmse_host = r->ops->alloc_host(r->ctx, (size_t)C * sizeof(double));
    v->losses_host = r->ops->alloc_host(r->ctx, (size_t)v->steps * sizeof(float));
}

static void valid_bufs_free(vb_run *r, valid_bufs *v) {
    if (!v->rmse_dev) return;
    r->ops->synchronize(r->ctx);
    r->ops->free(r->ctx, v->rmse_dev);
    r->ops->free(r->ctx, v->losses_dev);
    r->ops->free_host(r->ctx, v->rmse_host);
    r->ops->free_host(r->ctx, v->losses_host);
}

/* Whole valid split, no shuffle: mean loss over batches and the mean over
 * samples of channel 0's latitude-weighted RMSE (train.py's "RMSE(u10m)").
 * The losses and RMSE sums stay in backend memory until the split is done:
 * one copy out and one wait for the whole validation. */
static void validate(vb_run *r, valid_bufs *v, double *val_loss, double *rmse0) {
    const vb_config *c = &r->cfg;
    const size_t C = (size_t)c->n_out_channels;
    vb_loader *vl = r->valid_loader;
    int steps = vb_loader_steps_per_epoch(vl);
    vb_loader_reset(vl, 0);
    r->ops->zero(r->ctx, v->rmse_dev, C * sizeof(double));
    double sums[3] = {0, 0, 0}; /* loss sum, batches, samples */
    VB_NVTX_PUSH("validation");
    vit_fp8_freeze(r->model->fp8, 1); /* fp8: the training's scales, unmoved */
    for (int i = 0; i < steps; i++) {
        const vb_batch *b = vb_loader_next(vl);
        vb_staging_copy(&r->staging, b);
        vit_forward(r->model, r->staging.inp_dev, r->staging.tar_dev, b->B);
        r->ops->memcpy_d2d(r->ctx, v->losses_dev + i, r->model->loss_dev, sizeof(float));
        r->ops->weighted_rmse_accumulate(r->ctx, v->rmse_dev, r->model->pred, r->staging.tar_dev, b->B, c->n_out_channels,
                                         c->img_size[0], c->img_size[1]);
        sums[1] += 1;
        sums[2] += b->B;
        vb_loader_release(vl, b);
    }
    vit_fp8_freeze(r->model->fp8, 0);
    r->ops->memcpy_d2h(r->ctx, v->losses_host, v->losses_dev, (size_t)steps * sizeof(float));
    r->ops->memcpy_d2h(r->ctx, v->rmse_host, v->rmse_dev, C * sizeof(double));
    r->ops->synchronize(r->ctx);
    /* summed in batch order in double, as each batch's loss came in before */
    for (int i = 0; i < steps; i++) sums[0] += v->losses_host[i];
    double *rmse_host = v->rmse_host;
    VB_NVTX_POP();
    /* over dp only: tp / cp peers saw the same samples and hold the same loss */
    vb_allreduce_sum_f64(&r->dp_comm, sums, 3);
    vb_allreduce_sum_f64(&r->dp_comm, rmse_host, (size_t)c->n_out_channels);
    *val_loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
    *rmse0 = sums[2] > 0 ? rmse_host[0] / sums[2] : NAN;
}

int vb_train_loop(vb_run *r) {
    const vb_config *c = &r->cfg;
    vb_loader *tl = r->train_loader;
    const int spe = vb_loader_steps_per_epoch(tl);
    int total = c->num_iters;
    if (c->num_epochs > 0 && (long long)c->num_epochs * spe < total) total = c->num_epochs * spe;
    const int nepochs = total > 0 ? (total + spe - 1) / spe : 0;

    /* all log rows up front: the loop itself allocates nothing */
    train_row *rows = vb_calloc_check((size_t)(total > 0 ? total : 1), sizeof *rows);
    valid_row *vrows = vb_calloc_check((size_t)(nepochs > 0 ? nepochs : 1), sizeof *vrows);
    valid_bufs vbufs = {0};
    if (nepochs > 0 && r->valid_loader) valid_bufs_init(r, &vbufs);
    train_logs logs = {rows, 0, vrows, 0, r->scaler_on};

    vb_log("Starting Training Loop...");
    vb_prof_set_enabled(r->prof, false);
    int done = 0;
    const double t_train = vb_now();
    for (int epoch = 0; epoch < nepochs; epoch++) {
        vb_loader_reset(tl, epoch);
        r->ops->synchronize(r->ctx);
        const double start = vb_now();
        int steps = total - done < spe ? total - done : spe;
        double loss_sum = 0;
        vb_feed feed;
        vb_feed_begin(&feed, &r->staging, tl, steps, r->dali, NULL, NULL);
        for (int i = 0; i < steps; i++) {
            if (vb_run_interrupted()) {
                vb_feed_end(&feed);
                write_logs(r, &logs); /* the steps done so far, without this epoch's validation */
                save_interrupted_checkpoint(r);
                vb_run_exit_interrupted(r);
            }
            double ts = vb_now();
            const vb_batch *b = vb_feed_next(&feed, i);
            float lr = 0;
            if (!vb_staging_has(&r->staging)) vb_staging_put(&r->staging, b);
            vb_train_step_staged(r, &lr);
            vb_feed_done(&feed, b, i); /* dali: the next batch's copy runs under this step */
            /* each row needs its step's loss: wait for the step and read it */
            float loss = vb_run_step_loss(r);
            if (r->dp > 1) {
                /* the replica-wide loss: mean over the dp ranks' local batches
                 * (tp / cp peers hold the same loss, so they are left out) */
                double l = loss;
                vb_allreduce_sum_f64(&r->dp_comm, &l, 1);
                loss = (float)(l / r->dp);
            }
            train_row *row = &rows[done];
            row->step = done + 1;
            row->epoch = epoch + 1;
            row->loss = loss;
            row->lr = lr;
            row->seconds = vb_now() - ts;
            if (r->scaler_on) {
                /* the step has finished (its loss was read): the state's copy is this step's */
                row->loss_scale = r->scaler.host->last_scale;
                row->skipped = r->scaler.host->last_skipped;
            }
            loss_sum += loss;
            done++;
            logs.nrows = done;
            if (!isfinite(loss)) {
                write_logs(r, &logs); /* train_log.csv keeps the steps so far, this one included */
                vb_run_die_diverged(r, loss, lr, done);
            }
        }
        vb_feed_end(&feed); /* holds nothing now: no prefetch runs past the epoch */
        r->ops->synchronize(r->ctx);
        const double end = vb_now();
        char t_str[64], rate_str[64];
        vb_pyfloat(t_str, sizeof t_str, end - start);
        vb_pyfloat(rate_str, sizeof rate_str, (double)steps * r->global_batch / (end - start));
        vb_log("Time taken for epoch %d is %s sec, avg %s samples/sec", epoch + 1, t_str, rate_str);
        vb_log("  Avg train loss=%f", loss_sum / steps);

        const double val_start = vb_now();
        double val_loss = 0, rmse0 = 0;
        validate(r, &vbufs, &val_loss, &rmse0);
        const double val_end = vb_now();
        vb_log("  Avg val loss=%f", val_loss);
        vb_log("  RMSE(u10m)=%f", rmse0);
        vb_pyfloat(t_str, sizeof t_str, val_end - val_start);
        vb_log("  Total validation time: %s sec", t_str);
        vrows[epoch] = (valid_row){epoch + 1, done, val_loss, rmse0, val_end - val_start};
        logs.nvrows = epoch + 1;
        write_logs(r, &logs);
        /* the valid data is checked as it is loaded: a NaN here is the model's */
        if (!isfinite(val_loss)) vb_run_die_diverged(r, (float)val_loss, rows[done - 1].lr, done);
    }
    if (nepochs == 0) write_logs(r, &logs); /* num_iters 0: the headers still say what the files are */
    char t_str[64];
    vb_pyfloat(t_str, sizeof t_str, vb_now() - t_train);
    vb_log("Trained %d steps in %d epochs in %s sec", done, nepochs, t_str);

    /* one replica writes: the tp group of world rank 0 (cp rank 0, dp rank 0),
     * whose save is collective over tp and gathers the shards; other cp / dp
     * ranks hold copies and must not write the same file. Without tp: rank 0. */
    if (c->save_checkpoint && r->cp_rank == 0 && r->dp_rank == 0) {
        char path[VB_PATH_MAX];
        vb_run_path(r, path, sizeof path, VB_CHECKPOINT_H5);
        vb_checkpoint_save(path, r->model, &r->opt);
        vb_log("Saved checkpoint %s", path);
    }
    free(rows);
    free(vrows);
    valid_bufs_free(r, &vbufs);
    return 0;
}
