"""check_otava.py VITBENCH WORKDIR: vitbench history against Apache Otava (PyPI apache-otava
0.8.0) itself on the same CSVs, run with the Python of Otava's virtual environment (test_history_otava.sh).

1. Synthetic 40-point histories (tests/lib/history_fixtures.py: random.Random seeds, the same on every
   machine), with and without a 10% step, at 2% and 5% noise: whether and where each finds a change.
   Held to: on every series without a step they agree; the step in the middle at 2% noise is found
   by vitbench at its index within one point on every series (at 5% noise within two or three); they agree within one point on at least 90% of all
   series; and Otava's own code with the two differences changepoint.h names undone (sample standard
   deviations in its t-test; its merge testing again the change before a dropped one, not only the
   one after) gives vitbench's change points exactly, on every series: every disagreement is one of
   those two.
2. A history written by `vitbench history append` from gate sets: Otava reads it as it is (every
   metric column, the commit as an attribute) and finds the same change points.

Otava's quirks met here: it reads only rows of the last 365 days up to now (its default --since and
--until), so the histories end an hour ago; a metric cell it is told to read must be a number (an
empty one stops it), so its config names only columns that are full; the config's key is
quote_char (the documented quotechar is ignored); --config-file goes after the subcommand; it exits
0 whatever it finds."""
import csv, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from history_fixtures import KEY, gate_set, history, series  # noqa: E402

VB, WORK = sys.argv[1], sys.argv[2]
OTAVA = [sys.executable, "-m", "otava.main"]  # what its `otava` script runs
os.chdir(WORK)


