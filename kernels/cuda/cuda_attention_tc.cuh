/* cuda_attention_tc.cuh: flash attention on the tensor cores, forward and
 * backward, for bfloat16 and float16 activations (mma.sync m16n8k16) and for
 * float32 activations with TF32 math (mma.sync m16n8k8, operands rounded to
 * tf32 as they enter shared memory or leave an accumulator). float32 with
 * TF32 off keeps the CUDA-core kernels of cuda_attention.cu.
 *
 * Written against the primitives of cuda_mma.cuh only (the mma and ldmatrix
 * instructions, conversions, one shuffle, __syncthreads), so that
 * kernels/cuda/emu/ can run these same kernels on the CPU in a lockstep warp
 * emulator; the launchers are in cuda_attention_tc.cu.
 *
 * Each warp owns 16 rows of its block's tile (128 query rows and 8 warps in
 * the forward, 64 rows and 4 warps in the backward kernels) and the whole
 * 64-column width of the other side's tile, so softmax
 * statistics and accumulators never leave the warp. The accumulator fragment
 * of one product is re-packed in registers as the A operand of the next
 * (S -> P for P V, S^T -> P^T and dS^T for P^T dO and dS^T Q, S -> dS for
 * dS K). For TF32 that re-packing permutes the 8 keys of a k-step (k-index t
 * is column 2t of the accumulator block, k-index t+4 is column 2t+1), which
 * costs no shuffles; the B operand of the same product reads its rows in the
 * same order.
 *
 * Tiles live in shared memory as the operand's raw bits (16-bit values, or
 * tf32 patterns in 32 bits) with rows padded to HDP + PAD elements (HDP = HD
 * rounded up to 16, zero-filled past HD): PAD = 8 halves keeps the 32-bit
 * fragment loads and ldmatrix rows free of bank conflicts, PAD = 4 words does
 * the same for the tf32 loads (row stride = 4 x odd words). Each kernel keeps
 * two tiles: the tiles of its own rows are loaded into registers once, and
 * their shared memory then holds the other side's tiles. Tokens past Tq or Tk
 * load as zeros; their scores are masked to probability zero, and their rows
 * are never stored.
 *
 * Softmax is float32 in the log2 domain (x = s * scale * log2(e), exp2);
 * lse is stored as the natural log. P and dS are rounded to the operand type
 * once, as the operand of their product. Backward: one kernel over key tiles
 * for dK/dV, one over query tiles for dQ (recomputing S and dP), no atomics
 * (bitwise reproducible).
 */
#ifndef VB_CUDA_ATTENTION_TC_CUH
#define VB_CUDA_ATTENTION_TC_CUH

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <type_traits>

#include "kernels/cuda/cuda_launch.cuh"

namespace tc {

// backward blocks: 4 warps, 64 rows; forward blocks: 8 warps, 128 query rows
// (each K/V tile brought from L2 serves twice the rows: the forward has the
// fewest flops per byte loaded of the three kernels)
enum { ROWS = 64, COLS = 64, THREADS = 128, FWD_ROWS = 128, FWD_THREADS = 256 };

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

// ---------------------------------------------------------------------------
// operand types: shared-memory element, k-step, padding and fragments

// bfloat16 / float16 activations: m16n8k16, two values per register
template <typename T> struct ops16 {
    typedef T out_t;       // activation type stored
    typedef uint16_t in_t; // activation bits read
    typedef uint16_t elem; // shared-memory element
    static constexpr int KS = 16, PAD = 8, VECN = 8;
    static constexpr bool RAW = true; // shared memory holds the activation's bits: cp.async

    static TC_DEV void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        if constexpr (std::is_same<T, tc_bf16>::value)
            mma_m16n8k16_bf16(c, a, b0, b1);
        else
            mma_m16n8k16_f16(c, a, b0, b1);
    }
    static TC_DEV uint32_t pack(float lo, float hi) {
        if constexpr (std::is_same<T, tc_bf16>::value)
            return pack_bf16x2(lo, hi);
        else
            return pack_f16x2(lo, hi);
    }
    static TC_DEV T out(float x) {
        if constexpr (std::is_same<T, tc_bf16>::value)
            return round_bf16(x);
        else
            return round_f16(x);
    }
    static TC_DEV elem conv(in_t x) { return x; }
    static TC_DEV uint4 conv_vec(const in_t *p) { return *reinterpret_cast<const uint4 *>(p); }
    static TC_DEV uint32_t ld32(const elem *p) { return *reinterpret_cast<const uint32_t *>(p); }

