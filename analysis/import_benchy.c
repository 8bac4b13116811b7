/* import_benchy.c: benchy's JSON and job logs, read for `vitbench import`
 * (import.h).
 *
 * benchy's JSON (benchy/torch/__init__.py, rank 0 at its end): {"nranks": N,
 * "<KIND>": {"rates": [[samples/s of each iteration] per trial],
 * "avg_iter_throughput": [...], "trial_throughput": [...], "trial_time":
 * [seconds ...]}} for the kinds that ran, warm-up trials left out. An
 * iteration's rate is batch_size x nranks / its time and the trial's
 * throughput is nbatches x batch_size x nranks / trial_time, so the global
 * batch is trial_time / sum(1 / rate) and nbatches the length of the rates:
 * both are recovered, and a file whose numbers do not fit that (a whole
 * batch, the trial throughput, the mean of the rates) is refused.
 * Python writes NaN and Infinity as bare words, which JSON does not have:
 * they are read as such and refused by name.
 *
 * A job log: the lines benchy prints on rank 0, wherever they sit in a line
 * (after srun's "0: ", mpirun's "[1,0]<stdout>:", a time stamp):
 *   BENCHY::<KIND>_[WARMUP_]<i>::Iteration Throughput: X   (every report_freq-th iteration)
 *   BENCHY::<KIND>_[WARMUP_]<i>::Average Iteration Throughput: X
 *   BENCHY::<KIND>_[WARMUP_]<i>::Trial Throughput: X
 *   BENCHY::SUMMARY::[ ]<KIND> average trial throughput: M +/- S
 *   BENCHY::INFO::Message: Writing JSON output to PATH.
 * and train.py's (the tutorials' logging format, or none):
 *   Time taken for epoch N is X sec, avg Y samples/sec
 *     Avg train loss=L   Avg val loss=V   Total validation time: T sec
 * Everything else (launcher banners, warnings, other ranks) is passed over.
 */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analysis/import.h"
#include "core/util/common.h"

/* ------------------------------------------------------------ JSON */

/* The text with Python's bare NaN, Infinity and -Infinity (outside strings)
 * turned into the strings "NaN", "Infinity", "-Infinity", so that the
 * parser reads the file and the field that holds one can be named. */
static char *python_literals(const char *s, size_t n, size_t *out_n) {
    char *o = vb_malloc_check(2 * n + 1);
    size_t k = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (in_str) {
            o[k++] = c;
            if (c == '\\' && i + 1 < n) o[k++] = s[++i];
            else if (c == '"') in_str = false;
            continue;
        }
        if (c == '"') in_str = true;
        static const char *const words[] = {"-Infinity", "Infinity", "NaN"};
        bool done = false;
        for (int w = 0; w < 3 && !done; w++) {
            const size_t l = strlen(words[w]);
            if (n - i >= l && memcmp(s + i, words[w], l) == 0) {
                o[k++] = '"';
                memcpy(o + k, words[w], l);
                k += l;
                o[k++] = '"';
                i += l - 1;
                done = true;
            }
        }
        if (!done) o[k++] = c;
    }
    o[k] = '\0';
    *out_n = k;
    return o;
}

/* true when the text ends inside an object, a list or a string: written
 * part of the way (a job killed while benchy wrote it, a copy cut short) */
static bool json_open_at_end(const char *s, size_t n) {
    long depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        if (in_str) {
            if (s[i] == '\\') i++;
            else if (s[i] == '"') in_str = false;
        } else if (s[i] == '"') {
            in_str = true;
        } else if (s[i] == '{' || s[i] == '[') {
            depth++;
        } else if (s[i] == '}' || s[i] == ']') {
            depth--;
        }
    }
    return in_str || depth > 0;
}

