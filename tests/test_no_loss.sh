#!/usr/bin/env bash
# test_no_loss.sh <vitbench>: results are never lost silently.
#  - a results disk that fills up mid-run stops the run: exit 1, ONE line
#    naming the file and the OS error, run.json "failed", no temporaries;
#  - datagen that fails (disk full) or is stopped (SIGTERM) leaves no partial
#    year file and no temporary;
#  - a checkpoint that cannot be written: exit 1 naming it, no temporary;
#  - SIGTERM during train saves a checkpoint marked interrupted with its step,
#    exits 143 with run.json "interrupted";
#  - `vitbench run | head -1`: the closed stdout stops the run like a signal,
#    results kept, run.json "interrupted", exit 141 (128 + SIGPIPE).
# A full disk is simulated with RLIMIT_FSIZE (writes past it fail with EFBIG
# once SIGXFSZ is ignored): it needs no mount and holds for root, whom
# permission bits (chmod 555) would not stop. The limit is set before each
# process starts, so what fails does not depend on how far a run got first
# (applied later, a fast machine had already written the checkpoint). Runs
# and train start MPI as an isolated singleton: the default singleton forks
# an orted whose PMIx shared-memory store needs more room than the limit
# leaves, and which reports the SIGXFSZ it forwards on stderr.
set -u

