/* attention.c: flash-style softmax(q k^T / sqrt(HD)) v per (batch, head).
 *
 * The probabilities are never stored whole. Forward walks each query tile
 * over the key tiles with an online softmax (running max m and sum l per
 * query; when a key tile raises the max, the partial output and sum are
 * rescaled by exp(m_old - m_new)) and saves only lse = m + log(l) per query.
 * Backward recomputes each probability tile as P = exp(S - lse) and forms
 *   Di = rowsum(dO o O),  dV += P^T dO,  dP = dO V^T,  dS = P o (dP - Di),
 *   dQ += dS K / sqrt(HD),  dK += dS^T Q / sqrt(HD).
 * Scores are computed in base-2 units (log2(e) / sqrt(HD) is folded into the
 * packed queries), so every exponential is a 2^x with an exact range
 * reduction; lse is stored as the natural logarithm the contract asks for.
 *
 * Tiles are kept transposed, keys by queries: S^T[j][i] for key j and query
 * i, with the queries of a tile contiguous. Then the softmax over keys is an
 * element-wise pass across rows (one query per vector lane, no horizontal
 * reductions), and every product is one register-blocked micro-kernel
 *   C[MR rows][NV vectors] (op)= sum_k A(r, k) B[k][vectors]
 * in which A is read one scalar at a time through two strides (a tile, its
 * transpose or rows of v all serve without copies) and B is a tile read as
 * vectors; the op (store, add, rescale-and-add, and the fused epilogues:
 * running column max, 2^(s - lse), P o (dP - Di)) is applied as the
 * accumulators leave the registers:
 *   S^T  = K Q^T              A = K^T (packed)     B = Q^T tile (scaled)
 *   O^T  = corr O^T + V^T P^T A = v, transposed    B = P^T
 *   dP^T = V dO^T             A = V^T tile         B = dO^T tile
 *   dV  += P^T dO             A = P^T              B = dO tile
 *   dK  += dS^T Q             A = dS^T             B = Q tile (scaled)
 *   dQ  += dS K               A = dS^T, transposed B = K tile (scaled)
 * OpenBLAS's sgemm reaches well under half of its large-matrix rate on these
 * shapes (one dimension is the head size, 32-64); the micro-kernel, 6 x 2
 * vectors of accumulators, runs at 85-95% of the FMA peak. The widths follow
 * the target: 16 floats with AVX-512, 8 with AVX, else 4.
 *
 * Parallel split. Forward: one work item per (batch, head, query tile); items
 * write disjoint rows of out and lse. Backward: one item per (batch, head,
 * key range); an item owns its keys' rows of dk and dv and walks every query
 * tile, adding into its own dq buffer in the workspace; dq is then the sum of
 * the buffers of a (batch, head) in range order. When B*NH is not a multiple
 * of the thread count, each (batch, head) is cut into nsplit = nt /
 * gcd(B*NH, nt) key ranges so the items divide evenly over the threads. Every
 * item's arithmetic is fixed by the shapes and the thread count, not by which
 * thread runs it, so results are reproducible for a given thread count.
 *
 * Tiles: at most 128 queries by 256 keys (FWD_* and BWD_* below; measured on
 * the tutorial's base and small shapes, 64..192 by 128..512 are within a few
 * percent of each other), cut so that T splits into equal tiles, rounded up
 * to the vector width.
 *
 * Workspace, in floats, HP = HD rounded up to the vector width, each piece
 * rounded up to 16 floats (64 bytes), nt = omp_get_max_threads() at sizing:
 *   nt thread slots of max(forward:  (2*HD + bk)*bq + 4*bq,
 *                          backward: 2*HD*(bq + bk) + (2*bq + 3*bk)*HP + 2*bk*bq + 2*bq)
 *   + max(forward: B*NH*HD*Tk (K^T),
 *         backward: B*NH*Tq (Di) + nsplit*B*NH*Tq*HP (dq buffers))
 * i.e. about one activation's size plus ~0.6 MB per thread. The size is the
 * largest over thread counts 1..nt, so a workspace sized at one thread count
 * also serves any smaller one (never a larger one).
 */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"

