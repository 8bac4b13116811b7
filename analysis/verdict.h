/* verdict.h: the one rule behind every "faster / slower / regression"
 * vitbench prints (compare, the report's flags, buckets and layouts).
 *
 * Two samples of one metric (e.g. per-trial throughput of a baseline and of a
 * variant): the ratio of medians new / base with a seeded percentile-bootstrap
 * 95% CI (the same inputs give the same interval on every machine) and the
 * two-sided Mann-Whitney U p-value. A side with fewer than
 * VB_VERDICT_MIN_SAMPLES values is inconclusive: with 5 against 5 the
 * smallest exact p is 0.008, below that the test separates nothing. Otherwise
 * better or worse needs both p < alpha and the whole CI beyond the threshold
 * (above 1 + T or below 1 - T): significance alone flags 1% drifts of quiet
 * machines, an interval alone flags noise on few samples.
 */
#ifndef VB_ANALYSIS_VERDICT_H
#define VB_ANALYSIS_VERDICT_H

#include <stdbool.h>

#include "core/util/stats.h"

#define VB_VERDICT_MIN_SAMPLES 5
#define VB_VERDICT_ALPHA 0.05
#define VB_VERDICT_THRESHOLD 0.05
#define VB_VERDICT_BOOT_ITERS 2000
#define VB_VERDICT_BOOT_SEED 0x5eedc0deULL /* fixed: verdicts must not change between reruns */
/* max / min of one run's timed trials above this: the machine was most
 * likely busy for part of the run (quiet tiny runs on 2 cores stay within
 * 1.1-1.45); said wherever such samples enter a verdict */
#define VB_VERDICT_NOISY_SPREAD 1.5

typedef enum {
    VB_VERDICT_UNCHANGED,    /* not significant, or within the threshold */
    VB_VERDICT_BETTER,       /* higher throughput / lower time, beyond the threshold */
    VB_VERDICT_WORSE,
    VB_VERDICT_INCONCLUSIVE, /* fewer than VB_VERDICT_MIN_SAMPLES on a side */
    VB_VERDICT_NO_SAMPLES,   /* a side has none */
    VB_VERDICT_UNDEFINED,    /* the base median is 0: no ratio */
} vb_verdict_kind;

typedef struct vb_verdict {
    double ratio;  /* median(new) / median(base); NaN without one */
    vb_ci ci;      /* NaN bounds without one */
    double p;      /* NaN with fewer than one value a side */
    int nbase, nnew;
    vb_verdict_kind kind;
} vb_verdict;

/* new_ against base; higher_is_better for throughputs, false for times. */
vb_verdict vb_verdict_of(const double *base, int nbase, const double *new_, int nnew, bool higher_is_better,
                         double alpha, double threshold);

/* The rule in one sentence, for documents that show verdicts. */
const char *vb_verdict_rule(void);

#endif
