/* cuda_attention.cu: flash-style multi-head attention, forward and backward.
 *
 * q[B,Tq,D], k[B,Tk,D], v[B,Tk,D], D = NH*HD, head h = columns [h*HD, (h+1)*HD).
 * out = softmax(q k^T / sqrt(HD)) v per (batch, head); the probabilities are
 * never stored: forward keeps only lse[B,NH,Tq] = log sum_j exp(s_ij), and
 * backward recomputes P = exp(s - lse) tile by tile.
 *
 * All arithmetic is float32 on the CUDA cores (operands of any activation
 * dtype are widened when a tile is loaded into shared memory). Tiles are
 * BQ = 64 queries x BK = 64 keys per block of 128 threads; each thread owns a
 * 4 x 8 register micro-tile of a score tile (rows rg*4 .. rg*4+3, columns
 * cg, cg+8, ..., cg+56; the eight threads of a row group are adjacent lanes
 * of one warp, so row maxima and sums are three shuffles) and the matching
 * 4 x HDP/8 slice of the output accumulator. HD is padded with zeros to
 * HDP = 32, 48 or 64 (HD <= 64 is supported); Tq and Tk need not be multiples
 * of the tiles, and Tq != Tk is allowed. Shared-memory rows are padded by 2
 * floats, which makes the micro-tile loads and the score-tile stores bank
 * conflict free.
 *
 * forward  grid (ceil(Tq/BQ), B*NH): Q tile resident; for each K/V tile
 *          S = Q K^T, online softmax (running max and sum per row, the output
 *          rescaled when the max grows), O += P V.
 * backward three kernels, no atomics (bitwise reproducible):
 *          Dd[B,NH,Tq] = rowsum(dO * O) (into the workspace),
 *          dK/dV per key tile (grid over key tiles, loop over query tiles):
 *            dV += P^T dO, dS = P (dO V^T - Dd), dK += dS^T Q / sqrt(HD),
 *          dQ per query tile (grid over query tiles, loop over key tiles):
 *            dQ += dS K / sqrt(HD).
 *          dQ recomputes S and dP instead of accumulating atomically, which
 *          costs two tile products per tile pair but keeps the result exact
 *          to the bit between runs.
 *
 * bfloat16 and float16 activations, and float32 with TF32 on (the default,
 * as PyTorch's matmuls), go to the tensor-core kernels of cuda_attention_tc.cuh
 * instead (same tiling, same three-kernel backward with Dd from here); the
 * kernels below are float32 with TF32 off, exact to float32's rounding.
 */
#include <math.h>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"


// tensor-core attention for bf16/f16 activations and for float32 with TF32
// math (cuda_attention_tc.cu)
void cuda_attention_tc_forward(vb_ctx *ctx, vb_act *out, float *lse, const vb_act *q,
                               const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH,
                               int HD);
void cuda_attention_tc_backward(vb_ctx *ctx, vb_act *dq, vb_act *dk, vb_act *dv, const float *Dd,
                                const vb_act *dout, const float *lse, const vb_act *q,
                                const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH,
                                int HD);
static bool attention_on_tensor_cores(vb_ctx *ctx) {
    return ctx->act != VB_DTYPE_F32 || cuda_impl_of(ctx)->tf32;
}

enum { ATT_BQ = 64, ATT_BK = 64, ATT_THREADS = 128, ATT_LDP = ATT_BK + 2 };

// ---------------------------------------------------------------------------
// shared-memory tile helpers

// dst[r][c] (row stride ld) = src[(row0 + r) * D + c] for r < 64, c < HDP;
// rows past nrows and columns past HD are zero
template <typename T, int HDP>
__device__ __forceinline__ void load_tile(float *dst, int ld, const T *src, int D, int row0, int nrows,
                                          int HD) {
    for (int idx = threadIdx.x; idx < 64 * HDP; idx += ATT_THREADS) {
        const int r = idx / HDP, c = idx % HDP;
        float val = 0.0f;
        if (row0 + r < nrows && c < HD) val = to_f(src[(size_t)(row0 + r) * D + c]);
        dst[r * ld + c] = val;
    }
}