    // A (16 x KS, row-major) of rows r0.., columns k0.. of a tile [row][k]
    static TC_DEV void load_a(uint32_t (&a)[4], const elem *s, int ld, int r0, int k0, int g,
                              int t) {
        const elem *p = s + (r0 + g) * ld + k0 + 2 * t;
        a[0] = ld32(p);
        a[1] = ld32(p + 8 * ld);
        a[2] = ld32(p + 8);
        a[3] = ld32(p + 8 * ld + 8);
    }
    // B (KS x 8) with B[k][n] = tile[n0 + n][k0 + k] (a tile [n][k])
    static TC_DEV void load_b_nk(uint32_t &b0, uint32_t &b1, const elem *s, int ld, int n0, int k0,
                                 int g, int t) {
        const elem *p = s + (n0 + g) * ld + k0 + 2 * t;
        b0 = ld32(p);
        b1 = ld32(p + 8);
    }
    // b[0], b[1] of columns n0.. and b[2], b[3] of columns n0 + 8.. (load_b_nk
    // twice) in one ldmatrix: matrix i is rows n0 + 8(i/2).., columns k0 + 8(i%2)..
    static TC_DEV void load_b_nk2(uint32_t (&b)[4], const elem *s, int ld, int n0, int k0,
                                  int lane) {
        const int i = lane >> 3;
        ldmatrix_x4(b, s + (n0 + (i >> 1) * 8 + (lane & 7)) * ld + k0 + (i & 1) * 8);
    }
    // A of k-step ks from accumulator blocks of 8 columns: columns 16ks .. 16ks+15
    template <int N>
    static TC_DEV void acc_to_a(uint32_t (&a)[4], const float (&c)[N][4], int ks) {
        a[0] = pack(c[2 * ks][0], c[2 * ks][1]);
        a[1] = pack(c[2 * ks][2], c[2 * ks][3]);
        a[2] = pack(c[2 * ks + 1][0], c[2 * ks + 1][1]);
        a[3] = pack(c[2 * ks + 1][2], c[2 * ks + 1][3]);
    }
    // o[j] += A B_j with B_j[k][n] = tile[k0 + k][8j + n] (a tile [k][n]),
    // for the NO blocks of 8 columns; ldmatrix.trans reads two blocks at once
    template <int NO>
    static TC_DEV void mma_kn(float (&o)[NO][4], const uint32_t (&a)[4], const elem *s, int ld,
                              int k0, int lane) {
#pragma unroll
        for (int jj = 0; jj < NO / 2; jj++) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, s + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + jj * 16 +
                                     (lane >> 4) * 8);
            mma(o[2 * jj], a, b[0], b[1]);
            mma(o[2 * jj + 1], a, b[2], b[3]);
        }
    }
};

// float32 activations, TF32 math: m16n8k8, one value per register
struct ops_tf32 {
    typedef float out_t;
    typedef float in_t;
    typedef uint32_t elem; // tf32 bit patterns
    static constexpr int KS = 8, PAD = 4, VECN = 4;
    static constexpr bool RAW = false; // rounded on the way in: loads through registers

