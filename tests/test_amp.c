/* test_amp.c: dynamic loss scaling (core/model/amp.h) and the per-tensor Adam
 * launches (enable_fused false) on the CPU backend, in float32.
 *
 *  - the ops: grad_unscale_check, loss_scale_update, adam_update's skip
 *  - a scaled float32 training run gives the unscaled run's losses
 *  - a poisoned gradient skips the step: params and moments unchanged bit for
 *    bit, the scale halved, Adam's step count unchanged (the next update is
 *    the one an unpoisoned run without that step makes)
 *  - growth after the (test-sized) growth interval
 *  - fused and per-tensor Adam give the same bits
 * Everything runs through vb_step_train, the step runs and train use.
 */
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/run/trainer.h"
#include "core/model/amp.h"
#include "core/util/common.h"
#include "core/config/config.h"
#include "core/model/vit.h"
#include "core/model/optim.h"

static const vit_dims TINY = {.img_h = 8, .img_w = 16, .patch = 4, .cin = 3, .cout = 2,
                              .dim = 16, .depth = 2, .heads = 2, .ln_eps = 1e-6f};
enum { TB = 2, NBATCH = 6 };

static size_t in_numel(void) { return (size_t)TB * TINY.cin * TINY.img_h * TINY.img_w; }
static size_t out_numel(void) { return (size_t)TB * TINY.cout * TINY.img_h * TINY.img_w; }

/* ---------------------------------------------------------------------------
 * the ops */

static vb_loss_scale_state fresh_state(float scale, int interval) {
    return (vb_loss_scale_state){.scale = scale, .growth_interval = interval, .growth_factor = 2.0f,
                                 .backoff_factor = 0.5f, .last_scale = scale};
}

static void test_unscale_check_op(void **state) {
    (void)state;
    vb_ctx *ctx = tu_ctx();
    const vb_ops *ops = ctx->ops;
    const size_t n = 10007;
    float *g = malloc(n * sizeof *g), *want = malloc(n * sizeof *want);
    tu_fill_uniform(g, n, -65536.0f, 65536.0f, 5);
    for (size_t i = 0; i < n; i++) want[i] = g[i] / 65536.0f;
    vb_loss_scale_state st = fresh_state(65536.0f, 2000);
    ops->grad_unscale_check(ctx, g, n, &st);
    assert_memory_equal(g, want, n * sizeof *g); /* a power of two: exact */
    assert_true(st.found_inf == 0.0f);
    /* one non-finite element anywhere raises the flag; the others are still unscaled */
    const float bad[3] = {INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 3; k++) {
        tu_fill_uniform(g, n, -8.0f, 8.0f, 6 + (uint64_t)k);
        const size_t at = k == 0 ? 0 : k == 1 ? n - 1 : n / 2;
        g[at] = bad[k];
        st = fresh_state(4.0f, 2000);
        ops->grad_unscale_check(ctx, g, n, &st);
        assert_true(st.found_inf == 1.0f);
        assert_true(at == 0 || fabsf(g[0]) <= 2.0f);
    }
    /* the flag of an earlier range stays raised */
    tu_fill_uniform(g, n, -1.0f, 1.0f, 9);
    st = fresh_state(1.0f, 2000);
    st.found_inf = 1.0f;
    ops->grad_unscale_check(ctx, g, n, &st);
    assert_true(st.found_inf == 1.0f);
    free(g);
    free(want);
}

static void test_scale_update_op(void **state) {
    (void)state;
    vb_ctx *ctx = tu_ctx();
    const vb_ops *ops = ctx->ops;
    vb_loss_scale_state st = fresh_state(65536.0f, 3);
    /* three good steps: growth; an inf: backoff, tracker reset, one skip */
    for (int i = 0; i < 2; i++) ops->loss_scale_update(ctx, &st);
    assert_true(st.scale == 65536.0f && st.growth_tracker == 2);
    ops->loss_scale_update(ctx, &st);
    assert_true(st.scale == 131072.0f && st.growth_tracker == 0 && st.last_scale == 65536.0f);
    ops->loss_scale_update(ctx, &st);
    st.found_inf = 1.0f;
    ops->loss_scale_update(ctx, &st);
    assert_true(st.scale == 65536.0f && st.growth_tracker == 0 && st.skipped == 1 && st.found_inf == 0.0f);
    assert_true(st.last_skipped == 1 && st.last_scale == 131072.0f && st.steps == 5);
    ops->loss_scale_update(ctx, &st);
    assert_true(st.last_skipped == 0 && st.growth_tracker == 1);
    /* growth is kept only while the scale stays finite */
    st = fresh_state(3e38f, 1);
    ops->loss_scale_update(ctx, &st);
    assert_true(st.scale == 3e38f && st.growth_tracker == 0);
}

