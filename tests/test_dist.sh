#!/usr/bin/env bash
# test_dist.sh <vitbench>: distributed training is the same training.
#
# 1. Equivalence: from one init checkpoint, on the same data, same global batch,
#    shuffle off, 20 steps of config tiny: every layout below logs the same
#    per-step losses as one rank (train_log.csv, TOL relative):
#      dp 2 with bucket_cap_mb 0.05 / 0.2 / 25, dp 2 via --local_batch_size,
#      tp 2, cp 2, cp 3 (uneven token split), tp 2 x dp 2 (both orders),
#      tp 2 x cp 2, cp 2 x dp 2.
#    lr is 5e-3 (10x the config's) so a wrong gradient shows: --noddp (no
#    gradient averaging) is off by ~3e-3 and must be REJECTED, and a loss log
#    perturbed by 3e-5 must be rejected by the comparator.
#    Layouts the model does not support yet ("not supported yet") are SKIPPED
#    with a printed line, not failed. Under amp_mode fp8, tp 2, cp 2 and
#    tp 2 x cp 2 equal one rank and cp 2 x dp 2 equals dp 2 over two steps
#    (the amax reduction; the reasons for two steps are at the check).
# 2. Invalid layouts (world 3 with tp 2; num_heads 4 with tp 3; global batch 8
#    with dp 3; cp larger than the token count): exit 2 on every rank, exactly
#    one error line, no run directory, within a timeout (no hang).
# 3. A 2-rank `vitbench run`: per-rank rows in trials.csv / iterations.csv,
#    samples/s counted with local_batch x dp, DDP columns, run.json layout;
#    with profiler_mode all, ops.csv holds both ranks' rows.
# 4. base_batch_size scales the lr by sqrt(global / base).
set -u

