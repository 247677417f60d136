/* tcp_raw.h: a test's own rank 0 listener for the TCP transport: accepts one connection and runs the handshake. */
#ifndef TCP_RAW_H
#define TCP_RAW_H

#include <poll.h>
#include <sys/socket.h>

#include <tp_provider.h>

/* The next connection on lfd once it has proved key (within 20 s): its fd, the rank it claims in *rank; -1 if not. */
static inline int tcp_raw_accept(int lfd, const uint8_t key[TP_JOB_KEY_BYTES], int *rank)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, 20000) != 1) return -1;
    int fd = accept(lfd, NULL, NULL);
    tp_auth_accept_t a;
    tp_auth_accept_init(&a);
    tp_auth_result_t r = TP_AUTH_MORE;
    char why[160];
    while (fd >= 0 && r == TP_AUTH_MORE) {
        struct pollfd q = {.fd = fd, .events = POLLIN};
        if (poll(&q, 1, 20000) != 1) return -1;
        r = tp_auth_accept_step(&a, fd, key, TP_CONN_TCP, why, sizeof(why));
    }
    if (r != TP_AUTH_DONE) return -1;
    *rank = a.rank;
    return fd;
}

#endif
