#!/usr/bin/env bash
# test_sched_pbs.sh <vitbench>: `vitbench sweep --launcher qsub | mpiexec` end to end, through the
# PBS Pro stand-ins of tests/fixtures/schedulers (qsub, qstat, qdel, mpiexec: they read #PBS lines
# and PALS's options as PBS does, refuse what it refuses, set PBS_JOBID, PBS_NODEFILE and
# PBS_O_WORKDIR, start jobs in the home directory and run them here, Open MPI standing in for
# mpiexec).
#   1. the Polaris scenario's dry run: #PBS lines and mpiexec lines read back by the stand-in qsub;
#   2. per-run jobs: submit, run, collect, report; the job id and hosts each job recorded;
#   3. a sweep job with a failing run: the later run still completes, the report is written;
#   4. jobs that end without a status: --cancel (qdel), and qdel by hand taken up by --resume;
#   5. mpiexec inside an allocation; outside one, or short of nodes: exit 2;
#   6. what PBS cannot read or the keys do not allow: exit 2, one line naming it.
set -u
NAME=test_sched_pbs
VB=${1:?usage: test_sched_pbs.sh <path-to-vitbench>}
. "${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}/tests/fixtures/schedulers/lib.sh"

# ---- 1. the Polaris example as a PBS user submits it ----
S=$SRC/scenarios/cluster/polaris_weak_scaling.yaml
out=$("$VB" sweep "$S" --launcher qsub --dry-run --output_dir dry --backend auto 2>&1) || fail "Polaris dry run exited $?: $out"
d=$(sweep_dir dry)
[ "$(grep -c '^qsub .*\.pbs$' <<<"$out")" = 14 ] || fail "want 14 'qsub script' lines: $out"
[ -z "$(ls "$FAKE_SCHED_DIR/jobs")" ] || fail "a dry run submitted a job: $(job_states)"
j=$d/jobs/007_ranks=16_noddp=true.pbs
bash -n "$j" || fail "not valid bash: $j"
got=$(FAKE_PARSE_ONLY=1 qsub "$j") || fail "the stand-in qsub refuses $j: $got"
want="-N=polaris_weak_scaling_007
-l=select=4:ncpus=32:ngpus=4:mpiprocs=4
-l=place=scatter
-l=walltime=00:20:00
-l=filesystems=home:eagle
-A=PROJECT
-q=prod
-j=oe
-o=$d/logs/007_ranks=16_noddp=true.job.log"
[ "$(sort <<<"$got")" = "$(sort <<<"$want")" ] || fail "$j: qsub reads
$got
want
$want"
grep -qF "run_point 007_ranks=16_noddp=true $d/logs/007_ranks=16_noddp=true.log 1200 mpiexec -n 16 --ppn 4 --depth 8 \
--cpu-bind depth $VB run " "$j" || fail "$j: mpiexec line: $(grep run_point "$j")"
grep -qx 'export OMP_NUM_THREADS=8' "$j" || fail "$j: threads: $(grep OMP "$j")"
grep -q '^#PBS -l select=1:ncpus=8:ngpus=4:mpiprocs=1$' "$d/jobs/000_ranks=1_noddp=false.pbs" ||
    fail "one rank: $(grep '^#PBS' "$d/jobs/000_ranks=1_noddp=false.pbs")"
