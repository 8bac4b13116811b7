/* bench_step.c: how fast is one training step, and how close to the machine?
 *
 * One run measures, for one config (default `small` from scenarios/vit.yaml;
 * every config flag of `vitbench run` works, e.g. --global_batch_size 8):
 *   0. the cores' float32 FMA peak (bench/dev/fma_peak.h; the CPU backend only):
 *      the roofline no kernel passes, so %peak says how much of these cores a
 *      step uses, whatever its BLAS,
 *   1. OpenBLAS sgemm GFLOP/s on the model's own GEMM shapes and a square 1024
 *      (the attainable ceiling: a step is mostly these GEMMs; fastest call of
 *      each shape, with the mean over all calls as a busy-machine indicator),
 *   2. SYNTHETIC: training steps (forward + backward + Adam) on one cached
 *      batch, warm-up steps first, then timed steps (benchy's SYNTHETIC trial),
 *   3. FULL: the same steps fed by the HDF5 loader on the config's
 *      train_data_path (benchy's FULL trial),
 * then the step's achieved GFLOP/s (vit_train_flops / SYNTHETIC step time) and
 * its fractions of the best model-shape sgemm rate and of the FMA peak. Output is a table with units
 * in the style of nccl-tests plus one `bench_step key=value ...` line for scripts.
 *
 * Own flags (parsed by core/cli, listed by --help; removed before the config sees argv):
 *   --warmup N (2)  --steps N (5)  --full_steps N (= --steps)  --skip_full
 *   --sgemm_seconds S (0.3 per shape)  --ops_csv PATH (per-op profile of the timed SYNTHETIC steps)
 *   --reference_dir DIR  a compute reference for `vitbench model` (bench/dev/step_reference.h)
 *   --shard_tp N --shard_cp N  time one rank's share of a tp x cp layout instead of the
 *                  whole model: the real shard shapes (1/tp of the heads and MLP, the
 *                  largest cp share of the tokens) on stand-in communicators with no
 *                  peers (core/comm/comm.h vb_comm_shard), so the model can use a measured
 *                  shard instead of assuming 1/tp of the work
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>

#include "bench/dev/fma_peak.h"
#include "core/run/memcheck.h"
#include "bench/dev/step_reference.h"
#include "core/run/feed.h"
#include "core/run/from_config.h"
#include "core/run/trainer.h" /* vb_run_ctx_create, vb_run_model_fp8 */
#include "core/comm/comm.h"
#include "core/config/cli.h"
#include "core/util/common.h"
#include "core/config/config.h"
#include "core/data/data.h"
#include "core/model/vit.h"
#include "core/model/optim.h"
#include "core/prof/blas_kernels.h"
#include "core/prof/profile.h"
#include "core/util/stats.h"

/* OpenBLAS exports this without declaring it in every cblas.h */
char *openblas_get_corename(void);
#include "kernels/ops.h"

typedef struct bench_opts {
    int warmup, steps, full_steps;
    bool skip_full;
    double sgemm_seconds;
    const char *ops_csv, *reference_dir;
    int shard_tp, shard_cp;
} bench_opts;

/* Config arguments, in order, for vb_config_from_args (argv[0] first). */
typedef struct config_args {
    char **v;
    int n;
    bool have_config;
} config_args;

/* Everything that is not bench_step's own goes to the config parser as
 * given, values included; it names any unknown key or bad value itself. */
static void pass_to_config(void *ctx, const char *arg, const char *next) {
    config_args *c = ctx;
    if (!strcmp(arg, "--config") || !strncmp(arg, "--config=", 9)) c->have_config = true;
    c->v[c->n++] = (char *)arg;
    if (next) c->v[c->n++] = (char *)next;
}

/* Parses bench_step's own flags into o and leaves every other argument in
 * cargv for the config. `--config small` goes first when no --config is
 * given, so the config's own parser still sees a later --config as usual. */
