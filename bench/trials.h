/* trials.h: benchy's IO / SYNTHETIC / FULL trials (romerojosh/benchy semantics).
 *
 * Each trial type runs nwarmup warm-up trials then ntrials timed trials of
 * nbatches batches (capped at one epoch, as benchy caps at len(loader)), each
 * trial on a fresh epoch of the loader, labelled IO_WARMUP_0, IO_0, ... like
 * benchy. An iteration is timed from one batch fetch to the next, so it holds
 * the data wait and the whole step. SYNTHETIC caches the first batch and, as
 * benchy does, its first step runs before the clock starts.
 * After every trial trials.csv, iterations.csv, summary.csv, ops.csv and
 * benchy's JSON are rewritten atomically.
 */
#ifndef VB_TRIALS_H
#define VB_TRIALS_H

#include "core/run/trainer.h"

/* Runs every enabled trial type, prints benchy's lines and summary, writes the
 * result files. Returns 0. */
int vb_trials_run(vb_run *r);

#endif
