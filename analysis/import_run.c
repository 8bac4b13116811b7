/* import_run.c: the files of one job merged into one run, their shared
 * trials checked against each other (import.h), and the helpers the
 * import's readers share. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "analysis/import.h"
#include "core/util/common.h"
#include "core/util/stats.h"

const char *const vb_imp_format_names[3] = {"benchy JSON", "job log", "PyTorch profiler trace"};

void vb_imp_list_add(vb_imp_list *l, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    l->v = vb_realloc_check(l->v, ((size_t)l->n + 1) * sizeof *l->v);
    l->v[l->n++] = vb_strdup_check(buf);
}

void vb_imp_list_free(vb_imp_list *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

void vb_imp_file_free(vb_imp_file *f) {
    for (int i = 0; i < f->ntrials; i++) free(f->trials[i].iters);
    free(f->trials);
    free(f->epochs);
    for (int i = 0; i < f->trace.nops; i++) free(f->trace.ops[i].name);
    free(f->trace.ops);
    for (int i = 0; i < f->trace.nev; i++) free(f->trace.ev[i].name);
    free(f->trace.ev);
    vb_imp_list_free(&f->notes);
    memset(f, 0, sizeof *f);
}

const char *vb_imp_num(char *buf, size_t n, double x) {
    if (isnan(x))
        buf[0] = '\0';
    else
        snprintf(buf, n, "%.17g", x);
    return buf;
}

/* A decompressed gzip file may not grow past this: a trace of one window
 * is megabytes, and a small file that inflates without end is no trace. */
#define MAX_INFLATED ((size_t)4 << 30)

static char *gunzip(const char *path, const unsigned char *in, size_t n, size_t *out_n, char *why) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        vb_errf(why, VB_IMP_WHY, "%s: cannot start zlib's inflate", path);
        return NULL;
    }
    size_t cap = n * 4 + 4096, k = 0;
    char *o = vb_malloc_check(cap + 1);
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)(n > UINT_MAX ? UINT_MAX : n);
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        if (k == cap) {
            if (cap >= MAX_INFLATED) break;
            cap *= 2;
            o = vb_realloc_check(o, cap + 1);
        }
        z.next_out = (unsigned char *)o + k;
        z.avail_out = (uInt)(cap - k > UINT_MAX ? UINT_MAX : cap - k);
        rc = inflate(&z, Z_NO_FLUSH);
        k = (size_t)((char *)z.next_out - o);
        if (rc != Z_OK && rc != Z_STREAM_END) break;
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        vb_errf(why, VB_IMP_WHY, "%s: a gzip file %s", path,
                k >= MAX_INFLATED ? "that inflates past 4 GiB" : "cut short or corrupt (zlib cannot inflate it)");
        free(o);
        return NULL;
    }
    o[k] = '\0';
    *out_n = k;
    return o;
}

char *vb_imp_slurp(const char *path, size_t *len, char *why) {
    char what[VB_PATH_MAX + 64];
    if (vb_file_problem(path, what, sizeof what)) {
        vb_errf(why, VB_IMP_WHY, "%s: %s", path, what);
        return NULL;
    }
    size_t n = 0;
    char *text = vb_read_file(path, &n);
    if (!text) {
        vb_errf(why, VB_IMP_WHY, "%s: cannot be read (%s)", path, strerror(errno));
        return NULL;
    }
    if (n >= 2 && (unsigned char)text[0] == 0x1f && (unsigned char)text[1] == 0x8b) {
        char *plain = gunzip(path, (const unsigned char *)text, n, len, why);
        free(text);
        return plain;
    }
    *len = n;
    return text;
}

void vb_imp_kind_stats(const vb_imp_run *r, int kind, double *mean, double *std, int *n) {
    double *v = vb_calloc_check((size_t)r->ntrials + 1, sizeof *v);
    int k = 0;
    for (int i = 0; i < r->ntrials; i++)
        if (r->trials[i].kind == kind && !r->trials[i].warmup) v[k++] = r->trials[i].rate;
    vb_stats_summary s = vb_stats_summarize(v, k, 0);
    *mean = s.mean;
    *std = s.std;
    *n = k;
    free(v);
}

static vb_imp_trial *add_trial(vb_imp_run *r, const vb_imp_trial *src) {
    r->trials = vb_realloc_check(r->trials, ((size_t)r->ntrials + 1) * sizeof *r->trials);
    vb_imp_trial *t = &r->trials[r->ntrials++];
    *t = *src;
    t->iters = NULL;
    t->niters = 0;
    if (src->niters) {
        t->iters = vb_malloc_check((size_t)src->niters * sizeof *t->iters);
        memcpy(t->iters, src->iters, (size_t)src->niters * sizeof *t->iters);
        t->niters = src->niters;
    }
    return t;
}