static int split_args(int argc, char **argv, bench_opts *o, char **cargv) {
    char **rest = vb_calloc_check((size_t)argc + 1, sizeof *rest);
    config_args ca = {.v = rest};
    const vb_cli_opt opts[] = {
        {.name = "warmup", .kind = VB_CLI_INT, .ptr = &o->warmup, .ilo = 0, .ihi = 1000000, .arg = "N",
         .help = "untimed SYNTHETIC steps first (default 2)"},
        {.name = "steps", .kind = VB_CLI_INT, .ptr = &o->steps, .ilo = 1, .ihi = 1000000, .arg = "N",
         .help = "timed SYNTHETIC steps (default 5)"},
        {.name = "full_steps", .kind = VB_CLI_INT, .ptr = &o->full_steps, .ilo = 1, .ihi = 1000000, .arg = "N",
         .help = "timed FULL steps (default: --steps)"},
        {.name = "skip_full", .kind = VB_CLI_BOOL, .ptr = &o->skip_full, .help = "no FULL trial (needs no dataset)"},
        {.name = "sgemm_seconds", .kind = VB_CLI_DOUBLE, .ptr = &o->sgemm_seconds, .dlo = 0, .dlo_open = true,
         .dhi = 60, .arg = "S", .help = "time per sgemm shape (default 0.3)"},
        {.name = "ops_csv", .kind = VB_CLI_STRING, .ptr = &o->ops_csv, .arg = "PATH",
         .help = "per-op profile of the timed SYNTHETIC steps (a run's ops.csv format)"},
        {.name = "reference_dir", .kind = VB_CLI_STRING, .ptr = &o->reference_dir, .arg = "DIR",
         .help = "write a compute reference for vitbench model --run (run.json, iterations.csv, ops.csv)"},
        {.name = "shard_tp", .kind = VB_CLI_INT, .ptr = &o->shard_tp, .ilo = 1, .ihi = 64, .arg = "N",
         .help = "time one rank's shard of tensor_parallel N alone (no peers; default 1: the whole model)"},
        {.name = "shard_cp", .kind = VB_CLI_INT, .ptr = &o->shard_cp, .ilo = 1, .ihi = 64, .arg = "N",
         .help = "time the largest token share of context_parallel N alone (default 1)"},
    };
    const vb_cli cli = {
        .cmd = "bench_step",
        .usage = "bench_step [options] [--config NAME] [--<config key> VALUE ...]",
        .about = "One training step against the machine: sgemm ceiling, SYNTHETIC and FULL samples/s, GFLOP/s.",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
        .other = pass_to_config,
        .ctx = &ca,
        .other_help = "Any other --<key> VALUE sets that key of the config, as vitbench run takes it\n"
                      "(default --config small from scenarios/vit.yaml).",
    };
    vb_cli_parse(&cli, argc, argv);
    int cargc = 0;
    cargv[cargc++] = argv[0];
    if (!ca.have_config) {
        cargv[cargc++] = "--config";
        cargv[cargc++] = "small";
    }
    for (int i = 0; i < ca.n; i++) cargv[cargc++] = rest[i];
    cargv[cargc] = NULL;
    free(rest);
    if (o->full_steps == 0) o->full_steps = o->steps;
    return cargc;
}

/* ---- 1. sgemm ceiling ---- */

typedef struct gemm_shape {
    const char *what;
    int M, N, K;     /* C[M,N] = A[M,K] @ B[N,K]^T, as nn.Linear forward */
} gemm_shape;

typedef struct gemm_result {
    double seconds;  /* fastest call */
    double gflops;   /* at the fastest call: a ceiling, so the best case */
    double mean_gflops;
} gemm_result;

/* Repeats one sgemm until `budget` seconds have passed (after one untimed
 * call that faults the pages in and lets OpenBLAS spin up its threads).
 * Each call is timed on its own and the fastest one is the ceiling: on a
 * shared machine the mean mostly measures the neighbours. */
