/* commbench.h: `vitbench commbench`, an nccl-tests-style microbenchmark of
 * the communicator's data plane (core/comm/comm.h) over the tp / cp / dp / cpdp /
 * world groups of a rank layout.
 *
 * commbench.c is the command (flags, groups, timed loops, table, files);
 * commbench_check.c holds the collectives, one table entry each (name, how a
 * size becomes an element count, nccl-tests' bus-bandwidth factor, the
 * rank-dependent fill and the check against its exact result, the call),
 * the part its unit test shares.
 *
 * Sizes follow nccl-tests: size_bytes is the whole logical buffer (allreduce
 * and broadcast: the buffer every rank holds; allgather: the gathered output;
 * reduce_scatter: the full input) and count = size_bytes / element size,
 * rounded down so that every rank's share is a whole number of elements.
 *
 * Check values. Rank r of a group of n puts v(r, j) at logical index j, where
 * v(r, j) = a(j) + b(r) is a small non-negative integer (a from a hash of j,
 * b from r), bounded so that a sum over n ranks stays an integer the dtype
 * holds exactly (float32 2^24, float16 2048, bfloat16 256) whatever order a
 * plane adds in. Every result is then exact and compared bit for bit: a
 * missing, duplicated or misplaced contribution shows up as wrong elements.
 * When n is too large for distinct values (bfloat16 beyond 256 ranks), v is
 * one-hot (1 on rank j mod n, else 0), whose sums are exactly 1.
 * Broadcast: non-root ranks start from -1, a value no result can have.
 */
#ifndef VB_COMMBENCH_H
#define VB_COMMBENCH_H

#include <stddef.h>

#include "core/comm/comm.h"
#include "kernels/ops.h"

typedef enum vb_cb_coll {
    VB_CB_ALLREDUCE = 0,
    VB_CB_ALLGATHER = 1,
    VB_CB_REDUCE_SCATTER = 2,
    VB_CB_BROADCAST = 3,
    VB_CB_NCOLL = 4
} vb_cb_coll;

/* "allreduce", "allgather", "reduce_scatter", "broadcast" */
const char *vb_cb_coll_name(vb_cb_coll c);
/* index of a name, -1 when unknown */
int vb_cb_coll_parse(const char *name);

/* Elements of the logical buffer for a requested size on a group of n:
 * floor(size / elt) for allreduce and broadcast, rounded down to a multiple
 * of n for allgather and reduce_scatter. 0 means the size is skipped. */
size_t vb_cb_count(vb_cb_coll c, size_t size_bytes, vb_dtype t, int n);

/* nccl-tests' busbw / algbw: allreduce 2(n-1)/n, allgather and
 * reduce_scatter (n-1)/n, broadcast 1. */
double vb_cb_busbw_factor(vb_cb_coll c, int n);

/* Elements each rank's input and output buffers hold for a logical count
 * (allreduce and broadcast are in place: one buffer of count). */
size_t vb_cb_in_count(vb_cb_coll c, size_t count, int n);
size_t vb_cb_out_count(vb_cb_coll c, size_t count, int n);

/* Fills rank's input (vb_cb_in_count elements of t, host memory) for the
 * collective over a group of n with root 0. */
void vb_cb_fill(vb_cb_coll c, vb_dtype t, int n, int rank, size_t count, void *in);

/* Elements of rank's output (vb_cb_out_count elements, host memory) that
 * differ from the exact result of the collective over inputs made by
 * vb_cb_fill on every rank of the group. */
long long vb_cb_count_wrong(vb_cb_coll c, vb_dtype t, int n, int rank, size_t count, const void *out);

/* Runs collective c once over group g (enqueued on ctx): send is the input
 * of vb_cb_in_count elements, recv the output of vb_cb_out_count (the same
 * buffer for allreduce and broadcast, which work in place). */
void vb_cb_run(vb_cb_coll c, const vb_comm *g, void *send, void *recv, size_t count, vb_dtype t,
               vb_ctx *ctx);

/* The same, started non-blocking into req: vb_test drives it, vb_wait
 * completes it (commbench's --beside_gemm runs GEMMs meanwhile). */
void vb_cb_start(vb_cb_coll c, const vb_comm *g, void *send, void *recv, size_t count, vb_dtype t, vb_ctx *ctx,
                 vb_request *req);

/* The command: argv[0] is "commbench". Returns the exit status: 0, or 1 when
 * some element was wrong (after the files are written). Bad input exits 2. */
int vb_commbench_main(int argc, char **argv);

#endif
