/* comm_data.c: the data plane's front-end (comm.h).
 *
 * What every plane shares sits here, so a plane implements only the
 * transfers: size-1 groups never reach it (no-op or local copy), contexts
 * are drained first for planes that work on finished buffers, every call is
 * profiled and counted in the totals, requests are bookkept (launch and
 * completion times, the bytes), and the uneven collectives are built from
 * the even ones where a plane has no native uneven form.
 */
#include "core/comm/comm.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm/comm_impl.h"
#include "core/util/common.h"

static size_t elem_size(vb_dtype t, const char *what) {
    if (t != VB_DTYPE_F32 && t != VB_DTYPE_BF16 && t != VB_DTYPE_F16)
        vb_die_internal("%s: unknown dtype %d", what, (int)t);
    return vb_dtype_size(t);
}

static void check_op(vb_red_op op, const char *what) {
    if (op != VB_RED_SUM && op != VB_RED_MAX) vb_die_internal("%s: unknown reduction %d", what, (int)op);
}

static void check_root(const vb_comm *c, int root, const char *what) {
    int size = vb_comm_size_of(c);
    if (root < 0 || root >= size) vb_die_internal("%s: root %d outside a group of %d", what, root, size);
}

/* A plane that works on finished buffers runs after ctx's queued work. */
static void order_after(const vb_comm_data_ops *pl, vb_ctx *ctx) {
    if (ctx && pl->needs_ctx_sync) ctx->ops->synchronize(ctx);
}

/* A local copy in the buffers' memory: on ctx's queue, or memmove for host
 * memory without a context. */
static void copy_on(vb_ctx *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes == 0 || dst == src) return;
    if (ctx)
        ctx->ops->memcpy_d2d(ctx, dst, src, bytes);
    else
        memmove(dst, src, bytes);
}

/* Sum of counts[0..n), checking each; the largest in *maxc. */
static size_t count_total(const int *counts, int n, int *maxc, const char *what) {
    if (!counts) vb_die_internal("%s: no counts", what);
    size_t total = 0;
    int m = 0;
    for (int r = 0; r < n; r++) {
        if (counts[r] < 0) vb_die_internal("%s: negative count %d for rank %d", what, counts[r], r);
        total += (size_t)counts[r];
        if (counts[r] > m) m = counts[r];
    }
    *maxc = m;
    return total;
}

/* The plane a call runs on: c's, except that host memory on a plane that
 * moves device memory only (NCCL) goes over MPI -- the communicator's control
 * plane is an MPI communicator of the same ranks (checkpoint gathers, host
 * conveniences). */
static const vb_comm_data_ops *plane_for(const vb_comm *c, const vb_ctx *ctx) {
    const vb_comm_data_ops *pl = vb_comm_data_plane(c);
    if (pl->device_only && (!ctx || ctx->ops->host_memory)) return vb_comm_data_mpi();
    return pl;
}

/* Device buffers on a plane that reads and writes host memory only go
 * through host staging (comm_device.c). */
static bool staged(const vb_comm_data_ops *pl, const vb_ctx *ctx) {
    return pl->host_buffers && ctx && !ctx->ops->host_memory;
}

/* A plane that enqueues on ctx's stream returns before the work is done: its
 * blocking time is the stream's, measured with events (comm_device.c). */
static bool stream_timed(const vb_comm_data_ops *pl, const vb_ctx *ctx) {
    return !pl->needs_ctx_sync && ctx && !ctx->ops->host_memory;
}

/* ---- requests ---- */

static void req_begin(vb_request *req, const char *what, const vb_comm_data_ops *pl, vb_ctx *ctx, size_t bytes) {
    if (!req) vb_die_internal("%s: no request", what);
    if (req->active) vb_die_internal("%s: request still in flight", what);
    memset(req, 0, sizeof *req);
    req->plane = pl;
    req->ctx = ctx;
    req->bytes = bytes;
    req->t_start = vb_now();
    req->t_end = req->t_start;
}

/* a staged request's result back to the device, and its buffer to the pool */
static void req_unstage(vb_request *req) {
    if (!req->host_staged) return;
    req->ctx->ops->memcpy_h2d(req->ctx, req->dev_result, req->host_result, req->result_bytes);
    vb_comm_stage_put(req->ctx, req->host_slot);
    req->host_staged = 0;
}

