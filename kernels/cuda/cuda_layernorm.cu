/* cuda_layernorm.cu: nn.LayerNorm over the last dimension (biased variance),
 * the fused residual add + LayerNorm, and the backward.
 *
 * Forward and the input gradient: one warp per row, statistics in float32
 * with a two-pass variance (mean first, then sum (x - mean)^2, as the CPU
 * backend computes it: no cancellation when |mean| >> std). The weight and
 * bias gradients are column sums over all rows, done deterministically in two
 * passes (per row-range partials in the context's scratch, then a fixed-order
 * sum per column); no atomics, so they are bitwise reproducible. For C up to
 * 1024 the input gradient and the partials come from one fused pass over the
 * rows (layernorm_backward_fused_kernel); wider rows take the separate
 * row-per-warp and column-block kernels.
 */
#include "kernels/cuda/cuda_common.cuh"

enum { LN_THREADS = 256, LN_ROWS_PER_BLOCK = LN_THREADS / WARP_SIZE };

// RESID: res[row] = a + b (rounded to T, what the backward will see as inp), then
// out = (res - mean) * rstd * weight + bias. Otherwise a is the input.
// res may alias a: each element is read and written by the same lane.
template <typename T, bool RESID>
__global__ void layernorm_forward_kernel(T *res, T *out, float *mean, float *rstd, const T *a,
                                         const T *b, const T *weight, const T *bias, int N, int C,
                                         float eps) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * LN_ROWS_PER_BLOCK + threadIdx.x / WARP_SIZE;
    if (row >= N) return;
    const size_t off = (size_t)row * C;
    const T *x = RESID ? res + off : a + off;
    float sum = 0.0f;
    if (RESID) {
        for (int i = lane; i < C; i += WARP_SIZE) {
            T r = from_f<T>(to_f(a[off + i]) + to_f(b[off + i]));
            res[off + i] = r;
            sum += to_f(r);
        }
    } else {
        for (int i = lane; i < C; i += WARP_SIZE) sum += to_f(x[i]);
    }
    const float m = warp_sum(sum) / C;
    float sq = 0.0f;
    for (int i = lane; i < C; i += WARP_SIZE) {
        float d = to_f(x[i]) - m;
        sq += d * d;
    }
    const float s = 1.0f / sqrtf(warp_sum(sq) / C + eps);
    T *y = out + off;
    for (int i = lane; i < C; i += WARP_SIZE)
        y[i] = from_f<T>((to_f(x[i]) - m) * s * to_f(weight[i]) + to_f(bias[i]));
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = s;
    }
}

// dinp_acc[row] += rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), dnorm = weight * dout
template <typename T>
__global__ void layernorm_backward_dinp_kernel(T *dinp, const T *dout, const T *inp, const T *weight,
                                               const float *mean, const float *rstd, int N, int C) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * LN_ROWS_PER_BLOCK + threadIdx.x / WARP_SIZE;
    if (row >= N) return;
    const size_t off = (size_t)row * C;
    const float m = mean[row], s = rstd[row];
    float dn_sum = 0.0f, dn_xhat_sum = 0.0f;
    for (int i = lane; i < C; i += WARP_SIZE) {
        float dn = to_f(weight[i]) * to_f(dout[off + i]);
        dn_sum += dn;
        dn_xhat_sum += dn * (to_f(inp[off + i]) - m) * s;
    }
    const float dn_mean = warp_sum(dn_sum) / C, dn_xhat_mean = warp_sum(dn_xhat_sum) / C;
    for (int i = lane; i < C; i += WARP_SIZE) {
        float xhat = (to_f(inp[off + i]) - m) * s;
        float g = (to_f(weight[i]) * to_f(dout[off + i]) - dn_mean - xhat * dn_xhat_mean) * s;
        dinp[off + i] = from_f<T>(to_f(dinp[off + i]) + g);
    }
}

