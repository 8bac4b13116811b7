/* trials.c: benchy's trial runner (trials.h). */
#include "bench/trials.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/prof/count_region.h"
#include "core/prof/cupti_trace.h"
#include "core/run/feed.h"
#include "core/run/stop.h"
#include "core/results/results.h"
#include "core/util/machine_load.h"
#include "core/util/pyfloat.h"
#include "core/util/stats.h"

/* a kind's name in every file, line and range: vb_trial_kinds (results.h) */
#define KIND_NAME(type) (vb_trial_kinds[type].name)

typedef struct {
    char label[48];       /* benchy's: IO_WARMUP_0, IO_0, ... */
    int type;             /* vb_trial_kind */
    int index;            /* among the warm-ups or among the timed trials */
    bool warmup;
    int nbatches;
    size_t first_iter;    /* its rows in iters[] */
    bool done;
    double seconds;       /* trial_time: first timing point to last (this rank's) */
    double trial_rate;    /* nbatches * local_batch * dp / seconds */
    double avg_iter_rate; /* mean of the per-iteration rates */
    vb_load_delta load;   /* the machine's load from its first timing point to its last (this rank's) */
} trial_rec;

/* One step on one rank. Plain doubles, so a trial's records travel to rank 0
 * as one gather of bytes. */
typedef struct {
    double seconds;
    double data_wait;
    double allreduce_calls; /* DDP bucket allreduces in the step */
    double allreduce_bytes;
    double comm_exposed;    /* seconds blocked in communication inside the step */
} iter_rec;

/* A finished trial as seen by one rank: what trials.csv and load.csv need per row. */
typedef struct {
    double seconds, trial_rate;
    double peak_rss;      /* the rank's max RSS so far, bytes */
    vb_load_delta load;   /* doubles only: it travels in the same gather */
} rank_trial;

#define ITER_DOUBLES ((int)(sizeof(iter_rec) / sizeof(double)))
#define TRIAL_DOUBLES ((int)(sizeof(rank_trial) / sizeof(double)))

typedef struct {
    vb_run *r;
    const vb_benchy_config *b;
    trial_rec *trials;    /* every trial of the run, in run order */
    int ntrials;
    iter_rec *iters;      /* this rank's, preallocated: no allocation per step */
    size_t niters;
    /* rank 0: every rank's copy, [rank][niters] and [rank][ntrials], filled by
     * a gather after each trial so stragglers show up in the files */
    int nranks;
    iter_rec *all_iters;
    rank_trial *all_trials;
    double *gather_send, *gather_recv; /* packing buffers for one trial */
    bool bar;             /* progress bar instead of per-iteration lines (rank 0) */
    bool lines;           /* per-iteration lines every report_freq steps (rank 0) */
    bool profile_here;    /* this rank's profiler runs in timed SYNTHETIC/FULL trials */
    bool gather_ops;      /* profiler_mode all on > 1 rank: ops.csv holds every rank's rows */
    bool cupti_here;      /* cupti: true on a profiling rank: CUPTI traces its timed SYNTHETIC/FULL trials */
    bool profiler_open;   /* between profiler_start and profiler_stop: an early exit closes the range */
    int epoch;            /* next loader epoch; every trial starts a fresh one */
    char json_path[VB_PATH_MAX];
    bool timeline_written;
    int window_trial;     /* the timed trial of the timeline's kind its window starts in */
} bench_state;

/* ---- the trial kinds ---- */

/* What a trial of each kind does with its batches. A kind is an entry here
 * (run order is vb_trial_kind's), its names in results.c's vb_trial_kinds,
 * its benchy section in the config, and its work function below; the loop in
 * run_trial, the result files and every reader take it from there. */
typedef struct trial_kind {
    /* where its batches come from */
    vb_loader *(*loader)(const vb_run *r);
    /* one batch's work, enqueued (NULL: the fetch alone, IO's). `reused`: the
     * trial's first batch handed out again (SYNTHETIC). The step records
     * (allreduce calls and bytes, exposed communication) are filled here. */
    void (*work)(vb_run *r, const vb_batch *b, bool reused, iter_rec *it, float *last_lr);
    /* benchy's SYNTHETIC: the first batch is fetched and stepped on before the
     * clock starts, and every timed step reuses it */
    bool first_batch_reused;
    /* a training step: data_loader_config dali fetches and copies the next
     * batch while it computes, and a non-finite loss stops the run */
    bool trains;
    /* its steps are timeline.csv's window (FULL's): the first profile_steps
     * of its last timed trials, where the run has settled (trial 0 follows
     * the warm-up and the first reads of the files) */
    bool timeline;
    /* FLOPs of a sample on this rank (summary.csv's achieved_tflop_per_s);
     * NULL: none counted (IO) */
    double (*flops_per_sample)(const vb_run *r);
} trial_kind;

static vb_loader *train_split(const vb_run *r) { return r->train_loader; }
static vb_loader *valid_split(const vb_run *r) { return r->valid_loader; }

