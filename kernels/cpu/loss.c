/* loss.c: the tutorial's training loss (l2_loss_opt) and its validation metric
 * (utils/metrics.py weighted_rmse_channels). Sums run in double: a sample has
 * millions of elements at full resolution. Results go to backend memory (on
 * the CPU plain memory the host reads after the step). */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

// sum (pred - tar)^2 and sum tar^2 over one sample's n elements
static void sample_sums(const float *pred, const float *tar, size_t n, double *diff_sq,
                        double *tar_sq) {
    double dsum = 0.0, tsum = 0.0;
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static) reduction(+ : dsum, tsum)
    for (size_t i = 0; i < n; i++) {
        double d = (double)pred[i] - (double)tar[i];
        dsum += d * d;
        tsum += (double)tar[i] * (double)tar[i];
    }
    *diff_sq = dsum;
    *tar_sq = tsum;
}

// *loss = mean_b ||pred_b - tar_b|| / ||tar_b||
void cpu_rel_l2_loss_forward(vb_ctx *ctx, float *loss, float *per_sample, const vb_act *pred_,
                             const float *tar, int B, size_t n) {
    (void)ctx;
    const float *pred = pred_;
    if (B <= 0) {
        if (loss) *loss = 0.0f;
        return;
    }
    double total = 0.0;
    for (int b = 0; b < B; b++) {
        double diff_sq, tar_sq;
        sample_sums(pred + (size_t)b * n, tar + (size_t)b * n, n, &diff_sq, &tar_sq);
        double term = sqrt(diff_sq) / sqrt(tar_sq); // ||tar|| = 0 gives inf/NaN, as PyTorch
        if (per_sample) per_sample[b] = (float)term;
        total += term;
    }
    if (loss) *loss = (float)(total / B);
}

// dpred = dloss / B * (pred - tar) / (||pred - tar|| ||tar||)   (overwrites)
void cpu_rel_l2_loss_backward(vb_ctx *ctx, vb_act *dpred_, const vb_act *pred_, const float *tar, int B,
                              size_t n, const float *dloss_p) {
    (void)ctx;
    float *dpred = dpred_;
    const float *pred = pred_;
    if (B <= 0) return;
    const double dloss = dloss_p ? (double)*dloss_p : 1.0;
    for (int b = 0; b < B; b++) {
        const float *p = pred + (size_t)b * n, *t = tar + (size_t)b * n;
        float *g = dpred + (size_t)b * n;
        double diff_sq, tar_sq;
        sample_sums(p, t, n, &diff_sq, &tar_sq);
        // the norm's gradient at pred == tar is taken as 0 (PyTorch's subgradient)
        float coef = diff_sq > 0.0 ? (float)(dloss / (double)B / (sqrt(diff_sq) * sqrt(tar_sq))) : 0.0f;
        #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
        for (size_t i = 0; i < n; i++) g[i] = coef * (p[i] - t[i]);
    }
}

// rmse_sum[c] += sum_b sqrt(mean_{h,w} w(h) (pred - tar)^2), with the
// tutorial's latitude weights: lat(j) = 90 - j*180/(H-1),
// w(j) = H cos(3.1416/180 lat(j)) / sum_j' cos(3.1416/180 lat(j')).
// (3.1416 rather than pi is what the tutorial writes; we keep it to match.)
void cpu_weighted_rmse_accumulate(vb_ctx *ctx, double *rmse_out, const vb_act *pred_, const float *tar,
                                  int B, int C, int H, int W) {
    (void)ctx;
    const float *pred = pred_;
    if (B <= 0 || C <= 0 || H <= 0 || W <= 0) return;
    const double deg = 3.1416 / 180.0;
    // H == 1 has no latitude spacing (the tutorial divides by zero); weight 1.
    double cos_sum = 0.0;
    for (int j = 0; j < H; j++) cos_sum += H > 1 ? cos(deg * (90.0 - j * 180.0 / (H - 1))) : 1.0;
    const size_t plane = (size_t)H * W;
    for (int c = 0; c < C; c++) {
        double rmse_sum = 0.0;
        for (int b = 0; b < B; b++) {
            const float *p = pred + ((size_t)b * C + c) * plane;
            const float *t = tar + ((size_t)b * C + c) * plane;
            double weighted = 0.0;
            #pragma omp parallel for if (plane >= VB_CPU_PAR_MIN) schedule(static) reduction(+ : weighted)
            for (int j = 0; j < H; j++) {
                double lat_w = H > 1 ? H * cos(deg * (90.0 - j * 180.0 / (H - 1))) / cos_sum : 1.0;
                double row = 0.0;
                #pragma omp simd reduction(+ : row)
                for (int x = 0; x < W; x++) {
                    double d = (double)p[(size_t)j * W + x] - (double)t[(size_t)j * W + x];
                    row += d * d;
                }
                weighted += lat_w * row;
            }
            rmse_sum += sqrt(weighted / (double)plane);
        }
        rmse_out[c] += rmse_sum;
    }
}
