/* verdict.h: the one rule behind every verdict vitbench prints (compare and
 * its gate, the report's flags, buckets and layouts, sweep compare,
 * scripts/perf_ci.sh). Four outcomes:
 *
 *   faster / slower  the difference is significant (p < alpha) and the whole
 *                    interval lies beyond the threshold (above 1 + T or below
 *                    1 - T)
 *   equivalent       the whole interval lies inside 1 +- T, and at least one
 *                    side has two or more runs
 *   inconclusive     everything else, with the reason: too few samples, an
 *                    interval that reaches across a threshold, one run a side
 *                    (run-to-run spread unknown), a busy side whose noise
 *                    hides the effect
 *
 * The unit is the run, not the trial. The trials of one run share its state
 * (thread placement, clocks, memory layout, the neighbours' load), so their
 * spread estimates that run only; what differs between two runs is in the
 * spread of run centres. On the log scale (a ratio's interval can never
 * reach 0): each run's centre is the log of its median sample; a side with
 * two or more runs is the mean of its centres with their variance / runs
 * (t with runs - 1 df); a side with one run takes the run-to-run variance
 * of the other side when that has two or more runs (the same machine and
 * benchmark, so the same spread), and otherwise the machine's floor
 * (VB_VERDICT_RUN_FLOOR, or what the caller measured) added to the
 * uncertainty of its median from its trials. The difference of the two
 * sides gets a Welch-Satterthwaite t interval at level 1 - alpha, and its p
 * from the same t: the interval and the p never disagree. ratio = new /
 * base of exp(centre), i.e. the ratio of medians for one run a side, of
 * geometric means of run medians otherwise.
 *
 * Paired (vb_verdict_opts.paired, both sides with rounds): when A and B ran
 * interleaved in rounds in the same minutes (sweep --ab, perf_ci.sh --base),
 * the unit is the round: the difference of its two runs' centres, whose
 * mean gets a t interval over the rounds (rounds - 1 df), so drift and a
 * neighbour's load that fall on both runs of a round leave it; a busy
 * round's difference sd is taken as at least VB_VERDICT_LOAD_SD_PAIRED x
 * s / (1 - s); fewer than VB_VERDICT_MIN_PAIRS rounds decide nothing.
 *
 * The load each side ran under widens that interval (the interval printed is
 * the one the verdict used). First, a busy side's run-to-run sd is taken as
 * at least VB_VERDICT_LOAD_SD x s / (1 - s) for a load share s: a few runs
 * on a busy machine can agree by chance, and identical runs under load
 * spread that much, so equal load on both sides is never read as none. A side is busy when its trials spread more than
 * VB_VERDICT_NOISY_SPREAD (max / min within one run) or the load recorded
 * during its trials (load.csv: the share of the run's thread time spent
 * waiting for a CPU or stolen by the hypervisor) exceeds VB_VERDICT_BUSY_LOAD;
 * a share s explains a slowdown of 1 / (1 - s). With one run a side, nothing
 * says how the load varied between runs: a busy side widens the interval by
 * its whole noise (that slowdown, or its trials' spread). With two or more
 * runs on a side, the spread of the runs already holds the load's variation,
 * and what is left is a difference between the sides' loads (a baseline made
 * on another day): the interval widens by the relative difference of their
 * slowdowns, and by the spread of a single-run side's trials.
 */
#ifndef VB_ANALYSIS_VERDICT_H
#define VB_ANALYSIS_VERDICT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/util/stats.h"

/* samples (trials, or runs for one-per-run metrics) a side needs before any
 * verdict but inconclusive */
#define VB_VERDICT_MIN_SAMPLES 5
#define VB_VERDICT_ALPHA 0.05
#define VB_VERDICT_THRESHOLD 0.05
/* max / min of one run's timed trials above this: the machine was most
 * likely busy for part of the run (quiet tiny runs on 2 cores stay within
 * 1.1-1.45) */
#define VB_VERDICT_NOISY_SPREAD 1.5
/* share of a run's thread time lost to other work (waiting for a CPU, or
 * stolen) above which its trials ran on a busy machine */
#define VB_VERDICT_BUSY_LOAD 0.10
/* The run-to-run sd (log scale) of identical runs that lost a share s of
 * their thread time, per unit of s / (1 - s), the slowdown the load explains
 * beyond none: identical tiny runs under one busy loop per core on the
 * 2-core Xeon (s 0.49, 1 thread a rank under thread_policy adapt) spread by
 * an sd of 0.40 in log of their medians (bench/dev/verdict_bench.sh,
 * docs/analysis.md). */
#define VB_VERDICT_LOAD_SD 0.40
/* The same for the difference of a round's two runs, paired: what is left
 * of the load's spread when both runs of a round share its minutes (the
 * rounds of identical pairs under one busy loop per core, docs/analysis.md) */
#define VB_VERDICT_LOAD_SD_PAIRED 0.40
/* Paired: rounds a side needs before a paired verdict decides anything */
#define VB_VERDICT_MIN_PAIRS 5
/* The machine's run-to-run floor: the standard deviation of log(median
 * throughput of one run) between identical runs. On the shared 2-core
 * development machine, 20 pairs of identical quiet runs differed by up to
 * 14% in median: a run-to-run sd near 4-5%. bench/dev/verdict_bench.sh
 * prints it for the machine it runs on (docs/analysis.md); compare
 * --run_floor sets another. Used where neither side has two runs. */
