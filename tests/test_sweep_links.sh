#!/usr/bin/env bash
# test_sweep_links.sh <vitbench>: nothing the sweep or its job scripts write
# leaves the sweep directory through a link of either kind (docs/results.md,
# "What vitbench writes where"):
#   1. the job scripts of each batch launcher (sbatch, bsub, qsub, flux-batch:
#      a job a run, and --sweep_job's one job for all runs),
#      run as its scheduler would (stand-in launchers, the scheduler's job
#      variables): a symbolic link and then a hard link planted at every name
#      it writes (status/<run>.hosts, .job, .exit, logs/<run>.log) is replaced
#      or refused, never written through; runs/ a link: the run is refused;
#   2. the sweep itself on --resume: a hard link at logs/warmup.log and at the
#      run's log, symbolic links at index.csv, sweep.json, .running and
#      .collect.lock; a hard link at .sweep.lock is refused;
#   3. --collect: runs/<run> a link to another run's directory is not taken as
#      the point's result and its run.json is not rewritten; status/ a link is
#      refused; --retry_failed rewrites jobs/<run>.lsf, a hard link there, by
#      rename (mode 0775, the victim untouched), and a failed submission is
#      recorded as the submit command's ("bsub exit 1");
#   4. runs/ and logs/ swapped for links while the first run goes on (by a
#      stand-in mpirun, at a known moment): the run refuses the runs/ link,
#      the sweep stops before the next run, nothing lands outside.
set -u

