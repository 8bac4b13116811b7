/* fuzz_npy: the .npy stats reader (vb_npy_load_stats) with C = 4 channels,
 * the shape of the seed files; other shapes are rejections. */
#include "core/data/data.h"
#include "tests/fuzz/fuzz_util.h"

static void load(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    float out[4];
    vb_npy_load_stats(path, 4, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vb_fuzz_run(data, size, ".npy", load);
    return 0;
}
