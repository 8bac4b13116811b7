/* sweep.c: scenario files -> runs -> launched ranks -> index.csv (sweep.h). */
#include "bench/sweep.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <libgen.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/common.h"
#include "core/config.h"
#include "core/groups.h"
#include "core/results.h"
#include "core/yaml_util.h"
#include "analysis/analysis.h"
#include "analysis/csv.h"
#include "bench/trainer.h"
#include <math.h>

#ifndef VB_GIT_COMMIT
#define VB_GIT_COMMIT "unknown"
#endif
#ifndef VB_SOURCE_DIR
#define VB_SOURCE_DIR "."
#endif

/* ------------------------------------------------------------------------ */
/* small containers                                                           */

static char *xstrdup(const char *s) {
    char *d = strdup(s ? s : "");
    if (!d) vb_die_internal("out of memory copying a string");
    return d;
}

static void *xrealloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) vb_die_internal("out of memory (%zu bytes)", bytes);
    return q;
}

void vb_sweep_kvs_set(vb_sweep_kvs *l, const char *key, const char *value) {
    for (int i = 0; i < l->n; i++) {
        if (strcmp(l->v[i].key, key) == 0) {
            free(l->v[i].value);
            l->v[i].value = xstrdup(value);
            return;
        }
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n].key = xstrdup(key);
    l->v[l->n].value = xstrdup(value);
    l->n++;
}

const char *vb_sweep_kvs_get(const vb_sweep_kvs *l, const char *key) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0) return l->v[i].value;
    return NULL;
}

void vb_sweep_kvs_free(vb_sweep_kvs *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void kvs_copy(vb_sweep_kvs *dst, const vb_sweep_kvs *src) {
    for (int i = 0; i < src->n; i++) vb_sweep_kvs_set(dst, src->v[i].key, src->v[i].value);
}

/* A growable argv (NULL-terminated for execvp). */
typedef struct {
    char **v;
    int n, cap;
} strvec;

static void sv_push(strvec *a, const char *s) {
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? 2 * a->cap : 32;
        a->v = xrealloc(a->v, (size_t)a->cap * sizeof *a->v);
    }
    a->v[a->n++] = xstrdup(s);
    a->v[a->n] = NULL;
}

static void sv_pushf(strvec *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sv_pushf(strvec *a, const char *fmt, ...) {
    char buf[VB_PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof buf) vb_die_internal("argument too long: %.60s...", buf);
    sv_push(a, buf);
}

static void sv_free(strvec *a) {
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

/* ------------------------------------------------------------------------ */
/* text checks                                                                */

/* Strict decimal int (no sign games, no trailing text). */
static bool parse_int(const char *s, int *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return false;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < INT_MIN || v > INT_MAX) return false;
    *out = (int)v;
    return true;
}

static bool parse_bool(const char *s, bool *out) {
    static const char *yes[] = {"true", "True", "TRUE", "yes", "on"}, *no[] = {"false", "False", "FALSE", "no", "off"};
    for (size_t i = 0; i < 5; i++) {
        if (strcmp(s, yes[i]) == 0) return *out = true, true;
        if (strcmp(s, no[i]) == 0) return *out = false, true;
    }
    return false;
}

int *vb_sweep_parse_int_list(const char *text, const char *what, int *n) {
    int cap = 8, count = 0;
    int *v = xrealloc(NULL, (size_t)cap * sizeof *v);
    const char *p = text;
    if (!*p) vb_die_input("%s: empty list (expected e.g. 1,2,4)", what);
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        int x;
        if (len == 0 || len >= sizeof item) vb_die_input("%s: '%s' is not a list of positive integers (e.g. 1,2,4)", what, text);
        memcpy(item, p, len);
        item[len] = '\0';
        if (!parse_int(item, &x) || x < 1)
            vb_die_input("%s: '%s' in '%s' is not a positive integer", what, item, text);
        if (count == cap) v = xrealloc(v, (size_t)(cap *= 2) * sizeof *v);
        v[count++] = x;
        if (!comma) break;
        p = comma + 1;
    }
    *n = count;
    return v;
}

/* Keys the sweep itself sets on every run; a scenario or flag naming them
 * would silently lose, so it is refused. */
static bool is_reserved_key(const char *key) {
    return strcmp(key, "output_dir") == 0 || strcmp(key, "run_name") == 0 || strcmp(key, "run_num") == 0;
}

static bool is_layout_key(const char *key) {
    return strcmp(key, "tensor_parallel") == 0 || strcmp(key, "context_parallel") == 0 ||
           strcmp(key, "parallel_order") == 0;
}

/* Checks key and value with the config parser's own rules (a scratch
 * config: only this one setting, cross-key checks are the run's job).
 * vb_config_set exits 2 with "<origin>: ..." on an unknown key or bad value. */
static void check_setting(const char *key, const char *value, const char *origin) {
    static vb_config scratch;
    static bool ready = false;
    if (!ready) {
        vb_config_defaults(&scratch);
        ready = true;
    }
    if (is_reserved_key(key))
        vb_die_input("%s: %s is set by the sweep for every run (runs go to <output_dir>/<sweep_id>/runs/<run>)",
                     origin, key);
    vb_config_set(&scratch, key, value, origin);
}

/* ------------------------------------------------------------------------ */
/* scenario file                                                              */

typedef struct {
    const char *file;
    yaml_document_t *doc;
} yctx;

/* Text of a config value: a scalar, or a flat list joined with commas (how a
 * list such as img_size is written on the command line). */
static char *value_text(const yctx *y, yaml_node_t *n, const char *where) {
    if (n->type == YAML_SCALAR_NODE) return xstrdup(vb_yaml_scalar(n));
    if (n->type == YAML_SEQUENCE_NODE) {
        size_t len = 1;
        char *out = xstrdup("");
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
            yaml_node_t *e = yaml_document_get_node(y->doc, *it);
            const char *t = vb_yaml_scalar(e);
            if (!t) vb_die_input("%s: %s (line %d): list items must be scalars, found %s", y->file, where,
                                 vb_yaml_line(e), vb_yaml_kind(e));
            len += strlen(t) + 1;
            out = xrealloc(out, len);
            if (it != n->data.sequence.items.start) strcat(out, ",");
            strcat(out, t);
        }
        return out;
    }
    vb_die_input("%s: %s (line %d): expected a value, found %s", y->file, where, vb_yaml_line(n), vb_yaml_kind(n));
}

static const char *scalar_or_die(const yctx *y, yaml_node_t *n, const char *where) {
    const char *t = vb_yaml_scalar(n);
    if (!t) vb_die_input("%s: %s (line %d): expected a single value, found %s", y->file, where, vb_yaml_line(n),
                         vb_yaml_kind(n));
    return t;
}

static int int_or_die(const yctx *y, yaml_node_t *n, const char *where, int min) {
    const char *t = scalar_or_die(y, n, where);
    int v;
    if (!parse_int(t, &v) || v < min)
        vb_die_input("%s: %s (line %d): '%s' is not an integer >= %d", y->file, where, vb_yaml_line(n), t, min);
    return v;
}

/* A list of scalars (a lone scalar is a one-item list). */
static yaml_node_item_t *items_of(yaml_node_t *n, int *count) {
    if (n->type == YAML_SEQUENCE_NODE) {
        *count = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
        return n->data.sequence.items.start;
    }
    *count = 1;
    return NULL;
}

static yaml_node_t *item_node(const yctx *y, yaml_node_t *list, yaml_node_item_t *items, int i) {
    return items ? yaml_document_get_node(y->doc, items[i]) : list;
}

static int *int_list_or_die(const yctx *y, yaml_node_t *n, const char *where, int *count) {
    if (n->type == YAML_MAPPING_NODE)
        vb_die_input("%s: %s (line %d): expected a list of integers, found a mapping", y->file, where, vb_yaml_line(n));
    yaml_node_item_t *items = items_of(n, count);
    if (*count == 0) vb_die_input("%s: %s (line %d): empty list", y->file, where, vb_yaml_line(n));
    int *v = xrealloc(NULL, (size_t)*count * sizeof *v);
    for (int i = 0; i < *count; i++) v[i] = int_or_die(y, item_node(y, n, items, i), where, 1);
    return v;
}

/* key: value mapping of config settings (base, baseline). */
static void load_settings(const yctx *y, yaml_node_t *map, const char *section, vb_sweep_kvs *out) {
    char where[VB_PATH_MAX + 64];
    snprintf(where, sizeof where, "%s: %s", y->file, section);
    vb_yaml_pairs pairs;
    vb_yaml_mapping_pairs(y->doc, map, where, &pairs);
    for (int i = 0; i < pairs.n; i++) {
        char what[256], origin[VB_PATH_MAX + 128];
        snprintf(what, sizeof what, "%s.%s", section, pairs.pairs[i].key);
        char *text = value_text(y, pairs.pairs[i].value, what);
        snprintf(origin, sizeof origin, "%s: %s (line %d)", y->file, what, pairs.pairs[i].line);
        check_setting(pairs.pairs[i].key, text, origin);
        vb_sweep_kvs_set(out, pairs.pairs[i].key, text);
        free(text);
    }
    vb_yaml_pairs_free(&pairs);
}

/* key: [values] mapping (matrix, flags). */
static void load_axes(const yctx *y, yaml_node_t *map, const char *section, vb_sweep_axis **axes, int *naxes) {
    char where[VB_PATH_MAX + 64];
    snprintf(where, sizeof where, "%s: %s", y->file, section);
    vb_yaml_pairs pairs;
    vb_yaml_mapping_pairs(y->doc, map, where, &pairs);
    if (pairs.n == 0) vb_die_input("%s: %s (line %d): empty; list at least one key", y->file, section, vb_yaml_line(map));
    *axes = xrealloc(NULL, (size_t)pairs.n * sizeof **axes);
    *naxes = pairs.n;
    for (int i = 0; i < pairs.n; i++) {
        vb_sweep_axis *a = &(*axes)[i];
        yaml_node_t *list = pairs.pairs[i].value;
        char what[256];
        snprintf(what, sizeof what, "%s.%s", section, pairs.pairs[i].key);
        if (list->type == YAML_MAPPING_NODE)
            vb_die_input("%s: %s (line %d): expected a list of values, found a mapping", y->file, what, pairs.pairs[i].line);
        int count;
        yaml_node_item_t *items = items_of(list, &count);
        if (count == 0) vb_die_input("%s: %s (line %d): empty list of values", y->file, what, pairs.pairs[i].line);
        a->key = xstrdup(pairs.pairs[i].key);
        a->values = xrealloc(NULL, (size_t)count * sizeof *a->values);
        a->nvalues = count;
        for (int j = 0; j < count; j++) {
            yaml_node_t *e = item_node(y, list, items, j);
            a->values[j] = value_text(y, e, what);
            char origin[VB_PATH_MAX + 128];
            snprintf(origin, sizeof origin, "%s: %s (line %d)", y->file, what, vb_yaml_line(e));
            check_setting(a->key, a->values[j], origin);
            for (int k = 0; k < j; k++)
                if (strcmp(a->values[k], a->values[j]) == 0)
                    vb_die_input("%s: %s (line %d): value '%s' listed twice", y->file, what, vb_yaml_line(e), a->values[j]);
        }
    }
    vb_yaml_pairs_free(&pairs);
}

