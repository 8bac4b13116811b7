/* profile.c: per-op timers behind profile.h.
 *
 * Two levels: a process-wide registry (name, category) that hands out stable
 * small integer ids, shared by every profiler, and per-profiler sample arrays
 * indexed by those ids. The registry is a fixed array so a name pointer never
 * moves once published; only registration takes the mutex, the hot path
 * (begin/end) never does.
 *
 * Begin and end only stamp: each takes a free slot of the clock's ring and
 * records into it; an ended op becomes a pending record (its two slots, its
 * bytes and FLOPs, and where it belongs: trial-type section, timeline step).
 * A flush turns pending records into samples and timeline events and frees
 * their slots; slots of ops still open stay taken, so tokens may nest and
 * overlap in any order. Nothing here allocates per op once the sample arrays
 * have grown.
 *
 * A profiler is used by one thread at a time (the training thread); loader
 * worker threads pass NULL or their own profiler.
 */
#include "core/prof/profile.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"
#include "core/util/fileio.h"
#include "core/results/results.h" /* VB_OPS_CSV_HEADER */
#include "core/util/stats.h"
#include "core/prof/timeline.h"

#define VB_PROF_MAX_OPS 512
#define VB_PROF_MAX_NAME 64

typedef struct {
    char name[VB_PROF_MAX_NAME];
    vb_op_category cat;
} vb_registered_op;

static pthread_mutex_t g_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static vb_registered_op g_registry[VB_PROF_MAX_OPS];
static int g_nregistered = 0;

/* Per-op accumulators of one profiler. Samples are kept (not just sums) so
 * ops.csv can report the median, which is robust to the odd preempted call on
 * a shared machine. */
typedef struct {
    long calls;
    double bytes;        /* double: a long run can pass 2^63 bytes of comm in theory */
    double flops;
    double total;
    double *samples;     /* every call's seconds: min, max, median come from these */
    size_t cap;
} vb_op_stats;

/* One trial type's accumulators (ops.csv keeps SYNTHETIC and FULL apart). */
typedef struct {
    const char *trial_type;
    int nops;            /* entries in stats (may lag the registry; grown on demand) */
    vb_op_stats *stats;
    double step_seconds;
} vb_prof_section;

#define VB_PROF_MAX_SECTIONS 8
#define VB_PROF_DEFAULT_SLOTS 4096

/* An ended op whose duration is not resolved yet. */
typedef struct {
    int id, start, end;       /* op id and its two clock slots */
    double bytes, flops;
    vb_prof_section *sec;     /* NULL: no ops.csv sample (the profiler was disabled when it ended) */
    bool timeline;            /* a timeline event at `stamp` */
    vb_tl_stamp stamp;
} vb_prof_pending;

struct vb_profiler {
    bool enabled;
    vb_prof_section sections[VB_PROF_MAX_SECTIONS];
    int nsections;
    vb_prof_section *cur;
    vb_tlrec *timeline;  /* may be NULL */
    vb_prof_clock *clock;
    unsigned char *slot_used; /* [clock->nslots] */
    int nused, next_slot;     /* slots taken; where the search for a free one starts */
    vb_prof_pending *pending; /* [clock->nslots / 2]: every record holds two slots */
    int npending;
    bool flushing;
};

const char *vb_cat_name(vb_op_category c) {
    switch (c) {
    case VB_CAT_COMPUTE: return "compute";
    case VB_CAT_COMM: return "comm";
    case VB_CAT_MEMCPY: return "memcpy";
    case VB_CAT_IO: return "io";
    default: return "unknown";
    }
}

int vb_prof_op(const char *name, vb_op_category cat) {
    if (!name || !*name) vb_die_internal("vb_prof_op: empty op name");
    if (strlen(name) >= VB_PROF_MAX_NAME) vb_die_internal("vb_prof_op: op name too long: %.80s", name);
    pthread_mutex_lock(&g_registry_lock);
    int id = -1;
    for (int i = 0; i < g_nregistered; i++) {
        if (strcmp(g_registry[i].name, name) == 0) {
            id = i;
            break;
        }
    }
    if (id < 0) {
        if (g_nregistered == VB_PROF_MAX_OPS) {
            pthread_mutex_unlock(&g_registry_lock);
            vb_die_internal("profiler op registry full (%d ops) registering %s", VB_PROF_MAX_OPS, name);
        }
        id = g_nregistered;
        strcpy(g_registry[id].name, name);
        g_registry[id].cat = cat;
        g_nregistered++;
    }
    pthread_mutex_unlock(&g_registry_lock);
    return id;
}

static int registry_count(void) {
    pthread_mutex_lock(&g_registry_lock);
    int n = g_nregistered;
    pthread_mutex_unlock(&g_registry_lock);
    return n;
}

