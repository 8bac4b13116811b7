/* results.c: the run directory and run.json's failure mark (results.h); the
 * crash-safe writes themselves are fileio.c's. */
#include "core/results/results.h"

#include "core/util/outdir.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "core/util/common.h"

const vb_trial_kind_names vb_trial_kinds[VB_TRIAL_NKINDS] = {
    [VB_TRIAL_IO] = {"IO", "IO", "io"},
    [VB_TRIAL_SYNTHETIC] = {"SYNTHETIC", "synthetic", "synthetic"},
    [VB_TRIAL_FULL] = {"FULL", "full", "full"},
    [VB_TRIAL_VALIDATION] = {"VALIDATION", "validation", "validation"},
};

int vb_trial_kind_by_name(const char *name) {
    for (int k = 0; k < VB_TRIAL_NKINDS; k++)
        if (strcmp(name, vb_trial_kinds[k].name) == 0) return k;
    return -1;
}

const char *vb_trial_kind_list(void) {
    static char list[128];
    if (!list[0])
        for (int k = 0; k < VB_TRIAL_NKINDS; k++)
            vb_snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", vb_trial_kinds[k].name);
    return list;
}

const char *vb_sweep_kind(const vb_sweep_facts *f, const char **why) {
    const char *k, *w;
    if (f->layouts)
        k = "layouts", w = "layouts are swept";
    else if (f->variants && f->variants_ddp_only)
        k = "ddp_buckets", w = "variants change only bucket_cap_mb / noddp";
    else if (f->variants)
        k = "flags", w = "variants of a baseline";
    else if (f->ranks_vary && f->fixed_batch == 1)
        k = "weak_scaling", w = "ranks vary at a fixed local batch";
    else if (f->ranks_vary && f->fixed_batch == 2)
        k = "strong_scaling", w = "ranks vary at a fixed global batch";
    else if (f->npoints > 1)
        k = "matrix", w = "other keys are swept";
    else
        k = "single", w = "one point";
    if (why) *why = w;
    return k;
}

/* every name of the results schema (results.h) */
static const char *const k_run_files[] = {VB_RESULTS_NAMES};

/* name is file's stem + "_rank<digits>" + file's extension (CUPTI's copy
 * for rank k > 0, trials.c write_cupti) */
static bool is_rank_copy(const char *name, const char *file) {
    const char *dot = strrchr(file, '.');
    size_t stem = dot ? (size_t)(dot - file) : strlen(file);
    if (strncasecmp(name, file, stem) != 0 || strncasecmp(name + stem, "_rank", 5) != 0) return false;
    const char *p = name + stem + 5, *digits = p;
    while (*p >= '0' && *p <= '9') p++;
    return p > digits && strcasecmp(p, dot ? dot : "") == 0;
}

bool vb_run_file_reserved(const char *name) {
    for (size_t i = 0; i < sizeof k_run_files / sizeof k_run_files[0]; i++)
        if (strcasecmp(name, k_run_files[i]) == 0) return true;
    static const char *const cupti_files[] = {VB_CUPTI_FILES};
    for (size_t v = 0; v < sizeof cupti_files / sizeof *cupti_files; v++) {
        const char *file = cupti_files[v];
        if (strcasecmp(name, file) == 0 || is_rank_copy(name, file)) return true;
    }
    return false;
}

void vb_results_stamp(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    if (strftime(buf, n, "%Y%m%d-%H%M%S", &tm) == 0) vb_die_internal("results stamp: buffer of %zu bytes", n);
}

/* base, base-1, base-2 ... made with mkdirat in the open directory dirfd
 * (AT_FDCWD: out itself by its path), the first free one claimed: mkdir is
 * the atomic test-and-create, so if another run (or rank of another job, or
 * a sweep started in the same second) got there first we get EEXIST and
 * move on to the next suffix, and existing files are never touched. out/name
 * into dir. 0, or -1 with errno. */
static int claim_in(int dirfd, const char *out, const char *base, char *dir, size_t n, char *id, size_t idn) {
    for (int suffix = 0; suffix < 100000; suffix++) {
        char name[300];
        if (suffix == 0)
            vb_snprintf(name, sizeof name, "%s", base);
        else
            vb_snprintf(name, sizeof name, "%s-%d", base, suffix);
        char path[VB_PATH_MAX];
        int k = snprintf(path, sizeof path, "%s/%s", out, name);
        if (k < 0 || (size_t)k >= sizeof path || (size_t)k >= n) {
            errno = ENAMETOOLONG;
            return -1;
        }
        if (mkdirat(dirfd, dirfd == AT_FDCWD ? path : name, 0775) == 0) {
            vb_snprintf(dir, n, "%s", path);
            if (id) vb_snprintf(id, idn, "%s", name);
            return 0;
        }
        if (errno != EEXIST) return -1;
    }
    errno = EEXIST;
    return -1;
}

