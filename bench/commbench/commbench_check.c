/* commbench_check.c: the collectives of `vitbench commbench` as a table,
 * one entry each (nccl-tests' testColl): name, sizes, bus-bandwidth factor,
 * the exact-result fill and check, the call (commbench.h). */
#include "bench/commbench/commbench.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/util/common.h"

/* ---- the values ---- */

/* Largest integer m such that every integer in [0, m] is exact in t. */
static long long exact_limit(vb_dtype t) {
    switch (t) {
    case VB_DTYPE_BF16: return 256;  /* 8 significant bits */
    case VB_DTYPE_F16: return 2048;  /* 11 significant bits */
    default: return 1LL << 24;       /* float32: 24 significant bits */
    }
}

/* v(r, j) = a(j) + b(r), a in [0, amax], b(r) = r mod (bmax + 1); or one-hot */
typedef struct pattern {
    int n;
    int amax, bmax;
    int onehot;
    long long bsum; /* sum over r of b(r) */
} pattern;

static pattern pattern_for(vb_dtype t, int n) {
    pattern p = {.n = n};
    /* a sum over n ranks stays exact when each value is at most limit / n;
     * 63 keeps the values small (and distinct enough) at any size */
    long long m = exact_limit(t) / (n > 0 ? n : 1);
    if (m > 63) m = 63;
    p.onehot = m < 1;
    /* b gets the larger half so that v depends on the rank even at m = 1 */
    p.amax = (int)(m / 2);
    p.bmax = (int)(m - m / 2);
    for (int r = 0; r < n && !p.onehot; r++) p.bsum += r % (p.bmax + 1);
    return p;
}

/* splitmix64's finalizer: neighbouring indices get unrelated values */
static uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static long long value(const pattern *p, int r, size_t j) {
    if (p->onehot) return (long long)(j % (size_t)p->n) == r ? 1 : 0;
    return (long long)(mix(j) % (uint64_t)(p->amax + 1)) + r % (p->bmax + 1);
}

/* The exact sum over the group's ranks of value(r, j). */
static long long sum_value(const pattern *p, size_t j) {
    if (p->onehot) return 1;
    return (long long)p->n * (long long)(mix(j) % (uint64_t)(p->amax + 1)) + p->bsum;
}

/* The bit pattern of the integer v in t, |v| within exact_limit(t). */
static uint32_t bits_of(vb_dtype t, long long v) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (t == VB_DTYPE_F32) return u;
    if (t == VB_DTYPE_BF16) return u >> 16; /* exact: a small integer's low 16 bits are zero */
    /* float16: sign, 5-bit exponent (bias 15), 10-bit fraction; an integer
     * up to 2048 is a normal number with no bits lost */
    uint32_t sign = v < 0 ? 0x8000u : 0u;
    uint32_t a = (uint32_t)(v < 0 ? -v : v);
    if (a == 0) return sign;
    int e = 31 - __builtin_clz(a);
    uint32_t frac = e <= 10 ? (a << (10 - e)) & 0x3FFu : (a >> (e - 10)) & 0x3FFu;
    return sign | ((uint32_t)(e + 15) << 10) | frac;
}

static void store(vb_dtype t, void *buf, size_t i, long long v) {
    uint32_t u = bits_of(t, v);
    if (t == VB_DTYPE_F32) {
        memcpy((char *)buf + 4 * i, &u, 4);
    } else {
        uint16_t h = (uint16_t)u;
        memcpy((char *)buf + 2 * i, &h, 2);
    }
}

static bool matches(vb_dtype t, const void *buf, size_t i, long long v) {
    uint32_t want = bits_of(t, v);
    if (t == VB_DTYPE_F32) {
        uint32_t got;
        memcpy(&got, (const char *)buf + 4 * i, 4);
        return got == want;
    }
    uint16_t got;
    memcpy(&got, (const char *)buf + 2 * i, 2);
    return got == (uint16_t)want;
}

/* ---- one collective ---- */

/* What commbench does with a collective. `per` is count / n, a rank's block
 * of the logical buffer. */