VB=${1:?usage: test_dist.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
G=$SRC/tests/golden
TOL=${VB_DIST_TOL:-1e-5}
TIMEOUT=${VB_MPI_TIMEOUT:-120}
STEPS=20

fail() { echo "test_dist: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(cd "$(dirname "$VB")" && pwd)/$(basename "$VB") # the test runs in its own directory
command -v mpirun > /dev/null || fail "mpirun not found"

TMP=$(mktemp -d /tmp/vb_dist.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

# Up to 4 oversubscribed ranks on a small machine: one OpenMP thread each,
# and yield instead of spinning while waiting in MPI.
export OMP_NUM_THREADS=1
MPIRUN=(mpirun --oversubscribe --mca mpi_yield_when_idle 1)

# ---- data and init checkpoint: the committed golden ones, else made here ----
if [ -f "$G/tiny_init.h5" ] && [ -f "$G/data/stats/global_means.npy" ]; then
    D=$G/data
    INIT=$G/tiny_init.h5
else
    echo "test_dist: no golden files; generating data and an init checkpoint"
    "$VB" datagen --output_dir data --years 1 --valid_years 1 --samples_per_year 16 --channels 4 \
        --img_size 32,64 --seed 7 > datagen.txt 2>&1 || { cat datagen.txt >&2; fail "datagen"; }
    D=$TMP/data
    "$VB" train --yaml_config "$SRC/scenarios/vit.yaml" --config tiny --train_data_path "$D/train" \
        --valid_data_path "$D/valid" --global_means_path "$D/stats/global_means.npy" \
        --global_stds_path "$D/stats/global_stds.npy" --num_iters 1 --output_dir init --run_name init \
        > init.txt 2>&1 || { cat init.txt >&2; fail "making the init checkpoint"; }
    INIT=$TMP/init/init/checkpoint.h5
fi
DATA=(--yaml_config "$SRC/scenarios/vit.yaml" --config tiny
      --train_data_path "$D/train" --valid_data_path "$D/valid"
      --global_means_path "$D/stats/global_means.npy" --global_stds_path "$D/stats/global_stds.npy")
# VB_DIST_ARGS: more flags for every run, e.g. "--backend cuda --comm_backend mpi
# --tf32 false" to check the same layouts on one GPU (ranks share it)
read -r -a EXTRA <<< "${VB_DIST_ARGS:-}"
TRAIN=(train "${DATA[@]}" --init_checkpoint "$INIT" --shuffle false --num_iters $STEPS --lr 5e-3
       --save_checkpoint false --output_dir "$TMP/out" "${EXTRA[@]}")

# compare LOG REF: rows matched in order, column "loss" by header name.
# Prints "rows N max_rel_diff X"; exit 1 on a row count mismatch, a missing
# or non-numeric value, or a relative difference above TOL.
compare() {
    LC_ALL=C awk -F, -v tol="$TOL" -v want="$STEPS" '
        function col(hdr, name,   i, n, a) {
            n = split(hdr, a, ",")
            for (i = 1; i <= n; i++) { gsub(/[ \r"]/, "", a[i]); if (a[i] == name) return i }
            return 0
        }
        function isnum(s) { return s ~ /^[ ]*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?[ \r]*$/ }
        FNR == 1 { c = col($0, "loss"); if (!c) { print "no loss column in " FILENAME; bad = 1; exit 1 }
                   if (FILENAME == ARGV[1]) ca = c; else cb = c; next }
        FILENAME == ARGV[1] { if ($0 != "") a[++na] = $ca; next }
        { if ($0 != "") b[++nb] = $cb }
        END {
            if (bad) exit 1
            if (na != want || nb != want) { printf "rows: run %d, reference %d, want %d\n", na, nb, want; exit 1 }
            worst = 0; fails = 0
            for (i = 1; i <= nb; i++) {
                if (!isnum(a[i]) || !isnum(b[i])) { printf "row %d: not numbers: %s vs %s\n", i, a[i], b[i]; fails++; continue }
                d = a[i] - b[i]; if (d < 0) d = -d
                m = b[i] < 0 ? -b[i] : b[i]
                rel = d / (m > 1e-30 ? m : 1e-30)
                if (rel > worst) worst = rel
                if (rel > tol) { if (fails < 3) printf "row %d: loss %s vs %s (rel %.3g > %g)\n", i, a[i], b[i], rel, tol; fails++ }
            }
            printf "rows %d max_rel_diff %.3g\n", nb, worst
            exit fails ? 1 : 0
        }' "$1" "$2"
}

# launch NAME NP ARGS...: runs vitbench under mpirun (NP 1: plain); output in
# NAME.txt; returns the exit status (124 = timed out).
launch() {
    local name=$1 np=$2
    shift 2
    if [ "$np" -eq 1 ]; then
        timeout -k 10 "$TIMEOUT" "$VB" "$@" > "$name.txt" 2>&1
    else
        timeout -k 10 "$TIMEOUT" "${MPIRUN[@]}" -np "$np" "$VB" "$@" > "$name.txt" 2>&1
    fi
}

# ---- 1. equivalence ----
launch ref 1 "${TRAIN[@]}" --run_name ref
rc=$?
[ $rc -eq 0 ] || { tail -n 20 ref.txt >&2; fail "the 1-rank reference run exited $rc"; }
REF=$TMP/out/ref/train_log.csv
[ -f "$REF" ] || fail "the reference run wrote no train_log.csv"

# the comparator must reject a small error (a check that cannot fail proves nothing)
awk -F, 'NR == 1 { print; next } { $3 = $3 * (1 + 3e-5); print }' OFS=, "$REF" > perturbed.csv
compare perturbed.csv "$REF" > neg.txt 2>&1 && fail "comparator accepted losses 3e-5 off: $(cat neg.txt)"

# case NAME NP ARGS...: same losses as the reference
case_equal() {
    local name=$1 np=$2
    shift 2
    launch "$name" "$np" "${TRAIN[@]}" --run_name "$name" "$@"
    local rc=$?
    [ $rc -eq 124 ] && fail "$name (np $np $*) timed out after ${TIMEOUT}s"
    [ $rc -eq 0 ] || { tail -n 20 "$name.txt" >&2; fail "$name (np $np $*) exited $rc"; }
    local res
    res=$(compare "$TMP/out/$name/train_log.csv" "$REF" 2>&1) || fail "$name (np $np $*) differs from 1 rank: $res"
    echo "test_dist: $name (np $np $*) == 1 rank: $res"
}

case_equal dp2_cap0.05 2 --bucket_cap_mb 0.05
case_equal dp2_cap0.2 2 --bucket_cap_mb 0.2 --noddp false
case_equal dp2_cap25 2 --bucket_cap_mb 25
case_equal dp2_local4 2 --local_batch_size 4
case_equal tp2 2 --tensor_parallel 2
case_equal cp2 2 --context_parallel 2
case_equal cp3 3 --context_parallel 3
case_equal tp2_dp2 4 --tensor_parallel 2
case_equal tp2_dp2_dpfirst 4 --tensor_parallel 2 --parallel_order dp-tp-cp
case_equal tp2_cp2 4 --tensor_parallel 2 --context_parallel 2
case_equal cp2_dp2 4 --context_parallel 2 --bucket_cap_mb 0.05
# --noddp drops the dp averaging only: cp peers must still sum their partial
# weight gradients, so with dp 1 it is the same training as one rank
case_equal cp2_noddp 2 --context_parallel 2 --noddp

# fp8: every rank reduces its amaxes (max) over the world before each scale
# update, so tp and cp shards quantise on the grid the whole tensor has on
# one rank. Checked over the first two steps, the span the scales of step 0
# decide: later, float32 sums in another order can move a value across an
# FP8 rounding boundary (one E4M3 step is 1/8 relative), and the runs part
# by up to ~1e-3 in a way no tolerance separates from a wrong scale. Here
# they agree to 0; without the reduction tp 2 is off by 3e-5 and cp 2 by
# 6e-5 at step 1 (and dp 2 by 4e-5 against itself on the golden ERA5
# sample: tests/golden/era5). dp is compared with dp:
# each replica's loss is the mean over its own samples, so its output
# gradients are dp times one rank's, and at step 0 (every scale 1) the E5M2
# grid flushes different gradients to zero.
STEPS_FP32=$STEPS TOL_FP32=$TOL
STEPS=2 TOL=5e-6
FP8=(--amp_mode fp8 --num_iters 2)
launch fp8_ref 1 "${TRAIN[@]}" --run_name fp8_ref "${FP8[@]}" || { tail -n 20 fp8_ref.txt >&2; fail "the fp8 1-rank run failed"; }
launch fp8_dp2 2 "${TRAIN[@]}" --run_name fp8_dp2 "${FP8[@]}" || { tail -n 20 fp8_dp2.txt >&2; fail "the fp8 dp 2 run failed"; }
fp8_case() {
    local name=$1 np=$2 ref=$3
    shift 3
    launch "$name" "$np" "${TRAIN[@]}" --run_name "$name" "${FP8[@]}" "$@"
    local rc=$?
    [ $rc -eq 0 ] || { tail -n 20 "$name.txt" >&2; fail "$name (np $np $*) exited $rc"; }
    local res
    res=$(compare "$TMP/out/$name/train_log.csv" "$TMP/out/$ref/train_log.csv" 2>&1) ||
        fail "$name (np $np $*) differs from $ref: $res"
    echo "test_dist: $name (np $np $*) == $ref: $res"
}
fp8_case fp8_tp2 2 fp8_ref --tensor_parallel 2
fp8_case fp8_cp2 2 fp8_ref --context_parallel 2
fp8_case fp8_tp2_cp2 4 fp8_ref --tensor_parallel 2 --context_parallel 2
fp8_case fp8_cp2_dp2 4 fp8_dp2 --context_parallel 2
STEPS=$STEPS_FP32 TOL=$TOL_FP32

# bucket caps must really change the plan (else the three dp2 runs test one thing)
python3 - "$TMP/out" <<'EOF' || fail "run.json DDP bucket counts (above)"
import json, os, sys
out = sys.argv[1]
n = {c: json.load(open(os.path.join(out, f"dp2_cap{c}", "run.json")))["parallel"]["ddp_buckets"] for c in ("0.05", "0.2", "25")}
ok = n["0.05"] > n["0.2"] > n["25"] == 1
print(f"test_dist: DDP buckets per cap {n}")
sys.exit(0 if ok else 1)
EOF

# negative control: without gradient averaging the replicas drift apart
launch noddp 2 "${TRAIN[@]}" --run_name noddp --noddp
rc=$?
[ $rc -eq 0 ] || { tail -n 20 noddp.txt >&2; fail "noddp run exited $rc"; }
if res=$(compare "$TMP/out/noddp/train_log.csv" "$REF" 2>&1); then
    fail "--noddp matched the 1-rank losses ($res): the equivalence check cannot see a missing gradient reduction"
fi
echo "test_dist: --noddp differs from 1 rank as it must"

# ---- 2. invalid layouts: one line from rank 0, exit 2 everywhere, no hang ----
bad_layout() {
    local name=$1 np=$2 want=$3
    shift 3
    launch "$name" "$np" train "${DATA[@]}" --num_iters 1 --output_dir "$TMP/bad_$name" --run_name x "$@"
    local rc=$?
    [ $rc -eq 124 ] && fail "$name (np $np $*) hung: no exit within ${TIMEOUT}s"
    [ $rc -eq 2 ] || { cat "$name.txt" >&2; fail "$name (np $np $*) exited $rc, want 2"; }
    local n
    n=$(grep -c 'vitbench: .*error' "$name.txt")
    [ "$n" -eq 1 ] || { cat "$name.txt" >&2; fail "$name (np $np $*): $n error lines, want exactly 1"; }
    grep -q "^vitbench: error: .*$want" "$name.txt" || { cat "$name.txt" >&2; fail "$name: error line lacks '$want'"; }
    [ -e "$TMP/bad_$name/x" ] && fail "$name: a run directory was created for an invalid layout"
    echo "test_dist: $name (np $np $*): $(grep -m1 'vitbench: error' "$name.txt")"
}
bad_layout world3_tp2 3 "world size 3 is not divisible by tensor_parallel 2" --tensor_parallel 2
bad_layout heads4_tp3 3 "num_heads 4 is not divisible by tensor_parallel 3" --tensor_parallel 3
bad_layout batch8_dp3 3 "global_batch_size 8 is not divisible by the 3 data-parallel ranks"
bad_layout cp_tokens 2 "context_parallel 2 is larger than the 1 tokens" --context_parallel 2 --img_size 4,4

# ---- 3. a 2-rank benchmark run: per-rank rows, throughput with dp ----
cat > benchy.yaml <<'EOF'
global:
  report_freq: 1
  exit_after_tests: True
  profiler_mode: 'all'
  use_distributed_barrier: True
IO: {run_benchmark: True, nbatches: 2, ntrials: 2, nwarmup: 1}
synthetic: {run_benchmark: True, nbatches: 2, ntrials: 2, nwarmup: 1}
full: {run_benchmark: True, nbatches: 2, ntrials: 2, nwarmup: 1}
EOF
launch bench2 2 run "${DATA[@]}" --output_dir "$TMP/out" --run_name bench2 --benchy_config benchy.yaml \
    --bucket_cap_mb 0.1
rc=$?
[ $rc -eq 0 ] || { tail -n 20 bench2.txt >&2; fail "2-rank vitbench run exited $rc"; }
n=$(grep -c '^BENCHY::SUMMARY::FULL average trial throughput' bench2.txt)
[ "$n" -eq 1 ] || fail "2-rank run printed $n FULL summary lines, want 1 (rank 0 only)"
# check_run.py RUN_DIR DP TP CP: the result files of a benchy run of IO,
# SYNTHETIC and FULL (nbatches 2, 1 warm-up + 2 timed trials each), global batch 8.
cat > check_run.py <<'EOF'
import csv, json, os, sys
rd, dp, tp, cp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
world, local, nb = dp * tp * cp, 8 // dp, 2
bad = []
def check(ok, msg):
    if not ok: bad.append(msg)
def rows(name): return list(csv.DictReader(open(os.path.join(rd, name), newline="")))
rj = json.load(open(os.path.join(rd, "run.json")))
p = rj.get("parallel", {})
check((p.get("tp"), p.get("cp"), p.get("dp"), p.get("parallel_order"), p.get("bucket_cap_mb"), p.get("noddp")) ==
      (tp, cp, dp, "tp-cp-dp", 0.1, False), f"run.json parallel {p}")
hosts = rj.get("rank_hosts", [])
check([h.get("rank") for h in hosts] == list(range(world)) and all(h.get("host") for h in hosts), f"run.json rank_hosts {hosts}")
check(rj.get("global_batch_size") == 8 and rj.get("local_batch_size") == local, "run.json batch sizes")
nbuckets, nbytes = p.get("ddp_buckets", 0), rj.get("nparams", 0) * 4
if dp * cp > 1: check(nbuckets > 1, f"bucket_cap_mb 0.1 gave {nbuckets} buckets")

t = rows("trials.csv")
check(len(t) == 9 * world, f"trials.csv has {len(t)} rows, want 9 trials x {world} ranks")
for i in range(0, len(t), world):
    grp = t[i:i + world]
    check([r["rank"] for r in grp] == [str(k) for k in range(world)], f"trials.csv rows {i}..: ranks {[r['rank'] for r in grp]}")
    check(len({(r["trial_type"], r["trial_index"], r["warmup"]) for r in grp}) == 1, f"trials.csv rows {i}..: one trial per group")
for r in t:
    check(r["ranks"] == str(world) and r["global_batch"] == "8", f"trials.csv ranks/global_batch {r}")
    want = nb * local * dp / float(r["seconds"])  # samples/s counts local_batch x dp
    check(abs(float(r["samples_per_s"]) - want) <= 1e-5 * want, f"trials.csv samples_per_s {r['samples_per_s']} != {want}")

it = rows("iterations.csv")
for c in ("rank", "allreduce_calls", "allreduce_bytes", "comm_exposed_s"):
    check(c in it[0], f"iterations.csv has no {c} column")
check(len(it) == 9 * world * nb, f"iterations.csv has {len(it)} rows, want {9 * world * nb}")
for k in range(world):
    mine = [r for r in it if r["rank"] == str(k)]
    check(len(mine) == 9 * nb, f"iterations.csv: rank {k} has {len(mine)} rows")
    mt = [r for r in t if r["rank"] == str(k)]
    for j, tr in enumerate(mt):  # each rank's iterations add up to its own trial time
        s = sum(float(r["seconds"]) for r in mine[nb * j:nb * j + nb])
        check(abs(s - float(tr["seconds"])) <= 1e-6 + 1e-6 * s, f"rank {k} trial {j}: iterations {s} != trial {tr['seconds']}")
for r in it:
    if r["trial_type"] == "IO":
        check(r["allreduce_calls"] == "0" and float(r["comm_exposed_s"]) == 0, f"IO step with communication {r}")
    else:
        check(int(r["allreduce_calls"]) == (nbuckets if dp * cp > 1 else 0), f"step allreduce_calls {r['allreduce_calls']} != {nbuckets} buckets")
        check(int(r["allreduce_bytes"]) == (nbytes if dp * cp > 1 else 0), f"step allreduce_bytes {r['allreduce_bytes']} != {nbytes}")
        check(0 <= float(r["comm_exposed_s"]) <= float(r["seconds"]), f"comm_exposed_s outside [0, step] {r}")

sm = rows("summary.csv")
check(len(sm) == 3, f"summary.csv has {len(sm)} rows")
for r in sm:
    check((r.get("ranks"), r.get("tp"), r.get("cp"), r.get("dp"), r.get("global_batch_size"), r.get("local_batch_size")) ==
          (str(world), str(tp), str(cp), str(dp), "8", str(local)), f"summary.csv layout columns {r}")
b = json.load(open(os.path.join(rd, "benchy_output.json")))
check(b.get("nranks") == world, f"benchy_output.json nranks {b.get('nranks')}")
ops = rows("ops.csv")
# profiler_mode all (benchy.yaml): every rank's rows, gathered in rank order,
# each rank with its own matmul_forward timings
ranks = [int(o["rank"]) for o in ops]
check(ranks == sorted(ranks) and set(ranks) == set(range(world)), f"ops.csv ranks {sorted(set(ranks))}, want 0..{world - 1} in order")
for k in range(world):
    mm = [o for o in ops if o["rank"] == str(k) and o["name"] == "matmul_forward_qkv" and o["trial_type"] == "FULL"]
    check(len(mm) == 1 and int(mm[0]["calls"]) > 0 and float(mm[0]["total_s"]) > 0, f"ops.csv rank {k} matmul_forward_qkv {mm}")
if dp * cp > 1:
    # the DDP bucket allreduce, named by the group it reduces over
    ia = [o for o in ops if o["name"] == ("iallreduce_cpdp" if cp > 1 else "iallreduce_dp")]
    check(ia and ia[0]["category"] == "comm" and float(ia[0]["bytes"]) > 0, f"ops.csv iallreduce row {ia}")
if tp > 1:
    check(any(o["name"] == "allreduce_tp" for o in ops), "ops.csv has no allreduce_tp row")
if cp > 1:
    check(any(o["name"] == "allgather_cp" for o in ops), "ops.csv has no allgather_cp row")
# timeline.csv: every rank's events; under DDP the comm lane holds the in-flight bucket allreduces
tl = rows("timeline.csv")
check({int(e["rank"]) for e in tl} == set(range(world)), f"timeline.csv ranks {sorted({e['rank'] for e in tl})}")
if dp * cp > 1:
    ar = [e for e in tl if e["lane"] == "comm" and e["kind"] == "comm"]
    mk = [e for e in tl if e["lane"] == "comm" and e["kind"] == "marker" and e["name"] == "bucket_ready"]
    check(ar and mk and all(int(e["bucket"]) >= 0 for e in ar + mk), f"timeline comm lane: {len(ar)} allreduces, {len(mk)} markers")
for m in bad: print("test_dist:", m)
sys.exit(1 if bad else 0)
EOF
python3 check_run.py "$TMP/out/bench2" 2 1 1 || fail "2-rank run result files (details above)"
echo "test_dist: 2-rank run: per-rank trials/iterations/ops rows, samples/s = local_batch x dp"

# the same with tp 2 (dp 1): two ranks, but one replica's worth of samples
launch bench_tp2 2 run "${DATA[@]}" --output_dir "$TMP/out" --run_name bench_tp2 --benchy_config benchy.yaml \
    --bucket_cap_mb 0.1 --tensor_parallel 2
rc=$?
[ $rc -eq 0 ] || { tail -n 20 bench_tp2.txt >&2; fail "2-rank tp 2 vitbench run exited $rc"; }
python3 check_run.py "$TMP/out/bench_tp2" 1 2 1 || fail "tp 2 run result files (details above)"
echo "test_dist: tp 2 run: samples/s counts one replica (dp 1)"

# ---- 4. lr scaling by sqrt(global / base_batch_size) ----
launch lrscale 2 "${TRAIN[@]}" --run_name lrscale --num_iters 2 --base_batch_size 2
rc=$?
[ $rc -eq 0 ] || { tail -n 20 lrscale.txt >&2; fail "lr scaling run exited $rc"; }
python3 - "$TMP/out/lrscale/train_log.csv" "$REF" <<'EOF' || fail "base_batch_size lr scaling"
import csv, sys
a = list(csv.DictReader(open(sys.argv[1]))); b = list(csv.DictReader(open(sys.argv[2])))
# cosine over num_iters 2 at step 1 is the base lr; sqrt(8 / 2) = 2
ok = abs(float(a[0]["lr"]) - 2 * 5e-3) <= 1e-9
print(f"test_dist: lr with base_batch_size 2, global 8: {a[0]['lr']} (want 0.01)")
sys.exit(0 if ok else 1)
EOF

echo "test_dist: OK"