// Vector width in floats: one register of the target.
#ifndef VB_ATTN_VW
#if defined(__AVX512F__)
#define VB_ATTN_VW 16
#elif defined(__AVX__)
#define VB_ATTN_VW 8
#else
#define VB_ATTN_VW 4
#endif
#endif
typedef float vfloat __attribute__((vector_size(VB_ATTN_VW * sizeof(float))));
typedef int32_t vint __attribute__((vector_size(VB_ATTN_VW * sizeof(float))));
typedef uint32_t vuint __attribute__((vector_size(VB_ATTN_VW * sizeof(float))));

enum {
    VW = VB_ATTN_VW,
    MR_MAX = 6, // micro-kernel rows
    NV_MAX = 2, // micro-kernel vectors per row
};

// Largest tile sizes (queries x keys), forward and backward; overridable
// when building the benchmark to measure others.
#ifndef FWD_BQ
#define FWD_BQ 128
#endif
#ifndef FWD_BK
#define FWD_BK 256
#endif
#ifndef BWD_BQ
#define BWD_BQ 128
#endif
#ifndef BWD_BK
#define BWD_BK 256
#endif

#define LOG2E 1.44269504088896340736
#define LOG2E_F 1.44269504088896341f
#define LN2 0.693147180559945309f

static inline int min_int(int a, int b) { return a < b ? a : b; }
static inline int round_vw(int n) { return (n + VW - 1) / VW * VW; }
static inline size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

// ---------------------------------------------------------------------------
// plan: tile sizes, thread split and workspace layout

typedef struct attn_plan {
    int B, Tq, Tk, NH, HD, D, nbh;
    int fq, fk;      // forward tile sizes (multiples of VW)
    int bq, bk;      // backward tile sizes (multiples of VW)
    int HP;          // head columns padded to VW
    int nt;          // thread slots
    int nsplit;      // backward key ranges per (batch, head)
    size_t slot;     // floats per thread slot
    size_t shared;   // float offset of the part shared by all threads
    size_t di_off, dq_off, total; // floats
} attn_plan;

static int gcd_int(int a, int b) {
    while (b) {
        int t = a % b;
        a = b, b = t;
    }
    return a;
}

// Tile size that cuts n into equal parts of at most max, rounded up to VW.
static int tile_size(int n, int max) {
    if (n <= 0) return VW;
    int parts = (n + max - 1) / max;
    return round_vw((n + parts - 1) / parts);
}

static attn_plan plan_for(int B, int Tq, int Tk, int NH, int HD, int nt) {
    attn_plan p;
    p.B = B, p.Tq = Tq, p.Tk = Tk, p.NH = NH, p.HD = HD, p.D = NH * HD, p.nbh = B * NH;
    p.fq = tile_size(Tq, FWD_BQ);
    p.fk = tile_size(Tk, FWD_BK);
    p.bq = tile_size(Tq, BWD_BQ);
    p.bk = tile_size(Tk, BWD_BK);
    p.HP = round_vw(HD);
    p.nt = nt < 1 ? 1 : nt;
    p.nsplit = p.nt / gcd_int(p.nbh, p.nt);
    const size_t HP = (size_t)p.HP, hd = (size_t)HD;
    const size_t fq = (size_t)p.fq, fk = (size_t)p.fk, bq = (size_t)p.bq, bk = (size_t)p.bk;
    size_t fwd = 2 * round16(hd * fq) + round16(fk * fq) + 4 * round16(fq);
    size_t bwd = 2 * round16(hd * bq) + 2 * round16(hd * bk) + 2 * round16(bq * HP) +
                 3 * round16(bk * HP) + 2 * round16(bk * bq) + 2 * round16(bq);
    p.slot = fwd > bwd ? fwd : bwd;
    p.shared = (size_t)p.nt * p.slot;
    // forward: K^T of every (batch, head); backward: Di and the dq buffers
    size_t fwd_shared = (size_t)p.nbh * HD * Tk;
    p.di_off = p.shared;
    p.dq_off = p.di_off + round16((size_t)p.nbh * Tq);
    size_t bwd_end = p.dq_off + (size_t)p.nsplit * p.nbh * Tq * HP;
    p.total = p.shared + fwd_shared > bwd_end ? p.shared + fwd_shared : bwd_end;
    return p;
}

