/* sweep_slurm.c: what a sweep needs to run on a Slurm cluster as written,
 * and the job scripts' body that every scheduler shares.
 *
 * Contract: sweep_slurm_check checks the scheduler keys against the plan
 * before anything is created (the shape every scheduler shares, then the
 * launcher's scheduler's own rules). srun lines get the allocation's shape
 * and the binding a benchmark needs (cores per task, one GPU per task: the
 * trainer uses device 0 of the GPUs it sees); #SBATCH values are written
 * as sbatch reads them back. Job scripts (one per run, or one sweep job for
 * all; the header is their scheduler's) run every run through run_point,
 * which records the job's id and hosts and the run's exit status in
 * status/<run>.{job,hosts,exit} and has `vitbench sweep --collect` put it
 * into index.csv. sbatch's job ids and squeue / sacct's answers about them
 * are the Slurm entry of the scheduler table (sweep_sched_slurm).
 */
#include "bench/sweep/sweep_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config/cli.h"

/* Slurm's time limit formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; every
 * field digits, the ones after the first below their unit's wrap. */
bool vb_sweep_slurm_time_ok(const char *text) {
    const char *p = text, *dash = strchr(text, '-');
    int fields[4], nf = 0;
    bool days = dash != NULL;
    if (days) {
        if (dash == p) return false;
        for (const char *c = p; c < dash; c++)
            if (!isdigit((unsigned char)*c)) return false;
        if (dash - p > 4) return false;
        p = dash + 1;
    }
    for (;;) {
        const char *start = p;
        long v = 0;
        while (isdigit((unsigned char)*p)) {
            v = v * 10 + (*p - '0');
            if (v > 1000000) return false;
            p++;
        }
        if (p == start || nf == 3) return false;
        fields[nf++] = (int)v;
        if (*p == '\0') break;
        if (*p != ':') return false;
        p++;
    }
    if (days) {
        /* D-H, D-H:M, D-H:M:S */
        if (fields[0] > 23) return false;
        for (int i = 1; i < nf; i++)
            if (fields[i] > 59) return false;
        return true;
    }
    /* M, M:S, H:M:S: the first field may be any size, the others wrap at 60 */
    for (int i = 1; i < nf; i++)
        if (fields[i] > 59) return false;
    long total = 0;
    for (int i = 0; i < nf; i++) total += fields[i];
    return total > 0;
}

/* The string keys that become the #SBATCH options of their own names, in
 * the order the job script writes them, with sbatch's one-letter form (NULL:
 * none). Their type and check are sweep_cluster.c's. */
static const struct {
    const char *key, *letter;
} k_sbatch_keys[] = {{"time", "t"},       {"account", "A"},   {"qos", "q"},
                     {"constraint", "C"}, {"partition", "p"}, {"reservation", NULL}};
enum { NSBATCH_KEYS = sizeof k_sbatch_keys / sizeof k_sbatch_keys[0] };

/* A k_sbatch_keys key's value in sl ("" when unset). */
static const char *sbatch_key_value(const vb_sweep_slurm *sl, const char *key) {
    const sweep_cluster_key *k = sweep_cluster_key_find(key);
    if (!k || k->type == KEY_LINES || k->type == KEY_INT || k->type == KEY_BOOL)
        vb_die_internal("sweep_slurm: '%s' is not a string key", key);
    return (const char *)sl + k->off;
}

/* The other #SBATCH options the sweep writes itself, and the key that sets
 * each (NULL: the sweep alone). */
static const struct {
    const char *opt, *key;
} k_owned[] = {{"job-name", NULL},      {"J", NULL},
               {"output", NULL},        {"o", NULL},
               {"error", NULL},         {"e", NULL},
               {"ntasks", "ranks"},     {"n", "ranks"},
               {"nodes", "nodes / ranks_per_node"}, {"N", "nodes / ranks_per_node"},
               {"ntasks-per-node", "ranks_per_node"}, {"cpus-per-task", "cpus_per_task"},
               {"c", "cpus_per_task"},  {"gpus-per-node", "gpus_per_node"}};

/* Refuses the option `word` (an sbatch argument such as --time=10, -t, -t10)
 * when a key or the sweep itself sets it. */
static void check_not_owned(const char *word, const char *line, const char *origin) {
    bool dashes = word[1] == '-';
    const char *name = word + (dashes ? 2 : 1);
    /* -t10 is -t with 10: a short option is one letter */
    size_t len = dashes ? strcspn(name, "=") : 1;
#define IS(opt) ((opt) && strlen(opt) == len && strncmp(name, (opt), len) == 0)
    for (size_t i = 0; i < NSBATCH_KEYS; i++)
        if (IS(k_sbatch_keys[i].key) || IS(k_sbatch_keys[i].letter))
            vb_die_input("%s: sbatch_extra '%s': set by the key / flag %s instead", origin, line, k_sbatch_keys[i].key);
    for (size_t i = 0; i < sizeof k_owned / sizeof k_owned[0]; i++) {
        if (!IS(k_owned[i].opt)) continue;
        if (k_owned[i].key)
            vb_die_input("%s: sbatch_extra '%s': set by the key / flag %s instead", origin, line, k_owned[i].key);
        vb_die_input("%s: sbatch_extra '%s': set by the sweep (job name and log of every job)", origin, line);
    }
#undef IS
}

