/* cuda_attention_tc.cu: flash attention on the tensor cores for bfloat16 and
 * float16 activations (cuda_attention.cu calls these for ctx->act != float32;
 * float32 keeps its CUDA-core kernels there).
 *
 * Products are mma.sync m16n8k16 (bf16 or f16 operands, float32
 * accumulators; sm_80 and later). Every kernel has 4 warps; each warp owns 16
 * rows of the block's 64-row tile and the whole 64-column width of the other
 * side's tile, so softmax statistics and accumulators never leave the warp.
 * The accumulator fragment of one product is re-packed in registers as the A
 * operand of the next (S -> P for P V, S^T -> P^T and dS^T for P^T dO and
 * dS^T Q, S -> dS for dS K); operands whose reduction dimension runs along
 * the tokens are read with ldmatrix.trans from row-major tiles.
 *
 * Tiles live in shared memory as the raw 16-bit values with rows padded to
 * HDP + 8 elements (HDP = HD rounded up to 16, zero-filled past HD), which
 * keeps the 32-bit fragment loads and the ldmatrix row reads free of bank
 * conflicts. Tokens past Tq or Tk load as zeros; their scores are masked to
 * probability zero, and their rows are never stored.
 *
 * Softmax is float32 in the log2 domain (x = s * scale * log2(e), exp2);
 * lse is stored as the natural log. P and dS are rounded to the activation
 * dtype once, as the operand of their product. Backward keeps the structure of
 * the CUDA-core kernels: one kernel over key tiles for dK/dV, one over query
 * tiles for dQ, no atomics (bitwise reproducible).
 */
#include <math.h>
#include <stdint.h>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"

namespace {

enum { TC_ROWS = 64, TC_COLS = 64, TC_THREADS = 128 };

typedef unsigned short u16;

// ---------------------------------------------------------------------------
// fragments

template <typename T> __device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4],
                                                               uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4],
                                                        uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                 uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// two floats as one 32-bit pair of the dtype (lo in the low half)
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

__device__ __forceinline__ uint32_t ld32(const u16 *p) { return *reinterpret_cast<const uint32_t *>(p); }

// A fragment (16 x 16, row-major) of rows r0.., columns k0.. of a tile with row stride ld
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const u16 *s, int ld, int r0, int k0,
                                       int g, int t) {
    const u16 *p = s + (r0 + g) * ld + k0 + 2 * t;
    a[0] = ld32(p);
    a[1] = ld32(p + 8 * ld);
    a[2] = ld32(p + 8);
    a[3] = ld32(p + 8 * ld + 8);
}

// B fragment (16 x 8, k x n) where the tile stores row n with k contiguous:
// b = tile[n0 + g][k0 + 2t, +1] and [k0 + 8 + 2t, +1]
__device__ __forceinline__ void load_b_nk(uint32_t &b0, uint32_t &b1, const u16 *s, int ld, int n0,
                                          int k0, int g, int t) {
    const u16 *p = s + (n0 + g) * ld + k0 + 2 * t;
    b0 = ld32(p);
    b1 = ld32(p + 8);
}

// B fragments of two n-blocks (columns c0.. and c0+8..) over k = rows k0..k0+15
// of a tile stored [k][n] (row-major, n contiguous), transposed by ldmatrix:
// b[0], b[1] for columns c0..c0+7; b[2], b[3] for columns c0+8..c0+15
__device__ __forceinline__ void load_b_kn_x2(uint32_t (&b)[4], const u16 *s, int ld, int k0, int c0,
                                             int lane) {
    const u16 *p = s + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + c0 + (lane >> 4) * 8;
    const unsigned addr = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                 : "r"(addr));
}

// ---------------------------------------------------------------------------
// tiles: dst[r][c] (row stride HDP + 8) = src[(row0 + r) * D + c], zero past
// nrows and HD. VEC: 16-byte loads (HD % 8 == 0, D % 8 == 0, src 16-byte aligned)

