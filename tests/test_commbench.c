/* test_commbench.c: the arithmetic of `vitbench commbench` (bench/commbench/commbench.h)
 * without MPI: size rounding, bus-bandwidth factors, and the check.
 *
 * The check is exercised against collectives simulated here on the host
 * from every rank's fill (sums in double, then stored back in the dtype
 * through a decode table built from the bit patterns, independent of the
 * encoder under test): correct results must count 0 wrong elements, and each
 * kind of corruption a real plane could produce -- one element off by one, a
 * rank's contribution missing, blocks in the wrong place, a broadcast that
 * never arrived, a reduction that only saw this rank's data -- must count
 * some. The shell test (test_commbench.sh) runs the real command under
 * mpirun.
 */
#include "tests/test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bench/commbench/commbench.h"

/* ---- an independent view of the dtypes ---- */

static double decode(vb_dtype t, const void *buf, size_t i) {
    if (t == VB_DTYPE_F32) {
        float f;
        memcpy(&f, (const char *)buf + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)buf + 2 * i, 2);
    if (t == VB_DTYPE_BF16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Stores v, which must be exactly representable in t: the 16-bit pattern is
 * found by decoding every pattern once (a table for the integers the check
 * uses, a search otherwise), so a result that needs rounding fails the test. */
enum { TABLE_LO = -1, TABLE_HI = 4096 };
static int32_t table[3][TABLE_HI - TABLE_LO + 1];
static bool table_made[3];

static void encode(vb_dtype t, void *buf, size_t i, double v) {
    if (t == VB_DTYPE_F32) {
        float f = (float)v;
        assert_true((double)f == v);
        memcpy((char *)buf + 4 * i, &f, 4);
        return;
    }
    if (!table_made[t]) {
        for (int k = 0; k <= TABLE_HI - TABLE_LO; k++) table[t][k] = -1;
        for (uint32_t h = 0; h < 65536; h++) {
            uint16_t hh = (uint16_t)h;
            double x = decode(t, &hh, 0);
            if (x >= TABLE_LO && x <= TABLE_HI && x == floor(x) && !(x == 0 && (h & 0x8000)))
                table[t][(int)x - TABLE_LO] = (int32_t)h;
        }
        table_made[t] = true;
    }
    if (v >= TABLE_LO && v <= TABLE_HI && v == floor(v)) {
        int32_t h = table[t][(int)v - TABLE_LO];
        if (h < 0) fail_msg("%g is not exact in %s", v, vb_dtype_name(t));
        uint16_t hh = (uint16_t)h;
        memcpy((char *)buf + 2 * i, &hh, 2);
        return;
    }
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t hh = (uint16_t)h;
        if (decode(t, &hh, 0) == v) {
            memcpy((char *)buf + 2 * i, &hh, 2);
            return;
        }
    }
    fail_msg("%g is not exact in %s", v, vb_dtype_name(t));
}

/* ---- simulated collectives ---- */

typedef struct sim {
    vb_cb_coll c;
    vb_dtype t;
    int n;
    size_t count;
    void **in;  /* [n] inputs from vb_cb_fill */
    void **out; /* [n] outputs of the simulated collective */
} sim;

static void sim_make(sim *s, vb_cb_coll c, vb_dtype t, int n, size_t count) {
    *s = (sim){.c = c, .t = t, .n = n, .count = count};
    s->in = calloc((size_t)n, sizeof *s->in);
    s->out = calloc((size_t)n, sizeof *s->out);
    assert_non_null(s->in);
    assert_non_null(s->out);
    size_t es = vb_dtype_size(t);
    for (int r = 0; r < n; r++) {
        s->in[r] = calloc(vb_cb_in_count(c, count, n) + 1, es);
        s->out[r] = calloc(vb_cb_out_count(c, count, n) + 1, es);
        vb_cb_fill(c, t, n, r, count, s->in[r]);
    }
}

static void sim_free(sim *s) {
    for (int r = 0; r < s->n; r++) {
        free(s->in[r]);
        free(s->out[r]);
    }
    free(s->in);
    free(s->out);
}

/* Rank r's output of a correct collective over the inputs of ranks [0, nsum)
 * (nsum < n: a reduction that missed the last ranks). */
static void sim_run(sim *s, int nsum) {
    size_t per = s->count / (size_t)s->n;
    size_t es = vb_dtype_size(s->t);
    for (int r = 0; r < s->n; r++) {
        switch (s->c) {
        case VB_CB_ALLREDUCE:
            if (r > 0) { /* the same on every rank */
                memcpy(s->out[r], s->out[0], s->count * es);
                break;
            }
            for (size_t j = 0; j < s->count; j++) {
                double sum = 0;
                for (int q = 0; q < nsum; q++) sum += decode(s->t, s->in[q], j);
                encode(s->t, s->out[r], j, sum);
            }
            break;
        case VB_CB_REDUCE_SCATTER:
            for (size_t i = 0; i < per; i++) {
                double sum = 0;
                for (int q = 0; q < nsum; q++) sum += decode(s->t, s->in[q], (size_t)r * per + i);
                encode(s->t, s->out[r], i, sum);
            }
            break;
        case VB_CB_ALLGATHER:
            for (int q = 0; q < s->n; q++) memcpy((char *)s->out[r] + (size_t)q * per * es, s->in[q], per * es);
            break;
        default:
            memcpy(s->out[r], s->in[0], s->count * es);
            break;
        }
    }
}

static long long wrong_on(const sim *s, int r) {
    return vb_cb_count_wrong(s->c, s->t, s->n, r, s->count, s->out[r]);
}

static const vb_dtype dtypes[] = {VB_DTYPE_F32, VB_DTYPE_BF16, VB_DTYPE_F16};
static const int group_sizes[] = {2, 3, 4, 8, 33, 300};

/* ---- tests ---- */

static void test_counts_follow_nccl_tests(void **state) {
    (void)state;
    assert_int_equal(vb_cb_count(VB_CB_ALLREDUCE, 8, VB_DTYPE_F32, 4), 2);
    assert_int_equal(vb_cb_count(VB_CB_BROADCAST, 7, VB_DTYPE_F32, 4), 1);
    assert_int_equal(vb_cb_count(VB_CB_ALLREDUCE, 3, VB_DTYPE_F32, 2), 0);   /* skipped */
    assert_int_equal(vb_cb_count(VB_CB_ALLGATHER, 8, VB_DTYPE_F32, 4), 0);   /* 2 elements, no whole share */
    assert_int_equal(vb_cb_count(VB_CB_ALLGATHER, 16, VB_DTYPE_F32, 4), 4);
    assert_int_equal(vb_cb_count(VB_CB_REDUCE_SCATTER, 100, VB_DTYPE_BF16, 3), 48);
    assert_int_equal(vb_cb_count(VB_CB_ALLREDUCE, 100, VB_DTYPE_F16, 3), 50); /* one buffer: no share to round */
    assert_int_equal(vb_cb_in_count(VB_CB_ALLGATHER, 48, 3), 16);
    assert_int_equal(vb_cb_out_count(VB_CB_ALLGATHER, 48, 3), 48);
    assert_int_equal(vb_cb_in_count(VB_CB_REDUCE_SCATTER, 48, 3), 48);
    assert_int_equal(vb_cb_out_count(VB_CB_REDUCE_SCATTER, 48, 3), 16);
    assert_int_equal(vb_cb_out_count(VB_CB_ALLREDUCE, 48, 3), 48);
    assert_int_equal(vb_cb_coll_parse("reduce_scatter"), VB_CB_REDUCE_SCATTER);
    assert_int_equal(vb_cb_coll_parse("alltoall"), -1);
    assert_string_equal(vb_cb_coll_name(VB_CB_BROADCAST), "broadcast");
}

static void test_busbw_factors(void **state) {
    (void)state;
    assert_true(fabs(vb_cb_busbw_factor(VB_CB_ALLREDUCE, 4) - 1.5) < 1e-15);
    assert_true(fabs(vb_cb_busbw_factor(VB_CB_ALLREDUCE, 2) - 1.0) < 1e-15);
    assert_true(fabs(vb_cb_busbw_factor(VB_CB_ALLGATHER, 4) - 0.75) < 1e-15);
    assert_true(fabs(vb_cb_busbw_factor(VB_CB_REDUCE_SCATTER, 8) - 0.875) < 1e-15);
    assert_true(fabs(vb_cb_busbw_factor(VB_CB_BROADCAST, 8) - 1.0) < 1e-15);
    assert_true(vb_cb_busbw_factor(VB_CB_ALLREDUCE, 1) == 0.0);
}

/* Every collective, dtype and group size: exact results count 0 wrong
 * (and the sums stayed exact: encode() refuses a value that needs rounding). */
static void test_correct_results_count_zero(void **state) {
    (void)state;
    for (int c = 0; c < VB_CB_NCOLL; c++)
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
            for (size_t k = 0; k < sizeof group_sizes / sizeof group_sizes[0]; k++) {
                int n = group_sizes[k];
                sim s;
                sim_make(&s, (vb_cb_coll)c, dtypes[d], n, (size_t)n * 5);
                sim_run(&s, n);
                for (int r = 0; r < n; r++) {
                    if (wrong_on(&s, r) != 0)
                        fail_msg("%s %s n=%d rank %d: %lld wrong in a correct result", vb_cb_coll_name(s.c),
                                 vb_dtype_name(s.t), n, r, wrong_on(&s, r));
                }
                sim_free(&s);
            }
}

/* One element one off on one rank is one wrong element there. */
static void test_one_element_off_is_counted(void **state) {
    (void)state;
    for (int c = 0; c < VB_CB_NCOLL; c++)
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
            int n = 4;
            sim s;
            sim_make(&s, (vb_cb_coll)c, dtypes[d], n, 64);
            sim_run(&s, n);
            size_t i = 3;
            encode(s.t, s.out[2], i, decode(s.t, s.out[2], i) + 1.0);
            assert_int_equal(wrong_on(&s, 2), 1);
            assert_int_equal(wrong_on(&s, 1), 0);
            sim_free(&s);
        }
}

