/* comm.h: the communicator layer, in two planes.
 *
 * CONTROL PLANE (comm.c, MPI always): the world (vb_world_init calls
 * MPI_Init_thread, also as a singleton without mpirun, and sets
 * MPI_ERRORS_RETURN so VB_MPI reports failures), process groups
 * (vb_comm_from_ranks), the barrier, small host-side agreement (broadcast of
 * host bytes, float64 sums and maxima, gathers of per-rank results to rank 0)
 * and the job-wide abort. These move host memory only and never involve a
 * backend context.
 *
 * DATA PLANE (comm_data.c): the collectives that move tensors -- allreduce,
 * allgather, reduce-scatter, broadcast -- blocking, or non-blocking with a
 * handle (vb_request) completed by vb_test / vb_wait, for any vb_dtype, and
 * ORDERED AFTER A CONTEXT: each call takes the vb_ctx whose queue produces
 * (and later consumes) the buffers, NULL for plain host memory. Every
 * communicator carries a table of function pointers (vb_comm_data_ops) that
 * implements them: MPI now (comm_mpi.c, vb_comm_data_mpi), which first
 * synchronizes the context so the buffers' producers have finished; an NCCL
 * table would enqueue on the context's stream instead. The front-end
 * functions below (vb_data_*) add what every plane shares: size-1 groups
 * never reach the plane (a no-op or a local copy, so tp=1 / cp=1 / dp=1
 * layouts cost nothing), argument checks, profiling and the totals.
 *
 * Even and uneven. The table's allgather and reduce-scatter are EVEN (the
 * same count on every rank), which is what NCCL offers. Uneven (v) forms are
 * built on them by padding every rank's shard to the largest one
 * (vb_data_allgatherv_padded / vb_data_reduce_scatterv_padded, through a
 * staging buffer); a plane may also offer native uneven forms (MPI's
 * Allgatherv / Reduce_scatter), which vb_data_allgatherv /
 * vb_data_reduce_scatterv prefer when present.
 *
 * Precision. float32 is summed as is. bfloat16 and float16 travel as their
 * 16-bit patterns where nothing is computed (allgather, broadcast); MPI has
 * no arithmetic for them, so the MPI plane reduces them through float32 (each
 * rank's values widened exactly, the result rounded once, to nearest even).
 *
 * Profiling. Every collective is timed into the communicator's profiler as
 * category comm with its byte count, named "<op>_<group>" when the
 * communicator names its group (allreduce_tp, allgather_cp, iallreduce_dp) so
 * ops.csv and the timeline tell tensor-, context- and data-parallel traffic
 * apart. Byte counts follow nccl-tests' "size" convention (the whole logical
 * buffer: count elements for an allreduce or broadcast, the full gathered
 * vector for an allgather, the full input vector for a reduce-scatter), so
 * bandwidths computed from ops.csv compare with the usual collective
 * benchmarks. A non-blocking call's profiled time is its launch only; the
 * time the step waits for it is vb_wait's.
 *
 * Threads: the training thread only (MPI_THREAD_FUNNELED).
 */
#ifndef VB_COMM_H
#define VB_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include "core/prof/profile.h"
#include "kernels/ops.h"

struct vb_comm_data_ops;

typedef struct vb_comm {
    int rank, size;
    void *handle;          /* MPI_Comm* (control plane) */
    vb_profiler *prof;     /* may be NULL */
    char group[8];         /* "tp", "cp", "dp", "cpdp" or "" (world): suffix of its ops' names */
    const struct vb_comm_data_ops *data; /* data plane; NULL means MPI */
    void *data_impl;       /* the data plane's own per-communicator state (MPI: none) */
} vb_comm;

/* ======================= control plane ======================= */

/* Initialises MPI; fills `world` (data plane MPI). Idempotent. */
void vb_world_init(int *argc, char ***argv, vb_comm *world);
void vb_world_finalize(void);
/* Ranks of `world` on this rank's node (shared memory). Collective. */
int vb_node_local_size(const vb_comm *world);
/* This rank's index among the ranks of its node: its rank in the node's
 * shared-memory communicator (MPI_Comm_split_type SHARED) when the world has
 * more than one rank, whatever the environment says; a process alone in its
 * world (or with world NULL) takes the launcher's word
 * (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID, the first set
 * to a number), else 0. A rank picks its GPU as this modulo the GPUs it sees,
 * so srun --gpus-per-task (one visible GPU each) and a plain mpirun on a node
 * of 4 GPUs both bind one GPU per rank. Collective over a world of two or
 * more ranks. */
