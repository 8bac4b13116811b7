/* main.c: the vitbench command line.
 *
 *   vitbench <command> [options]: the commands are one table (g_commands
 *   below), which dispatch, the usage text and the messages read; every
 *   command's flags follow one grammar (core/config/flag.h).
 *
 * Bad input of any kind exits 2 with one line naming the flag / key / file.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <hdf5.h>
#include <yaml.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis.h"
#include "analysis/scaling/scaling_model.h"
#include "bench/commbench/commbench.h"
#include "bench/sweep/sweep.h"
#include "core/run/train_loop.h"
#include "core/run/memcheck.h"
#include "core/run/trainer.h"
#include "bench/trials.h"
#include "core/comm/comm.h"
#include "core/util/common.h"
#include "core/config/cli.h"
#include "core/config/config.h"
#include "core/config/flag.h"
#include "core/data/data.h"
#include "core/prof/blas_kernels.h"
#include "bench/datagen.h"
#include "kernels/ops.h"
#include "kernels/cpu/blas.h"

typedef struct {
    const char *name;
    const char *help; /* the usage text's lines for it: a summary, then its main options */
    /* argv[0] is the command's name, as each command's own parser expects */
    int (*main)(int argc, char **argv);
} command;

static const command *commands(int *n);

static void usage(FILE *f) {
    fprintf(f, "usage: vitbench <command> [options]\n\ncommands:\n");
    int n;
    const command *c = commands(&n);
    for (int i = 0; i < n; i++) fprintf(f, "  %-10s %s\n", c[i].name, c[i].help);
    fprintf(f, "\n"
               "`vitbench COMMAND --help` shows each command's options; run and train take every key of\n"
               "the config file as a flag (vitbench run --help lists them with their defaults). Every\n"
               "command's flags are --name VALUE or --name=VALUE, '-' and '_' alike, booleans 1|0, true|false,\n"
               "yes|no or on|off in any case (docs/configs.md, \"Flags\").\n");
}

/* run / train: generated from the config's key table, the one the parser reads */
static void usage_run(FILE *f) {
    fprintf(f, "usage: vitbench run|train [--key VALUE ...]\n"
               "  run    benchy's IO, SYNTHETIC and FULL trials, and VALIDATION (benchy_config's validation\n"
               "         section: forward passes over the valid split): trials.csv, iterations.csv,\n"
               "         summary.csv, ops.csv, benchy_output.json, run.json\n"
               "  train  the training loop (num_iters steps, validation every epoch): train_log.csv,\n"
               "         validation.csv, checkpoint.h5, run.json\n"
               "Throughput counts local_batch x dp samples per step.\n\n");
    vb_config_print_help(f);
}


static void print_version(void) {
    unsigned maj = 0, min = 0, rel = 0;
    VB_H5(H5get_libversion(&maj, &min, &rel));
    char mpi[256];
    vb_mpi_version(mpi, sizeof mpi); /* MPI_Get_library_version needs no MPI_Init */
    printf("vitbench %s\n", VB_GIT_COMMIT);
    printf("backends: cpu%s\n", vb_ops_cuda() ? " cuda" : "");
    printf("hdf5 %u.%u.%u\n", maj, min, rel);
    printf("openblas %s\n", vb_blas_config());
    printf("mpi %s\n", mpi);
    printf("libyaml %s\n", yaml_get_version_string());
    printf("cjson %s\n", cJSON_Version());
}

/* ---- run / train ---- */

