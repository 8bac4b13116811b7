/* report_sweep.c: a sweep directory's report (report.h): its runs grouped
 * into points (equal swept keys, any repeat), the sweep's kind (sweep.json's
 * "kind", else inferred from what varied) and the analysis that kind calls
 * for. Analyses live in report_kinds.c; this file loads and organises. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/report_sweep.h"
#include "analysis/rundir.h"
#include "core/results/results.h"
#include "core/util/log_line.h"

const char *sw_val(const rp_sweep *s, const rp_point *p, const char *key) {
    int c = vb_csv_col(&s->idx, key);
    return c < 0 || !vb_index_column_is_swept(key) ? NULL : vb_csv_get(&s->idx, p->row, c);
}

double sw_num(const rp_sweep *s, const rp_point *p, const char *key) {
    const char *v = sw_val(s, p, key);
    char *end;
    double x = v && *v ? strtod(v, &end) : NAN;
    return v && *v && *end == '\0' ? x : NAN;
}

bool sw_key_varies(const rp_sweep *s, const char *key) {
    if (vb_csv_col(&s->idx, key) < 0) return false;
    for (int i = 1; i < s->npts; i++)
        if (strcmp(sw_val(s, &s->pts[i], key), sw_val(s, &s->pts[0], key)) != 0) return true;
    return false;
}

/* "k=v k=v" over the keys that vary, except `skip` (NULL = none). */
void sw_label(const rp_sweep *s, const rp_point *p, const char *skip, char *out, size_t n) {
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < s->nkeys; i++) {
        const char *key = s->keys[i];
        if ((skip && strcmp(key, skip) == 0) || !sw_key_varies(s, key)) continue;
        int w = snprintf(out + k, n - k, "%s%s=%s", k ? " " : "", key, sw_val(s, p, key));
        if (w < 0 || (size_t)w >= n - k) break;
        k += (size_t)w;
    }
    if (!out[0]) snprintf(out, n, "all");
}

/* a run's failure class: index.csv's, else (older sweeps) from its exit
 * code as the sweep classes it: 128 + N a signal, else the exit status */
static void failure_of(rp_run *r, const char *recorded) {
    char *end;
    const long code = strtol(r->exit_code, &end, 10);
    if (recorded && *recorded)
        snprintf(r->failure, sizeof r->failure, "%s", recorded);
    else if (!r->exit_code[0] || *end)
        snprintf(r->failure, sizeof r->failure, "%s", r->status);
    else if (code > 128 && code < 128 + 65)
        snprintf(r->failure, sizeof r->failure, "signal %ld", code - 128);
    else
        snprintf(r->failure, sizeof r->failure, "exit %ld", code);
}


/* A run reached through a symbolic link below the sweep (runs/ or
 * runs/<run> a link) is read, and said to be: what it leads to may be
 * another run's directory, not the one the sweep wrote. */
static void link_note(rp_doc *d, const char *sweep, const char *run_dir) {
    char path[VB_PATH_MAX], target[VB_PATH_MAX];
    size_t at = 0;
    for (const char *c = run_dir; *c; c += strcspn(c, "/"), c += *c == '/') {
        at = (size_t)(c - run_dir) + strcspn(c, "/");
        vb_snprintf(path, sizeof path, "%s/%.*s", sweep, (int)at, run_dir);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)) continue;
        ssize_t k = readlink(path, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        rp_problem(d, "%s: a symbolic link (to %s), not a directory the sweep wrote: its numbers are read from there "
                      "and may be another run's",
                   path, target[0] ? target : "?");
        return;
    }
}

