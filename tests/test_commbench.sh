#!/usr/bin/env bash
# test_commbench.sh <vitbench>: `vitbench commbench` end to end under mpirun.
#
# 1. tp 2 x dp 2 on 4 ranks, float32, all four collectives, default groups:
#    the CSV header exactly; rows for tp (2 ranks, 2 groups), dp (2, 2) and
#    world (4, 1) and none for cp (size 1, a note instead); a row per rank
#    for every (collective, group, size) in the documented order; every
#    row's wrong is 0, size_bytes = count x 4, allgather / reduce_scatter
#    counts a multiple of the group size, busbw / algbw nccl-tests' factor;
#    the table's blocks end "Out of bounds values : 0 OK"; commbench.json
#    holds the layout, plane, backend, hosts and commit.
# 2. bfloat16 with --groups cpdp,dp,world --parallel_order dp-tp-cp: exact
#    check passes, group_size / ngroups / group_rank follow the order.
# 3. --check false: every wrong is -1 and the table says N/A.
# 4. One rank without mpirun: every group has one rank, so nothing is
#    measured: exit 0, a note, a CSV with the header only.
# 5. --beside_gemm 48 on 2 ranks: every row's GEMM columns filled, the
#    slowdown their ratio less one, the table's extra columns, and the
#    summary's count and median those of the sizes that lasted a GEMM.
# 6. Bad input exits 2 with exactly one error line and no run directory; an
#    existing run name is never overwritten.
# The check itself (that wrong results are counted) is unit-tested in
# test_commbench.c, where wrong results can be made on purpose.
set -u

VB=${1:?usage: test_commbench.sh <path-to-vitbench>}
TIMEOUT=${VB_MPI_TIMEOUT:-120}

