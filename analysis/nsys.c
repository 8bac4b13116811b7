/* nsys.c: `vitbench nsys FILE... [--filter_time START/END] [--output_dir DIR]`
 * imports `nsys stats --format csv` reports into vitbench's files.
 *
 * Reports are recognised by their header, not their file name:
 *   cuda_gpu_trace        Start, Duration, Name (+ Strm/Stream, Device, Bytes)
 *   nvtx_sum              Range, Total Time, Instances
 *   api_sum               Total Time, Num Calls (oldest: Calls), Name: host
 *                         API calls (cuda_api_sum; osrt_sum has the same
 *                         columns): time the CPU spent in the calls, never
 *                         GPU activity
 *   cuda_gpu_sum          Total Time, Instances, Category (+ Operation or Name)
 *   cuda_gpu_mem_time_sum Total Time, Count, Operation (memory operations)
 *   cuda_gpu_kern_sum     Total Time, Instances, Name
 * Column names of both generations are accepted ("Avg (ns)" / "Average",
 * "Med" / "Median", "Min" / "Minimum", "Max" / "Maximum", "Instances" /
 * "Count", "Strm" / "Stream"); a time column's unit is read from its header,
 * "(ns)", "(us)", "(ms)", "(s)", none meaning ns. Extra columns, CRLF and a
 * byte order mark are tolerated.
 * A file holds one report (`nsys stats --output`) or several (`nsys stats
 * -r a,b --format csv > f.csv`: each after nsys's "Processing [...]" line
 * and ended by a blank line). Each report runs from its header to the first
 * blank line, banner line or next header; the lines around reports (nsys's
 * notices, reports of other kinds) are passed over.
 *
 * Outputs, in --output_dir (default: <first FILE without its extension>
 * _vitbench/, so that importing another report of the same folder does not
 * overwrite these; never a vitbench run directory, whose own ops.csv /
 * timeline.csv it would overwrite):
 *   ops.csv        profile.h's columns; rank 0, or a trace's device id;
 *                  trial_type "nsys"; category compute / comm (kernels whose
 *                  name starts with "nccl", case-insensitive, after an
 *                  optional "void ") / memcpy ("[CUDA memcpy ...]",
 *                  "[CUDA memset ...]") / nvtx (nvtx_sum ranges, which nest)
 *                  / api (api_sum rows): share_of_step = total / the rank's
 *                  summed GPU time, for GPU rows only (nvtx and api rows
 *                  leave it empty); a kernel found in a trace and a summary
 *                  is taken from the trace (it has exact medians and honours
 *                  --filter_time), from cuda_gpu_kern_sum before cuda_gpu_sum
 *                  and cuda_gpu_mem_time_sum; unknown values (bytes, flops, a
 *                  median an old report lacks) are 0 / empty
 *   timeline.csv   (a trace only) core/prof/timeline.h's format: lane stream<N>,
 *                  kind compute / comm / memcpy, trial_type "nsys", step -1
 *   breakdown.csv  (a trace only) breakdown.h over one window per device,
 *                  from its first GPU activity's start to its last one's
 *                  end (copies and memsets count as activity, as kernels
 *                  do): nccl kernels overlapping compute kernels on any
 *                  stream are hidden
 * Files are read as a stream, one record at a time (the buffer grows to the
 * largest record, never to the file): each summary row becomes an op row and
 * each trace row a 40-byte activity (times, bytes, device, stream, and its
 * name's index in one table of names), so a million-row cuda_gpu_trace
 * takes its activities' 40 MB, not its text and a copy of every cell (1.9
 * GiB for 67 MiB before); the breakdown is fed the activities one by one.
 * A NUL byte anywhere exits 2 naming the record.
 * --filter_time START/END (nsys syntax: a plain number is ns, else terms
 * with s, ms, us, ns suffixes, "4s420ms") keeps the trace rows that lie
 * entirely inside the window; a summary report has no times, so the option
 * is an error for it.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/analysis.h"
#include "analysis/breakdown.h"
#include "analysis/csv.h"
#include "core/config/cli.h"
#include "core/util/common.h"
#include "core/util/strtab.h"
#include "core/prof/gpu_activity.h"
#include "core/results/results.h"

#define TOP_KERNELS 10

typedef enum { R_TRACE, R_KERN_SUM, R_GPU_SUM, R_MEM_TIME_SUM, R_NVTX_SUM, R_API_SUM } report_kind;
static const char *const k_report_names[] = {"cuda_gpu_trace", "cuda_gpu_kern_sum", "cuda_gpu_sum",
                                             "cuda_gpu_mem_time_sum", "nvtx_sum", "api_sum"};

/* The columns a report may have; -1 when absent. */
enum { K_NAME, K_TOTAL, K_CALLS, K_AVG, K_MED, K_MIN, K_MAX, K_START, K_DUR, K_STREAM, K_DEVICE, K_BYTES, K_N };

typedef struct {
    const char *path;      /* for messages: the file, and which report of it when it holds several */
    vb_csv head;           /* its header record (no rows: they are taken as they are read) */
    int nrows;             /* data records read */
    report_kind kind;
    int col[K_N];
    double scale[K_N];     /* seconds per unit of a time column; bytes per unit of Bytes */
    int first_record;      /* line number of the header in the file */
    int file;              /* index of its FILE on the command line */
} report;

/* ------------------------------------------------------------ header names */

/* "Total Time (ns)" -> base "Total Time", unit "ns"; "Time(%)" -> "Time", "%". */
/* qsort for arrays that may be empty: a report without rows leaves the
 * array NULL, and qsort's pointer argument is declared never-null. */
static void sort_n(void *v, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
    if (n > 1) qsort(v, n, size, cmp);
}

