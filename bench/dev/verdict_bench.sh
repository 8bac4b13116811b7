#!/usr/bin/env bash
# How the verdict rule (analysis/verdict.h; compare, report, perf_ci.sh)
# behaves on this machine: false verdicts on identical pairs, and how often a
# real slowdown is caught, with and without a background load.
#
#   bench/dev/verdict_bench.sh [--rounds N] [--runs R] [--trials K] [--batches B] [--threshold T]
#                              [--conditions quiet,loaded] [--paired] [--out DIR]
#
# Each round runs four configurations R times each (default 3), interleaved
# run by run in a shuffled order (A, A', S10, S25, then again in another
# order ...), as a sweep's repeats would:
#   A, A'  the tiny config, identical: a pair that must never be faster or slower
#   S10    embed_dim 68 instead of 64: 11% more FLOPs a sample, about a 10% slowdown
#   S25    embed_dim 76: 34% more FLOPs a sample, about a 25% lower throughput
# (real slowdowns of the model itself; the bench measures the ratio each one
# actually gives on quiet runs). Every run is `vitbench run` with K timed
# FULL trials (default 5) of B batches (default 8), so each side of a pair has R runs and
# R x K samples; then `vitbench compare --metric FULL --threshold T` of A
# against A', S10 and S25 (default T 0.05, compare's), and its verdict is
# counted; with --paired, compare --paired (each rep of A and its partner
# ran in the same shuffled round, so the rep is the pair). Conditions: quiet (no load added by the bench: the machine's own,
# which every run records in load.csv and the table reports), loaded (one
# busy loop per CPU running for the whole condition, started and stopped by
# the bench by their process ids).
#
# Output: DIR/results.csv (one line a comparison) and DIR/table.md (the
# table docs/analysis.md carries), printed at the end: per condition and
# kind, the verdicts, the false-verdict rate on identical pairs (faster or
# slower), the detection rate of the slowdowns (slower), the median ratio and
# load share, and the runs a side the 10% case needs at the measured
# run-to-run spread. VITBENCH names the binary (default build/vitbench, built
# if missing): a copy keeps a long bench on one build.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=20
RUNS=3
TRIALS=5
BATCHES=8
THRESHOLD=0.05
CONDITIONS=quiet,loaded
PAIRED=
OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --trials) TRIALS=$2; shift 2 ;;
    --batches) BATCHES=$2; shift 2 ;;
    --threshold) THRESHOLD=$2; shift 2 ;;
    --paired) PAIRED=--paired; shift ;;
    --conditions) CONDITIONS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "verdict_bench: unknown flag $1" >&2; exit 2 ;;
  esac
done
for v in "$ROUNDS" "$RUNS" "$TRIALS" "$BATCHES"; do
  case $v in '' | *[!0-9]*) echo "verdict_bench: --rounds, --runs, --trials and --batches take whole numbers" >&2; exit 2 ;; esac
done
VB=${VITBENCH:-build/vitbench}
[ -x "$VB" ] || { [ -z "${VITBENCH:-}" ] && ./scripts/build.sh; } || { echo "verdict_bench: VITBENCH=$VB is not an executable" >&2; exit 2; }
DATA=data/tiny
[ -f "$DATA/stats/global_stds.npy" ] || { echo "verdict_bench: no $DATA: run ./scripts/quickstart.sh first" >&2; exit 2; }
OUT=${OUT:-results/verdict_bench_$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}

cat >"$OUT/benchy.yaml" <<EOF
# verdict_bench.sh: FULL trials only
global: {report_freq: 1000, exit_after_tests: True, profiler_mode: 'single', output_filename: 'benchy_output.json',
         output_dir: '', use_distributed_barrier: False}
IO: {run_benchmark: False, nbatches: 8, ntrials: 1, nwarmup: 0}
synthetic: {run_benchmark: False, nbatches: 8, ntrials: 1, nwarmup: 0}
full: {run_benchmark: True, nbatches: $BATCHES, ntrials: $TRIALS, nwarmup: 1}
EOF

# the bench's own background load (start_load, stop_load)
source bench/dev/lib/busy_load.sh # (the working directory is the checkout's root)

config_args() { # A | A2 | S10 | S25
  case $1 in
    A | A2) echo "--embed_dim 64" ;;
    S10) echo "--embed_dim 68" ;;
    S25) echo "--embed_dim 76" ;;
  esac
}

# one run of configuration $2 into set directory $1 (runs/ + index.csv)
one_run() {
  local set=$1 cfg=$2 rep=$3 log dir
  log=$(mktemp)
  # shellcheck disable=SC2046
  if ! "$VB" run --config tiny --benchy_config "$OUT/benchy.yaml" --output_dir "$set/runs" --progress none \
      --train_data_path "$DATA/train" --valid_data_path "$DATA/valid" \
      --global_means_path "$DATA/stats/global_means.npy" --global_stds_path "$DATA/stats/global_stds.npy" \
      $(config_args "$cfg") >"$log" 2>&1; then
    echo "verdict_bench: a run of $cfg failed:" >&2
    cat "$log" >&2
    rm -f "$log"
    exit 1
  fi
  dir=$(sed -n 's/^vitbench: run directory //p' "$log" | tail -n 1)
  rm -f "$log"
  echo "$rep,${dir#"$set"/},completed,0,$rep,1" >>"$set/index.csv"
}

echo "condition,round,kind,verdict,ratio,ci_lo,ci_hi,p,runs_base,runs_new,load_base,load_new,load_widening,why" \
  >"$OUT/results.csv"
