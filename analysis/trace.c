/* trace.c: `vitbench trace PATH [--output FILE]`: timeline.csv as a Chrome
 * trace (JSON object format) for Perfetto / chrome://tracing.
 *
 * PATH is a run directory (reads PATH/timeline.csv and PATH/run.json, writes
 * PATH/trace.json) or a timeline.csv file (run.json and trace.json beside it).
 *
 * What the trace holds:
 *   - one process per rank: pid = rank, "process_name" "rank r",
 *     "process_sort_index" r
 *   - one thread per lane, tid stable per lane name: main 0, comm 1,
 *     loader<k> 10+k (k < 90), stream<N> 100+N (N < 100000; nsys imports),
 *     any other lane 200000 + its index among the other lane names sorted
 *   - rows of one lane that overlap without nesting (allreduces of several
 *     buckets in flight at once on the comm lane) cannot share a thread:
 *     viewers need slices on a thread to nest. Such a row goes to the
 *     lane's first sub-thread where it nests, "comm (2)", "comm (3)", ...
 *     with tid = lane tid + 1000000 x (k-1), sorted after their lane
 *   - an "X" (complete) event per row that has a duration, "cat" = kind;
 *     step rows are named "step <k>"; args bytes, flops (when > 0), step
 *     (>= 0), bucket (>= 0), trial_type and trial_index (when the row has a
 *     trial type)
 *   - an "i" (instant, thread scope) event per marker row
 *   - a flow from each bucket_ready marker to the comm-lane row of the same
 *     rank, trial, step and bucket (the allreduce it released): "s" at the
 *     marker's time on the main lane (the training thread, whose backward
 *     made the bucket ready; a flow must start inside a slice, and a marker
 *     on the comm lane sits just before its allreduce, inside nothing),
 *     "f" with "bp":"e" at the allreduce's start on its comm thread
 *   - a "samples/s" counter per rank: at each step's start, global batch /
 *     step duration (the global batch read from run.json), back to 0 where a
 *     step is not followed directly by another
 * Times are microseconds written from integer nanoseconds (three decimals),
 * so what the viewer reads is exact; a row that ends at most 1 ns after the
 * row enclosing it on its lane (rounding) is cut to its parent's end, so
 * nesting holds in the viewer. The file is streamed, never built in memory.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis.h"
#include "analysis/breakdown.h"
#include "analysis/trace_kineto.h"
#include "analysis/rundir.h"
#include "analysis/trace_lanes.h"
#include "core/config/cli.h"
#include "core/util/common.h"
#include "core/results/results.h"

#define TID_SUBLANE_STEP 1000000 /* tid of sub-thread k of a lane: lane tid + k x this */
#define MAX_SUBLANES 2000        /* keeps every tid below 2^31 */

typedef struct {
    char timeline[VB_PATH_MAX];
    char runjson[VB_PATH_MAX];
    char output[VB_PATH_MAX];
    /* output as a results tree (outdir.h): written below out_root as
     * out_name, a file (chrome) or a directory ("" = the root; kineto) */
    char out_root[VB_PATH_MAX];
    char out_name[VB_PATH_MAX];
    bool kineto;          /* --format kineto: output is a directory of rank files */
} trace_paths;

typedef struct {
    const vb_timeline *t;
    int64_t *ts, *end;    /* per event, nanoseconds */
    int *tid;             /* per event: the lane's tid, then its sub-thread's */
    int *order;           /* events sorted by rank, lane tid, start, end desc, depth */
    int nprocs;           /* processes to name: max(nranks, run.json ranks) */
    double global_batch;  /* 0: no counters */
    const char *source;
    long nflows, unmatched;
} trace_ctx;

/* ------------------------------------------------------------------ inputs */

static void dir_of(const char *path, char *out, size_t n) {
    char copy[VB_PATH_MAX];
    vb_snprintf(copy, sizeof copy, "%s", path);
    vb_snprintf(out, n, "%s", dirname(copy));
}

/* Positional arguments: the one PATH. Flags the table lacks end here too;
 * a single-dash word ("-x") is refused as well, as a mistyped flag is more
 * likely than a path that starts with '-' (a lone "-" is still a PATH). */
