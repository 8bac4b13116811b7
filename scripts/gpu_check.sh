#!/usr/bin/env bash
# gpu_check.sh: one command for anyone with a GPU node.
#
#   scripts/gpu_check.sh [--quick] [--arch 90] [--out DIR] [--only SECTIONS]
#
# Builds vitbench with the CUDA backend (build-gpu/, or $BUILD_DIR), runs the
# CUDA op tests (every op against the CPU op) and their per-op timings at
# base's shapes (attention's rows printed), the attention cases under
# compute-sanitizer's memcheck, racecheck and synccheck (when it is
# installed), the 20-step golden test on the
# GPU (float32 with TF32 off against the PyTorch losses to 1e-4; bfloat16 with
# our attention and with cuDNN's, float16 with dynamic loss scaling, to 2e-2),
# the data planes (NCCL's calls on one rank; every tp / cp / dp layout with
# ranks sharing the GPU over MPI against one rank), then the tutorial's `base`
# config (batch 16) SYNTHETIC and FULL: amp_mode none with TF32 and in full
# float32, bf16, then vitbench's switches on top (attention cudnn,
# data_loader_config dali, enable_fused, enable_jit) in tf32, bf16 and fp16,
# with bf16 once with enable_jit alone, and prints a
# table: samples/s, achieved TFLOP/s, MFU against the GPU's dense peak for
# that precision, the process's peak GPU memory, and the tutorial's H100 NVL
# figures beside them; then CUPTI's cost (the best bf16 row's SYNTHETIC with
# --cupti false and true, alternated, and the ratio) and a FULL run whose
# timeline.csv gets CUPTI's stream lanes (checked, then made a Chrome trace
# with `vitbench trace`). --quick runs fewer
# batches and skips the layouts. --only runs some sections (a comma list of
# tests, sanitize, golden, planes, base, cupti; default all), after the build, so that
# the whole check can be split over calls of a few minutes each: the build
# and the dataset are reused. Logs and run directories go to --out
# (default gpu_check_out/). CUDA_ARCH, BUILD_DIR and CUDNN_ROOT (a cuDNN
# outside the toolkit, e.g. PyTorch's nvidia/cudnn package) are read.
#
# With --cuda_graphs true: the golden tests, the same losses bit for bit as
# the eager step, and a bf16_graphs row.
#
# --window [--budget S]: the check for a GPU lent for a few minutes, run by
# `scripts/gpu_window.sh run` from a build made elsewhere (BUILD_DIR holds
# vitbench and test_cuda_ops; nothing is built). In order of what users hit
# first: the op tests and attention timings, the golden losses (fp32 with
# TF32 off, bf16 with our attention and cuDNN's, fp16, fp8), graphs on = graphs
# off, memcheck and racecheck on the small tensor-core attention cases, a
# CUPTI-traced run, then base at batch 16 (none_tf32, bf16, bf16_cudnn,
# bf16_best with 4 and 8 loader workers, bf16_graphs, fp8, fp8_graphs, bf16 with the
# normalisation on the GPU and 8 workers) with 10 batches x 2 trials. Every step is held to what is left of S seconds (default 270); a
# step the budget leaves out is listed as not run, and the check fails. Its
# output is the summary gpu_window.sh keeps in OUT/summary.md. --prebuilt
# runs the chosen sections in full from such a build (gpu_window.sh run --full).
# --rows LIST runs only those base rows (labels as in the table); --cases
# LIST only those golden and graphs cases (golden_fp8, graphs_fp8, ...);
# --nbatches N sets benchy's batches per trial (the dataset is sized to hold
# them). The section torch (not in the defaults: it needs PyTorch) runs
# bench/dev/gpu_side_by_side.py, vitbench and the tutorial's PyTorch step
# alternated on this GPU, with --torch_args passed to it.
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)
ARCH=${CUDA_ARCH:-}
OUTDIR=$SRC/gpu_check_out
QUICK=0
WINDOW=0
PREBUILT=0
ROWS_ONLY=
CASES_ONLY=
TORCH_ARGS=
NB_SET=
BUDGET=270
ONLY=
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --only) ONLY=${2:?--only needs a list of sections}; shift ;;
    --arch) ARCH=${2:?--arch needs a value}; shift ;;
    --out) OUTDIR=${2:?--out needs a directory}; shift ;;
    --window) WINDOW=1 ;;
    --prebuilt) PREBUILT=1 ;;
    --rows) ROWS_ONLY=${2:?--rows needs a list of base rows}; shift ;;
    --cases) CASES_ONLY=${2:?--cases needs a list of golden and graphs cases}; shift ;;
    --torch_args) TORCH_ARGS=${2?--torch_args needs a string}; shift ;;
    --nbatches) NB_SET=${2:?--nbatches needs a number}; shift ;;
    --budget) BUDGET=${2:?--budget needs seconds}; shift ;;
    -h | --help) sed -n 2,51p "$0"; exit 0 ;;
    *) echo "gpu_check: unknown flag '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ $BUDGET =~ ^[0-9]+$ ]] || { echo "gpu_check: --budget: '$BUDGET' is not whole seconds" >&2; exit 2; }