/* An sbatch_extra line goes into the job scripts as written, so it is read
 * here as sbatch will read it (put_slurm_word has the rules): an unmatched
 * quote would make sbatch refuse every job, an unquoted # or an empty word
 * ("") would silently drop the rest of the line, and a backslash before a
 * blank ends the word in Slurm before 24.05 but not after. Every option on
 * the line (not only the first: "--mail-type=END --output=x" is two) is
 * checked against what the keys and the sweep set. */
void sweep_slurm_check_extra(const char *line, const char *origin) {
    if (line[0] != '-' || !isalpha((unsigned char)line[line[1] == '-' ? 2 : 1]))
        vb_die_input("%s: sbatch_extra '%s' must be one sbatch option line such as --mail-type=END", origin, line);
    char *word = vb_realloc_check(NULL, strlen(line) + 1);
    const char *p = line;
    for (;;) {
        while (isspace((unsigned char)*p)) p++;
        if (!*p) break;
        size_t k = 0;
        char quote = 0;
        bool escaped = false;
        const char *why = NULL;
        while (*p && (quote || !isspace((unsigned char)*p))) {
            if (escaped) {
                escaped = false;
            } else if (*p == '\\') {
                p++;
                if (!quote && (*p == ' ' || *p == '\t')) why = "a backslash before a blank (quote the blank instead)";
                escaped = true;
                continue;
            } else if (quote && *p == quote) {
                quote = 0;
                p++;
                continue;
            } else if (!quote && (*p == '"' || *p == '\'')) {
                quote = *p++;
                continue;
            } else if (!quote && *p == '#') {
                why = "an unquoted # (sbatch reads the rest of the line as a comment)";
                break;
            }
            word[k++] = *p++;
        }
        word[k] = '\0';
        if (quote) why = "an unmatched quote (sbatch would refuse every job)";
        if (!why && k == 0) why = "an empty word (sbatch stops reading the line there)";
        if (why) vb_die_input("%s: sbatch_extra '%s': %s", origin, line, why);
        if (word[0] == '-' && isalpha((unsigned char)word[word[1] == '-' ? 2 : 1])) check_not_owned(word, line, origin);
    }
    free(word);
}

void sweep_slurm_fold_sbatch(vb_scenario *s) {
    vb_sweep_kvs rest = {0};
    for (int i = 0; i < s->sbatch.n; i++) {
        const char *k = s->sbatch.v[i].key, *v = s->sbatch.v[i].value;
        bool fold = false;
        for (size_t f = 0; f < NSBATCH_KEYS; f++) fold |= strcmp(k, k_sbatch_keys[f].key) == 0;
        if (!fold) {
            char opt[160];
            snprintf(opt, sizeof opt, "--%s", k);
            char origin[VB_PATH_MAX + 64];
            snprintf(origin, sizeof origin, "%s: sbatch.%s", s->path, k);
            check_not_owned(opt, opt, origin); /* the value is quoted when written (put_sbatch) */
            vb_sweep_kvs_set(&rest, k, v);
            continue;
        }
        char origin[VB_PATH_MAX + 64];
        snprintf(origin, sizeof origin, "%s: sbatch.%s", s->path, k);
        vb_sweep_slurm probe = {0};
        vb_sweep_slurm_set(&probe, k, v, origin);
        vb_sweep_slurm_free(&probe);
        if (sbatch_key_value(&s->slurm, k)[0]) vb_die_input("%s: also set as the top-level key %s; keep one", origin, k);
        vb_sweep_slurm_set(&s->slurm, k, v, origin);
    }
    vb_sweep_kvs_free(&s->sbatch);
    s->sbatch = rest;
}

int sweep_tasks_per_node(const vb_scenario *s, int per_node, int ranks) {
    if (s->slurm.nodes > 0) return ranks / s->slurm.nodes;
    if (per_node > 0) return ranks < per_node ? ranks : per_node;
    return 0;
}

int sweep_nodes_of(const vb_scenario *s, int per_node, int ranks) {
    if (s->slurm.nodes > 0) return s->slurm.nodes;
    if (per_node > 0) return (ranks + per_node - 1) / per_node;
    return 0;
}

static bool has_prefix_arg(const sweep_strvec *a, const char *prefix) {
    for (int i = 0; a && i < a->n; i++)
        if (strncmp(a->v[i], prefix, strlen(prefix)) == 0) return true;
    return false;
}

