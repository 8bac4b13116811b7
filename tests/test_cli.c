/* test_cli.c: the table-driven command-line parser (core/config/cli.h) that
 * vitbench sweep, vitbench datagen and bench_step share: every kind of
 * option, both spellings, exact names only, what goes to `other` and in what
 * order, --help, and one exit-2 line naming the flag for every bad value. */
#include "tests/test_util.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config/cli.h"
#include "core/config/flag.h"
#include "core/util/common.h"

/* ---- one table with every kind ---- */

typedef struct {
    int count;
    long long big;
    double ratio, frac;
    const char *name, *out_dir;
    bool flag, dry_run;
    int mode;
    char seen[256]; /* what the function option and `other` saw, in order */
} opts;

static opts g_o;

static void append(const char *fmt, const char *a, const char *b) {
    size_t used = strlen(g_o.seen);
    snprintf(g_o.seen + used, sizeof g_o.seen - used, fmt, a, b ? b : "(null)");
}

static void list_fn(const char *flag, const char *value, void *ptr) {
    assert_ptr_equal(ptr, &g_o);
    if (strcmp(value, "bad") == 0) vb_die_input("test: %s cannot take '%s'", flag, value);
    append("[%s %s]", flag, value);
}

static void other_fn(void *ctx, const char *arg, const char *next) {
    assert_ptr_equal(ctx, &g_o);
    append("<%s %s>", arg, next);
}

static const char *const k_modes[] = {"alpha", "beta", "gamma", NULL};

static const vb_cli_opt k_opts[] = {
    {.name = "count", .kind = VB_CLI_INT, .ptr = &g_o.count, .ilo = 1, .ihi = INT_MAX, .arg = "N", .help = "how many"},
    {.name = "small", .kind = VB_CLI_INT, .ptr = &g_o.count, .ilo = 2, .ihi = 10, .arg = "N", .help = "2 to 10"},
    {.name = "big_number", .kind = VB_CLI_LONG, .ptr = &g_o.big, .ilo = 0, .ihi = LLONG_MAX, .arg = "B",
     .help = "wide"},
    {.name = "ratio", .kind = VB_CLI_DOUBLE, .ptr = &g_o.ratio, .dlo = 0, .dhi = 60, .dlo_open = true, .arg = "S",
     .help = "in (0, 60]"},
    {.name = "frac", .kind = VB_CLI_DOUBLE, .ptr = &g_o.frac, .dlo = 0, .dhi = INFINITY, .arg = "F",
     .help = "at least 0"},
    {.name = "name", .kind = VB_CLI_STRING, .ptr = &g_o.name, .arg = "TEXT", .help = "a name"},
    {.name = "out_dir", .kind = VB_CLI_STRING, .ptr = &g_o.out_dir, .arg = "DIR", .help = "spelt with '_'"},
    {.name = "flag", .kind = VB_CLI_BOOL, .ptr = &g_o.flag, .help = "a switch"},
    {.name = "dry-run", .kind = VB_CLI_BOOL, .ptr = &g_o.dry_run, .help = "spelt with a dash"},
    {.name = "mode", .kind = VB_CLI_CHOICE, .ptr = &g_o.mode, .choices = k_modes, .arg = "M", .help = "a choice"},
    {.name = "list", .kind = VB_CLI_FUNC, .ptr = &g_o, .fn = list_fn, .arg = "X", .help = "every one counts"},
};

static const vb_cli k_with_other = {
    .cmd = "tcmd",
    .usage = "tcmd [options] [--<key> VALUE ...]",
    .about = "A command for the tests.",
    .opts = k_opts,
    .nopts = (int)(sizeof k_opts / sizeof k_opts[0]),
    .other = other_fn,
    .ctx = &g_o,
    .other_help = "Anything else is a key.",
};

static const vb_cli k_closed = {
    .cmd = "closed",
    .usage = "closed [options]",
    .opts = k_opts,
    .nopts = (int)(sizeof k_opts / sizeof k_opts[0]),
};

#define ARGS(...) ((const char *const[]){"tcmd", __VA_ARGS__, NULL})

static int count_args(const char *const *a) {
    int n = 0;
    while (a[n]) n++;
    return n;
}

static void parse(const vb_cli *cli, const char *const *args) {
    memset(&g_o, 0, sizeof g_o);
    vb_cli_parse(cli, count_args(args), (char **)args);
}

/* ---- accepted command lines ---- */

static void test_every_kind(void **state) {
    (void)state;
    parse(&k_with_other, ARGS("--count", "3", "--big_number", "9000000000", "--ratio=0.5", "--frac", "0",
                              "--name", "x y", "--flag", "--mode", "gamma", "--list", "a", "--list=b"));
    assert_int_equal(g_o.count, 3);
    assert_true(g_o.big == 9000000000LL);
    assert_true(g_o.ratio == 0.5 && g_o.frac == 0);
    assert_string_equal(g_o.name, "x y");
    assert_true(g_o.flag && !g_o.dry_run);
    assert_int_equal(g_o.mode, 2);
    /* a function option sees every occurrence, in order */
    assert_string_equal(g_o.seen, "[--list a][--list b]");
}

