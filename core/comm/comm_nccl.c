/* comm_nccl.c: the NCCL data plane (vb_comm_data_ops, comm.h).
 *
 * Built only with the CUDA backend and NCCL (VB_HAVE_NCCL). Buffers are
 * device memory of a CUDA context; a host-memory call (ctx NULL) is a bug.
 *
 * One NCCL communicator per vb_comm of more than one rank, made at attach
 * from a unique id that the group's rank 0 broadcasts over the control plane
 * (MPI), so tp, cp, dp and the cp x dp reduction group each have their own.
 *
 * Streams. A blocking collective is enqueued on the context's stream (the
 * tensor-parallel allreduces, the context-parallel exchanges): it is ordered
 * after the work that produced its input and before the work that reads its
 * result, and the host goes on at once. A non-blocking one (DDP's buckets)
 * goes on the communicator's own communication stream, ordered after the
 * context's work so far with an event; its completion is another event, and
 * vb_wait makes the context's stream wait for it -- the host never blocks,
 * backward keeps computing while the bucket is reduced, and the optimizer's
 * work waits on the device. The front-end times the stream's waits with
 * events (comm_device.c).
 *
 * Every NCCL and CUDA runtime call is checked by NCCLCHECK / CUDARTCHECK,
 * whose line names the call, the rank, the host, the file and the line.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm/comm.h"
#include "core/comm/comm_impl.h"
#include "core/util/common.h"

static void nccl_die(const char *what, const char *call, const char *err, const char *file, int line) {
    char host[256];
    vb_hostname(host, sizeof host);
    vb_die_internal("%s call %s failed: %s on host %s, at %s:%d", what, call, err, host, file, line);
}

#define NCCLCHECK(call)                                                                         \
    do {                                                                                        \
        ncclResult_t vb_nccl_rc_ = (call);                                                      \
        if (vb_nccl_rc_ != ncclSuccess)                                                         \
            nccl_die("NCCL", #call, ncclGetErrorString(vb_nccl_rc_), __FILE__, __LINE__);       \
    } while (0)

#define CUDARTCHECK(call)                                                                       \
    do {                                                                                        \
        cudaError_t vb_cuda_rc_ = (call);                                                       \
        if (vb_cuda_rc_ != cudaSuccess)                                                         \
            nccl_die("CUDA", #call, cudaGetErrorString(vb_cuda_rc_), __FILE__, __LINE__);       \
    } while (0)

enum { EVENT_POOL = 256 };

/* a communicator's NCCL state (vb_comm.data_impl) */
typedef struct nccl_state {
    ncclComm_t comm;
    cudaStream_t stream;            /* non-blocking collectives */
    cudaEvent_t free_events[EVENT_POOL];
    int nfree;
} nccl_state;

static nccl_state *state_of(const vb_comm *c) {
    nccl_state *s = c->data_impl;
    if (!s) vb_die_internal("NCCL data plane: communicator '%s' was not attached", c->group);
    return s;
}

static cudaEvent_t event_get(nccl_state *s) {
    if (s->nfree > 0) return s->free_events[--s->nfree];
    cudaEvent_t e;
    CUDARTCHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
}

static void event_put(nccl_state *s, cudaEvent_t e) {
    if (s->nfree < EVENT_POOL)
        s->free_events[s->nfree++] = e;
    else
        CUDARTCHECK(cudaEventDestroy(e));
}

static cudaStream_t ctx_stream(vb_ctx *ctx, const char *what) {
    if (!ctx || ctx->ops->host_memory || !ctx->ops->native_queue)
        vb_die_internal("NCCL data plane: %s needs a CUDA context (device memory), got %s", what,
                        ctx ? ctx->ops->name : "host memory");
    return (cudaStream_t)ctx->ops->native_queue(ctx);
}

static ncclDataType_t nccl_type(vb_dtype t) {
    switch (t) {
    case VB_DTYPE_F32: return ncclFloat32;
    case VB_DTYPE_BF16: return ncclBfloat16;
    case VB_DTYPE_F16: return ncclFloat16;
    }
    vb_die_internal("NCCL data plane: unknown dtype %d", (int)t);
}

static ncclRedOp_t nccl_op(vb_red_op op) { return op == VB_RED_MAX ? ncclMax : ncclSum; }

/* ---- attach / detach ---- */

static void nccl_attach(vb_comm *c) {
    nccl_state *s = vb_calloc_check(1, sizeof *s);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) NCCLCHECK(ncclGetUniqueId(&id));
    vb_broadcast(c, &id, sizeof id, 0); /* over the group's MPI communicator */
    NCCLCHECK(ncclCommInitRank(&s->comm, c->size, id, c->rank));
    CUDARTCHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    c->data_impl = s;
}

static void nccl_detach(vb_comm *c) {
    nccl_state *s = c->data_impl;
    if (!s) return;
    CUDARTCHECK(cudaStreamSynchronize(s->stream));
    for (int i = 0; i < s->nfree; i++) CUDARTCHECK(cudaEventDestroy(s->free_events[i]));
    CUDARTCHECK(cudaStreamDestroy(s->stream));
    NCCLCHECK(ncclCommDestroy(s->comm));
    free(s);
    c->data_impl = NULL;
}

/* ---- ordering ---- */

/* The stream a collective goes on: ctx's for a blocking call; for a
 * non-blocking one the communication stream, after ctx's work so far. */
static cudaStream_t launch_stream(nccl_state *s, vb_ctx *ctx, vb_request *req, const char *what) {
    cudaStream_t cs = ctx_stream(ctx, what);
    if (!req) return cs;
    cudaEvent_t ready = event_get(s);
    CUDARTCHECK(cudaEventRecord(ready, cs));
    CUDARTCHECK(cudaStreamWaitEvent(s->stream, ready, 0));
    event_put(s, ready); /* the wait holds what was recorded; the event may be reused */
    return s->stream;
}

