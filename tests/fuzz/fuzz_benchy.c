/* fuzz_benchy: benchy's YAML (sections global, IO, synthetic, full) through
 * vb_benchy_resolve with an explicit path, which calls vb_benchy_load. */
#include "core/config/config.h"
#include "tests/fuzz/fuzz_util.h"

static void load(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    vb_benchy_config b;
    vb_benchy_resolve(&b, path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vb_fuzz_run(data, size, ".yaml", load);
    return 0;
}
