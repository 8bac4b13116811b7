#!/usr/bin/env bash
# test_validation_trial.sh <vitbench>: benchy's `validation` section times
# VALIDATION trials (forward passes over the valid split), recorded as every
# other trial kind is:
#  - trials.csv, iterations.csv, load.csv and summary.csv carry VALIDATION
#    rows (warm-ups and timed trials, nbatches capped at the valid split's
#    batches), benchy's JSON a "VALIDATION" entry, run.json the section;
#  - summary.csv's achieved TFLOP/s for VALIDATION counts the forward's
#    FLOPs: per sample a third of FULL's;
#  - compare --metric VALIDATION reads them; a sweep's index.csv has
#    validation_samples_per_s;
#  - without the section no VALIDATION rows, and no valid split is needed;
#    with it a missing valid_data_path exits 2 naming the key.
set -u

VB=${1:?usage: test_validation_trial.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
unset BENCHY_CONFIG_FILE

fail() { echo "test_validation_trial: FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d /tmp/vb_valtrial.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"
. "$SRC/tests/lib/tiny_run.sh"
tiny_data 16 || fail "datagen" # 16 samples a split: 2 batches of tiny's 8
cat > with.yaml <<'YAML'
global: {report_freq: 1, exit_after_tests: True, profiler_mode: 'single', use_distributed_barrier: False}
IO: {run_benchmark: False}
synthetic: {run_benchmark: False}
full: {run_benchmark: True, nbatches: 1, ntrials: 2, nwarmup: 0}
validation: {run_benchmark: True, nbatches: 5, ntrials: 3, nwarmup: 1}
YAML
sed '/^validation:/d' with.yaml > without.yaml
# TINY_ARGS without its --valid_data_path: each run names its own
COMMON=()
for ((i = 0; i < ${#TINY_ARGS[@]}; i++)); do
    [ "${TINY_ARGS[i]}" = --valid_data_path ] && { i=$((i + 1)); continue; }
    COMMON+=("${TINY_ARGS[i]}")
done

"$VB" run "${COMMON[@]}" --valid_data_path data/valid --benchy_config with.yaml --run_name val > val.txt 2>&1 ||
    { rc=$?; tail -n 5 val.txt >&2; fail "the run with a validation section exited $rc"; }
grep -q "benchy VALIDATION nbatches 5 is more than one epoch (2 batches" val.txt ||
    fail "nbatches 5 over a 2-batch valid split is not said to be capped: $(cat val.txt)"
python3 - out/val <<'EOF' || fail "the run's files (above)"
import csv, json, math, sys
d = sys.argv[1]
rows = lambda f: list(csv.DictReader(open(f"{d}/{f}")))
t = [r for r in rows("trials.csv") if r["trial_type"] == "VALIDATION"]
timed = [r for r in t if r["warmup"] == "0"]
assert len(t) == 4 and len(timed) == 3, f"trials.csv: {len(t)} VALIDATION rows, {len(timed)} timed; want 4 and 3"
assert all(r["nbatches"] == "2" for r in t), "VALIDATION nbatches: not capped at the valid split's 2"
# run order: FULL, then VALIDATION
order = [r["trial_type"] for r in rows("trials.csv")]
assert order == ["FULL"] * 2 + ["VALIDATION"] * 4, order
it = [r for r in rows("iterations.csv") if r["trial_type"] == "VALIDATION"]
assert len(it) == 8, f"iterations.csv: {len(it)} VALIDATION steps, want 8"
# a trial's time is the sum of its steps
for r in timed:
    steps = sum(float(x["seconds"]) for x in it if x["trial_index"] == r["trial_index"] and x["warmup"] == "0")
    assert math.isclose(steps, float(r["seconds"]), rel_tol=1e-6), (steps, r["seconds"])
assert len([r for r in rows("load.csv") if r["trial_type"] == "VALIDATION"]) == 4, "load.csv"
s = {r["trial_type"]: r for r in rows("summary.csv")}
assert set(s) == {"FULL", "VALIDATION"}, set(s)
v, f = s["VALIDATION"], s["FULL"]
assert v["ntrials"] == "3"
rates = [float(r["samples_per_s"]) for r in timed]
assert math.isclose(float(v["mean_samples_per_s"]), sum(rates) / 3, rel_tol=1e-6)
# TFLOP/s per sample/s: the forward is a third of a training step (6 digits written)
per = lambda r: float(r["achieved_tflop_per_s"]) / float(r["mean_samples_per_s"])
assert math.isclose(3 * per(v), per(f), rel_tol=2e-5), (per(v), per(f))
j = json.load(open(f"{d}/benchy_output.json"))
assert len(j["VALIDATION"]["trial_throughput"]) == 3 and len(j["VALIDATION"]["rates"][0]) == 2, j.keys()
rj = json.load(open(f"{d}/run.json"))
b = rj["benchy"]["validation"]
assert b["run_benchmark"] is True and b["ntrials"] == 3 and b["nwarmup"] == 1, b
assert rj["benchy"]["IO"]["run_benchmark"] is False
EOF

# compare reads VALIDATION trials: one run a side is inconclusive (exit 5)
"$VB" compare out/val out/val --metric VALIDATION --output cmp.json > cmp.txt 2>&1
rc=$?
[ "$rc" = 5 ] || fail "compare --metric VALIDATION of one run a side exited $rc, want 5: $(cat cmp.txt)"
python3 -c '
import json, sys
r = json.load(open("cmp.json"))["results"][0]
assert r["metric"] == "VALIDATION" and r["base"]["n"] == 3, r
' || fail "compare's JSON for VALIDATION: $(cat cmp.json)"
"$VB" compare out/val out/val --metric VALIDATED > bad.txt 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "VALIDATION" bad.txt || fail "an unknown metric exited $rc without naming the kinds: $(cat bad.txt)"

# the report's throughput table has the kind
"$VB" report out/val --output_dir rep --no_plots > report.txt 2>&1 || fail "report: $(cat report.txt)"
grep -q "| VALIDATION |" rep/report.md || fail "the report's throughput table has no VALIDATION row"

# without the section: no VALIDATION rows, and a missing valid split is fine
"$VB" run "${COMMON[@]}" --valid_data_path data/nowhere --benchy_config without.yaml --run_name noval > noval.txt 2>&1 ||
    { tail -n 5 noval.txt >&2; fail "a run without validation trials needed the valid split"; }
grep -q VALIDATION out/noval/trials.csv out/noval/summary.csv out/noval/benchy_output.json &&
    fail "a run without the validation section has VALIDATION rows"

# with it, a missing valid split is bad input naming the key
"$VB" run "${COMMON[@]}" --valid_data_path data/nowhere --benchy_config with.yaml --run_name miss > miss.txt 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "valid_data_path" miss.txt ||
    fail "validation trials without a valid split exited $rc: $(cat miss.txt)"

# a sweep's index.csv has the kind's headline columns
cat > sweep.yaml <<YAML
name: val
base: {config: tiny, yaml_config: $SRC/scenarios/vit.yaml, train_data_path: data/train, valid_data_path: data/valid,
       global_means_path: data/stats/global_means.npy, global_stds_path: data/stats/global_stds.npy,
       benchy_config: with.yaml}
matrix: {local_batch_size: [8]}
YAML
"$VB" sweep sweep.yaml --output_dir sw --no_report > sweep.txt 2>&1 || fail "sweep: $(tail -n 5 sweep.txt)"
python3 - sw/val_*/index.csv <<'EOF' || fail "index.csv (above)"
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))
assert len(r) == 1 and r[0]["status"] == "completed", r
assert float(r[0]["validation_samples_per_s"]) > 0 and r[0]["validation_std"] != "", r[0]
assert r[0]["io_samples_per_s"] == "", r[0]
EOF
echo "test_validation_trial: PASS"
