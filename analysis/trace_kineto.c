/* trace_kineto.c: a timeline as Kineto-style traces, one file per rank
 * (trace_kineto.h), in the layout Holistic Trace Analysis (HTA) 0.5 reads.
 *
 * What HTA needs, and how each rank's file provides it:
 *   - "distributedInfo" {backend, rank, world_size} first in the file, the
 *     rank written as `"rank": <n>` with white space after the colon (HTA
 *     finds a file's rank with the regex "rank":\s+(\d+), line by line)
 *   - device events ("X", cat kernel / gpu_memcpy / gpu_memset) with
 *     args.stream, args.device and args.correlation: HTA counts only
 *     events with a stream as device time
 *       a timeline with stream<N> lanes (CUDA runs with CUPTI, nsys imports):
 *         those rows, on stream N, pid = the rank's device
 *       a CPU run (no stream lanes): the CPU ops as the device, a
 *         pseudo-stream per lane: main-lane compute / comm / memcpy rows on
 *         stream 1, comm-lane rows (allreduces in flight) on stream 2; rows
 *         of a lane that overlap (several buckets in flight) on streams 3,
 *         4, ... (a stream runs one thing at a time, and HTA's idle time per
 *         stream assumes it)
 *   - names HTA classifies by: communication must match ^nccl.*Kernel,
 *     memory operations ^Memcpy / ^Memset; rows whose name does not say what
 *     their kind is are renamed ("ncclKernel_allreduce_dp", "Memcpy HtoD
 *     (h2d)", "[CUDA memset]" -> "Memset (Device)"), the timeline's name kept
 *     in args.vitbench_name
 *   - "ProfilerStep#k" spans (cat user_annotation, k = the rank's k-th step
 *     row by time, so ranks agree on k) and, when a rank has steps, a
 *     "cuda_runtime" launch (cudaLaunchKernel / cudaMemcpyAsync /
 *     cudaMemsetAsync) on the host's main thread per device event with the
 *     same correlation: with steps, HTA keeps only device events whose launch
 *     it finds inside them. A timeline has no launch times: a CPU op is
 *     started by the training thread as it runs, so its launch is the
 *     microsecond before its start; for GPU rows the launch is placed there
 *     too (an HTA idle-time category "host wait" is then not a measurement).
 *     Each launch ends before its kernel starts, as a real one does: HTA's
 *     queue length (launched, not yet started) is then never negative. A
 *     kernel that starts exactly at its step's start moves 1 us later, so
 *     that its launch stays inside the step. An "ac2g" flow joins each
 *     launch to its device event for viewers.
 *   - the time between two steps that do not touch (between trials: the
 *     harness writing results, the next trial's warm-up) is left out: every
 *     later time is earlier by it, and events inside it are dropped. HTA's
 *     spans (and so its idle time) then cover the steps alone, as vitbench's
 *     breakdown does; the info header says how much was left out.
 *   - host events: trial and phase rows as user_annotation spans, data waits
 *     and loader reads (and, with stream lanes, the main and comm lanes' op
 *     rows) as cpu_op spans on the lane's thread, markers as instants
 * Times are whole microseconds (start and end each rounded to the nearest,
 * so nesting is kept and no duration is negative): HTA rounds finer
 * timestamps itself, each event inward, which shrinks every op.
 * The first event of each file is metadata (no duration), which HTA drops:
 * an event HTA links to "index 0" is then no event at all.
 */
#include "analysis/trace_kineto.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/trace_lanes.h"
#include "core/util/common.h"
#include "core/results/results.h"

#define HOST_PID_BASE 1000000 /* host process of rank r: this + r; its device: r */
#define MAX_PSEUDO_STREAMS 4096

typedef enum { R_ANNOT, R_HOST_OP, R_MARKER, R_DEVICE } role;
typedef enum { D_KERNEL, D_MEMCPY, D_MEMSET } dev_kind;

typedef struct {
    int ev;            /* index into t->ev */
    int64_t ts, end;   /* microseconds */
    role role;
    int tid;           /* host thread, or device stream */
    long corr;         /* device events: correlation id (1, 2, ...) */
    int step_no;       /* step rows: k of ProfilerStep#k; else -1 */
} kev;

typedef struct {
    int id;
    char name[64];
} stream_name;

