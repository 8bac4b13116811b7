/* data.c: split scan and the ERA5 loader (see data.h for the contract).
 *
 * Design:
 *  - A "reader" owns the HDF5 handles (files opened lazily and kept open, one
 *    set per worker, like each torch DataLoader worker process opening its own
 *    h5py.File), two memory dataspaces and, with shuffle, a permutation buffer.
 *  - A "slot" is one batch buffer. num_workers == 0: one slot and one reader,
 *    filled in vb_loader_next. num_workers == W > 0: 2W slots, W readers;
 *    batch sequence number s (counted from the last reset) is produced by
 *    worker s % W into slot s % 2W, so worker w only ever touches slots w and
 *    w + W and needs no coordination with the other workers: only with the
 *    consumer, through one mutex and two condition variables.
 *  - A contiguous, unfiltered float32 dataset is read outside the HDF5 lock:
 *    through a read-only mapping of its bytes per reader (data_read mmap,
 *    normalised straight out of the page cache, a SIGBUS from a file that
 *    shrank turned into an input error by map_guard) or with pread (data_read
 *    pread); any other layout through H5Dread under the lock.
 *  - vb_loader_reset bumps a generation counter; workers notice it between
 *    samples, abandon stale work and restart from their first sequence.
 *  - Everything is allocated in vb_loader_create.
 */
#include "core/data/data.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <hdf5.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util/common.h"
#include "core/util/map_guard.h"
#include "core/prof/timeline.h"

/* ---- HDF5 serialisation ----
 * A serial HDF5 build without --enable-threadsafe must never be entered by
 * two threads at once; then every HDF5 call here goes through this mutex.
 * (Normalisation and copying stay outside it and run in parallel.) */
static pthread_once_t g_h5_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_h5_mu = PTHREAD_MUTEX_INITIALIZER;
static bool g_h5_need_lock = true;

static void h5_init_once(void) {
    hbool_t ts = 0;
    if (H5is_library_threadsafe(&ts) >= 0 && ts) g_h5_need_lock = false;
}

static void h5_lock(void) {
    pthread_once(&g_h5_once, h5_init_once);
    if (g_h5_need_lock) pthread_mutex_lock(&g_h5_mu);
}

static void h5_unlock(void) {
    if (g_h5_need_lock) pthread_mutex_unlock(&g_h5_mu);
}

/* ---- split scan ---- */

static bool is_year_h5(const char *name) {
    size_t n = strlen(name);
    if (name[0] == '.' || n < 7 || strcmp(name + n - 3, ".h5") != 0) return false;
    for (size_t i = n - 7; i < n - 3; i++)
        if (name[i] < '0' || name[i] > '9') return false;
    return true;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A chunked dataset whose every chunk has storage: the chunks its extent
 * needs (each dimension's extent over the chunk's, rounded up) against
 * those HDF5 has allocated. */
static bool all_chunks_written(hid_t d, hid_t space, const hsize_t dims[4]) {
    hid_t plist = H5Dget_create_plist(d);
    if (plist < 0) return false;
    hsize_t chunk[4];
    bool chunked = H5Pget_layout(plist) == H5D_CHUNKED && H5Pget_chunk(plist, 4, chunk) == 4;
    VB_H5(H5Pclose(plist));
    if (!chunked) return false;
    hsize_t need = 1, have = 0;
    for (int i = 0; i < 4; i++) {
        if (chunk[i] == 0) return false;
        need *= (dims[i] + chunk[i] - 1) / chunk[i];
    }
    if (H5Dget_num_chunks(d, space, &have) < 0) return false;
    return have == need;
}

/* Opens `path` read-only and checks its "fields" dataset; dims[4] out.
 * Exits 2 naming the file on any problem. Caller holds the HDF5 lock. */
static void check_h5_file(const char *path, hsize_t dims[4]) {
    /* errors from user files are reported by us, in one line */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0) vb_die_input("%s: not an HDF5 file (or unreadable)", path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) vb_die_input("%s: cannot open as HDF5 (truncated or corrupt?)", path);
    if (H5Lexists(f, "fields", H5P_DEFAULT) <= 0) vb_die_input("%s: no dataset 'fields'", path);
    hid_t d = H5Dopen2(f, "fields", H5P_DEFAULT);
    if (d < 0) vb_die_input("%s: 'fields' is not a readable dataset", path);
    hid_t t = VB_H5(H5Dget_type(d));
    if (H5Tget_class(t) != H5T_FLOAT) vb_die_input("%s: dataset 'fields' is not floating point", path);
    hid_t sp = VB_H5(H5Dget_space(d));
    int nd = H5Sget_simple_extent_ndims(sp);
    if (nd != 4) vb_die_input("%s: dataset 'fields' has %d dimensions, expected 4 [T, C, H, W]", path, nd);
    VB_H5(H5Sget_simple_extent_dims(sp, dims, NULL));
    for (int i = 0; i < 4; i++)
        if (dims[i] == 0 || dims[i] > (hsize_t)1 << 30) vb_die_input("%s: dataset 'fields' has an empty or absurd dimension %d", path, i);
    /* storage never written reads as the fill value (0, or the file's own):
     * a year whose writer stopped early would be trained on as zeros. HDF5
     * knows which chunks (or whether the contiguous block) were allocated. */
    H5D_space_status_t space;
    if (H5Dget_space_status(d, &space) < 0) vb_die_input("%s: cannot tell whether dataset 'fields' was written", path);
    /* HDF5 calls a chunked dataset partly allocated when its storage is
     * smaller than its data: every filtered (gzip, shuffle) file written
     * whole. Such a dataset is written when every chunk is there, each
     * allocated chunk counting as written whatever its filters made of it. */
    if (space == H5D_SPACE_STATUS_PART_ALLOCATED && all_chunks_written(d, sp, dims)) space = H5D_SPACE_STATUS_ALLOCATED;
    if (space == H5D_SPACE_STATUS_NOT_ALLOCATED)
        vb_die_input("%s: dataset 'fields' was never written (no storage allocated): it would read as fill values; "
                     "write the file completely (or remove it)",
                     path);
    if (space == H5D_SPACE_STATUS_PART_ALLOCATED)
        vb_die_input("%s: dataset 'fields' is only partly written (some of its chunks have no storage): they would "
                     "read as fill values; write the file completely (or remove it)",
                     path);
    VB_H5(H5Sclose(sp));
    VB_H5(H5Tclose(t));
    VB_H5(H5Dclose(d));
    VB_H5(H5Fclose(f));
}