size_t cpu_attention_workspace_bytes(vb_ctx *ctx, int B, int Tq, int Tk, int NH, int HD) {
    (void)ctx;
    if (B <= 0 || Tq < 0 || Tk < 0 || NH <= 0 || HD <= 0) return 0;
    int nt = omp_get_max_threads();
    size_t most = 0;
    for (int t = 1; t <= nt; t++) {
        attn_plan p = plan_for(B, Tq, Tk, NH, HD, t);
        if (p.total > most) most = p.total;
    }
    return most * sizeof(float);
}

// Carves consecutive pieces of n floats (each rounded up to 16) out of a slot.
static float *take(float **cursor, size_t n) {
    float *p = *cursor;
    *cursor += round16(n);
    return p;
}

// ---------------------------------------------------------------------------
// vector helpers

static inline vfloat vload(const float *p) {
    vfloat v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, vfloat v) { memcpy(p, &v, sizeof v); }

static inline vfloat vsplat(float x) { return (vfloat){0} + x; }

// m ? a : b per lane (m from a vector comparison: all ones or all zeros)
static inline vfloat vselect(vint m, vfloat a, vfloat b) {
    return (vfloat)(((vint)a & m) | ((vint)b & ~m));
}

// the larger of a and b per lane; a NaN in a is skipped (b kept)
static inline vfloat vmax(vfloat a, vfloat b) { return vselect(a > b, a, b); }

// 2^x per lane for x <= 0 (a little above 0 is fine too); NaN stays NaN.
// Below -126 the result is 2^-126 instead of 0 (also for -inf): next to the
// row's largest term, 1, that is no difference to a softmax sum. The scores
// are kept in base-2 units (log2(e) is folded into the query scaling), so the
// reduction x = n + r, n = round(x), |r| <= 1/2 is exact; 2^r by a degree-6
// polynomial (our own minimax fit of the relative error on [-1/2, 1/2]:
// 2.6e-9 in exact arithmetic, 1.7e-7 evaluated in float, the same as the
// Taylor polynomial of degree 7) in Estrin's scheme (three dependent
// multiply-adds instead of six), and 2^n from the exponent bits. Written on
// whole vectors because GCC's auto-vectoriser turns the selects of a scalar
// version into branches in some loops and then leaves them scalar.
static inline vfloat vexp2_nonpos(vfloat x) {
    const vfloat lo = vsplat(-126.0f);
    const vfloat xc = vselect(x < lo, lo, x);
    // t = 1.5 * 2^23 + n: in [2^23, 2^24) a float's ulp is 1, so the addition
    // rounds xc to the integer n, and the low mantissa bits of t hold n
    const vfloat magic = vsplat(12582912.0f);
    const vfloat t = xc + magic;
    const vfloat r = xc - (t - magic);
    const vfloat r2 = r * r, r4 = r2 * r2;
    const vfloat p01 = r * 0.693147242f + 1.0f;
    const vfloat p23 = r * 0.0555031039f + 0.240226522f;
    const vfloat p45 = r * 0.00134066434f + 0.00961769279f;
    const vfloat p = (p01 + p23 * r2) + (p45 + r2 * 0.000155946778f) * r4;
    // 2^n: n + 127 moved into the exponent field; the bits of t above n's
    // fall off the top in the shift (no float-to-int conversion, so NaN lanes
    // are only garbage bits, and p carries the NaN)
    const vuint e = ((vuint)t + 127u) << 23;
    return p * (vfloat)e;
}

// ---------------------------------------------------------------------------
// micro-kernel

// How the micro-kernel stores its sums acc[r][v] (aux and P are indexed by
// the lane's column, P by the element's row and column like C):
enum {
    SET,     // C = acc
    ADD,     // C += acc
    RESCALE, // C = aux * C + acc
    SET_MAX, // C = acc, aux = max(aux, acc over the rows)
    SET_EXP, // C = 2^(acc - aux)
    SET_DS,  // C = P * (acc - aux)
};