static void trace_other(void *ctx, const char *arg, const char *next) {
    (void)next;
    const char **path = ctx;
    if (arg[0] == '-' && arg[1]) {
        size_t n = strcspn(arg, "=");
        vb_die_input("trace: unknown flag %.*s%s", (int)(n < 100 ? n : 100), arg,
                     *vb_cli_hint(arg) ? vb_cli_hint(arg) : " (see vitbench trace --help)");
    }
    if (*path) vb_die_input("trace: unexpected argument '%s' (one PATH: a run directory or a timeline.csv)", arg);
    *path = arg;
}

/* One table parses the flags and prints --help (core/config/cli.h). */
static void parse_args(int argc, char **argv, trace_paths *p) {
    const char *path = NULL, *output = NULL;
    int format = 0;
    static const char *const formats[] = {"chrome", "kineto", NULL};
    const vb_cli_opt opts[] = {
        {.name = "format", .kind = VB_CLI_CHOICE, .ptr = &format, .choices = formats, .arg = "chrome|kineto",
         .help = "chrome (default) or kineto: what to write (above)"},
        {.name = "output", .kind = VB_CLI_STRING, .ptr = &output, .arg = "FILE_OR_DIR",
         .help = "the file or directory to write (default trace.json or kineto/ beside timeline.csv)"},
    };
    const vb_cli cli = {
        .cmd = "trace",
        .usage = "vitbench trace PATH [--format chrome|kineto] [--output FILE_OR_DIR]",
        .about = "Writes a timeline.csv as a trace for a viewer.\n"
                 "  --format chrome: one Chrome trace of every rank, for https://ui.perfetto.dev or\n"
                 "                   chrome://tracing; --output is that file\n"
                 "  --format kineto: one PyTorch-profiler-style trace per rank in a directory, for\n"
                 "                   Holistic Trace Analysis (docs/traces.md); --output is that directory",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
        .other = trace_other,
        .ctx = &path,
        .other_help = "PATH: a run directory (its timeline.csv) or a timeline.csv file.",
    };
    vb_cli_parse(&cli, argc, argv);
    p->kineto = format == 1;
    if (!path) vb_die_input("trace: missing PATH (a run directory or a timeline.csv; see vitbench trace --help)");
    char dir[VB_PATH_MAX];
    if (vb_dir_exists(path)) {
        vb_snprintf(dir, sizeof dir, "%s", path);
        vb_dir_file(p->timeline, sizeof p->timeline, path, VB_TIMELINE_CSV);
        if (!vb_file_exists(p->timeline))
            vb_die_input("trace: %s: no timeline.csv in this run directory (runs write it when profile_steps > 0)",
                         path);
    } else if (vb_file_exists(path)) {
        dir_of(path, dir, sizeof dir);
        vb_snprintf(p->timeline, sizeof p->timeline, "%s", path);
    } else {
        /* neither: say what it is (missing, a FIFO, a dangling symlink ...) */
        char why[VB_PATH_MAX + 64];
        const char *w = vb_file_problem(path, why, sizeof why);
        vb_die_input("trace: %s: %s (give a run directory or a timeline.csv)", path,
                     w ? w : "replaced while being checked");
    }
    vb_dir_file(p->runjson, sizeof p->runjson, dir, VB_RUN_JSON);
    if (output) {
        vb_snprintf(p->output, sizeof p->output, "%s", output);
        if (p->kineto) { /* the directory named is the tree */
            vb_snprintf(p->out_root, sizeof p->out_root, "%s", output);
            p->out_name[0] = '\0';
        } else { /* the file named: its directory is the tree */
            dir_of(output, p->out_root, sizeof p->out_root);
            char copy[VB_PATH_MAX];
            vb_snprintf(copy, sizeof copy, "%s", output);
            vb_snprintf(p->out_name, sizeof p->out_name, "%s", basename(copy));
            if (!p->out_name[0] || strcmp(p->out_name, ".") == 0 || strcmp(p->out_name, "..") == 0 ||
                output[strlen(output) - 1] == '/')
                vb_die_input("trace: --output %s: names a directory, not the trace file to write", output);
            char what[VB_PATH_MAX + 64];
            if (vb_dir_problem(p->out_root, what, sizeof what)) /* a file is written into a folder that is there */
                vb_die_input("trace: --output %s: its folder %s: %s", output, p->out_root, what);
        }
    } else {
        vb_snprintf(p->output, sizeof p->output, "%s/%s", dir, p->kineto ? VB_KINETO_DIR : VB_TRACE_JSON);
        vb_snprintf(p->out_root, sizeof p->out_root, "%s", dir);
        vb_snprintf(p->out_name, sizeof p->out_name, "%s", p->kineto ? VB_KINETO_DIR : VB_TRACE_JSON);
    }
}

