/* sweep_cmd.c: `vitbench sweep`, vb_sweep_main (sweep.h).
 *
 * Contract: refuses to run inside an MPI job or a multi-task srun step;
 * parses the flags (core/cli) and the scenario, expands and checks every
 * point before creating anything (bad input: exit 2, nothing written), then
 * creates the sweep directory, launches the runs one at a time and rewrites
 * index.csv after each, and ends with the results table and the report.
 * Exit status: 0 all runs completed / submitted / printed, 1 some failed,
 * 130 stopped by a signal. --resume reloads the options sweep.json recorded.
 */
#include "bench/sweep/sweep_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analysis/analysis.h"
#include "core/config/cli.h"
#include "core/config/config.h"
#include "core/config/flag.h"
#include "core/results/results.h"

#ifndef VB_SOURCE_DIR
#define VB_SOURCE_DIR "."
#endif

static void set_output_dir(const char *flag, const char *v, void *ptr) {
    char *out = ptr; /* sweep_cli.out_dir */
    if (!v[0]) vb_die_input("sweep: %s expects a non-empty value", flag);
    char origin[96];
    snprintf(origin, sizeof origin, "flag %s", flag);
    sweep_refuse_line_break(origin, v); /* job scripts hold it in #SBATCH --output and paths */
    if (strlen(v) >= VB_PATH_MAX - 300) vb_die_input("sweep: %s: '%.60s...' is too long", flag, v);
    snprintf(out, VB_PATH_MAX, "%s", v);
}

static void set_ranks(const char *flag, const char *v, void *ptr) {
    vb_sweep_overrides *ov = ptr;
    char what[64];
    snprintf(what, sizeof what, "flag %s", flag);
    free(ov->ranks);
    ov->ranks = vb_sweep_parse_int_list(v, what, &ov->nranks);
}

static void add_launcher_args(const char *flag, const char *v, void *ptr) {
    (void)flag;
    sweep_strvec *args = ptr;
    sweep_refuse_line_break("flag --launcher_args", v); /* a line break is no word separator here */
    char *copy = vb_strdup_check(v);
    for (char *tok = strtok(copy, " \t"); tok; tok = strtok(NULL, " \t")) sweep_sv_push(args, tok);
    free(copy);
}

/* --time, --account, ... --preamble: checked now with the scenario key's
 * rules, applied over the scenario once it is loaded (apply_slurm_flags). */
static void add_slurm_flag(const char *flag, const char *v, void *ptr) {
    sweep_cli *c = ptr;
    const char *key = flag + 2;
    char origin[96];
    snprintf(origin, sizeof origin, "flag %s", flag);
    vb_sweep_slurm scratch = {0};
    vb_sweep_slurm_set(&scratch, key, v, origin);
    vb_sweep_slurm_free(&scratch);
    if (sweep_cluster_key_find(key)->type == KEY_LINES) {
        sweep_sv_push(&c->list_keys, key);
        sweep_sv_push(&c->list_values, v);
    } else {
        vb_sweep_kvs_set(&c->slurm, key, v);
    }
}

/* The command line's scheduler flags over the scenario's keys; a list given
 * as flags replaces the file's list. */
static void apply_slurm_flags(const sweep_cli *c, vb_scenario *s) {
    for (int i = 0; i < c->slurm.n; i++) {
        char origin[96];
        snprintf(origin, sizeof origin, "flag --%s", c->slurm.v[i].key);
        vb_sweep_slurm_set(&s->slurm, c->slurm.v[i].key, c->slurm.v[i].value, origin);
    }
    for (int i = 0; i < c->list_keys.n; i++) {
        bool first = true; /* the first flag of its key: the file's list goes */
        for (int j = 0; j < i && first; j++) first = strcmp(c->list_keys.v[j], c->list_keys.v[i]) != 0;
        if (first) sweep_cluster_clear_list(&s->slurm, c->list_keys.v[i]);
        char origin[96];
        snprintf(origin, sizeof origin, "flag --%s", c->list_keys.v[i]);
        vb_sweep_slurm_set(&s->slurm, c->list_keys.v[i], c->list_values.v[i], origin);
    }
}

/* The scenario FILE, or a config override for every run (--key VALUE,
 * --key=VALUE, or a bare --key meaning true), checked by the config
 * parser's rules. */
static void file_or_override(void *ctx, const char *arg, const char *next) {
    sweep_cli *c = ctx;
    if (strncmp(arg, "--", 2) != 0) {
        if (c->file) vb_die_input("unexpected argument '%s' (one scenario FILE, already given: %s)", arg, c->file);
        c->file = arg;
        return;
    }
    char key[96];
    const char *eq_value;
    if (!vb_flag_split(arg, key, sizeof key, &eq_value)) vb_die_input("flag '%.100s': not an option", arg);
    const char *value = eq_value ? eq_value : next ? next : "true"; /* a bare boolean flag such as --noddp */
    /* not a config key but close to one of sweep's own options: a typo of that option */
    bool config_key = false;
    for (int i = 0; i < vb_config_nkeys() && !config_key; i++) config_key = strcmp(key, vb_config_key_name(i)) == 0;
    if (!config_key && *vb_cli_hint(arg)) vb_die_input("sweep: unknown flag %.*s%s", (int)strcspn(arg, "="), arg, vb_cli_hint(arg));
    char origin[160];
    snprintf(origin, sizeof origin, "flag --%s", key);
    sweep_check_setting(key, value, origin);
    vb_sweep_kvs_set(&c->ov.config, key, value);
}

