#!/usr/bin/env bash
# test_model_cmd.sh <vitbench>: `vitbench model` end to end on the fixtures in
# tests/fixtures/model/, whose every number is known in advance:
#   commbench.csv  exact ring-form times, alpha 20 us and beta 2 GB/s (10 us,
#                  4 GB/s for broadcast), groups of 2 (dp) and 4 (world) ranks
#   run1/          a one-rank run: embed_dim 8, depth 1, 2 heads, patch 2,
#                  4x8 image (8 tokens), local batch 2, 1 thread, 2 cores; FULL
#                  steps 0.09, 0.1, 0.11 (median 0.1), ops 0.085 s per step
#   sweep/         weak scaling at 1, 2, 4 ranks (1 thread each; 4 ranks on
#                  2 cores), measured 20, 32, 40 samples/s; a failed 8-rank row
# Expected (worked out by hand):
#   the model has 1024 parameters = 4096 gradient bytes = one DDP bucket, ready
#   only when backward ends, so its allreduce is exposed whole:
#     2 ranks: 2(p-1) 20 us + 2(p-1)/p 4096 B / 2 GB/s = 40 + 2.048 = 42.048 us
#     4 ranks: 120 us + 1.5 x 2.048 us = 123.072 us; compute x 2 (4 ranks x 1
#              thread on 2 cores): step 0.2 + 123.072e-6 = 0.200123072 s
#   efficiency (weak) T1 / Tp at 4 ranks: 0.1 / 0.200123072 = 0.499693
#   rel_error at 2 ranks: (0.100042048 - 0.125) / 0.125 = -0.199664
# Then --world_sizes, the report's model section, and bad input (exit 2).
set -u

