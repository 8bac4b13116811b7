#!/usr/bin/env bash
# test_perf_ci.sh <vitbench>: scripts/perf_ci.sh's decisions, with the real
# `vitbench compare` and a stand-in for the benchmark run (a vitbench whose
# `run` writes a run directory of known trials and load, quiet or busy, on a
# machine of a given BLAS core type), so each exit status is known in advance;
# every exit's reason is on stdout (perf.md) and stderr:
#   --help prints the help and runs nothing; RUNS=1 is refused (2); no
#   baseline for this machine exits 3 (not a pass) naming the nearest
#   baseline and the fields that differ; --create_baseline refuses busy runs
#   (4) unless --noisy_baseline, which stamps their noise in baseline.json
#   and makes later verdicts wider (5 for the same throughput); quiet runs are
#   kept (0) with every run's files, and not replaced (2); a matching
#   baseline is compared: equal runs pass (0), 30% slower fails (1); a
#   baseline of 3 trials in all cannot pass (5); a one-run baseline of
#   before still serves; every gate run that measured adds a history row,
#   and --refresh_baseline moves the baseline only once a later gate run
#   confirms a change the history found (4 before).
set -u

VB=${1:?usage: test_perf_ci.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_perf_ci: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_perf_ci.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT

mkdir -p "$TMP/bin"
cat >"$TMP/bin/make_run.py" <<'EOF'
import json, os, sys, time
out, mode, core = sys.argv[1], sys.argv[2], sys.argv[3]
scale, ntrials = float(os.environ.get("FAKE_SCALE", "1")), int(os.environ.get("FAKE_TRIALS", "10"))
os.makedirs(out, exist_ok=True)
d = os.path.join(out, "tiny_%d" % time.monotonic_ns())
os.makedirs(d)
# runs differ a little from one another, as real ones do: 1% drift in turn
count = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs_made")
k = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(k + 1))
drift = (1.0, 1.01, 0.99)[k % 3]
fp = {"host": "h", "cpu_model": "Test CPU", "affinity_cores": 2, "omp_threads": 2, "ranks": 1, "backend": "cpu",
      "blas": "OpenBLAS", "blas_coretype": core, "compiler": "gcc", "cflags": "-O3", "git_commit": "abc",
      "git_dirty": False, "gpu_name": "", "gpu_driver": "", "machine_key": "k%s" % core.lower()}
json.dump({"run_id": os.path.basename(d), "status": "completed", "backend": "cpu", "ranks": 1, "world_size": 1,
           "local_batch_size": 8, "global_batch_size": 8, "parallel": {"tp": 1, "cp": 1, "dp": 1},
           "config": {"config": "tiny", "embed_dim": 64, "depth": 2, "num_heads": 4, "patch_size": 4},
           "fingerprint": fp}, open(os.path.join(d, "run.json"), "w"))
full = [v * scale * drift for v in [100, 101, 99, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.3][:ntrials]]
# busy: one trial at 40% of the rest, and the load recorded says half the thread time went to others
if mode == "busy":
    full[min(4, len(full) - 1)] = 40 * scale
share = "0.5" if mode == "busy" else "0.01"
with open(os.path.join(d, "trials.csv"), "w") as f, open(os.path.join(d, "load.csv"), "w") as g:
    f.write("run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s\n")
    g.write("run_id,trial_type,trial_index,warmup,rank,seconds,online_cpus,loadavg_before,loadavg_after,"
            "steal_share,cpu_wait_share,nivcsw\n")
    for kind, vals in (("SYNTHETIC", [v + 20 for v in full]), ("FULL", full)):
        for i, v in enumerate(vals):
            f.write("%s,%s,%d,0,8,8,1,0,%r,%r\n" % (os.path.basename(d), kind, i, 64 / v, v))
            g.write("%s,%s,%d,0,0,%r,2,1.0,1.0,0,%s,3\n" % (os.path.basename(d), kind, i, 64 / v, share))
