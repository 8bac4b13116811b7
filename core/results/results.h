/* results.h: the results schema: the directories vitbench names, the run
 * directory and its files, index.csv's bookkeeping columns. Writers (core/run,
 * bench/) and readers (analysis/) take names from here.
 *
 * output_dir/<run_id>/ is created fresh (never reusing an existing one: a
 * suffix -1, -2 ... is added) and holds:
 *   run.json            resolved config, command line, git commit, host, backend,
 *                       library versions, start/end time, status, and
 *                       "fingerprint": {host, cpu_model, affinity_cores (cores in
 *                       the rank's affinity mask), omp_threads, ranks, backend, blas,
 *                       blas_coretype, compiler, cflags, git_commit, git_dirty,
 *                       gpu_name, gpu_driver ("" without a GPU), machine_key}
 *                       machine_key: 16 hex digits naming what makes throughput
 *                       comparable (cpu_model, affinity_cores, omp_threads, ranks,
 *                       backend, blas_coretype, gpu_name); host, compiler and
 *                       commit are recorded but are what people change, not part of it
 *   trials.csv          run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s
 *   load.csv            the machine's load around each trial, per rank (machine_load.h):
 *                       run_id,trial_type,trial_index,warmup,rank,seconds,online_cpus,
 *                       loadavg_before,loadavg_after,steal_share,cpu_wait_share,nivcsw
 *   summary.csv         trial_type,mean_samples_per_s,std_samples_per_s,min_samples_per_s,
 *                       max_samples_per_s,ntrials,<key config columns>,
 *                       achieved_tflop_per_s,peak_mem_bytes,<fingerprint columns>
 *   benchy_output.json  benchy's JSON: {"nranks":N,"IO":{"rates":[[..]],"avg_iter_throughput":[..],
 *                       "trial_throughput":[..],"trial_time":[..]},"SYNTHETIC":{..},"FULL":{..},
 *                       "VALIDATION":{..}} (a kind once one of its timed trials finished)
 *   iterations.csv      trial,trial_type,trial_index,warmup,step,rank,seconds,data_wait_s,...
 *   ops.csv             (profile.h) rank,trial_type,name,category,calls,bytes,flops,total_s,...
 *   timeline.csv        (timeline.h) every event of the profile_steps window
 *   kernels.csv         (cupti: true; gpu_summary.h, cupti_trace.h) nsys stats'
 *                       cuda_gpu_kern_sum of the timed steps' kernels, with
 *                       kernels_SYNTHETIC.csv, kernels_FULL.csv, gpu_mem_time.csv
 *                       (VALIDATION's kernels are in kernels.csv only)
 *   train_log.csv       step,epoch,loss,lr,seconds          (train runs)
 *   validation.csv      epoch,step,val_loss,rmse_u10m,seconds (train runs)
 * Every CSV is rewritten atomically (tmp file + rename, fileio.h) after every
 * trial / epoch, so a run killed mid-way keeps everything it finished.
 * While the run goes on, run.json ends in trailing whitespace (at least
 * 64 KiB in all): room kept so that its final status can be written even
 * when the disk has filled up (fileio.h vb_write_reserved).
 */
#ifndef VB_RESULTS_H
#define VB_RESULTS_H

#include <stdio.h>
#include <stdbool.h>
/* vb_atomic_write, vb_atomic_write_or_die, vb_die_env and vb_csv_field: every
 * writer of the run directory uses them, so they come with this header */
#include "core/util/fileio.h"

/* The trial kinds, in the order a run runs them: benchy's IO (the loader
 * alone), SYNTHETIC (training steps on one batch) and FULL (training steps on
 * the loader's batches), and VALIDATION (forward passes over the valid split,
 * as train.py's validation loop). Every name a kind has outside the trial
 * runner comes from this table: trial_type in trials.csv, load.csv,
 * summary.csv, iterations.csv and ops.csv, benchy's JSON key and compare's
 * --metric (name); its benchy YAML section and run.json key (section, read
 * without case); index.csv's headline columns <column>_samples_per_s and
 * <column>_std. What a kind does is bench/trials.c's table. */
