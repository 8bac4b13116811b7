/* cuda_elementwise.cu: GELU, vector arithmetic, the patch / position-embedding
 * data movement, and the column sums behind dbias.
 *
 * Elementwise kernels are grid-stride loops over the flat index, computing in
 * float32 and rounding once to the storage type. Reductions are two-pass (per
 * block partials in the context's scratch, then one fixed-order pass), so their
 * results are bitwise reproducible run to run; nothing here uses atomics.
 */
#include "kernels/cuda/cuda_common.cuh"

// ---------------------------------------------------------------------------
// exact GELU: x Phi(x), Phi the standard normal CDF. normcdff evaluates
// 0.5 erfc(-x/sqrt2), so the left tail keeps its relative accuracy (no
// cancellation in 1 + erf); no tanh approximation anywhere.

__device__ __forceinline__ float gelu_f(float x) { return x * normcdff(x); }

// d/dx [x Phi(x)] = Phi(x) + x phi(x)
__device__ __forceinline__ float gelu_grad_f(float x) {
    const float inv_sqrt_2pi = 0.39894228040143268f;
    return normcdff(x) + x * inv_sqrt_2pi * expf(-0.5f * x * x);
}

// out[n] = gelu(inp[n])
template <typename T> __global__ void gelu_forward_kernel(T *out, const T *inp, size_t n) {
    CUDA_GRID_LOOP(i, n) out[i] = from_f<T>(gelu_f(to_f(inp[i])));
}

// dinp[n] = dout[n] * gelu'(inp[n])   (overwrites; dinp may alias dout)
template <typename T>
__global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, size_t n) {
    CUDA_GRID_LOOP(i, n) dinp[i] = from_f<T>(to_f(dout[i]) * gelu_grad_f(to_f(inp[i])));
}

// The same, 16 bytes per access (8 bf16/f16 or 4 float elements a thread):
// GELU's tensors are the largest elementwise traffic of a step (B*T*4D), and
// 2-byte accesses leave most of the memory bandwidth unused. Same per-element
// arithmetic as the scalar kernels, so the results are identical.
template <typename T> struct vec16 {
    static constexpr int N = 16 / sizeof(T);
    alignas(16) T v[N];
};

template <typename T> __global__ void gelu_forward_vec_kernel(T *out, const T *inp, size_t nvec) {
    CUDA_GRID_LOOP(i, nvec) {
        vec16<T> x = reinterpret_cast<const vec16<T> *>(inp)[i], y;
#pragma unroll
        for (int j = 0; j < vec16<T>::N; j++) y.v[j] = from_f<T>(gelu_f(to_f(x.v[j])));
        reinterpret_cast<vec16<T> *>(out)[i] = y;
    }
}

template <typename T>
__global__ void gelu_backward_vec_kernel(T *dinp, const T *inp, const T *dout, size_t nvec) {
    CUDA_GRID_LOOP(i, nvec) {
        vec16<T> x = reinterpret_cast<const vec16<T> *>(inp)[i];
        vec16<T> d = reinterpret_cast<const vec16<T> *>(dout)[i], y;
#pragma unroll
        for (int j = 0; j < vec16<T>::N; j++)
            y.v[j] = from_f<T>(to_f(d.v[j]) * gelu_grad_f(to_f(x.v[j])));
        reinterpret_cast<vec16<T> *>(dinp)[i] = y;
    }
}

static bool vec16_ok(size_t n, size_t per, const void *a, const void *b, const void *c = nullptr) {
    const uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c;
    return n % per == 0 && (bits & 15u) == 0;
}

void cuda_gelu_act(vb_ctx *ctx, vb_act *out, const vb_act *inp, size_t n) {
    if (n == 0) return;
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        constexpr size_t V = vec16<T>::N;
        if (vec16_ok(n, V, out, inp))
            gelu_forward_vec_kernel<T><<<cuda_blocks(n / V, 256), 256, 0, cuda_stream(ctx)>>>(
                (T *)out, (const T *)inp, n / V);
        else
            gelu_forward_kernel<T><<<cuda_blocks(n, 256), 256, 0, cuda_stream(ctx)>>>(
                (T *)out, (const T *)inp, n);
        CUDA_LAUNCH_CHECK();
    });
}