VB=${1:?usage: test_model_cmd.sh <path-to-vitbench>}
fail() { echo "test_model_cmd: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
FIX=$(cd "$(dirname "$0")/fixtures/model" && pwd) || fail "no fixtures"
VB_SOURCE=$(cd "$(dirname "$0")/.." && pwd)

TMP=$(mktemp -d /tmp/vb_model.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cp -r "$FIX/sweep" "$TMP/sweep"

# col FILE ROW_NAME COLUMN: the cell of model.csv's row whose point is ROW_NAME
col() {
    awk -F, -v row="$2" -v name="$3" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $1 == row { print $(c[name]) }' "$1"
}
near() { # near VALUE EXPECTED: |v - e| <= 1e-5 |e| (model.csv has 6 significant digits)
    awk -v v="$1" -v e="$2" 'BEGIN { d = v - e; if (d < 0) d = -d; a = e < 0 ? -e : e; exit !(v != "" && d <= 1e-5 * a + 1e-12) }'
}

# 1. the sweep, default output directory = the sweep
out=$("$VB" model --commbench "$FIX/commbench.csv" --run "$FIX/run1" --sweep "$TMP/sweep" 2>&1) ||
    fail "model exited $?: $out"
M="$TMP/sweep/model.csv"
[ -f "$M" ] && [ -f "$TMP/sweep/model.md" ] && [ -f "$TMP/sweep/model_fits.csv" ] || fail "outputs missing: $(ls "$TMP/sweep")"
head -1 "$M" | grep -q '^point,ranks,tp,cp,dp,local_batch,threads_per_rank,node_ranks,cpu_factor,nbuckets,forward_s,backward_s,other_s,compute_s,ddp_comm_s,comm_exposed_ddp_s,comm_exposed_tp_s,comm_exposed_cp_s,step_s,samples_per_s,efficiency,measured_step_s,measured_samples_per_s,measured_efficiency,rel_error,extrapolated,step_lo_s,step_hi_s,samples_per_s_lo,samples_per_s_hi,efficiency_lo,efficiency_hi,nodes,compute_ref,comm_sources,sens_commbench_beta_m25,sens_commbench_beta_p25$' ||
    fail "model.csv header: $(head -1 "$M")"
[ "$(wc -l < "$M")" -eq 4 ] || fail "model.csv should have 3 points (the failed run skipped): $(cat "$M")"
near "$(col "$M" 000_ranks=1 step_s)" 0.1 || fail "1-rank step: $(col "$M" 000_ranks=1 step_s)"
near "$(col "$M" 001_ranks=2 comm_exposed_ddp_s)" 4.2048e-05 || fail "2-rank exposed DDP: $(cat "$M")"
near "$(col "$M" 001_ranks=2 rel_error)" -0.199664 || fail "2-rank rel_error: $(cat "$M")"
near "$(col "$M" 002_ranks=4 cpu_factor)" 2 || fail "4-rank oversubscription factor: $(cat "$M")"
near "$(col "$M" 002_ranks=4 step_s)" 0.200123 || fail "4-rank step: $(cat "$M")"
near "$(col "$M" 002_ranks=4 efficiency)" 0.499693 || fail "4-rank efficiency: $(cat "$M")"
near "$(col "$M" 002_ranks=4 measured_efficiency)" 0.5 || fail "4-rank measured efficiency: $(cat "$M")"
near "$(col "$M" 002_ranks=4 nbuckets)" 1 || fail "bucket count: $(cat "$M")"
# interval: run1's steps 0.09, 0.1, 0.11: central 95% = [0.0905, 0.1095], half of it over the
# median 0.1 = 9.5%; the fast corner divides by 1.095, the slow one multiplies
near "$(col "$M" 000_ranks=1 step_lo_s)" 0.0913242 || fail "1-rank step_lo_s: $(cat "$M")"
near "$(col "$M" 000_ranks=1 step_hi_s)" 0.1095 || fail "1-rank step_hi_s: $(cat "$M")"
# sensitivity: beta 2 GB/s x0.75 makes the 2-rank bucket 40 + 2.048 / 0.75 us: +0.682667 us of 0.100042048 s
near "$(col "$M" 001_ranks=2 sens_commbench_beta_m25)" 6.82380e-06 || fail "2-rank sensitivity: $(cat "$M")"
[ "$(col "$M" 001_ranks=2 comm_sources)" = "ddp: commbench" ] || fail "comm_sources: $(cat "$M")"
grep -q '^allreduce,dp,2,4,20,2,0,4$' "$TMP/sweep/model_fits.csv" || fail "fit: $(cat "$TMP/sweep/model_fits.csv")"
grep -q '^broadcast,world,4,4,10,4,' "$TMP/sweep/model_fits.csv" || fail "broadcast fit: $(cat "$TMP/sweep/model_fits.csv")"
echo "$out" | grep -q 'step-time error over 3 measured points: median |rel. error| 0.000615, max 0.2' ||
    fail "error summary: $out"

# 1b. commbench --beside_gemm's columns: model.md states the interference the
# predictions carry (the median of the sizes' slowdowns: 0.2 on every one here)
awk -F, 'NR == 1 { print $0 ",gemm_n,gemm_us,gemm_beside_us,gemm_slowdown"; next }
    { g = $13 / 2; printf "%s,64,%.6g,%.6g,0.2\n", $0, g, g * 1.2 }' "$FIX/commbench.csv" > "$TMP/beside.csv"
"$VB" model --commbench "$TMP/beside.csv" --run "$FIX/run1" --sweep "$TMP/sweep" --output_dir "$TMP/beside" \
    > /dev/null 2>&1 || fail "model with --beside_gemm columns exited $?"
grep -Eq '^Compute beside a collective: x 1\.2, measured by commbench --beside_gemm \(the median over [1-9][0-9]* sizes' \
    "$TMP/beside/model.md" || fail "model.md does not state the measured slowdown: $(grep -i 'beside' "$TMP/beside/model.md")"
grep -q '^Compute beside a collective: as fast as alone' "$TMP/sweep/model.md" ||
    fail "model.md without a measurement: $(grep -i 'beside' "$TMP/sweep/model.md")"

# 2. after_backward gives the same here (one bucket, ready at the end)
"$VB" model --commbench "$FIX" --run "$FIX/run1" --sweep "$TMP/sweep" --ddp_overlap after_backward \
    --output_dir "$TMP/ab" > /dev/null 2>&1 || fail "--ddp_overlap after_backward"
near "$(col "$TMP/ab/model.csv" 002_ranks=4 step_s)" 0.200123 || fail "after_backward step"

# 3. hypothetical layouts: world 4 -> tp in {1, 2} (2 heads), cp in {1, 2, 4}: 5 layouts
"$VB" model --commbench "$FIX/commbench.csv" --run "$FIX/run1" --world_sizes 4 --layouts all \
    --output_dir "$TMP/hyp" > "$TMP/hyp.log" 2>&1 || fail "--world_sizes: $(cat "$TMP/hyp.log")"
[ "$(wc -l < "$TMP/hyp/model.csv")" -eq 6 ] || fail "world 4 should have 5 layouts: $(cat "$TMP/hyp/model.csv")"
grep -q '^world=4_tp=2_cp=2_dp=1,' "$TMP/hyp/model.csv" || fail "tp 2 x cp 2 missing"
grep -q '^world=4_tp=4' "$TMP/hyp/model.csv" && fail "tp 4 does not divide 2 heads"
# ranks per node default = cores / threads = 2: no oversubscription
near "$(col "$TMP/hyp/model.csv" world=4_tp=1_cp=1_dp=4 cpu_factor)" 1 || fail "hypothetical cpu factor"
# tp 2: 4 allreduces per block of B Nl D float32 = 2 x 8 x 8 x 4 = 512 B over 2 ranks: 4 x (40 + 0.256) us
near "$(col "$TMP/hyp/model.csv" world=4_tp=2_cp=1_dp=2 comm_exposed_tp_s)" 0.000161024 ||
    fail "tp exposed: $(cat "$TMP/hyp/model.csv")"

# two references, local batch 2 (0.1 s) and 4 (every time doubled: 0.2 s): batch 3 interpolates to 0.15 s
mkdir -p "$TMP/run4"
sed 's/"local_batch_size": 2/"local_batch_size": 4/' "$FIX/run1/run.json" > "$TMP/run4/run.json"
awk -F, -v OFS=, 'NR > 1 { $7 = 2 * $7 } 1' "$FIX/run1/iterations.csv" > "$TMP/run4/iterations.csv"
awk -F, -v OFS=, 'NR > 1 { $8 = 2 * $8 } 1' "$FIX/run1/ops.csv" > "$TMP/run4/ops.csv"
"$VB" model --commbench "$FIX/commbench.csv" --run "$FIX/run1" --run "$TMP/run4" --world_sizes 1 \
    --local_batch_size 3 --output_dir "$TMP/interp" > "$TMP/interp.log" 2>&1 || fail "two --run: $(cat "$TMP/interp.log")"
near "$(col "$TMP/interp/model.csv" world=1_tp=1_cp=1_dp=1 step_s)" 0.15 || fail "interpolated step: $(cat "$TMP/interp/model.csv")"

# 3b. a machine file and no commbench: the Perlmutter file prices every group. world 16 dp 16
# on 4 GPUs per node: the one 4096-byte bucket is reduce-scattered and all-gathered over
# NVLink (4 ranks: 3 x 0.6 us + 3/4 x 4096 B / 200 GB/s = 1.81536 us, twice) around a tree
# allreduce of 1024 B over Slingshot between 4 nodes (2 ceil(log2 4) x 5 us + 2 x 3/4 x 1024 B /
# min(24, 4 NICs x 24 / 4 ranks) GB/s = 20.064 us): 23.69472 us, exposed whole
MF="$VB_SOURCE/scenarios/machines/perlmutter-gpu.yaml"
"$VB" model --machine "$MF" --run "$FIX/run1" --world_sizes 4,16,64,256,1024 --output_dir "$TMP/pm" \
    > "$TMP/pm.log" 2>&1 || fail "--machine without commbench: $(cat "$TMP/pm.log")"
P="$TMP/pm/model.csv"
head -1 "$P" | grep -q ',sens_nvlink3_beta_m25,sens_nvlink3_beta_p25,sens_slingshot11_beta_m25,sens_slingshot11_beta_p25$' ||
    fail "machine sensitivity columns: $(head -1 "$P")"
near "$(col "$P" world=16_tp=1_cp=1_dp=16 comm_exposed_ddp_s)" 2.369472e-05 || fail "hierarchical allreduce: $(cat "$P")"
near "$(col "$P" world=16_tp=1_cp=1_dp=16 nodes)" 4 || fail "nodes"
[ "$(col "$P" world=16_tp=1_cp=1_dp=16 comm_sources)" = "ddp: slingshot11" ] || fail "comm source: $(cat "$P")"
# Slingshot beta x0.75: its bandwidth term 0.064 us becomes 0.085333 us, of a 0.10002369472 s step
near "$(col "$P" world=16_tp=1_cp=1_dp=16 sens_slingshot11_beta_m25)" 2.132828e-07 || fail "slingshot sensitivity"
# inside one node Slingshot does not matter
near "$(col "$P" world=4_tp=1_cp=1_dp=4 sens_slingshot11_beta_m25)" 0 || fail "world 4 uses no network"
grep -q '^world=1024_tp=2_cp=4_dp=128,' "$P" || fail "tp x cp x dp layouts at 1024 ranks missing"
awk -F, 'NR > 1 && !($27 <= $19 && $19 <= $28) { bad = 1 } END { exit bad }' "$P" || fail "a step outside its interval"
# the terminal starts with the summary, one line per world size (not every layout's row), and
# each efficiency's interval holds the compute's uncertainty (+-5%, T1 and Tp at opposite ends),
# not the link bandwidths alone: at least +-9% wide at every size, 1024 ranks included
head -1 "$TMP/pm.log" | grep -q '^Summary: the layout with the highest predicted samples/s at each world size' ||
    fail "the model's output does not start with its summary: $(head -3 "$TMP/pm.log")"
[ "$(sed -n '3,$p' "$TMP/pm.log" | awk '$1 ~ /^[0-9]+$/' | wc -l)" = 5 ] || fail "not one summary line per world size: $(cat "$TMP/pm.log")"
grep -q "^model.csv\|world=1024_tp=2_cp=4_dp=128" "$TMP/pm.log" && fail "the full table is printed: $(cat "$TMP/pm.log")"
awk -F, 'NR > 1 && $21 > 0 && !($31 <= $21 && $21 <= $32 && ($32 - $31) / $21 >= 0.09) { bad = 1; print } END { exit bad }' "$P" ||
    fail "an efficiency interval without the compute's uncertainty"
grep -q '^## Summary' "$TMP/pm/model.md" || fail "model.md does not start with a summary"
# commbench measured 4 ranks (its world group): the measurement wins there, the file elsewhere
"$VB" model --machine "$MF" --commbench "$FIX/commbench.csv" --run "$FIX/run1" --world_sizes 4,16 --layouts dp \
    --output_dir "$TMP/pmc" > "$TMP/pmc.log" 2>&1 || fail "--machine with commbench: $(cat "$TMP/pmc.log")"
[ "$(col "$TMP/pmc/model.csv" world=4_tp=1_cp=1_dp=4 comm_sources)" = "ddp: commbench" ] ||
    fail "measured size should win: $(cat "$TMP/pmc/model.csv")"
[ "$(col "$TMP/pmc/model.csv" world=16_tp=1_cp=1_dp=16 comm_sources)" = "ddp: slingshot11" ] ||
    fail "unmeasured size should use the machine file"
grep -q 'Machine: perlmutter-gpu' "$TMP/pmc/model.md" || fail "model.md does not name the machine"

# 3b'. a published one-GPU figure as the reference (scenarios/references): the SC23 A100 step is
# 16 samples / 42.8378 samples/s (the median epoch) = 0.373502 s; 4,096 ranks are 1,024 nodes
R="$VB_SOURCE/scenarios/references/sc23-base-1gpu-a100.yaml"
"$VB" model --machine "$MF" --reference "$R" --world_sizes 4,4096 --layouts dp --output_dir "$TMP/ref" \
    > "$TMP/ref.log" 2>&1 || fail "--reference: $(cat "$TMP/ref.log")"
near "$(col "$TMP/ref/model.csv" world=4096_tp=1_cp=1_dp=4096 compute_s)" 0.373502 || fail "reference compute: $(cat "$TMP/ref/model.csv")"
near "$(col "$TMP/ref/model.csv" world=4096_tp=1_cp=1_dp=4096 nodes)" 1024 || fail "1,024 nodes"
# on an H100 SXM node the reference is priced op by op (scaling_price.h): each op moves by what
# bounds it, between the bandwidth ratio 1555 / 3350 = 0.464179 (memory-bound ops) and the GEMMs'
# peak ratio 312 / 989.4 times their efficiency at width 384, (384 / (384 + 258)) / (384 / (384 + 670))
# on the two files: 0.517711 (attention 312 / 989.4 x 0.5 / 0.335 = 0.470661 lies between); so the
# step lies in [0.464179, 0.517711] x 0.373502 = [0.173374, 0.193367]
"$VB" model --machine "$VB_SOURCE/scenarios/machines/h100-sxm-ib.yaml" --reference "$R" --world_sizes 8 --layouts dp \
    --output_dir "$TMP/refh" > "$TMP/refh.log" 2>&1 || fail "--reference on H100: $(cat "$TMP/refh.log")"
awk -v c="$(col "$TMP/refh/model.csv" world=8_tp=1_cp=1_dp=8 compute_s)" 'BEGIN { exit !(c >= 0.173374 && c <= 0.193367) }' ||
    fail "priced compute outside the bounds' ratios: $(cat "$TMP/refh/model.csv")"
case "$(col "$TMP/refh/model.csv" world=8_tp=1_cp=1_dp=8 compute_ref)" in
"priced on h100-sxm-ib (tutorial-sc23-compiled) x"*) ;;
*) fail "compute_ref: $(col "$TMP/refh/model.csv" world=8_tp=1_cp=1_dp=8 compute_ref)" ;;
esac
grep -q 'Compute priced op by op on perlmutter-gpu (the reference.s machine)' "$TMP/refh.log" ||
    fail "the pricing is not said: $(cat "$TMP/refh.log")"
