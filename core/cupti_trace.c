/* cupti_trace.c: CUPTI activity tracer (cupti_trace.h). The tracer itself
 * exists when VB_HAVE_CUPTI (CUDA backend built, cupti.h found); otherwise
 * only vb_cupti_compiled() and the file names are here. */
#include "core/cupti_trace.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/common.h"

static const char *const k_files[VB_CUPTI_NVIEWS] = {
    [VB_CUPTI_KERNELS] = "kernels.csv",
    [VB_CUPTI_KERNELS_SYNTHETIC] = "kernels_SYNTHETIC.csv",
    [VB_CUPTI_KERNELS_FULL] = "kernels_FULL.csv",
    [VB_CUPTI_MEMOPS] = "gpu_mem_time.csv",
};

const char *vb_cupti_file(vb_cupti_view view) {
    return (unsigned)view < VB_CUPTI_NVIEWS ? k_files[view] : "";
}

#ifndef VB_HAVE_CUPTI

bool vb_cupti_compiled(void) { return false; }

static void not_built(void) __attribute__((noreturn));
static void not_built(void) {
    vb_die_internal("the CUPTI tracer is not in this build (the config check should have refused cupti: true)");
}
void vb_cupti_init(void) { not_built(); }
void vb_cupti_begin(const char *trial_type, bool for_timeline) {
    (void)trial_type;
    (void)for_timeline;
    not_built();
}
long vb_cupti_to_timeline(struct vb_tlrec *t) {
    (void)t;
    not_built();
}
void vb_cupti_end(void) { not_built(); }
char *vb_cupti_csv(vb_cupti_view view) {
    (void)view;
    not_built();
}
unsigned long long vb_cupti_dropped(void) { return 0; }

#else /* VB_HAVE_CUPTI */

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/gpu_activity.h"
#include "core/gpu_summary.h"

static void cupti_die(const char *what, const char *call, const char *err, const char *file, int line) {
    char host[256] = "?";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    vb_die_internal("%s call %s failed: %s on host %s, at %s:%d", what, call, err, host, file, line);
}

