/* checkpoint.c: HDF5 checkpoints laid out like the PyTorch state_dict.
 *
 *   /<state_dict key>      float32 dataset with the tensor's PyTorch shape
 *   /optimizer/step        int64 scalar: Adam updates done
 *   /optimizer/exp_avg     float32 [nparams], same layout as the parameter buffer
 *   /optimizer/exp_avg_sq  float32 [nparams]
 *   root attributes        img_size [2], patch_size, embed_dim, depth, num_heads,
 *                          n_in_channels, n_out_channels (information only)
 *
 * Files come from users, so loading pre-checks every object and reports the
 * first problem as one line naming the file and dataset (exit 2); HDF5's own
 * error stack printing is off while we work.
 *
 * Tensor parallelism: the file is the same whatever the layout. Saving
 * all-gathers the tp shards and tp rank 0 writes full tensors (and the Adam
 * moments in the single-rank buffer layout, via vit_tensor.full_offset);
 * loading reads each rank's slice with an HDF5 hyperslab. So a tp 2 run can
 * resume from a single-rank checkpoint and vice versa.
 */
#include "core/model/checkpoint.h"

#include <hdf5.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm/comm.h"
#include "core/util/common.h"
#include "core/util/fileio.h"

#define OPT_GROUP "optimizer"
#define FP8_GROUP "fp8"

/* Silences HDF5's error-stack printing for the duration of a save or load and
 * restores whatever the process had before. */
typedef struct { H5E_auto2_t func; void *data; } h5_quiet;

static h5_quiet h5_quiet_begin(void) {
    h5_quiet q;
    VB_H5(H5Eget_auto2(H5E_DEFAULT, &q.func, &q.data));
    VB_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL));
    return q;
}

static void h5_quiet_end(h5_quiet q) { VB_H5(H5Eset_auto2(H5E_DEFAULT, q.func, q.data)); }

/* ---------------------------------------------------------------------------
 * save */

/* The file is built in memory (HDF5's core driver, no backing store) and
 * written to disk by vb_atomic_write: every disk error then comes back as a
 * plain errno from our own write, the temporary is always removed, and HDF5
 * never holds a file whose writes failed (which leaves the library half torn
 * down and crashes its exit-time cleanup). An in-memory HDF5 call failing
 * is a bug or out of memory, not bad input. */
static void ck_h5(herr_t rc, const char *path, const char *what) {
    if (rc < 0) vb_die_internal("checkpoint %s: building it in memory failed at %s", path, what);
}

static void write_float_dataset(const char *path, hid_t loc, const char *name, int ndim, const hsize_t *dims,
                                const float *data) {
    hid_t space = VB_H5(H5Screate_simple(ndim, dims, NULL));
    hid_t ds = H5Dcreate2(loc, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_h5(ds, path, name);
    ck_h5(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), path, name);
    ck_h5(H5Dclose(ds), path, name);
    VB_H5(H5Sclose(space));
}

static void write_int_attr(const char *path, hid_t loc, const char *name, int n, const int *values) {
    hsize_t dims[1] = {(hsize_t)n};
    hid_t space = n == 1 ? VB_H5(H5Screate(H5S_SCALAR)) : VB_H5(H5Screate_simple(1, dims, NULL));
    hid_t attr = H5Acreate2(loc, name, H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT);
    ck_h5(attr, path, name);
    ck_h5(H5Awrite(attr, H5T_NATIVE_INT, values), path, name);
    ck_h5(H5Aclose(attr), path, name);
    VB_H5(H5Sclose(space));
}

typedef struct {
    const void *bytes;
    size_t n;
} file_image;

static void write_image(FILE *f, void *ctx) {
    const file_image *im = ctx;
    /* a short write sets the stream's error flag, which vb_atomic_write checks */
    if (im->n) (void)fwrite(im->bytes, 1, im->n, f);
}

/* The single-rank (state_dict layout) host copy of a parameter-shaped
 * buffer `buf` (params or an Adam moment: this rank's shards, backend
 * memory). Collective over tp: every tp rank's shards are all-gathered and tp
 * rank 0 assembles the full tensors. Returns nparams_full floats on tp rank 0,
 * NULL on the others. */
