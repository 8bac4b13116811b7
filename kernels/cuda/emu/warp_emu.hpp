/* warp_emu.hpp: runs CUDA kernels written against cuda_mma.cuh's primitives
 * on the CPU, one block at a time, every thread of the block a coroutine
 * (ucontext) on the calling thread.
 *
 * What it is for: the tensor-core kernels' indexing (fragment layouts, the
 * re-packing of accumulators as operands, masking, tiling) checked by tests
 * on machines without a GPU. What it does not model: timing, bank conflicts,
 * register or shared-memory limits, memory ordering beyond __syncthreads.
 *
 * Semantics:
 *  - __syncthreads() waits for every thread of the block; a warp collective
 *    (warp_xor, the mma and ldmatrix primitives) waits for the 32 lanes of
 *    its warp, and its last arrival computes every lane's result, as the
 *    hardware does for a converged warp. All lanes must reach the same
 *    collective: lanes that arrive at different ones, or threads that can
 *    never meet (a collective under a divergent branch, a barrier some
 *    threads skip), stop the run with one line on stderr.
 *  - __shared__ is `static`: one copy per kernel instantiation, shared by
 *    the threads of the running block (blocks run one after another).
 *  - mma: products of the rounded operands accumulate in double and are
 *    added to C once, rounded to float (the hardware's order of additions
 *    differs within float32 rounding).
 *  - Conversions round to nearest even (bf16, f16) and to nearest with ties
 *    away from zero (tf32, cvt.rna), as the device does.
 *  - cp.async: a copy fills its destination with NaN bits (0xff bytes) when
 *    issued and writes the source's bytes when a cp_async_wait<N> of its
 *    thread lets it complete; so a read before the wait and the barrier
 *    after it, or an issue into a buffer that other threads still read,
 *    shows up as NaN in the results. A thread that ends with copies never
 *    waited for stops the run.
 */
#ifndef VB_WARP_EMU_HPP
#define VB_WARP_EMU_HPP

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

#include "kernels/half.h"

// ---------------------------------------------------------------------------
// the CUDA C++ spellings the kernels use

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define TC_DEV inline

struct emu_dim3 {
    unsigned x, y, z;
};
inline emu_dim3 threadIdx, blockIdx;