    static TC_DEV void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        mma_m16n8k8_tf32(c, a, b0, b1);
    }
    static TC_DEV float out(float x) { return x; }
    static TC_DEV elem conv(in_t x) { return cvt_tf32(x); }
    static TC_DEV uint4 conv_vec(const in_t *p) {
        const float4 v = *reinterpret_cast<const float4 *>(p);
        return make_uint4(cvt_tf32(v.x), cvt_tf32(v.y), cvt_tf32(v.z), cvt_tf32(v.w));
    }

    static TC_DEV void load_a(uint32_t (&a)[4], const elem *s, int ld, int r0, int k0, int g,
                              int t) {
        const elem *p = s + (r0 + g) * ld + k0 + t;
        a[0] = p[0];
        a[1] = p[8 * ld];
        a[2] = p[4];
        a[3] = p[8 * ld + 4];
    }
    static TC_DEV void load_b_nk(uint32_t &b0, uint32_t &b1, const elem *s, int ld, int n0, int k0,
                                 int g, int t) {
        const elem *p = s + (n0 + g) * ld + k0 + t;
        b0 = p[0];
        b1 = p[4];
    }
    static TC_DEV void load_b_nk2(uint32_t (&b)[4], const elem *s, int ld, int n0, int k0,
                                  int lane) {
        const int g = lane >> 2, t = lane & 3;
        load_b_nk(b[0], b[1], s, ld, n0, k0, g, t);
        load_b_nk(b[2], b[3], s, ld, n0 + 8, k0, g, t);
    }
    // A of k-step ks from accumulator block ks, keys permuted: k-index t is
    // column 2t, k-index t + 4 is column 2t + 1 (the thread's own values)
    template <int N>
    static TC_DEV void acc_to_a(uint32_t (&a)[4], const float (&c)[N][4], int ks) {
        a[0] = cvt_tf32(c[ks][0]);
        a[1] = cvt_tf32(c[ks][2]);
        a[2] = cvt_tf32(c[ks][1]);
        a[3] = cvt_tf32(c[ks][3]);
    }
    // B_j rows in the same permuted order: k-index t is tile row k0 + 2t,
    // k-index t + 4 is row k0 + 2t + 1
    template <int NO>
    static TC_DEV void mma_kn(float (&o)[NO][4], const uint32_t (&a)[4], const elem *s, int ld,
                              int k0, int lane) {
        const int g = lane >> 2, t = lane & 3;
        const elem *p = s + (k0 + 2 * t) * ld + g;
#pragma unroll
        for (int j = 0; j < NO; j++) mma(o[j], a, p[8 * j], p[ld + 8 * j]);
    }
};

// ---------------------------------------------------------------------------
// tiles: dst[r][c] (row stride HDP + PAD) = src[(row0 + r) * D + c] as the
// operand's bits, zero past nrows and HD. VEC: 16-byte loads (HD % VECN == 0,
// D % VECN == 0, src 16-byte aligned), which for 16-bit activations are
// cp.async copies that land at the caller's cp_async_wait; every other load
// is done when load_tile returns. Callers commit and wait either way.

template <class OP, int HDP, bool VEC, int NT = THREADS>
TC_DEV void load_tile(typename OP::elem *dst, const typename OP::in_t *src, int D, int row0,
                      int nrows, int HD) {
    constexpr int LD = HDP + OP::PAD;
    if constexpr (VEC && OP::RAW) {
        constexpr int VN = OP::VECN, CH = HDP / VN;
        for (int idx = threadIdx.x; idx < ROWS * CH; idx += NT) {
            const int r = idx / CH, c = (idx % CH) * VN;
            const bool ok = row0 + r < nrows && c < HD;
            cp_async_16(dst + r * LD + c, ok ? src + (size_t)(row0 + r) * D + c : src, ok);
        }
    } else if constexpr (VEC) {
        constexpr int VN = OP::VECN, CH = HDP / VN;
        for (int idx = threadIdx.x; idx < ROWS * CH; idx += NT) {
            const int r = idx / CH, c = (idx % CH) * VN;
            uint4 val = make_uint4(0u, 0u, 0u, 0u);
            if (row0 + r < nrows && c < HD) val = OP::conv_vec(src + (size_t)(row0 + r) * D + c);
            *reinterpret_cast<uint4 *>(dst + r * LD + c) = val;
        }
    } else {
        for (int idx = threadIdx.x; idx < ROWS * HDP; idx += NT) {
            const int r = idx / HDP, c = idx % HDP;
            typename OP::elem val = 0;
            if (row0 + r < nrows && c < HD) val = OP::conv(src[(size_t)(row0 + r) * D + c]);
            dst[r * LD + c] = val;
        }
    }
}

// Streamed tiles are double-buffered (the next tile's copies in flight while
// the current one is used) where both buffers of the kernel's two streams fit
// in 48 KiB of static shared memory; otherwise one buffer, loaded in turn.
template <class OP, int HDP>
constexpr int NBUF =
    4 * COLS * (HDP + OP::PAD) * (int)sizeof(typename OP::elem) + 1024 <= 48 * 1024 ? 2 : 1;

TC_DEV float quad_max(float x) {
    x = fmaxf(x, warp_xor(x, 1));
    return fmaxf(x, warp_xor(x, 2));
}
TC_DEV float quad_sum(float x) {
    x += warp_xor(x, 1);
    return x + warp_xor(x, 2);
}