IFS=, read -r -a conds <<<"$CONDITIONS"
for cond in "${conds[@]}"; do
  case $cond in
    quiet) ;;
    loaded) start_load ;;
    *) echo "verdict_bench: unknown condition $cond (quiet, loaded)" >&2; exit 2 ;;
  esac
  for round in $(seq 1 "$ROUNDS"); do
    rd=$OUT/$cond/round_$round
    for cfg in A A2 S10 S25; do
      mkdir -p "$rd/$cfg/runs"
      echo "run_index,run_dir,status,exit_code,repeat,ranks" >"$rd/$cfg/index.csv"
    done
    for rep in $(seq 0 $((RUNS - 1))); do
      for cfg in $(printf '%s\n' A A2 S10 S25 | shuf); do one_run "$rd/$cfg" "$cfg" "$rep"; done
    done
    for kind in A2 S10 S25; do
      set +e
      "$VB" compare "$rd/A" "$rd/$kind" --metric FULL --threshold "$THRESHOLD" --allow_different embed_dim $PAIRED \
        --output "$rd/$kind.json" >"$rd/$kind.md" 2>&1
      rc=$?
      set -e
      case $rc in 0 | 1 | 5) ;; *) echo "verdict_bench: compare failed ($rc):" >&2; cat "$rd/$kind.md" >&2; exit 1 ;; esac
      python3 - "$rd/$kind.json" "$cond" "$round" "$kind" >>"$OUT/results.csv" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
kind = {"A2": "identical", "S10": "slow10", "S25": "slow25"}[sys.argv[4]]
f = lambda x: "" if x is None else "%.6g" % x
print(",".join([sys.argv[2], sys.argv[3], kind, r["verdict"], f(r["ratio"]), f(r["ci"][0]), f(r["ci"][1]), f(r["p"]),
                str(r["base"]["runs"]), str(r["new"]["runs"]), f(r["base"]["load_share"]), f(r["new"]["load_share"]),
                f(r["load_widening"]), '"%s"' % r.get("why", "").replace('"', "'")]))
EOF
    done
    tail -n 3 "$OUT/results.csv" | cut -d, -f1-8
  done
  stop_load
done

python3 - "$OUT" "$RUNS" "$TRIALS" "$THRESHOLD" "$BATCHES" <<'EOF' | tee "$OUT/table.md"
import csv, math, statistics, sys, glob, os
out, runs, trials, thr, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
print("%d runs a side, %d timed FULL trials of %d batches a run, threshold %g\n" % (runs, trials, batches, thr))
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
print("| condition | pairs | kind | faster | slower | equivalent | inconclusive | false verdicts | caught | "
      "median ratio | median load share |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for cond in dict.fromkeys(r["condition"] for r in rows):
    for kind in ("identical", "slow10", "slow25"):
        rs = [r for r in rows if r["condition"] == cond and r["kind"] == kind]
        if not rs:
            continue
        n = len(rs)
        c = {v: sum(r["verdict"] == v for r in rs) for v in ("faster", "slower", "equivalent", "inconclusive")}
        false = c["faster"] + c["slower"] if kind == "identical" else c["faster"]
        caught = "" if kind == "identical" else "%d/%d (%.0f%%)" % (c["slower"], n, 100 * c["slower"] / n)
        loads = [float(x) for r in rs for x in (r["load_base"], r["load_new"]) if x]
        ratios = [float(r["ratio"]) for r in rs if r["ratio"]]
        print("| %s | %d | %s | %d | %d | %d | %d | %d/%d (%.0f%%) | %s | %.3f | %s |" % (
            cond, n, kind, c["faster"], c["slower"], c["equivalent"], c["inconclusive"], false, n, 100 * false / n,
            caught, statistics.median(ratios) if ratios else float("nan"),
            "%.2f" % statistics.median(loads) if loads else "not recorded"))
# the run-to-run spread behind the 10% case: the sd of log(run median) over
# identical A runs of a round, pooled over the rounds of each condition
print()
for cond in dict.fromkeys(r["condition"] for r in rows):
    devs = []
    for rd in sorted(glob.glob(os.path.join(out, cond, "round_*"))):
        meds = []
        for run in glob.glob(os.path.join(rd, "A", "runs", "*")):
            t = [float(x["samples_per_s"]) for x in csv.DictReader(open(os.path.join(run, "trials.csv")))
                 if x["warmup"] == "0" and x["trial_type"] == "FULL"]
            if t:
                meds.append(math.log(statistics.median(t)))
        if len(meds) > 1:
            m = sum(meds) / len(meds)
            devs += [(x - m) ** 2 for x in meds]
            devs.append(None)
    k = sum(1 for d in devs if d is None)
    ss = sum(d for d in devs if d is not None)
    dof = sum(1 for d in devs if d is not None) - k
    if dof <= 0:
        continue
    sd = math.sqrt(ss / dof)
    # runs a side n that catch a 10% slowdown in 95% of pairs, quiet: its interval lies below 1 - T when
    # log(ratio) + t * se < log(1 - T), se = sd * sqrt(2 / n), log(ratio) ~ N(log 0.9, se): at 95% when
    # se * (t(0.975, 2n - 2) + 1.645) < log((1 - T) / 0.9)
    need = None
    margin = math.log((1 - thr) / 0.9)
    tq = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23}
    for n in range(2, 2000):
        df = 2 * n - 2
        t = tq.get(df, 1.96 + 2.4 / df)
        if margin > 0 and (t + 1.645) * sd * math.sqrt(2 / n) < margin:
            need = n
            break
    print("%s: run-to-run spread (sd of log run median, identical runs) %.3g; a 10%% slowdown at threshold %g "
          "needs about %s runs a side (of %d trials) to be caught in 95%% of quiet pairs" %
          (cond, sd, thr, need if need else "more than 2000", trials))
EOF
echo "verdict_bench: results in $OUT (results.csv, table.md)"
