/* cuda_fp8.cu: amp_mode fp8 on CUDA: the casts of GEMM operands to FP8
 * bytes with their amax, the scale update with the history's roll, and what
 * a context can run. The GEMMs are cuda_matmul.cu's.
 *
 * A cast rounds exactly as the CPU's emulation does: x (the activation
 * dtype's value, exact in float32) times the scale in float32, rounded by
 * vb_fp8_round (kernels/fp8.h), so the byte holds the same value the CPU's
 * quantise-dequantise multiplies by the scale. cuda_fp8.h's conversion then
 * only encodes it (the value is already an FP8 one: nothing rounds twice).
 */
#include <cuda_fp8.h>

#include <stdio.h>

#include "kernels/cuda/cuda_common.cuh"

static size_t round256(size_t b) { return (b + 255) & ~(size_t)255; }

cuda_fp8_layout cuda_fp8_layout_of(int N, int C, int OC) {
    cuda_fp8_layout L;
    L.n_pad = CEIL_DIV(N, 16) * 16;
    const size_t n = (size_t)N, np = (size_t)L.n_pad, c = (size_t)C, oc = (size_t)OC;
    size_t o = 256; // the inverse scales' slots (3 x CUDA_FP8_INV_SLOT bytes)
    L.x = o, o += round256(n * c);
    L.w = o, o += round256(oc * c);
    L.g = o, o += round256(n * oc);
    L.g_t = o, o += round256(oc * np);
    L.x_t = o, o += round256(c * np);
    L.w_t = o, o += round256(c * oc);
    L.total = o;
    return L;
}

// 0 for a shape cuBLASLt's FP8 GEMMs cannot take: C and OC are leading
// dimensions of FP8 operands (a multiple of 16 bytes); N is padded
size_t cuda_fp8_scratch_bytes(vb_ctx *ctx, int N, int C, int OC) {
    (void)ctx;
    if (N < 1 || C < 16 || OC < 16 || C % 16 || OC % 16) return 0;
    return cuda_fp8_layout_of(N, C, OC).total;
}

const char *cuda_fp8_unsupported(vb_ctx *ctx) {
    static __thread char why[192];
    const cuda_impl *c = cuda_impl_of(ctx);
    if (c->cc_major * 10 + c->cc_minor < 89) {
        snprintf(why, sizeof why,
                 "FP8 tensor cores need compute capability 8.9 or later (Ada, Hopper); device %d is %d.%d",
                 ctx->device, c->cc_major, c->cc_minor);
        return why;
    }
    if (ctx->act != VB_DTYPE_BF16)
        return "the FP8 GEMMs write bfloat16 activations and the context's are not bfloat16";
    return NULL;
}

// ---------------------------------------------------------------------------
// the casts. Every element goes through fp8_quantise, so the bytes (and the
// amax) do not depend on which kernel wrote them. The vector kernels move 8
// elements a thread (16-byte loads of bf16, 8-byte stores of FP8): a cast
// reads 2 bytes and writes 1 (2 with the transposed copy) per element, so it
// is bound by memory, and byte-wide stores left it at a third of the copy
// rate. The scalar kernel takes what they do not (a row length or a pointer
// that is not a multiple of 8 elements or bytes).

__device__ __forceinline__ unsigned char fp8_quantise(float x, float s, vb_fp8_format fmt) {
    const __nv_fp8_interpretation_t kind = fmt == VB_FP8_E4M3 ? __NV_E4M3 : __NV_E5M2;
    return (unsigned char)__nv_cvt_float_to_fp8(vb_fp8_round(x * s, fmt), __NV_SATFINITE, kind);
}

// the block's max of m into *amax (non-negative floats, +inf included,
// order as their bit patterns); every thread of the block calls it
__device__ __forceinline__ void fp8_block_amax(float m, float *amax) {
    __shared__ float warp_max[1024 / WARP_SIZE]; // one per warp of a block of at most 1024 threads
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const int t = threadIdx.x + threadIdx.y * blockDim.x, nw = CEIL_DIV(blockDim.x * blockDim.y, WARP_SIZE);
    if (t % WARP_SIZE == 0) warp_max[t / WARP_SIZE] = m;
    __syncthreads();
    if (t == 0) {
        float b = warp_max[0];
        for (int k = 1; k < nw; k++) b = fmaxf(b, warp_max[k]);
        if (b > 0.0f) atomicMax((int *)amax, __float_as_int(b));
    }
}

// 8 consecutive elements as floats (16 bytes of bf16/f16, 32 of float)
template <typename T> __device__ __forceinline__ void load8(float (&v)[8], const T *p) {
    if constexpr (sizeof(T) == 2) {
        const uint4 u = *reinterpret_cast<const uint4 *>(p);
        const T *h = reinterpret_cast<const T *>(&u);
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = to_f(h[i]);
    } else {
        const float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    }
}

