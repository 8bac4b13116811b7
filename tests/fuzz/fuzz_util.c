#include "tests/fuzz/fuzz_util.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util/common.h"

/* sanitizer_common's hook interface (sanitizer/allocator_interface.h). */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));

/* ---- heap blocks allocated during one input: open addressing, tombstones ---- */
#define TRACK_SLOTS (1u << 18)
#define TOMBSTONE ((void *)1)
static void *g_blocks[TRACK_SLOTS];
static size_t g_touched[TRACK_SLOTS / 2]; /* slots in use, so reset and cleanup */
static size_t g_nused;      /* need not scan the table: live + tombstones */
static int g_armed;         /* hooks record only while an input runs */
static int g_overflow;      /* too many blocks: cleanup would be partial */

static size_t slot_of(const volatile void *p) {
    uintptr_t h = (uintptr_t)p;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (TRACK_SLOTS - 1);
}

static void on_malloc(const volatile void *p, size_t n) {
    (void)n;
    if (!g_armed || !p) return;
    if (g_nused >= TRACK_SLOTS / 2) { g_overflow = 1; return; }
    size_t i = slot_of(p);
    while (g_blocks[i] && g_blocks[i] != TOMBSTONE) i = (i + 1) & (TRACK_SLOTS - 1);
    if (!g_blocks[i]) g_touched[g_nused++] = i;
    g_blocks[i] = (void *)p;
}

static void on_free(const volatile void *p) {
    if (!g_armed || !p) return;
    for (size_t i = slot_of(p); g_blocks[i]; i = (i + 1) & (TRACK_SLOTS - 1))
        if (g_blocks[i] == p) { g_blocks[i] = TOMBSTONE; return; }
}

static void reset_blocks(void) {
    for (size_t k = 0; k < g_nused; k++) g_blocks[g_touched[k]] = NULL;
    g_nused = 0;
    g_overflow = 0;
}

/* ---- FILEs opened during one input ---- */
#define MAX_FILES 64
static FILE *g_files[MAX_FILES];

FILE *__real_fopen(const char *path, const char *mode);
int __real_fclose(FILE *f);

FILE *__wrap_fopen(const char *path, const char *mode) {
    FILE *f = __real_fopen(path, mode);
    if (f && g_armed)
        for (int i = 0; i < MAX_FILES; i++)
            if (!g_files[i]) { g_files[i] = f; break; }
    return f;
}

int __wrap_fclose(FILE *f) {
    for (int i = 0; i < MAX_FILES; i++)
        if (g_files[i] == f) g_files[i] = NULL;
    return __real_fclose(f);
}

/* ---- rejection ---- */
static jmp_buf g_reject;
static void on_input_error(void) { longjmp(g_reject, 1); }

static void release_input(void) {
    for (int i = 0; i < MAX_FILES; i++)
        if (g_files[i]) __wrap_fclose(g_files[i]); /* frees its blocks: still armed */
    g_armed = 0;
    if (g_overflow) {
        fprintf(stderr, "fuzz_util: more than %u blocks in one rejected input; not freed\n", TRACK_SLOTS / 2);
        abort();
    }
    for (size_t k = 0; k < g_nused; k++) {
        void *p = g_blocks[g_touched[k]];
        if (p != TOMBSTONE) free(p);
    }
}

static char g_dir[64];
static void remove_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz_util: cannot remove %s\n", g_dir);
}

const char *vb_fuzz_dir(void) {
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/vbfuzz.XXXXXX");
        if (!mkdtemp(g_dir)) { perror("mkdtemp"); abort(); }
        atexit(remove_dir);
        __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
        vb_fuzz_set_input_error_handler(on_input_error);
    }
    return g_dir;
}

int vb_fuzz_run(const uint8_t *data, size_t size, const char *suffix, vb_fuzz_fn fn) {
    char path[128];
    snprintf(path, sizeof path, "%s/input%s", vb_fuzz_dir(), suffix);
    FILE *f = __real_fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || __real_fclose(f) != 0) { perror(path); abort(); }

    vb_set_error_context("");
    reset_blocks();
    memset(g_files, 0, sizeof g_files);
    g_armed = 1;
    /* volatile: read after longjmp */
    volatile int rejected = 0;
    if (setjmp(g_reject) == 0) {
        fn(path, data, size);
    } else {
        rejected = 1;
        release_input();
    }
    g_armed = 0;
    return rejected;
}
