# tiny_run.sh: what shell tests of one small `vitbench run` share. Sourced
# by a test that has set VB (the binary) and SRC (the source tree).
#
#   tiny_scratch NAME      a scratch directory /tmp/NAME.XXXXXX, removed at
#                          exit; cd's into it and sets TMP; then tiny_data 8,
#                          one_step_benchy benchy.yaml, and COMMON: TINY_ARGS
#                          with that benchy config. 1 (with a line) on failure

#   tiny_data SAMPLES      datagen into ./data: one train and one valid year
#                          of SAMPLES samples, 4 channels of 32 x 64 (the
#                          tiny config's); datagen's output on failure, 1
#   one_step_benchy FILE   a benchy YAML of one
#                          SYNTHETIC trial of one batch, nothing else
#   TINY_ARGS              run's flags for that data: the tiny config, the
#                          data and stats paths, --output_dir out,
#                          --progress none (add --benchy_config, --run_name)

tiny_scratch() {
    TMP=$(mktemp -d "/tmp/$1.XXXXXX") || { echo "tiny_scratch: mktemp" >&2; return 1; }
    # shellcheck disable=SC2064 # TMP is fixed now
    trap "rm -rf '$TMP'" EXIT
    cd "$TMP" || return 1
    tiny_data 8 || { echo "tiny_scratch: datagen" >&2; return 1; }
    one_step_benchy benchy.yaml
    COMMON=("${TINY_ARGS[@]}" --benchy_config benchy.yaml)
}

tiny_data() {
    "$VB" datagen --output_dir data --years 1 --valid_years 1 --samples_per_year "$1" --channels 4 \
        --img_size 32,64 --seed 3 > datagen.txt 2>&1 || { cat datagen.txt >&2; return 1; }
}

one_step_benchy() {
    cat > "$1" <<'YAML'
global: {report_freq: 1, exit_after_tests: True, profiler_mode: 'single', use_distributed_barrier: False}
IO: {run_benchmark: False, nbatches: 1, ntrials: 1, nwarmup: 0}
synthetic: {run_benchmark: True, nbatches: 1, ntrials: 1, nwarmup: 0}
full: {run_benchmark: False, nbatches: 1, ntrials: 1, nwarmup: 0}
YAML
}

TINY_ARGS=(--yaml_config "$SRC/scenarios/vit.yaml" --config tiny --train_data_path data/train
           --valid_data_path data/valid --global_means_path data/stats/global_means.npy
           --global_stds_path data/stats/global_stds.npy --output_dir out --progress none)
