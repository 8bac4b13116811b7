/* adam.c: torch.optim.Adam (no weight decay, no amsgrad), single-tensor path. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

// m = lerp(m, g, 1 - b1); v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
void cpu_adam_update(float *param, const float *grad, float *m, float *v, size_t n, float lr,
                     float beta1, float beta2, float eps, int step) {
    // bias corrections in double, as PyTorch computes them on Python floats
    const double bc1 = 1.0 - pow((double)beta1, (double)step);
    const double bc2 = 1.0 - pow((double)beta2, (double)step);
    const float step_size = (float)((double)lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float w1 = 1.0f - beta1, w2 = 1.0f - beta2;
    // Vectorised only because kernels/cpu is compiled with -fno-math-errno
    // (CMakeLists.txt): with errno semantics sqrtf is a library call per lane
    // and neither GCC nor clang can vectorise the loop.
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = grad[i];
        // PyTorch updates exp_avg with lerp_(grad, 1 - beta1): m + w1 (g - m)
        float mi = m[i] + w1 * (g - m[i]);
        float vi = beta2 * v[i] + w2 * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}
