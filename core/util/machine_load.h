/* machine_load.h: how busy the machine was around a piece of work, from
 * what Linux keeps anyway (no privileges, no sampling thread):
 *   - the 1-minute load average (/proc/loadavg) and the online CPUs;
 *   - steal: CPU time the hypervisor gave to other guests (/proc/stat);
 *   - the process's involuntary context switches (getrusage): the scheduler
 *     took a CPU from one of its threads for another runnable task;
 *   - run-queue wait: the time the process's threads were runnable but
 *     waited for a CPU (/proc/self/task/<tid>/schedstat), against the time
 *     they ran. Its share of their thread time is the slowdown the
 *     contention explains directly: a compute-bound thread that waited a
 *     share s of its time ran 1 / (1 - s) times longer.
 * A field the kernel does not provide reads NaN; nothing fails.
 */
#ifndef VB_MACHINE_LOAD_H
#define VB_MACHINE_LOAD_H

#include <stdbool.h>

typedef struct vb_load_sample {
    double loadavg1;           /* 1-minute load average */
    double cpu_ticks, steal_ticks; /* all CPUs' ticks since boot, and the stolen ones */
    double run_ns, wait_ns;    /* summed over the process's threads alive at the time */
    double nivcsw;             /* involuntary context switches of the process so far */
} vb_load_sample;

/* The load over one interval (e.g. a trial), from samples at its ends. */
typedef struct vb_load_delta {
    double loadavg_before, loadavg_after;
    double steal_share;  /* stolen / all CPU ticks of the interval */
    double wait_share;   /* run-queue wait / (wait + run) of the process's threads */
    double nivcsw;       /* involuntary context switches in the interval */
} vb_load_delta;

void vb_load_read(vb_load_sample *s);
vb_load_delta vb_load_between(const vb_load_sample *before, const vb_load_sample *after);
/* The calling thread's run and run-queue wait so far, in nanoseconds
 * (/proc/thread-self/schedstat); false where the kernel does not keep them. */
bool vb_load_thread_sched(double *run_ns, double *wait_ns);

/* CPUs online (sysconf); 0 when unknown */
int vb_load_online_cpus(void);

/* This process's peak resident memory in bytes (getrusage's max RSS). */
double vb_peak_rss_bytes(void);

#endif