void vb_split_scan(vb_split_info *s, const char *dir) {
    memset(s, 0, sizeof *s);
    struct stat st;
    if (stat(dir, &st) != 0) vb_die_input("%s: data directory does not exist", dir);
    if (!S_ISDIR(st.st_mode)) vb_die_input("%s: data path is not a directory", dir);
    DIR *dp = opendir(dir);
    if (!dp) vb_die_input("%s: cannot read data directory: %s", dir, strerror(errno));
    int cap = 16;
    char **files = vb_malloc_check(sizeof(char *) * (size_t)cap);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 3 || strcmp(e->d_name + len - 3, ".h5") != 0) continue;
        if (!is_year_h5(e->d_name)) {
            vb_warn("%s/%s: ignored (the file name must end in a 4-digit year, e.g. 2016.h5)", dir, e->d_name);
            continue;
        }
        char path[VB_PATH_MAX], why[VB_PATH_MAX + 64];
        vb_snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        /* a year that cannot be read is refused, not skipped: skipping it
         * would train on part of the data and still exit 0 */
        if (vb_file_problem(path, why, sizeof why)) vb_die_input("%s: %s", path, why);
        if (n == cap) {
            cap *= 2;
            files = vb_realloc_check(files, sizeof(char *) * (size_t)cap);
        }
        files[n++] = vb_strdup_check(path);
    }
    closedir(dp);
    if (n == 0) {
        free(files);
        vb_die_input("no *.h5 files in %s", dir);
    }
    qsort(files, (size_t)n, sizeof(char *), cmp_str);

    hsize_t d0[4], d[4];
    h5_lock();
    for (int i = 0; i < n; i++) {
        check_h5_file(files[i], i == 0 ? d0 : d);
        if (i > 0 && memcmp(d, d0, sizeof d) != 0)
            vb_die_input("%s: dataset 'fields' has shape [%llu, %llu, %llu, %llu] but %s has [%llu, %llu, %llu, %llu]",
                         files[i], (unsigned long long)d[0], (unsigned long long)d[1], (unsigned long long)d[2],
                         (unsigned long long)d[3], files[0], (unsigned long long)d0[0], (unsigned long long)d0[1],
                         (unsigned long long)d0[2], (unsigned long long)d0[3]);
    }
    h5_unlock();
    s->nfiles = n;
    s->files = files;
    s->T = (int)d0[0];
    s->C = (int)d0[1];
    s->Hfull = (int)d0[2];
    s->Wfull = (int)d0[3];
}

void vb_split_free(vb_split_info *s) {
    for (int i = 0; i < s->nfiles; i++) free(s->files[i]);
    free(s->files);
    memset(s, 0, sizeof *s);
}

void vb_sample_location(int64_t i, int T, int dt, int *file, int *l) {
    *file = (int)(i / T);
    int k = (int)(i % T);
    k = k % (T - dt);
    if (k < dt) k += dt;
    *l = k;
}

/* ---- loader ---- */

enum { SLOT_FREE = 0, SLOT_FILLING, SLOT_READY, SLOT_HELD };

typedef struct vb_slot {
    vb_batch b;
    int state;
    int64_t seq;  /* sequence number it holds when READY/HELD */
    uint64_t gen; /* generation it was produced in */
} vb_slot;

typedef struct vb_reader {
    hid_t *file, *dset, *fspace; /* [nfiles]; 0 = not opened yet */
    /* [nfiles] the direct path: a contiguous, unfiltered dataset of native
     * floats is read outside the HDF5 lock, so the workers' reads run in
     * parallel: through a read-only mapping of its bytes (raw_map, NULL
     * where mapping failed or the data is not float-aligned in the file),
     * else with pread at raw_off; raw_fd -1: through H5Dread under the lock */
    int *raw_fd;
    int64_t *raw_off;
    hsize_t (*raw_dims)[4]; /* the dataset's [T, C, H, W] */
    const float **raw_map;  /* the dataset's first float */
    void **raw_map_base;    /* what mmap returned, and its length */
    size_t *raw_map_len;
    hid_t mspace_in, mspace_tar;
    int64_t *perm; /* [nsamples] with shuffle */
    int perm_epoch;
} vb_reader;

struct vb_loader;
typedef struct vb_worker_arg {
    struct vb_loader *l;
    int w;
} vb_worker_arg;

struct vb_loader {
    char data_dir[VB_PATH_MAX];
    vb_split_info split;
    float *mean, *std; /* [C] */
    int Cin, Cout, H, W, B, dt;
    bool shuffle;
    uint64_t seed;
    int dp_rank, dp_size;
    int64_t nsamples, nlocal;
    int steps;

    int nworkers, nslots, nreaders;
    bool pread; /* vb_loader_opts.pread: no file mappings */
    bool raw;   /* vb_loader_opts.raw: batches hold the file's values */
    vb_slot *slots;
    vb_reader *readers;
    pthread_t *threads;
    vb_worker_arg *args;
    bool threads_started;