typedef enum { VB_TRIAL_IO, VB_TRIAL_SYNTHETIC, VB_TRIAL_FULL, VB_TRIAL_VALIDATION, VB_TRIAL_NKINDS } vb_trial_kind;
typedef struct vb_trial_kind_names {
    const char *name;    /* "FULL" */
    const char *section; /* "full" */
    const char *column;  /* "full" */
} vb_trial_kind_names;
extern const vb_trial_kind_names vb_trial_kinds[VB_TRIAL_NKINDS];
/* the kind named `name` (exactly, as the CSVs write it), or -1 */
int vb_trial_kind_by_name(const char *name);
/* "IO, SYNTHETIC, FULL, VALIDATION": for messages */
const char *vb_trial_kind_list(void);

/* A run directory's files (above), and a sweep directory's: every writer and
 * reader names them from here. */
#define VB_RUN_JSON "run.json"
#define VB_TRIALS_CSV "trials.csv"
#define VB_LOAD_CSV "load.csv"
#define VB_SUMMARY_CSV "summary.csv"
#define VB_ITERATIONS_CSV "iterations.csv"
#define VB_OPS_CSV "ops.csv"
#define VB_TIMELINE_CSV "timeline.csv"
#define VB_TRAIN_LOG_CSV "train_log.csv"
#define VB_VALIDATION_CSV "validation.csv"
#define VB_CHECKPOINT_H5 "checkpoint.h5"
#define VB_BREAKDOWN_CSV "breakdown.csv" /* vitbench report and nsys: HTA-style time breakdown */
#define VB_INDEX_CSV "index.csv"         /* a sweep's runs, one row each (VB_INDEX_LEAD_COLUMNS) */
#define VB_SWEEP_JSON "sweep.json"       /* a sweep's plan and how it ran */
#define VB_BENCHY_JSON "benchy_output.json" /* benchy's output_filename unless its config names another */
/* what the tools write into a run or sweep directory afterwards, by default */
#define VB_TRACE_JSON "trace.json"       /* vitbench trace RUN */
#define VB_KINETO_DIR "kineto"           /* vitbench trace RUN --format kineto: a directory */
#define VB_REPORT_DIR "report"           /* vitbench report RUN|SWEEP: a directory */
#define VB_COMPARE_JSON "compare.json"   /* vitbench compare BASE NEW: into NEW */
#define VB_MODEL_CSV "model.csv"         /* vitbench model: into the sweep (or --output_dir) */
#define VB_MODEL_FITS_CSV "model_fits.csv"
#define VB_MODEL_MD "model.md"
#define VB_PUBLISHED_CSV "published.csv" /* vitbench model --published */
#define VB_PUBLISHED_MD "published.md"
#define VB_PUBLISHED_OPS_CSV "published_ops.csv"
#define VB_COMMBENCH_CSV "commbench.csv" /* vitbench commbench: its own run directory */
/* cupti: true (cupti_trace.h): nsys stats' kernel summary of every traced
 * trial, of the timed SYNTHETIC and of the timed FULL trials, and the
 * memcpy / memset summary; with profiler_mode all on > 1 rank, rank k's as
 * <stem>_rank<k>.csv */
