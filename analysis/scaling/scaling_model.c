/* scaling_model.c: `vitbench model` (scaling_model.h): predicted step time, throughput and
 * scaling efficiency of every point of a sweep, or of hypothetical layouts,
 * each with an interval and its sensitivity to every level's bandwidth,
 * beside what the sweep measured.
 *
 *   vitbench model [--commbench FILE|DIR ...] [--machine FILE]
 *                  --run RUN_DIR [--run ...] | --reference FILE
 *                  [--sweep SWEEP_DIR] [--world_sizes 8,16 --layouts all|dp]
 *   vitbench model --published FILE        (scaling_published.c)
 *
 * Inputs and what is taken from each:
 *   commbench.csv   alpha / beta per (collective, group, group size), scaling_fit.c
 *   --machine       the hierarchy's levels, ranks per node, peaks (machine.h):
 *                   prices every collective commbench did not measure at its size
 *   RUN_DIR         a one-rank run: run.json (model dims, local batch, threads,
 *                   cores, amp), iterations.csv (median timed step of
 *                   --trial_type, rank 0; their spread), ops.csv (each op's
 *                   seconds per step); --run again with other local batch
 *                   sizes to interpolate, or with a shard reference
 *                   (bench_step --shard_tp/--shard_cp --reference_dir) whose
 *                   measured ops replace the scaled ones for that tp x cp
 *   --reference     a step time with op shares (scaling_ref.h), instead of --run
 *   SWEEP_DIR       index.csv (completed runs, their mean samples/s) and each
 *                   run's run.json (layout, order, local batch, threads, ranks
 *                   on the node, bucket cap, noddp); sweep.json's kind
 * Outputs (--output_dir, default the sweep directory, else results/model_<time>):
 *   model_fits.csv  collective,group,group_size,alpha_us,beta_GBps,rel_rms,nsizes
 *   model.csv       one row per point (see k_cols, then two sensitivity columns
 *                   per level), model.md the same as Markdown with the inputs,
 *                   assumptions and fits; the table is printed.
 * Measured step = local batch x dp / the run's mean samples/s (index.csv);
 * rel_error = (predicted - measured) / measured step time.
 * Interval: the prediction with every input at the fast end of its
 * uncertainty and at the slow end (the step is monotone in each): the
 * reference's spread, each fit's relative RMS error, each level's stated
 * uncertainty. Sensitivity: the step's relative change when one level's
 * beta is 25% lower / higher, everything else nominal.
 * Efficiency: weak T1 / (tp cp Tp) (T1 / Tp for data parallelism), strong (and
 * tp/cp layouts, fixed global batch) T1 / (p Tp); T1 is the model's own one-rank step at the same local (weak)
 * or global (strong) batch, and for the measured column the sweep's one-rank
 * runs of the same series (noddp).
 */
#include <errno.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/csv.h"
#include "analysis/rundir.h"
#include "analysis/scaling/machine.h"
#include "analysis/markdown.h"
#include "analysis/scaling/scaling_model.h"
#include "analysis/scaling/scaling_price.h"
#include "analysis/scaling/scaling_ref.h"
#include "core/config/cli.h"
#include "core/config/config.h"
#include "core/util/common.h"
#include "core/results/results.h"
#include "core/util/fileio.h"
#include "core/util/outdir.h"
#include "core/comm/groups.h"

#define MAX_INPUTS 16
#define MAX_WORLDS 32

typedef struct {
    const char *commbench[MAX_INPUTS];
    int ncommbench;
    const char *runs[VB_MODEL_MAX_REFS];
    int nruns;
    const char *sweep, *output_dir;
    int worlds[MAX_WORLDS], nworlds;
    int layouts;      /* 0 all, 1 dp */
    int scaling;      /* 0 weak, 1 strong */
    int trial_type;   /* 0 FULL, 1 SYNTHETIC */
    int ddp_mode;     /* vb_ddp_mode */
    int local_batch, global_batch, threads, ranks_per_node, cores;
    double bucket_cap_mb;
    const char *machine, *reference, *reference_machine, *published, *order, *implementation;
} model_opts;

static void add_commbench(const char *flag, const char *value, void *ptr) {
    model_opts *o = ptr;
    if (o->ncommbench >= MAX_INPUTS) vb_die_input("model: %s given more than %d times", flag, MAX_INPUTS);
    o->commbench[o->ncommbench++] = value;
}

static void add_run(const char *flag, const char *value, void *ptr) {
    model_opts *o = ptr;
    if (o->nruns >= VB_MODEL_MAX_REFS) vb_die_input("model: %s given more than %d times", flag, VB_MODEL_MAX_REFS);
    o->runs[o->nruns++] = value;
}

static void parse_worlds(const char *flag, const char *value, void *ptr) {
    model_opts *o = ptr;
    o->nworlds = 0;
    const char *s = value;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 20 || (*end && *end != ',') || o->nworlds >= MAX_WORLDS)
            vb_die_input("model: %s expects up to %d positive integers separated by commas, got '%s'", flag,
                         MAX_WORLDS, value);
        o->worlds[o->nworlds++] = (int)v;
        s = *end ? end + 1 : end;
    }
    if (o->nworlds == 0) vb_die_input("model: %s expects a list of world sizes, got '%s'", flag, value);
}

/* ---- JSON ---- */

static cJSON *read_json(const char *path, const char *flag) {
    const char *why;
    cJSON *j = vb_read_json_object(path, &why);
    if (!j && strcmp(why, "not a JSON object") != 0) vb_die_input("model: %s: %s: cannot read", flag, path);
    if (!j) vb_die_input("model: %s: not valid JSON", path);
    return j;
}

/* a.b.c as a number, or NaN */
static double jnum(const cJSON *j, const char *a, const char *b) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, a);
    if (b) x = cJSON_GetObjectItemCaseSensitive(x, b);
    if (cJSON_IsNumber(x)) return x->valuedouble;
    if (cJSON_IsBool(x)) return cJSON_IsTrue(x) ? 1 : 0;
    return NAN;
}

static int jint_req(const cJSON *j, const char *a, const char *b, const char *path) {
    const double v = jnum(j, a, b);
    if (!isfinite(v) || v != floor(v))
        vb_die_input("model: %s: no integer %s%s%s", path, a, b ? "." : "", b ? b : "");
    return (int)v;
}

static vb_mdims dims_of(const cJSON *j, const char *path) {
    vb_mdims d;
    /* vitbench import's runs: another program's files, which do not name the model */
    const cJSON *im = cJSON_GetObjectItemCaseSensitive(j, "imported");
    if (cJSON_IsObject(im) && !cJSON_GetObjectItemCaseSensitive(j, "config")) {
        const cJSON *prog = cJSON_GetObjectItemCaseSensitive(im, "program");
        vb_die_input("model: %s: an imported run of %s (vitbench import), whose files do not say the model it "
                     "trained (embed_dim, depth, heads, patch, image size): the model cannot price it; predict a "
                     "vitbench run of that config (--run, --sweep) or --world_sizes from a --reference",
                     path, cJSON_IsString(prog) ? prog->valuestring : "another program");
    }
    d.dim = jint_req(j, "config", "embed_dim", path);
    d.depth = jint_req(j, "config", "depth", path);
    d.heads = jint_req(j, "config", "num_heads", path);
    d.patch = jint_req(j, "config", "patch_size", path);
    d.cin = jint_req(j, "config", "n_in_channels", path);
    d.cout = jint_req(j, "config", "n_out_channels", path);
    const cJSON *img = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "config"), "img_size");
    if (cJSON_GetArraySize(img) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(img, 0)) ||
        !cJSON_IsNumber(cJSON_GetArrayItem(img, 1)))
        vb_die_input("model: %s: no config.img_size [H, W]", path);
    d.img_h = cJSON_GetArrayItem(img, 0)->valueint;
    d.img_w = cJSON_GetArrayItem(img, 1)->valueint;
    if (d.dim < 1 || d.depth < 1 || d.heads < 1 || d.patch < 1 || d.img_h < d.patch || d.img_w < d.patch ||
        d.cin < 1 || d.cout < 1)
        vb_die_input("model: %s: config holds an impossible model (embed_dim, depth, num_heads, patch_size, "
                     "img_size)",
                     path);
    return d;
}