VB=${1:?usage: test_no_loss.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset BENCHY_CONFIG_FILE

fail() { echo "test_no_loss: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(cd "$(dirname "$VB")" && pwd)/$(basename "$VB")

TMP=$(mktemp -d /tmp/vb_noloss.XXXXXX) || fail "mktemp"
PID=
cleanup() {
    [ -n "$PID" ] && kill -9 "$PID" 2> /dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
cd "$TMP" || fail "cd $TMP"

"$VB" datagen --output_dir data --years 2 --valid_years 1 --samples_per_year 16 --channels 4 \
    --img_size 32,64 --seed 3 > datagen.txt 2>&1 || { cat datagen.txt >&2; fail "datagen"; }
COMMON=(--yaml_config "$SRC/scenarios/vit.yaml" --config tiny
        --train_data_path data/train --valid_data_path data/valid
        --global_means_path data/stats/global_means.npy --global_stds_path data/stats/global_stds.npy
        --output_dir out)
cat > benchy.yaml <<'EOF'
IO:
  run_benchmark: False
synthetic:
  run_benchmark: True
  nbatches: 4
  ntrials: 400
  nwarmup: 1
full:
  run_benchmark: True
  nbatches: 4
  ntrials: 2
  nwarmup: 0
EOF

status_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$1/run.json"; }
# exactly one stderr line, an error holding every further argument
one_error_line() {
    local f=$1; shift
    [ "$(wc -l < "$f")" -eq 1 ] || { cat "$f" >&2; fail "$f: not exactly one line"; }
    grep -q '^vitbench: error: ' "$f" || { cat "$f" >&2; fail "$f: not an error line"; }
    for n in "$@"; do grep -qF -- "$n" "$f" || { cat "$f" >&2; fail "$f: no '$n'"; }; done
}
no_tmp() { ! ls -A "$1" | grep -q 'tmp' || fail "temporary files left in $1: $(ls -A "$1")"; }
# waits (at most ~30 s) for $2 to exist while process $1 runs
wait_for() {
    for _ in $(seq 300); do
        [ -e "$2" ] && return 0
        kill -0 "$1" 2> /dev/null || return 1
        sleep 0.1
    done
    return 1
}

# ---- run: the results disk fills up mid-run ----
# 6 KiB: run.json (~5 KiB) fits; the per-iteration CSV of 400 trials (~85 KiB)
# does not, so the run fails part-way by construction, on any machine. Its
# stdout goes to a device, which the limit does not cover: as a file it would
# grow with the trials too and could hit the limit first.
(trap '' XFSZ; ulimit -f 6; OMPI_MCA_ess_singleton_isolated=1 exec "$VB" run "${COMMON[@]}" --run_name full \
    --benchy_config benchy.yaml) > /dev/null 2> full.err
rc=$?
[ $rc -eq 1 ] || { cat full.err >&2; fail "run on a full disk exited $rc, want 1"; }
one_error_line full.err "cannot write out/full/" "File too large"
[ "$(status_of out/full)" = failed ] || fail "run.json status $(status_of out/full), want failed"
no_tmp out/full

# ---- datagen: disk full, then SIGTERM ----
(trap '' XFSZ; ulimit -f 200; exec "$VB" datagen --output_dir dg_full --years 2 --valid_years 1 \
    --samples_per_year 16 --channels 4 --img_size 64,128) > dg.out 2> dg.err
rc=$?
[ $rc -eq 1 ] || { cat dg.err >&2; fail "datagen on a full disk exited $rc, want 1"; }
one_error_line dg.err "dg_full/train/2000.h5" "File too large"
[ -z "$(ls -A dg_full/train)" ] || fail "datagen left $(ls -A dg_full/train)"

"$VB" datagen --output_dir dg_term --years 4 --valid_years 1 --samples_per_year 512 --channels 20 \
    --img_size 96,192 > dgt.out 2> dgt.err &
PID=$!
wait_for $PID dg_term/train/.2000.h5.tmp || fail "datagen wrote no temporary year file"
kill -TERM $PID
wait $PID
rc=$?
PID=
[ $rc -eq 143 ] || { cat dgt.err >&2; fail "datagen stopped by SIGTERM exited $rc, want 143"; }
left=$(ls -A dg_term/train dg_term/valid dg_term/stats | grep -v -e '^$' -e ':$')
[ -z "$left" ] || fail "datagen left $left"

# ---- train: the checkpoint cannot be written ----
# 64 KiB: the logs and run.json fit, the 1.4 MB checkpoint does not
(trap '' XFSZ; ulimit -f 64; OMPI_MCA_ess_singleton_isolated=1 exec "$VB" train "${COMMON[@]}" --run_name ckfull \
    --num_iters 8) > ck.out 2> ck.err
rc=$?
[ $rc -eq 1 ] || { cat ck.err >&2; fail "train with an unwritable checkpoint exited $rc, want 1"; }
one_error_line ck.err "cannot write checkpoint out/ckfull/checkpoint.h5" "File too large"
[ ! -e out/ckfull/checkpoint.h5 ] || fail "a checkpoint.h5 appeared"
no_tmp out/ckfull
[ "$(status_of out/ckfull)" = failed ] || fail "run.json status $(status_of out/ckfull), want failed"

# ---- train: SIGTERM saves an interrupted checkpoint ----
"$VB" train "${COMMON[@]}" --run_name term --num_iters 100000 > term.out 2> term.err &
PID=$!
wait_for $PID out/term/validation.csv || { cat term.err >&2; fail "train: no epoch finished"; }
kill -TERM $PID
wait $PID
rc=$?
PID=
[ $rc -eq 143 ] || { cat term.err >&2; fail "train stopped by SIGTERM exited $rc, want 143"; }
[ "$(status_of out/term)" = interrupted ] || fail "run.json status $(status_of out/term), want interrupted"
[ -f out/term/checkpoint.h5 ] || fail "no checkpoint saved on SIGTERM"
no_tmp out/term
step=$(sed -n 's/^Saved checkpoint out\/term\/checkpoint.h5 (interrupted at step \([0-9]*\))$/\1/p' term.out)
[ -n "$step" ] || { cat term.out >&2; fail "no 'Saved checkpoint ... (interrupted at step N)' line"; }
rows=$(($(wc -l < out/term/train_log.csv) - 1))
[ "$step" -eq "$rows" ] || fail "checkpoint step $step, train_log.csv has $rows steps"
grep -aq interrupted out/term/checkpoint.h5 || fail "checkpoint has no 'interrupted' attribute"
# it resumes like any checkpoint
"$VB" train "${COMMON[@]}" --run_name resumed --num_iters 1 --init_checkpoint out/term/checkpoint.h5 \
    > resumed.out 2>&1 || { cat resumed.out >&2; fail "train from the interrupted checkpoint"; }

# ---- run | head -1: a closed stdout stops the run ----
"$VB" run "${COMMON[@]}" --run_name piped --benchy_config benchy.yaml 2> pipe.err | head -1 > pipe.out
rc=${PIPESTATUS[0]}
[ $rc -eq 141 ] || { cat pipe.err >&2; fail "run | head -1 exited $rc, want 141"; }
[ "$(status_of out/piped)" = interrupted ] || fail "run.json status $(status_of out/piped), want interrupted"
grep -q 'interrupted by signal 13' pipe.err || { cat pipe.err >&2; fail "no 'interrupted by signal 13' warning"; }
no_tmp out/piped

echo "test_no_loss: OK"
