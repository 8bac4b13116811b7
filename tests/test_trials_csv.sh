#!/usr/bin/env bash
# test_trials_csv.sh <vitbench>: report and compare read trials.csv through
# one reader (analysis/trials_csv.h) and refuse the same files, with exit 2
# and one line naming the file and the record:
#   1. the last record cut mid-number (no line end)
#   2. the seconds and samples_per_s header names swapped
#   3. the two columns' values swapped under the right header: seconds is not
#      the sum of the trial's steps in iterations.csv
#   4. a row whose run_id is another run's
#   5. one trial's row twice
#   6. samples_per_s that is not nbatches x global_batch / seconds
#   7. load.csv, read as strictly: a row of another run, a share outside
#      [0, 1] (a share of -3 once printed "-300% of thread time lost"), a
#      count that is not whole, a trial twice, the last record cut
# and both read the intact files.
set -u

VB=${1:?usage: test_trials_csv.sh <path-to-vitbench>}
fail() { echo "test_trials_csv: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_trials_csv.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

# mkrun DIR: a run with 6 timed trials per type, rank 0 and 1, its steps in
# iterations.csv (4 batches of 8 samples a trial)
mkrun() {
    python3 - "$1" <<'EOF' || fail "fixture $1"
import json, os, sys
d = sys.argv[1]
os.makedirs(d)
rid = os.path.basename(d)
json.dump({"run_id": rid, "status": "completed", "backend": "cpu", "ranks": 2,
           "config": {"config": "tiny"}, "fingerprint": {"machine_key": "00000000000000aa"}},
          open(d + "/run.json", "w"))
trials = ["run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s"]
load = ["run_id,trial_type,trial_index,warmup,rank,seconds,online_cpus,loadavg_before,loadavg_after,steal_share,"
        "cpu_wait_share,nivcsw"]
steps = ["trial,trial_type,trial_index,warmup,step,rank,seconds,data_wait_s,allreduce_calls,allreduce_bytes,"
         "comm_exposed_s"]
for typ, base in (("IO", 5000.0), ("SYNTHETIC", 160.0), ("FULL", 154.0)):
    for i in range(-1, 6):  # -1: the warm-up
        warm, idx = (1, 0) if i < 0 else (0, i)
        for rank in (0, 1):
            secs = [32 / base / 4 * (1 + 0.01 * (i + 1) + 0.001 * k + 0.002 * rank) for k in range(4)]
            total = sum(secs)
            trials.append("%s,%s,%d,%d,4,8,2,%d,%.9g,%.9g" % (rid, typ, idx, warm, rank, total, 32 / total))
            load.append("%s,%s,%d,%d,%d,%.9g,2,0.5,0.6,0,0.01,%d" % (rid, typ, idx, warm, rank, total, 3 + rank))
            for k, s in enumerate(secs):
                steps.append("%s_%d,%s,%d,%d,%d,%d,%.9g,0,0,0,0" % (typ, idx, typ, idx, warm, k, rank, s))
open(d + "/trials.csv", "w").write("\n".join(trials) + "\n")
open(d + "/iterations.csv", "w").write("\n".join(steps) + "\n")
open(d + "/load.csv", "w").write("\n".join(load) + "\n")
EOF
}

# refused NEEDLE DIR [FILE]: report DIR and compare base DIR both exit 2 naming
# NEEDLE in DIR/FILE (trials.csv)
refused() {
    local needle=$1 dir=$2 file=${3:-trials.csv} out rc
    out=$("$VB" report "$dir" --no_plots 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] || fail "report $dir exited $rc, want 2: $out"
    [ "$(wc -l <<<"$out")" = 1 ] || fail "report $dir printed more than one line: $out"
    grep -q "^vitbench: error: report: $dir/$file: .*$needle" <<<"$out" || fail "report $dir: want '$needle': $out"
    out=$("$VB" compare base "$dir" --metric FULL 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] || fail "compare base $dir exited $rc, want 2: $out"
    grep -q "^vitbench: error: compare: $dir/$file: .*$needle" <<<"$out" || fail "compare $dir: want '$needle': $out"
}

mkrun base
mkrun same
"$VB" report same --no_plots >/dev/null 2>&1 || fail "report of an intact run"
# one run a side is inconclusive (exit 5): what counts is that intact files are read, not refused
"$VB" compare base same --metric FULL >/dev/null 2>&1
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 5 ] || fail "compare of intact runs exited $rc"
grep -q "^FULL,6,148.6" same/report/throughput.csv || fail "report's FULL mean: $(cat same/report/throughput.csv)"

# 1. cut mid-number: "...,154.46" becomes "...,15", a number that still parses
mkrun cut
head -c -5 cut/trials.csv >cut/t && mv cut/t cut/trials.csv
refused "record 43 has no line end" cut

# 2. the two header names swapped: the product check alone is symmetric under it
mkrun hswap
sed -i '1s/seconds,samples_per_s$/samples_per_s,seconds/' hswap/trials.csv
refused "column 9 is 'samples_per_s', where the schema has 'seconds'" hswap

# 3. the values swapped in every row, the header intact
mkrun vswap
awk -F, -v OFS=, 'NR > 1 { t = $9; $9 = $10; $10 = t } 1' vswap/trials.csv >vswap/t && mv vswap/t vswap/trials.csv
refused "record 2: seconds .* is not the 4 steps'" vswap

# 4. a row of another run
mkrun other
sed -i '30s/^other,/elsewhere,/' other/trials.csv
refused "record 30: run_id 'elsewhere' is not this run's ('other', its run.json)" other

# 5. a trial twice
mkrun dup
sed -n '40p' dup/trials.csv >>dup/trials.csv
refused "record 44 repeats record 40" dup

# 6. a rate its own row does not give
mkrun edited
sed -i '40s/,[^,]*$/,999/' edited/trials.csv
refused "record 40: samples_per_s 999 is not nbatches x global_batch / seconds" edited
# 7. load.csv
mkrun lother
sed -i '30s/^lother,/elsewhere,/' lother/load.csv
refused "record 30: run_id 'elsewhere' is not this run's ('lother', its run.json)" lother load.csv
mkrun lshare
sed -i '40s/,0.01,\([0-9]*\)$/,-3,\1/' lshare/load.csv
refused "record 40: cpu_wait_share '-3' is not a share in \[0, 1\]" lshare load.csv
mkrun lcount
sed -i '12s/,[0-9]*$/,2.5/' lcount/load.csv
refused "record 12: nivcsw '2.5' is not a whole number >= 0" lcount load.csv
mkrun ldup
sed -n '40p' ldup/load.csv >>ldup/load.csv
refused "record 44 repeats record 40" ldup load.csv
mkrun lcut
truncate -s -3 lcut/load.csv
refused "record 43 has no line end" lcut load.csv
echo "test_trials_csv: OK"
