/* cpu_kernels.h: private prototypes of the CPU backend (OpenMP + a BLAS).
 *
 * Each function implements the vb_ops entry of the same name with exactly its
 * signature (kernels/ops.h has the contract: parameter gradients accumulate,
 * input gradients overwrite unless named *_acc, NULL outputs are skipped).
 * The CPU keeps every activation in float32 (its ctx_create refuses another
 * dtype), so a vb_act pointer here is a float pointer. The CPU's work is done
 * when a function returns: its context holds nothing. ops_cpu.c gathers them
 * into the table. Nothing here includes core/.
 */
#ifndef VB_CPU_KERNELS_H
#define VB_CPU_KERNELS_H

#include <stddef.h>

#include "kernels/ops.h"

/* Below this many elements a loop runs on the calling thread: an OpenMP
 * fork/join costs a few microseconds, which is more than the loop itself. */
#define VB_CPU_PAR_MIN 32768

/* ops_cpu.c: context, memory, events */
vb_ctx *cpu_ctx_create(const vb_ctx_opts *opts, char *err, size_t errlen);
void cpu_ctx_destroy(vb_ctx *ctx);
void cpu_synchronize(vb_ctx *ctx);
void *cpu_alloc(vb_ctx *ctx, size_t bytes);
void cpu_free(vb_ctx *ctx, void *p);
void cpu_memcpy(vb_ctx *ctx, void *dst, const void *src, size_t bytes);
void cpu_zero(vb_ctx *ctx, void *p, size_t bytes);

/* matmul.c */
void cpu_matmul_forward(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *weight,
                        const vb_act *bias, int N, int C, int OC);
void cpu_matmul_bias_gelu_forward(vb_ctx *ctx, vb_act *pre, vb_act *out, const vb_act *inp,
                                  const vb_act *weight, const vb_act *bias, int N, int C, int OC);
void cpu_matmul_backward(vb_ctx *ctx, vb_act *dinp, float *dweight, float *dbias, const vb_act *dout,
                         const vb_act *inp, const vb_act *weight, int N, int C, int OC,
                         int accumulate_dinp);

/* layernorm.c */
void cpu_layernorm_forward(vb_ctx *ctx, vb_act *out, float *mean, float *rstd, const vb_act *inp,
                           const vb_act *weight, const vb_act *bias, int N, int C, float eps);
void cpu_residual_layernorm_forward(vb_ctx *ctx, vb_act *res, vb_act *out, float *mean, float *rstd,
                                    const vb_act *a, const vb_act *b, const vb_act *weight,
                                    const vb_act *bias, int N, int C, float eps);
void cpu_layernorm_backward(vb_ctx *ctx, vb_act *dinp_acc, float *dweight, float *dbias,
                            const vb_act *dout, const vb_act *inp, const vb_act *weight,
                            const float *mean, const float *rstd, int N, int C);

/* attention.c */
size_t cpu_attention_workspace_bytes(vb_ctx *ctx, int B, int Tq, int Tk, int NH, int HD);
void cpu_attention_forward(vb_ctx *ctx, vb_act *out, float *lse, void *workspace, const vb_act *q,
                           const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH, int HD);
void cpu_attention_backward(vb_ctx *ctx, vb_act *dq, vb_act *dk, vb_act *dv, void *workspace,
                            const vb_act *dout, const vb_act *out, const float *lse, const vb_act *q,
                            const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH, int HD);

/* elementwise.c */
void cpu_gelu_forward(vb_ctx *ctx, vb_act *out, const vb_act *inp, size_t n);
void cpu_gelu_backward(vb_ctx *ctx, vb_act *dinp, const vb_act *inp, const vb_act *dout, size_t n);
/* out[r, :] = gelu(pre[r, :] += bias) over N rows of OC: the epilogue of
 * cpu_matmul_bias_gelu_forward (pre already holds inp @ weight^T) */
void cpu_bias_gelu_inplace(float *pre, float *out, const float *bias, int N, int OC);
void cpu_add(vb_ctx *ctx, vb_act *out, const vb_act *a, const vb_act *b, size_t n);
void cpu_accumulate(vb_ctx *ctx, float *y, const float *x, size_t n);
void cpu_scale(vb_ctx *ctx, float *x, float s, size_t n);
void cpu_sum_squares(vb_ctx *ctx, double *out, const float *x, size_t n);
void cpu_cast_to_act(vb_ctx *ctx, vb_act *dst, const float *src, size_t n);
void cpu_normalize_channels(vb_ctx *ctx, float *x, const float *mean, const float *std, int B, int C, size_t hw);
void cpu_patchify(vb_ctx *ctx, vb_act *patches, const float *img, int B, int C, int H, int W, int p);
void cpu_unpatchify(vb_ctx *ctx, vb_act *img, const vb_act *tokens, int B, int C, int H, int W, int p);
void cpu_unpatchify_backward(vb_ctx *ctx, vb_act *dtokens, const vb_act *dimg, int B, int C, int H,
                             int W, int p);
void cpu_add_pos_embed(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *pos, int B, int T,
                       int D);
void cpu_add_pos_embed_backward(vb_ctx *ctx, float *dpos, const vb_act *dout, int B, int T, int D);

/* loss.c */
void cpu_rel_l2_loss_forward(vb_ctx *ctx, float *loss, float *per_sample, const vb_act *pred,
                             const float *tar, int B, size_t n);
void cpu_rel_l2_loss_backward(vb_ctx *ctx, vb_act *dpred, const vb_act *pred, const float *tar, int B,
                              size_t n, const float *dloss);
void cpu_weighted_rmse_accumulate(vb_ctx *ctx, double *rmse_sum, const vb_act *pred, const float *tar,
                                  int B, int C, int H, int W);

/* adam.c */
void cpu_adam_update(vb_ctx *ctx, float *param, vb_act *param_act, const float *grad, float *m,
                     float *v, size_t n, const vb_adam_args *args, const vb_loss_scale_state *ls);
void cpu_grad_unscale_check(vb_ctx *ctx, float *grad, size_t n, vb_loss_scale_state *ls);
void cpu_loss_scale_update(vb_ctx *ctx, vb_loss_scale_state *ls);

/* fp8.c */
void cpu_fp8_quantize(vb_ctx *ctx, float *out, const float *inp, size_t n, vb_fp8_format fmt, const float *scale,
                      float *amax);
const char *cpu_fp8_unsupported(vb_ctx *ctx);
size_t cpu_fp8_scratch_bytes(vb_ctx *ctx, int N, int C, int OC);
void cpu_fp8_matmul_forward(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *weight, const vb_act *bias,
                            int N, int C, int OC, const vb_fp8_gemm *g);
void cpu_fp8_matmul_backward(vb_ctx *ctx, vb_act *dinp, float *dweight, float *dbias, const vb_act *dout,
                             const vb_act *inp, const vb_act *weight, int N, int C, int OC, int accumulate_dinp,
                             const vb_fp8_gemm *g);
void cpu_fp8_scale_update(vb_ctx *ctx, float *scale, float *history, int n, int stride, int len, vb_fp8_format fmt,
                          vb_fp8_amax_algo algo, int margin);

#endif
