#include "core/util/yaml_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"

/* Deeper than this, a merge chain is almost certainly an alias cycle
 * (an anchor merged into its own mapping), which would otherwise recurse forever. */
#define VB_YAML_MAX_MERGE_DEPTH 32

/* libyaml's own words for a malformed file, with where */
static void die_malformed(const yaml_parser_t *parser, const char *label) {
    const char *problem = parser->problem ? parser->problem : "unknown problem";
    if (parser->error == YAML_READER_ERROR)
        vb_die_input("%s: malformed YAML at byte %zu: %s", label, parser->problem_offset, problem);
    if (parser->context)
        vb_die_input("%s: malformed YAML at line %zu column %zu: %s %s", label, parser->problem_mark.line + 1,
                     parser->problem_mark.column + 1, parser->context, problem);
    vb_die_input("%s: malformed YAML at line %zu column %zu: %s", label, parser->problem_mark.line + 1,
                 parser->problem_mark.column + 1, problem);
}

/* Nesting deeper than VB_YAML_MAX_DEPTH is refused before the document is
 * built: libyaml's loader takes time quadratic in the depth (100,000 levels
 * of [[[...]]] ran for minutes), and no config of vitbench nests more than
 * a handful. The events are read only up to the first level too deep. */
static void check_depth(FILE *f, const char *label) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) vb_die_internal("yaml_parser_initialize failed");
    yaml_parser_set_input_file(&parser, f);
    int depth = 0;
    for (bool done = false; !done;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) die_malformed(&parser, label);
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > VB_YAML_MAX_DEPTH) {
                const size_t line = ev.start_mark.line + 1;
                yaml_event_delete(&ev);
                yaml_parser_delete(&parser);
                vb_die_input("%s: nested more than %d levels deep (line %zu): lists and mappings inside each other "
                             "that deep are no config",
                             label, VB_YAML_MAX_DEPTH, line);
            }
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        done = ev.type == YAML_STREAM_END_EVENT || ev.type == YAML_NO_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
}

bool vb_yaml_load(yaml_document_t *doc, const char *path, const char *label) {
    FILE *f = vb_fopen_input(path, label);

    check_depth(f, label);
    rewind(f);

    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) vb_die_internal("yaml_parser_initialize failed");
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, doc)) {
        /* libyaml's own words are the most precise description of the problem */
        die_malformed(&parser, label);
    }
    yaml_parser_delete(&parser);
    fclose(f);
    return yaml_document_get_root_node(doc) != NULL;
}

const char *vb_yaml_scalar(const yaml_node_t *n) {
    return (n && n->type == YAML_SCALAR_NODE) ? (const char *)n->data.scalar.value : NULL;
}

bool vb_yaml_is_null(const yaml_node_t *n) {
    if (!n || n->type != YAML_SCALAR_NODE) return false;
    if (n->tag && strcmp((const char *)n->tag, YAML_NULL_TAG) == 0) return true;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false; /* 'null' is a string */
    /* YAML's nulls only: None stays text (amp_mode: none is a string); the
     * keys where None means "no limit" decide that themselves */
    static const char *nulls[] = {"", "~", "null", "Null", "NULL"};
    const char *s = (const char *)n->data.scalar.value;
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        if (strcmp(s, nulls[i]) == 0) return true;
    return false;
}

int vb_yaml_line(const yaml_node_t *n) { return n ? (int)n->start_mark.line + 1 : 0; }

const char *vb_yaml_kind(const yaml_node_t *n) {
    if (!n) return "nothing";
    switch (n->type) {
    case YAML_MAPPING_NODE: return "a mapping";
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_SCALAR_NODE: return "a scalar";
    default: return "nothing";
    }
}

static int pairs_find(const vb_yaml_pairs *p, const char *key) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->pairs[i].key, key) == 0) return i;
    return -1;
}

static void pairs_push(vb_yaml_pairs *p, const char *key, yaml_node_t *value, int line) {
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 16;
        p->pairs = vb_realloc_check(p->pairs, (size_t)p->cap * sizeof *p->pairs);
    }
    p->pairs[p->n++] = (vb_yaml_pair){key, value, line};
}

void vb_yaml_pairs_free(vb_yaml_pairs *p) {
    free(p->pairs);
    p->pairs = NULL;
    p->n = p->cap = 0;
}

static void collect(yaml_document_t *doc, yaml_node_t *map, const char *where, vb_yaml_pairs *out,
                    int depth) {
    if (depth > VB_YAML_MAX_MERGE_DEPTH)
        vb_die_input("%s: merge keys '<<' nest more than %d deep (an alias cycle?)", where,
                     VB_YAML_MAX_MERGE_DEPTH);
    yaml_node_t *merge = NULL;
    int merge_line = 0;
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(doc, pr->value);
        const char *key = vb_yaml_scalar(k);
        if (!key) vb_die_input("%s: a key at line %d is %s, not a name", where, vb_yaml_line(k), vb_yaml_kind(k));
        /* only a plain << is the merge key; a quoted '<<' is an ordinary key */
        bool is_merge = strcmp(key, "<<") == 0 && k->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        if (is_merge) {
            if (merge) vb_die_input("%s: duplicate merge key '<<' (line %d)", where, vb_yaml_line(k));
            merge = v;
            merge_line = vb_yaml_line(k);
            continue;
        }
        if (pairs_find(out, key) >= 0)
            vb_die_input("%s: duplicate key '%s' (line %d)", where, key, vb_yaml_line(k));
        pairs_push(out, key, v, vb_yaml_line(k));
    }
    if (!merge) return;

    /* sources in order; a key already present (own, or from an earlier source) is kept */
    int nsrc = 1;
    if (merge->type == YAML_SEQUENCE_NODE)
        nsrc = (int)(merge->data.sequence.items.top - merge->data.sequence.items.start);
    else if (merge->type != YAML_MAPPING_NODE)
        vb_die_input("%s: merge key '<<' (line %d) must be an alias of a mapping or a list of them, not %s '%s'",
                     where, merge_line, vb_yaml_kind(merge), vb_yaml_scalar(merge) ? vb_yaml_scalar(merge) : "");
    for (int s = 0; s < nsrc; s++) {
        yaml_node_t *src = merge;
        if (merge->type == YAML_SEQUENCE_NODE) src = yaml_document_get_node(doc, merge->data.sequence.items.start[s]);
        if (!src || src->type != YAML_MAPPING_NODE)
            vb_die_input("%s: merge key '<<' (line %d): entry %d is %s, not a mapping", where, merge_line, s + 1,
                         vb_yaml_kind(src));
        vb_yaml_pairs tmp = {0};
        collect(doc, src, where, &tmp, depth + 1);
        for (int i = 0; i < tmp.n; i++)
            if (pairs_find(out, tmp.pairs[i].key) < 0) pairs_push(out, tmp.pairs[i].key, tmp.pairs[i].value, tmp.pairs[i].line);
        vb_yaml_pairs_free(&tmp);
    }
}

void vb_yaml_mapping_pairs(yaml_document_t *doc, yaml_node_t *map, const char *where, vb_yaml_pairs *out) {
    out->pairs = NULL;
    out->n = out->cap = 0;
    if (!map || map->type != YAML_MAPPING_NODE)
        vb_die_input("%s: expected a mapping of key: value, found %s", where, vb_yaml_kind(map));
    collect(doc, map, where, out, 0);
}
