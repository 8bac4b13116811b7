#!/usr/bin/env bash
# test_h5_compressed.sh <vitbench>: ERA5 years compressed as they are often
# shipped (h5repack -f SHUF -f GZIP=4, h5py's compression="gzip",
# shuffle=True) are read as fully written: HDF5 calls a filtered chunked
# dataset "partly allocated" (its storage is smaller than its data), and a
# run on such years once exited 2 claiming they were only partly written.
#   1. training on gzip + shuffle years made by h5repack completes and reads
#      the samples the uncompressed years hold: the same losses, bit for bit;
#   2. a compressed year with chunks never written is still refused
#      (tests/test_data.c writes that one, with the same filters).
# Exit 77 (skipped) without h5repack (scripts/setup.sh --test installs
# hdf5-tools).
set -u

VB=${1:?usage: test_h5_compressed.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_h5_compressed: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
command -v h5repack >/dev/null || { echo "test_h5_compressed: SKIP: no h5repack (scripts/setup.sh --test)"; exit 77; }
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_h5_compressed.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

"$VB" datagen --output_dir plain --years 2 --valid_years 1 --channels 4 --img_size 32,64 --samples_per_year 16 \
    --seed 3 >/dev/null 2>&1 || fail "datagen"
cp -r plain packed
for f in packed/train/*.h5 packed/valid/*.h5; do
    h5repack -l fields:CHUNK=1x4x32x64 -f fields:SHUF -f fields:GZIP=4 "${f/packed/plain}" "$f" ||
        fail "h5repack $f"
done
h5dump -pH packed/train/*.h5 | grep -q "DEFLATE" || fail "h5repack wrote no gzip filter: $(h5dump -pH packed/train/*.h5 | head -40)"
run() { # DATA NAME: one run of the tiny config on DATA's years, a seed fixed
    "$VB" train --config tiny --num_iters 3 --seed 1 --train_data_path "$1/train" \
        --valid_data_path "$1/valid" --global_means_path "$1/stats/global_means.npy" \
        --global_stds_path "$1/stats/global_stds.npy" --output_dir out --run_name "$2" >"$2.log" 2>&1
}
run packed packed || fail "a run on compressed years exited $?: $(tail -3 packed.log)"
run plain plain || fail "a run on the same years uncompressed exited $?: $(tail -3 plain.log)"
# the same samples: the same losses, bit for bit (the filters are lossless)
a=$(cut -d, -f3 out/packed/train_log.csv) b=$(cut -d, -f3 out/plain/train_log.csv)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "losses on compressed years differ: $a / $b"
echo "test_h5_compressed: OK"
