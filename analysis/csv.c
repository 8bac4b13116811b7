/* csv.c: an RFC 4180 reader (csv.h). */
#include "analysis/csv.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"
#include "core/util/fileio.h"

typedef struct {
    char *s;
    size_t n, cap;
} strbuf;

static void sb_putc(strbuf *b, char c) {
    if (b->n + 1 >= b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->s = vb_realloc_check(b->s, b->cap);
    }
    b->s[b->n++] = c;
    b->s[b->n] = '\0';
}

static char *sb_take(strbuf *b) {
    char *s = b->s ? b->s : vb_strdup_check("");
    memset(b, 0, sizeof *b);
    return s;
}

typedef struct {
    char **v;
    int n, cap;
} fieldvec;

static void fv_push(fieldvec *f, char *s) {
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 16;
        f->v = vb_realloc_check(f->v, (size_t)f->cap * sizeof *f->v);
    }
    f->v[f->n++] = s;
}


void vb_csv_free(vb_csv *t) {
    if (!t) return;
    for (int i = 0; i < t->ncols; i++) free(t->header[i]);
    free(t->header);
    if (t->cells)
        for (size_t i = 0; i < (size_t)t->nrows * (size_t)t->ncols; i++) free(t->cells[i]);
    free(t->cells);
    free(t->nfields);
    free(t->record);
    memset(t, 0, sizeof *t);
}

int vb_csv_parse(const char *text, size_t len, vb_csv *t, char *err, size_t errn) {
    memset(t, 0, sizeof *t);
    size_t i = 0;
    if (len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB && (unsigned char)text[2] == 0xBF)
        i = 3;
    fieldvec rec = {0};
    strbuf field = {0};
    int record = 0; /* 1-based record number for messages */
    size_t rows_cap = 0;
    bool any = false;
    while (i <= len) {
        /* one record */
        record++;
        rec.n = 0;
        bool end_of_record = false;
        if (i == len) break;
        while (!end_of_record) {
            bool quoted = false;
            if (i < len && text[i] == '"') {
                quoted = true;
                i++;
                for (;;) {
                    if (i >= len) {
                        vb_errf(err, errn, "record %d: unterminated quoted field", record);
                        free(field.s);
                        for (int k = 0; k < rec.n; k++) free(rec.v[k]);
                        free(rec.v);
                        vb_csv_free(t);
                        return -1;
                    }
                    if (text[i] == '\0') goto nul_byte;
                    if (text[i] == '"') {
                        if (i + 1 < len && text[i + 1] == '"') {
                            sb_putc(&field, '"');
                            i += 2;
                            continue;
                        }
                        i++;
                        break;
                    }
                    sb_putc(&field, text[i++]);
                }
            }
            while (i < len && text[i] != ',' && text[i] != '\n' && !(text[i] == '\r' && (i + 1 == len || text[i + 1] == '\n'))) {
                if (text[i] == '\0') goto nul_byte;
                if (quoted && text[i] != ' ') {
                    vb_errf(err, errn, "record %d: text after a closing quote", record);
                    free(field.s);
                    for (int k = 0; k < rec.n; k++) free(rec.v[k]);
                    free(rec.v);
                    vb_csv_free(t);
                    return -1;
                }
                if (!quoted) sb_putc(&field, text[i]);
                i++;
            }
            char *value = sb_take(&field);
            /* the apostrophe vb_csv_field puts before text a spreadsheet would
             * run as a formula (core/util/fileio.h) is not part of the value */
            if (value[0] == '\'' && (vb_csv_formula_lead(value[1]) || value[1] == '\''))
                memmove(value, value + 1, strlen(value));
            fv_push(&rec, value);
            if (i < len && text[i] == ',') {
                i++;
                continue;
            }
            if (i < len && text[i] == '\r') i++;
            if (i < len && text[i] == '\n') i++;
            end_of_record = true;
        }
        /* a blank line (one empty unquoted field) is skipped */
        if (rec.n == 1 && rec.v[0][0] == '\0') {
            free(rec.v[0]);
            continue;
        }
        if (!any) {
            any = true;
            t->ncols = rec.n;
            t->header = vb_malloc_check((size_t)rec.n * sizeof *t->header);
            memcpy(t->header, rec.v, (size_t)rec.n * sizeof *rec.v);
            continue;
        }
        if (rec.n > t->ncols) {
            vb_errf(err, errn, "record %d: %d fields, the header has %d", record, rec.n, t->ncols);
            for (int k = 0; k < rec.n; k++) free(rec.v[k]);
            free(rec.v);
            vb_csv_free(t);
            return -1;
        }
        if ((size_t)t->nrows + 1 > rows_cap) {
            rows_cap = rows_cap ? 2 * rows_cap : 64;
            t->cells = vb_realloc_check(t->cells, rows_cap * (size_t)t->ncols * sizeof *t->cells);
            t->nfields = vb_realloc_check(t->nfields, rows_cap * sizeof *t->nfields);
            t->record = vb_realloc_check(t->record, rows_cap * sizeof *t->record);
        }
        t->nfields[t->nrows] = rec.n;
        t->record[t->nrows] = record;
        char **row = t->cells + (size_t)t->nrows * (size_t)t->ncols;
        for (int k = 0; k < t->ncols; k++) {
            if (k < rec.n) {
                row[k] = rec.v[k];
            } else {
                row[k] = vb_strdup_check("");
            }
        }
        t->nrows++;
    }
    free(rec.v);
    free(field.s);
    t->terminated = len > 0 && text[len - 1] == '\n';
    if (false) {
    nul_byte:
        /* text holds no NUL: a record of them would read as a blank line and
         * a field would end at its first (a number cut short) */
        vb_errf(err, errn, "record %d: a NUL byte (byte %zu of the file): not text; the file is damaged", record, i);
        free(field.s);
        for (int k = 0; k < rec.n; k++) free(rec.v[k]);
        free(rec.v);
        vb_csv_free(t);
        return -1;
    }
    if (!any) {
        vb_errf(err, errn, "empty (no header line)");
        vb_csv_free(t);
        return -1;
    }
    return 0;
}

