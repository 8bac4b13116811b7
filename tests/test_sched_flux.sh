#!/usr/bin/env bash
# test_sched_flux.sh <vitbench>: `vitbench sweep --launcher flux-batch | flux-run` end to end,
# through the Flux stand-in of tests/fixtures/schedulers (flux batch, run, jobs, cancel,
# hostlist: it reads "# flux:" directives as RFC 36 says, refuses what flux refuses, prints F58
# job ids (ƒ...), sets FLUX_JOB_ID and runs the jobs here, Open MPI standing in for flux run).
#   1. the Flux example's dry run: directives and flux run lines read back by the stand-in;
#   2. per-run jobs: submit, run, collect, report; the job id (F58, UTF-8) and hosts recorded;
#   3. a sweep job with a failing run: the later run still completes, the report is written;
#   4. jobs that end without a status: --cancel (flux cancel), and flux cancel by hand taken up
#      by --resume;
#   5. flux-run in an instance, and more nodes than it has refused by flux;
#   6. what flux batch cannot read or the keys do not allow: exit 2, one line naming it.
set -u
NAME=test_sched_flux
VB=${1:?usage: test_sched_flux.sh <path-to-vitbench>}
. "${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}/tests/fixtures/schedulers/lib.sh"

# ---- 1. the Flux example as a Flux user submits it ----
S=$SRC/scenarios/cluster/flux_weak_scaling.yaml
out=$("$VB" sweep "$S" --launcher flux-batch --dry-run --output_dir dry --backend auto 2>&1) || fail "Flux dry run exited $?: $out"
d=$(sweep_dir dry)
[ "$(grep -c '^flux batch .*\.flux$' <<<"$out")" = 10 ] || fail "want 10 'flux batch script' lines: $out"
[ -z "$(ls "$FAKE_SCHED_DIR/jobs")" ] || fail "a dry run submitted a job: $(job_states)"
j=$d/jobs/005_ranks=8_noddp=true.flux
bash -n "$j" || fail "not valid bash: $j"
got=$(FAKE_PARSE_ONLY=1 flux batch "$j") || fail "the stand-in flux refuses $j: $got"
want="name=flux_weak_scaling_005
nodes=2
exclusive=True
time=20m
queue=pbatch
output=$d/logs/005_ranks=8_noddp=true.job.log"
[ "$got" = "$want" ] || fail "$j: flux batch reads
$got
want
$want"
grep -qF "run_point 005_ranks=8_noddp=true $d/logs/005_ranks=8_noddp=true.log 1200 flux run -n8 -N2 -c16 -g1 \
-o cpu-affinity=per-task -o gpu-affinity=per-task $VB run " "$j" || fail "$j: flux run line: $(grep run_point "$j")"
for j in "$d"/jobs/*.flux; do FAKE_PARSE_ONLY=1 flux batch "$j" >/dev/null || fail "the stand-in flux refuses $j"; done
# the stand-in itself refuses what flux batch refuses (a test of the test)
printf '#!/bin/bash\n# flux: -N 1\n# flux: -t 1:00\necho x\n' >bad.flux
FAKE_PARSE_ONLY=1 flux batch bad.flux >/dev/null 2>&1 && fail "the stand-in flux took -t 1:00"
printf '#!/bin/bash\n# flux: -N 1\necho x\n# flux: -t 10m\n' >bad.flux
FAKE_PARSE_ONLY=1 flux batch bad.flux >/dev/null 2>&1 && fail "the stand-in flux took a directive after a command"

# ---- 2. per-run jobs: submit, run, collect, report ----
cat >fl.yaml <<'EOF2'
name: fl
base: {config: tiny, global_batch_size: 4}
ranks: [1, 2]
ranks_per_node: 2
threads_per_rank: 1
cluster:
  cpus_per_task: 1
  time: 10m
  queue: pdebug
  flux_extra: ["--setattr=user.study=weak"]
  preamble: ['echo "preamble in job $FLUX_JOB_ID"']
EOF2
per_run_jobs flux-batch fl.yaml
# 4201 and 4202 in F58 ("2FS" "2FT"), behind the UTF-8 letter ƒ
ids=$(cat "$d"/status/*.job | sort | tr '\n' ' ')
[ "$ids" = "flux ƒ2FS flux ƒ2FT " ] || fail "job ids recorded: $ids"
[ "$(cat "$d/status/001_ranks=2.hosts")" = vbnode1 ] || fail "the job's hosts (flux hostlist): $(cat "$d/status/001_ranks=2.hosts")"
grep -q '^preamble in job ƒ2FT$' "$d/logs/001_ranks=2.job.log" || fail "preamble / FLUX_JOB_ID: $(cat "$d/logs/001_ranks=2.job.log")"

# ---- 3. a sweep job with a failing run ----
sweep_job_one_failing flux-batch fl.yaml 30m flux
grep -qx '# flux: -t 30m' "$d/jobs/sweep_job.flux" || fail "sweep job header: $(grep '^# flux:' "$d/jobs/sweep_job.flux")"
grep -q 'fake flux run: this step fails' "$d/logs/000_ranks=1.log" || fail "not flux run's failure: $(cat "$d/logs/000_ranks=1.log")"

# ---- 4. jobs that end without a status ----
cancelled_and_resumed flux-batch fl.yaml Flux CANCELED flux cancel

# ---- 5. flux-run in an instance ----
out=$(FAKE_FLUX_NNODES=1 "$VB" sweep fl.yaml --launcher flux-run --output_dir fr --benchy_config "$QUICK" --no_report 2>&1) ||
    fail "flux-run sweep exited $?: $out"
grep -qF "OMP_NUM_THREADS=1 flux run -n2 -N1 -c1 -o cpu-affinity=per-task $VB run " <<<"$out" || fail "flux run line: $out"
all_completed "$(sweep_dir fr)" 2
# an instance of one node: flux refuses a 2-node run, the sweep records it failed
rc=0
out=$(FAKE_FLUX_NNODES=1 "$VB" sweep fl.yaml --launcher flux-run --ranks 4 --output_dir fr2 --benchy_config "$QUICK" \
    --no_report 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q 'unsatisfiable request: 2 nodes, the instance has 1' <<<"$out" || fail "2 nodes of 1: exit $rc: $out"

# ---- 6. refused: exit 2, one line naming the key ----
base='name: bad
base: {config: tiny}
ranks: [2]
ranks_per_node: 2
'
bad() { printf '%s%s\n' "$base" "$1" >"$TMP/$2.yaml"; }
bad 'cluster: {time: "1:00"}' t;   expect_exit2 t.yaml time "'1:00'" 'time limit Flux takes' -- t.yaml --launcher flux-batch --dry-run --output_dir bad
bad 'cluster: {account: a1}' a; expect_exit2 a.yaml account "Flux's keys" -- a.yaml --launcher flux-batch --dry-run --output_dir bad
bad 'cluster: {flux_extra: ["-N 2"]}' n; expect_exit2 n.yaml flux_extra -N 'key / flag nodes' -- n.yaml --launcher flux-batch --dry-run --output_dir bad
bad 'cluster: {flux_extra: ["--output=x"]}' o; expect_exit2 o.yaml flux_extra --output 'set by the sweep' -- o.yaml --launcher flux-batch --dry-run --output_dir bad
bad 'cluster: {flux_extra: ["-t10"]}' t2; expect_exit2 t2.yaml flux_extra -t 'key / flag time' -- t2.yaml --launcher flux-batch --dry-run --output_dir bad
expect_exit2 '--output_dir' "'{'" -- fl.yaml --launcher flux-batch --dry-run --output_dir "$TMP/{{id}}"
[ ! -e bad ] || fail "a refused sweep created $TMP/bad"
# a directory with blanks, # and $ goes in single quotes and is read back whole
out=$("$VB" sweep fl.yaml --launcher flux-batch --dry-run --output_dir "$TMP/two words #1 \$x" 2>&1) || fail "dry run: $out"
d=$(sweep_dir "$TMP/two words #1 \$x")
got=$(FAKE_PARSE_ONLY=1 flux batch "$d/jobs/000_ranks=1.flux" | grep '^output=') || fail "flux refuses the quoted --output"
[ "$got" = "output=$d/logs/000_ranks=1.job.log" ] || fail "--output as flux batch reads it: $got"

echo "$NAME: OK"
