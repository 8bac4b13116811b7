/* fuzz_machine: the scaling model's machine files (vb_machine_load), and for
 * accepted ones the placement of a few layouts on them and the price of an
 * allreduce there (what `vitbench model --machine` does with a file). */
#include "analysis/scaling/machine.h"
#include "analysis/scaling/scaling_comm.h"
#include "tests/fuzz/fuzz_util.h"

static void load(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    vb_machine m;
    vb_machine_load(path, &m);
    const int worlds[] = {1, 2, 8, 24};
    for (size_t i = 0; i < sizeof worlds / sizeof *worlds; i++) {
        vb_layout l;
        char err[512];
        if (vb_layout_init(&l, worlds[i], worlds[i] % 2 == 0 ? 2 : 1, 1, NULL, err, sizeof err) != 0) continue;
        vb_mplace p;
        const int rpn = m.ranks_per_node < worlds[i] ? m.ranks_per_node : worlds[i];
        if (vb_mplace_group(&m, &l, rpn, VB_GROUP_CP_DP, &p, err, sizeof err) != 0) continue;
        for (int lv = 0; lv < m.nlevels; lv++)
            (void)vb_mlevel_seconds(&m, lv, VB_COLL_ALLREDUCE, 4, 1 << 20, rpn, 0.75);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vb_fuzz_run(data, size, ".yaml", load);
    return 0;
}