void cuda_gelu_forward(vb_ctx *ctx, vb_act *out, const vb_act *inp, size_t n) {
    NvtxRange r("gelu_forward");
    cuda_gelu_act(ctx, out, inp, n);
}

void cuda_gelu_backward(vb_ctx *ctx, vb_act *dinp, const vb_act *inp, const vb_act *dout, size_t n) {
    NvtxRange r("gelu_backward");
    if (n == 0) return;
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        constexpr size_t V = vec16<T>::N;
        if (vec16_ok(n, V, dinp, inp, dout))
            gelu_backward_vec_kernel<T><<<cuda_blocks(n / V, 256), 256, 0, cuda_stream(ctx)>>>(
                (T *)dinp, (const T *)inp, (const T *)dout, n / V);
        else
            gelu_backward_kernel<T><<<cuda_blocks(n, 256), 256, 0, cuda_stream(ctx)>>>(
                (T *)dinp, (const T *)inp, (const T *)dout, n);
        CUDA_LAUNCH_CHECK();
    });
}

// ---------------------------------------------------------------------------
// vector arithmetic

// out[n] = a[n] + b[n]   (out may alias a or b)
template <typename T> __global__ void add_kernel(T *out, const T *a, const T *b, size_t n) {
    CUDA_GRID_LOOP(i, n) out[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

// y[n] += x[n], float32
__global__ void accumulate_kernel(float *y, const float *x, size_t n) {
    CUDA_GRID_LOOP(i, n) y[i] += x[i];
}

// x[n] *= s, float32
__global__ void scale_kernel(float *x, float s, size_t n) {
    CUDA_GRID_LOOP(i, n) x[i] *= s;
}

// dst[n] = (T) src[n]
template <typename T> __global__ void cast_kernel(T *dst, const float *src, size_t n) {
    CUDA_GRID_LOOP(i, n) dst[i] = from_f<T>(src[i]);
}

void cuda_add(vb_ctx *ctx, vb_act *out, const vb_act *a, const vb_act *b, size_t n) {
    NvtxRange r("add");
    if (n == 0) return;
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        add_kernel<T><<<cuda_blocks(n, 256), 256, 0, cuda_stream(ctx)>>>((T *)out, (const T *)a,
                                                                         (const T *)b, n);
        CUDA_LAUNCH_CHECK();
    });
}

void cuda_accumulate(vb_ctx *ctx, float *y, const float *x, size_t n) {
    NvtxRange r("accumulate");
    if (n == 0) return;
    accumulate_kernel<<<cuda_blocks(n, 256), 256, 0, cuda_stream(ctx)>>>(y, x, n);
    CUDA_LAUNCH_CHECK();
}

void cuda_scale(vb_ctx *ctx, float *x, float s, size_t n) {
    NvtxRange r("scale");
    if (n == 0) return;
    scale_kernel<<<cuda_blocks(n, 256), 256, 0, cuda_stream(ctx)>>>(x, s, n);
    CUDA_LAUNCH_CHECK();
}

void cuda_cast_to_act(vb_ctx *ctx, vb_act *dst, const float *src, size_t n) {
    NvtxRange r("cast_to_act");
    if (n == 0) return;
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        cast_kernel<T><<<cuda_blocks(n, 256), 256, 0, cuda_stream(ctx)>>>((T *)dst, src, n);
        CUDA_LAUNCH_CHECK();
    });
}

// ---------------------------------------------------------------------------
// sum of squares in float64: partial[block] over a grid-stride share, then one
// block adds the partials in a fixed order and writes *out

enum { SUMSQ_THREADS = 256, SUMSQ_MAX_BLOCKS = 1024 };

