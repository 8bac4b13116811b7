# history_fixtures.py: gate sets (index.csv and runs/<run>/, as scripts/perf_ci.sh writes them) with
# known numbers, and synthetic histories in vitbench's history layout (VB_HISTORY_CSV_HEADER), for
# test_history.sh and test_history_otava.sh. Imported with tests/lib on sys.path.
import csv, datetime, json, math, os, random

from report_fixtures import make_run, write_csv

HEADER = ["time", "commit", "machine_key", "FULL_samples_per_s", "SYNTHETIC_samples_per_s", "IO_samples_per_s",
          "instructions", "est_cycles"]
KEY = "000000000000feee"  # report_fixtures' machine_key of a 1-rank run


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else v[n // 2 - 1] + (v[n // 2] - v[n // 2 - 1]) / 2


def gate_set(root, runs, commit, start=None, key=None, counts=None, syn=1.1, io=None):
    """runs: each run's timed FULL rates (SYNTHETIC = FULL x syn, IO = io or report_fixtures' own);
    start: run.json's start_time of the first run (later runs a minute apart); counts: counts.csv's
    rows (metric, value), or None for no file. Returns the row `history append` should write,
    without its time."""
    os.makedirs(root + "/runs")
    rows = []
    med = {"FULL": [], "SYNTHETIC": [], "IO": []}
    for i, full in enumerate(runs):
        d = "%s/runs/run%d" % (root, i)
        make_run(d, 1, 2, 2, False, full, syn=syn, io=io)
        j = json.load(open(d + "/run.json"))
        j["fingerprint"]["git_commit"] = commit
        if key:
            j["fingerprint"]["machine_key"] = key
        if start:
            t = datetime.datetime.strptime(start, "%Y-%m-%dT%H:%M:%SZ") + datetime.timedelta(minutes=i)
            j["start_time"] = t.strftime("%Y-%m-%dT%H:%M:%SZ")
        json.dump(j, open(d + "/run.json", "w"))
        rows.append([i, "runs/run%d" % i, "completed", 0, i, 1])
        med["FULL"].append(median(full))
        med["SYNTHETIC"].append(median([x * syn for x in full]))
        med["IO"].append(median(io or [5000.0, 5100.0]))
    write_csv(root + "/index.csv", ["run_index", "run_dir", "status", "exit_code", "repeat", "ranks"], rows)
    if counts is not None:
        write_csv(root + "/counts.csv", ["metric", "value"], counts)
    geo = {k: math.exp(sum(math.log(m) for m in v) / len(v)) for k, v in med.items()}
    c = dict(counts or [])
    def num(v):
        try:
            x = float(v)
        except (TypeError, ValueError):
            return ""  # none, or not a number: no row expected
        return "%.0f" % x if x == int(x) else "%.9g" % x
    return [commit, key or KEY, "%.9g" % geo["FULL"], "%.9g" % geo["SYNTHETIC"], "%.9g" % geo["IO"],
            num(c.get("instructions")), num(c.get("est_cycles"))]


def series(n, at, step, noise, seed, base=100.0):
    """n points around base with Gaussian noise (relative sd `noise`), times (1 + step) from point
    `at` on (None: no step); random.Random(seed): the same on every machine."""
    r = random.Random(seed)
    return [base * (1 + (step if at is not None and i >= at else 0)) * (1 + r.gauss(0, noise)) for i in range(n)]


def history(path, columns, commits=None, key=KEY, end=None):
    """A history of len(columns[...]) rows, an hour apart, the last an hour before `end` (default now:
    Otava reads only the last 365 days, up to now); columns: {metric column: values}, the rest empty."""
    n = len(next(iter(columns.values())))
    end = end or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0, tzinfo=None)
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(HEADER)
        for i in range(n):
            t = (end - datetime.timedelta(hours=n - i)).strftime("%Y-%m-%dT%H:%M:%SZ")
            c = commits[i] if commits else "c%03d" % i
            w.writerow([t, c, key] + [("%.9g" % columns[m][i]) if m in columns else "" for m in HEADER[3:]])
