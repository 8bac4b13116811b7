/* sweep_internal.h: what the files of `vitbench sweep` share; not for other
 * callers (bench/sweep/sweep.h is the public interface, for main.c and the tests).
 *
 *   sweep_util.c      key/value lists and argv vectors; strict integer parsing
 *   sweep_scenario.c  scenario files: the schema, loading, per-key checks
 *   sweep_plan.c      scenario -> runs: expansion, the order of (point, repeat)
 *                     launches, every point checked before anything starts
 *   sweep_launch.c    starting one run: mpirun / srun argv, sbatch job
 *                     scripts, fork/exec with its log, timeouts, stop signals
 *   sweep_launchers.c the launcher table (mpirun, srun, sbatch, bsub, jsrun,
 *                     qsub, mpiexec, flux-batch, flux-run) and what they share
 *   sweep_cluster.c   the scheduler keys (the scenario's cluster: block),
 *                     each defined once, and which scheduler takes which
 *   sweep_slurm.c     Slurm: its checks, srun's binding flags, #SBATCH
 *                     headers, sbatch's job ids and squeue; the job scripts'
 *                     body every scheduler shares (one per run, or one sweep job)
 *   sweep_lsf.c       LSF: #BSUB headers, jsrun resource sets, bjobs / bkill
 *   sweep_pbs.c       PBS Pro: #PBS headers, mpiexec (PALS), qstat / qdel
 *   sweep_flux.c      Flux: "# flux:" headers, flux run, flux jobs / cancel
 *   sweep_jobs.c      job ids: recorded per run, the scheduler asked whether
 *                     a job is over, jobs cancelled; directive words checked
 *   sweep_tree.c      the sweep directory held open: every write below it
 *                     through its directories' descriptors, never a link
 *   sweep_index.c     the sweep directory: creating it, index.csv, sweep.json,
 *                     the results table, what a resume keeps
 *   sweep_collect.c   --collect: the status files jobs left into index.csv
 *   sweep_cmd.c       the command: its flags, the loop over runs, the report
 * Helpers that need memory exit 1 (vb_die_internal) when there is none.
 */
#ifndef VB_SWEEP_INTERNAL_H
#define VB_SWEEP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "bench/sweep/sweep.h"
#include "core/util/common.h"
#include "core/util/fileio.h"
#include "core/util/outdir.h"
#include "core/results/results.h"

/* index.csv's headline cells: a mean and a std per kind */
#define SWEEP_HEADLINES (2 * VB_INDEX_HEADLINE_NKINDS)

/* ---- sweep_tree.c: the sweep directory, held open ---- */

/* The directories of a sweep directory the sweep writes into. */
typedef enum { SWEEP_ROOT, SWEEP_RUNS, SWEEP_LOGS, SWEEP_JOBS, SWEEP_STATUS, SWEEP_NSUB } sweep_sub;

typedef struct sweep_tree {
    char dir[VB_PATH_MAX];     /* the sweep directory as named: messages, printed commands */
    char abs[VB_PATH_MAX];     /* resolved once: what job scripts and batch runs name */
    const char *base;          /* what the runs' paths start with (dir, or abs for batch runs) */
    vb_outdir sub[SWEEP_NSUB]; /* held open for the process's life; fd -1 where not there */
} sweep_tree;

/* Opens dir (the root: the user's, links followed) and below it runs/ and
 * logs/, with jobs/ and status/ when batch: created, or found to be real
 * directories (a link or a file there: exit 2 naming it). */
void sweep_tree_open(sweep_tree *t, const char *dir, bool batch);
/* The same for --collect / --cancel: none created, those missing left closed. */
void sweep_tree_open_existing(sweep_tree *t, const char *dir);
void sweep_tree_close(sweep_tree *t);
bool sweep_tree_has(const sweep_tree *t, sweep_sub s);
/* Exits 2 naming the directory when one held open is no longer what its
 * name leads to (swapped for a link, moved): before every launch. */