# a machine file without memory_GBps cannot price: the same compute then runs at the bf16 peaks'
# ratio 312 / 989.4
mkdir -p "$TMP/nobw/references" "$TMP/nobw/machines"
grep -v '^memory_GBps' "$VB_SOURCE/scenarios/machines/perlmutter-gpu.yaml" > "$TMP/nobw/machines/perlmutter-gpu.yaml"
cp "$R" "$TMP/nobw/references/"
"$VB" model --machine "$VB_SOURCE/scenarios/machines/h100-sxm-ib.yaml" --reference "$TMP/nobw/references/$(basename "$R")" \
    --world_sizes 8 --layouts dp --output_dir "$TMP/refp" > "$TMP/refp.log" 2>&1 || fail "--reference by peaks: $(cat "$TMP/refp.log")"
near "$(col "$TMP/refp/model.csv" world=8_tp=1_cp=1_dp=8 compute_s)" 0.117781 || fail "peak ratio: $(cat "$TMP/refp/model.csv")"
grep -q 'Compute rescaled by 0.315343: the reference ran on perlmutter-gpu at 312 TFLOP/s bf16 per rank, h100-sxm-ib has 989.4' \
    "$TMP/refp.log" || fail "the rescaling is not said: $(cat "$TMP/refp.log")"

