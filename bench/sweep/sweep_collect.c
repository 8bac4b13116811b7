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
 * records its job id in SWEEP_DIR/status/<run>.job, and a row still
 * submitted, without a status file, whose job Slurm says is over (one
 * squeue of the user's jobs per collect no longer lists it as pending or
 * running) becomes failed with exit_code -1
 * and the job's final state (sacct) in run.json and on stdout. Without
 * squeue, or when it cannot reach the controller, the row stays submitted.
 */
#include "bench/sweep/sweep_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
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

/* ---- jobs that ended without a status ---- */

/* The job id in sbatch's output ("Submitted batch job 123", or --parsable's
 * "123[;cluster]"); 0 when there is none. */
static long job_id_in(const char *log_path) {
    FILE *f = fopen(log_path, "r");
    if (!f) return 0;
    char line[512];
    long id = 0;
    while (!id && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "Submitted batch job ");
        p = p ? p + strlen("Submitted batch job ") : line;
        char *end;
        long v = strtol(p, &end, 10);
        if (end != p && v > 0 && (*end == '\0' || *end == '\n' || *end == ';' || *end == ' ')) id = v;
    }
    fclose(f);
    return id;
}

void sweep_record_job(const char *dir, const char *name, const char *submit_log) {
    long id = job_id_in(submit_log);
    if (!id) return; /* no id: the run is followed by its status file alone */
    char path[VB_PATH_MAX + 200], tmp[VB_PATH_MAX + 210];
    vb_snprintf(path, sizeof path, "%s/status/%s.job", dir, name);
    vb_snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = vb_fopen_nofollow(tmp, "w");
    if (!f || fprintf(f, "%ld\n", id) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        vb_warn("cannot record job %ld of %s in %s; a job that ends without a status will stay submitted", id, name,
                path);
}

/* status/<run>.job: the run's job id, or 0. */
static long read_job_file(const char *dir, const char *name) {
    char path[VB_PATH_MAX + 200];
    vb_snprintf(path, sizeof path, "%s/status/%s.job", dir, name);
    return job_id_in(path);
}

/* The first word of a file, "" when it is empty or missing. */
static void first_word(const char *path, char *out, size_t n) {
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (fscanf(f, "%63s", out) != 1) out[0] = '\0';
    fclose(f);
    (void)n;
}

/* Runs argv with its output into `out` (truncated first); its exit status,
 * -1 when it did not finish in 20 s. */
static int query(char *const *argv, const char *out) {
    if (unlink(out) != 0 && errno != ENOENT) return -1;
    const char *why;
    int rc = sweep_launch(argv, out, 20, 0, NULL, &why);
    return why[0] ? -1 : rc;
}

/* The user's jobs as squeue lists them, read once per collect (one query,
 * however many runs are waiting). */
typedef struct job_queue {
    bool loaded, ok; /* ok: squeue answered */
    int n;
    long *id;
    char (*state)[24];
} job_queue;

static void queue_load(job_queue *q, const char *dir) {
    q->loaded = true;
    if (!sweep_in_path("squeue")) return;
    char out[VB_PATH_MAX + 40], user[64];
    vb_snprintf(out, sizeof out, "%s/status/.squeue", dir);
    struct passwd *pw = getpwuid(getuid());
    snprintf(user, sizeof user, "%s", pw ? pw->pw_name : "");
    char *sq[] = {"squeue", "-h", "-o", "%i %T", "-u", user, NULL};
    if (!user[0] || query(sq, out) != 0) return; /* no word from the controller: decide nothing */
    FILE *f = fopen(out, "r");
    if (!f) return;
    q->ok = true;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        long id;
        char st[24];
        if (sscanf(line, "%ld %23s", &id, st) != 2) continue; /* array and het jobs (123_4, 123+1) too */
        q->id = sweep_realloc(q->id, (size_t)(q->n + 1) * sizeof *q->id);
        q->state = sweep_realloc(q->state, (size_t)(q->n + 1) * sizeof *q->state);
        q->id[q->n] = id;
        snprintf(q->state[q->n], sizeof q->state[q->n], "%s", st);
        q->n++;
    }
    fclose(f);
    (void)unlink(out);
}