static void label_of(const vb_imp_trial *t, char *buf, size_t n) {
    snprintf(buf, n, "%s_%s%d", vb_trial_kinds[t->kind].name, t->warmup ? "WARMUP_" : "", t->index);
}

/* The log's timed trial against the JSON's: the three numbers benchy
 * printed from the same doubles it then wrote (Python's repr both times),
 * so equal exactly; the printed iterations are some of the JSON's, in order. */
static int check_trial(const vb_imp_run *r, const vb_imp_trial *lt, const vb_imp_trial *jt, char *why) {
    char lab[48];
    label_of(lt, lab, sizeof lab);
    const char *kn = vb_trial_kinds[lt->kind].name;
    if (lt->rate != jt->rate) {
        vb_errf(why, VB_IMP_WHY, "%s line %d: %s Trial Throughput %.17g disagrees with %s: %s trial_throughput[%d] "
                "%.17g (not the same job?)", r->log->path, lt->line, lab, lt->rate, r->json->path, kn, jt->index,
                jt->rate);
        return -1;
    }
    if (!isnan(lt->avg_iter) && lt->avg_iter != jt->avg_iter) {
        vb_errf(why, VB_IMP_WHY, "%s: %s Average Iteration Throughput %.17g disagrees with %s: %s "
                "avg_iter_throughput[%d] %.17g", r->log->path, lab, lt->avg_iter, r->json->path, kn, jt->index,
                jt->avg_iter);
        return -1;
    }
    int at = 0;
    for (int i = 0; i < lt->niters; i++) {
        while (at < jt->niters && jt->iters[at] != lt->iters[i]) at++;
        if (at == jt->niters) {
            vb_errf(why, VB_IMP_WHY, "%s: %s Iteration Throughput %.17g (its %d. such line) is not among %s: %s "
                    "rates[%d] after the ones before it", r->log->path, lab, lt->iters[i], i + 1, r->json->path, kn,
                    jt->index);
            return -1;
        }
        at++;
    }
    return 0;
}

/* benchy's SUMMARY lines (np.mean and np.std of the trial throughputs, to 3
 * decimals) against the trials: the printed number is within half a unit of
 * its last digit. */
static int check_summary(const vb_imp_run *r, char *why) {
    for (int k = 0; k < VB_TRIAL_NKINDS; k++) {
        const vb_imp_summary *s = &r->log->summary[k];
        if (!s->seen) continue;
        double mean, std;
        int n;
        vb_imp_kind_stats(r, k, &mean, &std, &n);
        if (n == 0) {
            vb_errf(why, VB_IMP_WHY, "%s: line %d: BENCHY::SUMMARY of %s, with no timed %s trial in the job's files",
                    r->log->path, s->line, vb_trial_kinds[k].name, vb_trial_kinds[k].name);
            return -1;
        }
        const double tol = 0.0005 * (1 + 1e-9);
        if (fabs(s->mean - mean) > tol + 1e-12 * mean || fabs(s->std - std) > tol + 1e-12 * mean) {
            vb_errf(why, VB_IMP_WHY, "%s: line %d: BENCHY::SUMMARY %s %.3f +/- %.3f is not its %d trials' %.6f +/- "
                    "%.6f%s", r->log->path, s->line, vb_trial_kinds[k].name, s->mean, s->std, n, mean, std,
                    r->json ? " (in the JSON)" : "");
            return -1;
        }
    }
    return 0;
}

static int cmp_epoch(const void *a, const void *b) {
    const vb_imp_epoch *x = a, *y = b;
    return (x->epoch > y->epoch) - (x->epoch < y->epoch);
}

