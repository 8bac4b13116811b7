/* breakdown.c: timeline.csv into memory, and the per-rank time breakdown by
 * interval-union arithmetic (breakdown.h). */
#include "analysis/breakdown.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/csv.h"
#include "core/util/common.h"
#include "core/results/results.h"

/* A typo such as a timestamp in the rank column must not size a huge array. */
#define VB_TL_MAX_RANK 1000000

/* ---------------------------------------------------------------- intervals */

static int cmp_interval(const void *x, const void *y) {
    const vb_interval *a = x, *b = y;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

int vb_iv_union(vb_interval *iv, int n) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (iv[i].b > iv[i].a) iv[k++] = iv[i];
    if (k == 0) return 0;
    qsort(iv, (size_t)k, sizeof *iv, cmp_interval);
    int m = 0;
    for (int i = 1; i < k; i++) {
        if (iv[i].a <= iv[m].b) {
            if (iv[i].b > iv[m].b) iv[m].b = iv[i].b;
        } else {
            iv[++m] = iv[i];
        }
    }
    return m + 1;
}

int vb_iv_intersect(const vb_interval *x, int nx, const vb_interval *y, int ny, vb_interval *out) {
    /* two-pointer sweep: advance whichever interval ends first */
    int i = 0, j = 0, k = 0;
    while (i < nx && j < ny) {
        double a = x[i].a > y[j].a ? x[i].a : y[j].a;
        double b = x[i].b < y[j].b ? x[i].b : y[j].b;
        if (b > a) out[k++] = (vb_interval){a, b};
        if (x[i].b < y[j].b)
            i++;
        else
            j++;
    }
    return k;
}

double vb_iv_length(const vb_interval *iv, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += iv[i].b - iv[i].a;
    return s;
}

/* ------------------------------------------------------------ timeline read */

void vb_timeline_free(vb_timeline *t) {
    if (!t) return;
    free(t->ev);
    memset(t, 0, sizeof *t);
}

void vb_timeline_add(vb_timeline *t, const vb_tl_event *e) {
    /* capacity is implicit (the next power of two >= n, at least 16), so the
     * struct needs no capacity field */
    int n = t->n;
    if (n == 0 || (n >= 16 && (n & (n - 1)) == 0)) {
        size_t cap = n < 16 ? 16 : 2 * (size_t)n;
        vb_tl_event *p = vb_realloc_check(t->ev, cap * sizeof *p);
        t->ev = p;
    }
    t->ev[t->n++] = *e;
    if (e->rank + 1 > t->nranks) t->nranks = e->rank + 1;
}


enum { C_RANK, C_LANE, C_KIND, C_NAME, C_TTYPE, C_TINDEX, C_STEP, C_START, C_DUR, C_BYTES, C_FLOPS, C_BUCKET, C_N };
static const char *const k_cols[C_N] = {"rank",    "lane",  "kind",  "name",  "trial_type", "trial_index",
                                        "step",    "start_s", "dur_s", "bytes", "flops",      "bucket"};

typedef struct {
    const vb_csv *csv;
    const char *path;
    int col[C_N];
    char *err;
    size_t errn;
} tl_reader;

/* Data row r is record r + 2 (the header is record 1) for messages. */
static bool read_num(tl_reader *rd, int r, int c, double *out) {
    if (vb_csv_num(rd->csv, r, rd->col[c], out)) return true;
    vb_errf(rd->err, rd->errn, "%s: record %d: column %s: '%s' is not a number", rd->path, r + 2, k_cols[c],
           vb_csv_get(rd->csv, r, rd->col[c]));
    return false;
}

static bool read_int(tl_reader *rd, int r, int c, long lo, long hi, int *out) {
    double v;
    if (!read_num(rd, r, c, &v)) return false;
    if (v != floor(v) || v < (double)lo || v > (double)hi) {
        vb_errf(rd->err, rd->errn, "%s: record %d: column %s: '%s' is not an integer in [%ld, %ld]", rd->path, r + 2,
               k_cols[c], vb_csv_get(rd->csv, r, rd->col[c]), lo, hi);
        return false;
    }
    *out = (int)v;
    return true;
}