for j in "$d"/jobs/*.pbs; do FAKE_PARSE_ONLY=1 qsub "$j" >/dev/null || fail "the stand-in qsub refuses $j"; done
# the stand-in itself refuses what qsub refuses (a test of the test)
printf '#!/bin/bash\n#PBS -N 1job\necho x\n' >bad.pbs
FAKE_PARSE_ONLY=1 qsub bad.pbs >/dev/null 2>&1 && fail "the stand-in qsub took -N 1job"
printf '#!/bin/bash\n#PBS -l walltime=1:75:00\necho x\n' >bad.pbs
FAKE_PARSE_ONLY=1 qsub bad.pbs >/dev/null 2>&1 && fail "the stand-in qsub took walltime=1:75:00"

# ---- 2. per-run jobs: submit, run, collect, report ----
cat >pbs.yaml <<'EOF2'
name: pbs
base: {config: tiny, global_batch_size: 4}
ranks: [1, 2]
ranks_per_node: 2
threads_per_rank: 1
cluster:
  cpus_per_task: 1
  time: "00:10:00"
  account: proj1
  queue: debug
  qsub_extra: ["-l filesystems=home:eagle", "-m n"]
  preamble: ['echo "preamble in $PBS_O_WORKDIR"']
EOF2
per_run_jobs qsub pbs.yaml
ids=$(cat "$d"/status/*.job | sort | tr '\n' ' ')
[ "$ids" = "pbs 4201.fakepbs pbs 4202.fakepbs " ] || fail "job ids recorded: $ids"
[ "$(cat "$d/status/001_ranks=2.hosts")" = vbnode1 ] || fail "the job's hosts (PBS_NODEFILE): $(cat "$d/status/001_ranks=2.hosts")"
grep -q '^# job pbs 4202.fakepbs on vbnode1$' "$d/logs/001_ranks=2.log" || fail "run log header: $(head -3 "$d/logs/001_ranks=2.log")"
grep -q "^preamble in $TMP\$" "$d/logs/001_ranks=2.job.log" || fail "preamble / PBS_O_WORKDIR: $(cat "$d/logs/001_ranks=2.job.log")"

# ---- 3. a sweep job with a failing run ----
sweep_job_one_failing qsub pbs.yaml 00:30:00 pbs
grep -qx '#PBS -l select=1:ncpus=2:mpiprocs=2' "$d/jobs/sweep_job.pbs" || fail "sweep job header: $(grep '^#PBS' "$d/jobs/sweep_job.pbs")"
grep -q 'fake mpiexec: this step fails' "$d/logs/000_ranks=1.log" || fail "not mpiexec's failure: $(cat "$d/logs/000_ranks=1.log")"

# ---- 4. jobs that end without a status ----
cancelled_and_resumed qsub pbs.yaml PBS "F, exit status 271" qdel

# ---- 5. mpiexec inside an allocation ----
printf 'vbnode1\nvbnode1\n' >nodes1
out=$(PBS_JOBID=88.fakepbs PBS_NODEFILE=$TMP/nodes1 "$VB" sweep pbs.yaml --launcher mpiexec --output_dir mx \
    --benchy_config "$QUICK" --no_report 2>&1) || fail "mpiexec sweep exited $?: $out"
grep -qF "OMP_NUM_THREADS=1 mpiexec -n 2 --ppn 2 --depth 1 --cpu-bind depth $VB run " <<<"$out" || fail "mpiexec line: $out"
all_completed "$(sweep_dir mx)" 2
(export PBS_JOBID=88.fakepbs PBS_NODEFILE=$TMP/nodes1
    expect_exit2 '--launcher mpiexec' 'run 001_ranks=4 needs 2 nodes' 'job 88.fakepbs) has 1' -- pbs.yaml \
        --launcher mpiexec --ranks 1,4 --output_dir bad) || exit 1
(unset PBS_JOBID; expect_exit2 '--launcher mpiexec' 'not inside an allocation of PBS (PBS_JOBID is not set)' -- pbs.yaml \
    --launcher mpiexec --output_dir bad) || exit 1

# ---- 6. refused: exit 2, one line naming the key ----
base='name: bad
base: {config: tiny}
ranks: [2]
ranks_per_node: 2
'
bad() { printf '%s%s\n' "$base" "$1" >"$TMP/$2.yaml"; }
bad 'cluster: {time: "30"}' t;   expect_exit2 t.yaml time "'30'" 'time limit PBS takes' -- t.yaml --launcher qsub --dry-run --output_dir bad
bad 'cluster: {alloc_flags: smt4}' a; expect_exit2 a.yaml alloc_flags "PBS's keys" -- a.yaml --launcher qsub --dry-run --output_dir bad
bad 'cluster: {qsub_extra: ["-N other"]}' n; expect_exit2 n.yaml qsub_extra -N 'set by the sweep' -- n.yaml --launcher qsub --dry-run --output_dir bad
bad 'cluster: {qsub_extra: ["-l walltime=1:00:00"]}' w; expect_exit2 w.yaml qsub_extra 'walltime' 'key / flag time' -- w.yaml --launcher qsub --dry-run --output_dir bad
bad 'cluster: {qsub_extra: ["-lselect=2:ncpus=4"]}' s; expect_exit2 s.yaml qsub_extra 'select' -- s.yaml --launcher qsub --dry-run --output_dir bad
bad 'cluster: {qsub_extra: ["-A other"]}' A; expect_exit2 A.yaml qsub_extra -A 'key / flag account' -- A.yaml --launcher qsub --dry-run --output_dir bad
# 2 ranks x 2000000000 cores a node: #PBS -l select=1:ncpus would overflow to a negative count
bad 'cluster: {cpus_per_task: 2000000000}' ov
expect_exit2 ov.yaml 'cpus_per_task 2000000000 x 2 ranks on a node' 'more cores than a job script can name' -- ov.yaml \
    --launcher qsub --dry-run --output_dir bad
printf 'name: 1pbs\nbase: {config: tiny}\nranks: [2]\nranks_per_node: 2\n' >digit.yaml
expect_exit2 digit.yaml 'name' '1pbs' 'cannot start with a digit' -- digit.yaml --launcher qsub --dry-run --output_dir bad
printf 'name: bad\nbase: {config: tiny}\nranks: [2]\n' >nn.yaml
expect_exit2 nn.yaml 'qsub needs' ranks_per_node -- nn.yaml --launcher qsub --dry-run --output_dir bad
expect_exit2 '--output_dir' "':'" -- pbs.yaml --launcher qsub --dry-run --output_dir "$TMP/a:b"
expect_exit2 '--output_dir' 'a blank' -- pbs.yaml --launcher qsub --dry-run --output_dir "$TMP/two words"
[ ! -e bad ] || fail "a refused sweep created $TMP/bad"

echo "$NAME: OK"