#define VB_KERNELS_CSV "kernels.csv"
#define VB_KERNELS_SYNTHETIC_CSV "kernels_SYNTHETIC.csv"
#define VB_KERNELS_FULL_CSV "kernels_FULL.csv"
#define VB_GPU_MEM_TIME_CSV "gpu_mem_time.csv"
#define VB_CUPTI_FILES VB_KERNELS_CSV, VB_KERNELS_SYNTHETIC_CSV, VB_KERNELS_FULL_CSV, VB_GPU_MEM_TIME_CSV
#define VB_COMMBENCH_JSON "commbench.json"
/* a sweep directory's own files and folders besides index.csv and sweep.json */
#define VB_SCENARIO_COPY "scenario.yaml"
#define VB_SWEEP_RUNS_DIR "runs"
#define VB_SWEEP_LOGS_DIR "logs"
#define VB_SWEEP_JOBS_DIR "jobs"
#define VB_SWEEP_STATUS_DIR "status"

/* The one list of every name above: what a run, a sweep and the tools write
 * in a results directory. A name another input chooses for a file there
 * (benchy's output_filename) must be none of them (vb_run_file_reserved),
 * so a name added to this list is refused there from then on. CUPTI's
 * files (VB_CUPTI_FILES) and their per-rank copies are refused too. */
#define VB_RESULTS_NAMES                                                                                    \
    VB_RUN_JSON, VB_TRIALS_CSV, VB_LOAD_CSV, VB_SUMMARY_CSV, VB_ITERATIONS_CSV, VB_OPS_CSV, VB_TIMELINE_CSV,             \
        VB_TRAIN_LOG_CSV, VB_VALIDATION_CSV, VB_CHECKPOINT_H5, VB_BREAKDOWN_CSV, VB_INDEX_CSV, VB_SWEEP_JSON, \
        VB_TRACE_JSON, VB_KINETO_DIR, VB_REPORT_DIR, VB_COMPARE_JSON, VB_MODEL_CSV, VB_MODEL_FITS_CSV,      \
        VB_MODEL_MD, VB_PUBLISHED_CSV, VB_PUBLISHED_MD, VB_PUBLISHED_OPS_CSV, VB_COMMBENCH_CSV,             \
        VB_COMMBENCH_JSON,                                                                                  \
        VB_SCENARIO_COPY, VB_SWEEP_RUNS_DIR, VB_SWEEP_LOGS_DIR, VB_SWEEP_JOBS_DIR, VB_SWEEP_STATUS_DIR

/* Column names that several files share and readers look up: every reader
 * names them from here (tests/test_results_schema.c checks each is in the
 * headers below that hold it) */
#define VB_COL_RUN_ID "run_id"
#define VB_COL_TRIAL_TYPE "trial_type" /* a vb_trial_kinds name */
#define VB_COL_TRIAL_INDEX "trial_index"
#define VB_COL_WARMUP "warmup"
#define VB_COL_RANK "rank"
#define VB_COL_STEP "step"
#define VB_COL_SECONDS "seconds"
#define VB_COL_SAMPLES_PER_S "samples_per_s"
#define VB_COL_MEAN_SAMPLES_PER_S "mean_samples_per_s"
#define VB_COL_STD_SAMPLES_PER_S "std_samples_per_s"
#define VB_COL_COMM_EXPOSED_S "comm_exposed_s"   /* iterations.csv, breakdown.csv */
#define VB_COL_ALLREDUCE_CALLS "allreduce_calls" /* iterations.csv */
#define VB_COL_ALLREDUCE_BYTES "allreduce_bytes"
/* ops.csv's */
#define VB_COL_NAME "name"
#define VB_COL_CATEGORY "category"
#define VB_COL_CALLS "calls"
#define VB_COL_BYTES "bytes"
#define VB_COL_FLOPS "flops"
#define VB_COL_TOTAL_S "total_s"
#define VB_COL_AVG_S "avg_s"
#define VB_COL_SHARE_OF_STEP "share_of_step"
#define VB_COL_GFLOP_PER_S "gflop_per_s"
#define VB_COL_GB_PER_S "gb_per_s"
/* load.csv's */
#define VB_COL_ONLINE_CPUS "online_cpus"
#define VB_COL_LOADAVG_BEFORE "loadavg_before"
#define VB_COL_STEAL_SHARE "steal_share"
#define VB_COL_CPU_WAIT_SHARE "cpu_wait_share"
#define VB_COL_NIVCSW "nivcsw"
/* commbench.csv's, which the model's fits read */
#define VB_COL_COLLECTIVE "collective"
#define VB_COL_GROUP "group"
#define VB_COL_GROUP_SIZE "group_size"
#define VB_COL_SIZE_BYTES "size_bytes"
#define VB_COL_TIME_US "time_us"
#define VB_COL_WRONG "wrong"
#define VB_COL_NGROUPS "ngroups"
/* commbench --beside_gemm's, from which the model takes its overlap slowdown */
#define VB_COL_GEMM_US "gemm_us"
#define VB_COL_GEMM_BESIDE_US "gemm_beside_us"