/* A reduction without the last rank's contribution is wrong, also where the
 * values degenerate to one-hot (bfloat16 on 300 ranks). */
static void test_missing_contribution_is_counted(void **state) {
    (void)state;
    const vb_cb_coll reds[] = {VB_CB_ALLREDUCE, VB_CB_REDUCE_SCATTER};
    for (size_t c = 0; c < 2; c++)
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
            for (size_t k = 0; k < sizeof group_sizes / sizeof group_sizes[0]; k++) {
                int n = group_sizes[k];
                sim s;
                sim_make(&s, reds[c], dtypes[d], n, (size_t)n * 8);
                sim_run(&s, n - 1);
                long long wrong = 0;
                for (int r = 0; r < n; r++) wrong += wrong_on(&s, r);
                if (wrong == 0)
                    fail_msg("%s %s n=%d: a missing rank went unnoticed", vb_cb_coll_name(s.c), vb_dtype_name(s.t),
                             n);
                sim_free(&s);
            }
}

/* An allreduce that scaled this rank's own input by n instead of summing
 * the others' (values that do not depend on the rank would pass it). */
static void test_values_depend_on_the_rank(void **state) {
    (void)state;
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        int n = 4;
        sim s;
        sim_make(&s, VB_CB_ALLREDUCE, dtypes[d], n, 64);
        for (size_t j = 0; j < s.count; j++) encode(s.t, s.out[1], j, n * decode(s.t, s.in[1], j));
        assert_true(wrong_on(&s, 1) > 0);
        sim_free(&s);
    }
}

