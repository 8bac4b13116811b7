/* import.c: `vitbench import PATH... [--output_dir DIR] [--ranks N|FILE=N]
 * [--point NAME=FILE,...] [--warmup_epochs N]`: runs vitbench did not make
 * (the tutorials' PyTorch jobs: benchy's JSON, job logs, PyTorch profiler
 * traces) turned into vitbench's run and sweep directories, so that report,
 * compare and model read them as they read vitbench's own (analysis.h).
 *
 * PATH: a file, or a directory searched for files (sub-directories too,
 * except vitbench's own run and sweep directories). A file is known by what
 * it holds, not its name: a JSON with traceEvents (or a JSON list) is a
 * profiler trace, another JSON benchy's, a text file with BENCHY:: or
 * train.py's epoch lines a job log (import.h's readers say what each gives).
 * In a directory, files that are none of these (configs, job scripts) are
 * passed over; named on the command line, they are refused.
 *
 * Files of one job make one run: a log and the JSON it says benchy wrote
 * ("BENCHY::INFO::Message: Writing JSON output to PATH.") or that has its
 * name, and the traces of that name; where the log and the JSON both hold
 * a trial, their numbers are checked against each other. A run's name is
 * its file's: the name without its extension (weak_scale_8.json), benchy's
 * older json_prefix.DDMMYY-HH:MM:SS.json less its time, the folder's name
 * for a generic one (benchy_output.json, rank-0.json). A trailing _r<N> or
 * .<N> (up to 3 digits) marks a repeat of the point the rest names
 * (weak_scale_8_r2, weak_scale_8.2); --point NAME=FILES puts files in point
 * NAME whatever their names. A point named <series>_<N> is point N of that
 * series (weak_scale_8: series weak_scale, point 8).
 *
 * Output: one run: DIR is that run directory. Several: DIR is a sweep
 * directory, each run in runs/<name>/ and one row of index.csv each
 * (results.h's columns; ranks from the runs; a series column when there
 * are several series, a point column when the rank count does not tell a
 * series' points apart). DIR must not exist or be empty; default
 * results/import_<stamp>.
 *
 * Bad input (a cut JSON, a NaN or negative throughput, nranks 0, a log
 * without trial lines, a trace that is not JSON or has no events, two runs
 * of one point with different rank counts, a log and a JSON that disagree)
 * is one line "import: FILE: what, where" and nothing written for that
 * file's run; the other runs are imported, and the exit status is 2.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/analysis.h"
#include "analysis/import.h"
#include "analysis/rundir.h"
#include "core/config/cli.h"
#include "core/util/common.h"
#include "core/util/outdir.h"

#define MAX_DEPTH 8

typedef struct ranks_opt {
    char *file; /* NULL: every file that does not say */
    int n;
} ranks_opt;

typedef struct point_opt {
    char *name;
    char **files;
    int nfiles;
} point_opt;

typedef struct input {
    char path[VB_PATH_MAX];
    bool named;        /* on the command line, not found in a directory */
    const char *point; /* --point's NAME */
    int group;         /* --point occurrence, -1 none */
    vb_imp_file f;
    bool read;         /* f holds it */
    bool refused;
    bool skipped;      /* in a directory, and none of the formats */
    int run;           /* index of its run, -1 none */
} input;

typedef struct args {
    input *in;
    int nin, cap;
    ranks_opt *ranks;
    int nranks;
    point_opt *points;
    int npoints;
    const char *out;
    int warmup_epochs;
    int nrefused;
} args;

static input *add_input(args *a, const char *path, bool named) {
    if (a->nin == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 32;
        a->in = vb_realloc_check(a->in, (size_t)a->cap * sizeof *a->in);
    }
    input *x = &a->in[a->nin++];
    memset(x, 0, sizeof *x);
    vb_snprintf(x->path, sizeof x->path, "%s", path);
    x->named = named;
    x->group = -1;
    x->run = -1;
    return x;
}

static void refuse(args *a, input *x, const char *why) {
    fprintf(stderr, "vitbench: error: import: %s\n", why);
    x->refused = true;
    a->nrefused++;
}

/* ------------------------------------------------------------ finding files */

static int cmp_str(const void *pa, const void *pb) { return strcmp(*(char *const *)pa, *(char *const *)pb); }

static bool is_results_dir(const char *dir) {
    char p[VB_PATH_MAX];
    static const char *const marks[] = {VB_RUN_JSON, VB_INDEX_CSV};
    for (int i = 0; i < 2; i++) {
        vb_dir_file(p, sizeof p, dir, marks[i]);
        if (vb_file_exists(p)) return true;
    }
    return false;
}

static void walk(args *a, const char *dir, int depth) {
    if (depth > MAX_DEPTH) return;
    if (is_results_dir(dir)) {
        printf("import: %s: a vitbench run or sweep directory, passed over\n", dir);
        return;
    }
    DIR *d = opendir(dir);
    if (!d) vb_die_input("import: %s: cannot open the directory (%s)", dir, strerror(errno));
    char **names = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        names = vb_realloc_check(names, ((size_t)n + 1) * sizeof *names);
        names[n++] = vb_strdup_check(e->d_name);
    }
    closedir(d);
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char p[VB_PATH_MAX];
        vb_dir_file(p, sizeof p, dir, names[i]);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            walk(a, p, depth + 1);
        else if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
            add_input(a, p, false);
        free(names[i]);
    }
    free(names);
}

