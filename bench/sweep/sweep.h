/* sweep.h: `vitbench sweep FILE`: expand a scenario file into runs, launch
 * each with its number of ranks, collect them under one sweep directory.
 * (Implemented in bench/sweep/sweep_*.c; sweep_internal.h says which file holds what.)
 *
 * Command line
 *   vitbench sweep FILE [--output_dir DIR]
 *                       [--launcher mpirun|srun|sbatch|bsub|jsrun|qsub|mpiexec|flux-batch|flux-run]
 *                       [--dry-run] [--ranks 1,2,4] [--world_size N]
 *                       [--ranks_per_node N] [--launcher_args "ARGS"]
 *                       [--timeout_s S] [--repeats N] [--order sequential|shuffled]
 *                       [--order_seed S] [--threads_per_rank T] [--no_report]
 *                       [scheduler keys (sweep_cluster.c), each a flag: --nodes N --gpus_per_node G
 *                        --cpus_per_task C --time T --account A --queue Q --qos Q --constraint C
 *                        --partition P --reservation R --gpu_bind per_task|closest|none
 *                        --srun_mpi pmix --sbatch_extra "--opt=v" ... --alloc_flags "F"
 *                        --resource_set per_task|per_node --smpiargs "A" --bsub_extra "-o v" ...
 *                        --qsub_extra "-l r=v" ... --flux_extra "--o=v" ... --preamble "LINE" ...
 *                        --sweep_job]
 *                       [--<config key> VALUE ...]
 *   vitbench sweep --ab KEY=A,B [options as above]
 *   vitbench sweep --resume SWEEP_DIR [--retry_failed] [--timeout_s S] [--no_report]
 *   vitbench sweep --collect SWEEP_DIR [--no_report]
 *   vitbench sweep --cancel SWEEP_DIR [--no_report]
 *   FILE is a path; if it does not exist relative to the working directory it
 *   is looked up under the source tree, and a bare name (weak_scaling) means
 *   scenarios/<name>.yaml.
 *   Any other --key VALUE (or --key=VALUE) is a config override passed to
 *   every run; it beats the scenario's base. Naming a key the scenario sweeps
 *   (or output_dir's per-run value / run_name, which the sweep sets) exits 2.
 *   --launcher defaults to srun when SLURM_JOB_ID is set, else mpirun.
 *   --launcher_args is split on spaces and goes right after the launcher's
 *   own rank-count options (e.g. "--bind-to none" or "--cpu-bind=cores").
 *   --timeout_s kills a run (its whole process group) after S seconds; the
 *   run is recorded as failed (exit_code 128 + the signal it was sent) and
 *   the sweep goes on. 0 = no limit.
 *   --resume continues a sweep that was stopped (Ctrl-C, a killed job, a
 *   crash) in its own directory, with its own scenario.yaml copy and the
 *   options sweep.json recorded: completed (and submitted) runs are kept,
 *   runs with no row run (a run the sweep itself stopped on Ctrl-C or
 *   SIGTERM gets no row: it was interrupted, not failed), failed ones too
 *   with --retry_failed; the
 *   directory and log an earlier attempt left are moved to
 *   runs/<run>.unfinished-N and logs/<run>.unfinished-N.log first.
 *   index.csv stays one table in run order.
 *   --ab KEY=A,B instead of a FILE: a flags scenario (written to /tmp, kept
 *   as the sweep's scenario.yaml) with baseline {KEY: A} and one variant
 *   KEY=B, 5 repeats in shuffled rounds: the interleaved A/B comparison.
 *   --collect turns the exit statuses that jobs left in
 *   SWEEP_DIR/status/<run>.exit into index.csv rows (submitted / dry-run ->
 *   completed / failed, with the headline numbers), then writes the report;
 *   every job script runs it itself after each run (see "Slurm" below). A row
 *   whose job its scheduler says is over without a status is failed (-1).
 *   --cancel cancels the jobs of the rows still waiting (scancel, bkill, qdel,
 *   flux cancel; a sweep job once), then collects. A --resume of a batch
 *   sweep collects first: a job still queued or running keeps its rows.
 *
 * Scenario file (YAML; anchors and `<<:` merge keys work everywhere)
 *   name: weak_scaling       # required: [A-Za-z0-9_.-], names the sweep directory
 *   description: "..."       # optional, free text
 *   command: run             # what every run executes: run (default), train or commbench
 *   base: {config: tiny}     # config overrides for every run
 *   ranks: [1, 2, 4, 8]      # world sizes (default [1]); --ranks overrides
 *   ranks_per_node: 4        # optional: srun/sbatch get --nodes=ceil(R/4)
 *                            #           and --ntasks-per-node=min(R,4)
 *   timeout_s: 1800          # optional per-run limit; --timeout_s overrides
 *   repeats: 3               # every point N times, in rounds (A B C, A B C, ...), so slow
 *                            # drift of a shared machine hits every point alike; --repeats
 *   order: shuffled          # sequential or shuffled: each round in a seeded random order
 *   order_seed: 0            # (--order, --order_seed); default shuffled with repeats > 1,
 *                            # whose sweeps also start with one discarded warm-up run
 *                            # (--warmup_run), so the machine's warm-up is not the first point's
 *   run_names: "weak_scale_{nodes}"  # the points' names from a template instead of NNN_<params>:
 *                            # {nodes}, {ranks}, {index} (NNN), {<swept key>}; unique or exit 2
 *   threads_per_rank: 2      # OpenMP threads of every rank (default: cores on a node / ranks
 *                            # on it, at least 1), so every point runs with the same threads;
 *                            # exported as OMP_NUM_THREADS; --threads_per_rank
 *   sbatch: {exclusive: ""}  # optional: each becomes "#SBATCH --key=value" (time, account,
 *                            # qos, constraint, partition, reservation here count as the keys below);
 *                            # a value with blanks, quotes or # is double-quoted as sbatch reads it
 *   cluster:                 # the scheduler keys (or at the top level, as below; not both). Each
 *                            # scheduler takes its own and refuses the others' (mpirun: unused);
 *                            # docs/sweeps.md has the table. Each is also a flag, which wins; a
 *                            # list given as flags replaces the file's list.
 *   Slurm keys (srun / sbatch; nodes, gpus_per_node, cpus_per_task, time, account, preamble and
 *   sweep_job are every scheduler's):
 *   nodes: 2                 # every run on exactly N nodes, ranks/N tasks each (not with ranks_per_node)
 *   gpus_per_node: 4         # #SBATCH --gpus-per-node; srun binds one GPU per task (gpu_bind)
 *   cpus_per_task: 32        # #SBATCH and srun --cpus-per-task; OMP_NUM_THREADS unless threads_per_rank
 *   time: "00:30:00"         # Slurm's formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
 *   account: m0000           # also qos, constraint, partition, reservation: #SBATCH --<key>=value
 *   gpu_bind: per_task       # per_task (default: srun --gpus-per-task=1), closest or none
 *                            # (srun --gpus-per-node=G --gpu-bind=closest|none)
 *   srun_mpi: pmix           # srun --mpi=pmix (default: the site's MpiDefault)
 *   sbatch_extra: ["--mail-type=END"]   # more #SBATCH lines, verbatim
 *   preamble: ["module load cudatoolkit"]  # shell lines before the runs of every job script
 *   sweep_job: true          # batch launchers: ONE job at the largest node count runs every run
 *   LSF (bsub / jsrun), PBS Pro (qsub / mpiexec), Flux (flux-batch / flux-run) keys:
 *   queue: debug             # bsub -q, qsub -q, flux -q (account: bsub -P, qsub -A)
 *   alloc_flags: gpumps smt4 # bsub -alloc_flags "..."
 *   resource_set: per_task   # jsrun: per_task (1 task, 1 GPU, cpus_per_task cores, default 7) | per_node
 *   smpiargs: -disable_gpu_hooks  # jsrun --smpiargs=...
 *   bsub_extra / qsub_extra / flux_extra: ["..."]  # more #BSUB / #PBS / # flux: lines, checked
 *   time is read in its scheduler's grammar: sbatch --time, bsub -W [H:]M, walltime [H:]M:S,
 *   flux -t minutes or 30m / 1.5h
 *   matrix:                  # cartesian product over these keys, the first
 *     noddp: [false, true]   # key slowest, the last fastest
 *   layouts:                 # every tp x cp x dp factorization of world_size
 *     orders: [tp-cp-dp, cp-tp-dp]   # parallel_order values (default [tp-cp-dp])
 *     tensor_parallel: [1, 2, 4]     # optional: allowed tp values (default all divisors)
 *     context_parallel: [1, 2]       # optional: allowed cp values
 *     keep_equivalent: false         # default false: an order that maps every rank
 *                                    # the same way as an earlier one (they differ only
 *                                    # in where size-1 dims sit) is not run again
 *   world_size: 8            # layouts only (instead of ranks); --world_size overrides
 *   baseline: {num_data_workers: 0}  # flags form: one baseline run, then
 *   flags:                           # one run per (key, value), each equal
 *     num_data_workers: [1, 2]       # to the baseline except that key
 *
 *   Runs are ordered: ranks (outermost), layout, matrix point, then baseline
 *   followed by each flag setting. Unknown keys, bad values, a config key
 *   that does not exist or has an invalid value, a key both in base and
 *   swept, or a flag without a baseline value exit 2 naming file and key.
 *
 * Before anything is launched every point's resolved config is checked as
 * `vitbench run` would (keys and values, named config, data paths, the rank
 * layout): one line naming the point and exit 2 instead of N failed runs.
 *
 * What a sweep writes: DIR/<name>_<YYYYmmdd-HHMMSS>[-N]/ (never reused)
 *   index.csv     run_index,run_dir,status,exit_code,repeat,ranks,threads_per_rank,<swept keys...>,
 *                 full_samples_per_s,full_std,synthetic_samples_per_s,synthetic_std,
 *                 io_samples_per_s,io_std,validation_samples_per_s,validation_std,failure
 *                 failure: a failed run's class, "timeout", "signal N (NAME)" or
 *                 "exit N" (sbatch: "sbatch exit N", "slurm STATE"); --max_failures K
 *                 stops the sweep after K consecutive runs of one class
 *                 one row per run in the order they ran; repeat counts from 0; the
 *                 headline columns are the run's summary.csv means and stds (empty
 *                 until it completed). The sweep prints them as a table at its end.
 *                 status: completed | failed | dry-run | submitted; exit_code
 *                 empty for dry-run and submitted, 128+signal for a killed run. run_dir is
 *                 relative to the directory holding index.csv. Rewritten
 *                 atomically after every run. Swept keys: the matrix keys;
 *                 tensor_parallel, context_parallel, parallel_order for layouts;
 *                 variant (baseline | key=value) then every baseline key for flags.
 *   runs/<NNN>_<param=value...>[_rep=R]/  each run's own run directory: every run gets
 *                 --output_dir DIR/<sweep_id>/runs --run_name <NNN>_<...>; NNN numbers
 *                 the point, _rep=R the repeat when repeats > 1
 *   logs/<run>.log  the run's stdout + stderr (the job's output under sbatch)
 *   jobs/<run>.<ext>  batch launchers only (.sbatch, .lsf, .pbs, .flux); jobs/sweep_job[-N].<ext>
 *                 with sweep_job (its own output: logs/sweep_job[-N].log); a per-run job's own
 *                 output is logs/<run>.job.log except under Slurm (the run's log itself)
 *   status/<run>.exit  batch only: the run's exit status, written by its job script;
 *                 .job "<scheduler> <id>" (Slurm: "<id>"; the submission's, and the job's as it starts),
 *                 .hosts the job's hosts
 *   scenario.yaml a copy of FILE; sweep.json: command line, launcher, binary,
 *                 kind (weak_scaling | strong_scaling | ddp_buckets | layouts | flags |
 *                 matrix | single), swept_columns, repeats, order.
 *   report/       `vitbench report` of the sweep, written at its end (--no_report skips it)
 * Each run is started with fork/exec (no shell): mpirun -np R --oversubscribe
 * <vitbench> <command> <overrides...>, or srun --ntasks=R ..., where
 * <vitbench> is this executable (/proc/self/exe), in its own process group
 * with stdin from /dev/null. Ctrl-C / SIGTERM stops the current run and the
 * sweep (exit 130); rows of finished runs stay in index.csv. A sweep killed
 * outright (SIGKILL, OOM) takes its current run with it: the run gets
 * SIGTERM when its parent dies, so nothing finishes unrecorded.
 * Launchers: sweep_launchers.c (one entry each); LSF, PBS and Flux: sweep_lsf.c,
 * sweep_pbs.c, sweep_flux.c and docs/sweeps.md.
 * Slurm: every srun line (the srun launcher, and inside job scripts) is
 * srun --ntasks=R [--nodes=N --ntasks-per-node=P] [--cpus-per-task=C]
 * --cpu-bind=cores [--gpus-per-task=1 | --gpus-per-node=G --gpu-bind=B]
 * [--mpi=M] [--launcher_args]; --cpu-bind is left out when --launcher_args
 * has one. A job script sets OMP_NUM_THREADS, runs the preamble, then each
 * run through run_point, which appends the run's output to its log, writes
 * status/<run>.exit (128+15 when timeout_s ran out) and calls
 * `vitbench sweep --collect SWEEP_DIR --no_report`, so index.csv follows the
 * job; a failed run does not stop a sweep job's later runs, and the sweep job
 * ends with the collect that writes the report. Runs whose job never wrote a
 * status (cancelled, out of time) stay submitted until their scheduler says
 * the job is over; then they are failed (exit_code -1), and --resume
 * --retry_failed submits them again.
 * The sweep process itself must not be an MPI process: call vb_sweep_main
 * before (instead of) MPI initialisation; under mpirun/srun it exits 2.
 */
