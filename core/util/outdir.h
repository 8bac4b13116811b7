/* outdir.h: the one way vitbench writes into a results tree.
 *
 * A results tree is the directory a command writes below: a run or sweep
 * directory it was given (report, trace, compare, model), an --output_dir,
 * the folder of an imported nsys report. Its root is the user's choice and may
 * be reached through symbolic links; below the root vitbench follows none:
 *   - every directory it writes into below the root is one it creates
 *     (mkdirat) or one it finds to be a real directory, opened component by
 *     component from the root with O_NOFOLLOW: a symbolic link (to a
 *     directory or anything else), a file or a device at a directory's name
 *     stops the write with one line naming it;
 *   - every file is written into a temporary in that directory and renamed
 *     over its name (renameat): a link planted at a file's name is replaced,
 *     never written through, and a reader sees the old file or the new one.
 * The directory stays open as a descriptor while it is written into, so it
 * cannot be swapped for a link between the check and the writes.
 */
#ifndef VB_OUTDIR_H
#define VB_OUTDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/util/common.h"

/* Set by a sweep in the environment of each run it starts: the sweep
 * directory, below which the run creates its own directory following no
 * link (core/results vb_run_dir_create). */
#define VB_RESULTS_TREE_ENV "VB_RESULTS_TREE"

typedef struct vb_outdir {
    int fd;                 /* the directory, open; -1 when closed */
    char path[VB_PATH_MAX]; /* root/rel, for messages and for programs run in it */
    char root[VB_PATH_MAX]; /* the tree's root, for messages */
} vb_outdir;

/* What a failed call returns: the tree holds something that is not a real
 * directory where one is needed (bad input: exit 2), or the OS refused
 * (errno set: a full or read-only disk, no permission). */
#define VB_OUTDIR_NOT_A_DIR (-2)
#define VB_OUTDIR_OS_ERROR (-1)

/* Opens root/rel for writing. root is created with its parents when missing
 * (as the user named it, links and all); rel ("" or NULL for the root
 * itself, components separated by '/', no "..") is opened or created below
 * it as described above. 0, or one of the codes above with one line in why
 * (n bytes) naming the path and what it is. */
int vb_outdir_open(vb_outdir *d, const char *root, const char *rel, char *why, size_t n);

/* A directory below an open one, by the same rule (rel as above). */
int vb_outdir_sub(vb_outdir *child, const vb_outdir *parent, const char *rel, char *why, size_t n);

/* Writes name (a file name, or a relative path whose directories are opened
 * or created by the same rule) in d: write_fn(f, ctx) fills a temporary that
 * is then renamed over it. 0, or one of the codes above with why filled. */
int vb_outdir_write(const vb_outdir *d, const char *name, void (*write_fn)(FILE *f, void *ctx), void *ctx,
                    char *why, size_t n);

/* vb_outdir_write with the file's mode (a job script's 0775) set before it
 * is renamed into place. */
int vb_outdir_write_mode(const vb_outdir *d, const char *name, unsigned mode, void (*write_fn)(FILE *f, void *ctx),
                         void *ctx, char *why, size_t n);

/* name (a file name) in d opened to append (fileio.h vb_open_append_at): a
 * symbolic link, a hard link or anything but a regular file there is
 * refused, nothing written. The descriptor, or one of the codes above with
 * why filled (VB_OUTDIR_NOT_A_DIR for what is refused). */
int vb_outdir_append_fd(const vb_outdir *d, const char *name, char *why, size_t n);

/* An existing directory name (one component) below parent, opened as
 * vb_outdir_sub opens one but never created: VB_OUTDIR_OS_ERROR with errno
 * ENOENT when it is not there. */
int vb_outdir_sub_existing(vb_outdir *child, const vb_outdir *parent, const char *name, char *why, size_t n);

/* Is name in parent still the directory child holds open? 0 yes; else
 * VB_OUTDIR_NOT_A_DIR with why saying what is there now (a directory held
 * open since the start that was swapped for a link or moved away: nothing
 * may be written by its path any more). */
int vb_outdir_still(const vb_outdir *parent, const char *name, const vb_outdir *child, char *why, size_t n);

/* "/proc/self/fd/<d's descriptor>/name" into buf (n bytes): a path that
 * names name in the very directory d holds open, whatever its path leads to
 * now, for the readers and writers that take a path (the CSV reader, run.json's
 * rewrite). d->path/name where /proc is not mounted. */
void vb_outdir_fd_path(const vb_outdir *d, const char *name, char *buf, size_t n);

/* vb_outdir_open and vb_outdir_write that exit on failure with one line
 * "<cmd>: <why>": 2 for a link or non-directory in the tree, 1 for the OS's
 * refusal (vb_die_env). */
void vb_outdir_open_or_die(vb_outdir *d, const char *root, const char *rel, const char *cmd);
void vb_outdir_write_or_die(const vb_outdir *d, const char *name, void (*write_fn)(FILE *f, void *ctx), void *ctx,
                            const char *cmd);

/* Removes name from d if it is there (a file or a link; never what a link
 * points to). 0, or -1 with errno set. */
int vb_outdir_unlink(const vb_outdir *d, const char *name);

void vb_outdir_close(vb_outdir *d);

#endif
