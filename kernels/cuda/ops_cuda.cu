/* ops_cuda.cu: the CUDA backend's op table, its contexts, memory and events.
 *
 * A context is one non-blocking stream (it does not synchronise with the
 * legacy default stream) plus a cuBLASLt handle, a 32 MiB cuBLASLt workspace
 * and an 8 MiB scratch buffer for the two-pass reductions. Every op of a
 * context is enqueued on its stream, so ops of one context run in call order
 * and share the workspace and scratch safely; two contexts are two queues
 * ordered only by events.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_profiler_api.h>

#include "kernels/alloc_check.h"
#include "kernels/cuda/cuda_common.cuh"


// ---------------------------------------------------------------------------
// error reporting

static const char *host_name(void) {
    static char name[256];
    if (!name[0] && gethostname(name, sizeof name - 1) != 0) strcpy(name, "?");
    return name;
}

static int current_device(void) {
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess) dev = -1;
    return dev;
}

void vb_cuda_die(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *c = msg; *c; c++) // one line in the log
        if (*c == '\n') *c = ' ';
    fflush(stdout);
    fprintf(stderr, "vitbench: internal error: cuda backend: %s\n", msg);
    exit(1);
}

void vb_cuda_fail(const char *call, cudaError_t err, const char *file, int line) {
    vb_cuda_die("CUDA call %s failed: %s (%s) on host %s, device %d, at %s:%d", call,
                    cudaGetErrorName(err), cudaGetErrorString(err), host_name(), current_device(),
                    file, line);
}

void vb_cublas_fail(const char *call, cublasStatus_t st, const char *file, int line) {
    vb_cuda_die("cuBLASLt call %s failed: %s (%s) on host %s, device %d, at %s:%d", call,
                    cublasLtGetStatusName(st), cublasLtGetStatusString(st), host_name(),
                    current_device(), file, line);
}

void *cuda_scratch(vb_ctx *ctx, size_t bytes, const char *op) {
    cuda_impl *c = cuda_impl_of(ctx);
    if (bytes > c->scratch_bytes)
        vb_cuda_die("CUDA %s needs %zu bytes of reduction scratch, the context has %zu", op,
                        bytes, c->scratch_bytes);
    return c->scratch;
}

// ---------------------------------------------------------------------------
// context

#ifndef VB_CUDA_ARCHS
#define VB_CUDA_ARCHS "?"
#endif

// launched never: ctx_create asks the runtime whether it has an image for the device
__global__ void probe_kernel(void) {}

static vb_ctx *cuda_ctx_create(const vb_ctx_opts *opts, char *err, size_t errlen) {
    vb_ctx_opts def;
    memset(&def, 0, sizeof def);
    if (!opts) opts = &def;
    if (err && errlen) err[0] = '\0';
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        if (err)
            snprintf(err, errlen, "no CUDA device visible on host %s (%s)", host_name(),
                     e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
        cudaGetLastError(); // a failed probe must not stay as the sticky error
        return NULL;
    }
    if (opts->device < 0 || opts->device >= count) {
        if (err)
            snprintf(err, errlen, "CUDA device %d requested but host %s has %d (0..%d)",
                     opts->device, host_name(), count, count - 1);
        return NULL;
    }
    if (opts->act != VB_DTYPE_F32 && opts->act != VB_DTYPE_BF16 && opts->act != VB_DTYPE_F16) {
        if (err) snprintf(err, errlen, "unknown activation dtype %d", (int)opts->act);
        return NULL;
    }
    cudaDeviceProp prop;
    CUDACHECK(cudaGetDeviceProperties(&prop, opts->device));
    CUDACHECK(cudaSetDevice(opts->device));
    // a device this build has no machine code (or PTX) for fails here, with a
    // reason, instead of at the first kernel launch
    cudaFuncAttributes fa;
    e = cudaFuncGetAttributes(&fa, probe_kernel);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (err)
            snprintf(err, errlen,
                     "CUDA device %d (%s, compute capability %d.%d) cannot run this build's kernels "
                     "(built for CMAKE_CUDA_ARCHITECTURES %s): %s",
                     opts->device, prop.name, prop.major, prop.minor, VB_CUDA_ARCHS,
                     cudaGetErrorString(e));
        return NULL;
    }

    if (opts->attention == VB_ATTENTION_CUDNN && !cuda_attention_cudnn_available()) {
        if (err) snprintf(err, errlen, "attention = cudnn: this build has no cuDNN (cudnn.h and libcudnn were not found at configure time; set CUDNN_ROOT)");
        return NULL;
    }
    vb_ctx *ctx = (vb_ctx *)vb_kernels_calloc_check(1, sizeof(vb_ctx));
    cuda_impl *c = (cuda_impl *)vb_kernels_calloc_check(1, sizeof(cuda_impl));
    ctx->ops = vb_ops_cuda();
    ctx->act = opts->act;
    ctx->device = opts->device;
    ctx->impl = c;
    c->tf32 = opts->tf32 != 0;
    c->cc_major = prop.major;
    c->cc_minor = prop.minor;
    c->attention_cudnn = opts->attention == VB_ATTENTION_CUDNN;
    c->num_sms = prop.multiProcessorCount;
    c->max_smem_optin = prop.sharedMemPerBlockOptin;
    CUDACHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUBLASCHECK(cublasLtCreate(&c->lt));
    c->lt_workspace_bytes = CUDA_LT_WORKSPACE_BYTES;
    c->lt_workspace = ctx->ops->alloc(ctx, c->lt_workspace_bytes);
    c->scratch_bytes = CUDA_SCRATCH_BYTES;
    c->scratch = ctx->ops->alloc(ctx, c->scratch_bytes);
    return ctx;
}

static void cuda_ctx_destroy(vb_ctx *ctx) {
    if (!ctx) return;
    cuda_impl *c = cuda_impl_of(ctx);
    CUDACHECK(cudaStreamSynchronize(c->stream));
    cuda_attention_cudnn_release(ctx);
    CUDACHECK(cudaFree(c->lt_workspace));
    CUDACHECK(cudaFree(c->scratch));
    CUBLASCHECK(cublasLtDestroy(c->lt));
    CUDACHECK(cudaStreamDestroy(c->stream));
    free(c);
    free(ctx);
}

static void cuda_synchronize(vb_ctx *ctx) { CUDACHECK(cudaStreamSynchronize(cuda_stream(ctx))); }

// 0 when the runtime sees no device (or has no driver): the caller decides
static int cuda_device_count(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

static void *cuda_native_queue(vb_ctx *ctx) { return (void *)cuda_stream(ctx); }

static void cuda_device_describe(vb_ctx *ctx, vb_device_desc *d) {
    memset(d, 0, sizeof *d);
    cudaDeviceProp prop;
    CUDACHECK(cudaGetDeviceProperties(&prop, ctx->device));
    int drv = 0, rt = 0;
    CUDACHECK(cudaDriverGetVersion(&drv));
    CUDACHECK(cudaRuntimeGetVersion(&rt));
    snprintf(d->name, sizeof d->name, "%s", prop.name);
    snprintf(d->driver, sizeof d->driver, "CUDA driver %d.%d, runtime %d.%d", drv / 1000, drv % 1000 / 10,
             rt / 1000, rt % 1000 / 10);
    CUDACHECK(cudaDeviceGetPCIBusId(d->pci_bus_id, (int)sizeof d->pci_bus_id, ctx->device));
    d->memory_gib = (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0);
    d->sm_count = prop.multiProcessorCount;
    d->cc_major = prop.major;
    d->cc_minor = prop.minor;
    d->ecc = prop.ECCEnabled ? 1 : 0;
    // clocks are attributes (kHz): CUDA 13's cudaDeviceProp no longer has them
    int khz = 0;
    CUDACHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, ctx->device));
    d->clock_mhz = khz / 1000;
    CUDACHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, ctx->device));
    d->memory_clock_mhz = khz / 1000;
}

// The capture range `nsys profile --capture-range=cudaProfilerApi` records;
// the current device's, which is the context's (one device per process).
static void cuda_profiler_start(vb_ctx *ctx) {
    (void)ctx;
    CUDACHECK(cudaProfilerStart());
}

static void cuda_profiler_stop(vb_ctx *ctx) {
    (void)ctx;
    CUDACHECK(cudaProfilerStop());
}

// ---------------------------------------------------------------------------
// memory

static void *cuda_alloc(vb_ctx *ctx, size_t bytes) {
    void *p = NULL;
    size_t want = bytes ? bytes : 1; // a valid, distinct pointer even for 0 bytes
    cudaError_t e = cudaMalloc(&p, want);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError();
        vb_cuda_die("cudaMalloc of %zu bytes (%.1f MiB) failed on host %s, device %d: %s "
                        "(%.1f MiB free of %.1f MiB)",
                        bytes, bytes / 1048576.0, host_name(), ctx->device, cudaGetErrorString(e),
                        free_b / 1048576.0, total_b / 1048576.0);
    }
    // zero-filled when alloc returns, for every queue of the device
    CUDACHECK(cudaMemsetAsync(p, 0, want, cuda_stream(ctx)));
    CUDACHECK(cudaStreamSynchronize(cuda_stream(ctx)));
    return p;
}

static void cuda_free(vb_ctx *ctx, void *p) {
    (void)ctx;
    if (p) CUDACHECK(cudaFree(p));
}

static void *cuda_alloc_host(vb_ctx *ctx, size_t bytes) {
    void *p = NULL;
    size_t want = bytes ? bytes : 1;
    cudaError_t e = cudaMallocHost(&p, want);
    if (e != cudaSuccess) {
        cudaGetLastError();
        vb_cuda_die("cudaMallocHost (page-locked) of %zu bytes (%.1f MiB) failed on host %s, "
                        "device %d: %s",
                        bytes, bytes / 1048576.0, host_name(), ctx->device, cudaGetErrorString(e));
    }
    memset(p, 0, want);
    return p;
}

static void cuda_free_host(vb_ctx *ctx, void *p) {
    (void)ctx;
    if (p) CUDACHECK(cudaFreeHost(p));
}

static void cuda_memcpy_h2d(vb_ctx *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes)
        CUDACHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda_stream(ctx)));
}

static void cuda_memcpy_d2h(vb_ctx *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes)
        CUDACHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cuda_stream(ctx)));
}

static void cuda_memcpy_d2d(vb_ctx *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes)
        CUDACHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_stream(ctx)));
}

static void cuda_zero(vb_ctx *ctx, void *p, size_t bytes) {
    if (bytes) CUDACHECK(cudaMemsetAsync(p, 0, bytes, cuda_stream(ctx)));
}

// ---------------------------------------------------------------------------
// events

struct vb_event {
    cudaEvent_t ev;
};

static vb_event *cuda_event_create(vb_ctx *ctx) {
    (void)ctx;
    vb_event *e = (vb_event *)vb_kernels_calloc_check(1, sizeof(vb_event));
    CUDACHECK(cudaEventCreateWithFlags(&e->ev, cudaEventDefault)); // timing enabled
    return e;
}

static void cuda_event_destroy(vb_ctx *ctx, vb_event *e) {
    (void)ctx;
    if (!e) return;
    CUDACHECK(cudaEventDestroy(e->ev));
    free(e);
}

static void cuda_event_record(vb_ctx *ctx, vb_event *e) {
    CUDACHECK(cudaEventRecord(e->ev, cuda_stream(ctx)));
}

static void cuda_event_wait(vb_ctx *ctx, vb_event *e) {
    CUDACHECK(cudaStreamWaitEvent(cuda_stream(ctx), e->ev, 0));
}

static void cuda_event_synchronize(vb_ctx *ctx, vb_event *e) {
    (void)ctx;
    CUDACHECK(cudaEventSynchronize(e->ev));
}

static double cuda_event_elapsed_ms(vb_ctx *ctx, vb_event *start, vb_event *end) {
    (void)ctx;
    float ms = 0.0f;
    CUDACHECK(cudaEventElapsedTime(&ms, start->ev, end->ev));
    return ms;
}

// ---------------------------------------------------------------------------
// graphs: the step recorded once from the context's stream, replayed as one
// launch (no per-kernel launch cost on the host)

// Thread-local capture: the loader's threads and a second context's copies
// may keep calling the runtime while the step is recorded; only this thread's
// work on this stream is recorded, and an operation a capture cannot hold
// (an allocation, a host wait) fails where it is called, named by CUDACHECK.
static void cuda_graph_capture_begin(vb_ctx *ctx) {
    CUDACHECK(cudaStreamBeginCapture(cuda_stream(ctx), cudaStreamCaptureModeThreadLocal));
}

static void *cuda_graph_capture_end(vb_ctx *ctx) {
    cudaGraph_t graph = NULL;
    CUDACHECK(cudaStreamEndCapture(cuda_stream(ctx), &graph));
    cudaGraphExec_t exec = NULL;
    CUDACHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDACHECK(cudaGraphDestroy(graph)); // the executable graph keeps what it needs
    return (void *)exec;
}

static void cuda_graph_launch(vb_ctx *ctx, void *graph) {
    CUDACHECK(cudaGraphLaunch((cudaGraphExec_t)graph, cuda_stream(ctx)));
}

static void cuda_graph_destroy(vb_ctx *ctx, void *graph) {
    (void)ctx;
    if (graph) CUDACHECK(cudaGraphExecDestroy((cudaGraphExec_t)graph));
}

static unsigned long cuda_workspace_generation(vb_ctx *ctx) { return cuda_impl_of(ctx)->workspace_gen; }

// ---------------------------------------------------------------------------
// the table

// Designated initializers (C++20) in the order of vb_ops: a field added to or
// moved in kernels/ops.h without updating this table fails to compile. The
// table is constant-initialized (no run-time construction, no guard).
static const vb_ops cuda_ops = {
    .name = "cuda",
    .host_memory = 0, // device memory: the model's buffers do not count against host RAM
    .ctx_create = cuda_ctx_create,
    .ctx_destroy = cuda_ctx_destroy,
    .synchronize = cuda_synchronize,
    .device_count = cuda_device_count,
    .native_queue = cuda_native_queue,
    .device_describe = cuda_device_describe,
    .profiler_start = cuda_profiler_start,
    .profiler_stop = cuda_profiler_stop,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .alloc_host = cuda_alloc_host,
    .free_host = cuda_free_host,
    .memcpy_h2d = cuda_memcpy_h2d,
    .memcpy_d2h = cuda_memcpy_d2h,
    .memcpy_d2d = cuda_memcpy_d2d,
    .zero = cuda_zero,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_wait = cuda_event_wait,
    .event_synchronize = cuda_event_synchronize,
    .event_elapsed_ms = cuda_event_elapsed_ms,
    .graph_capture_begin = cuda_graph_capture_begin,
    .graph_capture_end = cuda_graph_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_destroy = cuda_graph_destroy,
    .workspace_generation = cuda_workspace_generation,
    .matmul_forward = cuda_matmul_forward,
    .matmul_bias_gelu_forward = cuda_matmul_bias_gelu_forward,
    .matmul_backward = cuda_matmul_backward,
    .layernorm_forward = cuda_layernorm_forward,
    .residual_layernorm_forward = cuda_residual_layernorm_forward,
    .layernorm_backward = cuda_layernorm_backward,
    .attention_workspace_bytes = cuda_attention_workspace_bytes,
    .attention_forward = cuda_attention_forward,
    .attention_backward = cuda_attention_backward,
    .gelu_forward = cuda_gelu_forward,
    .gelu_backward = cuda_gelu_backward,
    .add = cuda_add,
    .accumulate = cuda_accumulate,
    .scale = cuda_scale,
    .sum_squares = cuda_sum_squares,
    .cast_to_act = cuda_cast_to_act,
    .normalize_channels = cuda_normalize_channels,
    .patchify = cuda_patchify,
    .unpatchify = cuda_unpatchify,
    .unpatchify_backward = cuda_unpatchify_backward,
    .add_pos_embed = cuda_add_pos_embed,
    .add_pos_embed_backward = cuda_add_pos_embed_backward,
    .rel_l2_loss_forward = cuda_rel_l2_loss_forward,
    .rel_l2_loss_backward = cuda_rel_l2_loss_backward,
    .weighted_rmse_accumulate = cuda_weighted_rmse_accumulate,
    .adam_update = cuda_adam_update,
    .grad_unscale_check = cuda_grad_unscale_check,
    .loss_scale_update = cuda_loss_scale_update,
    .fp8_unsupported = cuda_fp8_unsupported,
    .fp8_scratch_bytes = cuda_fp8_scratch_bytes,
    .fp8_matmul_forward = cuda_fp8_matmul_forward,
    .fp8_matmul_backward = cuda_fp8_matmul_backward,
    .fp8_scale_update = cuda_fp8_scale_update,
};

extern "C" const vb_ops *vb_ops_cuda(void) { return &cuda_ops; }
