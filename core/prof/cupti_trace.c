/* cupti_trace.c: CUPTI activity tracer (cupti_trace.h). The tracer itself
 * exists when VB_HAVE_CUPTI (CUDA backend built, cupti.h found); otherwise
 * only vb_cupti_compiled() and the file names are here. */
#include "core/prof/cupti_trace.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/results/results.h"
#include "core/util/common.h"

static const char *const k_files[VB_CUPTI_NVIEWS] = {
    [VB_CUPTI_KERNELS] = VB_KERNELS_CSV,
    [VB_CUPTI_KERNELS_SYNTHETIC] = VB_KERNELS_SYNTHETIC_CSV,
    [VB_CUPTI_KERNELS_FULL] = VB_KERNELS_FULL_CSV,
    [VB_CUPTI_MEMOPS] = VB_GPU_MEM_TIME_CSV,
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
vb_cupti_loss vb_cupti_losses(void) { return (vb_cupti_loss){0, 0, 0}; }

#else /* VB_HAVE_CUPTI */

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/prof/cupti_records.h"
#include "core/prof/gpu_activity.h"
#include "core/prof/gpu_summary.h"

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
/* Buffers kept for reuse once CUPTI returns them, so that a buffer filling
 * up mid-step costs no 8 MiB allocation on the launching thread after the
 * first few. */
enum { POOL_BUFFERS = 4 };

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
    unsigned long long untimed;   /* records CUPTI could not time (start = end = 0, or end < start) */
    unsigned long long incomplete; /* buffers a forced flush returned with an incomplete record */
    CUptiResult cb_error;         /* the first failure inside buffer_completed, or CUPTI_SUCCESS */
    const char *cb_call;
    uint8_t *pool[POOL_BUFFERS];  /* returned buffers, handed out again */
    int npool;
} g_tr = {.mu = PTHREAD_MUTEX_INITIALIZER, .type_view = -1, .cb_error = CUPTI_SUCCESS};

bool vb_cupti_compiled(void) { return true; }

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    void *p = NULL;
    pthread_mutex_lock(&g_tr.mu);
    if (g_tr.npool > 0) p = g_tr.pool[--g_tr.npool];
    pthread_mutex_unlock(&g_tr.mu);
    if (!p && posix_memalign(&p, BUF_ALIGN, BUF_BYTES) != 0) p = NULL;
    /* a NULL buffer makes CUPTI drop records, which it counts (dropped) */
    *buffer = p;
    *size = p ? BUF_BYTES : 0;
    *max_records = 0; /* as many as fit */
}

/* one record into the views; g_tr.mu held */
static void add_record(const CUpti_Activity *rec) {
    vb_cupti_rec r;
    if (!vb_cupti_decode(rec, &r)) return;
    int rc = 0;
    if (r.type == VB_GACT_KERNEL) {
        rc = vb_gsum_add(g_tr.views[VB_CUPTI_KERNELS], r.name, r.start_ns, r.end_ns);
        if (rc == 0 && g_tr.type_view >= 0) rc = vb_gsum_add(g_tr.views[g_tr.type_view], r.name, r.start_ns, r.end_ns);
    } else {
        rc = vb_gsum_add(g_tr.views[VB_CUPTI_MEMOPS], r.name, r.start_ns, r.end_ns);
    }
    if (rc < 0) g_tr.dropped++;
    if (rc > 0) g_tr.untimed++;
    /* a record without a stream gets no lane (CUPTI documents that value for
     * synchronous memory operations) */
    if (rc == 0 && g_tr.keep && r.stream != CUPTI_INVALID_STREAM_ID &&
        vb_gacts_add(g_tr.acts, r.type, r.name, r.stream, r.start_ns, r.end_ns, r.bytes) < 0)
        g_tr.acts_dropped++;
}

/* the first CUPTI failure inside a callback, reported by the training thread
 * (vb_cupti_end): exiting from CUPTI's thread with the lock held could
 * deadlock a flush at exit; g_tr.mu held */
static void note_error(CUptiResult rc, const char *call) {
    if (g_tr.cb_error != CUPTI_SUCCESS) return;
    g_tr.cb_error = rc;
    g_tr.cb_call = call;
}

