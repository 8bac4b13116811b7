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
 * SWEEP_DIR/.collect.lock (waiting at most 60 s, then exit 1 with index.csv
 * as it was: never written unlocked). The submitting sweep records its
 * rows the same way, so a job that ends before the next submission is not
 * overwritten; a local sweep holds its lock (.sweep.lock) for its whole
 * life and a --collect of it is refused meanwhile (sweep_cmd.c). Every
 * read and write goes through the sweep directory held open (sweep_tree.c):
 * a runs/<run> or status/ that is a link is never written through, and a
 * completed run whose runs/<run> is a link is not taken as the point's.
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

/* The index lock: every read-modify-write of index.csv holds it, the
 * submitting sweep's and each job's alike, waiting at most a minute;
 * without it index.csv is not written (exit 1): a collect that went on
 * unlocked could put back rows another had just made final. A file system
 * without flock at all (ENOSYS, EOPNOTSUPP) gets a warning: nothing there
 * can lock. */
static int lock_index(const sweep_tree *t) {
    char why[VB_PATH_MAX + 128];
    int fd = sweep_open_lock(t, SWEEP_INDEX_LOCK_FILE, why, sizeof why);
    if (fd == -2) vb_die_input("sweep: %s", why);
    if (fd < 0) vb_die_env("sweep: %s: index.csv is written only under it", why);
    for (int tries = 0; tries < 600; tries++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        if (errno == ENOSYS || errno == EOPNOTSUPP || errno == ENOLCK) {
            vb_warn("%s/%s cannot be locked on this file system (%s): jobs ending at the same moment may each "
                    "rewrite index.csv",
                    t->dir, SWEEP_INDEX_LOCK_FILE, strerror(errno));
            return fd;
        }
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
    close(fd);
    vb_die_env("sweep: %s/%s is held by another collect for over a minute; index.csv not written (run vitbench "
               "sweep --collect %s again)",
               t->dir, SWEEP_INDEX_LOCK_FILE, t->dir);
}

/* status/<run>.exit: the exit status it holds, or INT_MIN when there is none. */
static int read_status_file(const sweep_tree *t, const char *name) {
    char file[300], path[VB_PATH_MAX + 320], shown[VB_PATH_MAX + 320];
    snprintf(file, sizeof file, "%s.exit", name);
    if (!sweep_tree_has(t, SWEEP_STATUS) || !sweep_tree_exists(t, SWEEP_STATUS, file)) return INT_MIN;
    sweep_tree_fd_path(t, SWEEP_STATUS, file, path, sizeof path);
    sweep_tree_path(t, SWEEP_STATUS, file, shown, sizeof shown);
    size_t len = 0;
    char *text = vb_read_file(path, &len);
    if (!text) return INT_MIN;
    bool nul = strlen(text) != len;
    text[strcspn(text, "\r\n")] = '\0';
    int code;
    bool ok = !nul && sweep_parse_int(text, &code) && code >= 0;
    if (!ok) vb_warn("%s: '%.20s' is not an exit status; the run is left as it was", shown, nul ? "(a NUL byte)" : text);
    free(text);
    return ok ? code : INT_MIN;
}

void sweep_clear_status(const sweep_tree *t, const sweep_item *it) {
    static const char *const ext[2] = {"exit", "job"};
    for (int i = 0; i < 2; i++) {
        char file[300], shown[VB_PATH_MAX + 320];
        snprintf(file, sizeof file, "%s.%s", it->name, ext[i]);
        if (sweep_tree_unlink(t, SWEEP_STATUS, file) != 0)
            vb_die_input("cannot remove the old status %s (%s)", sweep_tree_path(t, SWEEP_STATUS, file, shown, sizeof shown),
                         strerror(errno));
    }
}

int sweep_collect(const sweep_tree *t, const sweep_scheduler *sc, const vb_sweep_plan *plan, sweep_item *items, int n,
                  int *completed, int *waiting) {
    int lock = lock_index(t);
    char path[VB_PATH_MAX + 64], shown[VB_PATH_MAX + 64], err[VB_PATH_MAX + 512];
    sweep_tree_fd_path(t, SWEEP_ROOT, VB_INDEX_CSV, path, sizeof path);
    sweep_tree_path(t, SWEEP_ROOT, VB_INDEX_CSV, shown, sizeof shown);
    vb_csv tab;
    if (vb_csv_read(path, &tab, err, sizeof err) != 0)
        vb_die_input("flag --collect: %s: %s", shown, strstr(err, ": ") ? strstr(err, ": ") + 2 : err);
    int cdir = vb_csv_col(&tab, VB_COL_RUN_DIR), cst = vb_csv_col(&tab, VB_COL_STATUS),
        ccode = vb_csv_col(&tab, VB_COL_EXIT_CODE), cthr = vb_csv_col(&tab, VB_COL_THREADS_PER_RANK),
        cfail = vb_csv_col(&tab, VB_INDEX_FAILURE_COLUMN);
    if (cdir < 0 || cst < 0) vb_die_input("flag --collect: %s has no run_dir / status columns", shown);
    for (int i = 0; i < n; i++) {
        sweep_item *it = &items[i];
        char want[300];
        snprintf(want, sizeof want, "runs/%s", it->name);
        /* what this process decided (a failed submission, a run it ran) stands */
        bool open = !it->status || strcmp(it->status, "submitted") == 0 || strcmp(it->status, "dry-run") == 0;
        for (int row = 0; row < tab.nrows && open; row++) {
            if (strcmp(vb_csv_get(&tab, row, cdir), want) != 0) continue;
            it->status = status_literal(vb_csv_get(&tab, row, cst));
            double code, threads;
            if (ccode >= 0 && vb_csv_num(&tab, row, ccode, &code)) it->exit_code = (int)code;
            /* the threads the job script was written with, not what this
             * node (inside the job: the allocation) would choose now */
            if (cthr >= 0 && vb_csv_num(&tab, row, cthr, &threads) && threads >= 1) it->threads = (int)threads;
            if (it->status && strcmp(it->status, "completed") == 0) (void)sweep_read_headline(t, it);
            if (cfail >= 0) snprintf(it->failure, sizeof it->failure, "%s", vb_csv_get(&tab, row, cfail));
            break;
        }
    }
    vb_csv_free(&tab);
    int failed = 0;
    sweep_jobq queue = {0};
    *completed = *waiting = 0;
    for (int i = 0; i < n; i++) {
        sweep_item *it = &items[i];
        bool final = it->status && (strcmp(it->status, "completed") == 0 || strcmp(it->status, "failed") == 0);
        if (!final) {
            int code = read_status_file(t, it->name);
            if (code != INT_MIN) {
                it->exit_code = code;
                it->status = code == 0 ? "completed" : "failed";
                if (code == 0 && !sweep_read_headline(t, it)) {
                    /* a link at runs/<run> leads to another run's results */
                    it->status = "failed";
                    snprintf(it->failure, sizeof it->failure, "runs/<run> not a real directory");
                    printf("vitbench sweep: %s: runs/%s is not a real directory (a link?): its results are not this "
                           "point's; failed\n",
                           it->name, it->name);
                } else if (code != 0) {
                    sweep_mark_run_failed(t, it, NULL);
                    /* the job script writes 128 + 15 when timeout_s ran out, as a
                     * SIGTERM would: the class says both */
                    sweep_failure_class(code, "", it->failure, sizeof it->failure);
                }
            } else if (it->status && sc) { /* submitted, or a dry run's script submitted by hand (its job recorded its id) */
                /* no status, and its job is over: cancelled, out of time, a
                 * node lost -- the script never reached the run's end. A job
                 * writes the status before it ends, so this is final. */
                char id[128], state[64];
                if (sweep_read_job(t, sc, it->name, id, sizeof id) &&
                    sweep_job_over(&queue, sc, t, id, state, sizeof state) == 1) {
                    it->status = "failed";
                    it->exit_code = -1;
                    snprintf(it->failure, sizeof it->failure, "%.8s %.38s", sc->id, state[0] ? state : "job gone");
                    char why[300];
                    if (state[0])
                        snprintf(why, sizeof why, "its %s job %s ended (%s) before the run finished", sc->name, id,
                                 state);
                    else
                        snprintf(why, sizeof why, "its %s job %s left the queue before the run finished", sc->name, id);
                    sweep_mark_run_failed(t, it, why);
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
    if (sweep_write_index(t, plan, items, n) != 0) vb_die_env("cannot write %s: %s", shown, strerror(errno));
    close(lock); /* releases the flock */
    return failed;
}