/* ------------------------------------------------------------ telling formats apart */

typedef enum { K_NONE, K_JSON, K_TRACE, K_LOG } kind_guess;

static kind_guess guess(const char *path, char *why) {
    size_t len;
    char *t = vb_imp_slurp(path, &len, why);
    if (!t) return K_NONE; /* why says it */
    kind_guess k = K_NONE;
    size_t i = 0;
    while (i < len && isspace((unsigned char)t[i])) i++;
    /* torch's names for its traces: <worker>.<stamp>.pt.trace.json, or a
     * name with "trace" in it: read as one, whatever the text is */
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    if (strstr(b, ".pt.trace.json") || (strcasestr(b, "trace") && strcasestr(b, ".json"))) {
        k = K_TRACE;
    } else if (memchr(t, '\0', len)) {
        vb_errf(why, VB_IMP_WHY, "%s: binary data, not benchy's JSON, a job log or a trace", path);
    } else if (i < len && (t[i] == '{' || t[i] == '[')) {
        k = t[i] == '[' || strstr(t + i, "\"traceEvents\"") ? K_TRACE : K_JSON;
    } else if (strstr(t, "BENCHY::") || strstr(t, "Time taken for epoch ")) {
        k = K_LOG;
    } else {
        vb_errf(why, VB_IMP_WHY, "%s: no BENCHY:: line, no train.py epoch line and no JSON: not a job log, benchy's "
                "JSON or a trace", path);
    }
    free(t);
    return k;
}

/* A JSON of the directory that parses and is neither benchy's nor a trace is
 * someone else's (a config): passed over. */
static bool foreign_json(const char *path) {
    size_t len;
    char why[VB_IMP_WHY];
    char *t = vb_imp_slurp(path, &len, why);
    if (!t) return false;
    cJSON *j = cJSON_ParseWithLength(t, len);
    free(t);
    bool foreign = false;
    if (cJSON_IsObject(j)) {
        foreign = !cJSON_GetObjectItemCaseSensitive(j, "nranks");
        for (int k = 0; k < VB_TRIAL_NKINDS && foreign; k++)
            foreign = !cJSON_GetObjectItemCaseSensitive(j, vb_trial_kinds[k].name);
    }
    cJSON_Delete(j);
    return foreign;
}

static int ranks_for(const args *a, const char *path) {
    int all = 0;
    for (int i = 0; i < a->nranks; i++) {
        if (!a->ranks[i].file) all = a->ranks[i].n;
        else if (strcmp(a->ranks[i].file, path) == 0) return a->ranks[i].n;
    }
    return all;
}

static bool ranks_named(const args *a, const char *path) {
    for (int i = 0; i < a->nranks; i++)
        if (a->ranks[i].file && strcmp(a->ranks[i].file, path) == 0) return true;
    return false;
}

static void read_input(args *a, input *x) {
    char why[VB_IMP_WHY];
    kind_guess k = guess(x->path, why);
    if (k == K_NONE) {
        if (x->named || strstr(why, "cannot be read") || strstr(why, "gzip")) refuse(a, x, why);
        else x->skipped = true;
        return;
    }
    if (k == K_JSON && !x->named && foreign_json(x->path)) {
        x->skipped = true;
        return;
    }
    int rc;
    x->f.fmt = k == K_JSON ? VB_IMP_BENCHY_JSON : k == K_TRACE ? VB_IMP_TRACE : VB_IMP_LOG;
    vb_snprintf(x->f.path, sizeof x->f.path, "%s", x->path);
    if (k == K_JSON) rc = vb_imp_read_benchy_json(x->path, &x->f, why);
    else if (k == K_TRACE) rc = vb_imp_read_trace(x->path, &x->f, why);
    else rc = vb_imp_read_log(x->path, &x->f, why);
    if (rc != 0) {
        vb_imp_file_free(&x->f);
        refuse(a, x, why);
        return;
    }
    const int given = ranks_for(a, x->path);
    if (given && k == K_JSON && given != x->f.nranks && ranks_named(a, x->path)) {
        vb_errf(why, VB_IMP_WHY, "%s: --ranks %s=%d, but its nranks is %d", x->path, x->path, given, x->f.nranks);
        vb_imp_file_free(&x->f);
        refuse(a, x, why);
        return;
    }
    if (given && k == K_LOG) {
        x->f.nranks = given;
        x->f.ranks_named = ranks_named(a, x->path);
    } else if (given && k == K_TRACE && (ranks_named(a, x->path) || !x->f.trace.world)) {
        x->f.nranks = given;
    }
    x->read = true;
}

/* ------------------------------------------------------------ names */

static bool all_digits(const char *s, size_t n) {
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return false;
    return true;
}

static bool strip_suffix(char *s, const char *suf) {
    size_t n = strlen(s), l = strlen(suf);
    if (n > l && strcasecmp(s + n - l, suf) == 0) {
        s[n - l] = '\0';
        return true;
    }
    return false;
}

