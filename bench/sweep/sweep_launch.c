/* sweep_launch.c: starting one run of a sweep.
 *
 * Contract: a run's argv is the launcher's part (mpirun -np R --oversubscribe
 * -x OMP_NUM_THREADS [--bind-to none] here; srun, jsrun, mpiexec or flux run
 * with the allocation's shape from their scheduler's file, sweep_launchers.c
 * says which), then --launcher_args, then <vitbench> <command>
 * and its overrides; sweep_launch runs it with fork/exec (never a shell) in
 * its own process group, stdin from /dev/null (or a file: bsub < script) and stdout + stderr appended to
 * its log, stops the whole group on timeout or on a stop signal (SIGTERM,
 * then SIGKILL after 10 s) and dies with the sweep (PR_SET_PDEATHSIG). Job
 * scripts (sweep_slurm.c) hold the same launcher lines. Printed commands and
 * scripts are shell-quoted.
 */
#include "bench/sweep/sweep_internal.h"

#include "core/util/proc_watch.h"
#include "core/results/results.h"
#include "core/util/log_line.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Is `prog` runnable from PATH? */
bool sweep_in_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) return false;
    char *copy = vb_strdup_check(path);
    bool found = false;
    for (char *d = strtok(copy, ":"); d && !found; d = strtok(NULL, ":")) {
        char full[VB_PATH_MAX];
        snprintf(full, sizeof full, "%s/%s", *d ? d : ".", prog);
        found = access(full, X_OK) == 0;
    }
    free(copy);
    return found;
}

/* Shell quoting for printed commands and sbatch scripts (never executed by
 * us). A word always stays on its line: values with a CR or LF are refused
 * where they come in (sweep_refuse_line_break), and one that got here anyway
 * is written with $'\r' / $'\n' (bash, the job scripts' shell) instead of a
 * raw break that would end the line inside the quotes. */
void sweep_fput_quoted(FILE *f, const char *s) {
    bool plain = *s != '\0';
    for (const char *c = s; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("_-./=:,+@%", *c)) plain = false;
    if (plain) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (const char *c = s; *c; c++) {
        if (*c == '\'')
            fputs("'\\''", f);
        else if (*c == '\n' || *c == '\r')
            fputs(*c == '\n' ? "'$'\\n''" : "'$'\\r''", f);
        else
            fputc(*c, f);
    }
    fputc('\'', f);
}

void sweep_fput_argv(FILE *f, char *const *argv) {
    for (int i = 0; argv[i]; i++) {
        if (i) fputc(' ', f);
        sweep_fput_quoted(f, argv[i]);
    }
}

/* The run's vitbench arguments: <exe> <command> --key value ... --output_dir D --run_name N */
void sweep_push_vitbench_args(sweep_strvec *a, const char *exe, const vb_scenario *s, const vb_sweep_run *r,
                              const char *run_name, const char *runs_dir) {
    sweep_sv_push(a, exe);
    sweep_sv_push(a, s->command);
    for (int i = 0; i < r->args.n; i++) {
        const char *k = r->args.v[i].key, *v = r->args.v[i].value;
        /* --key=value when the value could be mistaken for a flag or vanish */
        if (!v[0] || v[0] == '-') {
            sweep_sv_pushf(a, "--%s=%s", k, v);
        } else {
            sweep_sv_pushf(a, "--%s", k);
            sweep_sv_push(a, v);
        }
    }
    sweep_sv_push(a, "--output_dir");
    sweep_sv_push(a, runs_dir);
    sweep_sv_push(a, "--run_name");
    sweep_sv_push(a, run_name);
}

/* Does the user's --launcher_args already decide where ranks run? */
static bool user_binds(const sweep_strvec *extra) {
    for (int i = 0; i < extra->n; i++)
        if (strncmp(extra->v[i], "--bind-to", 9) == 0 || strncmp(extra->v[i], "--map-by", 8) == 0 ||
            strncmp(extra->v[i], "--cpu-set", 9) == 0 || strncmp(extra->v[i], "--rank-by", 9) == 0)
            return true;
    return false;
}

void sweep_build_mpirun(sweep_strvec *a, const vb_scenario *s, int ranks, int per_node, const sweep_strvec *extra) {
    (void)s, (void)per_node;
    sweep_sv_push(a, "mpirun");
    sweep_sv_push(a, "-np");
    sweep_sv_pushf(a, "%d", ranks);
    sweep_sv_push(a, "--oversubscribe");
    /* every rank runs OMP_NUM_THREADS threads (threads_per_rank); mpirun's
     * default core binding would squeeze them onto one core each */
    sweep_sv_push(a, "-x");
    sweep_sv_push(a, "OMP_NUM_THREADS");
    if (!user_binds(extra)) {
        sweep_sv_push(a, "--bind-to");
        sweep_sv_push(a, "none");
    }
}

