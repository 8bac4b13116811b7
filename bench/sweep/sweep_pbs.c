/* sweep_pbs.c: PBS Pro / OpenPBS with Cray PALS's mpiexec, as on ALCF's
 * Polaris (4 A100 a node): `qsub script` around `mpiexec -n R --ppn P
 * --depth C --cpu-bind depth`.
 *
 * Contract: a job script's header holds -N (the job name: PBS takes at
 * most 236 characters and no digit first), -l select=N:ncpus=..:ngpus=..:
 * mpiprocs=P (one chunk a node), -l place=scatter, -l walltime, -A
 * (account), -q (queue), -j oe and -o (the job's output, copied there when
 * it ends) and the qsub_extra lines (Polaris wants -l filesystems=...). PBS
 * starts a job in the home directory: the script cd's to where the sweep
 * ran (PBS_O_WORKDIR is that directory too). qsub prints the job id
 * ("123.server"); `qstat -x -f 123.server` says job_state (F: finished,
 * with Exit_status), or "Unknown Job Id" once the server forgot it; `qdel`
 * cancels it. Inside a job PBS_JOBID is its id and PBS_NODEFILE lists its
 * hosts, one line per MPI process (mpiprocs).
 */
#include "bench/sweep/sweep_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* walltime: [[hours:]minutes:]seconds. A bare number is seconds to PBS,
 * which no benchmark job means (minutes to Slurm, LSF and Flux): at least
 * M:S is asked for. */
static bool pbs_time_ok(const char *text) {
    long f[3], total = 0;
    int nf = 0;
    const char *p = text;
    for (;;) {
        const char *start = p;
        long v = 0;
        while (isdigit((unsigned char)*p) && p - start < 7) v = v * 10 + (*p++ - '0');
        if (p == start || nf == 3) return false;
        f[nf++] = v;
        if (!*p) break;
        if (*p++ != ':') return false;
    }
    if (nf < 2) return false;
    for (int i = 1; i < nf; i++)
        if (f[i] > 59) return false;
    for (int i = 0; i < nf; i++) total = total * 60 + f[i];
    return total > 0;
}

/* Resources of -l the sweep sets (select's chunk, place, walltime and
 * their old per-job forms), and the key that sets each. */
static const struct {
    const char *res, *key;
} k_owned_res[] = {{"select", "nodes / gpus_per_node / cpus_per_task"}, {"place", NULL}, {"walltime", "time"},
                   {"nodes", "nodes / ranks_per_node"}, {"ncpus", "cpus_per_task"}, {"ngpus", "gpus_per_node"},
                   {"mpiprocs", "ranks_per_node"}};

/* qsub options the sweep writes (single letters, the value joined or next). */
static const struct {
    char opt;
    const char *key;
} k_owned[] = {{'N', NULL}, {'o', NULL}, {'e', NULL}, {'j', NULL}, {'A', "account"}, {'q', "queue"}};

static void pbs_owned(const char *word, const char *prev, const char *line, const char *key, const char *origin) {
    const char *res = NULL;
    if (word[0] == '-' && isalpha((unsigned char)word[1])) {
        for (size_t i = 0; i < sizeof k_owned / sizeof k_owned[0]; i++) {
            if (word[1] != k_owned[i].opt) continue;
            if (k_owned[i].key)
                vb_die_input("%s: %s '%s': -%c is set by the key / flag %s instead", origin, key, line, word[1],
                             k_owned[i].key);
            vb_die_input("%s: %s '%s': -%c is set by the sweep (job name and output of every job)", origin, key, line,
                         word[1]);
        }
        if (word[1] == 'l' && word[2]) res = word + 2;
    } else if (strcmp(prev, "-l") == 0) {
        res = word;
    }
    /* -l takes a comma-separated list of resource=value */
    for (const char *r = res; r && *r;) {
        size_t len = strcspn(r, "=,");
        for (size_t i = 0; i < sizeof k_owned_res / sizeof k_owned_res[0]; i++) {
            if (strlen(k_owned_res[i].res) != len || strncmp(r, k_owned_res[i].res, len) != 0) continue;
            if (k_owned_res[i].key)
                vb_die_input("%s: %s '%s': -l %s is set by the key / flag %s instead", origin, key, line,
                             k_owned_res[i].res, k_owned_res[i].key);
            vb_die_input("%s: %s '%s': -l %s is set by the sweep (one chunk a node)", origin, key, line,
                         k_owned_res[i].res);
        }
        const char *comma = strchr(r, ',');
        r = comma ? comma + 1 : NULL;
    }
}

