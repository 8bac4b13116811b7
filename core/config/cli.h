/* cli.h: fixed-flag command lines (vitbench sweep, vitbench datagen,
 * bench_step) from one table per command.
 *
 * A command describes its options once, as an array of vb_cli_opt (name,
 * kind, where the value goes, its range, one line of help); vb_cli_parse
 * checks and stores them and the same table prints --help. What every such
 * command line does alike, in the grammar every vitbench command shares
 * (core/config/flag.h):
 *   - options are --name VALUE or --name=VALUE; a bool is --name alone (true),
 *     --name=VALUE or --name VALUE where VALUE is 1/0, true/false, yes/no or
 *     on/off in any case (the argument after a bool is its value only when
 *     it is one of these words);
 *   - '-' and '_' are the same in a name (--dry-run = --dry_run);
 *   - names match exactly: getopt_long would also take any unambiguous
 *     prefix (--rep for --repeats), so a mistyped config key could silently
 *     become another option; here it is an unknown flag instead;
 *   - the value of --name VALUE is the next argument whatever it looks like;
 *   - the last of a repeated option wins (a function option sees each);
 *   - -h / --help prints the help built from the table and exits 0;
 *   - bad input exits 2 with one line naming the command and the flag, e.g.
 *     "sweep: --repeats expects an integer >= 1, got 'x'"; an unknown flag
 *     names the nearest option when one is close ("closed: unknown flag
 *     --coun; did you mean --count?").
 * Anything that is not in the table goes to the command's `other` callback
 * (config overrides, a positional FILE), or is refused when it has none.
 * `vitbench run` / `train` parse their config overrides in core/config/config.c.
 */
#ifndef VB_CLI_H
#define VB_CLI_H

#include <stdbool.h>
#include <stdio.h>

typedef enum {
    VB_CLI_INT,    /* int *ptr; accepted range [ilo, ihi] */
    VB_CLI_LONG,   /* long long *ptr; accepted range [ilo, ihi] */
    VB_CLI_DOUBLE, /* double *ptr; range [dlo, dhi], dlo itself excluded when dlo_open; finite */
    VB_CLI_STRING, /* const char **ptr, pointing into argv; never empty */
    VB_CLI_BOOL,   /* bool *ptr */
    VB_CLI_CHOICE, /* int *ptr: the value's index in choices */
    VB_CLI_FUNC,   /* fn(flag, value, ptr) checks and stores the value, exits 2 itself when bad */
} vb_cli_kind;

typedef struct vb_cli_opt {
    const char *name; /* without the leading "--" */
    vb_cli_kind kind;
    void *ptr;
    const char *arg;  /* the value in --help ("N", "DIR"); unused for bools */
    const char *help; /* one line */
    long long ilo, ihi;
    double dlo, dhi;
    bool dlo_open;
    const char *const *choices; /* NULL-terminated */
    /* flag: "--name" (the table's spelling), for messages */
    void (*fn)(const char *flag, const char *value, void *ptr);
    bool *given; /* optional: set true when the option is on the command line (a value cannot say so) */
} vb_cli_opt;

typedef struct vb_cli {
    const char *cmd;      /* names the command in messages: "sweep" */
    const char *usage;    /* usage line(s) without "usage: " ("vitbench sweep FILE [options]") */
    const char *about;    /* optional text printed after the usage */
    const vb_cli_opt *opts;
    int nopts;
    /* NULL: an unknown --flag exits 2 ("<cmd>: unknown flag --x") and so
     * does an argument that is not a flag. Else it gets both, in command-line
     * order: a positional argument (anything not starting with "--") with
     * next NULL, or an unknown "--key" / "--key=value" with the argument after
     * it when that was taken as the key's value (it does not start with "--"
     * followed by more; never taken after --key=value), else NULL. */
    void (*other)(void *ctx, const char *arg, const char *next);
    void *ctx;
    const char *other_help; /* what `other` accepts, printed after the options */
} vb_cli;

/* Parses argv[1..argc-1] (argv[0] is the command's name): every option in
 * the table is checked and stored, the rest handed to `other`. Exits 2 on bad
 * input, 0 after printing --help. */
void vb_cli_parse(const vb_cli *cli, int argc, char **argv);

/* Whether argv[1..argc-1] asks for help (-h or --help anywhere), for a
 * command that must answer it before the parse: before MPI starts, as its
 * parse runs on every rank once MPI is up. */
bool vb_cli_asks_help(int argc, char **argv);

/* The --help text: usage, about, one line per option, other_help. */
void vb_cli_print_help(const vb_cli *cli, FILE *f);

/* For an `other` callback that refuses the flag arg: "; did you mean
 * --NAME?" with the table's nearest option when one is close, else "".
 * Valid only during vb_cli_parse; the text lives until the next call. */
const char *vb_cli_hint(const char *arg);

#endif