int vb_node_local_rank(const vb_comm *world);
/* Hostname of this rank (for run.json). */
void vb_hostname(char *buf, size_t n);
/* MPI library version string. */
void vb_mpi_version(char *buf, size_t n);

void vb_barrier(const vb_comm *c);
/* Host-side agreement on small float64 vectors (losses, metrics, checks), in place. */
void vb_allreduce_sum_f64(const vb_comm *c, double *buf, size_t n);
void vb_allreduce_max_f64(const vb_comm *c, double *buf, size_t n);
/* Root's `bytes` host bytes to every rank (config agreement, run directory
 * names, initial parameters held in host memory). */
void vb_broadcast(const vb_comm *c, void *buf, size_t bytes, int root);

/* ---- process groups ----
 * Collective over `parent`: every rank passes its own group's member list
 * (world ranks, increasing group-local rank, e.g. from vb_layout_group) and
 * gets a communicator whose rank order follows that list, on the parent's
 * data plane. Size-1 groups need no MPI traffic (every collective on them is
 * a local copy / no-op). */
void vb_comm_from_ranks(const vb_comm *parent, const int *ranks, int n, vb_comm *out);
void vb_comm_free(vb_comm *c);

/* Root receives the concatenation over ranks of every rank's `bytes` bytes
 * (recv is only touched on root). Per-rank results -- each trial's timings,
 * host names -- travel to rank 0 this way so one process writes the files. */
void vb_gather_bytes(const vb_comm *c, const void *send, size_t bytes, void *recv, int root);
/* Variable-size gather: each rank sends its own `bytes` bytes (counts may
 * differ, zero included). Root returns a malloc'd buffer holding every rank's
 * bytes concatenated in rank order followed by one '\0' byte (so gathered text
 * is a C string), and its length without the '\0' in *total when total is not
 * NULL; other ranks return NULL. Collective: every rank of c must call it.
 * Per-rank text of unknown length -- each rank's ops.csv rows -- reaches rank
 * 0 this way. */
char *vb_gatherv_bytes(const vb_comm *c, const void *send, size_t bytes, int root, size_t *total);

/* Rank 0 decided the process must exit with `code` after printing one line:
 * every rank exits with the same code, no hang. */
void vb_abort_all(const vb_comm *c, int code) __attribute__((noreturn));

/* Process-wide running totals of the time this process spent blocked in
 * communication: every blocking collective of both planes plus vb_wait. The
 * harness takes the difference around a training step to report its exposed
 * communication (tp/cp collectives inside the model included) without the
 * model having to report anything. */
typedef struct vb_comm_totals {
    double blocking_s;   /* seconds inside blocking collectives and vb_wait */
    long long calls;     /* collectives started, blocking or not */
    double bytes;        /* their byte counts, as recorded in ops.csv */
} vb_comm_totals;
void vb_comm_totals_get(vb_comm_totals *out);
/* Frees what the data plane keeps for ctx (host staging buffers, events),
 * after adding its pending event-timed spans to the totals. Call before
 * destroying a context that collectives ran on; none may be in flight. */
void vb_comm_ctx_release(vb_ctx *ctx);

/* ======================= data plane ======================= */

typedef enum vb_red_op { VB_RED_SUM = 0, VB_RED_MAX = 1 } vb_red_op;

/* A collective in flight. Zero-initialise before first use; a completed
 * request may be reused. The front-end fills the first group of fields, the
 * plane the second. */
typedef struct vb_request {
    const struct vb_comm_data_ops *plane; /* the plane that completes it */
    vb_ctx *ctx;        /* the context it was ordered after (and vb_wait orders work after) */
    double t_start;     /* vb_now() at the launch */
    double t_end;       /* when vb_test or vb_wait saw it complete */
    size_t bytes;       /* as profiled */
    int active;
    /* the plane's own */
    void *handle;       /* MPI: the MPI_Request, stored in the pointer's bytes */
    void *stage;        /* MPI: float32 staging of a 16-bit reduction, freed on completion */
    void *stage_dst;    /* where the staged result goes */
    size_t stage_count;
    int stage_dtype;
    /* the front-end's host staging of device buffers (a host-only plane) */
    int host_staged;    /* 1 while a staged result waits to go back to the device */
    int host_slot;      /* its staging buffer */
    const void *host_result;
    void *dev_result;
    size_t result_bytes;
} vb_request;

