/* agree.h: every rank of a run agrees on what has to match, or none starts.
 *
 * Ranks started with different flags (MPMD launches, a typo in one line of
 * a job script), different data (node-local copies of the dataset) or
 * different commands would otherwise meet in collectives that never match:
 * a hang, or a failed broadcast and a corrupted heap. After setup each rank
 * describes itself as (key, value) items -- the command, every resolved
 * config key, the rank layout, the model's parameter count, the steps per
 * epoch of its loaders -- and one collective check compares them: on a
 * mismatch rank 0 prints one line naming the first differing key, the ranks
 * and both values, and every rank exits 2.
 */
#ifndef VB_AGREE_H
#define VB_AGREE_H

#include "core/comm/comm.h"

typedef struct vb_agree_item {
    char key[64];
    char *value;
} vb_agree_item;

typedef struct vb_agree_list {
    vb_agree_item *v;
    int n, cap;
} vb_agree_list;

void vb_agree_add(vb_agree_list *l, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void vb_agree_free(vb_agree_list *l);

/* Collective over world. Returns when every rank has the same keys and
 * values; otherwise exits 2 on every rank (one line from rank 0). */
void vb_agree_check(const vb_comm *world, const vb_agree_list *l);

/* The run's items (core/run/trainer.h): command, layout, batch, every config
 * key but the data paths (which may differ between nodes), benchy's trials,
 * and the steps per epoch its loaders found. Call once the loaders exist and
 * before any collective whose shape depends on them. */
struct vb_run;
void vb_run_agree(const struct vb_run *r);

#endif
