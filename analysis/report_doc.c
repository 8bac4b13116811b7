/* report_doc.c: tables and the report document, rendered as Markdown,
 * self-contained HTML (figures inlined as SVG), CSV and plain text (report.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/markdown.h"
#include "analysis/report.h"
#include "core/results/results.h"

static char *vfmt(const char *fmt, va_list ap) {
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) vb_die_internal("out of memory");
    return s;
}

/* ---- tables ---- */

/* A table cell as shown to a reader (Markdown, HTML, the console): a number
 * with a fraction or an exponent to 4 significant figures; the CSV beside it
 * keeps every digit. */
static const char *shown(const char *cell, char *buf, size_t n) {
    char *end;
    double v = strtod(cell, &end);
    if (end == cell || *end || !strpbrk(cell, ".eE") || !isfinite(v)) return cell;
    snprintf(buf, n, "%.4g", v);
    return buf;
}


rp_table *rp_table_new(const char *csv, const char *title, int ncols, const char *const *cols) {
    rp_table *t = vb_calloc_check(1, sizeof *t);
    t->csv = csv ? vb_strdup_check(csv) : NULL;
    t->title = vb_strdup_check(title);
    t->ncols = ncols;
    t->cols = vb_realloc_check(NULL, (size_t)ncols * sizeof *t->cols);
    for (int i = 0; i < ncols; i++) t->cols[i] = vb_strdup_check(cols[i]);
    return t;
}

void rp_table_add(rp_table *t, const char *fmt, ...) {
    if (t->ncells == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->cells = vb_realloc_check(t->cells, (size_t)t->cap * sizeof *t->cells);
    }
    va_list ap;
    va_start(ap, fmt);
    t->cells[t->ncells++] = vfmt(fmt, ap);
    va_end(ap);
}

void rp_table_num(rp_table *t, double x) {
    if (isfinite(x))
        rp_table_add(t, "%.6g", x);
    else
        rp_table_add(t, "%s", "");
}

int rp_table_rows(const rp_table *t) { return t->ncols ? t->ncells / t->ncols : 0; }

const char *rp_table_cell(const rp_table *t, int row, int col) {
    int i = row * t->ncols + col;
    return i >= 0 && i < t->ncells && col < t->ncols ? t->cells[i] : "";
}

void rp_table_free(rp_table *t) {
    if (!t) return;
    for (int i = 0; i < t->ncols; i++) free(t->cols[i]);
    for (int i = 0; i < t->ncells; i++) free(t->cells[i]);
    free(t->cols);
    free(t->cells);
    free(t->csv);
    free(t->title);
    free(t);
}

void rp_table_print(const rp_table *t, FILE *f) {
    int rows = rp_table_rows(t);
    int *w = vb_calloc_check((size_t)t->ncols, sizeof *w);
    for (int c = 0; c < t->ncols; c++) {
        w[c] = (int)strlen(t->cols[c]);
        for (int r = 0; r < rows; r++) {
            char buf[64];
            int l = (int)strlen(shown(rp_table_cell(t, r, c), buf, sizeof buf));
            if (l > w[c]) w[c] = l;
        }
    }
    fprintf(f, "%s\n", t->title);
    for (int r = -1; r < rows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            char buf[64];
            fprintf(f, "%s%-*s", c ? "  " : "", w[c], r < 0 ? t->cols[c] : shown(rp_table_cell(t, r, c), buf, sizeof buf));
        }
        fputc('\n', f);
    }
    free(w);
}

static void table_csv(FILE *f, void *ctx) {
    const rp_table *t = ctx;
    for (int c = 0; c < t->ncols; c++) {
        if (c) fputc(',', f);
        vb_csv_field(f, t->cols[c]);
    }
    fputc('\n', f);
    for (int r = 0; r < rp_table_rows(t); r++) {
        for (int c = 0; c < t->ncols; c++) {
            if (c) fputc(',', f);
            vb_csv_field(f, rp_table_cell(t, r, c));
        }
        fputc('\n', f);
    }
}

/* ---- document ---- */

static rp_block *push(rp_doc *d, rp_block_kind k) {
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 32;
        d->b = vb_realloc_check(d->b, (size_t)d->cap * sizeof *d->b);
    }
    rp_block *b = &d->b[d->n++];
    memset(b, 0, sizeof *b);
    b->kind = k;
    return b;
}

