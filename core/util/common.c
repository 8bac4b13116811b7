#include "core/util/common.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int g_log_rank = 0;
static void (*g_collective_sync)(void) = NULL;

static char g_error_context[256] = "";

void vb_set_log_rank(int rank) { g_log_rank = rank; }
void vb_set_error_context(const char *ctx) { snprintf(g_error_context, sizeof g_error_context, "%s", ctx ? ctx : ""); }
void vb_set_input_errors_collective(void (*sync)(void)) { g_collective_sync = sync; }
int vb_log_rank(void) { return g_log_rank; }

static void vb_vprint(FILE *f, const char *prefix, const char *fmt, va_list ap) {
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* keep it one line: a message must never smuggle newlines into the log */
    for (char *c = msg; *c; c++)
        if (*c == '\n') *c = ' ';
    const char *ctx = g_error_context, *sep = g_error_context[0] ? ": " : "";
    if (g_log_rank > 0)
        fprintf(f, "vitbench: [rank %d] %s%s%s%s\n", g_log_rank, prefix, ctx, sep, msg);
    else
        fprintf(f, "vitbench: %s%s%s%s\n", prefix, ctx, sep, msg);
    fflush(f);
}

/* Sanitizer builds only (scripts/sanitize.sh): a process that ends through
 * vb_die_input / vb_die_internal abandons its state on purpose, so the
 * exit-time leak check (LeakSanitizer asks __lsan_is_turned_off) is skipped
 * for it; every other exit is still checked. */
#if defined(__SANITIZE_ADDRESS__)
#define VB_LSAN_HOOK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VB_LSAN_HOOK 1
#endif
#endif
#ifdef VB_LSAN_HOOK
static volatile int g_dying_on_error = 0;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return g_dying_on_error; }
#define VB_DYING_ON_ERROR() (g_dying_on_error = 1)
#else
#define VB_DYING_ON_ERROR() ((void)0)
#endif

#ifdef VB_FUZZING
static void (*g_fuzz_input_error)(void) = NULL;
void vb_fuzz_set_input_error_handler(void (*handler)(void)) { g_fuzz_input_error = handler; }
#endif

/* One error line per process: when threads fail at once (two loader
 * workers reading bad samples), the first to get here prints its line and
 * exits; the others wait for that exit instead of printing lines of their
 * own. The thread that is already dying may come back (an error inside the
 * collective sync, the fuzzer's handler), so it passes. */
static atomic_flag g_dying = ATOMIC_FLAG_INIT;
static _Thread_local bool t_dying = false;

static void die_once(void) {
    if (atomic_flag_test_and_set(&g_dying) && !t_dying)
        for (;;) pause(); /* the first thread's exit ends this one */
    t_dying = true;
}

void vb_die_input(const char *fmt, ...) {
    die_once();
    fflush(stdout);
    void (*sync)(void) = g_collective_sync;
    g_collective_sync = NULL; /* an error inside sync must not recurse */
    if (!sync || g_log_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        vb_vprint(stderr, "error: ", fmt, ap);
        va_end(ap);
    }
    if (sync) sync();
#ifdef VB_FUZZING
    if (g_fuzz_input_error) g_fuzz_input_error();
#endif
    VB_DYING_ON_ERROR();
    exit(VB_EXIT_INPUT);
}

void vb_errf(char *err, size_t n, const char *fmt, ...) {
    if (!err || !n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

void vb_die_internal(const char *fmt, ...) {
    die_once();
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    vb_vprint(stderr, "internal error: ", fmt, ap);
    va_end(ap);
    VB_DYING_ON_ERROR();
    exit(VB_EXIT_INTERNAL);
}

void vb_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vb_vprint(stderr, "warning: ", fmt, ap);
    va_end(ap);
}

void vb_log(const char *fmt, ...) {
    if (g_log_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

void *vb_malloc(size_t bytes) {
    if (bytes == 0) bytes = 64;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded);
    if (!p) vb_die_internal("out of memory allocating %zu bytes", bytes);
    memset(p, 0, rounded);
    return p;
}

void vb_free(void *p) { free(p); }

/* The caller's file without its directories: __FILE__ is the path the build
 * gave the compiler, often absolute. */
static const char *source_name(const char *file) {
    const char *slash = strrchr(file, '/');
    return slash ? slash + 1 : file;
}

static void die_out_of_memory(size_t bytes, const char *file, int line) __attribute__((noreturn));
static void die_out_of_memory(size_t bytes, const char *file, int line) {
    vb_die_internal("out of memory allocating %zu bytes at %s:%d", bytes, source_name(file), line);
}

void *vb_malloc_check_at(size_t bytes, const char *file, int line) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) die_out_of_memory(bytes, file, line);
    return p;
}

