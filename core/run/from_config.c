/* from_config.c: what a config makes, without a run (from_config.h). */
#include "core/run/from_config.h"

#include <stdio.h>
#include <string.h>

#include "core/comm/groups.h"
#include "core/util/common.h"

vit_dims vb_config_vit_dims(const vb_config *c) {
    return (vit_dims){
        .img_h = c->img_size[0],
        .img_w = c->img_size[1],
        .patch = c->patch_size,
        .cin = c->n_in_channels,
        .cout = c->n_out_channels,
        .dim = c->embed_dim,
        .depth = c->depth,
        .heads = c->num_heads,
        .ln_eps = 1e-6f,
    };
}

static void *pinned_alloc(void *arg, size_t bytes) {
    vb_ctx *ctx = arg;
    return ctx->ops->alloc_host(ctx, bytes);
}

static void pinned_free(void *arg, void *p) {
    vb_ctx *ctx = arg;
    ctx->ops->free_host(ctx, p);
}

vb_loader *vb_config_loader(const vb_config *c, const char *dir, int local_batch, int64_t limit, bool shuffle,
                            int dp_rank, int dp_size, vb_ctx *ctx) {
    vb_loader_opts o = {
        .data_dir = dir,
        .means_path = c->global_means_path,
        .stds_path = c->global_stds_path,
        .img_h = c->img_size[0],
        .img_w = c->img_size[1],
        .n_in_channels = c->n_in_channels,
        .n_out_channels = c->n_out_channels,
        .dt = c->dt,
        .local_batch = local_batch,
        .limit_nsamples = limit,
        .shuffle = shuffle,
        .seed = c->seed,
        .num_workers = c->num_data_workers,
        .pread = strcmp(c->data_read, "pread") == 0,
        .raw = c->normalize_on_device,
        .dp_rank = dp_rank,
        .dp_size = dp_size,
    };
    /* a device backend copies every batch to the device: page-locked buffers
     * make that copy run at the bus's speed (and asynchronous under dali);
     * on the CPU alloc_host is plain memory, so nothing changes there */
    if (ctx && !ctx->ops->host_memory) {
        o.host_alloc = pinned_alloc;
        o.host_free = pinned_free;
        o.host_alloc_arg = ctx;
    }
    return vb_loader_create(&o);
}

int vb_layout_check(const vb_config *c, int world, char *err, size_t n) {
    const long long tpcp = (long long)c->tensor_parallel * c->context_parallel;
    if (world % tpcp != 0) {
        snprintf(err, n,
                 "world size %d is not divisible by tensor_parallel %d x context_parallel %d = %lld: start a "
                 "multiple of %lld ranks or change --tensor_parallel / --context_parallel",
                 world, c->tensor_parallel, c->context_parallel, tpcp, tpcp);
        return -1;
    }
    vb_layout l;
    if (vb_layout_init(&l, world, c->tensor_parallel, c->context_parallel, c->parallel_order, err, n) != 0) return -1;
    if (c->num_heads % c->tensor_parallel != 0) {
        snprintf(err, n,
                 "num_heads %d is not divisible by tensor_parallel %d (--tensor_parallel splits the attention "
                 "heads; use a divisor of %d)",
                 c->num_heads, c->tensor_parallel, c->num_heads);
        return -1;
    }
    int ntok = vb_config_tokens(c);
    if (c->context_parallel > ntok) {
        snprintf(err, n,
                 "context_parallel %d is larger than the %d tokens per sample (img_size %dx%d / patch_size %d): "
                 "each cp rank needs at least one token",
                 c->context_parallel, ntok, c->img_size[0], c->img_size[1], c->patch_size);
        return -1;
    }
    /* the tutorial's batch rule: --local_batch_size fixes the global batch
     * as local x dp; otherwise the global batch must split evenly */
    if (c->local_batch_size <= 0 && c->global_batch_size % l.dp != 0) {
        snprintf(err, n,
                 "global_batch_size %d is not divisible by the %d data-parallel ranks (%d ranks / "
                 "(tensor_parallel %d x context_parallel %d)); set --global_batch_size to a multiple of %d "
                 "or give --local_batch_size",
                 c->global_batch_size, l.dp, world, c->tensor_parallel, c->context_parallel, l.dp);
        return -1;
    }
    return 0;
}