# 3c. a shard reference (what bench_step --shard_tp 2 --reference_dir writes): its measured
# ops replace the 1/tp-scaled ones for tp 2. Shard: fc1 forward 0.015 s and backward 0.025 s
# per step (scaled from run1 they would be 0.01 and 0.02); the rest as run1: patchify 0.01,
# layernorm 0.01, Adam 0.005 x 612 / 1024 local parameters, 0.015 s outside any op:
# 0.07798828125 s (0.06798828125 without the shard)
mkdir -p "$TMP/shard"
sed 's/"tp": 1,/"tp": 2, "shard": true,/' "$FIX/run1/run.json" > "$TMP/shard/run.json"
printf 'trial,trial_type,trial_index,warmup,step,rank,seconds\nSYNTHETIC_0,SYNTHETIC,0,0,0,0,0.08\nSYNTHETIC_0,SYNTHETIC,0,0,1,0,0.08\nSYNTHETIC_0,SYNTHETIC,0,0,2,0,0.08\n' > "$TMP/shard/iterations.csv"
printf 'rank,trial_type,name,category,calls,bytes,flops,total_s\n0,SYNTHETIC,matmul_forward_fc1,compute,3,0,0,0.045\n0,SYNTHETIC,matmul_backward_fc1,compute,3,0,0,0.075\n0,SYNTHETIC,allreduce_tp,comm,12,0,0,0.3\n' > "$TMP/shard/ops.csv"
"$VB" model --commbench "$FIX/commbench.csv" --run "$FIX/run1" --run "$TMP/shard" --world_sizes 2 \
    --output_dir "$TMP/sh" > "$TMP/sh.log" 2>&1 || fail "shard reference: $(cat "$TMP/sh.log")"
