#!/usr/bin/env bash
# How a CPU run's step rate holds up when other work shares its cores, and
# what each way of running OpenMP costs on a quiet machine.
#
#   bench/dev/load_bench.sh [--rounds N] [--variants LIST] [--conditions LIST] [--out DIR]
#
# Variants (run alternated in a shuffled order inside every round, so drift
# and the neighbours' load fall on all of them alike):
#   adapt     the default: thread_policy adapt, OMP_NUM_THREADS = all cores
#   fixed     thread_policy fixed, all cores (OpenMP's default spin waits)
#   passive   fixed, OMP_WAIT_POLICY=passive (threads sleep at barriers)
#   spin10k   fixed, GOMP_SPINCOUNT=10000 (spin briefly, then sleep)
#   one       fixed, OMP_NUM_THREADS=1
# Conditions: quiet (nothing added: the machine's own load, which load.csv
# records) and loaded (one busy loop per CPU for the whole condition,
# started and stopped by pid). Every run is `vitbench run --config tiny`
# with 5 timed SYNTHETIC trials of 20 batches (1 warm-up); its figure is
# the median trial throughput. Output: DIR/results.csv (a line a run) and
# DIR/table.md: per condition and variant the median, min and max over the
# rounds, then each variant's loaded median over the quiet median of the
# default (adapt) and, from the quiet rounds, each variant's per-round ratio
# to fixed (median, min, max): the "quiet machine gets no slower" figure.
# VITBENCH names the binary (default build/vitbench, built if missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=5
VARIANTS=adapt,fixed,passive,spin10k,one
CONDITIONS=quiet,loaded
OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --variants) VARIANTS=$2; shift 2 ;;
    --conditions) CONDITIONS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "load_bench: unknown flag $1" >&2; exit 2 ;;
  esac
done
case $ROUNDS in '' | *[!0-9]* | 0) echo "load_bench: --rounds takes a whole number above 0" >&2; exit 2 ;; esac
IFS=, read -r -a variants <<<"$VARIANTS"
IFS=, read -r -a conds <<<"$CONDITIONS"
for v in "${variants[@]}"; do
  case $v in adapt | fixed | passive | spin10k | one) ;; *) echo "load_bench: unknown variant $v" >&2; exit 2 ;; esac
done
for c in "${conds[@]}"; do
  case $c in quiet | loaded) ;; *) echo "load_bench: unknown condition $c (quiet, loaded)" >&2; exit 2 ;; esac
done
VB=${VITBENCH:-build/vitbench}
[ -x "$VB" ] || { [ -z "${VITBENCH:-}" ] && ./scripts/build.sh --quick; } || { echo "load_bench: VITBENCH=$VB is not an executable" >&2; exit 2; }
DATA=data/tiny
[ -f "$DATA/stats/global_stds.npy" ] || { echo "load_bench: no $DATA: run ./scripts/quickstart.sh first" >&2; exit 2; }
OUT=${OUT:-results/load_bench_$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/runs"
unset OMP_WAIT_POLICY GOMP_SPINCOUNT VB_THREAD_POLICY
CORES=$(nproc)

cat >"$OUT/benchy.yaml" <<YAML
# load_bench.sh: SYNTHETIC trials only
global: {report_freq: 1000, exit_after_tests: True, profiler_mode: 'single', output_filename: 'benchy_output.json',
         output_dir: '', use_distributed_barrier: False}
IO: {run_benchmark: False, nbatches: 8, ntrials: 1, nwarmup: 0}
synthetic: {run_benchmark: True, nbatches: 20, ntrials: 5, nwarmup: 1}
full: {run_benchmark: False, nbatches: 8, ntrials: 1, nwarmup: 0}
YAML

# the bench's own background load (start_load, stop_load)
source bench/dev/lib/busy_load.sh # (the working directory is the checkout's root)

variant_env() { # the environment and flags of a variant, as env(1) arguments
  case $1 in
    adapt) echo "OMP_NUM_THREADS=$CORES" ;;
    fixed) echo "OMP_NUM_THREADS=$CORES VB_THREAD_POLICY=fixed" ;;
    passive) echo "OMP_NUM_THREADS=$CORES VB_THREAD_POLICY=fixed OMP_WAIT_POLICY=passive" ;;
    spin10k) echo "OMP_NUM_THREADS=$CORES VB_THREAD_POLICY=fixed GOMP_SPINCOUNT=10000" ;;
    one) echo "OMP_NUM_THREADS=1 VB_THREAD_POLICY=fixed" ;;
  esac
}

