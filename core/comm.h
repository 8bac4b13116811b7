/* comm.h: the communicator layer (MPI now, NCCL later behind the same calls).
 *
 * vb_world_init() calls MPI_Init_thread (also works as a singleton without
 * mpirun) and sets MPI_ERRORS_RETURN so VB_MPI reports failures. A vb_comm is
 * one process group; the distributed issue adds tp/cp/dp groups and
 * non-blocking collectives. Every collective is timed into the profiler as
 * category comm with its byte count.
 */
#ifndef VB_COMM_H
#define VB_COMM_H

#include <stddef.h>
#include "core/profile.h"

typedef struct vb_comm {
    int rank, size;
    void *handle;          /* MPI_Comm* */
    vb_profiler *prof;     /* may be NULL */
} vb_comm;

/* Initialises MPI; fills `world`. Idempotent. */
void vb_world_init(int *argc, char ***argv, vb_comm *world);
void vb_world_finalize(void);
/* Hostname of this rank (for run.json). */
void vb_hostname(char *buf, size_t n);
/* MPI library version string. */
void vb_mpi_version(char *buf, size_t n);

void vb_barrier(const vb_comm *c);
void vb_allreduce_sum_f32(const vb_comm *c, float *buf, size_t n);   /* in place */
void vb_allreduce_sum_f64(const vb_comm *c, double *buf, size_t n);  /* in place */
void vb_allreduce_max_f64(const vb_comm *c, double *buf, size_t n);
void vb_broadcast(const vb_comm *c, void *buf, size_t bytes, int root);
/* Rank 0 decided the process must exit with `code` after printing one line:
 * every rank exits with the same code, no hang. */
void vb_abort_all(const vb_comm *c, int code) __attribute__((noreturn));

#endif
