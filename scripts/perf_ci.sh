#!/usr/bin/env bash
# The performance gate: run the quickstart's tiny config RUNS times (default
# 3; scenarios/benchy/perf_ci.yaml: 10 timed SYNTHETIC and FULL trials a
# run), then compare those runs with the baseline kept for this machine by
# `vitbench compare`'s rule: the runs are the unit, so what differs between
# runs is in the interval, and the load each run recorded (load.csv) widens
# it. The gate fails closed: it passes only when every compared metric is
# equivalent (the whole interval inside +-THRESHOLD) or faster.
#
#   ./scripts/perf_ci.sh [--create_baseline [--noisy_baseline]] [compare flags...]
#   ./scripts/perf_ci.sh --help
#
# The baseline is the directory under results/baselines/ whose runs have the
# new runs' fingerprint.machine_key (same CPU model, cores, threads, ranks,
# backend, BLAS kernel, GPU): throughput is only comparable there. It holds
# index.csv and runs/<run>/ (a one-point set of repeats, as a sweep keeps
# them), or, made before repeats, one run's files.
#
# Exit status (the reason is printed last, on stdout as well as stderr, so
# it reaches perf.md):
#   0  pass: every metric equivalent or faster against this machine's
#      baseline (or, with --create_baseline, the runs were kept as the
#      new baseline)
#   1  regression: a metric slower
#   2  bad input, incomparable runs, or the benchmark itself failed
#   3  no baseline for this machine: nothing was compared, and the gate does
#      not pass blind. The nearest baseline and the fingerprint fields that
#      differ are printed (another core or thread count, OPENBLAS_CORETYPE,
#      a clean checkout without results/baselines/ ...). To start one on a
#      quiet machine: --create_baseline, then commit the directory.
#   4  --create_baseline refused: the runs were busy (their trials spread
#      like a busy machine's, or their load.csv says the machine took more
#      than 10% of their thread time), and a baseline made then would let
#      real regressions through. Rerun when the machine is quiet, or on a
#      shared runner that never is, pass --noisy_baseline as well
#   5  inconclusive: nothing slower, but a metric could not be told (too few
#      trials, e.g. a baseline of fewer than 5, an interval across the
#      threshold, load that hides the effect): the gate does not pass
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
# missing), RUNS (runs a side, default 3, at least 2), THRESHOLD (default
# 0.10), OMP_NUM_THREADS (default: all cores, as the quickstart). Flags given
# to the script go to compare last, so they win (--threshold 0.2, --metric FULL).
set -euo pipefail
cd "$(dirname "$0")/.."

CREATE=0
NOISY=0
CMP_FLAGS=()
for a in "$@"; do
  case "$a" in
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    --create_baseline) CREATE=1 ;;
    --noisy_baseline) NOISY=1 ;;
    *) CMP_FLAGS+=("$a") ;;
  esac
done

# every exit says why, on stdout (perf.md) and on stderr (the CI log)
finish() { # code reason
  echo "perf_ci: exit $1: $2"
  echo "perf_ci: exit $1: $2" >&2
  exit "$1"
}
die() { finish 2 "error: $*"; }

[ "$NOISY" = 0 ] || [ "$CREATE" = 1 ] || die "--noisy_baseline only goes with --create_baseline"
VB=${VITBENCH:-build/vitbench}
RESULTS=${RESULTS:-results/perf_ci}
BASELINES=${BASELINES:-results/baselines}
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

export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
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
  "$VB" compare "$base" "$new" --threshold "${THRESHOLD:-0.10}" "${CMP_FLAGS[@]}" | tee "$cmp_out"
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

run_bench
key=$(machine_key "$(some_run_json "$new")")
[ -n "$key" ] || die "$new: no fingerprint.machine_key in run.json (a vitbench without run fingerprints cannot pick a baseline)"

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

if [ -z "$base" ]; then
  if [ "$CREATE" = 0 ]; then
    nearest
    echo "perf_ci: on a quiet machine, ./scripts/perf_ci.sh --create_baseline keeps a set of runs as this machine's baseline"
    finish 3 "no baseline for machine $key under $BASELINES: nothing compared, the gate does not pass"
  fi
  # the busy check compare applies to every side, here to the new runs alone
  set +e
  "$VB" compare "$new" "$new" --output "$log.self.json" >"$cmp_out" 2>&1
  set -e
  rm -f "$log.self.json"
  busy=$(grep '^note: NEW .*ran on a busy machine' "$cmp_out" || true)
  if [ -n "$busy" ] && [ "$NOISY" = 0 ]; then
    echo "$busy"
    finish 4 "not kept as a baseline: the runs were busy (above); rerun when the machine is quiet, or add --noisy_baseline on a shared runner"
  fi
  dest=$BASELINES/tiny_cpu_$key
  keep_into "$new" "$dest" index.csv
  keep_into "$new" "$dest/runs"
  for r in "$new"/runs/*/; do
    r=${r%/}
    keep_into "$r" "$dest/runs/${r##*/}" "${KEEP[@]}"
  done
  # the noise the baseline was made under, stamped in it
  stamp=$(mktemp "$dest/.baseline.json.XXXXXX") || die "cannot write into $dest"
  python3 - "$new" "$stamp" "$NOISY" "$cmp_out" <<'EOF'
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
  if [ -n "$busy" ]; then
    finish 0 "kept these busy runs as the baseline of machine $key with their noise stamped (--noisy_baseline): $dest; later verdicts widen by the load they ran under; commit it"
  fi
  finish 0 "kept these $RUNS runs as the baseline of machine $key: $dest (commit it)"
fi
[ "$CREATE" = 0 ] || die "--create_baseline: machine $key already has a baseline ($base); remove it to replace it"

if [ -f "$base/baseline.json" ] && grep -q '"noisy": true' "$base/baseline.json"; then
  echo "perf_ci: the baseline was recorded on a busy machine (--noisy_baseline, $base/baseline.json): its load widens every interval"
fi
compare
# A regression or an undecided verdict where NEW's runs were busy (compare's
# note) is more likely load than code: one rerun decides.
if { [ "$rc" = 1 ] || [ "$rc" = 5 ]; } && grep -q '^note: NEW .*ran on a busy machine' "$cmp_out"; then
  echo "perf_ci: the new runs were busy: running the benchmark again, once"
  run_bench
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
