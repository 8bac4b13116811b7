/* ddp.c: bucketed, overlapped gradient averaging (ddp.h). */
#include "core/model/ddp.h"

#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"
#include "core/prof/timeline.h"

size_t vb_ddp_cap_bytes(double cap_mb) {
    double b = cap_mb * 1024.0 * 1024.0;
    if (!(b >= (double)sizeof(float))) return sizeof(float);
    if (b > (double)((size_t)1 << 62)) return (size_t)1 << 62;
    return (size_t)b;
}

int vb_ddp_plan(const vit_tensor *tensors, int ntensors, size_t nparams, size_t cap_bytes,
                vb_ddp_bucket *buckets, int *bucket_of) {
    /* slices are cut at tensor starts, so they must tile the buffer */
    size_t expect = 0;
    for (int i = 0; i < ntensors; i++) {
        if (tensors[i].offset != expect || tensors[i].numel == 0)
            vb_die_internal("ddp: tensor %d (%s) at offset %zu with %zu floats does not follow the previous one "
                            "(expected offset %zu)", i, tensors[i].name, tensors[i].offset, tensors[i].numel, expect);
        expect += tensors[i].numel;
    }
    if (expect != nparams)
        vb_die_internal("ddp: tensors hold %zu floats but the gradient buffer has %zu", expect, nparams);

    /* Greedy in reverse order: a tensor joins the open bucket unless that
     * would take it past the cap. A tensor over the cap alone fills a bucket
     * by itself: nothing can join it, and it joins nothing. */
    int nb = 0;
    size_t open_bytes = 0;
    for (int i = ntensors - 1; i >= 0; i--) {
        size_t bytes = tensors[i].numel * sizeof(float);
        if (nb == 0 || open_bytes + bytes > cap_bytes) {
            buckets[nb] = (vb_ddp_bucket){.first = i, .last = i};
            nb++;
            open_bytes = 0;
        }
        vb_ddp_bucket *b = &buckets[nb - 1];
        b->first = i;
        open_bytes += bytes;
        bucket_of[i] = nb - 1;
    }
    for (int k = 0; k < nb; k++) {
        vb_ddp_bucket *b = &buckets[k];
        b->offset = tensors[b->first].offset;
        size_t end = b->last + 1 < ntensors ? tensors[b->last + 1].offset : nparams;
        b->numel = end - b->offset;
    }
    return nb;
}

void vb_ddp_init(vb_ddp *d, const vit_tensor *tensors, int ntensors, size_t nparams, float *grads,
                 double cap_mb, const vb_comm *comm, float scale, vb_ctx *ctx, vb_profiler *prof) {
    memset(d, 0, sizeof *d);
    d->comm = comm;
    d->grads = grads;
    d->nparams = nparams;
    d->scale = scale;
    d->ctx = ctx;
    d->prof = prof;
    d->cap_bytes = vb_ddp_cap_bytes(cap_mb);
    d->ntensors = ntensors;
    size_t n = (size_t)(ntensors > 0 ? ntensors : 1);
    d->buckets = vb_calloc_check(n, sizeof *d->buckets);
    d->bucket_of = vb_calloc_check(n, sizeof *d->bucket_of);
    d->tensor_done = vb_calloc_check(n, 1);
    d->nbuckets = vb_ddp_plan(tensors, ntensors, nparams, d->cap_bytes, d->buckets, d->bucket_of);
    vb_ddp_begin_step(d);
}

void vb_ddp_free(vb_ddp *d) {
    if (!d) return;
    /* never leave MPI writing into a buffer the caller is about to free */
    for (int k = 0; k < d->nbuckets; k++) vb_wait(&d->buckets[k].req);
    free(d->buckets);
    free(d->bucket_of);
    free(d->tensor_done);
    memset(d, 0, sizeof *d);
}

void vb_ddp_attach(vb_ddp *d, vit_model *m) {
    m->grad_ready = vb_ddp_grad_ready;
    m->grad_ready_ctx = d;
}