// acc[i][j] += sum_k A[rg*4+i][k] * B[cg+8j][k]   (A and B both stored [row][k])
template <int TN, int KD>
__device__ __forceinline__ void mma_nt(float (&acc)[4][TN], const float *A, int lda, const float *B,
                                       int ldb, int rg, int cg) {
#pragma unroll 4
    for (int k = 0; k < KD; k++) {
        float a[4], b[TN];
#pragma unroll
        for (int i = 0; i < 4; i++) a[i] = A[(rg * 4 + i) * lda + k];
#pragma unroll
        for (int j = 0; j < TN; j++) b[j] = B[(cg + 8 * j) * ldb + k];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

// acc[i][j] += sum_k A[rg*4+i][k] * B[k][cg+8j]   (B stored [k][col])
template <int TN, int KD>
__device__ __forceinline__ void mma_nn(float (&acc)[4][TN], const float *A, int lda, const float *B,
                                       int ldb, int rg, int cg) {
#pragma unroll 4
    for (int k = 0; k < KD; k++) {
        float a[4], b[TN];
#pragma unroll
        for (int i = 0; i < 4; i++) a[i] = A[(rg * 4 + i) * lda + k];
#pragma unroll
        for (int j = 0; j < TN; j++) b[j] = B[k * ldb + cg + 8 * j];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

// max / sum over the 8 lanes of a row group
__device__ __forceinline__ float group8_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
}
__device__ __forceinline__ float group8_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    return x + __shfl_xor_sync(0xffffffffu, x, 4);
}

template <int HDP> constexpr size_t att_fwd_smem_floats() {
    return (size_t)3 * 64 * (HDP + 2) + (size_t)ATT_BQ * ATT_LDP;
}
template <int HDP> constexpr size_t att_bwd_smem_floats() {
    return (size_t)4 * 64 * (HDP + 2) + (size_t)64 * ATT_LDP + 2 * 64;
}

// ---------------------------------------------------------------------------
// forward: out[B,Tq,D], lse[B,NH,Tq]; grid (ceil(Tq/64), B*NH), 128 threads

template <typename T, int HDP>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_forward_kernel(T *out, float *lse, const T *q, const T *k, const T *v, int Tq, int Tk,
                             int NH, int HD, float scale) {
    constexpr int LD = HDP + 2, TO = HDP / 8;
    extern __shared__ float smem[];
    float *Qs = smem;             // [BQ][LD]
    float *Ks = Qs + ATT_BQ * LD; // [BK][LD]
    float *Vs = Ks + ATT_BK * LD; // [BK][LD]
    float *Ps = Vs + ATT_BK * LD; // [BQ][LDP]

    const int D = NH * HD;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int q0 = blockIdx.x * ATT_BQ;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int cg = lane % 8, rg = warp * 4 + lane / 8;
    const T *qb = q + (size_t)b * Tq * D + (size_t)h * HD;
    const T *kb = k + (size_t)b * Tk * D + (size_t)h * HD;
    const T *vb = v + (size_t)b * Tk * D + (size_t)h * HD;

    load_tile<T, HDP>(Qs, LD, qb, D, q0, Tq, HD);
    float o[4][TO], mrow[4], lrow[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        mrow[i] = -INFINITY;
        lrow[i] = 0.0f;
#pragma unroll
        for (int j = 0; j < TO; j++) o[i][j] = 0.0f;
    }

    for (int k0 = 0; k0 < Tk; k0 += ATT_BK) {
        __syncthreads(); // the previous tile's Ks/Vs/Ps are no longer read
        load_tile<T, HDP>(Ks, LD, kb, D, k0, Tk, HD);
        load_tile<T, HDP>(Vs, LD, vb, D, k0, Tk, HD);
        __syncthreads();

        float s[4][8];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) s[i][j] = 0.0f;
        mma_nt<8, HDP>(s, Qs, LD, Ks, LD, rg, cg);

#pragma unroll
        for (int i = 0; i < 4; i++) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                s[i][j] = (k0 + cg + 8 * j < Tk) ? s[i][j] * scale : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            mx = group8_max(mx);
            // every tile holds at least one valid key, so m_new is finite for finite inputs
            const float m_new = fmaxf(mrow[i], mx);
            const float corr = expf(mrow[i] - m_new); // 0 on the first tile (exp(-inf))
            float rs = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float p = expf(s[i][j] - m_new);
                rs += p;
                Ps[(rg * 4 + i) * ATT_LDP + cg + 8 * j] = p;
            }
            lrow[i] = lrow[i] * corr + group8_sum(rs);
            mrow[i] = m_new;
#pragma unroll
            for (int j = 0; j < TO; j++) o[i][j] *= corr;
        }
        __syncthreads();
        mma_nn<TO, ATT_BK>(o, Ps, ATT_LDP, Vs, LD, rg, cg);
    }