bool vb_test(vb_request *req) {
    if (!req->active) return true;
    if (!req->plane->test(req)) return false;
    req_unstage(req);
    req->active = 0;
    req->t_end = vb_now();
    return true;
}

double vb_wait(vb_request *req) {
    if (!req->active) return 0.0;
    double t0 = vb_now();
    /* on a stream plane the wait is the stream's: the host goes on */
    const bool events = stream_timed(req->plane, req->ctx);
    int span = events ? vb_comm_span_begin(req->ctx) : -1;
    req->plane->wait(req);
    if (events) vb_comm_span_end(req->ctx, span);
    req_unstage(req);
    req->active = 0;
    req->t_end = vb_now();
    double dt = req->t_end - t0;
    if (!events) vb_comm_totals_add_blocking(dt);
    return dt;
}

/* ---- the even collectives ---- */

typedef enum { K_ALLREDUCE, K_ALLGATHER, K_REDUCE_SCATTER, K_BROADCAST } coll_kind;

/* profiled names, blocking and not (string literals: their addresses key the
 * profiler's id cache) */
static const struct {
    const char *name, *iname;
} k_names[4] = {{"allreduce", "iallreduce"},
                {"allgather", "iallgather"},
                {"reduce_scatter", "ireduce_scatter"},
                {"broadcast", "ibroadcast"}};

/* One call of the plane; send/recv as the table takes them (allreduce and
 * broadcast: buf in both). */
static void plane_call(coll_kind k, const vb_comm_data_ops *pl, const vb_comm *c, const void *send, void *recv,
                       size_t count, vb_dtype t, vb_red_op op, int root, vb_ctx *ctx, vb_request *req) {
    switch (k) {
    case K_ALLREDUCE: pl->allreduce(c, recv, count, t, op, ctx, req); break;
    case K_ALLGATHER: pl->allgather(c, send, recv, count, t, ctx, req); break;
    case K_REDUCE_SCATTER: pl->reduce_scatter(c, send, recv, count, t, op, ctx, req); break;
    case K_BROADCAST: pl->broadcast(c, recv, count, t, root, ctx, req); break;
    }
}

/* Host staging of one even collective: the input copied to a page-locked
 * buffer laid out as the plane wants it (allgather: rank-major with this
 * rank's block in place; reduce-scatter: the input blocks, then the result),
 * the plane run on the host copy, the result copied back on ctx -- at once
 * for a blocking call, when the request completes otherwise. */
static void staged_call(coll_kind k, const vb_comm_data_ops *pl, const vb_comm *c, const void *send, void *recv,
                        size_t count, vb_dtype t, vb_red_op op, int root, vb_ctx *ctx, vb_request *req) {
    const size_t es = vb_dtype_size(t), n = count * es, size = (size_t)vb_comm_size_of(c),
                 rank = (size_t)vb_comm_rank_of(c);
    size_t host_bytes = n, in_at = 0, in_bytes = n, out_at = 0, out_bytes = n;
    if (k == K_ALLGATHER) {
        host_bytes = size * n, in_at = rank * n, out_bytes = size * n;
    } else if (k == K_REDUCE_SCATTER) {
        host_bytes = (size + 1) * n, in_bytes = size * n, out_at = size * n;
    }
    int slot = -1;
    char *h = vb_comm_stage_get(ctx, host_bytes, &slot);
    ctx->ops->memcpy_d2h(ctx, h + in_at, k == K_ALLREDUCE || k == K_BROADCAST ? recv : send, in_bytes);
    ctx->ops->synchronize(ctx);
    plane_call(k, pl, c, h + in_at, h + out_at, count, t, op, root, NULL, req);
    if (!req) {
        ctx->ops->memcpy_h2d(ctx, recv, h + out_at, out_bytes);
        vb_comm_stage_put(ctx, slot);
        return;
    }
    req->host_staged = 1;
    req->host_slot = slot;
    req->host_result = h + out_at;
    req->dev_result = recv;
    req->result_bytes = out_bytes;
}

/* Every even collective, blocking (req NULL) or not: size-1 groups, argument
 * checks, ordering after ctx, staging, profiling and the totals. */