/* item as a finite number > 0: 0, or -1 with why naming `what` */
static int rate_of(const cJSON *item, const char *path, const char *what, double *out, char *why) {
    if (cJSON_IsString(item) && (!strcmp(item->valuestring, "NaN") || strstr(item->valuestring, "Infinity"))) {
        vb_errf(why, VB_IMP_WHY, "%s: %s is %s, not a measured number", path, what, item->valuestring);
        return -1;
    }
    if (!cJSON_IsNumber(item)) {
        vb_errf(why, VB_IMP_WHY, "%s: %s is not a number", path, what);
        return -1;
    }
    if (!(item->valuedouble > 0)) {
        vb_errf(why, VB_IMP_WHY, "%s: %s is %.17g: a throughput or time is > 0", path, what, item->valuedouble);
        return -1;
    }
    *out = item->valuedouble;
    return 0;
}

static const cJSON *array_of(const cJSON *sec, const char *key, const char *path, const char *kind, char *why) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(sec, key);
    if (!cJSON_IsArray(a)) vb_errf(why, VB_IMP_WHY, "%s: %s: no \"%s\" list (benchy writes rates, avg_iter_throughput, "
                                   "trial_throughput, trial_time)", path, kind, key);
    return cJSON_IsArray(a) ? a : NULL;
}

static vb_imp_trial *push_trial(vb_imp_file *f) {
    if (f->ntrials % 8 == 0)
        f->trials = vb_realloc_check(f->trials, ((size_t)f->ntrials + 8) * sizeof *f->trials);
    vb_imp_trial *t = &f->trials[f->ntrials++];
    memset(t, 0, sizeof *t);
    t->seconds = t->avg_iter = NAN;
    return t;
}

/* One section's trials: every list as long as the others, every number
 * benchy's, the batch and trial count recovered from them. */
static int read_section(const cJSON *sec, int kind, const char *path, vb_imp_file *f, char *why) {
    const char *kn = vb_trial_kinds[kind].name;
    if (!cJSON_IsObject(sec)) {
        vb_errf(why, VB_IMP_WHY, "%s: \"%s\" is not an object", path, kn);
        return -1;
    }
    const char *keys[4] = {"rates", "avg_iter_throughput", "trial_throughput", "trial_time"};
    const cJSON *a[4];
    for (int k = 0; k < 4; k++)
        if (!(a[k] = array_of(sec, keys[k], path, kn, why))) return -1;
    const int n = cJSON_GetArraySize(a[0]);
    for (int k = 1; k < 4; k++)
        if (cJSON_GetArraySize(a[k]) != n) {
            vb_errf(why, VB_IMP_WHY, "%s: %s: %s has %d trials and rates %d (benchy appends one of each per trial)",
                    path, kn, keys[k], cJSON_GetArraySize(a[k]), n);
            return -1;
        }
    for (int i = 0; i < n; i++) {
        char what[128];
        const cJSON *rates = cJSON_GetArrayItem(a[0], i);
        const int nb = cJSON_GetArraySize(rates);
        if (!cJSON_IsArray(rates) || nb < 1) {
            vb_errf(why, VB_IMP_WHY, "%s: %s rates[%d] is not a list of iteration throughputs", path, kn, i);
            return -1;
        }
        vb_imp_trial *t = push_trial(f);
        t->kind = kind;
        t->index = i;
        t->iters = vb_malloc_check((size_t)nb * sizeof *t->iters);
        t->niters = nb;
        double inv = 0;
        for (int s = 0; s < nb; s++) {
            snprintf(what, sizeof what, "%s rates[%d][%d]", kn, i, s);
            if (rate_of(cJSON_GetArrayItem(rates, s), path, what, &t->iters[s], why)) return -1;
            inv += 1 / t->iters[s];
        }
        snprintf(what, sizeof what, "%s avg_iter_throughput[%d]", kn, i);
        if (rate_of(cJSON_GetArrayItem(a[1], i), path, what, &t->avg_iter, why)) return -1;
        snprintf(what, sizeof what, "%s trial_throughput[%d]", kn, i);
        if (rate_of(cJSON_GetArrayItem(a[2], i), path, what, &t->rate, why)) return -1;
        snprintf(what, sizeof what, "%s trial_time[%d]", kn, i);
        if (rate_of(cJSON_GetArrayItem(a[3], i), path, what, &t->seconds, why)) return -1;
        /* rate = batch x nranks / dt and trial_time = sum dt: the batch is
         * trial_time / sum(1 / rate), to the rounding of the divisions */
        const double g = t->seconds / inv, gr = round(g);
        if (gr < 1 || fabs(g - gr) > 1e-6 * g) {
            vb_errf(why, VB_IMP_WHY, "%s: %s trial %d: its rates and trial_time give %.9g samples an iteration, not a "
                    "whole batch: not benchy's numbers (each rate is batch x nranks / the iteration's time)",
                    path, kn, i, g);
            return -1;
        }
        if (gr > INT_MAX) {
            vb_errf(why, VB_IMP_WHY, "%s: %s trial %d: its rates and trial_time give %.9g samples an iteration, more "
                    "than a batch can be (%d): not benchy's numbers", path, kn, i, g, INT_MAX);
            return -1;
        }
        t->gbatch = (int)gr;
        t->nbatches = nb;
        const double want = nb * gr / t->seconds;
        if (fabs(t->rate - want) > 1e-9 * want) {
            vb_errf(why, VB_IMP_WHY, "%s: %s trial_throughput[%d] %.17g is not its %d iterations x %d samples / "
                    "trial_time = %.17g", path, kn, i, t->rate, nb, t->gbatch, want);
            return -1;
        }
        double mean = 0;
        for (int s = 0; s < nb; s++) mean += t->iters[s];
        mean /= nb;
        if (fabs(t->avg_iter - mean) > 1e-9 * mean) {
            vb_errf(why, VB_IMP_WHY, "%s: %s avg_iter_throughput[%d] %.17g is not the mean of its rates, %.17g", path,
                    kn, i, t->avg_iter, mean);
            return -1;
        }
        if (f->nranks > 0 && t->gbatch % f->nranks != 0) {
            vb_errf(why, VB_IMP_WHY, "%s: %s trial %d: %d samples an iteration is not a multiple of nranks %d "
                    "(benchy counts batch_size x nranks)", path, kn, i, t->gbatch, f->nranks);
            return -1;
        }
    }
    return 0;
}