#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = q0 + rg * 4 + i;
        if (t >= Tq) continue;
        const float inv = 1.0f / lrow[i];
        T *orow = out + ((size_t)b * Tq + t) * D + (size_t)h * HD;
#pragma unroll
        for (int j = 0; j < TO; j++) {
            const int c = cg + 8 * j;
            if (c < HD) orow[c] = from_f<T>(o[i][j] * inv);
        }
        if (cg == 0) lse[(size_t)bh * Tq + t] = mrow[i] + logf(lrow[i]);
    }
}

// ---------------------------------------------------------------------------
// backward 1: Dd[b,h,t] = sum_c dO[b,t,h*HD+c] O[b,t,h*HD+c]; one warp per (b,h,t)

template <typename T>
__global__ void attention_dd_kernel(float *Dd, const T *dout, const T *out, int B, int Tq, int NH,
                                    int HD) {
    const size_t rows = (size_t)B * NH * Tq;
    const size_t row = (size_t)blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    if (row >= rows) return;
    const int t = (int)(row % Tq);
    const size_t bh = row / Tq;
    const int h = (int)(bh % NH), b = (int)(bh / NH);
    const size_t off = ((size_t)b * Tq + t) * NH * HD + (size_t)h * HD;
    float s = 0.0f;
    for (int c = lane; c < HD; c += WARP_SIZE) s += to_f(dout[off + c]) * to_f(out[off + c]);
    s = warp_sum(s);
    if (lane == 0) Dd[row] = s;
}

// ---------------------------------------------------------------------------
// backward 2: dk, dv for one key tile; grid (ceil(Tk/64), B*NH)

template <typename T, int HDP>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_dkdv_kernel(T *dk, T *dv, const T *q, const T *k, const T *v, const T *dout,
                          const float *lse, const float *Dd, int Tq, int Tk, int NH, int HD,
                          float scale) {
    constexpr int LD = HDP + 2, TO = HDP / 8;
    extern __shared__ float smem[];
    float *Ks = smem;               // [BK][LD]
    float *Vs = Ks + ATT_BK * LD;   // [BK][LD]
    float *Qs = Vs + ATT_BK * LD;   // [BQ][LD]
    float *dOs = Qs + ATT_BQ * LD;  // [BQ][LD]
    float *Ps = dOs + ATT_BQ * LD;  // [BK][LDP]: P^T, then dS^T
    float *lse_s = Ps + ATT_BK * ATT_LDP; // [BQ]
    float *Dd_s = lse_s + ATT_BQ;         // [BQ]

    const int D = NH * HD;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int k0 = blockIdx.x * ATT_BK;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int cg = lane % 8, rg = warp * 4 + lane / 8;
    const T *qb = q + (size_t)b * Tq * D + (size_t)h * HD;
    const T *dob = dout + (size_t)b * Tq * D + (size_t)h * HD;
    const T *kb = k + (size_t)b * Tk * D + (size_t)h * HD;
    const T *vb = v + (size_t)b * Tk * D + (size_t)h * HD;
    const float *lse_b = lse + (size_t)bh * Tq;
    const float *Dd_b = Dd + (size_t)bh * Tq;

    load_tile<T, HDP>(Ks, LD, kb, D, k0, Tk, HD);
    load_tile<T, HDP>(Vs, LD, vb, D, k0, Tk, HD);
    float dka[4][TO], dva[4][TO];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < TO; j++) dka[i][j] = dva[i][j] = 0.0f;

    for (int q0 = 0; q0 < Tq; q0 += ATT_BQ) {
        __syncthreads(); // the previous tile's Qs/dOs/Ps are no longer read
        load_tile<T, HDP>(Qs, LD, qb, D, q0, Tq, HD);
        load_tile<T, HDP>(dOs, LD, dob, D, q0, Tq, HD);
        for (int i = threadIdx.x; i < ATT_BQ; i += ATT_THREADS) {
            const bool ok = q0 + i < Tq;
            lse_s[i] = ok ? lse_b[q0 + i] : 0.0f;
            Dd_s[i] = ok ? Dd_b[q0 + i] : 0.0f;
        }
        __syncthreads();

        // S^T[key][query] and dP^T[key][query] = V[key] . dO[query]
        float st[4][8], dpt[4][8];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) st[i][j] = dpt[i][j] = 0.0f;
        mma_nt<8, HDP>(st, Ks, LD, Qs, LD, rg, cg);
        mma_nt<8, HDP>(dpt, Vs, LD, dOs, LD, rg, cg);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const bool key_ok = k0 + rg * 4 + i < Tk;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int qi = cg + 8 * j;
                const float p =
                    (key_ok && q0 + qi < Tq) ? expf(st[i][j] * scale - lse_s[qi]) : 0.0f;
                Ps[(rg * 4 + i) * ATT_LDP + qi] = p;
                st[i][j] = p * (dpt[i][j] - Dd_s[qi]); // dS^T
            }
        }
        __syncthreads();
        mma_nn<TO, ATT_BQ>(dva, Ps, ATT_LDP, dOs, LD, rg, cg); // dV += P^T dO
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) Ps[(rg * 4 + i) * ATT_LDP + cg + 8 * j] = st[i][j];
        __syncthreads();
        mma_nn<TO, ATT_BQ>(dka, Ps, ATT_LDP, Qs, LD, rg, cg); // dK += dS^T Q
    }

