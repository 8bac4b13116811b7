/* ops.h: the table of compute ops a backend provides.
 *
 * The model, optimizer and harness call compute ONLY through this table, so a
 * backend (kernels/cpu now, kernels/cuda later) is one struct of function
 * pointers. All pointers passed to an op are backend memory obtained from
 * ops->alloc. Layouts are row-major; "N" below is the number of rows (tokens
 * times batch), weights follow PyTorch's nn.Linear convention [out, in].
 *
 * Gradient convention (llm.c): every *_backward ACCUMULATES (+=) into
 * parameter gradients (dweight, dbias, ...) and into dinp. The caller zeroes
 * gradient buffers before a backward pass. A NULL output pointer means "not
 * needed" and the op skips that work (e.g. dinp of the first layer).
 */
#ifndef VB_OPS_H
#define VB_OPS_H

#include <stddef.h>

typedef struct vb_ops {
    const char *name; /* "cpu", "cuda" */

    /* ---- memory ---- */
    void *(*alloc)(size_t bytes);            /* zero-filled */
    void (*free)(void *p);
    void (*memcpy_h2d)(void *dst, const void *src, size_t bytes);
    void (*memcpy_d2h)(void *dst, const void *src, size_t bytes);
    void (*memcpy_d2d)(void *dst, const void *src, size_t bytes);
    void (*zero)(void *p, size_t bytes);
    void (*synchronize)(void);

    /* ---- linear: out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC] (bias may be NULL) ---- */
    void (*matmul_forward)(float *out, const float *inp, const float *weight, const float *bias,
                           int N, int C, int OC);
    /* dinp[N,C] += dout @ weight; dweight[OC,C] += dout^T @ inp; dbias[OC] += sum_rows(dout).
     * Any of dinp, dweight, dbias may be NULL. */
    void (*matmul_backward)(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int N, int C, int OC);

    /* ---- layernorm over the last dim C, eps given; saves mean[N], rstd[N] for backward ---- */
    void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int N, int C, float eps);
    void (*layernorm_backward)(float *dinp, float *dweight, float *dbias, const float *dout,
                               const float *inp, const float *weight, const float *mean,
                               const float *rstd, int N, int C);

    /* ---- multi-head attention core ----
     * q[B,Tq,D], k[B,Tk,D], v[B,Tk,D] with D = NH*HD, head h = columns [h*HD, (h+1)*HD).
     * att[B,NH,Tq,Tk] = softmax(q k^T / sqrt(HD)) is saved for backward;
     * out[B,Tq,D] = att @ v. (Tq != Tk is how context parallelism will call it.) */
    void (*attention_forward)(float *out, float *att, const float *q, const float *k, const float *v,
                              int B, int Tq, int Tk, int NH, int HD);
    /* dq, dk, dv accumulate (+=). scratch: at least B*NH*Tq*Tk floats. */
    void (*attention_backward)(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                               const float *att, const float *q, const float *k, const float *v,
                               int B, int Tq, int Tk, int NH, int HD);

    /* ---- exact (erf) GELU, elementwise over n ---- */
    void (*gelu_forward)(float *out, const float *inp, size_t n);
    void (*gelu_backward)(float *dinp, const float *inp, const float *dout, size_t n); /* dinp += */

    /* ---- out[i] = a[i] + b[i] (out may alias a) ---- */
    void (*add)(float *out, const float *a, const float *b, size_t n);
    /* ---- y[i] += x[i] ---- */
    void (*accumulate)(float *y, const float *x, size_t n);

    /* ---- patch embedding data movement (conv with kernel = stride = p as a GEMM) ----
     * img[B,C,H,W] -> patches[B, (H/p)*(W/p), C*p*p], inner order (c, i, j) to match
     * Conv2d's weight [D, C, p, p]. */
    void (*patchify)(float *patches, const float *img, int B, int C, int H, int W, int p);
    /* head output [B, (H/p)*(W/p), p*p*C] in order (i, j, c) -> img[B,C,H,W]:
     * einsum("nhwpqc->nchpwq"). unpatchify_backward is the inverse permutation
     * (dimg -> dtokens, overwriting, not accumulating). */
    void (*unpatchify)(float *img, const float *tokens, int B, int C, int H, int W, int p);
    void (*unpatchify_backward)(float *dtokens, const float *dimg, int B, int C, int H, int W, int p);
    /* out[b,t,:] = inp[b,t,:] + pos[t,:] over T tokens, D channels (out may alias inp) */
    void (*add_pos_embed)(float *out, const float *inp, const float *pos, int B, int T, int D);
    /* dpos[t,:] += sum_b dout[b,t,:] */
    void (*add_pos_embed_backward)(float *dpos, const float *dout, int B, int T, int D);

    /* ---- loss: mean_b ||pred_b - tar_b||_2 / ||tar_b||_2 over n elements per sample ----
     * returns the loss (host float); per_sample[B] (backend memory, may be NULL) receives
     * the per-sample terms. loss_backward writes (overwrites) dpred = dloss * d loss/d pred. */
    float (*rel_l2_loss_forward)(float *per_sample, const float *pred, const float *tar, int B, size_t n);
    void (*rel_l2_loss_backward)(float *dpred, const float *pred, const float *tar, int B, size_t n,
                                 float dloss);

    /* ---- latitude-weighted RMSE per channel (the tutorial's weighted_rmse_channels):
     * pred, tar [B,C,H,W]; rmse_out[C] (host memory) += sum over b of rmse[b,c]. ---- */
    void (*weighted_rmse_accumulate)(double *rmse_out, const float *pred, const float *tar,
                                     int B, int C, int H, int W);

    /* ---- Adam (torch.optim.Adam, no weight decay) over n contiguous params.
     * step is 1-based (bias correction uses beta^step). ---- */
    void (*adam_update)(float *param, const float *grad, float *m, float *v, size_t n, float lr,
                        float beta1, float beta2, float eps, int step);

    /* ---- helpers for tests / metrics ---- */
    double (*sum_squares)(const float *x, size_t n);
    /* x[i] *= s */
    void (*scale)(float *x, float s, size_t n);
} vb_ops;

/* The CPU backend (OpenMP + OpenBLAS). Always available. */
const vb_ops *vb_ops_cpu(void);

/* Backend by name ("cpu"); NULL if unknown or not compiled in. */
const vb_ops *vb_ops_by_name(const char *name);

#endif
