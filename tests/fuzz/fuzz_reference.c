/* fuzz_reference: the scaling model's compute references from a step time
 * and op shares (vb_mref_load_file), and for accepted ones a rescaling to
 * twice the width (what `vitbench model --reference` and --published do). */
#include <stdlib.h>

#include "analysis/scaling/scaling_ref.h"
#include "tests/fuzz/fuzz_util.h"

static void load(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    vb_mref r;
    vb_mref_src src;
    vb_mref_load_file(path, &r, &src);
    vb_mdims wide = r.d;
    wide.dim *= 2;
    vb_mref w;
    vb_mref_rescale(&r, &wide, &w);
    free(w.ops);
    free(r.ops);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vb_fuzz_run(data, size, ".yaml", load);
    return 0;
}