[ -z "$NB_SET" ] || [[ $NB_SET =~ ^[1-9][0-9]{0,3}$ ]] || { echo "gpu_check: --nbatches: '$NB_SET' is not a number of batches (1..9999)" >&2; exit 2; }
[[ $ROWS_ONLY =~ ^[a-z0-9_,]*$ ]] || { echo "gpu_check: --rows: '$ROWS_ONLY' is not a comma list of row labels" >&2; exit 2; }
[[ $CASES_ONLY =~ ^[a-z0-9_,]*$ ]] || { echo "gpu_check: --cases: '$CASES_ONLY' is not a comma list of cases (golden_fp8, graphs_fp8, ...)" >&2; exit 2; }
[[ $TORCH_ARGS =~ ^[-a-z0-9_,.\ ]*$ ]] || { echo "gpu_check: --torch_args: '$TORCH_ARGS' holds characters other than flags, names and numbers" >&2; exit 2; }
if [ -z "$ONLY" ]; then
    ONLY=tests,sanitize,golden,planes,base,cupti
    [ $WINDOW = 1 ] && ONLY=tests,golden,sanitize,cupti,base
fi
for s in ${ONLY//,/ }; do
    case "$s" in
    tests | sanitize | golden | planes | base | cupti | torch) ;;
    *) echo "gpu_check: --only: unknown section '$s' (tests, sanitize, golden, planes, base, cupti, torch)" >&2; exit 2 ;;
    esac
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }
BUILD=${BUILD_DIR:-$SRC/build-gpu}
mkdir -p "$OUTDIR" || { echo "gpu_check: cannot create $OUTDIR" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# a cuDNN outside the toolkit: CMake finds it through CUDNN_ROOT, the loader here
[ -n "${CUDNN_ROOT:-}" ] && export LD_LIBRARY_PATH=$CUDNN_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

command -v nvidia-smi > /dev/null || { echo "gpu_check: nvidia-smi not found: no NVIDIA GPU driver here" >&2; exit 1; }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
[ -n "$GPU" ] || { echo "gpu_check: nvidia-smi lists no GPU" >&2; exit 1; }
if [ -z "$ARCH" ]; then
    ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '. ')
fi
T_START=$(date +%s)
VB=$BUILD/vitbench
FAILED=0
NOTRUN=()

# ---- the window's clock: every step is held to what is left of --budget ----
left() { echo $((T_START + BUDGET - $(date +%s))); }
# fits STEP SECONDS: true when the window has SECONDS left for STEP (always
# outside a window); otherwise STEP is listed as not run
fits() {
    [ $WINDOW = 0 ] && return 0
    [ "$(left)" -ge "$2" ] && return 0
    NOTRUN+=("$1")
    echo "gpu_check: $1: not run (window budget: $(left) s left, it needs about $2)"
    return 1
}
# lim CAP: one command's timeout: CAP seconds, or less when the window ends sooner
lim() {
    local l=$1
    if [ $WINDOW = 1 ]; then
        l=$(($(left) - 2))
        [ "$l" -gt "$1" ] && l=$1
        [ "$l" -lt 1 ] && l=1
    fi
    echo "$l"
}

# ---- build (a window runs a build made elsewhere: scripts/gpu_window.sh) ----
[ $WINDOW = 1 ] && PREBUILT=1
if [ $PREBUILT = 1 ]; then
    for b in vitbench test_cuda_ops; do
        [ -x "$BUILD/$b" ] || { echo "gpu_check: --window: no prebuilt $BUILD/$b (BUILD_DIR)" >&2; exit 2; }
    done
    cudnn=$(ldd "$VB" 2> /dev/null | awk '$1 ~ /^libcudnn\.so/ { print $3 }')
    cudnn_v=$(python3 -c 'import ctypes, sys; v = ctypes.CDLL(sys.argv[1]).cudnnGetVersion(); print("%d.%d.%d" % (v // 10000, v % 10000 // 100, v % 100))' "$cudnn" 2> /dev/null)
    echo "# vitbench GPU $([ $WINDOW = 1 ] && echo window || echo "check ($ONLY)"), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "gpu: $GPU (sm_$ARCH), driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)," \
        "CUDA $(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1) (driver)," \
        "cuDNN ${cudnn_v:-unknown} ($cudnn)$([ $WINDOW = 1 ] && echo ", budget $BUDGET s")"
    [ -f "$OUTDIR/pack.txt" ] && sed 's/^/pack: /' "$OUTDIR/pack.txt"
else
    echo "gpu_check: $GPU (sm_$ARCH); logs in $OUTDIR"
    t0=$(date +%s)
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DVB_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
        > "$OUTDIR/cmake.log" 2>&1 || { tail -n 30 "$OUTDIR/cmake.log" >&2; echo "gpu_check: configure failed" >&2; exit 1; }
    cmake --build "$BUILD" -j "$(nproc)" > "$OUTDIR/build.log" 2>&1 ||
        { grep -E "error" "$OUTDIR/build.log" | head -n 30 >&2; echo "gpu_check: build failed ($OUTDIR/build.log)" >&2; exit 1; }
    echo "gpu_check: built in $(($(date +%s) - t0)) s"
fi

# benchy's trials at base: NB batches, NT trials of each kind
NB=20 NT=3
[ $QUICK = 1 ] && NB=5 NT=2
[ $WINDOW = 1 ] && NB=10 NT=2
[ -n "$NB_SET" ] && NB=$NB_SET

# ---- base config's data, for the base and cupti sections: generated in the
# background while the tests run (a window's is half the size) ----
DATA=$OUTDIR/data_base
DATAGEN_PID=
datagen_start() {
    [ -f "$DATA/stats/global_stds.npy" ] && return
    # two years of (NB + 1) / 2 batches each: one epoch holds a trial's NB
    # batches (benchy cuts a trial at the epoch's end)
    local spy=$(((NB + 2) / 2 * 16))
    "$VB" datagen --output_dir "$DATA" --years 2 --valid_years 1 --channels 20 --img_size 360,720 \
        --samples_per_year $spy --seed 0 > "$OUTDIR/datagen.log" 2>&1 &
    DATAGEN_PID=$!
}
datagen_wait() {
    [ -n "$DATAGEN_PID" ] || return 0
    wait "$DATAGEN_PID" || { tail -n 5 "$OUTDIR/datagen.log"; echo "gpu_check: datagen failed ($OUTDIR/datagen.log)"; return 1; }
    DATAGEN_PID=
}