static double json_num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

/* Samples per step = the global batch (local batch x dp); the rank count
 * names processes that have no events. A missing run.json (a timeline.csv
 * copied elsewhere) only costs the counters (a warning into warn, printed
 * once the trace is written); a corrupt one is an error. */
static void read_run_json(const char *path, double *global_batch, int *ranks, char *backend, size_t bn, char *warn,
                          size_t wn) {
    *global_batch = 0;
    *ranks = 0;
    backend[0] = '\0';
    warn[0] = '\0';
    const char *why;
    cJSON *root = vb_read_json_object(path, &why);
    if (!root && strcmp(why, "not a JSON object") != 0) {
        snprintf(warn, wn, "%s: missing, so no samples/s counters (they need the global batch size)", path);
        return;
    }
    if (!root) vb_die_input("trace: %s: not a JSON object", path);
    double gb = json_num(root, "global_batch_size");
    if (gb <= 0) {
        double dp = json_num(cJSON_GetObjectItemCaseSensitive(root, "parallel"), "dp");
        gb = json_num(root, "local_batch_size") * dp;
    }
    if (gb > 0 && isfinite(gb))
        *global_batch = gb;
    else
        snprintf(warn, wn, "%s: no global_batch_size (nor local_batch_size and parallel.dp): no samples/s counters",
                 path);
    double r = json_num(root, "ranks");
    if (r >= 1 && r <= 1e6) *ranks = (int)r;
    const cJSON *be = cJSON_GetObjectItemCaseSensitive(root, "comm_backend");
    if (cJSON_IsString(be) && strlen(be->valuestring) < bn) snprintf(backend, bn, "%s", be->valuestring);
    cJSON_Delete(root);
}

/* ------------------------------------------------------------------- lanes */

/* Array length for per-event scratch (at least one, so malloc never sees 0). */
static size_t slots(int n) {
    return n > 0 ? (size_t)n : 1;
}

/* ---------------------------------------------------------- times, nesting */

static const trace_ctx *g_sort_ctx; /* qsort has no context argument in C11 */

static int cmp_order(const void *pa, const void *pb) {
    const trace_ctx *c = g_sort_ctx;
    int a = *(const int *)pa, b = *(const int *)pb;
    const vb_tl_event *ea = &c->t->ev[a], *eb = &c->t->ev[b];
    if (ea->rank != eb->rank) return ea->rank < eb->rank ? -1 : 1;
    if (c->tid[a] != c->tid[b]) return c->tid[a] < c->tid[b] ? -1 : 1;
    if (c->ts[a] != c->ts[b]) return c->ts[a] < c->ts[b] ? -1 : 1;
    if (c->end[a] != c->end[b]) return c->end[a] > c->end[b] ? -1 : 1; /* parents first */
    int da = vb_trace_depth_of(ea->kind), db = vb_trace_depth_of(eb->kind);
    if (da != db) return da < db ? -1 : 1;
    return (a > b) - (a < b);
}

static int cmp_thread(const void *pa, const void *pb) {
    const trace_ctx *c = g_sort_ctx;
    int a = *(const int *)pa, b = *(const int *)pb;
    if (c->t->ev[a].rank != c->t->ev[b].rank) return c->t->ev[a].rank < c->t->ev[b].rank ? -1 : 1;
    return (c->tid[a] > c->tid[b]) - (c->tid[a] < c->tid[b]);
}

static void quantize(const vb_timeline *t, int64_t *ts, int64_t *end) {
    for (int i = 0; i < t->n; i++) {
        const vb_tl_event *e = &t->ev[i];
        /* 1e9 s is 30 years: anything larger is not a timeline time */
        if (fabs(e->start_s) > 1e9 || e->dur_s > 1e9)
            vb_die_input("trace: timeline record %d: start_s %g / dur_s %g out of range", i + 2, e->start_s, e->dur_s);
        ts[i] = llround(e->start_s * 1e9);
        end[i] = llround((e->start_s + e->dur_s) * 1e9);
        if (end[i] < ts[i]) end[i] = ts[i];
    }
}

