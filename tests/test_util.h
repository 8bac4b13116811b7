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

/* ---- backend memory: tests read and write it through copies ---- */

struct vb_ctx;
/* The CPU backend's float32 context of this test process (made on first use). */
struct vb_ctx *tu_ctx(void);
/* Copies between host and backend memory of ctx and waits for them. */
void tu_h2d(struct vb_ctx *ctx, void *dev, const void *host, size_t bytes);
void tu_d2h(struct vb_ctx *ctx, void *host, const void *dev, size_t bytes);
/* A backend copy of n host floats (free it with ctx->ops->free). */
float *tu_upload(struct vb_ctx *ctx, const float *host, size_t n);
/* A host copy of n backend floats (free it with vb_free). */
float *tu_download(struct vb_ctx *ctx, const float *dev, size_t n);
/* memcmp of two backend buffers, through host copies */
int tu_dev_cmp(struct vb_ctx *ctx, const void *a, const void *b, size_t bytes);

/* ---- models ---- */

struct vit_model;
struct vit_tensor;
/* A model's parameters, gradients, prediction of the last forward (B
 * samples: tu_pred_numel floats) and loss, copied out; tu_set_params copies
 * parameters in and refreshes the activation-dtype copy the forward reads. */
void tu_get_params(const struct vit_model *m, float *host);
void tu_set_params(struct vit_model *m, const float *host);
void tu_get_grads(const struct vit_model *m, float *host);
size_t tu_pred_numel(const struct vit_model *m, int B);
void tu_get_pred(const struct vit_model *m, float *host, int B);
float tu_get_loss(const struct vit_model *m);
/* Weights well away from the init (which makes the output ~0 and the deep
 * gradients tiny): every path, including LayerNorm affine and biases, then
 * carries a gradient that finite differences and cross-rank comparisons can
 * resolve. Drawn per tensor of m, in table order. */
void tu_randomize_params(struct vit_model *m, uint64_t seed);
/* fields[t, c, y, x] = v in an existing year file (HDF5 dataset "fields") */
void tu_h5_poke_field(const char *file, int t, int c, int y, int x, float v);
/* element `at` (row-major, any rank) of a float dataset = v */
void tu_h5_poke_at(const char *file, const char *dataset, size_t at, float v);
/* The slice of a full tensor that local tensor t should hold, computed from
 * multi-indices (independently of vit.c's block copies): local index ->
 * local coordinates -> + shard_offset on shard_dim -> full flat index. */
void tu_expected_shard(const struct vit_tensor *t, const float *full, float *out);

/* ---- code that must exit ---- */

typedef void (*tu_child_fn)(void *ctx);
/* Runs fn(ctx) in a forked child with stdout on /dev/null and stderr captured
 * (fn may dup2(2, 1) to capture stdout too); the child exits 0 if fn returns
 * and is killed after timeout_s seconds (0: no limit). Returns the exit status
 * (128+signal if killed); *err gets the captured text (caller frees). */
int tu_run_child(tu_child_fn fn, void *ctx, unsigned timeout_s, char **err);
/* Runs fn(ctx) in a child (30 s limit) and asserts it exits want_status. A
 * nonzero status also needs exactly one stderr line, starting "vitbench:
 * error: " for 2 (vb_die_input) and "vitbench: internal error: " for 1
 * (vb_die_internal). The line must contain needle (if non-NULL) / every entry
 * of the NULL-terminated needles. Failures print the child's stderr. */
void tu_expect_exit(int want_status, const char *needle, tu_child_fn fn, void *ctx);
void tu_expect_exit_all(int want_status, const char *const *needles, tu_child_fn fn, void *ctx);

/* Fails the test unless |got - want| <= tol |want| (tol 0: equal). */
void tu_assert_rel(double got, double want, double tol);
/* Writes text to dir/name, replacing it; returns the path (a static buffer,
 * overwritten by the next call). */
const char *tu_write_tmp(const char *dir, const char *name, const char *text);

#endif
