/* fileio.h: crash-safe file writes and CSV field quoting.
 *
 * The small file helpers every writer of results shares (the profiler's
 * ops.csv, the timeline, the run directory's files, the analysis tools),
 * kept apart from results.h so that a module that only writes a file does
 * not depend on the run configuration.
 */
#ifndef VB_FILEIO_H
#define VB_FILEIO_H

#include <stdbool.h>
#include <stdio.h>

/* Atomic text file write: `write_fn(f, ctx)` writes into a temporary file in the
 * same directory which is then renamed over `path`. Returns 0 on success, or
 * -1 with errno set to the cause (creating, writing, flushing, fsync, close or
 * rename: a full disk is ENOSPC/EFBIG, a read-only one EROFS/EACCES); the
 * temporary file is removed and `path` keeps its previous contents. */
int vb_atomic_write(const char *path, void (*write_fn)(FILE *f, void *ctx), void *ctx);

/* The same for `name` (a file name, no '/') in the open directory dirfd:
 * the temporary is created there exclusively and without following links,
 * and renamed over name with renameat. What outdir.h's writers use. */
int vb_atomic_write_at(int dirfd, const char *name, void (*write_fn)(FILE *f, void *ctx), void *ctx);
/* vb_atomic_write_at with the file's mode set to `mode` before the rename
 * (a job script's 0775), so the file is never there with another one. */
int vb_atomic_write_at_mode(int dirfd, const char *name, unsigned mode, void (*write_fn)(FILE *f, void *ctx),
                            void *ctx);

/* `name` (no '/') in the open directory dirfd, opened to append (created
 * 0666 less the umask when missing; close-on-exec): the one way a file is
 * written in place rather than by rename (a run's log while it runs). A
 * symbolic link at name fails with ELOOP, anything but a regular file with
 * EINVAL, and a regular file with more than one link (a hard link to a file
 * elsewhere, which an append would write into) with EMLINK: nothing is
 * written. Returns the descriptor, or -1 with errno set. */
int vb_open_append_at(int dirfd, const char *name);
/* What vb_open_append_at's errno means, for messages ("a symbolic link,
 * not written through"); NULL for an OS error of another kind. */
const char *vb_append_refusal(int err);

/* A file whose last rewrite must not need free space (run.json, whose final
 * status has to land even when the run died of a full disk). `text` is
 * written atomically as vb_atomic_write does, followed by trailing spaces
 * (ending in a newline) up to `reserve` bytes when it is shorter: JSON and
 * CSV readers skip trailing whitespace, and the padding keeps that much
 * space allocated to the file. When the atomic write fails for want of room
 * (ENOSPC, EDQUOT, EFBIG: the temporary needs new blocks) and the existing
 * file is at least as long as `text`, the file is rewritten in place over
 * its own blocks instead, the rest of it turned into spaces. That rewrite is
 * not atomic (a reader at that moment may see a mix), which is why it is
 * only the fallback; on a copy-on-write filesystem it fails like the atomic
 * one. Returns 0, or -1 with errno set to the atomic write's cause. */
int vb_write_reserved(const char *path, const char *text, size_t reserve);

/* An environment failure (full or read-only disk, closed stream): ONE line
 * "vitbench: error: <msg>" on stderr (with "[rank N]" on ranks other than 0),
 * then exit(1). Not an input error (exit 2) and not a bug: the user fixes the
 * machine, not the command line. */
void vb_die_env(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* vb_atomic_write, and on failure vb_die_env naming `path` and the OS error:
 * a result that cannot be written stops the run instead of being lost with a
 * warning (run and train results). */
void vb_atomic_write_or_die(const char *path, void (*write_fn)(FILE *f, void *ctx), void *ctx);

/* CSV field quoting (RFC 4180) into f: the field as is unless it holds a
 * comma, a quote or a line break, else quoted with inner quotes doubled.
 * Text that a spreadsheet would run as a formula (it starts with = + - @,
 * a tab or a CR, and is not a number) is written with a leading apostrophe,
 * as spreadsheets expect, so a run or kernel name never runs in one; numbers
 * stay numbers. Text that starts with an apostrophe before one of those
 * characters (or another apostrophe) gets one more, and analysis/csv.h's
 * reader drops one: every value reads back as it was. */
void vb_csv_field(FILE *f, const char *s);
/* c is one of = + - @ tab CR: a cell starting with it is a formula to a spreadsheet */
bool vb_csv_formula_lead(char c);

#endif
