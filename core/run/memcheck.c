/* memcheck.c: one rank's memory estimate and the check against the node's
 * available memory (memcheck.h). */
#include "core/run/memcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/util/common.h"
#include "core/util/fileio.h"

/* sizeof the harness's records, kept in step with bench/trials.c and
 * core/prof/timeline.c: an iteration record is 5 doubles, a timeline event 64
 * bytes, a profiler sample one double */
#define ITER_RECORD_BYTES 40.0
#define TIMELINE_EVENT_BYTES 64.0
#define PROFILE_SAMPLE_BYTES 8.0

static double steps_of(const vb_benchy_trial_cfg *t, int steps_per_epoch) {
    if (!t->run_benchmark) return 0;
    double nb = t->nbatches > 0 && t->nbatches < steps_per_epoch ? t->nbatches : steps_per_epoch;
    return ((double)t->nwarmup + (double)t->ntrials) * nb;
}

void vb_mem_estimate_run(const vb_config *c, const vb_benchy_config *b, bool benchy, bool train, const vit_dims *d,
                         const vit_parallel *par, int local_batch, int steps_per_epoch, int world, vb_ctx *ctx,
                         vb_mem_estimate *e) {
    memset(e, 0, sizeof *e);
    e->local_batch = local_batch;
    vit_footprint f = vit_footprint_of(d, par, local_batch, ctx);
    e->params = (double)f.nparams * sizeof(float) + (double)f.param_act_bytes;
    e->grads = (double)f.nparams * sizeof(float);
    e->optimizer = 2.0 * (double)f.nparams * sizeof(float);
    e->activations = (double)f.act_bytes;
    /* activations grow with the batch; the padding of each view makes the
     * step from B to B + 1 the honest per-sample figure */
    vit_footprint f1 = vit_footprint_of(d, par, local_batch + 1, ctx);
    double act_per_sample = (double)f1.act_bytes - (double)f.act_bytes;
    /* fp8's GEMM scratch (quantised operand copies) grows with the batch too */
    if (strcmp(c->amp_mode, "fp8") == 0) {
        const double b0 = (double)vit_fp8_footprint(d, par, local_batch, c->fp8_amax_history_len, ctx);
        const double b1 = (double)vit_fp8_footprint(d, par, local_batch + 1, c->fp8_amax_history_len, ctx);
        e->activations += b0;
        act_per_sample += b1 - b0;
    }
    const bool host = ctx->ops->host_memory != 0;

    /* a batch is inputs and targets; the loader keeps 1 slot (no workers) or
     * 2 per worker, the backend one copy (host memory on the CPU; two on the
     * device under dali, which copies the next batch while a step reads the
     * current one), validation (train) its own slots */
    double sample = (double)(c->n_in_channels + c->n_out_channels) * c->img_size[0] * c->img_size[1] * sizeof(float);
    double slots = c->num_data_workers > 0 ? 2.0 * c->num_data_workers : 1.0;
    double buffers = slots + (host ? 1.0 : 0.0) + (train ? slots : 0.0);
    e->data = buffers * sample * local_batch;

    if (benchy) {
        double iters = 0, timed_steps = 0;
        for (int k = 0; k < VB_TRIAL_NKINDS; k++) {
            iters += steps_of(&b->trial[k], steps_per_epoch);
            /* the profiler times every trial kind but IO */
            const vb_benchy_trial_cfg *t = &b->trial[k];
            if (k != VB_TRIAL_IO && t->run_benchmark)
                timed_steps += (double)t->ntrials *
                               (t->nbatches > 0 && t->nbatches < steps_per_epoch ? t->nbatches : steps_per_epoch);
        }
        /* rank 0 keeps every rank's copy next to its own */
        e->records = iters * ITER_RECORD_BYTES * (1.0 + world);
        /* profiler: one sample per op call of every timed step */
        double ops_per_step = 40.0 * d->depth + 64.0;
        e->records += timed_steps * ops_per_step * PROFILE_SAMPLE_BYTES;
        const vb_benchy_trial_cfg *full = &b->trial[VB_TRIAL_FULL];
        double nb = full->nbatches > 0 && full->nbatches < steps_per_epoch ? full->nbatches : steps_per_epoch;
        double window = fmin((double)c->profile_steps, (double)full->ntrials * nb);
        if (full->run_benchmark && window > 0)
            e->records += window * ((64.0 * d->depth + 256.0) + 1024.0) * TIMELINE_EVENT_BYTES;
    }
    const double model = e->params + e->grads + e->optimizer + e->activations;
    if (host) {
        e->per_sample = act_per_sample + buffers * sample;
        e->total = model + e->data + e->records;
    } else {
        /* the model and the batch copy live on the device */
        const double copies = strcmp(c->data_loader_config, "dali") == 0 ? 2.0 : 1.0;
        e->device = model + copies * sample * local_batch;
        e->per_sample = buffers * sample;
        e->total = e->data + e->records;
    }
}

