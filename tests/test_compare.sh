#!/usr/bin/env bash
# test_compare.sh <vitbench>: `vitbench compare` on hand-made run and sweep
# directories (run.json, trials.csv, iterations.csv, ops.csv, load.csv
# written here, so every expected verdict is known in advance):
#   1. identical single runs: inconclusive (one run a side: the run-to-run
#      spread is unknown), exit 5, compare.json in NEW; identical repeats
#      (sweeps of 5 runs): equivalent, exit 0 (pass)
#   2. NEW 20% slower, 10 trials a side: slower even on the floor's
#      interval, exit 1, the op that grew listed first; same inputs give the
#      same compare.json byte for byte; a side whose trials spread widely
#      is busy, widens the interval and is named
#   3. NEW 20% faster: faster, exit 0
#   4. different config / machine: differences on stdout, one error line,
#      exit 2; --allow_different names them and the comparison runs
#   5. 3 trials a side, even 30% apart: inconclusive with the repeats needed,
#      exit 5 (never a pass)
#   6. step_time (lower is better) and op:NAME
#   7. sweep against sweep: points matched by swept keys in any column order,
#      repeats as the unit, failed rows not compared; only the slowed point
#      regresses; a BASE point missing or failed in NEW is named, exit 5
#   8. bad input: exit 2 with one line naming the file, column or flag; a
#      side with no samples, duplicated trial rows, a record cut short and
#      a samples_per_s its own row contradicts are refused too
#   9. no verdict contradicts its interval: wide intervals around 0.535 and
#      1.025 are inconclusive (exit 5), never "equivalent"
#  10. load: repeats equivalent by their spread, but BASE ran with 40% of its
#      thread time lost (load.csv) and NEW quiet: inconclusive, said why
set -u