/* every shard's FLOPs of one sample: a training step, a forward pass */
static double train_flops(const vb_run *r) {
    return r->model ? vit_train_flops(r->model, 1) * r->layout.tp * r->layout.cp : 0;
}
static double forward_flops(const vb_run *r) {
    return r->model ? vit_forward_flops(r->model, 1) * r->layout.tp * r->layout.cp : 0;
}

/* SYNTHETIC and FULL: the batch copied (unless it was copied ahead, or stays
 * on the device under synthetic_resident), then the training step */
static void train_work(vb_run *r, const vb_batch *b, bool reused, iter_rec *it, float *last_lr) {
    /* pytorch: every step copies its batch (synchronously), but with
     * synthetic_resident SYNTHETIC's batch, copied for the untimed step,
     * stays; dali: only a trial's first step, the others' copies ran ahead */
    if (!vb_staging_has(&r->staging)) {
        if (reused && r->cfg.synthetic_resident)
            vb_staging_reuse(&r->staging); /* the untimed step's copy */
        else
            vb_staging_put(&r->staging, b);
    }
    vb_train_step_staged(r, last_lr);
    /* the loss is read after benchy's timing point (which waits for the step
     * anyway), not here in the middle of the step */
    it->allreduce_calls = r->last_comm.allreduce_calls;
    it->allreduce_bytes = r->last_comm.allreduce_bytes;
    it->comm_exposed = r->last_comm.exposed_s;
}

/* VALIDATION: train.py's validation step, the batch copied and the forward
 * pass with its loss */
static void eval_work(vb_run *r, const vb_batch *b, bool reused, iter_rec *it, float *last_lr) {
    (void)reused;
    (void)it;
    (void)last_lr;
    vb_eval_step(r, b);
}

static const trial_kind k_kinds[VB_TRIAL_NKINDS] = {
    [VB_TRIAL_IO] = {.loader = train_split},
    [VB_TRIAL_SYNTHETIC] = {.loader = train_split, .work = train_work, .first_batch_reused = true, .trains = true,
                            .flops_per_sample = train_flops},
    [VB_TRIAL_FULL] = {.loader = train_split, .work = train_work, .trains = true, .timeline = true,
                       .flops_per_sample = train_flops},
    [VB_TRIAL_VALIDATION] = {.loader = valid_split, .work = eval_work, .flops_per_sample = forward_flops},
};

/* benchy's timing point: device sync (a no-op on CPU), every queue of the
 * run as torch.cuda.synchronize() waits for every stream (under dali the
 * copy of the next batch, which overlapped the step), optionally a barrier */
static void sync_point(bench_state *s) {
    vb_run_synchronize(s->r);
    if (s->b->use_distributed_barrier) vb_barrier(&s->r->world);
}

/* benchy counts batch x ranks; here only the data-parallel ranks bring new
 * samples (tp / cp peers work on the same ones), so local_batch x dp */
static double samples_per_iter(const vb_run *r) { return (double)r->local_batch * (double)r->dp; }

/* ---- result files ---- */

/* One row per finished trial and rank, in trial order, each as row() writes it. */
static void write_trial_rows(FILE *f, const bench_state *s,
                             void (*row)(FILE *, const bench_state *, const trial_rec *, int, const rank_trial *)) {
    for (int i = 0; i < s->ntrials; i++) {
        const trial_rec *t = &s->trials[i];
        if (!t->done) continue;
        for (int k = 0; k < s->nranks; k++)
            row(f, s, t, k, &s->all_trials[(size_t)k * (size_t)s->ntrials + (size_t)i]);
    }
}

static void trials_row(FILE *f, const bench_state *s, const trial_rec *t, int k, const rank_trial *rt) {
    const vb_run *r = s->r;
    vb_csv_field(f, r->run_id);
    fprintf(f, ",%s,%d,%d,%d,%d,%d,%d,%.9g,%.9g\n", KIND_NAME(t->type), t->index, t->warmup ? 1 : 0, t->nbatches,
            r->global_batch, r->world.size, k, rt->seconds, rt->trial_rate);
}

static void write_trials_csv(FILE *f, void *ctx) {
    fputs(VB_TRIALS_CSV_HEADER "\n", f);
    write_trial_rows(f, ctx, trials_row);
}

static void write_csv_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, ",%.6g", v);
    else fputs(",", f); /* not provided by this kernel: empty, never a made-up 0 */
}

static void load_row(FILE *f, const bench_state *s, const trial_rec *t, int k, const rank_trial *rt) {
    vb_csv_field(f, s->r->run_id);
    fprintf(f, ",%s,%d,%d,%d,%.9g,%d", KIND_NAME(t->type), t->index, t->warmup ? 1 : 0, k, rt->seconds,
            vb_load_online_cpus());
    write_csv_num(f, rt->load.loadavg_before);
    write_csv_num(f, rt->load.loadavg_after);
    write_csv_num(f, rt->load.steal_share);
    write_csv_num(f, rt->load.wait_share);
    write_csv_num(f, rt->load.nivcsw);
    fputc('\n', f);
}

static void write_load_csv(FILE *f, void *ctx) {
    fputs(VB_LOAD_CSV_HEADER "\n", f);
    write_trial_rows(f, ctx, load_row);
}