/* adam_update with found_inf set writes nothing; with skips counted, the bias
 * corrections are those of args->step - skipped */
static void test_adam_skip_op(void **state) {
    (void)state;
    vb_ctx *ctx = tu_ctx();
    const vb_ops *ops = ctx->ops;
    const size_t n = 999;
    float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4), *g = malloc(n * 4);
    float *p2 = malloc(n * 4), *m2 = malloc(n * 4), *v2 = malloc(n * 4);
    tu_fill_uniform(p, n, -1, 1, 1), tu_fill_uniform(m, n, -0.1f, 0.1f, 2), tu_fill_uniform(v, n, 0, 0.01f, 3);
    tu_fill_uniform(g, n, -1, 1, 4);
    memcpy(p2, p, n * 4), memcpy(m2, m, n * 4), memcpy(v2, v, n * 4);
    vb_adam_args args = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 1.0f, .step = 5};
    vb_loss_scale_state st = fresh_state(1.0f, 2000);
    st.found_inf = 1.0f;
    st.skipped = 2;
    ops->adam_update(ctx, p, NULL, g, m, v, n, &args, &st);
    assert_memory_equal(p, p2, n * 4);
    assert_memory_equal(m, m2, n * 4);
    assert_memory_equal(v, v2, n * 4);
    /* step 5 with 2 skipped == step 3 without a scaler */
    st.found_inf = 0.0f;
    ops->adam_update(ctx, p, NULL, g, m, v, n, &args, &st);
    args.step = 3;
    ops->adam_update(ctx, p2, NULL, g, m2, v2, n, &args, NULL);
    assert_memory_equal(p, p2, n * 4);
    assert_memory_equal(m, m2, n * 4);
    assert_memory_equal(v, v2, n * 4);
    free(p), free(m), free(v), free(g), free(p2), free(m2), free(v2);
}

/* ---------------------------------------------------------------------------
 * training through vb_step_train */

typedef struct trainer {
    vit_model *m;
    vb_adam opt;
    vb_loss_scaler scaler;
    bool scaling;
    vb_config cfg;
    vb_step step;
    float *inp[NBATCH], *tar[NBATCH]; /* backend copies of fixed batches */
    int poison_step;                  /* vb_step_train iteration whose gradient gets an inf; -1: none */
    int cur;                          /* the iteration being run */
} trainer;

/* the grad_ready hook: once the patch embedding's weight gradient is final
 * (the last tensor backward finishes), poison one element of it */
static void poison_hook(void *ctx, int tensor_index) {
    trainer *t = ctx;
    if (t->cur != t->poison_step || tensor_index != 0) return;
    float inf = INFINITY;
    t->m->ops->memcpy_h2d(t->m->ctx, t->m->grads + t->m->tensors[0].offset + 3, &inf, sizeof inf);
}

static void trainer_init(trainer *t, bool scaling, bool fused, int growth_interval) {
    memset(t, 0, sizeof *t);
    vb_ctx *ctx = tu_ctx();
    vb_config_defaults(&t->cfg);
    snprintf(t->cfg.lr_schedule, sizeof t->cfg.lr_schedule, "constant");
    t->cfg.lr = 1e-3f;
    t->m = vit_create(&TINY, NULL, TB, ctx, NULL);
    vit_init_weights(t->m, 11);
    tu_randomize_params(t->m, 12);
    vb_adam_init(&t->opt, t->m->nparams, ctx);
    if (!fused) vb_adam_per_tensor(&t->opt, t->m);
    t->scaling = scaling;
    if (scaling) {
        vb_loss_scaler_init(&t->scaler, ctx, VB_LOSS_SCALE_INIT, growth_interval, NULL, NULL);
        t->m->dloss = &t->scaler.dev->scale;
        t->opt.loss_scale = t->scaler.dev;
    }
    t->step = (vb_step){.model = t->m, .opt = &t->opt, .cfg = &t->cfg, .global_batch = TB,
                        .scaler = scaling ? &t->scaler : NULL};
    t->poison_step = -1;
    t->m->grad_ready = poison_hook;
    t->m->grad_ready_ctx = t;
    float *h = malloc(in_numel() * sizeof *h);
    for (int b = 0; b < NBATCH; b++) {
        tu_fill_uniform(h, in_numel(), -1, 1, 100 + (uint64_t)b);
        t->inp[b] = tu_upload(ctx, h, in_numel());
        tu_fill_uniform(h, out_numel(), -1, 1, 200 + (uint64_t)b);
        t->tar[b] = tu_upload(ctx, h, out_numel());
    }
    free(h);
}

