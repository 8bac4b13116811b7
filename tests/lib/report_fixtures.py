# report_fixtures.py: run and sweep directories written as vitbench writes
# them (run.json, trials.csv, summary.csv, iterations.csv, ops.csv, load.csv,
# index.csv, sweep.json) with known numbers, for the report's tests. Imported
# by the tests' own fixture scripts (python3 with tests/lib on sys.path).
import csv, json, os, sys

def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)

def fingerprint(ranks, cpu="Test CPU 9000"):
    return {"host": "node1", "cpu_model": cpu, "affinity_cores": 1, "omp_threads": 1, "ranks": ranks,
            "backend": "cpu", "blas": "OpenBLAS 0.3.21", "blas_coretype": "Haswell", "compiler": "gcc 12",
            "cflags": "-O3", "git_commit": "abc123", "git_dirty": False, "gpu_name": "", "gpu_driver": "",
            "machine_key": "%016x" % (0xfeed + ranks + (0 if cpu == "Test CPU 9000" else 1 << 40))}

def make_run(d, ranks, local, glob, noddp, full, cpu="Test CPU 9000", bucket=25, tp=1, cp=1, exposed=None,
             buckets=1, syn=1.1, io=None, load=None, threads=None):
    """full: the timed FULL samples_per_s of rank 0; every file a run writes. io: the IO trials' rates;
    load: the share of thread time every timed trial lost (load.csv, 1-minute load 3.0 on 2 CPUs);
    threads: (team, used), the OpenMP threads a rank was given and ran (run.json's threads)."""
    os.makedirs(d)
    fp = fingerprint(ranks, cpu)
    j = {"run_id": os.path.basename(d), "status": "completed", "command": "run",
         "command_line": "vitbench run --config tiny", "git_commit": "abc123", "host": "node1",
         "backend": "cpu", "ranks": ranks, "config": {"config": "tiny"},
         "parallel": {"tp": tp, "cp": cp, "dp": ranks // (tp * cp), "parallel_order": "tp-cp-dp",
                      "grad_reduce_group": "dp"},
         "versions": {"hdf5": "1.10.8", "openblas": "OpenBLAS 0.3.21", "mpi": "Open MPI 4.1"},
         "fingerprint": fp}
    if threads:
        fp["omp_threads"] = threads[1]
        j["threads"] = {"requested": threads[0], "per_rank": threads[1], "node_ranks": ranks, "oversubscribed": False,
                        "policy": "adapt", "team": threads[0], "chosen_by": "probe"}
    json.dump(j, open(d + "/run.json", "w"))
    rows, lrows = [], []
    io = io or [5000.0, 5100.0]
    for t, (typ, vals) in enumerate((("IO", io), ("SYNTHETIC", [x * syn for x in full]), ("FULL", full))):
        if load is not None:
            lrows += [[os.path.basename(d), typ, i, 0, 0, 1.0, 2, 3.0, 3.0, 0, load, 10] for i in range(len(vals))]
        rid = os.path.basename(d)  # every row is this run's (run.json's run_id)
        rows.append([rid, typ, 0, 1, 5, glob, ranks, 0, 5.0 * glob, 1.0])  # warm-up: ignored
        for i, v in enumerate(vals):
            for rank in range(ranks):
                # other ranks' rows carry other rates: only rank 0's count
                r = v if rank == 0 else 1e9
                rows.append([rid, typ, i, 0, 5, glob, ranks, rank, 5 * glob / r, r])
    write_csv(d + "/trials.csv", ["run_id", "trial_type", "trial_index", "warmup", "nbatches", "global_batch",
                                  "ranks", "rank", "seconds", "samples_per_s"], rows)
    if load is not None:
        write_csv(d + "/load.csv", ["run_id", "trial_type", "trial_index", "warmup", "rank", "seconds", "online_cpus",
                                    "loadavg_before", "loadavg_after", "steal_share", "cpu_wait_share", "nivcsw"], lrows)
    m = sum(full) / len(full)
    write_csv(d + "/summary.csv",
              ["trial_type", "mean_samples_per_s", "std_samples_per_s", "min_samples_per_s", "max_samples_per_s",
               "ntrials", "config", "backend", "ranks", "tp", "cp", "dp", "global_batch_size", "local_batch_size",
               "bucket_cap_mb", "noddp", "peak_mem_bytes", "machine_key"],
              [["FULL", m, 0, min(full), max(full), len(full), "tiny", "cpu", ranks, tp, cp, ranks // (tp * cp),
                glob, local, bucket, "true" if noddp else "false", 1048576 * 64 // (tp * cp),
                fingerprint(ranks, cpu)["machine_key"]]])
    if exposed is not None:  # 4 timed FULL steps per rank, rank 1 waits twice as long as rank 0
        write_csv(d + "/iterations.csv", ["trial", "trial_type", "trial_index", "warmup", "step", "rank", "seconds",
                                          "data_wait_s", "allreduce_calls", "allreduce_bytes", "comm_exposed_s"],
                  [["FULL_0", "FULL", 0, 0, st, rk, 0.1, 0, buckets, 466000, exposed * (1 + rk) / 1.5]
                   for st in range(4) for rk in range(2)])
    if tp * cp > 1:  # 10 timed FULL steps; 1 MB per step of the layout's own collective
        write_csv(d + "/iterations.csv", ["trial", "trial_type", "trial_index", "warmup", "step", "rank", "seconds"],
                  [["FULL_0", "FULL", 0, 0, st, 0, 0.1] for st in range(10)])
        names = ["allreduce_tp"] if tp > 1 else ["allgather_cp", "reduce_scatter_cp"]
        write_csv(d + "/ops.csv", ["rank", "trial_type", "name", "category", "calls", "bytes", "flops", "total_s",
                                   "avg_s", "min_s", "max_s", "median_s", "share_of_step"],
                  [[0, "FULL", n, "comm", 10, 1e7 / len(names), 0, 0.1, 0.01, 0.01, 0.01, 0.01, 0.1 / len(names)]
                   for n in names] +
                  [[0, "FULL", "iallreduce_dp", "comm", 10, 2e7, 0, 0.01, 0.001, 0.001, 0.001, 0.001, 0.01],
                   [0, "SYNTHETIC", "allreduce_tp", "comm", 10, 9e9, 0, 9, 1, 1, 1, 1, 0.9]])

