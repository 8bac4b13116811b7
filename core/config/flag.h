/* flag.h: the one flag grammar of every vitbench command line.
 *
 * `vitbench run` / `train` (config keys, core/config/config.c) and every
 * table-driven command (core/config/cli.c) read their flags through these
 * pieces, so a flag is written the same way everywhere:
 *   - --name=VALUE or --name VALUE;
 *   - '-' and '_' are the same in a name (--dry-run = --dry_run,
 *     --local-batch-size = --local_batch_size);
 *   - a boolean is 1/0, true/false, yes/no or on/off in any case; a bare
 *     boolean flag means true;
 *   - an unknown name is refused, with the nearest known name when one is
 *     close ("did you mean --local_batch_size?").
 */
#ifndef VB_FLAG_H
#define VB_FLAG_H

#include <stdbool.h>
#include <stddef.h>

/* Boolean text: 1/true/yes/on and 0/false/no/off, any case. Returns false
 * (and leaves *out) on anything else. The same words as a YAML config's. */
bool vb_flag_parse_bool(const char *text, bool *out);

/* Strict integer: digits with an optional sign, nothing before or after,
 * within long long. */
bool vb_flag_parse_ll(const char *text, long long *out);

/* Strict decimal number, as vb_flag_parse_ll is for integers: an optional
 * sign, digits with an optional point and exponent, nothing before or
 * after. Hexadecimal (C's 0x1p3, which strtod takes), inf and nan are not
 * numbers here; a value too large for a double is VB_NUM_OVERFLOW, one too
 * small to be anything but 0 (1e-400) VB_NUM_UNDERFLOW, so that a message
 * can name the value as given instead of the 0 it became. */
typedef enum { VB_NUM_OK, VB_NUM_BAD, VB_NUM_HEX, VB_NUM_OVERFLOW, VB_NUM_UNDERFLOW } vb_num_status;
vb_num_status vb_flag_parse_double(const char *text, double *out);
/* Why text is not a number, for a message ("not a number", "hexadecimal:
 * a decimal number is taken", "too small: it would be 0") or NULL for OK. */
const char *vb_num_problem(vb_num_status st);

/* Splits "--name" / "--name=value": the name, '-' written as '_', into
 * name[cap], and *value to the text after '=' (NULL without one). Returns
 * false when arg is not such a flag ("--", "--=x", "x") or the name does not
 * fit (name is then empty). */
bool vb_flag_split(const char *arg, char *name, size_t cap, const char **value);

/* Whether two flag names are the same, '-' and '_' alike. */
bool vb_flag_same_name(const char *a, const char *b);

/* The nearest known name to a mistyped one: feed every known name to
 * vb_flag_near_try, then vb_flag_near_best is the closest one when it is
 * close (a few edits for a long name, one for a short one), else NULL.
 * Names compare with '-' and '_' alike; the pointer given is returned. */
typedef struct vb_flag_near {
    const char *typed;
    const char *best;
    int best_dist;
} vb_flag_near;

void vb_flag_near_init(vb_flag_near *n, const char *typed);
void vb_flag_near_try(vb_flag_near *n, const char *known);
const char *vb_flag_near_best(const vb_flag_near *n);

#endif