/* Within one rank's lane (consecutive in `order`), cut a slice that pokes
 * out of the slice enclosing it by at most 1 ns: rounding, not data. */
static void clamp_nesting(trace_ctx *c) {
    int *stack = vb_malloc_check(slots(c->t->n) * sizeof *stack);
    int sp = 0;
    for (int k = 0; k < c->t->n; k++) {
        int i = c->order[k];
        if (k > 0) {
            int p = c->order[k - 1];
            if (c->t->ev[p].rank != c->t->ev[i].rank || c->tid[p] != c->tid[i]) sp = 0;
        }
        if (strcmp(c->t->ev[i].kind, "marker") == 0) continue;
        while (sp > 0 && c->end[stack[sp - 1]] <= c->ts[i]) sp--;
        if (sp > 0) {
            int64_t over = c->end[i] - c->end[stack[sp - 1]];
            if (over > 0 && over <= 1) c->end[i] = c->end[stack[sp - 1]];
        }
        stack[sp++] = i;
    }
    free(stack);
}

/* Moves rows that overlap a row of their lane without nesting in it to the
 * lane's first sub-thread where they nest. Rows arrive by start (parents
 * first), so each sub-thread is a stack of open rows, linked via `up`. */
static void split_overlaps(trace_ctx *c) {
    const vb_timeline *t = c->t;
    int *up = vb_malloc_check(slots(t->n) * sizeof *up);
    int *top = vb_malloc_check(MAX_SUBLANES * sizeof *top);
    int nsub = 0, base = 0;
    for (int k = 0; k < t->n; k++) {
        int i = c->order[k];
        if (k == 0 || t->ev[c->order[k - 1]].rank != t->ev[i].rank || base != c->tid[i]) nsub = 0;
        base = c->tid[i];
        if (strcmp(t->ev[i].kind, "marker") == 0) continue;
        int s = 0;
        for (;; s++) {
            if (s == nsub) {
                if (nsub == MAX_SUBLANES)
                    vb_die_input("trace: rank %d lane %s: more than %d rows overlap at %.9f s", t->ev[i].rank,
                                 t->ev[i].lane, MAX_SUBLANES, t->ev[i].start_s);
                top[nsub++] = -1;
            }
            while (top[s] >= 0 && c->end[top[s]] <= c->ts[i]) top[s] = up[top[s]];
            if (top[s] < 0 || c->end[top[s]] >= c->end[i]) break;
        }
        up[i] = top[s];
        top[s] = i;
        c->tid[i] = base + s * TID_SUBLANE_STEP;
    }
    free(up);
    free(top);
}

/* ------------------------------------------------------------------ output */

/* Nanoseconds as microseconds with three decimals; by hand because it is
 * the most frequent number in the file and printf dominated the run time. */
static void put_us(FILE *f, int64_t ns) {
    char buf[32];
    int k = sizeof buf;
    uint64_t v = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    for (int d = 0; d < 3; d++, v /= 10) buf[--k] = (char)('0' + v % 10);
    buf[--k] = '.';
    do {
        buf[--k] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (ns < 0) buf[--k] = '-';
    fwrite(buf + k, 1, sizeof buf - (size_t)k, f);
}

/* A JSON string: quotes, backslashes and control characters escaped; bytes
 * that are not UTF-8 become U+FFFD so strict parsers accept the file. */
static void put_str(FILE *f, const char *s) {
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p == '"' || *p == '\\') {
            fputc('\\', f);
            fputc(*p++, f);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p++);
        } else {
            int n = vb_utf8_len(p);
            if (n == 0) {
                fputs("\\ufffd", f);
                p++;
            } else {
                fwrite(p, 1, (size_t)n, f);
                p += n;
            }
        }
    }
    fputc('"', f);
}

typedef struct {
    FILE *f;
    bool first;
} emitter;

static void next(emitter *em) {
    fputs(em->first ? "\n" : ",\n", em->f);
    em->first = false;
}

static void put_meta(emitter *em, const char *what, int pid, int tid, const char *key, const char *sval, long ival) {
    next(em);
    fprintf(em->f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"args\":{\"%s\":", what, pid, tid, key);
    if (sval)
        put_str(em->f, sval);
    else
        fprintf(em->f, "%ld", ival);
    fputs("}}", em->f);
}

