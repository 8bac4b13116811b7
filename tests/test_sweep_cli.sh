#!/usr/bin/env bash
# test_sweep_cli.sh <vitbench>: `vitbench sweep` through the real binary.
#   1. --dry-run of every shipped scenario file, sized as a 2-core machine runs
#      them: one mpirun line per run, index.csv with one dry-run row per run.
#   2. --launcher sbatch --dry-run writes one valid job script per run.
#   3. bad scenario / flag: exit 2 with one line naming the file / key / flag;
#      --ab KEY=A,B: refused unless one key and two safe values; its dry run
#      alternates the baseline and the variant in each of 5 rounds.
#   4. a real 1- and 2-rank tiny sweep with the quick benchy config, one matrix
#      point whose runs fail inside the run (fewer samples than a batch):
#      those runs are recorded as failed, the others complete, the sweep goes on
#      and exits 1; its report and traces are written.
#   5. sweeps fail loudly: a launcher that cannot start a run exits 2 before
#      the first; each failed run's last log line is printed, and 3 failing
#      alike (by class: 3 timeouts, each log with its own elapsed time) stop
#      the sweep; index.csv holds the class, and the report of a sweep whose
#      runs all failed says "3 of 3 runs failed: timeout (3)"; a run stopped
#      by Ctrl-C is not a failed run: no row, and --resume runs it again; a
#      live sweep refuses --resume naming its holder; repeats shuffle the
#      rounds and start with a discarded warm-up run.
set -u