// acc[j] (j < N, N even) = A B_j, B_j[k][n] = tile[8j + n][k] (a tile [n][k]),
// over the KB k-steps of the operand a
template <class OP, int N, int KB>
TC_DEV void mma_nk(float (&acc)[N][4], const uint32_t (&a)[KB][4], const typename OP::elem *tile,
                   int ld, int lane) {
#pragma unroll
    for (int j = 0; j < N; j += 2) {
#pragma unroll
        for (int e = 0; e < 4; e++) acc[j][e] = acc[j + 1][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KB; kk++) {
            uint32_t b[4];
            OP::load_b_nk2(b, tile, ld, j * 8, kk * OP::KS, lane);
            OP::mma(acc[j], a[kk], b[0], b[1]);
            OP::mma(acc[j + 1], a[kk], b[2], b[3]);
        }
    }
}

// The top of each tile loop, shared by the three kernels. A barrier: every
// warp is done with the previous iteration's tiles and with the fragments
// staged in the last buffer. With two buffers, the next tile's copies go into
// the other one and this tile's are awaited, the next left in flight; with
// one, this tile is loaded now. A closing barrier, since a cp.async wait
// covers only the issuing thread's copies. load(buf, start) issues and
// commits one tile's copies.
template <int NB, typename Load>
__device__ __forceinline__ void tile_pipeline_step(int it, int ntiles, int start, int step, Load &&load) {
    __syncthreads();
    if (NB == 2) {
        if (it + 1 < ntiles) {
            load((it & 1) ^ 1, start + step);
            cp_async_wait<1>(); // this tile has landed; the next may be in flight
        } else {
            cp_async_wait<0>();
        }
    } else {
        load(0, start);
        cp_async_wait<0>();
    }
    __syncthreads();
}

// ---------------------------------------------------------------------------
// forward: grid (ceil(Tq/128), B*NH), 256 threads; Q's 128 rows are staged
// in the last K and V buffers, 64 rows each
//
// Two blocks per SM (16 warps, registers capped at 128) up to head dim 48, the
// largest of the shipped configurations; at 64 that cap would spill.
template <class OP, int HDP, bool VEC>
__global__ void __launch_bounds__(FWD_THREADS, HDP <= 48 ? 2 : 1)
    forward_kernel(typename OP::out_t *out, float *lse, const typename OP::in_t *q,
                   const typename OP::in_t *k, const typename OP::in_t *v, int Tq, int Tk, int NH,
                   int HD, float scale_log2) {
    typedef typename OP::elem E;
    constexpr int LD = HDP + OP::PAD, KB = HDP / OP::KS, NO = HDP / 8, NS = COLS / 8;
    constexpr int NB = NBUF<OP, HDP>;
    __shared__ __align__(16) E tileK[NB][COLS * LD]; // K tiles (Q's rows 0-63 first)
    __shared__ __align__(16) E tileV[NB][COLS * LD]; // V tiles (Q's rows 64-127 first)

    const int D = NH * HD;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int q0 = blockIdx.x * FWD_ROWS;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane >> 2, t = lane & 3, r0 = warp * 16;
    const int ntiles = CEIL_DIV(Tk, COLS);
    const typename OP::in_t *qb = q + (size_t)b * Tq * D + (size_t)h * HD;
    const typename OP::in_t *kb = k + (size_t)b * Tk * D + (size_t)h * HD;
    const typename OP::in_t *vb = v + (size_t)b * Tk * D + (size_t)h * HD;
    auto load_kv = [&](int buf, int kstart) {
        load_tile<OP, HDP, VEC, FWD_THREADS>(tileK[buf], kb, D, kstart, Tk, HD);
        load_tile<OP, HDP, VEC, FWD_THREADS>(tileV[buf], vb, D, kstart, Tk, HD);
        cp_async_commit();
    };

    load_tile<OP, HDP, VEC, FWD_THREADS>(tileK[NB - 1], qb, D, q0, Tq, HD);
    load_tile<OP, HDP, VEC, FWD_THREADS>(tileV[NB - 1], qb, D, q0 + ROWS, Tq, HD);
    cp_async_commit();
    if (NB == 2) load_kv(0, 0);
    cp_async_wait<0>();
    __syncthreads();
    uint32_t qf[KB][4];
#pragma unroll
    for (int kk = 0; kk < KB; kk++)
        OP::load_a(qf[kk], warp < 4 ? tileK[NB - 1] : tileV[NB - 1], LD, r0 % ROWS, kk * OP::KS, g,
                   t);

    float o[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int it = 0; it < ntiles; it++) {
        const int cur = NB == 2 ? it & 1 : 0, k0 = it * COLS;
        tile_pipeline_step<NB>(it, ntiles, k0, COLS, load_kv); // Q's fragments are staged in the last buffer

        float s[NS][4];
        mma_nk<OP>(s, qf, tileK[cur], LD, lane);
        // keys past Tk (the last tile only) get probability zero
        if (k0 + COLS > Tk) {
#pragma unroll
            for (int j = 0; j < NS; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (k0 + j * 8 + 2 * t + (e & 1) >= Tk) s[j][e] = -INFINITY;
        }
        // row maxima (rows g, g+8), then everything in the log2 domain:
        // p = exp2(s * scale_log2 - m) with m the running maximum of s * scale_log2
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
        float corr[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 2; i++) {
            // every tile holds at least one valid key: m_new is finite for finite inputs
            const float m_new = fmaxf(m[i], quad_max(mx[i]) * scale_log2);
            corr[i] = exp2f(m[i] - m_new); // 0 on the first tile
            m[i] = m_new;
        }
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[j][e] = exp2f(fmaf(s[j][e], scale_log2, -m[e >> 1]));
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
        for (int kk = 0; kk < COLS / OP::KS; kk++) {
            uint32_t a[4];
            OP::acc_to_a(a, s, kk);
            OP::mma_kn(o, a, tileV[cur], LD, kk * OP::KS, lane);
        }
    }

#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int row = q0 + r0 + g + 8 * i;
        if (row >= Tq) continue;
        const float inv = 1.0f / l[i];
        typename OP::out_t *orow = out + ((size_t)b * Tq + row) * D + (size_t)h * HD;
#pragma unroll
        for (int j = 0; j < NO; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int c = j * 8 + 2 * t + e;
                if (c < HD) orow[c] = OP::out(o[j][2 * i + e] * inv);
            }
        if (t == 0) lse[(size_t)bh * Tq + row] = (m[i] + log2f(l[i])) * LN2;
    }
}

