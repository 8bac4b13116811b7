/* csv.h: reading the CSV files vitbench and nsys write.
 *
 * RFC 4180: fields separated by commas, a field in double quotes may hold
 * commas, doubled quotes and newlines; CRLF or LF line ends; a UTF-8 byte
 * order mark before the first field is skipped. The first record is the
 * header; columns are found by name, so readers tolerate extra columns and
 * any column order. A record with fewer fields than the header reads as
 * empty strings for the missing ones; one with more is malformed. The
 * apostrophe vitbench's writer puts before text a spreadsheet would take
 * for a formula (core/util/fileio.h vb_csv_field) is dropped: a field
 * "'=x" reads as =x, "''=x" as '=x. A NUL byte anywhere is malformed (a
 * damaged file: a record of NULs would read as a blank line, a field would
 * end at its first: 5<NUL>0 as 5), named by its record.
 */
#ifndef VB_ANALYSIS_CSV_H
#define VB_ANALYSIS_CSV_H

#include <stdbool.h>
#include <stddef.h>

typedef struct vb_csv {
    int ncols;
    char **header;   /* ncols names */
    int nrows;       /* data records, the header excluded */
    char **cells;    /* nrows x ncols, row-major; never NULL for a valid cell */
    int *nfields;    /* fields each data record had: fewer than ncols when the rest read as "" */
    int *record;     /* each data record's number in the text (the header is 1; blank lines count) */
    bool terminated; /* the text ends with a line end: false when the last record
                        was cut short (a writer that stopped mid-line) */
} vb_csv;

/* Parses `len` bytes of CSV text. Returns 0, or -1 with a reason in err
 * (record number and what is wrong) for malformed text or an empty input. */
int vb_csv_parse(const char *text, size_t len, vb_csv *t, char *err, size_t errn);

/* Reads and parses a file. Returns 0; -1 when it cannot be opened (err says
 * why, errno kept); -2 when it is malformed (err names the record). */
int vb_csv_read(const char *path, vb_csv *t, char *err, size_t errn);

/* Column index of `name` (exact match), or -1. */
int vb_csv_col(const vb_csv *t, const char *name);
/* Cell text; "" for col < 0 or a row out of range. */
const char *vb_csv_get(const vb_csv *t, int row, int col);
/* Cell as a finite double (strtod, the whole cell); false when empty or not a number. */
bool vb_csv_num(const vb_csv *t, int row, int col, double *out);

void vb_csv_free(vb_csv *t);

#endif
