/* gpu_activity.c: GPU activities kept for the timeline (gpu_activity.h). */
#include "core/prof/gpu_activity.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/util/strtab.h"
#include "core/prof/timeline.h"

/* what the timeline shows for one interned name */
typedef struct {
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
    vb_strtab *names;
    gact_name *shown; /* parallel to names' indices */
    size_t shown_cap;
};

vb_gacts *vb_gacts_create(size_t max_records) {
    vb_gacts *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->max = max_records;
    a->names = vb_strtab_create();
    if (!a->names) {
        free(a);
        return NULL;
    }
    return a;
}

void vb_gacts_destroy(vb_gacts *a) {
    if (!a) return;
    for (size_t i = 0; i < vb_strtab_count(a->names); i++) free(a->shown[i].display);
    vb_strtab_destroy(a->names);
    free(a->shown);
    free(a->rec);
    free(a);
}

/* index of name, interned when new; -1 when out of memory */
static int name_index(vb_gacts *a, const char *name) {
    if (vb_strtab_count(a->names) == a->shown_cap) {
        size_t nc = a->shown_cap ? 2 * a->shown_cap : 32;
        gact_name *ns = realloc(a->shown, nc * sizeof *ns);
        if (!ns) return -1;
        a->shown = ns;
        a->shown_cap = nc;
    }
    const size_t before = vb_strtab_count(a->names);
    int idx = vb_strtab_intern(a->names, name);
    if (idx >= 0 && (size_t)idx == before) a->shown[idx] = (gact_name){NULL, false};
    return idx;
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
    else if (!strncmp(name, "_Z", 2)) { /* still mangled (no demangler): _Z<length><name>... */
        const char *p = name + 2;
        while (*p >= '0' && *p <= '9') p++;
        if (p > name + 2) name = p;
    }
    return strncasecmp(name, "nccl", 4) == 0;
}

long vb_gacts_to_timeline(vb_gacts *a, struct vb_tlrec *t, int64_t offset_ns, char *(*display)(const char *name),
                          long *dropped) {
    long placed = 0, lost = 0;
    for (size_t i = 0; i < a->n; i++) {
        const gact_rec *r = &a->rec[i];
        gact_name *nm = &a->shown[r->name];
        const char *name = vb_strtab_str(a->names, r->name);
        if (display && !nm->displayed && r->type == VB_GACT_KERNEL) {
            nm->display = display(name);
            nm->displayed = true;
        }
        const char *shown = nm->display ? nm->display : name;
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
