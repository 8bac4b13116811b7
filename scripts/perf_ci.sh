#!/usr/bin/env bash
# The performance gate, in three modes. Each fails closed: it passes only
# when what it measured shows no regression, and says why on every exit.
#
#   ./scripts/perf_ci.sh [--create_baseline [--noisy_baseline]] [compare flags...]   stored baseline
#   ./scripts/perf_ci.sh --refresh_baseline [--noisy_baseline]                        stored, moved
#   ./scripts/perf_ci.sh --counts [--create_baseline] [--counts_threshold T]          counted work
#   ./scripts/perf_ci.sh --base REV [--budget S] [compare flags...]                   base A/B
#   ./scripts/perf_ci.sh --help
#
# Flags follow vitbench's grammar ('-' and '_' alike, --flag=value); a flag
# the gate does not know, or a --metric it cannot compare, is refused with
# the nearest flag before anything runs.
#
# --counts: counted work, one run a side, on any runner. The tiny config's
# timed SYNTHETIC steps (scenarios/benchy/counts.yaml: 4 steps, one
# thread) run under valgrind's callgrind with its cache simulation; only
# those steps are instrumented (core/prof/count_region.h), so the counts
# are the step's work whatever else the machine does (identical runs agree
# within 0.02%). It counts instructions and an estimated cycle count,
# est_cycles = Ir + 10 x (I1mr + D1mr + D1mw) + 100 x (ILmr + DLmr + DLmw)
# (KCachegrind's cycle estimation: an L1 miss that hits the last level costs
# 10, a miss there 100), per step, and the work a run records on every
# backend: samples, op calls, bytes copied to the device and DDP allreduce
# calls and bytes per step (ops.csv, iterations.csv). valgrind has no
# AVX-512 and emulates FMA a hundred times slower than the rest, so the
# counting binary is built apart (COUNTS_BUILD, default build-counts:
# -march=x86-64-v3 -mno-fma, the CPU backend alone) with OpenBLAS's
# Sandybridge kernels (AVX, no FMA): the counts describe the same C code and
# GEMM shapes, not the fastest kernels. The baseline is
# results/baselines/counts_<machine_key>/counts.csv; every count is held to
# it within --counts_threshold (default 0.01, fifty times the run-to-run
# difference): more is a regression (exit 1), less is an improvement the
# baseline must record (exit 6: refresh it with --counts --create_baseline).
#
# --base REV: A/B against the base commit on this runner. REV is built in a
# worktree beside the checkout (RESULTS/base_<sha>/), and base and head run
# interleaved in rounds (A B, then B A, ...) in the same minutes, one thread
# a rank (OMP_NUM_THREADS=1, thread_policy fixed: a busy runner slows one
# thread, not every barrier of a team; THREADS= sets another); the verdict is
# compare --paired's, the round the unit, so drift and a neighbour's load
# that fall on both runs of a round leave it. After 5 rounds, and at rounds
# 8, 12, 18, 27 and 40, it judges (each look at alpha / 6, so that looking
# often does not raise the false verdicts), and stops when decided or when
# the next round would not fit the time budget (--budget S, default 300
# seconds); the first 5 rounds are run whatever the budget, since fewer
# decide nothing and a short budget on a slow runner would otherwise end
# the gate having measured nothing it could judge. Undecided, it says the largest regression the rounds can still
# not rule out ("no regression larger than 14% in 12 rounds"), exit 5.
# The two commits' configs may differ: what changed is shown, not refused
# (a commit that widens the tiny config is a regression to catch).
#
# Stored baseline (no mode flag): the tiny config RUNS times (default 3;
# scenarios/benchy/perf_ci.yaml: 10 timed SYNTHETIC and FULL trials a run),
# compared with the baseline kept for this machine by `vitbench compare`'s
# rule: the runs are the unit, and the load each run recorded (load.csv)
# widens the interval. For a dedicated quiet runner. Runs use
# OMP_NUM_THREADS (default all cores) with thread_policy fixed, so the
# baseline's machine key does not depend on the load.
#
# The baseline is the directory under results/baselines/ whose runs have the
# new runs' fingerprint.machine_key (same CPU model, cores, threads, ranks,
# backend, BLAS kernel, GPU): throughput is only comparable there. It holds
# index.csv and runs/<run>/ (a one-point set of repeats, as a sweep keeps
# them), or, made before repeats, one run's files.
#
# The history: every gate run that measured something adds a row for its
# runs to this machine's history, HISTORY/<machine_key>.csv (default
# results/history; `vitbench history append`: the samples/s the verdict
# compares, or --counts' instructions and est_cycles), and prints where
# that history changes level (`vitbench history`: the change points, their
# commits, confirmed or not), so a regression that came in over several
# commits, each under the threshold, is seen, with the commit that brought
# it. Commit the history beside the baselines. --base adds head's runs
# (their one-thread machine key has a history of its own).
#
# --refresh_baseline moves the stored baseline to this run's runs, and only
# at a confirmed change: the history must show, after the row of the
# baseline's own runs, a change point of a gated samples/s metric that a
# later gate run confirmed (stayed on the new level). One lucky or unlucky
# run cannot move the bar; run the gate again on the new code until the
# history confirms the change, then refresh. Refused otherwise (exit 4).
# --counts --create_baseline replaces the counted-work baseline at once:
# counts are deterministic (identical runs agree within 0.02%, under any
# load), so one run is the new level.
#
# Exit status (the reason is printed last, on stdout as well as stderr, so
# it reaches perf.md):
#   0  pass: every metric equivalent or faster against this machine's
#      baseline (or, with --create_baseline, the runs were kept as the
#      new baseline); --counts: every count within its threshold
#   1  regression: a metric slower (a count higher)
#   2  bad input, incomparable runs, or the benchmark itself failed
#   3  no baseline for this machine: nothing was compared, and the gate does
#      not pass blind. The nearest baseline and the fingerprint fields that
#      differ are printed (another core or thread count, OPENBLAS_CORETYPE,
#      a clean checkout without results/baselines/ ...). To start one on a
#      quiet machine: --create_baseline, then commit the directory.
#   4  --create_baseline or --refresh_baseline refused: the history shows
#      no confirmed change since the baseline (--refresh_baseline), or the
#      runs were busy (their trials spread
#      like a busy machine's, or their load.csv says the machine took more
#      than 10% of their thread time), and a baseline made then would let
#      real regressions through. Rerun when the machine is quiet, or on a
#      shared runner that never is, pass --noisy_baseline as well
#   5  inconclusive: nothing slower, but a metric could not be told (too few
#      trials, e.g. a baseline of fewer than 5, an interval across the
#      threshold, load that hides the effect): the gate does not pass
#   6  --counts: a count fell beyond its threshold: an improvement the
#      baseline does not record; refresh it (--counts --create_baseline)
#
# --noisy_baseline (with --create_baseline): keep the runs although they
# were busy, with the noise stamped in the baseline (baseline.json: the load
# share and trial spread they ran under; load.csv per run). Later verdicts
# widen accordingly: compare widens every interval by the difference between
# the baseline's load and the new runs', so a noisy baseline decides less,
# never more.
#
# The gate's threshold is 0.10, not compare's 0.05: identical runs on the
# shared 2-core development machine differ by several percent in median,
# and the runs' spread has to fit inside +-THRESHOLD with its interval.
# A regression or an inconclusive verdict whose new runs were busy is rerun
# once.
#
# Environment: VITBENCH (binary; default build/vitbench, built if missing),
# RESULTS (where the runs go; default results/perf_ci), BASELINES (default
# results/baselines), DATA (the tiny dataset; default data/tiny, made if
# missing), HISTORY (default results/history), RUNS (runs a side, default 3, at least 2), THRESHOLD (default
# 0.10), OMP_NUM_THREADS (stored baseline; default all cores), THREADS
# (--base; default 1), VITBENCH_BASE (--base: the base commit's binary, built
# elsewhere), COUNTS_BUILD and VITBENCH_COUNTS (--counts: the build
# directory, or a counting binary made elsewhere), VALGRIND (default
# valgrind). Compare flags given to the script go to compare last, so they
# win (--threshold 0.2, --metric FULL).
set -euo pipefail
cd "$(dirname "$0")/.."

