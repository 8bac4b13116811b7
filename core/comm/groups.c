/* groups.c: tp / cp / dp rank layout arithmetic (groups.h). */
#include "core/comm/groups.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const dim_names[VB_NDIMS] = {"tp", "cp", "dp"};
static const char *const dim_keys[VB_NDIMS] = {"tensor_parallel", "context_parallel", "data_parallel"};

static void set_err(char *err, size_t errn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errn, const char *fmt, ...) {
    if (!err || errn == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errn, fmt, ap);
    va_end(ap);
}

/* Parses order into out[]; *named gets a bit per dim the string names. */
static int parse_order(const char *order, int out[VB_NDIMS], int *named, char *err, size_t errn) {
    if (!order || !order[0]) order = "tp-cp-dp";
    bool seen[VB_NDIMS] = {false, false, false};
    int n = 0;
    const char *p = order;
    for (;;) {
        const char *dash = strchr(p, '-');
        size_t len = dash ? (size_t)(dash - p) : strlen(p);
        int dim = -1;
        for (int d = 0; d < VB_NDIMS; d++)
            if (len == 2 && strncmp(p, dim_names[d], 2) == 0) dim = d;
        if (dim < 0) {
            set_err(err, errn, "parallel_order '%s': '%.*s' is not one of tp, cp, dp", order, (int)len, p);
            return -1;
        }
        if (seen[dim]) {
            set_err(err, errn, "parallel_order '%s': %s named twice", order, dim_names[dim]);
            return -1;
        }
        seen[dim] = true;
        out[n++] = dim;
        if (!dash) break;
        p = dash + 1;
    }
    /* dims left out go last (slowest); vb_layout_init insists they have size 1 */
    *named = 0;
    for (int d = 0; d < VB_NDIMS; d++) {
        if (seen[d])
            *named |= 1 << d;
        else
            out[n++] = d;
    }
    return 0;
}

int vb_layout_parse_order(const char *order, int out[VB_NDIMS], char *err, size_t errn) {
    int named;
    return parse_order(order, out, &named, err, errn);
}

int vb_layout_init(vb_layout *l, int world, int tp, int cp, const char *order, char *err, size_t errn) {
    memset(l, 0, sizeof *l);
    if (world < 1) {
        set_err(err, errn, "world size %d: must be >= 1", world);
        return -1;
    }
    if (tp < 1 || cp < 1) {
        set_err(err, errn, "tensor_parallel %d, context_parallel %d: both must be >= 1", tp, cp);
        return -1;
    }
    if (world % (tp * cp) != 0) {
        set_err(err, errn,
                "world size %d is not divisible by tensor_parallel %d x context_parallel %d = %d",
                world, tp, cp, tp * cp);
        return -1;
    }
    int ord[VB_NDIMS], named;
    if (parse_order(order, ord, &named, err, errn) != 0) return -1;
    l->world = world;
    l->tp = tp;
    l->cp = cp;
    l->dp = world / (tp * cp);
    l->size[VB_DIM_TP] = l->tp;
    l->size[VB_DIM_CP] = l->cp;
    l->size[VB_DIM_DP] = l->dp;

    /* An omitted dim of size > 1 would silently get the slowest position; the
     * user asked for a specific placement, so make them name it. */
    const char *o = (order && order[0]) ? order : "tp-cp-dp";
    for (int d = 0; d < VB_NDIMS; d++) {
        if (l->size[d] > 1 && !(named & (1 << d))) {
            set_err(err, errn, "parallel_order '%s' is not a permutation of tp, cp, dp: it omits %s but %s is %d",
                    o, dim_names[d], dim_keys[d], l->size[d]);
            memset(l, 0, sizeof *l);
            return -1;
        }
    }
    int stride = 1;
    for (int i = 0; i < VB_NDIMS; i++) {
        l->order[i] = ord[i];
        l->stride[ord[i]] = stride;
        stride *= l->size[ord[i]];
    }
    return 0;
}

static void coords_of(const vb_layout *l, int rank, int c[VB_NDIMS]) {
    for (int d = 0; d < VB_NDIMS; d++) c[d] = (rank / l->stride[d]) % l->size[d];
}