def run_otava(tests):
    """tests: {name: (csv path, [metric columns], {metric: direction})}; Otava's change indices per test
    and metric, from one `otava analyze` of them all."""
    with open("otava.yaml", "w") as f:
        f.write("tests:\n")
        for name, (path, metrics, direction) in tests.items():
            f.write("  %s:\n    type: csv\n    file: %s\n    time_column: time\n" % (name, path))
            f.write("    attributes: [commit, machine_key]\n    metrics:\n")
            for m in metrics:
                f.write("      %s: {direction: %d}\n" % (m, direction.get(m, 1)))
            f.write("    csv_options: {delimiter: \",\", quote_char: '\"'}\n")
    p = subprocess.run(OTAVA + ["analyze", "--config-file", "otava.yaml"] + list(tests) + ["--output", "json"],
                       capture_output=True, text=True)
    if p.returncode != 0 or "{" not in p.stdout:
        sys.exit("otava analyze exited %d: %s %s" % (p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    d = {}
    for line in p.stdout.splitlines():  # a JSON object per test, a line each
        if line.startswith("{"):
            d.update(json.loads(line))
    out = {}
    for name, (_, metrics, _) in tests.items():
        found = {m: [] for m in metrics}
        for group in d.get(name, []):
            for c in group["changes"]:
                found[c["metric"]].append(int(c["index"]))
        out[name] = {m: sorted(v) for m, v in found.items()}
    return out


def run_vitbench(path, metrics):
    p = subprocess.run([VB, "history", path, "--json", "--no_plots", "--output_dir", path + ".page",
                        "--metric", ",".join(metrics)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("vitbench history %s exited %d: %s" % (path, p.returncode, p.stderr))
    found = {m: [] for m in metrics}
    for c in json.loads(p.stdout):
        found[c["metric"]].append(c["index"])
    return {m: sorted(v) for m, v in found.items()}


def undone(values):
    """Otava's compute_change_points with its two differences from vitbench undone."""
    import numpy as np
    import otava.analysis as oa
    from scipy.stats import ttest_ind_from_stats

    def compare(self, left, right):
        ml, mr = float(np.mean(left)), float(np.mean(right))
        sl = float(np.std(left, ddof=1)) if len(left) >= 2 else 0.0
        sr = float(np.std(right, ddof=1)) if len(right) >= 2 else 0.0
        if len(left) + len(right) <= 2:
            p = 1.0
        elif sl == 0 and sr == 0:
            p = 1.0 if ml == mr else 0.0
        else:
            p = float(ttest_ind_from_stats(ml, sl, len(left), mr, sr, len(right))[1])
        return oa.TTestStats(mean_1=ml, mean_2=mr, std_1=sl, std_2=sr, pvalue=p)

    def merge(cps, values, max_pvalue, min_magnitude):
        tester = oa.TTestSignificanceTester(max_pvalue)
        while cps:
            weakest = max(cps, key=lambda c: c.stats.pvalue)
            if weakest.stats.pvalue < max_pvalue:
                weakest = min(cps, key=lambda c: c.stats.change_magnitude())
                if weakest.stats.change_magnitude() > min_magnitude:
                    break
            at = cps.index(weakest)
            del cps[at]
            intervals = tester.get_intervals(cps)
            for k in (at - 1, at):  # both neighbours of the dropped change
                if 0 <= k < len(cps):
                    cps[k] = tester.change_point(cps[k].to_candidate(), values, intervals)
        return cps

    saved = (oa.TTestSignificanceTester.compare, oa.merge)
    oa.TTestSignificanceTester.compare, oa.merge = compare, merge
    try:
        cps, _ = oa.compute_change_points(list(values))
    finally:
        oa.TTestSignificanceTester.compare, oa.merge = saved
    return sorted(int(c.index) for c in cps)


def near(a, b):
    return len(a) == len(b) and all(abs(x - y) <= 1 for x, y in zip(a, b))


# ---- 1. synthetic histories ----
M = "FULL_samples_per_s"
CASES = [  # name, step at, step, noise
    ("flat2", None, 0.0, 0.02), ("down20", 20, -0.10, 0.02), ("up20", 20, 0.10, 0.02),
    ("down38", 38, -0.10, 0.02), ("flat5", None, 0.0, 0.05), ("down20n5", 20, -0.10, 0.05),
]
SEEDS = range(10)
tests, values = {}, {}
for name, at, step, noise in CASES:
    for seed in SEEDS:
        t = "%s_%d" % (name, seed)
        values[t] = series(40, at, step, noise, 7000 + seed)
        history(t + ".csv", {M: values[t]})
        tests[t] = (t + ".csv", [M], {M: 1})
theirs = run_otava(tests)
bad, total, agree = [], 0, 0
print("%-10s %-16s %-16s %-16s" % ("series", "vitbench", "otava", "otava, undone"))
for name, at, step, noise in CASES:
    n_agree = 0
    for seed in SEEDS:
        t = "%s_%d" % (name, seed)
        ours, other, fixed = run_vitbench(t + ".csv", [M])[M], theirs[t][M], undone(values[t])
        total += 1
        ok = near(ours, other)
        agree += ok
        n_agree += ok
        mark = "" if ok else "   <- differ"
        print("%-10s %-16s %-16s %-16s%s" % (t, ours, other, fixed, mark))
        if ours != fixed:
            bad.append("%s: vitbench %s, Otava with its differences undone %s" % (t, ours, fixed))
        if at is None and not ok:
            bad.append("%s (no step): vitbench %s, Otava %s" % (t, ours, other))
        if at == 20 and noise == 0.02 and not any(abs(i - at) <= 1 for i in ours):
            bad.append("%s: vitbench misses the step at %d: %s" % (t, at, ours))
    print("%s: agree within one point on %d of %d" % (name, n_agree, len(SEEDS)))
print("all: vitbench and Otava agree within one point on %d of %d series" % (agree, total))
if agree < 0.9 * total:
    bad.append("agreement %d of %d, below 90%%" % (agree, total))

# ---- 2. a history vitbench wrote, read by Otava as it is ----
import datetime  # noqa: E402

now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
os.makedirs("hist", exist_ok=True)
H = "hist/%s.csv" % KEY
for i in range(12):
    drop = 0.8 if i >= 6 else 1.0
    root = "set%02d" % i
    gate_set(root, [[100.0 * drop, 101.0 * drop, 99.0 * drop], [100.5 * drop, 99.5 * drop, 100.0 * drop]],
             "%07x" % (0xabc000 + i), counts=[["instructions", str(1043703303 + (20000000 if i >= 6 else 0))],
                                             ["est_cycles", str(1523000000 + (30000000 if i >= 6 else 0))]])
    t = (now - datetime.timedelta(hours=12 - i)).strftime("%Y-%m-%dT%H:%M:%SZ")
    p = subprocess.run([VB, "history", "append", H, "--from", root, "--time", t], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("history append %s: %s" % (root, p.stderr))
metrics = ["FULL_samples_per_s", "SYNTHETIC_samples_per_s", "IO_samples_per_s", "instructions", "est_cycles"]
direction = {"instructions": -1, "est_cycles": -1}
theirs = run_otava({"appended": (H, metrics, direction)})["appended"]
ours = run_vitbench(H, metrics)
rows = list(csv.DictReader(open(H)))
print("appended history (%d rows): vitbench %s, otava %s" % (len(rows), ours, theirs))
for m in metrics:
    want = [] if m == "IO_samples_per_s" else [6]
    if ours[m] != want or theirs[m] != want:
        bad.append("appended history, %s: vitbench %s, Otava %s, want %s" % (m, ours[m], theirs[m], want))

if bad:
    sys.exit("check_otava: FAIL:\n  " + "\n  ".join(bad))
print("check_otava: ok")