near "$(col "$TMP/sh/model.csv" world=2_tp=2_cp=1_dp=1 compute_s)" 0.07798828125 || fail "shard compute: $(cat "$TMP/sh/model.csv")"
[ "$(col "$TMP/sh/model.csv" world=2_tp=2_cp=1_dp=1 compute_ref)" = "shard tp2 cp1 measured" ] || fail "compute_ref"
"$VB" model --commbench "$FIX/commbench.csv" --run "$FIX/run1" --world_sizes 2 --output_dir "$TMP/nosh" > /dev/null 2>&1 ||
    fail "no shard"
near "$(col "$TMP/nosh/model.csv" world=2_tp=2_cp=1_dp=1 compute_s)" 0.06798828125 || fail "scaled compute"
[ "$(col "$TMP/nosh/model.csv" world=2_tp=2_cp=1_dp=1 compute_ref)" = "one rank scaled by 1/tp x Nl/N" ] ||
    fail "compute_ref without a shard"

# 4. the sweep report shows predicted beside measured, both with their intervals: the
# 4-rank run's FULL trials 38, 40, 42 samples/s give mean 40 and the t interval
# on the log scale 40 exp(+-4.302653 x 2 / sqrt(3) / 40) = [35.3279, 45.29] (never below 0)
printf 'run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s\n' > "$TMP/sweep/runs/002_ranks=4/trials.csv"
i=0
for v in 38 40 42; do # trials 0, 1, 2 of 10 batches of 4 samples: seconds = 40 / samples_per_s
    printf 'r4,FULL,%d,0,10,4,4,0,%s,%s\n' "$i" "$(awk "BEGIN { printf \"%.17g\", 40 / $v }")" "$v" \
        >> "$TMP/sweep/runs/002_ranks=4/trials.csv"
    i=$((i + 1))
