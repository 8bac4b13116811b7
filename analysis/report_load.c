/* report_load.c: what the report reads from one run directory (report.h).
 * Columns are looked up by name, so directories written before a column
 * existed read as "unknown" for it instead of shifting the others. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/report.h"
#include "analysis/rundir.h"
#include "analysis/trials_csv.h"
#include "core/prof/fingerprint.h"
#include "core/results/results.h"


int rp_read_csv(const char *dir, const char *name, vb_csv *t) {
    char err[VB_PATH_MAX + 256];
    int rc = vb_dir_read_csv(dir, name, t, err, sizeof err);
    if (rc == -2) vb_die_input("report: %s/%s: malformed CSV: %s", dir, name, err);
    return rc == 0 ? 0 : -1;
}

bool rp_is_warmup(const char *s) { return strcmp(s, "1") == 0 || strcmp(s, "true") == 0 || strcmp(s, "True") == 0; }

static void jstr(const cJSON *o, const char *key, char *dst, size_t n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(v))
        snprintf(dst, n, "%s", v->valuestring);
    else if (cJSON_IsNumber(v))
        snprintf(dst, n, "%.15g", v->valuedouble);
    else if (cJSON_IsBool(v))
        snprintf(dst, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
}

static void load_versions(rp_run *r, const cJSON *v) {
    size_t k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        char val[256] = "";
        jstr(v, it->string, val, sizeof val);
        int w = snprintf(r->versions + k, sizeof r->versions - k, "%s%s %s", k ? ", " : "", it->string, val);
        if (w < 0 || (size_t)w >= sizeof r->versions - k) break;
        k += (size_t)w;
    }
}

/* "a, b, c" of a list of strings (NULL when empty) */
static char *joined(const cJSON *list, const char *key) {
    size_t n = 1;
    const cJSON *it;
    cJSON_ArrayForEach(it, list) {
        const cJSON *v = key ? cJSON_GetObjectItemCaseSensitive(it, key) : it;
        if (cJSON_IsString(v)) n += strlen(v->valuestring) + 2;
    }
    if (n == 1) return NULL;
    char *s = vb_calloc_check(n, 1);
    cJSON_ArrayForEach(it, list) {
        const cJSON *v = key ? cJSON_GetObjectItemCaseSensitive(it, key) : it;
        if (!cJSON_IsString(v)) continue;
        if (*s) strcat(s, "; ");
        strcat(s, v->valuestring);
    }
    return s;
}

/* vitbench import's record: where the run came from, what is not known */
static void load_imported(rp_run *r, const cJSON *im) {
    if (!cJSON_IsObject(im)) return;
    const cJSON *prog = cJSON_GetObjectItemCaseSensitive(im, "program");
    snprintf(r->imported, sizeof r->imported, "%s", cJSON_IsString(prog) ? prog->valuestring : "another program");
    r->imported_from = joined(cJSON_GetObjectItemCaseSensitive(im, "sources"), "path");
    r->imported_unknown = joined(cJSON_GetObjectItemCaseSensitive(im, "unknown"), NULL);
}

