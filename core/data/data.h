/* data.h: the tutorial's ERA5 data layout and a threaded HDF5 loader.
 *
 * A split directory holds *.h5 files (one per year, name ending in a 4-digit
 * year, sorted by name), each with dataset "fields" float32 [T, C, Hfull, Wfull].
 * Stats are NumPy .npy files of shape [1, C, 1, 1] (float32 or float64).
 *
 * Sample i of a split (i in [0, nsamples)):
 *   y = i / T; l = i % T; l = l % (T - dt); if (l < dt) l += dt;
 *   input  = fields[l,      0:Cin,  0:H, 0:W]   of file y
 *   target = fields[l + dt, 0:Cout, 0:H, 0:W]   of file y
 * each channel normalized (x - mean[c]) / std[c].
 * nsamples = nfiles * T, capped by limit_nsamples (0 = no cap).
 *
 * Order: with shuffle a permutation of [0, nsamples) seeded by (seed, epoch);
 * without, identity. Sharding over data-parallel ranks is strided like
 * torch's DistributedSampler: rank r takes order[r], order[r + dp], ... and
 * keeps floor(nsamples / dp) of them; batches of local_batch with drop_last.
 * The stream never ends: after the last full batch of an epoch the next call
 * starts epoch+1 (new permutation). batch->epoch / batch->index tell where.
 *
 * Threads: num_workers == 0 reads in the calling thread (the tutorial's
 * default); otherwise num_workers threads produce whole batches into a bounded
 * ring of 2*num_workers reusable buffers, delivered in order. No allocation
 * after vb_loader_create. The buffers come from opts.host_alloc when given
 * (page-locked memory on a GPU run).
 */
#ifndef VB_DATA_H
#define VB_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- .npy ---- */
/* Loads a float32/float64 .npy of shape [1, C, 1, 1] (or [C]) into out[C]
 * (as float). Exits 2 naming the file if it is missing, malformed or C differs. */
void vb_npy_load_stats(const char *path, int C, float *out);
/* Writes float32 array of shape `shape[ndim]` as .npy (little-endian, C order). Returns 0 on success. */
int vb_npy_save_f32(const char *path, const float *data, const int *shape, int ndim);

/* ---- split metadata ---- */
typedef struct vb_split_info {
    int nfiles;
    char **files;   /* sorted full paths */
    int T, C, Hfull, Wfull;
} vb_split_info;

/* Scans `dir` for *.h5, validates each (dataset "fields", 4-D float, same
 * shape). Exits 2 naming the directory/file on any problem. */
void vb_split_scan(vb_split_info *s, const char *dir);
void vb_split_free(vb_split_info *s);

/* The sample -> (file, time index) mapping above. */
void vb_sample_location(int64_t i, int T, int dt, int *file, int *l);

typedef struct vb_loader_opts {
    const char *data_dir;      /* split dir (train/ or valid/) */
    const char *means_path, *stds_path;
    int img_h, img_w;          /* crop */
    int n_in_channels, n_out_channels;
    int dt;
    int local_batch;
    int64_t limit_nsamples;    /* 0 = none */
    bool shuffle;
    uint64_t seed;
    int num_workers;
    /* contiguous datasets are read through a file mapping, normalised
     * straight from the page cache; true: with pread into the batch first
     * (for file systems where mapping is slow) */
    bool pread;
    /* true: batches hold the file's values, not normalised; the consumer
     * normalises them (normalize_on_device: on the device, after the copy),
     * with vb_loader_means / vb_loader_stds. A value whose normalised form
     * would not be finite is refused all the same, found from each channel's
     * extremes (the normalisation is monotonic), with the same error. */
    bool raw;
    int dp_rank, dp_size;      /* 0, 1 for a single rank */
    /* Where the batch buffers (vb_batch inp / tar) come from; NULL: plain
     * host memory. A GPU run passes its backend's page-locked allocator
     * (ops->alloc_host): host-to-device copies from page-locked memory run at
     * the bus's speed and can be asynchronous, from pageable memory they are
     * staged by the driver at a fraction of it. host_free must be given with
     * host_alloc; both get host_alloc_arg first. */
    void *(*host_alloc)(void *arg, size_t bytes);
    void (*host_free)(void *arg, void *p);
    void *host_alloc_arg;
} vb_loader_opts;

