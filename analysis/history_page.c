/* history_page.c: the page of `vitbench history` (history.h): history.md and
 * history.html through the report's document (report_doc.c), the change
 * points as changes.csv, and per metric a trend figure (plot.h: the values
 * per gate run, the change points marked with their commits, the level
 * means between them as a dashed step line) with its levels' table. Every
 * commit and time is data from the file: it reaches Markdown, HTML and
 * gnuplot only through their escaping (markdown.h, report_doc.c, plot.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/history.h"
#include "analysis/report.h"
#include "core/results/results.h"

/* a commit as a figure's label: git's short form (12 characters) when longer,
 * cut on a UTF-8 boundary */
static void short_commit(const char *commit, char *out, size_t n) {
    size_t k = 0;
    const size_t most = n - 1 < 12 ? n - 1 : 12;
    while (commit[k] && k < most) k++;
    while (k > 0 && commit[k] && ((unsigned char)commit[k] & 0xC0) == 0x80) k--; /* not inside a character */
    memcpy(out, commit, k);
    out[k] = '\0';
}

/* "commit abc123 (row 20)" for prose; a commit with anything but letters,
 * digits and ._+/:@- (markup a page would act on) is named by its row only:
 * the tables show it whole, escaped as cells */
static void commit_phrase(const char *commit, int row, char *out, size_t n) {
    bool plain = strlen(commit) <= 64;
    for (const char *c = commit; plain && *c; c++)
        plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr("._+/:@-", *c);
    if (plain)
        snprintf(out, n, "commit %s (row %d)", commit, row);
    else
        snprintf(out, n, "the commit of row %d (in the table)", row);
}

/* The metric's levels: the runs between its change points, in index space
 * of its values (begin[k] .. begin[k+1]). */
static int levels_of(const vb_history_result *r, int m, int *begin, int cap) {
    int n = 0;
    begin[n++] = 0;
    for (int i = 0; i < r->nchanges && n < cap - 1; i++)
        if (r->changes[i].metric == m) begin[n++] = r->changes[i].cp.index;
    begin[n] = r->nvals[m];
    return n;
}

static void metric_section(rp_doc *d, const rp_opts *o, const vb_history_result *r, int m) {
    const vb_history *h = r->h;
    const vb_history_metric *hm = &vb_history_metrics[m];
    int nch = 0;
    for (int i = 0; i < r->nchanges; i++) nch += r->changes[i].metric == m;
    rp_heading(d, 1, "%s (%s is better)", hm->name, hm->higher_is_better ? "higher" : "lower");
    if (r->nvals[m] == 0) {
        rp_para(d, "No row of the history has a value of %s.", hm->name);
        return;
    }
    rp_para(d, "%d of the %d rows have a value; %d change point%s.", r->nvals[m], h->nrows, nch, nch == 1 ? "" : "s");
    int *begin = vb_calloc_check((size_t)nch + 2, sizeof *begin);
    const int nlev = levels_of(r, m, begin, nch + 2);
    const double *x = r->vals[m];
    const int *row = r->row_of[m];

    vb_plot pl;
    char name[96], title[256], ylabel[128];
    snprintf(name, sizeof name, "history_%s", hm->name);
    snprintf(title, sizeof title, "%s on machine %s: its change points and the level between them", hm->name,
             h->machine_key ? h->machine_key : "?");
    snprintf(ylabel, sizeof ylabel, "%s (%s is better)", hm->unit, hm->higher_is_better ? "higher" : "lower");
    vb_plot_init(&pl, name, title, "gate run (row of the history, oldest first)", ylabel);
    vb_plot_series *vs = vb_plot_series_add(&pl, hm->name, false);
    for (int i = 0; i < r->nvals[m]; i++) vb_plot_point(vs, row[i], x[i], NAN, NAN, h->commit[row[i]]);
    vb_plot_series *ls = vb_plot_series_add(&pl, "mean of each level", true);
    vb_plot_series *cs = vb_plot_series_add(&pl, "change point and its commit (vermillion: worse, green: better)", false);
    cs->labelled = true;
    const char *cols[] = {"from_index", "to_index", "from_commit", "to_commit", "points", "mean", "stddev"};
    char csv[128];
    snprintf(csv, sizeof csv, "levels_%s.csv", hm->name);
    rp_table *t = rp_table_new(csv, "Levels between change points", 7, cols);
    for (int k = 0; k < nlev; k++) {
        const int b = begin[k], e = begin[k + 1];
        double mean = 0, ss = 0;
        for (int i = b; i < e; i++) mean += x[i];
        mean /= e - b;
        for (int i = b; i < e; i++) ss += (x[i] - mean) * (x[i] - mean);
        vb_plot_point(ls, row[b] - 0.5, mean, NAN, NAN, "");
        vb_plot_point(ls, row[e - 1] + 0.5, mean, NAN, NAN, "");
        rp_table_add(t, "%d", row[b]);
        rp_table_add(t, "%d", row[e - 1]);
        rp_table_add(t, "%s", h->commit[row[b]]);
        rp_table_add(t, "%s", h->commit[row[e - 1]]);
        rp_table_add(t, "%d", e - b);
        rp_table_num(t, mean);
        rp_table_num(t, e - b > 1 ? sqrt(ss / (e - b - 1)) : 0);
    }
    for (int i = 0; i < r->nchanges; i++) {
        const vb_history_change *c = &r->changes[i];
        if (c->metric != m) continue;
        char label[16];
        short_commit(h->commit[c->row], label, sizeof label);
        vb_plot_point_rgb(cs, c->row, x[c->cp.index], NAN, NAN, label,
                          rp_verdict_rgb(c->regression ? VB_VERDICT_WORSE : VB_VERDICT_BETTER));
    }
    rp_figure(d, o, &pl);
    vb_plot_free(&pl);
    rp_add_table(d, t);
    free(begin);
}