template <int HDP, bool VEC>
__device__ __forceinline__ void load_tile(u16 *dst, const u16 *src, int D, int row0, int nrows,
                                          int HD) {
    constexpr int LD = HDP + 8;
    if (VEC) {
        constexpr int CH = HDP / 8;
        for (int idx = threadIdx.x; idx < TC_ROWS * CH; idx += TC_THREADS) {
            const int r = idx / CH, c = (idx % CH) * 8;
            uint4 val = make_uint4(0u, 0u, 0u, 0u);
            if (row0 + r < nrows && c < HD)
                val = *reinterpret_cast<const uint4 *>(src + (size_t)(row0 + r) * D + c);
            *reinterpret_cast<uint4 *>(dst + r * LD + c) = val;
        }
    } else {
        for (int idx = threadIdx.x; idx < TC_ROWS * HDP; idx += TC_THREADS) {
            const int r = idx / HDP, c = idx % HDP;
            u16 val = 0;
            if (row0 + r < nrows && c < HD) val = src[(size_t)(row0 + r) * D + c];
            dst[r * LD + c] = val;
        }
    }
}

__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

// ---------------------------------------------------------------------------
// forward: grid (ceil(Tq/64), B*NH)

template <typename T, int HDP, bool VEC>
__global__ void __launch_bounds__(TC_THREADS)
    tc_forward_kernel(T *out, float *lse, const u16 *q, const u16 *k, const u16 *v, int Tq, int Tk,
                      int NH, int HD, float scale_log2) {
    constexpr int LD = HDP + 8, KB = HDP / 16, NO = HDP / 8, NS = TC_COLS / 8;
    __shared__ __align__(16) u16 Qs[TC_ROWS * LD];
    __shared__ __align__(16) u16 Ks[TC_COLS * LD];
    __shared__ __align__(16) u16 Vs[TC_COLS * LD];

    const int D = NH * HD;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int q0 = blockIdx.x * TC_ROWS;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane >> 2, t = lane & 3, r0 = warp * 16;
    const u16 *qb = q + (size_t)b * Tq * D + (size_t)h * HD;
    const u16 *kb = k + (size_t)b * Tk * D + (size_t)h * HD;
    const u16 *vb = v + (size_t)b * Tk * D + (size_t)h * HD;

    load_tile<HDP, VEC>(Qs, qb, D, q0, Tq, HD);
    __syncthreads();
    uint32_t qf[KB][4];
#pragma unroll
    for (int kk = 0; kk < KB; kk++) load_a(qf[kk], Qs, LD, r0, kk * 16, g, t);

    float o[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int k0 = 0; k0 < Tk; k0 += TC_COLS) {
        __syncthreads(); // the previous tile's Ks/Vs are no longer read
        load_tile<HDP, VEC>(Ks, kb, D, k0, Tk, HD);
        load_tile<HDP, VEC>(Vs, vb, D, k0, Tk, HD);
        __syncthreads();

        float s[NS][4];
#pragma unroll
        for (int j = 0; j < NS; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KB; kk++) {
                uint32_t b0, b1;
                load_b_nk(b0, b1, Ks, LD, j * 8, kk * 16, g, t);
                mma16816<T>(s[j], qf[kk], b0, b1);
            }
        }
        // scale into the log2 domain, mask keys past Tk, row maxima (rows g, g+8)
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = k0 + j * 8 + 2 * t + (e & 1);
                s[j][e] = key < Tk ? s[j][e] * scale_log2 : -INFINITY;
                mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
            }
        float corr[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 2; i++) {
            // every tile holds at least one valid key: m_new is finite for finite inputs
            const float m_new = fmaxf(m[i], quad_max(mx[i]));
            corr[i] = exp2f(m[i] - m_new); // 0 on the first tile
            m[i] = m_new;
        }
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[j][e] = exp2f(s[j][e] - m[e >> 1]);
                rs[e >> 1] += s[j][e];
            }
#pragma unroll
        for (int i = 0; i < 2; i++) l[i] = l[i] * corr[i] + quad_sum(rs[i]);
#pragma unroll
        for (int j = 0; j < NO; j++) {
            o[j][0] *= corr[0], o[j][1] *= corr[0];
            o[j][2] *= corr[1], o[j][3] *= corr[1];
        }
        // O += P V: P's accumulator fragments are the A operand (k = keys)
