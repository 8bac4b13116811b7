/* trials_csv.h: the one reader of a run's trials.csv (report, compare, the
 * scaling model), with the checks every one of them needs.
 *
 * A trials.csv is refused (-2, one line naming the file and the record)
 * when:
 *   - its last record has no line end (the file was cut while being written:
 *     a number cut short still parses);
 *   - its header is not the schema's (VB_TRIALS_CSV_HEADER): every column
 *     named, in the schema's order (more columns may follow). Two names
 *     swapped (seconds and samples_per_s) are refused here: the rows'
 *     own check below is symmetric under that swap;
 *   - a field is not what its column holds: trial_type one of
 *     vb_trial_kinds' names (IO, SYNTHETIC, FULL, VALIDATION); warmup 0/1 (true/false); trial_index, nbatches, global_batch,
 *     ranks and rank whole numbers >= 0 (nbatches, global_batch >= 1);
 *     seconds and samples_per_s finite and > 0;
 *   - samples_per_s is not nbatches x global_batch / seconds (to 1e-6;
 *     vitbench writes both from one measurement, to 9 digits);
 *   - seconds is not the sum of the trial's step seconds in the run's
 *     iterations.csv (to 1e-6, where that file has the trial's steps of
 *     that rank): seconds checked against its own meaning, a time;
 *   - a record repeats another's trial (trial_type, trial_index, warmup,
 *     rank): one trial counted twice doubles n and halves p;
 *   - its run_id is not the run's: run.json's run_id, or without a
 *     run.json the first record's (rows of another run pasted in).
 * In a run that vitbench import made (run.json has "imported"), nbatches,
 * global_batch, ranks and seconds may be empty: what the imported files did
 * not say (a job log prints throughputs only). The checks that need them are
 * made where they are there.
 */
#ifndef VB_ANALYSIS_TRIALS_CSV_H
#define VB_ANALYSIS_TRIALS_CSV_H

#include <stddef.h>

#include "core/results/results.h" /* vb_trial_kind */


/* The timed (non-warm-up) trials of rank 0, per trial kind, in file order:
 * benchy's per-trial samples_per_s. */
typedef struct vb_trials {
    double *rate[VB_TRIAL_NKINDS];
    int n[VB_TRIAL_NKINDS];
    char path[1024];    /* the file read */
} vb_trials;

/* Reads run_dir/trials.csv. 0; -1 when it cannot be read (no such file,
 * not readable: why says so); -2 when it is refused (above: why names the
 * file and the record). The caller frees it with vb_trials_free (also
 * after a failure). */
int vb_trials_read(const char *run_dir, vb_trials *t, char *why, size_t n);
/* A warmup cell: 0/1 as vitbench writes it (true/false as hand-made files
 * do); -1 for anything else. */
int vb_trial_warmup_of(const char *s);
void vb_trials_free(vb_trials *t);

#endif