/* True when Slurm says job `id` is over: squeue answered and no longer lists
 * it, or lists it in a final state. Its final state (sacct, else squeue's,
 * else "" when neither says) goes to state. Without squeue's answer nothing is decided. */
static bool job_over(job_queue *q, const char *dir, long id, char *state, size_t n) {
    if (!q->loaded) queue_load(q, dir);
    if (!q->ok) return false;
    static const char *const live[] = {"PENDING",  "RUNNING",   "CONFIGURING", "COMPLETING",   "SUSPENDED",
                                       "REQUEUED", "RESIZING",  "SIGNALING",   "STAGE_OUT",    "STOPPED",
                                       "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"};
    const char *listed = NULL;
    for (int i = 0; i < q->n && !listed; i++)
        if (q->id[i] == id) listed = q->state[i];
    if (listed)
        for (size_t i = 0; i < sizeof live / sizeof *live; i++)
            if (strcmp(listed, live[i]) == 0) return false;
    snprintf(state, n, "%s", listed ? listed : "");
    if (sweep_in_path("sacct")) {
        char ids[32], out[VB_PATH_MAX + 40], word[64];
        snprintf(ids, sizeof ids, "%ld", id);
        vb_snprintf(out, sizeof out, "%s/status/.sacct", dir);
        char *sa[] = {"sacct", "-n", "-X", "-P", "-j", ids, "-o", "State", NULL};
        if (query(sa, out) == 0) {
            first_word(out, word, sizeof word);
            if (word[0]) snprintf(state, n, "%s", word); /* TIMEOUT, CANCELLED, NODE_FAIL, ... */
        }
        (void)unlink(out);
    }
    return true;
}

int sweep_collect(const char *dir, const char *runs_dir, const vb_sweep_plan *plan, sweep_item *items, int n,
                  int *completed, int *waiting) {
    int lock = lock_dir(dir);
    char path[VB_PATH_MAX], err[512];
    vb_snprintf(path, sizeof path, "%s/" VB_INDEX_CSV, dir);
    vb_csv t;
    if (vb_csv_read(path, &t, err, sizeof err) != 0) vb_die_input("flag --collect: %s", err);
    int cdir = vb_csv_col(&t, "run_dir"), cst = vb_csv_col(&t, "status"), ccode = vb_csv_col(&t, "exit_code"),
        cthr = vb_csv_col(&t, "threads_per_rank"), cfail = vb_csv_col(&t, VB_INDEX_FAILURE_COLUMN);
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
    job_queue queue = {0};
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
            } else if (it->status && strcmp(it->status, "submitted") == 0) {
                /* no status, and its job is over: cancelled, out of time, a
                 * node lost -- the script never reached the run's end. A job
                 * writes the status before it ends, so this is final. */
                long id = read_job_file(dir, it->name);
                char state[64];
                if (id > 0 && job_over(&queue, dir, id, state, sizeof state)) {
                    it->status = "failed";
                    it->exit_code = -1;
                    snprintf(it->failure, sizeof it->failure, "slurm %.38s", state[0] ? state : "job gone");
                    char rj[VB_PATH_MAX + 200], why[160];
                    vb_snprintf(rj, sizeof rj, "%s/%s/" VB_RUN_JSON, runs_dir, it->name);
                    if (state[0])
                        snprintf(why, sizeof why, "its Slurm job %ld ended (%s) before the run finished", id, state);
                    else
                        snprintf(why, sizeof why, "its Slurm job %ld left the queue before the run finished", id);
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
    free(queue.id);
    free(queue.state);
    if (sweep_write_index(path, plan, items, n) != 0) vb_die_input("cannot write %s", path);
    if (lock >= 0) close(lock); /* releases the flock */
    return failed;
}