static void load_layouts(const yctx *y, yaml_node_t *map, vb_scenario *s) {
    char where[VB_PATH_MAX + 64];
    snprintf(where, sizeof where, "%s: layouts", y->file);
    vb_yaml_pairs pairs;
    vb_yaml_mapping_pairs(y->doc, map, where, &pairs);
    s->has_layouts = true;
    for (int i = 0; i < pairs.n; i++) {
        const char *k = pairs.pairs[i].key;
        yaml_node_t *v = pairs.pairs[i].value;
        char what[128];
        snprintf(what, sizeof what, "layouts.%s", k);
        if (strcmp(k, "orders") == 0) {
            if (v->type == YAML_MAPPING_NODE)
                vb_die_input("%s: %s (line %d): expected a list of orders, found a mapping", y->file, what, pairs.pairs[i].line);
            int count;
            yaml_node_item_t *items = items_of(v, &count);
            if (count == 0) vb_die_input("%s: %s (line %d): empty list", y->file, what, pairs.pairs[i].line);
            s->orders = xrealloc(NULL, (size_t)count * sizeof *s->orders);
            s->norders = count;
            for (int j = 0; j < count; j++) {
                yaml_node_t *e = item_node(y, v, items, j);
                const char *t = scalar_or_die(y, e, what);
                int ord[VB_NDIMS];
                char err[256];
                if (vb_layout_parse_order(t, ord, err, sizeof err) != 0 || strlen(t) != 8)
                    vb_die_input("%s: %s (line %d): '%s' is not an order of all three of tp, cp, dp (e.g. tp-cp-dp)",
                                 y->file, what, vb_yaml_line(e), t);
                s->orders[j] = xstrdup(t);
                for (int q = 0; q < j; q++)
                    if (strcmp(s->orders[q], t) == 0)
                        vb_die_input("%s: %s (line %d): '%s' listed twice", y->file, what, vb_yaml_line(e), t);
            }
        } else if (strcmp(k, "tensor_parallel") == 0) {
            s->layout_tp = int_list_or_die(y, v, what, &s->nlayout_tp);
        } else if (strcmp(k, "context_parallel") == 0) {
            s->layout_cp = int_list_or_die(y, v, what, &s->nlayout_cp);
        } else if (strcmp(k, "keep_equivalent") == 0) {
            const char *t = scalar_or_die(y, v, what);
            if (!parse_bool(t, &s->keep_equivalent))
                vb_die_input("%s: %s (line %d): '%s' is not true or false", y->file, what, pairs.pairs[i].line, t);
        } else {
            vb_die_input("%s: layouts (line %d): unknown key '%s' (known: orders, tensor_parallel, context_parallel, "
                         "keep_equivalent)", y->file, pairs.pairs[i].line, k);
        }
    }
    if (!s->orders) {
        s->orders = xrealloc(NULL, sizeof *s->orders);
        s->orders[0] = xstrdup("tp-cp-dp");
        s->norders = 1;
    }
    vb_yaml_pairs_free(&pairs);
}

static void load_sbatch(const yctx *y, yaml_node_t *map, vb_scenario *s) {
    char where[VB_PATH_MAX + 64];
    snprintf(where, sizeof where, "%s: sbatch", y->file);
    vb_yaml_pairs pairs;
    vb_yaml_mapping_pairs(y->doc, map, where, &pairs);
    static const char *owned[] = {"ntasks", "nodes", "ntasks-per-node", "job-name", "output", "error", "n", "N", "J", "o", "e"};
    for (int i = 0; i < pairs.n; i++) {
        const char *k = pairs.pairs[i].key;
        bool ok = isalpha((unsigned char)k[0]);
        for (const char *c = k; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_') ok = false;
        if (!ok)
            vb_die_input("%s: sbatch (line %d): '%s' is not an sbatch option name (e.g. time, account, qos)", y->file,
                         pairs.pairs[i].line, k);
        for (size_t j = 0; j < sizeof owned / sizeof owned[0]; j++)
            if (strcmp(k, owned[j]) == 0)
                vb_die_input("%s: sbatch.%s (line %d): set by the sweep from ranks / ranks_per_node and the run name",
                             y->file, k, pairs.pairs[i].line);
        char what[128];
        snprintf(what, sizeof what, "sbatch.%s", k);
        const char *t = scalar_or_die(y, pairs.pairs[i].value, what);
        if (strpbrk(t, "\n\r"))
            vb_die_input("%s: %s (line %d): value must be one line", y->file, what, pairs.pairs[i].line);
        vb_sweep_kvs_set(&s->sbatch, k, t);
    }
    vb_yaml_pairs_free(&pairs);
}

static bool kvs_has(const vb_sweep_kvs *l, const char *key) { return vb_sweep_kvs_get(l, key) != NULL; }

static const vb_sweep_axis *axis_find(const vb_sweep_axis *a, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(a[i].key, key) == 0) return &a[i];
    return NULL;
}

/* Cross-section checks: every key is decided in exactly one place. */
static void check_scenario(const vb_scenario *s) {
    const char *f = s->path;
    for (int i = 0; i < s->nmatrix; i++) {
        const char *k = s->matrix[i].key;
        if (kvs_has(&s->base, k))
            vb_die_input("%s: matrix.%s: also set in base; a key is either fixed (base) or swept (matrix)", f, k);
        if (s->has_layouts && is_layout_key(k))
            vb_die_input("%s: matrix.%s: set by layouts; remove it from matrix", f, k);
        if (s->has_flags && kvs_has(&s->baseline, k))
            vb_die_input("%s: matrix.%s: also in baseline; a key is either in matrix or in baseline/flags", f, k);
    }
    if (s->has_layouts) {
        for (int i = 0; i < s->base.n; i++)
            if (is_layout_key(s->base.v[i].key))
                vb_die_input("%s: base.%s: set by layouts; remove it from base", f, s->base.v[i].key);
        for (int i = 0; i < s->baseline.n; i++)
            if (is_layout_key(s->baseline.v[i].key))
                vb_die_input("%s: baseline.%s: set by layouts; remove it from baseline", f, s->baseline.v[i].key);
    }
    if (s->has_flags) {
        for (int i = 0; i < s->baseline.n; i++)
            if (kvs_has(&s->base, s->baseline.v[i].key))
                vb_die_input("%s: baseline.%s: also set in base; keep it in baseline only", f, s->baseline.v[i].key);
        for (int i = 0; i < s->nflags; i++) {
            const vb_sweep_axis *a = &s->flags[i];
            const char *b = vb_sweep_kvs_get(&s->baseline, a->key);
            if (!b)
                vb_die_input("%s: flags.%s: has no baseline value; add %s to baseline so the comparison is explicit", f,
                             a->key, a->key);
            for (int j = 0; j < a->nvalues; j++)
                if (strcmp(a->values[j], b) == 0)
                    vb_die_input("%s: flags.%s: value '%s' is the baseline's own value", f, a->key, b);
        }
    }
}

static void check_name(const char *file, const char *what, const char *v, size_t max) {
    bool ok = v[0] != '\0' && strlen(v) <= max && v[0] != '.' && v[0] != '-';
    for (const char *c = v; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-' && *c != '.') ok = false;
    if (!ok)
        vb_die_input("%s: %s: '%s' must be 1..%zu characters of A-Z a-z 0-9 _ . - (not starting with . or -)", file,
                     what, v, max);
}

void vb_scenario_load(vb_scenario *s, const char *path) {
    memset(s, 0, sizeof *s);
    if (strlen(path) >= sizeof s->path) vb_die_input("scenario file %.60s...: path too long", path);
    strcpy(s->path, path);
    snprintf(s->command, sizeof s->command, "run");
    s->repeats = 1;

    yaml_document_t doc;
    if (!vb_yaml_load(&doc, path, path)) vb_die_input("%s: empty file (expected a scenario mapping)", path);
    yctx y = {s->path, &doc};
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root->type != YAML_MAPPING_NODE)
        vb_die_input("%s: the file must be a mapping (name:, base:, ranks:, matrix: ...), found %s", path,
                     vb_yaml_kind(root));
    vb_yaml_pairs top;
    vb_yaml_mapping_pairs(&doc, root, path, &top);
    yaml_node_t *flags_node = NULL, *baseline_node = NULL;
    bool have_ranks = false, have_world = false;
    for (int i = 0; i < top.n; i++) {
        const char *k = top.pairs[i].key;
        yaml_node_t *v = top.pairs[i].value;
        int line = top.pairs[i].line;
        if (strcmp(k, "name") == 0) {
            const char *t = scalar_or_die(&y, v, "name");
            check_name(path, "name", t, 64);
            snprintf(s->name, sizeof s->name, "%s", t);
        } else if (strcmp(k, "description") == 0) {
            (void)scalar_or_die(&y, v, "description");
        } else if (strcmp(k, "command") == 0) {
            const char *t = scalar_or_die(&y, v, "command");
            bool ok = t[0] && strlen(t) < sizeof s->command;
            for (const char *c = t; *c; c++)
                if (!islower((unsigned char)*c) && *c != '_') ok = false;
            if (!ok) vb_die_input("%s: command (line %d): '%s' is not a vitbench subcommand (e.g. run, train)", path, line, t);
            if (strcmp(t, "sweep") == 0) vb_die_input("%s: command (line %d): a sweep cannot run sweeps", path, line);
            snprintf(s->command, sizeof s->command, "%s", t);
        } else if (strcmp(k, "base") == 0) {
            load_settings(&y, v, "base", &s->base);
        } else if (strcmp(k, "ranks") == 0) {
            s->ranks = int_list_or_die(&y, v, "ranks", &s->nranks);
            have_ranks = true;
        } else if (strcmp(k, "ranks_per_node") == 0) {
            s->ranks_per_node = int_or_die(&y, v, "ranks_per_node", 1);
        } else if (strcmp(k, "timeout_s") == 0) {
            s->timeout_s = int_or_die(&y, v, "timeout_s", 0);
        } else if (strcmp(k, "sbatch") == 0) {
            load_sbatch(&y, v, s);
        } else if (strcmp(k, "repeats") == 0) {
            s->repeats = int_or_die(&y, v, "repeats", 1);
        } else if (strcmp(k, "order") == 0) {
            const char *t = scalar_or_die(&y, v, "order");
            if (strcmp(t, "shuffled") != 0 && strcmp(t, "sequential") != 0)
                vb_die_input("%s: order (line %d): '%s' is not sequential or shuffled", path, line, t);
            s->shuffled = strcmp(t, "shuffled") == 0;
        } else if (strcmp(k, "order_seed") == 0) {
            s->order_seed = (unsigned long long)int_or_die(&y, v, "order_seed", 0);
        } else if (strcmp(k, "threads_per_rank") == 0) {
            s->threads_per_rank = int_or_die(&y, v, "threads_per_rank", 1);
        } else if (strcmp(k, "matrix") == 0) {
            load_axes(&y, v, "matrix", &s->matrix, &s->nmatrix);
        } else if (strcmp(k, "layouts") == 0) {
            load_layouts(&y, v, s);
        } else if (strcmp(k, "world_size") == 0) {
            s->world_size = int_or_die(&y, v, "world_size", 1);
            have_world = true;
        } else if (strcmp(k, "baseline") == 0) {
            baseline_node = v;
            load_settings(&y, v, "baseline", &s->baseline);
        } else if (strcmp(k, "flags") == 0) {
            flags_node = v;
            load_axes(&y, v, "flags", &s->flags, &s->nflags);
        } else {
            vb_die_input("%s: unknown key '%s' (line %d); known: name, description, command, base, ranks, "
                         "ranks_per_node, timeout_s, sbatch, repeats, order, order_seed, threads_per_rank, matrix, "
                         "layouts, world_size, baseline, flags",
                         path, k, line);
        }
    }
    vb_yaml_pairs_free(&top);
    yaml_document_delete(&doc);

    if (!s->name[0]) vb_die_input("%s: name: missing (it names the sweep directory)", path);
    if (s->has_layouts && have_ranks)
        vb_die_input("%s: ranks: a layouts scenario uses world_size (one world size, all its factorizations)", path);
    if (s->has_layouts && !have_world) vb_die_input("%s: world_size: missing (layouts needs the world size to factorize)", path);
    if (!s->has_layouts && have_world)
        vb_die_input("%s: world_size: only used with layouts; use ranks for a list of world sizes", path);
    if ((flags_node != NULL) != (baseline_node != NULL))
        vb_die_input("%s: %s: the flags form needs both baseline and flags", path, flags_node ? "baseline" : "flags");
    s->has_flags = flags_node != NULL;
    if (!s->ranks) {
        s->ranks = xrealloc(NULL, sizeof *s->ranks);
        s->ranks[0] = 1;
        s->nranks = 1;
    }
    check_scenario(s);
}

