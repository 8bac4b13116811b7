/* cuda_common.cuh: what every file of the CUDA backend shares.
 *
 * - CUDACHECK / CUBLASCHECK: every CUDA runtime and cuBLASLt call goes through
 *   one of them; a failure prints ONE line naming the call, the library's
 *   error, the host, the device, the source file and line, and exits 1
 *   (vb_die_internal). Kernel launches are checked with CUDA_LAUNCH_CHECK()
 *   (cudaGetLastError right after the launch).
 * - cuda_impl: what a vb_ctx holds on this backend (stream, cuBLASLt handle
 *   and workspace, a scratch buffer for two-pass reductions).
 * - the activation dtypes (float, __nv_bfloat16, __half) as C++ types, with
 *   load/store helpers that convert to and from float: every kernel computes
 *   in float32 whatever the storage type, and dispatch_act() instantiates a
 *   launcher for ctx->act.
 * - NvtxRange: one NVTX range per launcher (nvtx3, header-only).
 *
 * Ops assume the calling thread's current device is the context's
 * (ctx_create makes it so; one device per process is the harness's layout).
 */
#ifndef VB_CUDA_COMMON_CUH
#define VB_CUDA_COMMON_CUH

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublasLt.h>
#include <nvtx3/nvToolsExt.h>

extern "C" {
#include "kernels/ops.h"
}
#include "kernels/cuda/cuda_launch.cuh"

// ---------------------------------------------------------------------------
// error checking

// One line on stderr ("vitbench: internal error: cuda backend: ..."), exit 1:
// a failed CUDA call is the environment's or a bug, never bad input. kernels/
// includes nothing from core/, so this is the backend's own.
[[noreturn]] void vb_cuda_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void vb_cuda_fail(const char *call, cudaError_t err, const char *file, int line);
[[noreturn]] void vb_cublas_fail(const char *call, cublasStatus_t st, const char *file, int line);

