/* cuda_matmul.cu: nn.Linear forward/backward through cuBLASLt.
 *
 * Row-major X[R,K] is column-major X^T (K x R, leading dimension K), so every
 * row-major product below is written as the column-major product of the
 * transposes:
 *   forward   out[N,OC] = inp[N,C] W[OC,C]^T   ->  out^T (OC x N)  = op_T(W^T) . inp^T
 *   dinp      dinp[N,C] = dout[N,OC] W[OC,C]   ->  dinp^T (C x N)  = W^T . dout^T
 *   dweight   dW[OC,C] += dout^T inp           ->  dW^T (C x OC)  += inp^T . op_T(dout^T)
 * Operands are in the activation dtype, the accumulation is float32 (TF32
 * tensor cores only for float32 operands when the context enables it), dW is
 * float32 (beta = 1 adds onto it). The forward bias rides the GEMM's epilogue
 * (CUBLASLT_EPILOGUE_BIAS, added in float before D is rounded); dbias is a
 * deterministic two-pass column sum (cuda_elementwise.cu). The exact GELU of
 * matmul_bias_gelu_forward is a separate kernel: cuBLASLt's GELU epilogue is
 * the tanh approximation.
 *
 * The algorithm for each problem (shape, dtypes, epilogue, operand
 * alignment) comes from cuBLASLt's heuristic once, the first of its
 * candidates that cuBLASLt runs, and is cached per context.
 */
#include <string.h>

#include "kernels/cuda/cuda_common.cuh"


// largest power of two (<= 256) dividing the address: cuBLASLt assumes 256-byte
// aligned operands unless told otherwise, and parameter views inside an arena
// may be less aligned
static int ptr_alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && (a % (uintptr_t)al) != 0) al >>= 1;
    return al;
}

struct lt_problem {
    bool transa, transb;
    int m, n, k;
    const void *A;
    int lda;
    const void *B;
    int ldb;
    void *D; // C = D (in place when beta != 0)
    int ldd;
    cudaDataType_t ab_type, cd_type; // A's type (B's too unless fp8), C's and D's
    float beta;
    const void *bias; // NULL: no epilogue
    // FP8 operands: B's own type, the device scalars the product is
    // multiplied by (A's and B's inverse scales), and whether the tensor
    // cores may skip the periodic promotion of partial sums to float32
    bool fp8;
    cudaDataType_t b_type;
    const float *a_scale, *b_scale;
    bool fast_accum;
};

static const cublasLtMatmulAlgo_t *lt_cached(const cuda_impl *c, const cuda_gemm_key &key) {
    for (int i = 0; i < CUDA_GEMM_CACHE; i++)
        if (c->gemm_cache[i].used && memcmp(&c->gemm_cache[i].key, &key, sizeof key) == 0)
            return &c->gemm_cache[i].algo;
    return NULL;
}

static void lt_cache_put(cuda_impl *c, const cuda_gemm_key &key, const cublasLtMatmulAlgo_t &algo) {
    cuda_gemm_entry *e = &c->gemm_cache[c->gemm_cache_next];
    c->gemm_cache_next = (c->gemm_cache_next + 1) % CUDA_GEMM_CACHE;
    e->key = key;
    e->algo = algo;
    e->used = 1;
}

// the heuristic's candidates for a problem, best first: one may still be
// refused at launch (cuBLASLt checks some of a problem's properties, the
// pointers' values among them, only when it runs), so the caller tries them
// in order
enum { LT_CANDIDATES = 8 };
static int lt_candidates(cuda_impl *c, const cuda_gemm_key &key, cublasLtMatmulDesc_t op,
                         cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                         cublasLtMatmulHeuristicResult_t *res) {
    cublasLtMatmulPreference_t pref;
    CUBLASCHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = c->lt_workspace_bytes;
    CUBLASCHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &ws, sizeof ws));
    uint32_t al[4] = {(uint32_t)key.align_a, (uint32_t)key.align_b, (uint32_t)key.align_c,
                      (uint32_t)key.align_d};
    CUBLASCHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                     &al[0], sizeof al[0]));
    CUBLASCHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                     &al[1], sizeof al[1]));
    CUBLASCHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                     &al[2], sizeof al[2]));
    CUBLASCHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                     &al[3], sizeof al[3]));
    memset(res, 0, sizeof *res * LT_CANDIDATES);
    int returned = 0;
    CUBLASCHECK(cublasLtMatmulAlgoGetHeuristic(c->lt, op, la, lb, lc, lc, pref, LT_CANDIDATES, res, &returned));
    CUBLASCHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (returned == 0)
        vb_cuda_die("cuBLASLt has no algorithm for m=%d n=%d k=%d (transa %d transb %d, "
                        "operand type %d, output type %d, epilogue %d, alignments %d/%d/%d/%d)",
                        key.m, key.n, key.k, key.transa, key.transb, key.ab_type, key.cd_type,
                        key.epilogue, key.align_a, key.align_b, key.align_c, key.align_d);
    return returned;
}

