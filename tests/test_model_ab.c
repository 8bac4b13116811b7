/* test_model_ab.c: the pieces of analysis/scaling/scaling_model.h that carry the numbers:
 * the alpha-beta fit, the bucket-overlap simulation, the efficiency formulas,
 * layout checks and the tp / cp / DDP communication of a predicted step.
 * Bad command-line input is covered by tests/test_model_cmd.sh. */
#include "tests/test_util.h"

#include <math.h>
#include <string.h>

#include "analysis/scaling/scaling_model.h"

/* Exact times from chosen alpha and beta come back to 1e-6, for every form
 * and group size, over sizes spanning 4 B .. 256 MiB. */
static void test_fit_recovers_alpha_beta(void **state) {
    (void)state;
    const double alpha[] = {3.5, 25.0, 120.0}, beta[] = {0.8, 12.0, 180.0};
    const int ps[] = {2, 3, 4, 8, 64};
    double bytes[12], t[12];
    for (int c = 0; c < VB_NCOLL; c++)
        for (int ip = 0; ip < 5; ip++)
            for (int k = 0; k < 3; k++) {
                double a, b;
                vb_ab_coeffs(c, ps[ip], &a, &b);
                for (int i = 0; i < 12; i++) {
                    bytes[i] = 4.0 * pow(4.0, i) * 1.5; /* 6 B .. 25 MB */
                    if (i == 11) bytes[i] = 268435456.0;
                    t[i] = a * alpha[k] + b * bytes[i] / (beta[k] * 1e3);
                }
                vb_ab_fit f;
                char err[200];
                assert_int_equal(vb_ab_fit_points(c, ps[ip], bytes, t, 12, &f, err, sizeof err), 0);
                tu_assert_rel(f.alpha_us, alpha[k], 1e-6);
                tu_assert_rel(f.beta_GBps, beta[k], 1e-6);
                assert_true(f.rel_rms < 1e-9);
                assert_int_equal(f.nsizes, 12);
                /* and the fitted form gives back the times */
                tu_assert_rel(vb_ab_seconds(&f, ps[ip], bytes[5]) * 1e6, t[5], 1e-6);
            }
}

static void test_fit_forms(void **state) {
    (void)state;
    double a, b;
    vb_ab_coeffs(VB_COLL_ALLREDUCE, 4, &a, &b);
    tu_assert_rel(a, 6.0, 1e-15), tu_assert_rel(b, 1.5, 1e-15);
    vb_ab_coeffs(VB_COLL_ALLGATHER, 4, &a, &b);
    tu_assert_rel(a, 3.0, 1e-15), tu_assert_rel(b, 0.75, 1e-15);
    vb_ab_coeffs(VB_COLL_REDUCE_SCATTER, 2, &a, &b);
    tu_assert_rel(a, 1.0, 1e-15), tu_assert_rel(b, 0.5, 1e-15);
    vb_ab_coeffs(VB_COLL_BROADCAST, 8, &a, &b);
    tu_assert_rel(a, 1.0, 1e-15), tu_assert_rel(b, 1.0, 1e-15);
    /* a group of one costs nothing */
    vb_ab_fit f = {.coll = VB_COLL_ALLREDUCE, .p = 2, .alpha_us = 10, .beta_GBps = 1};
    assert_true(vb_ab_seconds(&f, 1, 1e6) == 0.0);
    /* 2 ranks, 1 MB at 1 GB/s: 2 x 10 us + 1 x 1e6 B / 1e9 B/s = 0.02 ms + 1 ms = 1.02 ms */
    tu_assert_rel(vb_ab_seconds(&f, 2, 1e6), 1.02e-3, 1e-12);
}

