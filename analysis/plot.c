/* plot.c: gnuplot scripts, data files and the gnuplot child (plot.h). */
#include "analysis/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util/common.h"
#include "core/util/fileio.h"
#include "core/util/outdir.h"

void vb_plot_init(vb_plot *p, const char *name, const char *title, const char *xlabel, const char *ylabel) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    /* the name is written unquoted into file names and `set output`: keep it to [A-Za-z0-9_.-] */
    for (char *c = p->name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '.' || *c == '-'))
            *c = '_';
    snprintf(p->title, sizeof p->title, "%s", title);
    snprintf(p->xlabel, sizeof p->xlabel, "%s", xlabel);
    snprintf(p->ylabel, sizeof p->ylabel, "%s", ylabel);
    p->hline = NAN;
    p->ymin = p->ymax = NAN;
}

vb_plot_series *vb_plot_series_add(vb_plot *p, const char *title, bool ideal) {
    if (p->ns == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 4;
        p->s = vb_realloc_check(p->s, (size_t)p->cap * sizeof *p->s);
    }
    /* each series a block of its own: the pointer returned stays valid as
     * more series are added */
    vb_plot_series *s = p->s[p->ns++] = vb_calloc_check(1, sizeof *s);
    snprintf(s->title, sizeof s->title, "%s", title);
    s->ideal = ideal;
    s->color = VB_PLOT_SERIES_COLOR;
    return s;
}

void vb_plot_point(vb_plot_series *s, double x, double y, double lo, double hi, const char *label) {
    vb_plot_point_rgb(s, x, y, lo, hi, label, VB_PLOT_SERIES_COLOR);
}

void vb_plot_point_rgb(vb_plot_series *s, double x, double y, double lo, double hi, const char *label, unsigned rgb) {
    size_t n = (size_t)s->n + 1;
    s->x = vb_realloc_check(s->x, n * sizeof *s->x);
    s->y = vb_realloc_check(s->y, n * sizeof *s->y);
    s->lo = vb_realloc_check(s->lo, n * sizeof *s->lo);
    s->hi = vb_realloc_check(s->hi, n * sizeof *s->hi);
    s->labels = vb_realloc_check(s->labels, n * sizeof *s->labels);
    s->rgb = vb_realloc_check(s->rgb, n * sizeof *s->rgb);
    s->rgb[s->n] = rgb;
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->lo[s->n] = lo;
    s->hi[s->n] = hi;
    s->labels[s->n] = vb_strdup_check(label ? label : "");
    s->n++;
}

void vb_plot_row(vb_plot *p, const char *name) {
    p->rows = vb_realloc_check(p->rows, (size_t)(p->nrows + 1) * sizeof *p->rows);
    p->rows[p->nrows] = vb_strdup_check(name);
    p->nrows++;
}

void vb_plot_free(vb_plot *p) {
    for (int i = 0; i < p->nrows; i++) free(p->rows[i]);
    free(p->rows);
    for (int i = 0; i < p->ns; i++) {
        vb_plot_series *s = p->s[i];
        for (int k = 0; k < s->n; k++) free(s->labels[k]);
        free(s->labels);
        free(s->rgb);
        free(s->x);
        free(s->y);
        free(s->lo);
        free(s->hi);
        free(s);
    }
    free(p->s);
    memset(p, 0, sizeof *p);
}

/* Okabe and Ito's palette, which stays distinct for the common colour-vision
 * deficiencies (its yellow left out: too faint on white) */
static const unsigned k_palette[] = {0x0072B2, 0xD55E00, 0x009E73, 0xCC79A7, 0xE69F00, 0x56B4E9, 0x000000};
#define NPALETTE (sizeof k_palette / sizeof *k_palette)

/* The timeline's kinds (HTA's categories, as the trace viewer colours them
 * too): one colour each in every figure, whatever else the report drew
 * first, and none of them the palette's first, which the first series of
 * most figures takes. */
