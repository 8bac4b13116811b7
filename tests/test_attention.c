/* test_attention.c: the CPU flash-style attention against a double reference.
 *
 * The reference materialises the scores in double: lse, the softmax, out, and
 * the backward formulas (dP = dO V^T, Di = rowsum(P o dP), dS = P o (dP - Di),
 * dQ = dS K s, dK = dS^T Q s, dV = P^T dO with s = 1/sqrt(HD)). A full
 * finite-difference pass over the double forward checks those formulas
 * independently, and one pass over the float kernel itself checks the
 * gradients end to end.
 *
 * Tolerances are float rounding scaled by what the result is made of: an
 * element is compared with eps * C * (1 + A) * env, where env is the same sum
 * taken over absolute values (e.g. sum_j P_ij |v_jd| for out) and A the
 * largest |score| term sum_d |q_d k_d| / sqrt(HD) of the (batch, head): an
 * absolute error of eps*A in a score is a relative error of eps*A in its
 * probability. Comparisons are written !(err <= tol), so NaN fails them.
 *
 * Each case runs at 1, 2 and 3 OpenMP threads (3 > B*NH for the small cases,
 * so the backward's key ranges and dq partials are exercised), with the
 * outputs and the workspace filled with NaN first (everything must be
 * overwritten, nothing read from the workspace's old contents) and a guard
 * area after the workspace that must stay intact. Backward runs twice per
 * thread count and must give identical bits.
 */
#include "tests/test_util.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "kernels/ops.h"
#include "kernels/cpu/cpu_kernels.h"

static vb_ctx cpu_ctx = {.act = VB_DTYPE_F32};

// Largest error seen, in units of the tolerance's eps * (1 + A) * env (reported
// at the end so that the margin under the tolerance constant is visible).
static double worst_out, worst_lse, worst_grad;

// Tolerance constant (multiples of float eps, see above).
#define TOL_C 8.0

// ---------------------------------------------------------------------------
// helpers

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fill(float *x, size_t n, float lo, float hi, uint64_t seed) {
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * (float)((double)(rng_next(&s) >> 11) * 0x1.0p-53);
}

static float *fbuf(size_t n) {
    float *p = aligned_alloc(64, ((n ? n : 1) * sizeof(float) + 63) & ~(size_t)63);
    assert_non_null(p);
    return p;
}

static double *dbuf(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}

static void fill_nan(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}

// A workspace of exactly the size asked for, NaN-filled, with a guard after it.
enum { GUARD = 256 };
static unsigned char *ws_alloc(size_t bytes) {
    unsigned char *w = aligned_alloc(64, (bytes + GUARD + 63) & ~(size_t)63);
    assert_non_null(w);
    fill_nan((float *)w, bytes / sizeof(float));
    memset(w + bytes, 0xA5, GUARD);
    return w;
}

static void ws_check_guard(const unsigned char *w, size_t bytes) {
    for (size_t i = 0; i < GUARD; i++)
        if (w[bytes + i] != 0xA5) {
            print_error("workspace overrun at byte %zu past its %zu bytes\n", i, bytes);
            fail();
        }
}

// ---------------------------------------------------------------------------
// double reference

typedef struct {
    int B, Tq, Tk, NH, HD;
} shape;

typedef struct {
    double *out, *lse, *dq, *dk, *dv;          // results
    double *env_out, *env_dq, *env_dk, *env_dv; // sums of absolute values
    double *amax;                              // [B*NH] largest |score| term
} reference;

static void ref_free(reference *r) {
    free(r->out), free(r->lse), free(r->dq), free(r->dk), free(r->dv);
    free(r->env_out), free(r->env_dq), free(r->env_dk), free(r->env_dv), free(r->amax);
}

