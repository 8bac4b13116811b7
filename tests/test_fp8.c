/* test_fp8.c: amp_mode fp8's numerics (kernels/fp8.h), the CPU ops that
 * apply them and delayed scaling's per-tensor state (core/model/fp8_recipe.h),
 * against hand-computed values:
 *  - E4M3 / E5M2 rounding: exact values, ties to even (normal and
 *    subnormal), the largest finite value, saturation, the smallest
 *    subnormal and underflow to (signed) zero, NaN
 *  - quantise-dequantise with a scale, and the amax it records (a NaN
 *    recorded as +inf, merged by max into the slot)
 *  - the CPU's FP8 GEMM ops against float64 products of the quantised
 *    operands, with the amaxes recorded and the bias gradient unquantised
 *  - the scale update over a few steps: history max vs most_recent, the
 *    window of amax_history_len steps, amax 0 or non-finite keeps the
 *    scale, margin, the history's roll, and a step quantising with the
 *    scale computed before it
 *  - a tiny ViT under fp8: the amaxes it records and the scales they give
 */
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/fp8_recipe.h"
#include "core/model/vit.h"
#include "kernels/cpu/cpu_kernels.h"
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
    enum { N = 40000 }; /* past VB_CPU_PAR_MIN: the threaded loop */
    float *x = malloc(N * sizeof *x), *out = malloc(N * sizeof *out);
    tu_fill_uniform(x, N, -3.0f, 3.0f, 11);
    x[123] = -7.5f;
    float want_amax = 0.0f;
    for (int i = 0; i < N; i++) want_amax = fmaxf(want_amax, fabsf(x[i]));
    const float scale = 448.0f / 7.5f;
    float amax = -1.0f;
    cpu_fp8_quantize(ctx, out, x, N, VB_FP8_E4M3, &scale, &amax);
    assert_true(amax == want_amax && amax == 7.5f);
    for (int i = 0; i < N; i++) assert_same(out[i], vb_fp8_qdq(x[i], scale, VB_FP8_E4M3));
    assert_same(out[123], -7.5f); /* the amax maps to 448 exactly */
    /* in place, no amax; a NaN makes the amax NaN */
    memcpy(out, x, N * sizeof *x);
    cpu_fp8_quantize(ctx, out, out, N, VB_FP8_E5M2, &scale, NULL);
    for (int i = 0; i < N; i++) assert_same(out[i], vb_fp8_qdq(x[i], scale, VB_FP8_E5M2));
    x[N - 1] = NAN;
    cpu_fp8_quantize(ctx, out, x, N, VB_FP8_E5M2, &scale, &amax);
    assert_true(isinf(amax) && amax > 0.0f && isnan(out[N - 1])); /* recorded as +inf */
    /* the slot keeps the larger of what it held and the tensor's */
    amax = 100.0f;
    cpu_fp8_quantize(ctx, out, x, 8, VB_FP8_E4M3, &scale, &amax);
    assert_true(amax == 100.0f);
    free(x);
    free(out);
}

/* The CPU's FP8 GEMMs: the products of the quantised operands (float64
 * here, float32 in the op: the tolerance is float32 rounding over a sum of
 * C or N terms), the amaxes each call records, the bias gradient from the
 * unquantised output gradient. */
static void test_fp8_gemm_ops(void **state) {
    (void)state;
    vb_ctx *ctx = tu_ctx();
    const vb_ops *ops = ctx->ops;
    enum { N = 24, C = 16, OC = 8 };
    float x[N * C], w[OC * C], b[OC], dout[N * OC], out[N * OC], dinp[N * C], dw[OC * C], db[OC];
    tu_fill_uniform(x, N * C, -3.0f, 3.0f, 1);
    tu_fill_uniform(w, OC * C, -0.5f, 0.5f, 2);
    tu_fill_uniform(b, OC, -1.0f, 1.0f, 3);
    tu_fill_uniform(dout, N * OC, -1e-3f, 1e-3f, 4);
    const float sx = 448.0f / 4.0f, sw = 448.0f / 0.25f, sg = 57344.0f / 1e-3f; /* sw saturates |w| > 0.25 */
    float amax[3] = {0.0f, 0.0f, 0.0f};
    float *scratch = malloc(ops->fp8_scratch_bytes(ctx, N, C, OC));
    const vb_fp8_gemm g = {.scale_x = &sx, .scale_w = &sw, .scale_g = &sg, .amax_x = &amax[0],
                           .amax_w = &amax[1], .amax_g = &amax[2], .scratch = scratch};
    ops->fp8_matmul_forward(ctx, out, x, w, b, N, C, OC, &g);
    assert_true(amax[0] == vb_fp8_amax(x, N * C) && amax[1] == vb_fp8_amax(w, OC * C) && amax[2] == 0.0f);
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double r = b[o], mag = fabs(b[o]);
            for (int k = 0; k < C; k++) {
                const double p = (double)vb_fp8_qdq(x[i * C + k], sx, VB_FP8_E4M3) *
                                 vb_fp8_qdq(w[o * C + k], sw, VB_FP8_E4M3);
                r += p, mag += fabs(p);
            }
            assert_true(fabs(out[i * OC + o] - r) <= 1e-6 * mag);
        }
    for (int i = 0; i < N * C; i++) dinp[i] = 1.0f; /* accumulated onto */
    memset(dw, 0, sizeof dw);
    memset(db, 0, sizeof db);
    ops->fp8_matmul_backward(ctx, dinp, dw, db, dout, x, w, N, C, OC, 1, &g);
    assert_true(amax[2] == vb_fp8_amax(dout, N * OC));
    for (int o = 0; o < OC; o++) {
        double r = 0, mag = 0;
        for (int i = 0; i < N; i++) r += dout[i * OC + o], mag += fabs(dout[i * OC + o]);
        assert_true(fabs(db[o] - r) <= 1e-6 * mag); /* the unquantised gradient */
        for (int k = 0; k < C; k++) {
            double rw = 0, mw = 0;
            for (int i = 0; i < N; i++) {
                const double p = (double)vb_fp8_qdq(dout[i * OC + o], sg, VB_FP8_E5M2) *
                                 vb_fp8_qdq(x[i * C + k], sx, VB_FP8_E4M3);
                rw += p, mw += fabs(p);
            }
            assert_true(fabs(dw[o * C + k] - rw) <= 1e-6 * mw);
        }
    }
    for (int i = 0; i < N; i++)
        for (int k = 0; k < C; k++) {
            double r = 1.0, mag = 1.0;
            for (int o = 0; o < OC; o++) {
                const double p = (double)vb_fp8_qdq(dout[i * OC + o], sg, VB_FP8_E5M2) *
                                 vb_fp8_qdq(w[o * C + k], sw, VB_FP8_E4M3);
                r += p, mag += fabs(p);
            }
            assert_true(fabs(dinp[i * C + k] - r) <= 1e-6 * mag);
        }
    /* a quantised operand is not the operand: the E5M2 gradient is off the
     * float32 one by up to 2^-3 relative, so the check above can fail */
    int differs = 0;
    for (int i = 0; i < N * OC; i++) differs += vb_fp8_qdq(dout[i], sg, VB_FP8_E5M2) != dout[i];
    assert_true(differs > N * OC / 2);
    free(scratch);
}

