/* flag.c: the flag grammar shared by config.c and cli.c (flag.h). */
#include "core/config/flag.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool vb_flag_parse_bool(const char *text, bool *out) {
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(text, yes[i]) == 0) return *out = true, true;
        if (strcasecmp(text, no[i]) == 0) return *out = false, true;
    }
    return false;
}

bool vb_flag_parse_ll(const char *text, long long *out) {
    if (!*text || isspace((unsigned char)*text)) return false;
    errno = 0;
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || errno) return false;
    *out = v;
    return true;
}

vb_num_status vb_flag_parse_double(const char *text, double *out) {
    const char *p = text;
    if (*p == '+' || *p == '-') p++;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) return VB_NUM_HEX;
    /* digits, an optional point and exponent: nothing strtod reads otherwise (inf, nan) */
    bool digits = false, nonzero = false;
    for (; isdigit((unsigned char)*p); p++) digits = true, nonzero |= *p != '0';
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++) digits = true, nonzero |= *p != '0';
    if (!digits) return VB_NUM_BAD;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit((unsigned char)*p)) return VB_NUM_BAD;
        while (isdigit((unsigned char)*p)) p++;
    }
    if (*p) return VB_NUM_BAD;
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (*end) return VB_NUM_BAD;
    if (errno == ERANGE && fabs(v) > 1.0) return VB_NUM_OVERFLOW;
    if (nonzero && (v == 0 || (errno == ERANGE && fabs(v) < DBL_MIN))) return VB_NUM_UNDERFLOW;
    *out = v;
    return VB_NUM_OK;
}

const char *vb_num_problem(vb_num_status st) {
    switch (st) {
    case VB_NUM_OK: return NULL;
    case VB_NUM_HEX: return "a hexadecimal number (only decimal numbers are taken, as for integers)";
    case VB_NUM_OVERFLOW: return "too large for a double-precision number";
    case VB_NUM_UNDERFLOW: return "too small: it would be 0 (or lose its digits) in a double-precision number";
    default: return "not a number";
    }
}

static char fold(char c) { return c == '-' ? '_' : c; }

bool vb_flag_split(const char *arg, char *name, size_t cap, const char **value) {
    if (cap) name[0] = '\0';
    *value = NULL;
    if (strncmp(arg, "--", 2) != 0) return false;
    const char *start = arg + 2, *eq = strchr(start, '=');
    size_t n = eq ? (size_t)(eq - start) : strlen(start);
    if (n == 0 || n >= cap) return false;
    for (size_t i = 0; i < n; i++) name[i] = fold(start[i]);
    name[n] = '\0';
    if (eq) *value = eq + 1;
    return true;
}

bool vb_flag_same_name(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (fold(*a) != fold(*b)) return false;
    return *a == *b;
}

/* Edit distance with adjacent transpositions (optimal string alignment):
 * "bach" -> "batch" is one insertion, "lcoal" -> "local" one swap. Names
 * longer than the rows allow are never near. */
enum { NEAR_MAX = 96 };
static int distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la >= NEAR_MAX || lb >= NEAR_MAX) return NEAR_MAX;
    int d[3][NEAR_MAX + 1]; /* rows i-2, i-1, i, rotating */
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int *cur = d[i % 3], *prev = d[(i + 2) % 3], *prev2 = d[(i + 1) % 3];
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cost = fold(a[i - 1]) != fold(b[j - 1]);
            int best = prev[j - 1] + cost;
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && fold(a[i - 1]) == fold(b[j - 2]) && fold(a[i - 2]) == fold(b[j - 1]) &&
                prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
    }
    return d[la % 3][lb];
}

void vb_flag_near_init(vb_flag_near *n, const char *typed) {
    n->typed = typed;
    n->best = NULL;
    n->best_dist = NEAR_MAX;
}

void vb_flag_near_try(vb_flag_near *n, const char *known) {
    int d = distance(n->typed, known);
    if (d < n->best_dist) n->best = known, n->best_dist = d;
}

const char *vb_flag_near_best(const vb_flag_near *n) {
    /* close: one edit in a name of up to 4 characters, two up to 9, three
     * beyond; and never most of the name (--ab is not a typo of --lr) */
    size_t len = strlen(n->typed);
    int allowed = len <= 4 ? 1 : len <= 9 ? 2 : 3;
    if (!n->best || n->best_dist == 0 || n->best_dist > allowed || (size_t)n->best_dist * 2 >= len) return NULL;
    return n->best;
}