static void test_fit_refuses_bad_points(void **state) {
    (void)state;
    vb_ab_fit f;
    char err[200];
    const double one_size[] = {1024, 1024, 1024}, t3[] = {10, 11, 12};
    assert_int_equal(vb_ab_fit_points(VB_COLL_ALLREDUCE, 2, one_size, t3, 3, &f, err, sizeof err), -1);
    assert_non_null(strstr(err, "1 distinct message size"));
    const double two[] = {8, 1 << 20}, neg[] = {10, -1};
    assert_int_equal(vb_ab_fit_points(VB_COLL_ALLREDUCE, 2, two, neg, 2, &f, err, sizeof err), -1);
    assert_int_equal(vb_ab_fit_points(VB_COLL_ALLREDUCE, 1, two, t3, 2, &f, err, sizeof err), -1);
    /* time falling with size (noise): 1/beta clamped at 0, alpha = the weighted mean */
    const double falling[] = {20, 10};
    assert_int_equal(vb_ab_fit_points(VB_COLL_BROADCAST, 2, two, falling, 2, &f, err, sizeof err), 0);
    assert_true(isinf(f.beta_GBps));
    assert_true(f.alpha_us > 10 && f.alpha_us < 20);
}

static void test_lookup(void **state) {
    (void)state;
    vb_ab_fit fits[4] = {
        {.coll = VB_COLL_ALLREDUCE, .group = "world", .p = 4, .world = 4, .alpha_us = 1, .beta_GBps = 1},
        {.coll = VB_COLL_ALLREDUCE, .group = "dp", .p = 4, .world = 8, .alpha_us = 2, .beta_GBps = 1},
        {.coll = VB_COLL_ALLREDUCE, .group = "tp", .p = 2, .world = 4, .alpha_us = 3, .beta_GBps = 1},
        {.coll = VB_COLL_ALLREDUCE, .group = "dp", .p = 2, .world = 2, .alpha_us = 4, .beta_GBps = 1},
    };
    vb_ab_table t = {.fits = fits, .n = 4};
    bool ex = false;
    assert_ptr_equal(vb_ab_lookup(&t, VB_COLL_ALLREDUCE, "dp", 4, 8, &ex), &fits[1]);   /* group, size, world */
    assert_ptr_equal(vb_ab_lookup(&t, VB_COLL_ALLREDUCE, "cpdp", 4, 4, &ex), &fits[0]); /* size, world */
    assert_ptr_equal(vb_ab_lookup(&t, VB_COLL_ALLREDUCE, "dp", 2, 4, &ex), &fits[2]);   /* the same world first */
    assert_ptr_equal(vb_ab_lookup(&t, VB_COLL_ALLREDUCE, "dp", 2, 16, &ex), &fits[3]);  /* then the same group */
    assert_ptr_equal(vb_ab_lookup(&t, VB_COLL_ALLREDUCE, "dp", 4, 16, &ex), &fits[1]);
    assert_false(ex);
    assert_ptr_equal(vb_ab_lookup(&t, VB_COLL_ALLREDUCE, "dp", 16, 16, &ex), &fits[0]); /* nearest size */
    assert_true(ex);
    ex = false;
    assert_ptr_equal(vb_ab_lookup(&t, VB_COLL_ALLREDUCE, "dp", 3, 0, &ex), &fits[0]); /* tie 2 / 4: the larger */
    assert_true(ex);
    assert_null(vb_ab_lookup(&t, VB_COLL_ALLGATHER, "cp", 2, 4, &ex));
}

/* Three buckets on one channel, backward ending at 10 ms:
 *   bucket 0 ready at 2 ms, takes 3 ms: runs 2..5
 *   bucket 1 ready at 4 ms, takes 4 ms: waits for bucket 0, runs 5..9
 *   bucket 2 ready at 9.5 ms, takes 2 ms: runs 9.5..11.5
 * exposed = 11.5 - 10 = 1.5 ms. With bucket 2 taking 0.4 ms it ends at 9.9,
 * inside backward: nothing exposed. All three ready at the end (no progress
 * during backward): 10 + 3 + 4 + 2 = 19, 9 ms exposed. */