static void collective(coll_kind k, const char *what, const vb_comm *c, const void *send, void *recv, size_t count,
                       vb_dtype t, vb_red_op op, int root, vb_ctx *ctx, vb_request *req) {
    const size_t es = elem_size(t, what);
    if (k == K_ALLREDUCE || k == K_REDUCE_SCATTER) check_op(op, what);
    /* nccl-tests' size: the whole logical buffer */
    const size_t bytes = k == K_ALLGATHER || k == K_REDUCE_SCATTER ? count * es * (size_t)vb_comm_size_of(c)
                                                                   : count * es;
    const vb_comm_data_ops *pl = plane_for(c, ctx);
    if (req) req_begin(req, what, pl, ctx, bytes);
    if (vb_comm_trivial(c)) { /* nothing to exchange: complete at once */
        if (k == K_ALLGATHER || k == K_REDUCE_SCATTER) copy_on(ctx, recv, send, count * es);
        return;
    }
    if (k == K_BROADCAST) check_root(c, root, what);
    const bool stage = staged(pl, ctx);
    if (!stage) order_after(pl, ctx);
    /* a non-blocking call's profiled time is its launch only; the part the
     * step waits for is vb_wait's, so ops.csv shares never count overlapped
     * time. A blocking call on a stream plane is timed by events. */
    const bool events = !req && stream_timed(pl, ctx);
    vb_comm_timer tm = vb_comm_timer_start(c, req ? k_names[k].iname : k_names[k].name);
    int span = events ? vb_comm_span_begin(ctx) : -1;
    if (stage)
        staged_call(k, pl, c, send, recv, count, t, op, root, ctx, req);
    else
        plane_call(k, pl, c, send, recv, count, t, op, root, ctx, req);
    if (events) vb_comm_span_end(ctx, span);
    vb_comm_timer_stop(&tm, bytes, !req && !events);
    if (req) req->active = 1;
}

void vb_data_allreduce(const vb_comm *c, void *buf, size_t count, vb_dtype t, vb_red_op op, vb_ctx *ctx) {
    collective(K_ALLREDUCE, "vb_data_allreduce", c, buf, buf, count, t, op, 0, ctx, NULL);
}

void vb_data_iallreduce(const vb_comm *c, void *buf, size_t count, vb_dtype t, vb_red_op op, vb_ctx *ctx,
                        vb_request *req) {
    collective(K_ALLREDUCE, "vb_data_iallreduce", c, buf, buf, count, t, op, 0, ctx, req);
}

void vb_data_allgather(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx) {
    collective(K_ALLGATHER, "vb_data_allgather", c, send, recv, count, t, VB_RED_SUM, 0, ctx, NULL);
}

void vb_data_iallgather(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx,
                        vb_request *req) {
    collective(K_ALLGATHER, "vb_data_iallgather", c, send, recv, count, t, VB_RED_SUM, 0, ctx, req);
}

void vb_data_reduce_scatter(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_red_op op,
                            vb_ctx *ctx) {
    collective(K_REDUCE_SCATTER, "vb_data_reduce_scatter", c, send, recv, count, t, op, 0, ctx, NULL);
}

void vb_data_ireduce_scatter(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t,
                             vb_red_op op, vb_ctx *ctx, vb_request *req) {
    collective(K_REDUCE_SCATTER, "vb_data_ireduce_scatter", c, send, recv, count, t, op, 0, ctx, req);
}

void vb_data_broadcast(const vb_comm *c, void *buf, size_t count, vb_dtype t, int root, vb_ctx *ctx) {
    collective(K_BROADCAST, "vb_data_broadcast", c, buf, buf, count, t, VB_RED_SUM, root, ctx, NULL);
}

void vb_data_ibroadcast(const vb_comm *c, void *buf, size_t count, vb_dtype t, int root, vb_ctx *ctx,
                        vb_request *req) {
    collective(K_BROADCAST, "vb_data_ibroadcast", c, buf, buf, count, t, VB_RED_SUM, root, ctx, req);
}

/* ---- uneven collectives ---- */

/* The padded forms' host staging when the caller brings none: grown, never
 * shrunk, zero-filled when grown (padding travels, so it is never
 * uninitialised memory). Training thread only. */
