/* ops.h: the table of compute ops a backend provides.
 *
 * The model, optimizer and harness call compute ONLY through this table, so a
 * backend (kernels/cpu, kernels/cuda) is one struct of function pointers plus
 * a context. This header includes nothing from core/: kernels depend on it,
 * never the other way round.
 *
 * Context. Every op takes a vb_ctx first: the backend's handle on one ordered
 * queue of work (on CUDA a stream plus library handles and a workspace; on the
 * CPU nothing to hold, every op has finished when it returns). Ops enqueue on
 * the context and may return before the work is done; host code that reads
 * backend memory copies it out (memcpy_d2h_async) and synchronizes first. A
 * second context of the same backend (ctx_create again) is a second queue,
 * e.g. for communication; events order one queue after another.
 *
 * Memory. All pointers passed to an op are backend memory from ops->alloc,
 * except where a comment says host. Layouts are row-major; "N" below is the
 * number of rows (tokens times batch); weights follow PyTorch's nn.Linear
 * convention [out, in].
 *
 * Precision. Activations and matmul operands (vb_act) are stored in the
 * context's activation dtype (ctx->act: float32, bfloat16 or float16).
 * Parameters have float32 master copies; forward ops read them through an
 * activation-dtype view (the same buffer when ctx->act is float32). Parameter
 * gradients, Adam state, LayerNorm statistics, the attention log-sum-exp, the
 * loss and the metrics are always float32 (RMSE sums float64). The CPU backend
 * supports float32 only: ctx_create refuses another dtype.
 *
 * Gradient convention. Parameter gradients (dweight, dbias, dpos) ACCUMULATE
 * (+=): the caller zeroes the gradient buffer once per step. Input gradients
 * OVERWRITE, because the op is their only writer, except where the argument is
 * named *_acc (matmul_backward's dinp when accumulate_dinp is set, and
 * layernorm_backward's dinp, which is where the residual stream's gradient
 * adds up). A NULL output pointer means "not needed": the op skips that work.
 */
#ifndef VB_OPS_H
#define VB_OPS_H

#include <stddef.h>

#include "kernels/fp8.h"

typedef enum vb_dtype { VB_DTYPE_F32 = 0, VB_DTYPE_BF16 = 1, VB_DTYPE_F16 = 2 } vb_dtype;

/* bytes of one element; the name as the config spells it ("float32", "bfloat16", "float16") */
static inline size_t vb_dtype_size(vb_dtype t) { return t == VB_DTYPE_F32 ? 4 : 2; }
static inline const char *vb_dtype_name(vb_dtype t) {
    return t == VB_DTYPE_F32 ? "float32" : t == VB_DTYPE_BF16 ? "bfloat16" : "float16";
}

/* An element of an activation or matmul operand, in ctx->act. Pointer
 * arithmetic goes through vb_act_at. */
typedef void vb_act;
#define vb_act_at(ctx, p, i) ((void *)((char *)(p) + (size_t)(i) * vb_dtype_size((ctx)->act)))

struct vb_ops;

typedef struct vb_ctx_opts {
    vb_dtype act;   /* activation / matmul operand dtype */
    int device;     /* device index (CUDA); ignored by the CPU */
    int tf32;       /* float32 matmuls may use TF32 tensor cores (CUDA); ignored by the CPU */
    int attention;  /* vb_attention_impl: the attention kernels (CUDA, bf16/f16); ignored by the CPU */
} vb_ctx_opts;

/* whose attention kernels a CUDA context runs for bfloat16/float16: our own
 * flash kernels, or cuDNN's fused attention (float32 always takes ours) */
typedef enum vb_attention_impl { VB_ATTENTION_FLASH = 0, VB_ATTENTION_CUDNN = 1 } vb_attention_impl;

typedef struct vb_ctx {
    const struct vb_ops *ops;
    vb_dtype act;
    int device;
    void *impl;     /* the backend's own: stream, handles, workspace */
} vb_ctx;