static void free_axes(vb_sweep_axis *a, int n) {
    for (int i = 0; i < n; i++) {
        free(a[i].key);
        for (int j = 0; j < a[i].nvalues; j++) free(a[i].values[j]);
        free(a[i].values);
    }
    free(a);
}

void vb_scenario_free(vb_scenario *s) {
    vb_sweep_kvs_free(&s->base);
    vb_sweep_kvs_free(&s->sbatch);
    vb_sweep_kvs_free(&s->baseline);
    free(s->ranks);
    for (int i = 0; i < s->norders; i++) free(s->orders[i]);
    free(s->orders);
    free(s->layout_tp);
    free(s->layout_cp);
    free_axes(s->matrix, s->nmatrix);
    free_axes(s->flags, s->nflags);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------------------ */
/* expansion                                                                  */

typedef struct {
    int tp, cp;
    const char *order;
} layout_choice;

static bool int_allowed(const int *allowed, int n, int v) {
    if (!allowed) return true;
    for (int i = 0; i < n; i++)
        if (allowed[i] == v) return true;
    return false;
}

/* Every (tp, cp, order) for world W: tp ascending, then cp, then the
 * scenario's order list; orders equivalent to an earlier one skipped. */
static layout_choice *layouts_for(const vb_scenario *s, int world, int *count) {
    layout_choice *out = NULL;
    int n = 0;
    for (int tp = 1; tp <= world; tp++) {
        if (world % tp || !int_allowed(s->layout_tp, s->nlayout_tp, tp)) continue;
        for (int cp = 1; cp <= world / tp; cp++) {
            if ((world / tp) % cp || !int_allowed(s->layout_cp, s->nlayout_cp, cp)) continue;
            int first_of_factorization = n;
            for (int o = 0; o < s->norders; o++) {
                vb_layout l;
                char err[256];
                if (vb_layout_init(&l, world, tp, cp, s->orders[o], err, sizeof err) != 0)
                    vb_die_internal("layout %d x %d of %d: %s", tp, cp, world, err);
                bool dup = false;
                for (int p = first_of_factorization; p < n && !s->keep_equivalent; p++) {
                    vb_layout m;
                    if (vb_layout_init(&m, world, out[p].tp, out[p].cp, out[p].order, err, sizeof err) == 0 &&
                        vb_layout_equivalent(&l, &m))
                        dup = true;
                }
                if (dup) continue;
                out = xrealloc(out, (size_t)(n + 1) * sizeof *out);
                out[n++] = (layout_choice){tp, cp, s->orders[o]};
            }
        }
    }
    *count = n;
    return out;
}

/* Characters kept in a run name; anything else (/, spaces, quotes) becomes _. */
static void append_name_part(char *name, size_t n, const char *key, const char *value) {
    size_t len = strlen(name);
    char part[256];
    if (value)
        snprintf(part, sizeof part, "_%s=%s", key, value);
    else
        snprintf(part, sizeof part, "_%s", key);
    for (char *c = part + 1; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("._=-+", *c)) *c = '_';
    /* keep room: run_name is at most 127 characters */
    size_t room = n - 1 - len;
    if (room > 0) strncat(name, part, room);
}

static const char *short_key(const char *key) {
    if (strcmp(key, "tensor_parallel") == 0) return "tp";
    if (strcmp(key, "context_parallel") == 0) return "cp";
    if (strcmp(key, "parallel_order") == 0) return "order";
    return key;
}

static void add_column(vb_sweep_plan *p, const char *name) {
    p->columns = xrealloc(p->columns, (size_t)(p->ncolumns + 1) * sizeof *p->columns);
    p->columns[p->ncolumns++] = xstrdup(name);
}

void vb_sweep_expand(const vb_scenario *s, const vb_sweep_overrides *o, vb_sweep_plan *plan) {
    memset(plan, 0, sizeof *plan);
    static const vb_sweep_overrides none = {0};
    if (!o) o = &none;

    /* an override must not fight the sweep over a key it varies */
    for (int i = 0; i < o->config.n; i++) {
        const char *k = o->config.v[i].key;
        const char *where = NULL;
        if (axis_find(s->matrix, s->nmatrix, k)) where = "matrix";
        if (s->has_flags && kvs_has(&s->baseline, k)) where = "baseline/flags";
        if (s->has_layouts && is_layout_key(k)) where = "layouts";
        if (where)
            vb_die_input("flag --%s: scenario %s (%s) sweeps %s in %s; drop the flag or edit the scenario", k, s->name,
                         s->path, k, where);
        if (is_reserved_key(k)) vb_die_input("flag --%s: set by the sweep for every run", k);
    }
    if (s->has_layouts && o->ranks)
        vb_die_input("flag --ranks: scenario %s (%s) factorizes one world size; use --world_size", s->name, s->path);
    if (!s->has_layouts && o->world_size)
        vb_die_input("flag --world_size: scenario %s (%s) has no layouts; use --ranks", s->name, s->path);

    const int *worlds = s->ranks;
    int nworlds = s->nranks;
    int layout_world = o->world_size ? o->world_size : s->world_size;
    if (s->has_layouts) {
        worlds = &layout_world;
        nworlds = 1;
    } else if (o->ranks) {
        worlds = o->ranks;
        nworlds = o->nranks;
    }

    if (s->has_layouts) {
        add_column(plan, "tensor_parallel");
        add_column(plan, "context_parallel");
        add_column(plan, "parallel_order");
    }
    for (int i = 0; i < s->nmatrix; i++) add_column(plan, s->matrix[i].key);
    if (s->has_flags) {
        add_column(plan, "variant");
        for (int i = 0; i < s->baseline.n; i++) add_column(plan, s->baseline.v[i].key);
    }

    int nvariants = 1;
    for (int i = 0; i < s->nflags; i++) nvariants += s->flags[i].nvalues;
    int npoints = 1;
    for (int i = 0; i < s->nmatrix; i++) npoints *= s->matrix[i].nvalues;

    int cap = 0;
    for (int w = 0; w < nworlds; w++) {
        int world = worlds[w];
        int nlayouts = 1;
        layout_choice *layouts = NULL;
        if (s->has_layouts) {
            layouts = layouts_for(s, world, &nlayouts);
            if (nlayouts == 0)
                vb_die_input("%s: layouts: world size %d has no tp x cp x dp factorization with the allowed "
                             "tensor_parallel / context_parallel values",
                             s->path, world);
        }
        for (int li = 0; li < nlayouts; li++) {
            for (int pt = 0; pt < npoints; pt++) {
                for (int var = 0; var < nvariants; var++) {
                    if (plan->nruns == cap) {
                        cap = cap ? 2 * cap : 16;
                        plan->runs = xrealloc(plan->runs, (size_t)cap * sizeof *plan->runs);
                    }
                    vb_sweep_run *r = &plan->runs[plan->nruns];
                    memset(r, 0, sizeof *r);
                    r->index = plan->nruns;
                    r->ranks = world;
                    snprintf(r->name, sizeof r->name, "%03d_ranks=%d", r->index, world);
                    /* later wins: base < command line < layout < matrix < baseline/flag */
                    kvs_copy(&r->args, &s->base);
                    kvs_copy(&r->args, &o->config);
                    if (layouts) {
                        char v[16];
                        snprintf(v, sizeof v, "%d", layouts[li].tp);
                        vb_sweep_kvs_set(&r->params, "tensor_parallel", v);
                        snprintf(v, sizeof v, "%d", layouts[li].cp);
                        vb_sweep_kvs_set(&r->params, "context_parallel", v);
                        vb_sweep_kvs_set(&r->params, "parallel_order", layouts[li].order);
                    }
                    /* matrix point pt in mixed radix, the last key fastest */
                    int rest = pt;
                    const char **mv = xrealloc(NULL, (size_t)(s->nmatrix + 1) * sizeof *mv);
                    for (int m = s->nmatrix - 1; m >= 0; m--) {
                        mv[m] = s->matrix[m].values[rest % s->matrix[m].nvalues];
                        rest /= s->matrix[m].nvalues;
                    }
                    for (int m = 0; m < s->nmatrix; m++) vb_sweep_kvs_set(&r->params, s->matrix[m].key, mv[m]);
                    free(mv);
                    const char *flag_key = NULL, *flag_value = NULL;
                    if (s->has_flags) {
                        int k = var - 1;
                        for (int f = 0; f < s->nflags && k >= 0; f++) {
                            if (k < s->flags[f].nvalues) {
                                flag_key = s->flags[f].key;
                                flag_value = s->flags[f].values[k];
                                break;
                            }
                            k -= s->flags[f].nvalues;
                        }
                        char variant[256];
                        if (flag_key)
                            snprintf(variant, sizeof variant, "%s=%s", flag_key, flag_value);
                        else
                            snprintf(variant, sizeof variant, "baseline");
                        vb_sweep_kvs_set(&r->params, "variant", variant);
                        for (int b = 0; b < s->baseline.n; b++) {
                            const char *k2 = s->baseline.v[b].key;
                            bool flagged = flag_key && strcmp(flag_key, k2) == 0;
                            vb_sweep_kvs_set(&r->params, k2, flagged ? flag_value : s->baseline.v[b].value);
                        }
                    }
                    for (int c = 0; c < r->params.n; c++) {
                        const char *k2 = r->params.v[c].key;
                        if (strcmp(k2, "variant") == 0) {
                            append_name_part(r->name, sizeof r->name, flag_key ? flag_key : "baseline", flag_value);
                            continue;
                        }
                        vb_sweep_kvs_set(&r->args, k2, r->params.v[c].value);
                        /* flags runs are named by their variant alone */
                        if (!s->has_flags || !kvs_has(&s->baseline, k2))
                            append_name_part(r->name, sizeof r->name, short_key(k2), r->params.v[c].value);
                    }
                    plan->nruns++;
                }
            }
        }
        free(layouts);
    }
}

void vb_sweep_plan_free(vb_sweep_plan *p) {
    for (int i = 0; i < p->ncolumns; i++) free(p->columns[i]);
    free(p->columns);
    for (int i = 0; i < p->nruns; i++) {
        vb_sweep_kvs_free(&p->runs[i].params);
        vb_sweep_kvs_free(&p->runs[i].args);
    }
    free(p->runs);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------------ */
/* the command                                                                */

typedef enum { LAUNCH_MPIRUN, LAUNCH_SRUN, LAUNCH_SBATCH } launcher_kind;
static const char *const launcher_names[] = {"mpirun", "srun", "sbatch"};

typedef struct {
    const char *file;
    char out_dir[VB_PATH_MAX];
    launcher_kind launcher;
    bool dry_run;
    int ranks_per_node; /* -1 = the scenario's */
    int timeout_s;      /* -1 = the scenario's */
    int repeats;        /* -1 = the scenario's */
    int shuffled;       /* -1 = the scenario's, else 0 / 1 */
    long long order_seed; /* -1 = the scenario's */
    int threads_per_rank; /* -1 = the scenario's */
    bool no_report;
    const char *resume;   /* --resume SWEEP_DIR */
    bool retry_failed;
    strvec launcher_args;
    vb_sweep_overrides ov;
} sweep_cli;

static void set_output_dir(const char *flag, const char *v, void *ptr) {
    char *out = ptr; /* sweep_cli.out_dir */
    if (!v[0]) vb_die_input("sweep: %s expects a non-empty value", flag);
    if (strlen(v) >= VB_PATH_MAX - 300) vb_die_input("sweep: %s: '%.60s...' is too long", flag, v);
    snprintf(out, VB_PATH_MAX, "%s", v);
}

static void set_ranks(const char *flag, const char *v, void *ptr) {
    vb_sweep_overrides *ov = ptr;
    char what[64];
    snprintf(what, sizeof what, "flag %s", flag);
    free(ov->ranks);
    ov->ranks = vb_sweep_parse_int_list(v, what, &ov->nranks);
}

static void add_launcher_args(const char *flag, const char *v, void *ptr) {
    (void)flag;
    strvec *args = ptr;
    char *copy = xstrdup(v);
    for (char *tok = strtok(copy, " \t"); tok; tok = strtok(NULL, " \t")) sv_push(args, tok);
    free(copy);
}

/* The scenario FILE, or a config override for every run (--key VALUE,
 * --key=VALUE, or a bare --key meaning true), checked by the config
 * parser's rules. */
static void file_or_override(void *ctx, const char *arg, const char *next) {
    sweep_cli *c = ctx;
    if (strncmp(arg, "--", 2) != 0) {
        if (c->file) vb_die_input("unexpected argument '%s' (one scenario FILE, already given: %s)", arg, c->file);
        c->file = arg;
        return;
    }
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    char key[96];
    if (len >= sizeof key) vb_die_input("flag '%.100s': not an option", arg);
    memcpy(key, name, len);
    key[len] = '\0';
    const char *value = eq ? eq + 1 : next ? next : "true"; /* a bare boolean flag such as --noddp */
    char origin[160];
    snprintf(origin, sizeof origin, "flag --%s", key);
    check_setting(key, value, origin);
    vb_sweep_kvs_set(&c->ov.config, key, value);
}

static void parse_cli(int argc, char **argv, sweep_cli *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->out_dir, sizeof c->out_dir, "results");
    c->ranks_per_node = -1;
    c->timeout_s = -1;
    c->repeats = -1;
    c->shuffled = -1;
    c->order_seed = -1;
    c->threads_per_rank = -1;
    const char *slurm = getenv("SLURM_JOB_ID");
    int launcher = (slurm && *slurm) ? LAUNCH_SRUN : LAUNCH_MPIRUN;
    int order_seed = -1; /* as the scenario's order_seed: an int */
    static const char *const orders[] = {"sequential", "shuffled", NULL}; /* index = shuffled */
    static const char *const launchers[] = {"mpirun", "srun", "sbatch", NULL};
    const vb_cli_opt opts[] = {
        {.name = "output_dir", .kind = VB_CLI_FUNC, .ptr = c->out_dir, .fn = set_output_dir, .arg = "DIR",
         .help = "where the sweep directory goes (default results)"},
        {.name = "launcher", .kind = VB_CLI_CHOICE, .ptr = &launcher, .choices = launchers,
         .arg = "mpirun|srun|sbatch", .help = "how runs start (default srun under Slurm, else mpirun)"},
        {.name = "dry-run", .kind = VB_CLI_BOOL, .ptr = &c->dry_run,
         .help = "print every run's command (sbatch: write the job scripts) and run nothing"},
        {.name = "ranks", .kind = VB_CLI_FUNC, .ptr = &c->ov, .fn = set_ranks, .arg = "1,2,4",
         .help = "world sizes instead of the scenario's ranks"},
        {.name = "world_size", .kind = VB_CLI_INT, .ptr = &c->ov.world_size, .ilo = 1, .ihi = INT_MAX, .arg = "N",
         .help = "world size of a layouts scenario"},
        {.name = "ranks_per_node", .kind = VB_CLI_INT, .ptr = &c->ranks_per_node, .ilo = 1, .ihi = INT_MAX,
         .arg = "N", .help = "srun / sbatch: --nodes=ceil(R/N) --ntasks-per-node=min(R,N)"},
        {.name = "launcher_args", .kind = VB_CLI_FUNC, .ptr = &c->launcher_args, .fn = add_launcher_args,
         .arg = "\"ARGS\"", .help = "split on spaces, right after the launcher's rank-count options"},
        {.name = "timeout_s", .kind = VB_CLI_INT, .ptr = &c->timeout_s, .ilo = 0, .ihi = INT_MAX, .arg = "S",
         .help = "stop a run after S seconds and record it failed (0 = no limit)"},
        {.name = "repeats", .kind = VB_CLI_INT, .ptr = &c->repeats, .ilo = 1, .ihi = INT_MAX, .arg = "N",
         .help = "every point N times, in rounds"},
        {.name = "order", .kind = VB_CLI_CHOICE, .ptr = &c->shuffled, .choices = orders,
         .arg = "sequential|shuffled", .help = "each round in plan order or in a seeded random order"},
        {.name = "order_seed", .kind = VB_CLI_INT, .ptr = &order_seed, .ilo = 0, .ihi = INT_MAX, .arg = "S",
         .help = "seed of the shuffled order"},
        {.name = "threads_per_rank", .kind = VB_CLI_INT, .ptr = &c->threads_per_rank, .ilo = 1, .ihi = INT_MAX,
         .arg = "T", .help = "OpenMP threads of every rank (default: a node's cores / its ranks)"},
        {.name = "no_report", .kind = VB_CLI_BOOL, .ptr = &c->no_report, .help = "no report at the end"},
        {.name = "resume", .kind = VB_CLI_STRING, .ptr = &c->resume, .arg = "SWEEP_DIR",
         .help = "continue a stopped sweep in its own directory"},
        {.name = "retry_failed", .kind = VB_CLI_BOOL, .ptr = &c->retry_failed,
         .help = "with --resume: run the failed runs again"},
    };
    const vb_cli cli = {
        .cmd = "sweep",
        .usage = "vitbench sweep FILE [options] [--<config key> VALUE ...]\n"
                 "       vitbench sweep --resume SWEEP_DIR [--retry_failed] [--timeout_s S] [--no_report]",
        .about = "Expands the scenario FILE (scenarios/*.yaml) into runs, launches each with its ranks and\n"
                 "collects them under DIR/<name>_<timestamp>/ with index.csv (see bench/sweep.h). --resume\n"
                 "continues a sweep that was stopped: completed runs are kept, missing or unfinished ones run\n"
                 "(failed ones too with --retry_failed), with the sweep's own scenario copy and options.",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
        .other = file_or_override,
        .ctx = c,
        .other_help = "Any other --<config key> VALUE (or --key=VALUE) is a config override for every run.",
    };
    vb_cli_parse(&cli, argc, argv);
    c->launcher = (launcher_kind)launcher;
    c->order_seed = order_seed;
    if (c->resume && c->file)
        vb_die_input("sweep: give either a scenario FILE or --resume SWEEP_DIR, not both (%s, --resume %s)", c->file,
                     c->resume);
    if (!c->file && !c->resume)
        vb_die_input("sweep: missing the scenario FILE, e.g. scenarios/weak_scaling.yaml (see vitbench sweep --help)");
}

/* FILE as given, else under the source tree; a bare name means scenarios/<name>.yaml. */
static void resolve_scenario(const char *file, char *out, size_t n) {
    char cand[4][2 * VB_PATH_MAX];
    int k = 0;
    if (strlen(file) >= VB_PATH_MAX - 32) vb_die_input("scenario file %.60s...: path too long", file);
    vb_snprintf(cand[k++], sizeof cand[0], "%s", file);
    bool bare = !strchr(file, '/') && !strstr(file, ".y");
    if (bare) vb_snprintf(cand[k++], sizeof cand[0], "scenarios/%s.yaml", file);
    if (file[0] != '/') {
        const char *src = getenv("VB_SOURCE_DIR");
        if (!src || !*src) src = VB_SOURCE_DIR;
        if (strlen(src) < VB_PATH_MAX) {
            vb_snprintf(cand[k++], sizeof cand[0], "%s/%s", src, file);
            if (bare) vb_snprintf(cand[k++], sizeof cand[0], "%s/scenarios/%s.yaml", src, file);
        }
    }
    for (int i = 0; i < k; i++) {
        if (strlen(cand[i]) < n && vb_file_exists(cand[i])) {
            vb_snprintf(out, n, "%s", cand[i]);
            return;
        }
    }
    vb_snprintf(out, n, "%s", file); /* vb_yaml_load names it and says why it cannot be opened */
}

/* Is `prog` runnable from PATH? */
static bool in_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) return false;
    char *copy = xstrdup(path);
    bool found = false;
    for (char *d = strtok(copy, ":"); d && !found; d = strtok(NULL, ":")) {
        char full[VB_PATH_MAX];
        snprintf(full, sizeof full, "%s/%s", *d ? d : ".", prog);
        found = access(full, X_OK) == 0;
    }
    free(copy);
    return found;
}

