#!/usr/bin/env bash
# run_bench.sh: vitbench's training step against PyTorch's on this CPU.
#
#   bench/run_bench.sh [--config small] [--warmup N] [--steps N] [--<config key> VALUE ...]
#
# Builds vitbench + bench_step if needed (build dir $VB_BUILD_DIR, default
# <repo>/build), generates data/small if missing, then runs bench/bench_step
# and bench/torch_step.py back to back with the same config, warm-up and step
# counts, and prints the SYNTHETIC samples/s ratio vitbench / PyTorch.
# Both sides use 2 threads unless OMP_NUM_THREADS / VB_TORCH_THREADS say otherwise.
# Flags are passed to both programs; bench_step-only flags (--skip_full,
# --full_steps, --sgemm_seconds, --ops_csv) are dropped for torch_step.py.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${VB_BUILD_DIR:-$SRC/build}
PY=${VB_TORCH_PYTHON:-/usr/bin/python3}   # Debian's python3 has torch; pyenv's does not
DATA=$SRC/data/small
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
TORCH_THREADS=${VB_TORCH_THREADS:-$OMP_NUM_THREADS}

# --- build (incremental: cheap when up to date) ---
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > /dev/null
fi
cmake --build "$BUILD" -j "$(nproc)" --target vitbench bench_step > "$BUILD/run_bench_build.log" 2>&1 || {
    tail -n 30 "$BUILD/run_bench_build.log" >&2
    echo "run_bench: build failed (full log: $BUILD/run_bench_build.log)" >&2
    exit 1
}

# --- data ---
if [ ! -d "$DATA/train" ] || [ ! -f "$DATA/stats/global_stds.npy" ]; then
    echo "run_bench: generating $DATA"
    "$BUILD/vitbench" datagen --output_dir "$DATA" --years 1 --valid_years 1 \
        --samples_per_year 64 --channels 20 --img_size 96,192
fi

# --- split flags: torch_step.py does not know bench_step's own ---
TORCH_ARGS=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
        --skip_full) ;;
        --full_steps|--sgemm_seconds|--ops_csv) i=$((i + 1)) ;;
        *) TORCH_ARGS+=("${args[i]}") ;;
    esac
done

OUT=$(mktemp -d /tmp/run_bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

echo "================ vitbench (bench_step) ================"
"$BUILD/bench_step" --train_data_path "$DATA/train" --valid_data_path "$DATA/valid" \
    --global_means_path "$DATA/stats/global_means.npy" \
    --global_stds_path "$DATA/stats/global_stds.npy" "$@" | tee "$OUT/vb.txt"

echo "================ PyTorch (torch_step.py) ================"
"$PY" "$SRC/bench/torch_step.py" --threads "$TORCH_THREADS" "${TORCH_ARGS[@]+"${TORCH_ARGS[@]}"}" \
    | tee "$OUT/pt.txt"

# Pull key=value fields out of the machine-readable lines.
field() { awk -v tag="$1" -v key="$3" '$1 == tag { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) print kv[2] } }' "$2"; }
vb=$(field bench_step "$OUT/vb.txt" synthetic_samples_per_s)
vbb=$(field bench_step "$OUT/vb.txt" synthetic_best_samples_per_s)
vbf=$(field bench_step "$OUT/vb.txt" full_samples_per_s)
pt=$(field torch_step "$OUT/pt.txt" samples_per_s)
ptb=$(field torch_step "$OUT/pt.txt" best_samples_per_s)
if [ -z "$vb" ] || [ -z "$pt" ] || [ -z "$vbb" ] || [ -z "$ptb" ]; then
    echo "run_bench: could not read samples/s from the outputs" >&2
    exit 1
fi
echo "================ summary (samples/s) ================"
# "fastest step" is the robust number on a busy machine; the mean is the honest one on a quiet one
awk -v vb="$vb" -v vbb="$vbb" -v vbf="$vbf" -v pt="$pt" -v ptb="$ptb" 'BEGIN {
    printf "  %-36s %12s %14s\n", "", "mean step", "fastest step"
    printf "  %-36s %12.2f %14.2f\n", "vitbench SYNTHETIC (fwd+bwd+adam)", vb, vbb
    printf "  %-36s %12.2f %14s\n", "vitbench FULL (loader+step)", vbf, "-"
    printf "  %-36s %12.2f %14.2f\n", "PyTorch SYNTHETIC (fwd+bwd+adam)", pt, ptb
    printf "  %-36s %12.3f %14.3f\n", "ratio vitbench/PyTorch (SYNTHETIC)", vb / pt, vbb / ptb
}'
