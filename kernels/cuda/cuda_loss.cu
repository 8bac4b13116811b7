/* cuda_loss.cu: the training loss (relative L2, the tutorial's l2_loss_opt) and
 * the validation metric (latitude-weighted RMSE per channel, the tutorial's
 * weighted_rmse_channels). Sums over a sample run in float64, as on the CPU:
 * a full-resolution sample has millions of elements. Every reduction is
 * two-pass (per-block partials in the context's scratch, then a fixed-order
 * sum), so results are bitwise reproducible; results stay in device memory.
 */
#include <math.h>

#include "kernels/cuda/cuda_common.cuh"

enum { LOSS_THREADS = 256 };

// partial[(b * nblk + blk) * 2 + {0, 1}] = sums of (pred - tar)^2 and tar^2 over
// this block's strided share of sample b; grid (B, nblk)
template <typename T>
__global__ void rel_l2_partial_kernel(double *partial, const T *pred, const float *tar, size_t n) {
    const int b = blockIdx.x, blk = blockIdx.y, nblk = gridDim.y;
    const T *p = pred + (size_t)b * n;
    const float *t = tar + (size_t)b * n;
    double dsum = 0.0, tsum = 0.0;
    for (size_t i = (size_t)blk * blockDim.x + threadIdx.x; i < n; i += (size_t)nblk * blockDim.x) {
        double tv = (double)t[i];
        double d = (double)to_f(p[i]) - tv;
        dsum += d * d;
        tsum += tv * tv;
    }
    dsum = block_sum(dsum);
    tsum = block_sum(tsum);
    if (threadIdx.x == 0) {
        double *out = partial + ((size_t)b * nblk + blk) * 2;
        out[0] = dsum;
        out[1] = tsum;
    }
}

// one block: sums[b] = (diff_sq, tar_sq) from the partials, then either the
// loss (loss[0] = mean_b sqrt(diff_sq)/sqrt(tar_sq), per_sample[b]) or the
// backward's coefficient coef[b] = dloss / B / (||pred_b - tar_b|| ||tar_b||)
// (0 where pred_b == tar_b: PyTorch's subgradient of the norm at 0)
__global__ void rel_l2_final_kernel(float *loss, float *per_sample, float *coef, const double *partial,
                                    int nblk, int B, const float *dloss) {
    double total = 0.0;
    for (int b = 0; b < B; b++) {
        double d = 0.0, t = 0.0;
        for (int i = threadIdx.x; i < nblk; i += blockDim.x) {
            d += partial[((size_t)b * nblk + i) * 2];
            t += partial[((size_t)b * nblk + i) * 2 + 1];
        }
        d = block_sum(d);
        t = block_sum(t);
        if (threadIdx.x == 0) {
            if (coef) {
                double dl = dloss ? (double)*dloss : 1.0;
                coef[b] = d > 0.0 ? (float)(dl / (double)B / (sqrt(d) * sqrt(t))) : 0.0f;
            } else {
                double term = sqrt(d) / sqrt(t); // ||tar|| = 0 gives inf/NaN, as PyTorch
                if (per_sample) per_sample[b] = (float)term;
                total += term;
            }
        }
    }
    if (threadIdx.x == 0 && loss) loss[0] = (float)(total / B);
}

// dpred[b, i] = coef[b] * (pred - tar)   (overwrites)
template <typename T>
__global__ void rel_l2_backward_kernel(T *dpred, const T *pred, const float *tar, const float *coef,
                                       size_t n, size_t total) {
    CUDA_GRID_LOOP(i, total) dpred[i] = from_f<T>(coef[i / n] * (to_f(pred[i]) - tar[i]));
}

// blocks per sample: about four blocks per SM over the batch, and at least
// 1024 elements per block
static int rel_l2_blocks(vb_ctx *ctx, int B, size_t n) {
    long per = CEIL_DIV((long)cuda_impl_of(ctx)->num_sms * 4, B);
    long max_by_n = (long)CEIL_DIV(n, 1024);
    if (per > max_by_n) per = max_by_n;
    if (per > CUDA_MAX_GRID_YZ) per = CUDA_MAX_GRID_YZ;
    return per < 1 ? 1 : (int)per;
}

static double *rel_l2_partials(vb_ctx *ctx, const vb_act *pred, const float *tar, int B, size_t n,
                               int nblk) {
    double *partial = (double *)cuda_scratch(
        ctx, (size_t)B * nblk * 2 * sizeof(double) + (size_t)B * sizeof(float), "rel_l2_loss");
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        rel_l2_partial_kernel<T><<<dim3(B, nblk), LOSS_THREADS, 0, cuda_stream(ctx)>>>(
            partial, (const T *)pred, tar, n);
        CUDA_LAUNCH_CHECK();
    });
    return partial;
}

// loss[1] = mean_b ||pred_b - tar_b|| / ||tar_b||; per_sample[B] (may be NULL)
void cuda_rel_l2_loss_forward(vb_ctx *ctx, float *loss, float *per_sample, const vb_act *pred,
                              const float *tar, int B, size_t n) {
    NvtxRange r("rel_l2_loss_forward");
    if (B <= 0) {
        CUDACHECK(cudaMemsetAsync(loss, 0, sizeof(float), cuda_stream(ctx)));
        return;
    }
    const int nblk = rel_l2_blocks(ctx, B, n);
    double *partial = rel_l2_partials(ctx, pred, tar, B, n, nblk);
    rel_l2_final_kernel<<<1, LOSS_THREADS, 0, cuda_stream(ctx)>>>(loss, per_sample, NULL, partial,
                                                                  nblk, B, NULL);
    CUDA_LAUNCH_CHECK();
}

