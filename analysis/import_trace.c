/* import_trace.c: a PyTorch profiler trace (the Chrome / Kineto JSON that
 * torch.profiler's export_chrome_trace and tensorboard_trace_handler write,
 * gzip'd or not) read for `vitbench import` (import.h).
 *
 * Read: the complete events ("ph": "X") and distributedInfo's rank and
 * world_size. By "cat":
 *   kernel                  a GPU kernel, in HTA's classes by its name:
 *                           communication (nccl...), else compute
 *   gpu_memcpy, gpu_memset  HTA's memory class (category memcpy)
 *   cpu_op                  an operator on a CPU thread: its self time (its
 *                           duration less the operators nested in it on
 *                           its thread, the profiler's "Self CPU"), so the
 *                           ops' totals add up; compute, or comm for the
 *                           collectives' record functions (c10d::, gloo:,
 *                           nccl:, record_param_comms)
 *   cuda_runtime, cuda_driver  the host's CUDA API calls (category api)
 *   user_annotation ProfilerStep#N  the profiled training steps
 * and nothing else (python_function, other annotations, flows, counters).
 * In a trace with GPU activity the GPU's rows are the step's work: its CPU
 * operators are kept in ops.csv as category cpu_op (host time, as nsys
 * users read API time) and left out of the timeline; in a CPU-only trace
 * the operators are the work, and the outermost one on each thread is a
 * timeline row (compute or comm) on lane main (the thread of the steps) or
 * thread<tid>. GPU rows go to lane stream<N>. Each event's step is the
 * ProfilerStep it starts in (-1 outside them).
 * Refused: a file that is not JSON, not a trace (no traceEvents list), or
 * has no complete event with a time; an event whose ts or dur is not a
 * finite number (dur >= 0).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analysis/import.h"
#include "core/prof/gpu_activity.h"
#include "core/util/common.h"
#include "core/util/stats.h"

typedef enum { E_KERNEL, E_MEM, E_CPU, E_API, E_STEP } ev_class;

typedef struct raw {
    ev_class cls;
    const char *name;
    double ts, dur; /* microseconds */
    long long pid, tid;
    int stream;     /* GPU events */
    double flops;
    double self;    /* cpu ops: dur less nested cpu ops */
    int depth;      /* cpu ops: nesting on their thread */
    int step;
} raw;

static bool comm_op_name(const char *n) {
    return !strncmp(n, "c10d::", 6) || !strncmp(n, "gloo:", 5) || !strncmp(n, "nccl:", 5) ||
           !strcmp(n, "record_param_comms");
}

static long long id_of(const cJSON *v) {
    /* a number no process or thread id can be (beyond 2^53, where doubles
     * stop counting by one) is none: 0, as a name is */
    if (cJSON_IsNumber(v)) return fabs(v->valuedouble) <= 9007199254740992.0 ? (long long)v->valuedouble : 0;
    if (cJSON_IsString(v)) return strtoll(v->valuestring, NULL, 10); /* "pid": "Spans" and the like: 0 */
    return 0;
}

static int cmp_thread_time(const void *pa, const void *pb) {
    const raw *a = *(raw *const *)pa, *b = *(raw *const *)pb;
    if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    return (a->dur < b->dur) - (a->dur > b->dur); /* the longer (outer) one first */
}

/* Nesting of the cpu ops on each thread: self time and depth. */
static void nest_cpu_ops(raw *ev, int n) {
    raw **v = vb_calloc_check((size_t)n + 1, sizeof *v);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (ev[i].cls == E_CPU) v[m++] = &ev[i];
    if (m > 1) qsort(v, (size_t)m, sizeof *v, cmp_thread_time);
    raw **stack = vb_calloc_check((size_t)m + 1, sizeof *stack);
    int sp = 0;
    for (int i = 0; i < m; i++) {
        raw *e = v[i];
        e->self = e->dur;
        while (sp > 0 && (stack[sp - 1]->pid != e->pid || stack[sp - 1]->tid != e->tid ||
                          e->ts >= stack[sp - 1]->ts + stack[sp - 1]->dur))
            sp--;
        e->depth = sp;
        if (sp > 0) stack[sp - 1]->self -= e->dur;
        stack[sp++] = e;
    }
    for (int i = 0; i < m; i++)
        if (v[i]->self < 0) v[i]->self = 0; /* a child that overruns its parent by rounding */
    free(stack);
    free(v);
}

typedef struct op_acc {
    const char *name;
    const char *cat;
    double *durs;
    int n, cap;
    double total, flops;
} op_acc;

