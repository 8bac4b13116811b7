/* import_write.c: one imported run written in vitbench's results schema
 * (import.h; core/results/results.h names every file and column).
 *
 * What a file did not say stays an empty cell (or out of run.json), and
 * run.json's "imported" says where each number came from and lists what is
 * not known: an imported run has no machine fingerprint, no config and no
 * commit, so nothing can match it to a baseline of vitbench's by accident.
 * benchy measures on rank 0: every trial and iteration row is rank 0's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analysis/import.h"
#include "core/util/common.h"
#include "core/util/stats.h"

static void cell(FILE *f, double x) {
    char b[40];
    fprintf(f, ",%s", vb_imp_num(b, sizeof b, x));
}

static void cell_int(FILE *f, int v) {
    if (v > 0)
        fprintf(f, ",%d", v);
    else
        fputc(',', f);
}

static void write_trials(FILE *f, void *ctx) {
    const vb_imp_run *r = ctx;
    fputs(VB_TRIALS_CSV_HEADER "\n", f);
    for (int i = 0; i < r->ntrials; i++) {
        const vb_imp_trial *t = &r->trials[i];
        vb_csv_field(f, r->name);
        fprintf(f, ",%s,%d,%d", vb_trial_kinds[t->kind].name, t->index, t->warmup ? 1 : 0);
        cell_int(f, t->nbatches);
        cell_int(f, t->gbatch);
        cell_int(f, r->nranks);
        fputs(",0", f);
        cell(f, t->seconds);
        cell(f, t->rate);
        fputc('\n', f);
    }
}

/* the global batch every timed trial agrees on; 0 when unknown or not one */
static int run_gbatch(const vb_imp_run *r) {
    int g = 0;
    for (int i = 0; i < r->ntrials; i++) {
        if (r->trials[i].gbatch <= 0) return 0;
        if (g && r->trials[i].gbatch != g) return 0;
        g = r->trials[i].gbatch;
    }
    return g;
}

static void write_summary(FILE *f, void *ctx) {
    const vb_imp_run *r = ctx;
    fputs(VB_SUMMARY_CSV_HEADER "\n", f);
    /* the header's columns after ntrials, by name: what is known is filled */
    char hdr[] = VB_SUMMARY_CSV_HEADER;
    const char *cols[64];
    int nc = 0;
    char *save = NULL;
    for (char *c = strtok_r(hdr, ",", &save); c && nc < 64; c = strtok_r(NULL, ",", &save)) cols[nc++] = c;
    const int g = run_gbatch(r);
    for (int k = 0; k < VB_TRIAL_NKINDS; k++) {
        double *v = vb_calloc_check((size_t)r->ntrials + 1, sizeof *v);
        int n = 0;
        for (int i = 0; i < r->ntrials; i++)
            if (r->trials[i].kind == k && !r->trials[i].warmup) v[n++] = r->trials[i].rate;
        if (n == 0) {
            free(v);
            continue;
        }
        vb_stats_summary s = vb_stats_summarize(v, n, 0);
        free(v);
        fprintf(f, "%s", vb_trial_kinds[k].name);
        cell(f, s.mean);
        cell(f, s.std);
        cell(f, s.min);
        cell(f, s.max);
        fprintf(f, ",%d", n);
        for (int c = 6; c < nc; c++) {
            if (!strcmp(cols[c], "ranks"))
                cell_int(f, r->nranks);
            else if (!strcmp(cols[c], "global_batch_size"))
                cell_int(f, g);
            else if (!strcmp(cols[c], "local_batch_size"))
                cell_int(f, g && r->nranks && g % r->nranks == 0 ? g / r->nranks : 0);
            else
                fputc(',', f);
        }
        fputc('\n', f);
    }
}

static void write_iterations(FILE *f, void *ctx) {
    const vb_imp_run *r = ctx;
    fputs(VB_ITERATIONS_CSV_HEADER "\n", f);
    for (int i = 0; i < r->ntrials; i++) {
        const vb_imp_trial *t = &r->trials[i];
        /* only where every iteration is there and the batch is known: the
         * JSON's rates, batch x nranks / the iteration's time */
        if (t->gbatch <= 0 || t->niters != t->nbatches) continue;
        for (int s = 0; s < t->niters; s++) {
            fprintf(f, "%s_%s%d,%s,%d,%d,%d,0", vb_trial_kinds[t->kind].name, t->warmup ? "WARMUP_" : "", t->index,
                    vb_trial_kinds[t->kind].name, t->index, t->warmup ? 1 : 0, s);
            cell(f, t->gbatch / t->iters[s]);
            fputs(",,,,\n", f);
        }
    }
}

static bool has_iterations(const vb_imp_run *r) {
    for (int i = 0; i < r->ntrials; i++)
        if (r->trials[i].gbatch > 0 && r->trials[i].niters == r->trials[i].nbatches) return true;
    return false;
}

