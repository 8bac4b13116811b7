/* test_model.c: the ViT against an independent double-precision reference
 * forward, whole-model finite-difference gradient checks, the tensor table,
 * init statistics, grad_ready ordering, determinism, FLOPs and bad dims.
 *
 * Parameters, gradients, the prediction and the loss live in backend memory:
 * the tests read and write them through copies (tests/test_util.h).
 */
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"
#include "core/run/from_config.h"
#include "core/config/config.h"
#include "core/model/vit.h"
#include "core/prof/profile.h"

/* the tiny model of every test: N = (8/4)*(16/4) = 8 tokens, HD = 8 */
static const vit_dims TINY = {.img_h = 8, .img_w = 16, .patch = 4, .cin = 3, .cout = 2,
                              .dim = 16, .depth = 2, .heads = 2, .ln_eps = 1e-6f};
enum { TB = 2 }; /* batch */

static size_t in_numel(int B) { return (size_t)B * TINY.cin * TINY.img_h * TINY.img_w; }
static size_t out_numel(int B) { return (size_t)B * TINY.cout * TINY.img_h * TINY.img_w; }

static vit_model *tiny_model(int max_batch, uint64_t seed) {
    vit_model *m = vit_create(&TINY, NULL, max_batch, tu_ctx(), NULL);
    vit_init_weights(m, seed);
    tu_randomize_params(m, seed + 1000);
    return m;
}

/* ---------------------------------------------------------------------------
 * double-precision reference forward, written from the PyTorch module's
 * definition (networks/vit.py), independent of the op table. */

static double *ref_param(const vit_model *m, const double *P, const char *fmt, int l) {
    char name[VIT_MAX_NAME];
    snprintf(name, sizeof name, fmt, l);
    int i = vit_find_tensor(m, name);
    if (i < 0) fail_msg("tensor %s missing", name);
    return (double *)P + m->tensors[i].offset;
}

/* y[T,O] = x[T,C] W[O,C]^T + b[O] */
static void ref_linear(double *y, const double *x, const double *W, const double *b, int T, int C, int O) {
    for (int t = 0; t < T; t++)
        for (int o = 0; o < O; o++) {
            double s = b ? b[o] : 0.0;
            for (int c = 0; c < C; c++) s += x[t * C + c] * W[o * C + c];
            y[t * O + o] = s;
        }
}

static void ref_layernorm(double *y, const double *x, const double *w, const double *b, int T, int C) {
    for (int t = 0; t < T; t++) {
        double mean = 0, var = 0;
        for (int c = 0; c < C; c++) mean += x[t * C + c];
        mean /= C;
        for (int c = 0; c < C; c++) var += (x[t * C + c] - mean) * (x[t * C + c] - mean);
        var /= C; /* biased, as torch */
        double rstd = 1.0 / sqrt(var + 1e-6);
        for (int c = 0; c < C; c++) y[t * C + c] = (x[t * C + c] - mean) * rstd * w[c] + b[c];
    }
}

