/* fma_peak.h: the machine's float32 FMA peak, measured, for a roofline.
 *
 * A training step on the CPU is bound by fused multiply-adds, so the number a
 * step's GFLOP/s is best judged against is the rate at which these cores
 * retire FMAs at all, measured here rather than read from a datasheet (a VM's
 * clock, turbo under load and the FMA units per core differ between machines
 * of one name). Every OpenMP thread runs independent chains of vector FMAs,
 * of the widest vector this build targets, with no loads or stores: the
 * ceiling no kernel on these cores can pass.
 */
#ifndef VB_FMA_PEAK_H
#define VB_FMA_PEAK_H

typedef struct vb_fma_peak {
    double gflops;      /* all threads together, at the fastest round (2 FLOP per FMA lane) */
    double mean_gflops; /* over all rounds: far below gflops means the cores were shared */
    int threads;        /* OpenMP threads that ran */
    int lanes;          /* float lanes per vector instruction */
    const char *isa;    /* "AVX-512", "AVX2+FMA", "AVX" or "SSE": what the build targets */
} vb_fma_peak;

/* Rounds of about a millisecond on all omp_get_max_threads() threads until
 * `seconds` have passed (at least 3 rounds); each round starts and ends with
 * every thread together. */
vb_fma_peak vb_fma_peak_measure(double seconds);

#endif
