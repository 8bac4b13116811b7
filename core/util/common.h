/* common.h: error reporting, checked library calls, aligned memory, clocks.
 *
 * Exit-status contract (README.md): bad input from the user (a file, a
 * config key, a flag, a rank layout) exits 2 after ONE line on stderr that
 * names the file/key/rank and what is wrong. Internal failures exit 1.
 * Every HDF5 and MPI call goes through VB_H5 / VB_MPI so a failure reports the
 * call text, source file and line.
 */
#ifndef VB_COMMON_H
#define VB_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <sys/types.h>

#define VB_EXIT_INPUT 2
#define VB_EXIT_INTERNAL 1
#define VB_PATH_MAX 1024

/* One line "vitbench: error: <msg>" to stderr, then exit(2). */
void vb_die_input(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
#ifdef VB_FUZZING
/* Fuzz builds only (never the product): while a handler is set, vb_die_input
 * prints its line and calls it instead of exit(2), so a fuzz harness can
 * count a rejected input and go on (the handler must not return: longjmp). */
void vb_fuzz_set_input_error_handler(void (*handler)(void));
#endif
/* One line "vitbench: internal error: <msg>" to stderr, then exit(1). */
void vb_die_internal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Prints "vitbench: warning: <msg>" (rank 0 only once MPI is up). */
void vb_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Informational log line on rank 0 (stdout, flushed). */
void vb_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Text put before every error and warning message ("" clears it), e.g. the
 * sweep point being checked, so a line names what it is about. */
void vb_set_error_context(const char *ctx);

/* Rank used to prefix messages and to silence vb_log on ranks != 0.
 * Set by the communicator once MPI is initialised; 0 before that. */
void vb_set_log_rank(int rank);
int vb_log_rank(void);

/* For checks every rank makes identically (the command line, the config
 * file, the rank layout): while `sync` is set, an input error prints its line
 * on rank 0 only, then every rank calls sync() (a barrier, so rank 0's line is
 * out before mpirun tears the job down) and exits 2 -- mpirun -np 64 shows one
 * line, not 64. Checks that can differ between ranks (a file missing on one
 * node) run with sync NULL and print with a [rank N] prefix. */
void vb_set_input_errors_collective(void (*sync)(void));

/* HDF5: any negative return is a failure. Input-dependent HDF5 failures
 * (cannot open a file, missing dataset) should be pre-checked by the caller
 * so it can name the file; this macro is the backstop. */
#define VB_H5(call)                                                                      \
    ({                                                                                   \
        __typeof__(call) vb_h5_rc_ = (call);                                             \
        if (vb_h5_rc_ < 0) vb_die_input("HDF5 call %s failed at %s:%d", #call, __FILE__, __LINE__); \
        vb_h5_rc_;                                                                       \
    })

/* MPI: anything but MPI_SUCCESS is a failure (errors are set to return). */
#define VB_MPI(call)                                                                     \
    do {                                                                                 \
        int vb_mpi_rc_ = (call);                                                         \
        if (vb_mpi_rc_ != 0) vb_die_internal("MPI call %s failed (code %d) at %s:%d",   \
                                             #call, vb_mpi_rc_, __FILE__, __LINE__);     \
    } while (0)

/* 64-byte aligned allocation; dies (exit 1) on failure. Zero-filled. */
void *vb_malloc(size_t bytes);
void vb_free(void *p);

/* Checked allocation: the C library's malloc, calloc, realloc and strdup
 * (freed with free), except that out of memory is not returned: it prints
 * one line "vitbench: internal error: out of memory allocating N bytes at
 * file.c:LINE", naming the caller's line, and exits 1 (memory is the
 * machine's limit, not bad input). calloc zero-fills as calloc does, and its
 * n * size is checked for overflow (an overflow is out of memory). A request
 * for 0 bytes is made as 1, and calloc's for 0 elements as 1 element, so the
 * result is never NULL. strdup copies NULL as "" (an absent string reads as
 * empty). */
#define vb_malloc_check(bytes) vb_malloc_check_at((bytes), __FILE__, __LINE__)
#define vb_calloc_check(n, size) vb_calloc_check_at((n), (size), __FILE__, __LINE__)
#define vb_realloc_check(p, bytes) vb_realloc_check_at((p), (bytes), __FILE__, __LINE__)
#define vb_strdup_check(s) vb_strdup_check_at((s), __FILE__, __LINE__)
void *vb_malloc_check_at(size_t bytes, const char *file, int line);
void *vb_calloc_check_at(size_t n, size_t size, const char *file, int line);
void *vb_realloc_check_at(void *p, size_t bytes, const char *file, int line);
char *vb_strdup_check_at(const char *s, const char *file, int line);

/* Monotonic wall clock in seconds. */
double vb_now(void);
/* Wall clock as ISO-8601 UTC string, e.g. 2026-11-21T23:52:51Z. */
void vb_iso_time(char *buf, size_t n);

/* Routes SIGINT, SIGTERM and SIGHUP to `handler` (runs and sweeps record
 * what they finished and mark themselves interrupted). */
void vb_on_stop_signals(void (*handler)(int));

/* Formats a one-line reason into err (n bytes) for functions that report
 * failures to their caller instead of exiting; err may be NULL. */
void vb_errf(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* snprintf that dies (internal) on truncation. */
void vb_snprintf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Length of the valid UTF-8 sequence at s (1 to 4 bytes), or 0 where s
 * does not start one: a stray continuation byte, an overlong form, a
 * surrogate, a code point beyond U+10FFFF, a sequence cut short. */
int vb_utf8_len(const unsigned char *s);
/* -1 when s is valid UTF-8 throughout, else the offset of the first byte
 * that does not start a valid sequence. */
long vb_utf8_invalid_at(const char *s);
/* The byte offset in s (valid UTF-8) of the first character that changes
 * how the text around it is shown without being seen itself: C1 controls
 * (U+0080-U+009F) and the bidirectional controls (U+061C, U+200E, U+200F,
 * U+202A-U+202E, U+2066-U+2069), which make "abc<U+202E>txt.exe" read as
 * "abcexe.txt"; its code point in *cp. -1 when there is none. */
long vb_utf8_hidden_at(const char *s, unsigned *cp);

/* File helpers. */
/* The whole file as a NUL-terminated malloc'd string (caller frees), its
 * length in *len when len is not NULL; NULL with errno set when it cannot be
 * read. */
char *vb_read_file(const char *path, size_t *len);

/* argv[0..argc-1] joined with spaces, every argument holding anything but
 * letters, digits and -_./=,:+@% single-quoted (' as '\''), so the line can
 * be pasted back into a shell and run.json's and commbench's command lines
 * read alike. malloc'd; exits 1 when out of memory. */
char *vb_shell_join(int argc, char **argv);
/* Probes: true when path is a regular file / a directory (symlinks
 * followed); for optional files. To refuse a path the user gave, use
 * vb_file_problem / vb_dir_problem: they say what the path is instead. */
bool vb_file_exists(const char *path);
bool vb_dir_exists(const char *path);
/* NULL when path is a regular file this process can open for reading
 * (symlinks to one are fine); otherwise what it is, as a phrase that reads
 * after "<path>: " -- "no such file", "a directory, not a regular file", "a
 * FIFO (named pipe), not a regular file", "a dangling symlink (...)", "a
 * symlink loop", "a symlink to a character device, not a regular file",
 * "not readable (Permission denied)" -- written into buf (n bytes), which is
 * returned. Only stat and lstat look at something that is not a regular
 * file: opening a FIFO for reading blocks until a writer comes, and opening
 * a device can act on it. */
const char *vb_file_problem(const char *path, char *buf, size_t n);
/* The checked fopen for reading: path opened "rb" when vb_file_problem finds
 * a regular file (so a FIFO never blocks the open), else NULL with what it
 * is, or the open's strerror, in why (n bytes), and errno set (ENOENT when
 * it does not exist, EINVAL when it is there but not a regular file). */
FILE *vb_fopen_regular(const char *path, char *why, size_t n);
/* vb_fopen_regular for a file that cannot be done without: exits 2 with
 * "<label>: cannot open: <why>" (label NULL: the path). */
FILE *vb_fopen_input(const char *path, const char *label);
/* The same for a directory: NULL when path is one (or a symlink to one),
 * else "no such directory", "a regular file, not a directory", ... */
const char *vb_dir_problem(const char *path, char *buf, size_t n);
/* What a file of mode m is, as a phrase: "a regular file", "a directory",
 * "a symbolic link" (from lstat), "a FIFO (named pipe)" ... */
const char *vb_file_type_name(mode_t m);
/* mkdir -p; returns 0 on success, -1 with errno set. */
int vb_mkdir_p(const char *path);

/* splitmix64-based deterministic RNG used for init, shuffles and datagen. */
typedef struct { uint64_t s; } vb_rng;
void vb_rng_seed(vb_rng *r, uint64_t seed);
uint64_t vb_rng_u64(vb_rng *r);
double vb_rng_uniform(vb_rng *r);           /* [0, 1) */
double vb_rng_normal(vb_rng *r);            /* N(0, 1), Box-Muller */
/* truncated normal on [a, b] (absolute bounds), as torch.nn.init.trunc_normal_ */
double vb_rng_trunc_normal(vb_rng *r, double mean, double std, double a, double b);

#endif