struct uint4 {
    unsigned x, y, z, w;
};
struct float4 {
    float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

struct tc_bf16 {
    uint16_t bits;
};
struct tc_f16 {
    uint16_t bits;
};

// ---------------------------------------------------------------------------
// conversions (bf16 and f16: kernels/half.h)

inline uint32_t emu_f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
inline float emu_u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}
inline uint32_t emu_tf32_bits(float x) {
    const uint32_t u = emu_f2u(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return u; // inf, NaN
    return (u + 0x1000u) & 0xffffe000u;             // nearest, ties away from zero
}

TC_DEV uint32_t cvt_tf32(float x) { return emu_tf32_bits(x); }
TC_DEV uint32_t pack_bf16x2(float lo, float hi) {
    return (uint32_t)vb_f32_to_bf16(lo) | (uint32_t)vb_f32_to_bf16(hi) << 16;
}
TC_DEV uint32_t pack_f16x2(float lo, float hi) {
    return (uint32_t)vb_f32_to_f16(lo) | (uint32_t)vb_f32_to_f16(hi) << 16;
}
TC_DEV tc_bf16 round_bf16(float x) { return tc_bf16{vb_f32_to_bf16(x)}; }
TC_DEV tc_f16 round_f16(float x) { return tc_f16{vb_f32_to_f16(x)}; }

// ---------------------------------------------------------------------------
// the scheduler

namespace emu {

enum { MAX_THREADS = 1024, WARP = 32, STACK_BYTES = 256 << 10 };

enum op_kind {
    OP_NONE,
    OP_SHFL_XOR,
    OP_MMA_BF16,
    OP_MMA_F16,
    OP_MMA_TF32,
    OP_LDMATRIX,
    OP_LDMATRIX_T
};

// a cp.async copy issued and not yet complete: group = the thread's commits
// before it was issued
struct copy_pending {
    void *dst;
    const void *src;
    int bytes;
    bool valid;
    unsigned group;
};

struct slot {
    int op;
    uint32_t in[10]; // a0..a3, b0, b1, c0..c3 / shuffle value and mask
    float c[4];
    const uint16_t *row;
    uint32_t out[4];
};

struct warp_state {
    slot lanes[WARP];
    int arrived;
    unsigned gen;
};

struct block_state {
    int nthreads;
    ucontext_t sched;
    std::vector<ucontext_t> ctx;
    std::vector<std::vector<char>> stacks;
    std::vector<char> done;
    int cur, ndone;
    unsigned long events; // arrivals and completions: progress
    int bar_arrived;
    unsigned bar_gen;
    warp_state warps[MAX_THREADS / WARP];
    std::vector<std::vector<copy_pending>> copies; // per thread
    std::vector<unsigned> commits;                 // per thread
    const std::function<void()> *body;
};

inline block_state *B;

[[noreturn]] inline void fail(const char *what) {
    fprintf(stderr, "warp emulator: %s (block %u,%u thread %d)\n", what, blockIdx.x, blockIdx.y,
            B ? B->cur : -1);
    exit(1);
}

inline void yield() {
    const int me = B->cur;
    if (swapcontext(&B->ctx[me], &B->sched) != 0) fail("swapcontext failed");
}

inline void entry() {
    (*B->body)();
    if (!B->copies[B->cur].empty()) fail("thread ended with cp.async copies never waited for");
    B->done[B->cur] = 1;
    B->ndone++;
    B->events++;
    // returning resumes uc_link, the scheduler
}

// the fragment of lane l of a 16-bit pair register: element e (0 low, 1 high)
inline float half16(int op, uint32_t r, int e) {
    const uint16_t bits = (uint16_t)(e ? r >> 16 : r & 0xffffu);
    return op == OP_MMA_BF16 ? vb_bf16_to_f32(bits) : vb_f16_to_f32(bits);
}

// every lane's result of the warp's collective, from every lane's inputs
inline void complete(warp_state &w) {
    const int op = w.lanes[0].op;
    for (int l = 1; l < WARP; l++)
        if (w.lanes[l].op != op) fail("lanes of one warp reached different collectives");
    if (op == OP_SHFL_XOR) {
        uint32_t v[WARP];
        for (int l = 0; l < WARP; l++) v[l] = w.lanes[l].in[0];
        for (int l = 0; l < WARP; l++) w.lanes[l].out[0] = v[l ^ (int)w.lanes[l].in[1]];
        return;
    }
    if (op == OP_LDMATRIX) {
        // matrix i's row r is at lane 8i + r's address; lane l gets of matrix
        // i the elements [l/4][2(l%4)] and [l/4][2(l%4)+1]
        for (int l = 0; l < WARP; l++)
            for (int i = 0; i < 4; i++) {
                const uint16_t *row = w.lanes[8 * i + l / 4].row;
                w.lanes[l].out[i] = (uint32_t)row[2 * (l % 4)] | (uint32_t)row[2 * (l % 4) + 1] << 16;
            }
        return;
    }
    if (op == OP_LDMATRIX_T) {
        // matrix i's row r is at lane 8i + r's address; lane l gets of matrix
        // i the elements [2(l%4)][l/4] and [2(l%4)+1][l/4]
        for (int l = 0; l < WARP; l++)
            for (int i = 0; i < 4; i++) {
                const uint16_t lo = w.lanes[8 * i + 2 * (l % 4)].row[l / 4];
                const uint16_t hi = w.lanes[8 * i + 2 * (l % 4) + 1].row[l / 4];
                w.lanes[l].out[i] = (uint32_t)lo | (uint32_t)hi << 16;
            }
        return;
    }
    // mma: gather A (16 x K), B (K x 8) from the fragments, then scatter D
    const int K = op == OP_MMA_TF32 ? 8 : 16;
    double A[16][16], Bm[16][8];
    for (int l = 0; l < WARP; l++) {
        const int g = l / 4, t = l % 4;
        const uint32_t *a = w.lanes[l].in, *b = w.lanes[l].in + 4;
        if (op == OP_MMA_TF32) {
            // the hardware reads tf32 operands' upper 19 bits
            A[g][t] = emu_u2f(a[0] & 0xffffe000u);
            A[g + 8][t] = emu_u2f(a[1] & 0xffffe000u);
            A[g][t + 4] = emu_u2f(a[2] & 0xffffe000u);
            A[g + 8][t + 4] = emu_u2f(a[3] & 0xffffe000u);
            Bm[t][g] = emu_u2f(b[0] & 0xffffe000u);
            Bm[t + 4][g] = emu_u2f(b[1] & 0xffffe000u);
        } else {
            for (int e = 0; e < 2; e++) {
                A[g][2 * t + e] = half16(op, a[0], e);
                A[g + 8][2 * t + e] = half16(op, a[1], e);
                A[g][2 * t + 8 + e] = half16(op, a[2], e);
                A[g + 8][2 * t + 8 + e] = half16(op, a[3], e);
                Bm[2 * t + e][g] = half16(op, b[0], e);
                Bm[2 * t + 8 + e][g] = half16(op, b[1], e);
            }
        }
    }
    for (int l = 0; l < WARP; l++) {
        const int g = l / 4, t = l % 4;
        for (int e = 0; e < 4; e++) {
            const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
            double acc = 0.0;
            for (int kk = 0; kk < K; kk++) acc += A[row][kk] * Bm[kk][col];
            w.lanes[l].out[e] = emu_f2u((float)((double)w.lanes[l].c[e] + acc));
        }
    }
}

// the calling lane's slot, filled by the caller, then the wait for its warp
inline slot &my_slot() { return B->warps[B->cur / WARP].lanes[B->cur % WARP]; }

inline void warp_collective() {
    warp_state &w = B->warps[B->cur / WARP];
    const unsigned gen = w.gen;
    B->events++;
    if (++w.arrived == WARP) {
        complete(w);
        w.arrived = 0;
        w.gen++;
        return;
    }
    while (w.gen == gen) yield();
}

// thread i at the start of body (out of line: getcontext returns twice)
__attribute__((noinline)) inline void make_thread(block_state *bs, int i) {
    if (getcontext(&bs->ctx[i]) != 0) fail("getcontext failed");
    bs->ctx[i].uc_stack.ss_sp = bs->stacks[i].data();
    bs->ctx[i].uc_stack.ss_size = STACK_BYTES;
    bs->ctx[i].uc_link = &bs->sched;
    makecontext(&bs->ctx[i], entry, 0);
}

// runs thread i until it waits or ends (out of line: swapcontext returns twice)
__attribute__((noinline)) inline void resume(block_state *bs, int i) {
    bs->cur = i;
    threadIdx = emu_dim3{(unsigned)i, 0, 0};
    if (swapcontext(&bs->sched, &bs->ctx[i]) != 0) fail("swapcontext failed");
}

// Runs body for every thread of every block of grid x threads.
inline void launch(emu_dim3 grid, int threads, const std::function<void()> &body) {
    if (threads < 1 || threads > MAX_THREADS || threads % WARP != 0)
        fail("block size must be a multiple of 32 up to 1024");
    block_state *bs = new block_state();
    B = bs;
    bs->nthreads = threads;
    bs->ctx.resize(threads);
    bs->stacks.assign(threads, std::vector<char>(STACK_BYTES));
    bs->body = &body;
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            blockIdx = emu_dim3{bx, by, 0};
            bs->done.assign(threads, 0);
            bs->copies.assign(threads, {});
            bs->commits.assign(threads, 0u);
            bs->ndone = 0;
            bs->bar_arrived = 0;
            for (int w = 0; w < threads / WARP; w++) bs->warps[w].arrived = 0;
            for (int i = 0; i < threads; i++) make_thread(bs, i);
            while (bs->ndone < threads) {
                const unsigned long before = bs->events;
                for (int i = 0; i < threads; i++) {
                    if (!bs->done[i]) resume(bs, i);
                }
                if (bs->events == before)
                    fail("threads wait at barriers or collectives that can never complete");
            }
        }
    B = nullptr;
    delete bs;
}

} // namespace emu