/* A non-blocking call's completion event; the request keeps it (handle) and
 * the communicator's state (stage_dst, the plane's own field) to return it. */
static void launched(nccl_state *s, vb_request *req) {
    if (!req) return;
    cudaEvent_t done = event_get(s);
    CUDARTCHECK(cudaEventRecord(done, s->stream));
    req->handle = (void *)done;
    req->stage_dst = s;
}

/* ---- the table ---- */

static void nccl_allreduce(const vb_comm *c, void *buf, size_t count, vb_dtype t, vb_red_op op, vb_ctx *ctx,
                           vb_request *req) {
    nccl_state *s = state_of(c);
    cudaStream_t st = launch_stream(s, ctx, req, "allreduce");
    NCCLCHECK(ncclAllReduce(buf, buf, count, nccl_type(t), nccl_op(op), s->comm, st));
    launched(s, req);
}

static void nccl_allgather(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx,
                           vb_request *req) {
    nccl_state *s = state_of(c);
    cudaStream_t st = launch_stream(s, ctx, req, "allgather");
    /* in place when send == recv + rank * count, as NCCL defines it */
    NCCLCHECK(ncclAllGather(send, recv, count, nccl_type(t), s->comm, st));
    launched(s, req);
}

static void nccl_reduce_scatter(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t,
                                vb_red_op op, vb_ctx *ctx, vb_request *req) {
    nccl_state *s = state_of(c);
    cudaStream_t st = launch_stream(s, ctx, req, "reduce_scatter");
    NCCLCHECK(ncclReduceScatter(send, recv, count, nccl_type(t), nccl_op(op), s->comm, st));
    launched(s, req);
}

static void nccl_broadcast(const vb_comm *c, void *buf, size_t count, vb_dtype t, int root, vb_ctx *ctx,
                           vb_request *req) {
    nccl_state *s = state_of(c);
    cudaStream_t st = launch_stream(s, ctx, req, "broadcast");
    NCCLCHECK(ncclBroadcast(buf, buf, count, nccl_type(t), root, s->comm, st));
    launched(s, req);
}

/* the request's context waits for its completion on the device */
static void finish(vb_request *req) {
    cudaEvent_t done = (cudaEvent_t)req->handle;
    nccl_state *s = req->stage_dst;
    if (!done || !s) vb_die_internal("NCCL data plane: completing a request that was not launched");
    CUDARTCHECK(cudaStreamWaitEvent(ctx_stream(req->ctx, "wait"), done, 0));
    event_put(s, done);
    req->handle = NULL;
    req->stage_dst = NULL;
}

static bool nccl_test(vb_request *req) {
    cudaError_t e = cudaEventQuery((cudaEvent_t)req->handle);
    if (e == cudaErrorNotReady) return false;
    CUDARTCHECK(e);
    finish(req);
    return true;
}

static void nccl_wait(vb_request *req) { finish(req); }

/* ---- one GPU per rank ---- */

/* NCCL refuses two ranks of one communicator on one GPU: every rank's
 * (host, PCI bus id) to rank 0, which looks for a repeat. Collective. */
static bool nccl_usable(const vb_comm *world, vb_ctx *ctx, char *why, size_t n) {
    enum { KEY = 256 + 5 + 64 + 1 }; /* host, " gpu ", bus id */
    char key[KEY];
    memset(key, 0, sizeof key);
    char host[256], bus[64] = "?";
    vb_hostname(host, sizeof host);
    if (ctx && !ctx->ops->host_memory) CUDARTCHECK(cudaDeviceGetPCIBusId(bus, (int)sizeof bus, ctx->device));
    snprintf(key, sizeof key, "%s gpu %s", host, bus);
    int size = world ? world->size : 1;
    char *all = world && world->rank == 0 ? vb_malloc_check((size_t)size * KEY) : NULL;
    int verdict[2] = {1, -1}; /* distinct?, the first rank sharing a GPU with an earlier one */
    if (world && size > 1) {
        vb_gather_bytes(world, key, KEY, all, 0);
        if (world->rank == 0)
            for (int i = 1; i < size && verdict[0]; i++)
                for (int j = 0; j < i && verdict[0]; j++)
                    if (strncmp(all + (size_t)i * KEY, all + (size_t)j * KEY, KEY) == 0) {
                        verdict[0] = 0;
                        verdict[1] = i;
                        snprintf(why, n, "ranks %d and %d share %s", j, i, all + (size_t)i * KEY);
                    }
        vb_broadcast(world, verdict, sizeof verdict, 0);
        if (!verdict[0] && world->rank != 0) snprintf(why, n, "rank %d shares a GPU with another rank", verdict[1]);
    }
    free(all);
    return verdict[0] != 0;
}

static const vb_comm_data_ops k_nccl_plane = {
    .name = "nccl",
    .needs_ctx_sync = false, /* ordered on the context's stream */
    .host_buffers = false,
    .device_only = true,
    .usable = nccl_usable,
    .attach = nccl_attach,
    .detach = nccl_detach,
    .allreduce = nccl_allreduce,
    .allgather = nccl_allgather,
    .reduce_scatter = nccl_reduce_scatter,
    .broadcast = nccl_broadcast,
    .allgatherv = NULL, /* none in NCCL: the front-end pads */
    .reduce_scatterv = NULL,
    .test = nccl_test,
    .wait = nccl_wait,
};

const vb_comm_data_ops *vb_comm_data_nccl(void) { return &k_nccl_plane; }