CREATE=0
REFRESH=0
NOISY=0
MODE=stored
BASE_REV=
BUDGET=300
COUNTS_T=0.01
CMP_FLAGS=()
METRICS=FULL,SYNTHETIC
# the gate's own flags and the compare flags it passes on (VALUE: takes one)
KNOWN="help create_baseline refresh_baseline noisy_baseline counts base:VALUE budget:VALUE counts_threshold:VALUE metric:VALUE
threshold:VALUE alpha:VALUE allow_different:VALUE run_floor:VALUE"

# every exit says why, on stdout (perf.md) and on stderr (the CI log)
finish() { # code reason
  echo "perf_ci: exit $1: $2"
  echo "perf_ci: exit $1: $2" >&2
  exit "$1"
}
die() { finish 2 "error: $*"; }

# the flag nearest to a misspelt one (difflib's), "" when none is close
nearest_flag() {
  python3 - "$1" $KNOWN <<'PY'
import difflib, sys
names = [k.split(":")[0] for k in sys.argv[2:]]
m = difflib.get_close_matches(sys.argv[1], names, n=1, cutoff=0.6)
print("--" + m[0] if m else "")
PY
}

args=("$@")
i=0
while [ $i -lt ${#args[@]} ]; do
  a=${args[$i]}
  i=$((i + 1))
  case $a in
    --*) ;;
    *) die "unexpected argument '$a' (the gate takes flags only; see --help)" ;;
  esac
  name=${a#--}
  value=
  has_value=0
  case $name in *=*) value=${name#*=}; name=${name%%=*}; has_value=1 ;; esac
  name=${name//-/_}
  spec=
  for k in $KNOWN; do [ "${k%%:*}" = "$name" ] && spec=$k; done
  if [ -z "$spec" ]; then
    near=$(nearest_flag "$name")
    die "unknown flag --$name${near:+ (did you mean $near?)}; see --help"
  fi
  if [ "$spec" != "${spec%:VALUE}" ] && [ $has_value = 0 ]; then
    [ $i -lt ${#args[@]} ] || die "flag --$name: missing value"
    value=${args[$i]}
    i=$((i + 1))
  elif [ "$spec" = "$name" ] && [ $has_value = 1 ]; then
    die "flag --$name takes no value (got '$value')"
  fi
  case $name in
    help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    create_baseline) CREATE=1 ;;
    refresh_baseline) REFRESH=1 ;;
    noisy_baseline) NOISY=1 ;;
    counts) [ "$MODE" = stored ] || die "--counts and --base are two modes: give one"; MODE=counts ;;
    base) [ "$MODE" = stored ] || die "--counts and --base are two modes: give one"; MODE=base; BASE_REV=$value ;;
    budget) BUDGET=$value ;;
    counts_threshold) COUNTS_T=$value ;;
    metric) METRICS=$value; CMP_FLAGS+=("--metric" "$value") ;;
    alpha) ALPHA=$value ;;
    *) CMP_FLAGS+=("--$name" "$value") ;;
  esac
done

