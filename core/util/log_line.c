/* log_line.c: the line of a log that says why a run failed (log_line.h). */
#include "core/util/log_line.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"

static bool dash_line(const char *l, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += l[i] == '-';
    return n >= 10 && d == n;
}

static bool says_something(const char *l, size_t n, const char *skip) {
    if (n == 0 || l[0] == '#' || dash_line(l, n)) return false;
    if (skip && n >= strlen(skip) && strncmp(l, skip, strlen(skip)) == 0) return false;
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)l[i])) return true;
    return false;
}

void vb_log_last_line(const char *path, const char *skip, char *buf, size_t n) {
    buf[0] = '\0';
    char *text = vb_read_file(path, NULL);
    if (!text) return;
    int nl = 0;
    for (const char *c = text; *c; c++) nl += *c == '\n';
    const char **ls = vb_calloc_check((size_t)nl + 2, sizeof *ls);
    size_t *len = vb_calloc_check((size_t)nl + 2, sizeof *len);
    int k = 0;
    for (char *c = text; *c;) {
        char *e = strchr(c, '\n');
        size_t l = e ? (size_t)(e - c) : strlen(c);
        while (l > 0 && c[l - 1] == '\r') l--;
        ls[k] = c, len[k++] = l;
        if (!e) break;
        c = e + 1;
    }
    int pick = -1;
    for (int i = k - 1; i >= 0 && pick < 0; i--)
        if (strncmp(ls[i], "vitbench: error:", 16) == 0) pick = i;
    if (pick < 0) {
        for (int i = k - 1; i >= 0 && pick < 0; i--)
            if (says_something(ls[i], len[i], skip)) pick = i;
        if (pick >= 0) {
            bool closed = false; /* a line of dashes after it: inside a framed text */
            for (int i = pick + 1; i < k && !closed; i++) closed = dash_line(ls[i], len[i]);
            int open = pick;
            while (closed && open > 0 && !dash_line(ls[open - 1], len[open - 1])) open--;
            if (closed && open > 0)
                for (int i = open; i < pick; i++)
                    if (says_something(ls[i], len[i], skip)) {
                        pick = i;
                        break;
                    }
        }
    }
    if (pick >= 0) snprintf(buf, n, "%.*s", (int)len[pick], ls[pick]);
    free(ls);
    free(len);
    free(text);
}