static float *gather_full(const vit_model *m, const float *buf, vb_ctx *ctx) {
    const size_t n = m->nparams;
    const int tp = m->par.tp_size;
    float *all = vb_malloc(n * sizeof(float) * (size_t)tp);
    ctx->ops->memcpy_d2h(ctx, all, buf, n * sizeof(float));
    ctx->ops->synchronize(ctx); /* the copy has landed before the host reads it */
    if (tp > 1) {
        /* heads % tp == 0, so every tp rank holds shards of the same sizes */
        if (n > (size_t)INT_MAX) vb_die_internal("checkpoint save: %zu params exceed MPI's int count", n);
        int *counts = vb_malloc(sizeof(int) * (size_t)tp);
        for (int r = 0; r < tp; r++) counts[r] = (int)n;
        /* in place: our shards already sit at slot tp_rank once moved there */
        float *mine = all + n * (size_t)m->par.tp_rank;
        if (mine != all) memcpy(mine, all, n * sizeof(float));
        vb_allgatherv_f32(m->par.tp, mine, all, counts);
        vb_free(counts);
    }
    if (m->par.tp_rank != 0) {
        vb_free(all);
        return NULL;
    }
    float *full = vb_malloc(m->nparams_full * sizeof(float));
    for (int i = 0; i < m->ntensors; i++) {
        const vit_tensor *t = &m->tensors[i];
        /* replicated tensors are the same on every tp rank: take rank 0's */
        const int from = t->shard_dim < 0 ? 1 : tp;
        for (int r = 0; r < from; r++)
            vit_shard_insert(t, r * t->shard_len, all + n * (size_t)r + t->offset, full + t->full_offset);
    }
    vb_free(all);
    return full;
}

static void write_int64_scalar(const char *path, hid_t loc, const char *name, const char *label, int64_t v) {
    hid_t scalar = VB_H5(H5Screate(H5S_SCALAR));
    hid_t ds = H5Dcreate2(loc, name, H5T_STD_I64LE, scalar, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_h5(ds, path, label);
    ck_h5(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v), path, label);
    ck_h5(H5Dclose(ds), path, label);
    VB_H5(H5Sclose(scalar));
}

/* amp_mode fp8's delayed-scaling state (as TE keeps it in a module's extra
 * state): every tensor's scale, the amax history and the updates done, so
 * a resumed run quantises with the scales it stopped with, not 1. Every
 * rank holds the same state (the amaxes are reduced over all of them). */
