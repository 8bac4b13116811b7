#!/usr/bin/env bash
# test_slurm_scripts.sh <vitbench>: Slurm job scripts of `vitbench sweep`, without Slurm.
#   1. --launcher sbatch --dry-run with every Slurm key (scenario file) and flag
#      overrides: the #SBATCH directives parsed back, bash -n, OMP_NUM_THREADS,
#      --output, the sbatch: values and sbatch_extra lines as sbatch reads them
#      back (blanks, quotes, # and % in them) in per-run and sweep jobs,
#      srun's CPU and GPU binding, the preamble lines in order; --launcher srun
#      gets the same srun flags; the shipped Perlmutter scenarios write scripts
#      (the LSF, PBS and Flux ones: test_sched_*.sh).
#   2. bad Slurm keys / flags / combinations: exit 2, one line naming it; a CR or
#      LF in any path or value that reaches a job script or launcher line
#      (--output_dir, the scenario file, the current directory, config values,
#      the sbatch: mapping, launcher args, preamble) likewise, and a backslash
#      in the directory of the jobs' logs; sbatch_extra lines sbatch would
#      refuse or cut short, or with an option a key or the sweep sets anywhere.
#   3. --sweep_job: its one script run with bash and a fake srun first in PATH
#      (records its argv, runs the command itself or under mpirun): every run in
#      the planned order, one made to fail, later ones still completed, index.csv
#      completed / failed, the report written. Then per-run scripts submitted by
#      a fake sbatch that runs them at once (its output where sbatch's reading
#      of #SBATCH --output puts it): index.csv follows each job, also under a
#      sweep directory with blanks, quotes, # and %.
#   4. jobs that end without a status: a fake sbatch that only queues, a fake
#      squeue: waiting while the job is listed or squeue fails, failed with
#      exit_code -1 and the job's state once it is gone.
set -u