// D (m x n, column-major) = op(A) op(B) + beta D [+ bias over rows]
static void lt_matmul(vb_ctx *ctx, const lt_problem &p) {
    cuda_impl *c = cuda_impl_of(ctx);
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if (p.ab_type == CUDA_R_32F && c->tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;

    cublasLtMatmulDesc_t op;
    CUBLASCHECK(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
    cublasOperation_t ta = p.transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = p.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLASCHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLASCHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    const cudaDataType_t b_type = p.fp8 ? p.b_type : p.ab_type;
    if (p.fp8) {
        CUBLASCHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &p.a_scale,
                                                   sizeof p.a_scale));
        CUBLASCHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p.b_scale,
                                                   sizeof p.b_scale));
        const int8_t fast = p.fast_accum ? 1 : 0;
        CUBLASCHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    }
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    if (p.bias) {
        epi = CUBLASLT_EPILOGUE_BIAS;
        CUBLASCHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        CUBLASCHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias,
                                                   sizeof p.bias));
        int32_t bias_type = (int32_t)p.cd_type; // the bias is stored like D
        CUBLASCHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                   &bias_type, sizeof bias_type));
    }

    cublasLtMatrixLayout_t la, lb, lc;
    CUBLASCHECK(cublasLtMatrixLayoutCreate(&la, p.ab_type, p.transa ? p.k : p.m,
                                           p.transa ? p.m : p.k, p.lda));
    CUBLASCHECK(cublasLtMatrixLayoutCreate(&lb, b_type, p.transb ? p.n : p.k,
                                           p.transb ? p.k : p.n, p.ldb));
    CUBLASCHECK(cublasLtMatrixLayoutCreate(&lc, p.cd_type, p.m, p.n, p.ldd));

    cuda_gemm_key key;
    memset(&key, 0, sizeof key); // the cache compares keys bytewise
    key.transa = p.transa;
    key.transb = p.transb;
    key.m = p.m;
    key.n = p.n;
    key.k = p.k;
    key.lda = p.lda;
    key.ldb = p.ldb;
    key.ldd = p.ldd;
    key.ab_type = (int)p.ab_type;
    key.b_type = (int)b_type;
    key.scaled = p.fp8;
    key.fast_accum = p.fp8 && p.fast_accum;
    key.cd_type = (int)p.cd_type;
    key.compute = (int)compute;
    key.epilogue = (int)epi;
    key.beta_nonzero = p.beta != 0.0f;
    key.align_a = ptr_alignment(p.A);
    key.align_b = ptr_alignment(p.B);
    key.align_c = ptr_alignment(p.D);
    key.align_d = ptr_alignment(p.D);
    key.align_bias = p.bias ? ptr_alignment(p.bias) : 0;
    const float alpha = 1.0f;
    const cublasLtMatmulAlgo_t *cached = lt_cached(c, key);
    if (cached) {
        CUBLASCHECK(cublasLtMatmul(c->lt, op, &alpha, p.A, la, p.B, lb, &p.beta, p.D, lc, p.D, lc, cached,
                                   c->lt_workspace, c->lt_workspace_bytes, c->stream));
    } else {
        // the first call of a problem (a step before any graph is recorded):
        // the first candidate cuBLASLt runs is kept
        cublasLtMatmulHeuristicResult_t res[LT_CANDIDATES];
        const int n = lt_candidates(c, key, op, la, lb, lc, res);
        cublasStatus_t st = CUBLAS_STATUS_NOT_SUPPORTED;
        int i = 0;
        for (; i < n; i++) {
            st = cublasLtMatmul(c->lt, op, &alpha, p.A, la, p.B, lb, &p.beta, p.D, lc, p.D, lc, &res[i].algo,
                                c->lt_workspace, c->lt_workspace_bytes, c->stream);
            if (st != CUBLAS_STATUS_NOT_SUPPORTED) break;
        }
        if (st == CUBLAS_STATUS_NOT_SUPPORTED)
            vb_cuda_die("cuBLASLt refused every one of the %d algorithms its heuristic offered for m=%d n=%d k=%d "
                        "(transa %d transb %d, operand types %d/%d, output type %d, epilogue %d, fp8 %d, "
                        "alignments %d/%d/%d/%d): CUBLAS_STATUS_NOT_SUPPORTED (CUBLASLT_LOG_LEVEL=1 says why)",
                        n, key.m, key.n, key.k, key.transa, key.transb, key.ab_type, key.b_type, key.cd_type,
                        key.epilogue, key.scaled, key.align_a, key.align_b, key.align_c, key.align_d);
        CUBLASCHECK(st);
        lt_cache_put(c, key, res[i].algo);
    }
    CUBLASCHECK(cublasLtMatrixLayoutDestroy(la));
    CUBLASCHECK(cublasLtMatrixLayoutDestroy(lb));
    CUBLASCHECK(cublasLtMatrixLayoutDestroy(lc));
    CUBLASCHECK(cublasLtMatmulDescDestroy(op));
}