void sweep_slurm_srun_flags(sweep_strvec *a, const vb_scenario *s, const sweep_strvec *extra) {
    const vb_sweep_slurm *sl = &s->slurm;
    /* since Slurm 22.05 srun no longer takes --cpus-per-task from sbatch */
    if (sl->cpus_per_task > 0) sweep_sv_pushf(a, "--cpus-per-task=%d", sl->cpus_per_task);
    /* without a binding each rank's OpenMP threads spread over every core
     * and ranks fight over them */
    if (!has_prefix_arg(extra, "--cpu-bind") && !has_prefix_arg(extra, "--cpu_bind")) sweep_sv_push(a, "--cpu-bind=cores");
    if (sl->gpus_per_node > 0) {
        if (!sl->gpu_bind[0] || strcmp(sl->gpu_bind, "per_task") == 0) {
            sweep_sv_push(a, "--gpus-per-task=1");
        } else {
            sweep_sv_pushf(a, "--gpus-per-node=%d", sl->gpus_per_node);
            sweep_sv_pushf(a, "--gpu-bind=%s", sl->gpu_bind);
        }
    }
    if (sl->srun_mpi[0]) sweep_sv_pushf(a, "--mpi=%s", sl->srun_mpi);
}

void sweep_slurm_check(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind launcher, int per_node) {
    const vb_sweep_slurm *sl = &s->slurm;
    const char *f = s->path;
    sweep_cluster_check(s, plan, launcher, per_node); /* keys the scheduler does not take, its time grammar */
    if (sl->sweep_job && !sweep_launchers[launcher].batch)
        vb_die_input("%s: sweep_job / --sweep_job: one job for the whole sweep needs a batch launcher: sbatch, bsub, "
                     "qsub or flux-batch (launcher is %s)", f, sweep_launchers[launcher].name);
    if (sl->nodes > 0 && per_node > 0)
        vb_die_input("%s: nodes %d and ranks_per_node %d (key or flag): give one, nodes fixes the node count of "
                     "every run, ranks_per_node the tasks on each", f, sl->nodes, per_node);
    if (sl->gpu_bind[0] && sl->gpus_per_node == 0)
        vb_die_input("%s: gpu_bind / --gpu_bind %s without gpus_per_node", f, sl->gpu_bind);
    /* the products a job script writes (#SBATCH --ntasks of a sweep job,
     * #PBS ncpus, jsrun -c of a node's set) stay ints: an overflow would write
     * select=1:ncpus=-2 or -c-2147483648 */
    const int cores = sweep_cpus_per_task(s, launcher);
    int most_nodes = 0, most_tpn = 0, prod;
    for (int i = 0; i < plan->nruns; i++) {
        const int R = plan->runs[i].ranks, nodes = sweep_nodes_of(s, per_node, R), tpn = sweep_tasks_per_node(s, per_node, R);
        if (cores > 0 && tpn > 0 && __builtin_mul_overflow(cores, tpn, &prod))
            vb_die_input("%s: cpus_per_task %d x %d ranks on a node of run %s: more cores than a job script can "
                         "name (%d at most)", f, cores, tpn, plan->runs[i].name, INT_MAX);
        if (nodes > most_nodes) most_nodes = nodes;
        if (tpn > most_tpn) most_tpn = tpn;
    }
    if (sl->sweep_job && __builtin_mul_overflow(most_nodes, most_tpn, &prod))
        vb_die_input("%s: sweep_job: %d nodes x %d ranks a node is more tasks than a job script can name (%d at most)",
                     f, most_nodes, most_tpn, INT_MAX);
    for (int i = 0; i < plan->nruns; i++) {
        const vb_sweep_run *r = &plan->runs[i];
        int R = r->ranks;
        if (sl->nodes > 0 && R % sl->nodes != 0)
            vb_die_input("%s: nodes / --nodes %d: run %s has %d ranks, not a multiple of the nodes", f, sl->nodes,
                         r->name, R);
        if (per_node > 0 && R > per_node && R % per_node != 0)
            vb_die_input("%s: ranks_per_node / --ranks_per_node %d: %d ranks do not fill whole nodes (a multiple "
                         "of %d, or fewer)", f, per_node, R, per_node);
        if (sl->gpus_per_node == 0) continue;
        int tpn = sweep_tasks_per_node(s, per_node, R);
        if (tpn == 0)
            vb_die_input("%s: gpus_per_node / --gpus_per_node %d needs ranks_per_node or nodes (how many ranks "
                         "share a node's GPUs)", f, sl->gpus_per_node);
        if (tpn > sl->gpus_per_node)
            vb_die_input("%s: gpus_per_node / --gpus_per_node %d: run %s puts %d ranks on a node; every rank "
                         "needs its own GPU", f, sl->gpus_per_node, r->name, tpn);
        if (strcmp(sl->gpu_bind, "none") == 0 && tpn > 1)
            vb_die_input("%s: gpu_bind / --gpu_bind none: run %s puts %d ranks on a node and every rank would "
                         "use the first GPU it sees; use per_task or closest", f, r->name, tpn);
        const char *backend = vb_sweep_kvs_get(&r->args, "backend");
        if (!backend || strcmp(backend, "cpu") == 0)
            vb_die_input("%s: gpus_per_node / --gpus_per_node %d: run %s uses backend %s; set base: {backend: "
                         "cuda} (or --backend cuda)", f, sl->gpus_per_node, r->name, backend ? backend : "cpu (default)");
    }
    const sweep_scheduler *sc = sweep_sched_of(launcher);
    if (sc) sc->check(s, plan, launcher, per_node); /* the scheduler's own rules */
}