/* Short identifiers must fit whole: a cut lane or kind would be another one. */
static bool read_word(tl_reader *rd, int r, int c, char *dst, size_t n) {
    const char *s = vb_csv_get(rd->csv, r, rd->col[c]);
    if (strlen(s) >= n) {
        vb_errf(rd->err, rd->errn, "%s: record %d: column %s: '%s' is longer than %zu characters", rd->path, r + 2,
               k_cols[c], s, n - 1);
        return false;
    }
    memcpy(dst, s, strlen(s) + 1);
    return true;
}

/* Names are for people: cut long ones (without splitting a UTF-8 sequence). */
static void copy_name(char *dst, size_t n, const char *s) {
    size_t len = strlen(s);
    if (len >= n) {
        len = n - 1;
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80) len--;
    }
    memcpy(dst, s, len);
    dst[len] = '\0';
}

static bool read_row(tl_reader *rd, int r, vb_tl_event *e) {
    memset(e, 0, sizeof *e);
    const vb_csv *t = rd->csv;
    if (!read_int(rd, r, C_RANK, 0, VB_TL_MAX_RANK, &e->rank)) return false;
    if (!read_word(rd, r, C_LANE, e->lane, sizeof e->lane)) return false;
    if (!read_word(rd, r, C_KIND, e->kind, sizeof e->kind)) return false;
    if (!read_word(rd, r, C_TTYPE, e->trial_type, sizeof e->trial_type)) return false;
    copy_name(e->name, sizeof e->name, vb_csv_get(t, r, rd->col[C_NAME]));
    if (!read_int(rd, r, C_TINDEX, -1, 1L << 30, &e->trial_index)) return false;
    if (!read_int(rd, r, C_STEP, -1, 1L << 30, &e->step)) return false;
    if (!read_int(rd, r, C_BUCKET, -1, 1L << 30, &e->bucket)) return false;
    if (!read_num(rd, r, C_START, &e->start_s) || !read_num(rd, r, C_DUR, &e->dur_s)) return false;
    if (!read_num(rd, r, C_BYTES, &e->bytes) || !read_num(rd, r, C_FLOPS, &e->flops)) return false;
    if (e->dur_s < 0) {
        vb_errf(rd->err, rd->errn, "%s: record %d: column dur_s: negative duration %s", rd->path, r + 2,
               vb_csv_get(t, r, rd->col[C_DUR]));
        return false;
    }
    if (!e->lane[0] || !e->kind[0]) {
        vb_errf(rd->err, rd->errn, "%s: record %d: column %s: empty", rd->path, r + 2, e->lane[0] ? "kind" : "lane");
        return false;
    }
    return true;
}

int vb_timeline_read(const char *path, vb_timeline *t, char *err, size_t errn) {
    memset(t, 0, sizeof *t);
    vb_csv csv;
    int rc = vb_csv_read(path, &csv, err, errn);
    if (rc != 0) return rc;
    tl_reader rd = {.csv = &csv, .path = path, .err = err, .errn = errn};
    for (int c = 0; c < C_N; c++) {
        rd.col[c] = vb_csv_col(&csv, k_cols[c]);
        if (rd.col[c] < 0) {
            vb_errf(err, errn, "%s: record 1: no column '%s' in the header (timeline.csv needs rank,lane,kind,name,"
                   "trial_type,trial_index,step,start_s,dur_s,bytes,flops,bucket)", path, k_cols[c]);
            vb_csv_free(&csv);
            return -2;
        }
    }
    if (csv.nrows > 0) {
        t->ev = vb_malloc_check((size_t)csv.nrows * sizeof *t->ev);
    }
    for (int r = 0; r < csv.nrows; r++) {
        if (!read_row(&rd, r, &t->ev[r])) {
            vb_csv_free(&csv);
            vb_timeline_free(t);
            return -2;
        }
        t->n++;
        if (t->ev[r].rank + 1 > t->nranks) t->nranks = t->ev[r].rank + 1;
    }
    vb_csv_free(&csv);
    return 0;
}

