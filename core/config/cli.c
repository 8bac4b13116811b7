/* cli.c: table-driven command lines over getopt_long (cli.h).
 *
 * Two passes. The first walks argv once: -h / --help, positional arguments
 * and flags the table does not have go to the command's `other` callback (or
 * are refused); the table's own flags, with their values, are collected into
 * a second argv under the table's spelling of their names. getopt_long then
 * parses that argv, where every name is an exact match, and each value is
 * checked and stored by its kind.
 */
#include "core/config/cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/flag.h"
#include "core/util/common.h"

/* name: normalised by vb_flag_split ('_' for '-') */
static int find_opt(const vb_cli *cli, const char *name) {
    for (int k = 0; k < cli->nopts; k++)
        if (vb_flag_same_name(name, cli->opts[k].name)) return k;
    return -1;
}

static bool is_help(const char *a) { return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0; }

static bool takes_value(const vb_cli_opt *o) { return o->kind != VB_CLI_BOOL; }

/* Flags rewritten for getopt_long: the table's spelling of the name
 * (--dry_run for --dry-run), and a bool's separate value joined on
 * (--dry-run yes as --dry-run=yes, as getopt_long takes an optional value
 * only after '='). Kept for the process's lifetime: a value given as
 * --name=VALUE is stored as a pointer into its token. */
static char **g_respelled;
static int g_nrespelled;

/* token: "--<n characters of name>[=value]"; joined: a value to append with
 * '=' (NULL: none) */
static char *respell(char *token, const char *name, size_t n, const char *joined) {
    if (!joined && strncmp(token + 2, name, n) == 0) return token;
    const char *tail = token + 2 + n; /* "" or "=value" */
    size_t len = 2 + n + strlen(tail) + (joined ? 1 + strlen(joined) : 0);
    char *copy = vb_malloc_check(len + 1);
    char **grown = vb_realloc_check(g_respelled, (size_t)(g_nrespelled + 1) * sizeof *grown);
    snprintf(copy, len + 1, "--%s%s%s%s", name, tail, joined ? "=" : "", joined ? joined : "");
    g_respelled = grown;
    g_respelled[g_nrespelled++] = copy;
    return copy;
}

/* the table of the vb_cli_parse in progress, for vb_cli_hint */
static const vb_cli *g_parsing;

const char *vb_cli_hint(const char *arg) {
    static char hint[160];
    hint[0] = '\0';
    char name[128];
    const char *value;
    if (!g_parsing || !vb_flag_split(arg, name, sizeof name, &value)) return hint;
    vb_flag_near near;
    vb_flag_near_init(&near, name);
    for (int k = 0; k < g_parsing->nopts; k++) vb_flag_near_try(&near, g_parsing->opts[k].name);
    const char *best = vb_flag_near_best(&near);
    if (best) snprintf(hint, sizeof hint, "; did you mean --%s?", best);
    return hint;
}

static void store_int(const vb_cli *cli, const vb_cli_opt *o, const char *v, long long tmin, long long tmax) {
    long long lo = o->ilo > tmin ? o->ilo : tmin, hi = o->ihi < tmax ? o->ihi : tmax, x;
    if (!vb_flag_parse_ll(v, &x) || x < lo || x > hi) {
        if (hi == tmax && lo == tmin)
            vb_die_input("%s: --%s expects an integer, got '%.200s'", cli->cmd, o->name, v);
        if (hi == tmax)
            vb_die_input("%s: --%s expects an integer >= %lld, got '%.200s'", cli->cmd, o->name, lo, v);
        if (lo == tmin)
            vb_die_input("%s: --%s expects an integer <= %lld, got '%.200s'", cli->cmd, o->name, hi, v);
        vb_die_input("%s: --%s expects an integer in [%lld, %lld], got '%.200s'", cli->cmd, o->name, lo, hi, v);
    }
    if (o->kind == VB_CLI_INT)
        *(int *)o->ptr = (int)x;
    else
        *(long long *)o->ptr = x;
}

static void store_double(const vb_cli *cli, const vb_cli_opt *o, const char *v) {
    double x = NAN;
    vb_num_status st = vb_flag_parse_double(v, &x);
    if (st != VB_NUM_OK && st != VB_NUM_BAD) /* hexadecimal, too large, too small: said as given */
        vb_die_input("%s: --%s: '%.200s' is %s", cli->cmd, o->name, v, vb_num_problem(st));
    bool ok = st == VB_NUM_OK && (o->dlo_open ? x > o->dlo : x >= o->dlo) && x <= o->dhi;
    if (ok) {
        *(double *)o->ptr = x;
        return;
    }
    if (isinf(o->dhi))
        vb_die_input("%s: --%s expects a number %s %g, got '%.200s'", cli->cmd, o->name, o->dlo_open ? ">" : ">=",
                     o->dlo, v);
    vb_die_input("%s: --%s expects a number in %c%g, %g], got '%.200s'", cli->cmd, o->name, o->dlo_open ? '(' : '[',
                 o->dlo, o->dhi, v);
}

static void store_choice(const vb_cli *cli, const vb_cli_opt *o, const char *v) {
    for (int i = 0; o->choices[i]; i++) {
        if (strcmp(v, o->choices[i]) == 0) {
            *(int *)o->ptr = i;
            return;
        }
    }
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; o->choices[i] && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", o->choices[i]);
    vb_die_input("%s: --%s expects one of %s, got '%.200s'", cli->cmd, o->name, list, v);
}

