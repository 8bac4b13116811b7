/* from_config.h: what a config makes, without a run: the model's
 * dimensions, a loader of one split, and whether its rank layout fits a
 * world size (which the sweep's preflight asks before it launches anything).
 */
#ifndef VB_FROM_CONFIG_H
#define VB_FROM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config/config.h"
#include "core/data/data.h"
#include "core/model/vit.h"
#include "kernels/ops.h"

/* The model dims a config describes (LayerNorm eps 1e-6, the tutorial's). */
vit_dims vb_config_vit_dims(const vb_config *c);

/* A loader for split directory `dir` with the config's crop, channels, dt,
 * stats, seed and data workers; this rank reads shard dp_rank of dp_size.
 * With a context of a device backend (ctx non-NULL, !host_memory) the batch
 * buffers are its page-locked host memory (ops->alloc_host), and the loader
 * must be destroyed before the context; otherwise plain host memory. */
vb_loader *vb_config_loader(const vb_config *c, const char *dir, int local_batch, int64_t limit, bool shuffle,
                            int dp_rank, int dp_size, vb_ctx *ctx);

/* Whether config `c` can run on `world` ranks: world divisible by tp x cp, a
 * valid parallel_order, num_heads divisible by tp, cp no larger than the
 * token count, the global batch divisible by dp (unless local_batch_size is
 * set). 0, or -1 with the one-line reason in err. Used by run setup and by
 * the sweep's preflight alike. */
int vb_layout_check(const vb_config *c, int world, char *err, size_t n);

#endif