// C[r][v] (mode) sum_{k<K} A[r*rs + k*ks] * B[k*ldb + v*VW ..] for r < MR, v < NV.
// MR and NV are constants at every call site (mk below), so the accumulators
// live in registers.
static inline __attribute__((always_inline)) void
mk_body(const int MR, const int NV, int K, const float *A, ptrdiff_t rs, ptrdiff_t ks,
        const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int mode, float *aux,
        const float *P) {
    vfloat acc[MR_MAX][NV_MAX];
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) acc[r][v] = (vfloat){0};
    for (int k = 0; k < K; k++) {
        vfloat b[NV_MAX];
        for (int v = 0; v < NV; v++) b[v] = vload(B + k * ldb + v * VW);
        const float *a = A + k * ks;
        for (int r = 0; r < MR; r++) {
            const float ar = a[r * rs];
            for (int v = 0; v < NV; v++) acc[r][v] += ar * b[v];
        }
    }
    switch (mode) {
    case SET:
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++) vstore(C + r * ldc + v * VW, acc[r][v]);
        break;
    case ADD:
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++) {
                float *c = C + r * ldc + v * VW;
                vstore(c, vload(c) + acc[r][v]);
            }
        break;
    case RESCALE:
        for (int v = 0; v < NV; v++) {
            const vfloat s = vload(aux + v * VW);
            for (int r = 0; r < MR; r++) {
                float *c = C + r * ldc + v * VW;
                vstore(c, vload(c) * s + acc[r][v]);
            }
        }
        break;
    case SET_MAX:
        for (int v = 0; v < NV; v++) {
            vfloat mx = vload(aux + v * VW);
            for (int r = 0; r < MR; r++) {
                vstore(C + r * ldc + v * VW, acc[r][v]);
                mx = vmax(acc[r][v], mx);
            }
            vstore(aux + v * VW, mx);
        }
        break;
    case SET_EXP:
        for (int v = 0; v < NV; v++) {
            const vfloat s = vload(aux + v * VW);
            for (int r = 0; r < MR; r++) vstore(C + r * ldc + v * VW, vexp2_nonpos(acc[r][v] - s));
        }
        break;
    default: // SET_DS
        for (int v = 0; v < NV; v++) {
            const vfloat s = vload(aux + v * VW);
            for (int r = 0; r < MR; r++)
                vstore(C + r * ldc + v * VW, vload(P + r * ldc + v * VW) * (acc[r][v] - s));
        }
        break;
    }
}

#define MK_CASE(mr, nv)                                                                   \
    case (mr) * 8 + (nv):                                                                 \
        mk_body(mr, nv, K, A, rs, ks, B, ldb, C, ldc, mode, aux, P);                      \
        break;

static void mk(int mr, int nv, int K, const float *A, ptrdiff_t rs, ptrdiff_t ks, const float *B,
               ptrdiff_t ldb, float *C, ptrdiff_t ldc, int mode, float *aux, const float *P) {
    switch (mr * 8 + nv) {
        MK_CASE(1, 1) MK_CASE(2, 1) MK_CASE(3, 1) MK_CASE(4, 1) MK_CASE(5, 1) MK_CASE(6, 1)
        MK_CASE(1, 2) MK_CASE(2, 2) MK_CASE(3, 2) MK_CASE(4, 2) MK_CASE(5, 2) MK_CASE(6, 2)
        default: break;
    }
}

// C[M][NV*VW] (mode) A(M x K) B(K x NV*VW), A(r, k) = A[r*rs + k*ks], B, C and
// P row-major with leading dimensions ldb, ldc, ldc; aux[NV*VW] per lane.
static void gemm_tile(int M, int NV, int K, const float *A, ptrdiff_t rs, ptrdiff_t ks,
                      const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int mode, float *aux,
                      const float *P) {
    for (int n0 = 0; n0 < NV; n0 += NV_MAX) {
        const int nv = min_int(NV_MAX, NV - n0);
        for (int m0 = 0; m0 < M; m0 += MR_MAX)
            mk(min_int(MR_MAX, M - m0), nv, K, A + m0 * rs, rs, ks, B + n0 * VW, ldb,
               C + m0 * ldc + n0 * VW, ldc, mode, aux ? aux + n0 * VW : NULL,
               P ? P + m0 * ldc + n0 * VW : NULL);
    }
}

