/* test_nccl_plane.c: the NCCL data plane's calls on a GPU.
 *
 * Skips (exit 77, the reason on stdout) when the build has no NCCL plane or
 * no GPU is visible. Runs as one process: NCCL refuses two ranks of one
 * communicator on one GPU, so the plane is attached to a communicator of one
 * rank (the front-end never sends a size-1 group to a plane; the test calls
 * the table directly). Every collective of one rank is the identity, so each
 * result is checked exactly against its input: what this covers is the
 * plane's use of NCCL and CUDA -- the unique id over the control plane, the
 * init, every collective and dtype on the context's stream, the
 * non-blocking path on the communication stream completed by test and by
 * wait with the context's later work ordered after it, and the teardown.
 * Collectives across ranks on NCCL need two GPUs; across ranks on one GPU
 * the MPI plane's staging is checked by tests/test_dist.sh (VB_DIST_ARGS).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm/comm.h"
#include "core/util/common.h"
#include "kernels/ops.h"

static int g_bad;

#define CHECK(cond, ...)                                      \
    do {                                                      \
        if (!(cond)) {                                        \
            if (g_bad++ < 10) {                               \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
                fprintf(stderr, __VA_ARGS__);                 \
                fputc('\n', stderr);                          \
            }                                                 \
        }                                                     \
    } while (0)

enum { N = 4099 }; /* odd, not a multiple of any vector width */

/* n values as t's bit patterns: small integers, exact in every dtype */
static void fill(void *h, vb_dtype t, size_t n, int salt) {
    for (size_t i = 0; i < n; i++) {
        float v = (float)((int)(i % 29) - 14 + salt);
        if (t == VB_DTYPE_F32) {
            ((float *)h)[i] = v;
        } else { /* bfloat16 of a small integer: the top half of its float32 */
            uint32_t u;
            memcpy(&u, &v, 4);
            ((uint16_t *)h)[i] = t == VB_DTYPE_BF16 ? (uint16_t)(u >> 16) : 0;
        }
    }
}

int main(int argc, char **argv) {
    const vb_ops *ops = vb_ops_cuda();
    const vb_comm_data_ops *pl = vb_comm_data_nccl();
    if (!ops || !pl) {
        printf("skipped: this build has no %s\n", !ops ? "CUDA backend" : "NCCL data plane");
        return 77;
    }
    vb_ctx_opts opts = {.act = VB_DTYPE_F32, .device = 0, .tf32 = 0};
    char err[256];
    vb_ctx *ctx = ops->ctx_create(&opts, err, sizeof err);
    if (!ctx) {
        printf("skipped: %s\n", err);
        return 77;
    }
    vb_comm world;
    vb_world_init(&argc, &argv, &world);
    if (world.size != 1) vb_die_input("test_nccl_plane runs as one process (got %d ranks)", world.size);

    char why[256] = "";
    CHECK(pl->usable(&world, ctx, why, sizeof why), "one rank judged unusable: %s", why);
    vb_comm c = world; /* a one-rank communicator on the NCCL plane */
    c.data = pl;
    c.data_impl = NULL;
    snprintf(c.group, sizeof c.group, "dp");
    pl->attach(&c);
    CHECK(c.data_impl != NULL, "attach left no NCCL state");

    const vb_dtype types[2] = {VB_DTYPE_F32, VB_DTYPE_BF16};
    for (int k = 0; k < 2; k++) {
        const vb_dtype t = types[k];
        const size_t bytes = N * vb_dtype_size(t);
        void *h = malloc(bytes), *back = malloc(bytes);
        void *a = ops->alloc(ctx, bytes), *b = ops->alloc(ctx, bytes);
        fill(h, t, N, k);
        /* blocking, on the context's stream: each the identity for one rank */
        const char *names[4] = {"allreduce", "allgather", "reduce_scatter", "broadcast"};
        for (int op = 0; op < 4; op++) {
            ops->memcpy_h2d(ctx, a, h, bytes);
            ops->zero(ctx, b, bytes);
            void *out = b;
            if (op == 0) pl->allreduce(&c, a, N, t, VB_RED_SUM, ctx, NULL), out = a;
            if (op == 1) pl->allgather(&c, a, b, N, t, ctx, NULL);
            if (op == 2) pl->reduce_scatter(&c, a, b, N, t, VB_RED_SUM, ctx, NULL);
            if (op == 3) pl->broadcast(&c, a, N, t, 0, ctx, NULL), out = a;
            memset(back, 0xff, bytes);
            ops->memcpy_d2h(ctx, back, out, bytes);
            ops->synchronize(ctx);
            CHECK(memcmp(back, h, bytes) == 0, "%s %s on one rank is not the identity", names[op],
                  vb_dtype_name(t));
        }
        free(h);
        free(back);
        ops->free(ctx, a);
        ops->free(ctx, b);
    }

    /* non-blocking on the communication stream: the context's later work
     * (a scale) is ordered after it, completed by wait and by test */
    float *h = malloc(N * sizeof *h), *back = malloc(N * sizeof *back);
    fill(h, VB_DTYPE_F32, N, 3);
    float *d = ops->alloc(ctx, N * sizeof *d);
    for (int by_test = 0; by_test < 2; by_test++) {
        ops->memcpy_h2d(ctx, d, h, N * sizeof *d);
        vb_request req;
        memset(&req, 0, sizeof req);
        req.ctx = ctx;
        pl->allreduce(&c, d, N, VB_DTYPE_F32, VB_RED_SUM, ctx, &req);
        if (by_test) {
            long polls = 0;
            while (!pl->test(&req))
                if (++polls > 100000000L) vb_die_internal("test_nccl_plane: request never completed");
        } else {
            pl->wait(&req);
        }
        ops->scale(ctx, d, 2.0f, N);
        ops->memcpy_d2h(ctx, back, d, N * sizeof *d);
        ops->synchronize(ctx);
        int wrong = 0;
        for (int i = 0; i < N; i++) wrong += back[i] != 2.0f * h[i];
        CHECK(wrong == 0, "non-blocking allreduce completed by %s: %d of %d wrong", by_test ? "test" : "wait", wrong,
              N);
    }
    ops->free(ctx, d);
    free(h);
    free(back);

    pl->detach(&c);
    CHECK(c.data_impl == NULL, "detach left NCCL state");
    vb_comm_ctx_release(ctx);
    ops->ctx_destroy(ctx);
    vb_world_finalize();
    printf("%s: %s\n", g_bad ? "FAILED" : "ok", "NCCL plane on one rank: attach, 4 collectives x float32/bfloat16, "
                                                "non-blocking by wait and by test, detach");
    return g_bad ? 1 : 0;
}