/* The data plane of a communicator. Every collective gets a communicator of
 * size > 1 (the front-end handles size 1), `count` ELEMENTS of `t` per rank
 * (allgather: sent by each rank; reduce-scatter: received by each rank), and
 * ctx (NULL: host memory, nothing to order after). req NULL: blocking -- when
 * it returns, the result is ready for host code (ctx NULL) or for work
 * enqueued on ctx afterwards. req non-NULL: started, the plane fills req's
 * plane fields; test / wait complete it. Errors end the process with one
 * line naming the rank (VB_MPI). */
typedef struct vb_comm_data_ops {
    const char *name; /* "mpi", "nccl" */
    /* true: the plane works on buffers once ctx's queued work has finished, so
     * the front-end synchronizes ctx before each call (MPI); false: the plane
     * orders itself after ctx (NCCL: on ctx's stream) */
    bool needs_ctx_sync;
    /* true: the plane reads and writes host memory only (MPI built without
     * CUDA awareness): the front-end stages a device-memory context's
     * buffers through page-locked host buffers (comm_device.c) */
    bool host_buffers;
    /* true: device memory only (NCCL): a host-memory call (ctx NULL or a
     * host-memory context) on such a communicator runs on MPI instead */
    bool device_only;
    /* may be NULL (always usable): whether the plane can run the world's
     * ranks with these contexts (NCCL: one GPU per rank); false with a reason
     * in why. Collective over world; every rank gets the same answer. */
    bool (*usable)(const vb_comm *world, vb_ctx *ctx, char *why, size_t n);
    /* per-communicator setup once the control plane has made c (NCCL: a
     * unique id broadcast over the control plane, then the init), for
     * communicators of more than one rank; may be NULL. Collective over c.
     * detach undoes it (vb_comm_free). */
    void (*attach)(vb_comm *c);
    void (*detach)(vb_comm *c);
    /* in place */
    void (*allreduce)(const vb_comm *c, void *buf, size_t count, vb_dtype t, vb_red_op op, vb_ctx *ctx,
                      vb_request *req);
    /* recv[size * count] = every rank's send[count], rank-major; in place when
     * send == recv + rank * count */
    void (*allgather)(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx,
                      vb_request *req);
    /* recv[count] = op over ranks of their send block `rank`
     * (send[size * count], rank-major); in place when recv == send + rank * count */
    void (*reduce_scatter)(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_red_op op,
                           vb_ctx *ctx, vb_request *req);
    /* root's buf[count] to every rank */
    void (*broadcast)(const vb_comm *c, void *buf, size_t count, vb_dtype t, int root, vb_ctx *ctx,
                      vb_request *req);
    /* Optional native uneven forms, blocking (NULL: not offered; NCCL has
     * none). counts[size] elements per rank, displacements their prefix sums;
     * allgatherv is in place when send == recv + displ[rank]. */
    void (*allgatherv)(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t, vb_ctx *ctx);
    void (*reduce_scatterv)(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                            vb_red_op op, vb_ctx *ctx);
    /* true once req's collective has completed (then finishes it: staged
     * results copied out); never blocks */
    bool (*test)(vb_request *req);
    /* blocks until req's collective has completed and finishes it */
    void (*wait)(vb_request *req);
} vb_comm_data_ops;

/* The MPI data plane (every communicator's default). */
const vb_comm_data_ops *vb_comm_data_mpi(void);
/* The NCCL data plane (core/comm/comm_nccl.c): collectives enqueued on a CUDA
 * context's stream over device memory. NULL when this build has no NCCL. */
const vb_comm_data_ops *vb_comm_data_nccl(void);
/* "mpi" or "nccl"; NULL for an unknown name or a plane this build lacks. */
const vb_comm_data_ops *vb_comm_data_by_name(const char *name);
/* A stand-in communicator of `size` members (at most 64) in which this
 * process is `rank` and nobody else exists (comm_shard.c): one process runs
 * one rank's share of a tp / cp layout to time its shapes (bench_step
 * --shard_tp / --shard_cp). Its data plane moves nothing between processes:
 * allreduce and broadcast keep the buffer, allgather(v) fills every block
 * with this rank's, reduce-scatter(v) keeps this rank's block. Only the
 * data plane may be used on it: no control-plane call (barrier, host
 * reductions, gathers) and no vb_comm_free. Its ops are profiled as
 * "<op>_<group>" like any communicator's. */
void vb_comm_shard(vb_comm *out, int size, int rank, const char *group, vb_profiler *prof);

