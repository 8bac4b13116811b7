/* proc_watch.h: a process that must not outlive the one that started it,
 * and a process group that must not be started twice.
 *
 * A sweep puts vb_proc_token() of itself (pid, start time, host) into each
 * run's environment as VB_SWEEP_PROCESS_ENV. Every rank of the run on that
 * host calls vb_proc_watch_env(): a thread checks twice a second whether
 * that process still exists (and is still the same process: its pid could
 * since name another) and calls `gone` once when it does not. So a sweep
 * killed with SIGKILL, which cannot stop its run itself, still takes the run
 * down with it, whatever its launcher does with the signals it gets.
 */
#ifndef VB_PROC_WATCH_H
#define VB_PROC_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define VB_SWEEP_PROCESS_ENV "VB_SWEEP_PROCESS"

/* When process pid started, in clock ticks since boot (/proc/<pid>/stat);
 * 0 when it cannot be read (no such process). */
unsigned long long vb_proc_start_time(pid_t pid);

/* "<pid>:<start time>:<host>" of this process into buf (n bytes). */
void vb_proc_token(char *buf, size_t n);

/* Watches the process named by the environment variable `env` (a token)
 * when it is set and names this host: calls gone() once, from a watch
 * thread, when that process no longer exists. Returns true when watching. */
bool vb_proc_watch_env(const char *env, void (*gone)(const char *token));

/* True while any process of process group pgid exists (EPERM counts: it
 * exists, owned by someone else) and is not a zombie: an exited member that
 * its new parent has not reaped yet runs nothing. */
bool vb_pgroup_alive(pid_t pgid);

/* vb_pgroup_alive for the group a process that started at leader_start
 * (vb_proc_start_time, recorded when it started) leads: false once the id
 * names another group, whose leader started later. leader_start 0: the
 * group of that id, whoever leads it. */
bool vb_pgroup_alive_since(pid_t pgid, unsigned long long leader_start);

/* This boot's id (/proc/sys/kernel/random/boot_id), "" when unknown: a
 * recorded pid means nothing after a reboot. */
void vb_boot_id(char *buf, size_t n);

#endif
