/* datagen.c: a synthetic dataset in the tutorial's ERA5 layout.
 *
 * Each channel c at grid point (lat, lon) and global time step tt is
 *     x = offset_c + scale_c * ( clim_c(lat) + season_c(lat, t)
 *                              + sum_k env_ck(lat) * A_ck cos(m_ck lon - w_ck tt + phi_ck)
 *                              + sum_p g_cp(lat) * B_cp cos(n_cp lon + chi_cp) * (1 + 0.5 sin(nu_cp tt + xi_cp))
 *                              + small noise )
 * i.e. a latitude-dependent climatology, a few travelling zonal waves whose
 * phase advances at channel-dependent speeds, a smooth slowly modulated random
 * pattern and a little white noise, with ERA5-like offsets/scales per channel
 * (temperature ~280 K, winds ~0 m/s, geopotential ~5e4, pressure ~1e5) so
 * that normalisation matters. x(t + dt) is a (nearly) deterministic function
 * of x(t): a model can learn to advect the waves.
 *
 * Every term is separable in (lat, lon), so a time step costs (K + P) FMAs per
 * grid point plus one cheap RNG draw for the noise. The noise RNG is seeded
 * per (time step, channel) and channels are independent, so the OpenMP loop
 * over channels produces the same bytes for any thread count.
 */
#include "core/data/data.h"

#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config/cli.h"
#include "core/util/common.h"
#include "bench/datagen.h"
#include "core/results/results.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define DG_K 3 /* travelling waves per channel */
#define DG_P 3 /* smooth random modes per channel */
#define DG_FIRST_YEAR 2000
#define DG_NOISE 0.02

typedef struct dg_channel {
    double offset, scale;
    double season_amp;
    double wave_amp[DG_K], wave_m[DG_K], wave_speed[DG_K], wave_phase[DG_K];
    double mode_amp[DG_P], mode_n[DG_P], mode_phase[DG_P], mode_nu[DG_P], mode_xi[DG_P];
    /* per-latitude profiles [H] */
    double *clim, *season_lat, *env[DG_K], *g[DG_P];
} dg_channel;

static double dg_range(vb_rng *r, double lo, double hi) { return lo + (hi - lo) * vb_rng_uniform(r); }

static void dg_setup_channel(dg_channel *ch, int c, int H, vb_rng *r) {
    /* ERA5-like magnitudes by variable kind */
    static const double kind_off[4] = {275.0, 0.0, 5.4e4, 1.0e5};
    static const double kind_scale[4] = {15.0, 8.0, 2500.0, 800.0};
    int kind = c % 4;
    ch->offset = kind_off[kind] * dg_range(r, 0.95, 1.05) + (kind == 1 ? dg_range(r, -3, 3) : 0.0);
    ch->scale = kind_scale[kind] * dg_range(r, 0.6, 1.4);
    ch->season_amp = dg_range(r, 0.1, 0.4);
    double a1 = (kind == 1 ? dg_range(r, -0.5, 0.5) : dg_range(r, 0.8, 1.5));
    double a2 = dg_range(r, -0.5, 0.5), a3 = dg_range(r, -0.3, 0.3);
    for (int k = 0; k < DG_K; k++) {
        ch->wave_amp[k] = dg_range(r, 0.3, 1.0) / (k + 1);
        ch->wave_m[k] = (double)(1 + (int)(vb_rng_u64(r) % 6)); /* zonal wavenumber 1..6 */
        /* radians per time step, eastward or westward, channel dependent */
        double sp = dg_range(r, 0.05, 0.3);
        ch->wave_speed[k] = (vb_rng_u64(r) & 1) ? sp : -sp;
        ch->wave_phase[k] = dg_range(r, 0, 2 * M_PI);
    }
    double lat0[DG_K], width[DG_K];
    for (int k = 0; k < DG_K; k++) {
        lat0[k] = dg_range(r, 20, 60) * ((vb_rng_u64(r) & 1) ? 1 : -1); /* a mid-latitude storm track */
        width[k] = dg_range(r, 15, 35);
    }
    double mode_lat_n[DG_P], mode_lat_phase[DG_P];
    for (int p = 0; p < DG_P; p++) {
        ch->mode_amp[p] = 0.3 * vb_rng_normal(r);
        ch->mode_n[p] = (double)(vb_rng_u64(r) % 5); /* zonal wavenumber 0..4 */
        ch->mode_phase[p] = dg_range(r, 0, 2 * M_PI);
        ch->mode_nu[p] = dg_range(r, 0.01, 0.08);
        ch->mode_xi[p] = dg_range(r, 0, 2 * M_PI);
        mode_lat_n[p] = (double)(1 + (int)(vb_rng_u64(r) % 3));
        mode_lat_phase[p] = dg_range(r, 0, 2 * M_PI);
    }
    ch->clim = vb_malloc(sizeof(double) * (size_t)H);
    ch->season_lat = vb_malloc(sizeof(double) * (size_t)H);
    for (int k = 0; k < DG_K; k++) ch->env[k] = vb_malloc(sizeof(double) * (size_t)H);
    for (int p = 0; p < DG_P; p++) ch->g[p] = vb_malloc(sizeof(double) * (size_t)H);
    for (int h = 0; h < H; h++) {
        /* rows run north to south like ERA5, cell centres avoid the poles */
        double latd = 90.0 - 180.0 * (h + 0.5) / H;
        double lat = latd * M_PI / 180.0;
        ch->clim[h] = a1 * cos(lat) + a2 * cos(2 * lat) + a3 * sin(lat);
        ch->season_lat[h] = ch->season_amp * sin(lat); /* hemispheres out of phase */
        for (int k = 0; k < DG_K; k++) {
            double z = (latd - lat0[k]) / width[k];
            ch->env[k][h] = exp(-0.5 * z * z);
        }
        for (int p = 0; p < DG_P; p++) ch->g[p][h] = cos(mode_lat_n[p] * lat + mode_lat_phase[p]);
    }
}

