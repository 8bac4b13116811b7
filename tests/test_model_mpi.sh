#!/usr/bin/env bash
# test_model_mpi.sh <vitbench>: tensor and context parallelism inside the model
# under mpirun. Runs the cmocka program test_mpi_model (built next to
# vitbench) with -np 2 (tp 2, cp 2), -np 3 (cp 3, uneven tokens) and -np 4
# (tp 2 x cp 2, tp 4, cp 4), and requires each of those cases to have RUN and
# passed on every rank (a case whose world size does not match skips itself,
# so a skip here would mean the case was never tested).
set -u

VB=${1:?usage: test_model_mpi.sh <path-to-vitbench>}
BIN_DIR=${VB_BINARY_DIR:-$(cd "$(dirname "$VB")" && pwd)}
PROG=$BIN_DIR/test_mpi_model
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

fail() { echo "test_model_mpi: FAIL: $*" >&2; exit 1; }
[ -x "$PROG" ] || fail "not built: $PROG"
command -v mpirun > /dev/null || fail "mpirun not found"

TMP=$(mktemp -d /tmp/vb_model_mpi.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT

# one OpenMP thread per rank and yielding MPI waits: up to 4 ranks share a
# small machine with other jobs
run() {
    local np=$1; shift
    local log=$TMP/np$np.log
    timeout 600 mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
        -x OMP_NUM_THREADS=1 -np "$np" "$PROG" > "$log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
        cat "$log" >&2
        fail "mpirun -np $np exited $rc"
    fi
    for t in "$@"; do
        local ok
        ok=$(grep -c "^\[       OK \] $t\$" "$log")
        [ "$ok" = "$np" ] || { cat "$log" >&2; fail "-np $np: $t passed on $ok of $np ranks"; }
    done
    grep "^rank " "$log" | sort
}

run 2 test_tp2 test_cp2
run 3 test_cp3
run 4 test_tp2_cp2 test_tp4 test_cp4
echo "test_model_mpi: OK"
