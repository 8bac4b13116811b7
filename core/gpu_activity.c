/* gpu_activity.c: GPU activities kept for the timeline (gpu_activity.h). */
#include "core/gpu_activity.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/timeline.h"

typedef struct {
    char *name;    /* as given */
    char *display; /* display(name), or NULL: show name */
    bool displayed;
} gact_name;

typedef struct {
    uint64_t start, end;
    double bytes;
    uint32_t stream;
    int name;      /* index into names */
    unsigned char type;
} gact_rec;

struct vb_gacts {
    gact_rec *rec;
    size_t n, cap, max;
    gact_name *names;
    size_t nnames, names_cap;
    int *slot; /* open addressing over names: index, -1 empty; nslots a power of two, at most half full */
    size_t nslots;
};

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

vb_gacts *vb_gacts_create(size_t max_records) {
    vb_gacts *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->max = max_records;
    a->nslots = 64;
    a->slot = malloc(a->nslots * sizeof *a->slot);
    if (!a->slot) {
        free(a);
        return NULL;
    }
    memset(a->slot, 0xff, a->nslots * sizeof *a->slot);
    return a;
}

void vb_gacts_destroy(vb_gacts *a) {
    if (!a) return;
    for (size_t i = 0; i < a->nnames; i++) {
        free(a->names[i].name);
        free(a->names[i].display);
    }
    free(a->names);
    free(a->slot);
    free(a->rec);
    free(a);
}

static int grow_slots(vb_gacts *a) {
    size_t ns = a->nslots * 2;
    int *s = malloc(ns * sizeof *s);
    if (!s) return -1;
    memset(s, 0xff, ns * sizeof *s);
    for (size_t i = 0; i < a->nnames; i++) {
        size_t k = (size_t)hash_name(a->names[i].name) & (ns - 1);
        while (s[k] >= 0) k = (k + 1) & (ns - 1);
        s[k] = (int)i;
    }
    free(a->slot);
    a->slot = s;
    a->nslots = ns;
    return 0;
}

/* index of name, copied in when new; -1 when out of memory */
static int name_index(vb_gacts *a, const char *name) {
    size_t k = (size_t)hash_name(name) & (a->nslots - 1);
    while (a->slot[k] >= 0) {
        if (strcmp(a->names[a->slot[k]].name, name) == 0) return a->slot[k];
        k = (k + 1) & (a->nslots - 1);
    }
    /* the table must keep a free slot for probes to end */
    if (2 * (a->nnames + 1) > a->nslots) {
        if (grow_slots(a) != 0) return -1;
        return name_index(a, name);
    }
    if (a->nnames == a->names_cap) {
        size_t nc = a->names_cap ? 2 * a->names_cap : 32;
        gact_name *nn = realloc(a->names, nc * sizeof *nn);
        if (!nn) return -1;
        a->names = nn;
        a->names_cap = nc;
    }
    char *copy = strdup(name);
    if (!copy) return -1;
    a->names[a->nnames] = (gact_name){copy, NULL, false};
    a->slot[k] = (int)a->nnames;
    return (int)a->nnames++;
}

int vb_gacts_add(vb_gacts *a, vb_gact_type type, const char *name, uint32_t stream, uint64_t start_ns,
                 uint64_t end_ns, double bytes) {
    if (end_ns < start_ns || (start_ns == 0 && end_ns == 0)) return 1;
    if (a->n == a->max) return -1;
    if (a->n == a->cap) {
        size_t nc = a->cap ? 2 * a->cap : 4096;
        if (nc > a->max) nc = a->max;
        gact_rec *nr = realloc(a->rec, nc * sizeof *nr);
        if (!nr) return -1;
        a->rec = nr;
        a->cap = nc;
    }
    int idx = name_index(a, name ? name : "");
    if (idx < 0) return -1;
    a->rec[a->n++] = (gact_rec){start_ns, end_ns, bytes, stream, idx, (unsigned char)type};
    return 0;
}

size_t vb_gacts_count(const vb_gacts *a) { return a ? a->n : 0; }

bool vb_gpu_name_is_nccl(const char *name) {
    if (!strncmp(name, "void ", 5)) name += 5;
    return strncasecmp(name, "nccl", 4) == 0;
}

long vb_gacts_to_timeline(vb_gacts *a, struct vb_tlrec *t, int64_t offset_ns, char *(*display)(const char *name),
                          long *dropped) {
    long placed = 0, lost = 0;
    for (size_t i = 0; i < a->n; i++) {
        const gact_rec *r = &a->rec[i];
        gact_name *nm = &a->names[r->name];
        if (display && !nm->displayed && r->type == VB_GACT_KERNEL) {
            nm->display = display(nm->name);
            nm->displayed = true;
        }
        const char *shown = nm->display ? nm->display : nm->name;
        vb_tl_kind kind = r->type != VB_GACT_KERNEL   ? VB_TLK_MEMCPY
                          : vb_gpu_name_is_nccl(shown) ? VB_TLK_COMM
                                                       : VB_TLK_COMPUTE;
        /* integer nanoseconds until the end: a double of CUPTI's epoch-based
         * clock would round to a quarter microsecond */
        double start = 1e-9 * (double)((int64_t)r->start + offset_ns);
        double dur = 1e-9 * (double)(r->end - r->start);
        int rc = vb_tlrec_add_stream(t, r->stream, kind, shown, start, dur, r->bytes);
        if (rc > 0) placed++;
        if (rc < 0) lost++;
    }
    a->n = 0;
    if (dropped) *dropped = lost;
    return placed;
}
