#!/usr/bin/env bash
# test_thread_binding.sh <vitbench>: a rank runs as many OpenMP threads as
# cores it may use, and OMP_PROC_BIND does not hide them:
#  - OMP_PROC_BIND=close OMP_PLACES=cores with 2 threads on a 2-core mask
#    runs 2 threads (libgomp binds the initial thread to its first place as
#    the program starts, so the mask main sees is one core; the team's cores
#    are the places' own);
#  - the same on a 1-core mask (taskset) runs 1, and says it capped them;
#  - no binding on a 1-core mask runs 1, as before.
set -u

VB=${1:?usage: test_thread_binding.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OMP_PROC_BIND OMP_PLACES GOMP_CPU_AFFINITY BENCHY_CONFIG_FILE

fail() { echo "test_thread_binding: FAIL: $*" >&2; exit 1; }
command -v taskset >/dev/null || { echo "test_thread_binding: skipped (no taskset)"; exit 77; }
first=$(taskset -pc $$ | sed 's/.*: //' | cut -d, -f1 | cut -d- -f1)
cpus=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
[ "$cpus" -ge 2 ] || { echo "test_thread_binding: skipped (one CPU in this process's mask)"; exit 77; }

. "$SRC/tests/lib/tiny_run.sh"
tiny_scratch vb_bind || fail "scratch run directory"

# run NAME ENV... -- PREFIX...: a run with those variables under that prefix; prints threads.per_rank
run() {
    local name=$1
    shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env OMP_NUM_THREADS=2 "${envs[@]}" "$@" "$VB" run "${COMMON[@]}" --run_name "$name" > "$name.txt" 2>&1 ||
        { tail -n 5 "$name.txt" >&2; fail "run $name exited $?"; }
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["threads"]["per_rank"])' "out/$name/run.json"
}

n=$(run bound OMP_PROC_BIND=close OMP_PLACES=cores --)
[ "$n" = 2 ] || fail "OMP_PROC_BIND=close OMP_PLACES=cores on $cpus CPUs ran $n thread(s), want 2: $(cat bound.txt)"
grep -q "capped" bound.txt && fail "a bound team on 2 cores was said to be capped: $(cat bound.txt)"

n=$(run bound1 OMP_PROC_BIND=close OMP_PLACES=cores -- taskset -c "$first")
[ "$n" = 1 ] || fail "OMP_PROC_BIND=close on a 1-core mask ran $n thread(s), want 1"
grep -q "OpenMP threads capped at 1" bound1.txt || fail "the cap to 1 core is not said: $(cat bound1.txt)"

n=$(run free1 -- taskset -c "$first")
[ "$n" = 1 ] || fail "no binding on a 1-core mask ran $n thread(s), want 1"
echo "test_thread_binding: PASS"