static void load_index(rp_sweep *s, rp_doc *d) {
    if (rp_read_csv(s->path, VB_INDEX_CSV, &s->idx) != 0) vb_die_input("report: %s/index.csv: cannot read", s->path);
    if (vb_csv_col(&s->idx, VB_COL_RUN_DIR) < 0 || vb_csv_col(&s->idx, VB_COL_STATUS) < 0)
        vb_die_input("report: %s/index.csv: no run_dir or status column", s->path);
    s->keys = vb_calloc_check((size_t)s->idx.ncols + 1, sizeof *s->keys);
    for (int c = 0; c < s->idx.ncols; c++)
        if (vb_index_column_is_swept(s->idx.header[c])) s->keys[s->nkeys++] = s->idx.header[c];
    s->runs = vb_calloc_check((size_t)s->idx.nrows + 1, sizeof *s->runs);
    s->nruns = s->idx.nrows;
    int cd = vb_csv_col(&s->idx, VB_COL_RUN_DIR), cs = vb_csv_col(&s->idx, VB_COL_STATUS);
    int ce = vb_csv_col(&s->idx, VB_COL_EXIT_CODE), cf = vb_csv_col(&s->idx, VB_INDEX_FAILURE_COLUMN);
    for (int i = 0; i < s->nruns; i++) {
        rp_run *r = &s->runs[i];
        snprintf(r->status, sizeof r->status, "%s", vb_csv_get(&s->idx, i, cs));
        snprintf(r->exit_code, sizeof r->exit_code, "%s", vb_csv_get(&s->idx, i, ce));
        if (strcmp(r->status, "completed") != 0) {
            failure_of(r, vb_csv_get(&s->idx, i, cf));
            char log[VB_PATH_MAX];
            const char *rd = vb_csv_get(&s->idx, i, cd), *b = strrchr(rd, '/');
            vb_snprintf(log, sizeof log, "%s/logs/%s.log", s->path, b ? b + 1 : rd);
            vb_log_last_line(log, VB_SWEEP_STOP_LINE, r->last_line, sizeof r->last_line);
        }
        char dir[VB_PATH_MAX], why[VB_PATH_MAX + 128];
        const char *rd = vb_csv_get(&s->idx, i, cd);
        if (vb_sweep_run_path(dir, sizeof dir, s->path, rd, why, sizeof why) != 0)
            vb_die_input("report: %s/index.csv: record %d: %s", s->path, i + 2, why);
        if (strcmp(r->status, "completed") == 0) {
            if (!vb_dir_exists(dir)) {
                rp_problem(d, "%s: listed as completed in index.csv but missing", dir);
                snprintf(r->name, sizeof r->name, "%s", rd);
                vb_snprintf(r->dir, sizeof r->dir, "%s", dir);
                continue;
            }
            link_note(d, s->path, rd);
            rp_run_load(r, dir, d);
            snprintf(r->status, sizeof r->status, "completed"); /* index.csv is the sweep's record */
        } else {
            vb_snprintf(r->dir, sizeof r->dir, "%s", dir);
            const char *b = strrchr(rd, '/');
            snprintf(r->name, sizeof r->name, "%s", b ? b + 1 : rd);
        }
    }
}

static void load_json(rp_sweep *s) {
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, s->path, VB_SWEEP_JSON);
    if (!vb_file_exists(path)) return;
    const char *why;
    cJSON *root = vb_read_json_object(path, &why);
    if (!root) vb_die_input("report: %s: %s", path, strcmp(why, "not a JSON object") ? why : "not valid JSON");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
    const char *known[] = {VB_SWEEP_KINDS};
    for (size_t i = 0; cJSON_IsString(kind) && i < sizeof known / sizeof *known; i++)
        if (strcmp(kind->valuestring, known[i]) == 0) {
            snprintf(s->kind, sizeof s->kind, "%s", known[i]);
            snprintf(s->kind_why, sizeof s->kind_why, "from sweep.json");
        }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (cJSON_IsString(name)) snprintf(s->name, sizeof s->name, "%s", name->valuestring);
    const cJSON *nruns = cJSON_GetObjectItemCaseSensitive(root, "nruns");
    if (cJSON_IsNumber(nruns) && nruns->valuedouble >= 1 && nruns->valuedouble <= 1e7) s->planned = (int)nruns->valuedouble;
    cJSON_Delete(root);
}

/* Completed runs with equal swept keys form one point. */
static void group_points(rp_sweep *s) {
    s->pts = vb_calloc_check((size_t)s->nruns + 1, sizeof *s->pts);
    for (int i = 0; i < s->nruns; i++) {
        if (strcmp(s->runs[i].status, "completed") != 0 || !s->runs[i].dir[0]) continue;
        int p = 0;
        for (; p < s->npts; p++) {
            bool same = true;
            for (int k = 0; k < s->nkeys && same; k++) {
                int c = vb_csv_col(&s->idx, s->keys[k]);
                same = strcmp(vb_csv_get(&s->idx, i, c), vb_csv_get(&s->idx, s->pts[p].row, c)) == 0;
            }
            if (same) break;
        }
        rp_point *pt = &s->pts[p];
        if (p == s->npts) {
            s->npts++;
            pt->row = i;
            pt->runs = vb_calloc_check((size_t)s->nruns, sizeof *pt->runs);
        }
        pt->runs[pt->nruns++] = i;
    }
}

