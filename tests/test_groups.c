/* test_groups.c: tp / cp / dp layout arithmetic (core/comm/groups.h). */
#include "tests/test_util.h"

#include <stdio.h>
#include <string.h>

#include "core/comm/groups.h"

static const vb_group_kind all_kinds[] = {VB_GROUP_TP, VB_GROUP_CP, VB_GROUP_DP, VB_GROUP_TP_CP,
                                          VB_GROUP_TP_DP, VB_GROUP_CP_DP, VB_GROUP_WORLD};
#define NKINDS ((int)(sizeof all_kinds / sizeof all_kinds[0]))

static void expect_group(const vb_layout *l, int rank, vb_group_kind kind, const int *want, int n) {
    int got[64];
    assert_int_equal(vb_layout_group(l, rank, kind, got), n);
    for (int i = 0; i < n; i++) {
        if (got[i] != want[i])
            fail_msg("rank %d %s group: member %d is %d, want %d", rank, vb_group_kind_name(kind), i, got[i], want[i]);
    }
}

/* The brief's example: 8 ranks, tp 4, dp 2, order tp-dp (cp 1). */
static void test_tp4_dp2_example(void **state) {
    (void)state;
    vb_layout l;
    char err[256] = "";
    assert_int_equal(vb_layout_init(&l, 8, 4, 1, "tp-dp", err, sizeof err), 0);
    assert_int_equal(l.dp, 2);
    static const int tp0[] = {0, 1, 2, 3}, tp1[] = {4, 5, 6, 7};
    for (int r = 0; r < 4; r++) expect_group(&l, r, VB_GROUP_TP, tp0, 4);
    for (int r = 4; r < 8; r++) expect_group(&l, r, VB_GROUP_TP, tp1, 4);
    for (int r = 0; r < 8; r++) {
        int want[2] = {r % 4, r % 4 + 4};
        expect_group(&l, r, VB_GROUP_DP, want, 2);
        /* cp is 1: the cp x dp group is the dp group */
        expect_group(&l, r, VB_GROUP_CP_DP, want, 2);
        int self[1] = {r};
        expect_group(&l, r, VB_GROUP_CP, self, 1);
    }
    int tp, cp, dp;
    vb_layout_coords(&l, 6, &tp, &cp, &dp);
    assert_int_equal(tp, 2);
    assert_int_equal(cp, 0);
    assert_int_equal(dp, 1);
    char order[32];
    vb_layout_order_string(&l, order, sizeof order);
    assert_string_equal(order, "tp-dp-cp");
}

/* dp fastest: consecutive ranks are data-parallel replicas. */
static void test_dp_first_and_combined_groups(void **state) {
    (void)state;
    vb_layout l;
    char err[256];
    /* 8 ranks, tp 2, cp 2, dp 2, order cp-dp-tp: stride cp 1, dp 2, tp 4 */
    assert_int_equal(vb_layout_init(&l, 8, 2, 2, "cp-dp-tp", err, sizeof err), 0);
    assert_int_equal(l.stride[VB_DIM_CP], 1);
    assert_int_equal(l.stride[VB_DIM_DP], 2);
    assert_int_equal(l.stride[VB_DIM_TP], 4);
    static const int tp_of_1[] = {1, 5};
    expect_group(&l, 1, VB_GROUP_TP, tp_of_1, 2);
    /* cp x dp group of rank 5 (tp 1): ranks 4..7, cp fastest */
    static const int cpdp_of_5[] = {4, 5, 6, 7};
    expect_group(&l, 5, VB_GROUP_CP_DP, cpdp_of_5, 4);
    assert_int_equal(vb_layout_group_rank(&l, 6, VB_GROUP_CP_DP), 2);
    assert_int_equal(vb_layout_group_index(&l, 6, VB_GROUP_CP_DP), 1);
    /* order dp-tp-cp, same sizes: dp stride 1, tp 2, cp 4; cp x dp of rank 3 */
    assert_int_equal(vb_layout_init(&l, 8, 2, 2, "dp-tp-cp", err, sizeof err), 0);
    /* rank 3: dp 1, tp 1, cp 0; members share tp 1: dp fastest within the group */
    static const int cpdp_of_3[] = {2, 3, 6, 7};
    expect_group(&l, 3, VB_GROUP_CP_DP, cpdp_of_3, 4);
}