/* value: the option's argument, NULL for a bool given alone */
static void store(const vb_cli *cli, const vb_cli_opt *o, const char *v) {
    if (o->given) *o->given = true;
    switch (o->kind) {
    case VB_CLI_INT: store_int(cli, o, v, INT_MIN, INT_MAX); break;
    case VB_CLI_LONG: store_int(cli, o, v, LLONG_MIN, LLONG_MAX); break;
    case VB_CLI_DOUBLE: store_double(cli, o, v); break;
    case VB_CLI_STRING:
        if (!*v) vb_die_input("%s: --%s expects a non-empty value", cli->cmd, o->name);
        *(const char **)o->ptr = v;
        break;
    case VB_CLI_BOOL:
        if (!v) {
            *(bool *)o->ptr = true;
        } else if (!vb_flag_parse_bool(v, (bool *)o->ptr)) {
            vb_die_input("%s: --%s expects true or false, got '%.200s'", cli->cmd, o->name, v);
        }
        break;
    case VB_CLI_CHOICE: store_choice(cli, o, v); break;
    case VB_CLI_FUNC: {
        char flag[128];
        snprintf(flag, sizeof flag, "--%s", o->name);
        o->fn(flag, v, o->ptr);
        break;
    }
    }
}

void vb_cli_parse(const vb_cli *cli, int argc, char **argv) {
    char **own = vb_malloc_check((size_t)(argc + 1) * sizeof *own);
    struct option *longopts = vb_calloc_check((size_t)cli->nopts + 1, sizeof *longopts);
    int nown = 0;
    own[nown++] = (char *)cli->cmd;
    g_parsing = cli;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (is_help(a)) {
            vb_cli_print_help(cli, stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0) {
            if (!cli->other) vb_die_input("%s: unexpected argument '%.200s'", cli->cmd, a);
            cli->other(cli->ctx, a, NULL);
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        if (n == 0) vb_die_input("%s: unexpected argument '%.200s'", cli->cmd, a);
        char key[128];
        const char *value;
        int k = vb_flag_split(a, key, sizeof key, &value) ? find_opt(cli, key) : -1;
        if (k < 0) {
            if (!cli->other)
                vb_die_input("%s: unknown flag --%.*s%s", cli->cmd, (int)(n < 100 ? n : 100), name,
                             *vb_cli_hint(a) ? vb_cli_hint(a) : " (see --help)");
            const char *next = NULL;
            if (!eq && i + 1 < argc && !(strncmp(argv[i + 1], "--", 2) == 0 && argv[i + 1][2])) next = argv[++i];
            cli->other(cli->ctx, a, next);
            continue;
        }
        const vb_cli_opt *o = &cli->opts[k];
        bool ignored;
        if (!eq && !takes_value(o) && i + 1 < argc && vb_flag_parse_bool(argv[i + 1], &ignored)) {
            /* --flag yes: a bool takes the next argument when it is a bool word */
            own[nown++] = respell(a, o->name, n, argv[++i]);
            continue;
        }
        own[nown++] = respell(a, o->name, n, NULL);
        if (!eq && takes_value(o) && i + 1 < argc) own[nown++] = argv[++i];
    }
    own[nown] = NULL;

    /* val 256 + k: clear of the ':' and '?' getopt_long returns itself */
    for (int k = 0; k < cli->nopts; k++)
        longopts[k] = (struct option){cli->opts[k].name, takes_value(&cli->opts[k]) ? required_argument : optional_argument,
                                      NULL, 256 + k};
    optind = 0; /* glibc: start over (a second parse in the same process) */
    opterr = 0;
    int c;
    /* "+": no reordering; ":": a missing value returns ':' */
    while ((c = getopt_long(nown, own, "+:", longopts, NULL)) != -1) {
        if (c == ':') vb_die_input("%s: --%s expects a value", cli->cmd, cli->opts[optopt - 256].name);
        if (c < 256 || c >= 256 + cli->nopts) vb_die_internal("%s: argument parser out of step at '%s'", cli->cmd, own[optind - 1]);
        store(cli, &cli->opts[c - 256], optarg);
    }
    if (optind != nown) vb_die_internal("%s: argument parser stopped at '%s'", cli->cmd, own[optind]);
    g_parsing = NULL;
    free(longopts);
    free(own);
}

bool vb_cli_asks_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (is_help(argv[i])) return true;
    return false;
}

void vb_cli_print_help(const vb_cli *cli, FILE *f) {
    fprintf(f, "usage: %s\n", cli->usage);
    if (cli->about) fprintf(f, "%s\n", cli->about);
    fprintf(f, "\noptions:\n");
    int width = (int)strlen("-h, --help");
    for (int k = 0; k < cli->nopts; k++) {
        const vb_cli_opt *o = &cli->opts[k];
        int w = 2 + (int)strlen(o->name) + (takes_value(o) && o->arg ? 1 + (int)strlen(o->arg) : 0);
        if (w > width) width = w;
    }
    for (int k = 0; k < cli->nopts; k++) {
        const vb_cli_opt *o = &cli->opts[k];
        char left[160];
        snprintf(left, sizeof left, "--%s%s%s", o->name, takes_value(o) && o->arg ? " " : "",
                 takes_value(o) && o->arg ? o->arg : "");
        fprintf(f, "  %-*s  %s\n", width, left, o->help ? o->help : "");
    }
    fprintf(f, "  %-*s  %s\n", width, "-h, --help", "this text");
    if (cli->other_help) fprintf(f, "%s\n", cli->other_help);
    fprintf(f, "Flags are --name VALUE or --name=VALUE, '-' and '_' alike; true|false is also 1|0, yes|no, on|off\n"
               "(any case); a bare boolean flag means true (docs/configs.md, \"Flags\").\n");
}
