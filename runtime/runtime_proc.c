/* runtime_proc.c: /proc/PID/stat, read once into the fields tprun and the fate thread use. */
#include "runtime_proc.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tp_proc_stat(pid_t pid, tp_proc_stat_t *out)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (p == NULL || p[1] != ' ' || p[2] == '\0') return -1;
    int ppid, pgrp, session, tty, tpgid;
    if (sscanf(p + 1, " %c %d %d %d %d %d %u", &out->state, &ppid, &pgrp, &session, &tty, &tpgid, &out->flags) != 7)
        return -1;
    out->exit_code = -1;
    int field = 2; /* after the command name: field 3 is the state, 52 the exit code */
    char *save = NULL;
    for (char *tok = strtok_r(p + 1, " ", &save); tok != NULL; tok = strtok_r(NULL, " ", &save))
        if (++field == 52) out->exit_code = atoi(tok);
    return 0;
}
