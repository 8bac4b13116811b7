# tiny_run.sh: what shell tests of one small `vitbench run` share. Sourced
# by a test after it has cd'ed into its scratch directory and set VB (the
# binary) and SRC (the source tree).
#
#   tiny_data SAMPLES      datagen into ./data: one train and one valid year
#                          of SAMPLES samples, 4 channels of 32 x 64 (the
#                          tiny config's); datagen's output on failure, 1
#   one_step_benchy FILE   a benchy YAML of one
#                          SYNTHETIC trial of one batch, nothing else
#   TINY_ARGS              run's flags for that data: the tiny config, the
#                          data and stats paths, --output_dir out,
#                          --progress none (add --benchy_config, --run_name)

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