void rp_heading(rp_doc *d, int level, const char *fmt, ...) {
    rp_block *b = push(d, RP_HEADING);
    b->level = level < 1 ? 1 : level > 4 ? 4 : level;
    va_list ap;
    va_start(ap, fmt);
    b->text = vfmt(fmt, ap);
    va_end(ap);
}

void rp_para(rp_doc *d, const char *fmt, ...) {
    rp_block *b = push(d, RP_PARA);
    va_list ap;
    va_start(ap, fmt);
    b->text = vfmt(fmt, ap);
    va_end(ap);
}

void rp_pre(rp_doc *d, const char *text) { push(d, RP_PRE)->text = vb_strdup_check(text); }

void rp_link(rp_doc *d, const char *text, const char *href) {
    rp_block *b = push(d, RP_LINK);
    b->text = vb_strdup_check(text);
    b->ref = vb_strdup_check(href);
}

void rp_add_table(rp_doc *d, rp_table *t) { push(d, RP_TABLE)->table = t; }

void rp_add_figure(rp_doc *d, const char *title, const char *base) {
    rp_block *b = push(d, RP_FIGURE);
    b->text = vb_strdup_check(title);
    b->ref = vb_strdup_check(base);
    b->caption = vb_strdup_check(d->caption);
}

void rp_problem(rp_doc *d, const char *fmt, ...) {
    d->problems = vb_realloc_check(d->problems, (size_t)(d->nproblems + 1) * sizeof *d->problems);
    va_list ap;
    va_start(ap, fmt);
    d->problems[d->nproblems++] = vfmt(fmt, ap);
    va_end(ap);
}

static void push_line(char ***list, int *n, const char *fmt, va_list ap) {
    *list = vb_realloc_check(*list, (size_t)(*n + 1) * sizeof **list);
    (*list)[(*n)++] = vfmt(fmt, ap);
}

void rp_summary(rp_doc *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    push_line(&d->summary, &d->nsummary, fmt, ap);
    va_end(ap);
}

void rp_warning(rp_doc *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    push_line(&d->warnings, &d->nwarnings, fmt, ap);
    va_end(ap);
}

void rp_doc_free(rp_doc *d) {
    for (int i = 0; i < d->nsummary; i++) free(d->summary[i]);
    for (int i = 0; i < d->nwarnings; i++) free(d->warnings[i]);
    free(d->summary);
    free(d->warnings);
    for (int i = 0; i < d->n; i++) {
        free(d->b[i].text);
        free(d->b[i].ref);
        free(d->b[i].caption);
        rp_table_free(d->b[i].table);
    }
    for (int i = 0; i < d->nproblems; i++) free(d->problems[i]);
    free(d->problems);
    free(d->b);
    memset(d, 0, sizeof *d);
}

/* ---- Markdown ---- */

/* A link's target: a path relative to the report's directory. Written
 * starting with "./" (so no part of it, a run named javascript:alert(1)
 * included, reads as a URL scheme) and with every byte but letters, digits
 * and -._~/=+,@ percent-encoded (so it holds no quote, bracket, colon, blank or line
 * break for HTML or Markdown to act on). A target that is not a relative
 * path (absolute, empty) is no link: false, and the text stands alone. */
static bool href_ok(const char *ref) { return ref && ref[0] && ref[0] != '/'; }

static void put_href(FILE *f, const char *ref) {
    if (strncmp(ref, "./", 2) != 0) fputs("./", f);
    for (const unsigned char *p = (const unsigned char *)ref; *p; p++)
        if (isalnum(*p) || strchr("-._~/=+,@", *p))
            fputc(*p, f);
        else
            fprintf(f, "%%%02X", *p);
}

/* a link to a file of the report; the destination in <> as well */
static void md_link(FILE *f, const char *text, const char *href) {
    if (!href_ok(href)) {
        vb_md_cell(f, text);
        return;
    }
    fputc('[', f);
    vb_md_cell(f, text);
    fputs("](<", f);
    put_href(f, href);
    fputs(">)", f);
}

/* <a href="./...">text</a>, or the text alone (href_ok) */
static void html_text(FILE *f, const char *s);
static void html_link(FILE *f, const char *text, const char *href) {
    if (href_ok(href)) {
        fputs("<a href=\"", f);
        put_href(f, href);
        fputs("\">", f);
    }
    html_text(f, text);
    if (href_ok(href)) fputs("</a>", f);
}