VB=${1:?usage: test_compare.sh <path-to-vitbench>}
fail() { echo "test_compare: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
command -v python3 >/dev/null || fail "python3 is needed to write the test directories"

TMP=$(mktemp -d /tmp/vb_compare.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

# mkrun DIR [key=value ...]: a run directory. Keys: full, synth (per-trial
# samples/s, comma lists), step (FULL step seconds, comma list), spt (steps
# per trial of those, default 1), embed_dim,
# omp_threads, machine_key, gemm_s (ops.csv total_s of op "gemm"), no_fp=1
# (run.json without fingerprint), load (cpu_wait_share of every trial in
# load.csv; no load.csv without it).
mkrun() {
    python3 - "$@" <<'EOF'
import json, os, sys
d = sys.argv[1]
a = dict(kv.split("=", 1) for kv in sys.argv[2:])
os.makedirs(d, exist_ok=True)
full = [float(v) for v in a.get("full", "100,101,99,100.5,99.5,100.2,99.8,100.1,99.9,100.3").split(",")]
synth = [float(v) for v in a.get("synth", ",".join(str(v + 20) for v in full)).split(",")]
step = [float(v) for v in a.get("step", "0.08,0.081,0.079,0.0805,0.0795,0.0802,0.0798,0.0801,0.0799,0.0803").split(",")]
omp = int(a.get("omp_threads", "2"))
fp = {"host": "h", "cpu_model": "Test CPU", "affinity_cores": 2, "omp_threads": omp, "ranks": 1,
      "backend": "cpu", "blas": "OpenBLAS", "blas_coretype": "Haswell", "compiler": "gcc", "cflags": "-O2",
      "git_commit": "abc", "git_dirty": False, "gpu_name": "", "gpu_driver": "",
      "machine_key": a.get("machine_key", "00112233445566%02x" % omp)}
cfg = {"config": "tiny", "embed_dim": int(a.get("embed_dim", "64")), "depth": 2, "num_heads": 4,
       "patch_size": 4, "img_size": [32, 64], "n_in_channels": 4, "n_out_channels": 4,
       "num_data_workers": 0, "output_dir": "x", "run_name": os.path.basename(d)}
run = {"run_id": os.path.basename(d), "status": "completed", "backend": "cpu", "ranks": 1, "world_size": 1,
       "local_batch_size": 8, "global_batch_size": 8, "parallel": {"tp": 1, "cp": 1, "dp": 1}, "config": cfg}
if a.get("no_fp") != "1":
    run["fingerprint"] = fp
json.dump(run, open(os.path.join(d, "run.json"), "w"), indent=1)
with open(os.path.join(d, "trials.csv"), "w") as f:
    f.write("run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s\n")
    rid = os.path.basename(d)  # every row is this run's (run.json's run_id)
    for kind, vals in (("SYNTHETIC", synth), ("FULL", full)):
        f.write("%s,%s,0,1,8,8,2,0,%r,%r\n" % (rid, kind, 64 / (vals[0] * 0.5), vals[0] * 0.5))  # warm-up: never a sample
        for i, v in enumerate(vals):
            f.write("%s,%s,%d,0,8,8,2,0,%r,%r\n" % (rid, kind, i, 64 / v, v))
            f.write("%s,%s,%d,0,8,8,2,1,%r,%r\n" % (rid, kind, i, 64 / (v * 0.1), v * 0.1))  # rank 1: never a sample
with open(os.path.join(d, "iterations.csv"), "w") as f:
    f.write("trial,trial_type,trial_index,warmup,step,rank,seconds,data_wait_s\n")
    f.write("FULL_WARMUP_0,FULL,0,1,0,0,9.0,0\n")
    spt = int(a.get("spt", "1"))  # steps per trial: step i is step i % spt of trial i // spt
    for i, v in enumerate(step):
        f.write("FULL_%d,FULL,%d,0,%d,0,%r,0\n" % (i // spt, i // spt, i % spt, v))
    for i in range(len(step)):
        f.write("SYNTHETIC_0,SYNTHETIC,0,0,%d,0,0.05,0\n" % i)
if "load" in a:
    with open(os.path.join(d, "load.csv"), "w") as f:
        f.write("run_id,trial_type,trial_index,warmup,rank,seconds,online_cpus,loadavg_before,loadavg_after,"
                "steal_share,cpu_wait_share,nivcsw\n")
        for kind, vals in (("SYNTHETIC", synth), ("FULL", full)):
            for i, v in enumerate(vals):
                f.write("%s,%s,%d,0,0,%r,2,3.5,3.6,0,%s,40\n" % (rid, kind, i, 64 / v, a["load"]))
gemm = float(a.get("gemm_s", "0.5"))
with open(os.path.join(d, "ops.csv"), "w") as f:
    f.write("rank,trial_type,name,category,calls,bytes,flops,total_s,avg_s,min_s,max_s,median_s,share_of_step\n")
    f.write("0,,gemm,compute,100,0,0,%r,%r,0,0,0,0.5\n" % (gemm, gemm / 100))
    f.write("0,,softmax,compute,100,0,0,0.2,0.002,0,0,0,0.2\n")
    f.write("0,,layernorm,compute,100,0,0,0.1,0.001,0,0,0,0.1\n")
EOF
}

# expect STATUS NEEDLE CMD...: runs CMD, checks the exit status and that the
# output (stdout + stderr) contains NEEDLE; the output is left in $out.
expect() {
    local want=$1 needle=$2
    shift 2
    out=$("$@" 2>&1)
    local rc=$?
    [ "$rc" = "$want" ] || fail "$* exited $rc, want $want: $out"
    case $out in *"$needle"*) ;; *) fail "$* printed no '$needle': $out" ;; esac
}

# expect_input_error NEEDLE CMD...: exit 2 with exactly one stderr line,
# "vitbench: error: ...NEEDLE..."
expect_input_error() {
    local needle=$1
    shift
    local err rc
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] || fail "$* exited $rc, want 2: $err"
    [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "$* printed more than one stderr line: $err"
    case $err in "vitbench: error: "*"$needle"*) ;; *) fail "$*: stderr '$err' does not name '$needle'" ;; esac
}

num() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# mksweep DIR HEADER ROWS...: a sweep's index.csv (its runs made by mkrun)
mksweep() {
    local dir=$1 header=$2
    shift 2
    mkdir -p "$dir/runs"
    printf '%s\n' "$header" "$@" >"$dir/index.csv"
}
# mkreps DIR N SCALE [key=value ...]: a one-point sweep of N repeats: run i
# has the 10 default FULL trials times SCALE times a run-to-run drift of
# (1, 1.02, 0.98, 1.01, 0.99, ...), its trials tight around it
mkreps() {
    local dir=$1 n=$2 scale=$3
    shift 3
    local rows=() i
    for i in $(seq 0 $((n - 1))); do
        local f
        f=$(python3 -c 'import sys
i, sc = int(sys.argv[1]), float(sys.argv[2])
drift = [1, 1.02, 0.98, 1.01, 0.99, 1.015, 0.985][i % 7]
print(",".join("%.6g" % (v * sc * drift) for v in (100, 101, 99, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.3)))' "$i" "$scale")
        mkrun "$dir/runs/r$i" full="$f" "$@"
        rows+=("$i,runs/r$i,completed,0,$i,1")
    done
    mksweep "$dir" "run_index,run_dir,status,exit_code,repeat,ranks" "${rows[@]}"
}

# ---- 1. identical samples ----
# one run a side: nothing says how much runs differ, so identical samples
# decide nothing (the interval assumes the machine's floor); exit 5, not 0
mkrun base
mkrun same
expect 5 "INCONCLUSIVE" "$VB" compare base same
case $out in *"| - | FULL (samples/s) |"*"| inconclusive: one run a side"*) ;; *) fail "no FULL row, or not 'one run a side': $out" ;; esac
case $out in *"unchanged"*) fail "the word unchanged is gone: $out" ;; esac
[ -f same/compare.json ] || fail "compare.json not written into NEW's directory"
[ "$(num same/compare.json 'd["results"][0]["base"]["n"]')" = 10 ] || fail "rank-1 or warm-up rows counted as samples"
[ "$(num same/compare.json 'd["results"][0]["ratio"] == 1')" = True ] || fail "ratio of identical runs is not 1"
[ "$(num same/compare.json 'd["results"][0]["run_sd_from"]')" = floor ] || fail "the floor is not named as the run-to-run spread"
[ "$(num same/compare.json 'd["exit_status"]')" = 5 ] || fail "compare.json has no exit status 5"
# repeats: five runs a side whose medians drift 2% between runs: the runs'
# spread is measured, the interval lies inside +-5%: equivalent, a pass
mkreps rep_a 5 1
mkreps rep_b 5 1
expect 0 "PASS" "$VB" compare rep_a rep_b --metric FULL --output "$TMP/c0.json"
case $out in *"| ranks=1 | FULL (samples/s) |"*"50 (5) / 50 (5) | equivalent |"*) ;; *) fail "identical repeats not equivalent: $out" ;; esac
[ "$(num "$TMP/c0.json" 'd["results"][0]["run_sd_from"]')" = measured ] || fail "the repeats' spread was not used"
# their interval holds the runs' spread: wider than the one of 50 pooled trials
[ "$(num "$TMP/c0.json" 'd["results"][0]["ci"][1] - d["results"][0]["ci"][0] > 0.02')" = True ] || fail "the interval ignores the spread between runs: $(cat "$TMP/c0.json")"
# one NEW run against five BASE runs: BASE's spread stands for NEW's
mksweep one_sw "run_index,run_dir,status,exit_code,repeat,ranks" "0,runs/r0,completed,0,0,1"
mkrun one_sw/runs/r0 full=100,101,99,100.5,99.5,100.2,99.8,100.1,99.9,100.3
expect 0 "equivalent" "$VB" compare rep_a one_sw --metric FULL --output "$TMP/c0b.json"
[ "$(num "$TMP/c0b.json" 'd["results"][0]["run_sd_from"]')" = "other side" ] || fail "BASE's spread does not stand for NEW's single run"