static int act_bytes_of(const cJSON *j) {
    const cJSON *amp = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "config"), "amp_mode");
    /* fp8 is emulated on the CPU with float32 activations */
    return cJSON_IsString(amp) && strcmp(amp->valuestring, "bf16") == 0   ? 2
           : cJSON_IsString(amp) && strcmp(amp->valuestring, "fp16") == 0 ? 2
                                                                          : 4;
}

/* The precision its GEMMs ran in: amp's, else TF32 on the CUDA backend with
 * tf32 on, else float32 (which machine peak the reference is measured against). */
static int prec_of_run(const cJSON *j) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "config");
    const cJSON *amp = cJSON_GetObjectItemCaseSensitive(c, "amp_mode");
    if (cJSON_IsString(amp) && strcmp(amp->valuestring, "bf16") == 0) return VB_PREC_BF16;
    if (cJSON_IsString(amp) && strcmp(amp->valuestring, "fp16") == 0) return VB_PREC_FP16;
    const cJSON *be = cJSON_GetObjectItemCaseSensitive(j, "backend");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "tf32")) && cJSON_IsString(be) &&
        strcmp(be->valuestring, "cuda") == 0)
        return VB_PREC_TF32;
    return VB_PREC_FP32;
}

/* A shard reference (bench_step --reference_dir with --shard_tp / --shard_cp):
 * run.json's parallel.shard is true; its tp and cp are the shard's. */
static bool run_shard(const cJSON *j, int *tp, int *cp) {
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(j, "parallel");
    *tp = *cp = 1;
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(par, "shard"))) return false;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(par, "tp"), *c = cJSON_GetObjectItemCaseSensitive(par, "cp");
    *tp = cJSON_IsNumber(t) ? t->valueint : 1;
    *cp = cJSON_IsNumber(c) ? c->valueint : 1;
    return true;
}

/* ---- the one-rank reference ---- */

static const char *const k_types[] = {"FULL", "SYNTHETIC", NULL};

