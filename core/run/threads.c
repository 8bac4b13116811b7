/* threads.c: the OpenMP team of a CPU run's ranks (threads.h). */
#include "core/run/threads.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/util/machine_load.h"

int vb_threads_for_wait(int team, double wait_share, double *others) {
    if (others) *others = NAN;
    if (team < 1) return 1;
    if (!(wait_share >= 0 && wait_share < 1)) return team;
    const double k = team * wait_share / (1 - wait_share);
    if (others) *others = k;
    const double drop = ceil(k - VB_THREADS_SLACK);
    if (drop <= 0) return team;
    return drop >= team ? 1 : team - (int)drop;
}

static double monotonic_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double vb_threads_probe(int team, double seconds) {
    double run = 0, wait = 0;
    int unread = 0;
    #pragma omp parallel num_threads(team) reduction(+ : run, wait, unread)
    {
        double r0, w0, r1, w1;
        const bool before = vb_load_thread_sched(&r0, &w0);
        /* the work of a compute-bound thread: it asks for its CPU the whole time */
        const double t0 = monotonic_s();
        volatile unsigned long spins = 0;
        while (monotonic_s() - t0 < seconds) spins++;
        if (before && vb_load_thread_sched(&r1, &w1) && r1 >= r0 && w1 >= w0) {
            run += r1 - r0;
            wait += w1 - w0;
        } else {
            unread++;
        }
    }
    if (unread || run <= 0) return NAN;
    return wait / (run + wait);
}

vb_thread_choice vb_threads_choose(const vb_comm *world, int team, bool adapt, bool host) {
    vb_thread_choice c = {team, team, "probe", NAN, NAN, 0};
    if (!host) c.rule = "device";
    else if (!adapt) c.rule = "fixed";
    else if (team <= 1) c.rule = "one thread";
    /* every rank decides alike: the same branch everywhere, the same share */
    if (strcmp(c.rule, "probe") != 0) return c;
    vb_barrier(world); /* the ranks of a node probe together, as they will run */
    double w = vb_threads_probe(team, VB_THREADS_PROBE_S);
    /* a rank that could not measure sends -1: NaN does not survive a max */
    double send = isnan(w) ? -1 : w;
    vb_allreduce_max_f64(world, &send, 1);
    c.probe_s = VB_THREADS_PROBE_S;
    if (send < 0) {
        c.rule = "unmeasured";
        return c;
    }
    c.wait_share = send;
    c.threads = vb_threads_for_wait(team, send, &c.others);
    if (c.threads != team) omp_set_num_threads(c.threads);
    return c;
}

void vb_threads_describe(const vb_thread_choice *c, char *buf, size_t n) {
    if (n) buf[0] = '\0';
    if (c->threads == c->team || isnan(c->wait_share)) return;
    snprintf(buf, n,
             "%d OpenMP thread%s instead of %d (thread_policy adapt): as the run started its %d threads waited "
             "%.0f%% of a %.0f ms probe for a CPU, about %.1f CPUs of other work on their cores, and a team with a "
             "thread that shares its core stalls at every barrier; thread_policy fixed keeps %d",
             c->threads, c->threads == 1 ? "" : "s", c->team, c->team, 100 * c->wait_share, 1e3 * c->probe_s,
             c->others, c->team);
}