/* Allgather blocks swapped, reduce-scatter blocks handed to the wrong rank,
 * a broadcast that never left the root. */
static void test_misplaced_blocks_are_counted(void **state) {
    (void)state;
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        int n = 4;
        size_t per = 16, es = vb_dtype_size(dtypes[d]);
        sim s;
        sim_make(&s, VB_CB_ALLGATHER, dtypes[d], n, per * (size_t)n);
        sim_run(&s, n);
        char tmp[64];
        memcpy(tmp, s.out[0], per * es);
        memcpy(s.out[0], (char *)s.out[0] + per * es, per * es);
        memcpy((char *)s.out[0] + per * es, tmp, per * es);
        assert_true(wrong_on(&s, 0) > 0);
        sim_free(&s);

        sim_make(&s, VB_CB_REDUCE_SCATTER, dtypes[d], n, per * (size_t)n);
        sim_run(&s, n);
        memcpy(tmp, s.out[0], per * es);
        memcpy(s.out[0], s.out[1], per * es);
        memcpy(s.out[1], tmp, per * es);
        assert_true(wrong_on(&s, 0) > 0);
        assert_true(wrong_on(&s, 1) > 0);
        sim_free(&s);

        sim_make(&s, VB_CB_BROADCAST, dtypes[d], n, 32);
        sim_run(&s, n);
        memcpy(s.out[3], s.in[3], 32 * es); /* rank 3 kept its own buffer */
        assert_int_equal(wrong_on(&s, 3), 32);
        assert_int_equal(wrong_on(&s, 0), 0);
        sim_free(&s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_follow_nccl_tests),
        cmocka_unit_test(test_busbw_factors),
        cmocka_unit_test(test_correct_results_count_zero),
        cmocka_unit_test(test_one_element_off_is_counted),
        cmocka_unit_test(test_missing_contribution_is_counted),
        cmocka_unit_test(test_values_depend_on_the_rank),
        cmocka_unit_test(test_misplaced_blocks_are_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