int vb_imp_merge(vb_imp_run *r, char *why) {
    const vb_imp_file *js = r->json, *lg = r->log;
    r->nranks = js ? js->nranks : lg ? lg->nranks : 0;
    /* a plain --ranks N is for files that do not say: a trace's
     * distributedInfo, like a JSON's nranks, says */
    if (js && lg && lg->ranks_named && lg->nranks != js->nranks) {
        vb_errf(why, VB_IMP_WHY, "%s: --ranks %d for it, but %s says nranks %d", lg->path, lg->nranks, js->path,
                js->nranks);
        return -1;
    }
    for (int i = 0; i < r->ntraces; i++) {
        const vb_imp_trace *t = &r->traces[i]->trace;
        if (!r->nranks && r->traces[i]->nranks) r->nranks = r->traces[i]->nranks;
        if (t->world && r->nranks && t->world != r->nranks) {
            vb_errf(why, VB_IMP_WHY, "%s: distributedInfo.world_size %d, but the job ran %d ranks (%s)",
                    r->traces[i]->path, t->world, r->nranks, js ? js->path : "--ranks");
            return -1;
        }
        if (!r->nranks && t->world) r->nranks = t->world;
        for (int k = 0; k < i; k++)
            if (r->traces[k]->trace.rank == t->rank) {
                vb_errf(why, VB_IMP_WHY, "%s: rank %d again (also %s): one trace a rank", r->traces[i]->path, t->rank,
                        r->traces[k]->path);
                return -1;
            }
    }
    if (js) {
        for (int i = 0; i < js->ntrials; i++) add_trial(r, &js->trials[i]);
    }
    if (lg) {
        for (int i = 0; i < lg->ntrials; i++) {
            const vb_imp_trial *lt = &lg->trials[i];
            if (!js) {
                add_trial(r, lt);
                continue;
            }
            const vb_imp_trial *jt = NULL, *same_kind = NULL;
            for (int k = 0; k < js->ntrials; k++) {
                if (js->trials[k].kind != lt->kind) continue;
                if (!same_kind) same_kind = &js->trials[k];
                if (js->trials[k].index == lt->index) jt = &js->trials[k];
            }
            if (!lt->warmup) {
                if (!jt) {
                    char lab[48];
                    label_of(lt, lab, sizeof lab);
                    vb_errf(why, VB_IMP_WHY, "%s line %d: trial %s is not in %s (benchy writes every timed trial): "
                            "not the same job?", lg->path, lt->line, lab, js->path);
                    return -1;
                }
                if (check_trial(r, lt, jt, why)) return -1;
                continue;
            }
            /* a warm-up: benchy leaves it out of the JSON; its batches are
             * its kind's (one nbatches per kind), so its time is what benchy
             * divided by */
            vb_imp_trial *w = add_trial(r, lt);
            if (same_kind) {
                w->nbatches = same_kind->nbatches;
                w->gbatch = same_kind->gbatch;
                w->seconds = (double)w->nbatches * w->gbatch / w->rate;
            }
        }
        for (int k = 0; js && k < js->ntrials; k++) {
            bool found = false;
            for (int i = 0; i < lg->ntrials && !found; i++)
                found = !lg->trials[i].warmup && lg->trials[i].kind == js->trials[k].kind &&
                        lg->trials[i].index == js->trials[k].index;
            if (!found)
                vb_imp_list_add(&r->notes, "%s has %s trial %d, which %s does not print (the log is cut short?)",
                                js->path, vb_trial_kinds[js->trials[k].kind].name, js->trials[k].index, lg->path);
        }
        if (check_summary(r, why)) return -1;
        for (int i = 0; i < lg->notes.n; i++) vb_imp_list_add(&r->notes, "%s", lg->notes.v[i]);
        if (lg->nepochs) {
            r->epochs = vb_malloc_check((size_t)lg->nepochs * sizeof *r->epochs);
            memcpy(r->epochs, lg->epochs, (size_t)lg->nepochs * sizeof *r->epochs);
            r->nepochs = lg->nepochs;
            qsort(r->epochs, (size_t)r->nepochs, sizeof *r->epochs, cmp_epoch);
        }
        if (!js && lg->ntrials == 0 && r->nepochs) {
            /* train.py without benchy: each epoch is a FULL trial (the loop
             * over the loader's batches that FULL times), its first ones the
             * warm-up (start-up, the loader's first fill, autotuning) */
            r->epochs_are_trials = true;
            int timed = 0, warm = 0;
            for (int e = 0; e < r->nepochs; e++) {
                vb_imp_trial t = {.kind = VB_TRIAL_FULL, .rate = r->epochs[e].rate, .seconds = r->epochs[e].seconds,
                                  .avg_iter = NAN, .line = r->epochs[e].line};
                t.warmup = e < r->warmup_epochs;
                t.index = t.warmup ? warm++ : timed++;
                add_trial(r, &t);
            }
            if (timed == 0) {
                vb_errf(why, VB_IMP_WHY, "%s: %d epoch line%s, all warm-up (--warmup_epochs %d): no timed trial",
                        lg->path, r->nepochs, r->nepochs == 1 ? "" : "s", r->warmup_epochs);
                return -1;
            }
        } else if (lg->nepochs && lg->ntrials) {
            vb_imp_list_add(&r->notes, "%s: its epoch lines time benchy's trials (with --enable_benchy each epoch runs one), "
                            "not train.py's own loop: kept in train_log.csv and validation.csv, not as trials",
                            lg->path);
        }
    }
    return 0;
}