static void md_table(FILE *f, const rp_table *t) {
    fputs("**", f);
    vb_md_cell(f, t->title);
    fputs("**", f);
    if (t->csv) {
        fputs(" (", f);
        md_link(f, t->csv, t->csv);
        fputc(')', f);
    }
    fputs("\n\n|", f);
    for (int c = 0; c < t->ncols; c++) {
        fputc(' ', f);
        vb_md_cell(f, t->cols[c]);
        fputs(" |", f);
    }
    fputs("\n|", f);
    for (int c = 0; c < t->ncols; c++) fputs("---|", f);
    fputc('\n', f);
    for (int r = 0; r < rp_table_rows(t); r++) {
        fputc('|', f);
        for (int c = 0; c < t->ncols; c++) {
            fputc(' ', f);
            char buf[64];
            vb_md_cell(f, shown(rp_table_cell(t, r, c), buf, sizeof buf));
            fputs(" |", f);
        }
        fputc('\n', f);
    }
    fputc('\n', f);
}

typedef struct render_ctx {
    const rp_doc *d;
    const vb_outdir *dir;
    const char *title;
} render_ctx;

static void write_md(FILE *f, void *ctx) {
    const render_ctx *rc = ctx;
    const rp_doc *d = rc->d;
    /* values from the results tree (run names, sweep values, paths) sit in
     * every kind of block: markdown.h keeps each one text */
    fputs("# ", f);
    vb_md_prose(f, rc->title);
    fputs("\n\n", f);
    /* the answers first: findings, warnings, then where everything else is */
    fputs("## Summary\n\n", f);
    if (d->nsummary == 0 && d->nwarnings == 0) fputs("- Nothing measured to summarise.\n", f);
    for (int i = 0; i < d->nsummary; i++) {
        fputs("- ", f);
        vb_md_prose(f, d->summary[i]);
        fputc('\n', f);
    }
    for (int i = 0; i < d->nwarnings; i++) {
        fputs("- **Warning:** ", f);
        vb_md_prose(f, d->warnings[i]);
        fputc('\n', f);
    }
    fputs("\n## Contents\n\n", f);
    for (int i = 0; i < d->n; i++) {
        const rp_block *b = &d->b[i];
        if (b->kind != RP_HEADING || b->level > 2) continue;
        fprintf(f, "%*s- [", 2 * (b->level - 1), "");
        vb_md_cell(f, b->text);
        fprintf(f, "](#sec-%d)\n", i);
    }
    if (d->nproblems) fputs("- [Data problems](#problems)\n", f);
    fputs("\nEvery file this page links is inside its directory (copy the directory alone and they still work), "
          "except links marked *(outside report/)*.\n\n",
          f);
    for (int i = 0; i < d->n; i++) {
        const rp_block *b = &d->b[i];
        switch (b->kind) {
        case RP_HEADING:
            fprintf(f, "<a id=\"sec-%d\"></a>\n\n%.*s ", i, b->level + 1, "#####");
            vb_md_prose(f, b->text);
            fputs("\n\n", f);
            break;
        case RP_PARA:
            vb_md_prose(f, b->text);
            fputs("\n\n", f);
            break;
        case RP_PRE: {
            const int n = vb_md_fence_len(b->text);
            for (int k = 0; k < n; k++) fputc('`', f);
            fprintf(f, "\n%s\n", b->text);
            for (int k = 0; k < n; k++) fputc('`', f);
            fputs("\n\n", f);
            break;
        }
        case RP_LINK:
            md_link(f, b->text, b->ref);
            fputs("\n\n", f);
            break;
        case RP_TABLE: md_table(f, b->table); break;
        case RP_FIGURE: {
            char png[VB_PATH_MAX];
            vb_snprintf(png, sizeof png, "%s.png", b->ref);
            fputc('!', f);
            md_link(f, b->text, png);
            fputs("\n\n", f);
            if (b->caption && b->caption[0]) {
                fputs("*", f);
                vb_md_prose(f, b->caption);
                fputs("* ", f);
            }
            fputc('(', f);
            vb_md_cell(f, b->ref);
            fputs(".svg, data ", f);
            vb_md_cell(f, b->ref);
            fputs(".dat, script ", f);
            vb_md_cell(f, b->ref);
            fputs(".gp)\n\n", f);
            break;
        }
        }
    }
    if (d->nproblems) {
        fputs("<a id=\"problems\"></a>\n\n## Data problems\n\n", f);
        for (int i = 0; i < d->nproblems; i++) {
            fputs("- ", f);
            vb_md_prose(f, d->problems[i]);
            fputc('\n', f);
        }
        fputc('\n', f);
    }
}