static void put_metadata(emitter *em, const trace_ctx *c) {
    char name[32];
    for (int r = 0; r < c->nprocs; r++) {
        snprintf(name, sizeof name, "rank %d", r);
        put_meta(em, "process_name", r, 0, "name", name, 0);
        put_meta(em, "process_sort_index", r, 0, "sort_index", NULL, r);
    }
    /* one thread_name per (rank, thread): the first event of each */
    int *first = vb_malloc_check(slots(c->t->n) * sizeof *first);
    for (int i = 0; i < c->t->n; i++) first[i] = i;
    g_sort_ctx = c;
    qsort(first, (size_t)c->t->n, sizeof *first, cmp_thread);
    for (int k = 0; k < c->t->n; k++) {
        int i = first[k];
        if (k > 0 && cmp_thread(&first[k - 1], &first[k]) == 0) continue;
        int sub = c->tid[i] / TID_SUBLANE_STEP, lane_tid = c->tid[i] % TID_SUBLANE_STEP;
        char tname[64];
        if (sub == 0)
            snprintf(tname, sizeof tname, "%s", c->t->ev[i].lane);
        else
            snprintf(tname, sizeof tname, "%s (%d)", c->t->ev[i].lane, sub + 1);
        put_meta(em, "thread_name", c->t->ev[i].rank, c->tid[i], "name", tname, 0);
        /* sub-threads right after their lane */
        put_meta(em, "thread_sort_index", c->t->ev[i].rank, c->tid[i], "sort_index", NULL,
                 (long)lane_tid * MAX_SUBLANES + sub);
    }
    free(first);
}

/* Writes "," before every member but the first. */
static void member(FILE *f, bool *any, const char *key) {
    if (*any) fputc(',', f);
    *any = true;
    fprintf(f, "\"%s\":", key);
}

static void put_args(FILE *f, const vb_tl_event *e) {
    fputs(",\"args\":{", f);
    bool any = false;
    if (e->bytes > 0) member(f, &any, "bytes"), fprintf(f, "%.17g", e->bytes);
    if (e->flops > 0) member(f, &any, "flops"), fprintf(f, "%.17g", e->flops);
    if (e->step >= 0) member(f, &any, "step"), fprintf(f, "%d", e->step);
    if (e->bucket >= 0) member(f, &any, "bucket"), fprintf(f, "%d", e->bucket);
    if (e->trial_type[0]) {
        member(f, &any, "trial_type");
        put_str(f, e->trial_type);
        member(f, &any, "trial_index");
        fprintf(f, "%d", e->trial_index);
    }
    fputc('}', f);
}

