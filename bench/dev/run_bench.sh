#!/usr/bin/env bash
# run_bench.sh: vitbench's training step against PyTorch's on this CPU.
#
#   bench/dev/run_bench.sh [--pairs N] [--config small] [--warmup N] [--steps N] [--<config key> VALUE ...]
#
# Builds vitbench + bench_step if needed (build dir $VB_BUILD_DIR, default
# <repo>/build), generates data/small if missing, then runs bench/bench_step
# and bench/dev/torch_step.py alternately (A B A B, --pairs N times, default 3) with
# the same config, warm-up and step counts, and prints each pair's SYNTHETIC
# samples/s ratio vitbench / PyTorch, the medians over pairs, the median
# step rate as a fraction of the same run's model-shape sgemm rate, and both
# sides' step rates as fractions of the cores' FMA peak measured in the pair
# (the model's FLOPs per sample over each side's step time).
# Both sides use 2 threads unless OMP_NUM_THREADS / VB_TORCH_THREADS say otherwise.
# Flags are passed to both programs; bench_step-only flags (--skip_full,
# --full_steps, --sgemm_seconds, --ops_csv) are dropped for torch_step.py.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
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

# --- --pairs N is run_bench's own (default 3); the rest go to both programs ---
PAIRS=3
args=()
while [ $# -gt 0 ]; do
    if [ "$1" = --pairs ]; then
        PAIRS=${2:?--pairs needs a count}
        shift 2
        continue
    fi
    args+=("$1")
    shift
done
case "$PAIRS" in '' | *[!0-9]* | 0) echo "run_bench: --pairs expects an integer >= 1, got '$PAIRS'" >&2; exit 2 ;; esac
set -- "${args[@]+"${args[@]}"}"

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

# Pull key=value fields out of the machine-readable lines.
field() { awk -v tag="$1" -v key="$3" '$1 == tag { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) print kv[2] } }' "$2"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# A B A B ...: a shared machine drifts by tens of percent between back-to-back
# runs, so each pair's ratio is taken from two runs next to each other and the
# summary is the median over pairs.
: > "$OUT/pairs.txt"
for ((p = 1; p <= PAIRS; p++)); do
    echo "================ pair $p/$PAIRS: vitbench (bench_step) ================"
    "$BUILD/bench_step" --train_data_path "$DATA/train" --valid_data_path "$DATA/valid" \
        --global_means_path "$DATA/stats/global_means.npy" \
        --global_stds_path "$DATA/stats/global_stds.npy" "$@" | tee "$OUT/vb.txt"
    echo "================ pair $p/$PAIRS: PyTorch (torch_step.py) ================"
    "$PY" "$SRC/bench/dev/torch_step.py" --threads "$TORCH_THREADS" "${TORCH_ARGS[@]+"${TORCH_ARGS[@]}"}" \
        | tee "$OUT/pt.txt"
    vb=$(field bench_step "$OUT/vb.txt" synthetic_samples_per_s)
    vbb=$(field bench_step "$OUT/vb.txt" synthetic_best_samples_per_s)
    vbf=$(field bench_step "$OUT/vb.txt" full_samples_per_s)
    frac=$(field bench_step "$OUT/vb.txt" sgemm_fraction)
    peak=$(field bench_step "$OUT/vb.txt" peak_gflops)
    gflop=$(field bench_step "$OUT/vb.txt" step_gflop)
    batch=$(field bench_step "$OUT/vb.txt" batch)
    pt=$(field torch_step "$OUT/pt.txt" samples_per_s)
    ptb=$(field torch_step "$OUT/pt.txt" best_samples_per_s)
    if [ -z "$vb" ] || [ -z "$pt" ] || [ -z "$vbb" ] || [ -z "$ptb" ] || [ -z "$frac" ] || [ -z "$peak" ] ||
        [ -z "$gflop" ] || [ -z "$batch" ]; then
        echo "run_bench: could not read samples/s from the outputs" >&2
        exit 1
    fi
    # both sides' step rates as fractions of this pair's FMA peak: the same
    # model FLOPs per sample (vit_train_flops), divided by each one's time
    awk -v vb="$vb" -v vbb="$vbb" -v vbf="$vbf" -v pt="$pt" -v ptb="$ptb" -v f="$frac" -v pk="$peak" \
        -v g="$gflop" -v b="$batch" 'BEGIN {
        print vb, vbb, vbf, pt, ptb, f, vb * g / b / pk, pt * g / b / pk, pk }' >> "$OUT/pairs.txt"
done

echo "================ summary (samples/s, $PAIRS alternated pairs) ================"
awk '{ printf "  pair %d: vitbench %.2f  PyTorch %.2f  ratio %.3f  step/sgemm %.1f%%  step/peak vitbench %.1f%% PyTorch %.1f%% (FMA peak %.1f GFLOP/s)\n",
           NR, $1, $4, $1 / $4, 100 * $6, 100 * $7, 100 * $8, $9 }' "$OUT/pairs.txt"
col() { awk -v c="$1" '{ print $c }' "$OUT/pairs.txt" | median; }
vb=$(col 1) vbb=$(col 2) vbf=$(col 3) pt=$(col 4) ptb=$(col 5) frac=$(col 6) vpk=$(col 7) ppk=$(col 8)
ratio=$(awk '{ print $1 / $4 }' "$OUT/pairs.txt" | median)
ratio_best=$(awk '{ print $2 / $5 }' "$OUT/pairs.txt" | median)
# "fastest step" is the robust number on a busy machine; the mean is the honest one on a quiet one
awk -v vb="$vb" -v vbb="$vbb" -v vbf="$vbf" -v pt="$pt" -v ptb="$ptb" -v r="$ratio" -v rb="$ratio_best" -v f="$frac" \
    -v vpk="$vpk" -v ppk="$ppk" 'BEGIN {
    printf "  %-44s %12s %14s\n", "medians over pairs", "mean step", "fastest step"
    printf "  %-44s %12.2f %14.2f\n", "vitbench SYNTHETIC (fwd+bwd+adam)", vb, vbb
    if (vbf > 0) printf "  %-44s %12.2f %14s\n", "vitbench FULL (loader+step)", vbf, "-"
    else printf "  %-44s %12s %14s\n", "vitbench FULL (loader+step)", "skipped", "-"
    printf "  %-44s %12.2f %14.2f\n", "PyTorch SYNTHETIC (fwd+bwd+adam)", pt, ptb
    printf "  %-44s %12.3f %14.3f\n", "ratio vitbench/PyTorch (median of pairs)", r, rb
    printf "  %-44s %11.1f%%\n", "vitbench step rate / model-shape sgemm rate", 100 * f
    printf "  %-44s %11.1f%%\n", "vitbench step rate / FMA peak", 100 * vpk
    printf "  %-44s %11.1f%%\n", "PyTorch step rate / FMA peak", 100 * ppk
}'