    pthread_mutex_t mu;
    pthread_cond_t cv_ready; /* consumer waits for a READY slot */
    pthread_cond_t cv_free;  /* workers wait for a FREE slot or a new generation */
    atomic_uint_fast64_t gen;
    atomic_bool stop;
    int start_epoch;  /* epoch of sequence 0 */
    int64_t next_seq; /* next sequence the consumer gets */
    vb_slot *held;
    double wait_s;
    struct vb_tlrec *_Atomic timeline; /* workers record their reads here; may be NULL */
    /* the batch buffers' allocator (vb_loader_opts); NULL: vb_malloc */
    void *(*host_alloc)(void *arg, size_t bytes);
    void (*host_free)(void *arg, void *p);
    void *host_alloc_arg;
};

/* Fisher-Yates permutation of [0, n) seeded by (seed, epoch). */
static void make_perm(int64_t *perm, int64_t n, uint64_t seed, int epoch) {
    vb_rng r;
    vb_rng_seed(&r, seed ^ (0xD1B54A32D192ED03ull * ((uint64_t)(uint32_t)epoch + 1)));
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(vb_rng_u64(&r) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* Sets up the direct path for file y when its dataset allows it: contiguous
 * layout, no filters, native float32, a raw data address. Caller holds the
 * HDF5 lock. */
static void raw_probe(const vb_loader *l, vb_reader *rd, int y, const char *path, hid_t d) {
    rd->raw_fd[y] = -1;
    hid_t dcpl = VB_H5(H5Dget_create_plist(d));
    hid_t t = VB_H5(H5Dget_type(d));
    const bool plain = H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Pget_nfilters(dcpl) == 0 &&
                       H5Tequal(t, H5T_NATIVE_FLOAT) > 0;
    VB_H5(H5Tclose(t));
    VB_H5(H5Pclose(dcpl));
    haddr_t off = plain ? H5Dget_offset(d) : HADDR_UNDEF;
    if (off == HADDR_UNDEF) return;
    VB_H5(H5Sget_simple_extent_dims(rd->fspace[y], rd->raw_dims[y], NULL));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return; /* H5Dread it is */
    rd->raw_fd[y] = fd;
    rd->raw_off[y] = (int64_t)off;
    /* Mapped, a sample is normalised straight out of the page cache: pread
     * would first copy it into the process, a pass over every byte that costs
     * about as much as the normalisation. The split scan checked the file's
     * size; a file that shrinks later raises SIGBUS, which map_guard turns
     * into the same error as a short pread. */
    const hsize_t *dd = rd->raw_dims[y];
    const size_t bytes = (size_t)(dd[0] * dd[1] * dd[2] * dd[3]) * sizeof(float);
    const long page = sysconf(_SC_PAGESIZE);
    if (l->pread || off % sizeof(float) != 0 || page <= 0 || bytes == 0) return;
    const off_t moff = (off_t)(off - off % (haddr_t)page);
    const size_t len = (size_t)((off_t)off - moff) + bytes;
    void *base = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, moff);
    if (base == MAP_FAILED) return; /* pread it is */
    rd->raw_map_base[y] = base;
    rd->raw_map_len[y] = len;
    rd->raw_map[y] = (const float *)((const char *)base + ((off_t)off - moff));
}

/* dst[i] = (src[i] - mean) / std over n values (dst == src: in place);
 * returns the largest exponent field of the results, which is all ones only
 * if one of them is NaN or Inf (a NaN/Inf in the file, or a value the stats
 * push past FLT_MAX). The check rides on the normalisation pass: an integer
 * max, which vectorises. */
static uint32_t normalize_into(float *dst, const float *src, size_t n, float m, float s) {
    uint32_t maxexp = 0;
    for (size_t i = 0; i < n; i++) {
        float v = (src[i] - m) / s;
        dst[i] = v;
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        bits &= 0x7f800000u;
        maxexp = bits > maxexp ? bits : maxexp;
    }
    return maxexp;
}

#define NONFINITE_EXP 0x7f800000u

/* dst[i] = src[i] over n values (dst == src: only the check), for a consumer
 * that normalises later; returns NONFINITE_EXP when some (src[i] - mean) / std
 * would not be finite, else 0. One pass keeps the largest magnitude, as an
 * integer max over the bits without the sign (the order of magnitudes for
 * finite floats; NaN and Inf sort above them), which vectorises like the
 * copy. A NaN or Inf in the file shows there. Otherwise every
 * |fl(fl(x - m) / s)| is at most fl(fl(max|x| + |m|) / s) (rounding is
 * monotonic), so that bound being finite clears the plane; only when it is
 * not (values near FLT_MAX) are the values normalised one by one to decide
 * exactly. */
static uint32_t copy_check_into(float *dst, const float *src, size_t n, float m, float s) {
    uint32_t maxabs = 0;
    for (size_t i = 0; i < n; i++) {
        const float v = src[i];
        dst[i] = v;
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        bits &= 0x7fffffffu;
        maxabs = bits > maxabs ? bits : maxabs;
    }
    if (maxabs >= NONFINITE_EXP) return NONFINITE_EXP;
    float big;
    memcpy(&big, &maxabs, sizeof big);
    if (isfinite((big + fabsf(m)) / s)) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isfinite((dst[i] - m) / s)) return NONFINITE_EXP;
    return 0;
}

/* what a read does to the values on their way into the batch */
static uint32_t into_batch(const vb_loader *l, float *dst, const float *src, size_t n, float m, float s) {
    return l->raw ? copy_check_into(dst, src, n, m, s) : normalize_into(dst, src, n, m, s);
}