/* A number from a cgroup file ("max" = no limit: -1). */
static double read_cgroup_value(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = "";
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok || strncmp(buf, "max", 3) == 0) return -1;
    char *end;
    double v = strtod(buf, &end);
    return end != buf && v > 0 ? v : -1;
}

double vb_mem_available(char *source, size_t n) {
    double avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            unsigned long long kb;
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                avail = (double)kb * 1024.0;
                break;
            }
        }
        fclose(f);
    }
    if (source && n) snprintf(source, n, "%s", avail > 0 ? "MemAvailable" : "unknown");
    /* a container's limit can be far below the machine's free memory */
    double max = read_cgroup_value("/sys/fs/cgroup/memory.max");
    double cur = read_cgroup_value("/sys/fs/cgroup/memory.current");
    if (max < 0) { /* cgroup v1 */
        max = read_cgroup_value("/sys/fs/cgroup/memory/memory.limit_in_bytes");
        cur = read_cgroup_value("/sys/fs/cgroup/memory/memory.usage_in_bytes");
        if (max > 1e18) max = -1; /* v1 says "no limit" with a huge number */
    }
    if (max > 0) {
        double left = max - (cur > 0 ? cur : 0);
        if (left < avail || avail <= 0) {
            avail = left > 0 ? left : 0;
            if (source && n) snprintf(source, n, "cgroup memory.max");
        }
    }
    return avail;
}

static double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

void vb_mem_check(const vb_mem_estimate *e, int node_ranks, double limit, const char *limit_source) {
    if (limit <= 0) return;
    if (node_ranks < 1) node_ranks = 1;
    double need = e->total * node_ranks;
    if (need <= limit) return;
    /* the largest local batch whose estimate fits */
    double fixed = e->total - e->per_sample * e->local_batch;
    double room = limit / node_ranks - fixed;
    long fits = e->per_sample > 0 && room > 0 ? (long)floor(room / e->per_sample) : 0;
    char advice[160];
    if (fits >= 1)
        snprintf(advice, sizeof advice, "the largest local batch that fits is %ld (--local_batch_size %ld)", fits,
                 fits);
    else if (e->device > 0)
        snprintf(advice, sizeof advice, "no batch fits: the run's records alone need %.2f GiB a rank",
                 gib(e->records));
    else
        snprintf(advice, sizeof advice, "no batch fits: the model and optimizer alone need %.2f GiB a rank",
                 gib(e->params + e->grads + e->optimizer));
    if (e->device > 0) /* the model is on the device: only host buffers count here */
        vb_die_input("memory: local batch %d needs an estimated %.2f GiB of host memory a rank (data %.2f, records "
                     "%.2f) x %d rank%s on this node, more than the %.2f GiB available (%s); %s",
                     e->local_batch, gib(e->total), gib(e->data), gib(e->records), node_ranks,
                     node_ranks == 1 ? "" : "s", gib(limit), limit_source, advice);
    else
        vb_die_input("memory: local batch %d needs an estimated %.2f GiB a rank (parameters %.2f, gradients %.2f, "
                     "Adam %.2f, activations %.2f, data %.2f, records %.2f) x %d rank%s on this node, more than the "
                     "%.2f GiB available (%s); %s",
                     e->local_batch, gib(e->total), gib(e->params), gib(e->grads), gib(e->optimizer),
                     gib(e->activations), gib(e->data), gib(e->records), node_ranks, node_ranks == 1 ? "" : "s",
                     gib(limit), limit_source, advice);
}

double vb_address_space_left(double *limit) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return -1;
    if (limit) *limit = (double)rl.rlim_cur;
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu", &pages) != 1) pages = 0;
        fclose(f);
    }
    const double used = (double)pages * (double)sysconf(_SC_PAGESIZE);
    return (double)rl.rlim_cur > used ? (double)rl.rlim_cur - used : 0;
}

void vb_address_space_check(double need, const char *what) {
    double limit = 0;
    const double left = vb_address_space_left(&limit);
    if (left < 0 || left >= need) return;
    const double mib = 1024.0 * 1024.0;
    vb_die_env("the address-space limit (ulimit -v %.0f MiB) leaves %.0f MiB of it free, and %s need about %.0f MiB: "
               "raise the limit (ulimit -v unlimited) or run where it is higher",
               limit / mib, left / mib, what, need / mib);
}