# ---- op tests ----
section_tests() {
    fits test_cuda_ops 40 || return
    timeout "$(lim 150)" "$BUILD/test_cuda_ops" > "$OUTDIR/test_cuda_ops.log" 2>&1
    local rc=$?
    echo "gpu_check: test_cuda_ops rc=$rc$([ $rc = 124 ] && echo ' (timed out)'): $(grep -c '^ok' "$OUTDIR/test_cuda_ops.log") cases ok, $(grep -c '^FAIL' "$OUTDIR/test_cuda_ops.log") failing"
    [ $rc = 0 ] || { FAILED=1; grep -E '^FAIL|CUDA|error' "$OUTDIR/test_cuda_ops.log" | head -n 20; }
    # fp8's cases, whole: FP8 kernels have run on no other GPU check yet
    grep -E '^(ok|FAIL|skip) +fp8' "$OUTDIR/test_cuda_ops.log" | sed 's/^/gpu_check: /'

    # per-op timings at base's shapes, batch 16: attention in float32 on the
    # CUDA cores, on TF32 and bf16 tensor cores, and cuDNN's (bf16)
    fits "test_cuda_ops --bench" 20 || return
    timeout "$(lim 90)" "$BUILD/test_cuda_ops" --bench 16 > "$OUTDIR/test_cuda_ops_bench.log" 2>&1 ||
        { echo "gpu_check: test_cuda_ops --bench failed ($OUTDIR/test_cuda_ops_bench.log)"; FAILED=1; }
    grep -E '^bench .*attention' "$OUTDIR/test_cuda_ops_bench.log" | sed 's/^/gpu_check: /'
}

# ---- the attention cases under compute-sanitizer: memcheck (out-of-bounds
# and misaligned accesses), racecheck (shared-memory hazards: a cp.async
# refill of a tile other warps still read, a read before the barrier that
# follows a wait) and synccheck (barriers under divergence). Each tool gets
# SANITIZE_TIMEOUT seconds (default 240); a timeout is inconclusive, not a
# failure. A window runs memcheck and racecheck on the small tensor-core
# cases (test_attention_tc_small). SANITIZE_CASES names other test_cuda_ops
# cases (test_fp8). ----
section_sanitize() {
    local CS tools=(memcheck racecheck synccheck) cases=test_attention cap=${SANITIZE_TIMEOUT:-240}
    CS=$(command -v compute-sanitizer || true)
    [ -z "$CS" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && CS=/usr/local/cuda/bin/compute-sanitizer
    if [ -z "$CS" ]; then
        echo "gpu_check: sanitize: skipped (compute-sanitizer not found)"
        [ $WINDOW = 1 ] && NOTRUN+=("sanitize (no compute-sanitizer)")
        return
    fi
    [ $WINDOW = 1 ] && tools=(memcheck racecheck) cases=test_attention_tc_small cap=${SANITIZE_TIMEOUT:-60}
    cases=${SANITIZE_CASES:-$cases}
    [[ $cases =~ ^[a-z0-9_,]+$ ]] || { echo "gpu_check: SANITIZE_CASES: '$cases' is not a list of test names"; FAILED=1; return; }
    local tool rc t
    for tool in "${tools[@]}"; do
        fits "sanitize $tool" 25 || continue
        t=$(lim "$cap")
        timeout "$t" "$CS" --tool "$tool" --error-exitcode 3 \
            "$BUILD/test_cuda_ops" --only "$cases" > "$OUTDIR/sanitize_$tool.log" 2>&1
        rc=$?
        case $rc in
        0) echo "gpu_check: sanitize $tool: pass ($cases, $(grep -c '^ok' "$OUTDIR/sanitize_$tool.log") ok)" ;;
        124)
            echo "gpu_check: sanitize $tool: inconclusive (over $t s; $OUTDIR/sanitize_$tool.log)"
            [ $WINDOW = 1 ] && NOTRUN+=("sanitize $tool (timed out)")
            ;;
        *)
            echo "gpu_check: sanitize $tool: FAIL (rc $rc; $OUTDIR/sanitize_$tool.log)"
            grep -E '^========= (Invalid|Race|Barrier|Error|ERROR)|^FAIL' "$OUTDIR/sanitize_$tool.log" | head -n 10
            FAILED=1
            ;;
        esac
    done
}

# ---- golden test on the GPU ----
# case_wanted KIND_NAME: --cases lists it, or no --cases was given
case_wanted() { [ -z "$CASES_ONLY" ] || [[ ",$CASES_ONLY," == *",$1,"* ]]; }
golden() { # name tol args...
    local name=$1 tol=$2
    shift 2
    case_wanted "golden_$name" || return 0
    fits "golden $name" 10 || return
    VB_GOLDEN_TOL=$tol VB_GOLDEN_ARGS="$*" timeout "$(lim 300)" bash "$SRC/tests/test_golden.sh" "$VB" \
        > "$OUTDIR/golden_$name.log" 2>&1
    local r=$?
    # every run's loss line: the float32 run's, then fp8's (test_golden.sh runs both)
    echo "gpu_check: golden $name (tol $tol): $([ $r = 0 ] && echo pass || echo "FAIL (rc $r)") — $(grep 'loss: rows' "$OUTDIR/golden_$name.log" | paste -sd ';' -)"
    [ $r = 0 ] || { FAILED=1; grep -m3 -E 'FAIL|error|vitbench:' "$OUTDIR/golden_$name.log"; }
}

