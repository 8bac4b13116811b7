/* scaling_comm.c: the price of one collective (scaling_comm.h): a commbench fit
 * of this exact group size when there is one, else the machine file's
 * levels along the group's placement. */
#include <math.h>
#include <string.h>

#include "analysis/scaling/scaling_comm.h"
#include "core/util/common.h"

/* Latency steps and bandwidth share of one stage (scaling_comm.h's table). */
static void stage_coeffs(int alg, int coll, int k, double *a, double *b) {
    vb_ab_coeffs(coll, k, a, b);
    if (coll != VB_COLL_ALLREDUCE) return;
    if (alg == VB_ALG_TREE) *a = 2.0 * ceil(log2((double)k));
    if (alg == VB_ALG_NVLS) *a = 2.0;
}

double vb_mlevel_seconds(const vb_machine *m, int l, int coll, int k, double n, int node_ranks, double beta_mul) {
    if (k <= 1) return 0.0;
    const vb_mlevel *lv = &m->level[l];
    double beta = lv->beta_GBps[coll];
    /* every rank of a node sends at the same time in a step's collectives:
     * the node's NICs are shared by all of them */
    if (lv->nics_per_node > 0 && node_ranks > 0) {
        const double share = lv->nics_per_node * lv->nic_GBps / node_ranks;
        if (share < beta) beta = share;
    }
    beta *= beta_mul;
    double a, b;
    stage_coeffs(lv->alg[coll], coll, k, &a, &b);
    return (a * lv->alpha_us[coll] + b * n / (beta * 1e3)) * 1e-6;
}

/* One fan-out vector: the hierarchical form (inner levels reduce-scatter and
 * all-gather around the outermost level's collective). */
static double vec_seconds(const vb_machine *m, const int *k, int top, int coll, double bytes, int node_ranks,
                          const vb_mknobs *kn, double *unc) {
    double t = 0, n = bytes, worst_u = 0;
    for (int l = 0; l <= top; l++) {
        if (k[l] <= 1) continue;
        const double bm = kn ? kn->beta_mul[l] : 1.0;
        double s;
        if (coll == VB_COLL_ALLREDUCE && l < top)
            s = 2.0 * vb_mlevel_seconds(m, l, VB_COLL_REDUCE_SCATTER, k[l], n, node_ranks, bm);
        else if (coll == VB_COLL_BROADCAST)
            s = l == top ? vb_mlevel_seconds(m, l, coll, 2, bytes, node_ranks, bm) : 0.0; /* pipelined: the slowest hop */
        else
            s = vb_mlevel_seconds(m, l, coll, k[l], n, node_ranks, bm);
        const double u = m->level[l].uncertainty;
        if (u > worst_u) worst_u = u;
        t += kn ? s * vb_corner_factor(kn->corner, u) : s;
        n /= k[l];
    }
    if (unc) *unc = worst_u;
    return t;
}

double vb_mcomm_seconds(const vb_mctx *m, const vb_mplace *pl, int coll, const char *gname, int p, int world,
                        int node_ranks, double bytes, const vb_mknobs *kn, vb_mcomm_use *use) {
    vb_mcomm_use u = {.source = VB_SRC_NONE, .level = 0};
    if (p <= 1) {
        if (use) *use = u;
        return 0.0;
    }
    const int charged = pl && pl->top >= 0 ? pl->top : 0;
    bool ex = false;
    const vb_ab_fit *f = m->fits ? vb_ab_lookup(m->fits, coll, gname, p, world, &ex) : NULL;
    /* with a machine file, only a measurement of this very size wins */
    if (f && (!m->machine || !ex)) {
        u.source = VB_SRC_COMMBENCH, u.level = charged, u.extrapolated = ex;
        double a, b;
        vb_ab_coeffs(coll, p, &a, &b);
        const double bm = kn ? kn->beta_mul[charged] : 1.0;
        const double lat = a * f->alpha_us * 1e-6;
        const double bw = isinf(f->beta_GBps) ? 0.0 : b * bytes / (f->beta_GBps * bm * 1e3) * 1e-6;
        double t = lat + bw;
        if (kn) t *= vb_corner_factor(kn->corner, f->rel_rms);
        if (use) *use = u;
        return t;
    }
    if (!m->machine || !pl)
        vb_die_input("model: --commbench has no %s rows, needed for the %s group of %d ranks (give them, or a "
                     "--machine file)",
                     vb_coll_name[coll], gname, p);
    double worst = 0;
    for (int v = 0; v < pl->nvec; v++) {
        const double t = vec_seconds(m->machine, pl->k[v], pl->top, coll, bytes, node_ranks, kn, NULL);
        if (t > worst) worst = t;
    }
    u.source = VB_SRC_MACHINE, u.level = charged;
    if (use) *use = u;
    return worst;
}