static void split_header(const char *h, char *base, size_t bn, char *unit, size_t un) {
    while (isspace((unsigned char)*h)) h++;
    size_t len = strlen(h);
    while (len > 0 && isspace((unsigned char)h[len - 1])) len--;
    unit[0] = '\0';
    const char *open = NULL;
    if (len > 0 && h[len - 1] == ')') open = memrchr(h, '(', len);
    size_t blen = open ? (size_t)(open - h) : len;
    if (open) {
        size_t ulen = (size_t)(h + len - 1 - (open + 1));
        snprintf(unit, un, "%.*s", (int)ulen, open + 1);
    }
    while (blen > 0 && isspace((unsigned char)h[blen - 1])) blen--;
    snprintf(base, bn, "%.*s", (int)blen, h);
}

static bool any_of(const char *s, const char *const *names) {
    for (; *names; names++)
        if (strcasecmp(s, *names) == 0) return true;
    return false;
}

static const char *const k_aliases[K_N][5] = {
    [K_NAME] = {"Name", NULL},
    [K_TOTAL] = {"Total Time", NULL},
    /* "Num Calls" (and the oldest reports' "Calls") count calls of a host API:
     * classify_header makes those an API summary */
    [K_CALLS] = {"Instances", "Count", "Num Calls", "Calls", NULL},
    [K_AVG] = {"Avg", "Average", NULL},
    [K_MED] = {"Med", "Median", NULL},
    [K_MIN] = {"Min", "Minimum", NULL},
    [K_MAX] = {"Max", "Maximum", NULL},
    [K_START] = {"Start", NULL},
    [K_DUR] = {"Duration", NULL},
    [K_STREAM] = {"Strm", "Stream", NULL},
    [K_DEVICE] = {"Device", NULL},
    [K_BYTES] = {"Bytes", NULL},
};

static bool is_time_col(int k) {
    return k == K_TOTAL || k == K_AVG || k == K_MED || k == K_MIN || k == K_MAX || k == K_START || k == K_DUR;
}

/* Seconds per unit; 0 for a unit that is not a time unit. */
static double time_unit(const char *u) {
    if (!*u) return 1e-9; /* the oldest reports write bare nanoseconds */
    if (!strcmp(u, "ns") || !strcmp(u, "nsec")) return 1e-9;
    if (!strcmp(u, "us") || !strcmp(u, "usec") || !strcmp(u, "\xc2\xb5s") || !strcmp(u, "\xce\xbcs")) return 1e-6;
    if (!strcmp(u, "ms") || !strcmp(u, "msec")) return 1e-3;
    if (!strcmp(u, "s") || !strcmp(u, "sec")) return 1.0;
    return 0.0;
}

/* Fills r->col / r->scale from the header and decides the report kind.
 * Returns false when the header is none of the reports this command reads.
 * A time column with a unit we do not know is an error (its numbers cannot
 * be read). */
static bool classify_header(report *r, const vb_csv *h) {
    int c_range = -1, c_operation = -1, c_category = -1;
    bool api_calls = false; /* the count column is "Num Calls" / "Calls": host API calls */
    for (int k = 0; k < K_N; k++) {
        r->col[k] = -1;
        r->scale[k] = 1.0;
    }
    for (int i = 0; i < h->ncols; i++) {
        char base[128], unit[32];
        split_header(h->header[i], base, sizeof base, unit, sizeof unit);
        if (!strcasecmp(base, "Range")) c_range = i;
        if (!strcasecmp(base, "Operation")) c_operation = i;
        if (!strcasecmp(base, "Category")) c_category = i;
        for (int k = 0; k < K_N; k++) {
            if (r->col[k] >= 0 || !any_of(base, k_aliases[k])) continue;
            r->col[k] = i;
            if (k == K_CALLS) api_calls = !strcasecmp(base, "Num Calls") || !strcasecmp(base, "Calls");
            if (is_time_col(k)) {
                r->scale[k] = time_unit(unit);
                if (r->scale[k] == 0)
                    vb_die_input("nsys: %s: column '%s': unknown time unit '%s' (ns, us, ms or s)", r->path,
                                 h->header[i], unit);
            } else if (k == K_BYTES) {
                /* only plain bytes: a MB column's convention (1e6 or 2^20) is not written in the file */
                bool plain = !*unit || !strcasecmp(unit, "B") || !strcasecmp(unit, "byte") || !strcasecmp(unit, "bytes");
                if (!plain) r->col[k] = -1;
            }
        }
    }
    if (r->col[K_START] >= 0 && r->col[K_DUR] >= 0 && r->col[K_NAME] >= 0) {
        r->kind = R_TRACE;
        return true;
    }
    if (r->col[K_TOTAL] < 0 || r->col[K_CALLS] < 0) return false;
    if (c_range >= 0) {
        r->kind = R_NVTX_SUM;
        r->col[K_NAME] = c_range;
        return true;
    }
    if (api_calls) {
        /* cuda_api_sum (and osrt_sum): time the host spent in API calls */
        if (r->col[K_NAME] < 0) return false;
        r->kind = R_API_SUM;
        return true;
    }
    if (c_category >= 0 && (c_operation >= 0 || r->col[K_NAME] >= 0)) {
        r->kind = R_GPU_SUM;
        if (c_operation >= 0) r->col[K_NAME] = c_operation;
        return true;
    }
    if (c_operation >= 0) {
        r->kind = R_MEM_TIME_SUM; /* memory operations only, by Operation */
        r->col[K_NAME] = c_operation;
        return true;
    }
    if (r->col[K_NAME] >= 0) {
        r->kind = R_KERN_SUM;
        return true;
    }
    return false;
}

/* ------------------------------------------------------------ classification */

typedef enum { CAT_COMPUTE, CAT_COMM, CAT_MEMCPY, CAT_NVTX, CAT_API } op_cat;
static const char *const k_cat_names[] = {"compute", "comm", "memcpy", "nvtx", "api"};

