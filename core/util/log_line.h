/* log_line.h: the line of a run's log that says why it failed, for the
 * sweep's console and the report of a sweep whose runs failed: vitbench's
 * own one-line error when there is one (mpirun prints its report of the exit
 * after it); else the last line that says something (not blank, not a
 * '#' comment, not a line of dashes, not one starting with `skip`), and
 * where that sits in one of Open MPI's framed help texts (between lines of
 * dashes), the text's first line, its summary. "" when the file cannot be
 * read or says nothing. */
#ifndef VB_LOG_LINE_H
#define VB_LOG_LINE_H

#include <stddef.h>

void vb_log_last_line(const char *path, const char *skip, char *buf, size_t n);

#endif