/* Slurm's own rules beyond the shared ones above: none (its values were
 * checked as they were read; #SBATCH quoting is put_slurm_word's). */
static void slurm_check(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind k, int per_node) {
    (void)s, (void)plan, (void)k, (void)per_node;
}

void sweep_build_srun(sweep_strvec *a, const vb_scenario *s, int ranks, int per_node, const sweep_strvec *extra) {
    sweep_sv_push(a, "srun");
    sweep_sv_pushf(a, "--ntasks=%d", ranks);
    int nodes = sweep_nodes_of(s, per_node, ranks);
    if (nodes > 0) {
        sweep_sv_pushf(a, "--nodes=%d", nodes);
        sweep_sv_pushf(a, "--ntasks-per-node=%d", sweep_tasks_per_node(s, per_node, ranks));
    }
    sweep_slurm_srun_flags(a, s, extra);
}

/* ---- job scripts ---- */

/* A job's log path (#SBATCH --output): Slurm drops every backslash in it and
 * then expands no %-pattern (its filename-pattern rule "\\"), so a path with
 * one cannot be written so that the log lands there. */
void sweep_slurm_check_log_dir(const char *origin, const char *path) {
    if (strchr(path, '\\'))
        vb_die_input("%s: '%s' holds a backslash, which Slurm drops from a job's log path (#SBATCH --output); "
                     "choose a directory without one", origin, path);
}

/* sbatch splits an #SBATCH line into words as its get_argument does
 * (src/sbatch/opt.c): a blank ends a word, an unquoted # ends the line,
 * "..." or '...' group, and a backslash takes the next character as it is,
 * inside quotes too. So a value that is not one plain word goes in double
 * quotes with every \ and " after a backslash, which sbatch (every release
 * since 2006) reads back as the value itself; written bare, "team results"
 * would leave the option "team" and an argument "results", a # would cut the
 * line and a lone " makes sbatch refuse the job. Line breaks never get here
 * (sweep_refuse_line_break): sbatch splits lines before it reads quotes. */
static void put_slurm_word(FILE *f, const char *s) {
    if (strpbrk(s, "\r\n")) vb_die_internal("a line break reached an #SBATCH value: %s", s);
    bool plain = *s != '\0';
    for (const char *c = s; *c; c++)
        if (!isgraph((unsigned char)*c) || strchr("\"'\\#", *c)) plain = false;
    if (plain) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const char *c = s; *c; c++) {
        if (*c == '"' || *c == '\\') fputc('\\', f);
        fputc(*c, f);
    }
    fputc('"', f);
}

/* #SBATCH --opt=value, the value as sbatch reads it back; nothing when unset. */
static void put_sbatch(FILE *f, const char *opt, const char *value) {
    if (!value || !value[0]) return;
    fprintf(f, "#SBATCH --%s=", opt);
    put_slurm_word(f, value);
    fputc('\n', f);
}

/* The #SBATCH block: shape, resources, account..., output, extras. */
static void slurm_header(FILE *f, const sweep_job_ctx *j, const char *job_name, const sweep_shape *sh,
                         const char *log_abs) {
    const vb_sweep_slurm *sl = &j->s->slurm;
    fprintf(f, "#!/bin/bash\n");
    put_sbatch(f, "job-name", job_name);
    fprintf(f, "#SBATCH --ntasks=%d\n", sh->ntasks);
    if (sh->nodes > 0) {
        fprintf(f, "#SBATCH --nodes=%d\n", sh->nodes);
        fprintf(f, "#SBATCH --ntasks-per-node=%d\n", sh->tpn);
    }
    if (sl->cpus_per_task > 0) fprintf(f, "#SBATCH --cpus-per-task=%d\n", sl->cpus_per_task);
    if (sl->gpus_per_node > 0) fprintf(f, "#SBATCH --gpus-per-node=%d\n", sl->gpus_per_node);
    for (size_t i = 0; i < NSBATCH_KEYS; i++) put_sbatch(f, k_sbatch_keys[i].key, sbatch_key_value(sl, k_sbatch_keys[i].key));
    /* Slurm expands %j etc. in --output: a literal % must be doubled (the
     * path holds no backslash, which would turn expansion off) */
    size_t len = strlen(log_abs);
    char *pattern = vb_realloc_check(NULL, 2 * len + 1), *p = pattern;
    for (const char *c = log_abs; *c; c++) {
        if (*c == '%') *p++ = '%';
        *p++ = *c;
    }
    *p = '\0';
    put_sbatch(f, "output", pattern);
    free(pattern);
    /* the user's own lines, written as given: sweep_slurm_check_extra read them as sbatch will */
    for (int i = 0; i < sl->nsbatch_extra; i++) fprintf(f, "#SBATCH %s\n", sl->sbatch_extra[i]);
    for (int i = 0; i < j->s->sbatch.n; i++) { /* the scenario's sbatch: mapping; an empty value is a bare option */
        const vb_sweep_kv *kv = &j->s->sbatch.v[i];
        if (kv->value[0])
            put_sbatch(f, kv->key, kv->value);
        else
            fprintf(f, "#SBATCH --%s\n", kv->key);
    }
}

