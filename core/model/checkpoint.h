/* checkpoint.h: HDF5 checkpoints named and shaped like the PyTorch module's
 * state_dict (one dataset per tensor at the file root, e.g.
 * "blocks.0.attn.q.weight" [D, D]); optimizer state in group "optimizer"
 * (datasets "step" (int scalar), "exp_avg", "exp_avg_sq" (flat
 * [nparams_full], the single-rank parameter buffer layout)). A PyTorch script
 * can load it with
 * h5py: {k: torch.from_numpy(f[k][...]) for k in f if k not in ("optimizer", "fp8")}.
 * Under amp_mode fp8 group "fp8" holds the delayed-scaling state: "scale"
 * [tensors], "amax_history" [fp8_amax_history_len, tensors] (row 0 the
 * newest) and "steps", so that a resumed run quantises with the scales it
 * stopped with; a run that is not fp8 ignores the group, and an fp8 run
 * from a file without it starts at scale 1.
 *
 * The file does not depend on the parallel layout: tensors always have their
 * full state_dict shape, and exp_avg / exp_avg_sq hold tensor i at
 * vit_tensor.full_offset with its full shape, row-major (for a single rank,
 * exactly the parameter buffer). A tensor-parallel run writes the gathered
 * full tensors and reads its shards back with hyperslabs, so checkpoints move
 * freely between tp layouts (and cp, which replicates every tensor). */
#ifndef VB_CHECKPOINT_H
#define VB_CHECKPOINT_H

#include "core/model/vit.h"
#include "core/model/optim.h"

/* Writes atomically (tmp + rename). The file is assembled in memory first
 * (the saving rank briefly holds about twice the checkpoint's size), so
 * every disk error is a plain errno from one write. A failed write (full or read-only disk)
 * removes the temporary file and exits 1 with one line naming the path and
 * the OS error.
 * With tensor_parallel > 1 it is COLLECTIVE over m->par.tp: every rank of the
 * tp group must call it (same path; opt NULL on all or on none); it
 * all-gathers the shards and only tp rank 0 writes. Ranks at other cp / dp
 * coordinates hold replicas and must not write the same path concurrently:
 * call it on the ranks with cp rank 0 and dp rank 0 (the tp group of world
 * rank 0). With tp 1 it is local, as before. */
void vb_checkpoint_save(const char *path, const vit_model *m, const vb_adam *opt);
/* As vb_checkpoint_save, for a run stopped by a signal: the file's root also
 * carries integer attributes "interrupted" = 1 and "step" = the updates done,
 * so nobody mistakes it for the end of training. */
void vb_checkpoint_save_interrupted(const char *path, const vit_model *m, const vb_adam *opt, int step);
/* Loads this rank's shard of every tensor (local, no communication: every
 * rank calls it); a missing dataset or one whose shape is not the full
 * state_dict shape, or that holds a NaN or Inf, exits 2 naming it and the
 * file. Optimizer state is loaded
 * when present and opt != NULL. */
void vb_checkpoint_load(const char *path, vit_model *m, vb_adam *opt);

#endif