static void test_overlap_hand_worked(void **state) {
    (void)state;
    double ready[3] = {2e-3, 4e-3, 9.5e-3}, dur[3] = {3e-3, 4e-3, 2e-3}, end;
    tu_assert_rel(vb_overlap_exposed(ready, dur, 3, 10e-3, &end), 1.5e-3, 1e-12);
    tu_assert_rel(end, 11.5e-3, 1e-12);
    dur[2] = 0.4e-3;
    assert_true(vb_overlap_exposed(ready, dur, 3, 10e-3, &end) == 0.0);
    tu_assert_rel(end, 9.9e-3, 1e-12);
    double late[3] = {10e-3, 10e-3, 10e-3}, d2[3] = {3e-3, 4e-3, 2e-3};
    tu_assert_rel(vb_overlap_exposed(late, d2, 3, 10e-3, NULL), 9e-3, 1e-12);
    assert_true(vb_overlap_exposed(NULL, NULL, 0, 1.0, &end) == 0.0 && end == 0.0);
}

static void test_efficiency(void **state) {
    (void)state;
    /* weak: 0.1 s alone, 0.125 s at p ranks (each rank its own batch) -> 0.8 */
    tu_assert_rel(vb_eff_weak(0.1, 0.125), 0.8, 1e-15);
    /* strong: 1 s alone, 0.3 s on 4 ranks -> speedup 3.33, efficiency 0.8333 */
    tu_assert_rel(vb_eff_strong(1.0, 0.3, 4), 1.0 / 1.2, 1e-15);
    tu_assert_rel(vb_eff_strong(0.5, 0.5, 1), 1.0, 1e-15);
    assert_true(isnan(vb_eff_weak(0.1, 0)) && isnan(vb_eff_strong(1, 1, 0)));
}

/* embed 8, depth 2, 2 heads, patch 2, 4 x 8 image: 8 tokens */
static const vb_mdims k_dims = {.dim = 8, .depth = 2, .heads = 2, .patch = 2, .img_h = 4, .img_w = 8, .cin = 1,
                                .cout = 1};

static void test_layout_check(void **state) {
    (void)state;
    char err[200];
    vb_mlayout l = {.tp = 2, .cp = 4, .dp = 1, .local_batch = 2, .threads = 1, .node_ranks = 1, .cores = 1};
    assert_int_equal(vb_model_check_layout(&k_dims, &l, err, sizeof err), 0);
    l.tp = 4;
    assert_int_equal(vb_model_check_layout(&k_dims, &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "tensor_parallel 4 does not divide num_heads 2"));
    l.tp = 1, l.cp = 9;
    assert_int_equal(vb_model_check_layout(&k_dims, &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "context_parallel 9 exceeds the 8 tokens"));
}

/* A reference whose ops are all per-token block work or replicated, and
 * exact fits: the prediction's parts by hand. */
