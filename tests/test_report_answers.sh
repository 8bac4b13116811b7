#!/usr/bin/env bash
# test_report_answers.sh <vitbench>: what the report and compare say when a
# result cannot be one, and the figures' layout, on fixed sweeps
# (tests/lib/report_fixtures.py):
#   1. a weak-scaling sweep whose 2-rank runs are six times the 1-rank runs
#      (efficiency 3, its interval far above 1): no answer, a measurement
#      anomaly in the summary and the table's notes, what each point's runs
#      show (the 1-rank runs lost 60% of their thread time on 2 threads),
#      and what to rerun with (--threads_per_rank 1); the same sweep at a
#      plausible 1.9x is a result, with no such words;
#   2. a run whose FULL beats its IO trials (the loader alone): no answer;
#   3. runs that gave up threads (thread_policy adapt) are named;
#   4. a sweep stopped after 1 of 6 planned runs says 5 never ran;
#   5. compare of busy sides says what to rerun with (stdout and
#      compare.json), and nothing of the kind for quiet sides;
#   6. figures: every script sets a bottom margin for tics, label and
#      legend; efficiency from 0; no overhead curve from one rank count with
#      communication.
set -u

VB=${1:?usage: test_report_answers.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export VB_SOURCE_DIR=$SRC
fail() { echo "test_report_answers: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
command -v python3 >/dev/null || fail "python3 is needed to write the fixtures"
TMP=$(mktemp -d /tmp/vb_answers.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

python3 - <<'PY' || fail "fixtures"
import os, sys
sys.path.insert(0, os.path.join(os.environ["VB_SOURCE_DIR"], "tests", "lib"))
from report_fixtures import make_run, sweep

drift = (1, 1.01, 0.99)
def weak(root, two_rank):
    runs = []
    for rep in range(3):
        runs.append(("completed", rep, 1, {"noddp": "false"},
                     dict(local=4, glob=4, noddp=False, full=[x * drift[rep] for x in (100, 101, 99)],
                          load=0.6, threads=(2, 2))))
        runs.append(("completed", rep, 2, {"noddp": "false"},
                     dict(local=4, glob=8, noddp=False, full=[x * drift[rep] for x in two_rank],
                          load=0.02, threads=(1, 1))))
        runs.append(("completed", rep, 2, {"noddp": "true"},
                     dict(local=4, glob=8, noddp=True, full=[x * 1.05 * drift[rep] for x in two_rank],
                          load=0.02, threads=(1, 1))))
        runs.append(("completed", rep, 1, {"noddp": "true"},
                     dict(local=4, glob=4, noddp=True, full=[x * drift[rep] for x in (100, 101, 99)],
                          load=0.6, threads=(2, 2))))
    sweep(root, "weak_scaling", ["noddp"], runs, kind="weak_scaling")

weak("super", (600, 606, 594))
weak("plain", (190, 192, 188))
# FULL above the loader alone
make_run("io_slow", 1, 4, 4, False, [100, 101, 99, 100.5], io=[50, 50.5, 49.5, 50.2], load=0.01, threads=(2, 2))
# runs that gave up a thread as they started, on a quiet machine afterwards
sweep("gave", "weak_scaling", [], [("completed", rep, 1, {}, dict(local=4, glob=4, noddp=False,
      full=[100 * drift[rep]] * 3, load=0.01, threads=(2, 1))) for rep in range(3)], kind="single")
# a sweep stopped after its first run of six
sweep("stopped", "weak_scaling", [], [("completed", 0, 1, {}, dict(local=4, glob=4, noddp=False, full=[100, 101, 99],
      load=0.01))], kind="single", planned=6)
# compare: busy sides with 2 threads, and quiet ones
for name, load, threads in (("busy_a", 0.5, (2, 2)), ("busy_b", 0.5, (2, 2)), ("quiet_a", 0.01, (2, 2)),
                            ("quiet_b", 0.01, (2, 2))):
    sweep(name, "weak_scaling", [], [("completed", rep, 1, {}, dict(local=4, glob=4, noddp=False,
          full=[x * drift[rep] for x in (100, 101, 99, 100.5, 99.5)], load=load, threads=threads))
          for rep in range(3)], kind="single")
PY

report() { "$VB" report "$1" > "$1.out" 2>&1 || fail "report $1 exited $?: $(cat "$1.out")"; }
summary() { sed -n '/^## Summary/,/^## Contents/p' "$1/report/report.md"; }

# ---- 1. an efficiency above the ideal beyond its interval ----
report super
python3 - <<'PY' || fail "super-linear weak scaling"
import csv, sys
rows = {(r["series"], r["ranks"]): r for r in csv.DictReader(open("super/report/scaling.csv"))}
two = rows[("noddp=false", "2")]
if not float(two["eff_ci_lo"]) > 1:
    sys.exit("fixture: efficiency interval does not exclude 1: %s" % two)
if "measurement anomaly" not in two["notes"]:
    sys.exit("2-rank point's notes: %s" % two["notes"])
if "measurement anomaly" in rows[("noddp=false", "1")]["notes"]:
    sys.exit("the reference point called an anomaly")
md = open("super/report/report.md").read().split("## Contents")[0]
for want in ("Weak scaling efficiency at 2 ranks, noddp=false: no answer.", "a measurement anomaly",
             "The 1-rank point: its runs lost up to 60% of their thread time to other work",
             "2 OpenMP threads a rank", "Rerun with one OpenMP thread a rank (--threads_per_rank 1)",
             "2 points have an efficiency above the ideal beyond their interval"):
    if want not in md:
        sys.exit("summary lacks %r:\n%s" % (want, md))
for line in md.splitlines():
    if "scaling efficiency at 2 ranks" in line and "no answer" not in line:
        sys.exit("an impossible efficiency printed as a result: %s" % line)
PY
report plain
summary plain | grep -q "Weak scaling efficiency at 2 ranks, noddp=false: 0.9" ||
    fail "a plausible efficiency is not a result: $(summary plain)"
summary plain | grep -q "no answer\|measurement anomaly" && fail "a plausible sweep called an anomaly: $(summary plain)"

# ---- 2. FULL faster than the loader alone ----
report io_slow
summary io_slow | grep -q "What bounds FULL: no answer. FULL runs at 2x the loader alone" ||
    fail "FULL above IO: $(summary io_slow)"
summary io_slow | grep -q "FULL above the loader's own rate (IO) beyond its interval" || fail "no warning for FULL above IO"

# ---- 3. runs that gave up threads ----
report gave
summary gave | grep -q "3 runs ran fewer OpenMP threads than they were given (e.g. .*: 1 of 2, thread_policy adapt)" ||
    fail "gave-way runs not named: $(summary gave)"

# ---- 4. a stopped sweep ----
report stopped
summary stopped | grep -q "5 of the 6 runs the sweep planned never ran (it stopped after 1)" ||
    fail "planned runs that never ran: $(summary stopped)"
summary stopped | grep -q "vitbench sweep --resume stopped runs the rest" || fail "no resume advice"

# ---- 5. compare says what to rerun with ----
out=$("$VB" compare busy_a busy_b --metric FULL --output busy.json 2>&1)
rc=$?
[ $rc -eq 5 ] || fail "busy identical sides exited $rc, want 5 (inconclusive): $out"
grep -q "^advice: Rerun with one OpenMP thread a rank (--threads_per_rank 1)" <<<"$out" || fail "compare advice: $out"
grep -q "The load cost the busiest run 50% of its thread time: a 2x slowdown by that share alone" <<<"$out" ||
    fail "compare advice without the load's cost: $out"
python3 -c 'import json, sys; d = json.load(open("busy.json")); sys.exit(0 if "--threads_per_rank 1" in d["advice"] else 1)' ||
    fail "compare.json has no advice"
out=$("$VB" compare quiet_a quiet_b --metric FULL --output quiet.json 2>&1)
grep -q "^advice:" <<<"$out" && fail "advice for quiet sides: $out"
grep -q "| equivalent |" <<<"$out" || fail "quiet identical sides are not equivalent: $out"

# ---- 6. figures ----
for gp in super/report/*.gp plain/report/*.gp; do
    grep -q "^set bmargin [0-9.]*$" "$gp" || fail "$gp sets no bottom margin"
done
python3 - <<'PY' || fail "efficiency axis"
gp = open("plain/report/throughput.gp").read().split("set terminal svg")[0]
lower = gp.split("reset")[2]  # the second panel of the PNG
if "set yrange [0:" not in lower:
    raise SystemExit("the efficiency panel does not start at 0: %s" % lower)
PY
[ -e plain/report/comm_overhead.png ] && fail "an overhead curve drawn from one rank count with communication"
grep -q "One rank count with gradient communication (dp > 1): no overhead curve to draw" plain/report/report.md ||
    fail "the missing overhead curve is not explained"
echo "test_report_answers: PASS"