/* The run's name from the file's (the rules above). */
static void label_of(const input *x, char *out, size_t n) {
    char copy[VB_PATH_MAX], stem[VB_PATH_MAX];
    vb_snprintf(copy, sizeof copy, "%s", x->path);
    snprintf(stem, sizeof stem, "%s", basename(copy));
    strip_suffix(stem, ".gz");
    if (x->f.fmt == VB_IMP_LOG) {
        static const char *const ext[] = {".log", ".out", ".txt", ".err", ".stdout"};
        for (int i = 0; i < 5; i++)
            if (strip_suffix(stem, ext[i])) break;
    } else {
        strip_suffix(stem, ".json");
    }
    size_t len = strlen(stem);
    /* benchy before output_filename: json_prefix.DDMMYY-HH:MM:SS */
    if (x->f.fmt == VB_IMP_BENCHY_JSON && len > 16 && stem[len - 16] == '.' && all_digits(stem + len - 15, 6) &&
        stem[len - 9] == '-' && all_digits(stem + len - 8, 2) && stem[len - 6] == ':' && all_digits(stem + len - 5, 2) &&
        stem[len - 3] == ':' && all_digits(stem + len - 2, 2))
        stem[len - 16] = '\0';
    if (x->f.fmt == VB_IMP_TRACE) {
        strip_suffix(stem, ".pt.trace");
        /* tensorboard_trace_handler: <worker>.<milliseconds>; and a rank marker */
        char *dot = strrchr(stem, '.');
        if (dot && strlen(dot + 1) >= 10 && all_digits(dot + 1, strlen(dot + 1))) *dot = '\0';
        len = strlen(stem);
        size_t d = len;
        while (d > 0 && isdigit((unsigned char)stem[d - 1])) d--;
        if (d < len) {
            size_t m = d;
            if (m > 0 && (stem[m - 1] == '-' || stem[m - 1] == '_')) m--;
            if (m >= 4 && strncasecmp(stem + m - 4, "rank", 4) == 0) {
                m -= 4;
                if (m > 0 && strchr("._-", stem[m - 1])) m--;
                stem[m] = '\0';
            }
        }
    }
    static const char *const generic[] = {"", "benchy_output", "benchy_result", "trace", "profile"};
    bool gen = false;
    for (int i = 0; i < 5 && !gen; i++) gen = strcasecmp(stem, generic[i]) == 0;
    if (gen) {
        /* the folder names the run: weak_scale_8/benchy_output.json */
        vb_snprintf(copy, sizeof copy, "%s", x->path);
        char folder[VB_PATH_MAX], cwd[VB_PATH_MAX];
        vb_snprintf(folder, sizeof folder, "%s", dirname(copy));
        const char *b = basename(folder);
        if ((!strcmp(b, ".") || !strcmp(b, "/")) && getcwd(cwd, sizeof cwd)) b = basename(cwd);
        snprintf(out, n, "%s", strcmp(b, ".") && strcmp(b, "/") ? b : *stem ? stem : "run");
        return;
    }
    snprintf(out, n, "%s", stem);
}

/* "weak_scale_8_r2" -> point weak_scale_8, repeat mark 2; "weak_scale_8"
 * -> itself, mark 1 (the first of a point) */
static void split_repeat(const char *label, char *point, size_t n, int *mark) {
    snprintf(point, n, "%s", label);
    *mark = 1;
    size_t len = strlen(point), d = len;
    while (d > 0 && isdigit((unsigned char)point[d - 1])) d--;
    if (d == len || len - d > 3) return;
    if (d >= 2 && point[d - 1] == 'r' && point[d - 2] == '_') {
        *mark = atoi(point + d);
        point[d - 2] = '\0';
    } else if (d >= 1 && point[d - 1] == '.' && d > 1) {
        *mark = atoi(point + d);
        point[d - 1] = '\0';
    }
}

/* "weak_scale_8" -> series weak_scale, value 8 */
static void split_series(const char *point, char *series, size_t sn, char *value, size_t vn) {
    series[0] = value[0] = '\0';
    size_t len = strlen(point), d = len;
    while (d > 0 && isdigit((unsigned char)point[d - 1])) d--;
    if (d == len || d < 2 || (point[d - 1] != '_' && point[d - 1] != '-')) return;
    snprintf(series, sn, "%.*s", (int)(d - 1), point);
    snprintf(value, vn, "%s", point + d);
}

/* ------------------------------------------------------------ jobs */

typedef struct job {
    int json, log;     /* input indices, -1 none */
    int *traces, ntraces;
    char label[256];
    char point[256];
    int mark;          /* the repeat mark of its name; 1 for none */
    int group;         /* --point occurrence, -1 none */
    bool refused;
    vb_imp_run run;
} job;

typedef struct jobs {
    job *v;
    int n;
} jobs;

static job *new_job(jobs *js) {
    js->v = vb_realloc_check(js->v, ((size_t)js->n + 1) * sizeof *js->v);
    job *j = &js->v[js->n++];
    memset(j, 0, sizeof *j);
    j->json = j->log = -1;
    j->group = -1;
    return j;
}