/* cwd, where the sweep lives, the job as its scheduler names it, the
 * preamble, the helpers that write into the sweep directory, and
 * run_point. job_log: the job's own output (its scheduler opens it). */
static void write_prologue(FILE *f, const sweep_job_ctx *j, const char *job_log) {
    const sweep_scheduler *sc = sweep_sched_of(j->launcher);
    char cwd[VB_PATH_MAX];
    if (getcwd(cwd, sizeof cwd)) {
        fprintf(f, "cd ");
        sweep_fput_quoted(f, cwd);
        fprintf(f, " || exit 1\n");
    }
    fprintf(f, "SWEEP_DIR=");
    sweep_fput_quoted(f, j->dir_abs);
    fprintf(f, "\nVITBENCH=");
    sweep_fput_quoted(f, j->exe);
    fprintf(f, "\nVB_JOB_LOG=");
    sweep_fput_quoted(f, job_log);
    /* the runs create their directories below the sweep's following no link */
    fprintf(f, "\nexport " VB_RESULTS_TREE_ENV "=\"$SWEEP_DIR\"");
    /* the job's id and hosts as the scheduler set them: status/NAME.job lets
     * --collect and --cancel follow a job submitted by hand (a dry run's
     * script), status/NAME.hosts says where each run ran */
    const char *tag = sweep_job_file_tag(sc);
    /* status/NAME.job: "<scheduler> <id>" (Slurm's the id alone), as sweep_record_job writes it */
    fprintf(f, "\nVB_SCHED=%s\nVB_JOB_TAG='%s%s'\nVB_JOB_ID=%s\n", sc->id, tag, tag[0] ? " " : "", sc->job_id_sh);
    fprintf(f, "vb_hosts() { %s; }\n", sc->hosts_sh);
    if (j->s->slurm.npreamble) fprintf(f, "# preamble (scenario key / --preamble)\n");
    for (int i = 0; i < j->s->slurm.npreamble; i++) fprintf(f, "%s\n", j->s->slurm.preamble[i]);
    fputs("\n"
          "# What this script writes in $SWEEP_DIR goes only into real directories (a link there,\n"
          "# to a directory or anything else, is never written through) and never through a link\n"
          "# at a file's name: files are written to a temporary beside them and renamed over the\n"
          "# name (mv -T replaces a symbolic or hard link instead of writing into what it names);\n"
          "# a log appended to is refused when it is a link of either kind.\n"
          "vb_dir_ok() { # DIR: a real directory, not a link\n"
          "    [ -d \"$1\" ] && [ ! -L \"$1\" ] && return 0\n"
          "    echo \"vitbench sweep: $1 is not a real directory (a link, or gone): nothing is written there\" >&2\n"
          "    return 1\n"
          "}\n"
          "vb_put() { # FILE: standard input becomes FILE, by a temporary renamed over it\n"
          "    local tmp\n"
          "    vb_dir_ok \"${1%/*}\" || return 1\n"
          "    tmp=$(mktemp \"${1%/*}/.${1##*/}.XXXXXX\") || return 1\n"
          "    if cat >\"$tmp\" && mv -T -f -- \"$tmp\" \"$1\"; then return 0; fi\n"
          "    rm -f -- \"$tmp\"\n"
          "    return 1\n"
          "}\n"
          "vb_appendable() { # FILE: absent, or a regular file of one link, in a real directory\n"
          "    vb_dir_ok \"${1%/*}\" || return 1\n"
          "    if [ -L \"$1\" ] || { [ -e \"$1\" ] && { [ ! -f \"$1\" ] || [ \"$(stat -c %h -- \"$1\")\" != 1 ]; }; }; then\n"
          "        echo \"vitbench sweep: $1 is a link or not a regular file: not written through; remove it\" >&2\n"
          "        return 1\n"
          "    fi\n"
          "}\n"
          "vb_open_log() { # LOG: fd 3 appends to LOG (- : this job's output), checked once open to be\n"
          "    # the one file at LOG (a link swapped in meanwhile is not written into either)\n"
          "    if [ \"$1\" = - ]; then\n"
          "        vb_appendable \"$VB_JOB_LOG\" || return 1\n"
          "        exec 3>&1\n"
          "        return 0\n"
          "    fi\n"
          "    vb_appendable \"$1\" || return 1\n"
          "    exec 3>>\"$1\" || return 1\n"
          "    if [ \"$(stat -L -c %d:%i /dev/fd/3 2>/dev/null):1\" != \"$(stat -c %d:%i:%h -- \"$1\" 2>/dev/null)\" ]; then\n"
          "        exec 3>&-\n"
          "        echo \"vitbench sweep: $1 changed while it was opened: not written\" >&2\n"
          "        return 1\n"
          "    fi\n"
          "}\n"
          "\n"
          "# run_point NAME LOG LIMIT_S CMD...: runs one point of the sweep, its output appended to LOG\n"
          "# (- = this job's output), stopped after LIMIT_S seconds (0 = no limit; recorded as 143,\n"
          "# killed by SIGTERM); its exit status goes to $SWEEP_DIR/status/NAME.exit and into index.csv\n"
          "# through `vitbench sweep --collect`. Returns the run's exit status (2 when the sweep\n"
          "# directory holds a link where the run would write).\n"
          "run_point() {\n"
          "    local name=$1 log=$2 limit=$3 rc t0=$SECONDS k=1\n"
          "    shift 3\n"
          "    # a job stopped and submitted again: a point that finished before (its status\n"
          "    # file is there) is not run twice, and one cut off has its first directory (and\n"
          "    # log) moved aside, so that the rerun's is the one index.csv and the report name\n"
          "    if [ -f \"$SWEEP_DIR/status/$name.exit\" ] && [ ! -L \"$SWEEP_DIR/status/$name.exit\" ]; then\n"
          "        rc=$(head -c 16 \"$SWEEP_DIR/status/$name.exit\" | tr -d '\\n')\n"
          "        case $rc in\n"
          "        '' | *[!0-9]*) echo \"vitbench sweep: $name: status/$name.exit holds no exit status; run again\" ;;\n"
          "        *)\n"
          "            echo \"vitbench sweep: $name: finished in an earlier submission (exit $rc), not run again\"\n"
          "            return \"$((rc > 255 ? 255 : rc))\"\n"
          "            ;;\n"
          "        esac\n"
          "    fi\n"
          "    if vb_dir_ok \"$SWEEP_DIR/runs\" && vb_dir_ok \"$SWEEP_DIR/logs\" && vb_dir_ok \"$SWEEP_DIR/status\"; then\n"
          "        if [ -e \"$SWEEP_DIR/runs/$name\" ] || [ -L \"$SWEEP_DIR/runs/$name\" ]; then\n"
          "            while [ -e \"$SWEEP_DIR/runs/$name.unfinished-$k\" ] || [ -L \"$SWEEP_DIR/runs/$name.unfinished-$k\" ]; do\n"
          "                k=$((k + 1))\n"
          "            done\n"
          "            mv -T -- \"$SWEEP_DIR/runs/$name\" \"$SWEEP_DIR/runs/$name.unfinished-$k\"\n"
          "            if [ \"$log\" != - ] && { [ -e \"$log\" ] || [ -L \"$log\" ]; }; then\n"
          "                mv -T -- \"$log\" \"${log%.log}.unfinished-$k.log\"\n"
          "            fi\n"
          "            echo \"vitbench sweep: $name: an earlier submission's unfinished run moved to runs/$name.unfinished-$k\"\n"
          "        fi\n"
          "        if [ -n \"$VB_JOB_ID\" ]; then\n"
          "            printf '%s%s\\n' \"$VB_JOB_TAG\" \"$VB_JOB_ID\" | vb_put \"$SWEEP_DIR/status/$name.job\"\n"
          "        fi\n"
          "        vb_hosts 2>/dev/null | vb_put \"$SWEEP_DIR/status/$name.hosts\"\n"
          "    fi\n"
          "    if ! vb_dir_ok \"$SWEEP_DIR/runs\" || ! vb_open_log \"$log\"; then\n"
          "        rc=2\n"
          "        echo \"vitbench sweep: $name: not run: its log or run directory would be written through a link\"\n"
          "    else\n"
          "        echo \"# job $VB_SCHED ${VB_JOB_ID:-?} on $(paste -sd, \"$SWEEP_DIR/status/$name.hosts\" 2>/dev/null)\" >&3\n"
          "        echo \"# OMP_NUM_THREADS=$OMP_NUM_THREADS $*\" >&3\n"
          "        if [ \"$limit\" -gt 0 ]; then\n"
          "            timeout --kill-after=10 \"$limit\" \"$@\" </dev/null >&3 2>&3\n"
          "            rc=$?\n"
          "            if [ \"$rc\" = 124 ]; then\n"
          "                rc=143\n"
          "                echo \"vitbench sweep: run stopped (timeout) after $((SECONDS - t0)) s\" >&3\n"
          "            fi\n"
          "        else\n"
          "            \"$@\" </dev/null >&3 2>&3\n"
          "            rc=$?\n"
          "        fi\n"
          "        exec 3>&-\n"
          "    fi\n"
          "    echo \"vitbench sweep: $name: exit $rc after $((SECONDS - t0)) s\"\n"
          "    printf '%s\\n' \"$rc\" | vb_put \"$SWEEP_DIR/status/$name.exit\"\n"
          "    # exit 1 only says that some run failed; above that index.csv was not written\n"
          "    \"$VITBENCH\" sweep --collect \"$SWEEP_DIR\" --no_report >/dev/null\n"
          "    [ \"$?\" -le 1 ] || echo \"vitbench sweep: index.csv not updated; run: vitbench sweep --collect $SWEEP_DIR\"\n"
          "    return \"$rc\"\n"
          "}\n\n",
          f);
}