static int cmd_run_or_train(int argc, char **argv, vb_run_mode mode) {
    /* help before MPI starts; the config is parsed once it is up */
    if (vb_cli_asks_help(argc - 1, argv + 1)) {
        usage_run(stdout);
        return 0;
    }
    /* before MPI's runtime and OpenBLAS map anything: a limit that leaves
     * them no room is one line here, not a screen of PMIx errors or a hang */
    vb_address_space_check(VB_MPI_START_BYTES + (double)vb_blas_address_space(omp_get_max_threads()),
                           "MPI's runtime and OpenBLAS (its library and a buffer per thread)");
    /* OpenBLAS's kernels next: this may start the process again, which must
     * happen before MPI or any thread (core/prof/blas_kernels.h) */
    vb_blas_choose(argv);
    vb_comm world;
    vb_world_init(&argc, &argv, &world);
    vb_run run;
    vb_run_setup(&run, mode, argc, argv, 2, &world);
    bool train = mode == VB_MODE_TRAIN;
    if (run.benchy) {
        vb_trials_run(&run);
        /* benchy hands the loader back to the training loop unless it exits */
        train = train && !run.bcfg.exit_after_tests;
    }
    if (train) vb_train_loop(&run);
    vb_run_finish(&run);
    vb_world_finalize();
    return 0;
}

/* argv - 1: the program's own argv (vb_blas_choose may execute it again) */
static int cmd_run(int argc, char **argv) { return cmd_run_or_train(argc + 1, argv - 1, VB_MODE_RUN); }
static int cmd_train(int argc, char **argv) { return cmd_run_or_train(argc + 1, argv - 1, VB_MODE_TRAIN); }

static int cmd_help(int argc, char **argv) {
    (void)argc, (void)argv;
    usage(stdout);
    return 0;
}

static int cmd_version(int argc, char **argv) {
    (void)argc, (void)argv;
    print_version();
    return 0;
}

/* Every command, once: dispatch, the usage text and the messages that list
 * them read this table. Commands that launch mpirun themselves (sweep) or
 * never need MPI do not initialise it; run and train do. */
static const command g_commands[] = {
    {"run", "benchmark like benchy: IO, SYNTHETIC and FULL trials (and VALIDATION); writes trials.csv,\n"
            "             iterations.csv, summary.csv, ops.csv, benchy_output.json, run.json",
     cmd_run},
    {"train", "train (num_iters steps, validation every epoch); writes train_log.csv,\n"
              "             validation.csv, checkpoint.h5, run.json. --enable_benchy behaves as run",
     cmd_train},
    {"datagen", "write a synthetic dataset: --output_dir DIR [--years N] [--valid_years N]\n"
                "             [--samples_per_year T] [--channels C] [--img_size H,W] [--seed S]",
     vb_datagen_main},
    {"sweep", "run a scenario file (scenarios/*.yaml) as many runs: FILE [--output_dir DIR]\n"
              "             [--launcher mpirun|srun|sbatch] [--dry-run] [--ranks 1,2,4] [--world_size N]\n"
              "             [--repeats N] [--order sequential|shuffled] [--threads_per_rank T] [--no_report]\n"
              "             [config overrides...]; writes DIR/<sweep_id>/index.csv and its report",
     vb_sweep_main},
    {"report", "tables, plots and report.md / report.html of a run or sweep directory:\n"
               "             PATH [--output_dir DIR] [--no_plots]",
     vb_report_main},
    {"compare", "regression gate between two runs, sweeps or baselines (exit 1 on a regression):\n"
                "             BASE NEW [--metric FULL,SYNTHETIC,IO,VALIDATION,step_time,op:NAME] [--alpha A] [--threshold T]\n"
                "             [--allow_different KEY,...]",
     vb_compare_main},
    {"trace", "Chrome trace (Perfetto, chrome://tracing) of a run's timeline.csv: PATH [--output FILE]", vb_trace_main},
    {"nsys", "import `nsys stats --format csv` reports: FILE... [--filter_time START/END]\n"
             "             [--output_dir DIR]",
     vb_nsys_main},
    {"import", "the tutorials' PyTorch runs as vitbench runs and sweeps: benchy JSON, job logs, profiler\n"
               "             traces: PATH... [--output_dir DIR] [--ranks N|FILE=N] [--point NAME=FILE,...]",
     vb_import_main},
    {"history", "change points of a machine's history CSV (results/history/<machine_key>.csv):\n"
                "             FILE [--metric NAME[,NAME]] [--json] [--output_dir DIR] [--pvalue P] [--window N]\n"
                "             [--min_magnitude M]; `history append FILE --from SET_DIR [--commit REV] [--time ISO]`\n"
                "             adds a gate set's row",
     vb_history_main},
    {"commbench", "nccl-tests-style bandwidth of the data plane's collectives over the layout's groups\n"
                  "             (under mpirun/srun): [--collectives LIST] [--minbytes SIZE] [--maxbytes SIZE]\n"
                  "             [--stepfactor F] [--warmup_iters N] [--iters N] [--datatype TYPE] [--check true|false]\n"
                  "             [--tensor_parallel N] [--context_parallel N] [--parallel_order O] [--groups LIST]\n"
                  "             [--comm_backend mpi|nccl] [--backend cpu|cuda|auto] [--output_dir DIR] [--run_name NAME];\n"
                  "             writes DIR/<run>/commbench.csv and commbench.json (commbench --help for details)",
     vb_commbench_main},
    {"model", "alpha-beta scaling model: --commbench FILE|DIR --run RUN_DIR [--sweep SWEEP_DIR]\n"
              "             [--world_sizes N,... --layouts all|dp]; writes model.csv, model.md (see model --help)",
     vb_model_main},
    {"help", "this text", cmd_help},
    {"version", "build and library versions", cmd_version},
};