static const char *base_of(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static bool same_dir(const char *a, const char *b) {
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    size_t la = sa ? (size_t)(sa - a) : 0, lb = sb ? (size_t)(sb - b) : 0;
    return la == lb && strncmp(a, b, la) == 0;
}

/* Jobs of the inputs with this group (-1: those of no --point): a JSON is a
 * job; a log joins the JSON it says it wrote (its name, the same folder
 * first), else the JSON of its own name, else it is a job; a trace joins the
 * job of its name, or the group's only job, else it is a job. */
static void form_jobs(args *a, jobs *js, int group) {
    const int first = js->n;
    char lab[256];
    for (int i = 0; i < a->nin; i++) {
        input *x = &a->in[i];
        if (!x->read || x->group != group || x->f.fmt != VB_IMP_BENCHY_JSON) continue;
        job *j = new_job(js);
        j->json = i;
        j->group = group;
        label_of(x, j->label, sizeof j->label);
    }
    for (int i = 0; i < a->nin; i++) {
        input *x = &a->in[i];
        if (!x->read || x->group != group || x->f.fmt != VB_IMP_LOG) continue;
        label_of(x, lab, sizeof lab);
        job *to = NULL;
        if (x->f.json_written[0])
            for (int pass = 0; pass < 2 && !to; pass++)
                for (int k = first; k < js->n && !to; k++) {
                    const char *jp = a->in[js->v[k].json].path;
                    if (js->v[k].json >= 0 && strcmp(base_of(jp), x->f.json_written) == 0 &&
                        (pass == 1 || same_dir(jp, x->path)))
                        to = &js->v[k];
                }
        for (int k = first; k < js->n && !to; k++)
            if (js->v[k].json >= 0 && js->v[k].log < 0 && strcmp(js->v[k].label, lab) == 0) to = &js->v[k];
        if (to && to->log >= 0) {
            char why[VB_IMP_WHY];
            vb_errf(why, VB_IMP_WHY, "%s: says benchy wrote %s, as %s does: which log is that JSON's?", x->path,
                    a->in[to->json].path, a->in[to->log].path);
            vb_imp_file_free(&x->f);
            x->read = false;
            refuse(a, x, why);
            continue;
        }
        if (!to) {
            to = new_job(js);
            to->group = group;
            snprintf(to->label, sizeof to->label, "%s", lab);
        }
        to->log = i;
    }
    for (int i = 0; i < a->nin; i++) {
        input *x = &a->in[i];
        if (!x->read || x->group != group || x->f.fmt != VB_IMP_TRACE) continue;
        label_of(x, lab, sizeof lab);
        job *to = NULL;
        for (int k = first; k < js->n && !to; k++)
            if (strcmp(js->v[k].label, lab) == 0) to = &js->v[k];
        if (!to && group >= 0 && js->n - first == 1) to = &js->v[first];
        if (!to) {
            to = new_job(js);
            to->group = group;
            snprintf(to->label, sizeof to->label, "%s", lab);
        }
        to->traces = vb_realloc_check(to->traces, ((size_t)to->ntraces + 1) * sizeof *to->traces);
        to->traces[to->ntraces++] = i;
    }
    for (int k = first; k < js->n; k++) {
        job *j = &js->v[k];
        if (group >= 0) {
            snprintf(j->point, sizeof j->point, "%s", a->points[group].name);
            j->mark = k - first + 1;
        } else {
            split_repeat(j->label, j->point, sizeof j->point, &j->mark);
        }
    }
}

static void refuse_job(args *a, job *j, const char *why) {
    fprintf(stderr, "vitbench: error: import: %s\n", why);
    j->refused = true;
    int ins[2] = {j->json, j->log};
    for (int i = 0; i < 2; i++)
        if (ins[i] >= 0 && !a->in[ins[i]].refused) a->in[ins[i]].refused = true, a->nrefused++;
    for (int t = 0; t < j->ntraces; t++)
        if (!a->in[j->traces[t]].refused) a->in[j->traces[t]].refused = true, a->nrefused++;
}

static const char *job_file(const args *a, const job *j) {
    return j->json >= 0 ? a->in[j->json].path : j->log >= 0 ? a->in[j->log].path : a->in[j->traces[0]].path;
}

/* What benchy's files never say, and what this run's files do not. */
static void unknowns(vb_imp_run *r) {
    vb_imp_list *u = &r->unknown;
    vb_imp_list_add(u, "fingerprint: machine_key, host, CPU, GPU, backend, libraries (benchy records none): a gate "
                       "cannot match this run to a baseline's machine");
    vb_imp_list_add(u, "config: the model, its dims, the data, amp, the layout (tp, cp, dp)");
    vb_imp_list_add(u, "git commit, start and end time, exit status of the job");
    vb_imp_list_add(u, "load.csv: the machine's load around each trial");
    vb_imp_list_add(u, "per-rank numbers: benchy measures on rank 0 only");
    if (!r->nranks) vb_imp_list_add(u, "ranks (give --ranks)");
    bool batches = false, secs = false;
    for (int i = 0; i < r->ntrials; i++) {
        batches = batches || r->trials[i].gbatch <= 0 || r->trials[i].nbatches <= 0;
        secs = secs || isnan(r->trials[i].seconds);
    }
    if (batches)
        vb_imp_list_add(u, r->epochs_are_trials
                               ? "nbatches and global_batch of each epoch (train.py prints time and throughput only)"
                               : "nbatches and global_batch of each trial (the log prints throughputs only; its "
                                 "JSON has them)");
    if (secs) vb_imp_list_add(u, "seconds of each trial (the log prints throughputs only; its JSON has trial_time)");
    if (!r->json && r->ntrials && !r->epochs_are_trials)
        vb_imp_list_add(u, "iterations.csv: the log prints one iteration in report_freq");
    if (r->json && !r->log) vb_imp_list_add(u, "warm-up trials (benchy leaves them out of its JSON)");
}

static int build_run(args *a, job *j, const char *cmdline, char *why) {
    vb_imp_run *r = &j->run;
    memset(r, 0, sizeof *r);
    snprintf(r->point, sizeof r->point, "%s", j->point);
    split_series(j->point, r->series, sizeof r->series, r->point_value, sizeof r->point_value);
    r->json = j->json >= 0 ? &a->in[j->json].f : NULL;
    r->log = j->log >= 0 ? &a->in[j->log].f : NULL;
    r->traces = vb_calloc_check((size_t)j->ntraces + 1, sizeof *r->traces);
    for (int t = 0; t < j->ntraces; t++) r->traces[r->ntraces++] = &a->in[j->traces[t]].f;
    r->warmup_epochs = a->warmup_epochs;
    r->command_line = cmdline;
    if (vb_imp_merge(r, why) != 0) return -1;
    unknowns(r);
    return 0;
}

/* Runs of one point: repeats in the order of their marks (then paths); the
 * rank counts they know must agree. */
static void assign_repeats(args *a, jobs *js) {
    bool *done = vb_calloc_check((size_t)js->n + 1, sizeof *done);
    for (int i = 0; i < js->n; i++) {
        if (done[i] || js->v[i].refused) continue;
        int *m = vb_calloc_check((size_t)js->n, sizeof *m), nm = 0;
        for (int k = i; k < js->n; k++)
            if (!js->v[k].refused && !done[k] && strcmp(js->v[k].point, js->v[i].point) == 0) m[nm++] = k, done[k] = true;
        for (int x = 1; x < nm; x++) /* insertion sort by mark, then path */
            for (int y = x; y > 0; y--) {
                const job *p = &js->v[m[y - 1]], *q = &js->v[m[y]];
                int c = p->mark != q->mark ? (p->mark > q->mark) - (p->mark < q->mark)
                                           : strcmp(job_file(a, p), job_file(a, q));
                if (c <= 0) break;
                int t = m[y];
                m[y] = m[y - 1], m[y - 1] = t;
            }
        int ref = -1;
        for (int x = 0; x < nm; x++)
            if (js->v[m[x]].run.nranks) {
                ref = m[x];
                break;
            }
        bool clash = false;
        for (int x = 0; x < nm && ref >= 0; x++) {
            const job *q = &js->v[m[x]];
            if (q->run.nranks && q->run.nranks != js->v[ref].run.nranks) clash = true;
        }
        if (clash) {
            char why[VB_IMP_WHY];
            for (int x = 0; x < nm; x++) {
                const job *q = &js->v[m[x]];
                if (m[x] == ref) continue;
                if (q->run.nranks == js->v[ref].run.nranks) continue;
                vb_errf(why, VB_IMP_WHY, "%s: claims point %s (repeat mark %d) with %d ranks, and %s the same point with "
                        "%d: one point is one rank count (say which with --point NAME=FILES)", job_file(a, q),
                        q->point, q->mark, q->run.nranks, job_file(a, &js->v[ref]), js->v[ref].run.nranks);
                refuse_job(a, &js->v[m[x]], why);
            }
            vb_errf(why, VB_IMP_WHY, "%s: refused with the other runs of point %s, whose rank counts disagree with it",
                    job_file(a, &js->v[ref]), js->v[ref].point);
            refuse_job(a, &js->v[ref], why);
        }
        int rep = 0;
        for (int x = 0; x < nm; x++)
            if (!js->v[m[x]].refused) js->v[m[x]].run.repeat = rep++;
        free(m);
    }
    free(done);
}

/* ------------------------------------------------------------ writing */

typedef struct index_ctx {
    jobs *js;
    bool series, point;
} index_ctx;

static void write_index(FILE *f, void *ctx) {
    const index_ctx *c = ctx;
    fputs(VB_INDEX_LEAD_COLUMNS, f);
    if (c->series) fputs(",series", f);
    if (c->point) fputs(",point", f);
    static const char *const heads[] = {VB_INDEX_HEADLINE_COLUMNS};
    for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) fprintf(f, ",%s", heads[i]);
    fprintf(f, ",%s\n", VB_INDEX_FAILURE_COLUMN);
    static const vb_trial_kind kinds[VB_INDEX_HEADLINE_NKINDS] = {VB_INDEX_HEADLINE_KINDS};
    int row = 0;
    for (int i = 0; i < c->js->n; i++) {
        const job *j = &c->js->v[i];
        if (j->refused) continue;
        const vb_imp_run *r = &j->run;
        fprintf(f, "%d,", row++);
        char rd[VB_PATH_MAX];
        vb_snprintf(rd, sizeof rd, "%s/%s", VB_SWEEP_RUNS_DIR, r->name);
        vb_csv_field(f, rd);
        fprintf(f, ",completed,,%d,", r->repeat);
        if (r->nranks) fprintf(f, "%d", r->nranks);
        fputc(',', f); /* threads_per_rank: not known */
        if (c->series) {
            fputc(',', f);
            vb_csv_field(f, r->series[0] ? r->series : r->point);
        }
        if (c->point) {
            fputc(',', f);
            vb_csv_field(f, r->point_value[0] ? r->point_value : r->point);
        }
        for (int k = 0; k < VB_INDEX_HEADLINE_NKINDS; k++) {
            double mean, std;
            int n;
            vb_imp_kind_stats(r, kinds[k], &mean, &std, &n);
            char b1[40], b2[40];
            if (n)
                fprintf(f, ",%s,%s", vb_imp_num(b1, sizeof b1, mean), vb_imp_num(b2, sizeof b2, std));
            else
                fputs(",,", f);
        }
        fputs(",\n", f);
    }
}

