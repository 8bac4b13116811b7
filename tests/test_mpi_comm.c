/* test_mpi_comm.c: the communicator layer (core/comm/comm.h) -- control plane,
 * data plane (blocking and non-blocking, even and padded-uneven, every dtype,
 * ordered after a context) -- and DDP's reduction across real MPI ranks.
 *
 * ctest runs it as one process (MPI singleton: every size-1 short-circuit);
 * tests/test_comm.sh runs it under mpirun -np 2, 3 and 4. Values are chosen
 * so every result is an exact small integer (or an exact comparison against a
 * single-process computation), so checks use ==.
 *
 * A failing check must not strand the other ranks in a collective: checks only
 * count mismatches (printing the first few with the rank), every test ends
 * with an allreduce of the count, and every rank then asserts on the total.
 */
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdint.h>

#include "core/comm/comm.h"
#include "core/util/common.h"
#include "core/model/ddp.h"
#include "core/comm/groups.h"
#include "core/model/vit.h"
#include "core/prof/profile.h"

static vb_comm g_world;
static int g_bad; /* mismatches on this rank in the current test */

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (!(cond)) {                                                              \
            if (g_bad++ < 8) {                                                      \
                fprintf(stderr, "[rank %d] %s:%d: ", g_world.rank, __FILE__, __LINE__); \
                fprintf(stderr, __VA_ARGS__);                                       \
                fputc('\n', stderr);                                                \
            }                                                                       \
        }                                                                           \
    } while (0)

/* every rank fails the test if any rank saw a mismatch */
static void end_test(void) {
    double bad = g_bad;
    vb_allreduce_sum_f64(&g_world, &bad, 1);
    g_bad = 0;
    if (bad != 0) fail_msg("%g mismatches over all ranks (details on stderr)", bad);
}

/* uneven: rank r contributes r % 3 floats (so some ranks send nothing) plus 1 on rank 0 */
static int uneven_count(int r) { return r % 3 + (r == 0); }

static void test_allgatherv_uneven(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    assert_true(P <= 64);
    int counts[64] = {0}, total = 0;
    for (int r = 0; r < P; r++) total += counts[r] = uneven_count(r);
    float send[4] = {0};
    for (int i = 0; i < counts[me]; i++) send[i] = (float)(me * 100 + i);
    float *recv = calloc((size_t)total + 1, sizeof *recv);
    vb_allgatherv_f32(&g_world, send, recv, counts);
    int k = 0;
    for (int r = 0; r < P; r++)
        for (int i = 0; i < counts[r]; i++, k++)
            CHECK(recv[k] == (float)(r * 100 + i), "allgatherv recv[%d] = %g, want %d", k, (double)recv[k], r * 100 + i);

    /* in place: my block already sits at its displacement in recv */
    memset(recv, 0, (size_t)total * sizeof *recv);
    int displ = 0;
    for (int r = 0; r < me; r++) displ += counts[r];
    for (int i = 0; i < counts[me]; i++) recv[displ + i] = (float)(me * 100 + i);
    vb_allgatherv_f32(&g_world, recv + displ, recv, counts);
    k = 0;
    for (int r = 0; r < P; r++)
        for (int i = 0; i < counts[r]; i++, k++)
            CHECK(recv[k] == (float)(r * 100 + i), "in-place allgatherv recv[%d] = %g", k, (double)recv[k]);
    free(recv);
    end_test();
}

static void test_reduce_scatterv_uneven(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    assert_true(P <= 64);
    int counts[64] = {0}, total = 0;
    for (int r = 0; r < P; r++) total += counts[r] = uneven_count(r) + (r == P - 1 ? 2 : 0);
    float *send = malloc((size_t)total * sizeof *send);
    for (int j = 0; j < total; j++) send[j] = (float)((me + 1) * (j + 1));
    float recv[8];
    memset(recv, 0, sizeof recv);
    vb_reduce_scatterv_sum_f32(&g_world, send, recv, counts);
    int displ = 0;
    for (int r = 0; r < me; r++) displ += counts[r];
    const int sum_ranks = P * (P + 1) / 2; /* sum over r of (r + 1) */
    for (int i = 0; i < counts[me]; i++) {
        float want = (float)(sum_ranks * (displ + i + 1));
        CHECK(recv[i] == want, "reduce_scatterv recv[%d] = %g, want %g", i, (double)recv[i], (double)want);
    }
    CHECK(recv[counts[me]] == 0.0f, "reduce_scatterv wrote past its %d floats", counts[me]);
    free(send);
    end_test();
}