/* ---- the host clock: a slot is a vb_now() reading ---- */

static void host_record(vb_prof_clock *c, int slot) { ((double *)c->impl)[slot] = vb_now(); }
static void host_sync(vb_prof_clock *c) { (void)c; }
static double host_elapsed(vb_prof_clock *c, int start, int end) {
    const double *t = c->impl;
    return t[end] - t[start];
}
static double host_time(vb_prof_clock *c, int slot) { return ((const double *)c->impl)[slot]; }
static void host_destroy(vb_prof_clock *c) {
    if (!c) return;
    free(c->impl);
    free(c);
}

vb_prof_clock *vb_prof_clock_host(int nslots) {
    if (nslots < 2) vb_die_internal("profiler: a clock needs at least 2 slots (got %d)", nslots);
    vb_prof_clock *c = vb_calloc_check(1, sizeof *c);
    double *t = vb_calloc_check((size_t)nslots, sizeof *t);
    *c = (vb_prof_clock){.nslots = nslots, .record = host_record, .sync = host_sync, .elapsed = host_elapsed,
                         .host_time = host_time, .destroy = host_destroy, .impl = t};
    return c;
}

/* Installs `clock` with fresh slot bookkeeping; nothing may hold a slot. */
static void install_clock(vb_profiler *p, vb_prof_clock *clock) {
    if (clock->nslots < 2 || !clock->record || !clock->sync || !clock->elapsed || !clock->host_time)
        vb_die_internal("profiler: incomplete clock (%d slots)", clock->nslots);
    unsigned char *used = vb_calloc_check((size_t)clock->nslots, 1);
    vb_prof_pending *pending = vb_calloc_check((size_t)clock->nslots / 2, sizeof *pending);
    free(p->slot_used);
    free(p->pending);
    if (p->clock && p->clock->destroy) p->clock->destroy(p->clock);
    p->clock = clock;
    p->slot_used = used;
    p->pending = pending;
    p->nused = p->next_slot = p->npending = 0;
}

vb_profiler *vb_prof_create(void) {
    vb_profiler *p = vb_calloc_check(1, sizeof *p);
    p->sections[0].trial_type = "";
    p->nsections = 1;
    p->cur = &p->sections[0];
    install_clock(p, vb_prof_clock_host(VB_PROF_DEFAULT_SLOTS));
    return p;
}

void vb_prof_set_clock(vb_profiler *p, vb_prof_clock *clock) {
    if (!p) {
        if (clock && clock->destroy) clock->destroy(clock);
        return;
    }
    vb_prof_flush(p);
    if (p->nused != 0) vb_die_internal("profiler: clock changed while %d ops are open", p->nused);
    install_clock(p, clock ? clock : vb_prof_clock_host(VB_PROF_DEFAULT_SLOTS));
}

static void timeline_source_flush(void *ctx) { vb_prof_flush(ctx); }

void vb_prof_destroy(vb_profiler *p) {
    if (!p) return;
    /* ops still pending are dropped: the results were written before this */
    vb_tlrec_remove_source(p->timeline, p);
    for (int k = 0; k < p->nsections; k++) {
        vb_prof_section *sec = &p->sections[k];
        for (int i = 0; i < sec->nops; i++) free(sec->stats[i].samples);
        free(sec->stats);
    }
    if (p->clock && p->clock->destroy) p->clock->destroy(p->clock);
    free(p->slot_used);
    free(p->pending);
    free(p);
}

void vb_prof_set_enabled(vb_profiler *p, bool on) {
    if (p) p->enabled = on;
}

void vb_prof_set_trial_type(vb_profiler *p, const char *trial_type) {
    if (!p) return;
    for (int k = 0; k < p->nsections; k++) {
        if (strcmp(p->sections[k].trial_type, trial_type) == 0) {
            p->cur = &p->sections[k];
            return;
        }
    }
    /* the unnamed section is taken over by the first named type */
    if (p->nsections == 1 && p->sections[0].trial_type[0] == '\0' && p->sections[0].nops == 0) {
        p->sections[0].trial_type = trial_type;
        return;
    }
    if (p->nsections == VB_PROF_MAX_SECTIONS) vb_die_internal("profiler: more than %d trial types", VB_PROF_MAX_SECTIONS);
    vb_prof_section *sec = &p->sections[p->nsections++];
    memset(sec, 0, sizeof *sec);
    sec->trial_type = trial_type;
    p->cur = sec;
}

void vb_prof_set_timeline(vb_profiler *p, vb_tlrec *t) {
    if (!p || p->timeline == t) return;
    /* ops that ended under the old timeline go to it */
    vb_prof_flush(p);
    vb_tlrec_remove_source(p->timeline, p);
    p->timeline = t;
    vb_tlrec_add_source(t, timeline_source_flush, p);
}

