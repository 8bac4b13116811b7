/* test_ddp.c: DDP bucket assignment and bucket readiness (core/model/ddp.h), one
 * process. The multi-rank reduction itself is tested by test_mpi_comm under
 * mpirun (tests/test_comm.sh) and end to end by tests/test_dist.sh. */
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"
#include "core/model/ddp.h"
#include "core/model/vit.h"

#define MIB (1024.0 * 1024.0)

/* A tensor table like the model's: contiguous, forward order. */
static int make_tensors(vit_tensor *t, const size_t *numel, int n) {
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        memset(&t[i], 0, sizeof t[i]);
        snprintf(t[i].name, sizeof t[i].name, "t%d", i);
        t[i].ndim = 1;
        t[i].shape[0] = (int)numel[i];
        t[i].offset = off;
        t[i].numel = numel[i];
        off += numel[i];
    }
    return (int)off;
}

/* The invariants every plan must satisfy, for any cap:
 *  - bucket k's tensors are a contiguous index range, buckets in reverse order
 *    (bucket 0 ends with the last tensor, each next bucket ends just before
 *    the previous one starts);
 *  - slices tile [0, nparams) exactly once;
 *  - a bucket over the cap holds exactly one tensor; no bucket could have
 *    taken the next tensor without passing the cap (greedy). */
static void check_plan(const vit_tensor *t, int n, size_t nparams, size_t cap, const vb_ddp_bucket *b, int nb,
                       const int *bucket_of) {
    assert_true(nb >= 1 && nb <= n);
    int expect_last = n - 1;
    size_t covered = 0;
    for (int k = 0; k < nb; k++) {
        assert_int_equal(b[k].last, expect_last);
        assert_true(b[k].first <= b[k].last);
        expect_last = b[k].first - 1;
        size_t bytes = 0;
        for (int i = b[k].first; i <= b[k].last; i++) {
            assert_int_equal(bucket_of[i], k);
            bytes += t[i].numel * sizeof(float);
        }
        assert_int_equal(b[k].numel * sizeof(float), bytes);
        assert_int_equal(b[k].offset, t[b[k].first].offset);
        if (bytes > cap) assert_int_equal(b[k].first, b[k].last);
        /* greedy: the next tensor in reverse order (first - 1) did not fit */
        if (k + 1 < nb) assert_true(bytes + t[b[k].first - 1].numel * sizeof(float) > cap);
        covered += b[k].numel;
    }
    assert_int_equal(expect_last, -1); /* every tensor is in a bucket */
    /* slices, walked from the buffer start: bucket nb-1 first */
    size_t pos = 0;
    for (int k = nb - 1; k >= 0; k--) {
        assert_int_equal(b[k].offset, pos);
        pos += b[k].numel;
    }
    assert_int_equal(pos, nparams);
    assert_int_equal(covered, nparams);
}

static void test_cap_bytes(void **state) {
    (void)state;
    assert_int_equal(vb_ddp_cap_bytes(25.0), (size_t)25 * 1024 * 1024); /* PyTorch's MiB */
    assert_int_equal(vb_ddp_cap_bytes(0.05), (size_t)(0.05 * MIB));
    assert_int_equal(vb_ddp_cap_bytes(1e-12), sizeof(float)); /* never below one float */
}

/* A hand-checked plan: sizes in floats, cap 100 floats (400 bytes). */
static void test_plan_by_hand(void **state) {
    (void)state;
    /*                    0   1   2    3   4   5   6 */
    const size_t n[7] = {30, 50, 250, 60, 40, 10, 100};
    vit_tensor t[7];
    size_t np = (size_t)make_tensors(t, n, 7);
    vb_ddp_bucket b[7];
    int of[7];
    int nb = vb_ddp_plan(t, 7, np, 400, b, of);
    /* reverse: [6] = 100 fills the cap exactly; [5,4] = 50, +60 would be 110 > 100
     * -> [5,4]; [3] = 60 alone as 250 would pass; [2] = 250 > cap alone; [1,0] = 80 */
    assert_int_equal(nb, 5);
    const int first[5] = {6, 4, 3, 2, 0}, last[5] = {6, 5, 3, 2, 1};
    for (int k = 0; k < 5; k++) {
        assert_int_equal(b[k].first, first[k]);
        assert_int_equal(b[k].last, last[k]);
    }
    assert_int_equal(b[0].offset, 440);
    assert_int_equal(b[0].numel, 100);
    assert_int_equal(b[4].offset, 0);
    assert_int_equal(b[4].numel, 80);
    check_plan(t, 7, np, 400, b, nb, of);
}

