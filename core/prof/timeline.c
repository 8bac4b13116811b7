/* timeline.c: a bounded per-lane event recorder (timeline.h).
 *
 * Every lane owns a fixed array filled by exactly one thread, so the hot
 * path is a bounds check and a store: no lock, no allocation. The window
 * state is atomic because loader workers read it from their own threads.
 */
#include "core/prof/timeline.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"
#include "core/util/fileio.h"
#include "core/results/results.h" /* VB_TIMELINE_CSV_HEADER */

typedef struct {
    double start, dur, bytes, flops;
    const char *name;
    const char *trial_type;
    int trial_index, step, bucket;
    unsigned char kind;
} tl_event;

typedef struct {
    tl_event *ev;
    long n, cap;
    atomic_long dropped;
} tl_lane;

/* a recorded step's span on the window's clock (seconds from the origin) */
typedef struct {
    double start, end;
    const char *trial_type;
    int trial_index, step;
} tl_window;

struct vb_tlrec {
    int max_steps, nlanes;
    tl_lane *lanes;
    double origin;
    atomic_int active;
    atomic_int steps_done;
    /* the window's current step; written by the training thread while no
     * step is open, read by loader workers while one is */
    const char *_Atomic trial_type;
    atomic_int trial_index, step;
    /* recorders whose stamped events are added at a flush (training thread) */
    struct {
        void (*flush)(void *ctx);
        void *ctx;
    } sources[8];
    int nsources;
    /* the steps' spans, in the order they were recorded (chronological) */
    tl_window *windows;
    int nwindows;
    /* stream<N> lanes (training thread only), created on first use */
    tl_lane *streams; /* VB_TL_MAX_STREAMS of them */
    unsigned stream_id[VB_TL_MAX_STREAMS];
    int nstreams;
    long stream_cap;
    long stream_overflow; /* activities of streams past the last lane */
};

static const char *const k_kind[] = {"trial", "step", "phase", "compute", "comm", "memcpy", "io", "marker"};

vb_tlrec *vb_tlrec_create(int steps, int nloaders, int events_per_step) {
    if (steps <= 0) return NULL;
    vb_tlrec *t = vb_calloc_check(1, sizeof *t);
    t->max_steps = steps;
    t->nlanes = VB_TL_LOADER0 + (nloaders > 0 ? nloaders : 0);
    t->lanes = vb_calloc_check((size_t)t->nlanes, sizeof *t->lanes);
    for (int l = 0; l < t->nlanes; l++) {
        long per_step = l == VB_TL_MAIN ? events_per_step : l == VB_TL_COMM ? 1024 : 64;
        tl_lane *ln = &t->lanes[l];
        ln->cap = per_step * steps + (l == VB_TL_MAIN ? 16 : 0); /* + trial rows */
        ln->ev = vb_malloc_check((size_t)ln->cap * sizeof *ln->ev);
        atomic_init(&ln->dropped, 0);
    }
    t->windows = vb_calloc_check((size_t)steps, sizeof *t->windows);
    t->streams = vb_calloc_check(VB_TL_MAX_STREAMS, sizeof *t->streams);
    /* a step launches about one kernel per op: twice the main lane's events
     * leaves room for ops of several kernels */
    t->stream_cap = 2 * (long)events_per_step * steps;
    atomic_init(&t->active, 0);
    atomic_init(&t->steps_done, 0);
    atomic_init(&t->trial_index, 0);
    atomic_init(&t->step, 0);
    t->trial_type = "";
    return t;
}

void vb_tlrec_destroy(vb_tlrec *t) {
    if (!t) return;
    for (int l = 0; l < t->nlanes; l++) free(t->lanes[l].ev);
    for (int k = 0; k < t->nstreams; k++) free(t->streams[k].ev);
    free(t->lanes);
    free(t->streams);
    free(t->windows);
    free(t);
}

void vb_tlrec_set_origin(vb_tlrec *t, double origin) {
    if (t) t->origin = origin;
}

bool vb_tlrec_begin_step(vb_tlrec *t, const char *trial_type, int trial_index, int step) {
    if (!t || atomic_load(&t->steps_done) >= t->max_steps) return false;
    t->trial_type = trial_type;
    atomic_store(&t->trial_index, trial_index);
    atomic_store(&t->step, step);
    atomic_store(&t->active, 1);
    return true;
}

/* has every source add the events it holds back (training thread only) */
static void pull_sources(const vb_tlrec *t) {
    for (int i = 0; t && i < t->nsources; i++) t->sources[i].flush(t->sources[i].ctx);
}

