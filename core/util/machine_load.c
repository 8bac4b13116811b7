/* machine_load.c: the machine's load around an interval (machine_load.h). */
#include "core/util/machine_load.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static double read_loadavg(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    double v = NAN;
    if (!f) return NAN;
    if (fscanf(f, "%lf", &v) != 1) v = NAN;
    fclose(f);
    return v;
}

/* the aggregate "cpu" line: user nice system idle iowait irq softirq steal ... */
static void read_stat(double *total, double *steal) {
    *total = *steal = NAN;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    char line[512];
    if (fgets(line, sizeof line, f) && strncmp(line, "cpu ", 4) == 0) {
        double v[10] = {0};
        int n = sscanf(line + 4, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                       &v[6], &v[7], &v[8], &v[9]);
        if (n >= 4) {
            double t = 0;
            for (int i = 0; i < n && i < 8; i++) t += v[i]; /* guest time is already inside user */
            *total = t;
            *steal = n >= 8 ? v[7] : 0;
        }
    }
    fclose(f);
}

/* run and wait nanoseconds of every thread of this process */
static void read_schedstat(double *run, double *wait) {
    *run = *wait = NAN;
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    double r = 0, w = 0;
    int seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* a thread that ended meanwhile */
        double a, b;
        if (fscanf(f, "%lf %lf", &a, &b) == 2) {
            r += a;
            w += b;
            seen++;
        }
        fclose(f);
    }
    closedir(d);
    if (seen) *run = r, *wait = w;
}

bool vb_load_thread_sched(double *run_ns, double *wait_ns) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    bool ok = f && fscanf(f, "%lf %lf", run_ns, wait_ns) == 2;
    if (f) fclose(f);
    return ok;
}

void vb_load_read(vb_load_sample *s) {
    s->loadavg1 = read_loadavg();
    read_stat(&s->cpu_ticks, &s->steal_ticks);
    read_schedstat(&s->run_ns, &s->wait_ns);
    struct rusage ru;
    s->nivcsw = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_nivcsw : NAN;
}

vb_load_delta vb_load_between(const vb_load_sample *a, const vb_load_sample *b) {
    vb_load_delta d = {a->loadavg1, b->loadavg1, NAN, NAN, b->nivcsw - a->nivcsw};
    const double ticks = b->cpu_ticks - a->cpu_ticks;
    if (ticks > 0) d.steal_share = (b->steal_ticks - a->steal_ticks) / ticks;
    else if (ticks == 0) d.steal_share = 0;
    /* threads that started inside the interval count from 0: a positive
     * difference may undercount, never invent, a wait */
    const double run = b->run_ns - a->run_ns, wait = b->wait_ns - a->wait_ns;
    if (run > 0 && wait >= 0) d.wait_share = wait / (run + wait);
    return d;
}

int vb_load_online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 0;
}

double vb_peak_rss_bytes(void) {
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
    return (double)u.ru_maxrss * 1024.0; /* Linux reports kilobytes */
}