static void pool_samples(rp_sweep *s) {
    s->type = -1;
    for (int t = RP_FULL; t >= 0 && s->type < 0; t--)
        for (int i = 0; i < s->nruns; i++)
            if (s->runs[i].thr[t].n > 0) s->type = t;
    for (int p = 0; p < s->npts; p++) {
        rp_point *pt = &s->pts[p];
        vb_run_load *loads = vb_calloc_check((size_t)pt->nruns + 1, sizeof *loads);
        for (int k = 0; k < pt->nruns; k++) {
            const rp_run *r = &s->runs[pt->runs[k]];
            if (s->type >= 0) rp_samples_append_run(&pt->thr, &r->thr[s->type], k);
            rp_samples_append_run(&pt->exposed, &r->exposed, k);
            if (s->type >= 0) loads[k] = r->load[s->type];
        }
        pt->load = vb_run_load_mean(loads, pt->nruns);
        free(loads);
        pt->est = rp_mean_est(&pt->thr);
        pt->ranks = sw_num(s, pt, "ranks");
        if (!isfinite(pt->ranks)) pt->ranks = s->runs[pt->runs[0]].ranks;
    }
}

/* What must agree across rank counts: the hardware and software identity.
 * machine_key also holds ranks, affinity and OpenMP threads, which a sweep
 * changes with the rank count on purpose (threads_per_rank), so it is only
 * required to agree between runs with the same number of ranks. */
static void identity_key(const rp_run *r, char *out, size_t n) {
    snprintf(out, n, "%s|%s|%s|%s", r->cpu_model, r->backend, r->blas_coretype, r->gpu_name);
}

static bool runs_incomparable(const rp_run *a, const rp_run *b) {
    char ka[1024], kb[1024];
    identity_key(a, ka, sizeof ka);
    identity_key(b, kb, sizeof kb);
    if (strcmp(ka, kb) != 0) return true;
    return a->ranks == b->ranks && strcmp(a->machine_key, b->machine_key) != 0;
}

static void check_fingerprints(rp_sweep *s) {
    const rp_run *ref = NULL;
    for (int i = 0; i < s->nruns && !ref; i++)
        if (s->runs[i].has_json && s->runs[i].machine_key[0]) ref = &s->runs[i];
    if (!ref) return;
    for (int p = 0; p < s->npts; p++) {
        rp_point *pt = &s->pts[p];
        for (int a = 0; a < pt->nruns; a++) {
            const rp_run *r = &s->runs[pt->runs[a]];
            if (!r->machine_key[0]) continue;
            for (int i = 0; i < s->nruns && !pt->fp_differs; i++) {
                const rp_run *o = &s->runs[i];
                /* against the reference's identity, and every run of the same rank count */
                if (o->machine_key[0] && (o == ref || o->ranks == r->ranks) && runs_incomparable(r, o))
                    pt->fp_differs = true;
            }
        }
        if (pt->fp_differs) s->fp_differs = true;
    }
}

/* Threads and cores per rank as the sweep set them, when they change. */
static void threads_note(rp_doc *d, const rp_sweep *s) {
    char text[1024] = "";
    size_t k = 0;
    bool varies = false;
    const rp_run *first = NULL;
    for (int i = 0; i < s->nruns; i++) {
        const rp_run *r = &s->runs[i];
        if (!r->has_json || !r->omp_threads[0]) continue;
        if (!first) first = r;
        if (strcmp(r->omp_threads, first->omp_threads) != 0 || strcmp(r->affinity_cores, first->affinity_cores) != 0)
            varies = true;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = s->runs[j].has_json && s->runs[j].ranks == r->ranks &&
                   strcmp(s->runs[j].omp_threads, r->omp_threads) == 0 &&
                   strcmp(s->runs[j].affinity_cores, r->affinity_cores) == 0;
        if (seen) continue;
        int w = snprintf(text + k, sizeof text - k, "%s%g ranks: %s threads, %s cores per rank", k ? "; " : "",
                         r->ranks, r->omp_threads, r->affinity_cores[0] ? r->affinity_cores : "?");
        if (w < 0 || (size_t)w >= sizeof text - k) break;
        k += (size_t)w;
    }
    if (varies)
        rp_para(d, "Threads and cores per rank change across the sweep (%s): per-rank throughput is not per-core "
                   "throughput; read scaling against the whole allocation.",
                text);
}

