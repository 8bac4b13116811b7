#!/usr/bin/env bash
# test_perf_ci.sh <vitbench>: scripts/perf_ci.sh's decisions, with the real
# `vitbench compare` and a stand-in for the benchmark run (a vitbench whose
# `run` writes a run directory of known trials, quiet or busy, on a machine
# of a given BLAS core type), so each exit status is known in advance:
#   --help prints the help and runs nothing; no baseline for this machine
#   exits 3 (not a pass) naming the nearest baseline and the fields that
#   differ; --create_baseline refuses a busy run (4), keeps a quiet one (0)
#   and refuses to replace one (2); a matching baseline is compared (0).
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
os.makedirs(out, exist_ok=True)
d = os.path.join(out, "tiny_%d" % time.monotonic_ns())
os.makedirs(d)
fp = {"host": "h", "cpu_model": "Test CPU", "affinity_cores": 2, "omp_threads": 2, "ranks": 1, "backend": "cpu",
      "blas": "OpenBLAS", "blas_coretype": core, "compiler": "gcc", "cflags": "-O3", "git_commit": "abc",
      "git_dirty": False, "gpu_name": "", "gpu_driver": "", "machine_key": "k%s" % core.lower()}
json.dump({"run_id": os.path.basename(d), "status": "completed", "backend": "cpu", "ranks": 1, "world_size": 1,
           "local_batch_size": 8, "global_batch_size": 8, "parallel": {"tp": 1, "cp": 1, "dp": 1},
           "config": {"config": "tiny", "embed_dim": 64, "depth": 2, "num_heads": 4, "patch_size": 4},
           "fingerprint": fp}, open(os.path.join(d, "run.json"), "w"))
full = [100, 101, 99, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.3]
if mode == "busy":  # one trial at 40% of the rest: compare's noise note
    full[4] = 40
with open(os.path.join(d, "trials.csv"), "w") as f:
    f.write("run_id,trial_type,trial_index,warmup,nbatches,global_batch,ranks,rank,seconds,samples_per_s\n")
    for kind, vals in (("SYNTHETIC", [v + 20 for v in full]), ("FULL", full)):
        for i, v in enumerate(vals):
            f.write("%s,%s,%d,0,8,8,1,0,%r,%r\n" % (os.path.basename(d), kind, i, 64 / v, v))
for name in ("summary.csv", "iterations.csv", "ops.csv"):
    open(os.path.join(d, name), "w").write("x\n")
print("vitbench: run directory " + d)
EOF
# the stand-in: `run` from make_run.py (FAKE_RUN quiet|busy, FAKE_CORE), the
# real binary for everything else
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

gate() { # expected-status args...: runs perf_ci.sh; its output is left in $out
    local want=$1
    shift
    out=$(VITBENCH="$TMP/bin/vitbench" RESULTS="$TMP/results" BASELINES="$TMP/baselines" DATA="$TMP/data" \
        bash "$SRC/scripts/perf_ci.sh" "$@" 2>&1)
    local rc=$?
    [ "$rc" = "$want" ] || fail "perf_ci.sh $* (FAKE_RUN=${FAKE_RUN:-quiet} FAKE_CORE=${FAKE_CORE:-Haswell}) exited $rc, want $want: $out"
}

# --help: the help, and no benchmark
gate 0 --help
case $out in *"Exit status:"*"3  no baseline for this machine"*) ;; *) fail "--help printed no exit codes: $out" ;; esac
[ -e "$TMP/results" ] && fail "--help ran the benchmark"

# no baseline anywhere: not a pass
gate 3
case $out in *"no baseline for machine khaswell"*"no baselines at all"*) ;; *) fail "missing baseline not explained: $out" ;; esac

# a busy run is not kept as a baseline
FAKE_RUN=busy gate 4 --create_baseline
case $out in *"probably busy"*"not kept as a baseline"*) ;; *) fail "busy run refusal not explained: $out" ;; esac
[ -e "$TMP/baselines/tiny_cpu_khaswell" ] && fail "a busy run became the baseline"

# a quiet one is, once
gate 0 --create_baseline
for f in run.json trials.csv summary.csv iterations.csv ops.csv; do
    [ -f "$TMP/baselines/tiny_cpu_khaswell/$f" ] || fail "baseline lacks $f"
done
gate 2 --create_baseline
case $out in *"already has a baseline"*) ;; *) fail "replacing a baseline not refused: $out" ;; esac

# the matching baseline is compared
gate 0
case $out in *"comparing"*"no regression"*) ;; *) fail "no comparison against the matching baseline: $out" ;; esac

# another BLAS kernel (OPENBLAS_CORETYPE=Prescott, docs/analysis.md's example): a
# different machine key, so no baseline, and the field that differs is named
FAKE_CORE=Prescott gate 3
case $out in *"nearest baseline"*"tiny_cpu_khaswell differs in blas_coretype: 'Prescott' here, 'Haswell' there"*) ;;
*) fail "nearest baseline or the differing field not named: $out" ;;
esac

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
ln -s "$TMP/victim" "$TMP/baselines/tiny_cpu_kzen/trials.csv"
FAKE_CORE=Zen gate 0 --create_baseline
[ "$(cat "$TMP/victim")" = precious ] || fail "perf_ci wrote through a link planted as trials.csv"
[ -f "$TMP/baselines/tiny_cpu_kzen/trials.csv" ] && [ ! -L "$TMP/baselines/tiny_cpu_kzen/trials.csv" ] ||
    fail "trials.csv is still the planted link"
echo "test_perf_ci: OK"
