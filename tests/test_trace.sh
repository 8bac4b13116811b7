#!/usr/bin/env bash
# test_trace.sh <vitbench>: `vitbench trace` on a hand-written run directory.
#   1. 2 ranks, main / comm / loader0 lanes, markers and buckets, run.json:
#      trace.json parses; one process per rank with its metadata; lanes on
#      their tids (overlapping allreduces on a comm sub-thread); every slice
#      inside its parent (exact decimal arithmetic);
#      no negative durations; allreduces on the comm lane; every flow paired
#      marker -> allreduce of the same bucket; samples/s = global batch / step.
#   2. a timeline.csv path with --output; no run.json: no counters, a warning.
#   3. header-only timeline: a valid trace with metadata and a warning.
#   4. bad input: exit 2 with one line naming the file / flag; --help lists
#      every flag.
#   5. --format kineto (tests/py/check_kineto.py): one file per rank as HTA
#      reads them (the rank found by HTA's own regex, device events with
#      stream / device / correlation, one launch per device event,
#      ProfilerStep#k, names HTA classifies by, no overlap on a stream, whole
#      microseconds); a CPU run on pseudo-streams, a timeline with stream
#      lanes on its streams; stale rank files removed, a directory with
#      other traces refused. HTA itself reads them in test_hta.sh.
set -u

