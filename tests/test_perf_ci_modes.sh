#!/usr/bin/env bash
# test_perf_ci_modes.sh <vitbench>: scripts/perf_ci.sh's input checks and its
# --counts and --base modes, with the real `vitbench compare` and stand-ins
# for what they run (a vitbench whose `run` writes a run directory of known
# trials, and a valgrind that writes callgrind's totals), so each exit is
# known in advance:
#   - every input is checked before anything runs: a misspelt flag gets the
#     nearest one, '-' and '_' are alike, a misspelt metric, a bad budget,
#     two modes, a base that is no commit: exit 2, nothing run;
#   - --counts: no baseline exits 3; --create_baseline keeps counts.csv;
#     the same counts pass (0); 2% more instructions is a regression (1);
#     2% fewer asks for the baseline to be refreshed (6); no timed step or
#     no instruction counted is a failure (2), never a pass;
#   - --base: identical base and head pass after 5 paired rounds (0); a
#     head 30% slower fails (1); a head whose rounds scatter is inconclusive
#     (5) within its budget, saying the largest regression it could not
#     rule out;
#   - every gate run that measured adds its row to the history (counts
#     alone for --counts, head's throughput for --base).
set -u

VB=${1:?usage: test_perf_ci_modes.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_perf_ci_modes: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_perf_modes.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/bin" "$TMP/data/stats" && touch "$TMP/data/stats/global_stds.npy" || fail "scratch directories"

# a run directory of known trials: FAKE_SCALE (its throughput), FAKE_SCATTER
# (runs drifting far apart, from a counter), FAKE_STEPS (timed steps), and
# the files the counts read
cat >"$TMP/bin/make_run.py" <<'MAKE_RUN'
import json, os, sys, time
out = sys.argv[1]
scale = float(os.environ.get("FAKE_SCALE", "1"))
count = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs_made")
k = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(k + 1))
drift = (1.0, 1.01, 0.99, 1.005, 0.995)[k % 5]
if os.environ.get("FAKE_SCATTER"):
    drift = (1.0, 1.6, 0.6, 1.3, 0.75, 1.45, 0.65)[k % 7]
os.makedirs(out, exist_ok=True)
d = os.path.join(out, "tiny_%d" % time.monotonic_ns())
os.makedirs(d)
fp = {"host": "h", "cpu_model": "Test CPU", "affinity_cores": 2, "omp_threads": 1, "ranks": 1, "backend": "cpu",
      "blas": "OpenBLAS", "blas_coretype": "Haswell", "compiler": "gcc", "cflags": "-O3", "git_commit": "abc",
      "git_dirty": False, "gpu_name": "", "gpu_driver": "", "machine_key": "kfake"}
json.dump({"run_id": os.path.basename(d), "status": "completed", "backend": "cpu", "ranks": 1,
           "config": {"config": "tiny", "embed_dim": 64}, "parallel": {"tp": 1, "cp": 1, "dp": 1},
           "fingerprint": fp}, open(os.path.join(d, "run.json"), "w"))
full = [v * scale * drift for v in (100, 101, 99, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.3)]
rid = os.path.basename(d)
with open(os.path.join(d, "trials.csv"), "w") as f:
    f.write("run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s\n")
    for kind, vals in (("SYNTHETIC", [v + 20 for v in full]), ("FULL", full)):
        for i, v in enumerate(vals):
            f.write("%s,%s,%d,0,8,8,1,0,%r,%r\n" % (rid, kind, i, 64 / v, v))
steps = int(os.environ.get("FAKE_STEPS", "4"))
with open(os.path.join(d, "iterations.csv"), "w") as f:
    f.write("trial,trial_type,trial_index,warmup,step,rank,seconds,data_wait_s,allreduce_calls,allreduce_bytes,"
            "comm_exposed_s\n")
    for s in range(steps):
        f.write("SYNTHETIC_0,SYNTHETIC,0,0,%d,0,0.01,0,0,0,0\n" % s)
