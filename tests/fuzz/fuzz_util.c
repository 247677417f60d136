/* fuzz_util.c: helpers shared by the fuzz harnesses (see fuzz_util.h). */
#include "fuzz_util.h"

#include <fcntl.h>
#include <stdio.h>

#include "runtime_log.h"

void fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n", file, line, what);
    abort();
}

void fuzz_quiet_logs(void)
{
    const char *v = getenv("FUZZ_VERBOSE");
    if (v == NULL || strcmp(v, "1") != 0) tp_log_set_level((tp_log_level_t)-1);
}

char *fuzz_strdup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL) return NULL;
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

int fuzz_socketpair(int fds[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) return -1;
    return 0;
}

void fuzz_feed(int fd, const uint8_t *data, size_t size, size_t *off)
{
    while (*off < size) {
        ssize_t n = send(fd, data + *off, size - *off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return; /* full (or the reader closed): the caller reads, then feeds again */
        *off += (size_t)n;
    }
    shutdown(fd, SHUT_WR);
}
