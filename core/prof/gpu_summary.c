/* gpu_summary.c: nsys-style per-name summaries of GPU activities (gpu_summary.h). */
#include "core/prof/gpu_summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/strtab.h"

typedef struct {
    uint64_t *dur;   /* every instance's duration, ns */
    size_t n, cap;
    uint64_t total;
} gsum_entry;

struct vb_gsum {
    vb_strtab *names;
    gsum_entry *e;   /* parallel to names' indices */
    size_t cap;
    uint64_t records;
};

vb_gsum *vb_gsum_create(void) {
    vb_gsum *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->names = vb_strtab_create();
    if (!g->names) {
        free(g);
        return NULL;
    }
    return g;
}

void vb_gsum_destroy(vb_gsum *g) {
    if (!g) return;
    for (size_t i = 0; i < vb_strtab_count(g->names); i++) free(g->e[i].dur);
    vb_strtab_destroy(g->names);
    free(g->e);
    free(g);
}

void vb_gsum_reset(vb_gsum *g) {
    for (size_t i = 0; i < vb_strtab_count(g->names); i++) free(g->e[i].dur);
    vb_strtab_clear(g->names);
    g->records = 0;
}

size_t vb_gsum_names(const vb_gsum *g) { return vb_strtab_count(g->names); }
uint64_t vb_gsum_records(const vb_gsum *g) { return g->records; }

/* The entry of `name`, made when new; NULL when out of memory. */
static gsum_entry *entry_of(vb_gsum *g, const char *name) {
    const size_t before = vb_strtab_count(g->names);
    if (before == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 32;
        gsum_entry *ne = realloc(g->e, nc * sizeof *ne);
        if (!ne) return NULL;
        g->e = ne;
        g->cap = nc;
    }
    int idx = vb_strtab_intern(g->names, name);
    if (idx < 0) return NULL;
    if ((size_t)idx == before) memset(&g->e[idx], 0, sizeof g->e[idx]);
    return &g->e[idx];
}

int vb_gsum_add(vb_gsum *g, const char *name, uint64_t start_ns, uint64_t end_ns) {
    if (end_ns < start_ns || (start_ns == 0 && end_ns == 0)) return 1;
    gsum_entry *e = entry_of(g, name ? name : "");
    if (!e) return -1;
    if (e->n == e->cap) {
        size_t nc = e->cap ? e->cap * 2 : 16;
        uint64_t *nd = realloc(e->dur, nc * sizeof *nd);
        if (!nd) return -1;
        e->dur = nd;
        e->cap = nc;
    }
    uint64_t d = end_ns - start_ns;
    e->dur[e->n++] = d;
    e->total += d;
    g->records++;
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_row(const void *a, const void *b) {
    const vb_gsum_row *x = a, *y = b;
    if (x->total_ns != y->total_ns) return x->total_ns < y->total_ns ? 1 : -1;
    return strcmp(x->name, y->name);
}

size_t vb_gsum_rows(vb_gsum *g, vb_gsum_row **rows) {
    *rows = NULL;
    const size_t n = vb_strtab_count(g->names);
    if (n == 0) return 0;
    vb_gsum_row *r = calloc(n, sizeof *r);
    if (!r) return (size_t)-1;
    double grand = 0;
    for (size_t i = 0; i < n; i++) grand += (double)g->e[i].total;
    for (size_t i = 0; i < n; i++) {
        gsum_entry *e = &g->e[i];
        qsort(e->dur, e->n, sizeof *e->dur, cmp_u64);
        vb_gsum_row *w = &r[i];
        w->name = vb_strtab_str(g->names, (int)i);
        w->total_ns = e->total;
        w->instances = e->n;
        w->time_pct = grand > 0 ? 100.0 * (double)e->total / grand : 0.0;
        w->avg_ns = (double)e->total / (double)e->n;
        w->med_ns = e->n % 2 ? (double)e->dur[e->n / 2]
                             : ((double)e->dur[e->n / 2 - 1] + (double)e->dur[e->n / 2]) / 2.0;
        w->min_ns = e->dur[0];
        w->max_ns = e->dur[e->n - 1];
        double ss = 0;
        for (size_t k = 0; k < e->n; k++) {
            double dv = (double)e->dur[k] - w->avg_ns;
            ss += dv * dv;
        }
        w->stddev_ns = e->n > 1 ? sqrt(ss / (double)(e->n - 1)) : 0.0;
    }
    qsort(r, n, sizeof *r, cmp_row);
    *rows = r;
    return n;
}

/* RFC 4180 quoting, as nsys writes names with commas ("void f<int, 4>(...)") */
static void put_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

char *vb_gsum_csv(vb_gsum *g, vb_gsum_format fmt, char *(*display)(const char *name)) {
    vb_gsum_row *rows;
    size_t n = vb_gsum_rows(g, &rows);
    if (n == (size_t)-1) return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        free(rows);
        return NULL;
    }
    fprintf(f, "Time (%%),Total Time (ns),%s,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),%s\n",
            fmt == VB_GSUM_MEMOPS ? "Count" : "Instances", fmt == VB_GSUM_MEMOPS ? "Operation" : "Name");
    for (size_t i = 0; i < n; i++) {
        const vb_gsum_row *w = &rows[i];
        fprintf(f, "%.1f,%llu,%llu,%.1f,%.1f,%llu,%llu,%.1f,", w->time_pct, (unsigned long long)w->total_ns,
                (unsigned long long)w->instances, w->avg_ns, w->med_ns, (unsigned long long)w->min_ns,
                (unsigned long long)w->max_ns, w->stddev_ns);
        char *shown = display ? display(w->name) : NULL;
        put_field(f, shown ? shown : w->name);
        free(shown);
        fputc('\n', f);
    }
    free(rows);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
