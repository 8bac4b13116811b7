/* sweep_internal.h: what the files of `vitbench sweep` share; not for other
 * callers (bench/sweep/sweep.h is the public interface, for main.c and the tests).
 *
 *   sweep_util.c      key/value lists and argv vectors; strict integer parsing
 *   sweep_scenario.c  scenario files: the schema, loading, per-key checks
 *   sweep_plan.c      scenario -> runs: expansion, the order of (point, repeat)
 *                     launches, every point checked before anything starts
 *   sweep_launch.c    starting one run: mpirun / srun argv, sbatch job
 *                     scripts, fork/exec with its log, timeouts, stop signals
 *   sweep_slurm.c     Slurm: the keys and their checks, srun's binding flags,
 *                     job scripts (one per run, or one sweep job)
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

/* ---- sweep_util.c ---- */

char *sweep_strdup(const char *s); /* NULL copies as "" */
void *sweep_realloc(void *p, size_t bytes);
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

typedef enum { LAUNCH_MPIRUN, LAUNCH_SRUN, LAUNCH_SBATCH } launcher_kind;
extern const char *const sweep_launcher_names[3]; /* by launcher_kind */

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
    vb_sweep_kvs slurm;   /* scalar Slurm flags (--time ...), in order */
    sweep_strvec sbatch_extra, preamble; /* list flags; any replaces the file's list */
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
    double headline[6];   /* FULL, SYNTHETIC, IO mean and std samples/s; NAN = none */
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
    const char *sweep_dir;
    const char *name;
} sweep_run_ref;
#define SWEEP_RUNNING_FILE ".running"
/* Runs argv to completion (or timeout / stop); its exit status, 128+signal
 * when killed; *why is "timeout", "interrupted" or "". run: NULL for what is
 * not a run. */
int sweep_launch(char *const *argv, const char *log_path, int timeout_s, int threads, const sweep_run_ref *run,
                 const char **why);
/* A --resume (flag) of SWEEP_DIR whose recorded run still has a live
 * process group (the sweep was killed, the run was not) exits 2 naming the
 * run and the group; a finished one's record is removed. */
void sweep_refuse_live_run(const char *dir, const char *flag);
void sweep_append_line(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last line of a run's log that says something (not blank, not the
 * launcher line the sweep wrote first), at most n-1 bytes; "" without one. */
void sweep_last_log_line(const char *path, char *buf, size_t n);
/* Holds SWEEP_DIR/.sweep.lock for the life of the process, naming this
 * process in it; a sweep already holding it (a --resume of a live sweep)
 * exits 2 naming the holder. */
void sweep_hold_lock(const char *dir, const char *flag);

/* ---- sweep_slurm.c ---- */

/* Tasks per node and nodes of a run of R ranks: from nodes (R / nodes each)
 * or ranks_per_node (min(R, per_node), ceil(R / per_node)); 0 = not given. */
int sweep_tasks_per_node(const vb_scenario *s, int per_node, int ranks);
int sweep_nodes_of(const vb_scenario *s, int per_node, int ranks);
/* srun's options after --ntasks/--nodes/--ntasks-per-node: --cpus-per-task,
 * --cpu-bind=cores (unless extra has a --cpu-bind), GPU binding, --mpi. */
void sweep_slurm_srun_flags(sweep_strvec *a, const vb_scenario *s, const sweep_strvec *extra);
/* The Slurm keys against the plan: nodes vs ranks_per_node, ranks that do not
 * fill nodes, GPUs without ranks per node or a GPU backend, sweep_job without
 * sbatch. Exits 2 with one line naming the key / flag and the file. */
void sweep_slurm_check(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind launcher, int per_node);
/* Exits 2 naming origin when path holds a backslash, which Slurm drops from
 * a job's log path (#SBATCH --output). */
void sweep_slurm_check_log_dir(const char *origin, const char *path);
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
} sweep_job_ctx;

/* jobs/<run>.sbatch: an allocation for the one run, its output the run's log. */
void sweep_write_run_script(const char *path, const sweep_job_ctx *j, const sweep_item *it, int index, int nitems);
/* One script running every item without a status, in order, in one
 * allocation at the largest node count; its own output goes to log_abs. */
void sweep_write_sweep_job(const char *path, const sweep_job_ctx *j, const sweep_item *items, int n,
                           const char *log_abs);

/* A failed run's class, what --max_failures and the report count
 * failures by: "timeout" when the sweep's limit stopped it, "signal N (NAME)"
 * for 128 + N, else "exit N". Never from log text, which differs run to run
 * (elapsed times, addresses). */
void sweep_failure_class(int exit_code, const char *why, char *buf, size_t n);

/* ---- sweep_index.c ---- */

/* index.csv of the items with a status, written atomically; 0 on success. */
int sweep_write_index(const char *path, const vb_sweep_plan *plan, const sweep_item *items, int n);
/* A completed run's headline numbers from its summary.csv (NAN where none). */
void sweep_read_headline(const char *runs_dir, sweep_item *it);
void sweep_print_table(const vb_sweep_plan *plan, const sweep_item *items, int n);
/* Claims out_dir/<name>_<stamp>[-N]; its path in dir, its name in id. */
void sweep_create_dir(const char *out_dir, const char *name, char *dir, size_t n, char *id, size_t idn);
void sweep_make_subdir(const char *dir, const char *sub);
void sweep_copy_file(const char *from, const char *to);
void sweep_write_sweep_json(const char *dir, const char *id, const vb_scenario *s, const sweep_cli *c,
                            const vb_sweep_plan *plan, const char *exe, int argc, char **argv, int nruns);
/* --resume: keeps the finished rows of dir's index.csv; returns how many. */
int sweep_keep_finished(const char *dir, const char *runs_dir, sweep_item *items, int n, bool retry_failed);
/* A run that did not complete: its run.json marked failed with the reason
 * (a run killed outright could not say so itself). */
void sweep_mark_run_failed(const char *runs_dir, const sweep_item *it);

/* ---- sweep_collect.c ---- */

/* --collect: under a lock on the directory, every row of dir's index.csv,
 * then status/<run>.exit over the rows still submitted / dry-run; index.csv
 * rewritten. Returns how many runs failed; *completed and *waiting count the
 * others. */
int sweep_collect(const char *dir, const char *runs_dir, const vb_sweep_plan *plan, sweep_item *items, int n,
                  int *completed, int *waiting);
/* Removes status/<run>.exit and .job of runs about to be (re)submitted. */
void sweep_clear_status(const char *dir, const sweep_item *it);
/* The job id sbatch printed into submit_log, as status/<name>.job (nothing
 * when it printed none). */
void sweep_record_job(const char *dir, const char *name, const char *submit_log);
/* sweep.json's "warmup": the discarded run before the first point. */
void sweep_record_warmup(const char *dir, const char *point, int exit_code, double seconds);

#endif
