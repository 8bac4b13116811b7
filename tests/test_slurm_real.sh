#!/usr/bin/env bash
# test_slurm_real.sh <vitbench>: `vitbench sweep --launcher sbatch` against a real Slurm.
#   Brings up a one-node cluster of its own (munged, slurmctld, slurmd with a
#   minimal slurm.conf in a temporary directory, fresh munge key, random ports),
#   submits a 2-run sweep job (1 and 2 ranks, srun --mpi=pmix for Open MPI) and
#   one per-run job, and waits for index.csv to say completed.
#   Exit 77 (skipped) when not root, when slurm-wlm / munge are not installed
#   (scripts/setup.sh --test, which test.sh runs, installs them) or when the
#   daemons do not come up.
#   Every wait has a hard limit; the daemons it started are always stopped.
set -u

VB=${1:?usage: test_slurm_real.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
QUICK=$SRC/scenarios/benchy/quick.yaml

fail() { echo "test_slurm_real: FAIL: $*" >&2; exit 1; }
skip() { echo "test_slurm_real: SKIP: $*"; exit 77; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
[ "$(id -u)" = 0 ] || skip "slurmd needs root"
for c in munged mungekey slurmctld slurmd sbatch sinfo squeue scancel timeout; do
    command -v "$c" >/dev/null 2>&1 || skip "$c not installed (scripts/setup.sh --test installs slurm-wlm and munge)"
done

# short path: the munge socket's path must fit a sockaddr_un
T=$(mktemp -d /tmp/vbsl.XXXXXX) || fail "mktemp"
PIDS=()
cleanup() {
    [ -f "$T/slurm.conf" ] && SLURM_CONF=$T/slurm.conf timeout 10 scancel --user=root >/dev/null 2>&1
    local p f
    for f in "$T/slurmd.pid" "$T/slurmctld.pid" "$T/munge/pid"; do [ -s "$f" ] && PIDS+=("$(cat "$f")"); done
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for _ in $(seq 1 50); do
        local alive=0
        for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP # so that the EXIT trap stops the daemons then too

# ---- munge ----
mkdir -p "$T/munge" "$T/state" "$T/spool" && chmod 700 "$T/munge"
mungekey -c -k "$T/munge.key" -f >/dev/null 2>&1 || skip "mungekey could not create a key"
chmod 400 "$T/munge.key"
timeout 20 munged --key-file="$T/munge.key" --socket="$T/munge/sock" --pid-file="$T/munge/pid" \
    --log-file="$T/munge/log" --seed-file="$T/munge/seed" --force >"$T/munged.out" 2>&1 ||
    skip "munged did not start: $(cat "$T/munged.out")"
for _ in $(seq 1 100); do [ -S "$T/munge/sock" ] && break; sleep 0.1; done
[ -S "$T/munge/sock" ] || skip "munged made no socket: $(cat "$T/munge/log" 2>/dev/null)"

# ---- slurm ----
host=$(hostname -s)
port=$((20000 + RANDOM % 20000))
cat >"$T/slurm.conf" <<EOF
ClusterName=vbtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$T/slurm.conf
slurmctld -D -i -f "$T/slurm.conf" >"$T/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D -f "$T/slurm.conf" >"$T/slurmd.out" 2>&1 &
PIDS+=($!)
state=
for _ in $(seq 1 30); do
    state=$(timeout 5 sinfo -h -o %T 2>/dev/null)
    [ "$state" = idle ] && break
    sleep 1
done
[ "$state" = idle ] || skip "the node did not come up (state '$state'): $(tail -3 "$T/slurmctld.log" "$T/slurmd.log" 2>&1)"

# ---- the sweeps ----
cd "$T" || fail "cd $T"
"$VB" datagen --output_dir data/tiny --years 1 --valid_years 1 --samples_per_year 16 --channels 4 --img_size 32,64 \
    >datagen.log 2>&1 || fail "datagen: $(cat datagen.log)"
cat >real.yaml <<'EOF'
name: real
base: {config: tiny, global_batch_size: 4}
ranks: [1, 2]
ranks_per_node: 2
threads_per_rank: 1
time: "5"
srun_mpi: pmix              # Debian's Open MPI starts under srun only with pmix
preamble: ['echo "preamble on $(hostname)"']
EOF

# wait_done DIR LIMIT_S: until no row of index.csv is submitted and the job
# has left the queue (a sweep job's last collect, which writes the report,
# runs after the rows are final)
wait_done() {
    local i
    for i in $(seq 1 "$2"); do
        if ! grep -q ',submitted,' "$1/index.csv" && [ -z "$(timeout 5 squeue -h 2>/dev/null)" ]; then
            return 0
        fi
        sleep 1
    done
    return 1
}

out=$(timeout 200 "$VB" sweep real.yaml --launcher sbatch --sweep_job --output_dir sj --benchy_config "$QUICK" --timeout_s 120 2>&1) ||
    fail "sweep job submission exited $?: $out"
d=$(readlink -f sj/real_*)
wait_done "$d" 150 || fail "sweep job not done after 150 s: $(cat "$d/index.csv"); queue: $(timeout 5 squeue 2>&1); log: $(cat "$d/logs/sweep_job.log" 2>&1)"
got=$(tail -n +2 "$d/index.csv" | cut -d, -f1-6)
[ "$got" = '0,runs/000_ranks=1,completed,0,0,1
1,runs/001_ranks=2,completed,0,0,2' ] || fail "sweep job index.csv: $(cat "$d/index.csv"); log: $(cat "$d/logs/sweep_job.log"; cat "$d"/logs/001*.log)"
grep -q '^preamble on ' "$d/logs/sweep_job.log" || fail "preamble not in the job's output: $(cat "$d/logs/sweep_job.log")"
grep -q '"nranks": *2' "$d/runs/001_ranks=2/benchy_output.json" || fail "2-rank run did not run on 2 ranks"
[ -f "$d/report/report.md" ] || fail "the sweep job wrote no report: $(cat "$d/logs/sweep_job.log")"

out=$(timeout 200 "$VB" sweep real.yaml --launcher sbatch --ranks 2 --output_dir pr --benchy_config "$QUICK" 2>&1) ||
    fail "per-run submission exited $?: $out"
d=$(readlink -f pr/real_*)
wait_done "$d" 120 || fail "per-run job not done after 120 s: $(cat "$d/index.csv"); queue: $(timeout 5 squeue 2>&1)"
got=$(tail -n +2 "$d/index.csv" | cut -d, -f1-4)
[ "$got" = '0,runs/000_ranks=2,completed,0' ] || fail "per-run index.csv: $(cat "$d/index.csv"); log: $(cat "$d/logs/000_ranks=2.log")"

# a job cancelled before its run could finish: the row becomes failed with the
# job's state, not submitted for ever
out=$(timeout 200 "$VB" sweep real.yaml --launcher sbatch --ranks 1 --output_dir cx --benchy_config "$QUICK" \
    --preamble 'sleep 120' 2>&1) || fail "cancel-case submission exited $?: $out"
d=$(readlink -f cx/real_*)
id=$(cat "$d/status/000_ranks=1.job" 2>/dev/null) || fail "no job id recorded: $(ls "$d/status"); $out"
timeout 10 scancel "$id" || fail "scancel $id failed"
for i in $(seq 1 60); do
    [ -z "$(timeout 5 squeue -h 2>/dev/null)" ] && break
    sleep 1
done
rc=0
out=$(timeout 60 "$VB" sweep --collect "$d" --no_report 2>&1) || rc=$?
# (sacct names the state where accounting is kept; this Slurm keeps none)
[ "$rc" = 1 ] && grep -Eq "job $id (ended \(CANCELLED|left the queue) before the run finished" <<<"$out" ||
    fail "collect after scancel: exit $rc: $out"
got=$(tail -n +2 "$d/index.csv" | cut -d, -f1-4)
[ "$got" = '0,runs/000_ranks=1,failed,-1' ] || fail "index.csv after scancel: $(cat "$d/index.csv")"

echo "test_slurm_real: OK"
