#!/usr/bin/env bash
# test_agree.sh <vitbench>: ranks that disagree on what to run neither hang nor
# corrupt memory: after setup one collective check compares every rank's
# command, config, layout and loader steps, and on a mismatch every rank
# exits 2 with one line from rank 0 naming the first differing key.
# MPMD launches (mpirun -np 1 A : -np 1 B) give two ranks different lines.
set -u
VB=${1:?usage: test_agree.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
QUICK=$SRC/scenarios/benchy/quick.yaml
fail() { echo "test_agree: FAIL: $*" >&2; exit 1; }
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_agree.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd"
"$VB" datagen --output_dir data --years 2 --valid_years 1 --samples_per_year 32 --channels 4 --img_size 32,64 \
    >gen.log 2>&1 || fail "datagen: $(cat gen.log)"
# the same dataset with one year file fewer (a node whose staging went wrong)
mkdir -p half/train && cp -r data/stats data/valid half/ && cp "$(ls data/train/*.h5 | head -1)" half/train/
COMMON=(--config tiny --benchy_config "$QUICK" --output_dir out --train_data_path data/train
        --valid_data_path data/valid --global_means_path data/stats/global_means.npy
        --global_stds_path data/stats/global_stds.npy --global_batch_size 4)

expect_disagree() { # what -- extra args of rank 1 (rank 0 runs `run` with COMMON)
    local what=$1 rc=0 out errors
    shift 2
    out=$(timeout 120 mpirun --oversubscribe -np 1 "$VB" run "${COMMON[@]}" : -np 1 "$VB" "$@" 2>&1) || rc=$?
    [ "$rc" != 124 ] || fail "$what: hung (killed after 120 s): $out"
    [ "$rc" = 2 ] || fail "$what: exit $rc, want 2: $out"
    errors=$(grep -E '^vitbench: (\[rank [0-9]+\] )?(internal )?error' <<<"$out")
    [ "$(wc -l <<<"$errors")" = 1 ] || fail "$what: want one error line: $errors"
    grep -q "ranks disagree: .*$what" <<<"$errors" || fail "$what: the line does not name it: $errors"
}
expect_disagree "limit_nsamples" -- run "${COMMON[@]}" --limit_nsamples 16
expect_disagree "embed_dim" -- run "${COMMON[@]}" --embed_dim 32
expect_disagree "command=train" -- train "${COMMON[@]}" --num_iters 4
expect_disagree "train steps per epoch" -- run "${COMMON[@]}" --train_data_path half/train
# agreeing ranks run as before (data paths may differ between nodes: same data, another path)
cp -r data copy
out=$(timeout 300 mpirun --oversubscribe -np 1 "$VB" run "${COMMON[@]}" : -np 1 "$VB" run "${COMMON[@]}" \
    --train_data_path copy/train 2>&1) || fail "agreeing ranks failed: $out"
[ -z "$(ls out/*/run.json 2>/dev/null | head -1)" ] && fail "no run directory: $out"
grep -q '"status":[[:space:]]*"completed"' out/*/run.json || fail "agreeing run did not complete: $out"
echo "test_agree: OK"
