#!/usr/bin/env bash
# The main job on the CPU: install what is missing, build, generate a small
# ERA5-layout dataset, run benchy's IO / SYNTHETIC / FULL trials, print the
# summary and where the CSVs are, then the run's report (tables, plots,
# report.md / report.html).
#   CONFIG=small ./scripts/quickstart.sh          # the bigger CPU config
#   ./scripts/quickstart.sh --num_data_workers 2  # any config override
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-tiny}

./scripts/setup.sh
# the vitbench target alone (the CPU backend unless a GPU is here): about
# half a minute on 2 cores; test.sh builds everything
./scripts/build.sh --quick

# Enough samples that benchy's 50-batch trials fit in one epoch for tiny
# (2 x 256 samples / batch 8 = 64 batches); small's fields are 20x96x192, so
# it gets fewer (its trials are capped at the 16 batches of an epoch).
case "$CONFIG" in
  tiny)  GEN=(--channels 4 --img_size 36,72 --samples_per_year 256) ;;
  small) GEN=(--channels 20 --img_size 96,192 --samples_per_year 64) ;;
  *) echo "quickstart: CONFIG must be tiny or small (got '$CONFIG')" >&2; exit 2 ;;
esac

if [ ! -f "data/$CONFIG/stats/global_stds.npy" ]; then
  echo "quickstart: generating a synthetic ERA5-layout dataset in data/$CONFIG"
  ./build/vitbench datagen --output_dir "data/$CONFIG" --years 2 --valid_years 1 \
    "${GEN[@]}" --seed 0
fi

export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
marker=$(mktemp)
trap 'rm -f "$marker"' EXIT
./build/vitbench run --config "$CONFIG" --output_dir results "$@"

# The run directory this run created (an --output_dir override puts it elsewhere: no report then).
run_json=$(find results -maxdepth 2 -name run.json -newer "$marker" 2>/dev/null | head -1)
if [ -n "$run_json" ]; then
  run_dir=$(dirname "$run_json")
  ./build/vitbench report "$run_dir" >/dev/null
  echo "quickstart: report $run_dir/report/report.html (and report.md; vitbench trace $run_dir for a Chrome trace)"
fi
