/* fuzz_util.h: shared libFuzzer harness plumbing for vitbench's input parsers.
 *
 * The parsers exit(2) through vb_die_input on bad input, which is their
 * contract, not a crash. Fuzz builds compile core/util/common.c with VB_FUZZING,
 * where vb_die_input calls a handler instead of exiting; vb_fuzz_run's handler
 * longjmps back here and the input counts as rejected.
 *
 * A longjmp skips the parser's cleanup (it expected the process to end), so
 * whatever the input allocated and the files it opened would pile up and be
 * reported as leaks. While an input runs, every heap block (sanitizer malloc
 * hooks) and every FILE from fopen (-Wl,--wrap=fopen,--wrap=fclose) is
 * tracked; after a rejection the files are closed and the blocks freed.
 * Leaks on the accepted path are still the sanitizer's to report.
 */
#ifndef VB_FUZZ_UTIL_H
#define VB_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Parses the file at `path` (holding the fuzz input); may call vb_die_input. */
typedef void (*vb_fuzz_fn)(const char *path, const uint8_t *data, size_t size);

/* Writes data to this process's input file (named with `suffix`, e.g.
 * ".yaml"), runs fn on it. Returns 0 when fn returned, 1 when it rejected the
 * input via vb_die_input. */
int vb_fuzz_run(const uint8_t *data, size_t size, const char *suffix, vb_fuzz_fn fn);

/* A per-process scratch directory (created on first use, removed at exit). */
const char *vb_fuzz_dir(void);

#endif