static const command *commands(int *n) {
    *n = (int)(sizeof g_commands / sizeof g_commands[0]);
    return g_commands;
}

/* "run, train, ..., version" */
static const char *command_list(void) {
    static char list[256];
    size_t used = 0;
    list[0] = '\0';
    for (size_t i = 0; i < sizeof g_commands / sizeof g_commands[0] && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", g_commands[i].name);
    return list;
}

/* Every argument reaches a file as text (run.json's and sweep.json's
 * command line, run and sweep names, index.csv, report pages), all UTF-8:
 * one that is not is refused up front, shown with its bad bytes as \xNN. */
static void refuse_non_utf8(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const long at = vb_utf8_invalid_at(argv[i]);
        if (at < 0) continue;
        char shown[256];
        size_t k = 0;
        for (const unsigned char *p = (const unsigned char *)argv[i]; *p && k + 5 < sizeof shown;) {
            int n = vb_utf8_len(p);
            if (n == 0 || *p < 0x20 || *p == 0x7f) {
                k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", *p);
                p++;
            } else {
                if (k + (size_t)n + 1 >= sizeof shown) break;
                memcpy(shown + k, p, (size_t)n);
                k += (size_t)n;
                p += n;
            }
        }
        shown[k] = '\0';
        vb_die_input("argument %d '%s' is not valid UTF-8 (byte %ld): names and paths are written into run.json, "
                     "index.csv and the reports as UTF-8 text",
                     i, shown, at);
    }
}

int main(int argc, char **argv) {
    refuse_non_utf8(argc, argv);
    if (argc < 2) vb_die_input("missing command (%s; see vitbench help)", command_list());
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) cmd = "help";
    if (strcmp(cmd, "--version") == 0) cmd = "version";
    for (size_t i = 0; i < sizeof g_commands / sizeof g_commands[0]; i++)
        if (strcmp(cmd, g_commands[i].name) == 0) return g_commands[i].main(argc - 1, argv + 1);
    vb_flag_near near;
    vb_flag_near_init(&near, cmd);
    for (size_t i = 0; i < sizeof g_commands / sizeof g_commands[0]; i++) vb_flag_near_try(&near, g_commands[i].name);
    const char *best = vb_flag_near_best(&near);
    if (best) vb_die_input("unknown command '%s'; did you mean %s? (commands: %s)", cmd, best, command_list());
    vb_die_input("unknown command '%s' (commands: %s)", cmd, command_list());
}
