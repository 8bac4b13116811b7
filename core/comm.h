/* comm.h: the communicator layer (MPI now, NCCL later behind the same calls).
 *
 * vb_world_init() calls MPI_Init_thread (also works as a singleton without
 * mpirun) and sets MPI_ERRORS_RETURN so VB_MPI reports failures. A vb_comm is
 * one process group (the world, or a tp / cp / dp group from
 * vb_comm_from_ranks); collectives are blocking or, for DDP buckets,
 * non-blocking. Every collective is timed into the profiler as
 * category comm with its byte count.
 */
#ifndef VB_COMM_H
#define VB_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include "core/profile.h"

typedef struct vb_comm {
    int rank, size;
    void *handle;          /* MPI_Comm* */
    vb_profiler *prof;     /* may be NULL */
    char group[8];         /* "tp", "cp", "dp", "cpdp" or "" (world): suffix of its ops' names */
} vb_comm;

/* Initialises MPI; fills `world`. Idempotent. */
void vb_world_init(int *argc, char ***argv, vb_comm *world);
void vb_world_finalize(void);
/* Ranks of `world` on this rank's node (shared memory). Collective. */
int vb_node_local_size(const vb_comm *world);
/* Hostname of this rank (for run.json). */
void vb_hostname(char *buf, size_t n);
/* MPI library version string. */
void vb_mpi_version(char *buf, size_t n);

void vb_barrier(const vb_comm *c);
void vb_allreduce_sum_f32(const vb_comm *c, float *buf, size_t n);   /* in place */
void vb_allreduce_sum_f64(const vb_comm *c, double *buf, size_t n);  /* in place */
void vb_allreduce_max_f64(const vb_comm *c, double *buf, size_t n);
void vb_broadcast(const vb_comm *c, void *buf, size_t bytes, int root);
/* ---- process groups ----
 * Collective over `parent`: every rank passes its own group's member list
 * (world ranks, increasing group-local rank, e.g. from vb_layout_group) and
 * gets a communicator whose rank order follows that list. Size-1 groups need
 * no MPI traffic (every collective on them is a local copy / no-op). */
void vb_comm_from_ranks(const vb_comm *parent, const int *ranks, int n, vb_comm *out);
void vb_comm_free(vb_comm *c);

/* recv = concatenation over ranks r of r's `counts[r]` floats (displacements
 * are the prefix sums of counts). Uneven counts allowed. */
void vb_allgatherv_f32(const vb_comm *c, const float *send, float *recv, const int *counts);
/* send = concatenation over ranks r of counts[r] floats (rank-major); recv
 * (counts[rank] floats) = elementwise sum over ranks of their r-th block. */
void vb_reduce_scatterv_sum_f32(const vb_comm *c, const float *send, float *recv, const int *counts);

/* Non-blocking in-place sum-allreduce (DDP buckets). vb_wait returns the
 * seconds spent blocked in it (exposed communication). vb_test drives progress
 * and returns true once complete. */
typedef struct vb_request {
    void *mpi;          /* MPI_Request storage */
    double t_start;
    double t_end;       /* when vb_test or vb_wait saw it complete */
    size_t bytes;
    int active;
} vb_request;
void vb_iallreduce_sum_f32(const vb_comm *c, float *buf, size_t n, vb_request *req);
bool vb_test(vb_request *req);
double vb_wait(vb_request *req);

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

/* Process-wide running totals of the time this process spent blocked in
 * communication: every blocking collective above plus vb_wait. The harness
 * takes the difference around a training step to report its exposed
 * communication (tp/cp collectives inside the model included) without the
 * model having to report anything. */
typedef struct vb_comm_totals {
    double blocking_s;   /* seconds inside blocking collectives and vb_wait */
    long long calls;     /* collectives started, blocking or not */
    double bytes;        /* their byte counts, as recorded in ops.csv */
} vb_comm_totals;
void vb_comm_totals_get(vb_comm_totals *out);

/* Rank 0 decided the process must exit with `code` after printing one line:
 * every rank exits with the same code, no hang. */
void vb_abort_all(const vb_comm *c, int code) __attribute__((noreturn));

#endif
