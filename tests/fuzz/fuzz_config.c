/* fuzz_config: the training-config YAML loader (vb_config_load_yaml + the
 * cross-key checks) on arbitrary bytes, config name "base". */
#include "core/config/config.h"
#include "tests/fuzz/fuzz_util.h"

static void load(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    vb_config c;
    vb_config_defaults(&c);
    vb_config_load_yaml(&c, path, "base");
    vb_config_validate(&c, path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vb_fuzz_run(data, size, ".yaml", load);
    return 0;
}
