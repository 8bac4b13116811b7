/* history_csv.c: a history file read and checked, and its times (history.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/csv.h"
#include "analysis/history.h"
#include "core/results/results.h"

const vb_history_metric vb_history_metrics[VB_HISTORY_NMETRICS] = {
    {VB_HISTORY_COL_FULL, true, "samples/s"},
    {VB_HISTORY_COL_SYNTHETIC, true, "samples/s"},
    {VB_HISTORY_COL_IO, true, "samples/s"},
    {VB_COL_INSTRUCTIONS, false, "instructions per counted run"},
    {VB_COL_EST_CYCLES, false, "estimated cycles per counted run"},
};

int vb_history_metric_index(const char *name) {
    for (int i = 0; i < VB_HISTORY_NMETRICS; i++)
        if (strcmp(vb_history_metrics[i].name, name) == 0) return i;
    return -1;
}

bool vb_history_is_regression(int m, const vb_cp *c) {
    const bool up = c->mean_after > c->mean_before;
    return vb_history_metrics[m].higher_is_better ? !up : up;
}

const char *vb_history_metric_list(void) {
    static char list[256];
    size_t used = 0;
    for (int i = 0; i < VB_HISTORY_NMETRICS && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", vb_history_metrics[i].name);
    return list;
}

/* ---- times ---- */

static bool digits(const char *s, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = 10 * v + (s[i] - '0');
    }
    *out = v;
    return true;
}

static bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

/* days from 1970-01-01 to y-m-d (proleptic Gregorian) */
static long long days_from_civil(int y, int m, int d) {
    y -= m <= 2;
    const long long era = (y >= 0 ? y : y - 399) / 400;
    const long long yoe = y - era * 400;
    const long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

bool vb_history_parse_time(const char *s, long long *epoch) {
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h, mi, se;
    if (strlen(s) < 19 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != ' ') || !digits(s + 11, 2, &h) || s[13] != ':' ||
        !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &se))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && leap(y)) || h > 23 || mi > 59 || se > 60)
        return false;
    const char *p = s + 19;
    if (*p == '.' || *p == ',') { /* a fraction of a second: kept to the second */
        p++;
        if (*p < '0' || *p > '9') return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    long long offset = 0;
    if (*p == 'Z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        const int sign = *p == '-' ? -1 : 1;
        int oh, om = 0;
        if (!digits(p + 1, 2, &oh)) return false;
        p += 3;
        if (*p == ':') p++;
        if (*p) {
            if (!digits(p, 2, &om)) return false;
            p += 2;
        }
        if (oh > 23 || om > 59) return false;
        offset = sign * (oh * 3600LL + om * 60LL);
    }
    if (*p) return false;
    *epoch = days_from_civil(y, mo, d) * 86400LL + h * 3600LL + mi * 60LL + se - offset;
    return true;
}

void vb_history_format_time(long long epoch, char *buf, size_t n) {
    const time_t t = (time_t)epoch;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- the file ---- */

/* record and column (1-based, as the CSV reader numbers records) of byte
 * `at` of text: quotes and line ends before it counted */
static void where_is(const char *text, size_t at, int *record, int *column) {
    bool quoted = false;
    *record = *column = 1;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '"')
            quoted = !quoted;
        else if (!quoted && text[i] == ',')
            (*column)++;
        else if (!quoted && text[i] == '\n')
            (*record)++, *column = 1;
    }
}

static const char *column_name(const vb_csv *t, int column) {
    return column >= 1 && column <= t->ncols ? t->header[column - 1] : "?";
}