/* Invariants over many sizes and orders. */
static void check_layout(const vb_layout *l, const char *what) {
    int world = l->world;
    /* coords <-> rank round-trip, every coordinate tuple used once */
    int seen[64] = {0};
    for (int r = 0; r < world; r++) {
        int tp, cp, dp;
        vb_layout_coords(l, r, &tp, &cp, &dp);
        if (tp >= l->tp || cp >= l->cp || dp >= l->dp) fail_msg("%s: rank %d coords out of range", what, r);
        int back = vb_layout_rank(l, tp, cp, dp);
        if (back != r) fail_msg("%s: rank %d -> (%d,%d,%d) -> %d", what, r, tp, cp, dp, back);
        seen[(tp * l->cp + cp) * l->dp + dp]++;
    }
    for (int i = 0; i < world; i++)
        if (seen[i] != 1) fail_msg("%s: coordinate tuple %d used %d times", what, i, seen[i]);
    /* the fastest-varying dim of size > 1 has stride 1; strides follow the order */
    assert_int_equal(l->stride[l->order[0]], 1);
    assert_int_equal(l->stride[l->order[1]], l->size[l->order[0]]);
    assert_int_equal(l->stride[l->order[2]], l->size[l->order[0]] * l->size[l->order[1]]);

    for (int k = 0; k < NKINDS; k++) {
        vb_group_kind kind = all_kinds[k];
        int gsize = vb_layout_group_size(l, kind);
        int ngroups = world / gsize;
        int owner[64]; /* which group (by index) each rank fell into */
        for (int r = 0; r < world; r++) owner[r] = -1;
        for (int r = 0; r < world; r++) {
            int members[64];
            int n = vb_layout_group(l, r, kind, members);
            if (n != gsize) fail_msg("%s %s: group size %d, want %d", what, vb_group_kind_name(kind), n, gsize);
            int gi = vb_layout_group_index(l, r, kind);
            if (gi < 0 || gi >= ngroups) fail_msg("%s %s: group index %d of %d", what, vb_group_kind_name(kind), gi, ngroups);
            bool self = false;
            for (int i = 0; i < n; i++) {
                int m = members[i];
                if (m < 0 || m >= world) fail_msg("%s: member %d out of range", what, m);
                if (m == r) {
                    self = true;
                    if (vb_layout_group_rank(l, r, kind) != i)
                        fail_msg("%s %s: rank %d at position %d but group rank %d", what,
                                 vb_group_kind_name(kind), r, i, vb_layout_group_rank(l, r, kind));
                }
                /* every member sees the same group: the groups partition the world */
                if (vb_layout_group_index(l, m, kind) != gi)
                    fail_msg("%s %s: rank %d and member %d disagree on the group", what, vb_group_kind_name(kind), r, m);
                if (owner[m] != -1 && owner[m] != gi)
                    fail_msg("%s %s: rank %d in two groups", what, vb_group_kind_name(kind), m);
                owner[m] = gi;
                /* the members differ only in the kind's coordinates */
                int c0[3], c1[3];
                vb_layout_coords(l, r, &c0[0], &c0[1], &c0[2]);
                vb_layout_coords(l, m, &c1[0], &c1[1], &c1[2]);
                for (int d = 0; d < 3; d++)
                    if (!((int)kind & (1 << d)) && c0[d] != c1[d])
                        fail_msg("%s %s: member %d of rank %d differs in dim %d", what, vb_group_kind_name(kind), m, r, d);
            }
            if (!self) fail_msg("%s %s: rank %d not in its own group", what, vb_group_kind_name(kind), r);
        }
        for (int r = 0; r < world; r++)
            if (owner[r] < 0) fail_msg("%s %s: rank %d in no group", what, vb_group_kind_name(kind), r);
    }
    /* the single-dim group of the fastest dim is a run of consecutive ranks */
    vb_group_kind fastest = (vb_group_kind)(1 << l->order[0]);
    int members[64];
    int n = vb_layout_group(l, 0, fastest, members);
    for (int i = 0; i < n; i++) assert_int_equal(members[i], i);
}