static void trainer_free(trainer *t) {
    vb_ctx *ctx = tu_ctx();
    for (int b = 0; b < NBATCH; b++) ctx->ops->free(ctx, t->inp[b]), ctx->ops->free(ctx, t->tar[b]);
    if (t->scaling) vb_loss_scaler_free(&t->scaler);
    vb_adam_free(&t->opt);
    vit_destroy(t->m);
}

/* one step on batch b; returns its (unscaled) forward loss */
static float train_on(trainer *t, int iteration, int b) {
    t->cur = iteration;
    vb_step_train(&t->step, iteration, t->inp[b], t->tar[b], TB);
    return tu_get_loss(t->m);
}

typedef struct snapshot {
    float *p, *m, *v;
} snapshot;

static snapshot snap(const trainer *t) {
    const size_t n = t->m->nparams;
    snapshot s = {tu_download(t->m->ctx, t->m->params, n), tu_download(t->m->ctx, t->opt.m, n),
                  tu_download(t->m->ctx, t->opt.v, n)};
    return s;
}

static void snap_free(snapshot *s) { vb_free(s->p), vb_free(s->m), vb_free(s->v); }

static bool snap_equal(const snapshot *a, const snapshot *b, size_t n) {
    return memcmp(a->p, b->p, n * 4) == 0 && memcmp(a->m, b->m, n * 4) == 0 && memcmp(a->v, b->v, n * 4) == 0;
}

static vb_loss_scale_state scaler_state(const trainer *t) {
    vb_loss_scale_state st;
    tu_d2h(t->m->ctx, &st, t->scaler.dev, sizeof st);
    return st;
}

/* loss scaling in float32 changes nothing but the gradients' exponent: the
 * losses match the unscaled run's (here to the bit; 1e-6 is the promise) */
static void test_scaled_training_matches_unscaled(void **state) {
    (void)state;
    trainer a, b;
    trainer_init(&a, false, true, 2000);
    trainer_init(&b, true, true, 2000);
    double worst = 0;
    for (int i = 0; i < 2 * NBATCH; i++) {
        float la = train_on(&a, i, i % NBATCH), lb = train_on(&b, i, i % NBATCH);
        assert_true(isfinite(la) && la > 0);
        worst = fmax(worst, fabs((double)la - lb) / la);
    }
    print_message("scaled vs unscaled float32: max rel loss diff %.3g\n", worst);
    assert_true(worst <= 1e-6);
    snapshot sa = snap(&a), sb = snap(&b);
    assert_true(tu_max_rel_err(sb.p, sa.p, a.m->nparams, 1e-3) <= 1e-6);
    vb_loss_scale_state st = scaler_state(&b);
    assert_true(st.scale == 65536.0f && st.skipped == 0 && st.steps == 2 * NBATCH);
    assert_int_equal(vb_adam_steps_taken(&b.opt), 2 * NBATCH);
    snap_free(&sa), snap_free(&sb);
    trainer_free(&a), trainer_free(&b);
}

/* an inf in one gradient element: the update is skipped whole and the scale
 * halves; the next update is the one a run that never saw that batch makes */
