/* sweep_flux.c: Flux (LLNL's resource manager; a Flux instance may also
 * run inside a Slurm or LSF allocation): `flux batch script` around `flux
 * run`.
 *
 * Contract: a job script's header is a block of "# flux:" submission
 * directives (RFC 36: one sentinel for all, grouped at the top, split with
 * shell quoting, # starts a comment) holding --job-name, -N (every node
 * exclusively) or, without a node count, -n slots with -c cores and -g GPUs
 * each, -t (minutes or a Flux standard duration: 30m, 2h), -q (queue),
 * --output (the job's output; Flux expands {{...}} there, so the path holds
 * no braces) and the flux_extra lines. Runs start with `flux run -n R [-N
 * nodes] [-c C] [-g 1]` with each task bound to its cores and GPU (the
 * shell's cpu-affinity / gpu-affinity per-task). flux batch prints the job
 * id (F58: ƒ followed by base58, or f in an ASCII locale); `flux jobs -n -o
 * {status} ID` says DEPEND .. RUN, CLEANUP, or the result COMPLETED, FAILED,
 * CANCELED, TIMEOUT; `flux cancel ID` cancels it. Inside a job FLUX_JOB_ID
 * is its id and `flux hostlist -l` its hosts.
 */
#include "bench/sweep/sweep_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* -t: minutes, or a Flux standard duration (RFC 23): a number with one of
 * the units s, m, h, d; positive. */
static bool flux_time_ok(const char *text) {
    const char *p = text;
    double v = 0, scale = 1;
    bool digits = false, dot = false;
    for (; *p && (isdigit((unsigned char)*p) || *p == '.'); p++) {
        if (*p == '.') {
            if (dot) return false;
            dot = true;
            continue;
        }
        digits = true;
        if (dot)
            v += (*p - '0') * (scale /= 10);
        else
            v = v * 10 + (*p - '0');
        if (v > 1e9) return false;
    }
    if (!digits) return false;
    if (*p && (!strchr("smhd", *p) || p[1])) return false;
    return v > 0;
}

/* flux batch options the sweep writes, long and short spellings, and the
 * key that sets each. (-o is --setopt, a shell option: left to the user.) */
static const struct {
    const char *opt, *key;
} k_owned[] = {{"--job-name", NULL},       {"--output", NULL},   {"--error", NULL},   {"-N", "nodes / ranks_per_node"},
               {"--nodes", "nodes / ranks_per_node"}, {"-n", "ranks"}, {"--nslots", "ranks"},
               {"-c", "cpus_per_task"},    {"--cores-per-slot", "cpus_per_task"}, {"-g", "gpus_per_node"},
               {"--gpus-per-slot", "gpus_per_node"}, {"-x", NULL},    {"--exclusive", NULL}, {"-t", "time"},
               {"--time-limit", "time"},   {"-q", "queue"},      {"--queue", "queue"}};

static void flux_owned(const char *word, const char *prev, const char *line, const char *key, const char *origin) {
    (void)prev;
    if (word[0] != '-') return;
    bool dashes = word[1] == '-';
    /* --name=value; -Nvalue is -N with its value */
    size_t len = dashes ? strcspn(word, "=") : 2;
    for (size_t i = 0; i < sizeof k_owned / sizeof k_owned[0]; i++) {
        if (strlen(k_owned[i].opt) != len || strncmp(word, k_owned[i].opt, len) != 0) continue;
        if (k_owned[i].key)
            vb_die_input("%s: %s '%s': %s is set by the key / flag %s instead", origin, key, line, k_owned[i].opt,
                         k_owned[i].key);
        vb_die_input("%s: %s '%s': %s is set by the sweep (name, output and nodes of every job)", origin, key, line,
                     k_owned[i].opt);
    }
}

void sweep_flux_check_extra(const char *line, const char *origin) {
    sweep_check_directive_line(line, "flux_extra", origin, flux_owned);
}

/* The jobs' log directory in --output: a mustache template to Flux, so no
 * braces; written in single quotes, so no quote of either kind (three in a
 * row open a triple-quoted string in a directive). */
static void flux_check_log_dir(const char *origin, const char *path) {
    sweep_refuse_chars(origin, path, "{}'\"",
                       "flux batch cannot read back from --output (Flux expands {{...}} there; quotes would need "
                       "its triple-quote rules)");
}

static void flux_check(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind k, int per_node) {
    (void)s, (void)plan, (void)k, (void)per_node;
}

/* One word of a directive, in single quotes when it is not plain
 * (shell quoting, as RFC 36 reads directives). */
static void put_flux_word(FILE *f, const char *v) {
    bool plain = v[0] != '\0';
    for (const char *c = v; *c; c++)
        if (!isgraph((unsigned char)*c) || strchr("\"'\\#$`", *c)) plain = false;
    if (plain)
        fputs(v, f);
    else
        fprintf(f, "'%s'", v); /* flux_check_log_dir: no quote inside */
}

