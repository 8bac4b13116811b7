#!/usr/bin/env bash
# test_model_shard.sh <vitbench>: a measured shard as the model's compute
# reference. bench_step (built beside vitbench) times one rank's share of
# tp 2 x cp 2 of the tiny config alone (--shard_tp 2 --shard_cp 2) and writes
# it as a reference directory; vitbench model uses it for that layout.
# What must hold, whatever the machine's speed:
#  - run.json says shard, tp 2, cp 2; iterations.csv has the timed steps;
#  - the shard ran the real shard shapes: each block GEMM's FLOPs in ops.csv
#    are exactly 1/tp x (the rank's 64 of 128 tokens) of the whole model's,
#    and its tp / cp collectives went through the stand-in communicators
#    (allreduce_tp, allgather_cp rows: category comm, skipped by the model);
#  - every loss was finite (bench_step stops on a non-finite one);
#  - vitbench model prices tp 2 x cp 2 with it ("shard tp2 cp2 measured") and
#    every other layout from the whole-model reference;
#  - a shard the config cannot take exits 2 with one line.
set -u

VB=${1:?usage: test_model_shard.sh <path-to-vitbench>}
BS=$(dirname "$VB")/bench_step
fail() { echo "test_model_shard: FAIL: $*" >&2; exit 1; }
[ -x "$BS" ] || fail "not an executable: $BS"
TMP=$(mktemp -d /tmp/vb_model_shard.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
SRC=$(cd "$(dirname "$0")/.." && pwd)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

bs() { # bs NAME ARGS...: a reference directory $TMP/NAME
    local name=$1
    shift
    "$BS" --config tiny --skip_full --warmup 1 --steps 3 --sgemm_seconds 0.01 --reference_dir "$TMP/$name" "$@" \
        > "$TMP/$name.log" 2>&1 || fail "bench_step $*: $(tail -3 "$TMP/$name.log")"
}
bs whole
bs shard --shard_tp 2 --shard_cp 2
grep -q '# shard of tp 2 x cp 2: 2 of 4 heads, 64 of 128 tokens' "$TMP/shard.log" || fail "shard header: $(cat "$TMP/shard.log")"
tr -d ' \t\n' < "$TMP/shard/run.json" | grep -q '"parallel":{"tp":2,"cp":2,"shard":true}' || fail "run.json: $(cat "$TMP/shard/run.json")"
[ "$(grep -c '^SYNTHETIC_0,SYNTHETIC,0,0,' "$TMP/shard/iterations.csv")" -eq 3 ] || fail "iterations.csv"

# flops per call of an op (ops.csv columns: name 3, calls 5, flops 7)
fpc() { awk -F, -v n="$2" '$3 == n { printf "%.17g\n", $7 / $5 }' "$1/ops.csv"; }
for op in matmul_forward_qkv matmul_forward_fc1 matmul_forward_fc2 matmul_forward_proj; do
    w=$(fpc "$TMP/whole" $op) s=$(fpc "$TMP/shard" $op)
    [ -n "$w" ] && [ -n "$s" ] || fail "$op missing from ops.csv"
    # integer FLOP counts: the ratio is exact
    awk -v w="$w" -v s="$s" 'BEGIN { exit !(w > 0 && s * 4 == w) }' || fail "$op: shard $s FLOPs per call, whole $w (want 1/4)"
done
grep -q '^0,SYNTHETIC,allreduce_tp,comm,' "$TMP/shard/ops.csv" || fail "no tp collectives in the shard's ops.csv"
grep -q '^0,SYNTHETIC,allgather,comm,\|^0,SYNTHETIC,allgather_cp,comm,' "$TMP/shard/ops.csv" ||
    fail "no cp allgather in the shard's ops.csv: $(cut -d, -f3,4 "$TMP/shard/ops.csv" | tr '\n' ' ')"

"$VB" model --machine "$SRC/scenarios/machines/perlmutter-gpu.yaml" --run "$TMP/whole" --run "$TMP/shard" \
    --trial_type SYNTHETIC --world_sizes 4 --output_dir "$TMP/m" > "$TMP/m.log" 2>&1 || fail "model: $(cat "$TMP/m.log")"
ref_of() { awk -F, -v p="$1" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $1 == p { print $(c["compute_ref"]) }' "$TMP/m/model.csv"; }
[ "$(ref_of world=4_tp=2_cp=2_dp=1)" = "shard tp2 cp2 measured" ] || fail "tp2 cp2: $(ref_of world=4_tp=2_cp=2_dp=1)"
[ "$(ref_of world=4_tp=1_cp=1_dp=4)" = "one rank" ] || fail "dp 4: $(ref_of world=4_tp=1_cp=1_dp=4)"
[ "$(ref_of world=4_tp=4_cp=1_dp=1)" = "one rank scaled by 1/tp x Nl/N" ] || fail "tp 4 has no shard"

msg=$("$BS" --config tiny --skip_full --shard_tp 3 2>&1)
rc=$?
[ $rc -eq 2 ] && [ "$(echo "$msg" | wc -l)" -eq 1 ] && echo "$msg" | grep -q -- '--shard_tp 3 does not divide num_heads 4' ||
    fail "--shard_tp 3: exit $rc: $msg"
echo "test_model_shard: OK"
