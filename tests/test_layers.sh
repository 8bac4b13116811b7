#!/usr/bin/env bash
# test_layers.sh <vitbench>: the build's layer rule (cmake/layers.cmake,
# cmake/check_layers.cmake) holds on the source as it is, and fails, naming
# the file and the folder, on an include that points upward:
#   1. the tree as committed passes
#   2. core/ including from bench/ or analysis/, kernels/ including from
#      core/, and a core/ folder including from one above it each fail
#   3. a configure of the planted tree stops with the same line
set -u
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_layers: FAIL: $*" >&2; exit 1; }
command -v cmake >/dev/null || fail "cmake not found"
TMP=$(mktemp -d /tmp/vb_layers.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT

check() { cmake -DVB_SOURCE_DIR="$1" -P "$1/cmake/check_layers.cmake" >"$TMP/out" 2>&1; }

# ---- 1. the committed tree ----
check "$SRC" || fail "the source does not pass its own layer rule: $(grep -m1 '^layers:' "$TMP/out")"

# ---- 2. planted upward includes, each in a fresh copy ----
plant() { # plant FILE INCLUDE EXPECTED-FOLDER
    local t=$TMP/tree
    rm -rf "$t"
    mkdir -p "$t"
    (cd "$SRC" && cp -r CMakeLists.txt cmake core kernels analysis bench "$t/") || fail "copy"
    mkdir -p "$(dirname "$t/$1")"
    printf '#include "%s"\n' "$2" >>"$t/$1"
    if check "$t"; then fail "$1 including $2 passed the layer check"; fi
    grep -q "^layers: $1 includes from $3/, which $(dirname "$1")/ may not use" "$TMP/out" ||
        fail "$1 including $2: the check did not name the file and folder: $(head -n 3 "$TMP/out")"
}
plant core/util/common.c bench/trials.h bench
plant core/run/trainer.c analysis/csv.h analysis
plant core/results/results.h core/config/config.h core/config
plant kernels/cpu/adam.c core/util/common.h core/util
plant kernels/cuda/cuda_common.cuh core/util/common.h core/util
plant core/model/planted.h bench/sweep/sweep.h bench/sweep
plant analysis/report.c bench/commbench/commbench.h bench/commbench

# ---- 3. configure stops ----
if cmake -S "$TMP/tree" -B "$TMP/b" >"$TMP/cfg" 2>&1; then
    fail "configure of a tree with an upward include succeeded"
fi
grep -q '^layers: analysis/report.c includes from bench/commbench/' "$TMP/cfg" ||
    fail "configure did not name the include: $(grep -m1 -i error "$TMP/cfg")"
echo "test_layers: ok"