static void load_json(rp_run *r, rp_doc *d) {
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, r->dir, VB_RUN_JSON);
    const char *why;
    cJSON *root = vb_read_json_object(path, &why);
    if (!root && !vb_file_exists(path)) {
        rp_problem(d, "%s: missing (no provenance: config, commit, fingerprint unknown)", path);
        return;
    }
    if (!root) vb_die_input("report: %s: %s", path, strcmp(why, "not a JSON object") ? why : "not valid JSON");
    r->has_json = true;
    if (!strcmp(r->status, "unknown")) jstr(root, "status", r->status, sizeof r->status);
    jstr(root, "git_commit", r->git_commit, sizeof r->git_commit);
    jstr(root, "host", r->host, sizeof r->host);
    jstr(root, "backend", r->backend, sizeof r->backend);
    char cl[4096] = "";
    jstr(root, "command_line", cl, sizeof cl);
    r->command_line = vb_strdup_check(cl);
    jstr(cJSON_GetObjectItemCaseSensitive(root, "config"), "config", r->config, sizeof r->config);
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(root, "parallel");
    jstr(par, "grad_reduce_group", r->grad_reduce_group, sizeof r->grad_reduce_group);
    jstr(par, "parallel_order", r->parallel_order, sizeof r->parallel_order);
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(root, "fingerprint");
    jstr(fp, "machine_key", r->machine_key, sizeof r->machine_key);
    jstr(fp, "cpu_model", r->cpu_model, sizeof r->cpu_model);
    jstr(fp, "affinity_cores", r->affinity_cores, sizeof r->affinity_cores);
    jstr(fp, "omp_threads", r->omp_threads, sizeof r->omp_threads);
    jstr(fp, "blas", r->blas, sizeof r->blas);
    jstr(fp, "blas_coretype", r->blas_coretype, sizeof r->blas_coretype);
    jstr(fp, "compiler", r->compiler, sizeof r->compiler);
    jstr(fp, "gpu_name", r->gpu_name, sizeof r->gpu_name);
    jstr(fp, "cpu_vector", r->cpu_vector, sizeof r->cpu_vector);
    jstr(fp, "blas_vector", r->blas_vector, sizeof r->blas_vector);
    jstr(fp, "blas_rule", r->blas_rule, sizeof r->blas_rule);
    jstr(fp, "blas_library_core", r->blas_library_core, sizeof r->blas_library_core);
    if (!r->blas_vector[0]) /* runs from before the field: the table knows the kernel */
        snprintf(r->blas_vector, sizeof r->blas_vector, "%s", vb_blas_core_vector(r->blas_coretype));
    jstr(fp, "git_dirty", r->git_dirty, sizeof r->git_dirty);
    if (!r->omp_threads[0]) jstr(root, "omp_max_threads", r->omp_threads, sizeof r->omp_threads);
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "threads");
    r->oversubscribed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(th, "oversubscribed"));
    /* the team a rank was given and the one it ran (runs from before the
     * choice recorded per_rank alone) */
    const cJSON *team = cJSON_GetObjectItemCaseSensitive(th, "team"), *used = cJSON_GetObjectItemCaseSensitive(th, "per_rank");
    const cJSON *wait = cJSON_GetObjectItemCaseSensitive(th, "probe_wait_share");
    if (cJSON_IsNumber(used) && used->valuedouble >= 1 && used->valuedouble < 1e6) r->threads_used = (int)used->valuedouble;
    r->threads_team = cJSON_IsNumber(team) && team->valuedouble >= 1 && team->valuedouble < 1e6 ? (int)team->valuedouble
                                                                                               : r->threads_used;
    if (cJSON_IsNumber(wait) && wait->valuedouble >= 0 && wait->valuedouble < 1) r->probe_wait = wait->valuedouble;
    load_versions(r, cJSON_GetObjectItemCaseSensitive(root, "versions"));
    load_imported(r, cJSON_GetObjectItemCaseSensitive(root, "imported"));
    cJSON_Delete(root);
}

static double num_col(const vb_csv *t, int row, const char *name) {
    double x;
    return vb_csv_num(t, row, vb_csv_col(t, name), &x) ? x : NAN;
}

static void str_col(const vb_csv *t, int row, const char *name, char *dst, size_t n) {
    const char *s = vb_csv_get(t, row, vb_csv_col(t, name));
    if (*s) snprintf(dst, n, "%s", s);
}