/* May run on a CUPTI thread (a full buffer) or inside cuptiActivityFlushAll. */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid) {
    pthread_mutex_lock(&g_tr.mu);
    CUpti_Activity *rec = NULL;
    for (;;) {
        CUptiResult rc = cuptiActivityGetNextRecord(buffer, valid, &rec);
        if (rc == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
        if (rc == CUPTI_ERROR_INVALID_KIND) { /* an incomplete record (a forced flush): the buffer ends here */
            g_tr.incomplete++;
            break;
        }
        if (rc != CUPTI_SUCCESS) {
            note_error(rc, "cuptiActivityGetNextRecord");
            break;
        }
        add_record(rec);
    }
    size_t dropped = 0;
    CUptiResult rc = cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped);
    if (rc == CUPTI_SUCCESS) g_tr.dropped += dropped;
    else note_error(rc, "cuptiActivityGetNumDroppedRecords");
    bool pooled = g_tr.npool < POOL_BUFFERS;
    if (pooled) g_tr.pool[g_tr.npool++] = buffer;
    pthread_mutex_unlock(&g_tr.mu);
    (void)size;
    if (!pooled) free(buffer);
}

static const CUpti_ActivityKind k_kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                             CUPTI_ACTIVITY_KIND_MEMSET};

/* CUPTICHECK, with one case told apart: another tool (Nsight Systems, Nsight
 * Compute, compute-sanitizer, cuda-gdb) already holds CUPTI, a setting that
 * cannot work, so exit 2 naming the key */
static void cupti_setup(CUptiResult rc, const char *call) {
    if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        vb_die_input("cupti: true: CUPTI is held by another tool (Nsight Systems, Nsight Compute, compute-sanitizer "
                     "or cuda-gdb; %s refused); run under it with --cupti false, or without it",
                     call);
    if (rc != CUPTI_SUCCESS) cupti_die("CUPTI", call, cupti_error(rc), __FILE__, __LINE__);
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
    if (!first) return;
    cupti_setup(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    /* each kind on and off once now: a profiler that holds CUPTI refuses
     * here, before any trial, and CUPTI is attached before the first CUDA
     * graph is recorded (cuda_graphs), whose kernels it then traces */
    for (size_t i = 0; i < sizeof k_kinds / sizeof *k_kinds; i++) {
        cupti_setup(cuptiActivityEnable(k_kinds[i]), "cuptiActivityEnable");
        CUPTICHECK(cuptiActivityDisable(k_kinds[i]));
    }
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
    for (size_t i = 0; i < sizeof k_kinds / sizeof *k_kinds; i++) CUPTICHECK(cuptiActivityEnable(k_kinds[i]));
}

void vb_cupti_end(void) {
    /* every stream's work (NCCL's too) has finished: each record is complete */
    CUDARTCHECK(cudaDeviceSynchronize());
    /* off first, so that nothing recorded after the trial reaches its views,
     * then every buffer back (those with an unfinished record too) */
    for (size_t i = 0; i < sizeof k_kinds / sizeof *k_kinds; i++) CUPTICHECK(cuptiActivityDisable(k_kinds[i]));
    CUPTICHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    size_t dropped = 0; /* the global queue's, since the last buffer came back */
    CUPTICHECK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
    pthread_mutex_lock(&g_tr.mu);
    g_tr.dropped += dropped;
    g_tr.keep = false;
    const CUptiResult err = g_tr.cb_error;
    const char *call = g_tr.cb_call;
    pthread_mutex_unlock(&g_tr.mu);
    if (err != CUPTI_SUCCESS) cupti_die("CUPTI", call, cupti_error(err), __FILE__, __LINE__);
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
                "the stream lanes miss those that fell inside the recorded steps",
                lost, MAX_TIMELINE_RECORDS);
        warned_room = true;
    }
    return placed;
}

vb_cupti_loss vb_cupti_losses(void) {
    pthread_mutex_lock(&g_tr.mu);
    vb_cupti_loss l = {g_tr.dropped, g_tr.untimed, g_tr.incomplete};
    pthread_mutex_unlock(&g_tr.mu);
    return l;
}

#endif /* VB_HAVE_CUPTI */