/* The launcher's own part (a batch launcher's: the one inside its job
 * scripts, sweep_launchers.c), then --launcher_args. */
void sweep_build_launch(sweep_strvec *a, launcher_kind k, const vb_scenario *s, int ranks, int per_node,
                        const sweep_strvec *extra) {
    sweep_launchers[sweep_launchers[k].step].build(a, s, ranks, per_node, extra);
    for (int i = 0; i < extra->n; i++) sweep_sv_push(a, extra->v[i]);
}

/* SIGINT / SIGTERM / SIGHUP seen by the sweep: 0 = none. The current run is
 * stopped (sweep_launch) and no other starts. */
static volatile sig_atomic_t g_stop_signal = 0;
static void on_stop_signal(int sig) { g_stop_signal = sig; }

void sweep_catch_stop_signals(void) { vb_on_stop_signals(on_stop_signal); }

int sweep_stop_signal(void) { return (int)g_stop_signal; }

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The record of the run in flight: SWEEP_DIR/.running names its process
 * group with its leader's start time (a group id names another group once
 * this one has ended), host and boot, so that a --resume of a killed sweep
 * can tell whether that run still lives (sweep_refuse_live_run). Written by
 * rename, in the sweep directory held open. */
typedef struct {
    pid_t pgid;
    unsigned long long start;
    const char *name;
} running_rec;

static void write_running(FILE *f, void *ctx) {
    const running_rec *r = ctx;
    char host[256] = "?", boot[64];
    gethostname(host, sizeof host - 1);
    vb_boot_id(boot, sizeof boot);
    fprintf(f, "pgid %d\nstart %llu\nhost %s\nboot %s\nrun %s\n", (int)r->pgid, r->start, host, boot[0] ? boot : "?",
            r->name);
}

/* fork/exec argv with stdout+stderr to logfd (the caller's, opened to
 * append), in its own process group (so a timeout or Ctrl-C can stop
 * mpirun and every rank it started). Returns the exit status (128+signal
 * when killed); *why says if the sweep cut it short ("" otherwise). */
int sweep_launch(char *const *argv, int logfd, int timeout_s, int threads, const sweep_run_ref *run, const char **why) {
    return sweep_launch_input(argv, NULL, logfd, timeout_s, threads, run, why);
}

int sweep_launch_input(char *const *argv, const char *input, int logfd, int timeout_s, int threads,
                       const sweep_run_ref *run, const char **why) {
    *why = "";
    /* the run watches this process and stops when it is gone (proc_watch.h) */
    char self[320];
    vb_proc_token(self, sizeof self);
    /* a run waits to exec until its .running record is written: a sweep
     * killed in between leaves no run that nothing records (the pipe's
     * write end closes with it, and the child exits) */
    int gate[2] = {-1, -1};
    if (run && pipe2(gate, O_CLOEXEC) != 0) vb_die_internal("pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) vb_die_internal("fork failed: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        /* a sweep killed with SIGKILL cannot stop its run: the run stops
         * itself (mpirun passes SIGTERM on to its ranks) instead of finishing
         * unrecorded; a resumed sweep runs it again */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(128 + SIGTERM);
        if (run) {
            close(gate[1]);
            char go = 0;
            ssize_t k;
            while ((k = read(gate[0], &go, 1)) < 0 && errno == EINTR) {
            }
            if (k != 1 || go != 'g') _exit(128 + SIGTERM); /* the sweep died first, or could not record the run */
            close(gate[0]);
        }
        int in = open(input ? input : "/dev/null", O_RDONLY | O_NONBLOCK);
        if (in < 0 && input) {
            dprintf(logfd, "vitbench sweep: cannot read %s: %s\n", input, strerror(errno));
            _exit(127);
        }
        if (in >= 0) fcntl(in, F_SETFL, 0);
        if (in > 0) {
            dup2(in, 0);
            close(in);
        }
        dup2(logfd, 1);
        dup2(logfd, 2);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        if (threads > 0) {
            char t[16];
            snprintf(t, sizeof t, "%d", threads);
            setenv("OMP_NUM_THREADS", t, 1);
        }
        if (run) {
            setenv(VB_SWEEP_PROCESS_ENV, self, 1);
            /* the run creates its directory below the sweep's, following no link there */
            setenv(VB_RESULTS_TREE_ENV, run->tree->base, 1);
        } else {
            unsetenv(VB_SWEEP_PROCESS_ENV); /* a job submitted now runs long after this process */
        }
        execvp(argv[0], argv);
        dprintf(2, "vitbench sweep: cannot execute %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here: whichever of parent and child runs first */
    bool recorded = false;
    if (run) {
        close(gate[0]);
        running_rec rec = {pid, vb_proc_start_time(pid), run->name};
        char why_w[3 * VB_PATH_MAX];
        recorded = sweep_tree_write(run->tree, SWEEP_ROOT, SWEEP_RUNNING_FILE, 0, write_running, &rec, why_w,
                                    sizeof why_w) == 0;
        if (!recorded)
            vb_warn("%s: a --resume after this sweep is killed could not tell whether %s still runs; it is not "
                    "started",
                    why_w, run->name);
        /* without its record the run does not start: the child exits */
        if (recorded && write(gate[1], "g", 1) != 1) recorded = false;
        close(gate[1]);
    }
    double t0 = vb_now(), term_at = -1;
    int st = 0, sent = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) vb_die_internal("waitpid failed: %s", strerror(errno));
        double now = vb_now();
        if (term_at < 0 && (g_stop_signal || (timeout_s > 0 && now - t0 > timeout_s))) {
            *why = g_stop_signal ? "interrupted" : "timeout";
            kill(-pid, SIGTERM);
            sent = SIGTERM;
            term_at = now;
        }
        if (term_at >= 0 && now - term_at > 10 && sent != SIGKILL) { /* ignored SIGTERM */
            kill(-pid, SIGKILL);
            sent = SIGKILL;
        }
        sleep_ms(50);
    }
    /* the group may outlive its leader (a rank the launcher left behind):
     * the record stays while any of it runs */
    if (recorded && !vb_pgroup_alive(pid)) sweep_tree_unlink(run->tree, SWEEP_ROOT, SWEEP_RUNNING_FILE);
    if (run && !recorded) { /* the child exited at the gate: nothing ran */
        *why = "not started";
        return 126;
    }
    /* a run the sweep stopped is recorded as killed by that signal, whatever
     * status mpirun chose to exit with after passing it on */
    if (sent) return 128 + sent;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 1;
}