static void test_spellings_and_values(void **state) {
    (void)state;
    /* '-' and '_' alike both ways; bools take =VALUE only */
    parse(&k_with_other, ARGS("--dry_run", "--big-number=7", "--flag=false"));
    assert_true(g_o.dry_run && !g_o.flag);
    assert_true(g_o.big == 7);
    parse(&k_with_other, ARGS("--dry-run=off", "--flag=yes"));
    assert_true(!g_o.dry_run && g_o.flag);
    /* the value after --name is the next argument whatever it looks like;
     * after '=' everything, '=' included */
    parse(&k_with_other, ARGS("--name", "--count", "--count", "4"));
    assert_string_equal(g_o.name, "--count");
    assert_int_equal(g_o.count, 4);
    parse(&k_with_other, ARGS("--name=a=b"));
    assert_string_equal(g_o.name, "a=b");
    /* the last one wins (two options may share a destination) */
    parse(&k_with_other, ARGS("--count", "5", "--small", "9", "--count=6"));
    assert_int_equal(g_o.count, 6);
    /* a respelt --name=VALUE: the value outlives the parse */
    parse(&k_with_other, ARGS("--out-dir=kept"));
    const char *kept = g_o.out_dir;
    parse(&k_closed, ARGS("--out-dir=other"));
    assert_string_equal(kept, "kept");
    assert_string_equal(g_o.out_dir, "other");
    /* a second parse in the same process starts over */
    parse(&k_closed, ARGS("--count", "2"));
    assert_int_equal(g_o.count, 2);
    parse(&k_closed, ARGS("--mode", "beta"));
    assert_int_equal(g_o.count, 0);
    assert_int_equal(g_o.mode, 1);
}

static void test_other_gets_the_rest_in_order(void **state) {
    (void)state;
    parse(&k_with_other, ARGS("FILE", "--lr", "0.1", "--count", "2", "--noddp", "--flag", "--k=v", "next", "--x", "--",
                              "-y"));
    /* an unknown --key takes the next argument unless that is another flag;
     * --key=v takes none; "--" alone is a value; single-dash words are positional */
    assert_string_equal(g_o.seen, "<FILE (null)><--lr 0.1><--noddp (null)><--k=v (null)><next (null)><--x --><-y (null)>");
    assert_int_equal(g_o.count, 2);
    assert_true(g_o.flag);
    /* exact names only: a prefix of an option is not that option */
    parse(&k_with_other, ARGS("--coun", "3", "--dry", "--nam=z"));
    assert_int_equal(g_o.count, 0);
    assert_false(g_o.dry_run);
    assert_null(g_o.name);
    assert_string_equal(g_o.seen, "<--coun 3><--dry (null)><--nam=z (null)>");
}

/* ---- help ---- */

static void help_child(void *ctx) {
    if (dup2(2, 1) < 0) _exit(99);
    parse(&k_with_other, ctx);
    _exit(98); /* --help must exit */
}

static void test_help_from_the_table(void **state) {
    (void)state;
    char *out = NULL;
    int rc = tu_run_child(help_child, (void *)ARGS("--count", "2", "--help"), 10, &out);
    assert_int_equal(rc, 0);
    static const char *const want[] = {"usage: tcmd [options] [--<key> VALUE ...]\n", "A command for the tests.",
                                       "  --count N ", "how many", "  --dry-run ", "spelt with a dash",
                                       "  --mode M ", "  -h, --help ", "this text", "Anything else is a key.\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(out, want[i])) fail_msg("help lacks '%s':\n%s", want[i], out);
    free(out);
    out = NULL;
    rc = tu_run_child(help_child, (void *)ARGS("-h"), 10, &out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "usage: tcmd"));
    free(out);
}

/* ---- rejected command lines: exit 2, one line naming the command and flag ---- */

static const vb_cli *g_bad_cli;

static void bad_child(void *ctx) { parse(g_bad_cli, ctx); }