/* export OMP_NUM_THREADS=T; run_point NAME LOG LIMIT srun ... vitbench ... */
static void write_point(FILE *f, const sweep_job_ctx *j, const sweep_item *it, const char *log) {
    sweep_strvec cmd = {0};
    sweep_build_launch(&cmd, j->launcher, j->s, it->run->ranks, j->per_node, j->launcher_args);
    char runs_dir[VB_PATH_MAX];
    vb_snprintf(runs_dir, sizeof runs_dir, "%s/runs", j->dir_abs);
    sweep_push_vitbench_args(&cmd, j->exe, j->s, it->run, it->name, runs_dir);
    fprintf(f, "export OMP_NUM_THREADS=%d\n", it->threads);
    fprintf(f, "run_point ");
    sweep_fput_quoted(f, it->name);
    fputc(' ', f);
    sweep_fput_quoted(f, log);
    fprintf(f, " %d ", j->timeout_s > 0 ? j->timeout_s : 0);
    sweep_fput_argv(f, cmd.v);
    sweep_sv_free(&cmd);
}

/* What a job script is written from. */
typedef struct {
    const sweep_job_ctx *j;
    const sweep_item *items;
    int index, n;        /* one run: the item's index and the sweep's count; a sweep job: items' count */
    const char *log_abs; /* a sweep job's own output */
} script_ctx;