void sweep_pbs_check_extra(const char *line, const char *origin) {
    sweep_check_directive_line(line, "qsub_extra", origin, pbs_owned);
}

/* The jobs' log directory as qsub reads -o: [host:]path, so no colon, and
 * words split at blanks; no quotes, backslash, $, ` or # either. */
static void pbs_check_log_dir(const char *origin, const char *path) {
    sweep_refuse_chars(origin, path, " \t:\"'\\$`#",
                       "qsub cannot read back from #PBS -o (a colon starts [host:]path, a blank ends the path; quotes, "
                       "backslash, $, ` and # do not survive)");
}

static void pbs_check(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind k, int per_node) {
    /* -N: "<name>_NNN" or "<name>_sweep", at most 64 + 6 characters */
    if (sweep_launchers[k].batch && isdigit((unsigned char)s->name[0]))
        vb_die_input("%s: name '%s': PBS job names (qsub -N, <name>_NNN) cannot start with a digit; rename the scenario",
                     s->path, s->name);
    for (int i = 0; i < plan->nruns && sweep_launchers[k].batch; i++)
        if (sweep_nodes_of(s, per_node, plan->runs[i].ranks) == 0)
            vb_die_input("%s: qsub needs every job's chunks (-l select=N, one a node): set ranks_per_node or nodes "
                         "(key or flag); run %s has neither", s->path, plan->runs[i].name);
}

static void pbs_header(FILE *f, const sweep_job_ctx *j, const char *job_name, const sweep_shape *sh,
                       const char *log_abs) {
    const vb_sweep_slurm *sl = &j->s->slurm;
    fprintf(f, "#!/bin/bash\n");
    fprintf(f, "#PBS -N %.236s\n", job_name);
    /* one chunk a node: its MPI processes (PBS_NODEFILE lists the host that
     * many times), their cores, the node's GPUs */
    fprintf(f, "#PBS -l select=%d", sh->nodes);
    if (sl->cpus_per_task > 0) fprintf(f, ":ncpus=%d", sl->cpus_per_task * sh->tpn);
    if (sl->gpus_per_node > 0) fprintf(f, ":ngpus=%d", sl->gpus_per_node);
    fprintf(f, ":mpiprocs=%d\n", sh->tpn);
    fprintf(f, "#PBS -l place=scatter\n");
    if (sl->time[0]) fprintf(f, "#PBS -l walltime=%s\n", sl->time);
    if (sl->account[0]) fprintf(f, "#PBS -A %s\n", sl->account);
    if (sl->queue[0]) fprintf(f, "#PBS -q %s\n", sl->queue);
    fprintf(f, "#PBS -j oe\n#PBS -o %s\n", log_abs); /* pbs_check_log_dir: one plain word */
    for (int i = 0; i < sl->nqsub_extra; i++) fprintf(f, "#PBS %s\n", sl->qsub_extra[i]);
}

/* Cray PALS (HPE's mpiexec on Polaris and Aurora): ranks per node, and
 * with cpus_per_task each rank on that many consecutive cores, its OpenMP
 * threads bound inside them. The trainer picks its GPU by its rank on the
 * node, so all the node's GPUs may stay visible. */
void sweep_build_mpiexec(sweep_strvec *a, const vb_scenario *s, int ranks, int per_node, const sweep_strvec *extra) {
    (void)extra;
    sweep_sv_push(a, "mpiexec");
    sweep_sv_push(a, "-n");
    sweep_sv_pushf(a, "%d", ranks);
    int tpn = sweep_tasks_per_node(s, per_node, ranks);
    if (tpn > 0) {
        sweep_sv_push(a, "--ppn");
        sweep_sv_pushf(a, "%d", tpn);
    }
    if (s->slurm.cpus_per_task > 0) {
        sweep_sv_push(a, "--depth");
        sweep_sv_pushf(a, "%d", s->slurm.cpus_per_task);
        sweep_sv_push(a, "--cpu-bind");
        sweep_sv_push(a, "depth");
    }
}