typedef struct vb_batch {
    float *inp;   /* [B, Cin, H, W] host memory (opts.host_alloc's), owned by the loader */
    float *tar;   /* [B, Cout, H, W] */
    int B;
    int epoch;    /* 0-based */
    int index;    /* batch index within the epoch */
    int64_t *samples; /* [B] global sample indices in this batch */
} vb_batch;

typedef struct vb_loader vb_loader;

/* Scans and checks the split and stats (a NaN/Inf mean, or a std that is
 * not a finite normal positive number, exits 2 naming the file and channel);
 * exits 2 naming the file/dir/option
 * if channels or crop exceed the files, the stats do not fit, T is too small
 * for dt (every sample's target step must lie inside its file), or a rank
 * gets fewer samples than one local batch. Workers start prefetching epoch 0. */
vb_loader *vb_loader_create(const vb_loader_opts *o);
/* Worker k records each batch it reads on timeline lane loader<k> while the
 * recorder's window is open (core/prof/timeline.h). NULL stops it. */
struct vb_tlrec;
void vb_loader_set_timeline(vb_loader *l, struct vb_tlrec *t);
void vb_loader_destroy(vb_loader *l);
int64_t vb_loader_nsamples(const vb_loader *l);      /* whole split after limit */
int vb_loader_steps_per_epoch(const vb_loader *l);   /* per rank, drop_last */
/* Restarts the stream at batch 0 of `epoch`. */
void vb_loader_reset(vb_loader *l, int epoch);
/* Next batch (blocks until ready). Valid until vb_loader_release. At most
 * one batch is held by the caller at a time: calling next again (or reset)
 * releases the held one implicitly; releasing a batch that is no longer held
 * (or NULL) is a no-op, one another loader handed out exits 1 (a bug). Any HDF5 read failure exits 2 naming the file, and
 * so does a NaN or Inf in a sample after normalisation (naming the file,
 * the fields[t, c, y, x] element, the sample index and the channel). */
const vb_batch *vb_loader_next(vb_loader *l);
void vb_loader_release(vb_loader *l, const vb_batch *b);
/* The stats the loader normalises with, [C] of the files' channels (inputs
 * use the first n_in_channels, targets the first n_out_channels); they live
 * as long as the loader. */
const float *vb_loader_means(const vb_loader *l);
const float *vb_loader_stds(const vb_loader *l);
/* Seconds the last vb_loader_next call spent blocked on workers or reading
 * (num_workers == 0); the harness writes it as data_wait_s. */
double vb_loader_wait_seconds(const vb_loader *l);

/* ---- datagen ---- */
typedef struct vb_datagen_opts {
    const char *output_dir;
    int years;            /* train files, default 2 */
    int valid_years;      /* default 1 */
    int samples_per_year; /* T, default 64 */
    int channels;         /* default 20 */
    int img_h, img_w;     /* full field, default 96, 192 */
    uint64_t seed;
} vb_datagen_opts;
/* Writes DIR/train/<year>.h5, DIR/valid/<year>.h5, DIR/stats/global_means.npy,
 * DIR/stats/global_stds.npy (stats over the train split). Exits 2 on bad
 * args. Each file is written under a temporary name and renamed when
 * complete: a failed write (full or read-only disk) exits 1 naming the file
 * and the OS error, and a failure, exit or SIGINT/SIGTERM/SIGHUP removes the
 * temporary, so no partial file is ever left under a year name. */
void vb_datagen(const vb_datagen_opts *o);

#endif