#pragma unroll
        for (int kk = 0; kk < TC_COLS / 16; kk++) {
            uint32_t a[4];
            a[0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
            a[1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
            a[2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            a[3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int jj = 0; jj < NO / 2; jj++) {
                uint32_t bf[4];
                load_b_kn_x2(bf, Vs, LD, kk * 16, jj * 16, lane);
                mma16816<T>(o[2 * jj], a, bf[0], bf[1]);
                mma16816<T>(o[2 * jj + 1], a, bf[2], bf[3]);
            }
        }
    }

#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int row = q0 + r0 + g + 8 * i;
        if (row >= Tq) continue;
        const float inv = 1.0f / l[i];
        T *orow = out + ((size_t)b * Tq + row) * D + (size_t)h * HD;
#pragma unroll
        for (int j = 0; j < NO; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int c = j * 8 + 2 * t + e;
                if (c < HD) orow[c] = from_f<T>(o[j][2 * i + e] * inv);
            }
        if (t == 0) lse[(size_t)bh * Tq + row] = (m[i] + log2f(l[i])) * LN2;
    }
}

// ---------------------------------------------------------------------------
// backward, dK and dV of one key tile: grid (ceil(Tk/64), B*NH); each warp
// owns 16 keys and loops over all query tiles

template <typename T, int HDP, bool VEC>
__global__ void __launch_bounds__(TC_THREADS)
    tc_dkdv_kernel(T *dk, T *dv, const u16 *q, const u16 *k, const u16 *v, const u16 *dout,
                   const float *lse, const float *Dd, int Tq, int Tk, int NH, int HD, float scale,
                   float scale_log2) {
    constexpr int LD = HDP + 8, KB = HDP / 16, NO = HDP / 8, NS = TC_ROWS / 8;
    __shared__ __align__(16) u16 Ks[TC_COLS * LD];
    __shared__ __align__(16) u16 Vs[TC_COLS * LD];
    __shared__ __align__(16) u16 Qs[TC_ROWS * LD];
    __shared__ __align__(16) u16 dOs[TC_ROWS * LD];
    __shared__ float lse_s[TC_ROWS], Dd_s[TC_ROWS];

    const int D = NH * HD;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int k0 = blockIdx.x * TC_COLS;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane >> 2, t = lane & 3, r0 = warp * 16;
    const u16 *qb = q + (size_t)b * Tq * D + (size_t)h * HD;
    const u16 *dob = dout + (size_t)b * Tq * D + (size_t)h * HD;
    const u16 *kb = k + (size_t)b * Tk * D + (size_t)h * HD;
    const u16 *vb = v + (size_t)b * Tk * D + (size_t)h * HD;
    const float *lse_b = lse + (size_t)bh * Tq;
    const float *Dd_b = Dd + (size_t)bh * Tq;

    load_tile<HDP, VEC>(Ks, kb, D, k0, Tk, HD);
    load_tile<HDP, VEC>(Vs, vb, D, k0, Tk, HD);
    __syncthreads();
    uint32_t kf[KB][4], vf[KB][4];
#pragma unroll
    for (int kk = 0; kk < KB; kk++) {
        load_a(kf[kk], Ks, LD, r0, kk * 16, g, t);
        load_a(vf[kk], Vs, LD, r0, kk * 16, g, t);
    }
    bool key_ok[2];
    key_ok[0] = k0 + r0 + g < Tk;
    key_ok[1] = k0 + r0 + g + 8 < Tk;

    float dka[NO][4], dva[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) dka[j][e] = dva[j][e] = 0.0f;

    for (int q0 = 0; q0 < Tq; q0 += TC_ROWS) {
        __syncthreads(); // the previous tile's Qs/dOs/lse_s/Dd_s are no longer read
        load_tile<HDP, VEC>(Qs, qb, D, q0, Tq, HD);
        load_tile<HDP, VEC>(dOs, dob, D, q0, Tq, HD);
        for (int i = threadIdx.x; i < TC_ROWS; i += TC_THREADS) {
            const bool ok = q0 + i < Tq;
            lse_s[i] = ok ? lse_b[q0 + i] * LOG2E : 0.0f;
            Dd_s[i] = ok ? Dd_b[q0 + i] : 0.0f;
        }
        __syncthreads();

        // S^T[key][query] = K Q^T and dP^T[key][query] = V dO^T
        float st[NS][4], dpt[NS][4];
#pragma unroll
        for (int j = 0; j < NS; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) st[j][e] = dpt[j][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KB; kk++) {
                uint32_t b0, b1;
                load_b_nk(b0, b1, Qs, LD, j * 8, kk * 16, g, t);
                mma16816<T>(st[j], kf[kk], b0, b1);
                load_b_nk(b0, b1, dOs, LD, j * 8, kk * 16, g, t);
                mma16816<T>(dpt[j], vf[kk], b0, b1);
            }
        }
        // P^T = exp(S^T scale - lse) (zero off the valid range), dS^T = P^T (dP^T - Dd)
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int qi = j * 8 + 2 * t + (e & 1);
                const float p = (key_ok[e >> 1] && q0 + qi < Tq)
                                    ? exp2f(st[j][e] * scale_log2 - lse_s[qi])
                                    : 0.0f;
                st[j][e] = p;
                dpt[j][e] = p * (dpt[j][e] - Dd_s[qi]);
            }
        // dV += P^T dO, dK += dS^T Q (k = queries)