#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = k0 + rg * 4 + i;
        if (t >= Tk) continue;
        const size_t row = ((size_t)b * Tk + t) * D + (size_t)h * HD;
#pragma unroll
        for (int j = 0; j < TO; j++) {
            const int c = cg + 8 * j;
            if (c >= HD) continue;
            if (dk) dk[row + c] = from_f<T>(dka[i][j] * scale);
            if (dv) dv[row + c] = from_f<T>(dva[i][j]);
        }
    }
}

// ---------------------------------------------------------------------------
// backward 3: dq for one query tile; grid (ceil(Tq/64), B*NH)

template <typename T, int HDP>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_dq_kernel(T *dq, const T *q, const T *k, const T *v, const T *dout, const float *lse,
                        const float *Dd, int Tq, int Tk, int NH, int HD, float scale) {
    constexpr int LD = HDP + 2, TO = HDP / 8;
    extern __shared__ float smem[];
    float *Qs = smem;               // [BQ][LD]
    float *dOs = Qs + ATT_BQ * LD;  // [BQ][LD]
    float *Ks = dOs + ATT_BQ * LD;  // [BK][LD]
    float *Vs = Ks + ATT_BK * LD;   // [BK][LD]
    float *Ps = Vs + ATT_BK * LD;   // [BQ][LDP]: dS
    float *lse_s = Ps + ATT_BQ * ATT_LDP;
    float *Dd_s = lse_s + ATT_BQ;

    const int D = NH * HD;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int q0 = blockIdx.x * ATT_BQ;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int cg = lane % 8, rg = warp * 4 + lane / 8;
    const T *qb = q + (size_t)b * Tq * D + (size_t)h * HD;
    const T *dob = dout + (size_t)b * Tq * D + (size_t)h * HD;
    const T *kb = k + (size_t)b * Tk * D + (size_t)h * HD;
    const T *vb = v + (size_t)b * Tk * D + (size_t)h * HD;

    load_tile<T, HDP>(Qs, LD, qb, D, q0, Tq, HD);
    load_tile<T, HDP>(dOs, LD, dob, D, q0, Tq, HD);
    for (int i = threadIdx.x; i < ATT_BQ; i += ATT_THREADS) {
        const bool ok = q0 + i < Tq;
        lse_s[i] = ok ? lse[(size_t)bh * Tq + q0 + i] : 0.0f;
        Dd_s[i] = ok ? Dd[(size_t)bh * Tq + q0 + i] : 0.0f;
    }
    float dqa[4][TO];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < TO; j++) dqa[i][j] = 0.0f;

    for (int k0 = 0; k0 < Tk; k0 += ATT_BK) {
        __syncthreads();
        load_tile<T, HDP>(Ks, LD, kb, D, k0, Tk, HD);
        load_tile<T, HDP>(Vs, LD, vb, D, k0, Tk, HD);
        __syncthreads();
        float s[4][8], dp[4][8];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) s[i][j] = dp[i][j] = 0.0f;
        mma_nt<8, HDP>(s, Qs, LD, Ks, LD, rg, cg);
        mma_nt<8, HDP>(dp, dOs, LD, Vs, LD, rg, cg);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int qi = rg * 4 + i;
            const bool q_ok = q0 + qi < Tq;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int kj = cg + 8 * j;
                const float p = (q_ok && k0 + kj < Tk) ? expf(s[i][j] * scale - lse_s[qi]) : 0.0f;
                Ps[qi * ATT_LDP + kj] = p * (dp[i][j] - Dd_s[qi]);
            }
        }
        __syncthreads();
        mma_nn<TO, ATT_BK>(dqa, Ps, ATT_LDP, Ks, LD, rg, cg); // dQ += dS K
    }

