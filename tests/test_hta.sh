#!/usr/bin/env bash
# test_hta.sh <vitbench>: Holistic Trace Analysis (HTA, the PyPI package
# holistictraceanalysis 0.5.0) itself on `vitbench trace --format kineto`
# (tests/py/check_hta.py has the comparisons and the differences of
# definition).
#   1. a 2-rank CPU run (two trials of two steps): HTA's temporal breakdown,
#      idle-time breakdown and comm-comp overlap run, and their totals agree
#      with vitbench's breakdown.csv (`vitbench report`) within 2%, the idle
#      time within 1% (the time between the trials is not in the export);
#      HTA's queue length never goes below 0 (each launch before its op); its
#      critical path analysis runs with the pandas pip brings (under pandas 3,
#      HTA 0.5.0's own failure is reported)
#   2. nsys imports (cuda_gpu_trace; a real one of nsys 2024.5.1): the
#      report's streams are HTA's streams, and HTA's totals are the
#      import's breakdown.csv
#   3. a timeline with steps and stream lanes (a CUDA run's layout): HTA finds
#      its ProfilerSteps and keeps every kernel
# HTA is installed from PyPI into a virtual environment in the build
# directory ($VB_BINARY_DIR/hta-venv; VB_HTA_VENV overrides), made once and
# reused. Only HTA's analysis dependencies are installed (HTA requires
# jupyterlab and pytest as well, for its notebooks and its own tests; the
# analyses import neither): about 30 s and 300 MB the first time, then
# each run takes a few seconds. Skipped (77) only when the package cannot be
# installed because PyPI is out of reach, with pip's reason; python3 -m venv
# must work (Debian: python3-venv).
set -u

