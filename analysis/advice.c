/* advice.c: what the runs behind a result show, and what to rerun with (advice.h). */
#include "analysis/advice.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "analysis/verdict.h"

/* appends to buf[n] at *k; what does not fit is left out */
__attribute__((format(printf, 4, 5))) static void add(char *buf, size_t n, size_t *k, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(buf + *k, n - *k, fmt, ap);
    va_end(ap);
    if (w > 0 && (size_t)w < n - *k) *k += (size_t)w;
}

bool vb_cause_busy(const vb_cause *c) { return vb_verdict_busy(c->spread, c->load); }

void vb_cause_describe(const vb_cause *c, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    if (isfinite(c->load) && c->load > VB_VERDICT_BUSY_LOAD)
        add(buf, n, &k, "%s%s lost up to %.3g%% of %s thread time to other work (load.csv; that share alone slows a run %.2gx)",
            k ? "; " : "", c->runs == 1 ? "its run" : "its runs", 100 * c->load, c->runs == 1 ? "its" : "their",
            1 / (1 - fmin(c->load, 0.99)));
    else if (isfinite(c->load))
        add(buf, n, &k, "%s%s lost at most %.3g%% of %s thread time to other work", k ? "; " : "", c->runs == 1 ? "its run" : "its runs",
            100 * c->load, c->runs == 1 ? "its" : "their");
    if (c->spread > VB_VERDICT_NOISY_SPREAD) add(buf, n, &k, "%strials spread %.2gx within one run", k ? "; " : "", c->spread);
    if (c->gave_way)
        add(buf, n, &k, "%sa run gave up OpenMP threads as it started (%d of %d run, thread_policy adapt: the cores were busy)",
            k ? "; " : "", c->used, c->team);
    else if (c->used > 0)
        add(buf, n, &k, "%s%d OpenMP thread%s a rank", k ? "; " : "", c->used, c->used == 1 ? "" : "s");
    if (c->oversubscribed) add(buf, n, &k, "%soversubscribed (more threads than cores)", k ? "; " : "");
    if (!k) add(buf, n, &k, "nothing recorded says what went wrong (no load.csv, thread counts or busy trials)");
}

void vb_advice(const vb_cause *const *c, int n, bool sweep, char *buf, size_t bn) {
    bool busy = false, busy_teams = false;
    int gave_way = 0;
    double worst = NAN;
    for (int i = 0; i < n; i++) {
        busy = busy || vb_cause_busy(c[i]);
        busy_teams = busy_teams || (vb_cause_busy(c[i]) && c[i]->used > 1);
        gave_way += c[i]->gave_way;
        if (isfinite(c[i]->load) && !(c[i]->load <= worst)) worst = c[i]->load;
    }
    size_t k = 0;
    buf[0] = '\0';
    const char *one = sweep ? "--threads_per_rank 1" : "OMP_NUM_THREADS=1";
    if (busy_teams)
        add(buf, bn, &k, "Rerun with one OpenMP thread a rank (%s): a thread that shares its core with other work "
            "stalls every barrier of its team, so a busy machine slows a team far more than one thread", one);
    else if (gave_way)
        add(buf, bn, &k, "Rerun with one OpenMP thread a rank (%s), so that every run keeps the team it is given: "
            "runs here gave up threads as they started because other work held the cores (thread_policy adapt), "
            "and runs with different teams differ by more than the code", one);
    if (k) add(buf, bn, &k, ".");
    if (busy)
        add(buf, bn, &k, "%s%s on a quieter node, or with more runs a side interleaved in the same minutes (%s).",
            k ? " " : "", k ? "Better still, rerun" : "Rerun these runs",
            sweep ? "--repeats N; vitbench sweep --ab alternates two settings run by run" : "vitbench sweep --ab");
    if (busy && isfinite(worst) && worst > VB_VERDICT_BUSY_LOAD)
        add(buf, bn, &k, " The load cost the busiest run %.3g%% of its thread time: a %.2gx slowdown by that share "
            "alone.", 100 * worst, 1 / (1 - fmin(worst, 0.99)));
}
