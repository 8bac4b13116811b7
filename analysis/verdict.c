/* verdict.c: the comparison rule (verdict.h). */
#include "analysis/verdict.h"

#include <math.h>

vb_verdict vb_verdict_of(const double *base, int nbase, const double *new_, int nnew, bool higher_is_better,
                         double alpha, double threshold) {
    vb_verdict v = {NAN, {NAN, NAN}, NAN, nbase, nnew, VB_VERDICT_NO_SAMPLES};
    if (nbase == 0 || nnew == 0) return v;
    v.p = vb_stats_mann_whitney(new_, nnew, base, nbase).p;
    const double mb = vb_stats_median(base, nbase);
    if (mb == 0) {
        v.kind = VB_VERDICT_UNDEFINED;
        return v;
    }
    v.ratio = vb_stats_median(new_, nnew) / mb;
    v.ci = vb_stats_bootstrap_median_ratio(base, nbase, new_, nnew, VB_VERDICT_BOOT_ITERS, VB_VERDICT_BOOT_SEED,
                                           0.95);
    if (nbase < VB_VERDICT_MIN_SAMPLES || nnew < VB_VERDICT_MIN_SAMPLES) {
        v.kind = VB_VERDICT_INCONCLUSIVE;
        return v;
    }
    if (isnan(v.ci.lo) || !isfinite(v.ratio)) {
        v.kind = VB_VERDICT_UNDEFINED; /* a resampled base median of 0 */
        return v;
    }
    const bool sig = v.p < alpha;
    const bool below = v.ci.hi < 1 - threshold, above = v.ci.lo > 1 + threshold;
    if (sig && (higher_is_better ? above : below))
        v.kind = VB_VERDICT_BETTER;
    else if (sig && (higher_is_better ? below : above))
        v.kind = VB_VERDICT_WORSE;
    else
        v.kind = VB_VERDICT_UNCHANGED;
    return v;
}

const char *vb_verdict_rule(void) {
    return "ratio = median(new) / median(base) with a seeded percentile-bootstrap 95% CI; p: two-sided "
           "Mann-Whitney U; better or worse when p < 0.05 and the whole CI lies beyond 5% (above 1.05 or below "
           "0.95), inconclusive with fewer than 5 samples a side, else no significant difference";
}