/* pred [B,Cout,H,W] in double from params (float) and input; returns the loss */
static double ref_forward(const vit_model *m, const float *inp, const float *tar, int B, double *pred) {
    const int H = TINY.img_h, W = TINY.img_w, p = TINY.patch, C = TINY.cin, Co = TINY.cout;
    const int D = TINY.dim, NH = TINY.heads, HD = D / NH, D4 = 4 * D, N = (H / p) * (W / p), Wp = W / p;
    double *P = malloc(sizeof(double) * m->nparams);
    float *host = vb_malloc(sizeof(float) * m->nparams);
    tu_get_params(m, host);
    for (size_t i = 0; i < m->nparams; i++) P[i] = host[i];
    vb_free(host);
    double *x = calloc((size_t)N * D, sizeof(double)), *ln = calloc((size_t)N * D, sizeof(double));
    double *q = calloc((size_t)N * D, sizeof(double)), *k = calloc((size_t)N * D, sizeof(double));
    double *v = calloc((size_t)N * D, sizeof(double)), *y = calloc((size_t)N * D, sizeof(double));
    double *o = calloc((size_t)N * D, sizeof(double)), *h = calloc((size_t)N * D4, sizeof(double));
    double *head = calloc((size_t)N * Co * p * p, sizeof(double));
    double loss = 0;
    for (int b = 0; b < B; b++) {
        /* Conv2d(C, D, kernel p, stride p) + bias, flatten(2).transpose(1,2), + pos_embed */
        const double *cw = ref_param(m, P, "patch_embed.proj.weight", 0);
        const double *cb = ref_param(m, P, "patch_embed.proj.bias", 0);
        const double *pos = ref_param(m, P, "pos_embed", 0);
        for (int t = 0; t < N; t++) {
            int ti = t / Wp, tj = t % Wp;
            for (int d = 0; d < D; d++) {
                double s = cb[d];
                for (int c = 0; c < C; c++)
                    for (int i = 0; i < p; i++)
                        for (int j = 0; j < p; j++)
                            s += cw[((d * C + c) * p + i) * p + j] *
                                 inp[(((size_t)b * C + c) * H + ti * p + i) * W + tj * p + j];
                x[t * D + d] = s + pos[t * D + d];
            }
        }
        for (int l = 0; l < TINY.depth; l++) {
            ref_layernorm(ln, x, ref_param(m, P, "blocks.%d.norm1.weight", l),
                          ref_param(m, P, "blocks.%d.norm1.bias", l), N, D);
            ref_linear(q, ln, ref_param(m, P, "blocks.%d.attn.q.weight", l), ref_param(m, P, "blocks.%d.attn.q.bias", l), N, D, D);
            ref_linear(k, ln, ref_param(m, P, "blocks.%d.attn.k.weight", l), ref_param(m, P, "blocks.%d.attn.k.bias", l), N, D, D);
            ref_linear(v, ln, ref_param(m, P, "blocks.%d.attn.v.weight", l), ref_param(m, P, "blocks.%d.attn.v.bias", l), N, D, D);
            for (int hh = 0; hh < NH; hh++)
                for (int t = 0; t < N; t++) {
                    double s[64], mx = -1e300, z = 0;
                    for (int u = 0; u < N; u++) {
                        double dot = 0;
                        for (int e = 0; e < HD; e++) dot += q[t * D + hh * HD + e] * k[u * D + hh * HD + e];
                        s[u] = dot / sqrt((double)HD);
                        if (s[u] > mx) mx = s[u];
                    }
                    for (int u = 0; u < N; u++) z += (s[u] = exp(s[u] - mx));
                    for (int e = 0; e < HD; e++) {
                        double acc = 0;
                        for (int u = 0; u < N; u++) acc += s[u] / z * v[u * D + hh * HD + e];
                        y[t * D + hh * HD + e] = acc;
                    }
                }
            ref_linear(o, y, ref_param(m, P, "blocks.%d.attn.proj.weight", l),
                       ref_param(m, P, "blocks.%d.attn.proj.bias", l), N, D, D);
            for (int i = 0; i < N * D; i++) x[i] += o[i];
            ref_layernorm(ln, x, ref_param(m, P, "blocks.%d.norm2.weight", l),
                          ref_param(m, P, "blocks.%d.norm2.bias", l), N, D);
            ref_linear(h, ln, ref_param(m, P, "blocks.%d.mlp.fc1.weight", l),
                       ref_param(m, P, "blocks.%d.mlp.fc1.bias", l), N, D, D4);
            for (int i = 0; i < N * D4; i++) h[i] = 0.5 * h[i] * (1.0 + erf(h[i] / sqrt(2.0)));
            ref_linear(o, h, ref_param(m, P, "blocks.%d.mlp.fc2.weight", l),
                       ref_param(m, P, "blocks.%d.mlp.fc2.bias", l), N, D4, D);
            for (int i = 0; i < N * D; i++) x[i] += o[i];
        }
        ref_layernorm(ln, x, ref_param(m, P, "norm.weight", 0), ref_param(m, P, "norm.bias", 0), N, D);
        ref_linear(head, ln, ref_param(m, P, "head.weight", 0), NULL, N, D, Co * p * p);
        /* reshape [h, w, p, q, c] -> einsum nhwpqc->nchpwq -> [c, h*p, w*q] */
        double dd = 0, tt = 0;
        for (int t = 0; t < N; t++)
            for (int i = 0; i < p; i++)
                for (int j = 0; j < p; j++)
                    for (int c = 0; c < Co; c++) {
                        size_t at = (((size_t)b * Co + c) * H + (t / Wp) * p + i) * W + (t % Wp) * p + j;
                        pred[at] = head[t * Co * p * p + (i * p + j) * Co + c];
                        dd += (pred[at] - tar[at]) * (pred[at] - tar[at]);
                        tt += (double)tar[at] * tar[at];
                    }
        loss += sqrt(dd) / sqrt(tt) / B;
    }
    free(P), free(x), free(ln), free(q), free(k), free(v), free(y), free(o), free(h), free(head);
    return loss;
}

/* host inputs and their backend copies */
typedef struct {
    float *inp, *tar;       /* host */
    float *inp_d, *tar_d;   /* backend */
} io_pair;

static io_pair make_io(int B, uint64_t seed) {
    io_pair io;
    io.inp = vb_malloc(sizeof(float) * in_numel(B));
    io.tar = vb_malloc(sizeof(float) * out_numel(B));
    tu_fill_uniform(io.inp, in_numel(B), -1, 1, seed);
    tu_fill_uniform(io.tar, out_numel(B), -1, 1, seed + 1);
    io.inp_d = tu_upload(tu_ctx(), io.inp, in_numel(B));
    io.tar_d = tu_upload(tu_ctx(), io.tar, out_numel(B));
    return io;
}

static void free_io(io_pair *io) {
    vb_free(io->inp), vb_free(io->tar);
    tu_ctx()->ops->free(tu_ctx(), io->inp_d);
    tu_ctx()->ops->free(tu_ctx(), io->tar_d);
}

static void test_forward_matches_reference(void **state) {
    (void)state;
    vit_model *m = tiny_model(TB, 7);
    io_pair io = make_io(TB, 11);
    double *pred = malloc(sizeof(double) * out_numel(TB));
    double ref_loss = ref_forward(m, io.inp, io.tar, TB, pred);
    vit_forward(m, io.inp_d, io.tar_d, TB);
    const float loss = tu_get_loss(m);
    float *got = vb_malloc(sizeof(float) * out_numel(TB));
    tu_get_pred(m, got, TB);

    double worst = 0, scale = 0;
    for (size_t i = 0; i < out_numel(TB); i++) scale = fmax(scale, fabs(pred[i]));
    for (size_t i = 0; i < out_numel(TB); i++) worst = fmax(worst, fabs(got[i] - pred[i]) / scale);
    print_message("pred max err / max|pred| = %.3g (max|pred| %.3g), loss %.7f ref %.7f\n", worst, scale,
                  (double)loss, ref_loss);
    assert_true(scale > 0.1); /* the output is not trivially ~0 */
    assert_true(worst < 1e-4);
    assert_true(fabs(loss - ref_loss) < 1e-5 * ref_loss);

    /* no target: prediction only (the same), and the loss is left alone */
    float *pred1 = vb_malloc(sizeof(float) * out_numel(TB));
    float sentinel = -3.0f;
    tu_h2d(m->ctx, m->loss_dev, &sentinel, sizeof sentinel);
    vit_forward(m, io.inp_d, NULL, TB);
    tu_get_pred(m, pred1, TB);
    assert_memory_equal(pred1, got, sizeof(float) * out_numel(TB));
    assert_true(tu_get_loss(m) == sentinel);
    vb_free(pred1), vb_free(got);
    free(pred);
    free_io(&io);
    vit_destroy(m);
}