#pragma unroll
        for (int kk = 0; kk < TC_ROWS / 16; kk++) {
            uint32_t pa[4], sa[4];
            pa[0] = pack2<T>(st[2 * kk][0], st[2 * kk][1]);
            pa[1] = pack2<T>(st[2 * kk][2], st[2 * kk][3]);
            pa[2] = pack2<T>(st[2 * kk + 1][0], st[2 * kk + 1][1]);
            pa[3] = pack2<T>(st[2 * kk + 1][2], st[2 * kk + 1][3]);
            sa[0] = pack2<T>(dpt[2 * kk][0], dpt[2 * kk][1]);
            sa[1] = pack2<T>(dpt[2 * kk][2], dpt[2 * kk][3]);
            sa[2] = pack2<T>(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]);
            sa[3] = pack2<T>(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3]);
#pragma unroll
            for (int jj = 0; jj < NO / 2; jj++) {
                uint32_t bf[4];
                load_b_kn_x2(bf, dOs, LD, kk * 16, jj * 16, lane);
                mma16816<T>(dva[2 * jj], pa, bf[0], bf[1]);
                mma16816<T>(dva[2 * jj + 1], pa, bf[2], bf[3]);
                load_b_kn_x2(bf, Qs, LD, kk * 16, jj * 16, lane);
                mma16816<T>(dka[2 * jj], sa, bf[0], bf[1]);
                mma16816<T>(dka[2 * jj + 1], sa, bf[2], bf[3]);
            }
        }
    }

#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int key = k0 + r0 + g + 8 * i;
        if (key >= Tk) continue;
        const size_t row = ((size_t)b * Tk + key) * D + (size_t)h * HD;
#pragma unroll
        for (int j = 0; j < NO; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int c = j * 8 + 2 * t + e;
                if (c >= HD) continue;
                if (dk) dk[row + c] = from_f<T>(dka[j][2 * i + e] * scale);
                if (dv) dv[row + c] = from_f<T>(dva[j][2 * i + e]);
            }
    }
}

// ---------------------------------------------------------------------------
// backward, dQ of one query tile: grid (ceil(Tq/64), B*NH); each warp owns 16
// queries and loops over all key tiles (recomputing S and dP)

