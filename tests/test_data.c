/* test_data.c: .npy stats, split scan, sample mapping, the loader (order,
 * shuffle, sharding, limit, workers, reset) and datagen.
 *
 * Fixture files hold value(file, t, c, h, w) = the element's linear index in
 * the [nfiles, T, C, Hf, Wf] stack, so every number in a batch says exactly
 * which file, time step, channel and pixel it came from.
 */
#include "tests/test_util.h"

#include <hdf5.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util/common.h"
#include "core/data/data.h"

/* ---- fixtures ---- */

static float fx_value(int file, int t, int c, int h, int w, int T, int C, int H, int W) {
    return (float)(((((int64_t)file * T + t) * C + c) * H + h) * W + w);
}

/* the fixture's datasets chunked (one chunk a time step) instead of
 * contiguous: the loader reads those through H5Dread, not pread */
static bool g_fx_chunked;
/* ... and each chunk shuffled and gzip-compressed, as ERA5 files often are
 * (h5py's compression="gzip", shuffle=True; h5repack -f SHUF -f GZIP=4) */
static bool g_fx_compressed;

/* Writes dir/<year0+f>.h5 for f < nfiles with the "fields" dataset [T, C, H, W].
 * `file_offset` shifts the file index used in the values. */
static void fx_write_file(const char *path, int file, int T, int C, int H, int W) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    hsize_t dims[4] = {(hsize_t)T, (hsize_t)C, (hsize_t)H, (hsize_t)W};
    hid_t sp = H5Screate_simple(4, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[4] = {1, (hsize_t)C, (hsize_t)H, (hsize_t)W};
    if (g_fx_chunked || g_fx_compressed) assert_true(H5Pset_chunk(dcpl, 4, chunk) >= 0);
    if (g_fx_compressed) {
        assert_true(H5Pset_shuffle(dcpl) >= 0);
        assert_true(H5Pset_deflate(dcpl, 4) >= 0);
    }
    hid_t d = H5Dcreate2(f, "fields", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    assert_true(d >= 0);
    size_t n = (size_t)T * C * H * W;
    float *buf = malloc(n * sizeof(float));
    size_t i = 0;
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++)
            for (int h = 0; h < H; h++)
                for (int w = 0; w < W; w++) buf[i++] = fx_value(file, t, c, h, w, T, C, H, W);
    assert_true(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    free(buf);
    H5Dclose(d);
    H5Sclose(sp);
    H5Fclose(f);
}

static void fx_split(const char *dir, int nfiles, int T, int C, int H, int W) {
    assert_int_equal(vb_mkdir_p(dir), 0);
    for (int f = 0; f < nfiles; f++) {
        char p[VB_PATH_MAX];
        vb_snprintf(p, sizeof p, "%s/%d.h5", dir, 2010 + f);
        fx_write_file(p, f, T, C, H, W);
    }
}

static float fx_mean(int c) { return 1.0f + 0.25f * (float)c; }
static float fx_std(int c) { return 0.5f + 0.75f * (float)c; }

static void fx_stats(const char *dir, int C, char *means, char *stds, size_t n) {
    float m[64], s[64];
    for (int c = 0; c < C; c++) {
        m[c] = fx_mean(c);
        s[c] = fx_std(c);
    }
    int shape[4] = {1, C, 1, 1};
    vb_snprintf(means, n, "%s/means.npy", dir);
    vb_snprintf(stds, n, "%s/stds.npy", dir);
    assert_int_equal(vb_npy_save_f32(means, m, shape, 4), 0);
    assert_int_equal(vb_npy_save_f32(stds, s, shape, 4), 0);
}

/* A standard setup: 2 files, T=8, C=4, 10x12 fields, crop 6x7, Cin 3, Cout 2, dt 2. */
typedef struct fx {
    char root[VB_PATH_MAX], split[VB_PATH_MAX], means[VB_PATH_MAX], stds[VB_PATH_MAX];
    int nfiles, T, C, Hf, Wf;
    vb_loader_opts o;
} fx;

/* nfiles files of [T, C, Hf, Wf], cropped to img_h x img_w */
static void fx_make_dims(fx *x, int nfiles, int T, int C, int Hf, int Wf, int img_h, int img_w) {
    memset(x, 0, sizeof *x);
    tu_tmpdir(x->root, sizeof x->root, "data");
    vb_snprintf(x->split, sizeof x->split, "%s/train", x->root);
    x->nfiles = nfiles;
    x->T = T;
    x->C = C;
    x->Hf = Hf;
    x->Wf = Wf;
    fx_split(x->split, nfiles, T, x->C, x->Hf, x->Wf);
    fx_stats(x->root, x->C, x->means, x->stds, sizeof x->means);
    x->o = (vb_loader_opts){.data_dir = x->split, .means_path = x->means, .stds_path = x->stds, .img_h = img_h,
                            .img_w = img_w, .n_in_channels = 3, .n_out_channels = 2, .dt = 2, .local_batch = 4,
                            .limit_nsamples = 0, .shuffle = false, .seed = 0, .num_workers = 0, .dp_rank = 0,
                            .dp_size = 1};
}

static void fx_make(fx *x, int nfiles, int T) { fx_make_dims(x, nfiles, T, 4, 10, 12, 6, 7); }

/* independent re-statement of the tutorial's mapping */
static void ref_loc(int64_t i, int T, int dt, int *file, int *l) {
    *file = (int)(i / T);
    int k = (int)(i % T) % (T - dt);
    *l = k < dt ? k + dt : k;
}

/* Checks every element of batch b against the fixture formula: normalised,
 * or the file's value itself (bit for bit) when the loader is raw. */
static void check_batch_content(const fx *x, const vb_batch *b) {
    const vb_loader_opts *o = &x->o;
    int H = o->img_h, W = o->img_w;
    for (int k = 0; k < b->B; k++) {
        int file, l;
        ref_loc(b->samples[k], x->T, o->dt, &file, &l);
        for (int pass = 0; pass < 2; pass++) {
            int C = pass ? o->n_out_channels : o->n_in_channels;
            int t = pass ? l + o->dt : l;
            const float *p = (pass ? b->tar : b->inp) + (size_t)k * C * H * W;
            for (int c = 0; c < C; c++)
                for (int h = 0; h < H; h++)
                    for (int w = 0; w < W; w++) {
                        float raw = fx_value(file, t, c, h, w, x->T, x->C, x->Hf, x->Wf);
                        float want = o->raw ? raw : (raw - fx_mean(c)) / fx_std(c);
                        float got = p[((size_t)c * H + h) * W + w];
                        if (o->raw ? memcmp(&got, &want, sizeof got) != 0
                                   : fabsf(got - want) > 1e-6f * fabsf(want) + 1e-6f) {
                            fail_msg("sample %lld %s c=%d h=%d w=%d: got %g want %g", (long long)b->samples[k],
                                     pass ? "tar" : "inp", c, h, w, (double)got, (double)want);
                        }
                    }
        }
    }
}

/* ---- the call must exit 2 with one line naming `want` (and `want2`) ---- */

static void expect_exit2(tu_child_fn fn, void *ctx, const char *want, const char *want2) {
    tu_expect_exit_all(2, (const char *const[]){want, want2, NULL}, fn, ctx);
}

/* ---- sample mapping ---- */

static void test_sample_location(void **state) {
    (void)state;
    /* T=8, dt=2: l % 6, then +2 below 2 */
    const int want8_2[8] = {2, 3, 2, 3, 4, 5, 2, 3};
    /* T=10, dt=1: l % 9, then +1 below 1 */
    const int want10_1[10] = {1, 1, 2, 3, 4, 5, 6, 7, 8, 1};
    /* T=10, dt=3: l % 7, then +3 below 3 */
    const int want10_3[10] = {3, 4, 5, 3, 4, 5, 6, 3, 4, 5};
    for (int f = 0; f < 3; f++) {
        for (int i = 0; i < 8; i++) {
            int file, l;
            vb_sample_location((int64_t)f * 8 + i, 8, 2, &file, &l);
            assert_int_equal(file, f);
            assert_int_equal(l, want8_2[i]);
        }
        for (int i = 0; i < 10; i++) {
            int file, l;
            vb_sample_location((int64_t)f * 10 + i, 10, 1, &file, &l);
            assert_int_equal(file, f);
            assert_int_equal(l, want10_1[i]);
            vb_sample_location((int64_t)f * 10 + i, 10, 3, &file, &l);
            assert_int_equal(l, want10_3[i]);
        }
    }
}

/* ---- loader content, order ---- */

static void test_content_crop_norm_order(void **state) {
    (void)state;
    fx x;
    fx_make(&x, 2, 8);
    vb_loader *l = vb_loader_create(&x.o);
    assert_int_equal(vb_loader_nsamples(l), 16);
    assert_int_equal(vb_loader_steps_per_epoch(l), 4);
    for (int e = 0; e < 2; e++)
        for (int k = 0; k < 4; k++) {
            const vb_batch *b = vb_loader_next(l);
            assert_int_equal(b->B, 4);
            assert_int_equal(b->epoch, e);
            assert_int_equal(b->index, k);
            for (int j = 0; j < 4; j++) assert_int_equal(b->samples[j], k * 4 + j);
            check_batch_content(&x, b);
            double ws = vb_loader_wait_seconds(l);
            assert_true(ws >= 0 && ws < 30);
            vb_loader_release(l, b);
        }
    vb_loader_destroy(l);

    /* B=3 over 16 samples: 5 batches, sample 15 dropped, then epoch 1 wraps to 0 */
    x.o.local_batch = 3;
    l = vb_loader_create(&x.o);
    assert_int_equal(vb_loader_steps_per_epoch(l), 5);
    for (int n = 0; n < 12; n++) {
        const vb_batch *b = vb_loader_next(l);
        int k = n % 5;
        assert_int_equal(b->epoch, n / 5);
        assert_int_equal(b->index, k);
        for (int j = 0; j < 3; j++) assert_int_equal(b->samples[j], k * 3 + j);
        vb_loader_release(l, b);
    }
    vb_loader_destroy(l);
    tu_rm_rf(x.root);
}

/* chunked files take HDF5's read path (contiguous ones are read directly
 * with pread): the same samples, cropped and normalised the same way */
static void test_chunked_files(void **state) {
    (void)state;
    g_fx_chunked = true;
    fx x;
    fx_make(&x, 2, 8);
    g_fx_chunked = false;
    x.o.num_workers = 3;
    vb_loader *l = vb_loader_create(&x.o);
    for (int k = 0; k < 4; k++) {
        const vb_batch *b = vb_loader_next(l);
        check_batch_content(&x, b);
        vb_loader_release(l, b);
    }
    vb_loader_destroy(l);
    tu_rm_rf(x.root);
}

static void collect_epochs(const vb_loader_opts *o, int nbatches, int64_t *out) {
    vb_loader *l = vb_loader_create(o);
    for (int n = 0; n < nbatches; n++) {
        const vb_batch *b = vb_loader_next(l);
        memcpy(out + (size_t)n * b->B, b->samples, sizeof(int64_t) * (size_t)b->B);
        vb_loader_release(l, b);
    }
    vb_loader_destroy(l);
}

static void test_shuffle(void **state) {
    (void)state;
    fx x;
    fx_make(&x, 2, 8);
    x.o.shuffle = true;
    x.o.seed = 7;
    int64_t a[48], b[48], c[48];
    collect_epochs(&x.o, 12, a); /* 3 epochs of 4 batches of 4 */
    for (int e = 0; e < 3; e++) {
        int seen[16] = {0};
        for (int j = 0; j < 16; j++) {
            int64_t s = a[e * 16 + j];
            assert_true(s >= 0 && s < 16);
            seen[s]++;
        }
        for (int s = 0; s < 16; s++) assert_int_equal(seen[s], 1);
    }
    assert_memory_not_equal(a, a + 16, 16 * sizeof(int64_t));
    assert_memory_not_equal(a + 16, a + 32, 16 * sizeof(int64_t));
    int64_t ident[16];
    for (int j = 0; j < 16; j++) ident[j] = j;
    assert_memory_not_equal(a, ident, sizeof ident);
    collect_epochs(&x.o, 12, b);
    assert_memory_equal(a, b, sizeof a);
    x.o.seed = 8;
    collect_epochs(&x.o, 12, c);
    assert_memory_not_equal(a, c, sizeof a);

    /* contents follow the shuffled sample ids */
    x.o.seed = 7;
    vb_loader *l = vb_loader_create(&x.o);
    for (int n = 0; n < 5; n++) {
        const vb_batch *bt = vb_loader_next(l);
        check_batch_content(&x, bt);
        vb_loader_release(l, bt);
    }
    vb_loader_destroy(l);
    tu_rm_rf(x.root);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void test_sharding(void **state) {
    (void)state;
    fx x;
    fx_make(&x, 2, 8);
    for (int shuf = 0; shuf < 2; shuf++) {
        x.o.shuffle = shuf;
        x.o.seed = 3;
        x.o.local_batch = 4;
        x.o.dp_size = 1;
        x.o.dp_rank = 0;
        int64_t g[32], r0[16], r1[16];
        collect_epochs(&x.o, 8, g);
        x.o.local_batch = 2;
        x.o.dp_size = 2;
        x.o.dp_rank = 0;
        vb_loader *l = vb_loader_create(&x.o);
        assert_int_equal(vb_loader_steps_per_epoch(l), 4);
        vb_loader_destroy(l);
        collect_epochs(&x.o, 8, r0);
        x.o.dp_rank = 1;
        collect_epochs(&x.o, 8, r1);
        for (int k = 0; k < 8; k++) {
            int64_t u[4] = {r0[2 * k], r0[2 * k + 1], r1[2 * k], r1[2 * k + 1]}, gg[4];
            memcpy(gg, g + 4 * k, sizeof gg);
            qsort(u, 4, sizeof(int64_t), cmp_i64);
            qsort(gg, 4, sizeof(int64_t), cmp_i64);
            for (int j = 0; j < 3; j++) assert_true(u[j] != u[j + 1]); /* disjoint */
            assert_memory_equal(u, gg, sizeof u);                       /* union == global batch */
        }
        if (!shuf) /* strided: rank 1 takes 1, 3, 5, ... */
            for (int j = 0; j < 8; j++) assert_int_equal(r1[j], 1 + 2 * j);
    }
    /* 15 samples over 2 ranks: floor(15/2) = 7 each, 3 batches of 2 */
    x.o.shuffle = false;
    x.o.limit_nsamples = 15;
    x.o.dp_rank = 1;
    vb_loader *l = vb_loader_create(&x.o);
    assert_int_equal(vb_loader_nsamples(l), 15);
    assert_int_equal(vb_loader_steps_per_epoch(l), 3);
    vb_loader_destroy(l);
    tu_rm_rf(x.root);
}

static void test_limit(void **state) {
    (void)state;
    fx x;
    fx_make(&x, 2, 8);
    x.o.limit_nsamples = 10;
    x.o.shuffle = true;
    x.o.seed = 11;
    vb_loader *l = vb_loader_create(&x.o);
    assert_int_equal(vb_loader_nsamples(l), 10);
    assert_int_equal(vb_loader_steps_per_epoch(l), 2);
    for (int e = 0; e < 3; e++) {
        int seen[10] = {0};
        for (int k = 0; k < 2; k++) {
            const vb_batch *b = vb_loader_next(l);
            assert_int_equal(b->epoch, e);
            for (int j = 0; j < 4; j++) {
                assert_true(b->samples[j] >= 0 && b->samples[j] < 10);
                seen[b->samples[j]]++;
            }
            check_batch_content(&x, b);
            vb_loader_release(l, b);
        }
        for (int s = 0; s < 10; s++) assert_true(seen[s] <= 1);
    }
    vb_loader_destroy(l);
    /* a limit above the total changes nothing */
    x.o.limit_nsamples = 1000;
    l = vb_loader_create(&x.o);
    assert_int_equal(vb_loader_nsamples(l), 16);
    vb_loader_destroy(l);
    tu_rm_rf(x.root);
}

/* ---- workers ---- */

typedef struct {
    int64_t samples[3];
    int epoch, index;
    float inp[3 * 3 * 6 * 7], tar[3 * 2 * 6 * 7];
} snap;

static void snap_batches(const vb_loader_opts *o, int n, snap *out, int reset_at, int reset_epoch) {
    vb_loader *l = vb_loader_create(o);
    for (int i = 0; i < n; i++) {
        if (i == reset_at) vb_loader_reset(l, reset_epoch);
        const vb_batch *b = vb_loader_next(l);
        assert_int_equal(b->B, 3);
        memcpy(out[i].samples, b->samples, sizeof out[i].samples);
        out[i].epoch = b->epoch;
        out[i].index = b->index;
        memcpy(out[i].inp, b->inp, sizeof out[i].inp);
        memcpy(out[i].tar, b->tar, sizeof out[i].tar);
        vb_loader_release(l, b);
    }
    vb_loader_destroy(l);
}

static void assert_snaps_equal(const snap *a, const snap *b, int n) {
    for (int i = 0; i < n; i++) {
        assert_int_equal(a[i].epoch, b[i].epoch);
        assert_int_equal(a[i].index, b[i].index);
        assert_memory_equal(a[i].samples, b[i].samples, sizeof a[i].samples);
        assert_memory_equal(a[i].inp, b[i].inp, sizeof a[i].inp);
        assert_memory_equal(a[i].tar, b[i].tar, sizeof a[i].tar);
    }
}

static void test_workers_match_sync(void **state) {
    (void)state;
    fx x;
    fx_make(&x, 2, 8);
    x.o.local_batch = 3;
    x.o.shuffle = true;
    x.o.seed = 5;
    enum { N = 17 }; /* 5 batches per epoch: crosses 3 epoch boundaries */
    static snap s0[N], s2[N], s3[N];
    snap_batches(&x.o, N, s0, -1, 0);
    x.o.num_workers = 2;
    snap_batches(&x.o, N, s2, -1, 0);
    x.o.num_workers = 3;
    snap_batches(&x.o, N, s3, -1, 0);
    assert_snaps_equal(s0, s2, N);
    assert_snaps_equal(s0, s3, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(s0[i].epoch, i / 5);
        assert_int_equal(s0[i].index, i % 5);
    }
    tu_rm_rf(x.root);
}

/* A counting allocator standing in for a backend's page-locked one. */
typedef struct {
    int allocs, frees;
    size_t bytes;
    void *blocks[64];
    size_t sizes[64];
} count_alloc;

static void *count_alloc_fn(void *arg, size_t bytes) {
    count_alloc *a = arg;
    assert_true(a->allocs < 64);
    void *p = malloc(bytes);
    assert_non_null(p);
    a->blocks[a->allocs] = p;
    a->sizes[a->allocs] = bytes;
    a->allocs++;
    a->bytes += bytes;
    return p;
}

static void count_free_fn(void *arg, void *p) {
    count_alloc *a = arg;
    bool found = false;
    for (int i = 0; i < a->allocs; i++)
        if (a->blocks[i] == p) found = true;
    assert_true(found);
    a->frees++;
    free(p);
}

/* Whether [p, p + bytes) lies in one block the allocator handed out. */
static bool from_alloc(const count_alloc *a, const void *p, size_t bytes) {
    for (int i = 0; i < a->allocs; i++) {
        const char *b = a->blocks[i];
        if ((const char *)p >= b && (const char *)p + bytes <= b + a->sizes[i]) return true;
    }
    return false;
}

/* Batch buffers come from the given allocator (a GPU run's page-locked
 * memory), every one of them goes back to it, and what the batches hold is
 * unchanged; with and without workers. */
static void test_batch_allocator(void **state) {
    (void)state;
    fx x;
    fx_make(&x, 2, 8);
    const int workers[2] = {0, 2};
    for (int wi = 0; wi < 2; wi++) {
        count_alloc a = {0};
        x.o.num_workers = workers[wi];
        x.o.host_alloc = count_alloc_fn;
        x.o.host_free = count_free_fn;
        x.o.host_alloc_arg = &a;
        vb_loader *l = vb_loader_create(&x.o);
        const int slots = workers[wi] > 0 ? 2 * workers[wi] : 1;
        assert_int_equal(a.allocs, 2 * slots); /* inputs and targets of each slot */
        const size_t hw = (size_t)x.o.img_h * x.o.img_w;
        for (int i = 0; i < 5; i++) {
            const vb_batch *b = vb_loader_next(l);
            assert_true(from_alloc(&a, b->inp, sizeof(float) * (size_t)b->B * x.o.n_in_channels * hw));
            assert_true(from_alloc(&a, b->tar, sizeof(float) * (size_t)b->B * x.o.n_out_channels * hw));
            check_batch_content(&x, b);
            vb_loader_release(l, b);
        }
        assert_int_equal(a.allocs, 2 * slots); /* nothing allocated per batch */
        vb_loader_destroy(l);
        assert_int_equal(a.frees, a.allocs);
    }
    tu_rm_rf(x.root);
}

static void test_reset(void **state) {
    (void)state;
    alarm(60); /* a deadlock fails the test instead of hanging ctest */
    fx x;
    fx_make(&x, 2, 8);
    x.o.local_batch = 3;
    x.o.shuffle = true;
    x.o.seed = 9;
    enum { N = 9 };
    static snap ref[N];
    /* reference: a fresh synchronous loader reset to epoch 4 */
    snap_batches(&x.o, N, ref, 0, 4);
    for (int i = 0; i < N; i++) {
        assert_int_equal(ref[i].epoch, 4 + i / 5);
        assert_int_equal(ref[i].index, i % 5);
    }
    for (int nw = 0; nw <= 2; nw += 2) {
        x.o.num_workers = nw;
        vb_loader *l = vb_loader_create(&x.o);
        /* consume a few, reset while holding a batch, reset twice in a row */
        for (int i = 0; i < 3; i++) vb_loader_release(l, vb_loader_next(l));
        const vb_batch *held = vb_loader_next(l);
        vb_loader_reset(l, 1);
        vb_loader_release(l, held); /* stale release after reset is harmless */
        vb_loader_reset(l, 4);
        for (int i = 0; i < N; i++) {
            const vb_batch *b = vb_loader_next(l);
            assert_int_equal(b->epoch, ref[i].epoch);
            assert_int_equal(b->index, ref[i].index);
            assert_memory_equal(b->samples, ref[i].samples, sizeof ref[i].samples);
            assert_memory_equal(b->inp, ref[i].inp, sizeof ref[i].inp);
            vb_loader_release(l, b);
        }
        /* back to epoch 0 */
        vb_loader_reset(l, 0);
        const vb_batch *b = vb_loader_next(l);
        assert_int_equal(b->epoch, 0);
        assert_int_equal(b->index, 0);
        /* destroy while holding a batch and with a full ring */
        usleep(50000);
        vb_loader_destroy(l);
    }
    /* destroy a threaded loader that was never consumed */
    x.o.num_workers = 3;
    vb_loader *l = vb_loader_create(&x.o);
    usleep(20000);
    vb_loader_destroy(l);
    l = vb_loader_create(&x.o); /* and immediately */
    vb_loader_destroy(l);
    alarm(0);
    tu_rm_rf(x.root);
}

/* ---- loader input errors ---- */

typedef struct {
    vb_loader_opts o;
    const char *shrink; /* read_shrink_read: the file to truncate */
} lctx;

static void create_loader(void *p) { vb_loader_create(&((lctx *)p)->o); }
static void scan_dir(void *p) {
    vb_split_info s;
    vb_split_scan(&s, (const char *)p);
}

/* A year of x's shape at p whose "fields" has storage for none of its
 * time steps (written 0), or for the first half (written T/2): contiguous,
 * chunked a step a chunk, or chunked with shuffle and gzip. */
typedef enum { YEAR_CONTIGUOUS, YEAR_CHUNKED, YEAR_COMPRESSED } year_layout;

static void write_part_year(const char *p, const fx *x, year_layout layout, int written) {
    hid_t h = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t d[4] = {(hsize_t)x->T, (hsize_t)x->C, (hsize_t)x->Hf, (hsize_t)x->Wf};
    hsize_t chunk[4] = {1, d[1], d[2], d[3]};
    hid_t sp = H5Screate_simple(4, d, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (layout != YEAR_CONTIGUOUS) assert_true(H5Pset_chunk(dcpl, 4, chunk) >= 0);
    if (layout == YEAR_COMPRESSED) assert_true(H5Pset_shuffle(dcpl) >= 0 && H5Pset_deflate(dcpl, 4) >= 0);
    hid_t ds = H5Dcreate2(h, "fields", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(ds >= 0);
    if (written > 0) {
        hsize_t start[4] = {0, 0, 0, 0}, count[4] = {(hsize_t)written, d[1], d[2], d[3]};
        size_t nval = (size_t)count[0] * d[1] * d[2] * d[3];
        float *buf = calloc(nval, sizeof *buf);
        for (size_t k = 0; k < nval; k++) buf[k] = 1.0f + (float)(k % 7);
        hid_t ms = H5Screate_simple(4, count, NULL);
        assert_true(H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, count, NULL) >= 0);
        assert_true(H5Dwrite(ds, H5T_NATIVE_FLOAT, ms, sp, H5P_DEFAULT, buf) >= 0);
        H5Sclose(ms);
        free(buf);
    }
    H5Pclose(dcpl);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(h);
}

/* gzip + shuffle compressed years, written whole: read as any chunked file
 * (their storage is smaller than their data, which HDF5 calls partly
 * allocated: every chunk is there, and that is what counts); a compressed
 * year with chunks never written is refused as the uncompressed one is */
static void test_compressed_files(void **state) {
    (void)state;
    assert_true(H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0);
    g_fx_compressed = true;
    fx x;
    fx_make(&x, 2, 8);
    g_fx_compressed = false;
    vb_loader *l = vb_loader_create(&x.o);
    for (int k = 0; k < 4; k++) {
        const vb_batch *b = vb_loader_next(l);
        check_batch_content(&x, b);
        vb_loader_release(l, b);
    }
    vb_loader_destroy(l);
    /* time steps 0 .. T/2-1 written, the rest never */
    char p[VB_PATH_MAX];
    vb_snprintf(p, sizeof p, "%s/2011.h5", x.split);
    write_part_year(p, &x, YEAR_COMPRESSED, x.T / 2);
    lctx c = {.o = x.o};
    expect_exit2(create_loader, &c, p, "only partly written");
    tu_rm_rf(x.root);
}

/* reads a batch (file 0 is open, and mapped), empties `shrink`, then reads
 * on: whichever way the loader reads, it must exit 2 naming the file */
static void read_shrink_read(void *p) {
    const lctx *c = p;
    vb_loader *l = vb_loader_create(&c->o);
    vb_loader_release(l, vb_loader_next(l));
    if (truncate(c->shrink, 0) != 0) exit(99);
    for (int k = 0; k < 4 * vb_loader_steps_per_epoch(l); k++) vb_loader_release(l, vb_loader_next(l));
    vb_loader_destroy(l);
}

static void read_epoch(void *p) {
    vb_loader *l = vb_loader_create(&((lctx *)p)->o);
    for (int k = 0; k < vb_loader_steps_per_epoch(l); k++) vb_loader_release(l, vb_loader_next(l));
    vb_loader_destroy(l);
}

/* Planes larger than one read of the direct path (256 KiB): with pread,
 * whole rows are read and normalised in pieces of several rows (here 256
 * rows of 256, then the rest), cropped rows one row at a time; through the
 * mapping, whole planes or row by row. Each must give exactly what HDF5's
 * path (chunked files) gives, and a NaN in a later piece of a plane must
 * still be found and named. The same raw (normalize_on_device): the file's
 * values, and the same errors, also for a finite value that normalisation
 * would push past FLT_MAX, while one just inside the range passes. */
static void test_direct_read_pieces(void **state) {
    (void)state;
    const int crops[2][2] = {{290, 256}, {300, 250}};
    for (int raw = 0; raw < 2; raw++)
    for (int mode = 0; mode < 3; mode++) /* chunked; contiguous mapped; contiguous with pread */
        for (int i = 0; i < 2; i++) {
            g_fx_chunked = mode == 0;
            fx x;
            fx_make_dims(&x, 1, 6, 3, 300, 256, crops[i][0], crops[i][1]);
            g_fx_chunked = false;
            x.o.local_batch = 2;
            x.o.num_workers = 2;
            x.o.pread = mode == 2;
            x.o.raw = raw;
            vb_loader *l = vb_loader_create(&x.o);
            for (int k = 0; k < vb_loader_steps_per_epoch(l); k++) {
                const vb_batch *b = vb_loader_next(l);
                check_batch_content(&x, b);
                vb_loader_release(l, b);
            }
            vb_loader_destroy(l);

            /* a NaN in the second piece of channel 1 of time step 4 (sample
             * 2's target, dt 2) */
            char file[VB_PATH_MAX];
            vb_snprintf(file, sizeof file, "%s/2010.h5", x.split);
            tu_h5_poke_field(file, 4, 1, 280, 3, NAN);
            lctx c = {.o = x.o};
            expect_exit2(read_epoch, &c, file, "fields[4, 1, 280, 3] is nan");
            /* channel 0's std is 0.5: 1e38 normalises to about 2e38, finite;
             * -FLT_MAX to -inf */
            tu_h5_poke_field(file, 4, 1, 280, 3, 1.0f);
            tu_h5_poke_field(file, 3, 0, 7, 9, 1e38f);
            read_epoch(&c);
            tu_h5_poke_field(file, 3, 0, 260, 2, -FLT_MAX);
            expect_exit2(read_epoch, &c, file, "fields[3, 0, 260, 2] is inf");
            tu_rm_rf(x.root);
        }
}

/* A dataset file that shrinks while a run reads it: a short pread, or
 * SIGBUS from a page of the mapping past the new end, on the reading
 * thread or a worker, becomes one line naming the file and exit 2. */
static void test_file_shrinks_while_read(void **state) {
    (void)state;
    for (int mode = 0; mode < 4; mode++) {
        fx x;
        fx_make(&x, 2, 8);
        char file[VB_PATH_MAX];
        vb_snprintf(file, sizeof file, "%s/2010.h5", x.split);
        lctx c = {.o = x.o, .shrink = file};
        c.o.pread = mode & 1;
        c.o.num_workers = mode & 2 ? 2 : 0;
        expect_exit2(read_shrink_read, &c, file, "truncated while in use");
        tu_rm_rf(x.root);
    }
}

static void test_loader_errors(void **state) {
    (void)state;
    fx x;
    fx_make(&x, 2, 8);
    lctx c;
    char p[VB_PATH_MAX], first[VB_PATH_MAX];
    vb_snprintf(first, sizeof first, "%s/2010.h5", x.split);

    /* missing dir */
    vb_snprintf(p, sizeof p, "%s/nope", x.root);
    c.o = x.o;
    c.o.data_dir = p;
    expect_exit2(create_loader, &c, p, "does not exist");
    /* empty dir */
    assert_int_equal(vb_mkdir_p(p), 0);
    expect_exit2(scan_dir, p, p, "no *.h5 files");
    /* channels beyond the file's C */
    c.o = x.o;
    c.o.n_in_channels = 5;
    expect_exit2(create_loader, &c, first, "n_in_channels");
    c.o = x.o;
    c.o.n_out_channels = 5;
    expect_exit2(create_loader, &c, first, "n_out_channels");
    /* crop bigger than the field */
    c.o = x.o;
    c.o.img_w = 13;
    expect_exit2(create_loader, &c, first, "img_size");
    /* T must exceed dt, and the mapping must stay inside the file */
    c.o = x.o;
    c.o.dt = 8;
    expect_exit2(create_loader, &c, first, "dt=8");
    c.o = x.o;
    c.o.dt = 3; /* T=8, dt=3: l % 5 + 3 reaches 7, target 10 */
    expect_exit2(create_loader, &c, first, "dt=3");
    /* fewer samples than a batch */
    c.o = x.o;
    c.o.local_batch = 17;
    expect_exit2(create_loader, &c, x.split, "fewer than one local batch");
    c.o = x.o;
    c.o.dp_size = 2;
    c.o.dp_rank = 1;
    c.o.local_batch = 9;
    expect_exit2(create_loader, &c, x.split, "fewer than one local batch");
    /* a stds file with a zero */
    {
        float s[4] = {1, 2, 0, 4};
        int shape[4] = {1, 4, 1, 1};
        vb_snprintf(p, sizeof p, "%s/zero_stds.npy", x.root);
        assert_int_equal(vb_npy_save_f32(p, s, shape, 4), 0);
        c.o = x.o;
        c.o.stds_path = p;
        expect_exit2(create_loader, &c, p, "channel 2");
    }
    /* stats with the wrong C */
    {
        float s[5] = {1, 2, 3, 4, 5};
        int shape[4] = {1, 5, 1, 1};
        vb_snprintf(p, sizeof p, "%s/five.npy", x.root);
        assert_int_equal(vb_npy_save_f32(p, s, shape, 4), 0);
        c.o = x.o;
        c.o.means_path = p;
        expect_exit2(create_loader, &c, p, "C=4");
    }
    /* missing stats */
    c.o = x.o;
    vb_snprintf(p, sizeof p, "%s/missing.npy", x.root);
    c.o.means_path = p;
    expect_exit2(create_loader, &c, p, NULL);

    /* a third file with a different shape */
    vb_snprintf(p, sizeof p, "%s/2012.h5", x.split);
    fx_write_file(p, 2, 8, 3, 10, 12);
    c.o = x.o;
    expect_exit2(create_loader, &c, p, "shape");
    unlink(p);
    /* a file that is not HDF5 */
    vb_snprintf(p, sizeof p, "%s/2013.h5", x.split);
    FILE *f = fopen(p, "w");
    fputs("this is not an HDF5 file\n", f);
    fclose(f);
    expect_exit2(create_loader, &c, p, "HDF5");
    unlink(p);
    /* an HDF5 file without "fields" */
    {
        hid_t h = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hsize_t d[1] = {4};
        hid_t sp = H5Screate_simple(1, d, NULL);
        hid_t ds = H5Dcreate2(h, "other", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dclose(ds);
        H5Sclose(sp);
        H5Fclose(h);
        expect_exit2(create_loader, &c, p, "fields");
        unlink(p);
    }
    /* a 3-D "fields" */
    {
        hid_t h = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hsize_t d[3] = {8, 4, 10};
        hid_t sp = H5Screate_simple(3, d, NULL);
        hid_t ds = H5Dcreate2(h, "fields", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dclose(ds);
        H5Sclose(sp);
        H5Fclose(h);
        expect_exit2(create_loader, &c, p, "dimensions");
        unlink(p);
    }
    /* "fields" whose storage was never written, or only its first half:
     * the rest would read as fill values (zeros) and be trained on */
    for (int part = 0; part < 3; part++) {
        write_part_year(p, &x, part > 0 ? YEAR_CHUNKED : YEAR_CONTIGUOUS, part == 2 ? x.T / 2 : 0);
        c.o = x.o;
        expect_exit2(create_loader, &c, p, part == 2 ? "only partly written" : "never written");
        unlink(p);
    }
    /* bad option values name the option */
    c.o = x.o;
    c.o.local_batch = 0;
    expect_exit2(create_loader, &c, "batch", NULL);
    c.o = x.o;
    c.o.dt = 0;
    expect_exit2(create_loader, &c, "dt", NULL);
    tu_rm_rf(x.root);
}

static void test_scan(void **state) {
    (void)state;
    fx x;
    fx_make(&x, 3, 5);
    /* files that are not years are ignored; sorting is by name */
    char p[VB_PATH_MAX];
    vb_snprintf(p, sizeof p, "%s/notes.txt", x.split);
    FILE *f = fopen(p, "w");
    fputs("x\n", f);
    fclose(f);
    vb_split_info s;
    vb_split_scan(&s, x.split);
    assert_int_equal(s.nfiles, 3);
    assert_int_equal(s.T, 5);
    assert_int_equal(s.C, 4);
    assert_int_equal(s.Hfull, 10);
    assert_int_equal(s.Wfull, 12);
    for (int i = 0; i < 3; i++) {
        char want[VB_PATH_MAX];
        vb_snprintf(want, sizeof want, "%s/%d.h5", x.split, 2010 + i);
        assert_string_equal(s.files[i], want);
    }
    vb_split_free(&s);
    tu_rm_rf(x.root);
}

/* A year file that is not a readable regular file stops the scan (exit 2
 * naming it and what it is): skipped, the run would train on the other
 * years and exit 0. A symlink to a regular file is a year like any other. */
static void test_scan_not_regular(void **state) {
    (void)state;
    fx x;
    fx_make(&x, 3, 5);
    char p[VB_PATH_MAX], other[VB_PATH_MAX];
    vb_snprintf(p, sizeof p, "%s/2013.h5", x.split);

    assert_int_equal(mkdir(p, 0775), 0);
    expect_exit2(scan_dir, x.split, p, "a directory, not a regular file");
    assert_int_equal(rmdir(p), 0);

    assert_int_equal(mkfifo(p, 0664), 0);
    expect_exit2(scan_dir, x.split, p, "a FIFO (named pipe), not a regular file");
    unlink(p);

    vb_snprintf(other, sizeof other, "%s/gone.h5", x.root);
    assert_int_equal(symlink(other, p), 0);
    expect_exit2(scan_dir, x.split, p, "a dangling symlink");
    unlink(p);

    assert_int_equal(symlink("2013.h5", p), 0); /* points at itself */
    expect_exit2(scan_dir, x.split, p, "a symlink loop");
    unlink(p);

    assert_int_equal(symlink("/dev/null", p), 0);
    expect_exit2(scan_dir, x.split, p, "a symlink to a character device, not a regular file");
    unlink(p);

    vb_snprintf(other, sizeof other, "%s/elsewhere", x.root);
    assert_int_equal(mkdir(other, 0775), 0);
    assert_int_equal(symlink(other, p), 0);
    expect_exit2(scan_dir, x.split, p, "a symlink to a directory, not a regular file");
    unlink(p);

    /* permissions do not stop root: only checked as another user */
    if (geteuid() != 0) {
        fx_write_file(p, 3, 5, 4, 10, 12);
        assert_int_equal(chmod(p, 0), 0);
        expect_exit2(scan_dir, x.split, p, "not readable");
        unlink(p);
    }

    /* a symlink to a year file elsewhere is read through */
    vb_snprintf(other, sizeof other, "%s/elsewhere/2013.h5", x.root);
    fx_write_file(other, 3, 5, 4, 10, 12);
    assert_int_equal(symlink(other, p), 0);
    vb_split_info s;
    vb_split_scan(&s, x.split);
    assert_int_equal(s.nfiles, 4);
    assert_string_equal(s.files[3], p);
    vb_split_free(&s);
    tu_rm_rf(x.root);
}

/* ---- .npy ---- */

/* Writes magic + version + header text (padded to 64 with '\n' at the end
 * unless raw) + data bytes. */
static void write_npy_raw(const char *path, int major, const char *dict, const void *data, size_t nbytes, bool raw) {
    char hdr[512];
    size_t k = strlen(dict);
    memcpy(hdr, dict, k);
    size_t pre = major == 1 ? 10 : 12;
    if (!raw) {
        while ((pre + k + 1) % 64) hdr[k++] = ' ';
        hdr[k++] = '\n';
    }
    unsigned char m[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)major, 0, 0, 0, 0, 0};
    m[8] = (unsigned char)(k & 0xff);
    m[9] = (unsigned char)(k >> 8);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(m, 1, pre, f);
    fwrite(hdr, 1, k, f);
    if (nbytes) fwrite(data, 1, nbytes, f);
    fclose(f);
}

typedef struct {
    const char *path;
    int C;
} nctx;

static void load_npy(void *p) {
    nctx *c = p;
    float out[16];
    vb_npy_load_stats(c->path, c->C, out);
}

static void test_npy(void **state) {
    (void)state;
    char dir[VB_PATH_MAX], p[VB_PATH_MAX];
    tu_tmpdir(dir, sizeof dir, "npy");
    vb_snprintf(p, sizeof p, "%s/stats.npy", dir);
    float v[4] = {1.5f, -2.25f, 1e5f, 3.0e-3f}, out[4];
    double d[4] = {0.1, 250.5, -7.0, 1e-6};

    /* our own writer: [1, C, 1, 1] and [C] */
    int shape4[4] = {1, 4, 1, 1}, shape1[1] = {4};
    assert_int_equal(vb_npy_save_f32(p, v, shape4, 4), 0);
    char *txt = tu_read_file(p);
    assert_memory_equal(txt, "\x93NUMPY\x01\x00", 8);
    assert_non_null(strstr(txt + 10, "'descr': '<f4'"));
    assert_non_null(strstr(txt + 10, "'shape': (1, 4, 1, 1)"));
    free(txt);
    memset(out, 0, sizeof out);
    vb_npy_load_stats(p, 4, out);
    assert_memory_equal(out, v, sizeof v);
    assert_int_equal(vb_npy_save_f32(p, v, shape1, 1), 0);
    txt = tu_read_file(p);
    assert_non_null(strstr(txt + 10, "'shape': (4,)"));
    free(txt);
    memset(out, 0, sizeof out);
    vb_npy_load_stats(p, 4, out);
    assert_memory_equal(out, v, sizeof v);

    /* hand-written float64, version 1.0 and 2.0, numpy's spacing */
    write_npy_raw(p, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 4, 1, 1), }", d, sizeof d, false);
    vb_npy_load_stats(p, 4, out);
    for (int c = 0; c < 4; c++) assert_true(out[c] == (float)d[c]);
    write_npy_raw(p, 2, "{\"shape\":(1,4,1,1),\"fortran_order\":False,\"descr\":\"<f8\"}", d, sizeof d, false);
    memset(out, 0, sizeof out);
    vb_npy_load_stats(p, 4, out);
    for (int c = 0; c < 4; c++) assert_true(out[c] == (float)d[c]);
    write_npy_raw(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", v, sizeof v, false);
    vb_npy_load_stats(p, 4, out);
    assert_memory_equal(out, v, sizeof v);

    /* rejections: each exits 2 naming the file */
    nctx c = {p, 4};
    static const struct {
        const char *dict;
        int major;
        size_t nbytes;
        const char *why;
    } bad[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 5, 1, 1), }", 1, 20, "channels"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 2, 1), }", 1, 32, "shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 1, 16, "shape"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (1, 4, 1, 1), }", 1, 16, "dtype"},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (1, 4, 1, 1), }", 1, 16, "dtype"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (1, 4, 1, 1), }", 1, 16, "fortran"},
        {"{'descr': '<f4', 'fortran_order': False, }", 1, 16, "shape"},
        {"{'descr': '<f4', 'shape': (1, 4, 1, 1), }", 1, 16, "fortran_order"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 1, 1), 'x': 1}", 1, 16, "key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 1, 1), } junk", 1, 16, "after"},
        {"['descr', '<f4']", 1, 16, "dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 1, 1), }", 1, 12, "bytes"}, /* truncated data */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 1, 1), }", 1, 20, "bytes"}, /* trailing data */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 1, 1), }", 3, 16, "version"},
    };
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_npy_raw(p, bad[i].major, bad[i].dict, data, bad[i].nbytes, false);
        expect_exit2(load_npy, &c, p, bad[i].why);
    }
    /* header not ended by a newline */
    write_npy_raw(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 1, 1), }", data, 16, true);
    expect_exit2(load_npy, &c, p, "newline");
    /* bad magic */
    FILE *f = fopen(p, "wb");
    fputs("PK\x03\x04 not a numpy file at all", f);
    fclose(f);
    expect_exit2(load_npy, &c, p, "magic");
    /* version 1.5 */
    write_npy_raw(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 1, 1), }", data, 16, false);
    txt = tu_read_file(p);
    f = fopen(p, "r+b");
    fseek(f, 7, SEEK_SET);
    fputc(5, f);
    fclose(f);
    free(txt);
    expect_exit2(load_npy, &c, p, "version 1.5");
    /* header length beyond the file */
    f = fopen(p, "wb");
    fwrite("\x93NUMPY\x01\x00\xff\x7f{'descr'", 1, 18, f);
    fclose(f);
    expect_exit2(load_npy, &c, p, "truncated");
    /* NaN value */
    float nan4[4] = {1, NAN, 3, 4};
    assert_int_equal(vb_npy_save_f32(p, nan4, shape4, 4), 0);
    expect_exit2(load_npy, &c, p, "channel 1");
    /* missing file */
    vb_snprintf(p, sizeof p, "%s/absent.npy", dir);
    expect_exit2(load_npy, &c, p, NULL);
    tu_rm_rf(dir);
}

