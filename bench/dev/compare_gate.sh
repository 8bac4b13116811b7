#!/usr/bin/env bash
# How often the regression gate cries wolf, and how often it catches a real
# slowdown, on this machine. In rounds A B C: A and B are identical runs of
# the perf_ci benchmark (false positive: compare calls B a regression of A);
# C is the same run with OpenBLAS's SSE3 kernels (OPENBLAS_CORETYPE=Prescott),
# a real ~30% slower step on an AVX2 / AVX-512 machine (detection: compare
# calls C a regression of A; --allow_different blas_coretype, since the
# kernel choice is part of the machine fingerprint).
#   bench/dev/compare_gate.sh [--pairs N] [--threshold T] [--slow_coretype NAME]
set -euo pipefail
cd "$(dirname "$0")/../.."
PAIRS=10
THRESHOLD=0.10
SLOW=Prescott
while [ $# -gt 0 ]; do
  case $1 in
    --pairs) PAIRS=$2; shift 2 ;;
    --threshold) THRESHOLD=$2; shift 2 ;;
    --slow_coretype) SLOW=$2; shift 2 ;;
    *) echo "compare_gate: unknown flag $1" >&2; exit 2 ;;
  esac
done
VB=build/vitbench
[ -x "$VB" ] || ./scripts/build.sh
[ -f data/tiny/stats/global_stds.npy ] || { echo "compare_gate: no data/tiny: run ./scripts/quickstart.sh first" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
run() { # name [env...]
  local name=$1; shift
  env "$@" "$VB" run --config tiny --benchy_config scenarios/benchy/perf_ci.yaml --output_dir "$out" \
    --run_name "$name" --progress none >/dev/null 2>&1
  echo "$out/$name"
}
verdict() { # base new [flags]: regression | ok, and the FULL ratio
  local rc=0 table
  table=$("$VB" compare "$1" "$2" --threshold "$THRESHOLD" --output "$out/c.json" "${@:3}" 2>&1) || rc=$?
  local ratio
  ratio=$(grep -m1 '| FULL ' <<<"$table" | awk -F'|' '{ gsub(/ /, "", $6); print $6 }')
  case $rc in
    0) echo "pass $ratio" ;;
    1) echo "regression $ratio" ;;
    5) echo "inconclusive $ratio" ;;  # one run a side: never a pass, a regression only far beyond the floor
    *) echo "compare failed ($rc): $table" >&2; exit 1 ;;
  esac
}
fp=0
caught=0
for i in $(seq 1 "$PAIRS"); do
  a=$(run "a$i")
  b=$(run "b$i")
  c=$(run "c$i" OPENBLAS_CORETYPE="$SLOW")
  vb=$(verdict "$a" "$b")
  vc=$(verdict "$a" "$c" --allow_different blas_coretype)
  [ "${vb%% *}" = regression ] && fp=$((fp + 1))
  [ "${vc%% *}" = regression ] && caught=$((caught + 1))
  echo "round $i: identical -> $vb; $SLOW kernels -> $vc"
done
echo "threshold $THRESHOLD: false positives $fp/$PAIRS identical pairs; slowdown caught $caught/$PAIRS pairs"