for name in ("summary.csv", "iterations.csv", "ops.csv"):
    open(os.path.join(d, name), "w").write("x\n")
print("vitbench: run directory " + d)
EOF
# the stand-in: `run` from make_run.py (FAKE_RUN quiet|busy, FAKE_CORE,
# FAKE_SCALE, FAKE_TRIALS), the real binary for everything else
cat >"$TMP/bin/vitbench" <<EOF
#!/usr/bin/env bash
case "\$1" in
run)
    out=results
    while [ \$# -gt 0 ]; do [ "\$1" = --output_dir ] && out=\$2; shift; done
    exec python3 "$TMP/bin/make_run.py" "\$out" "\${FAKE_RUN:-quiet}" "\${FAKE_CORE:-Haswell}" ;;
datagen)
    while [ \$# -gt 0 ]; do [ "\$1" = --output_dir ] && out=\$2; shift; done
    mkdir -p "\$out/stats" && touch "\$out/stats/global_stds.npy" ;;
*) exec "$VB" "\$@" ;;
esac
EOF
chmod +x "$TMP/bin/vitbench"

gate() { # expected-status args...: runs perf_ci.sh; its stdout (perf.md) in $md, both streams in $out
    local want=$1
    shift
    out=$(VITBENCH="$TMP/bin/vitbench" RESULTS="$TMP/results" BASELINES="${BASELINES:-$TMP/baselines}" DATA="$TMP/data" \
        HISTORY="${HISTORY:-$TMP/history}" \
        bash "$SRC/scripts/perf_ci.sh" "$@" 2>"$TMP/stderr")
    local rc=$?
    md=$out
    out="$out
$(cat "$TMP/stderr")"
    [ "$rc" = "$want" ] || fail "perf_ci.sh $* (FAKE_RUN=${FAKE_RUN:-quiet} FAKE_CORE=${FAKE_CORE:-Haswell}) exited $rc, want $want: $out"
    # every exit says why in perf.md, and in the log
    case $md in *"perf_ci: exit $want: "*) ;; *) fail "perf.md (stdout) does not say why it exited $want: $md" ;; esac
    grep -q "^perf_ci: exit $want: " "$TMP/stderr" || fail "stderr does not say why it exited $want: $out"
}

# --help: the help, and no benchmark
out=$(bash "$SRC/scripts/perf_ci.sh" --help) || fail "--help exited $?"
case $out in *"Exit status"*"3  no baseline for this machine"*"5  inconclusive"*"--noisy_baseline"*) ;;
*) fail "--help printed no exit codes or flags: $out" ;; esac
[ -e "$TMP/results" ] && fail "--help ran the benchmark"

# one run a side cannot pass: refused
RUNS=1 gate 2
case $out in *"at least 2 runs"*) ;; *) fail "RUNS=1 not refused: $out" ;; esac

# no baseline anywhere: not a pass
gate 3
case $out in *"no baselines at all"*"no baseline for machine khaswell"*) ;; *) fail "missing baseline not explained: $out" ;; esac

# busy runs are not kept as a baseline
FAKE_RUN=busy gate 4 --create_baseline
case $out in *"ran on a busy machine"*"not kept as a baseline"*"--noisy_baseline"*) ;; *) fail "busy run refusal not explained: $out" ;; esac
[ -e "$TMP/baselines/tiny_cpu_khaswell" ] && fail "a busy run became the baseline"
gate 2 --noisy_baseline
case $out in *"only goes with --create_baseline"*) ;; *) fail "--noisy_baseline alone not refused: $out" ;; esac

