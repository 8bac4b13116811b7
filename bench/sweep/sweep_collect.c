/* sweep_collect.c: `vitbench sweep --collect SWEEP_DIR`: what sbatch jobs
 * recorded, into the sweep's index.csv.
 *
 * Contract: a job script writes each run's exit status to
 * SWEEP_DIR/status/<run>.exit (one integer line, renamed into place) and
 * then calls --collect. Collecting reads index.csv into the items whose
 * status is not yet final in memory (none, submitted, dry-run), applies every status
 * file to a row that is still submitted or dry-run (a dry run's scripts may
 * be submitted by hand), or has no row yet: exit 0 -> completed with its
 * headline numbers, anything else -> failed with that exit code and its
 * run.json marked failed when the run could not say so itself. completed and
 * failed rows are final. Jobs of one sweep may end at the same moment, so
 * the read-modify-write of index.csv holds an exclusive lock on
 * SWEEP_DIR/.collect.lock (waiting at most 60 s, then going on unlocked with
 * a warning rather than hanging a job). The submitting sweep records its
 * rows the same way, so a job that ends before the next submission is not
 * overwritten.
 *
 * A job that ends without writing a run's status (cancelled, out of time, a
 * node lost) would leave its rows submitted for ever: every submission
 * records its scheduler and job id in SWEEP_DIR/status/<run>.job (the job
 * does too, as it starts), and a row still submitted, without a status
 * file, whose job its scheduler says is over (sweep_jobs.c: Slurm's squeue
 * no longer lists it, LSF's bjobs says DONE / EXIT, PBS's qstat F, Flux's
 * flux jobs an inactive result) becomes failed with exit_code -1 and the
 * job's final state in run.json and on stdout. When the scheduler gives no
 * answer (no command, no controller) the row stays submitted. A dry run's
 * row is followed the same way once a job running its script (submitted by
 * hand) has recorded its id.
 */
#include "bench/sweep/sweep_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "analysis/csv.h"
#include "core/results/results.h"

static const char *const k_statuses[] = {"completed", "failed", "submitted", "dry-run"};

/* The status as one of the literals items point to; NULL when unknown. */
static const char *status_literal(const char *st) {
    for (size_t i = 0; i < sizeof k_statuses / sizeof k_statuses[0]; i++)
        if (strcmp(st, k_statuses[i]) == 0) return k_statuses[i];
    return NULL;
}

