#!/usr/bin/env bash
# test_hostile.sh <vitbench>: inputs a careful attacker or a clumsy colleague
# would try, one class a section; each is refused with exit 2 and one line,
# or handled, as docs/results.md says:
#   1. an argument that is not UTF-8 (a run name, a path) is refused by every
#      command before it reaches a file
#   2. compare --metric FULL,full,FULL tests FULL once
#   3. an index.csv whose run_dir leaves the sweep (../.., an absolute path) is
#      refused by report, compare and model
#   4. report on an nsys import directory (ops.csv, timeline.csv, no run.json)
#      works, as trace does
#   5. a kernel name a spreadsheet would run (=cmd|'/C calc'!A0) is written into
#      ops.csv, timeline.csv and the report's CSVs as text (a leading '), and
#      compare's op: metric still finds it by its name
#   6. a run named javascript:alert(1), reported into its parent: every link
#      in report.html and report.md is a relative path starting with ./
#  10. a FIFO (named pipe) in place of a run's CSV: report and compare name it
#      instead of waiting forever for a writer in the open; VB_OPENBLAS_LIBRARY
#      naming one is refused before dlopen would block in its open
#  11. a NUL byte in a CSV: a record of them (once read as a blank line, so
#      report and compare used 1 of 2 trials) or one inside a field (a number
#      cut at it) is refused by report and compare with exit 2 naming the file
#      and the record
#   9. under an address-space limit (ulimit -v) just above what the program
#      maps to start: report and compare work (they never load OpenBLAS,
#      whose constructor retried its buffer forever), run stops with one line
set -u

VB=${1:?usage: test_hostile.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_hostile: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_hostile.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

# refused NEEDLE CMD...: exit 2 with one line naming NEEDLE
refused() {
    local needle=$1 out rc
    shift
    out=$("$VB" "$@" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] || fail "'$*' exited $rc, want 2: $out"
    [ "$(wc -l <<<"$out")" = 1 ] || fail "'$*' printed more than one line: $out"
    grep -q -- "^vitbench: error: .*$needle" <<<"$out" || fail "'$*' does not say '$needle': $out"
}

# ---- 1. arguments that are not UTF-8 ----
refused "argument 3 '\\\\xff\\\\xfe' is not valid UTF-8 (byte 0)" run --run_name $'\xff\xfe'
refused "argument 2 'a\\\\xc3(' is not valid UTF-8 (byte 1)" report $'a\xc3('
refused "is not valid UTF-8" sweep --resume $'sw\xed\xa0\x80' # a UTF-16 surrogate
[ -z "$(ls -A)" ] || fail "a refused argument left files behind: $(ls -A)"

# two runs of six timed FULL trials
python3 - <<'EOF' || fail "fixture"
import json, os
for d in ("ra", "rb"):
    os.makedirs(d)
    json.dump({"run_id": d, "status": "completed", "backend": "cpu", "ranks": 1}, open(d + "/run.json", "w"))
    with open(d + "/trials.csv", "w") as f:
        f.write("run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s\n")
        for i in range(6):
            v = 100.0 + i
            f.write("%s,FULL,%d,0,4,8,1,0,%r,%r\n" % (d, i, 32 / v, v))
EOF

# ---- 2. one metric named twice is one metric ----
# one run a side decides nothing (exit 5, inconclusive); what counts is that FULL is one comparison
"$VB" compare ra rb --metric FULL,full,FULL --output cmp.json >cmp.out 2>&1
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 5 ] || fail "compare exited $rc: $(cat cmp.out)"
python3 -c "import json,sys; r=json.load(open('cmp.json'))['results']; sys.exit(0 if len(r) == 1 else 'results: %d' % len(r))" ||
    fail "FULL named three times is not one result: $(cat cmp.json)"
grep -q "1 of 1 comparison\|(1 equivalent" cmp.out || fail "compare's verdict counts FULL more than once: $(tail -2 cmp.out)"

# ---- 3. index.csv's run_dir inside the sweep only ----
mkdir -p sw/runs other
cp -r ra sw/runs/000_a
cp -r rb other/run1
for rd in ../other/run1 "$TMP/other/run1" runs/../../other/run1; do
    printf 'run_index,run_dir,status,exit_code,repeat,ranks,threads_per_rank,full_samples_per_s\n0,%s,completed,0,0,1,1,100\n1,runs/000_a,completed,0,1,1,1,100\n' "$rd" >sw/index.csv
    refused "index.csv: record 2: run_dir '$rd' .*: a sweep's runs are inside it" report sw --no_plots
    refused "index.csv: record 2: run_dir '$rd' .*: a sweep's runs are inside it" compare sw sw --metric FULL
    refused "index.csv: record 2: run_dir '$rd' .*: a sweep's runs are inside it" \
        model --commbench "$SRC/tests/fixtures/model/commbench.csv" --run "$SRC/tests/fixtures/model/run1" --sweep sw
