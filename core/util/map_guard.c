/* map_guard.c: SIGBUS from a shrunken file mapping as an error return
 * (map_guard.h). */
#include "core/util/map_guard.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>

#include "core/util/common.h"

static _Thread_local sigjmp_buf *tl_jb;
static struct sigaction g_prev;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    sigjmp_buf *jb = tl_jb;
    if (jb) {
        tl_jb = NULL;
        siglongjmp(*jb, 1); /* restores the mask saved by sigsetjmp(jb, 1) */
    }
    /* not a guarded read: the handler before ours takes the fault when the
     * access runs again on return */
    sigaction(SIGBUS, &g_prev, NULL);
}

void vb_map_guard_install(void) {
    pthread_mutex_lock(&g_mu);
    struct sigaction cur;
    /* ours unless replaced since (a library that installs its own SIGBUS
     * handler later, e.g. a test harness between tests): then ours again,
     * with the newer one as the one to hand unguarded faults to */
    if (sigaction(SIGBUS, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_sigbus) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, &g_prev) != 0)
            vb_die_internal("cannot install the SIGBUS handler for file mappings");
    }
    pthread_mutex_unlock(&g_mu);
}

void vb_map_guard_arm(sigjmp_buf *jb) { tl_jb = jb; }

void vb_map_guard_disarm(void) { tl_jb = NULL; }
