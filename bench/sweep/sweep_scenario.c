/* sweep_scenario.c: scenario files (sweep.h's schema) into vb_scenario.
 *
 * Contract: vb_scenario_load either returns a scenario whose every key is
 * known, every value valid by the config parser's own rules and every key
 * decided in exactly one place (base, matrix, layouts, baseline/flags), or
 * exits 2 with one line naming the file, the key and, where it helps, the
 * line. Nothing is expanded or launched here. The per-key checks
 * (sweep_check_setting, reserved and layout keys) are shared with the
 * command line's config overrides.
 */
#include "bench/sweep/sweep_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/flag.h"
#include "core/config/config.h"
#include "core/comm/groups.h"
#include "core/util/yaml_util.h"

/* Keys the sweep itself sets on every run; a scenario or flag naming them
 * would silently lose, so it is refused. */
bool sweep_is_reserved_key(const char *key) {
    return strcmp(key, "output_dir") == 0 || strcmp(key, "run_name") == 0 || strcmp(key, "run_num") == 0;
}

bool sweep_is_layout_key(const char *key) {
    return strcmp(key, "tensor_parallel") == 0 || strcmp(key, "context_parallel") == 0 ||
           strcmp(key, "parallel_order") == 0;
}

/* Checks key and value with the config parser's own rules (a scratch
 * config: only this one setting, cross-key checks are the run's job).
 * vb_config_set exits 2 with "<origin>: ..." on an unknown key or bad value. */
void sweep_check_setting(const char *key, const char *value, const char *origin) {
    static vb_config scratch;
    static bool ready = false;
    if (!ready) {
        vb_config_defaults(&scratch);
        ready = true;
    }
    /* every setting becomes an argument of a launcher line or a job script's srun line */
    sweep_refuse_line_break(origin, value);
    if (sweep_is_reserved_key(key))
        vb_die_input("%s: %s is set by the sweep for every run (runs go to <output_dir>/<sweep_id>/runs/<run>)",
                     origin, key);
    vb_config_set(&scratch, key, value, origin);
}

typedef struct {
    const char *file;
    yaml_document_t *doc;
} yctx;

/* Text of a config value: a scalar, or a flat list joined with commas (how a
 * list such as img_size is written on the command line). */
