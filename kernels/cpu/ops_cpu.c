/* ops_cpu.c: the CPU backend's op table, its context, memory and events.
 *
 * "Device" memory is ordinary 64-byte aligned host memory, so every copy is a
 * memcpy, every op has finished when it returns and synchronize has nothing
 * to wait for. The context only records the activation dtype, which must be
 * float32. Nothing here includes core/: allocation failures are reported
 * through kernels/alloc_check.h, in the harness's words.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/alloc_check.h"
#include "kernels/ops.h"
#include "kernels/cpu/cpu_kernels.h"

static const vb_ops cpu_ops;

/* 64-byte aligned (whole cache lines, widest vector loads), zero-filled; out
 * of memory names the caller's line (which says what the memory is for) */
#define cpu_aligned_zalloc(bytes) cpu_aligned_zalloc_at((bytes), __FILE__, __LINE__)
static void *cpu_aligned_zalloc_at(size_t bytes, const char *file, int line) {
    size_t rounded = ((bytes ? bytes : 1) + 63) & ~(size_t)63;
    if (rounded < bytes) vb_kernels_die_oom_at(bytes, file, line); /* the rounding wrapped */
    void *p = aligned_alloc(64, rounded);
    if (!p) vb_kernels_die_oom_at(bytes, file, line);
    memset(p, 0, rounded);
    return p;
}

/* ---- context ---- */

vb_ctx *cpu_ctx_create(const vb_ctx_opts *opts, char *err, size_t errlen) {
    vb_dtype act = opts ? opts->act : VB_DTYPE_F32;
    if (act != VB_DTYPE_F32) {
        if (err && errlen)
            snprintf(err, errlen, "the cpu backend computes in float32 only (activation dtype %s asked for)",
                     vb_dtype_name(act));
        return NULL;
    }
    vb_ctx *ctx = cpu_aligned_zalloc(sizeof *ctx);
    ctx->ops = &cpu_ops;
    ctx->act = VB_DTYPE_F32;
    ctx->device = 0;
    ctx->impl = NULL;
    return ctx;
}

void cpu_ctx_destroy(vb_ctx *ctx) { free(ctx); }

void cpu_synchronize(vb_ctx *ctx) { (void)ctx; }

/* ---- memory ---- */

void *cpu_alloc(vb_ctx *ctx, size_t bytes) {
    (void)ctx;
    return cpu_aligned_zalloc(bytes);
}

void cpu_free(vb_ctx *ctx, void *p) {
    (void)ctx;
    free(p);
}

static void *cpu_alloc_host(vb_ctx *ctx, size_t bytes) {
    (void)ctx;
    return cpu_aligned_zalloc(bytes);
}

void cpu_memcpy(vb_ctx *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (bytes) memcpy(dst, src, bytes);
}

void cpu_zero(vb_ctx *ctx, void *p, size_t bytes) {
    (void)ctx;
    if (bytes) memset(p, 0, bytes);
}

/* ---- events: the host clock when recorded (the work before it is done) ---- */

struct vb_event {
    double t; /* CLOCK_MONOTONIC seconds; < 0 until recorded */
};

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static vb_event *cpu_event_create(vb_ctx *ctx) {
    (void)ctx;
    vb_event *ev = cpu_aligned_zalloc(sizeof *ev);
    ev->t = -1.0;
    return ev;
}

static void cpu_event_destroy(vb_ctx *ctx, vb_event *ev) {
    (void)ctx;
    free(ev);
}

static void cpu_event_record(vb_ctx *ctx, vb_event *ev) {
    (void)ctx;
    ev->t = cpu_now();
}

static void cpu_event_wait(vb_ctx *ctx, vb_event *ev) {
    (void)ctx;
    (void)ev; /* the work before ev finished before it was recorded */
}

static void cpu_event_synchronize(vb_ctx *ctx, vb_event *ev) {
    (void)ctx;
    (void)ev;
}

static double cpu_event_elapsed_ms(vb_ctx *ctx, vb_event *start, vb_event *end) {
    (void)ctx;
    if (start->t < 0 || end->t < 0) return 0.0; /* not recorded: no span */
    return 1e3 * (end->t - start->t);
}

static int cpu_device_count(void) { return 1; }

static void *cpu_native_queue(vb_ctx *ctx) {
    (void)ctx;
    return NULL;
}

static void cpu_device_describe(vb_ctx *ctx, vb_device_desc *d) {
    (void)ctx;
    memset(d, 0, sizeof *d);
}

/* no profiler to start or stop on the CPU */
static void cpu_profiler_noop(vb_ctx *ctx) { (void)ctx; }

static const vb_ops cpu_ops = {
    .name = "cpu",
    .host_memory = 1,
    .ctx_create = cpu_ctx_create,
    .ctx_destroy = cpu_ctx_destroy,
    .synchronize = cpu_synchronize,
    .device_count = cpu_device_count,
    .native_queue = cpu_native_queue,
    .device_describe = cpu_device_describe,
    .profiler_start = cpu_profiler_noop,
    .profiler_stop = cpu_profiler_noop,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .alloc_host = cpu_alloc_host,
    .free_host = cpu_free,
    .memcpy_h2d = cpu_memcpy,
    .memcpy_d2h = cpu_memcpy,
    .memcpy_d2d = cpu_memcpy,
    .zero = cpu_zero,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_synchronize = cpu_event_synchronize,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .matmul_forward = cpu_matmul_forward,
    .matmul_bias_gelu_forward = cpu_matmul_bias_gelu_forward,
    .matmul_backward = cpu_matmul_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .residual_layernorm_forward = cpu_residual_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .attention_workspace_bytes = cpu_attention_workspace_bytes,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .add = cpu_add,
    .accumulate = cpu_accumulate,
    .scale = cpu_scale,
    .sum_squares = cpu_sum_squares,
    .cast_to_act = cpu_cast_to_act,
    .normalize_channels = cpu_normalize_channels,
    .patchify = cpu_patchify,
    .unpatchify = cpu_unpatchify,
    .unpatchify_backward = cpu_unpatchify_backward,
    .add_pos_embed = cpu_add_pos_embed,
    .add_pos_embed_backward = cpu_add_pos_embed_backward,
    .rel_l2_loss_forward = cpu_rel_l2_loss_forward,
    .rel_l2_loss_backward = cpu_rel_l2_loss_backward,
    .weighted_rmse_accumulate = cpu_weighted_rmse_accumulate,
    .adam_update = cpu_adam_update,
    .grad_unscale_check = cpu_grad_unscale_check,
    .loss_scale_update = cpu_loss_scale_update,
    .fp8_unsupported = cpu_fp8_unsupported,
    .fp8_scratch_bytes = cpu_fp8_scratch_bytes,
    .fp8_matmul_forward = cpu_fp8_matmul_forward,
    .fp8_matmul_backward = cpu_fp8_matmul_backward,
    .fp8_scale_update = cpu_fp8_scale_update,
};

const vb_ops *vb_ops_cpu(void) { return &cpu_ops; }
