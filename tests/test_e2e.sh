#!/usr/bin/env bash
# test_e2e.sh <vitbench>: the real binary end to end on a generated tiny dataset.
#
#   datagen -> run (benchy trials: lines, trials/iterations/summary/ops CSVs,
#   benchy JSON, run.json) -> train (logs, train_log/validation CSVs,
#   checkpoint) -> train from that checkpoint -> train --enable_benchy with one
#   trial type switched off -> bad input exits 2 with one line.
set -u

VB=${1:?usage: test_e2e.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset BENCHY_CONFIG_FILE

fail() { echo "test_e2e: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(cd "$(dirname "$VB")" && pwd)/$(basename "$VB")   # we cd into a temp dir below

TMP=$(mktemp -d /tmp/vb_e2e.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

# ---- dataset: 2 train years x 16 samples = 4 batches of 8; 1 valid year ----
"$VB" datagen --output_dir data --years 2 --valid_years 1 --samples_per_year 16 --channels 4 \
    --img_size 32,64 --seed 7 > datagen.txt 2>&1
rc=$?
[ $rc -eq 0 ] || { cat datagen.txt >&2; fail "datagen exited $rc"; }
for f in data/stats/global_means.npy data/stats/global_stds.npy; do [ -f "$f" ] || fail "datagen wrote no $f"; done
ls data/train/*.h5 > /dev/null 2>&1 || fail "datagen wrote no data/train/*.h5"
ls data/valid/*.h5 > /dev/null 2>&1 || fail "datagen wrote no data/valid/*.h5"

COMMON=(--yaml_config "$SRC/scenarios/vit.yaml" --config tiny
        --train_data_path data/train --valid_data_path data/valid
        --global_means_path data/stats/global_means.npy --global_stds_path data/stats/global_stds.npy
        --output_dir out)

cat > benchy.yaml <<'EOF'
global:
  report_freq: 1
  exit_after_tests: True
  profiler_mode: 'single'
  use_distributed_barrier: True
IO:
  run_benchmark: True
  nbatches: 3
  ntrials: 2
  nwarmup: 1
synthetic:
  run_benchmark: True
  nbatches: 3
  ntrials: 2
  nwarmup: 1
full:
  run_benchmark: True
  nbatches: 3
  ntrials: 2
  nwarmup: 1
EOF

# ---- run ----
"$VB" run "${COMMON[@]}" --run_name bench --benchy_config benchy.yaml > run.txt 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 20 run.txt >&2; fail "run exited $rc"; }
R=out/bench
grep -q "^vitbench: run directory $R\$" run.txt || fail "run did not print its run directory"
grep -q "^BENCHY::INFO::Message: Using benchy configuration file benchy.yaml.\$" run.txt \
    || fail "no benchy configuration-file message"
for label in IO_WARMUP_0 IO_0 IO_1 SYNTHETIC_WARMUP_0 SYNTHETIC_0 SYNTHETIC_1 FULL_WARMUP_0 FULL_0 FULL_1; do
    grep -Eq "^BENCHY::$label::Iteration Throughput: [0-9.e+-]+\$" run.txt || fail "no iteration line for $label"
    grep -Eq "^BENCHY::$label::Average Iteration Throughput: [0-9.e+-]+\$" run.txt || fail "no average line for $label"
    grep -Eq "^BENCHY::$label::Trial Throughput: [0-9.e+-]+\$" run.txt || fail "no trial line for $label"
done
n=$(grep -c "^BENCHY::IO_0::Iteration Throughput" run.txt)
[ "$n" -eq 3 ] || fail "report_freq 1 with 3 batches should print 3 IO_0 iteration lines, got $n"
grep -Eq '^BENCHY::SUMMARY::IO average trial throughput: [0-9]+\.[0-9]{3} \+/- [0-9]+\.[0-9]{3}$' run.txt \
    || fail "IO summary line not in benchy's format"
grep -Eq '^BENCHY::SUMMARY:: SYNTHETIC average trial throughput: [0-9]+\.[0-9]{3} \+/- [0-9]+\.[0-9]{3}$' run.txt \
    || fail "SYNTHETIC summary line not in benchy's format"
grep -Eq '^BENCHY::SUMMARY::FULL average trial throughput: [0-9]+\.[0-9]{3} \+/- [0-9]+\.[0-9]{3}$' run.txt \
    || fail "FULL summary line not in benchy's format"

python3 - "$R" run.txt <<'EOF' || fail "run result files (details above)"
import csv, json, math, os, re, sys
rd, log = sys.argv[1], open(sys.argv[2]).read()
def rows(name):
    with open(os.path.join(rd, name), newline="") as f:
        return list(csv.DictReader(f))
def check(cond, msg):
    if not cond:
        print("test_e2e:", msg, file=sys.stderr); sys.exit(1)

t = rows("trials.csv")
check(len(t) == 9, f"trials.csv has {len(t)} rows, want (1+2)x3 = 9")
check(list(t[0].keys()) == "run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s".split(","),
      f"trials.csv header {list(t[0].keys())}")
check([r["trial_type"] for r in t] == ["IO"] * 3 + ["SYNTHETIC"] * 3 + ["FULL"] * 3, "trials.csv trial order")
check([r["warmup"] for r in t] == ["1", "0", "0"] * 3, "trials.csv warm-up flags")
check([r["trial_index"] for r in t] == ["0", "0", "1"] * 3, "trials.csv trial indices")
check(all(r["nbatches"] == "3" and r["global_batch"] == "8" and r["ranks"] == "1" for r in t), "trials.csv nbatches/batch/ranks")
check(all(float(r["seconds"]) > 0 and float(r["samples_per_s"]) > 0 for r in t), "trials.csv non-positive times")
for r in t:  # per-trial throughput = nbatches * batch * ranks / seconds
    want = 3 * 8 / float(r["seconds"])
    check(abs(float(r["samples_per_s"]) - want) <= 1e-5 * want, f"trial throughput {r['samples_per_s']} != 24/seconds")

# the machine's load around every trial: one row per trial and rank, each
# share a fraction (or empty where the kernel does not tell)
ld = rows("load.csv")
check(len(ld) == 9, f"load.csv has {len(ld)} rows, want one per trial")
check(list(ld[0].keys()) == ("run_id,trial_type,trial_index,warmup,rank,seconds,online_cpus,loadavg_before,"
                             "loadavg_after,steal_share,cpu_wait_share,nivcsw").split(","), f"load.csv header {list(ld[0].keys())}")
check([(r["trial_type"], r["trial_index"], r["warmup"]) for r in ld] ==
      [(r["trial_type"], r["trial_index"], r["warmup"]) for r in t], "load.csv trials are not trials.csv's")
for r in ld:
    for k in ("steal_share", "cpu_wait_share"):
        check(r[k] == "" or 0 <= float(r[k]) <= 1, f"load.csv {k} {r[k]} is not a share")
    check(int(r["online_cpus"]) >= 1 and (r["nivcsw"] == "" or float(r["nivcsw"]) >= 0), f"load.csv row {r}")
if os.path.exists("/proc/self/schedstat"):  # the kernel keeps run-queue waits: they are recorded
    check(any(r["cpu_wait_share"] != "" for r in ld), "load.csv recorded no run-queue wait at all")

it = rows("iterations.csv")
check(len(it) == 27, f"iterations.csv has {len(it)} rows, want 9 trials x 3 steps")
check(list(it[0].keys()) == ("trial,trial_type,trial_index,warmup,step,rank,seconds,data_wait_s,"
                             "allreduce_calls,allreduce_bytes,comm_exposed_s").split(","),
      f"iterations.csv header {list(it[0].keys())}")
check([r["trial"] for r in it[:3]] == ["IO_WARMUP_0"] * 3 and it[3]["trial"] == "IO_0", "iterations.csv labels")
check([r["step"] for r in it[:3]] == ["0", "1", "2"], "iterations.csv steps")
# a trial's time is the sum of its iterations (both run between the same timing points)
for k, tr in enumerate(t):
    s = sum(float(r["seconds"]) for r in it[3 * k:3 * k + 3])
    check(abs(s - float(tr["seconds"])) <= 1e-6 + 1e-6 * s, f"trial {k}: iterations sum {s} != trial {tr['seconds']}")
check(all(float(r["data_wait_s"]) == 0 for r in it if r["trial_type"] == "SYNTHETIC"), "SYNTHETIC waited for data")
check(all(0 < float(r["data_wait_s"]) <= float(r["seconds"]) for r in it if r["trial_type"] in ("IO", "FULL")),
      "IO/FULL data wait outside (0, iteration time]")

sm = rows("summary.csv")
need = ("trial_type,mean_samples_per_s,std_samples_per_s,min_samples_per_s,max_samples_per_s,ntrials,config,backend,"
        "ranks,global_batch_size,local_batch_size,embed_dim,depth,num_heads,patch_size,img_h,img_w,n_in_channels,"
        "n_out_channels,num_data_workers,amp_mode").split(",")
check(len(sm) == 3, f"summary.csv has {len(sm)} rows, want 3")
check(all(c in sm[0] for c in need), f"summary.csv lacks columns {[c for c in need if c not in sm[0]]}")
check([r["trial_type"] for r in sm] == ["IO", "SYNTHETIC", "FULL"], "summary.csv trial types")
r0 = sm[2]
check((r0["config"], r0["backend"], r0["ranks"], r0["global_batch_size"], r0["local_batch_size"], r0["embed_dim"],
       r0["depth"], r0["num_heads"], r0["patch_size"], r0["img_h"], r0["img_w"], r0["n_in_channels"], r0["ntrials"]) ==
      ("tiny", "cpu", "1", "8", "8", "64", "2", "4", "4", "32", "64", "4", "2"), f"summary.csv config columns {r0}")
for typ, row in zip(["IO", "SYNTHETIC", "FULL"], sm):
    x = [float(r["samples_per_s"]) for r in t if r["trial_type"] == typ and r["warmup"] == "0"]
    mean = sum(x) / len(x); std = math.sqrt(sum((v - mean) ** 2 for v in x) / len(x))
    check(abs(float(row["mean_samples_per_s"]) - mean) <= 1e-5 * mean, f"{typ} summary mean")
    check(abs(float(row["std_samples_per_s"]) - std) <= 1e-5 * mean, f"{typ} summary std (population)")
    label = {"IO": "IO", "SYNTHETIC": " SYNTHETIC", "FULL": "FULL"}[typ]
    m = re.search(rf"^BENCHY::SUMMARY::{label} average trial throughput: (\S+) \+/- (\S+)$", log, re.M)
    check(m and abs(float(m.group(1)) - mean) <= 1e-3 + 1e-5 * mean, f"{typ} printed summary mean")
    check(m and abs(float(m.group(2)) - std) <= 1e-3 + 1e-5 * mean, f"{typ} printed summary std")

b = json.load(open(os.path.join(rd, "benchy_output.json")))
check(b.get("nranks") == 1, "benchy_output.json nranks")
for typ in ("IO", "SYNTHETIC", "FULL"):
    check(typ in b, f"benchy_output.json has no {typ}")
    e = b[typ]
    check(len(e["rates"]) == 2 and all(len(x) == 3 for x in e["rates"]), f"{typ} rates shape {e['rates']}")
    check(len(e["trial_throughput"]) == 2 and len(e["avg_iter_throughput"]) == 2 and len(e["trial_time"]) == 2,
          f"{typ} per-trial lists")
    for k in range(2):
        a = sum(e["rates"][k]) / 3
        check(abs(e["avg_iter_throughput"][k] - a) <= 1e-6 * a, f"{typ} avg_iter_throughput is not the mean of rates")
        check(abs(e["trial_throughput"][k] * e["trial_time"][k] - 24) < 1e-6, f"{typ} trial_throughput * time != 24")
    timed = [float(r["samples_per_s"]) for r in t if r["trial_type"] == typ and r["warmup"] == "0"]
    check(all(abs(x - y) <= 1e-6 * y for x, y in zip(e["trial_throughput"], timed)), f"{typ} json vs trials.csv")

ops = rows("ops.csv")
check(list(ops[0].keys()) == ("rank,trial_type,name,category,calls,bytes,flops,total_s,avg_s,min_s,max_s,median_s,"
                              "share_of_step,gflop_per_s,gb_per_s").split(","), "ops.csv header")
check({r["trial_type"] for r in ops} == {"SYNTHETIC", "FULL"}, f"ops.csv trial types {sorted({r['trial_type'] for r in ops})}")
for typ in ("SYNTHETIC", "FULL"):
    names = {r["name"]: r for r in ops if r["trial_type"] == typ}
    # GEMMs by role and direction
    for op in ("matmul_forward_qkv", "matmul_forward_proj", "matmul_forward_fc1", "matmul_forward_fc2",
               "matmul_forward_patch_embed", "matmul_forward_head", "matmul_backward_qkv", "matmul_backward_fc2",
               "attention_forward", "layernorm_forward", "adam_update", "h2d"):
        check(op in names, f"ops.csv {typ} has no {op}")
    check("matmul_forward" not in names, "an unnamed matmul_forward row")
    # profiled: 2 timed trials of a type x 3 steps; h2d once per step
    check(names["h2d"]["calls"] == "6" and names["h2d"]["category"] == "memcpy", f"{typ} h2d row {names['h2d']}")
    mm = names["matmul_forward_fc1"]
    check(mm["category"] == "compute" and float(mm["flops"]) > 0 and float(mm["gflop_per_s"]) > 0,
          f"{typ} matmul_forward_fc1 FLOPs / GFLOP/s {mm}")
    # fc1: 2 x (B*tokens) x embed x 4*embed FLOPs per call, B 8, 128 tokens, embed 64
    per_call = float(mm["flops"]) / int(mm["calls"])
    check(abs(per_call - 2 * 8 * 128 * 64 * 256) < 1, f"fc1 FLOPs per call {per_call}")
    share = sum(float(r["share_of_step"]) for r in names.values() if r["category"] == "compute")
    check(0 < share <= 1.05, f"{typ} compute ops take {share} of the step time")
check(all(float(r["min_s"]) <= float(r["median_s"]) <= float(r["max_s"]) for r in ops), "min <= median <= max")

# timeline.csv: the first profile_steps (5 by default, capped by the 3 x 2 timed FULL steps) steps
tl = rows("timeline.csv")
check(tl and list(tl[0].keys()) == "rank,lane,kind,name,trial_type,trial_index,step,start_s,dur_s,bytes,flops,bucket".split(","),
      "timeline.csv header")
steps = [e for e in tl if e["kind"] == "step"]
check(len(steps) == 5 and all(e["trial_type"] == "FULL" for e in steps), f"timeline steps {[(e['trial_index'], e['step']) for e in steps]}")
check({e["name"] for e in tl if e["kind"] == "phase"} >= {"forward", "backward", "optimizer", "data"}, "timeline phases")
check(all(float(e["dur_s"]) >= 0 for e in tl), "negative durations in timeline.csv")
for st in steps:  # every op of the step lies inside it
    s0, s1 = float(st["start_s"]), float(st["start_s"]) + float(st["dur_s"])
    inner = [e for e in tl if e["kind"] in ("compute", "memcpy") and e["trial_index"] == st["trial_index"] and e["step"] == st["step"]]
    check(inner and all(s0 - 1e-6 <= float(e["start_s"]) and float(e["start_s"]) + float(e["dur_s"]) <= s1 + 1e-6 for e in inner),
          f"ops outside their step {st}")

sm = rows("summary.csv")
for r in sm:
    check(r["machine_key"] and len(r["machine_key"]) == 16 and r["cpu_model"] and int(r["omp_threads"]) >= 1,
          f"summary.csv fingerprint columns {r}")
    check(float(r["peak_mem_bytes"]) > 1e6, f"summary.csv peak_mem_bytes {r['peak_mem_bytes']}")
    check((r["trial_type"] == "IO") == (r["achieved_tflop_per_s"] == ""), f"achieved_tflop_per_s {r}")

rj = json.load(open(os.path.join(rd, "run.json")))
check(all(k in rj.get("fingerprint", {}) for k in ("host", "cpu_model", "affinity_cores", "omp_threads", "blas_coretype",
                                                  "compiler", "cflags", "git_commit", "git_dirty", "machine_key")),
      f"run.json fingerprint {rj.get('fingerprint')}")
check(rj.get("threads", {}).get("per_rank", 0) <= rj["fingerprint"]["affinity_cores"], f"threads {rj.get('threads')}")
for k in ("config", "git_commit", "host", "backend", "versions", "command_line", "start_time", "end_time", "status"):
    check(k in rj, f"run.json has no {k}")
check(rj["status"] == "completed", f"run.json status {rj['status']}")
check(rj["backend"] == "cpu" and rj["config"]["config"] == "tiny", "run.json backend/config")
check(all(rj["versions"].get(k) for k in ("hdf5", "openblas", "mpi", "libyaml", "cjson")), f"run.json versions {rj['versions']}")
check(not [f for f in os.listdir(rd) if ".tmp" in f], "temporary files left in the run directory")
EOF

# ---- train ----
"$VB" train "${COMMON[@]}" --run_name train --num_iters 6 > train.txt 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 20 train.txt >&2; fail "train exited $rc"; }
T=out/train
grep -Eq '^Time taken for epoch 1 is [0-9.e+-]+ sec, avg [0-9.e+-]+ samples/sec$' train.txt || fail "no epoch 1 time line"
grep -Eq '^Time taken for epoch 2 is ' train.txt || fail "no epoch 2 (6 steps over 4-step epochs)"
grep -Eq '^  Avg train loss=[0-9]+\.[0-9]{6}$' train.txt || fail "no avg train loss line"
grep -Eq '^  Avg val loss=[0-9]+\.[0-9]{6}$' train.txt || fail "no avg val loss line"
grep -Eq '^  Total validation time: [0-9.e+-]+ sec$' train.txt || fail "no validation time line"
grep -Eq '^  RMSE\(u10m\)=[0-9]+\.[0-9]{6}$' train.txt || fail "no RMSE(u10m) line"
[ -f $T/checkpoint.h5 ] || fail "train wrote no checkpoint.h5"
python3 - "$T" <<'EOF' || fail "train result files (details above)"
import csv, json, math, os, sys
rd = sys.argv[1]
def check(cond, msg):
    if not cond:
        print("test_e2e:", msg, file=sys.stderr); sys.exit(1)
log = list(csv.DictReader(open(os.path.join(rd, "train_log.csv"))))
check(len(log) == 6, f"train_log.csv has {len(log)} rows, want 6")
check(list(log[0].keys()) == ["step", "epoch", "loss", "lr", "seconds"], f"train_log.csv header {list(log[0].keys())}")
check([r["epoch"] for r in log] == ["1"] * 4 + ["2"] * 2, "train_log.csv epochs")
check(all(math.isfinite(float(r["loss"])) and float(r["loss"]) > 0 for r in log), "train_log.csv losses")
lr = [float(r["lr"]) for r in log]
# tiny: cosine over num_iters 6 from lr 5e-4, no warm-up
want = [5e-4 * 0.5 * (1 + math.cos(math.pi * t / 6)) for t in range(6)]
check(all(abs(a - b) <= 1e-6 * 5e-4 for a, b in zip(lr, want)), f"lr schedule {lr} != {want}")
check(float(log[-1]["loss"]) < float(log[0]["loss"]), "loss did not go down over 6 steps")
v = list(csv.DictReader(open(os.path.join(rd, "validation.csv"))))
check(len(v) == 2 and [r["step"] for r in v] == ["4", "6"], f"validation.csv rows {v}")
check(list(v[0].keys()) == ["epoch", "step", "val_loss", "rmse_u10m", "seconds"], "validation.csv header")
check(all(float(r["val_loss"]) > 0 and float(r["rmse_u10m"]) > 0 for r in v), "validation values")
rj = json.load(open(os.path.join(rd, "run.json")))
check(rj["status"] == "completed" and rj["command"] == "train", "train run.json")
EOF

# ---- benchy's output_filename may not be a file the run directory already
# holds (one would silently replace the other): every name a real run and a
# real training wrote, and what trace and report add, is refused with exit 2
# and one line naming the key and the file, before any run directory ----
cp -r "$R" names_run || fail "cp $R"
"$VB" trace names_run > /dev/null 2>&1 || fail "vitbench trace on a copy of the run failed"
"$VB" report names_run --no_plots > /dev/null 2>&1 || fail "vitbench report on a copy of the run failed"
names=$( (ls -A names_run; ls -A "$T") | grep -v -x -e benchy_output.json | sort -u)
for n in run.json summary.csv trials.csv checkpoint.h5 train_log.csv trace.json report; do
    grep -q -x -F "$n" <<<"$names" || fail "expected $n among the run directories' files: $names"
done
before=$(ls out | wc -l)
for n in $names; do
    printf "global:\n  output_filename: '%s'\n" "$n" > benchy_name.yaml
    "$VB" run "${COMMON[@]}" --run_name "reserved_$n" --benchy_config benchy_name.yaml > bad.txt 2>&1
    rc=$?
    [ $rc -eq 2 ] || { tail -n 3 bad.txt >&2; fail "output_filename '$n' exited $rc, want 2"; }
    [ "$(wc -l < bad.txt)" -eq 1 ] || { cat bad.txt >&2; fail "output_filename '$n' printed more than one line"; }
    grep -q -F "output_filename = '$n' is a name of the results schema" bad.txt || fail "output_filename '$n': $(cat bad.txt)"
done
[ "$(ls out | wc -l)" -eq "$before" ] || fail "a refused output_filename left a run directory behind"

# ---- normalize_on_device: the loader hands raw values, the backend
# normalises each batch after its copy; the same losses, bit for bit ----
"$VB" train "${COMMON[@]}" --run_name train_nod --num_iters 6 --normalize_on_device true > train_nod.txt 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 20 train_nod.txt >&2; fail "train --normalize_on_device true exited $rc"; }
python3 - out/train out/train_nod <<'EOF' || fail "normalize_on_device changed the losses"
import csv, os, sys
rows = lambda d, f: list(csv.DictReader(open(os.path.join(d, f))))
a, b = sys.argv[1], sys.argv[2]
for f, keys in (("train_log.csv", ("step", "loss")), ("validation.csv", ("step", "val_loss", "rmse_u10m"))):
    ra = [[r[k] for k in keys] for r in rows(a, f)]
    rb = [[r[k] for k in keys] for r in rows(b, f)]
    if ra != rb: sys.exit(f"{f}: {ra} != {rb}")
EOF
grep -q '"normalize_on_device":[[:space:]]*true' out/train_nod/run.json || fail "run.json does not record normalize_on_device"

# ---- synthetic_resident: SYNTHETIC's batch is copied for its untimed step
# and stays on the device, so no timed SYNTHETIC step copies (ops.csv has no
# SYNTHETIC h2d row) while FULL's steps still copy theirs ----
"$VB" run "${COMMON[@]}" --run_name resident --benchy_config benchy.yaml --synthetic_resident true > resident.txt 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 20 resident.txt >&2; fail "run --synthetic_resident true exited $rc"; }
python3 - out/resident/ops.csv <<'EOF' || fail "synthetic_resident: SYNTHETIC steps copied their batch"
import csv, sys
h2d = {r["trial_type"]: int(r["calls"]) for r in csv.DictReader(open(sys.argv[1])) if r["name"] == "h2d"}
if "SYNTHETIC" in h2d: sys.exit(f"SYNTHETIC h2d calls {h2d['SYNTHETIC']}, want none")
if h2d.get("FULL") != 6: sys.exit(f"FULL h2d calls {h2d.get('FULL')}, want 6")
EOF
grep -q '"synthetic_resident":[[:space:]]*true' out/resident/run.json || fail "run.json does not record synthetic_resident"

# ---- train again from that checkpoint: starts where the first one ended ----
"$VB" train "${COMMON[@]}" --run_name resumed --num_iters 2 --init_checkpoint $T/checkpoint.h5 > resumed.txt 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 20 resumed.txt >&2; fail "train --init_checkpoint exited $rc"; }
python3 - out/train out/resumed <<'EOF' || fail "resumed run"
import csv, os, sys
a = list(csv.DictReader(open(os.path.join(sys.argv[1], "train_log.csv"))))
b = list(csv.DictReader(open(os.path.join(sys.argv[2], "train_log.csv"))))
if len(b) != 2: sys.exit(f"resumed train_log.csv has {len(b)} rows")
# a fresh init starts near the first run's first loss; the checkpoint starts well below it
if not float(b[0]["loss"]) < float(a[0]["loss"]):
    sys.exit(f"resumed first loss {b[0]['loss']} not below fresh first loss {a[0]['loss']}")
EOF

# ---- train --enable_benchy == run; a type with run_benchmark false has no summary ----
sed -e '/^IO:/,/^synthetic:/ s/run_benchmark: True/run_benchmark: False/' -e 's/report_freq: 1/report_freq: 2/' \
    benchy.yaml > benchy_noio.yaml
"$VB" train "${COMMON[@]}" --run_name tb --enable_benchy --benchy_config benchy_noio.yaml > tb.txt 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 20 tb.txt >&2; fail "train --enable_benchy exited $rc"; }
grep -q '^BENCHY::SUMMARY::IO' tb.txt && fail "IO summary printed although IO run_benchmark is False"
grep -q '^BENCHY::IO' tb.txt && fail "IO trials ran although run_benchmark is False"
grep -q '^BENCHY::SUMMARY:: SYNTHETIC average trial throughput' tb.txt || fail "train --enable_benchy: no SYNTHETIC summary"
grep -q '^BENCHY::SUMMARY::FULL average trial throughput' tb.txt || fail "train --enable_benchy: no FULL summary"
grep -q '^Time taken for epoch' tb.txt && fail "train --enable_benchy trained after the tests (exit_after_tests)"
n=$(grep -c '^BENCHY::FULL_0::Iteration Throughput' tb.txt)
[ "$n" -eq 1 ] || fail "report_freq 2 with 3 batches should print 1 iteration line per trial, got $n"
[ "$(tail -n +2 out/tb/trials.csv | wc -l)" -eq 6 ] || fail "train --enable_benchy trials.csv should have 6 rows"
[ -f out/tb/train_log.csv ] && fail "train --enable_benchy wrote a train_log.csv"

# ---- bad input: exit 2, one line naming the problem, no run directory ----
before=$(ls out | wc -l)
"$VB" run "${COMMON[@]}" --benchy_config benchy.yaml --no_such_flag 3 > bad.txt 2>&1
rc=$?
[ $rc -eq 2 ] || fail "bad flag exited $rc, want 2"
[ "$(wc -l < bad.txt)" -eq 1 ] || { cat bad.txt >&2; fail "bad flag printed more than one line"; }
grep -q -- "no_such_flag" bad.txt || fail "bad flag message does not name the flag: $(cat bad.txt)"

"$VB" train "${COMMON[@]}" --train_data_path "$TMP/missing_dir" > bad.txt 2>&1
rc=$?
[ $rc -eq 2 ] || fail "missing data dir exited $rc, want 2"
[ "$(wc -l < bad.txt)" -eq 1 ] || { cat bad.txt >&2; fail "missing data dir printed more than one line"; }
grep -q "missing_dir" bad.txt || fail "missing data dir message does not name it: $(cat bad.txt)"

# a year file that cannot be read (here a FIFO among the train years) stops
# the run: skipped, the run would train on the other years and exit 0
mkfifo data/train/2099.h5 || fail "mkfifo data/train/2099.h5"
"$VB" train "${COMMON[@]}" --run_name fifo_year --num_iters 1 > bad.txt 2>&1
rc=$?
rm -f data/train/2099.h5
[ $rc -eq 2 ] || { cat bad.txt >&2; fail "a FIFO among the year files exited $rc, want 2"; }
[ "$(wc -l < bad.txt)" -eq 1 ] || { cat bad.txt >&2; fail "a FIFO among the year files printed more than one line"; }
grep -q "data/train/2099.h5: a FIFO (named pipe), not a regular file" bad.txt ||
    fail "a FIFO among the year files: $(cat bad.txt)"

# a FIFO or a directory given as a file is named for what it is (not "no such
# file"), on one line naming the flag, and never opened (a FIFO would block)
mkfifo special.fifo || fail "mkfifo special.fifo"
mkdir -p special.dir
not_regular() {  # WHO WHAT ARGS...: WHO names the flag or variable
    local who=$1 what=$2
    shift 2
    timeout 60 "$@" > bad.txt 2>&1
    local rc=$?
    [ $rc -eq 2 ] || { cat bad.txt >&2; fail "$who as $what exited $rc, want 2"; }
    [ "$(wc -l < bad.txt)" -eq 1 ] || { cat bad.txt >&2; fail "$who as $what printed more than one line"; }
    grep -q "^vitbench: error: $who special\.[a-z]*: $what, not a regular file\$" bad.txt ||
        fail "$who as $what: $(cat bad.txt)"
}
not_regular global_means_path "a FIFO (named pipe)" "$VB" train "${COMMON[@]}" --global_means_path special.fifo
not_regular global_stds_path "a directory" "$VB" train "${COMMON[@]}" --global_stds_path special.dir
not_regular benchy_config "a FIFO (named pipe)" "$VB" run "${COMMON[@]}" --benchy_config special.fifo
not_regular BENCHY_CONFIG_FILE "a directory" env BENCHY_CONFIG_FILE=special.dir "$VB" run "${COMMON[@]}"

# --cupti true on a training loop (no benchy trials to trace) is refused, not
# ignored: this build's line, or the one saying it has no CUPTI
"$VB" train "${COMMON[@]}" --backend auto --cupti true > bad.txt 2>&1
rc=$?
[ $rc -eq 2 ] || fail "train --cupti true exited $rc, want 2"
[ "$(wc -l < bad.txt)" -eq 1 ] || { cat bad.txt >&2; fail "train --cupti true printed more than one line"; }
grep -q -e "cupti = true traces benchy's trials, and train runs none" -e "cupti = true is not available in this build" bad.txt ||
    fail "train --cupti true: $(cat bad.txt)"

# gpu_only WHAT NAME FLAGS...: a switch that needs the CUDA backend is
# refused on cpu by the config, and when auto resolves to cpu (no usable GPU)
# by the run's setup, before any run directory: exit 2, one line naming WHAT.
# Returns 0 when a GPU is visible and the auto run (out/NAME) succeeded.
gpu_only() {
    local what=$1 name=$2
    shift 2
    "$VB" run "${COMMON[@]}" --benchy_config benchy.yaml --backend cpu "$@" > bad.txt 2>&1
    local rc=$?
    [ $rc -eq 2 ] || fail "$what on cpu exited $rc, want 2"
    [ "$(wc -l < bad.txt)" -eq 1 ] || { cat bad.txt >&2; fail "$what on cpu printed more than one line"; }
    grep -q "$what needs the CUDA backend" bad.txt || fail "$what on cpu: $(cat bad.txt)"
    "$VB" run "${COMMON[@]}" --benchy_config benchy.yaml --backend auto --run_name "$name" "$@" > bad.txt 2>&1
    rc=$?
    if [ $rc -eq 2 ]; then
        [ "$(wc -l < bad.txt)" -eq 1 ] || { cat bad.txt >&2; fail "$what with auto on cpu printed more than one line"; }
        grep -q "$what needs the CUDA backend, and backend auto resolved to cpu" bad.txt ||
            fail "$what with auto on cpu: $(cat bad.txt)"
        [ -e "out/$name" ] && fail "$what with auto on cpu left a run directory"
        return 1
    fi
    # a GPU is visible and the build has CUDA: auto is cuda and the run must succeed
    [ $rc -eq 0 ] || { cat bad.txt >&2; fail "$what with auto resolved to cuda exited $rc"; }
    return 0
}
# the real runs are removed: not among the bad inputs the count below checks
if gpu_only "data_loader_config = dali" dali_auto --data_loader_config dali; then rm -rf out/dali_auto; fi
if gpu_only "cuda_graphs = true" graphs_auto --cuda_graphs true; then
    grep -q '"replays":[[:space:]]*[1-9]' out/graphs_auto/run.json || fail "cuda_graphs run recorded no replays"
    rm -rf out/graphs_auto
fi
grep -q '"cuda_graphs":[[:space:]]*{' "$R/run.json" || fail "run.json has no cuda_graphs record"

"$VB" frobnicate > bad.txt 2>&1
[ $? -eq 2 ] || fail "unknown command should exit 2"
"$VB" datagen --years 2 > bad.txt 2>&1
[ $? -eq 2 ] || fail "datagen without --output_dir should exit 2"
grep -q -- "--output_dir" bad.txt || fail "datagen message does not name --output_dir"
"$VB" datagen --output_dir d2 --img_size 32x64 > bad.txt 2>&1
[ $? -eq 2 ] || fail "datagen --img_size 32x64 should exit 2"
grep -q -- "--img_size" bad.txt || fail "datagen message does not name --img_size"
[ "$(ls out | wc -l)" -eq "$before" ] || fail "bad input left a run directory behind"

"$VB" help | grep -q "^usage: vitbench" || fail "help prints no usage"
"$VB" version | grep -q "^vitbench " || fail "version prints nothing"

echo "test_e2e: OK"
