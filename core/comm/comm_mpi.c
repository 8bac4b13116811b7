/* comm_mpi.c: the MPI data plane (vb_comm_data_ops, comm.h).
 *
 * The front-end (comm_data.c) has drained the context before any call
 * (needs_ctx_sync), so every buffer here is finished memory the MPI library
 * can read. float32 maps to MPI_FLOAT. bfloat16 and float16 have no MPI
 * arithmetic: gathers and broadcasts move their 16-bit patterns as
 * MPI_UINT16_T, reductions widen them to float32 (exact), reduce that, and
 * round the result back once (to nearest even). A blocking reduction stages
 * through one grown buffer; a non-blocking one owns its staging in the
 * request and converts and frees it when the request completes.
 *
 * MPI counts are int: blocking allreduce and broadcast are chunked, so any
 * size works; the other collectives refuse counts past INT_MAX with a line
 * naming the call.
 */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm/comm.h"
#include "core/comm/comm_impl.h"
#include "core/util/common.h"
#include "kernels/half.h"

/* The request handle lives inside vb_request.handle itself (MPI_Request is a
 * pointer in Open MPI, an int in MPICH): no allocation per DDP bucket. */
_Static_assert(sizeof(MPI_Request) <= sizeof(void *), "MPI_Request must fit in vb_request.handle");

static MPI_Request req_get(const vb_request *r) {
    MPI_Request q;
    memcpy(&q, &r->handle, sizeof q);
    return q;
}

static void req_set(vb_request *r, MPI_Request q) { memcpy(&r->handle, &q, sizeof q); }

static void widen(float *dst, const void *src, size_t n, vb_dtype t) {
    const uint16_t *s = src;
    if (t == VB_DTYPE_BF16)
        for (size_t i = 0; i < n; i++) dst[i] = vb_bf16_to_f32(s[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] = vb_f16_to_f32(s[i]);
}

/* dst (n elements of t) = src (float32); float32 is a copy */
static void narrow(void *dst, const float *src, size_t n, vb_dtype t) {
    uint16_t *d = dst;
    if (t == VB_DTYPE_F32)
        memmove(dst, src, n * sizeof(float));
    else if (t == VB_DTYPE_BF16)
        for (size_t i = 0; i < n; i++) d[i] = vb_f32_to_bf16(src[i]);
    else
        for (size_t i = 0; i < n; i++) d[i] = vb_f32_to_f16(src[i]);
}

/* ---- staging ---- */

/* Blocking reductions of 16-bit types: one buffer, grown and kept. */
static float *g_stage;
static size_t g_stage_n;

static float *stage_for(size_t n) {
    if (n > g_stage_n) {
        float *grown = vb_malloc_check((n ? n : 1) * sizeof *grown);
        free(g_stage);
        g_stage = grown;
        g_stage_n = n;
    }
    return g_stage;
}

/* A non-blocking call's own staging: completion writes it to dst as t. */
static float *req_stage(vb_request *req, size_t n, void *dst, vb_dtype t) {
    float *s = vb_malloc_check((n ? n : 1) * sizeof *s);
    req->stage = s;
    req->stage_dst = dst;
    req->stage_count = n;
    req->stage_dtype = (int)t;
    return s;
}

static void req_finish(vb_request *req) {
    if (!req->stage) return;
    narrow(req->stage_dst, req->stage, req->stage_count, (vb_dtype)req->stage_dtype);
    free(req->stage);
    req->stage = NULL;
}

/* ---- helpers ---- */

static MPI_Datatype raw_type(vb_dtype t) { return t == VB_DTYPE_F32 ? MPI_FLOAT : MPI_UINT16_T; }
static MPI_Op mpi_op(vb_red_op op) { return op == VB_RED_MAX ? MPI_MAX : MPI_SUM; }

static int int_count(size_t n, const char *what) {
    if (n > (size_t)INT_MAX)
        vb_die_internal("%s: %zu elements exceed MPI's int count (lower bucket_cap_mb for DDP buckets)", what, n);
    return (int)n;
}

/* blocking in-place float32 allreduce, chunked past MPI's int count */
static void allreduce_f32(MPI_Comm comm, float *buf, size_t n, MPI_Op op) {
    const size_t chunk = (size_t)1 << 30;
    for (size_t done = 0; done < n; done += chunk) {
        size_t k = n - done < chunk ? n - done : chunk;
        VB_MPI(MPI_Allreduce(MPI_IN_PLACE, buf + done, (int)k, MPI_FLOAT, op, comm));
    }
}

/* ---- the table ---- */

static void mpi_allreduce(const vb_comm *c, void *buf, size_t count, vb_dtype t, vb_red_op op, vb_ctx *ctx,
                          vb_request *req) {
    (void)ctx;
    MPI_Comm comm = vb_comm_mpi(c);
    if (!req) {
        if (t == VB_DTYPE_F32) {
            allreduce_f32(comm, buf, count, mpi_op(op));
        } else {
            float *s = stage_for(count);
            widen(s, buf, count, t);
            allreduce_f32(comm, s, count, mpi_op(op));
            narrow(buf, s, count, t);
        }
        return;
    }
    int n = int_count(count, "non-blocking allreduce");
    float *data = buf;
    if (t != VB_DTYPE_F32) {
        data = req_stage(req, count, buf, t);
        widen(data, buf, count, t);
    }
    MPI_Request q = MPI_REQUEST_NULL;
    VB_MPI(MPI_Iallreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, mpi_op(op), comm, &q));
    req_set(req, q);
}