typedef struct sweep_ctx {
    const char *name, *cmdline, *kind, *why;
    int nruns;
} sweep_ctx;

static void write_sweep_json(FILE *f, void *ctx) {
    const sweep_ctx *s = ctx;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", s->name);
    if (s->kind) {
        cJSON_AddStringToObject(j, "kind", s->kind);
        cJSON_AddStringToObject(j, "kind_why", s->why);
    }
    cJSON_AddStringToObject(j, "command", "import");
    cJSON_AddStringToObject(j, "command_line", s->cmdline);
    cJSON_AddNumberToObject(j, "runs", s->nruns);
    cJSON_AddBoolToObject(j, "imported", true);
    char *t = cJSON_Print(j);
    fputs(t, f);
    fputc('\n', f);
    cJSON_free(t);
    cJSON_Delete(j);
}

/* series and point columns: the first when there are several series, the
 * second when ranks do not tell one series' points apart */
static void index_keys(const jobs *js, bool *series, bool *point) {
    *series = *point = false;
    for (int i = 0; i < js->n; i++) {
        const vb_imp_run *a = &js->v[i].run;
        if (js->v[i].refused) continue;
        for (int k = 0; k < i; k++) {
            const vb_imp_run *b = &js->v[k].run;
            if (js->v[k].refused) continue;
            const char *sa = a->series[0] ? a->series : a->point, *sb = b->series[0] ? b->series : b->point;
            if (strcmp(sa, sb) != 0) {
                *series = true;
                continue;
            }
            if (strcmp(a->point, b->point) != 0 && (a->nranks == b->nranks || !a->nranks || !b->nranks)) *point = true;
        }
    }
}

