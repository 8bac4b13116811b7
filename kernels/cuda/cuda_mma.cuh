/* cuda_mma.cuh: the warp-level primitives that the tensor-core attention
 * kernels (cuda_attention_tc.cuh) are written against, on the device.
 *
 * kernels/cuda/emu/warp_emu.hpp defines the same names on the host, where a
 * lockstep emulator runs those kernels on the CPU for the tests; keep the two
 * in step. Fragment layouts are the PTX ISA's (g = lane / 4, t = lane % 4):
 *
 *   m16n8k16, bf16/f16 operands (two per 32-bit register, lower column first):
 *     a0 = A[g][2t, 2t+1]   a1 = A[g+8][2t, 2t+1]
 *     a2 = A[g][2t+8, +9]   a3 = A[g+8][2t+8, +9]
 *     b0 = B[2t, 2t+1][g]   b1 = B[2t+8, 2t+9][g]
 *   m16n8k8, tf32 operands (one per register):
 *     a0 = A[g][t]  a1 = A[g+8][t]  a2 = A[g][t+4]  a3 = A[g+8][t+4]
 *     b0 = B[t][g]  b1 = B[t+4][g]
 *   accumulators of both (float32):
 *     c0 = C[g][2t]  c1 = C[g][2t+1]  c2 = C[g+8][2t]  c3 = C[g+8][2t+1]
 */
#ifndef VB_CUDA_MMA_CUH
#define VB_CUDA_MMA_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define TC_DEV __device__ __forceinline__

typedef __nv_bfloat16 tc_bf16;
typedef __half tc_f16;

// D = A B + D
TC_DEV void mma_m16n8k16_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
TC_DEV void mma_m16n8k16_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
TC_DEV void mma_m16n8k8_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 matrices of 16-bit elements, transposed: lanes 8i..8i+7 give the
// shared-memory addresses of matrix i's rows 0..7; lane l gets in r[i] the
// elements [2(l%4)][l/4] and [2(l%4)+1][l/4] of matrix i.
TC_DEV void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t *row) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// Four 8x8 matrices of 16-bit elements: lanes 8i..8i+7 give the
// shared-memory addresses of matrix i's rows 0..7; lane l gets in r[i] the
// elements [l/4][2(l%4)] and [l/4][2(l%4)+1] of matrix i.
TC_DEV void ldmatrix_x4(uint32_t (&r)[4], const uint16_t *row) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// Asynchronous copies, global to shared (sm_80+): the calling thread's copies
// since its last commit form a group; cp_async_wait<N>() returns once at most
// N of its groups are still in flight, and a __syncthreads() after it makes
// the copied bytes visible to the block. Until then the destination holds
// nothing defined. valid == false writes zeros and reads nothing (src must
// still be a mapped address).
TC_DEV void cp_async_16(void *dst, const void *src, bool valid) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}
TC_DEV void cp_async_4(void *dst, const void *src, bool valid) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(addr), "l"(src),
                 "r"(valid ? 4 : 0)
                 : "memory");
}
TC_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> TC_DEV void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// x rounded to tf32 (10 mantissa bits, nearest, ties away from zero), as the
// 32-bit pattern of a float whose low 13 bits are zero
TC_DEV uint32_t cvt_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

// two floats rounded to the 16-bit type as one register (lo in the low half)
TC_DEV uint32_t pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}
TC_DEV uint32_t pack_f16x2(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}
TC_DEV tc_bf16 round_bf16(float x) { return __float2bfloat16_rn(x); }
TC_DEV tc_f16 round_f16(float x) { return __float2half_rn(x); }

TC_DEV float warp_xor(float x, int m) { return __shfl_xor_sync(0xffffffffu, x, m); }

#endif
