#!/usr/bin/env bash
# test_history.sh <vitbench>: a machine's history end to end, from hand-made
# gate sets (tests/lib/history_fixtures.py) and synthetic histories:
#   1. `history append` from three sets writes the file byte for byte: the
#      header once, each row's time (--time, else the runs' earliest
#      start_time), commit (--commit, else the runs' git_commit), machine_key,
#      the geometric mean of the runs' median samples/s per kind, and
#      counts.csv's instructions and est_cycles (empty without the file);
#      a single run directory is a set of one; given the directory of
#      histories, the file is DIR/<machine_key>.csv; six appends at once keep
#      all six rows
#   2. append refuses, exit 2 with the file named and the history untouched:
#      runs of two machines, a file named after another machine, a history
#      whose header differs, a history cut short, runs of two commits
#      without --commit, a bad --time, a malformed counts.csv
#   3. `history FILE` on 40 rows with a 10% drop at row 20 (2% noise), and
#      instructions that grow by 2% at row 30: the table, and --json's
#      objects (metric, index, commit, mean_before, mean_after, pvalue,
#      direction, confirmed); a drop in samples/s and a rise in instructions
#      are regressions; a change on the newest row alone is not confirmed;
#      exit 0 whatever it finds
#   4. the page: history.md, history.html, changes.csv, a figure per metric
#      (.png, .svg, .dat, .gp) marking the change points with their commits;
#      commits that are markup, gnuplot or shell text stay text everywhere
#   5. bad input exits 2 with one line naming the file, the record and the
#      column: a cut record, a short record, a non-numeric cell, a NUL byte,
#      a time that does not parse, an unknown metric, a flag misspelt
set -u

