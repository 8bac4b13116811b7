/* fuzz_nsys: `vitbench nsys FILE --output_dir DIR` on one report. An input
 * whose first line is "#window START/END" also passes --filter_time with that
 * text (the rest of the input is the CSV), so the window parser is fuzzed too. */
#include <stdio.h>
#include <string.h>

#include "analysis/analysis.h"
#include "tests/fuzz/fuzz_util.h"

static char g_window[256];

static void import(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    char out[128];
    snprintf(out, sizeof out, "%s/out", vb_fuzz_dir());
    char *argv[] = {"nsys", (char *)path, "--output_dir", out, "--filter_time", g_window, NULL};
    vb_nsys_main(g_window[0] ? 6 : 4, argv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g_window[0] = '\0';
    static const char tag[] = "#window ";
    if (size > sizeof tag - 1 && !memcmp(data, tag, sizeof tag - 1)) {
        const uint8_t *nl = memchr(data, '\n', size);
        size_t end = nl ? (size_t)(nl - data) : size;
        size_t n = end - (sizeof tag - 1);
        if (n == 0 || n >= sizeof g_window || memchr(data + sizeof tag - 1, '\0', n)) return 0;
        memcpy(g_window, data + sizeof tag - 1, n);
        g_window[n] = '\0';
        data += nl ? end + 1 : end;
        size -= nl ? end + 1 : end;
    }
    vb_fuzz_run(data, size, ".csv", import);
    return 0;
}
