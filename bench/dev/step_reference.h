/* step_reference.h: a compute reference for `vitbench model`, written by
 * bench_step --reference_dir DIR (with --shard_tp / --shard_cp: one rank's
 * share of a tp x cp layout, timed alone on the shard communicators of
 * core/comm/comm.h's vb_comm_shard).
 *
 * The directory holds what the model reads of a one-rank `vitbench run`:
 *   run.json        kind "bench_step reference"; config (embed_dim, depth,
 *                   num_heads, patch_size, img_size, n_in/out_channels,
 *                   amp_mode, tf32), backend, ranks 1, local_batch_size,
 *                   fingerprint {omp_threads, affinity_cores}, threads
 *                   {node_ranks 1}, parallel {tp, cp, shard}, command_line
 *   iterations.csv  the timed SYNTHETIC steps (trial,trial_type,trial_index,
 *                   warmup,step,rank,seconds)
 *   ops.csv         their per-op profile (core/prof/profile.h's format)
 * Files are written atomically; a directory that cannot be made or written
 * exits with one line naming it.
 */
#ifndef VB_STEP_REFERENCE_H
#define VB_STEP_REFERENCE_H

#include "core/config/config.h"
#include "core/prof/profile.h"

typedef struct vb_step_reference {
    const vb_config *cfg;
    const char *backend;      /* the backend the steps ran on ("cpu", "cuda") */
    int local_batch;
    int tp, cp;               /* the shard (1, 1: the whole model) */
    const double *step_s;     /* the timed SYNTHETIC steps */
    int nsteps;
    vb_profiler *prof;        /* their ops */
    const char *command_line;
} vb_step_reference;

void vb_step_reference_write(const char *dir, const vb_step_reference *r);

#endif