VB=${1:?usage: test_history.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_history: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
command -v python3 >/dev/null || fail "python3 is needed"
TMP=$(mktemp -d /tmp/vb_history.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"
export PYTHONPATH=$SRC/tests/lib
KEY=000000000000feee
H=hist/$KEY.csv

# expect_bad WHAT PATTERN CMD...: exit 2 with one line on stderr matching PATTERN
expect_bad() {
    local what=$1 pat=$2
    shift 2
    "$@" >out.txt 2>err.txt
    local rc=$?
    [ $rc -eq 2 ] || fail "$what: exit $rc, want 2: $(cat out.txt err.txt)"
    [ "$(wc -l <err.txt)" -eq 1 ] || fail "$what: want one line on stderr, got: $(cat err.txt)"
    grep -qE -- "$pat" err.txt || fail "$what: the message does not match '$pat': $(cat err.txt)"
}

# ---- 1. append: the file byte for byte ----
python3 - <<'EOF' || fail "gate set fixtures"
from history_fixtures import gate_set
import json
rows = {
    "setA": gate_set("setA", [[100.0, 102.0, 98.0], [110.0, 108.0, 111.0], [95.0, 97.0, 96.0]], "aaaa111",
                     start="2026-03-01T10:00:00Z"),
    "setB": gate_set("setB", [[90.0, 91.0, 92.0], [93.0, 89.0, 90.5]], "bbbb222", start="2026-03-02T11:30:00Z",
                     counts=[["instructions", "1043703303"], ["est_cycles", "1523000000"], ["steps", "4"]]),
    "setC": gate_set("setC", [[120.0, 121.0]], "cccc333", counts=[["est_cycles", "1.5e9"]]),
}
json.dump(rows, open("want_rows.json", "w"))
EOF
out=$("$VB" history append "$H" --from setA 2>&1) || fail "append setA: $out"
grep -q "^history append: $H: 2026-03-01T10:00:00Z, commit aaaa111, from 3 runs: FULL_samples_per_s" <<<"$out" ||
    fail "append's line: $out"
"$VB" history append "$H" --from setB >/dev/null 2>&1 || fail "append setB"
"$VB" history append "$H" --from setC --commit 'v1.2,"rc"' --time 2026-03-03T12:00:00+02:00 >/dev/null 2>&1 ||
    fail "append setC with --commit and --time"
"$VB" history append hist --from setA/runs/run1 --time 2026-03-04T00:00:00Z >/dev/null 2>&1 ||
    fail "append a single run directory to the directory of histories"
python3 - "$H" <<'EOF' || fail "the history's bytes (above)"
import json, sys
from history_fixtures import HEADER, median
rows = json.load(open("want_rows.json"))
run1 = [110.0, 108.0, 111.0]
single = ["aaaa111", "000000000000feee", "%.9g" % median(run1), "%.9g" % median([x * 1.1 for x in run1]),
          "%.9g" % median([5000.0, 5100.0]), "", ""]
rows["setC"][0] = '"v1.2,""rc"""'  # quoted as RFC 4180 wants
want = ",".join(HEADER) + "\n" + "".join(t + "," + ",".join(r) + "\n" for t, r in (
    ("2026-03-01T10:00:00Z", rows["setA"]), ("2026-03-02T11:30:00Z", rows["setB"]),
    ("2026-03-03T10:00:00Z", rows["setC"]), ("2026-03-04T00:00:00Z", single)))
got = open(sys.argv[1]).read()
if got != want:
    sys.exit("want:\n%s\ngot:\n%s" % (want, got))
EOF
[ -z "$(find hist -name '.*' ! -name "*.lock")" ] || fail "a temporary file left beside the history: $(ls -a hist)"
# appends at once take turns: none renames its copy over another's row
mkdir -p par
pids=()
for i in 1 2 3 4 5 6; do
    "$VB" history append "par/$KEY.csv" --from setA --commit "par$i" >/dev/null 2>&1 & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent append failed"; done
[ "$(grep -c '^2026-03-01T10:00:00Z,par[1-6],' "par/$KEY.csv")" = 6 ] || fail "concurrent appends lost rows: $(cat "par/$KEY.csv")"
[ "$(grep -c '^time,' "par/$KEY.csv")" = 1 ] || fail "concurrent appends wrote the header twice"
# a counted set (perf_ci.sh --counts: run.json and counts.csv, the run's
# trials below it) gives its counts alone, never the simulator's throughput
mkdir -p counted && cp setA/runs/run0/run.json counted/ && printf 'metric,value\ninstructions,1043703303\nest_cycles,1523000000\n' >counted/counts.csv ||
    fail "counted set fixture"
"$VB" history append "counted/$KEY.csv" --from counted --commit cnt1 >/dev/null 2>&1 || fail "append a counted set"
grep -q "^2026-03-01T10:00:00Z,cnt1,$KEY,,,,1043703303,1523000000\$" "counted/$KEY.csv" ||
    fail "a counted set's row is not its counts alone: $(cat "counted/$KEY.csv")"

# ---- 2. append refuses, the history untouched ----
cp "$H" before.csv
python3 - <<'EOF' || fail "bad set fixtures"
from history_fixtures import gate_set
import json
gate_set("mixed", [[100.0], [101.0]], "dddd444")
j = json.load(open("mixed/runs/run1/run.json"))
j["fingerprint"]["machine_key"] = "00000000000000bb"
json.dump(j, open("mixed/runs/run1/run.json", "w"))
gate_set("other", [[100.0]], "eeee555", key="00000000000000bb")
gate_set("twocommits", [[100.0], [101.0]], "ffff666")
j = json.load(open("twocommits/runs/run1/run.json"))
j["fingerprint"]["git_commit"] = "ffff777"
json.dump(j, open("twocommits/runs/run1/run.json", "w"))
gate_set("badcounts", [[100.0]], "gggg888", counts=[["instructions", "many"]])
EOF
expect_bad "runs of two machines" "mixed/runs/run1: machine_key 00000000000000bb, where mixed/runs/run0 has $KEY" \
    "$VB" history append "$H" --from mixed
expect_bad "another machine's file" "is named $KEY.csv, but the runs' machine_key is 00000000000000bb" \
    "$VB" history append "$H" --from other
expect_bad "two commits" "git_commit ffff777, where twocommits/runs/run0 has ffff666: give --commit" \
    "$VB" history append "$H" --from twocommits
expect_bad "bad --time" "--time 'yesterday' is not an ISO 8601 time" \
    "$VB" history append "$H" --from setA --time yesterday
expect_bad "impossible --time" "--time '2026-02-30T00:00:00Z' is not an ISO 8601 time" \
    "$VB" history append "$H" --from setA --time 2026-02-30T00:00:00Z
expect_bad "counts.csv" "badcounts/counts.csv: record 2, column value: instructions 'many' is not a number" \
    "$VB" history append "$H" --from badcounts
expect_bad "no --from" "missing --from SET_DIR" "$VB" history append "$H"
cmp -s "$H" before.csv || fail "a refused append changed the history"
mkdir -p other_hdr && sed '1s/est_cycles/cycles/' "$H" >"other_hdr/$KEY.csv"
expect_bad "another header" "other_hdr/$KEY.csv: its header is 'time,.*,cycles', not the history's" \
    "$VB" history append "other_hdr/$KEY.csv" --from setA
mkdir -p cut && head -c -8 "$H" >"cut/$KEY.csv"
expect_bad "a cut history" "cut/$KEY.csv: record 5 has no line end" "$VB" history append "cut/$KEY.csv" --from setA
cmp -s "cut/$KEY.csv" <(head -c -8 "$H") || fail "append changed a cut history"

# ---- 3. change points: the table and --json ----
python3 - <<'EOF' || fail "history fixtures"
from history_fixtures import history, series
full = series(40, 20, -0.10, 0.02, 11)
instr = [1043703303 * (1.02 if i >= 30 else 1) for i in range(40)]
# commits that are markup, gnuplot and shell text
commits = ["c%03d" % i for i in range(40)]
commits[20] = "<b>bold</b>`touch pwned`'$(touch pwned2)'|[x](javascript:alert(1))"
commits[30] = '"quoted" @ at \\ back'
history("h40.csv", {"FULL_samples_per_s": full, "instructions": instr}, commits)
history("end.csv", {"FULL_samples_per_s": series(40, 39, -0.10, 0.02, 3)})
history("flat.csv", {"FULL_samples_per_s": series(40, None, 0, 0.02, 5)})
EOF
out=$("$VB" history h40.csv --output_dir page 2>&1)
rc=$?
[ $rc -eq 0 ] || fail "history on a history with regressions exited $rc (want 0, as Otava): $out"
grep -qE "^metric +index +commit +time +mean_before +mean_after +change +p +direction +confirmed" <<<"$out" ||
    fail "the table's header: $out"
grep -qE "^FULL_samples_per_s +20 .* regression +yes " <<<"$out" || fail "the drop at row 20 in the table: $out"
grep -qE "^instructions +30 .* \+2\.00% .* regression +yes " <<<"$out" || fail "the rise in instructions at row 30: $out"
grep -q "^history: 2 change points: 2 regressions, 0 improvements; 2 confirmed" <<<"$out" || fail "the tally: $out"
"$VB" history h40.csv --json --no_plots --output_dir page_json >h40.json 2>err.txt || fail "--json: $(cat err.txt)"
python3 - h40.json <<'EOF' || fail "--json (above)"
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d, list) and len(d) == 2, d
need = {"metric", "index", "commit", "time", "mean_before", "mean_after", "pvalue", "direction", "confirmed"}
for c in d:
    assert need <= set(c), c
full = [c for c in d if c["metric"] == "FULL_samples_per_s"][0]
assert full["index"] == 20 and full["direction"] == "regression" and full["confirmed"] is True, full
assert full["commit"].startswith("<b>bold</b>"), full
assert 0.85 < full["mean_after"] / full["mean_before"] < 0.95 and full["pvalue"] < 0.001, full
ins = [c for c in d if c["metric"] == "instructions"][0]
assert ins["index"] == 30 and ins["direction"] == "regression" and ins["pvalue"] == 0, ins
assert ins["commit"] == '"quoted" @ at \\ back', ins
EOF
out=$("$VB" history h40.csv --metric FULL_samples_per_s --json --no_plots --output_dir p2 2>/dev/null) ||
    fail "--metric FULL_samples_per_s"
python3 -c 'import json,sys; d=json.load(sys.stdin); assert [c["metric"] for c in d] == ["FULL_samples_per_s"], d' \
    <<<"$out" || fail "--metric keeps one metric: $out"
out=$("$VB" history h40.csv --min_magnitude 0.05 --json --no_plots --output_dir p3 2>/dev/null) || fail "--min_magnitude"
python3 -c 'import json,sys; d=json.load(sys.stdin); assert [c["metric"] for c in d] == ["FULL_samples_per_s"], d' \
    <<<"$out" || fail "--min_magnitude 0.05 keeps the 10% drop, drops the 2% rise: $out"
out=$("$VB" history end.csv --json --no_plots 2>/dev/null) || fail "history end.csv"
python3 -c 'import json,sys; d=json.load(sys.stdin); assert [(c["index"], c["confirmed"]) for c in d] == [(39, False)], d' \
    <<<"$out" || fail "a drop on the newest row alone: found, not confirmed: $out"
[ -f end_report/history.md ] || fail "the page's default directory is not end_report/ beside end.csv"
out=$("$VB" history flat.csv --no_plots 2>&1) || fail "history flat.csv"
grep -q "^history: 0 change points" <<<"$out" || fail "a flat history has no change: $out"
"$VB" history "$H" --no_plots >/dev/null 2>&1 || fail "history on the appended file"

# ---- 4. the page ----
for f in history.md history.html changes.csv levels_FULL_samples_per_s.csv levels_instructions.csv; do
    [ -s "page/$f" ] || fail "page/$f missing"
done
if command -v gnuplot >/dev/null; then
    for m in FULL_samples_per_s instructions; do
        for e in png svg dat gp; do [ -s "page/history_$m.$e" ] || fail "page/history_$m.$e missing"; done
    done
    grep -q "with labels" page/history_FULL_samples_per_s.gp || fail "the change points are not labelled"
    grep -q '"<b>bold</b>' page/history_FULL_samples_per_s.dat || fail "the change point's commit is not its label"
    grep -q "bold\|touch" page/history_FULL_samples_per_s.gp && fail "a commit reached the gnuplot script"
    grep -q "<svg" page/history.html || fail "history.html does not inline the figures"
fi
[ -e page/pwned ] || [ -e pwned ] || [ -e pwned2 ] && fail "a commit string was run"
grep -q "<b>bold" page/history.html && fail "a commit is markup in history.html"
grep -q "&lt;b&gt;bold&lt;/b&gt;" page/history.html || fail "the commit is not shown as text in history.html"
grep -q "<b>bold" page/history.md && fail "a commit is raw HTML in history.md"
grep -qE '(^|[^\\])\]\(javascript' page/history.md && fail "a commit is a link in history.md"
grep -q '^FULL_samples_per_s,20,' page/changes.csv || fail "changes.csv: $(cat page/changes.csv)"

# ---- 5. bad input ----
python3 - <<'EOF' || fail "bad history fixtures"
good = open("flat.csv").read()
lines = good.splitlines(keepends=True)
open("cut.csv", "w").write(good[:-5])                             # the last record without its line end
open("short.csv", "w").write("".join(lines[:3]) + lines[3].rsplit(",", 3)[0] + "\n" + "".join(lines[4:]))
open("word.csv", "w").write("".join(lines[:4]) + lines[4].replace(lines[4].split(",")[3], "fast", 1) + "".join(lines[5:]))
open("nul.csv", "w").write("".join(lines[:5]) + lines[5].replace(",c004,", ",c0\0" + "04,") + "".join(lines[6:]))
open("time.csv", "w").write("".join(lines[:6]) + lines[6].replace(lines[6].split(",")[0], "last tuesday") + "".join(lines[7:]))
EOF
expect_bad "a cut record" "cut.csv: record 41 has no line end" "$VB" history cut.csv --no_plots
expect_bad "a short record" "short.csv: record 4 has 5 fields, the header 8" "$VB" history short.csv --no_plots
expect_bad "a word for a number" "word.csv: record 5, column FULL_samples_per_s: 'fast' is not a number" \
    "$VB" history word.csv --no_plots
expect_bad "a NUL byte" "nul.csv: record 6, column 2 \(commit\): a NUL byte" "$VB" history nul.csv --no_plots
expect_bad "a time" "time.csv: record 7, column time: 'last tuesday' is not an ISO 8601 time" \
    "$VB" history time.csv --no_plots
expect_bad "an unknown metric" "--metric: unknown metric 'FULL' \(metrics: FULL_samples_per_s" \
    "$VB" history flat.csv --metric FULL --no_plots
expect_bad "an unknown metric in a list" "--metric: unknown metric 'bogus'" \
    "$VB" history flat.csv --metric SYNTHETIC_samples_per_s,bogus --no_plots
sed '1s/,est_cycles$//; 2,$s/,$//' flat.csv >fewer.csv
expect_bad "a metric the file lacks" "--metric est_cycles: fewer.csv has no column 'est_cycles'" \
    "$VB" history fewer.csv --metric est_cycles --no_plots
expect_bad "a misspelt flag" "unknown flag --p-value" "$VB" history flat.csv --p-value 0.01
expect_bad "no such file" "nosuch.csv: no such file" "$VB" history nosuch.csv
sed '3s/,000000000000feee,/,<i>k<\/i>,/' flat.csv >key.csv
expect_bad "a machine_key that is markup" "key.csv: record 3, column machine_key: '<i>k</i>' is not letters and digits" \
    "$VB" history key.csv

echo "test_history: PASS"