/* Shell quoting for printed commands and sbatch scripts (never executed by us). */
static void fput_quoted(FILE *f, const char *s) {
    bool plain = *s != '\0';
    for (const char *c = s; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("_-./=:,+@%", *c)) plain = false;
    if (plain) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (const char *c = s; *c; c++) {
        if (*c == '\'')
            fputs("'\\''", f);
        else
            fputc(*c, f);
    }
    fputc('\'', f);
}

static void fput_argv(FILE *f, char *const *argv) {
    for (int i = 0; argv[i]; i++) {
        if (i) fputc(' ', f);
        fput_quoted(f, argv[i]);
    }
}

/* One launch: a point of the plan in one repeat. */
typedef struct {
    const vb_sweep_run *run;
    int repeat;
    int threads;
    char name[160];       /* run_name: the point's name, + _rep=R when repeats > 1 */
    const char *status;   /* NULL until it ran */
    int exit_code;        /* INT_MIN = none */
    double headline[6];   /* FULL, SYNTHETIC, IO mean and std samples/s; NAN = none */
} sweep_item;

static const char *const k_headline_cols[6] = {"full_samples_per_s", "full_std", "synthetic_samples_per_s",
                                               "synthetic_std", "io_samples_per_s", "io_std"};

typedef struct {
    const vb_sweep_plan *plan;
    const sweep_item *items;
    int n;
} index_ctx;

