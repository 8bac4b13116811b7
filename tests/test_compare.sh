#!/usr/bin/env bash
# test_compare.sh <vitbench>: `vitbench compare` on hand-made run and sweep
# directories (run.json, trials.csv, iterations.csv, ops.csv written here, so
# every expected verdict is known in advance):
#   1. identical samples: exit 0, "no regression", compare.json in NEW; a
#      side whose trials spread widely gets a note
#   2. NEW 20% slower, 10 trials a side: exit 1, "regression", the op that grew
#      listed first; same inputs give the same compare.json byte for byte
#   3. NEW 20% faster: improvement, exit 0
#   4. different config / machine: differences on stdout, one error line,
#      exit 2; --allow_different names them and the comparison runs
#   5. 3 trials a side: inconclusive with the repeats needed, exit 0
#   6. step_time (lower is better) and op:NAME
#   7. sweep against sweep: points matched by swept keys in any column order,
#      repeats pooled, failed rows ignored, only the slowed point regresses
#   8. bad input: exit 2 with one line naming the file, column or flag; a
#      side with no samples, duplicated trial rows, a record cut short and
#      a samples_per_s its own row contradicts are refused too
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
# (run.json without fingerprint).
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

# ---- 1. identical samples ----
mkrun base
mkrun same
expect 0 "no regression" "$VB" compare base same
case $out in *"| - | FULL (samples/s) |"*"| unchanged |"*) ;; *) fail "no FULL row in the table: $out" ;; esac
[ -f same/compare.json ] || fail "compare.json not written into NEW's directory"
[ "$(num same/compare.json 'd["results"][0]["base"]["n"]')" = 10 ] || fail "rank-1 or warm-up rows counted as samples"
[ "$(num same/compare.json 'd["results"][0]["ratio"] == 1')" = True ] || fail "ratio of identical runs is not 1"

# ---- 2. 20% lower throughput, and the op that grew ----
mkrun slow full=80,80.8,79.2,80.4,79.6,80.16,79.84,80.08,79.92,80.24 gemm_s=0.9
expect 1 "REGRESSION" "$VB" compare base slow --output "$TMP/c1.json"
case $out in *"| FULL (samples/s) |"*"| regression |"*) ;; *) fail "FULL not a regression: $out" ;; esac
case $out in *"| SYNTHETIC (samples/s) |"*"| regression |"*) ;; *) fail "SYNTHETIC (17% lower) not a regression: $out" ;; esac
case $out in *"grew most"*"| gemm |"*) ;; *) fail "gemm (the op that grew) not listed: $out" ;; esac
[ "$(printf '%s\n' "$out" | grep -c '| softmax |')" = 0 ] || fail "an op that did not grow is listed: $out"
[ "$(num "$TMP/c1.json" 'round(d["results"][0]["ratio"], 6)')" = 0.8 ] || fail "FULL ratio is not 0.8"
[ "$(num "$TMP/c1.json" 'd["results"][0]["ci95"][1] < 0.95')" = True ] || fail "the CI does not lie below 0.95"
"$VB" compare base slow --output "$TMP/c2.json" >/dev/null 2>&1
cmp -s "$TMP/c1.json" "$TMP/c2.json" || fail "two comparisons of the same inputs differ"
# a 20% loss under a 25% threshold is no regression
expect 0 "no regression" "$VB" compare base slow --threshold 0.25 --output "$TMP/c3.json"

# a run whose trials spread 2.5x is called out (the machine was busy)
mkrun busy full=100,101,99,100.5,40,100.2,99.8,100.1,99.9,100.3 synth=120,121,119,120.5,119.5,120.2,119.8,120.1,119.9,120.3
expect 0 "note: NEW FULL samples range 40 .. 101 samples/s" "$VB" compare base busy --output "$TMP/c3b.json"
[ "$(printf '%s\n' "$out" | grep -c 'probably busy')" = 1 ] || fail "a quiet side was called noisy: $out"

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
mkrun fast full=120,121,119,120.5,119.5,120.2,119.8,120.1,119.9,120.3
expect 0 "no regression" "$VB" compare base fast --metric FULL --output "$TMP/c4.json"
case $out in *"| improvement |"*) ;; *) fail "a 20% gain is not an improvement: $out" ;; esac

