/* sweep_plan.c: a loaded scenario plus the command line's overrides into
 * the runs of the sweep, in the order they are launched.
 *
 * Contract: vb_sweep_expand orders points ranks (outermost), layout, matrix
 * point, then baseline and each flag setting, and names each run by its
 * index and swept values; contradictions exit 2. sweep_plan_items lays the
 * points out in rounds of repeats, each round in plan order or a permutation
 * seeded by (order_seed, round), so the same scenario and seed always run in
 * the same order. The checks (sweep_check_named_configs, sweep_preflight)
 * exit 2 on what would make every run fail, before anything is created.
 */
#include "bench/sweep/sweep_internal.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/run/from_config.h" /* vb_layout_check */
#include "core/config/config.h"
#include "core/comm/groups.h"

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
                out = vb_realloc_check(out, (size_t)(n + 1) * sizeof *out);
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

/* A point's name from the scenario's run_names template: {index} (NNN),
 * {ranks}, {nodes} and any swept key, by its value; characters a run
 * name cannot hold become _, as in the default names. */
static void name_from_template(const vb_scenario *s, const vb_sweep_run *r, char *name, size_t n) {
    char out[256] = "";
    for (const char *t = s->run_names; *t;) {
        if (*t != '{') {
            size_t len = strlen(out);
            if (len + 1 < sizeof out) out[len] = *t, out[len + 1] = '\0';
            t++;
            continue;
        }
        const char *close = strchr(t, '}');
        char key[64], v[160];
        snprintf(key, sizeof key, "%.*s", (int)(close - t - 1), t + 1);
        if (strcmp(key, "index") == 0) {
            snprintf(v, sizeof v, "%03d", r->index);
        } else if (strcmp(key, "ranks") == 0) {
            snprintf(v, sizeof v, "%d", r->ranks);
        } else if (strcmp(key, "nodes") == 0) {
            int nodes = sweep_nodes_of(s, s->ranks_per_node, r->ranks);
            if (nodes == 0)
                vb_die_input("%s: run_names '%s': {nodes} needs ranks_per_node or nodes (key or flag)", s->path,
                             s->run_names);
            snprintf(v, sizeof v, "%d", nodes);
        } else {
            const char *pv = vb_sweep_kvs_get(&r->params, key);
            if (!pv)
                vb_die_input("%s: run_names '%s': {%s} is not index, ranks, nodes or a swept key of this scenario",
                             s->path, s->run_names, key);
            snprintf(v, sizeof v, "%s", pv);
        }
        for (char *c = v; *c; c++)
            if (!isalnum((unsigned char)*c) && !strchr("._=-+", *c)) *c = '_';
        strncat(out, v, sizeof out - strlen(out) - 1);
        t = close + 1;
    }
    if (strlen(out) >= n || strlen(out) > 100)
        vb_die_input("%s: run_names '%s': run name %.60s... is longer than 100 characters", s->path, s->run_names, out);
    snprintf(name, n, "%s", out);
}

static const char *short_key(const char *key) {
    if (strcmp(key, "tensor_parallel") == 0) return "tp";
    if (strcmp(key, "context_parallel") == 0) return "cp";
    if (strcmp(key, "parallel_order") == 0) return "order";
    return key;
}

static void add_column(vb_sweep_plan *p, const char *name) {
    p->columns = vb_realloc_check(p->columns, (size_t)(p->ncolumns + 1) * sizeof *p->columns);
    p->columns[p->ncolumns++] = vb_strdup_check(name);
}

