/* test_model_machine.c: what the scaling model knows about a machine it never
 * measured: machine files (analysis/scaling/machine.h) and their refusals, where a
 * layout's groups sit (scaling_place.c), what a collective costs there
 * (scaling_comm.c, worked by hand), commbench winning where it measured,
 * interval corners, and references from a step time (scaling_ref.c): FLOP
 * shares, rescaling to another model size, the spread, and solving a
 * multi-rank measurement for one rank's compute.
 * Times compare to 1e-12 relative: every expected value below is a short sum
 * of exact binary fractions' products, far inside double rounding. */
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/scaling/machine.h"
#include "analysis/scaling/scaling_model.h"
#include "analysis/scaling/scaling_comm.h"
#include "analysis/scaling/scaling_ref.h"
#include "core/comm/groups.h"

static char g_dir[512];

/* A two-level machine with round numbers: 4 ranks per node on a level of
 * alpha 1 us, beta 100 GB/s; the network alpha 10 us, beta 50 GB/s, 2 NICs
 * of 40 GB/s per node (so 4 ranks share 80 GB/s: 20 each). */
static const char *k_machine = "name: toy\n"
                               "gpus_per_node: 4\n"
                               "cores_per_node: 16\n"
                               "peak_tflops: {fp32: 10, bf16: 100}\n"
                               "levels:\n"
                               "  - name: link\n"
                               "    ranks: node\n"
                               "    alpha_us: 1\n"
                               "    beta_GBps: 100\n"
                               "    uncertainty: 0.5\n"
                               "    allreduce: {algorithm: tree}\n"
                               "  - name: net\n"
                               "    ranks: all\n"
                               "    alpha_us: 10\n"
                               "    beta_GBps: 50\n"
                               "    nics_per_node: 2\n"
                               "    nic_GBps: 40\n"
                               "    uncertainty: 0.25\n";

static int setup(void **state) {
    (void)state;
    tu_tmpdir(g_dir, sizeof g_dir, "model_machine");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tu_rm_rf(g_dir);
    return 0;
}