inline void __syncthreads() {
    emu::block_state *b = emu::B;
    const unsigned gen = b->bar_gen;
    b->events++;
    if (++b->bar_arrived == b->nthreads) {
        b->bar_arrived = 0;
        b->bar_gen++;
        return;
    }
    while (b->bar_gen == gen) emu::yield();
}

TC_DEV float warp_xor(float x, int m) {
    emu::slot &s = emu::my_slot();
    s.op = emu::OP_SHFL_XOR;
    s.in[0] = emu_f2u(x);
    s.in[1] = (uint32_t)m;
    emu::warp_collective();
    return emu_u2f(emu::my_slot().out[0]);
}

inline void emu_mma(int op, float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    emu::slot &s = emu::my_slot();
    s.op = op;
    for (int i = 0; i < 4; i++) s.in[i] = a[i], s.c[i] = c[i];
    s.in[4] = b0, s.in[5] = b1;
    emu::warp_collective();
    const emu::slot &r = emu::my_slot();
    for (int i = 0; i < 4; i++) c[i] = emu_u2f(r.out[i]);
}
TC_DEV void mma_m16n8k16_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    emu_mma(emu::OP_MMA_BF16, c, a, b0, b1);
}
TC_DEV void mma_m16n8k16_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    emu_mma(emu::OP_MMA_F16, c, a, b0, b1);
}
TC_DEV void mma_m16n8k8_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    emu_mma(emu::OP_MMA_TF32, c, a, b0, b1);
}
TC_DEV void ldmatrix_x4(uint32_t (&r)[4], const uint16_t *row) {
    if (((uintptr_t)row & 15u) != 0) emu::fail("ldmatrix row address not 16-byte aligned");
    emu::slot &s = emu::my_slot();
    s.op = emu::OP_LDMATRIX;
    s.row = row;
    emu::warp_collective();
    for (int i = 0; i < 4; i++) r[i] = emu::my_slot().out[i];
}
TC_DEV void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t *row) {
    if (((uintptr_t)row & 15u) != 0) emu::fail("ldmatrix row address not 16-byte aligned");
    emu::slot &s = emu::my_slot();
    s.op = emu::OP_LDMATRIX_T;
    s.row = row;
    emu::warp_collective();
    for (int i = 0; i < 4; i++) r[i] = emu::my_slot().out[i];
}