# the input, checked before any benchmark runs
case $BUDGET in '' | *[!0-9]* | 0) die "--budget $BUDGET: a whole number of seconds above 0" ;; esac
python3 -c 'import sys; v = float(sys.argv[1]); sys.exit(0 if 0 < v < 1 else 1)' "$COUNTS_T" 2>/dev/null ||
  die "--counts_threshold $COUNTS_T: a fraction in (0, 1)"
IFS=, read -r -a mlist <<<"$METRICS"
[ ${#mlist[@]} -gt 0 ] || die "--metric is empty"
for m in "${mlist[@]}"; do
  case $m in
    FULL | SYNTHETIC | IO | VALIDATION | step_time) ;;
    op:?*) ;;
    *) near=$(python3 -c 'import difflib, sys; m = difflib.get_close_matches(sys.argv[1].upper(), ["FULL", "SYNTHETIC", "IO", "VALIDATION", "STEP_TIME"], 1, 0.6); print(m[0] if m else "")' "$m")
       [ "$near" = STEP_TIME ] && near=step_time
       die "--metric $m: not a metric the gate compares (FULL, SYNTHETIC, IO, VALIDATION, step_time, op:NAME)${near:+; did you mean $near?}" ;;
  esac
done
[ "$NOISY" = 0 ] || [ "$CREATE" = 1 ] || [ "$REFRESH" = 1 ] ||
  die "--noisy_baseline only goes with --create_baseline or --refresh_baseline"
[ "$CREATE" = 0 ] || [ "$REFRESH" = 0 ] || die "--create_baseline and --refresh_baseline: give one"
[ "$MODE" = stored ] || [ "$REFRESH" = 0 ] ||
  die "--refresh_baseline moves the stored baseline (--counts: --create_baseline replaces the counts; --base keeps none)"
[ "$MODE" != base ] || [ "$CREATE" = 0 ] || die "--base compares two commits: it keeps no baseline (--create_baseline)"
[ "$MODE" != counts ] || [ "$NOISY" = 0 ] || die "--noisy_baseline: counted work does not depend on the load"
if [ "$MODE" = base ]; then
  [ -n "$BASE_REV" ] || die "--base: give a commit (a sha, a branch, HEAD~1)"
  BASE_SHA=$(git rev-parse --verify --quiet "$BASE_REV^{commit}") || die "--base $BASE_REV: not a commit of this repository"
fi

VB=${VITBENCH:-build/vitbench}
RESULTS=${RESULTS:-results/perf_ci}
BASELINES=${BASELINES:-results/baselines}
HISTORY=${HISTORY:-results/history}
DATA=${DATA:-data/tiny}
RUNS=${RUNS:-3}
case "$RUNS" in '' | *[!0-9]*) die "RUNS=$RUNS is not a whole number" ;; esac
[ "$RUNS" -ge 2 ] || die "RUNS=$RUNS: at least 2 runs, or the run-to-run spread is unknown and nothing can pass"
BENCHY=scenarios/benchy/perf_ci.yaml
KEEP=(run.json summary.csv trials.csv load.csv iterations.csv ops.csv)

# keep_into SRC DEST FILE...: the FILEs SRC has, copied into the baseline
# directory DEST by vitbench's rule for a results tree (docs/results.md):
# $BASELINES is the root, and DEST below it is created here or must be a real
# directory (a symbolic link planted in its place is refused, never
# followed); each file is copied to a temporary beside it and renamed over
# its name, so a link at the name is replaced rather than written through.
# Called for each level in turn (the baseline, runs/, runs/<run>), so no
# level is a link.
keep_into() {
  local src=$1 dest=$2 f tmp
  shift 2
  mkdir -p "$BASELINES"
  if [ -L "$dest" ] || { [ -e "$dest" ] && [ ! -d "$dest" ]; }; then
    die "$dest is $( [ -L "$dest" ] && echo "a symbolic link (to $(readlink "$dest"))" || echo "not a directory"): baselines are written only into real directories below $BASELINES; remove it"
  fi
  mkdir "$dest" 2>/dev/null || true
  [ -d "$dest" ] && [ ! -L "$dest" ] || die "cannot create $dest"
  for f in "$@"; do
    [ -f "$src/$f" ] || continue
    tmp=$(mktemp "$dest/.$f.XXXXXX") || die "cannot write into $dest"
    # mktemp's 0600 widened to what the umask gives a new file
    { cp "$src/$f" "$tmp" && chmod "$(printf '%04o' $((0666 & ~$(umask))))" "$tmp" && mv -fT "$tmp" "$dest/$f"; } ||
      { rm -f "$tmp"; die "cannot write $dest/$f"; }
  done
}

if [ ! -x "$VB" ]; then
  [ -z "${VITBENCH:-}" ] || die "VITBENCH=$VB is not an executable"
  ./scripts/build.sh
fi

# the quickstart's dataset, made the same way
if [ ! -f "$DATA/stats/global_stds.npy" ]; then
  echo "perf_ci: generating the tiny dataset in $DATA"
  "$VB" datagen --output_dir "$DATA" --years 2 --valid_years 1 --channels 4 --img_size 36,72 \
    --samples_per_year 256 --seed 0
fi

# the stored baseline's team: as given, never changed by the load, so its
# machine key is the same busy or quiet (the other modes set their own)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} VB_THREAD_POLICY=fixed
log=$(mktemp)
cmp_out=$(mktemp)
trap 'rm -f "$log" "$cmp_out"' EXIT

