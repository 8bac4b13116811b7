/* machine.c: machine files (machine.h). */
#include "analysis/scaling/machine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/scaling/scaling_yaml.h"
#include "core/util/common.h"

const char *const vb_alg_name[VB_NALG] = {"ring", "tree", "nvls"};
const char *const vb_prec_name[VB_NPREC] = {"fp32", "tf32", "bf16", "fp16"};
/* scaling_model.h's vb_coll order */
static const char *const k_coll[VB_MACHINE_NCOLL] = {"allreduce", "allgather", "reduce_scatter", "broadcast"};

int vb_prec_of(const char *name) {
    for (int p = 0; p < VB_NPREC; p++)
        if (strcmp(name, vb_prec_name[p]) == 0) return p;
    return -1;
}

/* Generous bounds: they catch unit mistakes (bits for bytes, ms for us), not
 * unusual hardware. */
#define MAX_ALPHA_US 1e6
#define MAX_BETA_GBPS 1e5
#define MAX_TFLOPS 1e6

static void load_coll(const vb_my *y, yaml_node_t *n, const char *where, vb_mlevel *lv, int c) {
    vb_yaml_pairs p;
    vb_my_pairs(y, n, where, &p);
    static const char *const known[] = {"algorithm", "alpha_us", "beta_GBps", NULL};
    vb_my_only_keys(y, &p, where, known);
    char alg[16];
    if (vb_my_str_or(y, &p, where, "algorithm", alg, sizeof alg)) {
        int a = -1;
        for (int k = 0; k < VB_NALG; k++)
            if (strcmp(alg, vb_alg_name[k]) == 0) a = k;
        int line = 0;
        vb_my_get(&p, "algorithm", &line);
        if (a < 0) vb_die_input("%s: %s.algorithm (line %d): '%s' (expected ring, tree or nvls)", y->file, where, line, alg);
        /* tree and NVLS are allreduce algorithms in NCCL; the others run as rings */
        if (a != VB_ALG_RING && c != 0)
            vb_die_input("%s: %s.algorithm (line %d): %s applies to allreduce only", y->file, where, line, alg);
        lv->alg[c] = a;
    }
    lv->alpha_us[c] = vb_my_num_or(y, &p, where, "alpha_us", 0, MAX_ALPHA_US, lv->alpha_us[c]);
    lv->beta_GBps[c] = vb_my_num_or(y, &p, where, "beta_GBps", 1e-9, MAX_BETA_GBPS, lv->beta_GBps[c]);
    vb_yaml_pairs_free(&p);
}

/* efficiency: each key optional (machine.h); fractions in (0, 1] */
static void load_efficiency(const vb_my *y, yaml_node_t *n, vb_machine *m) {
    m->attn_eff = m->mem_eff = 1;
    if (!n) return;
    vb_yaml_pairs p;
    vb_my_pairs(y, n, "efficiency", &p);
    static const char *const known[] = {"gemm_half_width", "attention", "memory", "uncertainty", "overlap_slowdown",
                                        NULL};
    vb_my_only_keys(y, &p, "efficiency", known);
    m->gemm_half_width = vb_my_num_or(y, &p, "efficiency", "gemm_half_width", 0, 1e6, 0);
    m->attn_eff = vb_my_num_or(y, &p, "efficiency", "attention", 1e-3, 1, 1);
    m->mem_eff = vb_my_num_or(y, &p, "efficiency", "memory", 1e-3, 1, 1);
    m->eff_uncertainty = vb_my_num_or(y, &p, "efficiency", "uncertainty", 0, 10, 0);
    m->overlap_slowdown = vb_my_num_or(y, &p, "efficiency", "overlap_slowdown", 0, 10, 0);
    vb_yaml_pairs_free(&p);
}