template <typename T, int HDP, bool VEC>
__global__ void __launch_bounds__(TC_THREADS)
    tc_dq_kernel(T *dq, const u16 *q, const u16 *k, const u16 *v, const u16 *dout,
                 const float *lse, const float *Dd, int Tq, int Tk, int NH, int HD, float scale,
                 float scale_log2) {
    constexpr int LD = HDP + 8, KB = HDP / 16, NO = HDP / 8, NS = TC_COLS / 8;
    __shared__ __align__(16) u16 Qs[TC_ROWS * LD];
    __shared__ __align__(16) u16 dOs[TC_ROWS * LD];
    __shared__ __align__(16) u16 Ks[TC_COLS * LD];
    __shared__ __align__(16) u16 Vs[TC_COLS * LD];

    const int D = NH * HD;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int q0 = blockIdx.x * TC_ROWS;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane >> 2, t = lane & 3, r0 = warp * 16;
    const u16 *qb = q + (size_t)b * Tq * D + (size_t)h * HD;
    const u16 *dob = dout + (size_t)b * Tq * D + (size_t)h * HD;
    const u16 *kb = k + (size_t)b * Tk * D + (size_t)h * HD;
    const u16 *vb = v + (size_t)b * Tk * D + (size_t)h * HD;

    load_tile<HDP, VEC>(Qs, qb, D, q0, Tq, HD);
    load_tile<HDP, VEC>(dOs, dob, D, q0, Tq, HD);
    __syncthreads();
    uint32_t qf[KB][4], of[KB][4];
#pragma unroll
    for (int kk = 0; kk < KB; kk++) {
        load_a(qf[kk], Qs, LD, r0, kk * 16, g, t);
        load_a(of[kk], dOs, LD, r0, kk * 16, g, t);
    }
    float lse_r[2], Dd_r[2];
    bool q_ok[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int row = q0 + r0 + g + 8 * i;
        q_ok[i] = row < Tq;
        lse_r[i] = q_ok[i] ? lse[(size_t)bh * Tq + row] * LOG2E : 0.0f;
        Dd_r[i] = q_ok[i] ? Dd[(size_t)bh * Tq + row] : 0.0f;
    }

    float dqa[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++) dqa[j][0] = dqa[j][1] = dqa[j][2] = dqa[j][3] = 0.0f;

    for (int k0 = 0; k0 < Tk; k0 += TC_COLS) {
        __syncthreads(); // the previous tile's Ks/Vs are no longer read
        load_tile<HDP, VEC>(Ks, kb, D, k0, Tk, HD);
        load_tile<HDP, VEC>(Vs, vb, D, k0, Tk, HD);
        __syncthreads();

        float s[NS][4], dp[NS][4];
#pragma unroll
        for (int j = 0; j < NS; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) s[j][e] = dp[j][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KB; kk++) {
                uint32_t b0, b1;
                load_b_nk(b0, b1, Ks, LD, j * 8, kk * 16, g, t);
                mma16816<T>(s[j], qf[kk], b0, b1);
                load_b_nk(b0, b1, Vs, LD, j * 8, kk * 16, g, t);
                mma16816<T>(dp[j], of[kk], b0, b1);
            }
        }
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = k0 + j * 8 + 2 * t + (e & 1);
                const int i = e >> 1;
                const float p =
                    (q_ok[i] && key < Tk) ? exp2f(s[j][e] * scale_log2 - lse_r[i]) : 0.0f;
                dp[j][e] = p * (dp[j][e] - Dd_r[i]);
            }
        // dQ += dS K (k = keys)
#pragma unroll
        for (int kk = 0; kk < TC_COLS / 16; kk++) {
            uint32_t a[4];
            a[0] = pack2<T>(dp[2 * kk][0], dp[2 * kk][1]);
            a[1] = pack2<T>(dp[2 * kk][2], dp[2 * kk][3]);
            a[2] = pack2<T>(dp[2 * kk + 1][0], dp[2 * kk + 1][1]);
            a[3] = pack2<T>(dp[2 * kk + 1][2], dp[2 * kk + 1][3]);
#pragma unroll
            for (int jj = 0; jj < NO / 2; jj++) {
                uint32_t bf[4];
                load_b_kn_x2(bf, Ks, LD, kk * 16, jj * 16, lane);
                mma16816<T>(dqa[2 * jj], a, bf[0], bf[1]);
                mma16816<T>(dqa[2 * jj + 1], a, bf[2], bf[3]);
            }
        }
    }

#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int row = q0 + r0 + g + 8 * i;
        if (row >= Tq) continue;
        T *orow = dq + ((size_t)b * Tq + row) * D + (size_t)h * HD;
#pragma unroll
        for (int j = 0; j < NO; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int c = j * 8 + 2 * t + e;
                if (c < HD) orow[c] = from_f<T>(dqa[j][2 * i + e] * scale);
            }
    }
}

