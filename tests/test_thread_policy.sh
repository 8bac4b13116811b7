#!/usr/bin/env bash
# test_thread_policy.sh <vitbench>: a CPU run gives way to other work on its
# cores (core/run/threads.h):
#  - under one busy loop per CPU (started here, stopped at exit), a run
#    asked for 2 threads with thread_policy adapt runs 1, says so in one
#    line and records the probe in run.json (threads, fingerprint);
#  - thread_policy fixed keeps 2 under the same load;
#  - a bad policy, from a flag or from VB_THREAD_POLICY, exits 2 naming it.
# Only the loaded case is asserted: a quiet machine cannot be promised here.
set -u

VB=${1:?usage: test_thread_policy.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OMP_PROC_BIND OMP_PLACES GOMP_CPU_AFFINITY BENCHY_CONFIG_FILE VB_THREAD_POLICY

fail() { echo "test_thread_policy: FAIL: $*" >&2; exit 1; }
[ -r /proc/thread-self/schedstat ] || { echo "test_thread_policy: skipped (no schedstat in this kernel)"; exit 77; }
cpus=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
[ "$cpus" -ge 2 ] || { echo "test_thread_policy: skipped (one CPU in this process's mask)"; exit 77; }

. "$SRC/tests/lib/tiny_run.sh"
tiny_scratch vb_threads || fail "scratch run directory"

LOADERS=()
stop_load() { local p; for p in "${LOADERS[@]}"; do kill "$p" 2>/dev/null; done; LOADERS=(); }
trap 'stop_load; rm -rf "$TMP"' EXIT

# field RUN PYEXPR: a value of out/RUN/run.json (d is the parsed file)
field() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "out/$1/run.json" "$2"; }

# ---- bad input: exit 2, one line naming where the value came from ----
OMP_NUM_THREADS=2 "$VB" run "${COMMON[@]}" --run_name bad --thread_policy sometimes > bad.txt 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--thread_policy sometimes exited $rc, want 2: $(cat bad.txt)"
grep -q "thread_policy = 'sometimes' must be adapt or fixed" bad.txt || fail "bad flag: $(cat bad.txt)"
VB_THREAD_POLICY=never OMP_NUM_THREADS=2 "$VB" run "${COMMON[@]}" --run_name bad_env > bad_env.txt 2>&1
rc=$?
[ $rc -eq 2 ] || fail "VB_THREAD_POLICY=never exited $rc, want 2: $(cat bad_env.txt)"
grep -q "VB_THREAD_POLICY" bad_env.txt || fail "a bad VB_THREAD_POLICY is not named: $(cat bad_env.txt)"
[ "$(wc -l < bad_env.txt)" -eq 1 ] || fail "a bad VB_THREAD_POLICY printed more than one line: $(cat bad_env.txt)"
[ ! -e out/bad ] && [ ! -e out/bad_env ] || fail "a refused policy left a run directory"

# ---- one busy loop per CPU: the probe sees about half the team's time lost ----
for _ in $(seq "$cpus"); do (while :; do :; done) & LOADERS+=($!); done
sleep 0.2

OMP_NUM_THREADS=2 "$VB" run "${COMMON[@]}" --run_name loaded > loaded.txt 2>&1 ||
    { tail -n 5 loaded.txt >&2; fail "the loaded run failed"; }
[ "$(field loaded 'd["threads"]["chosen_by"]')" = probe ] || fail "loaded run not chosen by its probe: $(field loaded 'd["threads"]')"
[ "$(field loaded 'd["threads"]["team"]')" = 2 ] || fail "team is not the 2 requested: $(field loaded 'd["threads"]')"
[ "$(field loaded 'd["threads"]["per_rank"]')" = 1 ] ||
    fail "under one busy loop per CPU the run kept $(field loaded 'd["threads"]["per_rank"]') threads: $(field loaded 'd["threads"]')"
[ "$(field loaded 'd["fingerprint"]["omp_threads"]')" = 1 ] || fail "the fingerprint does not carry the threads used"
[ "$(field loaded '0.15 < d["threads"]["probe_wait_share"] < 1')" = True ] ||
    fail "probe share: $(field loaded 'd["threads"]["probe_wait_share"]')"
[ "$(grep -c "1 OpenMP thread instead of 2 (thread_policy adapt)" loaded.txt)" = 1 ] ||
    fail "the choice is not said in one line: $(cat loaded.txt)"
grep -q "thread_policy fixed keeps 2" loaded.txt || fail "the line does not say how to keep the team"
[ "$(field loaded '"thread_policy fixed keeps 2" in d["threads"]["reason"]')" = True ] || fail "run.json has no reason"

OMP_NUM_THREADS=2 "$VB" run "${COMMON[@]}" --run_name fixed --thread_policy fixed > fixed.txt 2>&1 ||
    { tail -n 5 fixed.txt >&2; fail "the fixed run failed"; }
[ "$(field fixed 'd["threads"]["per_rank"]')" = 2 ] || fail "thread_policy fixed changed the team: $(field fixed 'd["threads"]')"
[ "$(field fixed 'd["threads"]["chosen_by"]')" = fixed ] || fail "fixed run: $(field fixed 'd["threads"]')"
grep -q "instead of" fixed.txt && fail "a fixed team was said to change: $(cat fixed.txt)"

# the machine's default through the environment, a flag still wins
VB_THREAD_POLICY=fixed OMP_NUM_THREADS=2 "$VB" run "${COMMON[@]}" --run_name env_fixed > env_fixed.txt 2>&1 ||
    fail "VB_THREAD_POLICY=fixed run failed: $(tail -n 5 env_fixed.txt)"
[ "$(field env_fixed 'd["threads"]["per_rank"]')" = 2 ] || fail "VB_THREAD_POLICY=fixed was not the default"
VB_THREAD_POLICY=fixed OMP_NUM_THREADS=2 "$VB" run "${COMMON[@]}" --run_name env_flag --thread_policy adapt \
    > env_flag.txt 2>&1 || fail "flag over VB_THREAD_POLICY failed: $(tail -n 5 env_flag.txt)"
[ "$(field env_flag 'd["threads"]["per_rank"]')" = 1 ] || fail "--thread_policy adapt did not win over VB_THREAD_POLICY"
stop_load
echo "test_thread_policy: PASS"