__global__ void sum_squares_partial_kernel(double *partial, const float *x, size_t n) {
    double s = 0.0;
    CUDA_GRID_LOOP(i, n) {
        double v = (double)x[i];
        s += v * v;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(double *out, const double *partial, int count) {
    double s = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) s += partial[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *out = s;
}

void cuda_sum_squares(vb_ctx *ctx, double *out, const float *x, size_t n) {
    NvtxRange r("sum_squares");
    if (n == 0) {
        CUDACHECK(cudaMemsetAsync(out, 0, sizeof(double), cuda_stream(ctx)));
        return;
    }
    unsigned blocks = cuda_blocks(n, SUMSQ_THREADS, SUMSQ_MAX_BLOCKS);
    double *partial = (double *)cuda_scratch(ctx, blocks * sizeof(double), "sum_squares");
    sum_squares_partial_kernel<<<blocks, SUMSQ_THREADS, 0, cuda_stream(ctx)>>>(partial, x, n);
    CUDA_LAUNCH_CHECK();
    sum_partials_kernel<<<1, SUMSQ_THREADS, 0, cuda_stream(ctx)>>>(out, partial, (int)blocks);
    CUDA_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------
// dbias[OC] += column sums of x[N,OC]. Pass 1: block (32, 8) owns 32 columns
// and a range of rows_per rows, one partial per (row range, column). Pass 2:
// one thread per column adds the partials in row-range order.

template <typename T>
__global__ void colsum_partial_kernel(float *partial, const T *x, int N, int OC, int rows_per) {
    __shared__ float sh[8][33];
    const int col = blockIdx.x * WARP_SIZE + threadIdx.x;
    const int r0 = blockIdx.y * rows_per;
    const int r1 = min(N, r0 + rows_per);
    float acc = 0.0f;
    if (col < OC)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) acc += to_f(x[(size_t)r * OC + col]);
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < OC) {
        float s = 0.0f;
        for (int j = 0; j < 8; j++) s += sh[j][threadIdx.x];
        partial[(size_t)blockIdx.y * OC + col] = s;
    }
}

__global__ void colsum_final_kernel(float *dbias, const float *partial, int R, int OC) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= OC) return;
    float s = 0.0f;
    for (int r = 0; r < R; r++) s += partial[(size_t)r * OC + col];
    dbias[col] += s;
}

void cuda_bias_backward(vb_ctx *ctx, float *dbias, const vb_act *dout, int N, int OC) {
    NvtxRange r("bias_backward");
    if (N <= 0 || OC <= 0) return;
    cuda_impl *c = cuda_impl_of(ctx);
    const int col_blocks = CEIL_DIV(OC, WARP_SIZE);
    // about four blocks per SM, at least 8 rows each, partials within scratch
    long R = CEIL_DIV((long)c->num_sms * 4, col_blocks);
    long max_r = CEIL_DIV((long)N, 8);
    long fit = (long)(c->scratch_bytes / ((size_t)OC * sizeof(float)));
    if (R > max_r) R = max_r;
    if (R > fit) R = fit;
    if (R > CUDA_MAX_GRID_YZ) R = CUDA_MAX_GRID_YZ;
    if (R < 1) R = 1;
    const int rows_per = (int)CEIL_DIV(N, R);
    R = CEIL_DIV(N, rows_per);
    float *partial = (float *)cuda_scratch(ctx, (size_t)R * OC * sizeof(float), "bias_backward");
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        colsum_partial_kernel<T><<<dim3(col_blocks, (unsigned)R), dim3(WARP_SIZE, 8), 0, c->stream>>>(
            partial, (const T *)dout, N, OC, rows_per);
        CUDA_LAUNCH_CHECK();
    });
    colsum_final_kernel<<<CEIL_DIV(OC, 256), 256, 0, c->stream>>>(dbias, partial, (int)R, OC);
    CUDA_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------