static void write_index(FILE *f, void *vctx) {
    const index_ctx *x = vctx;
    fputs("run_index,run_dir,status,exit_code,repeat,ranks,threads_per_rank", f);
    for (int c = 0; c < x->plan->ncolumns; c++) {
        fputc(',', f);
        vb_csv_field(f, x->plan->columns[c]);
    }
    for (int h = 0; h < 6; h++) fprintf(f, ",%s", k_headline_cols[h]);
    fputc('\n', f);
    for (int i = 0; i < x->n; i++) {
        const sweep_item *it = &x->items[i];
        const vb_sweep_run *r = it->run;
        if (!it->status) continue; /* not run yet */
        fprintf(f, "%d,", i);
        char dir[300];
        snprintf(dir, sizeof dir, "runs/%s", it->name);
        vb_csv_field(f, dir);
        fprintf(f, ",%s,", it->status ? it->status : "");
        if (it->exit_code != INT_MIN) fprintf(f, "%d", it->exit_code);
        fprintf(f, ",%d,%d,%d", it->repeat, r->ranks, it->threads);
        for (int c = 0; c < x->plan->ncolumns; c++) {
            fputc(',', f);
            vb_csv_field(f, vb_sweep_kvs_get(&r->params, x->plan->columns[c]));
        }
        for (int h = 0; h < 6; h++) {
            fputc(',', f);
            if (!isnan(it->headline[h])) fprintf(f, "%.9g", it->headline[h]);
        }
        fputc('\n', f);
    }
}

/* A finished run's FULL / SYNTHETIC / IO mean and std from its summary.csv. */
static void read_headline(const char *runs_dir, sweep_item *it) {
    for (int h = 0; h < 6; h++) it->headline[h] = NAN;
    char path[VB_PATH_MAX];
    vb_snprintf(path, sizeof path, "%s/%s/summary.csv", runs_dir, it->name);
    vb_csv t;
    char err[512];
    if (vb_csv_read(path, &t, err, sizeof err) != 0) return;
    static const char *types[3] = {"FULL", "SYNTHETIC", "IO"};
    int ct = vb_csv_col(&t, "trial_type"), cm = vb_csv_col(&t, "mean_samples_per_s"),
        cs = vb_csv_col(&t, "std_samples_per_s");
    for (int row = 0; row < t.nrows; row++)
        for (int k = 0; k < 3; k++)
            if (strcmp(vb_csv_get(&t, row, ct), types[k]) == 0) {
                vb_csv_num(&t, row, cm, &it->headline[2 * k]);
                vb_csv_num(&t, row, cs, &it->headline[2 * k + 1]);
            }
    vb_csv_free(&t);
}

/* The sweep's table at its end: one line per run, read at a glance. */
static void print_table(const vb_sweep_plan *plan, const sweep_item *items, int n) {
    /* rows in index.csv's order: every run with a status */
    printf("\n%-4s %-44s %-9s %24s %24s %14s\n", "#", "run", "status", "FULL samples/s", "SYNTHETIC samples/s",
           "IO samples/s");
    for (int i = 0; i < n; i++) {
        const sweep_item *it = &items[i];
        if (!it->status) continue;
        char cell[3][40];
        for (int k = 0; k < 3; k++) {
            if (isnan(it->headline[2 * k]))
                snprintf(cell[k], sizeof cell[k], "-");
            else if (k == 2)
                snprintf(cell[k], sizeof cell[k], "%.1f", it->headline[2 * k]);
            else
                snprintf(cell[k], sizeof cell[k], "%.2f +/- %.2f", it->headline[2 * k], it->headline[2 * k + 1]);
        }
        printf("%-4d %-44.44s %-9s %24s %24s %14s\n", i, it->name, it->status ? it->status : "-", cell[0], cell[1],
               cell[2]);
    }
    (void)plan;
    fflush(stdout);
}

/* DIR/<name>_<stamp>[-N]: mkdir is the atomic claim, so two sweeps started
 * in the same second never share a directory. */
static void create_sweep_dir(const char *out_dir, const char *name, char *dir, size_t n, char *id, size_t idn) {
    if (vb_mkdir_p(out_dir) != 0) vb_die_input("flag --output_dir %s: cannot create directory (%s)", out_dir, strerror(errno));
    char stamp[32];
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    for (int suffix = 0; suffix < 10000; suffix++) {
        if (suffix == 0)
            vb_snprintf(id, idn, "%s_%s", name, stamp);
        else
            vb_snprintf(id, idn, "%s_%s-%d", name, stamp, suffix);
        vb_snprintf(dir, n, "%s/%s", out_dir, id);
        if (mkdir(dir, 0775) == 0) return;
        if (errno != EEXIST)
            vb_die_input("flag --output_dir %s: cannot create %s (%s)", out_dir, dir, strerror(errno));
    }
    vb_die_input("flag --output_dir %s: too many sweeps named %s_%s", out_dir, name, stamp);
}

static void make_subdir(const char *dir, const char *sub) {
    char p[VB_PATH_MAX];
    vb_snprintf(p, sizeof p, "%s/%s", dir, sub);
    if (mkdir(p, 0775) != 0 && errno != EEXIST) vb_die_input("cannot create %s (%s)", p, strerror(errno));
}

static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    FILE *out = in ? fopen(to, "wb") : NULL;
    if (in && out) {
        char buf[8192];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, out);
    }
    if (!in || !out || ferror(out)) vb_warn("could not copy %s to %s", from, to);
    if (in) fclose(in);
    if (out) fclose(out);
}

typedef struct {
    cJSON *json;
} json_ctx;

static void write_json(FILE *f, void *vctx) {
    char *s = cJSON_Print(((json_ctx *)vctx)->json);
    if (s) fputs(s, f);
    fputc('\n', f);
    free(s);
}

static bool kvs_has_key(const vb_sweep_kvs *l, const char *key) { return vb_sweep_kvs_get(l, key) != NULL; }

/* What the sweep varies, for `vitbench report`: scaling kinds by the batch
 * that stays fixed while ranks vary (local: weak; global: strong). */
static const char *sweep_kind(const vb_scenario *s, const vb_sweep_plan *p, const sweep_cli *c) {
    if (s->has_layouts) return "layouts";
    if (s->has_flags) {
        bool ddp_only = true;
        for (int i = 0; i < s->nflags; i++)
            if (strcmp(s->flags[i].key, "bucket_cap_mb") != 0 && strcmp(s->flags[i].key, "noddp") != 0)
                ddp_only = false;
        return ddp_only ? "ddp_buckets" : "flags";
    }
    bool ranks_vary = false;
    for (int i = 1; i < p->nruns; i++)
        if (p->runs[i].ranks != p->runs[0].ranks) ranks_vary = true;
    if (ranks_vary) {
        bool local = kvs_has_key(&s->base, "local_batch_size") || kvs_has_key(&c->ov.config, "local_batch_size");
        return local ? "weak_scaling" : "strong_scaling";
    }
    return s->nmatrix > 0 ? "matrix" : "single";
}