VB=${1:?usage: test_slurm_scripts.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
QUICK=$SRC/scenarios/benchy/quick.yaml

fail() { echo "test_slurm_scripts: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_slurm.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

# The #SBATCH arguments of a job script, one a line, read the way sbatch reads
# them (src/sbatch/opt.c, _opt_batch_script and get_argument): only lines
# starting #SBATCH, up to the first line that is neither blank nor a comment;
# words split at blanks; "..." and '...' group; a backslash takes the next
# character as it is (a blank too), inside quotes as well; an unquoted # ends
# the line, so does a word that comes out empty; an unmatched quote is fatal.
cat >sbatch_args.awk <<'EOF'
function blank(c) { return c == " " || c == "\t" || c == "\r" || c == "\f" || c == "\v" }
substr($0, 1, 7) != "#SBATCH" {
    if ($0 ~ /^[ \t\r\f\v]*(#|$)/) next
    exit 0
}
{
    line = substr($0, 8); n = length(line); i = 1
    for (;;) {
        while (i <= n && blank(substr(line, i, 1))) i++
        if (i > n) break
        if (substr(line, i, 1) == ":") { print "sbatch: line " NR ": Unexpected `:`" >"/dev/stderr"; exit 3 }
        arg = ""; got = 0; quoted = 0; esc = 0; comment = 0
        while (i <= n) {
            c = substr(line, i, 1)
            if (!quoted && blank(c)) break
            if (esc) {
                esc = 0
            } else if (c == "\\") {
                i++
                if (substr(line, i, 1) == " ") { arg = arg " "; got = 1; i++ } else esc = 1
                continue
            } else if (quoted) {
                if (c == q) { quoted = 0; i++; continue }
            } else if (c == "\"" || c == "'") {
                quoted = 1; q = c; i++
                continue
            } else if (c == "#") {
                comment = 1
                break
            }
            arg = arg c; got = 1; i++
        }
        if (quoted) { print "sbatch: line " NR ": Unmatched `" q "`" >"/dev/stderr"; exit 3 }
        if (!got) break
        print arg
        if (comment) break
    }
}
EOF
sbatch_args() { awk -f "$TMP/sbatch_args.awk" "$1"; }

sweep_dir() { # the one sweep directory under $1
    local d
    d=$(ls -d "$1"/*_2* 2>/dev/null) || fail "no sweep directory in $1"
    [ "$(echo "$d" | wc -l)" = 1 ] || fail "several sweep directories in $1: $d"
    readlink -f "$d"
}

# ---- 1. directives and srun lines ----
cat >gpu.yaml <<'EOF'
name: gpu
base: {config: tiny, backend: auto}
ranks: [4, 8]
ranks_per_node: 4
gpus_per_node: 4
cpus_per_task: 32
threads_per_rank: 16
time: "00:30:00"
account: m0000
qos: regular
constraint: gpu
partition: batch
reservation: res1
srun_mpi: pmix
sbatch_extra: ["--mail-type=END", "--signal=USR1@60"]
sbatch: {exclusive: ""}
preamble:
  - module load cudatoolkit
  - export NCCL_NET_GDR_LEVEL=PHB
  - echo "third line"
EOF
out=$("$VB" sweep gpu.yaml --launcher sbatch --dry-run --output_dir sb --time 45 --qos debug 2>&1) || fail "dry run exited $?: $out"
d=$(sweep_dir sb)
job=$d/jobs/001_ranks=8.sbatch
[ -f "$job" ] || fail "no $job: $(ls "$d/jobs")"
# the #SBATCH directives as option=value lines
directives=$(sed -n 's/^#SBATCH //p' "$job")
want="--job-name=gpu_001
--ntasks=8
--nodes=2
--ntasks-per-node=4
--cpus-per-task=32
--gpus-per-node=4
--time=45
--account=m0000
--qos=debug
--constraint=gpu
--partition=batch
--reservation=res1
--output=$d/logs/001_ranks=8.log
--mail-type=END
--signal=USR1@60
--exclusive"
[ "$directives" = "$want" ] || fail "directives of $job:
$directives
want:
$want"
# no directive after the first command (sbatch stops reading them there)
awk '/^#SBATCH/ && seen { exit 1 } /^[^#]/ { seen = 1 }' "$job" || fail "an #SBATCH line after a command: $(cat "$job")"
for j in "$d"/jobs/*.sbatch; do bash -n "$j" || fail "not valid bash: $j"; done
grep -qx 'export OMP_NUM_THREADS=16' "$job" || fail "threads_per_rank 16 is not OMP_NUM_THREADS: $(cat "$job")"
srun_line=$(grep '^run_point ' "$job") || fail "no run_point line: $(cat "$job")"
grep -qF -- " srun --ntasks=8 --nodes=2 --ntasks-per-node=4 --cpus-per-task=32 --cpu-bind=cores --gpus-per-task=1 --mpi=pmix $VB run " <<<"$srun_line" ||
    fail "srun flags: $srun_line"
# the preamble, in order, before the first run
pre=$(grep -n -e '^module load cudatoolkit$' -e '^export NCCL_NET_GDR_LEVEL=PHB$' -e '^echo "third line"$' -e '^run_point ' "$job" | cut -d: -f2-)
[ "$pre" = 'module load cudatoolkit
export NCCL_NET_GDR_LEVEL=PHB
echo "third line"
'"$srun_line" ] || fail "preamble lines out of order or missing: $pre"
grep -q '^#SBATCH --nodes=1$' "$d/jobs/000_ranks=4.sbatch" || fail "4 ranks on 4 per node: $(cat "$d/jobs/000_ranks=4.sbatch")"

# --output and the sbatch: mapping's values come back from sbatch's reading of
# the lines exactly, whatever blanks, quotes, # or % they hold: per-run jobs
# and a sweep job
cat >q.yaml <<'EOF'
name: q
base: {config: tiny}
ranks: [2]
threads_per_rank: 1
sbatch_extra: ["--mail-type END", "--signal='B:USR1@60'"]
sbatch:
  comment: "two  words #not a comment \"dq\" 'sq' back\\slash\ttab"
  exclusive: ""
  mail-user: a@b.c
  begin: "now+1hour"
EOF
qdir="$TMP/team results #1 \"dq\" 'sq' 50%"
for sj in "" --sweep_job; do
    out=$("$VB" sweep q.yaml --launcher sbatch --dry-run $sj --output_dir "$qdir$sj" 2>&1) ||
        fail "dry run into '$qdir$sj' exited $?: $out"
    d=$(sweep_dir "$qdir$sj")
    if [ -n "$sj" ]; then job=$d/jobs/sweep_job.sbatch jobname=q_sweep log=$d/logs/sweep_job.log
    else job=$d/jobs/000_ranks=2.sbatch jobname=q_000 log=$d/logs/000_ranks=2.log; fi
    bash -n "$job" || fail "not valid bash: $job"
    args=$(sbatch_args "$job") || fail "sbatch would refuse $job: $(grep '^#SBATCH' "$job")"
    # --output is a filename pattern: %% is one %, and no other % may be left
    out_arg=$(grep '^--output=' <<<"$args")
    grep -q '%' <<<"${out_arg//%%/}" && fail "a lone % in --output: $out_arg"
    got=$(sed '/^--output=/s/%%/%/g' <<<"$args")
    want="--job-name=$jobname
--ntasks=2
--output=$log
--mail-type
END
--signal=B:USR1@60
--comment=two  words #not a comment \"dq\" 'sq' back\\slash"$'\t'"tab
--exclusive
--mail-user=a@b.c
--begin=now+1hour"
    [ "$got" = "$want" ] || fail "#SBATCH arguments as sbatch reads them:
$got
want:
$want
from:
$(grep '^#SBATCH' "$job")"
done

# flags override the file; list flags replace its lists; cpus_per_task sets the threads without threads_per_rank
sed '/threads_per_rank/d' gpu.yaml >gpu2.yaml
out=$("$VB" sweep gpu2.yaml --launcher sbatch --dry-run --output_dir sb2 --gpu_bind closest --srun_mpi none \
    --preamble "module load other" --sbatch_extra "--mail-type=FAIL" --cpus_per_task 16 --ranks 4 2>&1) ||
    fail "dry run with flag overrides exited $?: $out"
job=$(sweep_dir sb2)/jobs/000_ranks=4.sbatch
grep -qx 'export OMP_NUM_THREADS=16' "$job" || fail "cpus_per_task 16 is not OMP_NUM_THREADS: $(cat "$job")"
grep -qF -- "--cpus-per-task=16 --cpu-bind=cores --gpus-per-node=4 --gpu-bind=closest --mpi=none $VB run" "$job" ||
    fail "gpu_bind closest / srun_mpi flags: $(grep run_point "$job")"
grep -qx 'module load other' "$job" && ! grep -q 'cudatoolkit' "$job" || fail "--preamble did not replace the file's: $(cat "$job")"
grep -qx '#SBATCH --mail-type=FAIL' "$job" && ! grep -q 'mail-type=END' "$job" || fail "--sbatch_extra did not replace: $(cat "$job")"

# the srun launcher (inside an allocation) binds the same way
out=$("$VB" sweep gpu.yaml --launcher srun --dry-run --output_dir sr --ranks 4 2>&1) || fail "srun dry run exited $?: $out"
grep -qF "OMP_NUM_THREADS=16 srun --ntasks=4 --nodes=1 --ntasks-per-node=4 --cpus-per-task=32 --cpu-bind=cores --gpus-per-task=1 --mpi=pmix $VB run" <<<"$out" ||
    fail "srun launcher line: $out"
# a --cpu-bind of the user's own replaces ours
out=$("$VB" sweep gpu.yaml --launcher srun --dry-run --output_dir sr2 --ranks 4 --launcher_args "--cpu-bind=sockets" 2>&1) ||
    fail "srun dry run with --cpu-bind exited $?: $out"
grep -q -- '--cpu-bind=cores' <<<"$out" && fail "--cpu-bind=cores next to the user's --cpu-bind=sockets: $out"
grep -qF -- '--mpi=pmix --cpu-bind=sockets' <<<"$out" || fail "user's --cpu-bind missing: $out"

# the shipped cluster scenarios write their scripts (backend auto: this build may lack CUDA)
for f in "$SRC"/scenarios/cluster/perlmutter_*.yaml; do
    n=$(basename "$f" .yaml)
    out=$("$VB" sweep "$f" --launcher sbatch --dry-run --output_dir "cl_$n" --backend auto 2>&1) || fail "$f: dry run exited $?: $out"
    out=$("$VB" sweep "$f" --launcher sbatch --dry-run --sweep_job --output_dir "clj_$n" --backend auto 2>&1) ||
        fail "$f: --sweep_job dry run exited $?: $out"
    cd_=$(sweep_dir "cl_$n")
    for j in "$cd_"/jobs/*.sbatch "$(sweep_dir "clj_$n")"/jobs/sweep_job.sbatch; do
        bash -n "$j" || fail "not valid bash: $j"
        for w in '^#SBATCH --constraint=gpu$' '^#SBATCH --gpus-per-node=4$' '^#SBATCH --account=' '^#SBATCH --time=' \
            '^#SBATCH --cpus-per-task=' '^export OMP_NUM_THREADS=' ' --cpu-bind=cores ' ' --gpus-per-task=1 ' ' --backend auto '; do
            grep -q -- "$w" "$j" || fail "$j lacks /$w/: $(cat "$j")"
        done
    done
done

# ---- 2. bad input: exit 2, one line naming the key / flag ----
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
base='name: bad
base: {config: tiny}
ranks: [2, 4]
'
bad() { printf '%s%s\n' "$base" "$1" >"$TMP/$2.yaml"; }
bad 'time: "1:75:00"' t1;        expect_exit2 t1.yaml time 1:75:00 -- t1.yaml --launcher sbatch --dry-run --output_dir bad
expect_exit2 '--time' 'half an hour' -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --time 'half an hour'
bad 'ranks_per_node: 3' rpn;     expect_exit2 rpn.yaml ranks_per_node -- rpn.yaml --launcher sbatch --dry-run --output_dir bad
expect_exit2 ranks_per_node gpu.yaml -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --ranks 6
bad 'nodes: 3' nodes;            expect_exit2 nodes.yaml nodes -- nodes.yaml --launcher sbatch --dry-run --output_dir bad
expect_exit2 nodes ranks_per_node -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --nodes 2
bad 'gpus_per_node: 4' g1;       expect_exit2 g1.yaml gpus_per_node ranks_per_node -- g1.yaml --launcher sbatch --dry-run --output_dir bad
bad 'gpus_per_node: 4
ranks_per_node: 4' g2;           expect_exit2 g2.yaml gpus_per_node backend -- g2.yaml --launcher sbatch --dry-run --output_dir bad
expect_exit2 gpus_per_node 'own GPU' -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --gpus_per_node 2
expect_exit2 gpu_bind -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --gpu_bind nearest
expect_exit2 gpu_bind none -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --gpu_bind none
bad 'gpu_bind: closest' gb;      expect_exit2 gb.yaml gpu_bind gpus_per_node -- gb.yaml --launcher sbatch --dry-run --output_dir bad
expect_exit2 srun_mpi -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --srun_mpi 'pm ix'
expect_exit2 account -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --account 'm 1'
expect_exit2 sbatch_extra time -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --sbatch_extra --time=10
expect_exit2 sbatch_extra -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --sbatch_extra mail-type=END
bad 'sbatch_extra: ["--job-name=x"]' se; expect_exit2 se.yaml sbatch_extra job-name -- se.yaml --launcher sbatch --dry-run --output_dir bad
# sbatch_extra lines are read as sbatch reads them: every option on the line,
# no quote left open, nothing dropped by a # or an empty word
expect_exit2 sbatch_extra 'set by the sweep' -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --sbatch_extra '--mail-type=END --output=/tmp/x'
expect_exit2 sbatch_extra time -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --sbatch_extra '-t10'
expect_exit2 sbatch_extra 'unmatched quote' -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --sbatch_extra '--comment="a b'
expect_exit2 sbatch_extra 'unquoted #' -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --sbatch_extra '--comment=a #b'
expect_exit2 sbatch_extra 'empty word' -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --sbatch_extra '--comment "" --qos=x'
expect_exit2 sbatch_extra 'backslash before a blank' -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --sbatch_extra '--comment=a\ b'
bad 'time: 30
sbatch: {time: "00:30:00"}' st; expect_exit2 st.yaml sbatch.time -- st.yaml --launcher sbatch --dry-run --output_dir bad
bad 'preamble: {module: load}' pm; expect_exit2 pm.yaml preamble -- pm.yaml --launcher sbatch --dry-run --output_dir bad
bad 'cpus_per_task: 0' cpt;      expect_exit2 cpt.yaml cpus_per_task -- cpt.yaml --launcher sbatch --dry-run --output_dir bad
bad 'sweep_job: true' sj;        expect_exit2 sj.yaml sweep_job sbatch -- sj.yaml --launcher mpirun --dry-run --output_dir bad
expect_exit2 --sweep_job sbatch -- gpu.yaml --launcher srun --dry-run --output_dir bad --sweep_job
[ ! -e bad ] || fail "a rejected sweep created $TMP/bad"

# a CR or LF in a path or value would end its line of the job script (the rest a
# command the job runs) or of a printed launcher line: exit 2, naming where it came from
nl=$'\n'
cr=$'\r'
expect_exit2 --output_dir 'line break' -- gpu.yaml --launcher sbatch --dry-run --output_dir "bad${nl}touch $TMP/pwned #"
expect_exit2 --output_dir 'line break' -- gpu.yaml --launcher sbatch --dry-run --output_dir "bad${cr}x"
expect_exit2 --output_dir 'line break' -- gpu.yaml --launcher mpirun --dry-run --output_dir "bad${nl}x"
cp gpu.yaml "gpu${nl}touch pwned.yaml"
expect_exit2 'scenario FILE' 'line break' -- "gpu${nl}touch pwned.yaml" --launcher sbatch --dry-run --output_dir bad
expect_exit2 --resume 'line break' -- --resume "bad${nl}x"
expect_exit2 --collect 'line break' -- --collect "bad${cr}x"
expect_exit2 --train_data_path 'line break' -- gpu.yaml --launcher mpirun --dry-run --output_dir bad --train_data_path "/d${nl}x"
expect_exit2 --launcher_args 'line break' -- gpu.yaml --launcher srun --dry-run --output_dir bad --launcher_args "--x${nl}y"
expect_exit2 --preamble 'line break' -- gpu.yaml --launcher sbatch --dry-run --output_dir bad --preamble "echo a${cr}echo b"
bad 'matrix: {train_data_path: [/a, "/b\nc"]}' mnl
expect_exit2 mnl.yaml matrix.train_data_path 'line break' -- mnl.yaml --launcher sbatch --dry-run --output_dir bad
bad 'sbatch: {comment: "a\rb"}' snl
expect_exit2 snl.yaml sbatch.comment 'line break' -- snl.yaml --launcher sbatch --dry-run --output_dir bad
# Slurm drops every backslash from a job's log path (and then expands no %j):
# refused in the output directory, or in the current one under a relative one
expect_exit2 --output_dir backslash -- q.yaml --launcher sbatch --dry-run --output_dir 'bad\x'
mkdir 'back\slash' || fail "mkdir a directory with a backslash"
out=$(cd 'back\slash' && "$VB" sweep "$TMP/q.yaml" --launcher sbatch --dry-run --output_dir bad 2>&1)
rc=$?
[ "$rc" = 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && grep -q 'current directory.*backslash' <<<"$out" ||
    fail "a relative --output_dir under a directory with a backslash: exit $rc: $out"
[ -z "$(ls -A 'back\slash')" ] || fail "a sweep refused for a backslash created: $(ls -A 'back\slash')"
# job scripts cd to the directory the sweep started in
mkdir "cwd${nl}touch pwned" || fail "mkdir a directory with a line break"
out=$(cd "cwd${nl}touch pwned" && "$VB" sweep "$TMP/gpu.yaml" --launcher sbatch --dry-run --output_dir "$TMP/bad" 2>&1)
rc=$?
[ "$rc" = 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && grep -q 'current directory.*line break' <<<"$out" ||
    fail "sweep from a directory with a line break: exit $rc: $out"
[ -z "$(ls -d bad* "$TMP"/pwned 2>/dev/null)" ] || fail "a sweep refused for a line break created: $(ls -d bad* "$TMP"/pwned)"

# ---- 3. a sweep job and per-run jobs run for real, through a fake srun / sbatch ----
mkdir -p bin
cat >bin/srun <<'EOF'
#!/usr/bin/env bash
# fake srun: records its argv; skips its options; runs the command (under mpirun for several
# tasks); exits 3 without running it when the command line contains $FAKE_SRUN_FAIL
printf '%s\n' "$*" >>"$FAKE_SRUN_LOG"
ntasks=1
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do
    case $1 in --ntasks=*) ntasks=${1#--ntasks=} ;; esac
    shift
done
if [ -n "${FAKE_SRUN_FAIL:-}" ] && [[ "$*" == *"$FAKE_SRUN_FAIL"* ]]; then
    echo "fake srun: this step fails" >&2
    exit 3
fi
[ "$ntasks" -gt 1 ] && exec mpirun -np "$ntasks" --oversubscribe -x OMP_NUM_THREADS --bind-to none "$@"
exec "$@"
EOF
cat >bin/sbatch <<'EOF'
#!/usr/bin/env bash
# fake sbatch: runs the job script at once, its output where #SBATCH --output says
out=$(awk -f "$(dirname "$0")/../sbatch_args.awk" "$1" | sed -n 's/^--output=//p' | sed 's/%%/%/g')
timeout 300 bash "$1" >"$out" 2>&1 </dev/null
echo "Submitted batch job $$"
EOF
chmod +x bin/srun bin/sbatch
"$VB" datagen --output_dir data/tiny --years 1 --valid_years 1 --samples_per_year 16 --channels 4 --img_size 32,64 \
    >datagen.log 2>&1 || fail "datagen: $(cat datagen.log)"
cat >sj.yaml <<'EOF'
name: sj
base: {config: tiny, global_batch_size: 4}
ranks: [1, 2]
ranks_per_node: 2
threads_per_rank: 1
preamble: ['echo "preamble ran on $(hostname)"']
matrix:
  seed: [1, 2]
EOF
out=$("$VB" sweep sj.yaml --launcher sbatch --dry-run --sweep_job --output_dir sj --benchy_config "$QUICK" --timeout_s 300 2>&1) ||
    fail "--sweep_job dry run exited $?: $out"
d=$(sweep_dir sj)
[ "$(ls "$d/jobs")" = sweep_job.sbatch ] || fail "want one job script, got: $(ls "$d/jobs")"
job=$d/jobs/sweep_job.sbatch
for w in '^#SBATCH --nodes=1$' '^#SBATCH --ntasks-per-node=2$' '^#SBATCH --ntasks=2$' "^#SBATCH --output=$d/logs/sweep_job.log$"; do
    grep -q -- "$w" "$job" || fail "sweep job lacks /$w/: $(cat "$job")"
done
[ "$(grep -c '^run_point ' "$job")" = 4 ] || fail "want 4 run_point lines: $(cat "$job")"
bash -n "$job" || fail "not valid bash: $job"
rc=0
PATH=$TMP/bin:$PATH FAKE_SRUN_LOG=$TMP/srun.log FAKE_SRUN_FAIL="--run_name 001_" timeout 600 bash "$job" >job.out 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "the sweep job with a failed run exited $rc, want 1: $(cat job.out)"
# every run, in the planned order, each with its own shape
got=$(sed 's/.* --run_name //' srun.log)
[ "$got" = '000_ranks=1_seed=1
001_ranks=1_seed=2
002_ranks=2_seed=1
003_ranks=2_seed=2' ] || fail "srun saw the runs: $got"
grep -q -- '^--ntasks=2 --nodes=1 --ntasks-per-node=2 --cpu-bind=cores ' srun.log || fail "2-rank step flags: $(cat srun.log)"
want_rows='0,runs/000_ranks=1_seed=1,completed,0,0,1,1,1
1,runs/001_ranks=1_seed=2,failed,3,0,1,1,2,,,,,,,,,exit 3
2,runs/002_ranks=2_seed=1,completed,0,0,2,1,1
3,runs/003_ranks=2_seed=2,completed,0,0,2,1,2'
got=$(tail -n +2 "$d/index.csv" | awk -F, -v OFS=, '$3 == "completed" { NF = 8 } 1')
[ "$got" = "$want_rows" ] || fail "index.csv after the sweep job: $(cat "$d/index.csv"); job output: $(cat job.out)"
bad=$(awk -F, 'NR > 1 && $3 == "completed" && !($9 > 0 && $11 > 0)' "$d/index.csv")
[ -z "$bad" ] || fail "completed rows without headline numbers: $bad"
grep -q 'fake srun: this step fails' "$d/logs/001_ranks=1_seed=2.log" || fail "failed run's log: $(cat "$d/logs/001_ranks=1_seed=2.log")"
grep -q '^preamble ran on ' job.out || fail "preamble did not run: $(cat job.out)"
[ -f "$d/report/report.md" ] || fail "the sweep job's last collect wrote no report: $(cat job.out)"
# collecting again changes nothing and says what failed
rc=0
out=$("$VB" sweep --collect "$d" --no_report 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q '3 completed, 1 failed, 0 waiting' <<<"$out" || fail "--collect again: exit $rc: $out"

# the sweep job stopped during a point and submitted again: points it
# finished are not run twice, the cut-off point's first directory moves aside,
# and the rerun's directory is the one index.csv records
out=$("$VB" sweep sj.yaml --launcher sbatch --dry-run --sweep_job --output_dir sj2 --benchy_config "$QUICK" --timeout_s 300 2>&1) ||
    fail "second --sweep_job dry run exited $?: $out"
d2=$(sweep_dir sj2)
job2=$d2/jobs/sweep_job.sbatch
PATH=$TMP/bin:$PATH FAKE_SRUN_LOG=$TMP/srun2.log timeout 600 bash "$job2" >job2.out 2>&1 || fail "first submission: $(cat job2.out)"
p2=002_ranks=2_seed=1 p3=003_ranks=2_seed=2
# what a job stopped during p2 leaves: p2's directory unfinished and without a
# status file, p3 never started, both rows still submitted
rm -f "$d2/status/$p2.exit" "$d2/status/$p3.exit"
rm -rf "${d2:?}/runs/$p3"
python3 - "$d2" "$p2" "$p3" <<'EOF' || fail "could not stage the stopped job"
import csv, json, sys
d, p2, p3 = sys.argv[1:]
j = json.load(open("%s/runs/%s/run.json" % (d, p2)))
j["status"] = "running"
json.dump(j, open("%s/runs/%s/run.json" % (d, p2), "w"))
rows = list(csv.reader(open(d + "/index.csv")))
for r in rows[1:]:
    if r[1] in ("runs/" + p2, "runs/" + p3):
        r[2:] = ["submitted"] + [""] * (len(r) - 3)
csv.writer(open(d + "/index.csv", "w", newline="")).writerows(rows)
EOF
PATH=$TMP/bin:$PATH FAKE_SRUN_LOG=$TMP/srun3.log timeout 600 bash "$job2" >job3.out 2>&1 || fail "second submission: $(cat job3.out)"
got=$(sed 's/.* --run_name //' srun3.log)
[ "$got" = "$p2
$p3" ] || fail "the second submission ran: $got (want only the unfinished $p2 and $p3): $(cat job3.out)"
grep -q "$p2: an earlier submission's unfinished run moved to runs/$p2.unfinished-1" job3.out || fail "no move aside: $(cat job3.out)"
grep -q '"status":[[:space:]]*"running"' "$d2/runs/$p2.unfinished-1/run.json" || fail "the unfinished attempt was not kept aside"
grep -q '"status":[[:space:]]*"completed"' "$d2/runs/$p2/run.json" || fail "runs/$p2 is not the rerun's completed run"
[ -e "$d2/runs/$p2-2" ] && fail "the rerun went to runs/$p2-2, orphaned from index.csv"
got=$(awk -F, -v OFS=, 'NR > 1 { print $2, $3 }' "$d2/index.csv")
[ "$got" = "runs/000_ranks=1_seed=1,completed
runs/001_ranks=1_seed=2,completed
runs/$p2,completed
runs/$p3,completed" ] || fail "index.csv after the second submission: $(cat "$d2/index.csv")"

# per-run jobs through the fake sbatch: each job collects itself as it ends
rc=0
out=$(PATH=$TMP/bin:$PATH FAKE_SRUN_LOG=$TMP/srun2.log FAKE_SRUN_FAIL="--run_name 000_" "$VB" sweep sj.yaml --launcher sbatch \
    --ranks 1 --output_dir pr --benchy_config "$QUICK" 2>&1) || rc=$?
# the jobs ran before sbatch returned: the sweep already knows one failed
[ "$rc" = 1 ] || fail "per-run sbatch sweep with a failed job exited $rc, want 1: $out"
d=$(sweep_dir pr)
got=$(tail -n +2 "$d/index.csv" | cut -d, -f1-4)
[ "$got" = '0,runs/000_ranks=1_seed=1,failed,3
1,runs/001_ranks=1_seed=2,completed,0' ] || fail "index.csv after per-run jobs: $(cat "$d/index.csv"); sweep: $out"
grep -q 'fake srun: this step fails' "$d/logs/000_ranks=1_seed=1.log" || fail "job output is not the run's log: $(ls "$d/logs")"
[ "$(ls "$d/status")" = '000_ranks=1_seed=1.exit
000_ranks=1_seed=1.hosts
000_ranks=1_seed=1.job
001_ranks=1_seed=2.exit
001_ranks=1_seed=2.hosts
001_ranks=1_seed=2.job' ] || fail "status files: $(ls "$d/status")"
# where each run ran: the job's host list (no SLURM_JOB_NODELIST outside Slurm: this host)
[ "$(cat "$d/status/001_ranks=1_seed=2.hosts")" = "$(hostname)" ] || fail "hosts: $(cat "$d/status/001_ranks=1_seed=2.hosts")"
# a sweep directory with blanks, quotes, # and %: the job's output (the fake
# sbatch reads --output by sbatch's rules) is the run's log, and it completes
cat >one.yaml <<'EOF'
name: one
base: {config: tiny, global_batch_size: 4}
ranks: [1]
threads_per_rank: 1
EOF
odd="$TMP/per run #2 \"dq\" 'sq' 100%"
out=$(PATH=$TMP/bin:$PATH FAKE_SRUN_LOG=$TMP/srun3.log "$VB" sweep one.yaml --launcher sbatch --output_dir "$odd" \
    --benchy_config "$QUICK" --no_report 2>&1) || fail "per-run job under '$odd' exited $?: $out"
d=$(sweep_dir "$odd")
grep -q '^vitbench sweep: 000_ranks=1: exit 0 ' "$d/logs/000_ranks=1.log" ||
    fail "the job's output is not the run's log: $(ls "$d/logs"); sweep: $out"
[ "$(tail -n +2 "$d/index.csv" | cut -d, -f3,4)" = completed,0 ] || fail "index.csv under '$odd': $(cat "$d/index.csv")"

# ---- 4. jobs that end without a status (cancelled, out of time, a node lost) ----
mkdir -p bin2
cat >bin2/sbatch <<'EOF'
#!/usr/bin/env bash
# fake sbatch: queues the job (runs nothing), prints its id
echo "Submitted batch job 4242"
EOF
cat >bin2/squeue <<'EOF'
#!/usr/bin/env bash
# fake squeue: lists $FAKE_QUEUE ("ID STATE"), or fails as without a controller
if [ -n "${FAKE_SQUEUE_FAIL:-}" ]; then echo "squeue: error: Unable to contact slurm controller" >&2; exit 1; fi
[ -n "${FAKE_QUEUE:-}" ] && printf '%s\n' "$FAKE_QUEUE"
exit 0
EOF
printf '#!/usr/bin/env bash\necho TIMEOUT\n' >bin2/sacct
# the sweep wants srun on PATH before it submits; the queued jobs never run it
cp bin/srun bin2/srun
chmod +x bin2/sbatch bin2/squeue bin2/sacct bin2/srun
collect() { # ENV...: --collect of $d with the fake squeue; output in $out, exit status in $rc
    rc=0
    out=$(env PATH="$TMP/bin2:$PATH" "$@" "$VB" sweep --collect "$d" --no_report 2>&1) || rc=$?
}
rc=0
out=$(PATH=$TMP/bin2:$PATH FAKE_QUEUE="4242 PENDING" "$VB" sweep sj.yaml --launcher sbatch --ranks 1 --output_dir held \
    --benchy_config "$QUICK" 2>&1) || rc=$?
[ "$rc" = 0 ] || fail "held submission exited $rc: $out"
d=$(sweep_dir held)
[ "$(cat "$d/status/000_ranks=1_seed=1.job")" = 4242 ] || fail "job id not recorded: $(ls "$d/status")"
collect FAKE_QUEUE="4242 RUNNING"
[ "$rc" = 0 ] && grep -q '0 completed, 0 failed, 2 waiting' <<<"$out" || fail "a running job: exit $rc: $out"
collect FAKE_QUEUE="17 RUNNING" FAKE_SQUEUE_FAIL=1
[ "$rc" = 0 ] && grep -q '0 completed, 0 failed, 2 waiting' <<<"$out" || fail "squeue without a controller: exit $rc: $out"
collect FAKE_QUEUE="17 RUNNING"
[ "$rc" = 1 ] && grep -q '0 completed, 2 failed, 0 waiting' <<<"$out" && grep -q 'job 4242 ended (TIMEOUT)' <<<"$out" ||
    fail "a job gone from the queue without a status: exit $rc: $out"
got=$(tail -n +2 "$d/index.csv" | cut -d, -f3,4 | sort -u)
[ "$got" = 'failed,-1' ] || fail "index.csv of jobs that ended without a status: $(cat "$d/index.csv")"

echo "test_slurm_scripts: OK"
