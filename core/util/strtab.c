/* strtab.c: the string interner (strtab.h). */
#include "core/util/strtab.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct vb_strtab {
    char **str;   /* str[i]: the copy of index i */
    size_t n, cap;
    int *slot;    /* index, or -1 empty; nslots a power of two, at most half full */
    size_t nslots;
};

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

vb_strtab *vb_strtab_create(void) {
    vb_strtab *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->nslots = 64;
    t->slot = malloc(t->nslots * sizeof *t->slot);
    if (!t->slot) {
        free(t);
        return NULL;
    }
    memset(t->slot, 0xff, t->nslots * sizeof *t->slot);
    return t;
}

void vb_strtab_clear(vb_strtab *t) {
    for (size_t i = 0; i < t->n; i++) free(t->str[i]);
    t->n = 0;
    memset(t->slot, 0xff, t->nslots * sizeof *t->slot);
}

void vb_strtab_destroy(vb_strtab *t) {
    if (!t) return;
    vb_strtab_clear(t);
    free(t->str);
    free(t->slot);
    free(t);
}

/* Doubles the slot table and places every string again. */
static int grow_slots(vb_strtab *t) {
    size_t ns = t->nslots * 2;
    int *s = malloc(ns * sizeof *s);
    if (!s) return -1;
    memset(s, 0xff, ns * sizeof *s);
    for (size_t i = 0; i < t->n; i++) {
        size_t k = (size_t)hash_str(t->str[i]) & (ns - 1);
        while (s[k] >= 0) k = (k + 1) & (ns - 1);
        s[k] = (int)i;
    }
    free(t->slot);
    t->slot = s;
    t->nslots = ns;
    return 0;
}

int vb_strtab_intern(vb_strtab *t, const char *s) {
    const uint64_t h = hash_str(s);
    size_t k = (size_t)h & (t->nslots - 1);
    while (t->slot[k] >= 0) {
        if (strcmp(t->str[t->slot[k]], s) == 0) return t->slot[k];
        k = (k + 1) & (t->nslots - 1);
    }
    if (t->n >= (size_t)INT32_MAX) return -1;
    /* grow first, so that a probe always ends on a free slot */
    if (2 * (t->n + 1) > t->nslots) {
        if (grow_slots(t) != 0) return -1;
        k = (size_t)h & (t->nslots - 1);
        while (t->slot[k] >= 0) k = (k + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 32;
        char **ns = realloc(t->str, nc * sizeof *ns);
        if (!ns) return -1;
        t->str = ns;
        t->cap = nc;
    }
    char *copy = strdup(s);
    if (!copy) return -1;
    t->str[t->n] = copy;
    t->slot[k] = (int)t->n;
    return (int)t->n++;
}

const char *vb_strtab_str(const vb_strtab *t, int i) { return t->str[i]; }

size_t vb_strtab_count(const vb_strtab *t) { return t->n; }