static int cmp_dbl(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int req_col(const vb_csv *t, const char *path, const char *name) {
    int c = vb_csv_col(t, name);
    if (c < 0) vb_die_input("model: %s: no column '%s'", path, name);
    return c;
}

static void read_csv_or_die(const char *dir, const char *name, vb_csv *t, const char *flag) {
    char path[VB_PATH_MAX], err[VB_PATH_MAX + 256];
    vb_dir_file(path, sizeof path, dir, name);
    int rc = vb_dir_read_csv(dir, name, t, err, sizeof err);
    if (rc == -1) vb_die_input("model: %s %s: cannot read %s (%s)", flag, dir, name, err);
    if (rc != 0) vb_die_input("model: %s: malformed CSV (%s)", path, err);
}

static vb_mop *ref_op(vb_mref *r, const char *name, int cap) {
    for (int i = 0; i < r->nops; i++)
        if (strcmp(r->ops[i].name, name) == 0) return &r->ops[i];
    if (r->nops == cap) return NULL;
    vb_mop *o = &r->ops[r->nops++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", name);
    return o;
}

/* Reference k (r->nref) from one run directory: its run.json, median step and ops. */
static void load_ref_run(vb_mref *r, const char *dir, const char *type, int *cap) {
    const int k = r->nref;
    if (!vb_dir_exists(dir)) vb_die_input("model: --run %s: not a directory", dir);
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, dir, VB_RUN_JSON);
    cJSON *j = read_json(path, "--run");
    const vb_mdims d = dims_of(j, path);
    const double ranks = jnum(j, "ranks", NULL);
    if (ranks != 1) vb_die_input("model: --run %s: a one-rank run is needed (ranks %g)", dir, ranks);
    int stp, scp;
    const bool shard = run_shard(j, &stp, &scp);
    const int prec = prec_of_run(j);
    if (shard) type = "SYNTHETIC"; /* bench_step times SYNTHETIC steps only */
    const int batch = jint_req(j, "local_batch_size", NULL, path);
    const int threads = jint_req(j, "fingerprint", "omp_threads", path);
    const int cores = jint_req(j, "fingerprint", "affinity_cores", path);
    const double nr = jnum(j, "threads", "node_ranks");
    const int act = act_bytes_of(j);
    const cJSON *be = cJSON_GetObjectItemCaseSensitive(j, "backend");
    const bool gpu = cJSON_IsString(be) && strcmp(be->valuestring, "cuda") == 0;
    cJSON_Delete(j);
    if (batch < 1 || threads < 1 || cores < 1)
        vb_die_input("model: %s: local_batch_size, fingerprint.omp_threads and affinity_cores must be >= 1", path);
    if (k == 0) {
        r->d = d, r->threads = threads, r->cores = cores, r->act_bytes = act, r->prec = prec;
        r->node_ranks = isfinite(nr) && nr >= 1 ? (int)nr : 1;
        r->shard_tp = stp, r->shard_cp = scp;
        r->gpu = gpu;
        vb_snprintf(r->what, sizeof r->what, "%s", dir);
    } else if (!vb_mdims_equal(&d, &r->d) || threads != r->threads || cores != r->cores || act != r->act_bytes) {
        vb_die_input("model: --run %s: a different model, thread count, core count or amp_mode than the first --run "
                     "of its kind",
                     dir);
    }
    for (int i = 0; i < k; i++)
        if (r->batch[i] == batch) vb_die_input("model: --run %s: a second reference at local batch %d", dir, batch);
    r->batch[k] = batch;

    vb_csv it;
    read_csv_or_die(dir, VB_ITERATIONS_CSV, &it, "--run");
    vb_dir_file(path, sizeof path, dir, VB_ITERATIONS_CSV);
    const int ct = req_col(&it, path, VB_COL_TRIAL_TYPE), cw = req_col(&it, path, VB_COL_WARMUP);
    const int cr = req_col(&it, path, VB_COL_RANK), cs = req_col(&it, path, VB_COL_SECONDS);
    double *steps = vb_malloc_check(sizeof(double) * ((size_t)it.nrows + 1));
    int n = 0;
    for (int i = 0; i < it.nrows; i++) {
        double sec, rk;
        const char *w = vb_csv_get(&it, i, cw);
        if (strcmp(vb_csv_get(&it, i, ct), type) != 0 || strcmp(w, "1") == 0 || strcmp(w, "true") == 0) continue;
        if (!vb_csv_num(&it, i, cr, &rk) || rk != 0) continue;
        if (!vb_csv_num(&it, i, cs, &sec) || !(sec > 0))
            vb_die_input("model: %s: row %d: seconds is not > 0", path, i + 2);
        steps[n++] = sec;
    }
    if (n == 0) vb_die_input("model: %s: no timed %s steps of rank 0", path, type);
    qsort(steps, (size_t)n, sizeof *steps, cmp_dbl);
    r->step_s[k] = n % 2 ? steps[n / 2] : 0.5 * (steps[n / 2 - 1] + steps[n / 2]);
    /* the widest spread among the references stands for all of them */
    const double sp = vb_rel_spread(steps, n);
    if (sp > r->spread) r->spread = sp;
    free(steps);
    vb_csv_free(&it);

    vb_csv ops;
    read_csv_or_die(dir, VB_OPS_CSV, &ops, "--run");
    vb_dir_file(path, sizeof path, dir, VB_OPS_CSV);
    const int on = req_col(&ops, path, VB_COL_NAME), oc = req_col(&ops, path, VB_COL_CATEGORY);
    const int ocl = req_col(&ops, path, VB_COL_CALLS), otot = req_col(&ops, path, VB_COL_TOTAL_S);
    const int ott = req_col(&ops, path, VB_COL_TRIAL_TYPE), ork = vb_csv_col(&ops, VB_COL_RANK);
    int found = 0;
    for (int i = 0; i < ops.nrows; i++) {
        double calls, tot, rk = 0;
        if (strcmp(vb_csv_get(&ops, i, ott), type) != 0 || strcmp(vb_csv_get(&ops, i, oc), "comm") == 0) continue;
        if (ork >= 0 && vb_csv_num(&ops, i, ork, &rk) && rk != 0) continue;
        if (!vb_csv_num(&ops, i, ocl, &calls) || calls < 0 || !vb_csv_num(&ops, i, otot, &tot) || tot < 0)
            vb_die_input("model: %s: row %d: calls or total_s is not a number >= 0", path, i + 2);
        if (r->nops == *cap) {
            *cap = *cap ? 2 * *cap : 64;
            vb_mop *no = vb_realloc_check(r->ops, sizeof *no * (size_t)*cap);
            r->ops = no;
        }
        vb_mop *o = ref_op(r, vb_csv_get(&ops, i, on), *cap);
        o->step_s[k] = tot / n;
        if (o->calls == 0) o->calls = calls / n;
        found++;
    }
    if (found == 0) vb_die_input("model: %s: no %s ops of rank 0", path, type);
    vb_csv_free(&ops);
    r->nref++;
}

/* One reference's batches in ascending order (every op's column with them). */
static void sort_batches(vb_mref *r) {
    for (int a = 1; a < r->nref; a++) /* insertion sort of batch, step and every op's column */
        for (int b = a; b > 0 && r->batch[b - 1] > r->batch[b]; b--) {
            int tb = r->batch[b];
            r->batch[b] = r->batch[b - 1], r->batch[b - 1] = tb;
            double ts = r->step_s[b];
            r->step_s[b] = r->step_s[b - 1], r->step_s[b - 1] = ts;
            for (int i = 0; i < r->nops; i++) {
                double t = r->ops[i].step_s[b];
                r->ops[i].step_s[b] = r->ops[i].step_s[b - 1], r->ops[i].step_s[b - 1] = t;
            }
        }
}

/* The one-rank references (main) and the shard references, one vb_mref per
 * tp x cp shard (its runs at several batches), each sorted by local batch. */
static void load_refs(vb_mref *main_ref, vb_mref **shards, int *nshards, const char *const *dirs, int n,
                      const char *type) {
    memset(main_ref, 0, sizeof *main_ref);
    *shards = vb_calloc_check((size_t)n + 1, sizeof **shards);
    *nshards = 0;
    int cap = 0, scap[VB_MODEL_MAX_REFS] = {0};
    for (int i = 0; i < n; i++) {
        char path[VB_PATH_MAX];
        vb_dir_file(path, sizeof path, dirs[i], VB_RUN_JSON);
        int tp = 1, cp = 1;
        if (vb_dir_exists(dirs[i]) && vb_file_exists(path)) {
            cJSON *j = read_json(path, "--run");
            run_shard(j, &tp, &cp);
            cJSON_Delete(j);
        }
        if (tp == 1 && cp == 1) {
            load_ref_run(main_ref, dirs[i], type, &cap);
            continue;
        }
        int k = 0;
        while (k < *nshards && ((*shards)[k].shard_tp != tp || (*shards)[k].shard_cp != cp)) k++;
        if (k == *nshards) (*nshards)++;
        load_ref_run(&(*shards)[k], dirs[i], type, &scap[k]);
    }
    if (main_ref->nref == 0)
        vb_die_input("model: --run: every run given is a shard reference; one unsharded one-rank run is needed too");
    sort_batches(main_ref);
    for (int k = 0; k < *nshards; k++) {
        vb_mref *sh = &(*shards)[k];
        sort_batches(sh);
        if (!vb_mdims_equal(&sh->d, &main_ref->d) || sh->act_bytes != main_ref->act_bytes)
            vb_die_input("model: --run %s: a shard of another model or amp_mode than the one-rank reference",
                         sh->what);
    }
}

/* ---- points ---- */

typedef struct {
    char name[160];
    vb_mlayout l;
    int ranks;
    double measured_step; /* NaN when not measured */
    double t1_pred, t1_meas;
    double t1_lo, t1_hi;  /* T1 at the interval's corners */
    double eff_lo, eff_hi; /* efficiency with T1 and Tp at opposite ends of the compute's uncertainty */
    vb_mpred pred, lo, hi; /* nominal, fast corner, slow corner */
    double sens[VB_MACHINE_MAX_LEVELS][2]; /* relative step change at beta x0.75, x1.25 per level */
} model_point;

typedef struct {
    model_point *v;
    int n, cap;
} point_list;

static model_point *point_add(point_list *pl) {
    if (pl->n == pl->cap) {
        pl->cap = pl->cap ? 2 * pl->cap : 16;
        model_point *nv = vb_realloc_check(pl->v, sizeof *nv * (size_t)pl->cap);
        pl->v = nv;
    }
    model_point *p = &pl->v[pl->n++];
    memset(p, 0, sizeof *p);
    p->measured_step = p->t1_meas = NAN;
    return p;
}

/* index.csv's completed runs; returns strong (1) or weak (0) from the sweep's kind */
static int load_sweep(const char *dir, const vb_mref *ref, const char *type, point_list *pl, char *kind, size_t kn) {
    if (!vb_dir_exists(dir)) vb_die_input("model: --sweep %s: not a directory", dir);
    vb_csv idx;
    read_csv_or_die(dir, VB_INDEX_CSV, &idx, "--sweep");
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, dir, VB_INDEX_CSV);
    const int cd = req_col(&idx, path, VB_COL_RUN_DIR), cs = req_col(&idx, path, VB_COL_STATUS);
    const int cthr = req_col(&idx, path, strcmp(type, "FULL") == 0 ? VB_COL_FULL_SAMPLES_PER_S : VB_COL_SYNTHETIC_SAMPLES_PER_S);
    bool local_const = true, tp_col = vb_csv_col(&idx, VB_COL_TENSOR_PARALLEL) >= 0;
    int first_local = -1;
    for (int i = 0; i < idx.nrows; i++) {
        if (strcmp(vb_csv_get(&idx, i, cs), "completed") != 0) continue;
        const char *rd = vb_csv_get(&idx, i, cd);
        char rdir[VB_PATH_MAX], jpath[VB_PATH_MAX], why[VB_PATH_MAX + 128];
        if (vb_sweep_run_path(rdir, sizeof rdir, dir, rd, why, sizeof why) != 0)
            vb_die_input("model: %s: record %d: %s", path, i + 2, why);
        vb_dir_file(jpath, sizeof jpath, rdir, VB_RUN_JSON);
        cJSON *j = read_json(jpath, "--sweep");
        vb_mdims d = dims_of(j, jpath);
        if (!vb_mdims_equal(&d, &ref->d))
            vb_die_input("model: %s: a different model (embed_dim, depth, heads, patch, img_size, channels) than "
                         "--run's",
                         jpath);
        model_point *p = point_add(pl);
        const char *b = strrchr(rd, '/');
        snprintf(p->name, sizeof p->name, "%s", b ? b + 1 : rd);
        p->ranks = jint_req(j, "ranks", NULL, jpath);
        p->l.tp = jint_req(j, "parallel", "tp", jpath);
        p->l.cp = jint_req(j, "parallel", "cp", jpath);
        p->l.dp = jint_req(j, "parallel", "dp", jpath);
        p->l.local_batch = jint_req(j, "local_batch_size", NULL, jpath);
        p->l.threads = jint_req(j, "fingerprint", "omp_threads", jpath);
        p->l.cores = jint_req(j, "fingerprint", "affinity_cores", jpath);
        const double nr = jnum(j, "threads", "node_ranks");
        p->l.node_ranks = isfinite(nr) && nr >= 1 ? (int)nr : p->ranks;
        p->l.bucket_cap_mb = jnum(j, "parallel", "bucket_cap_mb");
        if (!(p->l.bucket_cap_mb > 0)) vb_die_input("model: %s: no parallel.bucket_cap_mb", jpath);
        p->l.noddp = jnum(j, "parallel", "noddp") == 1;
        const cJSON *po = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "parallel"),
                                                           "parallel_order");
        if (cJSON_IsString(po)) snprintf(p->l.order, sizeof p->l.order, "%s", po->valuestring);
        cJSON_Delete(j);
        if (first_local < 0) first_local = p->l.local_batch;
        if (p->l.local_batch != first_local) local_const = false;
        double thr;
        if (vb_csv_num(&idx, i, cthr, &thr) && thr > 0) p->measured_step = (double)p->l.local_batch * p->l.dp / thr;
    }
    vb_csv_free(&idx);
    if (pl->n == 0) vb_die_input("model: --sweep %s: index.csv has no completed run", dir);
    /* sweep.json's kind, else what varied (as vitbench report infers it) */
    snprintf(kind, kn, "%s", tp_col ? "layouts" : local_const ? "weak_scaling" : "strong_scaling");
    vb_dir_file(path, sizeof path, dir, VB_SWEEP_JSON);
    if (vb_file_exists(path)) {
        cJSON *j = read_json(path, "--sweep");
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kind");
        if (cJSON_IsString(k) && k->valuestring[0]) snprintf(kind, kn, "%s", k->valuestring);
        cJSON_Delete(j);
    }
    return strcmp(kind, "weak_scaling") == 0 ? 0 : 1;
}