static void *g_pad_stage;
static size_t g_pad_stage_bytes;

static void *pad_staging(vb_ctx *ctx, void *staging, size_t bytes) {
    if (staging) return staging;
    /* device memory: a scratch buffer of the context's, ordered by its queue */
    if (ctx && !ctx->ops->host_memory) return vb_comm_device_scratch(ctx, bytes);
    if (bytes > g_pad_stage_bytes) {
        void *grown = vb_calloc_check(1, bytes);
        free(g_pad_stage);
        g_pad_stage = grown;
        g_pad_stage_bytes = bytes;
    }
    return g_pad_stage;
}

size_t vb_data_padded_count(const vb_comm *c, const int *counts) {
    int size = vb_comm_size_of(c), maxc = 0;
    (void)count_total(counts, size, &maxc, "vb_data_padded_count");
    return (size_t)(size + 1) * (size_t)maxc;
}

static bool all_equal(const int *counts, int n) {
    for (int r = 1; r < n; r++)
        if (counts[r] != counts[0]) return false;
    return true;
}

/* The padded allgather without its profiling (the caller times it). */
static void allgatherv_padded(const vb_comm *c, const vb_comm_data_ops *pl, const void *send, void *recv,
                              const int *counts, int size, int rank, int maxc, vb_dtype t, vb_ctx *ctx,
                              void *staging) {
    const size_t es = vb_dtype_size(t), slot = (size_t)maxc * es;
    if (all_equal(counts, size)) { /* the rank-major layout is already the padded one */
        pl->allgather(c, send, recv, (size_t)maxc, t, ctx, NULL);
        return;
    }
    char *st = pad_staging(ctx, staging, (size_t)size * slot);
    copy_on(ctx, st + (size_t)rank * slot, send, (size_t)counts[rank] * es);
    order_after(pl, ctx);
    pl->allgather(c, st + (size_t)rank * slot, st, (size_t)maxc, t, ctx, NULL);
    char *out = recv;
    for (int r = 0; r < size; r++) {
        copy_on(ctx, out, st + (size_t)r * slot, (size_t)counts[r] * es);
        out += (size_t)counts[r] * es;
    }
}

static void reduce_scatterv_padded(const vb_comm *c, const vb_comm_data_ops *pl, const void *send, void *recv,
                                   const int *counts, int size, int rank, int maxc, vb_dtype t, vb_red_op op,
                                   vb_ctx *ctx, void *staging) {
    const size_t es = vb_dtype_size(t), slot = (size_t)maxc * es;
    if (all_equal(counts, size)) {
        pl->reduce_scatter(c, send, recv, (size_t)maxc, t, op, ctx, NULL);
        return;
    }
    /* slots [size][maxc] of input, then one slot of output */
    char *st = pad_staging(ctx, staging, (size_t)(size + 1) * slot);
    const char *in = send;
    for (int r = 0; r < size; r++) {
        copy_on(ctx, st + (size_t)r * slot, in, (size_t)counts[r] * es);
        in += (size_t)counts[r] * es;
    }
    order_after(pl, ctx);
    pl->reduce_scatter(c, st, st + (size_t)size * slot, (size_t)maxc, t, op, ctx, NULL);
    copy_on(ctx, recv, st + (size_t)size * slot, (size_t)counts[rank] * es);
}

/* Times one uneven collective as today's ops.csv names it ("allgather",
 * "reduce_scatter", the total of counts); native or padded. */
static size_t prefix(const int *counts, int r) {
    size_t p = 0;
    for (int i = 0; i < r; i++) p += (size_t)counts[i];
    return p;
}

