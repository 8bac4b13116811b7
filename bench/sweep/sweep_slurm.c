/* sweep_slurm.c: what a sweep needs to run on a Slurm cluster as written.
 *
 * Contract: vb_sweep_slurm_set checks one key's value (scenario key or flag,
 * same rules) and exits 2 naming its origin; sweep_slurm_check checks the
 * keys against the plan before anything is created. srun lines get the
 * allocation's shape and the binding a benchmark needs (cores per task,
 * one GPU per task: the trainer uses device 0 of the GPUs it sees), and job
 * scripts (one per run, or one sweep job for all) run every run through
 * run_point, which records its exit status in status/<run>.exit and has
 * `vitbench sweep --collect` put it into index.csv.
 */
#include "bench/sweep/sweep_internal.h"

#include <ctype.h>
#include <errno.h>
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

/* One word of an #SBATCH line: printable, no blanks or quotes (sbatch would
 * split or unquote them). */
static void set_word(char *dst, size_t n, const char *key, const char *value, const char *origin) {
    bool ok = value[0] != '\0' && strlen(value) < n;
    for (const char *c = value; *c; c++)
        if (!isgraph((unsigned char)*c) || strchr("'\"\\#", *c)) ok = false;
    if (!ok)
        vb_die_input("%s: %s '%s' must be one word of at most %zu printable characters (no blanks, quotes, #)",
                     origin, key, value, n - 1);
    snprintf(dst, n, "%s", value);
}

static void push_line(char ***v, int *n, const char *line) {
    *v = sweep_realloc(*v, (size_t)(*n + 1) * sizeof **v);
    (*v)[(*n)++] = sweep_strdup(line);
}

/* #SBATCH options the sweep writes itself, and the key that sets each. */
static const struct {
    const char *opt, *key;
} k_owned[] = {{"job-name", NULL},      {"J", NULL},
               {"output", NULL},        {"o", NULL},
               {"error", NULL},         {"e", NULL},
               {"ntasks", "ranks"},     {"n", "ranks"},
               {"nodes", "nodes / ranks_per_node"}, {"N", "nodes / ranks_per_node"},
               {"ntasks-per-node", "ranks_per_node"}, {"cpus-per-task", "cpus_per_task"},
               {"c", "cpus_per_task"},  {"gpus-per-node", "gpus_per_node"},
               {"time", "time"},        {"t", "time"},
               {"account", "account"},  {"A", "account"},
               {"qos", "qos"},          {"q", "qos"},
               {"constraint", "constraint"}, {"C", "constraint"},
               {"partition", "partition"}, {"p", "partition"},
               {"reservation", "reservation"}};

/* Refuses the option `word` (an sbatch argument such as --time=10, -t, -t10)
 * when a key or the sweep itself sets it. */
static void check_not_owned(const char *word, const char *line, const char *origin) {
    bool dashes = word[1] == '-';
    const char *name = word + (dashes ? 2 : 1);
    /* -t10 is -t with 10: a short option is one letter */
    size_t len = dashes ? strcspn(name, "=") : 1;
    for (size_t i = 0; i < sizeof k_owned / sizeof k_owned[0]; i++) {
        if (strlen(k_owned[i].opt) != len || strncmp(name, k_owned[i].opt, len) != 0) continue;
        if (k_owned[i].key)
            vb_die_input("%s: sbatch_extra '%s': set by the key / flag %s instead", origin, line, k_owned[i].key);
        vb_die_input("%s: sbatch_extra '%s': set by the sweep (job name and log of every job)", origin, line);
    }
}

/* An sbatch_extra line goes into the job scripts as written, so it is read
 * here as sbatch will read it (put_slurm_word has the rules): an unmatched
 * quote would make sbatch refuse every job, an unquoted # or an empty word
 * ("") would silently drop the rest of the line, and a backslash before a
 * blank ends the word in Slurm before 24.05 but not after. Every option on
 * the line (not only the first: "--mail-type=END --output=x" is two) is
 * checked against what the keys and the sweep set. */
