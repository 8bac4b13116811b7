/* groups.h: the tensor / context / data-parallel process-group layout.
 *
 * Pure arithmetic, no MPI: the communicator layer turns these rank lists into
 * communicators, the sweep uses the same code to enumerate layouts.
 *
 * world = tp * cp * dp. tensor_parallel and context_parallel are given, dp is
 * what remains. parallel_order (default "tp-cp-dp") names the three dims, the
 * FIRST named one varying fastest across consecutive ranks, exactly like the
 * Megatron-derived rank generator the tutorial uses:
 *
 *   rank = sum over dims d of coord[d] * stride[d],
 *   stride[order[0]] = 1, stride[order[1]] = size[order[0]], ...
 *
 * Example: 8 ranks, tp 4, dp 2, order "tp-dp" (cp 1):
 *   tp groups [0 1 2 3] [4 5 6 7], dp groups [0 4] [1 5] [2 6] [3 7].
 *
 * An order may omit a dim whose size is 1 ("tp-dp" when cp == 1); omitted dims
 * are placed slowest, which cannot change the mapping because their coordinate
 * is always 0.
 *
 * A group of a combined kind (e.g. cp x dp, the ranks that hold replicas of the
 * same weight shard and must reduce its gradient) is every rank sharing the
 * coordinates of the dims NOT in the kind. Its members are listed in increasing
 * group-local rank, where the group-local rank is the mixed-radix number of the
 * member's coordinates in the kind's dims, taken in parallel_order (first named
 * fastest) -- again as Megatron does, so "cp-dp" groups keep cp neighbours
 * adjacent when cp comes first in the order.
 */
#ifndef VB_GROUPS_H
#define VB_GROUPS_H

#include <stddef.h>
#include <stdbool.h>

/* Dimension indices into vb_layout.size / stride / coords arrays. */
typedef enum { VB_DIM_TP = 0, VB_DIM_CP = 1, VB_DIM_DP = 2, VB_NDIMS = 3 } vb_dim;

/* A group kind is the set of dims the group spans (bit 1 << vb_dim). */
typedef enum {
    VB_GROUP_TP = 1 << VB_DIM_TP,
    VB_GROUP_CP = 1 << VB_DIM_CP,
    VB_GROUP_DP = 1 << VB_DIM_DP,
    VB_GROUP_TP_CP = VB_GROUP_TP | VB_GROUP_CP,
    VB_GROUP_TP_DP = VB_GROUP_TP | VB_GROUP_DP,
    VB_GROUP_CP_DP = VB_GROUP_CP | VB_GROUP_DP, /* weight-gradient reduction with CP */
    VB_GROUP_WORLD = VB_GROUP_TP | VB_GROUP_CP | VB_GROUP_DP,
} vb_group_kind;

typedef struct vb_layout {
    int world;
    int tp, cp, dp;
    int size[VB_NDIMS];   /* size[VB_DIM_TP] == tp, ... */
    int order[VB_NDIMS];  /* dims, fastest-varying first */
    int stride[VB_NDIMS]; /* rank distance between neighbours along each dim */
} vb_layout;

/* Parses "tp-cp-dp" style orders into order[3] (fastest first). Omitted dims go
 * last. Returns 0, or -1 with a one-line message in err for an unknown or
 * repeated name. Size checks for omitted dims happen in vb_layout_init. */
int vb_layout_parse_order(const char *order, int out[VB_NDIMS], char *err, size_t errn);

/* Builds the layout. order NULL or "" means "tp-cp-dp". Returns 0, or -1 with
 * a one-line message naming the numbers when world < 1, tp or cp < 1,
 * world % (tp*cp) != 0, or order is not a permutation of tp, cp, dp (a dim of
 * size > 1 left out of the order counts as not a permutation). */
int vb_layout_init(vb_layout *l, int world, int tp, int cp, const char *order, char *err, size_t errn);

/* Coordinates of `rank` (0 <= rank < world); any out pointer may be NULL. */
void vb_layout_coords(const vb_layout *l, int rank, int *tp_rank, int *cp_rank, int *dp_rank);
/* Inverse of vb_layout_coords. */
int vb_layout_rank(const vb_layout *l, int tp_rank, int cp_rank, int dp_rank);

/* Number of ranks in a group of this kind (product of the kind's dim sizes). */
int vb_layout_group_size(const vb_layout *l, vb_group_kind kind);
/* Position of `rank` inside its group of this kind. */
int vb_layout_group_rank(const vb_layout *l, int rank, vb_group_kind kind);
/* Fills ranks_out (room for vb_layout_group_size entries) with the members of
 * rank's group of this kind in increasing group-local rank; returns the count. */
int vb_layout_group(const vb_layout *l, int rank, vb_group_kind kind, int *ranks_out);
/* Which of the world's groups of this kind `rank` is in, 0-based, numbered by
 * the group's lowest member (the order Megatron lists them in). */
int vb_layout_group_index(const vb_layout *l, int rank, vb_group_kind kind);

/* True when both layouts put every rank at the same (tp, cp, dp) coordinates:
 * orders that differ only in where size-1 dims sit are equivalent. */
bool vb_layout_equivalent(const vb_layout *a, const vb_layout *b);

/* "tp-cp-dp" for the layout's full order (all three dims). */
void vb_layout_order_string(const vb_layout *l, char *buf, size_t n);
/* "tp", "cp", "dp", "tp-cp", "cp-dp", "tp-dp", "world". */
const char *vb_group_kind_name(vb_group_kind kind);

#endif