static void parse_cli(int argc, char **argv, sweep_cli *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->out_dir, sizeof c->out_dir, "results");
    c->ranks_per_node = -1;
    c->timeout_s = -1;
    c->repeats = -1;
    c->shuffled = -1;
    c->order_seed = -1;
    c->threads_per_rank = -1;
    c->warmup_run = -1;
    c->max_failures = 3;
    const char *slurm = getenv("SLURM_JOB_ID");
    int launcher = (slurm && *slurm) ? LAUNCH_SRUN : LAUNCH_MPIRUN;
    static const char *launchers[LAUNCH_COUNT + 1]; /* the table's names */
    for (int k = 0; k < LAUNCH_COUNT; k++) launchers[k] = sweep_launchers[k].name;
    int order_seed = -1; /* as the scenario's order_seed: an int */
    bool sweep_job = false, sweep_job_given = false;
    static const char *const orders[] = {"sequential", "shuffled", NULL}; /* index = shuffled */
    static const char *const yes_no[] = {"false", "true", NULL};
    const vb_cli_opt fixed[] = {
        {.name = "output_dir", .kind = VB_CLI_FUNC, .ptr = c->out_dir, .fn = set_output_dir, .arg = "DIR",
         .help = "where the sweep directory goes (default results)"},
        {.name = "launcher", .kind = VB_CLI_CHOICE, .ptr = &launcher, .choices = launchers,
         .arg = "NAME",
         .help = "mpirun, srun, sbatch, bsub, jsrun, qsub, mpiexec, flux-batch or flux-run (default srun under "
                 "Slurm, else mpirun)"},
        {.name = "dry-run", .kind = VB_CLI_BOOL, .ptr = &c->dry_run,
         .help = "print every run's command (batch launchers: write the job scripts) and run or submit nothing"},
        {.name = "ranks", .kind = VB_CLI_FUNC, .ptr = &c->ov, .fn = set_ranks, .arg = "1,2,4",
         .help = "world sizes instead of the scenario's ranks"},
        {.name = "world_size", .kind = VB_CLI_INT, .ptr = &c->ov.world_size, .ilo = 1, .ihi = INT_MAX, .arg = "N",
         .help = "world size of a layouts scenario"},
        {.name = "ranks_per_node", .kind = VB_CLI_INT, .ptr = &c->ranks_per_node, .ilo = 1, .ihi = INT_MAX,
         .arg = "N", .help = "ranks on a node: ceil(R/N) nodes, min(R,N) ranks each (srun, jsrun, mpiexec, flux)"},
        {.name = "launcher_args", .kind = VB_CLI_FUNC, .ptr = &c->launcher_args, .fn = add_launcher_args,
         .arg = "\"ARGS\"", .help = "split on spaces, right after the launcher's rank-count options"},
        {.name = "timeout_s", .kind = VB_CLI_INT, .ptr = &c->timeout_s, .ilo = 0, .ihi = INT_MAX, .arg = "S",
         .help = "stop a run after S seconds and record it failed (0 = no limit)"},
        {.name = "repeats", .kind = VB_CLI_INT, .ptr = &c->repeats, .ilo = 1, .ihi = INT_MAX, .arg = "N",
         .help = "every point N times, in rounds"},
        {.name = "order", .kind = VB_CLI_CHOICE, .ptr = &c->shuffled, .choices = orders,
         .arg = "sequential|shuffled", .help = "each round in plan order or in a seeded random order"},
        {.name = "order_seed", .kind = VB_CLI_INT, .ptr = &order_seed, .ilo = 0, .ihi = INT_MAX, .arg = "S",
         .help = "seed of the shuffled order"},
        {.name = "threads_per_rank", .kind = VB_CLI_INT, .ptr = &c->threads_per_rank, .ilo = 1, .ihi = INT_MAX,
         .arg = "T", .help = "OpenMP threads of every rank (default: a node's cores / its ranks)"},
        {.name = "no_report", .kind = VB_CLI_BOOL, .ptr = &c->no_report, .help = "no report at the end"},
        {.name = "warmup_run", .kind = VB_CLI_CHOICE, .ptr = &c->warmup_run, .choices = yes_no, .arg = "true|false",
         .help = "one discarded run of the first point before any (default: true when points repeat)"},
        {.name = "max_failures", .kind = VB_CLI_INT, .ptr = &c->max_failures, .ilo = 0, .ihi = INT_MAX, .arg = "K",
         .help = "stop after K consecutive runs failing alike, by class: timeout, signal N or exit N (default 3, 0 = "
                 "never)"},
        {.name = "ab", .kind = VB_CLI_STRING, .ptr = &c->ab, .arg = "KEY=A,B",
         .help = "instead of a FILE: the interleaved A/B comparison of one config key, a baseline with KEY=A "
                 "and a variant with KEY=B alternating in shuffled rounds (default --repeats 5); the report gives "
                 "the verdict with the runs as the unit"},
        {.name = "resume", .kind = VB_CLI_STRING, .ptr = &c->resume, .arg = "SWEEP_DIR",
         .help = "continue a stopped sweep in its own directory"},
        {.name = "retry_failed", .kind = VB_CLI_BOOL, .ptr = &c->retry_failed,
         .help = "with --resume: run the failed runs again"},
        {.name = "collect", .kind = VB_CLI_STRING, .ptr = &c->collect, .arg = "SWEEP_DIR",
         .help = "the exit statuses jobs left in SWEEP_DIR/status into index.csv (jobs over without one: failed), "
                 "then the report"},
        {.name = "cancel", .kind = VB_CLI_STRING, .ptr = &c->cancel, .arg = "SWEEP_DIR",
         .help = "cancel the jobs of SWEEP_DIR's runs still submitted (scancel, bkill, qdel, flux cancel), then collect"},
        {.name = "sweep_job", .kind = VB_CLI_BOOL, .ptr = &sweep_job, .given = &sweep_job_given,
         .help = "batch launchers: one job at the largest node count runs every run in order"},
    };
    /* then one flag per scheduler key (sweep_cluster.c), same name, same rules */
    const int nfixed = (int)(sizeof fixed / sizeof fixed[0]);
    vb_cli_opt *opts = vb_realloc_check(NULL, (size_t)(nfixed + sweep_ncluster_keys) * sizeof *opts);
    memcpy(opts, fixed, sizeof fixed);
    int nopts = nfixed;
    for (int i = 0; i < sweep_ncluster_keys; i++) {
        const sweep_cluster_key *k = &sweep_cluster_keys[i];
        if (k->type == KEY_BOOL) continue; /* sweep_job: above */
        opts[nopts++] = (vb_cli_opt){.name = k->name, .kind = VB_CLI_FUNC, .ptr = c, .fn = add_slurm_flag,
                                     .arg = k->arg, .help = k->help};
    }
    const vb_cli cli = {
        .cmd = "sweep",
        .usage = "vitbench sweep FILE [options] [--<config key> VALUE ...]\n"
                 "       vitbench sweep --ab KEY=A,B [options] [--<config key> VALUE ...]\n"
                 "       vitbench sweep --resume SWEEP_DIR [--retry_failed] [--timeout_s S] [--no_report]\n"
                 "       vitbench sweep --collect SWEEP_DIR | --cancel SWEEP_DIR [--no_report]",
        .about = "Expands the scenario FILE into runs, launches each with its ranks and\n"
                 "collects them under DIR/<name>_<timestamp>/ with index.csv (see bench/sweep/sweep.h). --resume\n"
                 "continues a sweep that was stopped: completed runs are kept, missing or unfinished ones run\n"
                 "(failed ones too with --retry_failed), with the sweep's own scenario copy and options.\n"
                 "Batch launchers (sbatch, bsub, qsub, flux-batch) write job scripts and submit them; the\n"
                 "scheduler keys (the scenario's cluster: block, or the flags below) shape them, each\n"
                 "scheduler taking its own (docs/sweeps.md, \"On a cluster\").\n"
                 "FILE is a path, or the bare name of a shipped scenario (scenarios/NAME.yaml), e.g.\n"
                 "`vitbench sweep weak_scaling --config tiny`. Exit status: 0 every run completed (or was\n"
                 "submitted, or printed), 1 a run failed (or a cancel did), 2 bad input, 130 interrupted.",
        .opts = opts,
        .nopts = nopts,
        .other = file_or_override,
        .ctx = c,
        .other_help = "Any other --<config key> VALUE (or --key=VALUE) is a config override for every run.",
    };
    vb_cli_parse(&cli, argc, argv);
    free(opts);
    /* --sweep_job[=true|false] given at all overrides the scenario's key */
    if (sweep_job_given) vb_sweep_kvs_set(&c->slurm, "sweep_job", sweep_job ? "true" : "false");
    c->launcher = (launcher_kind)launcher;
    c->order_seed = order_seed;
    /* job scripts name these paths (header, #SBATCH --output, SWEEP_DIR) */
    if (c->file) sweep_refuse_line_break("scenario FILE", c->file);
    if (c->resume) sweep_refuse_line_break("flag --resume", c->resume);
    if (c->collect) sweep_refuse_line_break("flag --collect", c->collect);
    if (c->cancel) sweep_refuse_line_break("flag --cancel", c->cancel);
    if (c->resume && c->file)
        vb_die_input("sweep: give either a scenario FILE or --resume SWEEP_DIR, not both (%s, --resume %s)", c->file,
                     c->resume);
    if (c->ab && c->file)
        vb_die_input("sweep: give either a scenario FILE or --ab KEY=A,B, not both (%s, --ab %s)", c->file, c->ab);
    if (c->collect && (c->file || c->ab || c->resume || c->cancel))
        vb_die_input("sweep: --collect %s takes no scenario FILE, --ab, --resume or --cancel", c->collect);
    if (c->cancel && (c->file || c->ab || c->resume))
        vb_die_input("sweep: --cancel %s takes no scenario FILE, --ab or --resume", c->cancel);
    if (!c->file && !c->ab && !c->resume && !c->collect && !c->cancel)
        vb_die_input("sweep: missing the scenario FILE, e.g. scenarios/weak_scaling.yaml (see vitbench sweep --help)");
}