static void expect_bad(const vb_cli *cli, const char *const *args, const char *const *needles) {
    g_bad_cli = cli;
    tu_expect_exit_all(2, needles, bad_child, (void *)args);
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_bad_values_exit_2(void **state) {
    (void)state;
    const vb_cli *c = &k_with_other;
    expect_bad(c, ARGS("--count", "x"), L("tcmd: --count expects an integer >= 1, got 'x'"));
    expect_bad(c, ARGS("--count", "0"), L("tcmd: --count expects an integer >= 1, got '0'"));
    expect_bad(c, ARGS("--count", "3.5"), L("--count", "'3.5'"));
    expect_bad(c, ARGS("--count", " 3"), L("--count", "' 3'"));
    expect_bad(c, ARGS("--count", "99999999999"), L("--count", "'99999999999'"));
    expect_bad(c, ARGS("--small=11"), L("tcmd: --small expects an integer in [2, 10], got '11'"));
    expect_bad(c, ARGS("--big_number", "-1"), L("--big_number", ">= 0", "'-1'"));
    expect_bad(c, ARGS("--big_number", "99999999999999999999"), L("--big_number", "'99999999999999999999'"));
    expect_bad(c, ARGS("--ratio", "0"), L("tcmd: --ratio expects a number in (0, 60], got '0'"));
    expect_bad(c, ARGS("--ratio", "61"), L("--ratio", "'61'"));
    expect_bad(c, ARGS("--ratio", "nan"), L("--ratio", "'nan'"));
    expect_bad(c, ARGS("--ratio", "1s"), L("--ratio", "'1s'"));
    expect_bad(c, ARGS("--frac", "-0.5"), L("tcmd: --frac expects a number >= 0, got '-0.5'"));
    expect_bad(c, ARGS("--frac", "inf"), L("--frac", "'inf'"));
    expect_bad(c, ARGS("--name="), L("tcmd: --name expects a non-empty value"));
    expect_bad(c, ARGS("--flag=maybe"), L("tcmd: --flag expects true or false, got 'maybe'"));
    expect_bad(c, ARGS("--mode", "delta"), L("tcmd: --mode expects one of alpha, beta, gamma, got 'delta'"));
    expect_bad(c, ARGS("--list", "bad"), L("test: --list cannot take 'bad'"));
    /* a value missing at the end */
    expect_bad(c, ARGS("--flag", "--count"), L("tcmd: --count expects a value"));
    expect_bad(c, ARGS("--name"), L("tcmd: --name expects a value"));
    /* not flags at all */
    expect_bad(c, ARGS("--"), L("tcmd: unexpected argument '--'"));
    expect_bad(c, ARGS("--=3"), L("tcmd: unexpected argument '--=3'"));
    /* without `other`, the rest is refused */
    expect_bad(&k_closed, ARGS("--count", "2", "--bogus", "1"), L("closed: unknown flag --bogus"));
    expect_bad(&k_closed, ARGS("--bogus=1"), L("closed: unknown flag --bogus"));
    expect_bad(&k_closed, ARGS("--coun", "1"), L("closed: unknown flag --coun"));
    expect_bad(&k_closed, ARGS("extra"), L("closed: unexpected argument 'extra'"));
}

static void test_bool_text(void **state) {
    (void)state;
    /* the same words as run/train and a YAML config: 1/0 too, any case */
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "on", "1", "YES", "On"},
                             *const no[] = {"false", "False", "FALSE", "no", "off", "0", "NO", "Off"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        bool b = false;
        assert_true(vb_flag_parse_bool(yes[i], &b) && b);
        assert_true(vb_flag_parse_bool(no[i], &b) && !b);
    }
    bool b = true;
    assert_false(vb_flag_parse_bool("2", &b));
    assert_false(vb_flag_parse_bool("", &b));
    assert_false(vb_flag_parse_bool("maybe", &b));
    assert_true(b);
}

/* one grammar: a bool takes 1/0 and a separate bool word; --name VALUE and
 * --name=VALUE under either spelling */
static void test_one_grammar(void **state) {
    (void)state;
    parse(&k_closed, ARGS("--dry-run=1", "--flag", "0"));
    assert_true(g_o.dry_run && !g_o.flag);
    parse(&k_closed, ARGS("--dry_run", "yes", "--flag", "ON", "--out-dir", "d"));
    assert_true(g_o.dry_run && g_o.flag);
    assert_string_equal(g_o.out_dir, "d");
    /* the word after a bare bool is its value only when it is a bool word */
    parse(&k_with_other, ARGS("--flag", "FILE"));
    assert_true(g_o.flag);
    assert_string_equal(g_o.seen, "<FILE (null)>");
}

static void test_typo_names_the_nearest(void **state) {
    (void)state;
    expect_bad(&k_closed, ARGS("--coun", "1"), L("closed: unknown flag --coun; did you mean --count?"));
    expect_bad(&k_closed, ARGS("--big-numbr=3"), L("closed: unknown flag --big-numbr; did you mean --big_number?"));
    expect_bad(&k_closed, ARGS("--dyr_run"), L("closed: unknown flag --dyr_run; did you mean --dry-run?"));
    /* nothing close: no guess */
    expect_bad(&k_closed, ARGS("--bogus"), L("closed: unknown flag --bogus (see --help)"));
    vb_flag_near n;
    vb_flag_near_init(&n, "xy");
    vb_flag_near_try(&n, "lr");
    assert_null(vb_flag_near_best(&n));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind),
        cmocka_unit_test(test_spellings_and_values),
        cmocka_unit_test(test_other_gets_the_rest_in_order),
        cmocka_unit_test(test_help_from_the_table),
        cmocka_unit_test(test_bad_values_exit_2),
        cmocka_unit_test(test_bool_text),
        cmocka_unit_test(test_one_grammar),
        cmocka_unit_test(test_typo_names_the_nearest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