# runs the benchmark RUNS times into a new set directory ($new): runs/<run>/
# and index.csv, the one-point table of repeats compare reads as a sweep
run_bench() {
  mkdir -p "$RESULTS"
  new=$(mktemp -d "$RESULTS/perf_ci_$(date +%Y%m%d-%H%M%S)_XXXX")
  mkdir -p "$new/runs"
  echo "run_index,run_dir,status,exit_code,repeat,ranks" >"$new/index.csv"
  local i dir
  for i in $(seq 0 $((RUNS - 1))); do
    if ! "$VB" run --config tiny --benchy_config "$BENCHY" --output_dir "$new/runs" \
        --train_data_path "$DATA/train" --valid_data_path "$DATA/valid" \
        --global_means_path "$DATA/stats/global_means.npy" --global_stds_path "$DATA/stats/global_stds.npy" \
        >"$log" 2>&1; then
      cat "$log" >&2
      die "the benchmark run $((i + 1)) of $RUNS failed (its output is above on stderr)"
    fi
    dir=$(sed -n 's/^vitbench: run directory //p' "$log" | tail -n 1)
    [ -n "$dir" ] && [ -f "$dir/run.json" ] || { cat "$log" >&2; die "no run directory in vitbench's output"; }
    case "$dir" in "$new"/runs/*) ;; *) die "run directory $dir is not under $new/runs" ;; esac
    echo "$i,${dir#"$new"/},completed,0,$i,1" >>"$new/index.csv"
    echo "perf_ci: run $((i + 1)) of $RUNS: $dir"
    grep '^BENCHY::SUMMARY' "$log" || true
  done
}

# compares $base with $new (extra flags: the script's own); sets $rc
compare() {
  echo "perf_ci: comparing $new ($RUNS runs) with baseline $base (machine $key)"
  set +e
  "$VB" compare "$base" "$new" --threshold "${THRESHOLD:-0.10}" ${ALPHA:+--alpha "$ALPHA"} "${CMP_FLAGS[@]}" | tee "$cmp_out"
  rc=${PIPESTATUS[0]}
  set -e
}

# machine_key of a run.json ("" when it has none)
machine_key() { sed -n 's/.*"machine_key":[[:space:]]*"\([0-9A-Za-z]*\)".*/\1/p' "$1" | head -n 1; }
# a run.json of a baseline or set directory: its own, else its first run's
some_run_json() {
  if [ -f "$1/run.json" ]; then echo "$1/run.json"; return; fi
  local f
  for f in "$1"/runs/*/run.json; do [ -f "$f" ] && { echo "$f"; return; }; done
  echo ""
}

# record_history SET KEY: SET's row in machine KEY's history (HIST_TIME:
# the row's time), then where that history changes level. A row that
# cannot be added fails the gate: a gate run the history silently lost
# would hide the commit that changed it.
HIST_TIME=
record_history() {
  local set=$1 key=$2 out
  mkdir -p "$HISTORY" 2>/dev/null && [ -d "$HISTORY" ] || die "cannot create the history directory $HISTORY"
  if ! out=$("$VB" history append "$HISTORY" --from "$set" 2>&1); then
    echo "$out" >&2
    die "the gate's row could not be added to the history in $HISTORY (${out##*$'\n'})"
  fi
  echo "perf_ci: $out"
  HIST_TIME=$(sed -n 's/^history append: .*: \([0-9T:Z-]*\), commit .*/\1/p' <<<"$out" | tail -n 1)
  if ! out=$("$VB" history "$HISTORY/$key.csv" --no_plots --output_dir "$RESULTS/history_$key" 2>&1); then
    echo "$out" >&2
    die "vitbench history cannot read $HISTORY/$key.csv (${out##*$'\n'})"
  fi
  echo "perf_ci: this machine's history ($HISTORY/$key.csv):"
  echo "$out"
}

# ---- --counts: counted work ----

# one counting run into a new set directory ($new): its run under
# callgrind, callgrind.out, and counts.csv (metric,value: per step)
run_counts() {
  local valgrind=${VALGRIND:-valgrind} cvb=${VITBENCH_COUNTS:-} cb dir steps
  command -v "$valgrind" >/dev/null || die "--counts needs valgrind (Debian's valgrind package; scripts/setup.sh --test installs it)"
  if [ -z "$cvb" ]; then
    cb=${COUNTS_BUILD:-build-counts}
    local march=() cflags=
    if [ "$(uname -m)" = x86_64 ]; then march=(-DVB_MARCH=x86-64-v3); cflags=-mno-fma; fi
    echo "perf_ci: building the counting binary in $cb (${march[*]:-native} $cflags, no CUDA)"
    { cmake -S . -B "$cb" -DCMAKE_BUILD_TYPE=Release -DVB_CUDA=OFF "${march[@]}" -DCMAKE_C_FLAGS="$cflags" &&
      cmake --build "$cb" -j"$(nproc)" --target vitbench; } >"$log" 2>&1 ||
      { tail -n 20 "$log" >&2; die "building the counting binary in $cb failed (above)"; }
    cvb=$cb/vitbench
  fi
  [ -x "$cvb" ] || die "VITBENCH_COUNTS=$cvb is not an executable"
  mkdir -p "$RESULTS"
  new=$(mktemp -d "$RESULTS/counts_$(date +%Y%m%d-%H%M%S)_XXXX")
  mkdir -p "$new/runs"
  echo "perf_ci: counting the tiny config's timed SYNTHETIC steps under callgrind (about a minute)"
  if ! OMP_NUM_THREADS=1 VB_THREAD_POLICY=fixed OPENBLAS_CORETYPE=Sandybridge \
      "$valgrind" --tool=callgrind --cache-sim=yes --instr-atstart=no --trace-children=yes \
      --trace-children-skip="*orted*,*prte*" --callgrind-out-file="$new/callgrind.out" \
      "$cvb" run --config tiny --benchy_config scenarios/benchy/counts.yaml --output_dir "$new/runs" --progress none \
      --train_data_path "$DATA/train" --valid_data_path "$DATA/valid" \
      --global_means_path "$DATA/stats/global_means.npy" --global_stds_path "$DATA/stats/global_stds.npy" \
      >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "the counting run failed (its output is above on stderr)"
  fi
  dir=$(sed -n 's/^vitbench: run directory //p' "$log" | tail -n 1)
  [ -n "$dir" ] && [ -f "$dir/run.json" ] || { cat "$log" >&2; die "no run directory in the counting run's output"; }
  python3 - "$new/callgrind.out" "$dir" "$new/counts.csv" <<'PY' || die "the counting run measured nothing (above)"
import csv, os, sys
cg, run, out = sys.argv[1:4]
events = totals = None
for line in open(cg):
    if line.startswith("events:"):
        events = line.split()[1:]
    elif line.startswith("totals:"):
        totals = [int(x) for x in line.split()[1:]]
if not events or not totals:
    sys.exit("perf_ci: %s has no events or totals line" % cg)
c = dict(zip(events, totals + [0] * (len(events) - len(totals))))
steps = [r for r in csv.DictReader(open(os.path.join(run, "iterations.csv")))
         if r["trial_type"] == "SYNTHETIC" and r["warmup"] == "0" and r["rank"] == "0"]
n = len(steps)
if n == 0 or c.get("Ir", 0) == 0:
    sys.exit("perf_ci: %d timed steps and %d instructions counted: nothing measured" % (n, c.get("Ir", 0)))
est = c["Ir"] + 10 * (c["I1mr"] + c["D1mr"] + c["D1mw"]) + 100 * (c["ILmr"] + c["DLmr"] + c["DLmw"])
trials = [r for r in csv.DictReader(open(os.path.join(run, "trials.csv")))
          if r["trial_type"] == "SYNTHETIC" and r["warmup"] == "0" and r["rank"] == "0"]
ops = [r for r in csv.DictReader(open(os.path.join(run, "ops.csv"))) if r["trial_type"] == "SYNTHETIC"]
rows = [("instructions", c["Ir"] / n), ("est_cycles", est / n),
        ("l1_misses", (c["I1mr"] + c["D1mr"] + c["D1mw"]) / n), ("ll_misses", (c["ILmr"] + c["DLmr"] + c["DLmw"]) / n),
        ("samples", float(trials[0]["global_batch"]) if trials else 0),
        ("op_calls", sum(float(r["calls"]) for r in ops) / n),
        ("h2d_bytes", sum(float(r["bytes"]) for r in ops if r["name"] == "h2d") / n),
        ("allreduce_calls", sum(float(r["allreduce_calls"]) for r in steps) / n),
        ("allreduce_bytes", sum(float(r["allreduce_bytes"]) for r in steps) / n)]
with open(out, "w") as f:
    f.write("metric,value\n")
    for k, v in rows:
        f.write("%s,%.6g\n" % (k, v) if k not in ("instructions", "est_cycles") else "%s,%.0f\n" % (k, v))
print("perf_ci: %d steps counted: %.4g instructions, %.4g est_cycles a step" % (n, c["Ir"] / n, est / n))
PY
  cp "$dir/run.json" "$new/run.json"
}

counts_mode() {
  run_counts
  key=$(machine_key "$new/run.json")
  [ -n "$key" ] || die "$new: no fingerprint.machine_key in run.json"
  record_history "$new" "$key"
  local base=$BASELINES/counts_$key
  if [ "$CREATE" = 1 ]; then
    keep_into "$new" "$base" counts.csv run.json
    finish 0 "kept these counts as the counted-work baseline of machine $key: $base (commit it)"
  fi
  if [ ! -f "$base/counts.csv" ]; then
    echo "perf_ci: ./scripts/perf_ci.sh --counts --create_baseline keeps this run's counts as this machine's baseline"
    finish 3 "no counted-work baseline for machine $key under $BASELINES (counts_$key/counts.csv): nothing compared, the gate does not pass"
  fi
  set +e
  python3 - "$base/counts.csv" "$new/counts.csv" "$COUNTS_T" <<'PY'
import csv, sys
base = {r["metric"]: float(r["value"]) for r in csv.DictReader(open(sys.argv[1]))}
new = {r["metric"]: float(r["value"]) for r in csv.DictReader(open(sys.argv[2]))}
t = float(sys.argv[3])
print("\n| count (per step) | baseline | new | ratio | verdict |\n|---|---|---|---|---|")
worse, better = [], []
for k, b in base.items():
    if k not in new:
        print("| %s | %.6g | - | - | not counted now |" % (k, b))
        worse.append(k)
        continue
    v = new[k]
    r = v / b if b else (1.0 if v == 0 else float("inf"))
    verdict = "equal" if abs(r - 1) <= t else ("higher: a regression" if r > 1 else "lower: refresh the baseline")
    (worse if r > 1 + t else better if r < 1 - t else []).append(k)
    print("| %s | %.6g | %.6g | %.4f | %s |" % (k, b, v, r, verdict))
print()
if worse:
    print("perf_ci: counts above the baseline by more than %g%%: %s" % (100 * t, ", ".join(worse)))
    sys.exit(1)
if better:
    print("perf_ci: counts below the baseline by more than %g%%: %s" % (100 * t, ", ".join(better)))
    sys.exit(6)
PY
  local rc=$?
  set -e
  case $rc in
    0) finish 0 "pass: every count within ${COUNTS_T} of the counted-work baseline ($base)" ;;
    1) finish 1 "regression: the step does more work than the baseline (table above)" ;;
    6) finish 6 "improvement beyond ${COUNTS_T} that the baseline does not record: refresh it with --counts --create_baseline and commit it" ;;
    *) die "comparing the counts failed" ;;
  esac
}