/* Switches c to another plane: detaches the old one, attaches the new one.
 * Collective over c. */
void vb_comm_set_data_plane(vb_comm *c, const vb_comm_data_ops *plane);
/* c's plane (MPI when c or c->data is NULL). */
const vb_comm_data_ops *vb_comm_data_plane(const vb_comm *c);

/* ---- collectives (front-end). NULL c means the world. ---- */
void vb_data_allreduce(const vb_comm *c, void *buf, size_t count, vb_dtype t, vb_red_op op, vb_ctx *ctx);
void vb_data_iallreduce(const vb_comm *c, void *buf, size_t count, vb_dtype t, vb_red_op op, vb_ctx *ctx,
                        vb_request *req);
/* even: `count` elements from every rank; see vb_comm_data_ops.allgather */
void vb_data_allgather(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx);
void vb_data_iallgather(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx,
                        vb_request *req);
/* even: `count` elements to every rank; see vb_comm_data_ops.reduce_scatter */
void vb_data_reduce_scatter(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t, vb_red_op op,
                            vb_ctx *ctx);
void vb_data_ireduce_scatter(const vb_comm *c, const void *send, void *recv, size_t count, vb_dtype t,
                             vb_red_op op, vb_ctx *ctx, vb_request *req);
void vb_data_broadcast(const vb_comm *c, void *buf, size_t count, vb_dtype t, int root, vb_ctx *ctx);
void vb_data_ibroadcast(const vb_comm *c, void *buf, size_t count, vb_dtype t, int root, vb_ctx *ctx,
                        vb_request *req);

/* true once req has completed (drives the library's progress); an inactive
 * request is complete */
bool vb_test(vb_request *req);
/* Completes req: the result is then ready for the host (ctx NULL) or for work
 * enqueued on the request's ctx. Returns the seconds spent blocked in it
 * (exposed communication); 0 for an inactive request. Requests may be waited
 * in any order. */
double vb_wait(vb_request *req);

/* ---- uneven collectives ----
 * counts[r] elements from (allgatherv) or for (reduce_scatterv) rank r, for
 * every rank of c; the rank-major buffer holds rank r's block at the prefix
 * sum of counts before r. Profiled as "allgather" / "reduce_scatter" with the
 * total of counts.
 *
 * vb_data_allgatherv / vb_data_reduce_scatterv take the plane's native
 * uneven form where it has one, else the padded form with the internal host
 * staging buffer (ctx NULL or host memory). */
void vb_data_allgatherv(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                        vb_ctx *ctx);
void vb_data_reduce_scatterv(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                             vb_red_op op, vb_ctx *ctx);
/* Padded forms, on any plane: each rank's block is copied into a slot of
 * max(counts) elements of `staging`, one EVEN collective runs over the slots,
 * and the wanted elements are copied out (on ctx with memcpy_d2d, or memcpy
 * when ctx is NULL). staging: at least vb_data_padded_count(c, counts)
 * elements of t in the same memory as send and recv; NULL uses an internal
 * host buffer (ctx NULL or a host-memory backend only). Padding elements are
 * reduced too and never read. */
size_t vb_data_padded_count(const vb_comm *c, const int *counts); /* (size + 1) * max(counts) */
void vb_data_allgatherv_padded(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                               vb_ctx *ctx, void *staging);
void vb_data_reduce_scatterv_padded(const vb_comm *c, const void *send, void *recv, const int *counts, vb_dtype t,
                                    vb_red_op op, vb_ctx *ctx, void *staging);

/* ---- float32 conveniences over the data plane (host memory, sums) ----
 * What the model and DDP call today; each is the vb_data_* call with
 * t = float32, op = sum, ctx = NULL. */
void vb_allreduce_sum_f32(const vb_comm *c, float *buf, size_t n); /* in place */
/* recv = concatenation over ranks r of r's `counts[r]` floats (displacements
 * are the prefix sums of counts). Uneven counts allowed; in place when send
 * already sits at its displacement in recv. */
void vb_allgatherv_f32(const vb_comm *c, const float *send, float *recv, const int *counts);
/* send = concatenation over ranks r of counts[r] floats (rank-major); recv
 * (counts[rank] floats) = elementwise sum over ranks of their r-th block. */
void vb_reduce_scatterv_sum_f32(const vb_comm *c, const float *send, float *recv, const int *counts);
/* Non-blocking in-place sum-allreduce (DDP buckets). */
void vb_iallreduce_sum_f32(const vb_comm *c, float *buf, size_t n, vb_request *req);

#endif
