/*
 * tcp_congestion: after an all_reduce over TCP, prints the congestion control of each of this rank's connected TCP
 * sockets with a send or receive buffer over 4 MiB (the transport's data connections ask for 4 MiB and the kernel
 * reports twice that; bootstrap and fate connections autotune up to tcp_wmem's 4 MiB), one "rank R fd F ALGO" line
 * each.
 */
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <tp.h>

int main(void)
{
    tp_comm_t *w;
    if (tp_init(NULL, &w) != TP_OK) return fprintf(stderr, "tcp_congestion: tp_init: %s\n", tp_last_error()), 1;
    float x = 1, y = 0;
    if (tp_all_reduce(w, &x, &y, 1, TP_F32, TP_SUM, NULL) != TP_OK)
        return fprintf(stderr, "tcp_congestion: all_reduce: %s\n", tp_last_error()), 1;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) return perror("tcp_congestion: /proc/self/fd"), 1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name), v = 0, type = 0;
        socklen_t len = sizeof(v), tlen = sizeof(type);
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        char algo[32] = "";
        socklen_t alen = sizeof(algo) - 1;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM) continue;
        if (getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 || peer.ss_family != AF_INET) continue;
        int sb = 0, rb = 0;
        socklen_t sl = sizeof(sb), rl = sizeof(rb);
        if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len) != 0 || !v) continue;
        if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, &sl) != 0 ||
            getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rb, &rl) != 0)
            continue;
        if (sb <= (4 << 20) && rb <= (4 << 20)) continue; /* autotuning stops at 4 MiB here */
        if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, algo, &alen) != 0) continue;
        printf("rank %d fd %d %s\n", tp_comm_rank(w), fd, algo);
    }
    closedir(d);
    return tp_finalize(w) == TP_OK ? 0 : 1;
}