/* A point in a context's queue: record it, wait on it from another context,
 * or time the span between two of them once both have completed. */
typedef struct vb_event vb_event;

/* Adam's per-step arguments, kept in backend memory so that a captured step
 * can be replayed with a new learning rate: the host writes them (one small
 * async copy) before the step. step is 1-based (bias correction uses beta^step).
 * grad_scale multiplies every gradient first (1, or 1/loss_scale under fp16). */
typedef struct vb_adam_args {
    float lr, beta1, beta2, eps;
    float grad_scale;
    int step;
} vb_adam_args;

/* Dynamic loss scaling (torch.cuda.amp.GradScaler), in backend memory so that
 * no step needs the host to look at it: the loss gradient is seeded with
 * `scale` (rel_l2_loss_backward's dloss points here), grad_unscale_check
 * multiplies the gradients by 1/scale and raises found_inf on a non-finite
 * one, adam_update does nothing while found_inf is set, and loss_scale_update
 * ends the step: backoff and a skipped step on found_inf, growth after
 * growth_interval good steps in a row, found_inf cleared. found_inf is a
 * float (0 or 1) so ranks can agree on it with a float32 max-allreduce.
 * The host writes the whole struct once before training and only reads it
 * (a copy) afterwards. */
typedef struct vb_loss_scale_state {
    float scale;            /* the current loss scale (65536 at the start under fp16) */
    float found_inf;        /* 1 once a gradient of this step was inf or nan, else 0 */
    int growth_tracker;     /* good steps in a row since the scale last changed */
    int skipped;            /* steps skipped so far: Adam's step count is args->step - skipped */
    int growth_interval;    /* 2000 */
    float growth_factor;    /* 2 */
    float backoff_factor;   /* 0.5 */
    float last_scale;       /* the scale the last finished step's loss gradient was seeded with */
    int last_skipped;       /* 1 when the last finished step was skipped */
    int steps;              /* steps finished (loss_scale_update calls) */
} vb_loss_scale_state;

/* A device as run.json records it ("gpu"): what decides or explains its
 * throughput. Zeros and "" where the backend has no device (the CPU). */
typedef struct vb_device_desc {
    char name[256];        /* "NVIDIA H100 80GB HBM3" (cudaDeviceProp.name's size) */
    char driver[64];       /* "CUDA driver 13.0, runtime 13.0" */
    char pci_bus_id[32];   /* "0000:19:00.0" */
    double memory_gib;     /* total device memory */
    int sm_count;
    int cc_major, cc_minor; /* compute capability */
    int clock_mhz;         /* peak SM clock */
    int memory_clock_mhz;  /* peak memory clock */
    int ecc;               /* 1 on, 0 off */
} vb_device_desc;