#ifndef VB_SWEEP_H
#define VB_SWEEP_H

#include <stdbool.h>

/* A key and its value as text, exactly as passed on a run's command line. */
typedef struct vb_sweep_kv {
    char *key;
    char *value;
} vb_sweep_kv;

/* An ordered key -> value list; setting an existing key replaces its value
 * in place (the key keeps its first position). */
typedef struct vb_sweep_kvs {
    vb_sweep_kv *v;
    int n, cap;
} vb_sweep_kvs;

void vb_sweep_kvs_set(vb_sweep_kvs *l, const char *key, const char *value);
const char *vb_sweep_kvs_get(const vb_sweep_kvs *l, const char *key);
void vb_sweep_kvs_free(vb_sweep_kvs *l);

/* One swept key and its values (matrix or flags). */
typedef struct vb_sweep_axis {
    char *key;
    char **values;
    int nvalues;
} vb_sweep_axis;

/* The scheduler keys (the scenario's cluster: block, or its top level;
 * flags of the same names win), every scheduler's in one place: the key
 * table in sweep_cluster.c says which scheduler takes which. The name is
 * the first scheduler it served. 0 / "" / NULL = not given. */
typedef struct vb_sweep_slurm {
    int nodes;            /* every run on exactly this many nodes */
    int gpus_per_node;
    int cpus_per_task;
    char time[32];        /* in the grammar of the scheduler it goes to */
    char account[128], qos[128], constraint[256], partition[128], reservation[128];
    char gpu_bind[16];    /* per_task | closest | none; "" = per_task when there are GPUs */
    char srun_mpi[32];    /* srun --mpi=...; "" = the site's MpiDefault */
    char **sbatch_extra;  /* whole option lines ("--mail-type=END") */
    int nsbatch_extra;
    char **preamble;      /* shell lines, verbatim */
    int npreamble;
    bool sweep_job;
    char queue[128];      /* LSF, PBS, Flux: -q */
    char alloc_flags[256]; /* LSF: -alloc_flags "gpumps smt4" */
    char resource_set[16]; /* jsrun: per_task (default: a task, a GPU, cpus_per_task cores) | per_node */
    char smpiargs[256];   /* jsrun --smpiargs (Spectrum MPI's own options) */
    char **bsub_extra, **qsub_extra, **flux_extra; /* more #BSUB / #PBS / # flux: lines */
    int nbsub_extra, nqsub_extra, nflux_extra;
    vb_sweep_kvs given;   /* every key set: key -> where (file and line, or flag) */
} vb_sweep_slurm;

