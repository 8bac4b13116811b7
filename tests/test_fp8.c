/* test_fp8.c: amp_mode fp8's numerics (kernels/fp8.h), the CPU ops that
 * apply them and delayed scaling's per-tensor state (core/model/fp8_recipe.h),
 * against hand-computed values:
 *  - E4M3 / E5M2 rounding: exact values, ties to even (normal and
 *    subnormal), the largest finite value, saturation, the smallest
 *    subnormal and underflow to (signed) zero, NaN
 *  - quantise-dequantise with a scale, and the op's amax
 *  - the scale update over a few steps: history max vs most_recent, the
 *    window of amax_history_len steps, amax 0 or NaN keeps the scale, margin,
 *    and a step quantising with the scale computed before it
 *  - a tiny ViT under fp8: the amaxes it records and the scales they give
 */
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/fp8_recipe.h"
#include "core/model/vit.h"
#include "kernels/fp8.h"

static float p2(int e) { return ldexpf(1.0f, e); }

/* exact float equality that also tells -0 from +0 */
static void assert_same(float got, float want) {
    if (got != want || !signbit(got) != !signbit(want))
        fail_msg("got %a (%g), want %a (%g)", (double)got, (double)got, (double)want, (double)want);
}

static void test_e4m3_exact(void **state) {
    (void)state;
    /* every one is an E4M3 value: returned unchanged */
    const float v[] = {1.0f, 0.5f, 1.125f, 1.875f, 240.0f, 256.0f, 448.0f, 0.1015625f /* 13 * 2^-7 */,
                       p2(-6) /* smallest normal */, p2(-9) /* smallest subnormal */, 3 * p2(-9),
                       7 * p2(-9) /* largest subnormal */, 0.0f};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        assert_same(vb_fp8_round(v[i], VB_FP8_E4M3), v[i]);
        assert_same(vb_fp8_round(-v[i], VB_FP8_E4M3), -v[i]);
    }
    assert_true(vb_fp8_max(VB_FP8_E4M3) == 448.0f);
}

static void test_e4m3_rounding(void **state) {
    (void)state;
    const vb_fp8_format F = VB_FP8_E4M3;
    /* 3 mantissa bits: [1, 2) in steps of 1/8 */
    assert_same(vb_fp8_round(1.0625f, F), 1.0f);       /* tie 1 | 1.125: even is 1 */
    assert_same(vb_fp8_round(1.1875f, F), 1.25f);      /* tie 1.125 | 1.25: even is 1.25 */
    assert_same(vb_fp8_round(1.0626f, F), 1.125f);     /* just past the tie */
    assert_same(vb_fp8_round(1.06f, F), 1.0f);
    assert_same(vb_fp8_round(-1.1875f, F), -1.25f);
    assert_same(vb_fp8_round(15.5f, F), 16.0f);        /* tie 15 | 16 across a binade: even is 16 */
    assert_same(vb_fp8_round(0.3f, F), 0.3125f);       /* [0.25, 0.5) in steps of 2^-5 */
    assert_same(vb_fp8_round(100.0f, F), 96.0f);       /* [64, 128) in steps of 8: 100 -> 96 */
    assert_same(vb_fp8_round(436.0f, F), 448.0f);      /* tie 416 | 448: even (1.110b) is 448 */
    assert_same(vb_fp8_round(420.0f, F), 416.0f);
    /* subnormals: steps of 2^-9 below 2^-6 */
    assert_same(vb_fp8_round(p2(-10), F), 0.0f);       /* tie 0 | 2^-9: even is 0 */
    assert_same(vb_fp8_round(3 * p2(-10), F), p2(-8)); /* tie 2^-9 | 2^-8: even is 2^-8 */
    assert_same(vb_fp8_round(5 * p2(-10), F), p2(-8)); /* tie 2^-8 | 3 2^-9: even is 2^-8 */
    assert_same(vb_fp8_round(1.01f * p2(-10), F), p2(-9));
    assert_same(vb_fp8_round(0.99f * p2(-10), F), 0.0f);
    assert_same(vb_fp8_round(-0.99f * p2(-10), F), -0.0f); /* underflow keeps the sign */
    assert_same(vb_fp8_round(15.5f * p2(-10), F), p2(-6)); /* 7.75 2^-9 up to the smallest normal */
    assert_same(vb_fp8_round(1e-30f, F), 0.0f);
}

