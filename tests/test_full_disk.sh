#!/usr/bin/env bash
# test_full_disk.sh <vitbench>: a run whose results disk fills up still
# records its end. On a real full filesystem (a 256 KiB tmpfs): exit 1 with
# ONE line naming the file and "No space left on device", the results it
# finished kept, no temporaries, and run.json "failed" with an end_time, so
# that sweep --collect, --resume and report do not take it for a live run.
# report reads that run.json (written in place, with trailing whitespace).
# A sweep whose disk fills during its run says index.csv is not up to date
# (exit 1) instead of counting rows index.csv does not hold.
#
# RLIMIT_FSIZE (test_no_loss.sh) caps a file's size, not the disk's free
# space, so a fresh temporary still gets blocks there; only a disk with no
# free block shows whether the final run.json write needs any. Mounting
# needs root: the test re-runs itself in a private mount namespace
# (unshare -m), so the mount is gone when it exits, and is skipped (77)
# where that cannot be had.
#
# The disk is filled while the run is stopped (SIGSTOP) between two writes
# (no temporary of its own in the run directory): a run stopped mid-write
# would, on resuming, free the blocks of the temporary it gives up, and the
# final write could then find room by chance.
set -u

VB=${1:?usage: test_full_disk.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset BENCHY_CONFIG_FILE

fail() { echo "test_full_disk: FAIL: $*" >&2; exit 1; }
skip() { echo "test_full_disk: SKIP: $*"; exit 77; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(cd "$(dirname "$VB")" && pwd)/$(basename "$VB")

if [ -z "${VB_FULL_DISK_NS:-}" ]; then
    [ "$(id -u)" -eq 0 ] || skip "mounting a tmpfs needs root (uid $(id -u))"
    command -v unshare > /dev/null || skip "unshare (util-linux) not found"
    unshare -m --propagation private true 2> /dev/null || skip "no private mount namespace (unshare -m refused)"
    VB_FULL_DISK_NS=1 exec unshare -m --propagation private bash "$0" "$VB"
fi

TMP=$(mktemp -d /tmp/vb_fulldisk.XXXXXX) || fail "mktemp"
PID=
cleanup() {
    [ -n "$PID" ] && kill -9 "$PID" 2> /dev/null
    umount "$TMP/disk" 2> /dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
cd "$TMP" || fail "cd $TMP"
mkdir disk
mount -t tmpfs -o size=256k vb_full_disk disk 2> mount.err || skip "cannot mount a tmpfs: $(head -1 mount.err)"

"$VB" datagen --output_dir data --years 2 --valid_years 1 --samples_per_year 16 --channels 4 \
    --img_size 32,64 --seed 3 > datagen.txt 2>&1 || { cat datagen.txt >&2; fail "datagen"; }
cat > benchy.yaml <<'EOF'
IO:
  run_benchmark: False
synthetic:
  run_benchmark: True
  nbatches: 2
  ntrials: 100000
  nwarmup: 1
full:
  run_benchmark: False
EOF

R=disk/out/full
"$VB" run --yaml_config "$SRC/scenarios/vit.yaml" --config tiny --train_data_path data/train \
    --valid_data_path data/valid --global_means_path data/stats/global_means.npy \
    --global_stds_path data/stats/global_stds.npy --output_dir disk/out --run_name full \
    --benchy_config benchy.yaml > full.out 2> full.err &
PID=$!

# a trial's results are on disk: trials.csv has a row under its header (bounded wait: ~60 s)
trial_rows() { echo $(($(cat $R/trials.csv 2> /dev/null | wc -l) - 1)); }
for _ in $(seq 600); do
    [ "$(trial_rows)" -ge 1 ] && break
    kill -0 $PID 2> /dev/null || { cat full.err >&2; fail "the run ended before its first trial"; }
    sleep 0.1
done
[ "$(trial_rows)" -ge 1 ] || fail "no trial in trials.csv after 60 s"

# stopped, and not inside a write of its own: else let it go on and stop it again
stopped=0
for _ in $(seq 200); do
    kill -STOP $PID || fail "the run is gone: $(cat full.err)"
    for _ in $(seq 100); do # until the stop has taken effect
        [ "$(awk '{print $3}' /proc/$PID/stat 2> /dev/null)" = T ] && break
        sleep 0.01
    done
    [ "$(awk '{print $3}' /proc/$PID/stat 2> /dev/null)" = T ] || fail "SIGSTOP did not stop the run"
    if ! ls -A $R | grep -q '\.tmp\.'; then
        stopped=1
        break
    fi
    kill -CONT $PID
    sleep 0.05
done
[ $stopped -eq 1 ] || fail "the run was inside a write at each of 200 stops"

# the reader of a live run's run.json (its room kept as trailing whitespace)
status_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$1/run.json"; }
[ "$(status_of $R)" = running ] || fail "run.json of the live run: status $(status_of $R)"

# every free block taken; dd stops at the first write that finds none
dd if=/dev/zero of=disk/filler bs=4096 2> dd.err && fail "dd filled a 256 KiB disk without running out of space"
grep -q "No space left on device" dd.err || fail "dd: $(cat dd.err)"
avail=$(df --output=avail -B1 disk | tail -1 | tr -d ' ')
[ "$avail" -eq 0 ] || fail "the disk still has $avail bytes free"

kill -CONT $PID
wait $PID
rc=$?
PID=
[ $rc -eq 1 ] || { cat full.err >&2; fail "run on a full disk exited $rc, want 1"; }
[ "$(wc -l < full.err)" -eq 1 ] || { cat full.err >&2; fail "stderr: not exactly one line"; }
grep -q "^vitbench: error: cannot write $R/.*: No space left on device$" full.err || {
    cat full.err >&2
    fail "not the full disk's error line"
}
! ls -A $R | grep -q 'tmp' || fail "temporary files left in $R: $(ls -A $R)"
[ "$(trial_rows)" -ge 1 ] || fail "trials.csv lost its rows"

python3 - "$R/run.json" <<'EOF' || fail "run.json after the disk filled up (above)"
import json, sys
rj = json.load(open(sys.argv[1]))
bad = []
if rj.get("status") != "failed": bad.append(f"status {rj.get('status')!r}, want 'failed'")
if not rj.get("end_time"): bad.append(f"end_time {rj.get('end_time')!r}")
if rj.get("run_id") != "full": bad.append(f"run_id {rj.get('run_id')!r}")
if bad: sys.exit("test_full_disk: run.json: " + "; ".join(bad))
EOF

# vitbench's own readers of run.json take the file as it was left on the full disk
"$VB" report $R --output_dir rep --no_plots > rep.out 2> rep.err || { cat rep.err >&2; fail "report of the run"; }
grep -q "status failed" rep/report.md || fail "report does not say the run failed: $(grep -i status rep/report.md)"

# ---- a sweep whose disk fills while its run goes on ----
rm -f disk/filler
rm -rf disk/out
REAL_MPIRUN=$(command -v mpirun) || fail "mpirun not found"
mkdir -p bin
# the probe runs for real; the run's stand-in fills the disk and ends well
# (a second link keeps .running's block taken once the sweep removes it)
cat > bin/mpirun <<EOF
#!/usr/bin/env bash
case " \$* " in *" version "*) exec "$REAL_MPIRUN" "\$@" ;; esac
ln "\$(ls -d "$TMP"/disk/out/one_*)/.running" "$TMP/disk/keep"
dd if=/dev/zero of="$TMP/disk/filler" bs=4096 2> /dev/null
exit 0
EOF
chmod +x bin/mpirun
cat > one.yaml <<EOF
name: one
command: run
base: {config: tiny, train_data_path: data/train, valid_data_path: data/valid,
       global_means_path: data/stats/global_means.npy, global_stds_path: data/stats/global_stds.npy}
ranks: [1]
EOF
PATH=$TMP/bin:$PATH "$VB" sweep one.yaml --output_dir disk/out --no_report > sweep.out 2>&1
rc=$?
rows=$(($(cat disk/out/one_*/index.csv | wc -l) - 1))
[ $rc -eq 1 ] || fail "a sweep whose index.csv could not be rewritten exited $rc, want 1: $(cat sweep.out)"
grep -q "index .*index.csv NOT up to date: its last rewrite failed" sweep.out ||
    fail "the sweep's closing line does not say index.csv is behind: $(cat sweep.out)"
grep -q "runs recorded)" sweep.out && fail "the sweep claims rows index.csv does not hold ($rows): $(cat sweep.out)"

echo "test_full_disk: OK"