done
"$VB" report "$TMP/sweep" --no_plots > "$TMP/report.log" 2>&1 || fail "report: $(cat "$TMP/report.log")"
grep -q '^002_ranks=4,4,40,35.3279,45.29,39.9754,36.5092,43.7705,' "$TMP/sweep/report/model_vs_measured.csv" ||
    fail "measured interval: $(cat "$TMP/sweep/report/model_vs_measured.csv")"
# the figure: one rank count per run, so ranks on the x axis; both series carry their interval
# (its .dat is written before gnuplot runs, so this holds without gnuplot too)
"$VB" report "$TMP/sweep" --output_dir "$TMP/plots" > "$TMP/plots.log" 2>&1
grep -q '^ 4 40 35.32788[0-9]* 45.29000[0-9]* "002_ranks=4"' "$TMP/plots/model_throughput.dat" &&
    grep -q '^ 4 39.9754 36.5092 43.7705 "002_ranks=4"' "$TMP/plots/model_throughput.dat" ||
    fail "model_throughput.dat: $(cat "$TMP/plots/model_throughput.dat" 2>&1) $(tail -3 "$TMP/plots.log")"
grep -q 'Scaling model' "$TMP/sweep/report/report.md" || fail "report has no model section"
[ -f "$TMP/sweep/report/model_vs_measured.csv" ] || fail "no model_vs_measured.csv"
# the runs without trials.csv have no measured interval; the predicted one is the model's
grep -q '^001_ranks=2,2,32,,,39.9832,36.5157,43.7798,' "$TMP/sweep/report/model_vs_measured.csv" ||
    fail "model_vs_measured.csv: $(cat "$TMP/sweep/report/model_vs_measured.csv")"