static const struct {
    const char *key;
    unsigned rgb;
} k_lane_colors[] = {
    {"compute", 0xCC79A7}, {"communication", 0xE69F00}, {"memcpy", 0x56B4E9}, {"data wait", 0x000000},
    {"idle", 0x999999},
};

unsigned vb_plot_color(const char *key) {
    for (size_t i = 0; i < sizeof k_lane_colors / sizeof *k_lane_colors; i++)
        if (strcmp(k_lane_colors[i].key, key) == 0) return k_lane_colors[i].rgb;
    static char keys[64][128];
    static int nkeys;
    for (int i = 0; i < nkeys; i++)
        if (strcmp(keys[i], key) == 0) return k_palette[i % NPALETTE];
    if (nkeys == 64) return k_palette[(unsigned)strlen(key) % NPALETTE]; /* beyond 64 keys colours repeat anyway */
    snprintf(keys[nkeys], sizeof keys[nkeys], "%s", key);
    return k_palette[nkeys++ % NPALETTE];
}

static unsigned series_color(const vb_plot_series *s) {
    if (s->color != VB_PLOT_SERIES_COLOR) return s->color;
    return vb_plot_color(s->color_key[0] ? s->color_key : s->title);
}

bool vb_plot_gnuplot_available(void) {
    const char *path = getenv("PATH");
    if (!path) return false;
    char *copy = vb_strdup_check(path);
    bool found = false;
    for (char *save = NULL, *dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
        char exe[VB_PATH_MAX];
        snprintf(exe, sizeof exe, "%s/gnuplot", *dir ? dir : ".");
        found = access(exe, X_OK) == 0;
    }
    free(copy);
    return found;
}

/* A gnuplot string literal that nothing inside can act on. gnuplot runs
 * backquoted text as a shell command inside double quotes (and again each
 * time the saved script is rerun), so every string is single-quoted, where
 * only '' (one quote) is special: no backquotes, no macros, no escapes. A
 * line break would end the command: it becomes a space. */
static void gp_string(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('\'', f);
}

/* text in a comment line of the .dat file: one line */
static void dat_comment(FILE *f, const char *s) {
    for (; *s; s++) fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
}

static void dat_num(FILE *f, double x) {
    if (isfinite(x))
        fprintf(f, " %.9g", x);
    else
        fputs(" NaN", f);
}

static void write_dat(FILE *f, void *ctx) {
    const vb_plot *p = ctx;
    fputs("# ", f);
    dat_comment(f, p->title);
    fputs("\n# x y y_lo y_hi label rgb; one block per series (gnuplot index)\n", f);
    for (int i = 0; i < p->ns; i++) {
        const vb_plot_series *s = p->s[i];
        if (i) fputs("\n\n", f);
        fprintf(f, "# series %d: ", i);
        dat_comment(f, s->title);
        fputc('\n', f);
        /* an empty series still gets a block: gnuplot counts a run of blank
         * lines as one separator, so an empty block would shift every later
         * series' index */
        if (s->n == 0) fputs(" NaN NaN NaN NaN \"\" 0\n", f);
        for (int k = 0; k < s->n; k++) {
            dat_num(f, s->x[k]);
            dat_num(f, s->y[k]);
            dat_num(f, s->lo ? s->lo[k] : NAN);
            dat_num(f, s->hi ? s->hi[k] : NAN);
            fputc(' ', f);
            /* a data-file string (read as data, never run): quotes inside
             * would end it, so they become ', a line break would end the
             * record, and gnuplot reads \\ as one backslash (a lone one
             * before the closing quote was dropped) */
            fputc('"', f);
            for (const char *c = s->labels[k]; *c; c++) {
                if (*c == '\\') fputc('\\', f);
                fputc(*c == '"' ? '\'' : *c == '\n' || *c == '\r' ? ' ' : *c, f);
            }
            fprintf(f, "\" %u\n", s->rgb[k] == VB_PLOT_SERIES_COLOR ? series_color(s) : s->rgb[k]);
        }
    }
}