// pass 1 of dweight/dbias: block (32, 8) owns 32 columns and rows [r0, r0 + rows_per);
// pw/pb[blockIdx.y][col] = sum over those rows of dout * xhat / dout
template <typename T>
__global__ void layernorm_param_partial_kernel(float *pw, float *pb, const T *dout, const T *inp,
                                               const float *mean, const float *rstd, int N, int C,
                                               int rows_per) {
    __shared__ float shw[8][33], shb[8][33];
    const int col = blockIdx.x * WARP_SIZE + threadIdx.x;
    const int r0 = blockIdx.y * rows_per, r1 = min(N, r0 + rows_per);
    float aw = 0.0f, ab = 0.0f;
    if (col < C) {
        for (int r = r0 + threadIdx.y; r < r1; r += 8) {
            float dy = to_f(dout[(size_t)r * C + col]);
            aw += dy * (to_f(inp[(size_t)r * C + col]) - mean[r]) * rstd[r];
            ab += dy;
        }
    }
    shw[threadIdx.y][threadIdx.x] = aw;
    shb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && col < C) {
        float sw = 0.0f, sb = 0.0f;
        for (int j = 0; j < 8; j++) {
            sw += shw[j][threadIdx.x];
            sb += shb[j][threadIdx.x];
        }
        pw[(size_t)blockIdx.y * C + col] = sw;
        pb[(size_t)blockIdx.y * C + col] = sb;
    }
}

// pass 2: dweight[col] += sum_r pw[r][col], dbias likewise (either may be NULL)
__global__ void layernorm_param_final_kernel(float *dweight, float *dbias, const float *pw,
                                             const float *pb, int R, int C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= C) return;
    float sw = 0.0f, sb = 0.0f;
    for (int r = 0; r < R; r++) {
        sw += pw[(size_t)r * C + col];
        sb += pb[(size_t)r * C + col];
    }
    if (dweight) dweight[col] += sw;
    if (dbias) dbias[col] += sb;
}

// The fused backward for C <= LN_FUSED_MAX_C: one pass over the rows gives
// the input gradient and the per-block column partials of dweight/dbias.
// Warp w of block b takes rows (b * 8 + w) + k * gridDim.x * 8; lane l owns
// columns l, l + 32, ... (pairs of them when C is even) in registers, so
// every row is read whole and coalesced, once for the row sums and once for
// the writes (the second read hits L1/L2), with every warp of the GPU streaming rows at once. The block's
// 8 warps then add their partials in a fixed order (shared memory, warp by
// warp) into pw/pb[blockIdx.x][C]; layernorm_param_sum_kernel sums the block
// rows in a fixed order too: no atomics, bitwise reproducible on one device.
enum { LN_FUSED_MAX_C = 1024, LN_FUSED_CPL = LN_FUSED_MAX_C / WARP_SIZE };

// E elements a lane per access: 2 (one 4-byte bf16/f16 pair, 8-byte float
// pair) when C is even, else 1; lane l's k-th access covers columns
// (l + 32 k) E .. + E - 1.
template <typename T, int E> struct ln_elems {
    alignas(E * sizeof(T)) T v[E];
};

template <typename T, int E>
__global__ void __launch_bounds__(LN_THREADS)
    layernorm_backward_fused_kernel(T *dinp, float *pw, float *pb, const T *dout, const T *inp,
                                    const T *weight, const float *mean, const float *rstd, int N,
                                    int C) {
    extern __shared__ float ln_smem[]; // [2][C]
    typedef ln_elems<T, E> V;
    constexpr int K = LN_FUSED_CPL / E; // accesses a lane makes per row
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int CV = C / E; // accesses per row
    const V *wv = reinterpret_cast<const V *>(weight);
    float aw[LN_FUSED_CPL], ab[LN_FUSED_CPL];
#pragma unroll
    for (int j = 0; j < LN_FUSED_CPL; j++) aw[j] = ab[j] = 0.0f;
    for (int row = blockIdx.x * LN_ROWS_PER_BLOCK + warp; row < N;
         row += gridDim.x * LN_ROWS_PER_BLOCK) {
        const V *dov = reinterpret_cast<const V *>(dout + (size_t)row * C);
        const V *inv = reinterpret_cast<const V *>(inp + (size_t)row * C);
        const float m = mean[row], s = rstd[row];
        float dn_sum = 0.0f, dn_xhat_sum = 0.0f;
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int a = lane + WARP_SIZE * k;
            if (a < CV) {
                const V dy = dov[a], x = inv[a], w = wv[a];
#pragma unroll
                for (int e = 0; e < E; e++) {
                    const float dn = to_f(w.v[e]) * to_f(dy.v[e]);
                    dn_sum += dn;
                    dn_xhat_sum += dn * (to_f(x.v[e]) - m) * s;
                }
            }
        }
        const float dn_mean = warp_sum(dn_sum) / C, dn_xhat_mean = warp_sum(dn_xhat_sum) / C;
        V *dv = dinp ? reinterpret_cast<V *>(dinp + (size_t)row * C) : nullptr;
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int a = lane + WARP_SIZE * k;
            if (a < CV) {
                const V dy = dov[a], x = inv[a], w = wv[a];
                V acc;
                if (dv) acc = dv[a];
#pragma unroll
                for (int e = 0; e < E; e++) {
                    const float xhat = (to_f(x.v[e]) - m) * s;
                    const float g = (to_f(w.v[e]) * to_f(dy.v[e]) - dn_mean - xhat * dn_xhat_mean) * s;
                    if (dv) acc.v[e] = from_f<T>(to_f(acc.v[e]) + g);
                    aw[k * E + e] += to_f(dy.v[e]) * xhat;
                    ab[k * E + e] += to_f(dy.v[e]);
                }
                if (dv) dv[a] = acc;
            }
        }
    }
    float *sw = ln_smem, *sb = ln_smem + C;
    for (int w = 0; w < LN_ROWS_PER_BLOCK; w++) {
        if (warp == w) {
#pragma unroll
            for (int j = 0; j < LN_FUSED_CPL; j++) {
                const int i = (lane + WARP_SIZE * (j / E)) * E + j % E;
                if (i < C) {
                    sw[i] = w == 0 ? aw[j] : sw[i] + aw[j];
                    sb[i] = w == 0 ? ab[j] : sb[i] + ab[j];
                }
            }
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < C; i += LN_THREADS) {
        pw[(size_t)blockIdx.x * C + i] = sw[i];
        pb[(size_t)blockIdx.x * C + i] = sb[i];
    }
}