fail() { echo "test_commbench: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(cd "$(dirname "$VB")" && pwd)/$(basename "$VB")
command -v mpirun > /dev/null || fail "mpirun not found"

TMP=$(mktemp -d /tmp/vb_commbench.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(timeout -k 10 "$TIMEOUT" mpirun --oversubscribe --mca mpi_yield_when_idle 1)
SMALL=(--maxbytes 64K --iters 3 --warmup_iters 1 --output_dir "$TMP/out")
HEADER='collective,plane,group,group_size,ngroups,dtype,size_bytes,count,warmup_iters,iters,rank,group_rank,time_us,algbw_GBps,busbw_GBps,wrong,gemm_n,gemm_us,gemm_beside_us,gemm_slowdown'

# check_rows CSV DTYPE_BYTES WORLD: the per-row invariants of every CSV
check_rows() {
    local csv=$1 es=$2 world=$3 gemm=${4:-0}
    [ "$(head -n 1 "$csv")" = "$HEADER" ] || fail "$csv: header is '$(head -n 1 "$csv")'"
    awk -F, -v es="$es" -v world="$world" -v gemm="$gemm" '
        NR == 1 { next }
        NF != 20 { print "line " NR ": " NF " fields"; bad = 1; next }
        {
            coll = $1; n = $4; alg = $14; bus = $15
            if ($5 * n != world) { print "line " NR ": ngroups " $5 " x group_size " n " != " world; bad = 1 }
            if ($7 != $8 * es) { print "line " NR ": size_bytes " $7 " != count " $8 " x " es; bad = 1 }
            if ((coll == "allgather" || coll == "reduce_scatter") && $8 % n != 0) {
                print "line " NR ": count " $8 " not a multiple of " n; bad = 1 }
            if ($12 < 0 || $12 >= n) { print "line " NR ": group_rank " $12 " outside " n; bad = 1 }
            if ($13 <= 0) { print "line " NR ": time_us " $13; bad = 1 }
            f = coll == "allreduce" ? 2 * (n - 1) / n : coll == "broadcast" ? 1 : (n - 1) / n
            want = alg * f; d = bus - want; if (d < 0) d = -d
            if (d > 1e-5 * want + 1e-12) { print "line " NR ": busbw " bus " != " f " x algbw " alg; bad = 1 }
            # the check must run: -1 only with --check false (tested apart)
            if ($16 != 0) { print "line " NR ": wrong = " $16; bad = 1 }
            # the GEMM columns are empty unless --beside_gemm asks for them
            if (!gemm && ($17 != "" || $18 != "" || $19 != "" || $20 != "")) {
                print "line " NR ": GEMM columns without --beside_gemm"; bad = 1 }
            # rows grouped by (collective, group, size), one per rank in order
            key = coll "," $3 "," $7
            if (key != prev) { if (prev != "" && nr != world) { print "block " prev ": " nr " rows"; bad = 1 } nr = 0; prev = key }
            if ($11 != nr) { print "line " NR ": rank " $11 ", expected " nr; bad = 1 }
            nr++
        }
        END { if (nr != world) { print "last block: " nr " rows"; bad = 1 } exit bad }' "$csv" >&2 \
        || fail "$csv: row invariants (above)"
}

# ---- 1. tp 2 x dp 2, float32, defaults ----
"${MPIRUN[@]}" -np 4 "$VB" commbench --tensor_parallel 2 "${SMALL[@]}" --run_name fp32 > fp32.txt 2> fp32.err
rc=$?
[ $rc -eq 0 ] || { cat fp32.txt fp32.err >&2; fail "tp2 x dp2 run exited $rc"; }
CSV=out/fp32/commbench.csv
[ -f "$CSV" ] || fail "no $CSV"
check_rows "$CSV" 4 4
# groups, sizes and ngroups for tp 2 x dp 2 on 4 ranks, in the given order
got=$(awk -F, 'NR > 1 { print $1, $3, $4, $5 }' "$CSV" | uniq | tr '\n' ';')
want=""
for c in allreduce allgather reduce_scatter broadcast; do
    want="${want}$c tp 2 2;$c dp 2 2;$c world 4 1;"
done
[ "$got" = "$want" ] || fail "collectives / groups: got '$got', want '$want'"
# sizes: 8 B .. 64 KiB by 2, except where a rank's share is no whole element
# (allgather / reduce_scatter on 4 ranks: 8 B is 2 floats)
for g in tp world; do
    n=$(awk -F, -v g=$g 'NR > 1 && $1 == "allreduce" && $3 == g && $11 == 0' "$CSV" | wc -l)
    [ "$n" -eq 14 ] || fail "allreduce $g: $n sizes, want 14 (8 B to 64 KiB)"
done
n=$(awk -F, 'NR > 1 && $1 == "allgather" && $3 == "world" && $11 == 0' "$CSV" | wc -l)
[ "$n" -eq 13 ] || fail "allgather world: $n sizes, want 13 (8 B skipped on 4 ranks)"
awk -F, 'NR > 1 && $3 == "cp"' "$CSV" | grep -q . && fail "rows for cp, a group of one rank"
grep -q '^# group cp: 1 rank, skipped' fp32.txt || fail "no note for the skipped cp group"
# tp groups are neighbours in tp-cp-dp: ranks 0,1 and 2,3
gr=$(awk -F, 'NR > 1 && $1 == "allreduce" && $3 == "tp" && $7 == 8 { printf "%s ", $12 }' "$CSV")
[ "$gr" = "0 1 0 1 " ] || fail "tp group ranks '$gr', want '0 1 0 1 '"
gr=$(awk -F, 'NR > 1 && $1 == "allreduce" && $3 == "dp" && $7 == 8 { printf "%s ", $12 }' "$CSV")
[ "$gr" = "0 0 1 1 " ] || fail "dp group ranks '$gr', want '0 0 1 1 '"
# the table
[ "$(grep -c '^# commbench ' fp32.txt)" -eq 12 ] || fail "table: want 12 blocks"
[ "$(grep -c '^# Out of bounds values : 0 OK' fp32.txt)" -eq 12 ] || fail "table: a block without 0 OK"
grep -q '^# commbench allreduce  group dp (2 ranks, 2 groups)  plane mpi  float32  warmup 1  iters 3$' fp32.txt \
    || fail "table: no dp block header"
grep -Eq '^ +8 +2 +float +sum +-1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0$' fp32.txt || fail "table: no 8-byte allreduce row"
grep -Eq '^ +65536 +16384 +float +none +0 +' fp32.txt || fail "table: no 64 KiB broadcast row (root 0)"
python3 - out/fp32/commbench.json << 'EOF' || fail "commbench.json (above)"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["world_size"] == 4, j["world_size"]
assert j["layout"] == {"tensor_parallel": 2, "context_parallel": 1, "data_parallel": 2,
                       "parallel_order": "tp-cp-dp"}, j["layout"]
assert j["plane"] == "mpi" and j["backend"] == "cpu" and j["datatype"] == "float32"
assert len(j["hosts"]) == 4 and all(j["hosts"]), j["hosts"]
assert j["git_commit"] and j["mpi_version"] and "commbench" in j["command_line"]
assert j["wrong"] == 0 and j["groups_skipped_size_1"] == ["cp"]
assert [g["group"] for g in j["groups"]] == ["tp", "dp", "world"]
assert j["beside_gemm"] is None, j["beside_gemm"]
EOF
echo "test_commbench: tp 2 x dp 2 float32: OK"

# ---- 2. bfloat16, explicit groups, another order ----
"${MPIRUN[@]}" -np 4 "$VB" commbench --tensor_parallel 2 --parallel_order dp-tp-cp --groups cpdp,dp,world \
    --collectives reduce_scatter,allreduce --datatype bfloat16 "${SMALL[@]}" --run_name bf16 > bf16.txt 2> bf16.err
rc=$?
[ $rc -eq 0 ] || { cat bf16.txt bf16.err >&2; fail "bfloat16 run exited $rc"; }
check_rows out/bf16/commbench.csv 2 4
got=$(awk -F, 'NR > 1 { print $1, $3, $4, $5, $6 }' out/bf16/commbench.csv | uniq | tr '\n' ';')
want="reduce_scatter cpdp 2 2 bfloat16;reduce_scatter dp 2 2 bfloat16;reduce_scatter world 4 1 bfloat16;"
want="${want}allreduce cpdp 2 2 bfloat16;allreduce dp 2 2 bfloat16;allreduce world 4 1 bfloat16;"
[ "$got" = "$want" ] || fail "bfloat16: got '$got', want '$want'"
# dp first in the order: dp neighbours are ranks 0,1
gr=$(awk -F, 'NR > 1 && $1 == "allreduce" && $3 == "dp" && $7 == 8 { printf "%s ", $12 }' out/bf16/commbench.csv)
[ "$gr" = "0 1 0 1 " ] || fail "dp-tp-cp: dp group ranks '$gr', want '0 1 0 1 '"
echo "test_commbench: bfloat16, explicit groups: OK"

# ---- 3. --check false ----
"${MPIRUN[@]}" -np 2 "$VB" commbench --check false --collectives allgather "${SMALL[@]}" --run_name nocheck \
    > nocheck.txt 2>&1 || { cat nocheck.txt >&2; fail "--check false run failed"; }
awk -F, 'NR > 1 && $16 != -1 { bad = 1 } END { exit bad }' out/nocheck/commbench.csv || fail "--check false: wrong not -1"
[ "$(awk 'END { print NR }' out/nocheck/commbench.csv)" -gt 1 ] || fail "--check false: no rows"
grep -Eq ' N/A$' nocheck.txt || fail "--check false: table has no N/A"
grep -q '^# Out of bounds values : N/A' nocheck.txt || fail "--check false: footer claims a checked result"
echo "test_commbench: --check false: OK"

# ---- 4. one rank, no mpirun ----
timeout -k 10 "$TIMEOUT" "$VB" commbench "${SMALL[@]}" --run_name single > single.txt 2>&1
rc=$?
[ $rc -eq 0 ] || { cat single.txt >&2; fail "single rank exited $rc"; }
grep -q '^# nothing to measure' single.txt || fail "single rank: no 'nothing to measure' note"
grep -q '^# group world: 1 rank, skipped' single.txt || fail "single rank: world not noted as skipped"
[ "$(cat out/single/commbench.csv)" = "$HEADER" ] || fail "single rank: CSV is not the header alone"
# the same name again: a new directory, the old one untouched
timeout -k 10 "$TIMEOUT" "$VB" commbench "${SMALL[@]}" --run_name single > single2.txt 2>&1 || fail "second single run"
[ -f out/single-1/commbench.csv ] || fail "an existing run name was not kept apart (no out/single-1)"
echo "test_commbench: single rank: OK"

# ---- 5. --beside_gemm: a GEMM alone and beside each collective ----
"${MPIRUN[@]}" -np 2 "$VB" commbench --collectives allreduce,allgather --minbytes 64K --maxbytes 1M \
    --stepfactor 4 --iters 2 --warmup_iters 1 --beside_gemm 48 --output_dir "$TMP/out" --run_name beside \
    > beside.txt 2> beside.err || { cat beside.txt beside.err >&2; fail "--beside_gemm run failed"; }
CSV=out/beside/commbench.csv
check_rows "$CSV" 4 2 1
# every row: N, both times positive, the slowdown their ratio less one
awk -F, 'NR > 1 {
        if ($17 != 48 || $18 <= 0 || $19 <= 0) { print "line " NR ": gemm_n " $17 ", gemm_us " $18 ", beside " $19; bad = 1 }
        d = $20 - ($19 / $18 - 1); if (d < 0) d = -d
        if (d > 1e-4 * ($19 / $18) + 1e-6) { print "line " NR ": slowdown " $20 " != " $19 " / " $18 " - 1"; bad = 1 }
    } END { exit bad }' "$CSV" >&2 || fail "--beside_gemm: GEMM columns (above)"
grep -q '^#       size .*  #wrong     gemm   beside  slowdown$' beside.txt || fail "--beside_gemm: no GEMM columns in the table"
grep -q '^# beside_gemm 48: a 48x48x48 float GEMM takes ' beside.txt || fail "--beside_gemm: no header line"
# the summary counts the sizes whose collective lasted a GEMM or more (both
# means over the ranks), and its median is theirs
python3 - "$CSV" out/beside/commbench.json beside.txt << 'EOF' || fail "--beside_gemm: summary (above)"
import csv, json, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
sizes = {}
for r in rows:
    sizes.setdefault((r["collective"], r["group"], r["size_bytes"]), []).append(r)
slow = []
for rs in sizes.values():
    t = sum(float(r["time_us"]) for r in rs) / len(rs)
    g = sum(float(r["gemm_us"]) for r in rs) / len(rs)
    b = sum(float(r["gemm_beside_us"]) for r in rs) / len(rs)
    if t >= g:
        slow.append(b / g - 1)
bg = json.load(open(sys.argv[2]))["beside_gemm"]
assert bg["n"] == 48, bg
# the CSV keeps times to 3 decimals: a mean at the boundary may fall either way
assert abs(bg["sizes_counted"] - len(slow)) <= 1, (bg, len(slow))
text = open(sys.argv[3]).read()
if bg["sizes_counted"] == 0:
    assert bg["median_slowdown"] is None and "no size lasted one GEMM" in text, bg
else:
    if bg["sizes_counted"] == len(slow):
        assert abs(bg["median_slowdown"] - statistics.median(slow)) < 1e-3, (bg, statistics.median(slow))
    assert "# GEMM beside the collectives: median slowdown" in text
EOF
echo "test_commbench: --beside_gemm: OK"

# ---- 6. bad input: exit 2, one line, no run directory ----
bad() {
    local want=$1
    shift
    "${MPIRUN[@]}" -np 4 "$VB" commbench "$@" --output_dir "$TMP/bad" > bad.txt 2> bad.err
    local rc=$?
    [ $rc -eq 2 ] || { cat bad.txt bad.err >&2; fail "$*: exit $rc, want 2"; }
    # one line from rank 0, none from the other ranks (mpirun adds its own notice)
    [ "$(grep -c 'vitbench: error' bad.err)" -eq 1 ] || { cat bad.err >&2; fail "$*: not exactly one error line"; }
    grep -Eq -- "$want" bad.err || { cat bad.err >&2; fail "$*: error does not say '$want'"; }
    [ ! -e "$TMP/bad" ] || fail "$*: created the output directory"
}
bad "unknown collective 'alltoall'" --collectives allreduce,alltoall
bad "minbytes 1024 is larger than --maxbytes 8" --minbytes 1K --maxbytes 8
bad "tensor_parallel 3" --tensor_parallel 3
bad "comm_backend gloo: unknown data plane" --comm_backend gloo
bad "datatype expects one of" --datatype float64
bad "unknown group 'pp'" --groups tp,pp
bad "minbytes expects a size" --minbytes 8X
bad "beside_gemm" --beside_gemm -1
bad "run_name .a/b.: must be a plain name" --run_name a/b
# without NCCL in the build: "not in this build"; with it, CPU buffers are refused
bad "comm_backend nccl(: not in this build| needs device buffers)" --comm_backend nccl
echo "test_commbench: bad input: OK"
echo "test_commbench: OK"
