/* stop.h: how a run stops before its end, and what it records.
 *
 * SIGINT / SIGTERM / SIGHUP: the handler only sets a flag (a second signal
 * kills at once) and wakes a watchdog thread, which marks run.json "failed"
 * when the training thread has not reached its stop point half a second
 * later (blocked in a collective whose peer died: the launcher's SIGKILL
 * follows within about a second). A stdout that can no longer be written
 * (its reader gone: `vitbench run | head -1`) counts as SIGPIPE, which is
 * ignored so the write fails with EPIPE instead of killing the process. A
 * run started by a sweep stops as on SIGTERM when that sweep is gone
 * (proc_watch.h). Loops poll vb_run_interrupted() between steps, write what
 * they have finished, then call vb_run_exit_interrupted: run.json says
 * "interrupted" and the process exits 128 + signal, like a shell reports it.
 */
#ifndef VB_STOP_H
#define VB_STOP_H

#include <stdbool.h>

#include "core/run/trainer.h"

/* Installs the handlers and starts the watchdog for run r (whose run
 * directory exists); once per process, from vb_run_setup. */
void vb_run_stop_init(const vb_run *r);

bool vb_run_interrupted(void);
void vb_run_exit_interrupted(vb_run *r) __attribute__((noreturn));

/* A non-finite loss from data the loader has checked to be finite: the
 * training diverged (too large an lr), a failure of the run, not bad input
 * nor a bug. One line with the step and the lr, exit 1; run.json becomes
 * "failed" (atexit). Call after writing what the run has finished. */
void vb_run_die_diverged(const vb_run *r, float loss, float lr, int step) __attribute__((noreturn));

#endif