static void write_sweep_json(const char *dir, const char *id, const vb_scenario *s, const sweep_cli *c,
                             const vb_sweep_plan *plan, const char *exe, int argc, char **argv, int nruns) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "sweep_id", id);
    cJSON_AddStringToObject(j, "scenario", s->name);
    cJSON_AddStringToObject(j, "scenario_file", s->path);
    cJSON_AddStringToObject(j, "command", s->command);
    cJSON *cl = cJSON_AddArrayToObject(j, "command_line");
    cJSON_AddItemToArray(cl, cJSON_CreateString("vitbench"));
    for (int i = 0; i < argc; i++) cJSON_AddItemToArray(cl, cJSON_CreateString(argv[i]));
    cJSON_AddStringToObject(j, "launcher", launcher_names[c->launcher]);
    cJSON_AddStringToObject(j, "binary", exe);
    cJSON_AddBoolToObject(j, "dry_run", c->dry_run);
    cJSON_AddNumberToObject(j, "nruns", nruns);
    cJSON_AddNumberToObject(j, "npoints", plan->nruns);
    cJSON_AddNumberToObject(j, "repeats", s->repeats);
    cJSON_AddStringToObject(j, "order", s->shuffled ? "shuffled" : "sequential");
    cJSON_AddNumberToObject(j, "order_seed", (double)s->order_seed);
    cJSON_AddStringToObject(j, "kind", sweep_kind(s, plan, c));
    cJSON *cols = cJSON_AddArrayToObject(j, "swept_columns");
    cJSON_AddItemToArray(cols, cJSON_CreateString("ranks"));
    for (int i = 0; i < plan->ncolumns; i++) cJSON_AddItemToArray(cols, cJSON_CreateString(plan->columns[i]));
    char t[32], cwd[VB_PATH_MAX];
    vb_iso_time(t, sizeof t);
    cJSON_AddStringToObject(j, "start_time", t);
    cJSON_AddStringToObject(j, "cwd", getcwd(cwd, sizeof cwd) ? cwd : "");
    cJSON_AddStringToObject(j, "git_commit", VB_GIT_COMMIT);
    char path[VB_PATH_MAX];
    vb_snprintf(path, sizeof path, "%s/sweep.json", dir);
    json_ctx x = {j};
    if (vb_atomic_write(path, write_json, &x) != 0) vb_warn("could not write %s", path);
    cJSON_Delete(j);
}

/* The run's vitbench arguments: <exe> <command> --key value ... --output_dir D --run_name N */
static void push_vitbench_args(strvec *a, const char *exe, const vb_scenario *s, const vb_sweep_run *r,
                               const char *run_name, const char *runs_dir) {
    sv_push(a, exe);
    sv_push(a, s->command);
    for (int i = 0; i < r->args.n; i++) {
        const char *k = r->args.v[i].key, *v = r->args.v[i].value;
        /* --key=value when the value could be mistaken for a flag or vanish */
        if (!v[0] || v[0] == '-') {
            sv_pushf(a, "--%s=%s", k, v);
        } else {
            sv_pushf(a, "--%s", k);
            sv_push(a, v);
        }
    }
    sv_push(a, "--output_dir");
    sv_push(a, runs_dir);
    sv_push(a, "--run_name");
    sv_push(a, run_name);
}

static int nodes_for(int ranks, int per_node) { return (ranks + per_node - 1) / per_node; }

/* Does the user's --launcher_args already decide where ranks run? */
static bool user_binds(const strvec *extra) {
    for (int i = 0; i < extra->n; i++)
        if (strncmp(extra->v[i], "--bind-to", 9) == 0 || strncmp(extra->v[i], "--map-by", 8) == 0 ||
            strncmp(extra->v[i], "--cpu-set", 9) == 0 || strncmp(extra->v[i], "--rank-by", 9) == 0)
            return true;
    return false;
}

static void build_launch(strvec *a, launcher_kind k, int ranks, int per_node, const strvec *extra) {
    if (k == LAUNCH_MPIRUN) {
        sv_push(a, "mpirun");
        sv_push(a, "-np");
        sv_pushf(a, "%d", ranks);
        sv_push(a, "--oversubscribe");
        /* every rank runs OMP_NUM_THREADS threads (threads_per_rank); mpirun's
         * default core binding would squeeze them onto one core each */
        sv_push(a, "-x");
        sv_push(a, "OMP_NUM_THREADS");
        if (!user_binds(extra)) {
            sv_push(a, "--bind-to");
            sv_push(a, "none");
        }
    } else {
        sv_push(a, "srun");
        sv_pushf(a, "--ntasks=%d", ranks);
        if (per_node > 0) {
            sv_pushf(a, "--nodes=%d", nodes_for(ranks, per_node));
            sv_pushf(a, "--ntasks-per-node=%d", ranks < per_node ? ranks : per_node);
        }
    }
    for (int i = 0; i < extra->n; i++) sv_push(a, extra->v[i]);
}

/* A misspelt --config or yaml_config would fail every run the same way, so
 * each distinct (yaml_config, config) the runs use is loaded once up front;
 * vb_config_load_yaml exits 2 naming the file and the config. */
static void check_named_configs(const vb_sweep_plan *plan) {
    vb_config defaults;
    vb_config_defaults(&defaults);
    char (*seen)[2][VB_PATH_MAX] = NULL;
    int nseen = 0;
    for (int i = 0; i < plan->nruns; i++) {
        const char *yaml = vb_sweep_kvs_get(&plan->runs[i].args, "yaml_config");
        const char *name = vb_sweep_kvs_get(&plan->runs[i].args, "config");
        if (!yaml) yaml = defaults.yaml_config;
        if (!name) name = defaults.config;
        bool done = false;
        for (int j = 0; j < nseen && !done; j++) done = strcmp(seen[j][0], yaml) == 0 && strcmp(seen[j][1], name) == 0;
        if (done) continue;
        seen = xrealloc(seen, (size_t)(nseen + 1) * sizeof *seen);
        vb_snprintf(seen[nseen][0], VB_PATH_MAX, "%s", yaml);
        vb_snprintf(seen[nseen][1], VB_PATH_MAX, "%s", name);
        nseen++;
        vb_config scratch = defaults;
        vb_config_load_yaml(&scratch, yaml, name);
    }
    free(seen);
}

static volatile sig_atomic_t g_stop_signal = 0;
static void on_stop_signal(int sig) { g_stop_signal = sig; }

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* fork/exec argv with stdout+stderr appended to log_path, in its own process
 * group (so a timeout or Ctrl-C can stop mpirun and every rank it started).
 * Returns the exit status (128+signal when killed); *why says if the sweep
 * cut it short ("" otherwise). */
static int launch(char *const *argv, const char *log_path, int timeout_s, int threads, const char **why) {
    *why = "";
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0664);
    if (logfd < 0) vb_die_input("cannot open log %s (%s)", log_path, strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) vb_die_internal("fork failed: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        /* a sweep killed with SIGKILL cannot stop its run: the run stops
         * itself (mpirun passes SIGTERM on to its ranks) instead of finishing
         * unrecorded; a resumed sweep runs it again */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(128 + SIGTERM);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        if (threads > 0) {
            char t[16];
            snprintf(t, sizeof t, "%d", threads);
            setenv("OMP_NUM_THREADS", t, 1);
        }
        execvp(argv[0], argv);
        dprintf(2, "vitbench sweep: cannot execute %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here: whichever of parent and child runs first */
    close(logfd);
    double t0 = vb_now(), term_at = -1;
    int st = 0, sent = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) vb_die_internal("waitpid failed: %s", strerror(errno));
        double now = vb_now();
        if (term_at < 0 && (g_stop_signal || (timeout_s > 0 && now - t0 > timeout_s))) {
            *why = g_stop_signal ? "interrupted" : "timeout";
            kill(-pid, SIGTERM);
            sent = SIGTERM;
            term_at = now;
        }
        if (term_at >= 0 && now - term_at > 10 && sent != SIGKILL) { /* ignored SIGTERM */
            kill(-pid, SIGKILL);
            sent = SIGKILL;
        }
        sleep_ms(50);
    }
    /* a run the sweep stopped is recorded as killed by that signal, whatever
     * status mpirun chose to exit with after passing it on */
    if (sent) return 128 + sent;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 1;
}

