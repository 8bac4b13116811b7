/* ddp.h: PyTorch-DDP-style gradient averaging in buckets.
 *
 * The model keeps every gradient in one buffer, tensor by tensor in forward
 * (state_dict) order, and backward finishes them in reverse order, calling
 * model->grad_ready(tensor) for each. DDP groups tensors into buckets of at
 * most bucket_cap_mb MiB (1 MiB = 2^20 bytes, as PyTorch) filled in REVERSE
 * tensor order, so the first bucket holds the last tensors -- the ones backward
 * finishes first -- and each bucket is one contiguous slice of the buffer. A
 * tensor bigger than the cap gets a bucket of its own.
 *
 * As soon as every tensor of a bucket is ready its sum-allreduce is started
 * non-blocking on the data plane (vb_data_iallreduce ordered after ctx, the
 * context backward runs on; one handle per bucket), so it overlaps the rest
 * of backward. Buckets are started in bucket order, as PyTorch's reducer
 * does: every rank issues the same collectives in the same order whatever
 * the order its hooks fire in, which MPI (and NCCL) require. Every grad_ready call also tests the buckets in
 * flight so the MPI library progresses during backward. vb_ddp_finish starts
 * any bucket still waiting (a hook that never fired), waits for all, and
 * multiplies the gradients by `scale` (1/dp). Time blocked there is the
 * step's exposed gradient communication.
 *
 * The reduction group is the dp group, or the cp x dp group under context
 * parallelism (weight gradients are partial sums over the cp peers' tokens),
 * with scale 1/dp in both cases.
 */
#ifndef VB_DDP_H
#define VB_DDP_H

#include <stdbool.h>
#include <stddef.h>

#include "core/comm/comm.h"
#include "core/model/vit.h"
#include "core/prof/profile.h"
#include "kernels/ops.h"

typedef struct vb_ddp_bucket {
    int first, last;      /* tensor indices it holds, inclusive, forward order (first <= last) */
    size_t offset, numel; /* its slice of the gradient buffer, in floats */
    int pending;          /* tensors not yet ready in this step */
    bool ready;           /* every tensor ready in this step */
    bool launched;        /* allreduce started in this step */
    vb_request req;       /* its allreduce's handle */
} vb_ddp_bucket;

/* What one step's gradient reduction did. */
typedef struct vb_ddp_stats {
    int allreduce_calls;    /* buckets reduced */
    size_t allreduce_bytes; /* their bytes */
    double wait_s;          /* seconds blocked in vb_wait (vb_ddp_finish) */
} vb_ddp_stats;

typedef struct vb_ddp {
    const vb_comm *comm;   /* reduction group; NULL: bookkeeping only, no communication */
    float *grads;          /* the model's gradient buffer (backend memory) */
    size_t nparams;
    float scale;           /* applied after the reduction (1/dp); 1 skips it */
    vb_ctx *ctx;           /* the backend context backward and scale run on (the allreduces are
                            * ordered after it); NULL: host memory, scale is a host loop */
    vb_profiler *prof;     /* "allreduce_wait" samples; may be NULL */
    struct vb_tlrec *timeline; /* bucket_ready markers and in-flight allreduces; may be NULL */
    size_t cap_bytes;
    int ntensors;
    int nbuckets;
    vb_ddp_bucket *buckets; /* [nbuckets], bucket 0 = the last tensors */
    int *bucket_of;         /* [ntensors] tensor -> bucket */
    unsigned char *tensor_done; /* [ntensors] ready in this step */
    int next_launch;        /* lowest bucket not started yet */
    vb_ddp_stats stats;     /* of the current / last step */
} vb_ddp;

/* MiB -> bytes, as PyTorch (bucket_cap_mb * 1024 * 1024), at least one float. */
size_t vb_ddp_cap_bytes(double cap_mb);

/* The bucket plan alone: fills buckets (room for ntensors) and bucket_of
 * [ntensors]; returns the number of buckets. Tensors must tile
 * [0, nparams) in index order (tensor i+1 starts where tensor i ends); a
 * bucket's slice runs from its first tensor's offset to the next bucket's,
 * so the slices cover the buffer exactly once. */
int vb_ddp_plan(const vit_tensor *tensors, int ntensors, size_t nparams, size_t cap_bytes,
                vb_ddp_bucket *buckets, int *bucket_of);

/* Plans the buckets for this tensor list and gradient buffer. comm may be
 * NULL (no communication; the bookkeeping still runs, for tests). */
void vb_ddp_init(vb_ddp *d, const vit_tensor *tensors, int ntensors, size_t nparams, float *grads,
                 double cap_mb, const vb_comm *comm, float scale, vb_ctx *ctx, vb_profiler *prof);
void vb_ddp_free(vb_ddp *d);

/* Installs vb_ddp_grad_ready as the model's grad_ready hook. */
void vb_ddp_attach(vb_ddp *d, vit_model *m);

/* Resets per-step state and stats; call before backward. */
void vb_ddp_begin_step(vb_ddp *d);

/* The vit_grad_ready_fn: ctx is the vb_ddp. Marks the tensor ready, starts
 * every bucket (in bucket order) whose tensors are all ready, tests the ones
 * in flight. */
void vb_ddp_grad_ready(void *ctx, int tensor_index);

/* Starts any bucket not started yet (in order), waits for all, scales the
 * gradients. Returns the seconds blocked (also in d->stats.wait_s). */
double vb_ddp_finish(vb_ddp *d);

#endif
