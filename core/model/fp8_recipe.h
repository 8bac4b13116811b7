/* fp8_recipe.h: the per-tensor state of FP8 training with Transformer
 * Engine's delayed scaling (DelayedScaling, Format.HYBRID), the part that
 * lives with the model; the numerics are kernels/fp8.h's.
 *
 * Every GEMM g of the model has three scaled tensors: its input activation
 * and its weight (E4M3, forward) and the gradient of its output (E5M2,
 * backward). Each has a scale (1 at the start) and an amax history of
 * amax_history_len steps. A step quantises with the scales computed before
 * it and records each tensor's amax into the history's newest row; after
 * the step vit_fp8_step_end derives the next scales from the history (its
 * max, or its newest entry under most_recent) and moves to the next row,
 * zeroed, so the history always covers the last amax_history_len steps, as
 * TE's roll of amax_history does. State and history are backend memory,
 * updated by ops on the context: the host never reads them during training.
 */
#ifndef VB_FP8_RECIPE_H
#define VB_FP8_RECIPE_H

#include <stddef.h>

#include "kernels/ops.h"

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
    float *history;  /* backend [amax_history_len][ntensors], zero-filled */
    int newest;      /* the history row this step records into (host) */
    long steps;      /* vit_fp8_step_end calls */
    /* backend scratch for the quantised copies the GEMMs read */
    float *xq, *wq, *gq;
    size_t xq_n, wq_n, gq_n;
} vit_fp8;

static inline int vit_fp8_input(const vit_fp8 *f, int g) { (void)f; return 2 * g; }
static inline int vit_fp8_weight(const vit_fp8 *f, int g) { (void)f; return 2 * g + 1; }
static inline int vit_fp8_grad(const vit_fp8 *f, int g) { return 2 * f->ngemm + g; }
static inline vb_fp8_format vit_fp8_format(const vit_fp8 *f, int t) {
    return t < 2 * f->ngemm ? VB_FP8_E4M3 : VB_FP8_E5M2;
}
/* where this step's amax of tensor t goes (backend memory) */
static inline float *vit_fp8_amax_slot(const vit_fp8 *f, int t) {
    return f->history + (size_t)f->newest * (size_t)f->ntensors + (size_t)t;
}

/* Exits 2 naming the key when the recipe is out of range (history length
 * >= 1, margin >= 0); exits 2 when the backend does not emulate FP8. The
 * scratch holds xq_n, wq_n, gq_n floats. */
vit_fp8 *vit_fp8_create(const vb_ops *ops, vb_ctx *ctx, int ngemm, const vit_fp8_recipe *r, size_t xq_n,
                        size_t wq_n, size_t gq_n);
void vit_fp8_destroy(vit_fp8 *f);

/* Quantise-dequantises n floats of tensor t into out with its current scale;
 * record: also writes its amax into the history's newest row. Enqueued. */
void vit_fp8_quantize(vit_fp8 *f, int t, float *out, const float *inp, size_t n, int record);

/* After a step's backward: every scale from its history, then the next row. */
void vit_fp8_step_end(vit_fp8 *f);

/* "max" / "most_recent" -> the algo; -1 if neither */
int vit_fp8_parse_algo(const char *s);

#endif