// Forward (and backward when dout is given) in double.
static reference ref_compute(const shape *s, const float *q, const float *k, const float *v,
                             const float *dout) {
    const int B = s->B, Tq = s->Tq, Tk = s->Tk, NH = s->NH, HD = s->HD, D = NH * HD;
    const double sc = 1.0 / sqrt((double)HD);
    reference r = {0};
    size_t nq = (size_t)B * Tq * D, nk = (size_t)B * Tk * D;
    r.out = dbuf(nq), r.lse = dbuf((size_t)B * NH * Tq), r.env_out = dbuf(nq);
    r.amax = dbuf((size_t)B * NH);
    if (dout) {
        r.dq = dbuf(nq), r.dk = dbuf(nk), r.dv = dbuf(nk);
        r.env_dq = dbuf(nq), r.env_dk = dbuf(nk), r.env_dv = dbuf(nk);
    }
    double *P = dbuf((size_t)Tq * Tk), *dP = dbuf((size_t)Tq * Tk), *envP = dbuf((size_t)Tq * Tk);
    double *envdS = dbuf((size_t)Tq * Tk);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int bh = b * NH + h;
            const float *qb = q + (size_t)b * Tq * D + h * HD;
            const float *kb = k + (size_t)b * Tk * D + h * HD;
            const float *vb = v + (size_t)b * Tk * D + h * HD;
            double amax = 0;
            for (int i = 0; i < Tq; i++) {
                double mx = -INFINITY;
                for (int j = 0; j < Tk; j++) {
                    double dot = 0, adot = 0;
                    for (int d = 0; d < HD; d++) {
                        dot += (double)qb[(size_t)i * D + d] * kb[(size_t)j * D + d];
                        adot += fabs((double)qb[(size_t)i * D + d] * kb[(size_t)j * D + d]);
                    }
                    P[(size_t)i * Tk + j] = dot * sc;
                    if (adot * sc > amax) amax = adot * sc;
                    if (dot * sc > mx) mx = dot * sc;
                }
                double sum = 0;
                for (int j = 0; j < Tk; j++) sum += exp(P[(size_t)i * Tk + j] - mx);
                double lse = mx + log(sum);
                r.lse[(size_t)bh * Tq + i] = lse;
                for (int j = 0; j < Tk; j++)
                    P[(size_t)i * Tk + j] = exp(P[(size_t)i * Tk + j] - lse);
                for (int d = 0; d < HD; d++) {
                    double o = 0, e = 0;
                    for (int j = 0; j < Tk; j++) {
                        o += P[(size_t)i * Tk + j] * vb[(size_t)j * D + d];
                        e += P[(size_t)i * Tk + j] * fabs((double)vb[(size_t)j * D + d]);
                    }
                    r.out[((size_t)b * Tq + i) * D + h * HD + d] = o;
                    r.env_out[((size_t)b * Tq + i) * D + h * HD + d] = e;
                }
            }
            r.amax[bh] = amax;
            if (!dout) continue;
            const float *gb = dout + (size_t)b * Tq * D + h * HD;
            for (int i = 0; i < Tq; i++) {
                double di = 0, envdi = 0;
                for (int j = 0; j < Tk; j++) {
                    double dp = 0, edp = 0;
                    for (int d = 0; d < HD; d++) {
                        dp += (double)gb[(size_t)i * D + d] * vb[(size_t)j * D + d];
                        edp += fabs((double)gb[(size_t)i * D + d] * vb[(size_t)j * D + d]);
                    }
                    dP[(size_t)i * Tk + j] = dp;
                    envP[(size_t)i * Tk + j] = edp;
                    di += P[(size_t)i * Tk + j] * dp;
                }
                // the kernel forms Di from dO o O, so its size is that of sum |dO| env(O)
                for (int d = 0; d < HD; d++)
                    envdi += fabs((double)gb[(size_t)i * D + d]) *
                             r.env_out[((size_t)b * Tq + i) * D + h * HD + d];
                for (int j = 0; j < Tk; j++) {
                    double p = P[(size_t)i * Tk + j];
                    dP[(size_t)i * Tk + j] = p * (dP[(size_t)i * Tk + j] - di); // dS
                    envdS[(size_t)i * Tk + j] = p * (envP[(size_t)i * Tk + j] + envdi);
                }
            }
            for (int i = 0; i < Tq; i++)
                for (int d = 0; d < HD; d++) {
                    double a = 0, e = 0;
                    for (int j = 0; j < Tk; j++) {
                        a += dP[(size_t)i * Tk + j] * kb[(size_t)j * D + d];
                        e += envdS[(size_t)i * Tk + j] * fabs((double)kb[(size_t)j * D + d]);
                    }
                    r.dq[((size_t)b * Tq + i) * D + h * HD + d] = a * sc;
                    r.env_dq[((size_t)b * Tq + i) * D + h * HD + d] = e * sc;
                }
            for (int j = 0; j < Tk; j++)
                for (int d = 0; d < HD; d++) {
                    double a = 0, e = 0, av = 0, ev = 0;
                    for (int i = 0; i < Tq; i++) {
                        a += dP[(size_t)i * Tk + j] * qb[(size_t)i * D + d];
                        e += envdS[(size_t)i * Tk + j] * fabs((double)qb[(size_t)i * D + d]);
                        av += P[(size_t)i * Tk + j] * gb[(size_t)i * D + d];
                        ev += P[(size_t)i * Tk + j] * fabs((double)gb[(size_t)i * D + d]);
                    }
                    size_t at = ((size_t)b * Tk + j) * D + h * HD + d;
                    r.dk[at] = a * sc, r.env_dk[at] = e * sc;
                    r.dv[at] = av, r.env_dv[at] = ev;
                }
        }
    free(P), free(dP), free(envP), free(envdS);
    return r;
}

