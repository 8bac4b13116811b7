#!/usr/bin/env bash
# test_model_no_fit.sh: no number the scaling model takes as a parameter is a
# published result it is checked against (scenarios/published/tutorials.yaml).
#
# Published values: every samples_per_s listed there (rows and references),
# the median of each list, the step time each implies (local batch x dp /
# samples/s) and the rate per GPU (samples/s / ranks). What must hold:
#  1. no number in a machine file (scenarios/machines/*.yaml, comments aside:
#     they cite sources) is one of them to the digits it is written with: a
#     number of k >= 3 significant digits matches a published value that
#     rounds to it at k digits (45.2 and 45.216 both match 45.2163); numbers
#     of one or two digits (64 cores, 48 GB/s) say too little to be a copy;
#  2. no reference file (scenarios/references/*.yaml) holds a row's value, and
#     no row's own reference in tutorials.yaml holds that row's value: a
#     reference is another measurement, never the one it predicts;
#  3. every number in a machine file says where it comes from: its line
#     carries a comment, or a comment block sits above it with at most four
#     lines of data in between (one comment may source a few keys together);
#  4. it compared something: the counts of values and numbers are printed
#     and must be non-zero.
# Usage: test_model_no_fit.sh [vitbench] (the binary is not needed; ctest passes it).
set -u
fail() { echo "test_model_no_fit: FAIL: $*" >&2; exit 1; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
command -v python3 > /dev/null || fail "python3 not found"
python3 - "$SRC" << 'EOF' || exit 1
import glob, os, re, statistics, sys

src = sys.argv[1]
NUM = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")

def fail(msg):
    print("test_model_no_fit: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)

def data_lines(path):
    """(line number, text without its comment) of a YAML file; quoted text dropped (free text, not numbers)."""
    out = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            line = re.sub(r'"[^"]*"', '""', line)
            out.append((i, line.split("#", 1)[0]))
    return out

def numbers(path):
    """(line, value, significant digits) of every number in the file's data"""
    return [(i, float(m.group()), sig_digits(m.group())) for i, t in data_lines(path) for m in NUM.finditer(t)]

def sig_digits(tok):
    mant = re.split(r"[eE]", tok.lstrip("+-"))[0]
    if "." in mant:
        return len(mant.replace(".", "").lstrip("0"))
    return len(mant.lstrip("0").rstrip("0"))

def rounds_to(p, x, k):
    """published value p, rounded to k significant digits, is x"""
    return p != 0 and abs(float(f"{p:.{k}g}") - x) <= 1e-9 * abs(x)

def values(text):
    return [float(x) for x in re.findall(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text)]

# ---- the published file: references and rows with their measurements ----
pub = os.path.join(src, "scenarios/published/tutorials.yaml")
refs, rows, section, cur = {}, [], None, None
for i, t in data_lines(pub):
    if re.match(r"^\S", t):
        section = t.split(":")[0].strip()
        continue
    if section == "references":
        m = re.match(r"^  (\S+):\s*$", t)
        if m:
            cur = refs.setdefault(m.group(1), {"vals": [], "batch": None, "dp": 1})
            continue
        target = cur
    elif section == "rows":
        if re.match(r"^  - id:", t):
            cur = {"id": t.split(":", 1)[1].strip(), "vals": [], "batch": None, "dp": 1, "ranks": 1, "ref": None}
            rows.append(cur)
            continue
        target = cur
    else:
        continue
    if target is None:
        continue
    if "samples_per_s:" in t:
        target["vals"] = values(t.split(":", 1)[1])
    m = re.search(r"local_batch:\s*(\d+)", t)
    if m:
        target["batch"] = int(m.group(1))
    m = re.search(r"layout:\s*\{(.*)\}", t)
    if m:
        d = dict((k.strip(), v.strip()) for k, v in (p.split(":") for p in m.group(1).split(",")))
        target["dp"] = int(d.get("dp", 1))
        target["ranks"] = int(d.get("tp", 1)) * int(d.get("cp", 1)) * int(d.get("dp", 1))
    m = re.search(r"reference:\s*(\S+)", t)
    if m and "ref" in target:
        target["ref"] = m.group(1)

def derived(e):
    v = list(e["vals"])
    if not v:
        return []
    out = v + [statistics.median(v)]
    if e.get("batch"):
        out += [e["batch"] * e.get("dp", 1) / x for x in v + [statistics.median(v)]]
    out += [x / e.get("ranks", e.get("dp", 1)) for x in v]
    return out

published = [x for e in list(refs.values()) + rows for x in derived(e)]
row_values = {r["id"]: derived(r) for r in rows}
if len(rows) < 5 or len(published) < 20:
    fail(f"read {len(rows)} rows and {len(published)} published values from {pub}")

def same(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))

# 1. machine files
checked = 0
for path in sorted(glob.glob(os.path.join(src, "scenarios/machines/*.yaml"))):
    for line, x, k in numbers(path):
        checked += 1
        for p in published:
            if k >= 3 and rounds_to(p, x, k):
                fail(f"{os.path.relpath(path, src)}:{line}: {x:g} is a published value ({p:.6g})")
if checked < 50:
    fail(f"only {checked} numbers in the machine files")

# 3. every machine-file number carries its source: a comment on its line or just above it
sourced = 0
for path in sorted(glob.glob(os.path.join(src, "scenarios/machines/*.yaml"))):
    with open(path) as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        data = re.sub(r'"[^"]*"', '""', line).split("#", 1)[0]
        if not NUM.search(data) or re.match(r"^\s*(name|description|device):", data):
            continue
        sourced += 1
        if "#" in line:
            continue
        j, gap = i - 1, 0
        while j >= 0 and lines[j].strip() and not lines[j].strip().startswith("#"):
            gap, j = gap + 1, j - 1
        if j < 0 or not lines[j].strip().startswith("#") or gap > 4:
            fail(f"{os.path.relpath(path, src)}:{i + 1}: '{line.strip()}' has no source comment on or just above it")
if sourced < 50:
    fail(f"only {sourced} numbered lines in the machine files")

# 2. reference files and each row's own reference
rchecked = 0
for path in sorted(glob.glob(os.path.join(src, "scenarios/references/*.yaml"))):
    for line, x, k in numbers(path):
        rchecked += 1
        for rid, vals in row_values.items():
            for p in vals:
                if k >= 3 and rounds_to(p, x, k):
                    fail(f"{os.path.relpath(path, src)}:{line}: {x:g} is row {rid}'s published value ({p:.6g})")
for r in rows:
    ref = refs.get(r["ref"])
    if ref is None:
        fail(f"row {r['id']}: reference {r['ref']} not found")
    for x in ref["vals"]:
        rchecked += 1
        for p in row_values[r["id"]]:
            if same(x, p):
                fail(f"row {r['id']}: its reference {r['ref']} holds its own published value {p:.6g}")
print(f"test_model_no_fit: OK ({len(published)} published values and the steps they imply; "
      f"{checked} machine-file numbers, {rchecked} reference numbers compared; {sourced} machine-file lines "
      f"with numbers, each with its source comment)")
EOF