/* Normalises x[C, hw] in place (raw: checks only) and returns the first
 * channel holding a NaN or Inf after normalisation, -1 if every value is
 * finite. */
static int normalize(const vb_loader *l, float *x, int C, size_t hw) {
    for (int c = 0; c < C; c++)
        if (into_batch(l, x + (size_t)c * hw, x + (size_t)c * hw, hw, l->mean[c], l->std[c]) == NONFINITE_EXP)
            return c;
    return -1;
}

/* bytes at file offset `off` into dst; a short file or an I/O error exits
 * naming the file (it was checked when the split was scanned) */
static void raw_read(const char *path, int fd, void *dst, size_t bytes, int64_t off) {
    char *p = dst;
    while (bytes > 0) {
        ssize_t n = pread(fd, p, bytes, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) vb_die_input("%s: reading %zu bytes at offset %lld failed: %s", path, bytes, (long long)off, strerror(errno));
        if (n == 0) vb_die_input("%s: file ends before offset %lld (truncated while in use?)", path, (long long)off);
        p += n, bytes -= (size_t)n, off += n;
    }
}

/* Floats per read of the direct path: each piece is normalised right after
 * its read, while it is still in the core's cache, instead of in a second
 * pass over the whole sample from memory (at `base`, 41 MB a sample: the
 * pass was as much memory traffic as the read itself, and the loader's
 * workers share the host's memory bandwidth with the batch's copy to the
 * device). 64 Ki floats, 256 KiB, fit the second-level cache of every core
 * in use. */
enum { RAW_PIECE = 64 * 1024 };

/* fields[t, 0:C, 0:H, 0:W] of file y's mapping into dst[C, H, W],
 * normalised on the way: a plane at once when the file's rows are dst's,
 * else row by row. Returns as raw_read_crop. */
static int map_read_crop(const vb_loader *l, const vb_reader *rd, int y, const char *path, int t, int C,
                         float *dst) {
    const hsize_t *d = rd->raw_dims[y];
    const size_t H = (size_t)l->H, W = (size_t)l->W;
    const bool whole_rows = d[3] == (hsize_t)W;
    sigjmp_buf jb;
    if (sigsetjmp(jb, 1) != 0)
        vb_die_input("%s: the file is shorter than its dataset fields[%d, ...] needs (truncated while in use?)", path,
                     t);
    vb_map_guard_arm(&jb);
    int bad = -1;
    for (int c = 0; c < C && bad < 0; c++) {
        const float *plane = rd->raw_map[y] + ((hsize_t)t * d[1] + (hsize_t)c) * d[2] * d[3];
        float *out = dst + (size_t)c * H * W;
        uint32_t maxexp = 0;
        if (whole_rows) {
            maxexp = into_batch(l, out, plane, H * W, l->mean[c], l->std[c]);
        } else {
            for (size_t h = 0; h < H; h++) {
                uint32_t e = into_batch(l, out + h * W, plane + h * d[3], W, l->mean[c], l->std[c]);
                maxexp = e > maxexp ? e : maxexp;
            }
        }
        if (maxexp == NONFINITE_EXP) bad = c;
    }
    vb_map_guard_disarm();
    return bad;
}

/* fields[t, 0:C, 0:H, 0:W] of file y into dst[C, H, W] through the mapping,
 * or by pread normalised as it arrives: pieces of whole rows of at most
 * RAW_PIECE floats (at least one row). Returns the first channel holding a
 * non-finite value after normalisation, -1 if none. */
static int raw_read_crop(const vb_loader *l, vb_reader *rd, int y, const char *path, int t, int C, float *dst) {
    if (rd->raw_map[y]) return map_read_crop(l, rd, y, path, t, C, dst);
    const hsize_t *d = rd->raw_dims[y];
    const size_t H = (size_t)l->H, W = (size_t)l->W;
    const bool whole_rows = d[3] == (hsize_t)W; /* rows of the file are rows of dst: read several at once */
    const size_t rows_per_read = whole_rows && W < RAW_PIECE ? RAW_PIECE / W : 1;
    for (int c = 0; c < C; c++) {
        const int64_t plane = rd->raw_off[y] + (int64_t)(((hsize_t)t * d[1] + (hsize_t)c) * d[2] * d[3] * sizeof(float));
        float *out = dst + (size_t)c * H * W;
        uint32_t maxexp = 0;
        for (size_t h = 0; h < H; h += rows_per_read) {
            const size_t rows = H - h < rows_per_read ? H - h : rows_per_read;
            float *piece = out + h * W;
            raw_read(path, rd->raw_fd[y], piece, rows * W * sizeof(float),
                     plane + (int64_t)(h * d[3] * sizeof(float)));
            uint32_t e = into_batch(l, piece, piece, rows * W, l->mean[c], l->std[c]);
            maxexp = e > maxexp ? e : maxexp;
        }
        if (maxexp == NONFINITE_EXP) return c;
    }
    return -1;
}

/* Reads sample g into inp[Cin, H, W], tar[Cout, H, W], normalised. Returns
 * the first channel of inp holding a non-finite value in *bad_in, of tar in
 * *bad_tar, -1 where there is none. */