static op_acc *acc_of(op_acc **v, int *n, const char *name, const char *cat) {
    for (int i = 0; i < *n; i++)
        if ((*v)[i].cat == cat && strcmp((*v)[i].name, name) == 0) return &(*v)[i];
    if (*n % 64 == 0) *v = vb_realloc_check(*v, ((size_t)*n + 64) * sizeof **v);
    op_acc *a = &(*v)[(*n)++];
    memset(a, 0, sizeof *a);
    a->name = name;
    a->cat = cat;
    return a;
}

static void acc_add(op_acc *a, double s, double flops) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 8;
        a->durs = vb_realloc_check(a->durs, (size_t)a->cap * sizeof *a->durs);
    }
    a->durs[a->n++] = s;
    a->total += s;
    a->flops += flops;
}

static const char *kernel_cat(const char *name) { return vb_gpu_name_is_nccl(name) ? "comm" : "compute"; }

static void add_event(vb_imp_trace *t, const raw *e, const char *kind, long long main_tid) {
    if (t->nev % 256 == 0) t->ev = vb_realloc_check(t->ev, ((size_t)t->nev + 256) * sizeof *t->ev);
    vb_imp_event *o = &t->ev[t->nev++];
    memset(o, 0, sizeof *o);
    o->rank = t->rank;
    if (e->cls == E_KERNEL || e->cls == E_MEM)
        snprintf(o->lane, sizeof o->lane, "stream%d", e->stream);
    else if (e->tid == main_tid)
        snprintf(o->lane, sizeof o->lane, "main");
    else
        snprintf(o->lane, sizeof o->lane, "thread%lld", e->tid % 100000000000LL);
    snprintf(o->kind, sizeof o->kind, "%s", kind);
    o->name = vb_strdup_check(e->name);
    o->step = e->step;
    o->start_s = e->ts * 1e-6; /* the trace's clock: the run's writer takes its ranks' earliest as 0 */
    o->dur_s = e->dur * 1e-6;
    o->flops = e->flops;
}