done

# ---- 4. report on an nsys import ----
sed "s/\"void gemm_kernel<float, 128>(float const\\*, float\\*)\"/=cmd|'\\/C calc'!A0/" \
    "$SRC/tests/fixtures/nsys/cuda_gpu_trace_new_us.csv" >gputrace.csv
grep -q "=cmd|'/C calc'!A0" gputrace.csv || fail "fixture: no kernel renamed: $(head -3 gputrace.csv)"
"$VB" nsys gputrace.csv >nsys.out 2>&1 || fail "nsys import: $(cat nsys.out)"
"$VB" report gputrace_vitbench --no_plots >rep.out 2>&1 || fail "report on an nsys import exited $?: $(cat rep.out)"
grep -q "an imported profile" gputrace_vitbench/report/report.md || fail "the report does not say what it reports on"
[ -s gputrace_vitbench/report/breakdown.csv ] && [ -s gputrace_vitbench/report/top_ops.csv ] ||
    fail "the report of an nsys import has no profile tables: $(ls gputrace_vitbench/report)"

# ---- 5. formulas stay text in every CSV ----
for f in gputrace_vitbench/ops.csv gputrace_vitbench/timeline.csv gputrace_vitbench/report/top_ops.csv; do
    grep -q "=cmd|" "$f" || fail "$f lost the kernel"
    python3 - "$f" <<'EOF' || fail "$f holds a cell a spreadsheet would run: $(grep "=cmd" "$f")"
import csv, sys
for row in csv.reader(open(sys.argv[1], newline="")):
    for cell in row:
        if cell[:1] in ("=", "+", "@") or (cell[:1] == "-" and not cell[1:2].isdigit() and cell != "-"):
            sys.exit("cell %r" % cell)
EOF
done
# compare reads an op back by its name (rank 0's rows of a run's ops.csv)
mkdir -p opa && sed 's/^1,nsys,/0,,/' gputrace_vitbench/ops.csv >opa/ops.csv && cp -r opa opb
for d in opa opb; do echo "{\"run_id\": \"$d\", \"status\": \"completed\"}" >$d/run.json; done
"$VB" compare opa opb --metric "op:=cmd|'/C calc'!A0" --output opcmp.json >opcmp.out 2>&1
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] || [ "$rc" = 5 ] || fail "compare by the kernel's name exited $rc: $(cat opcmp.out)"
python3 -c "import json,sys; r=json.load(open('opcmp.json'))['results'][0]; sys.exit(0 if r['base']['n'] == 1 else r)" ||
    fail "compare did not find the op by its name: $(cat opcmp.out)"