/* The header lines of the files whose columns are fixed (readers find
 * columns by these names; the other files' columns are listed above) */
#define VB_TRIALS_CSV_HEADER "run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s"
#define VB_LOAD_CSV_HEADER                                                                                  \
    "run_id,trial_type,trial_index,warmup,rank,seconds,online_cpus,loadavg_before,loadavg_after,steal_share,"  \
    "cpu_wait_share,nivcsw"
/* iterations.csv: a step's time, then what a run records of it (a bench_step
 * reference holds the step columns alone: it measures nothing else) */
#define VB_ITERATIONS_CSV_STEP_COLUMNS "trial,trial_type,trial_index,warmup,step,rank,seconds"
#define VB_ITERATIONS_CSV_HEADER                                                                            \
    VB_ITERATIONS_CSV_STEP_COLUMNS ",data_wait_s,allreduce_calls,allreduce_bytes,comm_exposed_s"
#define VB_VALIDATION_CSV_HEADER "epoch,step,val_loss,rmse_u10m,seconds"
/* train_log.csv; with loss scaling (fp16) VB_TRAIN_LOG_CSV_SCALING_COLUMNS follow */
#define VB_TRAIN_LOG_CSV_HEADER "step,epoch,loss,lr,seconds"
#define VB_TRAIN_LOG_CSV_SCALING_COLUMNS "loss_scale,skipped"
/* ops.csv (profile.h; vitbench nsys writes the same from a profile) */
#define VB_OPS_CSV_HEADER                                                                                    \
    "rank,trial_type,name,category,calls,bytes,flops,total_s,avg_s,min_s,max_s,median_s,share_of_step,"      \
    "gflop_per_s,gb_per_s"
/* timeline.csv (timeline.h; vitbench nsys writes the same from a trace) */
#define VB_TIMELINE_CSV_HEADER "rank,lane,kind,name,trial_type,trial_index,step,start_s,dur_s,bytes,flops,bucket"
/* breakdown.csv: HTA's temporal breakdown per rank */
#define VB_BREAKDOWN_CSV_HEADER                                                                              \
    "rank,steps,step_s,compute_s,comm_s,comm_hidden_s,comm_exposed_s,memcpy_s,data_wait_s,idle_s,overlap_pct"
/* commbench.csv: a row per (collective, group, size, rank), nccl-tests' figures;
 * with --beside_gemm N the GEMM's N, its time alone and beside the collective
 * and the slowdown (beside / alone - 1), else those four empty */
#define VB_COMMBENCH_CSV_HEADER                                                                             \
    "collective,plane,group,group_size,ngroups,dtype,size_bytes,count,warmup_iters,iters,rank,group_rank,"   \
    "time_us,algbw_GBps,busbw_GBps,wrong,gemm_n,gemm_us,gemm_beside_us,gemm_slowdown"
/* summary.csv: a row per trial kind that has timed trials, its trials'
 * samples/s, the key config columns, achieved TFLOP/s, peak memory and the
 * fingerprint's columns */
