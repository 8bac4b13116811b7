"""check_kineto.py DIR MODE: what every `vitbench trace --format kineto`
export must be for HTA to read it (tests/test_trace.sh, tests/test_hta.sh).

MODE cpu: the hand-written 2-rank CPU run of test_trace.sh (pseudo-streams,
launches, its exact values); streams: a timeline whose device rows are on
stream<N> lanes (every device event on its lane's stream). Prints one line
per rank: rank, streams, ProfilerSteps, device events. Exit 1 with the
reason on the first failed check.
"""
import glob
import json
import os
import re
import sys

d, mode = sys.argv[1], sys.argv[2]


def check(cond, msg):
    if not cond:
        print("check_kineto:", msg, file=sys.stderr)
        sys.exit(1)


ranks = {}
for path in sorted(glob.glob(os.path.join(d, "*.json"))):
    # HTA's own way to find a file's rank: the first line that matches this
    rank = None
    with open(path) as f:
        for line in f:
            m = re.search(r'"rank":\s+(\d+)', line)
            if m:
                rank = int(m.group(1))
                break
    doc = json.load(open(path))
    check(rank is not None and rank == doc["distributedInfo"]["rank"], f"{path}: rank by HTA's regex {rank}")
    check(os.path.basename(path) == f"rank{rank}.pt.trace.json", f"{path} holds rank {rank}")
    ranks[rank] = doc
check(ranks, f"no rank files in {d}")