/* One step of a one-GEMM state: tensor t's amax a[t] is recorded into its
 * slot (what the GEMM ops do), then the update. Returns the E4M3 value of
 * `small` under tensor 0's scale before the update: what the step used. */
static float one_step(vit_fp8 *f, const float a[3], float small) {
    const float used = vb_fp8_qdq(small, f->scale[0], vit_fp8_format(f, 0));
    for (int t = 0; t < 3; t++) {
        float *slot = vit_fp8_amax_slot(f, t);
        *slot = vb_fp8_amax_merge(*slot, a[t]);
    }
    vit_fp8_step_end(f);
    f->ops->synchronize(f->ctx);
    return used;
}

static void test_scale_update(void **state) {
    (void)state;
    vb_ctx *ctx = tu_ctx();
    const vb_ops *ops = ctx->ops;
    vit_fp8_recipe rmax = {.amax_history_len = 3, .amax_compute_algo = VB_FP8_AMAX_MAX, .margin = 0};
    vit_fp8_recipe rnew = rmax;
    rnew.amax_compute_algo = VB_FP8_AMAX_MOST_RECENT;
    vit_fp8 *fm = vit_fp8_create(ops, ctx, 1, &rmax, 64);
    vit_fp8 *fr = vit_fp8_create(ops, ctx, 1, &rnew, 64);
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
    /* the history rolled: row 1 the step before, row 2 the one before it, row 0 zeroed */
    assert_true(fm->history[0] == 0.0f && fm->history[3] == 2.0f && fm->history[6] == 4.0f);
    assert_true(fm->history[5] == 4.0f && fm->history[8] == 8.0f);
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
    vit_fp8 *f = vit_fp8_create(ops, ctx, 1, &rm, 64);
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
    vit_fp8_enable(m, &r, NULL, NULL);
    vit_fp8 *f = m->fp8;
    assert_int_equal(f->ngemm, 2 + 6 * d.depth);
    /* the memory check's figure is what was allocated */
    assert_int_equal(vit_fp8_footprint(&d, NULL, B, 1024, ctx),
                     f->scratch_bytes + sizeof(float) * (size_t)f->ntensors * (1 + 1024));
    /* fc1 and fc2 need the most: B x 8 tokens rows, dim 16 and 64 columns,
     * their input, weight and output gradient */
    assert_int_equal(f->scratch_bytes, sizeof(float) * (16 * 16 + 64 * 16 + 16 * 64));
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
    const float *row = f->history + f->ntensors; /* the step just taken, after the roll */
    assert_true(row[tw] == amax_w);
    assert_true(f->scale[tw] == 448.0f / amax_w);
    /* the patch embedding's input is the image (a permutation of it) */
    assert_true(row[vit_fp8_input(f, VIT_FP8_PATCH)] == vb_fp8_amax(inp, nin));
    /* every tensor saw a nonzero amax and got a finite scale other than 1 */
    for (int t = 0; t < f->ntensors; t++) {
        assert_true(row[t] > 0.0f && isfinite(row[t]));
        assert_true(f->history[t] == 0.0f); /* row 0 is the next step's */
        assert_true(isfinite(f->scale[t]) && f->scale[t] != 1.0f);
    }
    assert_int_equal(f->steps, 1);
    /* a frozen forward (validation) quantises but records nothing */
    vit_fp8_freeze(f, 1);
    vit_forward(m, inp, tar, B);
    ctx->ops->synchronize(ctx);
    for (int t = 0; t < f->ntensors; t++) assert_true(f->history[t] == 0.0f);
    vit_fp8_freeze(f, 0);
    vit_forward(m, inp, tar, B);
    ctx->ops->synchronize(ctx);
    assert_true(f->history[tw] == amax_w);
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
        cmocka_unit_test(test_fp8_gemm_ops),
        cmocka_unit_test(test_scale_update),
        cmocka_unit_test(test_model_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