# ... unless asked to on a runner that is never quiet: kept, its noise stamped
BASELINES=$TMP/noisy_baselines FAKE_RUN=busy gate 0 --create_baseline --noisy_baseline
python3 - "$TMP/noisy_baselines/tiny_cpu_khaswell/baseline.json" <<'EOF' || fail "the noise is not stamped in the baseline"
import json, sys
b = json.load(open(sys.argv[1]))
assert b["noisy"] is True and b["recorded_with"] == "--noisy_baseline", b
assert abs(b["mean_load_share"] - 0.5) < 1e-9 and b["max_trial_spread"] > 2, b
EOF
# and its verdicts widen: the same throughput, quiet, against it decides nothing
BASELINES=$TMP/noisy_baselines gate 5
case $out in *"recorded on a busy machine"*"ran on a busy machine"*) ;; *) fail "a noisy baseline did not widen the verdict: $out" ;; esac

# quiet runs are kept, once
gate 0 --create_baseline
[ -f "$TMP/baselines/tiny_cpu_khaswell/index.csv" ] || fail "baseline lacks index.csv"
[ "$(ls -d "$TMP"/baselines/tiny_cpu_khaswell/runs/*/ | wc -l)" = 3 ] || fail "baseline does not hold the 3 runs"
for r in "$TMP"/baselines/tiny_cpu_khaswell/runs/*/; do
    for f in run.json trials.csv load.csv summary.csv iterations.csv ops.csv; do
        [ -f "$r/$f" ] || fail "baseline run $r lacks $f"
    done
done
gate 2 --create_baseline
case $out in *"already has a baseline"*) ;; *) fail "replacing a baseline not refused: $out" ;; esac

# the matching baseline is compared: equal runs pass, run to run
gate 0
case $out in *"comparing"*"3 runs"*"PASS"*"perf_ci: exit 0: pass"*) ;; *) fail "no comparison against the matching baseline: $out" ;; esac
# 30% slower: a regression
FAKE_SCALE=0.7 gate 1
case $out in *"| slower |"*"perf_ci: exit 1: regression"*) ;; *) fail "a 30% slowdown was not a regression: $out" ;; esac

# a baseline of fewer than 5 trials in all (3 runs of 1): it cannot pass
FAKE_TRIALS=1 BASELINES=$TMP/short_baselines gate 0 --create_baseline
BASELINES=$TMP/short_baselines gate 5
case $out in *"fewer than 5 samples a side"*"perf_ci: exit 5: inconclusive"*) ;; *) fail "a 2-trial baseline passed: $out" ;; esac

# a baseline of one run made before repeats (run.json at its top) still serves
mkdir -p "$TMP/old_baselines"
cp -r "$(ls -d "$TMP"/baselines/tiny_cpu_khaswell/runs/*/ | head -1)" "$TMP/old_baselines/tiny_cpu_khaswell"
BASELINES=$TMP/old_baselines gate 0
case $out in *"comparing"*"old_baselines/tiny_cpu_khaswell"*"10 (1) / 30 (3) | equivalent"*) ;;
*) fail "a one-run baseline was not compared with the new runs: $out" ;; esac

# another BLAS kernel (OPENBLAS_CORETYPE=Prescott, docs/analysis.md's example): a
# different machine key, so no baseline, and the field that differs is named
FAKE_CORE=Prescott gate 3
case $out in *"nearest baseline"*"tiny_cpu_khaswell differs in blas_coretype: 'Prescott' here, 'Haswell' there"*) ;;
*) fail "nearest baseline or the differing field not named: $out" ;;
esac


