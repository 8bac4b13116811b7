/* map_guard.h: reading a file through a memory mapping without dying of
 * SIGBUS when the file shrinks under it.
 *
 * A page of a mapping past the file's current end raises SIGBUS when
 * touched (a dataset file truncated or rewritten while a run reads it).
 * A read wrapped in a guard turns that into an error return on the thread
 * that touched the page, so the caller can exit with one line naming the
 * file, as a failed pread would:
 *
 *     sigjmp_buf jb;
 *     if (sigsetjmp(jb, 1) != 0) vb_die_input("%s: ... (truncated while in use?)", path);
 *     vb_map_guard_arm(&jb);
 *     ... read the mapping (no locks taken, nothing allocated) ...
 *     vb_map_guard_disarm();
 *
 * The handler (installed by vb_map_guard_install) jumps back only on
 * a thread that has armed its guard; any other SIGBUS goes to the handler
 * that was there before (restored, and the faulting access runs again), so
 * MPI's or a sanitizer's reports are kept. Local variables changed between
 * sigsetjmp and the jump are indeterminate after it: read only what was set
 * before.
 */
#ifndef VB_MAP_GUARD_H
#define VB_MAP_GUARD_H

#include <setjmp.h>

/* Installs the SIGBUS handler, unless it is installed already (call it
 * before each use of mappings: a handler another library installed since
 * is replaced again, and becomes the one unguarded faults go to).
 * Thread-safe. */
void vb_map_guard_install(void);
/* Arms this thread's guard: a SIGBUS on this thread jumps to jb, with
 * sigsetjmp returning 1. jb must stay in scope until disarmed. */
void vb_map_guard_arm(sigjmp_buf *jb);
void vb_map_guard_disarm(void);

#endif
