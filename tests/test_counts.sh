#!/usr/bin/env bash
# test_counts.sh <vitbench>: the gate's counted work for real: the counting
# binary (x86-64-v3 without FMA, built once into the build directory's
# counts-build/), the tiny config's timed SYNTHETIC steps under callgrind,
# counts.csv kept as a baseline, and two more runs that pass against it
# with their instructions within 0.1% of the first (identical runs agree to
# about 0.01%, whatever else the machine does). Skipped (77) without
# valgrind or on a CPU other than x86-64.
set -u

VB=${1:?usage: test_counts.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${VB_BINARY_DIR:-$(dirname "$(readlink -f "$VB")")}
fail() { echo "test_counts: FAIL: $*" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "test_counts: skipped (no valgrind)"; exit 77; }
[ "$(uname -m)" = x86_64 ] || { echo "test_counts: skipped (not x86-64)"; exit 77; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_counts.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT

. "$SRC/tests/lib/tiny_run.sh"
(cd "$TMP" && tiny_data 16) || fail "datagen"

gate() { # expected-status args...
    local want=$1
    shift
    out=$(cd "$SRC" && VITBENCH="$VB" COUNTS_BUILD="$BIN/counts-build" RESULTS="$TMP/results" \
        BASELINES="$TMP/baselines" DATA="$TMP/data" HISTORY="$TMP/history" \
        bash scripts/perf_ci.sh "$@" 2>&1)
    local rc=$?
    [ "$rc" = "$want" ] || fail "perf_ci.sh $* exited $rc, want $want: $out"
}
instructions() { sed -n 's/^instructions,//p' "$1"; }

gate 0 --counts --create_baseline
base=$TMP/baselines/counts_*/counts.csv
# shellcheck disable=SC2086
[ -f $base ] || fail "no counts.csv kept: $out"
# shellcheck disable=SC2086
first=$(instructions $base)
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 1e6 else 1)' "$first" || fail "instructions a step: $first"
for k in 1 2; do
    gate 0 --counts
    case $out in *"| instructions |"*"| equal |"*"exit 0: pass"*) ;; *) fail "run $k did not pass: $out" ;; esac
    now=$(instructions "$(ls -d "$TMP"/results/counts_* | sort | tail -n 1)/counts.csv")
    python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if abs(b / a - 1) < 1e-3 else 1)' \
        "$first" "$now" || fail "run $k counted $now instructions a step, the first $first: more than 0.1% apart"
done
echo "test_counts: OK"