static void uneven(bool gather, bool padded, const vb_comm *c, const void *send, void *recv, const int *counts,
                   vb_dtype t, vb_red_op op, vb_ctx *ctx, void *staging) {
    void *const final_recv = recv;
    const char *what = gather ? (padded ? "vb_data_allgatherv_padded" : "vb_data_allgatherv")
                              : (padded ? "vb_data_reduce_scatterv_padded" : "vb_data_reduce_scatterv");
    size_t es = elem_size(t, what);
    if (!gather) check_op(op, what);
    if (vb_comm_trivial(c)) {
        if (!counts) vb_die_internal("%s: no counts", what);
        copy_on(ctx, recv, send, (size_t)counts[0] * es);
        return;
    }
    const int size = vb_comm_size_of(c), rank = vb_comm_rank_of(c);
    int maxc = 0;
    size_t total = count_total(counts, size, &maxc, what);
    const vb_comm_data_ops *pl = plane_for(c, ctx);
    if (!padded && (gather ? pl->allgatherv == NULL : pl->reduce_scatterv == NULL)) padded = true;
    /* device buffers on a host-only plane: the same collective on host
     * copies (the padded form with the internal host staging) */
    const bool stage = staged(pl, ctx);
    vb_ctx *run_ctx = stage ? NULL : ctx;
    const size_t displ = gather ? prefix(counts, rank) : 0;
    const size_t in_n = gather ? (size_t)counts[rank] : total, out_n = gather ? total : (size_t)counts[rank];
    int slot = -1;
    char *h = NULL;
    if (stage) {
        /* gather: the rank-major output with this rank's block in place;
         * reduce-scatter: the input blocks, then the result */
        h = vb_comm_stage_get(ctx, (total + (gather ? 0 : out_n)) * es, &slot);
        ctx->ops->memcpy_d2h(ctx, h + displ * es, send, in_n * es);
        send = h + displ * es;
        recv = gather ? (void *)h : (void *)(h + total * es);
        staging = NULL;
    }
    order_after(pl, ctx);
    const bool events = stream_timed(pl, run_ctx);
    vb_comm_timer tm = vb_comm_timer_start(c, gather ? "allgather" : "reduce_scatter");
    int span = events ? vb_comm_span_begin(ctx) : -1;
    if (!padded && gather)
        pl->allgatherv(c, send, recv, counts, t, run_ctx);
    else if (!padded)
        pl->reduce_scatterv(c, send, recv, counts, t, op, run_ctx);
    else if (gather)
        allgatherv_padded(c, pl, send, recv, counts, size, rank, maxc, t, run_ctx, staging);
    else
        reduce_scatterv_padded(c, pl, send, recv, counts, size, rank, maxc, t, op, run_ctx, staging);
    if (events) vb_comm_span_end(ctx, span);
    if (stage) {
        ctx->ops->memcpy_h2d(ctx, final_recv, recv, out_n * es);
        vb_comm_stage_put(ctx, slot);
    }
    vb_comm_timer_stop(&tm, total * es, !events);
}

void vb_data_allgatherv(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                        vb_ctx *ctx) {
    uneven(true, false, c, send, recv, counts, t, VB_RED_SUM, ctx, NULL);
}

void vb_data_reduce_scatterv(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                             vb_red_op op, vb_ctx *ctx) {
    uneven(false, false, c, send, recv, counts, t, op, ctx, NULL);
}

void vb_data_allgatherv_padded(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                               vb_ctx *ctx, void *staging) {
    uneven(true, true, c, send, recv, counts, t, VB_RED_SUM, ctx, staging);
}

void vb_data_reduce_scatterv_padded(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                                    vb_red_op op, vb_ctx *ctx, void *staging) {
    uneven(false, true, c, send, recv, counts, t, op, ctx, staging);
}

/* ---- float32 conveniences ---- */

void vb_allreduce_sum_f32(const vb_comm *c, float *buf, size_t n) {
    vb_data_allreduce(c, buf, n, VB_DTYPE_F32, VB_RED_SUM, NULL);
}

void vb_allgatherv_f32(const vb_comm *c, const float *send, float *recv, const int *counts) {
    vb_data_allgatherv(c, send, recv, counts, VB_DTYPE_F32, NULL);
}

void vb_reduce_scatterv_sum_f32(const vb_comm *c, const float *send, float *recv, const int *counts) {
    vb_data_reduce_scatterv(c, send, recv, counts, VB_DTYPE_F32, VB_RED_SUM, NULL);
}

void vb_iallreduce_sum_f32(const vb_comm *c, float *buf, size_t n, vb_request *req) {
    vb_data_iallreduce(c, buf, n, VB_DTYPE_F32, VB_RED_SUM, NULL, req);
}