#define VB_VERDICT_RUN_FLOOR 0.05
/* the report's bootstrap of medians (flag tables' CSV keep it for reference) */
#define VB_VERDICT_BOOT_ITERS 2000
#define VB_VERDICT_BOOT_SEED 0x5eedc0deULL

typedef enum {
    VB_VERDICT_EQUIVALENT,   /* inside +- threshold */
    VB_VERDICT_BETTER,       /* faster: higher throughput / lower time, beyond the threshold */
    VB_VERDICT_WORSE,        /* slower */
    VB_VERDICT_INCONCLUSIVE, /* see why */
    VB_VERDICT_NO_SAMPLES,   /* a side has none: nothing was measured (the gate's bad input) */
} vb_verdict_kind;

typedef enum {
    VB_WHY_NONE,        /* faster, slower or equivalent */
    VB_WHY_FEW_SAMPLES, /* fewer than VB_VERDICT_MIN_SAMPLES on a side */
    VB_WHY_STRADDLES,   /* the interval reaches across a threshold (or is not significant) */
    VB_WHY_ONE_RUN,     /* one run a side: the run-to-run spread is the floor's guess */
    VB_WHY_BUSY,        /* decided before the load widened the interval, not after */
    VB_WHY_UNDEFINED,   /* a sample <= 0 or not finite: no ratio */
} vb_verdict_why;

/* where the run-to-run variance in the interval came from */
typedef enum {
    VB_RUNSD_MEASURED, /* both sides have two or more runs */
    VB_RUNSD_OTHER,    /* one side has one run: the other side's spread stands for it */
    VB_RUNSD_FLOOR,    /* one run a side: the machine's floor */
} vb_runsd_source;

/* One side of a comparison. */
typedef struct vb_verdict_side {
    const double *v;  /* samples, > 0 (throughput or time) */
    const int *run;   /* run of each sample (any ints; equal = same run); NULL: all one run */
    int n;
    double load;      /* share of its trials' thread time lost to other work (load.csv); NaN: not recorded */
    const int *round; /* the round of each sample's run, for a paired comparison (vb_verdict_opts.paired);
                       * NULL: none */
} vb_verdict_side;

typedef struct vb_verdict_opts {
    bool higher_is_better; /* throughput: true; times: false */
    double alpha;          /* significance, and 1 - the interval's level */
    double threshold;      /* smallest relative change that counts */
    double run_floor;      /* log-scale run-to-run sd for one run a side; <= 0: VB_VERDICT_RUN_FLOOR */
    bool paired;           /* the sides ran in rounds, A and B in the same minutes: judge the rounds */
} vb_verdict_opts;

typedef struct vb_verdict {
    double ratio;     /* new / base (see above); NaN without one */
    double centre_base, centre_new; /* the ratio's terms: exp(mean of log run medians); NaN without samples */
    vb_ci ci;         /* at level 1 - alpha; NaN bounds without one */
    double p;         /* two-sided, from the same t; NaN without one */
    double df;        /* of the t */
    double level;     /* 1 - alpha */
    int nbase, nnew;  /* samples */
    int runs_base, runs_new;
    double run_sd;    /* log-scale run-to-run sd behind the interval (pooled when measured) */
    vb_runsd_source run_sd_source;
    int pairs;        /* rounds a paired verdict compared (0: not paired) */
    vb_ci ci_runs;    /* the interval of the runs alone, before the load widened it */
    double load_sd;   /* the busiest side's run-to-run sd floor from its load (VB_VERDICT_LOAD_SD); 0 for none */
    double noise;     /* the load's widening on top: ci = ci_floored / (1 + noise) .. * (1 + noise); 0 for none */
    bool busy_base, busy_new;
    double spread_base, spread_new; /* largest max / min of one run's samples; NaN with < 2 in every run */
    double load_base, load_new;     /* as given */
    bool load_differs; /* the two sides ran under very different load (busy and quiet, or shares > T apart) */
    double threshold;
    vb_verdict_kind kind;
    vb_verdict_why why;
} vb_verdict;

vb_verdict_opts vb_verdict_defaults(bool higher_is_better);

/* new_ against base by the rule above. */
vb_verdict vb_verdict_judge(const vb_verdict_side *base, const vb_verdict_side *new_, const vb_verdict_opts *o);

/* A side's centre as the rule compares it: exp of the mean over its runs of
 * log(the run's median sample), the geometric mean of the run medians (the
 * median itself for one run). NaN without samples, or with one <= 0 or not
 * finite. What a history row records of a set of runs (vitbench history). */
double vb_verdict_centre(const vb_verdict_side *s);

/* "faster", "slower", "equivalent", "inconclusive", "no samples" */
const char *vb_verdict_word(vb_verdict_kind k);
/* Why an inconclusive verdict is one, in a phrase that says what would
 * decide it ("one run a side: run-to-run spread unknown (floor 5%)");
 * empty for decided verdicts. Writes into buf and returns it. */
const char *vb_verdict_reason(const vb_verdict *v, char *buf, size_t n);

/* The rule in one sentence, for documents that show verdicts. */
const char *vb_verdict_rule(void);

/* Is a side busy by its own samples or load (for notes outside verdicts)? */
bool vb_verdict_busy(double spread, double load);

#endif