typedef struct {
    const vb_timeline *t;
    const vb_kineto_opts *o;
    const int *lane_tid;   /* per timeline event */
    int rank;
    bool streams_mode;     /* the rank has stream<N> lanes */
    bool launches;         /* the rank has steps: launch events */
    int64_t gaps_us;       /* time left out between steps that do not touch */
    int ngaps;
    int64_t *win;          /* the merged step windows, [start, end) pairs, for launches */
    int nwin;
    kev *ev;
    int n;
    stream_name *streams;  /* device threads to name */
    int nstreams;
    int *host_tids;        /* host threads to name (tid, lane's first event) */
    int *host_first;
    int nhost;
} rank_ctx;

/* --------------------------------------------------------------- names */

static bool hta_comm_name(const char *s) {
    return strncmp(s, "nccl", 4) == 0 && strstr(s + 4, "Kernel") != NULL;
}

/* The device name HTA classifies as the row's kind says, into buf; its
 * category into *dk. Returns buf. */
static const char *device_name(const vb_tl_event *e, char *buf, size_t n, dev_kind *dk) {
    const char *s = e->name;
    *dk = D_KERNEL;
    if (strcmp(e->kind, "comm") == 0) {
        const char *bare = strncmp(s, "void ", 5) == 0 ? s + 5 : s;
        if (hta_comm_name(bare))
            snprintf(buf, n, "%s", bare);
        else
            snprintf(buf, n, "ncclKernel_%s", s);
        return buf;
    }
    if (strcmp(e->kind, "memcpy") != 0) {
        snprintf(buf, n, "%s", s);
        return buf;
    }
    if (strncmp(s, "Memset", 6) == 0) {
        *dk = D_MEMSET;
        snprintf(buf, n, "%s", s);
    } else if (strncmp(s, "Memcpy", 6) == 0) {
        *dk = D_MEMCPY;
        snprintf(buf, n, "%s", s);
    } else if (strncmp(s, "[CUDA memset", 12) == 0) {
        *dk = D_MEMSET;
        snprintf(buf, n, "Memset (Device)");
    } else if (strncmp(s, "[CUDA memcpy ", 13) == 0) {
        /* nsys: "[CUDA memcpy Host-to-Device]" (new) or "[CUDA memcpy HtoD]" (old) */
        static const char *const dirs[][2] = {{"Host-to-Device", "HtoD"}, {"Device-to-Host", "DtoH"},
                                              {"Device-to-Device", "DtoD"}, {"Host-to-Host", "HtoH"},
                                              {"Peer-to-Peer", "PtoP"}};
        const char *d = s + 13;
        size_t dl = strcspn(d, "]");
        const char *abbr = NULL;
        for (size_t i = 0; i < sizeof dirs / sizeof *dirs && !abbr; i++)
            for (int j = 0; j < 2; j++)
                if (strlen(dirs[i][j]) == dl && strncmp(d, dirs[i][j], dl) == 0) abbr = dirs[i][1];
        *dk = D_MEMCPY;
        if (abbr)
            snprintf(buf, n, "Memcpy %s", abbr);
        else
            snprintf(buf, n, "Memcpy %.*s", (int)dl, d);
    } else if (strcmp(s, "zero") == 0 || strstr(s, "memset")) {
        *dk = D_MEMSET;
        snprintf(buf, n, "Memset (%s)", s);
    } else if (strcmp(s, "h2d") == 0) {
        *dk = D_MEMCPY;
        snprintf(buf, n, "Memcpy HtoD (%s)", s);
    } else if (strcmp(s, "d2h") == 0) {
        *dk = D_MEMCPY;
        snprintf(buf, n, "Memcpy DtoH (%s)", s);
    } else {
        *dk = D_MEMCPY;
        snprintf(buf, n, "Memcpy (%s)", s);
    }
    return buf;
}