/* The FULL row describes the run; any row has the same config columns. */
static void load_summary(rp_run *r, rp_doc *d) {
    vb_csv t;
    if (rp_read_csv(r->dir, VB_SUMMARY_CSV, &t) != 0) {
        rp_problem(d, "%s/summary.csv: missing (batch sizes, layout and memory unknown)", r->dir);
        return;
    }
    int row = 0, ct = vb_csv_col(&t, VB_COL_TRIAL_TYPE);
    for (int i = 0; i < t.nrows; i++)
        if (strcmp(vb_csv_get(&t, i, ct), "FULL") == 0) row = i;
    if (t.nrows > 0) {
        r->ranks = num_col(&t, row, "ranks");
        r->tp = num_col(&t, row, "tp");
        r->cp = num_col(&t, row, "cp");
        r->dp = num_col(&t, row, "dp");
        r->local_batch = num_col(&t, row, "local_batch_size");
        r->global_batch = num_col(&t, row, "global_batch_size");
        r->peak_mem = num_col(&t, row, "peak_mem_bytes");
        r->tflops = num_col(&t, row, "achieved_tflop_per_s");
        str_col(&t, row, "noddp", r->noddp, sizeof r->noddp);
        str_col(&t, row, "bucket_cap_mb", r->bucket_cap_mb, sizeof r->bucket_cap_mb);
        if (!r->machine_key[0]) str_col(&t, row, "machine_key", r->machine_key, sizeof r->machine_key);
        if (!r->config[0]) str_col(&t, row, "config", r->config, sizeof r->config);
    }
    vb_csv_free(&t);
}

/* Timed trials as rank 0 saw them (benchy's numbers), through the reader
 * compare uses, with its checks (trials_csv.h). */
static void load_trials(rp_run *r, rp_doc *d) {
    vb_trials t;
    char why[VB_PATH_MAX + 512];
    int rc = vb_trials_read(r->dir, &t, why, sizeof why);
    if (rc == -1 && errno == ENOENT) {
        rp_problem(d, "%s/trials.csv: missing (this run contributes no throughput samples)", r->dir);
    } else if (rc == -1) {
        rp_problem(d, "%s (this run contributes no throughput samples)", why); /* a FIFO, unreadable ... */
    } else if (rc != 0) {
        vb_trials_free(&t);
        vb_die_input("report: %s", why);
    } else {
        for (int k = 0; k < RP_NTYPES; k++)
            for (int i = 0; i < t.n[k]; i++) rp_push(&r->thr[k], t.rate[k][i]);
    }
    vb_trials_free(&t);
}

typedef struct step_val {
    int trial, step;
    double v;
} step_val;

static int cmp_step(const void *a, const void *b) {
    const step_val *x = a, *y = b;
    if (x->trial != y->trial) return x->trial < y->trial ? -1 : 1;
    return x->step < y->step ? -1 : x->step > y->step;
}

/* Exposed communication per timed FULL step, averaged over the ranks that
 * report it (DDP's wait is what the step pays; ranks differ by skew). */
static void load_exposed(rp_run *r) {
    vb_csv t;
    if (rp_read_csv(r->dir, VB_ITERATIONS_CSV, &t) != 0) return;
    int ct = vb_csv_col(&t, VB_COL_TRIAL_TYPE), cw = vb_csv_col(&t, VB_COL_WARMUP), ci = vb_csv_col(&t, VB_COL_TRIAL_INDEX);
    int cs = vb_csv_col(&t, VB_COL_STEP), ce = vb_csv_col(&t, VB_COL_COMM_EXPOSED_S);
    int cr = vb_csv_col(&t, VB_COL_RANK), cc = vb_csv_col(&t, VB_COL_ALLREDUCE_CALLS), cb = vb_csv_col(&t, VB_COL_ALLREDUCE_BYTES);
    step_val *sv = vb_malloc_check(((size_t)t.nrows + 1) * sizeof *sv);
    double *calls = vb_malloc_check(((size_t)t.nrows + 1) * sizeof *calls), *bytes = vb_malloc_check(((size_t)t.nrows + 1) * sizeof *bytes);
    int n = 0, nc = 0;
    /* what DDP did in each of rank 0's timed FULL steps: its bucket count says
     * whether two bucket_cap_mb settings ran the same configuration */
    for (int i = 0; cc >= 0 && cb >= 0 && i < t.nrows; i++) {
        double c, b;
        if (strcmp(vb_csv_get(&t, i, ct), "FULL") != 0 || rp_is_warmup(vb_csv_get(&t, i, cw))) continue;
        if (cr >= 0 && strcmp(vb_csv_get(&t, i, cr), "0") != 0) continue;
        if (!vb_csv_num(&t, i, cc, &c) || !vb_csv_num(&t, i, cb, &b)) continue;
        calls[nc] = c, bytes[nc++] = b;
    }
    r->buckets_per_step = nc ? vb_stats_median(calls, nc) : NAN;
    r->allreduce_bytes_per_step = nc ? vb_stats_median(bytes, nc) : NAN;
    free(calls), free(bytes);
    for (int i = 0; ce >= 0 && i < t.nrows; i++) {
        double ti, st, v;
        if (strcmp(vb_csv_get(&t, i, ct), "FULL") != 0 || rp_is_warmup(vb_csv_get(&t, i, cw))) continue;
        if (!vb_csv_num(&t, i, ci, &ti) || !vb_csv_num(&t, i, cs, &st) || !vb_csv_num(&t, i, ce, &v)) continue;
        sv[n++] = (step_val){(int)ti, (int)st, v};
    }
    qsort(sv, (size_t)n, sizeof *sv, cmp_step);
    for (int i = 0; i < n;) {
        int j = i;
        double sum = 0;
        while (j < n && sv[j].trial == sv[i].trial && sv[j].step == sv[i].step) sum += sv[j++].v;
        rp_push(&r->exposed, sum / (j - i));
        i = j;
    }
    free(sv);
    vb_csv_free(&t);
}

