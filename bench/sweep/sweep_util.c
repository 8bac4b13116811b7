/* sweep_util.c: the containers the sweep's files share and strict number
 * parsing (sweep_internal.h), and the public key/value list and int-list
 * functions of sweep.h.
 *
 * Contract: a vb_sweep_kvs keeps keys in first-set order and owns copies of
 * keys and values; a sweep_strvec owns copies and stays NULL-terminated for
 * execvp; vb_sweep_parse_int_list accepts only "1,2,4" (positive ints, no
 * blanks) and exits 2 naming `what` otherwise. Out of memory exits 1.
 */
#include "bench/sweep/sweep_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void vb_sweep_kvs_set(vb_sweep_kvs *l, const char *key, const char *value) {
    for (int i = 0; i < l->n; i++) {
        if (strcmp(l->v[i].key, key) == 0) {
            free(l->v[i].value);
            l->v[i].value = vb_strdup_check(value);
            return;
        }
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = vb_realloc_check(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n].key = vb_strdup_check(key);
    l->v[l->n].value = vb_strdup_check(value);
    l->n++;
}

const char *vb_sweep_kvs_get(const vb_sweep_kvs *l, const char *key) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0) return l->v[i].value;
    return NULL;
}

void vb_sweep_kvs_free(vb_sweep_kvs *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

bool sweep_kvs_has(const vb_sweep_kvs *l, const char *key) { return vb_sweep_kvs_get(l, key) != NULL; }
                   
                   void sweep_kvs_copy(vb_sweep_kvs *dst, const vb_sweep_kvs *src) {
    for (int i = 0; i < src->n; i++) vb_sweep_kvs_set(dst, src->v[i].key, src->v[i].value);
}

void sweep_sv_push(sweep_strvec *a, const char *s) {
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? 2 * a->cap : 32;
        a->v = vb_realloc_check(a->v, (size_t)a->cap * sizeof *a->v);
    }
    a->v[a->n++] = vb_strdup_check(s);
    a->v[a->n] = NULL;
}

void sweep_sv_pushf(sweep_strvec *a, const char *fmt, ...) {
    char buf[VB_PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof buf) vb_die_internal("argument too long: %.60s...", buf);
    sweep_sv_push(a, buf);
}

void sweep_sv_free(sweep_strvec *a) {
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

/* Job scripts and printed launcher commands are read a line at a time (by
 * bash, by sbatch's #SBATCH scan, by whoever pastes them): a CR or LF inside
 * a value would end its line there and turn the rest into a line of its own,
 * in a job script a command the job runs. No quoting keeps an #SBATCH value
 * on one line, so every value and path that can reach one is refused where it
 * comes in. The value is shown with its breaks as \r / \n so that the
 * message stays one line. */
void sweep_refuse_line_break(const char *origin, const char *value) {
    if (!strpbrk(value, "\r\n")) return;
    char shown[200];
    size_t k = 0;
    const char *c = value;
    for (; *c && k + 3 < sizeof shown; c++) {
        if (*c == '\r' || *c == '\n') {
            shown[k++] = '\\';
            shown[k++] = *c == '\r' ? 'r' : 'n';
        } else {
            shown[k++] = *c;
        }
    }
    shown[k] = '\0';
    vb_die_input("%s: '%s%s' holds a line break (CR or LF); a value must stay on one line of a job script or "
                 "launcher command", origin, shown, *c ? "..." : "");
}

/* Strict decimal int (no sign games, no trailing text). */
bool sweep_parse_int(const char *s, int *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return false;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < INT_MIN || v > INT_MAX) return false;
    *out = (int)v;
    return true;
}

int *vb_sweep_parse_int_list(const char *text, const char *what, int *n) {
    int cap = 8, count = 0;
    int *v = vb_realloc_check(NULL, (size_t)cap * sizeof *v);
    const char *p = text;
    if (!*p) vb_die_input("%s: empty list (expected e.g. 1,2,4)", what);
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        int x;
        if (len == 0 || len >= sizeof item) vb_die_input("%s: '%s' is not a list of positive integers (e.g. 1,2,4)", what, text);
        memcpy(item, p, len);
        item[len] = '\0';
        if (!sweep_parse_int(item, &x) || x < 1)
            vb_die_input("%s: '%s' in '%s' is not a positive integer", what, item, text);
        if (count == cap) v = vb_realloc_check(v, (size_t)(cap *= 2) * sizeof *v);
        v[count++] = x;
        if (!comma) break;
        p = comma + 1;
    }
    *n = count;
    return v;
}
