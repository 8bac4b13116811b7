/* plot.h: figures through gnuplot, kept re-plottable.
 *
 * vb_plot_render(dir, p) writes into dir:
 *   <name>.dat  one data block per series (gnuplot `index`), columns
 *               x y y_lo y_hi "label" (NaN = no value / no interval)
 *   <name>.gp   the script: `cd dir && gnuplot <name>.gp` redraws both images
 *   <name>.png  (pngcairo) and <name>.svg (svg), then runs gnuplot on the
 *   script with fork/exec in dir (no shell).
 * Every figure has a title, axis labels with units, a legend under the plot
 * area (never over its data), `noenhanced` text (run names keep their underscores), error bars
 * where a series has intervals, dashed ideal series and an optional
 * horizontal reference line. A series keeps one colour across every figure
 * the process draws (vb_plot_color: the colour of its key, e.g. "noddp=true",
 * assigned in order of first use from a colour-blind-safe palette); an ideal
 * series takes its measured series' colour. Points may carry colours of their
 * own (verdicts). Categorical figures (flags, layouts, buckets) put series
 * points at 0..n-1 with the labels as x tics, as boxes or as points with
 * their interval, never joined by lines (categories have no order to draw).
 * A figure may have a second panel under it in the same image (efficiency
 * under throughput). A lanes figure (a timeline) draws each point as a bar
 * from x to lo on the row y, a series per kind of bar (its colour and
 * legend entry), rows named by vb_plot_row, the first row on top; its
 * kinds of bar (compute, communication, memcpy, data wait, idle) have the
 * same colour in every figure of every report (vb_plot_color). The bottom
 * margin holds the tics, the x label and the legend's rows, so none of them
 * sits on another. ymin / ymax fix the y range (an efficiency from 0); bars
 * beyond it are cut at the axis. Categorical points sit at the x their
 * caller gives (0..n-1), so several series (a legend entry each) share one
 * axis of categories. A labelled series on a numeric axis marks points
 * (triangles in their own colours) with their labels above them: a trend's
 * change points named by their commits.
 */
#ifndef VB_ANALYSIS_PLOT_H
#define VB_ANALYSIS_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/util/outdir.h"

/* a point's colour: 0xRRGGBB, or VB_PLOT_SERIES_COLOR for its series' */
#define VB_PLOT_SERIES_COLOR 0xffffffffu

typedef struct vb_plot_series {
    char title[128];
    char color_key[128]; /* "" = the title: series with one key share a colour */
    unsigned color;  /* 0xRRGGBB of its own (a verdict's), or VB_PLOT_SERIES_COLOR: its key's */
    bool ideal;      /* dashed line, no points or error bars */
    bool labelled;   /* numeric figures: markers in each point's colour, its label written above it
                        (a change point and its commit); read from the data file, never run */
    int n;
    double *x, *y, *lo, *hi; /* lo/hi may be NULL or hold NaN: no bar */
    char **labels;   /* categorical figures: the x tic of each point */
    unsigned *rgb;   /* each point's colour (VB_PLOT_SERIES_COLOR: the series') */
} vb_plot_series;

typedef struct vb_plot {
    char name[96];   /* file base name: [A-Za-z0-9_.-] */
    char title[256];
    char xlabel[128], ylabel[128];
    bool categorical;
    bool logx2;      /* log2 x axis (rank counts) */
    bool boxes;      /* categorical bars instead of points */
    bool dots;       /* categorical dots with their interval, each point in its own colour */
    bool logy;       /* log2 y axis (throughput against ranks: the ideal is a straight line) */
    bool logy10;     /* log10 y axis (values a decade or more apart: IO against FULL) */
    bool lanes;      /* bars from x to lo on row y (a timeline), rows named by vb_plot_row */
    char **rows;     /* lanes: the name of row 0, 1, ... (program-made text, quoted for gnuplot) */
    int nrows;
    double ymin, ymax; /* the y range's ends; NaN = gnuplot's choice */
    double hline;    /* NaN = none */
    char hline_title[96];
    vb_plot_series **s; /* each series allocated on its own: vb_plot_series_add's pointer stays valid */
    int ns, cap;
    struct vb_plot *below; /* a second panel under this one in the same image, or NULL */
} vb_plot;

void vb_plot_init(vb_plot *p, const char *name, const char *title, const char *xlabel, const char *ylabel);
/* Adds an empty series; returns it for vb_plot_point. */
vb_plot_series *vb_plot_series_add(vb_plot *p, const char *title, bool ideal);
void vb_plot_point(vb_plot_series *s, double x, double y, double lo, double hi, const char *label);
/* The same with the point's own colour (0xRRGGBB). */
void vb_plot_point_rgb(vb_plot_series *s, double x, double y, double lo, double hi, const char *label, unsigned rgb);
/* lanes: names the next row (rows are 0, 1, ... in the order named). */
void vb_plot_row(vb_plot *p, const char *name);
/* The colour of a series key, the same for the life of the process; the
 * timeline's kinds of bar have fixed colours of their own. */
unsigned vb_plot_color(const char *key);
void vb_plot_free(vb_plot *p);

/* true when a `gnuplot` executable is on PATH. */
bool vb_plot_gnuplot_available(void);

/* Writes the .dat and .gp files into dir (outdir.h: by rename, never
 * through a link) and runs gnuplot in it. Returns 0 when both images were
 * written; -1 with the reason in err otherwise (the .dat/.gp files stay for
 * the user). A panel below is drawn from <name>.panel2.dat. */
int vb_plot_render(const vb_outdir *dir, const vb_plot *p, char *err, size_t errn);

#endif