static gemm_result time_sgemm(const gemm_shape *s, double budget) {
    size_t na = (size_t)s->M * s->K, nb = (size_t)s->N * s->K, nc = (size_t)s->M * s->N;
    float *a = vb_malloc(na * sizeof(float)), *b = vb_malloc(nb * sizeof(float));
    float *c = vb_malloc(nc * sizeof(float));
    vb_rng r;
    vb_rng_seed(&r, 1);
    for (size_t i = 0; i < na; i++) a[i] = (float)vb_rng_uniform(&r) - 0.5f;
    for (size_t i = 0; i < nb; i++) b[i] = (float)vb_rng_uniform(&r) - 0.5f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->M, s->N, s->K, 1.0f, a, s->K, b, s->K,
                0.0f, c, s->N);
    int calls = 0;
    double start = vb_now(), best = 1e30, now;
    do {
        double t0 = vb_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->M, s->N, s->K, 1.0f, a, s->K, b,
                    s->K, 0.0f, c, s->N);
        now = vb_now();
        if (now - t0 < best) best = now - t0;
        calls++;
    } while (now - start < budget);
    vb_free(a);
    vb_free(b);
    vb_free(c);
    double flop = 2.0 * s->M * s->N * (double)s->K;
    gemm_result res = {best, flop / best * 1e-9, flop * calls / (now - start) * 1e-9};
    return res;
}

/* ---- 2./3. training steps ---- */

typedef struct trainer {
    vit_model *m;
    vb_adam opt;
    vb_loss_scaler scaler; /* under loss scaling (amp_mode fp16), as a run */
    vb_ctx *ctx;
    vb_step step;        /* the run's step: schedule, lr scaling, optimizer */
    float *loss_host;    /* page-locked [1] */
    int t;               /* update count, drives the lr schedule */
} trainer;

/* One update through the run's own step (vb_step_train), then its loss: the
 * timed step ends when its work has finished. */
static void train_step(trainer *tr, const float *inp, const float *tar, int B) {
    float lr = vb_step_train(&tr->step, tr->t++, inp, tar, B);
    const vb_ops *ops = tr->ctx->ops;
    ops->memcpy_d2h(tr->ctx, tr->loss_host, tr->m->loss_dev, sizeof(float));
    ops->synchronize(tr->ctx);
    if (!isfinite(tr->loss_host[0]))
        vb_die_internal("loss is %f at benchmark step %d (lr %g)", (double)tr->loss_host[0], tr->t, (double)lr);
}

static void print_row(const char *trial, const char *what, double ms, double gflops, double sps,
                      double frac, double peak_frac) {
    char g[32] = "-", s[32] = "-", f[32] = "-", pk[32] = "-";
    if (gflops > 0) vb_snprintf(g, sizeof g, "%.2f", gflops);
    if (sps > 0) vb_snprintf(s, sizeof s, "%.2f", sps);
    if (frac > 0) vb_snprintf(f, sizeof f, "%.1f", 100.0 * frac);
    if (peak_frac > 0) vb_snprintf(pk, sizeof pk, "%.1f", 100.0 * peak_frac);
    printf("  %-10s %-34s %12.3f %10s %11s %8s %7s\n", trial, what, ms, g, s, f, pk);
}

