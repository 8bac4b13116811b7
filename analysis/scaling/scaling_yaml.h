/* scaling_yaml.h: typed values out of the scaling model's YAML files (machine
 * descriptions, compute references, the tutorials' published results), on
 * top of core/util/yaml_util.h.
 *
 * Every helper either returns a value that passed its check or exits 2 with
 * one line "<file>: <key> (line N): <what was wrong>", so a bad number in a
 * machine file names the file, the key and the line. Keys are looked up in a
 * mapping whose merge keys are resolved (vb_yaml_mapping_pairs); a key the
 * caller does not know is refused by vb_my_only_keys, so a misspelt key
 * (`beta_gbps`) is an error instead of a silently ignored default.
 */
#ifndef VB_ANALYSIS_SCALING_YAML_H
#define VB_ANALYSIS_SCALING_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#include "core/util/yaml_util.h"

typedef struct vb_my {
    const char *file;     /* for messages */
    yaml_document_t *doc;
} vb_my;

/* A mapping node's pairs, refusing anything that is not a mapping ("where"
 * names it in messages). Free with vb_yaml_pairs_free. */
void vb_my_pairs(const vb_my *y, yaml_node_t *map, const char *where, vb_yaml_pairs *out);

/* Exits 2 naming the first key of p that is not in `known` (NULL-terminated). */
void vb_my_only_keys(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *const *known);

/* The value node of `key` in p, or NULL when absent (a YAML null counts as absent). */
yaml_node_t *vb_my_get(const vb_yaml_pairs *p, const char *key, int *line);

/* Required / optional scalars. Numbers must be finite and in [lo, hi]. */
double vb_my_num(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, double lo, double hi);
double vb_my_num_or(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, double lo, double hi,
                    double dflt);
int vb_my_int(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, int lo, int hi);
int vb_my_int_or(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, int lo, int hi,
                 int dflt);
/* Text of a scalar (copied into buf, at most n - 1 bytes: longer is an error). */
void vb_my_str(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, char *buf, size_t n);
bool vb_my_str_or(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, char *buf, size_t n);

/* A scalar node as a number (lo..hi), for list items; `what` names it. */
double vb_my_node_num(const vb_my *y, yaml_node_t *n, const char *what, double lo, double hi);

/* The items of a list node (count in *n); a non-list exits 2. */
yaml_node_t **vb_my_list(const vb_my *y, yaml_node_t *n, const char *what, int *count);

#endif
