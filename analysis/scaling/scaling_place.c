/* scaling_place.c: where a layout's groups sit on a machine's levels
 * (scaling_comm.h, vb_mplace_group). */
#include <stdlib.h>
#include <string.h>

#include "analysis/scaling/scaling_comm.h"
#include "core/util/common.h"

typedef struct {
    long long outer, inner; /* unit of level l, unit of level l-1 (or the rank at l = 0) */
} unit_pair;

static int cmp_pair(const void *a, const void *b) {
    const unit_pair *x = a, *y = b;
    if (x->outer != y->outer) return x->outer < y->outer ? -1 : 1;
    return x->inner < y->inner ? -1 : x->inner > y->inner;
}

/* The fan-out of one group at level l: the most distinct inner units any
 * single level-l unit holds. */
static int fan_out(const int *members, int p, long long span, long long inner_span, unit_pair *buf) {
    for (int i = 0; i < p; i++) buf[i].outer = members[i] / span, buf[i].inner = members[i] / inner_span;
    qsort(buf, (size_t)p, sizeof *buf, cmp_pair);
    int best = 0, run = 0;
    for (int i = 0; i < p; i++) {
        const bool new_outer = i == 0 || buf[i].outer != buf[i - 1].outer;
        if (new_outer) run = 0;
        if (new_outer || buf[i].inner != buf[i - 1].inner) run++;
        if (run > best) best = run;
    }
    return best;
}

int vb_mplace_group(const vb_machine *m, const vb_layout *lay, int node_ranks, vb_group_kind kind, vb_mplace *out,
                    char *err, size_t errn) {
    memset(out, 0, sizeof *out);
    out->top = -1;
    const int p = vb_layout_group_size(lay, kind), world = lay->world;
    out->p = p;
    if (p <= 1) return 0;
    long long span[VB_MACHINE_MAX_LEVELS];
    for (int l = 0; l < m->nlevels; l++) span[l] = vb_machine_level_ranks(m, l, node_ranks, world);
    int *members = vb_malloc_check(sizeof(int) * (size_t)p);
    unit_pair *buf = vb_malloc_check(sizeof(unit_pair) * (size_t)p);
    int rc = 0;
    for (int r = 0; r < world && rc == 0; r++) {
        if (vb_layout_group_rank(lay, r, kind) != 0) continue; /* each group once, from its first member */
        const int n = vb_layout_group(lay, r, kind, members);
        int k[VB_MACHINE_MAX_LEVELS] = {0};
        long long inner = 1;
        for (int l = 0; l < m->nlevels; l++) {
            k[l] = fan_out(members, n, span[l], inner, buf);
            inner = span[l];
        }
        /* beyond the outermost level: how many of its units the group spans */
        int beyond = fan_out(members, n, (long long)world + span[m->nlevels - 1], span[m->nlevels - 1], buf);
        if (beyond > 1) {
            vb_errf(err, errn,
                    "machine %s: a %s group of %d ranks spans %d units of its outermost level %s (%lld ranks each): "
                    "the file has no level for traffic between them",
                    m->name, vb_group_kind_name(kind), p, beyond, m->level[m->nlevels - 1].name, span[m->nlevels - 1]);
            rc = -1;
            break;
        }
        bool seen = false;
        for (int v = 0; v < out->nvec && !seen; v++) seen = memcmp(out->k[v], k, sizeof k) == 0;
        if (!seen && out->nvec < VB_MPLACE_MAX) memcpy(out->k[out->nvec++], k, sizeof k);
        for (int l = 0; l < m->nlevels; l++)
            if (k[l] > 1 && l > out->top) out->top = l;
    }
    free(members);
    free(buf);
    return rc;
}