static void test_shipped_files(void **state) {
    (void)state;
    const char *names[] = {"perlmutter-gpu", "perlmutter-gpu-80gb", "h100-sxm-ib", "h100-nvl-pair", "h100-nvl-pcie",
                           "cpu-2core",      "summit-v100",         "polaris-a100"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/scenarios/machines/%s.yaml", tu_source_dir(), names[i]);
        vb_machine m;
        vb_machine_load(path, &m);
        assert_string_equal(m.name, names[i]);
        assert_true(m.nlevels >= 1 && m.peak_tflops[VB_PREC_FP32] > 0 && m.ranks_per_node >= 1);
        /* every GPU file prices ops (memory bandwidth and efficiency) but Summit's, whose V100 no
         * measurement backs (it scales by peaks); the CPU box has no figures for it */
        const bool v100 = strcmp(names[i], "summit-v100") == 0;
        assert_true(vb_machine_can_price(&m) == (m.gpus_per_node > 0 && !v100));
        if (m.gpus_per_node > 0 && !v100) assert_true(m.gemm_half_width > 0 && m.attn_eff < 1 && m.mem_eff < 1);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/scenarios/machines/perlmutter-gpu.yaml", tu_source_dir());
    vb_machine m;
    vb_machine_load(path, &m);
    assert_int_equal(m.gpus_per_node, 4);
    assert_int_equal(m.nlevels, 2);
    assert_int_equal(m.level[1].nics_per_node, 4);
    assert_int_equal(m.level[0].ranks, VB_LEVEL_RANKS_NODE);
    assert_int_equal(m.level[1].ranks, VB_LEVEL_RANKS_ALL);
    tu_assert_rel(m.peak_tflops[VB_PREC_BF16], 312, 0);
    snprintf(path, sizeof path, "%s/scenarios/machines/h100-sxm-ib.yaml", tu_source_dir());
    vb_machine_load(path, &m);
    assert_int_equal(m.level[0].alg[VB_COLL_ALLREDUCE], VB_ALG_NVLS);
    tu_assert_rel(m.level[0].beta_GBps[VB_COLL_ALLREDUCE], 480, 0);
    tu_assert_rel(m.level[0].beta_GBps[VB_COLL_ALLGATHER], 370, 0); /* the override is allreduce's alone */
    /* Summit: NVLink 2 inside a socket of 3 GPUs, the X-Bus across the node, two EDR rails;
     * Volta has no bf16 (a bf16 reference cannot be rescaled to it) */
    snprintf(path, sizeof path, "%s/scenarios/machines/summit-v100.yaml", tu_source_dir());
    vb_machine_load(path, &m);
    assert_int_equal(m.gpus_per_node, 6);
    assert_int_equal(m.nlevels, 3);
    assert_int_equal(m.level[0].ranks, 3);
    assert_int_equal(m.level[1].ranks, VB_LEVEL_RANKS_NODE);
    assert_int_equal(m.level[2].nics_per_node, 2);
    assert_int_equal(m.level[2].alg[VB_COLL_ALLREDUCE], VB_ALG_TREE);
    assert_true(m.peak_tflops[VB_PREC_BF16] == 0 && m.peak_tflops[VB_PREC_FP16] > 0);
    snprintf(path, sizeof path, "%s/scenarios/machines/polaris-a100.yaml", tu_source_dir());
    vb_machine_load(path, &m);
    assert_int_equal(m.gpus_per_node, 4);
    assert_int_equal(m.level[1].nics_per_node, 2);
}

typedef struct {
    const char *name, *text;
} bad_file;

static void load_child(void *ctx) {
    const bad_file *b = ctx;
    vb_machine m;
    vb_machine_load(tu_write_tmp(g_dir, b->name, b->text), &m);
}

#define HEAD "name: x\ngpus_per_node: 4\ncores_per_node: 8\npeak_tflops: {fp32: 1}\n"
static void test_bad_files(void **state) {
    (void)state;
    const struct {
        bad_file f;
        const char *needle;
    } cases[] = {
        {{"typo.yaml", HEAD "levels:\n  - {name: a, ranks: node, alpha_us: 1, beta_gbps: 2, uncertainty: 0}\n"},
         "typo.yaml: levels[0].beta_gbps (line 6): unknown key"},
        {{"nobeta.yaml", HEAD "levels:\n  - {name: a, ranks: node, alpha_us: 1, uncertainty: 0}\n"},
         "nobeta.yaml: levels[0]: missing required key 'beta_GBps'"},
        {{"neg.yaml", HEAD "levels:\n  - {name: a, ranks: node, alpha_us: -1, beta_GBps: 2, uncertainty: 0}\n"},
         "neg.yaml: levels[0].alpha_us (line 6): -1 is outside"},
        {{"allfirst.yaml", HEAD "levels:\n  - {name: a, ranks: all, alpha_us: 1, beta_GBps: 2, uncertainty: 0}\n"
                                "  - {name: b, ranks: node, alpha_us: 1, beta_GBps: 2, uncertainty: 0}\n"},
         "allfirst.yaml: levels[0].ranks: all is the outermost level and must come last"},
        {{"nest.yaml", HEAD "levels:\n  - {name: a, ranks: 3, alpha_us: 1, beta_GBps: 2, uncertainty: 0}\n"},
         "nest.yaml: levels[0].ranks: 3 does not divide the node's 4 ranks"},
        {{"alg.yaml", HEAD "levels:\n  - {name: a, ranks: node, alpha_us: 1, beta_GBps: 2, uncertainty: 0,\n"
                           "     allgather: {algorithm: nvls}}\n"},
         "alg.yaml: levels[0].allgather.algorithm (line 7): nvls applies to allreduce only"},
        {{"nic.yaml", HEAD "levels:\n  - {name: a, ranks: all, alpha_us: 1, beta_GBps: 2, uncertainty: 0, "
                           "nics_per_node: 2}\n"},
         "nic.yaml: levels[0]: nics_per_node and nic_GBps go together"},
        {{"nopeak.yaml", "name: x\ngpus_per_node: 4\ncores_per_node: 8\nlevels: []\n"},
         "nopeak.yaml: machine: missing required key 'peak_tflops'"},
        {{"cpu.yaml", "name: x\ngpus_per_node: 2\nranks_per_node: 2\ncores_per_node: 8\npeak_tflops: {fp32: 1}\n"},
         "cpu.yaml: machine: ranks_per_node is for CPU machines"},
        /* what pricing reads (scaling_price.h): fractions in (0, 1], a bandwidth > 0, no unknown key */
        {{"eff1.yaml", HEAD "efficiency: {attention: 1.5}\nlevels: []\n"},
         "eff1.yaml: efficiency.attention (line 5): 1.5 is outside"},
        {{"eff2.yaml", HEAD "efficiency: {gemm_halfwidth: 64}\nlevels: []\n"},
         "eff2.yaml: efficiency.gemm_halfwidth (line 5): unknown key"},
        {{"eff3.yaml", HEAD "efficiency: {memory: 0}\nlevels: []\n"}, "eff3.yaml: efficiency.memory (line 5): 0 is"},
        {{"bw.yaml", HEAD "memory_GBps: -3\nlevels: []\n"}, "bw.yaml: machine.memory_GBps (line 5): -3 is outside"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) tu_expect_exit(2, cases[i].needle, load_child, (void *)&cases[i].f);
}

static vb_machine toy(void) {
    vb_machine m;
    vb_machine_load(tu_write_tmp(g_dir, "toy.yaml", k_machine), &m);
    return m;
}

static vb_layout lay(int world, int tp, int cp, const char *order) {
    vb_layout l;
    char err[200];
    if (vb_layout_init(&l, world, tp, cp, order, err, sizeof err) != 0) fail_msg("%s", err);
    return l;
}

/* Which levels a group spans follows parallel_order and the ranks per node. */
static void test_placement(void **state) {
    (void)state;
    const vb_machine m = toy();
    char err[300];
    vb_mplace p;
    /* 16 ranks, tp 4, order tp-cp-dp: each tp group is one node; each dp group one rank on each of 4 nodes */
    vb_layout l = lay(16, 4, 1, "tp-cp-dp");
    assert_int_equal(vb_mplace_group(&m, &l, 4, VB_GROUP_TP, &p, err, sizeof err), 0);
    assert_int_equal(p.nvec, 1);
    assert_int_equal(p.k[0][0], 4), assert_int_equal(p.k[0][1], 1), assert_int_equal(p.top, 0);
    assert_int_equal(vb_mplace_group(&m, &l, 4, VB_GROUP_DP, &p, err, sizeof err), 0);
    assert_int_equal(p.k[0][0], 1), assert_int_equal(p.k[0][1], 4), assert_int_equal(p.top, 1);
    /* dp varying fastest puts dp in the node and tp across nodes */
    l = lay(16, 4, 1, "dp-tp-cp");
    assert_int_equal(vb_mplace_group(&m, &l, 4, VB_GROUP_TP, &p, err, sizeof err), 0);
    assert_int_equal(p.k[0][0], 1), assert_int_equal(p.k[0][1], 4), assert_int_equal(p.top, 1);
    assert_int_equal(vb_mplace_group(&m, &l, 4, VB_GROUP_DP, &p, err, sizeof err), 0);
    assert_int_equal(p.k[0][0], 4), assert_int_equal(p.top, 0);
    /* dp 16 on 4 per node: 4 in each node, 4 nodes */
    l = lay(16, 1, 1, NULL);
    assert_int_equal(vb_mplace_group(&m, &l, 4, VB_GROUP_CP_DP, &p, err, sizeof err), 0);
    assert_int_equal(p.k[0][0], 4), assert_int_equal(p.k[0][1], 4);
    /* tp 2 x dp 2 with 2 ranks per node (a launch with fewer ranks than GPUs) */
    l = lay(4, 2, 1, NULL);
    assert_int_equal(vb_mplace_group(&m, &l, 2, VB_GROUP_DP, &p, err, sizeof err), 0);
    assert_int_equal(p.k[0][0], 1), assert_int_equal(p.k[0][1], 2);
    /* tp 3 on nodes of 4 (heads permitting): [0 1 2] in a node, [3 4 5] across two */
    l = lay(12, 3, 1, NULL);
    assert_int_equal(vb_mplace_group(&m, &l, 4, VB_GROUP_TP, &p, err, sizeof err), 0);
    assert_int_equal(p.nvec, 2);
    assert_int_equal(p.top, 1);
    /* a group of one sits nowhere */
    assert_int_equal(vb_mplace_group(&m, &l, 4, VB_GROUP_CP, &p, err, sizeof err), 0);
    assert_int_equal(p.nvec, 0), assert_int_equal(p.top, -1);
    /* a machine whose levels end at the node cannot hold a group across nodes */
    vb_machine one;
    vb_machine_load(tu_write_tmp(g_dir, "one.yaml", HEAD "levels:\n  - {name: a, ranks: node, alpha_us: 1, beta_GBps: 2, "
                                               "uncertainty: 0}\n"),
                    &one);
    l = lay(8, 1, 1, NULL);
    assert_int_equal(vb_mplace_group(&one, &l, 4, VB_GROUP_DP, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "spans 2 units of its outermost level a (4 ranks each)"));
}

/* The collective forms per level, by hand (microseconds; n in bytes; GB/s = 1e3 B/us). */
static void test_costs(void **state) {
    (void)state;
    const vb_machine m = toy();
    const double n = 1 << 20; /* 1 MiB */
    /* tree allreduce on the link over 4: 2 ceil(log2 4) x 1 us + 2 x 3/4 x n / 100e3 */
    tu_assert_rel(vb_mlevel_seconds(&m, 0, VB_COLL_ALLREDUCE, 4, n, 4, 1.0), (4 + 1.5 * n / 100e3) * 1e-6, 1e-12);
    /* ring allgather on the link: 3 x 1 + 3/4 n / 100e3 */
    tu_assert_rel(vb_mlevel_seconds(&m, 0, VB_COLL_ALLGATHER, 4, n, 4, 1.0), (3 + 0.75 * n / 100e3) * 1e-6, 1e-12);
    /* the network shared by 4 ranks over 2 NICs of 40: 20 GB/s each; ring allreduce over 4 nodes */
    tu_assert_rel(vb_mlevel_seconds(&m, 1, VB_COLL_ALLREDUCE, 4, n, 4, 1.0), (60 + 1.5 * n / 20e3) * 1e-6, 1e-12);
    /* one rank per node has the file's per-rank 50 */
    tu_assert_rel(vb_mlevel_seconds(&m, 1, VB_COLL_ALLREDUCE, 4, n, 1, 1.0), (60 + 1.5 * n / 50e3) * 1e-6, 1e-12);
    /* beta x0.75 */
    tu_assert_rel(vb_mlevel_seconds(&m, 1, VB_COLL_ALLREDUCE, 4, n, 4, 0.75), (60 + 1.5 * n / 15e3) * 1e-6, 1e-12);

    /* dp 16 on 4 nodes: reduce-scatter and all-gather on the link around the network allreduce of n/4 */
    vb_layout l = lay(16, 1, 1, NULL);
    vb_mplace p;
    char err[200];
    assert_int_equal(vb_mplace_group(&m, &l, 4, VB_GROUP_CP_DP, &p, err, sizeof err), 0);
    vb_ab_table none = {0};
    vb_mref ref = {.nref = 1};
    const vb_mctx ctx = {.ref = &ref, .fits = &none, .machine = &m};
    vb_mknobs kn;
    vb_mknobs_nominal(&kn);
    vb_mcomm_use u;
    const double rs = 3 + 0.75 * n / 100e3, ar = 60 + 1.5 * (n / 4) / 20e3;
    const double t = vb_mcomm_seconds(&ctx, &p, VB_COLL_ALLREDUCE, "dp", 16, 16, 4, n, &kn, &u);
    tu_assert_rel(t, (2 * rs + ar) * 1e-6, 1e-12);
    assert_int_equal(u.source, VB_SRC_MACHINE);
    assert_int_equal(u.level, 1);
    /* at the slow corner each stage grows by its level's uncertainty: the link x1.5, the network x1.25 */
    kn.corner = 1;
    tu_assert_rel(vb_mcomm_seconds(&ctx, &p, VB_COLL_ALLREDUCE, "dp", 16, 16, 4, n, &kn, NULL),
               (2 * rs * 1.5 + ar * 1.25) * 1e-6, 1e-12);
    kn.corner = -1;
    tu_assert_rel(vb_mcomm_seconds(&ctx, &p, VB_COLL_ALLREDUCE, "dp", 16, 16, 4, n, &kn, NULL),
               (2 * rs / 1.5 + ar / 1.25) * 1e-6, 1e-12);
    kn.corner = 0;
    /* an allgather spanning the nodes: the network gathers n/4 among the rails, the link the whole n */
    tu_assert_rel(vb_mcomm_seconds(&ctx, &p, VB_COLL_ALLGATHER, "dp", 16, 16, 4, n, &kn, NULL),
               (3 + 0.75 * n / 100e3 + 30 + 0.75 * (n / 4) / 20e3) * 1e-6, 1e-12);

    /* commbench measured 16 ranks: its fit wins; it did not measure 8: the file prices that */
    vb_ab_fit fits[1] = {{.coll = VB_COLL_ALLREDUCE, .group = "dp", .p = 16, .world = 16, .alpha_us = 7,
                          .beta_GBps = 2, .rel_rms = 0.1}};
    vb_ab_table tab = {.fits = fits, .n = 1};
    const vb_mctx both = {.ref = &ref, .fits = &tab, .machine = &m};
    const double fit = vb_mcomm_seconds(&both, &p, VB_COLL_ALLREDUCE, "dp", 16, 16, 4, n, &kn, &u);
    tu_assert_rel(fit, (30 * 7 + 30.0 / 16 * n / 2e3) * 1e-6, 1e-12);
    assert_int_equal(u.source, VB_SRC_COMMBENCH);
    l = lay(8, 1, 1, NULL);
    assert_int_equal(vb_mplace_group(&m, &l, 4, VB_GROUP_CP_DP, &p, err, sizeof err), 0);
    vb_mcomm_seconds(&both, &p, VB_COLL_ALLREDUCE, "dp", 8, 8, 4, n, &kn, &u);
    assert_int_equal(u.source, VB_SRC_MACHINE);
    /* without a machine the nearest measured size stands in, flagged */
    const vb_mctx bench_only = {.ref = &ref, .fits = &tab};
    vb_mcomm_seconds(&bench_only, NULL, VB_COLL_ALLREDUCE, "dp", 8, 8, 4, n, &kn, &u);
    assert_true(u.source == VB_SRC_COMMBENCH && u.extrapolated);
}

static void test_corner_and_spread(void **state) {
    (void)state;
    tu_assert_rel(vb_corner_factor(1, 0.25), 1.25, 0);
    tu_assert_rel(vb_corner_factor(-1, 0.25), 0.8, 1e-15);
    tu_assert_rel(vb_corner_factor(0, 0.25), 1, 0);
    tu_assert_rel(vb_corner_factor(-1, 1.0), 0.5, 0);
    /* 0.09, 0.1, 0.11: quantiles 0.0905 and 0.1095 -> half of 0.019 over 0.1 */
    double v[3] = {0.11, 0.09, 0.1};
    tu_assert_rel(vb_rel_spread(v, 3), 0.095, 1e-12);
    double one[1] = {5};
    assert_true(vb_rel_spread(one, 1) == 0);
}

/* A step time with FLOP shares: the ops add up to the step, each in its FLOPs' proportion. */
static void test_reference_flop_shares(void **state) {
    (void)state;
    const char *path = tu_write_tmp(g_dir, "ref.yaml", "what: a published figure\n"
                                             "model: {embed_dim: 16, depth: 2, num_heads: 2, patch_size: 2,\n"
                                             "        img_size: [4, 8], n_in_channels: 1, n_out_channels: 1}\n"
                                             "amp: bf16\n"
                                             "local_batch: 4\n"
                                             "samples_per_s: [40, 40, 40]\n");
    vb_mref r;
    vb_mref_src src;
    vb_mref_load_file(path, &r, &src);
    tu_assert_rel(r.step_s[0], 0.1, 1e-15); /* 4 samples at 40 / s */
    assert_int_equal(r.prec, VB_PREC_BF16);
    assert_int_equal(r.act_bytes, 2);
    assert_true(r.spread == 0);
    double sum = 0, qkv = 0, fc1 = 0, att = 0, qkv_b = 0, att_b = 0;
    for (int i = 0; i < r.nops; i++) {
        sum += r.ops[i].step_s[0];
        if (!strcmp(r.ops[i].name, "matmul_forward_qkv")) qkv = r.ops[i].step_s[0], tu_assert_rel(r.ops[i].calls, 6, 0);
        if (!strcmp(r.ops[i].name, "matmul_backward_qkv")) qkv_b = r.ops[i].step_s[0];
        if (!strcmp(r.ops[i].name, "matmul_forward_fc1")) fc1 = r.ops[i].step_s[0];
        if (!strcmp(r.ops[i].name, "attention_forward")) att = r.ops[i].step_s[0];
        if (!strcmp(r.ops[i].name, "attention_backward")) att_b = r.ops[i].step_s[0];
    }
    tu_assert_rel(sum, 0.1, 1e-12);
    /* per block: qkv 3 x 2 N D^2, fc1 2 N D 4D, attention 4 N^2 D (N 8, D 16): 3 : 4 : 2 N / D = 1 */
    tu_assert_rel(fc1 / qkv, 4.0 / 3.0, 1e-12);
    tu_assert_rel(att / qkv, (4.0 * 8 * 8 * 16) / (6.0 * 8 * 16 * 16), 1e-12);
    tu_assert_rel(qkv_b / qkv, 2, 1e-12);
    /* fused attention's backward runs five products to the forward's two (it recomputes Q K^T) */
    tu_assert_rel(att_b / att, 2.5, 1e-12);

    /* to twice the width: GEMMs x4, attention x2 */
    vb_mdims wide = r.d;
    wide.dim = 32;
    vb_mref w;
    vb_mref_rescale(&r, &wide, &w);
    for (int i = 0; i < w.nops; i++) {
        if (!strcmp(w.ops[i].name, "matmul_forward_qkv")) tu_assert_rel(w.ops[i].step_s[0], 4 * qkv, 1e-12);
        if (!strcmp(w.ops[i].name, "attention_forward")) tu_assert_rel(w.ops[i].step_s[0], 2 * att, 1e-12);
    }
    free(w.ops);
    free(r.ops);

    /* given shares: the rest of the step is one unsharded op */
    path = tu_write_tmp(g_dir, "shares.yaml", "what: shares\n"
                                    "model: {embed_dim: 16, depth: 2, num_heads: 2, patch_size: 2,\n"
                                    "        img_size: [4, 8], n_in_channels: 1, n_out_channels: 1}\n"
                                    "local_batch: 4\n"
                                    "step_s: [0.2]\n"
                                    "op_shares: {attention_forward: 0.25, matmul_backward_fc1: 0.25}\n");
    vb_mref_load_file(path, &r, &src);
    assert_int_equal(r.nops, 3);
    assert_string_equal(r.ops[2].name, "unattributed");
    tu_assert_rel(r.ops[2].step_s[0], 0.1, 1e-15);
    free(r.ops);
}

typedef struct {
    const char *name, *text;
} ref_file;

static void ref_child(void *ctx) {
    const ref_file *f = ctx;
    vb_mref r;
    vb_mref_src src;
    vb_mref_load_file(tu_write_tmp(g_dir, f->name, f->text), &r, &src);
}

#define DIMS "model: {embed_dim: 16, depth: 2, num_heads: 2, patch_size: 2, img_size: [4, 8], n_in_channels: 1, n_out_channels: 1}\n"
static void test_reference_refusals(void **state) {
    (void)state;
    ref_file a = {"r1.yaml", "what: x\n" DIMS "local_batch: 4\n"};
    tu_expect_exit(2, "r1.yaml: reference: give either samples_per_s or step_s", ref_child, &a);
    ref_file b = {"r2.yaml", "what: x\n" DIMS "local_batch: 4\nstep_s: [1]\nop_shares: {attention_forward: 0.7, "
                             "matmul_forward_fc1: 0.5}\n"};
    tu_expect_exit(2, "r2.yaml: reference.op_shares: the shares add up to 1.2", ref_child, &b);
    ref_file c = {"r3.yaml", "what: x\n" DIMS "local_batch: 4\nstep_s: [1]\nop_shares: {conv3d: 0.5}\n"};
    tu_expect_exit(2, "r3.yaml: reference.op_shares.conv3d (line 5): not an op of the ViT", ref_child, &c);
    ref_file d = {"r4.yaml", "what: x\n" DIMS "local_batch: 4\nstep_s: [1]\namp: fp8\n"};
    tu_expect_exit(2, "r4.yaml: reference.amp: 'fp8'", ref_child, &d);
}

/* A measurement on 4 ranks of one node: solving for one rank's compute and
 * predicting that layout again gives the measured step back. */
static void test_calibrate(void **state) {
    (void)state;
    const vb_machine m = toy();
    const char *path = tu_write_tmp(g_dir, "cal.yaml", "what: four ranks\n" DIMS "local_batch: 4\nstep_s: [0.05]\n"
                                             "layout: {dp: 4}\n");
    vb_mref r;
    vb_mref_src src;
    vb_mref_load_file(path, &r, &src);
    assert_int_equal(src.layout.dp, 4);
    vb_ab_table none = {0};
    vb_mctx ctx = {.ref = &r, .fits = &none, .machine = &m, .compute_scale = 1};
    vb_mlayout l = {.tp = 1, .cp = 1, .dp = 4, .local_batch = 4, .threads = 1, .node_ranks = 4, .cores = 4,
                    .bucket_cap_mb = 25};
    const double c = vb_mref_calibrate(&ctx, &r, &l, 0.05);
    assert_true(c > 0 && c <= 1);
    vb_mpred q;
    vb_model_predict(&ctx, &l, NULL, &q);
    tu_assert_rel(q.step_s, 0.05, 1e-9); /* the bisection stops at 1e-12 relative in c */
    free(r.ops);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_files),      cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_placement),          cmocka_unit_test(test_costs),
        cmocka_unit_test(test_corner_and_spread),  cmocka_unit_test(test_reference_flop_shares),
        cmocka_unit_test(test_reference_refusals), cmocka_unit_test(test_calibrate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
