/* fuzz_csv: the CSV reader, from memory (vb_csv_parse) and from a file
 * (vb_csv_read), plus the cell accessors on every cell of an accepted table.
 * It reports errors by return value, so nothing here should be rejected via
 * vb_die_input. */
#include <stdlib.h>

#include "analysis/csv.h"
#include "tests/fuzz/fuzz_util.h"

static void walk(const vb_csv *t) {
    for (int c = 0; c < t->ncols; c++) (void)vb_csv_col(t, t->header[c]);
    for (int r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols; c++) {
            double v;
            (void)vb_csv_get(t, r, c);
            (void)vb_csv_num(t, r, c, &v);
        }
}

static void load(const char *path, const uint8_t *data, size_t size) {
    char err[256];
    vb_csv t;
    if (vb_csv_parse((const char *)data, size, &t, err, sizeof err) == 0) {
        walk(&t);
        vb_csv_free(&t);
    }
    if (vb_csv_read(path, &t, err, sizeof err) == 0) vb_csv_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (vb_fuzz_run(data, size, ".csv", load)) abort(); /* must not exit(2) */
    return 0;
}