int main(int argc, char **argv) {
    /* OpenBLAS's kernels as vitbench run picks them (may start again) */
    vb_blas_choose(argv);
    bench_opts o = {.warmup = 2, .steps = 5, .sgemm_seconds = 0.3, .shard_tp = 1, .shard_cp = 1};
    char **cargv = vb_calloc_check((size_t)argc + 4, sizeof(char *));
    int cargc = split_args(argc, argv, &o, cargv);

    vb_config c;
    vb_config_defaults(&c);
    vb_config_from_args(&c, cargc, cargv, 1);
    int B = c.local_batch_size > 0 ? c.local_batch_size : c.global_batch_size;

    // FULL needs the dataset: say so before spending minutes on the rest
    if (!o.skip_full && !vb_dir_exists(c.train_data_path))
        vb_die_input("train_data_path '%s': no such directory (make it with `vitbench datagen`, "
                     "or pass --skip_full)", c.train_data_path);

    vit_dims d = vb_config_vit_dims(&c);
    vb_profiler *prof = o.ops_csv || o.reference_dir ? vb_prof_create() : NULL;
    if (prof) vb_prof_set_trial_type(prof, "SYNTHETIC");
    /* a shard: this process is tp rank 0 and the cp rank with the most tokens
     * (the slowest, which gates a real layout's step) */
    if (c.num_heads % o.shard_tp != 0)
        vb_die_input("bench_step: --shard_tp %d does not divide num_heads %d", o.shard_tp, c.num_heads);
    const int ntok = vb_config_tokens(&c);
    if (o.shard_cp > ntok) vb_die_input("bench_step: --shard_cp %d exceeds the %d tokens", o.shard_cp, ntok);
    int cp_rank = 0;
    {
        int counts[64], offsets[64];
        vit_token_split(ntok, o.shard_cp, counts, offsets);
        for (int r = 1; r < o.shard_cp; r++)
            if (counts[r] > counts[cp_rank]) cp_rank = r;
    }
    vb_comm tp_comm, cp_comm;
    vb_comm_shard(&tp_comm, o.shard_tp, 0, "tp", prof);
    vb_comm_shard(&cp_comm, o.shard_cp, cp_rank, "cp", prof);
    vit_parallel par = {.tp_size = o.shard_tp, .tp_rank = 0, .cp_size = o.shard_cp, .cp_rank = cp_rank,
                        .tp = o.shard_tp > 1 ? &tp_comm : NULL, .cp = o.shard_cp > 1 ? &cp_comm : NULL};
    trainer tr = {.ctx = vb_run_ctx_create(&c, NULL)};
    const vb_ops *ops = tr.ctx->ops;
    /* an asynchronous backend's ops are timed with its events */
    if (prof && !ops->host_memory) vb_prof_set_clock(prof, vb_prof_clock_ctx(tr.ctx, 4096));
    /* as a run does: a model that cannot fit is refused before it is allocated */
    vb_benchy_config no_benchy;
    vb_benchy_defaults(&no_benchy);
    vb_mem_estimate mem;
    vb_mem_estimate_run(&c, &no_benchy, false, false, &d, &par, B, 1, 1, tr.ctx, &mem);
    char mem_source[32];
    double mem_limit = vb_mem_available(mem_source, sizeof mem_source);
    vb_mem_check(&mem, 1, mem_limit, mem_source);
    tr.m = vit_create(&d, &par, B, tr.ctx, prof);
    tr.m->fused_elementwise = c.enable_jit;
    vb_run_model_fp8(tr.m, &c, NULL, NULL);
    vit_init_weights(tr.m, c.seed);
    vb_adam_init(&tr.opt, tr.m->nparams, tr.ctx);
    /* one rank: the global batch is B, no gradient reduction */
    if (!c.enable_fused) vb_adam_per_tensor(&tr.opt, tr.m);
    const bool scaling = vb_config_loss_scaling(&c);
    if (scaling) {
        vb_loss_scaler_init(&tr.scaler, tr.ctx, c.loss_scale_init, c.loss_scale_growth_interval, NULL, NULL);
        tr.m->dloss = &tr.scaler.dev->scale;
        tr.opt.loss_scale = tr.scaler.dev;
    }
    /* cuda_graphs: as a run, the step recorded after its first eager run */
    vb_step_graphs graphs = {0};
    if (c.cuda_graphs && !ops->graph_capture_begin)
        vb_die_input("cuda_graphs = true needs the CUDA backend, and backend %s resolved to %s (no usable GPU)",
                     c.backend, ops->name);
    tr.step = (vb_step){.model = tr.m, .opt = &tr.opt, .ddp = NULL, .cfg = &c, .global_batch = B, .timeline = NULL,
                        .scaler = scaling ? &tr.scaler : NULL, .graphs = c.cuda_graphs ? &graphs : NULL};
    tr.loss_host = ops->alloc_host(tr.ctx, sizeof(float));

    const int N = tr.m->ntok, D = c.embed_dim, BN = B * N;
    const double step_flops = vit_train_flops(tr.m, B);

    printf("# bench_step: config %s  D=%d depth=%d heads=%d patch=%d img=%dx%d cin=%d cout=%d  "
           "batch=%d tokens=%d params=%zu\n", c.config, D, c.depth, c.num_heads, c.patch_size,
           c.img_size[0], c.img_size[1], c.n_in_channels, c.n_out_channels, B, N, tr.m->nparams);
    if (o.shard_tp > 1 || o.shard_cp > 1)
        printf("# shard of tp %d x cp %d: %d of %d heads, %d of %d tokens (cp rank %d), %zu local parameters; "
               "collectives stand in without peers\n",
               o.shard_tp, o.shard_cp, c.num_heads / o.shard_tp, c.num_heads, tr.m->ntok_local, N, cp_rank,
               tr.m->nparams);
    const vb_blas_decision *bd = vb_blas_choice();
    vb_cpu_features feat;
    vb_cpu_features_detect(&feat);
    printf("# backend %s, %d OpenMP threads, OpenBLAS %s; train step = %.3f GFLOP (fwd+bwd, 2/FMA)\n",
           ops->name, omp_get_max_threads(), openblas_get_config(), step_flops * 1e-9);
    printf("# BLAS kernels %s on a CPU with %s, chosen by the rule '%s' (the library's own: %s)\n",
           openblas_get_corename(), vb_cpu_features_vector(&feat), vb_blas_rule_name(bd->rule),
           bd->library_core[0] ? bd->library_core : "not known");
    printf("#\n#  %-10s %-34s %12s %10s %11s %8s %7s\n", "trial", "what", "time(ms)", "GFLOP/s",
           "samples/s", "%sgemm", "%peak");

    /* 0. FMA peak of these cores: meaningful for the CPU backend only, whose
     * step runs on them (a GPU's step is judged against its own roofline).
     * Measured before the sgemm rows and again after the timed steps, the
     * larger kept: a neighbour that holds a core through one measurement
     * would otherwise make the roofline too low (and a step "above" it). The
     * table is printed once both are in. */
    vb_fma_peak peak = {0}, peak_before = {0};
    if (ops->host_memory) peak_before = vb_fma_peak_measure(o.sgemm_seconds);
    /* a fraction of the peak, or 0 (printed as "-") when none was measured */
    #define PEAK_FRAC(gf) (peak.gflops > 0 ? (gf) / peak.gflops : 0.0)

    /* 1. sgemm ceiling: the step's dominant GEMMs, then the textbook square. */
    char w[4][64];
    gemm_shape shapes[4] = {
        {w[0], BN, 4 * D, D},   /* fc1 forward [B*N,D] x [D,4D] */
        {w[1], BN, D, 4 * D},   /* fc2 forward [B*N,4D] x [4D,D] */
        {w[2], BN, D, D},       /* q/k/v/proj forward */
        {w[3], 1024, 1024, 1024},
    };
    const char *names[4] = {"fc1", "fc2", "qkv/proj", "square"};
    double best = 0;
    gemm_result gemm[4];
    for (int i = 0; i < 4; i++) {
        vb_snprintf(w[i], sizeof w[i], "%s M=%d N=%d K=%d", names[i], shapes[i].M, shapes[i].N,
                    shapes[i].K);
        gemm[i] = time_sgemm(&shapes[i], o.sgemm_seconds);
        if (i < 3 && gemm[i].gflops > best) best = gemm[i].gflops;  // ceiling = best MODEL shape
    }

    /* 2. SYNTHETIC: one cached batch (the first of the dataset when there is
     * one, else N(0,1)), copied to backend memory once. */
    size_t nin = (size_t)B * c.n_in_channels * c.img_size[0] * c.img_size[1];
    size_t ntar = (size_t)B * c.n_out_channels * c.img_size[0] * c.img_size[1];
    float *inp = ops->alloc(tr.ctx, nin * sizeof(float)), *tar = ops->alloc(tr.ctx, ntar * sizeof(float));
    vb_loader *loader = NULL;
    if (vb_dir_exists(c.train_data_path)) {
        c.normalize_on_device = false; /* its batches go straight to the step: the loader normalises */
        loader = vb_config_loader(&c, c.train_data_path, B, c.limit_nsamples, c.shuffle, 0, 1, tr.ctx);
        const vb_batch *b = vb_loader_next(loader);
        ops->memcpy_h2d(tr.ctx, inp, b->inp, nin * sizeof(float));
        ops->memcpy_h2d(tr.ctx, tar, b->tar, ntar * sizeof(float));
        ops->synchronize(tr.ctx); /* the copies read the batch until they complete */
        vb_loader_release(loader, b);
    } else {
        float *h = vb_malloc((nin > ntar ? nin : ntar) * sizeof(float));
        vb_rng r;
        vb_rng_seed(&r, c.seed + 1);
        for (size_t i = 0; i < nin; i++) h[i] = (float)vb_rng_normal(&r);
        ops->memcpy_h2d(tr.ctx, inp, h, nin * sizeof(float));
        ops->synchronize(tr.ctx); /* h is refilled next */
        for (size_t i = 0; i < ntar; i++) h[i] = (float)vb_rng_normal(&r);
        ops->memcpy_h2d(tr.ctx, tar, h, ntar * sizeof(float));
        ops->synchronize(tr.ctx);
        vb_free(h);
    }
    for (int i = 0; i < o.warmup; i++) train_step(&tr, inp, tar, B);
    /* seconds of every timed step (SYNTHETIC, then FULL with its data waits) */
    int most = o.steps > o.full_steps ? o.steps : o.full_steps;
    double *step_s = vb_calloc_check((size_t)most, sizeof *step_s), *wait_s = vb_calloc_check((size_t)most, sizeof *wait_s);
    if (prof) vb_prof_set_enabled(prof, true);
    for (int i = 0; i < o.steps; i++) {
        double t0 = vb_now();
        train_step(&tr, inp, tar, B);
        double dt = vb_now() - t0;
        step_s[i] = dt;
        if (prof) vb_prof_add_step_time(prof, dt);
    }
    vb_stats_summary syn = vb_stats_summarize(step_s, o.steps, 0);
    if (ops->host_memory) {
        vb_fma_peak after = vb_fma_peak_measure(o.sgemm_seconds);
        peak = after.gflops > peak_before.gflops ? after : peak_before;
        char pw[64];
        vb_snprintf(pw, sizeof pw, "FMA %s, %d lanes x %d threads", peak.isa, peak.lanes, peak.threads);
        print_row("peak", pw, 0, peak.gflops, 0, 0, 1.0);
        printf("#  peak: fastest round, the larger of before the sgemm rows (%.1f) and after the steps (%.1f)\n",
               peak_before.gflops, after.gflops);
        /* the rounds' mean beside their best: on a shared host the cores
         * deliver well under the fastest round, to the step as to this loop */
        printf("#  peak: mean over the rounds %.1f and %.1f (%.0f%% and %.0f%% of their fastest)\n",
               peak_before.mean_gflops, after.mean_gflops,
               peak_before.gflops > 0 ? 100.0 * peak_before.mean_gflops / peak_before.gflops : 0.0,
               after.gflops > 0 ? 100.0 * after.mean_gflops / after.gflops : 0.0);
    }
    for (int i = 0; i < 4; i++)
        print_row("sgemm", shapes[i].what, 1e3 * gemm[i].seconds, gemm[i].gflops, 0, 0, PEAK_FRAC(gemm[i].gflops));
    // far below the fastest call = the cores were busy with something else
    printf("#  sgemm rows: fastest call; mean over all calls %.1f / %.1f / %.1f / %.1f GFLOP/s\n",
           gemm[0].mean_gflops, gemm[1].mean_gflops, gemm[2].mean_gflops, gemm[3].mean_gflops);
    if (prof) {
        vb_prof_set_enabled(prof, false);
        if (o.ops_csv && vb_prof_write_csv(prof, o.ops_csv, 0) != 0)
            vb_die_input("--ops_csv '%s': cannot write", o.ops_csv);
        if (o.reference_dir) {
            char cl[4096] = "";
            size_t len = 0;
            for (int i = 0; i < argc && len < sizeof cl; i++)
                len += (size_t)snprintf(cl + len, sizeof cl - len, "%s%s", i ? " " : "", argv[i]);
            const vb_step_reference ref = {.cfg = &c, .backend = ops->name, .local_batch = B, .tp = o.shard_tp,
                                           .cp = o.shard_cp, .step_s = step_s, .nsteps = o.steps, .prof = prof,
                                           .command_line = cl};
            vb_step_reference_write(o.reference_dir, &ref);
        }
    }
    double syn_step = syn.mean, syn_sps = B / syn_step;
    double step_gflops = step_flops / syn_step * 1e-9;
    char what[64];
    vb_snprintf(what, sizeof what, "step fwd+bwd+adam, %d steps", syn.n);
    print_row("SYNTHETIC", what, 1e3 * syn_step, step_gflops, syn_sps, step_gflops / best, PEAK_FRAC(step_gflops));
    vb_snprintf(what, sizeof what, "  fastest step");
    const double best_step_gflops = step_flops / syn.min * 1e-9;
    print_row("", what, 1e3 * syn.min, best_step_gflops, B / syn.min, best_step_gflops / best,
              PEAK_FRAC(best_step_gflops));

    /* 3. FULL: as benchy's FULL trial under data_loader_config pytorch, the
     * run's own feed and staging: fetch, copy to the backend (the host waits
     * for it), step; one untimed step first (the loader's threads and file
     * handles warm up there). */
    double full_sps = 0;
    if (!o.skip_full) {
        const size_t hw = (size_t)c.img_size[0] * (size_t)c.img_size[1];
        vb_staging st = {0};
        vb_staging_init(&st, ops, tr.ctx, NULL, false, c.tf32, B, c.n_in_channels, c.n_out_channels, hw, NULL,
                        NULL);
        vb_loader_reset(loader, 0);
        vb_feed feed;
        vb_feed_begin(&feed, &st, loader, 1 + o.full_steps, false, NULL, NULL);
        for (int i = 0; i < 1 + o.full_steps; i++) {
            double t0 = vb_now();
            const vb_batch *b = vb_feed_next(&feed, i);
            double t1 = vb_now();
            vb_staging_put(&st, b);
            int n = vb_staging_take(&st);
            train_step(&tr, st.inp_dev, st.tar_dev, n);
            vb_feed_done(&feed, b, i);
            if (i == 0) continue;
            step_s[i - 1] = vb_now() - t0;
            wait_s[i - 1] = t1 - t0;
        }
        vb_feed_end(&feed);
        vb_staging_free(&st);
        int n = o.full_steps;
        double full_step = vb_stats_mean(step_s, n);
        full_sps = B / full_step;
        vb_snprintf(what, sizeof what, "loader+step, %d steps, %d workers", n, c.num_data_workers);
        print_row("FULL", what, 1e3 * full_step, step_flops / full_step * 1e-9, full_sps, 0, 0);
        vb_snprintf(what, sizeof what, "  of which waiting for data");
        print_row("", what, 1e3 * vb_stats_mean(wait_s, n), 0, 0, 0, 0);
    }

    printf("#\n# step GFLOP/s = vit_train_flops / mean SYNTHETIC step time; %%sgemm = that / best model-shape sgemm (%.2f GFLOP/s)\n",
           best);
    if (peak.gflops > 0)
        printf("# %%peak = GFLOP/s / the cores' FMA peak (%.2f GFLOP/s)\n", peak.gflops);
    /* peak_gflops=0 and peak_fraction=0: not measured (a GPU backend) */
    printf("bench_step config=%s batch=%d step_gflop=%.3f sgemm_gflops=%.3f step_gflops=%.3f sgemm_fraction=%.4f "
           "peak_gflops=%.3f peak_mean_gflops=%.3f peak_fraction=%.4f "
           "synthetic_samples_per_s=%.4f synthetic_best_samples_per_s=%.4f full_samples_per_s=%.4f "
           "step_s=%.6f min_step_s=%.6f blas_core=%s blas_rule=%s\n",
           c.config, B, step_flops * 1e-9, best, step_gflops, step_gflops / best, peak.gflops,
           peak.mean_gflops, PEAK_FRAC(step_gflops), syn_sps, B / syn.min, full_sps, syn_step, syn.min, openblas_get_corename(),
           vb_blas_rule_name(bd->rule));
    #undef PEAK_FRAC

    free(step_s);
    free(wait_s);
    if (loader) vb_loader_destroy(loader);
    ops->free(tr.ctx, inp);
    ops->free(tr.ctx, tar);
    ops->free_host(tr.ctx, tr.loss_host);
    if (scaling) vb_loss_scaler_free(&tr.scaler);
    vb_step_graphs_free(&graphs, tr.ctx);
    vb_adam_free(&tr.opt);
    vit_destroy(tr.m);
    if (prof) vb_prof_destroy(prof); /* before the context its clock may use */
    ops->ctx_destroy(tr.ctx);
    free(cargv);
    return 0;
}