typedef struct vb_scenario {
    char path[1024];      /* the file it was read from */
    char name[128];
    char command[32];
    vb_sweep_kvs base;
    int *ranks;
    int nranks;
    int ranks_per_node;   /* 0 = not given */
    int timeout_s;        /* 0 = no limit */
    vb_sweep_kvs sbatch;  /* extra #SBATCH options */
    vb_sweep_slurm slurm;
    int repeats;          /* runs of every point, in rounds (default 1) */
    int shuffled;         /* order: 1 shuffled, 0 sequential, -1 not given (vb_scenario_shuffled) */
    unsigned long long order_seed;
    int threads_per_rank; /* 0 = cores on a node / ranks on it, at least 1 */
    char run_names[128];  /* a template for the points' names ("" = NNN_<params>) */

    bool has_layouts;
    int world_size;
    char **orders;
    int norders;
    int *layout_tp, *layout_cp; /* allowed values; NULL = any divisor */
    int nlayout_tp, nlayout_cp;
    bool keep_equivalent;

    vb_sweep_axis *matrix;
    int nmatrix;

    bool has_flags;
    vb_sweep_kvs baseline;
    vb_sweep_axis *flags;
    int nflags;
} vb_scenario;

/* Reads and checks a scenario file; every problem exits 2 with one line
 * naming the file, the key and (where it helps) the line. Config keys and
 * values are checked with the config parser's own rules. */