# ---- 6. links are relative paths starting with ./ ----
mkdir par && cp -r ra "par/javascript:alert(1)" && echo '{}' >"par/javascript:alert(1)/trace.json"
"$VB" report "par/javascript:alert(1)" --output_dir par --no_plots >js.out 2>&1 || fail "report of javascript:alert(1): $(cat js.out)"
grep -q 'href="./javascript%3Aalert%281%29/trace.json"' par/report.html ||
    fail "the trace link is not ./javascript%3A...: $(grep -o 'href="[^"]*"' par/report.html | sort -u)"
bad=$(grep -o 'href="[^"]*"' par/report.html | grep -v -e '^href="\./' -e '^href="#')
[ -z "$bad" ] || fail "links in report.html that are not ./ paths: $bad"
bad=$(grep -o '](<[^>]*>)' par/report.md | grep -v '^](<\./')
[ -z "$bad" ] || fail "links in report.md that are not ./ paths: $bad"

# ---- 11. NUL bytes in a CSV ----
python3 - <<'EOF'
import json, os
for d, bad in (("nulrec", b"\0" * 20 + b"\n"), ("nulfield", None)):
    os.makedirs(d)
    json.dump({"run_id": d, "status": "completed", "backend": "cpu", "ranks": 1,
               "fingerprint": {"machine_key": "00000000000000aa"}}, open(d + "/run.json", "w"))
    rows = [("%s,FULL,%d,0,4,8,1,0,%r,%r\n" % (d, i, 32 / (100.0 + i), 100.0 + i)).encode() for i in range(2)]
    if bad:
        rows.insert(1, bad)
    else:
        rows[1] = rows[1].replace(b",0,4,8,", b",0,4\0,8,")
    with open(d + "/trials.csv", "wb") as f:
        f.write(b"run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s\n")
        f.writelines(rows)
EOF
refused "nulrec/trials.csv: record 3: a NUL byte" report nulrec --no_plots
refused "nulrec/trials.csv: record 3: a NUL byte" compare nulrec nulfield --metric FULL
refused "nulfield/trials.csv: record 3: a NUL byte" report nulfield --no_plots
refused "nulfield/trials.csv: record 3: a NUL byte" compare nulfield nulrec --metric FULL

# VB_OPENBLAS_LIBRARY naming a FIFO: dlopen would block in its open; named instead
mkfifo blas.fifo || fail "mkfifo"
out=$(VB_OPENBLAS_LIBRARY=$TMP/blas.fifo timeout 60 "$VB" version 2>&1 >/dev/null)
rc=$?
[ "$rc" != 124 ] || fail "VB_OPENBLAS_LIBRARY naming a FIFO hung"
[ "$rc" = 1 ] && grep -q "^vitbench: error: cannot load OpenBLAS named by VB_OPENBLAS_LIBRARY: .*blas.fifo is a FIFO" <<<"$out" ||
    fail "VB_OPENBLAS_LIBRARY naming a FIFO: exit $rc: $out"

# ---- 9. an address-space limit (the last section) ----
# not under AddressSanitizer: its shadow memory alone is terabytes of address space
if grep -q __asan_init "$VB"; then
    echo "test_hostile: OK (address-space limit skipped: $VB is built with AddressSanitizer)"
    exit 0
fi
# the smallest limit under which `vitbench help` starts (the program and its
# libraries mapped), found by bisection; 128 MiB above it is the limit here
start=$(python3 - "$VB" <<'EOF'
import resource, subprocess, sys
def starts(limit):
    def lim():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        return subprocess.run([sys.argv[1], "help"], preexec_fn=lim, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False
lo, hi = 16 << 20, 64 << 30
if not starts(hi):
    sys.exit("vitbench help does not start under 64 GiB of address space")
while hi - lo > (8 << 20):
    mid = (lo + hi) // 2
    lo, hi = (lo, mid) if starts(mid) else (mid, hi)
print(hi)
EOF
) || fail "cannot find the address space vitbench starts in: $start"
limit=$((start + (128 << 20)))
# the analysis commands never load OpenBLAS (the dynamic loader lists every library it opens)
for cmd in "report ra --no_plots" "compare ra rb --metric FULL"; do
    # shellcheck disable=SC2086
    LD_DEBUG=files "$VB" $cmd 2>&1 >/dev/null | grep -q "file=.*libopenblas" && fail "$cmd loads OpenBLAS"
done
LD_DEBUG=files "$VB" version 2>&1 >/dev/null | grep -q "file=.*libopenblas" || fail "LD_DEBUG does not show OpenBLAS loaded by version"
timeout 60 prlimit --as=$limit "$VB" report ra --no_plots >as_report.log 2>&1 ||
    fail "report under ulimit -v $((limit >> 20)) MiB exited $?: $(tail -3 as_report.log)"
timeout 60 prlimit --as=$limit "$VB" compare ra rb --metric FULL >as_compare.log 2>&1
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] || [ "$rc" = 5 ] || fail "compare under ulimit -v $((limit >> 20)) MiB exited $rc: $(tail -3 as_compare.log)"
out=$(timeout 60 prlimit --as=$limit "$VB" run --config tiny --output_dir asrun 2>&1)
rc=$?
[ "$rc" = 1 ] || fail "run under ulimit -v $((limit >> 20)) MiB exited $rc, want 1: $out"
[ "$(wc -l <<<"$out")" = 1 ] || fail "run under a low ulimit -v printed more than one line: $out"
grep -q "^vitbench: error: the address-space limit (ulimit -v [0-9]* MiB) leaves [0-9]* MiB of it free, and MPI's runtime and OpenBLAS" <<<"$out" ||
    fail "run does not say the limit is too low: $out"
# 10. FIFOs where a run's CSVs belong
cp -r ra rfifo && rm rfifo/trials.csv && mkfifo rfifo/trials.csv rfifo/iterations.csv rfifo/summary.csv ||
    fail "cannot make rfifo"
timeout 60 "$VB" report rfifo --no_plots >fifo_report.log 2>&1
rc=$?
[ "$rc" != 124 ] || fail "report on a run whose trials.csv is a FIFO hung"
[ "$rc" = 0 ] || fail "report on a run whose trials.csv is a FIFO exited $rc: $(tail -3 fifo_report.log)"
grep -q "rfifo/trials.csv: cannot open (a FIFO (named pipe), not a regular file)" rfifo/report/report.md ||
    fail "report.md does not name the FIFO: $(grep -i fifo rfifo/report/report.md)"
out=$(timeout 60 "$VB" compare ra rfifo --metric FULL 2>&1 >/dev/null)
rc=$?
[ "$rc" = 2 ] || fail "compare with a FIFO trials.csv exited $rc, want 2: $out"
grep -q "^vitbench: error: .*rfifo/trials.csv: cannot open (a FIFO (named pipe), not a regular file)" <<<"$out" ||
    fail "compare does not name the FIFO: $out"
echo "test_hostile: OK"
