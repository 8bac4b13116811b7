#!/usr/bin/env bash
# test_sweep_orphan.sh <vitbench>: a sweep killed with SIGKILL takes its run
# down with it, and a --resume refuses while a run it recorded still lives.
# The launcher is a stand-in `mpirun` first on PATH that ignores SIGTERM (as
# a launcher may): the sweep's own PR_SET_PDEATHSIG on the launcher then
# stops nothing, so only the run's own watch of the sweep can.
#   1. a long run; kill -9 of the sweep: the run notices the sweep is gone,
#      ends as "interrupted" in run.json and its process exits
#   2. a launcher that outlives a killed sweep: --resume exits 2 naming the
#      run and its process group; once that group has ended, --resume runs
#   3. a run starts only once .running records it: where the record cannot
#      be written the point is not started (a sweep killed before the record
#      would otherwise leave a run nothing knows of)
#   4. .running names the group by its leader's start time: an unrelated
#      group that has the id since does not block --resume; the group that
#      started then does
set -u

VB=${1:?usage: test_sweep_orphan.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_sweep_orphan: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
REAL_MPIRUN=$(command -v mpirun) || fail "mpirun not found"
TMP=$(mktemp -d /tmp/vb_orphan.XXXXXX) || fail "mktemp"
PIDS=()
cleanup() {
    # only what this test started: its sweeps and the process groups they recorded
    for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
cd "$TMP" || fail "cd $TMP"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

"$VB" datagen --output_dir data --years 1 --valid_years 1 --channels 4 --img_size 36,72 --samples_per_year 16 \
    --seed 0 >/dev/null 2>&1 || fail "datagen"
# FULL trials without end: the run only stops when it is stopped
cat >endless.yaml <<'EOF'
global:
  report_freq: 1000
IO:
  run_benchmark: False
synthetic:
  run_benchmark: False
full:
  run_benchmark: True
  nbatches: 2
  ntrials: 1000000
  nwarmup: 0
EOF
scenario() { # NAME: a one-point sweep of endless runs
    cat >"$1.yaml" <<EOF
name: $1
command: run
base:
  config: tiny
  train_data_path: $TMP/data/train
  valid_data_path: $TMP/data/valid
  global_means_path: $TMP/data/stats/global_means.npy
  global_stds_path: $TMP/data/stats/global_stds.npy
  benchy_config: $TMP/endless.yaml
EOF
}
mkdir bin
# wait_for SECONDS CMD...: polls CMD every 0.2 s; false when it never held
wait_for() {
    local n=$(($1 * 5))
    shift
    while [ $n -gt 0 ]; do "$@" && return 0; sleep 0.2; n=$((n - 1)); done
    return 1
}
run_json_says() { grep -q "\"status\":[[:space:]]*\"$2\"" "$1" 2>/dev/null; }

# ---- 1. the run stops with its sweep ----
cat >bin/mpirun <<EOF
#!/usr/bin/env bash
# a launcher that ignores SIGTERM and passes nothing on; the ranks inherit the ignore
trap '' TERM
"$REAL_MPIRUN" "\$@"
EOF
chmod +x bin/mpirun
scenario orphan
PATH=$TMP/bin:$PATH "$VB" sweep orphan.yaml --ranks 1 --output_dir out --no_report >sweep1.log 2>&1 &
SWEEP=$!
PIDS+=("$SWEEP")
wait_for 120 bash -c 'ls out/orphan_*/runs/*/trials.csv' >/dev/null 2>&1 || fail "the run did not start: $(cat sweep1.log)"
S=$(ls -d out/orphan_*)
RUN=$(ls -d "$S"/runs/*)
PGID=$(sed -n 's/^pgid //p' "$S/.running")
[ -n "$PGID" ] && PIDS+=("$PGID") || fail "no process group recorded in $S/.running"
run_json_says "$RUN/run.json" running || fail "the run is not running: $(cat "$RUN/run.json")"
kill -KILL "$SWEEP"
wait "$SWEEP" 2>/dev/null
# the run sees its sweep gone within a second; a step of the tiny config is far shorter than the bound
wait_for 120 bash -c "! pgrep -g $PGID -f 'vitbench run' >/dev/null" ||
    fail "the run outlived its sweep: $(pgrep -a -g "$PGID")"
run_json_says "$RUN/run.json" interrupted || fail "run.json does not say interrupted: $(grep status "$RUN/run.json")"
grep -q "the sweep that started this run (process .*) is gone: stopping the run" "$S/logs/"*.log ||
    fail "the run's log does not say why it stopped: $(tail -3 "$S/logs/"*.log)"
kill -KILL -- "-$PGID" 2>/dev/null # the stand-in launcher, which ignored the sweep's end

# ---- 2. --resume refuses while the killed sweep's run lives ----
cat >bin/mpirun <<EOF
#!/usr/bin/env bash
# the probe of the launcher runs for real; a run's launcher hangs on, ignoring SIGTERM
case " \$* " in *" version "*) exec "$REAL_MPIRUN" "\$@" ;; esac
trap '' TERM
while :; do sleep 1; done
EOF
scenario held
PATH=$TMP/bin:$PATH "$VB" sweep held.yaml --ranks 1 --output_dir out --no_report >sweep2.log 2>&1 &
SWEEP=$!
PIDS+=("$SWEEP")
wait_for 60 bash -c 'test -s out/held_*/.running' || fail "no run recorded: $(cat sweep2.log)"
S=$(ls -d out/held_*)
PGID=$(sed -n 's/^pgid //p' "$S/.running")
[ -n "$PGID" ] && PIDS+=("$PGID") || fail "no process group recorded"
kill -KILL "$SWEEP"
wait "$SWEEP" 2>/dev/null
vb_pgroup_alive() { kill -0 -- "-$1" 2>/dev/null; }
vb_pgroup_alive "$PGID" || fail "the stand-in launcher did not outlive the sweep"
out=$("$VB" sweep --resume "$S" 2>&1 >/dev/null)
rc=$?
[ "$rc" = 2 ] || fail "--resume beside a live run exited $rc, want 2: $out"
[ "$(wc -l <<<"$out")" = 1 ] || fail "--resume printed more than one line: $out"
grep -q "run 000_ranks=1 of the stopped sweep is still running (process group $PGID on " <<<"$out" ||
    fail "--resume does not name the run and its group: $out"
[ -e "$S/logs/000_ranks=1.log" ] || fail "the live run's log was moved aside: $(ls "$S/logs")"
kill -KILL -- "-$PGID"
wait_for 30 bash -c "! kill -0 -- -$PGID 2>/dev/null" || fail "process group $PGID did not end"
# the group has ended: --resume goes on (the point runs again, stopped by --timeout_s)
printf '#!/usr/bin/env bash\nexec "%s" "$@"\n' "$REAL_MPIRUN" >bin/mpirun
PATH=$TMP/bin:$PATH "$VB" sweep --resume "$S" --timeout_s 3 >resume.log 2>&1
grep -q "still running" resume.log && fail "--resume still refused after the group ended: $(cat resume.log)"
grep -q "vitbench sweep: resuming" resume.log || fail "--resume did not resume: $(cat resume.log)"
[ -e "$S/.running" ] && fail "the record of the resumed run outlived it: $(cat "$S/.running")"
# ---- 3. no run without its record ----
cat >bin/mpirun <<EOF
#!/usr/bin/env bash
case " \$* " in *" version "*) exec "$REAL_MPIRUN" "\$@" ;; esac
touch "$TMP/started"
exec "$REAL_MPIRUN" "\$@"
EOF
rm -f started
mkdir -p "$S/.running/x" # a rename over it fails
PATH=$TMP/bin:$PATH "$VB" sweep --resume "$S" --retry_failed --timeout_s 3 --no_report >gate.log 2>&1
[ ! -e started ] || fail "the run started without its .running record: $(cat gate.log)"
grep -q "it is not started" gate.log || fail "the sweep does not say the run was not started: $(cat gate.log)"
grep -q '^0,runs/000_ranks=1,failed,126,.*,not started (.running)$' "$S/index.csv" ||
    fail "index.csv after a run not started: $(cat "$S/index.csv")"
rm -rf "$S/.running"

# ---- 4. the group's leader by its start time ----
# a process group of its own (setsid: its id is its leader's pid), a child of this shell
python3 -c 'import os, time; os.setsid(); open("other.pid", "w").write(str(os.getpid())); time.sleep(300)' &
py=$!
wait_for 30 test -s other.pid || fail "no process group of another"
other=$(cat other.pid)
PIDS+=("$other")
record() { # START: .running naming group $other, its leader started at START
    printf 'pgid %s\nstart %s\nhost %s\nboot %s\nrun 000_ranks=1\n' "$other" "$1" "$(hostname)" \
        "$(cat /proc/sys/kernel/random/boot_id)" >"$S/.running"
}
record 1 # the sweep's run started at tick 1; the group of that id now is another's, started later
printf '#!/usr/bin/env bash\nexec "%s" "$@"\n' "$REAL_MPIRUN" >bin/mpirun
PATH=$TMP/bin:$PATH "$VB" sweep --resume "$S" --retry_failed --timeout_s 3 --no_report >reuse.log 2>&1
grep -q "still running" reuse.log && fail "an unrelated group with the recorded id blocked --resume: $(cat reuse.log)"
grep -q "vitbench sweep: resuming" reuse.log || fail "--resume did not resume: $(cat reuse.log)"
record "$(awk '{sub(/.*\) /, ""); print $20}' "/proc/$other/stat")"
out=$(timeout 120 "$VB" sweep --resume "$S" --retry_failed --timeout_s 3 2>&1 >/dev/null)
[ $? = 2 ] && grep -q "is still running (process group $other on " <<<"$out" ||
    fail "the recorded leader's own group did not block --resume: $out"
kill -KILL "$other"
wait "$py" 2>/dev/null
echo "test_sweep_orphan: OK"