static const char *cupti_error(CUptiResult rc) {
    const char *s = NULL;
    if (cuptiGetResultString(rc, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
    return s;
}

#define CUPTICHECK(call)                                                                        \
    do {                                                                                        \
        CUptiResult vb_cupti_rc_ = (call);                                                      \
        if (vb_cupti_rc_ != CUPTI_SUCCESS)                                                      \
            cupti_die("CUPTI", #call, cupti_error(vb_cupti_rc_), __FILE__, __LINE__);           \
    } while (0)

#define CUDARTCHECK(call)                                                                       \
    do {                                                                                        \
        cudaError_t vb_cuda_rc_ = (call);                                                       \
        if (vb_cuda_rc_ != cudaSuccess)                                                         \
            cupti_die("CUDA", #call, cudaGetErrorString(vb_cuda_rc_), __FILE__, __LINE__);      \
    } while (0)

/* Records kept for the timeline at most: a window of a few steps of a few
 * thousand kernels each fits many times over (40 bytes a record). */
enum { MAX_TIMELINE_RECORDS = 1 << 22 };

/* CUPTI's buffers: big enough that a step's records rarely fill one (a
 * ViT step is a few hundred kernels of ~200 bytes each), 8-byte aligned as
 * CUPTI requires. */
enum { BUF_BYTES = 8 << 20, BUF_ALIGN = 8 };

static struct {
    pthread_mutex_t mu;
    bool initialized;
    vb_gsum *views[VB_CUPTI_NVIEWS];
    int type_view;                /* the trial's own kernel view, -1: the combined ones only */
    unsigned long long dropped;
    vb_gacts *acts;               /* records kept for the timeline */
    bool keep;                    /* this trial's records go to acts too */
    long acts_dropped;            /* records acts had no room for, this trial */
    int64_t offset_ns;            /* CLOCK_MONOTONIC ns - CUPTI ns, read at begin */
} g_tr = {.mu = PTHREAD_MUTEX_INITIALIZER, .type_view = -1};

bool vb_cupti_compiled(void) { return true; }

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    void *p = NULL;
    if (posix_memalign(&p, BUF_ALIGN, BUF_BYTES) != 0) p = NULL;
    /* a NULL buffer makes CUPTI drop records, which it counts (dropped) */
    *buffer = p;
    *size = p ? BUF_BYTES : 0;
    *max_records = 0; /* as many as fit */
}

static const char *memcpy_name(uint8_t kind) {
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[CUDA memcpy Host-to-Device]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[CUDA memcpy Device-to-Host]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[CUDA memcpy Device-to-Device]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "[CUDA memcpy Host-to-Host]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "[CUDA memcpy Peer-to-Peer]";
    default: return "[CUDA memcpy Other]";
    }
}

/* one record into the views; g_tr.mu held */
static void add_record(const CUpti_Activity *rec) {
    int rc = 0;
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        const char *name = k->name ? k->name : "<unnamed kernel>";
        rc = vb_gsum_add(g_tr.views[VB_CUPTI_KERNELS], name, k->start, k->end);
        if (rc >= 0 && g_tr.type_view >= 0) rc = vb_gsum_add(g_tr.views[g_tr.type_view], name, k->start, k->end);
        if (g_tr.keep && vb_gacts_add(g_tr.acts, VB_GACT_KERNEL, name, k->streamId, k->start, k->end, 0) < 0)
            g_tr.acts_dropped++;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
        const char *name = memcpy_name(m->copyKind);
        rc = vb_gsum_add(g_tr.views[VB_CUPTI_MEMOPS], name, m->start, m->end);
        /* a synchronous copy has no stream, so no lane (vitbench issues none) */
        if (g_tr.keep && m->streamId != CUPTI_INVALID_STREAM_ID &&
            vb_gacts_add(g_tr.acts, VB_GACT_MEMCPY, name, m->streamId, m->start, m->end, (double)m->bytes) < 0)
            g_tr.acts_dropped++;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
        rc = vb_gsum_add(g_tr.views[VB_CUPTI_MEMOPS], "[CUDA memset]", m->start, m->end);
        if (g_tr.keep && m->streamId != CUPTI_INVALID_STREAM_ID &&
            vb_gacts_add(g_tr.acts, VB_GACT_MEMSET, "[CUDA memset]", m->streamId, m->start, m->end,
                         (double)m->bytes) < 0)
            g_tr.acts_dropped++;
        break;
    }
    default: break;
    }
    if (rc < 0) g_tr.dropped++;
}

/* May run on a CUPTI thread (a full buffer) or inside cuptiActivityFlushAll. */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid) {
    pthread_mutex_lock(&g_tr.mu);
    CUpti_Activity *rec = NULL;
    for (;;) {
        CUptiResult rc = cuptiActivityGetNextRecord(buffer, valid, &rec);
        if (rc == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
        CUPTICHECK(rc);
        add_record(rec);
    }
    size_t dropped = 0;
    CUPTICHECK(cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped));
    g_tr.dropped += dropped;
    pthread_mutex_unlock(&g_tr.mu);
    (void)size;
    free(buffer);
}

void vb_cupti_init(void) {
    pthread_mutex_lock(&g_tr.mu);
    bool first = !g_tr.initialized;
    if (first) {
        for (int v = 0; v < VB_CUPTI_NVIEWS; v++) {
            g_tr.views[v] = vb_gsum_create();
            if (!g_tr.views[v]) vb_die_internal("out of memory for the CUPTI summaries");
        }
        g_tr.acts = vb_gacts_create(MAX_TIMELINE_RECORDS);
        if (!g_tr.acts) vb_die_internal("out of memory for the CUPTI timeline records");
        g_tr.initialized = true;
    }
    pthread_mutex_unlock(&g_tr.mu);
    if (first) CUPTICHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
}

static int64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CLOCK_MONOTONIC - CUPTI's clock, in ns: the midpoint of the narrowest of
 * a few host reads bracketing cuptiGetTimestamp (error: half its width) */
static int64_t clock_offset_ns(void) {
    int64_t best_width = INT64_MAX, offset = 0;
    for (int i = 0; i < 5; i++) {
        uint64_t c = 0;
        int64_t h0 = monotonic_ns();
        CUPTICHECK(cuptiGetTimestamp(&c));
        int64_t h1 = monotonic_ns();
        if (h1 - h0 < best_width) {
            best_width = h1 - h0;
            offset = h0 + (h1 - h0) / 2 - (int64_t)c;
        }
    }
    return offset;
}

