/*
 * runtime_fate_silence.c: what a peer's silence means. Off this kernel, or before its fate started, the limit
 * alone decides. On this kernel its fate thread's /proc entry tells a stopped or hung peer (named at the heartbeat
 * timeout, as before) from one whose fate thread is runnable and waits for a CPU: 256 ranks on 2 CPUs give rank 0's
 * fate thread, which serves every peer, about 1/128 of a CPU, and one heartbeat round's 8 ms of work then takes it
 * over 1 s. Such a peer is not failed; its silence is bounded by TP_BOOT_TIMEOUT instead, and by the CPU it gets:
 * a fate thread that got a heartbeat interval's worth of CPU and still sent nothing spins, and is named.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_fate_internal.h"
#include "runtime_log.h"
#include "runtime_proc.h"

/* The thread of process pid named FATE_THREAD_NAME, 0 when there is none (yet). */
static pid_t find_fate_thread(pid_t pid)
{
    char path[48];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (d == NULL) return 0;
    pid_t found = 0;
    tp_proc_stat_t ts;
    for (struct dirent *e; found == 0 && (e = readdir(d)) != NULL;) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid > 0 && tp_proc_task_stat(pid, tid, &ts) == 0 && strcmp(ts.name, FATE_THREAD_NAME) == 0) found = tid;
    }
    closedir(d);
    return found;
}

/*
 * How peer r's fate thread is: 0 with *ts filled, -1 when that cannot be read (another kernel, or gone). While the
 * thread is not there, its main thread is read: that is in tp_fate_start, between this rank's first heartbeat and
 * the thread's creation (at 256 ranks on 2 CPUs it was starved there for over 1 s).
 */
static int fate_thread_stat(int r, pid_t *tid, tp_proc_stat_t *ts)
{
    fate_peer_t *p = &tp_fate.peers[r];
    pid_t pid = tp_fate.world->peers[r].pid;
    if (!p->local) return -1;
    if (p->fate_tid > 0 && (tp_proc_task_stat(pid, p->fate_tid, ts) != 0 || strcmp(ts->name, FATE_THREAD_NAME) != 0))
        p->fate_tid = 0; /* it ended: its tid may be another thread's now */
    if (p->fate_tid == 0) p->fate_tid = find_fate_thread(pid);
    *tid = p->fate_tid > 0 ? p->fate_tid : pid;
    return tp_proc_task_stat(pid, *tid, ts);
}

int64_t tp_fate_silence(int r, int64_t now, char *reason, size_t len)
{
    fate_peer_t *p = &tp_fate.peers[r];
    double silent = (double)(now - p->last_rx) / 1e9;
    if (!p->live) {
        snprintf(
            reason, len,
            "sent nothing for %g s after the bootstrap (its fate never started: stuck in tp_init; TP_BOOT_TIMEOUT)",
            (double)tp_fate.boot_timeout_ns / 1e9);
        return 0;
    }
    pid_t tid;
    tp_proc_stat_t ts;
    if (fate_thread_stat(r, &tid, &ts) != 0 || ts.state != 'R') { /* stopped (T, t), or asleep (S, D) and silent */
        snprintf(reason, len, "sent nothing for %g s (stopped or hung; TP_HEARTBEAT_TIMEOUT)",
                 (double)tp_fate.timeout_ns / 1e9);
        return 0;
    }
    if (p->wait_tid != tid) { /* a wait for a CPU starts here: the CPU it gets from now on is counted */
        p->wait_tid = tid;
        p->wait_cpu = ts.cpu_ns;
        tp_log(TP_LOG_DEBUG, "fate",
               "peer rank %d sent nothing for %.2f s, but its thread %d (%s) is runnable: it waits for a CPU, "
               "judged against TP_BOOT_TIMEOUT",
               r, silent, (int)tid, ts.name);
    }
    int64_t ran = ts.cpu_ns - p->wait_cpu;
    if (ran >= tp_fate.interval_ns) {
        snprintf(reason, len,
                 "sent nothing for %.2f s although its fate thread ran for %.2f s of CPU meanwhile (hung in a loop; "
                 "TP_HEARTBEAT_TIMEOUT)",
                 silent, (double)ran / 1e9);
        return 0;
    }
    if (now - p->last_rx > tp_fate.boot_timeout_ns) {
        snprintf(reason, len,
                 "sent nothing for %g s while its fate thread waited for a CPU (an overloaded host; TP_BOOT_TIMEOUT)",
                 (double)tp_fate.boot_timeout_ns / 1e9);
        return 0;
    }
    return now + tp_fate.interval_ns; /* it may get the CPU, stop or spin meanwhile: look again */
}