static bool series_has_bars(const vb_plot_series *s) {
    for (int k = 0; k < s->n; k++)
        if (isfinite(s->lo[k]) && isfinite(s->hi[k])) return true;
    return false;
}

/* One plot command for both terminals; written twice with different outputs. */
static void write_plot_cmd(FILE *f, const vb_plot *p, const char *dat) {
    fputs("plot ", f);
    bool first = true;
    for (int i = 0; i < p->ns; i++) {
        const vb_plot_series *s = p->s[i];
        if (s->n == 0) continue;
        if (!first) fputs(", \\\n     ", f);
        first = false;
        /* every series names its own categories: together they label the axis */
        const char *tic = p->categorical ? ":xtic(5)" : "";
        char lc[32];
        snprintf(lc, sizeof lc, "lc rgb '#%06X'", series_color(s));
        fprintf(f, "'%s' index %d ", dat, i);
        if (p->lanes) {
            /* a bar from x to lo, centred on its row, 0.8 of a row high */
            fprintf(f, "using (($1+$3)/2):2:(($3-$1)/2):(0.4) with boxxyerror fill solid 0.85 noborder %s title ", lc);
        } else if (s->labelled && !p->categorical) {
            fprintf(f, "using 1:2:6 with points pt 9 ps 2 lc rgb variable title ");
        } else if (s->ideal) {
            fprintf(f, "using 1:2%s with lines dt 2 lw 2 %s title ", tic, lc);
        } else if (p->dots) {
            fprintf(f, "using 1:2:3:4:6%s with yerrorbars pt 7 ps 1.6 lw 2 lc rgb variable title ", tic);
        } else if (p->boxes) {
            fprintf(f, "using 1:2%s with boxes fill solid 0.5 %s title ", tic, lc);
        } else if (series_has_bars(s)) {
            /* categories are points with their interval; a numeric axis joins them */
            fprintf(f, "using 1:2:3:4%s with %s lw 2 pt 7 %s title ", tic,
                    p->categorical ? "yerrorbars" : "yerrorlines", lc);
        } else {
            fprintf(f, "using 1:2%s with %s lw 2 pt 7 %s title ", tic, p->categorical ? "points" : "linespoints", lc);
        }
        gp_string(f, s->title);
        if (s->labelled && !p->categorical && !p->lanes)
            fprintf(f, ", \\\n     '%s' index %d using 1:2:5 with labels offset character 0,1.3 noenhanced notitle", dat,
                    i);
        if (p->boxes && !s->ideal && series_has_bars(s))
            fprintf(f, ", \\\n     '%s' index %d using 1:2:3:4 with yerrorbars lc black pt 0 title '95%% CI'", dat, i);
    }
    if (isfinite(p->hline)) {
        fprintf(f, "%s%.9g with lines dt 3 lw 1.5 lc rgb '#555555' title ", first ? "" : ", \\\n     ", p->hline);
        gp_string(f, p->hline_title);
        first = false;
    }
    if (first) fputs("NaN notitle", f);
    fputc('\n', f);
}

/* The bottom margin, in character heights: the x tics (a categorical
 * axis's rotated labels take half their length), the x label, and the
 * legend's rows under them. gnuplot's own margin leaves the x label under
 * a legend placed below, so the figure sets it. A row of the legend holds
 * about 110 characters at the figures' width and font, in columns as wide
 * as its widest entry (its title and its sample), as gnuplot lays it out. */
