#!/usr/bin/env bash
# test_import.sh <vitbench>: `vitbench import` on files the real programs
# wrote (tests/fixtures/import/README.md: benchy's JSONs and job logs of a
# weak-scaling series, benchy's older file naming, train.py's epoch lines,
# the tutorials' published lines, torch.profiler traces), and what report,
# compare and model make of the result.
#   1. the SC22-style series (weak_scale_N.json, the LSF logs sc22.tut.o<job>)
#      as one sweep: every trial's numbers are the JSON's own, exactly; the
#      warm-ups are the log's; the repeat is found; the report's weak-scaling
#      efficiency is the one computed here from the JSONs
#   2. benchy's json_prefix.DDMMYY-HH:MM:SS.json, train.py's epoch lines
#      (fixtures and the tutorials' published excerpts), --ranks, --point
#   3. profiler traces: a CPU-only torch.profiler trace (gzip'd), HTA's real
#      GPU trace, a two-stream NCCL one: ops.csv and timeline.csv against the
#      traces' own events, the report's step figure
#   4. compare between imported sets (machine key unknown) and against a
#      vitbench sweep of the same layout (the caveat, a ratio per point); model
#      refuses an imported run by name
#   5. bad input: exit 2, one line naming the file and the field, nothing
#      written; a directory imports the rest and exits 2
set -u