/* every tp x cp x dp of world w the model config takes (dp only with
 * --layouts dp). Ranks per node, threads and cores: the flags, else the
 * machine file (a GPU machine: one rank per GPU and its compute on the GPU,
 * so no CPU factor), else the reference's own. */
static void hypothetical(const model_opts *o, const vb_mref *ref, const vb_machine *mach, point_list *pl) {
    int threads = o->threads ? o->threads : ref->threads;
    int cores = o->cores ? o->cores : ref->cores;
    int rpn = o->ranks_per_node ? o->ranks_per_node : (cores / threads > 0 ? cores / threads : 1);
    if (mach) {
        rpn = o->ranks_per_node ? o->ranks_per_node : mach->ranks_per_node;
        if (mach->gpus_per_node > 0) {
            cores = rpn * threads;
        } else {
            cores = o->cores ? o->cores : mach->cores_per_node;
            threads = o->threads ? o->threads : (cores / rpn > 0 ? cores / rpn : 1);
        }
    }
    for (int k = 0; k < o->nworlds; k++) {
        const int w = o->worlds[k];
        for (int tp = 1; tp <= w; tp++)
            for (int cp = 1; cp <= w / tp; cp++) {
                if (w % (tp * cp) != 0 || (o->layouts == 1 && (tp > 1 || cp > 1))) continue;
                vb_mlayout l = {.tp = tp, .cp = cp, .dp = w / (tp * cp), .threads = threads, .cores = cores,
                                .node_ranks = rpn < w ? rpn : w,
                                .bucket_cap_mb = o->bucket_cap_mb};
                if (o->order) snprintf(l.order, sizeof l.order, "%s", o->order);
                if (o->scaling == 1) {
                    const int gb = o->global_batch ? o->global_batch : ref->batch[0];
                    if (gb % l.dp != 0) continue; /* the trainer refuses an uneven split */
                    l.local_batch = gb / l.dp;
                } else {
                    l.local_batch = o->local_batch ? o->local_batch : ref->batch[0];
                }
                char err[200];
                if (vb_model_check_layout(&ref->d, &l, err, sizeof err) != 0) continue;
                model_point *p = point_add(pl);
                p->l = l;
                p->ranks = w;
                snprintf(p->name, sizeof p->name, "world=%d_tp=%d_cp=%d_dp=%d", w, tp, cp, l.dp);
            }
    }
}

/* ---- outputs ---- */

static const char *const k_cols[] = {VB_MODEL_CSV_COLUMNS};
#define NCOLS ((int)(sizeof k_cols / sizeof *k_cols))

typedef struct {
    const point_list *pl;
    const vb_ab_table *fits;
    bool strong;
    int nlevels;                  /* sensitivity: one pair of columns per level */
    const char *level[VB_MACHINE_MAX_LEVELS];
} out_ctx;

/* Throughput per rank over one rank's: strong T1 / (p Tp); weak T1 / Tp for
 * data parallelism, divided by tp x cp when tp and cp peers share samples
 * (they add ranks, not samples). */
static double eff_of(bool strong, double t1, double tp, const model_point *pt) {
    return strong ? vb_eff_strong(t1, tp, pt->ranks) : vb_eff_weak(t1, tp) / (pt->l.tp * pt->l.cp);
}

/* the efficiency's interval: T1 and Tp at opposite ends (evaluate) */
static void eff_range(const out_ctx *x, const model_point *p, double *lo, double *hi) {
    (void)x;
    *lo = p->eff_lo, *hi = p->eff_hi;
}

/* cell c of point p as text ("" unknown); c >= NCOLS: sensitivity column c - NCOLS */
static void cell(const out_ctx *x, const model_point *p, int c, char *buf, size_t n) {
    const vb_mpred *q = &p->pred;
    const double mthr = isfinite(p->measured_step) ? p->l.local_batch * p->l.dp / p->measured_step : NAN;
    const double samples = (double)p->l.local_batch * p->l.dp;
    double v = NAN, elo, ehi;
    if (c >= NCOLS) {
        v = p->sens[(c - NCOLS) / 2][(c - NCOLS) % 2];
        goto number;
    }
    switch (c) {
    case 0: snprintf(buf, n, "%s", p->name); return;
    case 1: snprintf(buf, n, "%d", p->ranks); return;
    case 2: snprintf(buf, n, "%d", p->l.tp); return;
    case 3: snprintf(buf, n, "%d", p->l.cp); return;
    case 4: snprintf(buf, n, "%d", p->l.dp); return;
    case 5: snprintf(buf, n, "%d", p->l.local_batch); return;
    case 6: snprintf(buf, n, "%d", p->l.threads); return;
    case 7: snprintf(buf, n, "%d", p->l.node_ranks); return;
    case 8: v = q->cpu_factor; break;
    case 9: snprintf(buf, n, "%d", q->nbuckets); return;
    case 10: v = q->forward_s; break;
    case 11: v = q->backward_s; break;
    case 12: v = q->other_s; break;
    case 13: v = q->compute_s; break;
    case 14: v = q->ddp_comm_s; break;
    case 15: v = q->exposed_ddp_s; break;
    case 16: v = q->exposed_tp_s; break;
    case 17: v = q->exposed_cp_s; break;
    case 18: v = q->step_s; break;
    case 19: v = q->samples_per_s; break;
    case 20: v = eff_of(x->strong, p->t1_pred, q->step_s, p); break;
    case 21: v = p->measured_step; break;
    case 22: v = mthr; break;
    case 23: v = eff_of(x->strong, p->t1_meas, p->measured_step, p); break;
    case 24: v = (q->step_s - p->measured_step) / p->measured_step; break;
    case 25: snprintf(buf, n, "%s", q->extrapolated ? "true" : "false"); return;
    case 26: v = p->lo.step_s; break;
    case 27: v = p->hi.step_s; break;
    case 28: v = samples / p->hi.step_s; break;
    case 29: v = samples / p->lo.step_s; break;
    case 30: eff_range(x, p, &elo, &ehi), v = elo; break;
    case 31: eff_range(x, p, &elo, &ehi), v = ehi; break;
    case 32: snprintf(buf, n, "%d", (p->ranks + p->l.node_ranks - 1) / p->l.node_ranks); return;
    case 33: snprintf(buf, n, "%s", q->compute_ref); return;
    default: snprintf(buf, n, "%s", q->comm_src); return;
    }
number:
    if (isfinite(v))
        snprintf(buf, n, "%.6g", v);
    else
        buf[0] = '\0';
}

/* the name of column c, sensitivity columns included */
static void col_name(const out_ctx *x, int c, char *buf, size_t n) {
    if (c < NCOLS)
        snprintf(buf, n, "%s", k_cols[c]);
    else
        snprintf(buf, n, "sens_%s_beta_%s", x->level[(c - NCOLS) / 2], (c - NCOLS) % 2 ? "p25" : "m25");
}

