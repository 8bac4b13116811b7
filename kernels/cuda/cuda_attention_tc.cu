/* cuda_attention_tc.cu: the launchers of the tensor-core attention kernels
 * (cuda_attention_tc.cuh): bfloat16 and float16 activations, and float32 with
 * TF32 math. cuda_attention.cu calls these for HD <= 64, Tq, Tk > 0.
 */
#include <math.h>
#include <stdint.h>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_mma.cuh"
#include "kernels/cuda/cuda_attention_tc.cuh"

namespace {

// f(ops tag) for the context's activation dtype
template <typename F> void dispatch_ops(vb_ctx *ctx, F f) {
    switch (ctx->act) {
    case VB_DTYPE_BF16: f(act_tag<tc::ops16<tc_bf16>>{}); break;
    case VB_DTYPE_F16: f(act_tag<tc::ops16<tc_f16>>{}); break;
    case VB_DTYPE_F32: f(act_tag<tc::ops_tf32>{}); break;
    }
}

} // namespace

void cuda_attention_tc_forward(vb_ctx *ctx, vb_act *out, float *lse, const vb_act *q,
                               const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH,
                               int HD) {
    cudaStream_t st = cuda_stream(ctx);
    const float scale_log2 = tc::LOG2E / sqrtf((float)HD);
    dim3 grid(CEIL_DIV(Tq, tc::FWD_ROWS), B * NH);
    dispatch_ops(ctx, [&](auto tag) {
        typedef typename decltype(tag)::type OP;
        typedef typename OP::in_t In;
        const bool vec = tc::vec_ok<OP>(HD, q, k, v, q);
        tc::dispatch(HD, vec, [&](auto hdp, auto vc) {
            constexpr int HDP = decltype(hdp)::value;
            constexpr bool VEC = decltype(vc)::value;
            tc::forward_kernel<OP, HDP, VEC><<<grid, tc::FWD_THREADS, 0, st>>>(
                (typename OP::out_t *)out, lse, (const In *)q, (const In *)k, (const In *)v, Tq, Tk,
                NH, HD, scale_log2);
            CUDA_LAUNCH_CHECK();
        });
    });
}

// Dd[B,NH,Tq] = rowsum(dO * O) is already in place.
void cuda_attention_tc_backward(vb_ctx *ctx, vb_act *dq, vb_act *dk, vb_act *dv, const float *Dd,
                                const vb_act *dout, const float *lse, const vb_act *q,
                                const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH,
                                int HD) {
    cudaStream_t st = cuda_stream(ctx);
    const float scale = 1.0f / sqrtf((float)HD);
    const float scale_log2 = tc::LOG2E * scale;
    dispatch_ops(ctx, [&](auto tag) {
        typedef typename decltype(tag)::type OP;
        typedef typename OP::in_t In;
        typedef typename OP::out_t Out;
        const bool vec = tc::vec_ok<OP>(HD, q, k, v, dout);
        tc::dispatch(HD, vec, [&](auto hdp, auto vc) {
            constexpr int HDP = decltype(hdp)::value;
            constexpr bool VEC = decltype(vc)::value;
            if (dk || dv) {
                dim3 grid(CEIL_DIV(Tk, tc::COLS), B * NH);
                tc::dkdv_kernel<OP, HDP, VEC><<<grid, tc::THREADS, 0, st>>>(
                    (Out *)dk, (Out *)dv, (const In *)q, (const In *)k, (const In *)v,
                    (const In *)dout, lse, Dd, Tq, Tk, NH, HD, scale, scale_log2);
                CUDA_LAUNCH_CHECK();
            }
            if (dq) {
                dim3 grid(CEIL_DIV(Tq, tc::ROWS), B * NH);
                tc::dq_kernel<OP, HDP, VEC><<<grid, tc::THREADS, 0, st>>>(
                    (Out *)dq, (const In *)q, (const In *)k, (const In *)v, (const In *)dout, lse,
                    Dd, Tq, Tk, NH, HD, scale, scale_log2);
                CUDA_LAUNCH_CHECK();
            }
        });
    });
}