# ---- 4. comparability ----
mkrun wide embed_dim=128
expect 2 "difference: config embed_dim: BASE 64, NEW 128" "$VB" compare base wide
expect_input_error "not comparable" "$VB" compare base wide
expect 0 "(allowed)" "$VB" compare base wide --allow_different embed_dim --output "$TMP/c5.json"
mkrun onethread omp_threads=1
expect 2 "difference: fingerprint omp_threads: BASE 2, NEW 1" "$VB" compare base onethread
expect_input_error "not comparable" "$VB" compare base onethread
expect 0 "no regression" "$VB" compare base onethread --allow-different omp_threads --output "$TMP/c6.json"
expect 0 "no regression" "$VB" compare base onethread --allow_different machine_key --output "$TMP/c7.json"
mkrun otherbox machine_key=ffffffffffffffff
expect 2 "difference: fingerprint machine_key" "$VB" compare base otherbox
# no fingerprint on one side: a warning, the comparison still runs
mkrun oldrun no_fp=1
expect 0 "machines are not compared" "$VB" compare oldrun base --output "$TMP/c8.json"
# ... but an exit 2 still prints one line: the warning waits for the check
mkrun oldwide no_fp=1 embed_dim=128
expect_input_error "not comparable" "$VB" compare oldwide base
expect_input_error "--allow_different: unknown key 'bogus'" "$VB" compare base same --allow_different bogus

# ---- 5. too few samples ----
mkrun few_a full=100,101,99 synth=120,121,119
mkrun few_b full=70,71,69 synth=90,91,89
expect 0 "inconclusive" "$VB" compare few_a few_b --output "$TMP/c9.json"
case $out in *"benchy ntrials >= 5, e.g. --benchy_config scenarios/benchy/perf_ci.yaml"*) ;; *) fail "inconclusive without the way to get 5 samples: $out" ;; esac
[ "$(num "$TMP/c9.json" 'd["results"][0]["repeats_needed"]')" = 2 ] || fail "repeats needed is not ceil(5/3) = 2"
[ "$(num "$TMP/c9.json" 'd["results"][0]["repeats_needed"]')" = 2 ] || fail "repeats_needed is not 2"

