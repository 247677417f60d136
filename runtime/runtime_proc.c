/* runtime_proc.c: /proc/PID/stat (or a thread's), read once into the fields tprun and the fate thread use. */
#include "runtime_proc.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int read_stat(const char *path, tp_proc_stat_t *out)
{
    char buf[1024];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *name = strchr(buf, '('), *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (name == NULL || p == NULL || p < name || p[1] != ' ' || p[2] == '\0') return -1;
    snprintf(out->name, sizeof(out->name), "%.*s", (int)(p - name - 1), name + 1);
    int ppid, pgrp, session, tty, tpgid;
    if (sscanf(p + 1, " %c %d %d %d %d %d %u", &out->state, &ppid, &pgrp, &session, &tty, &tpgid, &out->flags) != 7)
        return -1;
    out->exit_code = -1;
    unsigned long long ticks = 0;
    /* after the command name: field 3 is the state, 14 and 15 the user and system time, 52 the exit code */
    int field = 2;
    char *save = NULL;
    for (char *tok = strtok_r(p + 1, " ", &save); tok != NULL; tok = strtok_r(NULL, " ", &save)) {
        if (++field == 14 || field == 15) ticks += strtoull(tok, NULL, 10);
        if (field == 52) out->exit_code = atoi(tok);
    }
    long hz = sysconf(_SC_CLK_TCK);
    out->cpu_ns = (int64_t)ticks * (1000000000 / (hz > 0 ? hz : 100));
    return 0;
}

int tp_proc_stat(pid_t pid, tp_proc_stat_t *out)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    return read_stat(path, out);
}

int tp_proc_task_stat(pid_t pid, pid_t tid, tp_proc_stat_t *out)
{
    char path[80];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    return read_stat(path, out);
}