static void test_invariants_all_sizes_and_orders(void **state) {
    (void)state;
    static const char *orders[] = {"tp-cp-dp", "tp-dp-cp", "cp-tp-dp", "cp-dp-tp", "dp-tp-cp", "dp-cp-tp"};
    int checked = 0;
    for (int world = 1; world <= 16; world++)
        for (int tp = 1; tp <= world; tp++)
            for (int cp = 1; tp * cp <= world; cp++) {
                if (world % (tp * cp)) continue;
                for (int o = 0; o < 6; o++) {
                    vb_layout l;
                    char err[256] = "";
                    if (vb_layout_init(&l, world, tp, cp, orders[o], err, sizeof err) != 0)
                        fail_msg("world %d tp %d cp %d %s rejected: %s", world, tp, cp, orders[o], err);
                    char what[96];
                    snprintf(what, sizeof what, "world %d tp %d cp %d %s", world, tp, cp, orders[o]);
                    check_layout(&l, what);
                    checked++;
                }
            }
    assert_true(checked > 300);
}

static void test_default_order_and_equivalence(void **state) {
    (void)state;
    vb_layout a, b;
    char err[256];
    assert_int_equal(vb_layout_init(&a, 8, 2, 1, NULL, err, sizeof err), 0);
    char order[32];
    vb_layout_order_string(&a, order, sizeof order);
    assert_string_equal(order, "tp-cp-dp");
    /* cp is 1: moving it anywhere leaves the mapping unchanged */
    assert_int_equal(vb_layout_init(&b, 8, 2, 1, "cp-tp-dp", err, sizeof err), 0);
    assert_true(vb_layout_equivalent(&a, &b));
    assert_int_equal(vb_layout_init(&b, 8, 2, 1, "dp-tp-cp", err, sizeof err), 0);
    assert_false(vb_layout_equivalent(&a, &b));
}

static void expect_rejected(int world, int tp, int cp, const char *order, const char *const *needles) {
    vb_layout l;
    char err[256] = "";
    assert_int_equal(vb_layout_init(&l, world, tp, cp, order, err, sizeof err), -1);
    assert_null(strchr(err, '\n'));
    for (int i = 0; needles[i]; i++)
        if (!strstr(err, needles[i])) fail_msg("message '%s' does not name '%s'", err, needles[i]);
}

static void test_invalid_layouts(void **state) {
    (void)state;
    expect_rejected(6, 4, 1, NULL, (const char *const[]){"6", "tensor_parallel 4", "context_parallel 1", NULL});
    expect_rejected(8, 2, 3, "tp-cp-dp", (const char *const[]){"8", "2", "3", NULL});
    expect_rejected(0, 1, 1, NULL, (const char *const[]){"world size 0", NULL});
    expect_rejected(4, 0, 1, NULL, (const char *const[]){"tensor_parallel 0", NULL});
    expect_rejected(4, 2, 1, "tp-pp-dp", (const char *const[]){"tp-pp-dp", "pp", NULL});
    expect_rejected(4, 2, 1, "tp-tp-dp", (const char *const[]){"tp-tp-dp", "tp named twice", NULL});
    expect_rejected(8, 2, 2, "tp-dp", (const char *const[]){"tp-dp", "cp", "2", NULL});
    expect_rejected(4, 1, 1, "tp--dp", (const char *const[]){"tp--dp", NULL});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tp4_dp2_example),
        cmocka_unit_test(test_dp_first_and_combined_groups),
        cmocka_unit_test(test_invariants_all_sizes_and_orders),
        cmocka_unit_test(test_default_order_and_equivalence),
        cmocka_unit_test(test_invalid_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