# ---- --base REV: A/B against the base commit on this runner ----

# the base commit's vitbench, built once in RESULTS/base_<sha>/
build_base() {
  local wt=$RESULTS/base_${BASE_SHA:0:12}
  base_vb=${VITBENCH_BASE:-$wt/build/vitbench}
  [ -x "$base_vb" ] && return 0
  [ -z "${VITBENCH_BASE:-}" ] || die "VITBENCH_BASE=$VITBENCH_BASE is not an executable"
  mkdir -p "$RESULTS"
  if [ ! -d "$wt/src" ]; then
    git worktree add --detach "$wt/src" "$BASE_SHA" >"$log" 2>&1 || { cat "$log" >&2; die "cannot check out $BASE_REV in $wt/src"; }
  fi
  echo "perf_ci: building the base commit ${BASE_SHA:0:12} in $wt"
  { cmake -S "$wt/src" -B "$wt/build" -DCMAKE_BUILD_TYPE=Release -DVB_CUDA=OFF &&
    cmake --build "$wt/build" -j"$(nproc)" --target vitbench; } >"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; die "building the base commit $BASE_REV failed (above)"; }
}

# one run of binary $1 into set $2 as round $3
ab_run() {
  local vb=$1 set=$2 round=$3 dir
  if ! OMP_NUM_THREADS=${THREADS:-1} VB_THREAD_POLICY=fixed "$vb" run --config tiny --benchy_config "$BENCHY" \
      --output_dir "$set/runs" --train_data_path "$DATA/train" --valid_data_path "$DATA/valid" \
      --global_means_path "$DATA/stats/global_means.npy" --global_stds_path "$DATA/stats/global_stds.npy" \
      --progress none >"$log" 2>&1; then
    cat "$log" >&2
    die "a run of $vb failed in round $((round + 1)) (its output is above on stderr)"
  fi
  dir=$(sed -n 's/^vitbench: run directory //p' "$log" | tail -n 1)
  [ -n "$dir" ] && [ -f "$dir/run.json" ] || { cat "$log" >&2; die "no run directory in the output of $vb"; }
  echo "$round,${dir#"$set"/},completed,0,$round,1" >>"$set/index.csv"
}