typedef struct vb_ops {
    const char *name; /* "cpu", "cuda" */
    /* 1 when alloc returns host memory (the CPU): the model's buffers then
     * count against the host's available memory; 0 for device memory */
    int host_memory;

    /* ---- context ----
     * NULL with a one-line reason in err (errlen bytes) when the backend cannot
     * give what opts asks (no device, unsupported dtype). */
    vb_ctx *(*ctx_create)(const vb_ctx_opts *opts, char *err, size_t errlen);
    void (*ctx_destroy)(vb_ctx *ctx);
    /* waits until every op enqueued on ctx has finished */
    void (*synchronize)(vb_ctx *ctx);
    /* devices a context can be placed on (vb_ctx_opts.device in [0, count));
     * 1 on the CPU, 0 when none is visible. Ranks sharing a node pick theirs
     * by node-local rank modulo this count. */
    int (*device_count)(void);
    /* the backend's own queue handle, for libraries that enqueue on it (CUDA:
     * the context's cudaStream_t, which NCCL takes); NULL on the CPU */
    void *(*native_queue)(vb_ctx *ctx);
    /* the device a context runs on, for run.json (its fingerprint keys on
     * the name); zeros and "" on the CPU */
    void (*device_describe)(vb_ctx *ctx, vb_device_desc *d);
    /* the capture range of an attached profiler (CUDA: cudaProfilerStart /
     * cudaProfilerStop, which `nsys profile --capture-range=cudaProfilerApi`
     * waits for; nothing happens when no profiler is attached); no-ops on
     * the CPU */
    void (*profiler_start)(vb_ctx *ctx);
    void (*profiler_stop)(vb_ctx *ctx);

    /* ---- memory ---- */
    void *(*alloc)(vb_ctx *ctx, size_t bytes); /* zero-filled; exits 1 naming the size on failure */
    void (*free)(vb_ctx *ctx, void *p);
    /* page-locked host memory for asynchronous copies (plain host memory on the CPU) */
    void *(*alloc_host)(vb_ctx *ctx, size_t bytes);
    void (*free_host)(vb_ctx *ctx, void *p);
    /* enqueued copies; a host buffer must stay valid (and unchanged) until the
     * context is synchronized or an event recorded after the copy completes */
    void (*memcpy_h2d)(vb_ctx *ctx, void *dst, const void *src, size_t bytes);
    void (*memcpy_d2h)(vb_ctx *ctx, void *dst, const void *src, size_t bytes);
    void (*memcpy_d2d)(vb_ctx *ctx, void *dst, const void *src, size_t bytes);
    void (*zero)(vb_ctx *ctx, void *p, size_t bytes);

    /* ---- events ---- */
    vb_event *(*event_create)(vb_ctx *ctx);
    void (*event_destroy)(vb_ctx *ctx, vb_event *ev);
    void (*event_record)(vb_ctx *ctx, vb_event *ev);       /* at this point of ctx's queue */
    void (*event_wait)(vb_ctx *ctx, vb_event *ev);         /* ctx's later work waits for ev */
    void (*event_synchronize)(vb_ctx *ctx, vb_event *ev);  /* the host waits for ev */
    /* milliseconds from start to end; both recorded and completed */
    double (*event_elapsed_ms)(vb_ctx *ctx, vb_event *start, vb_event *end);

    /* ---- graphs: work recorded once, replayed as one launch (CUDA graphs);
     * NULL on a backend without them (the CPU). Between graph_capture_begin
     * and graph_capture_end, work enqueued on ctx by this thread is recorded,
     * not run: it must not allocate, synchronize with the host or copy from
     * pageable memory. graph_capture_end returns the executable graph;
     * graph_launch enqueues one replay on ctx, reading and writing the same
     * addresses the capture saw (host memory a recorded copy reads is read at
     * each replay); graph_destroy frees it. */
    void (*graph_capture_begin)(vb_ctx *ctx);
    void *(*graph_capture_end)(vb_ctx *ctx);
    void (*graph_launch)(vb_ctx *ctx, void *graph);
    void (*graph_destroy)(vb_ctx *ctx, void *graph);
    /* a count that changes whenever the backend frees and reallocates a
     * workspace of ctx's (cuDNN's, when a larger problem needs more): graphs
     * recorded under an older count may point into freed memory and must be
     * recorded anew before their next replay. NULL where nothing is ever
     * reallocated. */
    unsigned long (*workspace_generation)(vb_ctx *ctx);

    /* ---- linear: out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC] (bias may be NULL) ---- */
    void (*matmul_forward)(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *weight,
                           const vb_act *bias, int N, int C, int OC);
    /* The MLP's first layer with its activation fused in: pre[N,OC] = inp @ weight^T + bias
     * (kept for backward) and out[N,OC] = gelu(pre), exact erf GELU. */
    void (*matmul_bias_gelu_forward)(vb_ctx *ctx, vb_act *pre, vb_act *out, const vb_act *inp,
                                     const vb_act *weight, const vb_act *bias, int N, int C, int OC);
    /* dinp[N,C] = (or += when accumulate_dinp) dout @ weight;
     * dweight[OC,C] += dout^T @ inp; dbias[OC] += sum_rows(dout). Any output may be NULL. */
    void (*matmul_backward)(vb_ctx *ctx, vb_act *dinp, float *dweight, float *dbias,
                            const vb_act *dout, const vb_act *inp, const vb_act *weight, int N, int C,
                            int OC, int accumulate_dinp);

    /* ---- layernorm over the last dim C; saves mean[N], rstd[N] (float32) for backward ---- */
    void (*layernorm_forward)(vb_ctx *ctx, vb_act *out, float *mean, float *rstd, const vb_act *inp,
                              const vb_act *weight, const vb_act *bias, int N, int C, float eps);
    /* A residual add and the LayerNorm that follows it, in one pass:
     * res[N,C] = a + b (res may alias a), out = layernorm(res). */
    void (*residual_layernorm_forward)(vb_ctx *ctx, vb_act *res, vb_act *out, float *mean,
                                       float *rstd, const vb_act *a, const vb_act *b,
                                       const vb_act *weight, const vb_act *bias, int N, int C,
                                       float eps);
    /* dinp_acc[N,C] += d layernorm/d inp; dweight, dbias += */
    void (*layernorm_backward)(vb_ctx *ctx, vb_act *dinp_acc, float *dweight, float *dbias,
                               const vb_act *dout, const vb_act *inp, const vb_act *weight,
                               const float *mean, const float *rstd, int N, int C);

    /* ---- multi-head attention core (flash-style) ----
     * q[B,Tq,D], k[B,Tk,D], v[B,Tk,D] with D = NH*HD, head h = columns [h*HD, (h+1)*HD).
     * out[B,Tq,D] = softmax(q k^T / sqrt(HD)) v. Only lse[B,NH,Tq] (float32, the
     * natural log of each row's sum of exp(scores)) is saved for backward; the
     * probabilities are never stored whole. Tq != Tk is how context
     * parallelism calls it (local queries against every token).
     * workspace: attention_workspace_bytes(...) bytes of backend memory,
     * shared by forward and backward, contents not kept between calls. */
    size_t (*attention_workspace_bytes)(vb_ctx *ctx, int B, int Tq, int Tk, int NH, int HD);
    void (*attention_forward)(vb_ctx *ctx, vb_act *out, float *lse, void *workspace, const vb_act *q,
                              const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH, int HD);
    /* dq[B,Tq,D], dk[B,Tk,D], dv[B,Tk,D] are overwritten (dk, dv are this call's
     * queries' share: under cp the caller sums them over ranks). */
    void (*attention_backward)(vb_ctx *ctx, vb_act *dq, vb_act *dk, vb_act *dv, void *workspace,
                               const vb_act *dout, const vb_act *out, const float *lse,
                               const vb_act *q, const vb_act *k, const vb_act *v, int B, int Tq,
                               int Tk, int NH, int HD);

    /* ---- exact (erf) GELU, elementwise over n ---- */
    void (*gelu_forward)(vb_ctx *ctx, vb_act *out, const vb_act *inp, size_t n);
    /* dinp = dout * gelu'(inp) (overwrites) */
    void (*gelu_backward)(vb_ctx *ctx, vb_act *dinp, const vb_act *inp, const vb_act *dout, size_t n);

    /* ---- out[i] = a[i] + b[i] (out may alias a or b) ---- */
    void (*add)(vb_ctx *ctx, vb_act *out, const vb_act *a, const vb_act *b, size_t n);
    /* ---- y[i] += x[i], float32 (gradients) ---- */
    void (*accumulate)(vb_ctx *ctx, float *y, const float *x, size_t n);
    /* ---- x[i] *= s, float32 (gradients) ---- */
    void (*scale)(vb_ctx *ctx, float *x, float s, size_t n);
    /* ---- *out (backend memory, float64) = sum x[i]^2 over float32 x ---- */
    void (*sum_squares)(vb_ctx *ctx, double *out, const float *x, size_t n);
    /* ---- dst[i] = (activation dtype) src[i] ---- */
    void (*cast_to_act)(vb_ctx *ctx, vb_act *dst, const float *src, size_t n);

    /* ---- x[B,C,hw] = (x - mean[c]) / std[c] in place, float32 (the loader's
     * normalisation, run on the backend after the batch's copy with
     * normalize_on_device); IEEE subtraction and division, so the same bits
     * as the loader's ---- */
    void (*normalize_channels)(vb_ctx *ctx, float *x, const float *mean, const float *std, int B, int C, size_t hw);

    /* ---- patch embedding data movement (conv with kernel = stride = p as a GEMM) ----
     * img[B,C,H,W] (float32, the loader's) -> patches[B, (H/p)*(W/p), C*p*p],
     * inner order (c, i, j) to match Conv2d's weight [D, C, p, p]. */
    void (*patchify)(vb_ctx *ctx, vb_act *patches, const float *img, int B, int C, int H, int W, int p);
    /* head output [B, (H/p)*(W/p), p*p*C] in order (i, j, c) -> img[B,C,H,W]:
     * einsum("nhwpqc->nchpwq"). unpatchify_backward is the inverse permutation
     * (dimg -> dtokens, overwriting). */
    void (*unpatchify)(vb_ctx *ctx, vb_act *img, const vb_act *tokens, int B, int C, int H, int W, int p);
    void (*unpatchify_backward)(vb_ctx *ctx, vb_act *dtokens, const vb_act *dimg, int B, int C, int H,
                                int W, int p);
    /* out[b,t,:] = inp[b,t,:] + pos[t,:] over T tokens, D channels (out may alias inp) */
    void (*add_pos_embed)(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *pos, int B, int T,
                          int D);
    /* dpos[t,:] += sum_b dout[b,t,:] */
    void (*add_pos_embed_backward)(vb_ctx *ctx, float *dpos, const vb_act *dout, int B, int T, int D);

    /* ---- loss: mean_b ||pred_b - tar_b||_2 / ||tar_b||_2 over n elements per sample ----
     * loss[1] and per_sample[B] (backend memory, float32; per_sample may be
     * NULL) are written, never returned: the host reads them after the step. */
    void (*rel_l2_loss_forward)(vb_ctx *ctx, float *loss, float *per_sample, const vb_act *pred,
                                const float *tar, int B, size_t n);
    /* dpred = dloss * d loss/d pred (overwrites); dloss is backend memory
     * (the fp16 loss scale lives there), NULL meaning 1 */
    void (*rel_l2_loss_backward)(vb_ctx *ctx, vb_act *dpred, const vb_act *pred, const float *tar,
                                 int B, size_t n, const float *dloss);

    /* ---- latitude-weighted RMSE per channel (the tutorial's weighted_rmse_channels):
     * pred, tar [B,C,H,W]; rmse_sum[C] (backend memory, float64) += sum over b of rmse[b,c]. ---- */
    void (*weighted_rmse_accumulate)(vb_ctx *ctx, double *rmse_sum, const vb_act *pred,
                                     const float *tar, int B, int C, int H, int W);

    /* ---- Adam (torch.optim.Adam, no weight decay) over n contiguous float32 params.
     * args: backend memory. param_act (may be NULL) receives the updated params
     * in the activation dtype, the view the next forward reads. ls (backend
     * memory, may be NULL: no loss scaling): while ls->found_inf is set the
     * call writes nothing (params, param_act and moments stay as they are),
     * and the bias corrections use step args->step - ls->skipped, the updates
     * actually taken. ---- */
    void (*adam_update)(vb_ctx *ctx, float *param, vb_act *param_act, const float *grad, float *m,
                        float *v, size_t n, const vb_adam_args *args, const vb_loss_scale_state *ls);

    /* ---- loss scaling (vb_loss_scale_state) ----
     * grad[i] *= 1 / ls->scale (the reciprocal rounded to float32 from double,
     * as GradScaler's inv_scale); ls->found_inf = 1 when any grad[i] was inf or
     * nan before the multiply, left as it was otherwise (so calls over several
     * ranges add up). */
    void (*grad_unscale_check)(vb_ctx *ctx, float *grad, size_t n, vb_loss_scale_state *ls);
    /* GradScaler.update(): found_inf: scale *= backoff_factor, growth_tracker
     * = 0, skipped += 1; else growth_tracker += 1 and, on reaching
     * growth_interval, scale *= growth_factor (kept only if finite) and
     * growth_tracker = 0. Records last_scale / last_skipped, counts steps,
     * clears found_inf. One thread's work, enqueued like any op. */
    void (*loss_scale_update)(vb_ctx *ctx, vb_loss_scale_state *ls);

    /* ---- amp_mode fp8: Transformer Engine's delayed scaling (kernels/fp8.h) ----
     * NULL on a backend without FP8. A linear layer's GEMMs with their
     * operands in FP8 (vb_fp8_gemm: the input and weight in E4M3 forward,
     * the output gradient in E5M2 backward, each multiplied by its scale
     * and rounded as vb_fp8_round, the product divided by the scales back);
     * the results as matmul_forward / matmul_backward's. The CPU emulates
     * the formats in float32 (each operand becomes vb_fp8_qdq of it); CUDA
     * casts to FP8 bytes and runs cuBLASLt's FP8 GEMMs, bf16 results.
     * fp8_unsupported: NULL when ctx can run these, else why not (dtype,
     * device). fp8_scratch_bytes: the scratch one call of either needs, 0
     * when the backend cannot take that shape (CUDA: C and OC multiples of
     * 16, cuBLASLt's FP8 alignment). */
    const char *(*fp8_unsupported)(vb_ctx *ctx);
    size_t (*fp8_scratch_bytes)(vb_ctx *ctx, int N, int C, int OC);
    /* out[N,OC] = Q(inp) Q(weight)^T + bias; records amax_x and amax_w */
    void (*fp8_matmul_forward)(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *weight,
                               const vb_act *bias, int N, int C, int OC, const vb_fp8_gemm *g);
    /* dbias[OC] += column sums of the unquantised dout (TE computes the bias
     * gradient before the cast); then Q_g(dout) (amax_g recorded) against
     * Q(inp), Q(weight) under the forward's scales: dinp = (+=) Q(dout) Q(w),
     * dweight += Q(dout)^T Q(inp). Any output may be NULL. */
    void (*fp8_matmul_backward)(vb_ctx *ctx, vb_act *dinp, float *dweight, float *dbias, const vb_act *dout,
                                const vb_act *inp, const vb_act *weight, int N, int C, int OC,
                                int accumulate_dinp, const vb_fp8_gemm *g);
    /* The scale update after a step, for n tensors of one format: tensor i's
     * amax history is history[k * stride + i], k in [0, len), row 0 the step
     * just taken, row k the step k before it. scale[i] = vb_fp8_scale_from_amax
     * (vb_fp8_history_amax(...), scale[i], fmt, margin); then the history
     * rolls: row k + 1 = row k, the oldest row drops out, row 0 = 0 for the
     * next step's amaxes (so the same addresses serve every step, as a
     * replayed graph needs). Reads and writes backend memory only. */
    void (*fp8_scale_update)(vb_ctx *ctx, float *scale, float *history, int n, int stride, int len,
                             vb_fp8_format fmt, vb_fp8_amax_algo algo, int margin);
} vb_ops;

/* The CPU backend (OpenMP + a BLAS). Always available. */
const vb_ops *vb_ops_cpu(void);

/* The CUDA backend; NULL when not compiled in. */
const vb_ops *vb_ops_cuda(void);

/* cuda when compiled in and a usable GPU is visible, else cpu. */
const vb_ops *vb_ops_auto(void);

/* Backend by name ("cpu", "cuda", "auto"); NULL if unknown or not compiled in. */
const vb_ops *vb_ops_by_name(const char *name);

#endif
