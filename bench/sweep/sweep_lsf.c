/* sweep_lsf.c: IBM Spectrum LSF with jsrun (CSM systems: Summit, Sierra,
 * Lassen), as the SC22 tutorial ran on Summit: `bsub -P <project> -W 2:00
 * -nnodes N -alloc_flags "gpumps smt4" -q debug` around `jsrun`.
 *
 * Contract: a job script is submitted as `bsub < script` (bsub reads the
 * #BSUB lines of its standard input; a script named as an argument needs
 * LSB_BSUB_PARSE_SCRIPT=Y at the site). Its header holds -J, -nnodes, -W,
 * -P (account), -q (queue), -alloc_flags (always in double quotes), -o (the
 * job's output, stderr too since there is no -e) and the bsub_extra lines.
 * Runs start with jsrun in resource sets: by default one per rank with 1
 * task, 1 GPU and cpus_per_task cores (7 unless given: Summit's 42 cores
 * over 6 GPUs), bound to them (--bind=packed:C); resource_set: per_node gives
 * one set per node holding its ranks and all its GPUs, as the tutorial's
 * submit_summit.sh did (every rank then picks its GPU by its local rank).
 * bsub prints "Job <123> is submitted to queue <q>."; `bjobs -a -noheader
 * -o stat 123` says PEND / RUN / ... / DONE / EXIT, or that the job is not
 * found once LSF forgot it; `bkill 123` cancels it. Inside a job LSB_JOBID
 * is its id and LSB_DJOB_HOSTFILE lists its hosts, the launch node first
 * (it runs the script, not the ranks).
 */
#include "bench/sweep/sweep_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* bsub -W's run limit: [hour:]minute, the minutes below 60 once hours are
 * given (LSF: "-W [hour:]minute[/host_name | /host_model]"; the host forms
 * scale the limit by a CPU factor and are left out). */
static bool lsf_time_ok(const char *text) {
    const char *colon = strchr(text, ':');
    long h = 0, m = 0;
    const char *p = text;
    if (colon) {
        if (colon == text || colon - text > 6) return false;
        for (; p < colon; p++) {
            if (!isdigit((unsigned char)*p)) return false;
            h = h * 10 + (*p - '0');
        }
        p++;
    }
    const char *start = p;
    for (; *p; p++) {
        if (!isdigit((unsigned char)*p) || p - start > 6) return false;
        m = m * 10 + (*p - '0');
    }
    if (p == start || (colon && (m > 59 || p - start > 2))) return false;
    return h * 60 + m > 0;
}

/* #BSUB options the sweep writes, and the key that sets each. */
static const struct {
    const char *opt, *key;
} k_owned[] = {{"-J", NULL},          {"-o", NULL},          {"-oo", NULL},           {"-e", NULL},
               {"-eo", NULL},         {"-nnodes", "nodes / ranks_per_node"}, {"-n", "ranks / nodes"},
               {"-W", "time"},        {"-P", "account"},     {"-q", "queue"},         {"-alloc_flags", "alloc_flags"},
               {"-cwd", NULL}};

static void lsf_owned(const char *word, const char *prev, const char *line, const char *key, const char *origin) {
    (void)prev;
    for (size_t i = 0; i < sizeof k_owned / sizeof k_owned[0]; i++) {
        if (strcmp(word, k_owned[i].opt) != 0) continue;
        if (k_owned[i].key)
            vb_die_input("%s: %s '%s': %s is set by the key / flag %s instead", origin, key, line, word, k_owned[i].key);
        vb_die_input("%s: %s '%s': %s is set by the sweep (job name, log and directory of every job)", origin, key, line,
                     word);
    }
}

void sweep_lsf_check_extra(const char *line, const char *origin) {
    sweep_check_directive_line(line, "bsub_extra", origin, lsf_owned);
}

/* The jobs' log directory as bsub reads -o: the path goes in double quotes
 * (blanks are kept), so no quote, backslash, $ or ` may be in it, nor a #;
 * LSF expands %J and %I in it and has no way to write a literal %. */