// patch embedding data movement. Hp = H/p, Wp = W/p, T = Hp*Wp, K = C*p*p:
//   patchify:   patches[b, ph*Wp + pw, (c*p + i)*p + j] = img[b, c, ph*p + i, pw*p + j]
//   unpatchify: img[b, c, ph*p + i, pw*p + j] = tokens[b, ph*Wp + pw, (i*p + j)*C + c]
// One thread per element of the written array, so writes are coalesced.

// patches[B, T, K] from img[B, C, H, W] (float32)
template <typename T>
__global__ void patchify_kernel(T *patches, const float *img, int B, int C, int H, int W, int p) {
    const int Hp = H / p, Wp = W / p, K = C * p * p;
    const size_t Tn = (size_t)Hp * Wp, total = (size_t)B * Tn * K;
    CUDA_GRID_LOOP(idx, total) {
        const int k = (int)(idx % K);
        const size_t bt = idx / K;
        const int t = (int)(bt % Tn), b = (int)(bt / Tn);
        const int c = k / (p * p), i = (k / p) % p, j = k % p;
        const int ph = t / Wp, pw = t % Wp;
        patches[idx] = from_f<T>(img[(((size_t)b * C + c) * H + (size_t)ph * p + i) * W +
                                     (size_t)pw * p + j]);
    }
}

// img[B, C, H, W] from tokens[B, T, K] (the rows and columns the patches cover)
template <typename T>
__global__ void unpatchify_kernel(T *img, const T *tokens, int B, int C, int H, int W, int p) {
    const int Hp = H / p, Wp = W / p, K = C * p * p;
    const int rows = Hp * p, cols = Wp * p;
    const size_t total = (size_t)B * C * rows * cols;
    CUDA_GRID_LOOP(idx, total) {
        const int x = (int)(idx % cols);
        const size_t r1 = idx / cols;
        const int y = (int)(r1 % rows);
        const size_t bc = r1 / rows;
        const int c = (int)(bc % C), b = (int)(bc / C);
        const int ph = y / p, i = y % p, pw = x / p, j = x % p;
        img[(bc * H + y) * W + x] =
            tokens[((size_t)b * Hp * Wp + (size_t)ph * Wp + pw) * K + ((size_t)i * p + j) * C + c];
    }
}

// dtokens[B, T, K] from dimg[B, C, H, W] (the inverse permutation; overwrites)
template <typename T>
__global__ void unpatchify_backward_kernel(T *dtokens, const T *dimg, int B, int C, int H, int W,
                                           int p) {
    const int Hp = H / p, Wp = W / p, K = C * p * p;
    const size_t Tn = (size_t)Hp * Wp, total = (size_t)B * Tn * K;
    CUDA_GRID_LOOP(idx, total) {
        const int k = (int)(idx % K);
        const size_t bt = idx / K;
        const int t = (int)(bt % Tn), b = (int)(bt / Tn);
        const int c = k % C, ij = k / C, i = ij / p, j = ij % p;
        const int ph = t / Wp, pw = t % Wp;
        dtokens[idx] = dimg[(((size_t)b * C + c) * H + (size_t)ph * p + i) * W + (size_t)pw * p + j];
    }
}

// the loader's (x - mean[c]) / std[c] over x[B, C, hw] in place: IEEE
// division (nvcc's default -prec-div=true), so the bits match the CPU's
__global__ void normalize_channels_kernel(float *x, const float *mean, const float *std, int C, size_t hw,
                                          size_t total) {
    CUDA_GRID_LOOP(idx, total) {
        const int c = (int)((idx / hw) % (size_t)C);
        x[idx] = __fdiv_rn(x[idx] - mean[c], std[c]);
    }
}

void cuda_normalize_channels(vb_ctx *ctx, float *x, const float *mean, const float *std, int B, int C,
                             size_t hw) {
    NvtxRange r("normalize_channels");
    const size_t total = (size_t)B * (size_t)C * hw;
    if (total == 0) return;
    normalize_channels_kernel<<<cuda_blocks(total, 256), 256, 0, cuda_stream(ctx)>>>(x, mean, std, C, hw, total);
    CUDA_LAUNCH_CHECK();
}