/* The order a scenario's rounds run in: as given, else shuffled when points
 * repeat (a fixed plan order would put the machine's slow start, measured 2-3x
 * slower on its repeats, always on the same first point). */
bool vb_scenario_shuffled(const vb_scenario *s);
void vb_scenario_load(vb_scenario *s, const char *path);
void vb_scenario_free(vb_scenario *s);

/* What the sweep command line changes. */
typedef struct vb_sweep_overrides {
    int *ranks;            /* --ranks; NULL = the scenario's */
    int nranks;
    int world_size;        /* --world_size; 0 = the scenario's */
    vb_sweep_kvs config;   /* --key VALUE config overrides, in order */
} vb_sweep_overrides;

typedef struct vb_sweep_run {
    int index;
    int ranks;
    char name[128];        /* NNN_ranks=R_param=value..., also the run_name */
    vb_sweep_kvs params;   /* value of every swept column for this run */
    vb_sweep_kvs args;     /* every override passed: base < command line < swept */
} vb_sweep_run;

typedef struct vb_sweep_plan {
    char **columns;        /* swept keys, the index.csv columns after ranks */
    int ncolumns;
    vb_sweep_run *runs;
    int nruns;
} vb_sweep_plan;

/* Expands the scenario (with the command line's overrides) into runs.
 * Contradictions (an override naming a swept key, --ranks on a layouts
 * scenario, a world size with no valid layout...) exit 2. */
