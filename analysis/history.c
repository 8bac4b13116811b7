/* history.c: `vitbench history FILE [--metric NAME[,NAME]] [--json]
 * [--output_dir DIR] [--pvalue P] [--window N] [--min_magnitude M]
 * [--no_plots]` and `vitbench history append ...` (analysis.h, history.h).
 *
 * The change points of every metric of a machine's history (changepoint.h:
 * E-Divisive means with a Student t-test, Otava's method and defaults), each
 * named a regression or an improvement by the metric's direction, and
 * confirmed when a later point stays on the new level. A table on stdout, or
 * with --json a list of objects; the page (history_page.c) beside the file.
 * Exit 0 whatever it finds, as Otava: a gate reads the output; 2 for bad
 * input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analysis/analysis.h"
#include "analysis/history.h"
#include "analysis/plot.h"
#include "analysis/report.h"
#include "core/config/cli.h"
#include "core/results/results.h"

typedef struct args {
    const char *file;
    const char *metrics;
    bool json;
    const char *out;
    double pvalue;
    int window;
    double min_magnitude;
    bool no_plots;
} args;

static void history_file(void *ctx, const char *arg, const char *next) {
    (void)next;
    args *a = ctx;
    if (strncmp(arg, "--", 2) == 0)
        vb_die_input("history: unknown flag %s%s", arg, *vb_cli_hint(arg) ? vb_cli_hint(arg) : " (see vitbench history --help)");
    if (a->file) vb_die_input("history: one FILE only (got %s and %s)", a->file, arg);
    a->file = arg;
}

static args parse_args(int argc, char **argv) {
    args a = {.pvalue = VB_CP_PVALUE, .window = VB_CP_WINDOW, .min_magnitude = VB_CP_MIN_MAGNITUDE};
    const vb_cli_opt opts[] = {
        {.name = "metric", .kind = VB_CLI_STRING, .ptr = &a.metrics, .arg = "NAME[,NAME]",
         .help = "the metrics to analyse (default: every metric column that holds a value)"},
        {.name = "json", .kind = VB_CLI_BOOL, .ptr = &a.json,
         .help = "print the change points as a JSON list of objects instead of the table"},
        {.name = "output_dir", .kind = VB_CLI_STRING, .ptr = &a.out, .arg = "DIR",
         .help = "where the page goes (default: FILE without .csv, with " VB_HISTORY_REPORT_SUFFIX ", beside it)"},
        {.name = "pvalue", .kind = VB_CLI_DOUBLE, .ptr = &a.pvalue, .arg = "P", .dlo = 0, .dhi = 1, .dlo_open = true,
         .help = "largest p-value of a change point, in (0, 1] (default 0.001, Otava's)"},
        {.name = "window", .kind = VB_CLI_INT, .ptr = &a.window, .arg = "N", .ilo = 2, .ihi = VB_CP_WINDOW_MAX,
         .help = "points the E-Divisive search looks at at once (default 50, Otava's)"},
        {.name = "min_magnitude", .kind = VB_CLI_DOUBLE, .ptr = &a.min_magnitude, .arg = "M", .dlo = 0, .dhi = 1e9,
         .help = "smallest relative change of the mean a change point must have, e.g. 0.02 (default 0)"},
        {.name = "no_plots", .kind = VB_CLI_BOOL, .ptr = &a.no_plots,
         .help = "the page without its figures (also when gnuplot is not on PATH)"},
    };
    const vb_cli cli = {
        .cmd = "history",
        .usage = "vitbench history FILE [--metric NAME[,NAME]] [--json] [--output_dir DIR] [--pvalue P]\n"
                 "                        [--window N] [--min_magnitude M] [--no_plots]\n"
                 "       vitbench history append FILE --from SET_DIR [--commit REV] [--time ISO]",
        .about = "Where a machine's history (results/history/<machine_key>.csv: a row per gate run, the\n"
                 "layout Apache Otava reads) changes level, per metric: E-Divisive means with a two-sided\n"
                 "Student t-test, in windows with a split and a merge pass (Otava's method and defaults).\n"
                 "A change point is the first row of the new level; it is a regression or an improvement\n"
                 "by the metric's direction (samples/s higher is better, instructions and est_cycles\n"
                 "lower), and confirmed when a later row before the next change stays on the new level\n"
                 "(nearer its mean than the old one's): the newest row alone never is. Prints a table, or\n"
                 "JSON with --json; writes history.md, history.html, changes.csv and a trend figure per\n"
                 "metric. Exit 0 whatever it finds (read the output), 2 for bad input.\n"
                 "`vitbench history append --help`: adding a gate set's row.",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
        .other = history_file,
        .ctx = &a,
        .other_help = "FILE: a history CSV (" VB_HISTORY_CSV_HEADER ").",
    };
    vb_cli_parse(&cli, argc, argv);
    if (!a.file) vb_die_input("history: missing FILE (usage: vitbench history FILE [options]; see vitbench history --help)");
    return a;
}

/* The metrics asked for, in the table's order, each once; or every one the
 * file has. */
