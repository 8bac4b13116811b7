#!/usr/bin/env bash
# test_report.sh <vitbench>: `vitbench report` through the real binary.
#   1. hand-made sweep directories with known throughputs (python3 writes
#      index.csv, sweep.json, runs/*/{run.json,trials.csv,summary.csv,...}):
#      weak scaling with noddp pairs (kind inferred), strong scaling (kind from
#      sweep.json), flags (kind inferred). Efficiency, speedup, overhead and
#      flag ratios/verdicts in the CSV tables are checked against values
#      computed here from the same samples, with repeats (runs) as the unit;
#      every significant flag result is in the summary; bucket sizes that ran
#      the same configuration are grouped and said to be; "best" and its
#      ratio are one statistic; plots are valid PNG and SVG with their
#      titles; report.html inlines the SVG; failed runs are listed only.
#   2. a hand-made run directory: HTA breakdown, stragglers, top ops, and one
#      timed FULL step of each rank drawn as lanes (compute, communication,
#      memcpy, data wait), SVG in report.html and PNG beside it.
#   3. bad input exits 2 with one line; no gnuplot -> one warning, tables only;
#      hostile values (backquotes, $(...), quotes, line breaks, |, HTML, fences)
#      in sweep values, paths, op names and command lines run nothing and stay
#      text; links planted in report/ are replaced, not written through.
#   4. a real tiny weak-scaling sweep (1 and 2 ranks, 2 repeats) and its report.
set -u

