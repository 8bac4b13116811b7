/* adam.c: torch.optim.Adam (no weight decay, no amsgrad), single-tensor path,
 * and GradScaler's unscale / skip / update for dynamic loss scaling. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/loss_scale.h"

// m = lerp(m, g s, 1 - b1); v = b2 v + (1 - b2) (g s)^2;
// p -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
// with s = grad_scale. args live in backend memory, which on the CPU the
// host reads directly. The CPU's activations are its float32 params, so
// param_act is NULL (or the params themselves) and needs no second write.
void cpu_adam_update(vb_ctx *ctx, float *param, vb_act *param_act, const float *grad, float *m,
                     float *v, size_t n, const vb_adam_args *args, const vb_loss_scale_state *ls) {
    (void)ctx;
    // a step with a non-finite gradient is skipped whole: nothing is written
    if (ls && ls->found_inf != 0.0f) return;
    const float lr = args->lr, beta1 = args->beta1, beta2 = args->beta2, eps = args->eps;
    const float gs = args->grad_scale;
    // steps skipped by the loss scaler never happened for Adam's bias corrections
    const int step = args->step - (ls ? ls->skipped : 0);
    // bias corrections in double, as PyTorch computes them on Python floats
    const double bc1 = 1.0 - pow((double)beta1, (double)step);
    const double bc2 = 1.0 - pow((double)beta2, (double)step);
    const float step_size = (float)((double)lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float w1 = 1.0f - beta1, w2 = 1.0f - beta2;
    float *pa = param_act != (vb_act *)param ? (float *)param_act : NULL;
    // Vectorised only because kernels/cpu is compiled with -fno-math-errno
    // (CMakeLists.txt): with errno semantics sqrtf is a library call per lane
    // and neither GCC nor clang can vectorise the loop. A grad_scale of 1 (every
    // float32 run) multiplies exactly, so the update is the unscaled one bit for bit.
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * gs;
        // PyTorch updates exp_avg with lerp_(grad, 1 - beta1): m + w1 (g - m)
        float mi = m[i] + w1 * (g - m[i]);
        float vi = beta2 * v[i] + w2 * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
    if (pa) cpu_cast_to_act(ctx, pa, param, n);
}

// GradScaler's _amp_foreach_non_finite_check_and_unscale_: the finiteness of
// each value before the multiply decides; 1/scale is a power of two for every
// scale the scaler produces, so the multiply is exact.
void cpu_grad_unscale_check(vb_ctx *ctx, float *grad, size_t n, vb_loss_scale_state *ls) {
    (void)ctx;
    const float inv = (float)(1.0 / (double)ls->scale);
    int bad = 0;
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static) reduction(| : bad)
    for (size_t i = 0; i < n; i++) {
        const float g = grad[i];
        bad |= !isfinite(g);
        grad[i] = g * inv;
    }
    if (bad) ls->found_inf = 1.0f;
}

// GradScaler's update (kernels/loss_scale.h), on the host
void cpu_loss_scale_update(vb_ctx *ctx, vb_loss_scale_state *ls) {
    (void)ctx;
    vb_loss_scale_step(ls);
}
