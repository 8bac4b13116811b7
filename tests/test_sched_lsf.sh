#!/usr/bin/env bash
# test_sched_lsf.sh <vitbench>: `vitbench sweep --launcher bsub | jsrun` end to end, through the
# LSF stand-ins of tests/fixtures/schedulers (bsub, bjobs, bkill, jsrun: they read #BSUB lines
# and jsrun's resource sets as LSF does, refuse what it refuses, set LSB_JOBID,
# LSB_DJOB_HOSTFILE and LSB_MCPU_HOSTS, and run the jobs here, Open MPI standing in for jsrun).
#   1. the Summit scenario's dry run: #BSUB lines and jsrun lines an LSF user types, read back
#      by the stand-in bsub; the runs named weak_scale_N;
#   2. per-run jobs: submit, run, collect, report; the job id and hosts each job recorded;
#   3. a sweep job with a failing run: the later run still completes, the report is written;
#   4. jobs that end without a status: a held job cancelled with --cancel, and one killed with
#      bkill taken up again by --resume --retry_failed;
#   5. jsrun inside an allocation; outside one, or short of nodes: exit 2;
#   6. what LSF cannot read or the keys do not allow: exit 2, one line naming it.
set -u
NAME=test_sched_lsf
VB=${1:?usage: test_sched_lsf.sh <path-to-vitbench>}
. "${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}/tests/fixtures/schedulers/lib.sh"

# ---- 1. the SC22 study as an LSF user submits it ----
S=$SRC/scenarios/cluster/summit_weak_scaling.yaml
out=$("$VB" sweep "$S" --launcher bsub --dry-run --output_dir dry --backend auto 2>&1) || fail "Summit dry run exited $?: $out"
d=$(sweep_dir dry)
[ "$(grep -c '^bsub < .*\.lsf$' <<<"$out")" = 6 ] || fail "want 6 'bsub < script' lines: $out"
[ "$(tail -n +2 "$d/index.csv" | cut -d, -f2,3 | tr '\n' ' ')" = "runs/weak_scale_1,dry-run runs/weak_scale_2,dry-run \
runs/weak_scale_4,dry-run runs/weak_scale_8,dry-run runs/weak_scale_16,dry-run runs/weak_scale_32,dry-run " ] ||
    fail "the runs are not named weak_scale_N: $(cat "$d/index.csv")"
[ -z "$(ls "$FAKE_SCHED_DIR/jobs")" ] || fail "a dry run submitted a job: $(job_states)"
k=0
for n in 1 2 4 8 16 32; do
    j=$d/jobs/weak_scale_$n.lsf
    bash -n "$j" || fail "not valid bash: $j"
    got=$(FAKE_PARSE_ONLY=1 bsub <"$j") || fail "the stand-in bsub refuses $j: $got"
    want="-J=summit_weak_scaling_$(printf %03d $k)
-nnodes=$n
-W=0:30
-P=stf218
-alloc_flags=gpumps smt4
-o=$d/logs/weak_scale_$n.job.log"
    [ "$got" = "$want" ] || fail "$j: bsub reads
$got
want
$want"
    grep -qF "run_point weak_scale_$n $d/logs/weak_scale_$n.log 1800 jsrun -n$((6 * n)) -a1 -c7 -g1 -r6 --bind=packed:7 \
--launch_distribution=packed --smpiargs=-disable_gpu_hooks $VB run " "$j" || fail "$j: jsrun line: $(grep run_point "$j")"
    grep -qx 'export OMP_NUM_THREADS=7' "$j" || fail "$j: threads: $(grep OMP "$j")"
    grep -qx 'module load cuda' "$j" || fail "$j: preamble: $(cat "$j")"
    k=$((k + 1))
done
# the stand-in itself refuses what bsub refuses (a test of the test)
printf '#!/bin/bash\n#BSUB -nnodes 1\n#BSUB -W 1:75\necho x\n' >bad.lsf
FAKE_PARSE_ONLY=1 bsub <bad.lsf >/dev/null 2>&1 && fail "the stand-in bsub took -W 1:75"
printf '#!/bin/bash\n#BSUB -nnodes 1\n#BSUB -alloc_flags "gpumps\n' >bad.lsf
FAKE_PARSE_ONLY=1 bsub <bad.lsf >/dev/null 2>&1 && fail "the stand-in bsub took an unmatched quote"

