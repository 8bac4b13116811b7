/* stop.c: how a run stops on a signal, a closed stdout, its sweep gone or a
 * diverged loss (stop.h). */
#include "core/run/stop.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/results/results.h"
#include "core/util/proc_watch.h"
#include "core/util/pyfloat.h"

static volatile sig_atomic_t g_stop_signal = 0;

/* The stop watchdog: the handler only sets a flag, and the training thread
 * acts on it between steps. A thread blocked in a collective whose peer died
 * never gets there, and the launcher's SIGKILL follows the SIGTERM within
 * about a second (Open MPI), which would leave run.json at "running" forever.
 * So the handler also wakes a watchdog thread through a pipe; if the process
 * is still alive half a second later, the watchdog marks run.json "failed"
 * (if it still says "running"). A training thread that does reach its stop
 * point writes "interrupted" over it. Every rank has one, so the run is
 * marked even when rank 0 is the one that died. */
static int g_stop_pipe[2] = {-1, -1};
static char g_watch_json[VB_PATH_MAX];

static void on_stop_signal(int sig) {
    g_stop_signal = sig;
    signal(sig, SIG_DFL); /* a second Ctrl-C does not wait for the step to end */
    if (g_stop_pipe[1] >= 0) {
        unsigned char b = (unsigned char)sig;
        ssize_t k = write(g_stop_pipe[1], &b, 1); /* async-signal-safe */
        (void)k;
    }
}

/* The sweep that started this run is gone (proc_watch.h): the run stops as
 * on SIGTERM, recording what it finished, instead of running on unrecorded
 * beside the point a resumed sweep would start again. */
static void on_sweep_gone(const char *token) {
    vb_warn("the sweep that started this run (process %s) is gone: stopping the run", token);
    kill(getpid(), SIGTERM);
}

static void *stop_watchdog(void *arg) {
    (void)arg;
    unsigned char sig = 0;
    while (read(g_stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    struct timespec grace = {0, 500 * 1000 * 1000};
    nanosleep(&grace, NULL);
    char why[160];
    snprintf(why, sizeof why,
             "stopped by signal %d while the training thread could not finish its step (blocked in a collective: "
             "did another rank die?)",
             (int)sig);
    vb_run_json_mark_failed(g_watch_json, why);
    return NULL;
}

static void start_stop_watchdog(const vb_run *r) {
    if (g_stop_pipe[0] >= 0) return; /* one per process */
    vb_run_path(r, g_watch_json, sizeof g_watch_json, VB_RUN_JSON);
    if (pipe2(g_stop_pipe, O_CLOEXEC) != 0) {
        g_stop_pipe[0] = g_stop_pipe[1] = -1;
        return; /* no watchdog: runs still stop, only a blocked one stays "running" */
    }
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, stop_watchdog, NULL) != 0) {
        close(g_stop_pipe[0]);
        close(g_stop_pipe[1]);
        g_stop_pipe[0] = g_stop_pipe[1] = -1;
    }
    pthread_attr_destroy(&a);
}

/* A closed stdout (`vitbench run | head -1`) is a stop like SIGTERM: SIGPIPE
 * is ignored, so the write fails with EPIPE instead of killing the process
 * with run.json still "running", and the next poll sees the stream's error
 * flag. A stdout that cannot take output any more (EPIPE, or a full disk
 * under a redirect) would otherwise lose every line after it silently. */
bool vb_run_interrupted(void) {
    if (g_stop_signal == 0 && (ferror(stdout) || fflush(stdout) != 0)) g_stop_signal = SIGPIPE;
    return g_stop_signal != 0;
}

void vb_run_exit_interrupted(vb_run *r) {
    int sig = g_stop_signal ? g_stop_signal : SIGINT;
    fflush(stdout);
    vb_iso_time(r->end_time, sizeof r->end_time);
    if (r->world.rank == 0 && vb_run_write_json(r, "interrupted") != 0) {
        char path[VB_PATH_MAX];
        vb_run_path(r, path, sizeof path, VB_RUN_JSON);
        vb_warn("cannot write %s: %s", path, strerror(errno));
    }
    r->finished = true;
    vb_warn("interrupted by signal %d after %d training steps; finished results are in %s", sig, r->iteration,
            r->run_dir);
    exit(128 + sig);
}

void vb_run_die_diverged(const vb_run *r, float loss, float lr, int step) {
    char lr_str[64];
    vb_pyfloat(lr_str, sizeof lr_str, lr);
    vb_die_env("training diverged: loss is %s at step %d with lr %s (the data is finite: it is checked as it is "
               "loaded); lower --lr or the warm-up; results so far are in %s",
               isnan(loss) ? "nan" : (loss > 0 ? "inf" : "-inf"), step, lr_str, r->run_dir);
}

void vb_run_stop_init(const vb_run *r) {
    start_stop_watchdog(r);
    vb_on_stop_signals(on_stop_signal);
    /* started by a sweep: stop with it, even when it was killed with SIGKILL
     * and its launcher keeps going (proc_watch.h) */
    vb_proc_watch_env(VB_SWEEP_PROCESS_ENV, on_sweep_gone);
    signal(SIGPIPE, SIG_IGN); /* EPIPE on stdout ends the run cleanly (vb_run_interrupted) */
}