static void mpi_allgather(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx,
                          vb_request *req) {
    (void)ctx;
    int n = int_count(count, "allgather");
    const size_t es = vb_dtype_size(t);
    /* send may already sit at its place in recv (the usual in-place use) */
    const void *sbuf = (const char *)send == (char *)recv + (size_t)vb_comm_rank_of(c) * count * es
                           ? MPI_IN_PLACE
                           : send;
    MPI_Comm comm = vb_comm_mpi(c);
    if (!req) {
        VB_MPI(MPI_Allgather(sbuf, n, raw_type(t), recv, n, raw_type(t), comm));
        return;
    }
    MPI_Request q = MPI_REQUEST_NULL;
    VB_MPI(MPI_Iallgather(sbuf, n, raw_type(t), recv, n, raw_type(t), comm, &q));
    req_set(req, q);
}

static void mpi_reduce_scatter(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t,
                               vb_red_op op, vb_ctx *ctx, vb_request *req) {
    (void)ctx;
    const int size = vb_comm_size_of(c), rank = vb_comm_rank_of(c);
    const int n = int_count(count, "reduce_scatter");
    const size_t es = vb_dtype_size(t), all = (size_t)size * count;
    const bool in_place = (char *)recv == (const char *)send + (size_t)rank * count * es;
    MPI_Comm comm = vb_comm_mpi(c);
    if (!req) {
        if (t == VB_DTYPE_F32 && !in_place) {
            VB_MPI(MPI_Reduce_scatter_block(send, recv, n, MPI_FLOAT, mpi_op(op), comm));
        } else if (t == VB_DTYPE_F32) {
            /* MPI's in-place form leaves the result at the buffer's start;
             * the send blocks are consumed, so moving it up is allowed */
            VB_MPI(MPI_Reduce_scatter_block(MPI_IN_PLACE, (void *)send, n, MPI_FLOAT, mpi_op(op), comm));
            memmove(recv, send, count * es);
        } else {
            float *s = stage_for(all + count);
            widen(s, send, all, t);
            VB_MPI(MPI_Reduce_scatter_block(s, s + all, n, MPI_FLOAT, mpi_op(op), comm));
            narrow(recv, s + all, count, t);
        }
        return;
    }
    MPI_Request q = MPI_REQUEST_NULL;
    if (t == VB_DTYPE_F32 && !in_place) {
        VB_MPI(MPI_Ireduce_scatter_block(send, recv, n, MPI_FLOAT, mpi_op(op), comm, &q));
    } else {
        /* staging [count] of result, then [all] of inputs: the result reaches
         * recv on completion (req_finish converts stage[0, count)), so an
         * in-place send is never written while in flight */
        float *s = req_stage(req, count + all, recv, t);
        req->stage_count = count;
        if (t == VB_DTYPE_F32)
            memcpy(s + count, send, all * sizeof(float));
        else
            widen(s + count, send, all, t);
        VB_MPI(MPI_Ireduce_scatter_block(s + count, s, n, MPI_FLOAT, mpi_op(op), comm, &q));
    }
    req_set(req, q);
}