/* ---------------------------------------------------------------------------
 * gradient checks */

/* The loss in double from the float prediction: finite differences then see
 * no rounding of the loss itself. */
static double loss_at(vit_model *m, const io_pair *io, int B) {
    vit_forward(m, io->inp_d, io->tar_d, B);
    const size_t n = (size_t)m->d.cout * m->d.img_h * m->d.img_w;
    float *pred = vb_malloc(sizeof(float) * n * (size_t)B);
    tu_get_pred(m, pred, B);
    const float *tar = io->tar;
    double total = 0;
    for (int b = 0; b < B; b++) {
        double dd = 0, tt = 0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)pred[b * n + i] - tar[b * n + i];
            dd += d * d;
            tt += (double)tar[b * n + i] * tar[b * n + i];
        }
        total += sqrt(dd) / sqrt(tt);
    }
    vb_free(pred);
    return total / B;
}

/* params[j] = v in backend memory (and the copy the forward reads) */
static void set_param(vit_model *m, size_t j, float v) {
    tu_h2d(m->ctx, m->params + j, &v, sizeof v);
    vit_params_changed(m);
    m->ops->synchronize(m->ctx);
}

/* Central differences for `samples` entries of EVERY tensor (first, last,
 * then random ones) against the analytic gradient of one backward pass.
 * Returns the number of mismatches; *worst gets the largest relative error.
 *
 * In float, eps 1e-2 on O(0.35) weights keeps the truncation error (~eps^2)
 * and the forward's rounding noise (~1e-7/eps) both near 1e-5, well under the
 * gradients (>= 1e-3, the floor), so a 1% tolerance holds with margin and a
 * wrong or missing gradient term (typically O(1) relative) cannot hide.
 * A tensor whose sampled gradients are all below `nonzero` fails: an
 * identically-zero gradient would otherwise pass vacuously. */
static int gradcheck_every_tensor(vit_model *m, const io_pair *io, int B, int samples, double rtol, double floor,
                                  double nonzero, double *worst) {
    vit_forward(m, io->inp_d, io->tar_d, B);
    vit_backward(m);
    float *grads = vb_malloc(sizeof(float) * m->nparams), *params = vb_malloc(sizeof(float) * m->nparams);
    tu_get_grads(m, grads);
    tu_get_params(m, params);
    const float eps = 1e-2f;
    vb_rng r;
    vb_rng_seed(&r, 99);
    int bad = 0;
    *worst = 0;
    for (int ti = 0; ti < m->ntensors; ti++) {
        const vit_tensor *t = &m->tensors[ti];
        double tensor_max_grad = 0;
        for (int s = 0; s < samples; s++) {
            size_t j = s == 0 ? 0 : s == 1 ? t->numel - 1 : (size_t)(vb_rng_u64(&r) % t->numel);
            const size_t at = t->offset + j;
            const float w0 = params[at];
            set_param(m, at, w0 + eps);
            double lp = loss_at(m, io, B);
            set_param(m, at, w0 - eps);
            double lm = loss_at(m, io, B);
            set_param(m, at, w0);
            /* the step actually taken in float, not the nominal eps */
            double numeric = (lp - lm) / ((double)(w0 + eps) - (double)(w0 - eps));
            double analytic = grads[t->offset + j];
            double err = fabs(analytic - numeric) / fmax(fmax(fabs(analytic), fabs(numeric)), floor);
            tensor_max_grad = fmax(tensor_max_grad, fabs(analytic));
            if (err > *worst) *worst = err;
            if (getenv("VB_GRADCHECK_VERBOSE"))
                print_message("%s[%zu]: analytic %.6g numeric %.6g err %.3g\n", t->name, j, analytic, numeric, err);
            if (err > rtol) {
                bad++;
                print_message("MISMATCH %s[%zu]: analytic %.6g numeric %.6g (rel err %.3g)\n", t->name, j,
                              analytic, numeric, err);
            }
        }
        /* every tensor takes part: a gradient that is identically zero would pass vacuously.
         * Except k's bias: q.(k + b_k) shifts every score of a query row by the same
         * q.b_k, which softmax ignores, so its true gradient is exactly zero. */
        if (strstr(t->name, "attn.k.bias")) {
            if (tensor_max_grad > 1e-5) {
                bad++;
                print_message("%s: gradient %g, expected 0 (softmax shift invariance)\n", t->name, tensor_max_grad);
            }
        } else if (tensor_max_grad < nonzero) {
            bad++;
            print_message("%s: sampled gradients all below %g\n", t->name, nonzero);
        }
    }
    vb_free(grads), vb_free(params);
    return bad;
}

static void test_gradcheck_every_tensor(void **state) {
    (void)state;
    vit_model *m = tiny_model(TB, 3);
    io_pair io = make_io(TB, 21);
    double worst = 0;
    int bad = gradcheck_every_tensor(m, &io, TB, 6, 1e-2, 1e-3, 1e-3, &worst);
    print_message("gradcheck: 6 params in each of %d tensors, worst rel err %.3g\n", m->ntensors, worst);
    assert_int_equal(bad, 0);
    free_io(&io);
    vit_destroy(m);
}

