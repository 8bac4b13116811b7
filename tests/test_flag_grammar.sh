#!/usr/bin/env bash
# test_flag_grammar.sh <vitbench>: every command reads its flags with one
# grammar (core/config/flag.h), through the real binary:
#   1. run takes --key-with-dashes=VALUE and bool words (yes, 1, ON) as
#      --key WORD; sweep takes --dry-run=1 and config keys with dashes, and
#      passes them to its runs under the config's spelling; --sweep-job WORD
#      overrides the scenario's sweep_job;
#   2. a mistyped flag or command: exit 2, one line naming the nearest known
#      name, for run, sweep, report, compare, datagen and the command itself.
set -u

VB=${1:?usage: test_flag_grammar.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
QUICK=$SRC/scenarios/benchy/quick.yaml

fail() { echo "test_flag_grammar: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")

TMP=$(mktemp -d /tmp/vb_grammar.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT

# <needle> <args...>: exit 2 and one stderr line holding needle
expect_input_error() {
    local needle=$1 err rc
    shift
    err=$("$VB" "$@" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] || fail "vitbench $* exited $rc, want 2: $err"
    [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "vitbench $* printed more than one stderr line: $err"
    case $err in *"$needle"*) ;; *) fail "vitbench $*: stderr '$err' does not name '$needle'" ;; esac
}

# ---- 1. the same spellings everywhere ----
# every flag is accepted before the config file is read: the error is the missing file's
expect_input_error "$TMP/none.yaml" run --local-batch-size=4 --shuffle yes --noddp 1 --enable-jit ON \
    --yaml_config "$TMP/none.yaml"
expect_input_error "$TMP/none.yaml" train --num-iters 3 --save_checkpoint=off --yaml-config "$TMP/none.yaml"

out=$("$VB" sweep "$SRC/scenarios/weak_scaling.yaml" --dry-run=1 --ranks 1 --output-dir "$TMP/dry" \
    --config tiny --benchy_config "$QUICK" --local-batch-size 2 --shuffle=no 2>&1) || fail "sweep --dry-run=1 exited $?: $out"
n=$(grep -c " run .*--local_batch_size 2" <<<"$out")
[ "$n" = 2 ] || fail "sweep: $n run lines with --local_batch_size 2, want 2: $out"
grep -q -- "--shuffle no" <<<"$out" || fail "sweep: --shuffle=no not passed to the runs: $out"
out=$("$VB" sweep "$SRC/scenarios/weak_scaling.yaml" --dry_run yes --no-report ON --ranks 1 --output_dir "$TMP/dry2" \
    --config tiny 2>&1) || fail "sweep --dry_run yes exited $?: $out"
[ "$(grep -c ' run ' <<<"$out")" = 2 ] || fail "sweep --dry_run yes: not a dry run of 2 runs: $out"

# a bool flag given at all overrides the scenario's key, whichever word it takes
PM=$SRC/scenarios/cluster/perlmutter_weak_scaling.yaml
out=$("$VB" sweep "$PM" --launcher sbatch --dry-run --sweep-job yes --output_dir "$TMP/sj1" --backend auto 2>&1) ||
    fail "sweep --sweep-job yes exited $?: $out"
ls "$TMP"/sj1/*/jobs/sweep_job.sbatch >/dev/null 2>&1 || fail "--sweep-job yes: no sweep_job.sbatch: $out"
out=$("$VB" sweep "$PM" --launcher sbatch --dry-run --sweep_job 1 --sweep-job=NO --output_dir "$TMP/sj2" --backend auto 2>&1) ||
    fail "sweep --sweep-job=NO exited $?: $out"
ls "$TMP"/sj2/*/jobs/*.sbatch >/dev/null 2>&1 || fail "--sweep-job=NO: no job scripts: $out"
! ls "$TMP"/sj2/*/jobs/sweep_job.sbatch >/dev/null 2>&1 || fail "--sweep-job=NO (the last) still wrote sweep_job.sbatch"

# ---- 2. typos name the nearest flag ----
expect_input_error "flag --local_bach_size: unknown option; did you mean --local_batch_size?" run --local_bach_size 4
expect_input_error "did you mean --shuffle?" train --shufle
expect_input_error "sweep: unknown flag --dry-rn; did you mean --dry-run?" sweep x.yaml --dry-rn
expect_input_error "sweep: unknown flag --rpeats; did you mean --repeats?" sweep x.yaml --rpeats 2
expect_input_error "unknown key 'local_bach_size'; did you mean --local_batch_size?" sweep x.yaml --local-bach-size 2
expect_input_error "report: unknown flag --no-plot; did you mean --no_plots?" report "$TMP" --no-plot
expect_input_error "did you mean --threshold?" compare a b --treshold 2
expect_input_error "datagen: unknown flag --output-dri; did you mean --output_dir?" datagen --output-dri x
expect_input_error "unknown command 'swep'; did you mean sweep?" swep
# nothing close: no guess
expect_input_error "flag --zzz: unknown option" run --zzz 1
err=$("$VB" run --zzz 1 2>&1)
case $err in *"did you mean"*) fail "run --zzz guessed a flag: $err" ;; esac
echo "test_flag_grammar: ok"