void vb_prof_reset(vb_profiler *p) {
    if (!p) return;
    /* samples of ops that ended before the reset are dropped with the rest;
     * their timeline events still go to the timeline */
    vb_prof_flush(p);
    for (int k = 0; k < p->nsections; k++) {
        vb_prof_section *sec = &p->sections[k];
        for (int i = 0; i < sec->nops; i++) {
            vb_op_stats *s = &sec->stats[i];
            s->calls = 0;
            s->bytes = s->flops = s->total = 0;
            /* samples and cap are kept: the next trial reuses the storage */
        }
        sec->step_seconds = 0;
    }
}

/* Makes stats[id] exist. Allocates only the first time an op id is seen by
 * this section, i.e. in its first profiled step, never in steady state. */
static void ensure_op(vb_prof_section *p, int id) {
    if (id < p->nops) return;
    int n = registry_count();
    if (id >= n) vb_die_internal("profiler: op id %d was never registered", id);
    vb_op_stats *grown = vb_realloc_check(p->stats, (size_t)n * sizeof *grown);
    memset(grown + p->nops, 0, (size_t)(n - p->nops) * sizeof *grown);
    p->stats = grown;
    p->nops = n;
}

/* ---- stamp slots ---- */

static int slot_take(vb_profiler *p) {
    const int n = p->clock->nslots;
    if (p->nused == n) {
        vb_prof_flush(p);
        if (p->nused == n)
            vb_die_internal("profiler: %d ops open at once (a vb_prof_begin without its vb_prof_end?)", n);
    }
    int i = p->next_slot;
    while (p->slot_used[i]) i = i + 1 == n ? 0 : i + 1;
    p->slot_used[i] = 1;
    p->nused++;
    p->next_slot = i + 1 == n ? 0 : i + 1;
    return i;
}

static void slot_free(vb_profiler *p, int slot) {
    if (slot < 0 || slot >= p->clock->nslots || !p->slot_used[slot])
        vb_die_internal("profiler: slot %d freed but not taken (a token ended twice?)", slot);
    p->slot_used[slot] = 0;
    p->nused--;
}

static void stamp(vb_profiler *p, int slot, struct vb_ctx *on) {
    if (on && p->clock->record_on)
        p->clock->record_on(p->clock, slot, on);
    else
        p->clock->record(p->clock, slot);
}

static vb_prof_token begin_on(vb_profiler *p, int id, struct vb_ctx *on) {
    vb_prof_token tok = {id, -1};
    if (!p) return tok;
    VB_NVTX_PUSH(g_registry[id].name);
    if (!p->enabled && !vb_tlrec_active(p->timeline)) return tok;
    /* resolve early, while no stamp of this op is taken, so that a flush is
     * not timed as part of it: its end then finds a slot without flushing */
    if (p->nused > p->clock->nslots - p->clock->nslots / 4) vb_prof_flush(p);
    tok.slot = slot_take(p);
    stamp(p, tok.slot, on);
    return tok;
}

vb_prof_token vb_prof_begin(vb_profiler *p, int id) { return begin_on(p, id, NULL); }
vb_prof_token vb_prof_begin_on(vb_profiler *p, int id, struct vb_ctx *ctx) { return begin_on(p, id, ctx); }

static vb_tl_kind timeline_kind(vb_op_category c) {
    switch (c) {
    case VB_CAT_COMM: return VB_TLK_COMM;
    case VB_CAT_MEMCPY: return VB_TLK_MEMCPY;
    case VB_CAT_IO: return VB_TLK_IO;
    default: return VB_TLK_COMPUTE;
    }
}

static void end_on(vb_profiler *p, vb_prof_token tok, size_t bytes, double flops, struct vb_ctx *on) {
    if (!p) return;
    VB_NVTX_POP();
    if (tok.slot < 0) return;
    /* where the op belongs is decided now, as if it were resolved at once */
    vb_prof_pending r = {.id = tok.id, .start = tok.slot, .bytes = (double)bytes, .flops = flops};
    r.timeline = vb_tlrec_stamp(p->timeline, &r.stamp);
    r.sec = p->enabled ? p->cur : NULL;
    if (!r.sec && !r.timeline) {
        slot_free(p, tok.slot);
        return;
    }
    r.end = slot_take(p);
    stamp(p, r.end, on);
    p->pending[p->npending++] = r;
}