void vb_tlrec_add_source(vb_tlrec *t, void (*flush)(void *ctx), void *ctx) {
    if (!t) return;
    for (int i = 0; i < t->nsources; i++)
        if (t->sources[i].ctx == ctx) {
            t->sources[i].flush = flush;
            return;
        }
    if (t->nsources == (int)(sizeof t->sources / sizeof t->sources[0]))
        vb_die_internal("timeline: more than %d event sources", t->nsources);
    t->sources[t->nsources].flush = flush;
    t->sources[t->nsources].ctx = ctx;
    t->nsources++;
}

void vb_tlrec_remove_source(vb_tlrec *t, void *ctx) {
    if (!t) return;
    for (int i = 0; i < t->nsources; i++)
        if (t->sources[i].ctx == ctx) {
            t->sources[i] = t->sources[--t->nsources];
            return;
        }
}

void vb_tlrec_end_step(vb_tlrec *t) {
    if (!t || !atomic_load(&t->active)) return;
    /* the step's ops still held back carry its stamp: add them before it closes */
    pull_sources(t);
    atomic_store(&t->active, 0);
    atomic_fetch_add(&t->steps_done, 1);
}

bool vb_tlrec_active(const vb_tlrec *t) { return t && atomic_load(&t->active); }
int vb_tlrec_steps_done(const vb_tlrec *t) { return t ? atomic_load(&t->steps_done) : 0; }

static void push(vb_tlrec *t, int lane, tl_event e) {
    if (lane < 0 || lane >= t->nlanes) return;
    tl_lane *ln = &t->lanes[lane];
    if (ln->n >= ln->cap) {
        atomic_fetch_add(&ln->dropped, 1);
        return;
    }
    ln->ev[ln->n++] = e;
}

void vb_tlrec_add(vb_tlrec *t, int lane, vb_tl_kind kind, const char *name, double start, double dur, double bytes,
                  double flops, int bucket) {
    if (!t || !atomic_load(&t->active)) return;
    tl_event e = {start - t->origin, dur < 0 ? 0 : dur, bytes, flops, name, t->trial_type,
                  atomic_load(&t->trial_index), atomic_load(&t->step), bucket, (unsigned char)kind};
    push(t, lane, e);
    /* the step's span is what GPU activities are placed by */
    if (lane == VB_TL_MAIN && kind == VB_TLK_STEP && t->nwindows < t->max_steps)
        t->windows[t->nwindows++] = (tl_window){e.start, e.start + e.dur, e.trial_type, e.trial_index, e.step};
}

/* the recorded step whose span holds time s (window clock), or NULL */
static const tl_window *window_at(const vb_tlrec *t, double s) {
    int lo = 0, hi = t->nwindows; /* first window starting after s, by bisection */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (t->windows[mid].start <= s)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) return NULL;
    const tl_window *w = &t->windows[lo - 1];
    return s < w->end ? w : NULL;
}

/* the lane of `stream`, created if there is room; NULL when there is none */
static tl_lane *stream_lane(vb_tlrec *t, unsigned stream) {
    for (int k = 0; k < t->nstreams; k++)
        if (t->stream_id[k] == stream) return &t->streams[k];
    if (t->nstreams == VB_TL_MAX_STREAMS) return NULL;
    tl_lane *ln = &t->streams[t->nstreams];
    ln->ev = vb_malloc_check((size_t)t->stream_cap * sizeof *ln->ev);
    ln->cap = t->stream_cap;
    ln->n = 0;
    atomic_init(&ln->dropped, 0);
    t->stream_id[t->nstreams++] = stream;
    return ln;
}

int vb_tlrec_add_stream(vb_tlrec *t, unsigned stream, vb_tl_kind kind, const char *name, double start, double dur,
                        double bytes) {
    if (!t) return 0;
    const tl_window *w = window_at(t, start - t->origin);
    if (!w) return 0;
    tl_lane *ln = stream_lane(t, stream);
    if (!ln) {
        t->stream_overflow++;
        return -1;
    }
    if (ln->n >= ln->cap) {
        atomic_fetch_add(&ln->dropped, 1);
        return -1;
    }
    ln->ev[ln->n++] = (tl_event){start - t->origin, dur < 0 ? 0 : dur, bytes, 0, name, w->trial_type,
                                 w->trial_index, w->step, -1, (unsigned char)kind};
    return 1;
}

bool vb_tlrec_stamp(const vb_tlrec *t, vb_tl_stamp *s) {
    if (!t || !atomic_load(&t->active)) return false;
    s->trial_type = t->trial_type;
    s->trial_index = atomic_load(&t->trial_index);
    s->step = atomic_load(&t->step);
    return true;
}