#define VB_SUMMARY_CSV_HEADER                                                                                 \
    "trial_type,mean_samples_per_s,std_samples_per_s,min_samples_per_s,max_samples_per_s,ntrials,"            \
    "config,backend,ranks,tp,cp,dp,global_batch_size,local_batch_size,embed_dim,depth,num_heads,"             \
    "patch_size,img_h,img_w,n_in_channels,n_out_channels,num_data_workers,amp_mode,bucket_cap_mb,noddp,"      \
    "achieved_tflop_per_s,peak_mem_bytes,host,cpu_model,affinity_cores,omp_threads,blas,blas_coretype,"       \
    "compiler,git_commit,git_dirty,machine_key"
/* vitbench model's files: model.csv's fixed columns (the sensitivity
 * columns sens_<level>_beta_m25 / _p25 follow them), model_fits.csv's and
 * published.csv's headers */
#define VB_MODEL_CSV_COLUMNS                                                                                 \
    "point", "ranks", "tp", "cp", "dp", "local_batch", "threads_per_rank", "node_ranks", "cpu_factor",       \
        "nbuckets", "forward_s", "backward_s", "other_s", "compute_s", "ddp_comm_s", "comm_exposed_ddp_s",   \
        "comm_exposed_tp_s", "comm_exposed_cp_s", "step_s", "samples_per_s", "efficiency", "measured_step_s", \
        "measured_samples_per_s", "measured_efficiency", "rel_error", "extrapolated", "step_lo_s",          \
        "step_hi_s", "samples_per_s_lo", "samples_per_s_hi", "efficiency_lo", "efficiency_hi", "nodes",      \
        "compute_ref", "comm_sources"
#define VB_COL_POINT "point"
#define VB_COL_EFFICIENCY "efficiency"
#define VB_COL_MEASURED_SAMPLES_PER_S "measured_samples_per_s"
#define VB_COL_MEASURED_EFFICIENCY "measured_efficiency"
#define VB_COL_REL_ERROR "rel_error"
#define VB_COL_SAMPLES_PER_S_LO "samples_per_s_lo"
#define VB_COL_SAMPLES_PER_S_HI "samples_per_s_hi"
#define VB_MODEL_FITS_CSV_HEADER "collective,group,group_size,world,alpha_us,beta_GBps,rel_rms,nsizes"
#define VB_PUBLISHED_CSV_HEADER                                                                              \
    "id,measurement,class,machine,tp,cp,dp,order,local_batch,implementation,reference,published_samples_per_s," \
    "published_spread,predicted_samples_per_s,predicted_lo,predicted_hi,rel_error,published_in_interval,"     \
    "most_sensitive"
/* published_ops.csv: each prediction's compute, op by op as priced on its
 * machine and scaled to its reference's measured step (ops.csv's names) */
#define VB_PUBLISHED_OPS_CSV_HEADER "id,machine,name,calls,flops,step_s,share_of_step"
/* A machine's performance history (vitbench history): one CSV per machine
 * fingerprint, VB_HISTORY_DIR/<machine_key>.csv, committed like the
 * baselines, one row per gate run, oldest first, in the layout Apache
 * Otava's CSV importer reads as it is: the time (ISO 8601, UTC, as
 * 2026-11-21T23:52:51Z), the commit and the machine, then one column per
 * metric (empty where a row has no value): the throughput columns are
 * <vb_trial_kinds name>_samples_per_s, the counts are counts.csv's. */
#define VB_HISTORY_DIR "results/history"
#define VB_HISTORY_EXT ".csv"
#define VB_COL_TIME "time"
#define VB_COL_COMMIT "commit"
#define VB_COL_MACHINE_KEY "machine_key"
#define VB_HISTORY_COL_FULL "FULL_samples_per_s"
#define VB_HISTORY_COL_SYNTHETIC "SYNTHETIC_samples_per_s"
#define VB_HISTORY_COL_IO "IO_samples_per_s"
#define VB_COL_INSTRUCTIONS "instructions"
#define VB_COL_EST_CYCLES "est_cycles"
#define VB_HISTORY_CSV_HEADER                                                                              \
    "time,commit,machine_key,FULL_samples_per_s,SYNTHETIC_samples_per_s,IO_samples_per_s,instructions,"   \
    "est_cycles"