void *vb_calloc_check_at(size_t n, size_t size, const char *file, int line) {
    if (size && n > SIZE_MAX / size) vb_die_internal("out of memory allocating %zu x %zu bytes (more than the address space) at %s:%d",
                                                     n, size, source_name(file), line);
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) die_out_of_memory(n * size, file, line);
    return p;
}

void *vb_realloc_check_at(void *p, size_t bytes, const char *file, int line) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) die_out_of_memory(bytes, file, line);
    return q;
}

char *vb_strdup_check_at(const char *s, const char *file, int line) {
    if (!s) s = "";
    size_t bytes = strlen(s) + 1;
    char *d = malloc(bytes);
    if (!d) die_out_of_memory(bytes, file, line);
    memcpy(d, s, bytes);
    return d;
}

double vb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void vb_iso_time(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void vb_on_stop_signals(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

void vb_snprintf(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= n) vb_die_internal("string too long for buffer (%zu bytes): %.80s...", n, buf);
}

bool vb_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool vb_dir_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *vb_file_type_name(mode_t m) {
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "a special file";
}

/* What path is when it is not what the caller wants (want_dir: a directory,
 * else a readable regular file); NULL when it is. */
static const char *path_problem(const char *path, bool want_dir, char *buf, size_t n) {
    const char *want = want_dir ? "a directory" : "a regular file";
    struct stat st, lst;
    if (stat(path, &st) != 0) {
        int err = errno;
        /* stat follows links: a link whose target is missing looks missing
         * itself, and "no such file" next to a name ls shows would mislead */
        if (err == ENOENT && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
            char target[VB_PATH_MAX];
            ssize_t k = readlink(path, target, sizeof target - 1);
            if (k < 0) {
                snprintf(buf, n, "a dangling symlink (its target does not exist)");
            } else {
                target[k] = '\0';
                snprintf(buf, n, "a dangling symlink (its target %s does not exist)", target);
            }
        } else if (err == ENOENT || err == ENOTDIR) {
            snprintf(buf, n, "no such %s", want_dir ? "directory" : "file");
        } else if (err == ELOOP) {
            snprintf(buf, n, "a symlink loop (too many levels of symbolic links)");
        } else {
            snprintf(buf, n, "cannot be reached (%s)", strerror(err));
        }
        return buf;
    }
    bool link = lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode);
    if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
        snprintf(buf, n, "%s%s, not %s", link ? "a symlink to " : "", vb_file_type_name(st.st_mode), want);
        return buf;
    }
    if (want_dir) return NULL;
    /* a regular file: opening it has no side effects, and O_NONBLOCK keeps
     * this from hanging if a FIFO took its place since the stat */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(buf, n, "not readable (%s)", strerror(errno));
        return buf;
    }
    struct stat opened;
    bool replaced = fstat(fd, &opened) == 0 && !S_ISREG(opened.st_mode);
    close(fd);
    if (replaced) {
        snprintf(buf, n, "%s, not a regular file (it was replaced while being checked)", vb_file_type_name(opened.st_mode));
        return buf;
    }
    return NULL;
}

const char *vb_file_problem(const char *path, char *buf, size_t n) { return path_problem(path, false, buf, n); }

const char *vb_dir_problem(const char *path, char *buf, size_t n) { return path_problem(path, true, buf, n); }

FILE *vb_fopen_regular(const char *path, char *why, size_t n) {
    errno = 0;
    if (vb_file_problem(path, why, n)) {
        if (errno == 0) errno = EINVAL; /* there, but not a regular file */
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) snprintf(why, n, "%s", strerror(errno));
    return f;
}

FILE *vb_fopen_input(const char *path, const char *label) {
    char why[VB_PATH_MAX + 64];
    FILE *f = vb_fopen_regular(path, why, sizeof why);
    if (!f) vb_die_input("%s: cannot open: %s", label ? label : path, why);
    return f;
}

