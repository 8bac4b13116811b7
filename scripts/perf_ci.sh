#!/usr/bin/env bash
# The performance gate: run the quickstart's tiny config with enough trials to
# test (scenarios/benchy/perf_ci.yaml: 10 timed SYNTHETIC and FULL trials),
# then compare the run with the baseline kept for this machine.
#
#   ./scripts/perf_ci.sh [compare flags...]      e.g. --threshold 0.1
#
# The baseline is the directory under results/baselines/ whose run.json has
# the new run's fingerprint.machine_key (same CPU model, cores, threads,
# ranks, backend, BLAS kernel, GPU): throughput is only comparable there.
# With one, the exit status is `vitbench compare`'s: 0 no regression,
# 1 regression, 2 bad input or incomparable runs. With none, the new run's
# small files become results/baselines/tiny_cpu_<machine_key>/ (commit them)
# and the gate passes.
#
# The gate's threshold is 0.10, not compare's 0.05: the trials of one run
# share that run's machine state, so run-to-run drift is not in their spread.
# On the shared 2-core development machine, 20 pairs of identical runs
# differed by up to 14% in median (quiet ones): 0.05 called 6 of them
# regressions (3 of the 14 pairs compare did not flag as noisy), 0.10 called
# 2, both flagged; a 2x slowdown (1 thread instead of 2) was caught in every
# pair whose baseline was quiet. A regression with NEW flagged noisy is
# rerun once.
#
# Environment: VITBENCH (binary; default build/vitbench, built if missing),
# RESULTS (where the run goes; default results/perf_ci), BASELINES (default
# results/baselines), THRESHOLD (default 0.10), OMP_NUM_THREADS (default: all
# cores, as the quickstart). Flags given to the script go to compare last, so
# they win (--threshold 0.2, --metric FULL).
set -euo pipefail
cd "$(dirname "$0")/.."

VB=${VITBENCH:-build/vitbench}
RESULTS=${RESULTS:-results/perf_ci}
BASELINES=${BASELINES:-results/baselines}
BENCHY=scenarios/benchy/perf_ci.yaml
KEEP=(run.json summary.csv trials.csv iterations.csv ops.csv)

die() { echo "perf_ci: error: $*" >&2; exit 2; }

if [ ! -x "$VB" ]; then
  [ -z "${VITBENCH:-}" ] || die "VITBENCH=$VB is not an executable"
  ./scripts/build.sh
fi

# the quickstart's dataset, made the same way
if [ ! -f data/tiny/stats/global_stds.npy ]; then
  echo "perf_ci: generating the tiny dataset in data/tiny"
  "$VB" datagen --output_dir data/tiny --years 2 --valid_years 1 --channels 4 --img_size 36,72 \
    --samples_per_year 256 --seed 0
fi

export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
log=$(mktemp)
cmp_out=$(mktemp)
trap 'rm -f "$log" "$cmp_out"' EXIT

# runs the benchmark; sets $new to its run directory
run_bench() {
  if ! "$VB" run --config tiny --benchy_config "$BENCHY" --output_dir "$RESULTS" >"$log" 2>&1; then
    cat "$log" >&2
    die "the benchmark run failed"
  fi
  new=$(sed -n 's/^vitbench: run directory //p' "$log" | tail -n 1)
  [ -n "$new" ] && [ -f "$new/run.json" ] || { cat "$log" >&2; die "no run directory in vitbench's output"; }
  grep '^BENCHY::SUMMARY' "$log" || true
}

# compares $base with $new (extra flags: the script's own); sets $rc
compare() {
  echo "perf_ci: comparing $new with baseline $base (machine $key)"
  set +e
  "$VB" compare "$base" "$new" --threshold "${THRESHOLD:-0.10}" "$@" | tee "$cmp_out"
  rc=${PIPESTATUS[0]}
  set -e
}

run_bench

# machine_key of a run.json ("" when it has none)
machine_key() { sed -n 's/.*"machine_key":[[:space:]]*"\([0-9A-Za-z]*\)".*/\1/p' "$1" | head -n 1; }

key=$(machine_key "$new/run.json")
[ -n "$key" ] || die "$new/run.json has no fingerprint.machine_key (a vitbench without run fingerprints cannot pick a baseline)"

# this machine's baseline: tiny_cpu_<key> first, else any with the same key
base=""
for d in "$BASELINES/tiny_cpu_$key" "$BASELINES"/*/; do
  d=${d%/}
  [ -f "$d/run.json" ] || continue
  if [ "$(machine_key "$d/run.json")" = "$key" ]; then base=$d; break; fi
done

if [ -z "$base" ]; then
  dest=$BASELINES/tiny_cpu_$key
  mkdir -p "$dest"
  for f in "${KEEP[@]}"; do
    [ -f "$new/$f" ] && cp "$new/$f" "$dest/"
  done
  echo "perf_ci: no baseline for machine $key: kept this run as $dest (commit it); nothing to compare, gate passes"
  exit 0
fi

compare "$@"
# A regression where NEW's trials spread like a busy machine's (compare's
# note) is more likely load than code: one rerun decides.
if [ "$rc" = 1 ] && grep -q '^note: NEW .*probably busy' "$cmp_out"; then
  echo "perf_ci: NEW's trials were noisy (a busy machine?): rerunning the benchmark once"
  run_bench
  compare "$@"
fi
if [ "$rc" = 1 ] && grep -q '^note: BASE .*probably busy' "$cmp_out"; then
  echo "perf_ci: the baseline's own trials are noisy: replace $base with a run on a quiet machine"
fi
exit "$rc"