void cuda_patchify(vb_ctx *ctx, vb_act *patches, const float *img, int B, int C, int H, int W, int p) {
    NvtxRange r("patchify");
    if (B <= 0 || C <= 0 || p <= 0 || H / p <= 0 || W / p <= 0) return;
    const size_t total = (size_t)B * (H / p) * (W / p) * C * p * p;
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        patchify_kernel<T><<<cuda_blocks(total, 256), 256, 0, cuda_stream(ctx)>>>(
            (T *)patches, img, B, C, H, W, p);
        CUDA_LAUNCH_CHECK();
    });
}

void cuda_unpatchify(vb_ctx *ctx, vb_act *img, const vb_act *tokens, int B, int C, int H, int W,
                     int p) {
    NvtxRange r("unpatchify");
    if (B <= 0 || C <= 0 || p <= 0 || H / p <= 0 || W / p <= 0) return;
    const size_t total = (size_t)B * C * (H / p) * p * (W / p) * p;
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        unpatchify_kernel<T><<<cuda_blocks(total, 256), 256, 0, cuda_stream(ctx)>>>(
            (T *)img, (const T *)tokens, B, C, H, W, p);
        CUDA_LAUNCH_CHECK();
    });
}

void cuda_unpatchify_backward(vb_ctx *ctx, vb_act *dtokens, const vb_act *dimg, int B, int C, int H,
                              int W, int p) {
    NvtxRange r("unpatchify_backward");
    if (B <= 0 || C <= 0 || p <= 0 || H / p <= 0 || W / p <= 0) return;
    const size_t total = (size_t)B * (H / p) * (W / p) * C * p * p;
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        unpatchify_backward_kernel<T><<<cuda_blocks(total, 256), 256, 0, cuda_stream(ctx)>>>(
            (T *)dtokens, (const T *)dimg, B, C, H, W, p);
        CUDA_LAUNCH_CHECK();
    });
}

// ---------------------------------------------------------------------------
// position embedding

// out[b,t,d] = inp[b,t,d] + pos[t,d]   (out may alias inp)
template <typename T>
__global__ void add_pos_embed_kernel(T *out, const T *inp, const T *pos, size_t TD, size_t total) {
    CUDA_GRID_LOOP(i, total) out[i] = from_f<T>(to_f(inp[i]) + to_f(pos[i % TD]));
}

// dpos[t,d] += sum_b dout[b,t,d]: one thread per (t,d), b in order
template <typename T>
__global__ void add_pos_embed_backward_kernel(float *dpos, const T *dout, int B, size_t TD) {
    CUDA_GRID_LOOP(i, TD) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += to_f(dout[(size_t)b * TD + i]);
        dpos[i] += s;
    }
}

void cuda_add_pos_embed(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *pos, int B, int T,
                        int D) {
    NvtxRange r("add_pos_embed");
    if (B <= 0 || T <= 0 || D <= 0) return;
    const size_t TD = (size_t)T * D, total = (size_t)B * TD;
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type Ty;
        add_pos_embed_kernel<Ty><<<cuda_blocks(total, 256), 256, 0, cuda_stream(ctx)>>>(
            (Ty *)out, (const Ty *)inp, (const Ty *)pos, TD, total);
        CUDA_LAUNCH_CHECK();
    });
}

void cuda_add_pos_embed_backward(vb_ctx *ctx, float *dpos, const vb_act *dout, int B, int T, int D) {
    NvtxRange r("add_pos_embed_backward");
    if (B <= 0 || T <= 0 || D <= 0) return;
    const size_t TD = (size_t)T * D;
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type Ty;
        add_pos_embed_backward_kernel<Ty><<<cuda_blocks(TD, 256), 256, 0, cuda_stream(ctx)>>>(
            dpos, (const Ty *)dout, B, TD);
        CUDA_LAUNCH_CHECK();
    });
}