int vb_imp_read_benchy_json(const char *path, vb_imp_file *f, char *why) {
    size_t len;
    char *text = vb_imp_slurp(path, &len, why);
    if (!text) return -1;
    size_t flen;
    char *fixed = python_literals(text, len, &flen);
    free(text);
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(fixed, flen, &end, false);
    int rc = -1;
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        const size_t off = at && at >= fixed && at <= fixed + flen ? (size_t)(at - fixed) : flen;
        if (json_open_at_end(fixed, flen))
            vb_errf(why, VB_IMP_WHY, "%s: the JSON ends at byte %zu with its objects still open (a file cut short)",
                    path, len);
        else
            vb_errf(why, VB_IMP_WHY, "%s: not valid JSON (near byte %zu)", path, off);
        goto out;
    }
    if (!cJSON_IsObject(j)) {
        vb_errf(why, VB_IMP_WHY, "%s: not a JSON object (benchy writes {\"nranks\": N, \"IO\": {...}, ...})", path);
        goto out;
    }
    const cJSON *nr = cJSON_GetObjectItemCaseSensitive(j, "nranks");
    if (!nr) {
        vb_errf(why, VB_IMP_WHY, "%s: no \"nranks\" (benchy writes the world size first)", path);
        goto out;
    }
    if (!cJSON_IsNumber(nr) || nr->valuedouble != floor(nr->valuedouble) || nr->valuedouble < 1 ||
        nr->valuedouble > 1e7) {
        char shown[64];
        if (cJSON_IsNumber(nr))
            snprintf(shown, sizeof shown, "%.17g", nr->valuedouble);
        else
            snprintf(shown, sizeof shown, "%s", cJSON_IsString(nr) ? nr->valuestring : "not a number");
        vb_errf(why, VB_IMP_WHY, "%s: nranks is %s: a job's world size is a whole number >= 1", path, shown);
        goto out;
    }
    f->nranks = (int)nr->valuedouble;
    for (int k = 0; k < VB_TRIAL_NKINDS; k++) {
        const cJSON *sec = cJSON_GetObjectItemCaseSensitive(j, vb_trial_kinds[k].name);
        if (sec && read_section(sec, k, path, f, why) != 0) goto out;
    }
    if (f->ntrials == 0) {
        vb_errf(why, VB_IMP_WHY, "%s: no trials: none of IO, SYNTHETIC, FULL holds a finished trial", path);
        goto out;
    }
    rc = 0;
