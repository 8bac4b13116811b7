/* sweep_jobs.c: a sweep's jobs after submission, for every scheduler: the
 * job id each submission printed, kept per run; whether the scheduler says
 * a job is over; cancelling them. Also the reading of directive lines the
 * user adds (bsub_extra, qsub_extra, flux_extra) and the writing of a value
 * into one, which LSF, PBS and Flux share.
 *
 * Contract: status/<run>.job holds "<scheduler> <id>" (sweep_scheduler.id,
 * then the id as the scheduler printed it), except Slurm's, which holds the
 * id alone as it did before other schedulers (tools and older sweeps read
 * it so): a file holding only an id is Slurm's. Scheduler commands run
 * through sweep_query: fork/exec, no shell, at most 20 s, their output in a
 * file under status/. Nothing read from a job file is executed: an id is
 * one argument of the scheduler's own command.
 */
#include "bench/sweep/sweep_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An id as the scheduler printed it: printable, no blanks (Flux's F58 ids
 * start with the UTF-8 letter ƒ, so bytes above 127 pass). */
static bool id_ok(const char *id, size_t n) {
    size_t len = strlen(id);
    if (len == 0 || len >= n) return false;
    for (const char *c = id; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f) return false;
    return true;
}

void sweep_record_job(const char *dir, const char *name, const char *submit_log, const sweep_scheduler *sc) {
    FILE *in = fopen(submit_log, "r");
    if (!in) return;
    /* the log is appended to: a run submitted again (--resume) has its
     * earlier submission's lines first, so the last id is this one's */
    char line[512], id[128] = "", got[128];
    while (fgets(line, sizeof line, in))
        if (sc->job_id(line, got, sizeof got) && id_ok(got, sizeof got)) snprintf(id, sizeof id, "%s", got);
    fclose(in);
    if (!id[0]) return; /* no id: the run is followed by its status file alone */
    char path[VB_PATH_MAX + 200], tmp[VB_PATH_MAX + 210];
    vb_snprintf(path, sizeof path, "%s/status/%s.job", dir, name);
    vb_snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = vb_fopen_nofollow(tmp, "w");
    if (!f || fprintf(f, "%s%s%s\n", sweep_job_file_tag(sc), sweep_job_file_tag(sc)[0] ? " " : "", id) < 0 ||
        fclose(f) != 0 || rename(tmp, path) != 0)
        vb_warn("cannot record %s job %s of %s in %s; a job that ends without a status will stay submitted", sc->name,
                id, name, path);
}

const char *sweep_job_file_tag(const sweep_scheduler *sc) { return sc == &sweep_sched_slurm ? "" : sc->id; }

const sweep_scheduler *sweep_read_job(const char *dir, const char *name, char *id, size_t n) {
    char path[VB_PATH_MAX + 200];
    vb_snprintf(path, sizeof path, "%s/status/%s.job", dir, name);
    char *text = vb_read_file(path, NULL);
    if (!text) return NULL;
    char a[64] = "", b[128] = "";
    int k = sscanf(text, "%63s %127s", a, b);
    free(text);
    const sweep_scheduler *sc = NULL;
    for (int s = 0; s < SCHED_COUNT && k == 2; s++)
        if (sweep_schedulers[s] && strcmp(sweep_schedulers[s]->id, a) == 0) sc = sweep_schedulers[s];
    if (k == 1) { /* a bare id: Slurm's */
        sc = &sweep_sched_slurm;
        snprintf(b, sizeof b, "%s", a);
    }
    if (!sc || !id_ok(b, n)) return NULL;
    snprintf(id, n, "%s", b);
    return sc;
}

int sweep_job_over(sweep_jobq *q, const sweep_scheduler *sc, const char *dir, const char *id, char *state,
                   size_t n) {
    state[0] = '\0';
    return sc->job_state(q, dir, id, state, n);
}

void sweep_jobq_free(sweep_jobq *q) {
    for (int i = 0; i < SCHED_COUNT; i++) free(q->listing[i]);
    memset(q, 0, sizeof *q);
}

int sweep_query(char *const *argv, const char *out) {
    if (unlink(out) != 0 && errno != ENOENT) return -1;
    const char *why;
    int rc = sweep_launch(argv, out, 20, 0, NULL, &why);
    return why[0] ? -1 : rc;
}

char *sweep_ask(const char *dir, char *const *argv, int *rc) {
    *rc = -1;
    if (!sweep_in_path(argv[0])) return NULL;
    char out[VB_PATH_MAX + 64];
    vb_snprintf(out, sizeof out, "%s/status/.%s-answer", dir, argv[0]);
    *rc = sweep_query(argv, out);
    char *text = vb_read_file(out, NULL);
    (void)unlink(out);
    return text;
}

int sweep_cancel_jobs(const char *dir, const sweep_item *items, int n) {
    int failed = 0, cancelled = 0;
    char (*done)[160] = vb_realloc_check(NULL, (size_t)(n > 0 ? n : 1) * sizeof *done);
    int ndone = 0;
    for (int i = 0; i < n; i++) {
        const char *st = items[i].status;
        if (!st || (strcmp(st, "submitted") != 0 && strcmp(st, "dry-run") != 0)) continue;
        char id[128];
        const sweep_scheduler *sc = sweep_read_job(dir, items[i].name, id, sizeof id);
        if (!sc && strcmp(st, "dry-run") == 0) continue; /* a script nobody submitted, or whose job has not started */
        if (!sc) {
            printf("vitbench sweep: %s: no job id recorded (status/%s.job); cancel its job by hand\n", items[i].name,
                   items[i].name);
            continue;
        }
        char key[160];
        snprintf(key, sizeof key, "%s %s", sc->id, id);
        bool seen = false; /* a sweep job's runs share one id: cancelled once */
        for (int d = 0; d < ndone && !seen; d++) seen = strcmp(done[d], key) == 0;
        if (seen) continue;
        snprintf(done[ndone++], sizeof done[0], "%s", key);
        sweep_strvec argv = {0};
        for (const char *const *w = sc->cancel; *w; w++) sweep_sv_push(&argv, *w);
        sweep_sv_push(&argv, id);
        int rc;
        char *said = sweep_ask(dir, argv.v, &rc), line[512] = "";
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