# ---- 6. step_time and op:NAME ----
mkrun slowsteps step=0.104,0.1053,0.1027,0.1046,0.1033,0.1043,0.1037,0.1041,0.1039,0.1044
expect 1 "| step_time (s) |" "$VB" compare base slowsteps --metric step_time --output "$TMP/c10.json"
case $out in *"| regression |"*) ;; *) fail "30% longer steps are not a regression: $out" ;; esac
expect 0 "no regression" "$VB" compare slowsteps base --metric step_time --output "$TMP/c11.json"
case $out in *"| improvement |"*) ;; *) fail "30% shorter steps are not an improvement: $out" ;; esac
# two runs of one distribution: 5 trials of 20 steps whose means interleave
# (A 0.100 0.101 0.099 0.1005 0.0995; B each 0.3% higher), steps tight around
# their trial's mean. Step by step that is 100 "samples" a side and p ~ 0.01;
# a trial's steps share its state, so n is 5 trials and p is ~ 0.7.
steps_of() { python3 -c 'import sys
f = float(sys.argv[1])
print(",".join("%.7g" % (m * f * (1 + 0.0005 * ((k * 7) % 5 - 2))) for m in (0.1, 0.101, 0.099, 0.1005, 0.0995) for k in range(20)))' "$1"; }
mkrun tiedA step="$(steps_of 1.0)" spt=20
mkrun tiedB step="$(steps_of 1.003)" spt=20
expect 0 "n counts timed trials" "$VB" compare tiedA tiedB --metric step_time --output "$TMP/c10b.json"
[ "$(num "$TMP/c10b.json" 'd["results"][0]["new"]["n"]')" = 5 ] || fail "step_time n is not the 5 trials: $(cat "$TMP/c10b.json")"
[ "$(num "$TMP/c10b.json" 'd["results"][0]["p"] > 0.5')" = True ] || fail "identical runs significant on step_time: $(cat "$TMP/c10b.json")"
[ "$(num "$TMP/c10b.json" 'd["results"][0]["n_counts"]')" = trials ] || fail "compare.json does not say what n counts"
# one sample per run: inconclusive, 5 runs a side needed
expect 0 "sweep with --repeats 5" "$VB" compare base slow --metric op:gemm --output "$TMP/c12.json"
# an op that is not there measured nothing: refused, not "no regression"
expect_input_error "no op named 'no_such_op' in ops.csv of BASE or NEW" "$VB" compare base slow --metric op:no_such_op --output "$TMP/c13.json"

# ---- 7. sweeps ----
# BASE: points noddp=false/true at ranks 1, two repeats each (5 trials a run:
# pooled 10 a side), one failed row. NEW: other column order, no repeat
# column (older sweeps), noddp=true 20% slower.
mksweep() { # DIR HEADER ROWS...
    local dir=$1 header=$2
    shift 2
    mkdir -p "$dir/runs"
    printf '%s\n' "$header" "$@" >"$dir/index.csv"
}
F5a=100,101,99,100.5,99.5
F5b=100.2,99.8,100.1,99.9,100.3
S5a=80,80.8,79.2,80.4,79.6
S5b=80.16,79.84,80.08,79.92,80.24
mkrun sw_base/runs/000 full=$F5a
mkrun sw_base/runs/001 full=$F5b
mkrun sw_base/runs/002 full=$F5a
mkrun sw_base/runs/003 full=$F5b
mksweep sw_base "run_index,run_dir,status,exit_code,ranks,noddp,repeat,full_samples_per_s" \
    "0,runs/000,completed,0,1,false,0,100" "1,runs/001,completed,0,1,false,1,100" \
    "2,runs/002,completed,0,1,true,0,100" "3,runs/003,completed,0,1,true,1,100" \
    "4,runs/004,failed,1,1,true,2,"
mkrun sw_new/runs/a full=$F5a
mkrun sw_new/runs/b full=$F5b
mkrun sw_new/runs/c full=$S5a synth=100,101,99,100.5,99.5
mkrun sw_new/runs/d full=$S5b synth=100.2,99.8,100.1,99.9,100.3
mksweep sw_new "run_index,noddp,run_dir,ranks,status,exit_code,threads_per_rank" \
    "0,true,runs/c,1,completed,0,2" "1,false,runs/a,1,completed,0,2" \
    "2,true,runs/d,1,completed,0,2" "3,false,runs/b,1,completed,0,2"
expect 1 "REGRESSION" "$VB" compare sw_base sw_new --metric FULL
case $out in *"| ranks=1 noddp=false | FULL (samples/s) |"*"10/10 | unchanged |"*) ;;
    *) fail "noddp=false not matched, pooled and unchanged: $out" ;; esac
case $out in *"| ranks=1 noddp=true | FULL (samples/s) |"*"10/10 | regression |"*) ;;
    *) fail "noddp=true not matched, pooled and a regression: $out" ;; esac
[ -f sw_new/compare.json ] || fail "compare.json not written into NEW's sweep directory"
# a run against a sweep of two points is ambiguous
expect_input_error "sweep of 2 points" "$VB" compare base sw_new
# sweeps with no common point
mksweep sw_other "run_index,run_dir,status,exit_code,ranks,noddp" "0,runs/x,completed,0,4,false"
mkrun sw_other/runs/x
expect_input_error "matches" "$VB" compare sw_base sw_other

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
expect 0 "exit status: 0 no regression" "$VB" compare -h

echo "test_compare: OK"