int vb_utf8_len(const unsigned char *s) {
    if (s[0] < 0x80) return 1;
    int n = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && s[0] < 0xC2) || (n == 4 && s[0] > 0xF4)) return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0; /* a NUL ends the loop here too */
    /* the second byte's range where the first allows too much: overlong
     * 3- and 4-byte forms, UTF-16 surrogates, beyond U+10FFFF */
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] > 0x9F) || (s[0] == 0xF0 && s[1] < 0x90) ||
        (s[0] == 0xF4 && s[1] > 0x8F))
        return 0;
    return n;
}

long vb_utf8_invalid_at(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = vb_utf8_len(p);
        if (n == 0) return (long)(p - (const unsigned char *)s);
        p += n;
    }
    return -1;
}

int vb_mkdir_p(const char *path) {
    char tmp[VB_PATH_MAX];
    if (strlen(path) >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(tmp, path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0775) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0775) != 0 && errno != EEXIST) return -1;
    return vb_dir_exists(tmp) ? 0 : -1;
}

void vb_rng_seed(vb_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull; }

uint64_t vb_rng_u64(vb_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double vb_rng_uniform(vb_rng *r) { return (double)(vb_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

double vb_rng_normal(vb_rng *r) {
    double u1 = vb_rng_uniform(r), u2 = vb_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double vb_rng_trunc_normal(vb_rng *r, double mean, double std, double a, double b) {
    /* rejection sampling: with a=-2, b=2 and std=0.02 nearly nothing is rejected */
    for (int i = 0; i < 1000; i++) {
        double x = mean + std * vb_rng_normal(r);
        if (x >= a && x <= b) return x;
    }
    return mean;
}

char *vb_read_file(const char *path, size_t *len) {
    char why[VB_PATH_MAX + 64];
    FILE *f = vb_fopen_regular(path, why, sizeof why);
    if (!f) return NULL;
    char *text = NULL;
    size_t n = 0;
    FILE *mem = open_memstream(&text, &n);
    if (!mem) {
        fclose(f);
        errno = ENOMEM;
        return NULL;
    }
    char buf[8192];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, mem);
    int err = ferror(f) ? EIO : 0;
    fclose(f);
    if (fclose(mem) != 0 || err) {
        free(text);
        errno = err ? err : ENOMEM;
        return NULL;
    }
    if (len) *len = n;
    return text;
}

char *vb_shell_join(int argc, char **argv) {
    size_t len = 1;
    for (int i = 0; i < argc; i++) len += 4 * strlen(argv[i]) + 3;
    char *s = vb_malloc_check(len);
    size_t k = 0;
    for (int i = 0; i < argc; i++) {
        if (i) s[k++] = ' ';
        const char *a = argv[i];
        bool plain = *a != '\0';
        for (const char *c = a; *c; c++)
            if (!(isalnum((unsigned char)*c) || strchr("-_./=,:+@%", *c))) plain = false;
        if (plain) {
            memcpy(s + k, a, strlen(a));
            k += strlen(a);
            continue;
        }
        s[k++] = '\'';
        for (const char *c = a; *c; c++) {
            if (*c == '\'') {
                memcpy(s + k, "'\\''", 4);
                k += 4;
            } else {
                s[k++] = *c;
            }
        }
        s[k++] = '\'';
    }
    s[k] = '\0';
    return s;
}

long vb_utf8_hidden_at(const char *s, unsigned *cp) {
    const unsigned char *u = (const unsigned char *)s;
    for (long i = 0; u[i];) {
        int n = vb_utf8_len(u + i);
        if (n <= 0) return -1; /* not UTF-8: vb_utf8_invalid_at's to name */
        unsigned c = n == 1 ? u[i] : n == 2 ? (u[i] & 0x1Fu) << 6 | (u[i + 1] & 0x3Fu)
                               : n == 3 ? (u[i] & 0x0Fu) << 12 | (u[i + 1] & 0x3Fu) << 6 | (u[i + 2] & 0x3Fu)
                                        : (u[i] & 0x07u) << 18 | (u[i + 1] & 0x3Fu) << 12 | (u[i + 2] & 0x3Fu) << 6 |
                                              (u[i + 3] & 0x3Fu);
        if ((c >= 0x80 && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F || (c >= 0x202A && c <= 0x202E) ||
            (c >= 0x2066 && c <= 0x2069)) {
            *cp = c;
            return i;
        }
        i += n;
    }
    return -1;
}