static void put_event(emitter *em, const trace_ctx *c, int i) {
    const vb_tl_event *e = &c->t->ev[i];
    FILE *f = em->f;
    bool marker = strcmp(e->kind, "marker") == 0;
    next(em);
    fprintf(f, "{\"ph\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":", marker ? "i" : "X", e->rank, c->tid[i]);
    put_us(f, c->ts[i]);
    if (marker) {
        fputs(",\"s\":\"t\"", f);
    } else {
        fputs(",\"dur\":", f);
        put_us(f, c->end[i] - c->ts[i]);
    }
    fputs(",\"cat\":", f);
    put_str(f, e->kind);
    fputs(",\"name\":", f);
    if (strcmp(e->kind, "step") == 0 && e->step >= 0) {
        char s[32];
        snprintf(s, sizeof s, "step %d", e->step);
        put_str(f, s);
    } else {
        put_str(f, e->name);
    }
    put_args(f, e);
    fputc('}', f);
}

static void put_counter(emitter *em, int rank, int64_t ts, double v) {
    next(em);
    fprintf(em->f, "{\"ph\":\"C\",\"name\":\"samples/s\",\"pid\":%d,\"tid\":0,\"ts\":", rank);
    put_us(em->f, ts);
    fprintf(em->f, ",\"args\":{\"samples/s\":%.9g}}", v);
}

/* Steps of each rank's main lane are consecutive in `order`, by start. */
static void put_counters(emitter *em, const trace_ctx *c) {
    if (c->global_batch <= 0) return;
    int prev = -1;
    for (int k = 0; k < c->t->n; k++) {
        int i = c->order[k];
        if (strcmp(c->t->ev[i].kind, "step") != 0 || c->end[i] <= c->ts[i]) continue;
        if (prev >= 0 && (c->t->ev[prev].rank != c->t->ev[i].rank || c->end[prev] < c->ts[i]))
            put_counter(em, c->t->ev[prev].rank, c->end[prev], 0.0);
        put_counter(em, c->t->ev[i].rank, c->ts[i], c->global_batch / ((double)(c->end[i] - c->ts[i]) * 1e-9));
        prev = i;
    }
    if (prev >= 0) put_counter(em, c->t->ev[prev].rank, c->end[prev], 0.0);
}

/* --------------------------------------------------------------- flows */

static bool is_bucket_comm(const vb_tl_event *e) {
    return e->bucket >= 0 && strcmp(e->lane, "comm") == 0 && strcmp(e->kind, "comm") == 0;
}

static int cmp_flow_key(const vb_tl_event *a, const vb_tl_event *b) {
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    int s = strcmp(a->trial_type, b->trial_type);
    if (s) return s;
    if (a->trial_index != b->trial_index) return a->trial_index < b->trial_index ? -1 : 1;
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    if (a->bucket != b->bucket) return a->bucket < b->bucket ? -1 : 1;
    return 0;
}

static int cmp_comm_idx(const void *pa, const void *pb) {
    const trace_ctx *c = g_sort_ctx;
    int a = *(const int *)pa, b = *(const int *)pb;
    int k = cmp_flow_key(&c->t->ev[a], &c->t->ev[b]);
    if (k) return k;
    if (c->ts[a] != c->ts[b]) return c->ts[a] < c->ts[b] ? -1 : 1;
    return (a > b) - (a < b);
}

/* First comm-lane row (by start) with the marker's key, or -1. */
static int find_allreduce(const trace_ctx *c, const int *comm, int nc, const vb_tl_event *m) {
    int lo = 0, hi = nc;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cmp_flow_key(&c->t->ev[comm[mid]], m) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nc && cmp_flow_key(&c->t->ev[comm[lo]], m) == 0 ? comm[lo] : -1;
}

static void put_flow_end(emitter *em, const char *ph, long id, int pid, int tid, int64_t ts, int bucket) {
    next(em);
    fprintf(em->f, "{\"ph\":\"%s\",\"id\":%ld,\"cat\":\"ddp\",\"name\":\"bucket %d\",\"pid\":%d,\"tid\":%d,\"ts\":", ph,
            id, bucket, pid, tid);
    put_us(em->f, ts);
    fputs(ph[0] == 'f' ? ",\"bp\":\"e\"}" : "}", em->f);
}

static void put_flows(emitter *em, trace_ctx *c) {
    const vb_timeline *t = c->t;
    int *comm = vb_malloc_check(slots(t->n) * sizeof *comm);
    int nc = 0;
    for (int i = 0; i < t->n; i++)
        if (is_bucket_comm(&t->ev[i])) comm[nc++] = i;
    g_sort_ctx = c;
    qsort(comm, (size_t)nc, sizeof *comm, cmp_comm_idx);
    for (int k = 0; k < t->n; k++) {
        int i = c->order[k];
        const vb_tl_event *m = &t->ev[i];
        if (strcmp(m->kind, "marker") != 0 || strcmp(m->name, "bucket_ready") != 0 || m->bucket < 0) continue;
        int j = find_allreduce(c, comm, nc, m);
        if (j < 0) {
            c->unmatched++;
            continue;
        }
        long id = ++c->nflows;
        put_flow_end(em, "s", id, m->rank, 0, c->ts[i], m->bucket);
        put_flow_end(em, "f", id, t->ev[j].rank, c->tid[j], c->ts[j], m->bucket);
    }
    free(comm);
}

static void write_trace(FILE *f, void *ctx) {
    trace_ctx *c = ctx;
    c->nflows = c->unmatched = 0;
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"vitbench trace\",\"source\":", f);
    put_str(f, c->source);
    fprintf(f, ",\"events\":%d},\"traceEvents\":[", c->t->n);
    emitter em = {f, true};
    put_metadata(&em, c);
    for (int k = 0; k < c->t->n; k++) put_event(&em, c, c->order[k]);
    put_counters(&em, c);
    put_flows(&em, c);
    fputs("\n]}\n", f);
}

