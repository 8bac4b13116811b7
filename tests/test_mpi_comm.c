/* test_mpi_comm.c: the communicator layer (core/comm.h) and DDP's reduction
 * across real MPI ranks.
 *
 * ctest runs it as one process (MPI singleton: every size-1 short-circuit);
 * tests/test_comm.sh runs it under mpirun -np 3 and -np 4. Values are chosen
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

#include "core/comm.h"
#include "core/common.h"
#include "core/ddp.h"
#include "core/groups.h"
#include "core/model.h"

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
    const int LB = 2, GB = LB * P;
    vit_model *m = vit_create(&dims, NULL, GB, ops, NULL);
    vit_init_weights(m, 5);
    /* weights off the init so every tensor has a sizable gradient */
    vb_rng rng;
    vb_rng_seed(&rng, 9);
    for (size_t i = 0; i < m->nparams; i++) m->params[i] += (float)(0.1 * (2 * vb_rng_uniform(&rng) - 1));
    const size_t in1 = (size_t)dims.cin * dims.img_h * dims.img_w, out1 = (size_t)dims.cout * dims.img_h * dims.img_w;
    float *inp = ops->alloc((size_t)GB * in1 * sizeof(float)), *tar = ops->alloc((size_t)GB * out1 * sizeof(float));
    tu_fill_uniform(inp, (size_t)GB * in1, -1, 1, 21);
    tu_fill_uniform(tar, (size_t)GB * out1, -1, 1, 22);

    float *full = malloc(m->nparams * sizeof *full), *local = malloc(m->nparams * sizeof *local);
    vit_forward(m, inp, tar, GB);
    vit_backward(m);
    memcpy(full, m->grads, m->nparams * sizeof *full);
    vit_forward(m, inp + (size_t)me * LB * in1, tar + (size_t)me * LB * out1, LB);
    vit_backward(m);
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
        vb_ddp_init(&d, m->tensors, m->ntensors, m->nparams, m->grads, caps[c], &g_world, 1.0f / (float)P, ops, NULL);
        vb_ddp_attach(&d, m);
        for (int step = 0; step < 2; step++) {
            vb_ddp_begin_step(&d);
            vit_forward(m, inp + (size_t)me * LB * in1, tar + (size_t)me * LB * out1, LB);
            vit_backward(m);
            vb_ddp_finish(&d);
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
    ops->free(inp);
    ops->free(tar);
    vit_destroy(m);
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