void vb_history_read(const char *path, vb_history *h, const char *cmd) {
    memset(h, 0, sizeof *h);
    snprintf(h->path, sizeof h->path, "%s", path);
    char why[VB_PATH_MAX + 64];
    if (vb_file_problem(path, why, sizeof why)) vb_die_input("%s: %s: %s", cmd, path, why);
    size_t len = 0;
    char *text = vb_read_file(path, &len);
    if (!text) vb_die_input("%s: %s: cannot be read (%s)", cmd, path, strerror(errno));
    /* the header names the columns of any message below */
    vb_csv head;
    const char *nul = memchr(text, '\0', len);
    const size_t head_len = strcspn(text, "\n");
    char err[VB_PATH_MAX + 256];
    const bool head_ok = vb_csv_parse(text, head_len, &head, err, sizeof err) == 0;
    if (nul) {
        int rec, col;
        where_is(text, (size_t)(nul - text), &rec, &col);
        vb_die_input("%s: %s: record %d, column %d (%s): a NUL byte (byte %zu): a history is text", cmd, path, rec, col,
                     head_ok ? column_name(&head, col) : "?", (size_t)(nul - text));
    }
    const long bad = vb_utf8_invalid_at(text);
    if (bad >= 0) {
        int rec, col;
        where_is(text, (size_t)bad, &rec, &col);
        vb_die_input("%s: %s: record %d, column %d (%s): byte %ld is not UTF-8 text", cmd, path, rec, col,
                     head_ok ? column_name(&head, col) : "?", bad);
    }
    if (head_ok) vb_csv_free(&head);
    vb_csv t;
    if (vb_csv_parse(text, len, &t, err, sizeof err) != 0) vb_die_input("%s: %s: %s", cmd, path, err);
    if (!t.terminated)
        vb_die_input("%s: %s: record %d has no line end (the file was cut short while being written)", cmd, path,
                     t.nrows ? t.record[t.nrows - 1] : 1);
    for (int c = 0; c < t.ncols; c++)
        for (int k = 0; k < c; k++)
            if (strcmp(t.header[c], t.header[k]) == 0)
                vb_die_input("%s: %s: column '%s' is named twice in the header (columns %d and %d)", cmd, path,
                             t.header[c], k + 1, c + 1);
    const int ctime = vb_csv_col(&t, VB_COL_TIME), ccommit = vb_csv_col(&t, VB_COL_COMMIT),
              ckey = vb_csv_col(&t, VB_COL_MACHINE_KEY);
    const char *missing = ctime < 0 ? VB_COL_TIME : ccommit < 0 ? VB_COL_COMMIT : ckey < 0 ? VB_COL_MACHINE_KEY : NULL;
    if (missing)
        vb_die_input("%s: %s: no column '%s' (a history's header is " VB_HISTORY_CSV_HEADER ")", cmd, path, missing);
    int cm[VB_HISTORY_NMETRICS];
    for (int m = 0; m < VB_HISTORY_NMETRICS; m++) {
        cm[m] = vb_csv_col(&t, vb_history_metrics[m].name);
        h->has[m] = cm[m] >= 0;
        if (h->has[m]) h->value[m] = vb_calloc_check((size_t)t.nrows + 1, sizeof *h->value[m]);
    }
    h->nrows = t.nrows;
    h->time = vb_calloc_check((size_t)t.nrows + 1, sizeof *h->time);
    h->commit = vb_calloc_check((size_t)t.nrows + 1, sizeof *h->commit);
    h->epoch = vb_calloc_check((size_t)t.nrows + 1, sizeof *h->epoch);
    for (int r = 0; r < t.nrows; r++) {
        const int rec = t.record[r];
        if (t.nfields[r] != t.ncols)
            vb_die_input("%s: %s: record %d has %d fields, the header %d (a record cut short?)", cmd, path, rec,
                         t.nfields[r], t.ncols);
        const char *tm = vb_csv_get(&t, r, ctime);
        if (!vb_history_parse_time(tm, &h->epoch[r]))
            vb_die_input("%s: %s: record %d, column %s: '%s' is not an ISO 8601 time (2026-11-21T23:52:51Z)", cmd, path,
                         rec, VB_COL_TIME, tm);
        const char *commit = vb_csv_get(&t, r, ccommit), *key = vb_csv_get(&t, r, ckey);
        if (!commit[0]) vb_die_input("%s: %s: record %d, column %s is empty", cmd, path, rec, VB_COL_COMMIT);
        if (!key[0]) vb_die_input("%s: %s: record %d, column %s is empty", cmd, path, rec, VB_COL_MACHINE_KEY);
        for (const char *k = key; *k; k++)
            if (!((*k >= '0' && *k <= '9') || (*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z')))
                vb_die_input("%s: %s: record %d, column %s: '%s' is not letters and digits (a fingerprint's "
                             "machine_key, which names the file)",
                             cmd, path, rec, VB_COL_MACHINE_KEY, key);
        if (h->machine_key && strcmp(h->machine_key, key) != 0)
            vb_die_input("%s: %s: record %d, column %s: '%s' where the rows before have '%s' (a history holds one "
                         "machine's rows)",
                         cmd, path, rec, VB_COL_MACHINE_KEY, key, h->machine_key);
        if (!h->machine_key) h->machine_key = vb_strdup_check(key);
        h->time[r] = vb_strdup_check(tm);
        h->commit[r] = vb_strdup_check(commit);
        for (int m = 0; m < VB_HISTORY_NMETRICS; m++) {
            if (!h->has[m]) continue;
            const char *cell = vb_csv_get(&t, r, cm[m]);
            double v = NAN;
            if (cell[0] && (!vb_csv_num(&t, r, cm[m], &v) || v < 0))
                vb_die_input("%s: %s: record %d, column %s: '%s' is not a number >= 0 (or empty: no value)", cmd, path,
                             rec, vb_history_metrics[m].name, cell);
            h->value[m][r] = v;
        }
    }
    vb_csv_free(&t);
    free(text);
}

void vb_history_free(vb_history *h) {
    for (int r = 0; r < h->nrows; r++) {
        free(h->time[r]);
        free(h->commit[r]);
    }
    free(h->time);
    free(h->commit);
    free(h->epoch);
    free(h->machine_key);
    for (int m = 0; m < VB_HISTORY_NMETRICS; m++) free(h->value[m]);
    memset(h, 0, sizeof *h);
}