out:
    cJSON_Delete(j);
    free(fixed);
    return rc;
}

/* ------------------------------------------------------------ logs */

/* "FULL_WARMUP_0" -> kind FULL, warm-up, 0; false for anything else */
static bool parse_label(const char *s, size_t n, int *kind, bool *warmup, int *index) {
    for (int k = 0; k < VB_TRIAL_NKINDS; k++) {
        const char *name = vb_trial_kinds[k].name;
        const size_t l = strlen(name);
        if (n <= l + 1 || memcmp(s, name, l) != 0 || s[l] != '_') continue;
        size_t p = l + 1;
        *warmup = n - p > 7 && memcmp(s + p, "WARMUP_", 7) == 0;
        if (*warmup) p += 7;
        if (p == n || n - p > 6) return false;
        for (size_t i = p; i < n; i++)
            if (!isdigit((unsigned char)s[i])) return false;
        *kind = k;
        *index = atoi(s + p);
        return true;
    }
    return false;
}

/* The number that starts at s, as Python printed it (repr: 1.5, 2e-05,
 * nan, inf): the text ends at blank or line end. false when s holds none. */
static bool py_number(const char *s, double *out, char *text, size_t tn) {
    while (*s == ' ') s++;
    size_t n = strcspn(s, " \t\r\n,");
    if (n == 0 || n >= tn) return false;
    memcpy(text, s, n);
    text[n] = '\0';
    char *end;
    *out = strtod(text, &end);
    return *end == '\0';
}

static vb_imp_trial *trial_of(vb_imp_file *f, int kind, bool warmup, int index) {
    for (int i = 0; i < f->ntrials; i++)
        if (f->trials[i].kind == kind && f->trials[i].warmup == warmup && f->trials[i].index == index)
            return &f->trials[i];
    vb_imp_trial *t = push_trial(f);
    t->kind = kind, t->warmup = warmup, t->index = index, t->rate = NAN;
    return t;
}

static void label_text(const vb_imp_trial *t, char *buf, size_t n) {
    snprintf(buf, n, "%s_%s%d", vb_trial_kinds[t->kind].name, t->warmup ? "WARMUP_" : "", t->index);
}

/* A throughput a line prints: finite and > 0, or the line is refused. */
static int line_rate(const char *path, int ln, const char *what, const char *at, double *v, char *why) {
    char text[64];
    if (!py_number(at, v, text, sizeof text)) {
        vb_errf(why, VB_IMP_WHY, "%s: line %d: %s has no number", path, ln, what);
        return -1;
    }
    if (!isfinite(*v) || *v <= 0) {
        vb_errf(why, VB_IMP_WHY, "%s: line %d: %s is %s%s", path, ln, what, text,
                isnan(*v) ? " (NaN): the trial measured nothing" : ": a throughput is > 0");
        return -1;
    }
    return 0;
}