static void write_model_csv(FILE *f, void *vx) {
    const out_ctx *x = vx;
    const int nc = NCOLS + 2 * x->nlevels;
    char buf[256];
    for (int c = 0; c < nc; c++) {
        col_name(x, c, buf, sizeof buf);
        if (c) fputc(',', f);
        vb_csv_field(f, buf);
    }
    fputc('\n', f);
    for (int i = 0; i < x->pl->n; i++) {
        for (int c = 0; c < nc; c++) {
            cell(x, &x->pl->v[i], c, buf, sizeof buf);
            if (c) fputc(',', f);
            vb_csv_field(f, buf);
        }
        fputc('\n', f);
    }
}

static void write_fits_csv(FILE *f, void *vx) {
    const out_ctx *x = vx;
    fputs(VB_MODEL_FITS_CSV_HEADER "\n", f);
    for (int i = 0; i < x->fits->n; i++) {
        const vb_ab_fit *a = &x->fits->fits[i];
        fprintf(f, "%s,", vb_coll_name[a->coll]);
        vb_csv_field(f, a->group);
        fprintf(f, ",%d,%d,%.6g,%.6g,%.6g,%d\n", a->p, a->world, a->alpha_us, a->beta_GBps, a->rel_rms, a->nsizes);
    }
}

/* median and max |rel_error| over the measured points; false when none */
static bool error_summary(const point_list *pl, double *med, double *mx, int *n) {
    double *e = vb_malloc_check(sizeof(double) * ((size_t)pl->n + 1));
    *n = 0;
    for (int i = 0; i < pl->n; i++) {
        const model_point *p = &pl->v[i];
        if (isfinite(p->measured_step)) e[(*n)++] = fabs(p->pred.step_s - p->measured_step) / p->measured_step;
    }
    if (*n) {
        qsort(e, (size_t)*n, sizeof *e, cmp_dbl);
        *med = *n % 2 ? e[*n / 2] : 0.5 * (e[*n / 2 - 1] + e[*n / 2]);
        *mx = e[*n - 1];
    }
    free(e);
    return *n > 0;
}

/* the printed / Markdown table's columns (then every sensitivity column) */
static const int k_show[] = {0, 2, 3, 4, 5, 32, 13, 15, 16, 17, 18, 26, 27, 19, 20, 21, 23, 24};
#define NSHOW ((int)(sizeof k_show / sizeof *k_show))

static int show_col(int i) { return i < NSHOW ? k_show[i] : NCOLS + (i - NSHOW); }

typedef struct {
    const out_ctx *x;
    const model_opts *o;
    const char *kind;
    const vb_mref *ref;
    const vb_machine *machine;
    double compute_scale;
    const char *compute_scale_why;
    const char *impl_name;
} md_ctx;

/* The summary every output starts with: at each world size the layout with
 * the highest predicted samples/s, its efficiency with the interval that
 * holds the compute's uncertainty, and what was measured there. md: as a
 * Markdown table, else aligned text. */
static void write_summary(FILE *f, const out_ctx *x, bool md) {
    int *best = vb_calloc_check((size_t)x->pl->n + 1, sizeof *best), nbest = 0;
    for (int i = 0; i < x->pl->n; i++) {
        const model_point *p = &x->pl->v[i];
        int at = -1;
        for (int k = 0; k < nbest && at < 0; k++)
            if (x->pl->v[best[k]].ranks == p->ranks) at = k;
        if (at < 0) best[nbest++] = i;
        else if (p->pred.samples_per_s > x->pl->v[best[at]].pred.samples_per_s) best[at] = i;
    }
    for (int i = 1; i < nbest; i++) /* by world size */
        for (int j = i; j > 0 && x->pl->v[best[j]].ranks < x->pl->v[best[j - 1]].ranks; j--) {
            const int t = best[j];
            best[j] = best[j - 1], best[j - 1] = t;
        }
    const char *eff = x->strong ? "strong: T1 / (p Tp)" : "weak: T1 / (tp cp Tp)";
    if (md)
        fprintf(f, "## Summary\n\nThe layout with the highest predicted samples/s at each world size; efficiency (%s) "
                   "with its interval: every input at an end of its uncertainty, the compute at least +-%.0f%% with "
                   "T1 and Tp at opposite ends. Every layout: the table below and model.csv.\n\n"
                   "| ranks | nodes | tp x cp x dp | samples/s [interval] | efficiency [interval] | measured efficiency |\n"
                   "|---|---|---|---|---|---|\n",
                eff, 100 * VB_MODEL_COMPUTE_UNCERTAINTY);
    else
        printf("Summary: the layout with the highest predicted samples/s at each world size; efficiency (%s) with "
               "its interval: every input at an end of its uncertainty, the compute at least +-%.0f%% with T1 and Tp "
               "at opposite ends\n%6s %6s  %-14s %-30s %-26s %s\n",
               eff, 100 * VB_MODEL_COMPUTE_UNCERTAINTY, "ranks", "nodes", "tp x cp x dp", "samples/s [interval]",
               "efficiency [interval]", "measured");
    for (int k = 0; k < nbest; k++) {
        const model_point *p = &x->pl->v[best[k]];
        char lay[48], thr[64], ef[64], meas[32] = "-";
        snprintf(lay, sizeof lay, "%d x %d x %d", p->l.tp, p->l.cp, p->l.dp);
        snprintf(thr, sizeof thr, "%.4g [%.4g, %.4g]", p->pred.samples_per_s, p->hi.samples_per_s,
                 p->lo.samples_per_s);
        double lo, hi;
        eff_range(x, p, &lo, &hi);
        const double e = eff_of(x->strong, p->t1_pred, p->pred.step_s, p);
        snprintf(ef, sizeof ef, "%.3g [%.3g, %.3g]", e, lo, hi);
        if (isfinite(p->measured_step) && isfinite(p->t1_meas))
            snprintf(meas, sizeof meas, "%.3g", eff_of(x->strong, p->t1_meas, p->measured_step, p));
        const int nodes = (p->ranks + p->l.node_ranks - 1) / p->l.node_ranks;
        if (md)
            fprintf(f, "| %d | %d | %s | %s | %s | %s |\n", p->ranks, nodes, lay, thr, ef, meas);
        else
            printf("%6d %6d  %-14s %-30s %-26s %s\n", p->ranks, nodes, lay, thr, ef, meas);
    }
    if (md) fputc('\n', f);
    free(best);
}

