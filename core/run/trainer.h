/* trainer.h: the state of one `run` / `train` invocation and one training step.
 *
 * vb_run_setup validates every input (config, data directories, stats,
 * checkpoint, benchy config) BEFORE it creates the run directory, so a typo
 * exits 2 without leaving an empty run behind. After setup the run directory
 * exists and run.json says "running"; an exit before vb_run_finish rewrites it
 * as "failed" (atexit), so no run ever claims to be in progress forever
 * unless it was killed with SIGKILL.
 */
#ifndef VB_TRAINER_H
#define VB_TRAINER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/run/memcheck.h"
#include "core/run/staging.h"
#include "core/run/step.h"
#include "core/run/threads.h"
#include "core/model/amp.h"
#include "core/comm/comm.h"
#include "core/config/config.h"
#include "core/data/data.h"
#include "core/prof/fingerprint.h"
#include "core/prof/timeline.h"
#include "core/model/ddp.h"
#include "core/comm/groups.h"
#include "core/model/vit.h"
#include "core/model/optim.h"
#include "core/prof/profile.h"

typedef enum { VB_MODE_RUN = 0, VB_MODE_TRAIN } vb_run_mode;

#define VB_HOST_LEN 256

/* One training step's communication (iterations.csv columns). */
typedef struct vb_step_comm {
    int allreduce_calls;    /* DDP gradient-bucket allreduces */
    double allreduce_bytes; /* their bytes */
    double exposed_s;       /* seconds blocked in communication inside the step: DDP's
                             * vb_wait plus every blocking collective (tp/cp included) */
} vb_step_comm;


typedef struct vb_run {
    vb_run_mode mode;
    bool benchy;                 /* run, or train --enable_benchy */
    bool dali;                   /* data_loader_config dali: batches copied on copy_ctx, overlapping the step */
    vb_config cfg;
    vb_benchy_config bcfg;
    char benchy_file[VB_PATH_MAX]; /* the benchy YAML used, "" for benchy's defaults */

    vb_comm world;
    /* world = tp x cp x dp (core/comm/groups.h). tp and cp peers hold shards of one
     * model replica and read the same batch; only dp splits the data, so a
     * step consumes local_batch x dp samples. */
    vb_layout layout;
    int dp;                      /* data-parallel ranks = world / (tp * cp) */
    int tp_rank, cp_rank, dp_rank;
    int local_batch, global_batch; /* global = local x dp */
    vb_comm tp_comm, cp_comm, dp_comm; /* this rank's groups (size 1 when the dim is 1) */
    vb_comm grad_comm;           /* weight-gradient reduction: dp, or cp x dp under context parallelism */
    vb_ddp ddp;                  /* bucket plan; used when ddp_on */
    bool ddp_on;                 /* grad_comm has peers and noddp is off */
    vb_step_comm last_comm;      /* communication of the last vb_train_step */
    char *hosts;                 /* rank 0: world x VB_HOST_LEN host names (run.json) */

    const vb_ops *ops;
    vb_ctx *ctx;                 /* this rank's backend context: every op of the run is on it, except
                                  * dali's batch copies (copy_ctx) */
    vb_profiler *prof;
    vb_tlrec *timeline;          /* the profile_steps window; NULL when profile_steps is 0 */
    double time_origin;          /* vb_now() when every rank left the start barrier */
    vb_fingerprint fp;           /* this rank's; rank 0's goes to run.json and summary.csv */
    int threads_requested;       /* OpenMP threads before the affinity cap */
    vb_thread_choice thread_choice; /* the team after the cap, and what thread_policy made of it */
    int node_ranks;              /* ranks sharing this rank's node */
    int local_rank;              /* this rank's index on its node (picks its GPU) */
    const char *comm_backend;    /* the data plane in use: "mpi" or "nccl" */
    bool oversubscribed;         /* node_ranks x threads > cores on the node */
    double *peak_mem;            /* rank 0: every rank's max RSS in bytes (0 = not yet known) */
    vb_mem_estimate mem;         /* this rank's estimated bytes (core/run/memcheck.h) */
    double mem_limit;            /* bytes available when the run started; 0 = unknown */
    char mem_limit_source[32];
    vit_model *model;
    vb_adam opt;
    vb_loss_scaler scaler;       /* dynamic loss scaling, when scaler_on */
    bool scaler_on;
    vb_step_graphs graphs;       /* cuda_graphs: the recorded steps (step.graphs points here) */
    vb_device_desc device;       /* this rank's device (ops->device_describe); "" name on the CPU */
    vb_step step;                /* model, optimizer, DDP and lr of vb_train_step */
    vb_staging staging;          /* batches from the loader to the step (core/run/staging.h) */
    float *loss_host;            /* page-locked [1]: the last step's loss, copied out at its end */

    vb_loader *train_loader;
    vb_loader *valid_loader;     /* train mode, or benchy VALIDATION trials; else NULL */

    int iteration;               /* training steps done so far (lr schedule position) */

    char run_dir[VB_PATH_MAX];
    char run_id[320];
    char *command_line;          /* argv joined, shell-quoted where needed */
    char start_time[32], end_time[32];
    char host[VB_HOST_LEN];
    bool finished;
} vb_run;

