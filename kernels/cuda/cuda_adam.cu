/* cuda_adam.cu: torch.optim.Adam (no weight decay, no amsgrad) over a flat
 * float32 parameter range, with the step's arguments read from device memory
 * (so a captured step replays with a new learning rate), optionally writing
 * the updated parameters in the activation dtype (the view the next forward
 * reads).
 */
#include "kernels/cuda/cuda_common.cuh"

enum { ADAM_THREADS = 256 };

// g = grad * grad_scale; m = lerp(m, g, 1 - b1); v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
template <typename T>
__global__ void adam_kernel(float *param, T *param_act, const float *grad, float *m, float *v,
                            size_t n, const vb_adam_args *args) {
    __shared__ float sh[6];
    if (threadIdx.x == 0) {
        const vb_adam_args a = *args;
        // bias corrections in double, as PyTorch computes them on Python floats
        const double bc1 = 1.0 - pow((double)a.beta1, (double)a.step);
        const double bc2 = 1.0 - pow((double)a.beta2, (double)a.step);
        sh[0] = (float)((double)a.lr / bc1); // step size
        sh[1] = (float)sqrt(bc2);
        sh[2] = a.beta1;
        sh[3] = a.beta2;
        sh[4] = a.eps;
        sh[5] = a.grad_scale;
    }
    __syncthreads();
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
                      float *v, size_t n, const vb_adam_args *args) {
    NvtxRange r("adam_update");
    if (n == 0) return;
    // a few blocks per SM with grid-stride loops: the per-block pow() stays negligible
    const unsigned blocks = cuda_blocks(n, ADAM_THREADS, (unsigned)cuda_impl_of(ctx)->num_sms * 8);
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        adam_kernel<T><<<blocks, ADAM_THREADS, 0, cuda_stream(ctx)>>>(param, (T *)param_act, grad, m,
                                                                      v, n, args);
        CUDA_LAUNCH_CHECK();
    });
}