/* ---- HTML ---- */

static void html_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static void html_table(FILE *f, const rp_table *t) {
    fputs("<table>\n<caption>", f);
    html_text(f, t->title);
    if (t->csv) {
        fputs(" (", f);
        html_link(f, "CSV", t->csv);
        fputs(")", f);
    }
    fputs("</caption>\n<tr>", f);
    for (int c = 0; c < t->ncols; c++) {
        fputs("<th>", f);
        html_text(f, t->cols[c]);
        fputs("</th>", f);
    }
    fputs("</tr>\n", f);
    for (int r = 0; r < rp_table_rows(t); r++) {
        fputs("<tr>", f);
        for (int c = 0; c < t->ncols; c++) {
            fputs("<td>", f);
            char buf[64];
            html_text(f, shown(rp_table_cell(t, r, c), buf, sizeof buf));
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* name in the report's directory: its own file, never one a link points to */
static char *slurp(const vb_outdir *dir, const char *name) {
    int fd = openat(dir->fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = vb_realloc_check(NULL, cap);
    size_t k;
    while ((k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n < 2) buf = vb_realloc_check(buf, cap *= 2);
    }
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Copies gnuplot's SVG with its ids (gnuplot_canvas, gpPt0...) prefixed by
 * the figure's number: every figure uses the same names, and ids must be
 * unique within one HTML page for the references to resolve to their own. */
static void svg_unique_ids(FILE *f, const char *svg, int fig) {
    static const char *const refs[] = {"id='", "id=\"", "href='#", "href=\"#", "url(#"};
    /* gnuplot repeats some ids within one image (the panels of a multiplot,
     * an opaque key): the second and later definitions of a name get _2, _3
     * ..., references keep naming the first */
    char **seen = NULL;
    int *count = NULL, nseen = 0;
    while (*svg) {
        size_t k = 0;
        for (; k < sizeof refs / sizeof *refs; k++)
            if (strncmp(svg, refs[k], strlen(refs[k])) == 0) break;
        if (k == sizeof refs / sizeof *refs) {
            fputc(*svg++, f);
            continue;
        }
        fprintf(f, "%sfig%d_", refs[k], fig);
        svg += strlen(refs[k]);
        if (k >= 2) continue; /* a reference */
        const char quote = refs[k][3];
        const char *end = strchr(svg, quote);
        if (!end) continue;
        const size_t len = (size_t)(end - svg);
        int i = 0;
        while (i < nseen && !(strlen(seen[i]) == len && strncmp(seen[i], svg, len) == 0)) i++;
        if (i == nseen) {
            seen = vb_realloc_check(seen, (size_t)(nseen + 1) * sizeof *seen);
            count = vb_realloc_check(count, (size_t)(nseen + 1) * sizeof *count);
            seen[nseen] = vb_malloc_check(len + 1);
            memcpy(seen[nseen], svg, len);
            seen[nseen][len] = '\0';
            count[nseen++] = 0;
        }
        fwrite(svg, 1, len, f);
        if (++count[i] > 1) fprintf(f, "_%d", count[i]);
        svg = end;
    }
    for (int i = 0; i < nseen; i++) free(seen[i]);
    free(seen);
    free(count);
}

/* The figure's SVG from <svg on (the XML prolog is not allowed mid-document). */
static void html_figure(FILE *f, const rp_block *b, const vb_outdir *dir, int fig) {
    char name[160];
    snprintf(name, sizeof name, "%s.svg", b->ref);
    char *svg = slurp(dir, name);
    const char *start = svg ? strstr(svg, "<svg") : NULL;
    fputs("<figure>\n", f);
    if (start)
        svg_unique_ids(f, start, fig);
    else
        fprintf(f, "<p>(figure %s.svg missing)</p>", b->ref);
    fputs("\n<figcaption>", f);
    html_text(f, b->text);
    if (b->caption && b->caption[0]) {
        fputs(". <em>", f);
        html_text(f, b->caption);
        fputs("</em>", f);
    }
    static const char *const kinds[3][2] = {{"png", "PNG"}, {"dat", "data"}, {"gp", "gnuplot script"}};
    for (int k = 0; k < 3; k++) {
        char file[VB_PATH_MAX];
        vb_snprintf(file, sizeof file, "%s.%s", b->ref, kinds[k][0]);
        fputs(k ? ", " : " (", f);
        html_link(f, kinds[k][1], file);
    }
    fputs(")", f);
    fputs("</figcaption>\n</figure>\n", f);
    free(svg);
}

static void write_html(FILE *f, void *ctx) {
    const render_ctx *rc = ctx;
    const rp_doc *d = rc->d;
    int fig = 0;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", f);
    html_text(f, rc->title);
    fputs("</title>\n<style>\nbody{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;}\n"
          "table{border-collapse:collapse;margin:1em 0;font-size:90%;}\n"
          "td,th{border:1px solid #bbb;padding:2px 6px;text-align:right;}\n"
          "caption{text-align:left;font-weight:bold;padding:4px 0;}\n"
          "figure svg{max-width:100%;height:auto;}\npre{background:#f4f4f4;padding:6px;overflow-x:auto;}\n"
          ".problems li{color:#a00;}\n.warning{color:#a00;}\n</style></head><body>\n<h1>",
          f);
    html_text(f, rc->title);
    fputs("</h1>\n<h2>Summary</h2>\n<ul class=\"summary\">\n", f);
    if (d->nsummary == 0 && d->nwarnings == 0) fputs("<li>Nothing measured to summarise.</li>\n", f);
    for (int i = 0; i < d->nsummary; i++) {
        fputs("<li>", f);
        html_text(f, d->summary[i]);
        fputs("</li>\n", f);
    }
    for (int i = 0; i < d->nwarnings; i++) {
        fputs("<li class=\"warning\"><b>Warning:</b> ", f);
        html_text(f, d->warnings[i]);
        fputs("</li>\n", f);
    }
    fputs("</ul>\n<h2>Contents</h2>\n<ul>\n", f);
    for (int i = 0; i < d->n; i++) {
        const rp_block *b = &d->b[i];
        if (b->kind != RP_HEADING || b->level > 2) continue;
        fprintf(f, "<li%s><a href=\"#sec-%d\">", b->level > 1 ? " style=\"margin-left:1.5em\"" : "", i);
        html_text(f, b->text);
        fputs("</a></li>\n", f);
    }
    if (d->nproblems) fputs("<li><a href=\"#problems\">Data problems</a></li>\n", f);
    fputs("</ul>\n<p>Every file this report links is inside its directory, except links marked (outside "
          "report/).</p>\n",
          f);
    for (int i = 0; i < d->n; i++) {
        const rp_block *b = &d->b[i];
        switch (b->kind) {
        case RP_HEADING:
            fprintf(f, "<h%d id=\"sec-%d\">", b->level + 1, i);
            html_text(f, b->text);
            fprintf(f, "</h%d>\n", b->level + 1);
            break;
        case RP_PARA:
            fputs("<p>", f);
            html_text(f, b->text);
            fputs("</p>\n", f);
            break;
        case RP_PRE:
            fputs("<pre>", f);
            html_text(f, b->text);
            fputs("</pre>\n", f);
            break;
        case RP_LINK:
            fputs("<p>", f);
            html_link(f, b->text, b->ref);
            fputs("</p>\n", f);
            break;
        case RP_TABLE: html_table(f, b->table); break;
        case RP_FIGURE: html_figure(f, b, rc->dir, fig++); break;
        }
    }
    if (d->nproblems) {
        fputs("<h2 id=\"problems\">Data problems</h2>\n<ul class=\"problems\">\n", f);
        for (int i = 0; i < d->nproblems; i++) {
            fputs("<li>", f);
            html_text(f, d->problems[i]);
            fputs("</li>\n", f);
        }
        fputs("</ul>\n", f);
    }
    fputs("</body></html>\n", f);
}

void rp_doc_write_as(const rp_doc *d, const vb_outdir *dir, const char *title, const char *md, const char *html,
                     const char *cmd) {
    for (int i = 0; i < d->n; i++)
        if (d->b[i].kind == RP_TABLE && d->b[i].table->csv)
            vb_outdir_write_or_die(dir, d->b[i].table->csv, table_csv, d->b[i].table, cmd);
    render_ctx rc = {d, dir, title};
    vb_outdir_write_or_die(dir, md, write_md, &rc, cmd);
    vb_outdir_write_or_die(dir, html, write_html, &rc, cmd);
}

void rp_doc_write(const rp_doc *d, const vb_outdir *dir, const char *title) {
    rp_doc_write_as(d, dir, title, "report.md", "report.html", "report");
}