static int lock_dir(const char *dir) {
    char path[VB_PATH_MAX];
    vb_snprintf(path, sizeof path, "%s/.collect.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT, 0664);
    if (fd < 0) {
        vb_warn("cannot open %s (%s); collecting without a lock", path, strerror(errno));
        return -1;
    }
    for (int tries = 0; tries < 600; tries++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        if (errno != EWOULDBLOCK && errno != EINTR) break; /* a file system without flock */
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
    vb_warn("cannot lock %s; collecting without the lock", path);
    close(fd);
    return -1;
}

/* status/<run>.exit: the exit status it holds, or INT_MIN when there is none. */
static int read_status_file(const char *dir, const char *name) {
    char path[VB_PATH_MAX + 200];
    vb_snprintf(path, sizeof path, "%s/status/%s.exit", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return INT_MIN;
    char line[64] = "";
    bool got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    int code;
    if (!got || !sweep_parse_int(line, &code) || code < 0) {
        vb_warn("%s: '%s' is not an exit status; the run is left as it was", path, line);
        return INT_MIN;
    }
    return code;
}

void sweep_clear_status(const char *dir, const sweep_item *it) {
    static const char *const ext[2] = {"exit", "job"};
    for (int i = 0; i < 2; i++) {
        char path[VB_PATH_MAX + 200];
        vb_snprintf(path, sizeof path, "%s/status/%s.%s", dir, it->name, ext[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            vb_die_input("cannot remove the old status %s (%s)", path, strerror(errno));
    }
}

int sweep_collect(const char *dir, const char *runs_dir, const vb_sweep_plan *plan, sweep_item *items, int n,
                  int *completed, int *waiting) {
    int lock = lock_dir(dir);
    char path[VB_PATH_MAX], err[512];
    vb_snprintf(path, sizeof path, "%s/" VB_INDEX_CSV, dir);
    vb_csv t;
    if (vb_csv_read(path, &t, err, sizeof err) != 0) vb_die_input("flag --collect: %s", err);
    int cdir = vb_csv_col(&t, VB_COL_RUN_DIR), cst = vb_csv_col(&t, VB_COL_STATUS), ccode = vb_csv_col(&t, VB_COL_EXIT_CODE),
        cthr = vb_csv_col(&t, VB_COL_THREADS_PER_RANK), cfail = vb_csv_col(&t, VB_INDEX_FAILURE_COLUMN);
    if (cdir < 0 || cst < 0) vb_die_input("flag --collect: %s has no run_dir / status columns", path);
    for (int i = 0; i < n; i++) {
        sweep_item *it = &items[i];
        char want[300];
        snprintf(want, sizeof want, "runs/%s", it->name);
        /* what this process decided (a failed submission, a run it ran) stands */
        bool open = !it->status || strcmp(it->status, "submitted") == 0 || strcmp(it->status, "dry-run") == 0;
        for (int row = 0; row < t.nrows && open; row++) {
            if (strcmp(vb_csv_get(&t, row, cdir), want) != 0) continue;
            it->status = status_literal(vb_csv_get(&t, row, cst));
            double code, threads;
            if (ccode >= 0 && vb_csv_num(&t, row, ccode, &code)) it->exit_code = (int)code;
            /* the threads the job script was written with, not what this
             * node (inside the job: the allocation) would choose now */
            if (cthr >= 0 && vb_csv_num(&t, row, cthr, &threads) && threads >= 1) it->threads = (int)threads;
            if (it->status && strcmp(it->status, "completed") == 0) sweep_read_headline(runs_dir, it);
            if (cfail >= 0) snprintf(it->failure, sizeof it->failure, "%s", vb_csv_get(&t, row, cfail));
            break;
        }
    }
    vb_csv_free(&t);
    int failed = 0;
    sweep_jobq queue = {0};
    *completed = *waiting = 0;
    for (int i = 0; i < n; i++) {
        sweep_item *it = &items[i];
        bool final = it->status && (strcmp(it->status, "completed") == 0 || strcmp(it->status, "failed") == 0);
        if (!final) {
            int code = read_status_file(dir, it->name);
            if (code != INT_MIN) {
                it->exit_code = code;
                it->status = code == 0 ? "completed" : "failed";
                if (code == 0) {
                    sweep_read_headline(runs_dir, it);
                } else {
                    sweep_mark_run_failed(runs_dir, it);
                    /* the job script writes 128 + 15 when timeout_s ran out, as a
                     * SIGTERM would: the class says both */
                    sweep_failure_class(code, "", it->failure, sizeof it->failure);
                }
            } else if (it->status) { /* submitted, or a dry run's script submitted by hand (its job recorded its id) */
                /* no status, and its job is over: cancelled, out of time, a
                 * node lost -- the script never reached the run's end. A job
                 * writes the status before it ends, so this is final. */
                char id[128], state[64];
                const sweep_scheduler *sc = sweep_read_job(dir, it->name, id, sizeof id);
                if (sc && sweep_job_over(&queue, sc, dir, id, state, sizeof state) == 1) {
                    it->status = "failed";
                    it->exit_code = -1;
                    snprintf(it->failure, sizeof it->failure, "%.8s %.38s", sc->id, state[0] ? state : "job gone");
                    char rj[VB_PATH_MAX + 200], why[300];
                    vb_snprintf(rj, sizeof rj, "%s/%s/" VB_RUN_JSON, runs_dir, it->name);
                    if (state[0])
                        snprintf(why, sizeof why, "its %s job %s ended (%s) before the run finished", sc->name, id,
                                 state);
                    else
                        snprintf(why, sizeof why, "its %s job %s left the queue before the run finished", sc->name, id);
                    (void)vb_run_json_mark_failed(rj, why);
                    printf("vitbench sweep: %s: %s: failed (exit_code -1)\n", it->name, why);
                }
            }
        }
        if (!it->status) continue;
        if (strcmp(it->status, "completed") == 0)
            (*completed)++;
        else if (strcmp(it->status, "failed") == 0)
            failed++;
        else
            (*waiting)++;
    }
    sweep_jobq_free(&queue);
    if (sweep_write_index(path, plan, items, n) != 0) vb_die_input("cannot write %s", path);
    if (lock >= 0) close(lock); /* releases the flock */
    return failed;
}