# 5. bad input: exit 2, one line naming the file / column / flag
bad() { # bad PATTERN ARGS...: exit 2 with PATTERN in its one line
    local pat=$1
    shift
    local msg rc
    msg=$("$VB" model "$@" 2>&1)
    rc=$?
    [ $rc -eq 2 ] || fail "exit $rc (want 2) for: $* ($msg)"
    [ "$(echo "$msg" | wc -l)" -eq 1 ] || fail "more than one line for: $*: $msg"
    echo "$msg" | grep -q -- "$pat" || fail "'$pat' not in: $msg"
}
bad "nope.csv" --commbench "$TMP/nope.csv" --run "$FIX/run1" --sweep "$TMP/sweep"
bad "missing required flag --run" --commbench "$FIX/commbench.csv" --sweep "$TMP/sweep"
bad "missing required flag --commbench (or --machine)" --run "$FIX/run1" --world_sizes 4
bad "nope.yaml" --machine "$TMP/nope.yaml" --run "$FIX/run1" --world_sizes 4
printf 'name: x\ngpus_per_node: 4\ncores_per_node: 8\npeak_tflops: {fp32: 1}\nlevels:\n  - {name: a, ranks: node, alpha_us: 1, beta_gbps: 2, uncertainty: 0}\n' > "$TMP/typo.yaml"
bad "typo.yaml: levels\[0\].beta_gbps (line 6): unknown key" --machine "$TMP/typo.yaml" --run "$FIX/run1" --world_sizes 4
bad "no level for traffic between them" --machine "$VB_SOURCE/scenarios/machines/cpu-2core.yaml" --run "$FIX/run1" --world_sizes 4
bad "--parallel_order" --machine "$MF" --run "$FIX/run1" --world_sizes 4 --parallel_order tp-xx
bad "nothing to predict" --commbench "$FIX/commbench.csv" --run "$FIX/run1"
grep -v '^allreduce' "$FIX/commbench.csv" | cut -d, -f1-12,14- > "$TMP/nocol.csv"
bad "no column 'time_us'" --commbench "$TMP/nocol.csv" --run "$FIX/run1" --sweep "$TMP/sweep"
awk -F, 'NR == 2 { sub(/,[^,]*,[^,]*,[^,]*$/, ",x,1,0") } { print }' "$TMP/beside.csv" > "$TMP/badgemm.csv"
bad "row 2: gemm_us or gemm_beside_us is not a positive number" --commbench "$TMP/badgemm.csv" --run "$FIX/run1" --sweep "$TMP/sweep"
awk -F, 'NR == 1 || $7 == 1024' "$FIX/commbench.csv" > "$TMP/onesize.csv"
bad "1 distinct message size" --commbench "$TMP/onesize.csv" --run "$FIX/run1" --sweep "$TMP/sweep"
grep -v '^allreduce' "$FIX/commbench.csv" > "$TMP/noar.csv"
bad "no allreduce rows" --commbench "$TMP/noar.csv" --run "$FIX/run1" --sweep "$TMP/sweep"
bad "a one-rank run is needed" --commbench "$FIX/commbench.csv" --run "$TMP/sweep/runs/001_ranks=2" --sweep "$TMP/sweep"
mkdir -p "$TMP/noops" && cp "$FIX/run1/run.json" "$FIX/run1/iterations.csv" "$TMP/noops/"
bad "a second reference at local batch 2" --commbench "$FIX/commbench.csv" --run "$FIX/run1" --run "$FIX/run1" --sweep "$TMP/sweep"
bad "ops.csv" --commbench "$FIX/commbench.csv" --run "$TMP/noops" --sweep "$TMP/sweep"
cp -r "$TMP/sweep" "$TMP/badtp"
sed -i 's/"tp": 1/"tp": 3/' "$TMP/badtp/runs/001_ranks=2/run.json"
bad "tensor_parallel 3 does not divide num_heads 2" --commbench "$FIX/commbench.csv" --run "$FIX/run1" --sweep "$TMP/badtp"
bad "--world_sizes expects" --commbench "$FIX/commbench.csv" --run "$FIX/run1" --world_sizes 4,x
bad "unknown flag --bogus" --commbench "$FIX/commbench.csv" --run "$FIX/run1" --bogus 1
echo "test_model_cmd: OK"