static op_cat classify_kernel(const char *name) {
    if (vb_gpu_name_is_nccl(name)) return CAT_COMM;
    if (!strncmp(name, "[CUDA memcpy", 12) || !strncmp(name, "[CUDA memset", 12)) return CAT_MEMCPY;
    return CAT_COMPUTE;
}

/* "NVIDIA H100 80GB HBM3 (1)" -> 1, "3" -> 3; anything else (a name
 * without "(N)", an empty cell) -> 0: digits inside a product name such as
 * "HBM3" are not a device id. */
static int device_id(const char *s) {
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
    size_t b = 0;
    while (b < n && isspace((unsigned char)s[b])) b++;
    bool paren = n > b && s[n - 1] == ')';
    size_t e = paren ? n - 1 : n, d = e;
    while (d > b && isdigit((unsigned char)s[d - 1])) d--;
    if (d == e || e - d > 6) return 0;
    if (paren ? (d == b || s[d - 1] != '(') : d != b) return 0;
    return atoi(s + d);
}

/* ------------------------------------------------------------ --filter_time */

typedef struct {
    bool on;
    double start_s, end_s;
    const char *text;
} time_window;

/* nsys time syntax: "123" (ns) or terms like "4s420ms", "1.5ms", "200us". */
static bool parse_nsys_time(const char *s, double *out) {
    if (!*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || !isfinite(v)) return false;
    if (!*end) {
        *out = v * 1e-9;
        return true;
    }
    double total = 0;
    while (*s) {
        errno = 0;
        v = strtod(s, &end);
        if (errno || end == s || v < 0 || !isfinite(v) || *s == '+' || *s == '-') return false;
        double unit;
        if (!strncmp(end, "ms", 2)) {
            unit = 1e-3;
            end += 2;
        } else if (!strncmp(end, "us", 2)) {
            unit = 1e-6;
            end += 2;
        } else if (!strncmp(end, "ns", 2)) {
            unit = 1e-9;
            end += 2;
        } else if (*end == 's') {
            unit = 1.0;
            end += 1;
        } else {
            return false;
        }
        total += v * unit;
        s = end;
    }
    *out = total;
    return true;
}

static void parse_window(const char *text, time_window *w) {
    const char *slash = strchr(text, '/');
    char a[64], b[64];
    if (!slash || (size_t)(slash - text) >= sizeof a || strlen(slash + 1) >= sizeof b)
        vb_die_input("nsys: --filter_time '%s': want START/END (e.g. 4s420ms/35s390ms; plain numbers are ns)", text);
    snprintf(a, sizeof a, "%.*s", (int)(slash - text), text);
    snprintf(b, sizeof b, "%s", slash + 1);
    if (!parse_nsys_time(a, &w->start_s) || !parse_nsys_time(b, &w->end_s))
        vb_die_input("nsys: --filter_time '%s': a time is a plain number of ns or terms with s, ms, us, ns "
                     "(e.g. 4s420ms)", text);
    if (!(w->end_s > w->start_s)) vb_die_input("nsys: --filter_time '%s': END must be after START", text);
    w->on = true;
    w->text = text;
}

/* ------------------------------------------------------------ op rows */

typedef struct {
    int rank;
    const char *name;      /* the name table's copy */
    op_cat cat;
    int prio;              /* lower wins among duplicates: trace, kern_sum, gpu_sum */
    int file;              /* the report it came from */
    double calls, bytes, total, avg, min, max, med; /* seconds; NaN unknown */
    double share;
} op_row;

typedef struct {
    op_row *v;
    int n, cap;
} op_rows;

static op_row *push_op(op_rows *o) {
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 64;
        o->v = vb_realloc_check(o->v, (size_t)o->cap * sizeof *o->v);
    }
    op_row *r = &o->v[o->n++];
    memset(r, 0, sizeof *r);
    return r;
}

static int prio_of(report_kind k) {
    return k == R_TRACE ? 0 : k == R_KERN_SUM ? 1 : 2;
}

static op_cat summary_cat(report_kind k, const char *name) {
    if (k == R_NVTX_SUM) return CAT_NVTX;
    if (k == R_API_SUM) return CAT_API;
    return classify_kernel(name);
}

/* One GPU activity of a trace, as small as it can be kept: a million-row
 * trace is 40 MB of these, not its text and every cell of it. */
typedef struct {
    double start_s, dur_s, bytes;
    int rank;
    int name;   /* index in the name table */
    int stream; /* the trace's stream id; -1: no stream column (one lane) */
} gpu_act;

typedef struct {
    gpu_act *v;
    size_t n, cap;
} gpu_acts;

/* What reading every report builds: the summaries' op rows, the traces'
 * activities, their names once each, and which report each device's
 * trace came from (two reports of one device are refused). */
typedef struct {
    op_rows ops;
    gpu_acts acts;
    vb_strtab *names;
    int *dev_report; /* per device id: the report whose trace has it; -1 none */
    int ndev;
    const time_window *win;
} import;

static int intern(import *im, const char *name) {
    int k = vb_strtab_intern(im->names, name);
    if (k < 0) vb_die_internal("nsys: out of memory keeping kernel names");
    return k;
}

static const char *name_of(const import *im, int k) { return vb_strtab_str(im->names, k); }

/* The stream lane's name: stream<N>, or stream without a stream column. */
static void lane_name(char *buf, size_t n, int stream) {
    if (stream >= 0)
        snprintf(buf, n, "stream%d", stream);
    else
        snprintf(buf, n, "stream");
}

/* ------------------------------------------------------------ reading */

/* A report's file read one record at a time: the buffer grows to the
 * largest record, never to the file. A quoted field's line break stays in
 * its record. */
typedef struct {
    FILE *f;
    const char *path;
    char *buf;
    size_t len, cap;
    int line, next_line; /* the record's first line; the next one's */
} rec_reader;