// ---------------------------------------------------------------------------
// packing: rows x HD of a head's columns (leading dimension D) into a tile

// dst[d][i] = s * src[i][d], lanes rows .. n of each dst row zero
static void pack_transposed(float *dst, int ld, const float *src, int D, int rows, int n, int HD,
                            float s) {
    for (int i = 0; i < rows; i++)
        for (int d = 0; d < HD; d++) dst[(size_t)d * ld + i] = s * src[(size_t)i * D + d];
    for (int d = 0; d < HD; d++)
        for (int i = rows; i < n; i++) dst[(size_t)d * ld + i] = 0.0f;
}

// dst[i][d] = s * src[i][d], columns HD .. HP zero
static void pack_rows(float *dst, int HP, const float *src, int D, int rows, int HD, float s) {
    for (int i = 0; i < rows; i++) {
        float *o = dst + (size_t)i * HP;
        const float *x = src + (size_t)i * D;
        #pragma omp simd
        for (int d = 0; d < HD; d++) o[d] = s * x[d];
        for (int d = HD; d < HP; d++) o[d] = 0.0f;
    }
}

// ---------------------------------------------------------------------------
// forward

// One (batch, head, query tile): out rows and lse of queries q0 .. q0+rows.
// kt_all: K^T of every (batch, head), [B*NH][HD][Tk].
static void forward_item(const attn_plan *p, float *slot, float *out, float *lse, const float *q,
                         const float *kt_all, const float *v, int bh, int q0, float qscale) {
    const int HD = p->HD, D = p->D, Tq = p->Tq, Tk = p->Tk, LQ = p->fq, bk = p->fk;
    const int b = bh / p->NH, h = bh % p->NH;
    const int rows = min_int(LQ, Tq - q0);
    const int nvq = (rows + VW - 1) / VW, n = nvq * VW; // query lanes, padded
    const float *qt = q + ((size_t)b * Tq + q0) * D + (size_t)h * HD;
    const float *ktb = kt_all + (size_t)bh * HD * Tk; // [HD][Tk]
    const float *vb = v + (size_t)b * Tk * D + (size_t)h * HD;
    float *ot = out + ((size_t)b * Tq + q0) * D + (size_t)h * HD;
    float *lse_t = lse ? lse + (size_t)bh * Tq + q0 : NULL;

    if (Tk == 0) { // softmax over nothing: output zero rather than NaN, lse -inf
        for (int i = 0; i < rows; i++) {
            memset(ot + (size_t)i * D, 0, (size_t)HD * sizeof(float));
            if (lse_t) lse_t[i] = -INFINITY;
        }
        return;
    }
    float *cur = slot;
    float *QT = take(&cur, (size_t)HD * LQ);   // [HD][LQ] scaled queries
    float *OT = take(&cur, (size_t)HD * LQ);   // [HD][LQ] unnormalised output
    float *ST = take(&cur, (size_t)bk * LQ);   // [bk][LQ] scores (base 2), then probabilities
    float *m = take(&cur, LQ), *l = take(&cur, LQ), *mt = take(&cur, LQ);
    float *corr = take(&cur, LQ);

    pack_transposed(QT, LQ, qt, D, rows, n, HD, qscale);
    for (int i = 0; i < n; i++) m[i] = -FLT_MAX, l[i] = 0.0f;
    for (int k0 = 0; k0 < Tk; k0 += bk) {
        const int cols = min_int(bk, Tk - k0);
        // S^T = K Q^T, and mt = the running max over it
        memcpy(mt, m, (size_t)n * sizeof(float));
        gemm_tile(cols, nvq, HD, ktb + k0, 1, Tk, QT, LQ, ST, LQ, SET_MAX, mt, NULL);
        // online softmax down the columns, VW queries at a time
        for (int i = 0; i < n; i += VW) {
            const vfloat m_old = vload(m + i), mx = vload(mt + i);
            vfloat sum = vsplat(0.0f);
            for (int j = 0; j < cols; j++) {
                float *s = ST + (size_t)j * LQ + i;
                vfloat e = vexp2_nonpos(vload(s) - mx);
                vstore(s, e);
                sum += e;
            }
            const vfloat c = vexp2_nonpos(m_old - mx);
            vstore(corr + i, c);
            vstore(l + i, vload(l + i) * c + sum);
            vstore(m + i, mx);
        }
        // O^T = corr O^T + V^T P^T
        gemm_tile(HD, nvq, cols, vb + (size_t)k0 * D, 1, D, ST, LQ, OT, LQ,
                  k0 == 0 ? SET : RESCALE, corr, NULL);
    }
    #pragma omp simd
    for (int i = 0; i < n; i++) corr[i] = 1.0f / l[i];
    for (int i = 0; i < rows; i++) {
        float *o = ot + (size_t)i * D;
        for (int d = 0; d < HD; d++) o[d] = OT[(size_t)d * LQ + i] * corr[i];
        if (lse_t) lse_t[i] = m[i] * LN2 + logf(l[i]);
    }
}

