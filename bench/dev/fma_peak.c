/* fma_peak.c: the float32 FMA peak of this build on these cores (fma_peak.h). */
#include "bench/dev/fma_peak.h"

#include <omp.h>

#include "core/util/common.h"

#if defined(__AVX512F__)
#define PEAK_LANES 16
#define PEAK_ISA "AVX-512"
#elif defined(__AVX__) && defined(__FMA__)
#define PEAK_LANES 8
#define PEAK_ISA "AVX2+FMA"
#elif defined(__AVX__)
#define PEAK_LANES 8
#define PEAK_ISA "AVX"
#else
#define PEAK_LANES 4
#define PEAK_ISA "SSE"
#endif

typedef float peak_vec __attribute__((vector_size(PEAK_LANES * sizeof(float))));

/* Twelve independent accumulators: enough to cover FMA latency times the FMA
 * units on every x86 core in use (4-5 cycles x 2 units), and few enough to
 * stay in the 16 registers of AVX2. Named variables, not an array, so that
 * they live in registers at any optimisation level that allocates them. */
enum { PEAK_CHAINS = 12, PEAK_INNER = 4096 };

/* `iters` x 12 vector FMAs; returns a value the caller publishes so the loop
 * is not removed. a * b + c contracts to one FMA under -ffp-contract=fast
 * (the Release build's flag); without FMA it is a multiply and an add, and
 * the figure is then that build's peak. */
static float fma_chains(long iters, float seed) {
    const peak_vec b = (peak_vec){0} + 0.999999f, c = (peak_vec){0} + 1e-7f;
    peak_vec a0 = (peak_vec){0} + seed, a1 = a0 + 1e-3f, a2 = a0 + 2e-3f, a3 = a0 + 3e-3f;
    peak_vec a4 = a0 + 4e-3f, a5 = a0 + 5e-3f, a6 = a0 + 6e-3f, a7 = a0 + 7e-3f;
    peak_vec a8 = a0 + 8e-3f, a9 = a0 + 9e-3f, a10 = a0 + 1e-2f, a11 = a0 + 1.1e-2f;
    for (long i = 0; i < iters; i++) {
        a0 = a0 * b + c, a1 = a1 * b + c, a2 = a2 * b + c, a3 = a3 * b + c;
        a4 = a4 * b + c, a5 = a5 * b + c, a6 = a6 * b + c, a7 = a7 * b + c;
        a8 = a8 * b + c, a9 = a9 * b + c, a10 = a10 * b + c, a11 = a11 * b + c;
    }
    peak_vec s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) + ((a8 + a9) + (a10 + a11));
    float r = 0;
    for (int l = 0; l < PEAK_LANES; l++) r += s[l];
    return r;
}

static volatile float peak_sink;

vb_fma_peak vb_fma_peak_measure(double seconds) {
    const int nt = omp_get_max_threads();
    const double flop_per_iter = 2.0 * PEAK_CHAINS * PEAK_LANES;
    /* one untimed round wakes the threads and lifts the clock */
    double best = 0, total_flop = 0, total_s = 0;
    long iters = PEAK_INNER;
    int rounds = 0;
    double start = vb_now();
    for (;;) {
        double t0 = 0, t1 = 0;
        float acc = 0;
        #pragma omp parallel reduction(+ : acc)
        {
            #pragma omp barrier
            #pragma omp master
            t0 = vb_now();
            acc += fma_chains(iters, 1.0f + 1e-3f * (float)omp_get_thread_num());
            #pragma omp barrier
            #pragma omp master
            t1 = vb_now();
        }
        peak_sink = acc;
        double dt = t1 - t0, flop = flop_per_iter * (double)iters * nt;
        if (rounds > 0) { /* round 0 is the warm-up */
            if (flop / dt > best) best = flop / dt;
            total_flop += flop;
            total_s += dt;
        }
        rounds++;
        /* rounds of about a millisecond: short enough that one preemption
         * spoils one round, long enough that the barriers cost nothing */
        if (dt < 5e-4 && iters < (1L << 30)) iters *= 2;
        if (rounds > 3 && vb_now() - start >= seconds) break;
    }
    vb_fma_peak p = {.gflops = best * 1e-9, .mean_gflops = total_flop / total_s * 1e-9, .threads = nt,
                     .lanes = PEAK_LANES, .isa = PEAK_ISA};
    return p;
}