/* The sweep's kind when index.csv and summary.csv cannot show it (batches
 * unknown, from logs alone) but every series is named for one. */
static const char *kind_from_names(const jobs *js) {
    const char *kind = NULL;
    for (int i = 0; i < js->n; i++) {
        if (js->v[i].refused) continue;
        const vb_imp_run *r = &js->v[i].run;
        for (int t = 0; t < r->ntrials; t++)
            if (r->trials[t].gbatch <= 0) goto unknown;
        continue;
    unknown:;
        const char *s = r->series;
        const char *k = strstr(s, "weak") ? "weak_scaling" : strstr(s, "strong") ? "strong_scaling" : NULL;
        if (!k || (kind && strcmp(k, kind) != 0)) return NULL;
        kind = k;
    }
    return kind;
}

static void unique_names(jobs *js) {
    for (int i = 0; i < js->n; i++) {
        job *j = &js->v[i];
        if (j->refused) continue;
        snprintf(j->run.name, sizeof j->run.name, "%s", j->label);
        for (int sfx = 2;; sfx++) {
            bool clash = vb_run_file_reserved(j->run.name);
            for (int k = 0; k < i && !clash; k++)
                clash = !js->v[k].refused && strcmp(js->v[k].run.name, j->run.name) == 0;
            if (!clash) break;
            snprintf(j->run.name, sizeof j->run.name, "%.240s-%d", j->label, sfx);
        }
    }
}

/* DIR, made fresh: a directory that holds anything is refused (an import
 * never writes beside other results). */
static void claim_out(const char *out, char *dir, size_t n) {
    if (!out) {
        if (vb_results_dir_claim_stamped(VB_RESULTS_DEFAULT_DIR, "import", dir, n, NULL, 0) != 0)
            vb_die_env("import: cannot create a directory under %s: %s", VB_RESULTS_DEFAULT_DIR, strerror(errno));
        return;
    }
    vb_snprintf(dir, n, "%s", out);
    if (vb_dir_exists(out)) {
        DIR *d = opendir(out);
        struct dirent *e;
        bool empty = true;
        while (d && (e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = false;
        if (d) closedir(d);
        if (!empty) vb_die_input("import: --output_dir %s is not empty: give a new directory", out);
    } else if (vb_file_exists(out)) {
        vb_die_input("import: --output_dir %s is a file", out);
    }
}

/* ------------------------------------------------------------ flags */

static void ranks_opt_fn(const char *flag, const char *value, void *ptr) {
    args *a = ptr;
    const char *eq = strrchr(value, '=');
    const char *num = eq ? eq + 1 : value;
    char *end;
    long v = strtol(num, &end, 10);
    if (!*num || *end || v < 1 || v > 10000000)
        vb_die_input("import: %s %s: want N or FILE=N with N a whole number >= 1", flag, value);
    a->ranks = vb_realloc_check(a->ranks, ((size_t)a->nranks + 1) * sizeof *a->ranks);
    a->ranks[a->nranks++] = (ranks_opt){eq ? strndup(value, (size_t)(eq - value)) : NULL, (int)v};
}

static void point_opt_fn(const char *flag, const char *value, void *ptr) {
    args *a = ptr;
    const char *eq = strchr(value, '=');
    if (!eq || eq == value || !eq[1]) vb_die_input("import: %s %s: want NAME=FILE[,FILE...]", flag, value);
    point_opt p = {strndup(value, (size_t)(eq - value)), NULL, 0};
    for (const char *c = p.name; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("_.-", *c))
            vb_die_input("import: %s %s: a point's NAME is letters, digits, '_', '.', '-' (it names a directory)", flag,
                         value);
    char *list = vb_strdup_check(eq + 1), *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        p.files = vb_realloc_check(p.files, ((size_t)p.nfiles + 1) * sizeof *p.files);
        p.files[p.nfiles++] = vb_strdup_check(t);
    }
    free(list);
    a->points = vb_realloc_check(a->points, ((size_t)a->npoints + 1) * sizeof *a->points);
    a->points[a->npoints++] = p;
}

static void import_path(void *ctx, const char *arg, const char *next) {
    (void)next;
    args *a = ctx;
    if (arg[0] == '-' && arg[1])
        vb_die_input("import: unknown flag %s%s", arg, *vb_cli_hint(arg) ? vb_cli_hint(arg) : " (see vitbench import --help)");
    char why[VB_PATH_MAX + 64];
    if (vb_dir_exists(arg)) {
        char dir[VB_PATH_MAX];
        vb_snprintf(dir, sizeof dir, "%s", arg);
        for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--) dir[n - 1] = '\0';
        walk(a, dir, 0);
        return;
    }
    if (vb_file_problem(arg, why, sizeof why)) vb_die_input("import: %s: %s", arg, why);
    add_input(a, arg, true);
}