static void write_fp8_state(const char *path, hid_t file, const vit_fp8 *f) {
    const size_t len = (size_t)f->recipe.amax_history_len, nt = (size_t)f->ntensors;
    float *scale = vb_malloc(nt * sizeof(float)), *hist = vb_malloc(len * nt * sizeof(float));
    f->ops->memcpy_d2h(f->ctx, scale, f->scale, nt * sizeof(float));
    f->ops->memcpy_d2h(f->ctx, hist, f->history, len * nt * sizeof(float));
    f->ops->synchronize(f->ctx);
    hid_t grp = H5Gcreate2(file, FP8_GROUP, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_h5(grp, path, FP8_GROUP);
    const hsize_t dn[1] = {nt}, dh[2] = {len, nt};
    write_float_dataset(path, grp, "scale", 1, dn, scale);
    write_float_dataset(path, grp, "amax_history", 2, dh, hist);
    write_int64_scalar(path, grp, "steps", FP8_GROUP "/steps", (int64_t)f->steps);
    ck_h5(H5Gclose(grp), path, FP8_GROUP);
    vb_free(scale);
    vb_free(hist);
}

static void checkpoint_save(const char *path, const vit_model *m, const vb_adam *opt, int interrupted_step) {
    if (opt && opt->n != m->nparams)
        vb_die_internal("checkpoint save: optimizer has %zu values, model %zu params", opt->n, m->nparams);
    if (m->par.tp_size > 1 && !m->par.tp)
        vb_die_internal("checkpoint save: tensor_parallel %d but no tp communicator", m->par.tp_size);

    /* every collective first: a failing write on tp rank 0 then leaves no
     * other rank waiting in one */
    float *host = gather_full(m, m->params, m->ctx);
    float *exp_avg = opt ? gather_full(m, opt->m, opt->ctx) : NULL;
    float *exp_avg_sq = opt ? gather_full(m, opt->v, opt->ctx) : NULL;
    if (m->par.tp_rank != 0) return;

    h5_quiet q = h5_quiet_begin();
    hid_t fapl = VB_H5(H5Pcreate(H5P_FILE_ACCESS));
    const size_t floats = m->nparams_full * (opt ? 3 : 1);
    VB_H5(H5Pset_fapl_core(fapl, floats * sizeof(float) + (1u << 20), 0)); /* memory only */
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    ck_h5(file, path, "creating the file");
    VB_H5(H5Pclose(fapl));

    for (int i = 0; i < m->ntensors; i++) {
        const vit_tensor *t = &m->tensors[i];
        hsize_t dims[VIT_MAX_NDIM];
        for (int k = 0; k < t->ndim; k++) dims[k] = (hsize_t)t->full_shape[k];
        write_float_dataset(path, file, t->name, t->ndim, dims, host + t->full_offset);
    }

    const vit_dims *d = &m->d;
    const int img[2] = {d->img_h, d->img_w};
    write_int_attr(path, file, "img_size", 2, img);
    write_int_attr(path, file, "patch_size", 1, &d->patch);
    write_int_attr(path, file, "embed_dim", 1, &d->dim);
    write_int_attr(path, file, "depth", 1, &d->depth);
    write_int_attr(path, file, "num_heads", 1, &d->heads);
    write_int_attr(path, file, "n_in_channels", 1, &d->cin);
    write_int_attr(path, file, "n_out_channels", 1, &d->cout);
    if (interrupted_step >= 0) {
        const int one = 1;
        write_int_attr(path, file, "interrupted", 1, &one);
        write_int_attr(path, file, "step", 1, &interrupted_step);
    }

    if (opt) {
        hid_t grp = H5Gcreate2(file, OPT_GROUP, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        ck_h5(grp, path, OPT_GROUP);
        /* updates applied: loss-scaler skips excluded */
        write_int64_scalar(path, grp, "step", OPT_GROUP "/step", vb_adam_steps_taken(opt));
        const hsize_t n[1] = {(hsize_t)m->nparams_full};
        write_float_dataset(path, grp, "exp_avg", 1, n, exp_avg);
        write_float_dataset(path, grp, "exp_avg_sq", 1, n, exp_avg_sq);
        ck_h5(H5Gclose(grp), path, OPT_GROUP);
    }
    if (m->fp8) write_fp8_state(path, file, m->fp8);
    /* the host copies are in the image now: free them before copying it out */
    vb_free(host);
    vb_free(exp_avg);
    vb_free(exp_avg_sq);
    ck_h5(H5Fflush(file, H5F_SCOPE_GLOBAL), path, "flushing");
    ssize_t len = H5Fget_file_image(file, NULL, 0);
    ck_h5(len < 0 ? -1 : 0, path, "sizing the file image");
    void *bytes = vb_malloc_check((size_t)len > 0 ? (size_t)len : 1);
    ck_h5(H5Fget_file_image(file, bytes, (size_t)len) == len ? 0 : -1, path, "copying the file image");
    ck_h5(H5Fclose(file), path, "closing the file");
    h5_quiet_end(q);

    /* tmp + fsync + rename: the old checkpoint stays whole until the new
     * one is; a failed write (full or read-only disk) removes the temporary
     * and is an environment failure: one line, exit 1 */
    file_image im = {bytes, (size_t)len};
    if (vb_atomic_write(path, write_image, &im) != 0) {
        int err = errno;
        free(bytes);
        vb_die_env("cannot write checkpoint %s: %s", path, strerror(err));
    }
    free(bytes);
}

void vb_checkpoint_save(const char *path, const vit_model *m, const vb_adam *opt) { checkpoint_save(path, m, opt, -1); }

void vb_checkpoint_save_interrupted(const char *path, const vit_model *m, const vb_adam *opt, int step) {
    checkpoint_save(path, m, opt, step < 0 ? 0 : step);
}

/* ---------------------------------------------------------------------------
 * load */

static void format_shape(char *buf, size_t n, int ndim, const hsize_t *dims) {
    size_t used = 0;
    used += (size_t)snprintf(buf + used, n - used, "[");
    for (int k = 0; k < ndim && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, k ? ", %llu" : "%llu", (unsigned long long)dims[k]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

/* Opens dataset `name` under `loc` and checks it is floating point with
 * exactly the expected shape; exits 2 naming the file and dataset otherwise.
 * `label` is the name as the user sees it ("optimizer/exp_avg"). */
static hid_t open_checked(const char *path, hid_t loc, const char *name, const char *label, int ndim,
                          const hsize_t *want, bool want_float) {
    if (H5Lexists(loc, name, H5P_DEFAULT) <= 0) vb_die_input("%s: dataset '%s' missing", path, label);
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    if (ds < 0) vb_die_input("%s: '%s' is not a dataset", path, label);
    hid_t type = VB_H5(H5Dget_type(ds));
    H5T_class_t cls = H5Tget_class(type);
    VB_H5(H5Tclose(type));
    if (want_float ? cls != H5T_FLOAT : (cls != H5T_INTEGER && cls != H5T_FLOAT))
        vb_die_input("%s: dataset '%s' is not %s", path, label, want_float ? "floating point" : "numeric");
    hid_t space = VB_H5(H5Dget_space(ds));
    int got_ndim = VB_H5(H5Sget_simple_extent_ndims(space));
    hsize_t got[H5S_MAX_RANK];
    if (got_ndim > H5S_MAX_RANK) got_ndim = H5S_MAX_RANK;
    VB_H5(H5Sget_simple_extent_dims(space, got, NULL));
    VB_H5(H5Sclose(space));
    bool same = got_ndim == ndim;
    for (int k = 0; same && k < ndim; k++) same = got[k] == want[k];
    if (!same) {
        char gs[256], ws[256];
        format_shape(gs, sizeof gs, got_ndim, got);
        format_shape(ws, sizeof ws, ndim, want);
        vb_die_input("%s: dataset '%s' has shape %s, expected %s", path, label, gs, ws);
    }
    return ds;
}

/* Reads this rank's shard of tensor t from its state_dict-shaped dataset
 * (the whole tensor when replicated) into dst [t->numel]; closes ds. */
static void read_shard(const char *path, hid_t ds, const vit_tensor *t, float *dst) {
    hid_t mem = H5S_ALL, file = H5S_ALL;
    if (t->shard_dim >= 0) {
        hsize_t start[VIT_MAX_NDIM], count[VIT_MAX_NDIM];
        for (int k = 0; k < t->ndim; k++) start[k] = 0, count[k] = (hsize_t)t->shape[k];
        start[t->shard_dim] = (hsize_t)t->shard_offset;
        file = VB_H5(H5Dget_space(ds));
        VB_H5(H5Sselect_hyperslab(file, H5S_SELECT_SET, start, NULL, count, NULL));
        mem = VB_H5(H5Screate_simple(t->ndim, count, NULL));
    }
    if (H5Dread(ds, H5T_NATIVE_FLOAT, mem, file, H5P_DEFAULT, dst) < 0)
        vb_die_input("%s: cannot read dataset '%s'", path, t->name);
    if (t->shard_dim >= 0) {
        VB_H5(H5Sclose(mem));
        VB_H5(H5Sclose(file));
    }
    VB_H5(H5Dclose(ds));
}

/* Reads this rank's shards of every tensor from a flat [nparams_full] dataset
 * in the single-rank buffer layout (an Adam moment) into dst [nparams]. A
 * shard of a tensor seen as [outer, full_d, inner] is `outer` runs of
 * shard_len*inner floats, full_d*inner apart: one strided 1-D hyperslab. */
static void read_flat_shards(const char *path, hid_t ds, const char *label, const vit_model *m, float *dst) {
    hid_t file = VB_H5(H5Dget_space(ds));
    for (int i = 0; i < m->ntensors; i++) {
        const vit_tensor *t = &m->tensors[i];
        hsize_t start = t->full_offset, count = 1, block = t->full_numel, stride;
        if (t->shard_dim >= 0) {
            hsize_t outer = 1, inner = 1;
            for (int k = 0; k < t->shard_dim; k++) outer *= (hsize_t)t->full_shape[k];
            for (int k = t->shard_dim + 1; k < t->ndim; k++) inner *= (hsize_t)t->full_shape[k];
            start += (hsize_t)t->shard_offset * inner;
            count = outer;
            block = (hsize_t)t->shard_len * inner;
            stride = (hsize_t)t->full_shape[t->shard_dim] * inner;
        } else {
            stride = block; /* one block: any stride >= block */
        }
        VB_H5(H5Sselect_hyperslab(file, H5S_SELECT_SET, &start, &stride, &count, &block));
        const hsize_t n = t->numel;
        hid_t mem = VB_H5(H5Screate_simple(1, &n, NULL));
        if (H5Dread(ds, H5T_NATIVE_FLOAT, mem, file, H5P_DEFAULT, dst + t->offset) < 0)
            vb_die_input("%s: cannot read dataset '%s'", path, label);
        VB_H5(H5Sclose(mem));
    }
    VB_H5(H5Sclose(file));
    VB_H5(H5Dclose(ds));
}

/* A NaN/Inf weight or moment would make every loss NaN from step 1: the
 * file is bad input, named with its dataset and the first bad element. */
static void require_finite(const char *path, const char *label, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            vb_die_input("%s: dataset '%s' holds %s at element %zu (of this rank's shard): a checkpoint must be finite",
                         path, label, isnan(x[i]) ? "nan" : "inf", i);
}

/* A state_dict from a different architecture (e.g. a deeper model) would
 * otherwise load "successfully" into the first blocks; torch's strict
 * load_state_dict refuses that, and so do we. */
static void reject_unexpected(const char *path, hid_t file, const vit_model *m) {
    H5G_info_t info;
    VB_H5(H5Gget_info(file, &info));
    for (hsize_t i = 0; i < info.nlinks; i++) {
        char name[256];
        ssize_t len = H5Lget_name_by_idx(file, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
        if (len < 0) vb_die_input("%s: cannot list the checkpoint's datasets", path);
        if (strcmp(name, OPT_GROUP) == 0 || strcmp(name, FP8_GROUP) == 0) continue;
        if (vit_find_tensor(m, name) < 0)
            vb_die_input("%s: unexpected dataset '%s' (checkpoint of a different model?)", path, name);
    }
}

/* fp8/scale [ntensors] (finite, > 0), fp8/amax_history [fp8_amax_history_len]
 * [ntensors] (>= 0, +inf allowed: a NaN amax is recorded so), fp8/steps;
 * exits 2 naming the dataset otherwise */
static void read_fp8_state(const char *path, hid_t file, const vit_fp8 *f, float **scale_out, float **hist_out,
                           int64_t *steps_out) {
    const size_t nt = (size_t)f->ntensors, len = (size_t)f->recipe.amax_history_len;
    hid_t grp = H5Gopen2(file, FP8_GROUP, H5P_DEFAULT);
    if (grp < 0) vb_die_input("%s: '%s' is not a group", path, FP8_GROUP);
    const hsize_t dn[1] = {nt}, dh[2] = {len, nt};
    float *scale = vb_malloc(nt * sizeof(float)), *hist = vb_malloc(len * nt * sizeof(float));
    hid_t ds = open_checked(path, grp, "scale", FP8_GROUP "/scale", 1, dn, true);
    if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, scale) < 0)
        vb_die_input("%s: cannot read dataset '%s/scale'", path, FP8_GROUP);
    VB_H5(H5Dclose(ds));
    for (size_t i = 0; i < nt; i++)
        if (!(isfinite(scale[i]) && scale[i] > 0.0f))
            vb_die_input("%s: dataset '%s/scale' holds %g at element %zu: a scale must be finite and > 0", path,
                         FP8_GROUP, (double)scale[i], i);
    /* the history's length is the run's fp8_amax_history_len: another
     * length is refused by the shape check, naming both */
    ds = open_checked(path, grp, "amax_history", FP8_GROUP "/amax_history (fp8_amax_history_len x tensors)", 2, dh,
                      true);
    if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, hist) < 0)
        vb_die_input("%s: cannot read dataset '%s/amax_history'", path, FP8_GROUP);
    VB_H5(H5Dclose(ds));
    for (size_t i = 0; i < len * nt; i++)
        if (isnan(hist[i]) || hist[i] < 0.0f)
            vb_die_input("%s: dataset '%s/amax_history' holds %g at element %zu: an amax is >= 0 (or +inf)", path,
                         FP8_GROUP, (double)hist[i], i);
    ds = open_checked(path, grp, "steps", FP8_GROUP "/steps", 0, NULL, false);
    if (H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, steps_out) < 0)
        vb_die_input("%s: cannot read dataset '%s/steps'", path, FP8_GROUP);
    VB_H5(H5Dclose(ds));
    if (*steps_out < 0) vb_die_input("%s: dataset '%s/steps' is %lld, expected >= 0", path, FP8_GROUP,
                                     (long long)*steps_out);
    VB_H5(H5Gclose(grp));
    *scale_out = scale;
    *hist_out = hist;
}