static void dg_free_channel(dg_channel *ch) {
    vb_free(ch->clim);
    vb_free(ch->season_lat);
    for (int k = 0; k < DG_K; k++) vb_free(ch->env[k]);
    for (int p = 0; p < DG_P; p++) vb_free(ch->g[p]);
}

/* One channel of one time step into out[H, W]; rows[(K+P) * W] is scratch.
 * tt = global step (years continue each other), t = step within the year. */
static void dg_field(const dg_channel *ch, int H, int W, int64_t tt, int t, int T, uint64_t noise_seed, double *rows,
                     float *out) {
    double season = cos(2 * M_PI * t / T);
    for (int k = 0; k < DG_K; k++) {
        double *row = rows + (size_t)k * W;
        double ph = ch->wave_phase[k] - ch->wave_speed[k] * (double)tt;
        for (int w = 0; w < W; w++) row[w] = ch->wave_amp[k] * cos(ch->wave_m[k] * (2 * M_PI * w / W) + ph);
    }
    for (int p = 0; p < DG_P; p++) {
        double *row = rows + (size_t)(DG_K + p) * W;
        double amp = ch->mode_amp[p] * (1 + 0.5 * sin(ch->mode_nu[p] * (double)tt + ch->mode_xi[p]));
        for (int w = 0; w < W; w++) row[w] = amp * cos(ch->mode_n[p] * (2 * M_PI * w / W) + ch->mode_phase[p]);
    }
    vb_rng r;
    vb_rng_seed(&r, noise_seed);
    for (int h = 0; h < H; h++) {
        double base = ch->clim[h] + season * ch->season_lat[h];
        double e[DG_K], g[DG_P];
        for (int k = 0; k < DG_K; k++) e[k] = ch->env[k][h];
        for (int p = 0; p < DG_P; p++) g[p] = ch->g[p][h];
        float *o = out + (size_t)h * W;
        for (int w = 0; w < W; w++) {
            double x = base;
            for (int k = 0; k < DG_K; k++) x += e[k] * rows[(size_t)k * W + w];
            for (int p = 0; p < DG_P; p++) x += g[p] * rows[(size_t)(DG_K + p) * W + w];
            /* uniform noise with std DG_NOISE: cheaper than Box-Muller and just as good here */
            x += DG_NOISE * 3.4641016151377544 * (vb_rng_uniform(&r) - 0.5);
            o[w] = (float)(ch->offset + ch->scale * x);
        }
    }
}

/* The year file being written lives under a temporary name (".2000.h5.tmp"
 * in the same directory, which no split scan reads) until it is complete;
 * a failure, exit or stop signal removes it, so a split never holds a
 * partial file under a year name that would later train on zeros. */
static char g_dg_tmp[VB_PATH_MAX];
static volatile sig_atomic_t g_dg_tmp_live = 0;

static void dg_remove_tmp(void) {
    if (g_dg_tmp_live) unlink(g_dg_tmp);
    g_dg_tmp_live = 0;
}

