#!/usr/bin/env bash
# What recording timeline.csv costs: FULL trials with the timeline off
# (profile_steps 0) against the same trials with every timed FULL step inside
# the window, alternated A B A B ... so a drifting machine hits both alike.
# Prints each side's median FULL samples/s and the median of the per-pair
# ratios (recorded / off; 1.00 = free).
#   bench/dev/timeline_overhead.sh [--pairs N] [--config tiny|small] [config overrides...]
set -euo pipefail
cd "$(dirname "$0")/../.."
PAIRS=5
CONFIG=tiny
while [ $# -gt 0 ]; do
  case $1 in
    --pairs) PAIRS=$2; shift 2 ;;
    --config) CONFIG=$2; shift 2 ;;
    *) break ;;
  esac
done
[ -x build/vitbench ] || ./scripts/build.sh
[ -f "data/$CONFIG/stats/global_stds.npy" ] || { echo "timeline_overhead: no data/$CONFIG: run CONFIG=$CONFIG ./scripts/quickstart.sh first" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# 3 timed FULL trials of 20 steps; the window covers all 60 when on
cat >"$out/benchy.yaml" <<'YAML'
IO: {run_benchmark: false}
synthetic: {run_benchmark: false}
full: {nbatches: 20, ntrials: 3, nwarmup: 1}
YAML
full_rate() { awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i } $1 == "FULL" { print $c["mean_samples_per_s"] }' "$1/summary.csv"; }
run() { # name profile_steps
  ./build/vitbench run --config "$CONFIG" --benchy_config "$out/benchy.yaml" --output_dir "$out" \
    --run_name "$1" --profile_steps "$2" --progress none "${@:3}" >/dev/null 2>&1
  full_rate "$out/$1"
}
: >"$out/pairs"
for i in $(seq 1 "$PAIRS"); do
  a=$(run "off_$i" 0 "$@")
  b=$(run "on_$i" 100000 "$@")
  [ -s "$out/on_$i/timeline.csv" ] || { echo "timeline_overhead: the recorded run wrote no timeline.csv" >&2; exit 1; }
  echo "$a $b" >>"$out/pairs"
  printf 'pair %d: off %.2f  recorded %.2f samples/s  ratio %.3f\n' "$i" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print b / a }')"
done
events=$(($(wc -l <"$out/on_1/timeline.csv") - 1))
python3 - "$out/pairs" "$events" <<'PY'
import statistics, sys
pairs = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
off, on = [p[0] for p in pairs], [p[1] for p in pairs]
ratios = [b / a for a, b in pairs]
print(f"FULL samples/s, median of {len(pairs)}: off {statistics.median(off):.2f}, recorded {statistics.median(on):.2f}; "
      f"ratio recorded/off median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
      f"{sys.argv[2]} events in the window")
PY
