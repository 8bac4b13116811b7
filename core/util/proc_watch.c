/* proc_watch.c: watching the process that started this one (proc_watch.h). */
#include "core/util/proc_watch.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/util/common.h"

static void host_name(char *buf, size_t n) {
    if (gethostname(buf, n - 1) != 0) snprintf(buf, n, "?");
    buf[n - 1] = '\0';
}

void vb_proc_token(char *buf, size_t n) {
    char host[256];
    host_name(host, sizeof host);
    snprintf(buf, n, "%d:%llu:%s", (int)getpid(), vb_proc_start_time(getpid()), host);
}

typedef struct {
    pid_t pid;
    unsigned long long start;
    char host[256];
} token;

static bool parse_token(const char *s, token *t) {
    char *end;
    long pid = strtol(s, &end, 10);
    if (end == s || *end != ':' || pid <= 0) return false;
    const char *q = end + 1;
    t->start = strtoull(q, &end, 10);
    if (end == q || *end != ':' || !end[1]) return false;
    t->pid = (pid_t)pid;
    snprintf(t->host, sizeof t->host, "%s", end + 1);
    return true;
}

static bool same_host(const token *t) {
    char host[256];
    host_name(host, sizeof host);
    return strcmp(host, t->host) == 0;
}

static bool alive(const token *t) {
    if (kill(t->pid, 0) != 0 && errno == ESRCH) return false;
    unsigned long long now = vb_proc_start_time(t->pid);
    return now != 0 && now == t->start; /* another process under the same pid is not it */
}

typedef struct {
    token t;
    char text[320];
    void (*gone)(const char *token);
} watch;

static void *watch_main(void *arg) {
    watch *w = arg;
    const struct timespec half = {0, 500 * 1000 * 1000};
    while (alive(&w->t)) nanosleep(&half, NULL);
    w->gone(w->text);
    free(w);
    return NULL;
}

bool vb_proc_watch_env(const char *env, void (*gone)(const char *token)) {
    const char *v = getenv(env);
    if (!v || !*v) return false;
    watch *w = calloc(1, sizeof *w);
    if (!w) return false;
    if (!parse_token(v, &w->t) || !same_host(&w->t)) {
        free(w);
        return false;
    }
    snprintf(w->text, sizeof w->text, "%s", v);
    w->gone = gone;
    pthread_t th;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &a, watch_main, w);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        free(w);
        return false;
    }
    return true;
}

/* A /proc/<pid>/stat line's state, process group and start time (fields
 * 3, 5 and 22): the command name (field 2) is in parentheses and may hold
 * blanks and ')', so fields are counted from the last ')'. */
static bool stat_fields(const char *buf, char *state, int *pgrp, unsigned long long *start) {
    const char *p = strrchr(buf, ')');
    int ppid;
    if (!p || sscanf(p + 1, " %c %d %d", state, &ppid, pgrp) != 3) return false;
    p++;
    for (int field = 3; field < 22 && *p; field++) {
        while (*p == ' ') p++;
        while (*p && *p != ' ') p++;
    }
    *start = strtoull(p, NULL, 10);
    return true;
}

unsigned long long vb_proc_start_time(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    char state;
    int pgrp;
    unsigned long long start;
    return stat_fields(buf, &state, &pgrp, &start) ? start : 0;
}

/* Whether /proc lists a process of group pgid, started no earlier than
 * min_start, that is not a zombie: 1 yes, 0 no, -1 /proc cannot be read. A
 * member that has exited but is not yet reaped (a rank orphaned when its
 * launcher died, waiting for init) still answers kill(-pgid, 0), and runs
 * nothing. */
static int pgroup_has_live_member(pid_t pgid, unsigned long long min_start) {
    DIR *d = opendir("/proc");
    if (!d) return -1;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%.20s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* it ended meanwhile */
        const size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char state;
        int pgrp;
        unsigned long long start;
        if (stat_fields(buf, &state, &pgrp, &start) && pgrp == pgid && state != 'Z' && state != 'X' &&
            start >= min_start)
            found = 1;
    }
    closedir(d);
    return found;
}

bool vb_pgroup_alive(pid_t pgid) {
    if (pgid <= 0 || !(kill(-pgid, 0) == 0 || errno == EPERM)) return false;
    return pgroup_has_live_member(pgid, 0) != 0; /* without /proc: kill's answer */
}

bool vb_pgroup_alive_since(pid_t pgid, unsigned long long leader_start) {
    if (!vb_pgroup_alive(pgid)) return false;
    if (leader_start == 0) return true;
    /* a process under the leader's id: the leader itself only if it started
     * then (Linux gives a group's id to no new process while the group
     * lives, so another one there means the group ended) */
    unsigned long long now = vb_proc_start_time(pgid);
    if (now != 0) return now == leader_start;
    /* the leader is gone: its members were all started after it */
    return pgroup_has_live_member(pgid, leader_start) != 0;
}

void vb_boot_id(char *buf, size_t n) {
    buf[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return;
    if (!fgets(buf, (int)n, f)) buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}