static int benchy_line(const char *path, int ln, const char *s, vb_imp_file *f, char *why) {
    if (strncmp(s, "SUMMARY::", 9) == 0) {
        s += 9;
        while (*s == ' ') s++;
        for (int k = 0; k < VB_TRIAL_NKINDS; k++) {
            const size_t l = strlen(vb_trial_kinds[k].name);
            if (strncmp(s, vb_trial_kinds[k].name, l) != 0 || s[l] != ' ') continue;
            const char *c = strstr(s, "throughput:"), *pm = strstr(s, "+/-");
            char t1[64], t2[64];
            double m, sd;
            if (!c || !pm || !py_number(c + 11, &m, t1, sizeof t1) || !py_number(pm + 3, &sd, t2, sizeof t2)) return 0;
            if (f->summary[k].seen) {
                vb_errf(why, VB_IMP_WHY, "%s: line %d: a second BENCHY::SUMMARY of %s (the first is line %d): two "
                        "jobs' output in one log", path, ln, vb_trial_kinds[k].name, f->summary[k].line);
                return -1;
            }
            f->summary[k] = (vb_imp_summary){true, m, sd, ln};
            return 0;
        }
        return 0;
    }
    if (strncmp(s, "INFO::Message: ", 15) == 0) {
        s += 15;
        static const char writing[] = "Writing JSON output to ";
        if (strncmp(s, writing, sizeof writing - 1) == 0) {
            const char *p = s + sizeof writing - 1;
            size_t n = strcspn(p, "\r\n");
            if (n > 0 && p[n - 1] == '.') n--; /* benchy ends the message with a full stop */
            const char *b = memrchr(p, '/', n);
            b = b ? b + 1 : p;
            snprintf(f->json_written, sizeof f->json_written, "%.*s", (int)(p + n - b), b);
        } else if (strncmp(s, "Using default benchy configuration", 34) == 0) {
            f->default_config = true;
        }
        return 0;
    }
    const char *sep = strstr(s, "::");
    int kind, index;
    bool warmup;
    if (!sep || !parse_label(s, (size_t)(sep - s), &kind, &warmup, &index)) return 0;
    const char *m = sep + 2;
    static const char *const metrics[] = {"Iteration Throughput:", "Average Iteration Throughput:", "Trial Throughput:"};
    int which = -1;
    for (int k = 0; k < 3 && which < 0; k++)
        if (strncmp(m, metrics[k], strlen(metrics[k])) == 0) which = k;
    if (which < 0) {
        if (strncmp(m, "Throughput:", 11) == 0 || strncmp(m, "Avg Throughput:", 15) == 0) f->old_lines = true;
        return 0;
    }
    char what[160];
    snprintf(what, sizeof what, "BENCHY::%.*s::%.*s", (int)(sep - s), s, (int)strlen(metrics[which]) - 1, metrics[which]);
    double v;
    if (line_rate(path, ln, what, m + strlen(metrics[which]), &v, why)) return -1;
    vb_imp_trial *t = trial_of(f, kind, warmup, index);
    if (!isnan(t->rate)) {
        char lab[48];
        label_text(t, lab, sizeof lab);
        vb_errf(why, VB_IMP_WHY, "%s: line %d: trial %s again after its Trial Throughput on line %d: two jobs' output "
                "in one log, or a job run twice", path, ln, lab, t->line);
        return -1;
    }
    if (which == 0) {
        if ((t->niters & 7) == 0) t->iters = vb_realloc_check(t->iters, ((size_t)t->niters + 8) * sizeof *t->iters);
        t->iters[t->niters++] = v;
    } else if (which == 1) {
        t->avg_iter = v;
    } else {
        t->rate = v;
        t->line = ln;
    }
    return 0;
}

static vb_imp_epoch *last_epoch(vb_imp_file *f) { return f->nepochs ? &f->epochs[f->nepochs - 1] : NULL; }