/* The same check on the `tiny` config users run (scenarios/vit.yaml: 32x64,
 * 4 channels, patch 4, embed_dim 64, depth 2, 4 heads): 128 tokens exercise
 * the threaded kernel paths the 8-token model above never reaches. */
static void test_gradcheck_tiny_config(void **state) {
    (void)state;
    vb_config c;
    vb_config_defaults(&c);
    char yaml[VB_PATH_MAX];
    vb_snprintf(yaml, sizeof yaml, "%s/scenarios/vit.yaml", tu_source_dir());
    vb_config_load_yaml(&c, yaml, "tiny");
    vit_dims d = vb_config_vit_dims(&c);
    assert_int_equal(d.dim, 64);
    assert_int_equal(d.img_h * d.img_w / (d.patch * d.patch), 128);
    const int B = 2;
    vit_model *m = vit_create(&d, NULL, B, tu_ctx(), NULL);
    vit_init_weights(m, 7);
    tu_randomize_params(m, 1007);
    const size_t nin = (size_t)B * d.cin * d.img_h * d.img_w, nout = (size_t)B * d.cout * d.img_h * d.img_w;
    io_pair io;
    io.inp = vb_malloc(sizeof(float) * nin), io.tar = vb_malloc(sizeof(float) * nout);
    tu_fill_uniform(io.inp, nin, -1, 1, 41);
    tu_fill_uniform(io.tar, nout, -1, 1, 42);
    io.inp_d = tu_upload(tu_ctx(), io.inp, nin);
    io.tar_d = tu_upload(tu_ctx(), io.tar, nout);
    double worst = 0;
    /* 8192 pos_embed entries share the signal: its per-entry gradients are
     * ~1e-4, under the error floor but far from zero */
    int bad = gradcheck_every_tensor(m, &io, B, 4, 2e-2, 1e-3, 1e-6, &worst);
    print_message("gradcheck (config tiny): 4 params in each of %d tensors, worst rel err %.3g\n", m->ntensors,
                  worst);
    assert_int_equal(bad, 0);
    free_io(&io);
    vit_destroy(m);
}

/* A second, aggregate check: the derivative along a random direction over
 * ALL parameters at once equals grad . direction. */
static void test_gradcheck_directional(void **state) {
    (void)state;
    vit_model *m = tiny_model(TB, 5);
    io_pair io = make_io(TB, 31);
    vit_forward(m, io.inp_d, io.tar_d, TB);
    vit_backward(m);
    const size_t n = m->nparams;
    float *w0 = vb_malloc(sizeof(float) * n), *dir = vb_malloc(sizeof(float) * n);
    float *g = vb_malloc(sizeof(float) * n), *w = vb_malloc(sizeof(float) * n);
    tu_get_params(m, w0);
    tu_get_grads(m, g);
    tu_fill_uniform(dir, n, -1, 1, 33);
    double directional = 0;
    for (size_t i = 0; i < n; i++) directional += (double)g[i] * dir[i];

    const float h = 1e-3f;
    for (size_t i = 0; i < n; i++) w[i] = w0[i] + h * dir[i];
    tu_set_params(m, w);
    double lp = loss_at(m, &io, TB);
    for (size_t i = 0; i < n; i++) w[i] = w0[i] - h * dir[i];
    tu_set_params(m, w);
    double lm = loss_at(m, &io, TB);
    double numeric = (lp - lm) / (2.0 * h);
    print_message("directional derivative: analytic %.7g numeric %.7g\n", directional, numeric);
    assert_true(fabs(directional) > 1e-2);
    assert_true(fabs(directional - numeric) < 5e-3 * fabs(numeric));
    vb_free(w0), vb_free(dir), vb_free(g), vb_free(w);
    free_io(&io);
    vit_destroy(m);
}

/* ---------------------------------------------------------------------------
 * tensor table */