static void check_extra_line(const char *line, const char *origin) {
    if (line[0] != '-' || !isalpha((unsigned char)line[line[1] == '-' ? 2 : 1]))
        vb_die_input("%s: sbatch_extra '%s' must be one sbatch option line such as --mail-type=END", origin, line);
    char *word = sweep_realloc(NULL, strlen(line) + 1);
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

bool vb_sweep_slurm_set(vb_sweep_slurm *sl, const char *key, const char *value, const char *origin) {
    int v;
    sweep_refuse_line_break(origin, value); /* every one lands in a job script or an srun line */
    if (strcmp(key, "nodes") == 0 || strcmp(key, "gpus_per_node") == 0 || strcmp(key, "cpus_per_task") == 0) {
        int min = strcmp(key, "gpus_per_node") == 0 ? 0 : 1;
        if (!sweep_parse_int(value, &v) || v < min)
            vb_die_input("%s: %s '%s' is not an integer >= %d", origin, key, value, min);
        if (key[0] == 'n') sl->nodes = v;
        else if (key[0] == 'g') sl->gpus_per_node = v;
        else sl->cpus_per_task = v;
    } else if (strcmp(key, "time") == 0) {
        if (strlen(value) >= sizeof sl->time || !vb_sweep_slurm_time_ok(value))
            vb_die_input("%s: time '%s' is not a Slurm time limit (minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S, "
                         "e.g. 00:30:00 or 30)", origin, value);
        snprintf(sl->time, sizeof sl->time, "%s", value);
    } else if (strcmp(key, "account") == 0) {
        set_word(sl->account, sizeof sl->account, key, value, origin);
    } else if (strcmp(key, "qos") == 0) {
        set_word(sl->qos, sizeof sl->qos, key, value, origin);
    } else if (strcmp(key, "constraint") == 0) {
        set_word(sl->constraint, sizeof sl->constraint, key, value, origin);
    } else if (strcmp(key, "partition") == 0) {
        set_word(sl->partition, sizeof sl->partition, key, value, origin);
    } else if (strcmp(key, "reservation") == 0) {
        set_word(sl->reservation, sizeof sl->reservation, key, value, origin);
    } else if (strcmp(key, "gpu_bind") == 0) {
        if (strcmp(value, "per_task") != 0 && strcmp(value, "closest") != 0 && strcmp(value, "none") != 0)
            vb_die_input("%s: gpu_bind '%s' must be per_task (srun --gpus-per-task=1), closest or none "
                         "(srun --gpu-bind=...)", origin, value);
        snprintf(sl->gpu_bind, sizeof sl->gpu_bind, "%s", value);
    } else if (strcmp(key, "srun_mpi") == 0) {
        bool ok = value[0] != '\0' && strlen(value) < sizeof sl->srun_mpi;
        for (const char *c = value; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != '_') ok = false;
        if (!ok) vb_die_input("%s: srun_mpi '%s' is not an srun --mpi plugin name (e.g. pmix, pmi2, none)", origin, value);
        snprintf(sl->srun_mpi, sizeof sl->srun_mpi, "%s", value);
    } else if (strcmp(key, "sweep_job") == 0) {
        if (!vb_cli_parse_bool(value, &sl->sweep_job))
            vb_die_input("%s: sweep_job '%s' is not true or false", origin, value);
    } else if (strcmp(key, "sbatch_extra") == 0) {
        check_extra_line(value, origin);
        push_line(&sl->sbatch_extra, &sl->nsbatch_extra, value);
    } else if (strcmp(key, "preamble") == 0) {
        push_line(&sl->preamble, &sl->npreamble, value);
    } else {
        return false;
    }
    return true;
}

void vb_sweep_slurm_free(vb_sweep_slurm *sl) {
    for (int i = 0; i < sl->nsbatch_extra; i++) free(sl->sbatch_extra[i]);
    for (int i = 0; i < sl->npreamble; i++) free(sl->preamble[i]);
    free(sl->sbatch_extra);
    free(sl->preamble);
    memset(sl, 0, sizeof *sl);
}

void sweep_slurm_fold_sbatch(vb_scenario *s) {
    static const char *folded[] = {"time", "account", "qos", "constraint", "partition", "reservation"};
    vb_sweep_kvs rest = {0};
    for (int i = 0; i < s->sbatch.n; i++) {
        const char *k = s->sbatch.v[i].key, *v = s->sbatch.v[i].value;
        bool fold = false;
        for (size_t f = 0; f < sizeof folded / sizeof folded[0]; f++) fold |= strcmp(k, folded[f]) == 0;
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
        const char *had = strcmp(k, "time") == 0      ? s->slurm.time
                          : strcmp(k, "account") == 0 ? s->slurm.account
                          : strcmp(k, "qos") == 0     ? s->slurm.qos
                          : strcmp(k, "constraint") == 0 ? s->slurm.constraint
                          : strcmp(k, "partition") == 0  ? s->slurm.partition
                                                         : s->slurm.reservation;
        if (had[0]) vb_die_input("%s: also set as the top-level key %s; keep one", origin, k);
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
    if (sl->sweep_job && launcher != LAUNCH_SBATCH)
        vb_die_input("%s: sweep_job / --sweep_job: one job for the whole sweep needs --launcher sbatch (launcher is %s)",
                     f, sweep_launcher_names[launcher]);
    if (sl->nodes > 0 && per_node > 0)
        vb_die_input("%s: nodes %d and ranks_per_node %d (key or flag): give one, nodes fixes the node count of "
                     "every run, ranks_per_node the tasks on each", f, sl->nodes, per_node);
    if (sl->gpu_bind[0] && sl->gpus_per_node == 0)
        vb_die_input("%s: gpu_bind / --gpu_bind %s without gpus_per_node", f, sl->gpu_bind);
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
static void write_directives(FILE *f, const sweep_job_ctx *j, const char *job_name, int ntasks, int nodes, int tpn,
                             const char *log_abs) {
    const vb_sweep_slurm *sl = &j->s->slurm;
    fprintf(f, "#!/bin/bash\n");
    put_sbatch(f, "job-name", job_name);
    fprintf(f, "#SBATCH --ntasks=%d\n", ntasks);
    if (nodes > 0) {
        fprintf(f, "#SBATCH --nodes=%d\n", nodes);
        fprintf(f, "#SBATCH --ntasks-per-node=%d\n", tpn);
    }
    if (sl->cpus_per_task > 0) fprintf(f, "#SBATCH --cpus-per-task=%d\n", sl->cpus_per_task);
    if (sl->gpus_per_node > 0) fprintf(f, "#SBATCH --gpus-per-node=%d\n", sl->gpus_per_node);
    put_sbatch(f, "time", sl->time);
    put_sbatch(f, "account", sl->account);
    put_sbatch(f, "qos", sl->qos);
    put_sbatch(f, "constraint", sl->constraint);
    put_sbatch(f, "partition", sl->partition);
    put_sbatch(f, "reservation", sl->reservation);
    /* Slurm expands %j etc. in --output: a literal % must be doubled (the
     * path holds no backslash, which would turn expansion off) */
    size_t len = strlen(log_abs);
    char *pattern = sweep_realloc(NULL, 2 * len + 1), *p = pattern;
    for (const char *c = log_abs; *c; c++) {
        if (*c == '%') *p++ = '%';
        *p++ = *c;
    }
    *p = '\0';
    put_sbatch(f, "output", pattern);
    free(pattern);
    /* the user's own lines, written as given: check_extra_line read them as sbatch will */
    for (int i = 0; i < sl->nsbatch_extra; i++) fprintf(f, "#SBATCH %s\n", sl->sbatch_extra[i]);
    for (int i = 0; i < j->s->sbatch.n; i++) { /* the scenario's sbatch: mapping; an empty value is a bare option */
        const vb_sweep_kv *kv = &j->s->sbatch.v[i];
        if (kv->value[0])
            put_sbatch(f, kv->key, kv->value);
        else
            fprintf(f, "#SBATCH --%s\n", kv->key);
    }
}

/* cwd, where the sweep lives, the preamble, and run_point. */
static void write_prologue(FILE *f, const sweep_job_ctx *j) {
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
    fputc('\n', f);
    if (j->s->slurm.npreamble) fprintf(f, "# preamble (scenario key / --preamble)\n");
    for (int i = 0; i < j->s->slurm.npreamble; i++) fprintf(f, "%s\n", j->s->slurm.preamble[i]);
    fputs("\n"
          "# run_point NAME LOG LIMIT_S CMD...: runs one point of the sweep, its output appended to LOG\n"
          "# (- = this job's output), stopped after LIMIT_S seconds (0 = no limit; recorded as 143,\n"
          "# killed by SIGTERM); its exit status goes to $SWEEP_DIR/status/NAME.exit and into index.csv\n"
          "# through `vitbench sweep --collect`. Returns the run's exit status.\n"
          "run_point() {\n"
          "    local name=$1 log=$2 limit=$3 rc t0=$SECONDS k=1\n"
          "    shift 3\n"
          "    # a job stopped and submitted again: a point that finished before (its status\n"
          "    # file is there) is not run twice, and one cut off has its first directory (and\n"
          "    # log) moved aside, so that the rerun's is the one index.csv and the report name\n"
          "    if [ -f \"$SWEEP_DIR/status/$name.exit\" ]; then\n"
          "        rc=$(cat \"$SWEEP_DIR/status/$name.exit\")\n"
          "        echo \"vitbench sweep: $name: finished in an earlier submission (exit $rc), not run again\"\n"
          "        return \"$rc\"\n"
          "    fi\n"
          "    if [ -e \"$SWEEP_DIR/runs/$name\" ]; then\n"
          "        while [ -e \"$SWEEP_DIR/runs/$name.unfinished-$k\" ]; do k=$((k + 1)); done\n"
          "        mv \"$SWEEP_DIR/runs/$name\" \"$SWEEP_DIR/runs/$name.unfinished-$k\"\n"
          "        if [ \"$log\" != - ] && [ -e \"$log\" ]; then mv \"$log\" \"${log%.log}.unfinished-$k.log\"; fi\n"
          "        echo \"vitbench sweep: $name: an earlier submission's unfinished run moved to runs/$name.unfinished-$k\"\n"
          "    fi\n"
          "    if [ \"$log\" = - ]; then exec 3>&1; else exec 3>>\"$log\"; fi\n"
          "    echo \"# OMP_NUM_THREADS=$OMP_NUM_THREADS $*\" >&3\n"
          "    if [ \"$limit\" -gt 0 ]; then\n"
          "        timeout --kill-after=10 \"$limit\" \"$@\" </dev/null >&3 2>&3\n"
          "        rc=$?\n"
          "        if [ \"$rc\" = 124 ]; then\n"
          "            rc=143\n"
          "            echo \"vitbench sweep: run stopped (timeout) after $((SECONDS - t0)) s\" >&3\n"
          "        fi\n"
          "    else\n"
          "        \"$@\" </dev/null >&3 2>&3\n"
          "        rc=$?\n"
          "    fi\n"
          "    exec 3>&-\n"
          "    echo \"vitbench sweep: $name: exit $rc after $((SECONDS - t0)) s\"\n"
          "    printf '%s\\n' \"$rc\" >\"$SWEEP_DIR/status/$name.exit.tmp\" &&\n"
          "        mv -f \"$SWEEP_DIR/status/$name.exit.tmp\" \"$SWEEP_DIR/status/$name.exit\"\n"
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
    sweep_build_launch(&cmd, LAUNCH_SBATCH, j->s, it->run->ranks, j->per_node, j->launcher_args);
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

static FILE *open_script(const char *path) {
    FILE *f = vb_fopen_nofollow(path, "w");
    if (!f) vb_die_input("cannot write %s (%s)", path, strerror(errno));
    return f;
}

static void close_script(FILE *f, const char *path) {
    if (fclose(f) != 0) vb_die_input("cannot write %s", path);
    chmod(path, 0775);
}

void sweep_write_run_script(const char *path, const sweep_job_ctx *j, const sweep_item *it, int index, int nitems) {
    FILE *f = open_script(path);
    char job_name[200], log_abs[VB_PATH_MAX];
    snprintf(job_name, sizeof job_name, "%s_%03d", j->s->name, index);
    vb_snprintf(log_abs, sizeof log_abs, "%s/logs/%s.log", j->dir_abs, it->name);
    int R = it->run->ranks;
    write_directives(f, j, job_name, R, sweep_nodes_of(j->s, j->per_node, R), sweep_tasks_per_node(j->s, j->per_node, R),
                     log_abs);
    fprintf(f, "# vitbench sweep %s (scenario %s): run %d of %d, %s\n", j->sweep_id, j->s->path, index + 1, nitems,
            it->name);
    write_prologue(f, j);
    write_point(f, j, it, "-");
    fprintf(f, "\nexit $?\n");
    close_script(f, path);
}

void sweep_write_sweep_job(const char *path, const sweep_job_ctx *j, const sweep_item *items, int n,
                           const char *log_abs) {
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
    FILE *f = open_script(path);
    char job_name[200];
    snprintf(job_name, sizeof job_name, "%s_sweep", j->s->name);
    /* the allocation holds the largest run: its node count, the most tasks on a node */
    int ntasks = max_nodes > 0 && max_nodes * max_tpn > max_ranks ? max_nodes * max_tpn : max_ranks;
    write_directives(f, j, job_name, ntasks, max_nodes, max_tpn, log_abs);
    fprintf(f, "# vitbench sweep %s (scenario %s): %d runs in one allocation, in the sweep's order; a failed\n"
               "# run does not stop the next; each run's status lands in index.csv as it ends\n",
            j->sweep_id, j->s->path, todo);
    write_prologue(f, j);
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
    close_script(f, path);
}
