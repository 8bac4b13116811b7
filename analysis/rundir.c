/* rundir.c: run and sweep directories read for analysis/ (rundir.h). */
#include "analysis/rundir.h"

#include <stdlib.h>
#include <string.h>

#include "core/results/results.h"
#include "core/util/common.h"

void vb_dir_file(char *path, size_t n, const char *dir, const char *name) { vb_snprintf(path, n, "%s/%s", dir, name); }

int vb_sweep_run_path(char *path, size_t n, const char *sweep, const char *run_dir, char *why, size_t whyn) {
    const char *bad = NULL;
    if (!run_dir[0])
        bad = "is empty";
    else if (run_dir[0] == '/')
        bad = "is an absolute path";
    for (const char *c = run_dir; !bad && *c; c += strcspn(c, "/"), c += *c == '/')
        if (strncmp(c, "..", 2) == 0 && (c[2] == '/' || c[2] == '\0')) bad = "leaves the sweep with '..'";
    if (bad) {
        vb_errf(why, whyn, "run_dir '%s' %s: a sweep's runs are inside it (runs/<run>)", run_dir, bad);
        return -1;
    }
    vb_dir_file(path, n, sweep, run_dir);
    return 0;
}

static bool has(const char *dir, const char *name) {
    char p[VB_PATH_MAX];
    vb_dir_file(p, sizeof p, dir, name);
    return vb_file_exists(p);
}

vb_dir_kind vb_dir_kind_of(const char *path) {
    if (has(path, VB_INDEX_CSV)) return VB_DIR_SWEEP;
    if (has(path, VB_RUN_JSON) || has(path, VB_TRIALS_CSV) || has(path, VB_SUMMARY_CSV)) return VB_DIR_RUN;
    /* an imported profile (vitbench nsys): a run's ops and timeline, no trials */
    if (has(path, VB_OPS_CSV) || has(path, VB_TIMELINE_CSV)) return VB_DIR_RUN;
    return VB_DIR_NEITHER;
}

int vb_dir_read_csv(const char *dir, const char *name, vb_csv *t, char *err, size_t errn) {
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, dir, name);
    return vb_csv_read(path, t, err, errn);
}

cJSON *vb_read_json_object(const char *path, const char **why) {
    size_t len = 0;
    if (!vb_file_exists(path)) {
        *why = "no such file";
        return NULL;
    }
    char *text = vb_read_file(path, &len);
    if (!text) {
        *why = "cannot be read";
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        *why = "not a JSON object";
        return NULL;
    }
    *why = NULL;
    return j;
}

void vb_run_json_id(const char *run_dir, char *id, size_t n, bool *imported) {
    char path[VB_PATH_MAX];
    vb_dir_file(path, sizeof path, run_dir, VB_RUN_JSON);
    id[0] = '\0';
    const char *why;
    cJSON *j = vb_read_json_object(path, &why);
    const cJSON *v = j ? cJSON_GetObjectItemCaseSensitive(j, "run_id") : NULL;
    if (cJSON_IsString(v)) snprintf(id, n, "%s", v->valuestring);
    if (imported) *imported = cJSON_IsObject(j ? cJSON_GetObjectItemCaseSensitive(j, "imported") : NULL);
    cJSON_Delete(j);
}