static bool next_record(rec_reader *r) {
    r->len = 0;
    r->line = r->next_line;
    bool quoted = false, any = false;
    int c;
    while ((c = getc_unlocked(r->f)) != EOF) {
        any = true;
        /* text holds no NUL: a record of them would read as a blank line,
         * a Duration of 5<NUL>0 as 5 */
        if (c == '\0') vb_die_input("nsys: %s: record %d: a NUL byte: not text; the file is damaged", r->path, r->line);
        if (c == '"') quoted = !quoted;
        if (c == '\n') r->next_line++;
        if (c == '\n' && !quoted) break;
        if (r->len + 2 > r->cap) {
            r->cap = r->cap ? 2 * r->cap : 4096;
            r->buf = vb_realloc_check(r->buf, r->cap);
        }
        r->buf[r->len++] = (char)c;
    }
    if (ferror(r->f)) vb_die_input("nsys: %s: read error", r->path);
    if (r->len > 0 && r->buf[r->len - 1] == '\r') r->len--;
    if (r->buf) r->buf[r->len] = '\0';
    return any;
}

static void open_reader(rec_reader *r, const char *path) {
    memset(r, 0, sizeof *r);
    char label[VB_PATH_MAX + 16];
    vb_snprintf(label, sizeof label, "nsys: %s", path);
    r->f = vb_fopen_input(path, label);
    r->path = path;
    r->next_line = 1;
}

static void close_reader(rec_reader *r) {
    fclose(r->f);
    free(r->buf);
    memset(r, 0, sizeof *r);
}

typedef struct {
    report *v;
    int n, cap;
} report_list;

static report *push_report(report_list *l) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = vb_realloc_check(l->v, (size_t)l->cap * sizeof *l->v);
    }
    report *r = &l->v[l->n++];
    memset(r, 0, sizeof *r);
    return r;
}

static bool blank_line(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i])) return false;
    return true;
}

/* What nsys prints around the reports of a capture ("Processing [...] with
 * [...]...", " ** CUDA API Summary (cuda_api_sum):"). */
static bool banner_line(const char *s, size_t n) {
    while (n > 0 && (*s == ' ' || *s == '\t')) s++, n--;
    return (n >= 12 && !strncmp(s, "Processing [", 12)) || (n >= 2 && !strncmp(s, "**", 2));
}

/* A data row starts with a number; a header (or a banner) does not, so only
 * those lines are tried as headers. */
static bool may_be_header(const char *s, size_t n) {
    while (n > 0 && (*s == ' ' || *s == '\t')) s++, n--;
    return n > 0 && !isdigit((unsigned char)*s) && *s != '-' && *s != '+' && *s != '.';
}

/* Whether the record is the header of a report this command reads; fills
 * *r (its header kept in r->head). */
static bool header_line(const char *s, size_t n, const char *path, report *r) {
    if (!may_be_header(s, n)) return false;
    vb_csv head;
    char why[256];
    if (vb_csv_parse(s, n, &head, why, sizeof why) != 0) return false;
    r->path = path;
    bool ok = classify_header(r, &head);
    if (ok)
        r->head = head;
    else
        vb_csv_free(&head);
    return ok;
}

static double cell_num(const char *s, bool *ok) {
    *ok = false;
    if (!*s) return NAN;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    while (*end == ' ') end++;
    if (*end || errno == ERANGE || !isfinite(v)) return NAN;
    *ok = true;
    return v;
}

/* One data record's fields (row.header[]: a one-record parse). */
typedef struct {
    vb_csv row;
    const report *r;
    int line;
} fields;

static const char *field(const fields *f, int k) { return k >= 0 && k < f->row.ncols ? f->row.header[k] : ""; }

static double need_num(const fields *f, int k) {
    bool ok;
    double v = cell_num(field(f, f->r->col[k]), &ok);
    if (!ok || v < 0)
        vb_die_input("nsys: %s: record %d: column '%s': '%s' is not a non-negative number", f->r->path, f->line,
                     f->r->head.header[f->r->col[k]], field(f, f->r->col[k]));
    return v * f->r->scale[k];
}

/* NaN when the column is absent or the cell empty / not a number. */
static double opt_num(const fields *f, int k) {
    bool ok;
    if (f->r->col[k] < 0) return NAN;
    double v = cell_num(field(f, f->r->col[k]), &ok);
    return ok ? v * f->r->scale[k] : NAN;
}

static void summary_row(import *im, const fields *f, int report_index) {
    const report *r = f->r;
    const char *name = name_of(im, intern(im, field(f, r->col[K_NAME])));
    op_row *o = push_op(&im->ops);
    o->rank = 0;
    o->name = name;
    o->cat = summary_cat(r->kind, name);
    o->prio = prio_of(r->kind);
    o->file = report_index;
    o->total = need_num(f, K_TOTAL);
    o->calls = need_num(f, K_CALLS);
    o->avg = opt_num(f, K_AVG);
    if (isnan(o->avg) && o->calls > 0) o->avg = o->total / o->calls;
    o->min = opt_num(f, K_MIN);
    o->max = opt_num(f, K_MAX);
    o->med = opt_num(f, K_MED);
}

/* Traces of one device from two reports would be merged into one rank with
 * unrelated clocks: refused as the second one's row comes. */
static void claim_device(import *im, const report_list *reps, int rank, int report_index) {
    if (rank >= im->ndev) {
        int n = im->ndev ? im->ndev : 8;
        while (n <= rank) n *= 2;
        im->dev_report = vb_realloc_check(im->dev_report, (size_t)n * sizeof *im->dev_report);
        for (int i = im->ndev; i < n; i++) im->dev_report[i] = -1;
        im->ndev = n;
    }
    int had = im->dev_report[rank];
    if (had >= 0 && had != report_index)
        vb_die_input("nsys: %s: device %d is also in %s; import each process's trace with its own --output_dir",
                     reps->v[report_index].path, rank, reps->v[had].path);
    im->dev_report[rank] = report_index;
}