static void parse_args(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->warmup_epochs = 1;
    const vb_cli_opt opts[] = {
        {.name = "output_dir", .kind = VB_CLI_STRING, .ptr = &a->out, .arg = "DIR",
         .help = "the run (one) or sweep (several) directory to make; new or empty (default results/import_<stamp>)"},
        {.name = "ranks", .kind = VB_CLI_FUNC, .ptr = a, .fn = ranks_opt_fn, .arg = "N|FILE=N",
         .help = "the rank count of files that do not say it (logs, traces); FILE=N for one file; repeatable"},
        {.name = "point", .kind = VB_CLI_FUNC, .ptr = a, .fn = point_opt_fn, .arg = "NAME=FILE[,FILE...]",
         .help = "these files are runs of point NAME (repeats, in order), whatever their names; repeatable"},
        {.name = "warmup_epochs", .kind = VB_CLI_INT, .ptr = &a->warmup_epochs, .ilo = 0, .ihi = 1000000, .arg = "N",
         .help = "a log of train.py without benchy: its first N epochs are warm-up trials (default 1)"},
    };
    const vb_cli cli = {
        .cmd = "import",
        .usage = "vitbench import PATH... [--output_dir DIR] [--ranks N|FILE=N] [--point NAME=FILE,...]\n"
                 "                       [--warmup_epochs N]",
        .about = "Turns runs of the tutorials' PyTorch code into vitbench's run and sweep directories:\n"
                 "benchy's JSON (output_filename, or json_prefix.DDMMYY-HH:MM:SS.json), job logs (benchy's\n"
                 "BENCHY:: lines, train.py's epoch and loss lines) and PyTorch profiler traces (Chrome /\n"
                 "Kineto JSON, gzip'd or not), or directories of them. A log and the JSON of the same job\n"
                 "are one run, checked against each other; several runs are a sweep (index.csv) that\n"
                 "vitbench report, compare and model read. Names like weak_scale_8 are point 8 of series\n"
                 "weak_scale, weak_scale_8_r2 its second repeat. docs/import.md has the recipe.",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
        .other = import_path,
        .ctx = a,
        .other_help = "PATH: a file or a directory (searched, vitbench's own run and sweep directories passed over).",
    };
    vb_cli_parse(&cli, argc, argv);
    for (int p = 0; p < a->npoints; p++)
        for (int k = 0; k < a->points[p].nfiles; k++) {
            const char *fp = a->points[p].files[k];
            char why[VB_PATH_MAX + 64];
            if (vb_file_problem(fp, why, sizeof why)) vb_die_input("import: --point %s: %s: %s", a->points[p].name, fp, why);
            input *x = NULL;
            for (int i = 0; i < a->nin && !x; i++)
                if (strcmp(a->in[i].path, fp) == 0) x = &a->in[i];
            if (!x) x = add_input(a, fp, true);
            if (x->group >= 0 && x->group != p)
                vb_die_input("import: %s is in two --point groups (%s and %s)", fp, a->points[x->group].name,
                             a->points[p].name);
            x->group = p;
            x->named = true;
            x->point = a->points[p].name;
        }
    if (a->nin == 0) vb_die_input("import: no PATH (benchy JSONs, job logs, traces or directories of them)");
}

/* ------------------------------------------------------------ main */

static void print_run(const vb_imp_run *r, const char *where) {
    double mean, std;
    int n;
    printf("  %s: point %s", where, r->point);
    if (r->repeat) printf(" (repeat %d)", r->repeat);
    if (r->nranks)
        printf(", %d rank%s", r->nranks, r->nranks == 1 ? "" : "s");
    else
        printf(", ranks unknown");
    for (int k = 0; k < VB_TRIAL_NKINDS; k++) {
        vb_imp_kind_stats(r, k, &mean, &std, &n);
        if (n) printf(", %s %.6g +/- %.3g samples/s (%d trial%s)", vb_trial_kinds[k].name, mean, std, n, n == 1 ? "" : "s");
    }
    if (r->ntraces) printf(", %d trace%s", r->ntraces, r->ntraces == 1 ? "" : "s");
    printf("\n");
    if (r->json) printf("      %s", r->json->path);
    if (r->log) printf("%s%s", r->json ? " + " : "      ", r->log->path);
    for (int t = 0; t < r->ntraces; t++) printf("%s%s", r->json || r->log || t ? " + " : "      ", r->traces[t]->path);
    printf("\n");
    for (int i = 0; i < r->notes.n; i++) printf("      note: %s\n", r->notes.v[i]);
}