static void read_sample(vb_loader *l, vb_reader *rd, int64_t g, float *inp, float *tar, int *bad_in,
                        int *bad_tar) {
    int y, t;
    vb_sample_location(g, l->split.T, l->dt, &y, &t);
    const char *path = l->split.files[y];
    h5_lock();
    if (rd->file[y] == 0) {
        /* pre-checked by vb_split_scan; failing now means the file changed under us */
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        if (f < 0) vb_die_input("%s: cannot open as HDF5", path);
        hid_t d = H5Dopen2(f, "fields", H5P_DEFAULT);
        if (d < 0) vb_die_input("%s: cannot open dataset 'fields'", path);
        rd->file[y] = f;
        rd->dset[y] = d;
        rd->fspace[y] = VB_H5(H5Dget_space(d));
        raw_probe(l, rd, y, path, d);
    }
    if (rd->raw_fd[y] >= 0) {
        h5_unlock();
        *bad_in = raw_read_crop(l, rd, y, path, t, l->Cin, inp);
        *bad_tar = raw_read_crop(l, rd, y, path, t + l->dt, l->Cout, tar);
        return;
    }
    hid_t fs = rd->fspace[y];
    hsize_t start[4] = {(hsize_t)t, 0, 0, 0};
    hsize_t count_in[4] = {1, (hsize_t)l->Cin, (hsize_t)l->H, (hsize_t)l->W};
    VB_H5(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count_in, NULL));
    if (H5Dread(rd->dset[y], H5T_NATIVE_FLOAT, rd->mspace_in, fs, H5P_DEFAULT, inp) < 0)
        vb_die_input("%s: reading fields[%d, 0:%d, 0:%d, 0:%d] failed", path, t, l->Cin, l->H, l->W);
    start[0] = (hsize_t)(t + l->dt);
    hsize_t count_tar[4] = {1, (hsize_t)l->Cout, (hsize_t)l->H, (hsize_t)l->W};
    VB_H5(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count_tar, NULL));
    if (H5Dread(rd->dset[y], H5T_NATIVE_FLOAT, rd->mspace_tar, fs, H5P_DEFAULT, tar) < 0)
        vb_die_input("%s: reading fields[%d, 0:%d, 0:%d, 0:%d] failed", path, t + l->dt, l->Cout, l->H, l->W);
    h5_unlock();
    const size_t hw = (size_t)l->H * l->W;
    *bad_in = normalize(l, inp, l->Cin, hw);
    *bad_tar = normalize(l, tar, l->Cout, hw);
}

/* Exits 2 naming the file, time index, sample and channel of the first
 * non-finite value of channel c in x[hw] (normalised, or raw to be
 * normalised): training on it would give a NaN loss, or a NaN validation
 * loss reported as a result. */
static void die_non_finite(const vb_loader *l, int64_t g, bool target, int c, const float *x, size_t hw) {
    int y, t;
    vb_sample_location(g, l->split.T, l->dt, &y, &t);
    if (target) t += l->dt;
    const float m = l->raw ? l->mean[c] : 0.0f, s = l->raw ? l->std[c] : 1.0f;
    size_t i = 0;
    while (i < hw && isfinite((x[i] - m) / s)) i++;
    if (i == hw) i = 0;
    vb_die_input("%s: fields[%d, %d, %zu, %zu] is %s after normalisation (mean %g, std %g) in sample %lld (%s "
                 "channel %d): the data must be finite",
                 l->split.files[y], t, c, i / (size_t)l->W, i % (size_t)l->W, isnan((x[i] - m) / s) ? "nan" : "inf",
                 (double)l->mean[c], (double)l->std[c], (long long)g, target ? "target" : "input", c);
}

/* Fills slot `sl` with batch `index` of `epoch`. With gen_check, returns false
 * as soon as a reset (generation change) or stop makes the work stale. */
static bool fill_batch(vb_loader *l, vb_reader *rd, vb_slot *sl, int epoch, int index, bool gen_check, uint64_t gen) {
    const int64_t *order = NULL;
    if (l->shuffle) {
        if (rd->perm_epoch != epoch) {
            make_perm(rd->perm, l->nsamples, l->seed, epoch);
            rd->perm_epoch = epoch;
        }
        order = rd->perm;
    }
    size_t hw = (size_t)l->H * l->W;
    size_t nin = (size_t)l->Cin * hw, ntar = (size_t)l->Cout * hw;
    vb_batch *b = &sl->b;
    for (int k = 0; k < l->B; k++) {
        if (gen_check && (atomic_load(&l->stop) || atomic_load(&l->gen) != gen)) return false;
        int64_t pos = l->dp_rank + (int64_t)l->dp_size * ((int64_t)index * l->B + k);
        int64_t g = order ? order[pos] : pos;
        b->samples[k] = g;
        float *inp = b->inp + (size_t)k * nin, *tar = b->tar + (size_t)k * ntar;
        int bad_in, bad_tar;
        read_sample(l, rd, g, inp, tar, &bad_in, &bad_tar);
        if (bad_in >= 0) die_non_finite(l, g, false, bad_in, inp + (size_t)bad_in * hw, hw);
        if (bad_tar >= 0) die_non_finite(l, g, true, bad_tar, tar + (size_t)bad_tar * hw, hw);
    }
    b->B = l->B;
    b->epoch = epoch;
    b->index = index;
    return true;
}