static void trace_row(import *im, const report_list *reps, const fields *f, int report_index) {
    const report *r = f->r;
    double start = need_num(f, K_START), dur = need_num(f, K_DUR);
    if (im->win->on && (start < im->win->start_s || start + dur > im->win->end_s)) return;
    gpu_acts *out = &im->acts;
    if (out->n == out->cap) {
        out->cap = out->cap ? out->cap + out->cap / 2 : 1024; /* 1.5x: less left over than doubling */
        out->v = vb_realloc_check(out->v, out->cap * sizeof *out->v);
    }
    gpu_act *a = &out->v[out->n++];
    a->rank = r->col[K_DEVICE] >= 0 ? device_id(field(f, r->col[K_DEVICE])) : 0;
    claim_device(im, reps, a->rank, report_index);
    a->name = intern(im, field(f, r->col[K_NAME]));
    a->start_s = start;
    a->dur_s = dur;
    double b = opt_num(f, K_BYTES), strm;
    bool ok;
    a->bytes = isnan(b) ? 0 : b;
    a->stream = -1; /* no stream column: one lane */
    if (r->col[K_STREAM] >= 0 && (strm = cell_num(field(f, r->col[K_STREAM]), &ok), ok) && strm >= 0 && strm < 1e9 &&
        strm == floor(strm))
        a->stream = (int)strm;
}

/* The headers of the reports in a file (a first pass, so that messages
 * about a row can say which report of several it is in). */
static int count_reports(const char *path) {
    rec_reader rd;
    open_reader(&rd, path);
    int found = 0;
    while (next_record(&rd)) {
        report probe;
        memset(&probe, 0, sizeof probe);
        if (header_line(rd.buf ? rd.buf : "", rd.len, path, &probe)) {
            found++;
            vb_csv_free(&probe.head);
        }
    }
    close_reader(&rd);
    return found;
}

/* Every report of the file, its rows taken into im as they are read:
 * `nsys stats --format csv` writes one report per file with --output, or
 * several into one capture (`nsys stats -r a,b --format csv > f.csv`), each
 * after a banner line and ended by a blank line. A report runs from its
 * header to the first blank line, banner line or next header; lines outside
 * reports (nsys's notices, a report of a kind this command does not read)
 * are passed over. Exits 2 naming the file when it holds no report this
 * command reads. */