static char *value_text(const yctx *y, yaml_node_t *n, const char *where) {
    if (n->type == YAML_SCALAR_NODE) return vb_strdup_check(vb_yaml_scalar(n));
    if (n->type == YAML_SEQUENCE_NODE) {
        size_t len = 1;
        char *out = vb_strdup_check("");
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
            yaml_node_t *e = yaml_document_get_node(y->doc, *it);
            const char *t = vb_yaml_scalar(e);
            if (!t) vb_die_input("%s: %s (line %d): list items must be scalars, found %s", y->file, where,
                                 vb_yaml_line(e), vb_yaml_kind(e));
            len += strlen(t) + 1;
            out = vb_realloc_check(out, len);
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
    if (!sweep_parse_int(t, &v) || v < min)
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
    int *v = vb_realloc_check(NULL, (size_t)*count * sizeof *v);
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
        sweep_check_setting(pairs.pairs[i].key, text, origin);
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
    *axes = vb_realloc_check(NULL, (size_t)pairs.n * sizeof **axes);
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
        a->key = vb_strdup_check(pairs.pairs[i].key);
        a->values = vb_realloc_check(NULL, (size_t)count * sizeof *a->values);
        a->nvalues = count;
        for (int j = 0; j < count; j++) {
            yaml_node_t *e = item_node(y, list, items, j);
            a->values[j] = value_text(y, e, what);
            char origin[VB_PATH_MAX + 128];
            snprintf(origin, sizeof origin, "%s: %s (line %d)", y->file, what, vb_yaml_line(e));
            sweep_check_setting(a->key, a->values[j], origin);
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
            s->orders = vb_realloc_check(NULL, (size_t)count * sizeof *s->orders);
            s->norders = count;
            for (int j = 0; j < count; j++) {
                yaml_node_t *e = item_node(y, v, items, j);
                const char *t = scalar_or_die(y, e, what);
                int ord[VB_NDIMS];
                char err[256];
                if (vb_layout_parse_order(t, ord, err, sizeof err) != 0 || strlen(t) != 8)
                    vb_die_input("%s: %s (line %d): '%s' is not an order of all three of tp, cp, dp (e.g. tp-cp-dp)",
                                 y->file, what, vb_yaml_line(e), t);
                s->orders[j] = vb_strdup_check(t);
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
            if (!vb_flag_parse_bool(t, &s->keep_equivalent))
                vb_die_input("%s: %s (line %d): '%s' is not true or false", y->file, what, pairs.pairs[i].line, t);
        } else {
            vb_die_input("%s: layouts (line %d): unknown key '%s' (known: orders, tensor_parallel, context_parallel, "
                         "keep_equivalent)", y->file, pairs.pairs[i].line, k);
        }
    }
    if (!s->orders) {
        s->orders = vb_realloc_check(NULL, sizeof *s->orders);
        s->orders[0] = vb_strdup_check("tp-cp-dp");
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
        char origin[VB_PATH_MAX + 160];
        snprintf(origin, sizeof origin, "%s: %s (line %d)", y->file, what, pairs.pairs[i].line);
        sweep_refuse_line_break(origin, t);
        vb_sweep_kvs_set(&s->sbatch, k, t);
    }
    vb_yaml_pairs_free(&pairs);
}

/* One scheduler key (sweep_cluster.c) of the cluster: block or the top
 * level: a list key takes a list of lines (a lone line is a list of one),
 * the others one value. Set in both places: exit 2. */
static void load_cluster_key(const yctx *y, const char *section, const char *k, yaml_node_t *v, int line,
                             vb_scenario *s) {
    char origin[VB_PATH_MAX + 96];
    const char *had = vb_sweep_kvs_get(&s->slurm.given, k);
    if (had) vb_die_input("%s: %s%s (line %d): also set as %s; keep one", y->file, section, k, line, had);
    if (sweep_cluster_key_find(k)->type == KEY_LINES) {
        if (v->type == YAML_MAPPING_NODE)
            vb_die_input("%s: %s%s (line %d): expected a list of lines, found a mapping", y->file, section, k, line);
        int count;
        yaml_node_item_t *items = items_of(v, &count);
        for (int j = 0; j < count; j++) {
            yaml_node_t *e = item_node(y, v, items, j);
            snprintf(origin, sizeof origin, "%s: %s%s (line %d)", y->file, section, k, vb_yaml_line(e));
            vb_sweep_slurm_set(&s->slurm, k, scalar_or_die(y, e, k), origin);
        }
        return;
    }
    snprintf(origin, sizeof origin, "%s: %s%s (line %d)", y->file, section, k, line);
    vb_sweep_slurm_set(&s->slurm, k, scalar_or_die(y, v, k), origin);
}

/* The scheduler keys' names, for messages. */
static void cluster_key_names(char *out, size_t n) {
    out[0] = '\0';
    for (int i = 0; i < sweep_ncluster_keys; i++) {
        if (i) strncat(out, ", ", n - strlen(out) - 1);
        strncat(out, sweep_cluster_keys[i].name, n - strlen(out) - 1);
    }
}

/* cluster: the scheduler keys of every scheduler the scenario is meant for
 * (the launcher's scheduler takes its own and refuses the others'). */
static void load_cluster(const yctx *y, yaml_node_t *map, vb_scenario *s) {
    char where[VB_PATH_MAX + 64];
    snprintf(where, sizeof where, "%s: cluster", y->file);
    vb_yaml_pairs pairs;
    vb_yaml_mapping_pairs(y->doc, map, where, &pairs);
    for (int i = 0; i < pairs.n; i++) {
        const char *k = pairs.pairs[i].key;
        if (!sweep_cluster_key_find(k)) {
            char names[1024];
            cluster_key_names(names, sizeof names);
            vb_die_input("%s: cluster (line %d): unknown key '%s'; known: %s", y->file, pairs.pairs[i].line, k, names);
        }
        load_cluster_key(y, "cluster.", k, pairs.pairs[i].value, pairs.pairs[i].line, s);
    }
    vb_yaml_pairs_free(&pairs);
}

const vb_sweep_axis *sweep_axis_find(const vb_sweep_axis *a, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(a[i].key, key) == 0) return &a[i];
    return NULL;
}