void vb_sweep_expand(const vb_scenario *s, const vb_sweep_overrides *o, vb_sweep_plan *plan);
void vb_sweep_plan_free(vb_sweep_plan *p);

/* Sets one scheduler key from its text (scalar keys, and one line of a
 * list key such as sbatch_extra or preamble, appended); exits 2 naming
 * origin on a bad value. Returns false when key is not a scheduler key.
 * time is checked here against every scheduler's grammar (one must take
 * it) and against the chosen scheduler's once the launcher is known. */
bool vb_sweep_slurm_set(vb_sweep_slurm *sl, const char *key, const char *value, const char *origin);
/* Is text a time limit in one of Slurm's formats (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S)? */
bool vb_sweep_slurm_time_ok(const char *text);
void vb_sweep_slurm_free(vb_sweep_slurm *sl);

/* Parses "1,2,4" into a new array of positive ints (caller frees); exits 2
 * naming `what` on anything else. */
int *vb_sweep_parse_int_list(const char *text, const char *what, int *n);

/* `vitbench sweep ...`; argv[0] is "sweep". Returns the process exit status:
 * 0 when every run completed (or was submitted, or printed by --dry-run),
 * 1 when any run failed (its last line says how many), 130 when
 * interrupted. Bad input exits 2. */
int vb_sweep_main(int argc, char **argv);

#endif
