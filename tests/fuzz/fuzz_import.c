/* fuzz_import: vitbench import's readers (analysis/import.h) on one file:
 * benchy's JSON, a job log and a profiler trace, each reader on every input
 * (a file of one format is bad input to the others), then a log and a JSON
 * merged into one run as a job's files are. The readers report bad input
 * by returning -1 with a line, never by exiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/import.h"
#include "tests/fuzz/fuzz_util.h"

static void read_all(const char *path, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    char why[VB_IMP_WHY];
    vb_imp_file json, log, trace;
    memset(&json, 0, sizeof json);
    memset(&log, 0, sizeof log);
    memset(&trace, 0, sizeof trace);
    const int rj = vb_imp_read_benchy_json(path, &json, why);
    const int rl = vb_imp_read_log(path, &log, why);
    (void)vb_imp_read_trace(path, &trace, why);
    if (rj == 0 || rl == 0) {
        vb_imp_run r;
        memset(&r, 0, sizeof r);
        r.json = rj == 0 ? &json : NULL;
        r.log = rl == 0 ? &log : NULL;
        r.warmup_epochs = 1;
        (void)vb_imp_merge(&r, why);
        for (int t = 0; t < r.ntrials; t++) free(r.trials[t].iters);
        free(r.trials);
        free(r.epochs);
        vb_imp_list_free(&r.notes);
        vb_imp_list_free(&r.unknown);
    }
    vb_imp_file_free(&json);
    vb_imp_file_free(&log);
    vb_imp_file_free(&trace);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vb_fuzz_run(data, size, ".json", read_all);
    return 0;
}
