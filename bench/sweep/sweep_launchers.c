/* sweep_launchers.c: the launcher table. Each entry says how a sweep starts
 * R ranks on N nodes with G GPUs each (its argv builder, or for a batch
 * launcher the launcher its job scripts use), whose keys it takes (its
 * scheduler: the job-script header, how a job id and the host list are read
 * back, how a job is cancelled) and what it needs on PATH.
 *
 * Contract: sweep_launchers[k] for every launcher_kind k; a batch launcher's
 * step is a launcher of the same scheduler that starts ranks. A launcher
 * is one entry here; a scheduler is one sweep_scheduler in its own file
 * (sweep_slurm.c, sweep_lsf.c, sweep_pbs.c, sweep_flux.c) with its header
 * writer and checks, listed in sweep_schedulers.
 */
#include "bench/sweep/sweep_internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const needs_mpirun[] = {"mpirun", NULL};
static const char *const needs_srun[] = {"srun", NULL};
static const char *const needs_sbatch[] = {"srun", "sbatch", NULL};
static const char *const needs_bsub[] = {"bsub", NULL};
static const char *const needs_jsrun[] = {"jsrun", NULL};
static const char *const needs_qsub[] = {"qsub", NULL};
static const char *const needs_mpiexec[] = {"mpiexec", NULL};
static const char *const needs_flux[] = {"flux", NULL};

/* Summit's node: 42 cores for 6 GPUs (the SC22 tutorial's jsrun lines
 * bind 7 cores to each GPU's rank); jsrun's own default is 1 core. */
enum { JSRUN_CORES_PER_RS = 7 };

const sweep_launcher sweep_launchers[LAUNCH_COUNT] = {
    [LAUNCH_MPIRUN] = {"mpirun", SCHED_NONE, false, false, LAUNCH_MPIRUN, needs_mpirun, sweep_build_mpirun, 0,
                       "this machine: mpirun -np R --oversubscribe"},
    [LAUNCH_SRUN] = {"srun", SCHED_SLURM, false, false, LAUNCH_SRUN, needs_srun, sweep_build_srun, 0,
                     "Slurm, inside an allocation: srun --ntasks=R --nodes=N ..."},
    [LAUNCH_SBATCH] = {"sbatch", SCHED_SLURM, true, false, LAUNCH_SRUN, needs_sbatch, NULL, 0,
                       "Slurm job scripts (#SBATCH), srun inside"},
    [LAUNCH_BSUB] = {"bsub", SCHED_LSF, true, false, LAUNCH_JSRUN, needs_bsub, NULL, JSRUN_CORES_PER_RS,
                     "LSF job scripts (#BSUB, bsub < script), jsrun inside"},
    [LAUNCH_JSRUN] = {"jsrun", SCHED_LSF, false, true, LAUNCH_JSRUN, needs_jsrun, sweep_build_jsrun,
                      JSRUN_CORES_PER_RS, "LSF (CSM: Summit, Sierra), inside an allocation: jsrun -n R -a 1 -c 7 -g 1"},
    [LAUNCH_QSUB] = {"qsub", SCHED_PBS, true, false, LAUNCH_MPIEXEC, needs_qsub, NULL, 0,
                     "PBS Pro job scripts (#PBS), mpiexec inside"},
    [LAUNCH_MPIEXEC] = {"mpiexec", SCHED_PBS, false, true, LAUNCH_MPIEXEC, needs_mpiexec, sweep_build_mpiexec, 0,
                        "PBS Pro, inside an allocation: mpiexec -n R --ppn P (Cray PALS)"},
    [LAUNCH_FLUX_BATCH] = {"flux-batch", SCHED_FLUX, true, false, LAUNCH_FLUX_RUN, needs_flux, NULL, 0,
                           "Flux batch jobs (# flux:), flux run inside"},
    [LAUNCH_FLUX_RUN] = {"flux-run", SCHED_FLUX, false, false, LAUNCH_FLUX_RUN, needs_flux, sweep_build_flux_run, 0,
                         "Flux, in an instance: flux run -n R -N N"},
};

const sweep_scheduler *const sweep_schedulers[SCHED_COUNT] = {
    [SCHED_NONE] = NULL,
    [SCHED_SLURM] = &sweep_sched_slurm,
    [SCHED_LSF] = &sweep_sched_lsf,
    [SCHED_PBS] = &sweep_sched_pbs,
    [SCHED_FLUX] = &sweep_sched_flux,
};

const sweep_scheduler *sweep_sched_of(launcher_kind k) { return sweep_schedulers[sweep_launchers[k].sched]; }

int sweep_cpus_per_task(const vb_scenario *s, launcher_kind k) {
    if (s->slurm.cpus_per_task > 0) return s->slurm.cpus_per_task;
    return sweep_launchers[sweep_launchers[k].step].cpus_per_task;
}

sweep_shape sweep_shape_of(const vb_scenario *s, int per_node, int ranks) {
    sweep_shape sh = {ranks, sweep_nodes_of(s, per_node, ranks), sweep_tasks_per_node(s, per_node, ranks)};
    return sh;
}

/* The batch launcher of a scheduler (sbatch for Slurm), for messages. */
static const char *batch_launcher_of(const sweep_scheduler *sc) {
    for (int k = 0; k < LAUNCH_COUNT; k++)
        if (sweep_launchers[k].batch && sweep_sched_of((launcher_kind)k) == sc) return sweep_launchers[k].name;
    return "?";
}

void sweep_check_allocation(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind k, int per_node,
                            bool dry_run) {
    const sweep_launcher *l = &sweep_launchers[k];
    const sweep_scheduler *sc = sweep_sched_of(k);
    if (dry_run || l->batch || !sc) return;
    const char *env = getenv(sc->alloc_env);
    if (l->inside && (!env || !*env))
        vb_die_input("flag --launcher %s: not inside an allocation of %s (%s is not set); submit the sweep's jobs with "
                     "--launcher %s, or run it from an interactive job",
                     l->name, sc->name, sc->alloc_env, batch_launcher_of(sc));
    if (!env || !*env) return;
    int have = sc->alloc_nodes();
    if (have <= 0) return;
    for (int i = 0; i < plan->nruns; i++) {
        int need = sweep_nodes_of(s, per_node, plan->runs[i].ranks);
        if (need > have)
            vb_die_input("flag --launcher %s: run %s needs %d nodes; this %s allocation (job %s) has %d", l->name,
                         plan->runs[i].name, need, sc->name, env, have);
    }
}
