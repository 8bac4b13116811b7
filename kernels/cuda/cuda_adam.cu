/* cuda_adam.cu: torch.optim.Adam (no weight decay, no amsgrad) over a flat
 * float32 parameter range, with the step's arguments read from device memory
 * (so a captured step replays with a new learning rate), optionally writing
 * the updated parameters in the activation dtype (the view the next forward
 * reads); and GradScaler's unscale / skip / update, whose state lives in
 * device memory so that no step waits for the host.
 */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/loss_scale.h"

enum { ADAM_THREADS = 256, UNSCALE_THREADS = 256 };

// g = grad * grad_scale; m = lerp(m, g, 1 - b1); v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
// With a loss scaler (ls non-NULL): nothing at all while ls->found_inf is set,
// and step counts only the updates taken (args->step - ls->skipped).
template <typename T>
__global__ void adam_kernel(float *param, T *param_act, const float *grad, float *m, float *v,
                            size_t n, const vb_adam_args *args, const vb_loss_scale_state *ls) {
    __shared__ float sh[6];
    __shared__ int skip;
    if (threadIdx.x == 0) {
        const vb_adam_args a = *args;
        skip = ls && ls->found_inf != 0.0f;
        const int step = a.step - (ls ? ls->skipped : 0);
        // bias corrections in double, as PyTorch computes them on Python floats
        const double bc1 = 1.0 - pow((double)a.beta1, (double)step);
        const double bc2 = 1.0 - pow((double)a.beta2, (double)step);
        sh[0] = (float)((double)a.lr / bc1); // step size
        sh[1] = (float)sqrt(bc2);
        sh[2] = a.beta1;
        sh[3] = a.beta2;
        sh[4] = a.eps;
        sh[5] = a.grad_scale;
    }
    __syncthreads();
    if (skip) return; // the whole grid sees the same flag: a skipped step writes nothing
    const float step_size = sh[0], bc2_sqrt = sh[1], beta1 = sh[2], beta2 = sh[3], eps = sh[4];
    const float grad_scale = sh[5];
    const float w1 = 1.0f - beta1, w2 = 1.0f - beta2;
    CUDA_GRID_LOOP(i, n) {
        const float g = grad[i] * grad_scale;
        const float mi = m[i] + w1 * (g - m[i]); // PyTorch: exp_avg.lerp_(grad, 1 - beta1)
        const float vi = beta2 * v[i] + w2 * g * g;
        m[i] = mi;
        v[i] = vi;
        const float p = param[i] - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
        param[i] = p;
        if (param_act) param_act[i] = from_f<T>(p);
    }
}

void cuda_adam_update(vb_ctx *ctx, float *param, vb_act *param_act, const float *grad, float *m,
                      float *v, size_t n, const vb_adam_args *args, const vb_loss_scale_state *ls) {
    NvtxRange r("adam_update");
    if (n == 0) return;
    // a few blocks per SM with grid-stride loops: the per-block pow() stays negligible
    const unsigned blocks = cuda_blocks(n, ADAM_THREADS, (unsigned)cuda_impl_of(ctx)->num_sms * 8);
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        adam_kernel<T><<<blocks, ADAM_THREADS, 0, cuda_stream(ctx)>>>(param, (T *)param_act, grad, m,
                                                                      v, n, args, ls);
        CUDA_LAUNCH_CHECK();
    });
}

// grad *= 1/scale; found_inf = 1 when any value was inf or nan before the
// multiply (GradScaler's _amp_foreach_non_finite_check_and_unscale_). Every
// block that sees one writes the same 1.0f: no atomics needed.
__global__ void grad_unscale_check_kernel(float *grad, size_t n, vb_loss_scale_state *ls) {
    const float inv = (float)(1.0 / (double)ls->scale);
    int bad = 0;
    CUDA_GRID_LOOP(i, n) {
        const float g = grad[i];
        bad |= !isfinite(g);
        grad[i] = g * inv;
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) ls->found_inf = 1.0f;
}

void cuda_grad_unscale_check(vb_ctx *ctx, float *grad, size_t n, vb_loss_scale_state *ls) {
    NvtxRange r("grad_unscale_check");
    if (n == 0) return;
    const unsigned blocks = cuda_blocks(n, UNSCALE_THREADS, (unsigned)cuda_impl_of(ctx)->num_sms * 8);
    grad_unscale_check_kernel<<<blocks, UNSCALE_THREADS, 0, cuda_stream(ctx)>>>(grad, n, ls);
    CUDA_LAUNCH_CHECK();
}

// GradScaler's update (kernels/loss_scale.h), on the device; one thread
__global__ void loss_scale_update_kernel(vb_loss_scale_state *ls) {
    vb_loss_scale_step(ls);
}

void cuda_loss_scale_update(vb_ctx *ctx, vb_loss_scale_state *ls) {
    NvtxRange r("loss_scale_update");
    loss_scale_update_kernel<<<1, 1, 0, cuda_stream(ctx)>>>(ls);
    CUDA_LAUNCH_CHECK();
}
