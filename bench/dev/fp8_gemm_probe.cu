// fp8_gemm_probe.cu: which forms of cuBLASLt's FP8 GEMM this GPU and this
// cuBLASLt run, one line each, to tell a refused problem from a refused
// algorithm. The forms are those kernels/cuda/cuda_matmul.cu uses (E4M3 A
// transposed, B not, float32 compute) and their neighbours: with and
// without the bias epilogue, fast accumulation, the scale pointers in one
// buffer 4 bytes apart or each in its own allocation, C = D or C = NULL,
// bf16 or float32 output, E4M3 or E5M2 B.
//
//   nvcc -arch=sm_90 -O2 -o fp8_gemm_probe bench/dev/fp8_gemm_probe.cu -lcublasLt
//   ./fp8_gemm_probe [m n k]        (default: tiny's q projection, 64 1024 64)
//
// Prints, per form: the heuristic's candidate count and the first candidate
// cublasLtMatmul ran (or the status of the last refusal). Run it with
// CUBLASLT_LOG_LEVEL=1 for cuBLASLt's own reasons.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>

#define CK(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "fp8_gemm_probe: %s: %s (%s:%d)\n", #call, cudaGetErrorString(e_), \
                    __FILE__, __LINE__);                                                      \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)
#define LK(call)                                                                                            \
    do {                                                                                                    \
        cublasStatus_t s_ = (call);                                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                  \
            fprintf(stderr, "fp8_gemm_probe: %s: status %d (%s:%d)\n", #call, (int)s_, __FILE__, __LINE__); \
            exit(1);                                                                                        \
        }                                                                                                   \
    } while (0)

struct form {
    int bias, fast, split_scales, c_null, d_f32, b_e5m2, scales;
};

static cublasLtHandle_t lt;
static void *ws;
static const size_t ws_bytes = 32u << 20;

static void probe(const form &f, int m, int n, int k, void *A, void *B, void *D, void *bias, float *sc_one,
                  float *sc_a, float *sc_b) {
    cublasLtMatmulDesc_t op;
    LK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (f.scales) {
        const float *pa = f.split_scales ? sc_a : sc_one, *pb = f.split_scales ? sc_b : sc_one + 1;
        LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof pa));
        LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof pb));
    }
    const int8_t fast = (int8_t)f.fast;
    LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    const cudaDataType_t dt = f.d_f32 ? CUDA_R_32F : CUDA_R_16BF;
    if (f.bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        cudaDataType_t bt = CUDA_R_16BF; // bf16 bias, as cuBLASLt lists for FP8 with bf16 or float32 output
        LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    cublasLtMatrixLayout_t la, lb, lc;
    LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k));
    LK(cublasLtMatrixLayoutCreate(&lb, f.b_e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3, k, n, k));
    LK(cublasLtMatrixLayoutCreate(&lc, dt, m, n, m));
    cublasLtMatmulPreference_t pref;
    LK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = ws_bytes;
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t res[8] = {};
    int got = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 8, res, &got);
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t st = CUBLAS_STATUS_NOT_SUPPORTED;
    int i = 0;
    for (; hs == CUBLAS_STATUS_SUCCESS && i < got; i++) {
        st = cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, f.c_null ? NULL : D, lc, D, lc, &res[i].algo, ws,
                            ws_bytes, 0);
        if (st == CUBLAS_STATUS_SUCCESS) break;
    }
    cudaError_t sync = cudaDeviceSynchronize();
    printf("fp8 probe m=%d n=%d k=%d bias=%d fast=%d scales=%s c=%s d=%s b=%s: heuristic %d (%d cand.), matmul %s%d "
           "(candidate %d), sync %s\n",
           m, n, k, f.bias, f.fast, !f.scales ? "none" : f.split_scales ? "own" : "4B-apart", f.c_null ? "NULL" : "D",
           f.d_f32 ? "f32" : "bf16", f.b_e5m2 ? "e5m2" : "e4m3", (int)hs, got,
           st == CUBLAS_STATUS_SUCCESS ? "ok " : "status ", (int)st, i, cudaGetErrorString(sync));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
}

int main(int argc, char **argv) {
    int m = 64, n = 1024, k = 64;
    if (argc == 4) m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]);
    if (m < 16 || n < 16 || k < 16) {
        fprintf(stderr, "usage: fp8_gemm_probe [m n k] (each at least 16)\n");
        return 2;
    }
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("fp8 probe: %s (cc %d.%d), cuBLASLt %zu, CUDA runtime %d\n", p.name, p.major, p.minor,
           cublasLtGetVersion(), CUDART_VERSION);
    LK(cublasLtCreate(&lt));
    void *A, *B, *D, *bias;
    float *sc_one, *sc_a, *sc_b;
    CK(cudaMalloc(&ws, ws_bytes));
    CK(cudaMalloc(&A, (size_t)m * k));
    CK(cudaMalloc(&B, (size_t)k * n));
    CK(cudaMalloc(&D, (size_t)m * n * 4));
    CK(cudaMalloc(&bias, (size_t)m * 2));
    CK(cudaMalloc(&sc_one, 256));
    CK(cudaMalloc(&sc_a, 256));
    CK(cudaMalloc(&sc_b, 256));
    // 0x38 is 1.0 in E4M3 (and 0.5 in E5M2's upper half's neighbour): finite values
    CK(cudaMemset(A, 0x38, (size_t)m * k));
    CK(cudaMemset(B, 0x38, (size_t)k * n));
    CK(cudaMemset(bias, 0, (size_t)m * 2));
    const float one[2] = {1.0f, 1.0f};
    CK(cudaMemcpy(sc_one, one, sizeof one, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(sc_a, one, sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(sc_b, one, sizeof(float), cudaMemcpyHostToDevice));
    const form forms[] = {
        // what the forward does today: bias, fast accumulation, scales 4 bytes apart, C = D, bf16 out
        {1, 1, 0, 0, 0, 0, 1},
        {1, 1, 1, 0, 0, 0, 1}, // scales in their own allocations
        {0, 1, 0, 0, 0, 0, 1}, // no bias
        {0, 1, 1, 0, 0, 0, 1},
        {1, 0, 1, 0, 0, 0, 1}, // no fast accumulation
        {1, 1, 1, 1, 0, 0, 1}, // C = NULL
        {0, 1, 1, 1, 0, 0, 1},
        {0, 0, 1, 0, 0, 0, 0}, // no scales at all
        {0, 0, 1, 0, 0, 1, 1}, // the backward's dinp: E5M2 B, no bias
        {0, 0, 1, 0, 1, 1, 1}, // the weight gradient: E5M2 B, float32 out
        {0, 0, 1, 1, 1, 1, 1},
        {0, 0, 0, 0, 1, 1, 1},
    };
    for (const form &f : forms) probe(f, m, n, k, A, B, D, bias, sc_one, sc_a, sc_b);
    cublasLtDestroy(lt);
    return 0;
}