/* -------------------------------------------------------------------- main */

static void write_kineto(const trace_paths *p, const vb_timeline *t, const char *backend, int nprocs) {
    vb_kineto_opts o = {.source = p->timeline, .backend = backend, .world_size = nprocs};
    vb_kineto_stats st;
    vb_outdir out;
    vb_outdir_open_or_die(&out, p->out_root, p->out_name, "trace");
    vb_kineto_write(t, &out, &o, &st);
    vb_outdir_close(&out);
    if (t->n == 0) vb_warn("%s: no events (header only): no rank files written", p->timeline);
    if (st.files < nprocs && t->n > 0)
        vb_warn("%s: %d of %d ranks have events: the others have no file", p->timeline, st.files, nprocs);
    if (st.files > 0 && st.device_events == 0)
        vb_warn("%s: no device rows (ops or stream lanes): HTA finds no kernels in these files", p->timeline);
    printf("vitbench trace: %s/: %d rank file%s (Kineto), %ld device events on up to %d %sstreams a rank, "
           "%d ProfilerSteps%s\n",
           p->output, st.files, st.files == 1 ? "" : "s", st.device_events, st.max_streams,
           st.cpu_ranks > 0 ? "pseudo-" : "", st.steps, st.cpu_ranks > 0 ? " (CPU ops as the device)" : "");
    if (st.stale_removed > 0)
        printf("  removed %d rank file%s of an earlier export that this timeline has no rank for\n",
               st.stale_removed, st.stale_removed == 1 ? "" : "s");
    printf("  HTA: TraceAnalysis(trace_dir=\"%s\", include_last_profiler_step=True) (docs/traces.md)\n",
           p->output);
}

int vb_trace_main(int argc, char **argv) {
    trace_paths p;
    parse_args(argc, argv, &p);

    vb_timeline t;
    char err[1024];
    int rc = vb_timeline_read(p.timeline, &t, err, sizeof err);
    if (rc != 0) vb_die_input("trace: %s", err);

    trace_ctx c = {.t = &t, .source = p.timeline};
    int ranks = 0;
    char run_warn[VB_PATH_MAX + 128], backend[32];
    read_run_json(p.runjson, &c.global_batch, &ranks, backend, sizeof backend, run_warn, sizeof run_warn);
    c.nprocs = t.nranks > ranks ? t.nranks : ranks;
    if (p.kineto) {
        write_kineto(&p, &t, backend, c.nprocs);
        vb_timeline_free(&t);
        return 0;
    }
    size_t n = slots(t.n);
    c.ts = vb_malloc_check(n * sizeof *c.ts);
    c.end = vb_malloc_check(n * sizeof *c.end);
    c.tid = vb_malloc_check(n * sizeof *c.tid);
    c.order = vb_malloc_check(n * sizeof *c.order);
    quantize(&t, c.ts, c.end);
    vb_trace_assign_tids(&t, c.tid);
    for (int i = 0; i < t.n; i++) c.order[i] = i;
    g_sort_ctx = &c;
    qsort(c.order, (size_t)t.n, sizeof *c.order, cmp_order);
    clamp_nesting(&c);
    split_overlaps(&c);

    /* warnings only after the write, so a failure is the one line printed */
    vb_outdir out;
    vb_outdir_open_or_die(&out, p.out_root, "", "trace");
    vb_outdir_write_or_die(&out, p.out_name, write_trace, &c, "trace");
    vb_outdir_close(&out);
    if (run_warn[0]) vb_warn("%s", run_warn);
    if (t.n == 0) vb_warn("%s: no events (header only): the trace holds only metadata", p.timeline);
    if (c.unmatched > 0)
        vb_warn("%s: %ld bucket_ready markers have no comm-lane row of the same rank, step and bucket (no flow drawn)",
                p.timeline, c.unmatched);
    printf("vitbench trace: %s: %d events, %d ranks, %ld flows%s; open it in https://ui.perfetto.dev or "
           "chrome://tracing\n",
           p.output, t.n, c.nprocs, c.nflows, c.global_batch > 0 ? ", samples/s counters" : "");
    free(c.ts);
    free(c.end);
    free(c.tid);
    free(c.order);
    vb_timeline_free(&t);
    return 0;
}