#define CUDACHECK(call)                                                        \
    do {                                                                       \
        cudaError_t vb_cuda_err_ = (call);                                     \
        if (vb_cuda_err_ != cudaSuccess)                                       \
            vb_cuda_fail(#call, vb_cuda_err_, __FILE__, __LINE__);             \
    } while (0)

#define CUBLASCHECK(call)                                                      \
    do {                                                                       \
        cublasStatus_t vb_cublas_st_ = (call);                                 \
        if (vb_cublas_st_ != CUBLAS_STATUS_SUCCESS)                            \
            vb_cublas_fail(#call, vb_cublas_st_, __FILE__, __LINE__);          \
    } while (0)

// after every <<<...>>>: a bad configuration shows here, not at a later sync
#define CUDA_LAUNCH_CHECK() CUDACHECK(cudaGetLastError())

// ---------------------------------------------------------------------------
// the context

// one cached cuBLASLt algorithm choice (cuda_matmul.cu)
struct cuda_gemm_key {
    int transa, transb, m, n, k, lda, ldb, ldd;
    int ab_type, b_type, cd_type, compute, epilogue, beta_nonzero;
    int scaled, fast_accum; // FP8: A/B scale pointers set; CUBLASLT_MATMUL_DESC_FAST_ACCUM
    int align_a, align_b, align_c, align_d, align_bias;
};
struct cuda_gemm_entry {
    cuda_gemm_key key;
    cublasLtMatmulAlgo_t algo;
    int used;
};
enum { CUDA_GEMM_CACHE = 64 };

struct cuda_cudnn_state; // cuda_attention_cudnn.cu: handle, plans, workspace

struct cuda_impl {
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *lt_workspace;
    size_t lt_workspace_bytes;
    // two-pass reductions write their per-block partials here; the stream
    // orders every use, so one buffer per context is enough
    void *scratch;
    size_t scratch_bytes;
    int tf32;
    int cc_major, cc_minor; // the device's compute capability (FP8 GEMMs need 8.9)
    int num_sms;
    size_t max_smem_optin;
    cuda_gemm_entry gemm_cache[CUDA_GEMM_CACHE];
    int gemm_cache_next;
    // attention through cuDNN's fused kernels instead of ours (bf16/f16);
    // its state is made on first use
    int attention_cudnn;
    cuda_cudnn_state *cudnn;
    unsigned long workspace_gen; // bumped by every workspace reallocation (ops.h: workspace_generation)
};

enum { CUDA_LT_WORKSPACE_BYTES = 32 << 20, CUDA_SCRATCH_BYTES = 8 << 20 };

static inline cuda_impl *cuda_impl_of(vb_ctx *ctx) { return (cuda_impl *)ctx->impl; }
static inline cudaStream_t cuda_stream(vb_ctx *ctx) { return cuda_impl_of(ctx)->stream; }

// cuDNN's fused attention (cuda_attention_cudnn.cu); available() is false in
// a build without cuDNN, where the others die with one line
bool cuda_attention_cudnn_available(void);
void cuda_attention_cudnn_forward(vb_ctx *ctx, vb_act *out, float *lse, const vb_act *q,
                                  const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH,
                                  int HD);
void cuda_attention_cudnn_backward(vb_ctx *ctx, vb_act *dq, vb_act *dk, vb_act *dv,
                                   const vb_act *dout, const vb_act *out, const float *lse,
                                   const vb_act *q, const vb_act *k, const vb_act *v, int B, int Tq,
                                   int Tk, int NH, int HD);
void cuda_attention_cudnn_release(vb_ctx *ctx);

// ---------------------------------------------------------------------------
// activation dtypes

template <typename T> struct act_tag { typedef T type; };

// f(act_tag<T>{}) with T the C++ type of dtype
template <typename F> static inline void dispatch_act(vb_dtype dtype, F f) {
    switch (dtype) {
    case VB_DTYPE_F32: f(act_tag<float>{}); break;
    case VB_DTYPE_BF16: f(act_tag<__nv_bfloat16>{}); break;
    case VB_DTYPE_F16: f(act_tag<__half>{}); break;
    }
}

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

// cudaDataType of an activation dtype (cuBLASLt operands)
static inline cudaDataType_t cuda_data_type(vb_dtype t) {
    return t == VB_DTYPE_F32 ? CUDA_R_32F : t == VB_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

// ---------------------------------------------------------------------------
// launch helpers

struct NvtxRange {
    explicit NvtxRange(const char *name) { nvtxRangePushA(name); }
    ~NvtxRange() { nvtxRangePop(); }
    NvtxRange(const NvtxRange &) = delete;
    NvtxRange &operator=(const NvtxRange &) = delete;
};

static inline unsigned cuda_blocks(size_t n, unsigned threads, unsigned cap = CUDA_MAX_GRID_YZ * 8u) {
    size_t b = CEIL_DIV(n, threads);
    if (b < 1) b = 1;
    return b > cap ? cap : (unsigned)b;
}

// grid-stride loop over [0, n)
#define CUDA_GRID_LOOP(i, n)                                                   \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);    \
         i += (size_t)gridDim.x * blockDim.x)

// Block-wide sum (blockDim.x a multiple of WARP_SIZE, at most 1024); the result is
// valid in every thread. The order of the additions depends only on the block
// shape, so repeated runs give identical bits.
template <typename V> __device__ __forceinline__ V warp_sum(V v) {
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <typename V> __device__ V block_sum(V v) {
    __shared__ V part[WARP_SIZE]; // one per warp, read back one per lane
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, nwarps = blockDim.x / WARP_SIZE;
    v = warp_sum(v);
    __syncthreads(); // part[] may still be read by a previous call
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = lane < nwarps ? part[lane] : (V)0;
    return warp_sum(v);
}

// scratch of at least bytes (dies naming the op if the fixed buffer is too
// small, which the launchers prevent by sizing their partial counts to it)
void *cuda_scratch(vb_ctx *ctx, size_t bytes, const char *op);

// ---------------------------------------------------------------------------
// launchers, one family per file (kernels/cuda/cuda_<family>.cu)

// cuda_matmul.cu
void cuda_matmul_forward(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *weight,
                         const vb_act *bias, int N, int C, int OC);
void cuda_matmul_bias_gelu_forward(vb_ctx *ctx, vb_act *pre, vb_act *out, const vb_act *inp,
                                   const vb_act *weight, const vb_act *bias, int N, int C, int OC);
void cuda_matmul_backward(vb_ctx *ctx, vb_act *dinp, float *dweight, float *dbias,
                          const vb_act *dout, const vb_act *inp, const vb_act *weight, int N, int C,
                          int OC, int accumulate_dinp);

// cuda_layernorm.cu
void cuda_layernorm_forward(vb_ctx *ctx, vb_act *out, float *mean, float *rstd, const vb_act *inp,
                            const vb_act *weight, const vb_act *bias, int N, int C, float eps);
void cuda_residual_layernorm_forward(vb_ctx *ctx, vb_act *res, vb_act *out, float *mean,
                                     float *rstd, const vb_act *a, const vb_act *b,
                                     const vb_act *weight, const vb_act *bias, int N, int C,
                                     float eps);
void cuda_layernorm_backward(vb_ctx *ctx, vb_act *dinp_acc, float *dweight, float *dbias,
                             const vb_act *dout, const vb_act *inp, const vb_act *weight,
                             const float *mean, const float *rstd, int N, int C);

// cuda_attention.cu
size_t cuda_attention_workspace_bytes(vb_ctx *ctx, int B, int Tq, int Tk, int NH, int HD);
void cuda_attention_forward(vb_ctx *ctx, vb_act *out, float *lse, void *workspace, const vb_act *q,
                            const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH, int HD);
void cuda_attention_backward(vb_ctx *ctx, vb_act *dq, vb_act *dk, vb_act *dv, void *workspace,
                             const vb_act *dout, const vb_act *out, const float *lse,
                             const vb_act *q, const vb_act *k, const vb_act *v, int B, int Tq,
                             int Tk, int NH, int HD);

// cuda_elementwise.cu
void cuda_gelu_forward(vb_ctx *ctx, vb_act *out, const vb_act *inp, size_t n);
void cuda_gelu_backward(vb_ctx *ctx, vb_act *dinp, const vb_act *inp, const vb_act *dout, size_t n);
void cuda_add(vb_ctx *ctx, vb_act *out, const vb_act *a, const vb_act *b, size_t n);
void cuda_accumulate(vb_ctx *ctx, float *y, const float *x, size_t n);
void cuda_scale(vb_ctx *ctx, float *x, float s, size_t n);
void cuda_sum_squares(vb_ctx *ctx, double *out, const float *x, size_t n);
void cuda_cast_to_act(vb_ctx *ctx, vb_act *dst, const float *src, size_t n);
void cuda_normalize_channels(vb_ctx *ctx, float *x, const float *mean, const float *std, int B, int C,
                             size_t hw);
void cuda_patchify(vb_ctx *ctx, vb_act *patches, const float *img, int B, int C, int H, int W, int p);
void cuda_unpatchify(vb_ctx *ctx, vb_act *img, const vb_act *tokens, int B, int C, int H, int W,
                     int p);
void cuda_unpatchify_backward(vb_ctx *ctx, vb_act *dtokens, const vb_act *dimg, int B, int C, int H,
                              int W, int p);
void cuda_add_pos_embed(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *pos, int B, int T,
                        int D);
void cuda_add_pos_embed_backward(vb_ctx *ctx, float *dpos, const vb_act *dout, int B, int T, int D);
// y[i] = gelu(x[i]) over n (the epilogue of matmul_bias_gelu_forward)
void cuda_gelu_act(vb_ctx *ctx, vb_act *out, const vb_act *inp, size_t n);
// dbias[OC] += column sums of dout[N,OC] (deterministic two-pass)
void cuda_bias_backward(vb_ctx *ctx, float *dbias, const vb_act *dout, int N, int OC);

// amp_mode fp8 (cuda_fp8.cu casts and scale update, cuda_matmul.cu GEMMs).
// The scratch of one FP8 GEMM call: the three inverse scales cuBLASLt
// multiplies the product by (each in a 64-byte slot of its own: cuBLASLt
// reads them as separate device scalars, and none may share another's
// alignment-sensitive word), then the FP8 copies of the operands, each
// region 256-byte aligned; rows padded to a multiple of 16 where N is a
// GEMM's reduction dimension (the weight gradient), with zeros.
enum { CUDA_FP8_INV_X = 0, CUDA_FP8_INV_W = 1, CUDA_FP8_INV_G = 2, CUDA_FP8_INV_SLOT = 64 };
static inline float *cuda_fp8_inv_scale(void *scratch, int which) {
    return (float *)((unsigned char *)scratch + (size_t)which * CUDA_FP8_INV_SLOT);
}
struct cuda_fp8_layout {
    int n_pad;                        // N rounded up to a multiple of 16
    size_t x, w, g, g_t, x_t, w_t;    // byte offsets: inp [N,C], weight [OC,C], dout [N,OC],
                                      // dout^T [OC,n_pad], inp^T [C,n_pad], weight^T [C,OC]
    size_t total;
};
cuda_fp8_layout cuda_fp8_layout_of(int N, int C, int OC);
// in [R,Cc] (act dtype T) * *scale rounded to fmt (vb_fp8_round) as FP8
// bytes: out [R,Cc] and/or out_t [Cc,ld_t] (its transpose, columns R..ld_t
// zero); either may be NULL. inv (may be NULL) = 1 / *scale; amax (may be
// NULL) = max(amax, max |in|), a NaN as +inf (vb_fp8_amax_merge).
void cuda_fp8_cast(vb_ctx *ctx, unsigned char *out, unsigned char *out_t, int ld_t, const vb_act *in, int R,
                   int Cc, const float *scale, float *inv, float *amax, vb_fp8_format fmt);
const char *cuda_fp8_unsupported(vb_ctx *ctx);
size_t cuda_fp8_scratch_bytes(vb_ctx *ctx, int N, int C, int OC);
void cuda_fp8_matmul_forward(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *weight, const vb_act *bias,
                             int N, int C, int OC, const vb_fp8_gemm *g);
void cuda_fp8_matmul_backward(vb_ctx *ctx, vb_act *dinp, float *dweight, float *dbias, const vb_act *dout,
                              const vb_act *inp, const vb_act *weight, int N, int C, int OC, int accumulate_dinp,
                              const vb_fp8_gemm *g);
void cuda_fp8_scale_update(vb_ctx *ctx, float *scale, float *history, int n, int stride, int len, vb_fp8_format fmt,
                           vb_fp8_amax_algo algo, int margin);

// cuda_loss.cu
void cuda_rel_l2_loss_forward(vb_ctx *ctx, float *loss, float *per_sample, const vb_act *pred,
                              const float *tar, int B, size_t n);
void cuda_rel_l2_loss_backward(vb_ctx *ctx, vb_act *dpred, const vb_act *pred, const float *tar,
                               int B, size_t n, const float *dloss);
void cuda_weighted_rmse_accumulate(vb_ctx *ctx, double *rmse_sum, const vb_act *pred,
                                   const float *tar, int B, int C, int H, int W);

// cuda_adam.cu
void cuda_adam_update(vb_ctx *ctx, float *param, vb_act *param_act, const float *grad, float *m,
                      float *v, size_t n, const vb_adam_args *args, const vb_loss_scale_state *ls);
void cuda_grad_unscale_check(vb_ctx *ctx, float *grad, size_t n, vb_loss_scale_state *ls);
void cuda_loss_scale_update(vb_ctx *ctx, vb_loss_scale_state *ls);

#endif