/* Caps from one float to more than everything, on a model-like table. */
static void test_plan_invariants(void **state) {
    (void)state;
    enum { N = 40 };
    size_t n[N];
    vb_rng r;
    vb_rng_seed(&r, 11);
    for (int i = 0; i < N; i++) n[i] = 1 + (size_t)(vb_rng_uniform(&r) * (i % 5 == 0 ? 5000 : 300));
    vit_tensor t[N];
    size_t np = (size_t)make_tensors(t, n, N);
    const size_t caps[] = {4, 64, 400, 1200, 4096, 20000, np * 4, np * 8};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        vb_ddp_bucket b[N];
        int of[N];
        int nb = vb_ddp_plan(t, N, np, caps[c], b, of);
        check_plan(t, N, np, caps[c], b, nb, of);
        if (caps[c] >= np * 4) assert_int_equal(nb, 1);  /* everything fits one bucket */
        if (caps[c] == 4) assert_int_equal(nb, N);        /* every tensor over the cap: one each */
    }
}

/* A tensor bigger than the cap sits alone even between small ones. */
static void test_big_tensor_alone(void **state) {
    (void)state;
    const size_t n[5] = {1, 1, 1000, 1, 1};
    vit_tensor t[5];
    size_t np = (size_t)make_tensors(t, n, 5);
    vb_ddp_bucket b[5];
    int of[5];
    int nb = vb_ddp_plan(t, 5, np, 64, b, of);
    assert_int_equal(nb, 3);
    assert_int_equal(of[2], 1);
    assert_int_equal(b[1].first, 2);
    assert_int_equal(b[1].last, 2);
    assert_int_equal(of[3], 0);
    assert_int_equal(of[4], 0);
    assert_int_equal(of[0], 2);
    assert_int_equal(of[1], 2);
    check_plan(t, 5, np, 64, b, nb, of);
}

/* A bucket starts only when ALL its tensors are ready, and buckets start in
 * bucket order even when a later one completes first. */
static void test_ready_fires_when_complete(void **state) {
    (void)state;
    const size_t n[6] = {10, 10, 10, 10, 10, 10};
    vit_tensor t[6];
    size_t np = (size_t)make_tensors(t, n, 6);
    float *g = calloc(np, sizeof *g);
    vb_ddp d;
    /* 20 floats per bucket: [4,5] [2,3] [0,1] */
    vb_ddp_init(&d, t, 6, np, g, 80.0 / MIB, NULL, 1.0f, NULL, NULL);
    assert_int_equal(d.nbuckets, 3);
    for (int step = 0; step < 2; step++) { /* state resets between steps */
        vb_ddp_begin_step(&d);
        vb_ddp_grad_ready(&d, 5);
        assert_false(d.buckets[0].launched); /* tensor 4 still missing */
        vb_ddp_grad_ready(&d, 4);
        assert_true(d.buckets[0].launched);
        assert_false(d.buckets[1].launched);
        /* out of order: bucket 2 complete before bucket 1 -> waits for it */
        vb_ddp_grad_ready(&d, 1);
        vb_ddp_grad_ready(&d, 0);
        assert_true(d.buckets[2].ready);
        assert_false(d.buckets[2].launched);
        vb_ddp_grad_ready(&d, 3);
        assert_false(d.buckets[1].launched);
        assert_int_equal(d.stats.allreduce_calls, 1);
        vb_ddp_grad_ready(&d, 2);
        assert_true(d.buckets[1].launched);
        assert_true(d.buckets[2].launched);
        assert_int_equal(d.stats.allreduce_calls, 3);
        assert_int_equal(d.stats.allreduce_bytes, np * sizeof(float));
        vb_ddp_finish(&d);
    }
    vb_ddp_free(&d);
    free(g);
}

