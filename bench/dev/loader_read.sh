#!/usr/bin/env bash
# loader_read.sh: two ways of running the loader, side by side: benchy's IO
# trial on `base`-size samples (20 channels, 360x720, 41 MB with the target),
# A and B alternated (A B A B ...), from the page cache; prints each pair's IO
# samples/s, the ratio B / A, and the median ratio. By default A is
# --data_read pread and B --data_read mmap (the loader's two ways of reading
# a contiguous dataset); --normalize compares mmap, normalised by the
# workers, with mmap and --normalize_on_device true (the workers copy and
# check; the step normalises after the copy).
#
#   bench/dev/loader_read.sh [--pairs N] [--workers W] [--batch B] [--build DIR] [--normalize]
#
# Defaults: 6 pairs, 2 workers, batch 4, build/ (built if missing). The
# dataset (1 GB, a year of 24 samples for train and for valid) goes to a
# temporary directory, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
PAIRS=6 WORKERS=2 BATCH=4 BUILD=build
A_NAME=pread A_ARGS=(--data_read pread) B_NAME=mmap B_ARGS=(--data_read mmap)
while [ $# -gt 0 ]; do
    case "$1" in
    --pairs) PAIRS=${2:?}; shift ;;
    --workers) WORKERS=${2:?}; shift ;;
    --batch) BATCH=${2:?}; shift ;;
    --build) BUILD=${2:?}; shift ;;
    --normalize)
        A_NAME=workers A_ARGS=(--data_read mmap --normalize_on_device false)
        B_NAME=device B_ARGS=(--data_read mmap --normalize_on_device true)
        ;;
    -h | --help) sed -n 2,16p "$0"; exit 0 ;;
    *) echo "loader_read: unknown flag '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$BUILD/vitbench" ] || ./scripts/build.sh > /dev/null
VB=$BUILD/vitbench
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$VB" datagen --output_dir "$TMP/data" --years 1 --valid_years 1 --channels 20 --img_size 360,720 \
    --samples_per_year 24 --seed 0 > "$TMP/datagen.log" 2>&1
cat > "$TMP/io.yaml" << EOF
global: {report_freq: 5, exit_after_tests: True, profiler_mode: 'single', output_filename: 'benchy_output.json', output_dir: '', use_distributed_barrier: False}
IO: {run_benchmark: True, nbatches: 20, ntrials: 2, nwarmup: 1}
synthetic: {run_benchmark: False, nbatches: 1, ntrials: 1, nwarmup: 0}
full: {run_benchmark: False, nbatches: 1, ntrials: 1, nwarmup: 0}
EOF
io_rate() { # run-name loader-args... -> IO samples/s
    local name=$1
    shift
    "$VB" run --config base --backend cpu --global_batch_size "$BATCH" --num_data_workers "$WORKERS" \
        "$@" --train_data_path "$TMP/data/train" --valid_data_path "$TMP/data/valid" \
        --global_means_path "$TMP/data/stats/global_means.npy" --global_stds_path "$TMP/data/stats/global_stds.npy" \
        --benchy_config "$TMP/io.yaml" --output_dir "$TMP/runs" --run_name "$name" --progress none > "$TMP/$name.log" 2>&1
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $c["trial_type"] == "IO" { print $c["mean_samples_per_s"] }' "$TMP/runs/$name/summary.csv"
}
io_rate warmup --data_read mmap > /dev/null # the page cache holds the dataset from here on
echo "IO trial, base-size samples, batch $BATCH, $WORKERS workers, samples/s:"
printf "pair  %8s  %8s   %s\n" "$A_NAME" "$B_NAME" "$B_NAME/$A_NAME"
RATIOS=()
for p in $(seq 1 "$PAIRS"); do
    a=$(io_rate "a_$p" "${A_ARGS[@]}")
    b=$(io_rate "b_$p" "${B_ARGS[@]}")
    r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')
    RATIOS+=("$r")
    printf "%4d  %8.1f  %8.1f   %s\n" "$p" "$a" "$b" "$r"
done
printf "%s\n" "${RATIOS[@]}" | sort -n | awk -v an="$A_NAME" -v bn="$B_NAME" '{ r[NR] = $1 } END {
    m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
    printf "median ratio %s / %s: %.3f (min %.3f, max %.3f)\n", bn, an, m, r[1], r[NR] }'
