/* profile.c: per-op CPU timers behind profile.h.
 *
 * Two levels: a process-wide registry (name, category) that hands out stable
 * small integer ids, shared by every profiler, and per-profiler sample arrays
 * indexed by those ids. The registry is a fixed array so a name pointer never
 * moves once published; only registration takes the mutex, the hot path
 * (begin/end) never does.
 *
 * A profiler is used by one thread at a time (the training thread); loader
 * worker threads pass NULL or their own profiler.
 */
#include "core/profile.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/results.h"

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
    double total, min, max;
    double *samples;
    size_t cap;
} vb_op_stats;

struct vb_profiler {
    bool enabled;
    int nops;            /* entries in stats (may lag the registry; grown on demand) */
    vb_op_stats *stats;
    double step_seconds;
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

vb_profiler *vb_prof_create(void) {
    vb_profiler *p = calloc(1, sizeof *p);
    if (!p) vb_die_internal("out of memory creating profiler");
    return p;
}

void vb_prof_destroy(vb_profiler *p) {
    if (!p) return;
    for (int i = 0; i < p->nops; i++) free(p->stats[i].samples);
    free(p->stats);
    free(p);
}

void vb_prof_set_enabled(vb_profiler *p, bool on) {
    if (p) p->enabled = on;
}

void vb_prof_reset(vb_profiler *p) {
    if (!p) return;
    for (int i = 0; i < p->nops; i++) {
        vb_op_stats *s = &p->stats[i];
        s->calls = 0;
        s->bytes = s->total = s->min = s->max = 0;
        /* samples and cap are kept: the next trial reuses the storage */
    }
    p->step_seconds = 0;
}

/* Makes stats[id] exist. Allocates only the first time an op id is seen by
 * this profiler, i.e. in the first profiled step, never in steady state. */
static void ensure_op(vb_profiler *p, int id) {
    if (id < p->nops) return;
    int n = registry_count();
    if (id >= n) vb_die_internal("profiler: op id %d was never registered", id);
    vb_op_stats *grown = realloc(p->stats, (size_t)n * sizeof *grown);
    if (!grown) vb_die_internal("out of memory growing profiler to %d ops", n);
    memset(grown + p->nops, 0, (size_t)(n - p->nops) * sizeof *grown);
    p->stats = grown;
    p->nops = n;
}

double vb_prof_begin(vb_profiler *p, int id) {
    if (!p) return 0.0;
    VB_NVTX_PUSH(g_registry[id].name);
    return p->enabled ? vb_now() : 0.0;
}

void vb_prof_end(vb_profiler *p, int id, double t0, size_t bytes) {
    if (!p) return;
    VB_NVTX_POP();
    if (!p->enabled) return;
    double dt = vb_now() - t0;
    if (dt < 0) dt = 0;
    ensure_op(p, id);
    vb_op_stats *s = &p->stats[id];
    if ((size_t)s->calls == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        double *grown = realloc(s->samples, cap * sizeof *grown);
        if (!grown) vb_die_internal("out of memory growing profiler samples to %zu", cap);
        s->samples = grown;
        s->cap = cap;
    }
    s->samples[s->calls] = dt;
    if (s->calls == 0 || dt < s->min) s->min = dt;
    if (s->calls == 0 || dt > s->max) s->max = dt;
    s->calls++;
    s->total += dt;
    s->bytes += (double)bytes;
}

void vb_prof_add_step_time(vb_profiler *p, double seconds) {
    if (p && p->enabled) p->step_seconds += seconds;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char k_ops_header[] = "rank,name,category,calls,bytes,total_s,avg_s,min_s,max_s,median_s,share_of_step\n";

char *vb_prof_csv_rows(vb_profiler *p, int rank) {
    char *buf = NULL;
    size_t len = 0;
    /* a memory stream keeps the row formatting (vb_csv_field) identical to a file's */
    FILE *f = open_memstream(&buf, &len);
    if (!f) vb_die_internal("out of memory rendering ops.csv rows");
    if (p && p->nops > 0) {
        size_t most = 1;
        for (int i = 0; i < p->nops; i++)
            if ((size_t)p->stats[i].calls > most) most = (size_t)p->stats[i].calls;
        /* for the median: sorting must not reorder the live samples */
        double *scratch = malloc(most * sizeof(double));
        if (!scratch) vb_die_internal("out of memory rendering ops.csv rows");
        for (int i = 0; i < p->nops; i++) {
            const vb_op_stats *s = &p->stats[i];
            if (s->calls == 0) continue;
            size_t n = (size_t)s->calls;
            memcpy(scratch, s->samples, n * sizeof(double));
            qsort(scratch, n, sizeof(double), cmp_double);
            double median = n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
            double share = p->step_seconds > 0 ? s->total / p->step_seconds : 0.0;
            fprintf(f, "%d,", rank);
            vb_csv_field(f, g_registry[i].name);
            fprintf(f, ",%s,%ld,%.0f,%.9g,%.9g,%.9g,%.9g,%.9g,%.6f\n", vb_cat_name(g_registry[i].cat), s->calls,
                    s->bytes, s->total, s->total / (double)s->calls, s->min, s->max, median, share);
        }
        free(scratch);
    }
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