# ---- a replayed CUDA graph is the eager step: the golden run's 20 losses
# with --cuda_graphs true and false must be the same bits, and run.json must
# show the replays (an eager step and a recording per batch buffer: 19
# replays of 20 steps, 18 with dali's two buffers) ----
graphs_same() { # name args...
    local name=$1 G=$SRC/tests/golden
    shift
    case_wanted "graphs_$name" || return 0
    fits "graphs $name" 15 || return
    local D=$G/era5 dir=$OUTDIR/graphs_$name on
    rm -rf "$dir"
    for on in false true; do
        timeout "$(lim 300)" "$VB" train --config tiny --backend cuda --train_data_path "$D/train" --valid_data_path "$D/valid" \
            --global_means_path "$D/stats/global_means.npy" --global_stds_path "$D/stats/global_stds.npy" \
            --init_checkpoint "$G/tiny_init.h5" --shuffle false --num_iters 20 --output_dir "$dir" \
            --run_name "$on" --progress none --cuda_graphs "$on" "$@" > "$dir.$on.log" 2>&1 ||
            { echo "gpu_check: graphs $name: train with cuda_graphs $on failed: $(tail -n 1 "$dir.$on.log")"; FAILED=1; return; }
    done
    local diff replays
    diff=$(paste -d, <(cut -d, -f3 "$dir/false/train_log.csv") <(cut -d, -f3 "$dir/true/train_log.csv") |
        awk -F, 'NR > 1 && $1 != $2 { n++ } END { print n + 0 }')
    replays=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['cuda_graphs']['replays'])" \
        "$dir/true/run.json" 2> /dev/null)
    if [ "$diff" = 0 ] && [ "${replays:-0}" -ge 18 ]; then
        echo "gpu_check: graphs $name: pass (20 losses identical, $replays replays)"
    else
        echo "gpu_check: graphs $name: FAIL ($diff of 20 losses differ, replays ${replays:-?})"
        FAILED=1
    fi
}

section_golden() {
    golden fp32 1e-4 --backend cuda --tf32 false
    golden bf16 2e-2 --backend cuda --amp_mode bf16
    golden bf16_cudnn 2e-2 --backend cuda --amp_mode bf16 --attention cudnn
    golden fp16 2e-2 --backend cuda --amp_mode fp16
    graphs_same fp32 --tf32 false
    graphs_same bf16_dali --amp_mode bf16 --attention cudnn --data_loader_config dali --enable_fused true
    # fp8 on the GPU: FP8 GEMMs with bf16 between them, against the CPU
    # emulation's PyTorch losses (the float32 run above is repeated)
    VB_GOLDEN_FP8_ARGS="--backend cuda" VB_GOLDEN_FP8_TOL=2e-2 golden fp8 1e-4 --backend cuda --tf32 false
    # fp8's state (scales, the amax history's roll) at the same addresses every step
    graphs_same fp8 --amp_mode fp8
    [ $WINDOW = 1 ] && return
    # TF32 GEMMs and attention: 11 significant bits in every product, bf16's bound holds
    golden tf32 2e-2 --backend cuda --tf32 true
    golden fp32_graphs 1e-4 --backend cuda --tf32 false --cuda_graphs true
    golden bf16_graphs 2e-2 --backend cuda --amp_mode bf16 --attention cudnn --enable_jit true --cuda_graphs true
    golden fp16_graphs 2e-2 --backend cuda --amp_mode fp16 --cuda_graphs true
    VB_GOLDEN_FP8_ARGS="--backend cuda --cuda_graphs true" VB_GOLDEN_FP8_TOL=2e-2 golden fp8_graphs 1e-4 \
        --backend cuda --tf32 false
}

# ---- data planes on this GPU ----
# the NCCL plane's calls on one rank; then every tp / cp / dp layout with
# ranks sharing the GPU over MPI (staged through page-locked host memory)
# against one rank, float32 with TF32 off, to test_dist.sh's 1e-5
section_planes() {
    local rc
    if [ -x "$BUILD/test_nccl_plane" ]; then
        "$BUILD/test_nccl_plane" > "$OUTDIR/test_nccl_plane.log" 2>&1
        rc=$?
        echo "gpu_check: test_nccl_plane rc=$rc: $(tail -n 1 "$OUTDIR/test_nccl_plane.log")"
        [ $rc = 0 ] || [ $rc = 77 ] || FAILED=1
    fi
    if [ $QUICK = 1 ]; then
        echo "gpu_check: layouts on one GPU over MPI: skipped (--quick)"
    else
        VB_DIST_ARGS="--backend cuda --comm_backend mpi --tf32 false" bash "$SRC/tests/test_dist.sh" "$VB" \
            > "$OUTDIR/dist_gpu.log" 2>&1
        rc=$?
        echo "gpu_check: layouts on one GPU over MPI: $([ $rc = 0 ] && echo pass || echo FAIL) — $(grep -c '== 1 rank' "$OUTDIR/dist_gpu.log") layouts equal to one rank"
        [ $rc = 0 ] || { FAILED=1; grep FAIL "$OUTDIR/dist_gpu.log" | head -n 5; }
    fi
}

BENCHY=$OUTDIR/benchy.yaml
cat > "$BENCHY" << EOF
global: {report_freq: 5, exit_after_tests: True, profiler_mode: 'single', output_filename: 'benchy_output.json', output_dir: '', use_distributed_barrier: False}
IO: {run_benchmark: True, nbatches: $NB, ntrials: $NT, nwarmup: 1}
synthetic: {run_benchmark: True, nbatches: $NB, ntrials: $NT, nwarmup: 1}
full: {run_benchmark: True, nbatches: $NB, ntrials: $NT, nwarmup: 1}
EOF