VB=${1:?usage: test_sweep_cli.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
QUICK=$SRC/scenarios/benchy/quick.yaml

fail() { echo "test_sweep_cli: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")

TMP=$(mktemp -d /tmp/vb_sweep.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT

out=$("$VB" sweep --help 2>&1) || fail "'vitbench sweep' is not dispatched by bench/main.c (wire it to vb_sweep_main): $out"

# the one sweep directory a sweep of scenario NAME made under DIR
sweep_dir() {
    local d
    d=$(ls -d "$1/$2"_* 2>/dev/null) || fail "no sweep directory $1/$2_*"
    [ "$(echo "$d" | wc -l)" = 1 ] || fail "several sweep directories for $2: $d"
    echo "$d"
}

# rows of index.csv whose status (column 3) is not $2
bad_status_rows() { awk -F, -v want="$2" 'NR > 1 && $3 != want' "$1"; }

# ---- 1. dry runs of the shipped scenarios ----
check_dry() { # name flag value rows
    local name=$1 flag=$2 value=$3 rows=$4 out n dir
    out=$("$VB" sweep "$SRC/scenarios/$name.yaml" --dry-run --output_dir "$TMP/dry" "$flag" "$value" \
        --config tiny --benchy_config "$QUICK" 2>&1) || fail "$name dry run exited $?: $out"
    n=$(grep -c "^OMP_NUM_THREADS=[0-9]* mpirun -np [0-9]* --oversubscribe -x OMP_NUM_THREADS --bind-to none $VB run " <<<"$out")
    [ "$n" = "$rows" ] || fail "$name: $n mpirun lines, want $rows: $out"
    grep -q -- "--config tiny" <<<"$out" || fail "$name: --config tiny not passed to the runs: $out"
    grep -q -- "--benchy_config $QUICK" <<<"$out" || fail "$name: --benchy_config not passed: $out"
    dir=$(sweep_dir "$TMP/dry" "$name")
    [ "$(wc -l <"$dir/index.csv")" = $((rows + 1)) ] || fail "$name: index.csv has $(wc -l <"$dir/index.csv") lines, want $((rows + 1))"
    head -1 "$dir/index.csv" | grep -q '^run_index,run_dir,status,exit_code,repeat,ranks,threads_per_rank,' || fail "$name: index.csv header: $(head -1 "$dir/index.csv")"
    [ -z "$(bad_status_rows "$dir/index.csv" dry-run)" ] || fail "$name: rows not dry-run: $(cat "$dir/index.csv")"
    [ -f "$dir/scenario.yaml" ] && [ -f "$dir/sweep.json" ] || fail "$name: scenario.yaml / sweep.json missing in $dir"
}
check_dry weak_scaling --ranks 1,2 4        # 2 rank counts x noddp false/true
check_dry strong_scaling --ranks 1,2 2
check_dry ddp_buckets --ranks 2 5           # baseline 25 MB, 1, 5, 100, noddp
check_dry tp_cp_layouts --world_size 4 9    # 6 factorizations, equivalent orders once
check_dry optimization_flags --ranks 1 4    # baseline + workers 1, 2 + broadcast off
# the layouts rows carry their layout as columns and flags
d=$(sweep_dir "$TMP/dry" tp_cp_layouts)
head -1 "$d/index.csv" | grep -q ',tensor_parallel,context_parallel,parallel_order,full_samples_per_s,' || fail "layout columns: $(head -1 "$d/index.csv")"
grep -q ',4,[0-9]*,2,2,cp-tp-dp,' "$d/index.csv" || fail "tp 2 cp 2 cp-tp-dp row missing: $(cat "$d/index.csv")"

# any other scenario file in scenarios/ must at least expand
for f in "$SRC"/scenarios/*.yaml; do
    case $(basename "$f") in vit.yaml | weak_scaling.yaml | strong_scaling.yaml | ddp_buckets.yaml | \
        tp_cp_layouts.yaml | optimization_flags.yaml) continue ;; esac
    grep -q '^name:' "$f" || continue
    out=$("$VB" sweep "$f" --dry-run --output_dir "$TMP/other" 2>&1) || fail "$f: dry run exited $?: $out"
done

# ---- 2. sbatch job scripts ----
out=$("$VB" sweep "$SRC/scenarios/weak_scaling.yaml" --dry-run --launcher sbatch --ranks 1,2 --ranks_per_node 1 \
    --output_dir "$TMP/sb" --config tiny 2>&1) || fail "sbatch dry run exited $?: $out"
[ "$(grep -c '^sbatch ' <<<"$out")" = 4 ] || fail "sbatch dry run: want 4 sbatch lines: $out"
d=$(sweep_dir "$TMP/sb" weak_scaling)
[ "$(ls "$d/jobs" | wc -l)" = 4 ] || fail "want 4 job scripts in $d/jobs: $(ls "$d/jobs")"
job=$d/jobs/003_ranks=2_noddp=true.sbatch
[ -f "$job" ] || fail "missing $job"
for want in '^#SBATCH --ntasks=2$' '^#SBATCH --nodes=2$' '^#SBATCH --ntasks-per-node=1$' '^#SBATCH --job-name=weak_scaling_003$' \
    "^#SBATCH --output=$d/logs/003_ranks=2_noddp=true.log$" "^run_point 003_ranks=2_noddp=true - 0 srun --ntasks=2 --nodes=2 --ntasks-per-node=1 --cpu-bind=cores $VB run " \
    "--noddp true --output_dir $d/runs --run_name 003_ranks=2_noddp=true$"; do
    grep -q -- "$want" "$job" || fail "job script lacks /$want/: $(cat "$job")"
done
for j in "$d"/jobs/*.sbatch; do bash -n "$j" || fail "not valid bash: $j"; done
[ -z "$(bad_status_rows "$d/index.csv" dry-run)" ] || fail "sbatch dry run statuses: $(cat "$d/index.csv")"

# ---- 3. bad input ----
expect_exit2() { # needle... -- args...
    local needles=() out rc
    while [ "$1" != -- ]; do needles+=("$1"); shift; done
    shift
    out=$("$VB" sweep "$@" 2>&1)
    rc=$?
    [ "$rc" = 2 ] || fail "sweep $*: exit $rc, want 2: $out"
    [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "sweep $*: want one line: $out"
    for n in "${needles[@]}"; do grep -qF -- "$n" <<<"$out" || fail "sweep $*: message does not name '$n': $out"; done
}
printf 'name: bad\nmatrix: {nodp: [true]}\n' >"$TMP/bad.yaml"
expect_exit2 "$TMP/bad.yaml" matrix.nodp -- "$TMP/bad.yaml" --dry-run --output_dir "$TMP/bad"
printf 'name: bad\nranks: [1, two]\n' >"$TMP/bad2.yaml"
expect_exit2 "$TMP/bad2.yaml" ranks two -- "$TMP/bad2.yaml" --dry-run --output_dir "$TMP/bad"
expect_exit2 --launcher condor -- "$SRC/scenarios/weak_scaling.yaml" --launcher condor --dry-run --output_dir "$TMP/bad"
expect_exit2 --noddp matrix -- "$SRC/scenarios/weak_scaling.yaml" --noddp true --dry-run --output_dir "$TMP/bad"
expect_exit2 "$TMP/none.yaml" -- "$TMP/none.yaml" --dry-run --output_dir "$TMP/bad"
# a batch sweep from a working directory so long that the job scripts' paths below the sweep directory
# would not fit: refused before anything is made (it once ended in an internal error, the directory half made)
long=$TMP/long
for i in $(seq 12); do long=$long/$(printf 'd%.0s' $(seq 80)); done
mkdir -p "$long" || fail "mkdir of a long path"
(cd "$long" && expect_exit2 '--output_dir out' 'path would be' 'give a shorter directory' -- \
    "$SRC/scenarios/weak_scaling.yaml" --launcher sbatch --ranks_per_node 1 --dry-run --output_dir out) || exit 1
[ ! -e "$long/out" ] || fail "a refused sweep left $long/out: $(ls -R "$long/out" | head)"
# started under mpirun / a multi-task srun step (srun --mpi=none sets no PMI variable): one sweep per rank
PMIX_RANK=0 expect_exit2 PMIX_RANK -- "$SRC/scenarios/weak_scaling.yaml" --dry-run --output_dir "$TMP/bad"
SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 expect_exit2 srun -- "$SRC/scenarios/weak_scaling.yaml" --dry-run --output_dir "$TMP/bad"
# --ab KEY=A,B: one config key, two values made of what config values are made of
expect_exit2 "--ab" "KEY=A,B" -- --ab num_data_workers=1 --dry-run --output_dir "$TMP/bad"
expect_exit2 "--ab" "values may hold only" -- --ab 'num_data_workers=0,1$(touch x)' --dry-run --output_dir "$TMP/bad"
expect_exit2 "unknown key 'no_such_key'" -- --ab no_such_key=0,1 --dry-run --output_dir "$TMP/bad"
expect_exit2 "same value" -- --ab num_data_workers=1,1 --dry-run --output_dir "$TMP/bad"
expect_exit2 "not both" -- "$SRC/scenarios/weak_scaling.yaml" --ab num_data_workers=0,1 --dry-run --output_dir "$TMP/bad"
[ ! -e "$TMP/bad" ] || fail "a rejected sweep created $TMP/bad"
# the interleaved A/B mode: a baseline and one variant, 5 rounds of both in a shuffled order
out=$("$VB" sweep --ab num_data_workers=0,1 --config tiny --dry-run --output_dir "$TMP/ab" 2>&1) ||
    fail "sweep --ab exited $?: $out"
d=$(ls -d "$TMP"/ab/ab_num_data_workers_*)
[ "$(tail -n +2 "$d/index.csv" | wc -l)" = 10 ] || fail "--ab: want 2 points x 5 repeats: $(cat "$d/index.csv")"
grep -q "baseline: {num_data_workers: '0'}" "$d/scenario.yaml" && grep -q "num_data_workers: \['1'\]" "$d/scenario.yaml" ||
    fail "--ab scenario: $(cat "$d/scenario.yaml")"
# rounds alternate: each round holds one run of each
python3 - "$d/index.csv" <<'EOF' || fail "--ab runs do not alternate round by round"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for k in range(5):
    got = sorted(r["variant"] for r in rows[2 * k:2 * k + 2])
    assert got == ["baseline", "num_data_workers=1"], (k, got)
EOF
ls /tmp/vitbench_ab.* >/dev/null 2>&1 && fail "--ab left its scenario file in /tmp"
# a one-task step (an interactive `srun --pty bash`) is an ordinary shell
out=$(SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=1 "$VB" sweep "$SRC/scenarios/weak_scaling.yaml" --dry-run --ranks 1 \
    --output_dir "$TMP/step1" --config tiny 2>&1) || fail "sweep in a one-task srun step exited $?: $out"

# ---- 4. a real tiny sweep on 1 and 2 ranks ----
mkdir -p "$TMP/e2e" && cd "$TMP/e2e" || fail "cd $TMP/e2e"
"$VB" datagen --output_dir data/tiny --years 1 --valid_years 1 --samples_per_year 16 --channels 4 --img_size 32,64 \
    >datagen.log 2>&1 || fail "datagen: $(cat datagen.log)"
cat >e2e.yaml <<'EOF'
# two good runs and two that fail inside the run (2 samples are less than one batch of 4:
# the preflight does not read the data, the run does)
name: e2e
base: {config: tiny, global_batch_size: 4}
ranks: [1, 2]
threads_per_rank: 1
matrix:
  limit_nsamples: [16, 2]
EOF
rc=0
out=$("$VB" sweep e2e.yaml --output_dir sweeps --benchy_config "$QUICK" --timeout_s 300 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "a sweep with failed runs exited $rc, want 1: $out"
d=$(sweep_dir sweeps e2e)
idx=$d/index.csv
[ "$(wc -l <"$idx")" = 5 ] || fail "index.csv: want 4 rows: $(cat "$idx")"
want_rows='0,runs/000_ranks=1_limit_nsamples=16,completed,0,0,1,1,16
1,runs/001_ranks=1_limit_nsamples=2,failed,2,0,1,1,2,,,,,,,,,exit 2
2,runs/002_ranks=2_limit_nsamples=16,completed,0,0,2,1,16
3,runs/003_ranks=2_limit_nsamples=2,failed,2,0,2,1,2,,,,,,,,,exit 2'
got=$(tail -n +2 "$idx" | awk -F, -v OFS=, '$3 == "completed" { NF = 8 } 1')
[ "$got" = "$want_rows" ] || fail "index.csv rows: $(cat "$idx"); sweep output: $out"
# completed rows carry their headline: FULL, SYNTHETIC, IO mean (> 0) and std
bad=$(awk -F, 'NR > 1 && $3 == "completed" && !($9 > 0 && $11 > 0 && $13 > 0 && $10 != "" && $12 != "" && $14 != "")' "$idx")
[ -z "$bad" ] || fail "completed rows without headline numbers: $bad"
grep -q 'FULL samples/s' <<<"$out" || fail "sweep printed no results table: $out"
for run in 000_ranks=1_limit_nsamples=16 002_ranks=2_limit_nsamples=16; do
    for f in run.json summary.csv trials.csv timeline.csv; do
        [ -f "$d/runs/$run/$f" ] || fail "completed run $run has no $f: $(ls "$d/runs/$run" 2>&1); log: $(cat "$d/logs/$run.log")"
    done
    grep -q '"per_rank":[[:space:]]*1,' "$d/runs/$run/run.json" || fail "$run did not get threads_per_rank 1: $(grep -A4 '"threads"' "$d/runs/$run/run.json")"
    # a launcher's pseudo-terminal gets lines, never the progress bar's escape codes
    if grep -q $'\033\[K' "$d/logs/$run.log"; then fail "$run: progress-bar escape codes in the sweep log"; fi
done
grep -q '"nranks": *2' "$d/runs/002_ranks=2_limit_nsamples=16/benchy_output.json" || fail "2-rank run did not run on 2 ranks: $(head -c 300 "$d/runs/002_ranks=2_limit_nsamples=16/benchy_output.json")"
grep -q 'fewer than one local batch' "$d/logs/001_ranks=1_limit_nsamples=2.log" || fail "failed run's log does not say why: $(cat "$d/logs/001_ranks=1_limit_nsamples=2.log")"
tail -1 <<<"$out" | grep -q '2 of 4 runs failed' || fail "sweep's last line does not count the failures: $out"
# the sweep ends with its report, linking a Chrome trace of every completed run
[ -f "$d/report/report.md" ] && [ -f "$d/report/report.html" ] || fail "sweep wrote no report: $(ls "$d" "$d/report" 2>&1)"
for run in 000_ranks=1_limit_nsamples=16 002_ranks=2_limit_nsamples=16; do
    [ -f "$d/runs/$run/trace.json" ] || fail "no trace.json for $run"
    grep -q "runs/$run/trace.json" "$d/report/report.md" || fail "report does not link $run's trace"
done
# ranks vary while the global batch (4) stays fixed: a strong-scaling sweep for the report
grep -q '"kind":[[:space:]]*"strong_scaling"' "$d/sweep.json" || fail "sweep.json kind: $(cat "$d/sweep.json")"
grep -q 'last line of its log: .*fewer than one local batch' <<<"$out" || fail "a failed run's last log line is not on the console: $out"

# ---- 5. sweeps fail loudly ----
cd "$TMP/e2e" || fail "cd"
mkdir -p fakebin
# fake mpirun: MODE=root fails like Open MPI run as root without its variables;
# MODE=fail fails every run (not the launcher probe, `vitbench version`);
# MODE=slow sleeps before each run; MODE=quick ends each run at once, with
# success and no run directory; otherwise it runs the command
cat >fakebin/mpirun <<'EOF'
#!/usr/bin/env bash
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do
    case $1 in -np | -x | --bind-to) shift ;; esac
    shift
done
case ${FAKE_MPIRUN:-} in
root) echo "mpirun has detected an attempt to run as root." >&2; exit 1 ;;
fail) [ "$2" = version ] || { echo "fake mpirun: no route to host node7" >&2; exit 1; } ;;
slow) [ "$2" = version ] || sleep 30 ;;
quick) [ "$2" = version ] || { echo "quick stand-in run"; exit 0; } ;;
esac
exec "$@"
EOF
chmod +x fakebin/mpirun
cat >five.yaml <<'EOF'
name: five
base: {config: tiny, global_batch_size: 4}
ranks: [1]
threads_per_rank: 1
matrix:
  seed: [1, 2, 3, 4, 5]
EOF
# a launcher that cannot start anything: exit 2 before the first run, once, with the fix
rc=0
out=$(env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PATH="$PWD/fakebin:$PATH" FAKE_MPIRUN=root \
    "$VB" sweep five.yaml --output_dir loud --benchy_config "$QUICK" 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "a broken launcher: exit $rc, want 2: $out"
[ "$(wc -l <<<"$out")" = 1 ] || fail "a broken launcher: more than one line: $out"
grep -q 'mpirun cannot start a run.*attempt to run as root.*no run was started' <<<"$out" || fail "broken launcher not explained: $out"
if [ "$(id -u)" = 0 ]; then grep -q 'OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1' <<<"$out" || fail "no fix named: $out"; fi
[ -e loud ] && fail "a broken launcher left a sweep directory: $(ls -R loud)"
# runs failing alike: each failure's last log line on the console; the sweep
# stops after 3 in a row and says how to continue
rc=0
out=$(PATH="$PWD/fakebin:$PATH" FAKE_MPIRUN=fail "$VB" sweep five.yaml --output_dir loud --benchy_config "$QUICK" 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "failing runs: exit $rc, want 1: $out"
[ "$(grep -c 'last line of its log: fake mpirun: no route to host node7' <<<"$out")" = 3 ] || fail "want 3 failures with their line: $out"
grep -q 'stopping: 3 runs in a row failed alike (exit 1; last line: fake mpirun: no route to host node7); fix that and continue with vitbench sweep --resume' <<<"$out" || fail "no stop after 3 alike: $out"
grep -q '2 of 5 runs not started' <<<"$out" || fail "not-started runs not counted: $out"
d=$(sweep_dir loud five)
[ "$(awk -F, 'NR > 1 && $3 == "failed"' "$d/index.csv" | wc -l)" = 3 ] || fail "index.csv: $(cat "$d/index.csv")"
# the third failure alike is the sweep's last run: nothing is left to stop, and no stop is claimed
sed 's/seed: \[1, 2, 3, 4, 5\]/seed: [1, 2, 3]/; s/^name: five/name: three/' five.yaml >three.yaml
rc=0
out=$(PATH="$PWD/fakebin:$PATH" FAKE_MPIRUN=fail "$VB" sweep three.yaml --output_dir last --benchy_config "$QUICK" 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "three failing runs: exit $rc, want 1: $out"
grep -q 'stopping:\|not started' <<<"$out" && fail "a stop claimed after the last run: $out"
grep -q '3 of 3 runs failed' <<<"$out" || fail "three failing runs: $out"
# a live sweep refuses --resume, naming the process that holds it
PATH="$PWD/fakebin:$PATH" FAKE_MPIRUN=slow "$VB" sweep five.yaml --output_dir live --benchy_config "$QUICK" >live.out 2>&1 &
bg=$!
for _ in $(seq 100); do [ -f live/five_*/index.csv ] && break; sleep 0.1; done
d=$(sweep_dir live five)
rc=0
out=$("$VB" sweep --resume "$d" 2>&1) || rc=$?
# ... and --collect: index.csv is the live sweep's to write (a stale one would overwrite its last rows)
crc=0
cout=$("$VB" sweep --collect "$d" --no_report 2>&1) || crc=$?
kill -TERM "$bg" 2>/dev/null
wait "$bg"
[ "$rc" = 2 ] || fail "--resume of a live sweep: exit $rc, want 2: $out"
grep -q "flag --resume $d: the sweep is still running (pid $bg on " <<<"$out" || fail "--resume of a live sweep does not name its holder: $out"
[ "$crc" = 2 ] && grep -q "flag --collect $d: the sweep is still running (pid $bg on " <<<"$cout" ||
    fail "--collect of a live local sweep: exit $crc: $cout"
# once it has ended, --collect of a local sweep rewrites its index.csv as it was
before=$(cat "$d/index.csv")
"$VB" sweep --collect "$d" --no_report >/dev/null 2>&1
[ "$(cat "$d/index.csv")" = "$before" ] || fail "--collect of an ended local sweep changed index.csv: $(cat "$d/index.csv")"
# runs timing out alike trip --max_failures 3 by their class, although each
# log ends in its own elapsed time; the class is in index.csv, and the report
# of a sweep where every run failed says so, with the class and the last line
rc=0
out=$(PATH="$PWD/fakebin:$PATH" FAKE_MPIRUN=slow "$VB" sweep five.yaml --output_dir tout --benchy_config "$QUICK" \
    --timeout_s 1 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "timed-out runs: exit $rc, want 1: $out"
grep -q 'stopping: 3 runs in a row failed alike (timeout; ' <<<"$out" || fail "3 timeouts did not stop the sweep: $out"
grep -q 'last line of its log: vitbench sweep: run stopped' <<<"$out" && fail "the sweep's own stop line taken for the run's: $out"
d=$(sweep_dir tout five)
[ "$(awk -F, 'NR > 1 && $3 == "failed" && $NF == "timeout"' "$d/index.csv" | wc -l)" = 3 ] ||
    fail "index.csv failure class: $(cat "$d/index.csv")"
[ -f "$d/report/report.md" ] || fail "no report for a sweep whose runs all failed: $out"
sed -n '/^## Summary/,/^## Contents/p' "$d/report/report.md" | grep -q '^- 3 of 3 runs failed: timeout (3); nothing was measured' ||
    fail "the all-failed report does not say N of N failed with the class: $(cat "$d/report/report.md")"
grep -q 'Nothing measured to summarise' "$d/report/report.md" && fail "the all-failed report summarises nothing"
grep -q '^timeout$\|,timeout,' "$d/report/failed_runs.csv" || fail "failed_runs.csv without the class: $(cat "$d/report/failed_runs.csv")"

# an interrupted run is not a failed run: no row, and --resume runs it again
PATH="$PWD/fakebin:$PATH" FAKE_MPIRUN=slow "$VB" sweep five.yaml --output_dir intr --benchy_config "$QUICK" >intr.out 2>&1 &
bg=$!
for _ in $(seq 200); do ls intr/five_*/logs/000_*.log >/dev/null 2>&1 && break; sleep 0.1; done
sleep 0.5
kill -INT "$bg"
rc=0
wait "$bg" || rc=$?
[ "$rc" = 130 ] || fail "an interrupted sweep exited $rc, want 130: $(cat intr.out)"
grep -q '000_ranks=1_seed=1: interrupted after .* not recorded, vitbench sweep --resume .* runs it again' intr.out ||
    fail "the interrupted run is not said to be rerun by --resume: $(cat intr.out)"
d=$(sweep_dir intr five)
[ "$(tail -n +2 "$d/index.csv" | wc -l)" = 0 ] || fail "the interrupted run got a row: $(cat "$d/index.csv")"
rc=0
out=$(PATH="$PWD/fakebin:$PATH" FAKE_MPIRUN=quick "$VB" sweep --resume "$d" --no_report 2>&1) || rc=$?
[ "$rc" = 0 ] || fail "--resume after an interrupt exited $rc: $out"
grep -q '000_ranks=1_seed=1 did not finish before; moved to' <<<"$out" || fail "the interrupted run's leftovers not moved aside: $out"
[ "$(awk -F, 'NR > 1 && $3 == "completed"' "$d/index.csv" | wc -l)" = 5 ] || fail "--resume did not run the interrupted run: $(cat "$d/index.csv")"
grep -q '^0,runs/000_ranks=1_seed=1,completed' "$d/index.csv" || fail "the interrupted run is not completed now: $(cat "$d/index.csv")"

# with repeats: shuffled rounds and one discarded warm-up run first, both in sweep.json
cat >one.yaml <<'EOF'
name: one
base: {config: tiny, global_batch_size: 4}
ranks: [1]
threads_per_rank: 1
EOF
out=$("$VB" sweep one.yaml --repeats 2 --output_dir warm --benchy_config "$QUICK" --timeout_s 300 2>&1) ||
    fail "a sweep with repeats: $out"
d=$(sweep_dir warm one)
grep -q 'warm-up run (discarded) of 000_ranks=1_rep=0' <<<"$out" || fail "no warm-up run: $out"
[ -f "$d/logs/warmup.log" ] || fail "no warm-up log"
python3 - "$d/sweep.json" <<'EOF' || fail "sweep.json does not record the order and the warm-up"
import json, sys
j = json.load(open(sys.argv[1]))
w = j.get("warmup", {})
if j.get("order") != "shuffled" or w.get("point") != "000_ranks=1_rep=0" or w.get("exit_code") != 0:
    sys.exit("order %r, warmup %r" % (j.get("order"), w))
EOF
[ "$(tail -n +2 "$d/index.csv" | wc -l)" = 2 ] || fail "the warm-up run is in index.csv: $(cat "$d/index.csv")"


echo "test_sweep_cli: OK"