/* async-signal-safe: unlink, then die of the same signal (exit 128 + sig) */
static void dg_on_signal(int sig) {
    if (g_dg_tmp_live) unlink(g_dg_tmp);
    g_dg_tmp_live = 0;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void dg_install_cleanup(void) {
    static bool done = false;
    if (done) return;
    done = true;
    atexit(dg_remove_tmp);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = dg_on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

/* A write that failed: full or read-only disk (an environment failure: exit
 * 1, one line with the OS error; HDF5 leaves errno of the failed call). It
 * ends with _exit: HDF5 still holds the file whose writes failed, and its
 * exit-time cleanup of such a file crashes. Nothing else needs cleaning up. */
static void dg_fail(const char *path, const char *what) __attribute__((noreturn));
static void dg_fail(const char *path, const char *what) {
    int err = errno;
    dg_remove_tmp();
    fflush(stdout);
    fprintf(stderr, "vitbench: error: cannot write %s: %s%s%s\n", path, what, err ? ": " : "",
            err ? strerror(err) : "");
    fflush(stderr);
    _exit(VB_EXIT_INTERNAL);
}

static uint64_t dg_mix(uint64_t a, uint64_t b) {
    vb_rng r;
    vb_rng_seed(&r, a ^ (b * 0xD6E8FEB86659FD93ull));
    return vb_rng_u64(&r);
}

/* Writes one year file; accumulates per-channel shifted sums when sum != NULL. */
static void dg_write_year(const char *path, dg_channel *chs, const vb_datagen_opts *o, int year_index, double *sum,
                          double *sumsq) {
    const int T = o->samples_per_year, C = o->channels, H = o->img_h, W = o->img_w;
    hid_t fcpl = VB_H5(H5Pcreate(H5P_FILE_CREATE));
    /* no object timestamps: the same arguments must give the same bytes */
    VB_H5(H5Pset_obj_track_times(fcpl, 0));
    char dir[VB_PATH_MAX], name[VB_PATH_MAX], tmp[VB_PATH_MAX];
    vb_snprintf(dir, sizeof dir, "%s", path);
    vb_snprintf(name, sizeof name, "%s", path);
    vb_snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dirname(dir), basename(name));
    vb_snprintf(g_dg_tmp, sizeof g_dg_tmp, "%s", tmp);
    g_dg_tmp_live = 1;
    errno = 0;
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    if (f < 0) dg_fail(path, "cannot create the HDF5 file");
    hsize_t dims[4] = {(hsize_t)T, (hsize_t)C, (hsize_t)H, (hsize_t)W};
    hid_t fs = VB_H5(H5Screate_simple(4, dims, NULL));
    hid_t dcpl = VB_H5(H5Pcreate(H5P_DATASET_CREATE));
    VB_H5(H5Pset_obj_track_times(dcpl, 0));
    VB_H5(H5Pset_layout(dcpl, H5D_CONTIGUOUS));
    hid_t d = H5Dcreate2(f, "fields", H5T_IEEE_F32LE, fs, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d < 0) dg_fail(path, "cannot create dataset 'fields'");
    hsize_t mdims[3] = {(hsize_t)C, (hsize_t)H, (hsize_t)W};
    hid_t ms = VB_H5(H5Screate_simple(3, mdims, NULL));

    size_t hw = (size_t)H * W;
    float *buf = vb_malloc(sizeof(float) * (size_t)C * hw);
    int nth = 1;
#ifdef _OPENMP
    nth = omp_get_max_threads();
#endif
    double *rows = vb_malloc(sizeof(double) * (size_t)nth * (DG_K + DG_P) * (size_t)W);
    for (int t = 0; t < T; t++) {
        int64_t tt = (int64_t)year_index * T + t;
#pragma omp parallel for schedule(static)
        for (int c = 0; c < C; c++) {
            int me = 0;
#ifdef _OPENMP
            me = omp_get_thread_num();
#endif
            double *myrows = rows + (size_t)me * (DG_K + DG_P) * W;
            float *out = buf + (size_t)c * hw;
            dg_field(&chs[c], H, W, tt, t, T, dg_mix(o->seed, (uint64_t)(tt * C + c) + 1), myrows, out);
            if (sum) {
                /* shifted by the channel offset so the double sums stay exact-ish */
                double s1 = 0, s2 = 0;
                for (size_t i = 0; i < hw; i++) {
                    double v = (double)out[i] - chs[c].offset;
                    s1 += v;
                    s2 += v * v;
                }
                sum[c] += s1;
                sumsq[c] += s2;
            }
        }
        hsize_t start[4] = {(hsize_t)t, 0, 0, 0}, count[4] = {1, (hsize_t)C, (hsize_t)H, (hsize_t)W};
        VB_H5(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL));
        errno = 0;
        if (H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, buf) < 0) dg_fail(path, "writing a time step failed");
    }
    vb_free(rows);
    vb_free(buf);
    VB_H5(H5Sclose(ms));
    errno = 0;
    if (H5Dclose(d) < 0) dg_fail(path, "closing dataset 'fields' failed");
    VB_H5(H5Pclose(dcpl));
    VB_H5(H5Sclose(fs));
    VB_H5(H5Pclose(fcpl));
    errno = 0;
    if (H5Fclose(f) < 0) dg_fail(path, "closing the file failed");
    if (rename(tmp, path) != 0) dg_fail(path, "renaming the finished file into place failed");
    g_dg_tmp_live = 0;
}

