/* test_attention_tc_emu: the tensor-core flash-attention kernels
 * (cuda_attention_tc.cuh) run on the CPU by the warp emulator (warp_emu.hpp),
 * forward and backward, for bfloat16, float16 and float32 with TF32 math,
 * against attention computed in double from the same inputs.
 *
 * The kernels' source is the one nvcc compiles for the GPU; only the
 * primitives under it (mma, ldmatrix, shuffles, conversions, barriers) are
 * the emulator's. Outputs are NaN-poisoned before each launch, so an element
 * a kernel fails to write fails the test. Error measures as test_cuda_ops:
 * max |g - r| / max |r| per tensor (sums with cancellation), lse against
 * max(|r|, 1).
 *
 * Tolerances are the operand type's rounding: inputs and P/dS are rounded to
 * 8 (bf16) or 11 (f16, tf32) significant bits, products accumulate in float.
 * tf32 also rounds q, k, v and dO themselves (the 16-bit cases' inputs are
 * exact in their type), so its scores carry |ds| <= 2^-10 sum_d |q_d k_d| /
 * sqrt(HD) at worst; lse gets that, averaged over the keys' weights.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels/cuda/emu/warp_emu.hpp"
#include "kernels/cuda/cuda_attention_tc.cuh"

namespace {

// ---------------------------------------------------------------------------
// storage of an activation type: the kernel's bits and the values they mean

template <class OP> struct act_io;
template <> struct act_io<tc::ops16<tc_bf16>> {
    static uint16_t in(float x) { return vb_f32_to_bf16(x); }
    static float value(uint16_t b) { return vb_bf16_to_f32(b); }
    static float out_value(tc_bf16 x) { return vb_bf16_to_f32(x.bits); }
    static tc_bf16 poison() { return tc_bf16{0x7fc0}; }
    static const char *name() { return "bf16"; }
};
template <> struct act_io<tc::ops16<tc_f16>> {
    static uint16_t in(float x) { return vb_f32_to_f16(x); }
    static float value(uint16_t b) { return vb_f16_to_f32(b); }
    static float out_value(tc_f16 x) { return vb_f16_to_f32(x.bits); }
    static tc_f16 poison() { return tc_f16{0x7e00}; }
    static const char *name() { return "f16"; }
};
template <> struct act_io<tc::ops_tf32> {
    static float in(float x) { return x; }
    static float value(float x) { return x; }
    static float out_value(float x) { return x; }
    static float poison() { return NAN; }
    static const char *name() { return "tf32"; }
};

struct tolerances {
    double out, lse, grad;
};
template <class OP> tolerances tol();
template <> tolerances tol<tc::ops16<tc_bf16>>() { return {3e-2, 1e-4, 6e-2}; }
template <> tolerances tol<tc::ops16<tc_f16>>() { return {5e-3, 1e-4, 1e-2}; }
template <> tolerances tol<tc::ops_tf32>() { return {5e-3, 2e-3, 1e-2}; }

uint64_t rng_state;
float urand(float lo, float hi) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((rng_state >> 40) * (1.0 / 16777216.0));
}

double err_norm(const std::vector<double> &g, const std::vector<double> &r) {
    double num = 0, den = 0;
    for (size_t i = 0; i < g.size(); i++) {
        if (!isfinite(g[i])) return INFINITY;
        num = fmax(num, fabs(g[i] - r[i]));
        den = fmax(den, fabs(r[i]));
    }
    return den > 0 ? num / den : num;
}

// attention in double: out, lse, and the gradients for dout
struct reference {
    std::vector<double> out, lse, dq, dk, dv;
};
reference attend(const std::vector<double> &q, const std::vector<double> &k,
                 const std::vector<double> &v, const std::vector<double> &dout, int B, int Tq,
                 int Tk, int NH, int HD) {
    const int D = NH * HD;
    const double scale = 1.0 / sqrt((double)HD);
    reference r;
    r.out.assign((size_t)B * Tq * D, 0);
    r.lse.assign((size_t)B * NH * Tq, 0);
    r.dq.assign((size_t)B * Tq * D, 0);
    r.dk.assign((size_t)B * Tk * D, 0);
    r.dv.assign((size_t)B * Tk * D, 0);
    std::vector<double> p(Tk), dp(Tk);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < Tq; i++) {
                const double *qi = &q[((size_t)b * Tq + i) * D + h * HD];
                double mx = -INFINITY;
                for (int j = 0; j < Tk; j++) {
                    const double *kj = &k[((size_t)b * Tk + j) * D + h * HD];
                    double s = 0;
                    for (int c = 0; c < HD; c++) s += qi[c] * kj[c];
                    p[j] = s * scale;
                    mx = fmax(mx, p[j]);
                }
                double sum = 0;
                for (int j = 0; j < Tk; j++) sum += (p[j] = exp(p[j] - mx));
                for (int j = 0; j < Tk; j++) p[j] /= sum;
                r.lse[((size_t)b * NH + h) * Tq + i] = mx + log(sum);
                double *oi = &r.out[((size_t)b * Tq + i) * D + h * HD];
                const double *doi = &dout[((size_t)b * Tq + i) * D + h * HD];
                double Di = 0;
                for (int j = 0; j < Tk; j++) {
                    const double *vj = &v[((size_t)b * Tk + j) * D + h * HD];
                    double d = 0;
                    for (int c = 0; c < HD; c++) oi[c] += p[j] * vj[c], d += doi[c] * vj[c];
                    dp[j] = d;
                    Di += p[j] * d;
                }
                for (int j = 0; j < Tk; j++) {
                    const double ds = p[j] * (dp[j] - Di);
                    const size_t kr = ((size_t)b * Tk + j) * D + h * HD;
                    for (int c = 0; c < HD; c++) {
                        r.dq[((size_t)b * Tq + i) * D + h * HD + c] += ds * k[kr + c] * scale;
                        r.dk[kr + c] += ds * qi[c] * scale;
                        r.dv[kr + c] += p[j] * doi[c];
                    }
                }
            }
    return r;
}

// far: every score far below zero (q in [5, 6], k in [-6, -5]), so that
// exp(-lse) overflows float: keys past Tk must be masked, not just zero
template <class OP>
int run_case(int B, int Tq, int Tk, int NH, int HD, uint64_t seed, bool far = false) {
    typedef typename OP::in_t In;
    typedef typename OP::out_t Out;
    typedef act_io<OP> io;
    const int D = NH * HD;
    const size_t nq = (size_t)B * Tq * D, nk = (size_t)B * Tk * D, nl = (size_t)B * NH * Tq;
    rng_state = seed;
    std::vector<In> q(nq), k(nk), v(nk), dout(nq);
    std::vector<double> qd(nq), kd(nk), vd(nk), dod(nq);
    const float qlo = far ? 5 : -2, qhi = far ? 6 : 2, klo = far ? -6 : -2, khi = far ? -5 : 2;
    for (size_t i = 0; i < nq; i++) q[i] = io::in(urand(qlo, qhi)), qd[i] = io::value(q[i]);
    for (size_t i = 0; i < nk; i++) k[i] = io::in(urand(klo, khi)), kd[i] = io::value(k[i]);
    for (size_t i = 0; i < nk; i++) v[i] = io::in(urand(-1, 1)), vd[i] = io::value(v[i]);
    for (size_t i = 0; i < nq; i++) dout[i] = io::in(urand(-1, 1)), dod[i] = io::value(dout[i]);

    std::vector<Out> out(nq, io::poison()), dq(nq, io::poison()), dk(nk, io::poison()),
        dv(nk, io::poison());
    std::vector<float> lse(nl, NAN), Dd(nl);

    const float scale = 1.0f / sqrtf((float)HD), scale_log2 = tc::LOG2E * scale;
    const bool vec = tc::vec_ok<OP>(HD, q.data(), k.data(), v.data(), dout.data());
    tc::dispatch(HD, vec, [&](auto hdp, auto vc) {
        constexpr int HDP = decltype(hdp)::value;
        constexpr bool VEC = decltype(vc)::value;
        const unsigned bh = (unsigned)(B * NH);
        const unsigned qt = (unsigned)((Tq + tc::ROWS - 1) / tc::ROWS);
        const unsigned qtf = (unsigned)((Tq + tc::FWD_ROWS - 1) / tc::FWD_ROWS);
        const unsigned kt = (unsigned)((Tk + tc::COLS - 1) / tc::COLS);
        emu::launch(emu_dim3{qtf, bh, 1}, tc::FWD_THREADS, [&] {
            tc::forward_kernel<OP, HDP, VEC>(out.data(), lse.data(), q.data(), k.data(), v.data(),
                                             Tq, Tk, NH, HD, scale_log2);
        });
        // Dd = rowsum(dO * O) over the stored output, as cuda_attention.cu's kernel
        for (int b = 0; b < B; b++)
            for (int i = 0; i < Tq; i++)
                for (int h = 0; h < NH; h++) {
                    float s = 0;
                    for (int c = 0; c < HD; c++) {
                        const size_t x = ((size_t)b * Tq + i) * D + h * HD + c;
                        s += (float)dod[x] * io::out_value(out[x]);
                    }
                    Dd[((size_t)b * NH + h) * Tq + i] = s;
                }
        emu::launch(emu_dim3{kt, bh, 1}, tc::THREADS, [&] {
            tc::dkdv_kernel<OP, HDP, VEC>(dk.data(), dv.data(), q.data(), k.data(), v.data(),
                                          dout.data(), lse.data(), Dd.data(), Tq, Tk, NH, HD,
                                          scale, scale_log2);
        });
        emu::launch(emu_dim3{qt, bh, 1}, tc::THREADS, [&] {
            tc::dq_kernel<OP, HDP, VEC>(dq.data(), q.data(), k.data(), v.data(), dout.data(),
                                        lse.data(), Dd.data(), Tq, Tk, NH, HD, scale, scale_log2);
        });
    });

    const reference r = attend(qd, kd, vd, dod, B, Tq, Tk, NH, HD);
    auto values = [&](const std::vector<Out> &x) {
        std::vector<double> d(x.size());
        for (size_t i = 0; i < x.size(); i++) d[i] = io::out_value(x[i]);
        return d;
    };
    double e_lse = 0;
    for (size_t i = 0; i < nl; i++)
        e_lse = isfinite(lse[i]) ? fmax(e_lse, fabs(lse[i] - r.lse[i]) / fmax(fabs(r.lse[i]), 1.0))
                                 : INFINITY;
    const double e[5] = {err_norm(values(out), r.out), e_lse, err_norm(values(dq), r.dq),
                         err_norm(values(dk), r.dk), err_norm(values(dv), r.dv)};
    const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
    const tolerances t = tol<OP>();
    const double limit[5] = {t.out, t.lse, t.grad, t.grad, t.grad};
    int bad = 0;
    for (int i = 0; i < 5; i++) {
        const bool ok = e[i] <= limit[i];
        bad += !ok;
        printf("%s  %-4s B=%d Tq=%d Tk=%d NH=%d HD=%d %s%s  %-3s err %.3g (tol %.3g)\n",
               ok ? "ok  " : "FAIL", io::name(), B, Tq, Tk, NH, HD, vec ? "vec " : "scalar",
               far ? " far" : "", names[i], e[i], limit[i]);
    }
    return bad;
}

template <class OP> int run_all(uint64_t seed) {
    int bad = 0;
    bad += run_case<OP>(1, 70, 130, 2, 48, seed + 1); // base's head dim; partial tiles, 3 key tiles
    bad += run_case<OP>(2, 37, 71, 3, 20, seed + 2);  // head dim past a 16-multiple
    bad += run_case<OP>(1, 33, 40, 1, 18, seed + 3);  // no 16-byte loads at all
    bad += run_case<OP>(1, 65, 63, 1, 64, seed + 4);  // widest head
    bad += run_case<OP>(1, 130, 20, 1, 16, seed + 5); // 3 query tiles, one short key tile
    bad += run_case<OP>(1, 1, 1, 1, 1, seed + 6);
    bad += run_case<OP>(1, 128, 192, 2, 48, seed + 7); // whole tiles only: no masking
    bad += run_case<OP>(1, 20, 300, 1, 48, seed + 8);  // 5 key tiles through the two buffers
    bad += run_case<OP>(1, 70, 20, 1, 16, seed + 9, true); // exp(-lse) overflows
    return bad;
}

// Kernels the emulator must refuse (run by their own ctest entries, which
// expect exit 1 and the emulator's line): lanes of one warp at different
// collectives, a barrier that half the block skips, and a thread that ends
// with cp.async copies it never waited for.
void divergent_collective() {
    emu::launch(emu_dim3{1, 1, 1}, 64, [] {
        float x = (float)threadIdx.x;
        if (threadIdx.x % 32 < 16) x = warp_xor(x, 1);
        else {
            uint32_t a[4] = {0, 0, 0, 0};
            float c[4] = {0, 0, 0, 0};
            mma_m16n8k8_tf32(c, a, 0, 0);
        }
        (void)x;
    });
}
void skipped_barrier() {
    emu::launch(emu_dim3{1, 1, 1}, 64, [] {
        if (threadIdx.x < 32) __syncthreads();
    });
}

void unwaited_copy() {
    emu::launch(emu_dim3{1, 1, 1}, 32, [] {
        __shared__ __align__(16) float dst[32 * 4];
        static const float src[32 * 4] = {0};
        cp_async_16(&dst[threadIdx.x * 4], &src[threadIdx.x * 4], true);
        cp_async_commit();
    });
}

// The emulator's cp.async model, which the kernels' tests rely on to catch a
// missing wait or barrier: the destination reads as NaN from the issue until
// the wait; wait<1> leaves the newest group in flight; an invalid copy
// writes zeros.
int cp_async_model() {
    int bad = 0;
    emu::launch(emu_dim3{1, 1, 1}, 32, [&] {
        __shared__ __align__(16) float a[32], b[32];
        static float src[32];
        src[threadIdx.x] = 1.0f + (float)threadIdx.x;
        a[threadIdx.x] = b[threadIdx.x] = 7.0f;
        cp_async_4(&a[threadIdx.x], &src[threadIdx.x], true);
        cp_async_commit();
        cp_async_4(&b[threadIdx.x], &src[threadIdx.x], threadIdx.x % 2 == 0);
        cp_async_commit();
        if (!isnan(a[threadIdx.x]) || !isnan(b[threadIdx.x])) bad++;
        cp_async_wait<1>();
        if (a[threadIdx.x] != 1.0f + (float)threadIdx.x || !isnan(b[threadIdx.x])) bad++;
        cp_async_wait<0>();
        if (b[threadIdx.x] != (threadIdx.x % 2 == 0 ? 1.0f + (float)threadIdx.x : 0.0f)) bad++;
    });
    printf("%s  cp.async model: NaN until waited, groups in order, invalid copies zero\n",
           bad ? "FAIL" : "ok  ");
    return bad ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--divergent-collective") == 0) divergent_collective();
    if (argc == 2 && strcmp(argv[1], "--skipped-barrier") == 0) skipped_barrier();
    if (argc == 2 && strcmp(argv[1], "--unwaited-copy") == 0) unwaited_copy();
    if (argc > 1) {
        printf("test_attention_tc_emu: the emulator ran a kernel it must refuse (%s)\n", argv[1]);
        return 0; // the ctest entry expects the emulator's failure line
    }
    int bad = cp_async_model();
    bad += run_all<tc::ops_tf32>(100);
    bad += run_all<tc::ops16<tc_bf16>>(200);
    bad += run_all<tc::ops16<tc_f16>>(300);
    if (bad) {
        printf("test_attention_tc_emu: %d checks out of tolerance\n", bad);
        return 1;
    }
    printf("test_attention_tc_emu: all checks within tolerance\n");
    return 0;
}