static void load_level(const vb_my *y, yaml_node_t *n, int i, vb_mlevel *lv) {
    char where[64];
    snprintf(where, sizeof where, "levels[%d]", i);
    vb_yaml_pairs p;
    vb_my_pairs(y, n, where, &p);
    static const char *const known[] = {"name",      "ranks",         "alpha_us",  "beta_GBps",      "uncertainty",
                                        "nics_per_node", "nic_GBps", "allreduce", "allgather", "reduce_scatter",
                                        "broadcast", NULL};
    vb_my_only_keys(y, &p, where, known);
    memset(lv, 0, sizeof *lv);
    vb_my_str(y, &p, where, "name", lv->name, sizeof lv->name);
    int line = 0;
    yaml_node_t *rk = vb_my_get(&p, "ranks", &line);
    if (!rk) vb_die_input("%s: %s: missing required key 'ranks' (an integer, node or all)", y->file, where);
    const char *t = vb_yaml_scalar(rk);
    if (t && strcmp(t, "node") == 0)
        lv->ranks = VB_LEVEL_RANKS_NODE;
    else if (t && strcmp(t, "all") == 0)
        lv->ranks = VB_LEVEL_RANKS_ALL;
    else
        lv->ranks = vb_my_int(y, &p, where, "ranks", 2, 1 << 20);
    const double alpha = vb_my_num(y, &p, where, "alpha_us", 0, MAX_ALPHA_US);
    const double beta = vb_my_num(y, &p, where, "beta_GBps", 1e-9, MAX_BETA_GBPS);
    for (int c = 0; c < VB_MACHINE_NCOLL; c++) lv->alpha_us[c] = alpha, lv->beta_GBps[c] = beta, lv->alg[c] = VB_ALG_RING;
    lv->uncertainty = vb_my_num(y, &p, where, "uncertainty", 0, 10);
    lv->nics_per_node = vb_my_int_or(y, &p, where, "nics_per_node", 1, 1024, 0);
    lv->nic_GBps = vb_my_num_or(y, &p, where, "nic_GBps", 1e-9, MAX_BETA_GBPS, 0);
    if ((lv->nics_per_node > 0) != (lv->nic_GBps > 0))
        vb_die_input("%s: %s: nics_per_node and nic_GBps go together (the node's NICs and each one's bandwidth)",
                     y->file, where);
    for (int c = 0; c < VB_MACHINE_NCOLL; c++) {
        yaml_node_t *cn = vb_my_get(&p, k_coll[c], NULL);
        if (!cn) continue;
        char w[96];
        snprintf(w, sizeof w, "%s.%s", where, k_coll[c]);
        load_coll(y, cn, w, lv, c);
    }
    vb_yaml_pairs_free(&p);
}