/* `vitbench history FILE`'s page, by default in <FILE without .csv>_report/
 * beside it (git-ignored there: only the CSVs are committed) */
#define VB_HISTORY_REPORT_SUFFIX "_report"
#define VB_HISTORY_MD "history.md"
#define VB_HISTORY_HTML "history.html"
#define VB_HISTORY_CHANGES_CSV "changes.csv"
/* counts.csv in a gate set: the counted work of the step, a row per
 * count (instructions, est_cycles, ...) */
#define VB_COUNTS_CSV "counts.csv"
#define VB_COUNTS_CSV_HEADER "metric,value"
#define VB_COL_METRIC "metric"
#define VB_COL_VALUE "value"
/* where a run, sweep, model or commbench goes without --output_dir */
#define VB_RESULTS_DEFAULT_DIR "results"

/* The time in every directory name vitbench makes itself (runs, sweeps,
 * commbench, model): local time as YYYYmmdd-HHMMSS, which sorts by time. */
void vb_results_stamp(char *buf, size_t n);

/* Claims out/<base>, or out/<base>-1, -2 ... when taken, creating out first:
 * mkdir is the atomic claim, so two runs never share a directory and an
 * existing one is never written into. Writes the path into dir (n bytes) and
 * the name into id (idn bytes; id may be NULL). 0, or -1 with errno
 * (EEXIST: every suffix taken; ENAMETOOLONG). */
int vb_results_dir_claim(const char *out, const char *base, char *dir, size_t n, char *id, size_t idn);

/* vb_results_dir_claim of out/<prefix>_<stamp> (vb_results_stamp's time):
 * the directories vitbench names itself. */
int vb_results_dir_claim_stamped(const char *out, const char *prefix, char *dir, size_t n, char *id, size_t idn);

/* Creates output_dir/<run_id>/ ("results" when output_dir is empty) where
 * run_id = run_name, or <prefix>_<stamp> without one ("run" without a
 * prefix); writes the resolved path into dir (n bytes) and the id into
 * run_id. Exits 2 naming output_dir if it cannot be created, or run_name if
 * it holds a '/'. */
void vb_run_dir_create(const char *output_dir, const char *run_name, const char *prefix, char *dir, size_t n,
                       char *run_id, size_t idn);

/* index.csv, a sweep directory's table of runs: these bookkeeping columns
 * first (then the swept keys, then the headline results), written by
 * bench/sweep and read by analysis/. */
#define VB_INDEX_LEAD_COLUMNS "run_index,run_dir,status,exit_code,repeat,ranks,threads_per_rank"
#define VB_COL_RUN_INDEX "run_index"
#define VB_COL_RUN_DIR "run_dir"
#define VB_COL_STATUS "status"
#define VB_COL_EXIT_CODE "exit_code"
#define VB_COL_REPEAT "repeat"
#define VB_COL_RANKS "ranks"
#define VB_COL_THREADS_PER_RANK "threads_per_rank"
/* among the swept keys: a flags or ddp_buckets sweep's variant name, and the
 * config keys whose columns the report looks for */
#define VB_COL_VARIANT "variant"
/* headline columns read by name (VB_INDEX_HEADLINE_COLUMNS has them all) */
#define VB_COL_FULL_SAMPLES_PER_S "full_samples_per_s"
#define VB_COL_SYNTHETIC_SAMPLES_PER_S "synthetic_samples_per_s"
#define VB_COL_TENSOR_PARALLEL "tensor_parallel"
#define VB_COL_NODDP "noddp"
/* its headline results, after the swept keys: FULL, SYNTHETIC, IO and
 * VALIDATION samples/s, each mean and standard deviation over the run's
 * trials (vb_trial_kinds' columns, in this order) */