static void write_run_script(FILE *f, void *ctx) {
    const script_ctx *x = ctx;
    const sweep_job_ctx *j = x->j;
    const sweep_item *it = x->items;
    const sweep_scheduler *sc = sweep_sched_of(j->launcher);
    char job_name[200], log_abs[VB_PATH_MAX], job_log[VB_PATH_MAX];
    snprintf(job_name, sizeof job_name, "%s_%03d", j->s->name, x->index);
    vb_snprintf(log_abs, sizeof log_abs, "%s/logs/%s.log", j->dir_abs, it->name);
    vb_snprintf(job_log, sizeof job_log, "%s/logs/%s.job.log", j->dir_abs, it->name);
    sweep_shape sh = sweep_shape_of(j->s, j->per_node, it->run->ranks);
    const char *own = sc->job_log_is_run_log ? log_abs : job_log;
    sc->header(f, j, job_name, &sh, own);
    fprintf(f, "# vitbench sweep %s (scenario %s): run %d of %d, %s\n", j->sweep_id, j->s->path, x->index + 1, x->n,
            it->name);
    write_prologue(f, j, own);
    write_point(f, j, it, sc->job_log_is_run_log ? "-" : log_abs);
    fprintf(f, "\nexit $?\n");
}

void sweep_write_run_script(const sweep_tree *t, const char *name, const sweep_job_ctx *j, const sweep_item *it,
                            int index, int nitems) {
    script_ctx x = {j, it, index, nitems, NULL};
    sweep_tree_write_or_die(t, SWEEP_JOBS, name, 0775, write_run_script, &x);
}

static void write_sweep_job(FILE *f, void *ctx) {
    const script_ctx *x = ctx;
    const sweep_job_ctx *j = x->j;
    const sweep_item *items = x->items;
    const int n = x->n;
    int max_ranks = 0, max_nodes = 0, max_tpn = 0, todo = 0;
    for (int i = 0; i < n; i++) {
        if (items[i].status) continue;
        int R = items[i].run->ranks;
        todo++;
        if (R > max_ranks) max_ranks = R;
        int nodes = sweep_nodes_of(j->s, j->per_node, R), tpn = sweep_tasks_per_node(j->s, j->per_node, R);
        if (nodes > max_nodes) max_nodes = nodes;
        if (tpn > max_tpn) max_tpn = tpn;
    }
    char job_name[200];
    snprintf(job_name, sizeof job_name, "%s_sweep", j->s->name);
    /* the allocation holds the largest run: its node count, the most tasks on a node
     * (sweep_slurm_check bounded each product) */
    int ntasks = max_nodes > 0 && max_nodes * max_tpn > max_ranks ? max_nodes * max_tpn : max_ranks;
    sweep_shape sh = {ntasks, max_nodes, max_tpn};
    sweep_sched_of(j->launcher)->header(f, j, job_name, &sh, x->log_abs);
    fprintf(f, "# vitbench sweep %s (scenario %s): %d runs in one allocation, in the sweep's order; a failed\n"
               "# run does not stop the next; each run's status lands in index.csv as it ends\n",
            j->sweep_id, j->s->path, todo);
    write_prologue(f, j, x->log_abs);
    fprintf(f, "failed=0\n");
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (items[i].status) continue;
        char log[VB_PATH_MAX];
        vb_snprintf(log, sizeof log, "%s/logs/%s.log", j->dir_abs, items[i].name);
        fprintf(f, "\n# run %d of %d\n", ++k, todo);
        write_point(f, j, &items[i], log);
        fprintf(f, " || failed=$((failed + 1))\n");
    }
    fprintf(f, "\n# every status into index.csv, then the sweep's report\n"
               "\"$VITBENCH\" sweep --collect \"$SWEEP_DIR\"\n"
               "echo \"vitbench sweep: sweep job done, $failed of %d runs failed\"\n"
               "[ \"$failed\" = 0 ]\n",
            todo);
}