int vb_results_dir_claim(const char *out, const char *base, char *dir, size_t n, char *id, size_t idn) {
    if (vb_mkdir_p(out) != 0) return -1;
    return claim_in(AT_FDCWD, out, base, dir, n, id, idn);
}

int vb_results_dir_claim_stamped(const char *out, const char *prefix, char *dir, size_t n, char *id, size_t idn) {
    char stamp[32], base[256];
    vb_results_stamp(stamp, sizeof stamp);
    vb_snprintf(base, sizeof base, "%s_%s", prefix, stamp);
    return vb_results_dir_claim(out, base, dir, n, id, idn);
}

void vb_run_dir_create(const char *output_dir, const char *run_name, const char *prefix, char *dir, size_t n,
                       char *run_id, size_t idn) {
    const char *out = output_dir && output_dir[0] ? output_dir : VB_RESULTS_DEFAULT_DIR;
    char base[256];
    if (run_name && run_name[0]) {
        if (strchr(run_name, '/')) vb_die_input("run_name '%s': must not contain '/'", run_name);
        vb_snprintf(base, sizeof base, "%s", run_name);
    } else {
        char stamp[32];
        vb_results_stamp(stamp, sizeof stamp);
        vb_snprintf(base, sizeof base, "%s_%s", prefix && prefix[0] ? prefix : "run", stamp);
    }
    /* started by a sweep: out lies below the sweep's directory, which holds
     * no link on the way (core/util/outdir.h): every directory from there
     * down opened without following one, the run's own made with mkdirat */
    const char *tree = getenv(VB_RESULTS_TREE_ENV);
    const size_t tl = tree ? strlen(tree) : 0;
    int rc;
    if (tl > 0 && strncmp(out, tree, tl) == 0 && out[tl] == '/') {
        vb_outdir d;
        vb_outdir_open_or_die(&d, tree, out + tl + 1, "run");
        rc = claim_in(d.fd, out, base, dir, n, run_id, idn);
        int err = errno;
        vb_outdir_close(&d);
        errno = err;
    } else {
        if (vb_mkdir_p(out) != 0) vb_die_input("output_dir %s: cannot create directory (%s)", out, strerror(errno));
        rc = vb_results_dir_claim(out, base, dir, n, run_id, idn);
    }
    if (rc != 0) {
        if (errno == EEXIST) vb_die_input("output_dir %s: too many runs named %s", out, base);
        if (errno == ENAMETOOLONG) vb_die_input("output_dir %s: path too long", out);
        vb_die_input("output_dir %s: cannot create run directory %s/%s (%s)", out, out, base, strerror(errno));
    }
}

bool vb_index_column_is_swept(const char *name) {
    static const char *const not_swept[] = {VB_INDEX_NOT_SWEPT};
    for (size_t i = 0; i < sizeof not_swept / sizeof not_swept[0]; i++)
        if (strcmp(name, not_swept[i]) == 0) return false;
    return true;
}

int vb_run_json_mark_failed(const char *path, const char *why) {
    char *text = vb_read_file(path, NULL);
    if (!text) return -1;
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *st = j ? cJSON_GetObjectItemCaseSensitive(j, "status") : NULL;
    if (!cJSON_IsString(st)) {
        cJSON_Delete(j);
        return -1;
    }
    if (strcmp(st->valuestring, "running") != 0) {
        cJSON_Delete(j);
        return 0;
    }
    char now[32];
    vb_iso_time(now, sizeof now);
    cJSON_ReplaceItemInObjectCaseSensitive(j, "status", cJSON_CreateString("failed"));
    cJSON_DeleteItemFromObjectCaseSensitive(j, "end_time");
    cJSON_AddStringToObject(j, "end_time", now);
    cJSON_DeleteItemFromObjectCaseSensitive(j, "failure");
    cJSON_AddStringToObject(j, "failure", why);
    char *out = cJSON_Print(j);
    cJSON_Delete(j);
    if (!out) return -1;
    size_t len = strlen(out);
    char *withnl = malloc(len + 2);
    if (!withnl) {
        cJSON_free(out);
        return -1;
    }
    memcpy(withnl, out, len);
    memcpy(withnl + len, "\n", 2);
    cJSON_free(out);
    /* the run's own "running" write reserved room for this (run_json.c): a
     * run that died of a full disk still gets its end recorded */
    int rc = vb_write_reserved(path, withnl, 0);
    free(withnl);
    return rc == 0 ? 1 : -1;
}