# every gate run that measured adds its row to this machine's history, and
# the stored baseline moves only at a change the history confirms
H=$TMP/refresh_history
B=$TMP/refresh_baselines
HISTORY=$H BASELINES=$B gate 0 --create_baseline
grep -q '"history_time": "20' "$B/tiny_cpu_khaswell/baseline.json" || fail "the baseline does not record its history row's time"
for k in 1 2 3 4; do HISTORY=$H BASELINES=$B gate 0; done
case $md in *"perf_ci: history append: $H/khaswell.csv: "*"commit abc"*"perf_ci: this machine's history"*) ;;
*) fail "perf.md does not show the history row and the history: $md" ;; esac
[ "$(grep -c '^20[0-9T:-]*Z,abc,khaswell,' "$H/khaswell.csv")" = 5 ] || fail "5 gate runs, not 5 history rows: $(cat "$H/khaswell.csv")"
HISTORY=$H BASELINES=$B gate 4 --refresh_baseline
case $out in *"not refreshed: the history shows no change point after the baseline's own row"*) ;;
*) fail "a refresh without a change was not refused: $out" ;; esac
# 30% faster from here on: the first such run is a change not yet confirmed ...
FAKE_SCALE=1.3 HISTORY=$H BASELINES=$B gate 4 --refresh_baseline
case $out in *"not refreshed: the history shows "*"not yet confirmed"*) ;;
*) fail "a refresh on one faster run was not refused: $out" ;; esac
# ... a later one that stays on the new level confirms it: the baseline moves
FAKE_SCALE=1.3 HISTORY=$H BASELINES=$B gate 0 --refresh_baseline
case $out in *"the history confirms a change of "*"_samples_per_s at commit abc (improvement, +"*"moved the baseline"*) ;;
*) fail "a confirmed change did not move the baseline: $out" ;; esac
[ -z "$(ls -A "$B" | grep '^\.')" ] || fail "a temporary left in the baselines: $(ls -A "$B")"
[ "$(ls -d "$B"/tiny_cpu_khaswell/runs/*/ | wc -l)" = 3 ] || fail "the moved baseline does not hold 3 runs"
# the old throughput is now a regression against it
HISTORY=$H BASELINES=$B gate 1
# a baseline directory is a real one below BASELINES: a link planted in its
# place (to a directory elsewhere) is refused, and nothing is written there;
# a link at a file's name inside it is replaced, never written through
mkdir "$TMP/elsewhere"
ln -s "$TMP/elsewhere" "$TMP/baselines/tiny_cpu_kzen"
FAKE_CORE=Zen gate 2 --create_baseline
case $out in *"tiny_cpu_kzen is a symbolic link"*) ;; *) fail "a baseline directory link not refused: $out" ;; esac
[ -z "$(ls -A "$TMP/elsewhere")" ] || fail "perf_ci wrote through the link: $(ls -A "$TMP/elsewhere")"
rm "$TMP/baselines/tiny_cpu_kzen" && mkdir "$TMP/baselines/tiny_cpu_kzen"
echo precious >"$TMP/victim"
echo precious >"$TMP/victim2"
ln -s "$TMP/victim" "$TMP/baselines/tiny_cpu_kzen/index.csv"
ln -s "$TMP/victim2" "$TMP/baselines/tiny_cpu_kzen/baseline.json"
FAKE_CORE=Zen gate 0 --create_baseline
[ "$(cat "$TMP/victim")" = precious ] || fail "perf_ci wrote through a link planted as index.csv"
[ "$(cat "$TMP/victim2")" = precious ] || fail "perf_ci wrote through a link planted as baseline.json"
for f in index.csv baseline.json; do
    [ -f "$TMP/baselines/tiny_cpu_kzen/$f" ] && [ ! -L "$TMP/baselines/tiny_cpu_kzen/$f" ] ||
        fail "$f is still the planted link"
done
# a link planted as a run's directory inside the baseline is refused
rm -rf "$TMP/baselines/tiny_cpu_kzen" && mkdir -p "$TMP/baselines/tiny_cpu_kzen"
ln -s "$TMP/elsewhere" "$TMP/baselines/tiny_cpu_kzen/runs"
FAKE_CORE=Zen gate 2 --create_baseline
case $out in *"tiny_cpu_kzen/runs is a symbolic link"*) ;; *) fail "a link as the baseline's runs/ not refused: $out" ;; esac
[ -z "$(ls -A "$TMP/elsewhere")" ] || fail "perf_ci wrote through the runs/ link: $(ls -A "$TMP/elsewhere")"
echo "test_perf_ci: OK"