/* qsub prints the id alone: "123.server" (an array job: "123[].server"). */
static bool pbs_job_id(const char *line, char *id, size_t n) {
    size_t k = 0;
    if (!isdigit((unsigned char)line[0])) return false;
    while (line[k] && (isalnum((unsigned char)line[k]) || strchr("._-[]", line[k]))) k++;
    const char *rest = line + k;
    while (*rest == '\r' || *rest == '\n' || *rest == ' ') rest++;
    if (*rest || k >= n) return false;
    snprintf(id, n, "%.*s", (int)k, line);
    return true;
}

/* A PBS job id: the job number, an array's "[]" or subjob's "[4]", then
 * ".server" (a host name: letters, digits, '.', '-', '_'). */
static bool pbs_id_ok(const char *s) {
    size_t k = sweep_job_number(s);
    if (!k) return false;
    if (s[k] == '[') {
        size_t d = 0;
        while (isdigit((unsigned char)s[k + 1 + d]) && d < 10) d++;
        if (s[k + 1 + d] != ']') return false;
        k += d + 2;
    }
    if (!s[k]) return true;
    if (s[k] != '.' || !isalnum((unsigned char)s[k + 1])) return false;
    for (const char *c = s + k + 1; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr(".-_", *c)) return false;
    return strlen(s) < 128;
}

/* qstat -x -f: job_state F (finished) or X (a subjob ended) is over, with
 * Exit_status; "Unknown Job Id" (no history kept) is over too. */
static int pbs_job_state(sweep_jobq *q, const sweep_tree *t, const char *id, char *state, size_t n) {
    (void)q;
    char *argv[] = {"qstat", "-x", "-f", (char *)id, NULL};
    int rc;
    char *text = sweep_ask(t, argv, &rc);
    int over = -1;
    const char *js = text ? strstr(text, "job_state = ") : NULL;
    char st = js ? js[strlen("job_state = ")] : 0;
    if (text && strstr(text, "Unknown Job Id")) {
        over = 1;
    } else if (rc == 0 && st) {
        over = st == 'F' || st == 'X';
        const char *ex = strstr(text, "Exit_status = ");
        if (over) snprintf(state, n, "%c%s%.8s", st, ex ? ", exit status " : "", ex ? ex + strlen("Exit_status = ") : "");
        state[strcspn(state, "\r\n")] = '\0';
    }
    free(text);
    return over;
}

/* The hosts of the job: PBS_NODEFILE, a line per MPI process. */
static int pbs_alloc_nodes(void) {
    const char *path = getenv("PBS_NODEFILE");
    char *text = path ? vb_read_file(path, NULL) : NULL;
    if (!text) return -1;
    sweep_strvec hosts = {0};
    for (char *l = strtok(text, "\r\n"); l; l = strtok(NULL, "\r\n")) {
        bool seen = false;
        for (int j = 0; j < hosts.n && !seen; j++) seen = strcmp(hosts.v[j], l) == 0;
        if (!seen) sweep_sv_push(&hosts, l);
    }
    int n = hosts.n;
    sweep_sv_free(&hosts);
    free(text);
    return n > 0 ? n : -1;
}

static const char *const pbs_submit[] = {"qsub", NULL};
static const char *const pbs_cancel[] = {"qdel", NULL};

const sweep_scheduler sweep_sched_pbs = {
    .name = "PBS",
    .id = "pbs",
    .script_ext = "pbs",
    .job_log_is_run_log = false, /* PBS copies a job's output to -o when it ends */
    .time_form = "[hours:]minutes:seconds as -l walltime takes it, e.g. 00:30:00 or 30:00",
    .time_ok = pbs_time_ok,
    .check = pbs_check,
    .check_log_dir = pbs_check_log_dir,
    .header = pbs_header,
    .job_id_sh = "${PBS_JOBID:-}",
    .hosts_sh = "awk '!seen[$0]++' \"$PBS_NODEFILE\"",
    .submit = pbs_submit,
    .submit_stdin = false,
    .job_id = pbs_job_id,
    .id_ok = pbs_id_ok,
    .job_state = pbs_job_state,
    .cancel = pbs_cancel,
    .alloc_env = "PBS_JOBID",
    .alloc_nodes = pbs_alloc_nodes,
};