void sweep_tree_check(const sweep_tree *t);
/* "DIR/sub/name", for messages; returns buf. */
const char *sweep_tree_path(const sweep_tree *t, sweep_sub s, const char *name, char *buf, size_t n);
/* name in sub written as a temporary renamed over it (mode: 0 for the
 * default, else set before the rename). 0, or outdir.h's code with why. */
int sweep_tree_write(const sweep_tree *t, sweep_sub s, const char *name, unsigned mode,
                     void (*write_fn)(FILE *f, void *ctx), void *ctx, char *why, size_t n);
/* ... exiting 2 (a link in the way) or 1 (the OS refused) with one line. */
void sweep_tree_write_or_die(const sweep_tree *t, sweep_sub s, const char *name, unsigned mode,
                             void (*write_fn)(FILE *f, void *ctx), void *ctx);
/* text as the whole file; a warning and -1 when it cannot be written. */
int sweep_tree_write_text(const sweep_tree *t, sweep_sub s, const char *name, const char *text);
/* name opened to append (fileio.h vb_open_append_at's refusals): the
 * descriptor, or outdir.h's code with why filled. */
int sweep_tree_append_fd(const sweep_tree *t, sweep_sub s, const char *name, char *why, size_t n);
/* ... exiting 2 naming a link, 1 for the OS's refusal. */
int sweep_tree_open_log(const sweep_tree *t, sweep_sub s, const char *name);
/* One line appended (a warning when it cannot be). */
void sweep_tree_appendf(const sweep_tree *t, sweep_sub s, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Is there an entry name (of any kind, a link not followed)? */
bool sweep_tree_exists(const sweep_tree *t, sweep_sub s, const char *name);
int sweep_tree_unlink(const sweep_tree *t, sweep_sub s, const char *name);
/* from -> to within sub; -1 with EEXIST when to is taken. */
int sweep_tree_rename(const sweep_tree *t, sweep_sub s, const char *from, const char *to);
/* runs/<name> as a real directory, opened (never created): 0, or outdir.h's code. */
int sweep_tree_run_dir(const sweep_tree *t, const char *name, vb_outdir *out, char *why, size_t n);
/* A path of name in the held directory itself (outdir.h vb_outdir_fd_path). */
void sweep_tree_fd_path(const sweep_tree *t, sweep_sub s, const char *name, char *buf, size_t n);

/* ---- sweep_util.c ---- */

bool sweep_kvs_has(const vb_sweep_kvs *l, const char *key);
/* Sets every key of src in dst, in src's order (vb_sweep_kvs_set's rules). */
void sweep_kvs_copy(vb_sweep_kvs *dst, const vb_sweep_kvs *src);

/* A growable argv, NULL-terminated for execvp; each string is its own copy. */
typedef struct {
    char **v;
    int n, cap;
} sweep_strvec;

void sweep_sv_push(sweep_strvec *a, const char *s);
void sweep_sv_pushf(sweep_strvec *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sweep_sv_free(sweep_strvec *a);

/* Exits 2 naming origin when value holds a CR or LF (see sweep_util.c). */
void sweep_refuse_line_break(const char *origin, const char *value);

/* Strict decimal int: no leading space, no trailing text, in int's range. */
bool sweep_parse_int(const char *s, int *out);

/* ---- sweep_scenario.c ---- */

/* output_dir, run_name, run_num: set by the sweep for every run. */
bool sweep_is_reserved_key(const char *key);
/* tensor_parallel, context_parallel, parallel_order: set by a layouts scenario. */
bool sweep_is_layout_key(const char *key);
/* Checks key = value with the config parser's rules; exits 2 naming origin. */
void sweep_check_setting(const char *key, const char *value, const char *origin);
const vb_sweep_axis *sweep_axis_find(const vb_sweep_axis *a, int n, const char *key);

/* ---- the command's state, shared by plan, launch, index and cmd ---- */

/* The launchers, an index into sweep_launchers (sweep_launchers.c). */
typedef enum {
    LAUNCH_MPIRUN,
    LAUNCH_SRUN,
    LAUNCH_SBATCH,
    LAUNCH_BSUB,
    LAUNCH_JSRUN,
    LAUNCH_QSUB,
    LAUNCH_MPIEXEC,
    LAUNCH_FLUX_BATCH,
    LAUNCH_FLUX_RUN,
    LAUNCH_COUNT
} launcher_kind;

/* The schedulers whose keys a scenario may set (sweep_cluster.c). */
typedef enum { SCHED_NONE, SCHED_SLURM, SCHED_LSF, SCHED_PBS, SCHED_FLUX, SCHED_COUNT } sched_kind;

/* The parsed command line (sweep_cmd.c). Slurm flags are kept as given and
 * applied over the scenario's keys once it is loaded. */
typedef struct {
    const char *file;
    char out_dir[VB_PATH_MAX];
    launcher_kind launcher;
    bool dry_run;
    int ranks_per_node; /* -1 = the scenario's */
    int timeout_s;      /* -1 = the scenario's */
    int repeats;        /* -1 = the scenario's */
    int shuffled;       /* -1 = the scenario's, else 0 / 1 */
    long long order_seed; /* -1 = the scenario's */
    int threads_per_rank; /* -1 = the scenario's */
    bool no_report;
    int warmup_run;       /* -1 = when points repeat, else 0 / 1 */
    int max_failures;     /* stop after this many consecutive runs failing alike (0 = never) */
    const char *resume;   /* --resume SWEEP_DIR */
    const char *ab;       /* --ab KEY=A,B: the interleaved A/B scenario instead of a FILE */
    const char *collect;  /* --collect SWEEP_DIR */
    bool retry_failed;
    vb_sweep_kvs slurm;   /* scalar scheduler flags (--time ...), in order */
    sweep_strvec list_keys, list_values; /* list flags (--preamble ...): any replaces the file's list */
    const char *cancel;   /* --cancel SWEEP_DIR */
    sweep_strvec launcher_args;
    vb_sweep_overrides ov;
} sweep_cli;

/* One launch: a point of the plan in one repeat. */
typedef struct {
    const vb_sweep_run *run;
    int repeat;
    int threads;
    char name[160];       /* run_name: the point's name, + _rep=R when repeats > 1 */
    const char *status;   /* NULL until it ran */
    int exit_code;        /* INT_MIN = none */
    double headline[SWEEP_HEADLINES]; /* VB_INDEX_HEADLINE_COLUMNS: each kind's mean and std samples/s; NAN = none */
    char failure[48];     /* a failed run's class (sweep_failure_class); "" otherwise */
} sweep_item;

/* ---- sweep_plan.c ---- */

/* Every (point, repeat) in launch order; *count of them (caller frees). */
sweep_item *sweep_plan_items(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind launcher, int per_node,
                             int *count);
/* Loads each (yaml_config, config) the runs name once; exits 2 on a bad one. */
void sweep_check_named_configs(const vb_sweep_plan *plan);
/* Every point's config, layout and data paths as `vitbench run` checks them. */
void sweep_preflight(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind launcher, bool dry_run);

/* ---- sweep_launch.c ---- */

bool sweep_in_path(const char *prog);
/* one word / argv shell-quoted (printed, or in job scripts; never run by a shell here) */
void sweep_fput_quoted(FILE *f, const char *s);
void sweep_fput_argv(FILE *f, char *const *argv);
/* <exe> <command> --key value ... --output_dir runs_dir --run_name run_name */
void sweep_push_vitbench_args(sweep_strvec *a, const char *exe, const vb_scenario *s, const vb_sweep_run *r,
                              const char *run_name, const char *runs_dir);
/* The launcher's part of a run's argv: mpirun -np R ... or srun --ntasks=R
 * ... with the scenario's Slurm binding (sweep_slurm_srun_flags). */
void sweep_build_launch(sweep_strvec *a, launcher_kind k, const vb_scenario *s, int ranks, int per_node,
                        const sweep_strvec *extra);
/* OMP_NUM_THREADS of a run's ranks: threads_per_rank, else cpus_per_task,
 * else a node's cores / the run's ranks on it. */
int sweep_threads_for(const vb_scenario *s, launcher_kind launcher, int ranks, int per_node);
/* From now on SIGINT / SIGTERM / SIGHUP stop the current run and the sweep. */
void sweep_catch_stop_signals(void);
/* The stop signal received, 0 = none. */
int sweep_stop_signal(void);
/* A run the sweep launches (not a probe or a job submission): named in
 * SWEEP_DIR/.running while its process group lives, and given this sweep
 * process to watch (proc_watch.h: the run stops when the sweep is gone). */
typedef struct {
    const sweep_tree *tree;
    const char *name;
} sweep_run_ref;
#define SWEEP_RUNNING_FILE ".running"
#define SWEEP_LOCK_FILE ".sweep.lock"
#define SWEEP_INDEX_LOCK_FILE ".collect.lock"
/* Runs argv to completion (or timeout / stop); its exit status, 128+signal
 * when killed; *why is "timeout", "interrupted", "not started" (its record
 * could not be written: 126, nothing ran) or "". Its output goes to
 * logfd (the caller's, open to append; still the caller's to close). run:
 * NULL for what is not a run (a probe, a job submission); a run starts only
 * once .running names it. */
int sweep_launch(char *const *argv, int logfd, int timeout_s, int threads, const sweep_run_ref *run, const char **why);
/* sweep_launch with stdin from input (NULL: /dev/null): bsub < script. */
int sweep_launch_input(char *const *argv, const char *input, int logfd, int timeout_s, int threads,
                       const sweep_run_ref *run, const char **why);
/* A --resume (flag) of SWEEP_DIR whose recorded run still has a live
 * process group (the sweep was killed, the run was not), the group's leader
 * being the process the sweep started (its start time), exits 2 naming the
 * run and the group; a finished one's record is removed. */
void sweep_refuse_live_run(const sweep_tree *t, const char *flag);
/* The last line of a run's log that says something (not blank, not the
 * launcher line the sweep wrote first), at most n-1 bytes; "" without one. */
void sweep_last_log_line(const char *path, char *buf, size_t n);
/* Holds SWEEP_DIR/.sweep.lock for the life of the process, naming this
 * process in it; a sweep already holding it (a --resume of a live sweep)
 * exits 2 naming the holder. */
void sweep_hold_lock(const sweep_tree *t, const char *flag);
/* name in the sweep directory opened as a lock file: never through a link,
 * refused when it is a hard link. The descriptor; -1 the OS refused, -2 a
 * link or not a file there (why says which). */
int sweep_open_lock(const sweep_tree *t, const char *name, char *why, size_t n);

/* ---- sweep_slurm.c ---- */

/* Tasks per node and nodes of a run of R ranks: from nodes (R / nodes each)
 * or ranks_per_node (min(R, per_node), ceil(R / per_node)); 0 = not given. */
int sweep_tasks_per_node(const vb_scenario *s, int per_node, int ranks);
int sweep_nodes_of(const vb_scenario *s, int per_node, int ranks);
/* srun's options after --ntasks/--nodes/--ntasks-per-node: --cpus-per-task,
 * --cpu-bind=cores (unless extra has a --cpu-bind), GPU binding, --mpi. */
void sweep_slurm_srun_flags(sweep_strvec *a, const vb_scenario *s, const sweep_strvec *extra);
/* The scheduler keys against the plan: keys the launcher's scheduler does
 * not take (sweep_cluster_check), nodes vs ranks_per_node, ranks that do not
 * fill nodes, GPUs without ranks per node or a GPU backend, sweep_job
 * without a batch launcher, then the scheduler's own rules. Exits 2 with
 * one line naming the key / flag and the file. */
void sweep_slurm_check(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind launcher, int per_node);
/* Exits 2 naming origin when path holds a backslash, which Slurm drops from
 * a job's log path (#SBATCH --output). */
void sweep_slurm_check_log_dir(const char *origin, const char *path);
/* One sbatch_extra line, read as sbatch reads it: exit 2 naming origin on
 * what sbatch would refuse or cut short, or an option the sweep sets. The
 * other schedulers' lines: sweep_lsf.c, sweep_pbs.c, sweep_flux.c. */
void sweep_slurm_check_extra(const char *line, const char *origin);
void sweep_lsf_check_extra(const char *line, const char *origin);
void sweep_pbs_check_extra(const char *line, const char *origin);
void sweep_flux_check_extra(const char *line, const char *origin);
/* Folds sbatch.{time,account,qos,constraint,partition,reservation} into the
 * keys (exit 2 when both are set), refuses sbatch keys the sweep sets. */
void sweep_slurm_fold_sbatch(vb_scenario *s);

/* What every job script of a sweep shares. */
typedef struct {
    const char *sweep_id;
    const char *dir_abs;  /* the sweep directory, absolute */
    const char *exe;      /* this vitbench binary */
    const vb_scenario *s;
    int per_node;         /* ranks_per_node; 0 = not given */
    int timeout_s;
    const sweep_strvec *launcher_args;
    launcher_kind launcher; /* the batch launcher (its scheduler writes the header) */
} sweep_job_ctx;

/* jobs/<run>.<ext>: an allocation for the one run; its output is the run's
 * log under Slurm, logs/<run>.job.log elsewhere (their output lands at the
 * job's end, so the run writes its own log as it goes). */
void sweep_write_run_script(const sweep_tree *t, const char *name, const sweep_job_ctx *j, const sweep_item *it,
                            int index, int nitems);
/* One script running every item without a status, in order, in one
 * allocation at the largest node count; its own output goes to log_abs. */
void sweep_write_sweep_job(const sweep_tree *t, const char *name, const sweep_job_ctx *j, const sweep_item *items,
                           int n, const char *log_abs);

/* A failed run's class, what --max_failures and the report count
 * failures by: "timeout" when the sweep's limit stopped it, "signal N (NAME)"
 * for 128 + N, else "exit N". Never from log text, which differs run to run
 * (elapsed times, addresses). */
void sweep_failure_class(int exit_code, const char *why, char *buf, size_t n);
/* ---- sweep_launchers.c: the launcher table ---- */

/* The nodes of a job and its tasks: ntasks in all, tpn on each of nodes
 * (nodes 0 = not given: the scheduler places them). */
typedef struct {
    int ntasks, nodes, tpn;
} sweep_shape;

/* One collect's answers from the schedulers: a listing asked once and
 * read for every job (squeue), freed by sweep_jobq_free. */
typedef struct {
    char *listing[SCHED_COUNT];
    bool asked[SCHED_COUNT];
} sweep_jobq;

/* A scheduler: what its job scripts say, how a value gets into one, how a
 * job is submitted, found again and cancelled. One per file: sweep_slurm.c,
 * sweep_lsf.c, sweep_pbs.c, sweep_flux.c. */
typedef struct sweep_scheduler {
    const char *name;        /* Slurm, LSF, PBS, Flux: in messages */
    const char *id;          /* slurm, lsf, pbs, flux: the first word of status/<run>.job */
    const char *script_ext;  /* jobs/<run>.<ext> */
    bool job_log_is_run_log; /* a per-run job's own output is the run's log (written as it goes) */
    const char *time_form;   /* the time key's grammar, for messages */
    bool (*time_ok)(const char *text);
    /* the scheduler's own rules for the keys against the plan; exit 2 naming the key */
    void (*check)(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind k, int per_node);
    /* a directory the jobs' logs go to, read as the directive parser reads a path; exit 2 naming origin */
    void (*check_log_dir)(const char *origin, const char *path);
    /* #!/bin/bash and the directives of one job */
    void (*header)(FILE *f, const sweep_job_ctx *j, const char *job_name, const sweep_shape *sh, const char *log_abs);
    const char *job_id_sh;   /* shell: the job's id, inside it */
    const char *hosts_sh;    /* shell: the job's hosts, one a line */
    const char *const *submit; /* argv before the script: {"sbatch"}, {"flux", "batch"} */
    bool submit_stdin;       /* the script goes to the submit command's stdin (bsub < script) */
    /* the job id in one line of the submit command's output; false when none */
    bool (*job_id)(const char *line, char *id, size_t n);
    /* is text one of its job ids, by its grammar (never 0, never an option)? */
    bool (*id_ok)(const char *text);
    /* is job id over? 1 yes (its final state in state, "" when unknown), 0 no, -1 no answer */
    int (*job_state)(sweep_jobq *q, const sweep_tree *t, const char *id, char *state, size_t n);
    const char *const *cancel; /* argv before the job id: {"scancel"} */
    const char *alloc_env;   /* set inside one of its allocations */
    /* nodes of the allocation this process runs in, from its host list; -1 = unknown */
    int (*alloc_nodes)(void);
} sweep_scheduler;

typedef struct sweep_launcher {
    const char *name;        /* --launcher NAME */
    sched_kind sched;        /* whose keys it takes; SCHED_NONE: none (mpirun) */
    bool batch;              /* writes job scripts and submits them */
    bool inside;             /* starts ranks only inside an allocation of its scheduler (jsrun, mpiexec) */
    launcher_kind step;      /* what starts a run's ranks: itself, or inside its job scripts */
    const char *const *needs; /* programs on PATH it needs to launch (not for --dry-run) */
    /* the launcher's part of a run's argv (not batch launchers: their step's) */
    void (*build)(sweep_strvec *a, const vb_scenario *s, int ranks, int per_node, const sweep_strvec *extra);
    int cpus_per_task;       /* a rank's cores when cpus_per_task is not given; 0 = the launcher's own */
    const char *what;        /* one line, for --help */
} sweep_launcher;

extern const sweep_launcher sweep_launchers[LAUNCH_COUNT];
extern const sweep_scheduler *const sweep_schedulers[SCHED_COUNT]; /* [SCHED_NONE] = NULL */
extern const sweep_scheduler sweep_sched_slurm, sweep_sched_lsf, sweep_sched_pbs, sweep_sched_flux;

/* The launcher's scheduler; NULL for mpirun. */
const sweep_scheduler *sweep_sched_of(launcher_kind k);
/* A run's cores per rank: cpus_per_task, else the launcher's default (0 = none). */
int sweep_cpus_per_task(const vb_scenario *s, launcher_kind k);
/* The shape of a job of R ranks (nodes 0 when neither nodes nor ranks_per_node is given). */
sweep_shape sweep_shape_of(const vb_scenario *s, int per_node, int ranks);
/* The three launchers that start ranks inside an allocation (besides srun). */
void sweep_build_mpirun(sweep_strvec *a, const vb_scenario *s, int ranks, int per_node, const sweep_strvec *extra);
void sweep_build_srun(sweep_strvec *a, const vb_scenario *s, int ranks, int per_node, const sweep_strvec *extra);
void sweep_build_jsrun(sweep_strvec *a, const vb_scenario *s, int ranks, int per_node, const sweep_strvec *extra);
void sweep_build_mpiexec(sweep_strvec *a, const vb_scenario *s, int ranks, int per_node, const sweep_strvec *extra);
void sweep_build_flux_run(sweep_strvec *a, const vb_scenario *s, int ranks, int per_node, const sweep_strvec *extra);
/* Runs inside an allocation: the allocation's nodes (its host list) hold
 * every run; exit 2 naming the run otherwise. Nothing when unknown. */
void sweep_check_allocation(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind k, int per_node,
                            bool dry_run);

/* ---- sweep_cluster.c: the scheduler keys ---- */

typedef enum { KEY_INT, KEY_TIME, KEY_WORD, KEY_CHOICE, KEY_BOOL, KEY_LINES } sweep_key_type;

typedef struct sweep_cluster_key {
    const char *name;
    unsigned scheds;         /* a bit (1u << sched_kind) for each scheduler that takes it */
    sweep_key_type type;
    size_t off;              /* its field in vb_sweep_slurm */
    size_t size;             /* KEY_WORD / KEY_CHOICE / KEY_TIME: the field's size; KEY_INT: the least value */
    size_t count_off;        /* KEY_LINES: the count's field */
    const char *choices;     /* KEY_CHOICE: "a|b|c" */
    /* a check of its own (sbatch_extra, srun_mpi, alloc_flags, ...); exits 2 naming origin */
    void (*check)(const char *value, const char *origin);
    const char *arg;         /* the flag's value in --help */
    const char *help;        /* one line: what it becomes in each scheduler */
} sweep_cluster_key;

extern const sweep_cluster_key sweep_cluster_keys[];
extern const int sweep_ncluster_keys;
const sweep_cluster_key *sweep_cluster_key_find(const char *name);
/* The keys the launcher's scheduler does not take, its time grammar and its
 * own rules; exit 2 with one line naming the key and where it was set. */
void sweep_cluster_check(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind k, int per_node);
/* Where a key was set ("file: key (line N)" or "flag --key"); "" when not. */
const char *sweep_key_origin(const vb_scenario *s, const char *key);
/* Empties a list key (a list given as flags replaces the file's). */
void sweep_cluster_clear_list(vb_sweep_slurm *sl, const char *key);

/* ---- sweep_jobs.c: job ids, queries, directive words ---- */

/* The job id the submit command printed into logs/<submit_log>, as
 * status/<name>.job ("<scheduler> <id>"; Slurm's: "<id>", as it always
 * was); nothing when it printed none that is one of sc's ids. */
void sweep_record_job(const sweep_tree *t, const char *name, const char *submit_log, const sweep_scheduler *sc);
/* The word before a job id in status/<run>.job: the scheduler's id, "" for Slurm. */
const char *sweep_job_file_tag(const sweep_scheduler *sc);
/* status/<name>.job's id, when it is one of sc's (the sweep's own
 * scheduler, from its launcher: never the file's tag) by sc's grammar; a
 * file naming another scheduler, or an id that is not one, is reported on
 * stderr and read as none. */
bool sweep_read_job(const sweep_tree *t, const sweep_scheduler *sc, const char *name, char *id, size_t n);
/* Is the job over? sweep_scheduler.job_state's answer, asked once per
 * (scheduler, listing) in a collect. */
int sweep_job_over(sweep_jobq *q, const sweep_scheduler *sc, const sweep_tree *t, const char *id, char *state,
                   size_t n);
void sweep_jobq_free(sweep_jobq *q);
/* A scheduler's answer: argv (argv[0] on PATH, else NULL) run with its
 * stdout + stderr into a file in status/ (at most 20 s), its text returned
 * (caller frees; NULL when none) and its exit status in *rc (-1: not run or
 * cut off after 20 s). */
char *sweep_ask(const sweep_tree *t, char *const *argv, int *rc);
/* --cancel: every job of the rows still submitted (and of dry-run rows
 * whose script a job runs, having recorded its id), cancelled once each
 * with sc's own command; returns how many cancels failed. */
int sweep_cancel_jobs(const sweep_tree *t, const sweep_scheduler *sc, const sweep_item *items, int n);
/* The length of the job number at s: digits that do not start with 0 (no
 * job is 0; LSF reads bkill 0 as every job of the user), at most 20; 0 when
 * s does not start with one. What each scheduler's id grammar starts with. */
size_t sweep_job_number(const char *s);
/* The words of a directive line (bsub_extra, qsub_extra, flux_extra) as a
 * POSIX shell splits them: blanks, '...', "..." with \" and \\; refused
 * (exit 2 naming origin and key): an unmatched quote, a backslash outside
 * quotes, an unquoted #. Each word goes to owned with the word before it
 * ("" for the first), which exits 2 when it sets what the sweep or a key sets. */
void sweep_check_directive_line(const char *line, const char *key, const char *origin,
                                void (*owned)(const char *word, const char *prev, const char *line, const char *key,
                                              const char *origin));
/* value as one word of a directive line: itself when plain, else in double
 * quotes (the caller refused what the scheduler cannot read back). */
void sweep_put_directive_word(FILE *f, const char *value);
/* Exits 2 naming origin when path holds one of bad (the scheduler's
 * directive parser cannot carry it); why says what. */
void sweep_refuse_chars(const char *origin, const char *path, const char *bad, const char *why);

/* ---- sweep_index.c ---- */

/* index.csv of the items with a status, written atomically; 0 on success. */
int sweep_write_index(const sweep_tree *t, const vb_sweep_plan *plan, const sweep_item *items, int n);
/* A completed run's headline numbers from its summary.csv (NAN where none).
 * False, the numbers NAN, when runs/<run> is not a real directory (a link
 * to another run's is not this point's result). */
bool sweep_read_headline(const sweep_tree *t, sweep_item *it);
void sweep_print_table(const vb_sweep_plan *plan, const sweep_item *items, int n);
/* Claims out_dir/<name>_<stamp>[-N]; its path in dir, its name in id. */
void sweep_create_dir(const char *out_dir, const char *name, char *dir, size_t n, char *id, size_t idn);
/* from (the user's scenario) into the sweep directory as name. */
void sweep_copy_file(const char *from, const sweep_tree *t, const char *name);
void sweep_write_sweep_json(const sweep_tree *t, const char *id, const vb_scenario *s, const sweep_cli *c,
                            const vb_sweep_plan *plan, const char *exe, int argc, char **argv, int nruns);
/* --resume: keeps the finished rows of dir's index.csv; returns how many. */
int sweep_keep_finished(const sweep_tree *t, sweep_item *items, int n, bool retry_failed);
/* A run that did not complete: its run.json (in runs/<run>, a real
 * directory) marked failed with why (a run killed outright could not say so
 * itself); why NULL: the exit status it ended with. */
void sweep_mark_run_failed(const sweep_tree *t, const sweep_item *it, const char *why);

/* ---- sweep_collect.c ---- */

/* --collect: under the index lock (SWEEP_INDEX_LOCK_FILE), every row of
 * the sweep's index.csv, then status/<run>.exit over the rows still
 * submitted / dry-run, whose jobs sc (the sweep's scheduler; NULL for a
 * local sweep) is asked about; index.csv rewritten. Returns how many runs
 * failed; *completed and *waiting count the others. Exits 1 when the lock
 * cannot be had within a minute: index.csv is never written without it. */
int sweep_collect(const sweep_tree *t, const sweep_scheduler *sc, const vb_sweep_plan *plan, sweep_item *items, int n,
                  int *completed, int *waiting);
/* Removes status/<run>.exit and .job of runs about to be (re)submitted. */
void sweep_clear_status(const sweep_tree *t, const sweep_item *it);
/* sweep.json's "warmup": the discarded run before the first point. */
void sweep_record_warmup(const sweep_tree *t, const char *point, int exit_code, double seconds);

#endif