/* FILE as given, else under the source tree; a bare name means scenarios/<name>.yaml. */
static void resolve_scenario(const char *file, char *out, size_t n) {
    char cand[4][2 * VB_PATH_MAX];
    int k = 0;
    if (strlen(file) >= VB_PATH_MAX - 32) vb_die_input("scenario file %.60s...: path too long", file);
    vb_snprintf(cand[k++], sizeof cand[0], "%s", file);
    bool bare = !strchr(file, '/') && !strstr(file, ".y");
    if (bare) vb_snprintf(cand[k++], sizeof cand[0], "scenarios/%s.yaml", file);
    if (file[0] != '/') {
        const char *src = getenv("VB_SOURCE_DIR");
        if (!src || !*src) src = VB_SOURCE_DIR;
        if (strlen(src) < VB_PATH_MAX) {
            vb_snprintf(cand[k++], sizeof cand[0], "%s/%s", src, file);
            if (bare) vb_snprintf(cand[k++], sizeof cand[0], "%s/scenarios/%s.yaml", src, file);
        }
    }
    for (int i = 0; i < k; i++) {
        if (strlen(cand[i]) < n && vb_file_exists(cand[i])) {
            vb_snprintf(out, n, "%s", cand[i]);
            return;
        }
    }
    vb_snprintf(out, n, "%s", file); /* vb_yaml_load names it and says why it cannot be opened */
}

/* Runs an analysis command (report, trace) in a child process, so that its
 * exit on bad input cannot take the sweep down; returns its exit status. */
static int run_analysis(int (*cmd_main)(int, char **), char *name, const char *path, bool quiet) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (quiet) {
            int devnull = open("/dev/null", O_WRONLY);
            if (devnull >= 0) dup2(devnull, 1);
        }
        char *argv[] = {name, (char *)path, NULL};
        exit(cmd_main(2, argv));
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The sweep's report, as `vitbench report DIR` writes it, after a Chrome
 * trace for every completed run that recorded a timeline (the report links
 * them). A failure here is a warning: the runs' results stand either way. */
static void write_report(const char *dir, const char *runs_dir, const sweep_item *items, int n) {
    int traced = 0;
    for (int i = 0; i < n; i++) {
        if (!items[i].status || strcmp(items[i].status, "completed") != 0) continue;
        char run[VB_PATH_MAX], tl[VB_PATH_MAX + 32];
        vb_snprintf(run, sizeof run, "%s/%s", runs_dir, items[i].name);
        vb_snprintf(tl, sizeof tl, "%s/" VB_TIMELINE_CSV, run);
        if (!vb_file_exists(tl)) continue;
        if (run_analysis(vb_trace_main, "trace", run, true) == 0) traced++;
    }
    if (traced) printf("vitbench sweep: trace.json written for %d runs\n", traced);
    if (run_analysis(vb_report_main, "report", dir, false) != 0)
        vb_warn("the report of %s failed (see above); the runs' results are complete, retry with vitbench report %s",
                dir, dir);
}

/* The scheduler's submit command on jobs/SCRIPT (sbatch SCRIPT, bsub <
 * SCRIPT, qsub SCRIPT, flux batch SCRIPT; printed only on a dry run), its
 * output in logs/<name>.submit.log and the job id it printed in
 * status/<name>.job; the rows' status: dry-run, submitted or failed (*code:
 * its exit status). job_log: the job's own output (its scheduler opens it
 * by name): made a fresh file first, so that a link planted there is not
 * what the scheduler writes through. */
static const char *submit(const sweep_tree *t, const sweep_scheduler *sc, const char *script, const char *name,
                          const char *job_log, bool dry_run, int *code) {
    *code = INT_MIN;
    char script_abs[VB_PATH_MAX + 320];
    vb_snprintf(script_abs, sizeof script_abs, "%s/jobs/%s", t->abs, script);
    sweep_strvec sb = {0};
    for (const char *const *w = sc->submit; *w; w++) sweep_sv_push(&sb, *w);
    if (!sc->submit_stdin) sweep_sv_push(&sb, script_abs);
    if (dry_run) {
        sweep_fput_argv(stdout, sb.v);
        if (sc->submit_stdin) {
            fputs(" < ", stdout);
            sweep_fput_quoted(stdout, script_abs);
        }
        fputc('\n', stdout);
        sweep_sv_free(&sb);
        return "dry-run";
    }
    (void)sweep_tree_write_text(t, SWEEP_LOGS, job_log, "");
    char submit_log[320];
    snprintf(submit_log, sizeof submit_log, "%s.submit.log", name);
    const int logfd = sweep_tree_open_log(t, SWEEP_LOGS, submit_log);
    const char *why;
    *code = sweep_launch_input(sb.v, sc->submit_stdin ? script_abs : NULL, logfd, 120, 0, NULL, &why);
    close(logfd);
    sweep_sv_free(&sb);
    if (*code == 0) sweep_record_job(t, name, submit_log, sc);
    return *code == 0 ? "submitted" : "failed";
}

/* index.csv after a run or a submission. Jobs already submitted may be
 * collecting into it: under a batch launcher it is merged with what they
 * recorded (sweep_collect, under the index lock), never overwritten.
 * Returns 0 when index.csv holds the rows. */
static int record_index(const sweep_tree *t, const vb_sweep_plan *plan, sweep_item *items, int n,
                        const sweep_cli *cli) {
    if (sweep_launchers[cli->launcher].batch && !cli->dry_run) {
        int completed, waiting;
        (void)sweep_collect(t, sweep_sched_of(cli->launcher), plan, items, n, &completed, &waiting);
        return 0;
    }
    if (sweep_write_index(t, plan, items, n) == 0) return 0;
    vb_warn("could not rewrite %s/%s (%s): it holds the rows of an earlier write", t->dir, VB_INDEX_CSV,
            strerror(errno));
    return -1;
}

