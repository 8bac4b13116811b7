/* agree.c: the collective check that every rank runs the same thing (agree.h). */
#include "core/run/agree.h"
#include "core/run/trainer.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/util/common.h"
#include "core/comm/groups.h"

void vb_agree_add(vb_agree_list *l, const char *key, const char *fmt, ...) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = vb_realloc_check(l->v, (size_t)l->cap * sizeof *l->v);
    }
    vb_agree_item *it = &l->v[l->n++];
    snprintf(it->key, sizeof it->key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&it->value, fmt, ap) < 0) vb_die_internal("out of memory");
    va_end(ap);
}

void vb_agree_free(vb_agree_list *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i].value);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static uint64_t fnv1a(uint64_t h, const char *s) {
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    h ^= 0x1f; /* separator: key "ab"+"c" differs from "a"+"bc" */
    return h * 1099511628211ULL;
}

/* The digest of item i (key and value), or of "no item" past the end, so a
 * rank with fewer items differs at the first missing one. */
static uint64_t digest(const vb_agree_list *l, int i) {
    if (i >= l->n) return 0;
    return fnv1a(fnv1a(14695981039346656037ULL, l->v[i].key), l->v[i].value) | 1;
}

void vb_agree_check(const vb_comm *world, const vb_agree_list *l) {
    if (world->size <= 1) return;
    /* every rank's digests at rank 0: first the count, then the items */
    int most = l->n;
    int *counts = world->rank == 0 ? vb_malloc_check(sizeof(int) * (size_t)world->size) : NULL;
    vb_gather_bytes(world, &most, sizeof most, counts, 0);
    int width = 0;
    if (world->rank == 0)
        for (int r = 0; r < world->size; r++) width = counts[r] > width ? counts[r] : width;
    vb_broadcast(world, &width, sizeof width, 0);
    uint64_t *mine = vb_calloc_check((size_t)width + 1, sizeof *mine);
    uint64_t *all = world->rank == 0 ? vb_calloc_check(((size_t)width + 1) * (size_t)world->size, sizeof *all) : NULL;
    for (int i = 0; i < width; i++) mine[i] = digest(l, i);
    vb_gather_bytes(world, mine, ((size_t)width + 1) * sizeof *mine, all, 0);
    /* rank 0 finds the first item where some rank differs from rank 0 */
    int bad[2] = {-1, -1}; /* item, rank */
    if (world->rank == 0)
        for (int i = 0; i < width && bad[0] < 0; i++)
            for (int r = 1; r < world->size && bad[0] < 0; r++)
                if (all[(size_t)r * ((size_t)width + 1) + (size_t)i] != all[i]) bad[0] = i, bad[1] = r;
    vb_broadcast(world, bad, sizeof bad, 0);
    free(mine);
    free(all);
    free(counts);
    if (bad[0] < 0) return;
    /* the differing item's text from every rank, for the one line */
    char text[512] = "(none)";
    if (bad[0] < l->n) snprintf(text, sizeof text, "%s=%.400s", l->v[bad[0]].key, l->v[bad[0]].value);
    char *texts = vb_gatherv_bytes(world, text, sizeof text, 0, NULL);
    const char *a = texts ? texts : "", *b = texts ? texts + (size_t)bad[1] * sizeof text : "";
    /* every rank leaves together; the line is rank 0's */
    vb_set_log_rank(world->rank);
    if (world->rank == 0)
        fprintf(stderr, "vitbench: error: ranks disagree: rank 0 has %s, rank %d has %s (every rank must run the "
                        "same command, config, layout and data)\n",
                a, bad[1], b);
    fflush(stderr);
    free(texts);
    vb_barrier(world);
    vb_world_finalize();
    exit(VB_EXIT_INPUT);
}

/* Data paths may differ between nodes (a dataset staged to node-local
 * disks); what must match is what the loaders found there. */
static bool node_local_key(const char *key) {
    static const char *keys[] = {"train_data_path", "valid_data_path", "inf_data_path",
                                 "time_means_path", "global_means_path", "global_stds_path"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(key, keys[i]) == 0) return true;
    return false;
}

void vb_run_agree(const vb_run *r) {
    if (r->world.size <= 1) return;
    vb_agree_list l = {0};
    vb_agree_add(&l, "command", "%s", r->mode == VB_MODE_RUN ? "run" : "train");
    char order[32] = "";
    vb_layout_order_string(&r->layout, order, sizeof order);
    vb_agree_add(&l, "layout", "tp %d x cp %d x dp %d, %s", r->layout.tp, r->layout.cp, r->layout.dp, order);
    vb_agree_add(&l, "batch", "local %d, global %d", r->local_batch, r->global_batch);
    char *json = vb_config_to_json(&r->cfg);
    cJSON *cfg = json ? cJSON_Parse(json) : NULL;
    free(json);
    if (!cfg) vb_die_internal("cannot render the config for the ranks' agreement check");
    for (cJSON *it = cfg->child; it; it = it->next) {
        if (node_local_key(it->string)) continue;
        char *v = cJSON_PrintUnformatted(it);
        vb_agree_add(&l, it->string, "%s", v ? v : "?");
        free(v);
    }
    cJSON_Delete(cfg);
    if (r->benchy) {
        const vb_benchy_config *b = &r->bcfg;
        for (int k = 0; k < VB_TRIAL_NKINDS; k++) {
            const vb_benchy_trial_cfg *t = &b->trial[k];
            char key[64];
            vb_snprintf(key, sizeof key, "benchy %s", vb_trial_kinds[k].section);
            vb_agree_add(&l, key, "run %d, nbatches %d, ntrials %d, nwarmup %d", t->run_benchmark, t->nbatches,
                         t->ntrials, t->nwarmup);
        }
        vb_agree_add(&l, "benchy use_distributed_barrier", "%d", b->use_distributed_barrier);
        vb_agree_add(&l, "benchy profiler_mode", "%s", b->profiler_mode);
    }
    /* every dp shard must take the same number of steps, or a collective waits forever */
    vb_agree_add(&l, "train steps per epoch", "%d (%lld samples in %s)", vb_loader_steps_per_epoch(r->train_loader),
                 (long long)vb_loader_nsamples(r->train_loader), "the train split");
    if (r->valid_loader)
        vb_agree_add(&l, "valid steps per epoch", "%d (%lld samples in %s)",
                     vb_loader_steps_per_epoch(r->valid_loader), (long long)vb_loader_nsamples(r->valid_loader),
                     "the valid split");
    vb_agree_check(&r->world, &l);
    vb_agree_free(&l);
}