static void read_reports(const char *path, int file, report_list *reps, import *im) {
    const int found = count_reports(path);
    if (found == 0)
        vb_die_input("nsys: %s: not an `nsys stats --format csv` report this command reads (cuda_gpu_trace, "
                     "cuda_gpu_kern_sum, cuda_gpu_sum, cuda_gpu_mem_time_sum, nvtx_sum, cuda_api_sum): no such "
                     "header in it",
                     path);
    rec_reader rd;
    open_reader(&rd, path);
    const int first = reps->n;
    int cur = -1; /* the report being read */
    while (next_record(&rd)) {
        const char *s = rd.buf ? rd.buf : "";
        report probe;
        memset(&probe, 0, sizeof probe);
        bool header = header_line(s, rd.len, path, &probe);
        if (cur >= 0 && !header && !blank_line(s, rd.len) && !banner_line(s, rd.len)) {
            fields f = {.r = &reps->v[cur], .line = rd.line};
            char why[256];
            if (vb_csv_parse(s, rd.len, &f.row, why, sizeof why) != 0)
                vb_die_input("nsys: %s: record %d: %s", reps->v[cur].path, rd.line,
                             strncmp(why, "record 1: ", 10) == 0 ? why + 10 : why);
            if (f.row.ncols > reps->v[cur].head.ncols)
                vb_die_input("nsys: %s: record %d: %d fields, the header has %d", reps->v[cur].path, rd.line,
                             f.row.ncols, reps->v[cur].head.ncols);
            reps->v[cur].nrows++;
            if (reps->v[cur].kind == R_TRACE)
                trace_row(im, reps, &f, cur);
            else
                summary_row(im, &f, cur);
            vb_csv_free(&f.row);
            continue;
        }
        cur = -1;
        if (!header) continue;
        report *r = push_report(reps);
        *r = probe;
        r->file = file;
        r->first_record = rd.line;
        cur = reps->n - 1;
        if (found > 1) { /* several: messages say which one */
            char where[VB_PATH_MAX + 96];
            snprintf(where, sizeof where, "%s (report %d of %d, %s, header at line %d)", path, reps->n - first, found,
                     k_report_names[r->kind], r->first_record);
            r->path = vb_strdup_check(where);
        }
        if (r->kind != R_TRACE && im->win->on)
            vb_die_input("nsys: %s: --filter_time needs a cuda_gpu_trace report; this %s summary has no times",
                         r->path, k_report_names[r->kind]);
    }
    close_reader(&rd);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_act_name(const void *pa, const void *pb) {
    const gpu_act *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return (a->name > b->name) - (a->name < b->name);
}

/* Per (device, name) statistics of the kept trace rows. Sorts acts. */
static void trace_stats(import *im) {
    gpu_acts *acts = &im->acts;
    sort_n(acts->v, acts->n, sizeof *acts->v, cmp_act_name);
    size_t most = 0;
    for (size_t i = 0; i < acts->n;) {
        size_t j = i;
        while (j < acts->n && cmp_act_name(&acts->v[i], &acts->v[j]) == 0) j++;
        if (j - i > most) most = j - i;
        i = j;
    }
    double *d = vb_malloc_check((most > 0 ? most : 1) * sizeof *d);
    for (size_t i = 0; i < acts->n;) {
        size_t j = i;
        while (j < acts->n && cmp_act_name(&acts->v[i], &acts->v[j]) == 0) j++;
        op_row *o = push_op(&im->ops);
        o->rank = acts->v[i].rank;
        o->name = name_of(im, acts->v[i].name);
        o->cat = classify_kernel(o->name);
        o->prio = 0;
        o->file = im->dev_report[o->rank];
        size_t n = j - i;
        for (size_t k = 0; k < n; k++) {
            d[k] = acts->v[i + k].dur_s;
            o->total += d[k];
            o->bytes += acts->v[i + k].bytes;
        }
        sort_n(d, n, sizeof *d, cmp_double);
        o->calls = (double)n;
        o->avg = o->total / (double)n;
        o->min = d[0];
        o->max = d[n - 1];
        o->med = n % 2 ? d[n / 2] : 0.5 * (d[n / 2 - 1] + d[n / 2]);
        i = j;
    }
    free(d);
}

/* ------------------------------------------------------------ dedupe, share */

static bool is_gpu(op_cat c) {
    return c != CAT_NVTX && c != CAT_API;
}

/* Rows of one class with one name are one op: GPU activity, NVTX ranges,
 * host API calls (an NVTX range may be named like a kernel or an API call). */
static int op_class(op_cat c) {
    return is_gpu(c) ? 0 : c == CAT_NVTX ? 1 : 2;
}

static int cmp_op_key(const void *pa, const void *pb) {
    const op_row *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (op_class(a->cat) != op_class(b->cat)) return op_class(a->cat) < op_class(b->cat) ? -1 : 1;
    int s = strcmp(a->name, b->name);
    if (s) return s;
    if (a->prio != b->prio) return a->prio < b->prio ? -1 : 1;
    return (a->file > b->file) - (a->file < b->file);
}

static int cmp_op_total(const void *pa, const void *pb) {
    const op_row *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (op_class(a->cat) != op_class(b->cat)) return op_class(a->cat) < op_class(b->cat) ? -1 : 1;
    if (a->total != b->total) return a->total > b->total ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Keeps one row per (rank, class, name): the best source's. Returns
 * how many were dropped. Then sorts by total time and fills share. */
static int dedupe_and_share(op_rows *o) {
    sort_n(o->v, (size_t)o->n, sizeof *o->v, cmp_op_key);
    int k = 0, dropped = 0;
    for (int i = 0; i < o->n; i++) {
        if (k > 0) {
            const op_row *p = &o->v[k - 1], *c = &o->v[i];
            if (p->rank == c->rank && op_class(p->cat) == op_class(c->cat) && !strcmp(p->name, c->name)) {
                dropped++;
                continue;
            }
        }
        o->v[k++] = o->v[i];
    }
    o->n = k;
    sort_n(o->v, (size_t)o->n, sizeof *o->v, cmp_op_total);
    for (int i = 0; i < o->n;) {
        int j = i;
        double sum = 0;
        while (j < o->n && o->v[j].rank == o->v[i].rank) {
            if (is_gpu(o->v[j].cat)) sum += o->v[j].total;
            j++;
        }
        for (int m = i; m < j; m++) o->v[m].share = is_gpu(o->v[m].cat) && sum > 0 ? o->v[m].total / sum : NAN;
        i = j;
    }
    return dropped;
}

/* ------------------------------------------------------------ writers */

static void put_num(FILE *f, double v) {
    fputc(',', f);
    if (!isnan(v)) fprintf(f, "%.9g", v);
}

static void write_ops(FILE *f, void *ctx) {
    const op_rows *o = ctx;
    fputs(VB_OPS_CSV_HEADER "\n", f);
    for (int i = 0; i < o->n; i++) {
        const op_row *r = &o->v[i];
        fprintf(f, "%d,nsys,", r->rank);
        vb_csv_field(f, r->name);
        fprintf(f, ",%s,%.0f,%.0f,0", k_cat_names[r->cat], r->calls, r->bytes);
        put_num(f, r->total);
        put_num(f, r->avg);
        put_num(f, r->min);
        put_num(f, r->max);
        put_num(f, r->med);
        put_num(f, r->share);
        put_num(f, NAN); /* flops unknown */
        put_num(f, r->bytes > 0 && r->total > 0 ? r->bytes / r->total / 1e9 : NAN);
        fputc('\n', f);
    }
}

static int cmp_act_time(const void *pa, const void *pb) {
    const gpu_act *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    /* the one lane of a trace without streams, then stream7 before stream13 */
    if (a->stream != b->stream) return a->stream < b->stream ? -1 : 1;
    if (a->start_s != b->start_s) return a->start_s < b->start_s ? -1 : 1;
    return (a->dur_s < b->dur_s) - (a->dur_s > b->dur_s);
}

static void write_timeline(FILE *f, void *ctx) {
    const import *im = ctx;
    fputs(VB_TIMELINE_CSV_HEADER "\n", f);
    for (size_t i = 0; i < im->acts.n; i++) {
        const gpu_act *a = &im->acts.v[i];
        char lane[24];
        lane_name(lane, sizeof lane, a->stream);
        const char *name = name_of(im, a->name);
        fprintf(f, "%d,%s,%s,", a->rank, lane, k_cat_names[classify_kernel(name)]);
        vb_csv_field(f, name);
        fprintf(f, ",nsys,0,-1,%.9f,%.9f,%.0f,0,-1\n", a->start_s, a->dur_s, a->bytes);
    }
}

/* The breakdown of the activities, fed one at a time (no timeline in memory). */
static int breakdown_of(const import *im, vb_breakdown **out) {
    vb_breakdown_acc *acc = vb_breakdown_acc_create();
    for (size_t i = 0; i < im->acts.n; i++) {
        const gpu_act *a = &im->acts.v[i];
        char lane[24];
        lane_name(lane, sizeof lane, a->stream);
        vb_breakdown_acc_add(acc, a->rank, lane, k_cat_names[classify_kernel(name_of(im, a->name))], a->start_s,
                             a->dur_s);
    }
    return vb_breakdown_acc_finish(acc, out);
}

/* ------------------------------------------------------------ stdout */

/* The TOP_KERNELS rows of one class with the most total time, across ranks. */
static void print_top(const op_rows *o, int cls, const char *title) {
    int order[TOP_KERNELS], n = 0;
    /* rows are by rank then total: merge into one top list across ranks */
    bool *used = vb_calloc_check((size_t)(o->n > 0 ? o->n : 1), sizeof *used);
    while (n < TOP_KERNELS) {
        int best = -1;
        for (int i = 0; i < o->n; i++)
            if (!used[i] && op_class(o->v[i].cat) == cls && (best < 0 || o->v[i].total > o->v[best].total)) best = i;
        if (best < 0) break;
        used[best] = true;
        order[n++] = best;
    }
    free(used);
    if (n == 0) return;
    printf("\n%s:\n  %4s  %12s  %6s  %9s  %-8s  %s\n", title, "rank", "total_ms", "share", "calls", "category", "name");
    for (int k = 0; k < n; k++) {
        const op_row *r = &o->v[order[k]];
        char share[16] = "-";
        if (!isnan(r->share)) snprintf(share, sizeof share, "%.1f%%", 100 * r->share);
        printf("  %4d  %12.3f  %6s  %9.0f  %-8s  %.70s%s\n", r->rank, r->total * 1e3, share, r->calls,
               k_cat_names[r->cat], r->name, strlen(r->name) > 70 ? "..." : "");
    }
}

static void print_breakdown(const vb_breakdown *b, int n) {
    printf("\nbreakdown (one window per device: first GPU activity start to last end, kernels, copies and "
           "memsets alike; ms):\n"
           "  %4s  %10s  %10s  %10s  %10s  %10s  %10s  %10s  %8s\n",
           "rank", "window", "compute", "comm", "hidden", "exposed", "memcpy", "idle", "overlap");
    for (int i = 0; i < n; i++) {
        char ov[16] = "-";
        if (!isnan(b[i].overlap_pct)) snprintf(ov, sizeof ov, "%.1f%%", b[i].overlap_pct);
        printf("  %4d  %10.3f  %10.3f  %10.3f  %10.3f  %10.3f  %10.3f  %10.3f  %8s\n", b[i].rank, b[i].step_s * 1e3,
               b[i].compute_s * 1e3, b[i].comm_s * 1e3, b[i].comm_hidden_s * 1e3, b[i].comm_exposed_s * 1e3,
               b[i].memcpy_s * 1e3, b[i].idle_s * 1e3, ov);
    }
}

/* ------------------------------------------------------------ main */

typedef struct {
    const char **files;
    int nfiles;
    time_window win;
    char outdir[VB_PATH_MAX];
    bool outdir_given; /* --output_dir: the tree's root; else <FILE>_vitbench below FILE's folder */
    vb_outdir out;     /* open once prepared */
} nsys_args;

/* --filter_time: checked and stored as it comes, so the last one wins. */
static void filter_time_opt(const char *flag, const char *value, void *ptr) {
    if (!*value) vb_die_input("nsys: %s expects a non-empty value", flag);
    parse_window(value, ptr);
}

/* Positional arguments: the FILEs, in order, flags anywhere among them.
 * Flags the table lacks end here too; a single-dash word ("-x") is refused
 * as well, as a mistyped flag is more likely than a file name that starts
 * with '-' (a lone "-" is still a FILE). */
static void nsys_other(void *ctx, const char *arg, const char *next) {
    (void)next;
    nsys_args *a = ctx;
    if (arg[0] == '-' && arg[1]) {
        size_t n = strcspn(arg, "=");
        vb_die_input("nsys: unknown flag %.*s%s", (int)(n < 100 ? n : 100), arg,
                     *vb_cli_hint(arg) ? vb_cli_hint(arg) : " (see vitbench nsys --help)");
    }
    a->files[a->nfiles++] = arg;
}

/* One table parses the flags and prints --help (core/config/cli.h). */
static void parse_args(int argc, char **argv, nsys_args *a) {
    memset(a, 0, sizeof *a);
    a->files = vb_malloc_check((size_t)(argc > 0 ? argc : 1) * sizeof *a->files);
    const char *outdir = NULL;
    const vb_cli_opt opts[] = {
        {.name = "filter_time", .kind = VB_CLI_FUNC, .ptr = &a->win, .fn = filter_time_opt, .arg = "START/END",
         .help = "keep trace rows entirely inside the window (4s420ms/35s390ms; plain numbers are ns)"},
        {.name = "output_dir", .kind = VB_CLI_STRING, .ptr = &outdir, .arg = "DIR",
         .help = "where ops.csv, timeline.csv, breakdown.csv go (default below)"},
    };
    const vb_cli cli = {
        .cmd = "nsys",
        .usage = "vitbench nsys FILE... [--filter_time START/END] [--output_dir DIR]",
        .about = "Imports `nsys stats --format csv` reports into vitbench's ops.csv, and for a trace\n"
                 "timeline.csv and breakdown.csv. --filter_time takes nsys's syntax and applies to\n"
                 "cuda_gpu_trace reports only (a summary has no times).",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
        .other = nsys_other,
        .ctx = a,
        .other_help = "FILE: `nsys stats --format csv` reports: cuda_gpu_trace, cuda_gpu_kern_sum, cuda_gpu_sum,\n"
                      "      cuda_gpu_mem_time_sum, nvtx_sum, cuda_api_sum (recognised by their columns), one\n"
                      "      per file or several in one capture (-r a,b > FILE).\n"
                      "--output_dir defaults to <FILE without its extension>_vitbench/ beside the first FILE.",
    };
    vb_cli_parse(&cli, argc, argv);
    if (a->nfiles == 0) vb_die_input("nsys: no FILE (give `nsys stats --format csv` reports; see vitbench nsys --help)");
    char why[VB_PATH_MAX + 64];
    for (int i = 0; i < a->nfiles; i++)
        if (vb_file_problem(a->files[i], why, sizeof why)) vb_die_input("nsys: %s: %s", a->files[i], why);
    if (outdir) {
        vb_snprintf(a->outdir, sizeof a->outdir, "%s", outdir);
        a->outdir_given = true;
    } else {
        /* named after the input, so importing another report of the same
         * folder does not overwrite this one's files */
        char copy[VB_PATH_MAX];
        vb_snprintf(copy, sizeof copy, "%s", a->files[0]);
        char *dot = strrchr(copy, '.'), *slash = strrchr(copy, '/');
        if (dot && dot > copy && (!slash || dot > slash + 1)) *dot = '\0';
        vb_snprintf(a->outdir, sizeof a->outdir, "%s_vitbench", copy);
    }
}

/* The output directory, opened by outdir.h's rule: --output_dir is the tree,
 * else the first FILE's folder with <FILE>_vitbench/ below it (created, or a
 * real directory: never a link). */
static void prepare_outdir(nsys_args *a) {
    char root[VB_PATH_MAX], rel[VB_PATH_MAX];
    if (a->outdir_given) {
        vb_snprintf(root, sizeof root, "%s", a->outdir);
        rel[0] = '\0';
    } else {
        char copy[VB_PATH_MAX];
        vb_snprintf(copy, sizeof copy, "%s", a->outdir);
        vb_snprintf(rel, sizeof rel, "%s", basename(copy));
        vb_snprintf(copy, sizeof copy, "%s", a->outdir);
        vb_snprintf(root, sizeof root, "%s", dirname(copy));
    }
    vb_outdir_open_or_die(&a->out, root, rel, "nsys");
    struct stat st;
    if (fstatat(a->out.fd, VB_RUN_JSON, &st, 0) == 0) {
        vb_outdir_close(&a->out);
        vb_die_input("nsys: --output_dir %s holds a vitbench run (run.json): its ops.csv and timeline.csv would be "
                     "overwritten; give another --output_dir", a->outdir);
    }
}

static void write_or_die(const nsys_args *a, const char *name, void (*fn)(FILE *, void *), void *ctx) {
    vb_outdir_write_or_die(&a->out, name, fn, ctx, "nsys");
}

int vb_nsys_main(int argc, char **argv) {
    nsys_args a;
    parse_args(argc, argv, &a);

    /* every report read as a stream, its rows kept as op rows (summaries)
     * or compact activities (traces): memory the size of what the outputs
     * need, never a copy of the files */
    report_list reps = {0};
    import im = {.names = vb_strtab_create(), .win = &a.win};
    if (!im.names) vb_die_internal("nsys: out of memory");
    for (int f = 0; f < a.nfiles; f++) read_reports(a.files[f], f, &reps, &im);
    int ntrace = 0, napi = 0;
    for (int k = 0; k < reps.n; k++) {
        ntrace += reps.v[k].kind == R_TRACE;
        napi += reps.v[k].kind == R_API_SUM;
    }
    prepare_outdir(&a);

    trace_stats(&im);
    int dropped = dedupe_and_share(&im.ops);
    write_or_die(&a, VB_OPS_CSV, write_ops, &im.ops);

    vb_breakdown *bd = NULL;
    int nbd = 0;
    if (ntrace > 0) {
        sort_n(im.acts.v, im.acts.n, sizeof *im.acts.v, cmp_act_time);
        write_or_die(&a, VB_TIMELINE_CSV, write_timeline, &im);
        int n = breakdown_of(&im, &bd);
        for (int i = 0; i < n; i++)
            if (bd[i].steps > 0) bd[nbd++] = bd[i]; /* devices the trace has */
        char why[3 * VB_PATH_MAX];
        int rc = vb_breakdown_write_csv(&a.out, bd, nbd, why, sizeof why);
        if (rc == VB_OUTDIR_NOT_A_DIR) vb_die_input("nsys: %s", why);
        if (rc != 0) vb_die_env("nsys: %s", why);
    }

    printf("vitbench nsys: %d report%s -> %s/ops.csv (%d rows)%s\n", reps.n, reps.n == 1 ? "" : "s", a.outdir,
           im.ops.n, ntrace ? ", timeline.csv, breakdown.csv" : "");
    for (int k = 0; k < reps.n; k++)
        printf("  %s: %s%s, %d rows\n", reps.v[k].path, k_report_names[reps.v[k].kind],
               reps.v[k].kind == R_API_SUM ? " (host API calls: category api, not GPU time)" : "", reps.v[k].nrows);
    if (a.win.on) printf("  --filter_time %s: %zu trace rows inside the window\n", a.win.text, im.acts.n);
    if (dropped) printf("  %d rows also found in a preferred report (trace > cuda_gpu_kern_sum > cuda_gpu_sum, cuda_gpu_mem_time_sum) left out\n", dropped);
    if (ntrace > 0 && im.acts.n == 0) vb_warn("no trace rows%s: timeline.csv and breakdown.csv are empty", a.win.on ? " inside --filter_time" : "");
    print_top(&im.ops, 0, "top GPU activities by total time");
    if (napi > 0) print_top(&im.ops, 2, "top host API calls by total time (CPU time spent in the calls, not GPU activity)");
    if (nbd > 0) print_breakdown(bd, nbd);

    free(bd);
    free(im.ops.v);
    free(im.acts.v);
    free(im.dev_report);
    vb_strtab_destroy(im.names);
    for (int k = 0; k < reps.n; k++) {
        vb_csv_free(&reps.v[k].head);
        if (reps.v[k].path != a.files[reps.v[k].file]) free((char *)reps.v[k].path);
    }
    free(reps.v);
    free(a.files);
    vb_outdir_close(&a.out);
    return 0;
}