// got[B,T,D] against want within TOL_C * eps * (1 + A[b,h]) * env (+ a floor
// for elements whose env underflows to 0).
static void check_bthd(const char *what, const float *got, const double *want, const double *env,
                       const double *amax, int B, int T, int NH, int HD, double *worst) {
    const int D = NH * HD;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++)
                for (int d = 0; d < HD; d++) {
                    size_t at = ((size_t)b * T + t) * D + h * HD + d;
                    double unit = FLT_EPSILON * (1.0 + amax[b * NH + h]) * env[at] + 1e-30;
                    double err = fabs((double)got[at] - want[at]);
                    double tol = TOL_C * unit;
                    if (!(err <= tol)) {
                        print_error("%s[b=%d t=%d h=%d d=%d]: got %.9g, want %.9g "
                                    "(|diff| %.3g, tol %.3g)\n",
                                    what, b, t, h, d, got[at], want[at], err, tol);
                        fail();
                    }
                    if (err / unit > *worst) *worst = err / unit;
                }
}

static void check_lse(const float *got, const reference *r, int B, int Tq, int NH) {
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < Tq; t++) {
            double want = r->lse[(size_t)bh * Tq + t];
            double unit = FLT_EPSILON * (1.0 + r->amax[bh] + fabs(want));
            double err = fabs((double)got[(size_t)bh * Tq + t] - want);
            if (!(err <= TOL_C * unit)) {
                print_error("lse[bh=%d t=%d]: got %.9g, want %.9g\n", bh, t,
                            got[(size_t)bh * Tq + t], want);
                fail();
            }
            if (err / unit > worst_lse) worst_lse = err / unit;
        }
}

static void check_same_bits(const char *what, const float *a, const float *b, size_t n) {
    if (memcmp(a, b, n * sizeof(float)) != 0) {
        print_error("%s: two runs at the same thread count differ\n", what);
        fail();
    }
}

// ---------------------------------------------------------------------------
// one case: forward and backward at 1, 2 and 3 threads against the reference

typedef struct {
    shape s;
    float qscale; // q is drawn from [-qscale, qscale]
    uint64_t seed;
} attn_case;