with open(os.path.join(d, "ops.csv"), "w") as f:
    f.write("rank,trial_type,name,category,calls,bytes,flops,total_s,avg_s,min_s,max_s,median_s,share_of_step\n")
    f.write("0,SYNTHETIC,h2d,memcpy,%d,%d,0,0.001,0,0,0,0,0.01\n" % (steps, steps * 524288))
    f.write("0,SYNTHETIC,matmul_forward_fc1,compute,%d,0,1e9,0.01,0,0,0,0,0.5\n" % (steps * 4))
print("vitbench: run directory " + d)
MAKE_RUN

# the stand-in vitbench: `run` from make_run.py, the real binary for the rest;
# the slow one's runs are 30% slower
cat >"$TMP/bin/vitbench" <<STANDIN
#!/usr/bin/env bash
case "\$1" in
run)
    out=results
    while [ \$# -gt 0 ]; do [ "\$1" = --output_dir ] && out=\$2; shift; done
    exec python3 "$TMP/bin/make_run.py" "\$out" ;;
*) exec "$VB" "\$@" ;;
esac
STANDIN
cat >"$TMP/bin/vitbench_slow" <<STANDIN
#!/usr/bin/env bash
[ "\$1" = run ] && export FAKE_SCALE=0.7
exec "$TMP/bin/vitbench" "\$@"
STANDIN
# valgrind: writes callgrind's totals (FAKE_IR instructions) where asked, then runs the program
cat >"$TMP/bin/valgrind" <<'STANDIN'
#!/usr/bin/env bash
out=
while [ $# -gt 0 ]; do
    case $1 in --callgrind-out-file=*) out=${1#*=} ;; --*) ;; *) break ;; esac
    shift
done
printf 'events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nsummary: 0\ntotals: %s 100 100 10 %s 20 1 2 3\n' \
    "${FAKE_IR:-1000000000}" "${FAKE_D1MR:-1000000}" >"$out"
exec "$@"
STANDIN
chmod +x "$TMP/bin/vitbench" "$TMP/bin/vitbench_slow" "$TMP/bin/valgrind" || fail "chmod"

gate() { # expected-status args...: perf_ci.sh; its stdout (perf.md) in $md, both streams in $out
    local want=$1
    shift
    out=$(cd "$SRC" && VITBENCH="${HEAD_VB:-$TMP/bin/vitbench}" VITBENCH_COUNTS="$TMP/bin/vitbench" \
        VITBENCH_BASE="$TMP/bin/vitbench" VALGRIND="$TMP/bin/valgrind" RESULTS="$TMP/results" \
        BASELINES="$TMP/baselines" DATA="$TMP/data" HISTORY="$TMP/history" bash scripts/perf_ci.sh "$@" 2>"$TMP/stderr")
    local rc=$?
    md=$out
    out="$out
$(cat "$TMP/stderr")"
    [ "$rc" = "$want" ] || fail "perf_ci.sh $* exited $rc, want $want: $out"
    case $md in *"perf_ci: exit $want: "*) ;; *) fail "perf.md (stdout) does not say why it exited $want: $md" ;; esac
}

# ---- the input, before anything runs ----
gate 2 --create-baselin
case $out in *"unknown flag --create_baselin (did you mean --create_baseline?)"*) ;; *) fail "typo: $out" ;; esac
gate 2 --metric FULL,SYNTHTIC
case $out in *"--metric SYNTHTIC: not a metric"*"did you mean SYNTHETIC?"*) ;; *) fail "metric typo: $out" ;; esac
gate 2 --counts --base HEAD
case $out in *"two modes"*) ;; *) fail "two modes: $out" ;; esac
gate 2 --base no-such-commit-here
case $out in *"not a commit"*) ;; *) fail "bad base: $out" ;; esac
gate 2 --base HEAD --budget 0
gate 2 --threshold
case $out in *"--threshold: missing value"*) ;; *) fail "missing value: $out" ;; esac
gate 2 --counts --noisy_baseline --create_baseline
[ -e "$TMP/results" ] || [ -e "$TMP/bin/runs_made" ] && fail "a refused input ran something"