echo "condition,round,variant,samples_per_s,threads,probe_wait_share,run_dir" >"$OUT/results.csv"
for cond in "${conds[@]}"; do
  [ "$cond" = loaded ] && start_load "$CORES"
  for round in $(seq 1 "$ROUNDS"); do
    for v in $(printf '%s\n' "${variants[@]}" | shuf); do
      log=$(mktemp)
      # shellcheck disable=SC2046
      if ! env $(variant_env "$v") "$VB" run --config tiny --benchy_config "$OUT/benchy.yaml" \
          --output_dir "$OUT/runs" --progress none --profile_steps 0 \
          --train_data_path "$DATA/train" --valid_data_path "$DATA/valid" \
          --global_means_path "$DATA/stats/global_means.npy" --global_stds_path "$DATA/stats/global_stds.npy" \
          >"$log" 2>&1; then
        echo "load_bench: a $v run failed:" >&2
        cat "$log" >&2
        exit 1
      fi
      dir=$(sed -n 's/^vitbench: run directory //p' "$log" | tail -n 1)
      rm -f "$log"
      python3 - "$dir" "$cond" "$round" "$v" >>"$OUT/results.csv" <<'PY'
import csv, json, os, statistics, sys
d, cond, rnd, v = sys.argv[1:5]
t = [float(r["samples_per_s"]) for r in csv.DictReader(open(os.path.join(d, "trials.csv")))
     if r["trial_type"] == "SYNTHETIC" and r["warmup"] == "0"]
th = json.load(open(os.path.join(d, "run.json")))["threads"]
w = th.get("probe_wait_share")
print("%s,%s,%s,%.3f,%d,%s,%s" % (cond, rnd, v, statistics.median(t), th["per_rank"],
                                  "" if w is None else "%.3f" % w, d))
PY
      tail -n 1 "$OUT/results.csv"
    done
  done
  stop_load
done

python3 - "$OUT" <<'PY' | tee "$OUT/table.md"
import csv, os, statistics, sys
rows = list(csv.DictReader(open(os.path.join(sys.argv[1], "results.csv"))))
med = lambda xs: statistics.median(xs) if xs else float("nan")
conds = list(dict.fromkeys(r["condition"] for r in rows))
variants = list(dict.fromkeys(r["variant"] for r in rows))
rate = {(c, v): [float(r["samples_per_s"]) for r in rows if r["condition"] == c and r["variant"] == v]
        for c in conds for v in variants}
print("| condition | variant | runs | samples/s median | min | max | threads used | probe wait share (median) |")
print("|---|---|---|---|---|---|---|---|")
for c in conds:
    for v in variants:
        rs = [r for r in rows if r["condition"] == c and r["variant"] == v]
        xs = rate[(c, v)]
        ws = [float(r["probe_wait_share"]) for r in rs if r["probe_wait_share"]]
        th = sorted(set(r["threads"] for r in rs))
        print("| %s | %s | %d | %.1f | %.1f | %.1f | %s | %s |" % (c, v, len(xs), med(xs), min(xs), max(xs),
              ",".join(th), "%.3f" % med(ws) if ws else ""))
if "quiet" in conds and "loaded" in conds and rate.get(("quiet", "adapt")):
    base = med(rate[("quiet", "adapt")])
    print("\nloaded median / quiet median of adapt (the default):")
    for v in variants:
        print("- %s: %.3f" % (v, med(rate[("loaded", v)]) / base))
if "quiet" in conds and "fixed" in variants:
    print("\nquiet, per round, each variant / fixed of the same round (median, min, max):")
    for v in variants:
        if v == "fixed":
            continue
        rr = []
        for rnd in sorted(set(r["round"] for r in rows if r["condition"] == "quiet")):
            a = [float(r["samples_per_s"]) for r in rows if r["condition"] == "quiet" and r["round"] == rnd and r["variant"] == v]
            b = [float(r["samples_per_s"]) for r in rows if r["condition"] == "quiet" and r["round"] == rnd and r["variant"] == "fixed"]
            if a and b:
                rr.append(a[0] / b[0])
        if rr:
            print("- %s: %.3f (%.3f .. %.3f over %d rounds)" % (v, med(rr), min(rr), max(rr), len(rr)))
PY