void vb_machine_load(const char *path, vb_machine *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    yaml_document_t doc;
    char label[1100];
    snprintf(label, sizeof label, "--machine %s", path);
    if (!vb_yaml_load(&doc, path, label)) vb_die_input("%s: empty file (expected a machine description)", path);
    vb_my y = {.file = path, .doc = &doc};
    vb_yaml_pairs p;
    vb_my_pairs(&y, yaml_document_get_root_node(&doc), "machine", &p);
    static const char *const known[] = {"name",           "description", "device",      "gpus_per_node", "ranks_per_node",
                                        "cores_per_node", "peak_tflops", "memory_GBps", "efficiency",    "levels",
                                        NULL};
    vb_my_only_keys(&y, &p, "machine", known);
    vb_my_str(&y, &p, "machine", "name", m->name, sizeof m->name);
    char desc[1024];
    vb_my_str_or(&y, &p, "machine", "description", desc, sizeof desc);
    vb_my_str_or(&y, &p, "machine", "device", m->device, sizeof m->device);
    m->gpus_per_node = vb_my_int(&y, &p, "machine", "gpus_per_node", 0, 1024);
    if (m->gpus_per_node > 0) {
        if (vb_my_get(&p, "ranks_per_node", NULL))
            vb_die_input("%s: machine: ranks_per_node is for CPU machines (gpus_per_node 0); a GPU machine runs one "
                         "rank per GPU",
                         path);
        m->ranks_per_node = m->gpus_per_node;
    } else {
        m->ranks_per_node = vb_my_int(&y, &p, "machine", "ranks_per_node", 1, 1 << 20);
    }
    m->cores_per_node = vb_my_int(&y, &p, "machine", "cores_per_node", 1, 1 << 20);

    yaml_node_t *pk = vb_my_get(&p, "peak_tflops", NULL);
    if (!pk) vb_die_input("%s: machine: missing required key 'peak_tflops' (fp32, tf32, bf16, fp16)", path);
    vb_yaml_pairs pp;
    vb_my_pairs(&y, pk, "peak_tflops", &pp);
    static const char *const precs[] = {"fp32", "tf32", "bf16", "fp16", NULL};
    vb_my_only_keys(&y, &pp, "peak_tflops", precs);
    for (int k = 0; k < VB_NPREC; k++) m->peak_tflops[k] = vb_my_num_or(&y, &pp, "peak_tflops", precs[k], 1e-9, MAX_TFLOPS, 0);
    if (m->peak_tflops[VB_PREC_FP32] <= 0) vb_die_input("%s: peak_tflops: missing required key 'fp32'", path);
    vb_yaml_pairs_free(&pp);
    m->memory_GBps = vb_my_num_or(&y, &p, "machine", "memory_GBps", 1e-6, MAX_BETA_GBPS, 0);
    load_efficiency(&y, vb_my_get(&p, "efficiency", NULL), m);

    int lline = 0;
    yaml_node_t *ln = vb_my_get(&p, "levels", &lline);
    if (!ln) vb_die_input("%s: machine: missing required key 'levels' (the hierarchy, innermost first)", path);
    int n = 0;
    yaml_node_t **items = vb_my_list(&y, ln, "levels", &n);
    if (n < 1 || n > VB_MACHINE_MAX_LEVELS)
        vb_die_input("%s: levels (line %d): %d levels (expected 1 to %d)", path, lline, n, VB_MACHINE_MAX_LEVELS);
    for (int i = 0; i < n; i++) load_level(&y, items[i], i, &m->level[i]);
    m->nlevels = n;
    free(items);
    /* the levels must nest: integer spans below the node divide the node's
     * ranks, `node` at most once, `all` only last */
    int prev = 1;
    bool seen_node = false;
    for (int i = 0; i < n; i++) {
        const vb_mlevel *lv = &m->level[i];
        for (int j = 0; j < i; j++)
            if (strcmp(m->level[j].name, lv->name) == 0)
                vb_die_input("%s: levels[%d].name: '%s' names two levels", path, i, lv->name);
        if (lv->ranks == VB_LEVEL_RANKS_ALL && i != n - 1)
            vb_die_input("%s: levels[%d].ranks: all is the outermost level and must come last", path, i);
        if (lv->ranks == VB_LEVEL_RANKS_NODE) {
            if (seen_node) vb_die_input("%s: levels[%d].ranks: a second level spanning the node", path, i);
            if (m->ranks_per_node % prev != 0)
                vb_die_input("%s: levels[%d]: the node's %d ranks are not whole units of %d ranks of the level inside",
                             path, i, m->ranks_per_node, prev);
            seen_node = true, prev = m->ranks_per_node;
        } else if (lv->ranks > 0) {
            if (seen_node) {
                if (lv->ranks % m->ranks_per_node != 0)
                    vb_die_input("%s: levels[%d].ranks: %d is not a whole number of nodes of %d ranks", path, i,
                                 lv->ranks, m->ranks_per_node);
            } else if (m->ranks_per_node % lv->ranks != 0) {
                vb_die_input("%s: levels[%d].ranks: %d does not divide the node's %d ranks", path, i, lv->ranks,
                             m->ranks_per_node);
            }
            if (lv->ranks <= prev || lv->ranks % prev != 0)
                vb_die_input("%s: levels[%d].ranks: %d is not a whole number (> 1) of the %d-rank units inside it",
                             path, i, lv->ranks, prev);
            prev = lv->ranks;
        }
    }
    vb_yaml_pairs_free(&p);
    yaml_document_delete(&doc);
}

bool vb_machine_can_price(const vb_machine *m) { return m && m->memory_GBps > 0; }

int vb_machine_level_ranks(const vb_machine *m, int l, int node_ranks, int world) {
    const int r = m->level[l].ranks;
    if (r == VB_LEVEL_RANKS_ALL) return world;
    if (r == VB_LEVEL_RANKS_NODE) return node_ranks;
    /* integer spans beyond the node are counted in nodes of the file's size */
    if (r > m->ranks_per_node && m->ranks_per_node > 0) return r / m->ranks_per_node * node_ranks;
    return r;
}

double vb_machine_rank_peak(const vb_machine *m, int p, int threads) {
    if (p < 0 || p >= VB_NPREC) return 0;
    const double pk = m->peak_tflops[p];
    if (m->gpus_per_node > 0) return pk;
    const double share = threads >= m->cores_per_node ? 1.0 : (double)threads / m->cores_per_node;
    return pk * share;
}
