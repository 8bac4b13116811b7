/* sweep_jobs.c: a sweep's jobs after submission, for every scheduler: the
 * job id each submission printed, kept per run; whether the scheduler says
 * a job is over; cancelling them. Also the reading of directive lines the
 * user adds (bsub_extra, qsub_extra, flux_extra) and the writing of a value
 * into one, which LSF, PBS and Flux share.
 *
 * Contract: status/<run>.job holds "<scheduler> <id>" (sweep_scheduler.id,
 * then the id as the scheduler printed it), except Slurm's, which holds the
 * id alone as it did before other schedulers (tools and older sweeps read
 * it so). A job id is data of the sweep's own scheduler: the one its
 * launcher names (sweep.json), never the tag a file holds, and it is used
 * only when it is one of that scheduler's ids by its grammar
 * (sweep_scheduler.id_ok: digits that are not 0, arrays, PBS's server
 * suffix, Flux's F58), so no id read from a file can be an option, 0 (LSF's
 * "every job of the user") or another scheduler's. Scheduler commands run
 * through sweep_ask: fork/exec, no shell, at most 20 s, their output in a
 * file in status/. Nothing read from a job file is executed.
 */
#include "bench/sweep/sweep_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The text of a small file of the sweep's (a submit log, a job file): NULL
 * when it is not there, holds a NUL byte or is not text of one file. */
static char *read_small(const sweep_tree *t, sweep_sub s, const char *name) {
    char path[VB_PATH_MAX + 64];
    sweep_tree_fd_path(t, s, name, path, sizeof path);
    size_t len = 0;
    char *text = vb_read_file(path, &len);
    if (text && strlen(text) != len) { /* a NUL byte: not what a scheduler printed */
        free(text);
        return NULL;
    }
    return text;
}