static void write_train_log(FILE *f, void *ctx) {
    const vb_imp_run *r = ctx;
    fputs(VB_TRAIN_LOG_CSV_HEADER "\n", f);
    for (int e = 0; e < r->nepochs; e++) {
        const vb_imp_epoch *x = &r->epochs[e];
        fprintf(f, ",%d", x->epoch); /* step: train.py logs an epoch's mean loss, no step's */
        cell(f, x->train_loss);
        fputc(',', f);
        cell(f, x->seconds);
        fputc('\n', f);
    }
}

static void write_validation(FILE *f, void *ctx) {
    const vb_imp_run *r = ctx;
    fputs(VB_VALIDATION_CSV_HEADER "\n", f);
    for (int e = 0; e < r->nepochs; e++) {
        const vb_imp_epoch *x = &r->epochs[e];
        fprintf(f, "%d,", x->epoch);
        cell(f, x->val_loss);
        fputc(',', f);
        cell(f, x->val_seconds);
        fputc('\n', f);
    }
}

static void write_ops(FILE *f, void *ctx) {
    const vb_imp_run *r = ctx;
    fputs(VB_OPS_CSV_HEADER "\n", f);
    for (int k = 0; k < r->ntraces; k++) {
        const vb_imp_trace *t = &r->traces[k]->trace;
        for (int i = 0; i < t->nops; i++) {
            const vb_imp_op *o = &t->ops[i];
            fprintf(f, "%d,FULL,", o->rank);
            vb_csv_field(f, o->name);
            fprintf(f, ",%s,%.0f,0,%.0f", o->category, o->calls, o->flops);
            cell(f, o->total_s);
            cell(f, o->calls > 0 ? o->total_s / o->calls : NAN);
            cell(f, o->min_s);
            cell(f, o->max_s);
            cell(f, o->median_s);
            cell(f, t->step_s > 0 ? o->total_s / t->step_s : NAN);
            cell(f, o->flops > 0 && o->total_s > 0 ? o->flops / o->total_s / 1e9 : NAN);
            fputs(",\n", f); /* bytes moved: not in the trace */
        }
    }
}

/* the earliest event of the run's traces: time 0 of its timeline (ranks on
 * one node share the clock the profiler stamps) */
static double trace_origin(const vb_imp_run *r) {
    double t0 = INFINITY;
    for (int k = 0; k < r->ntraces; k++)
        for (int i = 0; i < r->traces[k]->trace.nev; i++) t0 = fmin(t0, r->traces[k]->trace.ev[i].start_s);
    return isfinite(t0) ? t0 : 0;
}

/* timeline.h's order: by rank, then lane (main, thread<tid>, stream<N> by
 * N), each lane's rows by start, an enclosing row before what it holds */
static int lane_rank(const char *lane, long long *num) {
    *num = 0;
    if (!strcmp(lane, "main")) return 0;
    if (!strncmp(lane, "thread", 6)) return *num = atoll(lane + 6), 1;
    if (!strncmp(lane, "stream", 6)) return *num = atoll(lane + 6), 2;
    return 3;
}

static int cmp_event(const void *pa, const void *pb) {
    const vb_imp_event *a = *(const vb_imp_event *const *)pa, *b = *(const vb_imp_event *const *)pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    long long na, nb;
    const int la = lane_rank(a->lane, &na), lb = lane_rank(b->lane, &nb);
    if (la != lb) return la < lb ? -1 : 1;
    if (na != nb) return na < nb ? -1 : 1;
    if (a->start_s != b->start_s) return a->start_s < b->start_s ? -1 : 1;
    return (a->dur_s < b->dur_s) - (a->dur_s > b->dur_s);
}

static void write_timeline(FILE *f, void *ctx) {
    const vb_imp_run *r = ctx;
    fputs(VB_TIMELINE_CSV_HEADER "\n", f);
    const double t0 = trace_origin(r);
    int n = 0;
    for (int k = 0; k < r->ntraces; k++) n += r->traces[k]->trace.nev;
    const vb_imp_event **v = vb_calloc_check((size_t)n + 1, sizeof *v);
    n = 0;
    for (int k = 0; k < r->ntraces; k++)
        for (int i = 0; i < r->traces[k]->trace.nev; i++) v[n++] = &r->traces[k]->trace.ev[i];
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_event);
    for (int i = 0; i < n; i++) {
        const vb_imp_event *e = v[i];
        fprintf(f, "%d,%s,%s,", e->rank, e->lane, e->kind);
        vb_csv_field(f, e->name);
        fprintf(f, ",FULL,0,%d,%.9f,%.9f,0,%.0f,-1\n", e->step, e->start_s - t0, e->dur_s, e->flops);
    }
    free(v);
}

static void add_list(cJSON *o, const char *key, const vb_imp_list *l) {
    cJSON *a = cJSON_AddArrayToObject(o, key);
    for (int i = 0; i < l->n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(l->v[i]));
}