static void test_inf_skips_step(void **state) {
    (void)state;
    trainer a, c;
    trainer_init(&a, true, false, 2000);
    trainer_init(&c, false, false, 2000);
    a.poison_step = 1;
    train_on(&a, 0, 0);
    snapshot before = snap(&a);
    float l1 = train_on(&a, 1, 1);
    assert_true(isfinite(l1)); /* the forward was fine: only the gradient was poisoned */
    snapshot after = snap(&a);
    assert_true(snap_equal(&before, &after, a.m->nparams)); /* params and moments untouched, bitwise */
    vb_loss_scale_state st = scaler_state(&a);
    assert_true(st.scale == 32768.0f);
    assert_int_equal(st.skipped, 1);
    assert_int_equal(st.last_skipped, 1);
    assert_true(st.last_scale == 65536.0f);
    assert_int_equal(st.growth_tracker, 0);
    assert_true(st.found_inf == 0.0f);
    assert_int_equal(a.opt.step, 2);
    assert_int_equal(vb_adam_steps_taken(&a.opt), 1);
    /* the third step (batch 2) == the second update of an unscaled run on batches 0, 2 */
    train_on(&a, 2, 2);
    train_on(&c, 0, 0);
    train_on(&c, 1, 2);
    snapshot sa = snap(&a), sc = snap(&c);
    const size_t n = a.m->nparams;
    double ep = tu_max_rel_err(sa.p, sc.p, n, 1e-3), em = tu_max_rel_err(sa.m, sc.m, n, 1e-6);
    print_message("after a skipped step: params rel diff %.3g, m rel diff %.3g (bitwise %s)\n", ep, em,
                  snap_equal(&sa, &sc, n) ? "yes" : "no");
    assert_true(ep <= 1e-6 && em <= 1e-5);
    st = scaler_state(&a);
    assert_true(st.scale == 32768.0f && st.last_skipped == 0 && st.growth_tracker == 1);
    assert_int_equal(vb_adam_steps_taken(&a.opt), 2);
    snap_free(&before), snap_free(&after), snap_free(&sa), snap_free(&sc);
    trainer_free(&a), trainer_free(&c);
}

/* growth_interval good steps in a row double the scale; a skip resets the count */
static void test_growth_interval(void **state) {
    (void)state;
    trainer t;
    trainer_init(&t, true, true, 3);
    const float want[8] = {65536, 65536, 131072, 131072, 131072, 65536, 65536, 65536};
    t.poison_step = 5;
    for (int i = 0; i < 8; i++) {
        train_on(&t, i, i % NBATCH);
        vb_loss_scale_state st = scaler_state(&t);
        if (st.scale != want[i]) fail_msg("after step %d: scale %g, want %g", i, (double)st.scale, (double)want[i]);
    }
    /* three good steps after the skip (6, 7, 8): doubled again */
    train_on(&t, 8, 2);
    assert_true(scaler_state(&t).scale == 131072.0f);
    assert_int_equal(scaler_state(&t).skipped, 1);
    trainer_free(&t);
}

/* enable_fused true (one launch) and false (a launch per tensor): the same
 * bits, with and without loss scaling */
static void test_fused_matches_per_tensor(void **state) {
    (void)state;
    for (int scaling = 0; scaling < 2; scaling++) {
        trainer f, u;
        trainer_init(&f, scaling, true, 2000);
        trainer_init(&u, scaling, false, 2000);
        assert_int_equal(f.opt.nseg, 0);
        assert_int_equal(u.opt.nseg, u.m->ntensors);
        for (int i = 0; i < 5; i++) {
            float lf = train_on(&f, i, i % NBATCH), lu = train_on(&u, i, i % NBATCH);
            assert_memory_equal(&lf, &lu, sizeof lf);
        }
        snapshot sf = snap(&f), su = snap(&u);
        assert_true(snap_equal(&sf, &su, f.m->nparams));
        snap_free(&sf), snap_free(&su);
        trainer_free(&f), trainer_free(&u);
    }
}

static void bad_segments_child(void *ctx) {
    (void)ctx;
    vb_adam a;
    vb_adam_init(&a, 10, tu_ctx());
    const size_t off[2] = {0, 5}, num[2] = {4, 5};
    vb_adam_set_segments(&a, 2, off, num);
}

static void test_segments_must_tile(void **state) {
    (void)state;
    tu_expect_exit(1, "segment 1 starts at 5", bad_segments_child, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unscale_check_op),
        cmocka_unit_test(test_scale_update_op),
        cmocka_unit_test(test_adam_skip_op),
        cmocka_unit_test(test_scaled_training_matches_unscaled),
        cmocka_unit_test(test_inf_skips_step),
        cmocka_unit_test(test_growth_interval),
        cmocka_unit_test(test_fused_matches_per_tensor),
        cmocka_unit_test(test_segments_must_tile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
