/* markdown.c: escaping for Markdown (markdown.h). */
#include "analysis/markdown.h"

#include <string.h>

void vb_md_cell(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '\r':
        case '\n': fputc(' ', f); break;
        case '<': fputs("&lt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '|':
        case '\\':
        case '`':
        case '[':
        case ']':
            fputc('\\', f);
            fputc(*s, f);
            break;
        default: fputc(*s, f);
        }
    }
}

void vb_md_prose(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '\r':
        case '\n': fputc(' ', f); break;
        case '<': fputs("&lt;", f); break;
        case '&': fputs("&amp;", f); break;
        case ']':
            fputc(']', f);
            if (s[1] == '(') fputc('\\', f); /* `](` would open a link's destination */
            break;
        default: fputc(*s, f);
        }
    }
}

int vb_md_fence_len(const char *text) {
    int longest = 0, run = 0;
    for (const char *p = text; *p; p++) {
        run = *p == '`' ? run + 1 : 0;
        if (run > longest) longest = run;
    }
    return longest + 1 > 3 ? longest + 1 : 3;
}