static void test_e4m3_saturation(void **state) {
    (void)state;
    const vb_fp8_format F = VB_FP8_E4M3;
    /* beyond 448 the format has only NaN: saturate (rounding alone would
     * give 480 or 512, the next grid points) */
    assert_same(vb_fp8_round(449.0f, F), 448.0f);
    assert_same(vb_fp8_round(464.0f, F), 448.0f);
    assert_same(vb_fp8_round(500.0f, F), 448.0f);
    assert_same(vb_fp8_round(1e30f, F), 448.0f);
    assert_same(vb_fp8_round(-600.0f, F), -448.0f);
    assert_same(vb_fp8_round(INFINITY, F), 448.0f);
    assert_same(vb_fp8_round(-INFINITY, F), -448.0f);
    assert_true(isnan(vb_fp8_round(NAN, F)));
    assert_true(isnan(vb_fp8_round(-NAN, F)));
    assert_same(vb_fp8_round(-0.0f, F), -0.0f);
}

static void test_e5m2(void **state) {
    (void)state;
    const vb_fp8_format F = VB_FP8_E5M2;
    assert_true(vb_fp8_max(F) == 57344.0f);
    const float v[] = {1.0f, 1.25f, 1.5f, 1.75f, 57344.0f, 49152.0f, p2(-14), p2(-16), 3 * p2(-16)};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        assert_same(vb_fp8_round(v[i], F), v[i]);
        assert_same(vb_fp8_round(-v[i], F), -v[i]);
    }
    /* 2 mantissa bits: [1, 2) in steps of 1/4 */
    assert_same(vb_fp8_round(1.125f, F), 1.0f);        /* tie 1 | 1.25: even is 1 */
    assert_same(vb_fp8_round(1.375f, F), 1.5f);        /* tie 1.25 | 1.5: even is 1.5 */
    assert_same(vb_fp8_round(1.126f, F), 1.25f);
    assert_same(vb_fp8_round(1.1f, F), 1.0f);          /* E4M3 would keep 1.125 */
    assert_same(vb_fp8_round(p2(-17), F), 0.0f);       /* tie 0 | smallest subnormal */
    assert_same(vb_fp8_round(3 * p2(-17), F), p2(-15)); /* tie 2^-16 | 2^-15: even */
    assert_same(vb_fp8_round(1.01f * p2(-17), F), p2(-16));
    assert_same(vb_fp8_round(-0.5f * p2(-17), F), -0.0f);
    /* saturation instead of infinity */
    assert_same(vb_fp8_round(60000.0f, F), 57344.0f);
    assert_same(vb_fp8_round(61440.0f, F), 57344.0f);
    assert_same(vb_fp8_round(1e20f, F), 57344.0f);
    assert_same(vb_fp8_round(-INFINITY, F), -57344.0f);
    assert_true(isnan(vb_fp8_round(NAN, F)));
}