static void write_iterations_csv(FILE *f, void *ctx) {
    bench_state *s = ctx;
    fputs(VB_ITERATIONS_CSV_HEADER "\n", f);
    for (int i = 0; i < s->ntrials; i++) {
        const trial_rec *t = &s->trials[i];
        if (!t->done) continue;
        for (int rk = 0; rk < s->nranks; rk++) {
            for (int k = 0; k < t->nbatches; k++) {
                const iter_rec *it = &s->all_iters[(size_t)rk * s->niters + t->first_iter + (size_t)k];
                fprintf(f, "%s,%s,%d,%d,%d,%d,%.9g,%.9g,%.0f,%.0f,%.9g\n", t->label, KIND_NAME(t->type), t->index,
                        t->warmup ? 1 : 0, k, rk, it->seconds, it->data_wait, it->allreduce_calls,
                        it->allreduce_bytes, it->comm_exposed);
            }
        }
    }
}

/* Trial throughputs of the finished timed trials of a type, in run order:
 * summary.csv's and the SUMMARY line's mean, population std (np.std, ddof 0,
 * benchy's convention), min and max. n == 0 when there are none. */
static vb_stats_summary stats_of(const bench_state *s, int type) {
    double *rates = vb_malloc_check((size_t)(s->ntrials > 0 ? s->ntrials : 1) * sizeof *rates);
    int n = 0;
    for (int i = 0; i < s->ntrials; i++) {
        const trial_rec *t = &s->trials[i];
        if (t->type == type && !t->warmup && t->done) rates[n++] = t->trial_rate;
    }
    vb_stats_summary st = vb_stats_summarize(rates, n, 0);
    free(rates);
    return st;
}

static void write_summary_csv(FILE *f, void *ctx) {
    bench_state *s = ctx;
    const vb_run *r = s->r;
    const vb_config *c = &r->cfg;
    fputs(VB_SUMMARY_CSV_HEADER "\n", f);
    /* the largest peak over ranks: the one that decides whether a config fits */
    double peak = 0;
    for (int k = 0; r->peak_mem && k < r->world.size; k++) peak = r->peak_mem[k] > peak ? r->peak_mem[k] : peak;
    const vb_fingerprint *fp = &r->fp;
    for (int type = 0; type < VB_TRIAL_NKINDS; type++) {
        vb_stats_summary st = stats_of(s, type);
        if (st.n == 0) continue;
        fprintf(f, "%s,%.9g,%.9g,%.9g,%.9g,%d,", KIND_NAME(type), st.mean, st.std, st.min, st.max, st.n);
        vb_csv_field(f, c->config);
        fprintf(f, ",%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,", r->ops->name, r->world.size, r->layout.tp,
                r->layout.cp, r->layout.dp, r->global_batch, r->local_batch, c->embed_dim, c->depth, c->num_heads,
                c->patch_size, c->img_size[0], c->img_size[1], c->n_in_channels, c->n_out_channels,
                c->num_data_workers);
        vb_csv_field(f, c->amp_mode);
        char cap[32];
        for (int prec = 6; prec <= 9; prec++) { /* shortest form that reads back: 0.05, not 0.0500000007 */
            snprintf(cap, sizeof cap, "%.*g", prec, (double)c->bucket_cap_mb);
            if (strtof(cap, NULL) == c->bucket_cap_mb) break;
        }
        fprintf(f, ",%s,%s,", cap, c->noddp ? "true" : "false");
        /* the FLOPs of one sample over every shard of the model */
        double flops_per_sample = k_kinds[type].flops_per_sample ? k_kinds[type].flops_per_sample(r) : 0;
        if (flops_per_sample > 0) fprintf(f, "%.6g", flops_per_sample * st.mean * 1e-12);
        fprintf(f, ",%.0f,", peak);
        vb_csv_field(f, fp->host);
        fputc(',', f);
        vb_csv_field(f, fp->cpu_model);
        fprintf(f, ",%d,%d,", fp->affinity_cores, fp->omp_threads);
        vb_csv_field(f, fp->blas);
        fputc(',', f);
        vb_csv_field(f, fp->blas_coretype);
        fputc(',', f);
        vb_csv_field(f, fp->compiler);
        fprintf(f, ",%s,%s,%s\n", fp->git_commit, fp->git_dirty ? "true" : "false", fp->machine_key);
    }
}

static void write_text(FILE *f, void *ctx) { fputs((const char *)ctx, f); }

/* benchy's results dict: {"nranks": N, "<TYPE>": {"rates": [[...] per trial],
 * "avg_iter_throughput": [...], "trial_throughput": [...], "trial_time": [...]}},
 * timed trials only, a type present once one of its timed trials finished. */
