/* commbench.c: `vitbench commbench` (commbench.h), the nccl-tests of this
 * project's data plane.
 *
 * For each collective (in the order given), each group kind of the layout
 * (in the order given) and each size: every rank runs the collective on its
 * own group of that kind -- all groups of a kind at once, as in training --
 * through the vb_data_* front-end on the chosen plane, over buffers from the
 * chosen backend. Warm-up calls, a barrier on the group, then `iters` calls
 * between two events of the context; the time per call is the span between
 * them once the loop has completed (the CPU backend's events read the host
 * clock, CUDA's time the enqueued work). With --check the buffers are filled
 * again, the collective runs once more and its result is compared element by
 * element with the exact one (commbench_check.c).
 *
 * Rank 0 gathers every rank's time and wrong count after each size, prints
 * nccl-tests' table (time: the mean over the world's ranks) and at the end
 * writes commbench.csv (one row per rank) and commbench.json into a fresh
 * run directory.
 */
#include "bench/commbench/commbench.h"
#include "core/run/memcheck.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config/cli.h"
#include "core/config/flag.h"
#include "core/comm/comm.h"
#include "core/util/common.h"
#include "core/config/config.h"
#include "core/util/fileio.h"
#include "core/util/stats.h"
#include "core/comm/groups.h"
#include "core/results/results.h"

/* ---- group kinds by name ---- */

enum { CB_NGROUPS = 5, CB_HOST_LEN = 256 };
static const char *const group_names[CB_NGROUPS] = {"tp", "cp", "dp", "cpdp", "world"};
static const vb_group_kind group_kinds[CB_NGROUPS] = {VB_GROUP_TP, VB_GROUP_CP, VB_GROUP_DP, VB_GROUP_CP_DP,
                                                      VB_GROUP_WORLD};

/* ---- options ---- */

typedef struct cb_opts {
    int coll[VB_CB_NCOLL], ncoll;
    int group[CB_NGROUPS], ngroup; /* indices into group_names; ngroup 0: the default */
    long long minbytes, maxbytes;
    int stepfactor;
    int warmup, iters;
    int dtype; /* vb_dtype, by its index in dtype_choices */
    bool check;
    int tp, cp;
    const char *order;
    const char *comm_backend;
    int backend; /* index in backend_choices */
    const char *output_dir, *run_name;
    int beside_gemm; /* N of an N x N x N GEMM timed alone and beside each collective; 0: off */
} cb_opts;

static const char *const dtype_choices[] = {"float32", "bfloat16", "float16", NULL};
static const char *const backend_choices[] = {"cpu", "cuda", "auto", NULL};

/* Comma-separated names into indices; unknown and repeated names are input
 * errors naming the flag. */