# ---- 2. 20% lower throughput, and the op that grew ----
mkrun slow full=80,80.8,79.2,80.4,79.6,80.16,79.84,80.08,79.92,80.24 gemm_s=0.9
expect 1 "REGRESSION" "$VB" compare base slow --output "$TMP/c1.json"
case $out in *"| FULL (samples/s) |"*"| slower |"*) ;; *) fail "FULL not slower: $out" ;; esac
# 17% lower with one run a side is not far enough beyond the floor's interval
case $out in *"| SYNTHETIC (samples/s) |"*"| inconclusive: one run a side"*) ;; *) fail "SYNTHETIC (17% lower, one run a side) not inconclusive: $out" ;; esac
case $out in *"grew most"*"| gemm |"*) ;; *) fail "gemm (the op that grew) not listed: $out" ;; esac
[ "$(printf '%s\n' "$out" | grep -c '| softmax |')" = 0 ] || fail "an op that did not grow is listed: $out"
[ "$(num "$TMP/c1.json" 'round(d["results"][0]["ratio"], 6)')" = 0.8 ] || fail "FULL ratio is not 0.8"
[ "$(num "$TMP/c1.json" 'd["results"][0]["ci"][1] < 0.95')" = True ] || fail "the CI does not lie below 0.95"
[ "$(num "$TMP/c1.json" '0 < d["results"][0]["ci"][0]')" = True ] || fail "the CI reaches 0"
"$VB" compare base slow --output "$TMP/c2.json" >/dev/null 2>&1
cmp -s "$TMP/c1.json" "$TMP/c2.json" || fail "two comparisons of the same inputs differ"
# a 20% loss under a 25% threshold is no regression, and no pass either
expect 5 "INCONCLUSIVE" "$VB" compare base slow --threshold 0.25 --output "$TMP/c3.json"

# a run whose trials spread 2.5x is busy: named, its spread widens the
# interval, and the 20% slowdown no longer clears it
mkrun busy full=80,80.8,79.2,80.4,32,80.16,79.84,80.08,79.92,80.24 synth=120,121,119,120.5,119.5,120.2,119.8,120.1,119.9,120.3
expect 5 "note: NEW FULL ran on a busy machine: samples 32 .. 80.8 samples/s" "$VB" compare base busy --output "$TMP/c3b.json"
[ "$(printf '%s\n' "$out" | grep -c '^note: .* ran on a busy machine:')" = 1 ] || fail "a quiet side was called busy: $out"
case $out in *"| FULL (samples/s) |"*"| inconclusive: NEW ran on a busy machine: the load widened"*) ;; *) fail "busy side did not make FULL inconclusive: $out" ;; esac
[ "$(num "$TMP/c3b.json" 'd["results"][0]["load_widening"] > 1')" = True ] || fail "the spread did not widen the interval"

# an op name from ops.csv is one table cell of text: no cell split, no HTML,
# no new line starting a heading
for d in base slow; do
    rm -rf "hostile_$d" && cp -r "$d" "hostile_$d"
    python3 - "hostile_$d/ops.csv" <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read().replace(",gemm,", ',"ge|mm<img src=x onerror=alert(1)>\n# h",')
open(p, "w").write(s)
EOF
done
expect 1 "REGRESSION" "$VB" compare hostile_base hostile_slow --output "$TMP/c1h.json"
case $out in *'| ge\|mm&lt;img src=x onerror=alert(1)> # h |'*) ;; *) fail "hostile op name not escaped as one cell: $out" ;; esac
case $out in *"<img"*) fail "raw HTML from an op name: $out" ;; esac

# ---- 3. improvement ----
mkrun fast full=125,126.25,123.75,125.625,124.375,125.25,124.75,125.125,124.875,125.375
expect 0 "PASS" "$VB" compare base fast --metric FULL --output "$TMP/c4.json"
case $out in *"| faster |"*) ;; *) fail "a 25% gain (the mirror of 20% slower) is not faster: $out" ;; esac

# ---- 4. comparability ----
mkrun wide embed_dim=128
expect 2 "difference: config embed_dim: BASE 64, NEW 128" "$VB" compare base wide
expect_input_error "not comparable" "$VB" compare base wide
expect 5 "(allowed)" "$VB" compare base wide --allow_different embed_dim --output "$TMP/c5.json"
mkrun onethread omp_threads=1
expect 2 "difference: fingerprint omp_threads: BASE 2, NEW 1" "$VB" compare base onethread
expect_input_error "not comparable" "$VB" compare base onethread
expect 5 "INCONCLUSIVE" "$VB" compare base onethread --allow-different omp_threads --output "$TMP/c6.json"
expect 5 "INCONCLUSIVE" "$VB" compare base onethread --allow_different machine_key --output "$TMP/c7.json"
mkrun otherbox machine_key=ffffffffffffffff
expect 2 "difference: fingerprint machine_key" "$VB" compare base otherbox
# no fingerprint on one side: a warning, the comparison still runs
mkrun oldrun no_fp=1
expect 5 "machines are not compared" "$VB" compare oldrun base --output "$TMP/c8.json"
# ... but an exit 2 still prints one line: the warning waits for the check
mkrun oldwide no_fp=1 embed_dim=128
expect_input_error "not comparable" "$VB" compare oldwide base
expect_input_error "--allow_different: unknown key 'bogus'" "$VB" compare base same --allow_different bogus

