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
    L.n_pad = (N + 15) / 16 * 16;
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
// the cast: 32 x 32 tiles, 32 x 8 threads; the transposed copy goes through
// shared memory so both writes are coalesced

enum { FP8_TILE = 32, FP8_ROWS = 8 };

template <typename T>
__global__ void fp8_cast_kernel(unsigned char *out, unsigned char *out_t, int ld_t, const T *in, int R, int Cc,
                                const float *scale, float *inv, float *amax, vb_fp8_format fmt) {
    __shared__ unsigned char tile[FP8_TILE][FP8_TILE + 4];
    __shared__ float warp_max[FP8_ROWS];
    const __nv_fp8_interpretation_t kind = fmt == VB_FP8_E4M3 ? __NV_E4M3 : __NV_E5M2;
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
            q = (unsigned char)__nv_cvt_float_to_fp8(vb_fp8_round(x * s, fmt), __NV_SATFINITE, kind);
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
    if (!amax) return;
    // non-negative floats (+inf included) order as their bit patterns
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x == 0) warp_max[threadIdx.y] = m;
    __syncthreads();
    if (threadIdx.y == 0 && threadIdx.x == 0) {
        float b = warp_max[0];
        for (int k = 1; k < FP8_ROWS; k++) b = fmaxf(b, warp_max[k]);
        if (b > 0.0f) atomicMax((int *)amax, __float_as_int(b));
    }
}

void cuda_fp8_cast(vb_ctx *ctx, unsigned char *out, unsigned char *out_t, int ld_t, const vb_act *in, int R,
                   int Cc, const float *scale, float *inv, float *amax, vb_fp8_format fmt) {
    NvtxRange r("fp8_cast");
    if (R <= 0 || Cc <= 0) return;
    const int rows = out_t && ld_t > R ? ld_t : R;
    const dim3 grid((unsigned)((Cc + FP8_TILE - 1) / FP8_TILE), (unsigned)((rows + FP8_TILE - 1) / FP8_TILE));
    if (grid.y > 65535u) vb_cuda_die("fp8_cast: %d rows is more than one launch covers", rows);
    const dim3 block(FP8_TILE, FP8_ROWS);
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        fp8_cast_kernel<T><<<grid, block, 0, cuda_stream(ctx)>>>(out, out_t, ld_t, (const T *)in, R, Cc, scale, inv,
                                                                 amax, fmt);
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
    fp8_scale_update_kernel<<<(unsigned)((n + 127) / 128), 128, 0, cuda_stream(ctx)>>>(scale, history, n, stride,
                                                                                      len, fmt, algo, margin);
    CUDA_LAUNCH_CHECK();
}