static void dg_mkdir(const char *dir) {
    if (vb_mkdir_p(dir) != 0) vb_die_input("%s: cannot create directory: %s", dir, strerror(errno));
}

/* Other year files left in a split dir (an earlier run with more years) would
 * join the split but not the stats: warn about them. */
static void dg_warn_stale(const char *dir, int first, int n) {
    DIR *dp = opendir(dir);
    if (!dp) return;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 3 || strcmp(e->d_name + len - 3, ".h5") != 0) continue;
        int y;
        char tail[8];
        if (sscanf(e->d_name, "%d%7s", &y, tail) == 2 && strcmp(tail, ".h5") == 0 && y >= first && y < first + n)
            continue;
        vb_warn("%s/%s: not written by this datagen run but will be read as part of the split", dir, e->d_name);
    }
    closedir(dp);
}

void vb_datagen(const vb_datagen_opts *o) {
    if (!o->output_dir || !o->output_dir[0]) vb_die_input("datagen: --output_dir is required");
    if (o->years < 1) vb_die_input("datagen: --years must be >= 1 (got %d)", o->years);
    if (o->valid_years < 1) vb_die_input("datagen: --valid_years must be >= 1 (got %d)", o->valid_years);
    if (o->years > 4000 || o->valid_years > 4000)
        vb_die_input("datagen: --years + --valid_years must keep the year names at 4 digits (got %d + %d)", o->years,
                     o->valid_years);
    if (o->samples_per_year < 2) vb_die_input("datagen: --samples_per_year must be >= 2 (got %d)", o->samples_per_year);
    if (o->channels < 1) vb_die_input("datagen: --channels must be >= 1 (got %d)", o->channels);
    if (o->img_h < 1 || o->img_w < 1) vb_die_input("datagen: --img_size must be positive (got %d, %d)", o->img_h, o->img_w);
    if (o->samples_per_year > 1000000 || o->channels > 100000 || o->img_h > 100000 || o->img_w > 100000)
        vb_die_input("datagen: sizes are absurdly large (--samples_per_year %d, --channels %d, --img_size %d,%d)",
                     o->samples_per_year, o->channels, o->img_h, o->img_w);

    char train[VB_PATH_MAX], valid[VB_PATH_MAX], stats[VB_PATH_MAX], path[VB_PATH_MAX];
    vb_snprintf(train, sizeof train, "%s/train", o->output_dir);
    vb_snprintf(valid, sizeof valid, "%s/valid", o->output_dir);
    vb_snprintf(stats, sizeof stats, "%s/stats", o->output_dir);
    dg_mkdir(train);
    dg_mkdir(valid);
    dg_mkdir(stats);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    dg_install_cleanup();

    const int C = o->channels, H = o->img_h;
    vb_rng r;
    vb_rng_seed(&r, o->seed);
    dg_channel *chs = vb_malloc(sizeof(dg_channel) * (size_t)C);
    for (int c = 0; c < C; c++) dg_setup_channel(&chs[c], c, H, &r);

    double *sum = vb_malloc(sizeof(double) * (size_t)C), *sumsq = vb_malloc(sizeof(double) * (size_t)C);
    for (int y = 0; y < o->years + o->valid_years; y++) {
        bool is_train = y < o->years;
        vb_snprintf(path, sizeof path, "%s/%04d.h5", is_train ? train : valid, DG_FIRST_YEAR + y);
        dg_write_year(path, chs, o, y, is_train ? sum : NULL, is_train ? sumsq : NULL);
    }
    dg_warn_stale(train, DG_FIRST_YEAR, o->years);
    dg_warn_stale(valid, DG_FIRST_YEAR + o->years, o->valid_years);

    /* stats over the whole train split, per channel, population std (ddof 0) */
    float *mean = vb_malloc(sizeof(float) * (size_t)C), *std = vb_malloc(sizeof(float) * (size_t)C);
    double n = (double)o->years * o->samples_per_year * o->img_h * o->img_w;
    for (int c = 0; c < C; c++) {
        double m = sum[c] / n;
        double var = sumsq[c] / n - m * m;
        mean[c] = (float)(chs[c].offset + m);
        std[c] = (float)sqrt(var > 0 ? var : 0);
        /* a constant channel would make the loader divide by zero: keep it usable */
        if (!(std[c] > 0)) std[c] = 1.0f;
    }
    int shape[4] = {1, C, 1, 1};
    vb_snprintf(path, sizeof path, "%s/global_means.npy", stats);
    if (vb_npy_save_f32(path, mean, shape, 4) != 0) vb_die_env("cannot write %s: %s", path, strerror(errno));
    vb_snprintf(path, sizeof path, "%s/global_stds.npy", stats);
    if (vb_npy_save_f32(path, std, shape, 4) != 0) vb_die_env("cannot write %s: %s", path, strerror(errno));

    for (int c = 0; c < C; c++) dg_free_channel(&chs[c]);
    vb_free(chs);
    vb_free(sum);
    vb_free(sumsq);
    vb_free(mean);
    vb_free(std);
}

