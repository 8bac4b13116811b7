/* strtab.h: a string interner. Each distinct string gets one copy and a
 * dense index, 0, 1, 2, ... in order of first appearance, so callers keep
 * whatever they attach to a name in a plain array beside it.
 *
 * Lookup is open addressing on an FNV-1a hash, the slot table a power of two
 * kept at most half full. No CUDA, no locks: callers serialize.
 */
#ifndef VB_STRTAB_H
#define VB_STRTAB_H

#include <stddef.h>

typedef struct vb_strtab vb_strtab;

/* NULL when out of memory. */
vb_strtab *vb_strtab_create(void);
void vb_strtab_destroy(vb_strtab *t);
/* Forgets every string (indices start again from 0); keeps the slot table. */
void vb_strtab_clear(vb_strtab *t);

/* The index of s, copied in when new (then equal to the count before the
 * call); -1 when out of memory, with the table unchanged. */
int vb_strtab_intern(vb_strtab *t, const char *s);
/* The string of index i (0 <= i < count), valid until clear or destroy. */
const char *vb_strtab_str(const vb_strtab *t, int i);
size_t vb_strtab_count(const vb_strtab *t);

#endif