// dpred[B, n] = dloss * d loss / d pred (overwrites); dloss device memory or NULL (1)
void cuda_rel_l2_loss_backward(vb_ctx *ctx, vb_act *dpred, const vb_act *pred, const float *tar,
                               int B, size_t n, const float *dloss) {
    NvtxRange r("rel_l2_loss_backward");
    if (B <= 0 || n == 0) return;
    const int nblk = rel_l2_blocks(ctx, B, n);
    double *partial = rel_l2_partials(ctx, pred, tar, B, n, nblk);
    float *coef = (float *)(partial + (size_t)B * nblk * 2);
    rel_l2_final_kernel<<<1, LOSS_THREADS, 0, cuda_stream(ctx)>>>(NULL, NULL, coef, partial, nblk, B,
                                                                  dloss);
    CUDA_LAUNCH_CHECK();
    const size_t total = (size_t)B * n;
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        rel_l2_backward_kernel<T><<<cuda_blocks(total, 256), 256, 0, cuda_stream(ctx)>>>(
            (T *)dpred, (const T *)pred, tar, coef, n, total);
        CUDA_LAUNCH_CHECK();
    });
}

// ---------------------------------------------------------------------------
// rmse_sum[c] += sum_b sqrt(mean_{j,x} w(j) (pred - tar)^2), with the
// tutorial's latitude weights lat(j) = 90 - j*180/(H-1),
// w(j) = H cos(3.1416/180 lat(j)) / sum_j' cos(3.1416/180 lat(j'))
// (3.1416, not pi, is what the tutorial writes; H == 1 gives weight 1)

__global__ void lat_weights_kernel(double *w, int H, double cos_sum) {
    const double deg = 3.1416 / 180.0;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < H; j += gridDim.x * blockDim.x)
        w[j] = H > 1 ? H * cos(deg * (90.0 - j * 180.0 / (H - 1))) / cos_sum : 1.0;
}

// partial[bc * chunks + chunk] = sum over rows [chunk * rows_per, ...) of plane
// bc = b * C + c of w(j) (pred - tar)^2
template <typename T>
__global__ void rmse_partial_kernel(double *partial, const double *w, const T *pred,
                                    const float *tar, int H, int W, int rows_per) {
    const size_t bc = blockIdx.x;
    const int chunk = blockIdx.y, chunks = gridDim.y;
    const int j0 = chunk * rows_per, j1 = min(H, j0 + rows_per);
    const size_t plane = (size_t)H * W;
    const T *p = pred + bc * plane;
    const float *t = tar + bc * plane;
    double acc = 0.0;
    for (size_t i = (size_t)j0 * W + threadIdx.x; i < (size_t)j1 * W; i += blockDim.x) {
        double d = (double)to_f(p[i]) - (double)t[i];
        acc += w[i / W] * (d * d);
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0) partial[bc * chunks + chunk] = acc;
}

__global__ void rmse_final_kernel(double *rmse_sum, const double *partial, int B, int C, int chunks,
                                  double plane) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s = 0.0;
    for (int b = 0; b < B; b++) {
        const double *pp = partial + ((size_t)b * C + c) * chunks;
        double weighted = 0.0;
        for (int k = 0; k < chunks; k++) weighted += pp[k];
        s += sqrt(weighted / plane);
    }
    rmse_sum[c] += s;
}

void cuda_weighted_rmse_accumulate(vb_ctx *ctx, double *rmse_sum, const vb_act *pred,
                                   const float *tar, int B, int C, int H, int W) {
    NvtxRange r("weighted_rmse_accumulate");
    if (B <= 0 || C <= 0 || H <= 0 || W <= 0) return;
    cuda_impl *c = cuda_impl_of(ctx);
    const double deg = 3.1416 / 180.0;
    double cos_sum = 0.0;
    for (int j = 0; j < H; j++) cos_sum += H > 1 ? cos(deg * (90.0 - j * 180.0 / (H - 1))) : 1.0;
    const long planes = (long)B * C;
    long chunks = CEIL_DIV((long)c->num_sms * 4, planes);
    if (chunks > H) chunks = H;
    if (chunks > CUDA_MAX_GRID_YZ) chunks = CUDA_MAX_GRID_YZ;
    if (chunks < 1) chunks = 1;
    const int rows_per = (int)CEIL_DIV(H, chunks);
    chunks = CEIL_DIV(H, rows_per);
    double *w = (double *)cuda_scratch(ctx, ((size_t)H + (size_t)planes * chunks) * sizeof(double),
                                       "weighted_rmse_accumulate");
    double *partial = w + H;
    lat_weights_kernel<<<cuda_blocks((size_t)H, 256), 256, 0, c->stream>>>(w, H, cos_sum);
    CUDA_LAUNCH_CHECK();
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        rmse_partial_kernel<T><<<dim3((unsigned)planes, (unsigned)chunks), LOSS_THREADS, 0, c->stream>>>(
            partial, w, (const T *)pred, tar, H, W, rows_per);
        CUDA_LAUNCH_CHECK();
    });
    rmse_final_kernel<<<CEIL_DIV(C, 128), 128, 0, c->stream>>>(rmse_sum, partial, B, C, (int)chunks,
                                                             (double)H * W);
    CUDA_LAUNCH_CHECK();
}