static int parse_list(const char *flag, const char *value, const char *const *names, int nnames, int *out,
                      const char *what) {
    int n = 0;
    const char *p = value;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int idx = -1;
        for (int i = 0; i < nnames; i++)
            if (strlen(names[i]) == len && strncmp(p, names[i], len) == 0) idx = i;
        if (idx < 0) {
            char list[256] = "";
            for (int i = 0; i < nnames; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
            vb_die_input("commbench: %s: unknown %s '%.*s' (one of %s)", flag, what, (int)len, p, list);
        }
        for (int i = 0; i < n; i++)
            if (out[i] == idx) vb_die_input("commbench: %s: %s named twice in '%s'", flag, names[idx], value);
        out[n++] = idx;
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

static void opt_collectives(const char *flag, const char *value, void *ptr) {
    static const char *const names[VB_CB_NCOLL] = {"allreduce", "allgather", "reduce_scatter", "broadcast"};
    cb_opts *o = ptr;
    o->ncoll = parse_list(flag, value, names, VB_CB_NCOLL, o->coll, "collective");
}

static void opt_groups(const char *flag, const char *value, void *ptr) {
    cb_opts *o = ptr;
    o->ngroup = parse_list(flag, value, group_names, CB_NGROUPS, o->group, "group");
}

/* nccl-tests' sizes: a number of bytes with an optional K, M or G (powers of 1024) */
static void opt_size(const char *flag, const char *value, void *ptr) {
    const long long limit = 1LL << 40;
    const char *p = value;
    char *end = NULL;
    errno = 0;
    unsigned long long v = (*p >= '0' && *p <= '9') ? strtoull(p, &end, 10) : 0;
    unsigned long long mult = 1;
    bool ok = end && end != p && errno == 0;
    if (ok && *end) {
        switch (*end) {
        case 'K': case 'k': mult = 1ull << 10; break;
        case 'M': case 'm': mult = 1ull << 20; break;
        case 'G': case 'g': mult = 1ull << 30; break;
        default: ok = false;
        }
        ok = ok && end[1] == '\0';
    }
    if (!ok || v == 0 || v > (unsigned long long)limit / mult)
        vb_die_input("commbench: %s expects a size in bytes from 1 to 1024G, with an optional K, M or G "
                     "(e.g. 8, 64K, 256M), got '%s'",
                     flag, value);
    *(long long *)ptr = (long long)(v * mult);
}

static void opt_check(const char *flag, const char *value, void *ptr) {
    if (!vb_flag_parse_bool(value, ptr)) vb_die_input("commbench: %s expects true or false, got '%s'", flag, value);
}

static void build_cli(cb_opts *o, vb_cli_opt *opts, int *nopts, vb_cli *cli) {
    const vb_cli_opt table[] = {
        {.name = "collectives", .kind = VB_CLI_FUNC, .ptr = o, .fn = opt_collectives, .arg = "LIST",
         .help = "allreduce,allgather,reduce_scatter,broadcast (default all four, in this order)"},
        {.name = "minbytes", .kind = VB_CLI_FUNC, .ptr = &o->minbytes, .fn = opt_size, .arg = "SIZE",
         .help = "smallest size, bytes with optional K/M/G (default 8)"},
        {.name = "maxbytes", .kind = VB_CLI_FUNC, .ptr = &o->maxbytes, .fn = opt_size, .arg = "SIZE",
         .help = "largest size (default 256M)"},
        {.name = "stepfactor", .kind = VB_CLI_INT, .ptr = &o->stepfactor, .ilo = 2, .ihi = 1 << 20, .arg = "F",
         .help = "multiply the size by F from one size to the next (default 2)"},
        {.name = "warmup_iters", .kind = VB_CLI_INT, .ptr = &o->warmup, .ilo = 0, .ihi = 1000000, .arg = "N",
         .help = "untimed calls before each size (default 5)"},
        {.name = "iters", .kind = VB_CLI_INT, .ptr = &o->iters, .ilo = 1, .ihi = 10000000, .arg = "N",
         .help = "timed calls per size (default 20)"},
        {.name = "datatype", .kind = VB_CLI_CHOICE, .ptr = &o->dtype, .choices = dtype_choices, .arg = "TYPE",
         .help = "float32, bfloat16 or float16 (default float32)"},
        {.name = "check", .kind = VB_CLI_FUNC, .ptr = &o->check, .fn = opt_check, .arg = "true|false",
         .help = "count wrong elements of one more call after the timed loop (default true)"},
        {.name = "tensor_parallel", .kind = VB_CLI_INT, .ptr = &o->tp, .ilo = 1, .ihi = INT_MAX, .arg = "N",
         .help = "tp group size (default 1)"},
        {.name = "context_parallel", .kind = VB_CLI_INT, .ptr = &o->cp, .ilo = 1, .ihi = INT_MAX, .arg = "N",
         .help = "cp group size (default 1); dp = ranks / (tp x cp)"},
        {.name = "parallel_order", .kind = VB_CLI_STRING, .ptr = &o->order, .arg = "ORDER",
         .help = "rank layout, first named varies fastest (default tp-cp-dp)"},
        {.name = "groups", .kind = VB_CLI_FUNC, .ptr = o, .fn = opt_groups, .arg = "LIST",
         .help = "tp,cp,dp,cpdp,world (default: tp, cp, dp, cpdp when cp and dp > 1, world)"},
        {.name = "comm_backend", .kind = VB_CLI_STRING, .ptr = &o->comm_backend, .arg = "PLANE",
         .help = "data plane: auto, mpi or nccl (default auto: nccl for cuda buffers when built, else mpi)"},
        {.name = "backend", .kind = VB_CLI_CHOICE, .ptr = &o->backend, .choices = backend_choices, .arg = "B",
         .help = "where the buffers live: cpu, cuda or auto (default cpu)"},
        {.name = "beside_gemm", .kind = VB_CLI_INT, .ptr = &o->beside_gemm, .ilo = 0, .ihi = 8192, .arg = "N",
         .help = "also time an N x N x N float GEMM on every rank alone and while each collective runs: compute's "
                 "slowdown beside communication, a machine file's overlap_slowdown (default 0: off)"},
        {.name = "output_dir", .kind = VB_CLI_STRING, .ptr = &o->output_dir, .arg = "DIR",
         .help = "where the run directory goes (default results)"},
        {.name = "run_name", .kind = VB_CLI_STRING, .ptr = &o->run_name, .arg = "NAME",
         .help = "run directory name (default commbench_<UTC time>; never overwritten)"},
    };
    *nopts = (int)(sizeof table / sizeof table[0]);
    memcpy(opts, table, sizeof table);
    *cli = (vb_cli){
        .cmd = "commbench",
        .usage = "mpirun -np N vitbench commbench [--collectives LIST] [--minbytes SIZE] [--maxbytes SIZE]\n"
                 "       [--stepfactor F] [--warmup_iters N] [--iters N] [--datatype TYPE] [--check true|false]\n"
                 "       [--tensor_parallel N] [--context_parallel N] [--parallel_order O] [--groups LIST]\n"
                 "       [--comm_backend auto|mpi|nccl] [--backend cpu|cuda|auto] [--beside_gemm N] [--output_dir DIR]\n"
                 "       [--run_name NAME]",
        .about = "nccl-tests-style bandwidth of the data plane's collectives over the layout's groups;\n"
                 "writes DIR/NAME/commbench.csv and commbench.json, exits 1 when a result is wrong.",
        .opts = opts,
        .nopts = *nopts,
    };
}

/* ---- collective input errors: one line from rank 0, every rank exits 2 ---- */

static const vb_comm *g_cb_world;
static void input_error_sync(void) {
    if (g_cb_world && g_cb_world->size > 1) vb_barrier(g_cb_world);
    vb_world_finalize();
}

/* ---- one measurement ---- */

typedef struct cb_bench {
    cb_opts o;
    vb_dtype t;
    vb_comm world;
    vb_layout layout;
    const vb_comm_data_ops *plane;
    const vb_ops *ops;
    vb_ctx *ctx;
    void *sendbuf, *recvbuf; /* backend memory, max_bytes each */
    void *host;              /* host staging for fill and check, max_bytes */
    size_t max_bytes;
    vb_event *ev_start, *ev_end;
    /* --beside_gemm: out = a @ w^T, N x N each, and one GEMM's time alone
     * on this rank (what sets how many run beside a collective) */
    void *gemm_a, *gemm_w, *gemm_out;
    double gemm_us;
} cb_bench;

/* What each rank sends rank 0 after a size: doubles so one gather carries both. */
typedef struct cb_meas {
    double time_us;
    double wrong; /* -1: not checked */
    double gemm_us, gemm_beside_us; /* --beside_gemm: a GEMM's time alone and beside the collective; 0: off */
} cb_meas;

static void run_once(const cb_bench *b, const vb_comm *g, vb_cb_coll c, size_t count) {
    vb_cb_run(c, g, b->sendbuf, b->recvbuf, count, b->t, b->ctx);
}

/* Fresh inputs for the group's collective, in backend memory. */
static void fill_inputs(cb_bench *b, const vb_comm *g, vb_cb_coll c, size_t count) {
    size_t bytes = vb_cb_in_count(c, count, g->size) * vb_dtype_size(b->t);
    vb_cb_fill(c, b->t, g->size, g->rank, count, b->host);
    b->ops->memcpy_h2d(b->ctx, b->sendbuf, b->host, bytes);
    b->ops->synchronize(b->ctx);
}

/* k GEMMs on the context, timed by its events: microseconds per GEMM. With
 * req, the collective it holds runs meanwhile and is tested after each GEMM,
 * as DDP tests its buckets between layers (MPI progresses only when called). */
static double gemm_loop(cb_bench *b, int k, vb_request *req) {
    const int n = b->o.beside_gemm;
    b->ops->event_record(b->ctx, b->ev_start);
    for (int i = 0; i < k; i++) {
        b->ops->matmul_forward(b->ctx, b->gemm_out, b->gemm_a, b->gemm_w, NULL, n, n, n);
        if (req) vb_test(req);
    }
    b->ops->event_record(b->ctx, b->ev_end);
    b->ops->event_synchronize(b->ctx, b->ev_end);
    return b->ops->event_elapsed_ms(b->ctx, b->ev_start, b->ev_end) * 1e3 / k;
}

enum { CB_BESIDE_ROUNDS = 3 };

/* Compute beside communication: as many GEMMs as the collective lasts alone
 * (at least one), timed alone and while one collective runs, alternated
 * CB_BESIDE_ROUNDS times; the medians go to m. Every round starts at a
 * barrier of the group, so that the collective meets its peers at once. */
static void measure_beside(cb_bench *b, const vb_comm *g, vb_cb_coll c, size_t count, cb_meas *m) {
    double k_real = b->gemm_us > 0 ? m->time_us / b->gemm_us : 1.0;
    int k = k_real < 1.0 ? 1 : k_real > 10000.0 ? 10000 : (int)(k_real + 0.5);
    double alone[CB_BESIDE_ROUNDS], beside[CB_BESIDE_ROUNDS];
    for (int r = 0; r < CB_BESIDE_ROUNDS; r++) {
        vb_barrier(g);
        alone[r] = gemm_loop(b, k, NULL);
        vb_request req = {0};
        vb_barrier(g);
        vb_cb_start(c, g, b->sendbuf, b->recvbuf, count, b->t, b->ctx, &req);
        beside[r] = gemm_loop(b, k, &req);
        vb_wait(&req);
        b->ops->synchronize(b->ctx);
    }
    m->gemm_us = vb_stats_median(alone, CB_BESIDE_ROUNDS);
    m->gemm_beside_us = vb_stats_median(beside, CB_BESIDE_ROUNDS);
}

static cb_meas measure(cb_bench *b, const vb_comm *g, vb_cb_coll c, size_t count) {
    cb_meas m = {0.0, -1.0, 0.0, 0.0};
    fill_inputs(b, g, c, count);
    for (int i = 0; i < b->o.warmup; i++) run_once(b, g, c, count);
    vb_barrier(g);
    b->ops->event_record(b->ctx, b->ev_start);
    for (int i = 0; i < b->o.iters; i++) run_once(b, g, c, count);
    b->ops->event_record(b->ctx, b->ev_end);
    b->ops->event_synchronize(b->ctx, b->ev_end);
    m.time_us = b->ops->event_elapsed_ms(b->ctx, b->ev_start, b->ev_end) * 1e3 / b->o.iters;
    if (b->o.beside_gemm > 0) measure_beside(b, g, c, count, &m);
    if (b->o.check) {
        /* the timed loop left its sums of sums behind: start over for one call */
        fill_inputs(b, g, c, count);
        run_once(b, g, c, count);
        const void *out = (c == VB_CB_ALLGATHER || c == VB_CB_REDUCE_SCATTER) ? b->recvbuf : b->sendbuf;
        size_t nout = vb_cb_out_count(c, count, g->size);
        b->ops->memcpy_d2h(b->ctx, b->host, out, nout * vb_dtype_size(b->t));
        b->ops->synchronize(b->ctx);
        m.wrong = (double)vb_cb_count_wrong(c, b->t, g->size, g->rank, count, b->host);
    }
    return m;
}

/* ---- results (rank 0) ---- */

typedef struct cb_row {
    int coll, group; /* vb_cb_coll, index into group_names */
    int group_size;
    size_t size_bytes, count;
    int rank, group_rank;
    double time_us;
    long long wrong; /* -1: not checked */
    double gemm_us, gemm_beside_us; /* 0: --beside_gemm off */
} cb_row;

typedef struct cb_results {
    const cb_bench *b;
    cb_row *rows;
    size_t nrows, cap;
    char command_line[4096];
    char start_time[32], end_time[32];
    char *hosts; /* world.size x CB_HOST_LEN */
    char mpi_version[256];
    int run_groups[CB_NGROUPS], nrun; /* groups measured */
    int skipped[CB_NGROUPS], nskipped;
    long long wrong_total;
    /* --beside_gemm: each size's slowdown (mean over ranks) where the
     * collective lasted at least one GEMM, for the summary */
    double *slowdowns;
    int nslow, capslow;
} cb_results;

static void add_row(cb_results *r, const cb_row *row) {
    if (r->nrows == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        cb_row *grown = vb_realloc_check(r->rows, cap * sizeof *grown);
        r->rows = grown;
        r->cap = cap;
    }
    r->rows[r->nrows++] = *row;
}

/* The median of the sizes' slowdowns; -1 when no size lasted a GEMM. */
static double median_slowdown(const cb_results *r) {
    return r->nslow ? vb_stats_median(r->slowdowns, r->nslow) : -1.0;
}

static void add_slowdown(cb_results *r, double s) {
    if (r->nslow == r->capslow) {
        r->capslow = r->capslow ? 2 * r->capslow : 64;
        r->slowdowns = vb_realloc_check(r->slowdowns, (size_t)r->capslow * sizeof *r->slowdowns);
    }
    r->slowdowns[r->nslow++] = s;
}

static double algbw_gbps(size_t bytes, double time_us) { return (double)bytes / (time_us * 1e-6) / 1e9; }

static const char *nccl_type_name(vb_dtype t) {
    return t == VB_DTYPE_F32 ? "float" : t == VB_DTYPE_BF16 ? "bfloat16" : "half";
}

static void write_csv(FILE *f, void *ctx) {
    const cb_results *r = ctx;
    const cb_bench *b = r->b;
    fputs(VB_COMMBENCH_CSV_HEADER "\n", f);
    for (size_t i = 0; i < r->nrows; i++) {
        const cb_row *w = &r->rows[i];
        double alg = algbw_gbps(w->size_bytes, w->time_us);
        double bus = alg * vb_cb_busbw_factor((vb_cb_coll)w->coll, w->group_size);
        fprintf(f, "%s,%s,%s,%d,%d,%s,%zu,%zu,%d,%d,%d,%d,%.3f,%.6g,%.6g,%lld", vb_cb_coll_name((vb_cb_coll)w->coll),
                b->plane->name, group_names[w->group], w->group_size, b->world.size / w->group_size,
                vb_dtype_name(b->t), w->size_bytes, w->count, b->o.warmup, b->o.iters, w->rank, w->group_rank,
                w->time_us, alg, bus, w->wrong);
        /* the GEMM columns stay empty without --beside_gemm */
        if (w->gemm_us > 0)
            fprintf(f, ",%d,%.6g,%.6g,%.6g\n", b->o.beside_gemm, w->gemm_us, w->gemm_beside_us,
                    w->gemm_beside_us / w->gemm_us - 1.0);
        else
            fputs(",,,,\n", f);
    }
}

static void write_json(FILE *f, void *ctx) {
    const cb_results *r = ctx;
    const cb_bench *b = r->b;
    const vb_layout *l = &b->layout;
    cJSON *root = cJSON_CreateObject();
    char order[32];
    vb_layout_order_string(l, order, sizeof order);
    cJSON_AddStringToObject(root, "command", "commbench");
    cJSON_AddStringToObject(root, "command_line", r->command_line);
    cJSON_AddStringToObject(root, "start_time", r->start_time);
    cJSON_AddStringToObject(root, "end_time", r->end_time);
    cJSON_AddNumberToObject(root, "world_size", b->world.size);
    cJSON *lay = cJSON_AddObjectToObject(root, "layout");
    cJSON_AddNumberToObject(lay, "tensor_parallel", l->tp);
    cJSON_AddNumberToObject(lay, "context_parallel", l->cp);
    cJSON_AddNumberToObject(lay, "data_parallel", l->dp);
    cJSON_AddStringToObject(lay, "parallel_order", order);
    cJSON_AddStringToObject(root, "plane", b->plane->name);
    cJSON_AddStringToObject(root, "backend", b->ops->name);
    cJSON_AddStringToObject(root, "datatype", vb_dtype_name(b->t));
    cJSON *colls = cJSON_AddArrayToObject(root, "collectives");
    for (int i = 0; i < b->o.ncoll; i++)
        cJSON_AddItemToArray(colls, cJSON_CreateString(vb_cb_coll_name((vb_cb_coll)b->o.coll[i])));
    cJSON *groups = cJSON_AddArrayToObject(root, "groups");
    for (int i = 0; i < r->nrun; i++) {
        cJSON *g = cJSON_CreateObject();
        int n = vb_layout_group_size(l, group_kinds[r->run_groups[i]]);
        cJSON_AddStringToObject(g, "group", group_names[r->run_groups[i]]);
        cJSON_AddNumberToObject(g, "group_size", n);
        cJSON_AddNumberToObject(g, "ngroups", b->world.size / n);
        cJSON_AddItemToArray(groups, g);
    }
    cJSON *skipped = cJSON_AddArrayToObject(root, "groups_skipped_size_1");
    for (int i = 0; i < r->nskipped; i++) cJSON_AddItemToArray(skipped, cJSON_CreateString(group_names[r->skipped[i]]));
    cJSON_AddNumberToObject(root, "minbytes", (double)b->o.minbytes);
    cJSON_AddNumberToObject(root, "maxbytes", (double)b->o.maxbytes);
    cJSON_AddNumberToObject(root, "stepfactor", b->o.stepfactor);
    cJSON_AddNumberToObject(root, "warmup_iters", b->o.warmup);
    cJSON_AddNumberToObject(root, "iters", b->o.iters);
    cJSON_AddBoolToObject(root, "check", b->o.check);
    if (b->o.check)
        cJSON_AddNumberToObject(root, "wrong", (double)r->wrong_total);
    else
        cJSON_AddNullToObject(root, "wrong");
    cJSON *hosts = cJSON_AddArrayToObject(root, "hosts");
    for (int k = 0; k < b->world.size; k++)
        cJSON_AddItemToArray(hosts, cJSON_CreateString(r->hosts + (size_t)k * CB_HOST_LEN));
    if (b->o.beside_gemm > 0) {
        cJSON *bg = cJSON_AddObjectToObject(root, "beside_gemm");
        cJSON_AddNumberToObject(bg, "n", b->o.beside_gemm);
        cJSON_AddNumberToObject(bg, "sizes_counted", r->nslow);
        double med = median_slowdown(r);
        if (med >= -0.5)
            cJSON_AddNumberToObject(bg, "median_slowdown", med);
        else
            cJSON_AddNullToObject(bg, "median_slowdown");
    } else {
        cJSON_AddNullToObject(root, "beside_gemm");
    }
    cJSON_AddStringToObject(root, "mpi_version", r->mpi_version);
    cJSON_AddStringToObject(root, "git_commit", VB_GIT_COMMIT);
    char *text = cJSON_Print(root);
    if (!text) vb_die_internal("out of memory");
    fprintf(f, "%s\n", text);
    free(text);
    cJSON_Delete(root);
}

/* ---- the table (rank 0) ---- */

static void print_block_header(const cb_bench *b, vb_cb_coll c, int gi, int n) {
    int ngroups = b->world.size / n;
    printf("# commbench %s  group %s (%d ranks, %d group%s)  plane %s  %s  warmup %d  iters %d\n",
           vb_cb_coll_name(c), group_names[gi], n, ngroups, ngroups == 1 ? "" : "s", b->plane->name,
           vb_dtype_name(b->t), b->o.warmup, b->o.iters);
    const bool gemm = b->o.beside_gemm > 0;
    printf("#       size       count    type   redop    root     time   algbw   busbw  #wrong%s\n",
           gemm ? "     gemm   beside  slowdown" : "");
    printf("#        (B)  (elements)                             (us)  (GB/s)  (GB/s)%s\n",
           gemm ? "          (us)     (us)" : "");
    fflush(stdout);
}

static void print_row(const cb_bench *b, vb_cb_coll c, size_t bytes, size_t count, double time_us, double alg,
                      double bus, long long wrong, double gemm_us, double beside_us) {
    const char *redop = (c == VB_CB_ALLREDUCE || c == VB_CB_REDUCE_SCATTER) ? "sum" : "none";
    int root = c == VB_CB_BROADCAST ? 0 : -1;
    /* nccl-tests' precision: fewer decimals as the time grows */
    const char *tfmt = time_us >= 10000.0 ? "%9.0f" : time_us >= 100.0 ? "%9.1f" : "%9.2f";
    printf("%12zu%12zu%8s%8s%8d", bytes, count, nccl_type_name(b->t), redop, root);
    printf(tfmt, time_us);
    printf("%8.2f%8.2f", alg, bus);
    if (wrong < 0)
        printf("%8s", "N/A");
    else
        printf("%8lld", wrong);
    if (gemm_us > 0) printf("%9.1f%9.1f%+9.1f%%", gemm_us, beside_us, 100.0 * (beside_us / gemm_us - 1.0));
    printf("\n");
    fflush(stdout);
}

static void print_block_footer(const cb_bench *b, long long wrong, double busbw_sum, int nsizes) {
    if (!b->o.check)
        printf("# Out of bounds values : N/A (--check false)\n");
    else
        printf("# Out of bounds values : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g\n#\n", nsizes ? busbw_sum / nsizes : 0.0);
    fflush(stdout);
}

/* ---- setup ---- */

/* --beside_gemm's operands (small values: the products stay finite) and one
 * GEMM's time alone on this rank: the median of three loops of five, after
 * two untimed calls */
static void gemm_setup(cb_bench *b) {
    const size_t n = (size_t)b->o.beside_gemm, bytes = n * n * sizeof(float);
    float *h = b->ops->alloc_host(b->ctx, bytes);
    for (size_t i = 0; i < n * n; i++) h[i] = 0.01f * (float)((int)(i % 13) - 6);
    b->gemm_a = b->ops->alloc(b->ctx, bytes);
    b->gemm_w = b->ops->alloc(b->ctx, bytes);
    b->gemm_out = b->ops->alloc(b->ctx, bytes);
    b->ops->memcpy_h2d(b->ctx, b->gemm_a, h, bytes);
    b->ops->memcpy_h2d(b->ctx, b->gemm_w, h, bytes);
    b->ops->synchronize(b->ctx);
    b->ops->free_host(b->ctx, h);
    gemm_loop(b, 2, NULL);
    double t[3];
    for (int r = 0; r < 3; r++) t[r] = gemm_loop(b, 5, NULL);
    b->gemm_us = vb_stats_median(t, 3);
}

static void gemm_free(cb_bench *b) {
    if (!b->gemm_a) return;
    b->ops->free(b->ctx, b->gemm_a);
    b->ops->free(b->ctx, b->gemm_w);
    b->ops->free(b->ctx, b->gemm_out);
}

/* "vitbench ARGS", quoted as run.json quotes its command line (cut at n) */
static void join_command_line(char *buf, size_t n, int argc, char **argv) {
    char *args = vb_shell_join(argc, argv);
    snprintf(buf, n, "vitbench %s", args);
    free(args);
}

/* Fresh DIR/NAME (rank 0); the default name is commbench_<stamp>. */
static void create_run_dir(const cb_opts *o, char *dir, size_t n) {
    /* lengths and '/' were checked with the other flags, on every rank */
    char id[300];
    vb_run_dir_create(o->output_dir, o->run_name, "commbench", dir, n, id, sizeof id);
}

/* The group kinds to run, in order: the requested ones, or the layout's. */
static int group_list(const cb_opts *o, const vb_layout *l, int *out) {
    if (o->ngroup > 0) {
        memcpy(out, o->group, (size_t)o->ngroup * sizeof *out);
        return o->ngroup;
    }
    int n = 0;
    out[n++] = 0; /* tp */
    out[n++] = 1; /* cp */
    out[n++] = 2; /* dp */
    /* cpdp is cp or dp itself unless both are split */
    if (l->cp > 1 && l->dp > 1) out[n++] = 3;
    out[n++] = 4; /* world */
    return n;
}

int vb_commbench_main(int argc, char **argv) {
    cb_bench *b = vb_calloc_check(1, sizeof *b);
    cb_results *res = vb_calloc_check(1, sizeof *res);
    cb_opts *o = &b->o;
    *o = (cb_opts){.ncoll = VB_CB_NCOLL, .minbytes = 8, .maxbytes = 256LL << 20, .stepfactor = 2, .warmup = 5,
                   .iters = 20, .dtype = 0, .check = true, .tp = 1, .cp = 1, .order = "tp-cp-dp",
                   .comm_backend = "auto", .backend = 0, .output_dir = VB_RESULTS_DEFAULT_DIR};
    for (int i = 0; i < VB_CB_NCOLL; i++) o->coll[i] = i;
    vb_cli_opt opts[32];
    int nopts = 0;
    vb_cli cli;
    build_cli(o, opts, &nopts, &cli);
    /* help before MPI starts: a plain print and exit, also under mpirun */
    if (vb_cli_asks_help(argc, argv)) {
        vb_cli_print_help(&cli, stdout);
        free(b);
        free(res);
        return 0;
    }

    vb_iso_time(res->start_time, sizeof res->start_time);
    join_command_line(res->command_line, sizeof res->command_line, argc, argv);
    vb_address_space_check(VB_MPI_START_BYTES, "MPI's runtime"); /* one line, not PMIx's errors */
    vb_world_init(&argc, &argv, &b->world);
    vb_comm *world = &b->world;

    /* the command line is the same on every rank: one line from rank 0 */
    g_cb_world = world;
    vb_set_input_errors_collective(input_error_sync);
    vb_cli_parse(&cli, argc, argv);
    b->t = (vb_dtype)o->dtype;
    if (o->minbytes > o->maxbytes)
        vb_die_input("commbench: --minbytes %lld is larger than --maxbytes %lld", o->minbytes, o->maxbytes);
    char err[512];
    if (vb_layout_init(&b->layout, world->size, o->tp, o->cp, o->order, err, sizeof err) != 0)
        vb_die_input("commbench: %s (--tensor_parallel %d, --context_parallel %d, --parallel_order %s on %d ranks)",
                     err, o->tp, o->cp, o->order, world->size);
    const bool plane_auto = strcmp(o->comm_backend, "auto") == 0;
    b->plane = plane_auto ? vb_comm_data_mpi() : vb_comm_data_by_name(o->comm_backend);
    if (!b->plane) {
        if (strcmp(o->comm_backend, "nccl") == 0) vb_die_input("commbench: --comm_backend nccl: not in this build");
        vb_die_input("commbench: --comm_backend %s: unknown data plane (auto, mpi, nccl)", o->comm_backend);
    }
    b->ops = vb_ops_by_name(backend_choices[o->backend]);
    if (!b->ops)
        vb_die_input("commbench: --backend %s: not in this build (available: cpu%s)", backend_choices[o->backend],
                     vb_ops_cuda() ? ", cuda" : "");
    /* the run directory's name, before rank 0 alone creates it */
    if (o->run_name && (strchr(o->run_name, '/') || strlen(o->run_name) >= sizeof ((vb_config *)0)->run_name))
        vb_die_input("commbench: --run_name '%.80s': must be a plain name (no '/') of at most %zu characters",
                     o->run_name, sizeof ((vb_config *)0)->run_name - 1);
    if (strlen(o->output_dir) >= sizeof ((vb_config *)0)->output_dir)
        vb_die_input("commbench: --output_dir %.80s...: path too long", o->output_dir);
    /* a plane that enqueues on the context's stream needs device memory */
    if (!b->plane->needs_ctx_sync && b->ops->host_memory)
        vb_die_input("commbench: --comm_backend %s needs device buffers: add --backend cuda", b->plane->name);
    vb_set_input_errors_collective(NULL);

    /* a context per rank, on the GPU its node-local rank picks (as a run
     * does); creating one can fail on one node only (no device) */
    char cerr[256] = "";
    const int ndev = b->ops->device_count ? b->ops->device_count() : 1, local = vb_node_local_rank(world);
    vb_ctx_opts copts = {.act = VB_DTYPE_F32, .device = ndev > 0 ? local % ndev : 0, .tf32 = 0};
    b->ctx = b->ops->ctx_create(&copts, cerr, sizeof cerr);
    if (!b->ctx) vb_die_input("commbench: --backend %s: %s", b->ops->name, cerr[0] ? cerr : "cannot create a context");
    /* auto: NCCL for device buffers when built and every rank has its own
     * GPU; a plane that cannot run these ranks is refused (collective) */
    const vb_comm_data_ops *want = plane_auto && !b->ops->host_memory && vb_comm_data_nccl() ? vb_comm_data_nccl()
                                                                                             : b->plane;
    char why[512] = "";
    if (want->usable && !want->usable(world, b->ctx, why, sizeof why)) {
        if (!plane_auto) {
            vb_set_input_errors_collective(input_error_sync);
            vb_die_input("commbench: --comm_backend %s cannot run these ranks: %s", want->name, why);
        }
        want = b->plane;
    }
    b->plane = want;

    /* rank 0 picks the (fresh) run directory before any time is spent */
    char run_dir[VB_PATH_MAX] = "";
    if (world->rank == 0) create_run_dir(o, run_dir, sizeof run_dir);
    if (world->size > 1) vb_broadcast(world, run_dir, sizeof run_dir, 0);

    /* every rank's host, for commbench.json */
    char host[CB_HOST_LEN] = "";
    vb_hostname(host, sizeof host);
    if (world->rank == 0) {
        res->hosts = vb_calloc_check((size_t)world->size, CB_HOST_LEN);
    }
    vb_gather_bytes(world, host, CB_HOST_LEN, res->hosts, 0);
    vb_mpi_version(res->mpi_version, sizeof res->mpi_version);
    res->b = b;

    /* the groups: every rank builds its group of each kind (collective) */
    int glist[CB_NGROUPS];
    int ng = group_list(o, &b->layout, glist);
    vb_comm comms[CB_NGROUPS];
    int *ranks = vb_malloc_check((size_t)world->size * sizeof *ranks);
    for (int i = 0; i < ng; i++) {
        vb_group_kind kind = group_kinds[glist[i]];
        int n = vb_layout_group(&b->layout, world->rank, kind, ranks);
        vb_comm_from_ranks(world, ranks, n, &comms[i]);
        vb_snprintf(comms[i].group, sizeof comms[i].group, "%s", group_names[glist[i]]);
        vb_comm_set_data_plane(&comms[i], b->plane);
        if (n > 1)
            res->run_groups[res->nrun++] = glist[i];
        else
            res->skipped[res->nskipped++] = glist[i];
    }
    free(ranks);

    /* buffers for the largest size, from the backend */
    size_t es = vb_dtype_size(b->t);
    b->max_bytes = (size_t)o->maxbytes / es * es;
    bool any = res->nrun > 0 && b->max_bytes > 0;
    if (any) {
        b->sendbuf = b->ops->alloc(b->ctx, b->max_bytes);
        b->recvbuf = b->ops->alloc(b->ctx, b->max_bytes);
        b->host = b->ops->alloc_host(b->ctx, b->max_bytes);
        b->ev_start = b->ops->event_create(b->ctx);
        b->ev_end = b->ops->event_create(b->ctx);
    }
    if (any && o->beside_gemm > 0) gemm_setup(b);

    if (world->rank == 0) {
        char order[32];
        vb_layout_order_string(&b->layout, order, sizeof order);
        printf("# vitbench commbench: %d ranks, tp %d x cp %d x dp %d (%s), plane %s, backend %s, %s\n",
               world->size, b->layout.tp, b->layout.cp, b->layout.dp, order, b->plane->name, b->ops->name,
               vb_dtype_name(b->t));
        printf("# sizes %lld to %lld bytes, x%d; warmup %d, iters %d, check %s\n", o->minbytes, o->maxbytes,
               o->stepfactor, o->warmup, o->iters, o->check ? "on" : "off");
        if (o->beside_gemm > 0 && any)
            printf("# beside_gemm %d: a %dx%dx%d float GEMM takes %.1f us alone on rank 0; each size runs as many "
                   "as the collective lasts (at least one), alone and beside it, %d rounds, medians\n",
                   o->beside_gemm, o->beside_gemm, o->beside_gemm, o->beside_gemm, b->gemm_us, CB_BESIDE_ROUNDS);
        for (int k = 0; k < world->size; k++) {
            int tp, cp, dp;
            vb_layout_coords(&b->layout, k, &tp, &cp, &dp);
            printf("#  rank %4d  tp %d cp %d dp %d  host %s\n", k, tp, cp, dp, res->hosts + (size_t)k * CB_HOST_LEN);
        }
        for (int i = 0; i < res->nskipped; i++)
            printf("# group %s: 1 rank, skipped (a collective over one rank moves no data)\n",
                   group_names[res->skipped[i]]);
        if (res->nrun == 0)
            printf("# nothing to measure: every group has one rank (start more ranks: mpirun -np N)\n");
        printf("#\n");
        fflush(stdout);
    }

    cb_meas *all = world->rank == 0 ? vb_malloc_check((size_t)world->size * sizeof *all) : NULL;
    long long my_wrong = 0;
    for (int ci = 0; ci < o->ncoll; ci++) {
        vb_cb_coll c = (vb_cb_coll)o->coll[ci];
        for (int i = 0; i < ng; i++) {
            const vb_comm *g = &comms[i];
            int gi = glist[i];
            int n = vb_layout_group_size(&b->layout, group_kinds[gi]);
            if (n < 2) continue;
            if (world->rank == 0) print_block_header(b, c, gi, n);
            long long block_wrong = 0;
            double busbw_sum = 0.0;
            int nsizes = 0;
            size_t prev = 0;
            for (long long s = o->minbytes; s <= o->maxbytes;) {
                size_t count = vb_cb_count(c, (size_t)s, b->t, n);
                if (count > 0 && count != prev) {
                    prev = count;
                    size_t bytes = count * es;
                    cb_meas m = measure(b, g, c, count);
                    if (m.wrong > 0) my_wrong += (long long)m.wrong;
                    vb_gather_bytes(world, &m, sizeof m, all, 0);
                    if (world->rank == 0) {
                        double tsum = 0.0, gsum = 0.0, bsum = 0.0;
                        long long wsum = 0;
                        for (int k = 0; k < world->size; k++) {
                            cb_row row = {.coll = c, .group = gi, .group_size = n, .size_bytes = bytes,
                                          .count = count, .rank = k,
                                          .group_rank = vb_layout_group_rank(&b->layout, k, group_kinds[gi]),
                                          .time_us = all[k].time_us, .wrong = (long long)all[k].wrong,
                                          .gemm_us = all[k].gemm_us, .gemm_beside_us = all[k].gemm_beside_us};
                            add_row(res, &row);
                            tsum += all[k].time_us;
                            gsum += all[k].gemm_us;
                            bsum += all[k].gemm_beside_us;
                            if (all[k].wrong > 0) wsum += (long long)all[k].wrong;
                        }
                        double t = tsum / world->size;
                        double alg = algbw_gbps(bytes, t);
                        double bus = alg * vb_cb_busbw_factor(c, n);
                        double gemm = gsum / world->size, beside = bsum / world->size;
                        print_row(b, c, bytes, count, t, alg, bus, o->check ? wsum : -1, gemm, beside);
                        /* a size counts when the collective lasted a GEMM or more */
                        if (gemm > 0 && t >= gemm) add_slowdown(res, beside / gemm - 1.0);
                        block_wrong += wsum;
                        busbw_sum += bus;
                        nsizes++;
                    }
                }
                if (s > o->maxbytes / o->stepfactor) break; /* the next size would pass maxbytes (or overflow) */
                s *= o->stepfactor;
            }
            if (world->rank == 0) {
                print_block_footer(b, block_wrong, busbw_sum, nsizes);
                res->wrong_total += block_wrong;
            }
        }
    }
    free(all);

    /* every rank learns whether anything was wrong, to exit alike */
    double wrong_all = (double)my_wrong;
    vb_allreduce_sum_f64(world, &wrong_all, 1);

    if (world->rank == 0) {
        vb_iso_time(res->end_time, sizeof res->end_time);
        char path[VB_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/" VB_COMMBENCH_CSV, run_dir);
        vb_atomic_write_or_die(path, write_csv, res);
        snprintf(path, sizeof path, "%s/" VB_COMMBENCH_JSON, run_dir);
        vb_atomic_write_or_die(path, write_json, res);
        if (o->beside_gemm > 0 && any) {
            double med = median_slowdown(res);
            if (med >= -0.5)
                printf("# GEMM beside the collectives: median slowdown %+.1f%% over the %d sizes that lasted a GEMM "
                       "or more (a machine file's efficiency: {overlap_slowdown: %.3f}; negative: none seen)\n",
                       100.0 * med, res->nslow, med > 0 ? med : 0.0);
            else
                printf("# GEMM beside the collectives: no size lasted one GEMM (raise --maxbytes or lower "
                       "--beside_gemm)\n");
        }
        printf("# results: %s/" VB_COMMBENCH_CSV "\n", run_dir);
        fflush(stdout);
        if (wrong_all > 0)
            fprintf(stderr, "vitbench: error: commbench: %.0f wrong elements (column " VB_COL_WRONG " of %s/" VB_COMMBENCH_CSV ")\n",
                    wrong_all, run_dir);
    }

    if (any) {
        gemm_free(b);
        b->ops->event_destroy(b->ctx, b->ev_start);
        b->ops->event_destroy(b->ctx, b->ev_end);
        b->ops->free(b->ctx, b->sendbuf);
        b->ops->free(b->ctx, b->recvbuf);
        b->ops->free_host(b->ctx, b->host);
    }
    vb_comm_ctx_release(b->ctx);
    for (int i = 0; i < ng; i++) vb_comm_free(&comms[i]);
    b->ops->ctx_destroy(b->ctx);
    vb_world_finalize();
    int rc = wrong_all > 0 ? 1 : 0;
    free(res->rows);
    free(res->hosts);
    free(res->slowdowns);
    free(res);
    free(b);
    return rc;
}