typedef struct coll {
    const char *name;
    /* the logical buffer is n blocks (count rounded down to a multiple of n),
     * of which each rank's input / output holds one */
    bool blocks, in_block, out_block;
    double (*busbw_factor)(int n);
    /* rank's input (in) and the number of elements of its output that differ
     * from the exact result */
    void (*fill)(const pattern *p, vb_dtype t, int rank, size_t count, size_t per, void *in);
    long long (*count_wrong)(const pattern *p, vb_dtype t, int rank, size_t count, size_t per, const void *out);
    /* once on group g: send is the input, recv the output (the same buffer
     * when the collective is in place) */
    void (*run)(const vb_comm *g, void *send, void *recv, size_t count, size_t per, vb_dtype t, vb_ctx *ctx);
    /* the same, started non-blocking into req (vb_test / vb_wait finish it) */
    void (*start)(const vb_comm *g, void *send, void *recv, size_t count, size_t per, vb_dtype t, vb_ctx *ctx,
                  vb_request *req);
} coll;

static double busbw_twice_ring(int n) { return 2.0 * (double)(n - 1) / (double)n; }
static double busbw_ring(int n) { return (double)(n - 1) / (double)n; }
static double busbw_one(int n) { return (void)n, 1.0; }

/* allreduce, reduce_scatter: my contribution to every element */
static void fill_every(const pattern *p, vb_dtype t, int rank, size_t count, size_t per, void *in) {
    (void)per;
    for (size_t j = 0; j < count; j++) store(t, in, j, value(p, rank, j));
}
/* allgather: my block of the gathered vector */
static void fill_my_block(const pattern *p, vb_dtype t, int rank, size_t count, size_t per, void *in) {
    (void)count;
    for (size_t i = 0; i < per; i++) store(t, in, i, value(p, rank, (size_t)rank * per + i));
}
/* broadcast: the root's values; the others' are overwritten */
static void fill_root(const pattern *p, vb_dtype t, int rank, size_t count, size_t per, void *in) {
    (void)per;
    for (size_t j = 0; j < count; j++) store(t, in, j, rank == 0 ? value(p, 0, j) : -1);
}

static long long wrong_sum(const pattern *p, vb_dtype t, int rank, size_t count, size_t per, const void *out) {
    (void)rank, (void)per;
    long long wrong = 0;
    for (size_t j = 0; j < count; j++) wrong += !matches(t, out, j, sum_value(p, j));
    return wrong;
}
/* element j came from rank j / per */
static long long wrong_gathered(const pattern *p, vb_dtype t, int rank, size_t count, size_t per,
                                const void *out) {
    (void)rank;
    long long wrong = 0;
    for (size_t j = 0; j < count; j++) wrong += !matches(t, out, j, value(p, (int)(j / per), j));
    return wrong;
}
/* my block of the summed vector */
static long long wrong_my_sum(const pattern *p, vb_dtype t, int rank, size_t count, size_t per, const void *out) {
    (void)count;
    long long wrong = 0;
    for (size_t i = 0; i < per; i++) wrong += !matches(t, out, i, sum_value(p, (size_t)rank * per + i));
    return wrong;
}
static long long wrong_root(const pattern *p, vb_dtype t, int rank, size_t count, size_t per, const void *out) {
    (void)rank, (void)per;
    long long wrong = 0;
    for (size_t j = 0; j < count; j++) wrong += !matches(t, out, j, value(p, 0, j));
    return wrong;
}

static void run_allreduce(const vb_comm *g, void *send, void *recv, size_t count, size_t per, vb_dtype t,
                          vb_ctx *ctx) {
    (void)recv, (void)per;
    vb_data_allreduce(g, send, count, t, VB_RED_SUM, ctx);
}
static void run_allgather(const vb_comm *g, void *send, void *recv, size_t count, size_t per, vb_dtype t,
                          vb_ctx *ctx) {
    (void)count;
    vb_data_allgather(g, send, recv, per, t, ctx);
}
static void run_reduce_scatter(const vb_comm *g, void *send, void *recv, size_t count, size_t per, vb_dtype t,
                               vb_ctx *ctx) {
    (void)count;
    vb_data_reduce_scatter(g, send, recv, per, t, VB_RED_SUM, ctx);
}
static void run_broadcast(const vb_comm *g, void *send, void *recv, size_t count, size_t per, vb_dtype t,
                          vb_ctx *ctx) {
    (void)recv, (void)per;
    vb_data_broadcast(g, send, count, t, 0, ctx);
}