VB=${1:?usage: test_hta.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_hta: FAIL: $*" >&2; exit 1; }
skip() { echo "test_hta: SKIPPED: $*"; exit 77; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(cd "$(dirname "$VB")" && pwd)/$(basename "$VB")
command -v python3 >/dev/null || fail "python3 is needed"
command -v mpirun >/dev/null || fail "mpirun not found"

HTA_VERSION=0.5.0
VENV=${VB_HTA_VENV:-${VB_BINARY_DIR:-$(dirname "$VB")}/hta-venv}
PY=$VENV/bin/python

TMP=$(mktemp -d /tmp/vb_hta.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT

# ---- HTA in its own virtual environment ----
hta_ready() {
    "$1/bin/python" -c "import importlib.metadata as m, hta.trace_analysis
assert m.version('holistictraceanalysis') == '$HTA_VERSION'" >/dev/null 2>&1
}
if ! hta_ready "$VENV"; then
    # made beside it and renamed into place: a run killed half-way, or two
    # runs at once, never leave a half-installed environment that looks ready
    NEW=$VENV.new.$$
    rm -rf "$NEW"
    python3 -m venv "$NEW" >"$TMP/venv.log" 2>&1 ||
        { rm -rf "$NEW"; fail "python3 -m venv failed (Debian: the python3-venv package): $(tail -n 1 "$TMP/venv.log")"; }
    PIP=("$NEW/bin/python" -m pip install --disable-pip-version-check --no-input --timeout 30 --retries 1)
    echo "test_hta: installing holistictraceanalysis==$HTA_VERSION from PyPI into $VENV"
    if ! "${PIP[@]}" --no-deps "holistictraceanalysis==$HTA_VERSION" >"$TMP/pip.log" 2>&1 ||
        ! "${PIP[@]}" numpy pandas plotly networkx pydot pyyaml psutil >>"$TMP/pip.log" 2>&1; then
        rm -rf "$NEW"
        why=$(grep -m1 -E 'ERROR|error' "$TMP/pip.log" || tail -n 1 "$TMP/pip.log")
        # only a registry out of reach is a reason to skip; any other
        # failure to install is a failure
        grep -qiE 'NewConnectionError|ConnectTimeout|ReadTimeout|timed out|name resolution|Name or service not known|Network is unreachable|Connection refused|No route to host|ProxyError|Max retries exceeded' \
            "$TMP/pip.log" || fail "pip could not install holistictraceanalysis==$HTA_VERSION: $why"
        skip "holistictraceanalysis==$HTA_VERSION cannot be installed: PyPI is out of reach ($why)"
    fi
    hta_ready "$NEW" || { rm -rf "$NEW"; fail "HTA installed but does not import: $("$NEW/bin/python" -c 'import hta.trace_analysis' 2>&1 | tail -n 1)"; }
    if hta_ready "$VENV"; then
        rm -rf "$NEW" # another run got there first
    else
        rm -rf "$VENV" && mv "$NEW" "$VENV" || fail "cannot move $NEW to $VENV"
    fi
fi
echo "test_hta: $("$PY" -c 'import importlib.metadata as m; print("HTA", m.version("holistictraceanalysis"), "pandas", m.version("pandas"))')"
CHECK=("$PY" "$SRC/tests/py/check_hta.py")

# ---- 1. a 2-rank CPU run ----
cd "$TMP" || fail "cd $TMP"
export OMP_NUM_THREADS=1
D=$SRC/tests/golden/era5
[ -d "$D/train" ] || fail "no golden data in $D"
cat >benchy.yaml <<'EOF'
global: {report_freq: 1, exit_after_tests: True, profiler_mode: 'single', use_distributed_barrier: True}
IO: {run_benchmark: False, nbatches: 1, ntrials: 1, nwarmup: 0}
synthetic: {run_benchmark: False, nbatches: 1, ntrials: 1, nwarmup: 0}
full: {run_benchmark: True, nbatches: 2, ntrials: 2, nwarmup: 0}
EOF
# small buckets: several allreduces in flight at once (overlapping rows on
# the comm lane, more than one pseudo-stream)
timeout -k 10 120 mpirun --oversubscribe --mca mpi_yield_when_idle 1 -np 2 "$VB" run \
    --yaml_config "$SRC/scenarios/vit.yaml" --config tiny --train_data_path "$D/train" --valid_data_path "$D/valid" \
    --global_means_path "$D/stats/global_means.npy" --global_stds_path "$D/stats/global_stds.npy" \
    --local_batch_size 2 --bucket_cap_mb 0.1 --output_dir "$TMP/out" --run_name r2 --benchy_config benchy.yaml \
    >run.txt 2>&1 || { tail -n 20 run.txt >&2; fail "the 2-rank run exited $?"; }
RUN=$TMP/out/r2
[ "$(grep -c ',main,step,' "$RUN/timeline.csv")" = 8 ] || fail "want 4 steps per rank in timeline.csv"
out=$("$VB" trace "$RUN" --format kineto 2>&1) || fail "trace --format kineto exited $?: $out"
"$VB" report "$RUN" --no_plots >report.txt 2>&1 || { cat report.txt >&2; fail "report exited $?"; }
"${CHECK[@]}" run "$RUN/timeline.csv" "$RUN/report/breakdown.csv" "$RUN/kineto" || fail "HTA on a CPU run"

# ---- 2. nsys imports: streams as streams ----
# a real trace (tests/fixtures/nsys/real: copies on 15 and 20, kernels on
# 16-19, overlapping) and the hand-made one with NCCL kernels on stream 20
FX=$SRC/tests/fixtures/nsys
for spec in "real/nsys-concurrent_cuda_gpu_trace.csv 15,16,17,18,19,20" "cuda_gpu_trace_new_us.csv 7,13,20"; do
    set -- $spec
    rm -rf ns
    "$VB" nsys "$FX/$1" --output_dir ns >ns.txt 2>&1 || { cat ns.txt >&2; fail "nsys import of $1"; }
    "$VB" trace ns/timeline.csv --format kineto >/dev/null 2>&1 || fail "trace of the nsys import of $1"
    "${CHECK[@]}" streams ns/timeline.csv ns/breakdown.csv ns/kineto "$2" || fail "HTA on the nsys import of $1"
done

# ---- 3. steps and stream lanes: every kernel kept ----
mkdir -p cuda
cat >cuda/timeline.csv <<'EOF'
rank,lane,kind,name,trial_type,trial_index,step,start_s,dur_s,bytes,flops,bucket
0,main,trial,FULL_0,FULL,0,-1,0.0,0.004,0,0,-1
0,main,step,step,FULL,0,0,0.0,0.002,0,0,-1
0,main,compute,matmul_forward_qkv,FULL,0,0,0.0001,0.0008,0,1e9,-1
0,main,step,step,FULL,0,1,0.002,0.002,0,0,-1
0,main,compute,matmul_forward_qkv,FULL,0,1,0.0021,0.0008,0,1e9,-1
0,stream7,memcpy,[CUDA memcpy Host-to-Device],FULL,0,0,0.00005,0.00004,1048576,0,-1
0,stream7,compute,void gemm_kernel<float>(float*),FULL,0,0,0.0001,0.0008,0,0,-1
0,stream7,compute,void gemm_kernel<float>(float*),FULL,0,1,0.0021,0.0008,0,0,-1
0,stream13,comm,ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>),FULL,0,0,0.0005,0.001,0,0,-1
0,stream13,comm,ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>),FULL,0,1,0.0025,0.001,0,0,-1
0,stream7,memcpy,[CUDA memset],FULL,0,1,0.0035,0.00001,4096,0,-1
EOF
sed -n 's/^0,/1,/p' cuda/timeline.csv >cuda/rank1.csv && cat cuda/rank1.csv >>cuda/timeline.csv && rm cuda/rank1.csv
"$VB" trace cuda/timeline.csv --format kineto >/dev/null 2>&1 || fail "trace of a timeline with stream lanes"
python3 "$SRC/tests/py/check_kineto.py" cuda/kineto streams >/dev/null || fail "kineto checks (steps and streams)"
"${CHECK[@]}" steps cuda/kineto 2 || fail "HTA on a timeline with steps and stream lanes"

echo "test_hta: ok"