static void add_source(cJSON *a, const vb_imp_file *f, const char *role) {
    if (!f) return;
    cJSON *s = cJSON_CreateObject();
    char abs[VB_PATH_MAX];
    cJSON_AddStringToObject(s, "path", realpath(f->path, abs) ? abs : f->path);
    cJSON_AddStringToObject(s, "format", vb_imp_format_names[f->fmt]);
    cJSON_AddStringToObject(s, "role", role);
    if (f->fmt == VB_IMP_TRACE) {
        cJSON_AddNumberToObject(s, "rank", f->trace.rank);
        cJSON_AddNumberToObject(s, "profiler_steps", f->trace.nsteps);
    }
    cJSON_AddItemToArray(a, s);
}

static void write_run_json(FILE *f, void *ctx) {
    const vb_imp_run *r = ctx;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "run_id", r->name);
    cJSON_AddStringToObject(j, "status", "completed");
    cJSON_AddStringToObject(j, "command", "import");
    cJSON_AddStringToObject(j, "command_line", r->command_line ? r->command_line : "");
    char now[32];
    vb_iso_time(now, sizeof now);
    cJSON_AddStringToObject(j, "import_time", now);
    if (r->nranks > 0) cJSON_AddNumberToObject(j, "ranks", r->nranks);
    const int g = run_gbatch(r);
    if (g > 0) {
        cJSON_AddNumberToObject(j, "global_batch_size", g);
        if (r->nranks > 0 && g % r->nranks == 0) cJSON_AddNumberToObject(j, "local_batch_size", g / r->nranks);
    }
    cJSON *im = cJSON_AddObjectToObject(j, "imported");
    cJSON_AddStringToObject(im, "program", r->json || (r->log && !r->epochs_are_trials && r->ntrials)
                                               ? "PyTorch with benchy"
                                           : r->epochs_are_trials ? "PyTorch (train.py's epoch lines)"
                                                                  : "PyTorch (profiler trace)");
    cJSON *src = cJSON_AddArrayToObject(im, "sources");
    add_source(src, r->json, "trials (every iteration's rate)");
    add_source(src, r->log, r->json ? "warm-up trials, cross-check, epoch and loss lines" : "trials, epoch and loss lines");
    for (int k = 0; k < r->ntraces; k++) add_source(src, r->traces[k], "ops.csv and timeline.csv");
    cJSON_AddStringToObject(im, "point", r->point);
    if (r->series[0]) cJSON_AddStringToObject(im, "series", r->series);
    cJSON_AddNumberToObject(im, "repeat", r->repeat);
    if (r->epochs_are_trials) cJSON_AddNumberToObject(im, "warmup_epochs", r->warmup_epochs);
    /* benchy's sections as vitbench's run.json has them, with what the files show */
    cJSON *b = NULL;
    for (int k = 0; k < VB_TRIAL_NKINDS && !r->epochs_are_trials; k++) {
        int nt = 0, nw = 0, nb = 0;
        for (int i = 0; i < r->ntrials; i++) {
            if (r->trials[i].kind != k) continue;
            if (r->trials[i].warmup) nw++; else nt++;
            if (r->trials[i].nbatches) nb = r->trials[i].nbatches;
        }
        if (!nt && !nw) continue;
        if (!b) b = cJSON_AddObjectToObject(j, "benchy");
        cJSON *s = cJSON_AddObjectToObject(b, vb_trial_kinds[k].section);
        cJSON_AddBoolToObject(s, "run_benchmark", true);
        if (nb) cJSON_AddNumberToObject(s, "nbatches", nb);
        cJSON_AddNumberToObject(s, "ntrials", nt);
        if (r->log) cJSON_AddNumberToObject(s, "nwarmup", nw); /* a JSON alone does not show the warm-ups */
    }
    add_list(im, "notes", &r->notes);
    add_list(im, "unknown", &r->unknown);
    char *text = cJSON_Print(j);
    if (!text) vb_die_internal("cannot print run.json");
    fputs(text, f);
    fputc('\n', f);
    cJSON_free(text);
    cJSON_Delete(j);
}

void vb_imp_write_run(const vb_outdir *d, const vb_imp_run *r) {
    const char *cmd = "import";
    if (r->ntrials) {
        vb_outdir_write_or_die(d, VB_TRIALS_CSV, write_trials, (void *)r, cmd);
        vb_outdir_write_or_die(d, VB_SUMMARY_CSV, write_summary, (void *)r, cmd);
    }
    if (has_iterations(r)) vb_outdir_write_or_die(d, VB_ITERATIONS_CSV, write_iterations, (void *)r, cmd);
    if (r->nepochs) {
        vb_outdir_write_or_die(d, VB_TRAIN_LOG_CSV, write_train_log, (void *)r, cmd);
        vb_outdir_write_or_die(d, VB_VALIDATION_CSV, write_validation, (void *)r, cmd);
    }
    if (r->ntraces) {
        vb_outdir_write_or_die(d, VB_OPS_CSV, write_ops, (void *)r, cmd);
        vb_outdir_write_or_die(d, VB_TIMELINE_CSV, write_timeline, (void *)r, cmd);
    }
    /* last: a run directory is one once its run.json is there */
    vb_outdir_write_or_die(d, VB_RUN_JSON, write_run_json, (void *)r, cmd);
}