// ---------------------------------------------------------------------------
// backward, dK and dV of one key tile: grid (ceil(Tk/64), B*NH); each warp
// owns 16 keys and loops over all query tiles

template <class OP, int HDP, bool VEC>
__global__ void __launch_bounds__(THREADS)
    dkdv_kernel(typename OP::out_t *dk, typename OP::out_t *dv, const typename OP::in_t *q,
                const typename OP::in_t *k, const typename OP::in_t *v,
                const typename OP::in_t *dout, const float *lse, const float *Dd, int Tq, int Tk,
                int NH, int HD, float scale, float scale_log2) {
    typedef typename OP::elem E;
    constexpr int LD = HDP + OP::PAD, KB = HDP / OP::KS, NO = HDP / 8, NS = ROWS / 8;
    constexpr int NB = NBUF<OP, HDP>;
    __shared__ __align__(16) E tileQ[NB][ROWS * LD];  // Q tiles (K first, in the last buffer)
    __shared__ __align__(16) E tileDO[NB][ROWS * LD]; // dO tiles (V first, in the last buffer)
    __shared__ __align__(16) float lse_s[NB][ROWS], Dd_s[NB][ROWS]; // lse as stored (natural log)

    const int D = NH * HD;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int k0 = blockIdx.x * COLS;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane >> 2, t = lane & 3, r0 = warp * 16;
    const int ntiles = CEIL_DIV(Tq, ROWS);
    const typename OP::in_t *qb = q + (size_t)b * Tq * D + (size_t)h * HD;
    const typename OP::in_t *dob = dout + (size_t)b * Tq * D + (size_t)h * HD;
    const typename OP::in_t *kb = k + (size_t)b * Tk * D + (size_t)h * HD;
    const typename OP::in_t *vb = v + (size_t)b * Tk * D + (size_t)h * HD;
    const float *lse_b = lse + (size_t)bh * Tq;
    const float *Dd_b = Dd + (size_t)bh * Tq;
    auto load_qdo = [&](int buf, int qstart) {
        load_tile<OP, HDP, VEC>(tileQ[buf], qb, D, qstart, Tq, HD);
        load_tile<OP, HDP, VEC>(tileDO[buf], dob, D, qstart, Tq, HD);
        for (int i = threadIdx.x; i < 2 * ROWS; i += THREADS) {
            const int r = i % ROWS;
            const bool ok = qstart + r < Tq;
            if (i < ROWS) cp_async_4(&lse_s[buf][r], ok ? lse_b + qstart + r : lse_b, ok);
            else cp_async_4(&Dd_s[buf][r], ok ? Dd_b + qstart + r : Dd_b, ok);
        }
        cp_async_commit();
    };

    load_tile<OP, HDP, VEC>(tileQ[NB - 1], kb, D, k0, Tk, HD);
    load_tile<OP, HDP, VEC>(tileDO[NB - 1], vb, D, k0, Tk, HD);
    cp_async_commit();
    if (NB == 2) load_qdo(0, 0);
    cp_async_wait<0>();
    __syncthreads();
    uint32_t kf[KB][4], vf[KB][4];
#pragma unroll
    for (int kk = 0; kk < KB; kk++) {
        OP::load_a(kf[kk], tileQ[NB - 1], LD, r0, kk * OP::KS, g, t);
        OP::load_a(vf[kk], tileDO[NB - 1], LD, r0, kk * OP::KS, g, t);
    }

    float dka[NO][4], dva[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) dka[j][e] = dva[j][e] = 0.0f;

    for (int it = 0; it < ntiles; it++) {
        const int cur = NB == 2 ? it & 1 : 0, q0 = it * ROWS;
        tile_pipeline_step<NB>(it, ntiles, q0, ROWS, load_qdo); // K/V fragments are staged in the last buffer

        // S^T[key][query] = K Q^T and dP^T[key][query] = V dO^T
        float st[NS][4], dpt[NS][4];
        mma_nk<OP>(st, kf, tileQ[cur], LD, lane);
        mma_nk<OP>(dpt, vf, tileDO[cur], LD, lane);
        // P^T = exp(S^T scale - lse), dS^T = P^T (dP^T - Dd). No masking: a
        // query past Tq has zero q, dO, lse and Dd, so p = 1 and dS = 0 there,
        // and its column adds nothing to dV += P^T dO or dK += dS^T Q; a key
        // past Tk only ever reaches its own row of dK and dV, never stored.
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int qi = j * 8 + 2 * t + (e & 1);
                const float p = exp2f(fmaf(st[j][e], scale_log2, -lse_s[cur][qi] * LOG2E));
                st[j][e] = p;
                dpt[j][e] = p * (dpt[j][e] - Dd_s[cur][qi]);
            }
        // dV += P^T dO, dK += dS^T Q (k = queries)
#pragma unroll
        for (int kk = 0; kk < ROWS / OP::KS; kk++) {
            uint32_t pa[4], sa[4];
            OP::acc_to_a(pa, st, kk);
            OP::acc_to_a(sa, dpt, kk);
            OP::mma_kn(dva, pa, tileDO[cur], LD, kk * OP::KS, lane);
            OP::mma_kn(dka, sa, tileQ[cur], LD, kk * OP::KS, lane);
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
                if (dk) dk[row + c] = OP::out(dka[j][2 * i + e] * scale);
                if (dv) dv[row + c] = OP::out(dva[j][2 * i + e]);
            }
    }
}