static void test_tensor_table(void **state) {
    (void)state;
    vit_model *m = vit_create(&TINY, NULL, 1, tu_ctx(), NULL);
    const int D = 16, N = 8, L = 2, Cin = 3, Cout = 2, p = 4;
    assert_int_equal(m->ntok, N);
    assert_int_equal(m->hd, 8);
    assert_int_equal(m->ntensors, 3 + 16 * L + 3);
    /* state_dict numel: stem + per block (2 LN + 4 attn linears + 2 LN + fc1 + fc2) + norm + head */
    size_t per_block = 2 * D + 4 * (D * D + D) + 2 * D + (4 * D * D + 4 * D) + (4 * D * D + D);
    size_t want = (size_t)D * Cin * p * p + D + N * D + L * per_block + 2 * D + (size_t)Cout * p * p * D;
    assert_int_equal(m->nparams, want);

    size_t off = 0;
    for (int i = 0; i < m->ntensors; i++) {
        const vit_tensor *t = &m->tensors[i];
        size_t numel = 1;
        for (int k = 0; k < t->ndim; k++) numel *= (size_t)t->shape[k];
        assert_int_equal(t->numel, numel);
        assert_int_equal(t->offset, off);
        assert_int_equal(vit_find_tensor(m, t->name), i);
        off += numel;
    }
    assert_int_equal(off, m->nparams);

    static const char *block_names[16] = {
        "norm1.weight", "norm1.bias", "attn.q.weight", "attn.q.bias", "attn.k.weight", "attn.k.bias",
        "attn.v.weight", "attn.v.bias", "attn.proj.weight", "attn.proj.bias", "norm2.weight",
        "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"};
    assert_string_equal(m->tensors[0].name, "patch_embed.proj.weight");
    assert_int_equal(m->tensors[0].ndim, 4);
    assert_int_equal(m->tensors[0].shape[0], D);
    assert_int_equal(m->tensors[0].shape[1], Cin);
    assert_int_equal(m->tensors[0].shape[2], p);
    assert_int_equal(m->tensors[0].shape[3], p);
    assert_string_equal(m->tensors[1].name, "patch_embed.proj.bias");
    assert_string_equal(m->tensors[2].name, "pos_embed");
    assert_int_equal(m->tensors[2].ndim, 3);
    assert_int_equal(m->tensors[2].shape[0], 1);
    assert_int_equal(m->tensors[2].shape[1], N);
    assert_int_equal(m->tensors[2].shape[2], D);
    for (int l = 0; l < L; l++)
        for (int k = 0; k < 16; k++) {
            char name[VIT_MAX_NAME];
            snprintf(name, sizeof name, "blocks.%d.%s", l, block_names[k]);
            assert_string_equal(m->tensors[3 + 16 * l + k].name, name);
        }
    int fc1 = vit_find_tensor(m, "blocks.1.mlp.fc1.weight");
    assert_int_equal(m->tensors[fc1].shape[0], 4 * D);
    assert_int_equal(m->tensors[fc1].shape[1], D);
    int fc2 = vit_find_tensor(m, "blocks.1.mlp.fc2.weight");
    assert_int_equal(m->tensors[fc2].shape[0], D);
    assert_int_equal(m->tensors[fc2].shape[1], 4 * D);
    int e = m->ntensors;
    assert_string_equal(m->tensors[e - 3].name, "norm.weight");
    assert_string_equal(m->tensors[e - 2].name, "norm.bias");
    assert_string_equal(m->tensors[e - 1].name, "head.weight");
    assert_int_equal(m->tensors[e - 1].shape[0], Cout * p * p);
    assert_int_equal(m->tensors[e - 1].shape[1], D);
    assert_int_equal(vit_find_tensor(m, "blocks.2.norm1.weight"), -1);

    /* the per-layer views point at the table's offsets, in params_act and
     * grads; float32 activations read the float32 params themselves */
    assert_ptr_equal(m->params_act, m->params);
    assert_ptr_equal(m->p.blocks[1].fc1_w, vb_act_at(m->ctx, m->params_act, m->tensors[fc1].offset));
    assert_ptr_equal(m->g.blocks[1].fc2_w, m->grads + m->tensors[fc2].offset);
    assert_ptr_equal(m->p.blocks[0].v_b,
                     vb_act_at(m->ctx, m->params_act, m->tensors[vit_find_tensor(m, "blocks.0.attn.v.bias")].offset));
    assert_ptr_equal(m->p.head_w, vb_act_at(m->ctx, m->params_act, m->tensors[e - 1].offset));
    assert_ptr_equal(m->g.pos, m->grads + m->tensors[2].offset);
    assert_ptr_equal(m->p.norm_b, vb_act_at(m->ctx, m->params_act, m->tensors[e - 2].offset));
    vit_destroy(m);
}

/* ---------------------------------------------------------------------------
 * init */

static void test_init_statistics(void **state) {
    (void)state;
    vit_model *m = vit_create(&TINY, NULL, 1, tu_ctx(), NULL);
    vit_init_weights(m, 1234);
    float *host = vb_malloc(sizeof(float) * m->nparams), *again = vb_malloc(sizeof(float) * m->nparams);
    tu_get_params(m, host);
    double s1 = 0, s2 = 0;
    size_t count = 0;
    for (int i = 0; i < m->ntensors; i++) {
        const vit_tensor *t = &m->tensors[i];
        const float *w = host + t->offset;
        bool is_weight = strstr(t->name, "norm") == NULL &&
                         (strstr(t->name, ".weight") != NULL || strcmp(t->name, "pos_embed") == 0);
        bool is_ln_weight = strstr(t->name, "norm") != NULL && strstr(t->name, ".weight") != NULL;
        if (is_weight) {
            assert_int_equal(t->init, VIT_INIT_TRUNC_NORMAL);
            double a = 0, b = 0;
            for (size_t j = 0; j < t->numel; j++) a += w[j], b += (double)w[j] * w[j];
            double sd = sqrt(b / t->numel - (a / t->numel) * (a / t->numel));
            /* >= 128 values per tensor: the sample std is within ~7% one sigma */
            assert_true(sd > 0.015 && sd < 0.025);
            s1 += a, s2 += b, count += t->numel;
        } else if (is_ln_weight) {
            for (size_t j = 0; j < t->numel; j++) assert_true(w[j] == 1.0f);
        } else {
            for (size_t j = 0; j < t->numel; j++) assert_true(w[j] == 0.0f);
        }
    }
    double mean = s1 / count, sd = sqrt(s2 / count - mean * mean);
    print_message("init: %zu trunc-normal values, mean %.5f std %.5f\n", count, mean, sd);
    assert_true(sd > 0.019 && sd < 0.021);
    assert_true(fabs(mean) < 4 * 0.02 / sqrt((double)count));

    /* seeded: same seed same weights, another seed other weights */
    vit_init_weights(m, 1234);
    tu_get_params(m, again);
    assert_memory_equal(host, again, sizeof(float) * m->nparams);
    vit_init_weights(m, 1235);
    tu_get_params(m, again);
    assert_memory_not_equal(host, again, sizeof(float) * m->nparams);
    vb_free(host), vb_free(again);
    vit_destroy(m);
}

