/* memcheck.h: what a run will need in memory, checked before it is taken.
 *
 * A run that cannot fit must not start: a model larger than the machine is
 * otherwise killed by the OOM killer minutes later with no message, or fails
 * as an "internal error" inside an allocation. Before allocating the model,
 * run setup estimates one rank's bytes: parameters, gradients, Adam's two
 * moments, activations (exact: vit_footprint_of), the loader's batch buffers
 * and the backend's batch copies, benchy's per-iteration records and the
 * profiler's samples, the timeline window. Libraries and the process itself
 * are not counted. The limit is the memory available to this node's ranks:
 * MemAvailable, or the cgroup's limit less its usage when that is smaller
 * (a GPU backend will compare with free device memory). Estimate x ranks on
 * the node over the limit exits 2 with one line: the estimate, the limit and
 * the largest local batch that would fit.
 *
 * Where the model's buffers live is the backend's property (ops->host_memory):
 * host memory (the CPU) counts them here; device memory does not, and only
 * the host side (loader buffers, records) is checked against the host.
 */
#ifndef VB_MEMCHECK_H
#define VB_MEMCHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config/config.h"
#include "core/model/vit.h"

typedef struct vb_mem_estimate {
    /* bytes for one rank */
    double params, grads, optimizer, activations, data, records;
    double total;         /* what counts against the host's memory */
    double device;        /* the model's bytes in device memory (0 when the backend's memory is the host's) */
    double per_sample;    /* the part of total that grows with each sample of the local batch */
    int local_batch;
} vb_mem_estimate;

/* The estimate for config c (benchy b when `benchy`, else the train loop)
 * with this rank's model dims and layout, local batch and loader epoch
 * length; world = ranks in the run (rank 0 keeps every rank's records).
 * ctx: the backend context the model will be created on (its activation
 * dtype, attention workspace and kind of memory). */
void vb_mem_estimate_run(const vb_config *c, const vb_benchy_config *b, bool benchy, bool train, const vit_dims *d,
                         const vit_parallel *par, int local_batch, int steps_per_epoch, int world, vb_ctx *ctx,
                         vb_mem_estimate *e);

/* Bytes this process may still take, and where the figure comes from
 * ("MemAvailable" or "cgroup memory.max"); 0 when unknown. */
double vb_mem_available(char *source, size_t n);

/* Exits 2 when node_ranks x e->total exceeds `limit` (0 = unknown: no check). */
void vb_mem_check(const vb_mem_estimate *e, int node_ranks, double limit, const char *limit_source);

/* The address-space limit (ulimit -v, RLIMIT_AS) counts every mapping of the
 * process, libraries and reservations included, and what fails under it
 * fails inside a library: MPI's runtime printed a screen of PMIx errors,
 * OpenBLAS retried its buffer forever. So a run checks first.
 * What a run's runtime maps before the model: MPI's (a singleton's
 * MPI_Init maps about 220 MiB; threads' stacks and arenas come on top). */
#define VB_MPI_START_BYTES ((double)(320u << 20))
/* Bytes of address space left under RLIMIT_AS (the limit less this
 * process's mappings); -1 when there is no limit. limit: the limit, bytes. */
double vb_address_space_left(double *limit);
/* Exits 1 with one line when less than `need` bytes of address space are
 * left under ulimit -v: `what` names what needs them. */
void vb_address_space_check(double need, const char *what);

#endif