// ---------------------------------------------------------------------------
// backward, dQ of one query tile: grid (ceil(Tq/64), B*NH); each warp owns 16
// queries and loops over all key tiles (recomputing S and dP)

template <class OP, int HDP, bool VEC>
__global__ void __launch_bounds__(THREADS)
    dq_kernel(typename OP::out_t *dq, const typename OP::in_t *q, const typename OP::in_t *k,
              const typename OP::in_t *v, const typename OP::in_t *dout, const float *lse,
              const float *Dd, int Tq, int Tk, int NH, int HD, float scale, float scale_log2) {
    typedef typename OP::elem E;
    constexpr int LD = HDP + OP::PAD, KB = HDP / OP::KS, NO = HDP / 8, NS = COLS / 8;
    constexpr int NB = NBUF<OP, HDP>;
    __shared__ __align__(16) E tileK[NB][COLS * LD]; // K tiles (Q first, in the last buffer)
    __shared__ __align__(16) E tileV[NB][COLS * LD]; // V tiles (dO first, in the last buffer)

    const int D = NH * HD;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int q0 = blockIdx.x * ROWS;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane >> 2, t = lane & 3, r0 = warp * 16;
    const int ntiles = CEIL_DIV(Tk, COLS);
    const typename OP::in_t *qb = q + (size_t)b * Tq * D + (size_t)h * HD;
    const typename OP::in_t *dob = dout + (size_t)b * Tq * D + (size_t)h * HD;
    const typename OP::in_t *kb = k + (size_t)b * Tk * D + (size_t)h * HD;
    const typename OP::in_t *vb = v + (size_t)b * Tk * D + (size_t)h * HD;
    auto load_kv = [&](int buf, int kstart) {
        load_tile<OP, HDP, VEC>(tileK[buf], kb, D, kstart, Tk, HD);
        load_tile<OP, HDP, VEC>(tileV[buf], vb, D, kstart, Tk, HD);
        cp_async_commit();
    };

    load_tile<OP, HDP, VEC>(tileK[NB - 1], qb, D, q0, Tq, HD);
    load_tile<OP, HDP, VEC>(tileV[NB - 1], dob, D, q0, Tq, HD);
    cp_async_commit();
    if (NB == 2) load_kv(0, 0);
    cp_async_wait<0>();
    __syncthreads();
    uint32_t qf[KB][4], of[KB][4];
#pragma unroll
    for (int kk = 0; kk < KB; kk++) {
        OP::load_a(qf[kk], tileK[NB - 1], LD, r0, kk * OP::KS, g, t);
        OP::load_a(of[kk], tileV[NB - 1], LD, r0, kk * OP::KS, g, t);
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

    for (int it = 0; it < ntiles; it++) {
        const int cur = NB == 2 ? it & 1 : 0, k0 = it * COLS;
        tile_pipeline_step<NB>(it, ntiles, k0, COLS, load_kv); // Q/dO fragments are staged in the last buffer

        float s[NS][4], dp[NS][4];
        mma_nk<OP>(s, qf, tileK[cur], LD, lane);
        mma_nk<OP>(dp, of, tileV[cur], LD, lane);
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = e >> 1;
                const float p = exp2f(fmaf(s[j][e], scale_log2, -lse_r[i]));
                dp[j][e] = p * (dp[j][e] - Dd_r[i]);
            }
        // keys past Tk (the last tile only): their zero rows of K would add
        // nothing to dQ, but p = exp2(-lse) there overflows to inf when the
        // row's scores are all far below zero, and inf times 0 is NaN. A
        // query past Tq only reaches its own row of dQ, never stored.
        if (k0 + COLS > Tk) {
#pragma unroll
            for (int j = 0; j < NS; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (k0 + j * 8 + 2 * t + (e & 1) >= Tk) dp[j][e] = 0.0f;
        }
        // dQ += dS K (k = keys)
#pragma unroll
        for (int kk = 0; kk < COLS / OP::KS; kk++) {
            uint32_t a[4];
            OP::acc_to_a(a, dp, kk);
            OP::mma_kn(dqa, a, tileK[cur], LD, kk * OP::KS, lane);
        }
    }

#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int row = q0 + r0 + g + 8 * i;
        if (row >= Tq) continue;
        typename OP::out_t *orow = dq + ((size_t)b * Tq + row) * D + (size_t)h * HD;
#pragma unroll
        for (int j = 0; j < NO; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int c = j * 8 + 2 * t + e;
                if (c < HD) orow[c] = OP::out(dqa[j][2 * i + e] * scale);
            }
    }
}

// ---------------------------------------------------------------------------
// host-side selection of the compiled variants

// f(HDP constant, VEC constant) for HD <= 64
template <typename F> void dispatch(int HD, bool vec, F f) {
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

// the 16-byte tile loads apply when HD is a whole number of vectors and every
// operand starts on a 16-byte boundary
template <class OP> bool vec_ok(int HD, const void *a, const void *b, const void *c, const void *d) {
    const void *p[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        if (((uintptr_t)p[i] & 15u) != 0) return false;
    return HD % OP::VECN == 0;
}

} // namespace tc

#endif