static void start_allreduce(const vb_comm *g, void *send, void *recv, size_t count, size_t per, vb_dtype t,
                            vb_ctx *ctx, vb_request *req) {
    (void)recv, (void)per;
    vb_data_iallreduce(g, send, count, t, VB_RED_SUM, ctx, req);
}
static void start_allgather(const vb_comm *g, void *send, void *recv, size_t count, size_t per, vb_dtype t,
                            vb_ctx *ctx, vb_request *req) {
    (void)count;
    vb_data_iallgather(g, send, recv, per, t, ctx, req);
}
static void start_reduce_scatter(const vb_comm *g, void *send, void *recv, size_t count, size_t per, vb_dtype t,
                                 vb_ctx *ctx, vb_request *req) {
    (void)count;
    vb_data_ireduce_scatter(g, send, recv, per, t, VB_RED_SUM, ctx, req);
}
static void start_broadcast(const vb_comm *g, void *send, void *recv, size_t count, size_t per, vb_dtype t,
                            vb_ctx *ctx, vb_request *req) {
    (void)recv, (void)per;
    vb_data_ibroadcast(g, send, count, t, 0, ctx, req);
}

/* Adding a collective: its vb_cb_coll value, an entry here, its functions above. */
static const coll k_colls[VB_CB_NCOLL] = {
    [VB_CB_ALLREDUCE] = {"allreduce", false, false, false, busbw_twice_ring, fill_every, wrong_sum, run_allreduce,
                         start_allreduce},
    [VB_CB_ALLGATHER] = {"allgather", true, true, false, busbw_ring, fill_my_block, wrong_gathered, run_allgather,
                         start_allgather},
    [VB_CB_REDUCE_SCATTER] = {"reduce_scatter", true, false, true, busbw_ring, fill_every, wrong_my_sum,
                              run_reduce_scatter, start_reduce_scatter},
    [VB_CB_BROADCAST] = {"broadcast", false, false, false, busbw_one, fill_root, wrong_root, run_broadcast,
                         start_broadcast},
};

static const coll *coll_of(vb_cb_coll c) {
    if ((unsigned)c >= VB_CB_NCOLL) vb_die_internal("commbench: collective %d is not in the table", (int)c);
    return &k_colls[c];
}

const char *vb_cb_coll_name(vb_cb_coll c) { return (unsigned)c < VB_CB_NCOLL ? k_colls[c].name : "?"; }

int vb_cb_coll_parse(const char *name) {
    for (int i = 0; i < VB_CB_NCOLL; i++)
        if (strcmp(name, k_colls[i].name) == 0) return i;
    return -1;
}

size_t vb_cb_count(vb_cb_coll c, size_t size_bytes, vb_dtype t, int n) {
    size_t count = size_bytes / vb_dtype_size(t);
    if (coll_of(c)->blocks && n > 0) count = count / (size_t)n * (size_t)n;
    return count;
}

double vb_cb_busbw_factor(vb_cb_coll c, int n) { return n < 1 ? 0.0 : coll_of(c)->busbw_factor(n); }

size_t vb_cb_in_count(vb_cb_coll c, size_t count, int n) { return coll_of(c)->in_block ? count / (size_t)n : count; }

size_t vb_cb_out_count(vb_cb_coll c, size_t count, int n) {
    return coll_of(c)->out_block ? count / (size_t)n : count;
}

void vb_cb_fill(vb_cb_coll c, vb_dtype t, int n, int rank, size_t count, void *in) {
    pattern p = pattern_for(t, n);
    coll_of(c)->fill(&p, t, rank, count, count / (size_t)n, in);
}

long long vb_cb_count_wrong(vb_cb_coll c, vb_dtype t, int n, int rank, size_t count, const void *out) {
    pattern p = pattern_for(t, n);
    return coll_of(c)->count_wrong(&p, t, rank, count, count / (size_t)n, out);
}

void vb_cb_run(vb_cb_coll c, const vb_comm *g, void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx) {
    coll_of(c)->run(g, send, recv, count, count / (size_t)g->size, t, ctx);
}

void vb_cb_start(vb_cb_coll c, const vb_comm *g, void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx,
                 vb_request *req) {
    coll_of(c)->start(g, send, recv, count, count / (size_t)g->size, t, ctx, req);
}