info = {}
for r, doc in sorted(ranks.items()):
    ev = doc["traceEvents"]
    # HTA links a device event without a visible launch to event index 0:
    # that must be metadata, which HTA drops
    check(ev[0]["ph"] == "M", f"rank {r}: first event {ev[0]} is not metadata")
    check(doc["distributedInfo"]["world_size"] >= len(ranks), f"rank {r}: world_size")
    X = [e for e in ev if e["ph"] == "X"]
    check(all(isinstance(e["ts"], int) and isinstance(e["dur"], int) and e["dur"] >= 0 for e in X),
          f"rank {r}: times are not whole non-negative microseconds")
    dev = [e for e in X if "stream" in e.get("args", {})]
    check(dev, f"rank {r}: no device events")
    for e in dev:
        a = e["args"]
        check(e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset"), f"device event category {e}")
        check(e["pid"] == a["device"] and e["tid"] == a["stream"] and a["stream"] > 0, f"device ids {e}")
        if e["cat"] != "kernel":
            check(re.match(r"^(Memcpy|Memset)", e["name"]), f"memory operation name {e['name']}")
        if e["cat"] == "gpu_memset":
            check(e["name"].startswith("Memset"), f"memset name {e['name']}")
    corr = [e["args"]["correlation"] for e in dev]
    check(len(set(corr)) == len(corr) and min(corr) >= 1, f"rank {r}: correlation ids not unique")
    # a stream runs one thing at a time
    by_stream = {}
    for e in dev:
        by_stream.setdefault(e["tid"], []).append(e)
    for s, es in by_stream.items():
        es.sort(key=lambda e: e["ts"])
        for a, b in zip(es, es[1:]):
            check(a["ts"] + a["dur"] <= b["ts"], f"rank {r} stream {s}: {a['name']} overlaps {b['name']}")
    tnames = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    check(all((e["pid"], e["tid"]) in tnames for e in X), f"rank {r}: a thread without a name")
    steps = [e["name"] for e in sorted(X, key=lambda e: e["ts"]) if e["name"].startswith("ProfilerStep#")]
    check(all(e["cat"] == "user_annotation" for e in X if e["name"].startswith("ProfilerStep#")), "step category")
    launches = {e["args"]["correlation"]: e for e in X if e["cat"] == "cuda_runtime"}
    if steps:
        check(set(launches) == set(corr), f"rank {r}: {len(launches)} launches for {len(corr)} device events")
        windows = sorted((x["ts"], x["ts"] + x["dur"]) for x in X if x["name"].startswith("ProfilerStep#"))
        for e in dev:
            la = launches[e["args"]["correlation"]]
            # launched in the microsecond before its kernel: HTA's queue length never goes below 0
            check(la["ts"] + la["dur"] == e["ts"] and la["dur"] == 1 and la["pid"] != e["pid"] and
                  "stream" not in la["args"], f"launch {la} of {e}")
            if any(a <= e["ts"] <= b for a, b in windows):
                check(any(a <= la["ts"] <= b for a, b in windows), f"rank {r}: the launch {la} leaves its step")
        flows = [e for e in ev if e["ph"] in ("s", "f")]
        check(len(flows) == 2 * len(dev), f"rank {r}: {len(flows)} flow ends for {len(dev)} launches")
        # Perfetto keys a v1 flow by id, cat and name, and drops a start that
        # no slice of positive length encloses on its thread (docs/traces.md)
        starts = {e["id"]: e for e in flows if e["ph"] == "s"}
        for f in (e for e in flows if e["ph"] == "f"):
            s = starts.get(f["id"])
            check(s is not None and (s["cat"], s["name"]) == (f["cat"], f["name"]) and f.get("bp") == "e",
                  f"rank {r}: flow {f}")
            check(any(x["pid"] == s["pid"] and x["tid"] == s["tid"] and x["dur"] > 0 and
                      x["ts"] <= s["ts"] <= x["ts"] + x["dur"] for x in X), f"rank {r}: flow start {s} in no slice")
    else:
        check(not launches, f"rank {r}: launches without steps")
    info[r] = (doc, X, dev, steps, tnames)
    print(r, sorted(by_stream), len(steps), len(dev))

if mode == "cpu":
    doc, X, dev, steps, tnames = info[0]
    check(steps == ["ProfilerStep#0", "ProfilerStep#1"], f"rank 0 steps {steps}")
    check(info[1][3] == ["ProfilerStep#0"], f"rank 1 steps {info[1][3]}")

    def at(name):
        return sorted((e["ts"], e["tid"]) for e in dev if e["name"] == name)

    # main-lane ops on stream 1; bucket 1's allreduce overlaps bucket 0's: stream 3
    check(at("ncclKernel_allreduce") == [(231000, 2), (261000, 3), (451000, 2)], f"allreduces {at('ncclKernel_allreduce')}")
    check(at("ncclKernel_ddp_wait") == [(280000, 1)], "blocking communication on the main lane's stream")
    qkv = [e for e in dev if e["name"] == "matmul_forward_qkv"]
    # the first op starts with its step: it moves 1 us later, so that its launch is inside the step
    check(len(qkv) == 2 and qkv[0]["tid"] == 1 and (qkv[0]["ts"], qkv[0]["dur"]) == (100001, 49999), f"qkv {qkv}")
    check(qkv[0]["args"]["flops"] == 1e9 and qkv[0]["args"]["bytes"] == 4096, f"qkv args {qkv[0]['args']}")
    ar = [e for e in dev if e["name"] == "ncclKernel_allreduce"][0]
    check(ar["args"]["vitbench_name"] == "allreduce" and ar["args"]["bucket"] == 0, f"allreduce args {ar['args']}")
    rd = [e for e in X if e["name"] == "read_sample"]
    check(len(rd) == 1 and rd[0]["cat"] == "cpu_op" and rd[0]["dur"] == 123 and "stream" not in rd[0]["args"],
          f"loader read {rd}")
    check(tnames[(1000000, rd[0]["tid"])] == "loader0", "loader thread name")
    check(tnames[(0, 1)].startswith("stream 1") and tnames[(0, 3)].startswith("stream 3"), f"stream names {tnames}")
    inst = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    check(len(inst) == 3 and all(e["tid"] == 0 for e in inst), f"markers {inst}")
    check(any(e["name"] == 'weird "name", x' for e in info[1][2]), "escaped name")
elif mode == "streams":
    for r, v in info.items():
        check(all(e["args"]["vitbench_lane"] == f"stream{e['tid']}" for e in v[2]), f"rank {r}: streams as streams")
else:
    check(False, f"unknown mode {mode}")