static void lsf_check_log_dir(const char *origin, const char *path) {
    sweep_refuse_chars(origin, path, "\"'\\$`#%", "bsub cannot read back from #BSUB -o (LSF expands %J and %I there "
                                                 "and has no literal %; quotes, backslash, $, ` and # do not survive)");
}

static void lsf_check(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind k, int per_node) {
    const bool per_node_sets = strcmp(s->slurm.resource_set, "per_node") == 0;
    for (int i = 0; i < plan->nruns; i++) {
        int nodes = sweep_nodes_of(s, per_node, plan->runs[i].ranks);
        if (nodes > 0) continue;
        if (sweep_launchers[k].batch)
            vb_die_input("%s: bsub needs every job's node count (-nnodes): set ranks_per_node or nodes (key or flag); "
                         "run %s has neither", s->path, plan->runs[i].name);
        if (per_node_sets)
            vb_die_input("%s: resource_set per_node needs ranks_per_node or nodes (the ranks of one node's set); run "
                         "%s has neither", sweep_key_origin(s, "resource_set"), plan->runs[i].name);
    }
}

static void lsf_header(FILE *f, const sweep_job_ctx *j, const char *job_name, const sweep_shape *sh,
                       const char *log_abs) {
    const vb_sweep_slurm *sl = &j->s->slurm;
    fprintf(f, "#!/bin/bash\n");
    fprintf(f, "#BSUB -J %s\n", job_name);
    fprintf(f, "#BSUB -nnodes %d\n", sh->nodes);
    if (sl->time[0]) fprintf(f, "#BSUB -W %s\n", sl->time);
    if (sl->account[0]) fprintf(f, "#BSUB -P %s\n", sl->account);
    if (sl->queue[0]) fprintf(f, "#BSUB -q %s\n", sl->queue);
    if (sl->alloc_flags[0]) fprintf(f, "#BSUB -alloc_flags \"%s\"\n", sl->alloc_flags);
    fprintf(f, "#BSUB -o ");
    sweep_put_directive_word(f, log_abs);
    fputc('\n', f);
    /* the user's own lines, as given: sweep_lsf_check_extra read them */
    for (int i = 0; i < sl->nbsub_extra; i++) fprintf(f, "#BSUB %s\n", sl->bsub_extra[i]);
}

void sweep_build_jsrun(sweep_strvec *a, const vb_scenario *s, int ranks, int per_node, const sweep_strvec *extra) {
    (void)extra;
    const vb_sweep_slurm *sl = &s->slurm;
    const int cores = sweep_cpus_per_task(s, LAUNCH_JSRUN);
    const int nodes = sweep_nodes_of(s, per_node, ranks), tpn = sweep_tasks_per_node(s, per_node, ranks);
    sweep_sv_push(a, "jsrun");
    if (strcmp(sl->resource_set, "per_node") == 0 && nodes > 0) {
        /* one set a node: its ranks, their cores, all its GPUs */
        sweep_sv_pushf(a, "-n%d", nodes);
        sweep_sv_pushf(a, "-a%d", tpn);
        sweep_sv_pushf(a, "-c%d", tpn * cores);
        if (sl->gpus_per_node > 0) sweep_sv_pushf(a, "-g%d", sl->gpus_per_node);
        sweep_sv_push(a, "-r1");
    } else {
        /* one set a rank: 1 task, 1 GPU (it sees only its own: device 0), its cores */
        sweep_sv_pushf(a, "-n%d", ranks);
        sweep_sv_push(a, "-a1");
        sweep_sv_pushf(a, "-c%d", cores);
        if (sl->gpus_per_node > 0) sweep_sv_push(a, "-g1");
        if (tpn > 0) sweep_sv_pushf(a, "-r%d", tpn);
    }
    /* each rank bound to its cores: its OpenMP threads stay on them */
    sweep_sv_pushf(a, "--bind=packed:%d", cores);
    sweep_sv_push(a, "--launch_distribution=packed");
    if (sl->smpiargs[0]) sweep_sv_pushf(a, "--smpiargs=%s", sl->smpiargs);
}