static void *worker_main(void *p) {
    vb_worker_arg *a = p;
    vb_loader *l = a->l;
    const int w = a->w, W = l->nworkers;
    /* HDF5 error-stack settings are per thread in thread-safe builds */
    h5_lock();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    h5_unlock();
    vb_reader *rd = &l->readers[w];
    pthread_mutex_lock(&l->mu);
    uint64_t mygen = atomic_load(&l->gen);
    int64_t s = w;
    while (!atomic_load(&l->stop)) {
        uint64_t g = atomic_load(&l->gen);
        if (g != mygen) { /* reset: start over from our first sequence */
            mygen = g;
            s = w;
        }
        vb_slot *sl = &l->slots[s % l->nslots];
        if (sl->state != SLOT_FREE) {
            pthread_cond_wait(&l->cv_free, &l->mu);
            continue;
        }
        sl->state = SLOT_FILLING;
        int epoch = l->start_epoch + (int)(s / l->steps);
        int index = (int)(s % l->steps);
        pthread_mutex_unlock(&l->mu);
        double t_read = vb_now();
        bool ok = fill_batch(l, rd, sl, epoch, index, true, mygen);
        vb_tlrec *tl = atomic_load(&l->timeline);
        if (tl && ok)
            vb_tlrec_add(tl, VB_TL_LOADER0 + w, VB_TLK_IO, "read_batch", t_read, vb_now() - t_read,
                         (double)l->B * (double)(l->Cin + l->Cout) * l->H * l->W * sizeof(float), 0, -1);
        pthread_mutex_lock(&l->mu);
        if (ok && !atomic_load(&l->stop) && atomic_load(&l->gen) == mygen) {
            sl->seq = s;
            sl->gen = mygen;
            sl->state = SLOT_READY;
            pthread_cond_broadcast(&l->cv_ready);
            s += W;
        } else {
            sl->state = SLOT_FREE;
        }
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void reader_init(vb_loader *l, vb_reader *rd) {
    int nf = l->split.nfiles;
    rd->file = vb_malloc(sizeof(hid_t) * (size_t)nf);
    rd->dset = vb_malloc(sizeof(hid_t) * (size_t)nf);
    rd->fspace = vb_malloc(sizeof(hid_t) * (size_t)nf);
    rd->raw_fd = vb_malloc(sizeof(int) * (size_t)nf);
    rd->raw_off = vb_malloc(sizeof(int64_t) * (size_t)nf);
    rd->raw_dims = vb_malloc(sizeof(hsize_t[4]) * (size_t)nf);
    rd->raw_map = vb_malloc(sizeof(const float *) * (size_t)nf);
    rd->raw_map_base = vb_malloc(sizeof(void *) * (size_t)nf);
    rd->raw_map_len = vb_malloc(sizeof(size_t) * (size_t)nf);
    for (int i = 0; i < nf; i++) {
        rd->raw_fd[i] = -1;
        rd->raw_map[i] = NULL;
        rd->raw_map_base[i] = NULL;
    }
    hsize_t din[3] = {(hsize_t)l->Cin, (hsize_t)l->H, (hsize_t)l->W};
    hsize_t dtar[3] = {(hsize_t)l->Cout, (hsize_t)l->H, (hsize_t)l->W};
    h5_lock();
    rd->mspace_in = VB_H5(H5Screate_simple(3, din, NULL));
    rd->mspace_tar = VB_H5(H5Screate_simple(3, dtar, NULL));
    h5_unlock();
    rd->perm = l->shuffle ? vb_malloc(sizeof(int64_t) * (size_t)l->nsamples) : NULL;
    rd->perm_epoch = -1;
}

static void reader_free(vb_loader *l, vb_reader *rd) {
    h5_lock();
    for (int i = 0; i < l->split.nfiles; i++) {
        if (rd->file[i] == 0) continue;
        if (rd->raw_map_base[i]) munmap(rd->raw_map_base[i], rd->raw_map_len[i]);
        if (rd->raw_fd[i] >= 0) close(rd->raw_fd[i]);
        VB_H5(H5Sclose(rd->fspace[i]));
        VB_H5(H5Dclose(rd->dset[i]));
        VB_H5(H5Fclose(rd->file[i]));
    }
    VB_H5(H5Sclose(rd->mspace_in));
    VB_H5(H5Sclose(rd->mspace_tar));
    h5_unlock();
    vb_free(rd->file);
    vb_free(rd->dset);
    vb_free(rd->fspace);
    vb_free(rd->raw_fd);
    vb_free(rd->raw_off);
    vb_free(rd->raw_dims);
    vb_free(rd->raw_map);
    vb_free(rd->raw_map_base);
    vb_free(rd->raw_map_len);
    vb_free(rd->perm);
}

/* The highest time index any sample of a T-step file touches (its target). */
static int max_target_index(int T, int dt) {
    int mx = 0;
    for (int i = 0; i < T; i++) {
        int f, t;
        vb_sample_location(i, T, dt, &f, &t);
        if (t + dt > mx) mx = t + dt;
    }
    return mx;
}

/* Stats come from users: a NaN/Inf mean, or a std that is not a finite
 * normal positive number (zero, denormal, negative, NaN, Inf), would turn
 * every sample into NaN/Inf or values near FLT_MAX. */
static void check_stats(const char *means_path, const float *mean, const char *stds_path, const float *std, int C) {
    for (int c = 0; c < C; c++) {
        if (!isfinite(mean[c]))
            vb_die_input("%s: mean of channel %d is %g, must be finite", means_path, c, (double)mean[c]);
        if (!(isfinite(std[c]) && std[c] >= FLT_MIN))
            vb_die_input("%s: std of channel %d is %g, must be a finite number >= %g (a zero or denormal std "
                         "divides every sample into inf/nan)",
                         stds_path, c, (double)std[c], (double)FLT_MIN);
    }
}

/* A batch buffer: the caller's allocator (page-locked memory for a GPU) or
 * plain host memory. */
static void *batch_alloc(vb_loader *l, size_t bytes) {
    if (!l->host_alloc) return vb_malloc(bytes);
    void *p = l->host_alloc(l->host_alloc_arg, bytes);
    if (!p) vb_die_internal("loader: the batch allocator returned NULL for %zu bytes", bytes);
    return p;
}

static void batch_free(vb_loader *l, void *p) {
    if (l->host_alloc)
        l->host_free(l->host_alloc_arg, p);
    else
        vb_free(p);
}

vb_loader *vb_loader_create(const vb_loader_opts *o) {
    const char *dir = o->data_dir ? o->data_dir : "";
    if (!dir[0]) vb_die_input("data directory (train_data_path/valid_data_path) is empty");
    if (o->img_h < 1 || o->img_w < 1) vb_die_input("img_size [%d, %d] must be positive", o->img_h, o->img_w);
    if (o->n_in_channels < 1) vb_die_input("n_in_channels must be >= 1 (got %d)", o->n_in_channels);
    if (o->n_out_channels < 1) vb_die_input("n_out_channels must be >= 1 (got %d)", o->n_out_channels);
    if (o->dt < 1) vb_die_input("dt must be >= 1 (got %d)", o->dt);
    if (o->local_batch < 1) vb_die_input("local batch size must be >= 1 (got %d)", o->local_batch);
    if (o->limit_nsamples < 0) vb_die_input("limit_nsamples must be >= 0 (got %lld)", (long long)o->limit_nsamples);
    if (o->num_workers < 0 || o->num_workers > 256)
        vb_die_input("num_data_workers must be in [0, 256] (got %d)", o->num_workers);
    if (o->dp_size < 1 || o->dp_rank < 0 || o->dp_rank >= o->dp_size)
        vb_die_input("data-parallel rank %d of %d is invalid", o->dp_rank, o->dp_size);
    if (!o->means_path || !o->means_path[0]) vb_die_input("global_means_path is empty");
    if (!o->stds_path || !o->stds_path[0]) vb_die_input("global_stds_path is empty");

    if (!o->host_alloc != !o->host_free) vb_die_internal("vb_loader_create: host_alloc and host_free go together");

    vb_loader *l = vb_malloc(sizeof *l);
    l->host_alloc = o->host_alloc;
    l->host_free = o->host_free;
    l->host_alloc_arg = o->host_alloc_arg;
    vb_snprintf(l->data_dir, sizeof l->data_dir, "%s", dir);
    vb_split_scan(&l->split, dir);
    const vb_split_info *s = &l->split;
    if (o->n_in_channels > s->C)
        vb_die_input("%s: has C=%d channels but n_in_channels=%d", s->files[0], s->C, o->n_in_channels);
    if (o->n_out_channels > s->C)
        vb_die_input("%s: has C=%d channels but n_out_channels=%d", s->files[0], s->C, o->n_out_channels);
    if (o->img_h > s->Hfull || o->img_w > s->Wfull)
        vb_die_input("%s: img_size [%d, %d] is larger than the fields [%d, %d]", s->files[0], o->img_h, o->img_w,
                     s->Hfull, s->Wfull);
    if (s->T <= o->dt)
        vb_die_input("%s: has T=%d time steps per file, must be > dt=%d", s->files[0], s->T, o->dt);
    int mt = max_target_index(s->T, o->dt);
    if (mt >= s->T)
        vb_die_input("%s: has T=%d time steps per file, too few for dt=%d (the sample mapping reads step %d)",
                     s->files[0], s->T, o->dt, mt);

    l->mean = vb_malloc(sizeof(float) * (size_t)s->C);
    l->std = vb_malloc(sizeof(float) * (size_t)s->C);
    vb_npy_load_stats(o->means_path, s->C, l->mean);
    vb_npy_load_stats(o->stds_path, s->C, l->std);
    check_stats(o->means_path, l->mean, o->stds_path, l->std, s->C);

    l->Cin = o->n_in_channels;
    l->Cout = o->n_out_channels;
    l->H = o->img_h;
    l->W = o->img_w;
    l->B = o->local_batch;
    l->dt = o->dt;
    l->shuffle = o->shuffle;
    l->seed = o->seed;
    l->dp_rank = o->dp_rank;
    l->dp_size = o->dp_size;
    l->nsamples = (int64_t)s->nfiles * s->T;
    if (o->limit_nsamples > 0 && o->limit_nsamples < l->nsamples) l->nsamples = o->limit_nsamples;
    l->nlocal = l->nsamples / l->dp_size;
    int64_t steps = l->nlocal / l->B;
    if (steps < 1)
        vb_die_input("%s: %lld samples over %d data-parallel ranks leave %lld per rank, fewer than one local batch of %d",
                     dir, (long long)l->nsamples, l->dp_size, (long long)l->nlocal, l->B);
    if (steps > INT32_MAX) vb_die_input("%s: too many batches per epoch (%lld)", dir, (long long)steps);
    l->steps = (int)steps;

    l->nworkers = o->num_workers;
    l->pread = o->pread;
    l->raw = o->raw;
    l->nslots = l->nworkers > 0 ? 2 * l->nworkers : 1;
    l->nreaders = l->nworkers > 0 ? l->nworkers : 1;
    size_t hw = (size_t)l->H * l->W;
    l->slots = vb_malloc(sizeof(vb_slot) * (size_t)l->nslots);
    for (int i = 0; i < l->nslots; i++) {
        vb_batch *b = &l->slots[i].b;
        b->inp = batch_alloc(l, sizeof(float) * (size_t)l->B * l->Cin * hw);
        b->tar = batch_alloc(l, sizeof(float) * (size_t)l->B * l->Cout * hw);
        b->samples = vb_malloc(sizeof(int64_t) * (size_t)l->B);
        b->B = l->B;
        l->slots[i].state = SLOT_FREE;
    }
    l->readers = vb_malloc(sizeof(vb_reader) * (size_t)l->nreaders);
    vb_map_guard_install(); /* the direct path reads through file mappings */
    for (int i = 0; i < l->nreaders; i++) reader_init(l, &l->readers[i]);

    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_ready, NULL);
    pthread_cond_init(&l->cv_free, NULL);
    atomic_init(&l->gen, 0);
    atomic_init(&l->stop, false);
    l->start_epoch = 0;
    l->next_seq = 0;
    l->held = NULL;
    l->wait_s = 0;
    if (l->nworkers > 0) {
        l->threads = vb_malloc(sizeof(pthread_t) * (size_t)l->nworkers);
        l->args = vb_malloc(sizeof(vb_worker_arg) * (size_t)l->nworkers);
        for (int w = 0; w < l->nworkers; w++) {
            l->args[w].l = l;
            l->args[w].w = w;
            int rc = pthread_create(&l->threads[w], NULL, worker_main, &l->args[w]);
            if (rc != 0) vb_die_internal("pthread_create for data worker %d failed: %s", w, strerror(rc));
        }
        l->threads_started = true;
    }
    return l;
}

void vb_loader_destroy(vb_loader *l) {
    if (!l) return;
    if (l->threads_started) {
        pthread_mutex_lock(&l->mu);
        atomic_store(&l->stop, true);
        pthread_cond_broadcast(&l->cv_free);
        pthread_cond_broadcast(&l->cv_ready);
        pthread_mutex_unlock(&l->mu);
        for (int w = 0; w < l->nworkers; w++) pthread_join(l->threads[w], NULL);
    }
    for (int i = 0; i < l->nreaders; i++) reader_free(l, &l->readers[i]);
    for (int i = 0; i < l->nslots; i++) {
        batch_free(l, l->slots[i].b.inp);
        batch_free(l, l->slots[i].b.tar);
        vb_free(l->slots[i].b.samples);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv_ready);
    pthread_cond_destroy(&l->cv_free);
    vb_free(l->slots);
    vb_free(l->readers);
    vb_free(l->threads);
    vb_free(l->args);
    vb_free(l->mean);
    vb_free(l->std);
    vb_split_free(&l->split);
    vb_free(l);
}

int64_t vb_loader_nsamples(const vb_loader *l) { return l->nsamples; }
int vb_loader_steps_per_epoch(const vb_loader *l) { return l->steps; }
double vb_loader_wait_seconds(const vb_loader *l) { return l->wait_s; }
const float *vb_loader_means(const vb_loader *l) { return l->mean; }
const float *vb_loader_stds(const vb_loader *l) { return l->std; }

/* Caller holds l->mu in threaded mode. */
static void release_held_locked(vb_loader *l) {
    if (!l->held) return;
    if (l->held->state == SLOT_HELD) l->held->state = SLOT_FREE;
    l->held = NULL;
}

void vb_loader_release(vb_loader *l, const vb_batch *b) {
    /* Releasing anything but the held batch (NULL, or a batch a reset already
     * took back) is a no-op, so callers can release unconditionally; a batch
     * this loader never handed out is a caller's bug (another split's loader) */
    if (!b) return;
    bool ours = false;
    for (int i = 0; i < l->nslots && !ours; i++) ours = b == &l->slots[i].b;
    if (!ours) vb_die_internal("vb_loader_release: a batch another loader handed out");
    if (!l->held || b != &l->held->b) return;
    if (l->nworkers == 0) {
        release_held_locked(l);
        return;
    }
    pthread_mutex_lock(&l->mu);
    release_held_locked(l);
    pthread_cond_broadcast(&l->cv_free);
    pthread_mutex_unlock(&l->mu);
}

void vb_loader_reset(vb_loader *l, int epoch) {
    if (epoch < 0) vb_die_internal("vb_loader_reset: negative epoch %d", epoch);
    if (l->nworkers == 0) {
        release_held_locked(l);
        l->start_epoch = epoch;
        l->next_seq = 0;
        return;
    }
    pthread_mutex_lock(&l->mu);
    release_held_locked(l);
    atomic_fetch_add(&l->gen, 1);
    l->start_epoch = epoch;
    l->next_seq = 0;
    /* finished work of the old generation is dropped; slots being filled are
     * freed by their worker once it notices the new generation */
    for (int i = 0; i < l->nslots; i++)
        if (l->slots[i].state == SLOT_READY) l->slots[i].state = SLOT_FREE;
    pthread_cond_broadcast(&l->cv_free);
    pthread_mutex_unlock(&l->mu);
}

const vb_batch *vb_loader_next(vb_loader *l) {
    double t0 = vb_now();
    int64_t s = l->next_seq;
    if (l->nworkers == 0) {
        release_held_locked(l);
        vb_slot *sl = &l->slots[0];
        int epoch = l->start_epoch + (int)(s / l->steps);
        int index = (int)(s % l->steps);
        fill_batch(l, &l->readers[0], sl, epoch, index, false, 0);
        sl->state = SLOT_HELD;
        l->held = sl;
        l->next_seq = s + 1;
        l->wait_s = vb_now() - t0;
        return &sl->b;
    }
    pthread_mutex_lock(&l->mu);
    if (l->held) {
        release_held_locked(l);
        pthread_cond_broadcast(&l->cv_free);
    }
    vb_slot *sl = &l->slots[s % l->nslots];
    uint64_t g = atomic_load(&l->gen);
    while (!(sl->state == SLOT_READY && sl->seq == s && sl->gen == g)) pthread_cond_wait(&l->cv_ready, &l->mu);
    sl->state = SLOT_HELD;
    l->held = sl;
    l->next_seq = s + 1;
    pthread_mutex_unlock(&l->mu);
    l->wait_s = vb_now() - t0;
    return &sl->b;
}

void vb_loader_set_timeline(vb_loader *l, struct vb_tlrec *t) { atomic_store(&l->timeline, t); }