static const char *const k_dev_cat[] = {"kernel", "gpu_memcpy", "gpu_memset"};
static const char *const k_launch_name[] = {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync"};

/* ----------------------------------------------------------- JSON out */

static void add_str(cJSON *o, const char *key, const char *val) {
    char *clean = vb_trace_utf8_clean(val);
    if (!cJSON_AddStringToObject(o, key, clean)) vb_die_internal("out of memory writing a trace");
    free(clean);
}

static void add_num(cJSON *o, const char *key, double v) {
    if (!cJSON_AddNumberToObject(o, key, v)) vb_die_internal("out of memory writing a trace");
}

static cJSON *new_obj(void) {
    cJSON *o = cJSON_CreateObject();
    if (!o) vb_die_internal("out of memory writing a trace");
    return o;
}

typedef struct {
    FILE *f;
    bool first;
} emitter;

/* Prints one event (one line) and frees it. */
static void emit(emitter *em, cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    if (!s) vb_die_internal("out of memory writing a trace");
    fputs(em->first ? "\n" : ",\n", em->f);
    em->first = false;
    fputs(s, em->f);
    free(s);
    cJSON_Delete(o);
}

static cJSON *event(const char *ph, const char *cat, const char *name, int pid, int tid, int64_t ts) {
    cJSON *o = new_obj();
    add_str(o, "ph", ph);
    if (cat) add_str(o, "cat", cat);
    add_str(o, "name", name);
    add_num(o, "pid", pid);
    add_num(o, "tid", tid);
    add_num(o, "ts", (double)ts);
    return o;
}

static void meta(emitter *em, const char *what, int pid, int tid, const char *key, const char *sval, long ival) {
    cJSON *o = new_obj();
    add_str(o, "ph", "M");
    add_str(o, "name", what);
    add_num(o, "pid", pid);
    add_num(o, "tid", tid);
    cJSON *a = new_obj();
    if (sval)
        add_str(a, key, sval);
    else
        add_num(a, key, (double)ival);
    cJSON_AddItemToObject(o, "args", a);
    emit(em, o);
}

/* The timeline's own fields, as the Chrome trace has them. */
static void row_args(cJSON *a, const vb_tl_event *e) {
    if (e->bytes > 0) add_num(a, "bytes", e->bytes);
    if (e->flops > 0) add_num(a, "flops", e->flops);
    if (e->step >= 0) add_num(a, "step", e->step);
    if (e->bucket >= 0) add_num(a, "bucket", e->bucket);
    if (e->trial_type[0]) {
        add_str(a, "trial_type", e->trial_type);
        add_num(a, "trial_index", e->trial_index);
    }
}

/* ----------------------------------------------------------- per rank */

static const vb_timeline *g_t; /* qsort has no context argument in C11 */

static int cmp_kev(const void *pa, const void *pb) {
    const kev *a = pa, *b = pb;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    if (a->end != b->end) return a->end > b->end ? -1 : 1; /* parents first */
    int da = vb_trace_depth_of(g_t->ev[a->ev].kind), db = vb_trace_depth_of(g_t->ev[b->ev].kind);
    if (da != db) return da < db ? -1 : 1;
    return (a->ev > b->ev) - (a->ev < b->ev);
}

static int stream_of_lane(const char *lane) {
    if (strcmp(lane, "stream") == 0) return 1; /* an nsys report without a stream column: one stream */
    return vb_trace_numbered_lane(lane, "stream", 100000);
}

static int64_t to_us(double s, int rank) {
    /* 1e9 s is 30 years: anything larger is not a timeline time */
    if (!(fabs(s) <= 1e9)) vb_die_input("trace: rank %d: a time of %g s is out of range", rank, s);
    return llround(s * 1e6);
}

static void add_stream_name(rank_ctx *c, int id, const char *name) {
    for (int i = 0; i < c->nstreams; i++)
        if (c->streams[i].id == id) return;
    c->streams = vb_realloc_check(c->streams, (size_t)(c->nstreams + 1) * sizeof *c->streams);
    c->streams[c->nstreams].id = id;
    snprintf(c->streams[c->nstreams].name, sizeof c->streams[c->nstreams].name, "%s", name);
    c->nstreams++;
}

/* CPU runs: each pseudo-lane's rows (by start) onto the first of its
 * streams that is free by then; the lane's own stream first (main 1,
 * comm 2), further ones numbered from 3 as they are needed. */
static void place_pseudo(rank_ctx *c) {
    int next_id = 3;
    const char *lanes[2] = {"main", "comm"};
    for (int l = 0; l < 2; l++) {
        int ids[MAX_PSEUDO_STREAMS];
        int64_t free_at[MAX_PSEUDO_STREAMS];
        int ns = 0;
        for (int k = 0; k < c->n; k++) {
            kev *x = &c->ev[k];
            if (x->role != R_DEVICE || strcmp(c->t->ev[x->ev].lane, lanes[l]) != 0) continue;
            int s = 0;
            while (s < ns && free_at[s] > x->ts) s++;
            if (s == ns) {
                if (ns == MAX_PSEUDO_STREAMS)
                    vb_die_input("trace: rank %d lane %s: more than %d rows overlap", c->rank, lanes[l],
                                 MAX_PSEUDO_STREAMS);
                ids[ns] = ns == 0 ? l + 1 : next_id++;
                char name[64];
                if (ns == 0)
                    snprintf(name, sizeof name, "stream %d (%s lane: CPU ops)", ids[ns], lanes[l]);
                else
                    snprintf(name, sizeof name, "stream %d (%s lane, overlapping rows)", ids[ns], lanes[l]);
                add_stream_name(c, ids[ns], name);
                ns++;
            }
            free_at[s] = x->end > x->ts ? x->end : x->ts;
            x->tid = ids[s];
        }
    }
}

static void classify(rank_ctx *c) {
    int steps = 0;
    for (int k = 0; k < c->n; k++) {
        kev *x = &c->ev[k];
        const vb_tl_event *e = &c->t->ev[x->ev];
        bool main_lane = strcmp(e->lane, "main") == 0, comm_lane = strcmp(e->lane, "comm") == 0;
        int stream = stream_of_lane(e->lane);
        bool op = !strcmp(e->kind, "compute") || !strcmp(e->kind, "comm") || !strcmp(e->kind, "memcpy");
        x->step_no = -1;
        x->tid = c->lane_tid[x->ev];
        if (!strcmp(e->kind, "trial") || !strcmp(e->kind, "step") || !strcmp(e->kind, "phase")) {
            x->role = R_ANNOT;
            if (!strcmp(e->kind, "step")) x->step_no = steps++;
        } else if (!strcmp(e->kind, "marker")) {
            x->role = R_MARKER;
            /* on a lane that is a device stream here: the training thread's */
            if (stream >= 0 || (!c->streams_mode && comm_lane)) x->tid = 0;
        } else if (stream >= 0) {
            x->role = R_DEVICE;
            x->tid = stream;
            char name[64];
            snprintf(name, sizeof name, "stream %d", stream);
            add_stream_name(c, stream, name);
        } else if (!c->streams_mode && op && (main_lane || (comm_lane && !strcmp(e->kind, "comm")))) {
            x->role = R_DEVICE; /* its stream: place_pseudo */
        } else {
            x->role = R_HOST_OP;
        }
    }
    c->launches = steps > 0;
    if (!c->streams_mode) place_pseudo(c);
    long corr = 0;
    for (int k = 0; k < c->n; k++)
        if (c->ev[k].role == R_DEVICE) c->ev[k].corr = ++corr;
}

/* The rank's step rows merged into windows, and the gaps between them left
 * out (the header comment): every time after a gap moves earlier by it, a
 * time inside one moves to its start, an event inside one is dropped. */
static void close_gaps(rank_ctx *c) {
    int64_t *w = vb_malloc_check((size_t)(2 * c->n + 2) * sizeof *w);
    int nw = 0;
    for (int k = 0; k < c->n; k++) { /* c->ev is sorted by start */
        const kev *x = &c->ev[k];
        if (strcmp(c->t->ev[x->ev].kind, "step") != 0) continue;
        if (nw && x->ts <= w[2 * nw - 1]) {
            if (x->end > w[2 * nw - 1]) w[2 * nw - 1] = x->end;
        } else {
            w[2 * nw] = x->ts, w[2 * nw + 1] = x->end;
            nw++;
        }
    }
    /* gap i lies between window i and i + 1 */
    int m = 0;
    for (int k = 0; k < c->n; k++) {
        kev x = c->ev[k];
        bool inside = false;
        int64_t ts = x.ts, end = x.end, shift_ts = 0, shift_end = 0;
        for (int i = 0; i + 1 < nw; i++) {
            const int64_t g0 = w[2 * i + 1], g1 = w[2 * i + 2];
            if (x.ts >= g0 && x.end <= g1 && !(x.ts == g0 && x.end == g0) && !(x.ts == g1 && x.end == g1))
                inside = true;
            if (ts >= g1) shift_ts += g1 - g0;
            else if (ts > g0) shift_ts += ts - g0;
            if (end >= g1) shift_end += g1 - g0;
            else if (end > g0) shift_end += end - g0;
        }
        if (inside) continue;
        x.ts = ts - shift_ts, x.end = end - shift_end;
        c->ev[m++] = x;
    }
    c->n = m;
    for (int i = 0; i + 1 < nw; i++) {
        c->gaps_us += w[2 * i + 2] - w[2 * i + 1];
        c->ngaps++;
    }
    /* the windows as they are now, for placing launches */
    int64_t shift = 0;
    for (int i = 0; i < nw; i++) {
        if (i) shift += w[2 * i] - w[2 * i - 1];
        w[2 * i] -= shift, w[2 * i + 1] -= shift;
    }
    c->win = w, c->nwin = nw;
}

/* The start of the step window holding t, or INT64_MIN when none does */
static int64_t window_start(const rank_ctx *c, int64_t t) {
    for (int i = 0; i < c->nwin; i++)
        if (c->win[2 * i] <= t && t <= c->win[2 * i + 1]) return c->win[2 * i];
    return INT64_MIN;
}

/* Launches end before their kernels: the microsecond before it, or, for a
 * kernel at its window's very start, the kernel moves 1 us later (never
 * past its end, nor onto the next event of its stream). */
static void place_launches(rank_ctx *c) {
    if (!c->launches) return;
    for (int k = 0; k < c->n; k++) {
        kev *x = &c->ev[k];
        if (x->role != R_DEVICE) continue;
        const int64_t w0 = window_start(c, x->ts);
        if (w0 == INT64_MIN || x->ts - 1 >= w0) continue;
        if (x->end > x->ts) {
            x->ts += 1;
            continue;
        }
        /* an instant op at the window's start: 1 us later, unless its stream
         * has something else starting there */
        bool busy = false;
        for (int j = 0; j < c->n && !busy; j++)
            busy = j != k && c->ev[j].role == R_DEVICE && c->ev[j].tid == x->tid && c->ev[j].ts == x->ts + 1;
        if (!busy) x->ts += 1, x->end += 1;
    }
}

static void note_host_thread(rank_ctx *c, int tid, int first_ev) {
    for (int i = 0; i < c->nhost; i++)
        if (c->host_tids[i] == tid) return;
    c->host_tids[c->nhost] = tid;
    c->host_first[c->nhost++] = first_ev;
}

static void put_metadata(emitter *em, rank_ctx *c) {
    int hpid = HOST_PID_BASE + c->rank;
    char name[96];
    snprintf(name, sizeof name, "rank %d host", c->rank);
    meta(em, "process_name", hpid, 0, "name", name, 0);
    meta(em, "process_sort_index", hpid, 0, "sort_index", NULL, 0);
    if (c->streams_mode)
        snprintf(name, sizeof name, "rank %d GPU", c->rank);
    else
        snprintf(name, sizeof name, "rank %d device: CPU ops on pseudo-streams", c->rank);
    meta(em, "process_name", c->rank, 0, "name", name, 0);
    meta(em, "process_sort_index", c->rank, 0, "sort_index", NULL, 1);
    c->host_tids = vb_malloc_check((size_t)(c->n + 1) * sizeof *c->host_tids);
    c->host_first = vb_malloc_check((size_t)(c->n + 1) * sizeof *c->host_first);
    c->nhost = 0;
    if (c->launches) note_host_thread(c, 0, -1);
    for (int k = 0; k < c->n; k++)
        if (c->ev[k].role != R_DEVICE) note_host_thread(c, c->ev[k].tid, c->ev[k].ev);
    for (int i = 0; i < c->nhost; i++) {
        int tid = c->host_tids[i];
        const char *lane = tid == 0 ? "main" : c->t->ev[c->host_first[i]].lane;
        meta(em, "thread_name", hpid, tid, "name", lane, 0);
        meta(em, "thread_sort_index", hpid, tid, "sort_index", NULL, tid);
    }
    for (int i = 0; i < c->nstreams; i++) {
        meta(em, "thread_name", c->rank, c->streams[i].id, "name", c->streams[i].name, 0);
        meta(em, "thread_sort_index", c->rank, c->streams[i].id, "sort_index", NULL, c->streams[i].id);
    }
}

static void put_device(emitter *em, const rank_ctx *c, const kev *x) {
    const vb_tl_event *e = &c->t->ev[x->ev];
    int hpid = HOST_PID_BASE + c->rank;
    char name[160];
    dev_kind dk;
    device_name(e, name, sizeof name, &dk);
    if (c->launches) {
        /* the microsecond before its kernel: launched, then started */
        cJSON *l = event("X", "cuda_runtime", k_launch_name[dk], hpid, 0, x->ts - 1);
        add_num(l, "dur", 1);
        cJSON *a = new_obj();
        add_num(a, "correlation", (double)x->corr);
        cJSON_AddItemToObject(l, "args", a);
        emit(em, l);
    }
    cJSON *o = event("X", k_dev_cat[dk], name, c->rank, x->tid, x->ts);
    add_num(o, "dur", (double)(x->end - x->ts));
    cJSON *a = new_obj();
    add_num(a, "device", c->rank);
    add_num(a, "stream", x->tid);
    add_num(a, "correlation", (double)x->corr);
    if (strcmp(name, e->name) != 0) add_str(a, "vitbench_name", e->name);
    add_str(a, "vitbench_lane", e->lane);
    row_args(a, e);
    cJSON_AddItemToObject(o, "args", a);
    emit(em, o);
    if (c->launches) {
        cJSON *s = event("s", "ac2g", "ac2g", hpid, 0, x->ts - 1);
        add_num(s, "id", (double)x->corr);
        emit(em, s);
        cJSON *f = event("f", "ac2g", "ac2g", c->rank, x->tid, x->ts);
        add_num(f, "id", (double)x->corr);
        add_str(f, "bp", "e");
        emit(em, f);
    }
}

static void put_host(emitter *em, const rank_ctx *c, const kev *x) {
    const vb_tl_event *e = &c->t->ev[x->ev];
    int hpid = HOST_PID_BASE + c->rank;
    cJSON *o;
    if (x->role == R_MARKER) {
        o = event("i", "marker", e->name, hpid, x->tid, x->ts);
        add_str(o, "s", "t");
    } else {
        char name[160];
        if (x->step_no >= 0)
            snprintf(name, sizeof name, "ProfilerStep#%d", x->step_no);
        else
            snprintf(name, sizeof name, "%s", e->name);
        o = event("X", x->role == R_ANNOT ? "user_annotation" : "cpu_op", name, hpid, x->tid, x->ts);
        add_num(o, "dur", (double)(x->end - x->ts));
    }
    cJSON *a = new_obj();
    add_str(a, "vitbench_kind", e->kind);
    row_args(a, e);
    cJSON_AddItemToObject(o, "args", a);
    emit(em, o);
}

static void write_rank(FILE *f, void *ctx) {
    rank_ctx *c = ctx;
    /* distributedInfo first, printed with white space after its colons */
    cJSON *di = new_obj();
    if (c->o->backend && c->o->backend[0]) add_str(di, "backend", c->o->backend);
    add_num(di, "rank", c->rank);
    add_num(di, "world_size", c->o->world_size);
    char *dis = cJSON_Print(di);
    cJSON *info = new_obj();
    add_str(info, "generator", "vitbench trace --format kineto");
    add_str(info, "source", c->o->source);
    add_str(info, "device_lanes", c->streams_mode ? "CUDA streams (the timeline's stream<N> lanes)"
                                                   : "CPU ops on pseudo-streams: 1 the main lane, 2 the comm "
                                                     "lane, 3 and up rows of a lane that overlap");
    add_str(info, "launch_times", !c->launches       ? "none (no steps)"
                                  : c->streams_mode ? "not recorded: each launch is placed in the microsecond "
                                                      "before its kernel"
                                                    : "each CPU op is launched in the microsecond before it starts");
    add_num(info, "gaps_left_out_us", (double)c->gaps_us);
    add_num(info, "gaps_left_out", c->ngaps);
    char *infos = cJSON_PrintUnformatted(info);
    if (!dis || !infos) vb_die_internal("out of memory writing a trace");
    fprintf(f, "{\n\"schemaVersion\": 1,\n\"distributedInfo\": %s,\n\"vitbench\": %s,\n", dis, infos);
    fputs("\"displayTimeUnit\": \"ms\",\n\"traceEvents\": [", f);
    free(dis);
    free(infos);
    cJSON_Delete(di);
    cJSON_Delete(info);
    emitter em = {f, true};
    put_metadata(&em, c);
    for (int k = 0; k < c->n; k++) {
        if (c->ev[k].role == R_DEVICE)
            put_device(&em, c, &c->ev[k]);
        else
            put_host(&em, c, &c->ev[k]);
    }
    fputs("\n]}\n", f);
}

/* ------------------------------------------------------------ the directory */

/* rank<N>.pt.trace.json: N, else -1 */
static long own_file_rank(const char *name) {
    if (strncmp(name, "rank", 4) != 0) return -1;
    const char *p = name + 4, *d = p;
    while (*p >= '0' && *p <= '9') p++;
    if (p == d || p - d > 7 || strcmp(p, ".pt.trace.json") != 0) return -1;
    return strtol(d, NULL, 10);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* HTA reads every .json and .gz file of the directory as a rank's trace:
 * refuse a directory with others than ours. */
/* the entries of the open directory d (its own descriptor: the caller's
 * stays open), or NULL */
static DIR *open_entries(const vb_outdir *d) {
    int fd = fcntl(d->fd, F_DUPFD_CLOEXEC, 0);
    DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dp && fd >= 0) close(fd);
    if (dp) rewinddir(dp);
    return dp;
}

static void check_dir(const vb_outdir *out) {
    const char *dir = out->path;
    DIR *d = open_entries(out);
    if (!d) vb_die_input("trace: --output %s: cannot read the directory (%s)", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if ((ends_with(n, ".json") || ends_with(n, ".gz")) && own_file_rank(n) < 0) {
            char what[VB_PATH_MAX];
            snprintf(what, sizeof what, "%s", n);
            closedir(d);
            vb_die_input("trace: --output %s holds %s, which HTA would read as one more rank's trace; give a "
                         "directory of its own (default: kineto/ beside timeline.csv)",
                         dir, what);
        }
    }
    closedir(d);
}

static int remove_stale(const vb_outdir *dir, const bool *written, int nranks) {
    DIR *d = open_entries(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long r = own_file_rank(de->d_name);
        if (r < 0 || (r < nranks && written[r])) continue;
        if (unlinkat(dir->fd, de->d_name, 0) == 0) removed++;
    }
    closedir(d);
    return removed;
}

void vb_kineto_write(const vb_timeline *t, const vb_outdir *dir, const vb_kineto_opts *o, vb_kineto_stats *st) {
    memset(st, 0, sizeof *st);
    check_dir(dir);
    int *lane_tid = vb_malloc_check((t->n > 0 ? (size_t)t->n : 1) * sizeof *lane_tid);
    int *count = vb_calloc_check((size_t)(t->nranks > 0 ? t->nranks : 1), sizeof *count);
    bool *written = vb_calloc_check((size_t)(t->nranks > 0 ? t->nranks : 1), sizeof *written);
    vb_trace_assign_tids(t, lane_tid);
    for (int i = 0; i < t->n; i++) count[t->ev[i].rank]++;
    g_t = t;
    for (int r = 0; r < t->nranks; r++) {
        if (count[r] == 0) continue;
        rank_ctx c = {.t = t, .o = o, .lane_tid = lane_tid, .rank = r};
        c.ev = vb_malloc_check((size_t)count[r] * sizeof *c.ev);
        for (int i = 0; i < t->n; i++) {
            const vb_tl_event *e = &t->ev[i];
            if (e->rank != r) continue;
            kev *x = &c.ev[c.n++];
            memset(x, 0, sizeof *x);
            x->ev = i;
            x->ts = to_us(e->start_s, r);
            x->end = to_us(e->start_s + e->dur_s, r);
            if (x->end < x->ts) x->end = x->ts;
            if (stream_of_lane(e->lane) >= 0) c.streams_mode = true;
        }
        qsort(c.ev, (size_t)c.n, sizeof *c.ev, cmp_kev);
        close_gaps(&c);
        qsort(c.ev, (size_t)c.n, sizeof *c.ev, cmp_kev);
        classify(&c);
        place_launches(&c);
        char name[64];
        vb_snprintf(name, sizeof name, "rank%d.pt.trace.json", r);
        vb_outdir_write_or_die(dir, name, write_rank, &c, "trace");
        written[r] = true;
        st->files++;
        for (int k = 0; k < c.n; k++) {
            if (c.ev[k].role == R_DEVICE) st->device_events++;
            if (c.ev[k].step_no + 1 > st->steps) st->steps = c.ev[k].step_no + 1;
        }
        if (c.nstreams > st->max_streams) st->max_streams = c.nstreams;
        if (!c.streams_mode) st->cpu_ranks++;
        free(c.ev);
        free(c.streams);
        free(c.host_tids);
        free(c.host_first);
        free(c.win);
    }
    st->stale_removed = remove_stale(dir, written, t->nranks);
    free(lane_tid);
    free(count);
    free(written);
}