void vb_ddp_begin_step(vb_ddp *d) {
    for (int k = 0; k < d->nbuckets; k++) {
        vb_ddp_bucket *b = &d->buckets[k];
        if (b->req.active) vb_die_internal("ddp: bucket %d still in flight at the start of a step", k);
        b->pending = b->last - b->first + 1;
        b->ready = false;
        b->launched = false;
    }
    memset(d->tensor_done, 0, (size_t)(d->ntensors > 0 ? d->ntensors : 1));
    d->next_launch = 0;
    memset(&d->stats, 0, sizeof d->stats);
}

static void launch(vb_ddp *d, vb_ddp_bucket *b) {
    b->launched = true;
    d->stats.allreduce_calls++;
    d->stats.allreduce_bytes += b->numel * sizeof(float);
    /* ordered after the backward work that produced the bucket's gradients
     * (d->ctx); a handle per bucket, completed by vb_test / vb_wait */
    if (d->comm)
        vb_data_iallreduce(d->comm, d->grads + b->offset, b->numel, VB_DTYPE_F32, VB_RED_SUM, d->ctx, &b->req);
}

/* start every ready bucket from next_launch on, stopping at the first that is not */
static void launch_ready(vb_ddp *d) {
    while (d->next_launch < d->nbuckets && d->buckets[d->next_launch].ready)
        launch(d, &d->buckets[d->next_launch++]);
}

void vb_ddp_grad_ready(void *ctx, int tensor_index) {
    vb_ddp *d = ctx;
    if (tensor_index < 0 || tensor_index >= d->ntensors)
        vb_die_internal("ddp: grad_ready for tensor %d of %d", tensor_index, d->ntensors);
    if (d->tensor_done[tensor_index])
        vb_die_internal("ddp: grad_ready called twice for tensor %d in one step", tensor_index);
    d->tensor_done[tensor_index] = 1;
    vb_ddp_bucket *b = &d->buckets[d->bucket_of[tensor_index]];
    if (--b->pending == 0) {
        b->ready = true;
        if (d->timeline)
            vb_tlrec_add(d->timeline, VB_TL_COMM, VB_TLK_MARKER, "bucket_ready", vb_now(), 0, 0, 0,
                         (int)(b - d->buckets));
        launch_ready(d);
    }
    /* poke the library: without a call into MPI an in-flight allreduce makes
     * no progress while backward computes (no progress thread by default) */
    for (int k = 0; k < d->next_launch; k++)
        if (d->buckets[k].req.active) vb_test(&d->buckets[k].req);
}

static void scale_grads(vb_ddp *d) {
    if (d->scale == 1.0f) return;
    if (d->ctx)
        d->ctx->ops->scale(d->ctx, d->grads, d->scale, d->nparams);
    else
        for (size_t i = 0; i < d->nparams; i++) d->grads[i] *= d->scale;
}

/* Timeline: each bucket's allreduce on the comm lane, from its post to the
 * test or wait that saw it complete (the CPU's stand-in for a NCCL stream). */
static void record_in_flight(const vb_ddp *d) {
    if (!d->timeline || !d->comm || d->comm->size <= 1) return;
    const char *name = strcmp(d->comm->group, "cpdp") == 0 ? "allreduce_cpdp"
                       : strcmp(d->comm->group, "cp") == 0 ? "allreduce_cp"
                                                           : "allreduce_dp";
    for (int k = 0; k < d->nbuckets; k++) {
        const vb_ddp_bucket *b = &d->buckets[k];
        if (!b->launched) continue;
        vb_tlrec_add(d->timeline, VB_TL_COMM, VB_TLK_COMM, name, b->req.t_start, b->req.t_end - b->req.t_start,
                     (double)b->numel * sizeof(float), 0, k);
    }
}

double vb_ddp_finish(vb_ddp *d) {
    /* a bucket whose hook never fired still has to be reduced, and in the same
     * order on every rank: mark the rest ready and start them in order */
    for (int k = d->next_launch; k < d->nbuckets; k++) d->buckets[k].ready = true;
    launch_ready(d);
    vb_prof_token tok = vb_prof_begin(d->prof, VB_OP_ID(d->prof, "allreduce_wait", VB_CAT_COMM));
    double waited = 0;
    for (int k = 0; k < d->nbuckets; k++) waited += vb_wait(&d->buckets[k].req);
    vb_prof_end(d->prof, tok, 0);
    d->stats.wait_s = waited;
    record_in_flight(d);
    scale_grads(d);
    return waited;
}