/* "Time taken for epoch N is X sec, avg Y samples/sec" and the loss lines */
static int train_line(const char *path, int ln, const char *line, vb_imp_file *f, char *why) {
    const char *p;
    char t1[64], t2[64];
    if ((p = strstr(line, "Time taken for epoch "))) {
        p += 21;
        char *e;
        long ep = strtol(p, &e, 10);
        double x, y;
        const char *is = strstr(e, " is "), *avg = is ? strstr(is, " sec, avg ") : NULL;
        if (e == p || ep < 0 || ep > 100000000 || !is || !avg || !py_number(is + 4, &x, t1, sizeof t1) ||
            !py_number(avg + 10, &y, t2, sizeof t2))
            return 0;
        if (!isfinite(x) || x <= 0 || !isfinite(y) || y <= 0) {
            vb_errf(why, VB_IMP_WHY, "%s: line %d: epoch %ld took %s sec at %s samples/sec: a time and a throughput "
                    "are > 0", path, ln, ep, t1, t2);
            return -1;
        }
        for (int i = 0; i < f->nepochs; i++)
            if (f->epochs[i].epoch == ep) {
                vb_errf(why, VB_IMP_WHY, "%s: line %d: epoch %ld again (first on line %d): two jobs' output in one log",
                        path, ln, ep, f->epochs[i].line);
                return -1;
            }
        if ((f->nepochs & 7) == 0) f->epochs = vb_realloc_check(f->epochs, ((size_t)f->nepochs + 8) * sizeof *f->epochs);
        f->epochs[f->nepochs++] = (vb_imp_epoch){(int)ep, x, y, NAN, NAN, NAN, ln};
        return 0;
    }
    vb_imp_epoch *e = last_epoch(f);
    if (!e) return 0;
    double v;
    if ((p = strstr(line, "Avg train loss=")) && py_number(p + 15, &v, t1, sizeof t1)) e->train_loss = v;
    else if ((p = strstr(line, "Avg val loss=")) && py_number(p + 13, &v, t1, sizeof t1)) e->val_loss = v;
    else if ((p = strstr(line, "Total validation time: ")) && py_number(p + 23, &v, t1, sizeof t1)) e->val_seconds = v;
    return 0;
}

int vb_imp_read_log(const char *path, vb_imp_file *f, char *why) {
    size_t len;
    char *text = vb_imp_slurp(path, &len, why);
    if (!text) return -1;
    int ln = 0, rc = 0;
    for (char *line = text; rc == 0 && line < text + len;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        if (nl) *nl = '\0';
        ln++;
        const char *b = strstr(line, "BENCHY::");
        if (b)
            rc = benchy_line(path, ln, b + 8, f, why);
        else
            rc = train_line(path, ln, line, f, why);
        line = nl ? nl + 1 : text + len;
    }
    free(text);
    f->nlines = ln;
    if (rc) return -1;
    /* trials whose Trial Throughput never came: the log stops inside them */
    int k = 0;
    for (int i = 0; i < f->ntrials; i++) {
        vb_imp_trial *t = &f->trials[i];
        if (!isnan(t->rate)) {
            f->trials[k++] = *t;
            continue;
        }
        char lab[48];
        label_text(t, lab, sizeof lab);
        vb_imp_list_add(&f->notes, "%s: trial %s has no Trial Throughput line (the log ends inside it): left out",
                        path, lab);
        free(t->iters);
    }
    f->ntrials = k;
    bool any_summary = false;
    for (int i = 0; i < VB_TRIAL_NKINDS; i++) any_summary = any_summary || f->summary[i].seen;
    if (f->ntrials == 0 && f->nepochs == 0) {
        vb_errf(why, VB_IMP_WHY, "%s: no trial lines (BENCHY::<KIND>_<i>::Trial Throughput, or train.py's \"Time "
                "taken for epoch N is X sec, avg Y samples/sec\")%s", path,
                any_summary ? ": its BENCHY::SUMMARY lines give a mean and std, not the trials a verdict needs"
                : f->old_lines ? ": its BENCHY ::Throughput / ::Avg Throughput lines are benchy's from before trial "
                                 "throughputs (2021), which give no trial's throughput"
                                : "");
        return -1;
    }
    return 0;
}
