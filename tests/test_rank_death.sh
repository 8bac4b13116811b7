#!/usr/bin/env bash
# test_rank_death.sh <vitbench>: a rank that dies mid-run (kill -9) does not
# leave the others hanging, and run.json ends as "failed", not "running": the
# survivors are blocked in a collective when the launcher stops them, and the
# stop watchdog records the failure the training thread cannot reach.
set -u
VB=${1:?usage: test_rank_death.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_rank_death: FAIL: $*" >&2; exit 1; }
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_death.XXXXXX) || fail "mktemp"
trap 'pkill -9 -f -- "$TMP/[o]ut" 2>/dev/null; rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd"
"$VB" datagen --output_dir data --years 2 --valid_years 1 --samples_per_year 64 --channels 4 --img_size 32,64 \
    >gen.log 2>&1 || fail "datagen: $(cat gen.log)"
cat >benchy.yaml <<'YAML'
IO: {run_benchmark: false}
synthetic: {run_benchmark: false}
full: {nbatches: 8, ntrials: 1000, nwarmup: 0}
YAML
OMP_NUM_THREADS=1 timeout -k 5 120 mpirun --oversubscribe -np 2 "$VB" run --config tiny --benchy_config benchy.yaml \
    --output_dir "$TMP/out" --train_data_path data/train --global_means_path data/stats/global_means.npy \
    --global_stds_path data/stats/global_stds.npy --global_batch_size 4 --progress none >run.log 2>&1 &
launcher=$!
# wait for the first finished trial, then kill rank 1 outright
for _ in $(seq 1 600); do
    grep -q FULL_0 run.log 2>/dev/null && break
    sleep 0.1
done
grep -q FULL_0 run.log || fail "the run never finished a trial: $(cat run.log)"
victim=$(pgrep -f -- "^$VB run .*$TMP/[o]ut" | tail -1)
[ -n "$victim" ] || fail "no rank process found"
kill -9 "$victim"
t0=$(date +%s)
wait "$launcher"
rc=$?
[ "$rc" != 124 ] && [ "$rc" != 137 -o "$(( $(date +%s) - t0 ))" -lt 60 ] || fail "the run hung after a rank died (exit $rc)"
[ "$rc" != 0 ] || fail "mpirun exited 0 after a rank was killed"
! pgrep -f -- "$TMP/[o]ut" >/dev/null || fail "ranks still running after the launcher returned"
rj=$(ls out/*/run.json) || fail "no run.json"
grep -q '"status":[[:space:]]*"failed"' "$rj" || fail "run.json after a rank died: $(grep -E '"status"|"failure"' "$rj")"
grep -q '"failure"' "$rj" || fail "run.json does not say why it failed"
echo "test_rank_death: OK"
