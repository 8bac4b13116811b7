/* backends.c: the compute backends by name.
 *
 * The CPU backend is always built. The CUDA backend (kernels/cuda) is built
 * when CMake finds the CUDA toolkit (VB_CUDA=AUTO, or ON to require it),
 * which defines VB_HAVE_CUDA; without it vb_ops_cuda() is NULL, so callers
 * can ask for "cuda" and report that it is not compiled in.
 */
#include <string.h>

#include "kernels/ops.h"

#ifndef VB_HAVE_CUDA
const vb_ops *vb_ops_cuda(void) { return NULL; }
#endif

const vb_ops *vb_ops_by_name(const char *name) {
    if (!name) return NULL;
    if (strcmp(name, "cpu") == 0) return vb_ops_cpu();
    if (strcmp(name, "cuda") == 0) return vb_ops_cuda();
    if (strcmp(name, "auto") == 0) return vb_ops_auto();
    return NULL;
}

/* A context on device 0 is the one test that covers "compiled in", "a GPU
 * is visible" and "this build has kernels for it" alike. */
const vb_ops *vb_ops_auto(void) {
    const vb_ops *cuda = vb_ops_cuda();
    if (cuda) {
        vb_ctx_opts opts = {.act = VB_DTYPE_F32, .device = 0, .tf32 = 0};
        char err[256];
        vb_ctx *ctx = cuda->ctx_create(&opts, err, sizeof err);
        if (ctx) {
            cuda->ctx_destroy(ctx);
            return cuda;
        }
    }
    return vb_ops_cpu();
}
