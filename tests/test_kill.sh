#!/usr/bin/env bash
# test_kill.sh <vitbench>: a run killed with SIGKILL halfway keeps every trial
# it finished, in complete, parseable files (they are rewritten atomically
# after every trial), and leaves no temporary files behind.
set -u

VB=${1:?usage: test_kill.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset BENCHY_CONFIG_FILE

fail() { echo "test_kill: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(cd "$(dirname "$VB")" && pwd)/$(basename "$VB")

TMP=$(mktemp -d /tmp/vb_kill.XXXXXX) || fail "mktemp"
PID=
cleanup() {
    [ -n "$PID" ] && kill -9 "$PID" 2> /dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
cd "$TMP" || fail "cd $TMP"

# 2 x 32 samples = 8 batches of 8 per epoch: a trial is 8 steps (benchy caps at an epoch)
"$VB" datagen --output_dir data --years 2 --valid_years 1 --samples_per_year 32 --channels 4 \
    --img_size 32,64 --seed 3 > datagen.txt 2>&1
rc=$?
[ $rc -eq 0 ] || { cat datagen.txt >&2; fail "datagen exited $rc"; }

# far more trials than the test will wait for
cat > benchy.yaml <<'EOF'
global:
  report_freq: 4
IO:
  run_benchmark: False
synthetic:
  run_benchmark: True
  nbatches: 8
  ntrials: 1000
  nwarmup: 1
full:
  run_benchmark: True
  nbatches: 8
  ntrials: 1000
  nwarmup: 0
EOF

"$VB" run --yaml_config "$SRC/scenarios/vit.yaml" --config tiny \
    --train_data_path data/train --valid_data_path data/valid \
    --global_means_path data/stats/global_means.npy --global_stds_path data/stats/global_stds.npy \
    --output_dir out --run_name killed --benchy_config benchy.yaml > run.txt 2>&1 &
PID=$!
R=out/killed

# wait (at most ~60 s) for 2 finished trials: warm-up + one timed
rows=0
for _ in $(seq 600); do
    if [ -f $R/trials.csv ]; then
        rows=$(($(wc -l < $R/trials.csv) - 1))
        [ $rows -ge 2 ] && break
    fi
    kill -0 $PID 2> /dev/null || { cat run.txt >&2; fail "run ended before it was killed"; }
    sleep 0.1
done
[ $rows -ge 2 ] || fail "no 2 finished trials after 60 s"
kill -9 $PID
wait $PID 2> /dev/null
PID=

left=$(ls -A $R | grep -c '\.tmp')
[ "$left" -eq 0 ] || fail "temporary files left behind: $(ls -A $R)"

python3 - "$R" <<'EOF' || fail "files of the killed run (details above)"
import csv, json, os, sys
rd = sys.argv[1]
def check(cond, msg):
    if not cond:
        print("test_kill:", msg, file=sys.stderr); sys.exit(1)
t = list(csv.DictReader(open(os.path.join(rd, "trials.csv"), newline="")))
check(len(t) >= 2, f"trials.csv has {len(t)} rows")
check(len(t) < 2001, "the run finished although it was killed")
check(t[0]["trial_type"] == "SYNTHETIC" and t[0]["warmup"] == "1", "first row is not SYNTHETIC_WARMUP_0")
check(all(r["seconds"] and float(r["samples_per_s"]) > 0 for r in t), "a trials.csv row is incomplete")
# trials.csv is written last after each trial: every other file has at least its trials
it = list(csv.DictReader(open(os.path.join(rd, "iterations.csv"), newline="")))
check(len(it) % 8 == 0, f"iterations.csv has {len(it)} rows, not whole 8-step trials")
check(len(it) >= 8 * len(t), f"iterations.csv has {len(it)} rows for {len(t)} finished trials")
check(all(r["seconds"] and r["data_wait_s"] for r in it), "an iterations.csv row is incomplete")
labels = [r["trial"] for r in it[::8]]
check(labels[:2] == ["SYNTHETIC_WARMUP_0", "SYNTHETIC_0"], f"iterations.csv trials {labels[:2]}")
b = json.load(open(os.path.join(rd, "benchy_output.json")))
timed = sum(1 for r in t if r["warmup"] == "0")
check(b["nranks"] == 1 and len(b["SYNTHETIC"]["trial_throughput"]) >= timed,
      f"benchy_output.json has {len(b.get('SYNTHETIC', {}).get('trial_throughput', []))} timed trials, trials.csv {timed}")
check(all(len(x) == 8 for x in b["SYNTHETIC"]["rates"]), "benchy_output.json rates are not 8 per trial")
s = list(csv.DictReader(open(os.path.join(rd, "summary.csv"), newline="")))
check(s and s[0]["trial_type"] == "SYNTHETIC" and int(s[0]["ntrials"]) >= timed, "summary.csv")
o = list(csv.DictReader(open(os.path.join(rd, "ops.csv"), newline="")))
check(any(r["name"].startswith("matmul_forward_") for r in o), "ops.csv has no matmul_forward_* rows")
rj = json.load(open(os.path.join(rd, "run.json")))
check(rj["status"] == "running", f"run.json status {rj['status']} (SIGKILL cannot update it)")
EOF

echo "test_kill: OK"
