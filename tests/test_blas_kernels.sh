#!/usr/bin/env bash
# test_blas_kernels.sh <vitbench>: the rule that picks OpenBLAS's kernels
# (core/prof/blas_kernels.h), end to end, on any x86-64 machine with AVX:
#  - an OpenBLAS that reports Prescott on this CPU (a stand-in named in
#    VB_OPENBLAS_LIBRARY, as OpenBLAS 0.3.21 does on a CPU newer than
#    itself) makes `run` start
#    itself again, once, with OPENBLAS_CORETYPE naming the CPU's widest
#    kernels; run.json records them, the rule "vitbench" and the library's
#    Prescott; nothing is printed about it;
#  - OPENBLAS_CORETYPE set by the caller is kept: run.json records the rule
#    "environment", and one line says what it costs and how to undo it;
#  - the library vitbench was built with: rule "library" with its own
#    choice recorded (or "vitbench" where it does not know this CPU either).
set -u

VB=${1:?usage: test_blas_kernels.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${VB_BINARY_DIR:-$(dirname "$VB")}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OPENBLAS_CORETYPE VB_BLAS_LIBRARY_CORE VB_OPENBLAS_LIBRARY BENCHY_CONFIG_FILE

fail() { echo "test_blas_kernels: FAIL: $*" >&2; exit 1; }
SHIM=$BIN/libblas_corename_shim.so
[ -f "$SHIM" ] || fail "no $SHIM (the blas_corename_shim target)"

# the kernels the rule must pick on this CPU, from the kernel's own flags
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ $flags == *" $1 "* ]]; }
if has avx512f && has avx512cd && has avx512bw && has avx512dq && has avx512vl && has avx2 && has fma; then
    WANT=SkylakeX VEC=avx512
elif has avx2 && has fma; then
    WANT=Haswell VEC=avx2
elif has avx; then
    WANT=Sandybridge VEC=avx
else
    echo "test_blas_kernels: skipped (no AVX on this CPU: Prescott's kernels are its widest)"
    exit 77
fi

. "$SRC/tests/lib/tiny_run.sh"
tiny_scratch vb_blas || fail "scratch run directory"

# fingerprint NAME KEY: run.json's fingerprint[KEY]
fingerprint() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["fingerprint"][sys.argv[2]])' \
        "out/$1/run.json" "$2"
}

# ---- a library that picks Prescott: started again with the widest kernels ----
VB_OPENBLAS_LIBRARY=$SHIM timeout 300 "$VB" run "${COMMON[@]}" --run_name reexec > reexec.txt 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 5 reexec.txt >&2; fail "run under a Prescott-only library exited $rc"; }
[ "$(fingerprint reexec blas_coretype)" = "$WANT" ] || fail "kernels $(fingerprint reexec blas_coretype), want $WANT"
[ "$(fingerprint reexec blas_rule)" = vitbench ] || fail "rule $(fingerprint reexec blas_rule), want vitbench"
[ "$(fingerprint reexec blas_library_core)" = Prescott ] ||
    fail "library core $(fingerprint reexec blas_library_core), want Prescott"
[ "$(fingerprint reexec cpu_vector)" = "$VEC" ] || fail "cpu_vector $(fingerprint reexec cpu_vector), want $VEC"
if grep -q "OPENBLAS_CORETYPE\|Prescott" reexec.txt; then
    cat reexec.txt >&2
    fail "the chosen kernels printed a warning"
fi

# ---- the caller's OPENBLAS_CORETYPE is kept, and its cost said in one line ----
OPENBLAS_CORETYPE=Prescott VB_OPENBLAS_LIBRARY=$SHIM "$VB" run "${COMMON[@]}" --run_name env > env.txt 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 5 env.txt >&2; fail "run with OPENBLAS_CORETYPE=Prescott exited $rc"; }
[ "$(fingerprint env blas_coretype)" = Prescott ] || fail "the caller's OPENBLAS_CORETYPE was not kept"
[ "$(fingerprint env blas_rule)" = environment ] || fail "rule $(fingerprint env blas_rule), want environment"
n=$(grep -c "OPENBLAS_CORETYPE=Prescott was set before vitbench started.*unset it and vitbench picks $WANT" env.txt)
[ "$n" -eq 1 ] || { cat env.txt >&2; fail "want one line on the caller's narrower kernels, got $n"; }

# ---- without the stand-in: the library's own choice is recorded as such ----
"$VB" run "${COMMON[@]}" --run_name plain > plain.txt 2>&1 || { tail -n 5 plain.txt >&2; fail "plain run"; }
rule=$(fingerprint plain blas_rule)
case "$rule" in
library) [ "$(fingerprint plain blas_library_core)" = "$(fingerprint plain blas_coretype)" ] ||
             fail "rule library, but the library core differs from the kernels in use" ;;
vitbench) ;; # this machine's OpenBLAS does not know its CPU either
*) fail "plain run: rule $rule" ;;
esac
echo "test_blas_kernels: PASS (widest kernels here: $WANT)"