static void free_cli(sweep_cli *c) {
    free(c->ov.ranks);
    c->ov.ranks = NULL;
    vb_sweep_kvs_free(&c->ov.config);
    vb_sweep_kvs_free(&c->slurm);
    sweep_sv_free(&c->launcher_args);
    sweep_sv_free(&c->list_keys);
    sweep_sv_free(&c->list_values);
}

/* --resume DIR / --collect DIR: the sweep's own options, from the command
 * line its sweep.json recorded; of the new command line only --retry_failed,
 * --timeout_s and --no_report apply (--collect: --no_report). */
static void reload_cli(const char *dir, sweep_cli *cli, bool collect) {
    bool no_report = cli->no_report, retry = cli->retry_failed;
    int timeout_s = cli->timeout_s;
    const char *flag = cli->cancel ? "--cancel" : collect ? "--collect" : "--resume";
    if (cli->launcher_args.n || cli->ov.config.n || cli->ov.ranks || cli->ov.world_size || cli->repeats > 0 ||
        cli->shuffled >= 0 || cli->order_seed >= 0 || cli->threads_per_rank > 0 || cli->ranks_per_node >= 0 ||
        cli->dry_run || cli->slurm.n || cli->list_keys.n || (collect && cli->resume) ||
        (collect && (retry || timeout_s >= 0)))
        vb_die_input("flag %s %s: the sweep keeps the options it started with (sweep.json); only %s may be added",
                     flag, dir, collect ? "--no_report" : "--retry_failed, --timeout_s and --no_report");
    char path[VB_PATH_MAX];
    vb_snprintf(path, sizeof path, "%s/" VB_SWEEP_JSON, dir);
    char *text = vb_read_file(path, NULL);
    if (!text) vb_die_input("flag %s %s: no sweep.json there (%s); is it a sweep directory?", flag, dir, strerror(errno));
    cJSON *j = cJSON_Parse(text);
    free(text);
    cJSON *cl = j ? cJSON_GetObjectItemCaseSensitive(j, "command_line") : NULL;
    int n = cJSON_IsArray(cl) ? cJSON_GetArraySize(cl) : 0;
    if (n < 2) vb_die_input("%s: no command_line array (not a sweep.json written by vitbench sweep)", path);
    /* argv of the original `vitbench sweep ...`, without "vitbench"; kept for
     * the process's lifetime since the parsed options point into it (held in
     * a static, so leak checkers see it as reachable, not lost) */
    static char **args;
    args = vb_realloc_check(NULL, (size_t)n * sizeof *args);
    for (int i = 1; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(cl, i);
        if (!cJSON_IsString(a)) vb_die_input("%s: command_line item %d is not a string", path, i);
        args[i - 1] = vb_strdup_check(a->valuestring);
    }
    args[n - 1] = NULL;
    cJSON_Delete(j);
    free_cli(cli);
    parse_cli(n - 1, args, cli);
    if (cli->dry_run && !collect) vb_die_input("flag --resume %s: a dry run has nothing to resume", dir);
    cli->no_report = no_report;
    cli->retry_failed = retry;
    if (timeout_s >= 0) cli->timeout_s = timeout_s;
}

/* --collect DIR: index.csv from the status files, the table, the report.
 * Runs inside job scripts: it launches nothing and checks no data paths.
 * --cancel DIR: the same, after cancelling the jobs of the runs still
 * submitted; the collect turns those whose job is over into failed. The
 * jobs are the sweep's own scheduler's, the one its launcher names. A local
 * sweep writes index.csv itself while it lives and holds its lock for all
 * of it: a collect then is refused (it would put back rows the sweep has
 * since changed), and one after it holds the lock while it writes. */
static int collect_main(sweep_cli *cli) {
    char dir[VB_PATH_MAX];
    const bool cancel = cli->cancel != NULL;
    vb_snprintf(dir, sizeof dir, "%s", cancel ? cli->cancel : cli->collect);
    reload_cli(dir, cli, true);
    sweep_tree tree;
    sweep_tree_open_existing(&tree, dir);
    const bool batch = sweep_launchers[cli->launcher].batch;
    if (!batch) sweep_hold_lock(&tree, cancel ? "flag --cancel" : "flag --collect");
    char path[VB_PATH_MAX];
    vb_snprintf(path, sizeof path, "%s/scenario.yaml", dir);
    vb_scenario sc;
    vb_scenario_load(&sc, path);
    if (cli->repeats > 0) sc.repeats = cli->repeats;
    if (cli->shuffled >= 0) sc.shuffled = cli->shuffled;
    if (cli->order_seed >= 0) sc.order_seed = (unsigned long long)cli->order_seed;
    if (cli->threads_per_rank > 0) sc.threads_per_rank = cli->threads_per_rank;
    apply_slurm_flags(cli, &sc);
    if (cli->ranks_per_node >= 0) sc.ranks_per_node = cli->ranks_per_node;
    int per_node = sc.ranks_per_node;
    vb_sweep_plan plan;
    vb_sweep_expand(&sc, &cli->ov, &plan);
    int nitems = 0;
    sweep_item *items = sweep_plan_items(&sc, &plan, cli->launcher, per_node, &nitems);
    const sweep_scheduler *sched = batch ? sweep_sched_of(cli->launcher) : NULL;
    int completed = 0, waiting = 0;
    int failed = sweep_collect(&tree, sched, &plan, items, nitems, &completed, &waiting);
    int cancel_failed = 0;
    if (cancel) {
        cancel_failed = sweep_cancel_jobs(&tree, sched, items, nitems);
        failed = sweep_collect(&tree, sched, &plan, items, nitems, &completed, &waiting);
    }
    sweep_print_table(&plan, items, nitems);
    printf("vitbench sweep: collected %s: %d completed, %d failed, %d waiting for their job (of %d runs)\n", dir,
           completed, failed, waiting, nitems);
    fflush(stdout);
    char runs_dir[VB_PATH_MAX + 16];
    vb_snprintf(runs_dir, sizeof runs_dir, "%s/runs", tree.abs);
    if (!cli->no_report && (completed > 0 || failed > 0)) write_report(dir, runs_dir, items, nitems);
    free(items);
    vb_sweep_plan_free(&plan);
    vb_scenario_free(&sc);
    free_cli(cli);
    sweep_tree_close(&tree);
    return failed || cancel_failed ? 1 : 0;
}

/* mpirun that cannot start a process (as root without Open MPI's two
 * variables, a broken installation) would fail every run a second after it
 * starts, each log holding the same line: one probe before the first run
 * says it once, with the fix. srun is only looked up (a probe could queue for
 * an allocation). */