void vb_prof_end_flops(vb_profiler *p, vb_prof_token tok, size_t bytes, double flops) {
    end_on(p, tok, bytes, flops, NULL);
}
void vb_prof_end(vb_profiler *p, vb_prof_token tok, size_t bytes) { end_on(p, tok, bytes, 0.0, NULL); }
void vb_prof_end_on(vb_profiler *p, vb_prof_token tok, size_t bytes, struct vb_ctx *ctx) {
    end_on(p, tok, bytes, 0.0, ctx);
}

static void add_sample(vb_prof_section *sec, int id, double dt, double bytes, double flops) {
    ensure_op(sec, id);
    vb_op_stats *s = &sec->stats[id];
    if ((size_t)s->calls == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        double *grown = vb_realloc_check(s->samples, cap * sizeof *grown);
        s->samples = grown;
        s->cap = cap;
    }
    s->samples[s->calls] = dt;
    s->calls++;
    s->total += dt;
    s->bytes += bytes;
    s->flops += flops;
}

void vb_prof_flush(vb_profiler *p) {
    if (!p || p->flushing || p->npending == 0) return;
    p->flushing = true;
    vb_prof_clock *c = p->clock;
    c->sync(c);
    for (int k = 0; k < p->npending; k++) {
        const vb_prof_pending *r = &p->pending[k];
        double dt = c->elapsed(c, r->start, r->end);
        if (dt < 0) dt = 0;
        if (r->timeline)
            vb_tlrec_add_stamped(p->timeline, &r->stamp, VB_TL_MAIN, timeline_kind(g_registry[r->id].cat),
                                 g_registry[r->id].name, c->host_time(c, r->start), dt, r->bytes, r->flops, -1);
        if (r->sec) add_sample(r->sec, r->id, dt, r->bytes, r->flops);
        slot_free(p, r->start);
        slot_free(p, r->end);
    }
    p->npending = 0;
    p->flushing = false;
}

void vb_prof_add_step_time(vb_profiler *p, double seconds) {
    if (!p) return;
    /* the harness's step boundary: the step's work has completed */
    vb_prof_flush(p);
    if (p->enabled) p->cur->step_seconds += seconds;
}

static const char k_ops_header[] = VB_OPS_CSV_HEADER "\n";

static void section_rows(FILE *f, const vb_prof_section *sec, int rank) {
    for (int i = 0; i < sec->nops; i++) {
        const vb_op_stats *s = &sec->stats[i];
        if (s->calls == 0) continue;
        if (s->calls > INT_MAX) vb_die_internal("profiler: %ld calls of %s are more than ops.csv can summarise", s->calls,
                                                g_registry[i].name);
        /* np.median's median; the summary sorts a copy, never the live samples */
        vb_stats_summary st = vb_stats_summarize(s->samples, (int)s->calls, 0);
        double share = sec->step_seconds > 0 ? s->total / sec->step_seconds : 0.0;
        fprintf(f, "%d,", rank);
        vb_csv_field(f, sec->trial_type);
        fputc(',', f);
        vb_csv_field(f, g_registry[i].name);
        fprintf(f, ",%s,%ld,%.0f,%.0f,%.9g,%.9g,%.9g,%.9g,%.9g,%.6f,", vb_cat_name(g_registry[i].cat), s->calls,
                s->bytes, s->flops, s->total, st.mean, st.min, st.max, st.median, share);
        /* achieved rates only where the op reports its work: empty, not 0 */
        if (s->flops > 0 && s->total > 0) fprintf(f, "%.6g", s->flops / s->total * 1e-9);
        fputc(',', f);
        if (s->bytes > 0 && s->total > 0) fprintf(f, "%.6g", s->bytes / s->total * 1e-9);
        fputc('\n', f);
    }
}

char *vb_prof_csv_rows(vb_profiler *p, int rank) {
    vb_prof_flush(p);
    char *buf = NULL;
    size_t len = 0;
    /* a memory stream keeps the row formatting (vb_csv_field) identical to a file's */
    FILE *f = open_memstream(&buf, &len);
    if (!f) vb_die_internal("out of memory rendering ops.csv rows");
    for (int k = 0; p && k < p->nsections; k++) section_rows(f, &p->sections[k], rank);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad || !buf) vb_die_internal("out of memory rendering ops.csv rows");
    return buf;
}

static void write_ops_csv(FILE *f, void *rows) {
    fputs(k_ops_header, f);
    fputs((const char *)rows, f);
}

int vb_prof_write_csv_rows(const char *path, const char *rows) {
    return vb_atomic_write(path, write_ops_csv, (void *)(rows ? rows : ""));
}

int vb_prof_write_csv(vb_profiler *p, const char *path, int rank) {
    if (!p) return -1;
    char *rows = vb_prof_csv_rows(p, rank);
    int rc = vb_prof_write_csv_rows(path, rows);
    free(rows);
    return rc;
}
