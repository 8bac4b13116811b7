/* checkpoint.h: HDF5 checkpoints named and shaped like the PyTorch module's
 * state_dict (one dataset per tensor at the file root, e.g.
 * "blocks.0.attn.q.weight" [D, D]); optimizer state in group "optimizer"
 * (datasets "step" (int scalar), "exp_avg", "exp_avg_sq" (flat [nparams],
 * same layout as the parameter buffer)). A PyTorch script can load it with
 * h5py: {k: torch.from_numpy(f[k][...]) for k in f if k != "optimizer"}. */
#ifndef VB_CHECKPOINT_H
#define VB_CHECKPOINT_H

#include "core/model.h"
#include "core/optim.h"

/* Writes atomically (tmp + rename). Exits 2 naming the path on IO failure. */
void vb_checkpoint_save(const char *path, const vit_model *m, const vb_adam *opt);
/* Loads every tensor; a missing or misshapen dataset exits 2 naming it and
 * the file. Optimizer state is loaded when present and opt != NULL. */
void vb_checkpoint_load(const char *path, vit_model *m, vb_adam *opt);

#endif