static void run_case(const attn_case *c) {
    const shape *s = &c->s;
    const int B = s->B, Tq = s->Tq, Tk = s->Tk, NH = s->NH, HD = s->HD, D = NH * HD;
    const size_t nq = (size_t)B * Tq * D, nk = (size_t)B * Tk * D, nl = (size_t)B * NH * Tq;
    float *q = fbuf(nq), *k = fbuf(nk), *v = fbuf(nk), *dout = fbuf(nq);
    fill(q, nq, -c->qscale, c->qscale, c->seed);
    fill(k, nk, -1, 1, c->seed + 1);
    fill(v, nk, -1, 1, c->seed + 2);
    fill(dout, nq, -1, 1, c->seed + 3);
    reference r = ref_compute(s, q, k, v, dout);
    float *out = fbuf(nq), *lse = fbuf(nl), *dq = fbuf(nq), *dk = fbuf(nk), *dv = fbuf(nk);
    float *dq2 = fbuf(nq), *dk2 = fbuf(nk), *dv2 = fbuf(nk);

    const int saved = omp_get_max_threads();
    for (int nt = 1; nt <= 3; nt++) {
        omp_set_num_threads(nt);
        size_t wbytes = cpu_attention_workspace_bytes(&cpu_ctx, B, Tq, Tk, NH, HD);
        unsigned char *ws = ws_alloc(wbytes);
        fill_nan(out, nq), fill_nan(lse, nl);
        cpu_attention_forward(&cpu_ctx, out, lse, ws, q, k, v, B, Tq, Tk, NH, HD);
        check_bthd("out", out, r.out, r.env_out, r.amax, B, Tq, NH, HD, &worst_out);
        check_lse(lse, &r, B, Tq, NH);

        fill_nan((float *)ws, wbytes / sizeof(float));
        fill_nan(dq, nq), fill_nan(dk, nk), fill_nan(dv, nk);
        cpu_attention_backward(&cpu_ctx, dq, dk, dv, ws, dout, out, lse, q, k, v, B, Tq, Tk, NH,
                               HD);
        check_bthd("dq", dq, r.dq, r.env_dq, r.amax, B, Tq, NH, HD, &worst_grad);
        check_bthd("dk", dk, r.dk, r.env_dk, r.amax, B, Tk, NH, HD, &worst_grad);
        check_bthd("dv", dv, r.dv, r.env_dv, r.amax, B, Tk, NH, HD, &worst_grad);

        // the same call again: the same bits (and nothing depends on old contents)
        fill_nan(dq2, nq), fill_nan(dk2, nk), fill_nan(dv2, nk);
        cpu_attention_backward(&cpu_ctx, dq2, dk2, dv2, ws, dout, out, lse, q, k, v, B, Tq, Tk, NH,
                               HD);
        check_same_bits("dq", dq, dq2, nq);
        check_same_bits("dk", dk, dk2, nk);
        check_same_bits("dv", dv, dv2, nk);
        ws_check_guard(ws, wbytes);
        free(ws);
    }
    omp_set_num_threads(saved);
    ref_free(&r);
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
    free(dq2), free(dk2), free(dv2);
}

static void run_cases(const attn_case *cases, int n) {
    for (int i = 0; i < n; i++) run_case(&cases[i]);
}

// ---------------------------------------------------------------------------
// tests

// Tq == Tk, sizes that are and are not multiples of the tiles.
static void test_self_attention(void **state) {
    (void)state;
    const attn_case cases[] = {
        {{1, 1, 1, 1, 3}, 1, 11},     {{1, 5, 5, 1, 1}, 1, 12},    {{3, 5, 5, 2, 7}, 1, 13},
        {{2, 37, 37, 3, 16}, 1, 14},  {{1, 129, 129, 4, 64}, 1, 15}, {{2, 300, 300, 2, 48}, 1, 16},
        {{1, 256, 256, 1, 8}, 1, 17}, {{3, 64, 64, 4, 32}, 1, 18},
    };
    run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
}