static void test_iallreduce_wait_test(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    enum { N = 1000 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    for (int i = 0; i < N; i++) {
        a[i] = (float)(me + 1 + i);
        b[i] = (float)(2 * me + i % 7);
    }
    vb_request ra = {0}, rb = {0};
    vb_iallreduce_sum_f32(&g_world, a, N, &ra);
    vb_iallreduce_sum_f32(&g_world, b, N, &rb);
    CHECK(ra.bytes == N * sizeof(float), "request bytes %zu", ra.bytes);
    /* drive one to completion with vb_test, the other with vb_wait */
    long spins = 0;
    while (!vb_test(&rb)) spins++;
    CHECK(!rb.active, "request still active after vb_test returned true");
    double w = vb_wait(&ra);
    CHECK(w >= 0, "vb_wait returned %g", w);
    CHECK(vb_wait(&ra) == 0.0, "a second vb_wait on a finished request blocked");
    CHECK(vb_test(&ra), "vb_test on a finished request is false");
    for (int i = 0; i < N; i++) {
        float wa = (float)(P * (P + 1) / 2 + P * i);
        float wb = (float)(P * (P - 1) + P * (i % 7));
        CHECK(a[i] == wa, "iallreduce a[%d] = %g, want %g", i, (double)a[i], (double)wa);
        CHECK(b[i] == wb, "iallreduce b[%d] = %g, want %g", i, (double)b[i], (double)wb);
    }
    (void)spins;
    free(a);
    free(b);
    end_test();
}

/* ---- data plane ---- */

static const vb_dtype k_dtypes[3] = {VB_DTYPE_F32, VB_DTYPE_BF16, VB_DTYPE_F16};

/* Element i of a buffer of t as float / from float. Only values exact in
 * every dtype are used (small integers, a few binary fractions), so the
 * 16-bit encodings are the plain bit patterns; anything else is a test bug. */
static void put(void *buf, size_t i, vb_dtype t, float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (t == VB_DTYPE_F32) {
        ((float *)buf)[i] = v;
    } else if (t == VB_DTYPE_BF16) {
        assert_true((u & 0xffffu) == 0);
        ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
    } else {
        int e = (int)((u >> 23) & 0xff) - 127 + 15;
        if (v == 0.0f) {
            ((uint16_t *)buf)[i] = (uint16_t)((u >> 16) & 0x8000u);
            return;
        }
        assert_true(e > 0 && e < 31 && (u & 0x1fffu) == 0);
        ((uint16_t *)buf)[i] = (uint16_t)(((u >> 16) & 0x8000u) | ((uint32_t)e << 10) | ((u >> 13) & 0x3ffu));
    }
}

static float get(const void *buf, size_t i, vb_dtype t) {
    uint32_t u;
    if (t == VB_DTYPE_F32) return ((const float *)buf)[i];
    uint16_t h = ((const uint16_t *)buf)[i];
    if (t == VB_DTYPE_BF16) {
        u = (uint32_t)h << 16;
    } else {
        uint32_t e = (h >> 10) & 0x1fu;
        if ((h & 0x7fffu) == 0)
            u = (uint32_t)(h & 0x8000u) << 16;
        else if (e == 0 || e == 31)
            return NAN; /* subnormals and specials never appear in these tests */
        else
            u = ((uint32_t)(h & 0x8000u) << 16) | ((e + 112u) << 23) | ((uint32_t)(h & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* A stand-in context: counts what the data plane asks of it. Only the calls
 * the communicator makes are filled in; named "cpu" because its memory is
 * host memory (the padded forms may then use their own staging). */
static long g_ctx_syncs, g_ctx_copies;
static void fake_synchronize(vb_ctx *ctx) {
    (void)ctx;
    g_ctx_syncs++;
}
static void fake_memcpy_d2d(vb_ctx *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    g_ctx_copies++;
    memmove(dst, src, bytes);
}
static const vb_ops k_fake_ops = {
    .name = "cpu", .host_memory = 1, .synchronize = fake_synchronize, .memcpy_d2d = fake_memcpy_d2d};
static vb_ctx g_fake_ctx = {.ops = &k_fake_ops, .act = VB_DTYPE_F32};

/* The MPI plane without its native uneven forms: what an NCCL plane offers. */
static vb_comm_data_ops g_even_only;
static vb_comm even_only_world(void) {
    g_even_only = *vb_comm_data_mpi();
    g_even_only.allgatherv = NULL;
    g_even_only.reduce_scatterv = NULL;
    vb_comm c = g_world; /* a view of the world on another plane; never freed */
    c.data = &g_even_only;
    return c;
}

/* Blocking allreduce, sum and max, every dtype, host memory and a context. */
static void test_data_allreduce(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    enum { N = 1000 };
    for (int k = 0; k < 3; k++) {
        const vb_dtype t = k_dtypes[k];
        void *buf = malloc(N * vb_dtype_size(t));
        for (int op = 0; op < 2; op++) {
            for (size_t i = 0; i < N; i++) put(buf, i, t, (float)(me + 1 + (int)(i % 5)));
            long syncs = g_ctx_syncs;
            vb_ctx *ctx = op ? &g_fake_ctx : NULL;
            vb_data_allreduce(&g_world, buf, N, t, op ? VB_RED_MAX : VB_RED_SUM, ctx);
            if (op) CHECK(g_ctx_syncs == syncs + (P > 1), "%s max: context synchronized %ld times",
                          vb_dtype_name(t), g_ctx_syncs - syncs);
            for (size_t i = 0; i < N; i++) {
                float want = op ? (float)(P + (int)(i % 5)) : (float)(P * (P + 1) / 2 + P * (int)(i % 5));
                CHECK(get(buf, i, t) == want, "%s %s [%zu] = %g, want %g", vb_dtype_name(t), op ? "max" : "sum", i,
                      (double)get(buf, i, t), (double)want);
            }
        }
        free(buf);
    }
    end_test();
}

/* 16-bit sums are widened, summed in float32 and rounded once, to nearest
 * even: rank r adds 1 + r/128 (exact in bfloat16), and the float32 sum sits
 * exactly between two bfloat16 values for 4 ranks (4 + 6/128). */
static void test_data_half_rounding(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    uint16_t b[2];
    put(b, 0, VB_DTYPE_BF16, 1.0f + (float)me / 128.0f);
    put(b, 1, VB_DTYPE_BF16, -1.0f - (float)me / 128.0f);
    vb_data_allreduce(&g_world, b, 2, VB_DTYPE_BF16, VB_RED_SUM, NULL);
    float sum = (float)P + (float)(P * (P - 1) / 2) / 128.0f;
    /* bfloat16 keeps 8 significant bits: round the exact float32 sum to them */
    uint32_t u;
    memcpy(&u, &sum, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    float want;
    memcpy(&want, &u, sizeof want);
    if (P == 4) CHECK(want == 4.0625f, "reference rounding of 4 + 6/128 gave %g", (double)want);
    CHECK(get(b, 0, VB_DTYPE_BF16) == want, "bf16 sum %g, want %g", (double)get(b, 0, VB_DTYPE_BF16), (double)want);
    CHECK(get(b, 1, VB_DTYPE_BF16) == -want, "bf16 negative sum %g, want %g", (double)get(b, 1, VB_DTYPE_BF16),
          (double)-want);
    end_test();
}

/* Even allgather and reduce-scatter, out of place and in place, every dtype. */
static void test_data_even(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    enum { C = 3 };
    for (int k = 0; k < 3; k++) {
        const vb_dtype t = k_dtypes[k];
        const size_t es = vb_dtype_size(t);
        char *send = calloc((size_t)P * C + 1, es), *recv = calloc((size_t)P * C + 1, es);
        /* allgather: rank r sends r*10 + i */
        for (int inplace = 0; inplace < 2; inplace++) {
            memset(recv, 0, ((size_t)P * C + 1) * es);
            char *src = inplace ? recv + (size_t)me * C * es : send;
            for (int i = 0; i < C; i++) put(src, (size_t)i, t, (float)(me * 10 + i));
            vb_data_allgather(&g_world, src, recv, C, t, inplace ? &g_fake_ctx : NULL);
            for (int r = 0; r < P; r++)
                for (int i = 0; i < C; i++)
                    CHECK(get(recv, (size_t)r * C + i, t) == (float)(r * 10 + i), "%s allgather%s [%d][%d] = %g",
                          vb_dtype_name(t), inplace ? " in place" : "", r, i, (double)get(recv, (size_t)r * C + i, t));
            CHECK(get(recv, (size_t)P * C, t) == 0.0f, "%s allgather wrote past its end", vb_dtype_name(t));
        }
        /* reduce-scatter: rank r sends (r + 1) * (j + 1) at j; rank me gets
         * sum_r (r + 1) * (me*C + i + 1), or the max P * (me*C + i + 1) */
        for (int mode = 0; mode < 3; mode++) { /* sum, max, sum in place */
            const bool inplace = mode == 2;
            const vb_red_op op = mode == 1 ? VB_RED_MAX : VB_RED_SUM;
            for (int j = 0; j < P * C; j++) put(send, (size_t)j, t, (float)((me + 1) * (j + 1)));
            memset(recv, 0, ((size_t)P * C + 1) * es);
            void *dst = inplace ? send + (size_t)me * C * es : recv;
            vb_data_reduce_scatter(&g_world, send, dst, C, t, op, NULL);
            for (int i = 0; i < C; i++) {
                int j = me * C + i + 1;
                float want = op == VB_RED_MAX ? (float)(P * j) : (float)(P * (P + 1) / 2 * j);
                CHECK(get(dst, (size_t)i, t) == want, "%s reduce_scatter mode %d [%d] = %g, want %g", vb_dtype_name(t),
                      mode, i, (double)get(dst, (size_t)i, t), (double)want);
            }
            if (!inplace) CHECK(get(recv, C, t) == 0.0f, "%s reduce_scatter wrote past its end", vb_dtype_name(t));
        }
        free(send);
        free(recv);
    }
    end_test();
}

/* Broadcast from the last rank, every dtype. */
static void test_data_broadcast(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    enum { N = 7 };
    for (int k = 0; k < 3; k++) {
        const vb_dtype t = k_dtypes[k];
        char buf[N * 4];
        for (int i = 0; i < N; i++) put(buf, (size_t)i, t, (float)(me == P - 1 ? 100 + i : -1));
        vb_data_broadcast(&g_world, buf, N, t, P - 1, NULL);
        for (int i = 0; i < N; i++)
            CHECK(get(buf, (size_t)i, t) == (float)(100 + i), "%s broadcast [%d] = %g", vb_dtype_name(t), i,
                  (double)get(buf, (size_t)i, t));
    }
    end_test();
}

/* Every non-blocking collective in flight at once, completed in another
 * order than issued (one by vb_test polling, the rest by vb_wait). */
static void test_data_nonblocking_out_of_order(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    enum { N = 257, C = 5 };
    float *a = malloc(N * sizeof *a);
    uint16_t *e = malloc(N * sizeof *e);
    uint16_t gsend[C], *grecv = calloc((size_t)P * C, sizeof *grecv);
    uint16_t *rsend = malloc((size_t)P * C * sizeof *rsend), rrecv[C];
    float bc[C];
    for (int i = 0; i < N; i++) {
        a[i] = (float)(me + i % 11);
        put(e, (size_t)i, VB_DTYPE_F16, (float)(me * (i % 3)));
    }
    for (int i = 0; i < C; i++) {
        put(gsend, (size_t)i, VB_DTYPE_BF16, (float)(me * 8 + i));
        bc[i] = me == 0 ? (float)(i * i) : -1.0f;
    }
    for (int j = 0; j < P * C; j++) put(rsend, (size_t)j, VB_DTYPE_BF16, (float)(j % 7 + me));
    vb_request ra = {0}, rg = {0}, rr = {0}, rb = {0}, re = {0};
    vb_data_iallreduce(&g_world, a, N, VB_DTYPE_F32, VB_RED_SUM, NULL, &ra);
    vb_data_iallgather(&g_world, gsend, grecv, C, VB_DTYPE_BF16, NULL, &rg);
    vb_data_ireduce_scatter(&g_world, rsend, rrecv, C, VB_DTYPE_BF16, VB_RED_SUM, &g_fake_ctx, &rr);
    vb_data_ibroadcast(&g_world, bc, C, VB_DTYPE_F32, 0, NULL, &rb);
    vb_data_iallreduce(&g_world, e, N, VB_DTYPE_F16, VB_RED_MAX, NULL, &re);
    CHECK(ra.bytes == N * sizeof(float), "iallreduce request bytes %zu", ra.bytes);
    CHECK(rg.bytes == (size_t)P * C * 2, "iallgather request bytes %zu", rg.bytes);
    /* completion in another order: e, b, r polled, a, g */
    double w = vb_wait(&re);
    CHECK(w >= 0, "vb_wait returned %g", w);
    vb_wait(&rb);
    while (!vb_test(&rr)) {
    }
    CHECK(!rr.active && rr.stage == NULL, "a tested request is still active or holds its staging");
    vb_wait(&ra);
    vb_wait(&rg);
    CHECK(vb_wait(&ra) == 0.0, "a second vb_wait on a finished request blocked");
    CHECK(vb_test(&rg), "vb_test on a finished request is false");
    for (int i = 0; i < N; i++) {
        float wa = (float)(P * (P - 1) / 2 + P * (i % 11));
        CHECK(a[i] == wa, "iallreduce a[%d] = %g, want %g", i, (double)a[i], (double)wa);
        float we = (float)((P - 1) * (i % 3));
        CHECK(get(e, (size_t)i, VB_DTYPE_F16) == we, "f16 max e[%d] = %g, want %g", i,
              (double)get(e, (size_t)i, VB_DTYPE_F16), (double)we);
    }
    for (int r = 0; r < P; r++)
        for (int i = 0; i < C; i++)
            CHECK(get(grecv, (size_t)r * C + i, VB_DTYPE_BF16) == (float)(r * 8 + i), "iallgather [%d][%d]", r, i);
    for (int i = 0; i < C; i++) {
        int j = me * C + i;
        float want = (float)(P * (j % 7) + P * (P - 1) / 2);
        CHECK(get(rrecv, (size_t)i, VB_DTYPE_BF16) == want, "ireduce_scatter [%d] = %g, want %g", i,
              (double)get(rrecv, (size_t)i, VB_DTYPE_BF16), (double)want);
        CHECK(bc[i] == (float)(i * i), "ibroadcast [%d] = %g", i, (double)bc[i]);
    }
    free(a);
    free(e);
    free(grecv);
    free(rsend);
    end_test();
}

/* Uneven allgather / reduce-scatter: the native MPI forms, the padded forms
 * (internal staging and the caller's), and the v conveniences on a plane
 * without native uneven forms all agree, for the token splits context
 * parallelism makes (5 tokens over 4 ranks: 1 1 1 2; 4050 over 4). */
static void test_data_uneven_padded(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    assert_true(P <= 64);
    vb_comm even = even_only_world();
    const int ntoks[2] = {5, 4050};
    for (int n = 0; n < 2; n++) {
        if (ntoks[n] < P) continue;
        int counts[64], offs[64];
        vit_token_split(ntoks[n], P, counts, offs);
        if (P == 4 && n == 0)
            CHECK(counts[0] == 1 && counts[1] == 1 && counts[2] == 1 && counts[3] == 2, "5/4 split %d %d %d %d",
                  counts[0], counts[1], counts[2], counts[3]);
        const int total = ntoks[n];
        for (int k = 0; k < 3; k++) {
            const vb_dtype t = k_dtypes[k];
            const size_t es = vb_dtype_size(t);
            char *send = malloc((size_t)total * es), *recv = malloc((size_t)total * es);
            char *staging = malloc(vb_data_padded_count(&g_world, counts) * es);
            for (int way = 0; way < 4; way++) { /* native, padded internal, padded caller's, plane without v */
                /* allgather: token j (global) carries j % 61 */
                for (int i = 0; i < counts[me]; i++) put(send, (size_t)i, t, (float)((offs[me] + i) % 61));
                memset(recv, 0xff, (size_t)total * es);
                long copies = g_ctx_copies;
                if (way == 0) vb_data_allgatherv(&g_world, send, recv, counts, t, NULL);
                if (way == 1) vb_data_allgatherv_padded(&g_world, send, recv, counts, t, &g_fake_ctx, NULL);
                if (way == 2) vb_data_allgatherv_padded(&g_world, send, recv, counts, t, NULL, staging);
                if (way == 3) vb_data_allgatherv(&even, send, recv, counts, t, NULL);
                /* into the staging slot, out of every slot; equal counts are
                 * already the padded layout and need no copy */
                bool equal = true;
                for (int r = 1; r < P; r++) equal = equal && counts[r] == counts[0];
                if (way == 1 && P > 1)
                    CHECK(g_ctx_copies == copies + (equal ? 0 : 1 + P), "padded allgather: %ld copies on the context",
                          g_ctx_copies - copies);
                for (int j = 0; j < total; j++)
                    CHECK(get(recv, (size_t)j, t) == (float)(j % 61), "ntok %d %s way %d allgatherv [%d] = %g", total,
                          vb_dtype_name(t), way, j, (double)get(recv, (size_t)j, t));
                /* reduce-scatter: rank r's token j holds (r + 1) * (j % 13); the
                 * owner of token j gets its sum, P(P+1)/2 * (j % 13) */
                for (int j = 0; j < total; j++) put(recv, (size_t)j, t, (float)((me + 1) * (j % 13)));
                memset(send, 0xff, (size_t)total * es);
                if (way == 0) vb_data_reduce_scatterv(&g_world, recv, send, counts, t, VB_RED_SUM, NULL);
                if (way == 1) vb_data_reduce_scatterv_padded(&g_world, recv, send, counts, t, VB_RED_SUM, NULL, NULL);
                if (way == 2)
                    vb_data_reduce_scatterv_padded(&g_world, recv, send, counts, t, VB_RED_SUM, &g_fake_ctx, staging);
                if (way == 3) vb_data_reduce_scatterv(&even, recv, send, counts, t, VB_RED_SUM, NULL);
                for (int i = 0; i < counts[me]; i++) {
                    float want = (float)(P * (P + 1) / 2 * ((offs[me] + i) % 13));
                    CHECK(get(send, (size_t)i, t) == want, "ntok %d %s way %d reduce_scatterv [%d] = %g, want %g",
                          total, vb_dtype_name(t), way, i, (double)get(send, (size_t)i, t), (double)want);
                }
                if (counts[me] < total) /* nothing written past this rank's block */
                    CHECK(((unsigned char *)send)[(size_t)counts[me] * es] == 0xff, "way %d wrote past its block",
                          way);
            }
            free(send);
            free(recv);
            free(staging);
        }
    }
    end_test();
}

/* ---- device memory on a host-only plane ----
 * A stand-in device: its memory is host memory, but it says it is not
 * (host_memory 0), so the front-end must stage every collective through
 * page-locked host buffers and never hand the plane a device pointer. The
 * plane is MPI wrapped to record the pointers it is given. */
static long g_dev_h2d, g_dev_d2h, g_dev_hosts;
static void dev_sync(vb_ctx *ctx) { (void)ctx; }
static void dev_h2d(vb_ctx *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    g_dev_h2d++;
    memcpy(dst, src, bytes);
}
static void dev_d2h(vb_ctx *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    g_dev_d2h++;
    memcpy(dst, src, bytes);
}
static void dev_d2d(vb_ctx *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    memmove(dst, src, bytes);
}
static void *dev_alloc(vb_ctx *ctx, size_t bytes) {
    (void)ctx;
    return calloc(1, bytes);
}
static void dev_free(vb_ctx *ctx, void *p) {
    (void)ctx;
    free(p);
}
static void *dev_alloc_host(vb_ctx *ctx, size_t bytes) {
    (void)ctx;
    g_dev_hosts++;
    return malloc(bytes);
}
static void dev_free_host(vb_ctx *ctx, void *p) {
    (void)ctx;
    g_dev_hosts--;
    free(p);
}
struct vb_event {
    int recorded;
};
static vb_event *dev_event_create(vb_ctx *ctx) {
    (void)ctx;
    return calloc(1, sizeof(vb_event));
}
static void dev_event_destroy(vb_ctx *ctx, vb_event *e) {
    (void)ctx;
    free(e);
}
static void dev_event_record(vb_ctx *ctx, vb_event *e) {
    (void)ctx;
    e->recorded = 1;
}
static void dev_event_sync(vb_ctx *ctx, vb_event *e) {
    (void)ctx;
    (void)e;
}
static const vb_ops k_dev_ops = {.name = "fakedev",
                                 .host_memory = 0,
                                 .synchronize = dev_sync,
                                 .alloc = dev_alloc,
                                 .free = dev_free,
                                 .alloc_host = dev_alloc_host,
                                 .free_host = dev_free_host,
                                 .memcpy_h2d = dev_h2d,
                                 .memcpy_d2h = dev_d2h,
                                 .memcpy_d2d = dev_d2d,
                                 .event_create = dev_event_create,
                                 .event_destroy = dev_event_destroy,
                                 .event_record = dev_event_record,
                                 .event_synchronize = dev_event_sync};

/* the device buffers of the current test: the plane must never see them */
static const char *g_dev_lo[4];
static size_t g_dev_len[4];
static int g_ndev;
static bool on_device(const void *p) {
    for (int i = 0; i < g_ndev; i++)
        if ((const char *)p >= g_dev_lo[i] && (const char *)p < g_dev_lo[i] + g_dev_len[i]) return true;
    return false;
}
static void *dev_buf(size_t bytes) {
    void *p = calloc(1, bytes);
    g_dev_lo[g_ndev] = p;
    g_dev_len[g_ndev++] = bytes;
    return p;
}

static vb_comm_data_ops g_watch;
static void w_allreduce(const vb_comm *c, void *buf, size_t n, vb_dtype t, vb_red_op op, vb_ctx *ctx,
                        vb_request *req) {
    CHECK(!on_device(buf) && ctx == NULL, "allreduce handed a device buffer");
    vb_comm_data_mpi()->allreduce(c, buf, n, t, op, ctx, req);
}
static void w_allgather(const vb_comm *c, const void *s, void *r, size_t n, vb_dtype t, vb_ctx *ctx,
                        vb_request *req) {
    CHECK(!on_device(s) && !on_device(r) && ctx == NULL, "allgather handed a device buffer");
    vb_comm_data_mpi()->allgather(c, s, r, n, t, ctx, req);
}
static void w_reduce_scatter(const vb_comm *c, const void *s, void *r, size_t n, vb_dtype t, vb_red_op op,
                             vb_ctx *ctx, vb_request *req) {
    CHECK(!on_device(s) && !on_device(r) && ctx == NULL, "reduce_scatter handed a device buffer");
    vb_comm_data_mpi()->reduce_scatter(c, s, r, n, t, op, ctx, req);
}
static void w_broadcast(const vb_comm *c, void *buf, size_t n, vb_dtype t, int root, vb_ctx *ctx,
                        vb_request *req) {
    CHECK(!on_device(buf) && ctx == NULL, "broadcast handed a device buffer");
    vb_comm_data_mpi()->broadcast(c, buf, n, t, root, ctx, req);
}
static void w_allgatherv(const vb_comm *c, const void *s, void *r, const int *counts, vb_dtype t, vb_ctx *ctx) {
    CHECK(!on_device(s) && !on_device(r) && ctx == NULL, "allgatherv handed a device buffer");
    vb_comm_data_mpi()->allgatherv(c, s, r, counts, t, ctx);
}
static void w_reduce_scatterv(const vb_comm *c, const void *s, void *r, const int *counts, vb_dtype t,
                              vb_red_op op, vb_ctx *ctx) {
    CHECK(!on_device(s) && !on_device(r) && ctx == NULL, "reduce_scatterv handed a device buffer");
    vb_comm_data_mpi()->reduce_scatterv(c, s, r, counts, t, op, ctx);
}
static vb_comm watched_world(bool native_uneven) {
    g_watch = *vb_comm_data_mpi();
    g_watch.allreduce = w_allreduce;
    g_watch.allgather = w_allgather;
    g_watch.reduce_scatter = w_reduce_scatter;
    g_watch.broadcast = w_broadcast;
    g_watch.allgatherv = native_uneven ? w_allgatherv : NULL;
    g_watch.reduce_scatterv = native_uneven ? w_reduce_scatterv : NULL;
    vb_comm c = g_world;
    c.data = &g_watch;
    return c;
}

/* Every collective on device buffers of a host-only plane: staged, right,
 * blocking and not, completed by wait and by test, even and uneven (native
 * and padded); the context's staging is all given back on release. */
static void test_device_buffers_staged(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    vb_ctx dctx = {.ops = &k_dev_ops, .act = VB_DTYPE_F32};
    vb_comm w = watched_world(true);
    enum { N = 300, C = 4 };
    g_ndev = 0;
    float *a = dev_buf(N * sizeof(float)), *b = dev_buf(N * sizeof(float));
    uint16_t *h = dev_buf(N * sizeof(uint16_t));
    float *g = dev_buf((size_t)P * C * 2 * sizeof(float) + 64 * sizeof(float));
    for (int i = 0; i < N; i++) {
        a[i] = (float)(me + i % 7);
        b[i] = (float)(2 * me + 1);
        put(h, (size_t)i, VB_DTYPE_BF16, (float)(me + 1));
    }
    long d2h0 = g_dev_d2h, h2d0 = g_dev_h2d;
    /* blocking: allreduce f32 and bf16 */
    vb_data_allreduce(&w, a, N, VB_DTYPE_F32, VB_RED_SUM, &dctx);
    vb_data_allreduce(&w, h, N, VB_DTYPE_BF16, VB_RED_SUM, &dctx);
    if (P > 1) CHECK(g_dev_d2h == d2h0 + 2 && g_dev_h2d == h2d0 + 2, "blocking staging copies d2h %ld h2d %ld",
                     g_dev_d2h - d2h0, g_dev_h2d - h2d0);
    for (int i = 0; i < N; i++) {
        CHECK(a[i] == (float)(P * (P - 1) / 2 + P * (i % 7)), "staged allreduce a[%d] = %g", i, (double)a[i]);
        CHECK(get(h, (size_t)i, VB_DTYPE_BF16) == (float)(P * (P + 1) / 2), "staged bf16 allreduce [%d]", i);
    }
    /* allgather (in place and not), reduce-scatter, broadcast */
    float *gs = g + (size_t)P * C, *gr = g; /* send after the gather area */
    for (int i = 0; i < C; i++) gs[i] = (float)(me * 10 + i);
    vb_data_allgather(&w, gs, gr, C, VB_DTYPE_F32, &dctx);
    for (int r = 0; r < P; r++)
        for (int i = 0; i < C; i++) CHECK(gr[r * C + i] == (float)(r * 10 + i), "staged allgather [%d][%d]", r, i);
    for (int j = 0; j < P * C; j++) gr[j] = (float)((me + 1) * (j + 1));
    vb_data_reduce_scatter(&w, gr, gs, C, VB_DTYPE_F32, VB_RED_SUM, &dctx);
    for (int i = 0; i < C; i++)
        CHECK(gs[i] == (float)(P * (P + 1) / 2 * (me * C + i + 1)), "staged reduce_scatter [%d] = %g", i,
              (double)gs[i]);
    for (int i = 0; i < C; i++) gs[i] = me == P - 1 ? (float)(7 * i) : -1.0f;
    vb_data_broadcast(&w, gs, C, VB_DTYPE_F32, P - 1, &dctx);
    for (int i = 0; i < C; i++) CHECK(gs[i] == (float)(7 * i), "staged broadcast [%d]", i);
    /* non-blocking: two in flight, the result reaches the device only at completion */
    vb_request r1 = {0}, r2 = {0};
    for (int i = 0; i < N; i++) a[i] = (float)(me + 1);
    vb_data_iallreduce(&w, a, N, VB_DTYPE_F32, VB_RED_SUM, &dctx, &r1);
    vb_data_iallreduce(&w, b, N, VB_DTYPE_F32, VB_RED_SUM, &dctx, &r2);
    while (!vb_test(&r2)) {
    }
    vb_wait(&r1);
    for (int i = 0; i < N; i++) {
        CHECK(a[i] == (float)(P * (P + 1) / 2), "staged iallreduce a[%d] = %g", i, (double)a[i]);
        CHECK(b[i] == (float)(P * P), "staged iallreduce (tested) b[%d] = %g", i, (double)b[i]);
    }
    /* uneven, native and padded: rank r has r % 2 + 1 elements */
    for (int native = 1; native >= 0; native--) {
        vb_comm u = watched_world(native != 0);
        int counts[64], total = 0;
        for (int r = 0; r < P; r++) total += counts[r] = r % 2 + 1;
        int displ = 0;
        for (int r = 0; r < me; r++) displ += counts[r];
        float *us = a, *ur = b; /* device buffers of N floats */
        for (int i = 0; i < counts[me]; i++) us[i] = (float)(100 + displ + i);
        vb_data_allgatherv(&u, us, ur, counts, VB_DTYPE_F32, &dctx);
        for (int j = 0; j < total; j++) CHECK(ur[j] == (float)(100 + j), "staged allgatherv native %d [%d]", native, j);
        for (int j = 0; j < total; j++) ur[j] = (float)(me + j);
        vb_data_reduce_scatterv(&u, ur, us, counts, VB_DTYPE_F32, VB_RED_SUM, &dctx);
        for (int i = 0; i < counts[me]; i++)
            CHECK(us[i] == (float)(P * (P - 1) / 2 + P * (displ + i)), "staged reduce_scatterv native %d [%d] = %g",
                  native, i, (double)us[i]);
    }
    vb_comm_ctx_release(&dctx);
    CHECK(g_dev_hosts == 0, "%ld page-locked staging buffers left after release", g_dev_hosts);
    for (int i = 0; i < g_ndev; i++) free((void *)g_dev_lo[i]);
    g_ndev = 0;
    end_test();
}

/* Host memory on a device-only plane (NCCL's kind) runs on MPI: the plane
 * itself is never called for it. */
static void never_allreduce(const vb_comm *c, void *buf, size_t n, vb_dtype t, vb_red_op op, vb_ctx *ctx,
                            vb_request *req) {
    (void)c, (void)buf, (void)n, (void)t, (void)op, (void)ctx, (void)req;
    CHECK(false, "a device-only plane was handed host memory");
}
static void test_host_memory_on_device_plane(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    vb_comm_data_ops devonly = *vb_comm_data_mpi();
    devonly.device_only = true;
    devonly.allreduce = never_allreduce;
    vb_comm c = g_world;
    c.data = &devonly;
    float x[3] = {(float)me, 1.0f, 2.0f};
    vb_data_allreduce(&c, x, 3, VB_DTYPE_F32, VB_RED_SUM, NULL);
    vb_request r = {0};
    vb_data_iallreduce(&c, x, 3, VB_DTYPE_F32, VB_RED_SUM, &g_fake_ctx, &r); /* a host-memory context */
    vb_wait(&r);
    CHECK(x[0] == (float)(P * P * (P - 1) / 2) && x[1] == (float)(P * P) && x[2] == (float)(2 * P * P),
          "host allreduce over MPI gave %g %g %g", (double)x[0], (double)x[1], (double)x[2]);
    end_test();
}

/* The node-local rank (which picks a rank's GPU): on one node it is the
 * world rank, from the node's shared-memory communicator whatever the
 * launcher variables say (Hydra under Slurm leaves SLURM_LOCALID=0 on every
 * rank of a node); a rank alone in its world takes the launcher's word. */
static void test_node_local_rank(void **state) {
    (void)state;
    const int me = g_world.rank;
    CHECK(vb_node_local_rank(&g_world) == me, "local rank %d on one node, world rank %d", vb_node_local_rank(&g_world),
          me);
    const char *vars[3] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"};
    char *saved[3];
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(vars[i]);
    }
    CHECK(vb_node_local_rank(&g_world) == me, "without launcher variables: local rank %d, want %d",
          vb_node_local_rank(&g_world), me);
    setenv("SLURM_LOCALID", "0", 1); /* what every rank sees under Hydra inside a Slurm job */
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", me == 0 ? "3" : "0", 1);
    if (g_world.size > 1) /* run alone, the world is the one-rank case below */
        CHECK(vb_node_local_rank(&g_world) == me,
              "a launcher variable overrode the communicator: local rank %d, want %d", vb_node_local_rank(&g_world), me);
    vb_comm self; /* a world of one rank: the launcher's word, MPI's own variables before Slurm's */
    vb_comm_from_ranks(&g_world, &me, 1, &self);
    CHECK(vb_node_local_rank(&self) == (me == 0 ? 3 : 0), "alone: OMPI_COMM_WORLD_LOCAL_RANK not taken");
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    setenv("MPI_LOCALRANKID", "2", 1);
    CHECK(vb_node_local_rank(&self) == 2, "alone: MPI_LOCALRANKID not taken before SLURM_LOCALID");
    setenv("MPI_LOCALRANKID", "x1", 1); /* not a number: the next variable */
    CHECK(vb_node_local_rank(&self) == 0, "alone: a malformed MPI_LOCALRANKID was taken");
    unsetenv("SLURM_LOCALID");
    CHECK(vb_node_local_rank(&self) == 0, "alone, without usable variables: local rank %d, want 0",
          vb_node_local_rank(&self));
    CHECK(vb_node_local_rank(NULL) == 0, "without a world or variables: local rank %d, want 0",
          vb_node_local_rank(NULL));
    unsetenv("MPI_LOCALRANKID");
    vb_comm_free(&self);
    for (int i = 0; i < 3; i++)
        if (saved[i]) {
            setenv(vars[i], saved[i], 1);
            free(saved[i]);
        }
    end_test();
}

/* The float32 conveniences on a plane with only even collectives give what
 * the native path gives, and profile under the same names and bytes, so
 * ops.csv does not depend on the plane. */
static void test_data_profiled_names(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    if (P == 1) { /* size-1 groups are never profiled */
        end_test();
        return;
    }
    vb_profiler *prof[2] = {vb_prof_create(), vb_prof_create()};
    int counts[64], offs[64];
    vit_token_split(4050, P, counts, offs);
    float *send = calloc(4050, sizeof *send), *recv = calloc(4050, sizeof *recv);
    for (int w = 0; w < 2; w++) {
        vb_comm c = w ? even_only_world() : g_world;
        c.prof = prof[w];
        snprintf(c.group, sizeof c.group, "cp");
        vb_prof_set_enabled(prof[w], true);
        vb_allgatherv_f32(&c, send, recv, counts);
        vb_reduce_scatterv_sum_f32(&c, recv, send, counts);
        vb_allreduce_sum_f32(&c, recv, 100);
        vb_request rq = {0};
        vb_iallreduce_sum_f32(&c, recv, 10, &rq);
        vb_wait(&rq);
        vb_data_broadcast(&c, recv, 3, VB_DTYPE_BF16, 0, NULL);
        vb_data_allgather(&c, send, recv, 2, VB_DTYPE_F16, NULL);
        vb_data_reduce_scatter(&c, recv, send, 2, VB_DTYPE_F32, VB_RED_SUM, NULL);
    }
    char *rows[2] = {vb_prof_csv_rows(prof[0], me), vb_prof_csv_rows(prof[1], me)};
    const struct {
        const char *name;
        long calls;
        double bytes;
    } want[] = {
        {"allgather_cp", 2, 4050.0 * 4 + 2.0 * 2 * P},
        {"reduce_scatter_cp", 2, 4050.0 * 4 + 2.0 * 4 * P},
        {"allreduce_cp", 1, 400},
        {"iallreduce_cp", 1, 40},
        {"broadcast_cp", 1, 6},
    };
    for (int w = 0; w < 2; w++) {
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            char needle[96];
            snprintf(needle, sizeof needle, "%d,,%s,comm,%ld,%.0f,0,", me, want[i].name, want[i].calls,
                     want[i].bytes);
            CHECK(strstr(rows[w], needle) != NULL, "plane %d: no ops row starting %s in:\n%s", w, needle, rows[w]);
        }
    }
    free(rows[0]);
    free(rows[1]);
    vb_prof_destroy(prof[0]);
    vb_prof_destroy(prof[1]);
    free(send);
    free(recv);
    end_test();
}

/* For every layout of this world (each tp x cp dividing it, three orders),
 * communicators built from vb_layout_group must contain exactly the layout's
 * members in group-local rank order: an allgather of world ranks returns the
 * member list, an allreduce sums it. */
static void test_groups_from_layouts(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    assert_true(P <= 64);
    const char *orders[] = {"tp-cp-dp", "dp-cp-tp", "cp-dp-tp"};
    const vb_group_kind kinds[] = {VB_GROUP_TP, VB_GROUP_CP, VB_GROUP_DP, VB_GROUP_CP_DP, VB_GROUP_TP_CP,
                                   VB_GROUP_WORLD};
    int nlayouts = 0;
    for (int tp = 1; tp <= P; tp++) {
        for (int cp = 1; tp * cp <= P; cp++) {
            if (P % (tp * cp)) continue;
            for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
                vb_layout l;
                char err[256];
                if (vb_layout_init(&l, P, tp, cp, orders[o], err, sizeof err) != 0)
                    fail_msg("layout %d x %d %s: %s", tp, cp, orders[o], err);
                nlayouts++;
                for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
                    int members[64];
                    int n = vb_layout_group(&l, me, kinds[k], members);
                    vb_comm c;
                    vb_comm_from_ranks(&g_world, members, n, &c);
                    const char *kn = vb_group_kind_name(kinds[k]);
                    CHECK(c.size == n, "tp %d cp %d %s %s: size %d, want %d", tp, cp, orders[o], kn, c.size, n);
                    CHECK(c.rank == vb_layout_group_rank(&l, me, kinds[k]), "tp %d cp %d %s %s: rank %d, want %d",
                          tp, cp, orders[o], kn, c.rank, vb_layout_group_rank(&l, me, kinds[k]));
                    int counts[64] = {0};
                    for (int i = 0; i < n; i++) counts[i] = 1;
                    float mine = (float)me, got[64];
                    vb_allgatherv_f32(&c, &mine, got, counts);
                    for (int i = 0; i < n; i++)
                        CHECK(got[i] == (float)members[i], "tp %d cp %d %s %s: member %d is %g, want %d", tp, cp,
                              orders[o], kn, i, (double)got[i], members[i]);
                    double s = me, want = 0;
                    for (int i = 0; i < n; i++) want += members[i];
                    vb_allreduce_sum_f64(&c, &s, 1);
                    CHECK(s == want, "tp %d cp %d %s %s: allreduce %g, want %g", tp, cp, orders[o], kn, s, want);
                    vb_comm_free(&c);
                }
            }
        }
    }
    CHECK(nlayouts >= 3, "only %d layouts tried", nlayouts);
    end_test();
}

/* The explicit 4-rank case of the brief: tp 2 x dp 2 in both orders. */
static void test_tp2_dp2_both_orders(void **state) {
    (void)state;
    if (g_world.size != 4) {
        end_test();
        skip();
    }
    const int me = g_world.rank;
    /* tp-cp-dp: tp groups {0,1} {2,3}, dp groups {0,2} {1,3}
     * dp-cp-tp: dp groups {0,1} {2,3}, tp groups {0,2} {1,3} */
    const struct {
        const char *order;
        int tp_peer, dp_peer;
    } cases[2] = {{"tp-cp-dp", me ^ 1, me ^ 2}, {"dp-cp-tp", me ^ 2, me ^ 1}};
    for (int c = 0; c < 2; c++) {
        vb_layout l;
        char err[256];
        assert_int_equal(vb_layout_init(&l, 4, 2, 1, cases[c].order, err, sizeof err), 0);
        int members[4];
        vb_comm tpc, dpc;
        int n = vb_layout_group(&l, me, VB_GROUP_TP, members);
        vb_comm_from_ranks(&g_world, members, n, &tpc);
        n = vb_layout_group(&l, me, VB_GROUP_DP, members);
        vb_comm_from_ranks(&g_world, members, n, &dpc);
        double x = 1000.0 * me;
        vb_allreduce_sum_f64(&tpc, &x, 1);
        CHECK(x == 1000.0 * (me + cases[c].tp_peer), "%s tp allreduce %g", cases[c].order, x);
        x = me;
        vb_allreduce_sum_f64(&dpc, &x, 1);
        CHECK(x == me + cases[c].dp_peer, "%s dp allreduce %g", cases[c].order, x);
        vb_comm_free(&tpc);
        vb_comm_free(&dpc);
    }
    end_test();
}

/* DDP over the world: each rank backpropagates its own 2 samples of a
 * 2 x world batch; after vb_ddp_finish every rank must hold the gradient of
 * the whole batch, which each rank also computes alone (the loss is a mean
 * over samples, so the full gradient is the mean of the local ones). */
static void test_ddp_equals_full_batch(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    const vit_dims dims = {.img_h = 8, .img_w = 16, .patch = 4, .cin = 3, .cout = 2,
                           .dim = 16, .depth = 2, .heads = 2, .ln_eps = 1e-6f};
    const vb_ops *ops = vb_ops_by_name("cpu");
    assert_non_null(ops);
    char err[256];
    vb_ctx *ctx = ops->ctx_create(&(vb_ctx_opts){.act = VB_DTYPE_F32}, err, sizeof err);
    if (!ctx) fail_msg("cpu context: %s", err);
    const int LB = 2, GB = LB * P;
    vit_model *m = vit_create(&dims, NULL, GB, ctx, NULL);
    vit_init_weights(m, 5);
    /* weights off the init so every tensor has a sizable gradient */
    vb_rng rng;
    vb_rng_seed(&rng, 9);
    for (size_t i = 0; i < m->nparams; i++) m->params[i] += (float)(0.1 * (2 * vb_rng_uniform(&rng) - 1));
    vit_params_changed(m);
    const size_t in1 = (size_t)dims.cin * dims.img_h * dims.img_w, out1 = (size_t)dims.cout * dims.img_h * dims.img_w;
    float *inp = ops->alloc(ctx, (size_t)GB * in1 * sizeof(float));
    float *tar = ops->alloc(ctx, (size_t)GB * out1 * sizeof(float));
    tu_fill_uniform(inp, (size_t)GB * in1, -1, 1, 21);
    tu_fill_uniform(tar, (size_t)GB * out1, -1, 1, 22);

    float *full = malloc(m->nparams * sizeof *full), *local = malloc(m->nparams * sizeof *local);
    vit_forward(m, inp, tar, GB);
    vit_backward(m);
    ops->synchronize(ctx);
    memcpy(full, m->grads, m->nparams * sizeof *full);
    vit_forward(m, inp + (size_t)me * LB * in1, tar + (size_t)me * LB * out1, LB);
    vit_backward(m);
    ops->synchronize(ctx);
    memcpy(local, m->grads, m->nparams * sizeof *local);

    double gmax = 0;
    for (size_t i = 0; i < m->nparams; i++) gmax = fmax(gmax, fabs(full[i]));
    /* negative control: without the reduction the local gradient is off */
    if (P > 1) {
        double d = 0;
        for (size_t i = 0; i < m->nparams; i++) d = fmax(d, fabs(local[i] - full[i]));
        CHECK(d / gmax > 1e-3, "a local gradient already equals the full one (%g): the test could not fail", d / gmax);
    }

    const double caps[] = {1e-6, 0.002, 0.01, 25};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        vb_ddp d;
        vb_ddp_init(&d, m->tensors, m->ntensors, m->nparams, m->grads, caps[c], &g_world, 1.0f / (float)P, ctx, NULL);
        vb_ddp_attach(&d, m);
        for (int step = 0; step < 2; step++) {
            vb_ddp_begin_step(&d);
            vit_forward(m, inp + (size_t)me * LB * in1, tar + (size_t)me * LB * out1, LB);
            vit_backward(m);
            vb_ddp_finish(&d);
            ops->synchronize(ctx);
            double worst = 0;
            for (size_t i = 0; i < m->nparams; i++) worst = fmax(worst, fabs(m->grads[i] - full[i]));
            CHECK(worst / gmax <= 1e-5, "cap %g MiB step %d: max |ddp - full| / max|full| = %g", caps[c], step,
                  worst / gmax);
            CHECK(d.stats.allreduce_calls == d.nbuckets, "cap %g: %d allreduces for %d buckets", caps[c],
                  d.stats.allreduce_calls, d.nbuckets);
            CHECK(d.stats.allreduce_bytes == m->nparams * sizeof(float), "cap %g: %zu bytes", caps[c],
                  d.stats.allreduce_bytes);
        }
        if (caps[c] == 1e-6) CHECK(d.nbuckets == m->ntensors, "cap 1e-6: %d buckets", d.nbuckets);
        m->grad_ready = NULL;
        vb_ddp_free(&d);
    }
    free(full);
    free(local);
    ops->free(ctx, inp);
    ops->free(ctx, tar);
    vit_destroy(m);
    ops->ctx_destroy(ctx);
    end_test();
}

/* Gather of bytes to rank 0 and the blocking-time totals. */
static void test_gather_and_totals(void **state) {
    (void)state;
    const int P = g_world.size, me = g_world.rank;
    vb_comm_totals t0, t1;
    vb_comm_totals_get(&t0);
    double mine[2] = {me, 10.0 * me};
    double *all = me == 0 ? calloc((size_t)P * 2, sizeof *all) : NULL;
    vb_gather_bytes(&g_world, mine, sizeof mine, all, 0);
    if (me == 0)
        for (int r = 0; r < P; r++)
            CHECK(all[2 * r] == r && all[2 * r + 1] == 10.0 * r, "gather: rank %d sent %g %g", r, all[2 * r],
                  all[2 * r + 1]);
    free(all);
    vb_barrier(&g_world);
    vb_comm_totals_get(&t1);
    if (P > 1) {
        CHECK(t1.calls == t0.calls + 2, "totals counted %lld calls, want 2", t1.calls - t0.calls);
        CHECK(t1.blocking_s > t0.blocking_s, "totals recorded no blocking time");
    } else {
        CHECK(t1.calls == t0.calls, "a size-1 world reached MPI (%lld calls)", t1.calls - t0.calls);
    }
    end_test();
}

int main(int argc, char **argv) {
    vb_world_init(&argc, &argv, &g_world);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_allreduce),
        cmocka_unit_test(test_data_half_rounding),
        cmocka_unit_test(test_data_even),
        cmocka_unit_test(test_data_broadcast),
        cmocka_unit_test(test_data_nonblocking_out_of_order),
        cmocka_unit_test(test_data_uneven_padded),
        cmocka_unit_test(test_device_buffers_staged),
        cmocka_unit_test(test_host_memory_on_device_plane),
        cmocka_unit_test(test_node_local_rank),
        cmocka_unit_test(test_data_profiled_names),
        cmocka_unit_test(test_allgatherv_uneven),
        cmocka_unit_test(test_reduce_scatterv_uneven),
        cmocka_unit_test(test_iallreduce_wait_test),
        cmocka_unit_test(test_groups_from_layouts),
        cmocka_unit_test(test_tp2_dp2_both_orders),
        cmocka_unit_test(test_ddp_equals_full_batch),
        cmocka_unit_test(test_gather_and_totals),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    vb_world_finalize();
    return failed;
}
