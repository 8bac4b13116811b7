#!/usr/bin/env bash
# test_nsys.sh <vitbench>: `vitbench nsys` on the hand-made reports in
# tests/fixtures/nsys (README.md there has the activities and the figures
# computed by hand).
#   1. summaries of both generations: ops.csv rows, units, classification,
#      share_of_step, old reports without a median; BOM + CRLF + preamble
#   2. traces of both generations (us / ns): per-kernel statistics, bytes,
#      timeline.csv, breakdown.csv = the hand-computed overlap figures
#   3. --filter_time on both generations (us suffixes / plain ns)
#   4. a kernel in a trace and a summary is counted once (from the trace)
#   5. bad input: exit 2 with one line naming the file / flag; --help lists
#      every flag
#   6. real reports (tests/fixtures/nsys/real, provenance in its README.md):
#      cuda_api_sum is host API time (category api, its own table, outside
#      every GPU share); cuda_gpu_mem_time_sum is named so; a capture of
#      nsys's output with its notice; several reports in one capture; a
#      directory of its own per input by default; the breakdown's window
#      runs from the first GPU activity to the last, copies included
set -u

VB=${1:?usage: test_nsys.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
FX=$SRC/tests/fixtures/nsys
fail() { echo "test_nsys: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
command -v python3 >/dev/null || fail "python3 is needed to check the CSVs"

TMP=$(mktemp -d /tmp/vb_nsys.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT

# check.py DIR 'python expression over ops (list of dicts), bd, tl' ...: each must be true
cat >"$TMP/check.py" <<'PY'
import csv, math, os, sys
d = sys.argv[1]
def rows(name):
    p = os.path.join(d, name)
    return list(csv.DictReader(open(p, newline=""))) if os.path.exists(p) else None
ops, bd, tl = rows("ops.csv"), rows("breakdown.csv"), rows("timeline.csv")
def op(name, rank="0"):
    m = [r for r in ops if r["name"] == name and r["rank"] == rank]
    assert len(m) == 1, f"{len(m)} rows for {name!r} rank {rank}: {ops}"
    return m[0]
def near(a, b, rel=1e-6):
    return abs(float(a) - b) <= rel * max(abs(b), 1e-30)
for expr in sys.argv[2:]:
    if not eval(expr):
        print(f"test_nsys: not true: {expr}\n  ops={ops}\n  breakdown={bd}", file=sys.stderr)
        sys.exit(1)
PY
check() { python3 "$TMP/check.py" "$@" || fail "checks on $1"; }

GEMM='void gemm_kernel<float, 128>(float const*, float*)'
AR='ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)'
AG='ncclDevKernel_AllGather_RING_LL(ncclDevComm*)'
FUSED='void fused_kernel<float, 4>(float*, int) "quoted"'

# ---- 1. summaries ----
# the old report with a byte order mark, CRLF line ends and a preamble line
printf '\xef\xbb\xbfUsing report.sqlite for SQL queries.\n' >"$TMP/old_sum.csv"
cat "$FX/cuda_gpu_kern_sum_old.csv" >>"$TMP/old_sum.csv"
sed -i 's/$/\r/' "$TMP/old_sum.csv"
out=$("$VB" nsys "$FX/cuda_gpu_kern_sum_new.csv" "$TMP/old_sum.csv" "$FX/nvtx_sum_new.csv" --output_dir "$TMP/sum" 2>&1) ||
    fail "summaries exited $?: $out"
[ ! -e "$TMP/sum/timeline.csv" ] || fail "summaries alone must not write a timeline"
check "$TMP/sum" \
    "list(ops[0].keys()) == 'rank,trial_type,name,category,calls,bytes,flops,total_s,avg_s,min_s,max_s,median_s,share_of_step,gflop_per_s,gb_per_s'.split(',')" \
    "len(ops) == 7" \
    "all(r['trial_type'] == 'nsys' and r['rank'] == '0' and r['flops'] == '0' and r['gflop_per_s'] == '' for r in ops)" \
    "op('$GEMM')['category'] == 'compute' and op('$GEMM')['calls'] == '3'" \
    "near(op('$GEMM')['total_s'], 6e-3) and near(op('$GEMM')['avg_s'], 2e-3) and near(op('$GEMM')['min_s'], 1e-3)" \
    "near(op('$GEMM')['max_s'], 3e-3) and near(op('$GEMM')['median_s'], 2e-3)" \
    "op('$AR')['category'] == 'comm' and op('NCCLKERNEL_Broadcast')['category'] == 'comm'" \
    "op('elementwise_kernel')['category'] == 'compute' and op('layernorm_kernel')['category'] == 'compute'" \
    "near(op('NCCLKERNEL_Broadcast')['total_s'], 3e-6) and op('NCCLKERNEL_Broadcast')['calls'] == '2'" \
    "near(op('layernorm_kernel')['avg_s'], 2.5e-7) and near(op('layernorm_kernel')['max_s'], 4e-7)" \
    "op('layernorm_kernel')['median_s'] == ''" \
    "near(op('$GEMM')['share_of_step'], 6e-3 / 10.004e-3)" \
    "op('step')['category'] == 'nvtx' and near(op('step')['total_s'], 7e-3) and op('step')['share_of_step'] == ''" \
    "op('forward')['calls'] == '2'"

# cuda_gpu_sum: memory operations by name
out=$("$VB" nsys "$FX/cuda_gpu_sum_new.csv" --output_dir "$TMP/gsum" 2>&1) || fail "cuda_gpu_sum exited $?: $out"
check "$TMP/gsum" "len(ops) == 3" \
    "op('[CUDA memcpy Host-to-Device]')['category'] == 'memcpy' and op('[CUDA memset]')['category'] == 'memcpy'" \
    "op('$GEMM')['category'] == 'compute' and near(op('$GEMM')['share_of_step'], 0.5)"

# ---- 2. traces of both generations: device 1 (us) and device 0 (ns) ----
cp "$FX/cuda_gpu_trace_old.csv" "$TMP/old_trace.csv"
sed -i 's/$/\r/' "$TMP/old_trace.csv"
out=$("$VB" nsys "$FX/cuda_gpu_trace_new_us.csv" "$TMP/old_trace.csv" --output_dir "$TMP/tr" 2>&1) ||
    fail "traces exited $?: $out"
grep -q "overlap" <<<"$out" || fail "no breakdown table on stdout: $out"
grep -q "gemm_kernel" <<<"$out" || fail "no top-kernel table on stdout: $out"
for rank in 0 1; do
    check "$TMP/tr" "len([r for r in ops if r['rank'] == '$rank']) == 7" \
        "op('$GEMM', '$rank')['calls'] == '2' and near(op('$GEMM', '$rank')['total_s'], 380e-6)" \
        "near(op('$GEMM', '$rank')['min_s'], 180e-6) and near(op('$GEMM', '$rank')['max_s'], 200e-6)" \
        "near(op('$GEMM', '$rank')['median_s'], 190e-6) and near(op('$GEMM', '$rank')['avg_s'], 190e-6)" \
        "near(op('$GEMM', '$rank')['share_of_step'], 380 / 840)" \
        "op('$AR', '$rank')['category'] == 'comm' and op('$AG', '$rank')['category'] == 'comm'" \
        "op('[CUDA memset]', '$rank')['category'] == 'memcpy' and op('$FUSED', '$rank')['category'] == 'compute'" \
        "[b for b in bd if b['rank'] == '$rank'][0]['steps'] == '1'" \
        "near([b for b in bd if b['rank'] == '$rank'][0]['step_s'], 750e-6)" \
        "near([b for b in bd if b['rank'] == '$rank'][0]['compute_s'], 430e-6)" \
        "near([b for b in bd if b['rank'] == '$rank'][0]['comm_s'], 300e-6)" \
        "near([b for b in bd if b['rank'] == '$rank'][0]['comm_hidden_s'], 100e-6)" \
        "near([b for b in bd if b['rank'] == '$rank'][0]['comm_exposed_s'], 200e-6)" \
        "near([b for b in bd if b['rank'] == '$rank'][0]['memcpy_s'], 60e-6)" \
        "near([b for b in bd if b['rank'] == '$rank'][0]['idle_s'], 60e-6)" \
        "near([b for b in bd if b['rank'] == '$rank'][0]['overlap_pct'], 100 / 3, 1e-5)" \
        "len([t for t in tl if t['rank'] == '$rank']) == 8"
done
# the old report's plain-byte column gives bytes and bandwidth; the new one's MB column is not guessed
check "$TMP/tr" "len(bd) == 2" "op('[CUDA memcpy HtoD]')['bytes'] == '1048576'" \
    "near(op('[CUDA memcpy HtoD]')['gb_per_s'], 1048576 / 50e-6 / 1e9)" \
    "op('[CUDA memcpy Host-to-Device]', '1')['bytes'] == '0' and op('[CUDA memcpy Host-to-Device]', '1')['gb_per_s'] == ''" \
    "set(t['lane'] for t in tl) == {'stream7', 'stream13', 'stream20'}" \
    "all(t['trial_type'] == 'nsys' and t['step'] == '-1' and t['bucket'] == '-1' for t in tl)" \
    "[(t['kind'], t['start_s'], t['dur_s']) for t in tl if t['rank'] == '1' and t['lane'] == 'stream20'] == [('comm', '0.000250000', '0.000200000'), ('comm', '0.000700000', '0.000100000')]" \
    "[t['lane'] for t in tl if t['rank'] == '0'][0] == 'stream7'"
# a device column without "(N)": digits of the product name ("HBM3") are no device id
sed 's/HBM3 (1)/HBM3/' "$FX/cuda_gpu_trace_new_us.csv" >"$TMP/noid.csv"
out=$("$VB" nsys "$TMP/noid.csv" --output_dir "$TMP/noid" 2>&1) || fail "device without id exited $?: $out"
check "$TMP/noid" "set(r['rank'] for r in ops) == {'0'}" "[b['rank'] for b in bd] == ['0']"
# the imported timeline is one `vitbench trace` reads
out=$("$VB" trace "$TMP/tr/timeline.csv" 2>&1) || fail "trace of an nsys timeline exited $?: $out"

# ---- 3. --filter_time on both generations ----
for spec in "new_us 200us/700us $FX/cuda_gpu_trace_new_us.csv 1" "old 200000/700000 $TMP/old_trace.csv 0" \
    "old_terms 0s200us/0s700000ns $TMP/old_trace.csv 0"; do
    set -- $spec
    out=$("$VB" nsys "$3" --filter_time "$2" --output_dir "$TMP/f_$1" 2>&1) || fail "filter $2 exited $?: $out"
    # inside [200, 700] us: gemm 400-580, nccl 250-450, fused 420-470, elementwise, memset;
    # window [250,660]; the nccl kernel now overlaps compute only in [400,450]
    check "$TMP/f_$1" "len(tl) == 5" "len(ops) == 5" \
        "op('$GEMM', '$4')['calls'] == '1' and near(op('$GEMM', '$4')['total_s'], 180e-6)" \
        "not [r for r in ops if r['name'] in ('$AG', '[CUDA memcpy HtoD]', '[CUDA memcpy Host-to-Device]')]" \
        "near(bd[0]['step_s'], 410e-6) and near(bd[0]['comm_hidden_s'], 50e-6) and near(bd[0]['comm_exposed_s'], 150e-6)"
done
out=$("$VB" nsys "$FX/cuda_gpu_trace_new_us.csv" --filter_time 1s/2s --output_dir "$TMP/f_none" 2>&1) ||
    fail "an empty window exited $?: $out"
grep -q "warning: no trace rows inside --filter_time" <<<"$out" || fail "empty window not warned: $out"

# ---- 4. a kernel in a trace and a summary counts once ----
out=$("$VB" nsys "$FX/cuda_gpu_kern_sum_new.csv" "$FX/cuda_gpu_trace_old.csv" --output_dir "$TMP/dup" 2>&1) ||
    fail "trace + summary exited $?: $out"
check "$TMP/dup" "len(ops) == 7" "op('$GEMM')['calls'] == '2'" "op('elementwise_kernel')['calls'] == '1'"

# ---- 5. bad input: exit 2, one line, naming the culprit ----
expect_input_error() { # needle args...
    local needle=$1 out rc
    shift
    out=$("$VB" "$@" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] || fail "'$*' exited $rc, want 2: $out"
    [ "$(wc -l <<<"$out")" = 1 ] || fail "'$*' printed more than one line: $out"
    grep -qF -- "$needle" <<<"$out" || fail "'$*' does not name '$needle': $out"
    grep -q "^vitbench: error: " <<<"$out" || fail "'$*' is not an error line: $out"
}
printf 'a,b,c\n1,2,3\n' >"$TMP/other.csv"
expect_input_error "$TMP/other.csv: not an \`nsys stats --format csv\` report" nsys "$TMP/other.csv" --output_dir "$TMP/x"
[ ! -e "$TMP/x/ops.csv" ] || fail "a rejected input wrote ops.csv"
expect_input_error "$TMP/other.csv" nsys "$FX/cuda_gpu_kern_sum_new.csv" "$TMP/other.csv" --output_dir "$TMP/x"
expect_input_error "$FX/cuda_gpu_kern_sum_new.csv: --filter_time needs a cuda_gpu_trace" \
    nsys "$FX/cuda_gpu_trace_old.csv" "$FX/cuda_gpu_kern_sum_new.csv" --filter_time 0/1s --output_dir "$TMP/x"
expect_input_error "--filter_time 'abc/def'" nsys "$FX/cuda_gpu_trace_old.csv" --filter_time abc/def
expect_input_error "--filter_time '5s'" nsys "$FX/cuda_gpu_trace_old.csv" --filter_time 5s
expect_input_error "--filter_time '2s/1s': END must be after START" nsys "$FX/cuda_gpu_trace_old.csv" --filter_time 2s/1s
expect_input_error "--filter_time expects a value" nsys "$FX/cuda_gpu_trace_old.csv" --filter_time
expect_input_error "unknown flag --bogus" nsys "$FX/cuda_gpu_trace_old.csv" --bogus
# every flag alike: an unknown one (either form, among the FILEs) or a missing value names the flag
expect_input_error "--bogus" nsys "$FX/cuda_gpu_trace_old.csv" --bogus=1 "$FX/cuda_gpu_kern_sum_new.csv"
expect_input_error "-x" nsys -x "$FX/cuda_gpu_trace_old.csv"
expect_input_error "--output_dir" nsys "$FX/cuda_gpu_trace_old.csv" --output_dir
# --help (and -h) exits 0 and lists every flag with its meaning
help=$("$VB" nsys --help) || fail "nsys --help exited $?"
[ "$("$VB" nsys -h)" = "$help" ] || fail "nsys -h differs from --help"
for f in --filter_time --output_dir; do
    grep -qE -- "^  $f( [^ ]+)?  +[^ ]" <<<"$help" || fail "nsys --help does not list $f with its meaning: $help"
done
expect_input_error "no FILE" nsys
expect_input_error "$TMP/missing.csv: no such file" nsys "$TMP/missing.csv"
sed 's/^Time (%),Total Time (ns)/Time (%),Total Time (fortnights)/' "$FX/cuda_gpu_kern_sum_new.csv" >"$TMP/unit.csv"
expect_input_error "$TMP/unit.csv: column 'Total Time (fortnights)': unknown time unit" nsys "$TMP/unit.csv"
sed 's/^250.000,200.000/250.000,soon/' "$FX/cuda_gpu_trace_new_us.csv" >"$TMP/badnum.csv"
expect_input_error "$TMP/badnum.csv: record 5: column 'Duration (us)'" nsys "$TMP/badnum.csv" --output_dir "$TMP/x"
expect_input_error "$TMP/old_trace.csv: device 0 is also in" \
    nsys "$FX/cuda_gpu_trace_old.csv" "$TMP/old_trace.csv" --output_dir "$TMP/x"
mkdir -p "$TMP/run" && echo '{}' >"$TMP/run/run.json"
expect_input_error "--output_dir $TMP/run holds a vitbench run" nsys "$FX/cuda_gpu_trace_old.csv" --output_dir "$TMP/run"
[ ! -e "$TMP/run/ops.csv" ] || fail "ops.csv written into a run directory"

# ---- 6. real reports (tests/fixtures/nsys/real: README.md has where each comes from) ----
RX=$FX/real
API=$RX/nsys-05-cufft_cuda_api_sum.csv
KERN=$RX/nsys-05-cufft_cuda_gpu_kern_sum.csv
MEMT=$RX/nsys-05-cufft_cuda_gpu_mem_time_sum.csv
C2R='void vector_fft_c2r<(unsigned int)4096, EPT<(unsigned int)16>, (unsigned int)1, (unsigned int)5, (padding_t)70, (twiddle_t)0, (loadstore_modifier_t)2, (layout_t)0, unsigned int, float>(kernel_arguments_t<T9>)'
# a kernel summary alone: shares are nsys's own Time (%)
out=$("$VB" nsys "$KERN" --output_dir "$TMP/rk" 2>&1) || fail "real cuda_gpu_kern_sum exited $?: $out"
check "$TMP/rk" "len(ops) == 4" "near(op('''$C2R''')['share_of_step'], 0.369, 2e-3)" \
    "near(op('scaleBy')['share_of_step'], 0.149, 4e-3)"
# cuda_api_sum is host time: its own category and table, never GPU activity,
# and the kernels' and copies' shares are of GPU time only
out=$("$VB" nsys "$KERN" "$API" "$MEMT" --output_dir "$TMP/ra" 2>&1) || fail "real api + kern + mem_time exited $?: $out"
grep -q "nsys-05-cufft_cuda_api_sum.csv: api_sum (host API calls" <<<"$out" || fail "api_sum not named: $out"
grep -q "nsys-05-cufft_cuda_gpu_mem_time_sum.csv: cuda_gpu_mem_time_sum, 2 rows" <<<"$out" ||
    fail "cuda_gpu_mem_time_sum not named: $out"
grep -q "^top host API calls" <<<"$out" || fail "no host API table: $out"
sed -n '/^top GPU activities/,/^$/p' <<<"$out" | grep -q "cu[A-Z]" && fail "a host API call in the GPU table: $out"
check "$TMP/ra" "len(ops) == 29" \
    "sorted(r['name'] for r in ops if r['category'] == 'api')[:3] == ['cuCtxCreate_v2', 'cuCtxSetCurrent', 'cuCtxSynchronize']" \
    "len([r for r in ops if r['category'] == 'api']) == 23 and all(r['share_of_step'] == '' for r in ops if r['category'] == 'api')" \
    "op('cuMemHostRegister_v2')['category'] == 'api' and op('cuStreamSynchronize')['calls'] == '60'" \
    "near(op('cuCtxCreate_v2')['total_s'], 96804336e-9)" \
    "near(sum(float(r['share_of_step']) for r in ops if r['category'] != 'api'), 1.0)" \
    "near(op('''$C2R''')['share_of_step'], 60895 / (60895 + 57983 + 24575 + 21727 + 609143 + 27425))" \
    "op('[CUDA memcpy Host-to-Device]')['category'] == 'memcpy' and op('[CUDA memcpy Host-to-Device]')['calls'] == '63'"
# a capture of nsys's standard output (its notice before the report, blank lines after)
out=$("$VB" nsys "$RX/13-cudnn-nsys-memsum.csv" --output_dir "$TMP/rm" 2>&1) || fail "real captured memsum exited $?: $out"
grep -q "13-cudnn-nsys-memsum.csv: cuda_gpu_mem_time_sum, 3 rows" <<<"$out" || fail "captured memsum: $out"
check "$TMP/rm" "len(ops) == 3" "op('[CUDA memset]')['category'] == 'memcpy' and op('[CUDA memset]')['calls'] == '4'" \
    "near(op('[CUDA memcpy Device-to-Host]')['median_s'], 832e-9)"
# several reports in one capture (`nsys stats -r cuda_gpu_kern_sum,cuda_api_sum
# --format csv > f.csv`): the two real reports, each after the line nsys
# prints before it, ended by a blank line
cap() { # report... : a capture of these reports
    echo "Generating SQLite file /tmp/nsys-05-cufft.sqlite from /tmp/nsys-05-cufft.nsys-rep"
    for f in "$@"; do
        echo "Processing [/tmp/nsys-05-cufft.sqlite] with [/opt/nvidia/nsight-systems/2024.5.1/host-linux-x64/reports/$(basename "$f" .csv | sed 's/^nsys-05-cufft_//').py]... "
        cat "$f"
        echo
    done
}
cap "$KERN" "$API" >"$TMP/capture.csv"
out=$("$VB" nsys "$TMP/capture.csv" --output_dir "$TMP/rc" 2>&1) || fail "a two-report capture exited $?: $out"
grep -q "capture.csv (report 1 of 2, cuda_gpu_kern_sum, header at line 3): cuda_gpu_kern_sum, 4 rows" <<<"$out" ||
    fail "capture's first report: $out"
grep -q "capture.csv (report 2 of 2, api_sum, header at line 10): api_sum (host API calls" <<<"$out" ||
    fail "capture's second report: $out"
check "$TMP/rc" "len(ops) == 27" "near(op('''$C2R''')['share_of_step'], 0.369, 2e-3)" \
    "op('cuLaunchKernel')['category'] == 'api' and op('cuLaunchKernel')['calls'] == '80'"
# the same with CRLF line ends: blank lines are still blank
sed 's/$/\r/' "$TMP/capture.csv" >"$TMP/capture_crlf.csv"
"$VB" nsys "$TMP/capture_crlf.csv" --output_dir "$TMP/rc2" >/dev/null 2>&1 || fail "a CRLF capture"
check "$TMP/rc2" "len(ops) == 27"
# a broken number inside the second report names it and its line
sed '11s/^96.5,96804336,1,/96.5,96804336,x,/' "$TMP/capture.csv" >"$TMP/capture_bad.csv"
grep -q '^96.5,96804336,x,' "$TMP/capture_bad.csv" || fail "capture_bad.csv: line 11 is not cuCtxCreate_v2's"
expect_input_error "capture_bad.csv (report 2 of 2, api_sum, header at line 10): record 11: column 'Num Calls'" \
    nsys "$TMP/capture_bad.csv" --output_dir "$TMP/x"
# by default each input gets a directory of its own: importing two reports of
# one folder in two commands keeps both
mkdir -p "$TMP/folder"
cp "$KERN" "$API" "$TMP/folder/"
(cd "$TMP/folder" && "$VB" nsys nsys-05-cufft_cuda_gpu_kern_sum.csv >/dev/null 2>&1 &&
    "$VB" nsys nsys-05-cufft_cuda_api_sum.csv >/dev/null 2>&1) || fail "imports without --output_dir"
check "$TMP/folder/nsys-05-cufft_cuda_gpu_kern_sum_vitbench" "len(ops) == 4" "op('scaleBy')['category'] == 'compute'"
check "$TMP/folder/nsys-05-cufft_cuda_api_sum_vitbench" "len(ops) == 23" "all(r['category'] == 'api' for r in ops)"
[ ! -e "$TMP/folder/ops.csv" ] || fail "an import wrote into the input's own folder"
# a real trace on six streams, copies first and last: the breakdown's window
# runs from the first activity to the last, copies included, and says so
TRC=$RX/nsys-concurrent_cuda_gpu_trace.csv
out=$("$VB" nsys "$TRC" --output_dir "$TMP/rt" 2>&1) || fail "real trace exited $?: $out"
grep -q "first GPU activity start to last end, kernels, copies and memsets alike" <<<"$out" ||
    fail "breakdown window label: $out"
grep -q "first kernel start to last kernel end" <<<"$out" && fail "the old, wrong window label: $out"
check "$TMP/rt" "len(tl) == 328" "set(t['lane'] for t in tl) == {'stream15', 'stream16', 'stream17', 'stream18', 'stream19', 'stream20'}" \
    "near(bd[0]['step_s'], (880252445 + 6272 - 733675553) * 1e-9)" \
    "op('computeSmall')['calls'] == '64' and op('[CUDA memcpy Host-to-Device]')['calls'] == '200'" \
    "op('[CUDA memcpy Host-to-Device]')['bytes'] == '0'"

# ---- 7. NUL bytes, and memory that does not grow with the file ----
# a NUL in a field (a Duration of 5<NUL>0 would read as 5) or a record of
# them (read as a blank line) is a damaged file: exit 2 naming the record
python3 - "$FX/cuda_gpu_trace_new_us.csv" "$TMP" <<'EOF2' || fail "NUL fixtures"
import sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
cut = lines[4].split(b",")
cut[1] = cut[1][:1] + b"\0" + cut[1][1:]
open(sys.argv[2] + "/nul_field.csv", "wb").write(b"\n".join(lines[:4] + [b",".join(cut)] + lines[5:]))
open(sys.argv[2] + "/nul_record.csv", "wb").write(b"\n".join(lines[:3] + [b"\0" * 12] + lines[3:]))
EOF2
expect_input_error "$TMP/nul_field.csv: record 5: a NUL byte" nsys "$TMP/nul_field.csv" --output_dir "$TMP/x"
expect_input_error "$TMP/nul_record.csv: record 4: a NUL byte" nsys "$TMP/nul_record.csv" --output_dir "$TMP/x"
# a 200000-row trace (28 MB): its import's peak memory above a 1000-row
# one's stays under a third of the file (the rows' numbers, not their text:
# reading it whole into cells took 13 times the file)
python3 - "$TMP/big.csv" <<'EOF2' || fail "big trace"
import sys
names = ["void gemm_kernel<float, %d>(float const*, float*)" % i for i in range(40)] + ["[CUDA memcpy Host-to-Device]"]
with open(sys.argv[1], "w") as f:
    f.write("Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),DymSMem (MB),"
            "Bytes (MB),Throughput (MBps),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,Strm,Name\n")
    t = 1000000
    for i in range(200000):
        d = 1000 + (i * 7919) % 49000
        f.write('%d,%d,%d,128,1,1,256,1,1,64,0.000,0.000,,,,,NVIDIA H100 80GB HBM3 (0),1,,%d,"%s"\n'
                % (t, d, i, 7 + i % 3, names[i % len(names)]))
        t += d + 100
EOF2
head -1001 "$TMP/big.csv" >"$TMP/small.csv"
peak=$(python3 - "$VB" "$TMP" <<'EOF2'
import os, subprocess, sys
vb, tmp = sys.argv[1], sys.argv[2]
rss = []
for name in ("small", "big"):
    p = subprocess.Popen([vb, "nsys", "%s/%s.csv" % (tmp, name), "--output_dir", "%s/mem_%s" % (tmp, name)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, st, ru = os.wait4(p.pid, 0)
    if st != 0:
        sys.exit("import of %s.csv exited %d" % (name, st))
    rss.append(ru.ru_maxrss * 1024)
print(rss[1] - rss[0], os.path.getsize("%s/big.csv" % tmp))
EOF2
) || fail "memory of the import: $peak"
read -r grew size <<<"$peak"
# not under AddressSanitizer: its allocator keeps freed blocks (quarantine)
# and never reuses a smaller size class for a grown array, so the peak there
# measures the allocator; the release build's suite holds the bound
if grep -q __asan_init "$VB"; then
    echo "test_nsys: peak memory bound skipped ($VB is built with AddressSanitizer)"
else
    [ "$grew" -lt $((size / 3)) ] || fail "importing a $size-byte trace took $grew bytes more than a 1000-row one"
fi
check "$TMP/mem_big" "len(tl) == 200000" "op('[CUDA memcpy Host-to-Device]')['calls'] == str(200000 // 41 + (1 if 200000 % 41 > 40 else 0))"

echo "test_nsys: ok"