# ---- 5. too few samples ----
# 30% apart on 3 trials a side: too few to tell, and the gate does not pass
mkrun few_a full=100,101,99 synth=120,121,119
mkrun few_b full=70,71,69 synth=90,91,89
expect 5 "inconclusive" "$VB" compare few_a few_b --output "$TMP/c9.json"
case $out in *"benchy ntrials >= 5, e.g. --benchy_config scenarios/benchy/perf_ci.yaml"*) ;; *) fail "inconclusive without the way to get 5 samples: $out" ;; esac
case $out in *"no regression"*|*PASS*) fail "too few samples passed: $out" ;; esac
[ "$(num "$TMP/c9.json" 'd["results"][0]["repeats_needed"]')" = 2 ] || fail "repeats needed is not ceil(5/3) = 2"

# ---- 6. step_time and op:NAME ----
mkrun slowsteps step=0.104,0.1053,0.1027,0.1046,0.1033,0.1043,0.1037,0.1041,0.1039,0.1044
expect 1 "| step_time (s) |" "$VB" compare base slowsteps --metric step_time --output "$TMP/c10.json"
case $out in *"| slower |"*) ;; *) fail "30% longer steps are not slower: $out" ;; esac
expect 0 "PASS" "$VB" compare slowsteps base --metric step_time --output "$TMP/c11.json"
case $out in *"| faster |"*) ;; *) fail "30% shorter steps are not faster: $out" ;; esac
# two runs of one distribution: 5 trials of 20 steps whose means interleave
# (A 0.100 0.101 0.099 0.1005 0.0995; B each 0.3% higher), steps tight around
# their trial's mean. Step by step that is 100 "samples" a side and p ~ 0.01;
# a trial's steps share its state, so n is 5 trials and p is large.
steps_of() { python3 -c 'import sys
f = float(sys.argv[1])
print(",".join("%.7g" % (m * f * (1 + 0.0005 * ((k * 7) % 5 - 2))) for m in (0.1, 0.101, 0.099, 0.1005, 0.0995) for k in range(20)))' "$1"; }
mkrun tiedA step="$(steps_of 1.0)" spt=20
mkrun tiedB step="$(steps_of 1.003)" spt=20
expect 5 "n counts timed trials" "$VB" compare tiedA tiedB --metric step_time --output "$TMP/c10b.json"
[ "$(num "$TMP/c10b.json" 'd["results"][0]["new"]["n"]')" = 5 ] || fail "step_time n is not the 5 trials: $(cat "$TMP/c10b.json")"
[ "$(num "$TMP/c10b.json" 'd["results"][0]["p"] > 0.5')" = True ] || fail "identical runs significant on step_time: $(cat "$TMP/c10b.json")"
[ "$(num "$TMP/c10b.json" 'd["results"][0]["n_counts"]')" = trials ] || fail "compare.json does not say what n counts"
# one sample per run: inconclusive, 5 runs a side needed
expect 5 "sweep with --repeats 5" "$VB" compare base slow --metric op:gemm --output "$TMP/c12.json"
# an op that is not there measured nothing: refused, not "no regression"
expect_input_error "no op named 'no_such_op' in ops.csv of BASE or NEW" "$VB" compare base slow --metric op:no_such_op --output "$TMP/c13.json"

# ---- 7. sweeps ----
# BASE: points noddp=false/true at ranks 1, three repeats each (5 trials a
# run), one failed row. NEW: other column order, no repeat column (older
# sweeps), noddp=true 20% slower in every run.
F5a=100,101,99,100.5,99.5
F5b=100.2,99.8,100.1,99.9,100.3
F5c=101,102,100,101.5,100.5
S5a=80,80.8,79.2,80.4,79.6
S5b=80.16,79.84,80.08,79.92,80.24
S5c=80.8,81.6,80,81.2,80.4
mkrun sw_base/runs/000 full=$F5a
mkrun sw_base/runs/001 full=$F5b
mkrun sw_base/runs/002 full=$F5c
mkrun sw_base/runs/003 full=$F5a
mkrun sw_base/runs/004 full=$F5b
mkrun sw_base/runs/005 full=$F5c
mksweep sw_base "run_index,run_dir,status,exit_code,ranks,noddp,repeat,full_samples_per_s" \
    "0,runs/000,completed,0,1,false,0,100" "1,runs/001,completed,0,1,false,1,100" "2,runs/002,completed,0,1,false,2,100" \
    "3,runs/003,completed,0,1,true,0,100" "4,runs/004,completed,0,1,true,1,100" "5,runs/005,completed,0,1,true,2,100" \
    "6,runs/006,failed,1,1,true,3,"
mkrun sw_new/runs/a full=$F5a
mkrun sw_new/runs/b full=$F5b
mkrun sw_new/runs/e full=$F5c
mkrun sw_new/runs/c full=$S5a synth=100,101,99,100.5,99.5
mkrun sw_new/runs/d full=$S5b synth=100.2,99.8,100.1,99.9,100.3
mkrun sw_new/runs/f full=$S5c synth=101,102,100,101.5,100.5
mksweep sw_new "run_index,noddp,run_dir,ranks,status,exit_code,threads_per_rank" \
    "0,true,runs/c,1,completed,0,2" "1,false,runs/a,1,completed,0,2" \
    "2,true,runs/d,1,completed,0,2" "3,false,runs/b,1,completed,0,2" \
    "4,true,runs/f,1,completed,0,2" "5,false,runs/e,1,completed,0,2"
expect 1 "REGRESSION" "$VB" compare sw_base sw_new --metric FULL
case $out in *"| ranks=1 noddp=false | FULL (samples/s) |"*"15 (3) / 15 (3) | equivalent |"*) ;;
    *) fail "noddp=false not matched, by its runs, and equivalent: $out" ;; esac