VB=${1:?usage: test_trace.sh <path-to-vitbench>}
fail() { echo "test_trace: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
command -v python3 >/dev/null || fail "python3 is needed to check the JSON"

TMP=$(mktemp -d /tmp/vb_trace.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT

HDR=rank,lane,kind,name,trial_type,trial_index,step,start_s,dur_s,bytes,flops,bucket
RUN=$TMP/run
mkdir -p "$RUN"
# rank 0: two steps, markers on main; rank 1: one step, markers on the comm
# lane (as runs write them), one whose bucket has no allreduce (no flow), a
# name with quotes and a comma.
# forward (0.1 + 0.2) and its last op (0.2 + 0.1) end together: decimal
# rounding must not push the op past its parent.
cat >"$RUN/timeline.csv" <<EOF
$HDR
0,main,trial,FULL_0,FULL,0,-1,0.0,0.5,0,0,-1
0,main,step,step,FULL,0,0,0.1,0.2,0,0,-1
0,main,phase,forward,FULL,0,0,0.1,0.1,0,0,-1
0,main,compute,matmul_forward_qkv,FULL,0,0,0.1,0.05,4096,1e9,-1
0,main,compute,gelu_forward,FULL,0,0,0.15,0.05,2048,1000,-1
0,main,phase,backward,FULL,0,0,0.2,0.08,0,0,-1
0,main,compute,matmul_backward,FULL,0,0,0.2,0.08,8192,2e9,-1
0,main,marker,bucket_ready,FULL,0,0,0.23,0,0,0,0
0,main,marker,bucket_ready,FULL,0,0,0.26,0,0,0,1
0,main,comm,ddp_wait,FULL,0,0,0.28,0.02,0,0,-1
0,main,step,step,FULL,0,1,0.3,0.2,0,0,-1
0,main,phase,forward,FULL,0,1,0.3,0.1,0,0,-1
0,main,compute,matmul_forward_qkv,FULL,0,1,0.3,0.1,4096,1e9,-1
0,main,marker,bucket_ready,FULL,0,1,0.45,0,0,0,0
0,comm,comm,allreduce,FULL,0,0,0.231,0.05,1048576,0,0
0,comm,comm,allreduce,FULL,0,0,0.261,0.039,524288,0,1
0,comm,comm,allreduce,FULL,0,1,0.451,0.04,1048576,0,0
0,loader0,io,read_sample,FULL,0,0,0.0,0.000123457,65536,0,-1
1,main,trial,FULL_0,FULL,0,-1,0.0,0.3,0,0,-1
1,main,step,step,FULL,0,0,0.1,0.2,0,0,-1
1,main,compute,"weird ""name"", x",FULL,0,0,0.1,0.15,0,0,-1
1,comm,marker,bucket_ready,FULL,0,0,0.24,0,0,0,0
1,comm,marker,bucket_ready,FULL,0,0,0.245,0,0,0,7
1,comm,comm,allreduce,FULL,0,0,0.241,0.05,1048576,0,0
EOF
cat >"$RUN/run.json" <<'EOF'
{"run_id": "t", "ranks": 2, "local_batch_size": 4, "global_batch_size": 8, "parallel": {"tp": 1, "cp": 1, "dp": 2}}
EOF

out=$("$VB" trace "$RUN" 2>&1) || fail "trace exited $?: $out"
[ -f "$RUN/trace.json" ] || fail "no $RUN/trace.json: $out"
grep -q "1 bucket_ready markers have no comm-lane row" <<<"$out" || fail "unmatched marker not reported: $out"

python3 - "$RUN/trace.json" <<'PY' || fail "trace.json checks failed"
import json, sys
from decimal import Decimal as D

doc = json.load(open(sys.argv[1]), parse_float=D)
def check(cond, msg):
    if not cond:
        print("test_trace:", msg, file=sys.stderr)
        sys.exit(1)

check(doc.get("displayTimeUnit") == "ms", "displayTimeUnit")
ev = doc["traceEvents"]
meta = [e for e in ev if e["ph"] == "M"]
pname = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
check(pname == {0: "rank 0", 1: "rank 1"}, f"process names {pname}")
psort = {e["pid"]: e["args"]["sort_index"] for e in meta if e["name"] == "process_sort_index"}
check(psort == {0: 0, 1: 1}, f"process sort {psort}")
tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
# bucket 1's allreduce overlaps bucket 0's without nesting: a sub-thread of comm
check(tname == {(0, 0): "main", (0, 1): "comm", (0, 1000001): "comm (2)", (0, 10): "loader0", (1, 0): "main",
                (1, 1): "comm"}, f"thread names {tname}")
tsort = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in meta if e["name"] == "thread_sort_index"}
check(tsort[(0, 0)] < tsort[(0, 1)] < tsort[(0, 1000001)] < tsort[(0, 10)], f"thread order {tsort}")

X = [e for e in ev if e["ph"] == "X"]
check(len(X) == 19, f"{len(X)} X events, want 19")
for e in X:
    check(e["dur"] >= 0, f"negative duration {e}")
    check(isinstance(e["ts"], D) or isinstance(e["ts"], int), f"ts not a number {e}")

# nesting: on each (pid, tid), a slice that starts inside another ends inside it
lanes = {}
for e in X:
    lanes.setdefault((e["pid"], e["tid"]), []).append(e)
for key, es in lanes.items():
    es.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in es:
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        if stack:
            p = stack[-1]
            check(e["ts"] + e["dur"] <= p["ts"] + p["dur"], f"{e['name']} ends after its parent {p['name']} on {key}")
        stack.append(e)
main0 = [e for e in lanes[(0, 0)]]
names = [e["name"] for e in main0]
check("step 0" in names and "step 1" in names, f"step names {names}")
qkv = [e for e in main0 if e["name"] == "matmul_forward_qkv"][0]
check(qkv["args"] == {"bytes": 4096, "flops": 1000000000, "step": 0, "trial_type": "FULL", "trial_index": 0},
      f"op args {qkv['args']}")
check(qkv["ts"] == D("100000.000") and qkv["dur"] == D("50000.000"), f"op time {qkv['ts']} {qkv['dur']}")
rd = lanes[(0, 10)][0]
check(rd["dur"] == D("123.457"), f"sub-microsecond duration kept: {rd['dur']}")
check(any(e["name"] == 'weird "name", x' for e in X), "escaped name")

comm = [e for e in X if e["cat"] == "comm" and e["name"] == "allreduce"]
check(len(comm) == 4 and all(e["tid"] % 1000000 == 1 for e in comm), "allreduces on the comm lane")
check(all("bucket" in e["args"] and e["args"]["bytes"] > 0 for e in comm), "allreduce args")
wait = [e for e in X if e["name"] == "ddp_wait"]
check(len(wait) == 1 and wait[0]["tid"] == 0, "blocking comm on main")

inst = [e for e in ev if e["ph"] == "i"]
check(len(inst) == 5 and all(e.get("s") == "t" for e in inst), f"markers {inst}")
check(sorted((e["pid"], e["tid"]) for e in inst) == [(0, 0), (0, 0), (0, 0), (1, 1), (1, 1)], "markers on their lanes")

# flows: each id once as s (main lane, where the training thread runs even
# when the marker sits on the comm lane), once as f (comm lane, bp e),
# pointing from a bucket_ready marker to the allreduce of the same bucket
S = {e["id"]: e for e in ev if e["ph"] == "s"}
F = {e["id"]: e for e in ev if e["ph"] == "f"}
check(len(S) == 4 and set(S) == set(F), f"flows s {sorted(S)} f {sorted(F)}")
check(len([e for e in ev if e["ph"] == "s"]) == 4 and len([e for e in ev if e["ph"] == "f"]) == 4, "duplicate flow ids")
for i, s in S.items():
    f = F[i]
    check(f.get("bp") == "e", "flow end binds to the enclosing slice")
    check(s["pid"] == f["pid"] and s["tid"] == 0 and f["tid"] % 1000000 == 1, f"flow lanes {s} {f}")
    mk = [m for m in inst if m["pid"] == s["pid"] and m["ts"] == s["ts"]]
    ar = [a for a in comm if a["pid"] == f["pid"] and a["ts"] == f["ts"]]
    check(len(mk) == 1 and len(ar) == 1, f"flow {i} does not join a marker and an allreduce")
    check(mk[0]["args"]["bucket"] == ar[0]["args"]["bucket"] and mk[0]["args"]["step"] == ar[0]["args"]["step"],
          f"flow {i} joins different buckets/steps")
    # what Perfetto's JSON importer needs of a v1 flow (docs/traces.md): both
    # ends share id, cat and name (its key); "s" binds to the slice open on
    # its thread at its time, "f" with bp "e" to the slice enclosing it
    check(s["cat"] == f["cat"] and s["name"] == f["name"], f"flow {i}: ends differ in cat or name")
    for end in (s, f):
        check(any(x["pid"] == end["pid"] and x["tid"] == end["tid"] and x["ts"] <= end["ts"] < x["ts"] + x["dur"]
                  for x in X), f"flow {i}: {end['ph']} at {end['ts']} is inside no slice of its thread")

# counters: global batch 8 over 0.2 s steps = 40 samples/s; 0 after the last step
C = [e for e in ev if e["ph"] == "C"]
c0 = sorted((e["ts"], e["args"]["samples/s"]) for e in C if e["pid"] == 0)
check(c0 == [(D("100000.000"), 40), (D("300000.000"), 40), (D("500000.000"), 0)], f"rank 0 counters {c0}")
c1 = sorted((e["ts"], e["args"]["samples/s"]) for e in C if e["pid"] == 1)
check(c1 == [(D("100000.000"), 40), (D("300000.000"), 0)], f"rank 1 counters {c1}")
PY

# ---- 2. a timeline.csv path, --output elsewhere, no run.json ----
mkdir -p "$TMP/bare"
cp "$RUN/timeline.csv" "$TMP/bare/tl.csv"
out=$("$VB" trace "$TMP/bare/tl.csv" --output "$TMP/bare/out.json" 2>&1) || fail "trace of a file exited $?: $out"
grep -q "run.json: missing" <<<"$out" || fail "missing run.json not warned: $out"
python3 -c '
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
assert not [e for e in ev if e["ph"] == "C"], "counters without a batch size"
assert len([e for e in ev if e["ph"] == "X"]) == 19
' "$TMP/bare/out.json" || fail "trace without run.json"
[ ! -e "$TMP/bare/trace.json" ] || fail "--output ignored"

# ---- 3. header-only timeline ----
mkdir -p "$TMP/empty"
echo "$HDR" >"$TMP/empty/timeline.csv"
cp "$RUN/run.json" "$TMP/empty/"
out=$("$VB" trace "$TMP/empty" 2>&1) || fail "empty timeline exited $?: $out"
grep -q "warning:.*no events" <<<"$out" || fail "empty timeline not warned: $out"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
assert d["displayTimeUnit"] == "ms"
assert sorted(e["args"]["name"] for e in ev if e["name"] == "process_name") == ["rank 0", "rank 1"], ev
assert all(e["ph"] == "M" for e in ev), ev
' "$TMP/empty/trace.json" || fail "empty timeline trace"

# ---- 4. bad input: exit 2, one line, naming the culprit ----
expect_input_error() { # needle args...
    local needle=$1 out rc
    shift
    out=$("$VB" "$@" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] || fail "'$*' exited $rc, want 2: $out"
    [ "$(wc -l <<<"$out")" = 1 ] || fail "'$*' printed more than one line: $out"
    grep -q "^vitbench: error: .*$needle" <<<"$out" || fail "'$*' does not name '$needle': $out"
}
expect_input_error "missing PATH" trace
expect_input_error "$TMP/nope" trace "$TMP/nope"
expect_input_error "no timeline.csv" trace "$TMP/bare"
expect_input_error "--frobnicate" trace "$RUN" --frobnicate
expect_input_error "--output" trace "$RUN" --output
mkdir -p "$TMP/bad"
printf '%s\n0,main,step,step,FULL,0,0,zero,0.1,0,0,-1\n' "$HDR" >"$TMP/bad/timeline.csv"
expect_input_error "$TMP/bad/timeline.csv: record 2: column start_s" trace "$TMP/bad"
printf 'rank,lane,kind,name\n0,main,step,step\n' >"$TMP/bad/timeline.csv"
expect_input_error "no column 'trial_type'" trace "$TMP/bad"
printf '%s\n' "$HDR" >"$TMP/bad/timeline.csv"
echo '{"ranks": 2,' >"$TMP/bad/run.json"
expect_input_error "$TMP/bad/run.json" trace "$TMP/bad"
rm "$TMP/bad/run.json"
expect_input_error "$TMP/nodir/x.json" trace "$TMP/bad" --output "$TMP/nodir/x.json"
expect_input_error "--format expects one of chrome, kineto, got 'perfetto'" trace "$RUN" --format perfetto
expect_input_error "--format expects a value" trace "$RUN" --format
# every flag alike: an unknown one (either form) or a missing value names the flag
expect_input_error "--bogus" trace "$RUN" --bogus=1
expect_input_error "-x" trace -x "$RUN"
expect_input_error "--output" trace --format chrome "$RUN" --output
# --help (and -h) exits 0 and lists every flag with its meaning
help=$("$VB" trace --help) || fail "trace --help exited $?"
[ "$("$VB" trace -h)" = "$help" ] || fail "trace -h differs from --help"
for f in --format --output; do
    grep -qE -- "^  $f( [^ ]+)?  +[^ ]" <<<"$help" || fail "trace --help does not list $f with its meaning: $help"
done

# ---- 5. --format kineto ----
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
# an earlier export of more ranks left a file that this one must remove
mkdir -p "$RUN/kineto"
echo '{}' >"$RUN/kineto/rank5.pt.trace.json"
out=$("$VB" trace "$RUN" --format kineto 2>&1) || fail "kineto exited $?: $out"
grep -q "2 rank files (Kineto)" <<<"$out" || fail "kineto summary: $out"
grep -q "removed 1 rank file" <<<"$out" || fail "stale rank file not reported: $out"
[ ! -e "$RUN/kineto/rank5.pt.trace.json" ] || fail "stale rank5.pt.trace.json kept"
[ "$(ls "$RUN/kineto" | tr '\n' ' ')" = "rank0.pt.trace.json rank1.pt.trace.json " ] ||
    fail "kineto files: $(ls "$RUN/kineto")"
python3 "$SRC/tests/py/check_kineto.py" "$RUN/kineto" cpu >/dev/null || fail "kineto checks (CPU run)"

# a directory holding other traces: HTA would read them as more ranks
mkdir -p "$TMP/other"
echo '{}' >"$TMP/other/worker0.pt.trace.json"
expect_input_error "$TMP/other holds worker0.pt.trace.json" trace "$RUN" --format kineto --output "$TMP/other"
[ ! -e "$TMP/other/rank0.pt.trace.json" ] || fail "wrote into a directory it refused"

# a timeline with stream lanes (an nsys import): its streams, no launches (no steps)
FX=$SRC/tests/fixtures/nsys
"$VB" nsys "$FX/cuda_gpu_trace_new_us.csv" "$FX/cuda_gpu_trace_old.csv" --output_dir "$TMP/ns" >/dev/null 2>&1 ||
    fail "nsys import for the kineto check"
out=$("$VB" trace "$TMP/ns/timeline.csv" --format kineto --output "$TMP/ns/k" 2>&1) || fail "kineto of an nsys import: $out"
python3 "$SRC/tests/py/check_kineto.py" "$TMP/ns/k" streams >/dev/null || fail "kineto checks (streams)"
python3 - "$TMP/ns/k" <<'PY' || fail "kineto names of an nsys import"
import json, sys
d = json.load(open(sys.argv[1] + "/rank1.pt.trace.json"))
dev = {(e["tid"], e["name"], e["cat"]) for e in d["traceEvents"] if e["ph"] == "X"}
want = {(7, "Memcpy HtoD", "gpu_memcpy"), (13, "Memset (Device)", "gpu_memset"),
        (20, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "kernel"),
        (20, "ncclDevKernel_AllGather_RING_LL(ncclDevComm*)", "kernel"),
        (7, "void gemm_kernel<float, 128>(float const*, float*)", "kernel")}
assert want <= dev, sorted(dev)
PY

echo "test_trace: ok"