// Local queries against every key (context parallelism), and the reverse.
static void test_cross_lengths(void **state) {
    (void)state;
    const attn_case cases[] = {
        {{2, 37, 129, 2, 8}, 1, 21}, {{1, 100, 300, 3, 32}, 1, 22}, {{1, 129, 37, 1, 5}, 1, 23},
        {{3, 5, 300, 1, 12}, 1, 24}, {{1, 300, 5, 2, 4}, 1, 25},
    };
    run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
}

// Every head size from 1 to 64 at a shape with a partial tile.
static void test_head_sizes(void **state) {
    (void)state;
    for (int hd = 1; hd <= 64; hd++) {
        attn_case c = {{1 + hd % 3, 37 + hd % 5, 41, 1 + hd % 4, hd}, 1, 100 + (uint64_t)hd};
        run_case(&c);
    }
}

// Scores of magnitude ~100: the online softmax's running max moves between
// key tiles and the rescaling must keep every row exact.
static void test_large_scores(void **state) {
    (void)state;
    const attn_case cases[] = {
        {{1, 37, 37, 2, 16}, 30, 31},   {{2, 129, 300, 1, 48}, 30, 32},
        {{1, 600, 600, 2, 48}, 30, 33}, {{1, 600, 600, 1, 8}, 1, 34},
    };
    run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
}

// Central differences of the double forward (h = 1e-4) over every input of a
// small case: an independent check of the reference's backward formulas,
// compared with the kernel's gradients.
typedef struct {
    shape s;
    float *q, *k, *v, *r;
} fd_ctx;

static double objective_ref(const fd_ctx *c) {
    reference ref = ref_compute(&c->s, c->q, c->k, c->v, NULL);
    size_t n = (size_t)c->s.B * c->s.Tq * c->s.NH * c->s.HD;
    double L = 0;
    for (size_t i = 0; i < n; i++) L += ref.out[i] * c->r[i];
    ref_free(&ref);
    return L;
}

static double objective_kernel(const fd_ctx *c, void *ws, float *out, float *lse) {
    const shape *s = &c->s;
    cpu_attention_forward(&cpu_ctx, out, lse, ws, c->q, c->k, c->v, s->B, s->Tq, s->Tk, s->NH,
                          s->HD);
    size_t n = (size_t)s->B * s->Tq * s->NH * s->HD;
    double L = 0;
    for (size_t i = 0; i < n; i++) L += (double)out[i] * c->r[i];
    return L;
}