/* ---- the command line ---- */

static void parse_img_size(const char *flag, const char *v, void *ptr) {
    vb_datagen_opts *o = ptr;
    int h = 0, w = 0, used = 0;
    if (sscanf(v, "%d,%d%n", &h, &w, &used) != 2 || v[used] != '\0' || h < 1 || w < 1 || h > 65536 || w > 65536)
        vb_die_input("datagen: %s expects H,W with positive integers, got '%.200s'", flag, v);
    o->img_h = h;
    o->img_w = w;
}

int vb_datagen_main(int argc, char **argv) {
    vb_datagen_opts o = {
        .output_dir = NULL,
        .years = 2,
        .valid_years = 1,
        .samples_per_year = 64,
        .channels = 20,
        .img_h = 96,
        .img_w = 192,
        .seed = 0,
    };
    long long seed = 0;
    const vb_cli_opt opts[] = {
        {.name = "output_dir", .kind = VB_CLI_STRING, .ptr = &o.output_dir, .arg = "DIR",
         .help = "where the dataset goes (required)"},
        {.name = "years", .kind = VB_CLI_INT, .ptr = &o.years, .ilo = 1, .ihi = 1000, .arg = "N",
         .help = "train files, one year each (default 2)"},
        {.name = "valid_years", .kind = VB_CLI_INT, .ptr = &o.valid_years, .ilo = 1, .ihi = 1000, .arg = "N",
         .help = "validation files (default 1)"},
        {.name = "samples_per_year", .kind = VB_CLI_INT, .ptr = &o.samples_per_year, .ilo = 2, .ihi = 1 << 20,
         .arg = "T", .help = "time steps per file (default 64)"},
        {.name = "channels", .kind = VB_CLI_INT, .ptr = &o.channels, .ilo = 1, .ihi = 1024, .arg = "C",
         .help = "variables per sample (default 20)"},
        {.name = "img_size", .kind = VB_CLI_FUNC, .ptr = &o, .fn = parse_img_size, .arg = "H,W",
         .help = "grid of every field (default 96,192)"},
        {.name = "seed", .kind = VB_CLI_LONG, .ptr = &seed, .ilo = 0, .ihi = LONG_MAX, .arg = "S",
         .help = "generator seed (default 0)"},
    };
    const vb_cli cli = {
        .cmd = "datagen",
        .usage = "vitbench datagen --output_dir DIR [--years N] [--valid_years N] [--samples_per_year T]\n"
                 "                        [--channels C] [--img_size H,W] [--seed S]",
        .about = "Writes a synthetic ERA5-like dataset in the tutorial's layout: DIR/train/<year>.h5,\n"
                 "DIR/valid/<year>.h5 and DIR/stats/global_means.npy, global_stds.npy (over the train split).",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
    };
    vb_cli_parse(&cli, argc, argv);
    if (!o.output_dir) vb_die_input("datagen: missing required flag --output_dir");
    o.seed = (uint64_t)seed;
    vb_datagen(&o);
    vb_log("vitbench: wrote dataset %s (train %d x %d samples, valid %d x %d, %d channels, %dx%d)", o.output_dir,
           o.years, o.samples_per_year, o.valid_years, o.samples_per_year, o.channels, o.img_h, o.img_w);
    return 0;
}