static void choose_metrics(const args *a, const vb_history *h, vb_history_result *r) {
    bool want[VB_HISTORY_NMETRICS] = {false};
    if (a->metrics) {
        char *copy = vb_strdup_check(a->metrics), *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            const int m = vb_history_metric_index(tok);
            if (m < 0) vb_die_input("history: --metric: unknown metric '%s' (metrics: %s)", tok, vb_history_metric_list());
            if (!h->has[m]) vb_die_input("history: --metric %s: %s has no column '%s'", tok, h->path, tok);
            want[m] = true;
        }
        free(copy);
    } else {
        /* every metric column that holds a value: a column left empty (no
         * counts recorded on this machine) is no metric of this history */
        for (int m = 0; m < VB_HISTORY_NMETRICS; m++)
            for (int row = 0; h->has[m] && row < h->nrows && !want[m]; row++) want[m] = !isnan(h->value[m][row]);
    }
    r->nmetrics = 0;
    for (int m = 0; m < VB_HISTORY_NMETRICS; m++)
        if (want[m]) r->metrics[r->nmetrics++] = m;
    bool any_column = false;
    for (int m = 0; m < VB_HISTORY_NMETRICS; m++) any_column = any_column || h->has[m];
    if (!any_column)
        vb_die_input("history: %s has no metric column (metrics: %s)", h->path, vb_history_metric_list());
}

static void analyse(vb_history_result *r) {
    const vb_history *h = r->h;
    for (int k = 0; k < r->nmetrics; k++) {
        const int m = r->metrics[k];
        int n = 0;
        r->row_of[m] = vb_calloc_check((size_t)h->nrows + 1, sizeof *r->row_of[m]);
        r->vals[m] = vb_calloc_check((size_t)h->nrows + 1, sizeof *r->vals[m]);
        for (int row = 0; row < h->nrows; row++)
            if (!isnan(h->value[m][row])) {
                r->row_of[m][n] = row;
                r->vals[m][n++] = h->value[m][row];
            }
        r->nvals[m] = n;
        vb_cp *cps = NULL;
        const int nc = vb_cp_find(r->vals[m], n, &r->opts, &cps);
        r->changes = vb_realloc_check(r->changes, (size_t)(r->nchanges + nc + 1) * sizeof *r->changes);
        for (int i = 0; i < nc; i++) {
            vb_history_change *c = &r->changes[r->nchanges++];
            c->metric = m;
            c->cp = cps[i];
            c->row = r->row_of[m][cps[i].index];
            c->on_level = vb_cp_points_on_level(r->vals[m], &cps[i]);
            c->confirmed = c->on_level >= 1;
            c->regression = vb_history_is_regression(m, &cps[i]);
        }
        free(cps);
    }
}

double vb_history_change_percent(const vb_cp *c) {
    return c->mean_before != 0 ? 100 * (c->mean_after / c->mean_before - 1) : NAN;
}

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static void print_json(const vb_history_result *r) {
    cJSON *list = cJSON_CreateArray();
    for (int i = 0; i < r->nchanges; i++) {
        const vb_history_change *c = &r->changes[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "metric", vb_history_metrics[c->metric].name);
        cJSON_AddNumberToObject(o, "index", c->row);
        cJSON_AddStringToObject(o, "commit", r->h->commit[c->row]);
        cJSON_AddStringToObject(o, "time", r->h->time[c->row]);
        cJSON_AddItemToObject(o, "mean_before", num_or_null(c->cp.mean_before));
        cJSON_AddItemToObject(o, "mean_after", num_or_null(c->cp.mean_after));
        cJSON_AddItemToObject(o, "stddev_before", num_or_null(c->cp.sd_before));
        cJSON_AddItemToObject(o, "stddev_after", num_or_null(c->cp.sd_after));
        cJSON_AddItemToObject(o, "change_percent", num_or_null(vb_history_change_percent(&c->cp)));
        cJSON_AddItemToObject(o, "pvalue", num_or_null(c->cp.pvalue));
        cJSON_AddStringToObject(o, "direction", c->regression ? "regression" : "improvement");
        cJSON_AddBoolToObject(o, "confirmed", c->confirmed);
        cJSON_AddNumberToObject(o, "points_after", c->cp.end - c->cp.index - 1);
        cJSON_AddNumberToObject(o, "points_on_level", c->on_level);
        cJSON_AddItemToArray(list, o);
    }
    char *text = cJSON_Print(list);
    if (!text) vb_die_internal("out of memory printing JSON");
    puts(text);
    free(text);
    cJSON_Delete(list);
}

/* "yes (19 of 19 later points on the new level)", "no: the newest point" ... */
void vb_history_confirmed_text(const vb_history_result *r, const vb_history_change *c, char *buf, size_t n) {
    const int after = c->cp.end - c->cp.index - 1;
    if (after == 0)
        snprintf(buf, n, "no: %s", c->cp.end == r->nvals[c->metric] ? "the newest point"
                                                                     : "a level of one point (the next change follows)");
    else
        snprintf(buf, n, "%s (%d of %d later points on the new level)", c->confirmed ? "yes" : "no", c->on_level, after);
}

