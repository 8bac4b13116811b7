/* commbench_check.c: sizes, bus-bandwidth factors and the exact-result
 * fill and check of `vitbench commbench` (commbench.h). */
#include "bench/commbench/commbench.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static const char *const coll_names[VB_CB_NCOLL] = {"allreduce", "allgather", "reduce_scatter", "broadcast"};

const char *vb_cb_coll_name(vb_cb_coll c) { return (unsigned)c < VB_CB_NCOLL ? coll_names[c] : "?"; }

int vb_cb_coll_parse(const char *name) {
    for (int i = 0; i < VB_CB_NCOLL; i++)
        if (strcmp(name, coll_names[i]) == 0) return i;
    return -1;
}

size_t vb_cb_count(vb_cb_coll c, size_t size_bytes, vb_dtype t, int n) {
    size_t count = size_bytes / vb_dtype_size(t);
    if ((c == VB_CB_ALLGATHER || c == VB_CB_REDUCE_SCATTER) && n > 0) count = count / (size_t)n * (size_t)n;
    return count;
}

double vb_cb_busbw_factor(vb_cb_coll c, int n) {
    if (n < 1) return 0.0;
    switch (c) {
    case VB_CB_ALLREDUCE: return 2.0 * (double)(n - 1) / (double)n;
    case VB_CB_ALLGATHER:
    case VB_CB_REDUCE_SCATTER: return (double)(n - 1) / (double)n;
    default: return 1.0;
    }
}

size_t vb_cb_in_count(vb_cb_coll c, size_t count, int n) {
    return c == VB_CB_ALLGATHER ? count / (size_t)n : count;
}

size_t vb_cb_out_count(vb_cb_coll c, size_t count, int n) {
    return c == VB_CB_REDUCE_SCATTER ? count / (size_t)n : count;
}

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

void vb_cb_fill(vb_cb_coll c, vb_dtype t, int n, int rank, size_t count, void *in) {
    pattern p = pattern_for(t, n);
    size_t per = count / (size_t)n;
    switch (c) {
    case VB_CB_ALLGATHER: /* my block of the gathered vector */
        for (size_t i = 0; i < per; i++) store(t, in, i, value(&p, rank, (size_t)rank * per + i));
        break;
    case VB_CB_BROADCAST: /* the root's values; the others' are overwritten */
        for (size_t j = 0; j < count; j++) store(t, in, j, rank == 0 ? value(&p, 0, j) : -1);
        break;
    default: /* allreduce and reduce_scatter: my contribution to every element */
        for (size_t j = 0; j < count; j++) store(t, in, j, value(&p, rank, j));
        break;
    }
}

long long vb_cb_count_wrong(vb_cb_coll c, vb_dtype t, int n, int rank, size_t count, const void *out) {
    pattern p = pattern_for(t, n);
    size_t per = count / (size_t)n;
    long long wrong = 0;
    switch (c) {
    case VB_CB_ALLREDUCE:
        for (size_t j = 0; j < count; j++) wrong += !matches(t, out, j, sum_value(&p, j));
        break;
    case VB_CB_ALLGATHER: /* element j came from rank j / per */
        for (size_t j = 0; j < count; j++) wrong += !matches(t, out, j, value(&p, (int)(j / per), j));
        break;
    case VB_CB_REDUCE_SCATTER: /* my block of the summed vector */
        for (size_t i = 0; i < per; i++) wrong += !matches(t, out, i, sum_value(&p, (size_t)rank * per + i));
        break;
    default:
        for (size_t j = 0; j < count; j++) wrong += !matches(t, out, j, value(&p, 0, j));
        break;
    }
    return wrong;
}