case $out in *"| ranks=1 noddp=true | FULL (samples/s) |"*"15 (3) / 15 (3) | slower |"*) ;;
    *) fail "noddp=true not matched, by its runs, and slower: $out" ;; esac
[ -f sw_new/compare.json ] || fail "compare.json not written into NEW's sweep directory"
# the same with noddp=false equal on both sides and noddp=true failed in NEW:
# the point is named and the gate does not pass
mkrun sw_gap/runs/a full=$F5a
mkrun sw_gap/runs/b full=$F5b
mkrun sw_gap/runs/e full=$F5c
mksweep sw_gap "run_index,noddp,run_dir,ranks,status,exit_code" \
    "0,false,runs/a,1,completed,0" "1,false,runs/b,1,completed,0" "2,false,runs/e,1,completed,0" \
    "3,true,runs/c,1,failed,137"
expect 5 "MISSING: point ranks=1 noddp=true of BASE has no completed run in NEW: runs/c (failed)" \
    "$VB" compare sw_base sw_gap --metric FULL --output "$TMP/c14.json"
case $out in *"INCONCLUSIVE"*"1 missing point"*) ;; *) fail "a failed point passed: $out" ;; esac
[ "$(num "$TMP/c14.json" 'd["missing_points"][0]["point"]')" = "ranks=1 noddp=true" ] || fail "compare.json does not name the missing point"
# a point NEW never ran at all
mksweep sw_gap "run_index,noddp,run_dir,ranks,status,exit_code" \
    "0,false,runs/a,1,completed,0" "1,false,runs/b,1,completed,0" "2,false,runs/e,1,completed,0"
expect 5 "MISSING: point ranks=1 noddp=true of BASE is not in NEW" "$VB" compare sw_base sw_gap --metric FULL --output "$TMP/c15.json"
# a run against a sweep of two points is ambiguous
expect_input_error "sweep of 2 points" "$VB" compare base sw_new
# sweeps with no common point
mksweep sw_other "run_index,run_dir,status,exit_code,ranks,noddp" "0,runs/x,completed,0,4,false"
mkrun sw_other/runs/x
expect_input_error "matches" "$VB" compare sw_base sw_other

