/* cuda_attention_cudnn.cu: cuDNN's fused flash attention (its graph API),
 * the `attention: cudnn` alternative to vitbench's own kernels
 * (cuda_attention_tc.cu), same contract: q[B,Tq,D], k/v[B,Tk,D] with head h
 * at columns [h*HD, (h+1)*HD), out[B,Tq,D], lse[B,NH,Tq] the natural-log
 * log-sum-exp of each row of scaled scores (cuDNN's softmax "stats" are
 * exactly that, so either implementation's backward can follow either
 * forward). bfloat16 and float16 only: cuDNN has no float32 fused attention.
 *
 * The graphs are the operation graphs cuDNN's runtime recognises as
 * scaled-dot-product attention, built node by node with the backend API:
 *
 *   forward   S = Q K^T * scale; M = rowmax(S); E = exp(S - M); Z = rowsum(E)
 *             stats = M + log(Z); O = (E / Z) V
 *   backward  Dd = rowsum(dO * O); P = exp(Q K^T * scale - stats)
 *             dV = P^T dO; dS = P * (dO V^T - Dd) * scale
 *             dK = dS^T Q; dQ = dS K (accumulated in float32, then cast)
 *
 * Our [B,T,D] buffers are cuDNN's b,h,s,d tensors with strides
 * (T*D, HD, D, 1); K and V enter the products transposed by their strides.
 * One execution plan per (direction, dtype, shape) is built on first use
 * (heuristics mode A, the first configuration that finalizes) and cached in
 * the context; its workspace, the backward's float32 Dd and dQ accumulator
 * live in one device buffer of the context that grows to the largest need.
 * Every cuDNN call goes through CUDNNCHECK, which names the call and the
 * library's last error message.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/cuda_common.cuh"

#ifdef VB_HAVE_CUDNN
#include <cudnn.h>

#include <vector>

[[noreturn]] static void cudnn_fail(const char *call, cudnnStatus_t st, const char *file, int line) {
    char msg[512] = "";
    cudnnGetLastErrorString(msg, sizeof msg);
    for (char *p = msg; *p; p++)
        if (*p == '\n') *p = ' ';
    vb_cuda_die("cuDNN call %s failed: %s%s%s (%s:%d)", call, cudnnGetErrorString(st),
                msg[0] ? ": " : "", msg, file, line);
}

#define CUDNNCHECK(call)                                                       \
    do {                                                                       \
        cudnnStatus_t vb_cudnn_st_ = (call);                                   \
        if (vb_cudnn_st_ != CUDNN_STATUS_SUCCESS)                              \
            cudnn_fail(#call, vb_cudnn_st_, __FILE__, __LINE__);               \
    } while (0)

namespace {

typedef cudnnBackendDescriptor_t desc_t;

enum : int64_t {
    UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_DO, UID_DQ, UID_DK, UID_DV, UID_ONE,
    UID_DD, UID_DQ_ACC, UID_VIRTUAL = 100
};

struct dims4 {
    int64_t d[4];
};

// one operation graph under construction; owns every descriptor it creates
struct sdpa_graph {
    std::vector<desc_t> owned, ops;
    int64_t next_uid = UID_VIRTUAL;

    ~sdpa_graph() {
        for (desc_t d : owned) cudnnBackendDestroyDescriptor(d);
    }
    desc_t create(cudnnBackendDescriptorType_t type) {
        desc_t d;
        CUDNNCHECK(cudnnBackendCreateDescriptor(type, &d));
        owned.push_back(d);
        return d;
    }
    static void set(desc_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                    int64_t count, const void *value) {
        CUDNNCHECK(cudnnBackendSetAttribute(d, name, type, count, value));
    }
    static void set_desc(desc_t d, cudnnBackendAttributeName_t name, desc_t value) {
        set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
    }
    desc_t tensor(int64_t uid, cudnnDataType_t dt, dims4 dims, dims4 strides, bool is_virtual,
                  bool by_value = false) {
        desc_t t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        const int64_t align = 16;
        set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
        set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.d);
        set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.d);
        set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
        set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
        set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
        if (by_value) set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
        CUDNNCHECK(cudnnBackendFinalize(t));
        return t;
    }
    // an intermediate: packed row-major strides unless given
    desc_t virt(cudnnDataType_t dt, dims4 dims) {
        dims4 st = {{dims.d[1] * dims.d[2] * dims.d[3], dims.d[2] * dims.d[3], dims.d[3], 1}};
        return tensor(next_uid++, dt, dims, st, true);
    }
    desc_t virt_strided(cudnnDataType_t dt, dims4 dims, dims4 strides) {
        return tensor(next_uid++, dt, dims, strides, true);
    }
    desc_t scalar(int64_t uid) {
        return tensor(uid, CUDNN_DATA_FLOAT, dims4{{1, 1, 1, 1}}, dims4{{1, 1, 1, 1}}, false, true);
    }
    void add_op(desc_t op) {
        CUDNNCHECK(cudnnBackendFinalize(op));
        ops.push_back(op);
    }
    void matmul(desc_t a, desc_t b, desc_t c) {
        desc_t md = create(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
        cudnnDataType_t comp = CUDNN_DATA_FLOAT;
        set(md, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
        CUDNNCHECK(cudnnBackendFinalize(md));
        desc_t op = create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, md);
        add_op(op);
    }
    // y = mode(x[, b])
    void pointwise(cudnnPointwiseMode_t mode, desc_t x, desc_t b, desc_t y) {
        desc_t pd = create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
        cudnnDataType_t prec = CUDNN_DATA_FLOAT;
        set(pd, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
        set(pd, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
        CUDNNCHECK(cudnnBackendFinalize(pd));
        desc_t op = create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pd);
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
        if (b) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
        add_op(op);
    }
    // y (last dimension 1) = reduce(x) along the dimensions where y is 1
    void reduction(cudnnReduceTensorOp_t mode, desc_t x, desc_t y) {
        desc_t rd = create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
        cudnnDataType_t comp = CUDNN_DATA_FLOAT;
        set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
        set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
        CUDNNCHECK(cudnnBackendFinalize(rd));
        desc_t op = create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd);
        add_op(op);
    }
    // y = x viewed with y's dimensions and strides (a transpose here)
    void reshape(desc_t x, desc_t y) {
        desc_t op = create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
        set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
        add_op(op);
    }

    // the operation graph, then the first heuristics-A configuration that
    // finalizes into a plan; NULL (with why) when none does
    desc_t plan(cudnnHandle_t handle, char *why, size_t whylen) {
        desc_t graph = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
        set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)ops.size(),
            ops.data());
        set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
        cudnnStatus_t st = cudnnBackendFinalize(graph);
        if (st != CUDNN_STATUS_SUCCESS) {
            char msg[256] = "";
            cudnnGetLastErrorString(msg, sizeof msg);
            snprintf(why, whylen, "operation graph: %s %s", cudnnGetErrorString(st), msg);
            return NULL;
        }
        desc_t heur = create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
        set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
        set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
        CUDNNCHECK(cudnnBackendFinalize(heur));
        int64_t count = 0;
        CUDNNCHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
        if (count <= 0) {
            snprintf(why, whylen, "cuDNN's heuristics offer no engine for this graph");
            return NULL;
        }
        std::vector<desc_t> cfgs((size_t)count);
        for (auto &c : cfgs) c = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        int64_t got = 0;
        CUDNNCHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgs.data()));
        snprintf(why, whylen, "none of cuDNN's %lld engine configurations finalized", (long long)got);
        for (int64_t i = 0; i < got; i++) {
            desc_t p;
            CUDNNCHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p));
            set(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
            set_desc(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[(size_t)i]);
            if (cudnnBackendFinalize(p) == CUDNN_STATUS_SUCCESS) return p; // the caller owns it
            cudnnBackendDestroyDescriptor(p);
        }
        return NULL;
    }
};

struct sdpa_key {
    int bwd, dtype, B, Tq, Tk, NH, HD;
    bool operator==(const sdpa_key &o) const { return memcmp(this, &o, sizeof o) == 0; }
};

struct sdpa_plan {
    sdpa_key key;
    desc_t plan;
    int64_t workspace; // the plan's own, in bytes
};

} // namespace

struct cuda_cudnn_state {
    cudnnHandle_t handle;
    std::vector<sdpa_plan> plans;
    void *buf;
    size_t buf_bytes;
};

static cuda_cudnn_state *cudnn_state(vb_ctx *ctx) {
    cuda_impl *c = cuda_impl_of(ctx);
    if (!c->cudnn) {
        cuda_cudnn_state *s = new cuda_cudnn_state();
        CUDNNCHECK(cudnnCreate(&s->handle));
        CUDNNCHECK(cudnnSetStream(s->handle, c->stream));
        c->cudnn = s;
    }
    return c->cudnn;
}

static void *cudnn_buffer(vb_ctx *ctx, cuda_cudnn_state *s, size_t bytes) {
    if (bytes > s->buf_bytes) {
        // the stream may still use the old buffer
        CUDACHECK(cudaStreamSynchronize(cuda_stream(ctx)));
        if (s->buf) CUDACHECK(cudaFree(s->buf));
        CUDACHECK(cudaMalloc(&s->buf, bytes));
        s->buf_bytes = bytes;
        cuda_impl_of(ctx)->workspace_gen++; // recorded graphs may point into the old one
    }
    return s->buf;
}

static const sdpa_plan &get_plan(vb_ctx *ctx, cuda_cudnn_state *s, const sdpa_key &key) {
    for (const sdpa_plan &p : s->plans)
        if (p.key == key) return p;
    const int64_t B = key.B, Tq = key.Tq, Tk = key.Tk, NH = key.NH, HD = key.HD, D = NH * HD;
    const cudnnDataType_t io = key.dtype == VB_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    const dims4 q_dims = {{B, NH, Tq, HD}}, q_str = {{Tq * D, HD, D, 1}};
    const dims4 kv_dims = {{B, NH, Tk, HD}}, kv_str = {{Tk * D, HD, D, 1}};
    const dims4 kvT_dims = {{B, NH, HD, Tk}}, kvT_str = {{Tk * D, HD, 1, D}};
    const dims4 s_dims = {{B, NH, Tq, Tk}};
    const dims4 row_dims = {{B, NH, Tq, 1}}, row_str = {{NH * Tq, Tq, 1, 1}};
    sdpa_graph g;
    desc_t Q = g.tensor(UID_Q, io, q_dims, q_str, false);
    desc_t KT = g.tensor(UID_K, io, kvT_dims, kvT_str, false);
    desc_t Stats = g.tensor(UID_STATS, f32, row_dims, row_str, false);
    desc_t scale = g.scalar(UID_SCALE);
    // S = Q K^T * scale
    desc_t S = g.virt(f32, s_dims);
    g.matmul(Q, KT, S);
    desc_t Ss = g.virt(f32, s_dims);
    g.pointwise(CUDNN_POINTWISE_MUL, S, scale, Ss);
    if (!key.bwd) {
        desc_t V = g.tensor(UID_V, io, kv_dims, kv_str, false);
        desc_t O = g.tensor(UID_O, io, q_dims, q_str, false);
        desc_t M = g.virt(f32, row_dims), Sm = g.virt(f32, s_dims), E = g.virt(f32, s_dims);
        desc_t Z = g.virt(f32, row_dims), logZ = g.virt(f32, row_dims);
        g.reduction(CUDNN_REDUCE_TENSOR_MAX, Ss, M);
        g.pointwise(CUDNN_POINTWISE_SUB, Ss, M, Sm);
        g.pointwise(CUDNN_POINTWISE_EXP, Sm, NULL, E);
        g.reduction(CUDNN_REDUCE_TENSOR_ADD, E, Z);
        g.pointwise(CUDNN_POINTWISE_LOG, Z, NULL, logZ);
        g.pointwise(CUDNN_POINTWISE_ADD, M, logZ, Stats);
        desc_t P = g.virt(io, s_dims); // the second product's operand, in the I/O type
        g.pointwise(CUDNN_POINTWISE_DIV, E, Z, P);
        g.matmul(P, V, O);
    } else {
        desc_t VT = g.tensor(UID_V, io, kvT_dims, kvT_str, false);
        desc_t O = g.tensor(UID_O, io, q_dims, q_str, false);
        desc_t dO = g.tensor(UID_DO, io, q_dims, q_str, false);
        desc_t dQ = g.tensor(UID_DQ, io, q_dims, q_str, false);
        desc_t dK = g.tensor(UID_DK, io, kv_dims, kv_str, false);
        desc_t dV = g.tensor(UID_DV, io, kv_dims, kv_str, false);
        desc_t one = g.scalar(UID_ONE);
        desc_t Dd = g.tensor(UID_DD, f32, row_dims, row_str, false);
        desc_t dQacc = g.tensor(UID_DQ_ACC, f32, q_dims, dims4{{NH * Tq * HD, Tq * HD, HD, 1}}, false);
        // Dd = rowsum(dO * O)
        desc_t dOO = g.virt_strided(f32, q_dims, dims4{{NH * Tq * HD, Tq * HD, NH * HD, 1}});
        g.pointwise(CUDNN_POINTWISE_MUL, dO, O, dOO);
        desc_t dOOs = g.virt(f32, row_dims);
        g.reduction(CUDNN_REDUCE_TENSOR_ADD, dOO, dOOs);
        g.pointwise(CUDNN_POINTWISE_MUL, dOOs, one, Dd);
        // P = exp(S * scale - stats); dV = P^T dO
        desc_t Sm = g.virt(f32, s_dims), P = g.virt(f32, s_dims);
        g.pointwise(CUDNN_POINTWISE_SUB, Ss, Stats, Sm);
        g.pointwise(CUDNN_POINTWISE_EXP, Sm, NULL, P);
        const dims4 sT_dims = {{B, NH, Tk, Tq}}, sT_str = {{NH * Tq * Tk, Tq * Tk, 1, Tk}};
        desc_t PT = g.virt_strided(io, sT_dims, sT_str);
        g.reshape(P, PT);
        g.matmul(PT, dO, dV);
        // dS = P * (dO V^T - Dd) * scale
        desc_t dP = g.virt(f32, s_dims), dPm = g.virt(f32, s_dims), dS0 = g.virt(f32, s_dims);
        desc_t dS = g.virt(f32, s_dims);
        g.matmul(dO, VT, dP);
        g.pointwise(CUDNN_POINTWISE_SUB, dP, Dd, dPm);
        g.pointwise(CUDNN_POINTWISE_MUL, dPm, P, dS0);
        g.pointwise(CUDNN_POINTWISE_MUL, dS0, scale, dS);
        // dK = dS^T Q
        desc_t dST = g.virt_strided(io, sT_dims, sT_str);
        g.reshape(dS, dST);
        g.matmul(dST, Q, dK);
        // dQ = dS K, in float32, then cast
        desc_t K = g.virt_strided(f32, kv_dims, kv_str);
        g.reshape(KT, K);
        g.matmul(dS, K, dQacc);
        g.pointwise(CUDNN_POINTWISE_IDENTITY, dQacc, NULL, dQ);
    }
    char why[512];
    desc_t plan = g.plan(cudnn_state(ctx)->handle, why, sizeof why);
    if (!plan)
        vb_cuda_die("cuDNN has no fused attention %s for B=%lld Tq=%lld Tk=%lld heads=%lld "
                    "head_dim=%lld %s (cuDNN %zu): %s; use attention: flash",
                    key.bwd ? "backward" : "forward", (long long)B, (long long)Tq, (long long)Tk,
                    (long long)NH, (long long)HD, vb_dtype_name((vb_dtype)key.dtype),
                    cudnnGetVersion(), why);
    sdpa_plan p = {key, plan, 0};
    CUDNNCHECK(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                        CUDNN_TYPE_INT64, 1, NULL, &p.workspace));
    s->plans.push_back(p);
    return s->plans.back();
}

static void execute(cuda_cudnn_state *s, const sdpa_plan &p, const std::vector<int64_t> &uids,
                    const std::vector<void *> &ptrs, void *workspace) {
    desc_t pack;
    CUDNNCHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
    CUDNNCHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                        (int64_t)uids.size(), uids.data()));
    CUDNNCHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                        CUDNN_TYPE_VOID_PTR, (int64_t)ptrs.size(), ptrs.data()));
    CUDNNCHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
                                        1, &workspace));
    CUDNNCHECK(cudnnBackendFinalize(pack));
    CUDNNCHECK(cudnnBackendExecute(s->handle, p.plan, pack));
    CUDNNCHECK(cudnnBackendDestroyDescriptor(pack));
}

static size_t round256(size_t n) { return CEIL_DIV(n, 256) * 256; }

bool cuda_attention_cudnn_available(void) { return true; }

void cuda_attention_cudnn_forward(vb_ctx *ctx, vb_act *out, float *lse, const vb_act *q,
                                  const vb_act *k, const vb_act *v, int B, int Tq, int Tk, int NH,
                                  int HD) {
    cuda_cudnn_state *s = cudnn_state(ctx);
    const sdpa_key key = {0, (int)ctx->act, B, Tq, Tk, NH, HD};
    const sdpa_plan &p = get_plan(ctx, s, key);
    void *ws = cudnn_buffer(ctx, s, round256((size_t)p.workspace) + 256);
    float scale = 1.0f / sqrtf((float)HD);
    execute(s, p, {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE},
            {(void *)q, (void *)k, (void *)v, out, lse, &scale}, ws);
}

void cuda_attention_cudnn_backward(vb_ctx *ctx, vb_act *dq, vb_act *dk, vb_act *dv,
                                   const vb_act *dout, const vb_act *out, const float *lse,
                                   const vb_act *q, const vb_act *k, const vb_act *v, int B, int Tq,
                                   int Tk, int NH, int HD) {
    cuda_cudnn_state *s = cudnn_state(ctx);
    const sdpa_key key = {1, (int)ctx->act, B, Tq, Tk, NH, HD};
    const sdpa_plan &p = get_plan(ctx, s, key);
    const size_t dd_bytes = round256((size_t)B * NH * Tq * sizeof(float));
    const size_t acc_bytes = round256((size_t)B * NH * Tq * HD * sizeof(float));
    char *buf = (char *)cudnn_buffer(ctx, s, dd_bytes + acc_bytes + round256((size_t)p.workspace) + 256);
    float scale = 1.0f / sqrtf((float)HD), one = 1.0f;
    // the accumulator is summed into by the engine
    CUDACHECK(cudaMemsetAsync(buf + dd_bytes, 0, acc_bytes, cuda_stream(ctx)));
    execute(s, p,
            {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_DO, UID_DQ, UID_DK, UID_DV,
             UID_ONE, UID_DD, UID_DQ_ACC},
            {(void *)q, (void *)k, (void *)v, (void *)out, (void *)lse, &scale, (void *)dout, dq,
             dk, dv, &one, buf, buf + dd_bytes},
            buf + dd_bytes + acc_bytes);
}

void cuda_attention_cudnn_release(vb_ctx *ctx) {
    cuda_impl *c = cuda_impl_of(ctx);
    cuda_cudnn_state *s = c->cudnn;
    if (!s) return;
    for (sdpa_plan &p : s->plans) cudnnBackendDestroyDescriptor(p.plan);
    if (s->buf) CUDACHECK(cudaFree(s->buf));
    CUDNNCHECK(cudnnDestroy(s->handle));
    delete s;
    c->cudnn = NULL;
}

#else // !VB_HAVE_CUDNN

bool cuda_attention_cudnn_available(void) { return false; }
void cuda_attention_cudnn_forward(vb_ctx *, vb_act *, float *, const vb_act *, const vb_act *,
                                  const vb_act *, int, int, int, int, int) {
    vb_cuda_die("attention: cudnn needs a build with cuDNN (cudnn.h was not found at configure time)");
}
void cuda_attention_cudnn_backward(vb_ctx *, vb_act *, vb_act *, vb_act *, const vb_act *,
                                   const vb_act *, const float *, const vb_act *, const vb_act *,
                                   const vb_act *, int, int, int, int, int) {
    vb_cuda_die("attention: cudnn needs a build with cuDNN (cudnn.h was not found at configure time)");
}
void cuda_attention_cudnn_release(vb_ctx *) {}

#endif