static void check_launcher(const sweep_cli *cli, const vb_scenario *sc, int per_node, const char *exe) {
    if (cli->dry_run || cli->launcher != LAUNCH_MPIRUN) return;
    sweep_strvec cmd = {0};
    sweep_build_launch(&cmd, LAUNCH_MPIRUN, sc, 1, per_node, &cli->launcher_args);
    sweep_sv_push(&cmd, exe);
    sweep_sv_push(&cmd, "version");
    char log[] = "/tmp/vitbench_launcher_check.XXXXXX";
    int fd = mkstemp(log);
    if (fd < 0) vb_die_internal("mkstemp: %s", strerror(errno));
    const char *why;
    int rc = sweep_launch(cmd.v, fd, 120, 1, NULL, &why);
    close(fd);
    char line[512];
    sweep_last_log_line(log, line, sizeof line);
    unlink(log);
    sweep_sv_free(&cmd);
    if (rc == 0) return;
    const bool root_vars = geteuid() == 0 && (!getenv("OMPI_ALLOW_RUN_AS_ROOT") || !getenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"));
    vb_die_input("flag --launcher mpirun: mpirun cannot start a run (mpirun -np 1 ... vitbench version exited %d%s%s: "
                 "%s)%s; no run was started",
                 rc, why[0] ? ", " : "", why, line[0] ? line : "no output",
                 root_vars ? "; as root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in "
                             "the environment"
                           : "");
}

/* "# OMP_NUM_THREADS=T <argv>" as a run's log's first line */
typedef struct {
    int threads;
    char *const *argv;
} log_head;

static void write_log_head(FILE *f, void *ctx) {
    const log_head *h = ctx;
    fprintf(f, "# OMP_NUM_THREADS=%d ", h->threads);
    sweep_fput_argv(f, h->argv);
    fputc('\n', f);
}

/* logs/<name>: a fresh file with its first line (a link or an earlier file
 * there replaced, never written through), then opened to append the run's
 * output (sweep_tree_open_log: exit 2 when a link was put there meanwhile). */
static int start_log(const sweep_tree *t, const char *name, int threads, char *const *argv) {
    log_head h = {threads, argv};
    sweep_tree_write_or_die(t, SWEEP_LOGS, name, 0, write_log_head, &h);
    return sweep_tree_open_log(t, SWEEP_LOGS, name);
}

/* One discarded run of the first point still to run: the machine's first run
 * after a pause (cold caches, clocks, page cache) measured 2-3x slower than
 * its repeats, and would otherwise land on one point. Its output goes to
 * SWEEP_DIR/warmup and logs/warmup.log; sweep.json records it. */
static void warmup_run(const sweep_tree *t, const char *exe, const vb_scenario *sc, const sweep_cli *cli, int per_node,
                       int timeout_s, const sweep_item *it) {
    char wdir[VB_PATH_MAX + 16], log_path[VB_PATH_MAX + 32];
    vb_snprintf(wdir, sizeof wdir, "%s/warmup", t->dir);
    sweep_tree_fd_path(t, SWEEP_LOGS, "warmup.log", log_path, sizeof log_path);
    sweep_strvec cmd = {0};
    sweep_build_launch(&cmd, cli->launcher, sc, it->run->ranks, per_node, &cli->launcher_args);
    sweep_push_vitbench_args(&cmd, exe, sc, it->run, "warmup", wdir);
    sweep_tree_check(t);
    const int logfd = start_log(t, "warmup.log", it->threads, cmd.v);
    printf("vitbench sweep: warm-up run (discarded) of %s\n", it->name);
    fflush(stdout);
    const double t0 = vb_now();
    const char *why;
    const sweep_run_ref ref = {t, "warmup"};
    const int rc = sweep_launch(cmd.v, logfd, timeout_s, it->threads, &ref, &why);
    close(logfd);
    const double secs = vb_now() - t0;
    sweep_sv_free(&cmd);
    sweep_record_warmup(t, it->name, rc, secs);
    if (rc != 0) {
        char line[512];
        sweep_last_log_line(log_path, line, sizeof line);
        printf("vitbench sweep: warm-up run failed, exit %d after %.1f s%s%s: %s\n", rc, secs, why[0] ? ", " : "", why,
               line[0] ? line : "(no output)");
    } else {
        printf("vitbench sweep: warm-up run done in %.1f s\n", secs);
    }
    fflush(stdout);
}

/* Every path the sweep and its job scripts name below the sweep directory
 * (logs/<run>.unfinished-N.log the longest) fits VB_PATH_MAX: checked before
 * anything is created, from the absolute path the directory will have (job
 * scripts name it so), so that a long working directory or --output_dir is
 * exit 2 with one line instead of an internal error after a half-made
 * sweep directory. */
static void check_path_room(const sweep_cli *cli, const char *resume_dir, const char *dir_flag, const char *name,
                            const vb_sweep_plan *plan) {
    size_t longest = 0; /* a run's name: its point's, then _rep=R */
    for (int i = 0; i < plan->nruns; i++)
        if (strlen(plan->runs[i].name) + sizeof "_rep=2147483647" > longest)
            longest = strlen(plan->runs[i].name) + sizeof "_rep=2147483647";
    char cwd[PATH_MAX] = "";
    const char *given = resume_dir[0] ? resume_dir : cli->out_dir;
    size_t base = strlen(given);
    if (given[0] != '/') {
        if (!getcwd(cwd, sizeof cwd)) vb_die_input("%s %s: the current directory's path cannot be read (%s)", dir_flag,
                                                   given, strerror(errno));
        base += strlen(cwd) + 1;
    }
    /* <name>_<stamp>[-N] below --output_dir; the sweep directory itself on --resume */
    if (!resume_dir[0]) base += 1 + strlen(name) + sizeof "_YYYYmmdd-HHMMSS-99999";
    /* /logs/<run>.unfinished-999.log, jobs/<run>.sbatch, a temporary's .<name>.tmp.XXXXXX */
    const size_t below = sizeof "/status/." - 1 + longest + sizeof ".unfinished-999.log.XXXXXX";
    if (base + below >= VB_PATH_MAX)
        vb_die_input("%s %s: the sweep directory's path would be %zu characters%s%s, and the files below it up to %zu "
                     "more: more than the %d a path may have here; give a shorter directory",
                     dir_flag, given, base, cwd[0] ? " (in the current directory, " : "", cwd[0] ? "itself long)" : "",
                     below, VB_PATH_MAX - 1);
}

/* --ab's scenario, written where the sweep reads its FILE from and removed
 * once the sweep has its own copy (or when it exits before that) */
static char g_ab_path[64];
static void remove_ab_file(void) {
    if (g_ab_path[0]) unlink(g_ab_path);
    g_ab_path[0] = '\0';
}

static bool ab_value_ok(const char *v) {
    if (!*v) return false;
    for (const char *c = v; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr("_.:/+-", *c)))
            return false;
    return true;
}

/* --ab KEY=A,B: a flags scenario of one key, its baseline KEY=A and its one
 * variant KEY=B, repeated 5 times in shuffled rounds, so that A and B
 * alternate run by run in one invocation and the report compares them with
 * the runs as the unit (verdict.h) */