static double bottom_margin(const vb_plot *p) {
    size_t entries = 0, widest = 0, longest = 0;
    for (int i = 0; i < p->ns; i++) {
        const vb_plot_series *s = p->s[i];
        if (s->n == 0) continue;
        entries++;
        if (strlen(s->title) + 12 > widest) widest = strlen(s->title) + 12;
        for (int k = 0; p->categorical && k < s->n; k++)
            if (strlen(s->labels[k]) > longest) longest = strlen(s->labels[k]);
    }
    if (isfinite(p->hline)) {
        entries++;
        if (strlen(p->hline_title) + 12 > widest) widest = strlen(p->hline_title) + 12;
    }
    const size_t per_row = widest && widest < 110 ? 110 / widest : 1;
    const double rows = entries ? ceil((double)entries / (double)per_row) : 0;
    const double tics = p->categorical ? 1 + 0.5 * (double)(longest > 40 ? 40 : longest) : 1;
    return 2.5 + tics + 1.3 * rows;
}

/* one panel's settings and plot, from a clean state (panels share an image) */
static void write_panel(FILE *f, const vb_plot *p, const char *dat) {
    fputs("reset\nset encoding utf8\nset title ", f);
    gp_string(f, p->title);
    fputs(" noenhanced\nset xlabel ", f);
    gp_string(f, p->xlabel);
    fputs(" noenhanced\nset ylabel ", f);
    gp_string(f, p->ylabel);
    /* the legend under the plot area, where it covers no point or whisker */
    fputs(" noenhanced\nset key outside below center horizontal box noenhanced\nset grid\nset datafile missing 'NaN'\n",
          f);
    fprintf(f, "set bmargin %.1f\n", bottom_margin(p));
    if (isfinite(p->ymin) || isfinite(p->ymax)) {
        fputs("set yrange [", f);
        if (isfinite(p->ymin)) fprintf(f, "%.9g", p->ymin);
        fputs(":", f);
        if (isfinite(p->ymax)) fprintf(f, "%.9g", p->ymax);
        fputs("]\n", f);
    }
    if (p->logx2) fputs("set logscale x 2\nset offsets graph 0.05, graph 0.05, graph 0.06, graph 0.06\n", f);
    bool labelled = false;
    for (int i = 0; i < p->ns; i++) labelled = labelled || (p->s[i]->labelled && p->s[i]->n > 0);
    /* room above the highest point for its label */
    if (labelled && !p->categorical && !p->lanes && !p->logx2) fputs("set offsets 0, 0, graph 0.12, graph 0.04\n", f);
    if (p->logy) fputs("set logscale y 2\n", f);
    if (p->logy10) fputs("set logscale y 10\n", f);
    if (p->lanes && p->nrows > 0) {
        /* row names as y tics, the first row on top */
        fputs("set ytics (", f);
        for (int i = 0; i < p->nrows; i++) {
            if (i) fputs(", ", f);
            gp_string(f, p->rows[i]);
            fprintf(f, " %d", i);
        }
        fprintf(f, ") noenhanced\nset yrange [%g:-0.6]\nset grid noytics\n", p->nrows - 0.4);
    }
    if (p->categorical) {
        fputs("set xtics rotate by -30 noenhanced\nset offsets 0.6, 0.6, 0, 0\nset boxwidth 0.6\n", f);
        if (p->boxes && !p->logy && !p->logy10) fputs("set yrange [0:*]\n", f);

    }
    write_plot_cmd(f, p, dat);
}

static void write_gp(FILE *f, void *ctx) {
    const vb_plot *p = ctx;
    fprintf(f, "# %s.gp: redraw with `gnuplot %s.gp` in this directory (data: %s.dat%s)\n", p->name, p->name,
            p->name, p->below ? ", and .panel2.dat for the lower panel" : "");
    char dat[128], dat2[128];
    snprintf(dat, sizeof dat, "%s.dat", p->name);
    snprintf(dat2, sizeof dat2, "%s.panel2.dat", p->name);
    const int h = p->below ? 900 : 600;
    const char *terms[2][2] = {{"pngcairo noenhanced size 960,%d font 'sans,11'", "png"},
                               {"svg noenhanced size 960,%d font 'sans,11'", "svg"}};
    for (int t = 0; t < 2; t++) {
        fputs("set terminal ", f);
        fprintf(f, terms[t][0], h);
        fprintf(f, "\nset output '%s.%s'\n", p->name, terms[t][1]);
        if (p->below) fputs("set multiplot layout 2,1\n", f);
        write_panel(f, p, dat);
        if (p->below) {
            write_panel(f, p->below, dat2);
            fputs("unset multiplot\n", f);
        }
        fputs("unset output\n", f);
    }
}

