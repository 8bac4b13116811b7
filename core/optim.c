/* optim.c: torch.optim.Adam (no weight decay) over the flat parameter buffer
 * and the tutorial's learning-rate schedules (train.py). */
#include "core/optim.h"

#include <math.h>
#include <string.h>

#include "core/common.h"

void vb_adam_init(vb_adam *a, size_t n, const vb_ops *ops) {
    memset(a, 0, sizeof *a);
    /* the tutorial: optim.Adam(model.parameters(), lr, betas=(0.9, 0.95)), eps default 1e-8 */
    a->beta1 = 0.9f;
    a->beta2 = 0.95f;
    a->eps = 1e-8f;
    a->step = 0;
    a->n = n;
    a->ops = ops;
    a->m = ops->alloc(n * sizeof(float)); /* zero-filled == torch's fresh state */
    a->v = ops->alloc(n * sizeof(float));
}

void vb_adam_free(vb_adam *a) {
    if (!a || !a->ops) return;
    a->ops->free(a->m);
    a->ops->free(a->v);
    a->m = a->v = NULL;
}

void vb_adam_step(vb_adam *a, float *params, const float *grads, float lr, vb_profiler *prof) {
    VB_NVTX_PUSH("optimizer");
    a->step++;
    int id = VB_OP_ID(prof, "adam_update", VB_CAT_COMPUTE);
    double t0 = vb_prof_begin(prof, id);
    a->ops->adam_update(params, grads, a->m, a->v, a->n, lr, a->beta1, a->beta2, a->eps, a->step);
    /* per parameter: reads param, grad, m, v and writes param, m, v; ~12 FLOPs
     * (two moment updates, bias corrections, sqrt, divide, the step) */
    vb_prof_end_flops(prof, id, t0, 7 * sizeof(float) * a->n, 12.0 * (double)a->n);
    VB_NVTX_POP();
}

float vb_lr_at(const char *schedule, float lr, int warmup, int num_iters, int t) {
    if (strcmp(schedule, "constant") == 0) return lr;
    if (strcmp(schedule, "cosine") != 0)
        vb_die_input("lr_schedule '%s' is unknown (expected 'cosine' or 'constant')", schedule);
    if (num_iters < 1) vb_die_input("num_iters must be >= 1 for the cosine lr_schedule (got %d)", num_iters);
    /* CosineAnnealingLR(T_max=num_iters, eta_min=0) in closed form; with warmup the
     * tutorial's LambdaLR: min((t+1)/warmup, cosine factor). Doubles, like Python. */
    const double pi = 3.14159265358979323846;
    double cosine = 0.5 * (1.0 + cos(pi * (double)t / (double)num_iters));
    double scale = cosine;
    if (warmup > 0) {
        double ramp = (double)(t + 1) / (double)warmup;
        scale = ramp < cosine ? ramp : cosine;
    }
    return (float)((double)lr * scale);
}