base_mode() {
  build_base
  local ab=$RESULTS/ab_${BASE_SHA:0:12}_$(date +%Y%m%d-%H%M%S) start now round=0 looks=(5 8 12 18 27 40) look=0 rc=5
  local alpha_look allow
  alpha_look=$(python3 -c 'import sys; print("%.6g" % (float(sys.argv[1]) / 6))' "${ALPHA:-0.05}")
  mkdir -p "$ab/base/runs" "$ab/head/runs"
  for s in base head; do echo "run_index,run_dir,status,exit_code,repeat,ranks" >"$ab/$s/index.csv"; done
  echo "perf_ci: base ${BASE_SHA:0:12} ($base_vb) against head ($VB), ${THREADS:-1} thread a run, rounds until decided or ${BUDGET} s"
  start=$(date +%s)
  while :; do
    # A B in even rounds, B A in odd: neither side always runs first
    if [ $((round % 2)) = 0 ]; then ab_run "$base_vb" "$ab/base" $round; ab_run "$VB" "$ab/head" $round
    else ab_run "$VB" "$ab/head" $round; ab_run "$base_vb" "$ab/base" $round; fi
    round=$((round + 1))
    now=$(date +%s)
    if [ $round = 1 ]; then
      # what differs between the commits' configs is shown and allowed, not refused
      allow=$(python3 - "$ab/base" "$ab/head" <<'PY'
import glob, json, os, sys
cfg = lambda d: json.load(open(glob.glob(os.path.join(d, "runs", "*", "run.json"))[0])).get("config", {})
a, b = cfg(sys.argv[1]), cfg(sys.argv[2])
print(",".join(sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and k not in ("run_name", "output_dir"))))
PY
)
      [ -z "$allow" ] || echo "perf_ci: the two commits' configs differ in: $allow (shown, compared anyway)"
    fi
    if [ $look -lt ${#looks[@]} ] && [ $round -ge "${looks[$look]}" ]; then
      look=$((look + 1))
      set +e
      "$VB" compare "$ab/base" "$ab/head" --paired --threshold "${THRESHOLD:-0.10}" --alpha "$alpha_look" \
        ${allow:+--allow_different "$allow"} "${CMP_FLAGS[@]}" --output "$ab/compare.json" >"$cmp_out" 2>&1
      rc=$?
      set -e
      case $rc in 0 | 1) break ;; 5) ;; *) cat "$cmp_out"; finish "$rc" "compare could not compare base and head (exit $rc, above)" ;; esac
    fi
    # stop after the last look, or from the first look on when the next round
    # would not fit the budget
    if [ $look -ge ${#looks[@]} ] || { [ $look -gt 0 ] && [ $((now - start + (now - start) / round)) -gt "$BUDGET" ]; }; then
      [ $look -gt 0 ] && [ "${looks[$((look - 1))]}" = $round ] && break
      set +e
      "$VB" compare "$ab/base" "$ab/head" --paired --threshold "${THRESHOLD:-0.10}" --alpha "$alpha_look" \
        ${allow:+--allow_different "$allow"} "${CMP_FLAGS[@]}" --output "$ab/compare.json" >"$cmp_out" 2>&1
      rc=$?
      set -e
      break
    fi
  done
  cat "$cmp_out"
  echo "perf_ci: $round rounds in $(( $(date +%s) - start )) s ($ab)"
  local hkey
  hkey=$(machine_key "$(some_run_json "$ab/head")")
  [ -n "$hkey" ] || die "$ab/head: no fingerprint.machine_key in run.json"
  record_history "$ab/head" "$hkey"
  case $rc in
    0) finish 0 "pass: head is equivalent to or faster than base ${BASE_SHA:0:12} in $round paired rounds" ;;
    1) finish 1 "regression: head is slower than base ${BASE_SHA:0:12} in $round paired rounds (table above)" ;;
    5) local floor
       floor=$(python3 - "$ab/compare.json" <<'PY'
import json, sys
rs = json.load(open(sys.argv[1]))["results"]
out = []
for r in rs:
    lo, hi = (r.get("ci") or [None, None])[:2]
    if lo is None:
        continue
    worst = (1 - lo) if r.get("higher_is_better", True) else (hi - 1)
    out.append("%s %.3g%%" % (r["metric"], 100 * max(worst, 0)))
print(", ".join(out))
PY
)
       finish 5 "inconclusive: no regression larger than ${floor:-?} in $round rounds could be ruled out within the ${BUDGET} s budget (table above); the gate does not pass" ;;
    *) finish "$rc" "compare could not compare base and head (exit $rc)" ;;
  esac
}