#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = q0 + rg * 4 + i;
        if (t >= Tq) continue;
        T *row = dq + ((size_t)b * Tq + t) * D + (size_t)h * HD;
#pragma unroll
        for (int j = 0; j < TO; j++) {
            const int c = cg + 8 * j;
            if (c < HD) row[c] = from_f<T>(dqa[i][j] * scale);
        }
    }
}

// ---------------------------------------------------------------------------
// launchers

__global__ void fill_kernel(float *x, float val, size_t n) {
    CUDA_GRID_LOOP(i, n) x[i] = val;
}

// f(std::integral_constant<int, HDP>) with HDP the padded head dimension
template <typename F> static void dispatch_hdp(int HD, F f) {
    if (HD <= 32)
        f(std::integral_constant<int, 32>{});
    else if (HD <= 48)
        f(std::integral_constant<int, 48>{});
    else
        f(std::integral_constant<int, 64>{});
}

static void attention_check_shape(vb_ctx *ctx, const char *op, int B, int NH, int HD, size_t smem) {
    if (HD > 64)
        vb_cuda_die("CUDA %s: head dimension %d is not supported (at most 64)", op, HD);
    if ((long)B * NH > CUDA_MAX_GRID_YZ)
        vb_cuda_die("CUDA %s: B*NH = %ld exceeds the grid limit %d", op, (long)B * NH, CUDA_MAX_GRID_YZ);
    if (smem > cuda_impl_of(ctx)->max_smem_optin)
        vb_cuda_die("CUDA %s needs %zu bytes of shared memory per block, device %d allows %zu",
                        op, smem, ctx->device, cuda_impl_of(ctx)->max_smem_optin);
}

// a kernel's dynamic shared memory above 48 KiB needs an opt-in; set on every
// launch (a cheap host call) so no per-device state needs tracking
template <typename K> static void smem_optin(K kernel, size_t bytes) {
    CUDACHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

size_t cuda_attention_workspace_bytes(vb_ctx *ctx, int B, int Tq, int Tk, int NH, int HD) {
    (void)ctx;
    (void)Tk;
    (void)HD;
    if (B <= 0 || Tq <= 0 || NH <= 0) return 256;
    // backward's Dd[B,NH,Tq]; forward needs none
    return CEIL_DIV((size_t)B * NH * Tq * sizeof(float), 256) * 256;
}

void cuda_attention_forward(vb_ctx *ctx, vb_act *out, float *lse, void *workspace, const vb_act *q,
                            const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH, int HD) {
    NvtxRange r("attention_forward");
    (void)workspace;
    if (B <= 0 || Tq <= 0 || NH <= 0 || HD <= 0) return;
    cudaStream_t st = cuda_stream(ctx);
    if (Tk <= 0) {
        // softmax over nothing: the output is defined as zero, lse as log(0) = -inf
        CUDACHECK(cudaMemsetAsync(out, 0, (size_t)B * Tq * NH * HD * vb_dtype_size(ctx->act), st));
        const size_t n = (size_t)B * NH * Tq;
        fill_kernel<<<cuda_blocks(n, 256), 256, 0, st>>>(lse, -INFINITY, n);
        CUDA_LAUNCH_CHECK();
        return;
    }
    if (cuda_impl_of(ctx)->attention_cudnn && ctx->act != VB_DTYPE_F32) {
        cuda_attention_cudnn_forward(ctx, out, lse, q, k, v, B, Tq, Tk, NH, HD);
        return;
    }
    if (attention_on_tensor_cores(ctx)) {
        attention_check_shape(ctx, "attention_forward", B, NH, HD, 0);
        cuda_attention_tc_forward(ctx, out, lse, q, k, v, B, Tq, Tk, NH, HD);
        return;
    }
    const float scale = 1.0f / sqrtf((float)HD);
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        dispatch_hdp(HD, [&](auto hdp) {
            constexpr int HDP = decltype(hdp)::value;
            const size_t smem = att_fwd_smem_floats<HDP>() * sizeof(float);
            attention_check_shape(ctx, "attention_forward", B, NH, HD, smem);
            smem_optin(attention_forward_kernel<T, HDP>, smem);
            dim3 grid(CEIL_DIV(Tq, ATT_BQ), B * NH);
            attention_forward_kernel<T, HDP><<<grid, ATT_THREADS, smem, st>>>(
                (T *)out, lse, (const T *)q, (const T *)k, (const T *)v, Tq, Tk, NH, HD, scale);
            CUDA_LAUNCH_CHECK();
        });
    });
}