void cpu_attention_forward(vb_ctx *ctx, vb_act *out_act, float *lse, void *workspace,
                           const vb_act *q_act, const vb_act *k_act, const vb_act *v_act, int B,
                           int Tq, int Tk, int NH, int HD) {
    (void)ctx;
    if (B <= 0 || Tq <= 0 || Tk < 0 || NH <= 0 || HD <= 0) return;
    float *out = out_act;
    const float *q = q_act, *k = k_act, *v = v_act;
    const attn_plan p = plan_for(B, Tq, Tk, NH, HD, omp_get_max_threads());
    const float qscale = (float)(LOG2E / sqrt((double)HD));
    const int nqt = (Tq + p.fq - 1) / p.fq;
    const int items = p.nbh * nqt;
    const size_t work = (size_t)p.nbh * Tq * (Tk ? Tk : 1) * HD;
    float *ws = workspace, *kt_all = ws + p.shared;
    #pragma omp parallel num_threads(p.nt) if (work >= VB_CPU_PAR_MIN)
    {
        // K^T of every (batch, head), so that the score micro-kernel reads
        // consecutive keys (measured ~10% faster than strided rows)
        #pragma omp for schedule(static)
        for (int bt = 0; bt < B * Tk; bt++) {
            const int b = bt / Tk, j = bt % Tk;
            const float *krow = k + (size_t)bt * p.D;
            for (int h = 0; h < NH; h++) {
                float *dst = kt_all + (size_t)(b * NH + h) * HD * Tk + j;
                for (int d = 0; d < HD; d++) dst[(size_t)d * Tk] = krow[h * HD + d];
            }
        }
        #pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < items; it++) {
            float *slot = ws + (size_t)omp_get_thread_num() * p.slot;
            forward_item(&p, slot, out, lse, q, kt_all, v, it / nqt, (it % nqt) * p.fq, qscale);
        }
    }
}

// ---------------------------------------------------------------------------
// backward

