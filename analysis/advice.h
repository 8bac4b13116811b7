/* advice.h: what the runs behind a result show (their load, the spread
 * of their trials, the OpenMP threads they were given and ran), and what to
 * rerun with when that explains the result: the words the report and
 * compare use for it.
 *
 * The advice, in order: one thread a rank when busy runs ran teams (a
 * thread that shares its core stalls every barrier of its team,
 * core/run/threads.h); one thread a rank when runs gave up threads as they
 * started (thread_policy adapt: runs with different teams differ by more
 * than the code); a quieter node or more runs a side interleaved when
 * busy; and what the load cost the busiest run. */
#ifndef VB_ANALYSIS_ADVICE_H
#define VB_ANALYSIS_ADVICE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct vb_cause {
    int runs;           /* runs looked at */
    double load;        /* the largest run's share of thread time lost to other work (load.csv); NaN: none recorded */
    double spread;      /* the largest max / min of one run's trials; NaN with fewer than two a run */
    int team, used;     /* OpenMP threads a rank was given and ran, the most of any run; 0: not recorded */
    bool gave_way;      /* a run ran fewer threads than it was given (thread_policy adapt on a busy node) */
    bool oversubscribed;
} vb_cause;

/* busy by the verdict rule's limits (verdict.h): load or trial spread */
bool vb_cause_busy(const vb_cause *c);
/* what the runs show, as a clause: their load and its cost, their trials'
 * spread, their threads; "nothing recorded says ..." without any of it */
void vb_cause_describe(const vb_cause *c, char *buf, size_t n);
/* What to rerun with, as sentences ("" when nothing recorded explains the
 * result). `sweep`: phrased with the sweep's flags, else a single run's. */
void vb_advice(const vb_cause *const *c, int n, bool sweep, char *buf, size_t bn);

#endif
