/* threads.h: how many OpenMP threads a rank of a CPU run uses.
 *
 * Every parallel region (vitbench's kernels and OpenBLAS's, which share
 * libgomp) ends at a barrier that waits for every thread of the team. A
 * thread that shares its core with other work is descheduled for a time
 * slice at a time, and every region of the step waits for it: on the 2-core
 * Xeon a tiny run under one busy loop per core kept about 0.01 of its quiet
 * step rate with 2 threads and about 0.3 with 1, and neither passive nor
 * shorter spin waits kept more than 0.04 with 2 (docs/performance.md).
 *
 * So under thread_policy adapt (the default) a run measures, before its
 * first step, how much of its team's CPU time other work takes: every
 * thread of the team spins for VB_THREADS_PROBE_S and reads its own
 * run-queue wait (schedstat). A share w waiting among T threads is about
 * k = T w / (1 - w) CPUs of other work on the team's cores (T + k runnable
 * threads share T cores); the team drops one thread for each CPU of it
 * beyond VB_THREADS_SLACK: T - ceil(k - slack), at least 1. All ranks take
 * the largest share any rank measured, so they run the same team (their own
 * threads count as other work where ranks x threads exceed the cores).
 * thread_policy fixed keeps the team as OMP_NUM_THREADS gives it (capped at
 * the affinity mask's cores, as always). The choice is made once, as the
 * run starts; load.csv records what each trial lost to other work after it.
 */
#ifndef VB_THREADS_H
#define VB_THREADS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/comm/comm.h"

/* the probe: long enough for many scheduler slices, short beside a run */
#define VB_THREADS_PROBE_S 0.05
/* CPUs of other work a team tolerates before it drops a thread: at k 0.45
 * (two 20% duty-cycle loops on 2 cores) 2 threads ran as fast as 1; at
 * k 0.2 2 threads still ran 1.14x faster (docs/performance.md) */
#define VB_THREADS_SLACK 0.4

typedef struct vb_thread_choice {
    int team;          /* threads before the choice (OMP_NUM_THREADS, capped at the mask's cores) */
    int threads;       /* threads the run uses */
    const char *rule;  /* "probe", "fixed" (thread_policy fixed), "one thread" (nothing to choose),
                        * "device" (the step runs on a GPU), "unmeasured" (no schedstat) */
    double wait_share; /* the probe's share of thread time spent waiting for a CPU (largest over
                        * ranks); NaN when not probed */
    double others;     /* CPUs of other work that share implies; NaN when not probed */
    double probe_s;    /* the probe's length in seconds; 0 when not probed */
} vb_thread_choice;

/* The team for a probe's wait share (pure): T - ceil(k - slack) in [1, T];
 * T when the share is not a number in [0, 1). *others (may be NULL) gets k. */
int vb_threads_for_wait(int team, double wait_share, double *others);

/* Spins `team` threads for `seconds` and returns their share of thread time
 * spent waiting for a CPU; NaN where the kernel keeps no schedstat. */
double vb_threads_probe(int team, double seconds);

/* The choice for this rank (collective over world when it probes), applied
 * with omp_set_num_threads. `adapt`: thread_policy adapt; `host`: the step
 * runs on the host's cores (the CPU backend). */
vb_thread_choice vb_threads_choose(const vb_comm *world, int team, bool adapt, bool host);

/* One line for a user when the choice changed the team ("" otherwise):
 * what was chosen, what the probe saw, how to keep the team. */
void vb_threads_describe(const vb_thread_choice *c, char *buf, size_t n);

#endif
