/* runtime_proc.h: one reader of /proc/PID/stat for tprun and libtp (how a process is, or how it ended). */
#ifndef RUNTIME_PROC_H
#define RUNTIME_PROC_H

#include <stdint.h>
#include <sys/types.h>

#define TP_PROC_PF_EXITING 0x4u /* flags: the process is inside exit(), its fds maybe closed already */

typedef struct tp_proc_stat {
    char state;     /* 'R', 'S', 'Z' (a zombie: exit_code holds how it ended) ... */
    unsigned flags; /* the kernel's PF_* bits */
    int exit_code;  /* as waitpid reports it; -1 when the kernel gives none */
    char name[16];  /* its command, or the name its thread was given (PR_SET_NAME) */
    int64_t cpu_ns; /* CPU time it used, user and system (to the clock tick) */
} tp_proc_stat_t;

/* 0 with *out filled, or -1 when the process is gone (reaped) or its stat unreadable. */
int tp_proc_stat(pid_t pid, tp_proc_stat_t *out);
/* The same for thread tid of process pid. */
int tp_proc_task_stat(pid_t pid, pid_t tid, tp_proc_stat_t *out);

#endif