static bool batch_constant(const rp_sweep *s, bool local) {
    double first = NAN;
    for (int i = 0; i < s->nruns; i++) {
        double b = local ? s->runs[i].local_batch : s->runs[i].global_batch;
        if (strcmp(s->runs[i].status, "completed") != 0 || !isfinite(b)) continue;
        if (!isfinite(first))
            first = b;
        else if (b != first)
            return false;
    }
    return isfinite(first);
}

/* Only bucket_cap_mb / noddp variants: the DDP bucket scenario. */
static bool variants_are_buckets(const rp_sweep *s) {
    int c = vb_csv_col(&s->idx, VB_COL_VARIANT);
    for (int i = 0; i < s->idx.nrows; i++) {
        const char *v = vb_csv_get(&s->idx, i, c);
        if (strcmp(v, "baseline") != 0 && strncmp(v, "bucket_cap_mb=", 14) != 0 && strncmp(v, "noddp=", 6) != 0)
            return false;
    }
    return true;
}

static void infer_kind(rp_sweep *s) {
    if (s->kind[0]) return;
    /* index.csv's facts (and the runs' summary.csv for the batch), judged
     * by the rule the sweep itself uses (results.h) */
    vb_sweep_facts f = {
        .layouts = vb_csv_col(&s->idx, VB_COL_TENSOR_PARALLEL) >= 0,
        .variants = vb_csv_col(&s->idx, VB_COL_VARIANT) >= 0,
        .ranks_vary = sw_key_varies(s, "ranks"),
        .npoints = s->npts,
    };
    f.variants_ddp_only = f.variants && variants_are_buckets(s);
    if (f.ranks_vary) f.fixed_batch = batch_constant(s, true) ? 1 : batch_constant(s, false) ? 2 : 0;
    const char *why;
    const char *k = vb_sweep_kind(&f, &why);
    snprintf(s->kind, sizeof s->kind, "%s", k);
    snprintf(s->kind_why, sizeof s->kind_why, "inferred: %s", why);
}

static void free_sweep(rp_sweep *s) {
    for (int i = 0; i < s->nruns; i++) rp_run_free(&s->runs[i]);
    for (int p = 0; p < s->npts; p++) {
        rp_samples_free(&s->pts[p].thr);
        rp_samples_free(&s->pts[p].exposed);
        free(s->pts[p].runs);
    }
    free(s->pts);
    free(s->runs);
    free(s->keys);
    vb_csv_free(&s->idx);
}

/* What the sweep summarises: runs, commits, fingerprints, versions. */
static void provenance_section(rp_doc *d, rp_sweep *s) {
    rp_heading(d, 1, "Runs and provenance");
    const char *cols[] = {"run", "status", "repeat", "ranks", "config", "git_commit", "machine_key", "host", "samples"};
    rp_table *t = rp_table_new("runs.csv", "Every run of the sweep", 9, cols);
    int crep = vb_csv_col(&s->idx, VB_COL_REPEAT), crk = vb_csv_col(&s->idx, VB_COL_RANKS);
    bool commits_differ = false, versions_differ = false;
    const rp_run *ref = NULL;
    for (int i = 0; i < s->nruns; i++) {
        const rp_run *r = &s->runs[i];
        rp_table_add(t, "%s", r->name);
        rp_table_add(t, "%s", r->status);
        rp_table_add(t, "%s", vb_csv_get(&s->idx, i, crep));
        rp_table_add(t, "%s", vb_csv_get(&s->idx, i, crk));
        rp_table_add(t, "%s", r->config);
        rp_table_add(t, "%s%s", r->git_commit, strcmp(r->git_dirty, "true") == 0 ? " (dirty)" : "");
        rp_table_add(t, "%s", r->machine_key);
        rp_table_add(t, "%s", r->host);
        rp_table_add(t, "%d", s->type >= 0 ? r->thr[s->type].n : 0);
        if (!r->has_json) continue;
        if (!ref) ref = r;
        if (strcmp(r->git_commit, ref->git_commit) != 0) commits_differ = true;
        if (strcmp(r->versions, ref->versions) != 0) versions_differ = true;
    }
    rp_add_table(d, t);
    if (ref) {
        rp_para(d, "Reference run for provenance: %s.", ref->name);
        rp_run_provenance(d, ref);
    }
    threads_note(d, s);
    if (commits_differ) rp_para(d, "WARNING: the runs were built from different commits (see runs.csv).");
    if (versions_differ) rp_para(d, "WARNING: library versions differ between runs (see each run's section).");
    if (s->fp_differs)
        rp_para(d, "WARNING: fingerprints differ: some points ran on a different CPU model, backend, BLAS core type "
                   "or GPU than %s, or runs with the same number of ranks have different machine_key; rows "
                   "marked 'fingerprint differs' are not comparable with the others.",
                ref ? ref->name : "the first run");
}