void sweep_failure_class(int exit_code, const char *why, char *buf, size_t n) {
    if (why && strcmp(why, "timeout") == 0) {
        snprintf(buf, n, "timeout");
    } else if (why && strcmp(why, "not started") == 0) {
        snprintf(buf, n, "not started (.running)");
    } else if (exit_code > 128 && exit_code < 128 + 65) {
        const char *name = strsignal(exit_code - 128);
        snprintf(buf, n, "signal %d%s%s%s", exit_code - 128, name ? " (" : "", name ? name : "", name ? ")" : "");
    } else {
        snprintf(buf, n, "exit %d", exit_code);
    }
}

/* OpenMP threads of a run's ranks: the scenario's or flag's threads_per_rank,
 * else cpus_per_task (the CPUs srun, jsrun, mpiexec --depth or flux run give
 * each rank; jsrun's resource sets have 7 unless it is set), else the cores of a
 * node split over the ranks on it (at least 1), so every point of a sweep
 * gets the same share of a core per thread. Under Slurm the node's size is
 * the allocation's (SLURM_CPUS_ON_NODE), not the login node's. */
int sweep_threads_for(const vb_scenario *s, launcher_kind launcher, int ranks, int per_node) {
    if (s->threads_per_rank > 0) return s->threads_per_rank;
    int cpus = sweep_cpus_per_task(s, launcher);
    if (cpus > 0) return cpus;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *slurm = getenv("SLURM_CPUS_ON_NODE");
    if (sweep_launchers[launcher].sched == SCHED_SLURM && slurm && atoi(slurm) > 0) cores = atoi(slurm);
    int tpn = sweep_tasks_per_node(s, per_node, ranks);
    int on_node = tpn > 0 ? tpn : ranks;
    long t = cores > 0 ? cores / on_node : 1;
    return t >= 1 ? (int)t : 1;
}

void sweep_last_log_line(const char *path, char *buf, size_t n) { vb_log_last_line(path, VB_SWEEP_STOP_LINE, buf, n); }

/* SWEEP_DIR/.running's field `key`, "" when absent */
static void running_field(const char *text, const char *key, char *out, size_t n) {
    out[0] = '\0';
    size_t kl = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, key, kl) == 0 && l[kl] == ' ') {
            snprintf(out, n, "%.*s", (int)strcspn(l + kl + 1, "\n"), l + kl + 1);
            return;
        }
}