# ---- --counts ----
gate 3 --counts
case $out in *"no counted-work baseline for machine kfake"*) ;; *) fail "no counts baseline: $out" ;; esac
gate 0 --counts --create-baseline # '-' and '_' alike
[ -f "$TMP/baselines/counts_kfake/counts.csv" ] || fail "no counts.csv kept"
python3 - "$TMP/baselines/counts_kfake/counts.csv" <<'CHECK' || fail "counts.csv"
import csv, sys
c = {r["metric"]: float(r["value"]) for r in csv.DictReader(open(sys.argv[1]))}
# 1e9 instructions over 4 steps; est_cycles = Ir + 10 (I1mr + D1mr + D1mw) + 100 (ILmr + DLmr + DLmw), per step
assert c["instructions"] == 2.5e8, c
assert abs(c["est_cycles"] - (1e9 + 10 * (10 + 1000000 + 20) + 100 * (1 + 2 + 3)) / 4) < 1, c
assert c["op_calls"] == 5 and c["h2d_bytes"] == 524288 and c["samples"] == 8, c
CHECK
gate 0 --counts
case $md in *"| instructions | 2.5e+08 | 2.5e+08 | 1.0000 | equal |"*) ;; *) fail "counts table: $md" ;; esac
case $md in *"perf_ci: history append: "*"instructions 2.5e+08"*"perf_ci: this machine's history"*) ;;
*) fail "perf.md does not show the history row and the history: $md" ;; esac
FAKE_IR=1020000000 gate 1 --counts
case $md in *"| instructions |"*"| 1.0200 | higher: a regression |"*"exit 1: regression"*) ;; *) fail "2% more: $md" ;; esac
FAKE_IR=980000000 gate 6 --counts
case $md in *"lower: refresh the baseline"*"exit 6: improvement"*"--counts --create_baseline"*) ;;
*) fail "2% fewer: $md" ;; esac
FAKE_IR=1009000000 gate 0 --counts --counts_threshold 0.01
FAKE_IR=1009000000 gate 1 --counts --counts_threshold 0.005
FAKE_IR=0 gate 2 --counts
case $out in *"nothing measured"*) ;; *) fail "zero instructions: $out" ;; esac
FAKE_STEPS=0 gate 2 --counts
# each counting run that measured is a row of the history: its counts alone
# (a run under valgrind times the simulator), none for those that failed
[ "$(grep -c '^20[0-9T:-]*Z,abc,kfake,,,,[0-9]*,[0-9]*$' "$TMP/history/kfake.csv")" = 7 ] ||
    fail "7 counting gate runs (the one without a baseline too), not 7 history rows of counts: $(cat "$TMP/history/kfake.csv")"

# ---- --base: paired rounds ----
gate 0 --base HEAD --budget 120
case $md in *"paired over 5 rounds"*"exit 0: pass: head is equivalent"*"in 5 paired rounds"*) ;;
*) fail "identical base: $md" ;; esac
HEAD_VB=$TMP/bin/vitbench_slow gate 1 --base HEAD --budget 120
case $md in *"| slower |"*"exit 1: regression: head is slower"*) ;; *) fail "slow head: $md" ;; esac
# rounds that scatter: undecided within the budget, with what could not be
# ruled out; a budget shorter than the first look's 5 rounds still runs them
FAKE_SCATTER=1 gate 5 --base HEAD --budget 1
case $md in *"exit 5: inconclusive: no regression larger than FULL "*"% in "*" rounds could be ruled out"*) ;;
*) fail "scattered rounds: $md" ;; esac
# each base A/B adds head's runs to the history
[ "$(grep -c '^20[0-9T:-]*Z,abc,kfake,[0-9][0-9.]*,[0-9][0-9.]*,' "$TMP/history/kfake.csv")" = 3 ] ||
    fail "3 base gate runs, not 3 history rows of head's throughput: $(cat "$TMP/history/kfake.csv")"
echo "test_perf_ci_modes: OK"