void vb_history_page(const vb_history_result *r, const char *out_dir, bool plots) {
    const vb_history *h = r->h;
    rp_doc d;
    memset(&d, 0, sizeof d);
    rp_opts o;
    memset(&o, 0, sizeof o);
    vb_outdir_open_or_die(&o.out, out_dir, NULL, "history");
    snprintf(o.out_dir, sizeof o.out_dir, "%s", out_dir);
    o.plots = plots;
    const char *key = h->machine_key ? h->machine_key : "?";
    if (h->nrows)
        rp_summary(&d, "%d gate run%s of machine %s, %s to %s (%s).", h->nrows, h->nrows == 1 ? "" : "s", key,
                   h->time[0], h->time[h->nrows - 1], h->path);
    else
        rp_summary(&d, "The history %s has no rows yet.", h->path);
    if (r->nchanges == 0)
        rp_summary(&d, "No change point in %s at p <= %g.", r->nmetrics == 1 ? "the metric" : "any metric",
                   r->opts.pvalue);
    for (int i = 0; i < r->nchanges; i++) {
        const vb_history_change *c = &r->changes[i];
        char conf[96];
        vb_history_confirmed_text(r, c, conf, sizeof conf);
        char at[128];
        commit_phrase(h->commit[c->row], c->row, at, sizeof at);
        rp_summary(&d, "%s: %s of %+.2f%% (%.6g to %.6g) at %s, %s, p = %.3g; confirmed: %s.",
                   vb_history_metrics[c->metric].name, c->regression ? "regression" : "improvement",
                   vb_history_change_percent(&c->cp), c->cp.mean_before, c->cp.mean_after, at, h->time[c->row],
                   c->cp.pvalue, conf);
        if (!c->confirmed)
            rp_warning(&d, "%s's change at %s is not confirmed: no later point stays on its new level yet; "
                           "a gate run or two more tell a lasting change from one lucky or unlucky run.",
                       vb_history_metrics[c->metric].name, at);
    }
    snprintf(d.caption, sizeof d.caption, "Machine %s; E-Divisive means with a t-test, p <= %g, window %d, "
             "min magnitude %g.", key, r->opts.pvalue, r->opts.window, r->opts.min_magnitude);
    rp_heading(&d, 1, "Change points");
    rp_para(&d, "A change point is the first gate run of a new level: its commit is the one that brought the change. "
                "It is a regression or an improvement by the metric's direction, and confirmed when at least one "
                "later run, before the next change point, stays on the new level (nearer the new level's mean "
                "than the old one's); the newest run alone never is.");
    rp_add_table(&d, vb_history_changes_table(r, VB_HISTORY_CHANGES_CSV));
    for (int k = 0; k < r->nmetrics; k++) metric_section(&d, &o, r, r->metrics[k]);
    rp_heading(&d, 1, "Method");
    rp_para(&d, "E-Divisive means (Matteson and James 2014) with its permutation test replaced by a two-sided Student "
                "t-test, as Apache Otava does (Fleming et al. 2023): windows of %d runs, each next window starting "
                "at the last change found or half a window on; in each, the split that maximises the E-statistic "
                "of the two sides is kept while its t-test p is at most %g (the weak threshold), and the search "
                "goes on in the parts; then, over the whole history, the weakest change is dropped and its "
                "neighbours tested again until every p is below %g and every change of the mean is larger than "
                "%g. docs/analysis.md has the statistic and where it differs from Otava.",
                r->opts.window, vb_cp_weak_pvalue(r->opts.pvalue),
                r->opts.pvalue, r->opts.min_magnitude);
    char title[256];
    snprintf(title, sizeof title, "History of machine %s", key);
    rp_doc_write_as(&d, &o.out, title, VB_HISTORY_MD, VB_HISTORY_HTML, "history");
    vb_outdir_close(&o.out);
    rp_doc_free(&d);
}
