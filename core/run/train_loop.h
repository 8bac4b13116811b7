/* train_loop.h: the `train` subcommand, the tutorial's train.py loop.
 *
 * num_iters updates over epochs of vb_loader_steps_per_epoch steps (the last
 * epoch may be partial; num_epochs > 0 caps the number of epochs), each epoch
 * followed by validation over the whole valid split. Logs in train.py's words;
 * train_log.csv (step,epoch,loss,lr,seconds: one row per update, loss before
 * the update, lr used by it) and validation.csv (epoch,step,val_loss,
 * rmse_u10m,seconds) are rewritten atomically after every epoch; the model is
 * saved to <run_dir>/checkpoint.h5 at the end (save_checkpoint).
 */
#ifndef VB_TRAIN_LOOP_H
#define VB_TRAIN_LOOP_H

#include "core/run/trainer.h"

/* Returns 0. */
int vb_train_loop(vb_run *r);

#endif