# ---- 9. verdicts that agree with their intervals ----
# NEW's trials scattered 3x around a median 46% lower: the interval reaches
# from far below to above 1: inconclusive, never a pass
mkrun scat_a full=100,101,99,100.5,99.5,100.2,99.8,100.1,99.9,100.3
mkrun scat_b full=30,90,45,53.5,140,50,35,120,60,53.5
expect 5 "INCONCLUSIVE" "$VB" compare scat_a scat_b --metric FULL --output "$TMP/c16.json"
[ "$(num "$TMP/c16.json" 'd["results"][0]["verdict"]')" = inconclusive ] || fail "a wide interval got a verdict: $(cat "$TMP/c16.json")"
# a ratio near 1 from scattered repeats: the interval reaches well past
# +-5%: inconclusive, not equivalent
mkreps scat_c 3 1
mkrun scat_d/runs/r0 full=50,51,49,50.5,49.5,50.2,49.8,50.1,49.9,50.3
mkrun scat_d/runs/r1 full=150,151,149,150.5,149.5,150.2,149.8,150.1,149.9,150.3
mkrun scat_d/runs/r2 full=110,111,109,110.5,109.5,110.2,109.8,110.1,109.9,110.3
mksweep scat_d "run_index,run_dir,status,exit_code,repeat,ranks" "0,runs/r0,completed,0,0,1" \
    "1,runs/r1,completed,0,1,1" "2,runs/r2,completed,0,2,1"
expect 5 "INCONCLUSIVE" "$VB" compare scat_c scat_d --metric FULL --output "$TMP/c17.json"
python3 - "$TMP/c17.json" <<'EOF' || fail "verdict contradicts its interval: $(cat "$TMP/c17.json")"
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
lo, hi = r["ci"]
assert 0 < lo < 0.95 and hi > 1.05, r
assert r["verdict"] == "inconclusive", r
# the table's base and new are the ratio's own terms (run medians, geometric mean over runs), not pooled medians
assert abs(r["new_centre"] / r["base_centre"] - r["ratio"]) < 1e-9 * r["ratio"], r
assert abs(r["new_centre"] - (50.05 * 150.05 * 110.05) ** (1 / 3)) < 1e-6, r
EOF

# ---- 10. the load each side ran under ----
# five runs a side, equal by their spread; BASE lost 40% of its thread time
# to other work (load.csv), NEW 2%: the load's difference widens the
# interval past +-5%: inconclusive, and the note says why
mkreps load_a 5 1 load=0.40
mkreps load_b 5 1 load=0.02
expect 5 "ran on a busy machine" "$VB" compare load_a load_b --metric FULL --output "$TMP/c18.json"
case $out in *"40% of thread time lost to other work"*) ;; *) fail "the recorded load is not shown: $out" ;; esac
case $out in *"very different load"*) ;; *) fail "different loads not said: $out" ;; esac
[ "$(num "$TMP/c18.json" 'd["results"][0]["verdict"]')" = inconclusive ] || fail "a busy BASE was called equivalent"
# the same quiet on both sides: equivalent
mkreps load_c 5 1 load=0.02
expect 0 "PASS" "$VB" compare load_c load_b --metric FULL --output "$TMP/c19.json"