static void test_finite_differences(void **state) {
    (void)state;
    fd_ctx c = {.s = {2, 3, 5, 2, 4}};
    const shape *s = &c.s;
    const int D = s->NH * s->HD;
    const size_t nq = (size_t)s->B * s->Tq * D, nk = (size_t)s->B * s->Tk * D;
    c.q = fbuf(nq), c.k = fbuf(nk), c.v = fbuf(nk), c.r = fbuf(nq);
    fill(c.q, nq, -2, 2, 41), fill(c.k, nk, -2, 2, 42), fill(c.v, nk, -1, 1, 43);
    fill(c.r, nq, -1, 1, 44);
    float *out = fbuf(nq), *lse = fbuf((size_t)s->B * s->NH * s->Tq);
    float *dq = fbuf(nq), *dk = fbuf(nk), *dv = fbuf(nk);
    size_t wbytes = cpu_attention_workspace_bytes(&cpu_ctx, s->B, s->Tq, s->Tk, s->NH, s->HD);
    unsigned char *ws = ws_alloc(wbytes);
    cpu_attention_forward(&cpu_ctx, out, lse, ws, c.q, c.k, c.v, s->B, s->Tq, s->Tk, s->NH, s->HD);
    cpu_attention_backward(&cpu_ctx, dq, dk, dv, ws, c.r, out, lse, c.q, c.k, c.v, s->B, s->Tq,
                           s->Tk, s->NH, s->HD);

    // double forward: the perturbed input is exact in float only up to its
    // rounding, so the step is applied to the float and its actual size used
    struct { float *x, *g; size_t n; const char *name; } ins[] = {
        {c.q, dq, nq, "dq"}, {c.k, dk, nk, "dk"}, {c.v, dv, nk, "dv"}};
    for (int w = 0; w < 3; w++)
        for (size_t i = 0; i < ins[w].n; i++) {
            float x0 = ins[w].x[i];
            float xp = x0 + 1e-3f, xm = x0 - 1e-3f;
            ins[w].x[i] = xp;
            double lp = objective_ref(&c);
            ins[w].x[i] = xm;
            double lm = objective_ref(&c);
            ins[w].x[i] = x0;
            double fd = (lp - lm) / ((double)xp - (double)xm);
            double err = fabs(fd - ins[w].g[i]);
            if (!(err <= 1e-5 * (1 + fabs(fd)))) {
                print_error("%s[%zu]: kernel %.9g, finite difference of the double forward %.9g\n",
                            ins[w].name, i, ins[w].g[i], fd);
                fail();
            }
        }
    // the float kernel's own forward, a few entries (float noise: step 1e-2)
    for (int w = 0; w < 3; w++)
        for (size_t i = 0; i < ins[w].n; i += 7) {
            float x0 = ins[w].x[i];
            float xp = x0 + 1e-2f, xm = x0 - 1e-2f;
            ins[w].x[i] = xp;
            double lp = objective_kernel(&c, ws, out, lse);
            ins[w].x[i] = xm;
            double lm = objective_kernel(&c, ws, out, lse);
            ins[w].x[i] = x0;
            double fd = (lp - lm) / ((double)xp - (double)xm);
            double err = fabs(fd - ins[w].g[i]);
            if (!(err <= 2e-3 * (1 + fabs(fd)))) {
                print_error("%s[%zu]: kernel %.9g, finite difference of the kernel %.9g\n",
                            ins[w].name, i, ins[w].g[i], fd);
                fail();
            }
        }
    ws_check_guard(ws, wbytes);
    free(ws), free(out), free(lse), free(dq), free(dk), free(dv);
    free(c.q), free(c.k), free(c.v), free(c.r);
}

// NULL gradients are skipped; the others come out bit-identical to a full call.
static void test_null_outputs(void **state) {
    (void)state;
    const int B = 1, Tq = 70, Tk = 90, NH = 3, HD = 16, D = NH * HD;
    const size_t nq = (size_t)B * Tq * D, nk = (size_t)B * Tk * D;
    float *q = fbuf(nq), *k = fbuf(nk), *v = fbuf(nk), *dout = fbuf(nq), *out = fbuf(nq);
    float *lse = fbuf((size_t)B * NH * Tq);
    float *dq = fbuf(nq), *dk = fbuf(nk), *dv = fbuf(nk), *g = fbuf(nk > nq ? nk : nq);
    fill(q, nq, -1, 1, 51), fill(k, nk, -1, 1, 52), fill(v, nk, -1, 1, 53);
    fill(dout, nq, -1, 1, 54);
    const int saved = omp_get_max_threads();
    for (int nt = 1; nt <= 2; nt++) {
        omp_set_num_threads(nt);
        size_t wbytes = cpu_attention_workspace_bytes(&cpu_ctx, B, Tq, Tk, NH, HD);
        unsigned char *ws = ws_alloc(wbytes);
        cpu_attention_forward(&cpu_ctx, out, lse, ws, q, k, v, B, Tq, Tk, NH, HD);
#define BACKWARD(gq, gk, gv)                                                                \
    cpu_attention_backward(&cpu_ctx, gq, gk, gv, ws, dout, out, lse, q, k, v, B, Tq, Tk, NH, HD)
        BACKWARD(dq, dk, dv);
        fill_nan(g, nq);
        BACKWARD(g, NULL, NULL);
        check_same_bits("dq alone", g, dq, nq);
        fill_nan(g, nk);
        BACKWARD(NULL, g, NULL);
        check_same_bits("dk alone", g, dk, nk);
        fill_nan(g, nk);
        BACKWARD(NULL, NULL, g);
        check_same_bits("dv alone", g, dv, nk);
#undef BACKWARD
        ws_check_guard(ws, wbytes);
        free(ws);
    }
    omp_set_num_threads(saved);
    free(q), free(k), free(v), free(dout), free(out), free(lse);
    free(dq), free(dk), free(dv), free(g);
}