VB=${1:?usage: test_import.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
FX=$SRC/tests/fixtures/import

fail() { echo "test_import: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
command -v python3 >/dev/null || fail "python3 is needed for the checks"

TMP=$(mktemp -d /tmp/vb_import.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

# ---- 1. the weak-scaling series ----
"$VB" import "$FX/sc22_weak" --output_dir weak >out1.txt 2>err1.txt || { cat out1.txt err1.txt; fail "import of sc22_weak"; }
grep -q "4 runs -> weak" out1.txt || { cat out1.txt; fail "4 runs expected"; }
grep -q "4 files passed over" out1.txt || { cat out1.txt; fail "the benchy configs should be passed over"; }
python3 - "$FX/sc22_weak" weak <<'EOF' || fail "section 1: imported numbers"
import csv, json, os, re, sys
fx, out = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(f"{out}/index.csv")))
assert [r["run_dir"] for r in rows] == ["runs/weak_scale_1", "runs/weak_scale_2", "runs/weak_scale_2_r2",
                                         "runs/weak_scale_4"], rows
assert [r["ranks"] for r in rows] == ["1", "2", "2", "4"], rows
assert [r["repeat"] for r in rows] == ["0", "0", "1", "0"], rows
assert "series" not in rows[0] and "point" not in rows[0], "one series, points told apart by ranks"
logs = {}
for name in os.listdir(fx):
    if name.startswith("sc22.tut.o"):
        text = open(os.path.join(fx, name)).read()
        m = re.search(r"Writing JSON output to \./(\S+)\.json\.", text)
        logs[m.group(1)] = text
for r in rows:
    run = r["run_dir"].split("/")[1]
    j = json.load(open(f"{fx}/{run}.json"))
    rj = json.load(open(f"{out}/{r['run_dir']}/run.json"))
    assert "fingerprint" not in rj and "config" not in rj, "an imported run carries no fingerprint or config"
    assert rj["imported"]["program"] == "PyTorch with benchy", rj["imported"]
    assert any("machine_key" in u for u in rj["imported"]["unknown"]), rj["imported"]["unknown"]
    assert rj["ranks"] == j["nranks"]
    trials = list(csv.DictReader(open(f"{out}/{r['run_dir']}/trials.csv")))
    iters = list(csv.DictReader(open(f"{out}/{r['run_dir']}/iterations.csv")))
    for kind in ("IO", "SYNTHETIC", "FULL"):
        sec = j[kind]
        timed = [t for t in trials if t["trial_type"] == kind and t["warmup"] == "0"]
        assert len(timed) == len(sec["trial_throughput"]), (run, kind)
        for i, t in enumerate(timed):
            # exact: the JSON's doubles, written with 17 digits
            assert float(t["samples_per_s"]) == sec["trial_throughput"][i], (run, kind, i)
            assert float(t["seconds"]) == sec["trial_time"][i], (run, kind, i)
            nb = len(sec["rates"][i])
            g = round(sec["trial_time"][i] / sum(1 / x for x in sec["rates"][i]))
            assert int(t["nbatches"]) == nb and int(t["global_batch"]) == g, (run, kind, i, t)
            assert g == 8 * j["nranks"], "the fixtures' local batch is 8"
            steps = [float(s["seconds"]) for s in iters if s["trial_type"] == kind and s["trial_index"] == str(i)
                     and s["warmup"] == "0"]
            assert len(steps) == nb and all(abs(a - g / x) <= 1e-15 * a for a, x in zip(steps, sec["rates"][i]))
        # warm-ups: the log's Trial Throughput lines, as printed
        printed = re.findall(rf"BENCHY::{kind}_WARMUP_(\d+)::Trial Throughput: (\S+)", logs[run])
        warm = [t for t in trials if t["trial_type"] == kind and t["warmup"] == "1"]
        assert len(warm) == len(printed) == 1, (run, kind, printed)
        assert float(warm[0]["samples_per_s"]) == float(printed[0][1]), (run, kind)
    summ = {s["trial_type"]: s for s in csv.DictReader(open(f"{out}/{r['run_dir']}/summary.csv"))}
    full = j["FULL"]["trial_throughput"]
    assert abs(float(summ["FULL"]["mean_samples_per_s"]) - sum(full) / len(full)) <= 1e-12 * max(full)
    assert summ["FULL"]["local_batch_size"] == "8" and summ["FULL"]["ranks"] == str(j["nranks"])
    assert abs(float(r["full_samples_per_s"]) - sum(full) / len(full)) <= 1e-12 * max(full)
EOF

"$VB" report weak --no_plots >rep1.txt 2>&1 || { cat rep1.txt; fail "report of the imported series"; }
python3 - "$FX/sc22_weak" weak <<'EOF' || fail "section 1: efficiency"
import csv, json, sys
fx, out = sys.argv[1], sys.argv[2]
md = open(f"{out}/report/report.md").read()
assert "kind weak_scaling" in md, "inferred from the runs' fixed local batch"
summary = md.split("## Summary", 1)[1].split("## Contents", 1)[0]
assert "Weak scaling efficiency at 4 ranks" in summary, summary
assert "imported runs of PyTorch with benchy" in summary, summary
assert "Imported by vitbench import: a run of PyTorch with benchy" in md
def full(*names):
    v = []
    for n in names:
        v += json.load(open(f"{fx}/{n}.json"))["FULL"]["trial_throughput"]
    return sum(v) / len(v)
base = full("weak_scale_1")
want = {1: 1.0, 2: full("weak_scale_2", "weak_scale_2_r2") / (2 * base), 4: full("weak_scale_4") / (4 * base)}
rows = list(csv.DictReader(open(f"{out}/report/scaling.csv")))
assert len(rows) == 3, rows
for r in rows:
    e = float(r["efficiency"])
    w = want[int(r["ranks"])]
    assert abs(e - w) <= 1e-5 * w, (r["ranks"], e, w)   # the table's 6 significant digits
EOF

# ---- 2. other benchy and train.py files ----
"$VB" import "$FX/old_benchy" --output_dir old >out2.txt 2>&1 || { cat out2.txt; fail "benchy's json_prefix naming"; }
python3 - "$FX/old_benchy" old <<'EOF' || fail "section 2: json_prefix"
import csv, glob, json, sys
j = json.load(open(glob.glob(f"{sys.argv[1]}/sc21_bs64.*.json")[0]))
rj = json.load(open(f"{sys.argv[2]}/run.json"))
assert rj["imported"]["point"] == "sc21_bs64", rj["imported"]
paths = [s["path"] for s in rj["imported"]["sources"]]
assert any(p.endswith("job.o123456") for p in paths), "the log that says it wrote the JSON"
t = [r for r in csv.DictReader(open(f"{sys.argv[2]}/trials.csv")) if r["trial_type"] == "SYNTHETIC" and r["warmup"] == "0"]
assert [float(r["samples_per_s"]) for r in t] == j["SYNTHETIC"]["trial_throughput"]
tl = list(csv.DictReader(open(f"{sys.argv[2]}/train_log.csv")))
assert len(tl) == 8, "one row per epoch line"
EOF

# train.py without benchy: each epoch a FULL trial, the first a warm-up
for f in "$FX/train_epochs.log" "$FX"/published/*_epochs.log; do
  b=$(basename "$f" .log)
  "$VB" import "$f" --output_dir "ep_$b" --ranks 4 >"ep_$b.txt" 2>&1 || { cat "ep_$b.txt"; fail "import $f"; }
  python3 - "$f" "ep_$b" <<'EOF' || fail "section 2: epochs of $f"
import csv, json, re, sys
text = open(sys.argv[1]).read()
ep = re.findall(r"Time taken for epoch (\d+) is (\S+) sec, avg (\S+) samples/sec", text)
loss = re.findall(r"Avg train loss=(\S+)", text)
trials = list(csv.DictReader(open(f"{sys.argv[2]}/trials.csv")))
assert len(trials) == len(ep), (len(trials), len(ep))
for k, (t, (n, sec, rate)) in enumerate(zip(trials, ep)):
    assert t["trial_type"] == "FULL" and t["warmup"] == ("1" if k == 0 else "0"), t
    assert float(t["samples_per_s"]) == float(rate) and float(t["seconds"]) == float(sec), (t, rate, sec)
    assert t["nbatches"] == "" and t["global_batch"] == "" and t["ranks"] == "4", "not in an epoch line"
tl = list(csv.DictReader(open(f"{sys.argv[2]}/train_log.csv")))
assert [float(r["loss"]) for r in tl if r["loss"]] == [float(x) for x in loss]
rj = json.load(open(f"{sys.argv[2]}/run.json"))
assert rj["imported"]["program"] == "PyTorch (train.py's epoch lines)" and rj["ranks"] == 4
EOF
done
"$VB" report ep_sc21_epochs --no_plots >rep2.txt 2>&1 || { cat rep2.txt; fail "report of an epochs-only run"; }
grep -q "FULL throughput: " ep_sc21_epochs/report/report.md || fail "the epochs' FULL throughput in the summary"

# a plain --ranks is for the files that do not say: a log beside its JSON takes the JSON's nranks
"$VB" import "$FX/sc22_weak/weak_scale_4.json" "$FX/sc22_weak/sc22.tut.o1003" --ranks 2 --output_dir r4 >r4.txt 2>&1 ||
  { cat r4.txt; fail "--ranks N beside a JSON that says its nranks"; }
grep -q '"ranks":[[:space:]]*4,' r4/run.json || fail "the JSON's nranks, not --ranks"
"$VB" import "$FX/sc22_weak/weak_scale_4.json" "$FX/sc22_weak/sc22.tut.o1003" --ranks "$FX/sc22_weak/sc22.tut.o1003=2" \
  --output_dir r4b >r4.txt 2>&1 && fail "--ranks FILE=N against the JSON's nranks"
grep -q "sc22.tut.o1003: --ranks 2 for it, but .*weak_scale_4.json says nranks 4" r4.txt || { cat r4.txt; fail "no line for it"; }

# --point: files of any names as the repeats of one point, a trace with them
"$VB" import --point base=sc22a.json,sc22b.json --output_dir pointed >out3.txt 2>&1 && fail "--point with missing files"
cp "$FX/sc22_weak/weak_scale_2.json" a.json && cp "$FX/sc22_weak/weak_scale_2_r2.json" b.json
"$VB" import --point base=a.json,b.json --output_dir pointed >out3.txt 2>&1 || { cat out3.txt; fail "--point"; }
python3 - pointed <<'EOF' || fail "section 2: --point"
import csv, sys
rows = list(csv.DictReader(open(f"{sys.argv[1]}/index.csv")))
assert [(r["repeat"], r["ranks"]) for r in rows] == [("0", "2"), ("1", "2")], rows
EOF

# ---- 3. traces ----
"$VB" import "$FX/cpu_profile.pt.trace.json.gz" --output_dir cpu >out4.txt 2>&1 || { cat out4.txt; fail "cpu trace"; }
gunzip -c "$FX/cpu_profile.pt.trace.json.gz" >cpu_profile.pt.trace.json
python3 - cpu_profile.pt.trace.json cpu <<'EOF' || fail "section 3: the CPU trace"
import collections, csv, sys
import json
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
ops = {(r["name"], r["category"]): r for r in csv.DictReader(open(f"{sys.argv[2]}/ops.csv"))}
cpu = [e for e in ev if e["cat"] == "cpu_op"]
# self time by the profiler's rule: less the operators nested on the thread
by_thread = collections.defaultdict(list)
for e in cpu:
    by_thread[e["tid"]].append(e)
self_t = collections.defaultdict(float)
calls = collections.Counter()
for evs in by_thread.values():
    evs.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in evs:
        while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
            stack.pop()
        e["self"] = e["dur"]
        if stack:
            stack[-1]["self"] -= e["dur"]
        stack.append(e)
for e in cpu:
    self_t[e["name"]] += max(e["self"], 0)
    calls[e["name"]] += 1
for name, tot in self_t.items():
    r = ops[(name, "compute")]
    assert int(r["calls"]) == calls[name], name
    assert abs(float(r["total_s"]) - tot * 1e-6) <= 1e-9 + 1e-9 * tot, (name, r["total_s"], tot)
steps = [e for e in ev if e["name"].startswith("ProfilerStep#")]
step_s = sum(e["dur"] for e in steps) * 1e-6
share = float(ops[("aten::addmm", "compute")]["share_of_step"])
assert abs(share - self_t["aten::addmm"] * 1e-6 / step_s) <= 1e-9, share
tl = list(csv.DictReader(open(f"{sys.argv[2]}/timeline.csv")))
st = [r for r in tl if r["kind"] == "step"]
assert [r["name"] for r in st] == [e["name"] for e in sorted(steps, key=lambda e: e["ts"])] and all(
    r["lane"] == "main" and r["trial_type"] == "FULL" for r in st), st
EOF
"$VB" report cpu >rep3.txt 2>&1 || { cat rep3.txt; fail "report of the trace"; }
grep -q "Rank 0, timed FULL steps" cpu/report/report.md || fail "the trace's ops in the report"
if command -v gnuplot >/dev/null; then
  grep -q "One FULL step per rank" cpu/report/report.md || fail "the step timeline figure of the trace"
fi

"$VB" import "$FX/hta_simple_add_trace.json.gz" "$FX/handmade_nccl_rank1.json" --output_dir gpu >out5.txt 2>&1 ||
  { cat out5.txt; fail "gpu traces"; }
gunzip -c "$FX/hta_simple_add_trace.json.gz" >hta.json
python3 - hta.json gpu <<'EOF' || fail "section 3: GPU traces"
import csv, json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
tl = list(csv.DictReader(open(f"{sys.argv[2]}/runs/hta_simple_add_trace/timeline.csv")))
kern = [e for e in ev if e["cat"] == "kernel"]
mem = [e for e in ev if e["cat"] in ("gpu_memcpy", "gpu_memset")]
assert len([r for r in tl if r["kind"] == "compute"]) == len(kern), "every kernel a compute row (no nccl in it)"
assert len([r for r in tl if r["kind"] == "memcpy"]) == len(mem), "HTA's memory class"
assert {r["lane"] for r in tl} == {f"stream{e['args']['stream']}" for e in kern + mem}
ops = list(csv.DictReader(open(f"{sys.argv[2]}/runs/hta_simple_add_trace/ops.csv")))
assert all(r["category"] in ("compute", "memcpy", "cpu_op", "api") for r in ops)
k = [r for r in ops if r["category"] == "compute"]
assert sum(int(r["calls"]) for r in k) == len(kern)
assert abs(sum(float(r["total_s"]) for r in k) - sum(e["dur"] for e in kern) * 1e-6) <= 1e-9
nc = list(csv.DictReader(open(f"{sys.argv[2]}/runs/handmade_nccl/ops.csv")))
cat = {r["name"]: r["category"] for r in nc}
assert cat["ncclDevKernel_AllReduce_Sum_f32_RING_LL"] == "comm" and cat["ampere_sgemm_128x64_nn"] == "compute"
assert cat["aten::mm"] == "cpu_op" and cat["cudaLaunchKernel"] == "api", cat
assert {r["rank"] for r in nc} == {"1"}, "distributedInfo's rank"
rj = json.load(open(f"{sys.argv[2]}/runs/handmade_nccl/run.json"))
assert rj["ranks"] == 2, "distributedInfo's world_size"
EOF
"$VB" report gpu/runs/handmade_nccl --no_plots >rep4.txt 2>&1 || { cat rep4.txt; fail "report of the nccl trace"; }
python3 - gpu/runs/handmade_nccl/report/breakdown.csv <<'EOF' || fail "section 3: breakdown of the nccl trace"
import csv, sys
r = [r for r in csv.DictReader(open(sys.argv[1])) if r["rank"] == "1"][0]
# compute [40, 340] and [700, 900] us, nccl [250, 650]: 90 us hidden, 310 exposed, in one 1000 us step
assert abs(float(r["comm_hidden_ms"]) - 0.09) < 1e-6 and abs(float(r["comm_exposed_ms"]) - 0.31) < 1e-6, r
EOF

# ---- 4. compare and model ----
"$VB" import "$FX/sc22_weak/weak_scale_2.json" "$FX/sc22_weak/sc22.tut.o1002" --output_dir A >/dev/null 2>&1 || fail "A"
"$VB" import "$FX/sc22_weak/weak_scale_2_r2.json" "$FX/sc22_weak/sc22.tut.o1004" --output_dir B >/dev/null 2>&1 || fail "B"
"$VB" compare A B --metric FULL >cmp1.txt 2>&1
rc=$?
[ $rc -ne 2 ] || { cat cmp1.txt; fail "compare of two imported runs refused"; }
grep -q "machine key unknown on both sides" cmp1.txt || { cat cmp1.txt; fail "the unknown machine key is not said"; }
# a vitbench sweep of the same layout, written as vitbench writes one
python3 - mine <<'EOF' || fail "section 4: a vitbench sweep"
import json, os, sys
d = sys.argv[1]
os.makedirs(f"{d}/runs")
rows = []
for i, n in enumerate((1, 2, 4)):
    run = f"weak_scale_{n}"
    os.makedirs(f"{d}/runs/{run}")
    fp = {"host": "node1", "cpu_model": "Test CPU", "affinity_cores": 1, "omp_threads": 1, "ranks": n,
          "backend": "cpu", "blas_coretype": "Haswell", "gpu_name": "", "machine_key": "%016x" % (0xbeef + n)}
    json.dump({"run_id": run, "status": "completed", "backend": "cpu", "ranks": n, "local_batch_size": 8,
               "global_batch_size": 8 * n, "config": {"config": "tiny", "embed_dim": 64},
               "parallel": {"tp": 1, "cp": 1, "dp": n}, "fingerprint": fp}, open(f"{d}/runs/{run}/run.json", "w"))
    with open(f"{d}/runs/{run}/trials.csv", "w") as f:
        f.write("run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s\n")
        for t in range(5):
            sec = 1.0 + 0.01 * t
            f.write(f"{run},FULL,{t},0,10,{8 * n},{n},0,{sec!r},{80 * n / sec!r}\n")
    rows.append(f"{i},runs/{run},completed,0,0,{n},1")
open(f"{d}/index.csv", "w").write("run_index,run_dir,status,exit_code,repeat,ranks,threads_per_rank\n" + "\n".join(rows) + "\n")
EOF
"$VB" compare mine weak --metric FULL >cmp2.txt 2>&1
rc=$?
[ $rc -ne 2 ] || { cat cmp2.txt; fail "compare of a vitbench sweep and an imported one refused"; }
grep -q "^caveat: BASE is vitbench's trainer, NEW PyTorch with benchy: different programs" cmp2.txt ||
  { cat cmp2.txt; fail "no caveat"; }
for n in 1 2 4; do grep -q "^| ranks=$n | FULL" cmp2.txt || { cat cmp2.txt; fail "no ratio at ranks=$n"; }; done
python3 - weak/compare.json "$FX/sc22_weak" <<'EOF' || fail "section 4: per-point ratios"
import json, statistics, sys
c = json.load(open(sys.argv[1]))
assert "different programs" in c["caveat"]
res = {r["point"]: r for r in c["results"]}
j4 = json.load(open(f"{sys.argv[2]}/weak_scale_4.json"))["FULL"]["trial_throughput"]
base4 = statistics.median([80 * 4 / (1.0 + 0.01 * t) for t in range(5)])
r = res["ranks=4"]
assert abs(r["ratio"] - statistics.median(j4) / base4) <= 1e-9 * r["ratio"], (r["ratio"], statistics.median(j4) / base4)
EOF
"$VB" model --machine "$SRC/scenarios/machines/cpu-2core.yaml" --reference "$SRC/scenarios/references/sc23-base-1gpu-a100.yaml" \
  --sweep weak >model.txt 2>&1
[ $? -eq 2 ] && grep -q "an imported run of PyTorch with benchy" model.txt || { cat model.txt; fail "model on an imported sweep"; }

# ---- 5. bad input ----
mkdir bad
J=$FX/sc22_weak/weak_scale_1.json
python3 - "$J" bad <<'EOF'
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t)
v = repr(j["FULL"]["trial_throughput"][1])
d = sys.argv[2]
open(f"{d}/cut.json", "w").write(t[:len(t) // 2])
open(f"{d}/nan.json", "w").write(t.replace(v, "NaN"))
open(f"{d}/neg.json", "w").write(t.replace(v, "-" + v))
j["nranks"] = 0
json.dump(j, open(f"{d}/zero.json", "w"))
open(f"{d}/notjson.pt.trace.json", "w").write("this is not JSON\n")
json.dump({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]},
          open(f"{d}/noevents.pt.trace.json", "w"))
open(f"{d}/summary_only.log", "w").write(open(sys.argv[1].replace("sc22_weak/weak_scale_1.json",
                                                                  "published/sc22_benchy_summary.txt")).read())
open(f"{d}/plain.log", "w").write("srun: job 1 queued\nhello\n")
j["nranks"] = 2
json.dump(j, open(f"{d}/weak_scale_1_r2.json", "w"))
# a trial time that makes the batch larger than an int can count
j = json.loads(t)
j["FULL"]["trial_time"][1] *= 1e12
json.dump(j, open(f"{d}/huge_batch.json", "w"))
EOF
cp "$J" bad/weak_scale_1.json
sed 's/\(BENCHY::FULL_1::Trial Throughput: \)\([0-9]\)/\19\2/' "$FX/sc22_weak/sc22.tut.o1001" >bad/disagree.log
check_refused() { # FILE... then the expected words of the one error line
  local want=$1 out=o_$RANDOM
  shift
  "$VB" import "$@" --output_dir "$out" >r.out 2>r.err
  local rc=$?
  [ $rc -eq 2 ] || { cat r.out r.err; fail "$* exited $rc, not 2"; }
  grep -q -- "$want" r.err || { cat r.err; fail "$*: no line with '$want'"; }
  [ ! -e "$out" ] || fail "$*: something was written"
}
check_refused "cut.json: the JSON ends at byte .* (a file cut short)" bad/cut.json
check_refused "nan.json: FULL trial_throughput\[1\] is NaN" bad/nan.json
check_refused "neg.json: FULL trial_throughput\[1\] is -" bad/neg.json
check_refused "zero.json: nranks is 0" bad/zero.json
check_refused "notjson.pt.trace.json: not JSON" bad/notjson.pt.trace.json
check_refused "noevents.pt.trace.json: no events" bad/noevents.pt.trace.json
check_refused "summary_only.log: no trial lines" bad/summary_only.log
check_refused "plain.log: no BENCHY:: line" bad/plain.log
check_refused "weak_scale_1_r2.json: claims point weak_scale_1 (repeat mark 2) with 2 ranks" bad/weak_scale_1.json bad/weak_scale_1_r2.json
check_refused "disagree.log line [0-9]*: FULL_1 Trial Throughput 9" bad/disagree.log "$J"
check_refused "import: --ranks .*: want N or FILE=N" bad/plain.log --ranks 0
check_refused "huge_batch.json: FULL trial 1: its rates and trial_time give .* samples an iteration, more than a batch can be" \
  bad/huge_batch.json
# ids no process, thread or stream can have (1e30, 1e20) are none: the
# kernel keeps its thread's lane, the metadata names no process; nothing
# else of the import changes (and no conversion overflows, under UBSan)
T=$SRC/tests/fuzz/corpus/import/trace.json
python3 - "$T" <<'EOF' || fail "huge ids trace"
import json, sys
j = json.load(open(sys.argv[1]))
[e for e in j["traceEvents"] if e.get("cat") == "kernel"][-1]["args"]["stream"] = 1e20
[e for e in j["traceEvents"] if e.get("ph") == "M"][1]["pid"] = 1e30
json.dump(j, open("huge_ids.pt.trace.json", "w"))
EOF
"$VB" import "$T" --output_dir ids_plain >r.out 2>&1 || { cat r.out; fail "import of the corpus trace"; }
"$VB" import huge_ids.pt.trace.json --output_dir ids_huge >r.out 2>&1 || { cat r.out; fail "a trace with huge ids"; }
cmp -s ids_plain/timeline.csv ids_huge/timeline.csv && cmp -s ids_plain/ops.csv ids_huge/ops.csv ||
  fail "huge ids changed the import: $(diff ids_plain/timeline.csv ids_huge/timeline.csv | head -5)"
# a directory: each refused file named, the good ones imported, exit 2
mkdir mixed && cp bad/nan.json bad/cut.json mixed/ && cp "$FX/sc22_weak/weak_scale_2.json" "$FX/sc22_weak/weak_scale_4.json" mixed/ &&
  cp "$FX/sc22_weak/benchy-weak_scale_2.yaml" mixed/
"$VB" import mixed --output_dir mixed_out >r.out 2>r.err
rc=$?
[ $rc -eq 2 ] || { cat r.out r.err; fail "a directory with refused files exited $rc"; }
grep -q "mixed/nan.json: FULL trial_throughput" r.err && grep -q "mixed/cut.json: the JSON ends" r.err &&
  grep -q "2 files refused (each named above); the other 2 runs imported" r.err || { cat r.err; fail "refusals not named"; }
[ "$(tail -n +2 mixed_out/index.csv | wc -l)" = 2 ] || fail "the two good runs are not in index.csv"
"$VB" import mixed --output_dir mixed_out >r.out 2>r.err && fail "an import into a directory that holds files"
grep -q "is not empty" r.err || { cat r.err; fail "no line for a non-empty --output_dir"; }

echo "test_import: OK"