/* Parses argv[first..] into the config, validates inputs, builds loaders,
 * model and optimizer, creates the run directory and writes run.json.
 * `world` must come from vb_world_init. Exits 2 on bad input. A rank layout
 * that cannot work (world % (tp*cp), num_heads % tp, global batch % dp, cp >
 * tokens) is one line from rank 0 and exit 2 on every rank. Collective over
 * the world: builds the tp / cp / dp / gradient communicators, broadcasts the
 * initial parameters over each replica group and gathers every rank's host. */
void vb_run_setup(vb_run *r, vb_run_mode mode, int argc, char **argv, int first, const vb_comm *world);

/* A context of config c's backend (vb_ops_by_name: auto is cuda when a
 * device is usable, else cpu), activation dtype from amp_mode, TF32 from
 * tf32, on the device this rank's node-local rank picks (modulo the devices
 * it sees; world NULL: the launcher's local rank, else device 0); exits 2
 * with the backend's reason when it cannot give one. Collective over world. */
vb_ctx *vb_run_ctx_create(const vb_config *c, const vb_comm *world);

/* Under amp_mode fp8, the model's GEMMs take config c's delayed-scaling
 * recipe, amaxes reduced over agree_a and agree_b (vit_fp8_enable); nothing
 * otherwise. */
void vb_run_model_fp8(vit_model *m, const vb_config *c, const vb_comm *agree_a, const vb_comm *agree_b);

/* One training step on `b`: vb_staging_put, then vb_train_step_staged.
 * Returns once the work is enqueued; b goes back to its loader through
 * vb_staging_release (under pytorch the copy has completed already). */
void vb_train_step(vb_run *r, const vb_batch *b, float *lr_used);

/* The training step on the staged batch: vb_step_train on it, then the loss
 * copied out into r->loss_host. Returns once the work is enqueued; *lr_used
 * receives the lr (may be NULL). r->last_comm describes the step's
 * communication. Exits 1 (a bug) when no batch is staged. */
void vb_train_step_staged(vb_run *r, float *lr_used);

/* One evaluation step on `b`, as train.py's validation loop runs it (and
 * benchy's VALIDATION trials time it): the batch copied in, the forward pass
 * and its loss (r->loss_host, vb_run_step_loss); no gradients, no update,
 * fp8's scales as training left them. Returns once the work is enqueued; b
 * may go back to its loader then (the copy has completed). */
void vb_eval_step(vb_run *r, const vb_batch *b);

/* Waits until all of the run's work has finished, the compute context and
 * (dali) the copy context: benchy's torch.cuda.synchronize(), which waits
 * for every stream of the device. */
void vb_run_synchronize(vb_run *r);

/* This rank's forward loss of the last vb_train_step (average it over
 * dp_comm for the replica-wide loss): waits for the step to finish. */
float vb_run_step_loss(vb_run *r);


/* The least room a "running" run.json keeps for its final status (bytes of
 * trailing whitespace included): a full disk must not keep the run's end
 * from being recorded. */
#define VB_RUN_JSON_RESERVE (64 * 1024)

/* Rewrites run.json atomically with `status` ("running", "completed",
 * "failed", "interrupted"). "running" is padded with trailing whitespace to
 * reserve the space the final write may need; a final status that finds the
 * disk full is written in place over that space (fileio.h
 * vb_write_reserved). 0, or -1 with errno set. */
int vb_run_write_json(const vb_run *r, const char *status);

/* Marks the run completed (run.json), prints the run directory, frees everything. */
void vb_run_finish(vb_run *r);

/* Records a phase (forward, backward, optimizer, data) of the current step
 * on the timeline's main lane. */
void vb_run_timeline_phase(vb_run *r, const char *phase, double t0, double t1);

/* Path of a file inside the run directory. */
void vb_run_path(const vb_run *r, char *buf, size_t n, const char *name);

#endif