static void failed_section(rp_doc *d, const rp_sweep *s, const char *out_dir) {
    int nfail = 0;
    for (int i = 0; i < s->nruns; i++) nfail += strcmp(s->runs[i].status, "completed") != 0;
    if (!nfail) return;
    rp_heading(d, 1, "Runs that did not complete (listed, not plotted)");
    const char *cols[] = {"run_index", "run", "status", "exit_code", "failure", "last_log_line", "log"};
    rp_table *t = rp_table_new("failed_runs.csv", "Runs whose status is not completed", 7, cols);
    for (int i = 0; i < s->nruns; i++) {
        const rp_run *r = &s->runs[i];
        if (strcmp(r->status, "completed") == 0) continue;
        char log[VB_PATH_MAX], rel[VB_PATH_MAX];
        vb_snprintf(log, sizeof log, "%s/logs/%s.log", s->path, r->name);
        if (vb_file_exists(log))
            rp_relpath(out_dir, log, rel, sizeof rel);
        else
            snprintf(rel, sizeof rel, "(no log)");
        rp_table_add(t, "%s", vb_csv_get(&s->idx, i, vb_csv_col(&s->idx, VB_COL_RUN_INDEX)));
        rp_table_add(t, "%s", r->name);
        rp_table_add(t, "%s", r->status);
        rp_table_add(t, "%s", r->exit_code);
        rp_table_add(t, "%s", r->failure);
        rp_table_add(t, "%s", r->last_line);
        rp_table_add(t, "%s", rel);
    }
    rp_add_table(d, t);
}

static void per_run_sections(rp_doc *d, const rp_sweep *s, const rp_opts *o) {
    rp_heading(d, 1, "Per run");
    /* one timeline figure: the first completed run of the most ranks */
    const rp_run *drawn = NULL;
    for (int i = 0; i < s->nruns; i++) {
        const rp_run *r = &s->runs[i];
        if (strcmp(r->status, "completed") != 0 || !r->dir[0]) continue;
        if (!drawn || r->ranks > drawn->ranks) drawn = r;
    }
    for (int i = 0; i < s->nruns; i++) {
        const rp_run *r = &s->runs[i];
        if (strcmp(r->status, "completed") != 0 || !r->dir[0] || !vb_dir_exists(r->dir)) continue;
        rp_heading(d, 2, "%s", r->name);
        char prefix[VB_PATH_MAX];
        vb_snprintf(prefix, sizeof prefix, "runs/%s/", r->name);
        rp_run_sections(d, r, o, prefix, true, 3, r == drawn);
    }
}

/* The sweep point that run `name` belongs to, or NULL. */
static const rp_point *point_of_run(const rp_sweep *s, const char *name) {
    for (int k = 0; k < s->npts; k++)
        for (int a = 0; a < s->pts[k].nruns; a++)
            if (strcmp(s->runs[s->pts[k].runs[a]].name, name) == 0) return &s->pts[k];
    return NULL;
}

/* `vitbench model` wrote model.csv into the sweep: each point's predicted
 * throughput with the model's interval beside what it measured with its
 * 95% interval (one row per run, as model.csv), and one figure with both:
 * against ranks on log axes when every run has its own rank count, else
 * point by point. Nothing when there is no model.csv. */