void vb_layout_coords(const vb_layout *l, int rank, int *tp_rank, int *cp_rank, int *dp_rank) {
    int c[VB_NDIMS];
    coords_of(l, rank, c);
    if (tp_rank) *tp_rank = c[VB_DIM_TP];
    if (cp_rank) *cp_rank = c[VB_DIM_CP];
    if (dp_rank) *dp_rank = c[VB_DIM_DP];
}

int vb_layout_rank(const vb_layout *l, int tp_rank, int cp_rank, int dp_rank) {
    return tp_rank * l->stride[VB_DIM_TP] + cp_rank * l->stride[VB_DIM_CP] + dp_rank * l->stride[VB_DIM_DP];
}

static bool in_kind(vb_group_kind kind, int dim) { return ((int)kind & (1 << dim)) != 0; }

int vb_layout_group_size(const vb_layout *l, vb_group_kind kind) {
    int n = 1;
    for (int d = 0; d < VB_NDIMS; d++)
        if (in_kind(kind, d)) n *= l->size[d];
    return n;
}

/* Mixed-radix number of rank's coordinates over the dims selected by `inside`
 * (true: dims in the kind; false: dims outside it), in parallel_order. */
static int mixed_radix(const vb_layout *l, int rank, vb_group_kind kind, bool inside) {
    int c[VB_NDIMS];
    coords_of(l, rank, c);
    int idx = 0, radix = 1;
    for (int i = 0; i < VB_NDIMS; i++) {
        int d = l->order[i];
        if (in_kind(kind, d) != inside) continue;
        idx += c[d] * radix;
        radix *= l->size[d];
    }
    return idx;
}

int vb_layout_group_rank(const vb_layout *l, int rank, vb_group_kind kind) {
    return mixed_radix(l, rank, kind, true);
}

int vb_layout_group_index(const vb_layout *l, int rank, vb_group_kind kind) {
    return mixed_radix(l, rank, kind, false);
}

int vb_layout_group(const vb_layout *l, int rank, vb_group_kind kind, int *ranks_out) {
    int c[VB_NDIMS];
    coords_of(l, rank, c);
    /* the part of the rank fixed by the dims outside the group */
    int base = 0;
    for (int d = 0; d < VB_NDIMS; d++)
        if (!in_kind(kind, d)) base += c[d] * l->stride[d];
    int n = vb_layout_group_size(l, kind);
    for (int local = 0; local < n; local++) {
        /* decompose the group-local rank over the kind's dims, fastest first */
        int rest = local, r = base;
        for (int i = 0; i < VB_NDIMS; i++) {
            int d = l->order[i];
            if (!in_kind(kind, d)) continue;
            r += (rest % l->size[d]) * l->stride[d];
            rest /= l->size[d];
        }
        ranks_out[local] = r;
    }
    return n;
}

bool vb_layout_equivalent(const vb_layout *a, const vb_layout *b) {
    if (a->world != b->world) return false;
    for (int d = 0; d < VB_NDIMS; d++) {
        if (a->size[d] != b->size[d]) return false;
        /* a size-1 dim's stride never multiplies a non-zero coordinate */
        if (a->size[d] > 1 && a->stride[d] != b->stride[d]) return false;
    }
    return true;
}

void vb_layout_order_string(const vb_layout *l, char *buf, size_t n) {
    snprintf(buf, n, "%s-%s-%s", dim_names[l->order[0]], dim_names[l->order[1]], dim_names[l->order[2]]);
}

const char *vb_group_kind_name(vb_group_kind kind) {
    switch (kind) {
    case VB_GROUP_TP: return "tp";
    case VB_GROUP_CP: return "cp";
    case VB_GROUP_DP: return "dp";
    case VB_GROUP_TP_CP: return "tp-cp";
    case VB_GROUP_TP_DP: return "tp-dp";
    case VB_GROUP_CP_DP: return "cp-dp";
    case VB_GROUP_WORLD: return "world";
    }
    return "?";
}