/* Written to a temporary file and renamed into place inside the report's
 * directory (outdir.h): a symbolic link already at the name is replaced,
 * never followed to a file outside the report (a results tree is someone
 * else's data). */
static int write_file(const vb_outdir *dir, const char *name, const char *ext, void (*fn)(FILE *, void *),
                      const vb_plot *p, char *err, size_t errn) {
    char file[160];
    snprintf(file, sizeof file, "%s.%s", name, ext);
    return vb_outdir_write(dir, file, fn, (void *)p, err, errn) == 0 ? 0 : -1;
}

/* the outputs gnuplot opens by name: whatever is there (a planted link
 * included) is removed first, so gnuplot creates plain files */
static int clear_output(const vb_outdir *dir, const char *name, char *err, size_t errn) {
    if (vb_outdir_unlink(dir, name) != 0) {
        snprintf(err, errn, "%s/%s: %s", dir->path, name, strerror(errno));
        return -1;
    }
    return 0;
}

/* gnuplot's stderr goes to <name>.log so a failing script can be read later.
 * It runs in the directory held open (fchdir), never in whatever its path
 * names by then. */
static int run_gnuplot(const vb_outdir *dir, const char *name, char *err, size_t errn) {
    char script[160], log[160];
    snprintf(script, sizeof script, "%s.gp", name);
    snprintf(log, sizeof log, "%s.gnuplot.log", name);
    char out[2][160];
    snprintf(out[0], sizeof out[0], "%s.png", name);
    snprintf(out[1], sizeof out[1], "%s.svg", name);
    if (clear_output(dir, log, err, errn) != 0 || clear_output(dir, out[0], err, errn) != 0 ||
        clear_output(dir, out[1], err, errn) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errn, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        if (fchdir(dir->fd) != 0) _exit(126);
        int fd = open(log, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644); /* cleared by the parent */
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
        }
        if (fd >= 0) dup2(fd, 2);
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            snprintf(err, errn, "waitpid: %s", strerror(errno));
            return -1;
        }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(err, errn, "gnuplot %s failed (status %d; see %s/%s)", script,
                 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), dir->path, log);
        return -1;
    }
    struct stat sb;
    if (fstatat(dir->fd, log, &sb, AT_SYMLINK_NOFOLLOW) == 0 && sb.st_size == 0)
        unlinkat(dir->fd, log, 0); /* keep only logs that say something */
    return 0;
}

int vb_plot_render(const vb_outdir *dir, const vb_plot *p, char *err, size_t errn) {
    if (write_file(dir, p->name, "dat", write_dat, p, err, errn) != 0) return -1;
    if (p->below && write_file(dir, p->name, "panel2.dat", write_dat, p->below, err, errn) != 0) return -1;
    if (write_file(dir, p->name, "gp", write_gp, p, err, errn) != 0) return -1;
    if (run_gnuplot(dir, p->name, err, errn) != 0) return -1;
    const char *ext[2] = {"png", "svg"};
    for (int i = 0; i < 2; i++) {
        char file[160];
        snprintf(file, sizeof file, "%s.%s", p->name, ext[i]);
        struct stat sb;
        if (fstatat(dir->fd, file, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) {
            snprintf(err, errn, "gnuplot wrote no %s/%s", dir->path, file);
            return -1;
        }
    }
    return 0;
}