// ---------------------------------------------------------------------------
// dispatch

// f(HDP constant, VEC constant)
template <typename F> void dispatch_tc(int HD, bool vec, F f) {
    auto with_hdp = [&](auto hdp) {
        if (vec)
            f(hdp, std::true_type{});
        else
            f(hdp, std::false_type{});
    };
    if (HD <= 16)
        with_hdp(std::integral_constant<int, 16>{});
    else if (HD <= 32)
        with_hdp(std::integral_constant<int, 32>{});
    else if (HD <= 48)
        with_hdp(std::integral_constant<int, 48>{});
    else
        with_hdp(std::integral_constant<int, 64>{});
}

bool aligned16(const void *p) { return p == nullptr || ((uintptr_t)p & 15u) == 0; }

} // namespace

// Called by cuda_attention.cu for ctx->act bf16/f16 with HD <= 64, Tq, Tk > 0.
void cuda_attention_tc_forward(vb_ctx *ctx, vb_act *out, float *lse, const vb_act *q,
                               const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH,
                               int HD) {
    cudaStream_t st = cuda_stream(ctx);
    const float scale_log2 = LOG2E / sqrtf((float)HD);
    const bool vec = HD % 8 == 0 && aligned16(q) && aligned16(k) && aligned16(v);
    dim3 grid((Tq + TC_ROWS - 1) / TC_ROWS, B * NH);
    auto run = [&](auto tag) {
        typedef typename decltype(tag)::type T;
        dispatch_tc(HD, vec, [&](auto hdp, auto vc) {
            constexpr int HDP = decltype(hdp)::value;
            constexpr bool VEC = decltype(vc)::value;
            tc_forward_kernel<T, HDP, VEC><<<grid, TC_THREADS, 0, st>>>(
                (T *)out, lse, (const u16 *)q, (const u16 *)k, (const u16 *)v, Tq, Tk, NH, HD,
                scale_log2);
            CUDA_LAUNCH_CHECK();
        });
    };
    if (ctx->act == VB_DTYPE_BF16)
        run(act_tag<__nv_bfloat16>{});
    else
        run(act_tag<__half>{});
}

// Dd[B,NH,Tq] = rowsum(dO * O) is already in place.
void cuda_attention_tc_backward(vb_ctx *ctx, vb_act *dq, vb_act *dk, vb_act *dv, const float *Dd,
                                const vb_act *dout, const float *lse, const vb_act *q,
                                const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH,
                                int HD) {
    cudaStream_t st = cuda_stream(ctx);
    const float scale = 1.0f / sqrtf((float)HD);
    const float scale_log2 = LOG2E * scale;
    const bool vec =
        HD % 8 == 0 && aligned16(q) && aligned16(k) && aligned16(v) && aligned16(dout);
    auto run = [&](auto tag) {
        typedef typename decltype(tag)::type T;
        dispatch_tc(HD, vec, [&](auto hdp, auto vc) {
            constexpr int HDP = decltype(hdp)::value;
            constexpr bool VEC = decltype(vc)::value;
            if (dk || dv) {
                dim3 grid((Tk + TC_COLS - 1) / TC_COLS, B * NH);
                tc_dkdv_kernel<T, HDP, VEC><<<grid, TC_THREADS, 0, st>>>(
                    (T *)dk, (T *)dv, (const u16 *)q, (const u16 *)k, (const u16 *)v,
                    (const u16 *)dout, lse, Dd, Tq, Tk, NH, HD, scale, scale_log2);
                CUDA_LAUNCH_CHECK();
            }
            if (dq) {
                dim3 grid((Tq + TC_ROWS - 1) / TC_ROWS, B * NH);
                tc_dq_kernel<T, HDP, VEC><<<grid, TC_THREADS, 0, st>>>(
                    (T *)dq, (const u16 *)q, (const u16 *)k, (const u16 *)v, (const u16 *)dout, lse,
                    Dd, Tq, Tk, NH, HD, scale, scale_log2);
                CUDA_LAUNCH_CHECK();
            }
        });
    };
    if (ctx->act == VB_DTYPE_BF16)
        run(act_tag<__nv_bfloat16>{});
    else
        run(act_tag<__half>{});
}