static void write_benchy_json(bench_state *s) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "nranks", s->r->world.size); /* benchy's: the world size */
    for (int type = 0; type < VB_TRIAL_NKINDS; type++) {
        cJSON *obj = NULL, *rates = NULL, *avg = NULL, *tput = NULL, *ttime = NULL;
        for (int i = 0; i < s->ntrials; i++) {
            const trial_rec *t = &s->trials[i];
            if (t->type != type || t->warmup || !t->done) continue;
            if (!obj) {
                obj = cJSON_AddObjectToObject(root, KIND_NAME(type));
                rates = cJSON_AddArrayToObject(obj, "rates");
                avg = cJSON_AddArrayToObject(obj, "avg_iter_throughput");
                tput = cJSON_AddArrayToObject(obj, "trial_throughput");
                ttime = cJSON_AddArrayToObject(obj, "trial_time");
            }
            cJSON *tr = cJSON_CreateArray();
            for (int k = 0; k < t->nbatches; k++) {
                double sec = s->iters[t->first_iter + (size_t)k].seconds;
                cJSON_AddItemToArray(tr, cJSON_CreateNumber(samples_per_iter(s->r) / sec));
            }
            cJSON_AddItemToArray(rates, tr);
            cJSON_AddItemToArray(avg, cJSON_CreateNumber(t->avg_iter_rate));
            cJSON_AddItemToArray(tput, cJSON_CreateNumber(t->trial_rate));
            cJSON_AddItemToArray(ttime, cJSON_CreateNumber(t->seconds));
        }
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) vb_die_internal("cannot serialise benchy output");
    size_t len = strlen(text);
    char *withnl = vb_malloc_check(len + 2);
    memcpy(withnl, text, len);
    memcpy(withnl + len, "\n", 2);
    cJSON_free(text);
    vb_atomic_write_or_die(s->json_path, write_text, withnl);
    free(withnl);
}

/* The ops.csv rows rank 0 writes: its own, or with profiler_mode all every
 * rank's in rank order. Collective when gather_ops (every rank calls it at the
 * same points); returns a malloc'd string on rank 0, NULL elsewhere. */
static char *ops_rows(const bench_state *s) {
    const vb_run *r = s->r;
    if (!s->gather_ops) return r->world.rank == 0 ? vb_prof_csv_rows(r->prof, r->world.rank) : NULL;
    char *mine = vb_prof_csv_rows(r->prof, r->world.rank);
    char *all = vb_gatherv_bytes(&r->world, mine, strlen(mine), 0, NULL);
    free(mine);
    return all;
}

typedef struct {
    const char *p;
    size_t n;
} text_slice;

static void write_slice(FILE *f, void *ctx) {
    const text_slice *t = ctx;
    fwrite(t->p, 1, t->n, f);
}

/* The CUPTI summaries (cupti_trace.h: kernels.csv, kernels_SYNTHETIC.csv,
 * kernels_FULL.csv, gpu_mem_time.csv), so far: rank 0's under those names;
 * with profiler_mode all on > 1 rank every rank's gathered to rank 0, rank k's
 * as kernels_rank<k>.csv and so on, one file per rank as nsys writes one
 * report per rank. Collective when gather_ops, like ops_rows. */
static void write_cupti(bench_state *s) {
    const vb_run *r = s->r;
    if (!s->cupti_here) return;
    const bool gather = s->gather_ops;
    const int nranks = gather ? r->world.size : 1;
    size_t *lens = r->world.rank == 0 ? vb_calloc_check((size_t)nranks, sizeof *lens) : NULL;
    for (int v = 0; v < VB_CUPTI_NVIEWS; v++) {
        char *mine = vb_cupti_csv((vb_cupti_view)v);
        size_t len = strlen(mine);
        char *all = mine;
        if (gather) {
            vb_gather_bytes(&r->world, &len, sizeof len, lens, 0);
            all = vb_gatherv_bytes(&r->world, mine, len, 0, NULL);
        } else if (lens) {
            lens[0] = len;
        }
        if (r->world.rank == 0) {
            const char *file = vb_cupti_file((vb_cupti_view)v);
            const char *dot = strrchr(file, '.');
            size_t off = 0;
            for (int k = 0; k < nranks; k++) {
                char name[128], path[VB_PATH_MAX];
                if (k == 0)
                    vb_snprintf(name, sizeof name, "%s", file);
                else
                    vb_snprintf(name, sizeof name, "%.*s_rank%d%s", (int)(dot - file), file, k, dot);
                vb_run_path(r, path, sizeof path, name);
                text_slice t = {all + off, lens[k]};
                vb_atomic_write_or_die(path, write_slice, &t);
                off += lens[k];
            }
        }
        if (all != mine) free(all);
        free(mine);
    }
    free(lens);
}

static void write_results(bench_state *s) {
    const vb_run *r = s->r;
    /* before the rank-0 return: the gathers need every rank */
    write_cupti(s);
    char *ops = ops_rows(s);
    if (r->world.rank != 0) return;
    /* trials.csv goes last: a reader (or a run killed between two writes)
     * that sees trial N there finds it in every other file too */
    char path[VB_PATH_MAX];
    vb_run_path(r, path, sizeof path, VB_ITERATIONS_CSV);
    vb_atomic_write_or_die(path, write_iterations_csv, s);
    vb_run_path(r, path, sizeof path, VB_SUMMARY_CSV);
    vb_atomic_write_or_die(path, write_summary_csv, s);
    vb_run_path(r, path, sizeof path, VB_LOAD_CSV);
    vb_atomic_write_or_die(path, write_load_csv, s);
    vb_run_path(r, path, sizeof path, VB_OPS_CSV);
    if (vb_prof_write_csv_rows(path, ops) != 0) vb_die_env("cannot write %s: %s", path, strerror(errno));
    free(ops);
    write_benchy_json(s);
    vb_run_path(r, path, sizeof path, VB_TRIALS_CSV);
    vb_atomic_write_or_die(path, write_trials_csv, s);
}

