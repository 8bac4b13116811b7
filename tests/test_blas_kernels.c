/* test_blas_kernels.c: the rule that picks OpenBLAS's kernels
 * (core/prof/blas_kernels.h), as a function of the library's choice, the
 * CPU's features and the environment, on any machine: the CPU kinds the
 * project meets, and the one OpenBLAS 0.3.21 does not know (an Emerald
 * Rapids Xeon, family 6 model 207, AVX-512, reported as Prescott). */
#include "tests/test_util.h"

#include <string.h>

#include "core/prof/blas_kernels.h"

static const vb_cpu_features AVX512 = {true, true, true, true, true, true, true, true};
static const vb_cpu_features AVX2 = {true, true, true, false, false, false, false, false};
static const vb_cpu_features AVX_ONLY = {true, false, false, false, false, false, false, false};
/* AVX-512 F and CD without BW/DQ/VL (Knights Landing): not SkylakeX's kernels */
static const vb_cpu_features KNL = {true, true, true, true, true, false, false, false};

static void assert_want(const char *lib, const vb_cpu_features *f, const char *want) {
    const char *got = vb_blas_core_wanted(lib, f);
    if (!want) {
        assert_null(got);
    } else {
        assert_non_null(got);
        assert_string_equal(got, want);
    }
}

static void test_widest_kernels(void **state) {
    (void)state;
    assert_string_equal(vb_cpu_features_vector(&AVX512), "avx512");
    assert_string_equal(vb_cpu_features_vector(&KNL), "avx2");
    /* the Emerald Rapids Xeon under OpenBLAS 0.3.21 */
    assert_want("Prescott", &AVX512, "SkylakeX");
    assert_want("Haswell", &AVX512, "SkylakeX");
    assert_want("Sandybridge", &AVX2, "Haswell");
    assert_want("Prescott", &AVX_ONLY, "Sandybridge");
    assert_want("Prescott", &KNL, "Haswell");
    /* as wide as the CPU: the library's choice stays (Zen 5's Cooperlake, Zen 1-3's Zen) */
    assert_want("SkylakeX", &AVX512, NULL);
    assert_want("CooperLake", &AVX512, NULL);
    assert_want("Zen", &AVX2, NULL);
    assert_want("Haswell", &AVX2, NULL);
    /* a core type the table does not know (another architecture, a newer library) */
    assert_want("NEOVERSEN1", &AVX512, NULL);
    assert_want("", &AVX512, NULL);
}

static void test_decisions(void **state) {
    (void)state;
    /* unset, the library too narrow: start again with the widest */
    vb_blas_decision d = vb_blas_decide(NULL, NULL, "Prescott", &AVX512);
    assert_int_equal(d.rule, VB_BLAS_RULE_LIBRARY);
    assert_non_null(d.reexec_core);
    assert_string_equal(d.reexec_core, "SkylakeX");
    assert_string_equal(d.library_core, "Prescott");
    /* after that start: the rule is vitbench's, nothing more to do */
    d = vb_blas_decide("SkylakeX", "Prescott", "SkylakeX", &AVX512);
    assert_int_equal(d.rule, VB_BLAS_RULE_VITBENCH);
    assert_null(d.reexec_core);
    assert_string_equal(d.library_core, "Prescott");
    /* set by the caller or the machine (Zen 5's OPENBLAS_CORETYPE=Haswell): kept */
    d = vb_blas_decide("Haswell", NULL, "Haswell", &AVX512);
    assert_int_equal(d.rule, VB_BLAS_RULE_ENVIRONMENT);
    assert_null(d.reexec_core);
    d = vb_blas_decide("Prescott", "", "Prescott", &AVX512);
    assert_int_equal(d.rule, VB_BLAS_RULE_ENVIRONMENT);
    /* an empty OPENBLAS_CORETYPE is no setting */
    d = vb_blas_decide("", NULL, "SkylakeX", &AVX512);
    assert_int_equal(d.rule, VB_BLAS_RULE_LIBRARY);
    assert_null(d.reexec_core);
    assert_string_equal(vb_blas_rule_name(VB_BLAS_RULE_ENVIRONMENT), "environment");
}

static void test_advice(void **state) {
    (void)state;
    char buf[512];
    vb_blas_advice(buf, sizeof buf, "Haswell", "avx512", "environment", "");
    assert_non_null(strstr(buf, "OPENBLAS_CORETYPE=Haswell was set before vitbench started"));
    assert_non_null(strstr(buf, "unset it and vitbench picks SkylakeX"));
    vb_blas_advice(buf, sizeof buf, "Prescott", "avx512", "library", "Prescott");
    assert_non_null(strstr(buf, "could not start again with OPENBLAS_CORETYPE=SkylakeX"));
    /* a run recorded before the rule existed */
    vb_blas_advice(buf, sizeof buf, "Prescott", "avx512", "", "");
    assert_non_null(strstr(buf, "now picks SkylakeX"));
    /* nothing to say when the kernels are the CPU's own, or unknown */
    vb_blas_advice(buf, sizeof buf, "SkylakeX", "avx512", "vitbench", "Prescott");
    assert_string_equal(buf, "");
    vb_blas_advice(buf, sizeof buf, "NEOVERSEN1", "avx512", "library", "NEOVERSEN1");
    assert_string_equal(buf, "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_widest_kernels),
        cmocka_unit_test(test_decisions),
        cmocka_unit_test(test_advice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