/* ---- datagen ---- */

static float *read_fields(const char *path, hsize_t dims[4]) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t d = H5Dopen2(f, "fields", H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t sp = H5Dget_space(d);
    assert_int_equal(H5Sget_simple_extent_ndims(sp), 4);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    hid_t dcpl = H5Dget_create_plist(d);
    assert_int_equal(H5Pget_layout(dcpl), H5D_CONTIGUOUS);
    H5Pclose(dcpl);
    size_t n = (size_t)(dims[0] * dims[1] * dims[2] * dims[3]);
    float *buf = malloc(n * sizeof(float));
    assert_true(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    return buf;
}

static bool files_equal(const char *a, const char *b) {
    char out[256];
    return tu_run(out, sizeof out, "cmp -s '%s' '%s'", a, b) == 0;
}

static void run_datagen(void *p) { vb_datagen((const vb_datagen_opts *)p); }

static void test_datagen(void **state) {
    (void)state;
    char dA[VB_PATH_MAX], dB[VB_PATH_MAX], dC[VB_PATH_MAX], p[VB_PATH_MAX], q[VB_PATH_MAX];
    tu_tmpdir(dA, sizeof dA, "dgA");
    tu_tmpdir(dB, sizeof dB, "dgB");
    tu_tmpdir(dC, sizeof dC, "dgC");
    enum { Y = 2, V = 1, T = 12, C = 5, H = 16, W = 32 };
    vb_datagen_opts o = {.output_dir = dA, .years = Y, .valid_years = V, .samples_per_year = T, .channels = C,
                         .img_h = H, .img_w = W, .seed = 1};
    vb_datagen(&o);
    sleep(1); /* HDF5 timestamps have 1 s resolution: catch any that sneak into the files */
    o.output_dir = dB;
    vb_datagen(&o);
    o.output_dir = dC;
    o.seed = 2;
    vb_datagen(&o);

    const char *rel[] = {"train/2000.h5", "train/2001.h5", "valid/2002.h5", "stats/global_means.npy",
                         "stats/global_stds.npy"};
    for (int i = 0; i < 5; i++) {
        vb_snprintf(p, sizeof p, "%s/%s", dA, rel[i]);
        vb_snprintf(q, sizeof q, "%s/%s", dB, rel[i]);
        assert_true(vb_file_exists(p));
        if (!files_equal(p, q)) fail_msg("datagen is not deterministic: %s differs", rel[i]);
        vb_snprintf(q, sizeof q, "%s/%s", dC, rel[i]);
        assert_false(files_equal(p, q)); /* another seed, other data */
    }

    vb_split_info s;
    vb_snprintf(p, sizeof p, "%s/train", dA);
    vb_split_scan(&s, p);
    assert_int_equal(s.nfiles, Y);
    assert_int_equal(s.T, T);
    assert_int_equal(s.C, C);
    assert_int_equal(s.Hfull, H);
    assert_int_equal(s.Wfull, W);
    vb_split_free(&s);
    vb_snprintf(p, sizeof p, "%s/valid", dA);
    vb_split_scan(&s, p);
    assert_int_equal(s.nfiles, V);
    vb_split_free(&s);

    /* stats: recompute two-pass in double over the train files */
    double sum[C] = {0}, sq[C] = {0};
    float *fld[Y];
    size_t hw = (size_t)H * W;
    for (int y = 0; y < Y; y++) {
        hsize_t dims[4];
        vb_snprintf(p, sizeof p, "%s/train/%d.h5", dA, 2000 + y);
        fld[y] = read_fields(p, dims);
        assert_true(dims[0] == T && dims[1] == C && dims[2] == H && dims[3] == W);
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                for (size_t i = 0; i < hw; i++) sum[c] += fld[y][((size_t)t * C + c) * hw + i];
    }
    double n = (double)Y * T * hw, mean[C], sd[C];
    for (int c = 0; c < C; c++) mean[c] = sum[c] / n;
    for (int y = 0; y < Y; y++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                for (size_t i = 0; i < hw; i++) {
                    double dv = fld[y][((size_t)t * C + c) * hw + i] - mean[c];
                    sq[c] += dv * dv;
                }
    float gm[C], gs[C];
    vb_snprintf(p, sizeof p, "%s/stats/global_means.npy", dA);
    vb_npy_load_stats(p, C, gm);
    vb_snprintf(p, sizeof p, "%s/stats/global_stds.npy", dA);
    vb_npy_load_stats(p, C, gs);
    double lo_mean = 1e300, hi_mean = -1e300;
    for (int c = 0; c < C; c++) {
        sd[c] = sqrt(sq[c] / n);
        assert_true(sd[c] > 0);
        if (fabs(gm[c] - mean[c]) > 1e-6 * fabs(mean[c]) + 1e-4 * sd[c])
            fail_msg("channel %d mean %g vs recomputed %g", c, (double)gm[c], mean[c]);
        /* tight enough to tell ddof 0 from ddof 1 (a 1/(2n) = 4e-5 relative difference here) */
        if (fabs(gs[c] - sd[c]) > 2e-6 * sd[c]) fail_msg("channel %d std %g vs recomputed %g", c, (double)gs[c], sd[c]);
        if (mean[c] < lo_mean) lo_mean = mean[c];
        if (mean[c] > hi_mean) hi_mean = mean[c];
    }
    /* channels live on very different scales, so normalisation matters */
    assert_true(hi_mean - lo_mean > 1000);

    /* weather-like: smooth in space, evolving but predictable in time */
    for (int c = 0; c < C; c++) {
        double dlon = 0, dt1 = 0, dlat = 0;
        long nl = 0, nt = 0, na = 0;
        for (int y = 0; y < Y; y++)
            for (int t = 0; t < T; t++) {
                const float *x = fld[y] + ((size_t)t * C + c) * hw;
                for (int h = 0; h < H; h++)
                    for (int w = 0; w + 1 < W; w++, nl++) {
                        double dd = (x[h * W + w + 1] - x[h * W + w]) / sd[c];
                        dlon += dd * dd;
                    }
                for (int h = 0; h + 1 < H; h++)
                    for (int w = 0; w < W; w++, na++) {
                        double dd = (x[(h + 1) * W + w] - x[h * W + w]) / sd[c];
                        dlat += dd * dd;
                    }
                if (t + 1 < T) {
                    const float *x1 = x + (size_t)C * hw;
                    for (size_t i = 0; i < hw; i++, nt++) {
                        double dd = (x1[i] - x[i]) / sd[c];
                        dt1 += dd * dd;
                    }
                }
            }
        dlon /= nl;
        dlat /= na;
        dt1 /= nt;
        /* neighbour differences well below the variance (1 after scaling) */
        if (!(dlon < 0.5 && dlat < 0.5)) fail_msg("channel %d not smooth: dlon %g dlat %g", c, dlon, dlat);
        /* consecutive steps correlated (corr > 0.5 <=> msd < 1) yet not frozen */
        if (!(dt1 < 1.0 && dt1 > 1e-4)) fail_msg("channel %d time msd %g", c, dt1);
    }
    for (int y = 0; y < Y; y++) free(fld[y]);

    /* the loader reads it and normalises to roughly zero mean, unit scale */
    char tr[VB_PATH_MAX], mp[VB_PATH_MAX], sp[VB_PATH_MAX];
    vb_snprintf(tr, sizeof tr, "%s/train", dA);
    vb_snprintf(mp, sizeof mp, "%s/stats/global_means.npy", dA);
    vb_snprintf(sp, sizeof sp, "%s/stats/global_stds.npy", dA);
    vb_loader_opts lo = {.data_dir = tr, .means_path = mp, .stds_path = sp, .img_h = H, .img_w = W,
                         .n_in_channels = C, .n_out_channels = C, .dt = 1, .local_batch = 4, .shuffle = true,
                         .seed = 1, .num_workers = 1, .dp_size = 1};
    vb_loader *l = vb_loader_create(&lo);
    assert_int_equal(vb_loader_nsamples(l), Y * T);
    double m1 = 0, m2 = 0;
    long cnt = 0;
    for (int k = 0; k < vb_loader_steps_per_epoch(l); k++) {
        const vb_batch *b = vb_loader_next(l);
        for (size_t i = 0; i < (size_t)4 * C * hw; i++, cnt++) {
            m1 += b->inp[i];
            m2 += (double)b->inp[i] * b->inp[i];
        }
        vb_loader_release(l, b);
    }
    vb_loader_destroy(l);
    m1 /= cnt;
    m2 /= cnt;
    assert_true(fabs(m1) < 0.2);
    assert_true(fabs(m2 - 1) < 0.3);

    /* bad options exit 2 naming the option */
    vb_datagen_opts bad = {.output_dir = dA, .years = 0, .valid_years = 1, .samples_per_year = 4, .channels = 2,
                           .img_h = 4, .img_w = 4};
    expect_exit2(run_datagen, &bad, "--years", NULL);
    bad.years = 1;
    bad.samples_per_year = 1;
    expect_exit2(run_datagen, &bad, "--samples_per_year", NULL);
    bad.samples_per_year = 4;
    bad.channels = 0;
    expect_exit2(run_datagen, &bad, "--channels", NULL);
    bad.channels = 2;
    bad.img_w = 0;
    expect_exit2(run_datagen, &bad, "--img_size", NULL);
    bad.img_w = 4;
    bad.valid_years = 0;
    expect_exit2(run_datagen, &bad, "--valid_years", NULL);
    bad.valid_years = 1;
    bad.output_dir = "/proc/vitbench_cannot_write_here";
    expect_exit2(run_datagen, &bad, "/proc/vitbench_cannot_write_here", NULL);

    tu_rm_rf(dA);
    tu_rm_rf(dB);
    tu_rm_rf(dC);
}

int main(void) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_location),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_scan_not_regular),
        cmocka_unit_test(test_content_crop_norm_order),
        cmocka_unit_test(test_chunked_files),
        cmocka_unit_test(test_compressed_files),
        cmocka_unit_test(test_direct_read_pieces),
        cmocka_unit_test(test_file_shrinks_while_read),
        cmocka_unit_test(test_shuffle),
        cmocka_unit_test(test_sharding),
        cmocka_unit_test(test_limit),
        cmocka_unit_test(test_workers_match_sync),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_batch_allocator),
        cmocka_unit_test(test_npy),
        cmocka_unit_test(test_loader_errors),
        cmocka_unit_test(test_datagen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
