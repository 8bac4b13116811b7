/* test_util.h: helpers shared by the cmocka tests. */
#ifndef VB_TEST_UTIL_H
#define VB_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

/* Source and build directories (from ctest's environment, else cwd-based guesses). */
const char *tu_source_dir(void);
const char *tu_binary_dir(void);
/* Path of the vitbench binary in the build dir. */
const char *tu_vitbench(void);
/* Fresh empty temporary directory under /tmp (mkdtemp); removed by tu_rm_rf. */
void tu_tmpdir(char *out, size_t n, const char *tag);
void tu_rm_rf(const char *path);
/* Runs a shell command, capturing stdout+stderr into out (may be NULL);
 * returns the exit status (or 128+signal). */
int tu_run(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Reads a whole file (caller frees); NULL if missing. */
char *tu_read_file(const char *path);
/* Counts lines of a text file (-1 if missing). */
int tu_count_lines(const char *path);
/* Fills x[n] with uniform values in [lo, hi) from a seeded RNG. */
void tu_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed);
/* max |a-b| / max(|b|, floor) */
double tu_max_rel_err(const float *a, const float *b, size_t n, double floor);

#endif