rp_table *vb_history_changes_table(const vb_history_result *r, const char *csv) {
    /* the terminal's change and p as read; the page's (and its CSV's) as numbers */
    const char *cols[] = {"metric", "index", "commit", "time", "mean_before", "mean_after",
                          csv ? "change_percent" : "change", csv ? "pvalue" : "p", "direction", "confirmed",
                          "stddev_before", "stddev_after"};
    const int ncols = csv ? 12 : 10;
    rp_table *t = rp_table_new(csv, "Change points (index: the row of the history, from 0)", ncols, cols);
    for (int i = 0; i < r->nchanges; i++) {
        const vb_history_change *c = &r->changes[i];
        char conf[96];
        vb_history_confirmed_text(r, c, conf, sizeof conf);
        rp_table_add(t, "%s", vb_history_metrics[c->metric].name);
        rp_table_add(t, "%d", c->row);
        rp_table_add(t, "%s", r->h->commit[c->row]);
        rp_table_add(t, "%s", r->h->time[c->row]);
        rp_table_num(t, c->cp.mean_before);
        rp_table_num(t, c->cp.mean_after);
        if (csv) {
            rp_table_num(t, vb_history_change_percent(&c->cp));
            rp_table_num(t, c->cp.pvalue);
        } else {
            rp_table_add(t, "%+.2f%%", vb_history_change_percent(&c->cp));
            rp_table_add(t, "%.3g", c->cp.pvalue);
        }
        rp_table_add(t, "%s", c->regression ? "regression" : "improvement");
        rp_table_add(t, "%s", conf);
        if (ncols == 12) {
            rp_table_num(t, c->cp.sd_before);
            rp_table_num(t, c->cp.sd_after);
        }
    }
    return t;
}

/* FILE's directory, and its name without .csv, with the suffix */
static void default_out(const char *file, char *out, size_t n) {
    const char *slash = strrchr(file, '/');
    const char *base = slash ? slash + 1 : file;
    size_t stem = strlen(base);
    if (stem > 4 && strcmp(base + stem - 4, VB_HISTORY_EXT) == 0) stem -= 4;
    if (slash)
        vb_snprintf(out, n, "%.*s/%.*s%s", (int)(slash - file), file, (int)stem, base, VB_HISTORY_REPORT_SUFFIX);
    else
        vb_snprintf(out, n, "%.*s%s", (int)stem, base, VB_HISTORY_REPORT_SUFFIX);
}

int vb_history_main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "append") == 0) return vb_history_append_main(argc - 1, argv + 1);
    const args a = parse_args(argc, argv);
    vb_history h;
    vb_history_read(a.file, &h, "history");
    vb_history_result r = {.h = &h, .opts = {a.pvalue, a.window, a.min_magnitude}};
    choose_metrics(&a, &h, &r);
    analyse(&r);
    char out[VB_PATH_MAX];
    if (a.out)
        vb_snprintf(out, sizeof out, "%s", a.out);
    else
        default_out(a.file, out, sizeof out);
    int regressions = 0, confirmed = 0;
    for (int i = 0; i < r.nchanges; i++) {
        regressions += r.changes[i].regression;
        confirmed += r.changes[i].confirmed;
    }
    if (a.json) {
        print_json(&r);
    } else {
        printf("history: %s: %d gate run%s of machine %s", a.file, h.nrows, h.nrows == 1 ? "" : "s",
               h.machine_key ? h.machine_key : "(none)");
        if (h.nrows) printf(", %s to %s", h.time[0], h.time[h.nrows - 1]);
        printf("\nhistory: E-Divisive means, t-test p <= %g, window %d, min magnitude %g; metrics", a.pvalue, a.window,
               a.min_magnitude);
        for (int k = 0; k < r.nmetrics; k++) printf("%s %s", k ? "," : "", vb_history_metrics[r.metrics[k]].name);
        if (r.nmetrics == 0) printf(": none holds a value yet");
        putchar('\n');
        if (r.nchanges) {
            rp_table *t = vb_history_changes_table(&r, NULL);
            rp_table_print(t, stdout);
            rp_table_free(t);
        }
        printf("history: %d change point%s: %d regression%s, %d improvement%s; %d confirmed\n", r.nchanges,
               r.nchanges == 1 ? "" : "s", regressions, regressions == 1 ? "" : "s", r.nchanges - regressions,
               r.nchanges - regressions == 1 ? "" : "s", confirmed);
    }
    const bool plots = !a.no_plots && vb_plot_gnuplot_available();
    if (!a.no_plots && !plots) vb_warn("history: gnuplot is not on PATH: the page has no figures");
    vb_history_page(&r, out, plots);
    fprintf(a.json ? stderr : stdout, "history: page %s/%s\n", out, VB_HISTORY_HTML);
    for (int m = 0; m < VB_HISTORY_NMETRICS; m++) {
        free(r.row_of[m]);
        free(r.vals[m]);
    }
    free(r.changes);
    vb_history_free(&h);
    return 0;
}