/* Cross-section checks: every key is decided in exactly one place. */
static void check_scenario(const vb_scenario *s) {
    const char *f = s->path;
    for (int i = 0; i < s->nmatrix; i++) {
        const char *k = s->matrix[i].key;
        if (sweep_kvs_has(&s->base, k))
            vb_die_input("%s: matrix.%s: also set in base; a key is either fixed (base) or swept (matrix)", f, k);
        if (s->has_layouts && sweep_is_layout_key(k))
            vb_die_input("%s: matrix.%s: set by layouts; remove it from matrix", f, k);
        if (s->has_flags && sweep_kvs_has(&s->baseline, k))
            vb_die_input("%s: matrix.%s: also in baseline; a key is either in matrix or in baseline/flags", f, k);
    }
    if (s->has_layouts) {
        for (int i = 0; i < s->base.n; i++)
            if (sweep_is_layout_key(s->base.v[i].key))
                vb_die_input("%s: base.%s: set by layouts; remove it from base", f, s->base.v[i].key);
        for (int i = 0; i < s->baseline.n; i++)
            if (sweep_is_layout_key(s->baseline.v[i].key))
                vb_die_input("%s: baseline.%s: set by layouts; remove it from baseline", f, s->baseline.v[i].key);
    }
    if (s->has_flags) {
        for (int i = 0; i < s->baseline.n; i++)
            if (sweep_kvs_has(&s->base, s->baseline.v[i].key))
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

/* run_names: literal characters a run name holds (A-Z a-z 0-9 _ . - = +,
 * the first a letter or digit) and {placeholders} of lowercase letters and _;
 * what each placeholder names is checked when the points are named. */
static void check_run_names(const char *file, int line, const char *t) {
    bool ok = strlen(t) < 100 && (isalnum((unsigned char)t[0]) || t[0] == '{');
    for (const char *c = t; *c && ok; c++) {
        if (*c == '{') {
            const char *close = strchr(c, '}');
            ok = close && close > c + 1;
            for (const char *q = c + 1; ok && q < close; q++) ok = islower((unsigned char)*q) || *q == '_';
            if (ok) c = close;
        } else {
            ok = isalnum((unsigned char)*c) || strchr("._=-+", *c);
        }
    }
    if (!ok)
        vb_die_input("%s: run_names (line %d): '%s' must be a name template of A-Z a-z 0-9 _ . - = + and {index}, "
                     "{ranks}, {nodes} or {<swept key>} (e.g. weak_scale_{nodes}), under 100 characters",
                     file, line, t);
}

bool vb_scenario_shuffled(const vb_scenario *s) { return s->shuffled > 0 || (s->shuffled < 0 && s->repeats > 1); }

void vb_scenario_load(vb_scenario *s, const char *path) {
    memset(s, 0, sizeof *s);
    if (strlen(path) >= sizeof s->path) vb_die_input("scenario file %.60s...: path too long", path);
    sweep_refuse_line_break("scenario file", path); /* job scripts name it in their header comment */
    strcpy(s->path, path);
    snprintf(s->command, sizeof s->command, "run");
    s->repeats = 1;
    s->shuffled = -1;

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
            /* a run is given --output_dir, --run_name and config keys as
             * flags: only these commands take them, and every other would
             * pass this check and then fail at each point's launch */
            static const char *const runnable[] = {"run", "train", "commbench"};
            bool known = false;
            for (size_t r = 0; r < sizeof runnable / sizeof runnable[0]; r++) known = known || !strcmp(t, runnable[r]);
            if (!known)
                vb_die_input("%s: command (line %d): a sweep runs run, train or commbench (each run gets --output_dir, "
                             "--run_name and the swept keys), not %s",
                             path, line, t);
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
        } else if (strcmp(k, "run_names") == 0) {
            const char *t = scalar_or_die(&y, v, "run_names");
            check_run_names(path, line, t);
            snprintf(s->run_names, sizeof s->run_names, "%s", t);
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
        } else if (strcmp(k, "cluster") == 0) {
            load_cluster(&y, v, s);
        } else if (sweep_cluster_key_find(k)) { /* older scenarios: the keys at the top level */
            load_cluster_key(&y, "", k, v, line, s);
        } else {
            char names[1024];
            cluster_key_names(names, sizeof names);
            vb_die_input("%s: unknown key '%s' (line %d); known: name, description, command, base, ranks, "
                         "ranks_per_node, timeout_s, sbatch, repeats, order, order_seed, threads_per_rank, run_names, "
                         "matrix, layouts, world_size, baseline, flags, cluster, and the scheduler keys (in cluster: or here) %s",
                         path, k, line, names);
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
    sweep_slurm_fold_sbatch(s);
    if (!s->ranks) {
        s->ranks = vb_realloc_check(NULL, sizeof *s->ranks);
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
    vb_sweep_slurm_free(&s->slurm);
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
