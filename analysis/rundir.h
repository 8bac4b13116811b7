/* rundir.h: the one reader of run and sweep directories for analysis/
 * (report, compare, trace, the scaling model): what a path is, and a
 * directory's files, named as core/results/results.h names them, read as CSV
 * or JSON. What a missing or malformed file means stays each caller's
 * decision (a report notes it, compare and the model refuse); the reading,
 * and the words for what went wrong, are here. */
#ifndef VB_ANALYSIS_RUNDIR_H
#define VB_ANALYSIS_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "analysis/csv.h"

typedef enum { VB_DIR_NEITHER = 0, VB_DIR_RUN, VB_DIR_SWEEP } vb_dir_kind;

/* A sweep directory (it has index.csv), a run directory (run.json,
 * trials.csv or summary.csv, or an imported profile's ops.csv or
 * timeline.csv: vitbench nsys writes those) or neither. */
vb_dir_kind vb_dir_kind_of(const char *path);

/* dir/name into path (n bytes); exits 2 when it does not fit */
void vb_dir_file(char *path, size_t n, const char *dir, const char *name);

/* A run of a sweep: index.csv's run_dir, a relative path inside the sweep
 * (runs/<run>, as sweeps write it), into path as sweep/run_dir. 0, or -1
 * with why (n bytes) when it is empty, absolute or climbs out with "..":
 * a run listed outside the sweep is someone else's, and is not read. */
int vb_sweep_run_path(char *path, size_t n, const char *sweep, const char *run_dir, char *why, size_t whyn);

/* dir/name read as CSV (vb_csv_read): 0; -1 it cannot be read, -2 it is
 * malformed; err (errn bytes) says why, naming the file. */
int vb_dir_read_csv(const char *dir, const char *name, vb_csv *t, char *err, size_t errn);

/* The JSON object in the file at path, or NULL with *why set: "no such
 * file", "cannot be read" or "not a JSON object" (not JSON, or JSON of
 * another kind). The caller frees it with cJSON_Delete. */
cJSON *vb_read_json_object(const char *path, const char **why);
/* The run's id: run_dir/run.json's run_id, or "" when it has none to say;
 * and, where imported is not NULL, whether vitbench import made the run
 * (run.json has an "imported" object). */
void vb_run_json_id(const char *run_dir, char *id, size_t n, bool *imported);

#endif
