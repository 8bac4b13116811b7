/* fp8_recipe.h: the per-tensor state of FP8 training with Transformer
 * Engine's delayed scaling (DelayedScaling, Format.HYBRID), the part that
 * lives with the model; the numerics are kernels/fp8.h's, the GEMMs the
 * backend's fp8_matmul_forward / fp8_matmul_backward.
 *
 * Every GEMM g of the model has three scaled tensors: its input activation
 * and its weight (E4M3, forward) and the gradient of its output (E5M2,
 * backward). Each has a scale (1 at the start) and an amax history of
 * amax_history_len steps, row 0 the current step's. A step quantises with
 * the scales computed before it and records each tensor's amax into row 0;
 * vit_fp8_step_end then takes the max of row 0 over the ranks given to
 * vit_fp8_set_agree (TE's amax reduction: every rank ends with the scales
 * of the whole tensor, as one rank running the whole batch and model would
 * have), derives the next scales from the history (its max, or its newest
 * entry under most_recent) and rolls it by one row, as TE's roll of
 * amax_history does. State and history are backend memory, updated by ops
 * on the context, at the same addresses every step: the host never reads
 * them during training, and a captured step replays as it is.
 */
#ifndef VB_FP8_RECIPE_H
#define VB_FP8_RECIPE_H

#include <stddef.h>

#include "kernels/ops.h"

struct vb_comm;

/* DelayedScaling's knobs, with TE's defaults */
typedef struct vit_fp8_recipe {
    int amax_history_len;          /* 1024 */
    vb_fp8_amax_algo amax_compute_algo; /* max */
    int margin;                    /* 0: sf = fp8_max / amax / 2^margin */
} vit_fp8_recipe;

typedef struct vit_fp8 {
    vit_fp8_recipe recipe;
    const vb_ops *ops;
    vb_ctx *ctx;
    int ngemm;
    /* tensors [0, 2 ngemm): gemm g's input (2g) and weight (2g + 1), E4M3;
     * [2 ngemm, 3 ngemm): gemm g's output gradient (2 ngemm + g), E5M2 */
    int ntensors;
    float *scale;    /* backend [ntensors], 1 at the start */
    float *history;  /* backend [amax_history_len][ntensors], zero-filled; row 0 this step's */
    long steps;      /* vit_fp8_step_end calls */
    /* the ranks whose amaxes are reduced (max) before each update: two
     * groups whose product covers them all, or NULL */
    const struct vb_comm *agree[2];
    /* 1: forwards record no amax (validation: its batches must not move
     * the training's scales, and no update follows them) */
    int frozen;
    /* backend scratch of the GEMM ops (the largest any GEMM needs) */
    void *scratch;
    size_t scratch_bytes;
} vit_fp8;

static inline int vit_fp8_input(const vit_fp8 *f, int g) { (void)f; return 2 * g; }
static inline int vit_fp8_weight(const vit_fp8 *f, int g) { (void)f; return 2 * g + 1; }
static inline int vit_fp8_grad(const vit_fp8 *f, int g) { return 2 * f->ngemm + g; }
static inline vb_fp8_format vit_fp8_format(const vit_fp8 *f, int t) {
    return t < 2 * f->ngemm ? VB_FP8_E4M3 : VB_FP8_E5M2;
}
/* where this step's amax of tensor t goes (backend memory) */
static inline float *vit_fp8_amax_slot(const vit_fp8 *f, int t) { return f->history + (size_t)t; }

/* Exits 2 naming the key when the recipe is out of range (history length
 * >= 1, margin >= 0); exits 2 with the backend's reason when the context
 * cannot run FP8 GEMMs. The scratch holds scratch_bytes. */
vit_fp8 *vit_fp8_create(const vb_ops *ops, vb_ctx *ctx, int ngemm, const vit_fp8_recipe *r, size_t scratch_bytes);
void vit_fp8_destroy(vit_fp8 *f);

/* The amaxes of every step are max-reduced over a and then b (either may be
 * NULL or of size 1) before the scales are updated. */
void vit_fp8_set_agree(vit_fp8 *f, const struct vb_comm *a, const struct vb_comm *b);

/* Forwards outside training (validation) between vit_fp8_freeze(f, 1) and
 * (f, 0) quantise with the current scales and record nothing. */
static inline void vit_fp8_freeze(vit_fp8 *f, int frozen) {
    if (f) f->frozen = frozen;
}

/* GEMM g's scales, amax slots (forward: input and weight; backward: the
 * output gradient; NULL while frozen) and the scratch, as the ops take
 * them. */
void vit_fp8_gemm_state(const vit_fp8 *f, int g, vb_fp8_gemm *out);

/* After a step's backward: the amaxes agreed, every scale from its
 * history, then the history rolled. */
void vit_fp8_step_end(vit_fp8 *f);

/* "max" / "most_recent" -> the algo; -1 if neither */
int vit_fp8_parse_algo(const char *s);

#endif