void cuda_attention_backward(vb_ctx *ctx, vb_act *dq, vb_act *dk, vb_act *dv, void *workspace,
                             const vb_act *dout, const vb_act *out, const float *lse,
                             const vb_act *q, const vb_act *k, const vb_act *v, int B, int Tq,
                             int Tk, int NH, int HD) {
    NvtxRange r("attention_backward");
    if (B <= 0 || NH <= 0 || HD <= 0) return;
    cudaStream_t st = cuda_stream(ctx);
    const size_t es = vb_dtype_size(ctx->act);
    if (Tq <= 0 || Tk <= 0) {
        // no scores: every gradient is zero
        if (dq && Tq > 0) CUDACHECK(cudaMemsetAsync(dq, 0, (size_t)B * Tq * NH * HD * es, st));
        if (dk && Tk > 0) CUDACHECK(cudaMemsetAsync(dk, 0, (size_t)B * Tk * NH * HD * es, st));
        if (dv && Tk > 0) CUDACHECK(cudaMemsetAsync(dv, 0, (size_t)B * Tk * NH * HD * es, st));
        return;
    }
    if (!dq && !dk && !dv) return;
    // cuDNN writes all three gradients; a call that wants fewer takes our kernels
    if (cuda_impl_of(ctx)->attention_cudnn && ctx->act != VB_DTYPE_F32 && dq && dk && dv) {
        cuda_attention_cudnn_backward(ctx, dq, dk, dv, dout, out, lse, q, k, v, B, Tq, Tk, NH, HD);
        return;
    }
    float *Dd = (float *)workspace;
    const float scale = 1.0f / sqrtf((float)HD);
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        const size_t rows = (size_t)B * NH * Tq;
        attention_dd_kernel<T><<<cuda_blocks(rows, 8, 0x7fffffffu), 256, 0, st>>>(
            Dd, (const T *)dout, (const T *)out, B, Tq, NH, HD);
        CUDA_LAUNCH_CHECK();
        if (attention_on_tensor_cores(ctx)) {
            attention_check_shape(ctx, "attention_backward", B, NH, HD, 0);
            cuda_attention_tc_backward(ctx, dq, dk, dv, Dd, dout, lse, q, k, v, B, Tq, Tk, NH, HD);
            return;
        }
        dispatch_hdp(HD, [&](auto hdp) {
            constexpr int HDP = decltype(hdp)::value;
            const size_t smem = att_bwd_smem_floats<HDP>() * sizeof(float);
            attention_check_shape(ctx, "attention_backward", B, NH, HD, smem);
            smem_optin(attention_dkdv_kernel<T, HDP>, smem);
            smem_optin(attention_dq_kernel<T, HDP>, smem);
            if (dk || dv) {
                dim3 grid(CEIL_DIV(Tk, ATT_BK), B * NH);
                attention_dkdv_kernel<T, HDP><<<grid, ATT_THREADS, smem, st>>>(
                    (T *)dk, (T *)dv, (const T *)q, (const T *)k, (const T *)v, (const T *)dout, lse,
                    Dd, Tq, Tk, NH, HD, scale);
                CUDA_LAUNCH_CHECK();
            }
            if (dq) {
                dim3 grid(CEIL_DIV(Tq, ATT_BQ), B * NH);
                attention_dq_kernel<T, HDP><<<grid, ATT_THREADS, smem, st>>>(
                    (T *)dq, (const T *)q, (const T *)k, (const T *)v, (const T *)dout, lse, Dd, Tq,
                    Tk, NH, HD, scale);
                CUDA_LAUNCH_CHECK();
            }
        });
    });
}