static void append_line(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append_line(const char *path, const char *fmt, ...) {
    FILE *f = fopen(path, "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* jobs/<run>.sbatch: allocation size, log, the scenario's extra options, then srun. */
static void write_sbatch_script(const char *path, const char *sweep_id, const vb_scenario *s, const vb_sweep_run *r,
                                const char *run_name, int run_index, int nruns, int per_node, int threads,
                                const char *log_abs, char *const *srun_argv) {
    FILE *f = fopen(path, "w");
    if (!f) vb_die_input("cannot write %s (%s)", path, strerror(errno));
    fprintf(f, "#!/bin/bash\n");
    fprintf(f, "#SBATCH --job-name=%s_%03d\n", s->name, run_index);
    fprintf(f, "#SBATCH --ntasks=%d\n", r->ranks);
    if (per_node > 0) {
        fprintf(f, "#SBATCH --nodes=%d\n", nodes_for(r->ranks, per_node));
        fprintf(f, "#SBATCH --ntasks-per-node=%d\n", r->ranks < per_node ? r->ranks : per_node);
    }
    /* Slurm expands %j etc. in --output: a literal % must be doubled */
    fprintf(f, "#SBATCH --output=");
    for (const char *c = log_abs; *c; c++) {
        if (*c == '%') fputc('%', f);
        fputc(*c, f);
    }
    fputc('\n', f);
    for (int i = 0; i < s->sbatch.n; i++) fprintf(f, "#SBATCH --%s=%s\n", s->sbatch.v[i].key, s->sbatch.v[i].value);
    fprintf(f, "# vitbench sweep %s (scenario %s): run %d of %d, %s\n", sweep_id, s->path, run_index + 1, nruns, run_name);
    char cwd[VB_PATH_MAX];
    if (getcwd(cwd, sizeof cwd)) {
        fprintf(f, "cd ");
        fput_quoted(f, cwd);
        fprintf(f, " || exit 1\n");
    }
    fprintf(f, "export OMP_NUM_THREADS=%d\n", threads);
    fprintf(f, "exec ");
    fput_argv(f, srun_argv);
    fputc('\n', f);
    if (fclose(f) != 0) vb_die_input("cannot write %s", path);
    chmod(path, 0775);
}


/* OpenMP threads of a run's ranks: the scenario's or flag's, else the cores
 * of a node split over the ranks on it (at least 1), so every point of a
 * sweep gets the same share of a core per thread. Under Slurm the node's
 * size is the allocation's (SLURM_CPUS_ON_NODE), not the login node's. */
static int threads_for(const vb_scenario *s, launcher_kind launcher, int ranks, int per_node) {
    if (s->threads_per_rank > 0) return s->threads_per_rank;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *slurm = getenv("SLURM_CPUS_ON_NODE");
    if (launcher != LAUNCH_MPIRUN && slurm && atoi(slurm) > 0) cores = atoi(slurm);
    int on_node = per_node > 0 && per_node < ranks ? per_node : ranks;
    long t = cores > 0 ? cores / on_node : 1;
    return t >= 1 ? (int)t : 1;
}

/* Every (point, repeat) in the order they run: rounds of every point, each
 * round in plan order or, shuffled, in a permutation seeded by (order_seed,
 * round), so slow drift of a shared machine spreads over every point alike. */
static sweep_item *plan_items(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind launcher, int per_node,
                              int *count) {
    int n = plan->nruns * s->repeats;
    sweep_item *items = xrealloc(NULL, (size_t)n * sizeof *items);
    int *perm = xrealloc(NULL, (size_t)plan->nruns * sizeof *perm);
    int k = 0;
    for (int rep = 0; rep < s->repeats; rep++) {
        for (int i = 0; i < plan->nruns; i++) perm[i] = i;
        if (s->shuffled) {
            vb_rng g;
            vb_rng_seed(&g, s->order_seed * 0x9E3779B97F4A7C15ULL + (uint64_t)rep + 1);
            for (int i = plan->nruns - 1; i > 0; i--) {
                int j = (int)(vb_rng_u64(&g) % (uint64_t)(i + 1));
                int t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
        }
        for (int i = 0; i < plan->nruns; i++) {
            sweep_item *it = &items[k++];
            memset(it, 0, sizeof *it);
            it->run = &plan->runs[perm[i]];
            it->repeat = rep;
            it->threads = threads_for(s, launcher, it->run->ranks, per_node);
            it->exit_code = INT_MIN;
            for (int h = 0; h < 6; h++) it->headline[h] = NAN;
            if (s->repeats > 1)
                vb_snprintf(it->name, sizeof it->name, "%s_rep=%d", it->run->name, rep);
            else
                vb_snprintf(it->name, sizeof it->name, "%s", it->run->name);
        }
    }
    free(perm);
    *count = n;
    return items;
}

/* Before anything is launched, every point is checked as `vitbench run`
 * would check it: keys and values (named config included), data paths, and
 * whether its layout fits its world size. One line naming the point, exit 2:
 * instead of N runs failing alike. Data paths are checked here for mpirun and
 * srun; under sbatch (or a dry run, which prints commands for elsewhere) they
 * may only exist where the runs will run: a warning. */
static void preflight(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind launcher, bool dry_run) {
    bool warned = false;
    for (int i = 0; i < plan->nruns; i++) {
        const vb_sweep_run *r = &plan->runs[i];
        char ctx[256];
        vb_snprintf(ctx, sizeof ctx, "sweep %s, point %.150s", s->name, r->name);
        vb_set_error_context(ctx);
        strvec a = {0};
        sv_push(&a, "vitbench");
        for (int j = 0; j < r->args.n; j++) sv_pushf(&a, "--%s=%s", r->args.v[j].key, r->args.v[j].value);
        vb_config c;
        vb_config_defaults(&c);
        vb_config_from_args(&c, a.n, a.v, 1);
        sv_free(&a);
        char err[1024];
        if (vb_layout_check(&c, r->ranks, err, sizeof err) != 0) vb_die_input("%d ranks: %s", r->ranks, err);
        struct {
            const char *key, *path;
            bool dir;
        } need[4] = {{"train_data_path", c.train_data_path, true},
                     {"global_means_path", c.global_means_path, false},
                     {"global_stds_path", c.global_stds_path, false},
                     {"valid_data_path", c.valid_data_path, true}};
        int nneed = strcmp(s->command, "train") == 0 ? 4 : 3;
        for (int q = 0; q < nneed; q++) {
            bool ok = need[q].dir ? vb_dir_exists(need[q].path) : vb_file_exists(need[q].path);
            if (ok) continue;
            if (launcher == LAUNCH_SBATCH || dry_run) {
                if (!warned)
                    vb_warn("%s %s is not visible here; the runs will need it where they run", need[q].key,
                            need[q].path);
                warned = true;
                continue;
            }
            vb_die_input("%s %s: no such %s (make the data first, e.g. vitbench datagen, or set --%s)", need[q].key,
                         need[q].path, need[q].dir ? "directory" : "file", need[q].key);
        }
    }
    vb_set_error_context(NULL);
}

/* Runs an analysis command (report, trace) in a child process, so that its
 * exit on bad input cannot take the sweep down; returns its exit status. */
static int run_analysis(int (*cmd_main)(int, char **), char *name, const char *path, bool quiet) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (quiet) {
            int devnull = open("/dev/null", O_WRONLY);
            if (devnull >= 0) dup2(devnull, 1);
        }
        char *argv[] = {name, (char *)path, NULL};
        exit(cmd_main(2, argv));
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The sweep's report, as `vitbench report DIR` writes it, after a Chrome
 * trace for every completed run that recorded a timeline (the report links
 * them). A failure here is a warning: the runs' results stand either way. */
static void write_report(const char *dir, const char *runs_dir, const sweep_item *items, int n) {
    int traced = 0;
    for (int i = 0; i < n; i++) {
        if (!items[i].status || strcmp(items[i].status, "completed") != 0) continue;
        char run[VB_PATH_MAX], tl[VB_PATH_MAX + 32];
        vb_snprintf(run, sizeof run, "%s/%s", runs_dir, items[i].name);
        vb_snprintf(tl, sizeof tl, "%s/timeline.csv", run);
        if (!vb_file_exists(tl)) continue;
        if (run_analysis(vb_trace_main, "trace", run, true) == 0) traced++;
    }
    if (traced) printf("vitbench sweep: trace.json written for %d runs\n", traced);
    if (run_analysis(vb_report_main, "report", dir, false) != 0)
        vb_warn("the report of %s failed (see above); the runs' results are complete, retry with vitbench report %s",
                dir, dir);
}

/* --resume DIR: the sweep's own options, from the command line its
 * sweep.json recorded; of the new command line only --retry_failed,
 * --timeout_s and --no_report apply. */
static void reload_cli(const char *dir, sweep_cli *cli) {
    bool no_report = cli->no_report, retry = cli->retry_failed;
    int timeout_s = cli->timeout_s;
    if (cli->launcher_args.n || cli->ov.config.n || cli->ov.ranks || cli->ov.world_size || cli->repeats > 0 ||
        cli->shuffled >= 0 || cli->order_seed >= 0 || cli->threads_per_rank > 0 || cli->ranks_per_node >= 0 ||
        cli->dry_run)
        vb_die_input("flag --resume %s: the sweep keeps the options it started with (sweep.json); only "
                     "--retry_failed, --timeout_s and --no_report may be added",
                     dir);
    char path[VB_PATH_MAX];
    vb_snprintf(path, sizeof path, "%s/sweep.json", dir);
    char *text = vb_read_file(path, NULL);
    if (!text) vb_die_input("flag --resume %s: no sweep.json there (%s); is it a sweep directory?", dir, strerror(errno));
    cJSON *j = cJSON_Parse(text);
    free(text);
    cJSON *cl = j ? cJSON_GetObjectItemCaseSensitive(j, "command_line") : NULL;
    int n = cJSON_IsArray(cl) ? cJSON_GetArraySize(cl) : 0;
    if (n < 2) vb_die_input("%s: no command_line array (not a sweep.json written by vitbench sweep)", path);
    /* argv of the original `vitbench sweep ...`, without "vitbench"; kept for
     * the process's lifetime since the parsed options point into it (held in
     * a static, so leak checkers see it as reachable, not lost) */
    static char **args;
    args = xrealloc(NULL, (size_t)n * sizeof *args);
    for (int i = 1; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(cl, i);
        if (!cJSON_IsString(a)) vb_die_input("%s: command_line item %d is not a string", path, i);
        args[i - 1] = xstrdup(a->valuestring);
    }
    args[n - 1] = NULL;
    cJSON_Delete(j);
    sv_free(&cli->launcher_args);
    vb_sweep_kvs_free(&cli->ov.config);
    parse_cli(n - 1, args, cli);
    if (cli->dry_run) vb_die_input("flag --resume %s: a dry run has nothing to resume", dir);
    cli->no_report = no_report;
    cli->retry_failed = retry;
    if (timeout_s >= 0) cli->timeout_s = timeout_s;
}

/* --resume: rows of the sweep's index.csv that stand keep their status
 * (completed and submitted always, failed unless --retry_failed); every other
 * run (never started, or cut off when the sweep died) runs again, its
 * leftover directory moved aside so the new run gets the name index.csv
 * points to. Returns how many were kept. */
static int keep_finished(const char *dir, const char *runs_dir, sweep_item *items, int n, bool retry_failed) {
    char path[VB_PATH_MAX], err[512];
    vb_snprintf(path, sizeof path, "%s/index.csv", dir);
    vb_csv t;
    if (vb_csv_read(path, &t, err, sizeof err) != 0) vb_die_input("flag --resume: %s", err);
    int cdir = vb_csv_col(&t, "run_dir"), cst = vb_csv_col(&t, "status"), ccode = vb_csv_col(&t, "exit_code");
    if (cdir < 0 || cst < 0) vb_die_input("flag --resume: %s has no run_dir / status columns", path);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        sweep_item *it = &items[i];
        char want[300];
        snprintf(want, sizeof want, "runs/%s", it->name);
        for (int row = 0; row < t.nrows; row++) {
            if (strcmp(vb_csv_get(&t, row, cdir), want) != 0) continue;
            const char *st = vb_csv_get(&t, row, cst);
            bool keep = strcmp(st, "completed") == 0 || strcmp(st, "submitted") == 0 ||
                        (strcmp(st, "failed") == 0 && !retry_failed);
            if (!keep) break;
            it->status = strcmp(st, "completed") == 0 ? "completed" : strcmp(st, "submitted") == 0 ? "submitted" : "failed";
            double code;
            if (vb_csv_num(&t, row, ccode, &code)) it->exit_code = (int)code;
            if (strcmp(st, "completed") == 0) read_headline(runs_dir, it);
            kept++;
            break;
        }
        if (it->status) continue;
        char old[VB_PATH_MAX + 320], aside[VB_PATH_MAX + 360];
        vb_snprintf(old, sizeof old, "%s/%s", runs_dir, it->name);
        if (!vb_dir_exists(old)) continue;
        for (int k = 1; k < 1000; k++) {
            vb_snprintf(aside, sizeof aside, "%s.unfinished-%d", old, k);
            if (!vb_dir_exists(aside)) break;
        }
        if (rename(old, aside) != 0) vb_die_input("cannot move the unfinished run %s aside (%s)", old, strerror(errno));
        printf("vitbench sweep: %s did not finish before; moved to %s\n", it->name, aside);
    }
    vb_csv_free(&t);
    return kept;
}

int vb_sweep_main(int argc, char **argv) {
    /* A sweep under mpirun would start a copy of itself per rank, each
     * launching every run: refuse before anything is created. */
    static const char *mpi_env[] = {"OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof mpi_env / sizeof mpi_env[0]; i++)
        if (getenv(mpi_env[i]))
            vb_die_input("sweep: running inside an MPI job (%s is set); start the sweep itself without mpirun/srun, "
                         "it launches each run's ranks",
                         mpi_env[i]);
    /* srun --mpi=none (a common MpiDefault) sets no PMI variable: a step of
     * several tasks would still start one sweep per task. A one-task step
     * (srun --pty bash) is an ordinary interactive shell and is allowed. */
    const char *step_tasks = getenv("SLURM_STEP_NUM_TASKS");
    if (getenv("SLURM_STEP_ID") && step_tasks && atoi(step_tasks) > 1)
        vb_die_input("sweep: running inside an srun step of %s tasks; start the sweep itself without srun, "
                     "it launches each run's ranks",
                     step_tasks);

    sweep_cli cli;
    parse_cli(argc, argv, &cli);
    char resume_dir[VB_PATH_MAX] = "";
    bool retry_failed = cli.retry_failed;
    if (cli.resume) {
        vb_snprintf(resume_dir, sizeof resume_dir, "%s", cli.resume);
        reload_cli(resume_dir, &cli);
    }
    char path[VB_PATH_MAX];
    if (resume_dir[0])
        vb_snprintf(path, sizeof path, "%s/scenario.yaml", resume_dir); /* the sweep's own copy */
    else
        resolve_scenario(cli.file, path, sizeof path);
    vb_scenario sc;
    vb_scenario_load(&sc, path);
    if (cli.repeats > 0) sc.repeats = cli.repeats;
    if (cli.shuffled >= 0) sc.shuffled = cli.shuffled;
    if (cli.order_seed >= 0) sc.order_seed = (unsigned long long)cli.order_seed;
    if (cli.threads_per_rank > 0) sc.threads_per_rank = cli.threads_per_rank;
    vb_sweep_plan plan;
    vb_sweep_expand(&sc, &cli.ov, &plan);
    check_named_configs(&plan);
    int per_node = cli.ranks_per_node >= 0 ? cli.ranks_per_node : sc.ranks_per_node;
    int timeout_s = cli.timeout_s >= 0 ? cli.timeout_s : sc.timeout_s;
    if (plan.nruns == 0) vb_die_input("%s: the scenario expands to no runs", sc.path);
    preflight(&sc, &plan, cli.launcher, cli.dry_run);

    const char *launcher_prog = cli.launcher == LAUNCH_MPIRUN ? "mpirun" : "srun";
    if (!cli.dry_run) {
        if (!in_path(launcher_prog))
            vb_die_input("flag --launcher %s: '%s' not found in PATH", launcher_names[cli.launcher], launcher_prog);
        if (cli.launcher == LAUNCH_SBATCH && !in_path("sbatch"))
            vb_die_input("flag --launcher sbatch: 'sbatch' not found in PATH (use --dry-run to only write job scripts)");
    }
    char exe[VB_PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) vb_die_internal("cannot locate the vitbench binary via /proc/self/exe: %s", strerror(errno));
    exe[k] = '\0';

    int nitems = 0;
    sweep_item *items = plan_items(&sc, &plan, cli.launcher, per_node, &nitems);

    char dir[VB_PATH_MAX], id[256];
    if (resume_dir[0]) {
        vb_snprintf(dir, sizeof dir, "%s", resume_dir);
        char copy[VB_PATH_MAX];
        vb_snprintf(copy, sizeof copy, "%s", resume_dir);
        vb_snprintf(id, sizeof id, "%s", basename(copy));
    } else {
        create_sweep_dir(cli.out_dir, sc.name, dir, sizeof dir, id, sizeof id);
    }
    make_subdir(dir, "runs");
    make_subdir(dir, "logs");
    if (cli.launcher == LAUNCH_SBATCH) make_subdir(dir, "jobs");
    if (!resume_dir[0]) {
        char p[VB_PATH_MAX];
        vb_snprintf(p, sizeof p, "%s/scenario.yaml", dir);
        copy_file(sc.path, p);
        write_sweep_json(dir, id, &sc, &cli, &plan, exe, argc, argv, nitems);
    }
    /* sbatch jobs start later, elsewhere: their paths must not depend on our cwd */
    char dir_abs[PATH_MAX];
    if (!realpath(dir, dir_abs)) vb_die_input("cannot resolve %s (%s)", dir, strerror(errno));
    const char *run_base = cli.launcher == LAUNCH_SBATCH ? dir_abs : dir;
    char runs_dir[VB_PATH_MAX], index_path[VB_PATH_MAX];
    vb_snprintf(runs_dir, sizeof runs_dir, "%s/runs", run_base);
    vb_snprintf(index_path, sizeof index_path, "%s/index.csv", dir);

    int kept = resume_dir[0] ? keep_finished(dir, runs_dir, items, nitems, retry_failed) : 0;
    index_ctx ix = {&plan, items, nitems};
    if (vb_atomic_write(index_path, write_index, &ix) != 0) vb_die_input("cannot write %s", index_path);
    printf("vitbench sweep: %s: %d runs (%d points x %d repeats, %s order, %s%s) -> %s\n", sc.name, nitems, plan.nruns,
           sc.repeats, sc.shuffled ? "shuffled" : "sequential", launcher_names[cli.launcher],
           cli.dry_run ? ", dry run" : "", dir);
    if (resume_dir[0]) printf("vitbench sweep: resuming: %d runs kept, %d to run\n", kept, nitems - kept);
    fflush(stdout);
    if (!cli.dry_run) vb_on_stop_signals(on_stop_signal);

    int failed = 0, interrupted = 0;
    for (int i = 0; i < nitems && !interrupted; i++) {
        if (g_stop_signal) { /* arrived between runs: do not start another */
            interrupted = 1;
            break;
        }
        sweep_item *it = &items[i];
        if (it->status) continue; /* kept from before a resume */
        const vb_sweep_run *r = it->run;
        strvec cmd = {0};
        build_launch(&cmd, cli.launcher, r->ranks, per_node, &cli.launcher_args);
        push_vitbench_args(&cmd, exe, &sc, r, it->name, runs_dir);
        char log_path[VB_PATH_MAX];
        vb_snprintf(log_path, sizeof log_path, "%s/logs/%s.log", cli.launcher == LAUNCH_SBATCH ? dir_abs : dir, it->name);

        if (cli.launcher == LAUNCH_SBATCH) {
            char script[VB_PATH_MAX];
            vb_snprintf(script, sizeof script, "%s/jobs/%s.sbatch", dir_abs, it->name);
            write_sbatch_script(script, id, &sc, r, it->name, i, nitems, per_node, it->threads, log_path, cmd.v);
            char *sb[] = {"sbatch", script, NULL};
            if (cli.dry_run) {
                fput_argv(stdout, sb);
                fputc('\n', stdout);
                it->status = "dry-run";
            } else {
                char submit_log[VB_PATH_MAX];
                vb_snprintf(submit_log, sizeof submit_log, "%s/logs/%s.submit.log", dir, it->name);
                const char *why;
                it->exit_code = launch(sb, submit_log, 120, 0, &why);
                it->status = it->exit_code == 0 ? "submitted" : "failed";
                printf("vitbench sweep: [%d/%d] %s: %s (sbatch exit %d, see %s)\n", i + 1, nitems, it->name,
                       it->status, it->exit_code, submit_log);
                if (it->exit_code != 0) failed++;
                if (g_stop_signal) interrupted = 1;
            }
        } else if (cli.dry_run) {
            printf("OMP_NUM_THREADS=%d ", it->threads);
            fput_argv(stdout, cmd.v);
            fputc('\n', stdout);
            it->status = "dry-run";
        } else {
            printf("vitbench sweep: [%d/%d] %s: OMP_NUM_THREADS=%d ", i + 1, nitems, it->name, it->threads);
            fput_argv(stdout, cmd.v);
            fputc('\n', stdout);
            FILE *lf = fopen(log_path, "w");
            if (lf) {
                fprintf(lf, "# OMP_NUM_THREADS=%d ", it->threads);
                fput_argv(lf, cmd.v);
                fputc('\n', lf);
                fclose(lf);
            }
            double t0 = vb_now();
            const char *why;
            it->exit_code = launch(cmd.v, log_path, timeout_s, it->threads, &why);
            if (why[0])
                append_line(log_path, "vitbench sweep: run stopped (%s) after %.1f s", why, vb_now() - t0);
            it->status = it->exit_code == 0 ? "completed" : "failed";
            if (it->exit_code != 0) {
                failed++;
                /* a run killed outright (SIGKILL, OOM) could not say so itself */
                char rj[VB_PATH_MAX + 200], why[128];
                vb_snprintf(rj, sizeof rj, "%s/%s/run.json", runs_dir, it->name);
                snprintf(why, sizeof why, "the run ended with exit status %d before it could record its end",
                         it->exit_code);
                vb_run_json_mark_failed(rj, why);
            }
            if (it->exit_code == 0) read_headline(runs_dir, it);
            printf("vitbench sweep: [%d/%d] %s: %s, exit %d, %.1f s%s%s", i + 1, nitems, it->name, it->status,
                   it->exit_code, vb_now() - t0, why[0] ? ", " : "", why);
            if (!isnan(it->headline[0])) printf(", FULL %.2f samples/s", it->headline[0]);
            printf("\n");
            if (g_stop_signal) interrupted = 1;
        }
        fflush(stdout);
        sv_free(&cmd);
        if (vb_atomic_write(index_path, write_index, &ix) != 0) vb_warn("could not rewrite %s", index_path);
    }

    int recorded = 0, completed = 0;
    failed = 0; /* over the whole table: a resumed sweep keeps its earlier failures */
    for (int i = 0; i < nitems; i++) {
        if (!items[i].status) continue;
        recorded++;
        completed += strcmp(items[i].status, "completed") == 0;
        failed += strcmp(items[i].status, "failed") == 0;
    }
    if (!cli.dry_run && cli.launcher != LAUNCH_SBATCH) print_table(&plan, items, nitems);
    printf("vitbench sweep: index %s (%d of %d runs recorded)\n", index_path, recorded, nitems);
    /* the report of what finished, unless asked not to or nothing ran here */
    if (!cli.no_report && !interrupted && completed > 0) write_report(dir, runs_dir, items, nitems);
    if (interrupted)
        vb_warn("sweep interrupted (signal %d) after %d of %d runs; continue with vitbench sweep --resume %s",
                (int)g_stop_signal, recorded, nitems, dir);
    if (failed)
        printf("vitbench sweep: %d of %d runs failed; their logs are in %s/logs\n", failed, recorded, dir);
    else if (!interrupted)
        printf("vitbench sweep: all %d runs %s\n", recorded,
               cli.dry_run ? "printed (dry run)" : cli.launcher == LAUNCH_SBATCH ? "submitted" : "completed");
    fflush(stdout);

    free(items);
    vb_sweep_plan_free(&plan);
    vb_scenario_free(&sc);
    free(cli.ov.ranks);
    vb_sweep_kvs_free(&cli.ov.config);
    sv_free(&cli.launcher_args);
    return interrupted ? 130 : failed ? 1 : 0;
}