/* finish starts buckets whose hooks never fired, and scales the gradients. */
static void test_finish_launches_rest_and_scales(void **state) {
    (void)state;
    const size_t n[4] = {3, 3, 3, 3};
    vit_tensor t[4];
    size_t np = (size_t)make_tensors(t, n, 4);
    float g[12];
    for (int i = 0; i < 12; i++) g[i] = (float)(i + 1);
    vb_ddp d;
    vb_ddp_init(&d, t, 4, np, g, 12.0 / MIB, NULL, 0.25f, NULL, NULL); /* one tensor per bucket */
    assert_int_equal(d.nbuckets, 4);
    vb_ddp_begin_step(&d);
    vb_ddp_grad_ready(&d, 3);
    assert_int_equal(d.stats.allreduce_calls, 1);
    vb_ddp_finish(&d);
    assert_int_equal(d.stats.allreduce_calls, 4);
    for (int k = 0; k < 4; k++) assert_true(d.buckets[k].launched);
    for (int i = 0; i < 12; i++) assert_true(g[i] == 0.25f * (float)(i + 1));
    vb_ddp_free(&d);
}

/* The real model's backward drives the hook: by the end of backward every
 * bucket has started (nothing left for finish), for several caps. */
static void test_model_backward_launches_all(void **state) {
    (void)state;
    const vit_dims dims = {.img_h = 8, .img_w = 16, .patch = 4, .cin = 3, .cout = 2,
                           .dim = 16, .depth = 2, .heads = 2, .ln_eps = 1e-6f};
    vb_ctx *ctx = tu_ctx();
    vit_model *m = vit_create(&dims, NULL, 2, ctx, NULL);
    vit_init_weights(m, 3);
    size_t nin = (size_t)2 * dims.cin * dims.img_h * dims.img_w, nout = (size_t)2 * dims.cout * dims.img_h * dims.img_w;
    float *inp_h = vb_malloc(nin * sizeof(float)), *tar_h = vb_malloc(nout * sizeof(float));
    tu_fill_uniform(inp_h, nin, -1, 1, 1);
    tu_fill_uniform(tar_h, nout, -1, 1, 2);
    float *inp = tu_upload(ctx, inp_h, nin), *tar = tu_upload(ctx, tar_h, nout);
    vb_free(inp_h), vb_free(tar_h);
    const double caps[] = {1e-6, 0.001, 0.004, 25};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        vb_ddp d;
        vb_ddp_init(&d, m->tensors, m->ntensors, m->nparams, m->grads, caps[c], NULL, 1.0f, ctx, NULL);
        vb_ddp_attach(&d, m);
        vb_ddp_begin_step(&d);
        vit_forward(m, inp, tar, 2);
        vit_backward(m);
        assert_int_equal(d.next_launch, d.nbuckets);
        assert_int_equal(d.stats.allreduce_calls, d.nbuckets);
        assert_int_equal(d.stats.allreduce_bytes, m->nparams * sizeof(float));
        if (caps[c] == 1e-6) assert_int_equal(d.nbuckets, m->ntensors);
        if (caps[c] == 25) assert_int_equal(d.nbuckets, 1);
        vb_ddp_finish(&d);
        m->grad_ready = NULL;
        vb_ddp_free(&d);
    }
    ctx->ops->free(ctx, inp);
    ctx->ops->free(ctx, tar);
    vit_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap_bytes),
        cmocka_unit_test(test_plan_by_hand),
        cmocka_unit_test(test_plan_invariants),
        cmocka_unit_test(test_big_tensor_alone),
        cmocka_unit_test(test_ready_fires_when_complete),
        cmocka_unit_test(test_finish_launches_rest_and_scales),
        cmocka_unit_test(test_model_backward_launches_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
