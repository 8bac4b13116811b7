/* step_reference.c: bench_step's compute reference directory (step_reference.h). */
#include "bench/dev/step_reference.h"

#include <cjson/cJSON.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/util/common.h"
#include "core/util/fileio.h"
#include "core/prof/fingerprint.h"
#include "core/results/results.h"

static void write_json(FILE *f, void *ctx) {
    char *text = ctx;
    fputs(text, f);
    fputc('\n', f);
}

typedef struct {
    const vb_step_reference *r;
} iter_ctx;

static void write_iterations(FILE *f, void *vc) {
    const iter_ctx *c = vc;
    fputs(VB_ITERATIONS_CSV_STEP_COLUMNS "\n", f);
    for (int i = 0; i < c->r->nsteps; i++) fprintf(f, "SYNTHETIC_0,SYNTHETIC,0,0,%d,0,%.9g\n", i, c->r->step_s[i]);
}

void vb_step_reference_write(const char *dir, const vb_step_reference *r) {
    if (vb_mkdir_p(dir) != 0) vb_die_env("--reference_dir %s: cannot create", dir);
    const vb_config *c = r->cfg;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "kind", "bench_step reference");
    cJSON_AddStringToObject(j, "command_line", r->command_line ? r->command_line : "");
    cJSON_AddStringToObject(j, "backend", r->backend);
    cJSON_AddNumberToObject(j, "ranks", 1);
    cJSON_AddNumberToObject(j, "local_batch_size", r->local_batch);
    cJSON *cfg = cJSON_AddObjectToObject(j, "config");
    cJSON_AddStringToObject(cfg, "config", c->config);
    cJSON_AddNumberToObject(cfg, "embed_dim", c->embed_dim);
    cJSON_AddNumberToObject(cfg, "depth", c->depth);
    cJSON_AddNumberToObject(cfg, "num_heads", c->num_heads);
    cJSON_AddNumberToObject(cfg, "patch_size", c->patch_size);
    cJSON *img = cJSON_AddArrayToObject(cfg, "img_size");
    cJSON_AddItemToArray(img, cJSON_CreateNumber(c->img_size[0]));
    cJSON_AddItemToArray(img, cJSON_CreateNumber(c->img_size[1]));
    cJSON_AddNumberToObject(cfg, "n_in_channels", c->n_in_channels);
    cJSON_AddNumberToObject(cfg, "n_out_channels", c->n_out_channels);
    cJSON_AddStringToObject(cfg, "amp_mode", c->amp_mode);
    cJSON_AddBoolToObject(cfg, "tf32", c->tf32);
    cJSON *fp = cJSON_AddObjectToObject(j, "fingerprint");
    cJSON_AddNumberToObject(fp, "omp_threads", omp_get_max_threads());
    cJSON_AddNumberToObject(fp, "affinity_cores", vb_affinity_cores());
    cJSON *th = cJSON_AddObjectToObject(j, "threads");
    cJSON_AddNumberToObject(th, "node_ranks", 1);
    cJSON *par = cJSON_AddObjectToObject(j, "parallel");
    cJSON_AddNumberToObject(par, "tp", r->tp);
    cJSON_AddNumberToObject(par, "cp", r->cp);
    cJSON_AddBoolToObject(par, "shard", r->tp > 1 || r->cp > 1);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) vb_die_internal("out of memory");
    char path[VB_PATH_MAX];
    vb_snprintf(path, sizeof path, "%s/" VB_RUN_JSON, dir);
    vb_atomic_write_or_die(path, write_json, text);
    free(text);
    iter_ctx ic = {r};
    vb_snprintf(path, sizeof path, "%s/" VB_ITERATIONS_CSV, dir);
    vb_atomic_write_or_die(path, write_iterations, &ic);
    vb_snprintf(path, sizeof path, "%s/" VB_OPS_CSV, dir);
    if (vb_prof_write_csv(r->prof, path, 0) != 0) vb_die_env("--reference_dir %s: cannot write ops.csv", dir);
}