static void test_qdq_and_op(void **state) {
    (void)state;
    /* x * scale rounded, then / scale */
    assert_same(vb_fp8_qdq(3.0f, 0.5f, VB_FP8_E4M3), 3.0f);
    assert_same(vb_fp8_qdq(0.3f, 1.0f, VB_FP8_E4M3), 0.3125f);
    assert_same(vb_fp8_qdq(0.3f, 112.0f, VB_FP8_E4M3), 32.0f / 112.0f); /* 33.6 -> 32 */
    assert_same(vb_fp8_qdq(10.0f, 100.0f, VB_FP8_E4M3), 448.0f / 100.0f); /* saturates after scaling */
    vb_ctx *ctx = tu_ctx();
    const vb_ops *ops = ctx->ops;
    enum { N = 40000 }; /* past VB_CPU_PAR_MIN: the threaded loop */
    float *x = malloc(N * sizeof *x), *out = malloc(N * sizeof *out);
    tu_fill_uniform(x, N, -3.0f, 3.0f, 11);
    x[123] = -7.5f;
    float want_amax = 0.0f;
    for (int i = 0; i < N; i++) want_amax = fmaxf(want_amax, fabsf(x[i]));
    const float scale = 448.0f / 7.5f;
    float amax = -1.0f;
    ops->fp8_quantize(ctx, out, x, N, VB_FP8_E4M3, &scale, &amax);
    ops->synchronize(ctx);
    assert_true(amax == want_amax && amax == 7.5f);
    for (int i = 0; i < N; i++) assert_same(out[i], vb_fp8_qdq(x[i], scale, VB_FP8_E4M3));
    assert_same(out[123], -7.5f); /* the amax maps to 448 exactly */
    /* in place, no amax; a NaN makes the amax NaN */
    memcpy(out, x, N * sizeof *x);
    ops->fp8_quantize(ctx, out, out, N, VB_FP8_E5M2, &scale, NULL);
    for (int i = 0; i < N; i++) assert_same(out[i], vb_fp8_qdq(x[i], scale, VB_FP8_E5M2));
    x[N - 1] = NAN;
    ops->fp8_quantize(ctx, out, x, N, VB_FP8_E5M2, &scale, &amax);
    assert_true(isnan(amax) && isnan(out[N - 1]));
    free(x);
    free(out);
}

/* One step of a one-GEMM state: records amax a[t] for each of its three
 * tensors (a two-element tensor {a, small}), then the update. Returns the
 * quantised second element of tensor 0 (it shows the scale the step used). */
static float one_step(vit_fp8 *f, const float a[3], float small) {
    float out[2] = {0, 0};
    for (int t = 0; t < 3; t++) {
        const float x[2] = {a[t], small};
        float o[2];
        vit_fp8_quantize(f, t, o, x, 2, 1);
        if (t == 0) memcpy(out, o, sizeof out);
    }
    vit_fp8_step_end(f);
    f->ops->synchronize(f->ctx);
    return out[1];
}