// dweight[col] += sum_r pw[r][col] (dbias likewise): block (32, 8) owns 32
// columns; thread (x, y) sums rows y, y + 8, ... then the 8 sums are added in
// order. Either output may be NULL.
__global__ void layernorm_param_sum_kernel(float *dweight, float *dbias, const float *pw,
                                           const float *pb, int R, int C) {
    __shared__ float shw[8][33], shb[8][33];
    const int col = blockIdx.x * WARP_SIZE + threadIdx.x;
    float sw = 0.0f, sb = 0.0f;
    if (col < C)
        for (int r = threadIdx.y; r < R; r += 8) {
            sw += pw[(size_t)r * C + col];
            sb += pb[(size_t)r * C + col];
        }
    shw[threadIdx.y][threadIdx.x] = sw;
    shb[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && col < C) {
        float tw = 0.0f, tb = 0.0f;
        for (int j = 0; j < 8; j++) {
            tw += shw[j][threadIdx.x];
            tb += shb[j][threadIdx.x];
        }
        if (dweight) dweight[col] += tw;
        if (dbias) dbias[col] += tb;
    }
}

// out[N,C] = layernorm(inp), mean/rstd[N] saved (either may be NULL)
void cuda_layernorm_forward(vb_ctx *ctx, vb_act *out, float *mean, float *rstd, const vb_act *inp,
                            const vb_act *weight, const vb_act *bias, int N, int C, float eps) {
    NvtxRange r("layernorm_forward");
    if (N <= 0 || C <= 0) return;
    const unsigned blocks = (unsigned)CEIL_DIV(N, LN_ROWS_PER_BLOCK);
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        layernorm_forward_kernel<T, false><<<blocks, LN_THREADS, 0, cuda_stream(ctx)>>>(
            NULL, (T *)out, mean, rstd, (const T *)inp, NULL, (const T *)weight, (const T *)bias, N,
            C, eps);
        CUDA_LAUNCH_CHECK();
    });
}

// res[N,C] = a + b (res may alias a), out = layernorm(res)
void cuda_residual_layernorm_forward(vb_ctx *ctx, vb_act *res, vb_act *out, float *mean,
                                     float *rstd, const vb_act *a, const vb_act *b,
                                     const vb_act *weight, const vb_act *bias, int N, int C,
                                     float eps) {
    NvtxRange r("residual_layernorm_forward");
    if (N <= 0 || C <= 0) return;
    const unsigned blocks = (unsigned)CEIL_DIV(N, LN_ROWS_PER_BLOCK);
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        layernorm_forward_kernel<T, true><<<blocks, LN_THREADS, 0, cuda_stream(ctx)>>>(
            (T *)res, (T *)out, mean, rstd, (const T *)a, (const T *)b, (const T *)weight,
            (const T *)bias, N, C, eps);
        CUDA_LAUNCH_CHECK();
    });
}

