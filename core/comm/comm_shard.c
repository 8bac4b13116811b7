/* comm_shard.c: the shard data plane (comm.h, vb_comm_shard): one process
 * runs the work of one rank of a tp / cp layout with nobody to talk to.
 *
 * What it is for: the scaling model (analysis/scaling/scaling_model.h) needs one rank's
 * compute under tp x cp, and a GEMM over a 1/tp slice or an attention over
 * 1/cp of the queries is not always 1/tp or 1/cp of the whole (narrower
 * GEMMs run less efficiently). bench_step --shard_tp/--shard_cp builds the
 * model with these communicators and times the real shard shapes.
 *
 * What its collectives do: nothing crosses processes. An allreduce or a
 * broadcast leaves the buffer as it is (this rank's partial sums: finite,
 * realistic values). An allgather fills every rank's block with this rank's
 * own (repeated when a block is longer), so the gathered K and V are the
 * right shape and finite. A reduce-scatter keeps this rank's block of the
 * input. The copies go on the context's queue, as a real plane's would, and
 * are profiled as the collective (category comm, which the model skips).
 */
#include <string.h>

#include "core/comm/comm.h"
#include "core/util/common.h"

static void copy_on(vb_ctx *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes == 0 || dst == src) return;
    if (ctx)
        ctx->ops->memcpy_d2d(ctx, dst, src, bytes);
    else
        memmove(dst, src, bytes);
}

/* every block of recv (counts[r] elements at their prefix sums) from this
 * rank's block at `own` (own_n elements), repeated as needed */
static void fill_blocks(const vb_comm *c, void *recv, const void *own, size_t own_n, const int *counts, size_t es,
                        vb_ctx *ctx) {
    size_t at = 0;
    for (int r = 0; r < c->size; r++) {
        const size_t n = (size_t)counts[r];
        char *dst = (char *)recv + at * es;
        for (size_t done = 0; done < n && own_n > 0;) {
            const size_t k = n - done < own_n ? n - done : own_n;
            if (dst + done * es != own) copy_on(ctx, dst + done * es, own, k * es);
            done += k;
        }
        at += n;
    }
}

static void sh_allreduce(const vb_comm *c, void *buf, size_t count, vb_dtype t, vb_red_op op, vb_ctx *ctx,
                         vb_request *req) {
    (void)c, (void)buf, (void)count, (void)t, (void)op, (void)ctx, (void)req;
}

static void sh_allgatherv(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t, vb_ctx *ctx) {
    const size_t es = vb_dtype_size(t);
    size_t displ = 0;
    for (int r = 0; r < c->rank; r++) displ += (size_t)counts[r];
    char *own = (char *)recv + displ * es;
    copy_on(ctx, own, send, (size_t)counts[c->rank] * es);
    fill_blocks(c, recv, own, (size_t)counts[c->rank], counts, es, ctx);
}

static void sh_allgather(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx,
                         vb_request *req) {
    (void)req;
    int counts[64];
    if (c->size > 64 || count > (size_t)0x7fffffff) vb_die_internal("shard plane: %d ranks of %zu", c->size, count);
    for (int r = 0; r < c->size; r++) counts[r] = (int)count;
    sh_allgatherv(c, send, recv, counts, t, ctx);
}

static void sh_reduce_scatterv(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                               vb_red_op op, vb_ctx *ctx) {
    (void)op;
    const size_t es = vb_dtype_size(t);
    size_t displ = 0;
    for (int r = 0; r < c->rank; r++) displ += (size_t)counts[r];
    copy_on(ctx, recv, (const char *)send + displ * es, (size_t)counts[c->rank] * es);
}

static void sh_reduce_scatter(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_red_op op,
                              vb_ctx *ctx, vb_request *req) {
    (void)req;
    const size_t es = vb_dtype_size(t);
    copy_on(ctx, recv, (const char *)send + (size_t)c->rank * count * es, count * es);
    (void)op;
}

static void sh_broadcast(const vb_comm *c, void *buf, size_t count, vb_dtype t, int root, vb_ctx *ctx,
                         vb_request *req) {
    (void)c, (void)buf, (void)count, (void)t, (void)root, (void)ctx, (void)req;
}

static bool sh_test(vb_request *req) {
    (void)req;
    return true;
}

static void sh_wait(vb_request *req) { (void)req; }

static const vb_comm_data_ops k_shard_plane = {
    .name = "shard",
    .needs_ctx_sync = false, /* its copies go on the context's queue */
    .host_buffers = false,
    .device_only = false,
    .allreduce = sh_allreduce,
    .allgather = sh_allgather,
    .reduce_scatter = sh_reduce_scatter,
    .broadcast = sh_broadcast,
    .allgatherv = sh_allgatherv,
    .reduce_scatterv = sh_reduce_scatterv,
    .test = sh_test,
    .wait = sh_wait,
};

void vb_comm_shard(vb_comm *out, int size, int rank, const char *group, vb_profiler *prof) {
    if (size < 1 || size > 64) vb_die_input("shard communicator: %d ranks (1 to 64)", size);
    if (rank < 0 || rank >= size) vb_die_internal("shard communicator: rank %d of %d", rank, size);
    memset(out, 0, sizeof *out);
    out->size = size;
    out->rank = rank;
    out->prof = prof;
    snprintf(out->group, sizeof out->group, "%s", group);
    out->data = &k_shard_plane;
}