// out[N,OC] = bias broadcast over rows (or 0): the product of an empty (C = 0) reduction
template <typename T>
__global__ void fill_rows_kernel(T *out, const T *bias, int N, int OC) {
    size_t n = (size_t)N * OC;
    CUDA_GRID_LOOP(i, n) out[i] = bias ? bias[i % OC] : from_f<T>(0.0f);
}

static void fill_rows(vb_ctx *ctx, vb_act *out, const vb_act *bias, int N, int OC) {
    dispatch_act(ctx->act, [&](auto tag) {
        typedef typename decltype(tag)::type T;
        fill_rows_kernel<T><<<cuda_blocks((size_t)N * OC, 256), 256, 0, cuda_stream(ctx)>>>(
            (T *)out, (const T *)bias, N, OC);
        CUDA_LAUNCH_CHECK();
    });
}

// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]
void cuda_matmul_forward(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *weight,
                         const vb_act *bias, int N, int C, int OC) {
    NvtxRange r("matmul_forward");
    if (N <= 0 || OC <= 0) return;
    if (C <= 0) {
        fill_rows(ctx, out, bias, N, OC);
        return;
    }
    lt_problem p;
    memset(&p, 0, sizeof p);
    p.transa = true;  // A = W^T stored C x OC (ld C), used as OC x C
    p.transb = false; // B = inp^T stored C x N (ld C)
    p.m = OC;
    p.n = N;
    p.k = C;
    p.A = weight;
    p.lda = C;
    p.B = inp;
    p.ldb = C;
    p.D = out;
    p.ldd = OC;
    p.ab_type = p.cd_type = cuda_data_type(ctx->act);
    p.beta = 0.0f;
    p.bias = bias;
    lt_matmul(ctx, p);
}

// pre[N,OC] = inp @ weight^T + bias; out = gelu(pre) (exact erf)
void cuda_matmul_bias_gelu_forward(vb_ctx *ctx, vb_act *pre, vb_act *out, const vb_act *inp,
                                   const vb_act *weight, const vb_act *bias, int N, int C, int OC) {
    NvtxRange r("matmul_bias_gelu_forward");
    if (N <= 0 || OC <= 0) return;
    cuda_matmul_forward(ctx, pre, inp, weight, bias, N, C, OC);
    cuda_gelu_act(ctx, out, pre, (size_t)N * OC);
}