/* ---------------------------------------------------------------------------
 * backward bookkeeping */

typedef struct {
    vit_model *m;
    int calls;
    int order[256];
    float *snapshot; /* each tensor's gradient as it was when reported ready */
} ready_log;

static void on_ready(void *ctx, int index) {
    ready_log *log = ctx;
    if (log->calls < 256) log->order[log->calls] = index;
    log->calls++;
    const vit_tensor *t = &log->m->tensors[index];
    tu_d2h(log->m->ctx, log->snapshot + t->offset, log->m->grads + t->offset, sizeof(float) * t->numel);
}

static void test_grad_ready_order_and_zeroing(void **state) {
    (void)state;
    vit_model *m = tiny_model(TB, 9);
    io_pair io = make_io(TB, 41);
    ready_log log = {.m = m, .snapshot = vb_malloc(sizeof(float) * m->nparams)};
    m->grad_ready = on_ready;
    m->grad_ready_ctx = &log;

    vit_forward(m, io.inp_d, io.tar_d, TB);
    vit_backward(m);
    assert_int_equal(log.calls, m->ntensors);
    for (int k = 0; k < m->ntensors; k++) assert_int_equal(log.order[k], m->ntensors - 1 - k);
    /* reported as soon as final: nothing changed any gradient afterwards */
    float *first = vb_malloc(sizeof(float) * m->nparams), *again = vb_malloc(sizeof(float) * m->nparams);
    tu_get_grads(m, first);
    assert_memory_equal(log.snapshot, first, sizeof(float) * m->nparams);

    /* backward zeroes first: a second backward gives the same gradients, not
     * double; and the activation gradients it overwrites carry nothing over */
    log.calls = 0;
    vit_backward(m);
    assert_int_equal(log.calls, m->ntensors);
    tu_get_grads(m, again);
    assert_memory_equal(first, again, sizeof(float) * m->nparams);
    vb_free(first), vb_free(again), vb_free(log.snapshot);
    free_io(&io);
    vit_destroy(m);
}

static void test_forward_deterministic_and_partial_batch(void **state) {
    (void)state;
    /* max_batch 3 run with B = 2 must equal a max_batch 2 model: views are per-sample prefixes */
    vit_model *m3 = tiny_model(3, 17), *m2 = tiny_model(TB, 17);
    float *p3 = vb_malloc(sizeof(float) * m2->nparams), *p2 = vb_malloc(sizeof(float) * m2->nparams);
    tu_get_params(m3, p3);
    tu_get_params(m2, p2);
    assert_memory_equal(p3, p2, sizeof(float) * m2->nparams);
    vb_free(p3), vb_free(p2);
    io_pair io = make_io(TB, 51);
    vit_forward(m2, io.inp_d, io.tar_d, TB);
    float l1 = tu_get_loss(m2);
    float *pred1 = vb_malloc(sizeof(float) * out_numel(TB)), *pred = vb_malloc(sizeof(float) * out_numel(TB));
    tu_get_pred(m2, pred1, TB);
    vit_forward(m2, io.inp_d, io.tar_d, TB);
    float l2 = tu_get_loss(m2);
    assert_true(l1 == l2);
    tu_get_pred(m2, pred, TB);
    assert_memory_equal(pred1, pred, sizeof(float) * out_numel(TB));
    vit_forward(m3, io.inp_d, io.tar_d, TB);
    float l3 = tu_get_loss(m3);
    assert_true(l1 == l3);
    tu_get_pred(m3, pred, TB);
    assert_memory_equal(pred1, pred, sizeof(float) * out_numel(TB));
    /* samples are independent: sample 0 alone gives sample 0's prediction, up
     * to rounding: a BLAS may pick other kernels (another summation order) for
     * M = 1 rows than for M = 2, so bit-equality is not promised. Each float32
     * forward is within ~3e-7 of the double reference relative to max|pred|
     * (test_forward_matches_reference); two of them differ by at most twice
     * that, and 1e-5 of max|pred| leaves a 15x margin while a mixed-up sample
     * (errors of order max|pred|) still fails. */
    vit_forward(m3, io.inp_d, io.tar_d, 1);
    tu_get_pred(m3, pred, 1);
    double maxabs = 0, maxdiff = 0;
    for (size_t i = 0; i < out_numel(1); i++) {
        maxabs = fmax(maxabs, fabs(pred1[i]));
        maxdiff = fmax(maxdiff, fabs((double)pred[i] - pred1[i]));
    }
    assert_true(maxdiff <= 1e-5 * maxabs);
    vb_free(pred1), vb_free(pred);
    free_io(&io);
    vit_destroy(m3), vit_destroy(m2);
}

/* enable_jit off (one op per elementwise step) against on (bias+GELU and
 * residual+LayerNorm fused): the same model up to float32 rounding. The
 * unfused fc1 seeds its GEMM with the bias (as nn.Linear) where the fused one
 * adds it after the product, a rounding apart; the LayerNorms read the same
 * sums. Each forward is within ~3e-7 of the double reference relative to
 * max|pred| (test_forward_matches_reference), so two differ by at most about
 * twice that: 1e-5 leaves a 15x margin, while a missing bias or GELU (errors
 * of order max|pred|) fails. Gradients: relative to each tensor's largest,
 * 1e-4 (backward adds a few roundings per layer). On the CPU the two agree
 * bit for bit (OpenBLAS adds the seeded bias after the product too); a
 * backend whose fused kernels keep the sum in registers would not. The
 * profile shows which ops ran, so the test fails if the switch is ignored. */