inline void emu_cp_async(void *dst, const void *src, int bytes, bool valid) {
    if (((uintptr_t)dst % (uintptr_t)bytes) != 0 || ((uintptr_t)src % (uintptr_t)bytes) != 0)
        emu::fail("cp.async address not aligned to its size");
    memset(dst, 0xff, (size_t)bytes);
    const int me = emu::B->cur;
    emu::B->copies[me].push_back(emu::copy_pending{dst, src, bytes, valid, emu::B->commits[me]});
}
TC_DEV void cp_async_16(void *dst, const void *src, bool valid) { emu_cp_async(dst, src, 16, valid); }
TC_DEV void cp_async_4(void *dst, const void *src, bool valid) { emu_cp_async(dst, src, 4, valid); }
TC_DEV void cp_async_commit() { emu::B->commits[emu::B->cur]++; }
// completes the copies of every group but the newest N committed (copies not
// yet committed stay in flight, as on the device)
template <int N> TC_DEV void cp_async_wait() {
    const int me = emu::B->cur;
    const unsigned done_below = emu::B->commits[me] >= (unsigned)N ? emu::B->commits[me] - N : 0u;
    std::vector<emu::copy_pending> &c = emu::B->copies[me];
    size_t kept = 0;
    for (size_t i = 0; i < c.size(); i++) {
        if (c[i].group < done_below) {
            if (c[i].valid) memcpy(c[i].dst, c[i].src, (size_t)c[i].bytes);
            else memset(c[i].dst, 0, (size_t)c[i].bytes);
        } else {
            c[kept++] = c[i];
        }
    }
    c.resize(kept);
}

#endif
