/* fuzz_scenario: sweep scenario files (vb_scenario_load), and for accepted
 * ones the expansion into runs with no overrides. */
#include <string.h>

#include "bench/sweep/sweep.h"
#include "tests/fuzz/fuzz_util.h"

static void load(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    vb_scenario s;
    vb_scenario_load(&s, path);
    vb_scenario_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vb_fuzz_run(data, size, ".yaml", load);
    return 0;
}