static void test_predict_parts(void **state) {
    (void)state;
    vb_mop ops[] = {
        {"matmul_forward_fc1", {0.02}, 2},  {"matmul_backward_fc1", {0.04}, 2}, {"layernorm_forward", {0.01}, 1},
        {"rel_l2_loss_forward", {0.01}, 1}, {"adam_update", {0.01}, 1},
    };
    vb_mref ref = {.d = k_dims, .nref = 1, .batch = {2}, .step_s = {0.1}, .threads = 2, .node_ranks = 1, .cores = 2,
                   .act_bytes = 4, .ops = ops, .nops = 5};
    vb_ab_fit fits[3] = {
        {.coll = VB_COLL_ALLREDUCE, .group = "tp", .p = 2, .alpha_us = 10, .beta_GBps = 1},
        {.coll = VB_COLL_ALLGATHER, .group = "cp", .p = 2, .alpha_us = 10, .beta_GBps = 1},
        {.coll = VB_COLL_REDUCE_SCATTER, .group = "cp", .p = 2, .alpha_us = 10, .beta_GBps = 1},
    };
    vb_ab_table t = {.fits = fits, .n = 3};
    const vb_mctx m = {.ref = &ref, .fits = &t, .mode = VB_DDP_OVERLAP, .compute_scale = 1};
    vb_mpred q;
    /* tp 2 on 2 ranks with 1 thread each on 2 cores: cpu factor (2 / 1) x 1 = 2.
     * fc1 work halves (1/tp) and doubles (threads): 0.02 + 0.04; layernorm
     * and loss stay 0.01 x 2; Adam runs on the local parameters. */
    vb_mlayout l = {.tp = 2, .cp = 1, .dp = 1, .local_batch = 2, .threads = 1, .node_ranks = 2, .cores = 2,
                    .bucket_cap_mb = 25};
    vb_model_predict(&m, &l, NULL, &q);
    tu_assert_rel(q.cpu_factor, 2.0, 1e-15);
    tu_assert_rel(q.forward_s, 0.02 + 0.02 + 0.02, 1e-12);
    tu_assert_rel(q.backward_s, 0.04, 1e-12);
    /* tp: 4 allreduces per block x 2 blocks of B Nl D floats = 2 x 8 x 8 x 4 = 512 B:
     * 2 x 10 us + 1 x 512 B / 1 GB/s = 20.512 us each */
    tu_assert_rel(q.exposed_tp_s, 8 * 20.512e-6, 1e-12);
    assert_true(q.exposed_cp_s == 0 && q.exposed_ddp_s == 0 && q.nbuckets == 0);
    tu_assert_rel(q.step_s, q.compute_s + q.exposed_tp_s, 1e-15);
    tu_assert_rel(q.samples_per_s, 2 / q.step_s, 1e-15);

    /* cp 2: per block an allgather and a reduce-scatter of 2 B N Dl = 2 x 2 x 8 x 8 x 4 = 1024 B
     * (1 x 10 us + 0.5 x 1.024 us = 10.512 us each), plus the head's allgather of
     * B N cout p p x 4 = 2 x 8 x 4 x 4 = 256 B (10.128 us); per-token work halves (4 of 8 tokens) */
    l.tp = 1, l.cp = 2;
    vb_model_predict(&m, &l, NULL, &q);
    tu_assert_rel(q.exposed_cp_s, 2 * 2 * 10.512e-6 + 10.128e-6, 1e-12);
    assert_true(q.exposed_tp_s == 0);
    /* weight gradients are partial over the cp peers: DDP reduces over cp x dp = 2 (the
     * tp fit of 2 ranks stands in for a cpdp one), one bucket, ready only at the end */
    assert_int_equal(q.nbuckets, 1);
    assert_true(q.exposed_ddp_s > 0 && fabs(q.exposed_ddp_s - q.ddp_comm_s) < 1e-15);
}

/* References at batch 4 (0.04 s) and 8 (0.06 s): linear between them,
 * proportional beyond (batch 2: 0.02; 16: 0.12), or constant when asked. */
static void test_batch_interpolation(void **state) {
    (void)state;
    vb_mref r = {.nref = 2, .batch = {4, 8}};
    const double v[2] = {0.04, 0.06};
    tu_assert_rel(vb_mref_at_batch(&r, v, 6, true), 0.05, 1e-15);
    tu_assert_rel(vb_mref_at_batch(&r, v, 8, true), 0.06, 1e-15);
    tu_assert_rel(vb_mref_at_batch(&r, v, 2, true), 0.02, 1e-15);
    tu_assert_rel(vb_mref_at_batch(&r, v, 16, true), 0.12, 1e-15);
    tu_assert_rel(vb_mref_at_batch(&r, v, 16, false), 0.06, 1e-15);
    r.nref = 1;
    tu_assert_rel(vb_mref_at_batch(&r, v, 6, true), 0.06, 1e-15);
    vb_mref three = {.nref = 3, .batch = {2, 4, 8}};
    const double w[3] = {0.03, 0.04, 0.08};
    tu_assert_rel(vb_mref_at_batch(&three, w, 3, true), 0.035, 1e-15);
    tu_assert_rel(vb_mref_at_batch(&three, w, 5, true), 0.05, 1e-15);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fit_recovers_alpha_beta),
        cmocka_unit_test(test_fit_forms),
        cmocka_unit_test(test_fit_refuses_bad_points),
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_overlap_hand_worked),
        cmocka_unit_test(test_efficiency),
        cmocka_unit_test(test_layout_check),
        cmocka_unit_test(test_predict_parts),
        cmocka_unit_test(test_batch_interpolation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