VB=${1:?usage: test_report.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export VB_SOURCE_DIR=$SRC
QUICK=$SRC/scenarios/benchy/quick.yaml

fail() { echo "test_report: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
command -v python3 >/dev/null || fail "python3 is needed to write the fixtures"

TMP=$(mktemp -d /tmp/vb_report.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

# ---- 1. fixtures ----
cat >make_fixtures.py <<'EOF'
import os, sys
sys.path.insert(0, os.path.join(os.environ["VB_SOURCE_DIR"], "tests", "lib"))
from report_fixtures import write_csv, fingerprint, make_run, HEAD, TAIL, sweep

FLAGS = {"baseline": [100, 101, 99, 100.5, 99.5, 100.2],
         "num_data_workers=1": [120, 121, 119, 120.5, 119.5, 120.2],
         "num_data_workers=2": [100.1, 99.2, 101.1, 99.8, 100.4, 100.0],
         "disable_broadcast_buffers=true": [80, 81, 79, 80.5, 79.5, 80.2],
         "num_data_workers=3": [102, 102.5, 101.5, 102.2, 101.8, 102.1],
         "num_data_workers=4": [97, 98, 96, 97.5, 96.5, 97.2]}
FLAG_DRIFT = {v: (1, 1.01, 0.99) for v in FLAGS}
FLAG_DRIFT["num_data_workers=4"] = (1, 1.15, 0.85)

def main():
    # weak scaling, local batch 4, ddp and noddp; throughput of a point = its repeats' samples pooled
    W = {  # (ranks, noddp) -> [repeat0 samples, repeat1 samples]: the repeats' means differ
        (1, False): [[100, 102, 98], [103, 101, 102]],
        (1, True): [[110, 111, 109], [112, 114, 110]],
        (2, False): [[180, 184, 176], [185, 181, 183]],
        (2, True): [[210, 214, 206], [211, 215, 213]],
        (4, False): [[320, 330, 310], [330, 320, 325]],
        (4, True): [[400, 410, 390], [408, 398, 403]],
    }
    runs = []
    for (r, nd), reps in W.items():
        for rep, full in enumerate(reps):
            runs.append(("completed", rep, r, {"noddp": "true" if nd else "false"},
                         dict(local=4, glob=4 * r, noddp=nd, full=full)))
    runs.append(("failed", 2, 4, {"noddp": "false"}, None))                      # listed, not plotted
    runs.append(("completed", 2, 2, {"noddp": "true"}, dict(local=4, glob=8, noddp=True, full=[1.0])))
    sweep("weak", "weak_scaling", ["noddp"], runs)
    os.remove("weak/" + "runs/%03d_ranks=2_noddp=true_r2/trials.csv" % (len(runs) - 1))  # a missing file

    # strong scaling, global batch 16, the 4-rank run on another CPU
    S = {1: [100, 101, 99], 2: [180, 181, 179], 4: [300, 303, 297]}
    sweep("strong", "strong_scaling", [],
          [("completed", 0, r, {}, dict(local=16 // r, glob=16, noddp=False, full=f,
                                         cpu="Test CPU 9000" if r < 4 else "Other CPU")) for r, f in S.items()],
          kind="strong_scaling")

    # flags, three repeats each (runs 1% apart): baseline, one clearly faster,
    # one equal, one slower, one 2% above (inside the 5% threshold), one whose
    # repeats scatter +-15%
    sweep("flags", "optimization_flags", ["variant", "num_data_workers", "disable_broadcast_buffers"],
          [("completed", rep, 1, {"variant": v, "num_data_workers": v[-1] if "workers" in v else "0",
                                  "disable_broadcast_buffers": "true" if "broadcast" in v else "false"},
            dict(local=4, glob=4, noddp=False, full=[x * FLAG_DRIFT[v][rep] for x in f]))
           for v, f in FLAGS.items() for rep in range(3)])

    # DDP buckets at 2 ranks, two repeats each: 5 MB (2 buckets) best and clearly above the 25 MB default
    # (1 bucket); 100 MB gave 1 bucket too: the default's configuration, whatever its noise says;
    # exposed comm per step known
    B = {"baseline": (25, False, [100, 101, 99, 100.5, 99.5, 100.2], 0.010, 1),
         "bucket_cap_mb=1": (1, False, [90, 91, 89, 90.5, 89.5, 90.2], 0.030, 3),
         "bucket_cap_mb=5": (5, False, [110, 111, 109, 110.5, 109.5, 110.2], 0.004, 2),
         "bucket_cap_mb=100": (100, False, [101, 102, 100, 101.5, 100.5, 101.2], 0.010, 1),
         "noddp=true": (25, True, [120, 121, 119, 120.5, 119.5, 120.2], 0.0, 0)}
    sweep("buckets", "ddp_buckets", ["variant", "noddp", "bucket_cap_mb"],
          [("completed", rep, 2, {"variant": v, "noddp": "true" if nd else "false", "bucket_cap_mb": b},
            dict(local=4, glob=8, noddp=nd, full=[x * (1, 1.01)[rep] for x in f], bucket=b, exposed=e, buckets=k))
           for v, (b, nd, f, e, k) in B.items() for rep in range(2)])

    # layouts of 4 ranks: tp comm only in tp > 1, cp comm only in cp > 1
    L = [(1, 1, "tp-cp-dp", [100, 101, 99]), (2, 1, "tp-cp-dp", [120, 121, 119]), (1, 2, "cp-tp-dp", [90, 91, 89])]
    sweep("layouts", "tp_cp_layouts", ["tensor_parallel", "context_parallel", "parallel_order"],
          [("completed", rep, 4, {"tensor_parallel": tp, "context_parallel": cp, "parallel_order": o},
            dict(local=4, glob=16, noddp=False, full=[x * (1, 1.01, 0.99)[rep] for x in f], tp=tp, cp=cp))
           for tp, cp, o, f in L for rep in range(3)])

if __name__ == "__main__":
    main()
EOF
python3 make_fixtures.py || fail "fixture generator failed"

run_report() { # dir [flags...]: report must exit 0
    local out
    out=$("$VB" report "$@" 2>&1) || fail "report $* exited $?: $out"
    echo "$out"
}

# ---- checks of the tables against values computed from the same samples ----
cat >check.py <<'EOF'
import csv, math, sys, xml.etree.ElementTree as ET

def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))

def near(a, b, what, tol=1e-4):
    if not math.isclose(float(a), b, rel_tol=tol, abs_tol=1e-9):
        sys.exit("%s: report says %s, expected %.6g" % (what, a, b))

def mean(x):
    return sum(x) / len(x)

def median(x):
    s = sorted(x); n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2

def log_centre(runs):
    """the verdict rule's centre of a side: the mean over runs of log(median of the run)"""
    return sum(math.log(median(r)) for r in runs) / len(runs)

def delta_ci(num, den):
    """ratio of means, delta-method 95% CI with Welch-Satterthwaite df (t quantile from scipy if present);
    num and den are the samples of each side's unit (its runs' means when it has two or more)"""
    try:
        from scipy.stats import t as tdist
    except ImportError:
        return None
    mx, my = mean(num), mean(den)
    var = lambda v, m: sum((x - m) ** 2 for x in v) / (len(v) - 1)
    ax = var(num, mx) / len(num) / mx ** 2
    ay = var(den, my) / len(den) / my ** 2
    r = mx / my
    df = (ax + ay) ** 2 / (ax ** 2 / (len(num) - 1) + ay ** 2 / (len(den) - 1))
    h = tdist.ppf(0.975, max(1, math.floor(df))) * r * math.sqrt(ax + ay)
    return r - h, r + h

def svg_ok(path, title):
    root = ET.parse(path).getroot()
    if not root.tag.endswith("svg"):
        sys.exit("%s: root element %s, not svg" % (path, root.tag))
    text = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    if title not in text:
        sys.exit("%s: no title %r in its text: %s" % (path, title, text[:300]))

def png_ok(path):
    with open(path, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            sys.exit("%s: not a PNG" % path)

which = sys.argv[1]
if which == "weak":
    WR = {(1, False): [[100, 102, 98], [103, 101, 102]], (1, True): [[110, 111, 109], [112, 114, 110]],
          (2, False): [[180, 184, 176], [185, 181, 183]], (2, True): [[210, 214, 206], [211, 215, 213]],
          (4, False): [[320, 330, 310], [330, 320, 325]], (4, True): [[400, 410, 390], [408, 398, 403]]}
    W = {k: v[0] + v[1] for k, v in WR.items()}
    U = {k: [mean(r) for r in v] for k, v in WR.items()}  # the unit: each repeat's mean
    t = rows("weak/report/scaling.csv")
    if len(t) != 6:
        sys.exit("scaling.csv: %d rows, want 6 (failed run and the run without trials.csv add none)" % len(t))
    for r in t:
        n, nd = int(float(r["ranks"])), r["series"] == "noddp=true"
        s, s1 = W[(n, nd)], W[(1, nd)]
        near(r["thr_mean"], mean(s), "thr_mean %s" % r)
        near(r["samples"], len(s), "samples %s" % r)
        near(r["ideal_thr"], n * mean(s1), "ideal %s" % r)
        near(r["efficiency"], mean(s) / (n * mean(s1)), "efficiency %s" % r)
        if n > 1 and not 0 < float(r["eff_ci_lo"]) < float(r["efficiency"]) < float(r["eff_ci_hi"]):
            sys.exit("efficiency outside its interval, or the interval at or below 0: %s" % r)
        ci = delta_ci(U[(n, nd)], U[(1, nd)])
        if ci and n > 1:
            near(r["eff_ci_lo"], ci[0] / n, "eff_ci_lo %s" % r)
            near(r["eff_ci_hi"], ci[1] / n, "eff_ci_hi %s" % r)
    o = rows("weak/report/comm_overhead.csv")
    if len(o) != 3:
        sys.exit("comm_overhead.csv: %d rows, want 3" % len(o))
    for r in o:
        n = int(float(r["ranks"]))
        near(r["overhead"], 1 - mean(W[(n, False)]) / mean(W[(n, True)]), "overhead %s" % r)
        ci = delta_ci(U[(n, False)], U[(n, True)])
        if ci:
            near(r["overhead_ci_lo"], 1 - ci[1], "overhead_ci_lo %s" % r)
            near(r["overhead_ci_hi"], 1 - ci[0], "overhead_ci_hi %s" % r)
        lo, hi = float(r["overhead_ci_lo"]), float(r["overhead_ci_hi"])
        if n == 1 and (lo > 0 or hi < 0) and "dp = 1 has no communication" not in r["notes"]:
            sys.exit("1-rank overhead CI excludes 0 but is not flagged: %s" % r)
    # the figure leaves out dp = 1, where there is no communication to show
    xs = [float(l.split()[0]) for l in open("weak/report/comm_overhead.dat") if l.strip() and not l.startswith("#")]
    if 1.0 in xs or sorted(xs) != [2.0, 4.0]:
        sys.exit("comm_overhead figure points at ranks %s, want 2 and 4 (no 1-rank point)" % xs)
    f = rows("weak/report/failed_runs.csv")
    if len(f) != 1 or f[0]["status"] != "failed":
        sys.exit("failed_runs.csv: %s" % f)
    # efficiency is a panel under throughput (one image, log-log above)
    for name, title in (("throughput", "Weak scaling: throughput"), ("throughput", "Weak scaling: efficiency"),
                        ("comm_overhead", "Communication overhead")):
        png_ok("weak/report/%s.png" % name)
        svg_ok("weak/report/%s.svg" % name, title)
elif which == "strong":
    S = {1: [100, 101, 99], 2: [180, 181, 179], 4: [300, 303, 297]}
    t = rows("strong_out/scaling.csv")
    if len(t) != 3:
        sys.exit("strong scaling.csv: %d rows" % len(t))
    for r in t:
        n = int(float(r["ranks"]))
        near(r["speedup"], mean(S[n]) / mean(S[1]), "speedup %s" % r)
        near(r["efficiency"], mean(S[n]) / mean(S[1]) / n, "efficiency %s" % r)
        if (n == 4) != ("fingerprint differs" in r["notes"]):
            sys.exit("fingerprint note wrong (only the 4-rank run ran on another CPU): %s" % r)
    for name, title in (("speedup", "Strong scaling: speedup"), ("throughput", "Strong scaling: efficiency")):
        png_ok("strong_out/%s.png" % name)
        svg_ok("strong_out/%s.svg" % name, title)
elif which == "flags":
    sys.path.insert(0, ".")
    from make_fixtures import FLAGS, FLAG_DRIFT
    runs = {v: [[x * d for x in f] for d in FLAG_DRIFT[v]] for v, f in FLAGS.items()}
    # one rule for report and compare, runs as the unit: 2% above on every
    # sample is equivalent (inside +-5%), not faster; repeats scattered +-15%
    # are inconclusive
    want = {"baseline": "baseline", "num_data_workers=1": "faster", "num_data_workers=2": "equivalent",
            "disable_broadcast_buffers=true": "slower", "num_data_workers=3": "equivalent",
            "num_data_workers=4": "inconclusive"}
    t = {r["variant"]: r for r in rows("flags/report/flags.csv")}
    if set(t) != set(FLAGS):
        sys.exit("flags.csv variants: %s" % list(t))
    for v, r in t.items():
        near(r["ratio"], math.exp(log_centre(runs[v]) - log_centre(runs["baseline"])), "ratio %s" % v)
        if not r["verdict"].startswith(want[v]):
            sys.exit("verdict of %s: %s, want %s" % (v, r["verdict"], want[v]))
        if v != "baseline" and not 0 < float(r["ratio_ci_lo"]) <= float(r["ratio"]) <= float(r["ratio_ci_hi"]):
            sys.exit("ratio outside its CI: %s" % r)
        if want[v] in ("faster", "slower") and not float(r["p_value"]) < 0.05:
            sys.exit("a faster / slower verdict without p < 0.05: %s" % r)
        lo, hi = float(r["ratio_ci_lo"]), float(r["ratio_ci_hi"])
        if want[v] == "equivalent" and not (0.95 <= lo and hi <= 1.05):
            sys.exit("equivalent with an interval beyond +-5%%: %s" % r)
    md = open("flags/report/report.md").read()
    if "the whole interval lies beyond the threshold" not in md:
        sys.exit("flags report does not state the verdict rule")
    png_ok("flags/report/flags_ratio.png")
    svg_ok("flags/report/flags_ratio.svg", "Flags: throughput ratio to the baseline")
    # each point in its verdict's series and colour, a legend entry per verdict, on a log axis,
    # the baseline first and the variants by name
    title_colours = {"faster": 0x009E73, "slower": 0xD55E00, "equivalent": 0x0072B2, "inconclusive": 0x999999,
                     "baseline": 0}
    svg_ok("flags/report/flags_ratio.svg", "Flags: throughput ratio to the baseline (95% CI, log scale)")
    gp = open("flags/report/flags_ratio.gp").read()
    if "set logscale y" not in gp:
        sys.exit("flags_ratio: the ratio axis is not logarithmic")
    for name in ("faster", "slower", "equivalent", "baseline"):
        if "title '%s'" % name not in gp:
            sys.exit("flags_ratio: no legend entry %s" % name)
    series, xs = None, {}
    for line in open("flags/report/flags_ratio.dat"):
        if line.startswith("# series"):
            series = line.split(": ", 1)[1].strip()
            continue
        if line.startswith("#") or not line.strip() or line.startswith(" NaN"):
            continue
        label, rgb = line.split('"')[1], int(line.split('"')[2])
        xs[label] = float(line.split()[0])
        if rgb != title_colours[want[label]] or series != want[label]:
            sys.exit("%s drawn in #%06X in series %s, not its verdict's" % (label, rgb, series))
    if sorted(xs, key=xs.get) != ["baseline"] + sorted(v for v in xs if v != "baseline"):
        sys.exit("flags_ratio order: %s" % sorted(xs, key=xs.get))
    # the numbers the ratio is made of, and no column pointing the other way
    for v, r in t.items():
        meds = [float(x) for x in r["run_medians"].split()]
        if sorted(meds) != sorted(float("%.4g" % median(x)) for x in runs[v]):
            sys.exit("run_medians of %s: %s, want the medians of %s" % (v, meds, runs[v]))
        near(r["centre"], math.exp(log_centre(runs[v])), "centre %s" % v)
        near(r["ratio"], float(r["centre"]) / float(t["baseline"]["centre"]), "ratio = centre / baseline's %s" % v)
    if "thr_mean" in t["baseline"]:
        sys.exit("flags.csv still has thr_mean, which can point the other way from the ratio")
    if "set key outside below" not in open("flags/report/flags_ratio.gp").read():
        sys.exit("the flags legend is inside the plot area, over the data")
elif which == "buckets":
    t = {r["variant"]: r for r in rows("buckets/report/buckets.csv")}
    nod = [120, 121, 119, 120.5, 119.5, 120.2]
    for v, base, ex in (("baseline", [100, 101, 99, 100.5, 99.5, 100.2], 10.0), ("bucket_cap_mb=5",
                        [110, 111, 109, 110.5, 109.5, 110.2], 4.0)):
        near(t[v]["vs_noddp"], mean(base) / mean(nod), "vs_noddp %s" % v)
        near(t[v]["exposed_comm_ms"], ex, "exposed comm ms per step %s" % v)
    near(t["bucket_cap_mb=1"]["bucket_cap_mb"], 1, "bucket size column")
    near(t["bucket_cap_mb=5"]["buckets_per_step"], 2, "buckets per step")
    md = open("buckets/report/report.md").read()
    summary = md.split("## Contents")[0]
    # best by the same statistic its ratio is given in
    if "Highest ratio to the default: bucket_cap_mb=5 (5 MB), %.4g x" % float(t["bucket_cap_mb=5"]["vs_default"]) not in md \
            or t["bucket_cap_mb=5"]["vs_default_verdict"] != "faster":
        sys.exit("best bucket, its ratio or its verdict missing or wrong: %s" % t["bucket_cap_mb=5"])
    if "DDP bucket size with the highest ratio to the default 25 MB: 5 MB" not in summary:
        sys.exit("the summary does not name the best bucket size: %s" % summary)
    # 25 and 100 MB both gave 1 bucket: the same run, said so
    if "DDP bucket sizes 25, 100 MB ran the same configuration (1 bucket a step, 466 KB of gradients)" not in summary:
        sys.exit("bucket sizes of one configuration not grouped: %s" % summary)
    png_ok("buckets/report/buckets_throughput.png")
    gp = open("buckets/report/buckets_throughput.gp").read()
    if "yerrorlines" in gp or "linespoints" in gp:
        sys.exit("bucket sizes (categories) joined by lines")
    svg_ok("buckets/report/buckets_exposed_comm.svg", "DDP buckets: exposed communication per step")
elif which == "layouts":
    t = {(r["tp"], r["cp"]): r for r in rows("layouts/report/layouts.csv")}
    near(t[("2", "1")]["tp_mb_per_step"], 1.0, "tp MB per step")
    near(t[("2", "1")]["tp_exposed_pct"], 10.0, "tp exposed share")
    near(t[("2", "1")]["cp_mb_per_step"], 0.0, "no cp traffic at cp 1")
    near(t[("1", "2")]["cp_mb_per_step"], 1.0, "cp MB per step")
    near(t[("1", "2")]["dp_mb_per_step"], 2.0, "dp MB per step")
    near(t[("2", "1")]["dp"], 2, "dp = ranks / (tp cp)")
    near(t[("2", "1")]["peak_mem_mib_per_rank"], 32, "peak memory MiB")
    md = open("layouts/report/report.md").read()
    if "Best layout: tensor_parallel=2 context_parallel=1 parallel_order=tp-cp-dp" not in md:
        sys.exit("best layout not named")
    if "faster" not in md.split("Best layout: tensor_parallel=2", 1)[1].split("\n")[0]:
        sys.exit("best layout without its verdict")
    svg_ok("layouts/report/layouts_throughput.svg", "Layouts: throughput")
elif which == "run":
    b = rows("run1/report/breakdown.csv")
    r0 = b[0]
    for k, v in (("step_ms", 1000), ("compute_ms", 600), ("comm_hidden_ms", 100), ("comm_exposed_ms", 200),
                 ("data_wait_ms", 100), ("idle_ms", 100), ("overlap_pct", 100 / 3)):
        near(r0[k], v, "breakdown %s" % k, 1e-3)
    s = {r["rank"]: r for r in rows("run1/report/stragglers.csv")}
    near(s["1"]["median_ms"], 210, "rank 1 median step")
    near(s["0"]["p90_ms"], 118, "rank 0 p90 step")
    near(s["1"]["max_ms"], 220, "rank 1 max step")
    ops = rows("run1/report/top_ops.csv")
    if [o["name"] for o in ops[:2]] != ["matmul_forward_fc1", "allreduce_wait"]:
        sys.exit("top ops order: %s" % [o["name"] for o in ops])
    near(ops[0]["gflop_per_s"], 2e9 / 0.5 / 1e9, "gflop/s from flops / total_s")
elif which == "html":
    html = open(sys.argv[2]).read()
    if "<svg" not in html or "<?xml" in html:
        sys.exit("%s: no inline <svg, or an XML prolog inside the HTML" % sys.argv[2])
    import re
    ids = re.findall(r"""\bid=['"]([^'"]+)['"]""", html)
    if len(ids) != len(set(ids)):
        sys.exit("%s: duplicate ids across the inlined figures" % sys.argv[2])
EOF

out=$(run_report weak)
grep -q "efficiency" <<<"$out" || fail "weak report printed no main table: $out"
# the report starts with its answers: the summary is the first section, with
# the efficiency at the largest size, the overhead and the warnings, each
# number with its interval; then the contents
python3 - weak/report/report.md weak/report/report.html <<'EOF' || fail "weak report does not start with its summary"
import re, sys
md, html = open(sys.argv[1]).read(), open(sys.argv[2]).read()
heads = re.findall(r"^## (.*)$", md, re.M)
if heads[:2] != ["Summary", "Contents"]:
    sys.exit("first sections: %s" % heads[:3])
summary = md.split("## Summary", 1)[1].split("## Contents", 1)[0]
for want in ("Weak scaling efficiency at 4 ranks, noddp=false: 0.798 [95% CI 0.68, 0.937]",
             "Communication overhead (1 - DDP / no-DDP throughput) at 4 ranks: 19.7% [95% CI 10.4%, 28%]",
             "What bounds FULL at ranks=4 noddp=false", "**Warning:** 1 of 14 runs did not complete"):
    if want not in summary:
        sys.exit("summary lacks %r: %s" % (want, summary))
if re.findall(r"<h2[^>]*>([^<]*)</h2>", html)[:2] != ["Summary", "Contents"]:
    sys.exit("report.html does not open with Summary and Contents")
EOF
python3 check.py weak || fail "weak scaling tables"
python3 check.py html weak/report/report.html || fail "weak report.html"
grep -q "kind weak_scaling (inferred" weak/report/report.md || fail "weak kind not inferred: $(head -20 weak/report/report.md)"
grep -q "trials.csv: missing" weak/report/report.md || fail "the run without trials.csv is not reported"
grep -q "delta-method" weak/report/report.md || fail "report does not say how ratio CIs are made"
grep -q "Test CPU 9000" weak/report/report.md || fail "report states no fingerprint"
[ -f weak/report/throughput.gp ] && [ -f weak/report/throughput.dat ] || fail "gnuplot script / data not kept"

run_report strong --output_dir "$TMP/strong_out" >/dev/null
[ ! -e strong/report ] || fail "--output_dir ignored: strong/report was written"
python3 check.py strong || fail "strong scaling tables"
grep -q "kind strong_scaling (from sweep.json)" strong_out/report.md || fail "strong kind not taken from sweep.json"
grep -q "WARNING: fingerprints differ" strong_out/report.md || fail "differing fingerprints not flagged"

run_report flags >/dev/null
python3 check.py flags || fail "flags tables"
# every faster or slower setting is in the summary, each with its own ratio
grep -q "^- num_data_workers=1 is faster than the baseline: throughput ratio 1.2 \[95% CI" flags/report/report.md ||
    fail "flags summary lacks the faster setting"
grep -q "^- disable_broadcast_buffers=true is slower than the baseline: throughput ratio 0.8 \[95% CI" flags/report/report.md ||
    fail "flags summary lacks the slower setting"
[ "$(sed -n '/^## Summary/,/^## Contents/p' flags/report/report.md | grep -c ' is faster than\| is slower than')" = 2 ] ||
    fail "flags summary: not exactly the two significant results"
grep -q "kind flags (inferred" flags/report/report.md || fail "flags kind not inferred"

run_report buckets >/dev/null
python3 check.py buckets || fail "ddp bucket tables"
grep -q "kind ddp_buckets (inferred" buckets/report/report.md || fail "ddp_buckets kind not inferred"
run_report layouts >/dev/null
python3 check.py layouts || fail "layout tables"

# points are flagged where their numbers need care: an oversubscribed run, a
# busy one (trials spread > 1.5x), an interval wider than +-10%
python3 - <<'EOF' || fail "notes fixture"
import json, sys
sys.path.insert(0, ".")
from make_fixtures import sweep
sweep("notes", "weak_scaling", ["noddp"],
      [("completed", 0, 1, {"noddp": "false"}, dict(local=4, glob=4, noddp=False, full=[100, 101, 99])),
       ("completed", 0, 2, {"noddp": "false"}, dict(local=4, glob=8, noddp=False, full=[180, 60, 190]))],
      kind="weak_scaling")
j = json.load(open("notes/runs/000_ranks=1_noddp=false_r0/run.json"))
j["threads"] = {"requested": 4, "per_rank": 4, "node_ranks": 1, "oversubscribed": True}
j["fingerprint"]["omp_threads"], j["fingerprint"]["affinity_cores"] = 2, 2  # 2 threads at 1 rank, 1 at 2
j["fingerprint"]["cpu_vector"] = "avx512"  # Haswell's AVX2 kernels on an AVX-512 CPU,
j["fingerprint"]["blas_rule"] = "environment"  # set by OPENBLAS_CORETYPE before the run
json.dump(j, open("notes/runs/000_ranks=1_noddp=false_r0/run.json", "w"))
EOF
run_report notes >/dev/null
python3 - <<'EOF' || fail "point notes and warnings"
import csv, sys
rows = {r["ranks"]: r for r in csv.DictReader(open("notes/report/scaling.csv"))}
if "oversubscribed" not in rows["1"]["notes"]:
    sys.exit("oversubscribed point not noted: %s" % rows["1"])
for want in ("busy run", "wide CI"):
    if want not in rows["2"]["notes"]:
        sys.exit("%s not noted: %s" % (want, rows["2"]))
md = open("notes/report/report.md").read().split("## Contents")[0]
for want in ("**Warning:** 1 run was oversubscribed", "**Warning:** 1 run's trials spread more than 1.5x",
             "**Warning:** 1 point has a 95% interval wider than +-10%",
             "**Warning:** BLAS runs below the CPU's vector width (",
             "OPENBLAS_CORETYPE=Haswell was set before vitbench started: OpenBLAS's Haswell kernels (avx2) on a CPU "
             "with avx512", "unset it and vitbench picks SkylakeX"):
    if want not in md:
        sys.exit("summary lacks %r" % want)
# the caption says what each run had, not what the first one had
full = open("notes/report/report.md").read()
if "1 rank: 2 threads on 2 cores, 2 ranks: 1 thread on 1 core a rank" not in full:
    sys.exit("figure caption does not give each rank count's threads: %s" % [l for l in full.split("\n") if "Config" in l][:2])
EOF

# ---- 2. a run directory with timeline, iterations and ops ----
python3 - <<'EOF' || fail "run fixture"
import csv, sys
sys.path.insert(0, ".")
from make_fixtures import make_run
make_run("run1", 2, 4, 8, False, [100, 101, 99])
def w(name, header, rows):
    with open("run1/" + name, "w", newline="") as f:
        c = csv.writer(f); c.writerow(header); c.writerows(rows)
# one 1 s step: compute 0-0.6, comm (comm lane) 0.5-0.8, data wait 0.8-0.9, idle 0.9-1.0
w("timeline.csv", ["rank", "lane", "kind", "name", "trial_type", "trial_index", "step", "start_s", "dur_s", "bytes",
                   "flops", "bucket"],
  [[0, "main", "step", "step", "FULL", 0, 0, 0.0, 1.0, 0, 0, -1],
   [0, "main", "compute", "matmul_forward_fc1", "FULL", 0, 0, 0.0, 0.6, 0, 0, -1],
   [0, "main", "io", "data", "FULL", 0, 0, 0.8, 0.1, 0, 0, -1],
   [0, "comm", "comm", "allreduce", "FULL", 0, 0, 0.5, 0.3, 1000, 0, 0]])
w("iterations.csv", ["trial", "trial_type", "trial_index", "warmup", "step", "rank", "seconds", "data_wait_s",
                     "allreduce_calls", "allreduce_bytes", "comm_exposed_s"],
  [["FULL_0", "FULL", 0, 0, s, r, [[0.10, 0.11, 0.12], [0.20, 0.21, 0.22]][r][s], 0, 1, 100, 0.01]
   for s in range(3) for r in range(2)] + [["FULL_W", "FULL", 0, 1, 0, 0, 9.0, 0, 0, 0, 0]])
w("ops.csv", ["rank", "trial_type", "name", "category", "calls", "bytes", "flops", "total_s", "avg_s", "min_s",
              "max_s", "median_s", "share_of_step"],
  [[0, "FULL", "matmul_forward_fc1", "compute", 10, 0, 2e9, 0.5, 0.05, 0.04, 0.06, 0.05, 0.4],
   [0, "FULL", "allreduce_wait", "comm", 10, 0, 0, 0.2, 0.02, 0.01, 0.03, 0.02, 0.16],
   [0, "SYNTHETIC", "matmul_forward_fc1", "compute", 10, 0, 2e9, 9.0, 0.9, 0.9, 0.9, 0.9, 0.9],
   [1, "FULL", "layernorm_forward", "compute", 10, 0, 0, 5.0, 0.5, 0.5, 0.5, 0.5, 0.9]])
open("run1/trace.json", "w").write("{}")
EOF
out=$(run_report run1)
grep -q "FULL" <<<"$out" || fail "run report printed no throughput table: $out"
python3 check.py run || fail "run tables"
grep -q "Slowest rank: 1" run1/report/report.md || fail "straggler not named: $(grep -i slowest run1/report/report.md)"
# the step as lanes: compute 0-600 ms, communication 500-800, data wait 800-900, each bar on its rank's lane
python3 - <<'EOF' || fail "step timeline figure"
import re
bars = {}
for block in open("run1/report/step_timeline_run1.dat").read().split("\n\n\n"):
    m = re.search(r"# series \d+: (.*)", block)
    pts = [l.split()[:3] for l in block.splitlines() if l.strip() and not l.startswith("#") and not l.startswith(" NaN")]
    bars[m.group(1)] = [tuple(float(v) for v in p) for p in pts]
want = {"compute": [(0, 0, 600)], "communication": [(500, 1, 800)], "memcpy": [], "data wait": [(800, 3, 900)]}
if bars != want:
    raise SystemExit("bars %s, want %s" % (bars, want))
gp = open("run1/report/step_timeline_run1.gp").read()
if "'rank 0 compute' 0" not in gp or "boxxyerror" not in gp:
    raise SystemExit("lanes not named or not drawn as bars: %s" % gp)
html = open("run1/report/report.html").read()
if "One FULL step per rank" not in html:
    raise SystemExit("the step figure is not in report.html")
# the recorded step is named beside the median of every timed FULL step of rank 0 (iterations.csv)
if "trial 0, step 0, 1000 ms (rank 0''s median of 3 timed steps: 110 ms)" not in gp:  # gnuplot's '' is '
    raise SystemExit("the step's title does not name it beside the median: %s" % gp.split("set title")[1][:200])
# each kind of bar in its own colour, the same in every report
for kind, rgb in (("compute", "CC79A7"), ("communication", "E69F00"), ("data wait", "000000")):
    if not re.search(r"lc rgb '#%s' title '%s'" % (rgb, kind), gp):
        raise SystemExit("%s is not drawn in #%s" % (kind, rgb))
EOF
[ -s run1/report/step_timeline_run1.png ] || fail "no PNG of the step timeline"
grep -q '](<./../trace.json>)' run1/report/report.md || fail "trace.json not linked relatively"
python3 check.py html run1/report/report.html || fail "run report.html"

# ---- 3. bad input ----
expect_exit2() { # what args...
    local what=$1 out rc
    shift
    out=$("$VB" report "$@" 2>&1)
    rc=$?
    [ $rc -eq 2 ] || fail "$what: exit $rc, want 2: $out"
    [ "$(wc -l <<<"$out")" = 1 ] || fail "$what: more than one line: $out"
    echo "$out"
}
out=$(expect_exit2 "missing PATH" "$TMP/nope") && grep -q "$TMP/nope" <<<"$out" || fail "missing PATH not named: $out"
mkdir -p empty
out=$(expect_exit2 "neither run nor sweep" empty) && grep -q "neither a run directory" <<<"$out" || fail "$out"
out=$(expect_exit2 "unknown flag" weak --bogus) && grep -q -- "--bogus" <<<"$out" || fail "flag not named: $out"
expect_exit2 "no PATH" >/dev/null
mkdir -p badcsv && printf 'run_index,run_dir,status\n0,"runs/x,completed\n' >badcsv/index.csv
out=$(expect_exit2 "malformed index.csv" badcsv) && grep -q "index.csv" <<<"$out" || fail "bad CSV not named: $out"

# no gnuplot on PATH: one warning, tables only
out=$(PATH=/nonexistent "$VB" report flags --output_dir "$TMP/noplot" 2>&1) || fail "report without gnuplot exited $?: $out"
[ "$(grep -c 'gnuplot not found' <<<"$out")" = 1 ] || fail "want one gnuplot warning: $out"
[ -f noplot/flags.csv ] && [ -f noplot/report.html ] || fail "tables not written without gnuplot"
ls noplot/*.png >/dev/null 2>&1 && fail "figures written without gnuplot"
run_report flags --no_plots --output_dir "$TMP/noplot2" >/dev/null
ls noplot2/*.svg >/dev/null 2>&1 && fail "--no_plots wrote figures"

# ---- 3b. hostile values: nothing in a results tree is ever run, every value
# stays text in Markdown, planted links are replaced, not followed ----
python3 - <<'PY' || fail "hostile fixture"
import csv, json, os, sys
sys.path.insert(0, ".")
from make_fixtures import sweep, make_run
H = ["b`touch canary1`", "$(touch canary2)", "q\"uo'te", "new\nline", "pipe|<img src=x onerror=alert(1)>",
     "@x `touch canary3` [click](javascript:alert(1))"]
runs = []
for i, v in enumerate(H):
    for r in (1, 2):
        runs.append(("completed", 0, r, {"mode": v}, dict(local=4, glob=4 * r, noddp=False, full=[100.0 * r + i, 101.0 * r + i])))
sweep("sw`touch canary0`", "weak_scaling", ["mode"], runs, kind="weak_scaling")
make_run("hrun", 1, 4, 4, False, [100, 101, 99])
j = json.load(open("hrun/run.json"))
j["command_line"] = "vitbench run --run_name 'x\n```\n<img src=x onerror=alert(1)>\n````` `touch canary4`'"
json.dump(j, open("hrun/run.json", "w"))
with open("hrun/ops.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["rank", "trial_type", "name", "category", "calls", "bytes", "flops", "total_s", "avg_s", "min_s",
                "max_s", "median_s", "share_of_step"])
    w.writerow([0, "FULL", "op|<img src=x onerror=alert(2)>\n# heading", "compute", 10, 0, 0, 0.5, 0.05, 0.05, 0.05, 0.05, 0.5])
PY
HS='sw`touch canary0`'
run_report "$HS" >/dev/null
run_report hrun >/dev/null
# the saved scripts are rerun by whoever redraws a figure: they must be as inert
for gp in "$HS"/report/*.gp hrun/report/*.gp; do
    (cd "$(dirname "$gp")" && gnuplot "$(basename "$gp")" >/dev/null 2>&1) || fail "saved $gp does not rerun"
done
[ -z "$(find "$TMP" -name 'canary*')" ] || fail "a value from the results tree ran as a command: $(find "$TMP" -name 'canary*')"
grep -l '"[^"]*`' "$HS"/report/*.gp && fail "a backquote inside a double-quoted gnuplot string"
python3 - "$HS/report/report.md" hrun/report/report.md "$HS/report/report.html" hrun/report/report.html <<'PY' || fail "hostile values in the report documents"
import re, sys
cmd = "vitbench run --run_name 'x\n```\n<img src=x onerror=alert(1)>\n````` `touch canary4`'"
for path in sys.argv[1:]:
    text = open(path).read()
    if path.endswith(".html"):
        if re.search(r"<img|<script", text, re.I):
            sys.exit("%s: raw HTML from a value" % path)
        continue
    lines, outside = text.split("\n"), []
    i, header = 0, None
    while i < len(lines):
        l = lines[i]
        m = re.fullmatch(r"(`{3,})", l)
        if m:  # a fence holds exactly the text put in it, up to its own closing line
            j = lines.index(m.group(1), i + 1)
            body = "\n".join(lines[i + 1:j])
            if "run_name" in body and body != cmd:
                sys.exit("%s: the code fence was closed early: %r" % (path, body))
            i = j + 1
            continue
        outside.append(l)
        if l.startswith("|"):  # every row of a table has the header's cells
            n = len(re.findall(r"(?<!\\)\|", l))
            if header is None:
                header = n
            elif n != header:
                sys.exit("%s: row with %d cells, header %d: %s" % (path, n, header, l))
        else:
            header = None
        i += 1
    rendered = "\n".join(outside)  # Markdown renders HTML and links outside code blocks
    if re.search(r"<img|<script", rendered, re.I):
        sys.exit("%s: raw HTML from a value" % path)
    if re.search(r"(?<!\\)\]\(javascript", rendered):
        sys.exit("%s: a value became a link" % path)
    if "\n# heading" in rendered:
        sys.exit("%s: a line break in a value started a heading" % path)
PY
# links planted where the report writes its figures are replaced, never followed
for f in throughput.gp throughput.dat throughput.png throughput.svg throughput.gnuplot.log; do
    echo precious > "victim_$f"
    rm -f "$HS/report/$f"
    ln -s "$TMP/victim_$f" "$HS/report/$f"
done
run_report "$HS" >/dev/null
for f in throughput.gp throughput.dat throughput.png throughput.svg throughput.gnuplot.log; do
    [ "$(cat "victim_$f")" = precious ] || fail "report wrote through a link planted as report/$f"
    [ -L "$HS/report/$f" ] && fail "report/$f is still the planted link"
done
[ -s "$HS/report/throughput.svg" ] && [ -s "$HS/report/throughput.gp" ] || fail "figure not rewritten over the planted links"

# ---- 4. a real tiny weak-scaling sweep ----
"$VB" datagen --output_dir data/tiny --years 1 --valid_years 1 --samples_per_year 16 --channels 4 --img_size 32,64 \
    >datagen.log 2>&1 || fail "datagen: $(cat datagen.log)"
out=$(OMP_NUM_THREADS=1 "$VB" sweep weak_scaling --config tiny --ranks 1,2 --repeats 2 --output_dir real \
    --benchy_config "$QUICK" --timeout_s 300 2>&1) || fail "real sweep (needs sweep --repeats) exited $?: $out"
d=$(ls -d real/weak_scaling_* 2>/dev/null | head -1)
[ -n "$d" ] || fail "no sweep directory under real/: $out"
out=$(run_report "$d")
grep -q "efficiency" <<<"$out" || fail "real sweep: no main table: $out"
python3 - "$d/report" <<'EOF' || fail "real sweep report tables"
import csv, sys
d = sys.argv[1]
t = list(csv.DictReader(open(d + "/scaling.csv")))
if len(t) != 4:
    sys.exit("scaling.csv: %d rows, want 4 (ranks 1, 2 x ddp, noddp)" % len(t))
for r in t:
    if int(r["samples"]) != 4 or float(r["thr_mean"]) <= 0:
        sys.exit("each point: 2 repeats x 2 timed FULL trials: %s" % r)
    if r["ranks"] == "1" and abs(float(r["efficiency"]) - 1) > 1e-12:
        sys.exit("efficiency at 1 rank is not 1: %s" % r)
o = list(csv.DictReader(open(d + "/comm_overhead.csv")))
if len(o) != 2:
    sys.exit("comm_overhead.csv: %d rows, want 2" % len(o))
EOF
grep -q "kind weak_scaling" "$d/report/report.md" || fail "real sweep: kind not weak_scaling"
python3 check.py html "$d/report/report.html" || fail "real sweep report.html"
grep -q "Time breakdown per rank" "$d/report/report.md" || fail "real sweep: no per-run sections"
[ "$(ls "$d"/report/step_timeline_*.svg 2>/dev/null | wc -l)" = 1 ] || fail "real sweep: not one step timeline figure: $(ls "$d/report")"
grep -q "'rank 1 compute'" "$d"/report/step_timeline_*.gp || fail "real sweep: the 2-rank run's step figure lacks rank 1"

echo "test_report: OK"