void vb_sweep_expand(const vb_scenario *s, const vb_sweep_overrides *o, vb_sweep_plan *plan) {
    memset(plan, 0, sizeof *plan);
    static const vb_sweep_overrides none = {0};
    if (!o) o = &none;

    /* an override must not fight the sweep over a key it varies */
    for (int i = 0; i < o->config.n; i++) {
        const char *k = o->config.v[i].key;
        const char *where = NULL;
        if (sweep_axis_find(s->matrix, s->nmatrix, k)) where = "matrix";
        if (s->has_flags && sweep_kvs_has(&s->baseline, k)) where = "baseline/flags";
        if (s->has_layouts && sweep_is_layout_key(k)) where = "layouts";
        if (where)
            vb_die_input("flag --%s: scenario %s (%s) sweeps %s in %s; drop the flag or edit the scenario", k, s->name,
                         s->path, k, where);
        if (sweep_is_reserved_key(k)) vb_die_input("flag --%s: set by the sweep for every run", k);
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
        add_column(plan, VB_COL_VARIANT);
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
                        plan->runs = vb_realloc_check(plan->runs, (size_t)cap * sizeof *plan->runs);
                    }
                    vb_sweep_run *r = &plan->runs[plan->nruns];
                    memset(r, 0, sizeof *r);
                    r->index = plan->nruns;
                    r->ranks = world;
                    snprintf(r->name, sizeof r->name, "%03d_ranks=%d", r->index, world);
                    /* later wins: base < command line < layout < matrix < baseline/flag */
                    sweep_kvs_copy(&r->args, &s->base);
                    sweep_kvs_copy(&r->args, &o->config);
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
                    const char **mv = vb_realloc_check(NULL, (size_t)(s->nmatrix + 1) * sizeof *mv);
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
                        vb_sweep_kvs_set(&r->params, VB_COL_VARIANT, variant);
                        for (int b = 0; b < s->baseline.n; b++) {
                            const char *k2 = s->baseline.v[b].key;
                            bool flagged = flag_key && strcmp(flag_key, k2) == 0;
                            vb_sweep_kvs_set(&r->params, k2, flagged ? flag_value : s->baseline.v[b].value);
                        }
                    }
                    for (int c = 0; c < r->params.n; c++) {
                        const char *k2 = r->params.v[c].key;
                        if (strcmp(k2, VB_COL_VARIANT) == 0) {
                            append_name_part(r->name, sizeof r->name, flag_key ? flag_key : "baseline", flag_value);
                            continue;
                        }
                        vb_sweep_kvs_set(&r->args, k2, r->params.v[c].value);
                        /* flags runs are named by their variant alone */
                        if (!s->has_flags || !sweep_kvs_has(&s->baseline, k2))
                            append_name_part(r->name, sizeof r->name, short_key(k2), r->params.v[c].value);
                    }
                    if (s->run_names[0]) name_from_template(s, r, r->name, sizeof r->name);
                    plan->nruns++;
                }
            }
        }
        free(layouts);
    }
    /* a template that names two points alike would put both in one directory */
    for (int i = 0; i < plan->nruns && s->run_names[0]; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(plan->runs[i].name, plan->runs[j].name) == 0)
                vb_die_input("%s: run_names '%s' names two points %s (%d and %d); add {index} or a swept key",
                             s->path, s->run_names, plan->runs[i].name, j, i);
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

/* A misspelt --config or yaml_config would fail every run the same way, so
 * each distinct (yaml_config, config) the runs use is loaded once up front;
 * vb_config_load_yaml exits 2 naming the file and the config. */
void sweep_check_named_configs(const vb_sweep_plan *plan) {
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
        seen = vb_realloc_check(seen, (size_t)(nseen + 1) * sizeof *seen);
        vb_snprintf(seen[nseen][0], VB_PATH_MAX, "%s", yaml);
        vb_snprintf(seen[nseen][1], VB_PATH_MAX, "%s", name);
        nseen++;
        vb_config scratch = defaults;
        vb_config_load_yaml(&scratch, yaml, name);
    }
    free(seen);
}

/* Every (point, repeat) in the order they run: rounds of every point, each
 * round in plan order or, shuffled, in a permutation seeded by (order_seed,
 * round), so slow drift of a shared machine spreads over every point alike. */
sweep_item *sweep_plan_items(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind launcher, int per_node,
                             int *count) {
    int n = plan->nruns * s->repeats;
    sweep_item *items = vb_realloc_check(NULL, (size_t)n * sizeof *items);
    int *perm = vb_realloc_check(NULL, (size_t)plan->nruns * sizeof *perm);
    int k = 0;
    for (int rep = 0; rep < s->repeats; rep++) {
        for (int i = 0; i < plan->nruns; i++) perm[i] = i;
        if (vb_scenario_shuffled(s)) {
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
            it->threads = sweep_threads_for(s, launcher, it->run->ranks, per_node);
            it->exit_code = INT_MIN;
            for (int h = 0; h < SWEEP_HEADLINES; h++) it->headline[h] = NAN;
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
 * the launchers that start ranks here; under a batch launcher (or a dry run, which prints commands for elsewhere) they
 * may only exist where the runs will run: a warning. */
void sweep_preflight(const vb_scenario *s, const vb_sweep_plan *plan, launcher_kind launcher, bool dry_run) {
    bool warned = false;
    for (int i = 0; i < plan->nruns; i++) {
        const vb_sweep_run *r = &plan->runs[i];
        char ctx[256];
        vb_snprintf(ctx, sizeof ctx, "sweep %s, point %.150s", s->name, r->name);
        vb_set_error_context(ctx);
        sweep_strvec a = {0};
        sweep_sv_push(&a, "vitbench");
        for (int j = 0; j < r->args.n; j++) sweep_sv_pushf(&a, "--%s=%s", r->args.v[j].key, r->args.v[j].value);
        vb_config c;
        vb_config_defaults(&c);
        vb_config_from_args(&c, a.n, a.v, 1);
        sweep_sv_free(&a);
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
            char why[VB_PATH_MAX + 64];
            const char *bad = need[q].dir ? vb_dir_problem(need[q].path, why, sizeof why)
                                          : vb_file_problem(need[q].path, why, sizeof why);
            if (!bad) continue;
            if (sweep_launchers[launcher].batch || dry_run) {
                if (!warned)
                    vb_warn("%s %s: %s here; the runs will need it where they run", need[q].key, need[q].path, bad);
                warned = true;
                continue;
            }
            vb_die_input("%s %s: %s (make the data first, e.g. vitbench datagen, or set --%s)", need[q].key,
                         need[q].path, bad, need[q].key);
        }
    }
    vb_set_error_context(NULL);
}