static void write_md(FILE *f, void *vm) {
    const md_ctx *m = vm;
    const out_ctx *x = m->x;
    fprintf(f, "# Scaling model\n\n");
    write_summary(f, x, true);
    if (m->o->reference) {
        fprintf(f, "Reference: ");
        vb_md_prose(f, m->o->reference);
        fprintf(f, " (");
        vb_md_prose(f, m->ref->what);
        fprintf(f, "): step %.6g s at local batch %d, spread +-%.3g%%", m->ref->step_s[0], m->ref->batch[0],
                100 * m->ref->spread);
    } else {
        fprintf(f, "Reference: %d one-rank run%s (%d threads, %d cores):", m->ref->nref, m->ref->nref > 1 ? "s" : "",
                m->ref->threads, m->ref->cores);
        for (int i = 0; i < m->o->nruns; i++) { /* paths as given: text, whatever they hold */
            fputc(' ', f);
            vb_md_prose(f, m->o->runs[i]);
        }
        fprintf(f, "; median %s step", k_types[m->o->trial_type]);
        for (int i = 0; i < m->ref->nref; i++)
            fprintf(f, "%s %.6g s at local batch %d", i ? "," : "", m->ref->step_s[i], m->ref->batch[i]);
        fprintf(f, ", spread of its steps +-%.3g%%", 100 * m->ref->spread);
    }
    fprintf(f, ". Scaling kind: %s (efficiency %s).\n\n", m->kind, x->strong ? "T1 / (p Tp)" : "T1 / (tp cp Tp)");
    if (m->compute_scale != 1)
        fprintf(f, "Compute rescaled by %.6g: %s.\n\n", m->compute_scale, m->compute_scale_why);
    if (m->ref->price_factor > 0) {
        fprintf(f, "Compute ");
        vb_md_prose(f, m->compute_scale_why);
        fprintf(f, ".\n\n");
    }
    if (m->machine) {
        fprintf(f, "Machine: ");
        vb_md_prose(f, m->machine->name);
        fprintf(f, " (");
        vb_md_prose(f, m->o->machine);
        fprintf(f, "), %d ranks per node, levels:", m->machine->ranks_per_node);
        for (int l = 0; l < m->machine->nlevels; l++) {
            const vb_mlevel *lv = &m->machine->level[l];
            fprintf(f, "%s ", l ? ";" : "");
            vb_md_prose(f, lv->name);
            fprintf(f, " alpha %.3g us, beta %.4g GB/s (allreduce %s), +-%.3g%%", lv->alpha_us[0], lv->beta_GBps[0],
                    vb_alg_name[lv->alg[0]], 100 * lv->uncertainty);
            if (lv->nics_per_node) fprintf(f, ", %d NICs x %.4g GB/s per node", lv->nics_per_node, lv->nic_GBps);
        }
        fprintf(f, ". Collectives commbench measured at their group size use the measurement (comm_sources says "
                   "which priced each group).\n\n");
    }
    {
        /* which interference the predictions carry, and from where */
        const double s = vb_ab_overlap_slowdown(x->fits);
        if (s >= 0)
            fprintf(f, "Compute beside a collective: x %.4g, measured by commbench --beside_gemm (the median over "
                       "%d sizes that lasted a GEMM or more).\n\n",
                    1.0 + s, x->fits->nslowdowns);
        else if (m->machine && m->machine->overlap_slowdown > 0)
            fprintf(f, "Compute beside a collective: x %.4g, the machine file's overlap_slowdown.\n\n",
                    1.0 + m->machine->overlap_slowdown);
        else
            fprintf(f, "Compute beside a collective: as fast as alone (no commbench --beside_gemm measurement, "
                       "no overlap_slowdown in a machine file).\n\n");
    }
    fprintf(f, "Assumptions: ring cost forms fitted per collective and group (1/t^2-weighted least squares, slowest "
               "rank per size); with a machine file, groups placed on its levels as the launcher places ranks (block "
               "by node) and priced hierarchically (inner levels reduce-scatter / all-gather, the outermost spanned "
               "level carries the collective); compute scaled per op by the rank's share of heads and tokens, GEMMs "
               "and attention by their price on a machine that states its efficiency, or priced op by op from a "
               "reference measured elsewhere, or measured on a shard reference (compute_ref says which), and by "
               "local batch; compute x (reference threads / threads) x max(1, node ranks x threads / cores); tp and "
               "cp collectives as the implementation (%s) runs them; DDP buckets on one channel %s. Interval: every "
               "input at the fast and at the slow end of its uncertainty together, a repriced compute's efficiency "
               "included. Sensitivity: relative change of the step when one level's beta is 25%% lower (m25) or "
               "higher (p25). See docs/model.md.\n\n",
            m->impl_name,
            m->o->ddp_mode == VB_DDP_OVERLAP ? "overlapping backward from their ready times"
                                             : "started after backward (no progress during backward)");
    if (x->fits->n) {
        fprintf(f, "## Fits\n\n| collective | group | p | world | alpha (us) | beta (GB/s) | rel. RMS error | sizes |\n"
                   "|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < x->fits->n; i++) {
            const vb_ab_fit *a = &x->fits->fits[i];
            fprintf(f, "| %s | ", vb_coll_name[a->coll]);
            vb_md_cell(f, a->group); /* read from commbench.csv */
            fprintf(f, " | %d | %d | %.4g | %.4g | %.3g | %d |\n", a->p, a->world, a->alpha_us, a->beta_GBps,
                    a->rel_rms, a->nsizes);
        }
        fputc('\n', f);
    }
    const int nshow = NSHOW + 2 * x->nlevels;
    char buf[256];
    fprintf(f, "## Points\n\n|");
    for (int c = 0; c < nshow; c++) {
        col_name(x, show_col(c), buf, sizeof buf);
        fputc(' ', f);
        vb_md_cell(f, buf); /* level names come from the machine file */
        fputs(" |", f);
    }
    fprintf(f, "\n|");
    for (int c = 0; c < nshow; c++) fprintf(f, "---|");
    fputc('\n', f);
    for (int i = 0; i < x->pl->n; i++) {
        fputc('|', f);
        for (int c = 0; c < nshow; c++) {
            cell(x, &x->pl->v[i], show_col(c), buf, sizeof buf);
            fputc(' ', f);
            vb_md_cell(f, buf);
            fputs(" |", f);
        }
        fputc('\n', f);
    }
    fprintf(f, "\n## What priced each point\n\n| point | compute_ref | comm_sources |\n|---|---|---|\n");
    for (int i = 0; i < x->pl->n; i++) {
        const model_point *p = &x->pl->v[i];
        fputs("| ", f);
        vb_md_cell(f, p->name);
        fputs(" | ", f);
        vb_md_cell(f, p->pred.compute_ref);
        fputs(" | ", f);
        vb_md_cell(f, p->pred.comm_src[0] ? p->pred.comm_src : "no communication");
        fputs(" |\n", f);
    }
    double med, mx;
    int n;
    if (error_summary(x->pl, &med, &mx, &n))
        fprintf(f, "\nStep-time error over %d measured points: median |rel. error| %.3g, max %.3g.\n", n, med, mx);
}


/* Nominal, both interval corners and the sensitivity of point p; T1 the
 * same rank's work alone at the local (weak) or global (strong) batch. */
static void evaluate(const vb_mctx *m, model_point *p, bool strong, int nlevels) {
    vb_mknobs kn;
    vb_mknobs_nominal(&kn);
    vb_model_predict(m, &p->l, &kn, &p->pred);
    vb_mlayout one = p->l;
    one.tp = one.cp = one.dp = 1;
    one.node_ranks = 1;
    if (strong) one.local_batch = p->l.local_batch * p->l.dp;
    vb_mpred q;
    vb_model_predict(m, &one, &kn, &q);
    p->t1_pred = q.step_s;
    for (int c = -1; c <= 1; c += 2) {
        kn.corner = c;
        vb_model_predict(m, &p->l, &kn, c < 0 ? &p->lo : &p->hi);
        vb_model_predict(m, &one, &kn, &q);
        if (c < 0)
            p->t1_lo = q.step_s;
        else
            p->t1_hi = q.step_s;
    }
    /* the efficiency's interval: T1 and Tp at opposite corners, so that the
     * compute's uncertainty (at least VB_MODEL_COMPUTE_UNCERTAINTY) does not
     * cancel in T1 / Tp as it would at one corner */
    const double ea = eff_of(strong, p->t1_lo, p->hi.step_s, p), eb = eff_of(strong, p->t1_hi, p->lo.step_s, p);
    p->eff_lo = fmin(ea, eb), p->eff_hi = fmax(ea, eb);
    kn.corner = 0;
    for (int l = 0; l < nlevels; l++)
        for (int s = 0; s < 2; s++) {
            kn.beta_mul[l] = s ? 1.25 : 0.75;
            vb_model_predict(m, &p->l, &kn, &q);
            p->sens[l][s] = (q.step_s - p->pred.step_s) / p->pred.step_s;
            kn.beta_mul[l] = 1.0;
        }
}