static void model_section(rp_doc *d, const rp_sweep *s, const rp_opts *o) {
    vb_csv m;
    if (rp_read_csv(s->path, "model.csv", &m) != 0) return;
    const int cpt = vb_csv_col(&m, VB_COL_POINT), crk = vb_csv_col(&m, VB_COL_RANKS);
    const int cms = vb_csv_col(&m, VB_COL_MEASURED_SAMPLES_PER_S), cps = vb_csv_col(&m, VB_COL_SAMPLES_PER_S);
    const int cme = vb_csv_col(&m, VB_COL_MEASURED_EFFICIENCY), cpe = vb_csv_col(&m, VB_COL_EFFICIENCY);
    const int cer = vb_csv_col(&m, VB_COL_REL_ERROR);
    /* the interval columns came with machine files; older model.csv files have none */
    const int clo = vb_csv_col(&m, VB_COL_SAMPLES_PER_S_LO), chi = vb_csv_col(&m, VB_COL_SAMPLES_PER_S_HI);
    if (cpt < 0 || crk < 0 || cms < 0 || cps < 0 || cme < 0 || cpe < 0 || cer < 0) {
        rp_problem(d, "%s/model.csv: not vitbench model's columns; no model section", s->path);
        vb_csv_free(&m);
        return;
    }
    rp_heading(d, 1, "Scaling model: predicted beside measured");
    rp_para(d, "From model.csv (vitbench model: collectives priced by commbench.csv fits or a machine file, compute "
               "scaled from a one-rank reference; see model.md for its inputs and assumptions). Measured: the "
               "point's mean samples/s with its 95%% interval; predicted: the model's interval (every input at "
               "either end of its uncertainty). rel_error_step = (predicted - measured) / measured step time.");
    const char *cols[] = {"point",           "ranks",           "measured_samples_per_s", "measured_lo",
                          "measured_hi",     "predicted_samples_per_s", "predicted_lo", "predicted_hi",
                          "measured_efficiency", "predicted_efficiency", "rel_error_step"};
    rp_table *t = rp_table_new("model_vs_measured.csv", "Predicted and measured throughput per run", 11, cols);
    /* ranks on the x axis when they tell the rows apart */
    bool by_ranks = true;
    for (int i = 0; i < m.nrows && by_ranks; i++)
        for (int k = 0; k < i && by_ranks; k++) by_ranks = strcmp(vb_csv_get(&m, i, crk), vb_csv_get(&m, k, crk)) != 0;
    vb_plot pl;
    vb_plot_init(&pl, "model_throughput", "Throughput: measured and predicted by the model",
                 by_ranks ? "ranks" : "point", "samples/s");
    pl.categorical = !by_ranks;
    pl.logx2 = pl.logy = by_ranks;
    vb_plot_series *sm = vb_plot_series_add(&pl, "measured", false);
    vb_plot_series *sp = vb_plot_series_add(&pl, "model", true);
    for (int i = 0; i < m.nrows; i++) {
        const rp_point *pt = point_of_run(s, vb_csv_get(&m, i, cpt));
        double ms = NAN, ps = NAN, plo = NAN, phi = NAN, rk = NAN;
        vb_csv_num(&m, i, cms, &ms);
        vb_csv_num(&m, i, cps, &ps);
        vb_csv_num(&m, i, crk, &rk);
        if (clo >= 0) vb_csv_num(&m, i, clo, &plo);
        if (chi >= 0) vb_csv_num(&m, i, chi, &phi);
        const double mlo = pt ? pt->est.lo : NAN, mhi = pt ? pt->est.hi : NAN;
        rp_table_add(t, "%s", vb_csv_get(&m, i, cpt));
        rp_table_add(t, "%s", vb_csv_get(&m, i, crk));
        rp_table_add(t, "%s", vb_csv_get(&m, i, cms));
        if (isfinite(mlo))
            rp_table_add(t, "%.6g", mlo);
        else
            rp_table_add(t, "%s", "");
        if (isfinite(mhi))
            rp_table_add(t, "%.6g", mhi);
        else
            rp_table_add(t, "%s", "");
        rp_table_add(t, "%s", vb_csv_get(&m, i, cps));
        rp_table_add(t, "%s", clo >= 0 ? vb_csv_get(&m, i, clo) : "");
        rp_table_add(t, "%s", chi >= 0 ? vb_csv_get(&m, i, chi) : "");
        rp_table_add(t, "%s", vb_csv_get(&m, i, cme));
        rp_table_add(t, "%s", vb_csv_get(&m, i, cpe));
        rp_table_add(t, "%s", vb_csv_get(&m, i, cer));
        const double x = by_ranks ? rk : i;
        vb_plot_point(sm, x, ms, mlo, mhi, vb_csv_get(&m, i, cpt));
        vb_plot_point(sp, x, ps, plo, phi, vb_csv_get(&m, i, cpt));
    }
    double *err = vb_calloc_check((size_t)m.nrows + 1, sizeof *err);
    int nerr = 0;
    for (int i = 0; i < m.nrows; i++) {
        double e;
        if (vb_csv_num(&m, i, cer, &e)) err[nerr++] = fabs(e);
    }
    if (nerr) {
        double big_r = -1, big_m = NAN, big_p = NAN;
        for (int i = 0; i < m.nrows; i++) {
            double r, ms, ps;
            if (vb_csv_num(&m, i, crk, &r) && r > big_r && vb_csv_num(&m, i, cms, &ms) && vb_csv_num(&m, i, cps, &ps))
                big_r = r, big_m = ms, big_p = ps;
        }
        rp_summary(d, "Scaling model: median |error| %.3g%% of the measured step time over %d run%s (max %.3g%%); at %g "
                      "ranks it predicts %.4g samples/s against %.4g measured.",
                   100 * vb_stats_median(err, nerr), nerr, nerr == 1 ? "" : "s", 100 * vb_stats_max(err, nerr), big_r,
                   big_p, big_m);
    }
    free(err);
    rp_add_table(d, t);
    rp_figure(d, o, &pl);
    vb_plot_free(&pl);
    vb_csv_free(&m);
}