static void test_scale_update(void **state) {
    (void)state;
    vb_ctx *ctx = tu_ctx();
    const vb_ops *ops = ctx->ops;
    vit_fp8_recipe rmax = {.amax_history_len = 3, .amax_compute_algo = VB_FP8_AMAX_MAX, .margin = 0};
    vit_fp8_recipe rnew = rmax;
    rnew.amax_compute_algo = VB_FP8_AMAX_MOST_RECENT;
    vit_fp8 *fm = vit_fp8_create(ops, ctx, 1, &rmax, 4, 4, 4);
    vit_fp8 *fr = vit_fp8_create(ops, ctx, 1, &rnew, 4, 4, 4);
    assert_int_equal(fm->ntensors, 3);
    assert_int_equal(vit_fp8_format(fm, vit_fp8_weight(fm, 0)), VB_FP8_E4M3);
    assert_int_equal(vit_fp8_format(fm, vit_fp8_grad(fm, 0)), VB_FP8_E5M2);
    for (int t = 0; t < 3; t++) assert_true(fm->scale[t] == 1.0f); /* TE's initial scale */

    /* step 0 quantises with scale 1 although its own amax is 4: delayed */
    const float a0[3] = {4.0f, 2.0f, 8.0f};
    assert_same(one_step(fm, a0, 0.3f), 0.3125f);
    assert_same(one_step(fr, a0, 0.3f), 0.3125f);
    assert_true(fm->scale[0] == 112.0f && fm->scale[1] == 224.0f && fm->scale[2] == 7168.0f); /* 57344 / 8 */
    assert_true(fr->scale[0] == 112.0f && fr->scale[2] == 7168.0f);
    /* step 1 uses scale 112: 0.3 * 112 = 33.6 -> 32 */
    const float a1[3] = {2.0f, 2.0f, 4.0f};
    assert_same(one_step(fm, a1, 0.3f), 32.0f / 112.0f);
    assert_same(one_step(fr, a1, 0.3f), 32.0f / 112.0f);
    assert_true(fm->scale[0] == 112.0f && fm->scale[2] == 7168.0f); /* max of {4, 2}, {8, 4} */
    assert_true(fr->scale[0] == 224.0f && fr->scale[2] == 14336.0f); /* the newest: 2, 4 */
    const float a2[3] = {1.0f, 2.0f, 4.0f};
    one_step(fm, a2, 0.0f);
    one_step(fr, a2, 0.0f);
    assert_true(fm->scale[0] == 112.0f); /* {4, 2, 1} */
    assert_true(fr->scale[0] == 448.0f);
    /* step 3: step 0's amax leaves the window of 3 */
    const float a3[3] = {0.5f, 2.0f, 4.0f};
    one_step(fm, a3, 0.0f);
    one_step(fr, a3, 0.0f);
    assert_true(fm->scale[0] == 224.0f && fm->scale[2] == 14336.0f); /* {2, 1, 0.5}, {4, 4, 4} */
    assert_true(fr->scale[0] == 896.0f);
    /* amax 0: most_recent keeps its scale (max still sees the older ones) */
    const float z[3] = {0.0f, 0.0f, 0.0f};
    one_step(fr, z, 0.0f);
    assert_true(fr->scale[0] == 896.0f && fr->scale[2] == 14336.0f);
    /* a NaN amax keeps the scale under either algo, and max keeps it while
     * the NaN is in the window */
    const float an[3] = {NAN, 1.0f, 1.0f};
    one_step(fm, an, 0.0f);
    one_step(fr, an, 0.0f);
    assert_true(fm->scale[0] == 224.0f && fr->scale[0] == 896.0f);
    assert_true(fm->scale[1] == 224.0f); /* the weight: {2, 2, 1} */
    assert_true(fr->scale[1] == 448.0f);
    assert_int_equal(fm->steps, 5);
    vit_fp8_destroy(fm);
    vit_fp8_destroy(fr);

    /* margin 2: a quarter of the scale; an empty history keeps 1 */
    vit_fp8_recipe rm = {.amax_history_len = 1, .amax_compute_algo = VB_FP8_AMAX_MAX, .margin = 2};
    vit_fp8 *f = vit_fp8_create(ops, ctx, 1, &rm, 4, 4, 4);
    const float a[3] = {4.0f, 0.0f, 16.0f};
    one_step(f, a, 0.0f);
    assert_true(f->scale[0] == 28.0f);    /* 448 / 4 / 4 */
    assert_true(f->scale[1] == 1.0f);     /* amax 0 */
    assert_true(f->scale[2] == 896.0f);   /* 57344 / 16 / 4 */
    /* history length 1: max is the newest */
    const float b[3] = {1.0f, 7.0f, 64.0f};
    one_step(f, b, 0.0f);
    assert_true(f->scale[0] == 112.0f && f->scale[1] == 16.0f && f->scale[2] == 224.0f);
    vit_fp8_destroy(f);
    /* a subnormal amax: the largest float, not infinity */
    assert_true(vb_fp8_scale_from_amax(1e-39f, 1.0f, VB_FP8_E4M3, 0) == 3.40282347e38f);
    assert_true(vb_fp8_scale_from_amax(INFINITY, 5.0f, VB_FP8_E4M3, 0) == 5.0f);
    assert_true(vb_fp8_scale_from_amax(0.0f, 5.0f, VB_FP8_E5M2, 0) == 5.0f);
    assert_int_equal(vit_fp8_parse_algo("max"), VB_FP8_AMAX_MAX);
    assert_int_equal(vit_fp8_parse_algo("most_recent"), VB_FP8_AMAX_MOST_RECENT);
    assert_int_equal(vit_fp8_parse_algo("mean"), -1);
}