# ---- 2. per-run jobs: submit, run, collect, report ----
cat >lsf.yaml <<'EOF'
name: lsf
base: {config: tiny, global_batch_size: 4}
ranks: [1, 2]
ranks_per_node: 2
threads_per_rank: 1
cluster:
  cpus_per_task: 1
  time: "0:10"
  account: proj1
  queue: debug
  alloc_flags: gpumps smt4
  bsub_extra: ["-B"]
  preamble: ['echo "preamble on $(hostname)"']
EOF
per_run_jobs bsub lsf.yaml
ids=$(cat "$d"/status/*.job | sort | tr '\n' ' ')
[ "$ids" = "lsf 4201 lsf 4202 " ] || fail "job ids recorded: $ids"
[ "$(cat "$d/status/001_ranks=2.hosts" | tr '\n' ' ')" = "batch1 vbnode1 " ] ||
    fail "the job's hosts (LSB_DJOB_HOSTFILE): $(cat "$d/status/001_ranks=2.hosts")"
grep -q '^# job lsf 4202 on batch1,vbnode1$' "$d/logs/001_ranks=2.log" || fail "run log header: $(head -3 "$d/logs/001_ranks=2.log")"
grep -q 'BENCHY::SUMMARY' "$d/logs/001_ranks=2.log" || fail "the run's log has no benchy summary: $(tail "$d/logs/001_ranks=2.log")"
grep -q 'Subject: Job 4202: <lsf_001> ended, exit code 0' "$d/logs/001_ranks=2.job.log" ||
    fail "the job's own output is not at -o: $(cat "$d/logs/001_ranks=2.job.log")"
grep -q '^preamble on ' "$d/logs/001_ranks=2.job.log" || fail "preamble did not run: $(cat "$d/logs/001_ranks=2.job.log")"

# ---- 3. a sweep job with a failing run ----
sweep_job_one_failing bsub lsf.yaml 0:30 lsf
grep -qx '#BSUB -nnodes 1' "$d/jobs/sweep_job.lsf" && grep -qx '#BSUB -W 0:30' "$d/jobs/sweep_job.lsf" ||
    fail "sweep job header: $(grep '^#BSUB' "$d/jobs/sweep_job.lsf")"
grep -q 'fake jsrun: this step fails' "$d/logs/000_ranks=1.log" || fail "not jsrun's failure: $(cat "$d/logs/000_ranks=1.log")"

# ---- 4. jobs that end without a status ----
cancelled_and_resumed bsub lsf.yaml LSF EXIT bkill

# a dry run's script submitted by hand: its job records its own id (LSB_JOBID), so a job
# killed before its run ended is found by --collect too
out=$("$VB" sweep lsf.yaml --launcher bsub --dry-run --ranks 2 --output_dir byhand --benchy_config "$QUICK" 2>&1) ||
    fail "dry run exited $?: $out"
d=$(sweep_dir byhand)
FAKE_HANG="--run_name 000_" bsub <"$d/jobs/000_ranks=2.lsf" >/dev/null || fail "bsub by hand"
for i in $(seq 1 1200); do grep -q 'this step hangs' "$d/logs/000_ranks=2.log" 2>/dev/null && break; sleep 0.5; done
[ "$(cat "$d/status/000_ranks=2.job" 2>/dev/null)" = "lsf $(job_states | tail -1 | cut -d' ' -f1)" ] ||
    fail "the job did not record its id: $(ls "$d/status"); $(job_states)"
bkill "$(cut -d' ' -f2 "$d/status/000_ranks=2.job")" >/dev/null || fail "bkill"
wait_jobs
rc=0
out=$("$VB" sweep --collect "$d" --no_report 2>&1) || rc=$?
[ "$rc" = 1 ] && [ "$(index_rows "$d")" = 'runs/000_ranks=2,failed,-1' ] || fail "a killed hand-submitted job: exit $rc: $out"

# ---- 5. jsrun inside an allocation ----
printf 'batch1\n' >hosts1
for i in $(seq 42); do echo vbnode1; done >>hosts1
out=$(LSB_JOBID=77 LSB_DJOB_HOSTFILE=$TMP/hosts1 "$VB" sweep lsf.yaml --launcher jsrun --output_dir js \
    --benchy_config "$QUICK" --no_report 2>&1) || fail "jsrun sweep exited $?: $out"
grep -qF "OMP_NUM_THREADS=1 jsrun -n2 -a1 -c1 -r2 --bind=packed:1 --launch_distribution=packed $VB run " <<<"$out" ||
    fail "jsrun line: $out"
all_completed "$(sweep_dir js)" 2
(export LSB_JOBID=77 LSB_DJOB_HOSTFILE=$TMP/hosts1
    expect_exit2 '--launcher jsrun' 'run 001_ranks=4 needs 2 nodes' 'job 77) has 1' -- lsf.yaml --launcher jsrun \
        --ranks 1,4 --output_dir bad) || exit 1
(unset LSB_JOBID; expect_exit2 '--launcher jsrun' 'not inside an allocation of LSF (LSB_JOBID is not set)' -- lsf.yaml \
    --launcher jsrun --output_dir bad) || exit 1

# ---- 6. refused: exit 2, one line naming the key ----
base='name: bad
base: {config: tiny}
ranks: [2]
ranks_per_node: 2
'
bad() { printf '%s%s\n' "$base" "$1" >"$TMP/$2.yaml"; }
bad 'cluster: {time: "00:30:00"}' t;   expect_exit2 t.yaml 'time' '00:30:00' 'time limit LSF takes' -- t.yaml --launcher bsub --dry-run --output_dir bad
expect_exit2 'flag --time' '1:75' -- lsf.yaml --launcher bsub --dry-run --output_dir bad --time 1:75
bad 'cluster: {constraint: gpu}' c;    expect_exit2 c.yaml 'constraint' "LSF's keys" -- c.yaml --launcher bsub --dry-run --output_dir bad
bad 'cluster: {bsub_extra: ["-J other"]}' j; expect_exit2 j.yaml bsub_extra -J 'set by the sweep' -- j.yaml --launcher bsub --dry-run --output_dir bad
bad 'cluster: {bsub_extra: ["-W 10"]}' w; expect_exit2 w.yaml bsub_extra -W 'key / flag time' -- w.yaml --launcher bsub --dry-run --output_dir bad
bad "cluster: {bsub_extra: ['-wa \"USR1']}" q; expect_exit2 q.yaml bsub_extra 'unmatched quote' -- q.yaml --launcher bsub --dry-run --output_dir bad
bad 'cluster: {bsub_extra: ["-u a #b"]}' h; expect_exit2 h.yaml bsub_extra 'unquoted #' -- h.yaml --launcher bsub --dry-run --output_dir bad
bad 'cluster: {alloc_flags: "gpumps \"x\""}' a; expect_exit2 a.yaml alloc_flags -- a.yaml --launcher bsub --dry-run --output_dir bad
bad 'cluster: {resource_set: per_gpu}' r; expect_exit2 r.yaml resource_set per_gpu -- r.yaml --launcher bsub --dry-run --output_dir bad
# a node's resource set of 2 ranks x 1073741824 cores: jsrun -c would overflow to -2147483648
bad 'cluster: {resource_set: per_node, cpus_per_task: 1073741824}' ov
expect_exit2 ov.yaml 'cpus_per_task 1073741824 x 2 ranks on a node' 'more cores than a job script can name' -- ov.yaml \
    --launcher bsub --dry-run --output_dir bad
printf 'name: bad\nbase: {config: tiny}\nranks: [2]\n' >nn.yaml
expect_exit2 nn.yaml 'bsub needs' ranks_per_node -- nn.yaml --launcher bsub --dry-run --output_dir bad
expect_exit2 '--output_dir' "'%'" -- lsf.yaml --launcher bsub --dry-run --output_dir "$TMP/50%"
expect_exit2 '--output_dir' "'\"'" -- lsf.yaml --launcher bsub --dry-run --output_dir "$TMP/a\"b"
[ ! -e bad ] || fail "a refused sweep created $TMP/bad"
# a directory with blanks is written in double quotes and read back whole
out=$("$VB" sweep lsf.yaml --launcher bsub --dry-run --output_dir "$TMP/two words" 2>&1) || fail "dry run under a blank: $out"
d=$(sweep_dir "$TMP/two words")
got=$(FAKE_PARSE_ONLY=1 bsub <"$d/jobs/000_ranks=1.lsf" | grep '^-o=') || fail "bsub refuses the quoted -o"
[ "$got" = "-o=$d/logs/000_ranks=1.job.log" ] || fail "-o as bsub reads it: $got"

echo "$NAME: OK"