/* timeline.csv once the window has closed (or the last FULL trial ended):
 * every rank's rows gathered to rank 0. Collective: every rank reaches the
 * same decision, since every rank runs the same steps. */
static void write_timeline(bench_state *s, bool last_chance) {
    vb_run *r = s->r;
    if (!r->timeline || s->timeline_written) return;
    if (!last_chance && vb_tlrec_steps_done(r->timeline) < r->cfg.profile_steps) return;
    s->timeline_written = true;
    char *mine = vb_tlrec_csv_rows(r->timeline, r->world.rank);
    char *all = r->world.size > 1 ? vb_gatherv_bytes(&r->world, mine, strlen(mine), 0, NULL) : mine;
    if (r->world.rank == 0) {
        char path[VB_PATH_MAX];
        vb_run_path(r, path, sizeof path, VB_TIMELINE_CSV);
        if (vb_tlrec_write_csv(path, all) != 0) vb_die_env("cannot write %s: %s", path, strerror(errno));
        long dropped = vb_tlrec_dropped(r->timeline);
        if (dropped > 0) vb_warn("timeline: %ld events did not fit the window's buffers and were dropped", dropped);
    }
    if (all != mine) free(all);
    free(mine);
}

/* ---- output lines ---- */

static void progress_bar(const trial_rec *t, int done, double rate) {
    const int width = 30;
    int fill = t->nbatches > 0 ? done * width / t->nbatches : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    printf("\rBENCHY::%s [%s] %d/%d  %.3f samples/s\033[K", t->label, bar, done, t->nbatches, rate);
    fflush(stdout);
}

static void print_rate_line(const char *label, const char *what, double x) {
    char num[64];
    vb_pyfloat(num, sizeof num, x);
    printf("BENCHY::%s::%s: %s\n", label, what, num);
}

/* ---- per-rank records to rank 0 ---- */

/* After a trial every rank sends its trial time and step records to rank 0
 * (one gather; outside the timed region), which keeps them for the files. */
static void gather_trial(bench_state *s, const trial_rec *t) {
    vb_run *r = s->r;
    const int ti = (int)(t - s->trials);
    const size_t per_rank = (size_t)TRIAL_DOUBLES + (size_t)t->nbatches * ITER_DOUBLES;
    double *p = s->gather_send;
    rank_trial mine = {t->seconds, t->trial_rate, vb_peak_rss_bytes(), t->load};
    memcpy(p, &mine, sizeof mine);
    memcpy(p + TRIAL_DOUBLES, &s->iters[t->first_iter], (size_t)t->nbatches * sizeof(iter_rec));
    vb_gather_bytes(&r->world, s->gather_send, per_rank * sizeof(double), s->gather_recv, 0);
    if (r->world.rank != 0) return;
    for (int k = 0; k < s->nranks; k++) {
        const double *q = s->gather_recv + (size_t)k * per_rank;
        memcpy(&s->all_trials[(size_t)k * (size_t)s->ntrials + (size_t)ti], q, sizeof(rank_trial));
        if (r->peak_mem) r->peak_mem[k] = s->all_trials[(size_t)k * (size_t)s->ntrials + (size_t)ti].peak_rss;
        memcpy(&s->all_iters[(size_t)k * s->niters + t->first_iter], q + TRIAL_DOUBLES,
               (size_t)t->nbatches * sizeof(iter_rec));
    }
}

/* ---- one trial ---- */

/* The feed's fetch of step k's batch (feed.h), its wait timed into the
 * step record of the step running now (data_wait_s, the data_wait op and the
 * timeline's data phase; a prefetch for step k is its step's before), in NVTX
 * range <nvtx>::DATA_<k>. */
typedef struct trial_fetch {
    bench_state *s;
    vb_loader *loader; /* the trial's split */
    const char *nvtx;
    iter_rec *it;   /* the step running now */
    bool in_window; /* it is in the timeline's window */
} trial_fetch;

static const vb_batch *fetch_batch(void *arg, int k) {
    trial_fetch *tf = arg;
    vb_run *r = tf->s->r;
    char nv[128];
    vb_snprintf(nv, sizeof nv, "%s::DATA_%d", tf->nvtx, k);
    VB_NVTX_PUSH(nv);
    vb_prof_token tp = vb_prof_begin(r->prof, VB_OP_ID(r->prof, "data_wait", VB_CAT_IO));
    double tw = vb_now();
    const vb_batch *b = vb_loader_next(tf->loader);
    double wait = vb_now() - tw;
    tf->it->data_wait += wait;
    vb_prof_end(r->prof, tp, 0);
    VB_NVTX_POP();
    if (tf->in_window) vb_run_timeline_phase(r, "data", tw, tw + wait);
    return b;
}

