/* scaling_comm.h: what one collective of a training step costs on a machine
 * described by a machine file (machine.h), where a group of the layout sits.
 *
 * Placement (scaling_place.c). Ranks go to nodes as the launchers place them
 * by default (srun's block distribution, mpirun --map-by slot): rank r on
 * node r / node_ranks, and into units of every level the same way (unit of
 * level l = r / ranks per unit of l). Groups come from core/comm/groups.h with
 * the layout's parallel_order, exactly as the trainer makes them. For a
 * group, the fan-out at level l is how many units of the level inside it
 * (members, at level 0) the busiest unit of level l holds; a collective on
 * the group then runs as NCCL runs it across a hierarchy: the inner levels
 * reduce-scatter (then all-gather back), the outermost level the group spans
 * carries the collective itself on 1 / (fan-outs inside) of the data, one
 * "rail" per inner rank in parallel. Groups of one kind need not all look
 * alike (tp 3 on nodes of 4); the distinct fan-out vectors are kept and the
 * slowest one prices the collective.
 *
 * Cost (scaling_comm.c), per stage at level l with k members and n bytes:
 *   ring  allreduce 2(k-1) a + 2(k-1)/k n/b, allgather / reduce-scatter
 *         (k-1) a + (k-1)/k n/b, broadcast a + n/b (scaling_model.h's forms)
 *   tree  allreduce 2 ceil(log2 k) a + 2(k-1)/k n/b
 *   nvls  allreduce 2 a + 2(k-1)/k n/b   (b: the NVLS busbw the file gives)
 * with a, b the level's alpha and beta for that collective; on a level with
 * NICs every rank of a node sends at once, so b is at most the node's NIC
 * bandwidth over its ranks.
 *
 * Measurement first: with commbench fits (scaling_fit.c) for the collective,
 * group and this exact group size, the fit is used instead of the file, and
 * the use says so. Without a machine file the fits alone price everything,
 * as before (the nearest measured size standing in for an unmeasured one).
 */
#ifndef VB_ANALYSIS_SCALING_COMM_H
#define VB_ANALYSIS_SCALING_COMM_H

#include <stdbool.h>

#include "analysis/scaling/machine.h"
#include "analysis/scaling/scaling_model.h"
#include "core/comm/groups.h"

#define VB_MPLACE_MAX 8

typedef struct vb_mplace {
    int p;                                      /* group size */
    int nvec;                                   /* distinct fan-out vectors (0: a group of one) */
    int k[VB_MPLACE_MAX][VB_MACHINE_MAX_LEVELS]; /* fan-out per level, innermost first */
    int top;                                    /* outermost level with a fan-out > 1 (-1: none) */
} vb_mplace;

/* Fan-outs of the groups of `kind` in layout lay with node_ranks ranks per
 * node. Returns 0; -1 with the reason in err when a group spans more units
 * of the outermost level than one (the machine has no level for it). */
int vb_mplace_group(const vb_machine *m, const vb_layout *lay, int node_ranks, vb_group_kind kind, vb_mplace *out,
                    char *err, size_t errn);

/* Where a collective's price came from. */
enum { VB_SRC_NONE = 0, VB_SRC_COMMBENCH, VB_SRC_MACHINE };

typedef struct vb_mcomm_use {
    int source;        /* VB_SRC_* */
    int level;         /* the outermost level it crossed (machine), or the level its fit is charged to */
    bool extrapolated; /* a commbench fit of another group size stood in */
} vb_mcomm_use;

/* Seconds of one collective `coll` of `bytes` (nccl-tests' size) on a group
 * named `gname` (commbench's name: tp, cp, dp, cpdp) of p ranks placed as pl
 * (NULL without a machine), in a world of `world` ranks with node_ranks per
 * node, under the knobs (uncertainty corner, beta multipliers). 0 for p <= 1.
 * Exits 2 naming the collective when neither commbench nor a machine prices it. */
double vb_mcomm_seconds(const vb_mctx *m, const vb_mplace *pl, int coll, const char *gname, int p, int world,
                        int node_ranks, double bytes, const vb_mknobs *kn, vb_mcomm_use *use);

/* Seconds of one stage: collective coll over k ranks of level l, n bytes,
 * with the level's beta multiplied by beta_mul (no uncertainty corner). */
double vb_mlevel_seconds(const vb_machine *m, int l, int coll, int k, double n, int node_ranks, double beta_mul);

#endif
