/* yaml_util.h: the small slice of YAML handling that the run config and
 * benchy's config share, on top of libyaml's document API.
 *
 * libyaml resolves anchors and aliases itself (an alias is the very node it
 * names) but leaves YAML 1.1 merge keys (`<<: *base`, `<<: [*a, *b]`) to the
 * application; vb_yaml_mapping_pairs resolves them.
 * Every failure is bad user input: one line naming the file, exit 2.
 */
#ifndef VB_YAML_UTIL_H
#define VB_YAML_UTIL_H

#include <stdbool.h>
#include <yaml.h>

typedef struct vb_yaml_pair {
    const char *key;    /* points into the document */
    yaml_node_t *value;
    int line;           /* 1-based line of the key, for messages */
} vb_yaml_pair;

typedef struct vb_yaml_pairs {
    vb_yaml_pair *pairs;
    int n, cap;
} vb_yaml_pairs;

/* Lists and mappings nested deeper than this are refused (exit 2). */
#define VB_YAML_MAX_DEPTH 64

/* Parses the first document of `path` into doc. A missing, unreadable or
 * malformed file, or one nested deeper than VB_YAML_MAX_DEPTH, exits 2 with
 * "<label>: ..." (label names the file for the user, e.g. the path or
 * "BENCHY_CONFIG_FILE=<path>"). Returns false (doc still initialised, to be
 * deleted) when the file holds no document. */
bool vb_yaml_load(yaml_document_t *doc, const char *path, const char *label);

/* The effective key/value pairs of mapping `map` with merge keys resolved:
 * the mapping's own keys win over merged ones, and among several merge
 * sources the earlier wins (YAML 1.1). Own keys come first, in file order.
 * A duplicate own key, a non-scalar key or a bad merge value exits 2 with
 * "<where>: ...". Free with vb_yaml_pairs_free. */
void vb_yaml_mapping_pairs(yaml_document_t *doc, yaml_node_t *map, const char *where,
                           vb_yaml_pairs *out);
void vb_yaml_pairs_free(vb_yaml_pairs *p);

/* Scalar text, or NULL when the node is not a scalar. */
const char *vb_yaml_scalar(const yaml_node_t *n);
/* True for a YAML null: a !!null tag, or a plain scalar "", ~, null, Null or
 * NULL. Not None: that is text to YAML (the tutorial's `limit_nsamples: None`
 * is interpreted by the keys that accept it). */
bool vb_yaml_is_null(const yaml_node_t *n);
/* 1-based line where the node starts. */
int vb_yaml_line(const yaml_node_t *n);
/* Short human name of the node kind: "a mapping", "a list", "a scalar". */
const char *vb_yaml_kind(const yaml_node_t *n);

#endif