int vb_model_main(int argc, char **argv) {
    model_opts o = {.ddp_mode = VB_DDP_OVERLAP};
    static const char *const layouts[] = {"all", "dp", NULL};
    static const char *const scalings[] = {"weak", "strong", NULL};
    static const char *const ddp_modes[] = {"overlap", "after_backward", NULL};
    const vb_cli_opt opts[] = {
        {.name = "commbench", .kind = VB_CLI_FUNC, .ptr = &o, .fn = add_commbench, .arg = "FILE|DIR",
         .help = "vitbench commbench's commbench.csv or its run directory (repeat for more rank counts); measured "
                 "group sizes win over --machine"},
        {.name = "machine", .kind = VB_CLI_STRING, .ptr = &o.machine, .arg = "FILE",
         .help = "a machine file (scenarios/machines/*.yaml): levels, NICs, ranks per node, peaks; prices every "
                 "collective commbench did not measure"},
        {.name = "run", .kind = VB_CLI_FUNC, .ptr = &o, .fn = add_run, .arg = "DIR",
         .help = "a one-rank run directory (vitbench run, CPU or CUDA): the compute reference; repeat with other "
                 "local batch sizes, or with shard references (bench_step --reference_dir)"},
        {.name = "reference", .kind = VB_CLI_STRING, .ptr = &o.reference, .arg = "FILE",
         .help = "instead of --run: a step time measured elsewhere with op shares (YAML, docs/model.md)"},
        {.name = "reference_machine", .kind = VB_CLI_STRING, .ptr = &o.reference_machine, .arg = "FILE",
         .help = "the machine file of the machine the reference ran on: compute x its peak / --machine's peak"},
        {.name = "sweep", .kind = VB_CLI_STRING, .ptr = &o.sweep, .arg = "DIR",
         .help = "a sweep directory: predict each completed run beside its measurement"},
        {.name = "world_sizes", .kind = VB_CLI_FUNC, .ptr = &o, .fn = parse_worlds, .arg = "N,N,...",
         .help = "hypothetical world sizes in ranks to predict (every layout --layouts allows)"},
        {.name = "layouts", .kind = VB_CLI_CHOICE, .ptr = &o.layouts, .choices = layouts, .arg = "all|dp",
         .help = "with --world_sizes: every tp x cp x dp the config takes (default), or dp only"},
        {.name = "parallel_order", .kind = VB_CLI_STRING, .ptr = &o.order, .arg = "O",
         .help = "with --world_sizes: how ranks map to groups, first varying fastest (default tp-cp-dp)"},
        {.name = "scaling", .kind = VB_CLI_CHOICE, .ptr = &o.scaling, .choices = scalings, .arg = "weak|strong",
         .help = "with --world_sizes: fixed local batch (default) or fixed global batch"},
        {.name = "local_batch_size", .kind = VB_CLI_INT, .ptr = &o.local_batch, .ilo = 1, .ihi = 1 << 20, .arg = "N",
         .help = "with --world_sizes, weak: samples per rank (default the run's)"},
        {.name = "global_batch_size", .kind = VB_CLI_INT, .ptr = &o.global_batch, .ilo = 1, .ihi = 1 << 24,
         .arg = "N", .help = "with --world_sizes, strong: samples per step (default the run's local batch)"},
        {.name = "threads_per_rank", .kind = VB_CLI_INT, .ptr = &o.threads, .ilo = 1, .ihi = 4096, .arg = "T",
         .help = "with --world_sizes: OpenMP threads per rank (default the run's)"},
        {.name = "ranks_per_node", .kind = VB_CLI_INT, .ptr = &o.ranks_per_node, .ilo = 1, .ihi = 1 << 20,
         .arg = "N",
         .help = "with --world_sizes: ranks per node (default the machine file's, else cores / threads)"},
        {.name = "cores", .kind = VB_CLI_INT, .ptr = &o.cores, .ilo = 1, .ihi = 1 << 20, .arg = "N",
         .help = "with --world_sizes: cores per node (default the machine file's, else the run's affinity cores)"},
        {.name = "bucket_cap_mb", .kind = VB_CLI_DOUBLE, .ptr = &o.bucket_cap_mb, .dlo = 0, .dlo_open = true,
         .dhi = 1e6, .arg = "X", .help = "with --world_sizes: DDP bucket cap in MiB (default 25)"},
        {.name = "trial_type", .kind = VB_CLI_CHOICE, .ptr = &o.trial_type, .choices = k_types,
         .arg = "FULL|SYNTHETIC", .help = "which steps and throughput to model (default FULL)"},
        {.name = "ddp_overlap", .kind = VB_CLI_CHOICE, .ptr = &o.ddp_mode, .choices = ddp_modes,
         .arg = "overlap|after_backward",
         .help = "DDP buckets overlap backward from their ready times (default), or all start after it"},
        {.name = "implementation", .kind = VB_CLI_STRING, .ptr = &o.implementation, .arg = "NAME",
         .help = "the code the predicted runs use: its tp collectives and overlap, cp scheme and element-wise "
                 "traffic (vitbench, tutorial-sc25, tutorial-sc25-compiled, tutorial-sc23, tutorial-sc23-compiled, "
                 "te, megatron, te-sp; default the reference's, else vitbench)"},
        {.name = "published", .kind = VB_CLI_STRING, .ptr = &o.published, .arg = "FILE",
         .help = "the tutorials' published scaling results (scenarios/published/tutorials.yaml) beside the model; "
                 "alone"},
        {.name = "output_dir", .kind = VB_CLI_STRING, .ptr = &o.output_dir, .arg = "DIR",
         .help = "where the outputs go (default the sweep, else results/model_<time>)"},
    };
    const vb_cli cli = {
        .cmd = "model",
        .usage = "vitbench model [--commbench FILE|DIR] [--machine FILE] --run RUN_DIR | --reference FILE\n"
                 "                      [--sweep SWEEP_DIR] [--world_sizes N,... [--layouts all|dp] [--scaling "
                 "weak|strong]] [options]\n"
                 "       vitbench model --published FILE [--output_dir DIR]",
        .about = "Alpha-beta model of a training step: prices each collective from commbench.csv where it was\n"
                 "measured and from a machine file's levels elsewhere, scales the reference's per-op compute to\n"
                 "each layout, adds the exposed tp / cp collectives and the DDP buckets not hidden behind\n"
                 "backward; every prediction with an interval and its sensitivity to each level's bandwidth\n"
                 "(docs/model.md).",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
    };
    vb_cli_parse(&cli, argc, argv);
    if (o.published) {
        if (o.nruns || o.reference || o.ncommbench || o.machine || o.sweep || o.nworlds || o.implementation)
            vb_die_input("model: --published runs alone (its file names every machine and reference)");
        return vb_model_published(o.published, o.output_dir);
    }
    if (o.nruns == 0 && !o.reference) vb_die_input("model: missing required flag --run (or --reference)");
    if (o.nruns && o.reference) vb_die_input("model: --run and --reference both given: one compute reference");
    if (o.ncommbench == 0 && !o.machine)
        vb_die_input("model: missing required flag --commbench (or --machine): nothing prices the collectives");
    if (o.reference_machine && !o.machine)
        vb_die_input("model: --reference_machine needs --machine (the machine the prediction is for)");
    if (!o.sweep && o.nworlds == 0) vb_die_input("model: nothing to predict: give --sweep DIR or --world_sizes N,...");
    if (o.bucket_cap_mb == 0) o.bucket_cap_mb = VB_BUCKET_CAP_MB_DEFAULT;
    if (o.order) {
        int ord[VB_NDIMS];
        char err[200];
        if (vb_layout_parse_order(o.order, ord, err, sizeof err) != 0)
            vb_die_input("model: --parallel_order %s: %s", o.order, err);
    }

    vb_ab_table fits = {0};
    for (int i = 0; i < o.ncommbench; i++) vb_ab_load(o.commbench[i], &fits);
    vb_machine machine, ref_machine;
    if (o.machine) vb_machine_load(o.machine, &machine);
    vb_mref ref;
    vb_mref *shards = NULL;
    int nshards = 0;
    const char *type = k_types[o.trial_type];
    vb_mref_src rsrc = {0};
    if (o.reference)
        vb_mref_load_file(o.reference, &ref, &rsrc);
    else
        load_refs(&ref, &shards, &nshards, o.runs, o.nruns, type);

    const vb_impl *impl = o.implementation ? vb_impl_find_or_die(o.implementation, "model: --implementation") : NULL;
    /* a reference from elsewhere is priced op by op on the machine it ran on
     * (scaling_price.h) when that machine states its memory bandwidth, and
     * every layout is then priced on --machine; otherwise its compute is
     * carried over by the two machines' peaks */
    const char *rm = o.reference_machine ? o.reference_machine : rsrc.machine[0] ? rsrc.machine : NULL;
    double cscale = 1;
    char why[400] = "";
    if (rm) vb_machine_load(rm, &ref_machine);
    if (rm && o.reference) vb_mref_price(&ref, &ref_machine);
    if (ref.price_factor > 0)
        snprintf(why, sizeof why, "priced op by op on %s (the reference's machine), x%.4g to its measured step",
                 ref_machine.name, ref.price_factor);
    if (rm && o.machine && !(ref.price_factor > 0)) {
        const double a = vb_machine_rank_peak(&ref_machine, ref.prec, ref.threads);
        const double b = vb_machine_rank_peak(&machine, ref.prec, ref.threads);
        if (!(a > 0) || !(b > 0))
            vb_die_input("model: %s: no peak_tflops.%s to rescale the reference's compute by",
                         !(a > 0) ? rm : o.machine, vb_prec_name[ref.prec]);
        cscale = a / b;
        snprintf(why, sizeof why, "the reference ran on %s at %.4g TFLOP/s %s per rank, %s has %.4g", ref_machine.name,
                 a, vb_prec_name[ref.prec], machine.name, b);
    }

    vb_mctx mctx = {.ref = &ref, .shards = shards, .nshards = nshards, .fits = &fits,
                    .machine = o.machine ? &machine : NULL, .mode = (vb_ddp_mode)o.ddp_mode,
                    .compute_scale = cscale, .impl = impl};
    /* a reference measured on several ranks: its one-rank compute solved for,
     * on the machine it ran on */
    if (o.reference && (rsrc.layout.tp * rsrc.layout.cp * rsrc.layout.dp > 1)) {
        vb_mctx rc = mctx;
        rc.machine = rm ? &ref_machine : mctx.machine;
        rc.compute_scale = 1;
        rc.impl = NULL; /* the reference ran its own code */
        if (!rc.machine) vb_die_input("model: --reference %s: measured on several ranks, it needs its machine "
                                      "(machine: in the file, --reference_machine or --machine)",
                                      o.reference);
        vb_mlayout rl = rsrc.layout;
        rl.local_batch = ref.batch[0], rl.threads = rl.cores = 1, rl.bucket_cap_mb = VB_BUCKET_CAP_MB_DEFAULT;
        rl.node_ranks = rc.machine->ranks_per_node < rl.tp * rl.cp * rl.dp ? rc.machine->ranks_per_node
                                                                        : rl.tp * rl.cp * rl.dp;
        vb_mref_calibrate(&rc, &ref, &rl, rsrc.step_s);
    }

    point_list pl = {0};
    char kind[64] = "";
    int strong = o.scaling;
    if (o.sweep) strong = load_sweep(o.sweep, &ref, type, &pl, kind, sizeof kind);
    if (o.nworlds) {
        if (!o.sweep) snprintf(kind, sizeof kind, "%s", o.scaling ? "strong_scaling" : "weak_scaling");
        if (o.sweep && strong != o.scaling)
            vb_die_input("model: --scaling %s disagrees with the sweep's kind %s", scalings[o.scaling], kind);
        hypothetical(&o, &ref, mctx.machine, &pl);
    }
    if (pl.n == 0) vb_die_input("model: --world_sizes: no layout of these world sizes fits the model config");

    out_ctx x = {.pl = &pl, .fits = &fits, .strong = strong != 0};
    if (mctx.machine) {
        x.nlevels = machine.nlevels;
        for (int l = 0; l < machine.nlevels; l++) x.level[l] = machine.level[l].name;
    } else {
        x.nlevels = 1;
        x.level[0] = "commbench";
    }
    for (int i = 0; i < pl.n; i++) {
        model_point *p = &pl.v[i];
        char err[200];
        if (vb_model_check_layout(&ref.d, &p->l, err, sizeof err) != 0)
            vb_die_input("model: point %s: %s", p->name, err);
        evaluate(&mctx, p, strong != 0, x.nlevels);
        /* measured T1: the sweep's one-rank runs of the same series */
        const int t1_batch = strong ? p->l.local_batch * p->l.dp : p->l.local_batch;
        double sum = 0;
        int n = 0;
        for (int k = 0; k < pl.n; k++) {
            const model_point *r = &pl.v[k];
            if (r->ranks != 1 || !isfinite(r->measured_step) || r->l.noddp != p->l.noddp) continue;
            if (r->l.local_batch != t1_batch) continue;
            sum += r->measured_step, n++;
        }
        if (n) p->t1_meas = sum / n;
    }

    char out[VB_PATH_MAX];
    if (o.output_dir) {
        vb_snprintf(out, sizeof out, "%s", o.output_dir);
    } else if (o.sweep) {
        vb_snprintf(out, sizeof out, "%s", o.sweep);
    } else {
        if (vb_results_dir_claim_stamped(VB_RESULTS_DEFAULT_DIR, "model", out, sizeof out, NULL, 0) != 0)
            vb_die_env("model: cannot create a model_<stamp> directory in results/ (%s)", strerror(errno));
    }
    vb_outdir od; /* the sweep or --output_dir is the tree: files by rename, no link followed */
    vb_outdir_open_or_die(&od, out, "", "model");

    md_ctx m = {.x = &x, .o = &o, .kind = kind, .ref = &ref, .machine = mctx.machine, .compute_scale = cscale,
                .compute_scale_why = why,
                .impl_name = (impl ? impl : ref.impl ? ref.impl : vb_impl_default())->name};
    vb_outdir_write_or_die(&od, VB_MODEL_FITS_CSV, write_fits_csv, &x, "model");
    vb_outdir_write_or_die(&od, VB_MODEL_CSV, write_model_csv, &x, "model");
    vb_outdir_write_or_die(&od, VB_MODEL_MD, write_md, &m, "model");
    vb_outdir_close(&od);

    write_summary(stdout, &x, false);
    printf("Every layout at every size (%d rows, step parts, intervals, sensitivity): %s/model.csv and model.md\n\n",
           pl.n, out);
    if (fits.n) {
        printf("Fits (commbench.csv, slowest rank per size):\n");
        printf("%-15s %-6s %3s %5s %12s %12s %8s %6s\n", "collective", "group", "p", "world", "alpha_us",
               "beta_GBps", "rel_rms", "sizes");
        for (int i = 0; i < fits.n; i++) {
            const vb_ab_fit *a = &fits.fits[i];
            printf("%-15s %-6s %3d %5d %12.4g %12.4g %8.3g %6d\n", vb_coll_name[a->coll], a->group, a->p, a->world,
                   a->alpha_us, a->beta_GBps, a->rel_rms, a->nsizes);
        }
        printf("\n");
    }
    if (mctx.machine) printf("Machine: %s (%s), %d ranks per node\n", machine.name, o.machine, machine.ranks_per_node);
    if (cscale != 1) printf("Compute rescaled by %.6g: %s\n", cscale, why);
    if (ref.price_factor > 0) printf("Compute %s\n", why);
    if (impl || ref.impl) printf("Implementation: %s\n", (impl ? impl : ref.impl)->name);
    if (o.reference) printf("Reference: %s (%s)\n", o.reference, ref.what);
    double med, mx;
    int n;
    if (error_summary(&pl, &med, &mx, &n))
        printf("\nvitbench model: step-time error over %d measured points: median |rel. error| %.3g, max %.3g\n", n,
               med, mx);
    printf("vitbench model: wrote %s/model.csv, model.md, model_fits.csv\n", out);
    free(pl.v);
    free(ref.ops);
    for (int k = 0; k < nshards; k++) free(shards[k].ops);
    free(shards);
    vb_ab_free(&fits);
    return 0;
}