static void test_fused_elementwise_matches_unfused(void **state) {
    (void)state;
    vit_model *m = tiny_model(TB, 23);
    io_pair io = make_io(TB, 29);
    const size_t np = m->nparams, no = out_numel(TB);
    float *pred[2], *grad[2], loss[2];
    char dir[256], path[300];
    tu_tmpdir(dir, sizeof dir, "model");
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    for (int fused = 0; fused < 2; fused++) {
        m->fused_elementwise = fused;
        m->prof = vb_prof_create();
        vb_prof_set_enabled(m->prof, true);
        vit_forward(m, io.inp_d, io.tar_d, TB);
        vit_backward(m);
        /* the ops that ran: depth 2 gives 2 GELUs and 4 residual adds, each
         * fused into fc1 and into a LayerNorm, or each an op of its own */
        assert_int_equal(vb_prof_write_csv(m->prof, path, 0), 0);
        char *csv = tu_read_file(path);
        assert_non_null(csv);
        const char *row = strstr(csv, ",residual_add,compute,"), *gelu = strstr(csv, ",gelu_forward,compute,");
        const char *fused_ln = strstr(csv, ",residual_layernorm_forward,compute,");
        if (fused) {
            assert_null(row), assert_null(gelu);
            assert_non_null(fused_ln);
            assert_int_equal(atoi(fused_ln + strlen(",residual_layernorm_forward,compute,")), 4);
        } else {
            assert_null(fused_ln);
            assert_non_null(row), assert_non_null(gelu);
            assert_int_equal(atoi(row + strlen(",residual_add,compute,")), 4);
            assert_int_equal(atoi(gelu + strlen(",gelu_forward,compute,")), 2);
        }
        free(csv);
        vb_prof_destroy(m->prof);
        m->prof = NULL;
        loss[fused] = tu_get_loss(m);
        pred[fused] = vb_malloc(sizeof(float) * no);
        grad[fused] = vb_malloc(sizeof(float) * np);
        tu_get_pred(m, pred[fused], TB);
        tu_get_grads(m, grad[fused]);
    }
    double maxabs = 0, maxdiff = 0;
    for (size_t i = 0; i < no; i++) {
        maxabs = fmax(maxabs, fabs(pred[1][i]));
        maxdiff = fmax(maxdiff, fabs((double)pred[0][i] - pred[1][i]));
    }
    double worst_grad = 0;
    for (int t = 0; t < m->ntensors; t++) {
        const vit_tensor *tt = &m->tensors[t];
        double gmax = 0, gdiff = 0;
        for (size_t i = tt->offset; i < tt->offset + tt->numel; i++) {
            gmax = fmax(gmax, fabs(grad[1][i]));
            gdiff = fmax(gdiff, fabs((double)grad[0][i] - grad[1][i]));
        }
        assert_true(gmax > 0); /* every tensor gets a gradient in both */
        worst_grad = fmax(worst_grad, gdiff / gmax);
    }
    print_message("unfused vs fused: pred %.3g of max|pred|, loss %.9g vs %.9g, grads %.3g of each tensor's max\n",
                  maxdiff / maxabs, (double)loss[0], (double)loss[1], worst_grad);
    assert_true(maxabs > 0.1);
    assert_true(maxdiff <= 1e-5 * maxabs);
    assert_true(fabs((double)loss[0] - loss[1]) <= 1e-5 * loss[1]);
    assert_true(worst_grad <= 1e-4);
    for (int k = 0; k < 2; k++) vb_free(pred[k]), vb_free(grad[k]);
    tu_rm_rf(dir);
    free_io(&io);
    vit_destroy(m);
}

static void test_profiled_ops(void **state) {
    (void)state;
    vb_profiler *prof = vb_prof_create();
    vb_prof_set_enabled(prof, true);
    vit_model *m = vit_create(&TINY, NULL, 1, tu_ctx(), prof);
    vit_init_weights(m, 1);
    io_pair io = make_io(1, 61);
    vit_forward(m, io.inp_d, io.tar_d, 1);
    vit_backward(m);
    char dir[256], path[300];
    tu_tmpdir(dir, sizeof dir, "model");
    snprintf(path, sizeof path, "%s/ops.csv", dir);
    assert_int_equal(vb_prof_write_csv(prof, path, 0), 0);
    char *csv = tu_read_file(path);
    assert_non_null(csv);
    const char *ops[] = {"matmul_forward_qkv", "matmul_forward_proj", "matmul_forward_fc1", "matmul_forward_fc2",
                         "matmul_forward_patch_embed", "matmul_forward_head", "matmul_backward_qkv",
                         "matmul_backward_proj", "matmul_backward_fc1", "matmul_backward_fc2",
                         "matmul_backward_patch_embed", "matmul_backward_head", "attention_forward",
                         "attention_backward", "layernorm_forward", "residual_layernorm_forward",
                         "layernorm_backward", "gelu_backward", "patchify", "unpatchify", "rel_l2_loss_forward",
                         "add_pos_embed_backward"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char key[64];
        snprintf(key, sizeof key, ",%s,", ops[i]);
        if (!strstr(csv, key)) fail_msg("ops.csv has no row for %s", ops[i]);
    }
    /* calls by role: q, k, v per block x 2 blocks; one proj, fc1, fc2 per block; one patch embed and head */
    static const struct {
        const char *name;
        int calls;
    } calls[] = {{"matmul_forward_qkv", 6}, {"matmul_forward_proj", 2}, {"matmul_forward_fc1", 2},
                 {"matmul_forward_fc2", 2}, {"matmul_forward_patch_embed", 1}, {"matmul_forward_head", 1}};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        char key[96];
        snprintf(key, sizeof key, ",%s,compute,", calls[i].name);
        char *row = strstr(csv, key);
        assert_non_null(row);
        assert_int_equal(atoi(row + strlen(key)), calls[i].calls);
    }
    /* the forward's reported FLOPs (GEMMs + attention) are a third of
     * vit_train_flops, which counts forward + backward as 3 x forward */
    double fwd = 0;
    for (const char *line = strchr(csv, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        char name[64];
        long ncalls;
        double bytes, flops;
        if (sscanf(line, "%*d,,%63[^,],compute,%ld,%lf,%lf", name, &ncalls, &bytes, &flops) == 4 &&
            (strncmp(name, "matmul_forward_", 15) == 0 || strcmp(name, "attention_forward") == 0))
            fwd += flops;
    }
    assert_true(fabs(3 * fwd - vit_train_flops(m, 1)) <= 1e-9 * vit_train_flops(m, 1));
    /* the fused forward: one LayerNorm alone (the first LN1), the other
     * 2 x depth fused with the residual add before them; GELU inside fc1 */
    static const struct {
        const char *name;
        int calls;
    } fused[] = {{"layernorm_forward", 1}, {"residual_layernorm_forward", 4}, {"layernorm_backward", 5}};
    for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++) {
        char key[96];
        snprintf(key, sizeof key, ",%s,compute,", fused[i].name);
        char *row = strstr(csv, key);
        assert_non_null(row);
        assert_int_equal(atoi(row + strlen(key)), fused[i].calls);
    }
    if (strstr(csv, ",gelu_forward,") || strstr(csv, ",add,compute,"))
        fail_msg("ops.csv shows an unfused GELU or residual add:\n%s", csv);
    free(csv);
    tu_rm_rf(dir);
    free_io(&io);
    vit_destroy(m);
    vb_prof_destroy(prof);
}

