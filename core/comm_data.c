/* comm_data.c: the data plane's front-end (comm.h).
 *
 * What every plane shares sits here, so a plane implements only the
 * transfers: size-1 groups never reach it (no-op or local copy), contexts
 * are drained first for planes that work on finished buffers, every call is
 * profiled and counted in the totals, requests are bookkept (launch and
 * completion times, the bytes), and the uneven collectives are built from
 * the even ones where a plane has no native uneven form.
 */
#include "core/comm.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm_impl.h"
#include "core/common.h"

static size_t elem_size(vb_dtype t, const char *what) {
    if (t != VB_DTYPE_F32 && t != VB_DTYPE_BF16 && t != VB_DTYPE_F16)
        vb_die_internal("%s: unknown dtype %d", what, (int)t);
    return vb_dtype_size(t);
}

static void check_op(vb_red_op op, const char *what) {
    if (op != VB_RED_SUM && op != VB_RED_MAX) vb_die_internal("%s: unknown reduction %d", what, (int)op);
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

bool vb_test(vb_request *req) {
    if (!req->active) return true;
    if (!req->plane->test(req)) return false;
    req->active = 0;
    req->t_end = vb_now();
    return true;
}

double vb_wait(vb_request *req) {
    if (!req->active) return 0.0;
    double t0 = vb_now();
    req->plane->wait(req);
    req->active = 0;
    req->t_end = vb_now();
    double dt = req->t_end - t0;
    vb_comm_totals_add_blocking(dt);
    return dt;
}

/* ---- allreduce ---- */

void vb_data_allreduce(const vb_comm *c, void *buf, size_t count, vb_dtype t, vb_red_op op, vb_ctx *ctx) {
    size_t es = elem_size(t, "vb_data_allreduce");
    check_op(op, "vb_data_allreduce");
    if (vb_comm_trivial(c)) return;
    const vb_comm_data_ops *pl = vb_comm_data_plane(c);
    order_after(pl, ctx);
    vb_comm_timer tm = vb_comm_timer_start(c, "allreduce");
    pl->allreduce(c, buf, count, t, op, ctx, NULL);
    vb_comm_timer_stop(&tm, count * es, true);
}

void vb_data_iallreduce(const vb_comm *c, void *buf, size_t count, vb_dtype t, vb_red_op op, vb_ctx *ctx,
                        vb_request *req) {
    size_t es = elem_size(t, "vb_data_iallreduce");
    check_op(op, "vb_data_iallreduce");
    const vb_comm_data_ops *pl = vb_comm_data_plane(c);
    req_begin(req, "vb_data_iallreduce", pl, ctx, count * es);
    if (vb_comm_trivial(c)) return; /* complete at once: nothing to reduce with */
    order_after(pl, ctx);
    /* the profiled time is the launch only; the part the step waits for is
     * vb_wait's, so ops.csv shares never count overlapped time */
    vb_comm_timer tm = vb_comm_timer_start(c, "iallreduce");
    pl->allreduce(c, buf, count, t, op, ctx, req);
    vb_comm_timer_stop(&tm, req->bytes, false);
    req->active = 1;
}

/* ---- allgather (even) ---- */

void vb_data_allgather(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx) {
    size_t es = elem_size(t, "vb_data_allgather");
    if (vb_comm_trivial(c)) {
        copy_on(ctx, recv, send, count * es);
        return;
    }
    const vb_comm_data_ops *pl = vb_comm_data_plane(c);
    order_after(pl, ctx);
    vb_comm_timer tm = vb_comm_timer_start(c, "allgather");
    pl->allgather(c, send, recv, count, t, ctx, NULL);
    vb_comm_timer_stop(&tm, count * es * (size_t)vb_comm_size_of(c), true);
}

void vb_data_iallgather(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx,
                        vb_request *req) {
    size_t es = elem_size(t, "vb_data_iallgather");
    const vb_comm_data_ops *pl = vb_comm_data_plane(c);
    req_begin(req, "vb_data_iallgather", pl, ctx, count * es * (size_t)vb_comm_size_of(c));
    if (vb_comm_trivial(c)) {
        copy_on(ctx, recv, send, count * es);
        return;
    }
    order_after(pl, ctx);
    vb_comm_timer tm = vb_comm_timer_start(c, "iallgather");
    pl->allgather(c, send, recv, count, t, ctx, req);
    vb_comm_timer_stop(&tm, req->bytes, false);
    req->active = 1;
}

/* ---- reduce-scatter (even) ---- */

void vb_data_reduce_scatter(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_red_op op,
                            vb_ctx *ctx) {
    size_t es = elem_size(t, "vb_data_reduce_scatter");
    check_op(op, "vb_data_reduce_scatter");
    if (vb_comm_trivial(c)) {
        copy_on(ctx, recv, send, count * es);
        return;
    }
    const vb_comm_data_ops *pl = vb_comm_data_plane(c);
    order_after(pl, ctx);
    vb_comm_timer tm = vb_comm_timer_start(c, "reduce_scatter");
    pl->reduce_scatter(c, send, recv, count, t, op, ctx, NULL);
    vb_comm_timer_stop(&tm, count * es * (size_t)vb_comm_size_of(c), true);
}

void vb_data_ireduce_scatter(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t,
                             vb_red_op op, vb_ctx *ctx, vb_request *req) {
    size_t es = elem_size(t, "vb_data_ireduce_scatter");
    check_op(op, "vb_data_ireduce_scatter");
    const vb_comm_data_ops *pl = vb_comm_data_plane(c);
    req_begin(req, "vb_data_ireduce_scatter", pl, ctx, count * es * (size_t)vb_comm_size_of(c));
    if (vb_comm_trivial(c)) {
        copy_on(ctx, recv, send, count * es);
        return;
    }
    order_after(pl, ctx);
    vb_comm_timer tm = vb_comm_timer_start(c, "ireduce_scatter");
    pl->reduce_scatter(c, send, recv, count, t, op, ctx, req);
    vb_comm_timer_stop(&tm, req->bytes, false);
    req->active = 1;
}

/* ---- broadcast ---- */

static void check_root(const vb_comm *c, int root, const char *what) {
    int size = vb_comm_size_of(c);
    if (root < 0 || root >= size) vb_die_internal("%s: root %d outside a group of %d", what, root, size);
}

void vb_data_broadcast(const vb_comm *c, void *buf, size_t count, vb_dtype t, int root, vb_ctx *ctx) {
    size_t es = elem_size(t, "vb_data_broadcast");
    if (vb_comm_trivial(c)) return;
    check_root(c, root, "vb_data_broadcast");
    const vb_comm_data_ops *pl = vb_comm_data_plane(c);
    order_after(pl, ctx);
    vb_comm_timer tm = vb_comm_timer_start(c, "broadcast");
    pl->broadcast(c, buf, count, t, root, ctx, NULL);
    vb_comm_timer_stop(&tm, count * es, true);
}

void vb_data_ibroadcast(const vb_comm *c, void *buf, size_t count, vb_dtype t, int root, vb_ctx *ctx,
                        vb_request *req) {
    size_t es = elem_size(t, "vb_data_ibroadcast");
    const vb_comm_data_ops *pl = vb_comm_data_plane(c);
    req_begin(req, "vb_data_ibroadcast", pl, ctx, count * es);
    if (vb_comm_trivial(c)) return;
    check_root(c, root, "vb_data_ibroadcast");
    order_after(pl, ctx);
    vb_comm_timer tm = vb_comm_timer_start(c, "ibroadcast");
    pl->broadcast(c, buf, count, t, root, ctx, req);
    vb_comm_timer_stop(&tm, req->bytes, false);
    req->active = 1;
}

/* ---- uneven collectives ---- */

/* The padded forms' host staging when the caller brings none: grown, never
 * shrunk, zero-filled when grown (padding travels, so it is never
 * uninitialised memory). Training thread only. */
static void *g_pad_stage;
static size_t g_pad_stage_bytes;

static void *pad_staging(vb_ctx *ctx, void *staging, size_t bytes, const char *what) {
    if (staging) return staging;
    if (ctx && !ctx->ops->host_memory)
        vb_die_internal("%s: a %s context needs a staging buffer in its memory", what, ctx->ops->name);
    if (bytes > g_pad_stage_bytes) {
        void *grown = calloc(1, bytes);
        if (!grown) vb_die_internal("%s: out of memory for %zu bytes of staging", what, bytes);
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
    char *st = pad_staging(ctx, staging, (size_t)size * slot, "vb_data_allgatherv_padded");
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
    char *st = pad_staging(ctx, staging, (size_t)(size + 1) * slot, "vb_data_reduce_scatterv_padded");
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
static void uneven(bool gather, bool padded, const vb_comm *c, const void *send, void *recv, const int *counts,
                   vb_dtype t, vb_red_op op, vb_ctx *ctx, void *staging) {
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
    const vb_comm_data_ops *pl = vb_comm_data_plane(c);
    if (!padded && (gather ? pl->allgatherv == NULL : pl->reduce_scatterv == NULL)) padded = true;
    order_after(pl, ctx);
    vb_comm_timer tm = vb_comm_timer_start(c, gather ? "allgather" : "reduce_scatter");
    if (!padded && gather)
        pl->allgatherv(c, send, recv, counts, t, ctx);
    else if (!padded)
        pl->reduce_scatterv(c, send, recv, counts, t, op, ctx);
    else if (gather)
        allgatherv_padded(c, pl, send, recv, counts, size, rank, maxc, t, ctx, staging);
    else
        reduce_scatterv_padded(c, pl, send, recv, counts, size, rank, maxc, t, op, ctx, staging);
    vb_comm_timer_stop(&tm, total * es, true);
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