// One (batch, head, key range [k_begin, k_end)): dk, dv rows of those keys
// (overwritten, when asked for), and this range's share of dq added into
// dqb[Tq][HP] (when not NULL), which the caller zeroed.
static void backward_item(const attn_plan *p, float *slot, float *dqb, float *dk, float *dv,
                          const float *di, const float *dout, const float *lse, const float *q,
                          const float *k, const float *v, int bh, int k_begin, int k_end,
                          float scale, float qscale) {
    const int HD = p->HD, D = p->D, Tq = p->Tq, Tk = p->Tk, LQ = p->bq, bk = p->bk, HP = p->HP;
    const int nvh = HP / VW;
    const int b = bh / p->NH, h = bh % p->NH;
    const size_t qoff = (size_t)b * Tq * D + (size_t)h * HD;
    const size_t koff = (size_t)b * Tk * D + (size_t)h * HD;
    const float *lse_bh = lse + (size_t)bh * Tq, *di_bh = di + (size_t)bh * Tq;
    const int need_ds = dqb != NULL || dk != NULL;

    float *cur = slot;
    float *QT = take(&cur, (size_t)HD * LQ);    // [HD][LQ] scaled queries
    float *dOT = take(&cur, (size_t)HD * LQ);   // [HD][LQ]
    float *KT = take(&cur, (size_t)HD * bk);    // [HD][bk]
    float *VT = take(&cur, (size_t)HD * bk);    // [HD][bk]
    float *Qp = take(&cur, (size_t)LQ * HP);    // [bq][HP] scaled queries
    float *dOp = take(&cur, (size_t)LQ * HP);   // [bq][HP]
    float *Kp = take(&cur, (size_t)bk * HP);    // [bk][HP] scaled keys
    float *dKt = take(&cur, (size_t)bk * HP), *dVt = take(&cur, (size_t)bk * HP);
    float *PT = take(&cur, (size_t)bk * LQ);    // [bk][LQ] P^T
    float *dST = take(&cur, (size_t)bk * LQ);   // [bk][LQ] dP^T, then dS^T
    float *lse_t = take(&cur, LQ), *di_t = take(&cur, LQ);

    for (int k0 = k_begin; k0 < k_end; k0 += bk) {
        const int cols = min_int(bk, k_end - k0);
        const float *kt = k + koff + (size_t)k0 * D, *vt = v + koff + (size_t)k0 * D;
        if (dqb) pack_rows(Kp, HP, kt, D, cols, HD, scale);
        pack_transposed(KT, bk, kt, D, cols, cols, HD, 1.0f);
        if (need_ds) pack_transposed(VT, bk, vt, D, cols, cols, HD, 1.0f);
        memset(dKt, 0, (size_t)cols * HP * sizeof(float));
        memset(dVt, 0, (size_t)cols * HP * sizeof(float));
        for (int q0 = 0; q0 < Tq; q0 += LQ) {
            const int rows = min_int(LQ, Tq - q0);
            const int nvq = (rows + VW - 1) / VW, n = nvq * VW;
            const float *qt = q + qoff + (size_t)q0 * D, *gt = dout + qoff + (size_t)q0 * D;
            pack_transposed(QT, LQ, qt, D, rows, n, HD, qscale);
            for (int i = 0; i < n; i++) {
                // padded lanes: P = 2^(0 - FLT_MAX), flushed to 2^-126, and
                // never summed (the products below stop at rows)
                lse_t[i] = i < rows ? lse_bh[q0 + i] * LOG2E_F : FLT_MAX;
                di_t[i] = i < rows ? di_bh[q0 + i] : 0.0f;
            }
            // P^T = 2^(K Q^T log2(e) / sqrt(HD) - lse log2(e))
            gemm_tile(cols, nvq, HD, KT, 1, bk, QT, LQ, PT, LQ, SET_EXP, lse_t, NULL);
            // dV += P^T dO
            if (dv) {
                pack_rows(dOp, HP, gt, D, rows, HD, 1.0f);
                gemm_tile(cols, nvh, rows, PT, LQ, 1, dOp, HP, dVt, HP, ADD, NULL, NULL);
            }
            if (!need_ds) continue;
            // dS^T = P^T o (V dO^T - Di)
            pack_transposed(dOT, LQ, gt, D, rows, n, HD, 1.0f);
            gemm_tile(cols, nvq, HD, VT, 1, bk, dOT, LQ, dST, LQ, SET_DS, di_t, PT);
            // dQ += dS K s,  dK += dS^T Q s
            if (dqb)
                gemm_tile(rows, nvh, cols, dST, 1, LQ, Kp, HP, dqb + (size_t)q0 * HP, HP, ADD, NULL,
                          NULL);
            if (dk) {
                pack_rows(Qp, HP, qt, D, rows, HD, scale);
                gemm_tile(cols, nvh, rows, dST, LQ, 1, Qp, HP, dKt, HP, ADD, NULL, NULL);
            }
        }
        const size_t row_bytes = (size_t)HD * sizeof(float);
        for (int j = 0; j < cols; j++) {
            const size_t at = koff + (size_t)(k0 + j) * D;
            if (dk) memcpy(dk + at, dKt + (size_t)j * HP, row_bytes);
            if (dv) memcpy(dv + at, dVt + (size_t)j * HP, row_bytes);
        }
    }
}