static void flux_header(FILE *f, const sweep_job_ctx *j, const char *job_name, const sweep_shape *sh,
                        const char *log_abs) {
    const vb_sweep_slurm *sl = &j->s->slurm;
    fprintf(f, "#!/bin/bash\n");
    fprintf(f, "# flux: --job-name=%s\n", job_name);
    if (sh->nodes > 0) {
        fprintf(f, "# flux: -N %d\n# flux: --exclusive\n", sh->nodes); /* whole nodes, their cores and GPUs */
    } else {
        fprintf(f, "# flux: -n %d\n", sh->ntasks);
        if (sl->cpus_per_task > 0) fprintf(f, "# flux: -c %d\n", sl->cpus_per_task);
        if (sl->gpus_per_node > 0) fprintf(f, "# flux: -g 1\n");
    }
    if (sl->time[0]) fprintf(f, "# flux: -t %s\n", sl->time);
    if (sl->queue[0]) fprintf(f, "# flux: -q %s\n", sl->queue);
    fprintf(f, "# flux: --output=");
    put_flux_word(f, log_abs);
    fputc('\n', f);
    for (int i = 0; i < sl->nflux_extra; i++) fprintf(f, "# flux: %s\n", sl->flux_extra[i]);
}

void sweep_build_flux_run(sweep_strvec *a, const vb_scenario *s, int ranks, int per_node, const sweep_strvec *extra) {
    (void)extra;
    const vb_sweep_slurm *sl = &s->slurm;
    sweep_sv_push(a, "flux");
    sweep_sv_push(a, "run");
    sweep_sv_pushf(a, "-n%d", ranks);
    int nodes = sweep_nodes_of(s, per_node, ranks);
    if (nodes > 0) sweep_sv_pushf(a, "-N%d", nodes);
    if (sl->cpus_per_task > 0) sweep_sv_pushf(a, "-c%d", sl->cpus_per_task);
    if (sl->gpus_per_node > 0) sweep_sv_push(a, "-g1");
    /* each task on its own cores (and GPU: it sees only its own, device 0) */
    sweep_sv_push(a, "-o");
    sweep_sv_push(a, "cpu-affinity=per-task");
    if (sl->gpus_per_node > 0) {
        sweep_sv_push(a, "-o");
        sweep_sv_push(a, "gpu-affinity=per-task");
    }
}

/* flux batch prints the id alone on a line. */
static bool flux_job_id(const char *line, char *id, size_t n) {
    size_t k = strcspn(line, " \t\r\n");
    const char *rest = line + k;
    while (*rest == '\r' || *rest == '\n' || *rest == ' ' || *rest == '\t') rest++;
    if (k == 0 || k >= n || *rest) return false;
    /* F58 (ƒ or f, then base58), or decimal */
    if (!((unsigned char)line[0] == 0xC6 || line[0] == 'f' || isdigit((unsigned char)line[0]))) return false;
    snprintf(id, n, "%.*s", (int)k, line);
    return true;
}

/* A Flux job id: F58 (ƒ, or f in an ASCII locale, then base58 digits:
 * no 0, O, I or l) or the decimal job number. */
static bool flux_id_ok(const char *s) {
    if (sweep_job_number(s) && !s[sweep_job_number(s)]) return true;
    const char *p = (unsigned char)s[0] == 0xC6 && (unsigned char)s[1] == 0x92 ? s + 2 : s[0] == 'f' ? s + 1 : NULL;
    if (!p || !*p || strlen(p) > 16) return false;
    for (; *p; p++)
        if (!isalnum((unsigned char)*p) || strchr("0OIl", *p)) return false;
    return true;
}

static int flux_job_state(sweep_jobq *q, const sweep_tree *t, const char *id, char *state, size_t n) {
    (void)q;
    char *argv[] = {"flux", "jobs", "-n", "-o", "{status}", (char *)id, NULL};
    int rc;
    char *text = sweep_ask(t, argv, &rc);
    char word[32] = "";
    int over = -1;
    if (rc == 0 && text && sscanf(text, "%31s", word) == 1) {
        static const char *const done[] = {"COMPLETED", "FAILED", "CANCELED", "TIMEOUT", "INACTIVE"};
        over = 0;
        for (size_t i = 0; i < sizeof done / sizeof *done; i++)
            if (strcmp(word, done[i]) == 0) over = 1;
        if (over) snprintf(state, n, "%s", word);
    }
    free(text);
    return over;
}

static int flux_alloc_nodes(void) { return -1; /* asked of the instance, not read from the environment */ }

static const char *const flux_submit[] = {"flux", "batch", NULL};
static const char *const flux_cancel[] = {"flux", "cancel", NULL};

const sweep_scheduler sweep_sched_flux = {
    .name = "Flux",
    .id = "flux",
    .script_ext = "flux",
    .job_log_is_run_log = false,
    .time_form = "minutes or a Flux standard duration, e.g. 30, 30m, 1.5h",
    .time_ok = flux_time_ok,
    .check = flux_check,
    .check_log_dir = flux_check_log_dir,
    .header = flux_header,
    .job_id_sh = "${FLUX_JOB_ID:-}",
    .hosts_sh = "flux hostlist -l -e | tr ' ' '\\n'",
    .submit = flux_submit,
    .submit_stdin = false,
    .job_id = flux_job_id,
    .id_ok = flux_id_ok,
    .job_state = flux_job_state,
    .cancel = flux_cancel,
    .alloc_env = "FLUX_JOB_ID",
    .alloc_nodes = flux_alloc_nodes,
};