# dense peak TFLOP/s of the GPU for a precision (datasheet, without sparsity)
peak() { # precision: fp32 tf32 bf16 fp16 (the same dense tensor-core peak as bf16) fp8
    local p
    case "$GPU" in
    *H100*NVL*) p=(60 417.5 835 1670) ;;
    *H100*PCIe*) p=(51.2 378 756.5 1513) ;;
    *H100* | *H200* | *GH200*) p=(66.9 494.7 989.4 1978.9) ;;
    *A100*) p=(19.5 156 312 0) ;;
    *) p=(0 0 0 0) ;;
    esac
    case "$1" in fp32) echo "${p[0]}" ;; tf32) echo "${p[1]}" ;; bf16 | fp16) echo "${p[2]}" ;; fp8) echo "${p[3]}" ;; esac
}

ROWS=()
run_base() { # label precision tutorial-figure args...
    local label=$1 prec=$2 tut=$3
    shift 3
    [ -z "$ROWS_ONLY" ] || [[ ",$ROWS_ONLY," == *",$label,"* ]] || return 0
    fits "base $label" 25 || return
    local dir=$OUTDIR/runs
    rm -rf "${dir:?}/base_$label"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$OUTDIR/mem_$label.txt" 2> /dev/null &
    local smi=$!
    timeout "$(lim 900)" "$VB" run --config base --backend cuda --global_batch_size 16 --num_data_workers "${WORKERS:-4}" \
        --train_data_path "$DATA/train" --valid_data_path "$DATA/valid" \
        --global_means_path "$DATA/stats/global_means.npy" --global_stds_path "$DATA/stats/global_stds.npy" \
        --benchy_config "$BENCHY" --output_dir "$dir" --run_name "base_$label" --progress none "$@" \
        > "$OUTDIR/run_$label.log" 2>&1
    local r=$?
    kill $smi 2> /dev/null
    wait $smi 2> /dev/null
    local sum=$dir/base_$label/summary.csv
    if [ $r != 0 ] || [ ! -f "$sum" ]; then
        echo "gpu_check: base $label FAILED (rc $r$([ $r = 124 ] && echo ', timed out')): $(tail -n 1 "$OUTDIR/run_$label.log")"
        FAILED=1
        return
    fi
    local mem
    mem=$(sort -n "$OUTDIR/mem_$label.txt" | tail -n 1)
    ROWS+=("$(awk -F, -v label="$label" -v prec="$prec" -v pk="$(peak "$prec")" -v mem="${mem:-0}" -v tut="$tut" '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        { sps[$c["trial_type"]] = $c["mean_samples_per_s"]; tf[$c["trial_type"]] = $c["achieved_tflop_per_s"] }
        END {
            mfu = pk > 0 ? 100 * tf["SYNTHETIC"] / pk : 0
            full_pct = sps["SYNTHETIC"] > 0 ? 100 * sps["FULL"] / sps["SYNTHETIC"] : 0
            printf "| %-12s | %-5s | %9.1f | %9.1f | %5.0f%% | %9.1f | %8.1f | %6.1f%% | %8.1f | %s |", label, prec,
                   sps["SYNTHETIC"], sps["FULL"], full_pct, sps["IO"], tf["SYNTHETIC"], mfu, mem / 1024, tut
        }' "$sum")")
}

BEST=(--amp_mode bf16 --attention cudnn --data_loader_config dali --enable_fused true --enable_jit true)
section_base() {
    datagen_wait || { FAILED=1; NOTRUN+=("base (no data)"); return; }
    if [ $WINDOW = 1 ]; then
        run_base none_tf32 tf32 12.5 --amp_mode none --tf32 true
        run_base bf16 bf16 102 --amp_mode bf16
        run_base bf16_cudnn bf16 - --amp_mode bf16 --attention cudnn
        run_base bf16_best bf16 126 "${BEST[@]}"
        WORKERS=8 run_base bf16_best_w8 bf16 - "${BEST[@]}"
        run_base bf16_graphs bf16 - "${BEST[@]}" --cuda_graphs true
        run_base fp8 fp8 - "${BEST[@]}" --amp_mode fp8
        run_base fp8_graphs fp8 - "${BEST[@]}" --amp_mode fp8 --cuda_graphs true
        WORKERS=8 run_base bf16_nod_w8 bf16 - "${BEST[@]}" --normalize_on_device true
    else
        # the tutorial's ladder first, then vitbench's own switches on top: cuDNN's
        # fused attention, the dali-style overlapped copy, fused Adam, the fused
        # elementwise passes (enable_jit)
        run_base none_tf32 tf32 12.5 --amp_mode none --tf32 true
        run_base none_fp32 fp32 - --amp_mode none --tf32 false
        run_base tf32_dali tf32 - --amp_mode none --tf32 true --data_loader_config dali --enable_fused true --enable_jit true
        run_base bf16 bf16 102 --amp_mode bf16
        run_base bf16_jit bf16 - --amp_mode bf16 --enable_jit true
        run_base bf16_cudnn bf16 - --amp_mode bf16 --attention cudnn
        run_base bf16_best bf16 126 "${BEST[@]}"
        # FULL's bar (95% of SYNTHETIC) with enough workers: the same with 8
        WORKERS=8 run_base bf16_best_w8 bf16 - "${BEST[@]}"
        # the workers only copy and check; the GPU normalises after the copy (as DALI does)
        run_base bf16_nod bf16 - "${BEST[@]}" --normalize_on_device true
        WORKERS=8 run_base bf16_nod_w8 bf16 - "${BEST[@]}" --normalize_on_device true
        run_base fp16_best fp16 - --amp_mode fp16 --attention cudnn --data_loader_config dali --enable_fused true --enable_jit true
        run_base bf16_graphs bf16 - "${BEST[@]}" --cuda_graphs true
        # Transformer Engine's FP8 recipe on the GEMMs (attention stays
        # cuDNN's bf16); MFU against the dense FP8 peak
        run_base fp8 fp8 - "${BEST[@]}" --amp_mode fp8
        run_base fp8_graphs fp8 - "${BEST[@]}" --amp_mode fp8 --cuda_graphs true
    fi

    # run.json's device record (memory, clocks, ECC) from the best row
    local GPU_JSON=$OUTDIR/runs/base_bf16_best/run.json
    if [ -f "$GPU_JSON" ]; then
        if python3 -c "import json, sys; g = json.load(open(sys.argv[1]))['gpu']; print('gpu_check: run.json gpu:', g)" \
            "$GPU_JSON" 2> /dev/null; then :; else
            echo "gpu_check: run.json has no gpu record ($GPU_JSON)"
            FAILED=1
        fi
    fi

    echo
    echo "base config, batch 16, one $GPU (SYNTHETIC and FULL: samples/s, mean of $NT trials of $NB batches)"
    echo "| run          | prec  | SYNTHETIC |      FULL | FULL % |        IO | TFLOP/s  |   MFU   | GPU GiB  | tutorial H100 NVL samples/s |"
    echo "|--------------|-------|-----------|-----------|--------|-----------|----------|---------|----------|-----------------------------|"
    local r
    for r in "${ROWS[@]}"; do echo "$r"; done
    echo "(4 loader workers unless the label says _w8; _nod: --normalize_on_device true; FULL %: FULL over SYNTHETIC; IO: the loader alone; MFU: SYNTHETIC achieved TFLOP/s over the dense peak of the precision; GPU GiB: most memory in use on the GPU during the run, from nvidia-smi)"

    # where the step goes: the SYNTHETIC step's largest ops (device time from
    # CUDA events, ops.csv) for the TF32 baseline and the bf16 rows; ms per
    # step is the op's share of the step times the step's time (batch 16 over
    # the SYNTHETIC samples/s), calls per step from the op's call count
    local label ops
    for label in none_tf32 bf16 bf16_best fp8; do
        ops=$OUTDIR/runs/base_$label/ops.csv
        [ -f "$ops" ] || continue
        echo
        echo "$label: largest ops of the SYNTHETIC step (ms per step, share of the step, ms per call)"
        python3 - "$ops" "$OUTDIR/runs/base_$label/summary.csv" << 'PY' || FAILED=1
import csv, sys
sps = [float(r["mean_samples_per_s"]) for r in csv.DictReader(open(sys.argv[2], newline=""))
       if r["trial_type"] == "SYNTHETIC"][0]
step_ms = 1e3 * 16 / sps
rows = [r for r in csv.DictReader(open(sys.argv[1], newline="")) if r["trial_type"] == "SYNTHETIC" and r["rank"] == "0"]
rows.sort(key=lambda r: -float(r["total_s"]))
print("  step %.2f ms" % step_ms)
for r in rows[:10]:
    share = float(r["share_of_step"] or 0)
    print("  %-32s %8.2f ms  %5.1f%%  %8.3f ms/call  %s" % (r["name"], share * step_ms, 100 * share,
          1e3 * float(r["avg_s"]), r["category"]))
PY
    done
}

# ---- CUPTI's cost: bf16 SYNTHETIC without and with the tracer, alternated
# (A B A B) so that a drift of the GPU's clocks hits both; the ratio is the
# throughput kept with --cupti true. A traced run must write kernels.csv with
# rows, which `vitbench nsys` reads back as a cuda_gpu_kern_sum report. ----
# kernels_csv_ok RUNDIR NAME: kernels.csv has rows and `vitbench nsys` reads it
kernels_csv_ok() {
    local k=$1/kernels.csv n
    n=$(($(wc -l < "$k" 2> /dev/null || echo 1) - 1))
    if [ "$n" -lt 1 ] || ! "$VB" nsys "$k" --output_dir "$OUTDIR/nsys_$2" > "$OUTDIR/nsys_$2.log" 2>&1; then
        echo "gpu_check: $2: kernels.csv missing, empty or unreadable by vitbench nsys ($OUTDIR/nsys_$2.log)"
        FAILED=1
        return 1
    fi
    echo "gpu_check: $2: kernels.csv has $n kernel rows; vitbench nsys read it"
}

cupti_overhead() {
    local BENCHY_SYN=$OUTDIR/benchy_synthetic.yaml
    cat > "$BENCHY_SYN" << EOF
global: {report_freq: 5, exit_after_tests: True, profiler_mode: 'single', output_filename: 'benchy_output.json', output_dir: '', use_distributed_barrier: False}
IO: {run_benchmark: False, nbatches: $NB, ntrials: $NT, nwarmup: 1}
synthetic: {run_benchmark: True, nbatches: $NB, ntrials: $NT, nwarmup: 1}
full: {run_benchmark: False, nbatches: $NB, ntrials: $NT, nwarmup: 1}
EOF
    local SPS_OFF="" SPS_ON="" pass on name r sum sps
    for pass in 1 2; do
        for on in false true; do
            name=cupti_${on}_$pass
            rm -rf "${OUTDIR:?}/runs/$name"
            "$VB" run --config base --backend cuda --global_batch_size 16 "${BEST[@]}" --train_data_path "$DATA/train" --valid_data_path "$DATA/valid" \
                --global_means_path "$DATA/stats/global_means.npy" --global_stds_path "$DATA/stats/global_stds.npy" \
                --benchy_config "$BENCHY_SYN" --output_dir "$OUTDIR/runs" --run_name "$name" --progress none \
                --cupti "$on" > "$OUTDIR/run_$name.log" 2>&1
            r=$?
            sum=$OUTDIR/runs/$name/summary.csv
            if [ $r != 0 ] || [ ! -f "$sum" ]; then
                echo "gpu_check: $name FAILED (rc $r): $(tail -n 1 "$OUTDIR/run_$name.log")"
                FAILED=1
                continue
            fi
            sps=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
                $c["trial_type"] == "SYNTHETIC" { print $c["mean_samples_per_s"] }' "$sum")
            if [ "$on" = false ]; then SPS_OFF+="$sps "; else SPS_ON+="$sps "; fi
            [ "$on" = true ] && kernels_csv_ok "$OUTDIR/runs/$name" "$name" > /dev/null
        done
    done
    echo
    echo "CUPTI overhead, bf16_best SYNTHETIC, samples/s of runs alternated A B A B:"
    echo "  --cupti false: $SPS_OFF"
    echo "  --cupti true:  $SPS_ON"
    awk -v a="$SPS_OFF" -v b="$SPS_ON" 'BEGIN {
        na = split(a, x, " "); nb = split(b, y, " "); sa = 0; sb = 0
        for (i = 1; i <= na; i++) sa += x[i]
        for (i = 1; i <= nb; i++) sb += y[i]
        if (na > 0 && nb > 0 && sa > 0) printf "  ratio true / false: %.4f\n", (sb / nb) / (sa / na)
    }'
}