/* "Job <123> is submitted to queue <debug>." */
static bool lsf_job_id(const char *line, char *id, size_t n) {
    const char *p = strstr(line, "Job <");
    if (!p) return false;
    p += 5;
    size_t k = 0;
    while (isdigit((unsigned char)p[k])) k++;
    if (k == 0 || k >= n || p[k] != '>') return false;
    snprintf(id, n, "%.*s", (int)k, p);
    return true;
}

/* An LSF job id: the job number, or an array element's ("123[4]"). */
static bool lsf_id_ok(const char *s) {
    size_t k = sweep_job_number(s);
    if (!k) return false;
    if (!s[k]) return true;
    if (s[k] != '[') return false;
    size_t d = 0;
    while (isdigit((unsigned char)s[k + 1 + d]) && d < 10) d++;
    return d > 0 && s[k + 1 + d] == ']' && !s[k + 2 + d];
}

/* bjobs of the one job: DONE or EXIT (or forgotten: "is not found") is
 * over; PEND, RUN, the suspended states and the rest are not. */
static int lsf_job_state(sweep_jobq *q, const sweep_tree *t, const char *id, char *state, size_t n) {
    (void)q;
    char *argv[] = {"bjobs", "-a", "-noheader", "-o", "stat", (char *)id, NULL};
    int rc;
    char *text = sweep_ask(t, argv, &rc);
    int over = -1;
    char word[32] = "";
    if (text && strstr(text, "is not found")) {
        over = 1;
    } else if (rc == 0 && text && sscanf(text, "%31s", word) == 1) {
        over = strcmp(word, "DONE") == 0 || strcmp(word, "EXIT") == 0;
        if (over) snprintf(state, n, "%s", word);
    }
    free(text);
    return over;
}

/* The hosts of the job (LSB_DJOB_HOSTFILE: one line a slot, the launch node
 * first; else LSB_MCPU_HOSTS "host slots host slots"), the launch node left
 * out when there are others: it runs the script, jsrun's ranks run on the rest. */
static int lsf_alloc_nodes(void) {
    const char *path = getenv("LSB_DJOB_HOSTFILE");
    char *text = path ? vb_read_file(path, NULL) : NULL;
    sweep_strvec hosts = {0};
    if (text) {
        for (char *l = strtok(text, "\r\n"); l; l = strtok(NULL, "\r\n"))
            sweep_sv_push(&hosts, l);
    } else if (getenv("LSB_MCPU_HOSTS")) {
        text = vb_strdup_check(getenv("LSB_MCPU_HOSTS"));
        int k = 0;
        for (char *w = strtok(text, " \t"); w; w = strtok(NULL, " \t"), k++)
            if (k % 2 == 0) sweep_sv_push(&hosts, w);
    }
    int unique = 0;
    for (int i = 0; i < hosts.n; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = strcmp(hosts.v[i], hosts.v[j]) == 0;
        unique += !seen;
    }
    free(text);
    sweep_sv_free(&hosts);
    return unique > 1 ? unique - 1 : unique > 0 ? 1 : -1;
}

static const char *const lsf_submit[] = {"bsub", NULL};
static const char *const lsf_cancel[] = {"bkill", NULL};

const sweep_scheduler sweep_sched_lsf = {
    .name = "LSF",
    .id = "lsf",
    .script_ext = "lsf",
    .job_log_is_run_log = false, /* LSF copies a job's output to -o when it ends */
    .time_form = "[hour:]minute as bsub -W takes it, e.g. 0:30, 2:00 or 90",
    .time_ok = lsf_time_ok,
    .check = lsf_check,
    .check_log_dir = lsf_check_log_dir,
    .header = lsf_header,
    .job_id_sh = "${LSB_JOBID:-}",
    .hosts_sh = "if [ -r \"${LSB_DJOB_HOSTFILE:-}\" ]; then awk '!seen[$0]++' \"$LSB_DJOB_HOSTFILE\"; "
                "else printf '%s\\n' ${LSB_MCPU_HOSTS:-} | awk 'NR % 2'; fi",
    .submit = lsf_submit,
    .submit_stdin = true,
    .job_id = lsf_job_id,
    .id_ok = lsf_id_ok,
    .job_state = lsf_job_state,
    .cancel = lsf_cancel,
    .alloc_env = "LSB_JOBID",
    .alloc_nodes = lsf_alloc_nodes,
};