/* ends the profiler's capture range if this rank opened it: after the last
 * timed trial, or before an exit in the middle of one (interrupt, divergence),
 * so that nsys sees the range closed either way */
static void close_profiler(bench_state *s) {
    if (!s->profiler_open) return;
    s->profiler_open = false;
    s->r->ops->profiler_stop(s->r->ctx);
}

static void run_trial(bench_state *s, trial_rec *t) {
    vb_run *r = s->r;
    const trial_kind *kind = &k_kinds[t->type];
    vb_loader *loader = kind->loader(r);
    bool rank0 = r->world.rank == 0;
    /* benchy's range names: the trial, and in it each step's batch fetch
     * (DATA_<i>) and compute (STEP_<i>), i counting the trial's steps */
    char nvtx[96];
    vb_snprintf(nvtx, sizeof nvtx, "BENCHY::BenchmarkIterator::%s", t->label);
    VB_NVTX_PUSH(nvtx);

    /* a fresh loader iterator per trial, as benchy calls iter(loader) per trial */
    vb_loader_reset(loader, s->epoch++);
    trial_fetch tf = {.s = s, .loader = loader, .nvtx = nvtx};
    vb_feed feed;
    vb_feed_begin(&feed, &r->staging, loader, t->nbatches, r->dali && kind->trains, fetch_batch, &tf);
    if (kind->first_batch_reused) {
        /* benchy hands out the first batch before its clock starts; the
         * training step on it is therefore untimed (and unprofiled) too */
        const vb_batch *first = vb_loader_next(loader);
        vb_train_step(r, first, NULL);
        vb_feed_hold(&feed, first); /* under dali the first timed step's copy overlaps that step */
    }
    /* ops.csv covers exactly the timed steps, so shares add up to <= 1 */
    bool profiled = s->profile_here && !t->warmup && kind->work;
    vb_prof_set_trial_type(r->prof, KIND_NAME(t->type));
    vb_prof_set_enabled(r->prof, profiled);
    /* the timeline window: profile_steps timed FULL steps from the start of
     * trial window_trial on, every rank */
    bool windowed = r->timeline && kind->timeline && !t->warmup && t->index >= s->window_trial &&
                    vb_tlrec_steps_done(r->timeline) < r->cfg.profile_steps;
    /* CUPTI's records: the same timed steps (the untimed first SYNTHETIC step
     * is done); in the window they are the timeline's stream lanes too */
    const bool traced = profiled && s->cupti_here;
    if (traced) vb_cupti_begin(KIND_NAME(t->type), windowed);

    const double per_iter = samples_per_iter(r);
    int report = s->b->report_freq;
    double rate_sum = 0;
    float last_lr = 0; /* the lr of the step in flight, for a divergence report */
    sync_point(s);
    vb_load_sample load_before;
    vb_load_read(&load_before);
    /* a counting run measures the timed training steps (count_region.h) */
    const bool counted = kind->trains && !t->warmup;
    if (counted) VB_COUNT_BEGIN();
    double t0 = vb_now();
    const double t_start = t0;
    for (int k = 0; k < t->nbatches; k++) {
        if (vb_run_interrupted()) {
            /* the unfinished trial is dropped; every finished one is on disk */
            if (rank0 && s->bar) printf("\n");
            vb_feed_end(&feed);
            vb_prof_set_enabled(r->prof, false);
            close_profiler(s);
            vb_run_exit_interrupted(r);
        }
        iter_rec *it = &s->iters[t->first_iter + (size_t)k];
        bool in_window = windowed && vb_tlrec_begin_step(r->timeline, KIND_NAME(t->type), t->index, k);
        it->data_wait = 0;
        it->allreduce_calls = it->allreduce_bytes = it->comm_exposed = 0;
        tf.it = it;
        tf.in_window = in_window;
        const vb_batch *batch = vb_feed_next(&feed, k);
        /* the step's range ends at benchy's timing point, when its GPU work has
         * finished (under dali the next batch's DATA range nests in it) */
        char nv[128];
        vb_snprintf(nv, sizeof nv, "%s::STEP_%d", nvtx, k);
        VB_NVTX_PUSH(nv);
        if (kind->work) kind->work(r, batch, feed.held != NULL, it, &last_lr);
        vb_feed_done(&feed, batch, k); /* dali: the next batch's copy runs under this step */

        sync_point(s);
        double t1 = vb_now();
        VB_NVTX_POP();
        if (kind->trains) {
            float loss = vb_run_step_loss(r); /* the step has finished: sync_point waited for it */
            /* the trials finished so far are on disk: write_results ran after each */
            if (!isfinite(loss)) {
                close_profiler(s);
                vb_run_die_diverged(r, loss, last_lr, r->iteration);
            }
        }
        if (in_window) {
            vb_tlrec_add(r->timeline, VB_TL_MAIN, VB_TLK_STEP, "step", t0, t1 - t0, 0, 0, -1);
            vb_tlrec_end_step(r->timeline);
        }
        it->seconds = t1 - t0;
        t0 = t1;
        if (profiled) vb_prof_add_step_time(r->prof, it->seconds);
        double rate = per_iter / it->seconds;
        rate_sum += rate;
        if (rank0) {
            if (s->bar)
                progress_bar(t, k + 1, rate);
            else if (s->lines && report > 0 && (k + 1) % report == 0)
                print_rate_line(t->label, "Iteration Throughput", rate);
        }
    }
    if (counted) VB_COUNT_END();
    vb_feed_end(&feed);
    /* after the last timing point: the flush waits for the device */
    if (traced) vb_cupti_end();
    if (traced && windowed) vb_cupti_to_timeline(r->timeline);
    vb_prof_set_enabled(r->prof, false);

    t->seconds = t0 - t_start;
    vb_load_sample load_after;
    vb_load_read(&load_after);
    t->load = vb_load_between(&load_before, &load_after);
    if (windowed) vb_tlrec_add_trial(r->timeline, KIND_NAME(t->type), t->index, t_start, t->seconds);
    t->avg_iter_rate = rate_sum / t->nbatches;
    t->trial_rate = (double)t->nbatches * per_iter / t->seconds;
    t->done = true;
    gather_trial(s, t);
    if (rank0) {
        if (s->bar) printf("\n");
        print_rate_line(t->label, "Average Iteration Throughput", t->avg_iter_rate);
        print_rate_line(t->label, "Trial Throughput", t->trial_rate);
        fflush(stdout);
    }
    VB_NVTX_POP();
}