static void make_ab_scenario(sweep_cli *c) {
    const char *eq = strchr(c->ab, '='), *comma = eq ? strchr(eq + 1, ',') : NULL;
    if (!eq || !comma || eq == c->ab || strchr(comma + 1, ','))
        vb_die_input("flag --ab: '%s' is not KEY=A,B (one config key and its two values)", c->ab);
    char key[96], a[256], b[256];
    if ((size_t)(eq - c->ab) >= sizeof key || (size_t)(comma - eq - 1) >= sizeof a || strlen(comma + 1) >= sizeof b)
        vb_die_input("flag --ab: '%.120s' is too long", c->ab);
    snprintf(key, sizeof key, "%.*s", (int)(eq - c->ab), c->ab);
    snprintf(a, sizeof a, "%.*s", (int)(comma - eq - 1), eq + 1);
    snprintf(b, sizeof b, "%s", comma + 1);
    for (const char *k = key; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_'))
            vb_die_input("flag --ab: '%s' is not a config key", key);
    /* values are written into a YAML file: only what config values are made of */
    if (!ab_value_ok(a) || !ab_value_ok(b))
        vb_die_input("flag --ab %s: values may hold only letters, digits and _ . : / + -", c->ab);
    if (strcmp(a, b) == 0) vb_die_input("flag --ab %s: A and B are the same value", c->ab);
    sweep_check_setting(key, a, "flag --ab (A)");
    sweep_check_setting(key, b, "flag --ab (B)");
    snprintf(g_ab_path, sizeof g_ab_path, "/tmp/vitbench_ab.XXXXXX");
    int fd = mkstemp(g_ab_path);
    if (fd < 0) vb_die_env("flag --ab: cannot create a scenario file in /tmp (%s)", strerror(errno));
    atexit(remove_ab_file);
    FILE *f = fdopen(fd, "w");
    if (!f) vb_die_env("flag --ab: cannot write %s (%s)", g_ab_path, strerror(errno));
    fprintf(f,
            "# vitbench sweep --ab %s: the interleaved A/B comparison of %s\n"
            "name: ab_%s\n"
            "description: '%s=%s (baseline) against %s=%s, alternating run by run'\n"
            "repeats: 5\n"
            "baseline: {%s: '%s'}\n"
            "flags:\n"
            "  %s: ['%s']\n",
            c->ab, key, key, key, a, key, b, key, a, key, b);
    if (fclose(f) != 0) vb_die_env("flag --ab: cannot write %s (%s)", g_ab_path, strerror(errno));
    c->file = g_ab_path;
}

int vb_sweep_main(int argc, char **argv) {
    sweep_cli cli;
    parse_cli(argc, argv, &cli);
    if (cli.collect || cli.cancel) return collect_main(&cli);
    if (cli.ab && !cli.resume) make_ab_scenario(&cli);
    /* A sweep under mpirun would start a copy of itself per rank, each
     * launching every run: refuse before anything is created. */
    static const char *mpi_env[] = {"OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof mpi_env / sizeof mpi_env[0]; i++)
        if (getenv(mpi_env[i]))
            vb_die_input("sweep: running inside an MPI job (%s is set); start the sweep itself without mpirun/srun, "
                         "it launches each run's ranks",
                         mpi_env[i]);
    /* srun --mpi=none (a common MpiDefault) sets no PMI variable: a step of
     * several tasks would still start one sweep per task. A one-task step
     * (srun --pty bash) is an ordinary interactive shell and is allowed. */
    const char *step_tasks = getenv("SLURM_STEP_NUM_TASKS");
    if (getenv("SLURM_STEP_ID") && step_tasks && atoi(step_tasks) > 1)
        vb_die_input("sweep: running inside an srun step of %s tasks; start the sweep itself without srun, "
                     "it launches each run's ranks",
                     step_tasks);

    char resume_dir[VB_PATH_MAX] = "";
    bool retry_failed = cli.retry_failed;
    if (cli.resume) {
        vb_snprintf(resume_dir, sizeof resume_dir, "%s", cli.resume);
        reload_cli(resume_dir, &cli, false);
    }
    /* job scripts cd here first, and a relative --output_dir lies under it;
     * their log directive (#SBATCH --output, #BSUB -o, ...) names a path under
     * the sweep directory, read back by the scheduler's own rules */
    const bool batch = sweep_launchers[cli.launcher].batch;
    const sweep_scheduler *sched = sweep_sched_of(cli.launcher);
    const char *dir_flag = resume_dir[0] ? "flag --resume" : "flag --output_dir";
    const char *dir_given = resume_dir[0] ? resume_dir : cli.out_dir;
    char cwd[VB_PATH_MAX];
    if (batch) {
        sched->check_log_dir(dir_flag, dir_given);
        if (getcwd(cwd, sizeof cwd)) {
            sweep_refuse_line_break("the current directory", cwd);
            if (dir_given[0] != '/') sched->check_log_dir("the current directory", cwd);
        }
    }
    char path[VB_PATH_MAX];
    if (resume_dir[0])
        vb_snprintf(path, sizeof path, "%s/scenario.yaml", resume_dir); /* the sweep's own copy */
    else
        resolve_scenario(cli.file, path, sizeof path);
    vb_scenario sc;
    vb_scenario_load(&sc, path);
    if (cli.repeats > 0) sc.repeats = cli.repeats;
    if (cli.shuffled >= 0) sc.shuffled = cli.shuffled;
    if (cli.order_seed >= 0) sc.order_seed = (unsigned long long)cli.order_seed;
    if (cli.threads_per_rank > 0) sc.threads_per_rank = cli.threads_per_rank;
    apply_slurm_flags(&cli, &sc);
    if (cli.ranks_per_node >= 0) sc.ranks_per_node = cli.ranks_per_node; /* run_names' {nodes} */
    vb_sweep_plan plan;
    vb_sweep_expand(&sc, &cli.ov, &plan);
    sweep_check_named_configs(&plan);
    int per_node = sc.ranks_per_node;
    sweep_slurm_check(&sc, &plan, cli.launcher, per_node);
    sweep_check_allocation(&sc, &plan, cli.launcher, per_node, cli.dry_run);
    int timeout_s = cli.timeout_s >= 0 ? cli.timeout_s : sc.timeout_s;
    if (plan.nruns == 0) vb_die_input("%s: the scenario expands to no runs", sc.path);
    check_path_room(&cli, resume_dir, dir_flag, sc.name, &plan);
    sweep_preflight(&sc, &plan, cli.launcher, cli.dry_run);

    for (const char *const *need = sweep_launchers[cli.launcher].needs; !cli.dry_run && *need; need++)
        if (!sweep_in_path(*need))
            vb_die_input("flag --launcher %s: '%s' not found in PATH%s", sweep_launchers[cli.launcher].name, *need,
                         batch ? " (use --dry-run to only write job scripts)" : "");
    char exe[VB_PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) vb_die_internal("cannot locate the vitbench binary via /proc/self/exe: %s", strerror(errno));
    exe[k] = '\0';
    sweep_refuse_line_break("the vitbench binary's path (/proc/self/exe)", exe); /* every launcher line runs it */
    check_launcher(&cli, &sc, per_node, exe);

    int nitems = 0;
    sweep_item *items = sweep_plan_items(&sc, &plan, cli.launcher, per_node, &nitems);

    char dir[VB_PATH_MAX], id[256];
    if (resume_dir[0]) {
        vb_snprintf(dir, sizeof dir, "%s", resume_dir);
        char copy[VB_PATH_MAX];
        vb_snprintf(copy, sizeof copy, "%s", resume_dir);
        vb_snprintf(id, sizeof id, "%s", basename(copy));
    } else {
        sweep_create_dir(cli.out_dir, sc.name, dir, sizeof dir, id, sizeof id);
    }
    /* the sweep directory and its runs/ logs/ (jobs/ status/) held open for
     * the sweep's life: everything below is written through them */
    sweep_tree tree;
    sweep_tree_open(&tree, dir, batch);
    /* for the sweep's whole life: a --resume while it runs would start every
     * remaining point a second time, in parallel with this one */
    if (!cli.dry_run) sweep_hold_lock(&tree, resume_dir[0] ? "flag --resume" : "sweep");
    /* a killed sweep's run may still run (its launcher did not stop it):
     * running that point again beside it would measure both on shared cores */
    if (resume_dir[0]) sweep_refuse_live_run(&tree, "flag --resume");
    if (!resume_dir[0]) {
        sweep_copy_file(sc.path, &tree, "scenario.yaml");
        sweep_write_sweep_json(&tree, id, &sc, &cli, &plan, exe, argc, argv, nitems);
    }
    remove_ab_file(); /* the sweep reads its own copy from now on */
    /* batch jobs start later, elsewhere: their paths must not depend on our cwd */
    const char *dir_abs = tree.abs;
    /* a symbolic link on the way can bring in what the flag itself did not hold */
    if (batch) {
        sweep_refuse_line_break(dir_flag, dir_abs);
        sched->check_log_dir(dir_flag, dir_abs);
    }
    const char *run_base = batch ? dir_abs : dir;
    tree.base = run_base;
    char runs_dir[VB_PATH_MAX + 16];
    vb_snprintf(runs_dir, sizeof runs_dir, "%s/runs", run_base);

    if (resume_dir[0] && batch) {
        /* what the jobs recorded, and jobs their scheduler says are over
         * without a status (cancelled, out of time) failed, before deciding
         * what runs again: a job still queued or running is left alone */
        sweep_item *scratch = vb_realloc_check(NULL, (size_t)nitems * sizeof *scratch);
        memcpy(scratch, items, (size_t)nitems * sizeof *scratch);
        int completed, waiting;
        (void)sweep_collect(&tree, sched, &plan, scratch, nitems, &completed, &waiting);
        free(scratch);
    }
    int kept = resume_dir[0] ? sweep_keep_finished(&tree, items, nitems, retry_failed) : 0;
    if (sweep_write_index(&tree, &plan, items, nitems) != 0)
        vb_die_env("cannot write %s/%s: %s", dir, VB_INDEX_CSV, strerror(errno));
    printf("vitbench sweep: %s: %d runs (%d points x %d repeats, %s order, %s%s) -> %s\n", sc.name, nitems, plan.nruns,
           sc.repeats, vb_scenario_shuffled(&sc) ? "shuffled" : "sequential", sweep_launchers[cli.launcher].name,
           cli.dry_run ? ", dry run" : "", dir);
    if (resume_dir[0]) printf("vitbench sweep: resuming: %d runs kept, %d to run\n", kept, nitems - kept);
    fflush(stdout);
    if (!cli.dry_run) sweep_catch_stop_signals();

    if (!cli.dry_run && !batch &&
        (cli.warmup_run > 0 || (cli.warmup_run < 0 && sc.repeats > 1)))
        for (int i = 0; i < nitems; i++)
            if (!items[i].status) {
                warmup_run(&tree, exe, &sc, &cli, per_node, timeout_s, &items[i]);
                break;
            }

    int failed = 0, interrupted = 0;
    /* runs failing alike one after another: the same failure class (timeout,
     * signal, exit code), e.g. a launcher or environment problem every run hits */
    int streak = 0, stopped = 0;
    /* index.csv holds what the table says only while its writes succeed */
    bool index_ok = true;
    char streak_sig[48] = "", last_line[512] = "";
    sweep_job_ctx job = {id, dir_abs, exe, &sc, per_node, timeout_s, &cli.launcher_args, cli.launcher};
    if (batch && sc.slurm.sweep_job) {
        /* one job for every run still to run; index.csv rows say submitted (or
         * dry-run) until the job's collects turn them into completed / failed */
        char script[320], name[64] = "sweep_job";
        for (int k = 2; k < 1000; k++) {
            snprintf(script, sizeof script, "%s.%s", name, sched->script_ext);
            if (!sweep_tree_exists(&tree, SWEEP_JOBS, script)) break;
            snprintf(name, sizeof name, "sweep_job-%d", k);
        }
        char log_abs[VB_PATH_MAX + 96], job_log[96];
        snprintf(job_log, sizeof job_log, "%s.log", name);
        vb_snprintf(log_abs, sizeof log_abs, "%s/logs/%s", dir_abs, job_log);
        for (int i = 0; i < nitems; i++)
            if (!items[i].status) sweep_clear_status(&tree, &items[i]);
        sweep_write_sweep_job(&tree, script, &job, items, nitems, log_abs);
        /* the rows say submitted before the job can start and collect them */
        bool *mine = vb_realloc_check(NULL, (size_t)nitems * sizeof *mine);
        int todo = 0;
        for (int i = 0; i < nitems; i++) {
            mine[i] = !items[i].status;
            if (mine[i]) items[i].status = cli.dry_run ? "dry-run" : "submitted";
            todo += mine[i];
        }
        index_ok = record_index(&tree, &plan, items, nitems, &cli) == 0;
        int code;
        const char *st = submit(&tree, sched, script, name, job_log, cli.dry_run, &code);
        if (strcmp(st, "submitted") == 0) { /* every run of the job follows its id */
            char submit_log[96];
            snprintf(submit_log, sizeof submit_log, "%s.submit.log", name);
            for (int i = 0; i < nitems; i++)
                if (mine[i]) sweep_record_job(&tree, items[i].name, submit_log, sched);
        }
        if (!cli.dry_run) {
            printf("vitbench sweep: sweep job %s/jobs/%s with %d runs: %s (%s exit %d, see %s/logs/%s.submit.log)\n",
                   dir_abs, script, todo, st, sched->submit[0], code, dir, name);
            if (strcmp(st, "failed") == 0) {
                for (int i = 0; i < nitems; i++)
                    if (mine[i]) {
                        items[i].status = "failed";
                        items[i].exit_code = code;
                        snprintf(items[i].failure, sizeof items[i].failure, "%s exit %d", sched->submit[0], code);
                    }
                failed += todo;
                index_ok = record_index(&tree, &plan, items, nitems, &cli) == 0;
            }
        }
        free(mine);
    }
    for (int i = 0; i < nitems && !interrupted && !stopped; i++) {
        if (sweep_stop_signal()) { /* arrived between runs: do not start another */
            interrupted = 1;
            break;
        }
        sweep_item *it = &items[i];
        if (it->status) continue; /* kept from before a resume */
        const vb_sweep_run *r = it->run;
        sweep_strvec cmd = {0};
        sweep_build_launch(&cmd, cli.launcher, &sc, r->ranks, per_node, &cli.launcher_args);
        sweep_push_vitbench_args(&cmd, exe, &sc, r, it->name, runs_dir);
        char log_name[320], log_path[VB_PATH_MAX + 400];
        snprintf(log_name, sizeof log_name, "%s.log", it->name);
        sweep_tree_fd_path(&tree, SWEEP_LOGS, log_name, log_path, sizeof log_path); /* read in the logs/ held open */
        /* runs/, logs/ (jobs/, status/) still the directories this sweep holds */
        sweep_tree_check(&tree);

        if (batch) {
            char script[320];
            snprintf(script, sizeof script, "%s.%s", it->name, sched->script_ext);
            sweep_clear_status(&tree, it);
            sweep_write_run_script(&tree, script, &job, it, i, nitems);
            /* the row says submitted before the job can start and collect it */
            it->status = cli.dry_run ? "dry-run" : "submitted";
            index_ok = record_index(&tree, &plan, items, nitems, &cli) == 0;
            char job_log[340];
            snprintf(job_log, sizeof job_log, "%s%s", it->name, sched->job_log_is_run_log ? ".log" : ".job.log");
            int code;
            const char *st = submit(&tree, sched, script, it->name, job_log, cli.dry_run, &code);
            if (!cli.dry_run) {
                printf("vitbench sweep: [%d/%d] %s: %s (%s exit %d, see %s/logs/%s.submit.log)\n", i + 1, nitems,
                       it->name, st, sched->submit[0], code, dir, it->name);
                if (strcmp(st, "failed") == 0) {
                    it->status = "failed";
                    it->exit_code = code;
                    snprintf(it->failure, sizeof it->failure, "%s exit %d", sched->submit[0], code);
                    failed++;
                }
                if (sweep_stop_signal()) interrupted = 1;
            }
        } else if (cli.dry_run) {
            printf("OMP_NUM_THREADS=%d ", it->threads);
            sweep_fput_argv(stdout, cmd.v);
            fputc('\n', stdout);
            it->status = "dry-run";
        } else {
            printf("vitbench sweep: [%d/%d] %s: OMP_NUM_THREADS=%d ", i + 1, nitems, it->name, it->threads);
            sweep_fput_argv(stdout, cmd.v);
            fputc('\n', stdout);
            const int logfd = start_log(&tree, log_name, it->threads, cmd.v);
            double t0 = vb_now();
            const char *why;
            const sweep_run_ref ref = {&tree, it->name};
            it->exit_code = sweep_launch(cmd.v, logfd, timeout_s, it->threads, &ref, &why);
            close(logfd);
            if (why[0])
                sweep_tree_appendf(&tree, SWEEP_LOGS, log_name, VB_SWEEP_STOP_LINE "%s) after %.1f s", why,
                                   vb_now() - t0);
            if (strcmp(why, "interrupted") == 0) {
                /* the sweep stopped it (Ctrl-C, SIGTERM): not a failure of the
                 * run, so no row; --resume moves its leftovers aside and runs it
                 * again */
                it->status = NULL;
                it->exit_code = INT_MIN;
                printf("vitbench sweep: [%d/%d] %s: interrupted after %.1f s: not recorded, vitbench sweep --resume %s "
                       "runs it again\n",
                       i + 1, nitems, it->name, vb_now() - t0, dir);
                interrupted = 1;
                fflush(stdout);
                sweep_sv_free(&cmd);
                index_ok = record_index(&tree, &plan, items, nitems, &cli) == 0;
                break;
            }
            it->status = it->exit_code == 0 ? "completed" : "failed";
            last_line[0] = '\0';
            if (it->exit_code != 0) {
                failed++;
                sweep_mark_run_failed(&tree, it, NULL);
                sweep_last_log_line(log_path, last_line, sizeof last_line);
                /* failing alike: the same class (timeout, signal, exit code),
                 * never the log text, which differs run to run */
                sweep_failure_class(it->exit_code, why, it->failure, sizeof it->failure);
                streak = strcmp(it->failure, streak_sig) == 0 ? streak + 1 : 1;
                snprintf(streak_sig, sizeof streak_sig, "%s", it->failure);
            } else {
                streak = 0;
                streak_sig[0] = '\0';
            }
            if (it->exit_code == 0 && !sweep_read_headline(&tree, it)) {
                /* a link at runs/<run> (put there during the run) leads to another run's */
                it->status = "failed";
                failed++;
                snprintf(it->failure, sizeof it->failure, "runs/<run> not a real directory");
            }
            printf("vitbench sweep: [%d/%d] %s: %s, exit %d, %.1f s%s%s", i + 1, nitems, it->name, it->status,
                   it->exit_code, vb_now() - t0, it->failure[0] ? ": " : "", it->failure);
            if (!isnan(it->headline[0])) printf(", FULL %.2f samples/s", it->headline[0]);
            printf("\n");
            if (last_line[0]) printf("vitbench sweep:     last line of its log: %s\n", last_line);
            if (sweep_stop_signal()) interrupted = 1;
            /* more runs to come: the streak stops them; after the last there is nothing to stop */
            bool more = false;
            for (int k = i + 1; k < nitems && !more; k++) more = !items[k].status;
            if (cli.max_failures > 0 && streak >= cli.max_failures && more) {
                printf("vitbench sweep: stopping: %d runs in a row failed alike (%s; last line: %s); fix that and "
                       "continue with vitbench sweep --resume %s\n",
                       streak, it->failure, last_line[0] ? last_line : "no output", dir);
                stopped = 1;
            }
        }
        fflush(stdout);
        sweep_sv_free(&cmd);
        index_ok = record_index(&tree, &plan, items, nitems, &cli) == 0;
    }

    int recorded = 0, completed = 0;
    failed = 0; /* over the whole table: a resumed sweep keeps its earlier failures */
    for (int i = 0; i < nitems; i++) {
        if (!items[i].status) continue;
        recorded++;
        completed += strcmp(items[i].status, "completed") == 0;
        failed += strcmp(items[i].status, "failed") == 0;
    }
    if (!cli.dry_run && !batch) sweep_print_table(&plan, items, nitems);
    if (index_ok)
        printf("vitbench sweep: index %s/%s (%d of %d runs recorded)\n", dir, VB_INDEX_CSV, recorded, nitems);
    else
        printf("vitbench sweep: index %s/%s NOT up to date: its last rewrite failed (see above); the table above has "
               "%d of %d runs; vitbench sweep --collect %s writes it again\n",
               dir, VB_INDEX_CSV, recorded, nitems, dir);
    /* the report of what ran, failures too (an all-failed sweep's says why),
     * unless asked not to, nothing ran here, or a Ctrl-C wants out */
    if (!cli.no_report && !interrupted && recorded > 0 && (completed > 0 || failed > 0))
        write_report(dir, runs_dir, items, nitems);
    if (stopped)
        printf("vitbench sweep: %d of %d runs not started after the failures above\n", nitems - recorded, nitems);
    if (interrupted)
        vb_warn("sweep interrupted (signal %d) after %d of %d runs; continue with vitbench sweep --resume %s",
                sweep_stop_signal(), recorded, nitems, dir);
    if (failed)
        printf("vitbench sweep: %d of %d runs failed; their logs are in %s/logs\n", failed, recorded, dir);
    else if (!interrupted)
        printf("vitbench sweep: all %d runs %s\n", recorded,
               cli.dry_run ? "printed (dry run)" : batch ? "submitted" : "completed");
    fflush(stdout);

    free(items);
    vb_sweep_plan_free(&plan);
    vb_scenario_free(&sc);
    free_cli(&cli);
    sweep_tree_close(&tree);
    if (!index_ok) return 1;
    return interrupted ? 130 : failed ? 1 : 0;
}