[ "$MODE" != counts ] || counts_mode
[ "$MODE" != base ] || base_mode

run_bench
key=$(machine_key "$(some_run_json "$new")")
[ -n "$key" ] || die "$new: no fingerprint.machine_key in run.json (a vitbench without run fingerprints cannot pick a baseline)"
record_history "$new" "$key"

# this machine's baseline: tiny_cpu_<key> first, else any with the same key
base=""
for d in "$BASELINES/tiny_cpu_$key" "$BASELINES"/*/; do
  d=${d%/}
  rj=$(some_run_json "$d")
  [ -n "$rj" ] || continue
  if [ "$(machine_key "$rj")" = "$key" ]; then base=$d; break; fi
done

# the baseline whose fingerprint differs from the new runs' in the fewest
# fields, and those fields: what changed the machine key
nearest() {
  python3 - "$(some_run_json "$new")" "$BASELINES" <<'EOF'
import glob, json, os, sys
FIELDS = ["cpu_model", "affinity_cores", "omp_threads", "ranks", "backend", "blas_coretype", "gpu_name"]
def fp(path):
    try:
        return json.load(open(path)).get("fingerprint") or {}
    except (OSError, ValueError):
        return None
new = fp(sys.argv[1]) or {}
best = None
for d in sorted(glob.glob(os.path.join(sys.argv[2], "*"))):
    runs = [os.path.join(d, "run.json")] + sorted(glob.glob(os.path.join(d, "runs", "*", "run.json")))
    rj = next((r for r in runs if os.path.isfile(r)), None)
    old = fp(rj) if rj else None
    if old is None:
        continue
    diff = [f for f in FIELDS if old.get(f) != new.get(f)]
    if best is None or len(diff) < len(best[1]):
        best = (d, diff, old)
if best is None:
    print("perf_ci: no baselines at all under %s" % sys.argv[2])
else:
    d, diff, old = best
    what = "; ".join("%s: %r here, %r there" % (f, new.get(f), old.get(f)) for f in diff) or \
        "no fingerprint field (another vitbench version's machine key?)"
    print("perf_ci: nearest baseline %s differs in %s" % (d, what))
EOF
}

# busy_check: $busy, compare's note when the new runs ran on a busy machine
# (the check compare applies to every side, here to the new runs alone);
# without --noisy_baseline such runs are not kept
busy_check() {
  set +e
  "$VB" compare "$new" "$new" --output "$log.self.json" >"$cmp_out" 2>&1
  set -e
  rm -f "$log.self.json"
  busy=$(grep '^note: NEW .*ran on a busy machine' "$cmp_out" || true)
  if [ -n "$busy" ] && [ "$NOISY" = 0 ]; then
    echo "$busy"
    finish 4 "not kept as a baseline: the runs were busy (above); rerun when the machine is quiet, or add --noisy_baseline on a shared runner"
  fi
}

# store_baseline DEST: the new runs' files kept in DEST, with the noise they
# ran under and their history row's time stamped in DEST/baseline.json
store_baseline() {
  local dest=$1 r stamp
  keep_into "$new" "$dest" index.csv
  keep_into "$new" "$dest/runs"
  for r in "$new"/runs/*/; do
    r=${r%/}
    keep_into "$r" "$dest/runs/${r##*/}" "${KEEP[@]}"
  done
  stamp=$(mktemp "$dest/.baseline.json.XXXXXX") || die "cannot write into $dest"
  python3 - "$new" "$stamp" "$NOISY" "$cmp_out" "$HIST_TIME" <<'EOF'
import csv, glob, json, os, sys, time
new, out, noisy, notes = sys.argv[1], sys.argv[2], sys.argv[3] == "1", open(sys.argv[4]).read()
shares, spreads = [], []
for run in sorted(glob.glob(os.path.join(new, "runs", "*"))):
    try:
        rows = list(csv.DictReader(open(os.path.join(run, "load.csv"))))
    except OSError:
        rows = []
    for r in rows:
        if r.get("warmup") == "0" and r.get("trial_type") in ("SYNTHETIC", "FULL") and r.get("cpu_wait_share"):
            shares.append(float(r["cpu_wait_share"]) + float(r.get("steal_share") or 0))
    try:
        t = [float(r["samples_per_s"]) for r in csv.DictReader(open(os.path.join(run, "trials.csv")))
             if r["warmup"] == "0" and r["trial_type"] == "FULL" and r.get("rank", "0") == "0"]
    except OSError:
        t = []
    if len(t) > 1 and min(t) > 0:
        spreads.append(max(t) / min(t))
json.dump({"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": len(spreads),
           "history_time": sys.argv[5],
           "noisy": noisy and "ran on a busy machine" in notes,
           "recorded_with": "--noisy_baseline" if noisy else "a quiet machine",
           "mean_load_share": sum(shares) / len(shares) if shares else None,
           "max_trial_spread": max(spreads) if spreads else None,
           "busy_notes": [l for l in notes.splitlines() if "busy machine" in l]},
          open(out, "w"), indent=1)