/* --progress: a live bar only where a person watches (a terminal, not a
 * launcher's pseudo-terminal: mpirun and srun hand ranks one, and the bar's
 * escape codes would fill every sweep log); lines otherwise. */
static bool started_by_launcher(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK", "SLURM_STEP_ID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return true;
    return false;
}

static void choose_progress(bench_state *s) {
    const char *mode = s->r->cfg.progress;
    bool rank0 = s->r->world.rank == 0;
    bool bar = strcmp(mode, "bar") == 0 ||
               (strcmp(mode, "auto") == 0 && isatty(STDOUT_FILENO) && !started_by_launcher());
    s->bar = rank0 && bar;
    s->lines = rank0 && !bar && strcmp(mode, "none") != 0;
}

int vb_trials_run(vb_run *r) {
    const vb_benchy_config *b = &r->bcfg;
    bench_state s = {.r = r, .b = b};
    bool rank0 = r->world.rank == 0;
    choose_progress(&s);
    if (rank0) {
        r->peak_mem = vb_calloc_check((size_t)r->world.size, sizeof *r->peak_mem);
    }

    if (r->benchy_file[0])
        vb_log("BENCHY::INFO::Message: Using benchy configuration file %s.", r->benchy_file);
    else
        vb_log("BENCHY::INFO::Message: Using default benchy configuration.");
    /* benchy's profiler_mode picks which ranks profile: here, the per-op timers */
    if (strcmp(b->profiler_mode, "single") == 0) {
        vb_log("BENCHY::INFO::Message: Profiling mode single. Starting profiler on rank 0 only.");
        s.profile_here = rank0;
    } else if (strcmp(b->profiler_mode, "all") == 0) {
        vb_log("BENCHY::INFO::Message: Profiling mode all. Starting profiler on all ranks.");
        s.profile_here = true;
        s.gather_ops = r->world.size > 1;
    }
    /* cupti: per-kernel timings on the same ranks (the config check made sure the backend is cuda) */
    s.cupti_here = r->cfg.cupti && s.profile_here;
    if (r->cfg.cupti && strcmp(b->profiler_mode, "none") == 0)
        vb_warn("cupti: benchy profiler_mode is none, so no rank traces kernels and kernels.csv is not written");
    if (s.cupti_here) vb_cupti_init();

    /* where benchy's JSON goes: its output_dir, else the run directory */
    const char *fname = b->output_filename[0] ? b->output_filename : "benchy_output.json";
    if (b->output_dir[0]) {
        if (rank0 && vb_mkdir_p(b->output_dir) != 0)
            vb_die_input("benchy output_dir %s: cannot create directory (%s)", b->output_dir, strerror(errno));
        vb_snprintf(s.json_path, sizeof s.json_path, "%s/%s", b->output_dir, fname);
    } else {
        vb_run_path(r, s.json_path, sizeof s.json_path, fname);
    }

    /* lay out every trial and its iteration rows up front */
    int nb[VB_TRIAL_NKINDS];
    size_t total_iters = 0;
    for (int type = 0; type < VB_TRIAL_NKINDS; type++) {
        const vb_benchy_trial_cfg *tc = &b->trial[type];
        nb[type] = 0;
        if (!tc->run_benchmark) continue;
        const int spe = vb_loader_steps_per_epoch(k_kinds[type].loader(r));
        /* benchy: nbatches = len(loader) if not nbatches else min(len(loader), nbatches) */
        nb[type] = tc->nbatches > 0 && tc->nbatches < spe ? tc->nbatches : spe;
        if (tc->nbatches > spe)
            vb_warn("benchy %s nbatches %d is more than one epoch (%d batches of %d); trials use %d batches, as benchy does",
                    KIND_NAME(type), tc->nbatches, spe, r->local_batch, spe);
        s.ntrials += tc->nwarmup + tc->ntrials;
        total_iters += (size_t)(tc->nwarmup + tc->ntrials) * (size_t)nb[type];
        if (k_kinds[type].timeline && nb[type] > 0) {
            const int need = (r->cfg.profile_steps + nb[type] - 1) / nb[type];
            s.window_trial = tc->ntrials > need ? tc->ntrials - need : 0;
        }
    }
    s.trials = vb_calloc_check((size_t)(s.ntrials > 0 ? s.ntrials : 1), sizeof *s.trials);
    s.iters = vb_calloc_check(total_iters > 0 ? total_iters : 1, sizeof *s.iters);
    s.niters = total_iters;
    int max_nb = 0;
    for (int type = 0; type < VB_TRIAL_NKINDS; type++) max_nb = nb[type] > max_nb ? nb[type] : max_nb;
    s.nranks = rank0 ? r->world.size : 0;
    size_t per_rank = (size_t)TRIAL_DOUBLES + (size_t)max_nb * ITER_DOUBLES;
    s.gather_send = vb_calloc_check(per_rank, sizeof(double));
    s.gather_recv = rank0 ? vb_calloc_check(per_rank * (size_t)r->world.size, sizeof(double)) : NULL;
    s.all_iters = rank0 ? vb_calloc_check((total_iters > 0 ? total_iters : 1) * (size_t)r->world.size, sizeof(iter_rec))
                        : NULL;
    s.all_trials =
        rank0 ? vb_calloc_check((size_t)(s.ntrials > 0 ? s.ntrials : 1) * (size_t)r->world.size, sizeof(rank_trial))
              : NULL;
    int ti = 0;
    size_t first = 0;
    for (int type = 0; type < VB_TRIAL_NKINDS; type++) {
        const vb_benchy_trial_cfg *tc = &b->trial[type];
        if (!tc->run_benchmark) continue;
        for (int n = 0; n < tc->nwarmup + tc->ntrials; n++) {
            trial_rec *t = &s.trials[ti++];
            t->type = type;
            t->warmup = n < tc->nwarmup;
            t->index = t->warmup ? n : n - tc->nwarmup;
            if (t->warmup)
                vb_snprintf(t->label, sizeof t->label, "%s_WARMUP_%d", KIND_NAME(type), t->index);
            else
                vb_snprintf(t->label, sizeof t->label, "%s_%d", KIND_NAME(type), t->index);
            t->nbatches = nb[type];
            t->first_iter = first;
            first += (size_t)nb[type];
        }
    }

    vb_prof_reset(r->prof);
    write_results(&s); /* headers exist from the start */
    /* the timeline's clock origin: every rank leaves this barrier together */
    if (r->world.size > 1) vb_barrier(&r->world);
    r->time_origin = vb_now();
    vb_tlrec_set_origin(r->timeline, r->time_origin);
    /* benchy's profiler window: the profiling ranks open the capture range
     * (cudaProfilerStart on the CUDA backend) before the first timed trial
     * and close it after the last, warm-ups between them included */
    int first_timed = -1, last_timed = -1;
    for (int i = 0; i < s.ntrials; i++) {
        if (s.trials[i].warmup) continue;
        if (first_timed < 0) first_timed = i;
        last_timed = i;
    }
    for (int i = 0; i < s.ntrials; i++) {
        if (i == first_timed && s.profile_here) {
            r->ops->profiler_start(r->ctx);
            s.profiler_open = true;
        }
        run_trial(&s, &s.trials[i]);
        if (i == last_timed) close_profiler(&s);
        write_results(&s);
        write_timeline(&s, false);
    }
    write_timeline(&s, true);
    if (s.cupti_here) {
        const vb_cupti_loss lost = vb_cupti_losses();
        if (lost.dropped > 0)
            vb_warn("cupti: %llu activity records were dropped (CUPTI's buffers were full or could not be allocated); "
                    "kernels.csv undercounts",
                    lost.dropped);
        if (lost.untimed > 0)
            vb_warn("cupti: %llu activity records came without times (CUPTI had no device memory to time them); "
                    "kernels.csv leaves them out",
                    lost.untimed);
        if (lost.incomplete_buffers > 0)
            vb_warn("cupti: %llu of CUPTI's buffers ended in an unfinished record at a flush; the records after it "
                    "are missing from kernels.csv",
                    lost.incomplete_buffers);
    }

    if (rank0) {
        for (int type = 0; type < VB_TRIAL_NKINDS; type++) {
            vb_stats_summary st = stats_of(&s, type);
            if (st.n == 0) continue;
            printf("BENCHY::SUMMARY::%s%s average trial throughput: %.3f +/- %.3f\n", type == VB_TRIAL_SYNTHETIC ? " " : "",
                   KIND_NAME(type), st.mean, st.std);
        }
        printf("BENCHY::INFO::Message: Writing JSON output to %s.\n", s.json_path);
        if (b->exit_after_tests) printf("BENCHY::INFO::Message: Tests completed.... exiting.\n");
        fflush(stdout);
    }
    free(s.trials);
    free(s.iters);
    free(s.gather_send);
    free(s.gather_recv);
    free(s.all_iters);
    free(s.all_trials);
    return 0;
}