void cpu_attention_backward(vb_ctx *ctx, vb_act *dq_act, vb_act *dk_act, vb_act *dv_act,
                            void *workspace, const vb_act *dout_act, const vb_act *out_act,
                            const float *lse, const vb_act *q_act, const vb_act *k_act,
                            const vb_act *v_act, int B, int Tq, int Tk, int NH, int HD) {
    (void)ctx;
    if (B <= 0 || Tq < 0 || Tk < 0 || NH <= 0 || HD <= 0) return;
    float *dq = dq_act, *dk = dk_act, *dv = dv_act;
    const float *dout = dout_act, *out = out_act, *q = q_act, *k = k_act, *v = v_act;
    if (!dq && !dk && !dv) return;
    const attn_plan p = plan_for(B, Tq, Tk, NH, HD, omp_get_max_threads());
    const float scale = (float)(1.0 / sqrt((double)HD));
    const float qscale = (float)(LOG2E / sqrt((double)HD));
    const int D = p.D, HP = p.HP, nbh = p.nbh, nsplit = p.nsplit;
    const size_t work = (size_t)nbh * (Tq ? Tq : 1) * (Tk ? Tk : 1) * HD;
    float *ws = workspace;
    float *di = ws + p.di_off, *dqbuf = ws + p.dq_off;
    const int need_ds = dq != NULL || dk != NULL;

    #pragma omp parallel num_threads(p.nt) if (work >= VB_CPU_PAR_MIN)
    {
        // Di[bh, t] = sum_d dO o O over the head's columns
        if (need_ds) {
            #pragma omp for schedule(static)
            for (int bt = 0; bt < B * Tq; bt++) {
                const int b = bt / Tq, t = bt % Tq;
                const float *orow = out + (size_t)bt * D, *grow = dout + (size_t)bt * D;
                for (int h = 0; h < NH; h++) {
                    float acc = 0.0f;
                    #pragma omp simd reduction(+ : acc)
                    for (int d = 0; d < HD; d++) acc += orow[h * HD + d] * grow[h * HD + d];
                    di[((size_t)b * NH + h) * Tq + t] = acc;
                }
            }
        }
        // implicit barrier: every Di is in place
        #pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < nbh * nsplit; it++) {
            const int bh = it / nsplit, s = it % nsplit;
            const int k_begin = (int)((long long)Tk * s / nsplit);
            const int k_end = (int)((long long)Tk * (s + 1) / nsplit);
            float *dqb = NULL;
            if (dq) {
                dqb = dqbuf + ((size_t)s * nbh + bh) * Tq * HP;
                memset(dqb, 0, (size_t)Tq * HP * sizeof(float));
            }
            float *slot = ws + (size_t)omp_get_thread_num() * p.slot;
            backward_item(&p, slot, dqb, dk, dv, di, dout, lse, q, k, v, bh, k_begin, k_end, scale,
                          qscale);
        }
        // dq = the sum of the ranges' buffers, in range order
        if (dq) {
            #pragma omp for schedule(static)
            for (int bt = 0; bt < B * Tq; bt++) {
                const int b = bt / Tq, t = bt % Tq;
                for (int h = 0; h < NH; h++) {
                    const int bh = b * NH + h;
                    float *drow = dq + (size_t)bt * D + (size_t)h * HD;
                    const float *src = dqbuf + ((size_t)bh * Tq + t) * HP;
                    memcpy(drow, src, (size_t)HD * sizeof(float));
                    for (int s = 1; s < nsplit; s++) {
                        const float *prow = src + (size_t)s * nbh * Tq * HP;
                        #pragma omp simd
                        for (int d = 0; d < HD; d++) drow[d] += prow[d];
                    }
                }
            }
        }
    }
}