/* --------------------------------------------------------------- breakdown */

typedef struct {
    vb_interval *v;
    int n, cap;
} ivec;

static void ivec_push(ivec *s, double a, double b) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = vb_realloc_check(s->v, (size_t)s->cap * sizeof *s->v);
    }
    s->v[s->n++] = (vb_interval){a, b};
}

static void ivec_reserve(ivec *s, int n) {
    if (n <= s->cap) return;
    s->cap = n;
    s->v = vb_realloc_check(s->v, (size_t)n * sizeof *s->v);
}

/* s := union(s) clipped to the windows w (a union). */
static void clip_to(ivec *s, const ivec *w, ivec *scratch) {
    s->n = vb_iv_union(s->v, s->n);
    ivec_reserve(scratch, s->n + w->n);
    scratch->n = vb_iv_intersect(s->v, s->n, w->v, w->n, scratch->v);
    ivec t = *s;
    *s = *scratch;
    *scratch = t;
}

static bool is_stream_lane(const char *lane) {
    return strncmp(lane, "stream", 6) == 0;
}

/* One rank's intervals by what they count as. */
typedef struct {
    ivec win, compute, comm, memcpy_, data;
    int steps;
    double first, last;
    bool any;
} rank_sets;

static void collect(rank_sets *s, const char *lane, const char *kind, double start, double dur) {
    double a = start, b = start + dur;
    if (!s->any || a < s->first) s->first = a;
    if (!s->any || b > s->last) s->last = b;
    s->any = true;
    bool main_lane = strcmp(lane, "main") == 0;
    if (strcmp(kind, "step") == 0) {
        ivec_push(&s->win, a, b);
        s->steps++;
    } else if (strcmp(kind, "compute") == 0) {
        ivec_push(&s->compute, a, b);
    } else if (strcmp(kind, "comm") == 0) {
        ivec_push(&s->comm, a, b);
    } else if (strcmp(kind, "memcpy") == 0 && (main_lane || is_stream_lane(lane))) {
        ivec_push(&s->memcpy_, a, b);
    } else if (strcmp(kind, "io") == 0 && main_lane) {
        ivec_push(&s->data, a, b);
    }
}

static double nonneg(double x) {
    return x > 0 ? x : 0.0;
}

static void rank_breakdown(rank_sets *s, bool timeline_has_steps, vb_breakdown *b) {
    b->overlap_pct = NAN;
    if (!s->any) return;
    if (!timeline_has_steps) {
        /* an nsys trace: one window over everything the rank did */
        s->win.n = 0;
        ivec_push(&s->win, s->first, s->last);
        s->steps = 1;
    }
    b->steps = s->steps;
    if (s->steps == 0) return;
    s->win.n = vb_iv_union(s->win.v, s->win.n);
    ivec scratch = {0};
    clip_to(&s->compute, &s->win, &scratch);
    clip_to(&s->comm, &s->win, &scratch);
    clip_to(&s->memcpy_, &s->win, &scratch);
    clip_to(&s->data, &s->win, &scratch);

    b->step_s = vb_iv_length(s->win.v, s->win.n);
    b->compute_s = vb_iv_length(s->compute.v, s->compute.n);
    b->comm_s = vb_iv_length(s->comm.v, s->comm.n);
    b->memcpy_s = vb_iv_length(s->memcpy_.v, s->memcpy_.n);
    b->data_wait_s = vb_iv_length(s->data.v, s->data.n);

    ivec_reserve(&scratch, s->comm.n + s->compute.n);
    scratch.n = vb_iv_intersect(s->comm.v, s->comm.n, s->compute.v, s->compute.n, scratch.v);
    b->comm_hidden_s = vb_iv_length(scratch.v, scratch.n);
    b->comm_exposed_s = nonneg(b->comm_s - b->comm_hidden_s);

    /* busy = union of the four (already clipped) sets */
    scratch.n = 0;
    const ivec *parts[] = {&s->compute, &s->comm, &s->memcpy_, &s->data};
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < parts[p]->n; i++) ivec_push(&scratch, parts[p]->v[i].a, parts[p]->v[i].b);
    scratch.n = vb_iv_union(scratch.v, scratch.n);
    b->idle_s = nonneg(b->step_s - vb_iv_length(scratch.v, scratch.n));
    if (b->comm_s > 0) b->overlap_pct = 100.0 * b->comm_hidden_s / b->comm_s;
    free(scratch.v);
}