# ---- 8. bad input ----
expect_input_error "nowhere is not a directory" "$VB" compare base nowhere
mkdir -p empty
expect_input_error "neither a run directory" "$VB" compare base empty
mkrun nocol
sed -i 's/samples_per_s/rate/' nocol/trials.csv
expect_input_error "no column 'samples_per_s'" "$VB" compare base nocol
mkrun badnum
sed -i '3s/,[^,]*$/,fast/' badnum/trials.csv
expect_input_error "badnum/trials.csv: record 3" "$VB" compare base badnum
mkrun notrials
rm notrials/trials.csv
expect_input_error "notrials/trials.csv: cannot open" "$VB" compare base notrials
mkrun badjson
echo '{"config": ' >badjson/run.json
expect_input_error "badjson/run.json: not a JSON object" "$VB" compare base badjson
mksweep sw_bad "run_index,status" "0,completed"
expect_input_error "no column 'run_dir'" "$VB" compare sw_bad sw_base
mksweep sw_gone "run_index,run_dir,status" "0,runs/missing,completed"
expect_input_error "does not exist" "$VB" compare sw_gone sw_base
# nothing measured is no verdict: a run killed before its timed trials
mkrun headeronly
sed -i '2,$d' headeronly/trials.csv
expect_input_error "NEW: no FULL samples in headeronly/trials.csv" "$VB" compare base headeronly
mkrun noFULL
sed -i '/,FULL,/d' noFULL/trials.csv
expect_input_error "no FULL samples in noFULL/trials.csv" "$VB" compare noFULL base
# a trial's row twice would double n and halve p
mkrun dup
sed -n '3p' dup/trials.csv >>dup/trials.csv
expect_input_error "dup/trials.csv: record 44 repeats record 3" "$VB" compare base dup
# a file cut short while being written
mkrun cut
truncate -s -1 cut/trials.csv
expect_input_error "cut/trials.csv: record 43 has no line end" "$VB" compare base cut
# samples_per_s that its own row's batches and seconds do not give
mkrun edited
sed -i '3s/,[^,]*$/,150/' edited/trials.csv
expect_input_error "edited/trials.csv: record 3: samples_per_s 150 is not nbatches x global_batch / seconds" "$VB" compare base edited
expect_input_error "unknown metric 'THROUGHPUT'" "$VB" compare base same --metric THROUGHPUT
expect_input_error "--alpha" "$VB" compare base same --alpha 1.5
expect_input_error "--threshold" "$VB" compare base same --threshold abc
expect_input_error "unknown flag '--bogus'" "$VB" compare base same --bogus
expect_input_error "--metric expects a value" "$VB" compare base same --metric
expect_input_error "unknown flag '-x'" "$VB" compare base same -x
expect_input_error "--alpha: '1' must be a number in (0, 1)" "$VB" compare base same --alpha 1
expect_input_error "needs BASE and NEW" "$VB" compare base
expect_input_error "unexpected argument" "$VB" compare base same extra
expect 0 "usage: vitbench compare" "$VB" compare --help
expect 0 "--allow_different KEY" "$VB" compare --help
expect 0 "5 inconclusive" "$VB" compare -h
expect 0 "--run_floor S" "$VB" compare --help
expect_input_error "--run_floor: '0' must be a number in (0, 1)" "$VB" compare base same --run_floor 0
expect_input_error "--alpha: '0x1p-3' must be a number in (0, 1)" "$VB" compare base same --alpha 0x1p-3

# a busy side of one trial has no spread within its run: the note says so, never "nan"
python3 - "$TMP" <<'EOF' || fail "one-trial fixture"
import json, os, sys
for d, n in (("busy1", 1), ("busy6", 6)):
    d = os.path.join(sys.argv[1], d)
    os.makedirs(d)
    rid = os.path.basename(d)
    json.dump({"run_id": rid, "status": "completed", "backend": "cpu", "ranks": 1,
               "fingerprint": {"machine_key": "00000000000000aa"}}, open(d + "/run.json", "w"))
    with open(d + "/trials.csv", "w") as f, open(d + "/load.csv", "w") as g:
        f.write("run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s\n")
        g.write("run_id,trial_type,trial_index,warmup,rank,seconds,online_cpus,loadavg_before,loadavg_after,"
                "steal_share,cpu_wait_share,nivcsw\n")
        for i in range(n):
            v = 100.0 + i
            f.write("%s,FULL,%d,0,4,8,1,0,%r,%r\n" % (rid, i, 32 / v, v))
            g.write("%s,FULL,%d,0,0,%r,2,3.5,3.6,0,0.4,40\n" % (rid, i, 32 / v))
EOF
out=$("$VB" compare "$TMP/busy1" "$TMP/busy6" --metric FULL --output "$TMP/busy.json" 2>&1)
grep -q "note: BASE FULL ran on a busy machine: .*one trial a run: no spread within a run" <<<"$out" ||
    fail "the busy one-trial side's note: $out"
grep -qi "nan" <<<"$out" && fail "compare printed nan: $out"

echo "test_compare: OK"