// dinp_acc[N,C] += d layernorm / d inp; dweight[C], dbias[C] += (any may be NULL)
void cuda_layernorm_backward(vb_ctx *ctx, vb_act *dinp_acc, float *dweight, float *dbias,
                             const vb_act *dout, const vb_act *inp, const vb_act *weight,
                             const float *mean, const float *rstd, int N, int C) {
    NvtxRange r("layernorm_backward");
    if (N <= 0 || C <= 0) return;
    cuda_impl *c = cuda_impl_of(ctx);
    if (C <= LN_FUSED_MAX_C && (dweight || dbias)) {
        // two rows of partials per block within scratch; about two blocks per SM
        long R = (long)c->num_sms * 2;
        const long max_r = CEIL_DIV((long)N, LN_ROWS_PER_BLOCK);
        const long fit = (long)(c->scratch_bytes / (2 * (size_t)C * sizeof(float)));
        if (R > max_r) R = max_r;
        if (R > fit) R = fit;
        if (R < 1) R = 1;
        float *pw = (float *)cuda_scratch(ctx, 2 * (size_t)R * C * sizeof(float), "layernorm_backward");
        float *pb = pw + (size_t)R * C;
        dispatch_act(ctx->act, [&](auto tag) {
            typedef typename decltype(tag)::type T;
            const size_t smem = 2 * (size_t)C * sizeof(float);
            const uintptr_t bits = (uintptr_t)dinp_acc | (uintptr_t)dout | (uintptr_t)inp | (uintptr_t)weight;
            if (C % 2 == 0 && (bits & (2 * sizeof(T) - 1)) == 0)
                layernorm_backward_fused_kernel<T, 2><<<(unsigned)R, LN_THREADS, smem, c->stream>>>(
                    (T *)dinp_acc, pw, pb, (const T *)dout, (const T *)inp, (const T *)weight, mean, rstd, N, C);
            else
                layernorm_backward_fused_kernel<T, 1><<<(unsigned)R, LN_THREADS, smem, c->stream>>>(
                    (T *)dinp_acc, pw, pb, (const T *)dout, (const T *)inp, (const T *)weight, mean, rstd, N, C);
            CUDA_LAUNCH_CHECK();
        });
        layernorm_param_sum_kernel<<<CEIL_DIV(C, WARP_SIZE), dim3(WARP_SIZE, 8), 0, c->stream>>>(dweight, dbias, pw, pb,
                                                                                 (int)R, C);
        CUDA_LAUNCH_CHECK();
        return;
    }
    if (dinp_acc) {
        const unsigned blocks = (unsigned)CEIL_DIV(N, LN_ROWS_PER_BLOCK);
        dispatch_act(ctx->act, [&](auto tag) {
            typedef typename decltype(tag)::type T;
            layernorm_backward_dinp_kernel<T><<<blocks, LN_THREADS, 0, c->stream>>>(
                (T *)dinp_acc, (const T *)dout, (const T *)inp, (const T *)weight, mean, rstd, N, C);
            CUDA_LAUNCH_CHECK();
        });
    }
    if (!dweight && !dbias) return;
    const int col_blocks = CEIL_DIV(C, WARP_SIZE);
    long R = CEIL_DIV((long)c->num_sms * 4, col_blocks);
    long max_r = CEIL_DIV((long)N, 8);
    long fit = (long)(c->scratch_bytes / (2 * (size_t)C * sizeof(float)));
    if (R > max_r) R = max_r;
    if (R > fit) R = fit;
    if (R > CUDA_MAX_GRID_YZ) R = CUDA_MAX_GRID_YZ;
    if (R < 1) R = 1;
    const int rows_per = (int)CEIL_DIV(N, R);
    R = CEIL_DIV(N, rows_per);
    float *pw = (float *)cuda_scratch(ctx, 2 * (size_t)R * C * sizeof(float), "layernorm_backward");
    float *pb = pw + (size_t)R * C;
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        layernorm_param_partial_kernel<T><<<dim3(col_blocks, (unsigned)R), dim3(WARP_SIZE, 8), 0, c->stream>>>(
            pw, pb, (const T *)dout, (const T *)inp, mean, rstd, N, C, rows_per);
        CUDA_LAUNCH_CHECK();
    });
    layernorm_param_final_kernel<<<CEIL_DIV(C, 256), 256, 0, c->stream>>>(dweight, dbias, pw, pb,
                                                                         (int)R, C);
    CUDA_LAUNCH_CHECK();
}
