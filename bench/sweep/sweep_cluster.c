/* sweep_cluster.c: the scheduler keys a scenario may set (its cluster:
 * block, or its top level, as older scenarios do; flags of the same names
 * win), every one defined once in the table below: its type, which
 * schedulers take it, its field in vb_sweep_slurm and its own check.
 *
 * Contract: vb_sweep_slurm_set checks a value by its key's type (and the
 * key's own check) as soon as it is read, whatever the launcher, and
 * records where it was set; sweep_cluster_check, once the launcher is known,
 * refuses the keys its scheduler does not take and a time limit outside its
 * grammar, then runs the scheduler's own checks. Every refusal is exit 2
 * with one line naming the key and where it was set.
 */
#include "bench/sweep/sweep_internal.h"

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/flag.h"

#define S (1u << SCHED_SLURM)
#define L (1u << SCHED_LSF)
#define P (1u << SCHED_PBS)
#define F (1u << SCHED_FLUX)
#define FIELD(f) offsetof(vb_sweep_slurm, f), sizeof(((vb_sweep_slurm *)0)->f)
#define LIST(f) offsetof(vb_sweep_slurm, f), 0, offsetof(vb_sweep_slurm, n##f)

/* srun --mpi: a plugin name. */
static void check_srun_mpi(const char *value, const char *origin) {
    bool ok = value[0] != '\0';
    for (const char *c = value; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_') ok = false;
    if (!ok) vb_die_input("%s: srun_mpi '%s' is not an srun --mpi plugin name (e.g. pmix, pmi2, none)", origin, value);
}

/* LSF's -alloc_flags: blank-separated flag names (gpumps smt4), written in
 * double quotes as bsub reads them. */
static void check_alloc_flags(const char *value, const char *origin) {
    bool ok = value[0] != '\0' && value[0] != ' ';
    for (const char *c = value; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("_-.:= ", *c)) ok = false;
    if (!ok)
        vb_die_input("%s: alloc_flags '%s' must be LSF allocation flags: names of letters, digits, _ - . : = "
                     "separated by blanks (e.g. \"gpumps smt4\")", origin, value);
}

/* jsrun --smpiargs: Spectrum MPI's options, passed as one argument of the
 * jsrun line (shell-quoted): any printable text on one line. */
static void check_smpiargs(const char *value, const char *origin) {
    for (const char *c = value; *c; c++)
        if (!isprint((unsigned char)*c))
            vb_die_input("%s: smpiargs '%s' holds a character that is not printable", origin, value);
    if (!value[0]) vb_die_input("%s: smpiargs is empty (e.g. -disable_gpu_hooks)", origin);
}

const sweep_cluster_key sweep_cluster_keys[] = {
    {"nodes", S | L | P | F, KEY_INT, offsetof(vb_sweep_slurm, nodes), 1, 0, NULL, NULL, "N",
     "every run on N nodes, ranks/N each (instead of --ranks_per_node)"},
    {"gpus_per_node", S | L | P | F, KEY_INT, offsetof(vb_sweep_slurm, gpus_per_node), 0, 0, NULL, NULL, "G",
     "GPUs of a node; each rank gets its own"},
    {"cpus_per_task", S | L | P | F, KEY_INT, offsetof(vb_sweep_slurm, cpus_per_task), 1, 0, NULL, NULL, "C",
     "cores of each rank; OMP_NUM_THREADS unless --threads_per_rank"},
    {"time", S | L | P | F, KEY_TIME, FIELD(time), 0, NULL, NULL, "T",
     "a job's time limit in its scheduler's grammar (sbatch --time, bsub -W, walltime, flux -t)"},
    {"account", S | L | P, KEY_WORD, FIELD(account), 0, NULL, NULL, "A",
     "account / project: sbatch --account, bsub -P, qsub -A"},
    {"queue", L | P | F, KEY_WORD, FIELD(queue), 0, NULL, NULL, "Q", "queue: bsub -q, qsub -q, flux -q"},
    {"qos", S, KEY_WORD, FIELD(qos), 0, NULL, NULL, "Q", "sbatch --qos"},
    {"constraint", S, KEY_WORD, FIELD(constraint), 0, NULL, NULL, "C", "sbatch --constraint (Perlmutter: gpu or cpu)"},
    {"partition", S, KEY_WORD, FIELD(partition), 0, NULL, NULL, "P", "sbatch --partition"},
    {"reservation", S, KEY_WORD, FIELD(reservation), 0, NULL, NULL, "R", "sbatch --reservation"},
    {"gpu_bind", S, KEY_CHOICE, FIELD(gpu_bind), 0, "per_task|closest|none", NULL, "per_task|closest|none",
     "srun: --gpus-per-task=1 (default) or --gpu-bind=closest|none"},
    {"srun_mpi", S, KEY_WORD, FIELD(srun_mpi), 0, NULL, check_srun_mpi, "PLUGIN",
     "srun --mpi=PLUGIN (pmix for Open MPI builds; default: the site's MpiDefault)"},
    {"sbatch_extra", S, KEY_LINES, LIST(sbatch_extra), NULL, sweep_slurm_check_extra, "\"--opt=v\"",
     "one more #SBATCH line, repeatable (replaces the scenario's list)"},
    {"alloc_flags", L, KEY_WORD, FIELD(alloc_flags), 0, NULL, check_alloc_flags, "\"FLAGS\"",
     "bsub -alloc_flags \"FLAGS\" (Summit: \"gpumps smt4\")"},
    {"resource_set", L, KEY_CHOICE, FIELD(resource_set), 0, "per_task|per_node", NULL, "per_task|per_node",
     "jsrun: a resource set per rank (1 task, 1 GPU, cpus_per_task cores; default) or per node"},
    {"smpiargs", L, KEY_WORD, FIELD(smpiargs), 0, NULL, check_smpiargs, "\"ARGS\"",
     "jsrun --smpiargs=ARGS (Spectrum MPI's options, e.g. -disable_gpu_hooks)"},
    {"bsub_extra", L, KEY_LINES, LIST(bsub_extra), NULL, sweep_lsf_check_extra, "\"-opt v\"",
     "one more #BSUB line, repeatable (replaces the scenario's list)"},
    {"qsub_extra", P, KEY_LINES, LIST(qsub_extra), NULL, sweep_pbs_check_extra, "\"-l res=v\"",
     "one more #PBS line, repeatable (Polaris: \"-l filesystems=home:eagle\")"},
    {"flux_extra", F, KEY_LINES, LIST(flux_extra), NULL, sweep_flux_check_extra, "\"--opt=v\"",
     "one more # flux: line, repeatable (replaces the scenario's list)"},
    {"preamble", S | L | P | F, KEY_LINES, LIST(preamble), NULL, NULL, "\"LINE\"",
     "a shell line before the runs of every job script, repeatable (replaces the scenario's)"},
    {"sweep_job", S | L | P | F, KEY_BOOL, offsetof(vb_sweep_slurm, sweep_job), 0, 0, NULL, NULL, NULL,
     "batch launchers: one job at the largest node count runs every run in order"},
};
const int sweep_ncluster_keys = (int)(sizeof sweep_cluster_keys / sizeof sweep_cluster_keys[0]);

const sweep_cluster_key *sweep_cluster_key_find(const char *name) {
    for (int i = 0; i < sweep_ncluster_keys; i++)
        if (strcmp(sweep_cluster_keys[i].name, name) == 0) return &sweep_cluster_keys[i];
    return NULL;
}

static void push_line(char ***v, int *n, const char *line) {
    *v = vb_realloc_check(*v, (size_t)(*n + 1) * sizeof **v);
    (*v)[(*n)++] = vb_strdup_check(line);
}

/* A value that goes into a directive or a launcher line as one word: no
 * blanks, quotes, backslash or # (every scheduler would split, unquote or
 * cut it), nor $ or ` . Keys with a check of their own allow more. */
static bool plain_word(const char *v) {
    for (const char *c = v; *c; c++)
        if (!isgraph((unsigned char)*c) || strchr("'\"\\#$`", *c)) return false;
    return v[0] != '\0';
}

/* Is text a time limit in some scheduler's grammar? */
static bool time_somewhere(const char *text) {
    for (int k = 0; k < SCHED_COUNT; k++)
        if (sweep_schedulers[k] && sweep_schedulers[k]->time_ok(text)) return true;
    return false;
}

bool vb_sweep_slurm_set(vb_sweep_slurm *sl, const char *key, const char *value, const char *origin) {
    const sweep_cluster_key *k = sweep_cluster_key_find(key);
    if (!k) return false;
    sweep_refuse_line_break(origin, value); /* every one lands in a job script or a launcher line */
    char *field = (char *)sl + k->off;
    switch (k->type) {
    case KEY_INT: {
        int v;
        if (!sweep_parse_int(value, &v) || v < (int)k->size)
            vb_die_input("%s: %s '%s' is not an integer >= %d", origin, key, value, (int)k->size);
        *(int *)field = v;
        break;
    }
    case KEY_BOOL:
        if (!vb_flag_parse_bool(value, (bool *)field)) vb_die_input("%s: %s '%s' is not true or false", origin, key, value);
        break;
    case KEY_TIME:
        if (strlen(value) >= k->size || !time_somewhere(value))
            vb_die_input("%s: time '%s' is no scheduler's time limit (Slurm: minutes, M:S, H:M:S, D-H, D-H:M, "
                         "D-H:M:S; LSF: [H:]M; PBS: [H:]M:S; Flux: minutes or N[smhd]), e.g. 00:30:00",
                         origin, value);
        snprintf(field, k->size, "%s", value);
        break;
    case KEY_CHOICE: {
        size_t len = strlen(value);
        const char *c = strstr(k->choices, value);
        bool ok = len > 0 && c && (c == k->choices || c[-1] == '|') && (c[len] == '\0' || c[len] == '|');
        if (!ok) vb_die_input("%s: %s '%s' must be one of %s", origin, key, value, k->choices);
        snprintf(field, k->size, "%s", value);
        break;
    }
    case KEY_WORD:
        if (strlen(value) >= k->size)
            vb_die_input("%s: %s '%.60s...' is longer than %zu characters", origin, key, value, k->size - 1);
        if (k->check)
            k->check(value, origin);
        else if (!plain_word(value))
            vb_die_input("%s: %s '%s' must be one word of at most %zu printable characters (no blanks, quotes, #)",
                         origin, key, value, k->size - 1);
        snprintf(field, k->size, "%s", value);
        break;
    case KEY_LINES:
        if (k->check) k->check(value, origin);
        push_line((char ***)field, (int *)((char *)sl + k->count_off), value);
        break;
    }
    vb_sweep_kvs_set(&sl->given, key, origin);
    return true;
}

void sweep_cluster_clear_list(vb_sweep_slurm *sl, const char *key) {
    const sweep_cluster_key *k = sweep_cluster_key_find(key);
    if (!k || k->type != KEY_LINES) return;
    char ***v = (char ***)((char *)sl + k->off);
    int *n = (int *)((char *)sl + k->count_off);
    for (int i = 0; i < *n; i++) free((*v)[i]);
    *n = 0;
}

void vb_sweep_slurm_free(vb_sweep_slurm *sl) {
    for (int i = 0; i < sweep_ncluster_keys; i++) {
        const sweep_cluster_key *k = &sweep_cluster_keys[i];
        if (k->type != KEY_LINES) continue;
        sweep_cluster_clear_list(sl, k->name);
        free(*(char ***)((char *)sl + k->off));
    }
    vb_sweep_kvs_free(&sl->given);
    memset(sl, 0, sizeof *sl);
}

const char *sweep_key_origin(const vb_scenario *s, const char *key) {
    const char *o = vb_sweep_kvs_get(&s->slurm.given, key);
    return o ? o : "";
}

void sweep_cluster_check(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind k, int per_node) {
    const sweep_scheduler *sc = sweep_sched_of(k);
    if (!sc) return; /* mpirun: a cluster scenario tried on one machine; its keys wait for a scheduler */
    sched_kind sk = sweep_launchers[k].sched;
    for (int i = 0; i < s->slurm.given.n; i++) {
        const char *key = s->slurm.given.v[i].key, *origin = s->slurm.given.v[i].value;
        const sweep_cluster_key *ck = sweep_cluster_key_find(key);
        if (!ck || (ck->scheds & (1u << sk))) continue;
        char takes[600] = "";
        for (int j = 0; j < sweep_ncluster_keys; j++)
            if (sweep_cluster_keys[j].scheds & (1u << sk)) {
                if (takes[0]) strncat(takes, ", ", sizeof takes - strlen(takes) - 1);
                strncat(takes, sweep_cluster_keys[j].name, sizeof takes - strlen(takes) - 1);
            }
        vb_die_input("%s: %s is not one of %s's keys (--launcher %s); %s takes %s", origin, key, sc->name,
                     sweep_launchers[k].name, sc->name, takes);
    }
    /* the sbatch: mapping's other options are #SBATCH lines: nothing else reads them */
    if (s->sbatch.n > 0 && sk != SCHED_SLURM)
        vb_die_input("%s: sbatch.%s: the sbatch: mapping is Slurm's (--launcher %s); %s takes its own keys",
                     s->path, s->sbatch.v[0].key, sweep_launchers[k].name, sc->name);
    const char *t = s->slurm.time;
    if (t[0] && !sc->time_ok(t))
        vb_die_input("%s: time '%s' is not a time limit %s takes (%s)", sweep_key_origin(s, "time"), t, sc->name,
                     sc->time_form);
    sc->check(s, plan, k, per_node);
}