# ---- the timeline's GPU lanes: a bf16_best FULL run traced by CUPTI. Its
# timeline.csv must hold stream<N> lanes whose kernels sit in the window's
# steps (step >= 0), its kernels.csv must be readable by `vitbench nsys`, and
# `vitbench trace` must turn it into a Chrome trace. Printed: per stream
# lane, its rows by kind and the share of the window's step time its rows
# cover (one stream runs one thing at a time). ----
# --cupti true under another CUDA tool (compute-sanitizer here): either CUPTI
# is free and kernels.csv has rows, or the tool holds it and the run exits 2
# with its one line before any trial; never a run that traced nothing
cupti_held_by_tool() {
    local CS G=$SRC/tests/golden r
    CS=$(command -v compute-sanitizer || true)
    [ -z "$CS" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && CS=/usr/local/cuda/bin/compute-sanitizer
    [ -n "$CS" ] || { echo "gpu_check: cupti under compute-sanitizer: skipped (not found)"; return; }
    cat > "$OUTDIR/benchy_tiny.yaml" << EOF
global: {report_freq: 5, exit_after_tests: True, profiler_mode: 'single', output_filename: 'benchy_output.json', output_dir: '', use_distributed_barrier: False}
IO: {run_benchmark: False, nbatches: 2, ntrials: 1, nwarmup: 0}
synthetic: {run_benchmark: True, nbatches: 2, ntrials: 1, nwarmup: 0}
full: {run_benchmark: False, nbatches: 2, ntrials: 1, nwarmup: 0}
EOF
    rm -rf "$OUTDIR/runs/cupti_held"
    timeout "$(lim 120)" "$CS" --tool memcheck "$VB" run --config tiny --backend cuda --train_data_path "$G/era5/train" \
        --valid_data_path "$G/era5/valid" --global_means_path "$G/era5/stats/global_means.npy" \
        --global_stds_path "$G/era5/stats/global_stds.npy" --benchy_config "$OUTDIR/benchy_tiny.yaml" \
        --output_dir "$OUTDIR/runs" --run_name cupti_held --progress none --cupti true > "$OUTDIR/cupti_held.log" 2>&1
    r=$?
    if [ $r = 0 ] && [ "$(($(wc -l < "$OUTDIR/runs/cupti_held/kernels.csv" 2> /dev/null || echo 1) - 1))" -gt 0 ]; then
        echo "gpu_check: cupti under compute-sanitizer: traced (the sanitizer leaves CUPTI free; kernels.csv has rows)"
    elif [ $r = 2 ] && grep -q "CUPTI is held by another tool" "$OUTDIR/cupti_held.log"; then
        echo "gpu_check: cupti under compute-sanitizer: pass (exit 2: $(grep -m1 -o 'CUPTI is held by another tool[^(]*' "$OUTDIR/cupti_held.log"))"
    else
        echo "gpu_check: cupti under compute-sanitizer: FAIL (rc $r: neither kernels.csv with rows nor exit 2 with its line; $OUTDIR/cupti_held.log)"
        FAILED=1
    fi
}

section_cupti() {
    datagen_wait || { FAILED=1; NOTRUN+=("cupti (no data)"); return; }
    if [ $WINDOW = 0 ]; then
        cupti_overhead
        cupti_held_by_tool
    fi
    fits "cupti timeline" 25 || return
    local BENCHY_FULL=$OUTDIR/benchy_full.yaml name=timeline_cupti
    cat > "$BENCHY_FULL" << EOF
global: {report_freq: 5, exit_after_tests: True, profiler_mode: 'single', output_filename: 'benchy_output.json', output_dir: '', use_distributed_barrier: False}
IO: {run_benchmark: False, nbatches: 6, ntrials: 1, nwarmup: 1}
synthetic: {run_benchmark: False, nbatches: 6, ntrials: 1, nwarmup: 1}
full: {run_benchmark: True, nbatches: 6, ntrials: 1, nwarmup: 1}
EOF
    rm -rf "${OUTDIR:?}/runs/$name"
    if timeout "$(lim 300)" "$VB" run --config base --backend cuda --global_batch_size 16 --num_data_workers 4 "${BEST[@]}" \
        --train_data_path "$DATA/train" --valid_data_path "$DATA/valid" \
        --global_means_path "$DATA/stats/global_means.npy" --global_stds_path "$DATA/stats/global_stds.npy" \
        --benchy_config "$BENCHY_FULL" --output_dir "$OUTDIR/runs" --run_name "$name" --progress none \
        --cupti true --profile_steps 3 > "$OUTDIR/run_$name.log" 2>&1; then
        local tl=$OUTDIR/runs/$name/timeline.csv
        # kernel names hold commas (quoted, RFC 4180): read it with a CSV parser
        python3 - "$tl" << 'PY' || FAILED=1
import csv, re, sys
steps, nsteps, lanes, outside = 0.0, 0, {}, 0
for r in csv.DictReader(open(sys.argv[1], newline="")):
    if r["lane"] == "main" and r["kind"] == "step":
        steps += float(r["dur_s"]); nsteps += 1
    elif re.fullmatch(r"stream[0-9]+", r["lane"]):
        l = lanes.setdefault(r["lane"], {"compute": 0, "comm": 0, "memcpy": 0, "busy": 0.0})
        l[r["kind"]] = l.get(r["kind"], 0) + 1
        l["busy"] += float(r["dur_s"])
        outside += int(r["step"]) < 0
for name in sorted(lanes, key=lambda n: int(n[6:])):
    l = lanes[name]
    print("gpu_check: timeline %s: %d compute, %d comm, %d memcpy rows, %.1f%% of %d steps busy"
          % (name, l["compute"], l["comm"], l["memcpy"], 100 * l["busy"] / steps if steps else 0, nsteps))
if nsteps == 0 or outside or not any(l["compute"] for l in lanes.values()):
    print("gpu_check: timeline: no stream lane with kernels in the steps")
    sys.exit(1)
PY
        kernels_csv_ok "$OUTDIR/runs/$name" "$name"
        if "$VB" trace "$OUTDIR/runs/$name" > "$OUTDIR/trace_$name.log" 2>&1 && [ -s "$OUTDIR/runs/$name/trace.json" ]; then
            echo "gpu_check: timeline: trace.json written ($OUTDIR/runs/$name/trace.json)"
        else
            echo "gpu_check: timeline: vitbench trace failed ($OUTDIR/trace_$name.log)"
            FAILED=1
        fi
        grep -i "warn" "$OUTDIR/run_$name.log" | sed 's/^/gpu_check: timeline: /'
    else
        echo "gpu_check: $name FAILED: $(tail -n 1 "$OUTDIR/run_$name.log")"
        FAILED=1
    fi
}

# ---- vitbench against PyTorch on this GPU: bench/dev/gpu_side_by_side.py
# alternates the two in one process tree (vitbench runs, torch steps in
# between) with the batch resident and copied per step; --torch_args passes
# it flags (--precisions bf16 --rounds 2 ...). In a window it gets what is
# left of the budget and stops starting rounds that would overrun it. ----
section_torch() {
    datagen_wait || { FAILED=1; NOTRUN+=("torch (no data)"); return; }
    # PyTorch loads its own CUDA libraries: the search path set for vitbench's
    # (gpu_window.sh) goes to vitbench's runs only (VB_LD_LIBRARY_PATH)
    local py=(env VB_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" LD_LIBRARY_PATH= PYTHONUNBUFFERED=1 python3)
    if ! "${py[@]}" -c 'import torch, yaml; assert torch.cuda.is_available()' 2> /dev/null; then
        echo "gpu_check: torch side by side: not run (python3 has no torch with CUDA, or no yaml)"
        NOTRUN+=("torch (no PyTorch)")
        return
    fi
    fits "torch side by side" 90 || return
    local budget=0 r
    [ $WINDOW = 1 ] && budget=$(($(left) - 15))
    # shellcheck disable=SC2086 # TORCH_ARGS is a list of flags, checked above
    timeout "$(lim 3600)" "${py[@]}" "$SRC/bench/dev/gpu_side_by_side.py" --vitbench "$VB" \
        --data "$DATA" --out "$OUTDIR/torch" --budget "$budget" $TORCH_ARGS > "$OUTDIR/torch.log" 2>&1
    r=$?
    grep -E '^gpu_side_by_side: (torch .* ready|.*budget|FAILED)' "$OUTDIR/torch.log" | sed 's/^/gpu_check: /'
    if [ $r = 0 ] && [ -s "$OUTDIR/torch/side_by_side.md" ] && ! grep -q FAILED "$OUTDIR/torch.log"; then
        echo
        cat "$OUTDIR/torch/side_by_side.md"
    else
        echo "gpu_check: torch side by side FAILED (rc $r): $(tail -n 1 "$OUTDIR/torch.log")"
        FAILED=1
    fi
}

# ---- the sections, in the order asked (--only) ----
if want base || want cupti; then datagen_start; fi
for s in ${ONLY//,/ }; do "section_$s"; done
[ -n "$DATAGEN_PID" ] && wait "$DATAGEN_PID"

if [ $WINDOW = 1 ]; then
    echo
    if [ ${#NOTRUN[@]} -gt 0 ]; then
        echo "gpu_check: window INCOMPLETE after $(($(date +%s) - T_START)) s of $BUDGET: not run: $(IFS=';'; echo "${NOTRUN[*]}")"
        FAILED=1
    fi
    echo "gpu_check: window $([ $FAILED = 0 ] && echo PASS || echo FAIL) in $(($(date +%s) - T_START)) s (budget $BUDGET s)"
fi
exit $FAILED