// The workspace grows with T, not T^2, and one sized at more threads serves
// fewer.
static void test_workspace_size(void **state) {
    (void)state;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(2);
    // the tutorial's base config: B=1, 4050 tokens, 8 heads of 48
    const size_t act = (size_t)4050 * 384 * sizeof(float); // one of q, k, v
    size_t w1 = cpu_attention_workspace_bytes(&cpu_ctx, 1, 4050, 4050, 8, 48);
    size_t w2 = cpu_attention_workspace_bytes(&cpu_ctx, 1, 8100, 8100, 8, 48);
    size_t w4 = cpu_attention_workspace_bytes(&cpu_ctx, 1, 16200, 16200, 8, 48);
    print_message("attention workspace at base shapes, 2 threads: %.2f MiB (the "
                  "probabilities would be %.0f MiB)\n", w1 / 1048576.0,
                  8.0 * 4050 * 4050 * sizeof(float) / 1048576.0);
    // a few activation-sized buffers plus per-thread tiles
    assert_true(w1 <= 2 * act + ((size_t)4 << 20));
    // linear in T: doubling T twice adds the same amount twice (tile rounding aside)
    assert_true(w2 > w1 && w4 > w2);
    assert_true((double)(w4 - w2) <= 2.02 * (double)(w2 - w1));
    // odd B*NH at 2 threads: dq buffers of two key ranges
    size_t w3 = cpu_attention_workspace_bytes(&cpu_ctx, 1, 4050, 4050, 1, 48);
    assert_true(w3 <= 2 * act / 8 + ((size_t)4 << 20));
    omp_set_num_threads(3);
    for (int nh = 1; nh <= 6; nh++) {
        size_t big = cpu_attention_workspace_bytes(&cpu_ctx, 1, 300, 300, nh, 16);
        for (int nt = 1; nt <= 2; nt++) {
            omp_set_num_threads(nt);
            assert_true(cpu_attention_workspace_bytes(&cpu_ctx, 1, 300, 300, nh, 16) <= big);
        }
        omp_set_num_threads(3);
    }
    // sized at 3 threads, run at 2
    const int B = 1, T = 300, NH = 1, HD = 16, D = NH * HD;
    size_t wbytes = cpu_attention_workspace_bytes(&cpu_ctx, B, T, T, NH, HD);
    unsigned char *ws = ws_alloc(wbytes);
    omp_set_num_threads(2);
    const size_t n = (size_t)B * T * D;
    float *q = fbuf(n), *k = fbuf(n), *v = fbuf(n), *dout = fbuf(n), *out = fbuf(n);
    float *lse = fbuf((size_t)B * NH * T), *dq = fbuf(n), *dk = fbuf(n), *dv = fbuf(n);
    fill(q, n, -1, 1, 61), fill(k, n, -1, 1, 62), fill(v, n, -1, 1, 63), fill(dout, n, -1, 1, 64);
    cpu_attention_forward(&cpu_ctx, out, lse, ws, q, k, v, B, T, T, NH, HD);
    cpu_attention_backward(&cpu_ctx, dq, dk, dv, ws, dout, out, lse, q, k, v, B, T, T, NH, HD);
    ws_check_guard(ws, wbytes);
    shape s = {B, T, T, NH, HD};
    reference r = ref_compute(&s, q, k, v, dout);
    check_bthd("dq", dq, r.dq, r.env_dq, r.amax, B, T, NH, HD, &worst_grad);
    ref_free(&r);
    omp_set_num_threads(saved);
    free(ws), free(q), free(k), free(v), free(dout), free(out), free(lse);
    free(dq), free(dk), free(dv);
}