void rp_run_load(rp_run *r, const char *dir, rp_doc *d) {
    char keep_status[32], keep_exit[16];
    snprintf(keep_status, sizeof keep_status, "%s", r->status[0] ? r->status : "unknown");
    snprintf(keep_exit, sizeof keep_exit, "%s", r->exit_code);
    memset(r, 0, sizeof *r);
    snprintf(r->status, sizeof r->status, "%s", keep_status);
    snprintf(r->exit_code, sizeof r->exit_code, "%s", keep_exit);
    /* (a completed run has no failure class or log line to keep) */
    vb_snprintf(r->dir, sizeof r->dir, "%s", dir);
    const char *base = strrchr(dir, '/');
    snprintf(r->name, sizeof r->name, "%s", base && base[1] ? base + 1 : dir);
    r->ranks = r->tp = r->cp = r->dp = r->local_batch = r->global_batch = r->peak_mem = r->tflops = NAN;
    r->buckets_per_step = r->allreduce_bytes_per_step = NAN;
    r->probe_wait = NAN;
    load_json(r, d);
    load_summary(r, d);
    load_trials(r, d);
    load_exposed(r);
    for (int k = 0; k < RP_NTYPES; k++) vb_run_load_read(r->dir, vb_trial_kinds[k].name, "report", &r->load[k]);
}

void rp_run_free(rp_run *r) {
    for (int t = 0; t < RP_NTYPES; t++) rp_samples_free(&r->thr[t]);
    rp_samples_free(&r->exposed);
    free(r->command_line);
    r->command_line = NULL;
    free(r->imported_from);
    free(r->imported_unknown);
    r->imported_from = r->imported_unknown = NULL;
}

void rp_relpath(const char *from, const char *to, char *out, size_t n) {
    char a[PATH_MAX], b[PATH_MAX];
    if (!realpath(from, a) || !realpath(to, b)) {
        snprintf(out, n, "%s", to);
        return;
    }
    /* longest common prefix ending at a path component */
    size_t common = 0;
    for (size_t i = 0; a[i] && a[i] == b[i]; i++)
        if (a[i] == '/') common = i;
    size_t la = strlen(a), lb = strlen(b);
    if (strncmp(a, b, la) == 0 && (b[la] == '/' || b[la] == '\0')) common = la;
    else if (strncmp(a, b, lb) == 0 && a[lb] == '/') common = lb;
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = common; a[i]; i++)
        if (a[i] == '/' && k + 4 < n) k += (size_t)snprintf(out + k, n - k, "../");
    const char *rest = b + common;
    if (*rest == '/') rest++;
    snprintf(out + k, n - k, "%s", *rest ? rest : (k ? "" : "."));
    if (k && !*rest && out[k - 1] == '/') out[k - 1] = '\0';
}