void sweep_refuse_live_run(const sweep_tree *t, const char *flag) {
    char path[VB_PATH_MAX + 64], shown[VB_PATH_MAX + 64];
    sweep_tree_fd_path(t, SWEEP_ROOT, SWEEP_RUNNING_FILE, path, sizeof path);
    sweep_tree_path(t, SWEEP_ROOT, SWEEP_RUNNING_FILE, shown, sizeof shown);
    struct stat st;
    if (fstatat(t->sub[SWEEP_ROOT].fd, SWEEP_RUNNING_FILE, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return; /* no run in flight when the sweep ended */
    if (!S_ISREG(st.st_mode) || st.st_nlink > 1) {
        /* what a link leads to says nothing of this sweep's runs */
        vb_warn("%s is not the sweep's record of its run (a link, or not a file of its own): removed", shown);
        sweep_tree_unlink(t, SWEEP_ROOT, SWEEP_RUNNING_FILE);
        return;
    }
    char *text = vb_read_file(path, NULL);
    if (!text) return;
    char pg[32], start[32], host[256], boot[64], name[300], my_host[256] = "?", my_boot[64];
    running_field(text, "pgid", pg, sizeof pg);
    running_field(text, "start", start, sizeof start);
    running_field(text, "host", host, sizeof host);
    running_field(text, "boot", boot, sizeof boot);
    running_field(text, "run", name, sizeof name);
    free(text);
    gethostname(my_host, sizeof my_host - 1);
    vb_boot_id(my_boot, sizeof my_boot);
    const pid_t pgid = (pid_t)atol(pg);
    /* a record without its leader's start time (an older sweep's) is
     * taken as the group itself, as it always was */
    const unsigned long long leader = strtoull(start, NULL, 10);
    if (strcmp(host, my_host) != 0)
        vb_die_input("%s %s: run %s of the stopped sweep was started on host %s, and this is %s: it cannot be "
                     "checked from here; make sure its process group %d there has ended, then remove %s",
                     flag, t->dir, name, host, my_host, (int)pgid, shown);
    if (pgid > 0 && strcmp(boot, my_boot) == 0 && vb_pgroup_alive_since(pgid, leader))
        vb_die_input("%s %s: run %s of the stopped sweep is still running (process group %d on %s, started by the "
                     "sweep): a point run again beside it would be measured on shared cores; wait for it or stop it "
                     "(kill -TERM -- -%d)",
                     flag, t->dir, name, (int)pgid, host, (int)pgid);
    /* ended (or the machine rebooted since, or the id names another group now) */
    sweep_tree_unlink(t, SWEEP_ROOT, SWEEP_RUNNING_FILE);
}

int sweep_open_lock(const sweep_tree *t, const char *name, char *why, size_t n) {
    /* close-on-exec: the runs the sweep starts must not hold it after it ends;
     * never through a link (its holder's line is written into it) */
    char shown[VB_PATH_MAX + 64];
    sweep_tree_path(t, SWEEP_ROOT, name, shown, sizeof shown);
    int fd = openat(t->sub[SWEEP_ROOT].fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0664);
    if (fd < 0 && errno != ELOOP) {
        vb_errf(why, n, "cannot open %s (%s)", shown, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1) return fd;
    if (fd >= 0) close(fd);
    vb_errf(why, n, "%s is %s, not the sweep's lock file: remove it", shown,
            fd < 0 ? "a symbolic link" : S_ISREG(st.st_mode) ? "a hard link to another file" : "not a regular file");
    return -2;
}

void sweep_hold_lock(const sweep_tree *t, const char *flag) {
    char why[VB_PATH_MAX + 128];
    int fd = sweep_open_lock(t, SWEEP_LOCK_FILE, why, sizeof why);
    if (fd == -2) vb_die_input("%s %s: %s", flag, t->dir, why);
    if (fd < 0) {
        vb_warn("%s: a second --resume of this sweep would not be refused", why);
        return;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            char holder[256] = "";
            ssize_t k = pread(fd, holder, sizeof holder - 1, 0);
            holder[k > 0 ? k : 0] = '\0';
            holder[strcspn(holder, "\n")] = '\0';
            vb_die_input("%s %s: the sweep is still running (%s holds %s/%s): let it finish or stop it first", flag,
                         t->dir, holder[0] ? holder : "another process", t->dir, SWEEP_LOCK_FILE);
        }
        vb_warn("cannot lock %s/%s (%s): a second --resume of this sweep would not be refused", t->dir,
                SWEEP_LOCK_FILE, strerror(errno));
        return;
    }
    char host[128] = "", tm[32];
    gethostname(host, sizeof host - 1);
    vb_iso_time(tm, sizeof tm);
    if (ftruncate(fd, 0) == 0) dprintf(fd, "pid %d on %s since %s\n", (int)getpid(), host, tm);
    /* fd stays open: the lock is held until this process exits */
}