struct vb_breakdown_acc {
    rank_sets *sets;
    int nranks, cap;
    bool has_steps;
};

vb_breakdown_acc *vb_breakdown_acc_create(void) { return vb_calloc_check(1, sizeof(vb_breakdown_acc)); }

/* ranks 0 .. nranks-1 have their entry */
static void acc_cover(vb_breakdown_acc *a, int nranks) {
    if (nranks > a->cap) {
        int cap = a->cap ? a->cap : 4;
        while (cap < nranks) cap *= 2;
        a->sets = vb_realloc_check(a->sets, (size_t)cap * sizeof *a->sets);
        memset(a->sets + a->cap, 0, (size_t)(cap - a->cap) * sizeof *a->sets);
        a->cap = cap;
    }
    if (nranks > a->nranks) a->nranks = nranks;
}

void vb_breakdown_acc_add(vb_breakdown_acc *a, int rank, const char *lane, const char *kind, double start_s,
                          double dur_s) {
    if (rank < 0 || rank >= VB_TL_MAX_RANK) return;
    acc_cover(a, rank + 1);
    if (strcmp(kind, "step") == 0) a->has_steps = true;
    collect(&a->sets[rank], lane, kind, start_s, dur_s);
}

int vb_breakdown_acc_finish(vb_breakdown_acc *a, vb_breakdown **out) {
    const int nr = a->nranks;
    *out = NULL;
    vb_breakdown *b = nr > 0 ? vb_calloc_check((size_t)nr, sizeof *b) : NULL;
    for (int r = 0; r < nr; r++) {
        b[r].rank = r;
        rank_breakdown(&a->sets[r], a->has_steps, &b[r]);
        free(a->sets[r].win.v);
        free(a->sets[r].compute.v);
        free(a->sets[r].comm.v);
        free(a->sets[r].memcpy_.v);
        free(a->sets[r].data.v);
    }
    free(a->sets);
    free(a);
    *out = b;
    return nr;
}

int vb_breakdown_ranks(const vb_timeline *t, vb_breakdown **out) {
    vb_breakdown_acc *a = vb_breakdown_acc_create();
    for (int i = 0; i < t->n; i++) {
        const vb_tl_event *e = &t->ev[i];
        if (e->rank < 0 || e->rank >= t->nranks) continue; /* nranks is highest + 1: cannot happen for a read timeline */
        vb_breakdown_acc_add(a, e->rank, e->lane, e->kind, e->start_s, e->dur_s);
    }
    if (t->nranks > 0 && t->nranks <= VB_TL_MAX_RANK) acc_cover(a, t->nranks); /* every rank, events or not */
    return vb_breakdown_acc_finish(a, out);
}

/* ------------------------------------------------------------ breakdown.csv */

typedef struct {
    const vb_breakdown *b;
    int n;
} bd_rows;

static void write_breakdown(FILE *f, void *ctx) {
    const bd_rows *r = ctx;
    fputs(VB_BREAKDOWN_CSV_HEADER "\n", f);
    for (int i = 0; i < r->n; i++) {
        const vb_breakdown *b = &r->b[i];
        fprintf(f, "%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,", b->rank, b->steps, b->step_s, b->compute_s,
                b->comm_s, b->comm_hidden_s, b->comm_exposed_s, b->memcpy_s, b->data_wait_s, b->idle_s);
        if (!isnan(b->overlap_pct)) fprintf(f, "%.6g", b->overlap_pct);
        fputc('\n', f);
    }
}

int vb_breakdown_write_csv(const vb_outdir *dir, const vb_breakdown *b, int n, char *why, size_t whyn) {
    bd_rows r = {b, n};
    return vb_outdir_write(dir, VB_BREAKDOWN_CSV, write_breakdown, &r, why, whyn);
}