// dinp[N,C] = (+=) dout[N,OC] @ weight[OC,C]; dweight[OC,C] += dout^T @ inp;
// dbias[OC] += column sums of dout
void cuda_matmul_backward(vb_ctx *ctx, vb_act *dinp, float *dweight, float *dbias,
                          const vb_act *dout, const vb_act *inp, const vb_act *weight, int N, int C,
                          int OC, int accumulate_dinp) {
    NvtxRange r("matmul_backward");
    if (N <= 0) return;
    if (dbias && OC > 0) cuda_bias_backward(ctx, dbias, dout, N, OC);
    if (C <= 0) return; // dinp and dweight have no entries
    if (OC <= 0) {
        // an empty product: dinp is 0 (or unchanged); dweight has no entries
        if (dinp && !accumulate_dinp)
            CUDACHECK(cudaMemsetAsync(dinp, 0, (size_t)N * C * vb_dtype_size(ctx->act),
                                      cuda_stream(ctx)));
        return;
    }
    const cudaDataType_t act = cuda_data_type(ctx->act);
    if (dinp) {
        lt_problem p;
        memset(&p, 0, sizeof p);
        p.transa = false; // A = W^T: stored C x OC (ld C)
        p.transb = false; // B = dout^T: stored OC x N (ld OC)
        p.m = C;
        p.n = N;
        p.k = OC;
        p.A = weight;
        p.lda = C;
        p.B = dout;
        p.ldb = OC;
        p.D = dinp;
        p.ldd = C;
        p.ab_type = p.cd_type = act;
        p.beta = accumulate_dinp ? 1.0f : 0.0f;
        lt_matmul(ctx, p);
    }
    if (dweight) {
        lt_problem p;
        memset(&p, 0, sizeof p);
        p.transa = false; // A = inp^T: stored C x N (ld C)
        p.transb = true;  // B = dout^T stored OC x N (ld OC), used as N x OC
        p.m = C;
        p.n = OC;
        p.k = N;
        p.A = inp;
        p.lda = C;
        p.B = dout;
        p.ldb = OC;
        p.D = dweight;
        p.ldd = C;
        p.ab_type = act;
        p.cd_type = CUDA_R_32F;
        p.beta = 1.0f;
        lt_matmul(ctx, p);
    }
}

// ---------------------------------------------------------------------------
// amp_mode fp8: the operands cast to FP8 bytes (cuda_fp8.cu) with the
// recipe's scales, the products through cuBLASLt's FP8 GEMMs, divided back
// by the scales (A/B scale pointers = the inverse scales the casts wrote).
// Hopper's FP8 tensor cores take only the "TN" form (op(A) = A^T, op(B) = B
// in column-major terms) with leading dimensions a multiple of 16 bytes, so
// the backward GEMMs read transposed copies the casts write beside the
// plain ones:
//   forward  out^T (OC x N)  = op_T(W8) . x8           (as the bf16 forward)
//   dinp     dinp^T (C x N)  = op_T(W8^T) . g8         (W8^T stored [C,OC])
//   dweight  dW^T (C x OC)  += op_T(x8^T) . g8^T       (both [.,n_pad], zero-padded)
// The forward accumulates with fast accumulation, the gradients without, as
// Transformer Engine does. D is bf16 (dW float32, beta 1).

static const cudaDataType_t fp8_type[2] = {CUDA_R_8F_E4M3, CUDA_R_8F_E5M2};

// D (m x n) = beta D + (a_scale b_scale) op_T(A) . B, A E4M3 (lda) and B
// of format fb (ldb), the form every FP8 GEMM here takes
static void fp8_matmul(vb_ctx *ctx, int m, int n, int k, const void *A, int lda, const void *B, int ldb,
                       vb_fp8_format fb, void *D, int ldd, cudaDataType_t d_type, float beta, const void *bias,
                       const float *a_scale, const float *b_scale, bool fast_accum) {
    lt_problem p;
    memset(&p, 0, sizeof p);
    p.transa = true;
    p.transb = false;
    p.m = m;
    p.n = n;
    p.k = k;
    p.A = A;
    p.lda = lda;
    p.B = B;
    p.ldb = ldb;
    p.D = D;
    p.ldd = ldd;
    p.ab_type = fp8_type[VB_FP8_E4M3];
    p.b_type = fp8_type[fb];
    p.cd_type = d_type;
    p.beta = beta;
    p.bias = bias;
    p.fp8 = true;
    p.a_scale = a_scale;
    p.b_scale = b_scale;
    p.fast_accum = fast_accum;
    lt_matmul(ctx, p);
}