HEAD = ["run_index", "run_dir", "status", "exit_code", "repeat", "ranks", "threads_per_rank"]
TAIL = ["full_samples_per_s", "full_std", "synthetic_samples_per_s", "synthetic_std", "io_samples_per_s", "io_std"]

def sweep(root, name, keys, runs, kind=None, planned=None):
    """runs: (status, repeat, ranks, {key: value}, make_run kwargs or None); planned: sweep.json's nruns, the
    runs the sweep planned (a stopped sweep's index holds fewer)."""
    os.makedirs(root + "/runs")
    rows = []
    for i, (status, rep, ranks, kv, kw) in enumerate(runs):
        rd = "runs/%03d_ranks=%d_%s_r%d" % (i, ranks, "_".join("%s=%s" % x for x in kv.items()), rep)
        if kw is not None:
            make_run(root + "/" + rd, ranks, **kw)
        rows.append([i, rd, status, 0 if status == "completed" else 2, rep, ranks, 1] + [kv[k] for k in keys] +
                    [""] * len(TAIL))
    write_csv(root + "/index.csv", HEAD + keys + TAIL, rows)
    sj = {"name": name, "command_line": "vitbench sweep " + name}
    if kind:
        sj["kind"] = kind
    if planned:
        sj["nruns"] = planned
    json.dump(sj, open(root + "/sweep.json", "w"))