// No keys: out is zero and lse -inf; no queries: dk and dv are zero. A NaN
// score reaches its rows' outputs as NaN.
static void test_degenerate(void **state) {
    (void)state;
    const int B = 2, T = 9, NH = 2, HD = 4, D = NH * HD;
    const size_t n = (size_t)B * T * D;
    float *q = fbuf(n), *k = fbuf(n), *v = fbuf(n), *dout = fbuf(n), *out = fbuf(n);
    float *lse = fbuf((size_t)B * NH * T), *dq = fbuf(n), *dk = fbuf(n), *dv = fbuf(n);
    fill(q, n, -1, 1, 71), fill(k, n, -1, 1, 72), fill(v, n, -1, 1, 73), fill(dout, n, -1, 1, 74);
    size_t wbytes = cpu_attention_workspace_bytes(&cpu_ctx, B, T, T, NH, HD);
    unsigned char *ws = ws_alloc(wbytes);

    fill_nan(out, n), fill_nan(lse, (size_t)B * NH * T);
    assert_true(cpu_attention_workspace_bytes(&cpu_ctx, B, T, 0, NH, HD) <= wbytes);
    cpu_attention_forward(&cpu_ctx, out, lse, ws, q, k, v, B, T, 0, NH, HD);
    for (size_t i = 0; i < n; i++) assert_true(out[i] == 0.0f);
    for (int i = 0; i < B * NH * T; i++) assert_true(lse[i] == -INFINITY);
    fill_nan(dq, n);
    cpu_attention_backward(&cpu_ctx, dq, NULL, NULL, ws, dout, out, lse, q, k, v, B, T, 0, NH, HD);
    for (size_t i = 0; i < n; i++) assert_true(dq[i] == 0.0f);
    fill_nan(dk, n), fill_nan(dv, n);
    assert_true(cpu_attention_workspace_bytes(&cpu_ctx, B, 0, T, NH, HD) <= wbytes);
    cpu_attention_backward(&cpu_ctx, NULL, dk, dv, ws, dout, out, lse, q, k, v, B, 0, T, NH, HD);
    for (size_t i = 0; i < n; i++) assert_true(dk[i] == 0.0f && dv[i] == 0.0f);

    // a NaN key: every query row of that (batch, head) becomes NaN, others stay finite
    k[(size_t)3 * D + HD + 1] = NAN; // batch 0, key 3, head 1
    cpu_attention_forward(&cpu_ctx, out, lse, ws, q, k, v, B, T, T, NH, HD);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                float o = out[((size_t)b * T + t) * D + h * HD];
                if (b == 0 && h == 1) assert_true(isnan(o));
                else assert_true(isfinite(o));
            }
    ws_check_guard(ws, wbytes);
    free(ws), free(q), free(k), free(v), free(dout), free(out), free(lse);
    free(dq), free(dk), free(dv);
}

static int report(void **state) {
    (void)state;
    print_message("largest error in units of eps*(1+A)*env (tolerance %.0f): out %.3g, lse %.3g, "
                  "gradients %.3g\n", TOL_C, worst_out, worst_lse, worst_grad);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_attention),
        cmocka_unit_test(test_cross_lengths),
        cmocka_unit_test(test_head_sizes),
        cmocka_unit_test(test_large_scores),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_null_outputs),
        cmocka_unit_test(test_workspace_size),
        cmocka_unit_test(test_degenerate),
    };
    return cmocka_run_group_tests(tests, NULL, report);
}