void cuda_fp8_matmul_forward(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *weight, const vb_act *bias,
                             int N, int C, int OC, const vb_fp8_gemm *g) {
    NvtxRange r("fp8_matmul_forward");
    if (N <= 0 || OC <= 0 || C <= 0) vb_cuda_die("fp8_matmul_forward: empty GEMM N=%d C=%d OC=%d", N, C, OC);
    const cuda_fp8_layout L = cuda_fp8_layout_of(N, C, OC);
    unsigned char *s = (unsigned char *)g->scratch;
    float *inv_x = cuda_fp8_inv_scale(s, CUDA_FP8_INV_X), *inv_w = cuda_fp8_inv_scale(s, CUDA_FP8_INV_W);
    cuda_fp8_cast(ctx, s + L.x, NULL, 0, inp, N, C, g->scale_x, inv_x, g->amax_x, VB_FP8_E4M3);
    cuda_fp8_cast(ctx, s + L.w, NULL, 0, weight, OC, C, g->scale_w, inv_w, g->amax_w, VB_FP8_E4M3);
    // out^T (OC x N) = op_T(W8: C x OC, ld C) . x8 (C x N, ld C), fast accumulation
    fp8_matmul(ctx, OC, N, C, s + L.w, C, s + L.x, C, VB_FP8_E4M3, out, OC, cuda_data_type(ctx->act), 0.0f, bias,
               inv_w, inv_x, true);
}

void cuda_fp8_matmul_backward(vb_ctx *ctx, vb_act *dinp, float *dweight, float *dbias, const vb_act *dout,
                              const vb_act *inp, const vb_act *weight, int N, int C, int OC, int accumulate_dinp,
                              const vb_fp8_gemm *g) {
    NvtxRange r("fp8_matmul_backward");
    if (N <= 0 || OC <= 0 || C <= 0) vb_cuda_die("fp8_matmul_backward: empty GEMM N=%d C=%d OC=%d", N, C, OC);
    // the bias gradient from the unquantised output gradient
    if (dbias) cuda_bias_backward(ctx, dbias, dout, N, OC);
    if (!dinp && !dweight) return;
    const cuda_fp8_layout L = cuda_fp8_layout_of(N, C, OC);
    unsigned char *s = (unsigned char *)g->scratch;
    float *inv_x = cuda_fp8_inv_scale(s, CUDA_FP8_INV_X), *inv_w = cuda_fp8_inv_scale(s, CUDA_FP8_INV_W);
    float *inv_g = cuda_fp8_inv_scale(s, CUDA_FP8_INV_G);
    // one cast of dout records its amax once, whichever copies are needed
    cuda_fp8_cast(ctx, dinp ? s + L.g : NULL, dweight ? s + L.g_t : NULL, L.n_pad, dout, N, OC, g->scale_g, inv_g,
                  g->amax_g, VB_FP8_E5M2);
    if (dinp) {
        cuda_fp8_cast(ctx, NULL, s + L.w_t, OC, weight, OC, C, g->scale_w, inv_w, NULL, VB_FP8_E4M3);
        // A = W^T stored [C,OC]: column-major OC x C (ld OC), used as C x OC;
        // B = dout stored [N,OC]: column-major OC x N (ld OC)
        fp8_matmul(ctx, C, N, OC, s + L.w_t, OC, s + L.g, OC, VB_FP8_E5M2, dinp, C, cuda_data_type(ctx->act),
                   accumulate_dinp ? 1.0f : 0.0f, NULL, inv_w, inv_g, false);
    }
    if (dweight) {
        cuda_fp8_cast(ctx, NULL, s + L.x_t, L.n_pad, inp, N, C, g->scale_x, inv_x, NULL, VB_FP8_E4M3);
        // A = inp^T stored [C,n_pad]: column-major n_pad x C, used as C x n_pad;
        // B = dout^T stored [OC,n_pad]: column-major n_pad x OC; the padding
        // rows are zeros on both sides
        fp8_matmul(ctx, C, OC, L.n_pad, s + L.x_t, L.n_pad, s + L.g_t, L.n_pad, VB_FP8_E5M2, dweight, C, CUDA_R_32F,
                   1.0f, NULL, inv_x, inv_g, false);
    }
}