int vb_csv_read(const char *path, vb_csv *t, char *err, size_t errn) {
    memset(t, 0, sizeof *t);
    char why[VB_PATH_MAX + 64];
    FILE *f = vb_fopen_regular(path, why, sizeof why);
    if (!f) {
        int e = errno;
        vb_errf(err, errn, "%s: cannot open (%s)", path, why);
        errno = e;
        return -1;
    }
    strbuf b = {0};
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        for (size_t j = 0; j < k; j++) sb_putc(&b, chunk[j]);
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(b.s);
        vb_errf(err, errn, "%s: read error", path);
        return -1;
    }
    int rc = vb_csv_parse(b.s ? b.s : "", b.n, t, why, sizeof why);
    free(b.s);
    if (rc != 0) {
        vb_errf(err, errn, "%s: %s", path, why);
        return -2;
    }
    return 0;
}

int vb_csv_col(const vb_csv *t, const char *name) {
    for (int i = 0; i < t->ncols; i++)
        if (strcmp(t->header[i], name) == 0) return i;
    return -1;
}

const char *vb_csv_get(const vb_csv *t, int row, int col) {
    if (col < 0 || col >= t->ncols || row < 0 || row >= t->nrows) return "";
    return t->cells[(size_t)row * (size_t)t->ncols + (size_t)col];
}

bool vb_csv_num(const vb_csv *t, int row, int col, double *out) {
    const char *s = vb_csv_get(t, row, col);
    if (!*s) return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    while (*end == ' ') end++;
    if (*end || errno == ERANGE || !isfinite(v)) return false;
    *out = v;
    return true;
}