void sweep_write_sweep_job(const sweep_tree *t, const char *name, const sweep_job_ctx *j, const sweep_item *items,
                           int n, const char *log_abs) {
    script_ctx x = {j, items, 0, n, log_abs};
    sweep_tree_write_or_die(t, SWEEP_JOBS, name, 0775, write_sweep_job, &x);
}

/* ---- sbatch's job ids, squeue and sacct ---- */

/* The job id in a line of sbatch's output: "Submitted batch job 123", or
 * --parsable's "123[;cluster]". */
static bool slurm_job_id(const char *line, char *id, size_t n) {
    const char *p = strstr(line, "Submitted batch job ");
    p = p ? p + strlen("Submitted batch job ") : line;
    size_t k = 0;
    while (isdigit((unsigned char)p[k])) k++;
    if (k == 0 || k >= n || (p[k] && !strchr(";\r\n ", p[k]))) return false;
    snprintf(id, n, "%.*s", (int)k, p);
    return true;
}

/* A Slurm job id: the job number, or an array job's task ("123_4"). */
static bool slurm_id_ok(const char *s) {
    size_t k = sweep_job_number(s);
    if (!k) return false;
    if (!s[k]) return true;
    if (s[k] != '_') return false;
    size_t d = 0;
    while (isdigit((unsigned char)s[k + 1 + d]) && d < 10) d++;
    return d > 0 && !s[k + 1 + d];
}

/* A job's state: one squeue of the user's jobs per collect (however many
 * runs wait), read for every job; a job it no longer lists as pending or
 * running is over, its final state from sacct where accounting is kept.
 * Without squeue, or when it cannot reach the controller, nothing is
 * decided (-1). */
static int slurm_job_state(sweep_jobq *q, const sweep_tree *t, const char *id, char *state, size_t n) {
    if (!q->asked[SCHED_SLURM]) {
        q->asked[SCHED_SLURM] = true;
        char user[64];
        struct passwd *pw = getpwuid(getuid());
        snprintf(user, sizeof user, "%s", pw ? pw->pw_name : "");
        char *sq[] = {"squeue", "-h", "-o", "%i %T", "-u", user, NULL};
        int rc;
        char *list = user[0] ? sweep_ask(t, sq, &rc) : NULL;
        if (list && rc == 0) q->listing[SCHED_SLURM] = list; /* no word from the controller: decide nothing */
        else free(list);
    }
    const char *list = q->listing[SCHED_SLURM];
    if (!list) return -1;
    static const char *const live[] = {"PENDING",  "RUNNING",   "CONFIGURING", "COMPLETING",   "SUSPENDED",
                                       "REQUEUED", "RESIZING",  "SIGNALING",   "STAGE_OUT",    "STOPPED",
                                       "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"};
    char listed[24] = "";
    size_t idlen = strlen(id);
    for (const char *l = list; *l;) {
        /* "ID STATE"; array and het jobs (123_4, 123+1) never match a plain id */
        if (strncmp(l, id, idlen) == 0 && l[idlen] == ' ') sscanf(l + idlen, " %23s", listed);
        const char *e = strchr(l, '\n');
        if (!e) break;
        l = e + 1;
    }
    if (listed[0])
        for (size_t i = 0; i < sizeof live / sizeof *live; i++)
            if (strcmp(listed, live[i]) == 0) return 0;
    snprintf(state, n, "%s", listed);
    char *sa[] = {"sacct", "-n", "-X", "-P", "-j", (char *)id, "-o", "State", NULL};
    int rc;
    char *text = sweep_ask(t, sa, &rc), word[64] = "";
    if (text && rc == 0 && sscanf(text, "%63s", word) == 1) snprintf(state, n, "%s", word); /* TIMEOUT, CANCELLED, ... */
    free(text);
    return 1;
}

/* SLURM_JOB_NUM_NODES (SLURM_NNODES before Slurm 2.x). */
static int slurm_alloc_nodes(void) {
    const char *v = getenv("SLURM_JOB_NUM_NODES");
    if (!v) v = getenv("SLURM_NNODES");
    int k;
    return v && sweep_parse_int(v, &k) && k > 0 ? k : -1;
}

static const char *const slurm_submit[] = {"sbatch", NULL};
static const char *const slurm_cancel[] = {"scancel", NULL};

const sweep_scheduler sweep_sched_slurm = {
    .name = "Slurm",
    .id = "slurm",
    .script_ext = "sbatch",
    .job_log_is_run_log = true,
    .time_form = "minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S, e.g. 00:30:00 or 30",
    .time_ok = vb_sweep_slurm_time_ok,
    .check = slurm_check,
    .check_log_dir = sweep_slurm_check_log_dir,
    .header = slurm_header,
    .job_id_sh = "${SLURM_JOB_ID:-}",
    .hosts_sh = "printf '%s\\n' \"${SLURM_JOB_NODELIST:-$(hostname)}\"",
    .submit = slurm_submit,
    .submit_stdin = false,
    .job_id = slurm_job_id,
    .id_ok = slurm_id_ok,
    .job_state = slurm_job_state,
    .cancel = slurm_cancel,
    .alloc_env = "SLURM_JOB_ID",
    .alloc_nodes = slurm_alloc_nodes,
};