/* The summary's findings and warnings about the sweep as a whole, and the
 * caption its figures carry: called before the kind's analysis adds its own. */
static void sweep_findings(rp_doc *d, rp_sweep *s) {
    rp_run **done = vb_calloc_check((size_t)s->nruns + 1, sizeof *done);
    int ndone = 0, nfail = 0;
    bool over = false;
    const rp_run *ref = NULL;
    for (int i = 0; i < s->nruns; i++) {
        rp_run *r = &s->runs[i];
        if (strcmp(r->status, "completed") != 0) {
            nfail++;
            continue;
        }
        done[ndone++] = r;
        over = over || r->oversubscribed;
        if (!ref && r->has_json) ref = r;
    }
    rp_caption(d, done, ndone, over);
    (void)nfail; /* failure_findings said how many, and why */
    rp_run_warnings(d, done, ndone, true);
    free(done);
    if (s->fp_differs)
        rp_warning(d, "fingerprints differ: some points ran on another CPU model, backend, BLAS kernel or thread "
                      "count, and their throughputs are not comparable with the rest");
    int wide = 0;
    const rp_point *widest = NULL;
    for (int i = 0; i < s->npts; i++) {
        const rp_est *e = &s->pts[i].est;
        if (isfinite(e->lo) && e->mean > 0 && (e->hi - e->lo) / 2 > 0.1 * e->mean) {
            wide++;
            if (!widest) widest = &s->pts[i];
        }
    }
    if (wide) {
        char lab[256];
        sw_label(s, widest, NULL, lab, sizeof lab);
        rp_warning(d, "%d point%s a 95%% interval wider than +-10%% of the mean (e.g. %s): more repeats would "
                      "narrow %s",
                   wide, wide == 1 ? " has" : "s have", lab, wide == 1 ? "it" : "them");
    }
    /* what bounds FULL, at the largest point (the baseline among equals) */
    const rp_point *big = NULL;
    for (int i = 0; i < s->npts; i++) {
        const rp_point *p = &s->pts[i];
        const char *var = sw_val(s, p, VB_COL_VARIANT); /* NULL without a variant column */
        if (!big || p->ranks > big->ranks || (p->ranks == big->ranks && var && strcmp(var, "baseline") == 0))
            big = p;
    }
    if (big) {
        rp_samples pooled[RP_NTYPES];
        memset(pooled, 0, sizeof pooled);
        for (int a = 0; a < big->nruns; a++)
            for (int k = 0; k < RP_NTYPES; k++) {
                const rp_samples *x = &s->runs[big->runs[a]].thr[k];
                rp_samples_append_run(&pooled[k], x, a);
            }
        char lab[256], where[300];
        sw_label(s, big, NULL, lab, sizeof lab);
        snprintf(where, sizeof where, " at %s", lab[0] ? lab : "the sweep's point");
        rp_run **big_runs = vb_calloc_check((size_t)big->nruns + 1, sizeof *big_runs);
        for (int a = 0; a < big->nruns; a++) big_runs[a] = &s->runs[big->runs[a]];
        rp_cause c;
        rp_cause_of(big_runs, big->nruns, RP_FULL, &c);
        free(big_runs);
        rp_bound_finding(d, pooled, where, &c);
        for (int k = 0; k < RP_NTYPES; k++) rp_samples_free(&pooled[k]);
    }
}

/* Runs that did not complete, counted by class ("timeout (3), exit 2 (1)");
 * when none completed, the report's first finding: N of N failed, with the
 * class and the last log line, instead of a report of nothing. */
