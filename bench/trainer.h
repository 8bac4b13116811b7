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

#include "core/comm.h"
#include "core/config.h"
#include "core/data.h"
#include "core/model.h"
#include "core/optim.h"
#include "core/profile.h"

typedef enum { VB_MODE_RUN = 0, VB_MODE_TRAIN } vb_run_mode;

typedef struct vb_run {
    vb_run_mode mode;
    bool benchy;                 /* run, or train --enable_benchy */
    vb_config cfg;
    vb_benchy_config bcfg;
    char benchy_file[VB_PATH_MAX]; /* the benchy YAML used, "" for benchy's defaults */

    vb_comm world;
    int ranks;                   /* data-parallel ranks (world size for now) */
    int local_batch, global_batch;

    const vb_ops *ops;
    vb_profiler *prof;
    vit_model *model;
    vb_adam opt;
    float *inp_dev, *tar_dev;    /* backend copies of the current batch [B,C,H,W] */
    size_t inp_bytes, tar_bytes; /* for a full local batch */

    vb_loader *train_loader;
    vb_loader *valid_loader;     /* train mode only */

    int iteration;               /* training steps done so far (lr schedule position) */

    char run_dir[VB_PATH_MAX];
    char run_id[320];
    char *command_line;          /* argv joined, shell-quoted where needed */
    char start_time[32], end_time[32];
    char host[256];
    bool finished;
} vb_run;

/* Parses argv[first..] into the config, validates inputs, builds loaders,
 * model and optimizer, creates the run directory and writes run.json.
 * `world` must come from vb_world_init. Exits 2 on bad input. */
void vb_run_setup(vb_run *r, vb_run_mode mode, int argc, char **argv, int first, const vb_comm *world);

/* One training step on `b`: host->backend copy, forward, backward,
 * (gradient all-reduce across ranks), Adam with the scheduled lr.
 * Returns this rank's forward loss; *lr_used receives the lr (may be NULL). */
float vb_train_step(vb_run *r, const vb_batch *b, float *lr_used);

/* Copies a batch to the backend buffers (profiled as memcpy "h2d"). */
void vb_run_copy_batch(vb_run *r, const vb_batch *b);

/* Rewrites run.json atomically with `status` ("running", "completed", "failed"). */
void vb_run_write_json(const vb_run *r, const char *status);

/* Marks the run completed (run.json), prints the run directory, frees everything. */
void vb_run_finish(vb_run *r);

/* SIGINT / SIGTERM: the handler only sets a flag (a second signal kills at
 * once). Loops poll vb_run_interrupted() between steps, write what they have
 * finished, then call vb_run_exit_interrupted: run.json says "interrupted"
 * and the process exits 128 + signal, like a shell reports it. */
bool vb_run_interrupted(void);
void vb_run_exit_interrupted(vb_run *r) __attribute__((noreturn));

/* Python's repr() of a float (shortest round-trip form, ".0" on integers),
 * so the BENCHY:: lines read exactly as benchy prints them. */
void vb_pyfloat(char *buf, size_t n, double x);

/* Path of a file inside the run directory. */
void vb_run_path(const vb_run *r, char *buf, size_t n, const char *name);

#endif