int vb_import_main(int argc, char **argv) {
    args a;
    parse_args(argc, argv, &a);
    char *cmdline = vb_shell_join(argc + 1, argv - 1);
    for (int i = 0; i < a.nin; i++) read_input(&a, &a.in[i]);

    jobs js = {0};
    form_jobs(&a, &js, -1);
    for (int p = 0; p < a.npoints; p++) form_jobs(&a, &js, p);
    char why[VB_IMP_WHY];
    for (int i = 0; i < js.n; i++)
        if (build_run(&a, &js.v[i], cmdline, why) != 0) refuse_job(&a, &js.v[i], why);
    assign_repeats(&a, &js);
    unique_names(&js);
    int nruns = 0, nskipped = 0;
    for (int i = 0; i < js.n; i++) nruns += !js.v[i].refused;
    for (int i = 0; i < a.nin; i++) nskipped += a.in[i].skipped;

    if (nruns == 0) {
        if (a.nrefused == 0)
            vb_die_input("import: none of the %d file%s found is benchy's JSON, a job log or a profiler trace", a.nin,
                         a.nin == 1 ? "" : "s");
        vb_die_input("import: nothing imported: %d file%s refused (above)", a.nrefused, a.nrefused == 1 ? "" : "s");
    }
    char dir[VB_PATH_MAX];
    claim_out(a.out, dir, sizeof dir);
    vb_outdir out;
    vb_outdir_open_or_die(&out, dir, "", "import");
    if (nruns == 1) {
        for (int i = 0; i < js.n; i++)
            if (!js.v[i].refused) {
                vb_imp_run *r = &js.v[i].run;
                const char *b = base_of(dir);
                if (*b) snprintf(r->name, sizeof r->name, "%.*s", (int)sizeof r->name - 1, b);
                vb_imp_write_run(&out, r);
                printf("vitbench import: 1 run -> %s\n", dir);
                print_run(r, dir);
            }
    } else {
        index_ctx ic = {&js, false, false};
        index_keys(&js, &ic.series, &ic.point);
        for (int i = 0; i < js.n; i++) {
            if (js.v[i].refused) continue;
            char rel[VB_PATH_MAX], werr[VB_PATH_MAX + 64];
            vb_snprintf(rel, sizeof rel, "%s/%s", VB_SWEEP_RUNS_DIR, js.v[i].run.name);
            vb_outdir sub;
            int rc = vb_outdir_sub(&sub, &out, rel, werr, sizeof werr);
            if (rc == VB_OUTDIR_NOT_A_DIR) vb_die_input("import: %s", werr);
            if (rc != 0) vb_die_env("import: %s", werr);
            vb_imp_write_run(&sub, &js.v[i].run);
            vb_outdir_close(&sub);
        }
        const char *kind = kind_from_names(&js);
        const char *b = base_of(dir);
        sweep_ctx sc = {*b ? b : "import", cmdline, kind,
                        "the series' names (the files give no batch sizes)", nruns};
        vb_outdir_write_or_die(&out, VB_SWEEP_JSON, write_sweep_json, &sc, "import");
        /* last: the directory is a sweep once index.csv is there */
        vb_outdir_write_or_die(&out, VB_INDEX_CSV, write_index, &ic, "import");
        printf("vitbench import: %d runs -> %s (index.csv%s%s)\n", nruns, dir, ic.series ? ", series column" : "",
               ic.point ? ", point column" : "");
        for (int i = 0; i < js.n; i++) {
            if (js.v[i].refused) continue;
            char where[VB_PATH_MAX];
            vb_snprintf(where, sizeof where, "runs/%s", js.v[i].run.name);
            print_run(&js.v[i].run, where);
        }
    }
    if (nskipped) printf("  %d file%s passed over (not benchy's JSON, a job log or a trace)\n", nskipped, nskipped == 1 ? "" : "s");
    vb_outdir_close(&out);
    for (int i = 0; i < js.n; i++) {
        vb_imp_run *r = &js.v[i].run;
        for (int t = 0; t < r->ntrials; t++) free(r->trials[t].iters);
        free(r->trials);
        free(r->epochs);
        free(r->traces);
        vb_imp_list_free(&r->notes);
        vb_imp_list_free(&r->unknown);
        free(js.v[i].traces);
    }
    free(js.v);
    for (int i = 0; i < a.nin; i++)
        if (a.in[i].read) vb_imp_file_free(&a.in[i].f);
    free(a.in);
    for (int i = 0; i < a.nranks; i++) free(a.ranks[i].file);
    free(a.ranks);
    for (int p = 0; p < a.npoints; p++) {
        for (int k = 0; k < a.points[p].nfiles; k++) free(a.points[p].files[k]);
        free(a.points[p].files);
        free(a.points[p].name);
    }
    free(a.points);
    free(cmdline);
    if (a.nrefused) {
        fprintf(stderr, "vitbench: error: import: %d file%s refused (each named above); the other %d run%s imported\n",
                a.nrefused, a.nrefused == 1 ? "" : "s", nruns, nruns == 1 ? "" : "s");
        return VB_EXIT_INPUT;
    }
    return 0;
}