// plain copy only: the tensor as n / 8 groups of 8, grid-stride
template <typename T>
__global__ void fp8_cast_vec_kernel(unsigned char *out, const T *in, size_t n8, const float *scale, float *inv,
                                    float *amax, vb_fp8_format fmt) {
    const float s = *scale;
    if (inv && blockIdx.x == 0 && threadIdx.x == 0) *inv = 1.0f / s;
    float m = 0.0f;
    for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < n8; g += (size_t)gridDim.x * blockDim.x) {
        float v[8];
        load8(v, in + g * 8);
        uint2 q;
        unsigned char *b = reinterpret_cast<unsigned char *>(&q);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            m = vb_fp8_amax_merge(m, fabsf(v[i]));
            b[i] = fp8_quantise(v[i], s, fmt);
        }
        reinterpret_cast<uint2 *>(out)[g] = q;
    }
    if (amax) fp8_block_amax(m, amax);
}

// 64 x 64 tiles, 256 threads; each thread quantises 2 x 8 elements of a row
// (the plain copy written as it goes) into a shared tile, then writes 2 x 8
// bytes of the transposed copy, each 8 rows of one column; rows R..ld_t of
// out_t (the padding) get +0
enum { FP8_VT = 64, FP8_VTHREADS = 256 };
template <typename T>
__global__ void __launch_bounds__(FP8_VTHREADS)
    fp8_cast_t_vec_kernel(unsigned char *out, unsigned char *out_t, int ld_t, const T *in, int R, int Cc,
                          const float *scale, float *inv, float *amax, vb_fp8_format fmt) {
    __shared__ unsigned char tile[FP8_VT][FP8_VT + 8];
    const float s = *scale;
    if (inv && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *inv = 1.0f / s;
    const int c0 = blockIdx.x * FP8_VT, r0 = blockIdx.y * FP8_VT;
    float m = 0.0f;
    for (int seg = threadIdx.x; seg < FP8_VT * FP8_VT / 8; seg += FP8_VTHREADS) {
        const int rr = seg / (FP8_VT / 8), cc = seg % (FP8_VT / 8) * 8;
        const int r = r0 + rr, c = c0 + cc;
        uint2 q = make_uint2(0u, 0u); // +0: the transposed copy's padding
        if (r < R && c < Cc) {
            float v[8];
            load8(v, in + (size_t)r * Cc + c);
            unsigned char *b = reinterpret_cast<unsigned char *>(&q);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                m = vb_fp8_amax_merge(m, fabsf(v[i]));
                b[i] = fp8_quantise(v[i], s, fmt);
            }
            if (out) *reinterpret_cast<uint2 *>(out + (size_t)r * Cc + c) = q;
        }
        *reinterpret_cast<uint2 *>(&tile[rr][cc]) = q;
    }
    __syncthreads();
    for (int seg = threadIdx.x; seg < FP8_VT * FP8_VT / 8; seg += FP8_VTHREADS) {
        const int cc = seg / (FP8_VT / 8), rr = seg % (FP8_VT / 8) * 8;
        const int c = c0 + cc, r = r0 + rr;
        if (c >= Cc || r >= ld_t) continue;
        uint2 q;
        unsigned char *b = reinterpret_cast<unsigned char *>(&q);
#pragma unroll
        for (int i = 0; i < 8; i++) b[i] = tile[rr + i][cc];
        *reinterpret_cast<uint2 *>(out_t + (size_t)c * ld_t + r) = q;
    }
    if (amax) fp8_block_amax(m, amax);
}

// the general case: 32 x 32 tiles, 32 x 8 threads, one element a thread a row
enum { FP8_TILE = 32, FP8_ROWS = 8 };