VB=${1:?usage: test_sweep_links.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
QUICK=$SRC/scenarios/benchy/quick.yaml
fail() { echo "test_sweep_links: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_sweep_links.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

"$VB" datagen --output_dir data --years 1 --valid_years 1 --channels 4 --img_size 32,64 --samples_per_year 16 \
    --seed 0 >/dev/null 2>&1 || fail "datagen"
# scenario NAME KEYS: NAME.yaml, a tiny run of the data above on one rank, then KEYS
scenario() {
    cat >"$1.yaml" <<EOF
name: $1
command: run
base:
  config: tiny
  global_batch_size: 4
  train_data_path: $TMP/data/train
  valid_data_path: $TMP/data/valid
  global_means_path: $TMP/data/stats/global_means.npy
  global_stds_path: $TMP/data/stats/global_stds.npy
  benchy_config: $QUICK
ranks: [1]
$2
EOF
}
scenario links "ranks_per_node: 1
threads_per_rank: 1
cluster:
  cpus_per_task: 1"

# victim NAME: a file outside every sweep directory holding "precious"
victim() { echo precious >"$TMP/victim_$1"; echo "$TMP/victim_$1"; }
untouched() { [ "$(cat "$1")" = precious ] || fail "$2: written through the link into $1: $(head -c 300 "$1")"; }
own_file() { [ -f "$1" ] && [ ! -L "$1" ] && [ "$(stat -c %h "$1")" = 1 ] || fail "$2: $1 is not a file of its own: $(ls -l "$1")"; }
nothing_in() { [ -z "$(ls -A "$1")" ] || fail "$2: written into $1: $(ls -A "$1")"; }

# ---- 1. each batch launcher's job script ----
mkdir stub
for p in srun jsrun mpiexec flux; do
    printf '#!/bin/sh\nif [ "$1" = hostlist ]; then echo vbnode1; exit 0; fi\necho "stand-in launcher: $*"\nexit 0\n' \
        >"stub/$p"
    chmod +x "stub/$p"
done
printf 'vbnode1\n' >hosts
run=000_ranks=1
for L in sbatch bsub qsub flux-batch; do
    case $L in
    sbatch) env=(SLURM_JOB_ID=71 SLURM_JOB_NODELIST=vbnode1) ;;
    bsub) env=(LSB_JOBID=72 LSB_DJOB_HOSTFILE=$TMP/hosts) ;;
    qsub) env=(PBS_JOBID=73.pbs01 PBS_NODEFILE=$TMP/hosts) ;;
    flux-batch) env=(FLUX_JOB_ID=f74) ;;
    esac
    # a job a run, and one sweep job for them all (--sweep_job): each its own script
    for mode in run sweep_job; do
        flags=()
        [ $mode = sweep_job ] && flags=(--sweep_job)
        out=$("$VB" sweep links.yaml --launcher "$L" "${flags[@]}" --dry-run --output_dir "js_${L}_$mode" 2>&1) ||
            fail "$L $mode dry run: $out"
        d=$(readlink -f js_"$L"_$mode/links_*)
        script=$(ls "$d"/jobs/*)
        J=${L}_$mode
        for kind in symbolic hard; do
            names=("status/$run.hosts" "status/$run.job" "status/$run.exit" "logs/$run.log")
            victims=()
            for n in "${names[@]}"; do
                v=$(victim "${J}_${kind}_${n//\//_}")
                victims+=("$v")
                if [ $kind = symbolic ]; then ln -s "$v" "$d/$n"; else ln "$v" "$d/$n"; fi
            done
            env PATH="$TMP/stub:$PATH" "${env[@]}" bash "$script" >"job_$J.out" 2>&1
            for i in "${!names[@]}"; do untouched "${victims[$i]}" "$J job script, $kind link at ${names[$i]}"; done
            for n in "status/$run.hosts" "status/$run.job" "status/$run.exit"; do own_file "$d/$n" "$J, $kind link at $n"; done
            # a link at its log: the run is refused (exit 2), not run into it
            [ "$(cat "$d/status/$run.exit")" = 2 ] || fail "$J, $kind link at the log: exit $(cat "$d/status/$run.exit"): $(cat "job_$J.out")"
            grep -q "logs/$run.log is a link or not a regular file" "job_$J.out" || fail "$J: the refusal names no log: $(cat "job_$J.out")"
            rm -f "$d/logs/$run.log" "$d"/status/*
            # the names free: the run runs, its log is its own
            env PATH="$TMP/stub:$PATH" "${env[@]}" bash "$script" >"job_$J.out" 2>&1
            [ "$(cat "$d/status/$run.exit")" = 0 ] || fail "$J job script without links: $(cat "job_$J.out")"
            rm -f "$d"/status/* "$d/logs/$run.log"
        done
        # runs/ a link: nothing is run into it
        mkdir "elsewhere_runs_$J"
        mv "$d/runs" "$d/runs.real" && ln -s "$TMP/elsewhere_runs_$J" "$d/runs"
        env PATH="$TMP/stub:$PATH" "${env[@]}" bash "$script" >"job_$J.out" 2>&1
        [ "$(cat "$d/status/$run.exit")" = 2 ] || fail "$J, runs/ a link: $(cat "job_$J.out")"
        grep -q "runs is not a real directory" "job_$J.out" || fail "$J, runs/ a link: not named: $(cat "job_$J.out")"
        nothing_in "elsewhere_runs_$J" "$J job script, runs/ a link"
        rm "$d/runs" && mv "$d/runs.real" "$d/runs"
    done
done

# ---- 2. the sweep on --resume ----
"$VB" sweep links.yaml --output_dir rs --warmup_run true --no_report >rs.log 2>&1 || fail "sweep: $(cat rs.log)"
S=$(readlink -f rs/links_*)
# the run row dropped: --resume runs it (and the warm-up) again
python3 - "$S/index.csv" <<'EOF' || fail "index.csv"
import sys
lines = open(sys.argv[1]).read().splitlines(True)
open(sys.argv[1], "w").write(lines[0])
EOF
vw=$(victim warmup_log); rm "$S/logs/warmup.log"; ln "$vw" "$S/logs/warmup.log"
vr=$(victim run_log); rm "$S/logs/$run.log"; ln "$vr" "$S/logs/$run.log"
vi=$(victim index); cp "$S/index.csv" index.keep; rm "$S/index.csv"; cp index.keep "$vi"; echo precious >"$vi"
ln -s "$vi" "$S/index.csv"
python3 -c "import json,sys; json.dump(json.load(open(sys.argv[1])), open(sys.argv[2],'w'))" "$S/sweep.json" sj.keep
rm "$S/sweep.json"; cp sj.keep "$S/sweep.json"
vn=$(victim running); ln -s "$vn" "$S/.running"
vc=$(victim collect_lock); ln -s "$vc" "$S/.collect.lock"
# index.csv a link: its rows are read through it (the user's file), never written through it
cp index.keep "$vi"
out=$("$VB" sweep --resume "$S" --no_report 2>&1)
rc=$?
[ "$rc" = 0 ] || fail "--resume with links in the sweep exited $rc: $out"
head -1 "$vi" | grep -q '^run_index,' && [ "$(wc -l <"$vi")" = 1 ] || fail "index.csv written through its link: $(cat "$vi")"
for v in "$vw" "$vr" "$vn" "$vc"; do untouched "$v" "--resume"; done
own_file "$S/logs/warmup.log" "--resume, logs/warmup.log"
own_file "$S/logs/$run.log" "--resume, the run's log"
own_file "$S/index.csv" "--resume, index.csv"
grep -q "BENCHY::SUMMARY" "$S/logs/$run.log" || fail "the rerun's log: $(cat "$S/logs/$run.log")"
# a hard link at the lock file: refused, nothing written into it
vl=$(victim sweep_lock); rm -f "$S/.sweep.lock"; ln "$vl" "$S/.sweep.lock"
out=$("$VB" sweep --resume "$S" --no_report 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -q "\.sweep\.lock is a hard link" <<<"$out" || fail "--resume with .sweep.lock a hard link: exit $rc: $out"
untouched "$vl" "--resume, .sweep.lock"
rm "$S/.sweep.lock"

# ---- 3. --collect and --retry_failed of a batch sweep ----
out=$("$VB" sweep links.yaml --launcher bsub --dry-run --output_dir co 2>&1) || fail "bsub dry run: $out"
C=$(readlink -f co/links_*)
mkdir -p other/run
printf '{"run_id": "other", "status": "running"}\n' >other/run/run.json
printf 'trial_type,mean_samples_per_s,std_samples_per_s\nFULL,999,1\n' >other/run/summary.csv
cp other/run/run.json other.json.keep
ln -s "$TMP/other/run" "$C/runs/$run"
echo 0 >"$C/status/$run.exit"
out=$("$VB" sweep --collect "$C" --no_report 2>&1)
grep -q "runs/$run is not a real directory" <<<"$out" || fail "--collect took a linked run: $out"
grep -q "^0,runs/$run,failed," "$C/index.csv" || fail "index.csv after a linked run: $(cat "$C/index.csv")"
grep -q ',999' "$C/index.csv" && fail "--collect took another run's numbers: $(cat "$C/index.csv")"
echo 3 >"$C/status/$run.exit"
python3 - "$C/index.csv" <<'EOF'
import sys
lines = open(sys.argv[1]).read().splitlines(True)
open(sys.argv[1], "w").write(lines[0] + lines[1].replace(",failed,", ",dry-run,", 1))
EOF
"$VB" sweep --collect "$C" --no_report >/dev/null 2>&1
cmp -s other/run/run.json other.json.keep || fail "--collect rewrote run.json through runs/$run: $(cat other/run/run.json)"
rm "$C/runs/$run"
mkdir elsewhere_status
mv "$C/status" "$C/status.real" && ln -s "$TMP/elsewhere_status" "$C/status"
out=$("$VB" sweep --collect "$C" --no_report 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -q "status is a symbolic link" <<<"$out" || fail "--collect with status/ a link: exit $rc: $out"
nothing_in elsewhere_status "--collect, status/ a link"
rm "$C/status" && mv "$C/status.real" "$C/status"
# a submission that fails, then --retry_failed with jobs/<run>.lsf a hard link
mkdir failbin
printf '#!/bin/sh\necho "bsub: no queue" >&2\nexit 1\n' >failbin/bsub
chmod +x failbin/bsub
out=$(PATH="$TMP/failbin:$PATH" "$VB" sweep links.yaml --launcher bsub --output_dir rf --no_report 2>&1)
F=$(readlink -f rf/links_*)
grep -q "bsub exit 1" "$F/index.csv" || fail "a failed bsub is not recorded as bsub's: $(cat "$F/index.csv")"
vj=$(victim job_script); rm "$F/jobs/$run.lsf"; ln "$vj" "$F/jobs/$run.lsf"
PATH="$TMP/failbin:$PATH" "$VB" sweep --resume "$F" --retry_failed --no_report >/dev/null 2>&1
untouched "$vj" "--retry_failed, jobs/$run.lsf"
own_file "$F/jobs/$run.lsf" "--retry_failed, jobs/$run.lsf"
[ "$(stat -c %a "$vj")" = "$(stat -c %a "$TMP/victim_index")" ] || fail "--retry_failed changed the victim's mode: $(stat -c %a "$vj")"
[ "$(stat -c %a "$F/jobs/$run.lsf")" = 775 ] || fail "the job script's mode: $(stat -c %a "$F/jobs/$run.lsf")"

# ---- 4. runs/ and logs/ swapped for links during the first run ----
# a stand-in mpirun swaps them at the first run's start (a known moment, no
# timer), then starts the run itself as mpirun would
mkdir swapbin elsewhere_runs elsewhere_logs
cat >swapbin/mpirun <<EOF
#!/bin/bash
# drop mpirun's own options up to the program
while [ \$# -gt 0 ] && [ "\$1" != "$VB" ]; do shift; done
if [ "\$2" = run ] && [ ! -e "$TMP/swapped" ]; then
    touch "$TMP/swapped"
    d=\$(dirname "\$(dirname "\$(sed -n 's/.*--output_dir \\([^ ]*\\).*/\\1/p' <<<"\$*")/x")")
    mv "\$d/runs" "\$d/runs.real" && ln -s "$TMP/elsewhere_runs" "\$d/runs"
    mv "\$d/logs" "\$d/logs.real" && ln -s "$TMP/elsewhere_logs" "\$d/logs"
fi
exec "\$@"
EOF
chmod +x swapbin/mpirun
scenario two "repeats: 2"
out=$(PATH="$TMP/swapbin:$PATH" "$VB" sweep two.yaml --output_dir sw --warmup_run false --no_report 2>&1)
rc=$?
[ -e swapped ] || fail "the stand-in mpirun never ran a run: $out"
[ "$rc" = 2 ] || fail "a sweep whose runs/ and logs/ were swapped exited $rc: $out"
grep -q "runs is a symbolic link" <<<"$out" || fail "the run's refusal of the runs/ link is not its last log line: $out"
grep -q "^vitbench: error: run: .*runs is a symbolic link" sw/two_*/logs.real/000_*.log ||
    fail "the run does not refuse the runs/ link: $(cat sw/two_*/logs.real/000_*.log)"
grep -q "was replaced by a symbolic link" <<<"$out" || fail "the sweep does not stop at the swapped directory: $out"
nothing_in elsewhere_runs "a swapped runs/"
nothing_in elsewhere_logs "a swapped logs/"
echo "test_sweep_links: OK"