#define VB_INDEX_HEADLINE_COLUMNS                                                                        \
    "full_samples_per_s", "full_std", "synthetic_samples_per_s", "synthetic_std", "io_samples_per_s", \
        "io_std", "validation_samples_per_s", "validation_std"
/* the kinds of those columns, in their order */
#define VB_INDEX_HEADLINE_KINDS VB_TRIAL_FULL, VB_TRIAL_SYNTHETIC, VB_TRIAL_IO, VB_TRIAL_VALIDATION
#define VB_INDEX_HEADLINE_NKINDS 4
/* after them, why a run that did not complete failed: its class,
 * "timeout", "signal N (NAME)" or "exit N" (empty for the others); reports
 * and --max_failures count failures by it, never by log text */
#define VB_INDEX_FAILURE_COLUMN "failure"
/* its columns that are not swept keys: bookkeeping, the thread count the
 * sweep derives from ranks, the headline results and the failure class */
#define VB_INDEX_NOT_SWEPT                                                                                  \
    "run_index", "run_dir", "status", "exit_code", "repeat", "threads_per_rank", VB_INDEX_HEADLINE_COLUMNS, \
        VB_INDEX_FAILURE_COLUMN
/* A sweep's kind: what `vitbench report` reads it as (sweep.json's "kind").
 * Decided by one rule from what the sweep varies; the sweep states the
 * facts from its scenario when it starts, the report from index.csv and
 * the runs' summaries when a sweep directory has no sweep.json. */
#define VB_SWEEP_KINDS "weak_scaling", "strong_scaling", "ddp_buckets", "layouts", "flags", "matrix", "single"
typedef struct vb_sweep_facts {
    bool layouts;           /* tensor / context-parallel layouts are swept */
    bool variants;          /* a baseline and variants of it (flags, --ab) */
    bool variants_ddp_only; /* every variant changes only bucket_cap_mb or noddp */
    bool ranks_vary;
    int fixed_batch;        /* while ranks vary: 1 local_batch_size, 2 global_batch_size, 0 neither */
    int npoints;            /* distinct points (repeats of one point count once) */
} vb_sweep_facts;
/* The kind (one of VB_SWEEP_KINDS); *why, when not NULL, says which fact
 * decided it ("ranks vary at a fixed local batch"). */
const char *vb_sweep_kind(const vb_sweep_facts *f, const char **why);

/* The line a sweep appends to a run's log when it stopped the run itself
 * (timeout, interrupt): "vitbench sweep: run stopped (timeout) after 12.3 s".
 * Bookkeeping, never a run's last word (log_line.h skips it). */
#define VB_SWEEP_STOP_LINE "vitbench sweep: run stopped ("
/* false for the columns of VB_INDEX_NOT_SWEPT */
bool vb_index_column_is_swept(const char *name);

/* For a run that cannot record its own end (killed while blocked in a
 * collective, SIGKILLed): if run.json at `path` still says "running", it is
 * rewritten (atomically) as "failed" with `why` under "failure" and an
 * end_time; on a full disk in place, over the room its "running" write kept
 * (fileio.h vb_write_reserved). Returns 1 when rewritten, 0 when the status was already final,
 * -1 when the file cannot be read or written. Async-signal-unsafe: call from
 * a thread or another process, never from a signal handler. */
int vb_run_json_mark_failed(const char *path, const char *why);

/* True when `name` (a file name, no directory part) is one of
 * VB_RESULTS_NAMES, CUPTI's files or their per-rank copies
 * (kernels_rank<k>.csv ...). Compared without case: on a case-insensitive
 * file system Summary.csv is summary.csv. benchy's output_filename must not
 * be one of them, or one file silently replaces the other. */
bool vb_run_file_reserved(const char *name);

#endif