template <typename T>
__global__ void fp8_cast_kernel(unsigned char *out, unsigned char *out_t, int ld_t, const T *in, int R, int Cc,
                                const float *scale, float *inv, float *amax, vb_fp8_format fmt) {
    __shared__ unsigned char tile[FP8_TILE][FP8_TILE + 4];
    const float s = *scale;
    if (inv && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) *inv = 1.0f / s;
    const int c0 = blockIdx.x * FP8_TILE, r0 = blockIdx.y * FP8_TILE;
    const int c = c0 + threadIdx.x;
    float m = 0.0f;
    for (int j = threadIdx.y; j < FP8_TILE; j += FP8_ROWS) {
        const int r = r0 + j;
        unsigned char q = 0; // +0: the transposed copy's padding
        if (r < R && c < Cc) {
            const float x = to_f(in[(size_t)r * Cc + c]);
            m = vb_fp8_amax_merge(m, fabsf(x));
            q = fp8_quantise(x, s, fmt);
            if (out) out[(size_t)r * Cc + c] = q;
        }
        tile[j][threadIdx.x] = q;
    }
    if (out_t) {
        __syncthreads();
        // out_t[cc][rr] = in[rr][cc] for rr < ld_t (zeros past R)
        for (int j = threadIdx.y; j < FP8_TILE; j += FP8_ROWS) {
            const int cc = c0 + j, rr = r0 + threadIdx.x;
            if (cc < Cc && rr < ld_t) out_t[(size_t)cc * ld_t + rr] = tile[threadIdx.x][j];
        }
    }
    if (amax) fp8_block_amax(m, amax);
}

void cuda_fp8_cast(vb_ctx *ctx, unsigned char *out, unsigned char *out_t, int ld_t, const vb_act *in, int R,
                   int Cc, const float *scale, float *inv, float *amax, vb_fp8_format fmt) {
    NvtxRange r("fp8_cast");
    if (R <= 0 || Cc <= 0) return;
    const int rows = out_t && ld_t > R ? ld_t : R;
    // the vector kernels: rows of whole 8-element groups, 16-byte aligned
    // input (8 elements of 2 bytes; 32-byte loads of float are two 16-byte
    // ones), 8-byte aligned outputs
    const bool vec = Cc % 8 == 0 && (uintptr_t)in % 16 == 0 && (uintptr_t)out % 8 == 0 &&
                     (uintptr_t)out_t % 8 == 0 && (!out_t || ld_t % 8 == 0);
    cudaStream_t st = cuda_stream(ctx);
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        if (vec && !out_t) {
            // a grid of 8 blocks an SM walks the tensor (one amax atomic a block)
            const size_t n8 = (size_t)R * (size_t)Cc / 8, threads = 256, cap = (size_t)cuda_impl_of(ctx)->num_sms * 8;
            const size_t want = CEIL_DIV(n8, threads);
            const unsigned blocks = (unsigned)(want < cap ? want : cap);
            fp8_cast_vec_kernel<T><<<blocks, threads, 0, st>>>(out, (const T *)in, n8, scale, inv, amax, fmt);
        } else if (vec) {
            const dim3 grid((unsigned)CEIL_DIV(Cc, FP8_VT), (unsigned)CEIL_DIV(rows, FP8_VT));
            if (grid.y > (unsigned)CUDA_MAX_GRID_YZ) vb_cuda_die("fp8_cast: %d rows is more than one launch covers", rows);
            fp8_cast_t_vec_kernel<T><<<grid, FP8_VTHREADS, 0, st>>>(out, out_t, ld_t, (const T *)in, R, Cc, scale,
                                                                     inv, amax, fmt);
        } else {
            const dim3 grid((unsigned)CEIL_DIV(Cc, FP8_TILE), (unsigned)CEIL_DIV(rows, FP8_TILE));
            if (grid.y > (unsigned)CUDA_MAX_GRID_YZ) vb_cuda_die("fp8_cast: %d rows is more than one launch covers", rows);
            fp8_cast_kernel<T><<<grid, dim3(FP8_TILE, FP8_ROWS), 0, st>>>(out, out_t, ld_t, (const T *)in, R, Cc,
                                                                          scale, inv, amax, fmt);
        }
        CUDA_LAUNCH_CHECK();
    });
}

// ---------------------------------------------------------------------------
// the scale update: one thread per tensor, its history a column of stride

__global__ void fp8_scale_update_kernel(float *scale, float *history, int n, int stride, int len,
                                        vb_fp8_format fmt, vb_fp8_amax_algo algo, int margin) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float *h = history + i;
    const float amax = vb_fp8_history_amax(h, len, stride, algo);
    scale[i] = vb_fp8_scale_from_amax(amax, scale[i], fmt, margin);
    for (int k = len - 1; k > 0; k--) h[(size_t)k * stride] = h[(size_t)(k - 1) * stride];
    h[0] = 0.0f;
}

void cuda_fp8_scale_update(vb_ctx *ctx, float *scale, float *history, int n, int stride, int len, vb_fp8_format fmt,
                           vb_fp8_amax_algo algo, int margin) {
    NvtxRange r("fp8_scale_update");
    if (n <= 0) return;
    fp8_scale_update_kernel<<<(unsigned)CEIL_DIV(n, 128), 128, 0, cuda_stream(ctx)>>>(scale, history, n, stride,
                                                                                      len, fmt, algo, margin);
    CUDA_LAUNCH_CHECK();
}