static void failure_findings(rp_doc *d, const rp_sweep *s) {
    int nfail = 0;
    char classes[512] = "";
    size_t k = 0;
    bool *done = vb_calloc_check((size_t)s->nruns + 1, sizeof *done);
    const rp_run *last = NULL;
    for (int i = 0; i < s->nruns; i++) {
        if (strcmp(s->runs[i].status, "completed") == 0) continue;
        nfail++;
        last = &s->runs[i];
        if (done[i]) continue;
        int count = 0;
        for (int j = i; j < s->nruns; j++)
            if (strcmp(s->runs[j].status, "completed") != 0 && strcmp(s->runs[j].failure, s->runs[i].failure) == 0)
                done[j] = true, count++;
        int w = snprintf(classes + k, sizeof classes - k, "%s%s (%d)", k ? ", " : "", s->runs[i].failure, count);
        if (w > 0 && (size_t)w < sizeof classes - k) k += (size_t)w;
    }
    free(done);
    if (!nfail) return;
    if (nfail < s->nruns) {
        rp_warning(d, "%d of %d runs did not complete: %s (listed under Runs that did not complete, never plotted)",
                   nfail, s->nruns, classes);
        return;
    }
    const rp_run *with_line = last;
    for (int i = s->nruns - 1; i >= 0 && (!with_line || !with_line->last_line[0]); i--)
        if (s->runs[i].last_line[0]) with_line = &s->runs[i];
    if (with_line && with_line->last_line[0])
        rp_summary(d, "%d of %d runs failed: %s; nothing was measured. The last line of %s's log: %s", nfail, s->nruns,
                   classes, with_line->name, with_line->last_line);
    else
        rp_summary(d, "%d of %d runs failed: %s; nothing was measured, and their logs say nothing more.", nfail,
                   s->nruns, classes);
}

void rp_sweep_report(rp_doc *d, const char *path, const rp_opts *o) {
    rp_sweep s;
    memset(&s, 0, sizeof s);
    vb_snprintf(s.path, sizeof s.path, "%s", path);
    const char *b = strrchr(path, '/');
    snprintf(s.name, sizeof s.name, "%s", b && b[1] ? b + 1 : path);
    load_json(&s);
    load_index(&s, d);
    group_points(&s);
    pool_samples(&s);
    check_fingerprints(&s);
    infer_kind(&s);

    int ncomp = 0;
    for (int i = 0; i < s.nruns; i++) ncomp += strcmp(s.runs[i].status, "completed") == 0;
    rp_para(d, "Sweep directory %s: kind %s (%s); %d runs, %d completed, %d points.", path, s.kind, s.kind_why,
            s.nruns, ncomp, s.npts);
    /* a sweep stopped before its plan ran out (Ctrl-C, a killed job): the
     * runs it never started are no part of any number here */
    if (s.planned > s.nruns)
        rp_warning(d, "%d of the %d runs the sweep planned never ran (it stopped after %d): every number here comes "
                      "from the %d that did; vitbench sweep --resume %s runs the rest",
                   s.planned - s.nruns, s.planned, s.nruns, s.nruns, path);
    failure_findings(d, &s);
    if (s.type < 0) {
        rp_para(d, "No completed run has timed trials in trials.csv: nothing to measure.");
    } else {
        rp_para(d, "Throughput samples: the per-trial %s samples_per_s of every timed trial (rank 0 rows of "
                   "trials.csv), pooled over the repeats of a point. Means carry a 95%% Student-t interval; "
                   "efficiency, speedup and communication overhead are ratios of means with a 95%% delta-method "
                   "interval (first-order Taylor, Welch-Satterthwaite degrees of freedom); flag and bucket "
                   "comparisons follow the verdict rule: the ratio of the runs' median throughputs with a 95%% "
                   "Welch t interval on the log scale, the runs as the unit. An empty interval means fewer than "
                   "two samples.",
                vb_trial_kinds[s.type].name);
        if (s.type != RP_FULL)
            rp_para(d, "WARNING: no FULL trials in these runs; %s trials are used instead.", vb_trial_kinds[s.type].name);
        sweep_findings(d, &s);
        rp_table *main_table = rp_kind_analysis(d, &s, o);
        if (main_table) rp_table_print(main_table, stdout);
    }
    model_section(d, &s, o);
    provenance_section(d, &s);
    failed_section(d, &s, o->out_dir);
    per_run_sections(d, &s, o);
    free_sweep(&s);
}