void vb_checkpoint_load(const char *path, vit_model *m, vb_adam *opt) {
    if (opt && opt->n != m->nparams)
        vb_die_internal("checkpoint load: optimizer has %zu values, model %zu params", opt->n, m->nparams);
    char why[VB_PATH_MAX + 64];
    if (vb_file_problem(path, why, sizeof why)) vb_die_input("%s: cannot load checkpoint: %s", path, why);
    h5_quiet q = h5_quiet_begin();
    if (H5Fis_hdf5(path) <= 0) vb_die_input("%s: not an HDF5 file", path);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) vb_die_input("%s: cannot open checkpoint file", path);

    reject_unexpected(path, file, m);

    /* read everything into host memory first: on any error nothing is half loaded */
    const size_t bytes = m->nparams * sizeof(float);
    float *params = vb_malloc(bytes);
    for (int i = 0; i < m->ntensors; i++) {
        const vit_tensor *t = &m->tensors[i];
        hsize_t dims[VIT_MAX_NDIM];
        for (int k = 0; k < t->ndim; k++) dims[k] = (hsize_t)t->full_shape[k];
        hid_t ds = open_checked(path, file, t->name, t->name, t->ndim, dims, true);
        read_shard(path, ds, t, params + t->offset);
        require_finite(path, t->name, params + t->offset, t->numel);
    }

    /* optimizer state: optional (a PyTorch-written init checkpoint has none) */
    float *exp_avg = NULL, *exp_avg_sq = NULL;
    int64_t step = 0;
    if (opt && H5Lexists(file, OPT_GROUP, H5P_DEFAULT) > 0) {
        hid_t grp = H5Gopen2(file, OPT_GROUP, H5P_DEFAULT);
        if (grp < 0) vb_die_input("%s: '%s' is not a group", path, OPT_GROUP);
        hid_t ds = open_checked(path, grp, "step", OPT_GROUP "/step", 0, NULL, false);
        if (H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &step) < 0)
            vb_die_input("%s: cannot read dataset '%s/step'", path, OPT_GROUP);
        VB_H5(H5Dclose(ds));
        if (step < 0 || step > 2147483647)
            vb_die_input("%s: dataset '%s/step' is %lld, expected 0..2147483647", path, OPT_GROUP,
                         (long long)step);
        const hsize_t n[1] = {(hsize_t)m->nparams_full};
        exp_avg = vb_malloc(bytes);
        exp_avg_sq = vb_malloc(bytes);
        ds = open_checked(path, grp, "exp_avg", OPT_GROUP "/exp_avg", 1, n, true);
        read_flat_shards(path, ds, OPT_GROUP "/exp_avg", m, exp_avg);
        require_finite(path, OPT_GROUP "/exp_avg", exp_avg, m->nparams);
        ds = open_checked(path, grp, "exp_avg_sq", OPT_GROUP "/exp_avg_sq", 1, n, true);
        read_flat_shards(path, ds, OPT_GROUP "/exp_avg_sq", m, exp_avg_sq);
        require_finite(path, OPT_GROUP "/exp_avg_sq", exp_avg_sq, m->nparams);
        VB_H5(H5Gclose(grp));
    }
    /* fp8's scales and amax history: read when the run is fp8 and the file
     * has them (a checkpoint of a run in another precision starts at scale 1) */
    float *fp8_scale = NULL, *fp8_hist = NULL;
    int64_t fp8_steps = 0;
    if (m->fp8 && H5Lexists(file, FP8_GROUP, H5P_DEFAULT) > 0)
        read_fp8_state(path, file, m->fp8, &fp8_scale, &fp8_hist, &fp8_steps);
    VB_H5(H5Fclose(file));
    h5_quiet_end(q);

    if (fp8_scale) {
        const vit_fp8 *f = m->fp8;
        const size_t nt = (size_t)f->ntensors, len = (size_t)f->recipe.amax_history_len;
        f->ops->memcpy_h2d(f->ctx, f->scale, fp8_scale, nt * sizeof(float));
        f->ops->memcpy_h2d(f->ctx, f->history, fp8_hist, len * nt * sizeof(float));
        f->ops->synchronize(f->ctx);
        m->fp8->steps = (long)fp8_steps;
        vb_free(fp8_scale);
        vb_free(fp8_hist);
    }
    m->ops->memcpy_h2d(m->ctx, m->params, params, bytes);
    vit_params_changed(m);
    if (exp_avg) {
        opt->ctx->ops->memcpy_h2d(opt->ctx, opt->m, exp_avg, bytes);
        opt->ctx->ops->memcpy_h2d(opt->ctx, opt->v, exp_avg_sq, bytes);
        opt->step = (int)step;
        opt->ctx->ops->synchronize(opt->ctx);
    }
    /* the copies read the host buffers until they complete */
    m->ops->synchronize(m->ctx);
    vb_free(params);
    vb_free(exp_avg);
    vb_free(exp_avg_sq);
}