EOF
  { chmod "$(printf '%04o' $((0666 & ~$(umask))))" "$stamp" && mv -fT "$stamp" "$dest/baseline.json"; } ||
    { rm -f "$stamp"; die "cannot write $dest/baseline.json"; }
  [ -z "$busy" ] || echo "$busy"
}

if [ -z "$base" ]; then
  [ "$REFRESH" = 0 ] || die "--refresh_baseline: machine $key has no baseline under $BASELINES to move; --create_baseline makes one"
  if [ "$CREATE" = 0 ]; then
    nearest
    echo "perf_ci: on a quiet machine, ./scripts/perf_ci.sh --create_baseline keeps a set of runs as this machine's baseline"
    finish 3 "no baseline for machine $key under $BASELINES: nothing compared, the gate does not pass"
  fi
  busy_check
  dest=$BASELINES/tiny_cpu_$key
  store_baseline "$dest"
  if [ -n "$busy" ]; then
    finish 0 "kept these busy runs as the baseline of machine $key with their noise stamped (--noisy_baseline): $dest; later verdicts widen by the load they ran under; commit it"
  fi
  finish 0 "kept these $RUNS runs as the baseline of machine $key: $dest (commit it)"
fi
[ "$CREATE" = 0 ] || die "--create_baseline: machine $key already has a baseline ($base); --refresh_baseline moves it once the history confirms a change"

# --refresh_baseline: only at a change point of a gated samples/s metric,
# after the baseline's own row, that a later gate run confirmed
if [ "$REFRESH" = 1 ]; then
  hmetrics=
  for m in "${mlist[@]}"; do
    case $m in FULL | SYNTHETIC | IO) hmetrics=${hmetrics:+$hmetrics,}${m}_samples_per_s ;; esac
  done
  [ -n "$hmetrics" ] || die "--refresh_baseline: the history follows FULL, SYNTHETIC and IO samples/s, and --metric $METRICS names none"
  since=$(python3 -c 'import json, sys
try:
    print(json.load(open(sys.argv[1])).get("history_time") or "")
except (OSError, ValueError):
    print("")' "$base/baseline.json")
  set +e
  "$VB" history "$HISTORY/$key.csv" --json --metric "$hmetrics" --no_plots --output_dir "$RESULTS/history_$key" \
    >"$log.changes.json" 2>"$cmp_out"
  hrc=$?
  set -e
  [ "$hrc" = 0 ] || { cat "$cmp_out" >&2; die "vitbench history cannot read $HISTORY/$key.csv (above)"; }
  set +e
  why=$(python3 - "$log.changes.json" "$since" <<'EOF'
import json, sys
changes, since = json.load(open(sys.argv[1])), sys.argv[2]
later = [c for c in changes if c["time"] > since]
ok = [c for c in later if c["confirmed"]]
if ok:
    c = ok[-1]
    print("the history confirms a change of %s at commit %s (%s, %+.1f%%, p %.2g, %d later points on the new level)"
          % (c["metric"], c["commit"], c["direction"], c["change_percent"], c["pvalue"], c["points_on_level"]))
    sys.exit(0)
what = "no change point" if not later else "%d change point%s not yet confirmed (%s)" % (
    len(later), "" if len(later) == 1 else "s", ", ".join("%s at %s" % (c["metric"], c["commit"]) for c in later))
print("the history shows %s after the baseline's own row (%s)" % (what, since or "its time unrecorded"))
sys.exit(1)
EOF
)
  hrc=$?
  set -e
  rm -f "$log.changes.json"
  [ "$hrc" = 0 ] || finish 4 "not refreshed: $why; run the gate on this code until a later run confirms the change, then refresh"
  echo "perf_ci: $why"
  busy_check
  fresh=$(mktemp -d "$BASELINES/.refresh_${key}_XXXX") || die "cannot write into $BASELINES"
  rmdir "$fresh"
  store_baseline "$fresh"
  old=$(mktemp -d "$BASELINES/.replaced_${key}_XXXX") || die "cannot write into $BASELINES"
  { mv -T "$base" "$old/baseline" && mv -T "$fresh" "$base"; } || die "cannot move $fresh to $base (the old baseline is in $old)"
  rm -rf "$old"
  finish 0 "moved the baseline of machine $key to these $RUNS runs ($why): $base (commit it)"
fi


if [ -f "$base/baseline.json" ] && grep -q '"noisy": true' "$base/baseline.json"; then
  echo "perf_ci: the baseline was recorded on a busy machine (--noisy_baseline, $base/baseline.json): its load widens every interval"
fi
compare
# A regression or an undecided verdict where NEW's runs were busy (compare's
# note) is more likely load than code: one rerun decides.
if { [ "$rc" = 1 ] || [ "$rc" = 5 ]; } && grep -q '^note: NEW .*ran on a busy machine' "$cmp_out"; then
  echo "perf_ci: the new runs were busy: running the benchmark again, once"
  run_bench
  record_history "$new" "$key"
  compare
fi
if [ "$rc" != 0 ] && grep -q '^note: BASE .*ran on a busy machine' "$cmp_out"; then
  echo "perf_ci: the baseline's own runs were busy: replace $base with runs on a quiet machine"
fi
case "$rc" in
  0) finish 0 "pass: every metric equivalent or faster than the baseline" ;;
  1) finish 1 "regression: a metric is slower than the baseline (table above)" ;;
  5) finish 5 "inconclusive: nothing slower, but a metric could not be told (table above); the gate does not pass" ;;
  *) finish "$rc" "compare could not compare the runs with the baseline (exit $rc, above)" ;;
esac