int vb_imp_read_trace(const char *path, vb_imp_file *f, char *why) {
    size_t len;
    char *text = vb_imp_slurp(path, &len, why);
    if (!text) return -1;
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!j) {
        vb_errf(why, VB_IMP_WHY, "%s: not JSON (a PyTorch profiler trace is Chrome's JSON: {\"traceEvents\": [...]})",
                path);
        return -1;
    }
    const cJSON *events = cJSON_IsArray(j) ? j : cJSON_GetObjectItemCaseSensitive(j, "traceEvents");
    if (!cJSON_IsArray(events)) {
        vb_errf(why, VB_IMP_WHY, "%s: no traceEvents list: not a Chrome or Kineto trace", path);
        cJSON_Delete(j);
        return -1;
    }
    vb_imp_trace *t = &f->trace;
    memset(t, 0, sizeof *t);
    const cJSON *di = cJSON_GetObjectItemCaseSensitive(j, "distributedInfo");
    const cJSON *rk = cJSON_GetObjectItemCaseSensitive(di, "rank"), *ws = cJSON_GetObjectItemCaseSensitive(di, "world_size");
    if (cJSON_IsNumber(rk) && rk->valuedouble >= 0 && rk->valuedouble < 1e7) t->rank = (int)rk->valuedouble;
    if (cJSON_IsNumber(ws) && ws->valuedouble >= 1 && ws->valuedouble < 1e7) t->world = (int)ws->valuedouble;

    const int total = cJSON_GetArraySize(events);
    raw *ev = vb_calloc_check((size_t)total + 1, sizeof *ev);
    int n = 0, index = -1, rc = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        index++;
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") != 0) continue;
        const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat"), *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsString(cat) || !cJSON_IsString(name)) continue;
        const char *c = cat->valuestring;
        raw r = {.name = name->valuestring, .step = -1};
        if (!strcmp(c, "kernel")) r.cls = E_KERNEL;
        else if (!strcmp(c, "gpu_memcpy") || !strcmp(c, "gpu_memset")) r.cls = E_MEM;
        else if (!strcmp(c, "cpu_op")) r.cls = E_CPU;
        else if (!strcmp(c, "cuda_runtime") || !strcmp(c, "cuda_driver")) r.cls = E_API;
        else if (!strcmp(c, "user_annotation") && !strncmp(r.name, "ProfilerStep#", 13)) r.cls = E_STEP;
        else continue;
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts"), *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
        if (!cJSON_IsNumber(ts) || !isfinite(ts->valuedouble) || !cJSON_IsNumber(dur) || !isfinite(dur->valuedouble) ||
            dur->valuedouble < 0) {
            vb_errf(why, VB_IMP_WHY, "%s: traceEvents[%d] (%s \"%s\"): ts and dur are finite numbers of microseconds, "
                    "dur >= 0", path, index, c, r.name);
            goto out;
        }
        r.ts = ts->valuedouble;
        r.dur = dur->valuedouble;
        r.pid = id_of(cJSON_GetObjectItemCaseSensitive(e, "pid"));
        r.tid = id_of(cJSON_GetObjectItemCaseSensitive(e, "tid"));
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(args, "stream");
        r.stream = cJSON_IsNumber(st) && fabs(st->valuedouble) <= INT_MAX ? (int)st->valuedouble
                                                                          : (int)(r.tid % 100000);
        const cJSON *fl = cJSON_GetObjectItemCaseSensitive(args, "flops");
        if (cJSON_IsNumber(fl) && isfinite(fl->valuedouble) && fl->valuedouble > 0) r.flops = fl->valuedouble;
        ev[n++] = r;
    }
    if (n == 0) {
        vb_errf(why, VB_IMP_WHY, "%s: no events: the trace has no operator, kernel, copy or profiler step with a time "
                "(%d traceEvents)", path, total);
        goto out;
    }
    nest_cpu_ops(ev, n);
    double t0 = INFINITY;
    long long main_tid = 0;
    bool have_main = false;
    for (int i = 0; i < n; i++) {
        t0 = fmin(t0, ev[i].ts);
        t->gpu = t->gpu || ev[i].cls == E_KERNEL || ev[i].cls == E_MEM;
        if (ev[i].cls == E_STEP && !have_main) main_tid = ev[i].tid, have_main = true;
    }
    if (!have_main) /* no steps: the thread with the most operator time */
        for (int i = 0, best = -1; i < n; i++) {
            if (ev[i].cls != E_CPU || ev[i].depth != 0) continue;
            if (best < 0 || ev[i].dur > ev[best].dur) best = i, main_tid = ev[i].tid;
        }
    /* the steps, and each event's step: the one it starts in */
    for (int i = 0; i < n; i++) {
        if (ev[i].cls != E_STEP) continue;
        t->nsteps++;
        t->step_s += ev[i].dur * 1e-6;
        ev[i].step = atoi(ev[i].name + 13);
    }
    for (int i = 0; i < n; i++) {
        if (ev[i].cls == E_STEP) continue;
        for (int s = 0; s < n; s++)
            if (ev[s].cls == E_STEP && ev[i].ts >= ev[s].ts && ev[i].ts < ev[s].ts + ev[s].dur) {
                ev[i].step = ev[s].step;
                break;
            }
    }
    /* ops.csv's rows and the timeline */
    op_acc *acc = NULL;
    int nacc = 0;
    double span_end = t0;
    for (int i = 0; i < n; i++) {
        const raw *r = &ev[i];
        span_end = fmax(span_end, r->ts + r->dur);
        switch (r->cls) {
        case E_KERNEL:
            t->nkernels[strcmp(kernel_cat(r->name), "comm") == 0 ? 1 : 0]++;
            acc_add(acc_of(&acc, &nacc, r->name, kernel_cat(r->name)), r->dur * 1e-6, r->flops);
            add_event(t, r, kernel_cat(r->name), main_tid);
            break;
        case E_MEM:
            t->nkernels[2]++;
            acc_add(acc_of(&acc, &nacc, r->name, "memcpy"), r->dur * 1e-6, 0);
            add_event(t, r, "memcpy", main_tid);
            break;
        case E_CPU: {
            const char *cat = t->gpu ? "cpu_op" : comm_op_name(r->name) ? "comm" : "compute";
            acc_add(acc_of(&acc, &nacc, r->name, cat), r->self * 1e-6, r->flops);
            if (!t->gpu && r->depth == 0) add_event(t, r, cat, main_tid);
            break;
        }
        case E_API: acc_add(acc_of(&acc, &nacc, r->name, "api"), r->dur * 1e-6, 0); break;
        case E_STEP: add_event(t, r, "step", main_tid); break;
        }
    }
    t->ops = vb_calloc_check((size_t)nacc + 1, sizeof *t->ops);
    for (int i = 0; i < nacc; i++) {
        const op_acc *a = &acc[i];
        t->ops[t->nops++] = (vb_imp_op){t->rank, vb_strdup_check(a->name), a->cat, a->n, a->total,
                                        vb_stats_min(a->durs, a->n), vb_stats_max(a->durs, a->n),
                                        vb_stats_median(a->durs, a->n), a->flops};
        free(a->durs);
    }
    free(acc);
    if (t->nsteps == 0) t->step_s = (span_end - t0) * 1e-6; /* no steps: the trace's span is the window */
    rc = 0;
out:
    free(ev);
    cJSON_Delete(j);
    return rc;
}
