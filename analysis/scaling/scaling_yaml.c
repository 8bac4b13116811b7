/* scaling_yaml.c: typed values of the model's YAML files (scaling_yaml.h). */
#include "analysis/scaling/scaling_yaml.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/flag.h"
#include "core/util/common.h"

void vb_my_pairs(const vb_my *y, yaml_node_t *map, const char *where, vb_yaml_pairs *out) {
    if (!map || map->type != YAML_MAPPING_NODE)
        vb_die_input("%s: %s (line %d): expected a mapping of keys, found %s", y->file, where, vb_yaml_line(map),
                     vb_yaml_kind(map));
    char w[512];
    snprintf(w, sizeof w, "%s: %s", y->file, where);
    vb_yaml_mapping_pairs(y->doc, map, w, out);
}

void vb_my_only_keys(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *const *known) {
    for (int i = 0; i < p->n; i++) {
        bool ok = false;
        for (int k = 0; known[k] && !ok; k++) ok = strcmp(p->pairs[i].key, known[k]) == 0;
        if (!ok) {
            char list[512] = "";
            size_t len = 0;
            for (int k = 0; known[k]; k++)
                len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0, "%s%s", k ? ", " : "",
                                        known[k]);
            vb_die_input("%s: %s.%s (line %d): unknown key (known: %s)", y->file, where, p->pairs[i].key,
                         p->pairs[i].line, list);
        }
    }
}

yaml_node_t *vb_my_get(const vb_yaml_pairs *p, const char *key, int *line) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->pairs[i].key, key) == 0) {
            if (line) *line = p->pairs[i].line;
            return vb_yaml_is_null(p->pairs[i].value) ? NULL : p->pairs[i].value;
        }
    return NULL;
}

static double parse_num(const vb_my *y, yaml_node_t *n, const char *what, int line, double lo, double hi) {
    const char *t = vb_yaml_scalar(n);
    if (!t) vb_die_input("%s: %s (line %d): expected a number, found %s", y->file, what, line, vb_yaml_kind(n));
    double v;
    vb_num_status st = vb_flag_parse_double(t, &v);
    if (st != VB_NUM_OK) vb_die_input("%s: %s (line %d): '%s' is %s", y->file, what, line, t, vb_num_problem(st));
    if (v < lo || v > hi) vb_die_input("%s: %s (line %d): %s is outside [%g, %g]", y->file, what, line, t, lo, hi);
    return v;
}

double vb_my_node_num(const vb_my *y, yaml_node_t *n, const char *what, double lo, double hi) {
    return parse_num(y, n, what, vb_yaml_line(n), lo, hi);
}

double vb_my_num_or(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, double lo, double hi,
                    double dflt) {
    int line = 0;
    yaml_node_t *n = vb_my_get(p, key, &line);
    if (!n) return dflt;
    char what[256];
    snprintf(what, sizeof what, "%s.%s", where, key);
    return parse_num(y, n, what, line, lo, hi);
}

double vb_my_num(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, double lo, double hi) {
    if (!vb_my_get(p, key, NULL)) vb_die_input("%s: %s: missing required key '%s'", y->file, where, key);
    return vb_my_num_or(y, p, where, key, lo, hi, 0);
}

int vb_my_int_or(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, int lo, int hi,
                 int dflt) {
    int line = 0;
    yaml_node_t *n = vb_my_get(p, key, &line);
    if (!n) return dflt;
    char what[256];
    snprintf(what, sizeof what, "%s.%s", where, key);
    const double v = parse_num(y, n, what, line, lo, hi);
    if (v != floor(v)) vb_die_input("%s: %s (line %d): '%s' is not an integer", y->file, what, line, vb_yaml_scalar(n));
    return (int)v;
}

int vb_my_int(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, int lo, int hi) {
    if (!vb_my_get(p, key, NULL)) vb_die_input("%s: %s: missing required key '%s'", y->file, where, key);
    return vb_my_int_or(y, p, where, key, lo, hi, 0);
}

bool vb_my_str_or(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, char *buf, size_t n) {
    int line = 0;
    yaml_node_t *v = vb_my_get(p, key, &line);
    if (!v) return false;
    const char *t = vb_yaml_scalar(v);
    if (!t) vb_die_input("%s: %s.%s (line %d): expected text, found %s", y->file, where, key, line, vb_yaml_kind(v));
    if (strlen(t) >= n)
        vb_die_input("%s: %s.%s (line %d): longer than %zu characters", y->file, where, key, line, n - 1);
    snprintf(buf, n, "%s", t);
    return true;
}

void vb_my_str(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *key, char *buf, size_t n) {
    if (!vb_my_str_or(y, p, where, key, buf, n))
        vb_die_input("%s: %s: missing required key '%s'", y->file, where, key);
}

yaml_node_t **vb_my_list(const vb_my *y, yaml_node_t *n, const char *what, int *count) {
    if (!n || n->type != YAML_SEQUENCE_NODE)
        vb_die_input("%s: %s (line %d): expected a list, found %s", y->file, what, vb_yaml_line(n), vb_yaml_kind(n));
    const int c = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
    yaml_node_t **out = vb_calloc_check((size_t)c + 1, sizeof *out);
    for (int i = 0; i < c; i++) out[i] = yaml_document_get_node(y->doc, n->data.sequence.items.start[i]);
    *count = c;
    return out;
}