void vb_cupti_begin(const char *trial_type, bool for_timeline) {
    if (!g_tr.initialized) vb_cupti_init();
    int64_t offset = for_timeline ? clock_offset_ns() : 0;
    pthread_mutex_lock(&g_tr.mu);
    g_tr.type_view = !strcmp(trial_type, "SYNTHETIC") ? VB_CUPTI_KERNELS_SYNTHETIC
                     : !strcmp(trial_type, "FULL")    ? VB_CUPTI_KERNELS_FULL
                                                      : -1;
    g_tr.keep = for_timeline;
    g_tr.offset_ns = offset;
    g_tr.acts_dropped = 0;
    pthread_mutex_unlock(&g_tr.mu);
    CUPTICHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTICHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CUPTICHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
}

void vb_cupti_end(void) {
    /* every stream's work (NCCL's too) has finished: each record is complete */
    CUDARTCHECK(cudaDeviceSynchronize());
    CUPTICHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    CUPTICHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTICHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CUPTICHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET));
    pthread_mutex_lock(&g_tr.mu);
    g_tr.keep = false;
    pthread_mutex_unlock(&g_tr.mu);
}

/* __cxa_demangle from the C++ runtime the CUDA objects already bring in,
 * found at run time so that this file stays C; NULL keeps CUPTI's name. */
typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static char *demangle(const char *name) {
    static demangle_fn fn;
    static bool looked;
    if (!looked) {
        void *sym = dlsym(RTLD_DEFAULT, "__cxa_demangle");
        memcpy(&fn, &sym, sizeof fn);
        looked = true;
    }
    if (!fn || strncmp(name, "_Z", 2) != 0) return NULL;
    int status = -1;
    char *out = fn(name, NULL, NULL, &status);
    if (status != 0) {
        free(out);
        return NULL;
    }
    return out;
}

char *vb_cupti_csv(vb_cupti_view view) {
    if ((unsigned)view >= VB_CUPTI_NVIEWS) vb_die_internal("CUPTI view %d does not exist", (int)view);
    if (!g_tr.initialized) vb_cupti_init();
    pthread_mutex_lock(&g_tr.mu);
    char *text = vb_gsum_csv(g_tr.views[view], view == VB_CUPTI_MEMOPS ? VB_GSUM_MEMOPS : VB_GSUM_KERNELS,
                             view == VB_CUPTI_MEMOPS ? NULL : demangle);
    pthread_mutex_unlock(&g_tr.mu);
    if (!text) vb_die_internal("out of memory rendering %s", k_files[view]);
    return text;
}

long vb_cupti_to_timeline(struct vb_tlrec *t) {
    static bool warned_clock, warned_room;
    pthread_mutex_lock(&g_tr.mu);
    size_t kept = vb_gacts_count(g_tr.acts);
    long no_room = 0; /* the timeline's lanes were full: write_timeline reports those */
    long placed = vb_gacts_to_timeline(g_tr.acts, t, g_tr.offset_ns, demangle, &no_room);
    long lost = g_tr.acts_dropped;
    g_tr.acts_dropped = 0;
    pthread_mutex_unlock(&g_tr.mu);
    if (kept > 0 && placed == 0 && no_room == 0 && !warned_clock) {
        vb_warn("timeline: none of CUPTI's %zu GPU records of the trial fell inside its steps: CUPTI's clock and "
                "the host's disagree, so timeline.csv has no stream lanes",
                kept);
        warned_clock = true;
    }
    if (lost > 0 && !warned_room) {
        vb_warn("timeline: %ld of CUPTI's GPU records of the trial were not kept (more than %d, or out of memory): "
                "the stream lanes miss them",
                lost, MAX_TIMELINE_RECORDS);
        warned_room = true;
    }
    return placed;
}

unsigned long long vb_cupti_dropped(void) {
    pthread_mutex_lock(&g_tr.mu);
    unsigned long long d = g_tr.dropped;
    pthread_mutex_unlock(&g_tr.mu);
    return d;
}

#endif /* VB_HAVE_CUPTI */
