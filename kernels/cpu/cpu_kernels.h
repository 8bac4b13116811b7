/* cpu_kernels.h: private prototypes of the CPU backend (OpenMP + OpenBLAS).
 *
 * Each function implements the vb_ops entry of the same name (kernels/ops.h
 * has the contract: backward ops accumulate, NULL outputs are skipped).
 * ops_cpu.c gathers them into the table.
 */
#ifndef VB_CPU_KERNELS_H
#define VB_CPU_KERNELS_H

#include <stddef.h>

/* Below this many elements a loop runs on the calling thread: an OpenMP
 * fork/join costs a few microseconds, which is more than the loop itself. */
#define VB_CPU_PAR_MIN 32768

/* memory */
void *cpu_alloc(size_t bytes);
void cpu_free(void *p);
void cpu_memcpy(void *dst, const void *src, size_t bytes);
void cpu_zero(void *p, size_t bytes);
void cpu_synchronize(void);

/* matmul.c */
void cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                        int N, int C, int OC);
void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC);

/* layernorm.c */
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C, float eps);
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C);

/* attention.c */
void cpu_attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           int B, int Tq, int Tk, int NH, int HD);
void cpu_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                            const float *att, const float *q, const float *k, const float *v,
                            int B, int Tq, int Tk, int NH, int HD);

/* elementwise.c */
void cpu_gelu_forward(float *out, const float *inp, size_t n);
void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
void cpu_add(float *out, const float *a, const float *b, size_t n);
void cpu_accumulate(float *y, const float *x, size_t n);
void cpu_scale(float *x, float s, size_t n);
double cpu_sum_squares(const float *x, size_t n);
void cpu_patchify(float *patches, const float *img, int B, int C, int H, int W, int p);
void cpu_unpatchify(float *img, const float *tokens, int B, int C, int H, int W, int p);
void cpu_unpatchify_backward(float *dtokens, const float *dimg, int B, int C, int H, int W, int p);
void cpu_add_pos_embed(float *out, const float *inp, const float *pos, int B, int T, int D);
void cpu_add_pos_embed_backward(float *dpos, const float *dout, int B, int T, int D);

/* loss.c */
float cpu_rel_l2_loss_forward(float *per_sample, const float *pred, const float *tar, int B,
                              size_t n);
void cpu_rel_l2_loss_backward(float *dpred, const float *pred, const float *tar, int B, size_t n,
                              float dloss);
void cpu_weighted_rmse_accumulate(double *rmse_out, const float *pred, const float *tar,
                                  int B, int C, int H, int W);

/* adam.c */
void cpu_adam_update(float *param, const float *grad, float *m, float *v, size_t n, float lr,
                     float beta1, float beta2, float eps, int step);

#endif