/* A tiny ViT under fp8: a step records every GEMM's amaxes and derives the
 * scales the next step uses from them. */
static void test_model_step(void **state) {
    (void)state;
    const vit_dims d = {.img_h = 8, .img_w = 16, .patch = 4, .cin = 3, .cout = 2,
                        .dim = 16, .depth = 2, .heads = 2, .ln_eps = 1e-6f};
    enum { B = 2 };
    vb_ctx *ctx = tu_ctx();
    vit_model *m = vit_create(&d, NULL, B, ctx, NULL);
    vit_init_weights(m, 3);
    const vit_fp8_recipe r = {.amax_history_len = 1024, .amax_compute_algo = VB_FP8_AMAX_MAX, .margin = 0};
    vit_fp8_enable(m, &r);
    vit_fp8 *f = m->fp8;
    assert_int_equal(f->ngemm, 2 + 6 * d.depth);
    /* the memory check's figure is what was allocated */
    assert_int_equal(vit_fp8_footprint(&d, NULL, B, 1024),
                     sizeof(float) * (f->xq_n + f->wq_n + f->gq_n + (size_t)f->ntensors * (1 + 1024)));
    assert_int_equal(f->xq_n, (size_t)B * 8 * 4 * d.dim); /* fc2's input: B x 8 tokens x 4 dim */
    const size_t nin = (size_t)B * d.cin * d.img_h * d.img_w, nout = (size_t)B * d.cout * d.img_h * d.img_w;
    float *inp = malloc(nin * sizeof *inp), *tar = malloc(nout * sizeof *tar);
    tu_fill_uniform(inp, nin, -2.0f, 2.0f, 1);
    tu_fill_uniform(tar, nout, -1.0f, 1.0f, 2);
    vit_forward(m, inp, tar, B);
    vit_backward(m);
    ctx->ops->synchronize(ctx);
    /* the head's weight amax is max |head.weight|, and its scale 448 / it */
    const vit_tensor *hw = &m->tensors[vit_find_tensor(m, "head.weight")];
    const float amax_w = vb_fp8_amax(m->params + hw->offset, hw->numel);
    const int tw = vit_fp8_weight(f, VIT_FP8_HEAD);
    assert_true(f->history[tw] == amax_w);
    assert_true(f->scale[tw] == 448.0f / amax_w);
    /* the patch embedding's input is the image (a permutation of it) */
    assert_true(f->history[vit_fp8_input(f, VIT_FP8_PATCH)] == vb_fp8_amax(inp, nin));
    /* every tensor saw a nonzero amax and got a finite scale other than 1 */
    for (int t = 0; t < f->ntensors; t++) {
        assert_true(f->history[t] > 0.0f && isfinite(f->history[t]));
        assert_true(isfinite(f->scale[t]) && f->scale[t] != 1.0f);
    }
    assert_int_equal(f->newest, 1);
    float loss;
    ctx->ops->memcpy_d2h(ctx, &loss, m->loss_dev, sizeof loss);
    ctx->ops->synchronize(ctx);
    assert_true(isfinite(loss) && loss > 0.0f);
    vit_destroy(m);
    free(inp);
    free(tar);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e4m3_exact),
        cmocka_unit_test(test_e4m3_rounding),
        cmocka_unit_test(test_e4m3_saturation),
        cmocka_unit_test(test_e5m2),
        cmocka_unit_test(test_qdq_and_op),
        cmocka_unit_test(test_scale_update),
        cmocka_unit_test(test_model_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
