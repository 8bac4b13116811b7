/* test_optim.c: Adam against a double-precision torch.optim.Adam reference,
 * and the learning-rate schedules against their closed forms. */
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"
#include "core/model/optim.h"

/* torch.optim.Adam, weight_decay 0, amsgrad off, in double:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
static void ref_adam(double *p, double *m, double *v, const float *g, size_t n, double lr, int t) {
    const double b1 = 0.9, b2 = 0.95, eps = 1e-8;
    const double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    for (size_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1.0 - b1) * g[i];
        v[i] = b2 * v[i] + (1.0 - b2) * (double)g[i] * g[i];
        p[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
    }
}

/* vb_adam_step writes its step's arguments (lr included) into backend memory
 * before each update; six steps with six learning rates follow the double
 * reference, with params, gradients and moments in backend memory. */
static void test_adam_matches_reference(void **state) {
    (void)state;
    const size_t n = 4099; /* not a multiple of any vector width */
    vb_ctx *ctx = tu_ctx();
    const vb_ops *ops = ctx->ops;
    vb_adam a;
    vb_adam_init(&a, n, ctx);
    assert_true(a.beta1 == 0.9f && a.beta2 == 0.95f && a.eps == 1e-8f);
    assert_int_equal(a.step, 0);
    assert_int_equal(a.n, n);

    float *p_dev = ops->alloc(ctx, n * sizeof(float)), *g_dev = ops->alloc(ctx, n * sizeof(float));
    float *p = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
    float *am = malloc(n * sizeof(float)), *av = malloc(n * sizeof(float));
    double *rp = calloc(n, sizeof(double)), *rm = calloc(n, sizeof(double)), *rv = calloc(n, sizeof(double));
    float *p0 = malloc(n * sizeof(float));
    tu_fill_uniform(p0, n, -1, 1, 1);
    tu_h2d(ctx, p_dev, p0, n * sizeof(float));
    for (size_t i = 0; i < n; i++) rp[i] = p0[i];
    const float lrs[6] = {1e-3f, 5e-4f, 2e-3f, 1e-3f, 1e-4f, 3e-3f};
    for (int t = 1; t <= 6; t++) {
        /* gradients of mixed scale, including tiny ones where eps matters */
        tu_fill_uniform(g, n, -1, 1, 100 + (uint64_t)t);
        for (size_t i = 0; i < n; i += 7) g[i] *= 1e-6f;
        tu_h2d(ctx, g_dev, g, n * sizeof(float));
        /* float32 activations: no separate copy of the params to update */
        vb_adam_step(&a, p_dev, p_dev, g_dev, lrs[t - 1], NULL);
        ref_adam(rp, rm, rv, g, n, lrs[t - 1], t);
        assert_int_equal(a.step, t);
    }
    tu_d2h(ctx, p, p_dev, n * sizeof(float));
    tu_d2h(ctx, am, a.m, n * sizeof(float));
    tu_d2h(ctx, av, a.v, n * sizeof(float));
    double worst_p = 0, worst_m = 0, worst_v = 0, moved = 0;
    for (size_t i = 0; i < n; i++) {
        worst_p = fmax(worst_p, fabs(p[i] - rp[i]));
        /* m is a signed running mean that can cancel to ~0: compare absolutely (|g| <= 1) */
        worst_m = fmax(worst_m, fabs(am[i] - rm[i]));
        worst_v = fmax(worst_v, fabs(av[i] - rv[i]) / fmax(fabs(rv[i]), 1e-12));
        moved = fmax(moved, fabs((double)p[i] - p0[i]));
    }
    print_message("adam: max |dp| %.3g, max |dm| %.3g, max rel dv %.3g\n", worst_p, worst_m, worst_v);
    /* float rounding of params near 1 is ~6e-8 per step; a wrong bias correction or
     * eps placement is off by >= 1e-5 (the 1e-6 gradients make eps matter) */
    assert_true(worst_p < 1e-6);
    assert_true(worst_m < 1e-6);
    assert_true(worst_v < 1e-5);

    /* the update really happened: Adam moves a param by up to ~lr per step */
    assert_true(moved > 3e-3);

    ops->free(ctx, p_dev), ops->free(ctx, g_dev);
    free(p), free(g), free(am), free(av);
    free(rp), free(rm), free(rv), free(p0);
    vb_adam_free(&a);
}

static void test_lr_schedules(void **state) {
    (void)state;
    const float lr = 5e-4f;
    /* cosine without warmup == CosineAnnealingLR(T_max = num_iters) */
    assert_float_equal(vb_lr_at("cosine", lr, 0, 1000, 0), lr, 1e-10);
    assert_float_equal(vb_lr_at("cosine", lr, 0, 1000, 500), lr / 2, 1e-10);
    assert_float_equal(vb_lr_at("cosine", lr, 0, 1000, 1000), 0.0, 1e-10);
    assert_float_equal(vb_lr_at("cosine", lr, 0, 1000, 250), lr * 0.5 * (1 + sqrt(0.5)), 1e-9);
    assert_float_equal(vb_lr_at("cosine", lr, 0, 1000, 750), lr * 0.5 * (1 - sqrt(0.5)), 1e-9);
    /* warmup: min((t+1)/w, cosine) */
    assert_float_equal(vb_lr_at("cosine", lr, 10, 1000, 0), lr * 0.1, 1e-10);
    assert_float_equal(vb_lr_at("cosine", lr, 10, 1000, 4), lr * 0.5, 1e-10);
    assert_float_equal(vb_lr_at("cosine", lr, 10, 1000, 9), lr * 0.5 * (1 + cos(M_PI * 9 / 1000)), 1e-10);
    assert_float_equal(vb_lr_at("cosine", lr, 10, 1000, 500), lr / 2, 1e-10);
    /* long warmup: the ramp wins early, the cosine late */
    assert_float_equal(vb_lr_at("cosine", lr, 800, 1000, 99), lr * 100.0 / 800.0, 1e-10);
    assert_float_equal(vb_lr_at("cosine", lr, 800, 1000, 700), lr * 0.5 * (1 + cos(M_PI * 0.7)), 1e-10);
    /* constant */
    for (int t = 0; t < 2000; t += 333) assert_float_equal(vb_lr_at("constant", lr, 10, 1000, t), lr, 0);
}

static void lr_linear_child(void *ctx) {
    (void)ctx;
    vb_lr_at("linear", 1e-3f, 0, 100, 0);
}

static void test_lr_unknown_schedule_exits_2(void **state) {
    (void)state;
    tu_expect_exit(2, "'linear'", lr_linear_child, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lr_unknown_schedule_exits_2),
        cmocka_unit_test(test_lr_schedules),
        cmocka_unit_test(test_adam_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
