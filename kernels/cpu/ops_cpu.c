/* ops_cpu.c: the CPU backend's op table and its (host) memory functions.
 *
 * "Device" memory is ordinary 64-byte aligned host memory, so every copy is a
 * memcpy and synchronize has nothing to wait for.
 */
#include <string.h>

#include "core/common.h"
#include "kernels/ops.h"
#include "kernels/cpu/cpu_kernels.h"

void *cpu_alloc(size_t bytes) { return vb_malloc(bytes); }

void cpu_free(void *p) { vb_free(p); }

void cpu_memcpy(void *dst, const void *src, size_t bytes) {
    if (bytes) memcpy(dst, src, bytes);
}

void cpu_zero(void *p, size_t bytes) {
    if (bytes) memset(p, 0, bytes);
}

void cpu_synchronize(void) {}

static const vb_ops cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy_h2d = cpu_memcpy,
    .memcpy_d2h = cpu_memcpy,
    .memcpy_d2d = cpu_memcpy,
    .zero = cpu_zero,
    .synchronize = cpu_synchronize,
    .matmul_forward = cpu_matmul_forward,
    .matmul_backward = cpu_matmul_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .add = cpu_add,
    .accumulate = cpu_accumulate,
    .patchify = cpu_patchify,
    .unpatchify = cpu_unpatchify,
    .unpatchify_backward = cpu_unpatchify_backward,
    .add_pos_embed = cpu_add_pos_embed,
    .add_pos_embed_backward = cpu_add_pos_embed_backward,
    .rel_l2_loss_forward = cpu_rel_l2_loss_forward,
    .rel_l2_loss_backward = cpu_rel_l2_loss_backward,
    .weighted_rmse_accumulate = cpu_weighted_rmse_accumulate,
    .adam_update = cpu_adam_update,
    .sum_squares = cpu_sum_squares,
    .scale = cpu_scale,
};

const vb_ops *vb_ops_cpu(void) { return &cpu_ops; }

const vb_ops *vb_ops_by_name(const char *name) {
    if (name && strcmp(name, "cpu") == 0) return &cpu_ops;
    return NULL; /* "cuda" is added here once kernels/cuda exists */
}