void sweep_record_job(const sweep_tree *t, const char *name, const char *submit_log, const sweep_scheduler *sc) {
    char *log = read_small(t, SWEEP_LOGS, submit_log);
    if (!log) return;
    /* the log is appended to: a run submitted again (--resume) has its
     * earlier submission's lines first, so the last id is this one's */
    char id[128] = "", got[128];
    for (char *save = NULL, *line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (sc->job_id(line, got, sizeof got) && sc->id_ok(got)) snprintf(id, sizeof id, "%s", got);
    free(log);
    if (!id[0]) return; /* no id: the run is followed by its status file alone */
    char file[300], text[200];
    snprintf(file, sizeof file, "%s.job", name);
    snprintf(text, sizeof text, "%s%s%s\n", sweep_job_file_tag(sc), sweep_job_file_tag(sc)[0] ? " " : "", id);
    if (sweep_tree_write_text(t, SWEEP_STATUS, file, text) != 0)
        vb_warn("%s job %s of %s is not recorded; a job that ends without a status will stay submitted", sc->name, id,
                name);
}

const char *sweep_job_file_tag(const sweep_scheduler *sc) { return sc == &sweep_sched_slurm ? "" : sc->id; }

bool sweep_read_job(const sweep_tree *t, const sweep_scheduler *sc, const char *name, char *id, size_t n) {
    if (!sc || !sweep_tree_has(t, SWEEP_STATUS)) return false;
    char file[300], shown[VB_PATH_MAX + 320];
    snprintf(file, sizeof file, "%s.job", name);
    sweep_tree_path(t, SWEEP_STATUS, file, shown, sizeof shown);
    if (!sweep_tree_exists(t, SWEEP_STATUS, file)) return false;
    char *text = read_small(t, SWEEP_STATUS, file);
    char a[160] = "", b[160] = "", c[2] = "";
    int k = text ? sscanf(text, "%159s %159s %1s", a, b, c) : 0;
    free(text);
    const char *tag = sweep_job_file_tag(sc), *word = NULL;
    if (k == 1 && !tag[0]) word = a;                        /* Slurm's: the id alone */
    if (k == 2 && strcmp(a, tag[0] ? tag : sc->id) == 0) word = b; /* "<scheduler> <id>" */
    if (!word) {
        vb_warn("%s: not a job of this sweep's scheduler (%s): not followed or cancelled", shown, sc->name);
        return false;
    }
    if (strlen(word) >= n || !sc->id_ok(word)) {
        vb_warn("%s: '%.60s' is not a %s job id: not followed or cancelled", shown, word, sc->name);
        return false;
    }
    snprintf(id, n, "%s", word);
    return true;
}

int sweep_job_over(sweep_jobq *q, const sweep_scheduler *sc, const sweep_tree *t, const char *id, char *state,
                   size_t n) {
    state[0] = '\0';
    return sc->job_state(q, t, id, state, n);
}

void sweep_jobq_free(sweep_jobq *q) {
    for (int i = 0; i < SCHED_COUNT; i++) free(q->listing[i]);
    memset(q, 0, sizeof *q);
}

char *sweep_ask(const sweep_tree *t, char *const *argv, int *rc) {
    *rc = -1;
    if (!sweep_in_path(argv[0]) || !sweep_tree_has(t, SWEEP_STATUS)) return NULL;
    char name[96];
    snprintf(name, sizeof name, ".%.60s-answer", argv[0]);
    if (sweep_tree_unlink(t, SWEEP_STATUS, name) != 0) return NULL;
    char why[3 * VB_PATH_MAX];
    int fd = sweep_tree_append_fd(t, SWEEP_STATUS, name, why, sizeof why);
    if (fd < 0) {
        vb_warn("%s", why);
        return NULL;
    }
    const char *cut;
    int code = sweep_launch(argv, fd, 20, 0, NULL, &cut);
    close(fd);
    *rc = cut[0] ? -1 : code;
    char *text = read_small(t, SWEEP_STATUS, name);
    (void)sweep_tree_unlink(t, SWEEP_STATUS, name);
    return text;
}

int sweep_cancel_jobs(const sweep_tree *t, const sweep_scheduler *sc, const sweep_item *items, int n) {
    int failed = 0, cancelled = 0;
    char (*done)[160] = vb_realloc_check(NULL, (size_t)(n > 0 ? n : 1) * sizeof *done);
    int ndone = 0;
    for (int i = 0; i < n && sc; i++) {
        const char *st = items[i].status;
        if (!st || (strcmp(st, "submitted") != 0 && strcmp(st, "dry-run") != 0)) continue;
        char id[128];
        const bool known = sweep_read_job(t, sc, items[i].name, id, sizeof id);
        if (!known && strcmp(st, "dry-run") == 0) continue; /* a script nobody submitted, or whose job has not started */
        if (!known) {
            printf("vitbench sweep: %s: no %s job id recorded (status/%s.job); cancel its job by hand\n", items[i].name,
                   sc->name, items[i].name);
            continue;
        }
        bool seen = false; /* a sweep job's runs share one id: cancelled once */
        for (int d = 0; d < ndone && !seen; d++) seen = strcmp(done[d], id) == 0;
        if (seen) continue;
        snprintf(done[ndone++], sizeof done[0], "%s", id);
        sweep_strvec argv = {0};
        for (const char *const *w = sc->cancel; *w; w++) sweep_sv_push(&argv, *w);
        sweep_sv_push(&argv, id);
        int rc;
        char *said = sweep_ask(t, argv.v, &rc), line[512] = "";
        if (said) { /* its last line, for the message */
            size_t len = strlen(said);
            while (len > 0 && (said[len - 1] == '\n' || said[len - 1] == '\r')) said[--len] = '\0';
            const char *last = strrchr(said, '\n');
            snprintf(line, sizeof line, "%s", last ? last + 1 : said);
            free(said);
        }
        if (rc == 0) {
            printf("vitbench sweep: cancelled %s job %s (%s)\n", sc->name, id, items[i].name);
            cancelled++;
        } else {
            printf("vitbench sweep: %s %s failed (exit %d%s%s)\n", argv.v[0], id, rc, line[0] ? ": " : "", line);
            failed++;
        }
        sweep_sv_free(&argv);
    }
    free(done);
    printf("vitbench sweep: %d jobs cancelled, %d cancels failed\n", cancelled, failed);
    return failed;
}

/* digits that are not a number 0 (no leading 0): a job number */
size_t sweep_job_number(const char *s) {
    size_t k = 0;
    if (s[0] < '1' || s[0] > '9') return 0;
    while (isdigit((unsigned char)s[k]) && k < 20) k++;
    return isdigit((unsigned char)s[k]) ? 0 : k;
}

void sweep_check_directive_line(const char *line, const char *key, const char *origin,
                                void (*owned)(const char *word, const char *prev, const char *line, const char *key,
                                              const char *origin)) {
    if (line[0] != '-' || !isalpha((unsigned char)line[line[1] == '-' ? 2 : 1]))
        vb_die_input("%s: %s '%s' must be one option line, starting with its option (e.g. -B or --opt=v)", origin, key,
                     line);
    char *word = vb_realloc_check(NULL, strlen(line) + 1), *prev = vb_realloc_check(NULL, strlen(line) + 1);
    prev[0] = '\0';
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        size_t k = 0;
        char quote = 0;
        const char *why = NULL;
        while (*p && (quote || (*p != ' ' && *p != '\t'))) {
            if (quote == '"' && *p == '\\' && (p[1] == '"' || p[1] == '\\')) {
                word[k++] = p[1];
                p += 2;
            } else if (quote && *p == quote) {
                quote = 0;
                p++;
            } else if (quote) {
                word[k++] = *p++;
            } else if (*p == '"' || *p == '\'') {
                quote = *p++;
            } else if (*p == '\\') {
                why = "a backslash outside quotes (schedulers read it differently; quote the value instead)";
                break;
            } else if (*p == '#') {
                why = "an unquoted # (a comment to the scheduler: the rest of the line would be dropped)";
                break;
            } else {
                word[k++] = *p++;
            }
        }
        word[k] = '\0';
        if (!why && quote) why = "an unmatched quote (the scheduler would refuse every job)";
        if (why) vb_die_input("%s: %s '%s': %s", origin, key, line, why);
        owned(word, prev, line, key, origin);
        memcpy(prev, word, k + 1);
    }
    free(word);
    free(prev);
}

void sweep_put_directive_word(FILE *f, const char *value) {
    bool plain = value[0] != '\0';
    for (const char *c = value; *c; c++)
        if (!isgraph((unsigned char)*c) || strchr("\"'\\#$`", *c)) plain = false;
    if (plain) {
        fputs(value, f);
        return;
    }
    fputc('"', f);
    for (const char *c = value; *c; c++) {
        if (strchr("\"\\$`", *c)) fputc('\\', f);
        fputc(*c, f);
    }
    fputc('"', f);
}

void sweep_refuse_chars(const char *origin, const char *path, const char *bad, const char *why) {
    const char *c = strpbrk(path, bad);
    if (!c) return;
    char what[16];
    if (*c == ' ')
        snprintf(what, sizeof what, "a blank");
    else
        snprintf(what, sizeof what, "'%c'", *c);
    vb_die_input("%s: '%s' holds %s, which %s; choose a directory without one", origin, path, what, why);
}