static void mpi_broadcast(const vb_comm *c, void *buf, size_t count, vb_dtype t, int root, vb_ctx *ctx,
                          vb_request *req) {
    (void)ctx;
    MPI_Comm comm = vb_comm_mpi(c);
    const size_t es = vb_dtype_size(t);
    if (!req) {
        const size_t chunk = (size_t)1 << 30;
        char *p = buf;
        for (size_t done = 0; done < count; done += chunk) {
            size_t k = count - done < chunk ? count - done : chunk;
            VB_MPI(MPI_Bcast(p + done * es, (int)k, raw_type(t), root, comm));
        }
        return;
    }
    MPI_Request q = MPI_REQUEST_NULL;
    VB_MPI(MPI_Ibcast(buf, int_count(count, "non-blocking broadcast"), raw_type(t), root, comm, &q));
    req_set(req, q);
}

/* int displacements for MPI's v-collectives (the front-end checked counts) */
static int *displs_of(const int *counts, int size, int *stack, int nstack, const char *what) {
    int *d = size <= nstack ? stack : vb_malloc_check((size_t)size * sizeof *d);
    long long total = 0;
    for (int r = 0; r < size; r++) {
        d[r] = (int)total;
        total += counts[r];
        if (total > INT_MAX) vb_die_internal("%s: %lld elements exceed MPI's int displacements", what, total);
    }
    return d;
}

static void mpi_allgatherv(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                           vb_ctx *ctx) {
    (void)ctx;
    const int size = vb_comm_size_of(c), rank = vb_comm_rank_of(c);
    int stack[64];
    int *displs = displs_of(counts, size, stack, 64, "allgatherv");
    const void *sbuf =
        (const char *)send == (char *)recv + (size_t)displs[rank] * vb_dtype_size(t) ? MPI_IN_PLACE : send;
    VB_MPI(MPI_Allgatherv(sbuf, counts[rank], raw_type(t), recv, counts, displs, raw_type(t), vb_comm_mpi(c)));
    if (displs != stack) free(displs);
}

static void mpi_reduce_scatterv(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                                vb_red_op op, vb_ctx *ctx) {
    (void)ctx;
    MPI_Comm comm = vb_comm_mpi(c);
    if (t == VB_DTYPE_F32) {
        VB_MPI(MPI_Reduce_scatter(send, recv, counts, MPI_FLOAT, mpi_op(op), comm));
        return;
    }
    const int size = vb_comm_size_of(c), rank = vb_comm_rank_of(c);
    size_t all = 0;
    for (int r = 0; r < size; r++) all += (size_t)counts[r];
    float *s = stage_for(all + (size_t)counts[rank]);
    widen(s, send, all, t);
    VB_MPI(MPI_Reduce_scatter(s, s + all, counts, MPI_FLOAT, mpi_op(op), comm));
    narrow(recv, s + all, (size_t)counts[rank], t);
}

static bool mpi_test(vb_request *req) {
    MPI_Request q = req_get(req);
    int done = 0;
    VB_MPI(MPI_Test(&q, &done, MPI_STATUS_IGNORE));
    req_set(req, q);
    if (done) req_finish(req);
    return done != 0;
}

static void mpi_wait(vb_request *req) {
    MPI_Request q = req_get(req);
    VB_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
    req_set(req, q);
    req_finish(req);
}

static const vb_comm_data_ops k_mpi_plane = {
    .name = "mpi",
    .needs_ctx_sync = true,
    .host_buffers = true, /* Open MPI here is not CUDA-aware */
    .attach = NULL, /* the control plane's communicator is the data plane's */
    .detach = NULL,
    .allreduce = mpi_allreduce,
    .allgather = mpi_allgather,
    .reduce_scatter = mpi_reduce_scatter,
    .broadcast = mpi_broadcast,
    .allgatherv = mpi_allgatherv,
    .reduce_scatterv = mpi_reduce_scatterv,
    .test = mpi_test,
    .wait = mpi_wait,
};

const vb_comm_data_ops *vb_comm_data_mpi(void) { return &k_mpi_plane; }