static void test_train_flops(void **state) {
    (void)state;
    vit_model *m = vit_create(&TINY, NULL, 1, tu_ctx(), NULL);
    /* B=2, N=8: GEMM MACs per token = every Linear/conv weight numel
     * (48*16 + 2*(4*16*16 + 2*64*16) + 16*32 = 7424), attention per block and
     * sample 2 heads * 2 matmuls * 8*8*8 = 2048 MACs. Forward FLOPs
     * 2*(2*8*7424 + 2*2*2048) = 253952, training 3x = 761856. */
    assert_true(fabs(vit_train_flops(m, 2) - 761856.0) < 0.5);
    assert_true(fabs(vit_train_flops(m, 4) - 2 * 761856.0) < 0.5);
    vit_destroy(m);
}

/* ---------------------------------------------------------------------------
 * bad dims exit 2 with one line naming the value */

typedef struct {
    vit_dims d;
    const vit_parallel *par;
    int max_batch;
} create_args;

static void create_child(void *p) {
    const create_args *a = p;
    vit_create(&a->d, a->par, a->max_batch, tu_ctx(), NULL);
}

static void expect_create_dies(vit_dims d, const vit_parallel *par, int max_batch, const char *needle) {
    create_args a = {d, par, max_batch};
    tu_expect_exit(2, needle, create_child, &a);
}

static void test_bad_dims_exit_2(void **state) {
    (void)state;
    vit_dims d = TINY;
    d.img_h = 10;
    expect_create_dies(d, NULL, 1, "patch_size");
    d = TINY;
    d.dim = 15;
    expect_create_dies(d, NULL, 1, "num_heads");
    d = TINY;
    d.depth = 0;
    expect_create_dies(d, NULL, 1, "depth");
    d = TINY;
    d.heads = -1;
    expect_create_dies(d, NULL, 1, "num_heads");
    expect_create_dies(TINY, NULL, 0, "batch");
    /* (a model too large for the machine is refused by the run's memory check
     * before vit_create: tests/test_memcheck.c) */
    /* parallel layouts the model cannot split: heads over tp, tokens over cp (N = 8) */
    vit_parallel par = {.tp_size = 4, .tp_rank = 0, .cp_size = 1, .cp_rank = 0};
    expect_create_dies(TINY, &par, 1, "num_heads 2 is not divisible by tensor_parallel 4");
    par = (vit_parallel){.tp_size = 1, .tp_rank = 0, .cp_size = 9, .cp_rank = 0};
    expect_create_dies(TINY, &par, 1, "context_parallel 9");
    par = (vit_parallel){.tp_size = 0, .tp_rank = 0, .cp_size = 1, .cp_rank = 0};
    expect_create_dies(TINY, &par, 1, "tensor_parallel");
    /* and the good dims with an explicit single-rank layout are fine */
    par = (vit_parallel){.tp_size = 1, .tp_rank = 0, .cp_size = 1, .cp_rank = 0};
    vit_model *m = vit_create(&TINY, &par, 1, tu_ctx(), NULL);
    assert_int_equal(m->par.tp_size, 1);
    vit_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_table),
        cmocka_unit_test(test_init_statistics),
        cmocka_unit_test(test_bad_dims_exit_2),
        cmocka_unit_test(test_train_flops),
        cmocka_unit_test(test_forward_matches_reference),
        cmocka_unit_test(test_forward_deterministic_and_partial_batch),
        cmocka_unit_test(test_fused_elementwise_matches_unfused),
        cmocka_unit_test(test_grad_ready_order_and_zeroing),
        cmocka_unit_test(test_gradcheck_every_tensor),
        cmocka_unit_test(test_gradcheck_directional),
        cmocka_unit_test(test_gradcheck_tiny_config),
        cmocka_unit_test(test_profiled_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