void vb_tlrec_add_stamped(vb_tlrec *t, const vb_tl_stamp *s, int lane, vb_tl_kind kind, const char *name,
                          double start, double dur, double bytes, double flops, int bucket) {
    if (!t || !s) return;
    tl_event e = {start - t->origin, dur < 0 ? 0 : dur, bytes, flops, name, s->trial_type,
                  s->trial_index, s->step, bucket, (unsigned char)kind};
    push(t, lane, e);
}

void vb_tlrec_add_trial(vb_tlrec *t, const char *trial_type, int trial_index, double start, double dur) {
    if (!t) return;
    tl_event e = {start - t->origin, dur, 0, 0, NULL, trial_type, trial_index, -1, -1, VB_TLK_TRIAL};
    push(t, VB_TL_MAIN, e);
}

long vb_tlrec_events(const vb_tlrec *t) {
    pull_sources(t);
    long n = 0;
    if (t) {
        for (int l = 0; l < t->nlanes; l++) n += t->lanes[l].n;
        for (int k = 0; k < t->nstreams; k++) n += t->streams[k].n;
    }
    return n;
}

long vb_tlrec_dropped(const vb_tlrec *t) {
    pull_sources(t);
    long n = 0;
    if (t) {
        for (int l = 0; l < t->nlanes; l++) n += atomic_load(&t->lanes[l].dropped);
        for (int k = 0; k < t->nstreams; k++) n += atomic_load(&t->streams[k].dropped);
        n += t->stream_overflow;
    }
    return n;
}

static int cmp_start(const void *a, const void *b) {
    const tl_event *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    /* a parent and its first child can start at the same tick: longer first */
    return (x->dur < y->dur) - (x->dur > y->dur);
}

/* one lane's rows, in start order */
static void write_lane(FILE *f, int rank, const char *lane, tl_lane *ln) {
    qsort(ln->ev, (size_t)ln->n, sizeof *ln->ev, cmp_start);
    for (long i = 0; i < ln->n; i++) {
        const tl_event *e = &ln->ev[i];
        char trial_name[48];
        const char *name = e->name;
        if (e->kind == VB_TLK_TRIAL) {
            snprintf(trial_name, sizeof trial_name, "%s_%d", e->trial_type, e->trial_index);
            name = trial_name;
        }
        fprintf(f, "%d,%s,%s,", rank, lane, k_kind[e->kind]);
        vb_csv_field(f, name ? name : "");
        fprintf(f, ",%s,%d,%d,%.9f,%.9f,%.0f,%.0f,%d\n", e->trial_type ? e->trial_type : "", e->trial_index,
                e->step, e->start, e->dur, e->bytes, e->flops, e->bucket);
    }
}

char *vb_tlrec_csv_rows(const vb_tlrec *t, int rank) {
    char *buf = NULL;
    size_t len = 0;
    pull_sources(t);
    FILE *f = open_memstream(&buf, &len);
    if (!f) vb_die_internal("out of memory rendering timeline rows");
    for (int l = 0; t && l < t->nlanes; l++) {
        char lane[24];
        if (l == VB_TL_MAIN)
            snprintf(lane, sizeof lane, "main");
        else if (l == VB_TL_COMM)
            snprintf(lane, sizeof lane, "comm");
        else
            snprintf(lane, sizeof lane, "loader%d", l - VB_TL_LOADER0);
        write_lane(f, rank, lane, &t->lanes[l]);
    }
    /* stream lanes by stream id (created in the order streams first ran) */
    int order[VB_TL_MAX_STREAMS];
    int ns = t ? t->nstreams : 0;
    for (int k = 0; k < ns; k++) {
        int j = k;
        for (; j > 0 && t->stream_id[order[j - 1]] > t->stream_id[k]; j--) order[j] = order[j - 1];
        order[j] = k;
    }
    for (int k = 0; k < ns; k++) {
        char lane[24];
        snprintf(lane, sizeof lane, "stream%u", t->stream_id[order[k]]);
        write_lane(f, rank, lane, &t->streams[order[k]]);
    }
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad || !buf) vb_die_internal("out of memory rendering timeline rows");
    return buf;
}

static void write_rows(FILE *f, void *rows) {
    fputs(VB_TIMELINE_CSV_HEADER "\n", f);
    fputs((const char *)rows, f);
}

int vb_tlrec_write_csv(const char *path, const char *rows) {
    return vb_atomic_write(path, write_rows, (void *)(rows ? rows : ""));
}
